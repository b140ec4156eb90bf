// WebGPU backend tests. They run wherever an adapter comes up (in CI: Dawn on Mesa's llvmpipe through
// OpenGL ES) and compare every result with the CPU backend, the reference, on the same inputs.
// Without an adapter every test is skipped, with a message saying what was not run.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import * as nbx from '../src/index.js';
import { Tensor } from '../src/tensor/tensor.js';
import { DeviceLimitError, UnsupportedError, ValueError } from '../src/errors.js';
import { copyInto } from '../src/ops/shape.js';
import type { DTypeName } from '../src/dtype/dtypes.js';
import type { StridedRef } from '../src/backend/backend.js';
import { kernel, registerKernel } from '../src/kernels/registry.js';
import type { KernelName } from '../src/kernels/table.js';

const probe = await nbx.webgpu.probe();
const skip = probe.available ? false : `no WebGPU adapter (${probe.reason})`;
if (skip) {
  process.stdout.write(`# webgpu tests NOT RUN: ${skip}. Elementwise, reduction, matmul, readback, batching, pool and dtype-limit tests were skipped.\n`);
} else {
  process.stdout.write(`# webgpu: ${probe.description}\n`);
}
const it = (name: string, fn: () => Promise<void>): void => { test(name, { skip }, fn); };

const G = 'webgpu';
type T = Tensor;

/** Deterministic test data: `n` values of `dtype` in a range that suits it. */
function data(n: number, dtype: DTypeName, seed = 1): T {
  const v: number[] = [];
  let s = seed * 2654435761 % 4294967296;
  for (let i = 0; i < n; i++) {
    s = (s * 1664525 + 1013904223) % 4294967296;
    const r = s / 4294967296;
    if (dtype === 'bool') v.push(r > 0.5 ? 1 : 0);
    else if (dtype === 'uint8') v.push(Math.floor(r * 256));
    else if (dtype === 'int8') v.push(Math.floor(r * 256) - 128);
    else if (dtype === 'int16') v.push(Math.floor(r * 65536) - 32768);
    else if (dtype === 'int32') v.push(Math.floor(r * 2000) - 1000);
    else v.push(Math.round((r * 8 - 4) * 1000) / 1000);
  }
  return nbx.tensor(dtype === 'bool' ? v.map((x) => x === 1) : v, { dtype: nbx[dtype as 'float32'] });
}

/** GPU result equals the CPU result: exactly for integers/bool, within `rtol` (relative, with a floor) for floats. */
async function same(gpu: T, cpu: T, rtol = 0, what = ''): Promise<void> {
  assert.equal(gpu.device.type, 'webgpu', `${what}: result is on ${gpu.device}`);
  assert.equal(gpu.dt, cpu.dt, `${what}: dtype`);
  assert.deepEqual([...gpu.shape], [...cpu.shape], `${what}: shape`);
  const g = await gpu.data(), c = cpu.dataSync();
  for (let i = 0; i < c.length; i++) {
    const x = Number(g[i]), y = Number(c[i]);
    if (Number.isNaN(y)) { assert.ok(Number.isNaN(x), `${what}[${i}]: got ${x}, want NaN`); continue; }
    if (rtol === 0 || !Number.isFinite(y)) assert.ok(Object.is(x, y) || x === y, `${what}[${i}]: got ${x}, want ${y}`);
    else assert.ok(Math.abs(x - y) <= rtol * Math.max(1, Math.abs(y)), `${what}[${i}]: got ${x}, want ${y} (rtol ${rtol})`);
  }
}

const up = (t: T): T => t.to(G);

it('records work before the device exists, then starts it and reports adapter, profile and workgroup sizes', async () => {
  const a = nbx.tensor([1.5, -2, 3]), b = nbx.tensor([4.5, 5, 6]);
  const ga = up(a), early = nbx.mul(nbx.add(ga, up(b)), 2);
  ga.dispose(); // freed before the device exists: its buffer is still used by `early`'s kernels
  await same(early, nbx.mul(nbx.add(a, b), 2), 0, 'recorded before the device');
  const info = await nbx.webgpu.init();
  assert.ok(info.adapter.length > 0);
  assert.ok(info.wgElementwise >= 32 && info.wgReduce >= 32);
  assert.ok(typeof info.profile === 'string');
});

