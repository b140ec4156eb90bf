// CUDA reductions: the 'reduce' kernel, with the contract in src/kernels/reduce.ts.
// The operand is [rows, n]: element (r, j) at off + r*rowStride + j*colStride, reduced along j.
//   rows     the simple kinds (sum/mean/prod/max/min/any/all/count_nonzero/norm) in every layout but
//            the one below: a power-of-two group of threads per row (several rows per block when rows
//            are short), `unroll` loads in flight per thread (16-byte vectors when the row is
//            contiguous and aligned). Few long rows (a full reduction) split into S interleaved
//            slices per row, a block each, so every SM streams; the last block of a row to finish
//            combines the row's partials (same launch).
//   cols     the simple kinds with the kept dim contiguous (rowStride 1: a sum over dim 0): 2-D blocks,
//            TX threads along the columns each reading V adjacent columns (coalesced; vectors when
//            aligned) times TY thread rows splitting the reduced dim, `unroll` loads in flight; few
//            column blocks also split the reduced dim over grid rows, whose partials the last block
//            of each column band combines.
//   general  argmax/argmin, values+indices, var, logsumexp: a block per row, or one thread per column
//            (sequential along the reduced dim) for the contiguous-kept layout with many columns.
// Floats accumulate in double, integers in long long (int64 wraps as PyTorch's). Sums of float32,
// float16 and bfloat16 add a vector's (or the unrolled loads') few elements in float before adding
// them to the double accumulator: one conversion to double per vector instead of per element.
// Every combination order depends only on the shape, the dtypes, the SM count, the kernel's register
// count and the launch configuration, never on timing (which block finishes last does not matter):
// results are identical run to run.

import { DTYPES, type DTypeName } from '../../../dtype/dtypes.js';
import type { StridedRef } from '../../backend.js';
import type { BackendKernels } from '../../../kernels/table.js';
import { R, unpack, type CudaBackend, type CudaBuffer } from '../runtime/backend.js';
import type { ArgType, CudaKernel } from '../runtime/driver.js';
import { REDUCE_SPACE, REDUCE_ROWS_SPACE, REDUCE_COLS_SPACE } from '../tuning/spaces.js';
import { bucketSize, type Config } from '../../../autotune/index.js';
import type { ReduceKind, RowLayout, ScanKind } from '../../../kernels/reduce.js';
import { basePtr as ptr } from './util.js';
import { GraphCaptureError } from '../../../errors.js';

let be: CudaBackend;
export const kernels = {
  reduce: cudaReduce,
  scan: cudaScan,
} satisfies BackendKernels;

/** Points this family's kernels at the backend (called once, when the backend starts). */
export function bind(backend: CudaBackend): void {
  be = backend;
  counters = null;
}


/** Kinds the rows/cols kernels cover: a per-element enter, an associative merge and a final step. */
const SIMPLE = new Set<ReduceKind>(['sum', 'mean', 'prod', 'max', 'min', 'any', 'all', 'count_nonzero', 'norm']);
/** Unroll depths every sweep module holds (the `unroll` knob of both spaces). */
const UNROLLS = [1, 2, 4] as const;

const isFloatD = (d: DTypeName): boolean => DTYPES[d].kind === 'float';
const accOf = (d: DTypeName): string => (isFloatD(d) ? 'double' : 'long long');
/** The dtype a partial (an accumulator written between passes) is stored in. */
const partDType = (d: DTypeName): DTypeName => (isFloatD(d) ? 'float64' : 'int64');

/**
 * Per kind: accumulator init (`x0`: the row's first element, for idempotent merges), how a raw element
 * enters, how two accumulators (or partials) merge, the final value.
 */
function reduceParts(kind: ReduceKind, isF: boolean): { init: string; enter: string; merge: string; final: string } {
  switch (kind) {
    case 'sum': case 'mean': return { init: '0', enter: 'x', merge: 'a + b', final: kind === 'mean' ? 'a / nf' : 'a' };
    case 'prod': return { init: '1', enter: 'x', merge: 'a * b', final: 'a' };
    case 'max': case 'min': {
      const op = kind === 'max' ? '>' : '<';
      return { init: 'x0', enter: 'x', merge: `(${isF ? 'isnan(a) ? a : isnan(b) ? b : ' : ''}(b ${op} a ? b : a))`, final: 'a' };
    }
    case 'any': return { init: '0', enter: '(x != 0)', merge: '(a != 0 || b != 0)', final: 'a' };
    case 'all': return { init: '1', enter: '(x != 0)', merge: '(a != 0 && b != 0)', final: 'a' };
    case 'count_nonzero': return { init: '0', enter: '(x != 0)', merge: 'a + b', final: 'a' };
    // p = ±inf: max/min of |x| with NaN sticking (the prelude's NORM_MERGE drops a NaN accumulator)
    case 'norm': return {
      init: 'NORM_INIT', enter: 'NORM_ENTER(x)', final: 'NORM_FINAL(a)',
      merge: '(isinf(p) ? (isnan(a) ? a : (isnan(b) || (p > 0 ? b > a : b < a)) ? b : a) : a + b)',
    };
    default: throw new Error(`reduceParts: ${kind} runs in the general kernels`);
  }
}

/** The statement folding value `v` into accumulator `acc`. */
function stepCode(A: string, P: { enter: string; merge: string }, acc: string, v: string): string {
  return `{ const ${A} x = ${v}; const ${A} b = ${P.enter}; const ${A} a = ${acc}; ${acc} = ${P.merge}; }`;
}

