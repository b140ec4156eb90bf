// int64 on WebGPU (exact emulation: vec2<u32> values, two storage words) against the CPU backend
// (BigInt64Array, the reference): arithmetic edge cases (wraparound, INT64_MIN / -1, shifts >= 64, values
// beyond 2^53), division by zero (the CPU's ZeroDivisionError, at the next read), casts of large values,
// mixed int64/float promotion, index inputs beyond int32 range (IndexError), sort/topk/argmax with int64
// outputs, integer reductions and scans. Host staging is refused, so every kernel is native. Without an
// adapter every test is skipped, with a message saying so.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import * as nbx from '../src/index.js';
import { Tensor } from '../src/tensor/tensor.js';
import { DeviceLimitError, IndexError, ValueError } from '../src/errors.js';
import { Expr } from '../src/ir/expr.js';
import { backendFor } from '../src/backend/backend.js';
import { kernel } from '../src/kernels/registry.js';

process.env.NBX_WEBGPU_HOST_STAGING = '0';
const probe = await nbx.webgpu.probe();
const skip = probe.available ? false : `no WebGPU adapter (${probe.reason})`;
if (skip) process.stdout.write(`# webgpu int64 tests NOT RUN: ${skip}.\n`);
const it = (name: string, fn: () => Promise<void>): void => { test(name, { skip }, fn); };

type T = Tensor;
const G = 'webgpu';
const MIN = -(2n ** 63n), MAX = 2n ** 63n - 1n;
/** Edge values: around int32 and 2^53, both extremes, shift amounts. */
const EDGE = [0n, 1n, -1n, 2n, -2n, 3n, -7n, 63n, 64n, 65n, 2n ** 31n - 1n, 2n ** 31n, -(2n ** 31n), -(2n ** 31n) - 1n, 2n ** 32n,
  2n ** 32n + 5n, 2n ** 53n + 1n, -(2n ** 53n) - 1n, 2n ** 62n, MAX, MIN, MIN + 1n, 12345678901234n, -98765432109876n, 0x7fffffff80000000n];
const i64 = (v: bigint[], shape = [v.length]): T => Tensor.fromStorage(BigInt64Array.from(v), 'int64', shape, 'cpu');

/** Every (a, b) pair of `vals`: two tensors of n*n elements. */
function pairs(vals: bigint[]): [T, T] {
  const a: bigint[] = [], b: bigint[] = [];
  for (const x of vals) for (const y of vals) { a.push(x); b.push(y); }
  return [i64(a), i64(b)];
}

/** Element-for-element equality of a WebGPU result with the CPU's (bigints compared exactly, floats by Object.is). */
async function same(gpu: T, cpu: T, what: string): Promise<void> {
  assert.equal(gpu.dtype.name, cpu.dtype.name, `${what}: dtype`);
  assert.deepEqual([...gpu.shape], [...cpu.shape], `${what}: shape`);
  const g = await gpu.data(), c = cpu.dataSync();
  for (let i = 0; i < c.length; i++) {
    const x = g[i], y = c[i];
    const ok = typeof y === 'bigint' ? x === y : Object.is(x, y) || (Number.isNaN(x as number) && Number.isNaN(y as number));
    assert.ok(ok, `${what}[${i}]: got ${x}, want ${y}`);
  }
}
/** Runs `f` on CPU inputs and on their WebGPU copies; compares. */
async function check(what: string, ins: T[], f: (...x: T[]) => T): Promise<void> {
  await same(f(...ins.map((t) => t.to(G))), f(...ins), what);
}