it('round-trips every supported dtype through upload and asynchronous readback', async () => {
  for (const d of ['float32', 'float16', 'bfloat16', 'int32', 'int16', 'int8', 'uint8', 'bool'] as DTypeName[]) {
    for (const n of [0, 1, 3, 37]) {
      const x = data(n, d, n + 3);
      await same(up(x), x, 0, `${d}[${n}]`);
    }
  }
});

it('computes elementwise ops across dtypes, including packed bytes and halves, as the CPU does', async () => {
  const ops: [string, (a: T, b: T) => T][] = [
    ['add', (a, b) => nbx.add(a, b)], ['sub', (a, b) => nbx.sub(a, b)], ['mul', (a, b) => nbx.mul(a, b)],
    ['maximum', (a, b) => nbx.maximum(a, b)], ['lt', (a, b) => nbx.lt(a, b)], ['eq', (a, b) => nbx.eq(a, b)],
    ['where', (a, b) => nbx.where(nbx.gt(a, b), a, b) as T],
  ];
  for (const d of ['float32', 'float16', 'bfloat16', 'int32', 'int16', 'int8', 'uint8', 'bool'] as DTypeName[]) {
    const a = data(37, d, 1), b = data(37, d, 2);
    for (const [name, f] of ops) {
      if (d === 'bool' && name === 'sub') continue;
      await same(f(up(a), up(b)), f(a, b), d === 'float16' || d === 'bfloat16' ? 0 : 1e-6, `${name} ${d}`);
    }
    if (d !== 'bool' && d !== 'uint8') await same(nbx.abs(up(a)), nbx.abs(a), 0, `abs ${d}`);
  }
  // long flat operands take the 16-byte path (mixed with a half input, a broadcast scalar, a misaligned view)
  const x = data(4100, 'float32', 3), h = data(4100, 'float16', 4), one = nbx.tensor(2.5);
  await same(nbx.add(nbx.mul(up(x), up(h)), up(one)), nbx.add(nbx.mul(x, h), one), 1e-6, 'vec4 path');
  await same(nbx.where(nbx.gt(up(x), 0), up(x), up(h)) as T, nbx.where(nbx.gt(x, 0), x, h) as T, 1e-6, 'vec4 where');
  await same(nbx.exp(up(x).slice(0, 1, 4097)), nbx.exp(x.slice(0, 1, 4097)), 2e-6, 'misaligned');
  await same(nbx.mul(up(x).to('int32'), 3), nbx.mul(x.to('int32'), 3), 0, 'vec4 int32');
  // integer semantics: wrap-around, floor division and modulo by negatives, shifts
  const i8 = nbx.tensor([127, -128, 100, -7, 7, 0], { dtype: nbx.int8 });
  const j8 = nbx.tensor([1, -1, 100, 2, -2, 3], { dtype: nbx.int8 });
  for (const f of [nbx.add, nbx.mul, nbx.floor_divide, nbx.remainder, nbx.bitwise_xor]) await same(f(up(i8), up(j8)) as T, f(i8, j8) as T, 0, f.name);
  await same(nbx.bitwise_left_shift(up(i8), up(nbx.abs(j8))), nbx.bitwise_left_shift(i8, nbx.abs(j8)), 0, 'shl int8');
});

