// The packed-weight operations of nbx.quant (issue #21): the product of activations with a weight kept in
// a quantized format, and its dequantization. One definition (src/quant/formats.ts's dequantizer, then
// linear), implemented per backend by the 'quant_matmul' and 'dequantize' kernels (src/kernels/quant.ts).
// A device whose kernels lack the format or the activation dtype is a typed error naming what it has
// (kernelFeatures('quant', device)); nothing falls back silently. A device without its own quant kernels
// runs the CPU's on host copies when its backend stages kernels (announced and counted there), with the
// CPU's features.

import { Tensor } from '../tensor/tensor.js';
import { DTYPES, type DTypeName } from '../dtype/dtypes.js';
import { DeviceError, DTypeError, ShapeError, UnsupportedError } from '../errors.js';
import { fmtShape } from '../tensor/shape.js';
import { hasKernel, kernel, kernelFeatures } from '../kernels/registry.js';
import type { QuantLayout } from '../kernels/quant.js';
import type { Device } from '../backend/backend.js';

/** What the ops need of a QuantizedTensor (src/quant/quantized_tensor.ts). */
export interface QuantWeight {
  readonly qdata: Tensor;
  readonly scales: Tensor | null;
  readonly zeros: Tensor | null;
  readonly layout: QuantLayout;
}

/** Throws a typed error unless `device`'s quant kernels take `layout.format` with `dtype` activations. */
export function checkQuantSupport(op: string, device: Device, layout: QuantLayout, dtype: DTypeName): void {
  // staged kernels are the CPU's: its features apply
  const f = kernelFeatures('quant', hasKernel('quant_matmul', device.type) ? device : 'cpu');
  if (!f.formats.includes(layout.format)) {
    throw new UnsupportedError(op, `${device.type} has no kernel for quantized format '${layout.format}'${f.formats.length ? ` (its quant kernels take ${f.formats.join(', ')})` : ' (it has no quant kernels)'}`);
  }
  if (!f.dtypes.includes(dtype)) {
    throw new DTypeError(op, `${device.type}'s quant kernels take ${f.dtypes.join(', ')} activations, got ${dtype}`);
  }
}

function checkParts(op: string, w: QuantWeight): void {
  const { qdata, scales, zeros, layout: l } = w;
  if (qdata.dt !== 'uint8' || qdata.ndim !== 2 || qdata.shape[0] !== l.n || qdata.shape[1] !== l.rowBytes) {
    throw new ShapeError(op, `packed data must be uint8 [${l.n}, ${l.rowBytes}] for ${l.format} [${l.n}, ${l.k}], got ${qdata.dt} ${fmtShape(qdata.shape)}`);
  }
  for (const [name, t] of [['scales', scales], ['zeros', zeros]] as const) {
    if (t && t.dt !== 'float32') throw new DTypeError(op, `${name} must be float32, got ${t.dt}`);
    if (t && t.device !== qdata.device) throw new DeviceError(op, `${name} is on ${t.device}, the packed data on ${qdata.device}`);
  }
}

const contig = (t: Tensor | null): Tensor | null => (t === null ? null : t.is_contiguous() ? t : t.contiguous());

/**
 * y = x · dequantize(w)ᵀ (+ bias): x [..., K] float (float32/bfloat16/float16 as the device's features
 * say), y [..., N] in x's dtype, accumulated in float32.
 */
export function quantMatmul(op: string, x: Tensor, w: QuantWeight, bias: Tensor | null = null): Tensor {
  if (!(x instanceof Tensor)) throw new TypeError(`${op}: input must be a Tensor`);
  checkParts(op, w);
  const l = w.layout;
  if (DTYPES[x.dt].kind !== 'float') throw new DTypeError(op, `input must be a floating-point tensor, got ${x.dt}`);
  if (x.ndim < 1 || x.shape[x.ndim - 1] !== l.k) throw new ShapeError(op, `input ${fmtShape(x.shape)} cannot be multiplied by a quantized weight [${l.n}, ${l.k}] (last dim must be ${l.k})`);
  if (x.device !== w.qdata.device) throw new DeviceError(op, `input is on ${x.device}, the quantized weight on ${w.qdata.device}: move one (.to())`);
  if (bias) {
    if (bias.ndim !== 1 || bias.shape[0] !== l.n) throw new ShapeError(op, `bias must be [${l.n}], got ${fmtShape(bias.shape)}`);
    if (bias.dt !== x.dt) throw new DTypeError(op, `bias must have the input's dtype ${x.dt}, got ${bias.dt}`);
    if (bias.device !== x.device) throw new DeviceError(op, `bias is on ${bias.device}, the input on ${x.device}`);
  }
  checkQuantSupport(op, x.device, l, x.dt);
  const m = x.numel() / l.k;
  const out = Tensor.empty([...x.shape.slice(0, -1), l.n], x.dt, x.device);
  if (m === 0) return out;
  const xc = contig(x)!, q = contig(w.qdata)!, s = contig(w.scales), z = contig(w.zeros), b = contig(bias);
  try {
    kernel('quant_matmul', x.device, op)({
      x: xc.ref(), qweight: q.ref(), scales: s?.ref(), zeros: z?.ref(), bias: b?.ref(), out: out.ref(), m, layout: l, dtype: x.dt,
    });
  } catch (e) { out.dispose(); throw e; } finally {
    if (xc !== x) xc.dispose();
    if (q !== w.qdata) q.dispose();
    if (s && s !== w.scales) s.dispose();
    if (z && z !== w.zeros) z.dispose();
    if (b && b !== bias) b.dispose();
  }
  return out;
}

/** The float weight [N, K] in `dtype`, on the packed data's device. */
export function dequantizeWeight(op: string, w: QuantWeight, dtype: DTypeName): Tensor {
  checkParts(op, w);
  const dev = w.qdata.device;
  if (DTYPES[dtype].kind !== 'float') throw new DTypeError(op, `dequantize gives a floating-point tensor, not ${dtype}`);
  checkQuantSupport(op, dev, w.layout, dtype);
  const out = Tensor.empty([w.layout.n, w.layout.k], dtype, dev);
  const q = contig(w.qdata)!, s = contig(w.scales), z = contig(w.zeros);
  try {
    kernel('dequantize', dev, op)({ qweight: q.ref(), scales: s?.ref(), zeros: z?.ref(), out: out.ref(), layout: w.layout, dtype });
  } catch (e) { out.dispose(); throw e; } finally {
    if (q !== w.qdata) q.dispose();
    if (s && s !== w.scales) s.dispose();
    if (z && z !== w.zeros) z.dispose();
  }
  return out;
}
