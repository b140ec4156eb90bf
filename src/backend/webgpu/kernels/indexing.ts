// WebGPU kernels of the indexing family, with the CPU kernels' signatures and semantics
// (contract: src/kernels/indexing.ts), ported from the CUDA ones (src/backend/cuda/kernels/indexing.ts):
//   gather          a thread per index position.
//   scatter         deterministic, bit-identical in order to the CPU: an output slot is written only by
//                   the index positions of one "column" (every coordinate but `dim`), so a thread per
//                   column applies them in index order (overwrite: the last write wins; reductions in
//                   order; mean counts in a scratch word per slot, divided by the same thread). Few long
//                   columns take parallel passes: last-writer-wins through atomicMax of the position
//                   (overwrite), integer reductions through compare-exchange (exact in any order).
//   linear_index    a thread per position.
//   nonzero, masked_select, masked_scatter: stream compaction (per-workgroup counts, a one-workgroup
//                   scan, an ordered emit), positions row-major as on the CPU. (The op layer sizes their
//                   outputs from a count read back synchronously, so on webgpu it stops before them
//                   with DeviceLimitError; the kernels serve callers that know the count.)
// Index tensors are int32 or int64 (PyTorch's default; two words, see src/ir/wgsl_int64.ts): an index is
// read as an i32 with a range flag (`loadIndex`: one outside int32 is out of range for any tensor a
// binding can hold, the CPU's IndexError), and index outputs are written sign-extended (`storeIndex`).
// int64 data moves as pairs of words, like complex64 (`lanesOf`); scatter reductions of int64 values
// combine them in emulated int64 on the one-thread-per-column path (no 64-bit atomics in WGSL).
// Index errors: WebGPU cannot read back synchronously, so a kernel records the first failing position
// (atomicMax of ~pos, as CUDA), a report pass of the same kernel stores that position's index value,
// and a host step after them raises the CPU kernel's IndexError: like any device fault it surfaces at the
// next read (`await t.data()`), as host staging did. Packed 8/16-bit outputs are written through atomic
// and/or on their word (neighbouring elements belong to other threads).

import { DTYPES, type DTypeName } from '../../../dtype/dtypes.js';
import type { StridedRef } from '../../backend.js';
import type { BackendKernels } from '../../../kernels/table.js';
import { WGSL as R, perWord, checkWgslDType } from '../../../ir/render_wgsl.js';
import { IndexError, UnsupportedError } from '../../../errors.js';
import type { Program, WebGPUBackend, WGBuffer } from '../runtime/backend.js';
import { module, U, wgslInclusiveScan } from '../runtime/elementwise.js';
import { halfReducesInFloat, scatterHalfInFloat, type ScatterMode, type ScatterOptions } from '../../../kernels/indexing.js';
import { numelOf } from '../../../tensor/shape.js';
import {
  bindAll, checkIndexDType, decompose, dimWords, f32w, fitsI32, isFloat, loadIndex, loadOut, outAccess, program, rawLoad, rawStore, recordErr,
  storeIndex, storeVal,
} from './util.js';

let be: WebGPUBackend;
export const kernels = {
  gather: webgpuGather,
  scatter: webgpuScatter,
  linear_index: webgpuLinearIndex,
  nonzero: webgpuNonzero,
  masked_select: webgpuMaskedSelect,
  masked_scatter: webgpuMaskedScatter,
} satisfies BackendKernels;

/** Points this family's kernels at the backend (called once, when the backend starts). */
export function bind(backend: WebGPUBackend): void {
  be = backend;
}

/** Words an element moves as: 2 for complex64 and int64, else 1. */
const lanesIn = (d: DTypeName): number => (d === 'int64' ? 2 : DTYPES[d].lanes);
/** Complex and int64 tensors move as pairs of 32-bit words: strides and offsets in words, the dtype float32 / int32. */
function lanesOf(r: StridedRef): StridedRef {
  if (r.dtype === 'int64') return { ...r, dtype: 'int32', strides: r.strides.map((s) => s * 2), offset: r.offset * 2 };
  if (DTYPES[r.dtype].lanes === 1) return r;
  return { ...r, dtype: 'float32', strides: r.strides.map((s) => s * 2), offset: r.offset * 2 };
}
/** The dtype whose bits a raw copy moves (one program per element size, not per dtype). */
const rawDType = (d: DTypeName): DTypeName => ({ 1: 'uint8', 2: 'int16', 4: 'int32' } as Record<number, DTypeName>)[DTYPES[d].itemsize] ?? d;

// ---- index errors ------------------------------------------------------------------------------------

/** A cleared error record: [~first failing position (0: none), its index value's low word, which index (linear_index), high word]. */
const errBuffer = (): WGBuffer => be.allocBytes(16, true);

/**
 * After the checking dispatches: a host step that raises `error(value)` if a position failed (the error
 * reaches the caller at the next read, as every WebGPU fault), then frees the record.
 */
