// Worker threads for large flat elementwise kernels. Big CPU buffers are SharedArrayBuffers (see
// allocStorage), so workers read and write them in place; the main thread runs one share itself and
// waits on an Atomics counter. Small operations never pay for this: below PARALLEL_MIN elements, or
// when any operand is not shared memory, the caller runs single-threaded.

import { Worker } from 'node:worker_threads';
import { availableParallelism } from 'node:os';
import { H } from '../../../ir/render_js.js';
import { onCollect } from '../../../memory/gc_pressure.js';

export const PARALLEL_MIN = 1 << 18;

// eslint-disable-next-line @typescript-eslint/no-explicit-any
export function makeKernel(src: string): any {
  return new Function('H', 'out', 'ins', 'params', 'n', 'inner', 'is', 'offs', src).bind(null, H);
}

let workers: Worker[] | null = null;
/** CPU threads for elementwise work: NBX_NUM_THREADS (as the GEMM's helpers; NBX_CPU_THREADS is an older alias), else the cores, ≤ 16. */
export const threadCount = (): number => {
  const env = Number(process.env.NBX_NUM_THREADS ?? process.env.NBX_CPU_THREADS);
  return Number.isInteger(env) && env > 0 ? env : Math.max(1, Math.min(availableParallelism(), 16));
};

function pool(): Worker[] {
  if (workers) return workers;
  workers = [];
  const n = threadCount() - 1;
  for (let i = 0; i < n; i++) {
    const w = new Worker(new URL('./worker.js', import.meta.url));
    w.unref(); // never keeps the process alive
    // a worker that dies (or never starts) must fail the waiting call, not hang it
    w.on('error', (e) => { process.stderr.write(`nbx cpu worker failed: ${e.message}\n`); Atomics.store(signal, 1, 1); Atomics.add(signal, 0, 1 << 20); Atomics.notify(signal, 0); workers = null; });
    workers.push(w);
  }
  return workers;
}

// Jobs reach the workers as structured clones holding the tensors' SharedArrayBuffers: a worker keeps
// them alive until its own heap collects, so a collection under memory pressure asks the workers too.
onCollect(() => { for (const w of workers ?? []) w.postMessage({ gc: true }); });

const isShared = (a: unknown): boolean => ArrayBuffer.isView(a) && a.buffer instanceof SharedArrayBuffer;
const signal = new Int32Array(new SharedArrayBuffer(8));

/** Runs a flat kernel over [0, n) split across threads; false when it cannot (caller runs it alone). */
export function parallelFlat(key: string, src: string, out: unknown, ins: unknown[], params: unknown[], n: number, offs: number[]): boolean {
  if (threadCount() < 2 || !isShared(out) || !ins.every(isShared)) return false;
  const ws = pool();
  const parts = ws.length + 1;
  const chunk = Math.ceil(n / parts / 16) * 16;
  Atomics.store(signal, 0, 0);
  let posted = 0;
  for (let w = 0; w < ws.length; w++) {
    const start = (w + 1) * chunk, end = Math.min(n, start + chunk);
    if (start >= end) break;
    ws[w]!.postMessage({ key, src, out, ins, params, start, end, offs, signal });
    posted++;
  }
  makeCached(key, src)(out, ins, params, Math.min(n, chunk), 0, [], offs);
  const t0 = Date.now();
  while (Atomics.load(signal, 0) < posted) {
    Atomics.wait(signal, 0, Atomics.load(signal, 0), 1000);
    if (Date.now() - t0 > 120_000) throw new Error('elementwise workers did not answer within 120 s');
  }
  if (Atomics.load(signal, 1) !== 0) { Atomics.store(signal, 1, 0); throw new Error('elementwise worker failed (see stderr)'); }
  return true;
}

const local = new Map<string, ReturnType<typeof makeKernel>>();
export function makeCached(key: string, src: string): ReturnType<typeof makeKernel> {
  let k = local.get(key);
  if (!k) { k = makeKernel(src); local.set(key, k); }
  return k;
}
