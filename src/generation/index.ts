// generate() and stream(): transformers' GenerationMixin (greedy search and sampling) for any CausalLM.
// The prompt runs once through forward() filling the KV cache, then each step feeds one token and
// keeps the last position's logits (logits_to_keep 1). Batches are left-padded with an attention
// mask, finished rows get pad tokens, and sampling draws with nbx's torch-exact generator in
// transformers' order (see logits.ts), so a float32 CPU model samples the ids transformers samples.

import type { CausalLM } from '../models/types.js';
import { Tensor } from '../tensor/tensor.js';
import { scope } from '../tensor/storage.js';
import { DeviceLimitError, DTypeError, ShapeError, UnsupportedError, ValueError } from '../errors.js';
import { argmax as nbxArgmax } from '../ops/reduce.js';
import { rand as nbxRand } from '../ops/random.js';
import type { RowSampling } from './sampler.js';
import type { Tokenizer } from '../tokenizer/index.js';
import { resolveConfig, type GenerationOptions, type ResolvedConfig } from './config.js';
import { chooseTokens, processLogits } from './logits.js';
import { IncrementalDecoder } from './text.js';

export type { GenerationOptions, ResolvedConfig, Streamer } from './config.js';
export { resolveConfig } from './config.js';
export { IncrementalDecoder } from './text.js';

export type GenerateInput = Tensor | string | readonly string[];
export type GenerateOptions = GenerationOptions;

const OP = 'generate';

/** Token ids of a batch, left-padded to one length, with its mask (null when no row is padded). */
export interface PreparedPrompt {
  rows: number[][];
  /** 1 for a real token, 0 for left padding; null when every row is full. */
  mask: Uint8Array[] | null;
  length: number;
}

/** One decoding step as generateSteps reports it. */
export interface GenerationStep {
  /** The token each row got (the pad token for a row that had already finished). */
  tokens: number[];
  /** Whether each row is still generating after this step. */
  unfinished: boolean[];
  /** 1 for the first new token. */
  step: number;
}

function tokenizerFor(model: CausalLM, cfg: ResolvedConfig, why: string): Tokenizer {
  if (!cfg.tokenizer) throw new ValueError(OP, `${why} needs a tokenizer: the model has none (no tokenizer.json in its folder); pass { tokenizer } or token ids`);
  return cfg.tokenizer;
}

async function hostInts(t: Tensor): Promise<number[]> {
  return Array.from(await t.data() as ArrayLike<number | bigint | boolean>, Number);
}

