// Random operations, bit-for-bit PyTorch's CPU results (src/random). On every device the numbers are
// the CPU generator's sequence: drawn on the host, then moved to the tensor's device. So the same seed
// gives the same tensor on CPU, CUDA and WebGPU — which PyTorch itself does not promise across devices.

import { Tensor, sizesArg } from '../tensor/tensor.js';
import { checkHostAllocation, dtypeName, DTYPES, type DTypeLike, type DTypeName, type StorageArray } from '../dtype/dtypes.js';
import { defaultFloatDType } from '../dtype/promotion.js';
import { readNumber } from '../dtype/convert.js';
import { checkShape, numelOf } from '../tensor/shape.js';
import { DTypeError, ValueError } from '../errors.js';
import type { DeviceLike } from '../backend/backend.js';
import { Generator, defaultGenerator } from '../random/generator.js';
import * as S from '../random/sample.js';
import { def, isOptions, scalarNumber, Scalar, type ScalarLike } from './registry.js';
import { mul } from './elementwise.js';
import { copyInto } from './shape.js';

// eslint-disable-next-line @typescript-eslint/no-explicit-any
type Fn = (...args: any[]) => any;

interface RandOptions { generator?: Generator | null; dtype?: DTypeLike | null; device?: DeviceLike | null }

const gen = (g: Generator | null | undefined): Generator => g ?? defaultGenerator;
const make = (data: StorageArray, dtype: DTypeName, shape: number[], device: DeviceLike | null | undefined): Tensor =>
  Tensor.fromStorage(data, dtype, shape, device ?? 'cpu');

/** Splits `f(2, 3, opts)` / `f([2, 3], opts)` into the size and the options. */
function sizeAndOpts(op: string, args: unknown[]): [number[], RandOptions] {
  let opts: RandOptions = {};
  if (args.length && isOptions(args[args.length - 1])) opts = args.pop() as RandOptions;
  return [checkShape(op, sizesArg(args as (number | number[])[])), opts];
}

function floatDType(op: string, d: DTypeLike | null | undefined): DTypeName {
  const dt = d ? dtypeName(d) : defaultFloatDType;
  if (DTYPES[dt].kind !== 'float' || DTYPES[dt].storageOnly) throw new DTypeError(op, `"${op}" not implemented for '${dt}' (use float32, float64, float16 or bfloat16)`);
  return dt;
}

export function manual_seed(seed: number | bigint): Generator { return defaultGenerator.manual_seed(seed); }
export { Generator, defaultGenerator as default_generator };
export function seed(): bigint { return defaultGenerator.seed(); }
export function initial_seed(): bigint { return defaultGenerator.initial_seed(); }
export function get_rng_state(): Uint8Array { return defaultGenerator.get_state(); }
export function set_rng_state(s: Uint8Array): void { defaultGenerator.set_state(s); }

/** nbx.rand(2, 3, { generator, dtype, device }) */
export function rand(...args: unknown[]): Tensor {
  const [shape, o] = sizeAndOpts('rand', args);
  const d = floatDType('rand', o.dtype);
  checkHostAllocation('rand', d, numelOf(shape));
  return make(S.rand(gen(o.generator), numelOf(shape), d), d, shape, o.device);
}
export function randn(...args: unknown[]): Tensor {
  const [shape, o] = sizeAndOpts('randn', args);
  const d = floatDType('randn', o.dtype);
  checkHostAllocation('randn', d, numelOf(shape));
  return make(S.randn(gen(o.generator), numelOf(shape), d), d, shape, o.device);
}
export function rand_like(input: Tensor, o: RandOptions = {}): Tensor {
  const d = floatDType('rand_like', o.dtype ?? input.dt);
  return make(S.rand(gen(o.generator), input.numel(), d), d, [...input.shape], o.device ?? input.device);
}
export function randn_like(input: Tensor, o: RandOptions = {}): Tensor {
  const d = floatDType('randn_like', o.dtype ?? input.dt);
  return make(S.randn(gen(o.generator), input.numel(), d), d, [...input.shape], o.device ?? input.device);
}

