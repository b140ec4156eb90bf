/// <reference types="@webgpu/types" />
// The WebGPU backend's core: buffers from a size-bucketed pool, an ordered list of recorded operations
// (dispatches, copies, clears, reads, host-staged kernels) that is encoded into one command encoder and
// submitted in batches, pipelines cached by program key and by source, kernel parameters in one uniform
// arena per batch (bound at a dynamic offset, so bind groups are cached too). Synchronous readback
// does not exist on WebGPU: `downloadSync` is left undefined and the core says to `await t.data()`.
//
// Why a recorded list rather than encoding on the spot: the device arrives asynchronously (adapters are
// requested with promises), yet tensors are created synchronously, so work recorded before the device
// exists simply waits for it; and host-staged kernels need the GPU's results before they run, so the
// list is drained in order, pausing at a staged kernel until its inputs are mapped back. Nothing is
// submitted per operation: a batch is submitted when it is large, or when something is read back.
//
// Ordering invariants:
// - commands execute in recording order, so a freed buffer can back the next kernel output at once;
//   uploads go through queue.writeBuffer, which overtakes unsubmitted commands, so they take only
//   buffers whose last use has been submitted (see BufferPool);
// - reads and staged kernels are entries of the same list as dispatches, so they observe exactly the
//   dispatches recorded before them, and a staged kernel's write-back lands before later dispatches.

import { DTYPES, type DTypeName, type StorageArray } from '../../../dtype/dtypes.js';
import type { Expr } from '../../../ir/expr.js';
import { DeviceError, DeviceFaultError, DeviceLimitError, GraphCaptureError, NbxError } from '../../../errors.js';
import { formatBytes } from '../../../memory/caching_allocator.js';
import { budgetFromEnv, GcPressure } from '../../../memory/gc_pressure.js';
import type { Backend, StridedRef } from '../../backend.js';
import { checkWgslDType, WGSL_DTYPES } from '../../../ir/render_wgsl.js';
import { OPS } from '../../../op_table.js';
import { BufferPool, sizeClass, type PoolStats } from './buffer_pool.js';
import { adapterIdentity, chooseAdapter, dawnToggles, env, MAP_READ, notice, profileFor, requiredLimits, STAGE_COMPUTE, subgroupMatrixConfigs, USAGE, WANTED_FEATURES } from './gpu.js';
import { quietNative } from '../../native_stderr.js';
import { runElementwise } from './elementwise.js';
import { tuneKeyOf, WebGPUTuning } from '../tuning/spaces.js';
import { WGBuffer, type Program, type WebGPUDevice, type WebGPUInfo } from './device.js';
import type { GraphBackend, WebGPUGraph } from './graph.js';
export { WGBuffer, type Program, type WebGPUDevice, type WebGPUInfo } from './device.js';

interface Pipeline { pipeline: GPUComputePipeline; layout: GPUBindGroupLayout; layoutKey: string; bindBytes: number }

type Op =
  | { k: 'dispatch'; prog: Program; bufs: WGBuffer[]; u: Uint32Array; x: number; y: number; z: number }
  | { k: 'write'; buf: WGBuffer; data: Uint8Array }
  | { k: 'clear'; buf: WGBuffer }
  | { k: 'copy'; src: WGBuffer; dst: WGBuffer; bytes: number; srcOffset?: number; dstOffset?: number }
  | { k: 'read'; buf: WGBuffer; start: number; bytes: number; done: (r: Uint8Array | Error) => void }
  | { k: 'host'; name: string; bufs: WGBuffer[]; run: (host: Map<WGBuffer, ArrayBuffer>) => void; poisons?: WGBuffer[]; check?: boolean }
  | { k: 'graph'; g: WebGPUGraph }
  | { k: 'stamp'; set: GPUQuerySet; index: number; resolve?: GPUBuffer; read?: GPUBuffer };

interface ReadJob { rb: GPUBuffer; rbSize: number; bytes: number; done: (r: Uint8Array | Error) => void }

/** Dispatches per submitted batch, and bytes of the uniform arena (a 256-byte block per dispatch). */
const BATCH = 256;
/** Before the device exists its limits are unknown; a larger request is sized later (and refused then, see place). */
const PRE_DEVICE_MAX_BYTES = 2 ** 40;
const ARENA_BYTES = 256 * 1024;
const BLOCK = 256;

const roundUp = (v: number, to: number): number => Math.ceil(v / to) * to;

/** A dispatch binding this many bytes is submitted at once (>= ~60 µs of GPU time at 4 TB/s). */
const HEAVY_BYTES = 256 * 2 ** 20;
function bytesBound(bufs: WGBuffer[]): number {
  let b = 0;
  for (const x of bufs) b += x.bytes;
  return b;
}

