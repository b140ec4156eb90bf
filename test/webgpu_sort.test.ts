// WebGPU's native sort-family and FFT kernels against the CPU backend (the reference) on random inputs:
// ties, NaN, -0, long rows (global bitonic merges), offset views, every sortable dtype, the FFT on any
// length (Bluestein for large primes), strided dims and every norm. Host staging is refused here, so each
// kernel must be native. The kernels are tested directly with int32 indices here; the ops' int64 index
// outputs (emulated) in webgpu_int64.test.ts. Without an adapter every test is skipped, with a message saying so.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import * as nbx from '../src/index.js';
import { Tensor } from '../src/tensor/tensor.js';
import { kernel } from '../src/kernels/registry.js';
import { DeviceLimitError } from '../src/errors.js';
import type { DTypeName } from '../src/dtype/dtypes.js';

process.env.NBX_WEBGPU_HOST_STAGING = '0';
const probe = await nbx.webgpu.probe();
const skip = probe.available ? false : `no WebGPU adapter (${probe.reason})`;
if (skip) process.stdout.write(`# webgpu sort/fft tests NOT RUN: ${skip}. sort/topk/kthvalue/median/mode/searchsorted/fft kernel tests were skipped.\n`);
const it = (name: string, fn: () => Promise<void>): void => { test(name, { skip }, fn); };

type T = Tensor;
const G = 'webgpu';
const up = (t: T): T => t.to(G);

let seed = 4242;
const rand = (): number => { seed = (seed * 1664525 + 1013904223) % 4294967296; return seed / 4294967296; };
/** [rows, n] of `dtype`; with `ties`, few distinct values plus NaN and -0 (floats). */
function rowsOf(rows: number, n: number, dtype: DTypeName, ties: boolean): T {
  const v = Array.from({ length: rows * n }, () => {
    const r = rand();
    if (dtype === 'bool') return r > 0.5 ? 1 : 0;
    if (DTYPES_INT.has(dtype)) return Math.floor(r * (ties ? 6 : 120)) - (dtype === 'uint8' ? 0 : 3);
    if (!ties) return r * 10 - 5;
    const q = rand();
    return q < 0.08 ? NaN : q < 0.14 ? -0 : Math.floor(r * 8) / 2 - 2;
  });
  const t = nbx.tensor(v, { dtype: nbx.float32 }).reshape([rows, n]);
  return dtype === 'float32' ? t : t.to(dtype);
}
const DTYPES_INT = new Set<DTypeName>(['uint8', 'int8', 'int16', 'int32']);

/** Element-for-element equality (NaN equals NaN, -0 equals -0 only), GPU int32 indices against CPU int64. */
async function sameData(gpu: T, cpu: T, what: string): Promise<void> {
  assert.deepEqual([...gpu.shape], [...cpu.shape], `${what}: shape`);
  const g = await gpu.data(), c = cpu.dataSync();
  for (let i = 0; i < c.length; i++) {
    const x = Number(g[i]), y = Number(c[i]);
    assert.ok(Object.is(x, y) || (Number.isNaN(x) && Number.isNaN(y)), `${what}[${i}]: got ${x}, want ${y}`);
  }
}

type Call = (dev: 'cpu' | 'webgpu', x: T, outs: T[]) => void;
/** Runs a kernel on the CPU (int64 indices) and on WebGPU (int32 indices) and compares every output. */
async function both(what: string, x: T, outs: [number[], DTypeName][], call: Call): Promise<void> {
  const c = outs.map(([s, d]) => Tensor.empty(s, d, 'cpu'));
  call('cpu', x, c);
  const g = outs.map(([s, d]) => Tensor.empty(s, d === 'int64' ? 'int32' : d, G));
  call(G, up(x), g);
  for (let i = 0; i < outs.length; i++) await sameData(g[i]!, c[i]!, `${what} out${i}`);
}

const sortCall = (rows: number, n: number, desc: boolean, stable: boolean): Call => (dev, x, o) =>
  kernel('sort', dev, 'sort')(x.ref(), rows, n, desc, stable, o[0]!.ref(), o[1]!.ref());
