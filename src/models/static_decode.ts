// Decode steps of fixed shape, replayed as a CUDA graph (or, on the CPU, as a recording of their kernel
// calls: src/backend/cpu/runtime/recording.ts, the same contract without a driver; on WebGPU, as the
// step's encoded dispatches: src/backend/webgpu/runtime/graph.ts).
//
// An eager decode step launches hundreds of small kernels, and on a GPU their host cost (JS, FFI,
// launches) is several times their GPU time. A step whose every tensor has a fixed shape and address
// can be recorded once and replayed with one launch (src/backend/cuda/runtime/graph.ts). What changes
// from step to step lives on the device and is written before each replay, in one host-to-device copy:
// the new token ids, their positions, and the cache index they are written at. So the step reads:
// * keys and values written at a device index (index_copy_ into the preallocated cache buffers) instead
//   of at a host offset, and attention over the whole buffer [0, capacity) with a mask computed on the
//   device (index <= write index, not padding, inside the sliding window) instead of over a view of the
//   filled part. Masked keys weigh exactly 0, so the result is the eager step's up to the order in
//   which the attention kernel sums (the sequence is split into other chunks).
// * RoPE rows gathered at device positions from the model's table (built before the capture; if it is
//   rebuilt the graph is recaptured).
// The step is the model's own forward (DecoderModel.forward with a cache writer and precomputed masks),
// so every family and fused path the layers take is what gets recorded. Greedy decoding also records
// the argmax, so a step reads back B token ids.
//
// A decoder is made per (batch, capacity bucket, greedy / sampled on the device / logits) and kept on the model (two at most), so the
// next generate() with the same shape replays without capturing again; a generation holds it from
// begin() to release(), and a concurrent generation gets one of its own. The first step of a decoder
// runs eagerly (kernels compile, autotuning measures; small elementwise ops unbatched, as in a capture),
// the second captures and replays. A step that cannot be captured (GraphCaptureError: a layer that reads
// a value back to the host, e.g. mixture-of-experts routing on a backend without expert_linear's kernel)
// marks the decoder eager-only and generation goes on with the ordinary forward; the reason is kept in
// `fallbackReason` and shown with NBX_DEBUG=1.

import * as nbx from '../index.js';
import type { Tensor } from '../tensor/tensor.js';
import { backendFor } from '../backend/backend.js';
import { GraphCaptureError, ValueError } from '../errors.js';
import { autotuneMode, tuneSync, type TuneKey, type TuneResult } from '../autotune/index.js';
import type { KVCacheBuffers } from './cache.js';
import type { DecoderModel, LayerCache, LayerContext } from './decoder.js';
import type { ModelConfig } from './config.js';
import type { Device } from '../backend/backend.js';
import { CUDAGraph, captureGraph, type GraphHost } from '../backend/cuda/runtime/graph.js';
import { StepPublisher, type PublishHost } from '../backend/cuda/runtime/publish.js';
import { recordCpu, type CpuRecording } from '../backend/cpu/runtime/recording.js';
import { WebGPUGraph, captureWebGPU, type GraphBackend as WebGPUGraphBackend } from '../backend/webgpu/runtime/graph.js';
import { decodeStepMaxBatch } from '../ops/llm.js';
import { RowSamplingState, argmaxRows, sampleRows, samplingModeOf, type RowSampling, type SamplingMode } from '../generation/sampler.js';

/** What a static decoder uses of the model (CausalLMModel; named here so causal_lm.ts and this file do not import each other). */
export interface StaticDecodeModel {
  readonly device: Device;
  readonly cfg: ModelConfig;
  readonly model: DecoderModel;
  readonly lm_head: { forward(x: Tensor): Tensor };
  newCache(opts: { batch?: number; maxLength?: number }): KVCacheBuffers;
}

/** Cache capacities are rounded up to this many positions, so nearby lengths share a graph. */
export const CAPACITY_BUCKET = 256;

