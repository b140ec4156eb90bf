// WebGPU reductions and scans that involve int64 (src/ir/wgsl_int64.ts: vec2<u32> values, two storage
// words), with the CPU kernels' signatures ('reduce', 'scan' in src/kernels/reduce.ts): sums and
// products of integers accumulate in int64 as PyTorch does (exact: two's complement wraps the same in
// any order), count_nonzero, max/min/any/all of int64, and every reduction or scan with int64 indices
// (argmax/argmin, max/min with indices, cummax/cummin). kernels.ts hands these over (`int64Reduction`,
// `int64Scan`); the other reductions keep its tuned kernels.
//
// A reduction runs a workgroup per row: each thread strides over the row, then a tree in workgroup
// memory. Index-carrying reductions compare (value, index) pairs, ties to the lower index and NaN first
// (the CPU's first maximum / first NaN), so the order of the tree does not matter. A scan runs a
// workgroup per row over chunks of WG elements (Hillis-Steele in workgroup memory, a carry between
// chunks): for cummax/cummin the combine of (earlier, later) summaries is the CPU's sequential rule
// (a NaN sticks; ties move the index forward), which is associative.

import { DTYPES, type DTypeName } from '../../../dtype/dtypes.js';
import type { StridedRef } from '../../backend.js';
import { WGSL as R, perWord } from '../../../ir/render_wgsl.js';
import { DeviceLimitError } from '../../../errors.js';
import type { Program, WebGPUBackend, WGBuffer } from '../runtime/backend.js';
import { module, U } from '../runtime/elementwise.js';
import { bindAll, program, storeIndex } from './util.js';
import type { ReduceKind, RowLayout, ScanKind } from '../../../kernels/reduce.js';

const WG = 256;
/** The "no element yet" index of a (value, index) pair. */
const EMPTY = '0xffffffffu';

/** Whether kernels.ts should hand a reduction here: int64 input or output, or index outputs. */
export function int64Reduction(kind: ReduceKind, input: StridedRef, out: StridedRef, outIndex?: StridedRef): boolean {
  return input.dtype === 'int64' || out.dtype === 'int64' || !!outIndex || kind === 'argmax' || kind === 'argmin';
}
/** Whether kernels.ts should hand a scan here. */
export function int64Scan(kind: ScanKind, input: StridedRef, out: StridedRef, outIndex?: StridedRef): boolean {
  return input.dtype === 'int64' || out.dtype === 'int64' || !!outIndex || kind === 'cummax' || kind === 'cummin';
}

const isF = (d: DTypeName): boolean => DTYPES[d].kind === 'float';
/** The compute type of dtype d's values: f32, i32, or vec2<u32> for int64. */
const ctype = (d: DTypeName): string => R.computeType(d);
/** Statement storing compute value `v` of dtype `from` as element `idx` of binding `buf` of dtype `outD`. */
function storeAny(outD: DTypeName, from: DTypeName, buf: string, idx: string, v: string): string {
  const c = R.castExpr(from, outD, v);
  return perWord(outD) > 1 ? R.storeShared(outD, buf, idx, R.bits(outD, c)) : R.store(outD, buf, idx, c);
}
const access = (d: DTypeName): string => (perWord(d) > 1 ? 'a' : 'w');

/**
 * WGSL `better(av, ai, bv, bi) -> bool`: whether pair b replaces pair a. For a reduction (`scan`
 * false): the larger (smaller) value, ties and NaN to the lower index, NaN over numbers. For a scan's
 * combine of earlier a and later b: the CPU's running rule (a NaN sticks; b wins ties).
 */
