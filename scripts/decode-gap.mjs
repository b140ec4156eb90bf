#!/usr/bin/env node
// Where a greedy decode step's time goes between replays of its CUDA graph: the static decoder's steps
// (TinyLlama's shape or another, random weights) queued four ways, each N steps, ms a step:
//   graph      stepFromDevice() N times, nothing read back, one synchronization at the end
//   +ids       the same with each step's ids copied back, none awaited
//   +reads     the same with each step's ids and error word copied back (readNext), none awaited
//   pipelined  generate()'s loop: a step's read queued, the next step queued, then the read awaited
//   serial     each step's ids awaited before the next step is queued
// Build first. node scripts/decode-gap.mjs [--shape tinyllama|llama3-8b|tiny] [--steps 300] [--batch 1]
import { parseArgs } from 'node:util';

const { values } = parseArgs({ options: {
  shape: { type: 'string', default: 'tinyllama' }, steps: { type: 'string', default: '300' }, prompt: { type: 'string', default: '128' }, batch: { type: 'string', default: '1' },
} });
const nbx = await import('../dist/src/index.js');
const SHAPES = {
  tinyllama: { hidden_size: 2048, intermediate_size: 5632, num_hidden_layers: 22, num_attention_heads: 32, num_key_value_heads: 4, vocab_size: 32000 },
  tiny: { hidden_size: 128, intermediate_size: 256, num_hidden_layers: 2, num_attention_heads: 4, num_key_value_heads: 2, vocab_size: 512 },
  'llama3-8b': { hidden_size: 4096, intermediate_size: 14336, num_hidden_layers: 32, num_attention_heads: 32, num_key_value_heads: 8, vocab_size: 128256, rope_theta: 500000 },
};
const config = { model_type: 'llama', max_position_embeddings: 8192, rms_norm_eps: 1e-5, hidden_act: 'silu', tie_word_embeddings: false, ...SHAPES[values.shape] };
const model = nbx.models.fromConfig(config, { device: 'cuda', dtype: 'bfloat16', seed: 0 });
const P = Number(values.prompt), N = Number(values.steps), B = Number(values.batch);
const sync = () => nbx.cuda.synchronize();
const dec = model.staticDecoder({ batch: B, maxLength: P + N + 16, greedy: true, force: true });
dec.begin(null, P);
const prompt = nbx.tensor(Array.from({ length: B }, (_, b) => Array.from({ length: P }, (_, i) => 1 + ((i * 7919 + b * 104729) % (config.vocab_size - 1)))), { dtype: 'int64', device: 'cuda' });
const first = model.forward(prompt, { cache: dec.cache, logits_to_keep: 1 });
const tok = Array.from(await first.view([B, config.vocab_size]).argmax(1).data(), Number);
first.dispose(); prompt.dispose();
let r = dec.step(tok, Array(B).fill(P)); // eager (warm-up)
r = dec.step(Array.from(await r.next.data(), Number), Array(B).fill(P + 1)); // captured (and, auto, both paths timed)
await r.next.data();
const out = {};
// each variant from the same cache position (a step's attention grows with it)
const time = async (name, fn) => {
  dec.begin(null, P); r = dec.step(tok, Array(B).fill(P)); await r.next.data();
  await sync(); const t0 = performance.now(); await fn(); await sync(); out[name] = (performance.now() - t0) / N;
};
await time('graph', async () => { for (let s = 0; s < N; s++) r = dec.stepFromDevice(); });
await time('+ids', async () => { const ps = []; for (let s = 0; s < N; s++) { r = dec.stepFromDevice(); ps.push(r.next.dataStorage()); } await Promise.all(ps); });
await time('+reads', async () => { const ps = []; for (let s = 0; s < N; s++) { r = dec.stepFromDevice(); ps.push(dec.readNext(r.next)); } await Promise.all(ps); });
await time('pipelined', async () => {
  let queued = null;
  for (let s = 0; s < N; s++) {
    const cur = queued ?? dec.stepFromDevice();
    const read = dec.readNext(cur.next);
    queued = s + 1 < N ? dec.stepFromDevice() : null;
    await read;
    await new Promise((res) => setImmediate(res));
  }
});
await time('serial', async () => { for (let s = 0; s < N; s++) { r = dec.stepFromDevice(); await dec.readNext(r.next); } });
console.log(`decode-gap ${values.shape} batch ${B}, ${N} steps each, graph ${JSON.stringify(dec.stats())}: ` + Object.entries(out).map(([k, v]) => `${k} ${(v * 1000).toFixed(1)} µs`).join(', '));
dec.dispose();
