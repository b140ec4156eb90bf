// The CPU's LLM kernels (contracts in src/kernels/llm.ts), float32 and float64. Each computes exactly
// what its operation's composite computes (same roundings, same row-norm code), in one call: a decode
// step is ~150 small operations whose host cost (5-20 µs each) is most of what is not the weights'
// gemvs, so fewer calls is the saving, not fewer flops.

import type { StridedRef } from '../../backend.js';
import type { DecodeAttentionParams, FusedAddRmsNormParams, PagedAttentionParams, RotaryParams } from '../../../kernels/llm.js';
import { IndexError } from '../../../errors.js';
import type { BackendKernels } from '../../../kernels/table.js';
import { cpuRowNorm, cpuSoftmax } from './nn.js';
import { gemm } from './gemm.js';

type FloatArray = Float32Array | Float64Array;
const arr = (r: StridedRef): FloatArray => r.buf as FloatArray;

/** residualOut = fround(x + residual) (as `add`), then the row-norm kernel on it (as rms_norm). */
function cpuFusedAddRmsNorm(p: FusedAddRmsNormParams): void {
  const x = arr(p.x), r = arr(p.residual), s = arr(p.residualOut);
  const len = p.rows * p.n, xo = p.x.offset, ro = p.residual.offset, so = p.residualOut.offset;
  // the store into a Float32Array rounds the double sum once, as the add kernel does
  for (let i = 0; i < len; i++) s[so + i] = x[xo + i]! + r[ro + i]!;
  cpuRowNorm({ x: p.residualOut, rows: p.rows, n: p.n, eps: p.eps, mode: 'rms', out: p.out, weight: p.weight, groups: 1, chan: 1 });
}

/**
 * One tensor's rotary embedding: x·cos rounded to the dtype, plus rotate_half(x)·sin with one rounding
 * (the composite's mul then addcmul). The Float32Array store does each rounding; the product of two
 * float32 values is exact in a double, so `a + rh·s` rounded once is addcmul's result.
 */
function cpuRotary(p: RotaryParams): void {
  const x = arr(p.x), c = arr(p.cos), s = arr(p.sin), o = arr(p.out);
  // indexing, not destructuring: array destructuring runs the iterator protocol, and shape/stride arrays
  // come with more than one hidden class (a deopt on the first prefill after decoding)
  const xs = p.x.shape, xst = p.x.strides, cst = p.cos.strides, sst = p.sin.strides;
  const B = xs[0]!, H = xs[1]!, T = xs[2]!, D = xs[3]!;
  const xb = xst[0]!, xh = xst[1]!, xt = xst[2]!, xd = xst[3]!;
  const cb = cst[0]!, ct = cst[1]!, cr = cst[2]!, sb = sst[0]!, st = sst[1]!, sr = sst[2]!;
  const R = p.rotary, half = R >> 1, f32 = o instanceof Float32Array;
  let oi = p.out.offset;
  for (let b = 0; b < B; b++) {
    for (let h = 0; h < H; h++) {
      for (let t = 0; t < T; t++) {
        const xr = p.x.offset + b * xb + h * xh + t * xt;
        const cr0 = p.cos.offset + b * cb + t * ct, sr0 = p.sin.offset + b * sb + t * st;
        for (let j = 0; j < R; j++) {
          const v = x[xr + j * xd]!;
          const rh = j < half ? -x[xr + (j + half) * xd]! : x[xr + (j - half) * xd]!;
          const a = f32 ? Math.fround(v * c[cr0 + j * cr]!) : v * c[cr0 + j * cr]!;
          o[oi + j] = a + rh * s[sr0 + j * sr]!;
        }
        for (let j = R; j < D; j++) o[oi + j] = x[xr + j * xd]!;
        oi += D;
      }
    }
  }
}

let scores32 = new Float32Array(1024), scores64 = new Float64Array(1024);

/**
 * Decode attention: the composed path's three calls (scores = q·kᵀ·scale as one gemm batch over the
 * (batch, key/value head) groups, the rep·L query rows of a group together; the safe softmax over
 * them; probabilities·v as a second gemm batch), with the same arguments, so the same numbers, without
 * the operation layer's general machinery around them (layouts, broadcasting, temporaries: most of
 * SDPA's ~55 µs a layer for one token of the embedded model, on top of its ~30 µs of BLAS calls).
 */
