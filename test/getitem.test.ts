// Python's x[...] as x.index(...) / x.index('...') / x[i], and x[...] = v as x.index_set_(...): results,
// shapes and view-versus-copy compared with PyTorch's (test/fixtures/getitem.json, made by
// scripts/gen-getitem-fixture.py).

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import * as nbx from '../src/index.js';

const fixture = JSON.parse(readFileSync(new URL('../../test/fixtures/getitem.json', import.meta.url), 'utf8')) as {
  torch: string; cases: { index: string; shape: number[]; values: number[]; view: boolean }[];
};
const X = (): nbx.Tensor => nbx.arange(120).reshape(2, 3, 4, 5);
const flat = (t: nbx.Tensor): number[] => t.reshape(-1).tolist() as number[];

test(`x.index(text) matches PyTorch ${fixture.torch}'s x[...] in ${fixture.cases.length} cases (values, shape, view or copy)`, () => {
  const x = X();
  for (const c of fixture.cases) {
    const r = x.index(c.index);
    assert.deepEqual([...r.shape], c.shape, c.index);
    assert.deepEqual(flat(r), c.values, c.index);
    assert.equal(r.storage === x.storage, c.view, `${c.index}: view`);
  }
});

test('the argument form: integers, nbx.slice, null, "...", booleans, index tensors and lists', () => {
  const x = X();
  const same = (a: nbx.Tensor, text: string): void => {
    const b = x.index(text);
    assert.deepEqual([...a.shape], [...b.shape], text);
    assert.deepEqual(flat(a), flat(b), text);
  };
  same(x.index(0, nbx.slice(1, null, 2), null, '...'), '0, 1::2, None, ...');
  same(x.index(nbx.slice(2)), ':2');
  same(x.index(nbx.slice(null), nbx.tensor([0, 2]), 1), ':, [0, 2], 1');
  const two = x.index(nbx.tensor([[0, 1], [1, 0]], { dtype: nbx.int })); // a 2-d index tensor (int32 allowed)
  assert.deepEqual([...two.shape], [2, 2, 3, 4, 5]);
  assert.deepEqual(flat(two), flat(x.index('[0, 1, 1, 0]')));
  same(x.index(0, nbx.tensor([true, false, true])), '0, [True, False, True]');
  assert.deepEqual(flat(x.index(x.gt(100))), Array.from({ length: 19 }, (_, i) => 101 + i));
  same(x.index(nbx.Ellipsis, [4, 0]), '..., [4, 0]');
});

test('x[i] and x[i] = v through integer properties', () => {
  const x = X();
  assert.equal(x[1][2][3][4].item(), 119);
  assert.deepEqual([...x[-1].shape], [3, 4, 5]);
  assert.equal(x[0].storage, x.storage);
  const y = nbx.zeros(3, 2);
  y[1] = 5;
  y[2] = nbx.tensor([1, 2]); // int64 values cast to float32, as PyTorch's setitem
  y[0][1] = -1;
  assert.deepEqual(y.tolist(), [[0, -1], [5, 5], [1, 2]]);
  assert.throws(() => x[2], /index 2 is out of bounds for dimension 0 with size 2/);
});

test('index_set_ writes views and advanced indices into x, as x[...] = v', () => {
  const y = nbx.zeros(3, 4);
  y.index_set_('1:, [0, 2]', 5);
  y.index_set_([y.gt(4)], nbx.tensor(7, { dtype: nbx.float }));
  y.index_set_(0, nbx.arange(4));
  assert.deepEqual(y.tolist(), [[0, 1, 2, 3], [7, 0, 7, 0], [7, 0, 7, 0]]);
  y.index_set_([nbx.slice(null), nbx.slice(null, null, 3)], nbx.tensor([[1], [2], [3]], { dtype: nbx.float }));
  assert.deepEqual(y.tolist(), [[1, 1, 2, 1], [2, 0, 7, 2], [3, 0, 7, 3]]);
  y.index_set_('...', 0);
  assert.deepEqual(y.tolist(), [[0, 0, 0, 0], [0, 0, 0, 0], [0, 0, 0, 0]]);
  const v = y.t(); // writes through a view of y
  v.index_set_([[1, 3]], 9);
  assert.deepEqual(y.tolist(), [[0, 9, 0, 9], [0, 9, 0, 9], [0, 9, 0, 9]]);
});

test("PyTorch's index errors", () => {
  const x = X();
  const bad: [() => unknown, RegExp][] = [
    [() => x.index(0, 0, 0, 0, 0), /too many indices for tensor of dimension 4/],
    [() => x.index(5), /index 5 is out of bounds for dimension 0 with size 2/],
    [() => x.index('..., ...'), /an index can only have a single ellipsis/],
    [() => x.index('::-1'), /step must be greater than zero/],
    [() => x.index('::0'), /slice step cannot be zero/],
    [() => x.index(nbx.tensor([1.5])), /tensors used as indices must be long, int, byte or bool tensors/],
    [() => x.index(nbx.tensor([7])), /index 7 is out of bounds for dimension 0 with size 2/],
    [() => x.index(nbx.tensor([true, false, true])), /The shape of the mask \[3\] at index 0 does not match the shape of the indexed tensor \[2, 3, 4, 5\] at index 0/],
    [() => x.index(1.5), /only integers, slices/],
    [() => x.index('0, foo'), /cannot read 'foo' in the index '0, foo'/],
    // @ts-expect-error a scalar wrapper is not an index item
    [() => x.index(nbx.scalar.float(1)), /cannot index with the scalar float\(1\)/],
  ];
  for (const [f, re] of bad) assert.throws(f, (e: Error) => e instanceof nbx.NbxError && re.test(e.message), String(re));
});
