// CPU kernels for the indexing family. The op layer validates shapes and dtypes, broadcasts and
// allocates; these kernels move data and check index values (the one check only the data can answer).
// Every index error reads "index V is out of bounds for dimension D with size N", as PyTorch's gather.
//
//   gather(input, dim, index, out, op, wrap)     out[p] = input[p with p[dim] := index[p]]
//   scatter(out, dim, index, src, mode, opts)    out[p with p[dim] := index[p]] (mode)= src[p], in place
//   linear_index(indices, sizes, out, op, dims)  out[p] = sum_k wrap(indices_k[p]) * prod(sizes[k+1:])
//   nonzero(input, out)                          coordinates of the non-zero elements, row-major
//   masked_select(input, mask, out)              elements where mask is set, row-major
//   masked_scatter(out, mask, source)            consecutive source elements into the set positions
//
// `index`/`src`/`mask` are strided (stride 0 where broadcast); `out` of gather/nonzero/masked_select is
// contiguous. Index dtypes: int64 or int32.

import { DTYPES, type DTypeName, type StorageArray } from '../../../dtype/dtypes.js';
import { f16Table, fromBFloat16Bits, roundTo, toBFloat16Bits, toFloat16Bits } from '../../../dtype/convert.js';
import type { StridedRef } from '../../backend.js';
import type { BackendKernels } from '../../../kernels/table.js';
import { IndexError, ValueError } from '../../../errors.js';
import { halfReducesInFloat, type ScatterMode, type ScatterOptions } from '../../../kernels/indexing.js';

type Arr = StorageArray & { [i: number]: number | bigint };

/**
 * Walks the rows (all dims but the last) of `shape` for several operands at once: `offs[q]` is operand
 * q's offset of the current row start, `inner` the row length. A 0-d shape is one row of one element.
 * (A plain loop over `count` calling advance(), not a callback: hot loops then keep their values in
 * registers instead of closure slots.)
 */
class Rows {
  readonly count: number;
  readonly inner: number;
  readonly offs: number[];
  private readonly idx: number[];
  constructor(private readonly shape: readonly number[], private readonly strides: readonly (readonly number[])[], offsets: number[]) {
    const nd = shape.length;
    this.inner = nd === 0 ? 1 : shape[nd - 1]!;
    this.count = shape.some((s) => s === 0) ? 0 : shape.slice(0, Math.max(nd - 1, 0)).reduce((a, b) => a * b, 1);
    this.offs = offsets.slice();
    this.idx = new Array<number>(Math.max(nd - 1, 0)).fill(0);
  }
  advance(): void {
    const { shape, strides, offs, idx } = this;
    for (let d = idx.length - 1; d >= 0; d--) {
      idx[d]!++;
      for (let q = 0; q < offs.length; q++) offs[q]! += strides[q]![d]!;
      if (idx[d]! < shape[d]!) return;
      for (let q = 0; q < offs.length; q++) offs[q]! -= strides[q]![d]! * shape[d]!;
      idx[d] = 0;
    }
  }
}

/** Calls row(offsets, inner) for every row (see Rows); for the loops that are not the hot path. */
function forRows(shape: readonly number[], strides: readonly (readonly number[])[], offsets: number[],
  row: (offs: number[], inner: number) => void): void {
  const w = new Rows(shape, strides, offsets);
  for (let r = 0; r < w.count; r++, w.advance()) row(w.offs, w.inner);
}
const lastStride = (st: readonly number[]): number => (st.length ? st[st.length - 1]! : 0);

/** int64 storage as int32 pairs (little-endian): reading a BigInt64Array element allocates a BigInt. */
function int32Pairs(r: StridedRef): Int32Array {
  const a = r.buf as BigInt64Array;
  return new Int32Array(a.buffer, a.byteOffset, a.length * 2);
}

