// Timing shared by the GPU benchmarks: wall clock over back-to-back calls, closed by a device
// synchronize, after one warm-up call (which also compiles and tunes whatever the call needs).
import * as nbx from '../src/index.js';

/** Seconds per call of `fn` on the CUDA backend. */
export async function timeCuda(fn: () => void, reps: number): Promise<number> {
  fn(); await nbx.cuda.synchronize();
  const t0 = performance.now();
  for (let i = 0; i < reps; i++) fn();
  await nbx.cuda.synchronize();
  return (performance.now() - t0) / 1000 / reps;
}

/** Python for the PyTorch peers: `t(fn, reps)` = seconds per call of reps back-to-back calls, CUDA events. */
export const TORCH_EVENT_TIMER = String.raw`
def t(fn, reps):
    fn(); torch.cuda.synchronize()
    s = torch.cuda.Event(enable_timing=True); e = torch.cuda.Event(enable_timing=True)
    s.record()
    for _ in range(reps): fn()
    e.record(); torch.cuda.synchronize()
    return s.elapsed_time(e) / 1000 / reps
`;
