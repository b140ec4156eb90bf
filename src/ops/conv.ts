// Convolutions: nn.functional.conv1d/2d/3d and conv_transpose1d/2d/3d. The op layer checks arguments
// the way PyTorch does (same messages), works out padding (including 'same') and output sizes, and hands
// contiguous float32/float64 operands, always with three spatial dims (1-D and 2-D problems get leading
// size-1 dims), to the device's 'conv' / 'conv_transpose' kernel. float16/bfloat16 are widened to
// float32 and rounded once at the end, as PyTorch's CPU does.
//
// The helpers at the top (int-tuple arguments, dtype names, widening) are shared with pool.ts and
// resample.ts.

import { Tensor } from '../tensor/tensor.js';
import { DTYPES, isLowPrecisionFloat, type DTypeName } from '../dtype/dtypes.js';
import { DTypeError, ShapeError, ValueError } from '../errors.js';
import { fmtShape } from '../tensor/shape.js';
import { kernel } from '../kernels/registry.js';
import type { StridedRef } from '../backend/backend.js';
import { def, Scalar } from './registry.js';
import { describe, deviceOf } from './elementwise.js';
import type { ConvKernelParams } from '../kernels/conv.js';
import { torchTypeName } from './torch_names.js';

// eslint-disable-next-line @typescript-eslint/no-explicit-any
type Fn = (...args: any[]) => any;

// ---- shared helpers ------------------------------------------------------------------------------

export function asTensor(op: string, x: unknown, name = 'input'): Tensor {
  if (!(x instanceof Tensor)) throw new ValueError(op, `${op.split('.').pop()}(): argument '${name}' must be Tensor, not ${describe(x)}`);
  return x;
}

/** A Python int (a JS integer or an int Scalar). */
export function intArg(op: string, name: string, v: unknown): number {
  const n = v instanceof Scalar ? Number(v.value) : v;
  if (typeof n !== 'number' || !Number.isInteger(n)) throw new ValueError(op, `${op.split('.').pop()}(): argument '${name}' must be int or tuple of ints, not ${describe(v)}`);
  return n;
}

/** A Python number (int or float) as a JS number. */
export function numArg(op: string, name: string, v: unknown): number {
  const n = v instanceof Scalar ? Number(v.value) : v;
  if (typeof n !== 'number') throw new ValueError(op, `${op.split('.').pop()}(): argument '${name}' must be a number, not ${describe(v)}`);
  return n;
}

/** An int or a list of `n` ints (a one-element list repeats, as PyTorch's expand_param_if_needed). */
export function intTuple(op: string, name: string, v: unknown, n: number, message?: (got: number[]) => string): number[] {
  if (Array.isArray(v)) {
    const xs = v.map((e) => intArg(op, name, e));
    if (xs.length === 1 && n > 1) return Array(n).fill(xs[0]!);
    if (xs.length !== n) {
      throw new ValueError(op, message ? message(xs)
        : `expected ${name} to be a single integer value or a list of ${n} values to match the convolution dimensions, but got ${name}=${fmtShape(xs)}`);
    }
    return xs;
  }
  return Array(n).fill(intArg(op, name, v));
}

export { torchTypeName };

/** The dtype kernels compute in: float32 for the half types, the dtype itself otherwise. */
export const computeDType = (d: DTypeName): DTypeName => (isLowPrecisionFloat(d) ? 'float32' : d);

/** `x` as a contiguous tensor of `dtype` (x itself when it already is one). */
export function contiguousAs(x: Tensor, dtype: DTypeName): Tensor {
  return x.dt === dtype && x.is_contiguous() ? x : x.copyAs(dtype);
}

/** Disposes `t` unless it is one of `keep` (the caller's own tensors). */
export function release(t: Tensor | null | undefined, ...keep: (Tensor | null | undefined)[]): void {
  if (t && !keep.includes(t)) t.dispose();
}

/** A computed result in `dtype` (rounded once from the compute dtype), disposing the wide one. */
export function narrowTo(r: Tensor, dtype: DTypeName): Tensor {
  if (r.dt === dtype) return r;
  const o = r.copyAs(dtype);
  r.dispose();
  return o;
}

/** Floating inputs only (what PyTorch's kernels dispatch on for these ops). */
export function requireFloat(op: string, x: Tensor, what = op.split('.').pop()!): void {
  if (DTYPES[x.dt].kind !== 'float' || DTYPES[x.dt].storageOnly) {
    throw new DTypeError(op, `"${what}" not implemented for '${torchTypeName(x.dt)}' (expects float16, bfloat16, float32 or float64)`);
  }
}

/** Pads a spatial list to three dims with `fill` in front (1-D and 2-D problems run as 3-D ones). */
export const to3 = (xs: readonly number[], fill: number): number[] => [...Array(3 - xs.length).fill(fill), ...xs];

