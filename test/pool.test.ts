// Pooling tests: goldens from torch 1.13 (test/gen/pool.py) plus shape rules and typed errors.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import * as nbx from '../src/index.js';
import { DTypeError, ShapeError, ValueError } from '../src/errors.js';
import { assertGoldens } from './conv_golden.js';

const F = nbx.nn.functional;
const ramp = (shape: number[], dtype: nbx.DTypeName = 'float32') =>
  nbx.arange(shape.reduce((a, b) => a * b, 1), { dtype }).reshape(shape);

test('pool goldens (torch 1.13)', () => assertGoldens('pool_goldens'));

test('ceil_mode drops a last window that would start in the padding', () => {
  // in 5, kernel 2, stride 2, pad 1: ceil gives 4 windows, but the 4th starts at 5 (= in + pad - 1 + 1): dropped.
  assert.deepEqual(F.max_pool1d(ramp([1, 1, 5]), 2, { stride: 2, padding: 1, ceil_mode: true }).shape, [1, 1, 3]);
  // in 6, kernel 2, stride 2, no pad: ceil adds nothing.
  assert.deepEqual(F.avg_pool1d(ramp([1, 1, 6]), 2, { ceil_mode: true }).shape, [1, 1, 3]);
  assert.deepEqual(F.avg_pool1d(ramp([1, 1, 7]), 2, { ceil_mode: true }).tolist(), [[[0.5, 2.5, 4.5, 6]]]);
});

test('stride defaults to the kernel size; indices are flat in the input plane', () => {
  const [v, i] = F.max_pool2d(ramp([1, 1, 4, 4]), 2, { return_indices: true });
  assert.deepEqual(v.tolist(), [[[[5, 7], [13, 15]]]]);
  assert.deepEqual(i.tolist(), [[[[5, 7], [13, 15]]]]);
  assert.equal(i.dt, 'int64');
  const r = F.max_pool2d(ramp([1, 1, 4, 4]), 2, { return_indices: true });
  assert.ok(r.values && r.indices);
});

test('torch.* forms: adaptive_max_pool1d returns (values, indices), the rest as nn.functional', () => {
  const x = ramp([1, 2, 6]);
  const r = nbx.adaptive_max_pool1d(x, 3);
  assert.deepEqual(r.values.tolist(), [[[1, 3, 5], [7, 9, 11]]]);
  assert.deepEqual(r.indices.tolist(), [[[1, 3, 5], [1, 3, 5]]]);
  assert.deepEqual((nbx.max_pool1d(x, 2) as nbx.Tensor).tolist(), F.max_pool1d(x, 2).tolist());
});

test('integer max pooling is exact, int64 beyond 2^53 included', () => {
  const big = nbx.tensor([2n ** 60n + 1n, 2n ** 60n, -5n, 7n], { dtype: 'int64' }).reshape([1, 1, 4]);
  assert.deepEqual(F.max_pool1d(big, 2).tolist(), [[[2n ** 60n + 1n, 7n]]]);
});

test('lp_pool2d is the p-norm of each window', () => {
  const x = ramp([1, 1, 2, 2]);
  const r = F.lp_pool2d(x, 2, 2).item() as number;
  assert.ok(Math.abs(r - Math.sqrt(0 + 1 + 4 + 9)) < 1e-5);
});

test('pool errors are typed', () => {
  const x = ramp([1, 2, 5, 5]);
  assert.throws(() => F.max_pool2d(x, 3, { padding: 2 }), /pad should be at most half of effective kernel size/);
  assert.throws(() => F.max_pool2d(ramp([1, 1, 2, 2]), 3), /Output size is too small/);
  assert.throws(() => F.avg_pool2d(ramp([5]), 2), ShapeError);
  assert.throws(() => F.avg_pool2d(x, 2, { divisor_override: 0 }), ValueError);
  assert.throws(() => F.avg_pool2d(x.to('bool'), 2), DTypeError);
  assert.throws(() => F.adaptive_avg_pool2d(x, [1, 2, 3]), ValueError);
});
