// The everyday functions (issue 18, item 6). Expected values are PyTorch 1.13's for the same calls.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import * as nbx from '../src/index.js';

const F = nbx.nn.functional;
const f32 = (v: unknown): nbx.Tensor => nbx.tensor(v, { dtype: nbx.float });
const close = (a: number[], b: number[], tol = 1e-6): void => {
  assert.equal(a.length, b.length);
  a.forEach((v, i) => assert.ok(Math.abs(v - b[i]!) <= tol, `${a} vs ${b}`));
};

test('isclose, allclose, equal', () => {
  const a = f32([1, 2, NaN, Infinity]), b = f32([1, 2.0001, NaN, Infinity]);
  assert.deepEqual(nbx.isclose(a, b).tolist(), [true, false, false, true]);
  assert.deepEqual(nbx.isclose(a, b, { equal_nan: true }).tolist(), [true, false, true, true]);
  assert.deepEqual(a.isclose(b, { rtol: 1e-3 }).tolist(), [true, true, false, true]);
  assert.equal(nbx.allclose(a, b), false);
  assert.equal(nbx.allclose(a.slice(0, 0, 2), b.slice(0, 0, 2)), false);
  assert.equal(nbx.allclose(a.slice(0, 0, 2), b.slice(0, 0, 2), 1e-3), true);
  assert.equal(nbx.allclose(a, b, { rtol: 1e-3, equal_nan: true }), true);
  assert.equal(nbx.allclose(nbx.ones(2), nbx.ones(1)), true); // broadcasts, as PyTorch
  assert.equal(nbx.allclose(f32([-Infinity]), f32([Infinity])), false);
  assert.deepEqual(nbx.isclose(nbx.tensor([1, 2]), nbx.tensor([1, 3])).tolist(), [true, false]);
  assert.deepEqual(nbx.isclose(nbx.tensor([true]), nbx.tensor([true]), { rtol: 0.1 }).tolist(), [true]);
  assert.throws(() => nbx.isclose(nbx.tensor([1]), f32([1])), (e: Error) => e instanceof nbx.DTypeError && /Long did not match Float/.test(e.message));
  assert.throws(() => nbx.isclose(nbx.ones(2), nbx.ones(1), { rtol: -1 }), /rtol must be greater than or equal to zero, but got -1/);
  assert.throws(() => nbx.isclose(nbx.ones(2), nbx.ones(3)), nbx.ShapeError);
  assert.equal(nbx.equal(nbx.tensor([1]), f32([1])), true);
  assert.equal(nbx.equal(nbx.ones(2), nbx.ones(3)), false);
  assert.equal(nbx.equal(f32([NaN]), f32([NaN])), false);
  assert.equal(nbx.arange(3).equal(nbx.arange(3)), true);
  assert.equal(typeof nbx.allclose(a, a), 'boolean');
});

test('as_tensor and frombuffer share memory with typed arrays; tensors pass through', () => {
  const arr = new Float32Array([1, 2, 3, 4]);
  const t = nbx.as_tensor(arr);
  assert.equal(t.dtype, nbx.float32);
  t.mul_(10);
  assert.deepEqual([...arr], [10, 20, 30, 40]);
  arr[0] = -1;
  assert.equal(t[0].item(), -1);
  t.dispose();
  const again = nbx.zeros(4); // a disposed borrowed buffer is never handed to another tensor
  again.fill_(5);
  assert.deepEqual([...arr], [-1, 20, 30, 40]);
  const c = nbx.as_tensor(arr, { dtype: nbx.float64 }); // another dtype: a copy
  c.fill_(0);
  assert.deepEqual([...arr], [-1, 20, 30, 40]);
  const x = nbx.arange(3);
  assert.equal(nbx.as_tensor(x), x);
  assert.equal(nbx.as_tensor([1.5, 2]).dtype, nbx.float32);
  const bytes = new Uint8Array(16);
  const i32 = nbx.frombuffer(bytes, { dtype: nbx.int, offset: 4, count: 2 });
  i32.fill_(0x01020304);
  assert.deepEqual([...bytes.slice(0, 12)], [0, 0, 0, 0, 4, 3, 2, 1, 4, 3, 2, 1]);
  assert.deepEqual([...nbx.frombuffer(bytes.buffer, { dtype: nbx.int16 }).shape], [8]);
  assert.deepEqual(nbx.frombuffer(new Float32Array([1.5]).buffer, { dtype: 'float32' }).tolist(), [1.5]);
  assert.throws(() => nbx.frombuffer(bytes), /missing required argument 'dtype'/);
  assert.throws(() => nbx.frombuffer(new Uint8Array(3), { dtype: nbx.int16 }), /buffer length \(3 bytes\) after offset \(0 bytes\) must be a multiple of element size \(2\)/);
  assert.throws(() => nbx.frombuffer(bytes, { dtype: nbx.int, offset: 2, count: 1 }), /not a multiple of 4 bytes/);
  assert.throws(() => nbx.frombuffer([1, 2], { dtype: nbx.int }), /must be an ArrayBuffer/);
});

