// Host cost of a small op (add of two 32-element tensors, allocation included) in the contexts a
// benchmark creates: fresh, after big elementwise ops / reductions (big blocks in the allocator's
// cache, tuned kernels), after GEMMs. Per phase: µs/op (median of 5 rounds of 2000 ops, host time
// and with the final synchronize), garbage collections during the rounds, allocator blocks.
//   node scripts/host-context.mjs [big-elements]     (NBX_CUDA_BATCH=0 to compare without batching)
import { PerformanceObserver } from 'node:perf_hooks';
import * as nbx from '../dist/src/index.js';

const N = 2000, ROUNDS = 5;
const big = Number(process.argv[2] ?? 1 << 26);
let gcCount = 0, gcMs = 0;
new PerformanceObserver((l) => { for (const e of l.getEntries()) { gcCount++; gcMs += e.duration; } }).observe({ entryTypes: ['gc'] });
const s = nbx.ones([32], { device: 'cuda' });
const loop = () => { for (let i = 0; i < N; i++) nbx.add(s, s).dispose(); };

async function measure(tag) {
  loop(); await nbx.cuda.synchronize();
  await new Promise((r) => setTimeout(r, 5)); // let observers flush
  const g0 = gcCount, gm0 = gcMs, host = [], all = [];
  for (let r = 0; r < ROUNDS; r++) {
    const t0 = performance.now(); loop(); const t1 = performance.now(); await nbx.cuda.synchronize();
    host.push((t1 - t0) / N * 1000); all.push((performance.now() - t0) / N * 1000);
  }
  await new Promise((r) => setTimeout(r, 5));
  const med = (a) => a.sort((x, y) => x - y)[a.length >> 1].toFixed(2);
  const m = nbx.cuda.memoryStats();
  console.log(`${tag.padEnd(28)} host ${med(host)} us/op  with sync ${med(all)} us/op  gc ${gcCount - g0} (${(gcMs - gm0).toFixed(1)} ms)  ` +
    `allocator: ${m.activeBlocks} active, ${m.segments} segments, ${(m.reservedBytes / 2 ** 20).toFixed(0)} MiB reserved  batch ${JSON.stringify(nbx.cuda.batchStats())}`);
}

await measure('fresh');
for (const dt of ['float32', 'bfloat16']) {
  const a = nbx.sin(nbx.arange(big, { dtype: dt, device: 'cuda' })), b = nbx.add(a, 1);
  const A = a.view(64, big / 64), row = nbx.ones([big / 64], { device: 'cuda', dtype: dt }), B = b.view(big / 64, 64);
  for (let i = 0; i < 3; i++) { nbx.add(a, b).dispose(); nbx.add(A, row).dispose(); nbx.add(A, B.t()).dispose(); nbx.sum(A, -1).dispose(); nbx.sum(a).dispose(); }
  await nbx.cuda.synchronize();
  a.dispose(); b.dispose(); row.dispose();
  await measure(`after big ${dt} ops`);
}
const x = nbx.randn([2048, 2048], { dtype: 'bfloat16' }).cuda();
for (let i = 0; i < 5; i++) nbx.matmul(x, x).dispose();
const w = nbx.randn([4096, 4096], { dtype: 'bfloat16' }).cuda(), v = nbx.randn([1, 4096], { dtype: 'bfloat16' }).cuda();
for (let i = 0; i < 50; i++) nbx.matmul(v, w).dispose();
await nbx.cuda.synchronize();
await measure('after GEMMs');
// many different small ops first (call sites see many shapes/kinds)
const y = nbx.linspace(0.1, 2, 32).cuda();
for (let r = 0; r < 50; r++) for (const f of [nbx.exp, nbx.log, nbx.tanh, nbx.neg, (t) => nbx.mul(t, 3), (t) => nbx.clamp(t, 0, 1), (t) => t.to('float16'), (t) => nbx.gt(t, 1)]) f(y).dispose();
await measure('after many small kinds');
