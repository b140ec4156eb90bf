// CUDA kernels of the nn family (contract: src/kernels/nn.ts): 'softmax' (softmax/log_softmax/softmin,
// masks, causal, safe rows) and 'row_norm' (layer/rms/group norm statistics and affine), then
// 'nll_loss' and 'local_response_norm'.
//
// One plan serves softmax and row_norm (rowPlan): a group of G threads owns a row (G a power of two; a block of
// `threads` holds threads/G rows, so short rows get a warp or less each); a thread handles K chunks of
// V consecutive elements, chunk c at element (c·G + lane)·V. V = 16 bytes / the widest of input and
// output items when rows are contiguous and 16-byte aligned (8 bfloat16 per load), else 1 (any
// stride). While K·V fits the register budget the row is read from memory once and kept in registers;
// longer rows stream (re-read, mostly from L2). Sums and maxima accumulate in float32 (float64 for
// float64 data) and reduce in a fixed order: per thread in chunk order, then xor shuffles inside each
// warp, then over the group's warps through shared memory. The same configuration gives the same bits
// every run; `threads` (hence G and K) and V change the summation tree, so they can move the last bits.
//
// nll_loss: per-item losses -w[t]·input[i, t, d] in double; the two sums (loss, weight) reduce in a
// fixed order (fixed chunks per block, thread-strided, then a shuffle tree; a second one-block kernel
// adds the blocks' partials in order), so the result is identical run to run. Out-of-range targets
// raise the CPU's IndexError: the kernel records the first bad item in a device flag, read back once
// per call (the only host synchronization; one 8-byte copy).
// local_response_norm: a thread per element sums the squares of its channel window in double.

import { DTYPES, type DTypeName } from '../../../dtype/dtypes.js';
import type { StridedRef } from '../../backend.js';
import type { BackendKernels } from '../../../kernels/table.js';
import { R, type CudaBackend, type CudaBuffer } from '../runtime/backend.js';
import type { ArgType } from '../runtime/driver.js';
import { SOFTMAX_SPACE, ROWNORM_SPACE } from '../tuning/spaces.js';
import { bucketSize, type Config } from '../../../autotune/index.js';
import { IndexError, UnsupportedError } from '../../../errors.js';
import type { LrnParams, NllParams, RowNormParams, SoftmaxParams } from '../../../kernels/nn.js';
import { FLOATS, NARROW_SRC, basePtr, basePtr as ptr, loadD, numel, requireDType, storeD } from './util.js';
import { nextPow2 } from '../../backend.js';

let be: CudaBackend;
export const kernels = {
  softmax: cudaSoftmax,
  row_norm: cudaRowNorm,
  nll_loss: cudaNllLoss,
  local_response_norm: cudaLocalResponseNorm,
} satisfies BackendKernels;

/** Points this family's kernels at the backend (called once, when the backend starts). */
export function bind(backend: CudaBackend): void {
  be = backend;
}


/** Register budget of a cached row, in compute values per thread. */
const cacheLimit = (A: 'float' | 'double'): number => (A === 'double' ? 16 : 32);

export interface RowPlan {
  /** Threads per block. */
  block: number;
  /** Threads per row (a power of two dividing block). */
  G: number;
  /** Chunks per thread when the row is cached in registers; 0: the row streams from memory. */
  K: number;
  /** Elements per chunk (one vector load). */
  V: number;
}

/** How a row of n is spread over a block of `threads`, with vectors of V elements. */
export function rowPlan(n: number, threads: number, V: number, A: 'float' | 'double' = 'float'): RowPlan {
  const want = Math.ceil(Math.max(n, 1) / V);
  const G = Math.min(threads, nextPow2(want));
  const K = Math.ceil(want / G);
  return { block: threads, G, K: K * V <= cacheLimit(A) ? K : 0, V };
}

/** Threads per block when no tuned configuration applies: about two vectors per thread, 128..1024. */
export function defaultThreads(n: number, V: number): number {
  return Math.min(1024, Math.max(128, nextPow2(Math.ceil(n / V / 2))));
}

/**
 * The sweep's candidates for a row of n: those that keep the row in registers when any does (a
 * streamed row reads memory twice or three times), each plan once. Keeps first-run tuning short.
 */
function planCandidates(n: number, V: number, A: 'float' | 'double'): (fit: readonly Config[]) => Config[] {
  return (fit) => {
    const cached = fit.filter((c) => rowPlan(n, c.threads as number, V, A).K > 0);
    return cached.length ? cached : [...fit];
  };
}

