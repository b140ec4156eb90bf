// nn.Linear and nn.Identity. Linear's forward goes through forward_native, the reference path written
// with nbx.nn.functional.linear: a fused kernel path can later replace `forward` (choosing by device and
// dtype) without any change to model code, which only ever calls `forward`.
//
// A Linear may hold a quantized weight (nbx.quant.QuantizedTensor, issue #21): set_quantized_weight(qt)
// (or declare_quantized on an empty module, as the model loader does). Its `weight` parameter is then
// null, and the packed parts are the buffers `qweight` (uint8), `scales` and `zeros` (float32, kept
// float32 by `to(dtype)`): state_dict() lists those names, which are also a quantized checkpoint's
// (docs/quantization.md), `to(device)` moves them, load_state_dict fills them. forward() runs
// nbx.quant.quant_linear, in the input's dtype. `quantized_weight` gives the QuantizedTensor (sharing
// the buffers).

import { Tensor } from '../tensor/tensor.js';
import { linear } from '../ops/linalg.js';
import { Module, MetaTensor, checkDims, emptyParameter, pyRepr, type FactoryOptions } from './module.js';
import { ShapeError, ValueError } from '../errors.js';
import { quantMatmul } from '../ops/quant.js';
import { QuantizedTensor } from '../quant/quantized_tensor.js';
import { makeLayout, scaleShapes, type QuantLayout } from '../quant/formats.js';
import type { DTypeName } from '../dtype/dtypes.js';
import { isResident, residentCopy } from '../quant/wasm_memory.js';
import { _calculate_fan_in_and_fan_out, kaiming_uniform_, uniform_ } from './init.js';

export interface LinearOptions extends FactoryOptions { bias?: boolean }

/** y = x Wᵀ + b. Parameters `weight` [out_features, in_features] and `bias` [out_features] (or null). */
export class Linear extends Module {
  readonly in_features: number;
  readonly out_features: number;
  declare weight: Tensor;
  declare bias: Tensor | null;
  /** The packed weight's layout when quantized (null: a float weight). */
  private _quant: { layout: QuantLayout; dtype: DTypeName } | null = null;
  private _qcache: QuantizedTensor | null = null;

  constructor(in_features: number, out_features: number, opts: LinearOptions = {}) {
    super();
    checkDims('nn.Linear', { in_features, out_features });
    this.in_features = in_features;
    this.out_features = out_features;
    this.register_parameter('weight', emptyParameter([out_features, in_features], opts));
    this.register_parameter('bias', (opts.bias ?? true) ? emptyParameter([out_features], opts) : null);
    this.reset_parameters();
  }

  /** PyTorch's initialization: kaiming_uniform_(a=√5) for the weight, U(-1/√fan_in, 1/√fan_in) for the bias. */
  reset_parameters(): void {
    if (!(this._member('weight') instanceof Tensor)) return; // declared on meta: nothing to initialize
    kaiming_uniform_(this.weight, { a: Math.sqrt(5) });
    if (this.bias) {
      const [fanIn] = _calculate_fan_in_and_fan_out(this.weight);
      const bound = fanIn > 0 ? 1 / Math.sqrt(fanIn) : 0;
      uniform_(this.bias, -bound, bound);
    }
  }

  override forward(input: Tensor): Tensor { return this.forward_native(input); }
  /** The reference computation, nbx.nn.functional.linear (nbx.quant.quant_linear for a quantized weight). */
  forward_native(input: Tensor): Tensor {
    if (this._quant) return quantMatmul('nn.Linear', input, this.quantized_weight!, this.bias);
    return linear(input, this.weight, this.bias);
  }

  /** Whether the weight is quantized. */
  get is_quantized(): boolean { return this._quant !== null; }

  /** The quantized weight (its tensors are this module's buffers: do not dispose it), or null for a float weight. */
  get quantized_weight(): QuantizedTensor | null {
    const q = this._quant;
    if (!q) return null;
    const qd = this._member('qweight'), s = this._member('scales'), z = this._member('zeros');
    const c = this._qcache;
    if (c && c.qdata === qd && c.scales === s && c.zeros === z) return c;
    if (!(qd instanceof Tensor)) return (this as unknown as { qweight: Tensor }).qweight as never; // throws the meta error of an unloaded module
    if (qd.device.type === 'cpu' && this.rehome()) return this.quantized_weight;
    this._qcache = new QuantizedTensor({ qdata: qd, scales: s as Tensor | null, zeros: z as Tensor | null, layout: q.layout, dtype: q.dtype });
    return this._qcache;
  }

