// The pooling family: max/avg pooling with windows, and adaptive pooling, over three spatial dims.

import type { StridedRef } from '../backend/backend.js';

export interface PoolKernelParams {
  kind: 'max' | 'avg';
  /** [B, D, H, W], contiguous. */
  x: StridedRef;
  /** [B, oD, oH, oW], contiguous, same dtype as x. */
  out: StridedRef;
  /** int64 [B, oD, oH, oW] (max only): flat index into the input's D*H*W plane. */
  indices: StridedRef | null;
  kernel: number[]; stride: number[]; padding: number[]; dilation: number[];
  countIncludePad: boolean;
  divisor: number | null;
}

export interface AdaptivePoolKernelParams {
  kind: 'max' | 'avg';
  x: StridedRef; out: StridedRef; indices: StridedRef | null;
}

export type PoolKernel = (p: PoolKernelParams) => void;
export type AdaptivePoolKernel = (p: AdaptivePoolKernelParams) => void;