/** Largest vector (elements) that 16-byte loads of every ref allow: bases and row strides aligned, n a multiple. */
function vectorWidth(refs: (StridedRef | undefined)[], n: number, rowStrides: number[][]): number {
  const live = refs.filter((r): r is StridedRef => !!r);
  let V = 16 / Math.max(...live.map((r) => DTYPES[r.dtype].itemsize));
  for (; V > 1; V >>= 1) {
    const ok = n % V === 0 && live.every((r, i) => {
      const bytes = V * DTYPES[r.dtype].itemsize, align = Math.min(16, bytes);
      return (ptr(r) + BigInt(r.offset * DTYPES[r.dtype].itemsize)) % BigInt(align) === 0n
        && (rowStrides[i] ?? []).every((s) => (s * DTYPES[r.dtype].itemsize) % align === 0);
    });
    if (ok) break;
  }
  return V;
}

// Group-wide sum/max, same order every run; every thread of the group gets the result. Every thread of
// the block must call it (it synchronizes the block when a group spans several warps).
const GROUP_REDUCE = String.raw`
template <typename T, bool MAX> __device__ __forceinline__ T nbx_op(T a, T b) { return MAX ? (b > a || isnan(b) ? b : a) : a + b; }
template <typename T, bool MAX, int G> __device__ __forceinline__ T nbx_group_all(T v, T* sh) {
  #pragma unroll
  for (int o = (G < 32 ? G : 32) / 2; o > 0; o >>= 1) v = nbx_op<T, MAX>(v, __shfl_xor_sync(0xffffffffu, v, o));
  if (G > 32) {
    constexpr int W = G / 32;
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    __syncthreads();
    if (lane == 0) sh[warp] = v;
    __syncthreads();
    v = sh[(warp & ~(W - 1)) + (lane & (W - 1))];
    #pragma unroll
    for (int o = W / 2; o > 0; o >>= 1) v = nbx_op<T, MAX>(v, __shfl_xor_sync(0xffffffffu, v, o));
  }
  return v;
}
`;

const WORD: Record<number, string> = { 2: 'unsigned short', 4: 'unsigned', 8: 'uint2', 16: 'uint4' };
/** Suffix of the union temporaries in a kernel's source; reset per source so the text (and the NVRTC
 *  disk-cache key) of a kernel never depends on what this process generated before. */
let uniq = 0;

/** Loads V elements of `d` at p[idx..idx+V) (aligned) into dst(i) as compute values: whole 16-byte words. */
function loadVec(d: DTypeName, p: string, idx: string, V: number, A: string, dst: (i: number) => string): string {
  if (V === 1) return `${dst(0)} = (${A})${R.load(d, p, idx)};`;
  const size = DTYPES[d].itemsize, bytes = Math.min(16, V * size), per = bytes / size, u = `u${uniq++}`;
  const parts: string[] = [];
  for (let w = 0; w < V / per; w++) {
    parts.push(`{ union { ${WORD[bytes]} w; ${R.storageType(d)} e[${per}]; } ${u}; ${u}.w = *reinterpret_cast<const ${WORD[bytes]}*>(${p} + ${idx} + ${w * per});`);
    for (let i = 0; i < per; i++) parts.push(`${dst(w * per + i)} = (${A})${R.load(d, `${u}.e`, String(i))};`);
    parts.push('}');
  }
  return parts.join(' ');
}

/** Stores src(i) (compute values) to p[idx..idx+V) as `d`: whole 16-byte words. */
function storeVec(d: DTypeName, p: string, idx: string, V: number, src: (i: number) => string): string {
  if (V === 1) return R.store(d, p, idx, src(0));
  const size = DTYPES[d].itemsize, bytes = Math.min(16, V * size), per = bytes / size, u = `u${uniq++}`;
  const parts: string[] = [];
  for (let w = 0; w < V / per; w++) {
    parts.push(`{ union { ${WORD[bytes]} w; ${R.storageType(d)} e[${per}]; } ${u};`);
    for (let i = 0; i < per; i++) parts.push(R.store(d, `${u}.e`, String(i), src(w * per + i)));
    parts.push(`*reinterpret_cast<${WORD[bytes]}*>(${p} + ${idx} + ${w * per}) = ${u}.w; }`);
  }
  return parts.join(' ');
}

