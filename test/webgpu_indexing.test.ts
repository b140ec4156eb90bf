// WebGPU's native indexing, resampling, loss and integer kernels against the CPU backend (the reference)
// on random inputs: gather/scatter (every reduction, every dtype, strided views, empty tensors,
// out-of-range indices raising IndexError at the next read), interpolate, grid_sample, nll_loss,
// local_response_norm, integer conv/pool/GEMM. Index tensors are int32 (int64 cannot live on webgpu).
// Host staging is refused here, so each kernel must be native. Without an adapter every test is skipped,
// with a message saying so.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import * as nbx from '../src/index.js';
import { Tensor } from '../src/tensor/tensor.js';
import { kernel } from '../src/kernels/registry.js';
import { DeviceLimitError, IndexError } from '../src/errors.js';
import type { DTypeName } from '../src/dtype/dtypes.js';
import type { StridedRef } from '../src/backend/backend.js';
import type { ScatterMode } from '../src/kernels/indexing.js';

process.env.NBX_WEBGPU_HOST_STAGING = '0';
const probe = await nbx.webgpu.probe();
const skip = probe.available ? false : `no WebGPU adapter (${probe.reason})`;
if (skip) process.stdout.write(`# webgpu indexing tests NOT RUN: ${skip}. gather/scatter/resample/loss/integer kernel tests were skipped.\n`);
const it = (name: string, fn: () => Promise<void>): void => { test(name, { skip }, fn); };

type T = Tensor;
const G = 'webgpu';
const up = (t: T): T => t.to(G);
const F = nbx.nn.functional as unknown as Record<string, (...a: unknown[]) => T>;

let seed = 12345;
const rand = (): number => { seed = (seed * 1664525 + 1013904223) % 4294967296; return seed / 4294967296; };
/** Random values suiting `dtype` (small integers for ints, so products stay exact in float32 too). */
function data(shape: number[], dtype: DTypeName, lo = -4, hi = 4): T {
  const n = shape.reduce((a, b) => a * b, 1);
  const v = Array.from({ length: n }, () => {
    const r = rand();
    if (dtype === 'bool') return r > 0.5 ? 1 : 0;
    if (dtype === 'uint8') return Math.floor(r * 256);
    if (dtype === 'int8') return Math.floor(r * 256) - 128;
    if (dtype === 'int16') return Math.floor(r * 65536) - 32768;
    if (dtype === 'int32') return Math.floor(r * 2e6) - 1e6;
    return Math.round((lo + r * (hi - lo)) * 1000) / 1000;
  });
  const t = nbx.tensor(v, { dtype: nbx.float32 }).reshape(shape);
  return dtype === 'float32' ? t : t.to(dtype);
}
const ints = (shape: number[], lo: number, hi: number): T =>
  nbx.tensor(Array.from({ length: shape.reduce((a, b) => a * b, 1) }, () => lo + Math.floor(rand() * (hi - lo))), { dtype: nbx.int32 }).reshape(shape);

/** GPU result equals the CPU's: exactly, or within rtol (relative, floor 1) for floats. */
async function same(gpu: T, cpu: T, rtol = 0, what = ''): Promise<void> {
  assert.equal(gpu.device.type, 'webgpu', `${what}: on ${gpu.device}`);
  assert.equal(gpu.dt, cpu.dt, `${what}: dtype`);
  assert.deepEqual([...gpu.shape], [...cpu.shape], `${what}: shape`);
  const g = await gpu.data(), c = cpu.dataSync();
  const lanes = cpu.dt === 'complex64' ? 2 : 1;
  for (let i = 0; i < c.length; i++) {
    const x = Number(g[i]), y = Number(c[i]);
    if (Number.isNaN(y)) { assert.ok(Number.isNaN(x), `${what}[${i}]: got ${x}, want NaN`); continue; }
    if (rtol === 0 || !Number.isFinite(y)) assert.ok(x === y, `${what}[${Math.floor(i / lanes)}]: got ${x}, want ${y}`);
    else assert.ok(Math.abs(x - y) <= rtol * Math.max(1, Math.abs(y)), `${what}[${i}]: got ${x}, want ${y} (rtol ${rtol})`);
  }
}
/** The error a pending result raises when read. */
async function raises(t: () => T, cls: new (...a: never[]) => Error, msg: RegExp): Promise<void> {
  await assert.rejects(async () => { await t().data(); }, (e: Error) => e instanceof cls && msg.test(e.message));
}