/** Writes a step's keys and values at the device-held index and attends over the whole buffers. */
class IndexedCacheWriter implements LayerCache {
  constructor(private readonly cache: KVCacheBuffers, private readonly writeIndex: Tensor) {}
  get length(): number { return this.cache.size - 1; }
  update(layer: number, k: Tensor, v: Tensor): { keys: Tensor; values: Tensor } {
    const { keys, values } = this.cache.buffers(layer);
    keys.index_copy_(2, this.writeIndex, k);
    values.index_copy_(2, this.writeIndex, v);
    return { keys, values };
  }
  rotateAndUpdate(layer: number, q: Tensor, k: Tensor, v: Tensor, cos: Tensor, sin: Tensor): { q: Tensor; keys: Tensor; values: Tensor } {
    const { keys, values } = this.cache.buffers(layer);
    return { q: nbx.llm.rotary_and_cache(q, k, v, cos, sin, keys, values, this.writeIndex), keys, values };
  }
}

export interface StaticStepResult {
  /** [B, 1, V] logits of this step (rewritten by the next step: read them before stepping again). */
  logits: Tensor;
  /** [B] int64 argmax of the logits on the device, when the decoder is greedy. */
  next: Tensor | null;
}

export class StaticDecoder {
  readonly cache: KVCacheBuffers;
  /** int64 [2B + 1]: token ids, their positions, the cache index they are written at. */
  private readonly state: Tensor;
  private readonly ids: Tensor;
  private readonly positions: Tensor;
  private readonly writeIndex: Tensor;
  private readonly hostState: BigInt64Array;
  /** bool [B, capacity]: false at the prompt's padding. */
  private readonly notPadding: Tensor;
  /** int64 [1, capacity]: 0 .. capacity-1. */
  private readonly cacheIndex: Tensor;
  private graph: CUDAGraph | null = null;
  private recording: CpuRecording | null = null;
  /** On WebGPU: the step's recorded dispatches (src/backend/webgpu/runtime/graph.ts). */
  private webgpuGraph: WebGPUGraph | null = null;
  /** stepFromDevice()'s advance of the inputs, recorded against webgpuGraph's outputs. */
  private advanceGraph: WebGPUGraph | null = null;
  /** The same advance as a CUDA graph. */
  private cudaAdvance: CUDAGraph | null = null;
  private out: StaticStepResult | null = null;
  private ropeSeen: unknown[] = [];
  private steps = 0;
  private disposed = false;
  /** Why this decoder runs eagerly (a step could not be captured), or null. */
  fallbackReason: string | null = null;
  /** A generation is using it (begin() .. release()): a concurrent one must not share its cache. */
  inUse = false;
  /** Made for one generation while the kept decoder was busy: disposed by release(). */
  ephemeral = false;

  /** Each row's sampling settings and draw on the device, for a decoder that samples (`sample`). */
  private readonly sampling: RowSamplingState | null;
  /** What the recorded step's sampler computes (samplingModeOf the rows it was given). */
  private samplingMode: SamplingMode = 'sorted';
  /** Steps take nbx.llm.fused_decode_step (decodeStepMode(); 'auto' decides at the first capture). */
  private fused: boolean;
  /** The step path is still to be chosen by timing both (decodeStepMode() 'auto' on CUDA, a batch the whole-step kernel takes). */
  private autoFused: boolean;
  /** Whether the last forward() ran the whole-step op (the model and device took it). */
  private tookFused = false;
  /** The CUDA graph ends with the greedy advance (the next step's ids, positions and index from this one's). */
  private graphAdvances = false;
  /** The device's inputs were advanced by the last replay: stepFromDevice() has nothing left to queue before its own. */
  private advancedLast = false;
  /**
   * A greedy CUDA step graph ends with a kernel writing its ids and error word to mapped host memory
   * (src/backend/cuda/runtime/publish.ts), which readNext() reads instead of queuing copies; NBX_DECODE_PUBLISH=0: copies.
   */
  private publisher: StepPublisher | null = null;
  private graphPublishes = false;
  /** The number of the last replay's publication (null: that step did not publish). */
  private lastPublished: number | null = null;

