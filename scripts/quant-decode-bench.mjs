#!/usr/bin/env node
// Decode speed of the embedded model on the CPU, float32 weights against quantized ones (nbx.quant's
// quantize_, as `nbx quantize` writes them), in one process with the models interleaved round by
// round (the machine is shared: a figure is the median of the rounds, each model timed in every
// round). Greedy generation of N tokens from a short prompt; tokens per second of the whole call.
//   npm run build && node scripts/quant-decode-bench.mjs [--tokens 64] [--rounds 7]

import { join, dirname } from 'node:path';
import { fileURLToPath } from 'node:url';
import { cpus } from 'node:os';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
const nbx = await import(join(root, 'dist/src/index.js'));
const arg = (k, d) => { const i = process.argv.indexOf(k); return i >= 0 ? Number(process.argv[i + 1]) : d; };
const TOKENS = arg('--tokens', 64), ROUNDS = arg('--rounds', 7);
const MODEL = join(root, 'assets/nbx-kjv');

const variants = [['float32', null], ['int8', { scheme: 'int8' }], ['int4 g64', { scheme: 'int4', group_size: 64 }], ['int4 g32 sym', { scheme: 'int4', group_size: 32, symmetric: true }], ['fp8 e4m3', { scheme: 'fp8_e4m3' }]];
const models = [];
for (const [name, opts] of variants) {
  const m = await nbx.models.load(MODEL, { dtype: 'float32' });
  if (opts) nbx.quant.quantize_(m, opts);
  models.push([name, m]);
}
const ids = nbx.tensor([m0ids()], { dtype: 'int64' });
function m0ids() { return models[0][1].tokenizer.encode('And God said'); }
const times = models.map(() => []);
let reference = null;
for (let r = 0; r < ROUNDS + 1; r++) {
  for (let i = 0; i < models.length; i++) {
    const t0 = performance.now();
    const out = await models[i][1].generate(ids, { max_new_tokens: TOKENS, do_sample: false });
    const dt = performance.now() - t0;
    if (i === 0 && reference === null) reference = out.tolist()[0];
    if (r > 0) times[i].push(TOKENS / (dt / 1000)); // round 0 warms up
    out.dispose();
  }
}
console.log(`# CPU decode, embedded model, ${TOKENS} greedy tokens, median of ${ROUNDS} interleaved rounds; ${cpus()[0].model}, ${cpus().length} cores; ${new Date().toISOString()}`);
const med = (a) => { const s = [...a].sort((x, y) => x - y); return s[s.length >> 1]; };
const f = med(times[0]);
for (let i = 0; i < models.length; i++) {
  const t = med(times[i]);
  console.log(`| ${models[i][0]} | ${t.toFixed(1)} tok/s | ${(t / f).toFixed(2)}× | range ${Math.min(...times[i]).toFixed(1)}–${Math.max(...times[i]).toFixed(1)} |`);
}