const DTYPES: DTypeName[] = ['float32', 'float16', 'bfloat16', 'int32', 'int16', 'int8', 'uint8', 'bool'];

it('index_select / embedding gather every dtype from strided views with int32 indices', async () => {
  for (const d of DTYPES) {
    const x = data([5, 7], d).t(); // a transposed (strided) view
    const idx = ints([9], 0, 7);
    for (const dim of [0, 1]) {
      const i = dim === 0 ? idx : ints([4], 0, 5);
      await same(nbx.index_select(up(x), dim, up(i)), nbx.index_select(x, dim, i), 0, `index_select ${d} dim ${dim}`);
    }
    await same(nbx.index_select(up(x), 0, up(ints([0], 0, 1))), nbx.index_select(x, 0, ints([0], 0, 1)), 0, `empty ${d}`);
  }
  const w = data([10, 6], 'float32'), ids = ints([3, 4], 0, 10);
  await same(F.embedding!(up(ids), up(w)), F.embedding!(ids, w), 0, 'embedding');
  // a complex table moves as pairs of words
  const c = nbx.complex(data([4, 3], 'float32'), data([4, 3], 'float32'));
  await same(nbx.index_select(up(c), 0, up(nbx.tensor([3, 0, 3], { dtype: nbx.int32 }))), nbx.index_select(c, 0, nbx.tensor([3, 0, 3], { dtype: nbx.int32 })), 0, 'complex64');
});

it('gather kernel: any index strides, negative indices wrapped for take, out of range raising IndexError', async () => {
  const x = data([4, 6, 5], 'float32');
  const idx = ints([5, 4, 3], -6, 6).permute([1, 0, 2]); // [4, 5, 3], strided
  for (const wrap of [false, true]) {
    const run = (xx: T, ii: T, dev: string): T => {
      const out = Tensor.empty([4, 5, 3], 'float32', dev === 'cpu' ? xx.device : up(Tensor.empty([1], 'float32')).device);
      const i = wrap ? ii : nbx.remainder(ii, 6);
      kernel('gather', xx.device, 'gather')(xx.ref(), 1, i.ref(), out.ref(), 'gather', wrap);
      return out;
    };
    await same(run(up(x), up(idx), G), run(x, idx, 'cpu'), 0, `gather wrap=${wrap}`);
  }
  await raises(() => nbx.index_select(up(x), 2, up(nbx.tensor([1, 5, 0], { dtype: nbx.int32 }))), IndexError, /index 5 is out of bounds for dimension 2 with size 5/);
  await raises(() => nbx.index_select(up(x), 0, up(nbx.tensor([1, -1], { dtype: nbx.int32 }))), IndexError, /index -1 is out of bounds for dimension 0 with size 4/);
  // the device keeps working after a reported error
  await same(nbx.index_select(up(x), 0, up(nbx.tensor([3], { dtype: nbx.int32 }))), nbx.index_select(x, 0, nbx.tensor([3], { dtype: nbx.int32 })), 0, 'after error');
});

it('linear_index kernel: int32 linear indices (negative wrapped), broadcast index views, errors name the dim', async () => {
  const sizes = [4, 7, 3], dims = [0, 2, 3];
  const a = ints([5, 1], -4, 4), b = ints([1, 6], -7, 7), c = ints([5, 6], 0, 3);
  const B = [5, 6];
  const view = (t: T): StridedRef => { const r = t.ref(); return { ...r, shape: B, strides: t.shape.map((s, k) => (s === 1 ? 0 : r.strides[k]!)) }; };
  const cpu = Tensor.empty(B, 'int64', a.device);
  kernel('linear_index', 'cpu', 'index_put')([a, b, c].map(view), sizes, cpu.ref(), 'index_put', dims);
  const gpu = Tensor.empty(B, 'int32', up(a).device);
  kernel('linear_index', G, 'index_put')([up(a), up(b), up(c)].map(view), sizes, gpu.ref(), 'index_put', dims);
  await same(gpu, cpu.to('int32'), 0, 'linear_index');
  const bad = Tensor.empty([2], 'int32', up(a).device);
  const i0 = up(nbx.tensor([1, 2], { dtype: nbx.int32 })), i1 = up(nbx.tensor([0, 9], { dtype: nbx.int32 }));
  kernel('linear_index', G, 'index_put')([i0.ref(), i1.ref()], [4, 7], bad.ref(), 'index_put', [1, 2]);
  await raises(() => bad, IndexError, /index 9 is out of bounds for dimension 2 with size 7/);
});

