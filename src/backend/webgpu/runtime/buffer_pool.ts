/// <reference types="@webgpu/types" />
// A size-bucketed pool of GPUBuffers. WebGPU has no pointers to sub-allocate from (a binding is a whole
// buffer, or an offset aligned to 256 bytes), so a request is rounded up to a size class and served by
// a cached buffer of that class when one is free. Size classes: multiples of 256 B up to 64 KiB, then
// eight steps per power of two (at most 12.5% waste).
//
// A buffer is given back as soon as its tensor is freed, stamped with the backend's count of recorded
// commands. Commands are executed in recording order, so a kernel output may reuse it at once (its
// writes come after every earlier use); an upload, written through the queue ahead of unsubmitted
// commands, takes only a buffer whose stamp is already submitted ("clean").

export interface PoolStats {
  /** Bytes of buffers held by tensors. */
  allocatedBytes: number;
  /** Bytes of free buffers kept for reuse. */
  cachedBytes: number;
  /** allocatedBytes + cachedBytes: what the pool holds from the device. */
  reservedBytes: number;
  peakAllocatedBytes: number;
  peakReservedBytes: number;
  /** Requests served, and how many of them by a cached buffer. */
  allocations: number;
  reuses: number;
  /** GPUBuffers created and destroyed. */
  created: number;
  destroyed: number;
  liveBuffers: number;
  cachedBuffers: number;
}

export function sizeClass(bytes: number): number {
  const b = Math.max(bytes, 4);
  if (b <= 65536) return Math.ceil(b / 256) * 256;
  const step = 2 ** (Math.floor(Math.log2(b - 1)) - 3);
  return Math.ceil(b / step) * step;
}

interface FreeBuffer { buf: GPUBuffer; at: number }

export class BufferPool {
  /** Per size class, in the order given back (so stamps ascend). */
  private readonly free = new Map<number, FreeBuffer[]>();
  private readonly s: PoolStats = {
    allocatedBytes: 0, cachedBytes: 0, reservedBytes: 0, peakAllocatedBytes: 0, peakReservedBytes: 0,
    allocations: 0, reuses: 0, created: 0, destroyed: 0, liveBuffers: 0, cachedBuffers: 0,
  };

  constructor(private readonly create: (size: number) => GPUBuffer, private readonly maxSize: number) {}

  /** The size a request of `bytes` occupies (its class, capped at the largest buffer the device allows). */
  classOf(bytes: number): number { return Math.min(sizeClass(bytes), Math.max(this.maxSize, Math.ceil(bytes / 4) * 4)); }

  /** A buffer of `size` bytes; with `cleanAt`, only one given back at or before that stamp. */
  take(size: number, cleanAt?: number): GPUBuffer {
    this.s.allocations++;
    const list = this.free.get(size);
    let buf: GPUBuffer | undefined;
    if (list?.length) {
      if (cleanAt === undefined) buf = list.pop()!.buf;
      else if (list[0]!.at <= cleanAt) buf = list.shift()!.buf;
    }
    if (buf) {
      this.s.reuses++;
      this.s.cachedBytes -= size;
      this.s.cachedBuffers--;
    } else {
      buf = this.create(size);
      this.s.created++;
      this.s.liveBuffers++;
    }
    this.s.allocatedBytes += size;
    this.s.peakAllocatedBytes = Math.max(this.s.peakAllocatedBytes, this.s.allocatedBytes);
    this.s.reservedBytes = this.s.allocatedBytes + this.s.cachedBytes;
    this.s.peakReservedBytes = Math.max(this.s.peakReservedBytes, this.s.reservedBytes);
    return buf;
  }

  /** Takes back a buffer whose last use is recorded command number `at`. */
  give(buf: GPUBuffer, size: number, at: number): void {
    this.s.allocatedBytes -= size;
    let list = this.free.get(size);
    if (!list) { list = []; this.free.set(size, list); }
    list.push({ buf, at });
    this.s.cachedBytes += size;
    this.s.cachedBuffers++;
    this.s.reservedBytes = this.s.allocatedBytes + this.s.cachedBytes;
  }

  /**
   * Destroys the cached buffers whose last use is at or before stamp `submittedAt` (commands recorded
   * but not yet submitted may still use the others); returns the bytes released.
   */
  emptyCache(submittedAt = Infinity): number {
    let bytes = 0;
    for (const [size, list] of this.free) {
      const keep = list.filter((f) => f.at > submittedAt);
      for (const f of list) {
        if (f.at > submittedAt) continue;
        f.buf.destroy(); bytes += size; this.s.destroyed++; this.s.liveBuffers--;
        this.s.cachedBytes -= size; this.s.cachedBuffers--;
      }
      if (keep.length) this.free.set(size, keep); else this.free.delete(size);
    }
    this.s.reservedBytes = this.s.allocatedBytes + this.s.cachedBytes;
    return bytes;
  }

  stats(): PoolStats { return { ...this.s }; }
  /** Bytes in buffers handed out (what tensors hold), without copying the statistics. */
  get allocatedBytes(): number { return this.s.allocatedBytes; }
  resetPeaks(): void { this.s.peakAllocatedBytes = this.s.allocatedBytes; this.s.peakReservedBytes = this.s.reservedBytes; }
}
