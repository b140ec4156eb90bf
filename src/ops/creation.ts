// Creation operations: tensor, empty, zeros, ones, full, arange, linspace, eye and the *_like family.

import { Tensor, sizesArg } from '../tensor/tensor.js';
import { allocStorage, dtypeName, DTYPES, type DTypeLike, type DTypeName, type StorageArray } from '../dtype/dtypes.js';
import { checkedIntValue, writeNumber } from '../dtype/convert.js';
import { defaultFloatDType } from '../dtype/promotion.js';
import { checkInt, checkShape, numelOf } from '../tensor/shape.js';
import { ValueError } from '../errors.js';
import { backendFor, Device, type DeviceLike } from '../backend/backend.js';
import { fillRef } from './shape.js';
import { Scalar, scalarOf, type ScalarLike } from './registry.js';
import { def } from './registry.js';

export interface CreateOptions { dtype?: DTypeLike | null; device?: DeviceLike | null }
const dt = (d: DTypeLike | null | undefined, fallback: DTypeName): DTypeName => (d === null || d === undefined ? fallback : dtypeName(d));
const dev = (d: DeviceLike | null | undefined): DeviceLike => d ?? 'cpu';

/** Fills host storage from a generator of numbers (or bigints for int64); integer dtypes refuse values they cannot hold. */
function hostTensor(op: string, shape: number[], dtype: DTypeName, device: DeviceLike, fill: (i: number) => number | bigint): Tensor {
  const n = numelOf(shape);
  const a = allocStorage(dtype, n);
  const isInt = DTYPES[dtype].kind === 'int';
  for (let i = 0; i < n; i++) {
    const v = isInt ? checkedIntValue(op, dtype, fill(i)) : fill(i);
    if (typeof v === 'bigint') {
      if (dtype === 'int64') (a as BigInt64Array)[i] = v; else writeNumber(dtype, a, i, Number(v));
    } else writeNumber(dtype, a, i, v);
  }
  return Tensor.fromStorage(a, dtype, shape, device);
}

/** The typed arrays a tensor can be made from, and their dtypes. */
export const TYPED: [new (...a: never[]) => unknown, DTypeName][] = [
  [Float32Array, 'float32'], [Float64Array, 'float64'], [Int32Array, 'int32'], [Int16Array, 'int16'], [Int8Array, 'int8'],
  [Uint8Array, 'uint8'], [BigInt64Array, 'int64'],
];

/**
 * nbx.tensor(data, {dtype, device}). JS numbers that are all integral give int64 (as Python ints do);
 * any fractional number gives float32; booleans give bool. Use nbx.scalar.float(x) or a dtype to force floats.
 */
