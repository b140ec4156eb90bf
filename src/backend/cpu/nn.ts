// CPU kernels: nn. Softmax-family rows and row normalizations (layer/rms/group norm, per-row moments).
//
// Every kernel walks "rows" (all positions but the reduced dim) of a strided operand with an odometer,
// loads a row into a float64 scratch (decoding float16/bfloat16 once), computes in double, and stores
// the row rounded once to the output dtype. So float32 and half types get PyTorch's "compute wide,
// round once" results, and a softmax over a non-last dim needs no transposed copy: consecutive rows are
// adjacent in memory, so the strided loads stay in cache.

import type { StridedRef } from '../backend.js';
import { registerKernel } from '../registry.js';
import { DTYPES, type StorageArray } from '../../dtype/dtypes.js';
import { IndexError } from '../../errors.js';
import { f16Table, fromBFloat16Bits, toBFloat16Bits, toFloat16Bits } from '../../dtype/convert.js';

// ---- row access ----------------------------------------------------------------------------------

let BF16: Float32Array | undefined;
function bf16Table(): Float32Array {
  if (!BF16) { BF16 = new Float32Array(65536); for (let h = 0; h < 65536; h++) BF16[h] = fromBFloat16Bits(h); }
  return BF16;
}

/** Reads n elements of `ref` (element `base`, step `stride`) into dst[0..n) as doubles. */
export function loadRow(ref: StridedRef, base: number, stride: number, n: number, dst: Float64Array): void {
  const a = ref.buf as StorageArray;
  const st = DTYPES[ref.dtype].storage;
  if (st === 'f32' || st === 'f64') {
    const f = a as Float32Array | Float64Array;
    if (stride === 1) dst.set(f.subarray(base, base + n));
    else for (let j = 0, i = base; j < n; j++, i += stride) dst[j] = f[i]!;
    return;
  }
  if (ref.dtype === 'float16' || ref.dtype === 'bfloat16') {
    const t = ref.dtype === 'float16' ? f16Table() : bf16Table();
    const u = a as Uint16Array;
    for (let j = 0, i = base; j < n; j++, i += stride) dst[j] = t[u[i]!]!;
    return;
  }
  throw new Error(`nn kernels: unsupported dtype ${ref.dtype}`);
}

/** Writes src[0..n) into `ref` (element `base`, step `stride`), rounding once to its dtype. */
export function storeRow(ref: StridedRef, base: number, stride: number, n: number, src: Float64Array): void {
  const a = ref.buf as StorageArray;
  const st = DTYPES[ref.dtype].storage;
  if (st === 'f32' || st === 'f64') {
    const f = a as Float32Array | Float64Array;
    if (stride === 1) f.set(src.subarray(0, n), base);
    else for (let j = 0, i = base; j < n; j++, i += stride) f[i] = src[j]!;
    return;
  }
  if (ref.dtype === 'float16' || ref.dtype === 'bfloat16') {
    const enc = ref.dtype === 'float16' ? toFloat16Bits : toBFloat16Bits;
    const u = a as Uint16Array;
    for (let j = 0, i = base; j < n; j++, i += stride) u[i] = enc(src[j]!);
    return;
  }
  throw new Error(`nn kernels: unsupported dtype ${ref.dtype}`);
}

/**
 * Calls fn(offsets, r) for every row r (C order over all dims but `dim`) with each ref's element
 * offset of that row's first element; strides[q] are ref q's strides over the same shape.
 */
export function forRows(shape: readonly number[], dim: number, strides: readonly (readonly number[])[], offsets: readonly number[],
  fn: (offs: number[], r: number) => void): void {
  const dims = [...shape.keys()].filter((d) => d !== dim);
  let rows = 1;
  for (const d of dims) rows *= shape[d]!;
  if (rows === 0) return;
  const cur = offsets.slice();
  const idx = new Array<number>(dims.length).fill(0);
  for (let r = 0; r < rows; r++) {
    fn(cur, r);
    for (let k = dims.length - 1; k >= 0; k--) {
      const d = dims[k]!;
      for (let q = 0; q < cur.length; q++) cur[q]! += strides[q]![d]!;
      if (++idx[k]! < shape[d]!) break;
      for (let q = 0; q < cur.length; q++) cur[q]! -= strides[q]![d]! * shape[d]!;
      idx[k] = 0;
    }
  }
}

