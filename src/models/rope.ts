// Rotary position embeddings as transformers computes them (modeling_rope_utils.py): the inverse
// frequencies of each RoPE type in float32, cos/sin of position × frequency in float32 scaled by the
// type's attention factor and cast to the model dtype (q·cos + rotate_half(q)·sin is
// nbx.llm.apply_rotary_pos_emb).
// "dynamic" and "longrope" keep transformers' state: the frequencies change once a forward sees
// positions past the pretraining length, and stay changed for later calls until a short one resets them.

import * as nbx from '../index.js';
import type { Tensor } from '../tensor/tensor.js';
import type { Device } from '../backend/backend.js';
import type { DTypeName } from '../dtype/dtypes.js';
import type { RopeParameters } from './config.js';

const f32 = Math.fround;

/** 1 / base^(2i/dim) for i < dim/2, rounded as torch's float32 ops round. */
function baseInvFreq(base: number, dim: number): Float32Array {
  const out = new Float32Array(dim / 2 | 0);
  for (let i = 0; i < out.length; i++) out[i] = f32(1 / f32(Math.pow(base, f32(f32(2 * i) / dim))));
  return out;
}

export interface RopeShape { headDim: number; maxPositionEmbeddings: number }

/** transformers' ROPE_INIT_FUNCTIONS: (inverse frequencies, attention factor) for `seqLen` (null: at init). */
export function computeInvFreq(p: RopeParameters, shape: RopeShape, seqLen: number | null): { invFreq: Float32Array; attentionFactor: number } {
  const dim = Math.floor(shape.headDim * (p.partial_rotary_factor ?? 1));
  const base = p.rope_theta;
  switch (p.rope_type) {
    case 'default':
      return { invFreq: baseInvFreq(base, dim), attentionFactor: 1 };
    case 'linear': {
      const inv = baseInvFreq(base, dim);
      for (let i = 0; i < inv.length; i++) inv[i] = f32(inv[i]! / p.factor!);
      return { invFreq: inv, attentionFactor: 1 };
    }
    case 'dynamic': {
      const maxPos = shape.maxPositionEmbeddings;
      const len = Math.max(seqLen ?? maxPos, maxPos);
      const factor = p.factor!;
      const b = base * Math.pow((factor * len) / maxPos - (factor - 1), dim / (dim - 2));
      return { invFreq: baseInvFreq(b, dim), attentionFactor: 1 };
    }
    case 'llama3': {
      const inv = baseInvFreq(base, dim);
      const factor = p.factor!, lo = p.low_freq_factor!, hi = p.high_freq_factor!, old = p.original_max_position_embeddings!;
      const lowWavelen = old / lo, highWavelen = old / hi;
      for (let i = 0; i < inv.length; i++) {
        const f = inv[i]!;
        const wavelen = f32(f32(2 * Math.PI) / f);
        const scaled = wavelen > lowWavelen ? f32(f / factor) : f;
        if (wavelen < highWavelen || wavelen > lowWavelen) { inv[i] = scaled; continue; }
        const smooth = f32(f32(f32(old / wavelen) - lo) / (hi - lo));
        inv[i] = f32(f32(f32(1 - smooth) * scaled) / factor + f32(smooth * scaled));
      }
      return { invFreq: inv, attentionFactor: 1 };
    }
    case 'yarn': {
      const origMax = p.original_max_position_embeddings!;
      const factor = p.factor ?? shape.maxPositionEmbeddings / origMax;
      const mscale = (scale: number, m = 1): number => (scale <= 1 ? 1 : 0.1 * m * Math.log(scale) + 1);
      let attentionFactor = p.attention_factor ?? null;
      if (attentionFactor === null) attentionFactor = p.mscale && p.mscale_all_dim ? mscale(factor, p.mscale) / mscale(factor, p.mscale_all_dim) : mscale(factor);
      const betaFast = p.beta_fast || 32, betaSlow = p.beta_slow || 1;
      const corrDim = (rot: number): number => (dim * Math.log(origMax / (rot * 2 * Math.PI))) / (2 * Math.log(base));
      let low = corrDim(betaFast), high = corrDim(betaSlow);
      if (p.truncate ?? true) { low = Math.floor(low); high = Math.ceil(high); }
      low = Math.max(low, 0); high = Math.min(high, dim - 1);
      if (low === high) high += 0.001;
      const inv = new Float32Array(dim / 2 | 0);
      for (let i = 0; i < inv.length; i++) {
        const pos = f32(Math.pow(base, f32(f32(2 * i) / dim)));
        const extrap = f32(1 / pos), interp = f32(1 / f32(factor * pos));
        const ramp = Math.min(1, Math.max(0, f32(f32(i - low) / f32(high - low))));
        const extrapFactor = f32(1 - ramp);
        inv[i] = f32(f32(interp * f32(1 - extrapFactor)) + f32(extrap * extrapFactor));
      }
      return { invFreq: inv, attentionFactor };
    }
    case 'longrope': {
      const origMax = p.original_max_position_embeddings!;
      const factor = p.factor ?? shape.maxPositionEmbeddings / origMax;
      const attentionFactor = p.attention_factor ?? (factor <= 1 ? 1 : Math.sqrt(1 + Math.log(factor) / Math.log(origMax)));
      const ext = seqLen !== null && seqLen > origMax ? p.long_factor! : p.short_factor!;
      const inv = new Float32Array(dim / 2 | 0);
      for (let i = 0; i < inv.length; i++) inv[i] = f32(1 / f32(f32(ext[i]!) * f32(Math.pow(base, f32(f32(2 * i) / dim)))));
      return { invFreq: inv, attentionFactor };
    }
    default:
      throw new Error(`unreachable: rope type ${p.rope_type} passed config validation`);
  }
}