/** Turns the input into padded rows; checks ids, emptiness and the mask. */
export async function preparePrompt(model: CausalLM, input: GenerateInput, cfg: ResolvedConfig): Promise<PreparedPrompt> {
  let rows: number[][];
  let mask: Uint8Array[] | null = null;
  if (input instanceof Tensor) {
    if (input.dtype.name === 'bool' || input.is_floating_point() || input.is_complex()) {
      throw new DTypeError(OP, `input_ids must be an integer tensor (int64), got ${input.dtype.name}`);
    }
    if (input.ndim !== 2) throw new ShapeError(OP, `input_ids must be [batch, length], got shape [${input.shape.join(', ')}]${input.ndim === 1 ? ' (use input_ids.unsqueeze(0))' : ''}`);
    const [b, t] = input.shape as [number, number];
    const flat = await hostInts(input);
    rows = Array.from({ length: b }, (_, i) => flat.slice(i * t, (i + 1) * t));
    if (cfg.attention_mask) {
      const m = cfg.attention_mask;
      if (m.ndim !== 2 || m.shape[0] !== b || m.shape[1] !== t) {
        throw new ShapeError(OP, `attention_mask must have input_ids' shape [${b}, ${t}], got [${m.shape.join(', ')}]`);
      }
      const mv = await hostInts(m);
      if (mv.some((v) => v !== 0 && v !== 1)) throw new ValueError(OP, 'attention_mask must hold only 0 and 1');
      mask = Array.from({ length: b }, (_, i) => Uint8Array.from(mv.slice(i * t, (i + 1) * t)));
    } else if (cfg.pad_token_id !== null && !cfg.eos_token_id.includes(cfg.pad_token_id) && flat.includes(cfg.pad_token_id)) {
      // transformers infers the mask from the pad token when it is present and differs from EOS.
      mask = rows.map((r) => Uint8Array.from(r, (id) => (id === cfg.pad_token_id ? 0 : 1)));
    }
  } else {
    const texts = typeof input === 'string' ? [input] : input;
    if (!Array.isArray(texts) || texts.length === 0 || texts.some((s) => typeof s !== 'string')) {
      throw new ValueError(OP, 'input must be token ids (an int64 Tensor [B, T]), a string or a non-empty array of strings');
    }
    if (cfg.attention_mask) throw new ValueError(OP, 'attention_mask goes with token ids; for text the mask comes from the tokenizer');
    const tok = tokenizerFor(model, cfg, 'text input');
    texts.forEach((s, i) => { if (s.length === 0) throw new ValueError(OP, `prompt${texts.length > 1 ? ` ${i}` : ''} is empty: give at least one character of text`); });
    const encoded = texts.map((s) => tok.encode(s, { add_special_tokens: cfg.add_special_tokens }));
    const longest = Math.max(...encoded.map((e) => e.length));
    if (encoded.some((e) => e.length < longest)) {
      const pad = tok.pad_token_id ?? cfg.pad_token_id;
      if (pad === null) throw new ValueError(OP, 'prompts of different lengths need a pad token: the tokenizer has none and no pad_token_id or eos_token_id is set; pass pad_token_id');
      rows = encoded.map((e) => [...new Array<number>(longest - e.length).fill(pad), ...e]);
      mask = encoded.map((e) => { const m = new Uint8Array(longest); m.fill(1, longest - e.length); return m; });
    } else rows = encoded;
  }
  const length = rows[0]?.length ?? 0;
  if (length === 0) throw new ValueError(OP, 'the prompt is empty (0 tokens): give at least one token');
  const vocab = model.config.vocab_size;
  for (const r of rows) for (const id of r) {
    if (!Number.isInteger(id) || id < 0 || id >= vocab) throw new ValueError(OP, `token id ${id} is outside the model's vocabulary (0..${vocab - 1})`);
  }
  if (mask) mask.forEach((m, i) => { if (!m.includes(1)) throw new ValueError(OP, `row ${i} of the batch is all padding (its attention_mask is all 0): give every row a token`); });
  if (mask && mask.every((m) => !m.includes(0))) mask = null;
  return { rows, mask, length };
}

/**
 * The model's context in tokens, or null when it has none to exceed: dynamic RoPE scaling (dynamic NTK)
 * exists to run past max_position_embeddings, rescaling the frequencies as the sequence grows.
 */
function contextLimit(model: CausalLM): number | null {
  const c = model.config as Record<string, unknown>;
  const ropes = [c.rope_scaling, c.rope_parameters].filter((r): r is Record<string, unknown> => r !== null && typeof r === 'object');
  const types = ropes.flatMap((r) => [r.rope_type, r.type, ...Object.values(r).map((v) => (v && typeof v === 'object' ? (v as Record<string, unknown>).rope_type : undefined))]);
  if (types.includes('dynamic')) return null;
  return typeof c.max_position_embeddings === 'number' ? c.max_position_embeddings : null;
}

/** The length to stop at: checked against the prompt and the model's context. */
function targetLength(model: CausalLM, cfg: ResolvedConfig, promptLength: number): number {
  const maxLength = cfg.max_new_tokens !== null ? promptLength + cfg.max_new_tokens : cfg.max_length;
  const context = contextLimit(model);
  if (typeof context === 'number' && promptLength > context) {
    throw new ValueError(OP, `the prompt has ${promptLength} tokens, more than the model's context of ${context} (max_position_embeddings): shorten the prompt`);
  }
  if (maxLength <= promptLength) {
    throw new ValueError(OP, `max_length is ${maxLength} but the prompt already has ${promptLength} tokens: set max_new_tokens (the number of tokens to generate)`);
  }
  if (typeof context === 'number' && maxLength > context) {
    throw new ValueError(OP, `the prompt (${promptLength} tokens) plus ${maxLength - promptLength} new tokens exceeds the model's context of ${context} tokens: ` +
      `set max_new_tokens to at most ${context - promptLength}`);
  }
  return maxLength;
}

