/// <reference types="@webgpu/types" />
// A size-bucketed pool of GPUBuffers. WebGPU has no pointers to sub-allocate from (a binding is a whole
// buffer, or an offset aligned to 256 bytes), so a request is rounded up to a size class and served by
// a cached buffer of that class when one is free. Size classes: multiples of 256 B up to 64 KiB, then
// eight steps per power of two (at most 12.5% waste). Buffers come back through `give`, which the
// backend calls only once every command that used the buffer has been submitted, so a recycled buffer
// is never written while older work could still read it.

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

export class BufferPool {
  private readonly free = new Map<number, GPUBuffer[]>();
  private readonly s: PoolStats = {
    allocatedBytes: 0, cachedBytes: 0, reservedBytes: 0, peakAllocatedBytes: 0, peakReservedBytes: 0,
    allocations: 0, reuses: 0, created: 0, destroyed: 0, liveBuffers: 0, cachedBuffers: 0,
  };

  constructor(private readonly create: (size: number) => GPUBuffer, private readonly maxSize: number) {}

  /** The size a request of `bytes` occupies (its class, capped at the largest buffer the device allows). */
  classOf(bytes: number): number { return Math.min(sizeClass(bytes), Math.max(this.maxSize, Math.ceil(bytes / 4) * 4)); }

  take(size: number): GPUBuffer {
    this.s.allocations++;
    let buf = this.free.get(size)?.pop();
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

  /** Returns a buffer none of whose uses is still unsubmitted. */
  give(buf: GPUBuffer, size: number): void {
    this.s.allocatedBytes -= size;
    let list = this.free.get(size);
    if (!list) { list = []; this.free.set(size, list); }
    list.push(buf);
    this.s.cachedBytes += size;
    this.s.cachedBuffers++;
    this.s.reservedBytes = this.s.allocatedBytes + this.s.cachedBytes;
  }

  /** Destroys every cached buffer; returns the bytes released. */
  emptyCache(): number {
    let bytes = 0;
    for (const [size, list] of this.free) {
      for (const b of list) { b.destroy(); bytes += size; this.s.destroyed++; this.s.liveBuffers--; }
    }
    this.free.clear();
    this.s.cachedBytes = 0;
    this.s.cachedBuffers = 0;
    this.s.reservedBytes = this.s.allocatedBytes;
    return bytes;
  }

  stats(): PoolStats { return { ...this.s }; }
  resetPeaks(): void { this.s.peakAllocatedBytes = this.s.allocatedBytes; this.s.peakReservedBytes = this.s.reservedBytes; }
}