let scratch = new Float64Array(1024);
const scratchOf = (n: number): Float64Array => (scratch.length >= n ? scratch : (scratch = new Float64Array(n)));

// ---- exp -----------------------------------------------------------------------------------------

// exp(t) = 2^(k/64) · e^r with k = round(t·64/ln2), |r| <= ln2/128: a degree-5 polynomial is accurate to
// a few double ulps, and the table lookups are cheaper than Math.exp in V8 (the softmax hot loop).
const K64 = 64 / Math.LN2, LN2_64_HI = 0.010830424696223417, LN2_64_LO = 2.572804622327669e-14;
const EXP_FRAC = new Float64Array(64).map((_, j) => 2 ** (j / 64));
const EXP_INT = new Float64Array(2200).map((_, i) => 2 ** (i - 1100));

/** e^t for t <= 0 (softmax arguments after subtracting the max); NaN propagates. */
function expNonPos(t: number): number {
  if (!(t > -745)) return t === t ? 0 : t;
  const k = Math.round(t * K64);
  const r = (t - k * LN2_64_HI) - k * LN2_64_LO;
  const p = 1 + r * (1 + r * (0.5 + r * (1 / 6 + r * (1 / 24 + r * (1 / 120)))));
  return p * EXP_FRAC[k & 63]! * EXP_INT[(k >> 6) + 1100]!;
}

// ---- softmax -------------------------------------------------------------------------------------

export interface SoftmaxParams {
  /** Input, any strides and float dtype. */
  x: StridedRef;
  /** Output, same shape, contiguous or not, any float dtype; may alias x. */
  out: StridedRef;
  /** The softmax dim (non-negative). */
  dim: number;
  log: boolean;
  /** softmin: softmax of -x. */
  negate?: boolean;
  /** Attention mask over x's shape (broadcast strides allowed): bool (true = keep) or additive float. */
  mask?: StridedRef;
  /** Top-left causal mask on the last two dims: row l keeps columns j <= l + causalOffset. */
  causal?: boolean;
  causalOffset?: number;
  /** Rows that are entirely -inf give 0 instead of NaN (PyTorch's _safe_softmax, used by attention). */
  safe?: boolean;
}

/** In-place softmax (or log-softmax) of buf[0..n), in double. */
function softmaxRow(buf: Float64Array, n: number, log: boolean, safe: boolean): void {
  let m = -Infinity;
  for (let j = 0; j < n; j++) { const v = buf[j]!; if (v > m || v !== v) m = v; }
  if (m === -Infinity) { buf.fill(safe ? 0 : NaN, 0, n); return; } // -inf - -inf is NaN, as PyTorch
  let s = 0;
  if (log) {
    for (let j = 0; j < n; j++) s += expNonPos(buf[j]! - m);
    const lse = m + Math.log(s);
    for (let j = 0; j < n; j++) buf[j] = buf[j]! - lse;
    return;
  }
  for (let j = 0; j < n; j++) { const e = expNonPos(buf[j]! - m); buf[j] = e; s += e; }
  const inv = 1 / s;
  for (let j = 0; j < n; j++) buf[j] = buf[j]! * inv;
}

