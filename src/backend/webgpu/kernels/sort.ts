// WebGPU kernels for sorting and selection, with the contract in src/kernels/sort.ts:
// sort, topk, kthvalue, median, mode, searchsorted, unique. The algorithms are the CUDA kernels'
// (src/backend/cuda/kernels/sort.ts), so ties, NaN and -0 come out as PyTorch's CPU orders them:
//
//  - elements become order-preserving u32 keys (NaN after everything, -0 equal to 0, complemented for
//    descending / largest), paired with their index; sorting (key, index) pairs gives the stable order;
//  - rows that fit a workgroup tile (from maxComputeWorkgroupStorageSize) run a bitonic sort in
//    workgroup memory, several short rows per workgroup; longer rows are padded to a power of two, their
//    tiles sorted in workgroup memory, then merged by global bitonic steps (one dispatch per stride down
//    to the tile, the rest of each merge in workgroup memory);
//  - where equal keys can make PyTorch's result differ from the stable order (an unstable sort with ties,
//    ties around the k-th element, topk's sorted=False, mode, an all-NaN nanmedian row), the row is
//    flagged on the device and a replay kernel runs the exact libstdc++ / TH algorithm the CPU runs on
//    that row (one invocation per row; unflagged rows return at once).
//
// Index outputs are int32 or int64 (PyTorch's; written sign-extended, two words: storeIndex). int64
// values get 32-bit keys too: their dense rank in the row (`int64RankKeys`: two stable passes, low words
// then high words, and a scan of the value changes), after which every kernel runs as for int32.
// 'unique' has data-dependent output sizes, which needs a synchronous readback WebGPU does not have:
// it raises DeviceLimitError, as host staging did.

import { DTYPES, type DTypeName } from '../../../dtype/dtypes.js';
import type { StridedRef } from '../../backend.js';
import type { BackendKernels } from '../../../kernels/table.js';
import { WGSL as R, perWord, checkWgslDType } from '../../../ir/render_wgsl.js';
import { DeviceLimitError, UnsupportedError } from '../../../errors.js';
import type { Program, WebGPUBackend, WGBuffer } from '../runtime/backend.js';
import { module, U, wgslInclusiveScan } from '../runtime/elementwise.js';
import type { UniqueResult } from '../../../kernels/sort.js';
import { nextPow2 } from '../../backend.js';
import { checkIndexDType, program, storeIndex } from './util.js';

let be: WebGPUBackend;
export const kernels = {
  sort: webgpuSort,
  topk: webgpuTopk,
  kthvalue: webgpuKthvalue,
  median: webgpuMedian,
  mode: webgpuMode,
  searchsorted: webgpuSearchsorted,
  unique: webgpuUnique,
} satisfies BackendKernels;

/** Points this family's kernels at the backend (called once, when the backend starts). */
export function bind(backend: WebGPUBackend): void {
  be = backend;
}

const SORTABLE = new Set<DTypeName>(['bool', 'uint8', 'int8', 'int16', 'int32', 'int64', 'float16', 'bfloat16', 'float32']);
function checkSortable(op: string, d: DTypeName): void {
  checkWgslDType(op, d, true);
  if (!SORTABLE.has(d)) throw new UnsupportedError(op, `webgpu ${op} supports bool, integer and real floating dtypes, got ${d}`);
}
/** Index outputs: int32 or int64. */
const checkIndices = checkIndexDType;
const isF = (d: DTypeName): boolean => DTYPES[d].kind === 'float';
const prevPow2 = (v: number): number => 2 ** Math.floor(Math.log2(Math.max(1, v)));

const WG = 64;

// ---- device code -----------------------------------------------------------------------------------

/** Order-preserving keys: NaN after everything, -0 as 0 (from the bits: no float comparison can flush). */
const KEYS = `fn okey_f(f: f32) -> u32 {
  let b = bitcast<u32>(f);
  if ((b & 0x7fffffffu) > 0x7f800000u) { return 0xffffffffu; }
  if ((b & 0x7fffffffu) == 0u) { return 0x80000000u; }
  return select(b | 0x80000000u, ~b, (b & 0x80000000u) != 0u);
}
fn okey_i(v: i32) -> u32 { return bitcast<u32>(v) ^ 0x80000000u; }`;
const keyOf = (d: DTypeName, buf: string, idx: string): string => (isF(d) ? `okey_f(${R.load(d, buf, idx)})` : `okey_i(${R.load(d, buf, idx)})`);

/**
 * libstdc++'s algorithms (bits/stl_algo.h, bits/stl_heap.h) and TH's quick_select, as the CPU kernels run
 * them, on the ids of one row in b1 from `rb` on, compared by `lt(x, y)` (defined per kernel). The
 * introsort recursion runs from an explicit stack: its ranges are disjoint, so their order is free
 * (the smaller part first keeps the stack within log2 n entries).
 */
