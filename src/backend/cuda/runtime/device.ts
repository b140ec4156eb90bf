// What the runtime modules that backend.ts imports (the elementwise lowering, the launch batcher) see
// of the CUDA backend: its buffers and the calls that compile and launch kernels. CudaBackend
// (backend.ts) implements CudaDevice; those modules name this interface, never the class, so that no
// import (type-only included) runs back into backend.ts.

import type { DTypeName } from '../../../dtype/dtypes.js';
import type { CudaTuning } from '../tuning/spaces.js';
import type { ArgType, CudaContext, CudaKernel, KernelArg, Stream } from './driver.js';

/** A device buffer: the allocator's pointer and its size in bytes. */
export interface CudaBuffer { ptr: bigint; bytes: number }

/** The backend as the elementwise lowering uses it (implemented by CudaBackend). */
export interface CudaDevice {
  readonly ctx: CudaContext;
  readonly stream: Stream;
  readonly tuning: CudaTuning;
  /** Refuses a dtype the backend cannot hold (typed error naming the op). */
  checkDType(op: string, d: DTypeName): void;
  /** Compiles (once per key) and returns a kernel. */
  kernel(key: string, make: () => { src: string; name: string; sig: ArgType[] }): CudaKernel;
  launch(k: CudaKernel, grid: number, block: number, args: KernelArg[], smem?: number): void;
  /** Blocks for `work` items of `block` threads, at most `waves` per SM. */
  gridFor(work: number, block: number, waves?: number): number;
}
