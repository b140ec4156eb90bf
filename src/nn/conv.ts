// nn.Conv1d and nn.Conv2d: PyTorch's constructor arguments, parameter shapes ([out, in/groups, *kernel]),
// initialization and printout; forward is nbx.nn.functional.conv1d / conv2d.

import { Tensor } from '../tensor/tensor.js';
import { conv1d, conv2d } from '../ops/conv.js';
import { UnsupportedError, ValueError } from '../errors.js';
import { Module, checkDims, emptyParameter, pyRepr, shapeArg, type FactoryOptions } from './module.js';
import { _calculate_fan_in_and_fan_out, kaiming_uniform_, uniform_ } from './init.js';

type IntOrTuple = number | readonly number[];

export interface ConvOptions extends FactoryOptions {
  stride?: IntOrTuple;
  /** An int, one per spatial dim, or 'valid' / 'same'. */
  padding?: IntOrTuple | 'valid' | 'same';
  dilation?: IntOrTuple;
  groups?: number;
  bias?: boolean;
  /** Only 'zeros' is implemented; 'reflect', 'replicate' and 'circular' are typed errors. */
  padding_mode?: 'zeros' | 'reflect' | 'replicate' | 'circular';
}

abstract class ConvNd extends Module {
  readonly in_channels: number;
  readonly out_channels: number;
  readonly kernel_size: number[];
  readonly stride: number[];
  readonly padding: number[] | 'valid' | 'same';
  readonly dilation: number[];
  readonly groups: number;
  readonly padding_mode: 'zeros';
  readonly output_padding: number[];
  declare weight: Tensor;
  declare bias: Tensor | null;

  constructor(n: number, in_channels: number, out_channels: number, kernel_size: IntOrTuple, opts: ConvOptions) {
    super();
    const op = `nn.Conv${n}d`;
    checkDims(op, { in_channels, out_channels });
    const groups = opts.groups ?? 1;
    if (!Number.isInteger(groups) || groups <= 0) throw new ValueError(op, 'groups must be a positive integer');
    if (in_channels % groups !== 0) throw new ValueError(op, 'in_channels must be divisible by groups');
    if (out_channels % groups !== 0) throw new ValueError(op, 'out_channels must be divisible by groups');
    const padding = opts.padding ?? 0;
    const stride = shapeArg(op, 'stride', opts.stride ?? 1, n);
    if (typeof padding === 'string') {
      if (padding !== 'valid' && padding !== 'same') throw new ValueError(op, `Invalid padding string '${String(padding)}', should be one of {'valid', 'same'}`);
      if (padding === 'same' && stride.some((s) => s !== 1)) throw new ValueError(op, "padding='same' is not supported for strided convolutions");
    }
    const mode = opts.padding_mode ?? 'zeros';
    if (!['zeros', 'reflect', 'replicate', 'circular'].includes(mode)) {
      throw new ValueError(op, `padding_mode must be one of ['zeros', 'reflect', 'replicate', 'circular'], but got padding_mode='${String(mode)}'`);
    }
    if (mode !== 'zeros') throw new UnsupportedError(op, `padding_mode='${mode}' is not implemented; only 'zeros' is (pad the input yourself and use padding=0)`);
    this.in_channels = in_channels;
    this.out_channels = out_channels;
    this.kernel_size = shapeArg(op, 'kernel_size', kernel_size, n);
    this.stride = stride;
    this.padding = typeof padding === 'string' ? padding : shapeArg(op, 'padding', padding, n);
    this.dilation = shapeArg(op, 'dilation', opts.dilation ?? 1, n);
    this.groups = groups;
    this.padding_mode = 'zeros';
    this.output_padding = Array(n).fill(0);
    this.register_parameter('weight', emptyParameter([out_channels, in_channels / groups, ...this.kernel_size], opts));
    this.register_parameter('bias', (opts.bias ?? true) ? emptyParameter([out_channels], opts) : null);
    this.reset_parameters();
  }

  /** PyTorch's initialization: kaiming_uniform_(a=√5) for the weight, U(-1/√fan_in, 1/√fan_in) for the bias. */
  reset_parameters(): void {
    const w = this._member('weight');
    if (!(w instanceof Tensor)) return;
    kaiming_uniform_(w, { a: Math.sqrt(5) });
    const b = this._member('bias');
    if (b instanceof Tensor) {
      const [fanIn] = _calculate_fan_in_and_fan_out(w);
      if (fanIn !== 0) uniform_(b, -1 / Math.sqrt(fanIn), 1 / Math.sqrt(fanIn));
    }
  }

  override extra_repr(): string {
    let s = `${this.in_channels}, ${this.out_channels}, kernel_size=${pyRepr(this.kernel_size)}, stride=${pyRepr(this.stride)}`;
    if (typeof this.padding === 'string') s += `, padding=${this.padding}`;
    else if (this.padding.some((p) => p !== 0)) s += `, padding=${pyRepr(this.padding)}`;
    if (this.dilation.some((d) => d !== 1)) s += `, dilation=${pyRepr(this.dilation)}`;
    if (this.groups !== 1) s += `, groups=${this.groups}`;
    if (this._member('bias') === null) s += ', bias=False';
    return s;
  }
}

/** Conv1d(in_channels, out_channels, kernel_size, { stride, padding, dilation, groups, bias, padding_mode, device, dtype }). */
export class Conv1d extends ConvNd {
  constructor(in_channels: number, out_channels: number, kernel_size: IntOrTuple, opts: ConvOptions = {}) {
    super(1, in_channels, out_channels, kernel_size, opts);
  }
  override forward(input: Tensor): Tensor {
    return conv1d(input, this.weight, this.bias, this.stride, this.padding, this.dilation, this.groups);
  }
}

/** Conv2d(in_channels, out_channels, kernel_size, { stride, padding, dilation, groups, bias, padding_mode, device, dtype }). */
export class Conv2d extends ConvNd {
  constructor(in_channels: number, out_channels: number, kernel_size: IntOrTuple, opts: ConvOptions = {}) {
    super(2, in_channels, out_channels, kernel_size, opts);
  }
  override forward(input: Tensor): Tensor {
    return conv2d(input, this.weight, this.bias, this.stride, this.padding, this.dilation, this.groups);
  }
}
