// Generation options under transformers' GenerationConfig names: checked (a wrong name, type or range
// is a typed error naming the option) and resolved in transformers' order of precedence: the call's
// options, then the model's generation_config.json, then transformers' defaults.

import { Generator } from '../random/generator.js';
import { Tensor } from '../tensor/tensor.js';
import { UnsupportedError, ValueError } from '../errors.js';
import type { CausalLM } from '../models/types.js';
import type { Tokenizer } from '../tokenizer/index.js';

/** transformers' BaseStreamer: put() gets the prompt ids [B, T] first, then each step's tokens [B]. */
export interface Streamer { put(value: Tensor): void; end(): void }

export interface GenerationOptions {
  max_new_tokens?: number;
  /** Total length (prompt + new tokens); max_new_tokens wins when both are set, as in transformers. */
  max_length?: number;
  min_new_tokens?: number;
  min_length?: number;
  do_sample?: boolean;
  temperature?: number;
  top_k?: number;
  top_p?: number;
  min_p?: number | null;
  repetition_penalty?: number;
  eos_token_id?: number | readonly number[] | null;
  pad_token_id?: number | null;
  bos_token_id?: number | null;
  /** Stop when the text ends in one of these (transformers' StopStringCriteria); `stop` is an alias. */
  stop_strings?: string | readonly string[] | null;
  stop?: string | readonly string[] | null;
  /** nbx.Generator to draw from (torch's generator argument); default: the global generator. */
  generator?: Generator;
  /** Shorthand for a fresh generator seeded with this (torch.manual_seed before generate). */
  seed?: number | bigint;
  /** [B, T] 0/1 mask for tensor input (left padding); inferred from pad_token_id when absent, as transformers. */
  attention_mask?: Tensor | null;
  streamer?: Streamer | null;
  /** Decodes for stop strings when the model carries no tokenizer (transformers' tokenizer= argument). */
  tokenizer?: Tokenizer | null;
  /** Text input only: add the tokenizer's special tokens (BOS) as tokenizer(text) does. Default true. */
  add_special_tokens?: boolean;
  /**
   * transformers' cache_implementation: 'static' decodes with a fixed-size cache and fixed-shape steps
   * (replayed as a CUDA graph on CUDA), 'dynamic' with the growing cache. Default: static on CUDA
   * (NBX_CUDA_GRAPHS=0 turns it off), dynamic elsewhere.
   */
  cache_implementation?: 'static' | 'dynamic' | null;
  // Accepted only at the values that change nothing here (no beam search, one sequence per prompt).
  num_beams?: number;
  num_return_sequences?: number;
  use_cache?: boolean;
}

/** The options after precedence and defaults; what the decoding loop reads. */
export interface ResolvedConfig {
  max_new_tokens: number | null;
  max_length: number;
  min_new_tokens: number;
  min_length: number;
  do_sample: boolean;
  temperature: number;
  top_k: number;
  top_p: number;
  min_p: number | null;
  repetition_penalty: number;
  eos_token_id: number[];
  pad_token_id: number | null;
  stop_strings: string[];
  generator: Generator | null;
  attention_mask: Tensor | null;
  streamer: Streamer | null;
  tokenizer: Tokenizer | null;
  add_special_tokens: boolean;
  cache_implementation: 'static' | 'dynamic' | null;
}

// transformers' GenerationConfig defaults for what this module implements.
const DEFAULTS = {
  max_length: 20, max_new_tokens: null, min_length: 0, min_new_tokens: 0, do_sample: false, temperature: 1.0,
  top_k: 50, top_p: 1.0, min_p: null, repetition_penalty: 1.0,
} as const;

