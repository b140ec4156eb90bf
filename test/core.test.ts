// Core: dtype conversions and promotion against PyTorch goldens, views, lifetimes, errors.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import * as nbx from '../src/index.js';
import { bitsToF32 } from '../src/dtype/convert.js';
import type { DTypeName } from '../src/dtype/dtypes.js';

const fixture = JSON.parse(readFileSync(new URL('../../test/fixtures/core.json', import.meta.url), 'utf8')) as {
  inputs_f32_bits: number[]; finite_f32_bits: number[]; conversions: Record<string, number[]>;
  promote: Record<string, string>; result_type: [string, boolean, string, string][]; can_cast: Record<string, boolean>;
};

test('float conversions are bit-exact with PyTorch (RNE, subnormals, overflow, NaN)', () => {
  const x = nbx.tensor(new Float32Array(fixture.inputs_f32_bits.map(bitsToF32)));
  for (const d of ['float16', 'bfloat16', 'float8_e4m3fn', 'float8_e5m2'] as DTypeName[]) {
    const want = fixture.conversions[d];
    if (!want) continue;
    const got = Array.from(x.to(d).dataStorageSync() as Uint16Array);
    const bad = got.findIndex((g, i) => g !== want[i] && !(isNaNBits(d, g) && isNaNBits(d, want[i]!)));
    assert.equal(bad, -1, `${d}: element ${bad} (input ${bitsToF32(fixture.inputs_f32_bits[bad]!)}) got ${got[bad]} want ${want[bad]}`);
  }
});

function isNaNBits(d: string, b: number): boolean {
  if (d === 'float16') return (b & 0x7c00) === 0x7c00 && (b & 0x3ff) !== 0;
  if (d === 'bfloat16') return (b & 0x7f80) === 0x7f80 && (b & 0x7f) !== 0;
  if (d === 'float8_e4m3fn') return (b & 0x7f) === 0x7f;
  return (b & 0x7c) === 0x7c && (b & 3) !== 0;
}

test('float to integer and bool conversions match PyTorch', () => {
  const x = nbx.tensor(new Float32Array(fixture.finite_f32_bits.map(bitsToF32)));
  for (const d of ['int32', 'int16', 'int8', 'uint8', 'bool', 'int64'] as DTypeName[]) {
    const got = (x.to(d).tolist() as (number | boolean)[]).map(Number);
    assert.deepEqual(got, fixture.conversions[d], d);
  }
});

test('promote_types, result_type and can_cast match PyTorch for every pair', () => {
  for (const [k, want] of Object.entries(fixture.promote)) {
    const [a, b] = k.split(',') as [DTypeName, DTypeName];
    assert.equal(nbx.promote_types(a, b).name, want, k);
  }
  for (const [a, zero, kind, want] of fixture.result_type) {
    const t = nbx.zeros(zero ? [] : [2], { dtype: a as DTypeName });
    let other: unknown;
    if (kind.startsWith('zerodim:')) other = nbx.zeros([], { dtype: kind.slice(8) as DTypeName });
    else other = kind === 'int' ? nbx.scalar.int(3) : kind === 'float' ? nbx.scalar.float(2.5) : true;
    assert.equal(nbx.result_type(t, other as nbx.Tensor).name, want, `${a} ${zero ? '0-d' : '1-d'} with ${kind}`);
  }
  for (const [k, want] of Object.entries(fixture.can_cast)) {
    const [a, b] = k.split(',') as [DTypeName, DTypeName];
    assert.equal(nbx.can_cast(a, b), want, k);
  }
});

test('JS numbers: integral values act as Python ints, others as floats; wrappers force a kind', () => {
  const i8 = nbx.tensor([1, 2, 3], { dtype: 'int8' });
  assert.equal(nbx.add(i8, 2).dtype.name, 'int8');
  assert.equal(nbx.add(i8, 2.5).dtype.name, 'float32');
  assert.equal(nbx.add(i8, nbx.scalar.float(2)).dtype.name, 'float32');
  assert.equal(nbx.tensor([1, 2]).dtype.name, 'int64');
  assert.equal(nbx.tensor([1.5, 2]).dtype.name, 'float32');
  assert.equal(nbx.div(nbx.tensor([1, 2]), 2).dtype.name, 'float32'); // integer true division → default float
});

