// CUDA hand kernels registered under the same names and signatures as the CPU ones: reductions
// (reduce_kernels.ts), scans, GEMM through cuBLASLt, and
// host staging for kernels that have no CUDA implementation yet (announced, never silent).

import { DTYPES, type DTypeName, type StorageArray } from '../../../dtype/dtypes.js';
import type { StridedRef } from '../../backend.js';
import { registerKernels, registerKernelFeatures, setStagingProvider, kernelCpu } from '../../../kernels/registry.js';
import type { BackendKernels, KernelName } from '../../../kernels/table.js';
import * as attention from './attention.js';
import * as conv from './conv.js';
import * as fft from './fft.js';
import * as indexing from './indexing.js';
import * as loss from './loss.js';
import * as nn from './nn.js';
import * as pool from './pool.js';
import * as reduce from './reduce.js';
import * as resample from './resample.js';
import * as sort from './sort.js';
import { R, type CudaBackend, type CudaBuffer } from '../runtime/backend.js';
import { gemm as ltGemm, CublasLt } from '../runtime/cublaslt.js';
import { UnsupportedError } from '../../../errors.js';
import type { ArgType } from '../runtime/driver.js';
import { cudaGemv } from './gemv.js';
import type { ScanKind } from '../../../kernels/reduce.js';
import type { GemmParams } from '../../../kernels/gemm.js';
export { reduceSource, cudaReduce } from './reduce.js';

let be: CudaBackend;

const FAMILIES = [reduce, nn, loss, indexing, sort, conv, pool, resample, fft, attention];

/** Every kernel the CUDA backend implements itself; the CPU's others run through host staging. */
export const cudaKernels: BackendKernels = {
  ...reduce.kernels, scan: cudaScan, gemm: cudaGemm, gemm_int: cudaGemmInt, ...nn.kernels, ...loss.kernels, ...indexing.kernels,
  ...sort.kernels, ...conv.kernels, ...pool.kernels, ...resample.kernels, ...fft.kernels, ...attention.kernels,
};

export function installCudaKernels(backend: CudaBackend): void {
  be = backend;
  for (const family of FAMILIES) family.bind(backend);
  registerKernels('cuda', cudaKernels);
  // cuBLASLt multiplies float16/bfloat16 natively and adds linear's bias in its epilogue.
  registerKernelFeatures('cuda', { gemm: { halfInputs: true, biasEpilogue: true } });
  setStagingProvider('cuda', hostStaged);
}

const ptr = (r: StridedRef): bigint => (r.buf as CudaBuffer).ptr;

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
function hostStaged(name: KernelName): (...args: unknown[]) => unknown {
  const cpu = kernelCpu(name) as (...args: unknown[]) => unknown;
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
