// The nbx.llm namespace object: the public names of src/ops/llm.ts (nbx extensions, docs/ops.md).

import { apply_rotary_pos_emb, rotary_and_cache, gated_linear, add_rms_norm_linear, decode_attention, expert_linear, fused_add_rms_norm, fusion_enabled, gated_activation, grouped_expert_linear, moe_align, paged_attention, reshape_and_cache, set_fusion, fused_decode_step } from './llm.js';

export const llm = { fused_add_rms_norm, add_rms_norm_linear, gated_activation, gated_linear, apply_rotary_pos_emb, rotary_and_cache, decode_attention, expert_linear, paged_attention, reshape_and_cache, moe_align, grouped_expert_linear, set_fusion, fusion_enabled, fused_decode_step };