it('empty inputs: nothing dispatched, CPU-equal results', async () => {
  const x = F.log_softmax!(data([0, 5], 'float32'), 1), t = nbx.tensor([], { dtype: nbx.uint8 });
  for (const reduction of ['none', 'sum', 'mean']) await same(F.nll_loss!(up(x), up(t), { reduction }), F.nll_loss!(x, t, { reduction }), 0, `nll_loss empty ${reduction}`);
  const g = data([1, 0, 3, 2], 'float32'), xi = data([1, 2, 4, 4], 'float32');
  await same(F.grid_sample!(up(xi), up(g), { align_corners: false }), F.grid_sample!(xi, g, { align_corners: false }), 0, 'grid_sample empty grid');
  await same(nbx.index_add(up(data([0, 3], 'float32')), 1, up(ints([2], 0, 3)), up(data([0, 2], 'float32'))), nbx.index_add(data([0, 3], 'float32'), 1, ints([2], 0, 3), data([0, 2], 'float32')), 0, 'index_add empty');
});

it('int64 index tensors live on webgpu (emulated: two words; see webgpu_int64.test.ts)', async () => {
  assert.deepEqual([...await up(nbx.tensor([0, 1])).data()], [0n, 1n]);
});

/** scatter through the kernel on both devices: out (cloned), int32 index, src. */
function scatterBoth(x: T, dim: number, idx: T, src: T, mode: string, opts: Record<string, unknown>): [T, T] {
  const run = (xx: T, ii: T, ss: T): T => {
    const out = xx.clone();
    kernel('scatter', xx.device, 'scatter')(out.ref(), dim, ii.ref(), ss.ref(), mode as ScatterMode, { op: 'scatter', ...opts });
    return out;
  };
  return [run(up(x), up(idx), up(src)), run(x, idx, src)];
}

it('scatter: overwrite (last write wins) and every reduction, include_self, across dtypes', async () => {
  for (const d of DTYPES) {
    const x = data([4, 5], d), src = data([6, 5], d);
    const idx = ints([6, 5], 0, 4);
    const modes = d === 'bool' ? ['none', 'sum', 'prod', 'amax', 'amin'] : ['none', 'sum', 'prod', 'mean', 'amax', 'amin'];
    for (const mode of modes) {
      for (const includeSelf of [true, false]) {
        const [g, c] = scatterBoth(x, 0, idx, src, mode, { includeSelf });
        await same(g, c, d === 'float32' ? 1e-6 : d === 'float16' || d === 'bfloat16' ? 1e-2 : 0, `scatter ${d} ${mode} self=${includeSelf}`);
      }
    }
  }
  // few long columns: the parallel passes (last writer wins; integer reductions through atomics)
  for (const d of ['float32', 'int32', 'int8', 'int16', 'uint8', 'bool'] as DTypeName[]) {
    const x = data([9, 3], d), src = data([200, 3], d), idx = ints([200, 3], -9, 9);
    const modes = d === 'float32' ? ['none'] : d === 'bool' ? ['none', 'sum', 'prod', 'amax', 'amin'] : ['none', 'sum', 'prod', 'mean', 'amax', 'amin'];
    for (const mode of modes) {
      for (const includeSelf of mode === 'none' ? [true] : [true, false]) {
        const [g, c] = scatterBoth(x, 0, idx, src, mode, { includeSelf, wrap: true });
        await same(g, c, 0, `parallel scatter ${d} ${mode} self=${includeSelf}`);
      }
    }
  }
  const [ga, ca] = scatterBoth(data([9, 3], 'int16'), 0, ints([200, 3], 0, 9), data([200, 3], 'int16'), 'sum', { alpha: 3 });
  await same(ga, ca, 0, 'parallel scatter alpha');
  const bad = up(data([9, 3], 'int32'));
  kernel('scatter', G, 'scatter')(bad.ref(), 0, up(nbx.tensor([...Array(99).fill(1), 12, 13, 0].map((v) => [v, 0, 0]), { dtype: nbx.int32 })).ref(),
    up(data([102, 3], 'int32')).ref(), 'sum', { op: 'scatter' });
  await raises(() => bad, IndexError, /index 12 is out of bounds for dimension 0 with size 9/);
  // along the last dim, a strided index and source, an empty index
  const x = data([3, 8], 'float32'), src = data([5, 3], 'float32').t(), idx = ints([5, 3], 0, 8).t();
  for (const mode of ['none', 'sum', 'amax']) {
    const [g, c] = scatterBoth(x, 1, idx, src, mode, {});
    await same(g, c, 1e-6, `scatter dim 1 ${mode}`);
  }
  const [g0, c0] = scatterBoth(x, 1, ints([3, 0], 0, 1), data([3, 0], 'float32'), 'sum', {});
  await same(g0, c0, 0, 'empty index');
  // int32 exact wrap-around of sums and products
  const big = nbx.tensor([[2147483000, -2147483000, 65536]], { dtype: nbx.int32 });
  const [gs, cs] = scatterBoth(big, 0, nbx.tensor([[0, 0, 0], [0, 0, 0]], { dtype: nbx.int32 }), nbx.tensor([[1000, -1000, 65536], [7, 7, 3]], { dtype: nbx.int32 }), 'sum', {});
  await same(gs, cs, 0, 'int32 wrap sum');
  const [gp, cp] = scatterBoth(big, 0, nbx.tensor([[0, 0, 0]], { dtype: nbx.int32 }), nbx.tensor([[3, 5, 65536]], { dtype: nbx.int32 }), 'prod', {});
  await same(gp, cp, 0, 'int32 wrap prod');
});