it('int64 arithmetic, comparisons, bitwise ops and shifts are exact (wraparound as the CPU)', async () => {
  const [a, b] = pairs(EDGE);
  for (const [name, f] of [
    ['add', nbx.add], ['sub', nbx.sub], ['mul', nbx.mul], ['maximum', nbx.maximum], ['minimum', nbx.minimum],
    ['lt', nbx.lt], ['le', nbx.le], ['gt', nbx.gt], ['ge', nbx.ge], ['eq', nbx.eq], ['ne', nbx.ne],
    ['bitwise_and', nbx.bitwise_and], ['bitwise_or', nbx.bitwise_or], ['bitwise_xor', nbx.bitwise_xor],
    ['bitwise_left_shift', nbx.bitwise_left_shift], ['bitwise_right_shift', nbx.bitwise_right_shift],
  ] as [string, (x: T, y: T) => T][]) await check(name, [a, b], f);
  const [x] = pairs(EDGE);
  for (const [name, f] of [['neg', nbx.neg], ['abs', nbx.abs], ['sign', nbx.sign], ['bitwise_not', nbx.bitwise_not],
    ['square', nbx.square], ['logical_not', nbx.logical_not]] as [string, (x: T) => T][]) await check(name, [x], f);
  await check('add scalar', [x], (t) => nbx.add(t, 2n ** 40n + 3n));
  await check('mul scalar', [x], (t) => nbx.mul(t, -3));
  await check('where', [a, b], (p, q) => nbx.where(nbx.lt(p, q), p, q) as T);
  await check('clamp', [x], (t) => nbx.clamp(t, -(2n ** 35n), 2n ** 33n));
  // a float primitive on int64 (the op layer never builds one): a typed error naming it, before any kernel
  const o = Tensor.empty([3], 'int64', G);
  assert.throws(() => backendFor(o.device).elementwise(Expr.load(0, 'int64').un('sqrt'), [i64([1n, 4n, 9n]).to(G).ref()], [], o.ref()),
    (e: unknown) => e instanceof DeviceLimitError && /'sqrt' on int64/.test((e as Error).message));
  await check('matmul (wraps mod 2^64)', [i64(EDGE.slice(0, 24), [4, 6]), i64(EDGE.slice(1, 19), [6, 3])], nbx.matmul);
  await check('matmul batched', [i64(EDGE.slice(0, 12), [2, 2, 3]), i64(EDGE.slice(5, 11), [3, 2])], nbx.matmul);
});

it('int64 division: floor/trunc/remainder/fmod exact, INT64_MIN / -1 wraps; division by zero raises ZeroDivisionError', async () => {
  const [a, b] = pairs(EDGE.filter((v) => v !== 0n).concat([0n]).filter((_, i, arr) => i < arr.length));
  // divisors without zero (the CPU raises for it)
  const nz = EDGE.filter((v) => v !== 0n);
  const [p, q] = pairs(nz);
  await check('floor_divide', [p, q], nbx.floor_divide);
  await check('remainder', [p, q], nbx.remainder);
  await check('fmod', [p, q], nbx.fmod);
  await check('div trunc', [p, q], (x, y) => nbx.div(x, y, { rounding_mode: 'trunc' }));
  await check('div floor', [p, q], (x, y) => nbx.div(x, y, { rounding_mode: 'floor' }));
  await check('pow', [i64([3n, -3n, 2n, -1n, 1n, 7n, MIN, 5n]), i64([40n, 39n, 63n, -5n, -2n, 0n, 1n, 27n])], nbx.pow);
  // random magnitudes from 1 to 64 bits (divisors of every size: the long division's paths)
  let seed = 12345n;
  const rnd = (): bigint => {
    seed = (seed * 6364136223846793005n + 1442695040888963407n) & (2n ** 64n - 1n);
    const bits = BigInt(Number(seed >> 58n) + 1);
    return BigInt.asIntN(64, (seed * 0x9e3779b97f4a7c15n) & ((1n << bits) - 1n)) * (seed & 1n ? -1n : 1n) || 3n;
  };
  const ra = i64(Array.from({ length: 3000 }, rnd)), rb = i64(Array.from({ length: 3000 }, rnd));
  for (const [name, f] of [['floor_divide', nbx.floor_divide], ['remainder', nbx.remainder], ['fmod', nbx.fmod], ['mul', nbx.mul],
    ['div trunc', (x: T, y: T) => nbx.div(x, y, { rounding_mode: 'trunc' })], ['lt', nbx.lt], ['sub', nbx.sub]] as [string, (x: T, y: T) => T][]) {
    await check(`random ${name}`, [ra, rb], f);
  }
  await check('random to float32', [ra], (t) => t.to('float32'));
  const gmin = await nbx.floor_divide(i64([MIN]).to(G), i64([-1n]).to(G)).data();
  assert.equal(gmin[0], MIN);
  // by zero: the CPU's ZeroDivisionError, raised at the next read (a kernel cannot raise); a later
  // computation is unaffected
  for (const f of [nbx.floor_divide, nbx.remainder, nbx.fmod, (x: T, y: T) => nbx.div(x, y, { rounding_mode: 'trunc' })]) {
    assert.throws(() => f(i64([5n, MIN]), i64([1n, 0n])), (e: unknown) => e instanceof ValueError && /ZeroDivisionError/.test((e as Error).message));
    await assert.rejects(f(i64([5n, MIN]).to(G), i64([1n, 0n]).to(G)).data(), (e: unknown) => e instanceof ValueError && /ZeroDivisionError/.test((e as Error).message));
  }
  await assert.rejects(nbx.eq(nbx.floor_divide(i64(Array(2048).fill(5n)).to(G), 0), 1).data(), ValueError);
  assert.deepEqual([...await nbx.floor_divide(i64([7n]).to(G), i64([2n]).to(G)).data()], [3n]);
  void a; void b;
});

