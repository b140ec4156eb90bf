// WebGPU's reduce and scan kernels (contract: src/kernels/reduce.ts). 'reduce': a workgroup per row
// with a fixed-order combine, a thread per row or per 16 bytes of rows for vertical layouts and short
// rows, two passes in one command list for few long rows; int64 accumulators or indices run in
// int64.ts. 'scan': a workgroup per row (inclusive scan across the workgroup, carried between tiles) or
// a thread per row.

import { DTYPES, type DTypeName } from '../../../dtype/dtypes.js';
import type { StridedRef } from '../../backend.js';
import type { BackendKernels } from '../../../kernels/table.js';
import type { ReduceKind, RowLayout, ScanKind } from '../../../kernels/reduce.js';
import { WGSL as R, perWord, checkWgslDType } from '../../../ir/render_wgsl.js';
import { UnsupportedError } from '../../../errors.js';
import type { Program, WebGPUBackend, WGBuffer } from '../runtime/backend.js';
import { module, U, wordLane, wgslInclusiveScan } from '../runtime/elementwise.js';
import { reduceConfig, registerTuneProblem } from '../tuning/spaces.js';
import { int64Reduction, int64Scan, webgpuReduceInt64, webgpuScanInt64 } from './int64.js';
import { caps, probeCaps, rawRun } from '../runtime/caps.js';
import { bindings, f32w, nextPow2, outAccess, program, storeOut } from './util.js';

let be: WebGPUBackend;
export const kernels = {
  reduce: webgpuReduce,
  scan: webgpuScan,
} satisfies BackendKernels;

/** Points this family's kernels at the backend (called once, when the backend starts). */
export function bind(backend: WebGPUBackend): void {
  be = backend;
  backend.initHooks.push((b) => probeCaps(b, checkSubgroupReduce));
}

// ---- reductions ----------------------------------------------------------------------------------

interface Parts { init: string; enter: string; merge: string; final: string }

/** Per kind, in the accumulator type (f32, or i32 for integer inputs): init, entry of a raw x, merge, final. */
function reduceParts(kind: ReduceKind, isF: boolean): Parts | null {
  const T = isF ? 'f32' : 'i32';
  // NaN wins (the first one met), as PyTorch's max/min
  const pick = (cmp: string): string => (isF ? `select(select(select(a, b, b ${cmp} a), b, nbx_isnan(b)), a, nbx_isnan(a))` : `select(a, b, b ${cmp} a)`);
  switch (kind) {
    case 'sum': case 'mean': return { init: `${T}(0)`, enter: 'x', merge: 'a + b', final: kind === 'mean' ? 'a / f32(nt)' : 'a' };
    case 'prod': return { init: `${T}(1)`, enter: 'x', merge: 'a * b', final: 'a' };
    case 'max': return { init: isF ? '(-nbx_inf())' : 'bitcast<i32>(0x80000000u)', enter: 'x', merge: pick('>'), final: 'a' };
    case 'min': return { init: isF ? 'nbx_inf()' : '2147483647i', enter: 'x', merge: pick('<'), final: 'a' };
    case 'any': return { init: `${T}(0)`, enter: `select(${T}(0), ${T}(1), x != ${T}(0))`, merge: 'max(a, b)', final: 'a' };
    case 'all': return { init: `${T}(1)`, enter: `select(${T}(0), ${T}(1), x != ${T}(0))`, merge: 'min(a, b)', final: 'a' };
    case 'norm': return isF ? { init: 'nbx_norm_init()', enter: 'nbx_norm_enter(x)', merge: 'nbx_norm_merge(a, b)', final: 'nbx_norm_final(a)' } : null;
    default: return null;
  }
}