it('index_add with int32 indices and alpha; out-of-range scatter indices raise IndexError', async () => {
  for (const d of ['float32', 'int32', 'int8', 'float16'] as DTypeName[]) {
    const x = data([5, 4], d), src = data([5, 3], d), idx = nbx.tensor([1, 1, 3], { dtype: nbx.int32 });
    await same(nbx.index_add(up(x), 1, up(idx), up(src), { alpha: 2 }), nbx.index_add(x, 1, idx, src, { alpha: 2 }), d === 'float16' ? 1e-2 : 1e-6, `index_add ${d}`);
  }
  const x = data([5, 4], 'float32');
  await raises(() => nbx.index_add(up(x), 0, up(nbx.tensor([0, 5], { dtype: nbx.int32 })), up(data([2, 4], 'float32'))), IndexError,
    /index 5 is out of bounds for dimension 0 with size 5/);
  const g = up(x).clone();
  kernel('scatter', G, 'scatter')(g.ref(), 0, up(nbx.tensor([[0, 1, 2, 3], [4, 9, 0, -2]], { dtype: nbx.int32 })).ref(), up(data([2, 4], 'float32')).ref(), 'sum', { op: 'scatter' });
  await raises(() => g, IndexError, /index 9 is out of bounds for dimension 0 with size 5/); // row-major first failure
});

it('interpolate: every mode, align_corners, antialias, 3-D/4-D/5-D, uint8 nearest exact', async () => {
  const cases: [number[], Record<string, unknown>][] = [
    [[2, 3, 9], { scale_factor: 2.5, mode: 'linear' }],
    [[2, 3, 9], { size: 4, mode: 'nearest' }],
    [[1, 2, 7, 6], { size: [11, 4], mode: 'bilinear', align_corners: true }],
    [[1, 2, 7, 6], { size: [3, 13], mode: 'bilinear', align_corners: false }],
    [[1, 2, 7, 6], { size: [10, 9], mode: 'bicubic', align_corners: false }],
    [[1, 2, 12, 10], { size: [5, 4], mode: 'bilinear', antialias: true }],
    [[1, 2, 12, 10], { size: [5, 3], mode: 'bicubic', antialias: true }],
    [[1, 2, 7, 6], { scale_factor: 1.7, mode: 'nearest-exact' }],
    [[1, 2, 4, 5, 3], { size: [6, 3, 7], mode: 'trilinear', align_corners: true }],
    [[1, 2, 4, 5, 3], { scale_factor: 2, mode: 'nearest' }],
    [[2, 3, 8, 8], { size: [3, 5], mode: 'area' }],
  ];
  for (const [shape, kw] of cases) {
    const x = data(shape, 'float32');
    await same(F.interpolate!(up(x), kw), F.interpolate!(x, kw), 2e-5, `interpolate ${JSON.stringify(kw)}`);
  }
  const u8 = data([1, 3, 5, 7], 'uint8');
  await same(F.interpolate!(up(u8), { size: [9, 4], mode: 'nearest' }), F.interpolate!(u8, { size: [9, 4], mode: 'nearest' }), 0, 'uint8 nearest');
  const h = data([1, 2, 5, 6], 'float16');
  await same(F.interpolate!(up(h), { size: [8, 8], mode: 'bilinear' }), F.interpolate!(h, { size: [8, 8], mode: 'bilinear' }), 1e-2, 'float16 bilinear');
});

