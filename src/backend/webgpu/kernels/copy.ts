// WebGPU kernel 'copy_strided' with the CPU kernel's signature (contract: src/kernels/copy.ts): a strided
// copy is the elementwise identity (a load, cast to the destination's dtype), so it runs through the
// backend's elementwise lowering with the output strided (any strides, negative included); complex
// elements move as pairs of float32 along a trailing dim.

import { DTYPES } from '../../../dtype/dtypes.js';
import { Expr } from '../../../ir/expr.js';
import type { StridedRef } from '../../backend.js';
import type { BackendKernels } from '../../../kernels/table.js';
import type { WebGPUBackend } from '../runtime/backend.js';
import { runElementwise } from '../runtime/elementwise.js';

let be: WebGPUBackend;
export const kernels = {
  copy_strided: webgpuCopyStrided,
} satisfies BackendKernels;

/** Points this family's kernels at the backend (called once, when the backend starts). */
export function bind(backend: WebGPUBackend): void {
  be = backend;
}

/** Copies `src` into `dst` (same shape; equal dtypes or a cast; any strides, negative included). */
export function webgpuCopyStrided(src: StridedRef, dst: StridedRef): void {
  const real = (r: StridedRef): StridedRef => (DTYPES[r.dtype].kind === 'complex'
    ? { ...r, dtype: 'float32', shape: [...r.shape, 2], strides: [...r.strides.map((s) => s * 2), 1], offset: r.offset * 2 }
    : r);
  const s = real(src), d = real(dst);
  runElementwise(be, Expr.load(0, s.dtype).cast(d.dtype), [s], [], d, true);
}
