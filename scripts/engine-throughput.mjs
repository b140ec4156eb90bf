#!/usr/bin/env node
// Aggregate decode throughput of the serving engine (src/generation/engine.ts) against one stream:
// S streams submitted at once (random prompts of --prompt tokens, --new tokens each, EOS off), tokens/s
// over the whole run and per step, for each S of --streams. Random-weight model of a known shape.
//
//   node scripts/engine-throughput.mjs [--shape tinyllama|tiny] [--device cuda] [--dtype bfloat16]
//        [--streams 1,16,64] [--prompt 128] [--new 64] [--temperature 0] [--max-batch 64] [--graphs on,off]
// --graphs: each setting in turn on the same model (on: the engine's steps replayed as CUDA graphs /
// CPU step recordings; off: eager steps). With 1 in --streams, one stream is also measured on an engine
// of max batch 1 (the ratios use the faster single-stream figure, as scripts/load-serve.mjs does).
import { parseArgs } from 'node:util';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const dist = join(dirname(fileURLToPath(import.meta.url)), '..', 'dist', 'src');
const nbx = await import(join(dist, 'index.js'));
const { Engine } = await import(join(dist, 'generation', 'engine.js'));
const { values: A } = parseArgs({ options: {
  shape: { type: 'string', default: 'tinyllama' }, device: { type: 'string', default: 'cuda' }, dtype: { type: 'string' },
  streams: { type: 'string', default: '1,16,64' }, prompt: { type: 'string', default: '128' }, new: { type: 'string', default: '64' },
  temperature: { type: 'string', default: '0' }, 'max-batch': { type: 'string', default: '64' }, graphs: { type: 'string', default: 'on,off' },
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
const maxBatch = Number(A['max-batch']);
const kvBlocks = Math.ceil((P + N) / 16) * maxBatch + 16;
const modes = A.graphs.split(',');
console.log(`engine throughput: ${A.shape} shape, ${dtype} on ${model.device}, prompts ${P}, ${N} new tokens each, temperature ${temp}, max batch ${maxBatch}`);

/** S streams at once on `engine`: aggregate tok/s, ms per step, first token. */
async function measure(engine, S) {
  const s0 = engine.stats(), g0 = engine.graphStats(), h0 = { ...engine.times };
  const t0 = performance.now();
  let first = 0;
  const rs = await Promise.all(Array.from({ length: S }, (_, i) => {
    const st = engine.submit({ prompt: prompt(), max_new_tokens: N, temperature: temp, seed: i, eos_token_id: [] });
    return (async () => { let k = 0; for await (const _ of st) if (++k === 1 && !first) first = performance.now() - t0; return st.result; })();
  }));
  const dt = (performance.now() - t0) / 1000, s1 = engine.stats(), g1 = engine.graphStats(), h1 = engine.times;
  const tok = rs.reduce((a, r) => a + r.completion_tokens, 0), steps = s1.steps - s0.steps;
  const per = (k) => (h1[k] - h0[k]) / steps;
  return { tps: tok / dt, msStep: 1000 * dt / steps, steps, first, replays: g1.replays - g0.replays, captures: g1.captures - g0.captures, eager: g1.eagerSteps - g0.eagerSteps,
    prepare: per('prepare'), wait: per('wait'), emit: per('emit') };
}
async function warm(engine) {
  // compile and tune what the steps use, record the shapes of the run (prompts, then decode past them)
  const tw = performance.now();
  for (const n of [1, 4]) await Promise.all(Array.from({ length: n }, () => engine.submit({ prompt: prompt(), max_new_tokens: Math.min(N, 24), temperature: temp, seed: 1, eos_token_id: [] }).result));
  return (performance.now() - tw) / 1000;
}
const fmt = (S, m, single) => `${String(S).padStart(3)} streams: ${m.tps.toFixed(1)} tok/s aggregate, ${m.msStep.toFixed(2)} ms/step over ${m.steps} steps, first token ${m.first.toFixed(0)} ms` +
  (single && S > 1 ? `, ${(m.tps / single).toFixed(2)}x one stream` : '') + ` (steps: ${m.replays} replayed, ${m.captures} captured, ${m.eager} eager;` +
  ` per step ${m.prepare.toFixed(2)} ms preparing/launching, ${m.wait.toFixed(2)} waiting for the ids, ${m.emit.toFixed(2)} streaming)`;

for (const mode of modes) {
  const graphs = mode === 'on';
  const streams = A.streams.split(',').map(Number);
  // one stream alone on a batch-1 engine too: its steps need not carry maxBatch rows (the serve test's baseline)
  let single = null;
  if (streams.includes(1) && maxBatch > 1) {
    const e1 = new Engine(model, { maxBatch: 1, kvBlocks: Math.ceil((P + N) / 16) + 16, sampling: 'device', mixedSteps: true, graphs });
    const w = await warm(e1);
    const m = await measure(e1, 1);
    single = m.tps;
    console.log(`[graphs ${mode}] max batch 1 engine (${e1.stepTokens} rows a step at most, row buckets ${e1.rowBuckets.join('/')}; warm-up ${w.toFixed(1)} s): ${fmt(1, m, null)}`);
    await e1.close();
  }
  const engine = new Engine(model, { maxBatch, kvBlocks, sampling: 'device', mixedSteps: true, graphs });
  const w = await warm(engine);
  console.log(`[graphs ${mode}] max batch ${maxBatch} engine: ${engine.mixedSteps ? `mixed steps of ${engine.rowBuckets.join('/')} rows` : 'split steps'}, graphs ${engine.graphs ? 'on' : 'off'}; warm-up ${w.toFixed(1)} s`);
  for (const S of streams) {
    const m = await measure(engine, S);
    if (S === 1) single = Math.max(single ?? 0, m.tps);
    const mem = model.device.type === 'cuda' ? nbx.cuda.memory_stats() : null;
    console.log(`[graphs ${mode}] ${fmt(S, m, single)}` +
      (mem ? `; cuda reserved ${(mem.reservedBytes / 2 ** 20).toFixed(0)} MiB, vmm mapped ${((mem.vmmMappedBytes ?? 0) / 2 ** 20).toFixed(0)} MiB` : ''));
  }
  const gs = engine.graphStats();
  if (gs.fallbackReason) console.log(`[graphs ${mode}] graphs fell back to eager steps: ${gs.fallbackReason}`);
  await engine.close();
}
model.dispose();