/** Sums of these dtypes pre-add a few elements in float (see the header). */
const presums = (kind: ReduceKind, inD: DTypeName): boolean =>
  (kind === 'sum' || kind === 'mean') && (inD === 'float32' || inD === 'float16' || inD === 'bfloat16');

/** Pairwise float sum of the expressions (a fixed tree). */
function floatTree(xs: string[]): string {
  if (xs.length === 1) return `(float)${xs[0]}`;
  const h = xs.length >> 1;
  return `(${floatTree(xs.slice(0, h))} + ${floatTree(xs.slice(h))})`;
}

const final = (outD: DTypeName, isF: boolean, idx: string, v: string): string =>
  R.store(outD, 'out', idx, outD === 'int64' ? `(long long)(${v})` : R.castExpr(isF ? 'float64' : 'int64', outD, v));

// ---- rows: a thread group per (row, slice) -------------------------------------------------------

export const ROWS_SIG: ArgType[] = ['ptr', 'ptr', 'ptr', 'ptr', 'i64', 'i64', 'i64', 'i64', 'i64', 'i64', 'i32', 'i32', 'f64', 'f64'];

/**
 * One rows kernel, unrolled U deep. Work item w = r*S + s (row r, slice s) goes to a group of gs
 * threads (a power of two; blockDim / gs groups per block); thread g of the group reads the loads
 * s*gs + g + k*S*gs, k = 0, 1, ... (16-byte vectors when the row is contiguous and aligned, then the
 * scalar rest). The group combines by warp shuffles and, above a warp, shared memory. S = 1: the
 * final value goes to out[ooff + r]. S > 1 (gs = blockDim: a block per slice): the partial goes to
 * tmp[w], and the row's last block to finish (counted in cnt[r], reset to 0 after) combines the
 * row's S partials in slice order: one launch, and the order does not depend on which block is last.
 * Args: in, out, tmp, cnt, items, n, rs, cs, off, ooff, S, gs, p, nf (the element count `mean` divides by).
 */
export function rowsKernel(kind: ReduceKind, inD: DTypeName, outD: DTypeName, U: number, name: string): string {
  const isF = isFloatD(inD), A = accOf(inD), IN = R.storageType(inD), OUT = R.storageType(outD);
  const P = reduceParts(kind, isF);
  const VEC = 16 / DTYPES[inD].itemsize;
  const load = (idx: string): string => `((${A})${R.load(inD, 'in', idx)})`;
  const init = P.init === 'x0' ? `(live ? ${load('base')} : (${A})0)` : P.init;
  const step = (v: string): string => stepCode(A, P, 'acc', v);
  const us = [...Array(U).keys()];
  const vstep = (w: string): string => {
    const e = `e_${w}`, els = [...Array(VEC).keys()].map((k) => R.load(inD, e, String(k)));
    const decl = `const ${IN} ${e}[${VEC}] = { ${unpack(inD, w, VEC)} };`;
    if (presums(kind, inD)) return `{ ${decl} const float t = ${floatTree(els)}; acc = acc + (${A})t; }`;
    return `{ ${decl} ${els.map((x) => step(`((${A})${x})`)).join(' ')} }`;
  };
  const merge = (v: string): string => `{ const ${A} a = acc; const ${A} b = ${v}; acc = ${P.merge}; }`;
  // the group's combination (fixed tree); thread g == 0 ends with the group's value
  const groupReduce = `#pragma unroll
    for (int o = 16; o > 0; o >>= 1) if (o < gs) ${merge(`__shfl_down_sync(0xffffffffu, acc, o)`)}
    if (gs > 32) {
      if ((threadIdx.x & 31) == 0) shr[threadIdx.x >> 5] = acc;
      __syncthreads();
      if (g < 32) {
        acc = g < wpg ? shr[grp * wpg + g] : ${P.init === 'x0' ? 'shr[grp * wpg]' : P.init};
        #pragma unroll
        for (int o = 16; o > 0; o >>= 1) ${merge(`__shfl_down_sync(0xffffffffu, acc, o)`)}
      }
      __syncthreads();
    }`;
  return `extern "C" __global__ void __launch_bounds__(1024) ${name}(const ${IN}* __restrict__ in, ${OUT}* __restrict__ out, ${A}* __restrict__ tmp,
  unsigned* __restrict__ cnt, long long items, long long n, long long rs, long long cs, long long off, long long ooff, int S, int gs, double p, double nf) {
  __shared__ ${A} shr[32];
  __shared__ int last;
  const int g = threadIdx.x & (gs - 1), grp = threadIdx.x / gs, groups = blockDim.x / gs, wpg = gs >> 5;
  const long long step = (long long)S * gs;
  for (long long w0 = (long long)blockIdx.x * groups; w0 < items; w0 += (long long)gridDim.x * groups) {
    const long long w = w0 + grp;
    const bool live = w < items;
    const long long r = live ? w / S : 0, s = live ? w % S : 0;
    const long long base = off + r * rs;
    ${A} acc = ${init};
    if (live) {
      long long j = s * gs + g;
      ${VEC > 1 ? `if (cs == 1 && (base % ${VEC}) == 0 && (((u64)in) & 15) == 0) {
        const uint4* p4 = reinterpret_cast<const uint4*>(in + base);
        const long long nv = n / ${VEC};
        for (; j + ${U - 1} * step < nv; j += ${U} * step) {
          ${us.map((u) => `const uint4 v${u} = p4[j + ${u} * step];`).join(' ')}
          ${us.map((u) => vstep(`v${u}`)).join('\n          ')}
        }
        for (; j < nv; j += step) { const uint4 v0 = p4[j]; ${vstep('v0')} }
        j = nv * ${VEC} + s * gs + g;
      }` : ''}
      for (; j + ${U - 1} * step < n; j += ${U} * step) {
        ${us.map((u) => `const ${A} x${u} = ${load(`base + (j + ${u} * step) * cs`)};`).join(' ')}
        ${us.map((u) => step(`x${u}`)).join(' ')}
      }
      for (; j < n; j += step) ${step(load('base + j * cs'))}
    }
    ${groupReduce}
    if (S == 1) {
      if (live && g == 0) { const ${A} a = acc; ${final(outD, isF, 'ooff + r', P.final)} }
      continue;
    }
    if (threadIdx.x == 0) { tmp[w] = acc; __threadfence(); last = atomicAdd(cnt + r, 1u) == (unsigned)(S - 1); }
    __syncthreads();
    if (last) {
      __threadfence();
      const ${A}* pr = tmp + r * S; // read through L2 (__ldcg): other SMs wrote them
      acc = ${P.init === 'x0' ? '__ldcg(pr)' : P.init};
      #pragma unroll 4
      for (int i = threadIdx.x; i < S; i += blockDim.x) ${merge('__ldcg(pr + i)')}
      ${groupReduce}
      if (threadIdx.x == 0) { const ${A} a = acc; ${final(outD, isF, 'ooff + r', P.final)} cnt[r] = 0; }
    }
    __syncthreads();
  }
}`;
}

