// Sweeps the CUDA kernels' launch configurations over the shape buckets common work uses, filling
// NBX_CACHE_DIR/autotune.json; copied into src/autotune/shipped/ it lets a first run on this card sweep
// nothing. Run on the card: NBX_CACHE_DIR=/tmp/tune NBX_AUTOTUNE=full node dist/bench/cuda_tune.js
import * as nbx from '../src/index.js';

const log2 = (lo: number, hi: number): number[] => [...Array(hi - lo + 1).keys()].map((i) => 2 ** (lo + i));

async function main(): Promise<void> {
  const t0 = performance.now();
  for (const dt of ['float32', 'bfloat16', 'float16'] as const) {
    for (const n of log2(16, 28)) {
      const a = nbx.ones([n], { device: 'cuda', dtype: dt });
      nbx.add(a, a).dispose();                         // flat / vectorized, 2 inputs
      nbx.exp(a).dispose();                            // 1 input
      const r = Math.max(1, Math.floor(Math.sqrt(n)));
      const m = a.narrow(0, 0, r * Math.floor(n / r)).view(r, Math.floor(n / r));
      nbx.add(m.t(), 1).dispose();                     // strided 2-d
      nbx.sum(m, -1).dispose(); nbx.amax(m, -1).dispose(); nbx.argmax(m, -1).dispose(); nbx.var(m, -1).dispose();
      a.dispose();
    }
    for (const n of log2(6, 15)) for (const rows of [64, 1024, 8192]) {
      if (n * rows > 2 ** 28) continue;
      const x = nbx.ones([rows, n], { device: 'cuda', dtype: dt });
      nbx.nn.functional.softmax(x, { dim: -1 }).dispose();
      nbx.nn.functional.layer_norm(x, [n]).dispose();
      nbx.nn.functional.rms_norm(x, [n]).dispose();
      nbx.sum(x, -1).dispose();
      x.dispose();
    }
  }
  await nbx.cuda.synchronize();
  process.stdout.write(`swept in ${((performance.now() - t0) / 1000).toFixed(1)} s\n`);
}
main().catch((e) => { console.error(e); process.exitCode = 1; });
