// Attention masks and the attention product, as transformers' masking_utils.py and its "sdpa" and
// "eager" attention functions compute them. A mask is built once per forward and layer type, on the
// model's device, from the padding mask and the cache positions (the query at cache position q sees
// key kv when kv <= q, kv is not padding, and for sliding layers q - kv < window).

import * as nbx from '../index.js';
import type { Tensor } from '../tensor/tensor.js';
import type { Device } from '../backend/backend.js';
import type { DTypeName } from '../dtype/dtypes.js';

export interface MaskSpec {
  /** Batch, new tokens, tokens already cached. */
  batch: number; queryLength: number; past: number;
  /** [B, past + T] bool (true = attend), or null when there is no padding. */
  padding: Tensor | null;
  /** Sliding window of this layer type, or null. */
  window: number | null;
  device: Device;
}

/**
 * The boolean mask [B, 1, T, S] (true = attend) for one layer type, or null where transformers skips
 * it for SDPA (no padding, one query or a full square, and a window that cannot cut anything), in
 * which case `isCausal` says whether SDPA's own causal mask applies.
 */
export function booleanMask(spec: MaskSpec, allowSkip = true): { mask: Tensor | null; isCausal: boolean } {
  const { batch, queryLength: T, past, padding, window, device } = spec;
  const S = past + T;
  if (allowSkip && !padding && (T === 1 || S === T) && (window === null || S < window)) return { mask: null, isCausal: T > 1 };
  // one query at the last position sees every earlier key: only padding (and a window) can hide one
  if (T === 1 && padding && (window === null || S <= window)) return { mask: padding.unsqueeze(1).unsqueeze(1), isCausal: false };
  const q = nbx.arange(past, S, { dtype: 'int64', device }).unsqueeze(-1); // [T, 1]
  const kv = nbx.arange(0, S, { dtype: 'int64', device }).unsqueeze(0); // [1, S]
  let m = kv.le(q); // causal
  if (window !== null) m = m.logical_and(kv.gt(q.sub(window)));
  let full = m.unsqueeze(0).unsqueeze(0); // [1, 1, T, S]
  if (padding) full = full.logical_and(padding.unsqueeze(1).unsqueeze(1));
  return { mask: full.expand([batch, 1, T, S]), isCausal: false };
}

/** The additive float mask of transformers' eager attention: 0 where attended, finfo(dtype).min elsewhere. */
export function additiveMask(mask: Tensor, dtype: DTypeName): Tensor {
  const min = FINFO_MIN[dtype];
  if (min === undefined) throw new Error(`no finfo.min for ${dtype}`);
  return nbx.where(mask, nbx.zeros([], { dtype, device: mask.device }), nbx.full([], min, { dtype, device: mask.device })) as Tensor;
}
const FINFO_MIN: Partial<Record<DTypeName, number>> = { float32: -3.4028234663852886e38, bfloat16: -3.3895313892515355e38, float16: -65504, float64: -Number.MAX_VALUE };

export interface AttentionArgs {
  /** [B, H, T, D], [B, KVH, S, D], [B, KVH, S, D] */
  q: Tensor; k: Tensor; v: Tensor;
  /** Boolean mask [B, 1, T, S]; for eager attention, built with booleanMask(spec, false). */
  mask: Tensor | null; isCausal: boolean;
  scaling: number;
  /** Gemma 2: tanh soft-capping of the scores (eager attention only). */
  softcap: number | null;
  impl: 'sdpa' | 'eager';
}

/** Attention output [B, T, H·D]. */
export function attention(a: AttentionArgs): Tensor {
  const { q, k, v } = a;
  const [B, H, T, D] = q.shape as [number, number, number, number];
  let out: Tensor;
  if (a.impl === 'sdpa' && a.softcap === null && nbx.llm.fusion_enabled()) {
    // the same call; a decode step's (or a short prompt's) few queries skip SDPA's general layout handling
    out = nbx.llm.decode_attention(q, k, v, a.mask, { is_causal: a.isCausal, scale: a.scaling });
  } else if (a.impl === 'sdpa' && a.softcap === null) {
    out = nbx.nn.functional.scaled_dot_product_attention(q, k, v, { attn_mask: a.mask, is_causal: a.isCausal, scale: a.scaling, enable_gqa: k.shape[1] !== H });
  } else {
    // transformers' eager_attention_forward: repeat_kv, q·kᵀ·scaling, soft-cap, + additive mask,
    // softmax in float32 cast back, · v
    const rep = H / k.shape[1]!;
    const repeatKv = (t: Tensor): Tensor => (rep === 1 ? t : t.unsqueeze(2).expand([B, t.shape[1]!, rep, t.shape[2]!, D]).reshape([B, H, t.shape[2]!, D]));
    let w = nbx.matmul(q, repeatKv(k).transpose(2, 3)).mul(a.scaling);
    if (a.softcap !== null) w = w.div(a.softcap).tanh().mul(a.softcap);
    // eager masks are never skipped (booleanMask(spec, false)): null means nothing is masked
    if (a.mask) w = w.add(additiveMask(a.mask, w.dt));
    const p = nbx.nn.functional.softmax(w, { dim: -1, dtype: 'float32' }).to(q.dt);
    out = nbx.matmul(p, repeatKv(v));
  }
  return out.transpose(1, 2).reshape([B, T, H * D]);
}
