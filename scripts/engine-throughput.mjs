#!/usr/bin/env node
// Aggregate decode throughput of the serving engine (src/generation/engine.ts) against one stream:
// S streams submitted at once (random prompts of --prompt tokens, --new tokens each, EOS off), tokens/s
// over the whole run and per step, for each S of --streams. Random-weight model of a known shape.
//
//   node scripts/engine-throughput.mjs [--shape tinyllama|tiny] [--device cuda] [--dtype bfloat16]
//        [--streams 1,16,64] [--prompt 128] [--new 64] [--temperature 0] [--max-batch 64]
import { parseArgs } from 'node:util';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const dist = join(dirname(fileURLToPath(import.meta.url)), '..', 'dist', 'src');
const nbx = await import(join(dist, 'index.js'));
const { Engine } = await import(join(dist, 'generation', 'engine.js'));
const { values: A } = parseArgs({ options: {
  shape: { type: 'string', default: 'tinyllama' }, device: { type: 'string', default: 'cuda' }, dtype: { type: 'string' },
  streams: { type: 'string', default: '1,16,64' }, prompt: { type: 'string', default: '128' }, new: { type: 'string', default: '64' },
  temperature: { type: 'string', default: '0' }, 'max-batch': { type: 'string', default: '64' },
} });
const SHAPES = {
  tinyllama: { hidden_size: 2048, intermediate_size: 5632, num_hidden_layers: 22, num_attention_heads: 32, num_key_value_heads: 4, head_dim: 64, vocab_size: 32000 },
  tiny: { hidden_size: 64, intermediate_size: 128, num_hidden_layers: 2, num_attention_heads: 4, num_key_value_heads: 2, head_dim: 16, vocab_size: 256 },
};
const cfg = { architectures: ['LlamaForCausalLM'], model_type: 'llama', max_position_embeddings: 2048, rms_norm_eps: 1e-5, rope_theta: 10000,
  hidden_act: 'silu', tie_word_embeddings: false, bos_token_id: 1, eos_token_id: 2, ...SHAPES[A.shape] };
const dtype = A.dtype ?? (A.device === 'cpu' ? 'float32' : 'bfloat16');
const model = nbx.models.fromConfig(cfg, { device: A.device, dtype, seed: 0 });
const P = Number(A.prompt), N = Number(A.new), temp = Number(A.temperature);
let seed = 1;
const prompt = () => Array.from({ length: P }, () => 3 + ((seed = (seed * 1103515245 + 12345) >>> 0) % (cfg.vocab_size - 3)));
const engine = new Engine(model, { maxBatch: Number(A['max-batch']), kvBlocks: Math.ceil((P + N) / 16) * Number(A['max-batch']) + 16 });
// warm-up: compile and tune what the steps use (a prompt, decode steps at a few batch sizes)
const tw = performance.now();
await Promise.all(Array.from({ length: 4 }, () => engine.submit({ prompt: prompt(), max_new_tokens: 8, temperature: temp, seed: 1, eos_token_id: [] }).result));
console.log(`engine throughput: ${A.shape} shape, ${dtype} on ${model.device}, prompts ${P}, ${N} new tokens each, temperature ${temp}, decode steps padded to ${engine.padBatch ? engine.maxBatch : 'no'} rows; warm-up ${((performance.now() - tw) / 1000).toFixed(1)} s`);
let single = null;
for (const S of A.streams.split(',').map(Number)) {
  const s0 = engine.stats();
  const t0 = performance.now();
  let first = 0;
  const rs = await Promise.all(Array.from({ length: S }, (_, i) => {
    const st = engine.submit({ prompt: prompt(), max_new_tokens: N, temperature: temp, seed: i, eos_token_id: [] });
    return (async () => { let k = 0; for await (const _ of st) if (++k === 1 && !first) first = performance.now() - t0; return st.result; })();
  }));
  const dt = (performance.now() - t0) / 1000, s1 = engine.stats();
  const tok = rs.reduce((a, r) => a + r.completion_tokens, 0), steps = s1.steps - s0.steps;
  const tps = tok / dt;
  single ??= S === 1 ? tps : null;
  const mem = model.device.type === 'cuda' ? nbx.cuda.memory_stats() : null;
  console.log(`${String(S).padStart(3)} streams: ${tps.toFixed(1)} tok/s aggregate, ${(1000 * dt / steps).toFixed(2)} ms/step over ${steps} steps, first token ${first.toFixed(0)} ms` +
    (single && S > 1 ? `, ${(tps / single).toFixed(2)}x one stream` : '') +
    (mem ? `; cuda reserved ${(mem.reservedBytes / 2 ** 20).toFixed(0)} MiB, vmm mapped ${((mem.vmmMappedBytes ?? 0) / 2 ** 20).toFixed(0)} MiB of ${((mem.vmmReservedBytes ?? 0) / 2 ** 20).toFixed(0)} reserved` : ''));
}
await engine.close();
model.dispose();
