// CUDA shape and indexing kernels against the CPU kernels (run on a machine with a CUDA device; skipped
// elsewhere): copy_strided through the shape ops, gather, scatter (every reduction, duplicates, both the
// column and the parallel paths), advanced indexing, nonzero, masked_select/scatter. Results must equal
// the CPU's bit for bit (NaN equal to NaN), index errors must be the CPU's. Each check is exported so
// test/gen/cuda_indexing_compile.mjs --simulate can run it on the simulated device too.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { pathToFileURL } from 'node:url';
import * as nbx from '../src/index.js';
import { Tensor } from '../src/tensor/tensor.js';
import { allocStorage, DTYPES, type DTypeName } from '../src/dtype/dtypes.js';
import { writeNumber } from '../src/dtype/convert.js';
import { probeCuda } from '../src/backend/cuda/runtime/libs.js';

// eslint-disable-next-line @typescript-eslint/no-explicit-any
type Fn = (...args: any[]) => any;
export type Check = (dev: string) => void | Promise<void>;

export const REAL: DTypeName[] = ['bool', 'uint8', 'int8', 'int16', 'int32', 'int64', 'float16', 'bfloat16', 'float32', 'float64'];
export const FLOATS: DTypeName[] = ['float16', 'bfloat16', 'float32', 'float64'];
/** Small sizes on the simulator (host fibers are slow), GPU-sized otherwise. */
export const SIM = !!process.env.NBX_SIM_CHECKS;

