// CUDA kernels for the shape and indexing families, with the CPU kernels' signatures and semantics
// (contracts: src/kernels/copy.ts, src/kernels/indexing.ts):
//   copy_strided    a driver copy when both sides are contiguous; a widened (up to 16-byte) element copy
//                   when rows are contiguous on both sides; a shared-memory tiled transpose when each side
//                   is contiguous along a different dim; an N-d index decomposition otherwise.
//   gather          one thread per output element.
//   scatter         deterministic, bit-identical to the CPU: each output slot is written only by the index
//                   positions of one "column" (all coordinates but `dim`), so a thread per column applies
//                   them in index order. With few long columns: last-writer-wins through an atomicMax on the
//                   writer's position (overwrite), integer reductions through atomics (exact in any order).
//   linear_index, nonzero, masked_select, masked_scatter: elementwise, or a three-kernel stream compaction
//                   (per-block counts, one-block scan, ordered emit) for the data-dependent outputs.
// Index errors: kernels record the first failing position in a device word (atomicMax of ~pos); the
// launcher reads it back (8 bytes) and raises the CPU kernel's IndexError with the offending value.
// Copies move raw bits (elements as 1/2/4/8/16-byte words), so every dtype, complex included, works.

import { DTYPES, type DTypeName } from '../../../dtype/dtypes.js';
import type { StridedRef } from '../../backend.js';
import type { BackendKernels } from '../../../kernels/table.js';
import { coalesce } from '../../../tensor/shape.js';
import { R, type CudaBackend, type CudaBuffer } from '../runtime/backend.js';
import type { ArgType, KernelArg } from '../runtime/driver.js';
import { IndexError, UnsupportedError, ValueError } from '../../../errors.js';
import { halfReducesInFloat, scatterHalfInFloat, type ScatterMode, type ScatterOptions } from '../../../kernels/indexing.js';
import { basePtr as ptr } from './util.js';

let be: CudaBackend;
export const kernels = {
  copy_strided: cudaCopyStrided,
  gather: cudaGather,
  scatter: cudaScatter,
  linear_index: cudaLinearIndex,
  nonzero: cudaNonzero,
  masked_select: cudaMaskedSelect,
  masked_scatter: cudaMaskedScatter,
} satisfies BackendKernels;

/** Points this family's kernels at the backend (called once, when the backend starts). */
export function bind(backend: CudaBackend): void {
  be = backend;
  errBuf = null;
}

// ---- shared helpers (also used by sort.ts) ---------------------------------------------------

export const numelOf = (s: readonly number[]): number => s.reduce((a, b) => a * b, 1);
/** Element types by size: copies move bits, whatever the dtype. */
export const RAW: Record<number, string> = { 1: 'unsigned char', 2: 'unsigned short', 4: 'unsigned int', 8: 'unsigned long long', 16: 'uint4' };
export const indexCType = (d: DTypeName): string => (d === 'int64' ? 'long long' : 'int');
const MAX_ARGS = 64; // the driver's parameter block

/** Kernel parameters: each C declaration next to its driver argument type, so the two never drift apart. */
export class Params {
  readonly decl: string[] = [];
  readonly sig: ArgType[] = [];
  private add(t: ArgType, c: string, names: string[]): this {
    for (const n of names) { this.decl.push(`${c} ${n}`); this.sig.push(t); }
    return this;
  }
  /** Pointers that never alias another parameter. */
  ptr(ctype: string, ...names: string[]): this { return this.add('ptr', `${ctype}* __restrict__`, names); }
  /** Pointers that may share a buffer with another parameter (copies within one tensor). */
  alias(ctype: string, ...names: string[]): this { return this.add('ptr', `${ctype}*`, names); }
  i64(...names: string[]): this { return this.add('i64', 'long long', names); }
  i32(...names: string[]): this { return this.add('i32', 'int', names); }
  f64(...names: string[]): this { return this.add('f64', 'double', names); }
  /** nd dims: the size s{d}, then the stride {op}_st{d} of each operand. */
  dims(nd: number, ops: readonly string[]): this {
    for (let d = 0; d < nd; d++) this.i64(`s${d}`, ...ops.map((o) => `${o}_st${d}`));
    return this;
  }
  get text(): string { return this.decl.join(', '); }
  fits(): boolean { return this.sig.length <= MAX_ARGS; }
}

/** Argument values matching Params.dims. */
export function dimArgs(shape: readonly number[], strides: readonly (readonly number[])[]): number[] {
  const out: number[] = [];
  shape.forEach((s, d) => { out.push(s, ...strides.map((st) => st[d]!)); });
  return out;
}

/**
 * Code turning a linear position `lin` (row-major over dims s0..s{nd-1}) into element offsets: for each
 * operand o, `o_off += coord * o_st{d}` (the `o_off` variables must exist). With `coords`, coordinate d is
 * also stored in `coords[d]`. `I` is the division type (32-bit where the positions fit).
 */
export function decompose(nd: number, ops: readonly string[], I: string, lin: string, coords?: string): string {
  if (nd === 0) return '';
  const parts = [`${I} rem_ = (${I})(${lin});`];
  for (let d = nd - 1; d >= 0; d--) {
    const c = d === 0 ? 'rem_' : `rem_ % (${I})s${d}`;
    parts.push(`{ const ${I} c_ = ${c};${d > 0 ? ` rem_ /= (${I})s${d};` : ''} ${ops.map((o) => `${o}_off += (long long)c_ * ${o}_st${d};`).join(' ')}${coords ? ` ${coords}[${d}] = (long long)c_;` : ''} }`);
  }
  return parts.join('\n      ');
}

/** Grid-stride loop header over [0, n) with index type I. */
export const gridLoop = (I: string, v: string, n: string): string =>
  `for (${I} ${v} = (${I})blockIdx.x * blockDim.x + threadIdx.x; ${v} < (${I})(${n}); ${v} += (${I})gridDim.x * blockDim.x)`;

/** Correctly rounded double → half / bfloat16 (round to odd into float first, then to nearest even). */
export const ROUND_HELPERS = String.raw`
__device__ __forceinline__ float nbx_d2f_odd(double d) {
  float f = __double2float_rz(d);
  if ((double)f != d && !isnan(d)) f = __uint_as_float(__float_as_uint(f) | 1u);
  return f;
}
__device__ __forceinline__ unsigned short nbx_d2h(double d) { return nbx_f2h(nbx_d2f_odd(d)); }
__device__ __forceinline__ unsigned short nbx_d2bf(double d) { return nbx_f2bf(nbx_d2f_odd(d)); }
`;

// ---- index errors ----------------------------------------------------------------------------------

