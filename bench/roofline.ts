// The memory roofline the GPU benchmarks report against, measured in the same run: a device's streaming
// bandwidth as best of 5 `a + b` over float32 operands (3 × size bytes moved per call).
import * as nbx from '../src/index.js';

/** Waits for the device's queued work. */
export async function syncDevice(device: string): Promise<void> {
  if (device === 'cuda') await nbx.cuda.synchronize();
  else if (device === 'webgpu') await nbx.webgpu.synchronize();
}

/**
 * GB/s of `a + b` on `device`: 1 GiB operands on CUDA, 64 MiB elsewhere (past any CPU's L3, and within
 * every WebGPU adapter's binding limit, since WebGPU binds whole buffers).
 */
export async function measureStreamGBs(device: string): Promise<{ gbs: number; how: string }> {
  const n = device === 'cuda' ? 1 << 28 : 1 << 24;
  const a = nbx.ones([n], { device, dtype: 'float32' }), b = nbx.ones([n], { device, dtype: 'float32' });
  try {
    let best = Infinity;
    for (let i = 0; i < 6; i++) {
      await syncDevice(device);
      const t = performance.now();
      const c = a.add(b);
      await syncDevice(device);
      const ms = performance.now() - t;
      c.dispose();
      if (i > 0) best = Math.min(best, ms); // the first run compiles/tunes the kernel
    }
    return { gbs: (3 * 4 * n) / (best / 1000) / 1e9, how: `measured here: a + b, float32, ${(4 * n) / 2 ** 20} MiB operands, best of 5` };
  } finally { a.dispose(); b.dispose(); }
}