function raiseLater(op: string, err: WGBuffer, out: WGBuffer, error: (value: bigint) => Error): void {
  be.check(op, err, (host) => {
    const w = new Int32Array(host.get(err)!, 0, 4);
    if (w[0] !== 0) throw error(recordedIndex(w));
  }, [out]);
  be.free(err);
}
/** The failing index value of an error record (words 1 and 3). */
const recordedIndex = (w: Int32Array): bigint => (BigInt(w[3]!) << 32n) | BigInt(w[1]! >>> 0);
const outOfBounds = (op: string, dim: number, size: number) => (v: bigint): Error =>
  new IndexError(op, `index ${v} is out of bounds for dimension ${dim} with size ${size}`);

/** WGSL: check/wrap index `v` (from loadIndex) against `size`; on failure record `pos` and run `fail`. */
const checkIndex = (v: string, size: string, wrap: string, pos: string, fail: string): string =>
  `if (!${fitsI32(v)} || ${v} < 0 || ${v} >= ${size}) { if (${wrap} && ${fitsI32(v)} && ${v} < 0 && ${v} >= -${size}) { ${v} += ${size}; } else {
    if (report) { if (~atomicLoad(&err[0]) == ${pos}) { atomicStore(&err[1], bitcast<u32>(${v})); atomicStore(&err[3], ${v}_hi); } } else { ${recordErr('err', pos)} } ${fail} } }`;
/**
 * The report-pass flag (uniform word `w`): the kernel is re-run after the main pass to fetch the failed
 * position's index value; with `one`, by a single thread placed at that position.
 */
const reportHead = (w: number, lin: string, one = true): string => `let report = ${U(w)} != 0u;
  var nbx_pos = ${lin};
  if (report) { let e = atomicLoad(&err[0]); if (e == 0u${one ? ` || ${lin} != 0u) { return; } nbx_pos = ~e; }` : ') { return; } }'}`;

// ---- gather ------------------------------------------------------------------------------------------

/**
 * out[p] = x[p with p[dim] := index[p]]. uniform: [total, size, dimStride, xoff, ioff, ooff, wrap, report]
 * then per dim [size, x stride (0 along dim), index stride, out stride]. b1 out, b2 err, b3 x, b4 index.
 */
function gatherProgram(d: DTypeName, id: DTypeName, lanes: number, nd: number, wg: number): Program {
  const words = 8 + 4 * nd;
  const access = `${outAccess(d)}arr`;
  return program(`ix.gather|${d}|${id}|${lanes}|${nd}|${wg}`, access, words, () => {
    const body = `${reportHead(7, 'g')}
  if (nbx_pos >= ${U(0)}) { return; }
  var xo = i32(${U(3)}); var io = i32(${U(4)}); var oo = i32(${U(5)});
  ${decompose(nd, 8, 4, ['xo', 'io', 'oo'], 'nbx_pos')}
  let size = i32(${U(1)});
  ${loadIndex(id, 'b4', 'u32(io)', 'v')}
  ${checkIndex('v', 'size', `(${U(6)} != 0u)`, 'nbx_pos', 'return;')}
  if (report) { return; }
  let src = u32(xo + v * bitcast<i32>(${U(2)}));
  ${[...Array(lanes).keys()].map((l) => { const o = `u32(oo) + ${l}u`, s = `src + ${l}u`; return rawStore(d, 'b1', o, rawLoad(d, 'b3', s)); }).join('\n  ')}`;
    return module(words, access, wg, body, '').replace(/\bb2\b/g, 'err');
  });
}

export function webgpuGather(input: StridedRef, dim: number, index: StridedRef, out: StridedRef, op: string, wrap = false): void {
  checkWgslDType(op, input.dtype, true); checkWgslDType(op, out.dtype, true); checkIndexDType(op, index);
  const total = numelOf(index.shape);
  if (total === 0) return;
  const lanes = lanesIn(input.dtype);
  const x = lanesOf(input), o = lanesOf(out);
  const size = input.shape[dim] ?? 1;
  const nd = index.shape.length;
  const xs = x.strides.map((s, k) => (k === dim ? 0 : s));
  const u = new Uint32Array([total, size, (x.strides[dim] ?? 0) >>> 0, x.offset, index.offset, o.offset, wrap ? 1 : 0, 0,
    ...dimWords(index.shape, [xs, index.strides, o.strides])]);
  const err = errBuffer();
  const { bufs, done } = bindAll(be, [out.buf as WGBuffer, err], [input.buf as WGBuffer, index.buf as WGBuffer]);
  const prog = gatherProgram(x.dtype, index.dtype, lanes, nd, be.wgElementwise);
  be.dispatch(prog, bufs, u, total, be.wgElementwise);
  const u2 = u.slice(); u2[7] = 1;
  be.dispatch(prog, bufs, u2, 1, be.wgElementwise);
  done();
  raiseLater(op, err, out.buf as WGBuffer, outOfBounds(op, dim, size));
}

// ---- scatter -----------------------------------------------------------------------------------------

const MODES: ScatterMode[] = ['none', 'sum', 'prod', 'mean', 'amax', 'amin'];

