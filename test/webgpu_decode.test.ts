// WebGPU decode-step kernels against the CPU: the matrix-vector path of gemm (src/backend/webgpu/kernels/gemv.ts)
// through nn.functional.linear. Runs on any adapter (the local software one included; the subgroup
// variant where the adapter has 32-wide subgroups); skipped without one, with a message saying so.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import * as nbx from '../src/index.js';
import type { Tensor } from '../src/tensor/tensor.js';

process.env.NBX_WEBGPU_HOST_STAGING = '0';
const probe = await nbx.webgpu.probe();
const skip = probe.available ? false : `no WebGPU adapter (${probe.reason})`;
if (skip) process.stdout.write(`# webgpu decode tests NOT RUN: ${skip}.\n`);

type DT = 'float32' | 'float16' | 'bfloat16';
const G = 'webgpu';
const TOL: Record<DT, number> = { float32: 2e-5, float16: 2e-3, bfloat16: 1.6e-2 };

function lcg(seed: number): () => number {
  let s = seed >>> 0;
  return () => { s = (Math.imul(s, 1664525) + 1013904223) >>> 0; return s / 2 ** 32; };
}
const rand = (shape: number[], seed: number, scale = 1): Tensor => {
  const r = lcg(seed), n = shape.reduce((a, b) => a * b, 1);
  return nbx.tensor(Array.from({ length: n }, () => (r() * 2 - 1) * scale)).reshape(shape);
};
/** max |got - want| / max |want| */
async function relErr(got: Tensor, want: Tensor): Promise<number> {
  const g = (await got.cpu()).to('float64').dataSync() as Float64Array, w = want.to('float64').dataSync() as Float64Array;
  assert.equal(g.length, w.length);
  let d = 0, m = 0;
  for (let i = 0; i < g.length; i++) { d = Math.max(d, Math.abs(g[i]! - w[i]!)); m = Math.max(m, Math.abs(w[i]!)); if (Number.isNaN(g[i]!)) return Infinity; }
  return d / (m || 1);
}

test('webgpu linear with few rows (the matrix-vector kernel) equals the CPU: dtypes, rows 1..8, aligned and unaligned shapes, views', { skip }, async () => {
  let seed = 1;
  for (const dt of ['float32', 'bfloat16', 'float16'] as DT[]) {
    for (const [m, n, k] of [[1, 37, 256], [3, 20, 2048], [8, 9, 264], [1, 5, 12], [2, 7, 13]] as [number, number, number][]) {
      const x = rand([m, k], seed++).to(dt), w = rand([n, k], seed++, 0.1).to(dt);
      const want = nbx.nn.functional.linear(x, w);
      const got = nbx.nn.functional.linear(x.to(G), w.to(G));
      const e = await relErr(got, want);
      assert.ok(e <= TOL[dt], `${dt} m=${m} n=${n} k=${k}: relative error ${e}`);
    }
    // a row of a larger weight (offset), batched input [1, 1, k]
    const w = rand([10, 512], seed++, 0.1).to(dt), x = rand([1, 1, 512], seed++).to(dt);
    const e = await relErr(nbx.nn.functional.linear(x.to(G), w.to(G).slice(0, 2, 9)), nbx.nn.functional.linear(x, w.slice(0, 2, 9)));
    assert.ok(e <= TOL[dt], `${dt} sliced weight: relative error ${e}`);
  }
});