it('int64 casts: large values, -2^63, float truncation, bool, int32 sign extension; mixed promotion', async () => {
  const x = i64(EDGE.concat([2n ** 24n + 1n, -(2n ** 60n) - 2n ** 36n, 2n ** 25n + 3n, 2n ** 53n + 3n]));
  // rounded once, as PyTorch (the CPU backend goes through float64 and rounds twice: 2^60 there)
  assert.deepEqual([...await i64([2n ** 60n + 2n ** 36n + 1n, -(2n ** 60n) - 2n ** 36n - 1n]).to(G).to('float32').data()],
    [1152921642045800448, -1152921642045800448]);
  for (const d of ['float32', 'float16', 'bfloat16', 'int32', 'int16', 'int8', 'uint8', 'bool'] as const) {
    await check(`int64 -> ${d}`, [x], (t) => t.to(d));
  }
  const f = nbx.tensor([0, -0.9, 2.9, -2.9, 2 ** 31, -(2 ** 31) - 256, 2 ** 40 + 2 ** 20, -(2 ** 62), 2 ** 63, -(2 ** 63), 1e30, NaN, Infinity, -Infinity, 16777217]);
  await check('float32 -> int64', [f], (t) => t.to('int64'));
  await check('float16 -> int64', [f.to('float16')], (t) => t.to('int64'));
  await check('int32 -> int64', [nbx.tensor([-5, 7, -(2 ** 31), 2 ** 31 - 1], { dtype: nbx.int32 })], (t) => t.to('int64'));
  await check('bool -> int64', [nbx.tensor([true, false, true])], (t) => t.to('int64'));
  await check('int8 -> int64', [nbx.tensor([-128, 127, -1], { dtype: nbx.int8 })], (t) => t.to('int64'));
  // mixed with floats: values whose float32 is exact (the CPU computes float32 ops in float64, PyTorch in
  // float32: they differ beyond 2^24)
  const small = i64([0n, 1n, -1n, 3n, -7n, 65n, 2n ** 23n + 1n, -(2n ** 24n)]);
  await check('int64 + float32', [small, nbx.full([8], 0.5)], nbx.add);
  await check('int64 * 1.5', [small], (t) => nbx.mul(t, 1.5));
  // true division is a float32 division: WGSL allows 2.5 ulp for it (NVIDIA's is not correctly rounded)
  {
    const d = i64([3n, 3n, 3n, 3n, 3n, 3n, 3n, 3n]);
    const g = await nbx.div(small.to(G), d.to(G)).data(), c = nbx.div(small, d).dataSync();
    for (let i = 0; i < c.length; i++) assert.ok(Math.abs((g[i] as number) - (c[i] as number)) <= 3 * 2 ** -23 * Math.abs(c[i] as number), `true division[${i}]: ${g[i]} vs ${c[i]}`);
  }
  await check('int64 + int32', [x, nbx.full([x.shape[0]!], -7, { dtype: nbx.int32 })], nbx.add);
  // the bytes are the host's: upload/download round trip, views, cat
  const big = i64(EDGE, [5, 5]);
  await check('transpose contiguous', [big], (t) => t.t().contiguous());
  await check('slice step', [big], (t) => t.slice(1, 0, 5, 2).contiguous());
  await check('cat', [big, big], (p, q) => nbx.cat([p, q.t()], 1));
});