it('casts between every pair of supported dtypes exactly (half/bfloat16 rounding, float->int, bool)', async () => {
  const special = nbx.tensor([0, -0, 1.5, -2.5, 65504, 65520, 70000, 1e-7, 6e-8, -3e-5, 300.7, -129.5, 1e10, NaN, Infinity, -Infinity, 0.1, 3.14159]);
  const ds: DTypeName[] = ['float32', 'float16', 'bfloat16', 'int32', 'int16', 'int8', 'uint8', 'bool', 'float8_e4m3fn', 'float8_e5m2'];
  for (const from of ds) {
    const x = from === 'float32' ? special : special.to(from);
    const gx = up(x);
    for (const to of ds) {
      if (from.startsWith('float8') && to.startsWith('float8')) continue;
      await same(gx.to(to), x.to(to), 0, `${from} -> ${to}`);
    }
  }
});

it('matches the CPU on float math, NaN and infinities', async () => {
  const x = nbx.tensor([-3.5, -1, -0.25, -0, 0, 1e-30, 0.3, 1, 2.75, 10, 88, 100, NaN, Infinity, -Infinity]);
  const y = nbx.tensor([2, -0.75, 3, 1, -1, 2, 0.5, -3, 1.25, 3, -7, 0.5, 1, 2, -2]);
  const g = up(x), gy = up(y);
  const unary = ['exp', 'log', 'sqrt', 'rsqrt', 'sin', 'cos', 'tanh', 'erf', 'expm1', 'log1p', 'sigmoid', 'floor', 'round', 'sign', 'isfinite', 'isnan', 'reciprocal'] as const;
  for (const name of unary) await same((nbx[name] as (t: T) => T)(g), (nbx[name] as (t: T) => T)(x), 3e-6, name);
  for (const name of ['atan2', 'remainder', 'fmod', 'pow', 'maximum', 'minimum', 'hypot', 'copysign', 'floor_divide', 'div'] as const) {
    await same((nbx[name] as (a: T, b: T) => T)(g, gy), (nbx[name] as (a: T, b: T) => T)(x, y), 3e-6, name);
  }
  // fmod is exact even far from the divisor's scale
  const big = nbx.tensor([1e7 + 0.5, -123456.789, 3.0e5], { dtype: nbx.float32 }), small = nbx.tensor([0.1, 0.3, -7.77]);
  await same(nbx.fmod(up(big), up(small)), nbx.fmod(big, small), 0, 'fmod exact');
});

it('broadcasts and reads strided, transposed, sliced and expanded operands', async () => {
  const a = data(60, 'float32', 4).reshape([3, 4, 5]);
  const b = data(20, 'float32', 5).reshape([4, 5]);
  const ga = up(a), gb = up(b);
  await same(nbx.add(ga.permute([2, 0, 1]), gb.t().unsqueeze(1)), nbx.add(a.permute([2, 0, 1]), b.t().unsqueeze(1)), 1e-6, 'permute+broadcast');
  await same(nbx.mul(ga.slice(2, 1, 5, 2), 3), nbx.mul(a.slice(2, 1, 5, 2), 3), 1e-6, 'slice step');
  await same(nbx.sub(gb.expand([3, 4, 5]), ga), nbx.sub(b.expand([3, 4, 5]), a), 1e-6, 'expand');
  await same(ga.transpose(0, 2).contiguous(), a.transpose(0, 2).contiguous(), 0, 'contiguous copy');
  const u8 = data(60, 'uint8', 6).reshape([3, 4, 5]);
  await same(up(u8).permute([1, 2, 0]).contiguous(), u8.permute([1, 2, 0]).contiguous(), 0, 'packed transposed copy');
  // writing into a strided view of packed storage (other bytes of each word must survive)
  for (const d of ['uint8', 'float16'] as DTypeName[]) {
    const dst = data(40, d, 7), src = data(8, d, 8);
    const gdst = up(dst);
    copyInto(gdst.slice(0, 3, 35, 4), up(src));
    copyInto(dst.slice(0, 3, 35, 4), src);
    await same(gdst, dst, 0, `copy into strided ${d} view`);
  }
  await same(nbx.cat([ga, ga], 1), nbx.cat([a, a], 1), 0, 'cat');
});

