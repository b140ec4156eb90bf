// The serving engine (issue #22): continuous batching over the paged KV cache (src/models/paged_cache.ts).
// Requests come in by submit(); each gets a stream of its tokens and their text. A step of the loop:
//   1. admission: the oldest waiting request joins when the batch has room (maxBatch) and the cache has
//      free blocks for its prompt and all its new tokens (reserved up front, so a running request never
//      runs out of blocks: one that does not fit waits, and running ones are unaffected);
//   2. prefill: the first sequence still reading its prompt runs its next chunk (at most prefillChunk
//      tokens, one sequence per step), so prompts interleave with the decoding of the others;
//   3. decode: one forward of every sequence past its prompt, one token each at its own position, the
//      attention reading each sequence's own blocks (nbx.llm.paged_attention);
//   4. sequences that finished (EOS, stop string, max_new_tokens) or were cancelled leave, their blocks
//      free at once.
// Sampling is per request, with its own generator (seeded by the request), through src/generation's
// logits processors on its own [1, V] row. On the CPU the engine's forwards run with row-invariant
// matrix products (src/backend/cpu/kernels/gemm.ts setRowInvariant) and the paged attention kernel
// computes each sequence on its own, so a request's tokens are those it gets when run alone with the
// same seed, whatever else is in the batch (test/engine.test.ts, scripts/soak-engine.mjs).
// Defaults follow OpenAI's API (the server's spec): temperature 1 (0 = greedy), top_p 1, top_k off.
//
// Mixed steps (default on CUDA; `mixedSteps`): steps 2 and 3 become one forward. Every decoding sequence's
// last token is a row, and prompt tokens fill the rows left (at most prefillChunk, up to stepTokens rows),
// each row one token at its own position attending over its own sequence's blocks up to that position
// (paged attention per row: a prompt chunk's rows are causal because each row's length is its position
// + 1, and reshape_and_cache writes every row before any layer attends). The rows that decode or end a
// prompt are sampled on the device. An eager step launches hundreds of kernels, and for a 64-row bf16
// step on an H200 their host cost was ~15-19 ms against ~1-2 ms of GPU time; so the step reads all it
// varies (token ids, positions, slots, block tables, lengths, which rows are sampled, their settings
// and draws) from device buffers of fixed address, written by three host-to-device copies, and is
// recorded once per (rows bucket, block-table width bucket, greedy or sampled) as a CUDA graph (a CPU
// step recording on the CPU, opt-in) and replayed; the host reads back only the sampled ids.
// Steps are padded to one row count on GPUs (padBatch), so prompt chunks and decode tokens of every
// request go through matrix products of one shape, whatever else runs: the guarantee above holds there
// (test/engine_graphs.test.ts: replayed = eager = alone).

import { Tensor } from '../tensor/tensor.js';
import { scope } from '../tensor/storage.js';
import * as nbx from '../index.js';
import { GraphCaptureError, KVCacheFullError, OutOfMemoryError, QueueFullError, ValueError } from '../errors.js';
import type { CausalLMModel } from '../models/causal_lm.js';
import { PagedKVCache, PagedLayerCache, PagedStepCache, pagedLogits } from '../models/paged_cache.js';
import { replayEnabled } from '../models/static_decode.js';
import { setRowInvariant } from '../backend/cpu/kernels/gemm.js';
import { backendFor } from '../backend/backend.js';
import { CUDAGraph, captureGraph, graphPoolHandle, type GraphHost } from '../backend/cuda/runtime/graph.js';
import { recordCpu, type CpuRecording } from '../backend/cpu/runtime/recording.js';
import type { Tokenizer } from '../tokenizer/index.js';
import { resolveConfig, type ResolvedConfig } from './config.js';
import { chooseTokens, processLogits } from './logits.js';
import { IncrementalDecoder } from './text.js';
import { RowSamplingState, sampleRows, type RowSamplingTensors, type SamplingMode } from './sampler.js';
import { uniform } from '../random/sample.js';

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
  /** Prompt tokens one step prefills at most (default 256): longer prompts take several steps. */
  prefillChunk?: number;
  /**
   * Where tokens are chosen: 'host' runs transformers' processors on each row's scores on the CPU (the
   * tokens model.generate() gives; default on the CPU), 'device' runs src/generation/sampler.ts where the
   * logits are and reads back only the ids (default elsewhere).
   */
  sampling?: 'host' | 'device';
  /**
   * Decode steps run maxBatch rows (mixed steps: stepTokens rows; see rowBuckets) whatever the number of
   * sequences (the rest padding that attends to nothing): every step then has one shape, so a GPU's matrix products take the same kernel for a
   * sequence alone and in a full batch and its numbers do not change (GPUs pick GEMM kernels by shape;
   * the padding costs little while a step is bound by reading the weights). Default: on off the CPU,
   * whose steps are row-invariant without it.
   */
  padBatch?: boolean;
  /**
   * One forward per step over every running sequence (vLLM's chunked prefill): each decoding sequence's
   * next token is a row, and prompt tokens (at most prefillChunk a step) fill the rows left up to
   * stepTokens, each attending over its own sequence's paged blocks up to its own position; the rows
   * that end a prompt or decode are sampled on the device. The step's inputs live in fixed device
   * buffers written once per step, so the step can be replayed as a graph (`graphs`). Needs device
   * sampling; default: on CUDA (whose paged attention kernel reads the blocks in place; elsewhere the
   * composite gathers every row's blocks). Otherwise a step runs one prompt chunk through the model's
   * own attention, then the decode rows.
   */
  mixedSteps?: boolean;
  /** Rows of a mixed step at most, decode and prompt tokens together (default maxBatch + min(prefillChunk, max(maxBatch, 16))). */
  stepTokens?: number;
  /**
   * Row counts a mixed step is padded to (ascending; the last is stepTokens). Default: padBatch → one
   * count, stepTokens (every step one shape: a request's tokens are those it gets alone on GPUs too; with
   * maxBatch 1, [1, stepTokens], which keeps that since one sequence runs at a time); otherwise powers of
   * two. With several counts on a GPU, matrix products may pick another kernel per count, so a row's
   * numbers (and a sampled token near a tie) can depend on how many rows its step had.
   */
  rowBuckets?: readonly number[];
  /**
   * Replays each mixed step shape (rows bucket, block-table width bucket, greedy/sampled) as a graph
   * recorded at its second use: a CUDA graph on CUDA (default there; NBX_CUDA_GRAPHS=0 turns it off),
   * a CPU step recording on the CPU (opt-in). A step that cannot be recorded (GraphCaptureError) makes
   * the engine run its steps eagerly from then on (graphStats().fallbackReason says why).
   */
  graphs?: boolean;
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

