// CUDA quantized-weight kernels (src/backend/cuda/kernels/quant.ts) against the CPU dequantizers: every
// format of the contract, the GEMV (m = 1..8) with every weight-rows / sub-block configuration on some
// of them, prefill (dequantize + GEMM), bias, float32/float16/bfloat16 activations, and dequantize()
// bit for bit. Runs where a CUDA device is present, or on the host emulator:
//   node test/gen/cuda_emu.mjs node --test dist/test/cuda_quant.test.js
import { test } from 'node:test';
import assert from 'node:assert/strict';
import * as nbx from '../src/index.js';
import { Tensor } from '../src/tensor/tensor.js';
import { kernel } from '../src/kernels/registry.js';
import { kernelFeatures } from '../src/kernels/registry.js';
import { probeCuda } from '../src/backend/cuda/runtime/libs.js';
import { forceQuantGemvConfig } from '../src/backend/cuda/kernels/quant.js';
import type { QuantFormat } from '../src/kernels/quant.js';
import { ALL_FORMATS, QUANT_TOL, dequantRef, lcg, matmulRef, randomPacked, relErr, type PackedWeight } from '../bench/quant_ref.js';
import { UnsupportedError, ShapeError } from '../src/errors.js';

const probe = probeCuda();
const skip = probe.available ? false : `no CUDA device (${probe.reason}): CUDA quant tests not run`;
if (skip) console.log(`# SKIP cuda quant tests: ${probe.reason}`);

type DT = 'float32' | 'float16' | 'bfloat16';

function upload(p: PackedWeight) {
  const q = Tensor.fromStorage(p.qweight, 'uint8', [p.layout.n, p.layout.rowBytes]).to('cuda');
  const s = p.scales ? Tensor.fromStorage(p.scales, 'float32', p.scaleShape!).to('cuda') : undefined;
  const z = p.zeros ? Tensor.fromStorage(p.zeros, 'float32', p.scaleShape!).to('cuda') : undefined;
  return { q, s, z };
}

function randX(m: number, k: number, dt: DT, seed: number): Tensor {
  const r = lcg(seed);
  return nbx.tensor(Array.from({ length: m * k }, () => r() * 2 - 1)).reshape([m, k]).to(dt);
}

/** quant_matmul on the card against the float64 product of the CPU-dequantized weight. */
function checkMatmul(f: QuantFormat, dt: DT, m: number, n: number, k: number, seed: number, opts: { asym?: boolean; bias?: boolean; groupSize?: number; perTensor?: boolean } = {}): void {
  const p = randomPacked(f, n, k, seed, opts);
  const w = dequantRef(p);
  const x = randX(m, k, dt, seed + 1);
  const b = opts.bias ? randX(1, n, dt, seed + 2).reshape([n]) : undefined;
  const want = matmulRef(x.to('float64').dataSync() as Float64Array, w, m, n, k, b ? (b.to('float64').dataSync() as Float64Array) : undefined);
  const { q, s, z } = upload(p);
  const xg = x.to('cuda'), bg = b?.to('cuda'), out = Tensor.empty([m, n], dt, 'cuda');
  kernel('quant_matmul', 'cuda')({
    x: xg.ref(), qweight: q.ref(), ...(s ? { scales: s.ref() } : {}), ...(z ? { zeros: z.ref() } : {}), ...(bg ? { bias: bg.ref() } : {}),
    out: out.ref(), m, layout: p.layout, dtype: dt,
  });
  const got = out.to('cpu').to('float64').dataSync() as Float64Array;
  const e = relErr(got, want);
  assert.ok(e <= QUANT_TOL[dt]!, `${f}${opts.asym ? ' asym' : ''} ${dt} m=${m} n=${n} k=${k}: relative error ${e} > ${QUANT_TOL[dt]}`);
}

const KS: Record<string, number> = { q2_k: 768, q3_k: 768, q4_k: 768, q5_k: 768, q6_k: 768 };