// ---- convolution ---------------------------------------------------------------------------------

const spatialNames = (d: number): string[] => ['depth', 'height', 'width'].slice(3 - d);

function convImpl(d: number, transposed: boolean, a: Record<string, unknown>): Tensor {
  const op = `nn.functional.${transposed ? 'conv_transpose' : 'conv'}${d}d`;
  const short = op.split('.').pop()!;
  let x = asTensor(op, a.input);
  const w = asTensor(op, a.weight, 'weight');
  const bias = a.bias === null || a.bias === undefined ? null : asTensor(op, a.bias, 'bias');
  if (x.ndim !== d + 1 && x.ndim !== d + 2) {
    throw new ShapeError(op, `Expected ${d + 1}D (unbatched) or ${d + 2}D (batched) input to ${short}, but got input of size: ${fmtShape(x.shape)}`);
  }
  const unbatched = x.ndim === d + 1;
  deviceOf(op, [x, w, bias]);
  const groups = intArg(op, 'groups', a.groups);
  if (groups <= 0) throw new ValueError(op, 'non-positive groups is not supported');
  if (w.ndim < 3) throw new ShapeError(op, 'weight should have at least three dimensions');
  const kd = w.ndim - 2;
  const stride = intTuple(op, 'stride', a.stride, kd);
  const dilation = intTuple(op, 'dilation', a.dilation, kd);
  const outPad = transposed ? intTuple(op, 'output_padding', a.output_padding, kd) : Array(kd).fill(0);
  let padL: number[], padR: number[];
  if (typeof a.padding === 'string') {
    if (transposed) throw new ValueError(op, `${short}(): argument 'padding' must be tuple of ints, not str`);
    if (a.padding === 'valid') padL = padR = Array(kd).fill(0);
    else if (a.padding === 'same') {
      if (stride.some((s) => s !== 1)) throw new ValueError(op, "padding='same' is not supported for strided convolutions");
      // PyTorch pads the odd extra on the right (end) side.
      const total = w.shape.slice(2).map((k, i) => dilation[i]! * (k - 1));
      padL = total.map((t) => Math.floor(t / 2));
      padR = total.map((t, i) => t - padL[i]!);
    } else throw new ValueError(op, `Invalid padding string: '${a.padding}'`);
  } else padL = padR = intTuple(op, 'padding', a.padding, kd);
  if (stride.some((s) => s <= 0)) throw new ValueError(op, 'non-positive stride is not supported');
  if (padL.some((p) => p < 0)) throw new ValueError(op, 'negative padding is not supported');
  if (outPad.some((p) => p < 0)) throw new ValueError(op, 'negative output_padding is not supported');
  if (dilation.some((s) => s <= 0)) throw new ValueError(op, 'non-positive dilation is not supported');
  if (unbatched) x = x.unsqueeze(0);
  if (kd !== x.ndim - 2) {
    throw new ShapeError(op, `Expected ${w.ndim}-dimensional input for ${w.ndim}-dimensional weight ${fmtShape(w.shape)}, but got ${x.ndim}-dimensional input of size ${fmtShape(x.shape)} instead`);
  }
  const [wOut, wIn] = [w.shape[0]!, w.shape[1]!];
  if (wOut < groups) throw new ShapeError(op, `Given groups=${groups}, expected weight to be at least ${groups} at dimension 0, but got weight of size ${fmtShape(w.shape)} instead`);
  if (wOut % groups !== 0) throw new ShapeError(op, `Given groups=${groups}, expected weight to be divisible by ${groups} at dimension 0, but got weight of size [${fmtShape(w.shape)}] instead`);
  const cIn = x.shape[1]!;
  const wantIn = transposed ? wOut : wIn * groups;
  if (cIn !== wantIn) {
    throw new ShapeError(op, `Given ${transposed ? 'transposed=1' : `groups=${groups}`}, weight of size ${fmtShape(w.shape)}, expected input${fmtShape(x.shape)} to have ${wantIn} channels, but got ${cIn} channels instead`);
  }
  // PyTorch's eager convolution gives zero output channels for zero input channels.
  const wantBias = transposed ? wIn * groups : wOut;
  const cOut = cIn === 0 ? 0 : wantBias;
  if (bias && (bias.ndim !== 1 || bias.shape[0] !== wantBias)) {
    throw new ShapeError(op, `Given ${transposed ? 'transposed=1, ' : ''}weight of size ${fmtShape(w.shape)}, expected bias to be 1-dimensional with ${wantBias} elements, but got bias of size ${fmtShape(bias.shape)} instead`);
  }
  // dtypes: one floating dtype for input, weight and bias.
  if (w.dt !== x.dt) throw new DTypeError(op, `Input type (${torchTypeName(x.dt)}) and weight type (${torchTypeName(w.dt)}) should be the same`);
  if (bias && bias.dt !== x.dt) throw new DTypeError(op, `Input type (${torchTypeName(x.dt)}) and bias type (${torchTypeName(bias.dt)}) should be the same`);
  // Integer convolution is exact and wraps like PyTorch's CPU kernels; its transposed form exists
  // there for int64 only.
  const kind = DTYPES[x.dt].kind;
  if ((kind !== 'float' && kind !== 'int') || DTYPES[x.dt].storageOnly || (transposed && kind === 'int' && x.dt !== 'int64')) {
    const kname = transposed ? `slow_conv_transpose${kd}d_out_cpu` : kd === 3 ? 'compute_columns3d' : 'slow_conv2d_cpu';
    throw new DTypeError(op, `"${kname}" not implemented for '${torchTypeName(x.dt)}'`);
  }

  const inSp = x.shape.slice(2), kSp = w.shape.slice(2);
  let outSp: number[];
  if (transposed) {
    const bad = outPad.findIndex((p, i) => p >= stride[i]! && p >= dilation[i]!);
    if (bad >= 0) {
      const names = spatialNames(kd);
      const part = (label: string, v: number[]): string => names.map((n, i) => `${label}_${n}: ${v[i]}`).join(' ');
      throw new ValueError(op, `output padding must be smaller than either stride or dilation, but got ${part('output_padding', outPad)} ${part('stride', stride)} ${part('dilation', dilation)}`);
    }
    outSp = inSp.map((n, i) => (n - 1) * stride[i]! - 2 * padL[i]! + dilation[i]! * (kSp[i]! - 1) + outPad[i]! + 1);
    if (outSp.some((o) => o <= 0)) {
      throw new ShapeError(op, `Given input size per channel: (${inSp.join(' x ')}). Calculated output size per channel: (${outSp.join(' x ')}). Output size is too small`);
    }
  } else {
    const padded = inSp.map((n, i) => n + padL[i]! + padR[i]!);
    const eff = kSp.map((k, i) => dilation[i]! * (k - 1) + 1);
    if (padded.some((p, i) => p < eff[i]!)) {
      throw new ShapeError(op, `Calculated padded input size per channel: (${padded.join(' x ')}). Kernel size: (${eff.join(' x ')}). Kernel size can't be greater than actual input size`);
    }
    outSp = padded.map((p, i) => Math.floor((p - eff[i]!) / stride[i]!) + 1);
  }

  const ct = computeDType(x.dt);
  const N = x.shape[0]!;
  const out = Tensor.empty([N, cOut, ...outSp], ct, x.device);
  if (out.numel() > 0) {
    const xs = contiguousAs(x, ct), ws = contiguousAs(w, ct), bs = bias ? contiguousAs(bias, ct) : null;
    try {
      const r3 = (t: Tensor, lead: number[]): StridedRef => {
        const sp = to3(t.shape.slice(2), 1);
        const shape = [...lead, ...sp];
        const strides = shape.map((_, i) => shape.slice(i + 1).reduce((p, q) => p * q, 1));
        return { ...t.ref(), shape, strides };
      };
      const params: ConvKernelParams = {
        x: r3(xs, [N, cIn]), w: r3(ws, [wOut, wIn]), bias: bs ? bs.ref() : null, out: r3(out, [N, cOut]),
        stride: to3(stride, 1), padding: to3(padL, 0), dilation: to3(dilation, 1), groups,
      };
      kernel(transposed ? 'conv_transpose' : 'conv', x.device, op)(params);
    } finally {
      release(xs, x); release(ws, w); release(bs, bias);
    }
  }
  if (unbatched) x.dispose();
  const r = narrowTo(out, a.input instanceof Tensor ? a.input.dt : ct);
  if (!unbatched) return r;
  const s = r.squeeze(0);
  r.dispose();
  return s;
}

const convSig = (n: number) => `nn.functional.conv${n}d(input, weight, bias=None, stride=1, padding=0, dilation=1, groups=1)`;
const convTSig = (n: number) => `nn.functional.conv_transpose${n}d(input, weight, bias=None, stride=1, padding=0, output_padding=0, groups=1, dilation=1)`;

export const conv1d = def(convSig(1), (a) => convImpl(1, false, a));
export const conv2d = def(convSig(2), (a) => convImpl(2, false, a));
export const conv3d = def(convSig(3), (a) => convImpl(3, false, a));
export const conv_transpose1d = def(convTSig(1), (a) => convImpl(1, true, a));
export const conv_transpose2d = def(convTSig(2), (a) => convImpl(2, true, a));
export const conv_transpose3d = def(convTSig(3), (a) => convImpl(3, true, a));

/** nbx.nn.functional.X entries of this family. */
export const functional: Record<string, Fn> = { conv1d, conv2d, conv3d, conv_transpose1d, conv_transpose2d, conv_transpose3d };
/** Tensor methods of this family (tensor as first argument). */
export const methods: Record<string, Fn> = {};
