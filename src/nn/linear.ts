// nn.Linear and nn.Identity. Linear's forward goes through forward_native, the reference path written
// with nbx.nn.functional.linear: a fused kernel path can later replace `forward` (choosing by device and
// dtype) without any change to model code, which only ever calls `forward`.

import { Tensor } from '../tensor/tensor.js';
import { linear } from '../ops/linalg.js';
import { Module, checkDims, emptyParameter, pyRepr, type FactoryOptions } from './module.js';
import { _calculate_fan_in_and_fan_out, kaiming_uniform_, uniform_ } from './init.js';

export interface LinearOptions extends FactoryOptions { bias?: boolean }

/** y = x Wᵀ + b. Parameters `weight` [out_features, in_features] and `bias` [out_features] (or null). */
export class Linear extends Module {
  readonly in_features: number;
  readonly out_features: number;
  declare weight: Tensor;
  declare bias: Tensor | null;

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
  /** The reference computation, nbx.nn.functional.linear. */
  forward_native(input: Tensor): Tensor { return linear(input, this.weight, this.bias); }

  override extra_repr(): string {
    return `in_features=${this.in_features}, out_features=${this.out_features}, bias=${pyRepr(this._member('bias') !== null)}`;
  }
}

/** Returns its input unchanged (the same tensor object). Accepts and ignores any constructor arguments, as PyTorch's does. */
export class Identity extends Module {
  constructor(..._args: unknown[]) { super(); }
  override forward(input: Tensor): Tensor { return input; }
}
