// Tests for the shape family (src/ops/shape.ts, src/backend/cpu/kernels/copy.ts): goldens from torch 1.13
// (test/gen/shape.py → test/fixtures/shape_*.json), plus view semantics, methods and large-tensor speed.
// `runGoldens` is shared with test/indexing.test.ts.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readdirSync, readFileSync } from 'node:fs';
import { fileURLToPath, pathToFileURL } from 'node:url';
import * as nbx from '../src/index.js';
import { Tensor } from '../src/tensor/tensor.js';
import { allocStorage, DType, type DTypeName } from '../src/dtype/dtypes.js';
import { writeNumber } from '../src/dtype/convert.js';
import { Scalar } from '../src/ops/registry.js';
import { resolveOp } from '../src/conformance/runner.js';

const FIXTURES = fileURLToPath(new URL('../../test/fixtures/', import.meta.url));

interface JTensor { dtype: DTypeName; shape: number[]; data: (number | string | boolean)[] }
interface GoldenCase { id: string; op: string; args: unknown[]; kwargs: Record<string, unknown>; out?: JTensor[]; error?: string; rtol?: number; atol?: number }

const special = (v: number | string | boolean): number => (v === 'nan' ? NaN : v === 'inf' ? Infinity : v === '-inf' ? -Infinity : Number(v));

function makeTensor(j: JTensor): Tensor {
  const a = allocStorage(j.dtype, j.data.length);
  j.data.forEach((v, i) => {
    if (j.dtype === 'int64') (a as BigInt64Array)[i] = BigInt(v as number | string);
    else writeNumber(j.dtype, a, i, special(v));
  });
  return Tensor.fromStorage(a, j.dtype, j.shape);
}

function decode(v: unknown): unknown {
  if (v === null || typeof v !== 'object') return v;
  if (Array.isArray(v)) return v.map(decode);
  const o = v as Record<string, unknown>;
  if ('tensor' in o) {
    let t = makeTensor(o.tensor as JTensor);
    for (const [k, ...r] of (o.view as [string, ...unknown[]][] | undefined) ?? []) {
      if (k === 'permute') t = t.permute(r[0] as number[]);
      else if (k === 'transpose') t = t.transpose(r[0] as number, r[1] as number);
      else if (k === 'slice') t = t.slice(r[0] as number, r[1] as number | null, r[2] as number | null, (r[3] as number | null) ?? 1);
      else if (k === 'expand') t = t.expand(r[0] as number[]);
    }
    return t;
  }
  if ('scalar' in o) return new Scalar(o.type === 'float' ? special(o.scalar as number) : (o.scalar as number), o.type as 'int' | 'float' | 'bool');
  if ('dtype' in o) return DType.all[o.dtype as DTypeName];
  if ('tuple' in o) return (o.tuple as unknown[]).map(decode);
  return v;
}

/** Compares got with the expected tensor; returns a message or undefined. */
function mismatch(got: unknown, want: JTensor, rtol = 0, atol = 0): string | undefined {
  if (!(got instanceof Tensor)) return `expected a tensor, got ${String(got)}`;
  if (got.dt !== want.dtype) return `dtype ${got.dt} != ${want.dtype}`;
  if (got.shape.join() !== want.shape.join()) return `shape [${got.shape}] != [${want.shape}]`;
  const g = got.dataSync();
  for (let i = 0; i < want.data.length; i++) {
    const w = want.data[i]!;
    if (want.dtype === 'int64') { if ((g as BigInt64Array)[i] !== BigInt(w as number | string)) return `at ${i}: ${g[i]} != ${w}`; continue; }
    const x = Number(g[i]), y = special(w);
    if (Number.isNaN(x) && Number.isNaN(y)) continue;
    if (x === y) continue;
    if (!(Math.abs(x - y) <= atol + rtol * Math.abs(y))) return `at ${i}: ${x} != ${y}`;
  }
  return undefined;
}

