// CUDA kernels for sorting and selection, with the contract in src/kernels/sort.ts:
// sort, topk, kthvalue, median, mode, searchsorted, unique.
//
// Elements become order-preserving unsigned keys (NaN largest, -0 equal to 0, complemented for descending),
// paired with their index. Sorting (key, index) pairs gives the stable order, which is unique:
//  - rows up to the shared-memory tile (from maxSharedMemPerBlockOptin): a bitonic sort in shared memory,
//    several short rows per block;
//  - longer rows: tiles sorted in shared memory, then merge passes in global memory (each element finds its
//    place in the partner run by binary search; keys are distinct, so the merge is exact);
//  - top-k with a small k: each block keeps the k+1 best of its chunk (bitonic top-k: sort groups of K,
//    keep the lower half of merged pairs), chunks reduce to candidates, one block finishes.
// PyTorch's CPU kernels run std::sort / partial_sort / nth_element / quick_select; where equal keys can make
// their result differ from the stable order (unstable sort with ties, ties around the k-th element,
// sorted=False, mode, unique with NaN or -0), the row is flagged on the device and a second kernel replays
// the exact libstdc++ algorithm for that row (one thread per flagged row; other rows return at once).
// No host synchronization, except unique, whose output sizes depend on the data.

import { DTYPES, allocStorage, type DTypeName, type StorageArray } from '../../../dtype/dtypes.js';
import type { StridedRef } from '../../backend.js';
import { R, type CudaBackend, type CudaBuffer } from '../runtime/backend.js';
import type { KernelArg } from '../runtime/driver.js';
import { UnsupportedError } from '../../../errors.js';
import { runCompaction, type Compaction } from './compaction.js';
import { Params, basePtr as ptr, gridLoop } from './util.js';
import type { UniqueResult } from '../../../kernels/sort.js';
import type { BackendKernels } from '../../../kernels/table.js';
import { nextPow2 } from '../../backend.js';

let be: CudaBackend;
export const kernels = {
  sort: cudaSort,
  topk: cudaTopk,
  kthvalue: cudaKthvalue,
  median: cudaMedian,
  mode: cudaMode,
  searchsorted: cudaSearchsorted,
  unique: cudaUnique,
} satisfies BackendKernels;

/** Points this family's kernels at the backend (called once, when the backend starts). */
export function bind(backend: CudaBackend): void {
  be = backend;
}

const SORTABLE = new Set<DTypeName>(['bool', 'uint8', 'int8', 'int16', 'int32', 'int64', 'float16', 'bfloat16', 'float32', 'float64']);
function checkSortable(op: string, d: DTypeName): void {
  if (!SORTABLE.has(d)) throw new UnsupportedError(op, `cuda ${op} supports bool, integer and real floating dtypes, got ${d}`);
}
const isF = (d: DTypeName): boolean => DTYPES[d].kind === 'float';
const wide = (d: DTypeName): boolean => DTYPES[d].itemsize === 8;
/** The key type: 64-bit keys for 64-bit dtypes, 32-bit for the rest. */
const keyT = (d: DTypeName): string => (wide(d) ? 'unsigned long long' : 'unsigned');
const keyDT = (d: DTypeName): DTypeName => (wide(d) ? 'int64' : 'int32');
const FLIP_ALL = 0xffffffffffffffffn;
const at = (r: StridedRef): number => r.offset;

// ---- device code -----------------------------------------------------------------------------------

/** Order-preserving keys: NaN after everything, -0 as 0. */
const KEYS = String.raw`
__device__ __forceinline__ unsigned nbx_okey_f32(float f) {
  if (isnan(f)) return 0xffffffffu;
  if (f == 0.f) return 0x80000000u;
  const unsigned b = __float_as_uint(f);
  return (b & 0x80000000u) ? ~b : (b | 0x80000000u);
}
__device__ __forceinline__ unsigned long long nbx_okey_f64(double f) {
  if (isnan(f)) return 0xffffffffffffffffull;
  if (f == 0.0) return 0x8000000000000000ull;
  const unsigned long long b = (unsigned long long)__double_as_longlong(f);
  return (b >> 63) ? ~b : (b | 0x8000000000000000ull);
}
__device__ __forceinline__ unsigned nbx_okey_i32(int v) { return (unsigned)v ^ 0x80000000u; }
__device__ __forceinline__ unsigned long long nbx_okey_i64(long long v) { return (unsigned long long)v ^ 0x8000000000000000ull; }
`;

/** The ascending key of element i of p (dtype d), as C. */
function keyExpr(d: DTypeName, p: string, i: string): string {
  switch (d) {
    case 'float64': return `nbx_okey_f64(${p}[${i}])`;
    case 'float32': return `nbx_okey_f32(${p}[${i}])`;
    case 'float16': case 'bfloat16': return `nbx_okey_f32(${R.load(d, p, i)})`;
    case 'int64': return `nbx_okey_i64(${p}[${i}])`;
    default: return `nbx_okey_i32((int)${p}[${i}])`;
  }
}
/** The element's value for plain comparisons (`<`, `!=`): double for floats, long long for integers. */
const valueExpr = (d: DTypeName, p: string, i: string): string => (isF(d) ? `((double)${R.load(d, p, i)})` : `((long long)${p}[${i}])`);

/** Bitonic networks over (key, id) pairs in shared memory, ordered by key then id (the stable order). */
const BITONIC = String.raw`
template <typename K> __device__ __forceinline__ void nbx_cmpx(K* k, unsigned* id, int a, int b, bool asc) {
  const K ka = k[a], kb = k[b];
  const unsigned ia = id[a], ib = id[b];
  if ((ka > kb || (ka == kb && ia > ib)) == asc) { k[a] = kb; k[b] = ka; id[a] = ib; id[b] = ia; }
}
// Sorts each segment of L (a power of two) of the total elements ascending.
template <typename K> __device__ void nbx_bitonic_sort(K* k, unsigned* id, int total, int L) {
  for (int size = 2; size <= L; size <<= 1)
    for (int stride = size >> 1; stride > 0; stride >>= 1) {
      __syncthreads();
      for (int t = threadIdx.x; t < total / 2; t += blockDim.x) {
        const int a = 2 * t - (t & (stride - 1));
        nbx_cmpx(k, id, a, a + stride, ((a & (L - 1)) & size) == 0);
      }
    }
  __syncthreads();
}
// The KS smallest of L elements (both powers of two), sorted, into [0, KS): sort groups of KS alternately
// ascending and descending; then repeatedly keep the lower half of each (ascending, descending) pair of
// groups (a bitonic sequence holding the pair's KS smallest) and merge it, until one group is left.
template <typename K> __device__ void nbx_bitonic_topk(K* k, unsigned* id, int L, int KS) {
  for (int size = 2; size <= KS; size <<= 1)
    for (int stride = size >> 1; stride > 0; stride >>= 1) {
      __syncthreads();
      for (int t = threadIdx.x; t < L / 2; t += blockDim.x) {
        const int a = 2 * t - (t & (stride - 1));
        nbx_cmpx(k, id, a, a + stride, (a & size) == 0);
      }
    }
  for (int span = KS; span < L; span <<= 1) {
    const int pairs = L / (2 * span);
    __syncthreads();
    for (int t = threadIdx.x; t < pairs * KS; t += blockDim.x) {
      const int a = (t / KS) * 2 * span + (t % KS);
      nbx_cmpx(k, id, a, a + span, true);
    }
    for (int stride = KS >> 1; stride > 0; stride >>= 1) {
      __syncthreads();
      for (int t = threadIdx.x; t < pairs * (KS / 2); t += blockDim.x) {
        const int P = t / (KS / 2), q = t % (KS / 2);
        const int a = P * 2 * span + 2 * q - (q & (stride - 1));
        nbx_cmpx(k, id, a, a + stride, (P & 1) == 0);
      }
    }
  }
  __syncthreads();
}
`;