let errBuf: CudaBuffer | null = null;
/** The error word, cleared: kernels store ~pos of a failing position there through atomicMax (0: none). */
export function errWord(): bigint {
  if (!errBuf) errBuf = be.alloc('int64', 1);
  be.ctx.memsetD8(errBuf.ptr, 0, 8, be.stream);
  return errBuf.ptr;
}
/** The lowest failing position recorded since errWord(), or -1 (one 8-byte readback). */
export function errPos(): number {
  const v = (be.downloadSync(errBuf, 'int64', 0, 1) as BigInt64Array)[0]!;
  return v === 0n ? -1 : Number(~v);
}
export const RECORD_ERR = (pos: string): string => `atomicMax(err, ~(unsigned long long)(${pos}))`;

/** Element `pos` (row-major over r.shape) of a strided ref, read back as a number. */
export function elementAt(r: StridedRef, pos: number): number {
  let off = r.offset;
  for (let d = r.shape.length - 1; d >= 0; d--) {
    const s = r.shape[d]!;
    off += (pos % s) * r.strides[d]!;
    pos = Math.floor(pos / s);
  }
  return Number(be.downloadSync(r.buf, r.dtype, off, 1)[0]);
}

/** The CPU kernels' message for an index out of range. */
function outOfBounds(op: string, v: number, dim: number, size: number): never {
  throw new IndexError(op, `index ${v} is out of bounds for dimension ${dim} with size ${size}`);
}
/**
 * After a launch that checks `index` (one value per position): raise for the first failing position. With
 * rows moved as words of `f` elements, a recorded position is a word; its first element has the same index.
 */
function raiseIfBad(op: string, index: StridedRef, dim: number, size: number, f = 1): void {
  const pos = errPos();
  if (pos >= 0) outOfBounds(op, elementAt(index, pos * f), dim, size);
}

/** The index check as C: wraps a negative value when `wrap`, else records `pos` (if given) and runs `fail`. */
const checkIndex = (v: string, size: string, wrap: boolean, pos: string | null, fail: string): string =>
  `if (${v} < 0 || ${v} >= ${size}) { ${wrap ? `if (${v} < 0 && ${v} >= -${size}) ${v} += ${size}; else ` : ''}{ ${pos ? `${RECORD_ERR(pos)}; ` : ''}${fail} } }`;

// ---- copy_strided ----------------------------------------------------------------------------------

const BLOCK = 256;

export function copySource(isz: number, nd: number, idx32: boolean) {
  const T = RAW[isz]!, I = idx32 ? 'unsigned' : 'unsigned long long';
  const p = new Params().alias(T, 'dst').alias(`const ${T}`, 'src').i64('n', 'd0', 's0_').dims(nd, ['d', 's']);
  const src = `extern "C" __global__ void __launch_bounds__(${BLOCK}) copy_nd(${p.text}) {
  ${gridLoop(I, 'i', 'n')} {
    long long d_off = d0, s_off = s0_;
    ${decompose(nd, ['d', 's'], I, 'i')}
    dst[d_off] = src[s_off];
  }
}`;
  return { src, name: 'copy_nd', sig: p.sig };
}

/** A batched transpose through shared memory: reads along dim A (src-contiguous), writes along dim B (dst-contiguous). */
export function transposeSource(isz: number, nb: number) {
  const T = RAW[isz]!;
  const p = new Params().alias(T, 'dst').alias(`const ${T}`, 'src').i64('d0', 's0_', 'A', 'B', 'dsa', 'dsb', 'ssa', 'ssb', 'nbatch').dims(nb, ['d', 's']);
  const src = `extern "C" __global__ void __launch_bounds__(256) transpose(${p.text}) {
  __shared__ ${T} tile[32][33];
  const int tx = threadIdx.x & 31, ty = threadIdx.x >> 5;
  const long long ta = (A + 31) / 32, tb = (B + 31) / 32, total = nbatch * ta * tb;
  for (long long t = blockIdx.x; t < total; t += gridDim.x) {
    const long long bt = t / (ta * tb), rt = t % (ta * tb), ia = rt % ta, ib = rt / ta;
    (void)bt;
    long long d_off = d0, s_off = s0_;
    ${decompose(nb, ['d', 's'], 'long long', 'bt')}
    const long long a = ia * 32 + tx;
    for (int y = ty; y < 32; y += 8) { const long long b = ib * 32 + y; if (a < A && b < B) tile[y][tx] = src[s_off + a * ssa + b * ssb]; }
    __syncthreads();
    const long long b2 = ib * 32 + tx;
    for (int y = ty; y < 32; y += 8) { const long long a2 = ia * 32 + y; if (a2 < A && b2 < B) dst[d_off + a2 * dsa + b2 * dsb] = tile[tx][y]; }
    __syncthreads();
  }
}`;
  return { src, name: 'transpose', sig: p.sig };
}

interface CopyPlan { shape: number[]; ds: number[]; ss: number[]; doff: number; soff: number; isz: number }

/** An operand whose elements move as raw words: its strides (in elements), offset and base pointer. */
interface WideOperand { strides: number[]; offset: number; ptr: bigint }

/**
 * How many elements of `isz` bytes move as one word (up to 16 bytes) when the last dim is contiguous in every
 * data operand and constant (stride 0) in every `fixed` one (an index), and sizes, the data operands' other
 * strides, offsets and base pointers and the element counts in `extra` all divide by it. 1: no widening.
 */
export function widenFactor(isz: number, shape: readonly number[], data: WideOperand[], fixed: number[][], extra: number[] = []): number {
  const nd = shape.length;
  if (nd === 0 || data.some((o) => o.strides[nd - 1] !== 1) || fixed.some((st) => st[nd - 1] !== 0)) return 1;
  for (const w of [16, 8, 4, 2]) {
    if (w <= isz || w % isz) continue;
    const f = w / isz;
    if (shape[nd - 1]! % f || extra.some((e) => e % f)) continue;
    if (data.every((o) => o.offset % f === 0 && o.ptr % BigInt(w) === 0n && o.strides.every((s, d) => d === nd - 1 || s % f === 0))) return f;
  }
  return 1;
}
/** Strides in units of f-element words (the last dim, contiguous, keeps stride 1). */
const widenStrides = (st: number[], f: number): number[] => (f === 1 ? st : st.map((s, d) => (d === st.length - 1 ? 1 : s / f)));