  /**
   * `greedy`: each step also records the argmax; `sample`: each step draws the next ids on the device
   * (src/generation/sampler.ts) from the settings and uniforms given to step(); neither: logits only.
   */
  constructor(private readonly model: StaticDecodeModel, readonly batch: number, readonly capacity: number, readonly greedy: boolean, readonly sample = false) {
    const device = model.device;
    this.cache = model.newCache({ batch, maxLength: capacity });
    this.cache.preallocate();
    // stale or uninitialized values beyond the written part are masked, but 0·NaN is NaN: start from zeros
    for (let l = 0; l < model.cfg.num_hidden_layers; l++) { const b = this.cache.buffers(l); b.keys.zero_(); b.values.zero_(); }
    this.state = nbx.keep(nbx.zeros([2 * batch + 1], { dtype: 'int64', device }));
    this.ids = nbx.keep(this.state.slice(0, 0, batch).view([batch, 1]));
    this.positions = nbx.keep(this.state.slice(0, batch, 2 * batch).view([batch, 1]));
    this.writeIndex = nbx.keep(this.state.slice(0, 2 * batch, 2 * batch + 1));
    this.hostState = new BigInt64Array(2 * batch + 1);
    this.notPadding = nbx.keep(nbx.ones([batch, capacity], { dtype: 'bool', device }));
    this.cacheIndex = nbx.keep(nbx.arange(0, capacity, { dtype: 'int64', device }).unsqueeze(0));
    this.sampling = sample && !greedy ? new RowSamplingState(batch, device, model.cfg.vocab_size) : null;
    const mode = decodeStepMode();
    this.fused = mode === 'fused' && this.fusedTakes();
    this.autoFused = mode === 'auto' && device.type === 'cuda' && autotuneMode() !== 'off' && this.fusedTakes();
  }

  /** Starts a generation: the cache forgets its positions, `promptMask` rows ([B][P] of 0/1, or null) give the padding. */
  begin(promptMask: readonly (readonly number[])[] | null, promptLength: number, promptIds?: readonly (readonly number[])[]): void {
    this.inUse = true;
    // the repetition penalty's memory: the prompt (the steps mark their own input tokens)
    if (this.sampling) this.sampling.setSeen(promptIds ?? []);
    this.cache.reset();
    const rows = Array.from({ length: this.batch }, (_, b) => {
      const row = new Array<boolean>(this.capacity).fill(true);
      if (promptMask) for (let i = 0; i < promptLength; i++) row[i] = promptMask[b]![i] !== 0;
      return row;
    });
    this.notPadding.copy_(nbx.tensor(rows, { dtype: 'bool' }));
  }

  /**
   * One decode step: `tokens` [B] at `positions` [B], written at cache index cache.length. Returns this
   * step's logits (and argmax when greedy), then advances the cache by one.
   */
  step(tokens: readonly number[], positions: readonly number[], sampling?: { rows: readonly RowSampling[]; uniforms: readonly number[] }): StaticStepResult {
    const B = this.batch, at = this.cache.length;
    if (at >= this.capacity) throw new RangeError(`StaticDecoder: cache index ${at} is past the capacity ${this.capacity}`);
    if (this.sampling) {
      if (!sampling) throw new RangeError('StaticDecoder.step: a sampling decoder needs each row\'s settings and draw');
      this.sampling.write(sampling.rows, sampling.uniforms);
      // the rows of one generation share their settings: the sampler skips what none of them needs
      const mode = samplingModeOf(sampling.rows);
      if (mode !== this.samplingMode) { this.dropGraph(); this.samplingMode = mode; this.steps = 0; } // warm up, then record again
    }
    for (let b = 0; b < B; b++) { this.hostState[b] = BigInt(tokens[b]!); this.hostState[B + b] = BigInt(positions[b]!); }
    this.hostState[2 * B] = BigInt(at);
    const be = backendFor(this.state.device) as { writeBytes?: (buf: unknown, byteOffset: number, data: Uint8Array) => void };
    if (be.writeBytes) { const ref = this.state.ref(); be.writeBytes(ref.buf, ref.offset * 8, new Uint8Array(this.hostState.buffer)); }
    else this.state.copy_(nbx.tensor(Array.from(this.hostState), { dtype: 'int64' }));
    const out = this.run();
    this.cache.advance(1);
    return out;
  }