/**
 * libstdc++'s algorithms (bits/stl_algo.h, bits/stl_heap.h) and TH's quick_select, as the CPU kernels run
 * them (src/backend/cpu/kernels/sort.ts), on an array of element ids with a comparator on ids. The introsort
 * recursion runs from an explicit stack: its ranges are disjoint, so the order they are done in is free.
 */
const STD_ALGOS = String.raw`
template <typename I> __device__ __forceinline__ void nbx_swap(I* a, long long i, long long j) { const I t = a[i]; a[i] = a[j]; a[j] = t; }
template <typename I, typename L> __device__ void nbx_linear_insert(I* a, long long last, const L& less) {
  const I val = a[last];
  long long next = last - 1;
  while (next >= 0 && less(val, a[next])) { a[last] = a[next]; last = next; next--; }
  a[last] = val;
}
template <typename I, typename L> __device__ void nbx_insertion_sort(I* a, long long first, long long last, const L& less) {
  if (first == last) return;
  for (long long i = first + 1; i < last; i++) {
    if (less(a[i], a[first])) {
      const I val = a[i];
      for (long long j = i; j > first; j--) a[j] = a[j - 1];
      a[first] = val;
    } else nbx_linear_insert(a, i, less);
  }
}
template <typename I, typename L> __device__ void nbx_final_insertion_sort(I* a, long long first, long long last, const L& less) {
  if (last - first > 16) {
    nbx_insertion_sort(a, first, first + 16, less);
    for (long long i = first + 16; i < last; i++) nbx_linear_insert(a, i, less);
  } else nbx_insertion_sort(a, first, last, less);
}
template <typename I, typename L> __device__ void nbx_median_to_first(I* a, long long result, long long x, long long y, long long z, const L& less) {
  const I A = a[x], B = a[y], C = a[z];
  if (less(A, B)) {
    if (less(B, C)) nbx_swap(a, result, y);
    else if (less(A, C)) nbx_swap(a, result, z);
    else nbx_swap(a, result, x);
  } else if (less(A, C)) nbx_swap(a, result, x);
  else if (less(B, C)) nbx_swap(a, result, z);
  else nbx_swap(a, result, y);
}
template <typename I, typename L> __device__ long long nbx_partition(I* a, long long first, long long last, long long pivot, const L& less) {
  const I p = a[pivot];
  const long long lo = first - 1, hi = last;
  for (;;) {
    while (first < hi && less(a[first], p)) first++;
    last--;
    while (last > lo && less(p, a[last])) last--;
    if (!(first < last)) return first;
    nbx_swap(a, first, last);
    first++;
  }
}
template <typename I, typename L> __device__ long long nbx_partition_pivot(I* a, long long first, long long last, const L& less) {
  const long long mid = first + (last - first) / 2;
  nbx_median_to_first(a, first, first + 1, mid, last - 1, less);
  return nbx_partition(a, first + 1, last, first, less);
}
template <typename I, typename L> __device__ void nbx_push_heap(I* a, long long first, long long hole, long long top, I value, const L& less) {
  long long parent = (hole - 1) / 2;
  while (hole > top && less(a[first + parent], value)) { a[first + hole] = a[first + parent]; hole = parent; parent = (hole - 1) / 2; }
  a[first + hole] = value;
}
template <typename I, typename L> __device__ void nbx_adjust_heap(I* a, long long first, long long hole, long long len, I value, const L& less) {
  const long long top = hole;
  long long second = hole;
  while (second < (len - 1) / 2) {
    second = 2 * (second + 1);
    if (less(a[first + second], a[first + second - 1])) second--;
    a[first + hole] = a[first + second];
    hole = second;
  }
  if ((len & 1) == 0 && second == (len - 2) / 2) {
    second = 2 * (second + 1);
    a[first + hole] = a[first + second - 1];
    hole = second - 1;
  }
  nbx_push_heap(a, first, hole, top, value, less);
}
template <typename I, typename L> __device__ void nbx_make_heap(I* a, long long first, long long last, const L& less) {
  const long long len = last - first;
  if (len < 2) return;
  for (long long parent = (len - 2) / 2; ; parent--) {
    nbx_adjust_heap(a, first, parent, len, a[first + parent], less);
    if (parent == 0) return;
  }
}
template <typename I, typename L> __device__ void nbx_pop_heap(I* a, long long first, long long last, long long result, const L& less) {
  const I value = a[result];
  a[result] = a[first];
  nbx_adjust_heap(a, first, 0, last - first, value, less);
}
template <typename I, typename L> __device__ void nbx_heap_select(I* a, long long first, long long middle, long long last, const L& less) {
  nbx_make_heap(a, first, middle, less);
  for (long long i = middle; i < last; i++) if (less(a[i], a[first])) nbx_pop_heap(a, first, middle, i, less);
}
template <typename I, typename L> __device__ void nbx_sort_heap(I* a, long long first, long long last, const L& less) {
  while (last - first > 1) { last--; nbx_pop_heap(a, first, last, last, less); }
}
template <typename I, typename L> __device__ void nbx_partial_sort(I* a, long long first, long long middle, long long last, const L& less) {
  nbx_heap_select(a, first, middle, last, less);
  nbx_sort_heap(a, first, middle, less);
}
__device__ __forceinline__ int nbx_lg(long long n) { return 63 - __clzll(n); }
template <typename I, typename L> __device__ void nbx_std_sort(I* a, long long first, long long last, const L& less) {
  if (first == last) return;
  long long sf[70], sl[70]; int sd[70]; int sp = 0;
  sf[0] = first; sl[0] = last; sd[0] = nbx_lg(last - first) * 2; sp = 1;
  while (sp > 0) {
    sp--;
    long long f = sf[sp], l = sl[sp]; int depth = sd[sp];
    while (l - f > 16) {
      if (depth == 0) { nbx_partial_sort(a, f, l, l, less); break; }
      depth--;
      const long long cut = nbx_partition_pivot(a, f, l, less);
      sf[sp] = cut; sl[sp] = l; sd[sp] = depth; sp++;
      l = cut;
    }
  }
  nbx_final_insertion_sort(a, first, last, less);
}
template <typename I, typename L> __device__ void nbx_nth_element(I* a, long long first, long long nth, long long last, const L& less) {
  if (first == last || nth == last) return;
  int depth = nbx_lg(last - first) * 2;
  while (last - first > 3) {
    if (depth == 0) { nbx_heap_select(a, first, nth + 1, last, less); nbx_swap(a, first, nth); return; }
    depth--;
    const long long cut = nbx_partition_pivot(a, first, last, less);
    if (cut <= nth) first = cut; else last = cut;
  }
  nbx_insertion_sort(a, first, last, less);
}
// TH's quick_select (median of three, Sedgewick partition) with gt = "greater than", as ATen's kthvalue.
template <typename I, typename G> __device__ void nbx_quick_select(I* a, long long n, long long k, const G& gt) {
  long long L = 0, R = n - 1;
  for (;;) {
    if (R <= L) return;
    if (R == L + 1) { if (gt(a[L], a[R])) nbx_swap(a, L, R); return; }
    const long long P = (L + R) >> 1;
    nbx_swap(a, P, L + 1);
    if (gt(a[L + 1], a[R])) nbx_swap(a, L + 1, R);
    if (gt(a[L], a[R])) nbx_swap(a, L, R);
    if (gt(a[L + 1], a[L])) nbx_swap(a, L + 1, L);
    long long i = L + 1, j = R;
    const I piv = a[L];
    for (;;) {
      do i++; while (i <= R && gt(piv, a[i]));
      do j--; while (j >= L && gt(a[j], piv));
      if (j < i) break;
      nbx_swap(a, i, j);
    }
    nbx_swap(a, L, j);
    if (j <= k) L = i;
    if (j >= k) R = j - 1;
  }
}
`;

