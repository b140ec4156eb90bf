// int64 on the CPU reference backend: casts to float round once (as PyTorch), sums and max/argmax
// are exact beyond 2^53. Expected values from PyTorch 1.13 (CPU).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import * as nbx from '../src/index.js';

test('int64 casts round once; sums and max/argmax are exact beyond 2^53', () => {
  assert.deepEqual(nbx.tensor([2n ** 60n + 2n ** 36n + 1n]).to('float32').tolist(), [1.1529216420458004e18]);
  assert.deepEqual(nbx.tensor([-(2n ** 62n) - 1n]).to('float32').tolist(), [-4.611686018427388e18]);
  assert.deepEqual(nbx.tensor([2n ** 53n + 1n]).to('bfloat16').tolist(), [9007199254740992]);
  assert.deepEqual(nbx.add(nbx.tensor([2n ** 24n + 1n]), 0.5).tolist(), [16777216]);
  assert.deepEqual(nbx.add(nbx.tensor([2 ** 24 + 1], { dtype: 'int32' }), 0.5).tolist(), [16777216]);
  assert.equal(nbx.sum(nbx.tensor([2n ** 53n + 1n, -(2n ** 53n)])).item(), 1);
  assert.equal(nbx.argmax(nbx.tensor([2n ** 53n + 1n, 2n ** 53n])).item(), 0);
  assert.equal((nbx.max(nbx.tensor([2n ** 53n, 2n ** 53n + 1n])) as nbx.Tensor).item(), 2n ** 53n + 1n);
  assert.equal(nbx.argmin(nbx.tensor([2n ** 53n + 1n, 2n ** 53n])).item(), 1);
});
