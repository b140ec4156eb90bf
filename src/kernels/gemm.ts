// The matrix-product family: c = alpha·op(a)@op(b) + beta·c over row-major matrices
// (lda/ldb/ldc are row strides; transA/transB read a or b transposed), optionally batched. `gemm` takes float dtypes, `gemm_int`
// integer ones (exact, wrapping like PyTorch).

import type { StridedRef } from '../backend/backend.js';

/** Parameters of gemm and gemm_int. */
export interface GemmParams {
  transA: boolean; transB: boolean;
  m: number; n: number; k: number;
  alpha: number; beta: number;
  a: StridedRef; lda: number;
  b: StridedRef; ldb: number;
  c: StridedRef; ldc: number;
  /** Number of independent products; element strides between consecutive A, B, C matrices. */
  batch?: number; strideA?: number; strideB?: number; strideC?: number;
  /** A row bias [n] added in the epilogue (c = alpha·a@b + bias); only where the backend's features say biasEpilogue. */
  bias?: StridedRef;
}

export type GemmKernel = (p: GemmParams) => void;

/**
 * What a backend's gemm accepts beyond the float32/float64 contract; the op layer reads these instead
 * of branching on a device name.
 */
export interface GemmFeatures {
  /** float16/bfloat16 operands multiply natively (float32 accumulation); otherwise the op widens them to float32 first. */
  halfInputs: boolean;
  /** `bias` is applied in the epilogue, so linear's bias needs no copy into C first. */
  biasEpilogue: boolean;
}
