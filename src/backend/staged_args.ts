// Host staging runs a CPU kernel on a device's tensors through host copies. These helpers find the
// StridedRefs among a kernel's arguments (positional, or fields of a parameter object, one level of
// arrays or objects deep), the same way on every backend.

import type { StridedRef } from './backend.js';

export function isStridedRef(v: unknown): v is StridedRef {
  return v !== null && typeof v === 'object' && 'buf' in v && 'dtype' in v && 'strides' in v && 'offset' in v;
}

/** `v` with every StridedRef inside it replaced by `f(ref)`; other values kept. */
export function mapRefs(v: unknown, f: (r: StridedRef) => StridedRef, depth = 0): unknown {
  if (isStridedRef(v)) return f(v);
  if (depth >= 2 || v === null || typeof v !== 'object' || ArrayBuffer.isView(v)) return v;
  if (Array.isArray(v)) return v.map((x) => mapRefs(x, f, depth + 1));
  if (Object.getPrototypeOf(v) === Object.prototype) return Object.fromEntries(Object.entries(v).map(([k, x]) => [k, mapRefs(x, f, depth + 1)]));
  return v;
}

/** Calls `f` on every StridedRef inside `v`. */
export function forEachRef(v: unknown, f: (r: StridedRef) => void): void {
  mapRefs(v, (r) => { f(r); return r; });
}
