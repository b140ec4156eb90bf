// The mixture-of-experts family: moe_align and the grouped GEMM behind nbx.llm.moe_align and
// nbx.llm.grouped_expert_linear (src/ops/llm.ts), vLLM's moe_align_block_size and fused_moe. As the LLM
// family's, each operation is defined by its composite; a backend with these kernels (for the dtypes and
// block sizes its 'llm' features list) runs the same arithmetic in one launch each, never host-staged.

import type { StridedRef } from '../backend/backend.js';

/**
 * vLLM's moe_align_block_size: the (token, slot) pairs of a routing grouped by expert, each expert's
 * group padded to a multiple of `blockSize`, so that every block of `blockSize` sorted positions belongs
 * to one expert (the grouped GEMM's row tiles). Slot s = token · k + j of ids [N, k]; within an expert
 * the slots keep their order (a stable sort, so the result is deterministic). Fixed output sizes
 * (capturable): sorted [M + E·(blockSize − 1)] with M = N·k, padding entries = M; blockExperts
 * [ceil(that / blockSize)], −1 for blocks past the total; total [1] = Σ_e ceil(count_e / blockSize) ·
 * blockSize. An id outside [0, E) is an IndexError (the kernel's error word).
 */
export interface MoeAlignParams {
  /** [M] int32 or int64 (the routing's [N, k], flattened), contiguous. */
  ids: StridedRef;
  /** [capacity] int32, [blocks] int32, [1] int32; contiguous. */
  sorted: StridedRef;
  blockExperts: StridedRef;
  total: StridedRef;
  slots: number; experts: number; blockSize: number; capacity: number; blocks: number;
}
export type MoeAlignKernel = (p: MoeAlignParams) => void;

/**
 * The grouped GEMM of a mixture-of-experts layer (vLLM's fused_moe kernel): for each sorted position
 * p < total with slot s = sorted[p] < M, out[s, :] = W[e] · x[s / k or s, :] (· routing[s] when given),
 * e = blockExperts[p / blockSize], W [E, O, K] in nn.Linear's [out, in] layout; float32 accumulation
 * (the routing weight multiplies the float32 sum, then one rounding to the dtype). Slots that no sorted
 * position names are left as they are (the op zero-fills `out` first). A slot outside [0, M], an expert
 * outside [0, E) for a block before the total, or a total above the capacity is an IndexError.
 */
export interface GroupedExpertGemmParams {
  /** [N, K] (one row per token) or [M, K] (xPerSlot: one row per slot), contiguous. */
  x: StridedRef;
  xPerSlot: boolean;
  /** [E, O, K], contiguous. */
  weight: StridedRef;
  /** moe_align's outputs: int32 [capacity], int32 [blocks], int32 [1], contiguous. */
  sorted: StridedRef;
  blockExperts: StridedRef;
  total: StridedRef;
  /** [M] float (any float dtype), contiguous, or absent. */
  routing?: StridedRef;
  /** [M, O], contiguous. */
  out: StridedRef;
  slots: number; topK: number; experts: number; outFeatures: number; inFeatures: number;
  blockSize: number; capacity: number; blocks: number;
}
export type GroupedExpertGemmKernel = (p: GroupedExpertGemmParams) => void;
