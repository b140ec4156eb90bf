// The CUDA backend: device memory from the caching allocator, one stream for all work, elementwise
// kernels rendered from the IR by CudaRenderer and compiled with NVRTC (cached in memory and on disk),
// reductions, GEMM through cuBLASLt. Loaded only when a tensor first asks for 'cuda'.

import { DTYPES, allocStorage, type DTypeName, type StorageArray } from '../../../dtype/dtypes.js';
import type { Expr } from '../../../ir/expr.js';
import { CUDA_PRELUDE } from '../../../ir/render_c.js';
import { type Backend, type StridedRef } from '../../backend.js';
import { CudaContext, type CudaKernel, type Stream, type ArgType, type KernelArg } from './driver.js';
import { getKernel } from './nvrtc.js';
import { CachingAllocator } from '../../../memory/caching_allocator.js';
import { OutOfMemoryError, UnsupportedError } from '../../../errors.js';
import { CudaTuning } from '../tuning/spaces.js';
import { PinnedStaging } from './pinned_staging.js';
import { LaunchBatch } from './launch_batch.js';
import type { CaptureState } from './graph.js';
import { budgetFromEnv, collectGarbage, GcPressure } from '../../../memory/gc_pressure.js';

import type { CudaBuffer, CudaDevice } from './device.js';
export type { CudaBuffer } from './device.js';

import { R, runElementwise } from './elementwise.js';
export { R, unpack } from './elementwise.js';

export class CudaBackend implements Backend, CudaDevice {
  readonly type = 'cuda' as const;
  readonly ctx: CudaContext;
  readonly stream: Stream;
  readonly allocator: CachingAllocator;
  readonly smCount: number;
  readonly tuning: CudaTuning;
  readonly staging: PinnedStaging;
  private readonly ewDefault: { threads: number; waves: number };
  private readonly kernels = new Map<string, CudaKernel>();
  /** Small elementwise ops queue here and launch together (launch_batch.ts); null when NBX_CUDA_BATCH=0. */
  readonly batch: LaunchBatch | null;
  /**
   * Tensors nobody disposed are freed by their finalizers only after a collection, and V8 sees only
   * their small JS objects: past NBX_CUDA_GC_MB held (default 1/8 of the device's memory, at least
   * 1 GiB; a model's weights stay under it) the backend asks for one, as the WebGPU and CPU backends do.
   */
  readonly pressure: GcPressure;
  /** The CUDA graph capture in progress (graph.ts), or null. */
  capture: CaptureState | null = null;
  /** The caching allocator's pool for new buffers: 0, or a capturing graph's private pool. */
  poolKey = 0;
  private unbatchedDepth = 0;

  /**
   * Runs `fn` with every elementwise op launched on its own, as inside a CUDA graph capture: a warm-up
   * before a capture compiles the kernels the capture will record (static_decode.ts).
   */
  unbatched<T>(fn: () => T): T {
    this.ctx.flushPending();
    this.unbatchedDepth++;
    try { return fn(); } finally { this.unbatchedDepth--; }
  }

  constructor() {
    this.ctx = CudaContext.get(0);
    this.stream = this.ctx.createStream(true);
    this.allocator = new CachingAllocator(this.ctx.rawAllocator());
    this.smCount = this.ctx.info.smCount;
    this.tuning = new CudaTuning(this.ctx, this.stream);
    // the untuned launch shape comes from the device profile (threads per block), not from code
    this.ewDefault = { threads: this.tuning.profile.defaults.elementwise.threadsPerBlock, waves: 16 };
    this.staging = new PinnedStaging(this.ctx, this.stream);
    this.batch = LaunchBatch.create(this);
    this.pressure = new GcPressure(budgetFromEnv('NBX_CUDA_GC_MB', Math.max(2 ** 30, Math.floor(this.ctx.info.totalMem / 8))),
      () => this.allocator.allocatedBytes);
  }