test('quant_matmul GEMV equals the CPU dequantizer for every format and dtype (m = 1, 3, 8), with bias', { skip }, () => {
  let seed = 1;
  for (const f of ALL_FORMATS) {
    const k = KS[f] ?? 2304; // several tiles per row, the last partial (tile = 64 sub-blocks)
    checkMatmul(f, 'bfloat16', 1, 20, k, seed++, { bias: true });
    checkMatmul(f, 'float16', 3, 20, k, seed++);
    checkMatmul(f, 'float32', 8, 20, k, seed++, { bias: true });
  }
});

test('quant_matmul GEMV: every m from 1 to 8, int4 groups 32/64/128 symmetric and asymmetric, fp8 per tensor', { skip }, () => {
  let seed = 100;
  for (let m = 1; m <= 8; m++) checkMatmul('q4_k', 'bfloat16', m, 12, 512, seed++);
  for (let m = 1; m <= 8; m += 3) checkMatmul('int4', 'bfloat16', m, 12, 512, seed++, { asym: true, groupSize: 64 });
  for (const g of [32, 128]) checkMatmul('int4', 'float32', 2, 9, 384, seed++, { groupSize: g, asym: g === 32 });
  checkMatmul('fp8_e4m3', 'bfloat16', 1, 16, 256, seed++, { perTensor: true });
});

test('quant_matmul GEMV: every weight-rows / sub-blocks configuration', { skip }, () => {
  let seed = 200;
  try {
    for (const rows of [1, 2, 4]) {
      for (const sub of [1, 2, 4]) {
        forceQuantGemvConfig({ impl: 'fma', rows, sub, kw: 1 });
        for (const f of ['q6_k', 'int4', 'q8_0'] as QuantFormat[]) checkMatmul(f, 'bfloat16', rows === 4 ? 1 : 2, 13, f === 'q6_k' ? 1280 : 1152, seed++);
      }
    }
    // warps splitting a row group's tiles (kw): more warps than tiles, tiles not a multiple of kw, m up to 8
    for (const [rows, sub, kw] of [[2, 1, 2], [1, 1, 4], [2, 1, 8], [4, 2, 8], [1, 2, 4]]) {
      forceQuantGemvConfig({ impl: 'fma', rows: rows!, sub: sub!, kw: kw! });
      for (const f of ['q4_k', 'int4'] as QuantFormat[]) checkMatmul(f, 'bfloat16', kw === 8 ? 5 : 1, 11, f === 'q4_k' ? 2560 : 2304, seed++, { bias: true });
    }
  } finally { forceQuantGemvConfig(null); }
});

test('quant_matmul prefill (dequantize + GEMM) and K off the GEMV grid', { skip }, () => {
  let seed = 300;
  for (const f of ['q4_k', 'int8', 'int4', 'q5_0'] as QuantFormat[]) checkMatmul(f, 'bfloat16', 20, 16, f === 'q4_k' ? 512 : 128, seed++, { bias: true, asym: f === 'int4' });
  checkMatmul('int8', 'float32', 2, 7, 40, seed++); // K % 32 != 0: dequantize + GEMM
  checkMatmul('int4', 'float16', 3, 5, 60, seed++, { groupSize: 20 }); // a group that is not a power of two
  checkMatmul('int4', 'bfloat16', 1, 6, 96, seed++, { groupSize: 48, asym: true });
});

test('dequantize gives the CPU dequantizer\'s numbers bit for bit (rounded once into the dtype)', { skip }, () => {
  let seed = 400;
  for (const f of ALL_FORMATS) {
    for (const dt of ['float32', 'bfloat16'] as DT[]) {
      const k = KS[f] ?? 96;
      const p = randomPacked(f, 5, k, seed++, { asym: f === 'int4' && dt === 'float32', groupSize: 32 });
      const { q, s, z } = upload(p);
      const out = Tensor.empty([5, k], dt, 'cuda');
      kernel('dequantize', 'cuda')({ qweight: q.ref(), ...(s ? { scales: s.ref() } : {}), ...(z ? { zeros: z.ref() } : {}), out: out.ref(), layout: p.layout, dtype: dt });
      const want = Tensor.fromStorage(dequantRef(p), 'float32', [5, k]).to(dt).to('float32').dataSync() as Float32Array;
      const got = out.to('cpu').to('float32').dataSync() as Float32Array;
      for (let i = 0; i < want.length; i++) if (!Object.is(got[i], want[i])) assert.fail(`${f} ${dt}: element ${i}: cuda ${got[i]} vs cpu ${want[i]}`);
    }
  }
});

