// Tests for the indexing family (src/ops/indexing.ts, src/backend/cpu/kernels/indexing.ts): goldens from torch
// 1.13 (test/gen/indexing.py → test/fixtures/indexing_*.json; indexing_211.json: half-type reductions
// from PyTorch 2.11 suites, test/gen/suite211.py) plus error messages and methods.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import * as nbx from '../src/index.js';
import { runGoldens } from './shape.test.js';

runGoldens('indexing_');

test('out-of-range messages name the op, the value, the dim and its size', () => {
  const x = nbx.zeros(3, 5);
  assert.throws(() => nbx.scatter(x, 1, nbx.tensor([[7]]), nbx.ones(1, 1)),
    (e: Error) => e instanceof nbx.IndexError && e.message === 'scatter: index 7 is out of bounds for dimension 1 with size 5');
  assert.throws(() => nbx.gather(x, 0, nbx.tensor([[3]])), /^IndexError: gather: index 3 is out of bounds for dimension 0 with size 3$/);
  assert.throws(() => nbx.index_put(x, [nbx.tensor([0]), nbx.tensor([-6])], nbx.tensor(1.5)), /index -6 is out of bounds for dimension 1 with size 5/);
  assert.throws(() => nbx.gather(x, 0, nbx.tensor([[0.5]])), (e: Error) => e instanceof nbx.DTypeError && /gather/.test(e.message));
  assert.throws(() => nbx.nn.functional.embedding(nbx.tensor([1]), x, { max_norm: 1 }), nbx.UnsupportedError);
});

test('inputs are never modified; index_add alpha on ints must be an int', () => {
  const x = nbx.zeros(2, 2);
  nbx.scatter_add(x, 0, nbx.tensor([[1, 1]]), nbx.ones(1, 2));
  nbx.index_put(x, [nbx.tensor([0])], nbx.tensor(5.5), true);
  assert.deepEqual(x.tolist(), [[0, 0], [0, 0]]);
  assert.throws(() => nbx.index_add(nbx.zeros(2, 2, { dtype: 'int64' }), 0, nbx.tensor([0]), nbx.ones(1, 2, { dtype: 'int64' }), { alpha: 0.5 }), nbx.DTypeError);
});

test('methods and one-argument where', () => {
  const x = nbx.tensor([[1, 0, 2], [0, 3, 0]]);
  assert.deepEqual(x.nonzero().tolist(), [[0, 0], [0, 2], [1, 1]]);
  assert.deepEqual(nbx.where(x.ne(0)).map((t: nbx.Tensor) => t.tolist()), [[0, 0, 1], [0, 2, 1]]);
  assert.deepEqual(x.gather(1, nbx.tensor([[2], [1]])).tolist(), [[2], [3]]);
  assert.deepEqual(x.index_select(0, nbx.tensor([1])).tolist(), [[0, 3, 0]]);
  assert.deepEqual(x.masked_select(x.gt(0)).tolist(), [1, 2, 3]);
  assert.deepEqual(x.repeat_interleave(2, { dim: 0 }).shape, [4, 3]);
  assert.deepEqual(x.scatter(1, nbx.tensor([[0], [0]]), 9).tolist(), [[9, 0, 2], [9, 3, 0]]);
});

test('large gather/scatter/index_select run in strided loops', () => {
  const x = nbx.arange(1 << 20, { dtype: 'float32' }).reshape(1024, 1024);
  const idx = nbx.arange(1024).flip([0]).reshape(1, 1024).expand(1024, 1024);
  const t0 = performance.now();
  const g = nbx.gather(x, 1, idx);
  const s = nbx.scatter_add(x, 1, idx, x);
  const e = nbx.nn.functional.embedding(nbx.arange(1024).flip([0]), x);
  const ms = performance.now() - t0;
  assert.equal(g.dataSync()[0], 1023);
  assert.equal(s.dataSync()[1023], 1023 + 0);
  assert.equal(e.dataSync()[0], 1023 * 1024);
  void ms; // speed is measured in bench/, never asserted in tests
});
