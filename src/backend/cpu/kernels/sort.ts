// CPU kernels: sorting and selection (sort, topk, kthvalue, median, mode, searchsorted, unique).
//
// Which of several equal elements ends up where (the indices PyTorch returns on ties) is decided by the
// exact algorithm PyTorch's CPU runs, so we run the same ones: libstdc++'s std::sort (introsort),
// std::partial_sort (heap select), std::nth_element (introselect), and TH's quick_select for kthvalue.
// They work here on a permutation `a` of element ids, with `less(x, y)` comparing the elements' keys;
// moving ids is exactly moving PyTorch's (value, index) pairs.

import { DTYPES, type StorageArray } from '../../../dtype/dtypes.js';
import { readNumber } from '../../../dtype/convert.js';
import type { StridedRef } from '../../backend.js';
import type { BackendKernels } from '../../../kernels/table.js';
import type { UniqueResult } from '../../../kernels/sort.js';

type Less = (x: number, y: number) => boolean;
/** A sequence the algorithms permute: element ids (Int32Array) or packed key-and-index values (Float64Array). */
type Ids = Int32Array | Float64Array;

// ---- libstdc++ algorithms (bits/stl_algo.h, bits/stl_heap.h) -------------------------------------

const THRESHOLD = 16;
const lg = (n: number): number => 31 - Math.clz32(n);
const half = (x: number): number => (x / 2) | 0; // C++ integer division truncates toward zero

function swap(a: Ids, i: number, j: number): void { const t = a[i]!; a[i] = a[j]!; a[j] = t; }

function unguardedLinearInsert(a: Ids, last: number, less: Less): void {
  const val = a[last]!;
  let next = last - 1;
  while (less(val, a[next]!)) { a[last] = a[next]!; last = next; next--; }
  a[last] = val;
}

function insertionSort(a: Ids, first: number, last: number, less: Less): void {
  if (first === last) return;
  for (let i = first + 1; i < last; i++) {
    if (less(a[i]!, a[first]!)) {
      const val = a[i]!;
      a.copyWithin(first + 1, first, i);
      a[first] = val;
    } else unguardedLinearInsert(a, i, less);
  }
}

function finalInsertionSort(a: Ids, first: number, last: number, less: Less): void {
  if (last - first > THRESHOLD) {
    insertionSort(a, first, first + THRESHOLD, less);
    for (let i = first + THRESHOLD; i < last; i++) unguardedLinearInsert(a, i, less);
  } else insertionSort(a, first, last, less);
}

function moveMedianToFirst(a: Ids, result: number, x: number, y: number, z: number, less: Less): void {
  const A = a[x]!, B = a[y]!, C = a[z]!;
  if (less(A, B)) {
    if (less(B, C)) swap(a, result, y);
    else if (less(A, C)) swap(a, result, z);
    else swap(a, result, x);
  } else if (less(A, C)) swap(a, result, x);
  else if (less(B, C)) swap(a, result, z);
  else swap(a, result, y);
}

function unguardedPartition(a: Ids, first: number, last: number, pivot: number, less: Less): number {
  const p = a[pivot]!;
  // Bounds guards only matter for comparators that are not strict weak orders (mode's `<` with NaN),
  // where C++ has undefined behaviour; they never trigger otherwise.
  const lo = first - 1, hi = last;
  for (;;) {
    while (first < hi && less(a[first]!, p)) first++;
    last--;
    while (last > lo && less(p, a[last]!)) last--;
    if (!(first < last)) return first;
    swap(a, first, last);
    first++;
  }
}

function unguardedPartitionPivot(a: Ids, first: number, last: number, less: Less): number {
  const mid = first + half(last - first);
  moveMedianToFirst(a, first, first + 1, mid, last - 1, less);
  return unguardedPartition(a, first + 1, last, first, less);
}

function pushHeap(a: Ids, first: number, hole: number, top: number, value: number, less: Less): void {
  let parent = half(hole - 1);
  while (hole > top && less(a[first + parent]!, value)) {
    a[first + hole] = a[first + parent]!;
    hole = parent;
    parent = half(hole - 1);
  }
  a[first + hole] = value;
}

