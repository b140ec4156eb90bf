// CUDA hand kernels registered under the same names and signatures as the CPU ones: reductions (warp
// shuffles in a fixed order, so results are identical run to run), scans, GEMM through cuBLASLt, and
// host staging for kernels that have no CUDA implementation yet (announced, never silent).

import { DTYPES, type DTypeName, type StorageArray } from '../../dtype/dtypes.js';
import type { StridedRef } from '../backend.js';
import { registerKernel, setStagingProvider, kernelCpu } from '../registry.js';
import type { ReduceKind, RowLayout, ScanKind } from '../cpu/reduce.js';
import { R, unpack, type CudaBackend, type CudaBuffer } from './backend.js';
import { gemm as ltGemm, CublasLt } from './cublaslt.js';
import { UnsupportedError } from '../../errors.js';
import type { ArgType } from './driver.js';
import { REDUCE_SPACE } from './tuning.js';
import { bucketSize, type Config } from '../../autotune/index.js';
import { installCudaNnKernels } from './nn_kernels.js';
import { installCudaIndexingKernels } from './indexing_kernels.js';
import { installCudaConvKernels } from './conv_kernels.js';
import { installCudaPoolKernels } from './pool_kernels.js';
import { installCudaResampleKernels } from './resample_kernels.js';
import { installCudaFftKernels } from './fft_kernels.js';
import { installCudaLossKernels } from './loss_kernels.js';
import { installCudaAttentionKernels } from './attention_kernels.js';
import { cudaGemv } from './gemv_kernels.js';

let be: CudaBackend;
export function installCudaKernels(backend: CudaBackend): void {
  be = backend;
  registerKernel('reduce', 'cuda', cudaReduce);
  registerKernel('scan', 'cuda', cudaScan);
  registerKernel('gemm', 'cuda', cudaGemm);
  registerKernel('gemm_int', 'cuda', cudaGemmInt);
  installCudaNnKernels(backend);
  installCudaIndexingKernels(backend);
  installCudaConvKernels(backend);
  installCudaPoolKernels(backend);
  installCudaResampleKernels(backend);
  installCudaFftKernels(backend);
  installCudaLossKernels(backend);
  installCudaAttentionKernels(backend);
  setStagingProvider('cuda', hostStaged);
}

const ptr = (r: StridedRef): bigint => (r.buf as CudaBuffer).ptr;

// ---- reductions ----------------------------------------------------------------------------------

/** Per kind: accumulator init, how a raw element enters, how two accumulators merge, the final value. */
function reduceParts(kind: ReduceKind, accT: string, isF: boolean) {
  const NAN = accT === 'double' ? '__longlong_as_double(0x7ff8000000000000LL)' : '0';
  const nanOr = (c: string): string => (isF ? `(isnan(x) || ${c})` : c);
  switch (kind) {
    case 'sum': case 'mean': return { init: '0', enter: 'x', merge: 'a + b', final: kind === 'mean' ? 'a / (double)n' : 'a' };
    case 'prod': return { init: '1', enter: 'x', merge: 'a * b', final: 'a' };
    case 'max': case 'min': {
      const op = kind === 'max' ? '>' : '<';
      return { init: isF ? 'x0' : 'x0', enter: 'x', merge: `(${isF ? 'isnan(a) ? a : isnan(b) ? b : ' : ''}(b ${op} a ? b : a))`, final: 'a', first: true, nan: NAN, nanOr };
    }
    case 'any': return { init: '0', enter: '(x != 0)', merge: '(a != 0 || b != 0)', final: 'a' };
    case 'all': return { init: '1', enter: '(x != 0)', merge: '(a != 0 && b != 0)', final: 'a' };
    case 'count_nonzero': return { init: '0', enter: '(x != 0)', merge: 'a + b', final: 'a' };
    case 'norm': return {
      init: 'NORM_INIT', enter: 'NORM_ENTER(x)', merge: 'NORM_MERGE(a, b)', final: 'NORM_FINAL(a)',
    };
    default: return null;
  }
}