/** Every unroll depth of a rows kernel in one module (one compile; a sweep compiles nothing more): red_u1, red_u2, red_u4. */
export function rowsModule(kind: ReduceKind, inD: DTypeName, outD: DTypeName): string {
  return UNROLLS.map((U) => rowsKernel(kind, inD, outD, U, `red_u${U}`)).join('\n');
}

/** The group size of a row of `loads` loads at unroll U in blocks of T threads: a power of two ≤ T. */
export function groupSize(loads: number, T: number, U: number): number {
  let gs = 1;
  while (gs < T && gs * U < loads) gs *= 2;
  return gs;
}

/**
 * Slices per row: enough (row, slice) items to fill every resident block slot once when rows are
 * few, each slice at least 4 unrolled rounds of a full group. 1 = no split.
 */
export function sliceCount(rows: number, loads: number, T: number, U: number, resident: number): number {
  if (rows * 2 > resident) return 1;
  return Math.max(1, Math.min(Math.floor(resident / rows), Math.floor(loads / (T * U * 4))));
}

// ---- cols: 2-D blocks over the contiguous kept dim -----------------------------------------------

export const COLS_SIG: ArgType[] = ['ptr', 'ptr', 'ptr', 'ptr', 'i64', 'i64', 'i64', 'i64', 'i64', 'i64', 'f64', 'f64'];
const VTYPE: Record<number, string> = { 16: 'uint4', 8: 'uint2', 4: 'unsigned', 2: 'unsigned short' };

/**
 * One cols kernel: block (bx, by) of TX x TY threads; thread (tx, ty) owns columns c0 .. c0+V-1
 * (c0 = (bx*TX + tx)*V) and the reduced indices by*chunk + ty + k*TY below (by+1)*chunk, U loads in
 * flight. The TY partials of each column merge in shared memory in ty order (fixed). One grid row:
 * the final value goes to out[ooff + col]. Several: the partial goes to tmp[by*rows + col], and the
 * last block of the column band to finish (counted in cnt[bx], reset after) merges the gridDim.y
 * partials of each of its columns in by order. Dynamic shared memory: TX*TY*V accumulators.
 * Args: in, out, tmp, cnt, rows, n, cs, off, ooff, chunk, p, nf.
 */
