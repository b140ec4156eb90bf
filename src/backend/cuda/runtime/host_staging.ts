// Host staging on CUDA: a kernel without a CUDA implementation runs on the host with copies,
// announced once per kernel on stderr, counted, and refusable (NBX_CUDA_HOST_STAGING=0).

import { DTYPES, type DTypeName, type StorageArray } from '../../../dtype/dtypes.js';
import type { StridedRef } from '../../backend.js';
import { mapRefs } from '../../staged_args.js';
import { kernelCpu } from '../../../kernels/registry.js';
import type { KernelName } from '../../../kernels/table.js';
import { UnsupportedError } from '../../../errors.js';
import type { CudaBackend, CudaBuffer } from './backend.js';

const announced = new Set<string>();
export const stagingStats = new Map<string, number>();

/**
 * Runs a CPU kernel on CUDA tensors by copying their buffers to the host and back. Used only for
 * kernels without a CUDA implementation yet; announced once per kernel on stderr, counted in
 * stagingStats, and refused altogether with NBX_CUDA_HOST_STAGING=0.
 */
export function hostStaged(be: CudaBackend, name: KernelName): (...args: unknown[]) => unknown {
  const cpu = kernelCpu(name) as (...args: unknown[]) => unknown;
  return (...args: unknown[]) => {
    if (process.env.NBX_CUDA_HOST_STAGING === '0') throw new UnsupportedError(name, `no CUDA kernel for '${name}' yet, and host staging is off (NBX_CUDA_HOST_STAGING=0)`);
    if (!announced.has(name)) {
      announced.add(name);
      process.stderr.write(`nbx: '${name}' has no CUDA kernel yet; it runs on the host with copies (set NBX_CUDA_HOST_STAGING=0 to refuse)\n`);
    }
    stagingStats.set(name, (stagingStats.get(name) ?? 0) + 1);
    const host = new Map<unknown, { arr: StorageArray; dtype: DTypeName }>();
    const mapRef = (r: StridedRef): StridedRef => {
      let h = host.get(r.buf);
      if (!h) {
        const b = r.buf as CudaBuffer;
        const lanes = DTYPES[r.dtype].lanes, isz = DTYPES[r.dtype].itemsize;
        h = { arr: be.downloadSync(b, r.dtype, 0, Math.floor(b.bytes / isz)) as StorageArray, dtype: r.dtype };
        void lanes;
        host.set(r.buf, h);
      }
      return { ...r, buf: h.arr };
    };
    const result = cpu(...args.map((a) => mapRefs(a, mapRef)));
    for (const [buf, h] of host) be.ctx.copyHtoD((buf as CudaBuffer).ptr, h.arr, h.arr.byteLength, be.stream);
    be.stream.synchronize();
    return result;
  };
}
