// Helpers shared by the WebGPU kernel families: the program cache, dispatch bindings, float bits,
// output stores, raw element loads/stores, N-d index decomposition, and index operands (int32/int64
// reads with a range flag, sign-extended writes, the recorded index error) for indexing, sort, nn,
// resample and the integer kernels.

import { DTYPES, type DTypeName } from '../../../dtype/dtypes.js';
import type { StridedRef } from '../../backend.js';
import { WGSL as R, perWord, checkWgslDType } from '../../../ir/render_wgsl.js';
import { UnsupportedError } from '../../../errors.js';
import type { Program, WebGPUBackend, WGBuffer } from '../runtime/backend.js';
import { U } from '../runtime/elementwise.js';

const programs = new Map<string, Program>();
export function program(key: string, access: string, words: number, source: () => string): Program {
  let p = programs.get(key);
  if (!p) { p = { key, access, words, source }; programs.set(key, p); }
  return p;
}

const f32s = new Float32Array(1), u32s = new Uint32Array(f32s.buffer);
export const f32w = (v: number): number => { f32s[0] = v; return u32s[0]!; };
export { nextPow2 } from '../../backend.js';

/** Buffers for a dispatch: the output first, inputs after; an input sharing the output's buffer reads a copy. */
export function bindings(be: WebGPUBackend, out: WGBuffer, ins: WGBuffer[]): { bufs: WGBuffer[]; idx: number[]; temp: WGBuffer | null } {
  const bufs = [out];
  const idx: number[] = [];
  let temp: WGBuffer | null = null;
  for (let b of ins) {
    if (b === out) {
      if (!temp) { temp = be.allocBytes(out.bytes); be.copyBuffer(out, temp, out.bytes); }
      b = temp;
    }
    let j = bufs.indexOf(b);
    if (j < 0) { bufs.push(b); j = bufs.length - 1; }
    idx.push(j + 1);
  }
  return { bufs, idx, temp };
}

/** Statements storing compute value `v` (of compute dtype `from`) as element `idx` of binding b1 (dtype `outD`). */
export function storeOut(outD: DTypeName, from: DTypeName, idx: string, v: string): string {
  const bits = R.bits(outD, R.castExpr(from, outD, v));
  return perWord(outD) > 1 ? R.storeShared(outD, 'b1', idx, bits) : `b1[${idx}] = ${bits};`;
}
/** The binding letter of a written operand: atomic words when 1/2-byte elements share a word. */
export const outAccess = (outD: DTypeName): string => (perWord(outD) > 1 ? 'a' : 'w');
/** Stores f32 value `v` as element `idx` of writable binding `buf` (atomic when packed). */
export const store = (d: DTypeName, buf: string, idx: string, v: string): string => {
  const bits = R.bits(d, R.castExpr('float32', d, v));
  return perWord(d) > 1 ? R.storeShared(d, buf, idx, bits) : `${buf}[${idx}] = ${bits};`;
};
/** Stores i32 value `v` as integer dtype d (the store wraps it, as C and PyTorch's integer kernels). */
export const storeInt = (d: DTypeName, buf: string, idx: string, v: string): string =>
  (perWord(d) > 1 ? R.storeShared(d, buf, idx, R.bits(d, v)) : `${buf}[${idx}] = ${R.bits(d, v)};`);
/** Refuses a non-float operand (and dtypes WGSL cannot hold) for a float-only kernel. */
export const checkFloat = (op: string, r: StridedRef | undefined): void => {
  if (!r) return;
  checkWgslDType(op, r.dtype);
  if (DTYPES[r.dtype].kind !== 'float') throw new UnsupportedError(op, `webgpu ${op} takes float tensors, got ${r.dtype}`);
};

// ---- data movement and index operands (indexing, sort, nn, resample, gemm_int, int64) ---------------

export const isFloat = (d: DTypeName): boolean => DTYPES[d].kind === 'float';
/** Statements storing compute value `v` (f32 for floats, i32 otherwise) as element `idx` of binding `buf` of dtype d. */
export const storeVal = (d: DTypeName, buf: string, idx: string, v: string): string => {
  const bits = R.bits(d, v);
  return perWord(d) > 1 ? R.storeShared(d, buf, idx, bits) : `${buf}[${idx}] = ${bits};`;
};
/** The compute value of element `idx` (a plain name) of a writable binding `buf` (atomic when packed). */
export const loadOut = (d: DTypeName, buf: string, idx: string): string =>
  (perWord(d) > 1 ? R.load(d, 'nbx_o', idx).replace(/nbx_o\[([^\]]*)\]/g, `atomicLoad(&${buf}[$1])`) : R.load(d, buf, idx));
/** The raw storage bits (u32, low bits) of element `idx` of read-only binding `buf`. */
export const rawLoad = (d: DTypeName, buf: string, idx: string): string => {
  const k = perWord(d);
  if (k === 1) return `${buf}[${idx}]`;
  return k === 2 ? `((${buf}[(${idx}) >> 1u] >> (((${idx}) & 1u) * 16u)) & 0xffffu)` : `((${buf}[(${idx}) >> 2u] >> (((${idx}) & 3u) * 8u)) & 0xffu)`;
};
export const rawStore = (d: DTypeName, buf: string, idx: string, bits: string): string =>
  (perWord(d) > 1 ? R.storeShared(d, buf, idx, bits) : `${buf}[${idx}] = ${bits};`);

