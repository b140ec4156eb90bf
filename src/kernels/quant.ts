// The quantized-weight family: products with weights stored packed (nbx.quant, src/quant/), as the
// decode step of a quantized model needs them. A weight [N, K] (N output features, K inputs, as
// nn.Linear stores it) is kept in its packed format on the device, and these kernels read the packed
// bytes directly: the bytes streamed per token are what decides decode speed. Every format's meaning is
// defined once by its CPU dequantizer (src/quant/formats.ts); a kernel must give the same numbers as
// dequantize-then-matmul up to the order of accumulation.

import type { StridedRef } from '../backend/backend.js';
import type { DTypeName } from '../dtype/dtypes.js';

/**
 * Packed layouts. Rows are the N output features, each row's bytes contiguous, rows `rowBytes` apart.
 * - 'int8': int8 [N, K], symmetric per output channel: w = q · scale[n].
 * - 'int4': group-wise over K (groupSize 32/64/128): two values per byte, element k of a row in byte k/2,
 *   the even k in the low nibble. Symmetric (no zeros): w = (q − 8) · scale[n, k/g];
 *   asymmetric: w = (q − zero[n, k/g]) · scale[n, k/g], zeros float32 [N, K/g].
 * - 'fp8_e4m3': one e4m3fn byte per value, w = fp8(q) · scale (scales [1] per tensor or [N] per channel).
 * - GGUF block formats ('q8_0', 'q4_0', 'q4_1', 'q5_0', 'q5_1', 'q2_k', 'q3_k', 'q4_k', 'q5_k', 'q6_k'):
 *   each row is K / blockElems blocks exactly as llama.cpp stores them (scales inside the blocks), no
 *   separate scales or zeros.
 */
export type QuantFormat =
  | 'int8' | 'int4' | 'fp8_e4m3'
  | 'q8_0' | 'q4_0' | 'q4_1' | 'q5_0' | 'q5_1' | 'q2_k' | 'q3_k' | 'q4_k' | 'q5_k' | 'q6_k';

export interface QuantLayout {
  format: QuantFormat;
  /** Output features (rows) and inputs (columns) of the float weight. */
  n: number;
  k: number;
  /** Bytes per row of the packed data. */
  rowBytes: number;
  /** Elements per scale group along K ('int4'); K for per-channel formats; the block size for GGUF. */
  groupSize: number;
}

/**
 * out[m, n] = Σ_k x[m, k] · w[n, k] (+ bias[n]), w the dequantized weight. `x` [M, K] contiguous float
 * (float32, bfloat16 or float16), accumulated in float32, out [M, N] contiguous in x's dtype.
 */
export interface QuantMatmulParams {
  x: StridedRef;
  /** uint8 [N, rowBytes], contiguous. */
  qweight: StridedRef;
  /** float32: [N] ('int8', per-channel 'fp8_e4m3'), [1] (per-tensor fp8), [N, K/g] ('int4'); absent for GGUF. */
  scales?: StridedRef;
  /** float32 [N, K/g] for asymmetric 'int4'. */
  zeros?: StridedRef;
  /** [N] in x's dtype. */
  bias?: StridedRef;
  out: StridedRef;
  m: number;
  layout: QuantLayout;
  dtype: DTypeName;
}

/** The float weight [N, K] in `dtype` (contiguous `out`), from the same inputs. */
export interface DequantizeParams {
  qweight: StridedRef;
  scales?: StridedRef;
  zeros?: StridedRef;
  out: StridedRef;
  layout: QuantLayout;
  dtype: DTypeName;
}

export type QuantMatmulKernel = (p: QuantMatmulParams) => void;
export type DequantizeKernel = (p: DequantizeParams) => void;

/** The formats (and activation dtypes) a backend's quant kernels take; others are a typed error naming these. */
export interface QuantFeatures {
  formats: readonly QuantFormat[];
  dtypes: readonly DTypeName[];
}
