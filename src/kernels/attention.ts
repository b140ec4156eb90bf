// Fused scaled-dot-product attention. Optional: where a backend lacks it, the op composes gemm and
// softmax kernels instead, so the contract is a fast path, not a requirement.

import type { StridedRef } from '../backend/backend.js';

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

export type AttentionKernel = (p: AttentionParams) => void;