test('cdist, bincount, diff, isin', () => {
  const x1 = f32([[0, 0], [3, 4]]);
  close(nbx.cdist(x1, f32([[0, 0], [1, 1]])).reshape(-1).tolist() as number[], [0, Math.SQRT2, 5, 3.605551242828369]);
  assert.deepEqual(nbx.cdist(x1, f32([[0, 0]]), { p: 1 }).tolist(), [[0], [7]]);
  assert.deepEqual(nbx.cdist(x1, f32([[0, 0]]), { p: Infinity }).tolist(), [[0], [4]]);
  close(nbx.cdist(x1, f32([[0, 0]]), { p: 3 }).reshape(-1).tolist() as number[], [0, Math.cbrt(91)], 1e-5);
  assert.deepEqual([...nbx.cdist(nbx.ones(2, 5, 3), nbx.ones(2, 4, 3)).shape], [2, 5, 4]);
  assert.throws(() => nbx.cdist(nbx.ones(2, 3), nbx.ones(2, 2)), /X1 and X2 must have the same number of columns. X1: 3 X2: 2/);
  assert.deepEqual(nbx.bincount(nbx.tensor([1, 1, 3])).tolist(), [0, 2, 0, 1]);
  assert.deepEqual(nbx.bincount(nbx.tensor([1, 1, 3]), { minlength: 6 }).tolist(), [0, 2, 0, 1, 0, 0]);
  const w = nbx.bincount(nbx.tensor([1, 1, 3]), f32([0.5, 1, 2]));
  assert.deepEqual(w.tolist(), [0, 1.5, 0, 2]);
  assert.equal(w.dtype, nbx.float32);
  assert.deepEqual(nbx.bincount(nbx.tensor([], { dtype: nbx.long })).tolist(), []);
  assert.throws(() => nbx.bincount(nbx.tensor([-1])), /bincount only supports 1-d non-negative integral inputs/);
  assert.throws(() => nbx.bincount(f32([1])), /"bincount_cpu" not implemented for 'Float'/);
  assert.deepEqual(nbx.diff(nbx.tensor([1, 4, 9, 16])).tolist(), [3, 5, 7]);
  assert.deepEqual(nbx.diff(nbx.tensor([[1, 2], [4, 8]]), { dim: 0 }).tolist(), [[3, 6]]);
  assert.deepEqual(nbx.diff(nbx.tensor([1, 4, 9]), { n: 2, prepend: nbx.tensor([0]), append: nbx.tensor([20]) }).tolist(), [2, 2, 6]);
  assert.deepEqual(nbx.diff(nbx.tensor([true, false, false])).tolist(), [true, false]);
  assert.deepEqual(nbx.isin(nbx.tensor([1, 2, 3, 4]), nbx.tensor([2, 4])).tolist(), [false, true, false, true]);
  assert.deepEqual(nbx.isin(nbx.tensor([1, 2, 3]), 2).tolist(), [false, true, false]);
  assert.deepEqual(nbx.isin(nbx.tensor([1, 2, 3]), nbx.tensor([2]), { invert: true }).tolist(), [true, false, true]);
});

