// WebGPU's matrix-vector path of gemm (contract: src/kernels/gemm.ts) for a decode step's products:
// C[m, n] = alpha·A[m, k]·B[n, k]ᵀ with few rows m (a linear layer's x·Wᵀ at batch ≤ 8), the weight
// B read once, row by row, in 16-byte words (8 bfloat16 or float16, 4 float32). A decode step is bound by
// streaming the weights, so the kernel is built around keeping many weight loads in flight:
// - LPR invocations (a power of two ≥ 32: one or more subgroups) own an output column; each reads the
//   16-byte words c = lane, lane + LPR, ... of its weight row, UNROLL of them issued before any is used;
//   a workgroup of 256 holds 256 / LPR columns. A wider LPR splits K inside the workgroup (the subgroups'
//   partial sums meet in workgroup memory); on the H200 one subgroup per column is fastest (gemvShape).
// - The input rows are staged once per workgroup in workgroup memory as 16-byte words of the dtype (plain
//   products by default read them from memory instead, measured faster: gemvShape) (the
//   same word layout as the weight, so one unpack serves both), which is also where the fused variants
//   form their input: act(gate)·up (gated_linear) and rms_norm(x + residual)·w (add_rms_norm_linear),
//   each rounded to the dtype as the composite stores it. The staging reads 16-byte words (one or two
//   per invocation for K ≤ 4096), so its cost is a load round and a barrier or two, not the
//   element-at-a-time loops and tree it replaced (a fixed ~16 µs per normed projection on the H200).
// - The lanes' sums meet by subgroupAdd where the device has 32-wide subgroups, else by a fixed-order
//   tree in workgroup memory (both orders fixed: results are reproducible).
// - Workgroups may loop over column blocks (GRID cap) so the staging is paid once per workgroup.
// - The first block's first UNROLL weight words are loaded before the staging, so the staging's loads,
//   reductions and barriers run while those weight loads are in flight instead of before them.
// Half types are unpacked by shifts (bfloat16: the high half of an f32) or unpack2x16float, so no
// shader-f16 is needed. The launch shape (LPR, UNROLL, grid cap) has defaults from the bandwidth sweep
// (bench/webgpu_gemv.ts) and can be set by NBX_WEBGPU_GEMV="lpr,unroll,cap[,g]" (a diagnostic; g: plain
// products read A from memory, not staged).
//
// Taken when the operands allow 16-byte words: B rows contiguous (transB), A rows contiguous, k, the
// row strides and both offsets multiples of the word's elements, beta = 0 and no bias; else gemm's
// tiled kernel runs.

import { DTYPES, type DTypeName } from '../../../dtype/dtypes.js';
import type { GemmParams } from '../../../kernels/gemm.js';
import type { GatedGemvParams, NormGemvParams } from '../../../kernels/llm.js';
import type { Expr } from '../../../ir/expr.js';
import { WGSL as RW } from '../../../ir/render_wgsl.js';
import type { Program, WebGPUBackend, WGBuffer } from '../runtime/backend.js';
import { module, U } from '../runtime/elementwise.js';
import { bindings, f32w, outAccess, program, storeOut } from './util.js';

/** Input rows up to which the matrix-vector kernel runs (one accumulator per row and invocation). */
export const GEMV_MAX_ROWS = 8;
/** Subgroup width the subgroup path is written for. */
const SG = 32;
/** Invocations per workgroup. */
const WG = 256;
/** Bytes of workgroup memory the staged input rows may take (rows × K elements of the dtype). */
const XS_MAX_BYTES = 16384;

/** Whether the device's subgroups are exactly SG wide (subgroupAdd then reduces one subgroup's lanes). */
export function subgroupsOf(be: WebGPUBackend): boolean {
  if (!be.isReady || !be.device.features.has('subgroups' as GPUFeatureName)) return false;
  const lo = Number(be.info.identity.subgroupMinSize ?? 0), hi = Number(be.info.identity.subgroupMaxSize ?? 0);
  return lo === SG && hi === SG && process.env.NBX_WEBGPU_SUBGROUPS !== '0';
}

/** The launch shape of one product: lanes per column, loads in flight per lane, workgroups cap (0: one per column block). */
export interface GemvShape { lpr: number; unroll: number; cap: number; /** plain products read A from memory instead of staging it */ global: boolean }