export function colsKernel(kind: ReduceKind, inD: DTypeName, outD: DTypeName, V: number, U: number, name: string): string {
  const isF = isFloatD(inD), A = accOf(inD), IN = R.storageType(inD), OUT = R.storageType(outD);
  const P = reduceParts(kind, isF);
  const VT = VTYPE[V * DTYPES[inD].itemsize];
  const load = (idx: string): string => `((${A})${R.load(inD, 'in', idx)})`;
  const us = [...Array(U).keys()], ks = [...Array(V).keys()];
  const pre = presums(kind, inD) && U > 1;
  // the U values of column k (expressions) into acc[k]
  const fold = (k: number, xs: string[]): string => (pre
    ? `acc[${k}] = acc[${k}] + (${A})(${floatTree(xs)});`
    : xs.map((x) => stepCode(A, P, `acc[${k}]`, `((${A})${x})`)).join(' '));
  const vecBody = V > 1 ? `if (c0 + ${V} <= rows) {
    for (; j + ${U - 1} * TY < je; j += ${U} * TY) {
      ${us.map((u) => `const ${VT} w${u} = *reinterpret_cast<const ${VT}*>(in + off + (j + ${u} * TY) * cs + c0); const ${IN} e${u}[${V}] = { ${unpack(inD, `w${u}`, V)} };`).join('\n      ')}
      ${ks.map((k) => fold(k, us.map((u) => R.load(inD, `e${u}`, String(k))))).join('\n      ')}
    }
    for (; j < je; j += TY) {
      const ${VT} w0 = *reinterpret_cast<const ${VT}*>(in + off + j * cs + c0); const ${IN} e0[${V}] = { ${unpack(inD, 'w0', V)} };
      ${ks.map((k) => stepCode(A, P, `acc[${k}]`, `((${A})${R.load(inD, 'e0', String(k))})`)).join(' ')}
    }
  } else ` : '';
  const scalarBody = `{
    for (; j + ${U - 1} * TY < je; j += ${U} * TY) {
      #pragma unroll
      for (int k = 0; k < ${V}; k++) if (c0 + k < rows) {
        ${us.map((u) => `const ${pre ? 'float' : A} x${u} = ${pre ? R.load(inD, 'in', `off + (j + ${u} * TY) * cs + c0 + k`) : load(`off + (j + ${u} * TY) * cs + c0 + k`)};`).join(' ')}
        ${pre ? `acc[k] = acc[k] + (${A})(${floatTree(us.map((u) => `x${u}`))});` : us.map((u) => stepCode(A, P, 'acc[k]', `x${u}`)).join(' ')}
      }
    }
    for (; j < je; j += TY) {
      #pragma unroll
      for (int k = 0; k < ${V}; k++) if (c0 + k < rows) ${stepCode(A, P, 'acc[k]', load('off + j * cs + c0 + k'))}
    }
  }`;
  const fin = (v: string): string => `{ const ${A} a = ${v}; ${final(outD, isF, 'ooff + col', P.final)} }`;
  return `extern "C" __global__ void __launch_bounds__(1024) ${name}(const ${IN}* __restrict__ in, ${OUT}* __restrict__ out, ${A}* __restrict__ tmp,
  unsigned* __restrict__ cnt, long long rows, long long n, long long cs, long long off, long long ooff, long long chunk, double p, double nf) {
  extern __shared__ __align__(16) unsigned char smraw[];
  ${A}* smc = reinterpret_cast<${A}*>(smraw);
  __shared__ int last;
  const int TX = blockDim.x, TY = blockDim.y, tx = threadIdx.x, ty = threadIdx.y;
  const long long c0 = ((long long)blockIdx.x * TX + tx) * ${V};
  const long long jb = (long long)blockIdx.y * chunk, je = jb + chunk < n ? jb + chunk : n;
  ${A} acc[${V}];
  #pragma unroll
  for (int k = 0; k < ${V}; k++) acc[k] = ${P.init === 'x0' ? `c0 + k < rows ? ${load('off + c0 + k')} : (${A})0` : P.init};
  long long j = jb + ty;
  ${vecBody}${scalarBody}
  #pragma unroll
  for (int k = 0; k < ${V}; k++) smc[(ty * TX + tx) * ${V} + k] = acc[k];
  __syncthreads();
  const int W = TX * ${V};
  for (int l = ty * TX + tx; l < W; l += TX * TY) {
    ${A} m = smc[l];
    for (int y = 1; y < TY; y++) { const ${A} a = m; const ${A} b = smc[y * W + l]; m = ${P.merge}; }
    const long long col = (long long)blockIdx.x * W + l;
    if (col < rows) {
      if (gridDim.y == 1) ${fin('m')}
      else tmp[blockIdx.y * rows + col] = m;
    }
  }
  if (gridDim.y == 1) return;
  __threadfence();
  __syncthreads();
  if (tx == 0 && ty == 0) last = atomicAdd(cnt + blockIdx.x, 1u) == gridDim.y - 1;
  __syncthreads();
  if (!last) return;
  __threadfence();
  for (int l = ty * TX + tx; l < W; l += TX * TY) {
    const long long col = (long long)blockIdx.x * W + l;
    if (col >= rows) continue;
    const ${A}* pc = tmp + col; // read through L2 (__ldcg): other SMs wrote them
    ${A} m = __ldcg(pc);
    #pragma unroll 4
    for (unsigned y = 1; y < gridDim.y; y++) { const ${A} a = m; const ${A} b = __ldcg(pc + y * rows); m = ${P.merge}; }
    ${fin('m')}
  }
  if (tx == 0 && ty == 0) cnt[blockIdx.x] = 0;
}`;
}

/** Every unroll depth of a cols kernel in one module: redc_u1, redc_u2, redc_u4. */
export function colsModule(kind: ReduceKind, inD: DTypeName, outD: DTypeName, V: number): string {
  return UNROLLS.map((U) => colsKernel(kind, inD, outD, V, U, `redc_u${U}`)).join('\n');
}

export interface ColsGeometry { TX: number; TY: number; gx: number; gy: number; chunk: number }

/**
 * The cols launch: TX = the vector columns up to a warp (fewer columns: a narrower block, so a warp
 * still reads adjacent memory), TY thread rows (no more than the reduced dim needs); with `split`,
 * grid rows over the reduced dim until the resident block slots are filled, each at least 4 unrolled
 * rounds long.
 */
export function colsGeometry(rows: number, n: number, V: number, T: number, U: number, resident: number, split: boolean): ColsGeometry {
  const vcols = Math.ceil(rows / V);
  const TX = Math.min(32, vcols);
  const TY = Math.max(1, Math.min(Math.floor(T / TX), Math.ceil(n / U)));
  const gx = Math.ceil(vcols / TX);
  let gy = 1;
  if (split && gx * 2 <= resident) gy = Math.max(1, Math.min(Math.floor(resident / gx), Math.floor(n / (TY * U * 4)), 65535));
  const chunk = Math.max(1, Math.ceil(n / gy));
  return { TX, TY, gx, gy: Math.max(1, Math.ceil(n / chunk)), chunk };
}

