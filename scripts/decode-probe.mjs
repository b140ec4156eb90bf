#!/usr/bin/env node
// Where a CUDA decode step's time goes: the same random-weight model decoded with the dynamic cache
// (eager steps), with the static cache (CUDA graph replay), and a bare loop of graph replays (the GPU
// time of one step plus one launch), so the host's share and the kernels' share can be told apart.
// Build first (`npm run build`).
//
//   node scripts/decode-probe.mjs [--shape tinyllama|llama3-8b|tiny] [--batch 1] [--prompt 128] [--new 256] [--json FILE]
import { parseArgs } from 'node:util';
import { writeFileSync } from 'node:fs';

const { values } = parseArgs({ options: {
  shape: { type: 'string', default: 'tinyllama' }, batch: { type: 'string', default: '1' }, prompt: { type: 'string', default: '128' },
  new: { type: 'string', default: '256' }, json: { type: 'string' }, device: { type: 'string', default: 'cuda' },
} });
const nbx = await import('../dist/src/index.js');

const SHAPES = {
  tinyllama: { hidden_size: 2048, intermediate_size: 5632, num_hidden_layers: 22, num_attention_heads: 32, num_key_value_heads: 4, vocab_size: 32000, rope_theta: 10000 },
  'llama3-8b': { hidden_size: 4096, intermediate_size: 14336, num_hidden_layers: 32, num_attention_heads: 32, num_key_value_heads: 8, vocab_size: 128256, rope_theta: 500000 },
  tiny: { hidden_size: 64, intermediate_size: 128, num_hidden_layers: 2, num_attention_heads: 4, num_key_value_heads: 2, vocab_size: 256, rope_theta: 10000 },
};
const shape = SHAPES[values.shape];
if (!shape) throw new Error(`--shape: one of ${Object.keys(SHAPES).join(', ')}`);
const B = Number(values.batch), P = Number(values.prompt), N = Number(values.new);
const device = values.device;
const config = { model_type: 'llama', architectures: ['LlamaForCausalLM'], max_position_embeddings: 4096, rms_norm_eps: 1e-5, hidden_act: 'silu', tie_word_embeddings: false, ...shape };
const dtype = device === 'cpu' ? 'float32' : 'bfloat16';
const model = nbx.models.fromConfig(config, { device, dtype, seed: 0 });
let seed = 7;
const prompt = nbx.tensor(Array.from({ length: B }, () => Array.from({ length: P }, () => { seed = (seed * 1103515245 + 12345) % 2 ** 31; return 1 + (seed % (shape.vocab_size - 1)); })), { dtype: 'int64' });
const sync = () => (device === 'cuda' ? nbx.cuda.synchronize() : Promise.resolve());

async function timed(label, opts) {
  const t0 = performance.now();
  let first = 0, steps = 0;
  const streamer = { put: () => { if (steps++ === 1) first = performance.now(); }, end: () => {} };
  const out = await model.generate(prompt, { max_new_tokens: N, do_sample: false, eos_token_id: null, streamer, ...opts });
  await sync();
  const t1 = performance.now();
  out.dispose();
  const decodeTokens = (N - 1) * B;
  const r = { label, ttft_ms: first - t0, decode_tok_s: decodeTokens / ((t1 - first) / 1000), total_s: (t1 - t0) / 1000 };
  console.log(`${label.padEnd(28)} TTFT ${r.ttft_ms.toFixed(1).padStart(8)} ms   decode ${r.decode_tok_s.toFixed(1).padStart(8)} tok/s   total ${r.total_s.toFixed(2)} s`);
  return r;
}

const results = { shape: values.shape, batch: B, prompt: P, new: N, device, runs: [] };
console.log(`decode probe: ${values.shape} b${B} prompt ${P} new ${N} on ${device} (${dtype})`);
for (const impl of ['dynamic', 'static', 'dynamic', 'static']) {
  results.runs.push(await timed(`${impl} (cache_implementation)`, { cache_implementation: impl }));
}
// the kept static decoder: a bare loop of its steps (one host write, one replay, one read of B ids)
if (device === 'cuda') {
  const dec = model.staticDecoder({ batch: B, maxLength: P + N, greedy: true });
  console.log('static decoder:', JSON.stringify(dec.stats()));
  dec.begin(null, P);
  model.forward(prompt.to(device), { cache: dec.cache, logits_to_keep: 1 }).dispose();
  const tokens = new Array(B).fill(1);
  for (let i = 0; i < 3; i++) { const r = dec.step(tokens, new Array(B).fill(P + i)); await r.next.data(); }
  const M = Math.min(200, N - 10);
  let t0 = performance.now();
  for (let i = 0; i < M; i++) { const r = dec.step(tokens, new Array(B).fill(P + 3 + i)); await r.next.data(); }
  const stepRead = (performance.now() - t0) / M;
  dec.begin(null, P);
  model.forward(prompt.to(device), { cache: dec.cache, logits_to_keep: 1 }).dispose();
  t0 = performance.now();
  for (let i = 0; i < M; i++) dec.step(tokens, new Array(B).fill(P + i));
  await sync();
  const stepNoRead = (performance.now() - t0) / M;
  results.replay = { step_with_readback_ms: stepRead, step_pipelined_ms: stepNoRead, stats: dec.stats() };
  console.log(`bare steps: ${stepRead.toFixed(3)} ms with the ids read back each step, ${stepNoRead.toFixed(3)} ms pipelined (GPU-bound): ${(1000 / stepNoRead * B).toFixed(0)} tok/s ceiling`);
  const stats = nbx.cuda.memoryStats();
  results.memory = { reservedBytes: stats.reservedBytes, allocatedBytes: stats.allocatedBytes };
}
if (values.json) writeFileSync(values.json, JSON.stringify(results, null, 2));
model.dispose();
