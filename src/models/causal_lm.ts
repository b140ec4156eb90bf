// <Family>ForCausalLM: the decoder, the LM head (tied to the embeddings where the config says so) and
// forward() as transformers computes it, with the inputs checked and the bookkeeping (padding mask,
// positions, cache) done on the model's device, so nothing is read back to the host in a forward except
// where a RoPE type needs max(position_ids).

import * as nbx from '../index.js';
import { Tensor } from '../tensor/tensor.js';
import { Device } from '../backend/backend.js';
import { backendFor } from '../backend/backend.js';
import { DType, type DTypeName } from '../dtype/dtypes.js';
import { Module, Linear, type FactoryOptions } from '../nn/index.js';
import { DTypeError, ShapeError, UnsupportedError, ValueError } from '../errors.js';
import type { CausalLM, ForwardOptions, KVCache } from './types.js';
import type { Tokenizer } from '../tokenizer/index.js';
import { publicConfig, type ModelConfig } from './config.js';
import { DecoderModel, FAMILIES } from './decoder.js';
import { KVCacheBuffers } from './cache.js';
import { StaticDecoder, capacityFor, replayEnabled } from './static_decode.js';
import { generate as runGenerate, stream as runStream, type GenerateInput, type GenerateOptions } from '../generation/index.js';

export interface BuildOptions { device: Device; dtype: DTypeName }

export class CausalLMModel extends Module implements CausalLM {
  declare model: DecoderModel;
  declare lm_head: Linear;
  readonly config: CausalLM['config'];
  readonly cfg: ModelConfig;
  device: Device;
  dtype: DType;
  /** The dtype's name ('float32', 'bfloat16', ...). */
  dt: DTypeName;
  generationConfig: Readonly<Record<string, unknown>> = {};
  tokenizer: Tokenizer | null = null;

  /** Builds the module tree; call it inside nbx.nn.init_empty_weights to declare without allocating. */
  constructor(cfg: ModelConfig, opts: BuildOptions) {
    super();
    this.cfg = cfg;
    this.config = publicConfig(cfg);
    this.device = opts.device;
    this.dtype = DType.all[opts.dtype];
    this.dt = opts.dtype;
    const factory: FactoryOptions = { device: opts.device, dtype: opts.dtype };
    this.model = new DecoderModel(cfg, FAMILIES[cfg.model_type as keyof typeof FAMILIES], factory);
    this.lm_head = new Linear(cfg.hidden_size, cfg.vocab_size, { bias: false, ...factory });
    if (cfg.tie_word_embeddings) this.lm_head.tie_parameter('weight', this.model.embed_tokens, 'weight');
  }

  /** A new, empty KV cache for `batch` sequences with room for `maxLength` positions (it grows past that). */
  newCache(opts: { batch?: number; maxLength?: number } = {}): KVCacheBuffers {
    const batch = opts.batch ?? 1, maxLength = opts.maxLength ?? 256;
    if (!Number.isInteger(batch) || batch < 1) throw new ValueError('CausalLM.newCache', `batch must be a positive integer, got ${batch}`);
    if (!Number.isInteger(maxLength) || maxLength < 1) throw new ValueError('CausalLM.newCache', `maxLength must be a positive integer, got ${maxLength}`);
    const c = this.cfg;
    return new KVCacheBuffers({ layers: c.num_hidden_layers, batch, kvHeads: c.num_key_value_heads, headDim: c.head_dim, dtype: this.dt, device: this.device }, maxLength);
  }

  /** Decoders with fixed-shape steps (CUDA graph replay), by batch, capacity and greedy; the most recent two. */
  private readonly staticDecoders = new Map<string, StaticDecoder>();