/** WGSL `nbx_combine(mode, cur, v)` in the compute type of d: the CPU's combineNum (mode: index in MODES). */
function combineFn(d: DTypeName): string {
  if (d === 'int64') {
    return `fn nbx_combine(mode: u32, c: vec2<u32>, v: vec2<u32>) -> vec2<u32> {
  switch (mode) {
    case 1u, 3u: { return nbx_add_l(c, v); }
    case 2u: { return nbx_mul_l(c, v); }
    case 4u: { return select(c, v, nbx_lt_l(c, v)); }
    case 5u: { return select(c, v, nbx_lt_l(v, c)); }
    default: { return v; }
  }
}`;
  }
  const F = isFloat(d), T = F ? 'f32' : 'i32', isBool = d === 'bool';
  return `fn nbx_combine(mode: u32, c: ${T}, v: ${T}) -> ${T} {
  switch (mode) {
    case 1u, 3u: { return ${isBool ? 'select(0i, 1i, c != 0i || v != 0i)' : 'c + v'}; }
    case 2u: { return ${isBool ? 'select(0i, 1i, c != 0i && v != 0i)' : 'c * v'}; }
    case 4u: { return ${F ? 'select(select(c, v, c < v), v, nbx_isnan(v))' : 'select(c, v, v > c)'}; }
    case 5u: { return ${F ? 'select(select(c, v, c > v), v, nbx_isnan(v))' : 'select(c, v, v < c)'}; }
    default: { return v; }
  }
}`;
}

/**
 * A thread per column (index positions sharing every coordinate but `dim`), applying its m positions in
 * order. The reduction is a uniform (one pipeline per dtype and rank: compiling is the slow part).
 * uniform: [cols, m, size, outDimStride, ooff, ioff, soff, iDimStride, sDimStride, posDimStride,
 * includeSelf, wrap, alpha bits, report, mode (index in MODES), track] then per other dim [size, out,
 * index, src, position strides]. b1 out, b2 err, b3 counts (mean / include_self=False; a stand-in
 * otherwise), b4 index, b5 src.
 */
function scatterProgram(d: DTypeName, id: DTypeName, lanes: number, nd: number, wg: number): Program {
  const words = 16 + 5 * nd;
  const access = `${outAccess(d)}awrr`;
  return program(`ix.scatter|${d}|${id}|${lanes}|${nd}|${wg}`, access, words, () => {
    // int64 reductions compute in emulated int64 (vec2<u32>)
    const F = isFloat(d), W = d === 'int64', T = F ? 'f32' : W ? 'vec2<u32>' : 'i32';
    const isBool = d === 'bool';
    const fns = lanes > 1 ? '' : combineFn(d);
    const alpha = F ? `bitcast<f32>(${U(12)})` : W ? `nbx_i2l(bitcast<i32>(${U(12)}))` : `bitcast<i32>(${U(12)})`;
    const put = (v: string): string => (W ? R.store(d, 'b1', 't', v) : storeVal(d, 'b1', 't', v));
    const raw = [...Array(lanes).keys()].map((l) => rawStore(d, 'b1', `t + ${l}u`, rawLoad(d, 'b5', `s + ${l}u`))).join(' ');
    const apply = lanes > 1 ? raw : `if (mode == 0u) { ${raw} } else {
      var v: ${T} = ${R.load(d, 'b5', 's')};
      ${isBool ? '' : `if (mode == 1u) { v = ${W ? `nbx_mul_l(v, ${alpha})` : `v * ${alpha}`}; }`}
      var first = false;
      if (track) { let ci = t - ${U(4)}; let n = b3[ci]; b3[ci] = n + 1u; first = n == 0u && ${U(10)} == 0u; }
      let c: ${T} = ${loadOut(d, 'b1', 't')};
      let r: ${T} = select(nbx_combine(mode, c, v), v, first);
      ${put('r')}
    }`;
    // mean: each slot of the column divided by its count (plus itself when included); ints floor-divide
    const finish = lanes > 1 ? '' : `if (mode != 3u) { return; }
  for (var j = 0i; j < size; j++) {
    let t = u32(oo + j * ods); let n = b3[t - ${U(4)}];
    if (n == 0u) { continue; }
    let q = ${W ? 'nbx_i2l(i32' : T}(n + select(0u, 1u, ${U(10)} != 0u))${W ? ')' : ''};
    let a: ${T} = ${loadOut(d, 'b1', 't')};
    ${F ? 'let r = a / q;' : W ? 'let r = nbx_ifloordiv_l(a, q);' : 'var r = a / q; if (a % q != 0i && a < 0i) { r -= 1i; }'}
    ${put('r')}
  }`;
    const body = `${reportHead(13, 'g', false)}
  let cols = ${U(0)}; let m = ${U(1)}; let size = i32(${U(2)}); let ods = bitcast<i32>(${U(3)});
  let isd = bitcast<i32>(${U(7)}); let ssd = bitcast<i32>(${U(8)}); let psd = ${U(9)};
  let mode = ${U(14)}; let track = ${U(15)} != 0u;
  let col = nbx_pos;
  if (col >= cols) { return; }
  var oo = i32(${U(4)}); var io = i32(${U(5)}); var so = i32(${U(6)}); var po = 0i;
  ${decompose(nd, 16, 5, ['oo', 'io', 'so', 'po'], 'col')}
  for (var k = 0u; k < m; k++) {
    ${loadIndex(id, 'b4', 'u32(io + i32(k) * isd)', 'v0')}
    ${checkIndex('v0', 'size', `(${U(11)} != 0u)`, 'u32(po) + k * psd', 'return;')}
    if (report) { continue; }
    let t = u32(oo + v0 * ods); let s = u32(so + i32(k) * ssd);
    ${apply}
  }
  if (report) { return; }
  ${finish}`;
    return module(words, access, wg, body, fns).replace(/\bb2\b/g, 'err');
  });
}