/** Largest power-of-two vector width ≤ 16 bytes (8 elements at most) that the operand's alignment allows. */
function colsVector(dtype: DTypeName, base: bigint, off: number, cs: number, rows: number): number {
  const size = DTYPES[dtype].itemsize;
  let V = Math.min(8, 16 / size);
  while (V > 1 && (V > rows || off % V !== 0 || cs % V !== 0 || base % BigInt(V * size) !== 0n)) V >>= 1;
  return V;
}

// ---- general kernels: argmax/argmin, values+indices, var, logsumexp ------------------------------

export function reduceSource(kind: ReduceKind, inD: DTypeName, outD: DTypeName, withIdx: boolean, mode: 'row' | 'vertical') {
  const isF = isFloatD(inD);
  const accT = accOf(inD);
  const load = (idx: string): string => `((${accT})${R.load(inD, 'in', idx)})`;
  const store = (v: string): string => R.store(outD, 'out', 'ooff + r', outD === 'int64' ? `(long long)(${v})` : R.castExpr(isF ? 'float64' : 'int64', outD, v));
  const argKind = kind === 'argmax' || kind === 'argmin' || withIdx;
  const cmp = kind === 'max' || kind === 'argmax' ? '>' : '<';
  const head = `extern "C" __global__ void red(const ${R.storageType(inD)}* __restrict__ in, ${R.storageType(outD)}* __restrict__ out, long long* __restrict__ oidx,
  long long rows, long long n, long long rs, long long cs, long long off, long long ooff, long long ioff, double p)`;
  if (!argKind && kind !== 'var' && kind !== 'logsumexp') throw new Error(`reduceSource: ${kind} runs in the rows/cols kernels`);
  if (mode === 'vertical') {
    // One thread per output row; consecutive threads read consecutive addresses.
    const bodyV = argKind
      ? `${accT} a = ${load('off + r * rs')}; long long ai = 0;
    for (long long j = 1; j < n; j++) { ${accT} x = ${load('off + r * rs + j * cs')}; if (${isF ? 'isnan(a) ? false : isnan(x) ||' : ''} x ${cmp} a) { a = x; ai = j; } }
    ${kind === 'argmax' || kind === 'argmin' ? R.store(outD, 'out', 'ooff + r', 'ai') : store('a')}
    if (oidx) oidx[ioff + r] = ai;`
      : kind === 'var'
        ? `double s = 0; for (long long j = 0; j < n; j++) s += ${load('off + r * rs + j * cs')}; double mean = s / n; double q = 0;
    for (long long j = 0; j < n; j++) { double d = ${load('off + r * rs + j * cs')} - mean; q += d * d; } double a = q / fmax(0.0, (double)n - p); ${store('a')}`
        : `double m = __longlong_as_double(0xfff0000000000000LL); for (long long j = 0; j < n; j++) { double x = ${load('off + r * rs + j * cs')}; if (x > m || isnan(x)) m = x; }
    double sh = isinf(m) ? 0.0 : m; double s = 0; for (long long j = 0; j < n; j++) s += exp(${load('off + r * rs + j * cs')} - sh); double a = log(s) + sh; ${store('a')}`;
    return `${head} {
  for (long long r = blockIdx.x * (long long)blockDim.x + threadIdx.x; r < rows; r += (long long)gridDim.x * blockDim.x) {
    ${bodyV}
  }
}`;
  }
  // row mode: a block per row; thread-local pass, then a fixed-order tree (warp shuffles, then warp leaders through shared memory)
  if (argKind) {
    // (value, index) pairs: NaN first, then the better value, then the lower index — deterministic.
    const better = `(${isF ? 'isnan(bv) && !isnan(av) ? true : isnan(av) ? (isnan(bv) && bi < ai) :' : ''} (bv ${cmp} av || (bv == av && bi < ai)))`;
    return `${head} {
  __shared__ ${accT} shv[32]; __shared__ long long shi[32];
  for (long long r = blockIdx.x; r < rows; r += gridDim.x) {
    ${accT} av = ${load('off + r * rs')}; long long ai = 0;
    for (long long j = threadIdx.x; j < n; j += blockDim.x) { ${accT} x = ${load('off + r * rs + j * cs')}; ${accT} bv = x; long long bi = j; if (${better}) { av = bv; ai = bi; } }
    for (int o = 16; o > 0; o >>= 1) { ${accT} bv = __shfl_down_sync(0xffffffffu, av, o); long long bi = __shfl_down_sync(0xffffffffu, ai, o); if (${better}) { av = bv; ai = bi; } }
    if ((threadIdx.x & 31) == 0) { shv[threadIdx.x >> 5] = av; shi[threadIdx.x >> 5] = ai; }
    __syncthreads();
    if (threadIdx.x == 0) {
      for (int w = 1; w < (blockDim.x >> 5); w++) { ${accT} bv = shv[w]; long long bi = shi[w]; av = shv[0]; ai = shi[0]; if (${better}) { shv[0] = bv; shi[0] = bi; } }
      av = shv[0]; ai = shi[0];
      ${kind === 'argmax' || kind === 'argmin' ? R.store(outD, 'out', 'ooff + r', 'ai') : store('av')}
      if (oidx) oidx[ioff + r] = ai;
    }
    __syncthreads();
  }
}`;
  }
  const blockReduce = (v: string, merge: string): string => `{
      for (int o = 16; o > 0; o >>= 1) { double b = __shfl_down_sync(0xffffffffu, ${v}, o); double a = ${v}; ${v} = ${merge}; }
      if ((threadIdx.x & 31) == 0) sh_double[threadIdx.x >> 5] = ${v};
      __syncthreads();
      if (threadIdx.x < 32) {
        ${v} = threadIdx.x < (blockDim.x >> 5) ? sh_double[threadIdx.x] : ${v}_id;
        for (int o = 16; o > 0; o >>= 1) { double b = __shfl_down_sync(0xffffffffu, ${v}, o); double a = ${v}; ${v} = ${merge}; }
        if (threadIdx.x == 0) sh_double[32] = ${v};
      }
      __syncthreads();
      ${v} = sh_double[32];
      __syncthreads();
    }`;
  const first = kind === 'var'
    ? `double sm = 0; for (long long j = threadIdx.x; j < n; j += blockDim.x) sm += ${load('off + r * rs + j * cs')}; double sm_id = 0;
    ${blockReduce('sm', 'a + b')}
    const double mean = sm / n; double q = 0, q_id = 0;
    for (long long j = threadIdx.x; j < n; j += blockDim.x) { double d = ${load('off + r * rs + j * cs')} - mean; q += d * d; }
    ${blockReduce('q', 'a + b')}
    if (threadIdx.x == 0) { double v = q / fmax(0.0, (double)n - p); ${store('v')} }`
    : `double m = __longlong_as_double(0xfff0000000000000LL), m_id = m; for (long long j = threadIdx.x; j < n; j += blockDim.x) { double x = ${load('off + r * rs + j * cs')}; if (x > m || isnan(x)) m = x; }
    ${blockReduce('m', '(isnan(a) || b > a || isnan(b)) ? (isnan(a) ? a : b) : a')}
    const double shf = isinf(m) ? 0.0 : m; double s = 0, s_id = 0;
    for (long long j = threadIdx.x; j < n; j += blockDim.x) s += exp(${load('off + r * rs + j * cs')} - shf);
    ${blockReduce('s', 'a + b')}
    if (threadIdx.x == 0) { double v = log(s) + shf; ${store('v')} }`;
  return `${head} {
  __shared__ double sh_double[33];
  for (long long r = blockIdx.x; r < rows; r += gridDim.x) {
    ${first}
  }
}`;
}

