// The decoder-only transformer of every supported family, written with nbx.nn layers and nbx ops the way
// transformers writes each family's modeling file. The families differ at a few named points (see
// FamilyTraits): fused QKV / gate-up weights (Phi-3), Q/K norms (Qwen3, Gemma 3), biases (Qwen2, Llama's
// attention_bias/mlp_bias), mixture-of-experts MLPs (Mixtral, Qwen3-MoE), and Gemma's (1 + w) norms,
// pre/post feed-forward norms, scaled embeddings and soft-capping. Module and parameter names are
// transformers' own, so a checkpoint's tensor names are this model's state_dict names.

import * as nbx from '../index.js';
import type { Tensor } from '../tensor/tensor.js';
import { Module, Linear, Embedding, RMSNorm, ModuleList, type FactoryOptions } from '../nn/index.js';
import { emptyParameter } from '../nn/module.js';
import { QuantizedTensor } from '../quant/quantized_tensor.js';
import type { ModelConfig, LayerType, SupportedModelType } from './config.js';
import { RotaryEmbedding } from './rope.js';
import { attention, booleanMask } from './attention.js';
import { backendFor } from '../backend/backend.js';
import { fusedKernel, gatedActName, groupedExpertKernel, type DecodeStepLayerTensors, type DecodeStepProjection } from '../ops/llm.js';

export interface FamilyTraits {
  /** q, k, v projections as one `qkv_proj`, gate and up as one `gate_up_proj` (Phi-3). */
  fused: boolean;
  /** Bias on q/k/v and on o_proj. */
  qkvBias: (c: ModelConfig) => boolean;
  oBias: (c: ModelConfig) => boolean;
  mlpBias: (c: ModelConfig) => boolean;
  /** RMSNorm of each head's queries and keys before RoPE. */
  qkNorm: boolean;
  /** Gemma: (1 + w) norms in float32, pre/post feed-forward norms, embeddings × √hidden. */
  gemma: boolean;
  /** Which layers have a mixture-of-experts MLP. */
  moe: (c: ModelConfig, layer: number) => boolean;
}

const attnBias = (c: ModelConfig): boolean => c.attention_bias;
const no = (): boolean => false;

export const FAMILIES: Record<SupportedModelType, FamilyTraits> = {
  llama: { fused: false, qkvBias: attnBias, oBias: attnBias, mlpBias: (c) => c.mlp_bias, qkNorm: false, gemma: false, moe: no },
  mistral: { fused: false, qkvBias: no, oBias: no, mlpBias: no, qkNorm: false, gemma: false, moe: no },
  qwen2: { fused: false, qkvBias: () => true, oBias: no, mlpBias: no, qkNorm: false, gemma: false, moe: no },
  qwen3: { fused: false, qkvBias: attnBias, oBias: attnBias, mlpBias: no, qkNorm: true, gemma: false, moe: no },
  mixtral: { fused: false, qkvBias: no, oBias: no, mlpBias: no, qkNorm: false, gemma: false, moe: () => true },
  qwen3_moe: {
    fused: false, qkvBias: attnBias, oBias: attnBias, mlpBias: no, qkNorm: true, gemma: false,
    moe: (c, i) => !c.mlp_only_layers.includes(i) && c.num_experts > 0 && (i + 1) % c.decoder_sparse_step === 0,
  },
  phi3: { fused: true, qkvBias: no, oBias: no, mlpBias: no, qkNorm: false, gemma: false, moe: no },
  gemma2: { fused: false, qkvBias: attnBias, oBias: attnBias, mlpBias: no, qkNorm: false, gemma: true, moe: no },
  gemma3_text: { fused: false, qkvBias: attnBias, oBias: attnBias, mlpBias: no, qkNorm: true, gemma: true, moe: no },
};

/** transformers' ACT2FN for the activations these families use. */
export function activation(name: string, x: Tensor): Tensor {
  const F = nbx.nn.functional;
  switch (name) {
    case 'silu': return F.silu(x);
    case 'gelu': return F.gelu(x);
    case 'gelu_pytorch_tanh': case 'gelu_new': return F.gelu(x, { approximate: 'tanh' });
    case 'relu': return F.relu(x);
    default: throw new Error(`unreachable: activation ${name} passed config validation`);
  }
}

/** Gemma's RMSNorm: x·rsqrt(mean(x²) + eps)·(1 + w), computed in float32 and cast back (weights start at 0). */
export class GemmaRMSNorm extends Module {
  declare weight: Tensor;
  constructor(readonly dim: number, readonly eps: number, opts: FactoryOptions = {}) {
    super();
    this.register_parameter('weight', emptyParameter([dim], opts));
  }
  override forward(x: Tensor): Tensor {
    const normed = nbx.nn.functional.rms_norm(x.to('float32'), [this.dim], null, this.eps);
    return normed.mul(this.weight.to('float32').add(1)).to(x.dt);
  }
}

function makeNorm(gemma: boolean, dim: number, eps: number, opts: FactoryOptions): Module {
  return gemma ? new GemmaRMSNorm(dim, eps, opts) : new RMSNorm(dim, { eps, ...opts });
}

/** What the layers need of a cache: store this forward's keys/values, get back the ones to attend over. */
export interface LayerCache {
  /** Tokens cached before this forward. */
  readonly length: number;
  update(layer: number, k: Tensor, v: Tensor): { keys: Tensor; values: Tensor };
  /**
   * Optional: a cache that attends itself (the paged cache's decode step, src/models/paged_cache.ts:
   * each sequence at its own position over its own blocks) stores k/v and returns the attention output
   * [B, T, H·D]; null: this forward goes through update() and the layer's attention.
   */
  attend?(layer: number, q: Tensor, k: Tensor, v: Tensor, opts: AttendOptions): Tensor | null;
  /**
   * Optional: RoPE of q and k and the store of k/v in one call (a fixed-size cache written at a device
   * index, static_decode.ts: nbx.llm.rotary_and_cache), giving the rotated queries and the buffers to
   * attend over; the layer otherwise rotates and calls update().
   */
  rotateAndUpdate?(layer: number, q: Tensor, k: Tensor, v: Tensor, cos: Tensor, sin: Tensor): { q: Tensor; keys: Tensor; values: Tensor };
}