const PASS = { win: 0, write: 1, count: 2, identity: 3, atomic: 4, mean: 5 };

/**
 * The parallel passes for few long columns (as CUDA's), a thread per index position i (row-major) or,
 * for 'identity'/'mean', per output slot:
 *   win       records the last writer of each slot (atomicMax of i + 1): overwrite is last-write-wins;
 *   write     the recorded writer copies its value;
 *   count     contributions per slot (mean, include_self=False);
 *   identity  slots with contributions start from the reduction's identity (include_self=False);
 *   atomic    integer values combined by a compare-exchange loop on the word (exact in any order);
 *   mean      slots divided by their count, floor division.
 * The first pass reading the indices records failures (`check`); later ones skip them.
 * uniform: [n, size, ooff, ioff, soff, outDimStride, wrap, alpha, mode, includeSelf, pass, report, outN,
 * check] then per index dim [size, out (0 along dim), index, src strides]. b1 out (atomic words), b2 err,
 * b3 slots, b4 index, b5 src.
 */
function scatterParallelProgram(d: DTypeName, id: DTypeName, lanes: number, nd: number, wg: number): Program {
  const words = 14 + 4 * nd;
  const access = 'aaarr';
  return program(`ix.scatterp|${d}|${id}|${lanes}|${nd}|${wg}`, access, words, () => {
    const k = perWord(d), sh = k === 4 ? 2 : k === 2 ? 1 : 0, width = 32 / k, mask = k === 4 ? '0xffu' : k === 2 ? '0xffffu' : '0xffffffffu';
    const isInt = !isFloat(d) && lanes === 1;
    const lane = (word: string, idx: string): string => R.load(d, 'nbx_w', idx).replace(/nbx_w\[[^\]]*\]/g, word);
    const info = DTYPES[d];
    const lo = info.min === -2147483648 ? 'bitcast<i32>(0x80000000u)' : `${info.min ?? 0}i`;
    const identity = `select(select(select(${lo}, ${info.max ?? 1}i, mode == 5u), 1i, mode == 2u), 0i, mode == 1u || mode == 3u)`;
    const raw = [...Array(lanes).keys()].map((l) => R.storeShared(d, 'b1', `t + ${l}u`, rawLoad(d, 'b5', `so + ${l}u`))).join(' ');
    const atomic = !isInt ? '' : `var v: i32 = ${R.load(d, 'b5', 'so')};
      if (mode == 1u) { v = v * bitcast<i32>(${U(7)}); }
      let wi = t >> ${sh}u; let shift = (t & ${k - 1}u) * ${width}u;
      var old = atomicLoad(&b1[wi]);
      loop {
        let nv = ${R.bits(d, `nbx_combine(mode, ${lane('old', 't')}, v)`)};
        let r = atomicCompareExchangeWeak(&b1[wi], old, ${k === 1 ? 'nv' : `(old & ~(${mask} << shift)) | (nv << shift)`});
        if (r.exchanged) { break; }
        old = r.old_value;
      }`;
    const slotPass = !isInt ? '' : `if (ps == ${PASS.identity}u || ps == ${PASS.mean}u) {
    if (g >= ${U(12)}) { return; }
    let n = atomicLoad(&b3[g]);
    if (n == 0u) { return; }
    let t = ${U(2)} + g;
    var r = ${identity};
    if (ps == ${PASS.mean}u) {
      let q = i32(n + select(0u, 1u, ${U(9)} != 0u));
      let a = ${lane('atomicLoad(&b1[t >> ' + sh + 'u])', 't')};
      r = a / q; if (a % q != 0i && a < 0i) { r -= 1i; }
    }
    ${R.storeShared(d, 'b1', 't', R.bits(d, 'r'))}
    return;
  }`;
    const body = `let ps = ${U(10)}; let report = ${U(11)} != 0u; let mode = ${U(8)};
  ${slotPass}
  if (report && atomicLoad(&err[0]) == 0u) { return; }
  let i = g;
  if (i >= ${U(0)}) { return; }
  var oo = i32(${U(2)}); var io = i32(${U(3)}); var so_ = i32(${U(4)});
  ${decompose(nd, 14, 4, ['oo', 'io', 'so_'], 'i')}
  let size = i32(${U(1)});
  ${loadIndex(id, 'b4', 'u32(io)', 'v0')}
  if (!${fitsI32('v0')} || v0 < 0 || v0 >= size) { if (${U(6)} != 0u && ${fitsI32('v0')} && v0 < 0 && v0 >= -size) { v0 += size; } else {
    if (report) { if (~atomicLoad(&err[0]) == i) { atomicStore(&err[1], bitcast<u32>(v0)); atomicStore(&err[3], v0_hi); } }
    else if (${U(13)} != 0u) { ${recordErr('err', 'i')} }
    return;
  } }
  if (report) { return; }
  let t = u32(oo + v0 * bitcast<i32>(${U(5)})); let so = u32(so_);
  switch (ps) {
    case ${PASS.win}u: { atomicMax(&b3[t - ${U(2)}], i + 1u); }
    case ${PASS.write}u: { if (atomicLoad(&b3[t - ${U(2)}]) == i + 1u) { ${raw} } }
    case ${PASS.count}u: { atomicAdd(&b3[t - ${U(2)}], 1u); }
    case ${PASS.atomic}u: { ${atomic} }
    default: {}
  }`;
    return module(words, access, wg, body, isInt ? combineFn(d) : '').replace(/\bb2\b/g, 'err');
  });
}

