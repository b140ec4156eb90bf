// WebGPU's LLM kernels (contracts in src/kernels/llm.ts): a decode step's fused passes, so that a
// replayed step (runtime/graph.ts) is a few dispatches a layer rather than dozens; each dependent
// dispatch costs a barrier and a ramp on the GPU even when the host cost is gone.
// - fused_add_rms_norm: a workgroup per row; the sum x + residual rounded to the dtype (as `add`), its
//   mean square by a fixed-order tree in f32, then x·rsqrt(ms + eps)·weight rounded once.
// - rotary_cache: queries rotated into their output, keys rotated and values copied into the caches at
//   the device-held index (index_copy_ along the sequence), in one dispatch of a thread per element;
//   an index outside [0, S) writes nothing and is raised through the backend's check (an IndexError at
//   the next read; deferred by a graph capture). Its record is a flag word per position, rewritten by
//   every run, so it needs no clear before the kernel (one command less a layer in a replayed step).
// - gated_gemv: the matrix-vector kernel (gemv.ts) with act(gate)·up computed as it loads its input.
// - norm_gemv: the matrix-vector kernel with x + residual, its RMS norm and weight formed by each
//   workgroup in workgroup memory first (gemv.ts).
// - decode_attention: a workgroup per query row: scores q·k·scale in f32 (mask and causal applied) in
//   workgroup memory a chunk of keys at a time, the running max and sum of the safe softmax (rescaled
//   from chunk to chunk), and Σ p·v with an invocation per output channel (coalesced value rows), the
//   keys split among wg / Ev groups of invocations when the head is narrower than the workgroup. Heads of
//   whole 16-byte words (the usual 64/128 channels) take attentionVecProgram: keys and values read 16
//   bytes at a time, several loads in flight, subgroup reductions where the device has them.
// Arithmetic is in f32 for every dtype (half types packed in 32-bit words, no shader-f16 needed); the
// rounding points of the composites are kept where they are cheap (the rotary product x·cos rounded to the
// dtype first, as the composite's mul then addcmul); the softmax is not rounded to the dtype between
// steps, so half-type results agree with the composite within the dtype's rounding, not bit for bit.

import { DTYPES, type DTypeName } from '../../../dtype/dtypes.js';
import type { StridedRef } from '../../backend.js';
import { WGSL as R } from '../../../ir/render_wgsl.js';
import { IndexError } from '../../../errors.js';
import type { BackendKernels } from '../../../kernels/table.js';
import type { DecodeAttentionParams, FusedAddRmsNormParams, LlmFeatures, RotaryCacheParams } from '../../../kernels/llm.js';
import type { Program, WebGPUBackend, WGBuffer } from '../runtime/backend.js';
import { module, U } from '../runtime/elementwise.js';
import { f32w, outAccess, program, store, tree } from './util.js';
import { gatedGemvRun, normGemvRun, subgroupsOf } from './gemv.js';
import type { GatedGemvParams, NormGemvParams } from '../../../kernels/llm.js';

let be: WebGPUBackend;
export const kernels = {
  fused_add_rms_norm: webgpuFusedAddRmsNorm,
  rotary_cache: webgpuRotaryCache,
  decode_attention: webgpuDecodeAttention,
  gated_gemv: (p: GatedGemvParams) => gatedGemvRun(be, p),
  norm_gemv: (p: NormGemvParams) => normGemvRun(be, p),
} satisfies BackendKernels;

/** The dtypes these kernels take (others run the operations' composites). */
export const features: { llm: LlmFeatures } = { llm: { dtypes: ['float32', 'float16', 'bfloat16'] } };

/** Points this family's kernels at the backend (called once, when the backend starts). */
export function bind(backend: WebGPUBackend): void { be = backend; }

/**
 * The bindings of a dispatch: written buffers first (in order, distinct), then read ones deduplicated;
 * a read operand in a written buffer reads a copy made first (WebGPU forbids a writable binding aliasing
 * another). `at(buf)` is an operand's binding number; `done()` frees the copies.
 */
function binder(written: WGBuffer[], read: WGBuffer[]): { bufs: WGBuffer[]; at: (b: WGBuffer) => number; done: () => void } {
  const bufs: WGBuffer[] = [];
  for (const w of written) if (!bufs.includes(w)) bufs.push(w);
  const nw = bufs.length;
  const temps = new Map<WGBuffer, WGBuffer>();
  for (const r of read) {
    if (bufs.indexOf(r) >= 0 && bufs.indexOf(r) < nw) {
      if (!temps.has(r)) { const t = be.allocBytes(r.bytes); be.copyBuffer(r, t, r.bytes); temps.set(r, t); bufs.push(t); }
    } else if (!bufs.includes(r)) bufs.push(r);
  }
  return {
    bufs,
    at: (b) => bufs.indexOf(temps.get(b) ?? b) + 1,
    done: () => { for (const t of temps.values()) be.free(t); },
  };
}