export function reduceSource(kind: ReduceKind, inD: DTypeName, outD: DTypeName, withIdx: boolean, mode: 'row' | 'vertical') {
  const isF = DTYPES[inD].kind === 'float';
  const accT = isF ? 'double' : 'long long';
  const IN = R.storageType(inD), OUT = R.storageType(outD);
  const load = (idx: string): string => `((${accT})${R.load(inD, 'in', idx)})`;
  const store = (v: string): string => R.store(outD, 'out', 'ooff + r', outD === 'int64' ? `(long long)(${v})` : R.castExpr(isF ? 'float64' : 'int64', outD, v));
  const argKind = kind === 'argmax' || kind === 'argmin' || withIdx;
  const cmp = kind === 'max' || kind === 'argmax' ? '>' : '<';
  const norm = '';
  const head = `extern "C" __global__ void red(const ${IN}* __restrict__ in, ${OUT}* __restrict__ out, long long* __restrict__ oidx,
  long long rows, long long n, long long rs, long long cs, long long off, long long ooff, long long ioff, double p)`;
  // Thread-local pass, then a fixed-order tree: warp shuffles, then warp leaders through shared memory.
  if (mode === 'vertical') {
    // One thread per output row; consecutive threads read consecutive addresses.
    let bodyV: string;
    if (argKind) {
      bodyV = `${accT} a = ${load('off + r * rs')}; long long ai = 0;
    for (long long j = 1; j < n; j++) { ${accT} x = ${load('off + r * rs + j * cs')}; if (${isF ? 'isnan(a) ? false : isnan(x) ||' : ''} x ${cmp} a) { a = x; ai = j; } }
    ${kind === 'argmax' || kind === 'argmin' ? R.store(outD, 'out', 'ooff + r', 'ai') : store('a')}
    if (oidx) oidx[ioff + r] = ai;`;
    } else if (kind === 'var' || kind === 'logsumexp') {
      bodyV = kind === 'var'
        ? `double s = 0; for (long long j = 0; j < n; j++) s += ${load('off + r * rs + j * cs')}; double mean = s / n; double q = 0;
    for (long long j = 0; j < n; j++) { double d = ${load('off + r * rs + j * cs')} - mean; q += d * d; } double a = q / fmax(0.0, (double)n - p); ${store('a')}`
        : `double m = __longlong_as_double(0xfff0000000000000LL); for (long long j = 0; j < n; j++) { double x = ${load('off + r * rs + j * cs')}; if (x > m || isnan(x)) m = x; }
    double sh = isinf(m) ? 0.0 : m; double s = 0; for (long long j = 0; j < n; j++) s += exp(${load('off + r * rs + j * cs')} - sh); double a = log(s) + sh; ${store('a')}`;
    } else {
      const P = reduceParts(kind, accT, isF)!;
      bodyV = `${accT} a = ${P.init === 'x0' ? load('off + r * rs') : P.init};
    for (long long j = 0; j < n; j++) { ${accT} x = ${load('off + r * rs + j * cs')}; ${accT} b = ${P.enter}; a = ${P.merge}; }
    ${store(P.final)}`;
    }
    return `${norm}${head} {
  for (long long r = blockIdx.x * (long long)blockDim.x + threadIdx.x; r < rows; r += (long long)gridDim.x * blockDim.x) {
    ${bodyV}
  }
}`;
  }
  // row mode: a block per row
  const blockReduce = (v: string, merge: string, T: string): string => `{
      for (int o = 16; o > 0; o >>= 1) { ${T} b = __shfl_down_sync(0xffffffffu, ${v}, o); ${T} a = ${v}; ${v} = ${merge}; }
      if ((threadIdx.x & 31) == 0) sh_${T.replace(' ', '')}[threadIdx.x >> 5] = ${v};
      __syncthreads();
      if (threadIdx.x < 32) {
        ${v} = threadIdx.x < (blockDim.x >> 5) ? sh_${T.replace(' ', '')}[threadIdx.x] : ${v}_id;
        for (int o = 16; o > 0; o >>= 1) { ${T} b = __shfl_down_sync(0xffffffffu, ${v}, o); ${T} a = ${v}; ${v} = ${merge}; }
        if (threadIdx.x == 0) sh_${T.replace(' ', '')}[32] = ${v};
      }
      __syncthreads();
      ${v} = sh_${T.replace(' ', '')}[32];
      __syncthreads();
    }`;
  let body: string;
  if (argKind) {
    // (value, index) pairs: NaN first, then the better value, then the lower index — deterministic.
    const better = `(${isF ? 'isnan(bv) && !isnan(av) ? true : isnan(av) ? (isnan(bv) && bi < ai) :' : ''} (bv ${cmp} av || (bv == av && bi < ai)))`;
    body = `${accT} av = ${load('off + r * rs')}; long long ai = 0;
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
    __syncthreads();`;
    return `${head} {
  __shared__ ${accT} shv[32]; __shared__ long long shi[32];
  for (long long r = blockIdx.x; r < rows; r += gridDim.x) {
    ${body}
  }
}`;
  }
  if (kind === 'var' || kind === 'logsumexp') {
    const first = kind === 'var'
      ? `double sm = 0; for (long long j = threadIdx.x; j < n; j += blockDim.x) sm += ${load('off + r * rs + j * cs')}; double sm_id = 0;
    ${blockReduce('sm', 'a + b', 'double')}
    const double mean = sm / n; double q = 0, q_id = 0;
    for (long long j = threadIdx.x; j < n; j += blockDim.x) { double d = ${load('off + r * rs + j * cs')} - mean; q += d * d; }
    ${blockReduce('q', 'a + b', 'double')}
    if (threadIdx.x == 0) { double v = q / fmax(0.0, (double)n - p); ${store('v')} }`
      : `double m = __longlong_as_double(0xfff0000000000000LL), m_id = m; for (long long j = threadIdx.x; j < n; j += blockDim.x) { double x = ${load('off + r * rs + j * cs')}; if (x > m || isnan(x)) m = x; }
    ${blockReduce('m', '(isnan(a) || b > a || isnan(b)) ? (isnan(a) ? a : b) : a', 'double')}
    const double shf = isinf(m) ? 0.0 : m; double s = 0, s_id = 0;
    for (long long j = threadIdx.x; j < n; j += blockDim.x) s += exp(${load('off + r * rs + j * cs')} - shf);
    ${blockReduce('s', 'a + b', 'double')}
    if (threadIdx.x == 0) { double v = log(s) + shf; ${store('v')} }`;
    return `${head} {
  __shared__ double sh_double[33];
  for (long long r = blockIdx.x; r < rows; r += gridDim.x) {
    ${first}
  }
}`;
  }
  const P = reduceParts(kind, accT, isF)!;
  const init = P.init === 'x0' ? load('off + r * rs') : P.init;
  const step = (x: string): string => `{ ${accT} x = ${x}; ${accT} b = ${P.enter}; ${accT} a = acc; acc = ${P.merge}; }`;
  const VEC = 16 / DTYPES[inD].itemsize;
  // contiguous, 16-byte aligned rows: one 16-byte load per thread per step (half types need it to
  // reach full bandwidth); the scalar loop covers the rest. Same order every run for a given shape.
  body = `${accT} acc = ${init}; const ${accT} acc_id = acc;
    const long long base = off + r * rs;
    long long j0 = 0;
    if (cs == 1 && (base % ${VEC}) == 0 && (((unsigned long long)in) & 15) == 0) {
      const uint4* p4 = reinterpret_cast<const uint4*>(in + base);
      const long long nv = n / ${VEC};
      for (long long q = threadIdx.x; q < nv; q += blockDim.x) {
        const uint4 w = p4[q]; const ${IN} e[${VEC}] = { ${unpack(inD, 'w', VEC)} };
        #pragma unroll
        for (int k = 0; k < ${VEC}; k++) ${step(`((${accT})${R.load(inD, 'e', 'k')})`)}
      }
      j0 = nv * ${VEC};
    }
    for (long long j = j0 + threadIdx.x; j < n; j += blockDim.x) ${step(load('base + j * cs'))}
    ${blockReduce('acc', P.merge, accT)}
    if (threadIdx.x == 0) { ${accT} a = acc; ${store(P.final)} }`;
  return `${norm}${head} {
  __shared__ ${accT} sh_${accT.replace(' ', '')}[33];
  for (long long r = blockIdx.x; r < rows; r += gridDim.x) {
    ${body}
  }
}`;
}