  /**
   * The next greedy step fed from the device: its token ids are the last step's argmax, its positions and
   * cache index the last ones plus one, all advanced on the device, so it can be queued before the last
   * step's ids reach the host (a decode loop then reads step n's ids while step n + 1 runs). Needs a
   * greedy decoder after at least one step(); on WebGPU the advance is itself a recorded graph.
   */
  stepFromDevice(): StaticStepResult {
    const B = this.batch, at = this.cache.length;
    if (!this.greedy || !this.out?.next) throw new RangeError('StaticDecoder.stepFromDevice: needs a greedy decoder that has stepped');
    if (at >= this.capacity) throw new RangeError(`StaticDecoder: cache index ${at} is past the capacity ${this.capacity}`);
    const next = this.out.next;
    const advance = (): void => this.advanceFrom(next);
    // the replayed step's outputs are fixed buffers: the advance reading them is recorded once too (three
    // eager launches cost the host more than a replay, and the host's time is what a queued step hides);
    // a CUDA step graph that ends with it has done it already
    if (this.advancedLast) { /* advanced by the last replay */ } else if (this.webgpuGraph) {
      if (this.advanceGraph) this.advanceGraph.replay();
      else { const g = new WebGPUGraph(backendFor(this.model.device) as unknown as WebGPUGraphBackend); captureWebGPU(g, advance); this.advanceGraph = g; }
    } else if (this.graph) {
      if (this.cudaAdvance) this.cudaAdvance.replay();
      else { // a capture records the work without running it: replayed once captured
        const g = new CUDAGraph(backendFor(this.model.device) as unknown as GraphHost);
        try { captureGraph(g, advance); this.cudaAdvance = g; g.replay(); } catch (e) { if (!(e instanceof GraphCaptureError)) throw e; g.reset(); advance(); }
      }
    } else advance();
    const out = this.run();
    this.cache.advance(1);
    return out;
  }

  /** The next step's inputs from this one's argmax: ids = next, positions + 1, cache index + 1. */
  private advanceFrom(next: Tensor): void {
    nbx.scope(() => {
      this.ids.copy_(next.view([this.batch, 1]));
      this.positions.add_(1);
      this.writeIndex.add_(1);
    });
  }

  private run(): StaticStepResult {
    this.advancedLast = false;
    this.lastPublished = null;
    if (this.fallbackReason !== null || !replayEnabled(this.model.device)) return this.eager(false);
    if (this.steps++ === 0) return this.eager(true);
    const tables = this.model.model.ropeTables();
    if (this.replayable && tables.some((t, i) => t !== this.ropeSeen[i])) this.dropGraph(); // the RoPE table was rebuilt
    if (!this.replayable) {
      if (!this.capture()) return this.eager(false);
      this.ropeSeen = tables;
    }
    if (this.graph) {
      this.graph.replay(); this.advancedLast = this.graphAdvances;
      if (this.graphPublishes) this.lastPublished = this.publisher!.replayed();
    } else if (this.webgpuGraph) this.webgpuGraph.replay(); else this.recording!.replay();
    return this.out!;
  }

  /** A captured CUDA graph or a CPU recording to replay. */
  private get replayable(): boolean { return this.graph !== null || this.recording !== null || this.webgpuGraph !== null; }

  /** The step run eagerly; its outputs are fresh tensors replacing the previous eager outputs. */
  private eager(warmup: boolean): StaticStepResult {
    if (this.out && !this.graph) { this.out.logits.dispose(); this.out.next?.dispose(); }
    // on CUDA, the kernels a capture records (small elementwise ops unbatched), compiled and tuned now
    const be = backendFor(this.model.device) as { unbatched?: <T>(fn: () => T) => T };
    const run = (): StaticStepResult => {
      const known = warmup && this.autoFused ? this.cachedStepPath() : null;
      if (known !== null) { this.autoFused = false; this.fused = known; } // the caches decide: only that path compiles
      else if (warmup && this.autoFused) { // the whole-step kernel compiled (and its op taken, or not) before the capture times it
        const o = this.forward(true);
        if (this.tookFused) { o.logits.dispose(); o.next?.dispose(); } else this.autoFused = false;
      }
      return this.forward();
    };
    this.out = warmup && be.unbatched ? be.unbatched(run) : run();
    return this.out;
  }