export const RED_SIG: ArgType[] = ['ptr', 'ptr', 'ptr', 'i64', 'i64', 'i64', 'i64', 'i64', 'i64', 'i64', 'f64'];

function generalReduce(kind: ReduceKind, input: StridedRef, rows: number, n: number, params: number[], out: StridedRef,
  outIndex: StridedRef | undefined, lay: RowLayout): void {
  reduceStats.general++;
  const vertical = lay.rowStride === 1 && lay.colStride !== 1 && rows >= 1024;
  const mode = vertical ? 'vertical' : 'row';
  const key = `red:${kind}:${input.dtype}:${out.dtype}:${!!outIndex}:${mode}`;
  const k = be.kernel(key, () => ({ src: reduceSource(kind, input.dtype, out.dtype, !!outIndex, mode), name: 'red', sig: RED_SIG }));
  const args = [ptr(input), ptr(out), outIndex ? ptr(outIndex) : 0n, rows, n, lay.rowStride, lay.colStride,
    input.offset, out.offset, outIndex?.offset ?? 0, params[0] ?? 0];
  if (vertical) { be.launch(k, be.gridFor(rows, 256), 256, args); return; }
  const run = (c: Config): void => be.launch(k, Math.min(rows, be.smCount * 32), c.threads as number, args);
  const fallback = be.tuning.rowDefault(n);
  const cls = kind === 'var' || kind === 'logsumexp' ? 'twopass' : 'arg';
  run(be.tuning.pick(REDUCE_SPACE, `${cls}:${bucketSize(n)}:${bucketSize(rows)}`, `${DTYPES[input.dtype].itemsize}B`, rows * n, fallback, run));
}

// ---- every specialization (nvcc check, ahead-of-time compiles) -----------------------------------

/** (kind, input dtype, output dtype) as src/ops/reduce.ts calls the simple kinds (default dtypes), over `dtypes`. */
export function simpleCombos(dtypes: readonly DTypeName[]): [ReduceKind, DTypeName, DTypeName][] {
  const out: [ReduceKind, DTypeName, DTypeName][] = [];
  for (const x of dtypes) {
    const f = isFloatD(x), acc: DTypeName = f ? x : 'int64', flag: DTypeName = x === 'uint8' ? 'uint8' : 'bool';
    out.push(['sum', x, acc], ['prod', x, acc], ['max', x, x], ['min', x, x], ['any', x, flag], ['all', x, flag], ['count_nonzero', x, 'int64']);
    if (f) out.push(['mean', x, x], ['norm', x, x]);
  }
  return out;
}

/** The column vector widths a cols kernel of `d` may be compiled for. */
export const colsVectors = (d: DTypeName): number[] => [1, 2, 4, 8].filter((V) => V <= Math.min(8, 16 / DTYPES[d].itemsize));

/**
 * Every module source the reductions compile for `dtypes` (default output dtypes): the rows and cols
 * modules of each simple kind (each column vector width) and the general kernels. Labels name them; `name` is one kernel of the module.
 */