it('reduces rows, columns, long rows and many short rows like the CPU', async () => {
  const cases: [number[], number | number[] | undefined][] = [[[7, 9], 1], [[7, 9], 0], [[300, 5], 0], [[40, 300], 0], [[2000, 3], 1], [[3, 40000], 1], [[4, 6, 5], [0, 2]], [[11], undefined], [[20000], undefined]];
  for (const [shape, dim] of cases) {
    const x = data(shape.reduce((p, q) => p * q, 1), 'float32', shape.length).reshape(shape);
    const g = up(x);
    const o = dim === undefined ? {} : { dim };
    const tol = shape.includes(40000) || shape.includes(20000) ? 2e-4 : 2e-5;
    await same(nbx.sum(g, o), nbx.sum(x, o), tol, `sum ${shape} ${dim}`);
    await same(nbx.mean(g, o), nbx.mean(x, o), tol, `mean ${shape} ${dim}`);
    await same(nbx.amax(g, o), nbx.amax(x, o), 0, `amax ${shape} ${dim}`);
    await same(nbx.amin(g, o), nbx.amin(x, o), 0, `amin ${shape} ${dim}`);
    await same(nbx.linalg.vector_norm!(g, { ord: 2, ...o }), nbx.linalg.vector_norm!(x, { ord: 2, ...o }), tol, `norm ${shape} ${dim}`);
    if (dim !== undefined && !Array.isArray(dim)) {
      await same(nbx.var(g, o), nbx.var(x, o), tol * 10, `var ${shape} ${dim}`);
      await same(nbx.logsumexp(g, o), nbx.logsumexp(x, o), tol, `logsumexp ${shape} ${dim}`);
    }
  }
  const h = data(64, 'float16', 9).reshape([8, 8]);
  await same(nbx.sum(up(h), { dim: 1 }), nbx.sum(h, { dim: 1 }), 2e-3, 'sum float16');
  await same(nbx.cumsum(up(h), 1), nbx.cumsum(h, 1), 2e-3, 'cumsum float16');
  const c = data(3 * 700, 'float32', 10).reshape([3, 700]);
  await same(nbx.cumsum(up(c), 1), nbx.cumsum(c, 1), 1e-4, 'cumsum long rows');
  await same(nbx.cumprod(up(c.slice(1, 0, 20)), 1), nbx.cumprod(c.slice(1, 0, 20), 1), 1e-4, 'cumprod');
  const bx = data(90, 'bool', 11).reshape([9, 10]);
  await same(nbx.any(up(bx), 1), nbx.any(bx, 1), 0, 'any');
  await same(nbx.all(up(bx), 0), nbx.all(bx, 0), 0, 'all');
  const nan = nbx.tensor([[1, NaN, 3], [4, 5, 6]]);
  await same(nbx.amax(up(nan), 1), nbx.amax(nan, 1), 0, 'amax NaN');
});

it('multiplies matrices: shapes, transposes, batches, addmm, half inputs', async () => {
  const A = data(5 * 7, 'float32', 12).reshape([5, 7]), B = data(7 * 6, 'float32', 13).reshape([7, 6]);
  await same(nbx.matmul(up(A), up(B)), nbx.matmul(A, B), 1e-5, 'mm');
  await same(nbx.mm(up(B).t(), up(A).t()), nbx.mm(B.t(), A.t()), 1e-5, 'mm transposed');
  const X = data(3 * 70 * 33, 'float32', 14).reshape([3, 70, 33]), Y = data(3 * 33 * 65, 'float32', 15).reshape([3, 33, 65]);
  await same(nbx.bmm(up(X), up(Y)), nbx.bmm(X, Y), 1e-5, 'bmm');
  const C = data(6, 'float32', 16);
  await same(nbx.addmm(up(C), up(A), up(B), { beta: 0.5, alpha: 2 }), nbx.addmm(C, A, B, { beta: 0.5, alpha: 2 }), 1e-5, 'addmm');
  const Ah = A.to('float16'), Bh = B.to('float16');
  await same(nbx.matmul(up(Ah), up(Bh)), nbx.matmul(Ah, Bh), 2e-3, 'mm float16');
  const big = data(130 * 140, 'float32', 17).reshape([130, 140]);
  await same(nbx.matmul(up(big), up(big).t()), nbx.matmul(big, big.t()), 1e-4, 'mm 130x140');
  const L = data(520 * 70, 'float32', 18).reshape([520, 70]), R = data(70 * 530, 'float32', 19).reshape([70, 530]);
  await same(nbx.matmul(up(L), up(R)), nbx.matmul(L, R), 1e-4, 'mm 520x530 (large tiles)');
  await same(nbx.matmul(up(R).t(), up(L).t()), nbx.matmul(R.t(), L.t()), 1e-4, 'mm 530x520 transposed (large tiles)');
});

