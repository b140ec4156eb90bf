// Small helpers shared by the CUDA kernel families (conv, pool, resample, fft, losses): device
// pointers of refs, dtype checks with typed errors, and loads/stores of values computed in double
// that round once into the destination dtype (as the CPU kernels do).

import { DTYPES, type DTypeName } from '../../../dtype/dtypes.js';
import { UnsupportedError } from '../../../errors.js';
import type { StridedRef } from '../../backend.js';
import { R, type CudaBuffer } from '../runtime/backend.js';

/** The buffer's base pointer (kernels add the element offset themselves), 0 for an absent ref. */
export const basePtr = (r: StridedRef | null | undefined): bigint => (r ? (r.buf as CudaBuffer).ptr : 0n);

export const numel = (shape: readonly number[]): number => shape.reduce((a, b) => a * b, 1);
export const isFloat = (d: DTypeName): boolean => DTYPES[d].kind === 'float' && !DTYPES[d].storageOnly;

/** A typed refusal naming the kernel, the dtype it got and the ones it takes. */
export function requireDType(op: string, d: DTypeName, ok: readonly DTypeName[]): void {
  if (!ok.includes(d)) throw new UnsupportedError(op, `cuda '${op}' kernel does not support dtype ${d} (supported: ${ok.join(', ')})`);
}

export const FLOATS: readonly DTypeName[] = ['float32', 'float64', 'float16', 'bfloat16'];
export const INTS: readonly DTypeName[] = ['uint8', 'int8', 'int16', 'int32', 'int64'];

/**
 * double → float16/bfloat16 with one rounding: round to odd into float first (exact information about
 * the discarded bits is kept in the last bit), then round to nearest even into the narrow format.
 */
export const NARROW_SRC = String.raw`
__device__ __forceinline__ float nbx_d2f_odd(double x) {
  float r = __double2float_rz(x);
  if (!isnan(x) && (double)r != x) r = __uint_as_float(__float_as_uint(r) | 1u);
  return r;
}`;

/** `(double)` value of element idx of a dtype-`d` array (float16/bfloat16 decoded, ints widened). */
export const loadD = (d: DTypeName, ptr: string, idx: string): string => `((double)${R.load(d, ptr, idx)})`;

/** Stores a double value into a dtype-`d` array, rounding once (needs NARROW_SRC for the half types). */
export function storeD(d: DTypeName, ptr: string, idx: string, v: string): string {
  if (d === 'float16' || d === 'bfloat16') return R.store(d, ptr, idx, `nbx_d2f_odd(${v})`);
  if (d === 'float32') return `${ptr}[${idx}] = (float)(${v});`;
  if (d === 'float64') return `${ptr}[${idx}] = (double)(${v});`;
  return R.store(d, ptr, idx, v);
}

/**
 * The integer type kernels index with: 32-bit when every index fits, with headroom for a grid-stride
 * loop's last step (index + grid size) so the loop variable cannot overflow.
 */
export const indexType = (maxIndex: number): 'int' | 'long long' => (maxIndex < 2 ** 31 - 2 ** 26 ? 'int' : 'long long');

/**
 * cp.async: 16 bytes global → shared (`ok` false: zero fill, nothing read), commit a group, wait until
 * at most N groups are pending. CP_ASYNC_EMU is the host emulator's form (a plain copy; nothing pends).
 */
export const CP_ASYNC_DEVICE = String.raw`__device__ __forceinline__ void cp16(void* dst, const void* src, bool ok) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;" :: "r"((unsigned)__cvta_generic_to_shared(dst)), "l"(src), "r"(ok ? 16 : 0));
}
__device__ __forceinline__ void cp_commit() { asm volatile("cp.async.commit_group;"); }
template <int N> __device__ __forceinline__ void cp_wait() { asm volatile("cp.async.wait_group %0;" :: "n"(N)); }`;
export const CP_ASYNC_EMU = String.raw`__device__ __forceinline__ void cp16(void* dst, const void* src, bool ok) { if (ok) memcpy(dst, src, 16); else memset(dst, 0, 16); }
__device__ __forceinline__ void cp_commit() {}
template <int N> __device__ __forceinline__ void cp_wait() {}`;
