// Operation family: sorting and selection. sort, argsort, msort, topk, kthvalue, median, nanmedian, mode,
// quantile, nanquantile, unique, unique_consecutive, searchsorted, bucketize.
//
// The op layer moves the working dim last and hands the backend a contiguous [rows, n] operand; the
// kernels (contract: src/kernels/sort.ts) pick elements the way PyTorch's CPU does, ties included.

import { Tensor } from '../tensor/tensor.js';
import { DTYPES, allocStorage, type DTypeName, type StorageArray } from '../dtype/dtypes.js';
import { encodeNumber, writeNumber } from '../dtype/convert.js';
import { resultType } from '../dtype/promotion.js';
import { DTypeError, IndexError, ShapeError, ValueError } from '../errors.js';
import { fmtShape, normDim, numelOf } from '../tensor/shape.js';
import { kernel } from '../kernels/registry.js';
import { def, isScalarLike, scalarNumber, scalarOf, type ScalarLike } from './registry.js';
import { describe, participant } from './elementwise.js';
import { valuesIndices, type ValuesIndices } from './reduce.js';
import type { UniqueResult } from '../kernels/sort.js';

// eslint-disable-next-line @typescript-eslint/no-explicit-any
type Fn = (...args: any[]) => any;

/** PyTorch's C++ name of a dtype, for "not implemented for 'Half'" messages. */
const CNAME: Record<DTypeName, string> = {
  bool: 'Bool', uint8: 'Byte', int8: 'Char', int16: 'Short', int32: 'Int', int64: 'Long', float16: 'Half',
  bfloat16: 'BFloat16', float32: 'Float', float64: 'Double', float8_e4m3fn: 'Float8_e4m3fn', float8_e5m2: 'Float8_e5m2',
  complex64: 'ComplexFloat', complex128: 'ComplexDouble',
};

function asTensor(op: string, x: unknown, name = 'input'): Tensor {
  if (!(x instanceof Tensor)) throw new ValueError(op, `${op}(): argument '${name}' must be Tensor, not ${describe(x)}`);
  return x;
}
function intArg(op: string, v: unknown, name: string): number {
  if (isScalarLike(v) && scalarOf(v).kind !== 'float' && Number.isInteger(scalarNumber(v))) return scalarNumber(v);
  throw new ValueError(op, `${op}(): argument '${name}' must be int, not ${describe(v)}`);
}
function boolArg(op: string, v: unknown, name: string): boolean {
  if (v === null || v === undefined) return false;
  if (isScalarLike(v)) return scalarNumber(v) !== 0;
  throw new ValueError(op, `${op}(): argument '${name}' must be bool, not ${describe(v)}`);
}
/** Rejects dtypes the kernel `kname` has no implementation for, with PyTorch's message. */
function checkDType(op: string, kname: string, x: Tensor, allowBool: boolean): void {
  const info = DTYPES[x.dt];
  if (info.kind === 'complex' || info.storageOnly || (!allowBool && x.dt === 'bool')) {
    throw new DTypeError(op, `"${kname}" not implemented for '${CNAME[x.dt]}'`);
  }
}

/** The input with `dim` moved last, as a contiguous [rows, n] operand; `back` restores an output's layout. */
function rowsOf(op: string, x: Tensor, dim: number) {
  const d = x.ndim === 0 ? 0 : normDim(op, dim, x.ndim);
  const moved = x.ndim === 0 ? x.unsqueeze(0) : x.movedim(d, -1);
  const mat = moved.contiguous();
  const n = moved.shape[moved.ndim - 1]!;
  const lead = moved.shape.slice(0, -1);
  const rows = numelOf(lead);
  const release = (): void => { if (mat !== moved) mat.dispose(); if (moved !== x) moved.dispose(); };
  /** Output allocated as [...lead, m] (contiguous) back to the input's dim order; `keep` false drops the dim. */
  const back = (t: Tensor, keep = true): Tensor => {
    if (x.ndim === 0) return reshapeOwned(t, []); // [1] -> []
    if (!keep) return reshapeOwned(t, lead);
    if (d === x.ndim - 1) return t;
    const v = t.movedim(-1, d), c = v.contiguous();
    if (c !== v) v.dispose();
    t.dispose();
    return c;
  };
  return { d, mat, n, lead, rows, release, back };
}
/** A 1-d view of any tensor (0-d included). */
const flat1 = (x: Tensor): Tensor => (x.ndim === 0 ? x.unsqueeze(0) : x.reshape([-1]));
function reshapeOwned(t: Tensor, shape: readonly number[]): Tensor {
  const r = t.reshape(shape as number[]);
  if (r !== t) t.dispose();
  return r;
}
const keepShape = (x: Tensor, d: number, keepdim: boolean): number[] =>
  x.ndim === 0 ? [] : keepdim ? x.shape.map((s, i) => (i === d ? 1 : s)) : x.shape.filter((_, i) => i !== d);