/** The layer's attention parameters, for a cache that attends itself. */
export interface AttendOptions { scaling: number; softcap: number | null; window: number | null }

/** Per-forward inputs shared by the layers. */
export interface LayerContext {
  rope: Record<LayerType, { cos: Tensor; sin: Tensor }>;
  masks: Record<LayerType, { mask: Tensor | null; isCausal: boolean }>;
  cache: LayerCache | null;
}

/**
 * Linears that read the same input (q/k/v, gate/up) run as one GEMM over their weights concatenated
 * along the output dim. The concatenation is a non-persistent buffer of the owning module (so `to()` and
 * `dispose()` reach it, and state_dict() does not list it), and each Linear's weight (and bias) becomes a
 * view of its rows: the transformers names stay in state_dict() and a copying load_state_dict writes
 * through them. Anything that replaces one of those parameters (an assigning load, `to()`) is seen at
 * the next forward, which concatenates again.
 */
class ConcatLinears {
  private views: (Tensor | null)[] = [];
  private w: Tensor | null = null;
  private b: Tensor | null = null;
  /** Quantized parts (nbx.quant): the joined QuantizedTensor; each part's packed buffers are views of its rows. */
  private qw: QuantizedTensor | null = null;
  constructor(private readonly owner: Module, private readonly name: string, private readonly parts: Linear[]) {}

  /**
   * Quantized parts of one format and K join the same way (QuantizedTensor.cat): one packed weight whose
   * rows are the parts', one quant_matmul instead of one per part (issue #21).
   */
  private joinedQuant(): boolean {
    const ps = this.parts, v = this.views, qw = this.qw;
    if (qw && !qw.isDisposed && this.owner._member(`${this.name}_qweight`) === qw.qdata) {
      let ok = true;
      for (let i = 0; i < ps.length && ok; i++) {
        ok = ps[i]!._member('qweight') === v[4 * i] && ps[i]!._member('scales') === v[4 * i + 1] && ps[i]!._member('zeros') === v[4 * i + 2] && ps[i]!._member('bias') === v[4 * i + 3];
      }
      if (ok) return true;
    }
    const qs = ps.map((p) => p.quantized_weight);
    if (qs.some((q) => q === null || q.isDisposed)) return false;
    const bs = ps.map((p) => p._member('bias'));
    const hasBias = bs[0] instanceof nbx.Tensor;
    for (const b of bs) if (hasBias ? !(b instanceof nbx.Tensor) || b.dt !== (bs[0] as Tensor).dt : b !== null) return false;
    const joined = QuantizedTensor.cat(qs as QuantizedTensor[]);
    if (!joined) return false;
    const cb = hasBias ? nbx.keep(nbx.cat(bs as Tensor[], 0)) : null;
    for (const t of [joined.qdata, joined.scales, joined.zeros]) if (t) nbx.keep(t);
    const old: (Tensor | null)[] = [];
    this.views = [];
    let row = 0;
    for (let i = 0; i < ps.length; i++) {
      const q = qs[i]!, n = q.layout.n;
      old.push(q.qdata, q.scales, q.zeros, bs[i] as Tensor | null);
      const part = joined.rows(row, row + n);
      ps[i]!.set_quantized_weight(part);
      const vb = cb ? cb.slice(0, row, row + n) : null;
      if (vb) ps[i]!.bias = vb;
      this.views.push(part.qdata, part.scales, part.zeros, vb);
      row += n;
    }
    for (const t of old) t?.dispose(); // the parts owned them; their values now live in the joined weight
    for (const [k, t] of [['qweight', joined.qdata], ['qscales', joined.scales], ['qzeros', joined.zeros]] as const) {
      (this.owner._member(`${this.name}_${k}`) as Tensor | null)?.dispose();
      this.owner.register_buffer(`${this.name}_${k}`, t, { persistent: false, keep_dtype: true });
    }
    (this.owner._member(`${this.name}_bias`) as Tensor | null)?.dispose();
    this.owner.register_buffer(`${this.name}_bias`, cb, { persistent: false });
    this.qw = joined; this.b = cb;
    return true;
  }

  /** The concatenated weight and bias, (re)built when a part's parameters are no longer the views; false when the parts cannot be joined. */
  private joined(): boolean {
    if (this.parts[0]!.is_quantized) return this.joinedQuant();
    const v = this.views, ps = this.parts;
    if (this.w && !this.w.isDisposed && this.owner._member(`${this.name}_weight`) === this.w) {
      let ok = true;
      for (let i = 0; i < ps.length && ok; i++) ok = ps[i]!._member('weight') === v[2 * i] && ps[i]!._member('bias') === v[2 * i + 1];
      if (ok) return true;
    }
    const w = this.owner._member(`${this.name}_weight`), b = this.owner._member(`${this.name}_bias`);
    const ws = ps.map((p) => p._member('weight')), bs = ps.map((p) => p._member('bias'));
    const first = ws[0];
    if (!(first instanceof nbx.Tensor)) return false;
    const hasBias = bs[0] instanceof nbx.Tensor;
    for (let i = 0; i < ps.length; i++) {
      const wi = ws[i], bi = bs[i];
      if (!(wi instanceof nbx.Tensor) || wi.isDisposed || wi.ndim !== 2 || wi.dt !== first.dt || wi.device !== first.device) return false;
      if (hasBias ? !(bi instanceof nbx.Tensor) || bi.dt !== first.dt || bi.device !== first.device : bi !== null) return false;
    }
    const cw = nbx.keep(nbx.cat(ws as Tensor[], 0));
    const cb = hasBias ? nbx.keep(nbx.cat(bs as Tensor[], 0)) : null;
    this.views = [];
    let row = 0;
    for (let i = 0; i < ps.length; i++) {
      const n = (ws[i] as Tensor).shape[0]!;
      const vw = cw.slice(0, row, row + n), vb = cb ? cb.slice(0, row, row + n) : null;
      ps[i]!.weight = vw;
      if (vb) ps[i]!.bias = vb;
      this.views.push(vw, vb);
      (ws[i] as Tensor).dispose(); // the module owned it; its values now live in the concatenation
      if (bs[i] instanceof nbx.Tensor) (bs[i] as Tensor).dispose();
      row += n;
    }
    (w as Tensor | null)?.dispose();
    (b as Tensor | null)?.dispose();
    this.owner.register_buffer(`${this.name}_weight`, cw, { persistent: false });
    this.owner.register_buffer(`${this.name}_bias`, cb, { persistent: false });
    this.w = cw; this.b = cb;
    return true;
  }

