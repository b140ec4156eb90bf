// Sorting family against PyTorch goldens (test/gen/sort.py): values and indices exactly, ties included,
// plus error cases, views, and properties the goldens do not cover.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import * as nbx from '../src/index.js';
import { Tensor } from '../src/tensor/tensor.js';
import { allocStorage, type DTypeName } from '../src/dtype/dtypes.js';
import { writeNumber } from '../src/dtype/convert.js';
import { goldenFailures, resolveOp as resolve } from './golden.js';

type Enc = { dtype: DTypeName; shape: number[]; data: (number | string | boolean)[] };
type Case = { id: string; op: string; args: unknown[]; kwargs: Record<string, unknown>; out?: Enc[]; error?: boolean; exact: boolean; rtol: number; atol: number };
const fx = JSON.parse(readFileSync(new URL('../../test/fixtures/sort_goldens.json', import.meta.url), 'utf8')) as { tensors: Record<string, Enc>; cases: Case[] };

const num = (v: number | string | boolean): number => (v === 'nan' ? NaN : v === 'inf' ? Infinity : v === '-inf' ? -Infinity : Number(v));

function decodeTensor(e: Enc): Tensor {
  const a = allocStorage(e.dtype, e.data.length);
  e.data.forEach((v, i) => {
    if (e.dtype === 'int64') (a as BigInt64Array)[i] = BigInt(v as number | string);
    else writeNumber(e.dtype, a, i, num(v));
  });
  return Tensor.fromStorage(a, e.dtype, e.shape);
}

function decode(v: unknown): unknown {
  if (Array.isArray(v)) return v.map(decode);
  if (v === null || typeof v !== 'object') return v;
  const o = v as Record<string, unknown>;
  if ('float' in o) return nbx.scalar.float(o.float as number);
  if ('ref' in o) {
    let t = decodeTensor(fx.tensors[o.ref as string]!);
    for (const [k, ...rest] of (o.view as [string, ...unknown[]][] | undefined) ?? []) {
      if (k === 'transpose') t = t.transpose(rest[0] as number, rest[1] as number);
      else if (k === 'expand') t = t.expand(rest[0] as number[]);
      else if (k === 'slice') t = t.slice(rest[0] as number, rest[1] as number, rest[2] as number, rest[3] as number);
    }
    return t;
  }
  return Object.fromEntries(Object.entries(o).map(([k, x]) => [k, decode(x)]));
}


/** Compares an output with a golden; returns a message or undefined. */
export function mismatch(got: Tensor, want: Enc, exact: boolean, rtol: number, atol: number): string | undefined {
  if (got.dt !== want.dtype) return `dtype ${got.dt} != ${want.dtype}`;
  if (got.shape.join() !== want.shape.join()) return `shape [${got.shape}] != [${want.shape}]`;
  const g = got.dataSync();
  for (let i = 0; i < want.data.length; i++) {
    const w = want.data[i]!;
    if (got.dt === 'int64') { if ((g as BigInt64Array)[i] !== BigInt(w as number | string)) return `[${i}] ${g[i]} != ${w}`; continue; }
    const x = Number(g[i]), y = num(w);
    if (Number.isNaN(x) && Number.isNaN(y)) continue;
    if (exact ? !Object.is(x, y) : !(Math.abs(x - y) <= atol + rtol * Math.abs(y) || x === y)) return `[${i}] ${x} != ${y}`;
  }
  return undefined;
}

test('sorting family matches PyTorch goldens (ties, NaN, dtypes, views, errors)', () => {
  const call = (c: Case): unknown => {
    const kw = decode(c.kwargs) as Record<string, unknown>;
    return resolve(c.op)(...c.args.map(decode), ...(Object.keys(kw).length ? [kw] : []));
  };
  const failures = goldenFailures(fx.cases, call, (r, c) => {
    const outs = r instanceof Tensor ? [r] : (r as Tensor[]);
    if (outs.length !== c.out!.length) return `${outs.length} outputs, want ${c.out!.length}`;
    const bad = outs.map((o, i) => { const m = mismatch(o, c.out![i]!, c.exact, c.rtol, c.atol); return m ? ` output ${i}: ${m}` : ''; }).join('');
    return bad || undefined;
  });
  assert.deepEqual(failures, []);
});

test('sort returns (values, indices) with names; argsort/msort and methods agree', () => {
  const x = nbx.tensor([[3, 1, 2], [0, 5, 4]], { dtype: 'float32' });
  const r = nbx.sort(x, { descending: true });
  assert.equal(r.values, r[0]);
  assert.equal(r.indices, r[1]);
  assert.deepEqual(r.values.tolist(), [[3, 2, 1], [5, 4, 0]]);
  assert.deepEqual(x.argsort().tolist(), [[1, 2, 0], [0, 2, 1]]);
  assert.deepEqual(x.msort().tolist(), [[0, 1, 2], [3, 5, 4]]);
  assert.deepEqual(x.topk(1).indices.tolist(), [[0], [1]]);
  assert.deepEqual(x.kthvalue(2, 0, true).values.tolist(), [[3, 5, 4]]);
  assert.throws(() => nbx.sort(x, 0, false, true), nbx.ValueError); // stable is keyword-only
  const u = nbx.unique(nbx.tensor([3, 1, 3]), { return_counts: true }) as Tensor[];
  assert.deepEqual(u.map((t) => t.tolist()), [[1, 3], [1, 2]]);
  assert.throws(() => nbx.sort(nbx.complex(x, x)), nbx.DTypeError);
});

test('sort is fast enough for large inputs', () => {
  const n = 200_000;
  const x = nbx.tensor(Float32Array.from({ length: n }, (_, i) => ((i * 7919) % 1000) / 7));
  const t0 = performance.now();
  const { values } = nbx.sort(x);
  const v = values.dataSync() as Float32Array;
  for (let i = 1; i < n; i++) assert.ok(v[i - 1]! <= v[i]!);
  void t0; // speed is measured in bench/, never asserted in tests
});

test('a broadcast (stride 0) sort dim keeps index order, as torch >= 2.0', () => {
  const x = nbx.tensor(Float32Array.from({ length: 40 }, (_, i) => i % 3)).reshape(1, 40).expand(40, 40);
  for (const descending of [false, true]) {
    const idx = nbx.sort(x, 0, descending).indices.select(1, 5).tolist() as number[];
    assert.deepEqual(idx, [...Array(40).keys()]);
  }
});
