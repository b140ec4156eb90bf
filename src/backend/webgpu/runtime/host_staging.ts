// Host staging on WebGPU: a kernel without a WebGPU implementation runs on the host with copies,
// recorded in the command list like a dispatch, announced once per kernel, counted, and refusable
// (NBX_WEBGPU_HOST_STAGING=0).

import { DTYPES, type StorageArray } from '../../../dtype/dtypes.js';
import type { StridedRef } from '../../backend.js';
import { forEachRef, mapRefs } from '../../staged_args.js';
import { kernelCpu } from '../../../kernels/registry.js';
import type { KernelName } from '../../../kernels/table.js';
import { checkWgslDType } from '../../../ir/render_wgsl.js';
import { DeviceLimitError, UnsupportedError } from '../../../errors.js';
import type { WebGPUBackend, WGBuffer } from './backend.js';
import { env, notice } from './gpu.js';

const announced = new Set<string>();
export const stagingStats = new Map<string, number>();

/** Kernels whose result the caller needs synchronously (a count, sizes): they cannot be deferred. */
const RETURNS_VALUE = new Set(['unique']);

/**
 * Runs a CPU kernel on WebGPU tensors: at its place in the command list, the buffers it touches are
 * read back, the CPU kernel runs on the host copies, and every buffer is written back. It is recorded
 * like a dispatch, so the caller never waits (WebGPU cannot read back synchronously); a data-dependent
 * error of the kernel (an index out of range) surfaces at the next read. Announced once per kernel,
 * counted in stagingStats, refused with NBX_WEBGPU_HOST_STAGING=0.
 */
export function hostStaged(be: WebGPUBackend, name: KernelName): (...args: unknown[]) => unknown {
  const cpu = kernelCpu(name) as (...args: unknown[]) => unknown;
  return (...args: unknown[]) => {
    if (env('NBX_WEBGPU_HOST_STAGING') === '0') throw new UnsupportedError(name, `no WebGPU kernel for '${name}' yet, and host staging is off (NBX_WEBGPU_HOST_STAGING=0)`);
    if (RETURNS_VALUE.has(name)) throw new DeviceLimitError(name, `'${name}' returns data-dependent sizes, which needs a synchronous readback; WebGPU has none (run it on the CPU)`);
    const bufs: WGBuffer[] = [];
    for (const a of args) {
      forEachRef(a, (r) => { checkWgslDType(name, r.dtype, true); if (!bufs.includes(r.buf as WGBuffer)) bufs.push(r.buf as WGBuffer); });
    }
    if (!announced.has(name)) {
      announced.add(name);
      notice(`nbx: '${name}' has no WebGPU kernel yet; it runs on the host with copies (set NBX_WEBGPU_HOST_STAGING=0 to refuse)`);
    }
    stagingStats.set(name, (stagingStats.get(name) ?? 0) + 1);
    be.host(name, bufs, (host) => {
      const arrays = new Map<string, StorageArray>();
      const view = (r: StridedRef): StorageArray => {
        const ab = host.get(r.buf as WGBuffer)!;
        const k = `${bufs.indexOf(r.buf as WGBuffer)}:${r.dtype}`;
        let a = arrays.get(k);
        if (!a) {
          const ctor = { u8: Uint8Array, i8: Int8Array, i16: Int16Array, i32: Int32Array, i64: BigInt64Array, u16: Uint16Array, f32: Float32Array, f64: Float64Array }[DTYPES[r.dtype].storage];
          a = new ctor(ab, 0, Math.floor(ab.byteLength / ctor.BYTES_PER_ELEMENT)) as StorageArray;
          arrays.set(k, a);
        }
        return a;
      };
      cpu(...args.map((a) => mapRefs(a, (r) => ({ ...r, buf: view(r) }))));
    });
    return undefined;
  };
}
