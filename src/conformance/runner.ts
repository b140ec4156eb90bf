// Runs a conformance suite (../shared/conformance/FORMAT.md): each case names a PyTorch operation, its
// arguments and the outputs PyTorch computed; we call the same operation through the public API and
// compare. Inputs and expected values are read with the project's own safetensors reader.

import { readdirSync } from 'node:fs';
import { join } from 'node:path';
import * as nbx from '../index.js';
import { Tensor } from '../tensor/tensor.js';
import { DType, DTYPES, dtypeName, storageFromBytes, type DTypeName, type StorageArray } from '../dtype/dtypes.js';
import { readNumber } from '../dtype/convert.js';
import { SafetensorsFile } from '../io/safetensors.js';
import { DeviceLimitError, fileErrorOf, FormatError, NbxError, UnsupportedError } from '../errors.js';
import { Scalar } from '../ops/registry.js';
import { fmtShape } from '../tensor/shape.js';

export interface CaseSpec {
  id: string; op: string; args: unknown[]; kwargs: Record<string, unknown>; out: string[];
  complex_out?: boolean; rtol?: number; atol?: number; exact?: boolean; seed?: number; expect_error?: boolean;
}
export interface CaseResult { id: string; op: string; status: 'pass' | 'fail' | 'skip'; message?: string; ms: number }
export interface RunOptions { device?: string; filter?: RegExp; onResult?(r: CaseResult): void }

/** Marks an error as a documented limitation of a device (float64 on WebGPU, say): the case is skipped. */
export { DeviceLimitError };

function decodeScalar(v: { scalar: unknown; type: string }): unknown {
  let x = v.scalar;
  if (typeof x === 'string') {
    if (x === 'inf') x = Infinity; else if (x === '-inf') x = -Infinity; else if (x === 'nan') x = NaN;
    else return x; // a string argument spelled as a scalar (e.g. approximate='tanh')
  }
  if (v.type === 'bool') return new Scalar(Boolean(x), 'bool');
  if (v.type === 'int') return new Scalar(x as number, 'int');
  return new Scalar(x as number, 'float');
}

type Loader = (name: string) => Promise<Tensor>;

async function decodeValue(v: unknown, load: Loader): Promise<unknown> {
  if (v === null || typeof v !== 'object' || Array.isArray(v)) return v;
  const o = v as Record<string, unknown>;
  if ('tensor' in o) {
    let t = await load(o.tensor as string);
    for (const step of (o.view as unknown[][] | undefined) ?? []) {
      const [k, ...rest] = step as [string, ...unknown[]];
      if (k === 'permute') t = t.permute(rest[0] as number[]);
      else if (k === 'transpose') t = t.transpose(rest[0] as number, rest[1] as number);
      else if (k === 'slice') t = t.slice(rest[0] as number, rest[1] as number | null, rest[2] as number | null, (rest[3] as number | null) ?? 1);
      else if (k === 'expand') t = t.expand(rest[0] as number[]);
      else throw new FormatError('conformance', `unknown view step ${JSON.stringify(k)}`);
    }
    return t;
  }
  if ('scalar' in o) return decodeScalar(o as { scalar: unknown; type: string });
  if ('dtype' in o) return DType.all[dtypeName(o.dtype as string)];
  if ('tuple' in o) return Promise.all((o.tuple as unknown[]).map((x) => decodeValue(x, load)));
  return v;
}

/** Finds nbx.X / nbx.nn.functional.X for a PyTorch name; `Tensor.X` calls the method on the first argument. */
export function resolveOp(op: string): ((...args: unknown[]) => unknown) | undefined {
  if (op.startsWith('Tensor.')) {
    const name = op.slice(7);
    return (self: unknown, ...rest: unknown[]) => {
      const f = (self as Record<string, unknown>)[name];
      if (typeof f !== 'function') throw new UnsupportedError(op, `Tensor has no method ${name}`);
      return (f as (...a: unknown[]) => unknown).apply(self, rest);
    };
  }
  let obj: unknown = nbx;
  for (const part of op.split('.')) {
    obj = (obj as Record<string, unknown> | undefined)?.[part];
    if (obj === undefined) return undefined;
  }
  return typeof obj === 'function' ? (obj as (...args: unknown[]) => unknown) : undefined;
}

function flattenOutputs(r: unknown): Tensor[] {
  if (r instanceof Tensor) return [r];
  if (Array.isArray(r)) return r.flatMap(flattenOutputs);
  throw new Error(`operation returned ${typeof r}, expected tensors`);
}

function valuesOf(dt: DTypeName, a: StorageArray, i: number): number | bigint {
  return dt === 'int64' ? (a as BigInt64Array)[i]! : readNumber(dt, a, i);
}

