// The neural-network row family: softmax (and log/softmin, masks, causal), layer/RMS/group
// normalization rows, negative log-likelihood and local response normalization.

import type { StridedRef } from '../backend/backend.js';

export interface SoftmaxParams {
  /** Input, any strides and float dtype. */
  x: StridedRef;
  /** Output, same shape, contiguous or not, any float dtype; may alias x. */
  out: StridedRef;
  /** The softmax dim (non-negative). */
  dim: number;
  log: boolean;
  /** softmin: softmax of -x. */
  negate?: boolean;
  /** Attention mask over x's shape (broadcast strides allowed): bool (true = keep) or additive float. */
  mask?: StridedRef;
  /** Top-left causal mask on the last two dims: row l keeps columns j <= l + causalOffset. */
  causal?: boolean;
  causalOffset?: number;
  /** Rows that are entirely -inf give 0 instead of NaN (PyTorch's _safe_softmax, used by attention). */
  safe?: boolean;
}

export interface RowNormParams {
  /** Input rows: `rows` rows of `n` elements, row r at x.offset + r*n (contiguous). */
  x: StridedRef;
  rows: number;
  n: number;
  eps: number;
  /** 'layer': (x - mean) * rstd; 'rms': x * rsqrt(mean(x^2) + eps). */
  mode: 'layer' | 'rms';
  /** Normalized output (contiguous, any float dtype); omitted: statistics only. */
  out?: StridedRef;
  /** Affine weight/bias (contiguous). Element j of row r uses index (r % groups)·(n/chan) + floor(j/chan). */
  weight?: StridedRef;
  bias?: StridedRef;
  groups?: number;
  chan?: number;
  /** Per-row statistics outputs (contiguous, `rows` elements): mean and biased variance. */
  mean?: StridedRef;
  var?: StridedRef;
}

export interface NllParams {
  /** Log-probabilities [N, C, D] (contiguous from input.offset): class c of item (i, d) at (i·C + c)·D + d. */
  input: StridedRef;
  /** Class indices [N, D] (contiguous), int64 or uint8. */
  target: StridedRef;
  /** Class weights [C] (contiguous). */
  weight?: StridedRef;
  N: number; C: number; D: number;
  ignoreIndex: number;
  /** Per-item losses [N·D] (reduction 'none'). */
  out?: StridedRef;
  /** Two elements: the sum of -w[t]·input over kept items, and the sum of their weights w[t]. */
  sums?: StridedRef;
}

export interface LrnParams { x: StridedRef; out: StridedRef; dim: number; size: number; alpha: number; beta: number; k: number }

export type SoftmaxKernel = (p: SoftmaxParams) => void;
export type RowNormKernel = (p: RowNormParams) => void;
export type NllLossKernel = (p: NllParams) => void;
export type LocalResponseNormKernel = (p: LrnParams) => void;