function widen(c: CopyPlan, dptr: bigint, sptr: bigint): CopyPlan {
  const f = widenFactor(c.isz, c.shape, [{ strides: c.ds, offset: c.doff, ptr: dptr }, { strides: c.ss, offset: c.soff, ptr: sptr }], []);
  if (f === 1) return c;
  const nd = c.shape.length;
  return { shape: [...c.shape.slice(0, -1), c.shape[nd - 1]! / f], ds: widenStrides(c.ds, f), ss: widenStrides(c.ss, f), doff: c.doff / f, soff: c.soff / f, isz: c.isz * f };
}

/** dst[i] = src[i] for every index i of their (equal) shape; equal dtypes, raw bits. */
export function cudaCopyStrided(src: StridedRef, dst: StridedRef): void {
  const n = numelOf(dst.shape);
  if (n === 0) return;
  const isz = DTYPES[dst.dtype].itemsize;
  // The op layer casts first (as for the CPU kernel); bits are copied by element size, so sizes must agree.
  if (DTYPES[src.dtype].itemsize !== isz) throw new UnsupportedError('copy_strided', `cuda copy_strided copies one dtype, got ${src.dtype} into ${dst.dtype}`);
  const { shape, strides } = coalesce(dst.shape, [[...dst.strides], [...src.strides]]);
  copyPlanned({ shape, ds: strides[0]!, ss: strides[1]!, doff: dst.offset, soff: src.offset, isz }, ptr(dst), ptr(src));
}

function copyPlanned(c: CopyPlan, dptr: bigint, sptr: bigint): void {
  const n = numelOf(c.shape);
  const nd = c.shape.length;
  if (nd === 0 || (nd === 1 && c.ds[0] === 1 && c.ss[0] === 1)) {
    be.ctx.copyDtoD(dptr + BigInt(c.doff * c.isz), sptr + BigInt(c.soff * c.isz), n * c.isz, be.stream);
    return;
  }
  // Each side contiguous along a different dim (a transpose): tiles through shared memory, both sides coalesced.
  const a = c.ss.findIndex((s, d) => s === 1 && c.ds[d] !== 1 && c.shape[d]! >= 16);
  const b = c.ds.findIndex((s, d) => s === 1 && c.ss[d] !== 1 && c.shape[d]! >= 16);
  if (a >= 0 && b >= 0 && nd - 2 <= 12) {
    const rest = [...Array(nd).keys()].filter((d) => d !== a && d !== b);
    const k = be.kernel(`copy:tr:${c.isz}:${rest.length}`, () => transposeSource(c.isz, rest.length));
    const nbatch = numelOf(rest.map((d) => c.shape[d]!));
    const tiles = nbatch * Math.ceil(c.shape[a]! / 32) * Math.ceil(c.shape[b]! / 32);
    be.launch(k, Math.min(tiles, be.smCount * 16), 256, [dptr, sptr, c.doff, c.soff, c.shape[a]!, c.shape[b]!, c.ds[a]!, c.ds[b]!, c.ss[a]!, c.ss[b]!, nbatch,
      ...dimArgs(rest.map((d) => c.shape[d]!), [rest.map((d) => c.ds[d]!), rest.map((d) => c.ss[d]!)])]);
    return;
  }
  const w = widen(c, dptr, sptr);
  const wn = numelOf(w.shape);
  if (w.shape.length > 19) {
    // Beyond the parameter block: one launch per index of the outermost dim.
    for (let i = 0; i < w.shape[0]!; i++) {
      copyPlanned({ ...w, shape: w.shape.slice(1), ds: w.ds.slice(1), ss: w.ss.slice(1), doff: w.doff + i * w.ds[0]!, soff: w.soff + i * w.ss[0]! }, dptr, sptr);
    }
    return;
  }
  const reach = (st: number[], off: number): number => off + st.reduce((acc, s, d) => acc + Math.abs(s) * (w.shape[d]! - 1), 0);
  const idx32 = wn < 2 ** 32 && reach(w.ds, w.doff) < 2 ** 31 && reach(w.ss, w.soff) < 2 ** 31;
  const k = be.kernel(`copy:nd:${w.isz}:${w.shape.length}:${idx32}`, () => copySource(w.isz, w.shape.length, idx32));
  be.launch(k, be.gridFor(wn, BLOCK), BLOCK, [dptr, sptr, wn, w.doff, w.soff, ...dimArgs(w.shape, [w.ds, w.ss])]);
}

// ---- gather ----------------------------------------------------------------------------------------

export function gatherSource(isz: number, indexT: string, nd: number, wrap: boolean, idx32: boolean) {
  const T = RAW[isz]!, I = idx32 ? 'unsigned' : 'unsigned long long';
  const p = new Params().ptr(T, 'out').ptr(`const ${T}`, 'in').ptr(`const ${indexT}`, 'index').ptr('unsigned long long', 'err')
    .i64('n', 'size', 'dstride', 'o0', 'x0', 'i0').dims(nd, ['o', 'x', 'i']);
  const src = `extern "C" __global__ void __launch_bounds__(${BLOCK}) gather(${p.text}) {
  ${gridLoop(I, 'i', 'n')} {
    long long o_off = o0, x_off = x0, i_off = i0;
    ${decompose(nd, ['o', 'x', 'i'], I, 'i')}
    long long v = (long long)index[i_off];
    ${checkIndex('v', 'size', wrap, 'i', 'continue;')}
    out[o_off] = in[x_off + v * dstride];
  }
}`;
  return { src, name: 'gather', sig: p.sig };
}

/** out[p] = input[p with p[dim] := index[p]] (index values checked; `wrap` lets negatives count from the end). */
export function cudaGather(input: StridedRef, dim: number, index: StridedRef, out: StridedRef, op: string, wrap = false): void {
  const n = numelOf(index.shape);
  if (n === 0) return;
  const size = input.shape[dim] ?? 1, dstride = input.strides[dim] ?? 0;
  const inSt = input.strides.map((s, d) => (d === dim ? 0 : s));
  const { shape, strides } = coalesce(index.shape, [[...out.strides], inSt, [...index.strides]]);
  const nd = shape.length;
  if (nd > 12) throw new UnsupportedError(op, `cuda gather supports up to 12 dimensions after merging contiguous ones, got ${nd}`);
  // rows (embedding, index_select) move as wide words; the index is constant along them
  const f = widenFactor(DTYPES[input.dtype].itemsize, shape, [{ strides: strides[0]!, offset: out.offset, ptr: ptr(out) },
    { strides: strides[1]!, offset: input.offset, ptr: ptr(input) }], [strides[2]!], [dstride]);
  const isz = DTYPES[input.dtype].itemsize * f;
  const wshape = f === 1 ? shape : [...shape.slice(0, -1), shape[nd - 1]! / f];
  const wn = n / f;
  const idx32 = wn < 2 ** 32;
  const iT = indexCType(index.dtype);
  const k = be.kernel(`gather:${isz}:${iT}:${nd}:${wrap}:${idx32}`, () => gatherSource(isz, iT, nd, wrap, idx32));
  const err = errWord();
  be.launch(k, be.gridFor(wn, BLOCK), BLOCK, [ptr(out), ptr(input), ptr(index), err, wn, size, dstride / f, out.offset / f, input.offset / f, index.offset,
    ...dimArgs(wshape, [widenStrides(strides[0]!, f), widenStrides(strides[1]!, f), strides[2]!])]);
  raiseIfBad(op, index, dim, size, f);
}