/** Comparators on element ids of one row `p`: by key (flipped for descending), and the median's and mode's. */
function comparators(d: DTypeName): string {
  const T = R.storageType(d), K = keyT(d);
  const key = (x: string): string => `(${keyExpr(d, 'p', x)} ^ flip)`;
  return `
struct KeyLess { const ${T}* p; ${K} flip; template <typename I> __device__ bool operator()(I x, I y) const { return ${key('x')} < ${key('y')}; } };
struct KeyGreater { const ${T}* p; ${K} flip; template <typename I> __device__ bool operator()(I x, I y) const { return ${key('x')} > ${key('y')}; } };
// median: ties broken by index, except NaN (equivalent to each other: only an all-NaN nanmedian row compares them)
struct MedianLess { const ${T}* p; ${K} flip; template <typename I> __device__ bool operator()(I x, I y) const {
  const ${K} a = ${key('x')}, b = ${key('y')}; return a < b || (a == b && ${isF(d) ? `a != (${K})~(${K})0 && ` : ''}x < y); } };
// mode: ATen's bare "<" on values (NaN compares false both ways)
struct ValueLess { const ${T}* p; template <typename I> __device__ bool operator()(I x, I y) const { return ${valueExpr(d, 'p', 'x')} < ${valueExpr(d, 'p', 'y')}; } };`;
}

// ---- block kernel: load, sort or select in shared memory, epilogue -----------------------------------

type Epi = 'pairs' | 'sort' | 'topk' | 'kth' | 'median';

/**
 * What to write from a sorted row held at kb[]/ib[] (keys, ids), for position j of row r (segment chunk c):
 * 'pairs' the first KS pairs of each chunk; 'sort' all values and indices; 'topk' the first kk; 'kth'
 * position kk-1; 'median' the CPU's pick. Ties that could make PyTorch's (unstable) algorithm answer
 * differently set flags[r].
 */
function epilogue(epi: Epi, d: DTypeName, ignoreNan: boolean): string {
  const K = keyT(d);
  const put = (slot: string, id: string): string => `values[voff + ${slot}] = in[ioff + r * nv + ${id}]; indices[xoff + ${slot}] = ${id};`;
  switch (epi) {
    case 'pairs': return `if (j < KS && c * KS + j < dstRow) { outk[r * dstRow + c * KS + j] = kb[j]; outid[r * dstRow + c * KS + j] = ib[j]; }`;
    case 'sort': return `if (j < nv) { const unsigned id = ib[j]; ${put('r * nv + j', 'id')} if (flags && j + 1 < nv && kb[j] == kb[j + 1]) flags[r] = 1; }`;
    case 'topk': return `if (j < kk) { const unsigned id = ib[j]; ${put('r * kk + j', 'id')} if (j + 1 < nv && kb[j] == kb[j + 1]) flags[r] = 1; }`;
    case 'kth': return `if (j == 0) { const long long q = kk - 1; const unsigned id = ib[q]; ${put('r', 'id')}
        if ((q > 0 && kb[q - 1] == kb[q]) || (q + 1 < nv && kb[q + 1] == kb[q])) flags[r] = 1; }`;
    default: return `if (j == 0) {
        long long nan = 0; (void)kb[0];
        ${isF(d) ? `{ long long lo = 0, hi = nv; while (lo < hi) { const long long mid = (lo + hi) >> 1; if (kb[mid] == (${K})~(${K})0) hi = mid; else lo = mid + 1; } nan = nv - lo; }` : ''}
        unsigned id;
        ${ignoreNan ? `if (nan == nv) { flags[r] = 1; id = ib[0]; } else id = ib[(nv - nan - 1) / 2];` : 'id = nan > 0 ? ib[nv - nan] : ib[(nv - 1) / 2];'}
        ${put('r', 'id')} }`;
  }
}

const BLOCK_SIG_P = (d: DTypeName): Params => {
  const T = R.storageType(d), K = keyT(d);
  return new Params().ptr(`const ${T}`, 'in').ptr(`const ${K}`, 'ink').ptr('const unsigned', 'inid').ptr(K, 'outk').ptr('unsigned', 'outid')
    .ptr(T, 'values').ptr('long long', 'indices').ptr('int', 'flags')
    .i64('rows', 'n', 'nv', 'segs').i32('L', 'KS', 'rpb').i64('flip_', 'ioff', 'voff', 'xoff', 'dstRow', 'kk');
};

/**
 * One block per `rpb` segments (a segment: chunk c of L elements of row r): keys into shared memory (from
 * values, or from (key, id) pairs of an earlier pass), a full sort or a top-KS selection, then the epilogue.
 */