/** `for` over the chunks of this thread: cached (K unrolled, e < n guarded) or streaming. */
function chunks(plan: RowPlan, body: (c: string) => string): string {
  const { G, K, V } = plan;
  return K > 0
    ? `#pragma unroll
    for (int c = 0; c < ${K}; c++) { const int e = (c * ${G} + lane) * ${V}; if (e < n) { ${body('c')} } }`
    : `for (int e = lane * ${V}; e < n; e += ${G * V}) { ${body('')} }`;
}

/** Kernel head: group geometry and the loop over this block's rows (uniform: every thread runs every iteration). */
function rowLoop(plan: RowPlan, A: string, body: string): string {
  const rpb = plan.block / plan.G;
  return `__shared__ ${A} sh[32];
  const int lane = threadIdx.x & ${plan.G - 1};
  const long long grp = threadIdx.x / ${plan.G};
  for (long long r0 = (long long)blockIdx.x * ${rpb}; r0 < rows; r0 += (long long)gridDim.x * ${rpb}) {
    const long long r = r0 + grp;
    const bool live = r < rows;
    ${body}
  }`;
}

export function softmaxSource(x: DTypeName, out: DTypeName, mask: DTypeName | null, k: number, plan: RowPlan, log: boolean, negate: boolean, safe: boolean) {
  uniq = 0;
  const A = x === 'float64' || out === 'float64' ? 'double' : 'float';
  const { K, V, G } = plan;
  const dims = [...Array(k).keys()];
  const E = A === 'double' ? 'exp' : '__expf';
  // negation, mask and causal mask of element j's value t
  const adjust = (t: string, j: string): string => {
    const m = !mask ? '' : mask === 'bool' ? `if (mk[mo + (long long)(${j}) * ms] == 0) ${t} = -INFINITY;`
      : `${t} += (${A})${R.load(mask, 'mk', `mo + (long long)(${j}) * ms`)};`;
    return `${negate ? `${t} = -${t};` : ''} ${m} if (causal && (${j}) > lim) ${t} = -INFINITY;`;
  };
  const xi = V > 1 ? 'xo + e' : 'xo + (long long)e * xs', oi = V > 1 ? 'oo + e' : 'oo + (long long)e * os';
  // the chunk's values into t[0..V) (adjusted)
  const loadChunk = (t: (i: number) => string): string => `${loadVec(x, 'in', xi, V, A, t)} ${[...Array(V).keys()].map((i) => adjust(t(i), `e + ${i}`)).join(' ')}`;
  const emitChunk = (t: (i: number) => string): string => `if (empty) { ${storeVec(out, 'o', oi, V, () => '0')} } else { ${storeVec(out, 'o', oi, V, (i) => (log ? `${t(i)} - mx - lse` : `${t(i)} * inv`))} }`;
  const vi = (i: number): string => `v[c * ${V} + ${i}]`, ti = (i: number): string => `t[${i}]`;
  const maxOf = (t: (i: number) => string): string => [...Array(V).keys()].map((i) => `m = nbx_op<${A}, true>(m, ${t(i)});`).join(' ');
  const tail = `const ${A} inv = (${A})1 / s, lse = ${A === 'double' ? 'log' : 'logf'}(s);
    const bool empty = ${safe ? 's == 0' : 'false'};`;
  const body = K > 0
    ? `${A} v[${K * V}];
    #pragma unroll
    for (int i = 0; i < ${K * V}; i++) v[i] = -INFINITY;
    if (live) {
    ${chunks(plan, (c) => `${loadChunk(vi)}`)} }
    ${A} m = -INFINITY;
    #pragma unroll
    for (int i = 0; i < ${K * V}; i++) m = nbx_op<${A}, true>(m, v[i]);
    const ${A} mx0 = nbx_group_all<${A}, true, ${G}>(m, sh);
    const ${A} mx = isinf(mx0) && mx0 < 0 ? (${A})0 : mx0;
    ${A} s = 0;
    #pragma unroll
    for (int i = 0; i < ${K * V}; i++) { const ${A} q = ${E}(v[i] - mx); ${log ? '' : 'v[i] = q;'} s += q; }
    s = nbx_group_all<${A}, false, ${G}>(s, sh);
    ${tail}
    if (live) {
    ${chunks(plan, () => emitChunk(vi))} }`
    : `${A} m = -INFINITY, t[${V}];
    if (live) {
    ${chunks(plan, () => `${loadChunk(ti)} ${maxOf(ti)}`)} }
    const ${A} mx0 = nbx_group_all<${A}, true, ${G}>(m, sh);
    const ${A} mx = isinf(mx0) && mx0 < 0 ? (${A})0 : mx0;
    ${A} s = 0;
    if (live) {
    ${chunks(plan, () => `${loadChunk(ti)} ${[...Array(V).keys()].map((i) => `s += ${E}(t[${i}] - mx);`).join(' ')}`)} }
    s = nbx_group_all<${A}, false, ${G}>(s, sh);
    ${tail}
    if (live) {
    ${chunks(plan, () => `${loadChunk(ti)} ${log ? '' : [...Array(V).keys()].map((i) => `t[${i}] = ${E}(t[${i}] - mx);`).join(' ')} ${emitChunk(ti)}`)} }`;
  // row r's offsets: the innermost of the other dims varies fastest; the outermost needs no modulo
  const offsets = dims.slice().reverse().map((d) => `{ const long long c_ = ${d === 0 ? 'rem' : `rem % s${d}`}; ${d === 0 ? '' : `rem /= s${d};`} xo += c_ * xst${d}; oo += c_ * ost${d}; mo += c_ * mst${d}; }`).join(' ');
  const src = `${GROUP_REDUCE}
extern "C" __global__ void __launch_bounds__(${plan.block}) softmax(const ${R.storageType(x)}* __restrict__ in, ${R.storageType(out)}* __restrict__ o, const ${mask ? R.storageType(mask) : 'unsigned char'}* __restrict__ mk,
  long long rows, int n, long long xoff, long long xs, long long ooff, long long os, long long moff, long long ms, int causal, long long L, long long c0
  ${dims.map((d) => `, long long s${d}, long long xst${d}, long long ost${d}, long long mst${d}`).join('')}) {
  ${rowLoop(plan, A, `long long rem = r, xo = xoff, oo = ooff, mo = moff;
    ${offsets}
    const long long lim = (r % L) + c0;
    ${body}`)}
}`;
  const sig: ArgType[] = ['ptr', 'ptr', 'ptr', 'i64', 'i32', 'i64', 'i64', 'i64', 'i64', 'i64', 'i64', 'i32', 'i64', 'i64', ...dims.flatMap(() => ['i64', 'i64', 'i64', 'i64'] as ArgType[])];
  return { src, name: 'softmax', sig };
}