/** One test per fixture file `<prefix>*.json`: every case must match torch (or raise the named error). */
export function runGoldens(prefix: string): void {
  for (const file of readdirSync(FIXTURES).filter((f) => f.startsWith(prefix) && f.endsWith('.json'))) {
    test(`goldens ${file}`, () => {
      const { cases } = JSON.parse(readFileSync(FIXTURES + file, 'utf8')) as { cases: GoldenCase[] };
      const failures: string[] = [];
      for (const c of cases) {
        nbx.scope(() => {
          const fn = resolveOp(c.op);
          if (!fn) { failures.push(`${c.id}: no operation ${c.op}`); return; }
          const args = c.args.map(decode);
          const kw = Object.fromEntries(Object.entries(c.kwargs).map(([k, v]) => [k, decode(v)]));
          const call = (): unknown => fn(...(Object.keys(kw).length ? [...args, kw] : args));
          if (c.error) {
            try { call(); } catch (e) {
              if ((e as Error).name !== c.error) failures.push(`${c.id}: threw ${(e as Error).name} (${(e as Error).message}), expected ${c.error}`);
              return;
            }
            failures.push(`${c.id}: expected ${c.error}, but the call succeeded`);
            return;
          }
          let r: unknown;
          try { r = call(); } catch (e) { failures.push(`${c.id}: threw ${(e as Error).name}: ${(e as Error).message}`); return; }
          const outs = Array.isArray(r) ? r : [r];
          if (outs.length !== c.out!.length) { failures.push(`${c.id}: ${outs.length} outputs, expected ${c.out!.length}`); return; }
          outs.forEach((o, i) => { const m = mismatch(o, c.out![i]!, c.rtol, c.atol); if (m) failures.push(`${c.id} output ${i}: ${m}`); });
        });
      }
      assert.deepEqual(failures, [], `${failures.length} of ${cases.length} cases failed`);
    });
  }
}

const isMain = process.argv[1] !== undefined && import.meta.url === pathToFileURL(process.argv[1]).href;

if (isMain) {
  runGoldens('shape_');

  test('function forms of views share storage', () => {
    const x = nbx.arange(24, { dtype: 'float32' }).reshape(2, 3, 4);
    const views = [
      nbx.reshape(x, [6, 4]), nbx.flatten(x), nbx.unflatten(x, 2, [2, 2]), nbx.squeeze(x), nbx.unsqueeze(x, 1),
      nbx.permute(x, [2, 0, 1]), nbx.transpose(x, 0, 1), nbx.movedim(x, 0, 2), nbx.narrow(x, 2, 1, 2), nbx.select(x, 1, 0),
      ...nbx.chunk(x, 2, 2), ...nbx.split(x, 1), ...nbx.unbind(x), nbx.broadcast_to(x, [5, 2, 3, 4]), nbx.diagonal(x, 0, 1, 2),
      ...nbx.tensor_split(x, 2, 1), nbx.t(x.select(0, 0)), nbx.swapaxes(x, 0, 2),
    ];
    for (const v of views) assert.equal(v.storage, x.storage);
  });

  test('methods: varargs and lists', () => {
    const x = nbx.arange(6).reshape(2, 3);
    assert.deepEqual(x.flip(0, 1).tolist(), [[5, 4, 3], [2, 1, 0]]);
    assert.deepEqual(x.flip([1]).tolist(), [[2, 1, 0], [5, 4, 3]]);
    assert.deepEqual(x.repeat([1, 2]).tolist(), [[0, 1, 2, 0, 1, 2], [3, 4, 5, 3, 4, 5]]);
    assert.deepEqual(x.tile(2).shape, [2, 6]);
    assert.deepEqual(x.roll(1, 1).tolist(), [[2, 0, 1], [5, 3, 4]]);
    assert.deepEqual(x.tril().tolist(), [[0, 0, 0], [3, 4, 0]]);
    assert.deepEqual(nbx.nn.functional.pad(x, [1, 0], { value: 9 }).tolist(), [[9, 0, 1, 2], [9, 3, 4, 5]]);
    assert.deepEqual(nbx.chunk(nbx.zeros(0), 3).length, 3);
  });

  test('copy kernel handles complex lanes, 0-d and empty tensors', () => {
    assert.deepEqual(nbx.flip(nbx.tensor(3), [0]).tolist(), 3);
    assert.deepEqual(nbx.cat([nbx.zeros(0, 2), nbx.zeros(0, 2)]).shape, [0, 2]);
    assert.deepEqual(nbx.roll(nbx.zeros(0), 3).shape, [0]);
  });

  test('large tensors: flip/roll/pad/repeat/cat run as strided copies', () => {
    const x = nbx.arange(1 << 22, { dtype: 'float32' }).reshape(16, 512, 512);
    const t0 = performance.now();
    const f = nbx.flip(x, [1, 2]);
    const r = nbx.roll(x, [3, -7], [1, 2]);
    const p = nbx.nn.functional.pad(x, [2, 2, 2, 2], { mode: 'reflect' });
    const c = nbx.cat([x, x], 1);
    const rep = x.repeat(1, 2, 1);
    const ms = performance.now() - t0;
    assert.equal(f.dataSync()[0], 511 * 512 + 511); // f[0, 0, 0] = x[0, 511, 511]
    assert.equal(r.shape[1], 512);
    assert.deepEqual(p.shape, [16, 516, 516]);
    assert.deepEqual(c.shape, [16, 1024, 512]);
    assert.deepEqual(rep.shape, [16, 1024, 512]);
    void ms; // speed is measured in bench/, never asserted in tests
    for (const t of [x, f, r, p, c, rep]) t.dispose();
  });
}