/**
 * The launch shape: one subgroup per column, four loads in flight. Call B's sweep on the H200 (bench/
 * webgpu_gemv.ts, the 1.1B step's five products) found wider columns slower on every product (the down
 * projection 5632→2048: 32 lanes 49 µs, 64 lanes 64 µs, 256 lanes 162 µs; gate/up: 66, 94, 265 µs): more
 * workgroups each staging their input cost more than the extra loads in flight gain. NBX_WEBGPU_GEMV
 * overrides it (a diagnostic).
 */
export function gemvShape(): GemvShape {
  const env = process.env.NBX_WEBGPU_GEMV;
  if (env) {
    const f = env.split(',');
    const [l, u, c] = f.map(Number);
    const lpr = [32, 64, 128, 256].includes(l!) ? l! : 32;
    return { lpr, unroll: u === 8 || u === 2 ? u : 4, cap: Number.isFinite(c) && c! > 0 ? c! : 0, global: f[3] === 'g' };
  }
  // plain products read their input from memory (L1) rather than staging it: call B's sweep (lm_head 8%, o_proj 4%)
  // and call C's decode A/B (+2.1%) both favoured it; the gated and normed products stage by construction
  return { lpr: SG, unroll: 4, cap: 0, global: true };
}

/** The compute value of the 16-byte word `w` (vec4<u32>) as two vec4<f32> halves (even, odd elements) or one. */
function unpack(d: DTypeName, w: string): string[] {
  if (d === 'float32') return [`bitcast<vec4<f32>>(${w})`];
  if (d === 'bfloat16') return [`bitcast<vec4<f32>>(${w} << vec4<u32>(16u))`, `bitcast<vec4<f32>>(${w} & vec4<u32>(0xffff0000u))`];
  // float16: unpack2x16float gives (lo, hi) of each word
  return [`vec4<f32>(unpack2x16float(${w}.x).x, unpack2x16float(${w}.y).x, unpack2x16float(${w}.z).x, unpack2x16float(${w}.w).x)`,
    `vec4<f32>(unpack2x16float(${w}.x).y, unpack2x16float(${w}.y).y, unpack2x16float(${w}.z).y, unpack2x16float(${w}.w).y)`];
}

/**
 * WGSL declaring `name` (vec4<u32>), the 16-byte word of dtype d holding the f32 values of the halves
 * `halves` (as unpack orders them) each rounded to the dtype, and `name_v0`, `name_v1` the rounded
 * values (vec4<f32>) themselves.
 */
function packWord(d: DTypeName, name: string, halves: string[]): string {
  const c = ['x', 'y', 'z', 'w'];
  const lets = halves.map((h, i) => `let ${name}_h${i} = ${h};`).join(' ');
  if (d === 'float32') return `${lets} let ${name} = bitcast<vec4<u32>>(${name}_h0); let ${name}_v0 = ${name}_h0;`;
  const bits = (i: number): string => `vec4<u32>(${c.map((q) => RW.bits(d, `${name}_h${i}.${q}`)).join(', ')})`;
  const val = (b: string): string => (d === 'bfloat16' ? `bitcast<vec4<f32>>(${b} << vec4<u32>(16u))`
    : `vec4<f32>(${c.map((q) => `unpack2x16float(${b}.${q}).x`).join(', ')})`);
  return `${lets} let ${name}_b0 = ${bits(0)}; let ${name}_b1 = ${bits(1)};
    let ${name} = ${name}_b0 | (${name}_b1 << vec4<u32>(16u)); let ${name}_v0 = ${val(`${name}_b0`)}; let ${name}_v1 = ${val(`${name}_b1`)};`;
}

/** Statements storing 16-byte word `w` at word index `i4` of writable binding `buf` (array<u32> or atomic). */
function storeWord(access: string, buf: string, i4: string, w: string): string {
  return ['x', 'y', 'z', 'w'].map((q, k) => (access === 'a' ? `atomicStore(&${buf}[4u * (${i4}) + ${k}u], ${w}.${q});` : `${buf}[4u * (${i4}) + ${k}u] = ${w}.${q};`)).join(' ');
}

