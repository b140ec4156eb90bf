// The host buffer pool: reused buffers come back zero-filled when asked, for every storage type.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import * as nbx from '../src/index.js';

test('pooled buffers are zeroed for zero-filled tensors of every storage type (int64 included)', () => {
  for (const dtype of ['int64', 'float32', 'float16', 'uint8', 'float64'] as const) {
    for (let r = 0; r < 2; r++) {
      nbx.full([256, 256], 7, { dtype }).dispose(); // back to the pool
      const z = nbx.zeros([256, 256], { dtype });
      const d = z.to('float64').dataSync();
      assert.ok(d.every((v) => v === 0), `${dtype}: a reused buffer was not cleared`);
      z.dispose();
    }
  }
});

test('a matmul with an empty inner dimension writes zeros into a reused buffer', () => {
  nbx.full([512, 512], Number.NaN).dispose();
  const c = nbx.matmul(nbx.ones(512, 0), nbx.ones(0, 512));
  assert.ok(c.dataSync().every((v) => v === 0));
});
