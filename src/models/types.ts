// The contract between the model families (src/models), generation (src/generation) and the
// tokenizer (src/tokenizer). A family implements CausalLM; generation only needs forward() and a cache.

import type { RowSampling } from '../generation/sampler.js';
import type { Tensor } from '../tensor/tensor.js';
import type { Device } from '../backend/backend.js';
import type { DType } from '../dtype/dtypes.js';
import type { Tokenizer } from '../tokenizer/index.js';

/** Per-layer key/value storage that forward() fills and reads; one per sequence batch. */
export interface KVCache {
  /** Tokens already cached (the position of the next token, before left-padding correction). */
  readonly length: number;
  /** Frees every buffer the cache holds. */
  dispose(): void;
}

export interface ForwardOptions {
  /** [B, past + T] of 0/1 (int64 or bool): 0 marks padding (left padding, as transformers pads). */
  attention_mask?: Tensor | null;
  /** Filled with this call's keys and values; past entries are read. */
  cache?: KVCache | null;
  /**
   * [B, T] int64. Default: with a cache and an attention_mask, derived from the mask as transformers'
   * generate() does (cumsum - 1, and 1 at padding), so left-padded rows start at 0; otherwise past
   * length + arange(T), as transformers' forward() without position_ids.
   */
  position_ids?: Tensor | null;
  /** Compute logits for the last `n` positions only (transformers' logits_to_keep); 0 = all. */
  logits_to_keep?: number;
}

/** What generation uses of a static decoder (src/models/static_decode.ts). */
export interface StaticDecoderLike {
  readonly cache: KVCache & { readonly length: number };
  readonly fallbackReason: string | null;
  /** `promptIds`: the prompt rows (padding included), for a sampling decoder's repetition penalty. */
  begin(promptMask: readonly (readonly number[])[] | null, promptLength: number, promptIds?: readonly (readonly number[])[]): void;
  /** The generation that began it is over (see StaticDecoder.release). */
  release(): void;
  /** `sampling`: each row's settings and uniform draw, for a decoder made with `sample` (its `next` is then the drawn ids). */
  step(tokens: readonly number[], positions: readonly number[], sampling?: { rows: readonly RowSampling[]; uniforms: readonly number[] }): { logits: Tensor; next: Tensor | null };
  /** The next greedy step fed from the device (the last step's argmax; positions and cache index plus one), queued without a host read. */
  stepFromDevice(): { logits: Tensor; next: Tensor | null };
  /** A step's `next` ids on the host and its deferred checks raised, both copies queued at the call. */
  readNext(next: Tensor): Promise<number[]>;
  checkErrors(): void;
}

export interface CausalLM {
  /** The parsed config.json, normalized (see src/models/config.ts). */
  readonly config: Readonly<Record<string, unknown>> & { model_type: string; vocab_size: number; max_position_embeddings?: number };
  readonly device: Device;
  readonly dtype: DType;
  /** generation_config.json's fields (empty object when the folder has none). */
  readonly generationConfig: Readonly<Record<string, unknown>>;
  /** Present when the folder has tokenizer files. */
  readonly tokenizer: Tokenizer | null;
  /** Logits [B, T, vocab] (or [B, logits_to_keep, vocab]) in the model's dtype. */
  forward(input_ids: Tensor, opts?: ForwardOptions): Tensor;
  /** A new, empty cache for this model. */
  newCache(opts?: { batch?: number; maxLength?: number }): KVCache;
  /**
   * Optional: a decoder whose one-token steps have a fixed shape (CUDA graph replay); generation uses it
   * for the steps after the prompt when it is not null. See src/models/static_decode.ts.
   */
  staticDecoder?(opts: { batch: number; maxLength: number; greedy: boolean; sample?: boolean; force?: boolean }): StaticDecoderLike | null;
  dispose(): void;
}