function adjustHeap(a: Ids, first: number, hole: number, len: number, value: number, less: Less): void {
  const top = hole;
  let second = hole;
  while (second < half(len - 1)) {
    second = 2 * (second + 1);
    if (less(a[first + second]!, a[first + second - 1]!)) second--;
    a[first + hole] = a[first + second]!;
    hole = second;
  }
  if ((len & 1) === 0 && second === half(len - 2)) {
    second = 2 * (second + 1);
    a[first + hole] = a[first + second - 1]!;
    hole = second - 1;
  }
  pushHeap(a, first, hole, top, value, less);
}

function makeHeap(a: Ids, first: number, last: number, less: Less): void {
  const len = last - first;
  if (len < 2) return;
  for (let parent = half(len - 2); ; parent--) {
    adjustHeap(a, first, parent, len, a[first + parent]!, less);
    if (parent === 0) return;
  }
}

function popHeap(a: Ids, first: number, last: number, result: number, less: Less): void {
  const value = a[result]!;
  a[result] = a[first]!;
  adjustHeap(a, first, 0, last - first, value, less);
}

function heapSelect(a: Ids, first: number, middle: number, last: number, less: Less): void {
  makeHeap(a, first, middle, less);
  for (let i = middle; i < last; i++) if (less(a[i]!, a[first]!)) popHeap(a, first, middle, i, less);
}

function sortHeap(a: Ids, first: number, last: number, less: Less): void {
  while (last - first > 1) { last--; popHeap(a, first, last, last, less); }
}

/** std::partial_sort */
export function partialSort(a: Ids, first: number, middle: number, last: number, less: Less): void {
  heapSelect(a, first, middle, last, less);
  sortHeap(a, first, middle, less);
}

function introsortLoop(a: Ids, first: number, last: number, depth: number, less: Less): void {
  while (last - first > THRESHOLD) {
    if (depth === 0) { partialSort(a, first, last, last, less); return; }
    depth--;
    const cut = unguardedPartitionPivot(a, first, last, less);
    introsortLoop(a, cut, last, depth, less);
    last = cut;
  }
}

/** std::sort */
export function stdSort(a: Ids, first: number, last: number, less: Less): void {
  if (first === last) return;
  introsortLoop(a, first, last, lg(last - first) * 2, less);
  finalInsertionSort(a, first, last, less);
}

/** std::nth_element */
export function nthElement(a: Ids, first: number, nth: number, last: number, less: Less): void {
  if (first === last || nth === last) return;
  let depth = lg(last - first) * 2;
  while (last - first > 3) {
    if (depth === 0) {
      heapSelect(a, first, nth + 1, last, less);
      swap(a, first, nth);
      return;
    }
    depth--;
    const cut = unguardedPartitionPivot(a, first, last, less);
    if (cut <= nth) first = cut; else last = cut;
  }
  insertionSort(a, first, last, less);
}

/** A stable sort (std::stable_sort's result is unique: equal elements keep their order). */
export function stableSort(a: Ids, first: number, last: number, less: Less, tmp?: Ids): void {
  const n = last - first;
  if (n < 2) return;
  const buf = tmp && tmp.length >= n ? tmp : new Float64Array(n);
  for (let w = 0; w < n; w += 16) insertionSort(a, first + w, first + Math.min(w + 16, n), less);
  let src: Ids = a, dst: Ids = buf, so = first, dO = 0;
  for (let width = 16; width < n; width *= 2) {
    for (let lo = 0; lo < n; lo += 2 * width) {
      const mid = Math.min(lo + width, n), hi = Math.min(lo + 2 * width, n);
      let i = lo, j = mid, k = lo;
      while (i < mid && j < hi) dst[dO + k++] = less(src[so + j]!, src[so + i]!) ? src[so + j++]! : src[so + i++]!;
      while (i < mid) dst[dO + k++] = src[so + i++]!;
      while (j < hi) dst[dO + k++] = src[so + j++]!;
    }
    [src, dst] = [dst, src];
    [so, dO] = [dO, so];
  }
  if (src !== a) a.set(src.subarray(so, so + n), first);
}

// ---- keys and comparators ------------------------------------------------------------------------

/** Keys: element values in an order-preserving JS form (numbers; int64 as bigint when beyond 2^53). */
export type Keys = ArrayLike<number>;