/** A seeded generator (mulberry32), so failures reproduce. */
export function rng(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

export interface RandOpts { lo?: number; hi?: number; special?: boolean; seed?: number; step?: number }
/**
 * A CPU tensor of `dt`: values in [lo, hi) on a grid of `step` (a coarse step makes ties); `special` mixes in
 * NaN, ±0 and ±inf for floats.
 */
export function rand(shape: number[], dt: DTypeName, o: RandOpts = {}): Tensor {
  const r = rng(o.seed ?? 1234 + shape.reduce((a, b) => a * 31 + b, 7));
  const n = shape.reduce((a, b) => a * b, 1);
  const a = allocStorage(dt, n);
  const isF = DTYPES[dt].kind === 'float';
  const lo = o.lo ?? (dt === 'bool' ? 0 : dt === 'uint8' ? 0 : -50), hi = o.hi ?? (dt === 'bool' ? 2 : 50);
  const step = o.step ?? (isF ? 1 / 8 : 1);
  const specials = [NaN, 0, -0, Infinity, -Infinity];
  for (let i = 0; i < n; i++) {
    let v = lo + Math.floor(r() * ((hi - lo) / step)) * step;
    if (o.special && isF && r() < 0.15) v = specials[Math.floor(r() * specials.length)]!;
    if (dt === 'int64') (a as BigInt64Array)[i] = BigInt(Math.trunc(v));
    else writeNumber(dt, a, i, isF ? v : Math.trunc(v));
  }
  return Tensor.fromStorage(a, dt, shape);
}
/**
 * Rows of distinct values (no ties anywhere the dtype allows it), shuffled: the fast paths alone decide the
 * result, no row is replayed. 16-bit floats take evenly spaced finite bit patterns; narrow ints wrap.
 */
export function distinct(shape: number[], dt: DTypeName, seed = 3): Tensor {
  const r = rng(seed);
  const n = shape.length ? shape[shape.length - 1]! : 1, rows = shape.slice(0, -1).reduce((a, b) => a * b, 1);
  const a = allocStorage(dt, rows * n);
  const half = dt === 'float16' || dt === 'bfloat16';
  // 16-bit floats: the finite patterns in ascending value order (negatives from -max up, then positives)
  const maxPos = dt === 'float16' ? 0x7bff : 0x7f7f;
  const pattern = (q: number): number => (q < maxPos ? 0x8000 | (maxPos - q) : q - maxPos);
  for (let row = 0; row < rows; row++) {
    const perm = Array.from({ length: n }, (_, j) => j);
    for (let j = n - 1; j > 0; j--) { const q = Math.floor(r() * (j + 1)); [perm[j], perm[q]] = [perm[q]!, perm[j]!]; }
    for (let j = 0; j < n; j++) {
      const v = perm[j]!, at = row * n + j;
      if (half) (a as Uint16Array)[at] = pattern(Math.floor((v * (2 * maxPos)) / Math.max(n, 1)));
      else if (dt === 'int64') (a as BigInt64Array)[at] = BigInt(v - (n >> 1)) * 7n;
      else if (DTYPES[dt].kind === 'float') writeNumber(dt, a, at, (v - n / 2) * 0.75);
      else writeNumber(dt, a, at, dt === 'bool' ? v & 1 : v - (dt === 'uint8' ? 0 : n >> 1));
    }
  }
  return Tensor.fromStorage(a, dt, shape);
}
/** An int64 CPU tensor of indices in [lo, hi). */
export const idx = (shape: number[], lo: number, hi: number, seed = 7, dt: DTypeName = 'int64'): Tensor => rand(shape, dt, { lo, hi, step: 1, seed });

/** got (any device) equals want (cpu): dtype, shape, every element (NaN equal to NaN, -0 distinct from 0). */
export function same(got: unknown, want: unknown, what: string, dev = 'cpu'): void {
  if (Array.isArray(want)) {
    assert.ok(Array.isArray(got), `${what}: expected a tuple`);
    assert.equal(got.length, want.length, `${what}: tuple length`);
    want.forEach((w, i) => same((got as unknown[])[i], w, `${what}[${i}]`, dev));
    return;
  }
  if (!(want instanceof Tensor)) { assert.deepEqual(got, want, what); return; }
  assert.ok(got instanceof Tensor, `${what}: expected a tensor`);
  assert.equal(got.dt, want.dt, `${what}: dtype`);
  assert.deepEqual([...got.shape], [...want.shape], `${what}: shape`);
  assert.equal(got.device.type, dev.split(':')[0], `${what}: device`);
  const g = got.to('cpu').dataSync() as ArrayLike<number | bigint>, w = want.dataSync() as ArrayLike<number | bigint>;
  const lanes = DTYPES[want.dt].lanes;
  for (let i = 0; i < w.length; i++) {
    const x = g[i]!, y = w[i]!;
    const eq = typeof y === 'bigint' ? x === y : Object.is(x, y) || (Number.isNaN(x) && Number.isNaN(y));
    if (!eq) assert.fail(`${what}: element ${Math.floor(i / lanes)} is ${String(x)}, cpu has ${String(y)}`);
  }
}

/** Moves every tensor argument (also inside arrays) to `dev`. */
export function onDev(args: unknown[], dev: string): unknown[] {
  const mv = (v: unknown): unknown => (v instanceof Tensor ? v.to(dev) : Array.isArray(v) ? v.map(mv) : v);
  return args.map(mv);
}

/** Runs f on cpu tensors and on `dev` copies; results must be the same (or both calls fail with one message). */
export function compare(dev: string, what: string, f: Fn, ...args: unknown[]): void {
  let want: unknown, cpuErr: unknown;
  try { want = f(...args); } catch (e) { cpuErr = e; }
  let got: unknown, devErr: unknown;
  try { got = f(...onDev(args, dev)); } catch (e) { devErr = e; }
  if (cpuErr || devErr) {
    assert.ok(cpuErr && devErr, `${what}: cpu ${cpuErr ? `threw ${String(cpuErr)}` : 'returned'}, ${dev} ${devErr ? `threw ${String(devErr)}` : 'returned'}`);
    assert.equal((devErr as Error).constructor.name, (cpuErr as Error).constructor.name, `${what}: error class`);
    assert.equal((devErr as Error).message, (cpuErr as Error).message, `${what}: error message`);
    return;
  }
  same(got, want, what, dev);
}

// ---- checks ---------------------------------------------------------------------------------------

const sz = (gpu: number, sim: number): number => (SIM ? sim : gpu);

export const indexingChecks: Record<string, Check> = {
  'copy_strided: permutes, flips, broadcasts and many dims, every dtype': (dev) => {
    for (const dt of [...REAL, 'complex64'] as DTypeName[]) {
      const x = dt === 'complex64' ? nbx.complex(rand([3, 5, 7], 'float32'), rand([3, 5, 7], 'float32', { seed: 5 })) as Tensor : rand([3, 5, 7], dt, { special: true });
      const c = (t: Tensor): Tensor => nbx.cat([t, t], 0) as Tensor; // copy_strided on any dtype, strides as given
      compare(dev, `${dt} permute`, (t: Tensor) => c(t.permute(2, 0, 1)), x);
      compare(dev, `${dt} flip`, (t: Tensor) => c(nbx.flip(t, [0, 2]) as Tensor), x);
      compare(dev, `${dt} slice step`, (t: Tensor) => c(t.slice(2, 1, 7, 3)), x);
      compare(dev, `${dt} expand`, (t: Tensor) => c(t.slice(1, 0, 1).expand([3, 6, 7])), x);
      compare(dev, `${dt} 0-d stack`, (t: Tensor) => nbx.stack([t.select(0, 1).select(0, 2).select(0, 3), t.select(0, 0).select(0, 0).select(0, 0)]), x);
    }
    const big = rand([2, 3, 2, 3, 2, 3, 4], 'float32');
    compare(dev, '7-d permute', (t: Tensor) => nbx.cat([t.permute(6, 0, 5, 1, 4, 2, 3)], 0), big);
    compare(dev, 'empty', (t: Tensor) => nbx.cat([t.slice(0, 0, 0), t.slice(0, 0, 0)], 1), big);
  },
  'copy_strided: transposes through shared memory, widened rows, fills': (dev) => {
    for (const dt of ['uint8', 'float16', 'float32', 'float64'] as DTypeName[]) {
      const m = rand([sz(300, 70), sz(257, 45)], dt);
      compare(dev, `${dt} transpose`, (t: Tensor) => t.t().contiguous(), m);
      compare(dev, `${dt} batched transpose`, (t: Tensor) => nbx.cat([t.reshape([sz(3, 2), -1, sz(257, 45)]).transpose(1, 2)], 0), m.slice(0, 0, sz(300, 70) - (sz(300, 70) % sz(3, 2))));
      compare(dev, `${dt} into a transposed view`, (t: Tensor) => nbx.stack([t, t], 2), m);
      // rows contiguous on both sides at 16-byte multiples, and at odd offsets
      const r = rand([sz(64, 8), sz(96, 32)], dt);
      compare(dev, `${dt} cat rows`, (a: Tensor) => nbx.cat([a, a.slice(1, 8, 40), a.slice(1, 1, 3)], 1), r);
      compare(dev, `${dt} repeat`, (a: Tensor) => a.repeat(2, 1, 3), r.slice(1, 0, 8));
    }
    const x = rand([2, 3, 5, 6], 'float32');
    for (const mode of ['constant', 'reflect', 'replicate', 'circular']) {
      compare(dev, `pad ${mode}`, (t: Tensor) => nbx.nn.functional.pad(t, [1, 2, 2, 1], { mode }), x);
    }
    compare(dev, 'roll', (t: Tensor) => nbx.roll(t, [1, -2], [0, 2]), x);
    compare(dev, 'pixel_shuffle', (t: Tensor) => nbx.nn.functional.pixel_shuffle(t, 2), rand([2, 8, 3, 4], 'float16'));
    compare(dev, 'unfold', (t: Tensor) => nbx.nn.functional.unfold(t, [2, 3], { stride: [1, 2], padding: [1, 0] }), rand([2, 3, 6, 7], 'bfloat16'));
    compare(dev, 'tensor unfold', (t: Tensor) => t.unfold(1, 3, 2).contiguous(), rand([3, 10], 'int64'));
    compare(dev, 'tril/triu', (t: Tensor) => [nbx.tril(t, -1), nbx.triu(t, 1)], rand([5, 6], 'int32'));
  },
  'gather family: every dtype, int32/int64 indices, wrap, broadcast, errors': (dev) => {
    for (const dt of [...REAL, 'complex64'] as DTypeName[]) {
      const x = dt === 'complex64' ? nbx.complex(rand([5, 6], 'float32'), rand([5, 6], 'float32', { seed: 3 })) as Tensor : rand([5, 6], dt, { special: true });
      compare(dev, `${dt} gather`, (t: Tensor, i: Tensor) => nbx.gather(t, 1, i), x, idx([5, 9], 0, 6));
      compare(dev, `${dt} gather dim0`, (t: Tensor, i: Tensor) => nbx.gather(t, 0, i), x, idx([7, 4], 0, 5));
      compare(dev, `${dt} index_select int32`, (t: Tensor, i: Tensor) => nbx.index_select(t, 0, i), x, idx([8], 0, 5, 3, 'int32'));
      compare(dev, `${dt} take`, (t: Tensor, i: Tensor) => nbx.take(t, i), x, idx([3, 4], -30, 30));
      compare(dev, `${dt} take_along_dim`, (t: Tensor, i: Tensor) => nbx.take_along_dim(t, i, { dim: 1 }), x, idx([1, 4], 0, 6));
    }
    const w = rand([sz(1000, 50), sz(64, 16)], 'bfloat16');
    compare(dev, 'embedding', (t: Tensor, i: Tensor) => nbx.nn.functional.embedding(i, t), w, idx([3, sz(500, 20)], 0, sz(1000, 50)));
    compare(dev, 'repeat_interleave', (t: Tensor, r: Tensor) => nbx.repeat_interleave(t, r, { dim: 1 }), rand([4, 5], 'int16'), idx([5], 0, 4));
    compare(dev, 'gather 0-d', (t: Tensor, i: Tensor) => nbx.gather(t, 0, i), rand([], 'float32'), idx([], 0, 1));
    compare(dev, 'gather empty', (t: Tensor, i: Tensor) => nbx.gather(t, 1, i), rand([5, 6], 'float32'), idx([5, 0], 0, 6));
    // errors: the first offending index in row-major order, as the CPU names it
    compare(dev, 'gather out of range', (t: Tensor, i: Tensor) => nbx.gather(t, 1, i), rand([3, 4], 'float32'), Tensor.fromStorage(BigInt64Array.from([0n, 4n, 1n, 1n, 9n, 3n]), 'int64', [3, 2]));
    compare(dev, 'index_select negative', (t: Tensor, i: Tensor) => nbx.index_select(t, 0, i), rand([3, 4], 'float32'), Tensor.fromStorage(BigInt64Array.from([0n, -1n]), 'int64', [2]));
    compare(dev, 'take out of range', (t: Tensor, i: Tensor) => nbx.take(t, i), rand([3, 4], 'float32'), Tensor.fromStorage(BigInt64Array.from([0n, -13n]), 'int64', [2]));
    compare(dev, 'index_select wide rows out of range', (t: Tensor, i: Tensor) => nbx.index_select(t, 0, i), rand([4, 16], 'float32'), Tensor.fromStorage(BigInt64Array.from([0n, 3n, 5n, 1n]), 'int64', [4]));
    compare(dev, 'embedding out of range', (t: Tensor, i: Tensor) => nbx.nn.functional.embedding(i, t), rand([10, 4], 'float32'), Tensor.fromStorage(BigInt64Array.from([0n, 11n]), 'int64', [1, 2]));
  },
  'scatter: every reduction and dtype, duplicates, include_self, both paths': (dev) => {
    const shapes: [number[], number[], number][] = [
      [[6, 7], [6, 12], 1], // many short columns: the ordered column kernel
      [[9, 5], [14, 5], 0],
      [[2, sz(300, 40)], [2, sz(5000, 300)], 1], // few long columns: parallel passes for ints / overwrite
    ];
    for (const dt of REAL) {
      for (const [xs, is, d] of shapes) {
        const x = rand(xs, dt, { lo: -3, hi: 4, step: dt.startsWith('float') || dt === 'bfloat16' ? 0.25 : 1 });
        const i = idx(is, 0, xs[d]!, 11);
        const s = rand(is, dt, { lo: -3, hi: 4, step: DTYPES[dt].kind === 'float' ? 0.25 : 1, seed: 99 });
        const tag = `${dt} ${xs} <- ${is} dim ${d}`;
        compare(dev, `${tag} scatter`, (a: Tensor, b: Tensor, c: Tensor) => nbx.scatter(a, d, b, c), x, i, s);
        compare(dev, `${tag} scatter value`, (a: Tensor, b: Tensor) => nbx.scatter(a, d, b, { value: dt === 'bool' ? 1 : 3 }), x, i);
        compare(dev, `${tag} scatter_add`, (a: Tensor, b: Tensor, c: Tensor) => nbx.scatter_add(a, d, b, c), x, i, s);
        for (const red of ['sum', 'prod', 'mean', 'amax', 'amin']) {
          for (const include_self of [true, false]) {
            compare(dev, `${tag} scatter_reduce ${red} ${include_self}`, (a: Tensor, b: Tensor, c: Tensor) => nbx.scatter_reduce(a, d, b, c, red, { include_self }), x, i, s);
          }
        }
      }
    }
    // NaN and signed zeros in max/min, and long float accumulations (order matters for the bits)
    const f = rand([3, 4], 'float32', { special: true }), fi = idx([3, 40], 0, 4, 5), fs = rand([3, 40], 'float32', { special: true, seed: 8 });
    for (const red of ['sum', 'prod', 'amax', 'amin', 'mean']) compare(dev, `special ${red}`, (a: Tensor, b: Tensor, c: Tensor) => nbx.scatter_reduce(a, 1, b, c, red), f, fi, fs);
    compare(dev, 'scatter out of range', (a: Tensor, b: Tensor, c: Tensor) => nbx.scatter(a, 1, b, c), rand([3, 4], 'float32'), Tensor.fromStorage(BigInt64Array.from([0n, 1n, 2n, 7n, 1n, -1n]), 'int64', [3, 2]), rand([3, 2], 'float32'));
    compare(dev, 'scatter parallel out of range', (a: Tensor, b: Tensor, c: Tensor) => nbx.scatter_add(a, 1, b, c), rand([1, 40], 'int32'),
      Tensor.fromStorage(BigInt64Array.from({ length: 300 }, (_, k) => (k === 200 || k === 250 ? 40n + BigInt(k) : BigInt(k % 40))), 'int64', [1, 300]), rand([1, 300], 'int32'));
  },
  'half-type reductions: float32 accumulation (scatter family, index_add as scatter_add), per-add rounding (index_add, index_put)': (dev) => {
    for (const dt of ['float16', 'bfloat16'] as DTypeName[]) {
      const fine = { lo: -9, hi: 9, step: 1 / 256 };
      const x = rand([5, 20], dt, fine), i = idx([5, 30], 0, 20, 13), s = rand([5, 30], dt, { ...fine, seed: 31 });
      compare(dev, `${dt} scatter_add`, (a: Tensor, b: Tensor, c: Tensor) => nbx.scatter_add(a, 1, b, c), x, i, s);
      compare(dev, `${dt} scatter multiply`, (a: Tensor, b: Tensor, c: Tensor) => nbx.scatter(a, 1, b, c, { reduce: 'multiply' }), x, i, rand([5, 30], dt, { lo: -2, hi: 2, step: 1 / 256, seed: 32 }));
      for (const red of ['sum', 'mean']) {
        for (const include_self of [true, false]) compare(dev, `${dt} scatter_reduce ${red} ${include_self}`, (a: Tensor, b: Tensor, c: Tensor) => nbx.scatter_reduce(a, 1, b, c, red, { include_self }), x, i, s);
      }
      const xr = rand([20, 6], dt, fine), rows = idx([40], 0, 20, 14), sr = rand([40, 6], dt, { ...fine, seed: 33 });
      const v = rand([20], dt, fine), sv = rand([40], dt, { ...fine, seed: 34 });
      for (const alpha of [1, 0.5]) {
        compare(dev, `${dt} index_add dim 0 alpha ${alpha}`, (a: Tensor, b: Tensor, c: Tensor) => nbx.index_add(a, 0, b, c, { alpha }), xr, rows, sr);
        compare(dev, `${dt} index_add 1-d alpha ${alpha}`, (a: Tensor, b: Tensor, c: Tensor) => nbx.index_add(a, 0, b, c, { alpha }), v, rows, sv);
      }
    }
  },
  'index ops: index_add alpha, index_copy, index_fill, index_put, one_hot, masked_scatter': (dev) => {
    for (const dt of REAL) {
      const x = rand([6, 5], dt);
      const rows = idx([9], 0, 6, 4);
      const src = rand([9, 5], dt, { seed: 21 });
      if (dt !== 'bool') compare(dev, `${dt} index_add`, (a: Tensor, b: Tensor, c: Tensor) => nbx.index_add(a, 0, b, c, { alpha: DTYPES[dt].kind === 'float' ? 0.5 : 3 }), x, rows, src);
      compare(dev, `${dt} index_copy`, (a: Tensor, b: Tensor, c: Tensor) => nbx.index_copy(a, 0, b, c), x, idx([4], 0, 6, 9), rand([4, 5], dt, { seed: 2 }));
      compare(dev, `${dt} index_fill`, (a: Tensor, b: Tensor) => nbx.index_fill(a, 1, b, dt === 'bool' ? 1 : 2), x, idx([3], -5, 5, 1));
      compare(dev, `${dt} index_put acc`, (a: Tensor, b: Tensor, c: Tensor, v: Tensor) => nbx.index_put(a, [b, c], v, true), x, idx([sz(400, 40)], 0, 6, 2), idx([sz(400, 40)], -5, 5, 3), rand([sz(400, 40)], dt, { seed: 4 }));
      compare(dev, `${dt} index_put`, (a: Tensor, b: Tensor, v: Tensor) => nbx.index_put(a, [b], v), x, idx([3], 0, 6, 12), rand([3, 5], dt, { seed: 5 }));
      compare(dev, `${dt} index_put mask`, (a: Tensor, m: Tensor, v: Tensor) => nbx.index_put(a, [m], v), x, rand([6, 5], 'bool', { seed: 6 }), rand([], dt, { seed: 7 }));
      compare(dev, `${dt} index_put columns`, (a: Tensor, b: Tensor, v: Tensor) => nbx.index_put(a, [null, b], v, true), x, idx([7], -5, 5, 8), rand([6, 7], dt, { seed: 9 }));
      compare(dev, `${dt} masked_scatter`, (a: Tensor, m: Tensor, s: Tensor) => nbx.masked_scatter(a, m, s), x, rand([5], 'bool', { seed: 10 }), rand([40], dt, { seed: 11 }));
    }
    // rows of whole 16-byte words: the overwrite moves wide words (KV-cache style writes)
    for (const dt of ['bfloat16', 'float32', 'int64', 'uint8'] as DTypeName[]) {
      const cache = rand([2, 12, 32], dt);
      compare(dev, `${dt} index_put rows`, (a: Tensor, b: Tensor, v: Tensor) => nbx.index_put(a, [null, b], v), cache, idx([3], 0, 12, 15), rand([2, 3, 32], dt, { seed: 16 }));
      compare(dev, `${dt} index_copy rows`, (a: Tensor, b: Tensor, v: Tensor) => nbx.index_copy(a, 1, b, v), cache, idx([5], 0, 12, 17), rand([2, 5, 32], dt, { seed: 18 }));
      compare(dev, `${dt} index_put rows out of range`, (a: Tensor, b: Tensor, v: Tensor) => nbx.index_put(a, [null, b], v), cache,
        Tensor.fromStorage(BigInt64Array.from([1n, 12n, 3n]), 'int64', [3]), rand([2, 3, 32], dt, { seed: 19 }));
    }
    const big = rand([sz(200000, 3000)], 'float32');
    compare(dev, 'index_put into a long vector (one column)', (a: Tensor, b: Tensor, v: Tensor) => nbx.index_put(a, [b], v), big, idx([sz(50000, 1000)], 0, sz(200000, 3000), 13), rand([sz(50000, 1000)], 'float32', { seed: 14 }));
    compare(dev, 'one_hot', (t: Tensor) => nbx.nn.functional.one_hot(t, 7), idx([4, 5], 0, 7));
    compare(dev, 'index_put out of range', (a: Tensor, b: Tensor, c: Tensor, v: Tensor) => nbx.index_put(a, [b, c], v), rand([4, 5], 'float32'),
      Tensor.fromStorage(BigInt64Array.from([0n, 1n, -4n]), 'int64', [3]), Tensor.fromStorage(BigInt64Array.from([0n, 9n, 1n]), 'int64', [3]), rand([3], 'float32'));
    compare(dev, 'index_put int32 out of range', (a: Tensor, b: Tensor, v: Tensor) => nbx.index_put(a, [b], v), rand([4, 5], 'float32'),
      Tensor.fromStorage(Int32Array.from([0, -5]), 'int32', [2]), rand([2, 5], 'float32'));
  },
  'nonzero, argwhere, masked_select: every dtype, -0, NaN, broadcast masks, long inputs': (dev) => {
    // complex tensors: nonzero counts with the reduce kernel, which has no complex variant on cuda (a typed error)
    for (const dt of [...REAL] as DTypeName[]) {
      const x = dt === 'complex64' ? nbx.complex(rand([4, 6], 'float32', { lo: -1, hi: 2, step: 1 }), rand([4, 6], 'float32', { lo: -1, hi: 2, step: 1, seed: 4 })) as Tensor
        : rand([4, 6], dt, { lo: -1, hi: 2, step: 1, special: true });
      compare(dev, `${dt} nonzero`, (t: Tensor) => nbx.nonzero(t), x);
      compare(dev, `${dt} nonzero tuple`, (t: Tensor) => nbx.nonzero(t, { as_tuple: true }), x);
      compare(dev, `${dt} argwhere 3-d`, (t: Tensor) => nbx.argwhere(t.reshape([2, 3, 4]).transpose(0, 2)), x);
      compare(dev, `${dt} masked_select`, (t: Tensor, m: Tensor) => nbx.masked_select(t, m), x, rand([6], 'bool', { seed: 3 }));
    }
    compare(dev, 'nonzero 0-d', (t: Tensor) => nbx.nonzero(t), rand([], 'float32', { lo: 1, hi: 2 }));
    compare(dev, 'nonzero empty', (t: Tensor) => nbx.nonzero(t), rand([0, 3], 'float32'));
    compare(dev, 'nonzero none', (t: Tensor) => nbx.nonzero(t), nbx.zeros([5, 5]));
    const long = rand([sz(3, 2), sz(100000, 3000)], 'float16', { lo: -1, hi: 60, step: 1 });
    compare(dev, 'nonzero long', (t: Tensor) => nbx.nonzero(t), long);
    compare(dev, 'masked_select long', (t: Tensor, m: Tensor) => nbx.masked_select(t, m), long, rand([sz(100000, 3000)], 'bool', { seed: 17 }));
    compare(dev, 'masked_select empty', (t: Tensor, m: Tensor) => nbx.masked_select(t, m), rand([3, 4], 'int8'), nbx.zeros([3, 4], { dtype: 'bool' }));
  },
};

/** Family kernels: none of them may run through host staging on the device. */
export function assertNoStaging(names: string[]): void {
  const stats = nbx.cuda.hostStagingStats();
  const staged = names.filter((n) => n in stats);
  assert.deepEqual(staged, [], `kernels ran through host staging: ${staged.join(', ')}`);
}

const isMain = process.argv[1] !== undefined && import.meta.url === pathToFileURL(process.argv[1]).href;
if (isMain && !SIM) {
  const probe = probeCuda();
  const skip = probe.available ? false : `no CUDA device (${probe.reason}): CUDA indexing tests not run`;
  for (const [name, check] of Object.entries(indexingChecks)) test(name, { skip }, () => check('cuda'));
  test('no shape/indexing kernel ran through host staging', { skip }, () =>
    assertNoStaging(['copy_strided', 'gather', 'scatter', 'linear_index', 'nonzero', 'masked_select', 'masked_scatter']));
}