/** What Engine.warmup() did. */
export interface EngineWarmup {
  /** Blocks the KV cache's pools back now, and their bytes (mapped, or the tensors' on plain backing). */
  kvBlocks: number; kvMappedBytes: number;
  /** Mixed-step shapes run (rows bucket x width bucket x sampling mode), and steps recorded after it. */
  shapes: number; recorded: number;
  ms: number;
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
  /** Key in the paged cache. */
  id = 0;
  /** Blocks reserved for the whole sequence (prompt + max_new_tokens - 1 positions). */
  reserved = 0;
  /** Prompt tokens in the cache so far. */
  prefilled = 0;
  /** In the running batch, holding blocks. */
  admitted = false;
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
  /** Prompt and generated tokens so far. */
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

/** One uniform draw in [0, 1) from the request's own generator (device sampling). */
function uniformOf(seq: Sequence): number {
  // torch.rand(1, dtype=float64, generator=g)'s draw, without a tensor (34 µs a draw through nbx.rand)
  return Math.min((uniform(seq.cfg.generator!, 1, 'float64') as Float64Array)[0]!, 1 - 2 ** -53);
}

const NO_MASK = { mask: null, isCausal: false };
/** A mixed step attends through paged_attention (each row its own length and window): no masks to build. */
const NO_MASKS = { full_attention: NO_MASK, sliding_attention: NO_MASK };

/** Yields to the event loop between steps (timers, sockets, aborts). */
const breathe: () => Promise<void> = () => new Promise((resolve) => setImmediate(resolve));

function isInt(v: unknown): v is number { return typeof v === 'number' && Number.isInteger(v); }

/** A sequence's rows in a mixed step: `n` tokens (1 when decoding), sampled when they end its prompt or decode. */
interface StepWork { seq: Sequence; n: number; sample: boolean }

export class Engine {
  readonly maxBatch: number;
  readonly maxQueue: number;
  readonly blockSize: number;
  readonly kvBlocks: number;
  readonly prefillChunk: number;
  readonly sampling: 'host' | 'device';
  readonly padBatch: boolean;
  readonly mixedSteps: boolean;
  readonly stepTokens: number;
  readonly rowBuckets: readonly number[];
  readonly graphs: boolean;
  private readonly waiting: Sequence[] = [];
  private readonly running: Sequence[] = [];
  private readonly cache: PagedKVCache;
  /** Blocks promised to running sequences (allocated or not yet). */
  private reservedBlocks = 0;
  private nextId = 1;
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
    this.prefillChunk = positive('prefillChunk', opts.prefillChunk, 256);
    if (opts.sampling !== undefined && opts.sampling !== 'host' && opts.sampling !== 'device') throw new ValueError(OP, `sampling must be 'host' or 'device', got ${String(opts.sampling)}`);
    this.sampling = opts.sampling ?? (model.device.type === 'cpu' ? 'host' : 'device');
    this.padBatch = opts.padBatch ?? model.device.type !== 'cpu';
    const context = this.context ?? 2048;
    this.kvBlocks = positive('kvBlocks', opts.kvBlocks, this.maxBatch * Math.ceil(context / this.blockSize));
    this.mixedSteps = opts.mixedSteps ?? (this.sampling === 'device' && model.device.type === 'cuda');
    if (this.mixedSteps && this.sampling !== 'device') throw new ValueError(OP, 'mixedSteps samples on the device: it needs sampling \'device\'');
    this.stepTokens = positive('stepTokens', opts.stepTokens, this.maxBatch + Math.min(this.prefillChunk, Math.max(this.maxBatch, 16)));
    if (this.stepTokens < this.maxBatch) throw new ValueError(OP, `stepTokens (${this.stepTokens}) must be at least maxBatch (${this.maxBatch}): every running sequence decodes in each step`);
    this.rowBuckets = this.bucketsOf(opts.rowBuckets);
    const dev = model.device.type;
    if (opts.graphs && !this.mixedSteps) throw new ValueError(OP, 'graphs replay mixed steps: they need mixedSteps (and device sampling)');
    if (opts.graphs && dev !== 'cuda' && dev !== 'cpu') throw new ValueError(OP, `graphs are CUDA graphs or CPU step recordings; the ${dev} backend has neither`);
    this.graphs = opts.graphs ?? (this.mixedSteps && dev === 'cuda' && replayEnabled(model.device));
    // a RoPE whose frequencies depend on the positions seen keeps host state a replay would not see
    if (this.graphs && model.model.positionDependentRope) this.graphFallback = 'the model\'s RoPE frequencies depend on the positions seen (dynamic / longrope)';
    const c = model.cfg;
    // one block more when padding: the padding rows' scratch slot
    this.cache = new PagedKVCache({ layers: c.num_hidden_layers, kvHeads: c.num_key_value_heads, headDim: c.head_dim, dtype: model.dt, device: model.device },
      { numBlocks: this.kvBlocks + (this.padBatch ? 1 : 0), blockSize: this.blockSize });
  }

