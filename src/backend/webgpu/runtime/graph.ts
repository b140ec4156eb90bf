/// <reference types="@webgpu/types" />
// Recorded steps on WebGPU: the counterpart of a CUDA graph (src/backend/cuda/runtime/graph.ts) for
// fixed-shape work such as a decode step (src/models/static_decode.ts). WebGPU has no reusable compute
// command buffers, so what is kept is everything the host computes to encode the step: each dispatch's
// pipeline, its bind group (built once, over a uniform buffer of the graph's own holding every
// dispatch's parameters at a fixed offset) and its grid, and the clears and copies between them. A
// replay is one entry of the backend's command list that encodes those calls into the current command
// encoder: no op dispatch, no shape logic, no uniform upload, no bind-group lookup, and the step's
// dispatches in one command buffer (one submit with the read that follows).
//
// As with CUDA graphs:
// * The capture runs the function once for real (its results are valid) while the backend notes what
//   it records; a replay reruns the same dispatches on the same buffers. Inputs change by writing into
//   the buffers the capture read; outputs are the tensors the capture produced, rewritten by each replay.
// * Buffers allocated during the capture belong to the graph: one freed during the capture is reused
//   only by later allocations of the same capture (commands run in order), and none goes back to the
//   backend's pool before reset(), since every replay writes into them.
// * Work that cannot be replayed raises GraphCaptureError during the capture: a read back to the host, a
//   host-staged kernel, a timestamp, and a buffer allocated before the capture, freed during it and read
//   by the recorded work (another tensor may hold it by the next replay).
// * Index checks (a kernel's error record that eager work answers with a host step) are deferred: each
//   replay copies the error records into one buffer and reads it back with the step; a failure is raised
//   as the device's pending fault: by checkErrors() or by the next read, whichever comes first; never ignored.

import { GraphCaptureError } from '../../../errors.js';
import type { Program, WGBuffer } from './device.js';

/** A dispatch as the graph replays it. */
interface GDispatch { k: 'dispatch'; pipeline: GPUComputePipeline; group: GPUBindGroup; offset: number; x: number; y: number; z: number; key: string }
type GCommand = GDispatch | { k: 'clear'; buf: GPUBuffer; size: number } | { k: 'copy'; src: GPUBuffer; srcOffset: number; dst: GPUBuffer; dstOffset: number; bytes: number };

/** An index check of the recorded work: its error record and the host code that raises from it. */
export interface GraphCheck { name: string; buf: WGBuffer; run: (host: Map<WGBuffer, ArrayBuffer>) => void }

/** The op kinds the graph records (backend.ts's Op, as far as a graph needs it). */
export type RecordedOp =
  | { k: 'dispatch'; prog: Program; bufs: WGBuffer[]; u: Uint32Array; x: number; y: number; z: number }
  | { k: 'clear'; buf: WGBuffer }
  | { k: 'copy'; src: WGBuffer; dst: WGBuffer; bytes: number; srcOffset?: number; dstOffset?: number }
  /** Where check number `index` was recorded: its error record is copied aside here, before a later command of the step reuses the buffer. */
  | { k: 'check'; index: number };

/** What a graph needs of the backend (WebGPUBackend implements it; named here so no import runs back into backend.ts). */
export interface GraphBackend {
  readonly device: GPUDevice;
  /** Starts noting what is recorded into `g` (null: stops). */
  setCapture(g: WebGPUGraph | null): void;
  /** Pipeline, layout and uniform size of a program (compiled during the capture already). */
  pipelineOf(prog: Program): { pipeline: GPUComputePipeline; layout: GPUBindGroupLayout; bindBytes: number };
  /** Records a replay of `g` (and the read of its error records) in the command list. */
  recordReplay(g: WebGPUGraph): void;
  /** Gives back a buffer the graph owned (after its last replay). */
  releaseOwned(buf: GPUBuffer, size: number): void;
  readBytes(buf: WGBuffer, start: number, bytes: number): Promise<Uint8Array>;
  allocBytes(bytes: number, zero?: boolean): WGBuffer;
  free(buf: unknown): void;
  fail(e: Error): void;
  /** Takes the pending device fault if `which` accepts it (so an error is raised once, by whoever asks first). */
  takeFaultIf(which: (e: Error) => boolean): Error | null;
  /** Resolves when everything recorded so far has run. */
  idle(): Promise<void>;
}

