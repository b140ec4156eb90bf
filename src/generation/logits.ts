// transformers' logits processors for one decoding step, in the order `_get_logits_processor` builds
// them (repetition penalty, minimum lengths, then the sampling warpers temperature, top-k, top-p,
// min-p) and with the same tensor operations, so that a float32 CPU run rounds as PyTorch does.
// Scores are float32 [B, V] on the CPU.

import type { Tensor } from '../tensor/tensor.js';
import * as nbx from '../index.js';
import type { ResolvedConfig } from './config.js';

export interface StepContext {
  /** The sequences so far, prompt (with its padding) included: [B, curLen] int64 on the CPU. */
  inputIds: () => Tensor;
  curLen: number;
  promptLen: number;
}

/** A [1, V] bool mask, true at `ids`. */
function idMask(vocab: number, ids: readonly number[]): Tensor {
  const m = new Uint8Array(vocab);
  for (const id of ids) if (id < vocab) m[id] = 1;
  return nbx.Tensor.fromStorage(m, 'bool', [1, vocab]);
}

/** A [1, V] bool mask, true everywhere except the first or last `n` columns (min_tokens_to_keep). */
function keepMask(vocab: number, n: number, where: 'first' | 'last'): Tensor {
  const m = new Uint8Array(vocab).fill(1);
  if (where === 'first') m.fill(0, 0, Math.min(n, vocab)); else m.fill(0, Math.max(0, vocab - n));
  return nbx.Tensor.fromStorage(m, 'bool', [1, vocab]);
}

/** RepetitionPenaltyLogitsProcessor: every token already in the sequence (prompt and padding included). */
function repetitionPenalty(scores: Tensor, ids: Tensor, penalty: number): Tensor {
  const score = nbx.gather(scores, 1, ids);
  const penalized = nbx.where(nbx.lt(score, 0), nbx.mul(score, penalty), nbx.div(score, penalty));
  return nbx.scatter(scores, 1, ids, penalized);
}

/** TopKLogitsWarper (min_tokens_to_keep 1): below the k-th largest score goes to -inf. */
function topK(scores: Tensor, k: number): Tensor {
  const vocab = scores.shape[1]!;
  const kk = Math.min(Math.max(k, 1), vocab);
  const kth = nbx.topk(scores, kk).values.narrow(1, kk - 1, 1);
  return nbx.masked_fill(scores, nbx.lt(scores, kth), -Infinity);
}

/** TopPLogitsWarper: ascending sort, softmax, cumsum; drop the mass at or below 1 - top_p, keep the top token. */
function topP(scores: Tensor, p: number): Tensor {
  const vocab = scores.shape[1]!;
  const { values, indices } = nbx.sort(scores, { descending: false });
  const cumulative = nbx.cumsum(nbx.softmax(values, -1), -1);
  const sortedRemove = nbx.logical_and(nbx.le(cumulative, 1 - p), keepMask(vocab, 1, 'last'));
  const remove = nbx.scatter(sortedRemove, 1, indices, sortedRemove);
  return nbx.masked_fill(scores, remove, -Infinity);
}

/** MinPLogitsWarper: drop tokens whose probability is below min_p times the top one, keep the top token. */
function minP(scores: Tensor, minPValue: number): Tensor {
  const vocab = scores.shape[1]!;
  const probs = nbx.softmax(scores, -1);
  const top = nbx.amax(probs, -1, true);
  const toRemove = nbx.lt(probs, nbx.mul(top, minPValue));
  const sortedIdx = nbx.argsort(scores, -1, true);
  const sortedRemove = nbx.logical_and(nbx.gather(toRemove, -1, sortedIdx), keepMask(vocab, 1, 'first'));
  const remove = nbx.scatter(sortedRemove, 1, sortedIdx, sortedRemove);
  return nbx.masked_fill(scores, remove, -Infinity);
}

/**
 * Top-k then top-p, computing top-p on the k kept scores instead of sorting all V: the V - k others
 * are -inf, so they sort first, add exact zeros to the softmax and the cumulative sum, and are
 * removed already. Returns null (use the full computation) when ties make the order of the kept
 * scores depend on the sort algorithm: a tie at the k-th score, or two kept scores equal.
 */
function topKThenTopP(scores: Tensor, k: number, p: number): Tensor | null {
  const [rows, vocab] = scores.shape as [number, number];
  const kk = Math.min(Math.max(k, 1), vocab);
  const { values, indices } = nbx.topk(scores, kk);
  const kth = values.narrow(1, kk - 1, 1);
  const kept = Array.from(nbx.count_nonzero(nbx.ge(scores, kth), -1).dataStorageSync() as BigInt64Array, Number);
  if (kept.some((n) => n !== kk)) return null;
  const v = values.dataStorageSync() as Float32Array;
  for (let r = 0; r < rows; r++) for (let j = 1; j < kk; j++) if (v[r * kk + j] === v[r * kk + j - 1]) return null;
  const filtered = nbx.masked_fill(scores, nbx.lt(scores, kth), -Infinity);
  const ascending = nbx.flip(values, [1]), ascendingIdx = nbx.flip(indices, [1]);
  const cumulative = nbx.cumsum(nbx.softmax(ascending, -1), -1);
  const sortedRemove = nbx.logical_and(nbx.le(cumulative, 1 - p), keepMask(kk, 1, 'last'));
  const remove = nbx.scatter(nbx.zeros([rows, vocab], { dtype: nbx.bool }), 1, ascendingIdx, sortedRemove);
  return nbx.masked_fill(filtered, remove, -Infinity);
}

/** Every processor the config turns on, applied to scores [B, V] float32; returns the processed scores. */
export function processLogits(scores: Tensor, cfg: ResolvedConfig, ctx: StepContext): Tensor {
  const vocab = scores.shape[1]!;
  let s = scores;
  if (cfg.repetition_penalty !== 1.0) s = repetitionPenalty(s, ctx.inputIds(), cfg.repetition_penalty);
  const eos = cfg.eos_token_id;
  if (eos.length > 0 && cfg.min_length > 0 && ctx.curLen < cfg.min_length) s = nbx.masked_fill(s, idMask(vocab, eos), -Infinity);
  if (eos.length > 0 && cfg.min_new_tokens > 0 && ctx.curLen - ctx.promptLen < cfg.min_new_tokens) s = nbx.masked_fill(s, idMask(vocab, eos), -Infinity);
  if (cfg.do_sample) {
    if (cfg.temperature !== 1.0) s = nbx.div(s, cfg.temperature);
    const both = cfg.top_k !== 0 && cfg.top_p < 1.0 && cfg.top_k < vocab ? topKThenTopP(s, cfg.top_k, cfg.top_p) : null;
    if (both) s = both;
    else {
      if (cfg.top_k !== 0) s = topK(s, cfg.top_k);
      if (cfg.top_p < 1.0) s = topP(s, cfg.top_p);
    }
    if (cfg.min_p !== null) s = minP(s, cfg.min_p);
  }
  return s;
}

/** The next token of each row: argmax of the scores, or a draw from softmax(scores) with the generator. */
export function chooseTokens(scores: Tensor, cfg: ResolvedConfig): Tensor {
  if (!cfg.do_sample) return nbx.argmax(scores, -1);
  const probs = nbx.softmax(scores, -1);
  const drawn = cfg.generator ? nbx.multinomial(probs, 1, { generator: cfg.generator }) : nbx.multinomial(probs, 1);
  return drawn.squeeze(1);
}
