// The CPU quant GEMV's worker threads (src/backend/cpu/kernels/quant_threads.ts, NBX_QUANT_THREADS):
// rows computed by workers equal, bit for bit, the same rows computed on the calling thread.
import { test } from 'node:test';
import assert from 'node:assert/strict';

process.env.NBX_QUANT_THREADS = '1';
const nbx = await import('../src/index.js');
const { quantThreads } = await import('../src/backend/cpu/kernels/quant_threads.js');

test('NBX_QUANT_THREADS=1: a large GEMV spread over a worker gives the rows computed alone', () => {
  const w = nbx.randn([4096, 256], { generator: new nbx.Generator().manual_seed(1) });
  const x = nbx.randn([2, 256], { generator: new nbx.Generator().manual_seed(2) });
  for (const opts of [{ scheme: 'int8' }, { scheme: 'int4', group_size: 64 }, { scheme: 'fp8_e4m3', per_channel: false }] as const) {
    const qt = nbx.quant.quantize(w, opts);
    const all = nbx.quant.quant_linear(x, qt).tolist() as number[][];
    assert.equal(quantThreads(), 1, 'the worker ran');
    // 64-row pieces stay under the threading threshold: computed on this thread
    const pieces: number[][][] = [];
    for (let r = 0; r < 4096; r += 64) pieces.push(nbx.quant.quant_linear(x, qt.rows(r, r + 64)).tolist() as number[][]);
    for (let m = 0; m < 2; m++) assert.deepEqual(all[m], pieces.flatMap((p) => p[m]!), opts.scheme);
  }
});