export function reduceModules(dtypes: readonly DTypeName[]): { label: string; src: string; name: string; sig: ArgType[] }[] {
  const out: { label: string; src: string; name: string; sig: ArgType[] }[] = [];
  for (const [kind, x, o] of simpleCombos(dtypes)) {
    out.push({ label: `rows ${kind} ${x}>${o}`, src: rowsModule(kind, x, o), name: 'red_u1', sig: ROWS_SIG });
    for (const V of colsVectors(x)) out.push({ label: `cols ${kind} ${x}>${o} V${V}`, src: colsModule(kind, x, o, V), name: 'redc_u1', sig: COLS_SIG });
  }
  for (const x of dtypes) for (const mode of ['row', 'vertical'] as const) {
    const general: [ReduceKind, DTypeName, boolean][] = [['argmax', 'int64', false], ['argmin', 'int64', false], ['max', x, true], ['min', x, true]];
    if (isFloatD(x)) general.push(['var', x, false], ['logsumexp', x, false]);
    for (const [kind, o, idx] of general) out.push({ label: `general ${kind}${idx ? '+indices' : ''} ${x} ${mode}`, src: reduceSource(kind, x, o, idx, mode), name: 'red', sig: RED_SIG });
  }
  return out;
}

// ---- launchers -----------------------------------------------------------------------------------

/** Set by tests to force a configuration (null: the tuner's). */
export const reduceOverride: { rows: Config | null; cols: Config | null } = { rows: null, cols: null };
/** Launches per path (tests check that each path ran). */
export const reduceStats = { rows: 0, rowsSplit: 0, cols: 0, colsSplit: 0, general: 0 };

const regsOf = new WeakMap<CudaKernel, number>();
/** Blocks of T threads (using `smem` bytes of shared memory each) the whole device holds at once for kernel k. */
function residentBlocks(k: CudaKernel, T: number, smem: number): number {
  const lim = be.tuning.profile.limits;
  let regs = regsOf.get(k);
  if (regs === undefined) regsOf.set(k, (regs = Math.ceil(Math.max(1, k.resources().numRegs) / 8) * 8)); // allocated per warp in 256-register units
  let perSM = Math.min(32, Math.floor((lim.maxThreadsPerSM ?? 2048) / T), Math.floor((lim.registersPerSM ?? 65536) / (regs * T)));
  if (smem > 0) perSM = Math.min(perSM, Math.floor(lim.sharedMemoryPerSM / smem));
  return be.smCount * Math.max(1, perSM);
}

/** Where a pass reads and writes: device pointers plus element offsets. */
interface Pass { kind: ReduceKind; inD: DTypeName; inPtr: bigint; off: number; outD: DTypeName; outPtr: bigint; ooff: number; p: number; nf: number }

// One module per specialization holds every unroll depth: a sweep compiles nothing more, and the
// sources do not depend on the configuration (scripts/warm-reduce.mjs compiles them ahead).
function rowsKernelFor(ps: Pass, U: number): CudaKernel {
  return be.kernel(`redr:${ps.kind}:${ps.inD}:${ps.outD}:u${U}`, () => ({ src: rowsModule(ps.kind, ps.inD, ps.outD), name: `red_u${U}`, sig: ROWS_SIG }));
}

/**
 * Arrival counters of the split kernels (the last block of a row or column band combines the
 * partials): zeroed once, and every kernel leaves the ones it used at zero.
 */
const COUNTERS = 8192;
let counters: CudaBuffer | null = null;
function counterBuffer(): bigint {
  if (counters === null) {
    // a buffer kept for the process: never from a capturing CUDA graph's private pool (released with
    // the graph), and zeroed now rather than by a memset the capture would only record
    if (be.capture !== null) throw new GraphCaptureError('cuda.graph', 'the first split reduction of the process ran inside a capture: run the captured function once before capturing (a warm-up)');
    counters = be.alloc('int32', COUNTERS, true);
  }
  return counters.ptr;
}

/** The rows path at configuration c: one launch; with S slices per row, partials in a temporary combined by each row's last block. */
function rowsRun(ps: Pass, rows: number, n: number, lay: RowLayout, c: Config): void {
  const T = c.threads as number, U = c.unroll as number;
  const k = rowsKernelFor(ps, U);
  const vec = lay.colStride === 1 ? 16 / DTYPES[ps.inD].itemsize : 1, loads = Math.ceil(n / vec);
  const S = rows <= COUNTERS ? sliceCount(rows, loads, T, U, residentBlocks(k, T, 0)) : 1;
  const gs = S > 1 ? T : groupSize(loads, T, U);
  const items = rows * S, groups = T / gs;
  const grid = Math.max(1, Math.min(Math.ceil(items / groups), be.smCount * 256));
  const tmp = S > 1 ? be.alloc(partDType(ps.inD), items) : null;
  reduceStats[S > 1 ? 'rowsSplit' : 'rows']++;
  try {
    be.launch(k, grid, T, [ps.inPtr, ps.outPtr, tmp?.ptr ?? 0n, S > 1 ? counterBuffer() : 0n, items, n, lay.rowStride, lay.colStride,
      ps.off, ps.ooff, S, gs, ps.p, ps.nf]);
  } finally { if (tmp) be.free(tmp); } // stream-ordered: the allocator hands it out again only to later work
}

function colsKernelFor(ps: Pass, V: number, U: number): CudaKernel {
  return be.kernel(`redc:${ps.kind}:${ps.inD}:${ps.outD}:v${V}:u${U}`, () => ({ src: colsModule(ps.kind, ps.inD, ps.outD, V), name: `redc_u${U}`, sig: COLS_SIG }));
}