const STD_ALGOS = `var<private> rb: u32;
fn sg(i: i32) -> u32 { return b1[rb + u32(i)]; }
fn ss(i: i32, v: u32) { b1[rb + u32(i)] = v; }
fn swp(i: i32, j: i32) { let t = sg(i); ss(i, sg(j)); ss(j, t); }
fn sx_linear_insert(l0: i32) {
  var last = l0; let val = sg(last); var next = last - 1;
  loop { if (next < 0) { break; } if (!lt(val, sg(next))) { break; } ss(last, sg(next)); last = next; next--; }
  ss(last, val);
}
fn sx_insertion_sort(first: i32, last: i32) {
  if (first == last) { return; }
  for (var i = first + 1; i < last; i++) {
    if (lt(sg(i), sg(first))) {
      let val = sg(i);
      for (var j = i; j > first; j--) { ss(j, sg(j - 1)); }
      ss(first, val);
    } else { sx_linear_insert(i); }
  }
}
fn sx_final_insertion_sort(first: i32, last: i32) {
  if (last - first > 16) {
    sx_insertion_sort(first, first + 16);
    for (var i = first + 16; i < last; i++) { sx_linear_insert(i); }
  } else { sx_insertion_sort(first, last); }
}
fn sx_median_to_first(result: i32, x: i32, y: i32, z: i32) {
  let A = sg(x); let B = sg(y); let C = sg(z);
  if (lt(A, B)) {
    if (lt(B, C)) { swp(result, y); } else if (lt(A, C)) { swp(result, z); } else { swp(result, x); }
  } else if (lt(A, C)) { swp(result, x); } else if (lt(B, C)) { swp(result, z); } else { swp(result, y); }
}
fn sx_partition(f0: i32, l0: i32, pivot: i32) -> i32 {
  var first = f0; var last = l0; let p = sg(pivot);
  let lo = first - 1; let hi = last;
  loop {
    loop { if (!(first < hi && lt(sg(first), p))) { break; } first++; }
    last--;
    loop { if (!(last > lo && lt(p, sg(last)))) { break; } last--; }
    if (!(first < last)) { return first; }
    swp(first, last);
    first++;
  }
}
fn sx_partition_pivot(first: i32, last: i32) -> i32 {
  let mid = first + (last - first) / 2;
  sx_median_to_first(first, first + 1, mid, last - 1);
  return sx_partition(first + 1, last, first);
}
fn sx_push_heap(first: i32, h0: i32, top: i32, value: u32) {
  var hole = h0; var parent = (hole - 1) / 2;
  loop { if (!(hole > top && lt(sg(first + parent), value))) { break; } ss(first + hole, sg(first + parent)); hole = parent; parent = (hole - 1) / 2; }
  ss(first + hole, value);
}
fn sx_adjust_heap(first: i32, h0: i32, len: i32, value: u32) {
  let top = h0; var hole = h0; var second = h0;
  loop {
    if (!(second < (len - 1) / 2)) { break; }
    second = 2 * (second + 1);
    if (lt(sg(first + second), sg(first + second - 1))) { second--; }
    ss(first + hole, sg(first + second));
    hole = second;
  }
  if ((len & 1) == 0 && second == (len - 2) / 2) {
    second = 2 * (second + 1);
    ss(first + hole, sg(first + second - 1));
    hole = second - 1;
  }
  sx_push_heap(first, hole, top, value);
}
fn sx_make_heap(first: i32, last: i32) {
  let len = last - first;
  if (len < 2) { return; }
  var parent = (len - 2) / 2;
  loop { sx_adjust_heap(first, parent, len, sg(first + parent)); if (parent == 0) { return; } parent--; }
}
fn sx_pop_heap(first: i32, last: i32, result: i32) { let value = sg(result); ss(result, sg(first)); sx_adjust_heap(first, 0, last - first, value); }
fn sx_heap_select(first: i32, middle: i32, last: i32) {
  sx_make_heap(first, middle);
  for (var i = middle; i < last; i++) { if (lt(sg(i), sg(first))) { sx_pop_heap(first, middle, i); } }
}
fn sx_sort_heap(first: i32, l0: i32) { var last = l0; loop { if (last - first <= 1) { break; } last--; sx_pop_heap(first, last, last); } }
fn sx_partial_sort(first: i32, middle: i32, last: i32) { sx_heap_select(first, middle, last); sx_sort_heap(first, middle); }
fn lg(n: i32) -> i32 { return 31 - i32(countLeadingZeros(u32(n))); }
fn sx_std_sort(first: i32, last: i32) {
  if (first == last) { return; }
  var sf: array<i32, 64>; var sl: array<i32, 64>; var sd: array<i32, 64>;
  sf[0] = first; sl[0] = last; sd[0] = lg(last - first) * 2; var sp = 1;
  loop {
    if (sp == 0) { break; }
    sp--;
    var f = sf[sp]; var l = sl[sp]; var depth = sd[sp];
    loop {
      if (l - f <= 16) { break; }
      if (depth == 0) { sx_partial_sort(f, l, l); break; }
      depth--;
      let cut = sx_partition_pivot(f, l);
      // the larger part waits on the stack (at most log2 n entries), the smaller goes on
      if (cut - f <= l - cut) { sf[sp] = cut; sl[sp] = l; l = cut; } else { sf[sp] = f; sl[sp] = cut; f = cut; }
      sd[sp] = depth; sp++;
    }
  }
  sx_final_insertion_sort(first, last);
}
fn sx_nth_element(f0: i32, nth: i32, l0: i32) {
  var first = f0; var last = l0;
  if (first == last || nth == last) { return; }
  var depth = lg(last - first) * 2;
  loop {
    if (last - first <= 3) { break; }
    if (depth == 0) { sx_heap_select(first, nth + 1, last); swp(first, nth); return; }
    depth--;
    let cut = sx_partition_pivot(first, last);
    if (cut <= nth) { first = cut; } else { last = cut; }
  }
  sx_insertion_sort(first, last);
}
// TH's quick_select (median of three, Sedgewick partition), "greater" being lt with swapped arguments
fn sx_quick_select(n: i32, k: i32) {
  var L = 0; var R = n - 1;
  loop {
    if (R <= L) { return; }
    if (R == L + 1) { if (lt(sg(R), sg(L))) { swp(L, R); } return; }
    let P = (L + R) >> 1u;
    swp(P, L + 1);
    if (lt(sg(R), sg(L + 1))) { swp(L + 1, R); }
    if (lt(sg(R), sg(L))) { swp(L, R); }
    if (lt(sg(L), sg(L + 1))) { swp(L + 1, L); }
    var i = L + 1; var j = R;
    let piv = sg(L);
    loop {
      loop { i++; if (!(i <= R && lt(sg(i), piv))) { break; } }
      loop { j--; if (!(j >= L && lt(piv, sg(j)))) { break; } }
      if (j < i) { break; }
      swp(i, j);
    }
    swp(L, j);
    if (j <= k) { L = i; }
    if (j >= k) { R = j - 1; }
  }
}
fn sx_iota(n: i32) { for (var j = 0; j < n; j++) { ss(j, u32(j)); } }`;

