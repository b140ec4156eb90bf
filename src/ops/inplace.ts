// In-place operations (t.add_(b), t.clamp_(0, 1), t.fill_(0), t.index_put_(...), ...). Each is its
// out-of-place operation followed by one strided copy into `self`, so a write through a view (a slice,
// a transpose, a select) lands in the base tensor's storage exactly as in PyTorch, on every device.
// PyTorch's in-place rules apply: the result must keep self's shape (no broadcasting self up), its
// dtype must be castable to self's (an int tensor's div_ is an error), and self must not have elements
// that share memory (an expanded view).

import { Tensor } from '../tensor/tensor.js';
import { canCast } from '../dtype/promotion.js';
import { DTYPES } from '../dtype/dtypes.js';
import { DTypeError, ShapeError, ValueError } from '../errors.js';
import { fmtShape } from '../tensor/shape.js';
import { isScalarLike, type ScalarLike } from './registry.js';
import { copyInto, fillRef } from './shape.js';
import * as ew from './elementwise.js';
import { torchTypeName } from './conv.js';
import * as ix from './indexing.js';

// eslint-disable-next-line @typescript-eslint/no-explicit-any
type Fn = (...args: any[]) => any;


/** PyTorch refuses to write where one memory location is several elements (an expanded view). */
export function checkWritable(op: string, self: Tensor): void {
  for (let d = 0; d < self.ndim; d++) {
    if (self.strides[d] === 0 && self.shape[d]! > 1) {
      throw new ValueError(op, 'unsupported operation: more than one element of the written-to tensor refers to a single memory location. Please clone() the tensor before performing the operation.');
    }
  }
}

/** Writes `result` (computed out of place) into `self` under PyTorch's in-place rules; returns self. */
export function writeBack(op: string, self: Tensor, result: Tensor): Tensor {
  try {
    if (result.shape.length !== self.shape.length || result.shape.some((s, i) => s !== self.shape[i])) {
      throw new ShapeError(op, `output with shape ${fmtShape(self.shape)} doesn't match the broadcast shape ${fmtShape(result.shape)}`);
    }
    if (!canCast(result.dt, self.dt)) {
      throw new DTypeError(op, `result type ${torchTypeName(result.dt)} can't be cast to the desired output type ${torchTypeName(self.dt)}`);
    }
    checkWritable(op, self);
    if (result !== self) copyInto(self, result, op);
  } finally { if (result !== self) result.dispose(); }
  return self;
}

/** `name_` from the out-of-place `fn(self, ...args)`. */
const inplace = (name: string, fn: Fn): Fn => (self: Tensor, ...args: unknown[]) => writeBack(name, self, fn(self, ...args) as Tensor);

/** t.fill_(value): value is a number, bigint, boolean, scalar wrapper or a 0-dim tensor. */
function fill_(self: Tensor, value: ScalarLike | Tensor): Tensor {
  checkWritable('fill_', self);
  if (value instanceof Tensor) {
    if (value.ndim !== 0) throw new ValueError('fill_', `fill_ only supports 0-dimension value tensor but got tensor with ${value.ndim} dimensions.`);
    copyInto(self, value.device === self.device ? value : value.to(self.device), 'fill_');
    return self;
  }
  if (!isScalarLike(value)) throw new ValueError('fill_', `fill_(): argument 'value' must be a Number or a 0-dim tensor, not ${value === null ? 'null' : typeof value}`);
  if (DTYPES[self.dt].kind === 'complex') {
    // a real scalar fills the real part and zeroes the imaginary part, as a cast would
    copyInto(self, Tensor.fromStorage(new Float64Array([Number(value), 0]), 'complex128', [], self.device), 'fill_');
    return self;
  }
  fillRef('fill_', self.device, self.ref(), value);
  return self;
}