// ---- scatter ---------------------------------------------------------------------------------------

const isIntDT = (d: DTypeName): boolean => DTYPES[d].kind === 'int' || d === 'bool';

/** How scatter reads, combines and stores values of dtype d: the CPU kernel's arithmetic, step by step. */
export function scatterArith(d: DTypeName, mode: ScatterMode) {
  const T = R.storageType(d);
  const isF = DTYPES[d].kind === 'float';
  const A = isF ? 'double' : 'long long';
  const load = (p: string, i: string): string => (isF ? `(double)${R.load(d, p, i)}` : `(long long)${p}[${i}]`);
  const store = (p: string, i: string, v: string): string => {
    switch (d) {
      case 'float16': return `${p}[${i}] = nbx_d2h(${v});`;
      case 'bfloat16': return `${p}[${i}] = nbx_d2bf(${v});`;
      case 'float32': return `${p}[${i}] = (float)(${v});`;
      case 'float64': return `${p}[${i}] = ${v};`;
      case 'bool': return `${p}[${i}] = (unsigned char)((${v}) != 0);`;
      default: return `${p}[${i}] = (${T})(${v});`; // two's-complement wrap, as the CPU's typed-array stores
    }
  };
  const u = 'unsigned long long';
  let combine: (c: string, v: string) => string;
  switch (mode) {
    case 'sum': case 'mean':
      combine = isF ? (c, v) => `__dadd_rn(${c}, ${v})` : d === 'bool' ? (c, v) => `(long long)(${c} != 0 || ${v} != 0)` : (c, v) => `(long long)((${u})${c} + (${u})${v})`;
      break;
    case 'prod':
      combine = isF ? (c, v) => `__dmul_rn(${c}, ${v})` : d === 'bool' ? (c, v) => `(long long)(${c} != 0 && ${v} != 0)`
        : d === 'int32' ? (c, v) => `(long long)(int)((unsigned)${c} * (unsigned)${v})` : (c, v) => `(long long)((${u})${c} * (${u})${v})`;
      break;
    case 'amax': combine = isF ? (c, v) => `(isnan(${v}) ? ${v} : (${c} < ${v} ? ${v} : ${c}))` : (c, v) => `(${v} > ${c} ? ${v} : ${c})`; break;
    case 'amin': combine = isF ? (c, v) => `(isnan(${v}) ? ${v} : (${c} > ${v} ? ${v} : ${c}))` : (c, v) => `(${v} < ${c} ? ${v} : ${c})`; break;
    default: combine = (_c, v) => v;
  }
  // alpha (sum only): float products in double; int32 as Math.imul; int64 wraps; bool is "both non-zero"
  const alpha = mode !== 'sum' ? '' : isF ? 'x = __dmul_rn(x, alpha);'
    : d === 'bool' ? 'x = (long long)(x != 0 && alphaI != 0);'
      : d === 'int32' ? 'x = (long long)(int)((unsigned)x * (unsigned)alphaI);' : `x = (long long)((${u})x * (${u})alphaI);`;
  // mean: divide by the count (floor division for integers)
  const divide = (c: string, cnt: string): string => (isF ? `__ddiv_rn(${c}, (double)${cnt})`
    : d === 'int64' ? `(${c} / ${cnt} - ((${c} % ${cnt} != 0 && ${c} < 0) ? 1 : 0))` : `(long long)floor((double)${c} / (double)${cnt})`);
  return { T, A, isF, load, store, combine, alpha, divide };
}

/** The identity of an integer reduction in dtype d (slots hit with include_self=False start from it). */
function intIdentity(d: DTypeName, mode: ScatterMode): string {
  if (mode === 'sum' || mode === 'mean') return '0';
  if (mode === 'prod') return '1';
  const info = DTYPES[d];
  if (d === 'int64') return mode === 'amax' ? '(-9223372036854775807LL - 1)' : '9223372036854775807LL';
  return String(mode === 'amax' ? info.min : info.max);
}

/**
 * The column kernel: thread c owns column c (every coordinate but `dim`) and applies its index positions in
 * order, so every output slot sees its writers in the CPU's order. `track`: per-slot contribution counts
 * (mean, include_self=False).
 */
export function scatterColumnSource(d: DTypeName, indexT: string, nd: number, mode: ScatterMode, includeSelf: boolean, wrap: boolean, idx32: boolean) {
  const I = idx32 ? 'unsigned' : 'unsigned long long';
  const track = !includeSelf || mode === 'mean';
  const raw = mode === 'none';
  const a = scatterArith(d, mode);
  const T = raw ? RAW[DTYPES[d].itemsize]! : a.T;
  const p = new Params().ptr(T, 'out').ptr(`const ${indexT}`, 'index').ptr(`const ${T}`, 'src').ptr('unsigned long long', 'err').ptr('int', 'counts')
    .i64('C', 'm', 'size', 'dstride', 'ooff', 'o0', 'i0', 's0_', 'istep', 'sstep', 'pstep').f64('alpha').i64('alphaI').dims(nd, ['o', 'i', 's', 'p']);
  const body = raw ? 'out[t] = src[s_off];' : `${a.A} x = ${a.load('src', 's_off')}; ${a.alpha}
      ${!includeSelf ? `if (cn == 0) { ${a.store('out', 't', 'x')} } else ` : ''}{ const ${a.A} c = ${a.load('out', 't')}; ${a.store('out', 't', a.combine('c', 'x'))} }`;
  const src = `${ROUND_HELPERS}
extern "C" __global__ void __launch_bounds__(${BLOCK}) scatter_col(${p.text}) {
  ${gridLoop(I, 'c', 'C')} {
    long long o_off = o0, i_off = i0, s_off = s0_, p_off = 0;
    ${decompose(nd, ['o', 'i', 's', 'p'], I, 'c')}
    for (long long j = 0; j < m; j++, i_off += istep, s_off += sstep, p_off += pstep) {
      long long v = (long long)index[i_off];
      ${checkIndex('v', 'size', wrap, 'p_off', 'break;')}
      const long long t = o_off + v * dstride;
      ${track ? 'const int cn = counts[t - ooff]; counts[t - ooff] = cn + 1;' : ''}
      ${body}
    }
  }
}`;
  return { src, name: 'scatter_col', sig: p.sig };
}

