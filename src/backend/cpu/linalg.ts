// CPU kernels: linalg. `gemm` is the one matrix-multiply primitive every op (matmul, conv via im2col,
// linear, ...) lowers to: row-major C = alpha·op(A)·op(B) + beta·C, float32/float64, optionally batched.
// It goes to the system BLAS when one was found (src/backend/cpu/blas.ts), else to a packed JS kernel.

import { UnsupportedError } from '../../errors.js';
import type { StridedRef } from '../backend.js';
import { registerKernel } from '../registry.js';
import { blasGemm, getBlas } from './blas.js';

export interface GemmParams {
  transA: boolean; transB: boolean;
  m: number; n: number; k: number;
  alpha: number; beta: number;
  a: StridedRef; lda: number;
  b: StridedRef; ldb: number;
  c: StridedRef; ldc: number;
  /** Number of independent products; element strides between consecutive A, B, C matrices. */
  batch?: number; strideA?: number; strideB?: number; strideC?: number;
}

type FArr = Float32Array | Float64Array;

/** Reference kernel (correct for every layout); the fast paths are checked against it. */
function gemmJs(p: GemmParams, A: FArr, B: FArr, C: FArr, offA: number, offB: number, offC: number): void {
  const { m, n, k, alpha, beta, lda, ldb, ldc, transA, transB } = p;
  const row = new Float64Array(n);
  for (let i = 0; i < m; i++) {
    row.fill(0);
    for (let l = 0; l < k; l++) {
      const av = A[offA + (transA ? l * lda + i : i * lda + l)]!;
      if (av === 0) continue;
      if (transB) for (let j = 0; j < n; j++) row[j] += av * B[offB + j * ldb + l]!;
      else { const bo = offB + l * ldb; for (let j = 0; j < n; j++) row[j] += av * B[bo + j]!; }
    }
    const co = offC + i * ldc;
    // beta == 0 overwrites C (NaN in C is ignored, as BLAS and PyTorch do).
    if (beta === 0) for (let j = 0; j < n; j++) C[co + j] = alpha * row[j]!;
    else for (let j = 0; j < n; j++) C[co + j] = alpha * row[j]! + beta * C[co + j]!;
  }
}

export function gemm(p: GemmParams): void {
  const dt = p.c.dtype;
  if ((dt !== 'float32' && dt !== 'float64') || p.a.dtype !== dt || p.b.dtype !== dt) {
    throw new UnsupportedError('gemm', `CPU gemm takes float32 or float64 operands of one dtype, got ${p.a.dtype}, ${p.b.dtype} -> ${p.c.dtype}`);
  }
  const batch = p.batch ?? 1;
  const { m, n, k } = p;
  if (batch === 0 || m === 0 || n === 0) return;
  const A = p.a.buf as FArr, B = p.b.buf as FArr, C = p.c.buf as FArr;
  const blas = k > 0 && blasLayoutOk(p) ? getBlas() : null;
  for (let q = 0; q < batch; q++) {
    const oa = p.a.offset + q * (p.strideA ?? 0), ob = p.b.offset + q * (p.strideB ?? 0), oc = p.c.offset + q * (p.strideC ?? 0);
    if (blas) blasGemm(blas, p.transA, p.transB, m, n, k, p.alpha, A, oa, p.lda, B, ob, p.ldb, p.beta, C, oc, p.ldc);
    else gemmJs(p, A, B, C, oa, ob, oc);
  }
}

/** BLAS insists on leading dimensions of at least the row length (and 1); the JS kernel takes any. */
function blasLayoutOk(p: GemmParams): boolean {
  return p.lda >= Math.max(1, p.transA ? p.m : p.k) && p.ldb >= Math.max(1, p.transB ? p.k : p.n) && p.ldc >= Math.max(1, p.n);
}

registerKernel('gemm', 'cpu', gemm);

type IArr = Int8Array | Uint8Array | Int16Array | Int32Array | BigInt64Array;

/** The largest magnitude in a rows×cols block (as a double: only compared against 2^53). */
function maxAbs(arr: IArr, off: number, rows: number, cols: number, ld: number): number {
  let mx = 0;
  for (let r = 0; r < rows; r++) {
    for (let c = 0; c < cols; c++) { const v = Math.abs(Number(arr[off + r * ld + c]!)); if (v > mx) mx = v; }
  }
  return mx;
}

/**
 * Integer gemm (same parameters as `gemm`; alpha and beta integers): exact, then wrapped to the
 * output dtype as PyTorch's integer arithmetic does. Sums stay in doubles while they provably fit in
 * 2^53, else the matrix goes through BigInt.
 */
export function gemmInt(p: GemmParams): void {
  const { m, n, k, transA, transB, lda, ldb, ldc } = p;
  const batch = p.batch ?? 1;
  if (batch === 0 || m === 0 || n === 0) return;
  const A = p.a.buf as IArr, B = p.b.buf as IArr, C = p.c.buf as IArr;
  const big = C instanceof BigInt64Array;
  for (let q = 0; q < batch; q++) {
    const oa = p.a.offset + q * (p.strideA ?? 0), ob = p.b.offset + q * (p.strideB ?? 0), oc = p.c.offset + q * (p.strideC ?? 0);
    const safe = Math.abs(p.alpha) * k * maxAbs(A, oa, transA ? k : m, transA ? m : k, lda) * maxAbs(B, ob, transB ? n : k, transB ? k : n, ldb)
      + Math.abs(p.beta) * maxAbs(C, oc, m, n, ldc) < 2 ** 53;
    for (let i = 0; i < m; i++) {
      for (let j = 0; j < n; j++) {
        const ia = (l: number): number => oa + (transA ? l * lda + i : i * lda + l);
        const ib = (l: number): number => ob + (transB ? j * ldb + l : l * ldb + j);
        const ic = oc + i * ldc + j;
        if (safe) {
          let acc = 0;
          for (let l = 0; l < k; l++) acc += Number(A[ia(l)]!) * Number(B[ib(l)]!);
          const r = p.alpha * acc + (p.beta === 0 ? 0 : p.beta * Number(C[ic]!));
          // Typed-array stores wrap modulo 2^bits, as the integer dtype does.
          if (big) (C as BigInt64Array)[ic] = BigInt(r);
          else (C as Int32Array)[ic] = r;
        } else {
          let acc = 0n;
          for (let l = 0; l < k; l++) acc += BigInt(A[ia(l)]!) * BigInt(B[ib(l)]!);
          const r = BigInt(p.alpha) * acc + (p.beta === 0 ? 0n : BigInt(p.beta) * BigInt(C[ic]!));
          if (big) (C as BigInt64Array)[ic] = BigInt.asIntN(64, r);
          else (C as Int32Array)[ic] = Number(BigInt.asIntN(32, r));
        }
      }
    }
  }
}

registerKernel('gemm_int', 'cpu', gemmInt);