it('grid_sample: modes x padding x align_corners, 4-D and 5-D, grid points outside', async () => {
  const x4 = data([2, 3, 5, 6], 'float32'), g4 = data([2, 4, 7, 2], 'float32', -1.3, 1.3);
  const x5 = data([1, 2, 3, 4, 5], 'float32'), g5 = data([1, 2, 3, 4, 3], 'float32', -1.3, 1.3);
  for (const mode of ['bilinear', 'nearest', 'bicubic']) {
    for (const padding_mode of ['zeros', 'border', 'reflection']) {
      for (const align_corners of [false, true]) {
        const kw = { mode, padding_mode, align_corners };
        await same(F.grid_sample!(up(x4), up(g4), kw), F.grid_sample!(x4, g4, kw), 1e-4, `grid_sample 4-D ${JSON.stringify(kw)}`);
        if (mode !== 'bicubic') await same(F.grid_sample!(up(x5), up(g5), kw), F.grid_sample!(x5, g5, kw), 1e-4, `grid_sample 5-D ${JSON.stringify(kw)}`);
        // half types round every step as the CPU (PyTorch computes in them): bit for bit
        for (const d of ['float16', 'bfloat16'] as DTypeName[]) {
          const [h4, k4, h5, k5] = [x4, g4, x5, g5].map((t) => t.to(d));
          await same(F.grid_sample!(up(h4!), up(k4!), kw), F.grid_sample!(h4, k4, kw), 0, `grid_sample 4-D ${d} ${JSON.stringify(kw)}`);
          if (mode !== 'bicubic') await same(F.grid_sample!(up(h5!), up(k5!), kw), F.grid_sample!(h5, k5, kw), 0, `grid_sample 5-D ${d} ${JSON.stringify(kw)}`);
        }
      }
    }
  }
});

it('half-type scatter reductions bit for bit: float32 accumulation (scatter family, index_add as scatter_add), per-add rounding (index_add, index_put)', async () => {
  for (const d of ['float16', 'bfloat16'] as DTypeName[]) {
    const x = data([5, 20], d, -9, 9), i = ints([5, 30], 0, 20).to('int64'), s = data([5, 30], d, -3, 3);
    const xr = data([20, 6], d, -9, 9), rows = ints([40], 0, 20).to('int64'), sr = data([40, 6], d);
    const v = data([20], d, -9, 9), sv = data([40], d);
    const cases: [string, (...a: T[]) => T, T[]][] = [
      ['scatter_add', (a, b, c) => nbx.scatter_add(a, 1, b, c), [x, i, s]],
      ['scatter add', (a, b, c) => nbx.scatter(a, 1, b, c, { reduce: 'add' }), [x, i, s]],
      ['scatter multiply', (a, b, c) => nbx.scatter(a, 1, b, c, { reduce: 'multiply' }), [x, i, s]],
      ...['sum', 'prod', 'mean', 'amax', 'amin'].flatMap((red) => [true, false].map((include_self) =>
        [`scatter_reduce ${red} ${include_self}`, (a: T, b: T, c: T) => nbx.scatter_reduce(a, 1, b, c, red, { include_self }), [x, i, s]] as [string, (...a: T[]) => T, T[]])),
      ...[1, 0.5].flatMap((alpha) => [
        [`index_add dim 0 alpha ${alpha}`, (a: T, b: T, c: T) => nbx.index_add(a, 0, b, c, { alpha }), [xr, rows, sr]],
        [`index_add 1-d alpha ${alpha}`, (a: T, b: T, c: T) => nbx.index_add(a, 0, b, c, { alpha }), [v, rows, sv]],
      ] as [string, (...a: T[]) => T, T[]][]),
      ['index_put accumulate', (a, b, c, e) => nbx.index_put(a, [b, c], e, true), [x, ints([50], 0, 5).to('int64'), ints([50], 0, 20).to('int64'), data([50], d)]],
    ];
    for (const [what, f, args] of cases) await same(f(...args.map(up)), f(...args), 0, `${d} ${what}`);
  }
});

