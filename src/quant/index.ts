// nbx.quant: quantized weights (issue #21). QuantizedTensor (packed data + scales/zeros + layout),
// round-to-nearest quantize(), dequantize(), quant_linear(x, qweight, bias?), and quantize_(module):
// every nn.Linear of a module (except those named in `skip`; lm_head unless `lm_head: true`) given a quantized
// weight in place.
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

/** Options of quantize_: quantize()'s, plus which Linears keep their float weight. */
export interface QuantizeModuleOptions extends QuantizeOptions {
  /**
   * Linears (by dotted name) that keep their float weight. Default: the output projection `lm_head`
   * (the AWQ/GPTQ convention). A `skip` given replaces the default, so it decides for lm_head too
   * unless `lm_head` is given.
   */
  skip?: (name: string) => boolean;
  /**
   * Whether the output projection (a Linear named `lm_head`) is quantized too, with the same scheme:
   * true is gpt-fast's convention (its int8 / int4 modes quantize every Linear; llama.cpp's Q4_K_M keeps
   * output.weight in Q6_K). Given, it decides for lm_head whatever `skip` says; left out, `skip` decides
   * (by default lm_head stays float). A lm_head tied to the embedding (tie_word_embeddings) is untied:
   * the lm_head gets its own packed copy of the weight and the embedding keeps the float one, so the
   * embedding lookup is unchanged (listed in `untied`).
   */
  lm_head?: boolean;
}

const isLmHead = (name: string): boolean => /(^|\.)lm_head$/.test(name);

/**
 * Quantizes every nn.Linear of `module` in place (round to nearest, `opts` as quantize()). Linears that
 * `opts.skip` / `opts.lm_head` keep float (default: lm_head), or whose in_features the int4 group does
 * not divide, keep their float weight. Returns the names quantized, the names kept float, and the
 * quantized Linears whose float weight another module still holds (a tied lm_head: that module, the
 * embedding, keeps it).
 */
export function quantize_(module: Module, opts: QuantizeModuleOptions): { quantized: string[]; skipped: string[]; untied: string[] } {
  const quantized: string[] = [], skipped: string[] = [], untied: string[] = [];
  const g = opts.group_size ?? 128;
  const skip = opts.skip ?? isLmHead;
  const keepFloat = (name: string): boolean => (opts.lm_head !== undefined && isLmHead(name) ? !opts.lm_head : skip(name));
  // how many names hold each parameter (2+ for a tied one)
  const holders = new Map<unknown, number>();
  for (const [, p] of module.named_parameters({ remove_duplicate: false })) holders.set(p, (holders.get(p) ?? 0) + 1);
  for (const [name, m] of module.named_modules()) {
    if (!(m instanceof Linear) || m.is_quantized) continue;
    if (keepFloat(name) || (opts.scheme === 'int4' && m.in_features % g !== 0)) { skipped.push(name); continue; }
    const tied = (holders.get(m.weight) ?? 0) > 1;
    // set_quantized_weight drops this Linear's float weight without freeing it: a tied holder keeps it
    m.set_quantized_weight(quantize(m.weight, opts));
    quantized.push(name);
    if (tied) untied.push(name);
  }
  return { quantized, skipped, untied };
}

export const quant = { QuantizedTensor, quantize, dequantize, quant_linear, quantize_, formats: QUANT_FORMATS };