/** randint(high, size) or randint(low, high, size), PyTorch's overloads. */
export function randint(...args: unknown[]): Tensor {
  let o: RandOptions = {};
  if (args.length && isOptions(args[args.length - 1])) o = args.pop() as RandOptions;
  let low: unknown = 0, high: unknown, size: unknown;
  if (args.length === 2) [high, size] = args;
  else if (args.length === 3) [low, high, size] = args;
  else throw new ValueError('randint', `randint() takes (high, size) or (low, high, size), got ${args.length} positional arguments`);
  const shape = checkShape('randint', size as number[]);
  const d = o.dtype ? dtypeName(o.dtype) : 'int64';
  checkHostAllocation('randint', d, numelOf(shape));
  const lo = low instanceof Scalar ? (low.value as number) : (low as number), hi = high instanceof Scalar ? (high.value as number) : (high as number);
  return make(S.randint(gen(o.generator), numelOf(shape), d, lo, hi), d, shape, o.device);
}
export function randint_like(input: Tensor, ...args: unknown[]): Tensor {
  let o: RandOptions = {};
  if (args.length && isOptions(args[args.length - 1])) o = args.pop() as RandOptions;
  const [low, high] = args.length === 1 ? [0, args[0]] : args;
  return randint(low, high, [...input.shape], { dtype: o.dtype ?? input.dt, device: o.device ?? input.device, generator: o.generator });
}
export const randperm = def('randperm(n, *, generator=None, dtype=None, device=None)', (a) => {
  const d = a.dtype ? dtypeName(a.dtype) : 'int64';
  return make(S.randperm(gen(a.generator), a.n, d), d, [a.n], a.device);
});

/** All of PyTorch's normal() forms: (Tensor, Tensor), (Tensor, float), (float, Tensor), (float, float, size). */
export function normal(...args: unknown[]): Tensor {
  let o: RandOptions = {};
  if (args.length && isOptions(args[args.length - 1])) o = args.pop() as RandOptions;
  const [mean, std = 1, size] = args as [Tensor | ScalarLike, Tensor | ScalarLike, number[] | undefined];
  const g = gen(o.generator);
  if (mean instanceof Tensor || std instanceof Tensor) {
    const ref = (mean instanceof Tensor ? mean : std) as Tensor;
    const vals = (t: Tensor | ScalarLike): Float64Array | number => {
      if (!(t instanceof Tensor)) return scalarNumber(t);
      const a = t.contiguous().dataStorageSync();
      const out = new Float64Array(t.numel());
      for (let i = 0; i < out.length; i++) out[i] = readNumber(t.dt, a, i);
      return out;
    };
    const shape = mean instanceof Tensor && std instanceof Tensor ? (mean.numel() >= std.numel() ? mean.shape : std.shape) : ref.shape;
    const d = floatDType('normal', ref.dt);
    if (std instanceof Tensor && std.numel() > 0) { const s = vals(std) as Float64Array; if (s.some((v) => v < 0)) throw new ValueError('normal', 'normal expects all elements of std >= 0.0'); }
    return make(S.normalTensor(g, vals(mean), vals(std), numelOf(shape), d), d, [...shape], o.device ?? ref.device);
  }
  if (size === undefined) throw new ValueError('normal', 'normal(mean: float, std: float) needs a size');
  const s = scalarNumber(std);
  if (s < 0) throw new ValueError('normal', `normal expects std >= 0.0, but found std ${s}`);
  const shape = checkShape('normal', size);
  const d = floatDType('normal', o.dtype);
  checkHostAllocation('normal', d, numelOf(shape));
  return make(S.normal(g, numelOf(shape), d, scalarNumber(mean), s), d, shape, o.device);
}