/** Other dims of a softmax merged where x, out and mask are all contiguous across them: fewer divisions per row. */
function mergeDims(shape: number[], strides: number[][]): { shape: number[]; strides: number[][] } {
  const s: number[] = [], st: number[][] = strides.map(() => []);
  shape.forEach((size, i) => {
    if (size === 1) return;
    const last = s.length - 1;
    if (last >= 0 && strides.every((a, t) => st[t]![last] === a[i]! * size)) {
      s[last] = s[last]! * size;
      strides.forEach((a, t) => { st[t]![last] = a[i]!; });
    } else {
      s.push(size);
      strides.forEach((a, t) => st[t]!.push(a[i]!));
    }
  });
  return { shape: s, strides: st };
}

const checkRow = (op: string, n: number): void => {
  if (n > 0x7fffffff) throw new UnsupportedError(op, `rows of ${n} elements (at most 2^31 - 1 per row on CUDA)`);
};

export function cudaSoftmax(p: SoftmaxParams): void {
  const { x, out, dim } = p;
  const nd = x.shape.length;
  const n = nd ? x.shape[dim]! : 1;
  const others = [...Array(nd).keys()].filter((d) => d !== dim);
  const rows = others.reduce((a, d) => a * x.shape[d]!, 1);
  if (rows === 0 || n === 0) return;
  checkRow('softmax', n);
  const mask = p.mask;
  const st = (r: StridedRef | undefined, d: number): number => (r ? r.strides[d] ?? 0 : 0);
  const L = nd >= 2 ? x.shape[nd - 2]! : 1;
  // the causal limit needs the row index of the second-to-last dim: merging must not hide it
  const merged = p.causal ? { shape: others.map((d) => x.shape[d]!), strides: [x, out, mask].map((r) => others.map((d) => st(r, d))) }
    : mergeDims(others.map((d) => x.shape[d]!), [x, out, mask].map((r) => others.map((d) => st(r, d))));
  const k = merged.shape.length;
  const xs = st(x, dim), os = st(out, dim);
  const V = n > 1 && xs === 1 && os === 1 ? vectorWidth([x, out], n, [merged.strides[0]!, merged.strides[1]!]) : 1;
  const A = x.dtype === 'float64' || out.dtype === 'float64' ? 'double' : 'float';
  const args = [ptr(x), ptr(out), ptr(mask), rows, n, x.offset, xs, out.offset, os,
    mask?.offset ?? 0, st(mask, dim), p.causal ? 1 : 0, L, p.causalOffset ?? 0,
    ...merged.shape.flatMap((s, i) => [s, merged.strides[0]![i]!, merged.strides[1]![i]!, merged.strides[2]![i]!])];
  const run = (c: Config): void => {
    const plan = rowPlan(n, c.threads as number, V, A);
    const key = `softmax2:${x.dtype}:${out.dtype}:${mask?.dtype ?? '-'}:${k}:${plan.block}:${plan.G}:${plan.K}:${V}:${p.log}:${!!p.negate}:${!!p.safe}`;
    const kern = be.kernel(key, () => softmaxSource(x.dtype, out.dtype, mask?.dtype ?? null, k, plan, p.log, !!p.negate, !!p.safe));
    be.launch(kern, Math.min(Math.ceil(rows / (plan.block / plan.G)), be.smCount * 64), plan.block, args);
  };
  // in place (out is x): a sweep would apply the op several times, so only cached configurations
  const inPlace = ptr(x) === ptr(out);
  const cfg = be.tuning.pick(SOFTMAX_SPACE, `${bucketSize(n)}:${bucketSize(rows)}:${mask ? 'mask' : '-'}:v${V}`, `${x.dtype}>${out.dtype}`, rows * n,
    { threads: defaultThreads(n, V) }, inPlace ? null : run, { candidates: planCandidates(n, V, A) });
  run(cfg);
}