export function blockSource(d: DTypeName, from: 'values' | 'pairs', select: 'full' | 'topk', epi: Epi, ignoreNan: boolean) {
  const K = keyT(d);
  const p = BLOCK_SIG_P(d);
  const load = from === 'values'
    ? `sk[e] = ${keyExpr(d, 'in', 'ioff + r * n + q')} ^ flip; sid[e] = (unsigned)q;`
    : 'sk[e] = ink[r * n + q]; sid[e] = inid[r * n + q];';
  const src = `${KEYS}${BITONIC}
extern "C" __global__ void __launch_bounds__(1024) sort_block(${p.text}) {
  extern __shared__ __align__(16) unsigned char smem_[];
  ${K}* sk = (${K}*)smem_;
  unsigned* sid = (unsigned*)(sk + rpb * L);
  const ${K} flip = (${K})flip_;
  (void)flip;
  const long long nseg = rows * segs;
  for (long long s0 = (long long)blockIdx.x * rpb; s0 < nseg; s0 += (long long)gridDim.x * rpb) {
    for (int e = threadIdx.x; e < rpb * L; e += blockDim.x) {
      const int g = e / L, j = e - g * L;
      const long long s = s0 + g, r = s / segs, c = s - r * segs, q = c * L + j;
      if (s < nseg && q < n) { ${load} } else { sk[e] = ~(${K})0; sid[e] = 0xffffffffu; }
    }
    ${select === 'full' ? 'nbx_bitonic_sort(sk, sid, rpb * L, L);' : 'nbx_bitonic_topk(sk, sid, L, KS);'}
    for (int e = threadIdx.x; e < rpb * L; e += blockDim.x) {
      const int g = e / L, j = e - g * L;
      const long long s = s0 + g;
      if (s >= nseg) continue;
      const long long r = s / segs, c = s - r * segs;
      (void)c;
      const ${K}* kb = sk + g * L;
      const unsigned* ib = sid + g * L;
      ${epilogue(epi, d, ignoreNan)}
    }
    __syncthreads();
  }
}`;
  return { src, name: 'sort_block', sig: p.sig };
}

/** The epilogue over rows already sorted in global memory (pairs [rows, n]); `per` positions per row. */
export function finalSource(d: DTypeName, epi: Epi, ignoreNan: boolean) {
  const K = keyT(d);
  const p = BLOCK_SIG_P(d).i64('per');
  const src = `${KEYS}
extern "C" __global__ void __launch_bounds__(256) sort_final(${p.text}) {
  const long long c = 0; (void)c; (void)rpb; (void)L; (void)segs; (void)flip_;
  ${gridLoop('long long', 'e', 'rows * per')} {
    const long long r = e / per, j = e - r * per;
    const ${K}* kb = ink + r * n;
    const unsigned* ib = inid + r * n;
    ${epilogue(epi, d, ignoreNan)}
  }
}`;
  return { src, name: 'sort_final', sig: p.sig };
}

/** One merge pass: runs of w become runs of 2w; each element finds its place in the partner run by binary search. */
export function mergeSource(K: string) {
  const p = new Params().ptr(`const ${K}`, 'ik').ptr('const unsigned', 'iid').ptr(K, 'ok').ptr('unsigned', 'oid').i64('rows', 'n', 'w');
  const src = `extern "C" __global__ void __launch_bounds__(256) sort_merge(${p.text}) {
  ${gridLoop('long long', 'e', 'rows * n')} {
    const long long r = e / n, q = e - r * n;
    const ${K}* rk = ik + r * n;
    const unsigned* ri = iid + r * n;
    const ${K} key = rk[q];
    const unsigned id = ri[q];
    const long long run = q / w, rs = run * w, ps = (run ^ 1) * w;
    if (ps >= n) { ok[e] = key; oid[e] = id; continue; }
    long long lo = ps, hi = min(ps + w, n);
    while (lo < hi) {
      const long long mid = (lo + hi) >> 1;
      const ${K} mk = rk[mid];
      if (mk < key || (mk == key && ri[mid] < id)) lo = mid + 1; else hi = mid;
    }
    const long long dst = r * n + min(rs, ps) + (q - rs) + (lo - ps);
    ok[dst] = key; oid[dst] = id;
  }
}`;
  return { src, name: 'sort_merge', sig: p.sig };
}

// ---- emulation of the CPU's algorithms for flagged rows -------------------------------------------------

type Emu = 'sort' | 'topk' | 'kth' | 'median' | 'mode';

export function emulateSource(d: DTypeName, kind: Emu, ignoreNan: boolean) {
  const T = R.storageType(d), K = keyT(d);
  const p = new Params().ptr(`const ${T}`, 'in').ptr(T, 'values').ptr('long long', 'indices').ptr('const int', 'flags').ptr('int', 'scratch')
    .i64('rows', 'n', 'ioff', 'voff', 'xoff', 'kk', 'flip_').i32('opt');
  const iota = 'int* a = scratch + r * n; for (long long j = 0; j < n; j++) a[j] = (int)j;';
  let body: string;
  switch (kind) {
    case 'sort': body = `long long* a = indices + xoff + r * n; for (long long j = 0; j < n; j++) a[j] = j;
      KeyLess less{p, flip}; nbx_std_sort(a, 0, n, less);
      for (long long j = 0; j < n; j++) values[voff + r * n + j] = p[a[j]];`; break;
    // k * 64 > n: nth_element, then (opt bit 0: sorted) std::sort of the first k - 1 (else topkReplaySource)
    case 'topk': body = `KeyLess less{p, flip};
      long long* h = indices + xoff + r * kk;
      ${iota}
      nbx_nth_element(a, 0, kk - 1, n, less);
      if (opt & 1) nbx_std_sort(a, 0, kk - 1, less);
      for (long long j = 0; j < kk; j++) { h[j] = a[j]; values[voff + r * kk + j] = p[a[j]]; }`; break;
    case 'kth': body = `${iota} KeyGreater gt{p, flip}; nbx_quick_select(a, n, kk - 1, gt);
      values[voff + r] = p[a[kk - 1]]; indices[xoff + r] = a[kk - 1];`; break;
    case 'median': body = `${iota} MedianLess less{p, flip};
      long long nan = 0; ${isF(d) ? `for (long long j = 0; j < n; j++) nan += isnan(${valueExpr(d, 'p', 'j')}) ? 1 : 0;` : ''}
      const long long nth = (n - nan - 1) / 2;
      nbx_nth_element(a, 0, nth, n, less);
      values[voff + r] = p[a[nth]]; indices[xoff + r] = a[nth];`; break;
    default: body = `${iota} ValueLess less{p}; nbx_std_sort(a, 0, n, less);
      long long modei = 0, freq = 0, best = 0;
      for (long long i = 0; i < n; i++) {
        freq++;
        if (i == n - 1 || ${valueExpr(d, 'p', 'a[i]')} != ${valueExpr(d, 'p', 'a[i + 1]')}) { if (freq > best) { modei = a[i]; best = freq; } freq = 0; }
      }
      values[voff + r] = p[modei]; indices[xoff + r] = modei;`;
  }
  void ignoreNan;
  const src = `${KEYS}${STD_ALGOS}${comparators(d)}
extern "C" __global__ void __launch_bounds__(64) sort_emulate(${p.text}) {
  const ${K} flip = (${K})flip_;
  (void)flip;
  ${gridLoop('long long', 'r', 'rows')} {
    if (flags && flags[r] == 0) continue;
    const ${T}* p = in + ioff + r * n;
    ${body}
  }
}`;
  return { src, name: 'sort_emulate', sig: p.sig };
}

/**
 * topk's replay when k * 64 <= n (ATen's partial_sort: a heap of the first k, then each later element in
 * order replaces the top when better). The top only ever improves, so an element that does not beat the
 * top at the start of its chunk never enters: the block tests a chunk in parallel and thread 0 applies the
 * exact heap steps to the survivors, in order. Long vocabulary rows with ties stay fast.
 */