it('batches commands: a long chain is submitted in few batches and read back once', async () => {
  const be = nbx.webgpu.backend();
  await be.ready;
  await nbx.webgpu.synchronize();
  const before = { ...be.counters };
  let y = up(nbx.ones([64]));
  for (let i = 0; i < 600; i++) { const z = nbx.add(nbx.mul(y, 0.5), 1); y.dispose(); y = z; }
  const v = await y.data();
  assert.ok(Math.abs(Number(v[0]) - 2) < 1e-6);
  const dispatches = be.counters.dispatches - before.dispatches, submits = be.counters.submits - before.submits;
  assert.equal(dispatches, 1200);
  assert.ok(submits <= 8, `${submits} submits for ${dispatches} dispatches`);
  assert.equal(be.counters.readbacks - before.readbacks, 1);
});

it('reuses pooled buffers and reports statistics', async () => {
  await nbx.webgpu.synchronize();
  const s0 = nbx.webgpu.memoryStats();
  for (let i = 0; i < 20; i++) { const t = nbx.zeros([1000], { device: G }); t.dispose(); }
  await nbx.webgpu.synchronize();
  const s1 = nbx.webgpu.memoryStats();
  assert.ok(s1.reuses - s0.reuses >= 15, `reuses ${s1.reuses - s0.reuses}`);
  assert.ok(s1.created - s0.created <= 3);
  assert.equal(s1.allocatedBytes, s0.allocatedBytes);
  const z = nbx.zeros([1000], { device: G });
  assert.deepEqual([...(await z.data()).slice(0, 3)], [0, 0, 0]);
  z.dispose();
  await nbx.webgpu.synchronize();
  assert.ok(nbx.webgpu.emptyCache() > 0);
  assert.equal(nbx.webgpu.memoryStats().cachedBytes, 0);
});

it('refuses float64 with DeviceLimitError (int64 is emulated) and synchronous reads with a clear error', async () => {
  assert.throws(() => nbx.zeros([3], { dtype: nbx.float64, device: G }), (e: unknown) => e instanceof DeviceLimitError && e instanceof UnsupportedError && /WGSL has no 64-bit/.test((e as Error).message));
  const g = up(nbx.tensor([[1.5, 5, 2]]));
  assert.deepEqual([...await nbx.argmax(g, 1).data()], [1n]); // int64 indices (see webgpu_int64.test.ts)
  assert.throws(() => g.to('float64'), DeviceLimitError);
  assert.throws(() => g.dataSync(), (e: unknown) => e instanceof DeviceLimitError && /await t\.data\(\)/.test((e as Error).message));
  const back = await nbx.webgpu.toCpu(g);
  assert.equal(back.device.type, 'cpu');
  assert.deepEqual(back.tolist(), [[1.5, 5, 2]]);
});