/** Whether the parallel passes apply: few long columns, a contiguous output, overwrite or an integer reduction. */
function parallelScatter(out: StridedRef, cols: number, m: number, mode: ScatterMode): boolean {
  const contiguous = out.strides.every((st, k) => st === numelOf(out.shape.slice(k + 1)) || out.shape[k] === 1);
  return contiguous && cols < 2048 && m >= 32 && (mode === 'none' || (!isFloat(out.dtype) && DTYPES[out.dtype].lanes === 1));
}

function runParallelScatter(out: StridedRef, o: StridedRef, s: StridedRef, dim: number, index: StridedRef, mode: ScatterMode, lanes: number,
  includeSelf: boolean, wrap: boolean, alpha: number, err: WGBuffer): void {
  const n = numelOf(index.shape), outN = numelOf(out.shape);
  const track = !includeSelf || mode === 'mean';
  const size = out.shape[dim] ?? 1;
  const os = o.strides.map((st, k) => (k === dim ? 0 : st));
  const base = [n, size, o.offset, index.offset, s.offset, (o.strides[dim] ?? 0) >>> 0, wrap ? 1 : 0, alpha | 0, MODES.indexOf(mode), includeSelf ? 1 : 0];
  const dims = dimWords(index.shape, [os, index.strides, s.strides]);
  const slots = be.allocBytes(Math.max(outN, 1) * 4, true);
  const { bufs, done } = bindAll(be, [out.buf as WGBuffer, err, slots], [index.buf as WGBuffer, s.buf as WGBuffer]);
  const wg = be.wgElementwise;
  const prog = scatterParallelProgram(o.dtype, index.dtype, lanes, index.shape.length, wg);
  let first = true;
  const run = (pass: number, threads: number, report = false): void => {
    be.dispatch(prog, bufs, new Uint32Array([...base, pass, report ? 1 : 0, outN, first ? 1 : 0, ...dims]), threads, wg);
    if (pass !== PASS.identity && pass !== PASS.mean) first = false;
  };
  if (mode === 'none') { run(PASS.win, n); run(PASS.write, n); } else {
    if (track) run(PASS.count, n);
    if (!includeSelf) run(PASS.identity, outN);
    run(PASS.atomic, n);
    if (mode === 'mean') run(PASS.mean, outN);
  }
  run(PASS.win, n, true); // the report pass (writes nothing)
  done();
  be.free(slots);
}

/**
 * In-place scatter into `out` (a fresh contiguous tensor): see the CPU kernel. A failing position is
 * reported in row-major order of `index` (the CPU's first error).
 */
