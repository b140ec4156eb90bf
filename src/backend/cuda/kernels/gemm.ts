// CUDA's gemm and gemm_int. Float products go to cuBLASLt, except few-row products (m ≤ 16, or mv's
// n ≤ 16), which the tuner may send to the weight-streaming GEMV kernels (gemv.ts) or cuBLAS's
// matrix-vector path; integer products run an exact one-thread-per-element kernel.

import { DTYPES, type DTypeName } from '../../../dtype/dtypes.js';
import type { StridedRef } from '../../backend.js';
import type { BackendKernels } from '../../../kernels/table.js';
import type { GemmParams } from '../../../kernels/gemm.js';
import { R, type CudaBackend, type CudaBuffer } from '../runtime/backend.js';
import { gemm as ltGemm, CublasLt } from '../runtime/cublaslt.js';
import type { ArgType } from '../runtime/driver.js';
import { UnsupportedError } from '../../../errors.js';
import { cudaGemv } from './gemv.js';
import { basePtr as ptr } from './util.js';

let be: CudaBackend;
export const kernels = {
  gemm: cudaGemm,
  gemm_int: cudaGemmInt,
} satisfies BackendKernels;

/** Points this family's kernels at the backend (called once, when the backend starts). */
export function bind(backend: CudaBackend): void {
  be = backend;
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
