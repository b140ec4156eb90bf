// WebGPU quantized-weight kernels (src/backend/webgpu/kernels/quant.ts) against the CPU dequantizers:
// every format (int4 sym/asym, groups 32..128 and one that is not a power of two; fp8 per tensor); the GEMV
// (m = 1..8), prefill (dequantize + GEMM, with bias), float32/float16/bfloat16 activations, dequantize
// bit for bit, and the formats it lacks refused with a typed error. Runs on any adapter (the local
// software one included); skipped without one, with a message saying so.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import * as nbx from '../src/index.js';
import { Tensor } from '../src/tensor/tensor.js';
import { kernel, kernelFeatures } from '../src/kernels/registry.js';
import type { QuantFormat } from '../src/kernels/quant.js';
import { ALL_FORMATS, QUANT_TOL, dequantRef, lcg, matmulRef, randomPacked, relErr, type PackedWeight } from '../bench/quant_ref.js';
import { UnsupportedError } from '../src/errors.js';

process.env.NBX_WEBGPU_HOST_STAGING = '0';
const probe = await nbx.webgpu.probe();
const skip = probe.available ? false : `no WebGPU adapter (${probe.reason})`;
if (skip) process.stdout.write(`# webgpu quant tests NOT RUN: ${skip}.\n`);

type DT = 'float32' | 'float16' | 'bfloat16';
const G = 'webgpu';
const FORMATS: QuantFormat[] = [...ALL_FORMATS];
const KQ = (f: QuantFormat): boolean => f.endsWith('_k');

function upload(p: PackedWeight) {
  const q = Tensor.fromStorage(p.qweight, 'uint8', [p.layout.n, p.layout.rowBytes]).to(G);
  const s = p.scales ? Tensor.fromStorage(p.scales, 'float32', p.scaleShape!).to(G) : undefined;
  const z = p.zeros ? Tensor.fromStorage(p.zeros, 'float32', p.scaleShape!).to(G) : undefined;
  return { q, s, z };
}
const randX = (m: number, k: number, dt: DT, seed: number): Tensor => {
  const r = lcg(seed);
  return nbx.tensor(Array.from({ length: m * k }, () => r() * 2 - 1)).reshape([m, k]).to(dt);
};

async function checkMatmul(f: QuantFormat, dt: DT, m: number, n: number, k: number, seed: number, opts: { asym?: boolean; bias?: boolean; groupSize?: number; perTensor?: boolean } = {}): Promise<void> {
  const p = randomPacked(f, n, k, seed, opts);
  const x = randX(m, k, dt, seed + 1);
  const b = opts.bias ? randX(1, n, dt, seed + 2).reshape([n]) : undefined;
  const want = matmulRef(x.to('float64').dataSync() as Float64Array, dequantRef(p), m, n, k, b ? (b.to('float64').dataSync() as Float64Array) : undefined);
  const { q, s, z } = upload(p);
  const xg = x.to(G), bg = b?.to(G), out = Tensor.empty([m, n], dt, G);
  kernel('quant_matmul', G)({
    x: xg.ref(), qweight: q.ref(), ...(s ? { scales: s.ref() } : {}), ...(z ? { zeros: z.ref() } : {}), ...(bg ? { bias: bg.ref() } : {}),
    out: out.ref(), m, layout: p.layout, dtype: dt,
  });
  const got = (await out.cpu()).to('float64').dataSync() as Float64Array;
  const e = relErr(got, want);
  assert.ok(e <= QUANT_TOL[dt]!, `${f}${opts.asym ? ' asym' : ''} ${dt} m=${m} n=${n} k=${k}: relative error ${e} > ${QUANT_TOL[dt]}`);
}

test('webgpu quant_matmul GEMV equals the CPU dequantizer (every format; m 1..8; every dtype; bias)', { skip }, async () => {
  let seed = 1;
  for (const f of FORMATS) {
    const k = KQ(f) ? 768 : 384;
    await checkMatmul(f, 'bfloat16', 1, 10, k, seed++, { bias: true });
    await checkMatmul(f, 'float16', 3, 9, k, seed++);
    await checkMatmul(f, 'float32', 8, 7, k, seed++, { bias: true });
  }
  for (let m = 2; m <= 8; m += 3) await checkMatmul('q4_k', 'bfloat16', m, 5, 512, seed++);
  await checkMatmul('int4', 'bfloat16', 2, 6, 256, seed++, { asym: true, groupSize: 64 });
  await checkMatmul('int4', 'float32', 1, 6, 256, seed++, { groupSize: 32 });
});

test('webgpu quant_matmul prefill (dequantize + GEMM) with bias, and int4 groups off the GEMV grid', { skip }, async () => {
  let seed = 50;
  for (const f of FORMATS) await checkMatmul(f, 'float32', 11, 6, KQ(f) ? 256 : 128, seed++, { bias: true });
  await checkMatmul('int4', 'bfloat16', 2, 5, 60, seed++, { groupSize: 20, asym: true });
});

test('webgpu dequantize equals the CPU dequantizer bit for bit', { skip }, async () => {
  let seed = 80;
  for (const f of FORMATS) {
    for (const dt of ['float32', 'bfloat16', 'float16'] as DT[]) {
      const k = KQ(f) ? 512 : 96;
      const p = randomPacked(f, 3, k, seed++, { asym: f === 'int4' && dt !== 'float16', groupSize: 32 });
      const { q, s, z } = upload(p);
      const out = Tensor.empty([3, k], dt, G);
      kernel('dequantize', G)({ qweight: q.ref(), ...(s ? { scales: s.ref() } : {}), ...(z ? { zeros: z.ref() } : {}), out: out.ref(), layout: p.layout, dtype: dt });
      const want = Tensor.fromStorage(dequantRef(p), 'float32', [3, k]).to(dt).to('float32').dataSync() as Float32Array;
      const got = (await out.cpu()).to('float32').dataSync() as Float32Array;
      for (let i = 0; i < want.length; i++) if (!Object.is(got[i], want[i])) assert.fail(`${f} ${dt}: element ${i}: webgpu ${got[i]} vs cpu ${want[i]}`);
    }
  }
});

test('webgpu quant features list its formats and dtypes; others are a typed error', { skip }, async () => {
  await nbx.ones([1], { device: G }).cpu();
  assert.deepEqual([...kernelFeatures('quant', G).formats].sort(), [...FORMATS].sort());
  const p = randomPacked('q5_k', 2, 256, 3);
  const { q } = upload(p);
  const x = randX(1, 256, 'float32', 4).to(G), out = Tensor.empty([1, 2], 'float32', G);
  const call = (over: object) => kernel('quant_matmul', G)({ x: x.ref(), qweight: q.ref(), out: out.ref(), m: 1, layout: p.layout, dtype: 'float32', ...over });
  assert.throws(() => call({ layout: { ...p.layout, format: 'q9_z' } }), UnsupportedError);
  assert.throws(() => call({ dtype: 'float64' }), UnsupportedError);
  call({});
});

test('webgpu fp8 with one scale for the tensor', { skip }, async () => {
  await checkMatmul('fp8_e4m3', 'bfloat16', 2, 6, 256, 900, { perTensor: true });
});