export function topkReplaySource(d: DTypeName) {
  const T = R.storageType(d), K = keyT(d);
  const p = new Params().ptr(`const ${T}`, 'in').ptr(T, 'values').ptr('long long', 'indices').ptr('const int', 'flags').ptr('int', 'scratch')
    .i64('rows', 'n', 'ioff', 'voff', 'xoff', 'kk', 'flip_').i32('opt');
  const src = `${KEYS}${STD_ALGOS}${comparators(d)}
extern "C" __global__ void __launch_bounds__(256) sort_topk_replay(${p.text}) {
  __shared__ int cand[256];
  __shared__ int ws[8];
  __shared__ long long top;
  const ${K} flip = (${K})flip_;
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  (void)scratch; (void)opt;
  for (long long r = blockIdx.x; r < rows; r += gridDim.x) {
    if (flags[r] == 0) continue;
    const ${T}* p = in + ioff + r * n;
    const KeyLess less{p, flip};
    long long* h = indices + xoff + r * kk;
    if (threadIdx.x == 0) { for (long long j = 0; j < kk; j++) h[j] = j; nbx_make_heap(h, 0, kk, less); }
    __syncthreads();
    for (long long c0 = kk; c0 < n; c0 += blockDim.x) {
      if (threadIdx.x == 0) top = h[0];
      __syncthreads();
      const long long i = c0 + threadIdx.x;
      const bool f = i < n && less(i, top);
      const unsigned bal = __ballot_sync(0xffffffffu, f);
      if (lane == 0) ws[warp] = __popc(bal);
      __syncthreads();
      int before = 0, total = 0;
      for (int w = 0; w < (int)(blockDim.x >> 5); w++) { before += w < warp ? ws[w] : 0; total += ws[w]; }
      if (f) cand[before + __popc(bal & ((1u << lane) - 1u))] = (int)i;
      __syncthreads();
      if (threadIdx.x == 0) for (int q = 0; q < total; q++) { const long long c = cand[q]; if (less(c, h[0])) nbx_adjust_heap(h, 0, 0, kk, c, less); }
      __syncthreads();
    }
    if (threadIdx.x == 0) nbx_sort_heap(h, 0, kk, less);
    __syncthreads();
    for (long long j = threadIdx.x; j < kk; j += blockDim.x) values[voff + r * kk + j] = p[h[j]];
    __syncthreads();
  }
}`;
  return { src, name: 'sort_topk_replay', sig: p.sig };
}

/**
 * sort's replay for rows that fit a tile: the block computes the row's keys into shared memory, one thread
 * runs std::sort on shared-memory ids comparing shared-memory keys (the same comparisons, much closer
 * memory), then the block writes the row.
 */
export function sortReplaySource(d: DTypeName) {
  const T = R.storageType(d), K = keyT(d);
  const p = new Params().ptr(`const ${T}`, 'in').ptr(T, 'values').ptr('long long', 'indices').ptr('const int', 'flags').ptr('int', 'scratch')
    .i64('rows', 'n', 'ioff', 'voff', 'xoff', 'kk', 'flip_').i32('opt');
  const src = `${KEYS}${STD_ALGOS}
struct SmemLess { const ${K}* k; __device__ bool operator()(int x, int y) const { return k[x] < k[y]; } };
extern "C" __global__ void __launch_bounds__(256) sort_replay(${p.text}) {
  extern __shared__ __align__(16) unsigned char smem_[];
  ${K}* sk = (${K}*)smem_;
  int* sid = (int*)(sk + n);
  const ${K} flip = (${K})flip_;
  (void)scratch; (void)kk; (void)opt;
  for (long long r = blockIdx.x; r < rows; r += gridDim.x) {
    if (flags[r] == 0) continue;
    const ${T}* p = in + ioff + r * n;
    for (int j = threadIdx.x; j < n; j += blockDim.x) { sk[j] = ${keyExpr(d, 'p', 'j')} ^ flip; sid[j] = j; }
    __syncthreads();
    if (threadIdx.x == 0) nbx_std_sort(sid, 0, n, SmemLess{sk});
    __syncthreads();
    for (int j = threadIdx.x; j < n; j += blockDim.x) { const int id = sid[j]; values[voff + r * n + j] = p[id]; indices[xoff + r * n + j] = id; }
    __syncthreads();
  }
}`;
  return { src, name: 'sort_replay', sig: p.sig };
}

// ---- launch plans --------------------------------------------------------------------------------------

/** The largest power-of-two row that fits shared memory as (key, id) pairs. */
function maxTile(d: DTypeName): number {
  const per = (wide(d) ? 8 : 4) + 4;
  const optin = be.ctx.info.maxSharedMemPerBlockOptin || 48 * 1024;
  let L = 1024;
  while (L * 2 * per <= optin && L < 16384) L *= 2;
  return L;
}

interface BlockRun {
  d: DTypeName; from: 'values' | 'pairs'; select: 'full' | 'topk'; epi: Epi; ignoreNan?: boolean;
  rows: number; n: number; nv: number; segs: number; L: number; KS: number; rpb: number; flip: bigint;
  input: StridedRef; ink?: CudaBuffer; inid?: CudaBuffer; outk?: CudaBuffer; outid?: CudaBuffer;
  values?: StridedRef; indices?: StridedRef; flags?: CudaBuffer | null; dstRow?: number; kk?: number;
}
const bp = (b: CudaBuffer | null | undefined): bigint => b?.ptr ?? 0n;
const rp = (r: StridedRef | undefined): bigint => (r ? ptr(r) : 0n);

function blockArgs(b: BlockRun): KernelArg[] {
  return [ptr(b.input), bp(b.ink), bp(b.inid), bp(b.outk), bp(b.outid), rp(b.values), rp(b.indices), bp(b.flags),
    b.rows, b.n, b.nv, b.segs, b.L, b.KS, b.rpb, b.flip, at(b.input), b.values?.offset ?? 0, b.indices?.offset ?? 0, b.dstRow ?? 0, b.kk ?? 0];
}

function runBlock(b: BlockRun): void {
  const ign = !!b.ignoreNan;
  const k = be.kernel(`sort:block:${b.d}:${b.from}:${b.select}:${b.epi}:${ign}`, () => blockSource(b.d, b.from, b.select, b.epi, ign));
  const smem = b.rpb * b.L * ((wide(b.d) ? 8 : 4) + 4);
  if (smem > 48 * 1024) k.setMaxDynamicSharedMemory(smem);
  const threads = Math.min(1024, Math.max(32, (b.rpb * b.L) / 2));
  const grid = Math.min(Math.ceil((b.rows * b.segs) / b.rpb), be.smCount * 32);
  be.launch(k, grid, threads, blockArgs(b), smem);
}

