#!/usr/bin/env node
// CPU decode GEMV (m = 1, and m = 4) with packed weights against the float32 path (nn.functional.linear
// on a float32 weight), per format, on the embedded model's Linear shapes and a larger one. Median of
// timed repetitions after a warm-up; µs per call and the weight bytes read per second.
//   npm run build && node scripts/quant-cpu-bench.mjs [--shapes 256x256,576x256,256x576,2048x2048] [--m 1,4]

import { join, dirname } from 'node:path';
import { fileURLToPath } from 'node:url';
import { cpus } from 'node:os';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
const nbx = await import(join(root, 'dist/src/index.js'));
const { makeLayout } = await import(join(root, 'dist/src/quant/formats.js'));
const { toFloat16Bits } = await import(join(root, 'dist/src/dtype/convert.js'));
const { residentCopy } = await import(join(root, 'dist/src/quant/wasm_memory.js'));
const arg = (k, d) => { const i = process.argv.indexOf(k); return i >= 0 ? process.argv[i + 1] : d; };
const shapes = arg('--shapes', '256x256,576x256,256x576,2048x2048').split(',').map((s) => s.split('x').map(Number)); // N x K
const ms = arg('--m', '1,4').split(',').map(Number);

function time(fn) {
  for (let i = 0; i < 5; i++) fn();
  const samples = [];
  const t1 = performance.now();
  let reps = 0;
  while (performance.now() - t1 < 300 || reps < 10) {
    const t0 = performance.now();
    fn();
    samples.push(performance.now() - t0);
    reps++;
  }
  samples.sort((a, b) => a - b);
  return samples[samples.length >> 1] * 1000; // µs
}

/** Random GGUF blocks (f16 scales set to small finite values). */
function ggufWeight(format, n, k) {
  const l = makeLayout('bench', format, n, k);
  const b = new Uint8Array(n * l.rowBytes);
  for (let i = 0; i < b.length; i++) b[i] = (i * 2654435761) >>> 24;
  const dOff = { q8_0: [0], q4_0: [0], q4_1: [0, 2], q5_0: [0], q5_1: [0, 2], q2_k: [80, 82], q3_k: [108], q4_k: [0, 2], q5_k: [0, 2], q6_k: [208] }[format];
  const bs = { q8_0: 34, q4_0: 18, q4_1: 20, q5_0: 22, q5_1: 24, q2_k: 84, q3_k: 110, q4_k: 144, q5_k: 176, q6_k: 210 }[format];
  for (let o = 0; o < b.length; o += bs) for (const d of dOff) { const h = toFloat16Bits(0.001); b[o + d] = h & 255; b[o + d + 1] = h >> 8; }
  return new nbx.quant.QuantizedTensor({ qdata: nbx.Tensor.fromStorage(residentCopy(b), 'uint8', [n, l.rowBytes]), layout: l }); // in the quant memory, as the GGUF loader puts it
}

console.log(`# CPU packed GEMV vs the float32 path; ${cpus()[0].model}, ${cpus().length} cores; node ${process.version}; ${new Date().toISOString()}`);
const rows = [];
for (const [N, K] of shapes) {
  const w = nbx.randn([N, K]).mul(0.05);
  const qs = [
    ['int8', nbx.quant.quantize(w, { scheme: 'int8' })],
    ['int4 g128', K % 128 === 0 ? nbx.quant.quantize(w, { scheme: 'int4', group_size: 128 }) : null],
    ['int4 g32', nbx.quant.quantize(w, { scheme: 'int4', group_size: 32 })],
    ['fp8', nbx.quant.quantize(w, { scheme: 'fp8_e4m3' })],
    ['q8_0', ggufWeight('q8_0', N, K)],
    ['q4_0', ggufWeight('q4_0', N, K)],
    ...['q4_1', 'q5_0', 'q5_1'].map((f) => [f, ggufWeight(f, N, K)]),
    ...['q2_k', 'q3_k', 'q4_k', 'q5_k', 'q6_k'].map((f) => [f, K % 256 === 0 ? ggufWeight(f, N, K) : null]),
  ];
  for (const m of ms) {
    const x = nbx.randn([m, K]);
    const f = time(() => nbx.scope(() => nbx.nn.functional.linear(x, w)));
    const line = [`${N}x${K}`, m, `${f.toFixed(1)} µs (${(N * K * 4 / f / 1e3).toFixed(2)} GB/s)`];
    for (const [name, q] of qs) {
      if (!q) { line.push('—'); continue; }
      const t = time(() => nbx.scope(() => nbx.quant.quant_linear(x, q)));
      line.push(`${t.toFixed(1)} µs (${(f / t).toFixed(2)}×, ${(q.nbytes / t / 1e3).toFixed(2)} GB/s)`);
    }
    rows.push(`| ${line.join(' | ')} |`);
    console.error(rows[rows.length - 1]);
  }
}
console.log('| N×K | m | float32 linear | int8 | int4 g128 | int4 g32 | fp8 | q8_0 | q4_0 | q4_1 | q5_0 | q5_1 | q2_k | q3_k | q4_k | q5_k | q6_k |');
console.log('| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |');
console.log(rows.join('\n'));
