// The quantized weight formats of nbx.quant (issue #21), each DEFINED by its CPU dequantizer here: the
// float32 value of every element of a packed weight [N, K] is what dequantizeRows() computes, and every
// kernel (CPU, CUDA, WebGPU: src/kernels/quant.ts's contract) must give the numbers of
// dequantize-then-matmul up to the order of accumulation.
//
// - 'int8' (W8A16 per output channel): int8 q [N, K], scales float32 [N]: w = fround(q · s[n]).
// - 'int4' group-wise over K (groups of g = 32/64/128, or any even divisor of K): byte k/2 of a row holds
//   elements k (low nibble) and k+1 (high nibble), q in 0..15. Symmetric: w = fround((q − 8) · s[n, k/g]);
//   asymmetric: w = fround(fround(q − z[n, k/g]) · s[n, k/g]) with z float32 [N, K/g] (integers 0..15 when
//   our quantizer or an AWQ/GPTQ repack made them, so q − z is exact).
// - 'fp8_e4m3': one float8 e4m3fn byte per element, scales float32 [1] (per tensor) or [N] (per channel):
//   w = fround(e4m3(q) · s).
// - GGUF block formats (q8_0 ... q6_k): each row is K / block blocks exactly as llama.cpp stores them;
//   the value is ggml's dequantize_row_* (src/io/gguf.ts's dequantizeBlocks, checked against gguf-py).

import type { QuantFormat, QuantLayout } from '../kernels/quant.js';
import { GGML_TYPES, dequantizeBlocks } from '../io/gguf.js';
import { fromFloat8E4M3FNBits } from '../dtype/convert.js';
import { ShapeError, ValueError } from '../errors.js';

export type { QuantFormat, QuantLayout } from '../kernels/quant.js';

/** GGUF formats → their ggml type name (GGML_TYPES's names) and ggml type id. */
export const GGUF_FORMATS: Record<string, { ggml: string; id: number }> = {
  q8_0: { ggml: 'Q8_0', id: 8 }, q4_0: { ggml: 'Q4_0', id: 2 }, q4_1: { ggml: 'Q4_1', id: 3 }, q5_0: { ggml: 'Q5_0', id: 6 },
  q5_1: { ggml: 'Q5_1', id: 7 }, q2_k: { ggml: 'Q2_K', id: 10 }, q3_k: { ggml: 'Q3_K', id: 11 }, q4_k: { ggml: 'Q4_K', id: 12 },
  q5_k: { ggml: 'Q5_K', id: 13 }, q6_k: { ggml: 'Q6_K', id: 14 },
};

export const QUANT_FORMATS: readonly QuantFormat[] = ['int8', 'int4', 'fp8_e4m3', ...Object.keys(GGUF_FORMATS) as QuantFormat[]];

export const isGgufFormat = (f: QuantFormat): boolean => f in GGUF_FORMATS;

/** The QuantFormat of a ggml type name ('Q4_K' → 'q4_k'), or undefined for float and unsupported types. */
export function formatOfGgml(typeName: string): QuantFormat | undefined {
  const f = typeName.toLowerCase();
  return f in GGUF_FORMATS ? (f as QuantFormat) : undefined;
}

/**
 * The layout of a weight [n, k] in `format`. `groupSize` is the int4 group (default 128); other formats
 * fix it (K for per-channel formats, the block size for GGUF). Shapes the format cannot hold are a ShapeError.
 */
export function makeLayout(op: string, format: QuantFormat, n: number, k: number, groupSize?: number): QuantLayout {
  if (!Number.isInteger(n) || !Number.isInteger(k) || n < 1 || k < 1) throw new ShapeError(op, `a quantized weight needs [N, K] with N, K ≥ 1, got [${n}, ${k}]`);
  switch (format) {
    case 'int8': case 'fp8_e4m3': return { format, n, k, rowBytes: k, groupSize: k };
    case 'int4': {
      const g = groupSize ?? 128;
      if (!Number.isInteger(g) || g < 2 || g % 2 !== 0 || k % g !== 0) {
        throw new ShapeError(op, `int4 needs an even group size dividing K (32, 64 or 128 usually), got group ${g} for K = ${k}`);
      }
      return { format, n, k, rowBytes: k / 2, groupSize: g };
    }
    default: {
      const gg = GGUF_FORMATS[format];
      if (!gg) throw new ValueError(op, `unknown quantized format '${String(format)}' (${QUANT_FORMATS.join(', ')} are known)`);
      const t = GGML_TYPES[gg.id]!;
      if (k % t.block !== 0) throw new ShapeError(op, `${format} rows hold blocks of ${t.block} elements; K = ${k} is not a multiple`);
      return { format, n, k, rowBytes: (k / t.block) * t.bytes, groupSize: t.block };
    }
  }
}

