// The serving engine (issue #22): requests come in by submit(), each gets a stream of its tokens and
// their text, and the engine decides which sequences run at each step. This first body runs one
// sequence at a time with its own KVCacheBuffers (the interface is what the server builds on; the
// continuous-batching scheduler over the paged KV cache replaces the body, not the interface).
//
// Sampling is per request, with the request's own generator, through src/generation's logits
// processors on [1, V] scores, so a request's tokens do not depend on what else is running.
// Defaults follow OpenAI's API (the server's spec): temperature 1 (0 = greedy), top_p 1, top_k off.

import { Tensor } from '../tensor/tensor.js';
import { scope } from '../tensor/storage.js';
import { QueueFullError, ValueError } from '../errors.js';
import type { CausalLMModel } from '../models/causal_lm.js';
import type { KVCacheBuffers } from '../models/cache.js';
import type { Tokenizer } from '../tokenizer/index.js';
import { resolveConfig, type ResolvedConfig } from './config.js';
import { chooseTokens, processLogits } from './logits.js';
import { IncrementalDecoder } from './text.js';

const OP = 'Engine';

export interface EngineOptions {
  /** Sequences decoded together in one step (default 16). */
  maxBatch?: number;
  /** Requests waiting to start before submit() throws QueueFullError (default 256). */
  maxQueue?: number;
  /** KV-cache blocks for all sequences (default: enough for maxBatch full-context sequences). */
  kvBlocks?: number;
  /** Positions per KV-cache block (default 16). */
  blockSize?: number;
}

export interface EngineRequest {
  prompt: readonly number[];
  max_new_tokens: number;
  /** 0 = greedy; default 1 (OpenAI's default). */
  temperature?: number;
  top_p?: number;
  /** 0 or omitted = no top-k filtering. */
  top_k?: number;
  seed?: number;
  /** Generation ends when the text contains one of these; the text returned stops before it (OpenAI). */
  stop?: readonly string[];
  /** Default: the model's EOS ids (config / generation_config / tokenizer); [] = none. */
  eos_token_id?: readonly number[];
  signal?: AbortSignal;
}

export interface EngineStream extends AsyncIterable<{ token: number; text: string }> {
  result: Promise<EngineResult>;
  cancel(): void;
}

export interface EngineResult {
  tokens: number[];
  text: string;
  finish_reason: 'stop' | 'length' | 'cancelled';
  prompt_tokens: number;
  completion_tokens: number;
}

export interface EngineStats {
  running: number; waiting: number;
  kv_blocks_used: number; kv_blocks_total: number;
  tokens_in: number; tokens_out: number; steps: number;
}

type Event = { token: number; text: string };

/** One request from submit() to its result: its stream's buffer, its sampling state and its text. */
class Sequence {
  readonly tokens: number[] = [];
  text = '';
  /** Text decoded but not yet streamed: it could be the start of a stop string. */
  private pending = '';
  done = false;
  finish: EngineResult['finish_reason'] | null = null;
  cache: KVCacheBuffers | null = null;
  private readonly events: Event[] = [];
  private wake: (() => void) | null = null;
  private error: unknown = null;
  readonly result: Promise<EngineResult>;
  private settle!: { resolve: (r: EngineResult) => void; reject: (e: unknown) => void };
  private readonly decoder: IncrementalDecoder | null;
  private readonly longestStop: number;
  onEnd: (() => void) | null = null;

  constructor(readonly req: EngineRequest, readonly cfg: ResolvedConfig, tok: Tokenizer | null) {
    this.result = new Promise<EngineResult>((resolve, reject) => { this.settle = { resolve, reject }; });
    this.result.catch(() => {}); // a caller that only iterates still sees the error; nobody's rejection goes unhandled
    this.decoder = tok ? new IncrementalDecoder(tok, req.prompt) : null;
    this.longestStop = Math.max(0, ...(req.stop ?? []).map((s) => s.length));
  }

