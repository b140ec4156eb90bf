// Autotune sweep of the WebGPU kernels over the size buckets the benchmarks and common models hit, for
// shipping (src/autotune/shipped/): run with NBX_AUTOTUNE=full and NBX_CACHE_DIR pointing at an empty
// directory; the sweeps land in $NBX_CACHE_DIR/autotune.json, keyed by this adapter. Prints each choice.
// Run: NBX_AUTOTUNE=full NBX_CACHE_DIR=/tmp/tune node dist/bench/webgpu_tune.js [--quick]
import * as nbx from '../src/index.js';
import { defaultCache } from '../src/autotune/index.js';

const quick = process.argv.includes('--quick');
const info = await nbx.webgpu.init();
const be = nbx.webgpu.backend();
const maxElems = (bytes: number, isz: number): number => Math.min(bytes, info.limits.maxStorageBufferBindingSize ?? bytes) / isz;
const t0 = performance.now();
const top = quick ? 2 ** 24 : 2 ** 30;
for (const [dt, isz] of [['float32', 4], ['float16', 2]] as const) {
  // elementwise: the first call of each bucket queues its sweep
  for (let bytes = 2 ** 18; bytes <= top; bytes *= 4) {
    const n = maxElems(bytes, isz);
    const x = nbx.zeros([n], { dtype: dt, device: 'webgpu' });
    nbx.add(x, x).dispose();
    nbx.sum(x.view(-1, Math.min(16384, n)), -1).dispose(); // rows
    nbx.sum(x).dispose(); // one long row
    await be.tuning!.settled();
    x.dispose();
  }
}
for (const M of quick ? [512] : [1024, 4096]) {
  const a = nbx.zeros([M, M], { device: 'webgpu' });
  nbx.matmul(a, a).dispose();
  await be.tuning!.settled();
  a.dispose();
}
await nbx.webgpu.synchronize();
const file = defaultCache().path;
process.stdout.write(`autotune sweeps for ${info.tuneKey} done in ${((performance.now() - t0) / 1000).toFixed(1)} s; cache: ${file}\n`);
const entries = (JSON.parse((await import('node:fs')).readFileSync(file, 'utf8')) as { entries: Record<string, Record<string, Record<string, { config: unknown; timeMs: number }>>> }).entries;
for (const [dev, kernels] of Object.entries(entries)) {
  for (const [k, byKey] of Object.entries(kernels)) for (const [key, e] of Object.entries(byKey)) process.stdout.write(`${dev} ${k} ${key}: ${JSON.stringify(e.config)} ${e.timeMs.toFixed(4)} ms\n`);
}