/** Reads index element i as a number (int32 or int64 storage). */
const indexReader = (r: StridedRef): ((i: number) => number) => {
  if (r.dtype !== 'int64') { const a = r.buf as Int32Array; return (i) => a[i]!; }
  const p = int32Pairs(r);
  return (i) => p[2 * i + 1]! * 4294967296 + (p[2 * i]! >>> 0);
};

function outOfBounds(op: string, v: number, dim: number, size: number): never {
  throw new IndexError(op, `index ${v} is out of bounds for dimension ${dim} with size ${size}`);
}

/** Checks (and with `wrap`, wraps a negative) index value v against `size`. */
function checked(op: string, v: number, dim: number, size: number, wrap: boolean): number {
  if (v >= 0 && v < size) return v;
  if (wrap && v < 0 && v >= -size) return v + size;
  return outOfBounds(op, v, dim, size);
}

// ---- gather --------------------------------------------------------------------------------------

/** The hot loop of gather: every value a parameter (no closure context), index read and check inline. */
function gatherRow(o: Arr, oi: number, os: number, a: Arr, ib: number, xs: number, ia: Int32Array, ip: number, is: number,
  big: boolean, n: number, size: number, dimStride: number, op: string, dim: number, wrap: boolean): void {
  for (let k = 0; k < n; k++, ib += xs, ip += is, oi += os) {
    let v = big ? ia[2 * ip + 1]! * 4294967296 + (ia[2 * ip]! >>> 0) : ia[ip]!;
    if (!(v >= 0 && v < size)) v = checked(op, v, dim, size, wrap);
    o[oi] = a[ib + v * dimStride]!;
  }
}

export function gather(input: StridedRef, dim: number, index: StridedRef, out: StridedRef, op: string, wrap = false): void {
  const lanes = DTYPES[input.dtype].lanes;
  const size = input.shape[dim] ?? 1, dimStride = (input.strides[dim] ?? 0) * lanes;
  // Input strides along the other dims; along `dim` the index value decides.
  const inStrides = input.strides.map((s, d) => (d === dim ? 0 : s * lanes));
  const outStrides = out.strides.map((s) => s * lanes);
  const a = input.buf as Arr, o = out.buf as Arr;
  const read = indexReader(index);
  const xs = lastStride(inStrides), is = lastStride(index.strides), os = lastStride(outStrides);
  const big = index.dtype === 'int64', ia = big ? int32Pairs(index) : (index.buf as Int32Array);
  const w = new Rows(index.shape, [inStrides, index.strides, outStrides], [input.offset * lanes, index.offset, out.offset * lanes]);
  const n = w.inner;
  for (let r = 0; r < w.count; r++, w.advance()) {
    const ib = w.offs[0]!, ip = w.offs[1]!;
    let oi = w.offs[2]!;
    if (is === 0 && xs !== 0 && lanes === 1) {
      // One index for the whole row (index_select, embedding): a strided row copy.
      const src = ib + checked(op, read(ip), dim, size, wrap) * dimStride;
      if (xs === 1 && os === 1 && n > 32) o.set(a.subarray(src, src + n) as never, oi);
      else for (let k = 0, s = src; k < n; k++, s += xs, oi += os) o[oi] = a[s]!;
    } else if (lanes === 1) {
      gatherRow(o, oi, os, a, ib, xs, ia, ip, is, big, n, size, dimStride, op, dim, wrap);
    } else {
      for (let k = 0, b = ib, p = ip; k < n; k++, b += xs, p += is, oi += os) {
        const s = b + checked(op, read(p), dim, size, wrap) * dimStride;
        for (let l = 0; l < lanes; l++) o[oi + l] = a[s + l]!;
      }
    }
  }
}

// ---- scatter -------------------------------------------------------------------------------------

