// Every hand kernel's name and signature, in one table. An op calls `kernel('softmax', device)` and
// gets a SoftmaxKernel; a backend lists its kernels in one object typed Partial<KernelTable>, so the
// compiler checks both sides against the same contract. Adding a kernel: its parameter contract in
// the family file (src/kernels/<family>.ts), one line here, and one entry per backend that implements
// it (src/backend/<name>/kernels/<family>.ts).

import type { AttentionKernel } from './attention.js';
import type { ConvKernel } from './conv.js';
import type { CopyStridedKernel } from './copy.js';
import type { FftKernel, FftStridedKernel } from './fft.js';
import type { GemmFeatures, GemmKernel } from './gemm.js';
import type {
  GatherKernel, LinearIndexKernel, MaskedScatterKernel, MaskedSelectKernel, NonzeroKernel, ScatterKernel,
} from './indexing.js';
import type { NormGemvKernel, GatedGemvKernel, RotaryCacheKernel, DecodeAttentionKernel, ExpertGemvKernel, FusedAddRmsNormKernel, LlmFeatures, PagedAttentionKernel, RotaryKernel } from './llm.js';
import type { GroupedExpertGemmKernel, MoeAlignKernel } from './moe.js';
import type { DecodeStepKernel } from './decode_step.js';
import type { DequantizeKernel, QuantFeatures, QuantMatmulKernel } from './quant.js';
import type { LocalResponseNormKernel, NllLossKernel, RowNormKernel, SoftmaxKernel } from './nn.js';
import type { AdaptivePoolKernel, PoolKernel } from './pool.js';
import type { ReduceKernel, ScanKernel } from './reduce.js';
import type { GridSampleKernel, InterpolateKernel } from './resample.js';
import type {
  KthvalueKernel, MedianKernel, ModeKernel, SearchsortedKernel, SortKernel, TopkKernel, UniqueKernel,
} from './sort.js';

export interface KernelTable {
  // copy.ts
  copy_strided: CopyStridedKernel;
  // reduce.ts
  reduce: ReduceKernel;
  scan: ScanKernel;
  // gemm.ts
  gemm: GemmKernel;
  gemm_int: GemmKernel;
  // indexing.ts
  gather: GatherKernel;
  scatter: ScatterKernel;
  linear_index: LinearIndexKernel;
  nonzero: NonzeroKernel;
  masked_select: MaskedSelectKernel;
  masked_scatter: MaskedScatterKernel;
  // sort.ts
  sort: SortKernel;
  topk: TopkKernel;
  kthvalue: KthvalueKernel;
  median: MedianKernel;
  mode: ModeKernel;
  searchsorted: SearchsortedKernel;
  unique: UniqueKernel;
  // fft.ts
  fft: FftKernel;
  fft_strided: FftStridedKernel;
  // conv.ts
  conv: ConvKernel;
  conv_transpose: ConvKernel;
  // pool.ts
  pool: PoolKernel;
  adaptive_pool: AdaptivePoolKernel;
  // resample.ts
  interpolate: InterpolateKernel;
  grid_sample: GridSampleKernel;
  // nn.ts
  softmax: SoftmaxKernel;
  row_norm: RowNormKernel;
  nll_loss: NllLossKernel;
  local_response_norm: LocalResponseNormKernel;
  // attention.ts (optional: the op composes gemm and softmax where a backend lacks it)
  attention: AttentionKernel;
  // llm.ts (optional: nbx.llm's operations run their composite where a backend lacks them)
  fused_add_rms_norm: FusedAddRmsNormKernel;
  rotary_embedding: RotaryKernel;
  rotary_cache: RotaryCacheKernel;
  gated_gemv: GatedGemvKernel;
  norm_gemv: NormGemvKernel;
  decode_attention: DecodeAttentionKernel;
  expert_gemv: ExpertGemvKernel;
  paged_attention: PagedAttentionKernel;
  // decode_step.ts (optional: nbx.llm.fused_decode_step runs its composite without it)
  decode_step: DecodeStepKernel;
  // moe.ts (optional as llm.ts's: nbx.llm.moe_align and grouped_expert_linear run their composites without them)
  moe_align: MoeAlignKernel;
  grouped_expert_gemm: GroupedExpertGemmKernel;
  // quant.ts (nbx.quant's packed weights; a backend without them raises a typed error naming the ones that have them)
  quant_matmul: QuantMatmulKernel;
  dequantize: DequantizeKernel;
}

export type KernelName = keyof KernelTable;

/** The kernels a backend implements itself, as one object the compiler checks against the table. */
export type BackendKernels = Partial<KernelTable>;

/** Facts about a backend's kernels that ops read as data (never a device name). */
export interface KernelFeatures {
  gemm: GemmFeatures;
  llm: LlmFeatures;
  quant: QuantFeatures;
}

/** Every kernel name, for reports (the `satisfies` keeps the list and the table in step). */
export const KERNEL_NAMES = Object.keys({
  copy_strided: 1, reduce: 1, scan: 1, gemm: 1, gemm_int: 1, gather: 1, scatter: 1, linear_index: 1, nonzero: 1,
  masked_select: 1, masked_scatter: 1, sort: 1, topk: 1, kthvalue: 1, median: 1, mode: 1, searchsorted: 1, unique: 1,
  fft: 1, fft_strided: 1, conv: 1, conv_transpose: 1, pool: 1, adaptive_pool: 1, interpolate: 1, grid_sample: 1,
  softmax: 1, row_norm: 1, nll_loss: 1, local_response_norm: 1, attention: 1,
  fused_add_rms_norm: 1, rotary_embedding: 1, rotary_cache: 1, gated_gemv: 1, norm_gemv: 1, decode_attention: 1, expert_gemv: 1, paged_attention: 1, decode_step: 1, moe_align: 1, grouped_expert_gemm: 1,
  quant_matmul: 1, dequantize: 1,
} satisfies Record<KernelName, 1>) as KernelName[];