export function rowNormSource(x: DTypeName, out: DTypeName | null, w: DTypeName | null, b: DTypeName | null, stats: DTypeName | null, rms: boolean, plan: RowPlan, simpleAffine: boolean) {
  uniq = 0;
  const A = x === 'float64' ? 'double' : 'float';
  const { K, V, G } = plan;
  const vi = (i: number): string => `v[c * ${V} + ${i}]`, ti = (i: number): string => `t[${i}]`;
  const load = (t: (i: number) => string): string => loadVec(x, 'in', 'xo + e', V, A, t);
  const range = [...Array(V).keys()];
  // affine parameters of elements e..e+V): vector loads for layer/rms norm, per element for group norm
  const param = (d: DTypeName | null, p: string, name: string): string => !d ? ''
    : simpleAffine ? `${A} ${name}[${V}]; ${loadVec(d, p, 'e', V, A, (i) => `${name}[${i}]`)}`
      : `${A} ${name}[${V}]; ${range.map((i) => `${name}[${i}] = (${A})${R.load(d, p, `wbase + (e + ${i}) / chan`)};`).join(' ')}`;
  const writeChunk = (t: (i: number) => string): string => !out ? ''
    : `${param(w, 'wt', 'ww')} ${param(b, 'bs', 'bb')}
      ${storeVec(out, 'o', 'oo + e', V, (i) => `((${t(i)} - mean) * rstd${w ? ` * ww[${i}]` : ''}${b ? ` + bb[${i}]` : ''})`)}`;
  const stats2 = stats ? `if (live && lane == 0) { if (mo) { ${R.store(stats, 'mo', 'moff + r', 'mean')} } if (vo) { ${R.store(stats, 'vo', 'voff + r', 'var_')} } }` : '';
  // layer mode sums x - x[0] (as the CPU kernel): the mean keeps its digits when |mean| >> std; the
  // variance is then summed around that mean from the cached (or re-read) row
  const shift = `const ${A} k = ${rms ? '0' : `live && n > 0 ? (${A})${R.load(x, 'in', 'xo')} : (${A})0`};`;
  const finish = `const ${A} rstd = (${A})1 / sqrt(var_ + (${A})eps);
    ${stats2}`;
  const body = K > 0
    ? `${shift}
    ${A} v[${K * V}];
    #pragma unroll
    for (int i = 0; i < ${K * V}; i++) v[i] = k;
    if (live) {
    ${chunks(plan, () => load(vi))} }
    ${A} s = 0;
    #pragma unroll
    for (int i = 0; i < ${K * V}; i++) s += ${rms ? 'v[i] * v[i]' : 'v[i] - k'};
    s = nbx_group_all<${A}, false, ${G}>(s, sh);
    ${rms ? `const ${A} mean = 0, var_ = s / n;` : `const ${A} mean = k + s / n; ${A} q = 0;
    ${chunks(plan, () => range.map((i) => `{ const ${A} d = ${vi(i)} - mean; q += d * d; }`).join(' '))}
    q = nbx_group_all<${A}, false, ${G}>(q, sh); const ${A} var_ = q / n;`}
    ${finish}
    if (live) {
    ${chunks(plan, () => writeChunk(vi))} }`
    : `${shift}
    ${A} s = 0, t[${V}];
    if (live) {
    ${chunks(plan, () => `${load(ti)} ${range.map((i) => `s += ${rms ? `t[${i}] * t[${i}]` : `t[${i}] - k`};`).join(' ')}`)} }
    s = nbx_group_all<${A}, false, ${G}>(s, sh);
    ${rms ? `const ${A} mean = 0, var_ = s / n;` : `const ${A} mean = k + s / n; ${A} q = 0;
    if (live) {
    ${chunks(plan, () => `${load(ti)} ${range.map((i) => `{ const ${A} d = t[${i}] - mean; q += d * d; }`).join(' ')}`)} }
    q = nbx_group_all<${A}, false, ${G}>(q, sh); const ${A} var_ = q / n;`}
    ${finish}
    if (live) {
    ${chunks(plan, () => `${load(ti)} ${writeChunk(ti)}`)} }`;
  const src = `${GROUP_REDUCE}
extern "C" __global__ void __launch_bounds__(${plan.block}) row_norm(const ${R.storageType(x)}* __restrict__ in, ${out ? R.storageType(out) : 'float'}* __restrict__ o,
  const ${w ? R.storageType(w) : 'float'}* __restrict__ wt, const ${b ? R.storageType(b) : 'float'}* __restrict__ bs,
  ${stats ? R.storageType(stats) : 'float'}* __restrict__ mo, ${stats ? R.storageType(stats) : 'float'}* __restrict__ vo,
  long long rows, int n, long long xoff, long long ooff, long long moff, long long voff, double eps, long long groups, long long cpg, int chan) {
  ${rowLoop(plan, A, `const long long xo = xoff + r * n, oo = ooff + r * n;
    const long long wbase = (r % groups) * cpg;
    ${body}`)}
}`;
  return { src, name: 'row_norm', sig: ['ptr', 'ptr', 'ptr', 'ptr', 'ptr', 'ptr', 'i64', 'i32', 'i64', 'i64', 'i64', 'i64', 'f64', 'i64', 'i64', 'i32'] as ArgType[] };
}

