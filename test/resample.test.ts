// Resampling tests: goldens from torch 1.13 (test/gen/resample.py) and, for half-type grid_sample, from
// PyTorch 2.11 suites (test/gen/suite211.py); plus scale-factor semantics,
// identities and typed errors.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import * as nbx from '../src/index.js';
import { DTypeError, UnsupportedError, ValueError } from '../src/errors.js';
import { assertGoldens } from './conv_golden.js';

const F = nbx.nn.functional;
const ramp = (shape: number[], dtype: nbx.DTypeName = 'float32') =>
  nbx.arange(shape.reduce((a, b) => a * b, 1), { dtype }).reshape(shape);

test('resample goldens (torch 1.13)', () => assertGoldens('resample_goldens'));
// float16/bfloat16 grid_sample, bit for bit: PyTorch 2.x rounds every operation to the half type
test('half grid_sample goldens (PyTorch 2.11 suites)', () => assertGoldens('resample_goldens_211'));

test('the given scale_factor drives the coordinates unless recompute_scale_factor', () => {
  const x = ramp([1, 1, 1, 4]);
  // 4 * 1.7 = 6.8 → 6 outputs; source of output 5 is floor(5 / 1.7) = 2 (with out/in it would be floor(5 * 4/6) = 3).
  assert.deepEqual(F.interpolate(x, { scale_factor: 1.7 }).tolist(), [[[[0, 0, 1, 1, 2, 2]]]]);
  assert.deepEqual(F.interpolate(x, { scale_factor: 1.7, recompute_scale_factor: true }).tolist(), [[[[0, 0, 1, 2, 2, 3]]]]);
});

test('identity resampling returns the input values', () => {
  const x = ramp([1, 2, 3, 4]);
  for (const mode of ['nearest', 'bilinear', 'bicubic', 'area', 'nearest-exact']) {
    const r = F.interpolate(x, { size: [3, 4], mode });
    assert.deepEqual(r.tolist(), x.tolist(), mode);
  }
  // align_corners grid_sample on the pixel grid is the identity too.
  const lin = (n: number) => Array.from({ length: n }, (_, i) => (2 * i) / (n - 1) - 1);
  const grid = nbx.tensor(lin(3).flatMap((y) => lin(4).flatMap((xx) => [xx, y]))).to('float32').reshape([1, 3, 4, 2]);
  const g = F.grid_sample(x.slice(1, 0, 1), grid, { align_corners: true }).dataSync();
  const want = x.slice(1, 0, 1).contiguous().dataSync();
  want.forEach((v, i) => assert.ok(Math.abs(Number(g[i]) - Number(v)) < 1e-6, `${i}: ${g[i]} vs ${v}`));
});

test('resample errors are typed', () => {
  const x = ramp([1, 2, 3, 4]);
  assert.throws(() => F.interpolate(x, { size: 3, scale_factor: 2 }), ValueError);
  assert.throws(() => F.interpolate(x, { size: 3, mode: 'linear' }), UnsupportedError);
  assert.throws(() => F.interpolate(x.to('int64'), { size: 3 }), DTypeError);
  assert.throws(() => F.grid_sample(x, nbx.zeros([1, 2, 2, 2], { dtype: 'float64' })), DTypeError);
  assert.throws(() => F.grid_sample(x, nbx.zeros([1, 2, 2, 2]), { mode: 'cubic' }), ValueError);
});