const int64 = (values: readonly number[], shape: number[], device: CausalLM['device'] | 'cpu'): Tensor =>
  Tensor.fromStorage(BigInt64Array.from(values, (v) => BigInt(v)), 'int64', shape, device);

/** Yields to the event loop between steps so that timers and signals (Ctrl-C) are handled mid-generation. */
const breathe: () => Promise<void> = typeof setImmediate === 'function'
  ? () => new Promise((resolve) => setImmediate(resolve))
  : async () => {};

/** Does row text end in a stop string that the last token completed (transformers' StopStringCriteria)? */
function hitsStopString(tok: Tokenizer, row: readonly number[], stops: readonly string[]): boolean {
  const longest = Math.max(...stops.map((s) => s.length));
  const tail = row.slice(Math.max(0, row.length - 4 * longest - 4));
  const before = tok.decode(tail.slice(0, -1)).length;
  const text = tok.decode(tail);
  return stops.some((s) => text.indexOf(s, Math.max(0, before - s.length + 1)) >= 0);
}

/** The last position's logits as float32 [B, V] on the CPU (where the processors run). */
async function lastScores(logits: Tensor): Promise<Tensor> {
  const [b, t, v] = logits.shape as [number, number, number];
  const last = scope(() => logits.narrow(1, t - 1, 1).reshape([b, v]).to('float32').contiguous());
  if (last.device.type === 'cpu') return last;
  try { return Tensor.fromStorage(await last.dataStorage(), 'float32', [b, v]); } finally { last.dispose(); }
}

/** Whether this step's scores go through a processor (greedy decoding is otherwise a plain argmax). */
function hasProcessors(cfg: ResolvedConfig, curLen: number, promptLen: number): boolean {
  const eosMasked = cfg.eos_token_id.length > 0 && (curLen < cfg.min_length || curLen - promptLen < cfg.min_new_tokens);
  return cfg.do_sample || cfg.repetition_penalty !== 1.0 || eosMasked;
}

/** Argmax of the last position on the logits' device; null when the device cannot compute it (int64 results). */
async function deviceArgmax(logits: Tensor): Promise<number[] | null> {
  const [b, t, v] = logits.shape as [number, number, number];
  let ids: Tensor;
  try {
    ids = scope(() => nbxArgmax(logits.narrow(1, t - 1, 1).reshape([b, v]), -1));
  } catch (e) {
    if (e instanceof DeviceLimitError) return null;
    throw e;
  }
  try { return Array.from(await ids.dataStorage() as BigInt64Array, Number); } finally { ids.dispose(); }
}

/**
 * The decoding loop as an async iterator of steps; its return value is the sequences [B, T + new]
 * (int64, CPU). generate() and stream() drive it; the command line uses it to time each step.
 */