  /** The joined quantized weight [ΣN, K] where the parts are quantized alike and have no bias, else null. */
  packedWeight(): QuantizedTensor | null {
    if (!this.parts[0]!.is_quantized || !this.joined() || this.b !== null) return null;
    return this.qw;
  }

  /** The joined float weight [ΣN, K] where the parts have no bias and are not quantized, else null. */
  plainWeight(): Tensor | null {
    if (this.parts[0]!.is_quantized || !this.joined() || this.b !== null) return null;
    return this.w;
  }

  /** x·[W₁; W₂; …]ᵀ (+ [b₁; b₂; …]), or null when the parts cannot be joined (then each runs on its own). */
  forward(x: Tensor): Tensor | null {
    if (!this.joined()) return null;
    return this.qw && this.parts[0]!.is_quantized ? nbx.quant.quant_linear(x, this.qw, this.b) : nbx.nn.functional.linear(x, this.w!, this.b);
  }

  /** (norm(h + residual)·[W₁; W₂; …]ᵀ, h + residual) in one call (nbx.llm.add_rms_norm_linear), or null: the caller norms, then forward()s. */
  forwardNormed(h: Tensor, residual: Tensor, norm: RMSNorm): [Tensor, Tensor] | null {
    if (this.parts[0]!.is_quantized || !this.joined()) return null;
    return normedLinear(h, residual, norm, this.w!, this.b);
  }
}

/** A Linear's weight as fused_decode_step takes it: the float weight, or the quantized one. */
const projectionWeight = (lin: Linear): DecodeStepProjection => lin.quantized_weight ?? lin.weight;

/** nbx.llm.add_rms_norm_linear for an nn.RMSNorm with an affine weight over the last dim, or null. */
function normedLinear(h: Tensor, residual: Tensor, norm: RMSNorm, w: Tensor, b: Tensor | null): [Tensor, Tensor] | null {
  const nw = norm.weight;
  if (!(nw instanceof nbx.Tensor) || norm.normalized_shape.length !== 1) return null;
  return nbx.llm.add_rms_norm_linear(h, residual, nw, w, b, norm.eps) as [Tensor, Tensor];
}

/** The same for one (unquantized) nn.Linear. */
function normedLinearOf(h: Tensor, residual: Tensor, norm: RMSNorm, lin: Linear): [Tensor, Tensor] | null {
  return lin.is_quantized ? null : normedLinear(h, residual, norm, lin.weight, lin.bias ?? null);
}

export class Attention extends Module {
  declare q_proj?: Linear; declare k_proj?: Linear; declare v_proj?: Linear; declare qkv_proj?: Linear;
  declare o_proj: Linear;
  declare q_norm?: Module; declare k_norm?: Module;
  private readonly heads: number;
  private readonly kvHeads: number;
  private readonly headDim: number;
  private readonly scaling: number;
  private readonly qkv: ConcatLinears | null = null;

  constructor(private readonly cfg: ModelConfig, private readonly traits: FamilyTraits, readonly layerIdx: number, opts: FactoryOptions) {
    super();
    const { hidden_size: Hd, num_attention_heads: H, num_key_value_heads: KVH, head_dim: D } = cfg;
    this.heads = H; this.kvHeads = KVH; this.headDim = D;
    this.scaling = Math.pow(traits.gemma ? cfg.query_pre_attn_scalar ?? D : D, -0.5);
    const qkvBias = traits.qkvBias(cfg);
    if (traits.fused) {
      this.qkv_proj = new Linear(Hd, (H + 2 * KVH) * D, { bias: qkvBias, ...opts });
    } else {
      this.q_proj = new Linear(Hd, H * D, { bias: qkvBias, ...opts });
      this.k_proj = new Linear(Hd, KVH * D, { bias: qkvBias, ...opts });
      this.v_proj = new Linear(Hd, KVH * D, { bias: qkvBias, ...opts });
      this.qkv = new ConcatLinears(this, '_fused_qkv', [this.q_proj, this.k_proj, this.v_proj]);
    }
    this.o_proj = new Linear(H * D, Hd, { bias: traits.oBias(cfg), ...opts });
    if (traits.qkNorm) {
      this.q_norm = makeNorm(traits.gemma, D, cfg.rms_norm_eps, opts);
      this.k_norm = makeNorm(traits.gemma, D, cfg.rms_norm_eps, opts);
    }
  }

  override forward(x: Tensor, ctx: LayerContext): Tensor {
    // (indexing, not destructuring: this runs per layer and step, much of it before V8 optimizes it)
    const B = x.shape[0]!, T = x.shape[1]!, H = this.heads, KVH = this.kvHeads, D = this.headDim;
    const fused = nbx.llm.fusion_enabled();
    // q, k and v from one projection where the weights are (or can be) one matrix; RoPE for queries and
    // keys in one call (nbx.llm.apply_rotary_pos_emb).
    const qkvOut = this.qkv_proj ? this.qkv_proj.forward(x) : fused && this.qkv ? this.qkv.forward(x) : null;
    if (qkvOut) return this.fromQkv(qkvOut, ctx);
    const q = this.q_proj!.forward(x).view([B, T, H, D]), k = this.k_proj!.forward(x).view([B, T, KVH, D]);
    return this.attend(q, k, this.v_proj!.forward(x).view([B, T, KVH, D]), ctx);
  }