const workgroup = (want: number): number => {
  const max = be.isReady ? Math.min(be.info.limits.maxComputeInvocationsPerWorkgroup ?? 256, be.info.limits.maxComputeWorkgroupSizeX ?? 256) : 256;
  return Math.min(want, 2 ** Math.floor(Math.log2(max)));
};
/** Workgroups for `n` (a 2-D grid past the per-dimension limit). */
function grid(n: number): [number, number] {
  const maxDim = be.isReady ? be.info.limits.maxComputeWorkgroupsPerDimension ?? 65535 : 65535;
  const x = Math.min(n, maxDim);
  return [x, Math.ceil(n / x)];
}
/** A signed stride or offset as a uniform word. */
const sw = (v: number): number => v >>> 0;


// ---- fused_add_rms_norm ----------------------------------------------------------------------------

/** uniform: [rows, n, xoff, roff, woff, ooff, soff, eps]. b1 out, b2 residualOut, then x, residual, weight. */
function addRmsNormProgram(d: DTypeName, hasW: boolean, wg: number, access: string, ix: number, ir: number, iw: number): Program {
  return program(`llm.add_rms|${d}|${hasW}|${wg}|${access}|${ix}${ir}${iw}`, access, 8, () => {
    const fns = `var<workgroup> sh: array<f32, ${wg}>;`;
    const entryCode = `@compute @workgroup_size(${wg})
fn main(@builtin(workgroup_id) wid: vec3u, @builtin(num_workgroups) nwg: vec3u, @builtin(local_invocation_index) lid: u32) {
  let row = wid.y * nwg.x + wid.x;
  let rows = ${U(0)}; let n = ${U(1)};
  if (row >= rows) { return; }
  let xo = ${U(2)} + row * n; let ro = ${U(3)} + row * n; let oo = ${U(5)} + row * n; let so = ${U(6)} + row * n;
  var ss = 0.0f;
  for (var j = lid; j < n; j += ${wg}u) {
    let s = ${R.castExpr('float32', d, `${R.load(d, `b${ix}`, 'xo + j')} + ${R.load(d, `b${ir}`, 'ro + j')}`)};
    ${store(d, 'b2', 'so + j', 's')}
    ss += s * s;
  }
  ${tree(wg, 'ss', 'a + b')}
  let inv = inverseSqrt(ss / f32(n) + bitcast<f32>(${U(7)}));
  for (var j = lid; j < n; j += ${wg}u) {
    let s = ${R.castExpr('float32', d, `${R.load(d, `b${ix}`, 'xo + j')} + ${R.load(d, `b${ir}`, 'ro + j')}`)};
    ${store(d, 'b1', 'oo + j', hasW ? `s * inv * ${R.load(d, `b${iw}`, `${U(4)} + j`)}` : 's * inv')}
  }
}`;
    return module(8, access, wg, '', fns, entryCode);
  });
}

function webgpuFusedAddRmsNorm(p: FusedAddRmsNormParams): void {
  const d = p.x.dtype;
  if (p.rows === 0 || p.n === 0) return;
  const wg = workgroup(p.n >= 1024 ? 256 : 128);
  const b = binder([p.out.buf as WGBuffer, p.residualOut.buf as WGBuffer], [p.x.buf as WGBuffer, p.residual.buf as WGBuffer, ...(p.weight ? [p.weight.buf as WGBuffer] : [])]);
  const access = `${outAccess(d)}${outAccess(d)}${'r'.repeat(b.bufs.length - 2)}`;
  const ix = b.at(p.x.buf as WGBuffer), ir = b.at(p.residual.buf as WGBuffer), iw = p.weight ? b.at(p.weight.buf as WGBuffer) : 0;
  const u = new Uint32Array([p.rows, p.n, p.x.offset, p.residual.offset, p.weight?.offset ?? 0, p.out.offset, p.residualOut.offset, f32w(p.eps)]);
  const [x, y] = grid(p.rows);
  be.dispatchGroups(addRmsNormProgram(d, !!p.weight, wg, access, ix, ir, iw), b.bufs, u, x, y, 1);
  b.done();
}

// ---- rotary_cache ------------------------------------------------------------------------------------

/**
 * A thread per element of the rotated queries [B, H, T, D], then of the keys and values [B, KVH, T, D].
 * uniform: [B, H, KVH, T, D, R, S, 0,
 *   q: off, sB, sH, sT, sD (8..12), k: 13..17, v: 18..22, cos: off, sB, sT, sR (23..26), sin: 27..30,
 *   qOut off (31), kc: off, sB, sH, sS, sD (32..36), vc: 37..41, index off (42)]
 * Bindings: b1 qOut, b2 keyCache, b3 valueCache (distinct), b4 the error record, then the read operands.
 */