export class WebGPUBackend implements Backend, WebGPUDevice, GraphBackend {
  readonly type = 'webgpu' as const;
  /** Resolves when the device is up; work recorded before then waits for it. */
  readonly ready: Promise<void>;
  isReady = false;
  device!: GPUDevice;
  /** The GPU object the adapter came from: Dawn destroys its instance when this is collected. */
  private gpu!: GPU;
  private queue!: GPUQueue;
  pool!: BufferPool;
  info!: WebGPUInfo;
  /** Launch configurations (autotuned, cached per adapter); set when the device is up. */
  tuning: WebGPUTuning | null = null;

  private ops: Op[] = [];
  private head = 0;
  private pumping: Promise<void> | null = null;
  private enc: GPUCommandEncoder | null = null;
  private pass: GPUComputePassEncoder | null = null;
  /** The pipeline last set on `pass` (a chain of one op sets it once per pass). */
  private passPipeline: GPUComputePipeline | null = null;
  private arena!: GPUBuffer;
  private readonly arenaData = new Uint32Array(ARENA_BYTES / 4);
  private arenaUsed = 0;
  private batchDispatches = 0;
  private reads: ReadJob[] = [];
  /** Commands recorded, encoded, and encoded-and-submitted so far (stamps for buffer reuse). */
  private recorded = 0;
  private encoded = 0;
  private submitted = 0;
  private readonly unplaced = new Set<WGBuffer>();
  /** Pipelines by program key (no source generation on a hit), and by WGSL source (programs that render alike share one). */
  private readonly pipelines = new Map<string, Pipeline>();
  private readonly bySource = new Map<string, Pipeline>();
  private readonly layouts = new Map<string, GPUBindGroupLayout>();
  private readonly bindGroups = new Map<string, GPUBindGroup>();
  private readonly bufferIds = new WeakMap<GPUBuffer, number>();
  private lastBufferId = 0;
  private readonly readPool = new Map<number, GPUBuffer[]>();
  private readonly scopes = new Set<Promise<unknown>>();
  private fault: Error | null = null;
  private initError: Error | null = null;
  /** Tensors nobody disposed are freed by their finalizers only after a collection: past NBX_WEBGPU_GC_MB (default 1 GiB) held, collect. */
  private readonly pressure = new GcPressure(budgetFromEnv('NBX_WEBGPU_GC_MB', 2 ** 30), () => this.pool.allocatedBytes);
  /** Async checks run once the device exists, before anything is encoded (kernels register them). */
  readonly initHooks: ((be: WebGPUBackend) => Promise<void>)[] = [];
  /** Counters for tests and benchmarks. */
  readonly counters = { dispatches: 0, submits: 0, readbacks: 0, hostStaged: 0, pipelines: 0, uploads: 0, replays: 0 };
  /** The graph being captured (runtime/graph.ts): it notes what is recorded and owns what is allocated. */
  private capture: WebGPUGraph | null = null;

  constructor() {
    this.ready = this.init().catch((e: Error) => {
      this.initError = new DeviceError('webgpu', `no WebGPU device: ${e.message}`);
      throw this.initError;
    });
    this.ready.catch(() => {}); // reported to whoever waits for results
  }

  private async init(): Promise<void> {
    const choice = await chooseAdapter();
    const { adapter } = choice;
    this.gpu = choice.gpu;
    const features = WANTED_FEATURES.filter((f) => adapter.features.has(f)) as GPUFeatureName[];
    const limits = requiredLimits(adapter);
    // an experimental feature the adapter lists may still be refused (Dawn guards some behind toggles)
    this.device = await quietNative(() => adapter.requestDevice({ requiredFeatures: features, requiredLimits: limits })
      .catch(() => adapter.requestDevice({ requiredFeatures: features.filter((f) => f === 'shader-f16'), requiredLimits: limits })));
    this.queue = this.device.queue;
    this.device.addEventListener('uncapturederror', (ev) => this.setFault(new DeviceFaultError('webgpu', (ev as GPUUncapturedErrorEvent).error.message)));
    void this.device.lost.then((info) => { if (info.reason !== 'destroyed') this.setFault(new DeviceFaultError('webgpu', `device lost: ${info.message}`)); });
    const prof = await profileFor(adapter);
    const maxWg = Math.min(limits.maxComputeInvocationsPerWorkgroup ?? 256, limits.maxComputeWorkgroupSizeX ?? 256);
    const pow2 = (v: number): number => 2 ** Math.floor(Math.log2(Math.max(1, v)));
    this.info = {
      adapter: choice.description, via: choice.via, compatibility: choice.compatibility,
      profile: prof.family ? `${prof.family} (${prof.reason})` : `none, generic defaults (${prof.reason})`,
      features: [...this.device.features].sort(), limits,
      wgElementwise: pow2(Math.min(prof.elementwiseThreads ?? 256, maxWg)),
      wgReduce: pow2(Math.min(prof.reductionThreads ?? 256, maxWg)),
      identity: adapterIdentity(adapter), adapterFeatures: [...adapter.features].sort(), toggles: choice.via === 'browser' ? [] : dawnToggles(),
      subgroupMatrixConfigs: subgroupMatrixConfigs(adapter),
      tuneKey: tuneKeyOf(adapter.info),
    };
    const maxBuf = Math.min(limits.maxBufferSize ?? 2 ** 28, limits.maxStorageBufferBindingSize ?? 2 ** 27);
    this.pool = new BufferPool((size) => this.device.createBuffer({ size, usage: USAGE.STORAGE | USAGE.COPY_SRC | USAGE.COPY_DST }), maxBuf);
    this.arena = this.device.createBuffer({ size: ARENA_BYTES, usage: USAGE.UNIFORM | USAGE.COPY_DST });
    this.tuning = new WebGPUTuning(this);
    // kernels' start-up checks (e.g. compiling the subgroup-matrix GEMM), before any work is encoded
    for (const hook of this.initHooks) await hook(this).catch((e: Error) => notice(`nbx webgpu: start-up check failed: ${e.message}`));
    this.isReady = true;
    // Early buffers are placed in allocation order, each buffer freed before an allocation going back to
    // the pool first: a long chain recorded before the device existed reuses a few buffers instead of
    // holding one per intermediate (commands run in recorded order, so the reuse is in order too).
    const early = [...this.unplaced];
    const freed = early.filter((b) => b.freedAt >= 0).sort((a, b) => a.freedAt - b.freedAt);
    let next = 0;
    for (const b of early) {
      for (; next < freed.length && freed[next]!.freedAt <= b.allocAt; next++) this.pool.give(freed[next]!.gpu!, freed[next]!.size, freed[next]!.freedAt);
      this.place(b, b.clean);
    }
    for (; next < freed.length; next++) this.pool.give(freed[next]!.gpu!, freed[next]!.size, freed[next]!.freedAt);
    this.unplaced.clear();
  }