  private bucketsOf(given: readonly number[] | undefined): number[] {
    const top = this.stepTokens;
    if (given !== undefined) {
      if (!Array.isArray(given) || given.length === 0 || given.some((b, i) => !isInt(b) || b < 1 || (i > 0 && b <= given[i - 1]!)) || given[given.length - 1] !== top) {
        throw new ValueError(OP, `rowBuckets must be ascending positive integers ending at stepTokens (${top}), got ${JSON.stringify(given)}`);
      }
      return [...given];
    }
    if (this.padBatch) return this.maxBatch === 1 && top > 1 ? [1, top] : [top];
    const out: number[] = [];
    for (let b = 1; b < top; b *= 2) out.push(b);
    out.push(top);
    return out;
  }

  private get context(): number | null {
    const c = this.model.config.max_position_embeddings;
    return typeof c === 'number' ? c : null;
  }

  /** Blocks a request holds at most: its prompt and every new token but the last (which is never fed back). */
  private blocksOf(req: EngineRequest): number {
    return Math.ceil((req.prompt.length + req.max_new_tokens - 1) / this.blockSize);
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
    const need = this.blocksOf(req);
    if (need > this.kvBlocks) {
      throw new KVCacheFullError(OP, `the request needs ${need} KV-cache blocks of ${this.blockSize} positions (${req.prompt.length} prompt tokens + ${req.max_new_tokens} new), more than the ${this.kvBlocks} the engine has (kvBlocks); shorten it or give the engine more blocks`, need, this.kvBlocks - this.reservedBlocks, this.kvBlocks);
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
    seq.id = this.nextId++;
    seq.reserved = this.blocksOf(req);
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

  /** Ends a request now; a running one's blocks are free at once. */
  private cancel(seq: Sequence): void {
    if (seq.done) return;
    const w = this.waiting.indexOf(seq);
    if (w >= 0) this.waiting.splice(w, 1);
    this.release(seq);
    seq.end('cancelled');
  }

  /** Takes a sequence out of the batch and frees its blocks. */
  private release(seq: Sequence): void {
    const r = this.running.indexOf(seq);
    if (r >= 0) this.running.splice(r, 1);
    if (seq.admitted) {
      seq.admitted = false;
      this.cache.free(seq.id);
      this.reservedBlocks -= seq.reserved;
    }
  }

  stats(): EngineStats {
    return {
      running: this.running.length, waiting: this.waiting.length,
      kv_blocks_used: this.cache.usedBlocks, kv_blocks_total: this.kvBlocks, ...this.counters,
    };
  }

  /** The paged cache's memory (backing, blocks backed, bytes reserved and mapped): for soak tests and metrics. */
  kvMemory(): ReturnType<PagedKVCache['memory']> { return this.cache.memory(); }

  /** Stops taking requests, cancels the waiting and running ones, waits for the step in progress and frees the cache. */
  async close(): Promise<void> {
    this.closed = true;
    for (const s of [...this.waiting, ...this.running]) this.cancel(s);
    await this.loop;
    this.dropGraphs();
    if (this.inputs) {
      for (const t of [...Object.values(this.inputs.sampling), this.inputs.i64, this.inputs.i32, this.inputs.f32]) (t as Tensor).dispose();
      this.inputs = null;
    }
    this.cache.dispose();
    for (const st of this.samplingStates.values()) st.dispose();
    this.samplingStates.clear();
  }

  /** How the mixed steps ran: graphs captured, replays, eager steps, and why graphs are off if they fell back. */
  graphStats(): { enabled: boolean; captured: number; captures: number; replays: number; eagerSteps: number; fallbackReason: string | null } {
    return { enabled: this.graphs, captured: this.stepGraphs.size, ...this.graphCounters, fallbackReason: this.graphFallback };
  }

  /**
   * Brings an idle engine to the state it serves in, before its first request (nbx.serve calls it before
   * listening, off the CPU). The paged KV cache's pools are backed for `kvBlocks` blocks (default: all
   * of them): otherwise they grow as a load first needs blocks, and each growth drops the recorded steps
   * (the pools' block count is a launch argument), which are recorded again under load. Then every
   * mixed-step shape the engine can run (each rows bucket x block-table width bucket x greedy/sorted
   * sampling), every row padding, runs once eagerly (kernels compiled and tuned) and is recorded where
   * the engine records its steps. The H200 load test (BENCHMARKS.md, call 4) read the allocator's
   * reserved memory 16 MiB above its warm level after 1,000 requests, with the pools grown from 88 to
   * 352 MiB during the load: after warmup(), a load meets no new shape and no growth, so the memory the
   * engine holds is that of the warm-up (scripts/load-serve.mjs checks it). Requests submitted meanwhile
   * wait for it.
   */
  async warmup(opts: { kvBlocks?: number } = {}): Promise<EngineWarmup> {
    if (this.closed) throw new ValueError(OP, 'the engine is closed');
    if (this.loop || this.running.length || this.waiting.length) throw new ValueError(OP, 'warmup() runs on an idle engine: call it before submitting requests');
    const kv = opts.kvBlocks ?? this.kvBlocks;
    if (!isInt(kv) || kv < 0 || kv > this.kvBlocks) throw new ValueError(OP, `warmup's kvBlocks must be an integer in 0..${this.kvBlocks} (the engine's kvBlocks), got ${String(opts.kvBlocks)}`);
    const t0 = performance.now();
    const work = async (): Promise<EngineWarmup> => {
      const cache = this.cache;
      if (this.mixedSteps || this.padBatch) cache.scratchSlot();
      const want = Math.min(kv, cache.freeBlocks);
      if (want > 0) {
        const id = 0; // sequence ids start at 1: this one only backs the blocks
        cache.addSequence(id);
        try { cache.reserve(id, want * this.blockSize); } catch (e) {
          // at start rather than under load: say what to change
          if (e instanceof OutOfMemoryError) {
            throw new OutOfMemoryError(OP, `the warm-up could not back the KV cache's ${want} blocks (${e.message}); give the engine fewer (kvBlocks, or maxBatch, whose full contexts are the default), or warm up fewer`);
          }
          throw e;
        } finally { cache.free(id); }
      }
      let shapes = 0;
      if (this.mixedSteps) {
        for (const R of this.rowBuckets) {
          for (const mode of ['greedy', 'sorted'] as const) {
            for (const W of this.widths) {
              const recorded = (): boolean => this.stepGraphs.has(`${R}:${W}:${mode}`);
              await this.stepRows([], 0, { R, W, mode });
              // the first step of a (rows, mode) runs eagerly; the next records it
              if (this.graphs && this.graphFallback === null && !recorded()) await this.stepRows([], 0, { R, W, mode });
              shapes++;
            }
          }
        }
      }
      return { kvBlocks: cache.memory().capacityBlocks, kvMappedBytes: cache.memory().mappedBytes, shapes, recorded: this.stepGraphs.size, ms: performance.now() - t0 };
    };
    const done = work();
    this.loop = done.then(() => undefined, () => undefined).finally(() => {
      this.loop = null;
      if ((this.waiting.length || this.running.length) && !this.closed) this.kick();
    });
    return done;
  }

  private kick(): void {
    if (this.loop || this.closed) return;
    this.loop = this.run().catch((e: unknown) => {
      // a failure outside a forward (nothing expected): the requests in flight get it, the engine goes on
      for (const s of [...this.running]) { this.release(s); s.fail(e); }
    }).finally(() => { this.loop = null; if ((this.waiting.length || this.running.length) && !this.closed) this.kick(); });
  }

  private async run(): Promise<void> {
    await breathe();
    while ((this.waiting.length || this.running.length) && !this.closed) {
      this.admit();
      if (this.mixedSteps) {
        const did = await this.mixedStep();
        if (did) this.counters.steps++;
        // on an asynchronous device a mixed step yielded while the device ran it (see mixedStep)
        if (!did || !this.overlap) await breathe();
        continue;
      }
      const didPrefill = await this.prefillStep();
      const didDecode = await this.decodeStep();
      if (didPrefill || didDecode) this.counters.steps++;
      await breathe();
    }
  }

  /** Moves waiting requests into the batch, oldest first, while the batch and the cache have room. */
  private admit(): void {
    while (this.waiting.length && this.running.length < this.maxBatch) {
      const seq = this.waiting[0]!;
      if (seq.reserved > this.kvBlocks - this.reservedBlocks) break; // waits for blocks; running requests keep theirs
      this.waiting.shift();
      this.cache.addSequence(seq.id);
      this.reservedBlocks += seq.reserved;
      seq.admitted = true;
      this.running.push(seq);
    }
  }

  /**
   * Runs a decode step's forward with row-invariant matrix products on the CPU (each row's numbers do
   * not depend on the batch; measured on the embedded model, 1 / 8 rows: 21 / 28 ms for the step's
   * products, against BLAS's 9 / 11 ms, whose rows change with the batch size). Prompts run as usual:
   * a prompt's forward is the same whatever else runs.
   */
  private forward<T>(fn: () => T): T {
    const was = setRowInvariant(true);
    try { return fn(); } finally { setRowInvariant(was); }
  }

  /** Logits [B, V] as float32 on the CPU. */
  private async hostScores(logits: Tensor): Promise<Tensor> {
    const f = scope(() => logits.to('float32').contiguous());
    if (f !== logits) logits.dispose();
    if (f.device.type === 'cpu') return f;
    try { return Tensor.fromStorage(await f.dataStorage(), 'float32', f.shape as number[]); } finally { f.dispose(); }
  }

  /** The next chunk of the first sequence still reading its prompt; its first token when the prompt is done. */
  private async prefillStep(): Promise<boolean> {
    const seq = this.running.find((s) => !s.done && s.prefilled < s.promptLength);
    if (!seq) return false;
    const start = seq.prefilled, n = Math.min(this.prefillChunk, seq.promptLength - start);
    const prompt = seq.req.prompt.slice(start, start + n);
    let tokens: number[];
    try {
      this.cache.reserve(seq.id, start + n);
      const lc = PagedLayerCache.prefill(this.cache, seq.id, n);
      let logits: Tensor;
      try {
        logits = pagedLogits(this.model, [prompt], [prompt.map((_, i) => start + i)], lc);
      } finally { lc.dispose(); }
      seq.prefilled += n;
      this.counters.tokens_in += n;
      if (seq.prefilled < seq.promptLength) { logits.dispose(); return true; }
      tokens = await this.choose([seq], logits);
    } catch (e) {
      this.release(seq); seq.fail(e);
      return true;
    }
    if (!seq.done) this.emit(seq, tokens[0]!);
    return true;
  }

  /** One token for every sequence past its prompt, in one forward. */
  private async decodeStep(): Promise<boolean> {
    const batch = this.running.filter((s) => !s.done && s.prefilled === s.promptLength && s.tokens.length > 0);
    if (!batch.length) return false;
    let tokens: number[];
    try {
      for (const s of batch) this.cache.reserve(s.id, s.length);
      const rows = this.padBatch ? Math.max(this.maxBatch, batch.length) : batch.length;
      const lc = PagedLayerCache.decode(this.cache, batch.map((s) => s.id), rows);
      const pad = new Array<number[]>(rows - batch.length).fill([0]);
      let logits: Tensor;
      try {
        logits = this.forward(() => pagedLogits(this.model, [...batch.map((s) => [s.tokens[s.tokens.length - 1]!]), ...pad], [...batch.map((s) => [s.length - 1]), ...pad], lc));
      } finally { lc.dispose(); }
      tokens = await this.choose(batch, logits);
    } catch (e) {
      for (const s of batch) { this.release(s); s.fail(e); }
      return true;
    }
    // a sequence cancelled while the tokens were read back is already gone
    batch.forEach((s, b) => { if (!s.done) this.emit(s, tokens[b]!); });
    return true;
  }

  // ---- mixed steps: every running sequence's rows in one forward over fixed input buffers ----------

  /**
   * The step's inputs on the device, written by one host-to-device copy each per step (what a replayed
   * graph reads): int64 [3·Rmax + 2S] = token ids | positions | slots (Rmax each) | the S = maxBatch rows
   * sampled | their top_k; int32 [Rmax + Rmax·Wmax] = sequence lengths (Rmax) | block tables ([R, W]
   * from Rmax on); float32 [4S] = the sampled rows' temperature | top_p | min_p | uniform draw (as
   * RowSamplingState packs them, without its per-step copies and top_k conversion).
   */
  private inputs: { i64: Tensor; i32: Tensor; f32: Tensor; h64: Int32Array; h32: Int32Array; hf: Float32Array; sampling: RowSamplingTensors } | null = null;
  private stepGraphs = new Map<string, { graph: CUDAGraph | null; recording: CpuRecording | null; out: Tensor }>();
  /** (rows, mode) shapes run once eagerly (kernels compiled and tuned) before a capture. */
  private readonly warmed = new Set<string>();
  private graphPool: number | null = null;
  private graphGeneration = -1;
  private ropeSeen: unknown[] = [];
  private graphFallback: string | null = null;
  private graphCounters = { captures: 0, replays: 0, eagerSteps: 0 };
  private lastGraph: CUDAGraph | null = null;

  /** Block-table width a step may need at most (a request's blocks), and the widths steps are padded to. */
  private get maxWidth(): number {
    const ctx = this.context;
    return Math.max(1, Math.min(this.kvBlocks, ctx !== null ? Math.ceil(ctx / this.blockSize) : this.kvBlocks));
  }
  /** widthFor's values: every block-table width a step can be padded to. */
  private get widths(): number[] {
    const out: number[] = [];
    for (let b = 4; ; b *= 2) { out.push(Math.min(b, this.maxWidth)); if (b >= this.maxWidth) return out; }
  }
  private widthFor(w: number): number {
    let b = 4;
    while (b < w) b *= 2;
    return Math.min(b, this.maxWidth);
  }
  /** Positions the RoPE table covers in a mixed step (fixed, so a replay never needs a larger one). */
  private get ropeBound(): number { return this.context ?? this.maxWidth * this.blockSize; }

  private ensureInputs(): NonNullable<Engine['inputs']> {
    if (this.inputs) return this.inputs;
    const Rmax = this.stepTokens, S = this.maxBatch, dev = this.model.device;
    const n64 = 3 * Rmax + 2 * S, n32 = Rmax + Rmax * this.maxWidth;
    const i64 = nbx.keep(nbx.zeros([n64], { dtype: 'int64', device: dev }));
    const f32 = nbx.keep(nbx.zeros([4 * S], { dtype: 'float32', device: dev }));
    const view = (t: Tensor, i: number): Tensor => nbx.keep(t.narrow(0, i * S, S));
    this.inputs = {
      i64, f32, i32: nbx.keep(nbx.zeros([n32], { dtype: 'int32', device: dev })),
      // int64 values as (low, high) int32 pairs: every id, position, slot and top_k is below 2^31
      h64: new Int32Array(2 * n64), h32: new Int32Array(n32), hf: new Float32Array(4 * S),
      sampling: { temperature: view(f32, 0), topP: view(f32, 1), minP: view(f32, 2), uniform: view(f32, 3), topK: nbx.keep(i64.narrow(0, 3 * Rmax + S, S)) },
    };
    return this.inputs;
  }

  /** Writes the first `n` elements of `host` (the tensor's dtype's bytes) into `t`, from its start. */
  private upload(t: Tensor, host: Int32Array | Float32Array, n: number): void {
    const be = backendFor(t.device) as { writeBytes?: (buf: unknown, byteOffset: number, data: Uint8Array) => void };
    const item = t.dt === 'int64' ? 8 : 4;
    if (t.device.type === 'cuda' && be.writeBytes) {
      const ref = t.ref();
      be.writeBytes(ref.buf, ref.offset * item, new Uint8Array(host.buffer, 0, n * item));
      return;
    }
    const src = t.dt === 'int64' ? new BigInt64Array(host.buffer, 0, n) : t.dt === 'int32' ? new Int32Array(host.buffer, 0, n) : new Float32Array(host.buffer, 0, n);
    t.narrow(0, 0, n).copy_(Tensor.fromStorage(src.slice(), t.dt, [n]));
  }

  /**
   * One step over the running sequences: a row for each decoding sequence's last token, then prompt
   * tokens of the sequences still reading theirs (in admission order, at most prefillChunk, as many as
   * the rows left), padded to a row bucket; the rows that decode or end a prompt are sampled.
   */
  private async mixedStep(): Promise<boolean> {
    const Rmax = this.stepTokens;
    const work: StepWork[] = [];
    let rows = 0;
    for (const s of this.running) {
      if (!s.done && s.prefilled === s.promptLength && s.tokens.length > 0) { work.push({ seq: s, n: 1, sample: true }); rows++; }
    }
    let budget = Math.min(this.prefillChunk, Rmax - rows);
    for (const s of this.running) {
      if (budget <= 0) break;
      if (s.done || s.prefilled >= s.promptLength) continue;
      const n = Math.min(budget, s.promptLength - s.prefilled);
      work.push({ seq: s, n, sample: s.prefilled + n === s.promptLength });
      rows += n; budget -= n;
    }
    if (!work.length) return false;
    await this.stepRows(work, rows);
    return true;
  }

  /**
   * Writes the inputs of a step over `work` (`rows` rows, padded to a rows bucket), runs it (replayed
   * where recorded) and streams the sampled tokens. `shape` (warm-up, no work: every row padding) sets
   * the rows bucket, block-table width and sampling mode instead; its failures are thrown.
   */
  private async stepRows(work: readonly StepWork[], rows: number, shape?: { R: number; W: number; mode: SamplingMode }): Promise<void> {
    const Rmax = this.stepTokens, S = this.maxBatch;
    const sampled = work.filter((w) => w.sample);
    const t0 = performance.now();
    let ids: number[];
    try {
      const inp = this.ensureInputs(), h64 = inp.h64, h32 = inp.h32;
      const R = shape?.R ?? this.rowBuckets.find((b) => b >= rows)!;
      let widest = 1;
      for (const w of work) {
        const s = w.seq;
        this.cache.reserve(s.id, s.prefilled === s.promptLength ? s.length : s.prefilled + w.n);
        widest = Math.max(widest, this.cache.blocks(s.id).length);
      }
      const W = shape?.W ?? this.widthFor(widest);
      const scratch = this.cache.scratchSlot(), scratchBlock = scratch / this.blockSize;
      let r = 0, k = 0, maxPos = 0;
      const put64 = (i: number, v: number): void => { h64[2 * i] = v; h64[2 * i + 1] = 0; };
      for (const w of work) {
        const s = w.seq, blocks = this.cache.blocks(s.id), nb = blocks.length;
        const decoding = s.prefilled === s.promptLength;
        const start = decoding ? s.length - 1 : s.prefilled;
        for (let i = 0; i < w.n; i++, r++) {
          const pos = start + i;
          put64(r, decoding ? s.tokens[s.tokens.length - 1]! : s.req.prompt[pos]!);
          put64(Rmax + r, pos);
          put64(2 * Rmax + r, blocks[Math.floor(pos / this.blockSize)]! * this.blockSize + (pos % this.blockSize));
          h32[r] = pos + 1;
          if (pos > maxPos) maxPos = pos;
          // past the sequence's last block: that block again (never read: beyond its length)
          const row = Rmax + r * W;
          for (let j = 0; j < W; j++) h32[row + j] = blocks[j < nb ? j : nb - 1]!;
        }
        if (w.sample) put64(3 * Rmax + k++, r - 1);
      }
      // padding rows: the scratch slot, length 0 (they attend to nothing); unused sample rows read row 0
      for (; r < R; r++) {
        put64(r, 0); put64(Rmax + r, 0); put64(2 * Rmax + r, scratch);
        h32[r] = 0;
        h32.fill(scratchBlock, Rmax + r * W, Rmax + (r + 1) * W);
      }
      for (; k < S; k++) put64(3 * Rmax + k, 0);
      // the sampled rows' settings and draws; the rest greedy (temperature 0, no cut)
      const hf = inp.hf;
      let sampling = false;
      for (let i = 0; i < S; i++) {
        const s = i < sampled.length ? sampled[i]!.seq : null, smp = s !== null && s.cfg.do_sample;
        sampling ||= smp;
        hf[i] = smp ? s.cfg.temperature : 0;
        hf[S + i] = smp ? s.cfg.top_p : 1;
        hf[2 * S + i] = 0;
        hf[3 * S + i] = smp ? uniformOf(s) : 0;
        put64(3 * Rmax + S + i, smp ? s.cfg.top_k : 0);
      }
      // one argmax when every row is greedy; else the sorted draw for every row (see choose())
      const mode: SamplingMode = shape?.mode ?? (sampling ? 'sorted' : 'greedy');
      this.upload(inp.i64, h64, 3 * Rmax + 2 * S);
      this.upload(inp.i32, h32, Rmax + R * W);
      this.upload(inp.f32, hf, 4 * S);
      this.stepMaxPos = maxPos;
      const out = this.runStep(R, W, mode);
      const t1 = performance.now();
      this.times.prepare += t1 - t0;
      let got: BigInt64Array;
      try {
        // while the device runs the step: the event loop's turn (sockets, timers, aborts) and the
        // consumers of the last step's tokens (their stream writes), instead of between steps
        if (this.overlap) await breathe();
        got = (await out.ids.dataStorage()) as BigInt64Array;
        this.times.wait += performance.now() - t1;
        if (!out.owned) this.lastGraph?.checkErrors();
        ids = sampled.map((_, i) => Number(got[i]!));
      } finally { if (out.owned) out.ids.dispose(); }
      for (const w of work) {
        const s = w.seq;
        if (!this.cache.hasSequence(s.id)) continue; // cancelled while the step ran
        this.cache.advance(s.id, w.n);
        if (s.prefilled < s.promptLength) { s.prefilled += w.n; this.counters.tokens_in += w.n; }
      }
    } catch (e) {
      if (shape) throw e;
      for (const w of work) { this.release(w.seq); w.seq.fail(e); }
      return;
    }
    // a sequence cancelled while the ids were read back is already gone
    const t2 = performance.now();
    sampled.forEach((w, i) => { if (!w.seq.done) this.emit(w.seq, ids[i]!); });
    this.times.emit += performance.now() - t2;
  }

  /**
   * Milliseconds the mixed steps spent so far: preparing (planning the rows, writing the inputs, the
   * replay's launch or an eager step's host work), waiting for the sampled ids (the device; on CUDA the
   * event loop's turn runs meanwhile), and streaming the tokens (text, stop strings, wake-ups).
   */
  readonly times = { prepare: 0, wait: 0, emit: 0 };

  /** Steps run asynchronously on the device (CUDA): the host's other work overlaps them. */
  private get overlap(): boolean { return this.model.device.type === 'cuda'; }

  /** max(positions) of the step being run (what RoPE of position-dependent frequencies needs). */
  private stepMaxPos = 0;

  /**
   * The step's forward over the input buffers: the decoder on R rows of one token each (paged attention
   * per row), the sampled rows' logits, their tokens: int64 [maxBatch]. What a graph records.
   */
  private stepForward(R: number, W: number, mode: SamplingMode): Tensor {
    const m = this.model, Rmax = this.stepTokens, S = this.maxBatch, inp = this.inputs!;
    return nbx.scope(() => {
      const ids = inp.i64.narrow(0, 0, R).view([R, 1]);
      const pos = inp.i64.narrow(0, Rmax, R).view([R, 1]);
      const slots = inp.i64.narrow(0, 2 * Rmax, R);
      const rowsSampled = inp.i64.narrow(0, 3 * Rmax, S);
      const lens = inp.i32.narrow(0, 0, R);
      const tables = inp.i32.narrow(0, Rmax, R * W).view([R, W]);
      const lc = new PagedStepCache(this.cache, slots, tables, lens);
      const fixed = !m.model.positionDependentRope;
      const bound = this.ropeBound;
      const h = m.model.forward(ids, {
        padding: null, positionIds: pos, maxPosition: fixed ? bound - 1 : this.stepMaxPos, positionBound: fixed ? bound : null, cache: lc, masks: NO_MASKS,
      });
      let logits = m.lm_head.forward(h.view([R, h.shape[2]!]).index_select(0, rowsSampled));
      const cap = m.cfg.final_logit_softcapping;
      if (cap !== null) logits = logits.div(cap).tanh().mul(cap);
      return sampleRows(logits, inp.sampling, mode);
    });
  }

  /** The step's sampled ids: a graph's output (rewritten by its next replay) or an eager step's own tensor (owned). */
  private runStep(R: number, W: number, mode: SamplingMode): { ids: Tensor; owned: boolean } {
    const eager = (warmup: boolean): { ids: Tensor; owned: boolean } => {
      this.graphCounters.eagerSteps++;
      // on CUDA, the kernels a capture records (small elementwise ops unbatched), compiled and tuned now
      const be = backendFor(this.model.device) as { unbatched?: <T>(fn: () => T) => T };
      const run = (): Tensor => this.forward(() => this.stepForward(R, W, mode));
      return { ids: warmup && be.unbatched ? be.unbatched(run) : run(), owned: true };
    };
    if (!this.graphs || this.graphFallback !== null) return eager(false);
    // the pools grew (new buffers or a new block count) or a RoPE table was rebuilt: recorded steps are stale
    const tables = this.model.model.ropeTables();
    if (this.cache.generation !== this.graphGeneration || tables.some((t, i) => t !== this.ropeSeen[i])) {
      this.dropGraphs();
      this.graphGeneration = this.cache.generation; this.ropeSeen = tables;
    }
    const key = `${R}:${W}:${mode}`;
    const g = this.stepGraphs.get(key);
    if (g) {
      if (g.graph) { g.graph.replay(); this.lastGraph = g.graph; } else this.forward(() => g.recording!.replay());
      this.graphCounters.replays++;
      return { ids: g.out, owned: false };
    }
    const warm = `${R}:${mode}`;
    if (!this.warmed.has(warm)) { this.warmed.add(warm); return eager(true); }
    try {
      if (this.model.device.type === 'cpu') {
        // records while running: this step's result is the recording's
        const r = this.forward(() => recordCpu(() => this.stepForward(R, W, mode)));
        this.stepGraphs.set(key, { graph: null, recording: r.recording, out: r.result });
        this.graphCounters.captures++;
        return { ids: r.result, owned: false };
      }
      this.graphPool ??= graphPoolHandle();
      const graph = new CUDAGraph(backendFor(this.model.device) as unknown as GraphHost, this.graphPool);
      const out = captureGraph(graph, () => this.stepForward(R, W, mode));
      this.stepGraphs.set(key, { graph, recording: null, out });
      this.graphCounters.captures++;
      graph.replay(); this.lastGraph = graph;
      this.graphCounters.replays++;
      return { ids: out, owned: false };
    } catch (e) {
      const what = this.model.device.type === 'cpu' ? 'CPU step recordings' : 'CUDA graphs';
      this.graphFallback = e instanceof Error ? `${e.name}: ${e.message}` : String(e);
      this.dropGraphs();
      if (!(e instanceof GraphCaptureError)) {
        // not a step that cannot be recorded but a failure while recording it (the step's requests get the
        // error): the next steps run eagerly rather than fail the same way
        process.stderr.write(`nbx: engine steps run without ${what} from now on: the capture failed with ${this.graphFallback}\n`);
        throw e;
      }
      if (process.env.NBX_DEBUG) process.stderr.write(`nbx: engine steps run without ${what}: ${e.message}\n`);
      return eager(false);
    }
  }

  private dropGraphs(): void {
    for (const g of this.stepGraphs.values()) { g.out.dispose(); g.graph?.reset(); }
    this.stepGraphs.clear();
    this.lastGraph = null;
  }

  /** Streams a sequence's next token; a finished sequence leaves. */
  private emit(seq: Sequence, token: number): void {
    this.counters.tokens_out++;
    let finished: boolean;
    try { finished = seq.push(token); } catch (e) { this.release(seq); seq.fail(e); return; }
    if (finished) this.release(seq);
  }

  private samplingStates = new Map<number, RowSamplingState>();

  /**
   * Each row's next token from logits [B, V] (disposed here). On the CPU: transformers' processors on
   * the row's own scores with its own generator (the tokens model.generate() samples). Elsewhere:
   * src/generation/sampler.ts on the device, each row with its settings and one uniform draw from its
   * own generator, so a step reads back B ids instead of B·V scores (a row's token depends on its row
   * alone there too).
   */
  private async choose(seqs: readonly Sequence[], logits: Tensor): Promise<number[]> {
    if (this.sampling === 'host') {
      const scores = await this.hostScores(logits);
      try {
        const V = scores.shape[1]!, all = scores.dataStorageSync() as Float32Array;
        return seqs.map((s, b) => {
          const row = Tensor.fromStorage(all.subarray(b * V, (b + 1) * V), 'float32', [1, V]);
          try { return this.sample(s, row); } finally { row.dispose(); }
        });
      } finally { scores.dispose(); }
    }
    // the sequences' rows only (a padded step's other rows need no token; a row's token does not depend
    // on how many rows the sampler gets)
    const B = seqs.length;
    let st = this.samplingStates.get(B);
    if (!st) { st = new RowSamplingState(B, logits.device); this.samplingStates.set(B, st); }
    st.write(seqs.map((s) => (s.cfg.do_sample ? { temperature: s.cfg.temperature, top_k: s.cfg.top_k, top_p: s.cfg.top_p, min_p: 0 } : { temperature: 0, top_k: 0, top_p: 1, min_p: 0 })),
      seqs.map((s) => (s.cfg.do_sample ? uniformOf(s) : 0)));
    // one argmax when every row is greedy; else the sorted draw for every row (a greedy row still gets
    // its argmax): never the unsorted draw, whose token for a given u differs from the sorted one's, so
    // a sampled row would change with what it is batched with
    const mode = seqs.every((s) => !s.cfg.do_sample) ? 'greedy' : 'sorted';
    let ids: Tensor;
    try {
      const rows = logits.shape[0] === B ? logits : logits.narrow(0, 0, B);
      ids = sampleRows(rows, st.tensors, mode);
    } finally { logits.dispose(); }
    try { return Array.from(await ids.dataStorage() as BigInt64Array, Number); } finally { ids.dispose(); }
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
