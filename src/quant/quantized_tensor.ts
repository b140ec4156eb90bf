// nbx.quant.QuantizedTensor: a weight [N, K] kept packed on its device (issue #21). It holds the packed
// bytes (a uint8 tensor [N, rowBytes]), float32 scales and zero points where the format has them, and
// the layout (src/kernels/quant.ts); `dtype` is the dtype of its float form (what dequantize() gives by
// default). The three tensors are ordinary tensors: a Linear holding a quantized weight keeps them as
// its buffers `qweight`, `scales`, `zeros` (src/nn/linear.ts), which are also the names a quantized
// checkpoint stores (docs/quantization.md).

import { Tensor } from '../tensor/tensor.js';
import { dtypeName, DTYPES, type DTypeLike, type DTypeName } from '../dtype/dtypes.js';
import { Device, type DeviceLike } from '../backend/backend.js';
import { DTypeError, ShapeError, ValueError } from '../errors.js';
import { fmtShape } from '../tensor/shape.js';
import type { QuantFormat, QuantLayout } from '../kernels/quant.js';
import { dequantizeWeight, type QuantWeight } from '../ops/quant.js';
import { makeLayout, scaleShapes } from './formats.js';
import { residentCopy } from './wasm_memory.js';
import { cat as nbx_cat } from '../ops/shape.js';

const OP = 'quant.QuantizedTensor';

export class QuantizedTensor implements QuantWeight {
  readonly qdata: Tensor;
  readonly scales: Tensor | null;
  readonly zeros: Tensor | null;
  readonly layout: QuantLayout;
  /** The dtype of the float form (dequantize()'s default; a Linear computes in its input's dtype). */
  readonly dtype: DTypeName;

  /**
   * Wraps packed parts (checked against the layout): `qdata` uint8 [N, rowBytes]; `scales` float32 [N]
   * (int8, per-channel fp8), [1] (per-tensor fp8) or [N, K/g] (int4); `zeros` float32 [N, K/g] for
   * asymmetric int4; none for GGUF formats. The QuantizedTensor owns them (dispose frees them).
   */
  constructor(parts: { qdata: Tensor; scales?: Tensor | null; zeros?: Tensor | null; layout: QuantLayout; dtype?: DTypeLike }) {
    const { qdata, layout: l } = parts;
    const scales = parts.scales ?? null, zeros = parts.zeros ?? null;
    if (!(qdata instanceof Tensor)) throw new TypeError(`${OP}: qdata must be a Tensor`);
    const check = makeLayout(OP, l.format, l.n, l.k, l.groupSize);
    if (check.rowBytes !== l.rowBytes) throw new ShapeError(OP, `layout rowBytes ${l.rowBytes} is wrong for ${l.format} [${l.n}, ${l.k}] (${check.rowBytes})`);
    if (qdata.dt !== 'uint8' || qdata.ndim !== 2 || qdata.shape[0] !== l.n || qdata.shape[1] !== l.rowBytes) {
      throw new ShapeError(OP, `packed data must be uint8 [${l.n}, ${l.rowBytes}] for ${l.format} [${l.n}, ${l.k}], got ${qdata.dt} ${fmtShape(qdata.shape)}`);
    }
    const perTensor = l.format === 'fp8_e4m3' && scales !== null && scales.numel() === 1;
    const want = scaleShapes(l, zeros !== null, perTensor);
    const same = (t: Tensor | null, s: number[] | null): boolean => (t === null ? s === null : s !== null && t.ndim === s.length && t.shape.every((d, i) => d === s[i]));
    if (!same(scales, want.scales)) throw new ShapeError(OP, `${l.format} needs scales ${want.scales ? fmtShape(want.scales) : 'none'}, got ${scales ? fmtShape(scales.shape) : 'none'}`);
    if (zeros !== null && l.format !== 'int4') throw new ValueError(OP, `${l.format} has no zero points`);
    if (!same(zeros, want.zeros)) throw new ShapeError(OP, `zeros must be ${want.zeros ? fmtShape(want.zeros) : 'none'}, got ${zeros ? fmtShape(zeros.shape) : 'none'}`);
    for (const t of [scales, zeros]) {
      if (t && t.dt !== 'float32') throw new DTypeError(OP, `scales and zeros are float32, got ${t.dt}`);
      if (t && t.device !== qdata.device) throw new ValueError(OP, `scales/zeros on ${t.device}, packed data on ${qdata.device}`);
    }
    const dt = dtypeName(parts.dtype ?? 'float32');
    if (DTYPES[dt].kind !== 'float') throw new DTypeError(OP, `the float form's dtype must be floating point, got ${dt}`);
    this.qdata = qdata; this.scales = scales; this.zeros = zeros; this.layout = { ...l }; this.dtype = dt;
  }