function rotaryCacheProgram(d: DTypeName, access: string, at: Record<string, number>, wg: number, pairs: boolean): Program {
  const words = 43;
  return program(`llm.rotary_cache|${d}|${access}|${Object.values(at).join(',')}|${wg}|${pairs}`, access, words, () => {
    const L = (name: string, idx: string): string => R.load(d, `b${at[name]}`, idx);
    const rot = (name: string, w: number): string => `{
      let xr = i32(${U(w)}) + i32(b) * bitcast<i32>(${U(w + 1)}) + i32(h) * bitcast<i32>(${U(w + 2)}) + i32(t) * bitcast<i32>(${U(w + 3)});
      let xd = bitcast<i32>(${U(w + 4)});
      let x = ${L(name, 'u32(xr + i32(j) * xd)')};
      if (j < R) {
        let half = R / 2u;
        var rh = 0.0f;
        if (j < half) { rh = -${L(name, 'u32(xr + i32(j + half) * xd)')}; } else { rh = ${L(name, 'u32(xr + i32(j - half) * xd)')}; }
        let c = ${L('cos', `u32(i32(${U(23)}) + i32(b) * bitcast<i32>(${U(24)}) + i32(t) * bitcast<i32>(${U(25)}) + i32(j) * bitcast<i32>(${U(26)}))`)};
        let s = ${L('sin', `u32(i32(${U(27)}) + i32(b) * bitcast<i32>(${U(28)}) + i32(t) * bitcast<i32>(${U(29)}) + i32(j) * bitcast<i32>(${U(30)}))`)};
        let a = ${R.castExpr('float32', d, 'x * c')};
        val = fma(rh, s, a);
      } else { val = x; }
    }`;
    const cacheAt = (w: number): string => `u32(i32(${U(w)}) + i32(b) * bitcast<i32>(${U(w + 1)}) + i32(h) * bitcast<i32>(${U(w + 2)}) + pos * bitcast<i32>(${U(w + 3)}) + i32(j) * bitcast<i32>(${U(w + 4)}))`;
    // each invocation computes one element and where it goes (dst: 1 qOut, 2 keyCache, 3 valueCache, 0 nowhere);
    // with `pairs` (half types, outputs of whole words) neighbours meet in workgroup memory and the even one
    // stores the word (a plain atomic store instead of two read-modify-writes per element on a shared word)
    const stores = pairs
      ? `rv[lid] = val;
  workgroupBarrier();
  if (dst != 0u && (lid & 1u) == 0u) {
    let w = ${R.bits(d, 'val')} | (${R.bits(d, 'rv[lid + 1u]')} << 16u);
    if (dst == 1u) { atomicStore(&b1[oi >> 1u], w); } else if (dst == 2u) { atomicStore(&b2[oi >> 1u], w); } else { atomicStore(&b3[oi >> 1u], w); }
  }`
      : `if (dst == 1u) { ${store(d, 'b1', 'oi', 'val')} } else if (dst == 2u) { ${store(d, 'b2', 'oi', 'val')} } else if (dst == 3u) { ${store(d, 'b3', 'oi', 'val')} }`;
    const body = `let B = ${U(0)}; let H = ${U(1)}; let KVH = ${U(2)}; let T = ${U(3)}; let D = ${U(4)}; let R = ${U(5)}; let S = ${U(6)};
  let nq = B * H * T * D; let nk = B * KVH * T * D;
  var val = 0.0f; var dst = 0u; var oi = 0u;
  if (g < nq) {
    let j = g % D; let t = (g / D) % T; let h = (g / (D * T)) % H; let b = g / (D * T * H);
    ${rot('q', 8)}
    dst = 1u; oi = ${U(31)} + g;
  } else if (g < nq + 2u * nk) {
    let e = (g - nq) % nk; let isV = g - nq >= nk;
    let j = e % D; let t = (e / D) % T; let h = (e / (D * T)) % KVH; let b = e / (D * T * KVH);
    // the cache position: index[t] (int64), checked against S
    let lo = b${at.index}[2u * (${U(42)} + t)]; let hi = b${at.index}[2u * (${U(42)} + t) + 1u];
    let bad = hi != 0u || lo >= S;
    // the record: a word per position, written every time (so it needs no clearing), 1 where out of range
    if (j == 0u && h == 0u && b == 0u && !isV) { atomicStore(&b4[t], select(0u, 1u, bad)); }
    if (!bad) {
      let pos = i32(lo);
      if (isV) {
        val = ${L('v', `u32(i32(${U(18)}) + i32(b) * bitcast<i32>(${U(19)}) + i32(h) * bitcast<i32>(${U(20)}) + i32(t) * bitcast<i32>(${U(21)}) + i32(j) * bitcast<i32>(${U(22)}))`)};
        dst = 3u; oi = ${cacheAt(37)};
      } else {
        ${rot('k', 13)}
        dst = 2u; oi = ${cacheAt(32)};
      }
    }
  }
  ${stores}`;
    return module(words, access, wg, body, pairs ? `var<workgroup> rv: array<f32, ${wg}>;` : '');
  });
}