// ---- programs ------------------------------------------------------------------------------------

/** keys: uniform [total, ioff, flip]; b1 keys (w), b2 input. */
function keysProgram(d: DTypeName): Program {
  return program(`sort_keys|${d}`, 'wr', 4, () => module(4, 'wr', WG, `if (g >= ${U(0)}) { return; }
  b1[g] = ${keyOf(d, 'b2', `${U(1)} + g`)} ^ ${U(2)};`, KEYS));
}

/** Padded (key, id) pairs of every row: uniform [rows, n, L]; b1 keys, b2 ids (w), b3 row keys. */
function pairsProgram(): Program {
  return program('sort_pairs', 'wwr', 4, () => module(4, 'wwr', WG, `let total = ${U(0)} * ${U(2)}; if (g >= total) { return; }
  let n = ${U(1)}; let L = ${U(2)}; let r = g / L; let j = g % L;
  if (j < n) { b1[g] = b3[r * n + j]; b2[g] = j; } else { b1[g] = 0xffffffffu; b2[g] = 0xffffffffu; }`));
}

const CMPX = `fn cmpx(a: u32, b: u32, asc: bool) {
  let ka = sk[a]; let kb = sk[b]; let ia = si[a]; let ib = si[b];
  if ((ka > kb || (ka == kb && ia > ib)) == asc) { sk[a] = kb; sk[b] = ka; si[a] = ib; si[b] = ia; }
}`;

/**
 * Bitonic steps in workgroup memory over tiles of E pairs: 'sort' runs every merge size up to min(L, E)
 * (a tile holds E / L whole rows, or part of one), 'merge' the strides below E of merge size `size`.
 * Directions follow the position within the row, so tiles of a long row alternate as the network needs.
 * uniform: [total pairs, L, size]; b1 keys, b2 ids.
 */