  /**
   * forward(norm(h + residual)) with the norm done by the q/k/v projection (nbx.llm.add_rms_norm_linear,
   * a pre-norm layer's fused path): (the attention output, h + residual), or null where that projection
   * cannot take it (then the layer norms and calls forward).
   */
  forwardNormed(h: Tensor, residual: Tensor, norm: RMSNorm, ctx: LayerContext): [Tensor, Tensor] | null {
    if (!nbx.llm.fusion_enabled()) return null;
    const r = this.qkv_proj ? normedLinearOf(h, residual, norm, this.qkv_proj) : this.qkv ? this.qkv.forwardNormed(h, residual, norm) : null;
    return r ? [this.fromQkv(r[0], ctx), r[1]] : null;
  }

  /**
   * The weights nbx.llm.fused_decode_step takes for this layer's attention (q/k/v stacked, o), or null
   * where it computes something else: biases, q/k norms, soft-capping, a sliding window, quantized weights.
   */
  decodeStepWeights(): { qkv: DecodeStepProjection; o: DecodeStepProjection; scaling: number } | null {
    if (this.q_norm || this.cfg.attn_logit_softcapping !== null || this.cfg.layer_types[this.layerIdx] !== 'full_attention') return null;
    if (this.o_proj.bias) return null;
    const qkv = this.qkv_proj ? (this.qkv_proj.bias ? null : projectionWeight(this.qkv_proj)) : this.qkv?.plainWeight() ?? this.qkv?.packedWeight() ?? null;
    return qkv ? { qkv, o: projectionWeight(this.o_proj), scaling: this.scaling } : null;
  }

  /** The attention of one projection's q/k/v [B, T, (H + 2·KVH)·D]. */
  private fromQkv(qkvOut: Tensor, ctx: LayerContext): Tensor {
    const H = this.heads, KVH = this.kvHeads;
    const qkv = qkvOut.view([qkvOut.shape[0]!, qkvOut.shape[1]!, H + 2 * KVH, this.headDim]);
    return this.attend(qkv.slice(2, 0, H), qkv.slice(2, H, H + KVH), qkv.slice(2, H + KVH), ctx);
  }

  /** q [B, T, H, D], k and v [B, T, KVH, D] → o_proj(attention). */
  private attend(q: Tensor, k: Tensor, v: Tensor, ctx: LayerContext): Tensor {
    const fused = nbx.llm.fusion_enabled();
    if (this.q_norm) { q = this.q_norm.forward(q); k = this.k_norm!.forward(k); }
    const type = this.cfg.layer_types[this.layerIdx]!;
    const { cos, sin } = ctx.rope[type];
    if (fused && ctx.cache?.rotateAndUpdate && !ctx.cache.attend) {
      const r = ctx.cache.rotateAndUpdate(this.layerIdx, q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2), cos, sin);
      const { mask, isCausal } = ctx.masks[type];
      const out = attention({ q: r.q, k: r.keys, v: r.values, mask, isCausal, scaling: this.scaling, softcap: this.cfg.attn_logit_softcapping, impl: this.cfg.attn_implementation });
      return this.o_proj.forward(out);
    }
    const qk = nbx.llm.apply_rotary_pos_emb(q.transpose(1, 2), k.transpose(1, 2), cos, sin) as [Tensor, Tensor];
    q = qk[0]; k = qk[1];
    v = v.transpose(1, 2);
    if (ctx.cache?.attend) {
      const window = type === 'sliding_attention' ? this.cfg.sliding_window : null;
      const paged = ctx.cache.attend(this.layerIdx, q, k, v, { scaling: this.scaling, softcap: this.cfg.attn_logit_softcapping, window });
      if (paged) return this.o_proj.forward(paged);
    }
    if (ctx.cache) ({ keys: k, values: v } = ctx.cache.update(this.layerIdx, k, v));
    const { mask, isCausal } = ctx.masks[type];
    const out = attention({ q, k, v, mask, isCausal, scaling: this.scaling, softcap: this.cfg.attn_logit_softcapping, impl: this.cfg.attn_implementation });
    return this.o_proj.forward(out);
  }
}

export class MLP extends Module {
  declare gate_proj?: Linear; declare up_proj?: Linear; declare gate_up_proj?: Linear;
  declare down_proj: Linear;
  private readonly gateUp: ConcatLinears | null = null;
  /** The activation as nbx.llm.gated_activation names it (null: no gated form, the composition runs). */
  private readonly gatedAct: string | null;
  constructor(private readonly act: string, hidden: number, intermediate: number, fused: boolean, bias: boolean, opts: FactoryOptions) {
    super();
    if (fused) this.gate_up_proj = new Linear(hidden, 2 * intermediate, { bias, ...opts });
    else {
      this.gate_proj = new Linear(hidden, intermediate, { bias, ...opts });
      this.up_proj = new Linear(hidden, intermediate, { bias, ...opts });
      this.gateUp = new ConcatLinears(this, '_fused_gate_up', [this.gate_proj, this.up_proj]);
    }
    this.down_proj = new Linear(intermediate, hidden, { bias, ...opts });
    this.gatedAct = gatedActName(act);
  }
  override forward(x: Tensor): Tensor {
    // fused: gate and up from one projection ([..., 2I]: gate, then up), act(gate)·up in one pass
    if (nbx.llm.fusion_enabled() && this.gatedAct) {
      const gu = this.gate_up_proj ? this.gate_up_proj.forward(x) : this.gateUp!.forward(x);
      if (gu) return this.down(gu);
    }
    if (this.gate_up_proj) {
      const [gate, up] = this.gate_up_proj.forward(x).chunk(2, -1) as [Tensor, Tensor];
      return this.down_proj.forward(up.mul(activation(this.act, gate)));
    }
    return this.down_proj.forward(activation(this.act, this.gate_proj!.forward(x)).mul(this.up_proj!.forward(x)));
  }