/** GenerationConfig fields this module does not implement, with the value at which they do nothing. */
const INERT_AT: Record<string, unknown> = {
  num_beams: 1, num_return_sequences: 1, use_cache: true, typical_p: 1.0, epsilon_cutoff: 0.0, eta_cutoff: 0.0,
  no_repeat_ngram_size: 0, encoder_no_repeat_ngram_size: 0, encoder_repetition_penalty: 1.0, diversity_penalty: 0.0,
  num_beam_groups: 1, renormalize_logits: false, remove_invalid_values: false, bad_words_ids: null,
  force_words_ids: null, forced_bos_token_id: null, forced_eos_token_id: null, suppress_tokens: null,
  begin_suppress_tokens: null, sequence_bias: null, guidance_scale: null, exponential_decay_length_penalty: null,
  max_time: null, penalty_alpha: null, constraints: null, prompt_lookup_num_tokens: null, assistant_early_exit: null,
  dola_layers: null, watermarking_config: null, low_memory: null, token_healing: false,
};

/** generation_config.json fields that describe the file or only beam search / outputs: read and ignored. */
const METADATA = new Set(['transformers_version', '_from_model_config', '_commit_hash', 'cache_implementation', 'cache_config',
  'return_dict_in_generate', 'output_scores', 'output_logits', 'output_attentions', 'output_hidden_states',
  'length_penalty', 'early_stopping', 'decoder_start_token_id', 'is_assistant', 'num_assistant_tokens',
  'num_assistant_tokens_schedule', 'assistant_confidence_threshold', 'compile_config', 'disable_compile',
  'trust_remote_code', 'generation_kwargs', 'max_matching_ngram_size', 'stop_strings_tokenizer', 'base_model_name_or_path',
  'output_past_key_values', 'return_legacy_cache', 'target_lookbehind', 'assistant_lookbehind']);

const OPTION_NAMES = ['max_new_tokens', 'max_length', 'min_new_tokens', 'min_length', 'do_sample', 'temperature', 'top_k',
  'top_p', 'min_p', 'repetition_penalty', 'eos_token_id', 'pad_token_id', 'bos_token_id', 'stop_strings', 'stop',
  'generator', 'seed', 'attention_mask', 'streamer', 'tokenizer', 'add_special_tokens', 'cache_implementation', 'num_beams',
  'num_return_sequences', 'use_cache'];

const OP = 'generate';
const SAMPLING_ONLY = new Set(['temperature', 'top_k', 'top_p', 'min_p']);

function isInt(v: unknown): v is number { return typeof v === 'number' && Number.isInteger(v); }
function describe(v: unknown): string {
  if (typeof v === 'string') return `'${v}'`;
  if (typeof v === 'bigint') return `${v}n`;
  if (v === null || typeof v !== 'object') return String(v);
  return Array.isArray(v) ? `[${v.map(describe).join(', ')}]` : (v as object).constructor?.name ?? 'object';
}
function bad(name: string, v: unknown, want: string, source: string): ValueError {
  return new ValueError(OP, `${name} must be ${want}, got ${describe(v)}${source}`);
}

function intAtLeast(name: string, v: unknown, min: number, source: string): number {
  if (!isInt(v) || v < min) throw bad(name, v, min === 0 ? 'an integer >= 0' : `an integer >= ${min}`, source);
  return v;
}

function tokenIds(name: string, v: unknown, source: string): number[] {
  const list = Array.isArray(v) ? v : [v];
  if (list.length === 0 || list.some((x) => !isInt(x) || x < 0)) throw bad(name, v, 'a token id (integer >= 0) or a list of them', source);
  return list as number[];
}

function stopList(name: string, v: unknown, source: string): string[] {
  const list = typeof v === 'string' ? [v] : v;
  if (!Array.isArray(list) || list.some((s) => typeof s !== 'string' || s.length === 0)) {
    throw bad(name, v, 'a non-empty string or a list of non-empty strings', source);
  }
  return list as string[];
}

/**
 * Checks each option's type and range. `source` says where a bad value came from (the call or
 * generation_config.json) so the message tells the user which one to fix.
 */