  /** The largest tensor (bytes) a kernel can bind. */
  get maxBinding(): number { return Math.min(this.info.limits.maxStorageBufferBindingSize ?? 2 ** 27, this.info.limits.maxBufferSize ?? 2 ** 28); }

  private place(b: WGBuffer, clean = false): void {
    if (b.bytes > this.maxBinding) {
      // allocated before the device (and its limits) existed: the tensor holds the error, reads of it raise
      // it, and a minimal buffer stands in, so kernels recorded on it stay valid
      b.fault = this.tooLarge(b.bytes);
      b.size = this.pool.classOf(4);
      b.gpu = this.pool.take(b.size, clean ? this.submitted : undefined);
      return;
    }
    const g = this.capture;
    if (g) {
      // the graph's own buffers: a spare of the capture first (reused in order), and none shared afterwards
      const spare = clean ? undefined : g.spare.get(b.size)?.pop();
      b.gpu = spare ?? this.pool.take(b.size, clean ? this.submitted : undefined);
      g.owned.set(b.gpu, b.size);
      return;
    }
    b.gpu = this.pool.take(b.size, clean ? this.submitted : undefined);
  }

  private tooLarge(bytes: number): DeviceLimitError {
    const limits = this.info.limits;
    return new DeviceLimitError(callerOp(), `a tensor of ${formatBytes(bytes)} (${bytes} bytes) exceeds this WebGPU device's largest buffer: ` +
      `maxStorageBufferBindingSize ${limits.maxStorageBufferBindingSize ?? 'unknown'}, maxBufferSize ${limits.maxBufferSize ?? 'unknown'} bytes (WebGPU binds whole buffers)`);
  }

  // ---- memory ----------------------------------------------------------------------------------

  alloc(dtype: DTypeName, numel: number, zero = false): WGBuffer {
    if (!WGSL_DTYPES.has(dtype)) checkWgslDType(callerOp(), dtype);
    const bytes = numel * DTYPES[dtype].itemsize;
    return this.allocBytes(bytes, zero);
  }

  allocBytes(bytes: number, zero = false, clean = false): WGBuffer {
    if (this.isReady && bytes > this.maxBinding) throw this.tooLarge(bytes);
    if (this.isReady) this.pressure.note(bytes);
    const b = new WGBuffer(bytes, this.isReady ? this.pool.classOf(bytes) : bytes > PRE_DEVICE_MAX_BYTES ? 0 : sizeClass(bytes));
    if (this.isReady) this.place(b, clean); else { b.allocAt = this.recorded; b.clean = clean; this.unplaced.add(b); }
    if (zero) this.record({ k: 'clear', buf: b });
    return b;
  }

  free(buf: unknown): void {
    // Back to the pool now, stamped: commands recorded earlier still use it, and run first.
    const b = buf as WGBuffer;
    const g = this.capture;
    if (g && b.gpu) {
      if (g.owned.has(b.gpu)) {
        if (g.isCheck(b.gpu)) { g.held.set(b.gpu, b.size); return; }
        let list = g.spare.get(b.size);
        if (!list) { list = []; g.spare.set(b.size, list); }
        list.push(b.gpu);
        return;
      }
      g.freedOutside.add(b.gpu);
    }
    if (b.gpu) this.pool.give(b.gpu, b.size, this.recorded);
    else if (b.freedAt < 0) b.freedAt = this.recorded; // placed (and given back) when the device arrives
  }