  get format(): QuantFormat { return this.layout.format; }
  /** [N, K]: the float weight's shape. */
  get shape(): number[] { return [this.layout.n, this.layout.k]; }
  get device(): Device { return this.qdata.device; }
  /** Bytes held: packed data, scales and zeros. */
  get nbytes(): number { return [this.qdata, this.scales, this.zeros].reduce((s, t) => s + (t ? t.numel() * DTYPES[t.dt].itemsize : 0), 0); }
  get isDisposed(): boolean { return this.qdata.isDisposed; }

  /** The float weight [N, K] (default: the float form's dtype), on this device, by the format's definition. */
  dequantize(dtype?: DTypeLike): Tensor { return dequantizeWeight('quant.QuantizedTensor.dequantize', this, dtype === undefined ? this.dtype : dtypeName(dtype)); }

  /** A copy on `device` (this one when already there); `dtype` changes the float form's dtype only. */
  to(device: DeviceLike | { device?: DeviceLike; dtype?: DTypeLike }): QuantizedTensor {
    const o = typeof device === 'object' && device !== null && !(device instanceof Device) ? device : { device: device as DeviceLike };
    const dev = o.device === undefined ? this.device : Device.of(o.device);
    const dt = o.dtype === undefined ? this.dtype : dtypeName(o.dtype);
    if (dev === this.device && dt === this.dtype) return this;
    const mv = (t: Tensor | null): Tensor | null => {
      if (t === null) return null;
      const c = t.device === dev ? t.clone() : t.to(dev);
      if (dev.type !== 'cpu') return c;
      // on the CPU, into the quant memory (read in place by the SIMD kernels)
      const r = Tensor.fromStorage(residentCopy(c.storage.buf as Uint8Array | Float32Array), c.dt, c.shape, 'cpu');
      c.dispose();
      return r;
    };
    return new QuantizedTensor({ qdata: mv(this.qdata)!, scales: mv(this.scales), zeros: mv(this.zeros), layout: this.layout, dtype: dt });
  }

  dispose(): void { this.qdata.dispose(); this.scales?.dispose(); this.zeros?.dispose(); }

  /**
   * The weights stacked along N (rows), as one weight whose product is the parts' products side by side
   * (q/k/v or gate/up projections run as one kernel call), or null when they cannot be joined exactly:
   * different formats, K, int4 groups or symmetry, devices. Per-tensor fp8 scales become per-channel ones
   * (each part's scale repeated over its rows: the same numbers). The result owns new tensors (on the
   * CPU in the quant memory); rows(i) of it are the parts.
   */
  static cat(parts: readonly QuantizedTensor[]): QuantizedTensor | null {
    const a = parts[0];
    if (!a || parts.some((p) => p.isDisposed)) return null;
    const l = a.layout, dev = a.device;
    for (const p of parts) {
      const m = p.layout;
      if (m.format !== l.format || m.k !== l.k || m.rowBytes !== l.rowBytes || m.groupSize !== l.groupSize || p.device !== dev || (p.zeros === null) !== (a.zeros === null) || (p.scales === null) !== (a.scales === null)) return null;
    }
    const n = parts.reduce((t, p) => t + p.layout.n, 0);
    const cpu = dev.type === 'cpu';
    const home = (t: Tensor): Tensor => {
      if (!cpu) return t;
      const r = Tensor.fromStorage(residentCopy(t.storage.buf as Uint8Array | Float32Array), t.dt, t.shape, 'cpu');
      t.dispose();
      return r;
    };
    const catRows = (ts: Tensor[]): Tensor => home(nbx_cat(ts));
    const scalesOf = (p: QuantizedTensor): Tensor => (l.format === 'fp8_e4m3' && p.scales!.numel() === 1 ? p.scales!.expand([p.layout.n]) : p.scales!);
    return new QuantizedTensor({
      qdata: catRows(parts.map((p) => p.qdata)),
      scales: a.scales ? catRows(parts.map(scalesOf)) : null,
      zeros: a.zeros ? catRows(parts.map((p) => p.zeros!)) : null,
      layout: { ...l, n }, dtype: a.dtype,
    });
  }

  /** Rows [r0, r1) as a QuantizedTensor of views (sharing this one's tensors; do not dispose it separately). */
  rows(r0: number, r1: number): QuantizedTensor {
    const l = this.layout;
    const perTensor = l.format === 'fp8_e4m3' && this.scales!.numel() === 1;
    return new QuantizedTensor({
      qdata: this.qdata.slice(0, r0, r1), scales: this.scales ? (perTensor ? this.scales : this.scales.slice(0, r0, r1)) : null,
      zeros: this.zeros ? this.zeros.slice(0, r0, r1) : null, layout: { ...l, n: r1 - r0 }, dtype: this.dtype,
    });
  }

  toString(): string {
    const l = this.layout;
    return `QuantizedTensor(${l.format}${l.format === 'int4' ? ` g${l.groupSize}${this.zeros ? ' asym' : ' sym'}` : ''}, shape=[${l.n}, ${l.k}], dtype=${this.dtype}, device=${this.device})`;
  }
}