/** The sum over the workgroup of f32 `v` (every invocation gets it): subgroupAdd and a few words, or a tree. */
function workgroupSum(sub: boolean, v: string): string {
  return sub ? `{ let t = subgroupAdd(${v}); if (lid % ${SG}u == 0u) { red[lid / ${SG}u] = t; }
    workgroupBarrier();
    var tot = 0.0f; for (var q = 0u; q < ${WG / SG}u; q++) { tot += red[q]; }
    ${v} = tot;
    workgroupBarrier(); }`
    : `{ red[lid] = ${v};
    workgroupBarrier();
    for (var s = ${WG / 2}u; s > 0u; s >>= 1u) { if (lid < s) { red[lid] += red[lid + s]; } workgroupBarrier(); }
    ${v} = red[0];
    workgroupBarrier(); }`;
}

/** What the kernel's input rows are: A itself, act(gate)·up of gate_up rows, or rms_norm(x + residual)·w. */
type Mode = { k: 'plain'; staged: boolean } | { k: 'gated'; gate: Expr } | { k: 'norm' };

/**
 * The kernel. Uniform words: [m, n, kv, lda4, ldb4, ldc, aoff4, boff4, coff, alpha, K, eps, roff4, nwoff4, soff4].
 * Bindings: b1 C; plain and gated: A (`ia`) and B (`ib`) as vec4 words; norm: b2 residualOut, then
 * x, residual, normWeight (`ia`, `ir`, `iw`) and B (`ib`), all read ones as vec4 words.
 * XW: the staged input's size in 16-byte words (M·kv rounded up; 0 when A is read from memory).
 */