/** Row `r` (length n) of a contiguous [rows, n] operand as comparable keys. */
export function readKeys(ref: StridedRef, start: number, n: number, into?: Float64Array): Keys {
  const arr = ref.buf as StorageArray;
  const base = ref.offset + start;
  if (ref.dtype === 'int64') {
    const src = arr as BigInt64Array;
    let safe = true;
    for (let j = 0; j < n; j++) { const v = src[base + j]!; if (v > 9007199254740992n || v < -9007199254740992n) { safe = false; break; } }
    if (!safe) return src.subarray(base, base + n) as unknown as Keys;
  }
  const out = into && into.length >= n ? into : new Float64Array(n);
  const info = DTYPES[ref.dtype];
  if (info.storage === 'u16' || ref.dtype === 'int64' || info.storageOnly) for (let j = 0; j < n; j++) out[j] = readNumber(ref.dtype, arr, base + j);
  else { const src = arr as Float64Array; for (let j = 0; j < n; j++) out[j] = src[base + j]!; }
  return out;
}

/** PyTorch's ascending order: NaN after everything. */
export const ascNanLast = (k: Keys): Less => (x, y) => { const a = k[x]!, b = k[y]!; return (a === a && b !== b) || a < b; };
/** PyTorch's descending order: NaN before everything. */
export const descNanFirst = (k: Keys): Less => (x, y) => { const a = k[x]!, b = k[y]!; return (a !== a && b === b) || a > b; };

const iota = (a: Ids, n: number): Ids => { for (let j = 0; j < n; j++) a[j] = j; return a; };

// ---- fast exact paths ------------------------------------------------------------------------------
//
// Keys that fit 32 bits (every dtype but float64/int64 values beyond float32/int32) become order-preserving
// unsigned integers. A stable sort is then an LSD radix sort; without equal keys every algorithm agrees,
// so that also answers std::sort. When std::sort must be emulated on ties, the elements are packed as
// key * 2^21 + index in one float64 array, so the algorithms read neighbouring memory instead of chasing
// indices, and two elements compare by their key bits alone: y - x >= 2^20 exactly when key(x) < key(y).

const SHIFT = 2 ** 21, TIE = 2 ** 20;
const lessPacked: Less = (x, y) => y - x >= TIE;
const f32 = new Float32Array(1), u32 = new Uint32Array(f32.buffer);

/** Order-preserving uint32 keys (NaN after everything; complemented for descending), or false if they do not fit. */
function orderKeys(keys: Keys, n: number, descending: boolean, isInt: boolean, out: Uint32Array): boolean {
  if (!(keys instanceof Float64Array)) return false;
  for (let j = 0; j < n; j++) {
    const v = keys[j]!;
    let o: number;
    if (v !== v) o = 0xffffffff;
    else if (isInt) {
      if (v < -2147483648 || v > 2147483647) return false;
      o = v + 2147483648;
    } else {
      if (Math.fround(v) !== v) return false;
      f32[0] = v === 0 ? 0 : v; // -0 ties with 0, as `<` says
      const b = u32[0]!;
      o = b & 0x80000000 ? ~b >>> 0 : (b | 0x80000000) >>> 0;
    }
    out[j] = descending ? 0xffffffff - o : o;
  }
  return true;
}

/**
 * Stable LSD radix sort of ids by unsigned keys of one or two 32-bit words (`hi` for 64-bit keys), 11-bit
 * digits; returns whether equal keys occurred.
 */