function runFinal(b: BlockRun, per: number): void {
  const ign = !!b.ignoreNan;
  const k = be.kernel(`sort:final:${b.d}:${b.epi}:${ign}`, () => finalSource(b.d, b.epi, ign));
  be.launch(k, be.gridFor(b.rows * per, 256), 256, [...blockArgs(b), per]);
}

/** Several short rows per block: about 2048 elements a block. */
const rowsPerBlock = (L: number, rows: number): number => Math.max(1, Math.min(Math.floor(2048 / L), nextPow2(rows)));

/**
 * Rows longer than a tile: sorted tiles, then merge passes. Returns the (key, id) pairs [rows, n] in stable
 * ascending order of (key ^ flip) (the caller frees both buffers).
 */
function mergeSort(d: DTypeName, input: StridedRef, rows: number, n: number, flip: bigint): { k: CudaBuffer; id: CudaBuffer } {
  const L = maxTile(d);
  let k = be.alloc(keyDT(d), rows * n), id = be.alloc('int32', rows * n);
  runBlock({ d, from: 'values', select: 'full', epi: 'pairs', rows, n, nv: n, segs: Math.ceil(n / L), L, KS: L, rpb: 1, flip, input, outk: k, outid: id, dstRow: n });
  if (n > L) {
    let k2 = be.alloc(keyDT(d), rows * n), id2 = be.alloc('int32', rows * n);
    const K = keyT(d);
    const km = be.kernel(`sort:merge:${K}`, () => mergeSource(K));
    for (let w = L; w < n; w *= 2) {
      be.launch(km, be.gridFor(rows * n, 256), 256, [k.ptr, id.ptr, k2.ptr, id2.ptr, rows, n, w]);
      [k, k2] = [k2, k];
      [id, id2] = [id2, id];
    }
    be.free(k2); be.free(id2);
  }
  return { k, id };
}

/**
 * Sorts every row and runs `epi` on it: in shared memory when the row fits, else merge sort then the
 * epilogue from global memory (`per` positions per row).
 */
function sortedRows(b: Omit<BlockRun, 'from' | 'select' | 'nv' | 'segs' | 'L' | 'KS' | 'rpb'>, per: number): void {
  const { d, rows, n } = b;
  if (n <= maxTile(d)) {
    const L = nextPow2(n);
    runBlock({ ...b, from: 'values', select: 'full', nv: n, segs: 1, L, KS: L, rpb: rowsPerBlock(L, rows) });
    return;
  }
  const pairs = mergeSort(d, b.input, rows, n, b.flip);
  runFinal({ ...b, from: 'pairs', select: 'full', nv: n, segs: 1, L: 1, KS: 1, rpb: 1, ink: pairs.k, inid: pairs.id }, per);
  be.free(pairs.k); be.free(pairs.id);
}

function runEmulation(d: DTypeName, kind: Emu, ignoreNan: boolean, input: StridedRef, values: StridedRef, indices: StridedRef,
  flags: CudaBuffer | null, scratch: CudaBuffer | null, rows: number, n: number, kk: number, flip: bigint, opt: number): void {
  const args = [ptr(input), ptr(values), ptr(indices), bp(flags), bp(scratch), rows, n, at(input), values.offset, indices.offset, kk, flip, opt];
  if (kind === 'sort' && n <= maxTile(d)) {
    const k = be.kernel(`sort:sort_replay:${d}`, () => sortReplaySource(d));
    const smem = n * ((wide(d) ? 8 : 4) + 4);
    if (smem > 48 * 1024) k.setMaxDynamicSharedMemory(smem);
    be.launch(k, Math.min(rows, be.smCount * 8), 256, args, smem);
    return;
  }
  if (kind === 'topk' && kk * 64 <= n) {
    const k = be.kernel(`sort:topk_replay:${d}`, () => topkReplaySource(d));
    be.launch(k, Math.min(rows, be.smCount * 8), 256, args);
    return;
  }
  const k = be.kernel(`sort:emu:${d}:${kind}:${ignoreNan}`, () => emulateSource(d, kind, ignoreNan));
  be.launch(k, Math.max(1, Math.min(Math.ceil(rows / 64), be.smCount * 16)), 64, args);
}

// ---- kernels -------------------------------------------------------------------------------------

/** sort over the last dim of a contiguous [rows, n] operand. */
export function cudaSort(input: StridedRef, rows: number, n: number, descending: boolean, stable: boolean, values: StridedRef, indices: StridedRef): void {
  checkSortable('sort', input.dtype);
  if (rows * n === 0) return;
  const d = input.dtype, flip = descending ? FLIP_ALL : 0n;
  const flags = stable ? null : be.alloc('int32', rows, true);
  sortedRows({ d, epi: 'sort', rows, n, flip, input, values, indices, flags }, n);
  if (flags) {
    runEmulation(d, 'sort', false, input, values, indices, flags, null, rows, n, 0, flip, 0);
    be.free(flags);
  }
}

/** topk over the last dim: the k best (largest or smallest) of each row, as ATen's CPU picks them on ties. */
export function cudaTopk(input: StridedRef, rows: number, n: number, k: number, largest: boolean, sorted: boolean, values: StridedRef, indices: StridedRef): void {
  checkSortable('topk', input.dtype);
  if (k === 0 || rows * n === 0) return;
  const d = input.dtype, flip = largest ? FLIP_ALL : 0n;
  const flags = be.alloc('int32', rows, true);
  const K2 = Math.min(nextPow2(k + 1), nextPow2(n));
  const Lmax = maxTile(d);
  const base = { d, rows, flip, input, values, indices, flags, kk: k, epi: 'topk' as const };
  if (n <= Lmax && (rows >= be.smCount || n <= 4096 || K2 * 4 > n)) {
    const L = nextPow2(n);
    const KS = Math.min(L, K2);
    runBlock({ ...base, from: 'values', select: KS < L ? 'topk' : 'full', n, nv: n, segs: 1, L, KS, rpb: KS < L ? 1 : rowsPerBlock(L, rows) });
  } else if (K2 * 4 <= Math.min(Lmax, 8192)) {
    // chunks keep their K2 best; candidate lists shrink by a tile per pass; one block finishes each row
    const LT = Math.max(Math.min(nextPow2(Math.ceil((rows * n) / (2 * be.smCount))), Lmax, 8192), 4 * K2, 1024);
    let segs = Math.ceil(n / LT);
    let ck = be.alloc(keyDT(d), rows * segs * K2), cid = be.alloc('int32', rows * segs * K2);
    runBlock({ ...base, epi: 'pairs', from: 'values', select: 'topk', n, nv: n, segs, L: LT, KS: K2, rpb: 1, outk: ck, outid: cid, dstRow: segs * K2 });
    let cn = segs * K2;
    while (cn > LT) {
      segs = Math.ceil(cn / LT);
      const nk = be.alloc(keyDT(d), rows * segs * K2), nid = be.alloc('int32', rows * segs * K2);
      runBlock({ ...base, epi: 'pairs', from: 'pairs', select: 'topk', n: cn, nv: n, segs, L: LT, KS: K2, rpb: 1, ink: ck, inid: cid, outk: nk, outid: nid, dstRow: segs * K2 });
      be.free(ck); be.free(cid);
      [ck, cid, cn] = [nk, nid, segs * K2];
    }
    const L = nextPow2(cn);
    runBlock({ ...base, from: 'pairs', select: K2 < L ? 'topk' : 'full', n: cn, nv: n, segs: 1, L, KS: K2, rpb: 1, ink: ck, inid: cid });
    be.free(ck); be.free(cid);
  } else {
    sortedRows({ ...base, n }, k);
  }
  // sorted=False with nth_element leaves its own order: always replayed
  if (!sorted && k * 64 > n) be.ctx.memsetD32(flags.ptr, 1, rows, be.stream);
  const scratch = k * 64 > n ? be.alloc('int32', rows * n) : null;
  runEmulation(d, 'topk', false, input, values, indices, flags, scratch, rows, n, k, flip, sorted ? 1 : 0);
  if (scratch) be.free(scratch);
  be.free(flags);
}