function localProgram(mode: 'sort' | 'merge', E: number, T: number): Program {
  return program(`sort_local|${mode}|${E}|${T}`, 'ww', 4, () => {
    const fns = `const E = ${E}u;
var<workgroup> sk: array<u32, ${E}>;
var<workgroup> si: array<u32, ${E}>;
${CMPX}`;
    const steps = (size: string): string => `for (var stride = ${mode === 'sort' ? `${size} >> 1u` : 'E >> 1u'}; stride > 0u; stride >>= 1u) {
      workgroupBarrier();
      for (var t = lid; t < E / 2u; t += ${T}u) { let a = 2u * t - (t & (stride - 1u)); cmpx(a, a + stride, (((base + a) % L) & ${size}) == 0u); }
    }`;
    const body = `let total = ${U(0)}; let L = ${U(1)};
  let base = (wid.y * nwg.x + wid.x) * E;
  if (base >= total) { return; }
  for (var e = lid; e < E; e += ${T}u) {
    if (base + e < total) { sk[e] = b1[base + e]; si[e] = b2[base + e]; } else { sk[e] = 0xffffffffu; si[e] = 0xffffffffu; }
  }
  ${mode === 'sort' ? `let top = min(L, E);
  for (var size = 2u; size <= top; size <<= 1u) {
    ${steps('size')}
  }` : `let size = ${U(2)};
  ${steps('size')}`}
  workgroupBarrier();
  for (var e = lid; e < E; e += ${T}u) { if (base + e < total) { b1[base + e] = sk[e]; b2[base + e] = si[e]; } }`;
    const entryCode = `@compute @workgroup_size(${T})
fn main(@builtin(workgroup_id) wid: vec3u, @builtin(num_workgroups) nwg: vec3u, @builtin(local_invocation_index) lid: u32) {
  ${body}
}`;
    return module(4, 'ww', T, '', fns, entryCode);
  });
}

/** One global bitonic step: uniform [rows, L, size, stride]; b1 keys, b2 ids. */
function globalStepProgram(): Program {
  return program('sort_step', 'ww', 4, () => module(4, 'ww', WG, `let L = ${U(1)}; let half = L / 2u; if (g >= ${U(0)} * half) { return; }
  let size = ${U(2)}; let stride = ${U(3)};
  let row = g / half; let t = g % half; let a = 2u * t - (t & (stride - 1u));
  let i = row * L + a; let j = i + stride;
  let ka = b1[i]; let kb = b1[j]; let ia = b2[i]; let ib = b2[j];
  if ((ka > kb || (ka == kb && ia > ib)) == ((a & size) == 0u)) { b1[i] = kb; b1[j] = ka; b2[i] = ib; b2[j] = ia; }`));
}

/** Flags rows with equal neighbours in sorted positions [j0, j1]: uniform [rows, L, j0, j1]; b1 flags (atomic), b2 keys. */
function tiesProgram(): Program {
  return program('sort_ties', 'ar', 4, () => module(4, 'ar', WG, `let L = ${U(1)}; let j0 = ${U(2)}; let w = ${U(3)} - j0;
  if (w == 0u || g >= ${U(0)} * w) { return; }
  let row = g / w; let j = j0 + g % w;
  if (b2[row * L + j] == b2[row * L + j + 1u]) { atomicStore(&b1[row], 1u); }`));
}

type ReplayKind = 'sort' | 'topk' | 'kth' | 'median' | 'mode';
/**
 * The per-row decision and replay: one invocation per row. uniform [rows, n, L, k, sorted, ignoreNan];
 * b1 scratch ids (rows × n, the replayed order), b2 flags, b3 row keys, b4 sorted keys, b5 sorted ids.
 * Single-result kinds always write their pick to the scratch row's first entry and set the flag.
 */
