// Host↔device copies through a small pool of pinned (page-locked) buffers: copies from pinned memory
// are truly asynchronous and run at full PCIe/NVLink-C2C speed, where pageable copies are staged by
// the driver synchronously. A buffer is reused only after the event recorded behind its last copy has
// completed. Small copies (under SMALL_COPY bytes) skip the pool: latency beats bandwidth there.

import type { CudaContext, CudaEvent, PinnedBuffer, Stream } from './driver.js';

const CHUNK = 8 << 20;
const SLOTS = 4;
export const SMALL_COPY = 256 << 10;

interface Slot { buf: PinnedBuffer; view: Uint8Array; event: CudaEvent; busy: boolean }

export class PinnedStaging {
  private slots: Slot[] | null = null;
  private next = 0;
  constructor(private readonly ctx: CudaContext, private readonly stream: Stream) {}

  private pool(): Slot[] {
    if (!this.slots) {
      this.slots = [...Array(SLOTS)].map(() => {
        const buf = this.ctx.hostAlloc(CHUNK);
        return { buf, view: new Uint8Array(buf.buffer), event: this.ctx.createEvent({ timing: false }), busy: false };
      });
    }
    return this.slots;
  }

  private take(): Slot {
    const s = this.pool()[this.next]!;
    this.next = (this.next + 1) % SLOTS;
    if (s.busy) { s.event.synchronize(); s.busy = false; } // the copy that last used it must be done
    return s;
  }

  /** Host bytes → device, asynchronously on the stream (returns once the bytes are staged). */
  upload(dst: bigint, src: Uint8Array): void {
    if (src.byteLength < SMALL_COPY) { this.ctx.copyHtoD(dst, src, src.byteLength, this.stream); return; }
    for (let off = 0; off < src.byteLength; off += CHUNK) {
      const n = Math.min(CHUNK, src.byteLength - off);
      const s = this.take();
      s.view.set(src.subarray(off, off + n));
      this.ctx.copyHtoD(dst + BigInt(off), s.buf, n, this.stream);
      s.event.record(this.stream);
      s.busy = true;
    }
  }

  /**
   * Device → host bytes; with `wait` = async waits (never blocking the event loop), else blocking. The
   * copies are queued when this is called, so the bytes are those after the work queued before the call,
   * and work queued while it waits does not delay it (a decode loop reads step n's ids while step n + 1 runs).
   */
  async download(dst: Uint8Array, src: bigint, wait: boolean): Promise<void> {
    if (dst.byteLength < SMALL_COPY && !wait) {
      this.stream.synchronize();
      this.ctx.copyDtoH(dst, src, dst.byteLength, this.stream);
      this.stream.synchronize();
      return;
    }
    // keep up to SLOTS chunks in flight; drain each into dst in order
    const pending: { s: Slot; off: number; n: number }[] = [];
    const drain = async (): Promise<void> => {
      const p = pending.shift()!;
      if (wait) await p.s.event.wait(); else p.s.event.synchronize();
      p.s.busy = false;
      dst.set(p.s.view.subarray(0, p.n), p.off);
    };
    for (let off = 0; off < dst.byteLength; off += CHUNK) {
      if (pending.length === SLOTS) await drain();
      const n = Math.min(CHUNK, dst.byteLength - off);
      const s = this.take();
      this.ctx.copyDtoH(s.buf, src + BigInt(off), n, this.stream);
      s.event.record(this.stream);
      s.busy = true;
      pending.push({ s, off, n });
    }
    while (pending.length) await drain();
  }

  /** Blocking variant of download (t.item(), tolist(), dataSync()). */
  downloadSync(dst: Uint8Array, src: bigint): void {
    if (dst.byteLength < SMALL_COPY) {
      this.stream.synchronize();
      this.ctx.copyDtoH(dst, src, dst.byteLength, this.stream);
      this.stream.synchronize();
      return;
    }
    for (let off = 0; off < dst.byteLength; off += CHUNK) {
      const n = Math.min(CHUNK, dst.byteLength - off);
      const s = this.take();
      this.ctx.copyDtoH(s.buf, src + BigInt(off), n, this.stream);
      s.event.record(this.stream);
      s.event.synchronize();
      s.busy = false;
      dst.set(s.view.subarray(0, n), off);
    }
  }
}