export function cudaRowNorm(p: RowNormParams): void {
  const { x, rows, n } = p;
  if (rows === 0) return;
  checkRow('row_norm', n);
  const stats = p.mean ?? p.var;
  const groups = p.groups ?? 1, chan = p.chan ?? 1;
  const simpleAffine = groups === 1 && chan === 1;
  const A = x.dtype === 'float64' ? 'double' : 'float';
  // weight and bias are read at the row's element index only in the simple case: then they vectorize too
  const V = n > 0 ? vectorWidth([x, p.out, ...(simpleAffine ? [p.weight, p.bias] : [])], n, [[n], [n]]) : 1;
  const args = [ptr(x), ptr(p.out), ptr(p.weight), ptr(p.bias), ptr(p.mean), ptr(p.var),
    rows, n, x.offset, p.out?.offset ?? 0, p.mean?.offset ?? 0, p.var?.offset ?? 0, p.eps, groups, n / chan, chan];
  // weight/bias offsets go into their pointers (the kernel indexes them from 0)
  const at = (r: StridedRef | undefined): bigint => (r ? ptr(r) + BigInt(r.offset * DTYPES[r.dtype].itemsize) : 0n);
  args[2] = at(p.weight); args[3] = at(p.bias);
  const run = (c: Config): void => {
    const plan = rowPlan(n, c.threads as number, V, A);
    const key = `rownorm2:${x.dtype}:${p.out?.dtype ?? '-'}:${p.weight?.dtype ?? '-'}:${p.bias?.dtype ?? '-'}:${stats?.dtype ?? '-'}:${p.mode}:${plan.block}:${plan.G}:${plan.K}:${V}:${simpleAffine}`;
    const k = be.kernel(key, () => rowNormSource(x.dtype, p.out?.dtype ?? null, p.weight?.dtype ?? null, p.bias?.dtype ?? null, stats?.dtype ?? null, p.mode === 'rms', plan, simpleAffine));
    be.launch(k, Math.min(Math.ceil(rows / (plan.block / plan.G)), be.smCount * 64), plan.block, args);
  };
  run(be.tuning.pick(ROWNORM_SPACE, `${bucketSize(n)}:${bucketSize(rows)}:${p.mode}:v${V}`, x.dtype, rows * n, { threads: defaultThreads(n, V) }, run, { candidates: planCandidates(n, V, A) }));
}