/** Compares one output; returns a message, or undefined when equal within tolerance. */
export function compare(got: Tensor, want: Tensor, spec: CaseSpec, complex: boolean): string | undefined {
  let g = got;
  if (complex && DTYPES[g.dt].kind === 'complex') g = viewAsReal(g);
  if (g.dt !== want.dt) return `dtype ${g.dt} != expected ${want.dt}`;
  if (g.shape.length !== want.shape.length || g.shape.some((s, i) => s !== want.shape[i])) return `shape ${fmtShape(g.shape)} != expected ${fmtShape(want.shape)}`;
  const ga = g.dataStorageSync(), wa = want.dataStorageSync();
  const exact = spec.exact || DTYPES[want.dt].kind !== 'float';
  const rtol = spec.rtol ?? 0, atol = spec.atol ?? 0;
  let maxErr = 0, firstBad = -1, bad = 0;
  const n = want.numel();
  for (let i = 0; i < n; i++) {
    const x = valuesOf(want.dt, ga, i), y = valuesOf(want.dt, wa, i);
    if (typeof x === 'bigint' || typeof y === 'bigint') { if (x !== y) { bad++; if (firstBad < 0) firstBad = i; } continue; }
    if (Number.isNaN(x) && Number.isNaN(y)) continue;
    if (exact) {
      if (!Object.is(x, y) && !(x === 0 && y === 0)) { bad++; if (firstBad < 0) firstBad = i; maxErr = Math.max(maxErr, Math.abs(x - y) || Infinity); }
      continue;
    }
    if (!Number.isFinite(y) || !Number.isFinite(x)) { if (x !== y) { bad++; if (firstBad < 0) firstBad = i; maxErr = Infinity; } continue; }
    const err = Math.abs(x - y);
    if (err > atol + rtol * Math.abs(y)) { bad++; if (firstBad < 0) firstBad = i; }
    if (err > maxErr) maxErr = err;
  }
  if (bad === 0) return undefined;
  const at = firstBad;
  return `${bad}/${n} elements differ, max error ${maxErr.toExponential(3)}, first bad index ${at}: got ${String(valuesOf(want.dt, ga, at))}, want ${String(valuesOf(want.dt, wa, at))}${exact ? ' (exact)' : ` (rtol ${rtol}, atol ${atol})`}`;
}

function viewAsReal(t: Tensor): Tensor {
  const f = (nbx as unknown as { view_as_real?: (t: Tensor) => Tensor }).view_as_real;
  if (!f) throw new UnsupportedError('view_as_real', 'not available');
  return f(t);
}

/** The format versions this runner reads (FORMAT.md). */
export const SUITE_VERSIONS: readonly number[] = [1];

/** Why a case object cannot be run (a missing or mistyped field), or undefined when it is well formed. */
function malformed(c: unknown): string | undefined {
  if (c === null || typeof c !== 'object' || Array.isArray(c)) return `a case must be an object, got ${Array.isArray(c) ? 'an array' : c === null ? 'null' : typeof c}`;
  const o = c as Record<string, unknown>;
  if (typeof o.id !== 'string' || o.id === '') return "missing or empty field 'id'";
  if (typeof o.op !== 'string' || o.op === '') return "missing field 'op' (the PyTorch name of the operation)";
  if (!Array.isArray(o.args)) return "field 'args' must be an array";
  if (o.kwargs !== undefined && (o.kwargs === null || typeof o.kwargs !== 'object' || Array.isArray(o.kwargs))) return "field 'kwargs' must be an object";
  if (!o.expect_error && (!Array.isArray(o.out) || o.out.some((x) => typeof x !== 'string'))) return "field 'out' must be an array of tensor names";
  return undefined;
}

/**
 * Runs every case of a suite directory. A directory with no suite file, a file whose conformance
 * document is not JSON or of an unknown version, is a FormatError naming the file (a wrong path must
 * not pass CI with 0 cases); a malformed case fails alone and the run goes on. Every case gets fresh
 * input tensors, so a case that modifies or disposes its inputs cannot change the next one.
 */