/**
 * The parallel passes (a thread per index position) for few long columns:
 *  'win'   records the last writer of each slot (atomicMax of position + 1), checking indices;
 *  'write' lets only that writer copy its value (overwrite: last write in index order wins);
 *  'count' counts contributions per slot, checking indices (integer mean / include_self=False);
 *  'atomic' combines integer values with a compare-and-swap loop (exact in any order).
 * `check`: this pass is the first, so it records out-of-range indices.
 */
export function scatterParallelSource(pass: 'win' | 'write' | 'count' | 'atomic', d: DTypeName, indexT: string, nd: number, mode: ScatterMode, wrap: boolean, check: boolean) {
  const a = scatterArith(d, mode);
  const T = pass === 'write' ? RAW[DTYPES[d].itemsize]! : a.T;
  const p = new Params().ptr(T, 'out').ptr(`const ${indexT}`, 'index').ptr(`const ${T}`, 'src').ptr('unsigned long long', 'err').ptr('unsigned', 'slots')
    .i64('n', 'size', 'dstride', 'ooff', 'o0', 'i0', 's0_').f64('alpha').i64('alphaI').dims(nd, ['o', 'i', 's']);
  let body: string;
  switch (pass) {
    case 'win': body = 'atomicMax(&slots[t - ooff], (unsigned)(i + 1));'; break;
    case 'write': body = 'if (slots[t - ooff] == (unsigned)(i + 1)) out[t] = src[s_off];'; break;
    case 'count': body = 'atomicAdd(&slots[t - ooff], 1u);'; break;
    default: body = `long long x = ${a.load('src', 's_off')}; ${a.alpha}
      nbx_atomic_combine(&out[t], x);`;
  }
  const src = `${pass === 'atomic' ? atomicCombineSource(d, mode) : ''}
extern "C" __global__ void __launch_bounds__(${BLOCK}) scatter_par(${p.text}) {
  ${gridLoop('unsigned', 'i', 'n')} {
    long long o_off = o0, i_off = i0, s_off = s0_;
    ${decompose(nd, ['o', 'i', 's'], 'unsigned', 'i')}
    long long v = (long long)index[i_off];
    ${checkIndex('v', 'size', wrap, check ? 'i' : null, 'continue;')}
    const long long t = o_off + v * dstride;
    ${body}
  }
}`;
  return { src, name: 'scatter_par', sig: p.sig };
}

/** A compare-and-swap update of one integer element (1/2-byte types through their aligned 32-bit word). */
function atomicCombineSource(d: DTypeName, mode: ScatterMode): string {
  const a = scatterArith(d, mode);
  const T = a.T, size = DTYPES[d].itemsize;
  const f = `(${T})(${a.combine('(long long)cur', 'x')})`;
  if (size === 8 || size === 4) {
    const W = size === 8 ? 'unsigned long long' : 'unsigned';
    return `__device__ __forceinline__ void nbx_atomic_combine(${T}* p, long long x) {
  ${W}* w = (${W}*)p; ${W} old = *w, assumed;
  do { assumed = old; const ${T} cur = *(const ${T}*)&assumed; const ${T} nv = ${f}; old = atomicCAS(w, assumed, *(const ${W}*)&nv); } while (old != assumed);
}`;
  }
  const mask = size === 1 ? '0xffu' : '0xffffu';
  return `__device__ __forceinline__ void nbx_atomic_combine(${T}* p, long long x) {
  const size_t addr = (size_t)p; unsigned* w = (unsigned*)(addr & ~(size_t)3); const unsigned sh = (unsigned)(addr & 3) * 8;
  unsigned old = *w, assumed;
  do {
    assumed = old; const ${T} cur = (${T})((assumed >> sh) & ${mask}); const ${T} nv = ${f};
    old = atomicCAS(w, assumed, (assumed & ~(${mask} << sh)) | ((((unsigned)nv) & ${mask}) << sh));
  } while (old != assumed);
}`;
}

/** Elementwise passes over the output slots: 'identity' (hit slots start from the reduction's identity) and 'mean'. */
export function scatterFinishSource(pass: 'identity' | 'mean', d: DTypeName, mode: ScatterMode, includeSelf: boolean) {
  const a = scatterArith(d, mode);
  const p = new Params().ptr(a.T, 'out').ptr('const int', 'counts').i64('n', 'ooff');
  const body = pass === 'identity' ? `if (counts[i] > 0) out[ooff + i] = (${a.T})${intIdentity(d, mode)};`
    : `const int cn = counts[i]${includeSelf ? ' + 1' : ''}; if (counts[i] > 0) { const ${a.A} c = ${a.load('out', 'ooff + i')}; ${a.store('out', 'ooff + i', a.divide('c', 'cn'))} }`;
  const src = `${ROUND_HELPERS}
extern "C" __global__ void __launch_bounds__(${BLOCK}) scatter_fin(${p.text}) {
  ${gridLoop('unsigned long long', 'i', 'n')} { ${body} }
}`;
  return { src, name: 'scatter_fin', sig: p.sig };
}

const contiguousStrides = (shape: readonly number[]): number[] => {
  const st: number[] = [];
  let acc = 1;
  for (let d = shape.length - 1; d >= 0; d--) { st[d] = acc; acc *= shape[d]!; }
  return st;
};
const isContiguous = (r: StridedRef): boolean => contiguousStrides(r.shape).every((s, d) => r.shape[d] === 1 || r.strides[d] === s);

/**
 * In-place scatter into `out` (a fresh contiguous tensor), as the CPU kernel: for every position p of `index`,
 * out[p with p[dim] := index[p]] combined with src[p] by `mode`, in index order.
 */