function betterFn(d: DTypeName, isMax: boolean, scan: boolean): string {
  const T = ctype(d);
  const gt = (x: string, y: string): string => (d === 'int64' ? (isMax ? `nbx_lt_l(${y}, ${x})` : `nbx_lt_l(${x}, ${y})`) : isMax ? `${x} > ${y}` : `${x} < ${y}`);
  const eq = (x: string, y: string): string => (d === 'int64' ? `all(${x} == ${y})` : `${x} == ${y}`);
  const nan = (x: string): string => (isF(d) ? `nbx_isnan(${x})` : 'false');
  const rule = scan
    ? `if (${nan('av')}) { return false; } if (${nan('bv')}) { return true; } return ${gt('bv', 'av')} || ${eq('bv', 'av')};`
    : `if (${nan('av')}) { return ${nan('bv')} && bi < ai; } if (${nan('bv')}) { return true; } return ${gt('bv', 'av')} || (${eq('bv', 'av')} && bi < ai);`;
  return `fn better(av: ${T}, ai: u32, bv: ${T}, bi: u32) -> bool {
  if (bi == ${EMPTY}) { return false; } if (ai == ${EMPTY}) { return true; }
  ${rule}
}`;
}

/** Accumulating kinds: [accumulator dtype, init, enter(x), merge(a, b)]. */
function accParts(kind: ReduceKind, inD: DTypeName): [DTypeName, string, (x: string) => string, string] | null {
  const L = (x: string): string => R.castExpr(inD, 'int64', x);
  const nz = (x: string): string => R.castExpr(inD, 'bool', x);
  switch (kind) {
    case 'sum': return ['int64', 'vec2<u32>(0u)', L, 'nbx_add_l(a, b)'];
    case 'prod': return ['int64', 'vec2<u32>(1u, 0u)', L, 'nbx_mul_l(a, b)'];
    case 'count_nonzero': return ['int64', 'vec2<u32>(0u)', (x) => `nbx_i2l(${nz(x)})`, 'nbx_add_l(a, b)'];
    case 'max': return ['int64', 'vec2<u32>(0u, 0x80000000u)', L, 'select(a, b, nbx_lt_l(a, b))'];
    case 'min': return ['int64', 'vec2<u32>(0xffffffffu, 0x7fffffffu)', L, 'select(a, b, nbx_lt_l(b, a))'];
    case 'any': return ['int32', '0i', nz, 'max(a, b)'];
    case 'all': return ['int32', '1i', nz, 'min(a, b)'];
    default: return null;
  }
}

type Phase = 'full' | 'partial' | 'merge';
/** Invocations that keep a large GPU busy: fewer rows than this are split into parts (two passes). */
const BUSY = 1 << 17;

export function webgpuReduceInt64(be: WebGPUBackend, kind: ReduceKind, input: StridedRef, rows: number, n: number, out: StridedRef,
  outIndex?: StridedRef, layout?: RowLayout): void {
  const inD = input.dtype, outD = out.dtype;
  const lay = layout ?? { rowStride: n, colStride: 1 };
  const pair = kind === 'argmax' || kind === 'argmin' || !!outIndex;
  const acc = pair ? null : accParts(kind, inD);
  if (!pair && (!acc || (kind === 'max' || kind === 'min') && inD !== 'int64')) {
    throw new DeviceLimitError(kind, `webgpu ${kind} of ${inD} into ${outD} is not emulated in int64`);
  }
  const arg = kind === 'argmax' || kind === 'argmin';
  const idxD = arg ? outD : outIndex?.dtype ?? 'int64';
  // a thread per row for vertical layouts and many short rows (serial loops kept short for llvmpipe's
  // iteration cap), else a workgroup per row, split into parts when the rows alone leave the GPU idle
  const vertical = lay.rowStride === 1 && lay.colStride !== 1 && rows >= 64;
  const thread = (vertical || (n <= 64 && rows >= 256)) && n <= 16384;
  const parts = thread ? 1 : Math.max(1, Math.min(Math.ceil(BUSY / (rows * WG)), Math.floor(n / (WG * 16)), 1024));
  const u = new Uint32Array([rows, n, lay.rowStride | 0, lay.colStride | 0, input.offset, out.offset, outIndex?.offset ?? 0, parts]);
  const prog = (phase: Phase): Program => reduceProgram(kind, inD, outD, idxD, pair, acc, phase, thread);
  // argmax/argmin have no second output: a scratch word takes its binding
  const second = pair ? (outIndex ? outIndex.buf as WGBuffer : be.allocBytes(16)) : null;
  const outs = second ? [out.buf as WGBuffer, second] : [out.buf as WGBuffer];
  let src = input.buf as WGBuffer, partial: WGBuffer | null = null;
  if (parts > 1) {
    partial = be.allocBytes(rows * parts * 16);
    be.dispatchGroups(prog('partial'), [partial, src], u, ...grid(be, rows * parts));
    src = partial;
  }
  const { bufs, done } = bindAll(be, outs, [src]);
  if (thread) be.dispatch(prog('full'), bufs, u, rows, 64);
  else be.dispatchGroups(prog(parts > 1 ? 'merge' : 'full'), bufs, u, ...grid(be, rows));
  done();
  if (partial) be.free(partial);
  if (second && !outIndex) be.free(second);
}