it('int64 index inputs: gather, index_select, embedding, take, index_put, scatter, masked ops; beyond int32 is an IndexError', async () => {
  const x = nbx.arange(0, 24, 1, { dtype: nbx.float32 }).reshape([4, 6]);
  const xl = i64(EDGE.slice(0, 24), [4, 6]);
  const idx = i64([3n, 0n, 3n, 2n, 2n, 1n], [6]);
  await check('index_select', [x, idx], (t, i) => nbx.index_select(t, 0, i));
  await check('index_select int64 data', [xl, idx], (t, i) => nbx.index_select(t, 1, i));
  await check('gather', [xl, i64([0n, 5n, 2n, 1n, 1n, 0n, 4n, 3n], [4, 2])], (t, i) => nbx.gather(t, 1, i));
  await check('embedding', [i64([1n, 3n, 0n, 3n], [2, 2]), x], (i, w) => nbx.nn.functional.embedding(i, w));
  await check('take', [xl, i64([0n, 23n, -24n, 7n])], (t, i) => nbx.take(t, i));
  await check('take_along_dim', [xl, i64([0n, 5n, 2n, 1n], [4, 1])], (t, i) => nbx.take_along_dim(t, i, 1));
  await check('index_add', [x, i64([3n, 0n, 3n]), nbx.ones([3, 6])], (t, i, s) => nbx.index_add(t, 0, i, s));
  await check('index_put', [xl, i64([0n, 3n]), i64([5n, -7n])], (t, i, v) => nbx.index_put(t, [i], v.reshape([2, 1])));
  await check('scatter int64 data', [xl, i64([3n, 0n, 1n, 2n, 0n, 3n], [1, 6]), i64([MIN, MAX, 5n, 6n, 7n, 8n], [1, 6])],
    (t, i, s) => nbx.scatter(t, 0, i, s));
  const si = i64([3n, 0n, 1n, 3n, 0n, 3n, 2n, 2n, 0n, 1n, 1n, 3n], [2, 6]), sv = i64(EDGE.slice(6, 18), [2, 6]);
  for (const reduce of ['sum', 'prod', 'mean', 'amax', 'amin']) {
    for (const include_self of [true, false]) {
      await check(`scatter_reduce int64 ${reduce} ${include_self}`, [xl, si, sv], (t, i, v) => nbx.scatter_reduce(t, 0, i, v, reduce, { include_self }));
    }
  }
  await check('index_add int64', [xl, i64([3n, 0n, 3n]), i64(EDGE.slice(3, 21), [3, 6])], (t, i, v) => nbx.index_add(t, 0, i, v, { alpha: -3 }));
  await check('scatter_add int64 index', [x, i64([3n, 0n, 1n, 2n, 0n, 3n], [1, 6]), nbx.ones([1, 6])], (t, i, s) => nbx.scatter_add(t, 0, i, s));
  const m = nbx.gt(nbx.remainder(nbx.arange(0, 24, 1), 3), 0).reshape([4, 6]);
  await check('masked_fill int64', [xl, m], (t, k) => nbx.masked_fill(t, k, -(2 ** 40)));
  await check('cross_entropy int64 target', [x, i64([5n, 0n, -100n, 3n])], (t, y) => nbx.nn.functional.cross_entropy(t, y));
  await assert.rejects(nbx.nn.functional.nll_loss(x.to(G), i64([1n, 2n ** 32n + 1n, 0n, 0n]).to(G)).data(),
    (e: unknown) => e instanceof IndexError && /Target 4294967297 is out of bounds/.test((e as Error).message));
  // out of range, including values that only differ from a valid one in the high word
  for (const bad of [4n, -5n, 2n ** 32n + 1n, -(2n ** 32n) + 1n, MIN, MAX]) {
    const r = nbx.index_select(x.to(G), 0, i64([0n, bad]).to(G));
    await assert.rejects(r.data(), (e: unknown) => e instanceof IndexError && new RegExp(`index ${bad} is out of bounds`).test((e as Error).message), `index ${bad}`);
    assert.throws(() => nbx.index_select(x, 0, i64([0n, bad])), IndexError);
  }
  await assert.rejects(nbx.gather(x.to(G), 1, i64([2n ** 31n], [1, 1]).to(G)).data(), IndexError);
  await assert.rejects(nbx.scatter(x.to(G), 1, i64([-(2n ** 40n)], [1, 1]).to(G), x.to(G)).data(), IndexError);
});