export function cudaScatter(out: StridedRef, dim: number, index: StridedRef, src: StridedRef, mode: ScatterMode, opts: ScatterOptions): void {
  // float16/bfloat16 reductions that PyTorch runs in float32 (see the CPU kernel): on float32 copies
  if (halfReducesInFloat(out, dim, index, mode, opts)) { scatterHalfInFloat(be, cudaScatter, out, dim, index, src, mode, opts); return; }
  const { op, includeSelf = true, wrap = false } = opts;
  const d = out.dtype;
  if (DTYPES[d].lanes !== 1 && mode !== 'none') throw new ValueError(op, `reduction '${mode}' is not supported for complex tensors`);
  if (mode !== 'none') be.checkDType(op, d);
  const n = numelOf(index.shape);
  if (n === 0) return;
  const size = out.shape[dim] ?? 1, dstride = out.strides[dim] ?? 0;
  const m = index.shape[dim] ?? 1, C = n / m;
  const track = !includeSelf || mode === 'mean';
  const contiguous = isContiguous(out);
  if (track && !contiguous) throw new UnsupportedError(op, 'cuda scatter with counts needs a contiguous output');
  const outN = numelOf(out.shape);
  const alphaF = mode === 'sum' ? Number(opts.alpha ?? 1) : 1;
  const alphaI = mode === 'sum' ? BigInt.asIntN(64, BigInt(typeof opts.alpha === 'number' ? Math.trunc(opts.alpha) : opts.alpha ?? 1)) : 1n;
  const iT = indexCType(index.dtype);
  const err = errWord();
  // Few long columns: the parallel passes (overwrite, or integer reductions), else the ordered column kernel.
  const parallel = contiguous && C < 2048 && m >= 32 && n < 2 ** 32 - 1 && outN < 2 ** 32 && (mode === 'none' || isIntDT(d));
  if (parallel) {
    const outSt = out.strides.map((s, k) => (k === dim ? 0 : s));
    const { shape, strides } = coalesce(index.shape, [outSt, [...index.strides], [...src.strides]]);
    const nd = shape.length;
    if (nd > 12) throw new UnsupportedError(op, `cuda scatter supports up to 12 dimensions after merging contiguous ones, got ${nd}`);
    const slots = be.alloc('int32', outN, true);
    const run = (pass: 'win' | 'write' | 'count' | 'atomic', check: boolean): void => {
      const k = be.kernel(`scatter:par:${pass}:${d}:${iT}:${nd}:${mode}:${wrap}:${check}`, () => scatterParallelSource(pass, d, iT, nd, mode, wrap, check));
      be.launch(k, be.gridFor(n, BLOCK), BLOCK, [ptr(out), ptr(index), ptr(src), err, slots.ptr, n, size, dstride, out.offset, out.offset, index.offset, src.offset,
        alphaF, alphaI, ...dimArgs(shape, strides)]);
    };
    if (mode === 'none') { run('win', true); run('write', false); } else {
      if (track) run('count', true);
      if (!includeSelf) finish('identity', d, mode, includeSelf, out, slots, outN);
      run('atomic', !track);
      if (mode === 'mean') finish('mean', d, mode, includeSelf, out, slots, outN);
    }
    be.free(slots);
  } else {
    const others = [...Array(index.shape.length).keys()].filter((k) => k !== dim);
    const pos = contiguousStrides(index.shape);
    const sub = (st: readonly number[]): number[] => others.map((k) => st[k]!);
    const { shape, strides } = coalesce(sub(index.shape), [sub(out.strides), sub(index.strides), sub(src.strides), sub(pos)]);
    const nd = shape.length;
    if (nd > 9) throw new UnsupportedError(op, `cuda scatter supports up to 9 dimensions besides 'dim' after merging contiguous ones, got ${nd}`);
    const cnt = track ? be.alloc('int32', outN, true) : null;
    // overwriting rows (index_put, index_copy): wide words where rows are contiguous and the index constant along them
    const istep = index.strides[dim] ?? 0, sstep = src.strides[dim] ?? 0;
    const f = mode !== 'none' ? 1 : widenFactor(DTYPES[d].itemsize, shape, [{ strides: strides[0]!, offset: out.offset, ptr: ptr(out) },
      { strides: strides[2]!, offset: src.offset, ptr: ptr(src) }], [strides[1]!], [dstride, sstep]);
    const wshape = f === 1 ? shape : [...shape.slice(0, -1), shape[nd - 1]! / f];
    const wst = f === 1 ? strides : [widenStrides(strides[0]!, f), strides[1]!, widenStrides(strides[2]!, f), strides[3]!.map((s, k) => (k === nd - 1 ? s * f : s))];
    const dt: DTypeName = f === 1 ? d : (({ 2: 'int16', 4: 'int32', 8: 'int64', 16: 'complex128' } as Record<number, DTypeName>)[DTYPES[d].itemsize * f]!);
    const wC = C / f;
    const idx32 = wC < 2 ** 32;
    const k = be.kernel(`scatter:col:${dt}:${iT}:${nd}:${mode}:${includeSelf}:${wrap}:${idx32}`, () => scatterColumnSource(dt, iT, nd, mode, includeSelf, wrap, idx32));
    be.launch(k, be.gridFor(wC, BLOCK), BLOCK, [ptr(out), ptr(index), ptr(src), err, cnt?.ptr ?? 0n, wC, m, size, dstride / f, out.offset / f, out.offset / f,
      index.offset, src.offset / f, istep, sstep / f, pos[dim] ?? 0, alphaF, alphaI, ...dimArgs(wshape, wst)]);
    if (mode === 'mean') finish('mean', d, mode, includeSelf, out, cnt!, outN);
    if (cnt) be.free(cnt);
  }
  raiseIfBad(op, index, dim, size);
}

function finish(pass: 'identity' | 'mean', d: DTypeName, mode: ScatterMode, includeSelf: boolean, out: StridedRef, counts: CudaBuffer, outN: number): void {
  const k = be.kernel(`scatter:fin:${pass}:${d}:${mode}:${includeSelf}`, () => scatterFinishSource(pass, d, mode, includeSelf));
  be.launch(k, be.gridFor(outN, BLOCK), BLOCK, [ptr(out), counts.ptr, outN, out.offset]);
}

// ---- linear_index ----------------------------------------------------------------------------------

export function linearIndexSource(indexTs: string[], nd: number) {
  const K = indexTs.length;
  const ops = ['o', ...indexTs.map((_, q) => `x${q}`)];
  const p = new Params().ptr('long long', 'out');
  indexTs.forEach((t, q) => p.ptr(`const ${t}`, `in${q}`));
  p.ptr('unsigned long long', 'err').i64('n', 'o0', ...indexTs.flatMap((_, q) => [`x${q}0`, `size${q}`, `mult${q}`])).dims(nd, ops);
  const src = `extern "C" __global__ void __launch_bounds__(${BLOCK}) linear_index(${p.text}) {
  ${gridLoop('unsigned long long', 'i', 'n')} {
    long long o_off = o0${indexTs.map((_, q) => `, x${q}_off = x${q}0`).join('')};
    ${decompose(nd, ops, 'unsigned long long', 'i')}
    long long lin = 0; bool bad = false;
    ${[...Array(K).keys()].map((q) => `{ long long v = (long long)in${q}[x${q}_off]; if (v < 0) v += size${q}; if (v < 0 || v >= size${q}) bad = true; lin += v * mult${q}; }`).join('\n    ')}
    if (bad) { ${RECORD_ERR('i')}; continue; }
    out[o_off] = lin;
  }
}`;
  return { src, name: 'linear_index', sig: p.sig };
}