export async function* generateSteps(model: CausalLM, input: GenerateInput | PreparedPrompt, opts: GenerationOptions = {}): AsyncGenerator<GenerationStep, Tensor> {
  const cfg = resolveConfig(model, opts);
  const prompt = isPrepared(input) ? input : await preparePrompt(model, input, cfg);
  const { rows, mask } = prompt;
  const batch = rows.length, promptLength = prompt.length;
  const maxLength = targetLength(model, cfg, promptLength);
  const stopTok = cfg.stop_strings.length ? tokenizerFor(model, cfg, 'stop_strings') : null;
  const canPad = cfg.eos_token_id.length > 0 && cfg.pad_token_id !== null;
  const device = model.device;
  const unfinished = new Array<boolean>(batch).fill(true);
  // Real tokens per row so far: the next token's position is this count (left padding has none).
  const seen = mask ? mask.map((m) => m.reduce((a, x) => a + x, 0)) : new Array<number>(batch).fill(promptLength);
  const maskRows = mask ? mask.map((m) => Array.from(m)) : null;

  cfg.streamer?.put(int64(rows.flat(), [batch, promptLength], 'cpu'));
  // Greedy steps without processors take the argmax where the logits are and read back B ids, not B×V scores.
  let onDeviceArgmax = device.type !== 'cpu';
  // On CUDA and the CPU the decode steps replay a recorded step (src/models/static_decode.ts); it owns its cache
  const greedy = !cfg.do_sample && cfg.repetition_penalty === 1.0;
  const sampleOnDevice = deviceSampling(cfg, device, promptLength);
  const fast = cfg.cache_implementation === 'dynamic' ? null
    : model.staticDecoder?.({ batch, maxLength, greedy, sample: sampleOnDevice, force: cfg.cache_implementation === 'static' }) ?? null;
  const rowSampling = sampleOnDevice ? new Array<RowSampling>(batch).fill(cfg.do_sample
    ? { temperature: cfg.temperature, top_k: cfg.top_k, top_p: cfg.top_p, min_p: cfg.min_p ?? 0, repetition_penalty: cfg.repetition_penalty }
    : { temperature: 0, top_k: 0, top_p: 1, min_p: 0, repetition_penalty: cfg.repetition_penalty }) : null;
  fast?.begin(maskRows, promptLength, rows);
  const cache = fast ? fast.cache : model.newCache({ batch, maxLength });
  let feed: Tensor | null = null, positions: Tensor | null = null;
  try {
    feed = int64(rows.flat(), [batch, promptLength], device);
    positions = maskRows
      ? int64(maskRows.flatMap((m) => { let c = 0; return m.map((x) => (x ? c++ : 1)); }), [batch, promptLength], device) : null;
    /** The tokens this step feeds (after the prompt). */
    let fed: number[] | null = null;
    /**
     * A greedy static decoder's next step, queued before this step's ids were read (stepFromDevice feeds
     * the device's argmax): the device runs it while the host reads, yields and checks the stop criteria.
     * Only while every row is unfinished (a finished row would be fed a pad token) and no processor applies.
     */
    let queued: { logits: Tensor; next: Tensor | null } | null = null;
    const pipelined = (curLen: number): boolean => fast !== null && fast.fallbackReason === null && greedy && rowSampling === null
      && device.type === 'cuda' && process.env.NBX_DECODE_PIPELINE !== '0' && curLen < maxLength && !hasProcessors(cfg, curLen, promptLength) && !unfinished.includes(false);
    for (let cur = promptLength, step = 1; ; cur++, step++) {
      let logits: Tensor;
      /** Logits of a static decoder's step belong to it (rewritten by its next step). */
      let owned = true;
      let next: Tensor | null = null;
      if (fed !== null && fast !== null && fast.fallbackReason === null) {
        const uniforms = rowSampling && cfg.do_sample ? Array.from(drawUniforms(batch, cfg)) : [];
        const r = queued ?? fast.step(fed, maskRows ? seen.map((n) => n - 1) : new Array<number>(batch).fill(cache.length), rowSampling ? { rows: rowSampling, uniforms } : undefined);
        queued = null;
        logits = r.logits; next = r.next; owned = false;
      } else {
        feed ??= int64(fed!, [batch, 1], device);
        if (fed !== null && maskRows) positions ??= int64(seen.map((n) => n - 1), [batch, 1], device);
        const attention = maskRows ? int64(maskRows.flat(), [batch, cur], device) : null;
        try {
          logits = model.forward(feed, { attention_mask: attention, cache, position_ids: positions, logits_to_keep: 1 });
        } finally {
          feed.dispose(); attention?.dispose(); positions?.dispose();
          feed = null; positions = null;
        }
      }
      let chosen: number[] | null = null;
      try {
        if (next !== null && (rowSampling !== null || !hasProcessors(cfg, cur, promptLength))) {
          const read = fast!.readNext(next); // queued now: the copies precede the next step, which rewrites `next`
          if (pipelined(cur + 1)) queued = fast!.stepFromDevice();
          chosen = await read;
        } else if (onDeviceArgmax && !hasProcessors(cfg, cur, promptLength)) {
          chosen = await deviceArgmax(logits);
          if (chosen === null) onDeviceArgmax = false;
        }
        if (chosen === null) {
          const scores = await lastScores(logits);
          chosen = scope(() => {
            const ids = processLogits(scores, cfg, {
              curLen: cur, promptLen: promptLength, inputIds: () => int64(rows.flat(), [batch, cur], 'cpu'),
            });
            return Array.from(chooseTokens(ids, cfg).dataStorageSync() as BigInt64Array, Number);
          });
          scores.dispose();
        }
      } finally { if (owned) logits.dispose(); }
      const tokens = chosen.map((t, b) => (unfinished[b] || !canPad ? t : cfg.pad_token_id!));
      tokens.forEach((t, b) => { rows[b]!.push(t); maskRows?.[b]!.push(1); seen[b]! += 1; });
      cfg.streamer?.put(int64(tokens, [batch], 'cpu'));
      for (let b = 0; b < batch; b++) {
        if (!unfinished[b]) continue;
        if (cfg.eos_token_id.includes(tokens[b]!)) unfinished[b] = false;
        else if (stopTok && hitsStopString(stopTok, rows[b]!, cfg.stop_strings)) unfinished[b] = false;
      }
      yield { tokens, unfinished: [...unfinished], step };
      if (cur + 1 >= maxLength || !unfinished.includes(true)) break;
      fed = tokens;
      await breathe();
    }
  } finally {
    feed?.dispose(); positions?.dispose();
    if (fast) fast.release(); else cache.dispose();
    cfg.streamer?.end();
  }
  return int64(rows.flat(), [batch, rows[0]!.length], 'cpu');
}

