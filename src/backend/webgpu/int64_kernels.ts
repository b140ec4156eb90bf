// WebGPU reductions and scans that involve int64 (src/ir/wgsl_int64.ts: vec2<u32> values, two storage
// words), with the CPU kernels' signatures ('reduce', 'scan' in src/backend/cpu/reduce.ts): sums and
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

import { DTYPES, type DTypeName } from '../../dtype/dtypes.js';
import type { StridedRef } from '../backend.js';
import type { ReduceKind, RowLayout, ScanKind } from '../cpu/reduce.js';
import { WGSL as R, perWord } from '../../ir/render_wgsl.js';
import { DeviceLimitError } from '../../errors.js';
import type { WebGPUBackend, WGBuffer } from './backend.js';
import { module, U } from './elementwise.js';
import { bindAll, program, storeIndex } from './indexing_kernels.js';

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

export function webgpuReduceInt64(be: WebGPUBackend, kind: ReduceKind, input: StridedRef, rows: number, n: number, out: StridedRef,
  outIndex?: StridedRef, layout?: RowLayout): void {
  const inD = input.dtype, outD = out.dtype;
  const lay = layout ?? { rowStride: n, colStride: 1 };
  const pair = kind === 'argmax' || kind === 'argmin' || !!outIndex;
  const acc = pair ? null : accParts(kind, inD);
  if (!pair && (!acc || (kind === 'max' || kind === 'min') && inD !== 'int64')) {
    throw new DeviceLimitError(kind, `webgpu ${kind} of ${inD} into ${outD} is not emulated in int64`);
  }
  const isMax = kind === 'argmax' || kind === 'max';
  const idxD = kind === 'argmax' || kind === 'argmin' ? outD : outIndex?.dtype ?? 'int64';
  const acc2 = pair ? `${access(kind === 'argmax' || kind === 'argmin' ? 'int32' : outD)}w` : access(outD);
  const acs = `${acc2}r`;
  const key = `i64red|${kind}|${inD}|${outD}|${idxD}|${pair}`;
  const prog = program(key, acs, 8, () => {
    const head = `let rows = ${U(0)}; let n = ${U(1)}; let rs = bitcast<i32>(${U(2)}); let cs = bitcast<i32>(${U(3)});
  let r = wid.y * nwg.x + wid.x; if (r >= rows) { return; }
  let base = i32(${U(4)}) + i32(r) * rs;`;
    const x = R.load(inD, pair ? 'b3' : 'b2', 'u32(base + i32(j) * cs)');
    const tree = (merge: string): string => `workgroupBarrier();
  for (var s = ${WG / 2}u; s > 0u; s >>= 1u) {
    if (lid < s) { ${merge} }
    workgroupBarrier();
  }`;
    if (pair) {
      const T = ctype(inD);
      const fns = `var<workgroup> sv: array<${T}, ${WG}>;\nvar<workgroup> si: array<u32, ${WG}>;\n${betterFn(inD, isMax, false)}`;
      const write = kind === 'argmax' || kind === 'argmin'
        ? storeIndex(outD, 'b1', `${U(5)} + r`, 'i32(si[0])')
        : `${storeAny(outD, inD, 'b1', `${U(5)} + r`, 'sv[0]')} ${storeIndex(idxD, 'b2', `${U(6)} + r`, 'i32(si[0])')}`;
      const body = `${head}
  var bv: ${T} = ${R.literal(0, inD)}; var bi = ${EMPTY};
  for (var j = lid; j < n; j += ${WG}u) { let v: ${T} = ${x}; if (better(bv, bi, v, j)) { bv = v; bi = j; } }
  sv[lid] = bv; si[lid] = bi;
  ${tree('if (better(sv[lid], si[lid], sv[lid + s], si[lid + s])) { sv[lid] = sv[lid + s]; si[lid] = si[lid + s]; }')}
  if (lid == 0u) { ${write} }`;
      return module(8, acs, WG, '', fns, entryOf(body));
    }
    const [aD, init, enter, merge] = acc!;
    const T = ctype(aD);
    const fns = `var<workgroup> sh: array<${T}, ${WG}>;\nfn nbx_merge(a: ${T}, b: ${T}) -> ${T} { return ${merge}; }`;
    const body = `${head}
  var acc: ${T} = ${init};
  for (var j = lid; j < n; j += ${WG}u) { acc = nbx_merge(acc, ${enter(x)}); }
  sh[lid] = acc;
  ${tree('sh[lid] = nbx_merge(sh[lid], sh[lid + s]);')}
  if (lid == 0u) { ${storeAny(outD, aD, 'b1', `${U(5)} + r`, 'sh[0]')} }`;
    return module(8, acs, WG, '', fns, entryOf(body));
  });
  // argmax/argmin have no second output: a scratch word takes its binding
  const second = pair ? (outIndex ? outIndex.buf as WGBuffer : be.allocBytes(16)) : null;
  const { bufs, done } = bindAll(second ? [out.buf as WGBuffer, second] : [out.buf as WGBuffer], [input.buf as WGBuffer]);
  be.dispatchGroups(prog, bufs, new Uint32Array([rows, n, lay.rowStride | 0, lay.colStride | 0, input.offset, out.offset, outIndex?.offset ?? 0, 0]),
    ...grid(be, rows));
  done();
  if (second && !outIndex) be.free(second);
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
  const key = `i64scan|${kind}|${inD}|${outD}|${outIndex?.dtype ?? ''}`;
  const prog = program(key, acs, 8, () => {
    const inb = pair ? 'b3' : 'b2';
    const x = R.load(inD, inb, `${U(2)} + r * n + j`);
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
  const { bufs, done } = bindAll(written, [input.buf as WGBuffer]);
  be.dispatchGroups(prog, bufs, new Uint32Array([rows, n, input.offset, out.offset, outIndex?.offset ?? 0, 0, 0, 0]), ...grid(be, rows));
  done();
}