const RED_SIG: ArgType[] = ['ptr', 'ptr', 'ptr', 'i64', 'i64', 'i64', 'i64', 'i64', 'i64', 'i64', 'f64'];

/** Kinds whose partial results over chunks combine with a (possibly different) second kind. */
function secondStage(kind: ReduceKind, params: number[]): ReduceKind | null {
  switch (kind) {
    case 'sum': case 'prod': case 'max': case 'min': case 'any': case 'all': case 'mean': return kind; // mean of equal-size chunk means
    case 'count_nonzero': return 'sum';
    case 'norm': return params[0] === 0 ? 'sum' : 'norm';
    default: return null;
  }
}

/** A divisor of n in [lo, hi], preferring large ones; 0 if none. */
function divisorIn(n: number, lo: number, hi: number): number {
  for (let g = Math.min(hi, n); g >= lo; g--) if (n % g === 0) return g;
  return 0;
}

/**
 * A few long rows (a full reduction, say) would leave most SMs idle with a block per row: split each
 * row into G equal chunks, reduce chunks into a temporary (float64 for floats), then reduce the
 * partials. G depends only on the shape and the SM count, so the order (and the result) is fixed.
 */
function splitReduce(kind: ReduceKind, input: StridedRef, rows: number, n: number, params: number[], out: StridedRef, lay: RowLayout): boolean {
  const second = secondStage(kind, params);
  if (!second || lay.colStride !== 1 || (rows > 1 && lay.rowStride !== n) || n < (1 << 16) || rows >= be.smCount) return false;
  const target = Math.max(2, Math.floor((be.smCount * 8) / rows));
  const G = divisorIn(n, Math.max(2, Math.floor(target / 4)), target);
  if (!G || n / G < 1024) return false;
  const isF = DTYPES[input.dtype].kind === 'float';
  const tmpD: DTypeName = kind === 'max' || kind === 'min' || kind === 'any' || kind === 'all' ? out.dtype
    : kind === 'count_nonzero' ? 'int64' : isF ? 'float64' : out.dtype === 'int64' ? 'int64' : 'float64';
  const tmp = be.alloc(tmpD, rows * G);
  const tmpRef: StridedRef = { buf: tmp, dtype: tmpD, shape: [rows * G], strides: [1], offset: 0 };
  try {
    cudaReduce(kind, input, rows * G, n / G, params, tmpRef, undefined, { rowStride: n / G, colStride: 1 });
    cudaReduce(second, tmpRef, rows, G, params, out, undefined, { rowStride: G, colStride: 1 });
  } finally { be.free(tmp); } // stream-ordered: the allocator hands it out again only to later work
  return true;
}