/** out[p] = sum_k wrap(indices[k][p]) * prod(sizes[k+1:]), negative indices from the end; out-of-range raises. */
export function cudaLinearIndex(indices: StridedRef[], sizes: number[], out: StridedRef, op: string, dims: number[]): void {
  const n = numelOf(out.shape);
  if (n === 0) return;
  const mult = sizes.map((_, k) => numelOf(sizes.slice(k + 1)));
  const { shape, strides } = coalesce(out.shape, [[...out.strides], ...indices.map((r) => [...r.strides])]);
  const nd = shape.length;
  const ts = indices.map((r) => indexCType(r.dtype));
  const k = be.kernel(`linidx:${ts.join(',')}:${nd}`, () => linearIndexSource(ts, nd));
  if (k.argTypes.length > MAX_ARGS) throw new UnsupportedError(op, `cuda advanced indexing: too many index tensors or dimensions (${indices.length} indices, ${nd} dims)`);
  const err = errWord();
  be.launch(k, be.gridFor(n, BLOCK), BLOCK, [ptr(out), ...indices.map(ptr), err, n, out.offset, ...indices.flatMap((r, q) => [r.offset, sizes[q]!, mult[q]!]),
    ...dimArgs(shape, strides)]);
  const pos = errPos();
  if (pos < 0) return;
  // The CPU checks the indices of a position in order: report the first one out of range.
  for (let q = 0; q < indices.length; q++) {
    const v = elementAt({ ...indices[q]!, shape: out.shape, strides: indices[q]!.strides }, pos);
    if (!(v >= -sizes[q]! && v < sizes[q]!)) outOfBounds(op, v, dims[q]!, sizes[q]!);
  }
}

// ---- stream compaction: nonzero, masked_select, masked_scatter (and unique's grouping) ----------------

/**
 * A data-dependent selection over positions i in [0, n) (row-major): `flag` says whether position i is
 * selected; `emit` runs for selected positions with `pos` = how many selected positions precede it;
 * `all` (optional) runs for every position with `excl` (that count) and `f` (the flag). `pre` computes
 * locals from i by index arithmetic only (it also runs for positions past the end); loads go in `flag`,
 * `emit` and `all`. The kernels process each block's chunk in order, so positions come out row-major.
 */
export interface Compaction { key: string; params: Params; pre: string; flag: string; emit: string; all?: string; helpers?: string }

export function compactionSources(c: Compaction) {
  const cntP = new Params().ptr('long long', 'bcount').i64('n', 'chunk');
  const emitP = new Params().ptr('const long long', 'boff').i64('n', 'chunk');
  cntP.decl.push(...c.params.decl); cntP.sig.push(...c.params.sig);
  emitP.decl.push(...c.params.decl); emitP.sig.push(...c.params.sig);
  const count = `${c.helpers ?? ''}
extern "C" __global__ void __launch_bounds__(${BLOCK}) sel_count(${cntP.text}) {
  __shared__ long long ws[${BLOCK / 32}];
  const long long start = (long long)blockIdx.x * chunk, end = min(start + chunk, n);
  long long cnt = 0;
  for (long long i = start + threadIdx.x; i < end; i += blockDim.x) { ${c.pre} if (${c.flag}) cnt++; }
  #pragma unroll
  for (int o = 16; o > 0; o >>= 1) cnt += __shfl_xor_sync(0xffffffffu, cnt, o);
  if ((threadIdx.x & 31) == 0) ws[threadIdx.x >> 5] = cnt;
  __syncthreads();
  if (threadIdx.x == 0) { long long s = 0; for (int w = 0; w < ${BLOCK / 32}; w++) s += ws[w]; bcount[blockIdx.x] = s; }
}`;
  const emit = `${c.helpers ?? ''}
extern "C" __global__ void __launch_bounds__(${BLOCK}) sel_emit(${emitP.text}) {
  __shared__ int ws[${BLOCK / 32}];
  const long long start = (long long)blockIdx.x * chunk, end = min(start + chunk, n);
  long long base = boff[blockIdx.x];
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  for (long long t0 = start; t0 < end; t0 += blockDim.x) {
    const long long i = t0 + threadIdx.x;
    const bool in_ = i < end;
    ${c.pre}
    const bool f = in_ && (${c.flag});
    const unsigned bal = __ballot_sync(0xffffffffu, f);
    if (lane == 0) ws[warp] = __popc(bal);
    __syncthreads();
    int before = 0, total = 0;
    for (int w = 0; w < ${BLOCK / 32}; w++) { const int s = ws[w]; before += w < warp ? s : 0; total += s; }
    const long long excl = base + before + __popc(bal & ((1u << lane) - 1u));
    if (in_) {
      ${c.all ?? ''}
      if (f) { const long long pos = excl; ${c.emit} }
    }
    base += total;
    __syncthreads();
  }
}`;
  return { count: { src: count, name: 'sel_count', sig: cntP.sig }, emit: { src: emit, name: 'sel_emit', sig: emitP.sig } };
}

/** Exclusive scan of the per-block counts in one block; off[B] gets the total. */
const BLOCK_SCAN = {
  src: `extern "C" __global__ void __launch_bounds__(1024) block_scan(const long long* __restrict__ cnt, long long* __restrict__ off, int B) {
  __shared__ long long ws[32];
  __shared__ long long carry;
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  if (threadIdx.x == 0) carry = 0;
  __syncthreads();
  for (int b0 = 0; b0 < B; b0 += 1024) {
    const int b = b0 + threadIdx.x;
    const long long v = b < B ? cnt[b] : 0;
    long long x = v;
    #pragma unroll
    for (int o = 1; o < 32; o <<= 1) { const long long y = __shfl_up_sync(0xffffffffu, x, o); if (lane >= o) x += y; }
    if (lane == 31) ws[warp] = x;
    __syncthreads();
    if (warp == 0) {
      long long s = ws[lane];
      #pragma unroll
      for (int o = 1; o < 32; o <<= 1) { const long long y = __shfl_up_sync(0xffffffffu, s, o); if (lane >= o) s += y; }
      ws[lane] = s;
    }
    __syncthreads();
    const long long incl = x + (warp > 0 ? ws[warp - 1] : 0);
    if (b < B) off[b] = carry + incl - v;
    __syncthreads();
    if (threadIdx.x == 1023) carry += incl;
    __syncthreads();
  }
  if (threadIdx.x == 0) off[B] = carry;
}`,
  name: 'block_scan', sig: ['ptr', 'ptr', 'i32'] as ArgType[],
};
export const blockScanSource = (): typeof BLOCK_SCAN => BLOCK_SCAN;