function replayProgram(kind: ReplayKind, d: DTypeName): Program {
  return program(`sort_replay|${kind}|${isF(d)}`, 'wwrrr', 8, () => {
    const nanKey = (k: string): string => (isF(d) ? `(${k} == 0xffffffffu)` : 'false');
    let lt: string;
    if (kind === 'median') {
      // ATen's: x < y, ties by index, NaN equivalent to each other (after everything for nanmedian)
      lt = `let x = b3[kb + a]; let y = b3[kb + b]; let nx = ${nanKey('x')}; let ny = ${nanKey('y')};
  return (!nx && !ny && (x < y || (x == y && a < b))) || (ign && ny && !nx);`;
    } else if (kind === 'mode') {
      lt = `let x = b3[kb + a]; let y = b3[kb + b]; return !${nanKey('x')} && !${nanKey('y')} && x < y;`; // a bare '<'
    } else lt = 'return b3[kb + a] < b3[kb + b];';
    const fns = `var<private> kb: u32;
var<private> ign: bool;
fn lt(a: u32, b: u32) -> bool { ${lt} }
${STD_ALGOS}`;
    let work: string;
    switch (kind) {
      case 'sort': work = 'if (b2[r] == 0u) { return; } sx_iota(ni); sx_std_sort(0, ni);'; break;
      case 'topk': work = `if (b2[r] == 0u) { return; }
  sx_iota(ni);
  if (k * 64 <= ni) { sx_partial_sort(0, k, ni); } else { sx_nth_element(0, k - 1, ni); if (sorted) { sx_std_sort(0, k - 1); } }`; break;
      case 'kth': work = `var pick = b5[r * L + u32(k - 1)];
  if (b2[r] != 0u) { sx_iota(ni); sx_quick_select(ni, k - 1); pick = sg(k - 1); }
  ss(0, pick); b2[r] = 1u;`; break;
      case 'median': work = `// NaNs sort last, in index order: count them by binary search
  var nanc = 0u;
  if (${isF(d)}) { var lo = 0u; var hi = n; loop { if (lo >= hi) { break; } let mid = (lo + hi) / 2u; if (b4[r * L + mid] == 0xffffffffu) { hi = mid; } else { lo = mid + 1u; } } nanc = n - lo; }
  var pick: u32;
  if (!ign && nanc > 0u) { pick = b5[r * L + n - nanc]; }
  else if (nanc == n) { sx_iota(ni); sx_nth_element(0, 0, ni); pick = sg(0); }
  else { pick = b5[r * L + (n - nanc - 1u) / 2u]; }
  ss(0, pick); b2[r] = 1u;`; break;
      case 'mode': work = `sx_iota(ni); sx_std_sort(0, ni);
  // the last index of the first longest run; runs split where values differ by '!=' (each NaN alone)
  var modei = 0u; var freq = 0; var best = 0;
  for (var i = 0; i < ni; i++) {
    freq++;
    let x = b3[kb + sg(i)];
    if (i == ni - 1 || x != b3[kb + sg(i + 1)] || ${nanKey('x')}) {
      if (freq > best) { modei = sg(i); best = freq; }
      freq = 0;
    }
  }
  ss(0, modei); b2[r] = 1u;`; break;
    }
    const body = `let r = g; if (r >= ${U(0)}) { return; }
  let n = ${U(1)}; let ni = i32(n); let L = ${U(2)}; let k = i32(${U(3)}); let sorted = ${U(4)} != 0u; ign = ${U(5)} != 0u;
  rb = r * n; kb = r * n;
  ${work}`;
    return module(8, 'wwrrr', WG, body, fns);
  });
}

/**
 * Values and indices out: for each (row, j < m) the id from the replayed row (flagged) or the sorted
 * one. uniform [rows, n, m, L, ioff, voff, xoff]; b1 values, b2 indices, b3 input, b4 flags, b5 scratch, b6 sorted ids.
 */
function gatherProgram(d: DTypeName, id: DTypeName): Program {
  const k = perWord(d);
  const access = `${k > 1 ? 'a' : 'w'}wrrrr`;
  return program(`sort_gather|${d}|${id}`, access, 8, () => {
    const width = 32 / k, mask = k === 1 ? '0xffffffffu' : k === 2 ? '0xffffu' : '0xffu';
    const copy = d === 'int64' ? 'b1[2u * vo] = b3[2u * si]; b1[2u * vo + 1u] = b3[2u * si + 1u];'
      : k === 1 ? 'b1[vo] = b3[si];'
      : R.storeShared(d, 'b1', 'vo', `((b3[si / ${k}u] >> ((si % ${k}u) * ${width}u)) & ${mask})`);
    return module(8, access, WG, `let n = ${U(1)}; let m = ${U(2)}; if (g >= ${U(0)} * m) { return; }
  let r = g / m; let j = g % m;
  var id: u32;
  if (b4[r] != 0u) { id = b5[r * n + j]; } else { id = b6[r * ${U(3)} + j]; }
  let si = ${U(4)} + r * n + id; let vo = ${U(5)} + g;
  ${copy}
  ${storeIndex(id, 'b2', `${U(6)} + g`, 'i32(id)')}`);
  });
}

// ---- host side ---------------------------------------------------------------------------------------

/** The largest tile of pairs (a power of two) a workgroup sorts in its memory. */
function tileSize(): number {
  const bytes = be.isReady ? be.info.limits.maxComputeWorkgroupStorageSize ?? 16384 : 16384;
  return Math.min(4096, prevPow2(bytes / 8));
}

interface Rows { keys: WGBuffer; sk: WGBuffer; sid: WGBuffer; L: number }

/** Row keys, then every row's stable (key, id) order, padded to L (a power of two) per row. */
function sortedRows(input: StridedRef, rows: number, n: number, flip: boolean, sort = true): Rows {
  const keys = be.allocBytes(rows * n * 4);
  if (input.dtype === 'int64') int64RankKeys(input, rows, n, flip, keys);
  else be.dispatch(keysProgram(input.dtype), [keys, input.buf as WGBuffer], new Uint32Array([rows * n, input.offset, flip ? 0xffffffff : 0, 0]), rows * n, WG);
  if (!sort) return { keys, sk: keys, sid: keys, L: n };
  return { keys, ...sortKeys(keys, rows, n) };
}