const strides4 = (r: StridedRef): number[] => [r.offset, ...r.strides.slice(0, 4)].map(sw);

function webgpuRotaryCache(p: RotaryCacheParams): void {
  const d = p.q.dtype;
  const [B, H, T, D] = p.q.shape as [number, number, number, number];
  const KVH = p.k.shape[1]!, S = p.keyCache.shape[2]!;
  const err = be.allocBytes(4 * Math.max(4, T));
  const kc = p.keyCache.buf as WGBuffer, vc = p.valueCache.buf as WGBuffer, qo = p.qOut.buf as WGBuffer;
  const reads: Record<string, WGBuffer> = { q: p.q.buf as WGBuffer, k: p.k.buf as WGBuffer, v: p.v.buf as WGBuffer, cos: p.cos.buf as WGBuffer, sin: p.sin.buf as WGBuffer, index: p.index.buf as WGBuffer };
  const b = binder([qo, kc, vc, err], Object.values(reads));
  // the written buffers are distinct (fresh output, two caches, a fresh record): four bindings
  const at: Record<string, number> = {};
  for (const [name, buf] of Object.entries(reads)) at[name] = b.at(buf);
  const access = `${outAccess(d)}${outAccess(d)}${outAccess(d)}a${'r'.repeat(b.bufs.length - 4)}`;
  const u = new Uint32Array(43);
  u.set([B, H, KVH, T, D, p.rotary, S, 0]);
  u.set(strides4(p.q), 8); u.set(strides4(p.k), 13); u.set(strides4(p.v), 18);
  u.set([p.cos.offset, ...p.cos.strides.slice(0, 3)].map(sw), 23); u.set([p.sin.offset, ...p.sin.strides.slice(0, 3)].map(sw), 27);
  u[31] = p.qOut.offset;
  u.set(strides4(p.keyCache), 32); u.set(strides4(p.valueCache), 37);
  u[42] = p.index.offset;
  const wg = workgroup(256);
  // whole words per pair of neighbours: half types, even D, every output offset and stride even and unit along D
  const cacheOk = (r: StridedRef): boolean => r.strides[3] === 1 && r.offset % 2 === 0 && r.strides.slice(0, 3).every((x) => x % 2 === 0);
  const pairs = DTYPES[d].itemsize === 2 && D % 2 === 0 && p.qOut.offset % 2 === 0 && cacheOk(p.keyCache) && cacheOk(p.valueCache) && process.env.NBX_WEBGPU_ROTARY_PAIRS !== '0';
  be.dispatch(rotaryCacheProgram(d, access, at, wg, pairs), b.bufs, u, B * T * D * (H + 2 * KVH), wg);
  b.done();
  be.check('llm.rotary_and_cache', err, (host) => {
    const w = new Uint32Array(host.get(err)!);
    const t = w.subarray(0, T).findIndex((f) => f !== 0);
    if (t >= 0) throw new IndexError('llm.rotary_and_cache', `cache_index[${t}] is out of bounds for a cache of ${S} positions`);
  }, [qo, kc, vc]);
  be.free(err);
}

// ---- decode_attention ------------------------------------------------------------------------------

/** Keys per chunk of scores held in workgroup memory. */
const CHUNK = 1024;

/**
 * One chunk of keys [c0, c0 + n) of a decode_attention workgroup: scores q·k·scale (`dotCode` leaves q·k
 * of key row `kr` in `dk`) with the mask and causal rule into `ps`, the chunk's max, the running max `m`
 * and sum `lsum` of the safe softmax updated, `ps` turned into exp(score − max); leaves `alpha` (the
 * rescale of what was summed before) and `newm` for the caller's Σ p·v.
 */
function softmaxChunk(wg: number, md: DTypeName | null, at: Record<string, number>, dotCode: string, reduce: (v: string, op: 'max' | 'add') => string): string {
  const maskTerm = md === null ? '' : md === 'bool'
    ? `if (${R.load('bool', `b${at.mask}`, 'mi')} == 0i) { sc = -nbx_inf(); }`
    : `sc = sc + ${R.load(md, `b${at.mask}`, 'mi')};`;
  return `let n = min(${CHUNK}u, S - c0);
    var cmax = -nbx_inf();
    for (var s = lid; s < n; s += ${wg}u) {
      let key = c0 + s;
      let kr = kb + key * ldk;
      var dk = 0.0f;
      ${dotCode}
      var sc = dk * scale;
      ${md === null ? '' : `if ((flags & 2u) != 0u) { let mi = u32(i32(${U(14)}) + i32(bh) * bitcast<i32>(${U(15)}) + i32(l) * bitcast<i32>(${U(16)}) + i32(key) * bitcast<i32>(${U(17)})); ${maskTerm} }`}
      if ((flags & 1u) != 0u && key > l) { sc = -nbx_inf(); }
      ps[s] = sc;
      cmax = max(cmax, sc);
    }
    ${reduce('cmax', 'max')}
    let newm = max(m, cmax);
    // no key visible yet: every p is exp(-inf) = 0 against a finite reference (no branch around the barriers)
    let mref = select(newm, 0.0f, newm == -nbx_inf());
    let alpha = select(exp(m - newm), 0.0f, m == -nbx_inf());
    var psum = 0.0f;
    for (var s = lid; s < n; s += ${wg}u) { let pe = exp(ps[s] - mref); ps[s] = pe; psum += pe; }
    ${reduce('psum', 'add')}
    lsum = lsum * alpha + psum;`;
}