function matvecProgram(d: DTypeName, M: number, sh: GemvShape, sub: boolean, access: string, mode: Mode, XW: number,
  ia: number, ib: number, ir = 0, iw = 0): Program {
  const { lpr: LPR, unroll: UN } = sh;
  const modeKey = mode.k === 'gated' ? `gated:${mode.gate.key}` : mode.k === 'plain' ? `plain${mode.staged ? 's' : 'g'}` : 'norm';
  // prefetch only where something is staged first (NBX_WEBGPU_GEMV_PREFETCH=0: never; a diagnostic)
  const pre = XW > 0 && process.env.NBX_WEBGPU_GEMV_PREFETCH !== '0';
  const key = `gemv|${d}|${modeKey}|${M}|${LPR},${UN}|${sub}|${XW}|${pre}|${access}|${ia}${ib}${ir}${iw}`;
  return program(key, access, 15, () => {
    const R = WG / LPR, SUBS = LPR / SG;
    const accs = [...Array(M).keys()];
    const staged = XW > 0;
    const xword = (i: number, c: string): string => (staged ? `xs[${i}u * kv + ${c}]` : `b${ia}[aoff + ${i}u * lda + ${c}]`);
    const term = (c: string, wv: string): string => {
      const wp = unpack(d, wv);
      return accs.map((i) => {
        const xp = unpack(d, `xw${i}`);
        return `{ let xw${i} = ${xword(i, c)}; acc${i} += ${wp.map((w, h) => `dot(${w}, ${xp[h]})`).join(' + ')}; }`;
      }).join(' ');
    };
    // ---- the staging of the input rows ----
    let stage = '';
    let fns = '';
    if (mode.k === 'plain' && staged) {
      stage = `for (var t = lid; t < m * kv; t += ${WG}u) { xs[t] = b${ia}[aoff + (t / kv) * lda + t % kv]; }
  workgroupBarrier();`;
    } else if (mode.k === 'gated') {
      const [stmts, res] = RW.render(mode.gate, (slot) => (slot === 0 ? 'g' : 'u'), () => { throw new Error('gated activation: no parameters'); });
      fns += `fn nbx_gated(g: f32, u: f32) -> f32 {
  ${stmts}
  return ${res};
}
fn nbx_gated4(g: vec4<f32>, u: vec4<f32>) -> vec4<f32> {
  return vec4<f32>(nbx_gated(g.x, u.x), nbx_gated(g.y, u.y), nbx_gated(g.z, u.z), nbx_gated(g.w, u.w));
}\n`;
      const gp = unpack(d, 'gw'), up = unpack(d, 'uw');
      stage = `for (var t = lid; t < m * kv; t += ${WG}u) {
    let r = t / kv; let c = t % kv;
    let gw = b${ia}[aoff + r * lda + c]; let uw = b${ia}[aoff + r * lda + kv + c];
    ${packWord(d, 'xw', gp.map((g, h) => `nbx_gated4(${g}, ${up[h]})`))}
    xs[t] = xw;
  }
  workgroupBarrier();`;
    } else if (mode.k === 'norm') {
      // per row: s = x + residual rounded to the dtype (workgroup 0 stores it as residualOut), its mean
      // square (f32, fixed order), then s·rsqrt(ms + eps)·w rounded to the dtype, all in 16-byte words
      const xp = unpack(d, 'xv'), rp = unpack(d, 'rv');
      // the norm weight's word of this invocation's first position, loaded with x and residual (one load round less)
      stage = `let nwFirst = b${iw}[nwoff + min(lid, kv - 1u)];\n  ` + accs.map((i) => `if (${i}u < m) {
    var ss = 0.0f;
    for (var t = lid; t < kv; t += ${WG}u) {
      let xv = b${ia}[aoff + ${i}u * kv + t]; let rv = b${ir}[roff + ${i}u * kv + t];
      ${packWord(d, 'sw', xp.map((x, h) => `${x} + ${rp[h]}`))}
      if (first) { ${storeWord(access[1]!, 'b2', `soff + ${i}u * kv + t`, 'sw')} }
      xs[${i}u * kv + t] = sw;
      ss += ${xp.map((_, h) => `dot(sw_v${h}, sw_v${h})`).join(' + ')};
    }
    ${workgroupSum(sub, 'ss')}
    let inv = inverseSqrt(ss / f32(K) + eps);
    for (var t = lid; t < kv; t += ${WG}u) {
      let sv = xs[${i}u * kv + t];
      var wv: vec4<u32>; if (t == lid) { wv = nwFirst; } else { wv = b${iw}[nwoff + t]; }
      ${packWord(d, 'nw', unpack(d, 'sv').map((s, h) => `${s} * inv * ${unpack(d, 'wv')[h]}`))}
      xs[${i}u * kv + t] = nw;
    }
  }`).join('\n  ') + '\n  workgroupBarrier();';
    }
    // ---- the reduction of a column's lanes ----
    const reduce = sub
      ? (SUBS === 1
        ? accs.map((i) => `acc${i} = subgroupAdd(acc${i});`).join(' ')
        : `${accs.map((i) => `acc${i} = subgroupAdd(acc${i}); if (lid % ${SG}u == 0u) { part[${i}u * ${WG / SG}u + lid / ${SG}u] = acc${i}; }`).join('\n    ')}
    workgroupBarrier();
    if (lane == 0u) { ${accs.map((i) => `acc${i} = 0.0f; for (var q = 0u; q < ${SUBS}u; q++) { acc${i} += part[${i}u * ${WG / SG}u + lid / ${SG}u + q]; }`).join(' ')} }
    workgroupBarrier();`)
      : accs.map((i) => `red[lid] = acc${i};
    workgroupBarrier();
    for (var s = ${LPR / 2}u; s > 0u; s >>= 1u) { if (lane < s) { red[lid] += red[lid + s]; } workgroupBarrier(); }
    acc${i} = red[lid];
    workgroupBarrier();`).join('\n    ');
    const stores = accs.map((i) => `if (${i}u < m) { ${storeOut(d, 'float32', `coff + ${i}u * ldc + j`, `alpha * acc${i}`)} }`).join('\n      ');
    const loads = [...Array(UN).keys()].map((q) => `let w${q} = b${ib}[brow + c${q ? ` + ${q * LPR}u` : ''}];`).join(' ');
    const terms = [...Array(UN).keys()].map((q) => term(`c${q ? ` + ${q * LPR}u` : ''}`, `w${q}`)).join('\n        ');
    const needRed = !sub || mode.k === 'norm';
    fns += [
      needRed ? `var<workgroup> red: array<f32, ${sub ? WG / SG : WG}>;` : '',
      sub && SUBS > 1 ? `var<workgroup> part: array<f32, ${M * (WG / SG)}>;` : '',
      staged ? `var<workgroup> xs: array<vec4<u32>, ${XW}>;` : '',
    ].join('\n');
    const entryCode = `@compute @workgroup_size(${WG})
fn main(@builtin(workgroup_id) wid: vec3u, @builtin(num_workgroups) nwg: vec3u, @builtin(local_invocation_index) lid: u32) {
  let m = ${U(0)}; let n = ${U(1)}; let kv = ${U(2)}; let lda = ${U(3)}; let ldb = ${U(4)}; let ldc = ${U(5)};
  let aoff = ${U(6)}; let boff = ${U(7)}; let coff = ${U(8)}; let alpha = bitcast<f32>(${U(9)});
  let K = ${U(10)}; let eps = bitcast<f32>(${U(11)}); let roff = ${U(12)}; let nwoff = ${U(13)}; let soff = ${U(14)};
  let g0 = wid.y * nwg.x + wid.x;
  let first = g0 == 0u;
  let lane = lid % ${LPR}u;
  ${pre ? `// the first block's first ${UN} weight words, loaded before the staging so it runs under their latency
  // (indices clamped into the weight; only those inside the row are used)
  let jf = min(g0 * ${R}u + lid / ${LPR}u, max(n, 1u) - 1u);
  ${[...Array(UN).keys()].map((q) => `let pf${q} = b${ib}[boff + jf * ldb + min(lane + ${q * LPR}u, kv - 1u)];`).join(' ')}` : ''}
  ${stage}
  let blocks = (n + ${R - 1}u) / ${R}u;
  for (var blk = g0; blk < blocks; blk += nwg.x * nwg.y) {
    let j = blk * ${R}u + lid / ${LPR}u;
    ${accs.map((i) => `var acc${i} = 0.0f;`).join(' ')}
    if (j < n) {
      let brow = boff + j * ldb;
      var c = lane;
      ${pre ? `if (blk == g0) {
        ${[...Array(UN).keys()].map((q) => `if (lane + ${q * LPR}u < kv) { ${term(`lane + ${q * LPR}u`, `pf${q}`)} }`).join('\n        ')}
        c = lane + ${UN * LPR}u;
      }` : ''}
      for (; c + ${(UN - 1) * LPR}u < kv; c += ${UN * LPR}u) {
        ${loads}
        ${terms}
      }
      for (; c < kv; c += ${LPR}u) { let w0 = b${ib}[brow + c]; ${term('c', 'w0')} }
    }
    ${reduce}
    if (lane == 0u && j < n) {
      ${stores}
    }
  }
}`;
    const src = module(15, access, WG, '', fns, entryCode);
    return sub ? `enable subgroups;\ndiagnostic(off, subgroup_uniformity);\n${src}` : src;
  });
}

