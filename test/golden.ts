// Shared by the golden tests (test/gen/*.py write the fixtures): tensors and arguments decoded from
// JSON, and the op looked up by its PyTorch name.
import assert from 'node:assert/strict';
import { readdirSync } from 'node:fs';
import * as nbx from '../src/index.js';
import type { Tensor } from '../src/tensor/tensor.js';
import type { DTypeName } from '../src/dtype/dtypes.js';

export type Num = number | string;
export interface Enc { shape: number[]; dtype: DTypeName; data: Num[] }

/** 'nan', 'inf', '-inf' as numbers; numbers as themselves. */
export const numOf = (v: Num): number => (v === 'nan' ? NaN : v === 'inf' ? Infinity : v === '-inf' ? -Infinity : Number(v));

/** A stored tensor (values as JSON numbers; int64 exact). */
export function makeTensor(e: Enc): Tensor {
  let t: Tensor;
  if (e.dtype === 'int64') t = nbx.tensor(new BigInt64Array(e.data.map((v) => BigInt(v))));
  else if (e.dtype === 'uint8' || e.dtype === 'bool') t = nbx.tensor(new Uint8Array(e.data as number[])).to(e.dtype);
  else if (e.dtype === 'int32' || e.dtype === 'int16' || e.dtype === 'int8') t = nbx.tensor(new Int32Array(e.data as number[])).to(e.dtype);
  else t = nbx.tensor(new Float64Array(e.data.map(numOf))).to(e.dtype);
  return t.reshape(e.shape);
}

/** A case argument: {tensor, view}, {dtype}, {float}, {bool}, arrays of those, or a plain value. */
export function decodeArg(v: unknown, tensors: Record<string, Enc>): unknown {
  if (v === null || typeof v !== 'object') return v;
  if (Array.isArray(v)) return v.map((x) => decodeArg(x, tensors));
  const o = v as Record<string, unknown>;
  if ('tensor' in o) {
    let t = makeTensor(tensors[o.tensor as string]!);
    for (const [k, ...r] of (o.view as unknown[][]) ?? []) {
      if (k === 'transpose') t = t.transpose(r[0] as number, r[1] as number);
      else if (k === 'permute') t = t.permute(r[0] as number[]);
      else if (k === 'slice') t = t.slice(r[0] as number, r[1] as number, r[2] as number, r[3] as number);
      else if (k === 'expand') t = t.expand(r[0] as number[]);
    }
    return t;
  }
  if ('dtype' in o) return nbx.DType.all[o.dtype as DTypeName];
  if ('float' in o) return nbx.scalar.float(numOf(o.float as Num));
  if ('bool' in o) return o.bool as boolean;
  return v;
}

/** nbx.X / nbx.nn.functional.X for a dotted PyTorch name. */
export function resolveOp(op: string): (...a: unknown[]) => unknown {
  let f: unknown = nbx;
  for (const p of op.split('.')) f = (f as Record<string, unknown>)[p];
  assert.equal(typeof f, 'function', `nbx.${op} is not a function`);
  return f as (...a: unknown[]) => unknown;
}

/** One golden case as the generators write it. */
export interface GoldenCase {
  name: string; op: string; args: unknown[]; kwargs: Record<string, unknown>;
  out?: Enc[]; rtol?: number; atol?: number; error?: string; message?: string; torch_message?: string;
  mutated?: { arg: number; want: Enc }[];
}
export interface GoldenFixture { tensors: Record<string, Enc>; cases: GoldenCase[] }

/** The fixture files of a family: test/fixtures/<prefix>_*.json, sorted. */
export function goldenFiles(prefix: string): { dir: URL; files: string[] } {
  const dir = new URL('../../test/fixtures/', import.meta.url);
  return { dir, files: readdirSync(dir).filter((f) => f.startsWith(`${prefix}_`) && f.endsWith('.json')).sort() };
}

/** The call a golden case describes (its decoded arguments applied to the op, options object last) and those arguments. */
export function caseCall(c: GoldenCase, tensors: Record<string, Enc>): { call: () => unknown; args: unknown[] } {
  const args = c.args.map((a) => decodeArg(a, tensors));
  const kw = Object.fromEntries(Object.entries(c.kwargs).map(([k, v]) => [k, decodeArg(v, tensors)]));
  const fn = resolveOp(c.op);
  return { call: () => fn(...args, ...(Object.keys(kw).length ? [kw] : [])), args };
}

/**
 * Runs golden cases and collects failures: a case that expects an error must raise a typed NbxError;
 * any other must run, and `check` lists how its result differs from the case's outputs.
 */
export function goldenFailures<C extends { id: string; error?: unknown }>(cases: readonly C[], call: (c: C) => unknown,
  check: (result: unknown, c: C) => string | undefined): string[] {
  const failures: string[] = [];
  for (const c of cases) {
    if (c.error) {
      try { call(c); failures.push(`${c.id}: expected an error`); } catch (e) {
        if (!(e instanceof nbx.NbxError)) failures.push(`${c.id}: untyped error ${(e as Error).message}`);
      }
      continue;
    }
    let r: unknown;
    try { r = call(c); } catch (e) { failures.push(`${c.id}: threw ${(e as Error).message}`); continue; }
    const m = check(r, c);
    if (m) failures.push(`${c.id}${m.startsWith(' ') ? '' : ': '}${m}`);
  }
  return failures;
}

/**
 * Checks `got` against a golden output: dtype, shape, then every element within atol + rtol·|want|
 * (NaN matches NaN, infinities match exactly, int64 compares exactly as BigInt).
 */
export function assertClose(got: Tensor, want: Enc, rtol: number, atol: number, what: string): void {
  assert.equal(got.dt, want.dtype, `${what}: dtype`);
  assert.deepEqual([...got.shape], want.shape, `${what}: shape`);
  const g = got.dataSync() as ArrayLike<number | bigint>;
  for (let i = 0; i < want.data.length; i++) {
    if (want.dtype === 'int64') { assert.equal(g[i], BigInt(want.data[i]!), `${what}[${i}]`); continue; }
    const x = Number(g[i]!), y = numOf(want.data[i]!);
    if (Number.isNaN(y) && Number.isNaN(x)) continue;
    if (!Number.isFinite(y)) { assert.equal(x, y, `${what}[${i}]`); continue; }
    assert.ok(Math.abs(x - y) <= atol + rtol * Math.abs(y), `${what}[${i}]: got ${x}, want ${y} (rtol ${rtol}, atol ${atol})`);
  }
}