test('nn.functional.cosine_similarity', () => {
  close(F.cosine_similarity(f32([[1, 0], [1, 1]]), f32([[1, 0], [0, 1]])).tolist() as number[], [1, Math.SQRT1_2]);
  assert.equal(F.cosine_similarity(f32([0, 0]), f32([1, 0]), { dim: 0 }).item(), 0);
  assert.deepEqual([...F.cosine_similarity(nbx.ones(4, 3, 2), nbx.ones(3, 2), { dim: -1 }).shape], [4, 3]);
});

test('new_zeros, new_ones, new_full, new_empty, new_tensor, type()', () => {
  const x = nbx.ones(2, { dtype: nbx.int });
  const z = x.new_zeros(3);
  assert.deepEqual([z.dtype, z.tolist()], [nbx.int32, [0, 0, 0]]);
  assert.deepEqual(x.new_ones([2, 2], { dtype: nbx.half }).dtype, nbx.float16);
  assert.deepEqual(x.new_full([2], 7).tolist(), [7, 7]);
  assert.equal(x.new_full([2], 7).dtype, nbx.int32);
  assert.deepEqual([...x.new_empty(1, 4).shape], [1, 4]);
  const t = nbx.ones(2).new_tensor([1, 2]);
  assert.deepEqual([t.dtype, t.tolist()], [nbx.float32, [1, 2]]);
  assert.equal(nbx.ones(2).type(), 'nbx.FloatTensor');
  assert.equal(nbx.ones(2).type(nbx.long).dtype, nbx.int64);
  assert.equal(nbx.ones(2).type('torch.DoubleTensor').dtype, nbx.float64);
  assert.throws(() => nbx.ones(2).type('torch.FooTensor'), /invalid type/);
});

test('Symbol.dispose: `using` frees a tensor at the end of its block', () => {
  let seen: nbx.Tensor;
  {
    using t = nbx.ones(3);
    seen = t;
    assert.equal(t.isDisposed, false);
  }
  assert.equal(seen.isDisposed, true);
  assert.throws(() => seen.tolist(), nbx.DisposedError);
});

test('WebGPU: await allclose/equal, index with a CPU mask, typed errors for data-dependent sizes (skipped without an adapter)', async (t) => {
  if (!(await nbx.webgpu.isAvailable())) { t.skip('no WebGPU adapter on this machine'); return; }
  const x = nbx.arange(24, { dtype: nbx.float }).reshape(2, 3, 4).to('webgpu');
  assert.equal(await nbx.allclose(x, x), true);
  assert.equal(await nbx.equal(x, x.add(1)), false);
  assert.equal(await nbx.allclose(x, x.mul(1 + 1e-6)), true);
  assert.equal(await nbx.allclose(x, x.add(1e-7)), false); // the 0 element: |0 - 1e-7| > atol 1e-8, as in PyTorch
  assert.deepEqual((await x.index(':, [0, 2], 1::2').cpu()).tolist(), [[[1, 3], [9, 11]], [[13, 15], [21, 23]]]);
  assert.deepEqual((await x.index(await x.gt(20).cpu()).cpu()).tolist(), [21, 22, 23]);
  assert.throws(() => x.index(x.gt(20)), (e: Error) => e instanceof nbx.DeviceLimitError && /x\.index\(await mask\.cpu\(\)\)/.test(e.message));
  assert.throws(() => nbx.bincount(nbx.tensor([1, 2], { device: 'webgpu' })), (e: Error) => e instanceof nbx.DeviceLimitError && /nbx\.bincount\(await x\.cpu\(\)\)/.test(e.message));
  x.index_set_('0, 1:, [0, 3]', -1);
  assert.deepEqual(((await x.cpu()).tolist() as number[][][])[0], [[0, 1, 2, 3], [-1, 5, 6, -1], [-1, 9, 10, -1]]);
});
