// Random packed weights in every format of the quant contract (src/kernels/quant.ts) and their float
// reference: the CPU dequantizers (src/io/gguf.ts's dequantizeBlocks for the GGUF block formats; the
// contract's formulas for int8 / int4 / fp8_e4m3), for the GPU kernels' tests and `nbx bench quant --check`.
// Independent of the CPU quant kernel so that the GPU kernels can be checked before it exists.

import type { QuantFormat, QuantLayout } from '../src/kernels/quant.js';
import { dequantizeBlocks } from '../src/io/gguf.js';
import { fromFloat8E4M3FNBits, toFloat16Bits } from '../src/dtype/convert.js';

export const ALL_FORMATS: readonly QuantFormat[] = ['int8', 'int4', 'fp8_e4m3', 'q8_0', 'q4_0', 'q4_1', 'q5_0', 'q5_1', 'q2_k', 'q3_k', 'q4_k', 'q5_k', 'q6_k'];

const BLOCK: Record<string, { elems: number; bytes: number; halfs: number[]; gguf: string }> = {
  q8_0: { elems: 32, bytes: 34, halfs: [0], gguf: 'Q8_0' },
  q4_0: { elems: 32, bytes: 18, halfs: [0], gguf: 'Q4_0' },
  q4_1: { elems: 32, bytes: 20, halfs: [0, 2], gguf: 'Q4_1' },
  q5_0: { elems: 32, bytes: 22, halfs: [0], gguf: 'Q5_0' },
  q5_1: { elems: 32, bytes: 24, halfs: [0, 2], gguf: 'Q5_1' },
  q2_k: { elems: 256, bytes: 84, halfs: [80, 82], gguf: 'Q2_K' },
  q3_k: { elems: 256, bytes: 110, halfs: [108], gguf: 'Q3_K' },
  q4_k: { elems: 256, bytes: 144, halfs: [0, 2], gguf: 'Q4_K' },
  q5_k: { elems: 256, bytes: 176, halfs: [0, 2], gguf: 'Q5_K' },
  q6_k: { elems: 256, bytes: 210, halfs: [208], gguf: 'Q6_K' },
};

/** Elements per block (32-element sub-blocks for int8/int4/fp8: K must be a multiple for the GEMV). */
export const blockElems = (f: QuantFormat): number => BLOCK[f]?.elems ?? 32;

export function rowBytes(f: QuantFormat, k: number): number {
  if (f === 'int8' || f === 'fp8_e4m3') return k;
  if (f === 'int4') return Math.ceil(k / 2);
  return (k / BLOCK[f]!.elems) * BLOCK[f]!.bytes;
}

/** A deterministic generator (LCG), values in [0, 1). */
export function lcg(seed: number): () => number {
  let s = seed >>> 0;
  return () => { s = (Math.imul(s, 1664525) + 1013904223) >>> 0; return s / 2 ** 32; };
}

export interface PackedWeight {
  layout: QuantLayout;
  qweight: Uint8Array;
  scales?: Float32Array;
  zeros?: Float32Array;
  scaleShape?: number[];
}

/**
 * Random packed weight [n, k] in format f. GGUF blocks get small positive float16 scales (random bytes
 * elsewhere); fp8 avoids its NaN codes; int4 scales are [n, ⌈k/g⌉] (zeros too when asym).
 */