/** Every row's stable (key, id) order of [rows, n] u32 keys, padded to L (a power of two) per row. */
function sortKeys(keys: WGBuffer, rows: number, n: number): { sk: WGBuffer; sid: WGBuffer; L: number } {
  const L = nextPow2(n);
  const sk = be.allocBytes(rows * L * 4), sid = be.allocBytes(rows * L * 4);
  be.dispatch(pairsProgram(), [sk, sid, keys], new Uint32Array([rows, n, L, 0]), rows * L, WG);
  const E = Math.min(tileSize(), nextPow2(rows) * L);
  const T = Math.max(1, Math.min(be.wgReduce, E / 2));
  const total = rows * L;
  const local = (mode: 'sort' | 'merge', size: number): void =>
    be.dispatch(localProgram(mode, E, T), [sk, sid], new Uint32Array([total, L, size, 0]), Math.ceil(total / E) * T, T);
  if (L > 1) local('sort', 0);
  for (let size = 2 * E; size <= L; size *= 2) {
    for (let stride = size / 2; stride >= E; stride /= 2) {
      be.dispatch(globalStepProgram(), [sk, sid], new Uint32Array([rows, L, size, stride]), rows * (L / 2), WG);
    }
    local('merge', size);
  }
  return { sk, sid, L };
}

/**
 * int64 values' keys: each element's dense rank among its row's distinct values (order and equality
 * kept, complemented when `flip`). Stable sorts by the low words (unsigned), then by the high words
 * (signed) give the order; a workgroup per row scans where the value changes along it.
 */
function int64RankKeys(input: StridedRef, rows: number, n: number, flip: boolean, keys: WGBuffer): void {
  const x = input.buf as WGBuffer;
  const u = new Uint32Array([rows * n, input.offset, 0, 0]);
  be.dispatch(program('sort_keys64|lo', 'wr', 4, () => module(4, 'wr', WG, `if (g >= ${U(0)}) { return; }
  b1[g] = b2[2u * (${U(1)} + g)];`)), [keys, x], u, rows * n, WG);
  const p1 = sortKeys(keys, rows, n);
  // high-word keys in pass-1 order; sorting them stably sorts by (high, low)
  be.dispatch(program('sort_keys64|hi', 'wrr', 4, () => module(4, 'wrr', WG, `if (g >= ${U(0)}) { return; }
  let n = ${U(2)}; let L = ${U(3)}; let id = b3[(g / n) * L + g % n];
  b1[g] = b2[2u * (${U(1)} + (g / n) * n + id) + 1u] ^ 0x80000000u;`)), [keys, x, p1.sid], new Uint32Array([rows * n, input.offset, n, p1.L]), rows * n, WG);
  const p2 = sortKeys(keys, rows, n);
  const T = Math.min(256, be.wgReduce);
  const rank = program(`sort_rank64|${T}`, 'wrrr', 8, () => module(8, 'wrrr', T, '', `var<workgroup> sh: array<u32, ${T}>;`, `@compute @workgroup_size(${T})
fn main(@builtin(workgroup_id) wid: vec3u, @builtin(num_workgroups) nwg: vec3u, @builtin(local_invocation_index) lid: u32) {
  let rows = ${U(0)}; let n = ${U(1)}; let L = ${U(2)}; let xo = ${U(3)}; let flip = ${U(4)};
  let r = wid.y * nwg.x + wid.x; if (r >= rows) { return; }
  var carry = 0u;
  for (var c0 = 0u; c0 < n; c0 += ${T}u) {
    let q = c0 + lid;
    var id = 0u; var start = 0u;
    if (q < n) {
      id = b3[r * L + b4[r * L + q]];
      let v = vec2<u32>(b2[2u * (xo + r * n + id)], b2[2u * (xo + r * n + id) + 1u]);
      if (q == 0u) { start = 1u; } else {
        let pid = b3[r * L + b4[r * L + q - 1u]];
        let pv = vec2<u32>(b2[2u * (xo + r * n + pid)], b2[2u * (xo + r * n + pid) + 1u]);
        start = select(0u, 1u, any(v != pv));
      }
    }
    sh[lid] = start;
    workgroupBarrier();
    ${wgslInclusiveScan(T)}
    if (q < n) { b1[r * n + id] = (carry + sh[lid] - 1u) ^ flip; }
    carry = carry + sh[${T - 1}u];
    workgroupBarrier();
  }
}`));
  be.dispatchGroups(rank, [keys, x, p1.sid, p2.sid], new Uint32Array([rows, n, p1.L, input.offset, flip ? 0xffffffff : 0, 0, 0, 0]),
    Math.min(rows, 65535), Math.ceil(rows / 65535), 1);
  for (const b of [p1.sk, p1.sid, p2.sk, p2.sid]) be.free(b);
}

