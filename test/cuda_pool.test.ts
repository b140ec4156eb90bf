// CUDA 'pool' / 'adaptive_pool' kernels against the CPU kernels (skipped without a CUDA device): max
// (indices, dilation, ceil_mode, NaN and -inf, integer dtypes) and average (count_include_pad,
// divisor_override, int64) pooling in 1-3 dims, adaptive pooling, the warp-per-output path for large
// windows (global pooling, big kernels), and lp_pool / area interpolation built on them.
import { test } from 'node:test';
import * as nbx from '../src/index.js';
import { Tensor } from '../src/tensor/tensor.js';
import { kernel } from '../src/kernels/registry.js';
import type { StridedRef } from '../src/backend/backend.js';
import { FLOAT_DTYPES, check, noStaging, rand, same, skip } from './cuda_compare.js';
import type { PoolKernelParams } from '../src/kernels/pool.js';

const F = nbx.nn.functional;

/** Inputs with NaNs, infinities and ties (max pooling's first-maximum / last-NaN rules). */
function special(shape: number[], seed: number): Tensor {
  const x = nbx.round(nbx.mul(rand(shape, seed), 3));
  const u = rand(shape, seed + 1, 0, 1);
  const y = nbx.where(nbx.lt(u, 0.05), NaN, nbx.where(nbx.lt(u, 0.1), -Infinity, nbx.where(nbx.lt(u, 0.12), Infinity, x)));
  return y as Tensor;
}

test('max_pool 1-3d: indices, padding, dilation, ceil_mode, NaN / inf / ties, every float dtype', { skip }, () => {
  for (const dt of FLOAT_DTYPES) {
    const x = rand([2, 3, 11, 10], 1, -1, 1, dt);
    check(`max2d k3 s2 p1 ${dt}`, (a) => F.max_pool2d!(a, 3, { stride: 2, padding: 1, return_indices: true }), [x]);
    check(`max2d ceil ${dt}`, (a) => F.max_pool2d!(a, 2, { ceil_mode: true, return_indices: true }), [x]);
    check(`max2d dil ${dt}`, (a) => F.max_pool2d!(a, [3, 2], { stride: [2, 1], padding: [1, 1], dilation: [2, 3], ceil_mode: true, return_indices: true }), [x]);
  }
  const s = special([2, 3, 9, 8], 3);
  check('max2d special', (a) => F.max_pool2d!(a, 3, { stride: 1, padding: 1, return_indices: true }), [s]);
  check('max1d special', (a) => F.max_pool1d!(a, 4, { stride: 3, padding: 2, dilation: 1, return_indices: true }), [special([2, 3, 20], 4)]);
  check('max3d', (a) => F.max_pool3d!(a, [2, 3, 2], { stride: [1, 2, 2], padding: [1, 1, 0], return_indices: true }), [rand([2, 2, 5, 7, 6], 5)]);
  check('max3d ceil dil', (a) => F.max_pool3d!(a, 2, { stride: 2, dilation: 2, ceil_mode: true }), [rand([1, 2, 7, 7, 7], 6)]);
  check('max2d unbatched, permuted', (a) => F.max_pool2d!(a.permute(0, 2, 1), 2, { return_indices: true }), [rand([3, 8, 6], 7)]);
  noStaging(['pool']);
});

test('max_pool on integer dtypes is exact', { skip }, () => {
  for (const dt of ['uint8', 'int8', 'int16', 'int32', 'int64'] as const) {
    const lo = dt === 'uint8' ? 0 : -100;
    check(`max2d ${dt}`, (a) => F.max_pool2d!(a, 3, { stride: 2, padding: 1, return_indices: true }), [rand([2, 2, 9, 7], 8, lo, 100, dt)]);
    check(`max1d ${dt}`, (a) => F.max_pool1d!(a, 3, { stride: 2, dilation: 2, ceil_mode: true, return_indices: true }), [rand([2, 2, 19], 9, lo, 100, dt)]);
    check(`max2d big window ${dt}`, (a) => F.max_pool2d!(a, 12, { stride: 4, padding: 3, return_indices: true }), [rand([2, 2, 16, 16], 19, lo, 100, dt)]);
  }
});