/**
 * The buffers of a dispatch: the written ones first (distinct), then the read ones; a read operand in a
 * written buffer reads a copy taken first (WebGPU forbids a writable binding aliasing another binding).
 * `done()` frees the copies after the dispatches are recorded.
 */
export function bindAll(be: WebGPUBackend, written: WGBuffer[], read: WGBuffer[]): { bufs: WGBuffer[]; done: () => void } {
  const temps = new Map<WGBuffer, WGBuffer>();
  const bufs = [...written];
  for (const b of read) {
    if (!written.includes(b)) { bufs.push(b); continue; }
    let t = temps.get(b);
    if (!t) { t = be.allocBytes(b.bytes); be.copyBuffer(b, t, b.bytes); temps.set(b, t); }
    bufs.push(t);
  }
  return { bufs, done: () => { for (const t of temps.values()) be.free(t); } };
}

/**
 * WGSL turning row-major position `lin` over nd dims into offsets: dim d's size is uniform word
 * at + d*per, operand q's stride (elements, signed) word at + d*per + 1 + q; adds coord*stride to the
 * i32 variables `vars[q]` (declared by the caller). With `coords`, coordinate d goes to `coords[d]`.
 */
export function decompose(nd: number, at: number, per: number, vars: string[], lin: string, coords?: string): string {
  if (nd === 0) return '';
  const parts = [`var nbx_r = ${lin};`];
  for (let d = nd - 1; d >= 0; d--) {
    const w = at + d * per;
    parts.push(`{ let c = ${d > 0 ? `nbx_r % ${U(w)}; nbx_r = nbx_r / ${U(w)};` : 'nbx_r;'} ${vars.map((v, q) => `${v} += i32(c) * bitcast<i32>(${U(w + 1 + q)});`).join(' ')}${coords ? ` ${coords}[${d}] = c;` : ''} }`);
  }
  return parts.join('\n  ');
}
/** Uniform words for `decompose`: per dim, its size then each operand's stride. */
export const dimWords = (shape: readonly number[], strides: readonly (readonly number[])[]): number[] =>
  shape.flatMap((s, d) => [s, ...strides.map((st) => st[d]! >>> 0)]);


/** WGSL recording failing position `pos` (a u32 expression) in binding `buf`. */
export const recordErr = (buf: string, pos: string): string => `atomicMax(&${buf}[0], ~(${pos}));`;

/** Index tensors: int32 or int64. */
export function checkIndexDType(op: string, r: StridedRef): void {
  if (r.dtype !== 'int32' && r.dtype !== 'int64') throw new UnsupportedError(op, `webgpu index tensors are int32 or int64, got ${r.dtype}`);
}
/**
 * WGSL declaring `var v: i32`, index element `idx` (a u32 expression) of binding `buf` of dtype `d`
 * (int32 or int64), and `v_hi`, its high word (the sign extension of an int32): see `fitsI32`.
 */
export const loadIndex = (d: DTypeName, buf: string, idx: string, v: string): string => (d === 'int64'
  ? `let ${v}_at = 2u * (${idx}); var ${v} = bitcast<i32>(${buf}[${v}_at]); let ${v}_hi = ${buf}[${v}_at + 1u];`
  : `var ${v}: i32 = ${R.load(d, buf, idx)}; let ${v}_hi = select(0u, 0xffffffffu, ${v} < 0i);`);
/** WGSL: whether the index `v` read by loadIndex is an int32 (else out of range for any tensor a binding holds). */
export const fitsI32 = (v: string): string => `(${v}_hi == select(0u, 0xffffffffu, ${v} < 0i))`;
/** A statement storing i32 `v` as element `idx` of index binding `buf` of dtype `d` (int64: sign-extended). */
export const storeIndex = (d: DTypeName, buf: string, idx: string, v: string): string => (d === 'int64'
  ? `{ let nbx_j = 2u * (${idx}); let nbx_x: i32 = ${v}; ${buf}[nbx_j] = bitcast<u32>(nbx_x); ${buf}[nbx_j + 1u] = select(0u, 0xffffffffu, nbx_x < 0i); }`
  : `${buf}[${idx}] = bitcast<u32>(${v});`);

/**
 * The workgroup tree over `sh` (fixed order); leaves the merged value in `v` for every invocation, as a
 * uniform value (workgroupUniformLoad), so control flow may depend on it.
 */
export function tree(wg: number, v: string, merge: string): string {
  return `sh[lid] = ${v};
  workgroupBarrier();
  for (var s = ${wg / 2}u; s > 0u; s >>= 1u) {
    if (lid < s) { let a = sh[lid]; let b = sh[lid + s]; sh[lid] = ${merge}; }
    workgroupBarrier();
  }
  ${v} = workgroupUniformLoad(&sh[0]);
  workgroupBarrier();`;
}
