// Large CPU tensors live in SharedArrayBuffers (so worker threads can compute on them in place), and
// V8 does not count SharedArrayBuffer memory as external memory: a program that leaves large results
// to the garbage collector instead of calling dispose() could grow to tens of GB with a small JS heap
// and V8 would never see a reason to collect. So the engine counts what it allocates this way and,
// past a budget, runs a full collection itself (unreachable buffers are freed by it), the pressure
// signal V8 would have had for ordinary ArrayBuffers. An allocation that fails collects and retries
// once before it is an OutOfMemoryError.

import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import { totalmem } from 'node:os';

/** The machine's memory: a larger request cannot succeed, however much a collection frees. */
export const physicalMemoryBytes = totalmem();

/** Bytes of array buffers past which a large allocation triggers a collection: NBX_HOST_GC_MB, else 1/8 of RAM (at least 1 GiB). */
const BUDGET = (() => {
  const mb = Number(process.env.NBX_HOST_GC_MB);
  return process.env.NBX_HOST_GC_MB && mb > 0 ? mb * 2 ** 20 : Math.max(2 ** 30, Math.floor(totalmem() / 8));
})();

export const hostPressureStats = { collections: 0, budgetBytes: BUDGET };

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

/** Runs a full collection now; false where the runtime does not allow it. */
export function collectGarbage(): boolean {
  const gc = collector();
  if (!gc) return false;
  gc();
  hostPressureStats.collections++;
  return true;
}

let allocatedSinceCheck = 0;
let limit = BUDGET;

/** Called for every new shared host buffer: collects once array-buffer memory passes the limit. */
export function noteSharedAllocation(bytes: number): void {
  allocatedSinceCheck += bytes;
  if (allocatedSinceCheck < BUDGET / 4) return;
  allocatedSinceCheck = 0;
  if (process.memoryUsage().arrayBuffers < limit) return;
  if (!collectGarbage()) return;
  // what survives is live: collect again only after as much again has been allocated
  limit = Math.max(BUDGET, process.memoryUsage().arrayBuffers * 1.5);
}
