// In-place operations write through views into the base tensor, with PyTorch's in-place rules.
// Expected values are PyTorch's (torch 1.13, the same statements in Python).

import { test } from 'node:test';
import assert from 'node:assert/strict';
import * as nbx from '../src/index.js';

const base = (): nbx.Tensor => nbx.arange(12, { dtype: nbx.float }).reshape(3, 4);

test('arithmetic through a slice, a transpose, a select and a view reaches the base', () => {
  const x = base();
  const r = x.slice(1, 1, 3).add_(10);
  assert.equal(r.storage, x.storage);
  assert.deepEqual(x.tolist(), [[0, 11, 12, 3], [4, 15, 16, 7], [8, 19, 20, 11]]);
  x.t().select(0, 0).mul_(-1); // column 0
  assert.deepEqual(x.tolist(), [[-0, 11, 12, 3], [-4, 15, 16, 7], [-8, 19, 20, 11]]);
  x.select(0, 2).sub_(nbx.tensor([1, 1, 1, 1]), { alpha: 2 });
  assert.deepEqual((x.tolist() as number[][])[2], [-10, 17, 18, 9]);
  x.view(12).narrow(0, 0, 2).div_(2);
  assert.deepEqual((x.tolist() as number[][])[0], [-0, 5.5, 12, 3]);
  const y = base();
  y.slice(0, 0, null, 2).slice(1, 0, null, 3).fill_(7); // x[::2, ::3] = 7
  assert.deepEqual(y.tolist(), [[7, 1, 2, 7], [4, 5, 6, 7], [7, 9, 10, 7]]);
  y.unsqueeze(0).select(0, 0).select(1, 1).zero_();
  assert.deepEqual(y.tolist(), [[7, 0, 2, 7], [4, 0, 6, 7], [7, 0, 10, 7]]);
});

test('unary, clamp and activation in-place methods', () => {
  const x = nbx.tensor([[-2, -0.5], [0.5, 2]]);
  x.select(0, 0).clamp_(-1, 0);
  assert.deepEqual(x.tolist(), [[-1, -0.5], [0.5, 2]]);
  x.clamp_({ max: 1 });
  assert.deepEqual(x.tolist(), [[-1, -0.5], [0.5, 1]]);
  x.t().select(0, 0).relu_();
  assert.deepEqual(x.tolist(), [[0, -0.5], [0.5, 1]]);
  x.abs_();
  assert.deepEqual(x.tolist(), [[0, 0.5], [0.5, 1]]);
  const z = nbx.zeros(2, 2);
  z.select(1, 1).exp_();
  assert.deepEqual(z.tolist(), [[0, 1], [0, 1]]);
  z.log_();
  assert.deepEqual(z.tolist(), [[-Infinity, 0], [-Infinity, 0]]);
  nbx.nn.functional.relu_(x.neg_());
  assert.deepEqual(x.tolist(), [[0, 0], [0, 0]]);
  const n = nbx.tensor([1.5, NaN, Infinity]);
  n.nan_to_num_({ nan: 0, posinf: 9 }).floor_();
  assert.deepEqual(n.tolist(), [1, 0, 9]);
  const c = nbx.tensor([1, 2, 3]);
  c.eq_(2); // writes the comparison in self's dtype
  assert.deepEqual(c.tolist(), [0, 1, 0]);
  assert.equal(c.dtype, nbx.long);
});

test('masked_fill_, index_put_, index_fill_, scatter_ through views', () => {
  const x = base();
  x.slice(0, 1).masked_fill_(nbx.tensor([true, false, false, true]), -1); // x[1:] masked
  assert.deepEqual(x.tolist(), [[0, 1, 2, 3], [-1, 5, 6, -1], [-1, 9, 10, -1]]);
  const y = base();
  y.t().index_put_([nbx.tensor([0, 3])], nbx.tensor(100, { dtype: nbx.float })); // y.t()[[0, 3]] = 100: columns 0 and 3
  assert.deepEqual(y.tolist(), [[100, 1, 2, 100], [100, 5, 6, 100], [100, 9, 10, 100]]);
  y.select(1, 1).index_put_([nbx.tensor([0, 0])], nbx.tensor([1, 2], { dtype: nbx.float }), { accumulate: true });
  assert.deepEqual((y.tolist() as number[][])[0], [100, 4, 2, 100]);
  const z = nbx.zeros(2, 3);
  z.slice(1, 1).index_fill_(1, nbx.tensor([1]), 5);
  assert.deepEqual(z.tolist(), [[0, 0, 5], [0, 0, 5]]);
  z.select(0, 0).scatter_(0, nbx.tensor([0, 1]), nbx.tensor([8, 9], { dtype: nbx.float }));
  assert.deepEqual(z.tolist(), [[8, 9, 5], [0, 0, 5]]);
});