const topkCall = (rows: number, n: number, k: number, largest: boolean, sorted: boolean): Call => (dev, x, o) =>
  kernel('topk', dev, 'topk')(x.ref(), rows, n, k, largest, sorted, o[0]!.ref(), o[1]!.ref());
const selCall = (name: string, rows: number, n: number, ...extra: unknown[]): Call => (dev, x, o) =>
  (kernel(name as 'median', dev, name) as (...a: unknown[]) => void)(x.ref(), rows, n, ...extra, o[0]!.ref(), o[1]!.ref());

it('sorts rows as the CPU does: stable and unstable (std::sort tie order), ascending and descending, every dtype', async () => {
  for (const d of ['float32', 'float16', 'bfloat16', 'int32', 'int16', 'int8', 'uint8', 'bool'] as DTypeName[]) {
    for (const [rows, n] of [[5, 1], [4, 37], [3, 300]] as const) {
      const x = rowsOf(rows, n, d, true);
      for (const desc of [false, true]) {
        for (const stable of [false, true]) {
          await both(`sort ${d} ${rows}x${n} desc=${desc} stable=${stable}`, x, [[[rows, n], d], [[rows, n], 'int64']], sortCall(rows, n, desc, stable));
        }
      }
    }
  }
});

it('sorts long rows through global bitonic merges, and short rows many to a workgroup', async () => {
  for (const [rows, n, d] of [[1, 20000, 'float32'], [2, 9000, 'int16'], [3, 5000, 'float16'], [700, 9, 'float32']] as [number, number, DTypeName][]) {
    const x = rowsOf(rows, n, d, d !== 'float32' || rows > 1);
    await both(`stable sort ${d} ${rows}x${n}`, x, [[[rows, n], d], [[rows, n], 'int64']], sortCall(rows, n, rows % 2 === 0, true));
    await both(`median ${d} ${rows}x${n}`, x, [[[rows], d], [[rows], 'int64']], selCall('median', rows, n, false));
  }
  // unstable sorts of long rows: no replay without ties; with ties, a long serial replay (refused on llvmpipe)
  if (!/llvmpipe|lavapipe/i.test((await nbx.webgpu.init()).adapter)) {
    const x = nbx.randperm(30000).to('float32').reshape([1, 30000]);
    await both('unstable sort of distinct values', x, [[[1, 30000], 'float32'], [[1, 30000], 'int64']], sortCall(1, 30000, true, false));
    const t = rowsOf(2, 12000, 'int16', true);
    await both('unstable sort with ties', t, [[[2, 12000], 'int16'], [[2, 12000], 'int64']], sortCall(2, 12000, false, false));
    await both('topk with ties', t, [[[2, 5000], 'int16'], [[2, 5000], 'int64']], topkCall(2, 12000, 5000, true, false));
    await both('mode of long rows', t, [[[2], 'int16'], [[2], 'int64']], selCall('mode', 2, 12000));
  }
});

it('selects as the CPU does: topk (partial_sort / nth_element, sorted or not), kthvalue, median, nanmedian, mode', async () => {
  for (const d of ['float32', 'bfloat16', 'int32', 'int8', 'uint8'] as DTypeName[]) {
    for (const [rows, n] of [[6, 1], [5, 40], [2, 1000]] as const) {
      const x = rowsOf(rows, n, d, true);
      const tag = `${d} ${rows}x${n}`;
      for (const k of [...new Set([1, Math.min(3, n), n])]) {
        for (const largest of [true, false]) {
          for (const sorted of [true, false]) {
            await both(`topk ${tag} k=${k} largest=${largest} sorted=${sorted}`, x, [[[rows, k], d], [[rows, k], 'int64']], topkCall(rows, n, k, largest, sorted));
          }
        }
        await both(`kthvalue ${tag} k=${k}`, x, [[[rows], d], [[rows], 'int64']], selCall('kthvalue', rows, n, k));
      }
      for (const ign of [false, true]) await both(`median ${tag} nan=${ign}`, x, [[[rows], d], [[rows], 'int64']], selCall('median', rows, n, ign));
      await both(`mode ${tag}`, x, [[[rows], d], [[rows], 'int64']], selCall('mode', rows, n));
    }
  }
  // all-NaN rows: nanmedian's nth_element on equivalent elements; mode's runs of NaN
  const nan = nbx.full([3, 50], NaN);
  await both('nanmedian all NaN', nan, [[[3], 'float32'], [[3], 'int64']], selCall('median', 3, 50, true));
  await both('mode all NaN', nan, [[[3], 'float32'], [[3], 'int64']], selCall('mode', 3, 50));
});