  private capture(): boolean {
    try {
      let out: StaticStepResult;
      if (this.model.device.type === 'cpu') {
        const r = recordCpu(() => this.forward());
        out = r.result; this.recording = r.recording;
      } else if (this.model.device.type === 'webgpu') {
        const g = new WebGPUGraph(backendFor(this.model.device) as unknown as WebGPUGraphBackend);
        out = captureWebGPU(g, () => this.forward());
        this.webgpuGraph = g;
      } else {
        // a greedy step graph ends with the advance of its inputs, so the next queued step is one launch
        // (the candidates timed by chooseStep do not: their replays must repeat the same step)
        const timing = this.autoFused;
        if (this.greedy && !this.publisher && process.env.NBX_DECODE_PUBLISH !== '0') {
          try { this.publisher = new StepPublisher(backendFor(this.model.device) as unknown as PublishHost, this.batch); } catch (e) {
            // mapped host memory refused (a driver or system limit): the ids come back by copies, as without it
            if (process.env.NBX_DEBUG) process.stderr.write(`nbx: decode steps read their ids by copies: ${e instanceof Error ? e.message : String(e)}\n`);
          }
        }
        const g = new CUDAGraph(backendFor(this.model.device) as unknown as GraphHost);
        out = captureGraph(g, () => this.forwardAdvancing(!timing));
        this.graph = g;
        this.graphAdvances = this.greedy && !timing;
        this.graphPublishes = this.graphAdvances && this.publisher !== null;
        if (timing) {
          out = this.chooseStep(out);
          if (this.greedy) {
            const g2 = new CUDAGraph(backendFor(this.model.device) as unknown as GraphHost);
            const out2 = captureGraph(g2, () => this.forwardAdvancing(true));
            out.logits.dispose(); out.next?.dispose(); this.graph.reset();
            this.graph = g2; out = out2; this.graphAdvances = true; this.graphPublishes = this.publisher !== null;
          }
        }
      }
      if (this.out) { this.out.logits.dispose(); this.out.next?.dispose(); }
      this.out = out;
      return true;
    } catch (e) {
      if (!(e instanceof GraphCaptureError)) throw e;
      this.fallbackReason = e.message;
      if (process.env.NBX_DEBUG) process.stderr.write(`nbx: decode steps run without ${{ cpu: 'a CPU step recording', webgpu: 'a WebGPU step graph' }[this.model.device.type as string] ?? 'a CUDA graph'}: ${e.message}\n`);
      return false;
    }
  }

  /** forward(), then (a greedy decoder, `advance`) the advance of the inputs to the next step. */
  private forwardAdvancing(advance: boolean): StaticStepResult {
    const out = this.forward();
    if (advance && out.next) {
      this.advanceFrom(out.next);
      if (this.publisher) { const r = out.next.ref(); this.publisher.record((r.buf as { ptr: bigint }).ptr + BigInt(r.offset * 8)); }
    }
    return out;
  }

