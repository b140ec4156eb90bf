// Reductions and scans. The op layer moves the reduced dims last and makes the operand a contiguous
// [rows, n] matrix in the dtype the kernel should read (this copy is an elementwise kernel, so it runs on
// any backend); the backend's 'reduce'/'scan' kernel does the rest.

import { Tensor } from '../tensor/tensor.js';
import { DTYPES, isFloat, dtypeName, type DTypeName, type DTypeLike } from '../dtype/dtypes.js';
import { DTypeError, IndexError, UnsupportedError, ValueError } from '../errors.js';
import { normDim, normDims, numelOf } from '../tensor/shape.js';
import { kernel } from '../kernels/registry.js';
import { def, Scalar } from './registry.js';
import { describe, mul } from './elementwise.js';
import { cat } from './shape.js';
import { toFloatingDType } from '../dtype/promotion.js';
import { view_as_real, view_as_complex } from './fft.js';
import type { ReduceKind, ScanKind } from '../kernels/reduce.js';

export type ValuesIndices = Tensor[] & { values: Tensor; indices: Tensor };
export const valuesIndices = (values: Tensor, indices: Tensor): ValuesIndices =>
  Object.assign([values, indices], { values, indices }) as ValuesIndices;

function asT(op: string, x: unknown): Tensor {
  if (!(x instanceof Tensor)) throw new ValueError(op, `${op}(): argument 'input' must be Tensor, not ${describe(x)}`);
  return x;
}
const optDType = (d: unknown): DTypeName | null => (d === null || d === undefined ? null : dtypeName(d as DTypeLike));

/** Moves `dims` last and returns the contiguous [rows, n] operand in `readAs`, plus the output shape. */
export function toRows(op: string, x: Tensor, dims: number[], keepdim: boolean, readAs: DTypeName) {
  const nd = x.ndim;
  const kept = [...Array(nd).keys()].filter((d) => !dims.includes(d));
  const perm = x.permute([...kept, ...dims]);
  const rows = numelOf(kept.map((d) => x.shape[d]!));
  const n = numelOf(dims.map((d) => x.shape[d]!));
  const mat = perm.copyAs(readAs);
  perm !== x && perm.dispose();
  const outShape = keepdim ? x.shape.map((s, d) => (dims.includes(d) ? 1 : s)) : kept.map((d) => x.shape[d]!);
  return { mat, rows, n, outShape };
}

/** One stride for a run of dims when they walk memory as a single dim (size-1 dims ignored), else null. */
function mergedStride(shape: readonly number[], strides: readonly number[]): number | null {
  let stride: number | null = null, expect = -1;
  for (let i = shape.length - 1; i >= 0; i--) {
    if (shape[i] === 1) continue;
    if (stride === null) { stride = strides[i]!; expect = strides[i]! * shape[i]!; continue; }
    if (strides[i] !== expect) return null;
    expect *= shape[i]!;
  }
  return stride ?? 1;
}

/**
 * The [rows, n] operand of a reduction: a strided view of x itself when kept dims and reduced dims each
 * merge into one stride (no copy), otherwise a contiguous copy in `readAs`.
 */
function reduceOperand(x: Tensor, dims: number[], readAs: DTypeName) {
  const kept = [...Array(x.ndim).keys()].filter((d) => !dims.includes(d));
  const rows = numelOf(kept.map((d) => x.shape[d]!));
  const n = numelOf(dims.map((d) => x.shape[d]!));
  if (readAs === x.dt) {
    const rs = mergedStride(kept.map((d) => x.shape[d]!), kept.map((d) => x.strides[d]!));
    const cs = mergedStride(dims.map((d) => x.shape[d]!), dims.map((d) => x.strides[d]!));
    if (rs !== null && cs !== null) return { ref: x.ref(), rows, n, layout: { rowStride: rs, colStride: cs }, owned: undefined };
  }
  const { mat } = toRows('reduce', x, dims, false, readAs);
  return { ref: mat.ref(), rows, n, layout: { rowStride: n, colStride: 1 }, owned: mat };
}

