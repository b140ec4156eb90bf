// The contract of the whole-step decode kernel (nbx.llm.fused_decode_step): one launch computes a
// decode step of B sequences of a pre-norm Llama-family decoder, from the token ids to the logits and
// their argmax, instead of about ten launches per layer. A backend without it runs the op's composite.

import type { StridedRef } from '../backend/backend.js';
import type { QuantLayout } from './quant.js';

/**
 * A projection's weight [N, K] packed by nbx.quant (src/quant/formats.ts defines the values): uint8 qdata
 * [N, rowBytes] and float32 scales (and zeros), all contiguous. A kernel declines the formats it does not read.
 */
export interface DecodeStepQuantWeight { layout: QuantLayout; qdata: StridedRef; scales: StridedRef | null; zeros: StridedRef | null }
/** A projection's weight: the model dtype [N, K], or packed. */
export type DecodeStepWeight = StridedRef | DecodeStepQuantWeight;
export const isQuantWeight = (w: DecodeStepWeight): w is DecodeStepQuantWeight => 'layout' in w && 'qdata' in w;

/** One decoder layer's tensors, all contiguous, in the model dtype (the projections possibly packed). */
export interface DecodeStepLayer {
  /** [hidden]: the input RMSNorm's weight. */
  inputNorm: StridedRef;
  /** [(H + 2·KVH)·D, hidden]: q, k and v projections stacked (rows of q, then k, then v). */
  qkv: DecodeStepWeight;
  /** [hidden, H·D] */
  o: DecodeStepWeight;
  /** [hidden]: the post-attention RMSNorm's weight. */
  postNorm: StridedRef;
  /** [2·I, hidden]: gate rows, then up rows. */
  gateUp: DecodeStepWeight;
  /** [hidden, I] */
  down: DecodeStepWeight;
  /** [B, KVH, S, D]: the static cache's buffers. */
  keyCache: StridedRef; valueCache: StridedRef;
}

export interface DecodeStepParams {
  /** [B] int64: the step's token id of each sequence. */
  ids: StridedRef;
  /** [1] int64: the cache index every sequence's key and value are written at (positions ≤ it are attended). */
  cacheIndex: StridedRef;
  /** [B·S] bool: false at padding (masked), sequence b's row at b·S. */
  notPadding: StridedRef;
  /** [B·R] each: each sequence's RoPE row at its own position (half-split layout, R ≤ D). */
  cos: StridedRef; sin: StridedRef;
  /** [vocab, hidden] */
  embed: StridedRef;
  layers: DecodeStepLayer[];
  /** [hidden] */
  finalNorm: StridedRef;
  /** [vocab, hidden] */
  lmHead: DecodeStepWeight;
  /** [B·vocab] logits out (model dtype), [B] int64 argmax out. */
  logits: StridedRef; next: StridedRef;
  heads: number; kvHeads: number; headDim: number; intermediate: number;
  eps: number; scaling: number;
}

/** Returns false where the kernel does not take the problem (shape, dtype, sizes): the op runs its composite. */
export type DecodeStepKernel = (p: DecodeStepParams) => boolean;