  upload(dtype: DTypeName, data: StorageArray): WGBuffer {
    if (!WGSL_DTYPES.has(dtype)) checkWgslDType(callerOp(), dtype);
    const b = this.allocBytes(data.byteLength, false, true);
    this.counters.uploads++;
    if (data.byteLength === 0) return b;
    let bytes = new Uint8Array(data.buffer, data.byteOffset, data.byteLength);
    if (bytes.byteLength % 4 !== 0) { const p = new Uint8Array(roundUp(bytes.byteLength, 4)); p.set(bytes); bytes = p; }
    // A clean buffer is referenced by no unsubmitted command, so writing it now is in order.
    if (!this.isReady) this.record({ k: 'write', buf: b, data: bytes.buffer === data.buffer ? bytes.slice() : bytes });
    else if (!(bytes.buffer instanceof ArrayBuffer)) {
      // Dawn takes no SharedArrayBuffer (large CPU tensors live in one): through a bounce buffer
      const chunk = new Uint8Array(Math.min(bytes.byteLength, 1 << 24));
      for (let o = 0; o < bytes.byteLength; o += chunk.byteLength) {
        const part = bytes.subarray(o, o + chunk.byteLength);
        chunk.set(part);
        this.queue.writeBuffer(b.gpu!, o, chunk, 0, part.byteLength);
      }
    } else this.queue.writeBuffer(b.gpu!, 0, bytes as Uint8Array<ArrayBuffer>);
    return b;
  }

  async download(buf: unknown, dtype: DTypeName, offset: number, numel: number): Promise<StorageArray> {
    const isz = DTYPES[dtype].itemsize;
    const start = offset * isz, end = start + numel * isz;
    const bytes = await this.readBytes(buf as WGBuffer, start, end - start);
    const out = new Uint8Array(end - start);
    out.set(bytes.subarray(start % 4, start % 4 + (end - start)));
    const ctor = { u8: Uint8Array, i8: Int8Array, i16: Int16Array, i32: Int32Array, i64: BigInt64Array, u16: Uint16Array, f32: Float32Array, f64: Float64Array }[DTYPES[dtype].storage];
    return new ctor(out.buffer, 0, (end - start) / ctor.BYTES_PER_ELEMENT) as StorageArray;
  }

  /** Bytes [start, start+bytes) of a buffer, 4-aligned around the range (the caller slices), after all recorded work. */
  readBytes(buf: WGBuffer, start: number, bytes: number): Promise<Uint8Array> {
    if (this.capture) throw new GraphCaptureError('webgpu.graph', 'a read back to the host cannot be recorded in a graph (it would wait on the step it is part of)');
    this.counters.readbacks++;
    const a0 = Math.floor(start / 4) * 4, a1 = roundUp(start + bytes, 4);
    const p = new Promise<Uint8Array>((resolve, reject) => {
      this.record({ k: 'read', buf, start: a0, bytes: a1 - a0, done: (r) => (r instanceof Error ? reject(r) : resolve(r)) });
    });
    this.flushInBackground();
    return p;
  }

  /** Waits for everything recorded so far to finish on the GPU, leaving any fault for the user's next read. */
  async idle(): Promise<void> {
    await this.flush();
    await this.queue.onSubmittedWorkDone();
  }

  async synchronize(): Promise<void> {
    await this.tuning?.settled(); // a queued autotune sweep is work recorded earlier too
    await this.flush();
    await this.queue.onSubmittedWorkDone();
    await this.settleScopes();
    this.throwFault();
  }

  // ---- recording -------------------------------------------------------------------------------

  record(op: Op): void {
    const g = this.capture;
    if (g) {
      if (op.k === 'dispatch' || op.k === 'clear' || op.k === 'copy') g.note(op);
      else if (op.k === 'host') {
        if (!op.check || op.bufs.length !== 1) throw new GraphCaptureError(op.name, `'${op.name}' runs on the host (host staging) and cannot be recorded in a graph`);
        g.noteCheck({ name: op.name, buf: op.bufs[0]!, run: op.run });
      } else if (op.k !== 'write') throw new GraphCaptureError('webgpu.graph', `a '${op.k}' command cannot be recorded in a graph`);
    }
    this.ops.push(op);
    this.recorded++;
    // Long chains without readbacks: start the GPU on the first batches while the caller records more;
    // and a dispatch over large buffers at once (its GPU time hides the submit), so the GPU does not
    // wait for the host to record the next ones (ten 1 GiB sums in a row waited ~10 host calls).
    const heavy = op.k === 'dispatch' && bytesBound(op.bufs) >= HEAVY_BYTES;
    if ((heavy || this.ops.length - this.head >= BATCH) && this.isReady && !this.pumping && this.fault === null) {
      if (this.drain()) this.submit();
      else this.flushInBackground();
    }
  }

