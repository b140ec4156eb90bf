// Memory the garbage collector cannot see. Large CPU tensors live in SharedArrayBuffers (so worker
// threads compute on them in place) and V8 does not count SharedArrayBuffer memory as external memory;
// device tensors hold GPU buffers V8 knows nothing of. A program that leaves such tensors to the
// garbage collector instead of calling dispose() could grow without bound while the JS heap stays
// small and V8 never sees a reason to collect (a FinalizationRegistry callback, the engine's safety
// net for device memory, only runs after a collection). So each allocator counts what it allocates
// and, once its live bytes pass a budget, runs a full collection itself: the pressure signal V8 would
// have had for ordinary ArrayBuffers. An allocation that fails collects and retries once before it is
// an OutOfMemoryError (CPU).

import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import { totalmem } from 'node:os';

/** The machine's memory: a larger host request cannot succeed, however much a collection frees. */
export const physicalMemoryBytes = totalmem();

export const gcPressureStats = { collections: 0 };

let gcFn: (() => void) | null | undefined;
/** V8's gc(), exposed at run time (null where the runtime refuses, e.g. a browser). */
function collector(): (() => void) | null {
  if (gcFn === undefined) {
    try {
      setFlagsFromString('--expose-gc');
      gcFn = runInNewContext('gc') as () => void;
    } catch { gcFn = null; }
  }
  return gcFn;
}

const hooks: (() => void)[] = [];
/**
 * Runs `hook` with every collection: heaps that share buffers with this one (CPU worker threads, which
 * receive SharedArrayBuffers in messages and would keep them alive until they collect) collect too.
 */
export function onCollect(hook: () => void): void { hooks.push(hook); }

/** Runs a full collection now (and asks the hooked heaps to); false where the runtime does not allow it. */
export function collectGarbage(): boolean {
  const gc = collector();
  if (!gc) return false;
  for (const h of hooks) h();
  gc();
  gcPressureStats.collections++;
  return true;
}

/** gc() of the calling thread's heap, for worker threads answering a collection request; false if unavailable. */
export function collectThisHeap(): boolean {
  const gc = collector();
  if (gc) gc();
  return gc !== null;
}

/** A budget in bytes from an environment variable in MiB, else `fallback`. */
export function budgetFromEnv(name: string, fallback: number): number {
  const mb = Number(process.env[name]);
  return process.env[name] && mb > 0 ? mb * 2 ** 20 : fallback;
}

/**
 * One allocator's pressure valve: `note(bytes)` on every new allocation; every quarter budget of new
 * allocations it reads the allocator's live bytes and, past the budget, collects. The budget is fixed:
 * when live data legitimately exceeds it, a collection follows every quarter budget allocated (a few
 * milliseconds for a small heap), never a ratchet that lets unreachable memory pile up.
 */
export class GcPressure {
  private since = 0;
  constructor(readonly budgetBytes: number, private readonly liveBytes: () => number) {}
  note(bytes: number): void {
    this.since += bytes;
    if (this.since < this.budgetBytes / 4) return;
    this.since = 0;
    if (this.liveBytes() >= this.budgetBytes) collectGarbage();
  }
}

/** The CPU's valve: array-buffer memory past NBX_HOST_GC_MB (default 1/8 of RAM, at least 1 GiB). */
export const hostPressure = new GcPressure(budgetFromEnv('NBX_HOST_GC_MB', Math.max(2 ** 30, Math.floor(physicalMemoryBytes / 8))),
  () => process.memoryUsage().arrayBuffers);