/** The in-place methods, by name; each is `t.name_(...)` with the arguments of `t.name(...)`. */
const FROM_OUT_OF_PLACE: Record<string, Fn> = {
  add_: ew.add, sub_: ew.sub, subtract_: ew.sub, mul_: ew.mul, multiply_: ew.mul, div_: ew.div, divide_: ew.div,
  true_divide_: ew.div, floor_divide_: ew.floor_divide, remainder_: ew.remainder, fmod_: ew.fmod, pow_: ew.pow,
  atan2_: ew.atan2, hypot_: ew.hypot, copysign_: ew.copysign, xlogy_: ew.xlogy, lerp_: ew.lerp,
  addcmul_: ew.addcmul, addcdiv_: ew.addcdiv,
  clamp_: ew.clamp, clip_: ew.clamp, clamp_min_: ew.clamp_min, clamp_max_: ew.clamp_max,
  neg_: ew.neg, negative_: ew.neg, abs_: ew.abs, absolute_: ew.abs, sign_: ew.sign, square_: ew.square,
  exp_: ew.exp, exp2_: ew.exp2, expm1_: ew.expm1, log_: ew.log, log2_: ew.log2, log10_: ew.log10, log1p_: ew.log1p,
  sqrt_: ew.sqrt, rsqrt_: ew.rsqrt, reciprocal_: ew.reciprocal, sin_: ew.sin, cos_: ew.cos, tan_: ew.tan,
  tanh_: ew.tanh, sigmoid_: ew.sigmoid, erf_: ew.erf, relu_: ew.nn_relu,
  floor_: ew.floor, ceil_: ew.ceil, round_: ew.round, trunc_: ew.trunc, fix_: ew.trunc,
  nan_to_num_: ew.nan_to_num, logical_not_: ew.logical_not, bitwise_not_: ew.bitwise_not,
  logical_and_: ew.logical_and, logical_or_: ew.logical_or, logical_xor_: ew.logical_xor,
  bitwise_and_: ew.bitwise_and, bitwise_or_: ew.bitwise_or, bitwise_xor_: ew.bitwise_xor,
  eq_: ew.eq, ne_: ew.ne, lt_: ew.lt, le_: ew.le, gt_: ew.gt, ge_: ew.ge,
  masked_fill_: ew.masked_fill,
  index_put_: ix.index_put, index_fill_: ix.index_fill, index_add_: ix.index_add, index_copy_: ix.index_copy,
  scatter_: ix.scatter, scatter_add_: ix.scatter_add, scatter_reduce_: ix.scatter_reduce, masked_scatter_: ix.masked_scatter,
};

/** index_copy_: one scatter into self when source is a separate tensor of self's dtype (else the generic path). */
function index_copy_(self: Tensor, dim: unknown, index: unknown, source: unknown): Tensor {
  if (source instanceof Tensor && index instanceof Tensor && typeof dim === 'number' && source.dt === self.dt
    && source.device === self.device && index.device === self.device && source.storage !== self.storage && index.storage !== self.storage) {
    checkWritable('index_copy_', self);
    return ix.index_copy_into(self, dim, index, source);
  }
  return writeBack('index_copy_', self, ix.index_copy(self, dim, index, source) as Tensor);
}

export const methods: Record<string, Fn> = {
  ...Object.fromEntries(Object.entries(FROM_OUT_OF_PLACE).map(([name, fn]) => [name, inplace(name, fn)])),
  index_copy_,
  fill_,
  zero_: (self: Tensor) => fill_(self, 0),
};

/** nn.functional's in-place activations (F.relu_(x)). */
export const functional: Record<string, Fn> = {
  relu_: methods.relu_!,
};

/**
 * t.copy_(src): src broadcast to t's shape and cast to t's dtype, written through the view t. As in
 * PyTorch, src may live on another device; a WebGPU source cannot be read synchronously, and the error
 * says to bring it over with `await src.cpu()` first.
 */
export function copy_(self: Tensor, src: Tensor | ScalarLike): Tensor {
  if (!(src instanceof Tensor)) throw new ValueError('copy_', `copy_(): argument 'src' must be a Tensor, not ${typeof src} (fill_ writes a scalar)`);
  checkWritable('copy_', self);
  if (src.device === self.device) { copyInto(self, src); return self; }
  const moved = src.to(self.device);
  try { copyInto(self, moved); } finally { if (moved !== src) moved.dispose(); }
  return self;
}

type Operand = Tensor | ScalarLike;
declare module '../tensor/tensor.js' {
  interface Tensor {
    /** Copies `src` into this tensor (broadcast, cast, any device); writes through views. */
    copy_(src: Tensor): Tensor;
    /** Writes `value` into every element (a scalar or a 0-dim tensor). */
    fill_(value: ScalarLike | Tensor): Tensor;
    zero_(): Tensor;
    add_(other: Operand, opts?: { alpha?: ScalarLike }): Tensor;
    sub_(other: Operand, opts?: { alpha?: ScalarLike }): Tensor;
    mul_(other: Operand): Tensor;
    div_(other: Operand, opts?: { rounding_mode?: 'trunc' | 'floor' | null }): Tensor;
    clamp_(min?: Operand | null | { min?: Operand | null; max?: Operand | null }, max?: Operand | null): Tensor;
    masked_fill_(mask: Tensor, value: ScalarLike | Tensor): Tensor;
    index_put_(indices: readonly (Tensor | null)[], values: Tensor, opts?: { accumulate?: boolean }): Tensor;
    relu_(): Tensor;
  }
}