it('nll_loss (uint8 targets): weights, ignore_index, reductions, spatial; bad targets raise', async () => {
  const x = F.log_softmax!(data([6, 5, 3], 'float32'), 1), t = nbx.tensor([[0, 4, 2], [1, 1, 3], [4, 0, 0], [2, 2, 2], [3, 1, 0], [0, 4, 1]], { dtype: nbx.uint8 });
  const w = data([5], 'float32', 0.1, 2);
  for (const reduction of ['none', 'mean', 'sum']) {
    for (const kw of [{}, { weight: w }, { ignore_index: 2 }, { weight: w, ignore_index: 4 }]) {
      const gk = 'weight' in kw ? { ...kw, weight: up(w), reduction } : { ...kw, reduction };
      await same(F.nll_loss!(up(x), up(t), gk), F.nll_loss!(x, t, { ...kw, reduction }), 1e-5, `nll_loss ${reduction} ${Object.keys(kw)}`);
    }
  }
  const bad = nbx.tensor([[0, 7, 2], [1, 1, 3], [4, 0, 0], [2, 2, 2], [3, 1, 0], [0, 4, 1]], { dtype: nbx.uint8 });
  await raises(() => F.nll_loss!(up(x), up(bad)), IndexError, /Target 7 is out of bounds/);
});

it('local_response_norm over strided 3-D/4-D inputs', async () => {
  for (const [shape, size] of [[[2, 7, 5], 3], [[2, 6, 4, 3], 4], [[1, 3, 2, 2], 9]] as [number[], number][]) {
    const x = data(shape, 'float32');
    await same(F.local_response_norm!(up(x), size, { alpha: 0.3, beta: 0.75, k: 2 }), F.local_response_norm!(x, size, { alpha: 0.3, beta: 0.75, k: 2 }), 1e-5, `lrn ${shape}`);
  }
  const x = data([3, 5, 4, 2], 'float32').permute([0, 1, 3, 2]);
  await same(F.local_response_norm!(up(x), 3), F.local_response_norm!(x, 3), 1e-5, 'lrn strided');
});

it('masked_select / masked_scatter / nonzero kernels: row-major compaction over strided and broadcast operands', async () => {
  // (int8 and the other 1- and 4-byte dtypes run the same programs as bool and float32: raw bits)
  for (const d of ['float32', 'float16', 'bool', 'complex64'] as DTypeName[]) {
    for (const shape of d === 'float32' ? [[3, 5, 4], [70, 81]] : [[70, 81]]) {
      const x = d === 'complex64' ? nbx.complex(data(shape, 'float32'), data(shape, 'float32')) : data(shape, d);
      const xs = x.ndim === 3 ? x.permute([2, 0, 1]) : x.t(); // strided views
      const mask = nbx.gt(data([...xs.shape.slice(0, -1), 1], 'float32'), 0).expand(xs.shape as number[]); // broadcast (stride 0)
      const count = Number(nbx.count_nonzero(mask).item());
      const sel = (xx: T, mm: T): T => {
        const out = Tensor.empty([count], xx.dt, xx.device);
        kernel('masked_select', xx.device, 'masked_select')(xx.ref(), mm.ref(), out.ref());
        return out;
      };
      await same(sel(up(xs), up(mask)), sel(xs, mask), 0, `masked_select ${d} ${shape}`);
      const src = d === 'complex64' ? nbx.complex(data([count + 3], 'float32'), data([count + 3], 'float32')) : data([count + 3], d);
      const sc = (xx: T, mm: T, ss: T): T => {
        const out = xx.clone();
        kernel('masked_scatter', xx.device, 'masked_scatter')(out.ref(), mm.ref(), ss.ref());
        return out;
      };
      await same(sc(up(xs), up(mask), up(src)), sc(xs, mask, src), 0, `masked_scatter ${d} ${shape}`);
      // nonzero: int32 coordinates on webgpu, int64 on the CPU
      const nz = nbx.nonzero(xs) as T;
      const gout = Tensor.empty([nz.shape[0]!, xs.ndim], 'int32', up(xs).device);
      kernel('nonzero', G, 'nonzero')(up(xs).ref(), gout.ref());
      await same(gout, nz.to('int32'), 0, `nonzero ${d} ${shape}`);
    }
  }
});

