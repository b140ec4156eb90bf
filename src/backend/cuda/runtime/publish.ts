// A greedy decode step's token ids, and its graph's error word, written by the step graph's last kernel into
// page-locked host memory that the device writes directly (mapped): the host reads them there once the step is
// done, instead of queuing two device-to-host copies per step behind it (each a hop between the compute and
// copy engines on the stream, which the next queued step waited behind).
//
// The kernel writes a ring of slots, each [sequence number, error word, ids...], the number last (after a
// system-wide fence), and keeps the count of its launches on the device; the host counts the replays it queued,
// so a read knows its step's number and waits until its slot carries it. A step queued behind (stepFromDevice)
// writes another slot; one read more than RING steps late finds its slot overwritten and says so.

import { DisposedError, ValueError } from '../../../errors.js';
import type { DTypeName } from '../../../dtype/dtypes.js';
import type { ArgType } from './driver.js';
import { pollUntil, type CudaContext, type CudaKernel, type PinnedBuffer } from './driver.js';
import type { CudaBuffer } from './device.js';
import type { CaptureState } from './graph.js';

/** What a publisher needs of the CUDA backend. */
export interface PublishHost {
  readonly ctx: CudaContext;
  capture: CaptureState | null;
  alloc(dtype: DTypeName, numel: number, zero?: boolean): CudaBuffer;
  free(buf: unknown): void;
  kernel(key: string, make: () => { src: string; name: string; sig: ArgType[] }): CudaKernel;
  launch(k: CudaKernel, grid: number, block: number, args: (number | bigint)[], smem?: number): void;
}

/** Slots of the ring: reads may lag their steps by fewer than this many later steps. */
const RING = 256;

const SOURCE = `
extern "C" __global__ void nbx_publish_ids(const long long* ids, const unsigned long long* err, long long* host, unsigned long long* seq, int n) {
  if (threadIdx.x != 0 || blockIdx.x != 0) return;
  const unsigned long long s = *seq + 1ull;
  *seq = s;
  volatile long long* slot = host + (s % ${RING}ull) * (unsigned long long)(n + 2);
  slot[1] = err ? (long long)*err : 0ll;
  for (int i = 0; i < n; i++) slot[2 + i] = ids[i];
  __threadfence_system(); // the ids and the error word reach the host before the number that says they are there
  slot[0] = (long long)s;
}`;

export class StepPublisher {
  private readonly host: PinnedBuffer & { devicePtr: bigint };
  private readonly view: BigInt64Array;
  private readonly seq: CudaBuffer;
  private readonly kernel: CudaKernel;
  /** Launches of the kernel queued so far (recorded ones count at each replay of their graph: replayed()). */
  private queued = 0;
  private disposed = false;

  constructor(private readonly be: PublishHost, readonly n: number) {
    this.host = be.ctx.hostAllocMapped(RING * (n + 2) * 8);
    let seq: CudaBuffer | null = null;
    try {
      this.view = new BigInt64Array(this.host.buffer, 0, RING * (n + 2));
      this.view.fill(0n);
      seq = be.alloc('int64', 1, true);
      // compiled and loaded now: record() runs in a capture, where loading a module is not allowed
      this.kernel = be.kernel('nbx_publish_ids', () => ({ src: SOURCE, name: 'nbx_publish_ids', sig: ['ptr', 'ptr', 'ptr', 'ptr', 'i32'] as ArgType[] }));
      this.seq = seq;
    } catch (e) {
      if (seq) be.free(seq);
      be.ctx.hostFree(this.host);
      throw e;
    }
  }

  /** Records (in a capture) or launches the kernel publishing `ids` (n int64 on the device) and the capture's error word. */
  record(ids: bigint): void {
    this.be.launch(this.kernel, 1, 32, [ids, this.be.capture?.errBuf.ptr ?? 0n, this.host.devicePtr, this.seq.ptr, this.n]);
  }

  /** A graph holding record()'s kernel was replayed (or the kernel launched): the number of that step. */
  replayed(): number { return ++this.queued; }

  /**
   * Step `step`'s ids and error word, once the device has written them; `onError` turns a nonzero error word
   * into the error to raise.
   */
  async read(step: number, onError: (word: bigint) => Error | null): Promise<number[]> {
    const at = (step % RING) * (this.n + 2), want = BigInt(step);
    let tag = 0n;
    await pollUntil(() => { if (this.disposed) return true; tag = this.view[at]!; return tag >= want; });
    if (this.disposed) throw new DisposedError('StepPublisher.read', 'the decoder was disposed before its step was read');
    const ids = Array.from(this.view.subarray(at + 2, at + 2 + this.n), Number), word = this.view[at + 1]!;
    if (tag !== want || this.view[at] !== want) throw new ValueError('StepPublisher.read', `step ${step}'s ids were overwritten by step ${this.view[at]} (read ${RING} or more steps late)`);
    const e = word !== 0n ? onError(word) : null;
    if (e) throw e;
    return ids;
  }

  dispose(): void {
    if (this.disposed) return;
    this.disposed = true;
    this.be.ctx.hostFree(this.host);
    this.be.free(this.seq);
  }
}