// ---- sort, argsort, msort ------------------------------------------------------------------------

function sortImpl(op: string, x: Tensor, dim: number, descending: boolean, stable: boolean): ValuesIndices {
  checkDType(op, 'sort', x, true);
  const r = rowsOf(op, x, dim);
  try {
    const values = Tensor.empty([...r.lead, r.n], x.dt, x.device);
    const indices = Tensor.empty([...r.lead, r.n], 'int64', x.device);
    // PyTorch leaves a broadcast (stride 0) dim in index order; a stable sort of equal keys does that.
    const zeroStride = x.ndim > 0 && x.strides[r.d] === 0;
    if (values.numel() > 0) kernel('sort', x.device, op)(r.mat.ref(), r.rows, r.n, descending, stable || zeroStride, values.ref(), indices.ref());
    return valuesIndices(r.back(values), r.back(indices));
  } finally { r.release(); }
}

export const sort = def('sort(input, dim=-1, descending=False, *, stable=False)', (a) =>
  sortImpl('sort', asTensor('sort', a.input), intArg('sort', a.dim, 'dim'), boolArg('sort', a.descending, 'descending'), boolArg('sort', a.stable, 'stable')));

export const argsort = def('argsort(input, dim=-1, descending=False, *, stable=False)', (a) => {
  const r = sortImpl('argsort', asTensor('argsort', a.input), intArg('argsort', a.dim, 'dim'), boolArg('argsort', a.descending, 'descending'), boolArg('argsort', a.stable, 'stable'));
  r.values.dispose();
  return r.indices;
});

export const msort = def('msort(input)', (a) => {
  const r = sortImpl('msort', asTensor('msort', a.input), 0, false, false);
  r.indices.dispose();
  return r.values;
});

// ---- topk, kthvalue, median, mode ----------------------------------------------------------------

export const topk = def('topk(input, k, dim=-1, largest=True, sorted=True)', (a) => {
  const op = 'topk';
  const x = asTensor(op, a.input);
  const k = intArg(op, a.k, 'k');
  checkDType(op, 'topk_cpu', x, false);
  const r = rowsOf(op, x, intArg(op, a.dim, 'dim'));
  try {
    if (k < 0 || k > r.n) throw new IndexError(op, `selected index k out of range (k = ${k}, dimension ${r.d} has size ${r.n})`);
    const values = Tensor.empty([...r.lead, k], x.dt, x.device);
    const indices = Tensor.empty([...r.lead, k], 'int64', x.device);
    if (values.numel() > 0) kernel('topk', x.device, op)(r.mat.ref(), r.rows, r.n, k, boolArg(op, a.largest, 'largest'), boolArg(op, a.sorted, 'sorted'), values.ref(), indices.ref());
    return valuesIndices(r.back(values), r.back(indices));
  } finally { r.release(); }
});

/** A per-row selection (kthvalue, median, mode): one value and its index per row. */
function selectImpl(op: string, x: Tensor, dim: number, keepdim: boolean, run: (mat: Tensor, rows: number, n: number, v: Tensor, i: Tensor) => void): ValuesIndices {
  const r = rowsOf(op, x, dim);
  try {
    if (r.n === 0) throw new IndexError(op, `${op}(): Expected reduction dim ${r.d} to have non-zero size.`);
    const values = Tensor.empty(r.lead, x.dt, x.device);
    const indices = Tensor.empty(r.lead, 'int64', x.device);
    if (r.rows > 0) run(r.mat, r.rows, r.n, values, indices);
    const shape = keepShape(x, r.d, keepdim);
    return valuesIndices(reshapeOwned(values, shape), reshapeOwned(indices, shape));
  } finally { r.release(); }
}