function reduce(op: string, x: Tensor, dimArg: unknown, keepdim: boolean, kind: ReduceKind, readAs: DTypeName,
  outDType: DTypeName, params: number[] = [], withIndex = false): Tensor | ValuesIndices {
  const dims = normDims(op, dimArg as number | number[] | null, x.ndim);
  if (DTYPES[x.dt].kind === 'complex') return complexReduce(op, x, dims, keepdim, kind, outDType);
  if (DTYPES[outDType].kind === 'complex') {
    // a real input summed into a complex dtype (sum(x, dtype=complex64)): cast first, reduce the pairs
    const c = x.to(outDType);
    try { return complexReduce(op, c, dims, keepdim, kind, outDType); } finally { if (c !== x) c.dispose(); }
  }
  const outShape = keepdim ? x.shape.map((s, d) => (dims.includes(d) ? 1 : s)) : x.shape.filter((_, d) => !dims.includes(d));
  const rowsN = numelOf(x.shape.filter((_, d) => !dims.includes(d)));
  const nN = numelOf(dims.map((d) => x.shape[d]!));
  if (nN === 0 && ['max', 'min', 'argmax', 'argmin'].includes(kind) && (rowsN > 0 || dimArg === null)) {
    throw new IndexError(op, `${op}(): Expected reduction dim to be specified for input.numel() == 0. Specify the reduction dim with the 'dim' argument (input shape [${x.shape}])`);
  }
  const { ref, rows, n, layout, owned } = reduceOperand(x, dims, readAs);
  try {
    const out = Tensor.empty(outShape, outDType, x.device);
    const idx = withIndex ? Tensor.empty(outShape, 'int64', x.device) : undefined;
    if (rows > 0) kernel('reduce', x.device, op)(kind, ref, rows, n, params, out.ref(), idx?.ref(), layout);
    return withIndex ? valuesIndices(out, idx!) : out;
  } finally { owned?.dispose(); }
}

/**
 * Sum and mean of a complex tensor: the same reduction over its float [..., 2] view (the real and
 * imaginary parts are independent sums), viewed back as complex; any/all/count_nonzero on its truth. Other reductions have no complex
 * meaning here (PyTorch refuses max/min/argmax of complex too): a typed error.
 */
function complexReduce(op: string, x: Tensor, dims: number[], keepdim: boolean, kind: ReduceKind, outDType: DTypeName): Tensor {
  const realOf: Partial<Record<DTypeName, DTypeName>> = { complex64: 'float32', complex128: 'float64' };
  if (kind === 'any' || kind === 'all' || kind === 'count_nonzero') {
    // truthiness: an element is nonzero when either part is
    const parts = view_as_real(x);
    const truth = reduce(op, parts, [x.ndim], false, 'any', realOf[x.dt]!, 'bool') as Tensor;
    parts.dispose();
    try { return reduce(op, truth, dims, keepdim, kind, 'bool', outDType) as Tensor; } finally { truth.dispose(); }
  }
  const out = realOf[outDType];
  if ((kind !== 'sum' && kind !== 'mean') || !out) {
    throw new DTypeError(op, `${op}(): complex input (${x.dt}${out ? '' : `, result dtype ${outDType}`}) is not supported; sum, mean, any, all and count_nonzero take complex tensors`);
  }
  const parts = view_as_real(x);
  try {
    return view_as_complex(reduce(op, parts, dims, keepdim, kind, out, out) as Tensor);
  } finally { parts.dispose(); }
}

const sumDType = (d: DTypeName): DTypeName => (DTYPES[d].kind === 'int' || d === 'bool' ? 'int64' : d);

export const sum = def('sum(input, dim=None, keepdim=False, *, dtype=None)', (a) => {
  const x = asT('sum', a.input);
  const out = optDType(a.dtype) ?? sumDType(x.dt);
  return reduce('sum', x, a.dim, a.keepdim, 'sum', readFor(out, x.dt), out) as Tensor;
});
export const nansum = def('nansum(input, dim=None, keepdim=False, *, dtype=None)', (a) => {
  const x = asT('nansum', a.input);
  const out = optDType(a.dtype) ?? sumDType(x.dt);
  return reduce('nansum', x.dt === 'bool' || !isFloat(x.dt) ? x : nanToZero(x), a.dim, a.keepdim, 'sum', readFor(out, x.dt), out) as Tensor;
});
let nanToZero: (x: Tensor) => Tensor = (x) => x;
export function setNanToZero(f: (x: Tensor) => Tensor): void { nanToZero = f; }