function radixSort(lo: Uint32Array, hi: Uint32Array | null, n: number, ids: Int32Array, tmp: Int32Array): boolean {
  // keys travel with their ids, so every pass reads memory in order; one read counts every digit
  let sLo = lo.slice(0, n), dLo = new Uint32Array(n), sHi = hi ? hi.slice(0, n) : sLo, dHi = hi ? new Uint32Array(n) : dLo;
  let srcI = iota(ids, n) as Int32Array, dstI = tmp;
  const passes = hi ? 6 : 3;
  const count = new Int32Array(passes * 2048);
  for (let j = 0; j < n; j++) {
    const k = sLo[j]!;
    count[k & 2047]!++; count[2048 + ((k >>> 11) & 2047)]!++; count[4096 + (k >>> 22)]!++;
    if (hi) { const h = sHi[j]!; count[6144 + (h & 2047)]!++; count[8192 + ((h >>> 11) & 2047)]!++; count[10240 + (h >>> 22)]!++; }
  }
  for (let pass = 0; pass < passes; pass++) {
    const base = pass * 2048, shift = (pass % 3) * 11, word = pass < 3 ? sLo : sHi;
    if (count[base + ((word[0]! >>> shift) & 2047)] === n) continue; // one digit value: nothing would move
    for (let d = 0, acc = 0; d < 2048; d++) { const c = count[base + d]!; count[base + d] = acc; acc += c; }
    for (let j = 0; j < n; j++) {
      const at = count[base + (((pass < 3 ? sLo : sHi)[j]! >>> shift) & 2047)]!++;
      dLo[at] = sLo[j]!; dstI[at] = srcI[j]!;
      if (hi) dHi[at] = sHi[j]!;
    }
    [sLo, dLo] = [dLo, sLo];
    if (hi) [sHi, dHi] = [dHi, sHi];
    [srcI, dstI] = [dstI, srcI];
  }
  if (srcI !== ids) ids.set(srcI.subarray(0, n));
  for (let j = 1; j < n; j++) if (sLo[j] === sLo[j - 1] && (!hi || sHi[j] === sHi[j - 1])) return true;
  return false;
}

const f64 = new Float64Array(1), w64 = new Uint32Array(f64.buffer);
const HI = new Uint8Array(new Uint16Array([1]).buffer)[0] === 1 ? 1 : 0; // the high word of a float64/int64
/** Order-preserving 64-bit keys as (lo, hi) words, for float64 values and int64 beyond 2^53. */
function orderKeys64(keys: Keys, n: number, descending: boolean, lo: Uint32Array, hi: Uint32Array): void {
  if (keys instanceof BigInt64Array) {
    const w = new Uint32Array(keys.buffer, keys.byteOffset, 2 * n);
    for (let j = 0; j < n; j++) { lo[j] = w[2 * j + 1 - HI]!; hi[j] = (w[2 * j + HI]! ^ 0x80000000) >>> 0; }
  } else {
    for (let j = 0; j < n; j++) {
      const v = keys[j]!;
      if (v !== v) { lo[j] = 0xffffffff; hi[j] = 0xffffffff; continue; }
      f64[0] = v === 0 ? 0 : v;
      const h = w64[HI]!, l = w64[1 - HI]!;
      if (h & 0x80000000) { hi[j] = ~h >>> 0; lo[j] = ~l >>> 0; } else { hi[j] = (h | 0x80000000) >>> 0; lo[j] = l; }
    }
  }
  if (descending) for (let j = 0; j < n; j++) { lo[j] = 0xffffffff - lo[j]!; hi[j] = 0xffffffff - hi[j]!; }
}

/** Packs keys with their indices (see above); false when a row is too long to pack. */
function pack(o: Uint32Array, n: number, out: Float64Array): boolean {
  if (n > TIE) return false;
  for (let j = 0; j < n; j++) out[j] = o[j]! * SHIFT + j;
  return true;
}
const unpack = (p: Float64Array, n: number, ids: Ids): void => { for (let j = 0; j < n; j++) ids[j] = p[j]! % SHIFT; };

/** Per-kernel scratch buffers for rows of length n. */
function scratchFor(n: number) {
  return { keys: new Float64Array(n), o: new Uint32Array(n), hi: new Uint32Array(n), packed: new Float64Array(n), ids: new Int32Array(n), tmp: new Int32Array(n) };
}
type Scratch = ReturnType<typeof scratchFor>;

/** Sorts ids 0..n-1 by keys exactly as PyTorch's CPU: stable_sort, or std::sort (differs only on ties). */
function sortIds(keys: Keys, n: number, descending: boolean, stable: boolean, isInt: boolean, s: Scratch): void {
  const fits = orderKeys(keys, n, descending, isInt, s.o);
  if (!fits) orderKeys64(keys, n, descending, s.o, s.hi);
  const ties = radixSort(s.o, fits ? null : s.hi, n, s.ids, s.tmp);
  if (!ties || stable) return;
  if (fits && pack(s.o, n, s.packed)) { stdSort(s.packed, 0, n, lessPacked); unpack(s.packed, n, s.ids); return; }
  const less = descending ? descNanFirst(keys) : ascNanLast(keys);
  iota(s.ids, n);
  if (stable) stableSort(s.ids, 0, n, less, s.tmp); else stdSort(s.ids, 0, n, less);
}