export function tensor(data: unknown, opts: CreateOptions = {}): Tensor {
  if (data instanceof Tensor) return data.to({ dtype: opts.dtype ? dtypeName(opts.dtype) : data.dt, device: opts.device ?? data.device, copy: true });
  for (const [ctor, d] of TYPED) {
    if (data instanceof ctor) {
      const arr = data as unknown as ArrayLike<number | bigint>;
      const target = dt(opts.dtype, d);
      const src = arr as unknown as StorageArray;
      if (target === d) return Tensor.fromStorage(src.slice() as StorageArray, d, [arr.length], dev(opts.device));
      return hostTensor('tensor', [arr.length], target, dev(opts.device), (i) => arr[i]!);
    }
  }
  const shape: number[] = [];
  let probe: unknown = data;
  while (Array.isArray(probe)) { shape.push(probe.length); probe = probe[0]; }
  const flat: unknown[] = [];
  const walk = (v: unknown, depth: number): void => {
    if (depth === shape.length) {
      if (Array.isArray(v)) throw new ValueError('tensor', `expected sequence of length ${shape[depth - 1]} at dim ${depth - 1} (got a nested list)`);
      flat.push(v);
      return;
    }
    if (!Array.isArray(v) || v.length !== shape[depth]) throw new ValueError('tensor', `expected sequence of length ${shape[depth]} at dim ${depth} (got ${Array.isArray(v) ? v.length : typeof v})`);
    for (const x of v) walk(x, depth + 1);
  };
  walk(data, 0);
  let kind: 'bool' | 'int' | 'float' = 'bool';
  for (const v of flat) {
    const s = v instanceof Scalar ? v : typeof v === 'number' || typeof v === 'boolean' || typeof v === 'bigint' ? scalarOf(v) : null;
    if (!s) throw new ValueError('tensor', `could not infer dtype of ${typeof v}`);
    if (s.kind === 'float') kind = 'float';
    else if (s.kind === 'int' && kind === 'bool') kind = 'int';
  }
  const inferred: DTypeName = flat.length === 0 ? defaultFloatDType : kind === 'bool' ? 'bool' : kind === 'int' ? 'int64' : defaultFloatDType;
  const target = dt(opts.dtype, inferred);
  return hostTensor('tensor', shape, target, dev(opts.device), (i) => {
    const v = flat[i];
    const raw = v instanceof Scalar ? v.value : v;
    if (typeof raw === 'bigint') return raw;
    if (typeof raw === 'boolean') return raw ? 1 : 0;
    return target === 'int64' && Number.isSafeInteger(raw) ? BigInt(raw as number) : (raw as number);
  });
}

function filled(op: string, shape: number[], dtype: DTypeName, device: DeviceLike, value: number | bigint): Tensor {
  if (value === 0 || value === 0n) return Tensor.empty(shape, dtype, device, true);
  const v = checkedIntValue(op, dtype, value); // before allocating: a bad fill value fails fast on any size
  const d = Device.of(device);
  if ((backendFor(d) as { capture?: unknown }).capture) {
    // a CUDA graph capture: no host-to-device copy; the value is a kernel parameter (see fillRef)
    const t = Tensor.empty(shape, dtype, d, false);
    fillRef(op, d, t.ref(), v);
    return t;
  }
  return hostTensor(op, shape, dtype, device, () => v);
}

type SizeArgs = (number | readonly number[] | CreateOptions)[];
function splitSizeArgs(op: string, args: SizeArgs): [number[], CreateOptions] {
  let opts: CreateOptions = {};
  if (args.length && typeof args[args.length - 1] === 'object' && !Array.isArray(args[args.length - 1])) opts = args.pop() as CreateOptions;
  return [checkShape(op, sizesArg(args as (number | number[])[])), opts];
}

export function empty(...args: SizeArgs): Tensor { const [s, o] = splitSizeArgs('empty', args); return Tensor.empty(s, dt(o.dtype, defaultFloatDType), dev(o.device), true); }
export function zeros(...args: SizeArgs): Tensor { const [s, o] = splitSizeArgs('zeros', args); return filled('zeros', s, dt(o.dtype, defaultFloatDType), dev(o.device), 0); }
export function ones(...args: SizeArgs): Tensor { const [s, o] = splitSizeArgs('ones', args); return filled('ones', s, dt(o.dtype, defaultFloatDType), dev(o.device), 1); }

function fillValue(v: ScalarLike): { value: number | bigint; kind: DTypeName } {
  const s = scalarOf(v);
  const kind: DTypeName = s.kind === 'bool' ? 'bool' : s.kind === 'int' ? 'int64' : defaultFloatDType;
  const value = typeof s.value === 'boolean' ? (s.value ? 1 : 0) : s.value;
  return { value, kind };
}

export const full = def('full(size, fill_value, *, dtype=None, device=None)', (a) => {
  const f = fillValue(a.fill_value);
  const d = dt(a.dtype, f.kind);
  return filled('full', checkShape('full', a.size), d, dev(a.device), typeof f.value === 'bigint' && d !== 'int64' ? Number(f.value) : f.value);
});