// vector norms: p is uniform word 6
const NORM_FNS = `fn nbx_p() -> f32 { return bitcast<f32>(${U(6)}); }
fn nbx_norm_init() -> f32 { return select(0.0f, nbx_inf(), nbx_isinf(nbx_p()) && nbx_p() < 0.0f); }
fn nbx_norm_enter(x: f32) -> f32 {
  let p = nbx_p(); let ax = abs(x);
  if (p == 2.0f) { return x * x; } if (p == 1.0f || nbx_isinf(p)) { return ax; }
  if (p == 0.0f) { return select(0.0f, 1.0f, x != 0.0f); }
  return nbx_pow_f(ax, p);
}
fn nbx_norm_merge(a: f32, b: f32) -> f32 {
  let p = nbx_p();
  if (nbx_isinf(p)) {
    if (nbx_isnan(a)) { return a; } if (nbx_isnan(b)) { return b; }
    return select(select(a, b, b < a), select(a, b, b > a), p > 0.0f);
  }
  return a + b;
}
fn nbx_norm_final(a: f32) -> f32 {
  let p = nbx_p();
  if (p == 2.0f) { return nbx_sqrt(a); } if (p == 1.0f || p == 0.0f || nbx_isinf(p)) { return a; }
  return nbx_pow_f(a, 1.0f / p);
}`;

/**
 * How a reduction kernel covers its rows (r: the output index, j: the reduced index):
 * - 'wg': a workgroup per row (or per part of a row); its threads stride along the row, then combine
 *   in a fixed order: subgroupShuffleXor butterflies and a serial pass over the subgroups (`sg`, where
 *   the device's subgroups passed the start-up check, caps.ts), else a workgroup-memory tree;
 * - 'thread': a thread per row, for vertical layouts (consecutive threads read consecutive rows, e.g.
 *   sum(dim=0)) and tiny rows.
 * `phase` splits long rows in two passes of one command list (no readback between): 'partial' reduces
 * part `part` of row r into a raw f32/i32 accumulator, 'merge' reduces those (its n is the number of
 * parts, word 7 the row length a mean divides by).
 * `vec`: 16-byte loads (a vec4<u32>: 4 floats, 8 halves, 16 bytes). In 'wg' mode along a contiguous row
 * (whole vectors, then the tail element by element); in 'thread' mode across rows: a thread reduces E
 * adjacent rows (contiguous columns of the input) with E accumulators.
 * Every thread walks its elements in a fixed order, so results do not depend on timing.
 */
interface RedPlan { mode: 'wg' | 'thread'; phase: 'full' | 'partial' | 'merge'; vec: boolean; wg: number; sg: boolean }

/**
 * Loads in flight per thread: the next `unroll` elements (or vectors) of a thread's own sequence are
 * loaded together, then merged in the same order as one at a time (the bits do not move). 4; settable
 * for benchmarks (`setReduceUnroll`), taken when a kernel is made.
 */
let UNROLL = 4;
export function setReduceUnroll(u: number): number { const was = UNROLL; UNROLL = Math.max(1, Math.floor(u)); return was; }

/**
 * uniform: [rows, n, rowStride, colStride, off, ooff, p, parts | total n]; input b2, output b1. Partials
 * are laid out [rows, parts] by workgroups and [parts, rows] by threads (so both passes read coalesced).
 */