test('views share storage exactly where PyTorch does', () => {
  const x = nbx.arange(24, { dtype: 'float32' }).reshape(2, 3, 4);
  const views = [x.view(6, 4), x.permute(2, 0, 1), x.transpose(0, 2), x.narrow(1, 1, 2), x.select(0, 1), x.slice(2, 0, 4, 2),
    x.expand(5, 2, 3, 4), x.unsqueeze(1), x.flatten(), x.movedim(0, -1), x.unfold(2, 2, 1), ...x.chunk(2, 1), ...x.split([1, 2], 1), ...x.unbind(0)];
  for (const v of views) assert.equal(v.storage, x.storage);
  const r = x.permute(2, 0, 1).reshape(-1); // not viewable: a copy
  assert.notEqual(r.storage, x.storage);
  assert.deepEqual(x.slice(2, 1, null, 2).tolist(), [[[1, 3], [5, 7], [9, 11]], [[13, 15], [17, 19], [21, 23]]]);
  assert.throws(() => x.permute(2, 0, 1).view(24), nbx.ShapeError);
  assert.deepEqual(x.as_strided([2, 2], [1, 2], 1).tolist(), [[1, 3], [2, 4]]);
  assert.throws(() => x.as_strided([30], [1]), nbx.IndexError);
});

test('dispose and scopes release tensors; a disposed tensor is a clear error', async () => {
  const a = nbx.ones(3);
  a.dispose();
  assert.throws(() => a.add(1), nbx.DisposedError);
  let inner: nbx.Tensor | undefined;
  const kept = nbx.scope(() => { inner = nbx.ones(2); return nbx.add(inner, 1); });
  assert.ok(inner!.isDisposed);
  assert.ok(!kept.isDisposed);
  let tmp: nbx.Tensor | undefined;
  const res = await nbx.scope(async () => {
    tmp = nbx.ones(2);
    await new Promise((r) => setTimeout(r, 1));
    const after = nbx.mul(tmp, 3); // created after an await: still this scope's
    return { after };
  });
  assert.ok(tmp!.isDisposed);
  assert.deepEqual(res.after.tolist(), [3, 3]);
  // views keep the storage alive until the last one goes
  const base = nbx.arange(4);
  const v = base.view(2, 2);
  base.dispose();
  assert.deepEqual(v.tolist(), [[0, 1], [2, 3]]);
});

test('typed errors name the operation and the offending shapes or dtypes', () => {
  assert.throws(() => nbx.add(nbx.ones(2, 3), nbx.ones(4)), (e: unknown) => e instanceof nbx.ShapeError && /add/.test((e as Error).message) && /\[2, 3\]/.test((e as Error).message));
  assert.throws(() => nbx.sum(nbx.ones(2), 3), nbx.IndexError);
  assert.throws(() => nbx.mean(nbx.tensor([1, 2])), nbx.DTypeError);
  assert.throws(() => nbx.bitwise_and(nbx.ones(2), nbx.ones(2)), nbx.DTypeError);
  assert.throws(() => nbx.add(nbx.ones(2), nbx.ones(2), { alphaa: 2 }), nbx.ValueError);
  assert.throws(() => nbx.floor_divide(nbx.tensor([1]), nbx.tensor([0])), nbx.NbxError);
  assert.throws(() => nbx.ones(2).to('float8_e4m3fn').add(1), nbx.DTypeError);
  // the engine keeps working afterwards
  assert.deepEqual(nbx.add(nbx.ones(2), 1).tolist(), [2, 2]);
});

test('elementwise on strided, broadcast, zero-size and zero-dim tensors', () => {
  const x = nbx.arange(12, { dtype: 'float32' }).reshape(3, 4);
  assert.deepEqual(nbx.add(x.t(), nbx.tensor([1, 2, 3])).tolist(), [[1, 6, 11], [2, 7, 12], [3, 8, 13], [4, 9, 14]]);
  assert.deepEqual(nbx.mul(nbx.zeros(0, 3), nbx.ones(3)).shape, [0, 3]);
  assert.equal(nbx.add(nbx.tensor(2), nbx.tensor(3)).item(), 5);
  const i64 = nbx.tensor([9007199254740993n, -5n]);
  assert.deepEqual(nbx.add(i64, 1).tolist(), [9007199254740994n, -4n]); // one element beyond 2^53: the whole list is bigints
  assert.deepEqual(nbx.sum(nbx.tensor([9007199254740993n, 2n])).item(), 9007199254740995n);
  assert.deepEqual(nbx.tensor([100, 120], { dtype: 'int8' }).add(100).tolist(), [-56, -36]); // wrap-around
});

test('reductions: dims, keepdim, integer sums to int64', () => {
  const x = nbx.arange(24, { dtype: 'int32' }).reshape(2, 3, 4);
  const s = nbx.sum(x, [0, 2], { keepdim: true });
  assert.deepEqual(s.shape, [1, 3, 1]);
  assert.equal(s.dtype.name, 'int64');
  assert.deepEqual(s.flatten().tolist(), [60, 92, 124]);
  const m = nbx.max(x.to('float32'), 1);
  assert.deepEqual(m.values.shape, [2, 4]);
  assert.deepEqual(m.indices.tolist(), [[2, 2, 2, 2], [2, 2, 2, 2]]);
  assert.equal(nbx.mean(nbx.zeros(0)).item(), NaN);
});