it('reads operands at an offset and writes into output views', async () => {
  const big = rowsOf(5, 64, 'float16', true);
  const x = big.narrow(0, 2, 3); // offset 128 elements
  const c = Tensor.empty([3, 64], 'float16', 'cpu'), ci = Tensor.empty([3, 64], 'int64', 'cpu');
  kernel('sort', 'cpu', 'sort')(x.contiguous().ref(), 3, 64, false, false, c.ref(), ci.ref());
  const gv = Tensor.empty([5, 64], 'float16', G), gi = Tensor.empty([4, 64], 'int32', G);
  const ov = gv.narrow(0, 1, 3), oi = gi.narrow(0, 1, 3);
  kernel('sort', G, 'sort')(up(big).narrow(0, 2, 3).ref(), 3, 64, false, false, ov.ref(), oi.ref());
  await sameData(ov, c, 'sort values into a view');
  await sameData(oi, ci, 'sort indices into a view');
});

it('searchsorted and bucketize with int32 outputs match the CPU (NaN, ties, right/side, batched boundaries)', async () => {
  const b = nbx.tensor([-2, -1, -1, 0, 0.5, 0.5, 3, NaN]);
  const v = nbx.tensor([[-3, -1, 0, -0, 0.5, 2, 3, 4], [NaN, Infinity, -Infinity, 0.25, 1e-40, -1e-40, 0.5, -1]]);
  for (const right of [false, true]) {
    for (const d of ['float32', 'float16', 'bfloat16'] as DTypeName[]) {
      const bd = b.to(d), vd = v.to(d);
      const want = nbx.searchsorted(bd, vd, { out_int32: true, right });
      await sameData(nbx.searchsorted(up(bd), up(vd), { out_int32: true, right }), want, `searchsorted ${d} right=${right}`);
    }
    await sameData(nbx.bucketize(up(v), up(b), { out_int32: true, right }), nbx.bucketize(v, b, { out_int32: true, right }), `bucketize right=${right}`);
  }
  const bi = nbx.sort(nbx.randint(-50, 50, [3, 40]).to('int32'), { dim: -1 }).values, vi = nbx.randint(-60, 60, [3, 25]).to('int32');
  await sameData(nbx.searchsorted(up(bi), up(vi), { out_int32: true, side: 'right' }), nbx.searchsorted(bi, vi, { out_int32: true, side: 'right' }), 'batched int32');
  await sameData(nbx.searchsorted(up(b), 0.5, { out_int32: true }), nbx.searchsorted(b, 0.5, { out_int32: true }), 'scalar input');
});

it('keeps the contract: unique raises DeviceLimitError; long replays are refused on llvmpipe', async () => {
  const x = up(rowsOf(2, 8, 'float32', true));
  // (int64 values and index outputs are emulated: see webgpu_int64.test.ts)
  assert.throws(() => nbx.unique(x), (e: unknown) => e instanceof DeviceLimitError);
  assert.throws(() => kernel('unique', G, 'unique')(x.ref(), 16, 1, false), (e: unknown) => e instanceof DeviceLimitError);
  const info = await nbx.webgpu.init();
  if (/llvmpipe|lavapipe/i.test(info.adapter)) {
    const long = up(nbx.zeros([1, 5000]));
    const v = Tensor.empty([1, 5000], 'float32', G), idx = Tensor.empty([1, 5000], 'int32', G);
    assert.throws(() => kernel('sort', G, 'sort')(long.ref(), 1, 5000, false, false, v.ref(), idx.ref()), (e: unknown) => e instanceof DeviceLimitError);
  }
  assert.deepEqual(Object.keys(nbx.webgpu.hostStagingStats()).filter((k) => /sort|topk|kthvalue|median|mode|unique|searchsorted|fft/.test(k)), []);
});