function reduceProgram(kind: ReduceKind, inD: DTypeName, outD: DTypeName, plan: RedPlan): Program {
  const { mode, phase, vec, wg, sg } = plan;
  const k = perWord(inD), E = 4 * k, UNR = UNROLL;
  const key = `red|${kind}|${inD}|${outD}|${mode}|${phase}|${vec}|${wg}|${sg}|u${UNR}`;
  const isF = DTYPES[inD].kind === 'float';
  const T = isF ? 'f32' : 'i32', accD: DTypeName = isF ? 'float32' : 'int32';
  const out = phase === 'partial' ? 'w' : outAccess(outD);
  const access = `${out}${vec ? 'v' : 'r'}`;
  return program(key, access, 8, () => {
    // word w of the input (b2 is an array of vec4<u32> when `vec`)
    const word = (w: string): string => (vec ? `b2[(${w}) >> 2u][(${w}) & 3u]` : `b2[${w}]`);
    // element e (a u32 expression); float16 through the hardware unpack (exact; the bit-level
    // conversion made column sums ALU-bound)
    const load = (e: string): string => {
      if (phase === 'merge') return `bitcast<${T}>(${word(e)})`;
      if (inD === 'float16') return `unpack2x16float(${word(`(${e}) >> 1u`)})[(${e}) & 1u]`;
      if (!vec) return R.load(inD, 'b2', e);
      return k === 1 ? R.fromWord(inD, word(e), 0) : R.fromWord(inD, word(`(${e}) / ${k}u`), `(${e}) % ${k}u`);
    };
    const at = (j: string): string => `u32(base + i32(${j}) * cs)`;
    const head = `let rows = ${U(0)}; let n = ${U(1)}; let rs = bitcast<i32>(${U(2)}); let cs = bitcast<i32>(${U(3)});
  let off = ${U(4)}; let ooff = ${U(5)}; let parts = ${U(7)}; let nt = ${phase === 'merge' ? 'parts' : 'n'};`;
    // the tree over the workgroup's partials, fixed order (deterministic)
    const tree = (v: string, merge: string): string => `sh[lid] = ${v};
    workgroupBarrier();
    for (var s = ${wg / 2}u; s > 0u; s >>= 1u) {
      if (lid < s) { let a = sh[lid]; let b = sh[lid + s]; sh[lid] = ${merge}; }
      workgroupBarrier();
    }
    ${v} = sh[0];
    workgroupBarrier();`;
    let fns = '';
    let body: string;
    if (kind === 'var' || kind === 'logsumexp') {
      const storeR = (v: string): string => storeOut(outD, accD, 'ooff + r', v);
      // two passes over the row (mean then squared deviations; max then sum of exp)
      const first = kind === 'var' ? { init: '0.0f', step: 'acc = acc + x;', merge: 'a + b' }
        : { init: '(-nbx_inf())', step: 'if (x > acc || nbx_isnan(x)) { acc = x; }', merge: 'select(select(a, b, b > a), select(a, b, nbx_isnan(b)), nbx_isnan(a) || nbx_isnan(b))' };
      const second = kind === 'var' ? 'let d = x - m1; acc2 = acc2 + d * d;' : 'acc2 = acc2 + nbx_exp(x - sft);';
      const mid = kind === 'var' ? 'let m1 = acc / f32(n);' : 'let sft = select(0.0f, acc, !nbx_isnan(acc) && !nbx_isinf(acc));';
      const fin = kind === 'var'
        ? `let dn = max(0.0f, f32(n) - bitcast<f32>(${U(6)})); let res = select(acc2 / dn, select(nbx_inf(), nbx_nan(), acc2 == 0.0f || nbx_isnan(acc2)), dn <= 0.0f);`
        : 'let res = nbx_log(acc2) + sft;';
      const rowLoop = (j0: string, step: string, stmt: string): string => `for (var j = ${j0}; j < n; j += ${step}) { let x = ${load(at('j'))}; ${stmt} }`;
      if (mode === 'thread') {
        body = `${head}
  let r = g; if (r >= rows) { return; }
  let base = i32(off) + i32(r) * rs;
  var acc = ${first.init};
  ${rowLoop('0u', '1u', first.step)}
  ${mid}
  var acc2 = 0.0f;
  ${rowLoop('0u', '1u', second)}
  ${fin}
  ${storeR('res')}`;
      } else {
        fns = `var<workgroup> sh: array<f32, ${wg}>;`;
        body = `${head}
  let r = wid.y * nwg.x + wid.x; if (r >= rows) { return; }
  let base = i32(off) + i32(r) * rs;
  var acc = ${first.init};
  ${rowLoop('lid', `${wg}u`, first.step)}
  ${tree('acc', first.merge)}
  ${mid}
  var acc2 = 0.0f;
  ${rowLoop('lid', `${wg}u`, second)}
  ${tree('acc2', 'a + b')}
  if (lid == 0u) { ${fin} ${storeR('res')} }`;
      }
    } else {
      const P = reduceParts(kind, isF)!;
      fns = `fn nbx_merge(a: ${T}, b: ${T}) -> ${T} { return ${P.merge}; }
fn nbx_enter(x: ${T}) -> ${T} { return ${phase === 'merge' ? 'x' : P.enter}; }
${kind === 'norm' ? NORM_FNS : ''}`;
      const fin = (a: string): string => (phase === 'partial' ? a : P.final.replace(/\ba\b/g, a));
      const enter = (acc: string, x: string): string => `${acc} = nbx_merge(${acc}, nbx_enter(${x}));`;
      // the E elements of vec4<u32> `v` in order (float16: one unpack per word)
      const unpack = (v: string): { decl: string; vals: string[] } => {
        if (inD === 'float16') {
          return { decl: [0, 1, 2, 3].map((w) => `let ${v}h${w} = unpack2x16float(${v}[${w}]);`).join(' '),
            vals: [0, 1, 2, 3].flatMap((w) => [`${v}h${w}.x`, `${v}h${w}.y`]) };
        }
        return { decl: '', vals: [...Array(E).keys()].map((l) => wordLane(inD, `${v}[${Math.floor(l / k)}]`, l % k)) };
      };
      // `count` loads of `loadAt(q)` (q = 0..count-1), then their merges in order (into `into(lane)` for vectors)
      const group = (count: number, loadAt: (q: number) => string, isVec: boolean, into: (lane: number) => string): string => {
        const loads = [...Array(count).keys()].map((q) => `let x${q} = ${loadAt(q)};`);
        const merges = [...Array(count).keys()].map((q) => {
          if (!isVec) return enter(into(0), `x${q}`);
          const { decl, vals } = unpack(`x${q}`);
          return `${decl} ${vals.map((x, l) => enter(into(l), x)).join(' ')}`;
        });
        return `${loads.join(' ')}\n    ${merges.join('\n    ')}`;
      };
      const one = (): string => 'acc';
      let loop: string, decls = `var acc: ${T} = ${P.init};`, where: string, finish: string;
      const store = (idx: string, v: string): string => (phase === 'partial' ? `b1[${idx}] = bitcast<u32>(${v});` : storeOut(outD, accD, `ooff + ${idx}`, v));
      if (mode === 'thread' && vec) {
        // E adjacent rows r0 .. r0+E-1 per thread: one 16-byte load per j covers them all
        where = `let vrows = (rows + ${E - 1}u) / ${E}u;
  ${phase === 'partial' ? `let gi = g; if (gi >= vrows * parts) { return; }
  let vr = gi % vrows; let part = gi / vrows;
  let chunk = (n + parts - 1u) / parts;
  let j0 = min(n, part * chunk); let j1 = min(n, j0 + chunk);` : `let vr = g; if (vr >= vrows) { return; }
  let j0 = 0u; let j1 = n;`}
  let vb = off / ${E}u + vr; let vcs = u32(cs) / ${E}u;`;
        decls = [...Array(E).keys()].map((l) => `var a${l}: ${T} = ${P.init};`).join(' ');
        const V = 2; // E accumulators already give each thread independent work
        loop = `var j = j0;
  for (; j + ${V}u <= j1; j += ${V}u) {
    ${group(V, (q) => `b2[vb + (j + ${q}u) * vcs]`, true, (l) => `a${l}`)}
  }
  for (; j < j1; j++) {
    ${group(1, () => 'b2[vb + j * vcs]', true, (l) => `a${l}`)}
  }`;
        finish = [...Array(E).keys()].map((l) => `{ let c = vr * ${E}u + ${l}u; if (c < rows) { ${store(phase === 'partial' ? 'part * rows + c' : 'c', fin(`a${l}`))} } }`).join('\n  ');
      } else {
        const id = mode === 'thread' ? 'g' : 'wid.y * nwg.x + wid.x';
        where = phase === 'partial'
          ? `let gi = ${id}; if (gi >= rows * parts) { return; }
  let r = ${mode === 'thread' ? 'gi % rows' : 'gi / parts'}; let part = ${mode === 'thread' ? 'gi / rows' : 'gi % parts'};
  let pi = ${mode === 'thread' ? 'part * rows + r' : 'r * parts + part'};
  let chunk = ${vec ? `(((n + parts - 1u) / parts) + ${E - 1}u) & ~${E - 1}u` : '(n + parts - 1u) / parts'};
  let j0 = min(n, part * chunk); let j1 = min(n, j0 + chunk);`
          : `let r = ${id}; if (r >= rows) { return; }
  let j0 = 0u; let j1 = n;`;
        where += '\n  let base = i32(off) + i32(r) * rs;';
        if (mode === 'thread') {
          loop = `var j = j0;
  for (; j + ${UNR}u <= j1; j += ${UNR}u) {
    ${group(UNR, (q) => load(at(`j + ${q}u`)), false, one)}
  }
  for (; j < j1; j++) { ${enter('acc', load(at('j')))} }`;
        } else if (vec) {
          // whole vectors (j0 is a multiple of E), then the row's last n % E elements one by one
          loop = `let vb = u32(base) / ${E}u; let nv = j1 / ${E}u;
  var j = j0 / ${E}u + lid;
  for (; j + ${(UNR - 1) * wg}u < nv; j += ${UNR * wg}u) {
    ${group(UNR, (q) => `b2[vb + j + ${q * wg}u]`, true, one)}
  }
  for (; j < nv; j += ${wg}u) {
    ${group(1, () => 'b2[vb + j]', true, one)}
  }
  for (var t = nv * ${E}u + lid; t < j1; t += ${wg}u) { ${enter('acc', load('u32(base) + t'))} }`;
        } else {
          loop = `var j = j0 + lid;
  for (; j + ${(UNR - 1) * wg}u < j1; j += ${UNR * wg}u) {
    ${group(UNR, (q) => load(at(`j + ${q * wg}u`)), false, one)}
  }
  for (; j < j1; j += ${wg}u) { ${enter('acc', load(at('j')))} }`;
        }
        const idx = phase === 'partial' ? 'pi' : 'r';
        if (mode === 'thread') finish = store(idx, fin('acc'));
        else if (sg) {
          // butterflies within each subgroup, then thread 0 merges the subgroups in order; the barrier
          // first brings every thread out of the loops (their trip counts differ), so whole subgroups
          // shuffle whatever the GPU's reconvergence rules
          finish = `workgroupBarrier();
  var sa = acc;
  for (var o = sgs / 2u; o > 0u; o >>= 1u) { sa = nbx_merge(sa, subgroupShuffleXor(sa, o)); }
  if (sgid == 0u) { sh[lid / sgs] = sa; }
  workgroupBarrier();
  if (lid == 0u) {
    var t = sh[0];
    for (var s = 1u; s < ${wg}u / sgs; s++) { t = nbx_merge(t, sh[s]); }
    ${store(idx, fin('t'))}
  }`;
        } else finish = `${tree('acc', 'nbx_merge(a, b)')}\n  if (lid == 0u) { ${store(idx, fin('acc'))} }`;
      }
      if (mode === 'wg') fns += `\nvar<workgroup> sh: array<${T}, ${wg}>;`;
      body = `${head}
  ${where}
  ${decls}
  ${loop}
  ${finish}`;
    }
    if (!sg) return module(8, access, wg, body, fns);
    // subgroup builtins need the extension and their own entry point; the butterflies run after loops
    // whose trip counts differ between threads, which the uniformity analysis cannot see through
    const entryCode = `@compute @workgroup_size(${wg})
fn main(@builtin(workgroup_id) wid: vec3u, @builtin(num_workgroups) nwg: vec3u, @builtin(local_invocation_index) lid: u32,
  @builtin(subgroup_invocation_id) sgid: u32, @builtin(subgroup_size) sgs: u32) {
  let g = (wid.y * nwg.x + wid.x) * ${wg}u + lid;
  ${body}
}`;
    return `enable subgroups;\ndiagnostic(off, subgroup_uniformity);\n${module(8, access, wg, '', fns, entryCode)}`;
  });
}