const BLOCK = 256;

export class WebGPUGraph {
  /** What the capture recorded, in order. */
  readonly ops: RecordedOp[] = [];
  readonly checks: GraphCheck[] = [];
  /** Buffers allocated during the capture (GPU buffer → size class); the graph gives them back at reset(). */
  readonly owned = new Map<GPUBuffer, number>();
  /** Owned buffers freed during the capture, by size class: later allocations of the capture reuse them. */
  readonly spare = new Map<number, GPUBuffer[]>();
  /**
   * Check records freed during the capture: kept out of the spares (nothing else of the step writes them
   * after their kernel), so their copies into the error read can wait until the end of the step instead
   * of breaking the compute pass once a layer.
   */
  readonly held = new Map<GPUBuffer, number>();
  /** Buffers allocated before the capture and freed during it (must not be read by the recorded work). */
  readonly freedOutside = new Set<GPUBuffer>();
  private commands: GCommand[] = [];
  private uniforms: GPUBuffer | null = null;
  /** The error records, copied side by side each replay, and read back with the step. */
  private errAll: WGBuffer | null = null;
  private capturing = false;
  private captured = false;
  private replays = 0;
  /** The errors its replays raised as the device's fault (checkErrors() takes them, unless a read did first). */
  private readonly raised = new WeakSet<Error>();
  private errorReads: Promise<void>[] = [];

  constructor(private readonly be: GraphBackend) {}

  capture_begin(): void {
    if (this.captured || this.capturing) throw new GraphCaptureError('webgpu.graph', 'this graph already holds a capture: reset() it first');
    this.capturing = true;
    this.be.setCapture(this);
  }

  /** Ends the capture and builds what replays encode. */
  capture_end(): void {
    this.be.setCapture(null);
    this.capturing = false;
    try { this.build(); } catch (e) { this.abandon(); throw e; }
    this.captured = true;
  }

  /** Drops a failed capture: the buffers it took go back (after the commands already recorded). */
  abandon(): void {
    if (this.capturing) { this.be.setCapture(null); this.capturing = false; }
    this.releaseBuffers();
    this.ops.length = 0; this.checks.length = 0; this.commands = [];
  }

  /** Noted by the backend while capturing: a command it recorded. */
  note(op: RecordedOp): void { this.ops.push(op); }
  /** Noted by the backend while capturing: an index check, deferred to the replays' error read. */
  noteCheck(c: GraphCheck): void { this.ops.push({ k: 'check', index: this.checks.length }); this.checks.push(c); }
  /** Whether `buf` is the record of a check noted in this capture. */
  isCheck(buf: GPUBuffer): boolean { return this.checks.some((c) => c.buf.gpu === buf); }

