// CUDA kernels for the indexing family, with the CPU kernels' signatures and semantics
// (contract: src/kernels/indexing.ts; the strided copy is in copy.ts):
//   gather          one thread per output element.
//   scatter         deterministic, bit-identical to the CPU: each output slot is written only by the index
//                   positions of one "column" (all coordinates but `dim`), so a thread per column applies
//                   them in index order. With few long columns: last-writer-wins through an atomicMax on the
//                   writer's position (overwrite), integer reductions through atomics (exact in any order).
//   linear_index, nonzero, masked_select, masked_scatter: elementwise, or a three-kernel stream compaction
//                   (per-block counts, one-block scan, ordered emit) for the data-dependent outputs.
// Index errors: kernels record the first failing position in a device word (atomicMax of ~pos); the
// launcher reads it back (8 bytes) and raises the CPU kernel's IndexError with the offending value.
// Gathers and scatters move raw bits (elements as 1/2/4/8/16-byte words), so every dtype, complex included, works.

import { DTYPES, type DTypeName } from '../../../dtype/dtypes.js';
import type { StridedRef } from '../../backend.js';
import type { BackendKernels } from '../../../kernels/table.js';
import { coalesce, numelOf } from '../../../tensor/shape.js';
import { R, type CudaBackend, type CudaBuffer } from '../runtime/backend.js';
import { IndexError, UnsupportedError, ValueError } from '../../../errors.js';
import { halfReducesInFloat, scatterHalfInFloat, type ScatterMode, type ScatterOptions } from '../../../kernels/indexing.js';
import { runCompaction, type Compaction } from './compaction.js';
import { MAX_ARGS, Params, RAW, basePtr as ptr, decompose, dimArgs, gridLoop, indexCType, widenFactor, widenStrides } from './util.js';

let be: CudaBackend;
export const kernels = {
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

const BLOCK = 256;

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
  // in a CUDA graph capture: the graph's word, zeroed once at the start of every replay
  if (be.capture !== null) return be.capture.errBuf.ptr;
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
  if (be.capture !== null) { be.capture.defer(op); return; } // answered after a replay (CUDAGraph.checkErrors)
  const pos = errPos();
  if (pos >= 0) outOfBounds(op, elementAt(index, pos * f), dim, size);
}

/** The index check as C: wraps a negative value when `wrap`, else records `pos` (if given) and runs `fail`. */
const checkIndex = (v: string, size: string, wrap: boolean, pos: string | null, fail: string): string =>
  `if (${v} < 0 || ${v} >= ${size}) { ${wrap ? `if (${v} < 0 && ${v} >= -${size}) ${v} += ${size}; else ` : ''}{ ${pos ? `${RECORD_ERR(pos)}; ` : ''}${fail} } }`;

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
  if (be.capture !== null) { be.capture.defer(op); return; }
  const pos = errPos();
  if (pos < 0) return;
  // The CPU checks the indices of a position in order: report the first one out of range.
  for (let q = 0; q < indices.length; q++) {
    const v = elementAt({ ...indices[q]!, shape: out.shape, strides: indices[q]!.strides }, pos);
    if (!(v >= -sizes[q]! && v < sizes[q]!)) outOfBounds(op, v, dims[q]!, sizes[q]!);
  }
}

// ---- stream compaction (compaction.ts): nonzero, masked_select, masked_scatter --------------------------

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
  const { offsets } = runCompaction(be, spec, n, [ptr(input), ptr(out), input.offset, out.offset, ...dimArgs(input.shape, [input.strides])]);
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
  const { offsets } = runCompaction(be, spec, n, [ptr(input), ptr(mask), ptr(out), input.offset, mask.offset, out.offset, ...dimArgs(shape, strides)]);
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
  const { offsets } = runCompaction(be, spec, n, [ptr(out), ptr(mask), ptr(source), out.offset, mask.offset, source.offset, ...dimArgs(shape, strides)]);
  be.free(offsets);
}