export function cpuSoftmax(p: SoftmaxParams): void {
  const { x, out, dim, log } = p;
  const shape = x.shape;
  const n = shape.length ? shape[dim]! : 1;
  const xs = shape.length ? x.strides[dim]! : 1, os = shape.length ? out.strides[dim]! : 1;
  const buf = scratchOf(n);
  const mask = p.mask, maskBool = mask?.dtype === 'bool';
  const ms = mask && shape.length ? mask.strides[dim]! : 0;
  const causal = !!p.causal, L = shape.length >= 2 ? shape[shape.length - 2]! : 1, c0 = p.causalOffset ?? 0;
  const mbuf = mask && !maskBool ? new Float64Array(n) : undefined;
  const strides = [x.strides, out.strides, ...(mask ? [mask.strides] : [])];
  const offsets = [x.offset, out.offset, ...(mask ? [mask.offset] : [])];
  forRows(shape, dim, strides, offsets, (o, r) => {
    loadRow(x, o[0]!, xs, n, buf);
    if (p.negate) for (let j = 0; j < n; j++) buf[j] = -buf[j]!;
    if (mask) {
      if (maskBool) {
        const mb = mask.buf as Uint8Array;
        for (let j = 0, i = o[2]!; j < n; j++, i += ms) if (mb[i] === 0) buf[j] = -Infinity;
      } else {
        loadRow(mask, o[2]!, ms, n, mbuf!);
        for (let j = 0; j < n; j++) buf[j] = buf[j]! + mbuf![j]!;
      }
    }
    if (causal) {
      const keep = (r % L) + c0 + 1;
      for (let j = Math.max(keep, 0); j < n; j++) buf[j] = -Infinity;
    }
    softmaxRow(buf, n, log, !!p.safe);
    storeRow(out, o[1]!, os, n, buf);
  });
}

// ---- row normalization ---------------------------------------------------------------------------

export interface RowNormParams {
  /** Input rows: `rows` rows of `n` elements, row r at x.offset + r*n (contiguous). */
  x: StridedRef;
  rows: number;
  n: number;
  eps: number;
  /** 'layer': (x - mean) * rstd; 'rms': x * rsqrt(mean(x^2) + eps). */
  mode: 'layer' | 'rms';
  /** Normalized output (contiguous, any float dtype); omitted: statistics only. */
  out?: StridedRef;
  /** Affine weight/bias (contiguous). Element j of row r uses index (r % groups)·(n/chan) + floor(j/chan). */
  weight?: StridedRef;
  bias?: StridedRef;
  groups?: number;
  chan?: number;
  /** Per-row statistics outputs (contiguous, `rows` elements): mean and biased variance. */
  mean?: StridedRef;
  var?: StridedRef;
}

function decodeAll(ref: StridedRef | undefined): Float64Array | undefined {
  if (!ref) return undefined;
  const n = ref.shape.reduce((a, b) => a * b, 1);
  const d = new Float64Array(n);
  loadRow(ref, ref.offset, 1, n, d);
  return d;
}

export function cpuRowNorm(p: RowNormParams): void {
  const { x, rows, n, eps, out } = p;
  const rms = p.mode === 'rms';
  const w = decodeAll(p.weight), b = decodeAll(p.bias);
  const groups = p.groups ?? 1, chan = p.chan ?? 1, cpg = n / chan;
  const buf = scratchOf(n);
  const means = p.mean ? new Float64Array(rows) : undefined, vars = p.var ? new Float64Array(rows) : undefined;
  for (let r = 0; r < rows; r++) {
    loadRow(x, x.offset + r * n, 1, n, buf);
    let mean = 0, v: number;
    if (rms) {
      let s2 = 0;
      for (let j = 0; j < n; j++) s2 += buf[j]! * buf[j]!;
      v = s2 / n;
    } else {
      // One pass, shifted by the first element: no catastrophic cancellation when |mean| >> std.
      const k = n > 0 ? buf[0]! : 0;
      let s1 = 0, s2 = 0;
      for (let j = 0; j < n; j++) { const d = buf[j]! - k; s1 += d; s2 += d * d; }
      mean = k + s1 / n;
      v = Math.max((s2 - (s1 * s1) / n) / n, 0);
    }
    if (means) means[r] = mean;
    if (vars) vars[r] = v;
    if (!out) continue;
    const rstd = 1 / Math.sqrt(v + eps);
    for (let j = 0; j < n; j++) buf[j] = (buf[j]! - mean) * rstd;
    if (w || b) {
      const base = (r % groups) * cpg;
      if (chan === 1) {
        if (w) for (let j = 0; j < n; j++) buf[j] = buf[j]! * w[base + j]!;
        if (b) for (let j = 0; j < n; j++) buf[j] = buf[j]! + b[base + j]!;
      } else {
        for (let c = 0, j = 0; c < cpg; c++) {
          const wc = w ? w[base + c]! : 1, bc = b ? b[base + c]! : 0;
          for (let s = 0; s < chan; s++, j++) buf[j] = buf[j]! * wc + bc;
        }
      }
    }
    storeRow(out, out.offset + r * n, 1, n, buf);
  }
  if (means) storeRow(p.mean!, p.mean!.offset, 1, rows, means);
  if (vars) storeRow(p.var!, p.var!.offset, 1, rows, vars);
}

