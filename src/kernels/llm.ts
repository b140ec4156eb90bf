// The LLM family: fused kernels behind nbx.llm's operations (src/ops/llm.ts). Each operation is defined
// by its composite (a composition of existing operations that every backend runs); a backend that has
// one of these kernels, for the dtypes its features list, runs the same arithmetic in one pass instead.
// A backend without it runs the composite: that is the operation's definition, not a fallback, so these
// kernels are never host-staged (the op asks hasKernel, not kernel()).

import type { StridedRef } from '../backend/backend.js';
import type { DTypeName } from '../dtype/dtypes.js';
import type { Expr } from '../ir/expr.js';

/**
 * residualOut = x + residual (rounded to the dtype, as `add`), out = rms_norm(residualOut) · weight
 * (vLLM's fused_add_rms_norm, out of place): `rows` contiguous rows of `n` elements, all refs contiguous
 * from their offsets, one dtype.
 */
export interface FusedAddRmsNormParams {
  x: StridedRef;
  residual: StridedRef;
  /** [n], or absent (no affine weight). */
  weight?: StridedRef;
  out: StridedRef;
  residualOut: StridedRef;
  rows: number;
  n: number;
  eps: number;
}

/**
 * Half-split rotary embedding of one tensor (transformers' q·cos + rotate_half(q)·sin, its first
 * `rotary` channels; the rest pass through): out[b,h,t,j] = x·cos + rh·sin with rh = -x[j + R/2] for
 * j < R/2 and x[j - R/2] for R/2 ≤ j < R, the product x·cos rounded to the dtype first and rh·sin added
 * to it with one rounding (the composite's addcmul).
 */
export interface RotaryParams {
  /** [B, H, T, D], any strides. */
  x: StridedRef;
  /** [B, T, R] with broadcast strides allowed (stride 0 on B), R = `rotary`. */
  cos: StridedRef;
  sin: StridedRef;
  /** [B, H, T, D], contiguous. */
  out: StridedRef;
  rotary: number;
}

export type FusedAddRmsNormKernel = (p: FusedAddRmsNormParams) => void;
export type RotaryKernel = (p: RotaryParams) => void;

/**
 * A decode step's rotary embedding and cache write in one pass (nbx.llm.rotary_and_cache): queries and
 * keys rotate as RotaryParams says; the rotated keys and the values are written into the caches at the
 * positions cache_index[t] along the cache's sequence dim (index_copy_(2, index, ·)). An index outside
 * [0, S) writes nothing and is recorded in the error word (IndexError after the launch, as index_copy_).
 */
export interface RotaryCacheParams {
  /** [B, H, T, D], [B, KVH, T, D], [B, KVH, T, D]: any strides. */
  q: StridedRef; k: StridedRef; v: StridedRef;
  /** [B, T, R] with broadcast strides allowed. */
  cos: StridedRef; sin: StridedRef;
  /** [B, H, T, D], contiguous. */
  qOut: StridedRef;
  /** [B, KVH, S, D]: any strides. */
  keyCache: StridedRef; valueCache: StridedRef;
  /** [T] int64, contiguous. */
  index: StridedRef;
  rotary: number;
}
export type RotaryCacheKernel = (p: RotaryCacheParams) => void;

/**
 * A gated MLP's down projection with its activation (nbx.llm.gated_linear): out = act(gate)·up @ Wᵀ
 * (+ bias) for gate_up rows [rows, 2K] (gate, then up) and W [N, K], the activation the expression
 * `gate` (IR loads 0 = gate, 1 = up, rounded to the dtype as gated_activation stores it). Returns false
 * when the kernel does not take the problem (rows, dtype, alignment): the op then runs its composite.
 */
export interface GatedGemvParams {
  /** [rows, 2K], rows `strides[0]` apart, last stride 1. */
  gateUp: StridedRef;
  /** [N, K], last stride 1. */
  weight: StridedRef;
  bias?: StridedRef;
  /** [rows, N], contiguous. */
  out: StridedRef;
  rows: number; n: number; k: number;
  gate: Expr;
}
export type GatedGemvKernel = (p: GatedGemvParams) => boolean;

/**
 * A projection of a pre-norm layer's normalized input (nbx.llm.add_rms_norm_linear): residualOut =
 * x + residual (rounded to the dtype), out = (rms_norm(residualOut)·normWeight) @ Wᵀ (+ bias), the norm's
 * output rounded to the dtype before the product as fused_add_rms_norm stores it. Returns false when the
 * kernel does not take the problem: the op then runs its composite.
 */
export interface NormGemvParams {
  /** [rows, K] each, contiguous. */
  x: StridedRef; residual: StridedRef;
  /** [K], contiguous. */
  normWeight: StridedRef;
  eps: number;
  /** [N, K], last stride 1. */
  weight: StridedRef;
  bias?: StridedRef;
  /** [rows, N] and [rows, K], contiguous. */
  out: StridedRef; residualOut: StridedRef;
  rows: number; n: number; k: number;
}
export type NormGemvKernel = (p: NormGemvParams) => boolean;