/** Numeric access to storage: decoded numbers for half types, direct otherwise (int64 handled apart). */
function numAccess(d: DTypeName, a: Arr): { get: (i: number) => number; set: (i: number, v: number) => void } {
  if (d === 'float16') { const t = f16Table(); return { get: (i) => t[a[i] as number]!, set: (i, v) => { a[i] = toFloat16Bits(v); } }; }
  if (d === 'bfloat16') return { get: (i) => fromBFloat16Bits(a[i] as number), set: (i, v) => { a[i] = toBFloat16Bits(v); } };
  if (d === 'bool') return { get: (i) => a[i] as number, set: (i, v) => { a[i] = v !== 0 ? 1 : 0; } };
  if (d === 'int32') return { get: (i) => a[i] as number, set: (i, v) => { a[i] = v; } };
  return { get: (i) => a[i] as number, set: (i, v) => { a[i] = v; } };
}

const isIntDT = (d: DTypeName): boolean => DTYPES[d].kind === 'int' || d === 'bool';

/** Combines `cur` with `v` in the number domain; ints wrap like C (int32 products through imul). */
function combineNum(mode: ScatterMode, d: DTypeName): (cur: number, v: number) => number {
  const isInt = isIntDT(d);
  switch (mode) {
    case 'sum': case 'mean': return d === 'bool' ? (c, v) => (c || v ? 1 : 0) : (c, v) => c + v;
    case 'prod':
      if (d === 'int32') return (c, v) => Math.imul(c, v);
      return d === 'bool' ? (c, v) => (c && v ? 1 : 0) : (c, v) => c * v;
    case 'amax': return isInt ? (c, v) => (v > c ? v : c) : (c, v) => (Number.isNaN(v) ? v : c < v ? v : c);
    case 'amin': return isInt ? (c, v) => (v < c ? v : c) : (c, v) => (Number.isNaN(v) ? v : c > v ? v : c);
    default: return (_c, v) => v;
  }
}
function combineBig(mode: ScatterMode): (cur: bigint, v: bigint) => bigint {
  switch (mode) {
    case 'sum': case 'mean': return (c, v) => c + v;
    case 'prod': return (c, v) => BigInt.asIntN(64, c * v);
    case 'amax': return (c, v) => (v > c ? v : c);
    case 'amin': return (c, v) => (v < c ? v : c);
    default: return (_c, v) => v;
  }
}

/** Dtypes whose storage holds the value itself (stores round or wrap as C would); bool is not (1 + 1). */
const PLAIN_ADD = new Set<DTypeName>(['float32', 'float64', 'int32', 'int16', 'int8', 'uint8']);

/** The hot loop of scatter: overwrite, or add in place. */
function scatterRow(o: Arr, tb: number, os: number, s: Arr, si: number, ss: number, ia: Int32Array, ip: number, is: number,
  big: boolean, n: number, size: number, dimStride: number, add: boolean, op: string, dim: number, wrap: boolean): void {
  for (let k = 0; k < n; k++, tb += os, ip += is, si += ss) {
    let v = big ? ia[2 * ip + 1]! * 4294967296 + (ia[2 * ip]! >>> 0) : ia[ip]!;
    if (!(v >= 0 && v < size)) v = checked(op, v, dim, size, wrap);
    const t = tb + v * dimStride;
    if (add) (o as Float64Array)[t] += (s as Float64Array)[si]!;
    else o[t] = s[si]!;
  }
}

/** A float32 copy of a float16/bfloat16 operand (same strides; the whole storage span from its offset). */
function widened(r: StridedRef, numel: number): StridedRef {
  const a = numAccess(r.dtype, r.buf as Arr), w = new Float32Array(numel);
  for (let i = 0; i < numel; i++) w[i] = a.get(r.offset + i);
  return { ...r, buf: w, dtype: 'float32', offset: 0 };
}