it('int64 index outputs: sort, topk, kthvalue, argmax/argmin, max with indices, nonzero, searchsorted, arange/randint', async () => {
  const x = nbx.tensor([[3, 1, 2, 2, 9, -4, 0, 7], [5, 5, 1, -1, 8, 0, 2, 2]], { dtype: nbx.float32 });
  await check('sort', [x], (t) => nbx.sort(t, { dim: 1, stable: true }).indices);
  await check('argsort', [x], (t) => nbx.argsort(t, { dim: 1, descending: true }));
  await check('topk', [x], (t) => nbx.topk(t, 3).indices);
  await check('kthvalue', [x], (t) => nbx.kthvalue(t, 2, 1).indices);
  await check('median', [x], (t) => nbx.median(t, 1).indices);
  await check('argmax', [x], (t) => nbx.argmax(t, { dim: 1 }));
  await check('argmin', [x], (t) => nbx.argmin(t));
  await check('max dim', [x], (t) => nbx.max(t, 0).indices);
  await check('searchsorted', [nbx.tensor([1, 3, 5, 7], { dtype: nbx.float32 }), x], (b, t) => nbx.searchsorted(b, t));
  // int64 values (keys from their dense rank): ties, values equal in one word only, both extremes
  const v = [MIN, MAX, 0n, -1n, 2n ** 32n, 1n, 2n ** 32n, -(2n ** 32n), 0x7fffffff80000000n, 5n, 0n, MIN, 2n ** 53n + 1n, 2n ** 53n, -1n, 7n];
  const xl = i64(v.concat(v.slice().reverse()), [2, 16]);
  for (const [name, f] of [
    ['sort', (t: T) => nbx.sort(t, { dim: 1 }).values], ['sort idx', (t: T) => nbx.sort(t, { dim: 1 }).indices],
    ['sort stable desc', (t: T) => nbx.sort(t, { dim: 1, descending: true, stable: true }).indices],
    ['sort desc values', (t: T) => nbx.sort(t, { dim: 1, descending: true }).values], ['argsort dim0', (t: T) => nbx.argsort(t, { dim: 0 })],
    ['topk', (t: T) => nbx.topk(t, 5).indices], ['topk smallest', (t: T) => nbx.topk(t, 4, { largest: false }).values],
    ['kthvalue', (t: T) => nbx.kthvalue(t, 3).indices], ['median', (t: T) => nbx.median(t, 1).indices], ['mode', (t: T) => nbx.mode(t, 1).indices],
    ['mode values', (t: T) => nbx.mode(t, 1).values], ['argmax', (t: T) => nbx.argmax(t, { dim: 1 })], ['argmin', (t: T) => nbx.argmin(t, { dim: 0 })],
    ['cummax', (t: T) => nbx.cummax(t, 1).indices], ['cummin', (t: T) => nbx.cummin(t, 1).values],
  ] as [string, (t: T) => T][]) await check(`${name} int64`, [xl], f);
  await check('searchsorted int64', [i64([MIN, -5n, 0n, 2n ** 32n, 2n ** 40n, MAX]), i64(v)], (b, t) => nbx.searchsorted(b, t, { right: true }));
  await check('arange', [x], (t) => nbx.arange(-3, 2 ** 33, 2 ** 31, { device: t.device }));
  // nonzero's op sizes its output from a synchronous count (none on WebGPU): its kernel, int64 coordinates
  const nz = Tensor.empty([2, 2], 'int64', G);
  kernel('nonzero', G, 'nonzero')(nbx.tensor([[0, 1], [2, 0]]).to(G).ref(), nz.ref());
  assert.deepEqual([...await nz.data()], [0n, 1n, 1n, 0n]);
  const nz64 = Tensor.empty([3, 1], 'int64', G); // int64 input: non-zero in either word
  kernel('nonzero', G, 'nonzero')(i64([0n, 2n ** 40n, 0n, -1n, 5n, 0n]).to(G).ref(), nz64.ref());
  assert.deepEqual([...await nz64.data()], [1n, 3n, 4n]);
  // a long row: global bitonic merges, the rank scan over many chunks
  const longRow = i64(Array.from({ length: 3000 }, (_, i) => BigInt((i * 7919) % 1009) * 2n ** 36n - BigInt(i % 3)), [1, 3000]);
  await check('sort long int64 stable', [longRow], (t) => nbx.sort(t, { dim: 1, stable: true }).indices);
});