  /** The weights nbx.llm.fused_decode_step takes (gate/up stacked, down) for a SiLU-gated MLP without biases, else null. */
  decodeStepWeights(): { gateUp: DecodeStepProjection; down: DecodeStepProjection } | null {
    if (this.gatedAct !== 'silu' || this.down_proj.bias) return null;
    const gu = this.gate_up_proj ? (this.gate_up_proj.bias ? null : projectionWeight(this.gate_up_proj)) : this.gateUp!.plainWeight() ?? this.gateUp!.packedWeight();
    return gu ? { gateUp: gu, down: projectionWeight(this.down_proj) } : null;
  }

  /** The down projection of gate_up [..., 2I], reading act(gate)·up as it loads it where a kernel can (nbx.llm.gated_linear). */
  private down(gu: Tensor): Tensor {
    if (!this.down_proj.is_quantized) return nbx.llm.gated_linear(gu, this.down_proj.weight, this.down_proj.bias ?? null, { act: this.gatedAct! });
    return this.down_proj.forward(nbx.llm.gated_activation(gu, { act: this.gatedAct! }));
  }

  /** forward(norm(h + residual)) with the norm done by the gate/up projection: (output, h + residual), or null (see Attention.forwardNormed). */
  forwardNormed(h: Tensor, residual: Tensor, norm: RMSNorm): [Tensor, Tensor] | null {
    if (!nbx.llm.fusion_enabled() || !this.gatedAct) return null;
    const r = this.gate_up_proj ? normedLinearOf(h, residual, norm, this.gate_up_proj) : this.gateUp!.forwardNormed(h, residual, norm);
    return r ? [this.down(r[0]), r[1]] : null;
  }
}

/** Tokens up to which a MoE layer reads its experts by device-held ids where the backend can (decode steps). */
const ROUTED_ON_DEVICE_MAX_TOKENS = 16;
/**
 * Tokens up to which, on such a backend, every expert runs on every token (unrouted ones weighted 0) as
 * one batched product instead of a host-routed loop: a batched decode step of up to this many sequences
 * then reads each expert's weights once, as the loop would (at these counts nearly every expert is routed
 * to), stays bound by those reads rather than by the E/k times larger arithmetic, and reads nothing back
 * to the host, so a CUDA graph records it.
 */
const DENSE_EXPERTS_MAX_TOKENS = 128;
/**
 * Rows per block of the grouped path (nbx.llm.moe_align's block size, the grouped GEMM's row tile): each
 * expert's group is padded to a multiple of it, about E·(BS/2) rows of padding per layer. 64, and 128 from
 * GROUPED_EXPERTS_BLOCK128_ROWS routed rows per expert on average (N·k/E). Measured on the H200 (BENCHMARKS.md,
 * sixth session; one Mixtral-8x7B layer, the Hopper kernel's warp-specialized tiles): 512 tokens (128 rows an
 * expert) 1.62 ms at block 64 vs 1.92 at 128; 2048 tokens (512 rows) 4.41 vs 4.28 ms. The grouped path beat the
 * host-routed loop at every measured prompt (256-4096 tokens: 3.2x to 1.5x; 1.02x at worst, 2048 tokens, with
 * the earlier non-specialized 64-row tile), so prompts above DENSE_EXPERTS_MAX_TOKENS always take it where the
 * kernel exists; at 32-128 tokens the dense path measured faster (0.87-1.01 ms vs 1.13-1.24 grouped).
 */
const GROUPED_EXPERTS_BLOCK = 64, GROUPED_EXPERTS_BLOCK128_ROWS = 512;

/** The experts of one MoE layer as transformers 5 holds them: gate_up_proj [E, 2I, H], down_proj [E, H, I]. */
export class Experts extends Module {
  declare gate_up_proj: Tensor;
  declare down_proj: Tensor;
  constructor(readonly num_experts: number, hidden: number, intermediate: number, private readonly act: string, opts: FactoryOptions) {
    super();
    this.register_parameter('gate_up_proj', emptyParameter([num_experts, 2 * intermediate, hidden], opts));
    this.register_parameter('down_proj', emptyParameter([num_experts, hidden, intermediate], opts));
  }

  private expert(e: number, x: Tensor): Tensor {
    const F = nbx.nn.functional;
    const [gate, up] = F.linear(x, this.gate_up_proj.select(0, e)).chunk(2, -1) as [Tensor, Tensor];
    return F.linear(activation(this.act, gate).mul(up), this.down_proj.select(0, e));
  }

