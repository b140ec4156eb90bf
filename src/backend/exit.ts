// Ending a process that used a GPU backend. Dawn's instance (kept alive on purpose, see
// webgpu/gpu.ts) and CUDA's context still hold native threads and handles when the work is done, and
// their teardown runs in native finalizers and destructors after JavaScript's 'exit' handlers. A
// process that had used both CUDA and WebGPU was seen not to exit after printing its results (issue
// 18). Once the 'exit' handlers have run there is nothing left to do, so `exitPromptly` ends such a
// process with the C library's _exit, skipping that teardown. Output is not lost: Node writes stdout and
// stderr synchronously to files, pipes and terminals on Linux. NBX_EXIT_TEARDOWN=1 keeps the teardown.

import koffi from 'koffi';
import { loadedBackends } from './backend.js';

/** Ends the process with `code` now (process.exit), without native teardown if a GPU backend was used. */
export function exitPromptly(code: number): never {
  const gpu = loadedBackends().some((b) => b.type !== 'cpu');
  if (gpu && process.platform === 'linux' && process.env.NBX_EXIT_TEARDOWN !== '1') {
    try {
      const exitNow = koffi.load('libc.so.6').func('void _exit(int)') as (c: number) => void;
      // Added last, so it runs after every other 'exit' listener (caches, statistics) has written.
      process.on('exit', (c) => exitNow(typeof c === 'number' ? c : code));
    } catch { /* no libc to call: the ordinary exit below */ }
  }
  process.exit(code);
}