/** Workgroups for `blocks` column blocks under cap (0: one each), as a grid within the per-dimension limit. */
function dispatchBlocks(be: WebGPUBackend, prog: Program, bufs: WGBuffer[], u: Uint32Array, blocks: number, cap: number): void {
  const groups = cap > 0 ? Math.min(blocks, cap) : blocks;
  const maxDim = be.isReady ? be.info.limits.maxComputeWorkgroupsPerDimension ?? 65535 : 65535;
  const x = Math.min(groups, maxDim), y = Math.ceil(groups / x);
  be.dispatchGroups(prog, bufs, u, x, y, 1);
}

/** Whether the device takes a workgroup of WG invocations and `bytes` of workgroup memory. */
function fits(be: WebGPUBackend, bytes: number): boolean {
  if (!be.isReady) return true;
  const l = be.info.limits;
  return Math.min(l.maxComputeInvocationsPerWorkgroup ?? 256, l.maxComputeWorkgroupSizeX ?? 256) >= WG && (l.maxComputeWorkgroupStorageSize ?? 16384) >= bytes;
}

/** Padded row count (accumulators per invocation). */
const rowsOf = (m: number): number => (m <= 1 ? 1 : m <= 2 ? 2 : m <= 4 ? 4 : 8);
/** The staged input's size in 16-byte words (a multiple of 64), or 0 past XS_MAX_BYTES. */
const stagedWords = (m: number, kv: number): number => (16 * m * kv <= XS_MAX_BYTES ? Math.ceil((m * kv) / 64) * 64 : 0);
/** Workgroup bytes besides the staged input (reduction words). */
const REST_BYTES = 4 * WG + 4 * 8 * (WG / SG);