test('avg_pool 1-3d: count_include_pad, divisor_override, ceil_mode, int64', { skip }, () => {
  for (const dt of FLOAT_DTYPES) {
    const x = rand([2, 3, 11, 10], 10, -1, 1, dt);
    check(`avg2d ${dt}`, (a) => F.avg_pool2d!(a, 3, { stride: 2, padding: 1 }), [x]);
    check(`avg2d nopad ceil ${dt}`, (a) => F.avg_pool2d!(a, 3, { stride: 2, padding: 1, count_include_pad: false, ceil_mode: true }), [x]);
    check(`avg2d divisor ${dt}`, (a) => F.avg_pool2d!(a, [2, 3], { stride: [2, 1], padding: [1, 1], divisor_override: 5 }), [x]);
  }
  check('avg1d', (a) => F.avg_pool1d!(a, 5, { stride: 2, padding: 2, ceil_mode: true, count_include_pad: false }), [rand([2, 3, 19], 11)]);
  check('avg3d', (a) => F.avg_pool3d!(a, 3, { stride: 2, padding: 1 }), [rand([1, 2, 7, 6, 5], 12)]);
  check('avg2d int64', (a) => F.avg_pool2d!(a, 3, { stride: 2, padding: 1 }), [rand([2, 2, 9, 8], 13, -50, 50, 'int64')]);
  check('avg2d int64 divisor', (a) => F.avg_pool2d!(a, 2, { divisor_override: 3 }), [rand([2, 2, 9, 8], 14, -50, 50, 'int64')]);
  check('avg2d NaN', (a) => F.avg_pool2d!(a, 2), [special([1, 2, 6, 6], 15)]);
  noStaging(['pool']);
});

test('large windows: a warp per output (global pooling, big kernels, adaptive to 1x1)', { skip }, () => {
  for (const dt of ['float32', 'float64', 'float16'] as const) {
    const x = rand([2, 3, 24, 20], 16, -1, 1, dt);
    check(`avg k12 ${dt}`, (a) => F.avg_pool2d!(a, 12, { stride: 4, padding: 6, count_include_pad: false }), [x]);
    check(`avg k12 cip ${dt}`, (a) => F.avg_pool2d!(a, 12, { stride: 4, padding: 6, ceil_mode: true }), [x]);
    check(`max k12 ${dt}`, (a) => F.max_pool2d!(a, [12, 11], { stride: 5, padding: [6, 2], return_indices: true }), [x]);
    check(`max k6 dil3 ${dt}`, (a) => F.max_pool2d!(a, [6, 5], { stride: 3, dilation: [3, 3], padding: 2, return_indices: true }), [x]);
    check(`global avg ${dt}`, (a) => F.adaptive_avg_pool2d!(a, 1), [x]);
    check(`global max ${dt}`, (a) => F.adaptive_max_pool2d!(a, 1, { return_indices: true }), [x]);
  }
  const s = special([2, 3, 20, 16], 17);
  check('global max special', (a) => F.adaptive_max_pool2d!(a, [1, 2], { return_indices: true }), [s]);
  check('big max special', (a) => F.max_pool2d!(a, 12, { stride: 4, padding: 5, return_indices: true }), [s]);
  check('big avg special', (a) => F.avg_pool2d!(a, 12, { stride: 4 }), [s]);
  const ties = nbx.round(rand([2, 2, 16, 16], 18, 0, 2));
  check('global max ties', (a) => F.adaptive_max_pool2d!(a, 1, { return_indices: true }), [ties]);
  check('big max int64 ties', (a) => F.max_pool2d!(a, 16, { return_indices: true }), [rand([2, 2, 16, 16], 19, -5, 5, 'int64')]);
  check('global avg 3d', (a) => F.adaptive_avg_pool3d!(a, 1), [rand([1, 2, 6, 7, 8], 20)]);
  noStaging(['pool', 'adaptive_pool']);
});

