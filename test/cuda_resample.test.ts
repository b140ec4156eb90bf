// CUDA 'interpolate' / 'grid_sample' kernels against the CPU kernels (skipped without a CUDA device):
// every interpolation mode (gathers, the fused separable sum, antialias tables large enough for the
// separable-pass path), uint8 nearest, 1-3 spatial dims; grid_sample for every mode, padding mode and
// align_corners in 2-D and 3-D, including out-of-range and NaN grid points.
import { test } from 'node:test';
import * as nbx from '../src/index.js';
import type { Tensor } from '../src/tensor/tensor.js';
import { FLOAT_DTYPES, check, noStaging, rand, skip } from './cuda_compare.js';

const F = nbx.nn.functional;
const S = (v: number) => nbx.scalar.float(v);

test('interpolate: nearest / nearest-exact / (bi|tri)linear / bicubic, sizes and scales, every float dtype', { skip }, () => {
  for (const dt of FLOAT_DTYPES) {
    const x = rand([2, 3, 7, 6], 1, -1, 1, dt);
    const kws: Record<string, unknown>[] = [
      { mode: 'nearest', scale_factor: S(2) }, { mode: 'nearest', size: [5, 11] }, { mode: 'nearest-exact', size: [10, 4] },
      { mode: 'bilinear', scale_factor: S(2), align_corners: false }, { mode: 'bilinear', size: [9, 5], align_corners: true },
      { mode: 'bilinear', scale_factor: [S(0.5), S(1.7)] }, { mode: 'bicubic', scale_factor: S(2), align_corners: false },
      { mode: 'bicubic', size: [4, 13], align_corners: true }, { mode: 'bilinear', size: [7, 6] },
    ];
    for (const kw of kws) check(`interpolate ${JSON.stringify(kw)} ${dt}`, (a) => F.interpolate!(a, kw), [x]);
    check(`linear ${dt}`, (a) => F.interpolate!(a, { size: 13, mode: 'linear', align_corners: false }), [rand([2, 3, 9], 2, -1, 1, dt)]);
    check(`trilinear ${dt}`, (a) => F.interpolate!(a, { scale_factor: [S(1.5), S(2), S(0.75)], mode: 'trilinear' }), [rand([1, 2, 4, 5, 6], 3, -1, 1, dt)]);
    check(`nearest 3d ${dt}`, (a) => F.interpolate!(a, { scale_factor: S(2), mode: 'nearest' }), [rand([1, 2, 3, 4, 4], 4, -1, 1, dt)]);
  }
  check('nearest uint8', (a) => F.interpolate!(a, { size: [13, 5], mode: 'nearest' }), [rand([1, 3, 7, 6], 5, 0, 255, 'uint8')]);
  check('nearest-exact uint8 1d', (a) => F.interpolate!(a, { size: 17, mode: 'nearest-exact' }), [rand([1, 3, 7], 6, 0, 255, 'uint8')]);
  check('nearest channels-last', (a) => F.interpolate!(a.permute(0, 3, 1, 2), { size: [5, 9], mode: 'nearest' }), [rand([1, 7, 6, 4], 7)]);
  noStaging(['interpolate']);
});

test('interpolate antialias: fused taps and the separable-pass path (large downscales)', { skip }, () => {
  for (const dt of ['float32', 'float64', 'bfloat16'] as const) {
    const x = rand([1, 2, 40, 36], 8, -1, 1, dt);
    check(`aa bilinear down ${dt}`, (a) => F.interpolate!(a, { size: [9, 12], mode: 'bilinear', antialias: true }), [x]);
    check(`aa bicubic down ${dt}`, (a) => F.interpolate!(a, { size: [5, 7], mode: 'bicubic', antialias: true }), [x]);
    check(`aa bicubic one dim ${dt}`, (a) => F.interpolate!(a, { size: [40, 5], mode: 'bicubic', antialias: true, align_corners: true }), [x]);
    check(`aa bilinear up ${dt}`, (a) => F.interpolate!(a, { size: [50, 71], mode: 'bilinear', antialias: true }), [rand([1, 2, 9, 8], 9, -1, 1, dt)]);
  }
  noStaging(['interpolate']);
});

/** Grid points in [-1.3, 1.3), with a few NaNs and far-away points. */
function grid(shape: number[], seed: number): Tensor {
  const g = rand(shape, seed, -1.3, 1.3);
  const u = rand(shape, seed + 1, 0, 1);
  return nbx.where(nbx.lt(u, 0.03), NaN, nbx.where(nbx.lt(u, 0.06), 7.5, g)) as Tensor;
}

test('grid_sample 2-D: bilinear / nearest / bicubic × zeros / border / reflection × align_corners', { skip }, () => {
  for (const dt of ['float32', 'float64', 'float16'] as const) {
    const x = rand([2, 3, 7, 8], 10, -1, 1, dt), g = grid([2, 5, 6, 2], 11).to(dt);
    for (const mode of ['bilinear', 'nearest', 'bicubic']) {
      for (const pad of ['zeros', 'border', 'reflection']) {
        for (const ac of [false, true]) {
          check(`grid_sample ${mode} ${pad} ${ac} ${dt}`, (a, gg) => F.grid_sample!(a, gg, { mode, padding_mode: pad, align_corners: ac }), [x, g]);
        }
      }
    }
  }
  check('grid_sample size-1 dims', (a, gg) => F.grid_sample!(a, gg, { mode: 'bilinear', padding_mode: 'reflection', align_corners: true }), [rand([1, 2, 1, 5], 12), grid([1, 3, 4, 2], 13)]);
  noStaging(['grid_sample']);
});

test('grid_sample 3-D: bilinear / nearest × padding modes × align_corners', { skip }, () => {
  for (const dt of ['float32', 'float64'] as const) {
    const x = rand([2, 2, 4, 5, 6], 14, -1, 1, dt), g = grid([2, 3, 4, 2, 3], 15).to(dt);
    for (const mode of ['bilinear', 'nearest']) {
      for (const pad of ['zeros', 'border', 'reflection']) {
        for (const ac of [false, true]) {
          check(`grid_sample3d ${mode} ${pad} ${ac} ${dt}`, (a, gg) => F.grid_sample!(a, gg, { mode, padding_mode: pad, align_corners: ac }), [x, g]);
        }
      }
    }
  }
  noStaging(['grid_sample']);
});
