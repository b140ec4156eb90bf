// The sorting and selection family over contiguous [rows, n] operands: values and int64 indices out,
// with PyTorch's CPU tie and NaN order (NaN sorts as the largest value).

import type { StorageArray } from '../dtype/dtypes.js';
import type { StridedRef } from '../backend/backend.js';

/** unique's host-side result: the distinct values (sorted unless consecutive), inverse indices and counts. */
export interface UniqueResult { values: StorageArray; inverse: BigInt64Array; counts: BigInt64Array; groups: number }

export type SortKernel = (input: StridedRef, rows: number, n: number, descending: boolean, stable: boolean, values: StridedRef, indices: StridedRef) => void;
export type TopkKernel = (input: StridedRef, rows: number, n: number, k: number, largest: boolean, sorted: boolean, values: StridedRef, indices: StridedRef) => void;
export type KthvalueKernel = (input: StridedRef, rows: number, n: number, k: number, values: StridedRef, indices: StridedRef) => void;
export type MedianKernel = (input: StridedRef, rows: number, n: number, ignoreNan: boolean, values: StridedRef, indices: StridedRef) => void;
export type ModeKernel = (input: StridedRef, rows: number, n: number, values: StridedRef, indices: StridedRef) => void;
export type SearchsortedKernel = (boundaries: StridedRef, bRows: number, nb: number, input: StridedRef, rows: number, ni: number,
  right: boolean, sorter: StridedRef | null, out: StridedRef) => void;
export type UniqueKernel = (input: StridedRef, rows: number, rowLen: number, consecutive: boolean) => UniqueResult;