export const kthvalue = def('kthvalue(input, k, dim=-1, keepdim=False)', (a) => {
  const op = 'kthvalue';
  const x = asTensor(op, a.input);
  const k = intArg(op, a.k, 'k');
  checkDType(op, 'kthvalue_cpu', x, false);
  const d = x.ndim === 0 ? 0 : normDim(op, intArg(op, a.dim, 'dim'), x.ndim);
  const size = x.ndim === 0 ? 1 : x.shape[d]!;
  if (size > 0 && (k < 1 || k > size)) throw new IndexError(op, `kthvalue(): selected number k out of range for dimension ${d} (k = ${k}, size ${size})`);
  return selectImpl(op, x, d, boolArg(op, a.keepdim, 'keepdim'), (m, rows, n, v, i) =>
    kernel('kthvalue', x.device, op)(m.ref(), rows, n, k, v.ref(), i.ref()));
});

function medianOp(name: 'median' | 'nanmedian') {
  const ignoreNan = name === 'nanmedian';
  return def(`${name}(input, dim=None, keepdim=False)`, (a) => {
    const x = asTensor(name, a.input);
    checkDType(name, name === 'median' ? 'median_out' : 'nanmedian_out', x, false);
    if (a.dim === null) {
      if (x.numel() === 0) { // NaN, converted to the input dtype as ATen does
        const data = allocStorage(x.dt, 1);
        writeNumber(x.dt, data, 0, NaN);
        return Tensor.fromStorage(data, x.dt, [], x.device);
      }
      const flat = flat1(x);
      const r = selectImpl(name, flat, 0, false, (m, rows, n, v, i) => kernel('median', x.device, name)(m.ref(), rows, n, ignoreNan, v.ref(), i.ref()));
      if (flat !== x) flat.dispose();
      r.indices.dispose();
      return r.values;
    }
    const d = intArg(name, a.dim, 'dim');
    return selectImpl(name, x, d, boolArg(name, a.keepdim, 'keepdim'), (m, rows, n, v, i) =>
      kernel('median', x.device, name)(m.ref(), rows, n, ignoreNan, v.ref(), i.ref()));
  });
}
export const median = medianOp('median');
export const nanmedian = medianOp('nanmedian');

export const mode = def('mode(input, dim=-1, keepdim=False)', (a) => {
  const x = asTensor('mode', a.input);
  checkDType('mode', 'mode_cpu', x, true);
  return selectImpl('mode', x, intArg('mode', a.dim, 'dim'), boolArg('mode', a.keepdim, 'keepdim'), (m, rows, n, v, i) =>
    kernel('mode', x.device, 'mode')(m.ref(), rows, n, v.ref(), i.ref()));
});

// ---- quantile -------------------------------------------------------------------------------------

const INTERPOLATIONS = ['linear', 'lower', 'higher', 'midpoint', 'nearest'];