/** Flags (zeroed), set where sorted positions [j0, j1] hold equal neighbouring keys. */
function tieFlags(s: Rows, rows: number, j0: number, j1: number): WGBuffer {
  const flags = be.allocBytes(rows * 4, true);
  if (j1 > j0) be.dispatch(tiesProgram(), [flags, s.sk], new Uint32Array([rows, s.L, j0, j1]), rows * (j1 - j0), WG);
  return flags;
}

function finish(kind: ReplayKind, input: StridedRef, rows: number, n: number, m: number, s: Rows, flags: WGBuffer,
  values: StridedRef, indices: StridedRef, k = 0, sorted = false, ignoreNan = false, replay = true): void {
  const scratch = replay ? be.allocBytes(rows * n * 4) : s.sid;
  if (replay) {
    be.dispatch(replayProgram(kind, input.dtype), [scratch, flags, s.keys, s.sk, s.sid],
      new Uint32Array([rows, n, s.L, k, sorted ? 1 : 0, ignoreNan ? 1 : 0, 0, 0]), rows, WG);
  }
  be.dispatch(gatherProgram(input.dtype, indices.dtype), [values.buf as WGBuffer, indices.buf as WGBuffer, input.buf as WGBuffer, flags, scratch, s.sid],
    new Uint32Array([rows, n, m, s.L, input.offset, values.offset, indices.offset, 0]), rows * m, WG);
  for (const b of new Set([scratch, flags, s.keys, s.sk, s.sid])) be.free(b);
}

function checkAll(op: string, input: StridedRef, values: StridedRef, indices: StridedRef): void {
  checkSortable(op, input.dtype);
  checkSortable(op, values.dtype);
  checkIndices(op, indices);
}

/**
 * Mesa's llvmpipe (and lavapipe) cut every invocation off after about 65535 loop iterations in all (a
 * guard against hangs): a serial replay of std::sort over a long row would end early and leave a wrong
 * order. On those adapters (and before the adapter is known) rows that may need a replay are limited to
 * REPLAY_MAX_CAPPED elements; real GPUs have no such cap.
 */
const REPLAY_MAX_CAPPED = 1024;
function checkReplay(op: string, n: number): void {
  if (n <= REPLAY_MAX_CAPPED) return;
  const capped = !be.isReady || /llvmpipe|lavapipe/i.test(be.info.adapter);
  if (capped) {
    throw new DeviceLimitError(op, `webgpu ${op} of rows longer than ${REPLAY_MAX_CAPPED} needs long serial loops, which ${be.isReady ? `this adapter (${be.info.adapter.split(' / ')[0]}) cuts off` : 'an adapter not yet known may cut off (await nbx.webgpu.init() first)'}; got rows of ${n}`);
  }
}

// ---- kernels -------------------------------------------------------------------------------------

/** sort over the last dim of a contiguous [rows, n] operand. */
export function webgpuSort(input: StridedRef, rows: number, n: number, descending: boolean, stable: boolean, values: StridedRef, indices: StridedRef): void {
  checkAll('sort', input, values, indices);
  if (rows * n === 0) return;
  if (!stable) checkReplay('sort', n);
  const s = sortedRows(input, rows, n, descending);
  // std::sort differs from the stable order only on ties
  const flags = stable ? be.allocBytes(rows * 4, true) : tieFlags(s, rows, 0, n - 1);
  finish('sort', input, rows, n, n, s, flags, values, indices, 0, false, false, !stable);
}

/** topk over the last dim: the k best of each row, as ATen's CPU picks and orders them on ties. */
export function webgpuTopk(input: StridedRef, rows: number, n: number, k: number, largest: boolean, sorted: boolean, values: StridedRef, indices: StridedRef): void {
  checkAll('topk', input, values, indices);
  if (k === 0 || rows * n === 0) return;
  checkReplay('topk', n);
  const s = sortedRows(input, rows, n, largest);
  // ties among the k best or at the boundary change the CPU's pick or order; nth_element's unsorted order always does
  const flags = !sorted && k * 64 > n ? be.allocBytes(rows * 4) : tieFlags(s, rows, 0, Math.min(k, n - 1));
  if (!sorted && k * 64 > n) be.dispatch(fillProgram(), [flags], new Uint32Array([rows, 1, 0, 0]), rows, WG);
  finish('topk', input, rows, n, k, s, flags, values, indices, k, sorted);
}

/** Sets every word of b1 to uniform word 1: uniform [count, value]. */
function fillProgram(): Program {
  return program('sort_fill', 'w', 4, () => module(4, 'w', WG, `if (g >= ${U(0)}) { return; } b1[g] = ${U(1)};`));
}

/** kthvalue over the last dim: the k-th smallest (1-based), as TH's quick_select picks it on ties. */
export function webgpuKthvalue(input: StridedRef, rows: number, n: number, k: number, values: StridedRef, indices: StridedRef): void {
  checkAll('kthvalue', input, values, indices);
  if (rows * n === 0) return;
  checkReplay('kthvalue', n);
  const s = sortedRows(input, rows, n, false);
  const flags = tieFlags(s, rows, Math.max(0, k - 2), Math.min(k, n - 1));
  finish('kth', input, rows, n, 1, s, flags, values, indices, k);
}