function checkValue(name: string, v: unknown, source: string): void {
  if (v === undefined) return;
  switch (name) {
    case 'max_new_tokens': case 'max_length': intAtLeast(name, v, 1, source); return;
    case 'min_new_tokens': case 'min_length': intAtLeast(name, v, 0, source); return;
    case 'do_sample': case 'add_special_tokens': case 'use_cache':
      if (typeof v !== 'boolean') throw bad(name, v, 'true or false', source); return;
    case 'temperature':
      if (typeof v !== 'number' || !Number.isFinite(v) || v <= 0) throw bad(name, v, 'a number > 0 (for greedy decoding use do_sample: false)', source); return;
    case 'top_k': intAtLeast(name, v, 0, source); return;
    case 'top_p':
      if (typeof v !== 'number' || !(v > 0 && v <= 1)) throw bad(name, v, 'a number in (0, 1]', source); return;
    case 'min_p':
      if (v !== null && (typeof v !== 'number' || !(v >= 0 && v <= 1))) throw bad(name, v, 'a number in [0, 1] or null', source); return;
    case 'repetition_penalty':
      if (typeof v !== 'number' || !Number.isFinite(v) || v <= 0) throw bad(name, v, 'a number > 0 (1 means no penalty)', source); return;
    case 'eos_token_id': if (v !== null) tokenIds(name, v, source); return;
    case 'pad_token_id': case 'bos_token_id': if (v !== null && (!isInt(v) || v < 0)) throw bad(name, v, 'a token id (integer >= 0) or null', source); return;
    case 'stop_strings': case 'stop': if (v !== null) stopList(name, v, source); return;
    case 'generator': if (!(v instanceof Generator)) throw bad(name, v, 'an nbx.Generator', source); return;
    case 'seed':
      if (!(isInt(v) && v >= 0) && !(typeof v === 'bigint' && v >= 0n)) throw bad(name, v, 'an integer >= 0', source); return;
    case 'attention_mask': if (v !== null && !(v instanceof Tensor)) throw bad(name, v, 'a Tensor [B, T] of 0/1', source); return;
    case 'streamer':
      if (v !== null && (typeof v !== 'object' || typeof (v as Streamer).put !== 'function' || typeof (v as Streamer).end !== 'function')) {
        throw bad(name, v, 'an object with put(tensor) and end() (transformers\' BaseStreamer)', source);
      }
      return;
    case 'cache_implementation':
      if (v !== null && v !== 'static' && v !== 'dynamic') throw bad(name, v, "'static', 'dynamic' or null", source); return;
    case 'tokenizer': if (v !== null && (typeof v !== 'object' || typeof (v as Tokenizer).decode !== 'function')) throw bad(name, v, 'a Tokenizer', source); return;
    default: break;
  }
}

function checkInert(name: string, v: unknown, source: string): void {
  if (!(name in INERT_AT) || v === undefined) return;
  const inert = INERT_AT[name];
  const same = v === inert || (inert === null && (v === null || (Array.isArray(v) && v.length === 0)));
  if (!same) {
    throw new UnsupportedError(OP, `${name}=${describe(v)}${source} is not implemented (only greedy search and sampling, one sequence per prompt); ` +
      `pass ${name}: ${describe(inert)} to generate without it`);
  }
}