function quantileOp(name: 'quantile' | 'nanquantile') {
  const ignoreNan = name === 'nanquantile';
  return def(`${name}(input, q, dim=None, keepdim=False, *, interpolation='linear')`, (a) => {
    const x = asTensor(name, a.input);
    const interp = String(a.interpolation);
    if (!INTERPOLATIONS.includes(interp)) throw new ValueError(name, `${name}() interpolation must be one of linear, lower, higher, midpoint or nearest. Got ${interp}`);
    if (x.numel() === 0) throw new ValueError(name, `${name}() input tensor must be non-empty`);
    if (x.dt !== 'float32' && x.dt !== 'float64') throw new DTypeError(name, `${name}() input tensor must be either float or double dtype (got ${x.dt})`);
    let qs: number[], qShape: number[];
    if (a.q instanceof Tensor) {
      if (a.q.ndim > 1) throw new ShapeError(name, `${name}() q must be a scalar or 1D tensor`);
      if (a.q.dt !== x.dt) throw new DTypeError(name, `${name}() q tensor must be same dtype as the input tensor (got ${a.q.dt} and ${x.dt})`);
      qs = Array.from(a.q.dataSync() as Float64Array);
      qShape = a.q.ndim === 1 ? [qs.length] : [];
      if (qs.some((v) => !(v >= 0 && v <= 1))) throw new ValueError(name, `${name}() q values must be in the range [0, 1]`);
    } else if (isScalarLike(a.q)) {
      const v = scalarNumber(a.q);
      if (!(v >= 0 && v <= 1)) throw new ValueError(name, `${name}() q must be in the range [0, 1] but got ${v}`);
      qs = [x.dt === 'float32' ? Math.fround(v) : v];
      qShape = [];
    } else throw new ValueError(name, `${name}(): argument 'q' must be Tensor or float, not ${describe(a.q)}`);
    const keepdim = boolArg(name, a.keepdim, 'keepdim');
    const src = a.dim === null ? flat1(x) : x;
    const d = a.dim === null ? 0 : intArg(name, a.dim, 'dim');
    const reduced = a.dim === null ? (keepdim ? x.shape.map(() => 1) : []) : keepShape(x, normDim(name, d, Math.max(x.ndim, 1)), keepdim);
    const sorted = sortImpl(name, src, d, false, false);
    sorted.indices.dispose();
    if (src !== x) src.dispose();
    try {
      const r = rowsOf(name, sorted.values, d);
      const data = r.mat.dataSync() as Float64Array;
      r.release();
      const f = x.dt === 'float32' ? Math.fround : (v: number): number => v;
      const out = allocStorage(x.dt, qs.length * r.rows) as Float64Array;
      for (let row = 0; row < r.rows; row++) {
        const base = row * r.n;
        let valid = r.n, hasNan = false;
        while (valid > 0 && Number.isNaN(data[base + valid - 1])) { valid--; hasNan = true; }
        qs.forEach((q, qi) => {
          let rank = ignoreNan ? Math.max(f(q * (valid - 1)), 0) : hasNan ? r.n - 1 : f(q * (r.n - 1));
          if (interp === 'lower') rank = Math.floor(rank);
          else if (interp === 'higher') rank = Math.ceil(rank);
          else if (interp === 'nearest') rank = roundHalfEven(rank);
          const below = Math.trunc(rank);
          let v = data[base + below]!;
          if (interp === 'linear' || interp === 'midpoint') {
            const w = interp === 'midpoint' ? 0.5 : f(rank - below);
            v = lerp(v, data[base + Math.ceil(rank)]!, w, f);
          }
          out[qi * r.rows + row] = v;
        });
      }
      return Tensor.fromStorage(out, x.dt, [...qShape, ...reduced], x.device);
    } finally { sorted.values.dispose(); }
  });
}
const roundHalfEven = (v: number): number => { const r = Math.round(v); return r - v === 0.5 && r % 2 !== 0 ? r - 1 : r; };
/** ATen's lerp: start + w (end - start) for small weights, end - (end - start)(1 - w) otherwise. */
function lerp(s: number, e: number, w: number, f: (v: number) => number): number {
  const diff = f(e - s);
  return Math.abs(w) < 0.5 ? f(s + w * diff) : f(e - diff * f(1 - w));
}
export const quantile = quantileOp('quantile');
export const nanquantile = quantileOp('nanquantile');

// ---- unique, unique_consecutive ------------------------------------------------------------------

