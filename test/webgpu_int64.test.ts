// int64 on WebGPU (exact emulation: vec2<u32> values, two storage words) against the CPU backend
// (BigInt64Array, the reference): arithmetic edge cases (wraparound, INT64_MIN / -1, shifts >= 64, values
// beyond 2^53), division by zero (0 on WebGPU, as for int32 there; the CPU raises), casts of large values,
// mixed int64/float promotion, index inputs beyond int32 range (IndexError), sort/topk/argmax with int64
// outputs, integer reductions and scans. Host staging is refused, so every kernel is native. Without an
// adapter every test is skipped, with a message saying so.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import * as nbx from '../src/index.js';
import { Tensor } from '../src/tensor/tensor.js';
import { IndexError } from '../src/errors.js';

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
});

it('int64 division: floor/trunc/remainder/fmod exact, INT64_MIN / -1 wraps; division by zero gives 0 on WebGPU', async () => {
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
  const gmin = await nbx.floor_divide(i64([MIN]).to(G), i64([-1n]).to(G)).data();
  assert.equal(gmin[0], MIN);
  // by zero: the CPU raises ZeroDivisionError, a WebGPU kernel cannot: 0, as for int32 on WebGPU
  assert.throws(() => nbx.floor_divide(i64([5n]), i64([0n])).dataSync());
  for (const f of [nbx.floor_divide, nbx.remainder, nbx.fmod]) {
    assert.deepEqual([...await f(i64([5n, MIN]).to(G), i64([0n, 0n]).to(G)).data()], [0n, 0n]);
  }
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
  await check('int64 / int64 (true division)', [small, i64([3n, 3n, 3n, 3n, 3n, 3n, 3n, 3n])], nbx.div);
  await check('int64 + int32', [x, nbx.full([x.shape[0]!], -7, { dtype: nbx.int32 })], nbx.add);
  // the bytes are the host's: upload/download round trip, views, cat
  const big = i64(EDGE, [5, 5]);
  await check('transpose contiguous', [big], (t) => t.t().contiguous());
  await check('slice step', [big], (t) => t.slice(1, 0, 5, 2).contiguous());
  await check('cat', [big, big], (p, q) => nbx.cat([p, q.t()], 1));
});
