// Rows of a large decode GEMV spread over worker threads (part of kernels/quant.ts). The packed weights,
// the input row and the output all live in the quant memory (a shared WebAssembly.Memory), so each
// worker instantiates the same SIMD module on that memory and runs its share of the rows; nothing is
// copied. Jobs go through a small control block in the same memory (Atomics.wait / notify). A row's
// numbers are the same whichever thread computes it. A worker that does not answer within a second
// has its rows computed on the calling thread, and threading is switched off.
//
// Off by default: on the 2-core shared dev box one worker gave no measurable gain (4096×4096 int8, four
// alternating runs: 1989 / 2039 µs without, 2085 / 2082 µs with, BENCHMARKS.md), and speed is not
// asserted unmeasured. NBX_QUANT_THREADS=N turns on N workers (for machines with cores to spare).

import { Worker } from 'node:worker_threads';
import { availableParallelism } from 'node:os';
import { allocRegion } from '../../../quant/wasm_memory.js';

const SLOT = 16; // int32s per worker: gen, done, fn, nargs, args[12]

const WORKER = `
const { workerData } = require('node:worker_threads');
const { bytes, memory, ctrl: ctrlPtr, slot, names } = workerData;
const inst = new WebAssembly.Instance(new WebAssembly.Module(bytes), { e: { m: memory } });
const fns = names.map((n) => inst.exports[n]);
const c = new Int32Array(memory.buffer, ctrlPtr + slot * ${SLOT} * 4, ${SLOT});
let gen = 0;
for (;;) {
  Atomics.wait(c, 0, gen);
  gen = Atomics.load(c, 0);
  if (gen < 0) break;
  const n = c[3], a = [];
  for (let i = 0; i < n; i++) a.push(c[4 + i]);
  try { fns[c[2]](...a); } catch (e) { /* the caller times out and computes these rows itself */ continue; }
  Atomics.store(c, 1, gen);
  Atomics.notify(c, 1);
}
`;

interface Pool { workers: Worker[]; ctrl: Int32Array; names: string[]; gen: number }
let pool: Pool | null | undefined;

/** Worker threads for the module `bytes` on `memory` (null: none wanted or possible). NBX_QUANT_THREADS sets the count (default 0: none). */
function getPool(bytes: () => Uint8Array, memory: WebAssembly.Memory, names: string[]): Pool | null {
  if (pool !== undefined) return pool;
  pool = null;
  const env = process.env.NBX_QUANT_THREADS;
  const n = env !== undefined ? Math.max(0, Math.min(Math.floor(Number(env)) || 0, availableParallelism() * 2)) : 0;
  if (n < 1) return pool;
  const ptr = allocRegion(n * SLOT * 4);
  if (ptr < 0) return pool;
  const ctrl = new Int32Array(memory.buffer, ptr, n * SLOT);
  const workers: Worker[] = [];
  let code: Uint8Array | undefined;
  try {
    for (let s = 0; s < n; s++) {
      const w = new Worker(WORKER, { eval: true, workerData: { bytes: code ??= bytes(), memory, ctrl: ptr, slot: s, names } });
      w.unref(); // an idle pool never keeps the process alive
      w.on('error', () => { pool = null; });
      workers.push(w);
    }
  } catch { for (const w of workers) void w.terminate(); return pool; }
  pool = { workers, ctrl, names, gen: 0 };
  return pool;
}

/**
 * Runs kernel `name` over rows [0, N): `args(n0, n1)` gives its arguments for rows [n0, n1). Spread over
 * the pool when the product is large (N·K ≥ 2^20 and N ≥ 128); `run` runs a share on this thread.
 */
export function parallelRows(bytes: () => Uint8Array, memory: WebAssembly.Memory, names: string[], name: string, N: number, K: number,
  args: (n0: number, n1: number) => number[], run: (a: number[]) => void): void {
  const p = N * K >= 1 << 20 && N >= 128 ? getPool(bytes, memory, names) : null;
  if (!p) { run(args(0, N)); return; }
  const T = p.workers.length + 1, fi = p.names.indexOf(name);
  const bounds = Array.from({ length: T + 1 }, (_, i) => Math.round((N * i) / T));
  const gen = ++p.gen;
  for (let w = 1; w < T; w++) {
    const a = args(bounds[w]!, bounds[w + 1]!), base = (w - 1) * SLOT;
    p.ctrl[base + 2] = fi; p.ctrl[base + 3] = a.length;
    for (let i = 0; i < a.length; i++) p.ctrl[base + 4 + i] = a[i]!;
    Atomics.store(p.ctrl, base, gen);
    Atomics.notify(p.ctrl, base);
  }
  run(args(bounds[0]!, bounds[1]!));
  for (let w = 1; w < T; w++) {
    const base = (w - 1) * SLOT;
    let ok = true;
    while (Atomics.load(p.ctrl, base + 1) !== gen) {
      if (Atomics.wait(p.ctrl, base + 1, Atomics.load(p.ctrl, base + 1), 1000) === 'timed-out' && Atomics.load(p.ctrl, base + 1) !== gen) { ok = false; break; }
    }
    if (!ok) { pool = null; run(args(bounds[w]!, bounds[w + 1]!)); }
  }
}

/** Worker threads in use (0 before the first large product, or when none). */
export function quantThreads(): number { return pool ? pool.workers.length : 0; }