/**
 * A workgroup per query row (b·H + h, l). uniform: [H, L, S, E, Ev, rep, ldk, ldv, strideK, strideV,
 * qoff, koff, voff, ooff, moff, ms0, ms1, ms2, flags (1 causal, 2 mask), scale, KVH, rows].
 * Bindings: b1 out, then q, k, v, mask (deduplicated: `at`).
 */
function attentionProgram(d: DTypeName, md: DTypeName | null, access: string, at: Record<string, number>, wg: number, evp: number, pairs: boolean): Program {
  const words = 22;
  // evp < wg: the value channels (padded to evp) are covered wg / evp times over, each group of
  // invocations summing every GRP-th key, the groups added at the end (keys in parallel, not serially)
  const GRP = evp < wg ? wg / evp : 1;
  return program(`llm.decode_attn|${d}|${md}|${access}|${Object.values(at).join(',')}|${wg}|${evp}|${pairs}`, access, words, () => {
    const L = (name: string, idx: string): string => R.load(d, `b${at[name]}`, idx);
    // half types with even offsets and strides: a key row read a 32-bit word (two elements) at a time
    const dotLoop = pairs
      ? `for (var e = 0u; e < E; e += 2u) { let wv = b${at.k}[(kr + e) / 2u]; dk += qs[e] * ${R.fromWord(d, 'wv', 0)} + qs[e + 1u] * ${R.fromWord(d, 'wv', 1)}; }`
      : `for (var e = 0u; e < E; e++) { dk += qs[e] * ${L('k', 'kr + e')}; }`;
    const pv = GRP > 1
      ? `let dd = lid % ${evp}u; let gi = lid / ${evp}u;
    for (var s = gi; s < n; s += ${GRP}u) {
      if (dd < Ev) { acc0 += ps[s] * ${L('v', `vb + (c0 + s) * ldv + dd`)}; }
    }`
      : `for (var s = 0u; s < n; s++) {
      let pv = ps[s];
      let vr = vb + (c0 + s) * ldv;
      if (lid < Ev) { acc0 += pv * ${L('v', 'vr + lid')}; }
      if (lid + ${wg}u < Ev) { acc1 += pv * ${L('v', `vr + lid + ${wg}u`)}; }
      if (lid + ${2 * wg}u < Ev) { acc2 += pv * ${L('v', `vr + lid + ${2 * wg}u`)}; }
      if (lid + ${3 * wg}u < Ev) { acc3 += pv * ${L('v', `vr + lid + ${3 * wg}u`)}; }
    }`;
    const outStores = GRP > 1
      ? `sh[lid] = acc0;
  workgroupBarrier();
  let dd = lid % ${evp}u;
  if (lid < ${evp}u && dd < Ev) {
    var tot = 0.0f;
    for (var gq = 0u; gq < ${GRP}u; gq++) { tot += sh[gq * ${evp}u + dd]; }
    ${store(d, 'b1', 'ob + dd', 'tot * inv')}
  }`
      : `if (lid < Ev) { ${store(d, 'b1', 'ob + lid', 'acc0 * inv')} }
  if (lid + ${wg}u < Ev) { ${store(d, 'b1', `ob + lid + ${wg}u`, 'acc1 * inv')} }
  if (lid + ${2 * wg}u < Ev) { ${store(d, 'b1', `ob + lid + ${2 * wg}u`, 'acc2 * inv')} }
  if (lid + ${3 * wg}u < Ev) { ${store(d, 'b1', `ob + lid + ${3 * wg}u`, 'acc3 * inv')} }`;
    const fns = `var<workgroup> sh: array<f32, ${wg}>;
var<workgroup> qs: array<f32, 1024>;
var<workgroup> ps: array<f32, ${CHUNK}>;`;
    const entryCode = `@compute @workgroup_size(${wg})
fn main(@builtin(workgroup_id) wid: vec3u, @builtin(num_workgroups) nwg: vec3u, @builtin(local_invocation_index) lid: u32) {
  let r = wid.y * nwg.x + wid.x;
  if (r >= ${U(21)}) { return; }
  let H = ${U(0)}; let Lq = ${U(1)}; let S = ${U(2)}; let E = ${U(3)}; let Ev = ${U(4)}; let rep = ${U(5)};
  let ldk = ${U(6)}; let ldv = ${U(7)}; let flags = ${U(18)}; let scale = bitcast<f32>(${U(19)}); let KVH = ${U(20)};
  let l = r % Lq; let bh = r / Lq; let bi = bh / H; let h = bh % H;
  let kvm = bi * KVH + h / rep;
  let kb = ${U(11)} + kvm * ${U(8)}; let vb = ${U(12)} + kvm * ${U(9)};
  let qb = ${U(10)} + r * E;
  for (var e = lid; e < E; e += ${wg}u) { qs[e] = ${L('q', 'qb + e')}; }
  workgroupBarrier();
  var m = -nbx_inf();
  var lsum = 0.0f;
  var acc0 = 0.0f; var acc1 = 0.0f; var acc2 = 0.0f; var acc3 = 0.0f;
  for (var c0 = 0u; c0 < S; c0 += ${CHUNK}u) {
    ${softmaxChunk(wg, md, at, dotLoop, (v, op) => tree(wg, v, op === 'max' ? 'max(a, b)' : 'a + b'))}
    acc0 *= alpha; acc1 *= alpha; acc2 *= alpha; acc3 *= alpha;
    ${pv}
    m = newm;
    workgroupBarrier();
  }
  let inv = select(0.0f, 1.0f / lsum, lsum > 0.0f);
  let ob = ${U(13)} + r * Ev;
  ${outStores}
}`;
    return module(words, access, wg, '', fns, entryCode);
  });
}