/** One layer type's rotary embedding: cos/sin for positions, with transformers' dynamic-update state. */
export class RotaryEmbedding {
  private invFreq: Float32Array;
  private readonly originalInvFreq: Float32Array;
  private attentionScaling: number;
  private readonly originalMaxSeqLen: number;
  private maxSeqLenCached: number;
  private deviceInvFreq: Tensor | null = null;
  private tables: { rows: number; dtype: DTypeName; device: Device; cos: Tensor; sin: Tensor } | null = null;
  /** Channels that rotate (head_dim × partial_rotary_factor). */
  readonly rotaryDim: number;

  constructor(private readonly params: RopeParameters, private readonly shape: RopeShape) {
    const { invFreq, attentionFactor } = computeInvFreq(params, shape, null);
    this.invFreq = invFreq;
    this.originalInvFreq = invFreq;
    this.attentionScaling = attentionFactor;
    this.originalMaxSeqLen = shape.maxPositionEmbeddings;
    this.maxSeqLenCached = shape.maxPositionEmbeddings;
    this.rotaryDim = invFreq.length * 2;
  }

  /** transformers' dynamic_rope_update, given max(position_ids) + 1 of this forward. */
  private update(seqLen: number): void {
    const t = this.params.rope_type;
    let next = this.invFreq;
    if (t === 'dynamic') {
      if (seqLen > this.maxSeqLenCached) {
        const r = computeInvFreq(this.params, this.shape, seqLen);
        next = r.invFreq; this.attentionScaling = r.attentionFactor; this.maxSeqLenCached = seqLen;
      }
      if (seqLen < this.originalMaxSeqLen && this.maxSeqLenCached > this.originalMaxSeqLen) {
        next = this.originalInvFreq; this.maxSeqLenCached = this.originalMaxSeqLen;
      }
    } else if (t === 'longrope') {
      next = seqLen > this.params.original_max_position_embeddings! ? computeInvFreq(this.params, this.shape, seqLen).invFreq : this.originalInvFreq;
    }
    if (next !== this.invFreq) { this.invFreq = next; this.deviceInvFreq?.dispose(); this.deviceInvFreq = null; }
  }

  /**
   * cos and sin [B, T, rotaryDim] in `dtype` for position_ids [B, T] (int64, on `device`), as
   * transformers' rotary embedding returns them (nbx.llm.apply_rotary_pos_emb takes them as they are);
   * `maxPosition` is max(position_ids), which the dynamic types need on the host; `positionBound`, where
   * given, says every position id lies in [0, positionBound).
   */
  forward(positionIds: Tensor, maxPosition: number, dtype: DTypeName, device: Device, positionBound: number | null = null): { cos: Tensor; sin: Tensor } {
    const dynamic = this.params.rope_type === 'dynamic' || this.params.rope_type === 'longrope';
    if (dynamic) this.update(maxPosition + 1);
    if (!dynamic && positionBound !== null) {
      // Fixed frequencies: rows of a table computed once for positions [0, bound) by the same ops, so a
      // decode step gathers two rows instead of running the seven ops below.
      const table = this.table(positionBound, dtype, device);
      const F = nbx.nn.functional;
      return { cos: F.embedding(positionIds, table.cos), sin: F.embedding(positionIds, table.sin) };
    }
    return this.compute(positionIds, dtype, device);
  }

  /** cos / sin for positionIds, computed. */
  private compute(positionIds: Tensor, dtype: DTypeName, device: Device): { cos: Tensor; sin: Tensor } {
    if (!this.deviceInvFreq || this.deviceInvFreq.isDisposed) {
      this.deviceInvFreq = nbx.keep(nbx.tensor(Array.from(this.invFreq), { dtype: 'float32', device }));
    }
    // positions × frequencies in float32 (transformers disables autocast here for long-context precision)
    const freqs = positionIds.to('float32').unsqueeze(-1).mul(this.deviceInvFreq);
    let cos = nbx.cat([freqs, freqs], -1).cos(), half = freqs.sin();
    if (this.attentionScaling !== 1) { cos = cos.mul(this.attentionScaling); half = half.mul(this.attentionScaling); }
    return { cos: cos.to(dtype), sin: nbx.cat([half, half], -1).to(dtype) };
  }

  /** The cos / sin table [positions, rotaryDim] covering [0, bound), grown by doubling. */
  private table(bound: number, dtype: DTypeName, device: Device): { cos: Tensor; sin: Tensor } {
    const t = this.tables;
    if (t && t.rows >= bound && t.dtype === dtype && t.device === device && !t.cos.isDisposed) return t;
    this.disposeTables();
    const rows = Math.max(bound, 2 * (t?.rows ?? 0), 64);
    const made = nbx.scope(() => this.compute(nbx.arange(0, rows, { dtype: 'int64', device }), dtype, device));
    this.tables = { rows, dtype, device, cos: nbx.keep(made.cos), sin: nbx.keep(made.sin) };
    return this.tables;
  }

  /** The current cos/sin table (an object that changes whenever the table is rebuilt), or null. */
  get tableIdentity(): object | null { return this.tables; }

  private disposeTables(): void { this.tables?.cos.dispose(); this.tables?.sin.dispose(); this.tables = null; }

  dispose(): void { this.deviceInvFreq?.dispose(); this.deviceInvFreq = null; this.disposeTables(); }
}