/**
 * Runs a compaction over n positions with the spec's extra arguments; returns the device buffer whose
 * element [B] (returned index) holds the total count (the caller frees it).
 */
export function runCompaction(c: Compaction, n: number, args: KernelArg[]): { offsets: CudaBuffer; totalAt: number } {
  const B = Math.max(1, Math.min(Math.ceil(n / BLOCK), be.smCount * 16));
  const chunk = Math.ceil(n / B / BLOCK) * BLOCK;
  const blocks = Math.max(1, Math.ceil(n / chunk));
  const srcs = (): ReturnType<typeof compactionSources> => compactionSources(c);
  const kc = be.kernel(`sel:count:${c.key}`, () => srcs().count);
  const ke = be.kernel(`sel:emit:${c.key}`, () => srcs().emit);
  const ks = be.kernel('sel:scan', blockScanSource);
  const counts = be.alloc('int64', blocks), offsets = be.alloc('int64', blocks + 1);
  be.launch(kc, blocks, BLOCK, [counts.ptr, n, chunk, ...args]);
  be.launch(ks, 1, 1024, [counts.ptr, offsets.ptr, blocks]);
  be.launch(ke, blocks, BLOCK, [offsets.ptr, n, chunk, ...args]);
  be.free(counts);
  return { offsets, totalAt: blocks };
}

/** Whether storage element i of dtype d is non-zero (NaN is; -0.0 is not), as C. */
export function nonzeroTest(d: DTypeName, p: string, i: string): string {
  switch (d) {
    case 'float16': case 'bfloat16': return `((${p}[${i}] & 0x7fff) != 0)`;
    case 'float8_e4m3fn': case 'float8_e5m2': return `((${p}[${i}] & 0x7f) != 0)`;
    case 'complex64': case 'complex128': return `(${p}[${i}].x != 0 || ${p}[${i}].y != 0)`;
    default: return `(${p}[${i}] != 0)`;
  }
}
const storageT = (d: DTypeName): string => ({ complex64: 'float2', complex128: 'double2' } as Record<string, string>)[d] ?? R.storageType(d);

/** Coordinates of the non-zero elements of `input`, row-major, into out [count, ndim] (int64). */
export function cudaNonzero(input: StridedRef, out: StridedRef): void {
  const nd = input.shape.length, n = numelOf(input.shape);
  if (nd === 0 || n === 0) return;
  if (nd > 16) throw new UnsupportedError('nonzero', `cuda nonzero supports up to 16 dimensions, got ${nd}`);
  const T = storageT(input.dtype);
  const params = new Params().ptr(`const ${T}`, 'x').ptr('long long', 'out').i64('x0', 'o0').dims(nd, ['x']);
  const spec: Compaction = {
    key: `nonzero:${input.dtype}:${nd}`, params,
    pre: `long long x_off = x0; ${decompose(nd, ['x'], 'unsigned long long', 'i')}`,
    flag: nonzeroTest(input.dtype, 'x', 'x_off'),
    emit: `long long cc[${nd}]; { ${decompose(nd, [], 'unsigned long long', 'i', 'cc')} }
      ${[...Array(nd).keys()].map((q) => `out[o0 + pos * ${nd} + ${q}] = cc[${q}];`).join(' ')}`,
  };
  const { offsets } = runCompaction(spec, n, [ptr(input), ptr(out), input.offset, out.offset, ...dimArgs(input.shape, [input.strides])]);
  be.free(offsets);
}

/** Elements of `input` where `mask` (same shape, broadcast strides) is set, row-major, into 1-D `out`. */
export function cudaMaskedSelect(input: StridedRef, mask: StridedRef, out: StridedRef): void {
  const n = numelOf(input.shape);
  if (n === 0) return;
  const { shape, strides } = coalesce(input.shape, [[...input.strides], [...mask.strides]]);
  const nd = shape.length;
  if (nd > 16) throw new UnsupportedError('masked_select', `cuda masked_select supports up to 16 dimensions, got ${nd}`);
  const isz = DTYPES[input.dtype].itemsize, T = RAW[isz]!;
  const params = new Params().ptr(`const ${T}`, 'x').ptr('const unsigned char', 'mk').ptr(T, 'out').i64('x0', 'm0', 'o0').dims(nd, ['x', 'm']);
  const spec: Compaction = {
    key: `mselect:${isz}:${nd}`, params,
    pre: `long long x_off = x0, m_off = m0; ${decompose(nd, ['x', 'm'], 'unsigned long long', 'i')}`,
    flag: 'mk[m_off] != 0',
    emit: 'out[o0 + pos] = x[x_off];',
  };
  const { offsets } = runCompaction(spec, n, [ptr(input), ptr(mask), ptr(out), input.offset, mask.offset, out.offset, ...dimArgs(shape, strides)]);
  be.free(offsets);
}

/** Writes consecutive elements of contiguous `source` into `out` where `mask` is set (row-major). */
export function cudaMaskedScatter(out: StridedRef, mask: StridedRef, source: StridedRef): void {
  const n = numelOf(out.shape);
  if (n === 0) return;
  const { shape, strides } = coalesce(out.shape, [[...out.strides], [...mask.strides]]);
  const nd = shape.length;
  if (nd > 16) throw new UnsupportedError('masked_scatter', `cuda masked_scatter supports up to 16 dimensions, got ${nd}`);
  const isz = DTYPES[out.dtype].itemsize, T = RAW[isz]!;
  const params = new Params().ptr(T, 'out').ptr('const unsigned char', 'mk').ptr(`const ${T}`, 'srcp').i64('o0', 'm0', 's0_').dims(nd, ['o', 'm']);
  const spec: Compaction = {
    key: `mscatter:${isz}:${nd}`, params,
    pre: `long long o_off = o0, m_off = m0; ${decompose(nd, ['o', 'm'], 'unsigned long long', 'i')}`,
    flag: 'mk[m_off] != 0',
    emit: 'out[o_off] = srcp[s0_ + pos];',
  };
  const { offsets } = runCompaction(spec, n, [ptr(out), ptr(mask), ptr(source), out.offset, mask.offset, source.offset, ...dimArgs(shape, strides)]);
  be.free(offsets);
}