const INTS: DTypeName[] = ['int32', 'int16', 'int8', 'uint8'];

it('integer matmul wraps like the CPU (batched, transposed, every int dtype)', async () => {
  for (const d of INTS) {
    const a = data([3, 5, 7], d), b = data([3, 7, 4], d);
    await same(nbx.matmul(up(a), up(b)), nbx.matmul(a, b), 0, `bmm ${d}`);
    await same(nbx.matmul(up(b).transpose(1, 2), up(a).transpose(1, 2)), nbx.matmul(b.transpose(1, 2), a.transpose(1, 2)), 0, `bmm^T ${d}`);
  }
  const big = nbx.tensor([[2000000000, 7], [-5, 2000000000]], { dtype: nbx.int32 });
  await same(nbx.matmul(up(big), up(big)), nbx.matmul(big, big), 0, 'int32 overflow wraps');
});

/** A conv/pool kernel run on both devices over fresh outputs. */
function kernelBoth(name: string, shape: number[], dtype: DTypeName, make: (dev: 'cpu' | 'webgpu') => Record<string, unknown>): [T, T] {
  const run = (dev: 'cpu' | 'webgpu'): T => {
    const out = Tensor.empty(shape, dtype, dev === 'cpu' ? nbx.zeros([1]).device : up(nbx.zeros([1])).device);
    (kernel(name as 'conv', out.device, name) as (p: unknown) => void)({ ...make(dev), out: out.ref() });
    return out;
  };
  return [run('webgpu'), run('cpu')];
}

it('integer convolution, transposed convolution and pooling (exact, wrapping; averages truncate)', async () => {
  const F2 = F;
  for (const d of INTS) {
    // (transposed output 18x15: output_padding 1 on the 17x14 of the formula)
    const x = data([2, 4, 9, 8], d), w = data([6, 2, 3, 3], d), bias = data([6], d);
    const kw = { stride: 2, padding: 1, dilation: [1, 2], groups: 2 };
    await same(F2.conv2d!(up(x), up(w), up(bias), kw), F2.conv2d!(x, w, bias, kw), 0, `conv2d ${d}`);
    await same(F2.max_pool2d!(up(x), 3, { stride: 2, padding: 1, dilation: 2 }), F2.max_pool2d!(x, 3, { stride: 2, padding: 1, dilation: 2 }), 0, `max_pool2d ${d}`);
    // the kernels directly where the op layer refuses integers (transposed conv, averages, adaptive)
    const x5 = x.reshape([2, 4, 1, 9, 8]), wt = data([4, 3, 1, 3, 2], d);
    const on = (t: T, dev: string): StridedRef => (dev === 'cpu' ? t : up(t)).ref();
    const [gt, ct] = kernelBoth('conv_transpose', [2, 3, 1, 18, 15], d, (dev) => ({ x: on(x5, dev), w: on(wt, dev), bias: null,
      stride: [1, 2, 2], padding: [0, 1, 1], dilation: [1, 1, 1], groups: 1 }));
    await same(gt, ct, 0, `conv_transpose ${d}`);
    const x4 = x.reshape([8, 1, 9, 8]);
    for (const cip of [false, true]) {
      const [ga, ca] = kernelBoth('pool', [8, 1, 5, 4], d, (dev) => ({ kind: 'avg', x: on(x4, dev), indices: null, kernel: [1, 3, 3],
        stride: [1, 2, 2], padding: [0, 1, 1], dilation: [1, 1, 1], countIncludePad: cip, divisor: null }));
      await same(ga, ca, 0, `avg_pool ${d} count_include_pad=${cip}`);
    }
    for (const kind of ['avg', 'max']) {
      const [gp, cp] = kernelBoth('adaptive_pool', [8, 1, 4, 3], d, (dev) => ({ kind, x: on(x4, dev), indices: null }));
      await same(gp, cp, 0, `adaptive ${kind} ${d}`);
    }
  }
});