const LITTLE_ENDIAN = new Uint8Array(new Uint16Array([1]).buffer)[0] === 1;
/** Writes small non-negative indices into an int64 (through its 32-bit halves: no BigInt per element) or int32 output. */
function indexWriter(out: StridedRef): (i: number, v: number) => void {
  const o = out.offset;
  if (out.dtype !== 'int64') { const w = out.buf as Int32Array; return (i, v) => { w[o + i] = v; }; }
  const b = out.buf as BigInt64Array;
  if (!LITTLE_ENDIAN) return (i, v) => { b[o + i] = BigInt(v); };
  const w = new Int32Array(b.buffer, b.byteOffset, b.length * 2);
  return (i, v) => { w[2 * (o + i)] = v; w[2 * (o + i) + 1] = 0; };
}
const isIntKeys = (ref: StridedRef): boolean => DTYPES[ref.dtype].kind !== 'float';

/** Copies element `src` of `input` to element `dst` of `out` (raw storage: bit-exact for every dtype). */
function copyElem(out: StridedRef, dst: number, input: StridedRef, src: number): void {
  (out.buf as Float64Array)[out.offset + dst] = (input.buf as Float64Array)[input.offset + src]!;
}
/** out[base + j] = input[from + ids[j]] for j < count: the raw elements in the chosen order. */
function gather(out: StridedRef, base: number, input: StridedRef, from: number, ids: Ids, count: number): void {
  const o = out.buf as Float64Array, i = input.buf as Float64Array;
  const ob = out.offset + base, ib = input.offset + from;
  for (let j = 0; j < count; j++) o[ob + j] = i[ib + ids[j]!]!;
}

// ---- kernels -------------------------------------------------------------------------------------

/** sort over the last dim of a contiguous [rows, n] operand. */
export function cpuSort(input: StridedRef, rows: number, n: number, descending: boolean, stable: boolean,
  values: StridedRef, indices: StridedRef): void {
  const s = scratchFor(n), a = s.ids;
  const put = indexWriter(indices), isInt = isIntKeys(input);
  for (let r = 0; r < rows; r++) {
    const keys = readKeys(input, r * n, n, s.keys);
    sortIds(keys, n, descending, stable, isInt, s);
    gather(values, r * n, input, r * n, a, n);
    for (let j = 0; j < n; j++) put(r * n + j, a[j]!);
  }
}

/** topk over the last dim, as ATen's topk_impl_loop: partial_sort when k is small, else nth_element + sort. */
export function cpuTopk(input: StridedRef, rows: number, n: number, k: number, largest: boolean, sorted: boolean,
  values: StridedRef, indices: StridedRef): void {
  if (k === 0) return;
  const s = scratchFor(n), a = s.ids;
  const put = indexWriter(indices), isInt = isIntKeys(input);
  for (let r = 0; r < rows; r++) {
    const keys = readKeys(input, r * n, n, s.keys);
    const fits = orderKeys(keys, n, largest, isInt, s.o);
    if (k * 64 <= n) partialSort(iota(a, n), 0, k, n, largest ? descNanFirst(keys) : ascNanLast(keys));
    // without equal keys the answer is the sorted order, whatever the algorithm
    else if (!(sorted && fits && !radixSort(s.o, null, n, a, s.tmp))) {
      const packed = fits && pack(s.o, n, s.packed);
      const seq = packed ? s.packed : iota(a, n), less = packed ? lessPacked : largest ? descNanFirst(keys) : ascNanLast(keys);
      nthElement(seq, 0, k - 1, n, less);
      if (sorted) stdSort(seq, 0, k - 1, less);
      if (packed) unpack(s.packed, k, a);
    }
    gather(values, r * k, input, r * n, a, k);
    for (let j = 0; j < k; j++) put(r * k + j, a[j]!);
  }
}