test('adaptive pooling 1-3d, lp_pool, area interpolation', { skip }, () => {
  for (const dt of FLOAT_DTYPES) {
    const x = rand([2, 3, 11, 10], 21, -1, 1, dt);
    check(`adaptive avg ${dt}`, (a) => F.adaptive_avg_pool2d!(a, [3, 5]), [x]);
    check(`adaptive avg up ${dt}`, (a) => F.adaptive_avg_pool2d!(a, [13, 4]), [x]);
    check(`adaptive max ${dt}`, (a) => F.adaptive_max_pool2d!(a, [4, 3], { return_indices: true }), [x]);
  }
  check('adaptive avg 1d', (a) => F.adaptive_avg_pool1d!(a, 7), [rand([2, 3, 19], 22)]);
  check('adaptive max 1d', (a) => F.adaptive_max_pool1d!(a, 6, { return_indices: true }), [special([2, 3, 19], 23)]);
  check('adaptive avg 3d', (a) => F.adaptive_avg_pool3d!(a, [2, 3, 4]), [rand([1, 2, 5, 7, 9], 24)]);
  check('adaptive max 3d', (a) => F.adaptive_max_pool3d!(a, [3, 2, 2], { return_indices: true }), [rand([1, 2, 5, 7, 9], 25)]);
  check('lp_pool2d', (a) => F.lp_pool2d!(a, 2, 3, { stride: 2 }), [rand([2, 3, 9, 8], 26, 0, 1)], [1e-4, 1e-5]);
  check('area', (a) => F.interpolate!(a, { size: [4, 3], mode: 'area' }), [rand([2, 3, 9, 8], 27)]);
  noStaging(['adaptive_pool']);
});

test('pool kernels take float16 / bfloat16 operands natively', { skip }, () => {
  // The op layer widens half inputs to float32; the kernels also take them directly ([B, D, H, W] refs).
  const as4 = (t: Tensor): StridedRef => {
    const shape = [t.shape[0]! * t.shape[1]!, 1, t.shape[2]!, t.shape[3]!];
    return { ...t.ref(), shape, strides: [shape[2]! * shape[3]!, shape[2]! * shape[3]!, shape[3]!, 1] };
  };
  for (const dt of ['float16', 'bfloat16'] as const) {
    const x = special([2, 3, 20, 18], 40).to(dt);
    const cases: [string, Record<string, unknown>, (a: Tensor) => unknown][] = [
      ['max', { kind: 'max', kernel: [1, 3, 3], stride: [1, 2, 2], padding: [0, 1, 1], dilation: [1, 1, 1], countIncludePad: true, divisor: null },
        (a) => F.max_pool2d!(a, 3, { stride: 2, padding: 1, return_indices: true })],
      ['max warp', { kind: 'max', kernel: [1, 12, 12], stride: [1, 4, 4], padding: [0, 6, 6], dilation: [1, 1, 1], countIncludePad: true, divisor: null },
        (a) => F.max_pool2d!(a, 12, { stride: 4, padding: 6, return_indices: true })],
      ['avg', { kind: 'avg', kernel: [1, 3, 2], stride: [1, 2, 1], padding: [0, 1, 1], dilation: [1, 1, 1], countIncludePad: false, divisor: null },
        (a) => F.avg_pool2d!(a, [3, 2], { stride: [2, 1], padding: 1, count_include_pad: false })],
      ['avg warp', { kind: 'avg', kernel: [1, 12, 12], stride: [1, 4, 4], padding: [0, 6, 6], dilation: [1, 1, 1], countIncludePad: true, divisor: null },
        (a) => F.avg_pool2d!(a, 12, { stride: 4, padding: 6 })],
    ];
    for (const [name, p, f] of cases) {
      const r = f(x.to('float32')) as Tensor | Tensor[];
      const [v, idx] = Array.isArray(r) ? r : [r, null];
      const want = v!.to(dt);
      const gx = x.to('cuda'), out = Tensor.empty(want.shape, dt, 'cuda'), gi = idx ? Tensor.empty(idx.shape, 'int64', 'cuda') : null;
      kernel('pool', 'cuda')({ ...p, x: as4(gx), out: as4(out), indices: gi ? as4(gi) : null } as PoolKernelParams);
      same(`${name} ${dt} (direct kernel)`, idx ? [want, idx] : want, gi ? [out, gi] : out);
    }
    const want = F.adaptive_avg_pool2d!(x.to('float32'), [1, 3]).to(dt) as Tensor;
    const gx = x.to('cuda'), out = Tensor.empty(want.shape, dt, 'cuda');
    kernel('adaptive_pool', 'cuda')({ kind: 'avg', x: as4(gx), out: as4(out), indices: null });
    same(`adaptive avg ${dt} (direct kernel)`, want, out);
  }
});
