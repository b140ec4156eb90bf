// PyTorch's dtype aliases are dtypes (torch.float is torch.float32, ...); the scalar-kind wrappers are
// nbx.scalar.float/int/bool; .to() and dtype= refuse what they do not understand, with typed errors.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import * as nbx from '../src/index.js';

test('every PyTorch alias is the dtype object it names', () => {
  const pairs: [unknown, nbx.DType][] = [
    [nbx.float, nbx.float32], [nbx.double, nbx.float64], [nbx.half, nbx.float16], [nbx.int, nbx.int32],
    [nbx.long, nbx.int64], [nbx.short, nbx.int16], [nbx.cfloat, nbx.complex64], [nbx.cdouble, nbx.complex128],
  ];
  for (const [alias, d] of pairs) assert.equal(alias, d);
  for (const d of [nbx.bool, nbx.uint8, nbx.int8, nbx.bfloat16]) assert.ok(d instanceof nbx.DType);
  assert.equal(String(nbx.float), 'nbx.float32');
});

test('aliases work wherever a dtype does, as objects and as names', () => {
  assert.equal(nbx.zeros(2, { dtype: nbx.float }).dtype, nbx.float32);
  assert.equal(nbx.arange(3).to(nbx.float).dtype, nbx.float32);
  assert.equal(nbx.arange(3).to(nbx.half).dtype, nbx.float16);
  assert.equal(nbx.ones(2).to('long').dtype, nbx.int64);
  assert.equal(nbx.ones(2).to('torch.int').dtype, nbx.int32);
  assert.equal(nbx.ones(2).to({ dtype: nbx.double }).dtype, nbx.float64);
  assert.equal(nbx.ones(2).to('cpu', nbx.short).dtype, nbx.int16);
  assert.equal(nbx.tensor([1, 2], { dtype: nbx.cfloat }).dtype, nbx.complex64);
  assert.equal(nbx.full([2], 1, { dtype: nbx.float }).dtype, nbx.float32);
  assert.equal(nbx.promote_types(nbx.int, nbx.float).name, 'float32');
  assert.equal(nbx.ones(2).float().dtype, nbx.float32); // the methods keep PyTorch's meaning
  assert.equal(nbx.ones(2).int().dtype, nbx.int32);
});

test('.to() and dtype= reject what they do not understand', () => {
  // eslint-disable-next-line @typescript-eslint/no-explicit-any
  const x = nbx.arange(3) as any, zeros = nbx.zeros as (...a: unknown[]) => nbx.Tensor; // wrong on purpose
  assert.throws(() => x.to(nbx.scalar.float(2)), (e: Error) => e instanceof nbx.DTypeError && /scalar wrapper is not a dtype/.test(e.message));
  assert.throws(() => x.to('floot'), (e: Error) => e instanceof nbx.DTypeError && /got 'floot'/.test(e.message));
  assert.throws(() => x.to(3), nbx.DTypeError);
  assert.throws(() => x.to({ dtyp: nbx.float }), (e: Error) => e instanceof nbx.ValueError && /unexpected keyword argument 'dtyp'/.test(e.message));
  assert.throws(() => x.to({ dtype: 'floot' }), (e: Error) => e instanceof nbx.DTypeError && /unknown dtype 'floot'/.test(e.message));
  assert.throws(() => zeros(2, { dtype: nbx.scalar.float(1) }), (e: Error) => e instanceof nbx.DTypeError && /nbx.scalar.float\(x\) wraps a value/.test(e.message));
  assert.deepEqual(x.tolist(), [0, 1, 2]);
});

test('scalar wrappers: nbx.scalar.float(2) is Python 2.0, nbx.scalar.int(3) is Python 3', () => {
  const i8 = nbx.tensor([1, 2, 3], { dtype: nbx.int8 });
  assert.equal(nbx.add(i8, 2).dtype, nbx.int8);
  assert.equal(nbx.add(i8, nbx.scalar.float(2)).dtype, nbx.float32);
  assert.equal(nbx.add(i8, nbx.scalar.int(3)).dtype, nbx.int8);
  assert.equal(nbx.arange(3).mul(nbx.scalar.float(2)).dtype, nbx.float32);
  assert.equal(String(nbx.scalar.float(2)), 'float(2)');
});

test('int64 made from integral JS numbers: the dtype errors say how to get floats', () => {
  for (const f of [() => nbx.tensor(9.0).mean(), () => nbx.nn.functional.softmax(nbx.full([2], 1.0), 0), () => nbx.matmul(nbx.arange(3).mul(2.0), nbx.ones(3))]) {
    assert.throws(f, (e: Error) => e instanceof nbx.DTypeError && /nbx\.scalar\.float/.test(e.message) && /dtype: nbx\.float32/.test(e.message));
  }
});

test('tolist() of int64: numbers unless an element is beyond 2^53, then every element is a bigint', () => {
  assert.deepEqual(nbx.tensor([1, -2]).tolist(), [1, -2]);
  assert.deepEqual(nbx.tensor([2n ** 60n, 1n]).tolist(), [2n ** 60n, 1n]);
  assert.deepEqual(nbx.tensor([[2n ** 53n], [3n]]).tolist(), [[2n ** 53n], [3n]]);
  assert.deepEqual(nbx.tensor([2n ** 53n - 1n]).tolist(), [2 ** 53 - 1]);
});