  dispatch(prog: Program, bufs: WGBuffer[], u: Uint32Array, threads: number, wg: number): void {
    const groups = Math.ceil(threads / wg);
    if (groups === 0) return;
    const maxDim = this.isReady ? this.info.limits.maxComputeWorkgroupsPerDimension ?? 65535 : 65535;
    const x = Math.min(groups, maxDim), y = Math.ceil(groups / x);
    if (y > maxDim) throw new DeviceLimitError('webgpu', `${threads} threads exceed the dispatch limits (${maxDim}^2 workgroups of ${wg})`);
    this.record({ k: 'dispatch', prog, bufs, u, x, y, z: 1 });
  }

  /** A dispatch with an explicit workgroup grid. */
  dispatchGroups(prog: Program, bufs: WGBuffer[], u: Uint32Array, x: number, y: number, z: number): void {
    if (x * y * z > 0) this.record({ k: 'dispatch', prog, bufs, u, x, y, z });
  }

  /**
   * Runs `run` on the host once every recorded command before it has finished, with the buffers' bytes.
   * An error `run` throws marks `poisons` (the buffers the checked kernel wrote), so it surfaces on reads
   * of them and of whatever is computed from them; without `poisons` it is a device-wide fault, raised at
   * the next read of any tensor.
   */
  host(name: string, bufs: WGBuffer[], run: (host: Map<WGBuffer, ArrayBuffer>) => void, poisons?: WGBuffer[]): void {
    this.counters.hostStaged++;
    this.record({ k: 'host', name, bufs, run, poisons });
  }

  /**
   * A kernel's error check: `run` raises from the error record `err` (a 16-byte buffer the kernel wrote),
   * at this point of the command list. Like host(); a graph capture defers it to the replays' error read
   * instead of refusing it (runtime/graph.ts).
   */
  check(name: string, err: WGBuffer, run: (host: Map<WGBuffer, ArrayBuffer>) => void, poisons?: WGBuffer[]): void {
    this.counters.hostStaged++;
    this.record({ k: 'host', name, bufs: [err], run, poisons, check: true });
  }

  /** Writes `data` into `buf` at `byteOffset` (4-aligned) in order with the recorded commands: an upload to a fresh buffer, then a copy. */
  writeBytes(buf: unknown, byteOffset: number, data: Uint8Array): void {
    if (this.capture) throw new GraphCaptureError('webgpu.graph', 'a write from the host cannot be recorded in a graph: write the inputs before replay()');
    const b = buf as WGBuffer;
    if (byteOffset % 4 || data.byteLength % 4) throw new DeviceLimitError('webgpu', `writeBytes takes 4-aligned ranges, got offset ${byteOffset}, ${data.byteLength} bytes`);
    const staging = this.upload('uint8', data);
    this.record({ k: 'copy', src: staging, dst: b, bytes: data.byteLength, dstOffset: byteOffset });
    this.free(staging);
  }

  // ---- graphs (runtime/graph.ts) --------------------------------------------------------------------

  setCapture(g: WebGPUGraph | null): void {
    if (g && this.capture) throw new GraphCaptureError('webgpu.graph', 'another graph is being captured');
    this.capture = g;
  }
  pipelineOf(prog: Program): { pipeline: GPUComputePipeline; layout: GPUBindGroupLayout; bindBytes: number } { return this.pipeline(prog); }
  recordReplay(g: WebGPUGraph): void { this.counters.replays++; this.record({ k: 'graph', g }); }
  releaseOwned(buf: GPUBuffer, size: number): void { this.pool.give(buf, size, this.recorded); }
  fail(e: Error): void { this.setFault(e); }
  takeFaultIf(which: (e: Error) => boolean): Error | null { return this.fault && which(this.fault) ? this.takeFault() : null; }

  /**
   * A GPU timestamp into `set[index]` at this point of the command list (an empty pass that writes it);
   * with `resolve` and `read`, both stamps (0 and 1) are then resolved and copied into `read` (16 bytes).
   */
  timestamp(set: GPUQuerySet, index: number, resolve?: GPUBuffer, read?: GPUBuffer): void { this.record({ k: 'stamp', set, index, resolve, read }); }

  copyBuffer(src: WGBuffer, dst: WGBuffer, bytes: number): void { this.record({ k: 'copy', src, dst, bytes: roundUp(bytes, 4) }); }

  /** Submits everything recorded; resolves when the list is drained (not when the GPU is done). */
  flush(): Promise<void> {
    if (!this.pumping) {
      // Work recorded after the pump's last drain but before this finally (a continuation scheduled in
      // the same microtask checkpoint, e.g. a decode loop queuing its next step as a read resolves) found
      // the pump still set and was left for it: drain it now, or its reads would wait forever.
      this.pumping = this.pump().finally(() => {
        this.pumping = null;
        if (this.head < this.ops.length && this.fault === null) this.flushInBackground();
      });
    }
    return this.pumping;
  }

