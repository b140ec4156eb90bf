// CPU kernel for the shape family: one strided copy. Almost every shape operation (cat, stack, flip,
// roll, repeat, pad, pixel_shuffle, im2col, ...) is a set of strided views copied into a fresh output,
// so this is the only data-movement kernel the family needs. Strides may be negative (flip) or zero
// (broadcast / fill); dtypes must match (the op layer casts first), so elements are copied as stored.

import { DTYPES, type StorageArray } from '../../../dtype/dtypes.js';
import type { StridedRef } from '../../backend.js';
import type { BackendKernels } from '../../../kernels/table.js';
import { coalesce } from '../../../tensor/shape.js';

/** Complex elements as pairs of reals: a trailing lane dimension, so copies move both lanes. */
export function laneRef(r: StridedRef): StridedRef {
  const lanes = DTYPES[r.dtype].lanes;
  if (lanes === 1) return r;
  return { ...r, shape: [...r.shape, lanes], strides: [...r.strides.map((s) => s * lanes), 1], offset: r.offset * lanes };
}

type Arr = StorageArray & { [i: number]: number | bigint };

/** Copies one row of `n` elements: dst[d + k*ds] = src[s + k*ss]. */
function copyRow(dst: Arr, d: number, ds: number, src: Arr, s: number, ss: number, n: number): void {
  if (ds === 1 && ss === 1) {
    if (n > 32) dst.set(src.subarray(s, s + n) as never, d);
    else for (let k = 0; k < n; k++) dst[d + k] = src[s + k]!;
  } else if (ss === 0) {
    if (ds === 1) dst.fill(src[s] as never, d, d + n);
    else { const v = src[s]!; for (let k = 0; k < n; k++, d += ds) dst[d] = v; }
  } else {
    for (let k = 0; k < n; k++, d += ds, s += ss) dst[d] = src[s]!;
  }
}

/** dst[i] = src[i] for every index i of their (equal) shape. */
export function copyStrided(srcRef: StridedRef, dstRef: StridedRef): void {
  const src = laneRef(srcRef), dst = laneRef(dstRef);
  if (src.shape.some((s) => s === 0)) return;
  const { shape, strides } = coalesce(dst.shape, [[...dst.strides], [...src.strides]]);
  const ds = strides[0]!, ss = strides[1]!;
  const a = dst.buf as Arr, b = src.buf as Arr;
  const nd = shape.length;
  if (nd === 0) { a[dst.offset] = b[src.offset]!; return; }
  const inner = shape[nd - 1]!, dIn = ds[nd - 1]!, sIn = ss[nd - 1]!;
  if (nd === 1) { copyRow(a, dst.offset, dIn, b, src.offset, sIn, inner); return; }
  copyNd(a, dst.offset, ds, b, src.offset, ss, shape);
}

/**
 * The copy of two or more coalesced dims: two explicit loops (the last two dims), an odometer over the
 * rest. A function of its own so that the optimizing compiler handles it apart from the one-row copy
 * most small views take (smaller compiles; a new layout here does not deoptimize that path).
 */
function copyNd(a: Arr, dstOffset: number, ds: number[], b: Arr, srcOffset: number, ss: number[], shape: number[]): void {
  const nd = shape.length;
  const inner = shape[nd - 1]!, dIn = ds[nd - 1]!, sIn = ss[nd - 1]!;
  const mid = shape[nd - 2]!, dMid = ds[nd - 2]!, sMid = ss[nd - 2]!;
  const outer = shape.slice(0, nd - 2).reduce((x, y) => x * y, 1);
  const idx = new Array<number>(Math.max(nd - 2, 0)).fill(0);
  let dOff = dstOffset, sOff = srcOffset;
  for (let o = 0; o < outer; o++) {
    let d = dOff, s = sOff;
    for (let m = 0; m < mid; m++, d += dMid, s += sMid) copyRow(a, d, dIn, b, s, sIn, inner);
    for (let k = nd - 3; k >= 0; k--) {
      idx[k]!++;
      dOff += ds[k]!; sOff += ss[k]!;
      if (idx[k]! < shape[k]!) break;
      dOff -= ds[k]! * shape[k]!; sOff -= ss[k]! * shape[k]!;
      idx[k] = 0;
    }
  }
}

export const kernels = {
  copy_strided: copyStrided,
} satisfies BackendKernels;