/** The shapes of the scales and zeros tensors a layout takes (null: none). `perTensor` for fp8 [1] scales. */
export function scaleShapes(l: QuantLayout, asymmetric: boolean, perTensor = false): { scales: number[] | null; zeros: number[] | null } {
  switch (l.format) {
    case 'int8': return { scales: [l.n], zeros: null };
    case 'fp8_e4m3': return { scales: perTensor ? [1] : [l.n], zeros: null };
    case 'int4': return { scales: [l.n, l.k / l.groupSize], zeros: asymmetric ? [l.n, l.k / l.groupSize] : null };
    default: return { scales: null, zeros: null };
  }
}

let fp8Lut: Float32Array | undefined;
/** The 256 e4m3fn values (NaN for 0x7f / 0xff). */
export function fp8E4M3Table(): Float32Array {
  if (!fp8Lut) { fp8Lut = new Float32Array(256); for (let b = 0; b < 256; b++) fp8Lut[b] = fromFloat8E4M3FNBits(b); }
  return fp8Lut;
}

/**
 * THE DEFINITION of every format: rows [r0, r1) of the weight as float32, into out (row-major, K per row,
 * starting at out[0]). q holds the whole packed weight (N · rowBytes bytes); scales/zeros as the layout says.
 */
export function dequantizeRows(l: QuantLayout, q: Uint8Array, scales: Float32Array | null, zeros: Float32Array | null,
  r0: number, r1: number, out: Float32Array): void {
  const K = l.k, rb = l.rowBytes, fr = Math.fround;
  switch (l.format) {
    case 'int8': {
      const qi = new Int8Array(q.buffer, q.byteOffset, q.byteLength);
      for (let r = r0; r < r1; r++) {
        const s = scales![r]!, o = r * rb, y = (r - r0) * K;
        for (let k = 0; k < K; k++) out[y + k] = qi[o + k]! * s;
      }
      return;
    }
    case 'fp8_e4m3': {
      const lut = fp8E4M3Table(), perTensor = scales!.length === 1;
      for (let r = r0; r < r1; r++) {
        const s = perTensor ? scales![0]! : scales![r]!, o = r * rb, y = (r - r0) * K;
        for (let k = 0; k < K; k++) out[y + k] = lut[q[o + k]!]! * s;
      }
      return;
    }
    case 'int4': {
      const g = l.groupSize, G = K / g;
      for (let r = r0; r < r1; r++) {
        const o = r * rb, y = (r - r0) * K;
        for (let gi = 0; gi < G; gi++) {
          const s = scales![r * G + gi]!, z = zeros ? zeros[r * G + gi]! : 8;
          for (let k = gi * g; k < (gi + 1) * g; k += 2) {
            const b = q[o + (k >> 1)]!;
            out[y + k] = fr((b & 15) - z) * s;
            out[y + k + 1] = fr((b >> 4) - z) * s;
          }
        }
      }
      return;
    }
    default: {
      const t = GGUF_FORMATS[l.format]!.ggml;
      out.set(dequantizeBlocks(t, q.subarray(r0 * rb, r1 * rb), (r1 - r0) * K));
    }
  }
}

/** Bytes of a layout's packed data plus its scales and zeros. */
export function layoutBytes(l: QuantLayout, asymmetric: boolean, perTensor = false): number {
  const s = scaleShapes(l, asymmetric, perTensor);
  const n = (x: number[] | null): number => (x ? x.reduce((a, b) => a * b, 1) * 4 : 0);
  return l.n * l.rowBytes + n(s.scales) + n(s.zeros);
}