  checkDType(op: string, d: DTypeName): void {
    if (!R.caps.dtypes.has(d)) throw new UnsupportedError(op, `dtype ${d} is not supported on cuda yet`);
  }

  alloc(dtype: DTypeName, numel: number, zero = false): CudaBuffer {
    const bytes = Math.max(numel * DTYPES[dtype].itemsize, 1);
    let ptr: bigint;
    try {
      ptr = this.allocator.malloc(bytes, this.poolKey);
    } catch (e) {
      // undisposed tensors' memory returns only after a collection and their finalizers (a later
      // task): ask for the collection now, so that a retry after an await can succeed
      if (e instanceof OutOfMemoryError) collectGarbage();
      throw e;
    }
    this.pressure.note(bytes);
    if (zero) this.ctx.memsetD8(ptr, 0, bytes, this.stream);
    return { ptr, bytes };
  }
  free(buf: unknown): void { this.allocator.free((buf as CudaBuffer).ptr); }

  upload(dtype: DTypeName, data: StorageArray): CudaBuffer {
    const buf = this.alloc(dtype, data.length / DTYPES[dtype].lanes);
    if (data.byteLength > 0) this.staging.upload(buf.ptr, new Uint8Array(data.buffer, data.byteOffset, data.byteLength));
    return buf;
  }

  /** Host bytes into a device buffer at a byte offset (streamed checkpoint loading). */
  writeBytes(buf: unknown, byteOffset: number, data: Uint8Array): void {
    if (data.byteLength) this.staging.upload((buf as CudaBuffer).ptr + BigInt(byteOffset), data);
  }

  downloadSync(buf: unknown, dtype: DTypeName, offset: number, numel: number): StorageArray {
    const host = allocStorage(dtype, numel);
    const b = buf as CudaBuffer;
    if (host.byteLength > 0) this.staging.downloadSync(new Uint8Array(host.buffer, host.byteOffset, host.byteLength), b.ptr + BigInt(offset * DTYPES[dtype].itemsize));
    return host;
  }

  /** Waits for queued work and copies back through pinned buffers, without blocking the event loop. */
  async download(buf: unknown, dtype: DTypeName, offset: number, numel: number): Promise<StorageArray> {
    const host = allocStorage(dtype, numel);
    const b = buf as CudaBuffer;
    if (host.byteLength > 0) await this.staging.download(new Uint8Array(host.buffer, host.byteOffset, host.byteLength), b.ptr + BigInt(offset * DTYPES[dtype].itemsize), true);
    return host;
  }

  async synchronize(): Promise<void> { await this.stream.synchronizeAsync(); }

  /** Compiles (once) and returns a kernel; `key` identifies the source so generation is skipped on hits. */
  kernel(key: string, make: () => { src: string; name: string; sig: ArgType[] }): CudaKernel {
    let k = this.kernels.get(key);
    if (!k) {
      const { src, name, sig } = make();
      k = getKernel(this.ctx, `${CUDA_PRELUDE}\n${src}`, name, sig, { options: ['--std=c++17'], includeCudaHeaders: false }); // no headers: portable cache keys
      this.kernels.set(key, k);
    }
    return k;
  }

  launch(k: CudaKernel, grid: number, block: number, args: KernelArg[], smem = 0): void {
    this.ctx.launch(k, grid, block, args, smem, this.stream);
  }

  gridFor(work: number, block: number, waves = 16): number { return Math.max(1, Math.min(Math.ceil(work / block), this.smCount * waves)); }

  elementwise(expr: Expr, ins: StridedRef[], params: (number | bigint)[], out: StridedRef): void {
    // small ops: a command of the launch batch instead of a launch of their own
    // (not in a CUDA graph: there a launch costs nothing on the host, and the batch kernel is one block)
    if (this.batch !== null && this.capture === null && this.unbatchedDepth === 0 && this.batch.tryElementwise(expr, ins, params, out)) return;
    runElementwise(this, expr, ins, params, out);
  }
}