/** The compute value of 16-byte word `w` (vec4<u32>) as vec4<f32> halves: [even, odd] elements for half types, one for float32. */
function halves(d: DTypeName, w: string): string[] {
  if (d === 'float32') return [`bitcast<vec4<f32>>(${w})`];
  if (d === 'bfloat16') return [`bitcast<vec4<f32>>(${w} << vec4<u32>(16u))`, `bitcast<vec4<f32>>(${w} & vec4<u32>(0xffff0000u))`];
  return [0, 1].map((h) => `vec4<f32>(${['x', 'y', 'z', 'w'].map((c) => `unpack2x16float(${w}.${c})[${h}]`).join(', ')})`);
}

/**
 * decode_attention with keys and values read in 16-byte words (E and Ev whole words, rows and matrices
 * word-aligned): a workgroup per query row as the general kernel, but a key's score is one invocation's
 * EW = E / 8 (half types; E / 4 for float32) independent 16-byte loads against q held in workgroup memory
 * in the words' even/odd order, the max and the sum by subgroup operations where the device has 32-wide
 * subgroups, and Σ p·v by invocations (key group, value word): each loads whole 16-byte value words,
 * four keys in flight, the key groups' sums added at the end. The general kernel read a key 2 bytes or a
 * word at a time and summed p·v one key after another (~41 µs a call for 32 heads × 512 keys on the H200).
 * Same uniform words and bindings as the general kernel, k and v bound as vec4 words.
 */
