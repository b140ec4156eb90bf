// CPU row reductions and scans over a contiguous [rows, n] operand. Accumulation is in double (int64
// sums exact through BigInt when they leave the safe-integer range), so float32/float16 results are at
// least as accurate as PyTorch's.

import type { StorageArray } from '../../../dtype/dtypes.js';
import { readNumber, writeNumber } from '../../../dtype/convert.js';
import type { StridedRef } from '../../backend.js';
import type { BackendKernels } from '../../../kernels/table.js';


const DIRECT = new Set(['f32', 'f64', 'i32', 'i16', 'i8', 'u8']);
import { DTYPES } from '../../../dtype/dtypes.js';
import type { ReduceKind, RowLayout, ScanKind } from '../../../kernels/reduce.js';

/** Returns an accessor to row `r` as numbers: the storage itself when it can be read directly, else a decoded copy. */
function rowAccess(ref: StridedRef, n: number, lay: RowLayout): (r: number) => [ArrayLike<number>, number] {
  const arr = ref.buf as StorageArray;
  if (DIRECT.has(DTYPES[ref.dtype].storage) && lay.colStride === 1) return (r) => [arr as unknown as ArrayLike<number>, ref.offset + r * lay.rowStride];
  const buf = new Float64Array(n);
  return (r) => {
    const base = ref.offset + r * lay.rowStride;
    for (let j = 0; j < n; j++) buf[j] = readNumber(ref.dtype, arr, base + j * lay.colStride);
    return [buf, 0];
  };
}

const VERTICAL = new Set<ReduceKind>(['sum', 'mean', 'max', 'min', 'any', 'all']);

/**
 * Reduces when rows are adjacent in memory and each row is strided (a sum over dim 0): walking the
 * reduced dim in the outer loop keeps every read sequential.
 */
function reduceVertical(kind: ReduceKind, input: StridedRef, rows: number, n: number, lay: RowLayout, out: StridedRef): void {
  const arr = input.buf as unknown as ArrayLike<number>;
  const acc = new Float64Array(rows);
  const first = input.offset;
  if (kind === 'sum' || kind === 'mean') {
    for (let j = 0; j < n; j++) { const b = first + j * lay.colStride; for (let r = 0; r < rows; r++) acc[r] += arr[b + r]!; }
    if (kind === 'mean') for (let r = 0; r < rows; r++) acc[r] /= n;
  } else if (kind === 'max' || kind === 'min') {
    for (let r = 0; r < rows; r++) acc[r] = arr[first + r]!;
    const isMax = kind === 'max';
    for (let j = 1; j < n; j++) {
      const b = first + j * lay.colStride;
      for (let r = 0; r < rows; r++) {
        const x = arr[b + r]!, c = acc[r]!;
        if (x !== x || (isMax ? x > c : x < c)) { if (c === c) acc[r] = x; }
      }
    }
  } else {
    const isAny = kind === 'any';
    acc.fill(isAny ? 0 : 1);
    for (let j = 0; j < n; j++) { const b = first + j * lay.colStride; for (let r = 0; r < rows; r++) if ((arr[b + r] !== 0) === isAny) acc[r] = isAny ? 1 : 0; }
  }
  for (let r = 0; r < rows; r++) put(out, r, acc[r]!);
}

function put(out: StridedRef, i: number, v: number | bigint): void {
  const a = out.buf as StorageArray;
  if (typeof v === 'bigint') (a as BigInt64Array)[out.offset + i] = v;
  else writeNumber(out.dtype, a, out.offset + i, v);
}