  /**
   * Σ over the chosen experts of weight · down_e(act(gate_e(x)) · up_e(x)) for x [N, H], the chosen
   * experts `indices` [N, k] and their `weights` [N, k]. As transformers: each expert runs on the tokens
   * routed to it and its weighted output is index_add-ed into the result in the model dtype. That needs
   * the routing on the host; on a device that cannot read back synchronously (WebGPU), and for a batched
   * decode step on one that reads experts by device-held ids (DENSE_EXPERTS_MAX_TOKENS), every expert runs
   * on every token instead and unrouted experts get weight 0 (same values up to rounding, E/k times the
   * arithmetic). A longer prompt on a device with the grouped GEMM (nbx.llm.moe_align and
   * grouped_expert_linear) groups the slots by expert on the device instead of on the host.
   */
  override forward(x: Tensor, indices: Tensor, weights: Tensor): Tensor {
    const [N, H] = x.shape as [number, number];
    const k = indices.shape[1]!;
    if (N <= ROUTED_ON_DEVICE_MAX_TOKENS && fusedKernel('expert_gemv', x)) {
      // A decode step's few tokens where the backend reads experts by device-held ids (nbx.llm.expert_linear):
      // only the chosen experts' weights are read, and nothing is routed on the host, so a CUDA graph
      // records the step. Each slot's output is weighted, cast to the model dtype and added in slot order
      // (transformers adds them by expert index with index_add: the same numbers for top-2).
      const gu = nbx.llm.expert_linear(x, this.gate_up_proj, indices); // [N, k, 2I]
      const [gate, up] = gu.chunk(2, -1) as [Tensor, Tensor];
      const y = nbx.llm.expert_linear(activation(this.act, gate).mul(up), this.down_proj, indices); // [N, k, H]
      const contrib = y.mul(weights.unsqueeze(-1)).to(x.dt);
      let out = contrib.select(1, 0);
      for (let j = 1; j < k; j++) out = out.add(contrib.select(1, j));
      return out.contiguous();
    }
    const BS = (N * k) / this.num_experts >= GROUPED_EXPERTS_BLOCK128_ROWS && groupedExpertKernel(x, 128) ? 128 : GROUPED_EXPERTS_BLOCK;
    if (N > DENSE_EXPERTS_MAX_TOKENS && groupedExpertKernel(x, BS)) {
      // A prompt where the backend has the grouped GEMM (vLLM's fused_moe): the slots grouped by expert
      // on the device (nbx.llm.moe_align), then one launch per projection for every expert; the routing
      // weight multiplies in the down projection's epilogue. The routing never goes to the host (only the
      // kernels' error words are read after each eager launch, as expert_linear's; a CUDA graph defers them).
      const [sorted, blockExperts, total] = nbx.llm.moe_align(indices, this.num_experts, BS) as [Tensor, Tensor, Tensor];
      const opts = { top_k: k, block_size: BS };
      const gu = nbx.llm.grouped_expert_linear(x, this.gate_up_proj, sorted, blockExperts, total, opts); // [N, k, 2I]
      const act = gatedActName(this.act);
      let h: Tensor;
      if (act) h = nbx.llm.gated_activation(gu, { act });
      else { const [gate, up] = gu.chunk(2, -1) as [Tensor, Tensor]; h = activation(this.act, gate).mul(up); }
      gu.dispose();
      const y = nbx.llm.grouped_expert_linear(h, this.down_proj, sorted, blockExperts, total, { ...opts, routing_weights: weights }); // [N, k, H], weighted
      h.dispose(); sorted.dispose(); blockExperts.dispose(); total.dispose();
      let out = y.select(1, 0);
      for (let j = 1; j < k; j++) out = out.add(y.select(1, j));
      return out.contiguous();
    }
    if (!backendFor(x.device).downloadSync || (N <= DENSE_EXPERTS_MAX_TOKENS && fusedKernel('expert_gemv', x))) {
      const routing = nbx.zeros([N, this.num_experts], { dtype: weights.dt, device: x.device }).scatter(1, indices, weights);
      const gu = nbx.matmul(x.unsqueeze(0), this.gate_up_proj.transpose(1, 2)); // [E, N, 2I]
      const [gate, up] = gu.chunk(2, -1) as [Tensor, Tensor];
      const h = nbx.matmul(activation(this.act, gate).mul(up), this.down_proj.transpose(1, 2)); // [E, N, H]
      return h.mul(routing.t().unsqueeze(-1)).sum(0).to(x.dt);
    }
    const chosen = indices.dataSync() as BigInt64Array;
    const tokens: number[][] = Array.from({ length: this.num_experts }, () => []);
    const slots: number[][] = Array.from({ length: this.num_experts }, () => []);
    for (let i = 0; i < N * k; i++) { const e = Number(chosen[i]); tokens[e]!.push(Math.floor(i / k)); slots[e]!.push(i); }
    let out = nbx.zeros([N, H], { dtype: x.dt, device: x.device });
    const flatWeights = weights.reshape([-1]);
    for (let e = 0; e < this.num_experts; e++) {
      if (!tokens[e]!.length) continue;
      const tok = nbx.tensor(tokens[e]!, { dtype: 'int64', device: x.device });
      const w = nbx.index_select(flatWeights, 0, nbx.tensor(slots[e]!, { dtype: 'int64', device: x.device })).unsqueeze(-1);
      const y = this.expert(e, nbx.index_select(x, 0, tok)).mul(w);
      out = nbx.index_add(out, 0, tok, y.to(x.dt));
    }
    return out;
  }
}

/** Router + experts (Mixtral's and Qwen3-MoE's sparse MoE block): softmax in float32, top-k, optional renormalization. */
export class SparseMoeBlock extends Module {
  declare gate: Linear;
  declare experts: Experts;
  constructor(private readonly cfg: ModelConfig, intermediate: number, opts: FactoryOptions) {
    super();
    this.gate = new Linear(cfg.hidden_size, cfg.num_experts, { bias: false, ...opts });
    this.experts = new Experts(cfg.num_experts, cfg.hidden_size, intermediate, cfg.hidden_act, opts);
  }
  override forward(x: Tensor): Tensor {
    const shape = x.shape as number[];
    const flat = x.reshape([-1, shape[shape.length - 1]!]);
    const logits = this.gate.forward(flat);
    const probs = nbx.nn.functional.softmax(logits, { dim: -1, dtype: 'float32' });
    const top = nbx.topk(probs, this.cfg.num_experts_per_tok, { dim: -1 }) as { values: Tensor; indices: Tensor };
    let weights = top.values;
    if (this.cfg.norm_topk_prob) weights = weights.div(weights.sum(-1, { keepdim: true }));
    return this.experts.forward(flat, top.indices, weights).view(shape);
  }
}

export class DecoderLayer extends Module {
  declare self_attn: Attention;
  declare mlp: Module;
  declare input_layernorm: Module;
  declare post_attention_layernorm: Module;
  declare pre_feedforward_layernorm?: Module;
  declare post_feedforward_layernorm?: Module;