export const arange = def('arange(start, end=None, step=1, *, dtype=None, device=None)', (a) => {
  let start = a.start as ScalarLike, end = a.end as ScalarLike | null;
  const step = a.step as ScalarLike;
  if (end === null) { end = start; start = 0; }
  const kinds = [start, end, step].map((v) => scalarOf(v).kind);
  const inferred: DTypeName = kinds.includes('float') ? defaultFloatDType : 'int64';
  const d = dt(a.dtype, inferred);
  const s0 = Number(scalarOf(start).value), e0 = Number(scalarOf(end).value), st = Number(scalarOf(step).value);
  if (st === 0) throw new ValueError('arange', 'step must be nonzero');
  if ((st > 0 && e0 < s0) || (st < 0 && e0 > s0)) throw new ValueError('arange', 'upper bound and larger bound inconsistent with step sign');
  const n = Math.ceil((e0 - s0) / st);
  if (!Number.isFinite(n)) throw new ValueError('arange', `unsupported range: ${s0} -> ${e0} with step ${st}`);
  checkShape('arange', [n]);
  return hostTensor('arange', [n], d, dev(a.device), (i) => s0 + i * st);
});

export const linspace = def('linspace(start, end, steps, *, dtype=None, device=None)', (a) => {
  const d = dt(a.dtype, defaultFloatDType);
  const steps = checkInt('linspace', 'steps', a.steps);
  if (steps < 0) throw new ValueError('linspace', 'number of steps must be non-negative');
  const isF32 = d === 'float32' || d === 'float16' || d === 'bfloat16';
  const f = (x: number): number => (isF32 ? Math.fround(x) : x);
  const s = f(Number(scalarOf(a.start).value)), e = f(Number(scalarOf(a.end).value));
  const step = steps > 1 ? f((e - s) / (steps - 1)) : 0;
  const half = Math.floor(steps / 2);
  return hostTensor('linspace', [steps], d, dev(a.device), (i) => (steps === 1 ? s : i < half ? f(s + f(step * i)) : f(e - f(step * (steps - i - 1)))));
});

export const eye = def('eye(n, m=None, *, dtype=None, device=None)', (a) => {
  const n = a.n as number, m = (a.m as number | null) ?? n;
  checkShape('eye', [n, m]);
  return hostTensor('eye', [n, m], dt(a.dtype, defaultFloatDType), dev(a.device), (i) => (Math.floor(i / m) === i % m ? 1 : 0));
});

const likeOpts = (x: Tensor, a: Record<string, unknown>): [DTypeName, DeviceLike] => [dt(a.dtype as DTypeLike | null, x.dt), dev((a.device as DeviceLike | null) ?? x.device)];
export const zeros_like = def('zeros_like(input, *, dtype=None, device=None)', (a) => { const [d, v] = likeOpts(a.input, a); return filled('zeros_like', [...a.input.shape], d, v, 0); });
export const ones_like = def('ones_like(input, *, dtype=None, device=None)', (a) => { const [d, v] = likeOpts(a.input, a); return filled('ones_like', [...a.input.shape], d, v, 1); });
export const empty_like = def('empty_like(input, *, dtype=None, device=None)', (a) => { const [d, v] = likeOpts(a.input, a); return filled('empty_like', [...a.input.shape], d, v, 0); });
export const full_like = def('full_like(input, fill_value, *, dtype=None, device=None)', (a) => {
  const [d, v] = likeOpts(a.input, a);
  const f = fillValue(a.fill_value);
  return filled('full_like', [...a.input.shape], d, v, typeof f.value === 'bigint' && d !== 'int64' ? Number(f.value) : f.value);
});

export const scalar_tensor = (v: ScalarLike, opts: CreateOptions = {}): Tensor => {
  const f = fillValue(v);
  return filled('scalar_tensor', [], dt(opts.dtype, f.kind === 'int64' ? defaultFloatDType : f.kind), dev(opts.device), f.value);
};

export { DTYPES };