it('runs softmax (masks, causal, log) and layer/RMS/group norm kernels like the CPU', async () => {
  const x = data(2 * 3 * 5 * 7, 'float32', 20).reshape([2, 3, 5, 7]);
  const F = nbx.nn.functional;
  for (const dim of [3, 1, 0]) {
    await same(F.softmax!(up(x), { dim }), F.softmax!(x, { dim }), 1e-6, `softmax dim ${dim}`);
    await same(F.log_softmax!(up(x), { dim }), F.log_softmax!(x, { dim }), 1e-6, `log_softmax dim ${dim}`);
  }
  const h = x.to('float16');
  await same(F.softmax!(up(h), { dim: -1 }), F.softmax!(h, { dim: -1 }), 0, 'softmax float16');
  const q = data(2 * 4 * 8, 'float32', 21).reshape([2, 4, 8]), kk = data(2 * 6 * 8, 'float32', 22).reshape([2, 6, 8]), v = data(2 * 6 * 8, 'float32', 23).reshape([2, 6, 8]);
  const mask = data(4 * 6, 'bool', 24).reshape([4, 6]);
  const sdpa = F.scaled_dot_product_attention!;
  await same(sdpa(up(q), up(kk), up(v), { is_causal: true }), sdpa(q, kk, v, { is_causal: true }), 1e-5, 'attention causal');
  await same(sdpa(up(q), up(kk), up(v), { attn_mask: up(mask) }), sdpa(q, kk, v, { attn_mask: mask }), 1e-5, 'attention bool mask');
  const rows = data(6 * 32, 'float32', 25).reshape([6, 32]), w = data(32, 'float32', 26), b = data(32, 'float32', 27);
  await same(F.layer_norm!(up(rows), [32], { weight: up(w), bias: up(b) }), F.layer_norm!(rows, [32], { weight: w, bias: b }), 1e-5, 'layer_norm');
  await same(F.rms_norm!(up(rows), [32], { weight: up(w) }), F.rms_norm!(rows, [32], { weight: w }), 1e-5, 'rms_norm');
  const img = data(2 * 6 * 5, 'float32', 28).reshape([2, 6, 5]);
  await same(F.group_norm!(up(img), 3, { weight: up(w.slice(0, 0, 6)), bias: up(b.slice(0, 0, 6)) }), F.group_norm!(img, 3, { weight: w.slice(0, 0, 6), bias: b.slice(0, 0, 6) }), 1e-5, 'group_norm');
});

it('convolves like the CPU: strides, padding, dilation, groups, transposed, 1-D to 3-D', async () => {
  const F = nbx.nn.functional;
  const x = data(2 * 4 * 9 * 8, 'float32', 30).reshape([2, 4, 9, 8]);
  const w = data(6 * 2 * 3 * 3, 'float32', 31).reshape([6, 2, 3, 3]), b = data(6, 'float32', 32);
  const o = { stride: [2, 1], padding: [1, 2], dilation: [1, 2], groups: 2 };
  await same(F.conv2d!(up(x), up(w), up(b), o), F.conv2d!(x, w, b, o), 1e-5, 'conv2d');
  const wt = data(4 * 3 * 3 * 2, 'float32', 33).reshape([4, 3, 3, 2]);
  const ot = { stride: [2, 3], padding: [1, 0], output_padding: [1, 2], groups: 2 };
  await same(F.conv_transpose2d!(up(x), up(wt), null, ot), F.conv_transpose2d!(x, wt, null, ot), 1e-5, 'conv_transpose2d');
  const x1 = data(3 * 5 * 20, 'float32', 34).reshape([3, 5, 20]), w1 = data(5 * 1 * 4, 'float32', 35).reshape([5, 1, 4]);
  await same(F.conv1d!(up(x1), up(w1), null, { groups: 5, padding: 'same' }), F.conv1d!(x1, w1, null, { groups: 5, padding: 'same' }), 1e-5, 'depthwise conv1d');
  const xh = x.to('bfloat16'), whh = w.to('bfloat16');
  await same(F.conv2d!(up(xh), up(whh), null, { groups: 2 }), F.conv2d!(xh, whh, null, { groups: 2 }), 1e-2, 'conv2d bfloat16');
  const x3 = data(1 * 2 * 4 * 5 * 6, 'float32', 36).reshape([1, 2, 4, 5, 6]), w3 = data(3 * 2 * 2 * 2 * 2, 'float32', 37).reshape([3, 2, 2, 2, 2]);
  await same(F.conv3d!(up(x3), up(w3), null, { stride: 2 }), F.conv3d!(x3, w3, null, { stride: 2 }), 1e-5, 'conv3d');
});

