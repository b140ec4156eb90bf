// Small helpers shared by the CUDA kernel families: device pointers of refs, dtype checks with typed
// errors, loads/stores of values computed in double that round once into the destination dtype (as
// the CPU kernels do), and the pieces of the data-movement kernels (copy, indexing, sort): kernel
// parameter lists, N-d index decomposition, grid-stride loops, raw element words and their widening.

import { DTYPES, type DTypeName } from '../../../dtype/dtypes.js';
import { UnsupportedError } from '../../../errors.js';
import type { StridedRef } from '../../backend.js';
import { R, type CudaBuffer } from '../runtime/backend.js';
import type { ArgType } from '../runtime/driver.js';

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

// ---- data movement (copy, indexing, sort) ----------------------------------------------------------

/** Element types by size: copies move bits, whatever the dtype. */
export const RAW: Record<number, string> = { 1: 'unsigned char', 2: 'unsigned short', 4: 'unsigned int', 8: 'unsigned long long', 16: 'uint4' };
export const indexCType = (d: DTypeName): string => (d === 'int64' ? 'long long' : 'int');
/** Kernel parameters a launch may take (the driver's parameter block). */
export const MAX_ARGS = 64;

/** Kernel parameters: each C declaration next to its driver argument type, so the two never drift apart. */
export class Params {
  readonly decl: string[] = [];
  readonly sig: ArgType[] = [];
  private add(t: ArgType, c: string, names: string[]): this {
    for (const n of names) { this.decl.push(`${c} ${n}`); this.sig.push(t); }
    return this;
  }
  /** Pointers that never alias another parameter. */
  ptr(ctype: string, ...names: string[]): this { return this.add('ptr', `${ctype}* __restrict__`, names); }
  /** Pointers that may share a buffer with another parameter (copies within one tensor). */
  alias(ctype: string, ...names: string[]): this { return this.add('ptr', `${ctype}*`, names); }
  i64(...names: string[]): this { return this.add('i64', 'long long', names); }
  i32(...names: string[]): this { return this.add('i32', 'int', names); }
  f64(...names: string[]): this { return this.add('f64', 'double', names); }
  /** nd dims: the size s{d}, then the stride {op}_st{d} of each operand. */
  dims(nd: number, ops: readonly string[]): this {
    for (let d = 0; d < nd; d++) this.i64(`s${d}`, ...ops.map((o) => `${o}_st${d}`));
    return this;
  }
  get text(): string { return this.decl.join(', '); }
  fits(): boolean { return this.sig.length <= MAX_ARGS; }
}

/** Argument values matching Params.dims. */
export function dimArgs(shape: readonly number[], strides: readonly (readonly number[])[]): number[] {
  const out: number[] = [];
  shape.forEach((s, d) => { out.push(s, ...strides.map((st) => st[d]!)); });
  return out;
}

/**
 * Code turning a linear position `lin` (row-major over dims s0..s{nd-1}) into element offsets: for each
 * operand o, `o_off += coord * o_st{d}` (the `o_off` variables must exist). With `coords`, coordinate d is
 * also stored in `coords[d]`. `I` is the division type (32-bit where the positions fit).
 */
export function decompose(nd: number, ops: readonly string[], I: string, lin: string, coords?: string): string {
  if (nd === 0) return '';
  const parts = [`${I} rem_ = (${I})(${lin});`];
  for (let d = nd - 1; d >= 0; d--) {
    const c = d === 0 ? 'rem_' : `rem_ % (${I})s${d}`;
    parts.push(`{ const ${I} c_ = ${c};${d > 0 ? ` rem_ /= (${I})s${d};` : ''} ${ops.map((o) => `${o}_off += (long long)c_ * ${o}_st${d};`).join(' ')}${coords ? ` ${coords}[${d}] = (long long)c_;` : ''} }`);
  }
  return parts.join('\n      ');
}

/** Grid-stride loop header over [0, n) with index type I. */
export const gridLoop = (I: string, v: string, n: string): string =>
  `for (${I} ${v} = (${I})blockIdx.x * blockDim.x + threadIdx.x; ${v} < (${I})(${n}); ${v} += (${I})gridDim.x * blockDim.x)`;

/** An operand whose elements move as raw words: its strides (in elements), offset and base pointer. */
export interface WideOperand { strides: number[]; offset: number; ptr: bigint }

/**
 * How many elements of `isz` bytes move as one word (up to 16 bytes) when the last dim is contiguous in every
 * data operand and constant (stride 0) in every `fixed` one (an index), and sizes, the data operands' other
 * strides, offsets and base pointers and the element counts in `extra` all divide by it. 1: no widening.
 */
export function widenFactor(isz: number, shape: readonly number[], data: WideOperand[], fixed: number[][], extra: number[] = []): number {
  const nd = shape.length;
  if (nd === 0 || data.some((o) => o.strides[nd - 1] !== 1) || fixed.some((st) => st[nd - 1] !== 0)) return 1;
  for (const w of [16, 8, 4, 2]) {
    if (w <= isz || w % isz) continue;
    const f = w / isz;
    if (shape[nd - 1]! % f || extra.some((e) => e % f)) continue;
    if (data.every((o) => o.offset % f === 0 && o.ptr % BigInt(w) === 0n && o.strides.every((s, d) => d === nd - 1 || s % f === 0))) return f;
  }
  return 1;
}
/** Strides in units of f-element words (the last dim, contiguous, keeps stride 1). */
export const widenStrides = (st: number[], f: number): number[] => (f === 1 ? st : st.map((s, d) => (d === st.length - 1 ? 1 : s / f)));