export function cudaReduce(kind: ReduceKind, input: StridedRef, rows: number, n: number, params: number[], out: StridedRef,
  outIndex?: StridedRef, layout?: RowLayout): void {
  be.checkDType(kind, input.dtype);
  const lay = layout ?? { rowStride: n, colStride: 1 };
  if (!outIndex && splitReduce(kind, input, rows, n, params, out, lay)) return;
  const vertical = lay.rowStride === 1 && lay.colStride !== 1 && rows >= 1024;
  const mode = vertical ? 'vertical' : 'row';
  const key = `red:${kind}:${input.dtype}:${out.dtype}:${!!outIndex}:${mode}`;
  const k = be.kernel(key, () => ({ src: reduceSource(kind, input.dtype, out.dtype, !!outIndex, mode), name: 'red', sig: RED_SIG }));
  const args = [ptr(input), ptr(out), outIndex ? ptr(outIndex) : 0n, rows, n, lay.rowStride, lay.colStride,
    input.offset, out.offset, outIndex?.offset ?? 0, params[0] ?? 0];
  if (vertical) { be.launch(k, be.gridFor(rows, 256), 256, args); return; }
  const run = (c: Config): void => be.launch(k, Math.min(rows, be.smCount * 32), c.threads as number, args);
  const fallback = be.tuning.rowDefault(n);
  const cls = kind === 'var' || kind === 'logsumexp' ? 'twopass' : outIndex || kind === 'argmax' || kind === 'argmin' ? 'arg' : 'simple';
  run(be.tuning.pick(REDUCE_SPACE, `${cls}:${bucketSize(n)}:${bucketSize(rows)}`, `${DTYPES[input.dtype].itemsize}B`, rows * n, fallback, run));
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

// ---- GEMM ----------------------------------------------------------------------------------------

export interface GemmParams {
  transA: boolean; transB: boolean; m: number; n: number; k: number; alpha: number; beta: number;
  a: StridedRef; lda: number; b: StridedRef; ldb: number; c: StridedRef; ldc: number;
  batch?: number; strideA?: number; strideB?: number; strideC?: number; bias?: StridedRef;
}

/** Whether float32 GEMMs may use TF32 tensor cores (off by default, as torch.backends.cuda.matmul.allow_tf32). */
export const cudaMatmulSettings = { allowTF32: false };

/** cuBLASLt's scratch space: without one its heuristics only offer slower algorithms (32 MiB as NVIDIA recommends for Hopper). */
let workspaceReady = false;
function ensureWorkspace(): void {
  if (workspaceReady) return;
  const bytes = 32 << 20;
  const ws = be.alloc('uint8', bytes) as CudaBuffer;
  CublasLt.get(be.ctx).setDefaultWorkspace({ ptr: ws.ptr, bytes });
  workspaceReady = true;
}

export function cudaGemm(p: GemmParams): void {
  ensureWorkspace();
  if (p.k === 0 && p.beta === 0) {
    // an empty inner dimension: C = 0 (cuBLASLt refuses k = 0)
    const isz = DTYPES[p.c.dtype].itemsize, batch = p.batch ?? 1;
    const dense = p.ldc === p.n && (batch === 1 || p.strideC === p.m * p.n);
    if (!dense) throw new UnsupportedError('matmul', 'k = 0 with a strided output is not supported on cuda');
    if (p.m * p.n * batch > 0) be.ctx.memsetD8(ptr(p.c) + BigInt(p.c.offset * isz), 0, p.m * p.n * batch * isz, be.stream);
    return;
  }
  const d = p.c.dtype;
  if (d !== 'float32' && d !== 'float16' && d !== 'bfloat16' && d !== 'float64') throw new UnsupportedError('matmul', `cuda GEMM supports float32, float64, float16 and bfloat16, got ${d}`);
  // m ≤ 16 (or mv's n ≤ 16): the weight-streaming GEMV kernel unless the tuner measured cuBLASLt faster
  if ((p.m <= 16 || p.n <= 16) && d !== 'float64' && (p.batch ?? 1) === 1 && cudaGemv(be, p, () => cublasGemm(p))) return;
  cublasGemm(p);
}

function cublasGemm(p: GemmParams): void {
  const d = p.c.dtype as 'float32' | 'float16' | 'bfloat16' | 'float64';
  const isz = DTYPES[d].itemsize;
  const at = (r: StridedRef): bigint => ptr(r) + BigInt(r.offset * isz);
  ltGemm({
    ctx: be.ctx, stream: be.stream, dtype: d, transA: p.transA, transB: p.transB, m: p.m, n: p.n, k: p.k,
    A: at(p.a), lda: p.lda, B: at(p.b), ldb: p.ldb, C: at(p.c), ldc: p.ldc, alpha: p.alpha, beta: p.beta,
    batch: p.batch ?? 1, strideA: p.strideA, strideB: p.strideB, strideC: p.strideC,
    bias: p.bias ? at(p.bias) : undefined, allowTF32: cudaMatmulSettings.allowTF32,
  });
}

/**
 * Integer products (PyTorch computes them exactly with wrap-around; cuBLAS has no integer GEMM for
 * these dtypes): one thread per output element, 64-bit unsigned accumulation, so the result is the
 * CPU's modulo 2^64 and then the dtype's width.
 */
export function gemmIntSource(d: DTypeName) {
  const T = R.storageType(d);
  const src = `extern "C" __global__ void gemm_int(const ${T}* __restrict__ A, const ${T}* __restrict__ B, ${T}* __restrict__ C,
  long long m, long long n, long long k, int ta, int tb, long long lda, long long ldb, long long ldc,
  long long oa, long long ob, long long oc, long long sa, long long sb, long long sc, long long batch, long long alpha, long long beta) {
  const long long total = batch * m * n;
  for (long long t = blockIdx.x * (long long)blockDim.x + threadIdx.x; t < total; t += (long long)gridDim.x * blockDim.x) {
    const long long q = t / (m * n), i = (t / n) % m, j = t % n;
    const ${T}* a = A + oa + q * sa; const ${T}* b = B + ob + q * sb;
    unsigned long long acc = 0;
    for (long long l = 0; l < k; l++) {
      const long long x = (long long)a[ta ? l * lda + i : i * lda + l], y = (long long)b[tb ? j * ldb + l : l * ldb + j];
      acc += (unsigned long long)x * (unsigned long long)y;
    }
    ${T}* c = C + oc + q * sc + i * ldc + j;
    unsigned long long r = (unsigned long long)alpha * acc;
    if (beta != 0) r += (unsigned long long)beta * (unsigned long long)(long long)*c;
    *c = (${T})r;
  }
}`;
  return { src, name: 'gemm_int', sig: ['ptr', 'ptr', 'ptr', 'i64', 'i64', 'i64', 'i32', 'i32', 'i64', 'i64', 'i64', 'i64', 'i64', 'i64', 'i64', 'i64', 'i64', 'i64', 'i64', 'i64'] as ArgType[] };
}

export function cudaGemmInt(p: GemmParams): void {
  const d = p.c.dtype;
  be.checkDType('matmul', d);
  const batch = p.batch ?? 1;
  if (batch === 0 || p.m === 0 || p.n === 0) return;
  const k = be.kernel(`gemm_int:${d}`, () => gemmIntSource(d));
  be.launch(k, be.gridFor(batch * p.m * p.n, 256), 256, [ptr(p.a), ptr(p.b), ptr(p.c), p.m, p.n, p.k, p.transA ? 1 : 0, p.transB ? 1 : 0,
    p.lda, p.ldb, p.ldc, p.a.offset, p.b.offset, p.c.offset, p.strideA ?? 0, p.strideB ?? 0, p.strideC ?? 0, batch, Math.trunc(p.alpha), Math.trunc(p.beta)]);
}

// ---- host staging ----------------------------------------------------------------------------------

const announced = new Set<string>();
export const stagingStats = new Map<string, number>();

function isRef(v: unknown): v is StridedRef {
  return v !== null && typeof v === 'object' && 'buf' in v && 'dtype' in v && 'strides' in v && 'offset' in v;
}

/**
 * Runs a CPU kernel on CUDA tensors by copying their buffers to the host and back. Used only for
 * kernels without a CUDA implementation yet; announced once per kernel on stderr, counted in
 * stagingStats, and refused altogether with NBX_CUDA_HOST_STAGING=0.
 */
function hostStaged(name: string): (...args: unknown[]) => unknown {
  const cpu = kernelCpu(name);
  return (...args: unknown[]) => {
    if (process.env.NBX_CUDA_HOST_STAGING === '0') throw new UnsupportedError(name, `no CUDA kernel for '${name}' yet, and host staging is off (NBX_CUDA_HOST_STAGING=0)`);
    if (!announced.has(name)) {
      announced.add(name);
      process.stderr.write(`nbx: '${name}' has no CUDA kernel yet; it runs on the host with copies (set NBX_CUDA_HOST_STAGING=0 to refuse)\n`);
    }
    stagingStats.set(name, (stagingStats.get(name) ?? 0) + 1);
    const host = new Map<unknown, { arr: StorageArray; dtype: DTypeName }>();
    const mapRef = (r: StridedRef): StridedRef => {
      let h = host.get(r.buf);
      if (!h) {
        const b = r.buf as CudaBuffer;
        const lanes = DTYPES[r.dtype].lanes, isz = DTYPES[r.dtype].itemsize;
        h = { arr: be.downloadSync(b, r.dtype, 0, Math.floor(b.bytes / isz)) as StorageArray, dtype: r.dtype };
        void lanes;
        host.set(r.buf, h);
      }
      return { ...r, buf: h.arr };
    };
    const mapArg = (v: unknown, depth: number): unknown => {
      if (isRef(v)) return mapRef(v);
      if (depth < 2 && v !== null && typeof v === 'object' && !ArrayBuffer.isView(v) && Object.getPrototypeOf(v) === Object.prototype) {
        return Object.fromEntries(Object.entries(v).map(([k, x]) => [k, mapArg(x, depth + 1)]));
      }
      if (depth < 2 && Array.isArray(v)) return v.map((x) => mapArg(x, depth + 1));
      return v;
    };
    const result = cpu(...args.map((a) => mapArg(a, 0)));
    for (const [buf, h] of host) be.ctx.copyHtoD((buf as CudaBuffer).ptr, h.arr, h.arr.byteLength, be.stream);
    be.stream.synchronize();
    return result;
  };
}