function uniqueImpl(op: string, x: Tensor, dimArg: unknown, consecutive: boolean, wantInverse: boolean, wantCounts: boolean): Tensor | Tensor[] {
  checkDType(op, op === 'unique' ? 'unique' : 'unique_consecutive', x, true);
  const finish = (values: Tensor, inverse: Tensor, counts: Tensor): Tensor | Tensor[] => {
    const out = [values];
    if (wantInverse) out.push(inverse); else inverse.dispose();
    if (wantCounts) out.push(counts); else counts.dispose();
    return out.length === 1 ? values : out;
  };
  const host = (data: StorageArray, dt: DTypeName, shape: readonly number[]): Tensor => Tensor.fromStorage(data, dt, shape, x.device);
  // PyTorch takes the flat path without a dim, and for unique_consecutive also for dim 0 of a 1-d input.
  if (dimArg === null || (consecutive && x.ndim === 1 && intArg(op, dimArg, 'dim') === 0)) {
    const view = flat1(x), flat = view.contiguous();
    if (flat !== view) view.dispose();
    const n = flat.numel();
    const r: UniqueResult = kernel('unique', x.device, op)(flat.ref(), n, 1, consecutive);
    if (flat !== x) flat.dispose();
    return finish(host(r.values, x.dt, [r.groups]), host(r.inverse, 'int64', x.shape), host(r.counts, 'int64', [r.groups]));
  }
  if (x.ndim === 0) throw new IndexError(op, 'Dimension specified as 0 but tensor has no dimensions');
  const d = normDim(op, intArg(op, dimArg, 'dim'), x.ndim);
  const zeros = x.shape.filter((s) => s === 0).length;
  if (x.shape[d] === 0) {
    if (zeros > 1) throw new ShapeError(op, 'Number of zero sized dimensions is more than one, so unique cannot be applied ');
    return finish(Tensor.empty(x.shape, x.dt, x.device), Tensor.empty([0], 'int64', x.device), Tensor.empty([0], 'int64', x.device));
  }
  if (zeros > 0) throw new ShapeError(op, "There are 0 sized dimensions, and they aren't selected, so unique cannot be applied");
  const moved = x.movedim(d, 0), mat = moved.contiguous();
  const rows = x.shape[d]!, rowLen = mat.numel() / rows;
  const r: UniqueResult = kernel('unique', x.device, op)(mat.ref(), rows, rowLen, consecutive);
  if (mat !== moved) mat.dispose();
  const vals = host(r.values, x.dt, [r.groups, ...moved.shape.slice(1)]);
  moved.dispose();
  const v = vals.movedim(0, d), values = v.contiguous();
  if (values !== v) v.dispose();
  if (values !== vals) vals.dispose();
  return finish(values, host(r.inverse, 'int64', [rows]), host(r.counts, 'int64', [r.groups]));
}

export const unique = def('unique(input, sorted=True, return_inverse=False, return_counts=False, dim=None)', (a) =>
  uniqueImpl('unique', asTensor('unique', a.input), a.dim, false, boolArg('unique', a.return_inverse, 'return_inverse'), boolArg('unique', a.return_counts, 'return_counts')));

export const unique_consecutive = def('unique_consecutive(input, return_inverse=False, return_counts=False, dim=None)', (a) =>
  uniqueImpl('unique_consecutive', asTensor('unique_consecutive', a.input), a.dim, true,
    boolArg('unique_consecutive', a.return_inverse, 'return_inverse'), boolArg('unique_consecutive', a.return_counts, 'return_counts')));

// ---- searchsorted, bucketize ---------------------------------------------------------------------

/** A 0-d tensor of `dt` holding a scalar (int64 exact through bigint). */
function scalarTensor(v: ScalarLike, dt: DTypeName, x: Tensor): Tensor {
  const s = scalarOf(v);
  const data = allocStorage(dt, 1);
  (data as unknown as (number | bigint)[])[0] = typeof s.value === 'bigint' && dt === 'int64' ? s.value
    : encodeNumber(dt, typeof s.value === 'boolean' ? Number(s.value) : Number(s.value));
  return Tensor.fromStorage(data, dt, [], x.device);
}