// ---- FFT -------------------------------------------------------------------------------------------

async function close(gpu: T, cpu: T, what: string, tol = 2e-5): Promise<void> {
  assert.equal(gpu.device.type, G, `${what}: on ${gpu.device}`);
  assert.equal(gpu.dt, cpu.dt, `${what}: dtype`);
  assert.deepEqual([...gpu.shape], [...cpu.shape], `${what}: shape`);
  const gv = gpu.dt === 'complex64' ? nbx.view_as_real(gpu) : gpu, cv = cpu.dt === 'complex64' ? nbx.view_as_real(cpu) : cpu;
  const g = await gv.data(), c = cv.dataSync();
  let scale = 1;
  for (let i = 0; i < c.length; i++) scale = Math.max(scale, Math.abs(Number(c[i])));
  for (let i = 0; i < c.length; i++) {
    const x = Number(g[i]), y = Number(c[i]);
    assert.ok(Math.abs(x - y) <= tol * scale, `${what}[${i}]: got ${x}, want ${y} (scale ${scale})`);
  }
}

it('fft, ifft, rfft, irfft, hfft, ihfft on any length (Stockham radices, Bluestein for large primes) match the CPU', async () => {
  for (const n of [1, 2, 3, 8, 12, 60, 67, 127, 256, 1009, 4096]) {
    const x = nbx.randn([3, n]);
    await close(nbx.fft.fft(up(x)), nbx.fft.fft(x), `fft n=${n}`);
    await close(nbx.fft.rfft(up(x), { norm: 'ortho' }), nbx.fft.rfft(x, { norm: 'ortho' }), `rfft ortho n=${n}`);
    const c = nbx.fft.fft(x);
    await close(nbx.fft.ifft(up(c), { norm: 'forward' }), nbx.fft.ifft(c, { norm: 'forward' }), `ifft forward n=${n}`);
    if (n > 1) await close(nbx.fft.irfft(up(nbx.fft.rfft(x))), nbx.fft.irfft(nbx.fft.rfft(x)), `irfft n=${n}`);
  }
  const x = nbx.randn([4, 9]);
  await close(nbx.fft.hfft(up(nbx.fft.fft(x))), nbx.fft.hfft(nbx.fft.fft(x)), 'hfft');
  await close(nbx.fft.ihfft(up(x)), nbx.fft.ihfft(x), 'ihfft');
  await close(nbx.fft.fft(up(x), { n: 20 }), nbx.fft.fft(x, { n: 20 }), 'zero-padded');
  await close(nbx.fft.fft(up(x), { n: 5 }), nbx.fft.fft(x, { n: 5 }), 'trimmed');
  await close(nbx.fft.irfft(up(nbx.fft.rfft(x)), { n: 13 }), nbx.fft.irfft(nbx.fft.rfft(x), { n: 13 }), 'irfft odd n');
});

it('fft over strided dims, views and several dims (fft2, rfftn, irfftn) matches the CPU', async () => {
  const x = nbx.randn([5, 6, 7]);
  const g = up(x);
  await close(nbx.fft.fft(g, { dim: 0 }), nbx.fft.fft(x, { dim: 0 }), 'dim 0');
  await close(nbx.fft.rfft(g.transpose(0, 2), { dim: 1 }), nbx.fft.rfft(x.transpose(0, 2), { dim: 1 }), 'transposed');
  await close(nbx.fft.fft(g.slice(2, 1, 7, 2)), nbx.fft.fft(x.slice(2, 1, 7, 2)), 'sliced with a step');
  await close(nbx.fft.fft2(g), nbx.fft.fft2(x), 'fft2');
  await close(nbx.fft.rfftn(g), nbx.fft.rfftn(x), 'rfftn');
  await close(nbx.fft.irfftn(up(nbx.fft.rfftn(x))), nbx.fft.irfftn(nbx.fft.rfftn(x)), 'irfftn');
  const c = nbx.fft.fft(x);
  await close(nbx.fft.ifft(up(c).permute([2, 0, 1]), { dim: 0 }), nbx.fft.ifft(c.permute([2, 0, 1]), { dim: 0 }), 'complex permuted');
});