/** int64 results read the operand as int64 (exact); float results read it in their own dtype. */
const readFor = (out: DTypeName, input: DTypeName): DTypeName => (out === 'int64' && input === 'int64' ? 'int64' : isFloat(out) ? (input === out ? input : out) : input);

export const prod = def('prod(input, dim=None, keepdim=False, *, dtype=None)', (a) => {
  const x = asT('prod', a.input);
  const out = optDType(a.dtype) ?? sumDType(x.dt);
  if (a.dim !== null && typeof a.dim !== 'number') throw new ValueError('prod', 'prod(): dim must be an int');
  return reduce('prod', x, a.dim, a.keepdim, 'prod', readFor(out, x.dt), out) as Tensor;
});

export const mean = def('mean(input, dim=None, keepdim=False, *, dtype=None)', (a) => {
  const x = asT('mean', a.input);
  const out = optDType(a.dtype) ?? x.dt;
  if (!isFloat(out) && DTYPES[out].kind !== 'complex') {
    throw new DTypeError('mean', `mean(): could not infer output dtype. Input dtype must be either a floating point or complex dtype. Got: ${x.dt}`);
  }
  return reduce('mean', x, a.dim, a.keepdim, 'mean', out, out) as Tensor;
});
export const nanmean = def('nanmean(input, dim=None, keepdim=False, *, dtype=None)', (a) => {
  throw new UnsupportedError('nanmean', `not implemented yet (input ${describe(a.input)})`);
});

function minmax(name: 'max' | 'min') {
  return def(`${name}(input, dim=None, keepdim=False)`, (a) => {
    const x = asT(name, a.input);
    if (a.dim instanceof Tensor) return (name === 'max' ? maxBinary : minBinary)(x, a.dim);
    if (a.dim === null) return reduce(name, x, null, false, name, x.dt, x.dt) as Tensor;
    if (typeof a.dim !== 'number') throw new ValueError(name, `${name}(): dim must be an int, got ${describe(a.dim)}`);
    return reduce(name, x, a.dim, a.keepdim, name, x.dt, x.dt, [], true) as ValuesIndices;
  });
}
let maxBinary: (a: Tensor, b: Tensor) => Tensor, minBinary: (a: Tensor, b: Tensor) => Tensor;
export function setBinaryMinMax(mx: typeof maxBinary, mn: typeof minBinary): void { maxBinary = mx; minBinary = mn; }
export const max = minmax('max');
export const min = minmax('min');
export const amax = def('amax(input, dim=[], keepdim=False)', (a) => {
  const x = asT('amax', a.input);
  const d = Array.isArray(a.dim) && a.dim.length === 0 ? null : a.dim;
  return reduce('amax', x, d, a.keepdim, 'max', x.dt, x.dt) as Tensor;
});
export const amin = def('amin(input, dim=[], keepdim=False)', (a) => {
  const x = asT('amin', a.input);
  const d = Array.isArray(a.dim) && a.dim.length === 0 ? null : a.dim;
  return reduce('amin', x, d, a.keepdim, 'min', x.dt, x.dt) as Tensor;
});
function argm(name: 'argmax' | 'argmin') {
  return def(`${name}(input, dim=None, keepdim=False)`, (a) => {
    const x = asT(name, a.input);
    if (a.dim === null) {
      const flat = x.reshape([-1]);
      const r = reduce(name, flat, 0, false, name, x.dt, 'int64') as Tensor;
      if (a.keepdim) return r.reshape(x.shape.map(() => 1));
      return r;
    }
    return reduce(name, x, a.dim, a.keepdim, name, x.dt, 'int64') as Tensor;
  });
}
export const argmax = argm('argmax');
export const argmin = argm('argmin');

function anyAll(name: 'any' | 'all') {
  return def(`${name}(input, dim=None, keepdim=False)`, (a) => {
    const x = asT(name, a.input);
    const out = x.dt === 'uint8' ? 'uint8' : 'bool';
    return reduce(name, x, a.dim, a.keepdim, name, x.dt, out) as Tensor;
  });
}
export const any = anyAll('any');
export const all = anyAll('all');
export const count_nonzero = def('count_nonzero(input, dim=None)', (a) => {
  const x = asT('count_nonzero', a.input);
  return reduce('count_nonzero', x, a.dim, false, 'count_nonzero', x.dt, 'int64') as Tensor;
});