function searchsortedImpl(op: string, seq: Tensor, input: unknown, outInt32: boolean, right: boolean, side: unknown, sorter: unknown): Tensor {
  const ss = 'torch.searchsorted()';
  if (!(input instanceof Tensor) && !isScalarLike(input)) throw new ValueError(op, `${op}(): argument 'input' must be Tensor or Number, not ${describe(input)}`);
  if (seq.ndim === 0) throw new ShapeError(op, `${ss}: boundaries tensor should have positive dimension, but got 0 dimension`);
  if (side !== null && side !== undefined) {
    if (side !== 'left' && side !== 'right') throw new ValueError(op, `${ss}: side can only be 'left' or 'right' but got ${String(side)}`);
    if (side === 'left' && right) throw new ValueError(op, `${ss}: side and right can't be set to opposites, got side of left while right was True`);
    right = side === 'right';
  }
  const nb = seq.shape[seq.ndim - 1]!;
  const inNdim = input instanceof Tensor ? input.ndim : 0;
  if (seq.ndim > 1) {
    if (inNdim === 0) {
      throw new ShapeError(op, `${ss}: input value can be a scalar only when boundaries tensor dimension is 1, but we got boundaries tensor dim(${seq.ndim}) and input value's dim(0) numel(1)`);
    }
    const inShape = (input as Tensor).shape;
    if (inNdim !== seq.ndim || seq.shape.slice(0, -1).some((s, i) => s !== inShape[i])) {
      throw new ShapeError(op, `${ss}: boundaries tensor should be 1 dimension or the first N-1 dimensions of boundaries tensor and input value tensor must match, but we got boundaries tensor ${fmtShape(seq.shape)} and input value tensor ${fmtShape(inShape)}`);
    }
  }
  let sortIdx: Tensor | null = null;
  if (sorter !== null && sorter !== undefined) {
    const st = asTensor(op, sorter, 'sorter');
    if (st.dt !== 'int64') throw new DTypeError(op, `${ss}: sorter must be a tensor of long dtype but got dtype ${CNAME[st.dt]}`);
    if (st.ndim !== seq.ndim || st.shape.some((s, i) => s !== seq.shape[i])) {
      throw new ShapeError(op, `${ss}: boundary and sorter must have the same size, but got boundary tensor ${fmtShape(seq.shape)}and got sorter tensor ${fmtShape(st.shape)}`);
    }
    sortIdx = st.contiguous();
    const s = sortIdx.dataSync() as BigInt64Array;
    for (const v of s) if (v < 0n || v >= BigInt(nb)) throw new IndexError(op, `${ss}: sorter index out of range`);
  }
  const common = resultType([participant(seq), participant(input as Tensor)]);
  if (DTYPES[common].kind === 'complex' || DTYPES[common].storageOnly || common === 'bool') {
    throw new DTypeError(op, `"searchsorted_out_cpu" not implemented for '${CNAME[common]}'`);
  }
  if (outInt32 && nb >= 2 ** 31 - 1) throw new ValueError(op, `${ss}: the size of boundaries' last dimension should be less than 2147483647, but we got ${nb}`);
  const bd = seq.copyAs(common);
  const inp = input instanceof Tensor ? input.copyAs(common) : scalarTensor(input as ScalarLike, common, seq);
  try {
    const out = Tensor.empty(inp.shape, outInt32 ? 'int32' : 'int64', seq.device);
    if (out.numel() > 0) {
      const bRows = seq.ndim === 1 ? 1 : bd.numel() / Math.max(nb, 1);
      const ni = seq.ndim === 1 ? inp.numel() : inp.shape[inp.ndim - 1]!;
      kernel('searchsorted', seq.device, op)(bd.ref(), bRows, nb, inp.ref(), inp.numel() / ni, ni, right, sortIdx?.ref() ?? null, out.ref());
    }
    return out;
  } finally {
    bd.dispose(); inp.dispose();
    if (sortIdx && sortIdx !== sorter) sortIdx.dispose();
  }
}

export const searchsorted = def('searchsorted(sorted_sequence, input, *, out_int32=False, right=False, side=None, sorter=None)', (a) =>
  searchsortedImpl('searchsorted', asTensor('searchsorted', a.sorted_sequence, 'sorted_sequence'), a.input,
    boolArg('searchsorted', a.out_int32, 'out_int32'), boolArg('searchsorted', a.right, 'right'), a.side, a.sorter));

export const bucketize = def('bucketize(input, boundaries, *, out_int32=False, right=False)', (a) => {
  const b = asTensor('bucketize', a.boundaries, 'boundaries');
  if (b.ndim !== 1) throw new ShapeError('bucketize', `boundaries tensor must be 1 dimension, but got dim(${b.ndim})`);
  return searchsortedImpl('bucketize', b, a.input, boolArg('bucketize', a.out_int32, 'out_int32'), boolArg('bucketize', a.right, 'right'), null, null);
});

/** nbx.nn.functional.X entries of this family. */
export const functional: Record<string, Fn> = {};
/** Tensor methods of this family (tensor as first argument). */
export const methods: Record<string, Fn> = {
  sort, argsort, msort, topk, kthvalue, median, nanmedian, mode, quantile, nanquantile, unique, unique_consecutive,
};