// ---- negative log likelihood ---------------------------------------------------------------------

export interface NllParams {
  /** Log-probabilities [N, C, D] (contiguous from input.offset): class c of item (i, d) at (i·C + c)·D + d. */
  input: StridedRef;
  /** Class indices [N, D] (contiguous), int64 or uint8. */
  target: StridedRef;
  /** Class weights [C] (contiguous). */
  weight?: StridedRef;
  N: number; C: number; D: number;
  ignoreIndex: number;
  /** Per-item losses [N·D] (reduction 'none'). */
  out?: StridedRef;
  /** Two elements: the sum of -w[t]·input over kept items, and the sum of their weights w[t]. */
  sums?: StridedRef;
}

export function cpuNllLoss(p: NllParams): void {
  const { input, target, N, C, D, ignoreIndex } = p;
  const w = decodeAll(p.weight);
  const tb = target.buf as BigInt64Array | Uint8Array;
  const big = target.dtype === 'int64';
  const row = scratchOf(C);
  const losses = p.out ? new Float64Array(N * D) : undefined;
  let sum = 0, wsum = 0;
  for (let i = 0; i < N; i++) {
    for (let d = 0; d < D; d++) {
      const k = i * D + d;
      const t = big ? Number((tb as BigInt64Array)[target.offset + k]!) : (tb as Uint8Array)[target.offset + k]!;
      if (t === ignoreIndex) continue;
      if (!(t >= 0 && t < C)) throw new IndexError('nll_loss', `Target ${t} is out of bounds.`);
      loadRow(input, input.offset + (i * C + t) * D + d, 0, 1, row);
      const wt = w ? w[t]! : 1;
      const l = -wt * row[0]!;
      if (losses) losses[k] = l;
      sum += l;
      wsum += wt;
    }
  }
  if (losses) storeRow(p.out!, p.out!.offset, 1, N * D, losses);
  if (p.sums) storeRow(p.sums, p.sums.offset, 1, 2, Float64Array.of(sum, wsum));
}

// ---- local response normalization ----------------------------------------------------------------

export interface LrnParams { x: StridedRef; out: StridedRef; dim: number; size: number; alpha: number; beta: number; k: number }

/** y[c] = x[c] / (k + alpha/size · sum of x^2 over channels [c - size/2, c + (size-1)/2] (zero padded))^beta. */
export function cpuLocalResponseNorm(p: LrnParams): void {
  const { x, out, dim, size, alpha, beta, k } = p;
  const n = x.shape[dim]!, lo = Math.floor(size / 2), hi = Math.floor((size - 1) / 2);
  const buf = scratchOf(n), pre = new Float64Array(n + 1);
  forRows(x.shape, dim, [x.strides, out.strides], [x.offset, out.offset], (o) => {
    loadRow(x, o[0]!, x.strides[dim]!, n, buf);
    for (let j = 0; j < n; j++) pre[j + 1] = pre[j]! + buf[j]! * buf[j]!;
    for (let c = 0; c < n; c++) {
      const s = pre[Math.min(n, c + hi + 1)]! - pre[Math.max(0, c - lo)]!;
      buf[c] = buf[c]! / (k + (alpha * s) / size) ** beta;
    }
    storeRow(out, o[1]!, out.strides[dim]!, n, buf);
  });
}

registerKernel('local_response_norm', 'cpu', cpuLocalResponseNorm);
registerKernel('softmax', 'cpu', cpuSoftmax);
registerKernel('nll_loss', 'cpu', cpuNllLoss);
registerKernel('row_norm', 'cpu', cpuRowNorm);