// ---- negative log likelihood ---------------------------------------------------------------------

const NLL_BLOCK = 256;

/** Sums (a, b) over the block in a fixed order; thread 0 gets the totals. */
const BLOCK_SUM2 = String.raw`
__device__ __forceinline__ void nbx_block_sum2(double& a, double& b, double* sh) {
  #pragma unroll
  for (int o = 16; o > 0; o >>= 1) { a += __shfl_down_sync(0xffffffffu, a, o); b += __shfl_down_sync(0xffffffffu, b, o); }
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, nw = blockDim.x >> 5;
  if (lane == 0) { sh[2 * warp] = a; sh[2 * warp + 1] = b; }
  __syncthreads();
  if (warp == 0) {
    a = lane < nw ? sh[2 * lane] : 0.0; b = lane < nw ? sh[2 * lane + 1] : 0.0;
    #pragma unroll
    for (int o = 16; o > 0; o >>= 1) { a += __shfl_down_sync(0xffffffffu, a, o); b += __shfl_down_sync(0xffffffffu, b, o); }
  }
}`;

export function nllSource(inD: DTypeName, tD: DTypeName, withWeight: boolean, withOut: boolean) {
  const T = R.storageType(inD), TT = R.storageType(tD);
  const src = `${NARROW_SRC}
${BLOCK_SUM2}
extern "C" __global__ void __launch_bounds__(${NLL_BLOCK}) nll(const ${T}* __restrict__ in, const ${TT}* __restrict__ tgt, const ${T}* __restrict__ w,
  ${T}* __restrict__ out, double* __restrict__ part, unsigned long long* __restrict__ flag,
  long long inoff, long long toff, long long woff, long long ooff, long long items, long long C, long long D, long long ignore, long long chunk) {
  __shared__ double sh[64];
  const long long k0 = blockIdx.x * chunk, k1 = min(items, k0 + chunk);
  double s = 0, ws = 0;
  for (long long k = k0 + threadIdx.x; k < k1; k += blockDim.x) {
    const long long t = (long long)tgt[toff + k];
    double l = 0;
    if (t != ignore) {
      if (t < 0 || t >= C) atomicMax(flag, (unsigned long long)(items - k));
      else {
        const double wt = ${withWeight ? loadD(inD, 'w', 'woff + t') : '1.0'};
        l = -wt * ${loadD(inD, 'in', 'inoff + ((k / D) * C + t) * D + k % D')};
        s += l; ws += wt;
      }
    }
    ${withOut ? storeD(inD, 'out', 'ooff + k', 'l') : ''}
  }
  nbx_block_sum2(s, ws, sh);
  if (threadIdx.x == 0) { part[2 * blockIdx.x] = s; part[2 * blockIdx.x + 1] = ws; }
}`;
  return { src, name: 'nll', sig: ['ptr', 'ptr', 'ptr', 'ptr', 'ptr', 'ptr', 'i64', 'i64', 'i64', 'i64', 'i64', 'i64', 'i64', 'i64', 'i64'] as ArgType[] };
}

/** The blocks' partial sums, added in block order, stored into `sums` (two elements). */
export function nllFinalSource(sD: DTypeName) {
  const src = `${NARROW_SRC}
${BLOCK_SUM2}
extern "C" __global__ void __launch_bounds__(${NLL_BLOCK}) nll_final(const double* __restrict__ part, ${R.storageType(sD)}* __restrict__ sums, long long soff, int nb) {
  __shared__ double sh[64];
  double s = 0, ws = 0;
  for (int b = threadIdx.x; b < nb; b += blockDim.x) { s += part[2 * b]; ws += part[2 * b + 1]; }
  nbx_block_sum2(s, ws, sh);
  if (threadIdx.x == 0) { ${storeD(sD, 'sums', 'soff', 's')} ${storeD(sD, 'sums', 'soff + 1', 'ws')} }
}`;
  return { src, name: 'nll_final', sig: ['ptr', 'ptr', 'i64', 'i32'] as ArgType[] };
}