  /**
   * Packed parts on the CPU that are plain arrays (moved there by `to('cpu')`, or loaded by hand) are
   * copied once into the quant memory, where the SIMD kernels read them in place (src/quant/wasm_memory.ts);
   * views (of a joined q/k/v weight) are left alone. True when a buffer was replaced.
   */
  private rehome(): boolean {
    let moved = false;
    for (const n of ['qweight', 'scales', 'zeros']) {
      const t = this._member(n);
      if (!(t instanceof Tensor)) continue;
      const buf = t.storage.buf as Uint8Array | Float32Array;
      if (isResident(buf) || t.storage_offset() !== 0 || t.numel() !== buf.length || !t.is_contiguous()) continue;
      const copy = residentCopy(buf);
      if (copy === buf) return moved; // no quant memory: the JavaScript loops run
      this.register_buffer(n, Tensor.fromStorage(copy, t.dt, t.shape, 'cpu'), { keep_dtype: n !== 'qweight' });
      t.dispose();
      moved = true;
    }
    return moved;
  }

  /**
   * Makes the weight `qt` (a QuantizedTensor [out_features, in_features]): the float weight is freed and
   * the packed parts become this module's buffers (it owns them now). Returns this.
   */
  set_quantized_weight(qt: QuantizedTensor): this {
    if (!(qt instanceof QuantizedTensor)) throw new TypeError('nn.Linear.set_quantized_weight: expected an nbx.quant.QuantizedTensor');
    if (qt.layout.n !== this.out_features || qt.layout.k !== this.in_features) {
      throw new ShapeError('nn.Linear.set_quantized_weight', `weight [${qt.layout.n}, ${qt.layout.k}] does not fit Linear(${this.in_features}, ${this.out_features})`);
    }
    // the float weight is dropped, not disposed: it may be tied to another module (lm_head and the embedding)
    this.register_parameter('weight', null);
    this.register_buffer('qweight', qt.qdata);
    this.register_buffer('scales', qt.scales, { keep_dtype: true });
    this.register_buffer('zeros', qt.zeros, { keep_dtype: true });
    this._quant = { layout: { ...qt.layout }, dtype: qt.dtype };
    this._qcache = null;
    return this;
  }

  /** Replaces a quantized weight by its dequantize()d float weight (in the float form's dtype); returns this. */
  dequantize_(): this {
    const q = this.quantized_weight;
    if (!q) return this;
    const w = q.dequantize();
    for (const n of ['qweight', 'scales', 'zeros']) {
      const t = this._member(n);
      this.register_buffer(n, null);
      if (t instanceof Tensor) t.dispose();
    }
    this._quant = null;
    this._qcache = null;
    this.register_parameter('weight', w);
    return this;
  }

  /**
   * Declares (inside init_empty_weights, for a loader) a quantized weight of `layout` without data:
   * meta buffers qweight / scales (/ zeros when `asymmetric`) that load_state_dict(..., { assign: true })
   * fills. `perTensor`: fp8 with one scale [1].
   */
  declare_quantized(layout: QuantLayout, opts: { asymmetric?: boolean; perTensor?: boolean; dtype?: DTypeName } = {}): this {
    const l = makeLayout('nn.Linear.declare_quantized', layout.format, layout.n, layout.k, layout.groupSize);
    if (l.n !== this.out_features || l.k !== this.in_features) throw new ShapeError('nn.Linear.declare_quantized', `layout [${l.n}, ${l.k}] does not fit Linear(${this.in_features}, ${this.out_features})`);
    const w = this._member('weight');
    const dtype = opts.dtype ?? (w ? w.dt : 'float32');
    if (w instanceof Tensor) throw new ValueError('nn.Linear.declare_quantized', 'the Linear already holds a float weight: use set_quantized_weight(nbx.quant.quantize(weight, ...))');
    this.register_parameter('weight', null);
    const sh = scaleShapes(l, !!opts.asymmetric, !!opts.perTensor);
    this.register_buffer('qweight', new MetaTensor([l.n, l.rowBytes], 'uint8'));
    this.register_buffer('scales', sh.scales ? new MetaTensor(sh.scales, 'float32') : null, { keep_dtype: true });
    this.register_buffer('zeros', sh.zeros ? new MetaTensor(sh.zeros, 'float32') : null, { keep_dtype: true });
    this._quant = { layout: l, dtype };
    this._qcache = null;
    return this;
  }

  override extra_repr(): string {
    const q = this._quant;
    const quant = q ? `, quant=${q.layout.format}${q.layout.format === 'int4' ? `(group=${q.layout.groupSize})` : ''}` : '';
    return `in_features=${this.in_features}, out_features=${this.out_features}, bias=${pyRepr(this._member('bias') !== null)}${quant}`;
  }
}

/** Returns its input unchanged (the same tensor object). Accepts and ignores any constructor arguments, as PyTorch's does. */
export class Identity extends Module {
  constructor(..._args: unknown[]) { super(); }
  override forward(input: Tensor): Tensor { return input; }
}