function cpuDecodeAttention(p: DecodeAttentionParams): void {
  const qs = p.q.shape, B = qs[0]!, H = qs[1]!, L = qs[2]!, E = qs[3]!;
  const S = p.k.shape[2]!, Ev = p.v.shape[3]!, rep = p.rep, G = (B * H) / rep, rows = rep * L;
  const n = G * rows * S;
  const f64 = p.q.dtype === 'float64';
  if (f64 ? scores64.length < n : scores32.length < n) { if (f64) scores64 = new Float64Array(n); else scores32 = new Float32Array(n); }
  const sref: StridedRef = { buf: f64 ? scores64 : scores32, dtype: p.q.dtype, shape: [n], strides: [1], offset: 0 };
  gemm({ transA: false, transB: true, m: rows, n: S, k: E, alpha: p.scale, beta: 0, a: p.q, lda: Math.max(E, 1), b: p.k, ldb: p.ldk,
    c: sref, ldc: S, batch: G, strideA: rows * E, strideB: p.strideK, strideC: rows * S });
  const view: StridedRef = { ...sref, shape: [G * rep, L, S], strides: [L * S, S, 1] };
  cpuSoftmax({ x: view, out: view, dim: 2, log: false, mask: p.mask, causal: p.causal, causalOffset: 0, safe: true });
  gemm({ transA: false, transB: false, m: rows, n: Ev, k: S, alpha: 1, beta: 0, a: sref, lda: S, b: p.v, ldb: p.ldv,
    c: p.out, ldc: Ev, batch: G, strideA: rows * S, strideB: p.strideV, strideC: rows * Ev });
}

let pagedScores = new Float64Array(1024);

/**
 * Paged decode attention, one sequence at a time and on its own (nothing about another row of the batch
 * enters its sums, so a sequence gets the same numbers in any batch: the serving engine relies on it).
 * Per query head: scores q·k in double, times scale, rounded to the dtype (as the composite's gemm
 * stores them), soft-capped (div, tanh, mul, each rounded), the safe softmax in double with the
 * probabilities rounded to the dtype, and Σ p·v in double, rounded once. Keys are read in place from
 * their blocks; the block ids and lengths are checked before anything is read.
 */
function cpuPagedAttention(p: PagedAttentionParams): void {
  const q = arr(p.q), kc = arr(p.keyCache), vc = arr(p.valueCache), o = arr(p.out);
  const bt = p.blockTables.buf as Int32Array | BigInt64Array, sl = p.seqLens.buf as Int32Array | BigInt64Array;
  const { seqs: B, heads: H, kvHeads: KVH, headDim: D, valueDim: Dv, blockSize: BS, maxBlocks: MB, numBlocks: NB } = p;
  const rep = H / KVH, f32 = o instanceof Float32Array;
  const rnd = f32 ? Math.fround : (x: number): number => x;
  const cap = p.softcap;
  const kRow = KVH * D, vRow = KVH * Dv; // elements per position in the pools
  for (let b = 0; b < B; b++) {
    const len = Number(sl[p.seqLens.offset + b]!);
    if (!(len >= 0 && len <= MB * BS)) throw new IndexError('llm.paged_attention', `seq_lens[${b}] = ${len} is outside [0, ${MB * BS}] (block_tables has ${MB} blocks of ${BS} per sequence)`);
    const first = p.window === null ? 0 : Math.max(0, len - p.window);
    const tb = p.blockTables.offset + b * MB;
    for (let j = Math.floor(first / BS); j * BS < len; j++) {
      const id = Number(bt[tb + j]!);
      if (!(id >= 0 && id < NB)) throw new IndexError('llm.paged_attention', `block_tables[${b}, ${j}] = ${id} is out of range for a pool of ${NB} blocks`);
    }
    const n = len - first;
    if (pagedScores.length < n) pagedScores = new Float64Array(Math.max(n, 2 * pagedScores.length));
    const sc = pagedScores;
    for (let h = 0; h < H; h++) {
      const g = Math.floor(h / rep);
      const qo = p.q.offset + (b * H + h) * D, oo = p.out.offset + (b * H + h) * Dv;
      let max = -Infinity;
      for (let s = first; s < len; s++) {
        const slot = Number(bt[tb + Math.floor(s / BS)]!) * BS + (s % BS);
        const ko = p.keyCache.offset + slot * kRow + g * D;
        let dot = 0;
        for (let d = 0; d < D; d++) dot += q[qo + d]! * kc[ko + d]!;
        let v = rnd(dot * p.scale);
        if (cap !== null) v = rnd(rnd(Math.tanh(rnd(v / cap))) * cap);
        sc[s - first] = v;
        if (v > max) max = v;
      }
      for (let d = 0; d < Dv; d++) o[oo + d] = 0;
      if (n === 0 || max === -Infinity) continue;
      let sum = 0;
      for (let i = 0; i < n; i++) { const e = Math.exp(sc[i]! - max); sc[i] = e; sum += e; }
      const acc = new Float64Array(Dv);
      for (let s = first; s < len; s++) {
        const pr = rnd(sc[s - first]! / sum);
        const slot = Number(bt[tb + Math.floor(s / BS)]!) * BS + (s % BS);
        const vo = p.valueCache.offset + slot * vRow + g * Dv;
        for (let d = 0; d < Dv; d++) acc[d] += pr * vc[vo + d]!;
      }
      for (let d = 0; d < Dv; d++) o[oo + d] = acc[d]!;
    }
  }
}

export const kernels: BackendKernels = { fused_add_rms_norm: cpuFusedAddRmsNorm, rotary_embedding: cpuRotary, decode_attention: cpuDecodeAttention, paged_attention: cpuPagedAttention };
/** The dtypes these kernels take (the op runs the composite for others). */
export const features = { llm: { dtypes: ['float32', 'float64'] as const } };
