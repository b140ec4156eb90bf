// nbx.nn.init: PyTorch's parameter initializers, in place, drawing from nbx's torch-exact generator in the
// order torch does, so `nbx.manual_seed(s)` then a layer gives torch's initial weights for the same seed.
// A MetaTensor (nothing allocated) is returned untouched, as torch's initializers do nothing on 'meta'.

import { Tensor } from '../tensor/tensor.js';
import type { Generator } from '../random/generator.js';
import { fillRef } from '../ops/shape.js';
import { ValueError } from '../errors.js';
import { MetaTensor } from './module.js';

type Param = Tensor | MetaTensor;
type GenOpt = { generator?: Generator | null };

export function uniform_<T extends Param>(t: T, a = 0, b = 1, opts: GenOpt = {}): T {
  if (t instanceof Tensor) t.uniform_(a, b, opts);
  return t;
}
export function normal_<T extends Param>(t: T, mean = 0, std = 1, opts: GenOpt = {}): T {
  if (t instanceof Tensor) t.normal_(mean, std, opts);
  return t;
}
export function constant_<T extends Param>(t: T, val: number): T {
  if (t instanceof Tensor) fillRef('nn.init.constant_', t.device, t.ref(), val);
  return t;
}
export const zeros_ = <T extends Param>(t: T): T => constant_(t, 0);
export const ones_ = <T extends Param>(t: T): T => constant_(t, 1);

/** torch.nn.init.calculate_gain. */
export function calculate_gain(nonlinearity: string, param: number | null = null): number {
  const linear = ['linear', 'conv1d', 'conv2d', 'conv3d', 'conv_transpose1d', 'conv_transpose2d', 'conv_transpose3d'];
  if (linear.includes(nonlinearity) || nonlinearity === 'sigmoid') return 1;
  if (nonlinearity === 'tanh') return 5.0 / 3;
  if (nonlinearity === 'relu') return Math.sqrt(2.0);
  if (nonlinearity === 'leaky_relu') {
    const slope = param === null ? 0.01 : param;
    return Math.sqrt(2.0 / (1 + slope ** 2));
  }
  if (nonlinearity === 'selu') return 3.0 / 4;
  throw new ValueError('nn.init.calculate_gain', `Unsupported nonlinearity ${nonlinearity}`);
}

/** [fan_in, fan_out] of a weight of shape [out, in, *kernel], as torch computes them. */
export function _calculate_fan_in_and_fan_out(t: Param): [number, number] {
  const s = t.shape;
  if (s.length < 2) throw new ValueError('nn.init', 'Fan in and fan out can not be computed for tensor with fewer than 2 dimensions');
  const receptive = s.slice(2).reduce((a, b) => a * b, 1);
  return [s[1]! * receptive, s[0]! * receptive];
}

function fan(t: Param, mode: 'fan_in' | 'fan_out'): number {
  if (mode !== 'fan_in' && mode !== 'fan_out') throw new ValueError('nn.init', `Mode ${String(mode)} not supported, please use one of fan_in, fan_out`);
  const [fi, fo] = _calculate_fan_in_and_fan_out(t);
  return mode === 'fan_in' ? fi : fo;
}

export interface KaimingOptions extends GenOpt { a?: number; mode?: 'fan_in' | 'fan_out'; nonlinearity?: string }

/** `a` given positionally (PyTorch's kaiming_uniform_(w, math.sqrt(5))) or in the options. */
const kaimingArgs = (a: number | KaimingOptions | undefined, rest: KaimingOptions | undefined): KaimingOptions =>
  typeof a === 'number' ? { ...rest, a } : { ...a, ...rest };

/** torch.nn.init.kaiming_uniform_(tensor, a=0, mode='fan_in', nonlinearity='leaky_relu'). */
export function kaiming_uniform_<T extends Param>(t: T, a?: number | KaimingOptions, rest?: KaimingOptions): T {
  const opts = kaimingArgs(a, rest);
  if (t.numel() === 0) return t;
  const gain = calculate_gain(opts.nonlinearity ?? 'leaky_relu', opts.a ?? 0);
  const std = gain / Math.sqrt(fan(t, opts.mode ?? 'fan_in'));
  const bound = Math.sqrt(3.0) * std;
  return uniform_(t, -bound, bound, opts);
}
/** torch.nn.init.kaiming_normal_(tensor, a=0, mode='fan_in', nonlinearity='leaky_relu'). */
export function kaiming_normal_<T extends Param>(t: T, a?: number | KaimingOptions, rest?: KaimingOptions): T {
  const opts = kaimingArgs(a, rest);
  if (t.numel() === 0) return t;
  const gain = calculate_gain(opts.nonlinearity ?? 'leaky_relu', opts.a ?? 0);
  return normal_(t, 0, gain / Math.sqrt(fan(t, opts.mode ?? 'fan_in')), opts);
}
/** torch.nn.init.xavier_uniform_(tensor, gain=1.0). */
export function xavier_uniform_<T extends Param>(t: T, gain = 1.0, opts: GenOpt = {}): T {
  const [fi, fo] = _calculate_fan_in_and_fan_out(t);
  const a = Math.sqrt(3.0) * (gain * Math.sqrt(2.0 / (fi + fo)));
  return uniform_(t, -a, a, opts);
}
/** torch.nn.init.xavier_normal_(tensor, gain=1.0). */
export function xavier_normal_<T extends Param>(t: T, gain = 1.0, opts: GenOpt = {}): T {
  const [fi, fo] = _calculate_fan_in_and_fan_out(t);
  return normal_(t, 0, gain * Math.sqrt(2.0 / (fi + fo)), opts);
}