  /**
   * A flush nobody awaits (recording ahead, a read's request): its failures reach the waiting reads and
   * the next read as a fault, never the process as an unhandled rejection.
   */
  private flushInBackground(): void { this.flush().catch(() => {}); }

  private async pump(): Promise<void> {
    try { await this.ready; } catch (e) { this.failPending(e as Error); throw e; }
    try {
      for (;;) {
        const more = !this.drain();
        if (!more) break;
        const op = this.ops[this.head++] as Extract<Op, { k: 'host' }>;
        await this.runHost(op);
        this.encoded++; // only now: its write-back must not be overtaken by an upload into a buffer it used
      }
      this.submit();
    } catch (e) {
      // Recording itself failed (a bug or an exhausted device): drop the half-built batch, fail every
      // waiting read, and keep the backend usable for independent work.
      const err = e instanceof NbxError ? e : new DeviceFaultError('webgpu', `recording commands failed: ${(e as Error).message}`);
      this.pass = null; this.passPipeline = null; this.enc = null; this.arenaUsed = 0; this.batchDispatches = 0;
      for (const job of this.reads) job.done(err);
      this.reads = [];
      this.failPending(err);
      this.setFault(err);
      throw err;
    }
  }

  /** Encodes recorded ops in order; stops before a host-staged kernel (returns false) or at the end (true). */
  private drain(): boolean {
    while (this.head < this.ops.length) {
      const op = this.ops[this.head]!;
      if (op.k === 'host') return false;
      this.head++;
      this.encode(op);
      this.encoded++;
    }
    this.ops = [];
    this.head = 0;
    return true;
  }

  private encoder(): GPUCommandEncoder { return (this.enc ??= this.device.createCommandEncoder()); }
  private endPass(): void { if (this.pass) { this.pass.end(); this.pass = null; this.passPipeline = null; } }

  private encode(op: Op): void {
    switch (op.k) {
      case 'dispatch': {
        const p = this.pipeline(op.prog);
        const need = roundUp(p.bindBytes, BLOCK);
        if (this.arenaUsed + need > ARENA_BYTES || this.batchDispatches >= BATCH) this.submit();
        const off = this.arenaUsed;
        this.arenaData.set(op.u, off / 4);
        this.arenaUsed += need;
        this.pass ??= this.encoder().beginComputePass();
        if (this.passPipeline !== p.pipeline) { this.pass.setPipeline(p.pipeline); this.passPipeline = p.pipeline; }
        this.pass.setBindGroup(0, this.bindGroup(p, op.bufs), [off]);
        this.pass.dispatchWorkgroups(op.x, op.y, op.z);
        this.inheritFault(op.prog.access, op.bufs);
        this.batchDispatches++;
        this.counters.dispatches++;
        return;
      }
      case 'write':
        // only fresh buffers are written this way (see upload): in order whenever it happens
        this.queue.writeBuffer(op.buf.gpu!, 0, op.data as Uint8Array<ArrayBuffer>);
        return;
      case 'clear':
        this.endPass();
        this.encoder().clearBuffer(op.buf.gpu!, 0, op.buf.size);
        return;
      case 'copy':
        this.endPass();
        if (op.bytes > 0) this.encoder().copyBufferToBuffer(op.src.gpu!, op.srcOffset ?? 0, op.dst.gpu!, op.dstOffset ?? 0, op.bytes);
        if (op.src.fault) op.dst.fault ??= op.src.fault;
        return;
      case 'read': {
        if (op.buf.fault) { op.done(op.buf.fault); return; }
        this.endPass();
        const rbSize = sizeClass(op.bytes);
        const rb = this.readPool.get(rbSize)?.pop() ?? this.device.createBuffer({ size: rbSize, usage: USAGE.MAP_READ | USAGE.COPY_DST });
        if (op.bytes > 0) this.encoder().copyBufferToBuffer(op.buf.gpu!, op.start, rb, 0, op.bytes);
        this.reads.push({ rb, rbSize, bytes: op.bytes, done: op.done });
        this.submit(); // the reader is waiting: start now
        return;
      }
      case 'stamp': {
        this.endPass();
        const writes: GPUComputePassTimestampWrites = op.resolve ? { querySet: op.set, endOfPassWriteIndex: op.index } : { querySet: op.set, beginningOfPassWriteIndex: op.index };
        this.encoder().beginComputePass({ timestampWrites: writes }).end();
        if (op.resolve && op.read) {
          this.encoder().resolveQuerySet(op.set, 0, 2, op.resolve, 0);
          this.encoder().copyBufferToBuffer(op.resolve, 0, op.read, 0, 16);
        }
        return;
      }
      case 'graph':
        this.endPass();
        op.g.encode(this.encoder());
        return;
      case 'host':
        throw new Error('webgpu: host op reached encode');
    }
  }