export function webgpuScatter(out: StridedRef, dim: number, index: StridedRef, src: StridedRef, mode: ScatterMode, opts: ScatterOptions): void {
  // float16/bfloat16 reductions that PyTorch runs in float32 (see the CPU kernel): on float32 copies
  if (halfReducesInFloat(out, dim, index, mode, opts)) { scatterHalfInFloat(be, webgpuScatter, out, dim, index, src, mode, opts); return; }
  const { op, includeSelf = true, wrap = false } = opts;
  checkWgslDType(op, out.dtype, true); checkWgslDType(op, src.dtype, true); checkIndexDType(op, index);
  // int64 reductions combine whole int64 values (one thread per column: WGSL has no 64-bit atomics)
  const reduce64 = out.dtype === 'int64' && mode !== 'none';
  const lanes = reduce64 ? 1 : lanesIn(out.dtype);
  if (lanes !== 1 && mode !== 'none') throw new UnsupportedError(op, `reduction '${mode}' is not supported for complex tensors`);
  if (numelOf(index.shape) === 0) return;
  const o = reduce64 ? out : lanesOf(out), s = reduce64 ? src : lanesOf(src);
  const size = out.shape[dim] ?? 1, m = index.shape[dim] ?? 1;
  const others = [...Array(index.shape.length).keys()].filter((k) => k !== dim);
  const pos = index.shape.map((_, k) => numelOf(index.shape.slice(k + 1)));
  const sub = (st: readonly number[]): number[] => others.map((k) => st[k]!);
  const cols = numelOf(sub(index.shape));
  const track = !includeSelf || mode === 'mean';
  const alpha = Number(opts.alpha ?? 1);
  const u = new Uint32Array([cols, m, size, (o.strides[dim] ?? 0) >>> 0, o.offset, index.offset, s.offset, (index.strides[dim] ?? 0) >>> 0,
    (s.strides[dim] ?? 0) >>> 0, pos[dim] ?? 0, includeSelf ? 1 : 0, wrap ? 1 : 0, isFloat(out.dtype) ? f32w(alpha) : alpha | 0, 0,
    MODES.indexOf(mode), track ? 1 : 0, ...dimWords(sub(index.shape), [sub(o.strides), sub(index.strides), sub(s.strides), sub(pos)])]);
  const err = errBuffer();
  if (!reduce64 && parallelScatter(out, cols, m, mode)) {
    runParallelScatter(out, o, s, dim, index, mode, lanes, includeSelf, wrap, alpha, err);
    raiseLater(op, err, out.buf as WGBuffer, outOfBounds(op, dim, size));
    return;
  }
  const counts = be.allocBytes(track ? numelOf(out.shape) * 4 : 4, track);
  const { bufs, done } = bindAll(be, [out.buf as WGBuffer, err, counts], [index.buf as WGBuffer, src.buf as WGBuffer]);
  const wg = 64;
  const prog = scatterProgram(o.dtype, index.dtype, lanes, others.length, wg);
  be.dispatch(prog, bufs, u, cols, wg);
  // the report pass: every column re-checks its indices (no writes) and the failed position stores its value
  const u2 = u.slice(); u2[13] = 1;
  be.dispatch(prog, bufs, u2, cols, wg);
  done();
  be.free(counts);
  raiseLater(op, err, out.buf as WGBuffer, outOfBounds(op, dim, size));
}

// ---- linear_index ------------------------------------------------------------------------------------

/** uniform: [n, ooff, report, 0] then per index [off, size, mult] then per dim [size, out stride, index strides...]. */
function linearIndexProgram(od: DTypeName, ids: DTypeName[], nd: number, wg: number): Program {
  const K = ids.length;
  const words = 4 + 3 * K + (1 + 1 + K) * nd;
  const access = `wa${'r'.repeat(K)}`;
  return program(`ix.linidx|${od}|${ids.join(',')}|${nd}|${wg}`, access, words, () => {
    const vars = ['oo', ...[...Array(K).keys()].map((q) => `x${q}`)];
    const body = `${reportHead(2, 'g')}
  if (nbx_pos >= ${U(0)}) { return; }
  var oo = i32(${U(1)}); ${[...Array(K).keys()].map((q) => `var x${q} = i32(${U(4 + 3 * q)});`).join(' ')}
  ${decompose(nd, 4 + 3 * K, 2 + K, vars, 'nbx_pos')}
  var lin = 0i;
  ${[...Array(K).keys()].map((q) => `{ ${loadIndex(ids[q]!, `b${3 + q}`, `u32(x${q})`, 'v')} let size = i32(${U(5 + 3 * q)});
    ${checkIndex('v', 'size', 'true', 'nbx_pos', `if (report) { atomicStore(&err[2], ${q}u); } return;`)}
    lin += v * i32(${U(6 + 3 * q)}); }`).join('\n  ')}
  if (report) { return; }
  ${storeIndex(od, 'b1', 'u32(oo)', 'lin')}`;
    return module(words, access, wg, body, '').replace(/\bb2\b/g, 'err');
  });
}

/** out[p] = sum_k wrap(indices[k][p]) * prod(sizes[k+1:]); int32 or int64 output. */
export function webgpuLinearIndex(indices: StridedRef[], sizes: number[], out: StridedRef, op: string, dims: number[]): void {
  for (const r of indices) checkIndexDType(op, r);
  checkIndexDType(op, out);
  const n = numelOf(out.shape);
  if (n === 0) return;
  const K = indices.length;
  const mult = sizes.map((_, k) => numelOf(sizes.slice(k + 1)));
  const u = new Uint32Array([n, out.offset, 0, 0, ...indices.flatMap((r, q) => [r.offset, sizes[q]!, mult[q]!]),
    ...dimWords(out.shape, [out.strides, ...indices.map((r) => r.strides)])]);
  const err = errBuffer();
  const { bufs, done } = bindAll(be, [out.buf as WGBuffer, err], indices.map((r) => r.buf as WGBuffer));
  const wg = be.wgElementwise;
  const prog = linearIndexProgram(out.dtype, indices.map((r) => r.dtype), out.shape.length, wg);
  be.dispatch(prog, bufs, u, n, wg);
  const u2 = u.slice(); u2[2] = 1;
  be.dispatch(prog, bufs, u2, 1, wg);
  done();
  // the first failing index of the position names its dim; the value recorded is that index's
  be.check(op, err, (host) => {
    const w = new Int32Array(host.get(err)!, 0, 4);
    if (w[0] === 0) return;
    const q = w[2]!; // the position's first index out of range, as the CPU checks them in order
    throw new IndexError(op, `index ${recordedIndex(w)} is out of bounds for dimension ${dims[q]} with size ${sizes[q]}`);
  }, [out.buf as WGBuffer]);
  be.free(err);
}