  /**
   * A decoder whose steps replay a CUDA graph (static_decode.ts), for generate() on a CUDA device (on any
   * device with `force`, cache_implementation 'static': fixed-shape steps run eagerly); null where it
   * does not apply (another device, NBX_CUDA_GRAPHS=0, RoPE frequencies that depend on the positions
   * seen). Kept for the next generation of the same batch and capacity bucket.
   */
  staticDecoder(opts: { batch: number; maxLength: number; greedy: boolean; sample?: boolean; force?: boolean }): StaticDecoder | null {
    if (this.model.positionDependentRope) {
      if (opts.force) throw new UnsupportedError('generate', `cache_implementation 'static' does not support RoPE type ${JSON.stringify(Object.values(this.cfg.rope).map((r) => r.rope_type))} (its frequencies depend on the positions seen); use cache_implementation: 'dynamic'`);
      return null;
    }
    if (!opts.force && !replayEnabled(this.device)) return null;
    const capacity = capacityFor(opts.maxLength, this.device);
    const sample = !opts.greedy && opts.sample === true;
    const key = `${opts.batch}:${capacity}:${opts.greedy ? 'greedy' : sample ? 'sample' : 'logits'}`;
    let d = this.staticDecoders.get(key);
    if (d && !d.isDisposed && d.inUse) {
      // another generation (interleaved at its awaits) holds the kept decoder's cache: one of its own
      d = new StaticDecoder(this, opts.batch, capacity, opts.greedy, sample);
      d.ephemeral = true;
      return d;
    }
    if (d && !d.isDisposed) { this.staticDecoders.delete(key); this.staticDecoders.set(key, d); return d; }
    d = new StaticDecoder(this, opts.batch, capacity, opts.greedy, sample);
    this.staticDecoders.set(key, d);
    while (this.staticDecoders.size > 2) {
      const [oldest, old] = this.staticDecoders.entries().next().value as [string, StaticDecoder];
      this.staticDecoders.delete(oldest);
      // one still in use is freed by its generation's release()
      if (old.inUse) old.ephemeral = true; else old.dispose();
    }
    return d;
  }

  /** The kept static decoders: batch, capacity and stats() (whether steps replay a graph, which step path they take), for benchmarks. */
  staticDecoderStats(): { batch: number; capacity: number; stats: ReturnType<StaticDecoder['stats']> }[] {
    return [...this.staticDecoders.values()].filter((d) => !d.isDisposed).map((d) => ({ batch: d.batch, capacity: d.capacity, stats: d.stats() }));
  }

  private disposeStaticDecoders(): void {
    for (const d of this.staticDecoders.values()) d.dispose();
    this.staticDecoders.clear();
  }

  /** A tensor argument on this model's device (a CPU tensor is uploaded; another device is an error). */
  private onDevice(op: string, what: string, t: Tensor): Tensor {
    if (t.device === this.device) return t;
    if (t.device.type === 'cpu') return t.to(this.device);
    throw new ValueError(op, `${what} is on ${t.device} but the model is on ${this.device}; move it with .to('${this.device}') or create it on the CPU`);
  }

