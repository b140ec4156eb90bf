// Helpers shared by the WebGPU benchmarks (bench/webgpu.ts, bench/webgpu_reduce.ts).
import * as nbx from '../src/index.js';
import { elementwise } from '../src/ops/elementwise.js';
import type { Tensor } from '../src/tensor/tensor.js';
import { defaultCache, shapeBucket } from '../src/autotune/index.js';

export type Dev = 'webgpu' | 'cuda';

const T0 = performance.now();
/** Seconds since the benchmark started. */
export const secs = (): string => ((performance.now() - T0) / 1000).toFixed(1);
/** Milliseconds since the benchmark started. */
export const sinceStartMs = (): number => performance.now() - T0;
export const out = (s: string): void => { process.stdout.write(`${s}\n`); };

/** Waits for everything queued on the device. */
export async function sync(dev: Dev): Promise<void> {
  if (dev === 'webgpu') await nbx.webgpu.synchronize();
  else await nbx.cuda.synchronize();
}

/** a * x + b as one fused elementwise kernel. */
export const axpb = (x: Tensor, a: number, b: number): Tensor =>
  elementwise('axpb', [x, a, b], x.dt, x.dt, ([v, p, q]) => v!.mul(p!).add(q!));

/** A device tensor of n elements all `v`, made on the device (a host fill of 1 GiB takes many seconds). */
export function filledOn(dev: Dev, n: number, v: number, dtype: 'float32' | 'float16'): Tensor {
  const z = nbx.zeros([n], { dtype, device: dev });
  const x = nbx.add(z, v);
  z.dispose();
  return x;
}

/** Where the launch configurations of the benchmarks' big problems come from (user cache, shipped file, or the default). */
export function tuneSources(key: string, bytes: number, gemmM?: number): string {
  const cache = defaultCache();
  const parts: string[] = [];
  const q = (space: string, dims: number[], dtype: string): void => {
    const hit = cache.lookup(space, { shape: shapeBucket(dims), dtype, device: key });
    parts.push(`${space.replace('webgpu.', '')} ${dims.join('x')} ${dtype}: ${hit ? `${JSON.stringify(hit.entry.config)} from ${hit.source} (${hit.file.split('/').pop()})` : 'default'}`);
  };
  for (const [dt, isz] of [['float32', 4], ['float16', 2]] as const) {
    q('webgpu.elementwise', [bytes / isz], dt);
    q('webgpu.reduce', [bytes / isz / 16384, 16384], dt);
    q('webgpu.reduce', [1, bytes / isz], dt);
  }
  if (gemmM) q('webgpu.gemm', [gemmM, gemmM, gemmM], 'float32');
  return parts.join('; ');
}