/** Resolves the options for `model`. Throws ValueError / UnsupportedError naming the option. */
export function resolveConfig(model: CausalLM, opts: GenerationOptions): ResolvedConfig {
  if (opts === null || typeof opts !== 'object' || Array.isArray(opts)) throw new ValueError(OP, `options must be an object, got ${describe(opts)}`);
  const user = opts as Record<string, unknown>;
  for (const k of Object.keys(user)) {
    if (!OPTION_NAMES.includes(k)) {
      const why = k in INERT_AT ? 'is not implemented (only greedy search and sampling, one sequence per prompt)' : 'is not a generation option';
      const err = k in INERT_AT ? UnsupportedError : ValueError;
      throw new err(OP, `'${k}' ${why}; options: ${OPTION_NAMES.join(', ')}`);
    }
    checkValue(k, user[k], '');
    checkInert(k, user[k], '');
  }
  if (user.generator !== undefined && user.seed !== undefined) throw new ValueError(OP, 'give generator or seed, not both');
  if (user.stop_strings != null && user.stop != null) throw new ValueError(OP, 'give stop_strings or its alias stop, not both');

  const file = (model.generationConfig ?? {}) as Record<string, unknown>;
  const fromFile = ' (from generation_config.json; override it in the options)';
  // The file's sampling parameters matter only when sampling (transformers ignores them otherwise).
  const sampling = (user.do_sample ?? file.do_sample ?? DEFAULTS.do_sample) === true;
  for (const [k, v] of Object.entries(file)) {
    if (METADATA.has(k)) continue;
    if (k in INERT_AT) { if (user[k] === undefined) checkInert(k, v, fromFile); continue; }
    if (!sampling && SAMPLING_ONLY.has(k)) continue;
    if (OPTION_NAMES.includes(k) && user[k] === undefined && v !== null) checkValue(k, v, fromFile);
  }
  const pick = <T>(name: string, dflt: T): T => (user[name] !== undefined ? user[name] : file[name] !== undefined ? file[name] : dflt) as T;

  // max_new_tokens wins over max_length (transformers); an explicit max_length in the call beats the file's max_new_tokens.
  let maxNew: number | null = user.max_new_tokens !== undefined ? user.max_new_tokens as number : null;
  if (maxNew === null && user.max_length === undefined && file.max_new_tokens != null) maxNew = file.max_new_tokens as number;
  const maxLength = pick<number>('max_length', DEFAULTS.max_length);

  const cfg = model.config as Record<string, unknown>;
  const tokenizer = (user.tokenizer as Tokenizer | null | undefined) ?? model.tokenizer ?? null;
  // eos_token_id: null in the call turns EOS off (a fixed number of tokens, as benchmarks want).
  const eosRaw = user.eos_token_id === null ? null : pick<unknown>('eos_token_id', undefined) ?? cfg.eos_token_id ?? tokenizer?.eos_token_id ?? null;
  const eos = eosRaw === null ? [] : tokenIds('eos_token_id', eosRaw, '');
  let pad = pick<number | null | undefined>('pad_token_id', undefined) ?? (cfg.pad_token_id as number | null | undefined) ?? null;
  // transformers: "Setting pad_token_id to eos_token_id" when only an EOS is known.
  if (pad === null && eos.length > 0) pad = eos[0]!;
  const stopRaw = user.stop_strings ?? user.stop ?? file.stop_strings ?? null;
  const seed = user.seed as number | bigint | undefined;

  return {
    max_new_tokens: maxNew,
    max_length: maxLength,
    min_new_tokens: pick('min_new_tokens', DEFAULTS.min_new_tokens) ?? 0,
    min_length: pick('min_length', DEFAULTS.min_length) ?? 0,
    do_sample: pick('do_sample', DEFAULTS.do_sample),
    temperature: pick('temperature', DEFAULTS.temperature) ?? 1.0,
    top_k: pick('top_k', DEFAULTS.top_k) ?? 0,
    top_p: pick('top_p', DEFAULTS.top_p) ?? 1.0,
    min_p: pick<number | null>('min_p', DEFAULTS.min_p),
    repetition_penalty: pick('repetition_penalty', DEFAULTS.repetition_penalty) ?? 1.0,
    eos_token_id: eos,
    pad_token_id: pad,
    stop_strings: stopRaw === null ? [] : stopList('stop_strings', stopRaw, ''),
    generator: (user.generator as Generator | undefined) ?? (seed !== undefined ? new Generator().manual_seed(seed) : null),
    attention_mask: (user.attention_mask as Tensor | null | undefined) ?? null,
    streamer: (user.streamer as Streamer | null | undefined) ?? null,
    tokenizer,
    add_special_tokens: (user.add_special_tokens as boolean | undefined) ?? true,
    cache_implementation: (user.cache_implementation as 'static' | 'dynamic' | null | undefined) ?? null,
  };
}