function correctionOf(op: string, a: Record<string, unknown>): number {
  if (a.correction !== null && a.correction !== undefined) return Number(a.correction);
  if (a.unbiased !== null && a.unbiased !== undefined) return a.unbiased ? 1 : 0;
  return 1;
}
function varImpl(op: string, a: Record<string, unknown>, withMean: boolean, sqrtIt: boolean) {
  const x = asT(op, a.input);
  if (typeof a.dim === 'boolean') { a.unbiased = a.dim; a.dim = null; }
  if (!isFloat(x.dt)) throw new DTypeError(op, `${op}(): input dtype should be either floating point or complex. Got ${x.dt} instead.`);
  const r = reduce(op, x, a.dim, a.keepdim as boolean, 'var', x.dt, x.dt, [correctionOf(op, a)], false) as Tensor;
  const v = Array.isArray(r) ? r[0]! : (r as Tensor);
  // var_mean returns the mean in the input dtype; the kernel wrote it into the int64 slot, so redo it.
  let result: Tensor | Tensor[] = v;
  if (sqrtIt) { const s = sqrtFn(v); v.dispose(); result = s; }
  if (withMean) {
    const m = reduce(op, x, a.dim, a.keepdim as boolean, 'mean', x.dt, x.dt) as Tensor;
    return [result as Tensor, m];
  }
  return result as Tensor;
}
let sqrtFn: (t: Tensor) => Tensor;
export function setSqrt(f: (t: Tensor) => Tensor): void { sqrtFn = f; }
export const var_ = def('var(input, dim=None, unbiased=None, keepdim=False, *, correction=None)', (a) => varImpl('var', a, false, false) as Tensor);
export const std = def('std(input, dim=None, unbiased=None, keepdim=False, *, correction=None)', (a) => varImpl('std', a, false, true) as Tensor);
export const var_mean = def('var_mean(input, dim=None, unbiased=None, keepdim=False, *, correction=None)', (a) => varImpl('var_mean', a, true, false) as Tensor[]);
export const std_mean = def('std_mean(input, dim=None, unbiased=None, keepdim=False, *, correction=None)', (a) => varImpl('std_mean', a, true, true) as Tensor[]);

export const logsumexp = def('logsumexp(input, dim, keepdim=False)', (a) => {
  const x = asT('logsumexp', a.input);
  const out = toFloatingDType(x.dt);
  return reduce('logsumexp', x, a.dim, a.keepdim, 'logsumexp', out, out) as Tensor;
});

function normOrd(op: string, ord: unknown): number {
  if (ord instanceof Scalar) ord = Number(ord.value);
  if (ord === 'fro') return 2;
  if (ord === 'inf' || ord === Infinity) return Infinity;
  if (ord === '-inf' || ord === -Infinity) return -Infinity;
  if (typeof ord === 'number') return ord;
  throw new UnsupportedError(op, `norm order ${String(ord)} is not supported (use a number, 'fro', inf or -inf)`);
}
export const vector_norm = def('linalg.vector_norm(x, ord=2, dim=None, keepdim=False, *, dtype=None)', (a) => {
  const x = asT('linalg.vector_norm', a.x);
  if (!isFloat(x.dt) && DTYPES[x.dt].kind !== 'complex') {
    throw new DTypeError('linalg.vector_norm', `linalg.vector_norm: Expected a floating point or complex tensor as input. Got ${x.dt}`);
  }
  const out = optDType(a.dtype) ?? x.dt;
  return reduce('linalg.vector_norm', x, a.dim, a.keepdim, 'norm', out, out, [normOrd('linalg.vector_norm', a.ord)]) as Tensor;
});
export const norm = def("norm(input, p='fro', dim=None, keepdim=False, dtype=None)", (a) => {
  const x = asT('norm', a.input);
  if (a.p === 'nuc') throw new UnsupportedError('norm', "p='nuc' (nuclear norm) is not supported");
  if (!isFloat(x.dt)) throw new DTypeError('norm', `norm(): input dtype should be either floating point or complex. Got ${x.dt} instead.`);
  const out = optDType(a.dtype) ?? x.dt;
  return reduce('norm', x, a.dim, a.keepdim, 'norm', out, out, [normOrd('norm', a.p === null ? 'fro' : a.p)]) as Tensor;
});

