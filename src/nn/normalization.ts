// nn.LayerNorm and nn.RMSNorm (PyTorch 2.4's), over the trailing `normalized_shape` dims. forward goes
// through forward_native (nbx.nn.functional.layer_norm / rms_norm) so a fused path can replace `forward`
// later without changes to model code.

import { Tensor } from '../tensor/tensor.js';
import { layer_norm, rms_norm } from '../ops/nn.js';
import { fused_add_rms_norm, fusion_enabled } from '../ops/llm.js';
import { Module, emptyParameter, pyRepr, shapeArg, type FactoryOptions } from './module.js';
import { ones_, zeros_ } from './init.js';

export interface LayerNormOptions extends FactoryOptions { eps?: number; elementwise_affine?: boolean; bias?: boolean }

export class LayerNorm extends Module {
  readonly normalized_shape: number[];
  readonly eps: number;
  readonly elementwise_affine: boolean;
  declare weight: Tensor | null;
  declare bias: Tensor | null;

  constructor(normalized_shape: number | readonly number[], opts: LayerNormOptions = {}) {
    super();
    this.normalized_shape = shapeArg('nn.LayerNorm', 'normalized_shape', normalized_shape);
    this.eps = opts.eps ?? 1e-5;
    this.elementwise_affine = opts.elementwise_affine ?? true;
    const affine = this.elementwise_affine;
    this.register_parameter('weight', affine ? emptyParameter(this.normalized_shape, opts) : null);
    this.register_parameter('bias', affine && (opts.bias ?? true) ? emptyParameter(this.normalized_shape, opts) : null);
    this.reset_parameters();
  }

  /** weight = 1, bias = 0. */
  reset_parameters(): void {
    const w = this._member('weight'), b = this._member('bias');
    if (w instanceof Tensor) ones_(w);
    if (b instanceof Tensor) zeros_(b);
  }

  override forward(input: Tensor): Tensor { return this.forward_native(input); }
  /** The reference computation, nbx.nn.functional.layer_norm. */
  forward_native(input: Tensor): Tensor { return layer_norm(input, this.normalized_shape, this.weight, this.bias, this.eps); }

  override extra_repr(): string {
    return `${pyRepr(this.normalized_shape)}, eps=${pyRepr(this.eps)}, elementwise_affine=${pyRepr(this.elementwise_affine)}`;
  }
}

export interface RMSNormOptions extends FactoryOptions {
  /** Default null: the input dtype's machine epsilon (torch.finfo(x.dtype).eps), as PyTorch. */
  eps?: number | null;
  elementwise_affine?: boolean;
}

/** y = x / sqrt(mean(x², normalized dims) + eps) * weight. */
export class RMSNorm extends Module {
  readonly normalized_shape: number[];
  readonly eps: number | null;
  readonly elementwise_affine: boolean;
  declare weight: Tensor | null;

  constructor(normalized_shape: number | readonly number[], opts: RMSNormOptions = {}) {
    super();
    this.normalized_shape = shapeArg('nn.RMSNorm', 'normalized_shape', normalized_shape);
    this.eps = opts.eps ?? null;
    this.elementwise_affine = opts.elementwise_affine ?? true;
    this.register_parameter('weight', this.elementwise_affine ? emptyParameter(this.normalized_shape, opts) : null);
    this.reset_parameters();
  }

  /** weight = 1. */
  reset_parameters(): void {
    const w = this._member('weight');
    if (w instanceof Tensor) ones_(w);
  }

  /**
   * rms_norm(input); with a `residual` (an nbx extension, vLLM's RMSNorm.forward(x, residual)), returns
   * `[rms_norm(input + residual), input + residual]`: the residual add of a pre-norm transformer fused
   * with the norm that follows it (nbx.llm.fused_add_rms_norm over a 1-D normalized_shape; add then
   * forward_native otherwise, and with nbx.llm.set_fusion(false)).
   */
  override forward(input: Tensor): Tensor;
  override forward(input: Tensor, residual: Tensor): [Tensor, Tensor];
  override forward(input: Tensor, residual?: Tensor): Tensor | [Tensor, Tensor] {
    if (residual === undefined) return this.forward_native(input);
    if (fusion_enabled() && this.normalized_shape.length === 1) return fused_add_rms_norm(input, residual, this.weight, this.eps);
    const sum = input.add(residual);
    return [this.forward_native(sum), sum];
  }
  /** The reference computation, nbx.nn.functional.rms_norm. */
  forward_native(input: Tensor): Tensor { return rms_norm(input, this.normalized_shape, this.weight, this.eps); }

  override extra_repr(): string {
    return `${pyRepr(this.normalized_shape)}, eps=${pyRepr(this.eps)}, elementwise_affine=${pyRepr(this.elementwise_affine)}`;
  }
}