/** The autotuner's candidate while it times one (see the scratch problem below). */
let forcedReduceWg: number | undefined;
// The autotuner's scratch reduction: sum over the rows of a contiguous [rows, n] matrix.
registerTuneProblem('webgpu.reduce', (b, [rows, n], d) => {
  const input = b.allocBytes(rows! * n! * DTYPES[d].itemsize, true), out = b.allocBytes(rows! * DTYPES[d].itemsize);
  const ref = (buf: WGBuffer, shape: number[]): StridedRef => ({ buf, dtype: d, shape, strides: shape.length === 2 ? [shape[1]!, 1] : [1], offset: 0 });
  return {
    run: (cfg) => {
      forcedReduceWg = cfg.wg as number;
      try { webgpuReduce('sum', ref(input, [rows!, n!]), rows!, n!, [], ref(out, [rows!])); } finally { forcedReduceWg = undefined; }
    },
    dispose: () => { b.free(input); b.free(out); },
  };
});

const SPLITTABLE = new Set<ReduceKind>(['sum', 'mean', 'prod', 'max', 'min', 'any', 'all', 'norm']);
/** Invocations that keep a large GPU busy; fewer rows than this are split into parts. */
const BUSY_THREADS = 1 << 19; // an H200 holds 132 SMs x 2048 resident invocations: fill it twice over
/** The same for threads that each reduce E rows with 16-byte loads (they have E independent accumulators). */
const BUSY_VEC_THREADS = 1 << 17;
/**
 * Most parts per row (a workgroup merges them): along rows 4096 (a full reduction by workgroups of 64
 * still fills the GPU); across rows (few columns over many rows) more, as those partials are few in all.
 */
