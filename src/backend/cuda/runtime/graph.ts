// CUDA graphs, as torch.cuda.CUDAGraph: record a sequence of nbx operations once through the driver's
// stream capture, then replay it with one cuGraphLaunch. A decode step is hundreds of small kernels
// whose host cost (JS, FFI, launch) exceeds their GPU time; a replay costs one launch.
//
// As in PyTorch:
// * Work is recorded, not run, between capture_begin() and capture_end(); a replay reruns the same
//   kernels on the same addresses. Inputs change between replays by writing into the tensors the
//   capture read (copy_ into "static inputs"); outputs are the tensors the capture produced, rewritten
//   by every replay.
// * Memory allocated during the capture comes from the graph's private pool (a key of its own in the
//   caching allocator): intermediates freed during the capture are reused within it (the stream
//   orders them), and no block of the pool goes to other work or back to the device while the graph
//   exists, since every replay writes into it. reset() ends that.
// * Run the captured function once before capturing (a warm-up): kernels compile, autotuning measures
//   and the launch batch builds its module outside the capture.
// Work that cannot be recorded (a read of a device value on the host, a host-to-device copy, a
// synchronization, event timing) raises GraphCaptureError during the capture (driver.ts refuses it),
// and the capture is abandoned. Index checks that eager kernels answer with a synchronous readback
// are deferred instead: the kernels record failures in the graph's error word and checkErrors() reads
// it after a replay.

import { GraphCaptureError, IndexError, ValueError } from '../../../errors.js';
import type { DTypeName } from '../../../dtype/dtypes.js';
import type { StorageArray } from '../../../dtype/storage.js';
import type { CachingAllocator } from '../../../memory/caching_allocator.js';
import type { CudaBuffer } from './device.js';
import type { CudaContext, Stream } from './driver.js';

/** What a graph needs of the CUDA backend (CudaBackend has it; named here so no import runs back into backend.ts). */
export interface GraphHost {
  readonly ctx: CudaContext;
  readonly stream: Stream;
  readonly allocator: CachingAllocator;
  capture: CaptureState | null;
  poolKey: number;
  alloc(dtype: DTypeName, numel: number): CudaBuffer;
  free(buf: unknown): void;
  downloadSync(buf: unknown, dtype: DTypeName, offset: number, numel: number): StorageArray;
  /** Queues the copy when called; resolves once it has arrived (work queued later does not delay it). */
  download(buf: unknown, dtype: DTypeName, offset: number, numel: number): Promise<StorageArray>;
}

/** The capture in progress: what the backend and kernels consult while recording. */
export class CaptureState {
  /** Index checks recorded by kernels into errWord, answered after a replay (see checkErrors()). */
  readonly checks: string[] = [];
  constructor(readonly poolKey: number, readonly errBuf: CudaBuffer) {}
  /** A kernel's index check: raised by checkErrors() after a replay if its error word is set. */
  defer(op: string): void { if (!this.checks.includes(op)) this.checks.push(op); }
}

let nextPool = 1;

/**
 * A pool key several graphs can share (torch.cuda.graph_pool_handle()): graphs replayed one at a time on
 * one stream, whose outputs are read before the next replay (the serving engine's step graphs, one per
 * shape), reuse each other's intermediates' memory instead of holding a pool each. The pool stays
 * private while any graph holding it exists.
 */
export function graphPoolHandle(): number { return -(nextPool++); }
/** Graphs holding each pool (a shared pool returns to the allocator when the last one lets go). */
const poolHolders = new Map<number, number>();
function holdPool(a: CachingAllocator, pool: number): void {
  poolHolders.set(pool, (poolHolders.get(pool) ?? 0) + 1);
  a.retainPrivatePool(pool);
}
function dropPool(a: CachingAllocator, pool: number): void {
  const n = (poolHolders.get(pool) ?? 1) - 1;
  if (n > 0) { poolHolders.set(pool, n); return; }
  poolHolders.delete(pool);
  a.releasePrivatePool(pool);
}

export class CUDAGraph {
  private graph: bigint | null = null;
  private exec: bigint | null = null;
  private state: CaptureState | null = null;
  private capturing = false;
  private nodes = 0;
  private replays = 0;
  /** The private pool's key in the caching allocator (negative: never a stream's). */
  readonly pool: number;

  /** `pool`: a graphPoolHandle() shared with other graphs (default: a pool of its own). */
  constructor(private readonly be: GraphHost, pool?: number) { this.pool = pool ?? -(nextPool++); }

  /** Starts recording the backend's stream (torch.cuda.CUDAGraph.capture_begin). */
  capture_begin(): void {
    const be = this.be;
    if (this.graph !== null || this.capturing) throw new ValueError('cuda.CUDAGraph.capture_begin', 'this graph already holds a capture; reset() it first');
    if (be.capture !== null) throw new ValueError('cuda.CUDAGraph.capture_begin', 'another capture is in progress on this device');
    be.ctx.flushPending();
    holdPool(be.allocator, this.pool);
    be.ctx.beginCapture(be.stream);
    this.capturing = true;
    be.poolKey = this.pool;
    try {
      // the error word lives in the pool; zeroing it is the graph's first node, so every replay starts clean
      const errBuf = be.alloc('int64', 1);
      be.ctx.memsetD8(errBuf.ptr, 0, 8, be.stream);
      this.state = new CaptureState(this.pool, errBuf);
      be.capture = this.state;
    } catch (e) {
      this.abandon();
      throw e;
    }
  }

