// Timing shared by the GPU benchmarks: wall clock over back-to-back calls, closed by a device
// synchronize, after one warm-up call (which also compiles and tunes whatever the call needs).
import * as nbx from '../src/index.js';
import { timeBackToBack } from '../src/backend/cuda/kernels/gemv.js';

/** Seconds per call of `fn` on the CUDA backend. */
export async function timeCuda(fn: () => void, reps: number): Promise<number> {
  fn(); await nbx.cuda.synchronize();
  const t0 = performance.now();
  for (let i = 0; i < reps; i++) fn();
  await nbx.cuda.synchronize();
  return (performance.now() - t0) / 1000 / reps;
}

/** Samples of back-to-back calls each timed figure takes the best of, on both sides (run-to-run noise is ~1%). */
export const TRIALS = 3;

/**
 * Python for the PyTorch peers: `t(fn, reps)` = seconds per call of reps back-to-back calls between
 * CUDA events, the best of TRIALS samples (as timeEvents does for ours).
 */
export const TORCH_EVENT_TIMER = String.raw`
def t(fn, reps, trials=${TRIALS}):
    fn(); torch.cuda.synchronize()
    s = torch.cuda.Event(enable_timing=True); e = torch.cuda.Event(enable_timing=True)
    best = float('inf')
    for _ in range(trials):
        s.record()
        for _ in range(reps): fn()
        e.record(); torch.cuda.synchronize()
        best = min(best, s.elapsed_time(e) / 1000 / reps)
    return best
`;

/** Seconds per call of `fn` on the CUDA backend: reps back-to-back calls between CUDA events, best of TRIALS samples (the peer's `t`). */
export async function timeEvents(fn: () => void, reps: number): Promise<number> {
  fn(); await nbx.cuda.synchronize();
  let best = Infinity;
  for (let i = 0; i < TRIALS; i++) best = Math.min(best, timeBackToBack(nbx.cuda.backend(), fn, reps) / 1000);
  return best;
}