/** kthvalue over the last dim: the k-th smallest (1-based), as TH's quick_select picks it on ties. */
export function cudaKthvalue(input: StridedRef, rows: number, n: number, k: number, values: StridedRef, indices: StridedRef): void {
  checkSortable('kthvalue', input.dtype);
  if (rows * n === 0) return;
  const d = input.dtype;
  const flags = be.alloc('int32', rows, true);
  const base = { d, rows, n, flip: 0n, input, values, indices, flags, kk: k, epi: 'kth' as const };
  const Lmax = maxTile(d);
  if (n <= Lmax) {
    const L = nextPow2(n), KS = Math.min(L, nextPow2(k + 1));
    runBlock({ ...base, from: 'values', select: KS < L ? 'topk' : 'full', nv: n, segs: 1, L, KS, rpb: KS < L ? 1 : rowsPerBlock(L, rows) });
  } else sortedRows(base, 1);
  const scratch = be.alloc('int32', rows * n);
  runEmulation(d, 'kth', false, input, values, indices, flags, scratch, rows, n, k, 0n, 0);
  be.free(scratch); be.free(flags);
}

/** median / nanmedian over the last dim with indices (ties by index; median of a row with NaN: its first NaN). */
export function cudaMedian(input: StridedRef, rows: number, n: number, ignoreNan: boolean, values: StridedRef, indices: StridedRef): void {
  checkSortable('median', input.dtype);
  if (rows * n === 0) return;
  const d = input.dtype;
  const flags = ignoreNan && isF(d) ? be.alloc('int32', rows, true) : null;
  sortedRows({ d, epi: 'median', ignoreNan, rows, n, flip: 0n, input, values, indices, flags }, 1);
  if (flags) {
    // all-NaN rows of nanmedian: nth_element on equivalent elements decides
    const scratch = be.alloc('int32', rows * n);
    runEmulation(d, 'median', true, input, values, indices, flags, scratch, rows, n, 0, 0n, 0);
    be.free(scratch); be.free(flags);
  }
}

/** mode over the last dim: ATen's CPU std::sort by value, then the last index of the first longest run. */
export function cudaMode(input: StridedRef, rows: number, n: number, values: StridedRef, indices: StridedRef): void {
  checkSortable('mode', input.dtype);
  if (rows * n === 0) return;
  const scratch = be.alloc('int32', rows * n);
  runEmulation(input.dtype, 'mode', false, input, values, indices, null, scratch, rows, n, 0, 0n, 0);
  be.free(scratch);
}

// ---- searchsorted ------------------------------------------------------------------------------------

export function searchsortedSource(d: DTypeName, outD: DTypeName, withSorter: boolean) {
  const T = R.storageType(d), O = outD === 'int64' ? 'long long' : 'int';
  const V = isF(d) ? 'double' : 'long long';
  const p = new Params().ptr(`const ${T}`, 'bd').ptr(`const ${T}`, 'inp').ptr('const long long', 'sorter').ptr(O, 'out')
    .i64('bRows', 'nb', 'rows', 'ni', 'boff', 'ioff', 'soff', 'ooff').i32('right');
  const src = `extern "C" __global__ void __launch_bounds__(256) searchsorted(${p.text}) {
  ${gridLoop('long long', 'e', 'rows * ni')} {
    const long long r = e / ni, br = bRows == 1 ? 0 : r;
    const ${V} v = ${valueExpr(d, 'inp', 'ioff + e')};
    long long lo = 0, hi = nb;
    while (lo < hi) {
      const long long mid = lo + ((hi - lo) >> 1);
      const long long at = ${withSorter ? 'sorter[soff + br * nb + mid]' : 'mid'};
      const ${V} m = ${valueExpr(d, 'bd', 'boff + br * nb + at')};
      // lower bound: first boundary >= v; upper: first boundary > v (NaN compares false: goes right)
      if (right ? !(m > v) : !(m >= v)) lo = mid + 1; else hi = mid;
    }
    out[ooff + e] = (${O})lo;
  }
}`;
  return { src, name: 'searchsorted', sig: p.sig };
}

/**
 * searchsorted: `boundaries` [bRows, nb] (bRows 1: shared by every input row), `input` [rows, ni], both
 * contiguous and of one dtype; `sorter` (optional, int64, like boundaries) gives each row's ascending order.
 */
export function cudaSearchsorted(boundaries: StridedRef, bRows: number, nb: number, input: StridedRef, rows: number, ni: number,
  right: boolean, sorter: StridedRef | null, out: StridedRef): void {
  checkSortable('searchsorted', input.dtype);
  if (rows * ni === 0) return;
  const d = input.dtype;
  const k = be.kernel(`searchsorted:${d}:${out.dtype}:${!!sorter}`, () => searchsortedSource(d, out.dtype, !!sorter));
  be.launch(k, be.gridFor(rows * ni, 256), 256, [ptr(boundaries), ptr(input), sorter ? ptr(sorter) : 0n, ptr(out),
    bRows, nb, rows, ni, boundaries.offset, input.offset, sorter?.offset ?? 0, out.offset, right ? 1 : 0]);
}

// ---- unique ---------------------------------------------------------------------------------------------

/**
 * unique's device steps: 'exotic' flags a NaN or a signed zero (then the order std::sort gives equal keys
 * shows in the result); 'emulate' replays std::sort on one thread (flat: only when flagged; rows: always);
 * 'groups' writes each group's count and first value.
 */
