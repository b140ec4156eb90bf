// Activation modules: each forward is the nbx.nn.functional function of the same name.

import type { Tensor } from '../tensor/tensor.js';
import { gelu, nn_relu, sigmoid, silu, tanh } from '../ops/elementwise.js';
import { f_softmax } from '../ops/nn.js';
import { copyInto } from '../ops/shape.js';
import { ValueError } from '../errors.js';
import { Module, pyRepr } from './module.js';

/** inplace=True writes the result into the input and returns the input, as PyTorch does. */
function maybeInplace(op: string, input: Tensor, out: Tensor, inplace: boolean): Tensor {
  if (!inplace) return out;
  copyInto(input, out, op);
  out.dispose();
  return input;
}

type InplaceArg = boolean | { inplace?: boolean };
const inplaceOf = (a: InplaceArg | undefined): boolean => (typeof a === 'boolean' ? a : a?.inplace ?? false);

export class ReLU extends Module {
  readonly inplace: boolean;
  constructor(inplace?: InplaceArg) { super(); this.inplace = inplaceOf(inplace); }
  override forward(input: Tensor): Tensor { return maybeInplace('nn.ReLU', input, nn_relu(input), this.inplace); }
  override extra_repr(): string { return this.inplace ? 'inplace=True' : ''; }
}

/** x * sigmoid(x). */
export class SiLU extends Module {
  readonly inplace: boolean;
  constructor(inplace?: InplaceArg) { super(); this.inplace = inplaceOf(inplace); }
  override forward(input: Tensor): Tensor { return maybeInplace('nn.SiLU', input, silu(input), this.inplace); }
  override extra_repr(): string { return this.inplace ? 'inplace=True' : ''; }
}

/** GELU({ approximate: 'none' | 'tanh' }) (or new GELU('tanh')). */
export class GELU extends Module {
  readonly approximate: 'none' | 'tanh';
  constructor(approximate?: 'none' | 'tanh' | { approximate?: 'none' | 'tanh' }) {
    super();
    const a = typeof approximate === 'string' ? approximate : approximate?.approximate ?? 'none';
    if (a !== 'none' && a !== 'tanh') throw new ValueError('nn.GELU', `approximate argument must be either none or tanh, got '${String(a)}'`);
    this.approximate = a;
  }
  override forward(input: Tensor): Tensor { return gelu(input, { approximate: this.approximate }); }
  override extra_repr(): string { return `approximate=${pyRepr(this.approximate)}`; }
}

export class Tanh extends Module {
  override forward(input: Tensor): Tensor { return tanh(input); }
}

export class Sigmoid extends Module {
  override forward(input: Tensor): Tensor { return sigmoid(input); }
}

/** Softmax over `dim` (Softmax(-1) or Softmax({ dim: -1 })); dim null picks PyTorch's legacy implicit dim. */
export class Softmax extends Module {
  readonly dim: number | null;
  constructor(dim?: number | null | { dim?: number | null }) {
    super();
    this.dim = typeof dim === 'object' && dim !== null ? dim.dim ?? null : dim ?? null;
  }
  override forward(input: Tensor): Tensor { return f_softmax(input, this.dim); }
  override extra_repr(): string { return `dim=${pyRepr(this.dim)}`; }
}
