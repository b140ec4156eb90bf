// Step recording on the CPU: the counterpart of a CUDA graph (src/backend/cuda/runtime/graph.ts).
//
// A decode step of a small model on the CPU is dominated by the host work around its kernels (building
// tensors, checking shapes, dispatching), and in the first generations of a process by V8 running that
// code before it has optimized it. A step whose every tensor has a fixed shape and buffer (the static
// decoder, src/models/static_decode.ts) can instead be recorded once as the list of its kernel calls
// with their operands, and replayed by calling them again: a loop over a few hundred closures.
//
// What makes a replay faithful, as a CUDA graph's:
// * every write the step makes goes through a recorded call: the CPU kernels (wrapped where the backend
//   registers them), the elementwise evaluator, and the zero-fill of a fresh CPU buffer (a fresh CPU
//   tensor is zeros, which some kernels rely on, so the replay zeroes it again);
// * no buffer the recording uses goes back to the host pool, where another tensor could take it: storages
//   made while recording are marked borrowed (never pooled);
// * nothing reads a value back to the host during the recording (item(), data()): the step's control
//   flow would depend on it; that, and a kernel that returns a host value (nonzero, unique, ...), raise
//   GraphCaptureError and the caller runs the step eagerly.
// Values that change between steps live in tensors written before each replay (token ids, positions,
// the cache index), exactly as for a CUDA graph.

import { GraphCaptureError } from '../../../errors.js';

export class CpuRecording {
  private readonly calls: (() => void)[] = [];
  private replays = 0;

  /** Appends one call to the recording. */
  push(call: () => void): void { this.calls.push(call); }

  /** Runs every recorded call again, in order. */
  replay(): void {
    const calls = this.calls;
    for (let i = 0; i < calls.length; i++) calls[i]!();
    this.replays++;
  }

  stats(): { nodes: number; replays: number } { return { nodes: this.calls.length, replays: this.replays }; }
}

let active: CpuRecording | null = null;

/** The recording in progress, or null (checked on every CPU kernel call: keep it cheap). */
export function cpuRecording(): CpuRecording | null { return active; }

/**
 * Runs `fn` (which executes normally) while recording its CPU calls; returns the recording and fn's
 * result. A GraphCaptureError thrown inside abandons the recording and propagates.
 */
export function recordCpu<T>(fn: () => T): { recording: CpuRecording; result: T } {
  if (active) throw new GraphCaptureError('recordCpu', 'a CPU step recording is already in progress (recordings do not nest)');
  const recording = new CpuRecording();
  active = recording;
  try {
    return { recording, result: fn() };
  } finally {
    active = null;
  }
}

/** Refuses a host readback while recording (the step's control flow would depend on the value). */
export function refuseReadWhileRecording(op: string): void {
  if (active) throw new GraphCaptureError(op, `${op} reads a tensor's values on the host while a CPU step is being recorded; the replay could not repeat that decision`);
}

/**
 * Wraps a CPU kernel so that, while recording, its call is appended to the recording. A kernel that
 * returns something (a count, a host array) hands the host a value its caller decides with: refused.
 */
// eslint-disable-next-line @typescript-eslint/no-explicit-any
export function recordable<F extends (...args: any[]) => any>(name: string, fn: F): F {
  const wrapped = (...args: Parameters<F>): ReturnType<F> => {
    const r = fn(...args);
    if (active) {
      if (r !== undefined) throw new GraphCaptureError(name, `the CPU kernel '${name}' returns a host value (its output size or a count) and cannot be replayed`);
      active.push(() => fn(...args));
    }
    return r;
  };
  return wrapped as F;
}