/**
 * Whether the steps choose their tokens on the device (src/generation/sampler.ts): on a GPU, when sampling
 * or a repetition penalty is on and no minimum length masks EOS. The CPU keeps
 * transformers' processors and multinomial on the host, so that its sampled ids equal transformers'.
 */
function deviceSampling(cfg: ResolvedConfig, device: CausalLM['device'], promptLength: number): boolean {
  if ((!cfg.do_sample && cfg.repetition_penalty === 1.0) || device.type === 'cpu') return false;
  const eosMasked = cfg.eos_token_id.length > 0 && (cfg.min_new_tokens > 1 || cfg.min_length > promptLength + 1);
  return !eosMasked;
}

/** One uniform draw in [0, 1) per row from the generation's generator (or the default one). */
function drawUniforms(batch: number, cfg: ResolvedConfig): Float32Array {
  const u = cfg.generator ? nbxRand([batch], { generator: cfg.generator }) : nbxRand([batch]);
  try { return u.dataStorageSync() as Float32Array; } finally { u.dispose(); }
}

function isPrepared(x: unknown): x is PreparedPrompt {
  return x !== null && typeof x === 'object' && !(x instanceof Tensor) && !Array.isArray(x) && Array.isArray((x as PreparedPrompt).rows);
}

/**
 * model.generate(input, options) as transformers: token ids [B, T + new] (int64, on the CPU), the
 * prompt included. `input` is input_ids [B, T] (with options.attention_mask for left padding), a
 * string, or an array of strings (left-padded as a batch).
 */
export async function generate(model: CausalLM, input: GenerateInput, opts: GenerateOptions = {}): Promise<Tensor> {
  const it = generateSteps(model, input, opts);
  for (;;) {
    const r = await it.next();
    if (r.done) return r.value;
  }
}

/**
 * model.stream(input, options): the generated text as it comes, in pieces of whole characters,
 * ending at EOS, a stop string or max_new_tokens. One prompt (a string or input_ids [1, T]).
 */
export async function* stream(model: CausalLM, input: GenerateInput, opts: GenerateOptions = {}): AsyncGenerator<string> {
  const cfg = resolveConfig(model, opts);
  const tok = tokenizerFor(model, cfg, 'stream()');
  if ((Array.isArray(input) && input.length !== 1) || (input instanceof Tensor && input.ndim === 2 && input.shape[0] !== 1)) {
    throw new UnsupportedError('stream', 'stream() takes one prompt (as transformers\' TextStreamer); use generate() for batches');
  }
  const prompt = await preparePrompt(model, input, cfg);
  const decoder = new IncrementalDecoder(tok, prompt.rows[0]);
  for await (const step of generateSteps(model, prompt, opts)) {
    // EOS is a special token: it decodes to nothing.
    const piece = decoder.push(step.tokens[0]!);
    if (piece) yield piece;
  }
  const rest = decoder.flush();
  if (rest) yield rest;
}