  get promptLength(): number { return this.req.prompt.length; }
  /** Tokens in the KV cache after the next forward: the prompt and every token but the last one sampled. */
  get length(): number { return this.req.prompt.length + this.tokens.length; }

  /** Adds a sampled token; returns true when the sequence is finished by it. */
  push(token: number): boolean {
    this.tokens.push(token);
    let piece = this.decoder ? this.decoder.push(token) : '';
    const eos = this.cfg.eos_token_id.includes(token);
    const full = this.tokens.length >= this.req.max_new_tokens;
    if (eos || full) piece += this.decoder?.flush() ?? '';
    const stops = this.req.stop ?? [];
    let out = this.pending + piece;
    let stopped = false;
    if (stops.length) {
      let cut = -1;
      for (const s of stops) { const i = out.indexOf(s); if (i >= 0 && (cut < 0 || i < cut)) cut = i; }
      if (cut >= 0) { out = out.slice(0, cut); stopped = true; this.pending = ''; }
      else if (!eos && !full) {
        // hold back the longest tail that could still grow into a stop string
        let hold = 0;
        for (let n = Math.min(this.longestStop - 1, out.length); n > 0 && hold === 0; n--) {
          const tail = out.slice(out.length - n);
          if (stops.some((s) => s.startsWith(tail))) hold = n;
        }
        this.pending = out.slice(out.length - hold);
        out = out.slice(0, out.length - hold);
      } else this.pending = '';
    }
    this.text += out;
    this.emit({ token, text: out });
    if (stopped || eos) { this.end('stop'); return true; }
    if (full) { this.end('length'); return true; }
    return false;
  }

  private emit(e: Event): void {
    this.events.push(e);
    this.wake?.();
  }

  end(reason: EngineResult['finish_reason']): void {
    if (this.done) return;
    this.done = true;
    this.finish = reason;
    this.settle.resolve({
      tokens: [...this.tokens], text: this.text, finish_reason: reason,
      prompt_tokens: this.req.prompt.length, completion_tokens: this.tokens.length,
    });
    this.wake?.();
    this.onEnd?.();
  }

  fail(e: unknown): void {
    if (this.done) return;
    this.done = true;
    this.error = e;
    this.settle.reject(e);
    this.wake?.();
    this.onEnd?.();
  }

  async *iterate(): AsyncGenerator<Event> {
    for (;;) {
      const e = this.events.shift();
      if (e) { yield e; continue; }
      if (this.done) {
        if (this.error !== null) throw this.error;
        return;
      }
      await new Promise<void>((resolve) => { this.wake = resolve; });
      this.wake = null;
    }
  }
}

/** Yields to the event loop between steps (timers, sockets, aborts). */
const breathe: () => Promise<void> = () => new Promise((resolve) => setImmediate(resolve));

function isInt(v: unknown): v is number { return typeof v === 'number' && Number.isInteger(v); }

export class Engine {
  readonly maxBatch: number;
  readonly maxQueue: number;
  readonly blockSize: number;
  readonly kvBlocks: number;
  private readonly waiting: Sequence[] = [];
  private readonly running: Sequence[] = [];
  private loop: Promise<void> | null = null;
  private closed = false;
  private counters = { tokens_in: 0, tokens_out: 0, steps: 0 };

  constructor(readonly model: CausalLMModel, opts: EngineOptions = {}) {
    const positive = (name: string, v: unknown, dflt: number): number => {
      if (v === undefined) return dflt;
      if (!isInt(v) || v < 1) throw new ValueError(OP, `${name} must be a positive integer, got ${String(v)}`);
      return v;
    };
    this.maxBatch = positive('maxBatch', opts.maxBatch, 16);
    const mq = opts.maxQueue;
    if (mq !== undefined && (!isInt(mq) || mq < 0)) throw new ValueError(OP, `maxQueue must be an integer >= 0, got ${String(mq)}`);
    this.maxQueue = mq ?? 256;
    this.blockSize = positive('blockSize', opts.blockSize, 16);
    const context = this.context ?? 2048;
    this.kvBlocks = positive('kvBlocks', opts.kvBlocks, this.maxBatch * Math.ceil(context / this.blockSize));
  }