// ---- stream compaction: nonzero, masked_select, masked_scatter ----------------------------------------

/**
 * A data-dependent selection over positions i in [0, n) (row-major over `shape`), as CUDA's: `flag`
 * (WGSL bool) says whether position i is selected, `emit` runs for it with `pos` = how many selected
 * positions precede it. Three passes: per-workgroup counts over chunks, a one-workgroup exclusive scan,
 * and an ordered emit (each chunk in tiles of wg, a workgroup scan per tile), so positions come out
 * row-major. `pre` computes the i32 offsets `vars` (and with `coords`, coordinate array `cc`).
 * uniform: [n, chunk, B, 0, offsets of vars..., extra words...] then per dim [size, strides of vars].
 * Bindings: b1 out (written), b2 scratch [counts(B), offsets(B + 1)], then the read operands.
 */
interface Compaction { key: string; outAccess: string; reads: string; vars: string[]; extra: number; coords: boolean; flag: string; emit: string }

function compactionProgram(c: Compaction, nd: number, pass: 'count' | 'emit', wg: number): Program {
  const at = 4 + c.vars.length + c.extra;
  const words = at + (1 + c.vars.length) * nd;
  const access = `${c.outAccess}w${c.reads}`;
  return program(`ix.compact|${c.key}|${nd}|${pass}|${wg}`, access, words, () => {
    const pre = `${c.vars.map((v, q) => `var ${v} = i32(${U(4 + q)});`).join(' ')}${c.coords ? ` var cc: array<u32, ${Math.max(nd, 1)}>;` : ''}
    ${decompose(nd, at, 1 + c.vars.length, c.vars, 'i', c.coords ? 'cc' : undefined)}`;
    const head = `let n = ${U(0)}; let chunk = ${U(1)}; let B = ${U(2)};
  let wi = wid.y * nwg.x + wid.x;
  let start = wi * chunk; let end = min(start + chunk, n);`;
    const fns = `var<workgroup> sh: array<u32, ${wg}>;`;
    const body = pass === 'count' ? `${head}
  var cnt = 0u;
  if (wi < B) { for (var i = start + lid; i < end; i += ${wg}u) { ${pre} if (${c.flag}) { cnt++; } } }
  sh[lid] = cnt;
  workgroupBarrier();
  for (var s = ${wg / 2}u; s > 0u; s >>= 1u) { if (lid < s) { sh[lid] = sh[lid] + sh[lid + s]; } workgroupBarrier(); }
  if (lid == 0u && wi < B) { b2[wi] = sh[0]; }`
      : `${head}
  if (wi >= B) { return; }
  var base = b2[B + wi];
  for (var t0 = start; t0 < end; t0 += ${wg}u) {
    let i = t0 + lid;
    var f = false;
    if (i < end) { ${pre} f = ${c.flag}; }
    sh[lid] = select(0u, 1u, f);
    workgroupBarrier();
    ${wgslInclusiveScan(wg)}
    if (f) { let pos = base + sh[lid] - 1u; ${pre} ${c.emit} }
    base = base + sh[${wg - 1}u];
    workgroupBarrier();
  }`;
    return module(words, access, wg, body, fns);
  });
}

/** One workgroup: b1[B + b] = sum of b1[0..b) (exclusive), b1[2B] = the total. uniform: [B]. */
function blockScanProgram(wg: number): Program {
  return program(`ix.compact.scan|${wg}`, 'w', 4, () => module(4, 'w', wg, `let B = ${U(0)};
  var carry = 0u;
  for (var b0 = 0u; b0 < B; b0 += ${wg}u) {
    let b = b0 + lid;
    var v = 0u; if (b < B) { v = b1[b]; }
    sh[lid] = v;
    workgroupBarrier();
    ${wgslInclusiveScan(wg)}
    if (b < B) { b1[B + b] = carry + sh[lid] - v; }
    carry = carry + sh[${wg - 1}u];
    workgroupBarrier();
  }
  if (lid == 0u) { b1[2u * B] = carry; }`, `var<workgroup> sh: array<u32, ${wg}>;`));
}

/** Runs the three passes over n positions; `u` holds the words after [n, chunk, B, 0]. */
function runCompaction(c: Compaction, shape: readonly number[], words: number[], out: WGBuffer, reads: WGBuffer[]): void {
  const n = numelOf(shape);
  if (n === 0) return;
  const wg = Math.min(256, be.wgReduce);
  const B = Math.max(1, Math.min(Math.ceil(n / wg), 4096));
  const chunk = Math.ceil(n / B / wg) * wg;
  const blocks = Math.ceil(n / chunk);
  const scratch = be.allocBytes((2 * blocks + 1) * 4);
  const u = new Uint32Array([n, chunk, blocks, 0, ...words]);
  const { bufs, done } = bindAll(be, [out, scratch], reads);
  const nd = shape.length;
  be.dispatch(compactionProgram(c, nd, 'count', wg), bufs, u, blocks * wg, wg);
  be.dispatch(blockScanProgram(wg), [scratch], new Uint32Array([blocks, 0, 0, 0]), wg, wg);
  be.dispatch(compactionProgram(c, nd, 'emit', wg), bufs, u, blocks * wg, wg);
  done();
  be.free(scratch);
}