  /** Ends the recording and instantiates the graph (torch.cuda.CUDAGraph.capture_end). */
  capture_end(): void {
    const be = this.be;
    if (!this.capturing) throw new ValueError('cuda.CUDAGraph.capture_end', 'no capture in progress (call capture_begin() first)');
    be.ctx.flushPending(); // queued batch commands belong to the graph
    be.capture = null;
    be.poolKey = 0;
    this.capturing = false;
    let graph: bigint;
    try {
      graph = be.ctx.endCapture(be.stream);
    } catch (e) {
      dropPool(be.allocator, this.pool);
      throw new GraphCaptureError('cuda.CUDAGraph.capture_end', `the capture was invalidated: ${e instanceof Error ? e.message : String(e)}`);
    }
    this.graph = graph;
    this.nodes = be.ctx.graphNodeCount(graph);
    this.exec = be.ctx.instantiateGraph(graph);
  }

  /** Ends a failed capture: the stream leaves capture mode, the partial graph and the pool are dropped. */
  abandon(): void {
    const be = this.be;
    if (!this.capturing) return;
    this.capturing = false;
    be.capture = null;
    be.poolKey = 0;
    try { be.ctx.flushPending(); } catch { /* queued commands go into the abandoned graph, or fail with it */ }
    try {
      const g = be.ctx.endCapture(be.stream);
      if (g !== 0n) be.ctx.destroyGraph(g, null);
    } catch { /* an invalidated capture ends with an error and no graph */ }
    this.state = null;
    dropPool(be.allocator, this.pool);
  }

  /** Enqueues the recorded work on the stream (torch.cuda.CUDAGraph.replay); returns at once. */
  replay(): void {
    if (this.exec === null) throw new ValueError('cuda.CUDAGraph.replay', this.capturing ? 'the capture has not ended (call capture_end())' : 'nothing was captured');
    this.be.ctx.launchGraph(this.exec, this.be.stream);
    this.replays++;
  }

  /**
   * Waits for the last replay and raises the deferred index checks that failed in it (an embedding id or
   * a gather index out of range): IndexError naming the operations whose checks were recorded.
   */
  checkErrors(): void {
    const st = this.state;
    if (st === null || st.checks.length === 0 || this.replays === 0) return;
    const e = this.errorOf((this.be.downloadSync(st.errBuf, 'int64', 0, 1) as BigInt64Array)[0]!);
    if (e) throw e;
  }

  /** The error a replay's error word (read by the caller) stands for, or null. */
  errorOf(word: bigint): Error | null {
    const st = this.state;
    if (word === 0n || st === null) return null;
    return new IndexError(st.checks.join(' / '), `an index was out of range during the replay of a CUDA graph (checked by ${st.checks.join(', ')}); that replay's outputs are not valid`);
  }

  /**
   * checkErrors() without blocking: the error word's copy is queued now (behind the last replay, before
   * anything queued later), and the promise raises as checkErrors() once it has arrived.
   */
  checkErrorsQueued(): Promise<void> {
    const st = this.state;
    if (st === null || st.checks.length === 0 || this.replays === 0) return Promise.resolve();
    const word = this.be.download(st.errBuf, 'int64', 0, 1);
    return word.then((w) => {
      const e = this.errorOf((w as BigInt64Array)[0]!);
      if (e) throw e;
    });
  }

  /**
   * Milliseconds per replay of `n` replays queued back to back (events around them; waits for them), for a
   * choice between graphs of the same work. Replays change what the graph writes, as replay() does.
   */
  timeReplays(n: number): number {
    const ctx = this.be.ctx, start = ctx.createEvent({ timing: true }), end = ctx.createEvent({ timing: true });
    try {
      start.record(this.be.stream);
      for (let i = 0; i < n; i++) this.replay();
      end.record(this.be.stream);
      end.synchronize();
      return end.elapsedSince(start) / n;
    } finally { start.destroy(); end.destroy(); }
  }

  /** Nodes of the captured graph (kernels, copies, memsets), and replays so far. */
  stats(): { nodes: number; replays: number; deferredChecks: number } {
    return { nodes: this.nodes, replays: this.replays, deferredChecks: this.state?.checks.length ?? 0 };
  }

  /** Frees the graph; the pool's free memory returns to the device (torch.cuda.CUDAGraph.reset). */
  reset(): void {
    if (this.capturing) this.abandon();
    if (this.graph !== null) {
      this.be.ctx.destroyGraph(this.graph, this.exec);
      this.graph = null; this.exec = null;
      if (this.state) this.be.free(this.state.errBuf);
      this.state = null;
      dropPool(this.be.allocator, this.pool);
    }
    this.nodes = 0; this.replays = 0;
  }
}

/**
 * Records `fn` into `g` (torch.cuda.graph as a context manager): capture_begin, fn, capture_end. If fn
 * throws, the capture is abandoned and the error propagates. Returns what fn returned (its tensors
 * live in the graph's pool and are rewritten by every replay).
 */
export function captureGraph<T>(g: CUDAGraph, fn: () => T): T {
  g.capture_begin();
  let out: T;
  try {
    out = fn();
    if (out instanceof Promise) throw new GraphCaptureError('cuda.graph', 'the captured function returned a Promise: a capture records synchronous work only');
  } catch (e) {
    g.abandon();
    throw e;
  }
  g.capture_end();
  return out;
}