  private get context(): number | null {
    const c = this.model.config.max_position_embeddings;
    return typeof c === 'number' ? c : null;
  }

  /** Checks the request (typed errors naming the field) and resolves its sampling options. */
  private resolve(req: EngineRequest): ResolvedConfig {
    if (req === null || typeof req !== 'object') throw new ValueError(OP, `a request must be an object, got ${String(req)}`);
    const vocab = this.model.config.vocab_size;
    if (!Array.isArray(req.prompt) || req.prompt.length === 0) throw new ValueError(OP, 'prompt must be a non-empty array of token ids');
    for (const id of req.prompt) {
      if (!isInt(id) || id < 0 || id >= vocab) throw new ValueError(OP, `prompt token id ${String(id)} is outside the model's vocabulary (0..${vocab - 1})`);
    }
    if (!isInt(req.max_new_tokens) || req.max_new_tokens < 1) throw new ValueError(OP, `max_new_tokens must be an integer >= 1, got ${String(req.max_new_tokens)}`);
    const ctx = this.context;
    if (ctx !== null && req.prompt.length + req.max_new_tokens > ctx) {
      throw new ValueError(OP, `the prompt (${req.prompt.length} tokens) plus max_new_tokens ${req.max_new_tokens} exceeds the model's context of ${ctx} tokens`);
    }
    const temperature = req.temperature ?? 1;
    if (typeof temperature !== 'number' || !Number.isFinite(temperature) || temperature < 0) throw new ValueError(OP, `temperature must be a number >= 0 (0 = greedy), got ${String(temperature)}`);
    if (req.stop !== undefined && (!Array.isArray(req.stop) || req.stop.some((s) => typeof s !== 'string' || s.length === 0))) {
      throw new ValueError(OP, 'stop must be an array of non-empty strings');
    }
    if (req.stop?.length && !this.model.tokenizer) throw new ValueError(OP, 'stop strings need the model\'s tokenizer; this model has none');
    if (req.eos_token_id !== undefined && (!Array.isArray(req.eos_token_id) || req.eos_token_id.some((t) => !isInt(t) || t < 0))) {
      throw new ValueError(OP, 'eos_token_id must be an array of token ids (integers >= 0)');
    }
    const sample = temperature > 0;
    const seed = req.seed ?? Math.floor(Math.random() * 2 ** 32);
    return resolveConfig(this.model, {
      max_new_tokens: req.max_new_tokens,
      do_sample: sample,
      ...(sample ? { temperature, top_p: req.top_p ?? 1.0, top_k: req.top_k ?? 0, min_p: null } : {}),
      repetition_penalty: 1.0, min_new_tokens: 0, min_length: 0,
      eos_token_id: req.eos_token_id === undefined ? undefined : req.eos_token_id.length ? req.eos_token_id : null,
      seed,
    });
  }

  /** Queues a request; it joins the running batch at a coming step. Throws QueueFullError when the queue is full. */
  submit(req: EngineRequest): EngineStream {
    if (this.closed) throw new ValueError(OP, 'the engine is closed');
    const cfg = this.resolve(req);
    if (this.waiting.length >= this.maxQueue) {
      throw new QueueFullError(OP, `the queue is full (${this.waiting.length} requests waiting, maxQueue ${this.maxQueue}); retry later`);
    }
    const seq = new Sequence(req, cfg, this.model.tokenizer);
    const cancel = (): void => this.cancel(seq);
    const signal = req.signal;
    if (signal) {
      if (signal.aborted) { seq.end('cancelled'); return this.streamOf(seq, cancel); }
      signal.addEventListener('abort', cancel, { once: true });
      seq.onEnd = () => signal.removeEventListener('abort', cancel);
    }
    this.waiting.push(seq);
    this.kick();
    return this.streamOf(seq, cancel);
  }

