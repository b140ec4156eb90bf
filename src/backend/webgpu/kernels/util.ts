// Helpers shared by the WebGPU kernel families: the program cache, dispatch bindings, float bits and
// output stores.

import { DTYPES, type DTypeName } from '../../../dtype/dtypes.js';
import type { StridedRef } from '../../backend.js';
import { WGSL as R, perWord, checkWgslDType } from '../../../ir/render_wgsl.js';
import { UnsupportedError } from '../../../errors.js';
import type { Program, WebGPUBackend, WGBuffer } from '../runtime/backend.js';

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