function probsOf(t: Tensor): Float64Array {
  const a = t.contiguous().dataStorageSync();
  const out = new Float64Array(t.numel());
  for (let i = 0; i < out.length; i++) out[i] = readNumber(t.dt, a, i);
  return out;
}

export const bernoulli = def('bernoulli(input, p=None, *, generator=None)', (a) => {
  const x = a.input as Tensor;
  const g = gen(a.generator);
  if (a.p !== null) return make(S.bernoulliScalar(g, x.numel(), x.dt, scalarNumber(a.p)), x.dt, [...x.shape], x.device);
  return make(S.bernoulliTensor(g, probsOf(x), x.dt, x.dt), x.dt, [...x.shape], x.device);
});

export const multinomial = def('multinomial(input, num_samples, replacement=False, *, generator=None)', (a) => {
  const x = a.input as Tensor;
  if (x.ndim < 1 || x.ndim > 2) throw new ValueError('multinomial', `prob_dist must be 1 or 2 dim, got ${x.ndim}`);
  if (DTYPES[x.dt].kind !== 'float') throw new DTypeError('multinomial', `multinomial only supports floating-point dtypes for input, got: ${x.dt}`);
  const rows = x.ndim === 1 ? 1 : x.shape[0]!, k = x.shape[x.ndim - 1]!;
  const out = S.multinomial(gen(a.generator), probsOf(x), rows, k, a.num_samples, a.replacement, x.dt);
  return make(out, 'int64', x.ndim === 1 ? [a.num_samples] : [rows, a.num_samples], x.device);
});

export const dropout = def('nn.functional.dropout(input, p=0.5, training=True, inplace=False, *, generator=None)', (a) => {
  const x = a.input as Tensor;
  const p = scalarNumber(a.p);
  if (!(p >= 0 && p <= 1)) throw new ValueError('nn.functional.dropout', `dropout probability has to be between 0 and 1, but got ${p}`);
  if (!a.training || p === 0) return a.inplace ? x : x.clone();
  const noise = make(S.dropoutMask(gen(a.generator), x.numel(), x.dt, p), x.dt, [...x.shape], x.device);
  const r = mul(x, noise);
  noise.dispose();
  if (a.inplace) { copyInto(x, r, 'dropout_'); r.dispose(); return x; }
  return r;
});

// in-place fills (Tensor.uniform_, normal_, bernoulli_, random_-like) draw into a fresh buffer and copy in
function fillInPlace(self: Tensor, data: StorageArray, op: string): Tensor {
  const t = make(data, self.dt, [...self.shape], self.device);
  copyInto(self, t, op);
  t.dispose();
  return self;
}

export const methods: Record<string, Fn> = {
  uniform_: (self: Tensor, from = 0, to = 1, o: RandOptions = {}) =>
    fillInPlace(self, S.uniform(gen(o.generator), self.numel(), floatDType('uniform_', self.dt), scalarNumber(from), scalarNumber(to)), 'uniform_'),
  normal_: (self: Tensor, mean = 0, std = 1, o: RandOptions = {}) =>
    fillInPlace(self, S.normal(gen(o.generator), self.numel(), floatDType('normal_', self.dt), scalarNumber(mean), scalarNumber(std)), 'normal_'),
  bernoulli_: (self: Tensor, p: number | Tensor = 0.5, o: RandOptions = {}) =>
    fillInPlace(self, p instanceof Tensor ? S.bernoulliTensor(gen(o.generator), probsOf(p.expand(self.shape as number[])), self.dt, p.dt)
      : S.bernoulliScalar(gen(o.generator), self.numel(), self.dt, scalarNumber(p)), 'bernoulli_'),
  bernoulli: (self: Tensor, ...rest: unknown[]) => bernoulli(self, ...rest),
  multinomial: (self: Tensor, ...rest: unknown[]) => multinomial(self, ...rest),
};

export const functional: Record<string, Fn> = { dropout };