it('pools like the CPU: max (dilation, padding, NaN), average (count_include_pad, divisor), adaptive', async () => {
  const F = nbx.nn.functional;
  const x = data(2 * 3 * 9 * 10, 'float32', 40).reshape([2, 3, 9, 10]);
  const cases: [string, (t: T) => T][] = [
    ['max_pool2d', (t) => F.max_pool2d!(t, 3, { stride: 2, padding: 1, dilation: 2 })],
    ['max_pool2d ceil', (t) => F.max_pool2d!(t, [2, 3], { stride: [2, 2], ceil_mode: true })],
    ['avg_pool2d', (t) => F.avg_pool2d!(t, 3, { stride: 2, padding: 1 })],
    ['avg_pool2d no pad count', (t) => F.avg_pool2d!(t, 3, { stride: 2, padding: 1, count_include_pad: false, ceil_mode: true })],
    ['avg_pool2d divisor', (t) => F.avg_pool2d!(t, 2, { divisor_override: 3 })],
    ['adaptive_avg_pool2d', (t) => F.adaptive_avg_pool2d!(t, [4, 3])],
  ];
  for (const [name, f] of cases) await same(f(up(x)), f(x), 1e-6, name);
  const nan = nbx.tensor([[[1, NaN, 3, 4]]]);
  await same(nbx.max_pool1d(up(nan), 2) as T, nbx.max_pool1d(nan, 2) as T, 0, 'max_pool NaN');
});

it('runs kernels without a WebGPU version through announced host staging, refusable', async () => {
  const x = data(24, 'float32', 18).reshape([2, 2, 6]);
  // a kernel with no WebGPU version, registered for this test only: out = 2x + 1 (contiguous float32)
  registerKernel('test_staged' as KernelName, 'cpu', ((a: StridedRef, o: StridedRef) => {
    const src = a.buf as Float32Array, dst = o.buf as Float32Array;
    for (let i = 0; i < a.shape.reduce((p, q) => p * q, 1); i++) dst[o.offset + i] = src[a.offset + i]! * 2 + 1;
  }) as never);
  const pool = (t: T): T => {
    const out = Tensor.empty(t.shape, t.dt, t.device);
    (kernel('test_staged' as KernelName, t.device, 'test_staged') as unknown as (a: StridedRef, o: StridedRef) => void)(t.ref(), out.ref());
    return out;
  };
  await same(pool(up(x)), pool(x), 0, 'test_staged (staged)');
  assert.ok((nbx.webgpu.hostStagingStats().test_staged ?? 0) >= 1);
  // staged work stays in order with the dispatches around it
  const y = nbx.mul(pool(nbx.add(up(x), 1)), 2);
  await same(y, nbx.mul(pool(nbx.add(x, 1)), 2), 1e-6, 'staged in a chain');
  // buffers freed while a staged kernel is pending: a kernel output may reuse them (it runs later),
  // an upload may not (it would land before the staged kernel's write-back)
  const gx = up(x), s = pool(gx);
  gx.dispose();
  const k = nbx.mul(up(x), 3), u = up(nbx.full([2, 2, 6], 7.5));
  await same(s, pool(x), 0, 'staged, input freed');
  await same(k, nbx.mul(x, 3), 0, 'reused buffer');
  await same(u, nbx.full([2, 2, 6], 7.5), 0, 'upload while staging');
  process.env.NBX_WEBGPU_HOST_STAGING = '0';
  try {
    assert.throws(() => pool(up(x)), (e: unknown) => e instanceof UnsupportedError && /NBX_WEBGPU_HOST_STAGING/.test((e as Error).message));
  } finally { delete process.env.NBX_WEBGPU_HOST_STAGING; }
});