  private streamOf(seq: Sequence, cancel: () => void): EngineStream {
    return { result: seq.result, cancel, [Symbol.asyncIterator]: () => seq.iterate() };
  }

  /** Ends a request now and frees its KV cache. */
  private cancel(seq: Sequence): void {
    if (seq.done) return;
    const w = this.waiting.indexOf(seq);
    if (w >= 0) this.waiting.splice(w, 1);
    this.release(seq);
    seq.end('cancelled');
  }

  private release(seq: Sequence): void {
    const r = this.running.indexOf(seq);
    if (r >= 0) this.running.splice(r, 1);
    seq.cache?.dispose();
    seq.cache = null;
  }

  stats(): EngineStats {
    const used = this.running.reduce((a, s) => a + Math.ceil(s.length / this.blockSize), 0);
    return { running: this.running.length, waiting: this.waiting.length, kv_blocks_used: used, kv_blocks_total: this.kvBlocks, ...this.counters };
  }

  /** Stops taking requests, cancels the waiting and running ones and waits for the step in progress. */
  async close(): Promise<void> {
    this.closed = true;
    for (const s of [...this.waiting, ...this.running]) this.cancel(s);
    await this.loop;
  }

  private kick(): void {
    if (this.loop) return;
    this.loop = this.run().finally(() => { this.loop = null; if (this.waiting.length && !this.closed) this.kick(); });
  }

  private async run(): Promise<void> {
    await breathe();
    while (this.waiting.length) {
      const seq = this.waiting.shift()!;
      this.running.push(seq);
      try {
        await this.generate(seq);
      } catch (e) {
        seq.fail(e);
      } finally {
        this.release(seq);
      }
    }
  }

  /** One sequence to its end: the prompt, then a token per step. */
  private async generate(seq: Sequence): Promise<void> {
    const model = this.model, device = model.device;
    seq.cache = model.newCache({ batch: 1, maxLength: seq.promptLength + seq.req.max_new_tokens });
    let feed: readonly number[] = seq.req.prompt;
    this.counters.tokens_in += feed.length;
    while (!seq.done) {
      const cache = seq.cache;
      if (!cache) return;
      const ids = Tensor.fromStorage(BigInt64Array.from(feed, (v) => BigInt(v)), 'int64', [1, feed.length], device);
      let scores: Tensor;
      try {
        const logits = model.forward(ids, { cache, logits_to_keep: 1 });
        const last = scope(() => logits.reshape([1, logits.shape[2]!]).to('float32').contiguous());
        logits.dispose();
        scores = last.device.type === 'cpu' ? last : Tensor.fromStorage(await last.dataStorage(), 'float32', last.shape as number[]);
        if (scores !== last) last.dispose();
      } finally { ids.dispose(); }
      this.counters.steps++;
      if (seq.done) { scores.dispose(); return; }
      const token = this.sample(seq, scores);
      scores.dispose();
      this.counters.tokens_out++;
      feed = [token];
      if (seq.push(token)) return;
      await breathe();
    }
  }

  /** The request's next token from its scores [1, V] float32 on the CPU, with its own generator. */
  private sample(seq: Sequence, scores: Tensor): number {
    const cur = seq.length;
    return scope(() => {
      const processed = processLogits(scores, seq.cfg, {
        curLen: cur, promptLen: seq.promptLength,
        inputIds: () => Tensor.fromStorage(BigInt64Array.from([...seq.req.prompt, ...seq.tokens], (v) => BigInt(v)), 'int64', [1, cur], 'cpu'),
      });
      return Number((chooseTokens(processed, seq.cfg).dataStorageSync() as BigInt64Array)[0]);
    });
  }
}