/** What a backend's LLM kernels cover: the dtypes they take (others run the composite). */
export interface LlmFeatures {
  dtypes: readonly DTypeName[];
  /** The dtypes grouped_expert_gemm takes (tensor-core inputs; absent: none, the composite runs). */
  groupedGemmDtypes?: readonly DTypeName[];
  /** The moe_align block sizes grouped_expert_gemm's row tiles cover. */
  groupedGemmBlockSizes?: readonly number[];
  /** The dtypes the whole-step decode kernel (decode_step) takes (absent: none, fused_decode_step runs its composite). */
  decodeStepDtypes?: readonly DTypeName[];
  /** Sequences the whole-step kernel takes in one step at most. */
  decodeStepMaxBatch?: number;
}


/**
 * Attention of a decode step's (or a short prompt's) few query rows over a key/value cache: out = softmax(q·kᵀ·scale + mask)·v
 * per query head, query heads g·rep … g·rep + rep − 1 reading key/value head g (GQA). A row whose keys
 * are all masked gives 0 (PyTorch's safe softmax, as the composed path).
 */
export interface DecodeAttentionParams {
  /** [B, H, L, D], contiguous. */
  q: StridedRef;
  /**
   * [B, H / rep, S, D] and [B, H / rep, S, Dv]: last stride 1, rows `ld` apart, and the (batch, head)
   * matrices `stride` apart (a KV cache's filled part is such a view of its buffer).
   */
  k: StridedRef; ldk: number; strideK: number;
  v: StridedRef; ldv: number; strideV: number;
  /** [B, H, L, Dv], contiguous. */
  out: StridedRef;
  /** Over the scores [B·H, L, S] with broadcast strides: bool (true = attend) or additive float. */
  mask?: StridedRef;
  /** Top-left causal mask on (L, S): query row l sees keys j <= l (PyTorch's is_causal). */
  causal: boolean;
  scale: number;
  rep: number;
}

export type DecodeAttentionKernel = (p: DecodeAttentionParams) => void;

/**
 * Products of tokens with their routed experts' weights (a mixture-of-experts layer): for token n and
 * slot j, out[n, j, :] = W[ids[n, j]] · x[n, :] (or x[n, j, :] when `xPerSlot`), W [E, O, K] holding each
 * expert's [out, in] matrix as nn.Linear does. The expert ids are read on the device, so a decode step
 * reads only the chosen experts' weights and never the routing on the host. Accumulation in float32.
 */
export interface ExpertGemvParams {
  /** [N, K] or [N, k, K] (xPerSlot), contiguous. */
  x: StridedRef;
  xPerSlot: boolean;
  /** [E, O, K], contiguous. */
  weight: StridedRef;
  /** [N, k] int64, contiguous; every value in [0, E) (checked by the kernel's error word). */
  ids: StridedRef;
  /** [N, k, O], contiguous. */
  out: StridedRef;
  tokens: number; slots: number; experts: number; outFeatures: number; inFeatures: number;
}
export type ExpertGemvKernel = (p: ExpertGemvParams) => void;


/**
 * Decode attention over a paged KV cache (vLLM's paged_attention): one query per sequence, its keys and
 * values in fixed-size blocks of a shared pool, found through the sequence's row of the block table.
 * Sequence b attends to its keys 0 … seqLens[b] − 1 (those in the last `window` positions when a sliding
 * window is set), query head h reading key/value head ⌊h / rep⌋; scores are q·k·scale, soft-capped as
 * cap·tanh(score / cap) when `softcap` is set, then a safe softmax (no visible key: zeros) and ·v.
 * Each sequence is computed on its own (the result does not depend on the other rows of the batch).
 * A block id outside [0, numBlocks) or a length outside [0, maxBlocks · blockSize] is an IndexError.
 */
export interface PagedAttentionParams {
  /** [B, H, D], contiguous. */
  q: StridedRef;
  /** [numBlocks, blockSize, KVH, D] and [numBlocks, blockSize, KVH, Dv], contiguous. */
  keyCache: StridedRef;
  valueCache: StridedRef;
  /** [B, maxBlocks] int32 or int64, contiguous. */
  blockTables: StridedRef;
  /** [B] int32 or int64, contiguous. */
  seqLens: StridedRef;
  /** [B, H, Dv], contiguous. */
  out: StridedRef;
  seqs: number; heads: number; kvHeads: number; headDim: number; valueDim: number;
  numBlocks: number; blockSize: number; maxBlocks: number;
  scale: number;
  /** Keys visible to the query: the last `window` positions; null = all. */
  window: number | null;
  softcap: number | null;
}
export type PagedAttentionKernel = (p: PagedAttentionParams) => void;