test('copy_ broadcasts, casts, and writes a KV-cache slice', () => {
  const cache = nbx.zeros([1, 2, 6, 4]); // [batch, heads, positions, head_dim]
  const step = nbx.ones([1, 2, 2, 4], { dtype: nbx.half });
  cache.slice(2, 3, 5).copy_(step);
  const filled = cache.sum([0, 1, 3]).tolist();
  assert.deepEqual(filled, [0, 0, 0, 8, 8, 0]);
  const m = nbx.zeros(2, 3, { dtype: nbx.int });
  m.copy_(nbx.tensor([1.7, -2.2, 3.9])); // broadcast rows, float → int truncates
  assert.deepEqual(m.tolist(), [[1, -2, 3], [1, -2, 3]]);
  assert.throws(() => m.copy_(nbx.ones(4)), nbx.ShapeError);
  // @ts-expect-error copy_ takes a tensor
  assert.throws(() => m.copy_(5), /must be a Tensor/);
});

test("PyTorch's in-place rules: shape kept, result castable, no self-overlap", () => {
  const i = nbx.tensor([1, 2, 3]);
  assert.throws(() => base().index_put_([nbx.tensor([0])], nbx.tensor(1)), /Index put requires the source and destination dtypes match/);
  assert.throws(() => i.div_(2), (e: Error) => e instanceof nbx.DTypeError && /result type Float can't be cast to the desired output type Long/.test(e.message));
  assert.throws(() => i.add_(0.5), nbx.DTypeError);
  assert.deepEqual(i.tolist(), [1, 2, 3]); // untouched after the error
  i.div_(2, { rounding_mode: 'floor' });
  assert.deepEqual(i.tolist(), [0, 1, 1]);
  const v = nbx.zeros(3);
  assert.throws(() => v.add_(nbx.ones(2, 3)), (e: Error) => e instanceof nbx.ShapeError && /output with shape \[3\] doesn't match the broadcast shape \[2, 3\]/.test(e.message));
  const e = nbx.zeros(1).expand(3);
  assert.throws(() => e.add_(1), /more than one element of the written-to tensor refers to a single memory location/);
  assert.throws(() => e.fill_(1), /single memory location/);
  const f = nbx.zeros(2, { dtype: nbx.long });
  f.fill_(1.5);
  assert.deepEqual(f.tolist(), [1, 1]);
  f.fill_(nbx.tensor(7));
  assert.deepEqual(f.tolist(), [7, 7]);
  assert.throws(() => f.fill_(nbx.tensor([1, 2])), /0-dimension value tensor/);
  // @ts-expect-error a misspelt keyword
  assert.throws(() => f.add_(nbx.ones(2), { alpah: 1 }), /unexpected keyword argument 'alpah'/);
  const b = nbx.tensor([true, false]);
  b.logical_not_();
  assert.deepEqual(b.tolist(), [false, true]);
});

test('in-place on WebGPU writes through views (skipped without an adapter)', async (t) => {
  if (!(await nbx.webgpu.isAvailable())) { t.skip('no WebGPU adapter on this machine'); return; }
  const g = base().to('webgpu');
  g.slice(1, 1, 3).add_(10);
  g.t().select(0, 0).fill_(-1);
  g.select(0, 2).masked_fill_(nbx.tensor([true, false, true, false], { device: 'webgpu' }), 0);
  const c = await g.cpu();
  assert.deepEqual(c.tolist(), [[-1, 11, 12, 3], [-1, 15, 16, 7], [0, 19, 0, 11]]);
  const dst = nbx.zeros(4, { device: 'webgpu' });
  dst.slice(0, 1, 3).copy_(nbx.tensor([5, 6], { dtype: nbx.float })); // cpu → webgpu copy
  assert.deepEqual((await dst.cpu()).tolist(), [0, 5, 6, 0]);
});