  constructor(cfg: ModelConfig, traits: FamilyTraits, layerIdx: number, opts: FactoryOptions) {
    super();
    this.self_attn = new Attention(cfg, traits, layerIdx, opts);
    this.mlp = traits.moe(cfg, layerIdx)
      ? new SparseMoeBlock(cfg, cfg.model_type === 'qwen3_moe' ? cfg.moe_intermediate_size : cfg.intermediate_size, opts)
      : new MLP(cfg.hidden_act, cfg.hidden_size, cfg.intermediate_size, traits.fused, traits.mlpBias(cfg), opts);
    this.input_layernorm = makeNorm(traits.gemma, cfg.hidden_size, cfg.rms_norm_eps, opts);
    this.post_attention_layernorm = makeNorm(traits.gemma, cfg.hidden_size, cfg.rms_norm_eps, opts);
    if (traits.gemma) {
      this.pre_feedforward_layernorm = makeNorm(true, cfg.hidden_size, cfg.rms_norm_eps, opts);
      this.post_feedforward_layernorm = makeNorm(true, cfg.hidden_size, cfg.rms_norm_eps, opts);
    }
  }

  override forward(x: Tensor, ctx: LayerContext): Tensor {
    if (this.pre_feedforward_layernorm) {
      // Gemma: norms before and after both the attention and the feed-forward
      let h = this.post_attention_layernorm.forward(this.self_attn.forward(this.input_layernorm.forward(x), ctx));
      x = x.add(h);
      h = this.post_feedforward_layernorm!.forward(this.mlp.forward(this.pre_feedforward_layernorm.forward(x)));
      return x.add(h);
    }
    x = x.add(this.self_attn.forward(this.input_layernorm.forward(x), ctx));
    return x.add(this.mlp.forward(this.post_attention_layernorm.forward(x)));
  }

  /** This layer's tensors for nbx.llm.fused_decode_step (its caches added by the caller), or null where the kernel's layer is not this one. */
  decodeStepTensors(eps: number): Omit<DecodeStepLayerTensors, 'key_cache' | 'value_cache'> | null {
    if (!this.residualChain || !(this.mlp instanceof MLP)) return null;
    const n1 = this.input_layernorm as RMSNorm, n2 = this.post_attention_layernorm as RMSNorm;
    for (const n of [n1, n2]) if (!(n.weight instanceof nbx.Tensor) || n.normalized_shape.length !== 1 || (n.eps ?? eps) !== eps) return null;
    const a = this.self_attn.decodeStepWeights(), m = this.mlp.decodeStepWeights();
    if (!a || !m) return null;
    return { input_norm: n1.weight!, qkv: a.qkv, o: a.o, post_norm: n2.weight!, gate_up: m.gateUp, down: m.down };
  }

  /** Whether forwardResidual applies: pre-norm layers whose norms are nn.RMSNorm (not Gemma's). */
  get residualChain(): boolean {
    return !this.pre_feedforward_layernorm && this.input_layernorm instanceof RMSNorm && this.post_attention_layernorm instanceof RMSNorm;
  }

  /**
   * The same layer as forward, with the residual stream carried apart from the block outputs (vLLM's
   * layout): takes the previous block's output `h` and the residual before it (null for the first layer,
   * where `h` is the embeddings) and returns (this layer's MLP output, the residual before it). Each
   * residual add happens inside the RMSNorm that follows it (nn.RMSNorm's forward(x, residual):
   * nbx.llm.fused_add_rms_norm), so the sums are the ones forward computes.
   */
  forwardResidual(h: Tensor, residual: Tensor | null, ctx: LayerContext): [Tensor, Tensor] {
    const n1 = this.input_layernorm as RMSNorm, n2 = this.post_attention_layernorm as RMSNorm;
    let a: Tensor;
    // the norms done by the projections that follow them where those can (forwardNormed), else by the norm
    const fa = residual === null ? null : this.self_attn.forwardNormed(h, residual, n1, ctx);
    if (fa) { a = fa[0]; residual = fa[1]; }
    else if (residual === null) { residual = h; a = this.self_attn.forward(n1.forward(h), ctx); }
    else { const r = n1.forward(h, residual); residual = r[1]; a = this.self_attn.forward(r[0], ctx); }
    const fm = this.mlp instanceof MLP ? this.mlp.forwardNormed(a, residual, n2) : null;
    if (fm) return fm;
    const r2 = n2.forward(a, residual);
    return [this.mlp.forward(r2[0]), r2[1]];
  }
}

/** transformers' <Family>Model: embeddings, the layers, the final norm. */
export class DecoderModel extends Module {
  declare embed_tokens: Embedding;
  declare layers: ModuleList<DecoderLayer>;
  declare norm: Module;
  private readonly ropes: Record<LayerType, RotaryEmbedding>;

  constructor(readonly cfg: ModelConfig, readonly traits: FamilyTraits, opts: FactoryOptions) {
    super();
    this.embed_tokens = new Embedding(cfg.vocab_size, cfg.hidden_size, opts);
    this.layers = new ModuleList(Array.from({ length: cfg.num_hidden_layers }, (_, i) => new DecoderLayer(cfg, traits, i, opts)));
    this.norm = makeNorm(traits.gemma, cfg.hidden_size, cfg.rms_norm_eps, opts);
    const shape = { headDim: cfg.head_dim, maxPositionEmbeddings: cfg.max_position_embeddings };
    const full = new RotaryEmbedding(cfg.rope.full_attention, shape);
    const sameRope = JSON.stringify(cfg.rope.full_attention) === JSON.stringify(cfg.rope.sliding_attention);
    this.ropes = { full_attention: full, sliding_attention: sameRope ? full : new RotaryEmbedding(cfg.rope.sliding_attention, shape) };
  }