export async function runSuite(dir: string, opts: RunOptions = {}): Promise<{ passed: number; failed: number; skipped: number; results: CaseResult[] }> {
  let names: string[];
  try { names = readdirSync(dir); } catch (e) { throw fileErrorOf('conformance', dir, e); }
  const files = names.filter((f) => f.endsWith('.safetensors')).sort();
  if (files.length === 0) throw new FormatError('conformance', `${dir} holds no .safetensors files: not a conformance suite (FORMAT.md)`);
  const results: CaseResult[] = [];
  const device = opts.device ?? 'cpu';
  let suites = 0;
  for (const f of files) {
    const file = await SafetensorsFile.open(join(dir, f));
    try {
      const meta = file.metadata['nbx.conformance'];
      if (meta === undefined) continue;
      suites++;
      let doc: unknown;
      try { doc = JSON.parse(meta); } catch (e) { throw new FormatError('conformance', `${f}: the nbx.conformance metadata is not JSON (${(e as Error).message})`); }
      const version = (doc as { version?: unknown } | null)?.version;
      if (!SUITE_VERSIONS.includes(version as number)) {
        throw new FormatError('conformance', `${f}: unknown conformance format version ${JSON.stringify(version)} (this runner reads version ${SUITE_VERSIONS.join(', ')})`);
      }
      const cases = (doc as { cases?: unknown }).cases;
      if (!Array.isArray(cases)) throw new FormatError('conformance', `${f}: the conformance document needs a 'cases' array`);
      const stored = new Map<string, { data: StorageArray; dtype: DTypeName; shape: number[] }>();
      const loadHost = async (name: string): Promise<Tensor> => {
        let s = stored.get(name);
        if (!s) {
          const e = typeof name === 'string' ? file.entries.get(name) : undefined;
          if (!e) throw new FormatError('conformance', `suite file ${f} has no tensor ${JSON.stringify(name)}`);
          s = { data: storageFromBytes(e.dtype as DTypeName, await file.readBytes(name)), dtype: e.dtype as DTypeName, shape: e.shape };
          stored.set(name, s);
        }
        return Tensor.fromStorage(s.data.slice() as StorageArray, s.dtype, s.shape, 'cpu');
      };
      const load: Loader = async (name) => {
        const t = await loadHost(name);
        if (device === 'cpu') return t;
        const moved = t.to(device);
        t.dispose();
        return moved;
      };
      for (let i = 0; i < cases.length; i++) {
        const spec = cases[i] as CaseSpec;
        const why = malformed(spec);
        const r: CaseResult = why
          ? { id: typeof spec?.id === 'string' && spec.id ? spec.id : `${f}#${i}`, op: typeof spec?.op === 'string' ? spec.op : '?', status: 'fail', message: `malformed case in ${f}: ${why}`, ms: 0 }
          : opts.filter && !opts.filter.test(spec.id) ? null! : await runCase({ ...spec, kwargs: spec.kwargs ?? {} }, load, loadHost, device);
        if (r === null) continue;
        results.push(r);
        opts.onResult?.(r);
      }
    } finally {
      await file.close();
    }
  }
  if (suites === 0) throw new FormatError('conformance', `none of the ${files.length} .safetensors files in ${dir} has nbx.conformance metadata: not a conformance suite`);
  const count = (s: string): number => results.filter((r) => r.status === s).length;
  return { passed: count('pass'), failed: count('fail'), skipped: count('skip'), results };
}

async function runCase(spec: CaseSpec, load: Loader, loadHost: Loader, device: string): Promise<CaseResult> {
  const t0 = performance.now();
  const done = (status: CaseResult['status'], message?: string): CaseResult => ({ id: spec.id, op: spec.op, status, message, ms: performance.now() - t0 });
  const fn = resolveOp(spec.op);
  if (!fn) return done('fail', `operation ${spec.op} is not implemented`);
  return nbx.scope(async () => {
    // Arguments first, outside the expect_error guard: a case whose inputs cannot be built has failed,
    // whatever error it expected from the operation.
    let args: unknown[];
    const kwargs: Record<string, unknown> = {};
    try {
      args = await Promise.all(spec.args.map((a) => decodeValue(a, load)));
      for (const [k, v] of Object.entries(spec.kwargs)) kwargs[k] = await decodeValue(v, load);
    } catch (e) {
      // an input the device cannot hold (float64 on WebGPU): a documented limit, skipped as for the call
      if (e instanceof DeviceLimitError && device !== 'cpu') return done('skip', e.message);
      return done('fail', `could not build the arguments: ${(e as Error).name}: ${(e as Error).message}`.slice(0, 300));
    }
    try {
      if (spec.seed !== undefined) {
        const seedFn = (nbx as unknown as { manual_seed?: (s: number) => void }).manual_seed;
        if (!seedFn) return done('fail', 'nbx.manual_seed is not implemented');
        seedFn(spec.seed);
      }
      const callArgs = Object.keys(kwargs).length ? [...args, kwargs] : args;
      if (spec.expect_error) {
        try {
          let r = fn(...callArgs);
          if (r instanceof Promise) r = await r;
          // devices without synchronous readback (WebGPU) report data-dependent errors (an index out of
          // range) at the next read: read the outputs back
          for (const t of r instanceof Tensor || Array.isArray(r) ? flattenOutputs(r) : []) if (t.device.type !== 'cpu') await t.dataStorage();
        } catch (e) {
          if (e instanceof NbxError) return done('pass');
          return done('fail', `threw an untyped error: ${(e as Error).name}: ${(e as Error).message}`);
        }
        return done('fail', 'expected an error, but the call succeeded');
      }
      let r = fn(...callArgs);
      if (r instanceof Promise) r = await r;
      const outs = flattenOutputs(r);
      if (outs.length !== spec.out.length) return done('fail', `returned ${outs.length} outputs, expected ${spec.out.length}`);
      for (let i = 0; i < outs.length; i++) {
        const want = await loadHost(spec.out[i]!);
        let got = outs[i]!;
        // Asynchronous readback: devices such as WebGPU cannot read back synchronously.
        if (got.device.type !== 'cpu') got = Tensor.fromStorage(await got.dataStorage(), got.dt, got.shape, 'cpu');
        const msg = compare(got, want, spec, !!spec.complex_out);
        if (msg) return done('fail', `output ${i}: ${msg}`);
      }
      return done('pass');
    } catch (e) {
      if (e instanceof DeviceLimitError && device !== 'cpu') return done('skip', e.message);
      const err = e as Error;
      return done('fail', `${err.name}: ${err.message}`.split('\n')[0]!.slice(0, 300));
    }
  });
}