  /** The step itself: the model's forward over the fixed-size cache, logits and (greedy) their argmax. */
  private forward(fused = this.fused): StaticStepResult {
    const m = this.model, cfg = m.cfg, B = this.batch;
    return nbx.scope(() => {
      // where the device's whole-step kernel takes the batch: one launch (nbx.llm.fused_decode_step)
      const one = fused ? this.fusedStep() : null;
      this.tookFused = one !== null;
      if (one) {
        this.sampling?.markSeen(this.ids);
        const next = this.greedy ? one[1] : this.sampling ? sampleRows(one[0].view([B, one[0].shape[2]!]), this.sampling.tensors, this.samplingMode) : null;
        return next ? { logits: one[0], next } : { logits: one[0], next: null };
      }
      const written = this.cacheIndex.le(this.writeIndex); // [1, C]
      const attend = written.logical_and(this.notPadding); // [B, C]
      const masks = {} as LayerContext['masks'];
      masks.full_attention = { mask: attend.view([B, 1, 1, this.capacity]), isCausal: false };
      if (cfg.sliding_window !== null && cfg.layer_types.includes('sliding_attention')) {
        const inWindow = this.cacheIndex.gt(this.writeIndex.sub(cfg.sliding_window));
        masks.sliding_attention = { mask: attend.logical_and(inWindow).view([B, 1, 1, this.capacity]), isCausal: false };
      }
      const h = m.model.forward(this.ids, {
        padding: null, positionIds: this.positions, maxPosition: this.capacity - 1, positionBound: this.capacity,
        cache: new IndexedCacheWriter(this.cache, this.writeIndex), masks,
      });
      let logits = m.lm_head.forward(h);
      const cap = cfg.final_logit_softcapping;
      if (cap !== null) logits = logits.div(cap).tanh().mul(cap);
      const last = logits.view([B, logits.shape[2]!]);
      this.sampling?.markSeen(this.ids);
      const next = this.greedy ? argmaxRows(last) : this.sampling ? sampleRows(last, this.sampling.tensors, this.samplingMode) : null;
      return next ? { logits, next } : { logits, next: null };
    });
  }

  /**
   * decodeStepMode() 'auto': the step captured again through nbx.llm.fused_decode_step, both graphs timed
   * (replays of one step are idempotent: the same keys and values at the same index), and the faster one
   * kept. The autotuner's caches keep the choice per device and model shape (key STEP_PATH), so later
   * decoders capture only the chosen one. Measured on the H200 (BENCHMARKS.md): the whole-step kernel is
   * faster at the TinyLlama shape and slower at Llama-3-8B's, so no rule of shape decides it.
   */
  private chooseStep(ops: StaticStepResult): StaticStepResult {
    this.autoFused = false;
    const be = backendFor(this.model.device) as unknown as GraphHost & { ctx: { info?: { name?: string } } };
    const key = this.stepPathKey();
    if (!key) return ops;
    const opsGraph = this.graph!;
    let fusedRun: { graph: CUDAGraph; out: StaticStepResult } | null = null;
    const fusedGraph = (): CUDAGraph => {
      if (!fusedRun) {
        const g = new CUDAGraph(be);
        const out = captureGraph(g, () => this.forward(true));
        fusedRun = { graph: g, out };
      }
      return fusedRun.graph;
    };
    const r = tuneSync(STEP_PATH, key, STEP_PATHS, (c) => (c.step === 'fused' ? fusedGraph() : opsGraph).timeReplays(4), { deviceLabel: be.ctx.info?.name });
    const drop = (x: { graph: CUDAGraph; out: StaticStepResult }): void => { x.out.logits.dispose(); x.out.next?.dispose(); x.graph.reset(); };
    debugStepPath(r);
    this.tookFused = r.config.step === 'fused';
    if (!this.tookFused) {
      if (fusedRun) drop(fusedRun);
      return ops;
    }
    fusedGraph();
    drop({ graph: opsGraph, out: ops });
    this.graph = fusedRun!.graph;
    this.fused = true;
    return fusedRun!.out;
  }

  /** The autotuner's key of this decoder's step path (device, model shape, capacity bucket); null without CUDA's tuning. */
  private stepPathKey(): TuneKey | null {
    const be = backendFor(this.model.device) as unknown as { tuning?: { deviceKey: string } };
    if (!be.tuning) return null;
    const cfg = this.model.cfg, kv = this.cache.buffers(0).keys;
    const shape = `L${cfg.num_hidden_layers}xH${cfg.hidden_size}xI${cfg.intermediate_size}xA${cfg.num_attention_heads}/${cfg.num_key_value_heads}` +
      `xD${kv.shape[3]}xV${cfg.vocab_size}xC${2 ** Math.ceil(Math.log2(this.capacity))}${this.batch > 1 ? `xB${this.batch}` : ''}`;
    return { shape: shape + this.weightFormats(), dtype: kv.dtype.name, device: be.tuning.deviceKey };
  }