  private gemmaNormalizer: Tensor | null = null;
  /** Gemma's √hidden as a 0-d tensor in the model dtype, made once (a decode step then copies nothing from the host). */
  private normalizer(x: Tensor): Tensor {
    const n = this.gemmaNormalizer;
    if (n && !n.isDisposed && n.dt === x.dt && n.device === x.device) return n;
    n?.dispose();
    return (this.gemmaNormalizer = nbx.keep(nbx.tensor(Math.sqrt(this.cfg.hidden_size), { dtype: x.dt, device: x.device })));
  }

  private chain: boolean | null = null;
  /** Every layer and the final norm can carry the residual apart (DecoderLayer.forwardResidual). */
  private get residualChain(): boolean {
    return (this.chain ??= this.norm instanceof RMSNorm && this.layers.length > 0 && [...this.layers].every((l) => l.residualChain));
  }

  /** RoPE types whose frequencies depend on the positions seen (they need max(position_ids) on the host). */
  get positionDependentRope(): boolean {
    return Object.values(this.cfg.rope).some((r) => r.rope_type === 'dynamic' || r.rope_type === 'longrope');
  }

  /**
   * Hidden states [B, T, hidden] after the final norm. `padding`: [B, past + T] bool or null;
   * `positionIds`: [B, T] int64; `maxPosition`: max(positionIds); `positionBound`: where known, every
   * position id is in [0, positionBound).
   */
  override forward(inputIds: Tensor, a: {
    padding: Tensor | null; positionIds: Tensor; maxPosition: number; positionBound?: number | null; cache: LayerCache | null;
    /** Masks computed by the caller (a decode step over a fixed-size cache, static_decode.ts) instead of from padding and length. */
    masks?: LayerContext['masks'];
  }): Tensor {
    const [B, T] = inputIds.shape as [number, number];
    const past = a.cache?.length ?? 0;
    let x = this.embed_tokens.forward(inputIds);
    // Gemma: × √hidden rounded to the model dtype first, as transformers' normalizer tensor is
    if (this.traits.gemma) x = x.mul(this.normalizer(x));
    const types = new Set(this.cfg.layer_types);
    const rope = {} as LayerContext['rope'];
    const masks = {} as LayerContext['masks'];
    const eager = this.cfg.attn_implementation === 'eager';
    for (const t of ['full_attention', 'sliding_attention'] as const) {
      if (!types.has(t)) continue;
      const r = this.ropes[t];
      const other = t === 'sliding_attention' ? rope.full_attention : undefined;
      rope[t] = other && r === this.ropes.full_attention ? other : r.forward(a.positionIds, a.maxPosition, x.dt, x.device, a.positionBound ?? null);
      const spec = { batch: B, queryLength: T, past, padding: a.padding, window: t === 'sliding_attention' ? this.cfg.sliding_window : null, device: x.device };
      masks[t] = a.masks?.[t] ?? booleanMask(spec, !eager);
    }
    const ctx: LayerContext = { rope, masks, cache: a.cache };
    if (nbx.llm.fusion_enabled() && this.residualChain) {
      // residual adds fused with the norms that follow them (see DecoderLayer.forwardResidual)
      let residual: Tensor | null = null;
      for (const layer of this.layers) { const r = layer.forwardResidual(x, residual, ctx); x = r[0]; residual = r[1]; }
      return this.norm.forward(x, residual!)[0];
    }
    for (const layer of this.layers) x = layer.forward(x, ctx);
    return this.norm.forward(x);
  }

  /**
   * A decode step of B sequences in one call (nbx.llm.fused_decode_step) where every layer is the op's
   * layer: the logits [B, 1, V] of `lmHead`, their argmax [B], or null (then the caller runs forward). `ids`
   * and `positionIds` [B, 1], `cacheIndex` [1], `notPadding` [B, S]; `caches(l)` the static cache's buffers.
   */
  fusedDecodeStep(a: {
    ids: Tensor; positionIds: Tensor; cacheIndex: Tensor; notPadding: Tensor; capacity: number; lmHead: DecodeStepProjection;
    caches: (layer: number) => { keys: Tensor; values: Tensor };
  }): [Tensor, Tensor] | null {
    const cfg = this.cfg, x = this.embed_tokens.weight;
    if (this.traits.gemma || !nbx.llm.fusion_enabled() || !this.residualChain || cfg.final_logit_softcapping !== null) return null;
    if (!(this.norm instanceof RMSNorm) || !(this.norm.weight instanceof nbx.Tensor)) return null;
    const eps = this.norm.eps ?? cfg.rms_norm_eps;
    const layers: DecodeStepLayerTensors[] = [];
    let scaling: number | null = null;
    for (const [i, layer] of [...this.layers].entries()) {
      const t = (layer as DecoderLayer).decodeStepTensors(eps);
      const sc = (layer as DecoderLayer).self_attn.decodeStepWeights()?.scaling ?? null;
      if (!t || sc === null || (scaling !== null && sc !== scaling)) return null;
      scaling = sc;
      const c = a.caches(i);
      layers.push({ ...t, key_cache: c.keys, value_cache: c.values });
    }
    const { cos, sin } = this.ropes.full_attention.forward(a.positionIds, a.capacity - 1, x.dt, x.device, a.capacity);
    return nbx.llm.fused_decode_step(a.ids, a.cacheIndex, a.notPadding, cos, sin, x, layers, this.norm.weight, a.lmHead,
      { heads: cfg.num_attention_heads, kv_heads: cfg.num_key_value_heads, eps, scaling: scaling! }) as [Tensor, Tensor];
  }

  /** The RoPE tables' identities: a captured CUDA graph reads them, so it is stale once one is rebuilt. */
  ropeTables(): unknown[] { return [this.ropes.full_attention.tableIdentity, this.ropes.sliding_attention.tableIdentity]; }

  disposeRope(): void {
    this.ropes.full_attention.dispose(); this.ropes.sliding_attention.dispose();
    this.gemmaNormalizer?.dispose(); this.gemmaNormalizer = null;
  }
}