function uniforms(v: Partial<Record<'m' | 'n' | 'kv' | 'lda' | 'ldb' | 'ldc' | 'aoff' | 'boff' | 'coff' | 'alpha' | 'K' | 'eps' | 'roff' | 'nwoff' | 'soff', number>>): Uint32Array {
  const order = ['m', 'n', 'kv', 'lda', 'ldb', 'ldc', 'aoff', 'boff', 'coff', 'alpha', 'K', 'eps', 'roff', 'nwoff', 'soff'] as const;
  return new Uint32Array(order.map((k) => v[k] ?? 0));
}

/**
 * Runs p on the matrix-vector kernel when it applies (see the header) and returns true; false leaves
 * it to the tiled GEMM. With `gate`, A is gate_up rows [m, 2k] and the input is act(gate)·up (staged;
 * false when it does not fit the workgroup memory).
 */
export function gemvRun(be: WebGPUBackend, p: GemmParams, gate: Expr | null = null): boolean {
  const d = p.c.dtype;
  if ((p.batch ?? 1) !== 1 || p.m < 1 || p.m > GEMV_MAX_ROWS || p.transA || !p.transB || p.beta !== 0 || p.bias) return false;
  if (p.a.dtype !== d || p.b.dtype !== d || (d !== 'float32' && d !== 'bfloat16' && d !== 'float16')) return false;
  const E = 16 / DTYPES[d].itemsize;
  if (p.k % E || p.b.offset % E || p.ldb % E || p.a.offset % E || ((p.m > 1 || gate) && p.lda % E) || p.k < E) return false;
  const kv = p.k / E, M = rowsOf(p.m);
  const sh = gemvShape();
  const XW = gate || !sh.global ? stagedWords(M, kv) : 0;
  if (gate && !XW) return false;
  if (!fits(be, 16 * XW + REST_BYTES)) return false;
  const sub = subgroupsOf(be);
  const { bufs, idx, temp } = bindings(be, p.c.buf as WGBuffer, [p.a.buf as WGBuffer, p.b.buf as WGBuffer]);
  const access = `${outAccess(d)}${'v'.repeat(bufs.length - 1)}`;
  const mode: Mode = gate ? { k: 'gated', gate } : { k: 'plain', staged: XW > 0 };
  const prog = matvecProgram(d, M, sh, sub, access, mode, XW, idx[0]!, idx[1]!);
  const u = uniforms({ m: p.m, n: p.n, kv, lda: (p.m > 1 || gate ? p.lda : p.k) / E, ldb: p.ldb / E, ldc: p.ldc, aoff: p.a.offset / E, boff: p.b.offset / E, coff: p.c.offset, alpha: f32w(p.alpha) });
  dispatchBlocks(be, prog, bufs, u, Math.ceil(p.n / (WG / sh.lpr)), sh.cap);
  if (temp) be.free(temp);
  return true;
}

/**
 * nbx.llm.gated_linear's kernel (contract: GatedGemvParams): out = act(gate)·up @ Wᵀ for gate_up rows
 * [rows, 2K], the activation computed as the workgroup stages its input (one dispatch instead of the
 * activation's and the product's). False (the op's composite runs) with a bias, more rows than
 * GEMV_MAX_ROWS, operands the 16-byte words do not fit, or rows × K past the workgroup memory.
 */
export function gatedGemvRun(be: WebGPUBackend, p: GatedGemvParams): boolean {
  if (p.bias || p.rows > GEMV_MAX_ROWS || p.gateUp.strides[1] !== 1 || p.weight.strides[1] !== 1) return false;
  return gemvRun(be, {
    transA: false, transB: true, m: p.rows, n: p.n, k: p.k, alpha: 1, beta: 0,
    a: p.gateUp, lda: p.gateUp.strides[0]!, b: p.weight, ldb: p.weight.strides[0]!, c: p.out, ldc: p.n,
  }, p.gate);
}