const MAX_PARTS = 4096, MAX_PARTS_VERTICAL = 1 << 16;

/** Whether a workgroup of `wg` threads combines through subgroups (checked at start-up; whole subgroups only). */
const useSubgroups = (wg: number): boolean => caps.subgroups && wg >= Number(be.info.identity.subgroupMaxSize ?? Infinity);

export function webgpuReduce(kind: ReduceKind, input: StridedRef, rows: number, n: number, params: number[], out: StridedRef,
  outIndex?: StridedRef, layout?: RowLayout): void {
  // int64 accumulators, values or indices: emulated (int64.ts)
  if (int64Reduction(kind, input, out, outIndex)) { webgpuReduceInt64(be, kind, input, rows, n, out, outIndex, layout); return; }
  checkWgslDType(kind, input.dtype);
  checkWgslDType(kind, out.dtype);
  const isF = DTYPES[input.dtype].kind === 'float';
  if (DTYPES[input.dtype].kind === 'complex') throw new UnsupportedError(kind, `${kind} of ${input.dtype} is not supported on webgpu yet (reduce nbx.view_as_real(x) instead)`);
  if (!isF && (kind === 'var' || kind === 'logsumexp' || kind === 'norm')) throw new UnsupportedError(kind, `${kind} of ${input.dtype} is not supported on webgpu`);
  const lay = layout ?? { rowStride: n, colStride: 1 };
  // the stride of a dimension of one is never used: 0, so a full reduction (one row) of a contiguous
  // tensor is a contiguous row and takes the 16-byte loads
  const rs = rows === 1 ? 0 : lay.rowStride | 0, cs = n === 1 ? 0 : lay.colStride | 0;
  const wgMax = forcedReduceWg ?? reduceConfig(be, rows, n, input.dtype);
  const splittable = SPLITTABLE.has(kind);
  const { bufs, temp } = bindings(be, out.buf as WGBuffer, [input.buf as WGBuffer]);
  const u = new Uint32Array([rows, n, rs, cs, input.offset, out.offset, f32w(params[0] ?? 0), 1]);
  // thread per row for vertical layouts (consecutive threads read consecutive rows) and tiny rows
  const byThread = (rs === 1 && cs !== 1 && rows >= 64) || (n <= 32 && rows >= 1024);
  // 16-byte loads: E elements of any width (4 floats, 8 halves, 16 bytes) per load, along a row from a
  // 16-byte boundary, or across E adjacent rows whose columns start on 16-byte boundaries
  const E = 4 * perWord(input.dtype);
  const vec = splittable && input.offset % E === 0 && (byThread
    ? rs === 1 && cs > 0 && cs % E === 0 && rows >= E
    : cs === 1 && rs % E === 0 && n >= E);
  const units = byThread && vec ? Math.ceil(rows / E) : rows; // threads per part in thread mode
  const wgFor = (len: number): number => Math.max(32, Math.min(wgMax, nextPow2(vec ? len / E : len)));
  // parts per row when the rows alone cannot keep the device busy
  const parts = !splittable ? 1 : Math.max(1, byThread
    ? Math.min(MAX_PARTS_VERTICAL, Math.ceil((vec ? BUSY_VEC_THREADS : BUSY_THREADS) / units), Math.floor(n / (vec ? 64 : 16)))
    : Math.min(MAX_PARTS, Math.ceil(BUSY_THREADS / (rows * wgMax)), Math.floor(n / (wgMax * 16))));
  const dtypes = [kind, input.dtype, out.dtype] as const;
  if (parts <= 1) {
    const wg = byThread ? 64 : wgFor(n);
    const plan: RedPlan = { mode: byThread ? 'thread' : 'wg', phase: 'full', vec, wg, sg: !byThread && useSubgroups(wg) };
    be.dispatch(reduceProgram(...dtypes, plan), bufs, u, byThread ? units : rows * wg, wg);
  } else {
    u[7] = parts;
    const partial = be.allocBytes(rows * parts * 4);
    const p1: RedPlan = { mode: byThread ? 'thread' : 'wg', phase: 'partial', vec, wg: byThread ? 64 : wgMax, sg: !byThread && useSubgroups(wgMax) };
    be.dispatch(reduceProgram(...dtypes, p1), [partial, bufs[1]!], u, units * parts * (byThread ? 1 : wgMax), p1.wg);
    // merge: partials [parts, rows] (threads: vertical again) or [rows, parts]; a thread per row only
    // when there are enough rows, else a workgroup per row (a thread's serial loop would be long)
    const mergeByThread = byThread && rows >= 8192;
    const u2 = byThread ? new Uint32Array([rows, parts, 1, rows, 0, out.offset, u[6]!, n]) : new Uint32Array([rows, parts, parts, 1, 0, out.offset, u[6]!, n]);
    const wg2 = mergeByThread ? 64 : Math.max(32, Math.min(wgMax, nextPow2(parts)));
    const p2: RedPlan = { mode: mergeByThread ? 'thread' : 'wg', phase: 'merge', vec: false, wg: wg2, sg: !mergeByThread && useSubgroups(wg2) };
    be.dispatch(reduceProgram(...dtypes, p2), [bufs[0]!, partial], u2, mergeByThread ? rows : rows * wg2, wg2);
    be.free(partial);
  }
  if (temp) be.free(temp);
}