test('quant features and typed errors', { skip }, () => {
  const feats = kernelFeatures('quant', 'cuda');
  assert.deepEqual([...feats.formats].sort(), [...ALL_FORMATS].sort());
  const p = randomPacked('q4_k', 4, 256, 1);
  const { q } = upload(p);
  const x = randX(1, 256, 'bfloat16', 2).to('cuda'), out = Tensor.empty([1, 4], 'bfloat16', 'cuda');
  const call = (over: object) => kernel('quant_matmul', 'cuda')({ x: x.ref(), qweight: q.ref(), out: out.ref(), m: 1, layout: p.layout, dtype: 'bfloat16', ...over });
  assert.throws(() => call({ layout: { ...p.layout, format: 'q9_z' } }), UnsupportedError);
  assert.throws(() => call({ layout: { ...p.layout, rowBytes: 100 } }), ShapeError);
  assert.throws(() => call({ layout: { ...p.layout, k: 200 } }), ShapeError);
  assert.throws(() => call({ dtype: 'float64' }), UnsupportedError);
  call({}); // and the process goes on
});

test('packed weights viewed at an unaligned offset (a slice of a larger buffer): GEMV falls back to dequantize + GEMM', { skip }, () => {
  for (const [f, off] of [['q4_k', 2], ['q6_k', 6], ['int4', 1]] as [QuantFormat, number][]) {
    const p = randomPacked(f, 6, 512, 77, { groupSize: 64 });
    const bytes = new Uint8Array(p.qweight.length + off);
    bytes.set(p.qweight, off);
    const q = Tensor.fromStorage(bytes, 'uint8', [bytes.length]).to('cuda').narrow(0, off, p.qweight.length).view([6, p.layout.rowBytes]);
    const s = p.scales ? Tensor.fromStorage(p.scales, 'float32', p.scaleShape!).to('cuda') : undefined;
    const x = randX(2, 512, 'float32', 5);
    const want = matmulRef(x.to('float64').dataSync() as Float64Array, dequantRef(p), 2, 6, 512);
    const out = Tensor.empty([2, 6], 'float32', 'cuda');
    kernel('quant_matmul', 'cuda')({ x: x.to('cuda').ref(), qweight: q.ref(), ...(s ? { scales: s.ref() } : {}), out: out.ref(), m: 2, layout: p.layout, dtype: 'float32' });
    const e = relErr(out.to('cpu').to('float64').dataSync() as Float64Array, want);
    assert.ok(e <= QUANT_TOL.float32!, `${f} at offset ${off}: relative error ${e}`);
  }
});

test('int4 on tensor cores (impl mma): symmetric and asymmetric, groups 128 and 256, bf16 and f16, m 1..8, bias, ragged N', { skip }, () => {
  let seed = 500;
  try {
    forceQuantGemvConfig({ impl: 'mma', rows: 1, sub: 1, kw: 1 });
    for (const [dt, m, n, k, g, asym] of [['bfloat16', 1, 40, 1024, 128, false], ['bfloat16', 3, 17, 1280, 128, true], ['float16', 8, 24, 512, 256, false],
      ['float16', 5, 16, 2048, 128, true], ['bfloat16', 8, 33, 384, 128, true], ['bfloat16', 2, 8, 128, 128, false]] as [DT, number, number, number, number, boolean][]) {
      checkMatmul('int4', dt, m, n, k, seed++, { groupSize: g, asym, bias: m % 2 === 1 });
    }
  } finally { forceQuantGemvConfig(null); }
});