/**
 * nbx.llm.add_rms_norm_linear's kernel (contract: NormGemvParams): every workgroup stages
 * rms_norm(x + residual)·normWeight (workgroup 0 stores x + residual as residualOut), then the product.
 * The norm is recomputed by each workgroup (rows × K elements from L2, in 16-byte words) instead of
 * costing a dispatch and a barrier of its own. False (the op's composite runs) with a bias, more rows
 * than GEMV_MAX_ROWS, rows × K past the workgroup memory, or operands whose offsets are not whole
 * 16-byte words.
 */
export function normGemvRun(be: WebGPUBackend, p: NormGemvParams): boolean {
  const d = p.out.dtype;
  if (p.bias || p.rows < 1 || p.rows > GEMV_MAX_ROWS || (d !== 'float32' && d !== 'bfloat16' && d !== 'float16')) return false;
  const E = 16 / DTYPES[d].itemsize, K = p.k;
  if (K % E || K < E || p.weight.offset % E || p.weight.strides[1] !== 1 || p.weight.strides[0]! % E) return false;
  if (p.x.offset % E || p.residual.offset % E || p.normWeight.offset % E || p.residualOut.offset % E) return false;
  const kv = K / E, M = rowsOf(p.rows);
  const XW = stagedWords(M, kv);
  if (!XW || !fits(be, 16 * XW + REST_BYTES)) return false;
  const W = p.weight.buf as WGBuffer, reads = [p.x.buf, p.residual.buf, p.normWeight.buf] as WGBuffer[];
  if (reads.includes(W)) return false; // keeps the weight's binding its own (the kernel's layout)
  const out = p.out.buf as WGBuffer, res = p.residualOut.buf as WGBuffer;
  if ([...reads, W].some((b) => b === out || b === res)) return false;
  const bufs: WGBuffer[] = [out, res];
  for (const b of reads) if (!bufs.includes(b)) bufs.push(b);
  bufs.push(W);
  const at = (b: WGBuffer): number => bufs.indexOf(b) + 1;
  const access = `${outAccess(d)}${outAccess(d)}${'v'.repeat(bufs.length - 2)}`;
  const sub = subgroupsOf(be);
  const sh = gemvShape();
  const prog = matvecProgram(d, M, sh, sub, access, { k: 'norm' }, XW, at(p.x.buf as WGBuffer), bufs.length, at(p.residual.buf as WGBuffer), at(p.normWeight.buf as WGBuffer));
  const u = uniforms({ m: p.rows, n: p.n, kv, ldb: p.weight.strides[0]! / E, ldc: p.n, aoff: p.x.offset / E, boff: p.weight.offset / E, coff: p.out.offset, alpha: f32w(1),
    K, eps: f32w(p.eps), roff: p.residual.offset / E, nwoff: p.normWeight.offset / E, soff: p.residualOut.offset / E });
  dispatchBlocks(be, prog, bufs, u, Math.ceil(p.n / (WG / sh.lpr)), sh.cap);
  return true;
}

/**
 * WGSL of the matrix-vector kernels over the launch shapes, modes and dtypes (for compile checks, e.g. the
 * subgroup variants on Dawn's null backend where no adapter here has subgroups). `gate`: a gated
 * activation's expression (the op layer's, so the checked source is the one that runs).
 */
export function allGemvSources(sub: boolean, gate: (d: DTypeName) => Expr): { key: string; code: string }[] {
  const out: { key: string; code: string }[] = [];
  for (const d of ['float32', 'bfloat16', 'float16'] as DTypeName[]) {
    const o = outAccess(d);
    for (const M of [1, 2, 8]) {
      for (const sh of [{ lpr: 32, unroll: 4 }, { lpr: 64, unroll: 8 }, { lpr: 256, unroll: 2 }]) {
        const s: GemvShape = { ...sh, cap: 0, global: false };
        for (const p of [
          matvecProgram(d, M, s, sub, `${o}vv`, { k: 'plain', staged: true }, 64 * M, 2, 3),
          matvecProgram(d, M, s, sub, `${o}v`, { k: 'plain', staged: false }, 0, 2, 2),
          matvecProgram(d, M, s, sub, `${o}vv`, { k: 'gated', gate: gate(d) }, 64 * M, 2, 3),
          matvecProgram(d, M, s, sub, `${o}${o}vvvv`, { k: 'norm' }, 64 * M, 3, 6, 4, 5),
        ]) out.push({ key: p.key, code: p.source() });
      }
    }
  }
  return out;
}