/**
 * In-place scatter into `out` (a fresh contiguous tensor): for every position p of `index`,
 * out[p with p[dim] := index[p]] is combined with src[p] by `mode`. 'none' overwrites (the last write
 * wins, as PyTorch's CPU); 'sum' adds alpha * src; include_self=false starts each hit position from
 * its first source value; 'mean' divides by the number of contributions (floor division for ints).
 * float16/bfloat16 reductions round each step to the half type, or reduce in float32 and round once
 * (see halfReducesInFloat), as PyTorch does for the op.
 */
export function scatter(out: StridedRef, dim: number, index: StridedRef, src: StridedRef, mode: ScatterMode, opts: ScatterOptions): void {
  if (!halfReducesInFloat(out, dim, index, mode, opts)) {
    const counts = scatterCore(out, dim, index, src, mode, opts);
    if (mode === 'mean') finishMean(out, counts!, opts.includeSelf ?? true);
    return;
  }
  const numel = out.shape.reduce((x, y) => x * y, 1);
  const srcSpan = src.shape.some((n) => n === 0) ? 0 : 1 + src.shape.reduce((acc, n, k) => acc + (n - 1) * Math.abs(src.strides[k]!), 0);
  const acc = widened(out, numel);
  const counts = scatterCore(acc, dim, index, widened(src, srcSpan), mode, opts);
  // back to the half type, rounding once; mean then divides there (scatter_reduce divides the result)
  const o = numAccess(out.dtype, out.buf as Arr), w = acc.buf as Float32Array;
  for (let i = 0; i < numel; i++) o.set(out.offset + i, w[i]!);
  if (mode === 'mean') finishMean(out, counts!, opts.includeSelf ?? true);
}

/** The scatter itself; returns the per-position contribution counts where it keeps them (mean, include_self=false). */
function scatterCore(out: StridedRef, dim: number, index: StridedRef, src: StridedRef, mode: ScatterMode, opts: ScatterOptions): Float64Array | undefined {
  const { op, includeSelf = true, wrap = false } = opts;
  const d = out.dtype;
  const lanes = DTYPES[d].lanes;
  if (lanes !== 1 && mode !== 'none') throw new ValueError(op, `reduction '${mode}' is not supported for complex tensors`);
  const size = out.shape[dim] ?? 1, dimStride = (out.strides[dim] ?? 0) * lanes;
  const outStrides = out.strides.map((s, k) => (k === dim ? 0 : s * lanes));
  const srcStrides = src.strides.map((s) => s * lanes);
  const o = out.buf as Arr, s = src.buf as Arr;
  const read = indexReader(index);
  const os = lastStride(outStrides), is = lastStride(index.strides), ss = lastStride(srcStrides);
  const numel = out.shape.reduce((x, y) => x * y, 1);
  // Per-position bookkeeping for include_self=false and mean: contributions so far.
  const track = !includeSelf || mode === 'mean';
  const counts = track ? new Float64Array(numel) : undefined;
  const base = out.offset * lanes;
  let visit: (t: number, si: number) => void;
  if (mode === 'none') {
    visit = (t, si) => { for (let l = 0; l < lanes; l++) o[t + l] = s[si + l]!; };
  } else if (d === 'int64') {
    const f = combineBig(mode);
    const alpha = mode === 'sum' ? BigInt(opts.alpha ?? 1) : 1n;
    visit = (t, si) => {
      let v = s[si] as bigint;
      if (alpha !== 1n) v *= alpha;
      if (counts) { const c = counts[t - base]!; counts[t - base] = c + 1; if (c === 0 && !includeSelf) { o[t] = v; return; } }
      o[t] = f(o[t] as bigint, v);
    };
  } else {
    const f = combineNum(mode, d);
    const acc = numAccess(d, o), sa = numAccess(d, s);
    const alpha = mode === 'sum' ? Number(opts.alpha ?? 1) : 1;
    // index_add of a 1-d self multiplies in the dtype itself (source * alpha.to<scalar_t>())
    const scalarMul = op === 'index_add' && out.shape.length === 1 && DTYPES[d].kind === 'float' && d !== 'float64';
    const alphaD = scalarMul ? roundTo(d, alpha) : alpha;
    visit = (t, si) => {
      let v = sa.get(si);
      if (scalarMul) v = roundTo(d, v * alphaD);
      else if (alpha !== 1) v = d === 'int32' ? Math.imul(v, alpha) : v * alpha;
      if (counts) { const c = counts[t - base]!; counts[t - base] = c + 1; if (c === 0 && !includeSelf) { acc.set(t, v); return; } }
      acc.set(t, f(acc.get(t), v));
    };
  }
  // Overwrite, and plain adds in dtypes stored as JS numbers, take the inline loop; the rest visit().
  const plainAdd = mode === 'sum' && includeSelf && Number(opts.alpha ?? 1) === 1 && PLAIN_ADD.has(d);
  const fast = lanes === 1 && (mode === 'none' || plainAdd);
  const big = index.dtype === 'int64', ia = big ? int32Pairs(index) : (index.buf as Int32Array);
  const w = new Rows(index.shape, [outStrides, index.strides, srcStrides], [base, index.offset, src.offset * lanes]);
  for (let r = 0; r < w.count; r++, w.advance()) {
    let tb = w.offs[0]!, ip = w.offs[1]!, si = w.offs[2]!;
    if (fast) scatterRow(o, tb, os, s, si, ss, ia, ip, is, big, w.inner, size, dimStride, plainAdd, op, dim, wrap);
    else for (let k = 0; k < w.inner; k++, tb += os, ip += is, si += ss) visit(tb + checked(op, read(ip), dim, size, wrap) * dimStride, si);
  }
  return counts;
}

