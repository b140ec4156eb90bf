// WebGPU's matrix-vector path of gemm (contract: src/kernels/gemm.ts) for a decode step's products:
// C[m, n] = alpha·A[m, k]·B[n, k]ᵀ with few rows m (a linear layer's x·Wᵀ at batch ≤ 8), the weight
// B read once, row by row, in 16-byte words. The tiled GEMM spends a 64-row tile on one useful row and
// stages B through workgroup memory; a decode step is bound by streaming the weights, so here a group
// of 32 invocations owns one output column: each reads 16-byte words of its weight row (8 bfloat16 or
// float16, 4 float32) and of the m input rows, accumulates in float32, and the 32 partial sums are
// added by subgroupAdd where the device has 32-wide subgroups, else by a fixed-order tree in workgroup
// memory (both orders are fixed, so results are reproducible). The loads are unrolled by four so each
// invocation has four words in flight. Half types are unpacked by shifts (bfloat16: the high half of
// an f32) or unpack2x16float, so no shader-f16 is needed.
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
/** Invocations per output column. */
const G = 32;

/** Whether the device's subgroups are exactly G wide (subgroupAdd then reduces one column's group). */
export function subgroupsOf(be: WebGPUBackend): boolean {
  if (!be.isReady || !be.device.features.has('subgroups' as GPUFeatureName)) return false;
  const lo = Number(be.info.identity.subgroupMinSize ?? 0), hi = Number(be.info.identity.subgroupMaxSize ?? 0);
  return lo === G && hi === G && process.env.NBX_WEBGPU_SUBGROUPS !== '0';
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
 * uniform: [m, n, kv, lda4, ldb4, ldc, aoff4, boff4, coff, alpha] (kv, lda4, ldb4, aoff4, boff4 in
 * 16-byte words). Bindings: b1 C, then A and B as vec4<u32> arrays (`ia`, `ib`: their binding numbers).
 */
/**
 * The product part of a matrix-vector kernel: lanes of G stride row j's 16-byte words of b{ib} (four in
 * flight), `term` adding one word's products into acc0 … acc{M-1}, then the lanes' sums meet by
 * subgroupAdd or, without subgroups, a tree in the workgroup array `red`.
 */
function rowDots(R: number, accs: number[], ib: number, sub: boolean, term: (c: string, wv: string) => string): string {
  const reduce = sub
    ? accs.map((i) => `acc${i} = subgroupAdd(acc${i});`).join(' ')
    : accs.map((i) => `red[lid] = acc${i};
  workgroupBarrier();
  for (var s = ${G / 2}u; s > 0u; s >>= 1u) { if (lane < s) { red[lid] += red[lid + s]; } workgroupBarrier(); }
  acc${i} = red[lid];
  workgroupBarrier();`).join('\n  ');
  return `let lane = lid % ${G}u;
  let j = (wid.y * nwg.x + wid.x) * ${R}u + lid / ${G}u;
  ${accs.map((i) => `var acc${i} = 0.0f;`).join(' ')}
  if (j < n) {
    let brow = boff + j * ldb;
    var c = lane;
    for (; c + ${3 * G}u < kv; c += ${4 * G}u) {
      let w0 = b${ib}[brow + c]; let w1 = b${ib}[brow + c + ${G}u]; let w2 = b${ib}[brow + c + ${2 * G}u]; let w3 = b${ib}[brow + c + ${3 * G}u];
      ${[0, 1, 2, 3].map((q) => term(`c + ${q * G}u`, `w${q}`)).join('\n      ')}
    }
    for (; c < kv; c += ${G}u) { let w0 = b${ib}[brow + c]; ${term('c', 'w0')} }
  }
  ${reduce}`;
}

function gemvProgram(d: DTypeName, M: number, wg: number, sub: boolean, access: string, ia: number, ib: number, gate: Expr | null = null): Program {
  const key = `gemv|${d}|${M}|${wg}|${sub}|${access}|${ia}${ib}${gate ? `|gated:${gate.key}` : ''}`;
  return program(key, access, 10, () => {
    const R = wg / G;
    const accs = [...Array(M).keys()];
    // gated (nbx.llm.gated_linear's kernel): A is the gate_up rows, the input word at c is act(gate)·up of
    // the gate word at c and the up word kv words further, rounded to the dtype as gated_activation stores it
    const term = (c: string, wv: string): string => {
      const wp = unpack(d, wv);
      return accs.map((i) => {
        const xw = `b${ia}[aoff + ${i}u * lda + ${c}]`;
        const xp = gate
          ? unpack(d, `xw${i}`).map((g, h) => `nbx_gated4(${g}, ${unpack(d, `uw${i}`)[h]})`)
          : unpack(d, `xw${i}`);
        const up = gate ? ` let uw${i} = b${ia}[aoff + ${i}u * lda + kv + ${c}];` : '';
        return `{ let xw${i} = ${xw};${up} acc${i} += ${wp.map((w, h) => `dot(${w}, ${xp[h]})`).join(' + ')}; }`;
      }).join(' ');
    };
    let gatedFns = '';
    if (gate) {
      const [stmts, res] = RW.render(gate, (slot) => (slot === 0 ? 'g' : 'u'), () => { throw new Error('gated activation: no parameters'); });
      gatedFns = `fn nbx_gated(g: f32, u: f32) -> f32 {
  ${stmts}
  return ${res};
}
fn nbx_gated4(g: vec4<f32>, u: vec4<f32>) -> vec4<f32> {
  return vec4<f32>(nbx_gated(g.x, u.x), nbx_gated(g.y, u.y), nbx_gated(g.z, u.z), nbx_gated(g.w, u.w));
}`;
    }
    const stores = accs.map((i) => `if (${i}u < m) { ${storeOut(d, 'float32', `coff + ${i}u * ldc + j`, `alpha * acc${i}`)} }`).join('\n    ');
    const fns = `${gatedFns}\n${sub ? '' : `var<workgroup> red: array<f32, ${wg}>;`}`;
    const entryCode = `@compute @workgroup_size(${wg})
fn main(@builtin(workgroup_id) wid: vec3u, @builtin(num_workgroups) nwg: vec3u, @builtin(local_invocation_index) lid: u32) {
  let m = ${U(0)}; let n = ${U(1)}; let kv = ${U(2)}; let lda = ${U(3)}; let ldb = ${U(4)}; let ldc = ${U(5)};
  let aoff = ${U(6)}; let boff = ${U(7)}; let coff = ${U(8)}; let alpha = bitcast<f32>(${U(9)});
  ${rowDots(R, accs, ib, sub, term)}
  if (lane == 0u && j < n) {
    ${stores}
  }
}`;
    const src = module(10, access, wg, '', fns, entryCode);
    return sub ? `enable subgroups;\ndiagnostic(off, subgroup_uniformity);\n${src}` : src;
  });
}

/**
 * Runs p on the matrix-vector kernel when it applies (see the header) and returns true; false leaves
 * it to the tiled GEMM.
 */
export function gemvRun(be: WebGPUBackend, p: GemmParams, gate: Expr | null = null): boolean {
  const d = p.c.dtype;
  if ((p.batch ?? 1) !== 1 || p.m < 1 || p.m > GEMV_MAX_ROWS || p.transA || !p.transB || p.beta !== 0 || p.bias) return false;
  if (p.a.dtype !== d || p.b.dtype !== d || (d !== 'float32' && d !== 'bfloat16' && d !== 'float16')) return false;
  const E = 16 / DTYPES[d].itemsize;
  if (p.k % E || p.b.offset % E || p.ldb % E || p.a.offset % E || ((p.m > 1 || gate) && p.lda % E) || p.k < E) return false;
  const maxWg = be.isReady ? Math.min(be.info.limits.maxComputeInvocationsPerWorkgroup ?? 256, be.info.limits.maxComputeWorkgroupSizeX ?? 256, 256) : 256;
  const wg = Math.max(G, 2 ** Math.floor(Math.log2(maxWg)));
  const sub = subgroupsOf(be);
  const { bufs, idx, temp } = bindings(be, p.c.buf as WGBuffer, [p.a.buf as WGBuffer, p.b.buf as WGBuffer]);
  const access = `${outAccess(d)}${'v'.repeat(bufs.length - 1)}`;
  const M = p.m <= 1 ? 1 : p.m <= 2 ? 2 : p.m <= 4 ? 4 : 8;
  const prog = gemvProgram(d, M, wg, sub, access, idx[0]!, idx[1]!, gate);
  const u = new Uint32Array(10);
  u.set([p.m, p.n, p.k / E, (p.m > 1 || gate ? p.lda : p.k) / E, p.ldb / E, p.ldc, p.a.offset / E, p.b.offset / E, p.c.offset, f32w(p.alpha)]);
  const groups = Math.ceil(p.n / (wg / G));
  const maxDim = be.isReady ? be.info.limits.maxComputeWorkgroupsPerDimension ?? 65535 : 65535;
  const x = Math.min(groups, maxDim), y = Math.ceil(groups / x);
  be.dispatchGroups(prog, bufs, u, x, y, 1);
  if (temp) be.free(temp);
  return true;
}

/**
 * nbx.llm.gated_linear's kernel (contract: GatedGemvParams): out = act(gate)·up @ Wᵀ for gate_up rows
 * [rows, 2K], the activation computed as the matrix-vector kernel loads its input (one dispatch instead
 * of the activation's and the product's). False (the op's composite runs) with a bias, more rows than
 * GEMV_MAX_ROWS, or operands the 16-byte words do not fit.
 */
export function gatedGemvRun(be: WebGPUBackend, p: GatedGemvParams): boolean {
  if (p.bias || p.rows > GEMV_MAX_ROWS || p.gateUp.strides[1] !== 1 || p.weight.strides[1] !== 1) return false;
  return gemvRun(be, {
    transA: false, transB: true, m: p.rows, n: p.n, k: p.k, alpha: 1, beta: 0,
    a: p.gateUp, lda: p.gateUp.strides[0]!, b: p.weight, ldb: p.weight.strides[0]!, c: p.out, ldc: p.n,
  }, p.gate);
}

/** Floats of workgroup memory the normalized rows of norm_gemv may take (rows × K). */
const NORM_MAX_FLOATS = 4096;

/**
 * nbx.llm.add_rms_norm_linear's kernel: every workgroup first forms s = x + residual (rounded to the
 * dtype; workgroup 0 stores it as residualOut), its rms by a fixed-order tree, and the normalized row
 * rms_norm(s)·normWeight rounded to the dtype, in workgroup memory (ordered to match the weight words'
 * even/odd halves); then the matrix-vector product reads its input from there. The norm is recomputed by
 * each workgroup (K·rows elements from L2) instead of costing a dispatch and a barrier of its own.
 * uniform: [m, n, kv, K, ldb4, ldc, xoff, boff4, coff, roff, nwoff, soff, eps]. Bindings: b1 out,
 * b2 residualOut, then x, residual, normWeight (`ix`, `ir`, `iw`), the weight as vec4 words (`ib`).
 */
function normGemvProgram(d: DTypeName, M: number, wg: number, sub: boolean, access: string, ix: number, ir: number, iw: number, ib: number): Program {
  const key = `gemv_norm|${d}|${M}|${wg}|${sub}|${access}|${ix}${ir}${iw}${ib}`;
  return program(key, access, 13, () => {
    const R = wg / G, E = 16 / DTYPES[d].itemsize;
    const accs = [...Array(M).keys()];
    const ld = (b: number, idx: string): string => RW.load(d, `b${b}`, idx);
    // element e of a row sits at position perm(e) of its row in xs: for 8-element words, the even elements of word c at 8c..8c+3, the odd at 8c+4..8c+7
    const perm = E === 8 ? '(e / 8u) * 8u + (e % 2u) * 4u + (e % 8u) / 2u' : 'e';
    const term = (c: string, wv: string): string => {
      const wp = unpack(d, wv);
      return accs.map((i) => `acc${i} += ${wp.map((w, h) => `dot(${w}, xs[${i}u * K4 + ${E === 8 ? `2u * (${c}) + ${h}u` : c}])`).join(' + ')};`).join(' ');
    };
    const norms = accs.map((i) => `{
    var ss = 0.0f;
    if (${i}u < m) {
      for (var e = lid; e < K; e += ${wg}u) {
        let s = ${RW.castExpr('float32', d, `${ld(ix, `xoff + ${i}u * K + e`)} + ${ld(ir, `roff + ${i}u * K + e`)}`)};
        if (first) { ${storeOut2(d, 'b2', `soff + ${i}u * K + e`, 's')} }
        let p = ${i}u * K + ${perm};
        xs[p / 4u][p % 4u] = s;
        ss += s * s;
      }
    }
    red[lid] = ss;
    workgroupBarrier();
    for (var s = ${wg / 2}u; s > 0u; s >>= 1u) { if (lid < s) { red[lid] += red[lid + s]; } workgroupBarrier(); }
    let inv = inverseSqrt(red[0] / f32(K) + eps);
    workgroupBarrier();
    if (${i}u < m) {
      for (var e = lid; e < K; e += ${wg}u) {
        let p = ${i}u * K + ${perm};
        xs[p / 4u][p % 4u] = ${RW.castExpr('float32', d, `xs[p / 4u][p % 4u] * inv * ${ld(iw, 'nwoff + e')}`)};
      }
    }
  }`).join('\n  ');
    const stores = accs.map((i) => `if (${i}u < m) { ${storeOut(d, 'float32', `coff + ${i}u * ldc + j`, `acc${i}`)} }`).join('\n    ');
    const fns = `var<workgroup> red: array<f32, ${wg}>;
var<workgroup> xs: array<vec4<f32>, ${NORM_MAX_FLOATS / 4}>;`;
    const entryCode = `@compute @workgroup_size(${wg})
fn main(@builtin(workgroup_id) wid: vec3u, @builtin(num_workgroups) nwg: vec3u, @builtin(local_invocation_index) lid: u32) {
  let m = ${U(0)}; let n = ${U(1)}; let kv = ${U(2)}; let K = ${U(3)}; let ldb = ${U(4)}; let ldc = ${U(5)};
  let xoff = ${U(6)}; let boff = ${U(7)}; let coff = ${U(8)}; let roff = ${U(9)}; let nwoff = ${U(10)}; let soff = ${U(11)};
  let eps = bitcast<f32>(${U(12)});
  let K4 = K / 4u;
  let first = wid.x == 0u && wid.y == 0u;
  ${norms}
  workgroupBarrier();
  ${rowDots(R, accs, ib, sub, term)}
  if (lane == 0u && j < n) {
    ${stores}
  }
}`;
    const src = module(13, access, wg, '', fns, entryCode);
    return sub ? `enable subgroups;\ndiagnostic(off, subgroup_uniformity);\n${src}` : src;
  });
}

/** Statements storing f32 `v` as element `idx` of written binding `buf` (atomic for packed half types). */
function storeOut2(d: DTypeName, buf: string, idx: string, v: string): string {
  return storeOut(d, 'float32', idx, v).replace(/\bb1\b/g, buf);
}

/**
 * nbx.llm.add_rms_norm_linear's kernel (contract: NormGemvParams). False (the op's composite runs)
 * with a bias, more rows than GEMV_MAX_ROWS, rows × K past NORM_MAX_FLOATS, or operands the 16-byte
 * words do not fit.
 */
export function normGemvRun(be: WebGPUBackend, p: NormGemvParams): boolean {
  const d = p.out.dtype;
  if (p.bias || p.rows < 1 || p.rows > GEMV_MAX_ROWS || (d !== 'float32' && d !== 'bfloat16' && d !== 'float16')) return false;
  const E = 16 / DTYPES[d].itemsize, K = p.k;
  const M = p.rows <= 1 ? 1 : p.rows <= 2 ? 2 : p.rows <= 4 ? 4 : 8;
  if (K % E || K < E || p.weight.offset % E || p.weight.strides[1] !== 1 || p.weight.strides[0]! % E || M * K > NORM_MAX_FLOATS) return false;
  const ws = be.isReady ? be.info.limits.maxComputeWorkgroupStorageSize ?? 16384 : 16384;
  const maxWg = be.isReady ? Math.min(be.info.limits.maxComputeInvocationsPerWorkgroup ?? 256, be.info.limits.maxComputeWorkgroupSizeX ?? 256, 256) : 256;
  const wg = Math.max(G, 2 ** Math.floor(Math.log2(maxWg)));
  if (NORM_MAX_FLOATS * 4 + wg * 4 > ws) return false;
  const W = p.weight.buf as WGBuffer, reads = [p.x.buf, p.residual.buf, p.normWeight.buf] as WGBuffer[];
  if (reads.includes(W)) return false; // one binding cannot be both u32 words and 16-byte words
  const out = p.out.buf as WGBuffer, res = p.residualOut.buf as WGBuffer;
  if ([...reads, W].some((b) => b === out || b === res)) return false;
  const bufs: WGBuffer[] = [out, res];
  for (const b of reads) if (!bufs.includes(b)) bufs.push(b);
  bufs.push(W);
  const at = (b: WGBuffer): number => bufs.indexOf(b) + 1;
  const access = `${outAccess(d)}${outAccess(d)}${'r'.repeat(bufs.length - 3)}v`;
  const sub = subgroupsOf(be);
  const prog = normGemvProgram(d, M, wg, sub, access, at(p.x.buf as WGBuffer), at(p.residual.buf as WGBuffer), at(p.normWeight.buf as WGBuffer), bufs.length);
  const u = new Uint32Array([p.rows, p.n, K / E, K, p.weight.strides[0]! / E, p.n, p.x.offset, p.weight.offset / E, p.out.offset,
    p.residual.offset, p.normWeight.offset, p.residualOut.offset, f32w(p.eps)]);
  const groups = Math.ceil(p.n / (wg / G));
  const maxDim = be.isReady ? be.info.limits.maxComputeWorkgroupsPerDimension ?? 65535 : 65535;
  const x = Math.min(groups, maxDim), y = Math.ceil(groups / x);
  be.dispatchGroups(prog, bufs, u, x, y, 1);
  return true;
}