/** median / nanmedian over the last dim with indices (ties by index; median of a row with NaN: its first NaN). */
export function webgpuMedian(input: StridedRef, rows: number, n: number, ignoreNan: boolean, values: StridedRef, indices: StridedRef): void {
  checkAll('median', input, values, indices);
  if (rows * n === 0) return;
  if (ignoreNan && isF(input.dtype)) checkReplay('nanmedian', n); // an all-NaN row replays nth_element
  const s = sortedRows(input, rows, n, false);
  finish('median', input, rows, n, 1, s, be.allocBytes(rows * 4, true), values, indices, 0, false, ignoreNan);
}

/** mode over the last dim: ATen's CPU std::sort by value, then the last index of the first longest run. */
export function webgpuMode(input: StridedRef, rows: number, n: number, values: StridedRef, indices: StridedRef): void {
  checkAll('mode', input, values, indices);
  if (rows * n === 0) return;
  checkReplay('mode', n);
  const s = sortedRows(input, rows, n, false, false);
  finish('mode', input, rows, n, 1, s, be.allocBytes(rows * 4, true), values, indices);
}

// ---- searchsorted ------------------------------------------------------------------------------------

/** uniform [bRows, nb, rows, ni, boff, ioff, ooff, right]; b1 out (int32 / int64 `od`), b2 boundaries, b3 input. */
function searchsortedProgram(d: DTypeName, od: DTypeName): Program {
  return program(`searchsorted|${d}|${od}`, 'wrr', 8, () => {
    // floats compare by order keys (no flushing of subnormals), NaN compares false either way
    const val = (buf: string, idx: string): string => (isF(d) ? `${R.load(d, buf, idx)}` : R.load(d, buf, idx));
    const ge = isF(d) ? 'fn ge(a: f32, b: f32) -> bool { return !nbx_isnan(a) && !nbx_isnan(b) && okey_f(a) >= okey_f(b); }\nfn gt(a: f32, b: f32) -> bool { return !nbx_isnan(a) && !nbx_isnan(b) && okey_f(a) > okey_f(b); }'
      : d === 'int64' ? 'fn ge(a: vec2<u32>, b: vec2<u32>) -> bool { return !nbx_lt_l(a, b); }\nfn gt(a: vec2<u32>, b: vec2<u32>) -> bool { return nbx_lt_l(b, a); }'
      : 'fn ge(a: i32, b: i32) -> bool { return a >= b; }\nfn gt(a: i32, b: i32) -> bool { return a > b; }';
    return module(8, 'wrr', WG, `let nb = ${U(1)}; let ni = ${U(3)}; if (g >= ${U(2)} * ni) { return; }
  let r = g / ni; let br = select(r, 0u, ${U(0)} == 1u); let right = ${U(7)} != 0u;
  let v = ${val('b3', `${U(5)} + g`)};
  var lo = 0u; var hi = nb;
  loop {
    if (lo >= hi) { break; }
    let mid = lo + ((hi - lo) >> 1u);
    let m = ${val('b2', `${U(4)} + br * nb + mid`)};
    // lower bound: first boundary >= v; upper: first boundary > v (NaN compares false: goes right)
    if (select(!ge(m, v), !gt(m, v), right)) { lo = mid + 1u; } else { hi = mid; }
  }
  ${storeIndex(od, 'b1', `${U(6)} + g`, 'i32(lo)')}`, `${KEYS}\n${ge}`);
  });
}

export function webgpuSearchsorted(boundaries: StridedRef, bRows: number, nb: number, input: StridedRef, rows: number, ni: number,
  right: boolean, sorter: StridedRef | null, out: StridedRef): void {
  checkSortable('searchsorted', input.dtype);
  checkSortable('searchsorted', boundaries.dtype);
  checkIndices('searchsorted', out);
  if (sorter) throw new UnsupportedError('searchsorted', 'webgpu searchsorted takes no sorter');
  if (rows * ni === 0) return;
  be.dispatch(searchsortedProgram(input.dtype, out.dtype), [out.buf as WGBuffer, boundaries.buf as WGBuffer, input.buf as WGBuffer],
    new Uint32Array([bRows, nb, rows, ni, boundaries.offset, input.offset, out.offset, right ? 1 : 0]), rows * ni, WG);
}

// ---- unique --------------------------------------------------------------------------------------------

export function webgpuUnique(input: StridedRef): UniqueResult {
  checkSortable('unique', input.dtype);
  throw new DeviceLimitError('unique', "'unique' returns data-dependent sizes, which needs a synchronous readback; WebGPU has none (run it on the CPU)");
}
