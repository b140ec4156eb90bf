// nn.Dropout: the identity in eval() mode (the inference default is still PyTorch's: modules start in
// training mode, so call model.eval()); in training mode it zeroes elements with probability p and
// scales the rest by 1/(1-p), drawing from nbx's torch-exact generator.

import type { Tensor } from '../tensor/tensor.js';
import { dropout } from '../ops/random.js';
import { ValueError } from '../errors.js';
import { Module, pyFloat, pyRepr } from './module.js';

export class Dropout extends Module {
  readonly p: number;
  readonly inplace: boolean;
  constructor(p = 0.5, opts: { inplace?: boolean } = {}) {
    super();
    if (typeof p !== 'number' || !(p >= 0 && p <= 1)) throw new ValueError('nn.Dropout', `dropout probability has to be between 0 and 1, but got ${p}`);
    this.p = p;
    this.inplace = opts.inplace ?? false;
  }
  override forward(input: Tensor): Tensor {
    if (!this.training) return input;
    return dropout(input, this.p, true, this.inplace);
  }
  override extra_repr(): string { return `p=${pyFloat(this.p)}, inplace=${pyRepr(this.inplace)}`; }
}