  private submit(): void {
    this.endPass();
    if (this.enc) {
      if (this.arenaUsed > 0) this.queue.writeBuffer(this.arena, 0, this.arenaData, 0, this.arenaUsed / 4);
      this.queue.submit([this.enc.finish()]);
      this.counters.submits++;
      this.enc = null;
    }
    this.arenaUsed = 0;
    this.batchDispatches = 0;
    this.submitted = this.encoded;
    for (const job of this.reads) this.finishRead(job);
    this.reads = [];
  }

  private finishRead(job: ReadJob): void {
    job.rb.mapAsync(MAP_READ, 0, job.rbSize).then(async () => {
      const out = new Uint8Array(job.rb.getMappedRange(0, job.bytes > 0 ? job.bytes : 0).slice(0));
      job.rb.unmap();
      let list = this.readPool.get(job.rbSize);
      if (!list) { list = []; this.readPool.set(job.rbSize, list); }
      if (list.length < 4) list.push(job.rb); else job.rb.destroy();
      await this.settleScopes();
      const f = this.takeFault();
      job.done(f ?? out);
    }, (e: Error) => job.done(new DeviceFaultError('webgpu', `readback failed: ${e.message}`)));
  }

  private async runHost(op: Extract<Op, { k: 'host' }>): Promise<void> {
    const views = new Map<WGBuffer, ArrayBuffer>();
    const reads = op.bufs.map((b) => new Promise<Uint8Array | Error>((done) => {
      this.encode({ k: 'read', buf: b, start: 0, bytes: roundUp(b.bytes, 4), done });
    }));
    const got = await Promise.all(reads);
    for (let i = 0; i < op.bufs.length; i++) {
      const r = got[i]!;
      if (r instanceof Error) { this.poisonOrFault(op, r); return; }
      views.set(op.bufs[i]!, r.buffer.byteLength === roundUp(op.bufs[i]!.bytes, 4) ? r.buffer as ArrayBuffer : r.slice().buffer as ArrayBuffer);
    }
    try {
      op.run(views);
    } catch (e) {
      this.poisonOrFault(op, e as Error); // a data-dependent error of the kernel (an index out of range...)
      return;
    }
    for (const [b, ab] of views) if (b.gpu && ab.byteLength > 0) this.queue.writeBuffer(b.gpu, 0, ab, 0, ab.byteLength);
  }

  // ---- pipelines -------------------------------------------------------------------------------

  /**
   * The bind group of a pipeline layout and buffers, cached: the parameters' offset in the arena is a
   * dynamic offset, so a chain of ops over the same (pooled) buffers reuses its bind groups.
   */
  private bindGroup(p: Pipeline, bufs: WGBuffer[]): GPUBindGroup {
    let key = `${p.layoutKey}`;
    for (const b of bufs) key += `|${this.bufferId(b.gpu!)}`;
    let bg = this.bindGroups.get(key);
    if (!bg) {
      const entries: GPUBindGroupEntry[] = [{ binding: 0, resource: { buffer: this.arena, offset: 0, size: p.bindBytes } }];
      for (let i = 0; i < bufs.length; i++) entries.push({ binding: i + 1, resource: { buffer: bufs[i]!.gpu! } });
      bg = this.device.createBindGroup({ layout: p.layout, entries });
      if (this.bindGroups.size >= 8192) this.bindGroups.clear();
      this.bindGroups.set(key, bg);
    }
    return bg;
  }
  private bufferId(b: GPUBuffer): number {
    let id = this.bufferIds.get(b);
    if (id === undefined) { id = ++this.lastBufferId; this.bufferIds.set(b, id); }
    return id;
  }

  private layout(access: string, uniformBytes: number): GPUBindGroupLayout {
    const key = `${access}:${uniformBytes}`;
    let l = this.layouts.get(key);
    if (!l) {
      const entries: GPUBindGroupLayoutEntry[] = [{ binding: 0, visibility: STAGE_COMPUTE, buffer: { type: 'uniform', hasDynamicOffset: true, minBindingSize: uniformBytes } }];
      for (let i = 0; i < access.length; i++) {
        entries.push({ binding: i + 1, visibility: STAGE_COMPUTE, buffer: { type: access[i] === 'r' || access[i] === 'v' ? 'read-only-storage' : 'storage' } });
      }
      l = this.device.createBindGroupLayout({ entries });
      this.layouts.set(key, l);
    }
    return l;
  }