function attentionVecProgram(d: DTypeName, md: DTypeName | null, access: string, at: Record<string, number>, EW: number, VW: number, sub: boolean, wg: number): Program {
  const words = 22;
  const NH = d === 'float32' ? 1 : 2; // vec4<f32> halves per word
  const KG = Math.floor(wg / VW); // key groups of Σ p·v
  const KGP = 2 ** Math.ceil(Math.log2(Math.max(2, KG)));
  return program(`llm.decode_attn_vec|${d}|${md}|${access}|${Object.values(at).join(',')}|${EW}|${VW}|${sub}|${wg}`, access, words, () => {
    const L = (name: string, idx: string): string => R.load(d, `b${at[name]}`, idx);
    const dotTerms = [...Array(EW).keys()].map((w) => `let k${w} = b${at.k}[kr + ${w}u];`).join(' ') + '\n      '
      + `dk = ${[...Array(EW).keys()].map((w) => halves(d, `k${w}`).map((h, i) => `dot(${h}, qs[${NH * w + i}u])`).join(' + ')).join('\n        + ')};`;
    const reduce = (v: string, op: 'max' | 'add'): string => (sub
      ? `{ let t = ${op === 'max' ? 'subgroupMax' : 'subgroupAdd'}(${v}); if (lid % 32u == 0u) { sh[lid / 32u] = t; }
    workgroupBarrier();
    var tot = sh[0]; for (var q = 1u; q < ${wg / 32}u; q++) { tot = ${op === 'max' ? 'max(tot, sh[q])' : 'tot + sh[q]'}; }
    ${v} = tot;
    workgroupBarrier(); }`
      : tree(wg, v, op === 'max' ? 'max(a, b)' : 'a + b'));
    const accs = [...Array(NH).keys()];
    const pvLoad = (q: number): string => `let vw${q} = b${at.v}[vb + (c0 + s + ${q * KG}u) * ldv + vlane];`;
    const pvAdd = (q: number): string => accs.map((h) => `acc${h} += ps[s + ${q * KG}u] * ${halves(d, `vw${q}`)[h]};`).join(' ');
    // the output: word vlane of the row holds channels 8·vlane + 2j + h (half types) or 4·vlane + j
    const outStore = d === 'float32'
      ? ['x', 'y', 'z', 'w'].map((c, j) => `b1[ob + 4u * t + ${j}u] = bitcast<u32>(o0.${c});`).join(' ')
      : ['x', 'y', 'z', 'w'].map((c, j) => `atomicStore(&b1[(ob + 8u * t) / 2u + ${j}u], ${R.bits(d, `o0.${c}`)} | (${R.bits(d, `o1.${c}`)} << 16u));`).join(' ');
    const fns = `var<workgroup> sh: array<f32, ${wg}>;
var<workgroup> qs: array<vec4<f32>, ${NH * EW}>;
var<workgroup> ps: array<f32, ${CHUNK}>;
var<workgroup> pv: array<vec4<f32>, ${NH * wg}>;`;
    const entryCode = `@compute @workgroup_size(${wg})
fn main(@builtin(workgroup_id) wid: vec3u, @builtin(num_workgroups) nwg: vec3u, @builtin(local_invocation_index) lid: u32) {
  let r = wid.y * nwg.x + wid.x;
  if (r >= ${U(21)}) { return; }
  let H = ${U(0)}; let Lq = ${U(1)}; let S = ${U(2)}; let E = ${U(3)}; let rep = ${U(5)};
  let ldk = ${U(6)}; let ldv = ${U(7)}; let flags = ${U(18)}; let scale = bitcast<f32>(${U(19)}); let KVH = ${U(20)};
  let l = r % Lq; let bh = r / Lq; let bi = bh / H; let h = bh % H;
  let kvm = bi * KVH + h / rep;
  // k and v in 16-byte words: offsets, row and matrix strides divided by the word's elements (checked by the caller)
  let kb = ${U(11)} + kvm * ${U(8)}; let vb = ${U(12)} + kvm * ${U(9)};
  let qb = ${U(10)} + r * E;
  // q in the key words' order: for word w, its even elements then its odd ones (half types)
  for (var e = lid; e < E; e += ${wg}u) {
    let w = e / ${NH === 2 ? 8 : 4}u; let p = e % ${NH === 2 ? 8 : 4}u;
    qs[${NH} * w + ${NH === 2 ? 'p % 2u' : '0u'}][${NH === 2 ? 'p / 2u' : 'p'}] = ${L('q', 'qb + e')};
  }
  workgroupBarrier();
  var m = -nbx_inf();
  var lsum = 0.0f;
  ${accs.map((h) => `var acc${h} = vec4<f32>(0.0f);`).join(' ')}
  let vlane = lid % ${VW}u; let vg = lid / ${VW}u;
  for (var c0 = 0u; c0 < S; c0 += ${CHUNK}u) {
    ${softmaxChunk(wg, md, at, dotTerms, reduce)}
    ${accs.map((h) => `acc${h} *= alpha;`).join(' ')}
    if (vg < ${KG}u) {
      var s = vg;
      for (; s + ${3 * KG}u < n; s += ${4 * KG}u) {
        ${[0, 1, 2, 3].map(pvLoad).join(' ')}
        ${[0, 1, 2, 3].map(pvAdd).join('\n        ')}
      }
      for (; s < n; s += ${KG}u) { ${pvLoad(0)} ${pvAdd(0)} }
    }
    m = newm;
    workgroupBarrier();
  }
  ${accs.map((h) => `pv[${NH}u * lid + ${h}u] = acc${h};`).join(' ')}
  workgroupBarrier();
  // the key groups' sums added by a fixed-order tree (group g takes g + st while g + st < KG)
  for (var st = ${KGP / 2}u; st > 0u; st >>= 1u) {
    if (vg < st && vg + st < ${KG}u) { ${accs.map((h) => `pv[${NH}u * lid + ${h}u] += pv[${NH}u * (lid + st * ${VW}u) + ${h}u];`).join(' ')} }
    workgroupBarrier();
  }
  let inv = select(0.0f, 1.0f / lsum, lsum > 0.0f);
  let ob = ${U(13)} + r * ${U(4)};
  if (lid < ${VW}u) {
    let t = lid;
    ${accs.map((h) => `let o${h} = pv[${NH}u * t + ${h}u] * inv;`).join(' ')}
    ${outStore}
  }
}`;
    const src = module(words, access, wg, '', fns, entryCode);
    return sub ? `enable subgroups;\ndiagnostic(off, subgroup_uniformity);\n${src}` : src;
  });
}