/** Mean: divide every position that received contributions by their count (plus itself if included). */
function finishMean(out: StridedRef, counts: Float64Array, includeSelf: boolean): void {
  const d = out.dtype, o = out.buf as Arr, base = out.offset;
  const extra = includeSelf ? 1 : 0;
  if (d === 'int64') {
    for (let i = 0; i < counts.length; i++) {
      if (counts[i] === 0) continue;
      const c = BigInt(counts[i]! + extra), v = o[base + i] as bigint;
      const q = v / c;
      o[base + i] = v % c !== 0n && v < 0n ? q - 1n : q; // floor division
    }
    return;
  }
  const acc = numAccess(d, o), isInt = isIntDT(d);
  // PyTorch counts in the output's dtype: a half type rounds large counts
  const half = d === 'float16' || d === 'bfloat16';
  for (let i = 0; i < counts.length; i++) {
    if (counts[i] === 0) continue;
    const q = acc.get(base + i) / (half ? roundTo(d, counts[i]! + extra) : counts[i]! + extra);
    acc.set(base + i, isInt ? Math.floor(q) : q);
  }
}

// ---- advanced indexing ---------------------------------------------------------------------------

/**
 * Row-major linear index over the indexed dims: out[p] = sum_k wrap(indices[k][p]) * prod(sizes[k+1:]).
 * Negative indices count from the end (advanced indexing); out-of-range values raise, naming dims[k].
 */
export function linearIndex(indices: StridedRef[], sizes: number[], out: StridedRef, op: string, dims: number[]): void {
  const mult = sizes.map((_, k) => sizes.slice(k + 1).reduce((a, b) => a * b, 1));
  const readers = indices.map(indexReader);
  const o = out.buf as BigInt64Array;
  const lasts = indices.map((r) => lastStride(r.strides));
  forRows(out.shape, [...indices.map((r) => r.strides), out.strides], [...indices.map((r) => r.offset), out.offset], (offs, n) => {
    const p = offs.slice();
    for (let k = 0; k < n; k++) {
      let lin = 0;
      for (let q = 0; q < readers.length; q++) { lin += checked(op, readers[q]!(p[q]!), dims[q]!, sizes[q]!, true) * mult[q]!; p[q]! += lasts[q]!; }
      o[p[readers.length]!] = BigInt(lin);
      p[readers.length]! += lastStride(out.strides);
    }
  });
}

