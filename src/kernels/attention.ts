// Fused scaled-dot-product attention. Optional: where a backend lacks it, the op composes gemm and
// softmax kernels instead, so the contract is a fast path, not a requirement.

import type { StridedRef } from '../backend/backend.js';
import type { DTypeName } from '../dtype/dtypes.js';

/** Parameters of the 'attention' kernel (device-neutral: StridedRefs + numbers). */
export interface AttentionParams {
  /** [B, H, L, D]; last stride 1. */
  q: StridedRef;
  /** [B, H / rep, S, D]; last stride 1. */
  k: StridedRef;
  v: StridedRef;
  /** [B, H, L, D] (written). */
  out: StridedRef;
  /** [B, H, L, S] with broadcast strides: bool (true = keep) or additive float. */
  mask?: StridedRef;
  causal: boolean;
  scale: number;
  /** Query heads per key/value head (GQA), 1 without grouping. */
  rep: number;
}

export interface AttentionKernel {
  (p: AttentionParams): void;
  /**
   * The head dims (query/key = value) the kernel takes for `dtype` on the device it runs on, a fact of that
   * device (the op takes the composed path for others). Absent: 64 and 128.
   */
  headDims?: (dtype: DTypeName) => readonly number[];
}