export function cudaNllLoss(p: NllParams): void {
  const { input, target, N, C, D } = p;
  requireDType('nll_loss', input.dtype, FLOATS);
  requireDType('nll_loss', target.dtype, ['int64', 'uint8']);
  const items = N * D;
  // Fixed chunks per block (a function of the size only): the summation order never changes.
  const nb = Math.max(1, Math.min(1024, Math.ceil(items / 4096)));
  const chunk = Math.max(1, Math.ceil(items / nb));
  const part = be.alloc('float64', 2 * nb, items === 0) as CudaBuffer;
  const flag = be.alloc('int64', 1, true) as CudaBuffer;
  try {
    if (items > 0) {
      const k = be.kernel(`nll:${input.dtype}:${target.dtype}:${!!p.weight}:${!!p.out}`, () => nllSource(input.dtype, target.dtype, !!p.weight, !!p.out));
      be.launch(k, nb, NLL_BLOCK, [basePtr(input), basePtr(target), basePtr(p.weight), basePtr(p.out), part.ptr, flag.ptr,
        input.offset, target.offset, p.weight?.offset ?? 0, p.out?.offset ?? 0, items, C, D, p.ignoreIndex, chunk]);
    }
    const bad = items > 0 ? Number((be.downloadSync(flag, 'int64', 0, 1) as BigInt64Array)[0]!) : 0;
    if (bad > 0) {
      const k = items - bad;
      const t = be.downloadSync(target.buf, target.dtype, target.offset + k, 1)[0]!;
      throw new IndexError('nll_loss', `Target ${t} is out of bounds.`);
    }
    if (p.sums) {
      const f = be.kernel(`nll_final:${p.sums.dtype}`, () => nllFinalSource(p.sums!.dtype));
      be.launch(f, 1, NLL_BLOCK, [part.ptr, basePtr(p.sums), p.sums.offset, nb]);
    }
  } finally { be.free(part); be.free(flag); }
}

// ---- local response normalization ---------------------------------------------------------------

export function lrnSource(dtype: DTypeName, nd: number, dim: number) {
  const T = R.storageType(dtype);
  const dims = [...Array(nd).keys()];
  const decode = dims.slice().reverse().map((d) => `{ const long long c_ = rem % s${d}; rem /= s${d}; xo += c_ * xs${d}; oo += c_ * os${d};${d === dim ? ' c = (int)c_;' : ''} }`).join('\n    ');
  const src = `${NARROW_SRC}
extern "C" __global__ void __launch_bounds__(256) lrn(const ${T}* __restrict__ x, ${T}* __restrict__ out, long long xoff, long long ooff, long long total,
  int lo, int hi, int size, double alpha, double beta, double k${dims.map((d) => `, long long s${d}, long long xs${d}, long long os${d}`).join('')}) {
  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < total; i += (long long)gridDim.x * blockDim.x) {
    long long rem = i, xo = xoff, oo = ooff; int c = 0;
    ${decode}
    const int n = (int)s${dim};
    const int j0 = max(0, c - lo), j1 = min(n - 1, c + hi);
    double s = 0;
    for (int j = j0; j <= j1; j++) { const double v = ${loadD(dtype, 'x', `xo + (long long)(j - c) * xs${dim}`)}; s += v * v; }
    const double y = ${loadD(dtype, 'x', 'xo')} / pow(k + (alpha * s) / size, beta);
    ${storeD(dtype, 'out', 'oo', 'y')}
  }
}`;
  return { src, name: 'lrn', sig: ['ptr', 'ptr', 'i64', 'i64', 'i64', 'i32', 'i32', 'i32', 'f64', 'f64', 'f64', ...dims.flatMap(() => ['i64', 'i64', 'i64'] as ArgType[])] as ArgType[] };
}

export function cudaLocalResponseNorm(p: LrnParams): void {
  const { x, out, dim, size } = p;
  requireDType('local_response_norm', x.dtype, FLOATS);
  const total = numel(x.shape);
  if (total === 0) return;
  const nd = x.shape.length;
  const k = be.kernel(`lrn:${x.dtype}:${nd}:${dim}`, () => lrnSource(x.dtype, nd, dim));
  const st = (r: StridedRef, d: number): number => r.strides[d] ?? 0;
  be.launch(k, be.gridFor(total, 256), 256, [basePtr(x), basePtr(out), x.offset, out.offset, total, Math.floor(size / 2), Math.floor((size - 1) / 2), size,
    p.alpha, p.beta, p.k, ...x.shape.flatMap((s, d) => [s, st(x, d), st(out, d)])]);
}