  private pipeline(prog: Program): Pipeline {
    let p = this.pipelines.get(prog.key);
    if (!p) {
      const bindBytes = roundUp(Math.max(prog.words, 4) * 4, 16);
      const code = prog.source();
      const same = this.bySource.get(`${prog.access}|${code}`);
      if (same) { this.pipelines.set(prog.key, same); return same; }
      const layout = this.layout(prog.access, bindBytes);
      this.device.pushErrorScope('validation');
      const module = this.device.createShaderModule({ code });
      const pipeline = this.device.createComputePipeline({
        layout: this.device.createPipelineLayout({ bindGroupLayouts: [layout] }), compute: { module, entryPoint: 'main' },
      });
      this.watch(this.device.popErrorScope().then((e) => {
        // the cause, reported ahead of the "invalid pipeline" errors it leads to
        if (e) this.setFault(new DeviceFaultError('webgpu', `kernel ${prog.key.slice(0, 120)} failed to compile: ${e.message}\n${numbered(code)}`), true);
      }));
      p = { pipeline, layout, layoutKey: `${prog.access}:${bindBytes}`, bindBytes };
      this.pipelines.set(prog.key, p);
      this.bySource.set(`${prog.access}|${code}`, p);
      this.counters.pipelines++;
    }
    return p;
  }

  private watch(p: Promise<unknown>): void {
    this.scopes.add(p);
    void p.finally(() => this.scopes.delete(p));
  }
  private async settleScopes(): Promise<void> { while (this.scopes.size) await Promise.allSettled([...this.scopes]); }

  // ---- faults ----------------------------------------------------------------------------------

  private poisonOrFault(op: Extract<Op, { k: 'host' }>, e: Error): void {
    if (op.poisons) for (const b of op.poisons) b.fault ??= e;
    else this.setFault(e);
  }
  /** A dispatch that read a faulty buffer passes the fault on to the buffers it wrote. */
  private inheritFault(access: string, bufs: WGBuffer[]): void {
    let f: Error | null = null;
    for (const b of bufs) if (b.fault) { f = b.fault; break; }
    if (f === null) return;
    for (let i = 0; i < bufs.length; i++) if (access[i] !== 'r' && access[i] !== 'v') bufs[i]!.fault ??= f;
  }

  private setFault(e: Error, cause = false): void {
    if (!this.fault || cause) this.fault = e;
    else if (env('NBX_WEBGPU_DEBUG')) notice(`nbx webgpu: further error: ${e.message}`);
  }
  /** The pending fault, reported once (a later, independent computation may succeed). */
  private takeFault(): Error | null { const f = this.fault; this.fault = null; return f; }
  private throwFault(): void { const f = this.takeFault(); if (f) throw f; }
  private failPending(e: Error): void {
    for (let i = this.head; i < this.ops.length; i++) { const op = this.ops[i]!; if (op.k === 'read') op.done(e); }
    this.ops = [];
    this.head = 0;
  }

  // ---- elementwise -----------------------------------------------------------------------------

  elementwise(expr: Expr, inputs: StridedRef[], params: (number | bigint)[], out: StridedRef): void {
    runElementwise(this, expr, inputs, params, out);
  }

  get wgElementwise(): number { return this.isReady ? this.info.wgElementwise : 256; }
  get wgReduce(): number { return this.isReady ? this.info.wgReduce : 256; }

  memoryStats(): PoolStats & WebGPUBackend['counters'] {
    const s = this.isReady ? this.pool.stats() : { allocatedBytes: 0, cachedBytes: 0, reservedBytes: 0, peakAllocatedBytes: 0, peakReservedBytes: 0, allocations: 0, reuses: 0, created: 0, destroyed: 0, liveBuffers: 0, cachedBuffers: 0 };
    return { ...s, ...this.counters };
  }

  emptyCache(): number {
    if (!this.isReady) return 0;
    // submit what is recorded, so buffers freed since are no longer waited on by unsubmitted commands
    // (a host-staged step or a running pump keeps its later commands back: their buffers stay cached)
    if (!this.pumping && this.fault === null && this.drain()) this.submit();
    this.bindGroups.clear();
    let n = this.pool.emptyCache(this.submitted);
    for (const [size, list] of this.readPool) { for (const b of list) { b.destroy(); n += size; } }
    this.readPool.clear();
    return n;
  }
}

/**
 * The user-facing operation that asked for memory (for error messages): the outermost frame of the
 * call stack naming a declared operation, a function called through the package's namespace
 * (`nbx.zeros` shows as Module.zeros), or a Tensor conversion method. 'webgpu' when none is found.
 */
function callerOp(): string {
  const limit = Error.stackTraceLimit;
  Error.stackTraceLimit = 40;
  const stack = new Error().stack ?? '';
  Error.stackTraceLimit = limit;
  const short = new Map([...OPS.keys()].map((k) => [k.split('.').pop()!, k]));
  let found = 'webgpu';
  for (const m of stack.matchAll(/at (?:(Module|Object|Tensor)\.)?([\w$]+) /g)) {
    const [, owner, name] = m;
    if (owner === 'Tensor' && ['to', 'cuda', 'float', 'half', 'double', 'long', 'int', 'bool', 'type_as'].includes(name!)) found = `Tensor.${name}`;
    else if (short.has(name!) && owner !== 'Tensor') found = short.get(name!)!;
    else if (owner === 'Module') found = name!;
  }
  return found;
}

function numbered(code: string): string {
  return code.split('\n').map((l, i) => `${String(i + 1).padStart(4)}  ${l}`).join('\n');
}