/** kthvalue over the last dim: TH's quick_select (median of three, Sedgewick partition), as ATen's CPU. */
export function cpuKthvalue(input: StridedRef, rows: number, n: number, k: number, values: StridedRef, indices: StridedRef): void {
  const s = scratchFor(n);
  const put = indexWriter(indices), isInt = isIntKeys(input);
  for (let r = 0; r < rows; r++) {
    const keys = readKeys(input, r * n, n, s.keys);
    // "greater than, or NaN": NaN sorts last, as in the ascending packing
    const packed = orderKeys(keys, n, false, isInt, s.o) && pack(s.o, n, s.packed);
    const seq = packed ? s.packed : iota(s.ids, n);
    quickSelect(seq, n, k - 1, packed ? (x, y) => x - y >= TIE : descNanFirst(keys));
    const id = packed ? s.packed[k - 1]! % SHIFT : s.ids[k - 1]!;
    copyElem(values, r, input, r * n + id);
    put(r, id);
  }
}

function quickSelect(a: Ids, n: number, k: number, gt: Less): void {
  let L = 0, R = n - 1;
  for (;;) {
    if (R <= L) return;
    if (R === L + 1) { if (gt(a[L]!, a[R]!)) swap(a, L, R); return; }
    const P = (L + R) >> 1;
    swap(a, P, L + 1);
    if (gt(a[L + 1]!, a[R]!)) swap(a, L + 1, R);
    if (gt(a[L]!, a[R]!)) swap(a, L, R);
    if (gt(a[L + 1]!, a[L]!)) swap(a, L + 1, L);
    let i = L + 1, j = R;
    const piv = a[L]!;
    for (;;) {
      do i++; while (i <= R && gt(piv, a[i]!));
      do j--; while (j >= L && gt(a[j]!, piv));
      if (j < i) break;
      swap(a, i, j);
    }
    swap(a, L, j);
    if (j <= k) L = i;
    if (j >= k) R = j - 1;
  }
}

/**
 * median / nanmedian over the last dim with indices, as ATen: median returns the first NaN if any;
 * otherwise nth_element with ties broken by index (so the result is the stable-order element).
 */
export function cpuMedian(input: StridedRef, rows: number, n: number, ignoreNan: boolean, values: StridedRef, indices: StridedRef): void {
  const a = new Int32Array(n), scratch = new Float64Array(n);
  const put = indexWriter(indices);
  for (let r = 0; r < rows; r++) {
    const keys = readKeys(input, r * n, n, scratch);
    let nan = -1, nanCount = 0;
    for (let j = 0; j < n; j++) if (keys[j] !== keys[j]) { if (nan < 0) nan = j; nanCount++; }
    let pick: number;
    if (!ignoreNan && nan >= 0) pick = nan;
    else {
      iota(a, n);
      const nth = half(n - nanCount - 1);
      const less: Less = (i, j) => {
        const x = keys[i]!, y = keys[j]!;
        return x < y || (x === y && i < j) || (ignoreNan && y !== y && x === x);
      };
      nthElement(a, 0, nth, n, less);
      pick = a[nth]!;
    }
    copyElem(values, r, input, r * n + pick);
    put(r, pick);
  }
}

/** mode over the last dim, as ATen's CPU: std::sort of (value, index) by value, last index of the longest run. */
export function cpuMode(input: StridedRef, rows: number, n: number, values: StridedRef, indices: StridedRef): void {
  const s = scratchFor(n), a = s.ids;
  const put = indexWriter(indices), isInt = isIntKeys(input);
  for (let r = 0; r < rows; r++) {
    const keys = readKeys(input, r * n, n, s.keys);
    // ATen compares with a bare `<`: NaN is then equivalent to everything, which packing cannot express
    let nan = false;
    for (let j = 0; j < n && !nan; j++) nan = keys[j] !== keys[j];
    if (!nan && orderKeys(keys, n, false, isInt, s.o) && pack(s.o, n, s.packed)) {
      stdSort(s.packed, 0, n, lessPacked);
      unpack(s.packed, n, a);
    } else stdSort(iota(a, n), 0, n, (x, y) => keys[x]! < keys[y]!);
    let modei = 0, freq = 0, best = 0;
    for (let i = 0; i < n; i++) {
      freq++;
      if (i === n - 1 || keys[a[i]!] !== keys[a[i + 1]!]) {
        if (freq > best) { modei = a[i]!; best = freq; }
        freq = 0;
      }
    }
    copyElem(values, r, input, r * n + modei);
    put(r, modei);
  }
}

/**
 * searchsorted: `boundaries` is [bRows, nb] (bRows 1: shared by every input), `input` [rows, ni], both contiguous
 * and of one dtype; `sorter` (optional, int64, like boundaries) gives each row's ascending order.
 */