/**
 * The start-up check of the subgroup combine (caps.ts): the real kernel (sum, 16-byte loads, a row
 * length with a tail) over float32 and int32 data whose sums are exact in any order.
 */
async function checkSubgroupReduce(b: WebGPUBackend, compileOnly: boolean): Promise<string> {
  const wg = Math.min(256, b.info.limits.maxComputeInvocationsPerWorkgroup ?? 256);
  if (wg < Number(b.info.identity.subgroupMaxSize ?? Infinity)) return `subgroups up to ${b.info.identity.subgroupMaxSize} wide exceed a ${wg}-thread workgroup`;
  const rows = 3, n = 5003, stride = 5008; // rows start on 16-byte boundaries, as the vector loads need
  for (const d of ['float32', 'int32'] as const) {
    const code = reduceProgram('sum', d, d, { mode: 'wg', phase: 'full', vec: true, wg, sg: true }).source();
    const data = new Uint32Array(rows * stride);
    const want = new Array<number>(rows).fill(0);
    for (let r = 0; r < rows; r++) {
      for (let j = 0; j < n; j++) {
        const v = ((j * 7 + r) % 13) - 6;
        data[r * stride + j] = d === 'float32' ? f32w(v) : v >>> 0;
        want[r]! += v;
      }
    }
    const got = await rawRun(b.device, { code, uniform: new Uint32Array([rows, n, stride, 1, 0, 0, 0, 1]),
      buffers: [{ words: 4 }, { data, words: data.length + 4 }], groups: [rows, 1, 1], outBinding: 1 }, compileOnly);
    if (!got) continue;
    const vals = d === 'float32' ? [...new Float32Array(got.buffer, 0, rows)] : [...new Int32Array(got.buffer, 0, rows)];
    if (vals.some((v, r) => v !== want[r])) return `${d} sums ${vals.join(', ')}, want ${want.join(', ')}`;
  }
  return '';
}
// ---- scans ---------------------------------------------------------------------------------------