export function uniqueSource(d: DTypeName, step: 'exotic' | 'emulate' | 'groups', rowLen1: boolean) {
  const T = R.storageType(d);
  const p = new Params().ptr(`const ${T}`, 'in').ptr('int', 'ids').ptr('int', 'flag').ptr('const long long', 'starts').ptr('long long', 'counts')
    .ptr(T, 'vals').ptr('const long long', 'total').i64('n', 'rowLen', 'ioff').i32('consecutive');
  let src: string;
  if (step === 'exotic') {
    const neg0 = d === 'float64' ? '__double_as_longlong(x) == (long long)0x8000000000000000ull' : d === 'float32' ? '__float_as_uint(x) == 0x80000000u' : `in[ioff + i] == 0x8000`;
    src = `extern "C" __global__ void __launch_bounds__(256) unique_step(${p.text}) {
  ${gridLoop('long long', 'i', 'n')} {
    const ${d === 'float64' ? 'double' : 'float'} x = ${R.load(d, 'in', 'ioff + i')};
    if (isnan(x) || ${neg0}) atomicOr(flag, 1);
  }
}`;
  } else if (step === 'emulate') {
    const rowLess = `struct RowLess { const ${T}* p; long long len; __device__ bool operator()(int x, int y) const {
  for (long long i = 0; i < len; i++) { const auto a = ${valueExpr(d, 'p', 'x * len + i')}, b = ${valueExpr(d, 'p', 'y * len + i')}; if (a < b) return true; if (a > b) return false; }
  return false; } };`;
    src = `${KEYS}${STD_ALGOS}${comparators(d)}
${rowLess}
extern "C" __global__ void unique_step(${p.text}) {
  if (blockIdx.x != 0 || threadIdx.x != 0) return;
  if (flag && *flag == 0) return;
  const ${T}* pp = in + ioff;
  for (long long j = 0; j < n; j++) ids[j] = (int)j;
  ${rowLen1 ? `KeyLess less{pp, (${keyT(d)})0};` : 'RowLess less{pp, rowLen};'}
  nbx_std_sort(ids, 0, n, less);
}`;
  } else {
    src = `extern "C" __global__ void __launch_bounds__(256) unique_step(${p.text}) {
  const long long G = *total;
  ${gridLoop('long long', 'g', 'G')} {
    const long long s = starts[g];
    counts[g] = (g + 1 < G ? starts[g + 1] : n) - s;
    const long long row = consecutive ? s : (long long)ids[s];
    for (long long c = 0; c < rowLen; c++) vals[g * rowLen + c] = in[ioff + row * rowLen + c];
  }
}`;
  }
  return { src, name: 'unique_step', sig: p.sig };
}

/** The grouping pass: a new group where a sorted row differs (by `!=`, so each NaN stands alone) from the previous. */
function groupCompaction(d: DTypeName, rowLen1: boolean, consecutive: boolean): Compaction {
  const T = R.storageType(d);
  const params = new Params().ptr(`const ${T}`, 'in').ptr('const int', 'ids').ptr('long long', 'starts').ptr('long long', 'inverse').i64('ioff', 'rowLen');
  const row = (i: string): string => (consecutive ? i : `(long long)ids[${i}]`);
  const differs = rowLen1
    ? `${valueExpr(d, 'in', `ioff + ${row('i')}`)} != ${valueExpr(d, 'in', `ioff + ${row('i - 1')}`)}`
    : `nbx_row_differs(in + ioff, ${row('i')}, ${row('i - 1')}, rowLen)`;
  return {
    key: `unique:${d}:${rowLen1}:${consecutive}`, params,
    helpers: rowLen1 ? '' : `__device__ bool nbx_row_differs(const ${T}* p, long long x, long long y, long long len) {
  for (long long c = 0; c < len; c++) if (${valueExpr(d, 'p', 'x * len + c')} != ${valueExpr(d, 'p', 'y * len + c')}) return true;
  return false;
}`,
    pre: '',
    flag: `i == 0 || ${differs}`,
    emit: 'starts[pos] = i;',
    all: `inverse[${row('i')}] = excl + (f ? 1 : 0) - 1;`,
  };
}

/**
 * unique / unique_consecutive of a contiguous [rows, rowLen] operand, comparing whole rows; results on the
 * host, as the CPU kernel returns them (one readback of the group count, then the three arrays).
 */
export function cudaUnique(input: StridedRef, rows: number, rowLen: number, consecutive: boolean): UniqueResult {
  checkSortable('unique', input.dtype);
  const d = input.dtype;
  const empty = (): UniqueResult => ({ values: allocStorage(d, 0), inverse: new BigInt64Array(rows), counts: new BigInt64Array(0), groups: 0 });
  if (rows === 0) return empty();
  const rowLen1 = rowLen === 1;
  const ids = consecutive ? null : be.alloc('int32', rows);
  const step = (s: 'exotic' | 'emulate' | 'groups', flag: CudaBuffer | null, starts: CudaBuffer | null, counts: CudaBuffer | null, vals: CudaBuffer | null, total: bigint, grid: number, block: number): void => {
    const k = be.kernel(`unique:${s}:${d}:${rowLen1}`, () => uniqueSource(d, s, rowLen1));
    be.launch(k, grid, block, [ptr(input), bp(ids), bp(flag), bp(starts), bp(counts), bp(vals), total, rows, rowLen, input.offset, consecutive ? 1 : 0]);
  };
  if (ids && rowLen1) {
    // stable order (unique unless NaN or -0 is present; then std::sort is replayed)
    const pairs = rows <= maxTile(d) ? null : mergeSort(d, input, 1, rows, 0n);
    if (pairs) {
      be.ctx.copyDtoD(ids.ptr, pairs.id.ptr, rows * 4, be.stream);
      be.free(pairs.k); be.free(pairs.id);
    } else {
      const kb = be.alloc(keyDT(d), rows);
      const L = nextPow2(rows);
      runBlock({ d, from: 'values', select: 'full', epi: 'pairs', rows: 1, n: rows, nv: rows, segs: 1, L, KS: L, rpb: 1, flip: 0n, input, outk: kb, outid: ids, dstRow: rows });
      be.free(kb);
    }
    if (isF(d)) {
      const flag = be.alloc('int32', 1, true);
      step('exotic', flag, null, null, null, 0n, be.gridFor(rows, 256), 256);
      step('emulate', flag, null, null, null, 0n, 1, 1);
      be.free(flag);
    }
  } else if (ids) step('emulate', null, null, null, null, 0n, 1, 1);
  // groups: starts of runs (compaction), inverse, then counts and first values
  const starts = be.alloc('int64', rows), inverse = be.alloc('int64', rows);
  const { offsets, totalAt } = runCompaction(be, groupCompaction(d, rowLen1, consecutive), rows, [ptr(input), bp(ids), starts.ptr, inverse.ptr, input.offset, rowLen]);
  const G = Number((be.downloadSync(offsets, 'int64', totalAt, 1) as BigInt64Array)[0]);
  const counts = be.alloc('int64', Math.max(G, 1)), vals = be.alloc(d, Math.max(G * rowLen, 1));
  step('groups', null, starts, counts, vals, offsets.ptr + BigInt(totalAt * 8), be.gridFor(Math.max(G, 1), 256), 256);
  const result: UniqueResult = {
    values: be.downloadSync(vals, d, 0, G * rowLen) as StorageArray,
    inverse: be.downloadSync(inverse, 'int64', 0, rows) as BigInt64Array,
    counts: be.downloadSync(counts, 'int64', 0, G) as BigInt64Array,
    groups: G,
  };
  for (const b of [starts, inverse, counts, vals, offsets]) be.free(b);
  if (ids) be.free(ids);
  return result;
}