it('int64 reductions and scans: sum/prod/min/max/cumsum of integers accumulate in int64, exactly', async () => {
  const xl = i64(EDGE.slice(0, 24), [4, 6]);
  const xi = nbx.tensor([[2 ** 31 - 1, 2 ** 31 - 1, 5, -3], [-(2 ** 31), -1, 7, 1]], { dtype: nbx.int32 });
  for (const [name, f] of [
    ['sum', (t: T) => nbx.sum(t)], ['sum dim', (t: T) => nbx.sum(t, 1)], ['sum dim0', (t: T) => nbx.sum(t, 0)], ['prod dim', (t: T) => nbx.prod(t, 1)],
    ['amax', (t: T) => nbx.amax(t, 1)], ['amin', (t: T) => nbx.amin(t, 0)], ['cumsum', (t: T) => nbx.cumsum(t, 1)], ['cumprod', (t: T) => nbx.cumprod(t, 0)],
  ] as [string, (t: T) => T][]) {
    await check(`${name} int64`, [xl], f);
    await check(`${name} int32`, [xi], f);
  }
  await check('sum bool', [nbx.tensor([true, false, true])], (t) => nbx.sum(t));
  // a long row (several workgroups' worth, carries between the words)
  const long = i64(Array.from({ length: 5000 }, (_, i) => BigInt(i) * 3000000007n - 2n ** 40n));
  await check('sum long', [long], (t) => nbx.sum(t));
  await check('cumsum long', [long], (t) => nbx.cumsum(t, 0));
  // the kernel's plans: rows split into parts (few long rows), a thread per row (short rows, dim 0)
  const wide = i64(Array.from({ length: 2 * 20000 }, (_, i) => BigInt((i * 7919) % 10007) * 2n ** 33n - 2n ** 45n), [2, 20000]);
  const tall = i64(Array.from({ length: 300 * 10 }, (_, i) => BigInt((i * 31) % 97) - 40n), [300, 10]);
  const f32 = nbx.tensor(Array.from({ length: 2 * 20000 }, (_, i) => ((i * 7919) % 10007) / 7 - 600), { dtype: nbx.float32 }).reshape([2, 20000]);
  for (const [name, t] of [['wide', wide], ['tall', tall], ['tall t', tall.t()], ['wide f32', f32], ['tall f32', f32.reshape([4000, 10])],
    ['cols f32', f32.reshape([400, 100])]] as [string, T][]) {
    await check(`argmax ${name}`, [t], (x) => nbx.argmax(x, { dim: 1 }));
    await check(`argmin dim0 ${name}`, [t], (x) => nbx.argmin(x, { dim: 0 }));
    await check(`max dim0 ${name}`, [t], (x) => nbx.max(x, 0).indices);
    await check(`cummax ${name}`, [t], (x) => nbx.cummax(x, 1).indices);
    if (t.dtype.name === 'int64') {
      await check(`sum ${name}`, [t], (x) => nbx.sum(x, 1));
      await check(`sum dim0 ${name}`, [t], (x) => nbx.sum(x, 0));
      await check(`amin ${name}`, [t], (x) => nbx.amin(x, 1));
      await check(`cumsum ${name}`, [t], (x) => nbx.cumsum(x, 1));
      await check(`cummin ${name}`, [t], (x) => nbx.cummin(x, 1).values);
    }
  }
});
