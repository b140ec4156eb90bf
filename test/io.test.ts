// nbx.io: tensors through safetensors files (round trips, names, dtype conversion, sharded, lazy handle).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import * as nbx from '../src/index.js';

const dir = mkdtempSync(join(tmpdir(), 'nbx-io-'));

test('save and load every dtype; names and dtype options', async () => {
  const ts: Record<string, nbx.Tensor> = {
    f32: nbx.arange(12, { dtype: 'float32' }).reshape(3, 4).t(), // non-contiguous: saved contiguously
    f16: nbx.tensor([1.5, -2, 65504], { dtype: 'float16' }),
    bf16: nbx.tensor([1.5, -2, 3e38], { dtype: 'bfloat16' }),
    i64: nbx.tensor([9007199254740993n, -1n]),
    b: nbx.tensor([true, false]),
    u8: nbx.tensor([0, 255], { dtype: 'uint8' }),
    e4: nbx.tensor([0.5, 448], { dtype: 'float32' }).to('float8_e4m3fn'),
    empty: nbx.zeros(0, 3),
    scalar: nbx.tensor(3.25, { dtype: 'float64' }),
  };
  const file = join(dir, 'all.safetensors');
  await nbx.io.saveSafetensors(file, ts, { format: 'pt' });
  const { tensors, metadata } = await nbx.io.loadSafetensors(file);
  assert.equal(metadata.format, 'pt');
  for (const [k, t] of Object.entries(ts)) {
    assert.equal(tensors[k]!.dt, t.dt, k);
    assert.deepEqual(tensors[k]!.shape, t.shape, k);
    assert.deepEqual(tensors[k]!.tolist(), t.tolist(), k);
  }
  const some = await nbx.io.loadSafetensors(file, { names: ['f32'], dtype: 'float16' });
  assert.deepEqual(Object.keys(some.tensors), ['f32']);
  assert.equal(some.tensors.f32!.dt, 'float16');
  await assert.rejects(nbx.io.loadSafetensors(file, { names: ['nope'] }), nbx.ValueError);
});

test('lazy handle lists without reading and reads one tensor on demand', async () => {
  const file = join(dir, 'lazy.safetensors');
  await nbx.io.saveSafetensors(file, { a: nbx.ones(2, 2), b: nbx.arange(5) });
  const h = await nbx.io.openSafetensors(file);
  assert.deepEqual(h.names().sort(), ['a', 'b']);
  assert.deepEqual(h.info('b').shape, [5]);
  assert.equal(h.info('b').dtype, 'int64');
  assert.deepEqual((await h.get('b')).tolist(), [0, 1, 2, 3, 4]);
  await h.close();
});

test('sharded checkpoints load as one set', async () => {
  await nbx.io.saveSafetensors(join(dir, 'm-1.safetensors'), { x: nbx.ones(2) });
  await nbx.io.saveSafetensors(join(dir, 'm-2.safetensors'), { y: nbx.zeros(3) });
  writeFileSync(join(dir, 'model.safetensors.index.json'), JSON.stringify({ metadata: { total_size: 20 }, weight_map: { x: 'm-1.safetensors', y: 'm-2.safetensors' } }));
  const { tensors } = await nbx.io.loadSafetensors(join(dir, 'model.safetensors.index.json'));
  assert.deepEqual(tensors.x!.tolist(), [1, 1]);
  assert.deepEqual(tensors.y!.tolist(), [0, 0, 0]);
  const viaDir = await nbx.io.loadSafetensors(dir);
  assert.deepEqual(Object.keys(viaDir.tensors).sort(), ['x', 'y']);
});

test('a hostile file is a typed error and the engine keeps working', async () => {
  const file = join(dir, 'bad.safetensors');
  const header = Buffer.from(JSON.stringify({ t: { dtype: 'F32', shape: [1000000000000], data_offsets: [0, 4] } }));
  const len = Buffer.alloc(8); len.writeBigUInt64LE(BigInt(header.length));
  writeFileSync(file, Buffer.concat([len, header, Buffer.alloc(4)]));
  await assert.rejects(nbx.io.loadSafetensors(file), nbx.FormatError);
  assert.deepEqual(nbx.add(nbx.ones(1), 1).tolist(), [2]);
});