  /** The quantized formats of the model's projections, for the step path's key ('' when none: the paths' costs differ with them). */
  private weightFormats(): string {
    const seen = new Set<string>();
    for (const [, mod] of (this.model.model as unknown as nbx.nn.Module).named_modules()) {
      const q = mod instanceof nbx.nn.Linear ? mod.quantized_weight : null;
      if (q) seen.add(`${q.layout.format}${q.layout.format === 'int4' ? `g${q.layout.groupSize}${q.zeros ? 'z' : ''}` : ''}`);
    }
    const lm = this.model.lm_head as unknown;
    const lq = lm instanceof nbx.nn.Linear ? lm.quantized_weight : null;
    return seen.size || lq ? `xQ${[...seen].sort().join('+')}${lq ? `/lm:${lq.layout.format}` : ''}` : '';
  }

  /** The step path the autotuner's caches hold for this decoder (true: the whole-step kernel), or null when they hold none. */
  private cachedStepPath(): boolean | null {
    const key = this.stepPathKey();
    if (!key) return null;
    const r = tuneSync(STEP_PATH, key, STEP_PATHS, () => 0, { mode: 'cached' });
    if (r.source === 'default') return null;
    debugStepPath(r);
    return r.config.step === 'fused';
  }

  /** Whether the lm_head is the op's and the device's whole-step kernel takes this decoder's batch (the layers are checked per step). */
  private fusedTakes(): boolean {
    const lm = this.model.lm_head as unknown;
    return lm instanceof nbx.nn.Linear && !lm.bias && this.batch <= decodeStepMaxBatch(this.model.model.embed_tokens.weight);
  }

  /** The step as nbx.llm.fused_decode_step where the model's layers and lm_head are that op's and the device's kernel takes the batch, else null. */
  private fusedStep(): [Tensor, Tensor] | null {
    const m = this.model, lm = m.lm_head as unknown;
    if (!(lm instanceof nbx.nn.Linear) || !this.fusedTakes()) return null;
    return m.model.fusedDecodeStep({
      ids: this.ids, positionIds: this.positions, cacheIndex: this.writeIndex, notPadding: this.notPadding, capacity: this.capacity,
      lmHead: lm.quantized_weight ?? lm.weight, caches: (l) => this.cache.buffers(l),
    });
  }

  private dropGraph(): void {
    if (!this.replayable) return;
    this.out?.logits.dispose(); this.out?.next?.dispose(); this.out = null;
    this.graph?.reset(); this.graph = null;
    this.webgpuGraph?.reset(); this.webgpuGraph = null;
    this.advanceGraph?.reset(); this.advanceGraph = null;
    this.cudaAdvance?.reset(); this.cudaAdvance = null;
    this.recording = null;
    this.graphAdvances = false; // advancedLast stays: the inputs on the device are as the last replay left them
    this.graphPublishes = false; this.lastPublished = null;
  }

  /** Ends the generation that began it: the decoder may serve the next one (an ephemeral one is freed). */
  release(): void {
    this.inUse = false;
    if (this.ephemeral) this.dispose();
  }

  /** Index checks of the last replay (an out-of-range token id raises here). */
  checkErrors(): void { this.graph?.checkErrors(); this.webgpuGraph?.checkErrors(); }

  /**
   * The ids of a step's `next` (its last step's, when called right after it) and its deferred checks, both
   * copies queued at the call, so a step queued afterwards (stepFromDevice) runs while they come back.
   */
  async readNext(next: Tensor): Promise<number[]> {
    if (this.lastPublished !== null && next === this.out?.next) { // the last replay's: written to host memory by its graph
      const g = this.graph!;
      return this.publisher!.read(this.lastPublished, (w) => g.errorOf(w));
    }
    const ids = next.dataStorage();
    const errors = this.graph ? this.graph.checkErrorsQueued() : null;
    const got = await ids;
    if (errors) await errors; else this.checkErrors();
    return Array.from(got as BigInt64Array, Number);
  }