/**
 * The reduction program. A state is (sv, si): the accumulator, or the best value and its index. 'full'
 * reduces whole rows, 'partial' part `gi % parts` of row `gi / parts` into a record of 4 words (value
 * bits in two, index), 'merge' a row's records. uniform: [rows, n, rs, cs, off, ooff, iooff, parts];
 * bindings: out (b1), index out (b2, pair kinds), input or records (last).
 */
function reduceProgram(kind: ReduceKind, inD: DTypeName, outD: DTypeName, idxD: DTypeName, pair: boolean,
  acc: ReturnType<typeof accParts>, phase: Phase, thread: boolean): Program {
  const arg = kind === 'argmax' || kind === 'argmin';
  const acs = phase === 'partial' ? 'wr' : pair ? `${arg ? 'w' : access(outD)}wr` : `${access(outD)}r`;
  const inb = `b${acs.length}`;
  const key = `i64red|${kind}|${inD}|${outD}|${idxD}|${pair}|${phase}|${thread}`;
  return program(key, acs, 8, () => {
    const aD = pair ? inD : acc![0];
    const T = ctype(aD);
    const toW = (v: string): string => (T === 'vec2<u32>' ? v : `vec2<u32>(bitcast<u32>(${v}), 0u)`);
    const fromW = (w: string): string => (T === 'vec2<u32>' ? w : `bitcast<${T}>((${w}).x)`);
    const init = pair ? `var sv: ${T} = ${R.literal(0, inD)}; var si = ${EMPTY};` : `var sv: ${T} = ${acc![1]}; var si = 0u;`;
    const merge = (v: string, i: string): string => (pair ? `if (better(sv, si, ${v}, ${i})) { sv = ${v}; si = ${i}; }` : `sv = nbx_merge(sv, ${v});`);
    const x = R.load(inD, inb, 'u32(base + i32(j) * cs)');
    const enter = pair ? `{ let v: ${T} = ${x}; ${merge('v', 'j')} }` : `sv = nbx_merge(sv, ${acc![2](x)});`;
    const fns = pair ? betterFn(inD, kind === 'argmax' || kind === 'max', false) : `fn nbx_merge(a: ${T}, b: ${T}) -> ${T} { return ${acc![3]}; }`;
    const wgMem = thread ? '' : `var<workgroup> wv: array<${T}, ${WG}>;\nvar<workgroup> wi: array<u32, ${WG}>;`;
    const id = thread ? 'g' : 'wid.y * nwg.x + wid.x';
    const first = thread ? '' : ' + lid', step = thread ? '1u' : `${WG}u`;
    let where: string, loop: string;
    if (phase === 'merge') {
      where = `let r = ${id}; if (r >= rows) { return; }`;
      loop = `for (var q = 0u${first}; q < parts; q += ${step}) {
    let at = 4u * (r * parts + q);
    let v: ${T} = ${fromW(`vec2<u32>(${inb}[at], ${inb}[at + 1u])`)}; let i = ${inb}[at + 2u];
    ${merge('v', 'i')}
  }`;
    } else {
      where = phase === 'partial'
        ? `let gi = ${id}; if (gi >= rows * parts) { return; }
  let r = gi / parts; let part = gi % parts; let chunk = (n + parts - 1u) / parts;
  let j0 = min(n, part * chunk); let j1 = min(n, j0 + chunk);`
        : `let r = ${id}; if (r >= rows) { return; }
  let j0 = 0u; let j1 = n;`;
      loop = `let base = i32(${U(4)}) + i32(r) * rs;
  for (var j = j0${first}; j < j1; j += ${step}) { ${enter} }`;
    }
    const tree = thread ? '' : `wv[lid] = sv; wi[lid] = si;
  workgroupBarrier();
  for (var s = ${WG / 2}u; s > 0u; s >>= 1u) {
    if (lid < s) { sv = wv[lid]; si = wi[lid]; ${merge('wv[lid + s]', 'wi[lid + s]')} wv[lid] = sv; wi[lid] = si; }
    workgroupBarrier();
  }
  if (lid != 0u) { return; }
  sv = wv[0]; si = wi[0];`;
    let write: string;
    if (phase === 'partial') write = `let w = ${toW('sv')}; let at = 4u * gi; b1[at] = w.x; b1[at + 1u] = w.y; b1[at + 2u] = si;`;
    else if (arg) write = storeIndex(outD, 'b1', `${U(5)} + r`, 'i32(si)');
    else if (pair) write = `${storeAny(outD, inD, 'b1', `${U(5)} + r`, 'sv')} ${storeIndex(idxD, 'b2', `${U(6)} + r`, 'i32(si)')}`;
    else write = storeAny(outD, aD, 'b1', `${U(5)} + r`, 'sv');
    const body = `let rows = ${U(0)}; let n = ${U(1)}; let rs = bitcast<i32>(${U(2)}); let cs = bitcast<i32>(${U(3)}); let parts = ${U(7)};
  ${where}
  ${init}
  ${loop}
  ${tree}
  ${write}`;
    return thread ? module(8, acs, 64, body, fns) : module(8, acs, WG, '', `${fns}\n${wgMem}`, entryOf(body));
  });
}