function scan(op: string, x: Tensor, dim: number, kind: ScanKind, readAs: DTypeName, outDType: DTypeName): Tensor | ValuesIndices {
  const d = normDim(op, dim, x.ndim);
  if (DTYPES[x.dt].kind === 'complex' || DTYPES[outDType].kind === 'complex') return complexScan(op, x, d, kind, outDType);
  if (x.ndim === 0) x = x.reshape([1]);
  const moved = x.movedim(d, -1);
  const mat = moved.copyAs(readAs);
  moved.dispose();
  const n = x.shape[d] ?? 1;
  const rows = n === 0 ? 0 : mat.numel() / n;
  const out = Tensor.empty(mat.shape, outDType, x.device);
  const withIdx = kind === 'cummax' || kind === 'cummin';
  const idx = withIdx ? Tensor.empty(mat.shape, 'int64', x.device) : undefined;
  if (rows > 0) kernel('scan', x.device, op)(kind, mat.ref(), rows, n, out.ref(), idx?.ref());
  mat.dispose();
  const back = (t: Tensor): Tensor => { const r = t.movedim(-1, d).contiguous(); if (r !== t) t.dispose(); return r; };
  return withIdx ? valuesIndices(back(out), back(idx!)) : back(out);
}
/**
 * cumsum/cumprod of complex tensors. The scan kernels hold one real accumulator, so complex data never
 * reaches them: cumsum scans the float [..., 2] view (real and imaginary parts are independent sums);
 * cumprod needs complex products, so it runs as a Hillis–Steele prefix product of complex `mul`s
 * (log2(n) steps, each an ordinary elementwise op on any device).
 */
function complexScan(op: string, x: Tensor, d: number, kind: ScanKind, outDType: DTypeName): Tensor {
  if (kind !== 'cumsum' && kind !== 'cumprod') throw new DTypeError(op, `${op}() is not implemented for complex tensors (got ${x.dt})`);
  if (DTYPES[outDType].kind !== 'complex') throw new DTypeError(op, `${op}(): a complex input (${x.dt}) cannot accumulate into the real dtype ${outDType}`);
  const shape0 = x.shape;
  if (x.ndim === 0) x = x.reshape([1]);
  let acc = x.copyAs(outDType);
  const n = acc.shape[d]!;
  if (kind === 'cumsum') {
    const parts = view_as_real(acc);
    let summed = scan(op, parts, d, 'cumsum', parts.dt, parts.dt) as Tensor;
    parts.dispose(); acc.dispose();
    // a size-1 dim of a contiguous result may carry any stride; view_as_complex needs even ones
    if (summed.strides.slice(0, -1).some((st) => st % 2 !== 0)) { const c = summed.copyAs(); summed.dispose(); summed = c; }
    const r = view_as_complex(summed);
    summed.dispose();
    return shape0.length === 0 ? r.reshape([]) : r;
  }
  for (let s = 1; s < n; s *= 2) {
    const head = acc.narrow(d, 0, s), tail = acc.narrow(d, s, n - s), prev = acc.narrow(d, 0, n - s);
    const prod = mul(tail, prev);
    const next = cat([head, prod], d);
    for (const t of [head, tail, prev, prod, acc]) t.dispose();
    acc = next;
  }
  return shape0.length === 0 ? acc.reshape([]) : acc;
}

export const cumsum = def('cumsum(input, dim, *, dtype=None)', (a) => {
  const x = asT('cumsum', a.input);
  const out = optDType(a.dtype) ?? sumDType(x.dt);
  return scan('cumsum', x, a.dim, 'cumsum', readFor(out, x.dt), out) as Tensor;
});
export const cumprod = def('cumprod(input, dim, *, dtype=None)', (a) => {
  const x = asT('cumprod', a.input);
  const out = optDType(a.dtype) ?? sumDType(x.dt);
  return scan('cumprod', x, a.dim, 'cumprod', readFor(out, x.dt), out) as Tensor;
});
export const cummax = def('cummax(input, dim)', (a) => scan('cummax', asT('cummax', a.input), a.dim, 'cummax', asT('cummax', a.input).dt, asT('cummax', a.input).dt) as ValuesIndices);
export const cummin = def('cummin(input, dim)', (a) => scan('cummin', asT('cummin', a.input), a.dim, 'cummin', asT('cummin', a.input).dt, asT('cummin', a.input).dt) as ValuesIndices);
