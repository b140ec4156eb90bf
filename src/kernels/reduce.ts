// The reduction family: `reduce` folds each row of a [rows, n] operand to one value (and, for
// argmax-like kinds, its index); `scan` writes the running value along each row.

import type { StridedRef } from '../backend/backend.js';

export type ReduceKind = 'sum' | 'prod' | 'max' | 'min' | 'argmax' | 'argmin' | 'any' | 'all' | 'count_nonzero'
  | 'mean' | 'var' | 'logsumexp' | 'norm';

export type ScanKind = 'cumsum' | 'cumprod' | 'cummax' | 'cummin';

/** Where element (r, j) of the [rows, n] operand lives: offset + r*rowStride + j*colStride. */
export interface RowLayout { rowStride: number; colStride: number }

/**
 * reduce(kind, input, rows, n, params, out, outIndex?, layout?): out[r] = fold of row r. `params` holds
 * the kind's numeric arguments; `layout` places row r's element j (default
 * contiguous rows); outIndex (int64) receives argmax/argmin and max/min indices.
 */
export type ReduceKernel = (kind: ReduceKind, input: StridedRef, rows: number, n: number, params: number[], out: StridedRef,
  outIndex?: StridedRef, layout?: RowLayout) => void;
/** scan(kind, input, rows, n, out, outIndex?): contiguous [rows, n] in and out; outIndex for cummax/cummin. */
export type ScanKernel = (kind: ScanKind, input: StridedRef, rows: number, n: number, out: StridedRef, outIndex?: StridedRef) => void;