export function cpuReduce(kind: ReduceKind, input: StridedRef, rows: number, n: number, params: number[], out: StridedRef,
  outIndex?: StridedRef, layout?: RowLayout): void {
  const lay = layout ?? { rowStride: n, colStride: 1 };
  const direct = DIRECT.has(DTYPES[input.dtype].storage);
  if (direct && lay.colStride !== 1 && lay.rowStride === 1 && VERTICAL.has(kind) && !outIndex && n > 0) {
    reduceVertical(kind, input, rows, n, lay, out);
    return;
  }
  const row = rowAccess(input, n, lay);
  const in64 = input.dtype === 'int64';
  const at = (r: number, j: number): number => input.offset + r * lay.rowStride + j * lay.colStride;
  for (let r = 0; r < rows; r++) {
    const [a, b] = row(r);
    const e = b + n;
    let v: number | bigint;
    switch (kind) {
      case 'sum': case 'mean': {
        let s = 0, big = 0;
        for (let j = b; j < e; j++) { const x = a[j]!; s += x; if (in64 && (x > big || -x > big)) big = Math.abs(x); }
        // int64: the double sum is exact only while every partial sum stays within 2^53
        if (in64 && kind === 'sum' && big * n > 2 ** 53) {
          let t = 0n;
          const arr = input.buf as BigInt64Array;
          for (let j = 0; j < n; j++) t += arr[at(r, j)]!;
          v = BigInt.asIntN(64, t);
        } else v = kind === 'mean' ? s / n : s;
        break;
      }
      case 'prod': {
        if (in64) {
          let q = 1n;
          const arr = input.buf as BigInt64Array;
          for (let j = 0; j < n; j++) q = BigInt.asIntN(64, q * arr[at(r, j)]!);
          v = out.dtype === 'int64' ? q : Number(q);
        } else if (out.dtype === 'int64') {
          let p = 1n;
          for (let j = b; j < e; j++) p = BigInt.asIntN(64, p * BigInt(Math.trunc(a[j]!)));
          v = p;
        } else {
          let p = 1;
          for (let j = b; j < e; j++) p *= a[j]!;
          v = p;
        }
        break;
      }
      case 'max': case 'min': case 'argmax': case 'argmin': {
        const isMax = kind === 'max' || kind === 'argmax';
        let best = a[b]!, bi = 0;
        if (in64) {
          // compare the int64 values themselves: distinct values can be equal as doubles
          const arr = input.buf as BigInt64Array;
          let bb = arr[at(r, 0)]!;
          for (let j = 1; j < n; j++) { const x = arr[at(r, j)]!; if (isMax ? x > bb : x < bb) { bb = x; bi = j; } }
        } else if (best === best) {
          for (let j = b + 1; j < e; j++) {
            const x = a[j]!;
            if (x !== x) { best = x; bi = j - b; break; } // NaN wins, first occurrence
            if (isMax ? x > best : x < best) { best = x; bi = j - b; }
          }
        }
        if (kind === 'argmax' || kind === 'argmin') v = BigInt(bi);
        else v = in64 ? (input.buf as BigInt64Array)[at(r, bi)]! : best;
        if (outIndex) put(outIndex, r, BigInt(bi));
        break;
      }
      case 'any': { let f = 0; for (let j = b; j < e; j++) if (a[j] !== 0) { f = 1; break; } v = f; break; }
      case 'all': { let f = 1; for (let j = b; j < e; j++) if (a[j] === 0) { f = 0; break; } v = f; break; }
      case 'count_nonzero': { let cnt = 0; for (let j = b; j < e; j++) if (a[j] !== 0) cnt++; v = BigInt(cnt); break; }
      case 'var': {
        // two-pass: mean, then squared deviations; params[0] = correction
        let s = 0;
        for (let j = b; j < e; j++) s += a[j]!;
        const mean = s / n;
        let q = 0;
        for (let j = b; j < e; j++) { const d = a[j]! - mean; q += d * d; }
        v = q / Math.max(0, n - params[0]!);
        break;
      }
      case 'logsumexp': {
        let m = -Infinity;
        for (let j = b; j < e; j++) if (a[j]! > m || a[j] !== a[j]) m = a[j]!;
        const shift = Number.isFinite(m) ? m : 0;
        let s = 0;
        for (let j = b; j < e; j++) s += Math.exp(a[j]! - shift);
        v = Math.log(s) + shift;
        break;
      }
      case 'norm': {
        const p = params[0]!;
        let s = 0;
        if (p === Infinity) { for (let j = b; j < e; j++) { const x = Math.abs(a[j]!); if (x > s || x !== x) s = x; } v = s; }
        else if (p === -Infinity) { s = Infinity; for (let j = b; j < e; j++) { const x = Math.abs(a[j]!); if (x < s || x !== x) s = x; } v = s; }
        else if (p === 0) { for (let j = b; j < e; j++) if (a[j] !== 0) s++; v = s; }
        else if (p === 1) { for (let j = b; j < e; j++) s += Math.abs(a[j]!); v = s; }
        else if (p === 2) { for (let j = b; j < e; j++) s += a[j]! * a[j]!; v = Math.sqrt(s); }
        else { for (let j = b; j < e; j++) s += Math.abs(a[j]!) ** p; v = s ** (1 / p); }
        break;
      }
    }
    put(out, r, v);
  }
}

export function cpuScan(kind: ScanKind, input: StridedRef, rows: number, n: number, out: StridedRef, outIndex?: StridedRef): void {
  const row = rowAccess(input, n, { rowStride: n, colStride: 1 });
  const big = out.dtype === 'int64' && (kind === 'cumsum' || kind === 'cumprod');
  for (let r = 0; r < rows; r++) {
    const [a, b] = row(r);
    const base = r * n;
    if (big) {
      let acc = kind === 'cumsum' ? 0n : 1n;
      const src = input.dtype === 'int64' ? (input.buf as BigInt64Array) : null;
      for (let j = 0; j < n; j++) {
        const x = src ? src[input.offset + base + j]! : BigInt(Math.trunc(a[b + j]!));
        acc = BigInt.asIntN(64, kind === 'cumsum' ? acc + x : acc * x);
        put(out, base + j, acc);
      }
      continue;
    }
    if (kind === 'cumsum' || kind === 'cumprod') {
      let acc = kind === 'cumsum' ? 0 : 1;
      for (let j = 0; j < n; j++) { acc = kind === 'cumsum' ? acc + a[b + j]! : acc * a[b + j]!; put(out, base + j, acc); }
      continue;
    }
    const isMax = kind === 'cummax';
    let best = a[b]!, bi = 0;
    for (let j = 0; j < n; j++) {
      const x = a[b + j]!;
      // PyTorch: ties move the index forward (>=), NaN sticks once seen
      if (best === best && (x !== x || (isMax ? x >= best : x <= best))) { best = x; bi = j; }
      put(out, base + j, in64Value(input, base + bi, best));
      put(outIndex!, base + j, BigInt(bi));
    }
  }
}

function in64Value(input: StridedRef, i: number, v: number): number | bigint {
  return input.dtype === 'int64' ? (input.buf as BigInt64Array)[input.offset + i]! : v;
}

export const kernels = {
  reduce: cpuReduce,
  scan: cpuScan,
} satisfies BackendKernels;