  /**
   * Logits [B, T, vocab] (or [B, logits_to_keep, vocab]) in the model's dtype, as transformers'
   * `model(input_ids, attention_mask=..., position_ids=...)` computes them.
   *
   * Positions: given position_ids are used as they are. Without them, a forward with a cache that has
   * an attention_mask derives them as transformers' generate() does (cumsum(mask) - 1, 1 at padding),
   * so left-padded rows start at position 0; any other forward uses past + arange(T), as transformers'
   * forward() does when called without position_ids.
   *
   * Length: every family here encodes positions with RoPE, which has no hard limit, so forward (as
   * transformers') runs past max_position_embeddings; generate() refuses prompts longer than the context.
   */
  override forward(input_ids: Tensor, opts: ForwardOptions = {}): Tensor {
    const op = 'CausalLM.forward';
    if (!(input_ids instanceof Tensor)) throw new ValueError(op, `input_ids must be an nbx.Tensor of token ids (int64, [batch, seq_len]), got ${typeof input_ids}`);
    if (input_ids.dt !== 'int64') throw new DTypeError(op, `input_ids must be int64 (as PyTorch's LongTensor), got ${input_ids.dt}; convert with .long()`);
    if (input_ids.ndim !== 2) throw new ShapeError(op, `input_ids must be 2-D [batch, seq_len], got shape [${input_ids.shape.join(', ')}]; add a batch dim with .unsqueeze(0)`);
    const [B, T] = input_ids.shape as [number, number];
    if (B === 0 || T === 0) throw new ValueError(op, `input_ids is empty (shape [${B}, ${T}]): give at least one token`);
    const cache = opts.cache ?? null;
    if (cache !== null && !(cache instanceof KVCacheBuffers)) throw new ValueError(op, 'cache must come from this model\'s newCache()');
    if (cache) {
      if (cache.isDisposed) throw new ValueError(op, 'the cache was disposed; create a new one with model.newCache()');
      if (cache.shape.layers !== this.cfg.num_hidden_layers || cache.shape.kvHeads !== this.cfg.num_key_value_heads || cache.shape.headDim !== this.cfg.head_dim || cache.shape.device !== this.device || cache.shape.dtype !== this.dt) {
        throw new ValueError(op, 'the cache was made by another model (layers, heads, dtype or device differ); use this model\'s newCache()');
      }
      if (cache.batch !== B) throw new ShapeError(op, `input_ids has batch ${B} but the cache was made for batch ${cache.batch}; newCache({ batch: ${B} })`);
    }
    const past = cache?.length ?? 0;
    const keep = opts.logits_to_keep ?? 0;
    if (!Number.isInteger(keep) || keep < 0) throw new ValueError(op, `logits_to_keep must be a non-negative integer, got ${keep}`);

    const logits = nbx.scope(() => {
      const ids = this.onDevice(op, 'input_ids', input_ids);
      let padding: Tensor | null = null;
      const am = opts.attention_mask ?? null;
      if (am !== null) {
        if (!(am instanceof Tensor)) throw new ValueError(op, `attention_mask must be an nbx.Tensor, got ${typeof am}`);
        if (am.ndim !== 2 || am.shape[0] !== B || am.shape[1] !== past + T) {
          throw new ShapeError(op, `attention_mask must be [batch, past + seq_len] = [${B}, ${past + T}] (it covers the cached tokens too), got [${am.shape.join(', ')}]`);
        }
        if (am.is_floating_point() || am.is_complex()) throw new DTypeError(op, `attention_mask must hold 0/1 as int64 or bool, got ${am.dt}`);
        padding = this.onDevice(op, 'attention_mask', am).ne(0);
      }
      let positionIds: Tensor;
      let maxPosition = past + T - 1;
      const pid = opts.position_ids ?? null;
      if (pid !== null) {
        if (!(pid instanceof Tensor) || pid.dt !== 'int64') throw new DTypeError(op, `position_ids must be an int64 tensor, got ${pid instanceof Tensor ? pid.dt : typeof pid}`);
        if (pid.ndim !== 2 || (pid.shape[0] !== B && pid.shape[0] !== 1) || pid.shape[1] !== T) {
          throw new ShapeError(op, `position_ids must be [batch, seq_len] = [${B}, ${T}] (or [1, ${T}]), got [${pid.shape.join(', ')}]`);
        }
        positionIds = this.onDevice(op, 'position_ids', pid).expand([B, T]);
        if (this.model.positionDependentRope) maxPosition = this.readMax(positionIds, maxPosition);
      } else if (cache && padding) {
        // transformers' generate(): attention_mask.cumsum(-1) - 1, with 1 at padded positions
        const cs = padding.to('int64').cumsum(-1).sub(1).masked_fill(padding.logical_not(), 1);
        positionIds = cs.slice(1, past, past + T);
        if (this.model.positionDependentRope) maxPosition = this.readMax(positionIds, maxPosition);
      } else {
        positionIds = nbx.arange(past, past + T, { dtype: 'int64', device: this.device }).unsqueeze(0).expand([B, T]);
      }
      // Positions made here lie in [0, past + T) (the cumsum path's padding gets 1); given ones may not.
      const positionBound = pid === null ? past + T : null;
      let h = this.model.forward(ids, { padding, positionIds, maxPosition, positionBound, cache });
      if (keep > 0 && keep < T) h = h.slice(1, T - keep);
      let out = this.lm_head.forward(h);
      const cap = this.cfg.final_logit_softcapping;
      if (cap !== null) out = out.div(cap).tanh().mul(cap);
      return out;
    });
    cache?.advance(T);
    return logits;
  }

  /** max(position_ids) on the host where the device reads back synchronously; else the arange bound. */
  private readMax(positionIds: Tensor, bound: number): number {
    if (!backendFor(positionIds.device).downloadSync) return bound;
    return Number(positionIds.max().item());
  }

  /** transformers' generate(): token ids [B, T + new] (see src/generation). */
  generate(input: GenerateInput, opts: GenerateOptions = {}): Promise<Tensor> { return runGenerate(this, input, opts); }
  /** Decoded text pieces as they are generated (see src/generation). */
  stream(input: GenerateInput, opts: GenerateOptions = {}): AsyncGenerator<string> { return runStream(this, input, opts); }

  /** Moves or casts the weights (as nn.Module.to); the model's device and dtype follow. */
  override to(...args: Parameters<Module['to']>): this {
    super.to(...args);
    const w = this.model.embed_tokens.weight;
    this.device = w.device; this.dt = w.dt; this.dtype = DType.all[w.dt];
    this.model.disposeRope(); // recreated on the new device at the next forward
    this.disposeStaticDecoders(); // their graphs read the old weights
    return this;
  }

  override dispose(): void {
    this.disposeStaticDecoders();
    this.model.disposeRope();
    super.dispose();
  }
}

export type { KVCache };