  /** Graph nodes and replays, for benchmarks and tests. */
  stats(): { captured: boolean; nodes: number; replays: number; fallbackReason: string | null; step: 'fused' | 'ops' } {
    const s = this.graph?.stats() ?? this.webgpuGraph?.stats() ?? this.recording?.stats();
    return { captured: this.replayable, nodes: s?.nodes ?? 0, replays: s?.replays ?? 0, fallbackReason: this.fallbackReason, step: this.tookFused ? 'fused' : 'ops' };
  }

  get isDisposed(): boolean { return this.disposed; }

  dispose(): void {
    if (this.disposed) return;
    this.disposed = true;
    if (this.replayable) this.dropGraph();
    else { this.out?.logits.dispose(); this.out?.next?.dispose(); this.out = null; }
    for (const t of [this.ids, this.positions, this.writeIndex, this.state, this.notPadding, this.cacheIndex]) t.dispose();
    this.publisher?.dispose(); this.publisher = null;
    this.sampling?.dispose();
    this.cache.dispose();
  }
}

/**
 * The capacity bucket for a generation of `maxLength` positions on `device`. A replayed step attends over
 * the whole capacity; a CUDA graph is costly to capture, so its buckets are wide, while a CPU recording
 * costs one step, so its buckets stay close to the length (attention over unused slots is CPU time).
 */
export function capacityFor(maxLength: number, device?: Device): number {
  const bucket = device?.type === 'cpu' ? CPU_CAPACITY_BUCKET : CAPACITY_BUCKET;
  return Math.ceil(maxLength / bucket) * bucket;
}
export const CPU_CAPACITY_BUCKET = 32;

/**
 * How decode steps run where nbx.llm.fused_decode_step can take them: NBX_DECODE_STEP=fused (or on,
 * phases: the whole-step kernel, one launch or a launch per phase), off (the op-by-op step), or auto (unset:
 * on CUDA, both captured and timed at the first capture, the faster kept; elsewhere, and with
 * NBX_AUTOTUNE=off, the op-by-op step).
 */
export function decodeStepMode(env: NodeJS.ProcessEnv = process.env): 'fused' | 'off' | 'auto' {
  const v = env.NBX_DECODE_STEP?.trim().toLowerCase();
  if (v === undefined || v === '' || v === 'auto') return 'auto';
  if (v === 'fused' || v === 'phases' || v === 'on' || v === '1') return 'fused';
  if (v === 'off' || v === '0') return 'off';
  throw new ValueError('StaticDecoder', `NBX_DECODE_STEP=${JSON.stringify(env.NBX_DECODE_STEP)} is not one of auto, fused, phases, off`);
}

/** The autotuner's record of the step path: { step: 'ops' | 'fused' } per device and model shape. */
const STEP_PATH = { name: 'decode.step_path', defaultConfig: { step: 'ops' } };
const STEP_PATHS = [{ step: 'ops' }, { step: 'fused' }];

/** NBX_DEBUG=1: which step path a decoder took, from where, and the timings behind it. */
function debugStepPath(r: TuneResult): void {
  if (!process.env.NBX_DEBUG) return;
  const t = [...(r.entry?.tried ?? []).map((c) => `${c.config.step} ${c.timeMs.toFixed(4)} ms`),
    ...(r.entry?.failures ?? []).map((f) => `${f.config.step} failed: ${f.error}`)].join(', ');
  process.stderr.write(`nbx: decode steps take the ${r.config.step === 'fused' ? 'whole-step kernel' : 'op-by-op graph'} (${r.source}${t ? `: ${t}` : ''})\n`);
}

/**
 * Whether decode steps on `device` are replayed: CUDA graphs (NBX_CUDA_GRAPHS=0 turns them off), CPU
 * step recordings (NBX_CPU_REPLAY=0) and WebGPU step graphs (NBX_WEBGPU_REPLAY=0).
 */
export function replayEnabled(device: Device): boolean {
  if (device.type === 'cuda') return process.env.NBX_CUDA_GRAPHS !== '0';
  if (device.type === 'cpu') return process.env.NBX_CPU_REPLAY !== '0';
  if (device.type === 'webgpu') return process.env.NBX_WEBGPU_REPLAY !== '0';
  return false;
}