/** The bits that make an element non-zero (NaN is; -0.0 is not): all but a float's sign. */
const nonzeroMask = (d: DTypeName): string => (d === 'float32' || d === 'complex64' ? '0x7fffffffu' : d === 'float16' || d === 'bfloat16' ? '0x7fffu'
  : d === 'float8_e4m3fn' || d === 'float8_e5m2' ? '0x7fu' : '0xffffffffu');
/** WGSL: whether element `idx` of read binding `buf` (dtype d) is non-zero, from its bits. */
function nonzeroTest(d: DTypeName, lanes: number, buf: string, idx: string): string {
  const bits = (i: string): string => `(${rawLoad(lanes > 1 ? 'float32' : rawDType(d), buf, i)} & ${nonzeroMask(d)}) != 0u`;
  return lanes > 1 ? `(${bits(`u32(${idx})`)} || ${bits(`u32(${idx}) + 1u`)})` : bits(`u32(${idx})`);
}

/** Coordinates of the non-zero elements of `input`, row-major, into out [count, ndim] (int32 or int64). */
function webgpuNonzero(input: StridedRef, out: StridedRef): void {
  checkWgslDType('nonzero', input.dtype, true);
  checkIndexDType('nonzero', out);
  const nd = input.shape.length;
  if (nd === 0 || numelOf(input.shape) === 0) return;
  const lanes = lanesIn(input.dtype), x = lanesOf(input);
  const c: Compaction = {
    key: `nonzero|${DTYPES[input.dtype].itemsize}|${lanes}|${nonzeroMask(input.dtype)}|${out.dtype}`, outAccess: 'w', reads: 'r', vars: ['xo'], extra: 1, coords: true,
    flag: nonzeroTest(input.dtype, lanes, 'b3', 'xo'),
    emit: [...Array(nd).keys()].map((q) => storeIndex(out.dtype, 'b1', `${U(5)} + pos * ${nd}u + ${q}u`, `i32(cc[${q}])`)).join(' '),
  };
  runCompaction(c, input.shape, [x.offset, out.offset, ...dimWords(input.shape, [x.strides])], out.buf as WGBuffer, [input.buf as WGBuffer]);
}

/** Elements of `input` where `mask` (same shape, broadcast strides) is set, row-major, into 1-D contiguous `out`. */
function webgpuMaskedSelect(input: StridedRef, mask: StridedRef, out: StridedRef): void {
  for (const r of [input, mask, out]) checkWgslDType('masked_select', r.dtype, true);
  const lanes = lanesIn(input.dtype), x = lanesOf({ ...input, dtype: rawDType(input.dtype) }), o = lanesOf(out);
  const c: Compaction = {
    key: `mselect|${x.dtype}|${lanes}|${mask.dtype}`, outAccess: outAccess(x.dtype), reads: 'rr', vars: ['xo', 'mo'], extra: 1, coords: false,
    flag: `${rawLoad(mask.dtype, 'b4', 'u32(mo)')} != 0u`,
    emit: [...Array(lanes).keys()].map((l) => rawStore(x.dtype, 'b1', `${U(6)} + pos * ${lanes}u + ${l}u`, rawLoad(x.dtype, 'b3', `u32(xo) + ${l}u`))).join(' '),
  };
  runCompaction(c, input.shape, [x.offset, mask.offset, o.offset, ...dimWords(input.shape, [x.strides, mask.strides])], out.buf as WGBuffer,
    [input.buf as WGBuffer, mask.buf as WGBuffer]);
}

/** Writes consecutive elements of contiguous `source` into `out` where `mask` is set (row-major). */
function webgpuMaskedScatter(out: StridedRef, mask: StridedRef, source: StridedRef): void {
  for (const r of [out, mask, source]) checkWgslDType('masked_scatter', r.dtype, true);
  const lanes = lanesIn(out.dtype), o = lanesOf({ ...out, dtype: rawDType(out.dtype) }), src = lanesOf(source);
  const c: Compaction = {
    key: `mscatter|${o.dtype}|${lanes}|${mask.dtype}`, outAccess: outAccess(o.dtype), reads: 'rr', vars: ['oo', 'mo'], extra: 1, coords: false,
    flag: `${rawLoad(mask.dtype, 'b3', 'u32(mo)')} != 0u`,
    emit: [...Array(lanes).keys()].map((l) => rawStore(o.dtype, 'b1', `u32(oo) + ${l}u`, rawLoad(o.dtype, 'b4', `${U(6)} + pos * ${lanes}u + ${l}u`))).join(' '),
  };
  runCompaction(c, out.shape, [o.offset, mask.offset, src.offset, ...dimWords(out.shape, [o.strides, mask.strides])], out.buf as WGBuffer,
    [mask.buf as WGBuffer, source.buf as WGBuffer]);
}
