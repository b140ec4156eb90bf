// A CPU worker: compiles the kernels it is sent (cached by key) and runs its share of a flat loop.
import { parentPort } from 'node:worker_threads';
import { makeCached } from './threads.js';
import { collectThisHeap } from '../../../memory/gc_pressure.js';

parentPort!.on('message', (m: { gc?: true; key: string; src: string; out: unknown; ins: unknown[]; params: unknown[]; start: number; end: number; offs: number[]; signal: Int32Array }) => {
  // the main thread collects under memory pressure: drop this heap's references to the shared buffers of past jobs too
  if (m.gc) { collectThisHeap(); return; }
  try {
    makeCached(m.key, m.src)(m.out, m.ins, m.params, m.end, m.start, [], m.offs);
  } catch (e) {
    process.stderr.write(`nbx cpu worker: ${(e as Error).message}\n`);
    Atomics.store(m.signal, 1, 1);
  }
  Atomics.add(m.signal, 0, 1);
  Atomics.notify(m.signal, 0);
});