/** The cols path at configuration c: one launch; with grid rows over the reduced dim, partials combined by each column band's last block. */
function colsRun(ps: Pass, rows: number, n: number, cs: number, c: Config): void {
  const T = c.threads as number, U = c.unroll as number;
  const V = colsVector(ps.inD, ps.inPtr, ps.off, cs, rows);
  const k = colsKernelFor(ps, V, U);
  const smem = T * V * 8;
  const g = colsGeometry(rows, n, V, T, U, residentBlocks(k, T, smem), true);
  const split = g.gy > 1 && g.gx <= COUNTERS;
  const geo = split ? g : colsGeometry(rows, n, V, T, U, 0, false);
  const tmp = split ? be.alloc(partDType(ps.inD), rows * g.gy) : null;
  reduceStats[split ? 'colsSplit' : 'cols']++;
  try {
    be.ctx.launch(k, [geo.gx, geo.gy], [geo.TX, geo.TY], [ps.inPtr, ps.outPtr, tmp?.ptr ?? 0n, split ? counterBuffer() : 0n, rows, n, cs,
      ps.off, ps.ooff, geo.chunk, ps.p, ps.nf], geo.TX * geo.TY * V * 8, be.stream);
  } finally { if (tmp) be.free(tmp); }
}

export function cudaReduce(kind: ReduceKind, input: StridedRef, rows: number, n: number, params: number[], out: StridedRef,
  outIndex?: StridedRef, layout?: RowLayout): void {
  be.checkDType(kind, input.dtype);
  const lay = layout ?? { rowStride: n, colStride: 1 };
  if (!SIMPLE.has(kind) || outIndex) { generalReduce(kind, input, rows, n, params, out, outIndex, lay); return; }
  const ps: Pass = { kind, inD: input.dtype, inPtr: ptr(input), off: input.offset, outD: out.dtype, outPtr: ptr(out), ooff: out.offset, p: params[0] ?? 0, nf: n };
  const dkey = `${DTYPES[input.dtype].itemsize}B`;
  if (lay.rowStride === 1 && lay.colStride !== 1 && rows > 1) {
    const run = (c: Config): void => colsRun(ps, rows, n, lay.colStride, c);
    run(reduceOverride.cols ?? be.tuning.pick(REDUCE_COLS_SPACE, `${bucketSize(n)}:${bucketSize(rows)}`, dkey, rows * n, REDUCE_COLS_SPACE.defaultConfig, run));
    return;
  }
  const run = (c: Config): void => rowsRun(ps, rows, n, lay, c);
  const fallback = { threads: be.tuning.rowDefault(n).threads, unroll: 2 };
  const shape = `${lay.colStride === 1 ? 'c' : 's'}:${bucketSize(n)}:${bucketSize(rows)}`;
  run(reduceOverride.rows ?? be.tuning.pick(REDUCE_ROWS_SPACE, shape, dkey, rows * n, fallback, run));
}

// ---- scans ---------------------------------------------------------------------------------------

export function scanSource(kind: ScanKind, inD: DTypeName, outD: DTypeName) {
  const isF = DTYPES[inD].kind === 'float';
  const accT = isF ? 'double' : 'long long';
  const load = (idx: string): string => `((${accT})${R.load(inD, 'in', idx)})`;
  const st = (v: string, idx: string): string => R.store(outD, 'out', idx, outD === 'int64' ? `(long long)(${v})` : R.castExpr(isF ? 'float64' : 'int64', outD, v));
  const arg = kind === 'cummax' || kind === 'cummin';
  const cmp = kind === 'cummax' ? '>=' : '<=';
  // one thread per row, sequential along the row: exact PyTorch semantics (ties move the index, NaN sticks)
  const body = arg
    ? `${accT} best = ${load('b')}; long long bi = 0;
    for (long long j = 0; j < n; j++) { ${accT} x = ${load('b + j')}; if (${isF ? '!isnan(best) && (isnan(x) ||' : '('} x ${cmp} best)) { best = x; bi = j; } ${st('best', 'ob + j')} oidx[ob + j] = bi; }`
    : `${accT} acc = ${kind === 'cumsum' ? '0' : '1'};
    for (long long j = 0; j < n; j++) { acc = acc ${kind === 'cumsum' ? '+' : '*'} ${load('b + j')}; ${st('acc', 'ob + j')} }`;
  return `extern "C" __global__ void scan(const ${R.storageType(inD)}* __restrict__ in, ${R.storageType(outD)}* __restrict__ out, long long* __restrict__ oidx, long long rows, long long n, long long off, long long ooff) {
  for (long long r = blockIdx.x * (long long)blockDim.x + threadIdx.x; r < rows; r += (long long)gridDim.x * blockDim.x) {
    const long long b = off + r * n, ob = ooff + r * n;
    ${body}
  }
}`;
}

export function cudaScan(kind: ScanKind, input: StridedRef, rows: number, n: number, out: StridedRef, outIndex?: StridedRef): void {
  be.checkDType(kind, input.dtype);
  const key = `scan:${kind}:${input.dtype}:${out.dtype}`;
  const k = be.kernel(key, () => ({ src: scanSource(kind, input.dtype, out.dtype), name: 'scan', sig: ['ptr', 'ptr', 'ptr', 'i64', 'i64', 'i64', 'i64'] }));
  be.launch(k, be.gridFor(rows, 128), 128, [ptr(input), ptr(out), outIndex ? ptr(outIndex) : 0n, rows, n, input.offset, out.offset]);
}