/** uniform: [rows, n, off, ooff]; input b2 contiguous rows, output b1 contiguous rows. */
function scanProgram(kind: ScanKind, inD: DTypeName, outD: DTypeName, mode: 'wg' | 'thread', wg: number): Program {
  const isF = DTYPES[inD].kind === 'float';
  const T = isF ? 'f32' : 'i32', accD: DTypeName = isF ? 'float32' : 'int32';
  const op = kind === 'cumsum' ? '+' : '*';
  const ident = kind === 'cumsum' ? `${T}(0)` : `${T}(1)`;
  const access = `${outAccess(outD)}r`;
  return program(`scan|${kind}|${inD}|${outD}|${mode}|${wg}`, access, 4, () => {
    const head = `let rows = ${U(0)}; let n = ${U(1)}; let off = ${U(2)}; let ooff = ${U(3)};`;
    let body: string, fns = '';
    if (mode === 'thread') {
      body = `${head}
  let r = g; if (r >= rows) { return; }
  var acc: ${T} = ${ident};
  for (var j = 0u; j < n; j++) { acc = acc ${op} ${R.load(inD, 'b2', 'off + r * n + j')}; ${storeOut(outD, accD, 'ooff + r * n + j', 'acc')} }`;
    } else {
      // chunks of wg elements: Hillis-Steele in workgroup memory, plus the carry of earlier chunks
      fns = `var<workgroup> sh: array<${T}, ${wg}>;`;
      body = `${head}
  let r = wid.y * nwg.x + wid.x; if (r >= rows) { return; }
  var carry: ${T} = ${ident};
  for (var c0 = 0u; c0 < n; c0 += ${wg}u) {
    let j = c0 + lid;
    var x: ${T} = ${ident};
    if (j < n) { x = ${R.load(inD, 'b2', 'off + r * n + j')}; }
    sh[lid] = x;
    workgroupBarrier();
    ${wgslInclusiveScan(wg, (a, b) => `${a} ${op} ${b}`)}
    if (j < n) { let v = carry ${op} sh[lid]; ${storeOut(outD, accD, 'ooff + r * n + j', 'v')} }
    carry = carry ${op} sh[${wg - 1}u];
    workgroupBarrier();
  }`;
    }
    return module(4, access, wg, body, fns);
  });
}

export function webgpuScan(kind: ScanKind, input: StridedRef, rows: number, n: number, out: StridedRef, outIndex?: StridedRef): void {
  if (int64Scan(kind, input, out, outIndex)) { webgpuScanInt64(be, kind, input, rows, n, out, outIndex); return; }
  checkWgslDType(kind, input.dtype);
  checkWgslDType(kind, out.dtype);
  const u = new Uint32Array([rows, n, input.offset, out.offset]);
  const { bufs, temp } = bindings(be, out.buf as WGBuffer, [input.buf as WGBuffer]);
  if (rows >= 256 && n <= 256) {
    be.dispatch(scanProgram(kind, input.dtype, out.dtype, 'thread', 64), bufs, u, rows, 64);
  } else {
    const wg = Math.max(32, Math.min(be.wgReduce, nextPow2(n)));
    be.dispatch(scanProgram(kind, input.dtype, out.dtype, 'wg', wg), bufs, u, rows * wg, wg);
  }
  if (temp) be.free(temp);
}