/** Whether storage element i of dtype d is non-zero (NaN is; -0.0 is not). */
function nonzeroTest(d: DTypeName, a: Arr): (i: number) => boolean {
  const st = DTYPES[d].storage;
  if (d === 'int64') return (i) => a[i] !== 0n;
  if (d === 'float16' || d === 'bfloat16') return (i) => ((a[i] as number) & 0x7fff) !== 0;
  if (d === 'float8_e4m3fn' || d === 'float8_e5m2') return (i) => ((a[i] as number) & 0x7f) !== 0;
  if (DTYPES[d].lanes === 2) return (i) => a[2 * i] !== 0 || a[2 * i + 1] !== 0;
  void st;
  return (i) => a[i] !== 0;
}

/** Coordinates of the non-zero elements of `input`, row-major, into out [count, ndim] (int64). */
export function nonzero(input: StridedRef, out: StridedRef): void {
  const nz = nonzeroTest(input.dtype, input.buf as Arr);
  const nd = input.shape.length;
  if (nd === 0) return; // [count, 0]: nothing to write
  const o = out.buf as BigInt64Array;
  let w = out.offset;
  const coord = new Array<number>(nd).fill(0);
  const xs = lastStride(input.strides);
  forRows(input.shape, [input.strides], [input.offset], (offs, n) => {
    let i = offs[0]!;
    for (let k = 0; k < n; k++, i += xs) {
      if (!nz(i)) continue;
      coord[nd - 1] = k;
      for (let q = 0; q < nd; q++) o[w++] = BigInt(coord[q]!);
    }
    // advance the row coordinates (the odometer forRows runs, mirrored)
    for (let q = nd - 2; q >= 0; q--) { if (++coord[q]! < input.shape[q]!) break; coord[q] = 0; }
  });
}

/** Elements of `input` where `mask` (same shape, broadcast strides) is set, row-major, into 1-D `out`. */
export function maskedSelect(input: StridedRef, mask: StridedRef, out: StridedRef): void {
  const lanes = DTYPES[input.dtype].lanes;
  const a = input.buf as Arr, m = mask.buf as Uint8Array, o = out.buf as Arr;
  let w = out.offset * lanes;
  const xs = lastStride(input.strides) * lanes, ms = lastStride(mask.strides);
  forRows(input.shape, [input.strides.map((s) => s * lanes), mask.strides], [input.offset * lanes, mask.offset], (offs, n) => {
    let i = offs[0]!, j = offs[1]!;
    for (let k = 0; k < n; k++, i += xs, j += ms) if (m[j]) for (let l = 0; l < lanes; l++) o[w++] = a[i + l]!;
  });
}

/** Writes consecutive elements of contiguous `source` into `out` (contiguous) where `mask` is set. */
export function maskedScatter(out: StridedRef, mask: StridedRef, source: StridedRef): void {
  const lanes = DTYPES[out.dtype].lanes;
  const o = out.buf as Arr, m = mask.buf as Uint8Array, s = source.buf as Arr;
  let r = source.offset * lanes;
  const os = lastStride(out.strides) * lanes, ms = lastStride(mask.strides);
  forRows(out.shape, [out.strides.map((x) => x * lanes), mask.strides], [out.offset * lanes, mask.offset], (offs, n) => {
    let i = offs[0]!, j = offs[1]!;
    for (let k = 0; k < n; k++, i += os, j += ms) if (m[j]) for (let l = 0; l < lanes; l++) o[i + l] = s[r++]!;
  });
}

export const kernels = {
  gather: gather,
  scatter: scatter,
  linear_index: linearIndex,
  nonzero: nonzero,
  masked_select: maskedSelect,
  masked_scatter: maskedScatter,
} satisfies BackendKernels;
