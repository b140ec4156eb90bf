// Runs golden fixtures written by test/gen/conv.py, pool.py and resample.py (torch 1.13 CPU): each case
// calls nbx.nn.functional[op] and compares every output within the case's tolerance (indices exactly),
// or expects an NbxError. Shared by conv.test.ts, pool.test.ts and resample.test.ts.

import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import * as path from 'node:path';
import * as nbx from '../src/index.js';
import { Tensor } from '../src/tensor/tensor.js';
import { NbxError } from '../src/errors.js';

type Num = number | string;
interface TensorSpec { dtype: string; shape: number[]; data: Num[]; view?: unknown[][] }
export interface GoldenCase {
  id: string; op: string; args: unknown[]; kwargs: Record<string, unknown>;
  out?: TensorSpec[]; error?: boolean; message?: string; rtol?: number; atol?: number;
}

const here = path.dirname(fileURLToPath(import.meta.url));

export function loadFixture(name: string): GoldenCase[] {
  // dist/test/x.js → test/fixtures/name.json
  const file = path.join(here, '..', '..', 'test', 'fixtures', `${name}.json`);
  return (JSON.parse(readFileSync(file, 'utf8')) as { cases: GoldenCase[] }).cases;
}

const toNum = (v: Num): number => (v === 'nan' ? NaN : v === 'inf' ? Infinity : v === '-inf' ? -Infinity : (v as number));

const big = (v: Num): bigint => BigInt(v);

export function makeTensor(s: TensorSpec): Tensor {
  let t = (s.dtype === 'int64' ? nbx.tensor(BigInt64Array.from(s.data, big)) : nbx.tensor(s.data.map(toNum), { dtype: s.dtype as nbx.DTypeName })).reshape(s.shape);
  for (const [k, ...rest] of s.view ?? []) {
    if (k === 'permute') t = t.permute(rest[0] as number[]);
    else if (k === 'transpose') t = t.transpose(rest[0] as number, rest[1] as number);
    else if (k === 'slice') t = t.slice(rest[0] as number, rest[1] as number | null, rest[2] as number | null, (rest[3] as number | null) ?? 1);
  }
  return t;
}

function decode(v: unknown): unknown {
  if (Array.isArray(v)) return v.map(decode);
  if (v !== null && typeof v === 'object') {
    const o = v as Record<string, unknown>;
    if ('tensor' in o) return makeTensor(o.tensor as TensorSpec);
    if ('float' in o) return nbx.scalar.float(o.float as number);
  }
  return v;
}

/** Compares got against the expected spec; returns a message or undefined. */
export function mismatch(got: Tensor, want: TensorSpec, rtol: number, atol: number): string | undefined {
  if (got.dt !== want.dtype) return `dtype ${got.dt} != ${want.dtype}`;
  if (got.shape.join() !== want.shape.join()) return `shape [${got.shape}] != [${want.shape}]`;
  const g = got.dataSync();
  if (want.dtype === 'int64') {
    for (let i = 0; i < want.data.length; i++) if ((g as BigInt64Array)[i] !== big(want.data[i]!)) return `element ${i}: got ${g[i]}, want ${want.data[i]}`;
    return undefined;
  }
  for (let i = 0; i < want.data.length; i++) {
    const x = Number(g[i]!), y = toNum(want.data[i]!);
    if (Number.isNaN(y) && Number.isNaN(x)) continue;
    if (x === y) continue;
    if (!Number.isFinite(y) || Math.abs(x - y) > atol + rtol * Math.abs(y)) return `element ${i}: got ${x}, want ${y} (rtol ${rtol}, atol ${atol})`;
  }
  return undefined;
}

/** Runs every case; returns the list of failures (empty when all pass). */
export function runGoldens(cases: GoldenCase[]): string[] {
  const fails: string[] = [];
  const F = nbx.nn.functional as Record<string, (...a: unknown[]) => unknown>;
  for (const c of cases) {
    const fn = F[c.op];
    if (!fn) { fails.push(`${c.id}: nn.functional.${c.op} missing`); continue; }
    const args = c.args.map(decode);
    const kw = Object.fromEntries(Object.entries(c.kwargs).map(([k, v]) => [k, decode(v)]));
    if (Object.keys(kw).length) args.push(kw);
    let r: unknown;
    try {
      r = fn(...args);
    } catch (e) {
      if (c.error && e instanceof NbxError) continue;
      fails.push(`${c.id}: threw ${(e as Error).stack?.split('\n').slice(0, 3).join(' | ')}`);
      continue;
    }
    if (c.error) { fails.push(`${c.id}: expected an error like torch's "${c.message}"`); continue; }
    const outs = r instanceof Tensor ? [r] : (r as Tensor[]);
    if (outs.length !== c.out!.length) { fails.push(`${c.id}: ${outs.length} outputs, want ${c.out!.length}`); continue; }
    c.out!.forEach((w, i) => {
      const exact = !w.dtype.startsWith('float') && w.dtype !== 'bfloat16';
      const m = mismatch(outs[i]!, w, exact ? 0 : c.rtol!, exact ? 0 : c.atol!);
      if (m) fails.push(`${c.id} out${i}: ${m}`);
    });
  }
  return fails;
}

export function assertGoldens(name: string): void {
  const cases = loadFixture(name);
  assert.ok(cases.length > 0, `${name} has cases`);
  const fails = runGoldens(cases);
  assert.deepEqual(fails, [], `${fails.length}/${cases.length} golden cases failed:\n${fails.join('\n')}`);
}