  private build(): void {
    for (const op of this.ops) {
      const bufs = op.k === 'dispatch' ? op.bufs : op.k === 'clear' ? [op.buf] : op.k === 'copy' ? [op.src, op.dst] : [];
      for (const b of bufs) {
        if (b.gpu && this.freedOutside.has(b.gpu)) {
          throw new GraphCaptureError('webgpu.graph', 'the recorded work uses a buffer that was allocated before the capture and freed during it (another tensor may hold it by the next replay)');
        }
      }
    }
    const dispatches = this.ops.filter((o) => o.k === 'dispatch').length;
    const data = new Uint32Array(Math.max(1, dispatches) * BLOCK / 4);
    this.uniforms = this.be.device.createBuffer({ size: data.byteLength, usage: 64 /* UNIFORM */ | 8 /* COPY_DST */ });
    if (this.checks.length) this.errAll = this.be.allocBytes(16 * this.checks.length);
    let i = 0;
    const atEnd: GCommand[] = [];
    for (const op of this.ops) {
      if (op.k === 'dispatch') {
        const p = this.be.pipelineOf(op.prog);
        const entries: GPUBindGroupEntry[] = [{ binding: 0, resource: { buffer: this.uniforms, offset: 0, size: p.bindBytes } }];
        op.bufs.forEach((b, j) => entries.push({ binding: j + 1, resource: { buffer: b.gpu! } }));
        data.set(op.u, (i * BLOCK) / 4);
        this.commands.push({ k: 'dispatch', pipeline: p.pipeline, group: this.be.device.createBindGroup({ layout: p.layout, entries }), offset: i * BLOCK, x: op.x, y: op.y, z: op.z, key: op.prog.key });
        i++;
      } else if (op.k === 'check') {
        const src = this.checks[op.index]!.buf.gpu!;
        (this.held.has(src) ? atEnd : this.commands).push({ k: 'copy', src, srcOffset: 0, dst: this.errAll!.gpu!, dstOffset: 16 * op.index, bytes: 16 });
      }
      else if (op.k === 'clear') this.commands.push({ k: 'clear', buf: op.buf.gpu!, size: op.buf.size });
      else if (op.bytes > 0) this.commands.push({ k: 'copy', src: op.src.gpu!, srcOffset: op.srcOffset ?? 0, dst: op.dst.gpu!, dstOffset: op.dstOffset ?? 0, bytes: op.bytes });
    }
    this.commands.push(...atEnd);
    // a fresh buffer, used by no command yet: written now, in order with everything
    this.be.device.queue.writeBuffer(this.uniforms, 0, data);
    this.ops.length = 0; // the recorded ops held the WGBuffers only for this
  }

  /** Encodes the recorded step into `enc` (called by the backend when the replay's turn comes). */
  encode(enc: GPUCommandEncoder): void {
    let pass: GPUComputePassEncoder | null = null;
    let last: GPUComputePipeline | null = null;
    const offs = [0];
    for (const c of this.commands) {
      if (c.k === 'dispatch') {
        pass ??= enc.beginComputePass();
        if (c.pipeline !== last) { pass.setPipeline(c.pipeline); last = c.pipeline; }
        offs[0] = c.offset;
        pass.setBindGroup(0, c.group, offs);
        pass.dispatchWorkgroups(c.x, c.y, c.z);
        continue;
      }
      if (pass) { pass.end(); pass = null; last = null; }
      if (c.k === 'clear') enc.clearBuffer(c.buf, 0, c.size);
      else enc.copyBufferToBuffer(c.src, c.srcOffset, c.dst, c.dstOffset, c.bytes);
    }
    if (pass) pass.end();
  }

  /**
   * GPU time of each recorded dispatch (a diagnostic: each runs in a pass of its own between timestamps,
   * so the figures include a pass's overhead): [program key and grid, microseconds], in order. Needs the
   * device's timestamp queries; waits for all recorded work. The step's results are those of a replay.
   */
  async profile(): Promise<[string, number][]> {
    const dev = this.be.device;
    const ds = this.commands.filter((c): c is GDispatch => c.k === 'dispatch');
    const n = Math.min(ds.length, 2048);
    const set = dev.createQuerySet({ type: 'timestamp', count: 2 * n });
    const resolve = dev.createBuffer({ size: 16 * n, usage: 0x0200 | 0x0004 });
    const read = dev.createBuffer({ size: 16 * n, usage: 0x0001 | 0x0008 });
    await this.be.idle();
    const enc = dev.createCommandEncoder();
    let q = 0;
    for (const c of this.commands) {
      if (c.k !== 'dispatch') {
        if (c.k === 'clear') enc.clearBuffer(c.buf, 0, c.size); else enc.copyBufferToBuffer(c.src, c.srcOffset, c.dst, c.dstOffset, c.bytes);
        continue;
      }
      const timed = q < n;
      const pass = enc.beginComputePass(timed ? { timestampWrites: { querySet: set, beginningOfPassWriteIndex: 2 * q, endOfPassWriteIndex: 2 * q + 1 } } : undefined);
      pass.setPipeline(c.pipeline); pass.setBindGroup(0, c.group, [c.offset]); pass.dispatchWorkgroups(c.x, c.y, c.z); pass.end();
      if (timed) q++;
    }
    enc.resolveQuerySet(set, 0, 2 * n, resolve, 0);
    enc.copyBufferToBuffer(resolve, 0, read, 0, 16 * n);
    dev.queue.submit([enc.finish()]);
    await read.mapAsync(1);
    const t = new BigInt64Array(read.getMappedRange().slice(0));
    read.unmap(); set.destroy(); resolve.destroy(); read.destroy();
    return ds.slice(0, n).map((c, i) => [`${c.key} [${c.x},${c.y},${c.z}]`, Number(t[2 * i + 1]! - t[2 * i]!) / 1000]);
  }