function webgpuDecodeAttention(p: DecodeAttentionParams): void {
  const d = p.q.dtype;
  const [B, H, Lq, E] = p.q.shape as [number, number, number, number];
  const S = p.k.shape[2]!, Ev = p.v.shape[3]!, KVH = H / p.rep;
  const wg = workgroup(256);
  const evp = 2 ** Math.ceil(Math.log2(Math.max(1, Ev)));
  const half = DTYPES[d].itemsize === 2;
  const pairs = half && E % 2 === 0 && p.ldk % 2 === 0 && p.strideK % 2 === 0 && p.k.offset % 2 === 0;
  if (E > 1024 || Ev > 4 * wg) throw new IndexError('llm.decode_attention', `webgpu decode attention takes head dims up to 1024 (keys) and ${4 * wg} (values), got ${E}, ${Ev}`);
  const reads: Record<string, WGBuffer> = { q: p.q.buf as WGBuffer, k: p.k.buf as WGBuffer, v: p.v.buf as WGBuffer, ...(p.mask ? { mask: p.mask.buf as WGBuffer } : {}) };
  const b = binder([p.out.buf as WGBuffer], Object.values(reads));
  const at: Record<string, number> = {};
  for (const [name, buf] of Object.entries(reads)) at[name] = b.at(buf);
  const rows = B * H * Lq;
  const m = p.mask;
  // 16-byte words: E and Ev whole words (at most 32 words a key row), k/v offsets and strides and the
  // output offset word-aligned, k and v in bindings of their own (bound as vec4 words)
  const W = 16 / DTYPES[d].itemsize;
  // invocations: 512 (call C's A/B on the H200: +3.9% decode over 256, 1024 -14%), or NBX_WEBGPU_ATTN_WG, where the
  // device takes them and their workgroup memory (the groups' Σ p·v, 32 bytes an invocation), else 256
  const NH = DTYPES[d].itemsize === 4 ? 1 : 2;
  const want = Number(process.env.NBX_WEBGPU_ATTN_WG ?? 512);
  const vwg = (want === 512 || want === 1024) && workgroup(want) === want
    && (!be.isReady || (be.info.limits.maxComputeWorkgroupStorageSize ?? 16384) >= 4 * want + 16 * NH * (E / W) + 4 * CHUNK + 16 * NH * want) ? want : 256;
  const vec = wg === 256 && E % W === 0 && Ev % W === 0 && E / W <= 32 && Ev / W <= wg && [p.ldk, p.ldv, p.strideK, p.strideV, p.k.offset, p.v.offset, p.out.offset].every((v) => v % W === 0)
    && at.q !== at.k && at.q !== at.v && (!m || (at.mask !== at.k && at.mask !== at.v)) && process.env.NBX_WEBGPU_ATTN_VEC !== '0';
  const access = `${outAccess(d)}${b.bufs.slice(1).map((_, i) => (vec && (i + 2 === at.k || i + 2 === at.v) ? 'v' : 'r')).join('')}`;
  const kw = vec ? W : 1;
  const u = new Uint32Array([H, Lq, S, E, Ev, p.rep, p.ldk / kw, p.ldv / kw, p.strideK / kw, p.strideV / kw, p.q.offset, p.k.offset / kw, p.v.offset / kw, p.out.offset,
    m?.offset ?? 0, sw(m?.strides[0] ?? 0), sw(m?.strides[1] ?? 0), sw(m?.strides[2] ?? 0), (p.causal ? 1 : 0) | (m ? 2 : 0), f32w(p.scale), KVH, rows]);
  const [x, y] = grid(rows);
  const prog = vec ? attentionVecProgram(d, m ? m.dtype : null, access, at, E / W, Ev / W, subgroupsOf(be), vwg)
    : attentionProgram(d, m ? m.dtype : null, access, at, wg, evp <= wg / 2 ? evp : wg, pairs);
  be.dispatchGroups(prog, b.bufs, u, x, y, 1);
  b.done();
}

/** Elements of a dtype per 32-bit word (for callers sizing records). */
export const perWordOf = (d: DTypeName): number => 4 / DTYPES[d].itemsize;

/** WGSL of the 16-byte-word decode attention kernels (for compile checks, e.g. the subgroup variants on Dawn's null backend). */
export function allDecodeAttentionSources(sub: boolean): { key: string; code: string }[] {
  const out: { key: string; code: string }[] = [];
  for (const d of ['float32', 'bfloat16', 'float16'] as DTypeName[]) {
    for (const md of [null, 'bool', d] as (DTypeName | null)[]) {
      const at = { q: 2, k: 3, v: 4, ...(md ? { mask: 5 } : {}) };
      const W = 16 / DTYPES[d].itemsize;
      for (const [E, Ev] of [[64, 64], [128, 128], [200, 200]]) {
        if (E % W || Ev % W) continue;
        for (const wg of [256, 512, 1024]) {
          const p = attentionVecProgram(d, md, `${outAccess(d)}rvv${md ? 'r' : ''}`, at, E / W, Ev / W, sub, wg);
          out.push({ key: p.key, code: p.source() });
        }
      }
    }
  }
  return out;
}