export function randomPacked(f: QuantFormat, n: number, k: number, seed: number, opts: { groupSize?: number; asym?: boolean; perTensor?: boolean } = {}): PackedWeight {
  const rnd = lcg(seed), rb = rowBytes(f, k);
  const q = new Uint8Array(n * rb);
  for (let i = 0; i < q.length; i++) q[i] = (rnd() * 256) | 0;
  const layout: QuantLayout = { format: f, n, k, rowBytes: rb, groupSize: f === 'int4' ? (opts.groupSize ?? 128) : BLOCK[f]?.elems ?? k };
  if (f === 'fp8_e4m3') { for (let i = 0; i < q.length; i++) if ((q[i]! & 0x7f) === 0x7f) q[i]! ^= 1; }
  const blk = BLOCK[f];
  if (blk) {
    const dv = new DataView(q.buffer);
    for (let o = 0; o < q.length; o += blk.bytes) {
      for (const h of blk.halfs) dv.setUint16(o + h, toFloat16Bits(0.002 + rnd() * 0.02), true);
    }
    return { layout, qweight: q };
  }
  if (f === 'int4') {
    const g = layout.groupSize, cols = Math.ceil(k / g);
    const scales = new Float32Array(n * cols).map(() => 0.002 + rnd() * 0.02);
    const zeros = opts.asym ? new Float32Array(n * cols).map(() => Math.round(rnd() * 15)) : undefined;
    return { layout, qweight: q, scales, ...(zeros ? { zeros } : {}), scaleShape: [n, cols] };
  }
  const ns = f === 'fp8_e4m3' && opts.perTensor ? 1 : n;
  const scales = new Float32Array(ns).map(() => (f === 'int8' ? 0.0002 + rnd() * 0.002 : 0.002 + rnd() * 0.02));
  return { layout, qweight: q, scales, scaleShape: [ns] };
}

/** The float32 weight [n, k] the CPU dequantizers give. */
export function dequantRef(p: PackedWeight): Float32Array {
  const { format: f, n, k, rowBytes: rb, groupSize: g } = p.layout;
  const fr = Math.fround;
  const out = new Float32Array(n * k);
  const blk = BLOCK[f];
  if (blk) {
    for (let r = 0; r < n; r++) out.set(dequantizeBlocks(blk.gguf, p.qweight.subarray(r * rb, (r + 1) * rb), k), r * k);
    return out;
  }
  const s = p.scales!;
  for (let r = 0; r < n; r++) {
    for (let c = 0; c < k; c++) {
      const b = p.qweight[r * rb + (f === 'int4' ? c >> 1 : c)]!;
      let v: number;
      if (f === 'int8') v = fr(((b << 24) >> 24) * s[r]!);
      else if (f === 'fp8_e4m3') v = fr(fromFloat8E4M3FNBits(b) * s[s.length === 1 ? 0 : r]!);
      else {
        const nib = (b >> (4 * (c & 1))) & 15, si = r * Math.ceil(k / g) + Math.floor(c / g);
        v = fr(fr(nib - (p.zeros ? p.zeros[si]! : 8)) * s[si]!);
      }
      out[r * k + c] = v;
    }
  }
  return out;
}

/** out[m, n] = Σ_k x[m, k] · w[n, k] (+ bias[n]) in float64. */
export function matmulRef(x: ArrayLike<number>, w: Float32Array, m: number, n: number, k: number, bias?: ArrayLike<number>): Float64Array {
  const out = new Float64Array(m * n);
  for (let i = 0; i < m; i++) {
    for (let j = 0; j < n; j++) {
      let s = 0;
      for (let l = 0; l < k; l++) s += x[i * k + l]! * w[j * k + l]!;
      out[i * n + j] = s + (bias ? bias[j]! : 0);
    }
  }
  return out;
}

/** Largest |a − b| / (1 + max|b|) over the arrays. */
export function relErr(a: ArrayLike<number>, b: ArrayLike<number>): number {
  let scale = 0, worst = 0;
  for (let i = 0; i < b.length; i++) scale = Math.max(scale, Math.abs(b[i]!));
  for (let i = 0; i < b.length; i++) {
    const e = Math.abs(a[i]! - b[i]!);
    worst = Math.max(worst, Number.isNaN(e) ? Infinity : e);
  }
  return worst / (1 + scale);
}

/** Tolerances of quant_matmul's output against the float64 reference, per activation dtype (its rounding plus float32 sums). */
export const QUANT_TOL: Record<string, number> = { float32: 2e-5, float16: 2e-3, bfloat16: 1e-2 };