  /** Reruns the recorded step (recorded in the backend's command list, in order with other work). */
  replay(): void {
    if (!this.captured) throw new GraphCaptureError('webgpu.graph', 'replay() before a capture');
    this.be.recordReplay(this);
    this.replays++;
    if (this.errAll) {
      const checks = this.checks, errAll = this.errAll;
      const read = this.be.readBytes(errAll, 0, 16 * checks.length).then((bytes) => {
        const copy = bytes.slice().buffer;
        for (let j = 0; j < checks.length; j++) {
          const w = new Int32Array(copy, 16 * j, 4);
          if (w.every((x) => x === 0)) continue; // every record here is zero when its kernel found nothing
          const host = new Map([[checks[j]!.buf, copy.slice(16 * j, 16 * j + 16)]]);
          try { checks[j]!.run(host); } catch (e) { this.raised.add(e as Error); this.be.fail(e as Error); }
          break;
        }
      }, (e: Error) => { this.raised.add(e); this.be.fail(e); });
      this.errorReads.push(read);
      if (this.errorReads.length > 8) this.errorReads.splice(0, this.errorReads.length - 8);
    }
  }

  /** Raises the first index error that a finished replay recorded (an out-of-range token id...). */
  checkErrors(): void {
    const e = this.be.takeFaultIf((f) => this.raised.has(f));
    if (e) throw e;
  }

  /** Waits for the error reads of the replays so far, then raises as checkErrors(). */
  async settle(): Promise<void> {
    await Promise.all(this.errorReads);
    this.errorReads = [];
    this.checkErrors();
  }

  stats(): { nodes: number; replays: number } { return { nodes: this.commands.length, replays: this.replays }; }

  get isCaptured(): boolean { return this.captured; }

  /** Forgets the capture; the graph's buffers go back to the backend (after the replays recorded so far). */
  reset(): void {
    this.releaseBuffers();
    this.commands = [];
    this.checks.length = 0;
    this.uniforms?.destroy(); // destroy() waits for submitted work on the buffer (WebGPU's rule)
    this.uniforms = null;
    this.captured = false;
  }

  private releaseBuffers(): void {
    if (this.errAll) { this.be.free(this.errAll); this.errAll = null; }
    for (const list of this.spare.values()) for (const b of list) this.be.releaseOwned(b, this.owned.get(b)!);
    for (const [b, size] of this.held) this.be.releaseOwned(b, size);
    this.spare.clear();
    this.held.clear();
    this.owned.clear();
    this.freedOutside.clear();
  }
}

/** Runs `fn` under a capture into `g` (WebGPU's torch.cuda.graph), returning what fn returns. */
export function captureWebGPU<T>(g: WebGPUGraph, fn: () => T): T {
  g.capture_begin();
  let out: T;
  try {
    out = fn();
    if (out instanceof Promise) throw new GraphCaptureError('webgpu.graph', 'the captured function returned a Promise: a capture records synchronous work only');
  } catch (e) {
    g.abandon();
    throw e;
  }
  g.capture_end();
  return out;
}