/** Workgroups for `rows` rows, as a 2-D grid within the per-dimension limit. */
function grid(be: WebGPUBackend, rows: number): [number, number, number] {
  const maxDim = be.isReady ? be.info.limits.maxComputeWorkgroupsPerDimension ?? 65535 : 65535;
  const x = Math.min(rows, maxDim);
  return [x, Math.ceil(rows / x), 1];
}

const entryOf = (body: string): string => `@compute @workgroup_size(${WG})
fn main(@builtin(workgroup_id) wid: vec3u, @builtin(num_workgroups) nwg: vec3u, @builtin(local_invocation_index) lid: u32) {
  ${body}
}`;

export function webgpuScanInt64(be: WebGPUBackend, kind: ScanKind, input: StridedRef, rows: number, n: number, out: StridedRef, outIndex?: StridedRef): void {
  const inD = input.dtype, outD = out.dtype;
  const pair = kind === 'cummax' || kind === 'cummin';
  if (pair && !outIndex) throw new DeviceLimitError(kind, `webgpu ${kind} needs its index output`);
  if (!pair && outD !== 'int64') throw new DeviceLimitError(kind, `webgpu ${kind} of ${inD} into ${outD} is not emulated in int64`);
  const acs = `${access(outD)}${pair ? 'w' : ''}r`;
  // many short rows: a thread per row, in order
  const thread = rows >= 256 && n <= 256;
  const key = `i64scan|${kind}|${inD}|${outD}|${outIndex?.dtype ?? ''}|${thread}`;
  const prog = program(key, acs, 8, () => {
    const inb = pair ? 'b3' : 'b2';
    const x = R.load(inD, inb, `${U(2)} + r * n + j`);
    if (thread) {
      const T = ctype(pair ? inD : 'int64');
      const step = pair
        ? `let xv: ${T} = ${x}; if (better(cv, ci, xv, j)) { cv = xv; ci = j; }
    ${storeAny(outD, inD, 'b1', `${U(3)} + r * n + j`, 'cv')} ${storeIndex(outIndex!.dtype, 'b2', `${U(4)} + r * n + j`, 'i32(ci)')}`
        : `cv = ${kind === 'cumsum' ? 'nbx_add_l' : 'nbx_mul_l'}(cv, ${R.castExpr(inD, 'int64', x)}); ${R.store('int64', 'b1', `${U(3)} + r * n + j`, 'cv')}`;
      return module(8, acs, 64, `let rows = ${U(0)}; let n = ${U(1)}; let r = g; if (r >= rows) { return; }
  var cv: ${T} = ${pair ? R.literal(0, inD) : kind === 'cumsum' ? 'vec2<u32>(0u)' : 'vec2<u32>(1u, 0u)'}; var ci = ${EMPTY};
  for (var j = 0u; j < n; j++) {
    ${step}
  }`, pair ? betterFn(inD, kind === 'cummax', true) : '');
    }
    const head = `let rows = ${U(0)}; let n = ${U(1)};
  let r = wid.y * nwg.x + wid.x; if (r >= rows) { return; }`;
    const hs = (combine: string): string => `workgroupBarrier();
    for (var s = 1u; s < ${WG}u; s <<= 1u) {
      ${combine}
      workgroupBarrier();
      ${pair ? 'sv[lid] = tv; si[lid] = ti;' : 'sh[lid] = t;'}
      workgroupBarrier();
    }`;
    if (pair) {
      const T = ctype(inD);
      const fns = `var<workgroup> sv: array<${T}, ${WG}>;\nvar<workgroup> si: array<u32, ${WG}>;\n${betterFn(inD, kind === 'cummax', true)}`;
      const body = `${head}
  var cv: ${T} = ${R.literal(0, inD)}; var ci = ${EMPTY};
  for (var c0 = 0u; c0 < n; c0 += ${WG}u) {
    let j = c0 + lid;
    var xv: ${T} = ${R.literal(0, inD)}; var xi = ${EMPTY};
    if (j < n) { xv = ${x}; xi = j; }
    sv[lid] = xv; si[lid] = xi;
    ${hs(`var tv = sv[lid]; var ti = si[lid];
      if (lid >= s && !better(sv[lid - s], si[lid - s], tv, ti)) { tv = sv[lid - s]; ti = si[lid - s]; }`)}
    var ov = cv; var oi = ci;
    if (better(cv, ci, sv[lid], si[lid])) { ov = sv[lid]; oi = si[lid]; }
    if (j < n) { ${storeAny(outD, inD, 'b1', `${U(3)} + r * n + j`, 'ov')} ${storeIndex(outIndex!.dtype, 'b2', `${U(4)} + r * n + j`, 'i32(oi)')} }
    if (better(cv, ci, sv[${WG - 1}u], si[${WG - 1}u])) { cv = sv[${WG - 1}u]; ci = si[${WG - 1}u]; }
    workgroupBarrier();
  }`;
      return module(8, acs, WG, '', fns, entryOf(body));
    }
    const op = kind === 'cumsum' ? 'nbx_add_l' : 'nbx_mul_l';
    const ident = kind === 'cumsum' ? 'vec2<u32>(0u)' : 'vec2<u32>(1u, 0u)';
    const fns = `var<workgroup> sh: array<vec2<u32>, ${WG}>;`;
    const body = `${head}
  var carry = ${ident};
  for (var c0 = 0u; c0 < n; c0 += ${WG}u) {
    let j = c0 + lid;
    var xv = ${ident};
    if (j < n) { xv = ${R.castExpr(inD, 'int64', x)}; }
    sh[lid] = xv;
    ${hs(`var t = sh[lid]; if (lid >= s) { t = ${op}(sh[lid - s], t); }`)}
    if (j < n) { ${R.store('int64', 'b1', `${U(3)} + r * n + j`, `${op}(carry, sh[lid])`)} }
    carry = ${op}(carry, sh[${WG - 1}u]);
    workgroupBarrier();
  }`;
    return module(8, acs, WG, '', fns, entryOf(body));
  });
  const written = [out.buf as WGBuffer, ...(pair ? [outIndex!.buf as WGBuffer] : [])];
  const { bufs, done } = bindAll(be, written, [input.buf as WGBuffer]);
  const u = new Uint32Array([rows, n, input.offset, out.offset, outIndex?.offset ?? 0, 0, 0, 0]);
  if (thread) be.dispatch(prog, bufs, u, rows, 64); else be.dispatchGroups(prog, bufs, u, ...grid(be, rows));
  done();
}