export function cpuSearchsorted(boundaries: StridedRef, bRows: number, nb: number, input: StridedRef, rows: number, ni: number,
  right: boolean, sorter: StridedRef | null, out: StridedRef): void {
  const inKeys = readKeys(input, 0, rows * ni);
  const st = sorter ? (sorter.buf as BigInt64Array) : null;
  const order = new Int32Array(nb);
  const put = indexWriter(out);
  for (let r = 0; r < rows; r++) {
    const br = bRows === 1 ? 0 : r;
    const bd = readKeys(boundaries, br * nb, nb);
    if (st) for (let j = 0; j < nb; j++) order[j] = Number(st[sorter!.offset + br * nb + j]!);
    for (let j = 0; j < ni; j++) {
      const v = inKeys[r * ni + j]!;
      let lo = 0, hi = nb;
      while (lo < hi) {
        const mid = lo + ((hi - lo) >> 1);
        const m = bd[st ? order[mid]! : mid]!;
        // lower bound: first boundary >= v; upper bound: first boundary > v (NaN compares false: goes right)
        if (right ? !(m > v) : !(m >= v)) lo = mid + 1; else hi = mid;
      }
      put(r * ni + j, lo);
    }
  }
}

/**
 * unique / unique_consecutive of a contiguous [rows, rowLen] operand, comparing whole rows (rowLen 1 for
 * flat unique). Not consecutive: rows sorted first (std::sort, as ATen). Elements equal by `!=`, so each NaN
 * is its own value, as in PyTorch.
 */
export function cpuUnique(input: StridedRef, rows: number, rowLen: number, consecutive: boolean): UniqueResult {
  const keys = readKeys(input, 0, rows * rowLen);
  const a = iota(new Int32Array(rows), rows) as Int32Array;
  if (!consecutive) {
    if (rowLen === 1) {
      // Which of equal elements comes first only shows for NaNs and signed zeros: emulate then, else sort fast.
      let exotic = false;
      for (let j = 0; j < rows && !exotic; j++) { const v = keys[j]!; exotic = v !== v || Object.is(v, -0); }
      const o = new Uint32Array(rows);
      if (!exotic && orderKeys(keys, rows, false, isIntKeys(input), o)) radixSort(o, null, rows, a, new Int32Array(rows));
      else stdSort(iota(a, rows), 0, rows, ascNanLast(keys));
    } else {
      stdSort(a, 0, rows, (x, y) => {
        for (let i = 0; i < rowLen; i++) {
          const p = keys[x * rowLen + i]!, q = keys[y * rowLen + i]!;
          if (p < q) return true;
          if (p > q) return false;
        }
        return false;
      });
    }
  }
  const sameRow = (x: number, y: number): boolean => {
    for (let i = 0; i < rowLen; i++) if (keys[x * rowLen + i] !== keys[y * rowLen + i]) return false;
    return true;
  };
  const inverse = new BigInt64Array(rows);
  const putInv = indexWriter({ buf: inverse, dtype: 'int64', shape: [rows], strides: [1], offset: 0 });
  const starts: number[] = [];
  for (let i = 0; i < rows; i++) {
    if (i === 0 || !sameRow(a[i]!, a[i - 1]!)) starts.push(i);
    putInv(a[i]!, starts.length - 1);
  }
  const groups = starts.length;
  const counts = new BigInt64Array(groups);
  const putCount = indexWriter({ buf: counts, dtype: 'int64', shape: [groups], strides: [1], offset: 0 });
  for (let g = 0; g < groups; g++) putCount(g, (g + 1 < groups ? starts[g + 1]! : rows) - starts[g]!);
  const src = input.buf as StorageArray;
  const values = new (src.constructor as new (n: number) => StorageArray)(groups * rowLen);
  for (let g = 0; g < groups; g++) {
    const from = input.offset + a[starts[g]!]! * rowLen;
    (values as Float64Array).set((src as Float64Array).subarray(from, from + rowLen), g * rowLen);
  }
  return { values, inverse, counts, groups };
}

export const kernels = {
  sort: cpuSort,
  topk: cpuTopk,
  kthvalue: cpuKthvalue,
  median: cpuMedian,
  mode: cpuMode,
  searchsorted: cpuSearchsorted,
  unique: cpuUnique,
} satisfies BackendKernels;
