// nbx.quant: quantized weights (issue #21). QuantizedTensor (packed data + scales/zeros + layout),
// round-to-nearest quantize(), dequantize(), quant_linear(x, qweight, bias?), and quantize_(module):
// every nn.Linear of a module (except those named in `skip`) given a quantized weight in place.
// Formats and their definitions: src/quant/formats.ts; checkpoint layout: docs/quantization.md.

import { Tensor } from '../tensor/tensor.js';
import { dtypeName, type DTypeLike } from '../dtype/dtypes.js';
import { quantMatmul } from '../ops/quant.js';
import { QuantizedTensor } from './quantized_tensor.js';
import { quantize, type QuantizeOptions, type QuantScheme } from './quantize.js';
import { QUANT_FORMATS, makeLayout, dequantizeRows } from './formats.js';
import { Module } from '../nn/module.js';
import { Linear } from '../nn/linear.js';

export { QuantizedTensor, quantize, QUANT_FORMATS, makeLayout, dequantizeRows };
export type { QuantizeOptions, QuantScheme };
export type { QuantFormat, QuantLayout } from './formats.js';

/** The float weight of a QuantizedTensor (its float form's dtype unless given). */
export function dequantize(q: QuantizedTensor, dtype?: DTypeLike): Tensor {
  if (!(q instanceof QuantizedTensor)) throw new TypeError('quant.dequantize: expected a QuantizedTensor');
  return q.dequantize(dtype === undefined ? undefined : dtypeName(dtype));
}

/** y = x · dequantize(qweight)ᵀ + bias through the device's packed-weight kernel (nn.functional.linear's quantized twin). */
export function quant_linear(x: Tensor, qweight: QuantizedTensor, bias: Tensor | null = null): Tensor {
  if (!(qweight instanceof QuantizedTensor)) throw new TypeError('quant.quant_linear: qweight must be a QuantizedTensor');
  return quantMatmul('quant.quant_linear', x, qweight, bias);
}

/**
 * Quantizes every nn.Linear of `module` in place (round to nearest, `opts` as quantize()). Linears whose
 * dotted name matches `skip`, or whose in_features the int4 group does not divide, keep their float
 * weight (default `skip`: lm_head, which often shares the embedding's weight). Returns the names quantized and the names kept float.
 */
export function quantize_(module: Module, opts: QuantizeOptions & { skip?: (name: string) => boolean }): { quantized: string[]; skipped: string[] } {
  const quantized: string[] = [], skipped: string[] = [];
  for (const [name, m] of module.named_modules()) {
    if (!(m instanceof Linear) || m.is_quantized) continue;
    const g = opts.group_size ?? 128;
    const skip = opts.skip ?? ((n: string): boolean => /(^|\.)lm_head$/.test(n));
    if (skip(name) || (opts.scheme === 'int4' && m.in_features % g !== 0)) { skipped.push(name); continue; }
    m.set_quantized_weight(quantize(m.weight, opts));
    quantized.push(name);
  }
  return { quantized, skipped };
}

export const quant = { QuantizedTensor, quantize, dequantize, quant_linear, quantize_, formats: QUANT_FORMATS };
