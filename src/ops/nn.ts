// Operation family: nn. Softmax family, normalization layers, losses and scaled dot-product attention.
//
// The heavy lifting is in three device-neutral kernels (contracts: src/kernels/nn.ts): 'softmax' (a fused
// max / exp-sum / normalize pass over each row of any strided dim, with optional attention masks),
// 'row_norm' (mean/variance or mean-square per row, normalize, affine) and 'nll_loss'; attention adds
// the shared 'gemm'. Everything else composes the elementwise IR and reductions the way PyTorch
// composes them, so half-precision results round where PyTorch's do.

import { Tensor } from '../tensor/tensor.js';
import { DTYPES, dtypeName, isFloat, type DTypeLike, type DTypeName } from '../dtype/dtypes.js';
import { promoteTypes } from '../dtype/promotion.js';
import { DTypeError, ShapeError, UnsupportedError, ValueError } from '../errors.js';
import { broadcastShapes, broadcastStrides, fmtShape, normDim, numelOf } from '../tensor/shape.js';
import { hasKernel, kernel } from '../kernels/registry.js';
import { backendFor, type StridedRef } from '../backend/backend.js';
import { Expr } from '../ir/expr.js';
import { def, scalar, scalarNumber, type ScalarLike } from './registry.js';
import { scope } from '../tensor/storage.js';
import * as ew from './elementwise.js';
import { describe, elementwise, resultTypeOf, type Operand } from './elementwise.js';
import * as red from './reduce.js';
import { torchTypeName as torchName } from './torch_names.js';

// eslint-disable-next-line @typescript-eslint/no-explicit-any
type Fn = (...args: any[]) => any;

// ---- helpers -------------------------------------------------------------------------------------


function asT(op: string, x: unknown, name = 'input'): Tensor {
  if (!(x instanceof Tensor)) throw new ValueError(op, `${op}(): argument '${name}' must be Tensor, not ${describe(x)}`);
  return x;
}
function optT(op: string, x: unknown, name: string): Tensor | null {
  return x === null || x === undefined ? null : asT(op, x, name);
}
const num = (v: unknown): number => scalarNumber(v as ScalarLike);

/** The dtype PyTorch computes in: float32 for float16/bfloat16 (then rounds once), else the dtype itself. */
const opmath = (d: DTypeName): DTypeName => (d === 'float16' || d === 'bfloat16' ? 'float32' : d);

/** Refuses non-float tensors with PyTorch's wording, naming the kernel PyTorch would name. */
function needFloat(op: string, kernelName: string, d: DTypeName): void {
  if (!isFloat(d) || DTYPES[d].storageOnly) throw new DTypeError(op, `"${kernelName}" not implemented for '${torchName(d)}'`);
}

/** def() whose body runs in a scope: intermediate tensors of a composite op are released on return. */
// eslint-disable-next-line @typescript-eslint/no-explicit-any
const defOp = <R>(signature: string, impl: (a: any) => R): ((...args: any[]) => R) => def(signature, (a) => scope(() => impl(a)));

const warned = new Set<string>();
function warnOnce(key: string, msg: string): void {
  if (warned.has(key)) return;
  warned.add(key);
  const proc = (globalThis as { process?: { emitWarning?: (m: string, t: string) => void } }).process;
  if (proc?.emitWarning) proc.emitWarning(msg, 'UserWarning'); else console.warn(`UserWarning: ${msg}`); // (browsers)
}

/** A contiguous tensor of `shape` in `dtype`: `t` itself when it already is one, else an expanded copy. */
function dense(t: Tensor, shape: readonly number[], dtype: DTypeName): Tensor {
  const same = t.shape.length === shape.length && t.shape.every((s, i) => s === shape[i]);
  if (same && t.dt === dtype && t.is_contiguous()) return t;
  return (same ? t : t.expand(shape as number[])).copyAs(dtype);
}
const release = (t: Tensor, keep: Tensor): void => { if (t !== keep) t.dispose(); };

/**
 * `t` (of `dtype`) read as `groups` matrices of `rows` × `cols` elements: itself when its last dim is
 * contiguous and its leading dims merge into one stride (a slice of a KV cache buffer is such a
 * view), else a contiguous copy. Gives the row stride (`ld`) and the stride between matrices.
 */
function rowMatrices(t: Tensor, shape: readonly number[], dtype: DTypeName): { t: Tensor; ld: number; stride: number } {
  const nd = shape.length, rows = shape[nd - 2]!, cols = shape[nd - 1]!;
  const same = t.dt === dtype && t.shape.length === nd && t.shape.every((s, i) => s === shape[i]);
  if (same && (cols <= 1 || t.strides[nd - 1] === 1)) {
    const ld = rows <= 1 ? cols : t.strides[nd - 2]!;
    const stride = mergedStride(t.shape.slice(0, nd - 2), t.strides.slice(0, nd - 2), nd - 2);
    if (ld >= cols && stride !== null && (stride === 0 ? numelOf(shape.slice(0, nd - 2)) <= 1 : stride >= ld * rows)) {
      return { t, ld: Math.max(ld, 1), stride: stride === 0 ? rows * cols : stride };
    }
  }
  const c = dense(t, shape, dtype);
  return { t: c, ld: Math.max(cols, 1), stride: rows * cols };
}

/** A 1-D per-channel parameter viewed as (C, 1, ..., 1) so it broadcasts over (N, C, *). */
const perChannel = (t: Tensor, ndim: number): Tensor => t.reshape([-1, ...Array(Math.max(ndim - 2, 0)).fill(1)]);

// ---- softmax family ------------------------------------------------------------------------------

/** PyTorch's legacy implicit dim (F._get_softmax_dim), with its deprecation warning. */
function implicitDim(name: string, ndim: number): number {
  warnOnce(`implicit-dim-${name}`, `Implicit dimension choice for ${name} has been deprecated. Change the call to include dim=X as an argument.`);
  return ndim === 0 || ndim === 1 || ndim === 3 ? 0 : 1;
}

/** A cast that loses nothing (the kernel can read the input as is). */
const exactWiden = (from: DTypeName, to: DTypeName): boolean =>
  from === to || (to === 'float64' && (from === 'float32' || from === 'float16' || from === 'bfloat16'))
  || (to === 'float32' && (from === 'float16' || from === 'bfloat16'));

function softmaxImpl(op: string, input: unknown, dimArg: unknown, dtype: unknown, log: boolean, negate = false): Tensor {
  const x = asT(op, input);
  const dim = normDim(op, dimArg as number, x.ndim);
  const out = dtype === null || dtype === undefined ? x.dt : dtypeName(dtype as DTypeLike);
  needFloat(op, log ? 'log_softmax_lastdim_kernel_impl' : 'softmax_lastdim_kernel_impl', out);
  // PyTorch casts the input to `dtype` first; reading it directly is the same when the cast is exact.
  const src = exactWiden(x.dt, out) ? x : x.copyAs(out);
  const result = Tensor.empty(x.shape, out, x.device, false);
  if (result.numel() > 0) kernel('softmax', x.device, op)({ x: src.ref(), out: result.ref(), dim, log, negate });
  release(src, x);
  return result;
}

const fSoftmax = (name: string, log: boolean, negate = false) =>
  defOp(`nn.functional.${name}(input, dim=None, _stacklevel=3, dtype=None)`, (a) => {
    const x = asT(`nn.functional.${name}`, a.input);
    const dim = a.dim === null ? implicitDim(name, x.ndim) : a.dim;
    return softmaxImpl(`nn.functional.${name}`, x, dim, a.dtype, log, negate);
  });

export const f_softmax = fSoftmax('softmax', false);
export const f_log_softmax = fSoftmax('log_softmax', true);
export const softmin = fSoftmax('softmin', false, true);
/** torch.softmax / Tensor.softmax: dim is required. */
export const softmax = defOp('softmax(input, dim, dtype=None)', (a) => softmaxImpl('softmax', a.input, a.dim, a.dtype, false));
export const log_softmax = defOp('log_softmax(input, dim, dtype=None)', (a) => softmaxImpl('log_softmax', a.input, a.dim, a.dtype, true));

export const glu = defOp('nn.functional.glu(input, dim=-1)', (a) => {
  const op = 'nn.functional.glu';
  const x = asT(op, a.input);
  if (x.ndim === 0) throw new ShapeError(op, 'glu does not support scalars because halving size must be even');
  needFloat(op, 'glu_cpu', x.dt);
  const dim = normDim(op, a.dim, x.ndim);
  const n = x.shape[dim]!;
  if (n % 2 !== 0) throw new ShapeError(op, `Halving dimension must be even, but dimension ${dim} is size ${n}`);
  const h = n / 2;
  return elementwise(op, [x.narrow(dim, 0, h), x.narrow(dim, h, h)], opmath(x.dt), x.dt,
    ([u, v]) => u!.div(v!.neg().exp().add(1)));
});

// ---- normalization -------------------------------------------------------------------------------

function sizeList(op: string, v: unknown): number[] {
  if (!Array.isArray(v) || !v.every((d) => Number.isInteger(d))) {
    throw new ValueError(op, `${op}(): argument 'normalized_shape' must be a list of ints, not ${describe(v)}`);
  }
  return [...v];
}

/**
 * Checks an affine parameter of a normalization: a tensor of `shape` whose dtype is the input's, or
 * float32 next to a float16/bfloat16 input (PyTorch's mixed-type kernels).
 */
function checkParam(op: string, p: Tensor | null, name: string, x: Tensor, ok: (p: Tensor) => boolean, what: () => string): void {
  if (!p) return;
  if (!ok(p)) throw new ShapeError(op, what());
  if (p.dt !== x.dt && !(p.dt === 'float32' && opmath(x.dt) === 'float32')) {
    throw new DTypeError(op, `expected scalar type ${torchName(x.dt)} but found ${torchName(p.dt)} (${name} must have the input's dtype)`);
  }
}

interface RowNormCall {
  x: Tensor; rows: number; n: number; eps: number; mode: 'layer' | 'rms';
  weight?: Tensor | null; bias?: Tensor | null; groups?: number; chan?: number; outDType?: DTypeName;
  /** Also return per-row mean and biased variance (in the compute dtype); 'only': no normalized output. */
  stats?: boolean | 'only';
}
/** Runs the 'row_norm' kernel on x's contiguous data; returns the normalized tensor (x's shape) and stats. */
function rowNorm(op: string, c: RowNormCall): { out?: Tensor; mean?: Tensor; var?: Tensor } {
  const xc = c.x.contiguous();
  const w = c.weight?.contiguous(), b = c.bias?.contiguous();
  const out = c.stats === 'only' ? undefined : Tensor.empty(c.x.shape, c.outDType ?? c.x.dt, c.x.device, false);
  const sd = opmath(c.x.dt);
  const mean = c.stats ? Tensor.empty([c.rows], sd, c.x.device, false) : undefined;
  const vr = c.stats ? Tensor.empty([c.rows], sd, c.x.device, false) : undefined;
  if (c.rows > 0) { // n = 0 gives NaN statistics, as PyTorch
    kernel('row_norm', c.x.device, op)({
      x: xc.ref(), rows: c.rows, n: c.n, eps: c.eps, mode: c.mode, out: out?.ref(), weight: w?.ref(), bias: b?.ref(),
      groups: c.groups ?? 1, chan: c.chan ?? 1, mean: mean?.ref(), var: vr?.ref(),
    });
  }
  release(xc, c.x);
  if (w && c.weight) release(w, c.weight);
  if (b && c.bias) release(b, c.bias);
  return { out, mean, var: vr };
}

/** The trailing-dims check shared by layer_norm and rms_norm; returns (rows, n). */
function trailing(op: string, x: Tensor, shape: number[]): { rows: number; n: number } {
  const k = shape.length;
  const tail = x.shape.slice(x.ndim - k);
  if (k === 0 || k > x.ndim || tail.some((s, i) => s !== shape[i])) {
    throw new ShapeError(op, `Given normalized_shape=${fmtShape(shape)}, expected input with shape [*, ${shape.join(', ')}], but got input of size${fmtShape(x.shape)}`);
  }
  const n = numelOf(shape);
  return { rows: n === 0 ? 0 : x.numel() / n, n };
}
const sameShape = (shape: number[]) => (p: Tensor): boolean => p.ndim === shape.length && p.shape.every((s, i) => s === shape[i]);

export const layer_norm = defOp('nn.functional.layer_norm(input, normalized_shape, weight=None, bias=None, eps=1e-05)', (a) => {
  const op = 'nn.functional.layer_norm';
  const x = asT(op, a.input);
  const shape = sizeList(op, a.normalized_shape);
  needFloat(op, 'LayerNormKernelImpl', x.dt);
  const { rows, n } = trailing(op, x, shape);
  const w = optT(op, a.weight, 'weight'), b = optT(op, a.bias, 'bias');
  checkParam(op, w, 'weight', x, sameShape(shape), () => `Expected weight to be of same shape as normalized_shape, but got weight of shape ${fmtShape(w!.shape)} and normalized_shape = ${fmtShape(shape)}`);
  checkParam(op, b, 'bias', x, sameShape(shape), () => `Expected bias to be of same shape as normalized_shape, but got bias of shape ${fmtShape(b!.shape)} and normalized_shape = ${fmtShape(shape)}`);
  return rowNorm(op, { x, rows, n, eps: num(a.eps), mode: 'layer', weight: w, bias: b }).out!;
});

/** torch.finfo(d).eps. */
const finfoEps = (d: DTypeName): number => (d === 'float64' ? 2.220446049250313e-16 : d === 'float32' ? 1.1920928955078125e-7
  : d === 'float16' ? 0.0009765625 : 0.0078125);

export const rms_norm = defOp('nn.functional.rms_norm(input, normalized_shape, weight=None, eps=None)', (a) => {
  const op = 'nn.functional.rms_norm';
  const x = asT(op, a.input);
  const shape = sizeList(op, a.normalized_shape);
  needFloat(op, 'rms_norm', x.dt);
  const { rows, n } = trailing(op, x, shape);
  const w = optT(op, a.weight, 'weight');
  if (w && !sameShape(shape)(w)) throw new ShapeError(op, `Expected weight to be of same shape as normalized_shape, but got weight of shape ${fmtShape(w.shape)} and normalized_shape = ${fmtShape(shape)}`);
  if (w) needFloat(op, 'rms_norm', w.dt);
  // PyTorch: eps defaults to the epsilon of the type it computes in (float32 for half types).
  const eps = a.eps === null ? finfoEps(opmath(x.dt)) : num(a.eps);
  return rowNorm(op, { x, rows, n, eps, mode: 'rms', weight: w, outDType: w ? promoteTypes(x.dt, w.dt) : x.dt }).out!;
});

function channelParam(op: string, p: Tensor | null, name: string, x: Tensor, C: number): void {
  checkParam(op, p, name, x, (t) => t.numel() === C,
    () => `Expected ${name} to be a vector of size equal to the number of channels in input, but got ${name} of shape ${fmtShape(p!.shape)} and input of shape ${fmtShape(x.shape)}`);
}

export const group_norm = defOp('nn.functional.group_norm(input, num_groups, weight=None, bias=None, eps=1e-05)', (a) => {
  const op = 'nn.functional.group_norm';
  const x = asT(op, a.input);
  if (x.ndim < 2) throw new ShapeError(op, `Expected at least 2 dimensions for input tensor but received ${x.ndim}`);
  needFloat(op, 'GroupNormKernelImpl', x.dt);
  const G = a.num_groups as number;
  const [N, C] = x.shape as [number, number];
  if (!Number.isInteger(G) || G <= 0 || C % G !== 0) {
    throw new ShapeError(op, `Expected number of channels in input to be divisible by num_groups, but got input of shape ${fmtShape(x.shape)} and num_groups=${G}`);
  }
  const w = optT(op, a.weight, 'weight'), b = optT(op, a.bias, 'bias');
  channelParam(op, w, 'weight', x, C);
  channelParam(op, b, 'bias', x, C);
  const hw = numelOf(x.shape.slice(2));
  return rowNorm(op, { x, rows: N * G, n: (C / G) * hw, eps: num(a.eps), mode: 'layer', weight: w, bias: b, groups: G, chan: hw }).out!;
});

/** Writes `expr(target, src...)` into `target` itself (running statistics are updated in place, as PyTorch). */
function updateInPlace(op: string, target: Tensor, srcs: Tensor[], build: (t: Expr, s: Expr[]) => Expr): void {
  if (!target.is_contiguous()) throw new UnsupportedError(op, `in-place update of a non-contiguous running statistic (shape ${fmtShape(target.shape)}, strides ${fmtShape(target.strides)})`);
  const cd = opmath(target.dt);
  const loads = [target, ...srcs].map((t, i) => Expr.load(i, t.dt).cast(cd));
  const expr = build(loads[0]!, loads.slice(1)).cast(target.dt);
  backendFor(target.device).elementwise(expr, [target.ref(), ...srcs.map((s) => s.ref())], [], target.ref());
}

/** y = (x - mean) * rsqrt(var + eps) * w + b with per-channel statistics and parameters. */
function normalizeChannels(op: string, x: Tensor, mean: Tensor, vr: Tensor, w: Tensor | null, b: Tensor | null, eps: number): Tensor {
  const ops: Operand[] = [x, perChannel(mean, x.ndim), perChannel(vr, x.ndim)];
  if (w) ops.push(perChannel(w, x.ndim));
  if (b) ops.push(perChannel(b, x.ndim));
  return elementwise(op, ops, opmath(x.dt), x.dt, ([xx, m, v, ...rest], ctx) => {
    let y = xx!.sub(m!).mul(v!.add(ctx.param(eps, v!.dtype)).un('rsqrt'));
    if (w) y = y.mul(rest[0]!);
    if (b) y = y.add(rest[w ? 1 : 0]!);
    return y;
  });
}

/** Blends batch statistics into running ones: r = (1 - momentum)·r + momentum·s (var unbiased by n/(n-1)). */
function updateRunning(op: string, rm: Tensor | null, rv: Tensor | null, mean: Tensor, vr: Tensor, momentum: number, n: number): void {
  const blend = (r: Tensor, s: Tensor, scale: number): void => updateInPlace(op, r, [s], (t, [v]) =>
    t.mul(Expr.const(1 - momentum, t.dtype)).add(v!.cast(t.dtype).mul(Expr.const(momentum * scale, t.dtype))));
  if (rm) blend(rm, mean, 1);
  if (rv) blend(rv, vr, n > 1 ? n / (n - 1) : Infinity);
}

export const batch_norm = defOp('nn.functional.batch_norm(input, running_mean, running_var, weight=None, bias=None, training=False, momentum=0.1, eps=1e-05)', (a) => {
  const op = 'nn.functional.batch_norm';
  const x = asT(op, a.input);
  if (x.ndim < 2) throw new ShapeError(op, `Expected 2D or higher input (got ${x.ndim}D input)`);
  needFloat(op, 'batch_norm', x.dt);
  const C = x.shape[1]!;
  const rm = optT(op, a.running_mean, 'running_mean'), rv = optT(op, a.running_var, 'running_var');
  const w = optT(op, a.weight, 'weight'), b = optT(op, a.bias, 'bias');
  for (const [t, name] of [[rm, 'running_mean'], [rv, 'running_var'], [w, 'weight'], [b, 'bias']] as const) {
    checkParam(op, t, name, x, (p) => p.numel() === C, () => `${name} should contain ${C} elements not ${t!.numel()}`);
  }
  const eps = num(a.eps);
  if (!a.training) {
    if (!rm || !rv) throw new ValueError(op, `running_${!rm ? 'mean' : 'var'} must be defined in evaluation mode`);
    return normalizeChannels(op, x, rm, rv, w, b, eps);
  }
  const per = x.numel() / Math.max(C, 1);
  if (per === 1) throw new ValueError(op, `Expected more than 1 value per channel when training, got input size ${fmtShape(x.shape)}`);
  // Channel statistics: rows of the (C, N·HW) transposed copy.
  const xt = x.transpose(0, 1).contiguous();
  const { mean, var: vr } = rowNorm(op, { x: xt, rows: C, n: per, eps, mode: 'layer', stats: 'only' });
  xt.dispose();
  if (a.momentum !== null) updateRunning(op, rm, rv, mean!, vr!, num(a.momentum), per);
  const y = normalizeChannels(op, x, mean!, vr!, w, b, eps);
  mean!.dispose(); vr!.dispose();
  return y;
});

export const instance_norm = defOp('nn.functional.instance_norm(input, running_mean=None, running_var=None, weight=None, bias=None, use_input_stats=True, momentum=0.1, eps=1e-05)', (a) => {
  const op = 'nn.functional.instance_norm';
  const x = asT(op, a.input);
  if (x.ndim < 2) throw new ShapeError(op, `Expected 2D or higher input (got ${x.ndim}D input)`);
  needFloat(op, 'instance_norm', x.dt);
  const [N, C] = x.shape as [number, number];
  const rm = optT(op, a.running_mean, 'running_mean'), rv = optT(op, a.running_var, 'running_var');
  const w = optT(op, a.weight, 'weight'), b = optT(op, a.bias, 'bias');
  for (const [t, name] of [[rm, 'running_mean'], [rv, 'running_var'], [w, 'weight'], [b, 'bias']] as const) {
    checkParam(op, t, name, x, (p) => p.numel() === C, () => `${name} should contain ${C} elements not ${t!.numel()}`);
  }
  const eps = num(a.eps);
  if (!a.use_input_stats) {
    if (!rm || !rv) throw new ValueError(op, 'Expected running_mean and running_var to be defined when use_input_stats is false');
    return normalizeChannels(op, x, rm, rv, w, b, eps);
  }
  const hw = numelOf(x.shape.slice(2));
  if (hw === 1) throw new ValueError(op, `Expected more than 1 spatial element when training, got input size ${fmtShape(x.shape)}`);
  const { out, mean, var: vr } = rowNorm(op, { x, rows: N * C, n: hw, eps, mode: 'layer', weight: w, bias: b, groups: C, chan: hw, stats: !!(rm || rv) });
  if (mean && vr) {
    // PyTorch blends the batch average of the per-instance statistics.
    const m = red.mean(mean.view([N, C]), 0), v = red.mean(vr.view([N, C]), 0);
    updateRunning(op, rm, rv, m, v, num(a.momentum), hw);
    for (const t of [m, v, mean, vr]) t.dispose();
  }
  return out!;
});

export const normalize = defOp('nn.functional.normalize(input, p=2.0, dim=1, eps=1e-12, out=None)', (a) => {
  const op = 'nn.functional.normalize';
  const x = asT(op, a.input);
  if (a.out !== null) throw new UnsupportedError(op, 'the out= argument is not supported; use the returned tensor');
  if (!isFloat(x.dt)) throw new DTypeError(op, `norm(): input dtype should be either floating point or complex. Got ${torchName(x.dt)} instead.`);
  const n = red.vector_norm(x, a.p, a.dim, true) as Tensor;
  // input / norm.clamp_min(eps): the norm is rounded to the input dtype first, as in PyTorch.
  const y = elementwise(op, [x, n], opmath(x.dt), x.dt, ([u, v], ctx) => u!.div(v!.max(ctx.param(num(a.eps), v!.dtype))));
  n.dispose();
  return y;
});

export const _weight_norm = defOp('_weight_norm(v, g, dim=0)', (a) => {
  const op = '_weight_norm';
  const v = asT(op, a.v, 'v'), g = asT(op, a.g, 'g');
  needFloat(op, 'weight_norm', v.dt);
  // dim == -1 means "norm over everything" here (norm_except_dim), not the last dim.
  const dim = a.dim === -1 ? -1 : normDim(op, a.dim, v.ndim);
  const dims = dim === -1 ? null : [...Array(v.ndim).keys()].filter((d) => d !== dim);
  const out = resultTypeOf(v, g);
  // PyTorch fuses (one rounding) for dim 0 or last without float16; otherwise it composes
  // v * (g / norm) with the norm and the quotient rounded to the dtype in between.
  const fused = v.dt !== 'float16' && g.dt !== 'float16' && (dim === 0 || dim === v.ndim - 1);
  const nd = fused ? opmath(v.dt) : v.dt;
  const n = (dims === null ? red.vector_norm(v, 2, null, false, { dtype: nd }) : red.vector_norm(v, 2, dims, true, { dtype: nd })) as Tensor;
  let y: Tensor;
  if (fused) y = elementwise(op, [v, g, n], opmath(out), out, ([vv, gg, nn]) => vv!.mul(gg!.div(nn!)));
  else { const q = ew.div(g, n); y = ew.mul(v, q); q.dispose(); }
  n.dispose();
  return y;
});

export const local_response_norm = defOp('nn.functional.local_response_norm(input, size, alpha=0.0001, beta=0.75, k=1.0)', (a) => {
  const op = 'nn.functional.local_response_norm';
  const x = asT(op, a.input);
  if (x.ndim < 3) throw new ValueError(op, `Expected 3D or higher dimensionality input (got ${x.ndim} dimensions)`);
  needFloat(op, 'local_response_norm', x.dt);
  const size = a.size as number;
  if (!Number.isInteger(size) || size <= 0) throw new ValueError(op, `size must be a positive integer, got ${String(a.size)}`);
  const out = Tensor.empty(x.shape, x.dt, x.device, false);
  if (out.numel() > 0) {
    kernel('local_response_norm', x.device, op)({ x: x.ref(), out: out.ref(), dim: 1, size, alpha: num(a.alpha), beta: num(a.beta), k: num(a.k) });
  }
  return out;
});

// ---- losses --------------------------------------------------------------------------------------

type Reduction = 'none' | 'mean' | 'sum';

/** The reduction, honouring the legacy size_average/reduce flags the way PyTorch's _Reduction does. */
function reductionOf(op: string, a: Record<string, unknown>): Reduction {
  if ((a.size_average ?? null) !== null || (a.reduce ?? null) !== null) {
    const sa = a.size_average ?? true, rd = a.reduce ?? true;
    warnOnce('legacy-reduction', "size_average and reduce args will be deprecated, please use reduction='" + (rd ? (sa ? 'mean' : 'sum') : 'none') + "' instead.");
    return rd ? (sa ? 'mean' : 'sum') : 'none';
  }
  const r = a.reduction;
  if (r !== 'none' && r !== 'mean' && r !== 'sum') throw new ValueError(op, `${String(r)} is not a valid value for reduction`);
  return r;
}

function applyReduction(loss: Tensor, r: Reduction): Tensor {
  if (r === 'none') return loss;
  const y = r === 'mean' ? red.mean(loss) : red.sum(loss);
  loss.dispose();
  return y;
}

interface NllArgs { input: Tensor; target: Tensor; weight: Tensor | null; ignoreIndex: number; reduction: Reduction }

/** Validates nll_loss operands; returns the [N, C, D] geometry (D = product of the spatial dims). */
function nllGeometry(op: string, input: Tensor, target: Tensor, weight: Tensor | null): { N: number; C: number; D: number } {
  if (input.ndim < 1) throw new ValueError(op, `Expected 1 or more dimensions (got ${input.ndim})`);
  if (target.dt !== 'int64' && target.dt !== 'uint8') throw new DTypeError(op, `expected scalar type Long but found ${torchName(target.dt)}`);
  needFloat(op, 'nll_loss_out_frame', input.dt);
  const C = input.ndim === 1 ? input.shape[0]! : input.shape[1]!;
  if (weight) {
    if (weight.numel() !== C || weight.ndim !== 1) throw new ShapeError(op, `weight tensor should be defined either for all ${C} classes or no classes but got weight tensor of shape: ${fmtShape(weight.shape)}`);
    if (weight.dt !== input.dt) throw new DTypeError(op, `expected scalar type ${torchName(input.dt)} but found ${torchName(weight.dt)}`);
  }
  if (input.ndim === 1) {
    if (target.ndim !== 0) throw new ShapeError(op, `0D target tensor expected for 1D input (unbatched), got target of shape ${fmtShape(target.shape)}`);
    return { N: 1, C, D: 1 };
  }
  const N = input.shape[0]!;
  if (target.ndim === 0 || target.shape[0] !== N) {
    throw new ValueError(op, `Expected input batch_size (${N}) to match target batch_size (${target.ndim ? target.shape[0] : 0}).`);
  }
  const spatial = input.shape.slice(2);
  if (target.ndim !== spatial.length + 1 || spatial.some((s, i) => s !== target.shape[i + 1])) {
    throw new ShapeError(op, `Expected target size ${fmtShape([N, ...spatial])}, got ${fmtShape(target.shape)}`);
  }
  return { N, C, D: numelOf(spatial) };
}

/** nll_loss; with `withTotal` also the total weight of the kept items (in the input dtype, or float32 counts). */
function nllImpl(op: string, p: NllArgs, withTotal = false): { loss: Tensor; total?: Tensor } {
  const { input, target, weight } = p;
  const { N, C, D } = nllGeometry(op, input, target, weight);
  const x = input.contiguous(), t = target.contiguous(), w = weight?.contiguous();
  const loss = Tensor.empty(p.reduction === 'none' ? target.shape : [], input.dt, input.device, false);
  const sums = Tensor.empty([2], opmath(input.dt), input.device, false);
  const none = p.reduction === 'none';
  kernel('nll_loss', input.device, op)({ input: x.ref(), target: t.ref(), weight: w?.ref(), N, C, D, ignoreIndex: p.ignoreIndex,
    out: none ? loss.ref() : undefined, sums: sums.ref() });
  release(x, input); release(t, target); if (w && weight) release(w, weight);
  let total: Tensor | undefined;
  if (withTotal) total = elementwise(op, [sums.select(0, 1)], sums.dt, weight ? input.dt : 'float32', ([s]) => s!);
  if (!none) {
    // One rounding to the input dtype: sum / total weight (0/0 = NaN when every target is ignored).
    const s0 = sums.select(0, 0), s1 = sums.select(0, 1);
    const r = elementwise(op, p.reduction === 'mean' ? [s0, s1] : [s0], sums.dt, input.dt, ([s, tw]) => (tw ? s!.div(tw) : s!));
    loss.dispose();
    sums.dispose();
    return { loss: r, total };
  }
  sums.dispose();
  return { loss, total };
}

export const nll_loss = defOp('nn.functional.nll_loss(input, target, weight=None, size_average=None, ignore_index=-100, reduce=None, reduction=\'mean\')', (a) => {
  const op = 'nn.functional.nll_loss';
  return nllImpl(op, { input: asT(op, a.input), target: asT(op, a.target, 'target'), weight: optT(op, a.weight, 'weight'),
    ignoreIndex: a.ignore_index as number, reduction: reductionOf(op, a) }).loss;
});

export const cross_entropy = defOp('nn.functional.cross_entropy(input, target, weight=None, size_average=None, ignore_index=-100, reduce=None, reduction=\'mean\', label_smoothing=0.0)', (a) => {
  const op = 'nn.functional.cross_entropy';
  const input = asT(op, a.input), target = asT(op, a.target, 'target'), weight = optT(op, a.weight, 'weight');
  const reduction = reductionOf(op, a);
  const eps = num(a.label_smoothing), ignore = a.ignore_index as number;
  if (!(eps >= 0 && eps <= 1)) throw new ValueError(op, `label_smoothing must be between 0.0 and 1.0. Got: ${eps}`);
  if (input.ndim < 1) throw new ValueError(op, `Expected 1 or more dimensions (got ${input.ndim})`);
  needFloat(op, 'log_softmax_lastdim_kernel_impl', input.dt);
  const cd = input.ndim === 1 ? 0 : 1;
  const C = input.shape[cd]!;
  if (weight && (weight.ndim !== 1 || weight.numel() !== C)) {
    throw new ShapeError(op, `weight tensor should be defined either for all ${C} classes or no classes but got weight tensor of shape: ${fmtShape(weight.shape)}`);
  }
  const lp = softmaxImpl(op, input, cd, null, true);
  const wb = weight ? weight.reshape([C, ...Array(Math.max(input.ndim - cd - 1, 0)).fill(1)]) : null;
  const probTarget = input.ndim === target.ndim && input.shape.every((s, i) => s === target.shape[i]);
  if (probTarget) {
    // Class probabilities (PyTorch's cross_entropy_loss_prob_target).
    if (!isFloat(target.dt)) throw new DTypeError(op, `Expected floating point type for target with class probabilities, got ${torchName(target.dt)}`);
    if (ignore >= 0) throw new ValueError(op, 'ignore_index is not supported for floating point target');
    const tgt = eps > 0 ? ew.add(ew.mul(target, scalar.float(1 - eps)), scalar.float(eps / C)) : target;
    let prod = ew.mul(lp, tgt);
    if (wb) prod = ew.mul(prod, wb);
    let r: Tensor;
    if (reduction === 'none') r = ew.neg(red.sum(prod, cd));
    else {
      r = ew.neg(red.sum(prod));
      if (reduction === 'mean') r = input.numel() === 0 ? ew.mul(r, NaN) : ew.div(r, scalar.float(input.numel() / C));
    }
    return r;
  }
  const { loss: nll, total } = nllImpl(op, { input: lp, target, weight, ignoreIndex: ignore, reduction }, eps > 0);
  if (eps === 0) { lp.dispose(); return nll; }
  // Label smoothing (PyTorch's cross_entropy_loss_label_smoothing), op by op so half types round alike.
  let smooth = ew.neg(red.sum(wb ? ew.mul(lp, wb) : lp, cd));
  smooth = ew.masked_fill(smooth, ew.eq(target, ignore), 0);
  let ret: Tensor;
  if (reduction === 'none') ret = smooth;
  else if (reduction === 'sum') ret = red.sum(smooth);
  else {
    const s = red.sum(smooth);
    ret = elementwise(op, [s, total!], opmath(input.dt), input.dt, ([u, v]) => u!.div(v!.cast(u!.dtype)));
  }
  return ew.add(ew.mul(nll, scalar.float(1 - eps)), ew.mul(ret, scalar.float(eps / C)));
});

/** Broadcasting losses warn when target and input shapes differ, as PyTorch does. */
function pairShapes(op: string, input: Tensor, target: Tensor): void {
  const same = input.ndim === target.ndim && input.shape.every((s, i) => s === target.shape[i]);
  if (!same) {
    broadcastShapes(op, input.shape, target.shape);
    warnOnce(`${op}-size`, `Using a target size (${fmtShape(target.shape)}) that is different to the input size (${fmtShape(input.shape)}). This will likely lead to incorrect results due to broadcasting. Please ensure they have the same size.`);
  }
}

/** A pointwise loss f(input, target) in the promoted float dtype, then the reduction. */
function pointwiseLoss(op: string, kernelName: string, a: Record<string, unknown>, reduction: Reduction,
  f: (x: Expr, y: Expr, ctx: ew.EwContext) => Expr, extra: Tensor[] = []): Tensor {
  const input = asT(op, a.input), target = asT(op, a.target, 'target');
  pairShapes(op, input, target);
  const d = resultTypeOf(input, target);
  needFloat(op, kernelName, d);
  const loss = elementwise(op, [input, target, ...extra], opmath(d), d, ([x, y, ...rest], ctx) => {
    let l = f(x!, y!, ctx);
    for (const w of rest) l = l.mul(w!);
    return l;
  });
  return applyReduction(loss, reduction);
}

/**
 * The optional elementwise `weight` of mse_loss, l1_loss and huber_loss (PyTorch 2.6+): same size as the
 * input; 'mean' is sum(w·loss) / sum(w) for mse and l1, mean(w·loss) for huber.
 */
function weightedLoss(op: string, a: Record<string, unknown>, reduction: Reduction, loss: Tensor, meanOverWeights: boolean): Tensor {
  const w = optT(op, a.weight, 'weight');
  if (!w) return applyReduction(loss, reduction);
  const input = a.input as Tensor;
  if (w.ndim !== input.ndim || w.shape.some((d, i) => d !== input.shape[i])) throw new ValueError(op, 'Weights and input must have the same size.');
  const wl = ew.mul(loss, w);
  loss.dispose();
  if (reduction !== 'mean' || !meanOverWeights) return applyReduction(wl, reduction);
  const num = red.sum(wl), den = red.sum(w);
  const r = ew.div(num, den);
  for (const t of [wl, num, den]) t.dispose();
  return r;
}

export const mse_loss = defOp("nn.functional.mse_loss(input, target, size_average=None, reduce=None, reduction='mean', weight=None)", (a) => {
  const op = 'nn.functional.mse_loss', r = reductionOf(op, a);
  const loss = pointwiseLoss(op, 'mse_cpu', a, a.weight === null ? r : 'none', (x, y) => { const d = x.sub(y); return d.mul(d); });
  return a.weight === null ? loss : weightedLoss(op, a, r, loss, true);
});

export const l1_loss = defOp("nn.functional.l1_loss(input, target, size_average=None, reduce=None, reduction='mean', weight=None)", (a) => {
  const op = 'nn.functional.l1_loss', r = reductionOf(op, a);
  const loss = pointwiseLoss(op, 'l1_loss', a, a.weight === null ? r : 'none', (x, y) => x.sub(y).abs());
  return a.weight === null ? loss : weightedLoss(op, a, r, loss, true);
});

export const smooth_l1_loss = defOp("nn.functional.smooth_l1_loss(input, target, size_average=None, reduce=None, reduction='mean', beta=1.0)", (a) => {
  const op = 'nn.functional.smooth_l1_loss';
  const beta = num(a.beta);
  if (beta < 0) throw new ValueError(op, 'smooth_l1_loss does not support negative values for beta.');
  return pointwiseLoss(op, 'smooth_l1_cpu', a, reductionOf(op, a), (x, y, ctx) => {
    const z = x.sub(y).abs();
    if (beta === 0) return z;
    const b = ctx.param(beta, z.dtype);
    return Expr.where(z.lt(b), Expr.const(0.5, z.dtype).mul(z).mul(z).div(b), z.sub(Expr.const(0.5, z.dtype).mul(b)));
  });
});

export const huber_loss = defOp("nn.functional.huber_loss(input, target, reduction='mean', delta=1.0, weight=None)", (a) => {
  const op = 'nn.functional.huber_loss';
  const delta = num(a.delta), r = reductionOf(op, a);
  if (!(delta > 0)) throw new ValueError(op, 'huber_loss does not support non-positive values for delta.');
  const loss = pointwiseLoss(op, 'huber_cpu', a, a.weight === null ? r : 'none', (x, y, ctx) => {
    const z = x.sub(y).abs(), dl = ctx.param(delta, z.dtype), half = Expr.const(0.5, z.dtype);
    return Expr.where(z.lt(dl), half.mul(z).mul(z), dl.mul(z.sub(half.mul(dl))));
  });
  return a.weight === null ? loss : weightedLoss(op, a, r, loss, false);
});

function sameSizeTarget(op: string, input: Tensor, target: Tensor, msg: string): void {
  if (input.ndim !== target.ndim || input.shape.some((s, i) => s !== target.shape[i])) throw new ValueError(op, msg);
}

export const binary_cross_entropy = defOp("nn.functional.binary_cross_entropy(input, target, weight=None, size_average=None, reduce=None, reduction='mean')", (a) => {
  const op = 'nn.functional.binary_cross_entropy';
  const input = asT(op, a.input), target = asT(op, a.target, 'target'), weight = optT(op, a.weight, 'weight');
  sameSizeTarget(op, input, target, `Using a target size (${fmtShape(target.shape)}) that is different to the input size (${fmtShape(input.shape)}) is deprecated. Please ensure they have the same size.`);
  needFloat(op, 'binary_cross_entropy', input.dt);
  const bad = elementwise(op, [input], input.dt, 'bool', ([x]) => x!.ge(Expr.const(0, x!.dtype)).bin('and', x!.le(Expr.const(1, x!.dtype))).un('not'));
  const anyBad = red.any(bad);
  const isBad = anyBad.item();
  bad.dispose(); anyBad.dispose();
  if (isBad) throw new ValueError(op, 'all elements of input should be between 0 and 1');
  return pointwiseLoss(op, 'binary_cross_entropy', a, reductionOf(op, a), (x, y) => {
    // PyTorch clamps each log at -100 so that 0·log(0) terms stay finite.
    const m100 = Expr.const(-100, x.dtype), one = Expr.const(1, x.dtype);
    return y.sub(one).mul(x.neg().un('log1p').max(m100)).sub(y.mul(x.log().max(m100)));
  }, weight ? [weight] : []);
});

export const binary_cross_entropy_with_logits = defOp("nn.functional.binary_cross_entropy_with_logits(input, target, weight=None, size_average=None, reduce=None, reduction='mean', pos_weight=None)", (a) => {
  const op = 'nn.functional.binary_cross_entropy_with_logits';
  const input = asT(op, a.input), target = asT(op, a.target, 'target');
  const weight = optT(op, a.weight, 'weight'), pw = optT(op, a.pos_weight, 'pos_weight');
  sameSizeTarget(op, input, target, `Target size (${fmtShape(target.shape)}) must be the same as input size (${fmtShape(input.shape)})`);
  const extra = [...(pw ? [pw] : []), ...(weight ? [weight] : [])];
  const input2 = asT(op, a.input), d = resultTypeOf(input2, target);
  needFloat(op, 'binary_cross_entropy_with_logits', d);
  const loss = elementwise(op, [input, target, ...extra], opmath(d), d, ([x, y, ...rest]) => {
    const one = Expr.const(1, x!.dtype), zero = Expr.const(0, x!.dtype);
    // (1 - y)·x + lw·(log1p(exp(-|x|)) + max(-x, 0)), lw = 1 + (pos_weight - 1)·y
    const soft = x!.abs().neg().exp().un('log1p').add(x!.neg().max(zero));
    const lw = pw ? rest[0]!.sub(one).mul(y!).add(one) : one;
    let l = one.sub(y!).mul(x!).add(lw.mul(soft));
    if (weight) l = l.mul(rest[pw ? 1 : 0]!);
    return l;
  });
  return applyReduction(loss, reductionOf(op, a));
});

export const kl_div = defOp("nn.functional.kl_div(input, target, size_average=None, reduce=None, reduction='mean', log_target=False)", (a) => {
  const op = 'nn.functional.kl_div';
  let reduction: Reduction | 'batchmean';
  if (a.reduction === 'batchmean' && (a.size_average ?? null) === null && (a.reduce ?? null) === null) reduction = 'batchmean';
  else {
    reduction = reductionOf(op, a);
    if (reduction === 'mean') {
      warnOnce('kl_div-mean', "reduction: 'mean' divides the total loss by both the batch size and the support size.'batchmean' divides only by the batch size, and aligns with the KL div math definition.'mean' will be changed to behave the same as 'batchmean' in the next major release.");
    }
  }
  const input = asT(op, a.input);
  const loss = pointwiseLoss(op, 'kl_div', a, 'none', (x, y) => (a.log_target
    ? y.exp().mul(y.sub(x))
    : Expr.where(y.un('isnan'), y, Expr.where(y.eq(Expr.const(0, y.dtype)), Expr.const(0, y.dtype), y.mul(y.log()))).sub(y.mul(x))));
  if (reduction !== 'batchmean') return applyReduction(loss, reduction);
  const s = red.sum(loss);
  loss.dispose();
  if (input.ndim === 0) return s;
  const r = ew.div(s, input.shape[0]!);
  s.dispose();
  return r;
});

// ---- attention -----------------------------------------------------------------------------------

/** Scores kept at once (elements): larger problems run in blocks of heads or query rows. */
let SCORE_BLOCK = 1 << 22;
/** Query rows per block of causal attention. */
let CAUSAL_ROWS = 128;
/** Test hook: small sizes exercise the blocked paths on small inputs. Returns the previous sizes. */
export function _setAttentionBlock(scores: number, causalRows = CAUSAL_ROWS): [number, number] {
  const old: [number, number] = [SCORE_BLOCK, CAUSAL_ROWS];
  SCORE_BLOCK = scores; CAUSAL_ROWS = causalRows;
  return old;
}

/**
 * The rule for the fused 'attention' kernel (src/backend/cuda/kernels/attention.ts): head dim 64 or 128
 * (query/key and value alike), or what the kernel's headDims says for the dtype on its device (CUDA: 256
 * too for float16/bfloat16 where the Hopper kernel runs); float16/bfloat16 for any length, float32 only
 * for decode (at most FUSED_DECODE_ROWS query rows per key/value head); bool or float masks; GQA with
 * equal key/value heads.
 * Anything else (float64, other head dims, empty inputs) takes the composed path.
 */
const FUSED_HEAD_DIMS = [64, 128];
const FUSED_DECODE_ROWS = 16;

/** Merges the leading dims of a view into one (stride of the merged dim), or null when their strides do not allow it. */
function mergedStride(shape: readonly number[], strides: readonly number[], n: number): number | null {
  let st: number | null = null, span = 1;
  for (let d = n - 1; d >= 0; d--) {
    if (shape[d] === 1) continue;
    if (st === null) st = strides[d]!;
    else if (strides[d] !== st * span) return null;
    span *= shape[d]!;
  }
  return st ?? 0;
}

function fusedAttention(op: string, q: Tensor, k: Tensor, v: Tensor, mask: Tensor | undefined, causal: boolean, scale: number, gqa: boolean): Tensor | null {
  if (!hasKernel('attention', q.device.type)) return null;
  const dt = q.dt, nd = (t: Tensor, i: number): number => t.shape[t.ndim - i]!;
  const L = nd(q, 2), E = nd(q, 1), S = nd(k, 2);
  const fk = kernel('attention', q.device, op);
  if (!(fk.headDims?.(dt) ?? FUSED_HEAD_DIMS).includes(E) || nd(v, 1) !== E || L === 0 || S === 0) return null;
  if (dt !== 'float16' && dt !== 'bfloat16' && dt !== 'float32') return null;
  // heads: grouped (enable_gqa with 3-D+ inputs) or matmul-style broadcast of all leading dims
  let outer: number[], H: number, Hk: number, noHeads = false;
  const grouped = gqa && q.ndim >= 3 && k.ndim >= 3 && v.ndim >= 3;
  if (grouped) {
    H = nd(q, 3); Hk = nd(k, 3);
    if (nd(v, 3) !== Hk || H % Hk !== 0) return null;
    outer = broadcastShapes(op, q.shape.slice(0, -3), k.shape.slice(0, -3), v.shape.slice(0, -3));
  } else {
    const full = broadcastShapes(op, q.shape.slice(0, -2), k.shape.slice(0, -2), v.shape.slice(0, -2));
    outer = full.slice(0, -1); H = Hk = full.length ? full[full.length - 1]! : 1; noHeads = full.length === 0;
  }
  const rep = H / Hk;
  if (dt === 'float32' && rep * L > FUSED_DECODE_ROWS) return null;
  const B = numelOf(outer), nO = outer.length;
  const scoreShape = [...outer, H, L, S];
  const vec = 16 / DTYPES[dt].itemsize; // the kernels load 16-byte vectors of rows
  const temps: Tensor[] = [];
  /** `t` expanded to [...outer, heads, rows, E] as a 4-D ref [B, heads, rows, E]: a view when strides allow, else a contiguous copy. */
  const ref4 = (t: Tensor, heads: number, rows: number): StridedRef => {
    let te = t.expand([...outer, heads, rows, E]);
    const aligned = (x: Tensor): boolean => x.strides[nO + 2] === 1 && x.offset % vec === 0 && x.strides.slice(0, nO + 2).every((s) => s % vec === 0);
    let sb = mergedStride(te.shape, te.strides, nO);
    if (sb === null || !aligned(te)) { te = te.contiguous(); temps.push(te); sb = mergedStride(te.shape, te.strides, nO)!; }
    return { ...te.ref(), shape: [B, heads, rows, E], strides: [sb, te.strides[nO]!, te.strides[nO + 1]!, 1] };
  };
  const out = Tensor.empty([...outer, H, L, E], dt, q.device, false);
  let maskRef: StridedRef | undefined;
  if (mask) {
    if (mask.ndim > scoreShape.length) return null; // the composed path raises the error
    broadcastShapes(op, mask.shape, scoreShape);
    let ms = broadcastStrides(mask.shape, mask.strides, scoreShape);
    let sb = mergedStride(scoreShape, ms, nO);
    let mt = mask;
    if (sb === null) { mt = mask.expand(scoreShape).contiguous(); temps.push(mt); ms = [...mt.strides]; sb = mergedStride(scoreShape, ms, nO)!; }
    maskRef = { ...mt.ref(), shape: [B, H, L, S], strides: [sb, ms[nO]!, ms[nO + 1]!, ms[nO + 2]!] };
  }
  fk({ q: ref4(q, H, L), k: ref4(k, Hk, S), v: ref4(v, Hk, S), out: { ...out.ref(), shape: [B, H, L, E], strides: [H * L * E, L * E, E, 1] }, mask: maskRef, causal, scale, rep });
  for (const t of temps) t.dispose();
  return noHeads ? out.view([L, E]) : out; // 2-D inputs: no head dim in the output
}

export const scaled_dot_product_attention = defOp('nn.functional.scaled_dot_product_attention(query, key, value, attn_mask=None, dropout_p=0.0, is_causal=False, *, scale=None, enable_gqa=False)', (a) => {
  const op = 'nn.functional.scaled_dot_product_attention';
  const q = asT(op, a.query, 'query'), k = asT(op, a.key, 'key'), v = asT(op, a.value, 'value');
  const mask = optT(op, a.attn_mask, 'attn_mask');
  if (q.dt !== k.dt || q.dt !== v.dt) {
    throw new DTypeError(op, `Expected query, key, and value to have the same dtype, but got query.dtype: ${q.dt} key.dtype: ${k.dt} and value.dtype: ${v.dt} instead.`);
  }
  needFloat(op, 'scaled_dot_product_attention', q.dt);
  if (q.ndim < 2 || k.ndim < 2 || v.ndim < 2) throw new ShapeError(op, `query, key and value must have at least 2 dimensions, got ${fmtShape(q.shape)}, ${fmtShape(k.shape)}, ${fmtShape(v.shape)}`);
  const dropout = num(a.dropout_p);
  if (dropout !== 0) {
    throw new UnsupportedError(op, `dropout_p=${dropout} is not supported (this engine is for inference: pass dropout_p=0.0, which is what eval mode uses)`);
  }
  if (a.is_causal && mask) throw new ValueError(op, '_scaled_dot_product_attention: Explicit attn_mask should not be set when is_causal=True');
  if (mask && mask.dt !== 'bool' && mask.dt !== 'float32' && mask.dt !== q.dt) {
    throw new DTypeError(op, `Expected attn_mask dtype to be bool or float or to match query dtype, but got attn_mask.dtype: ${mask.dt} and  query.dtype: ${q.dt} instead.`);
  }
  const [L, E] = q.shape.slice(-2) as [number, number];
  const [S, Ek] = k.shape.slice(-2) as [number, number];
  const [Sv, Ev] = v.shape.slice(-2) as [number, number];
  if (Ek !== E) throw new ShapeError(op, `query and key must have the same embedding dim, got ${E} and ${Ek} (shapes ${fmtShape(q.shape)}, ${fmtShape(k.shape)})`);
  if (Sv !== S) throw new ShapeError(op, `key and value must have the same sequence length, got ${S} and ${Sv} (shapes ${fmtShape(k.shape)}, ${fmtShape(v.shape)})`);
  const scale = a.scale === null ? 1 / Math.sqrt(E) : num(a.scale);

  // A device's fused kernel ('attention': no L×S score matrix) where it covers the case, else the composed path.
  const fused = fusedAttention(op, q, k, v, mask ?? undefined, !!a.is_causal, scale, !!a.enable_gqa);
  if (fused) return fused;

  // Grouped-query attention: query heads h = g·rep + r share key/value head g. The rep·L query rows of a
  // group are contiguous, so each group is one (rep·L × E)·(E × S) product: no key/value repeat.
  let kk = k, vv = v, rep = 1;
  const Hq = q.ndim >= 3 ? q.shape[q.ndim - 3]! : 1;
  if (a.enable_gqa && (k.ndim >= 3 && v.ndim >= 3) && q.ndim >= 3) {
    const Hk = k.shape[k.ndim - 3]!, Hv = v.shape[v.ndim - 3]!;
    if (Hq % Hk !== 0 || Hq % Hv !== 0) {
      throw new ShapeError(op, `number of heads in key/value must divide number of heads in query (query heads ${Hq}, key heads ${Hk}, value heads ${Hv})`);
    }
    const repeat = (t: Tensor, r: number): Tensor => {
      const s = t.shape;
      return t.unsqueeze(t.ndim - 2).expand([...s.slice(0, -2), r, ...s.slice(-2)]).reshape([...s.slice(0, -3), s[s.length - 3]! * r, ...s.slice(-2)]);
    };
    if (Hk === Hv) rep = Hq / Hk;
    else { kk = repeat(k, Hq / Hk); vv = repeat(v, Hq / Hv); }
  }
  // Batch dims broadcast as in matmul; with grouping the head dim of k/v stays Hq/rep.
  const outerOf = (t: Tensor): number[] => t.shape.slice(0, rep > 1 ? -3 : -2);
  const outer = broadcastShapes(op, outerOf(q), outerOf(kk), outerOf(vv));
  const headDims = rep > 1 ? [Hq / rep] : [];
  const G = numelOf(outer) * (rep > 1 ? Hq / rep : 1);
  const outShape = rep > 1 ? [...outer, Hq, L, Ev] : [...outer, L, Ev];
  const cd = opmath(q.dt);
  const qc = dense(q, rep > 1 ? [...outer, Hq, L, E] : [...outer, L, E], cd);
  // Keys and values are read where they are (a KV cache's filled part is a strided view), not copied.
  const { t: kc, ld: ldk, stride: strideK } = rowMatrices(kk, [...outer, ...headDims, S, E], cd);
  const { t: vc, ld: ldv, stride: strideV } = rowMatrices(vv, [...outer, ...headDims, S, Ev], cd);
  const out = Tensor.empty(outShape, cd, q.device, false);
  // The mask broadcast to the full score shape (..., Hq, L, S), read through its strides.
  const scoreShape = [...outShape.slice(0, -1), S];
  let maskRef: StridedRef | undefined, maskStrides: number[] = [];
  if (mask) {
    broadcastShapes(op, mask.shape, scoreShape);
    if (mask.ndim > scoreShape.length) throw new ShapeError(op, `attn_mask of shape ${fmtShape(mask.shape)} has more dims than the attention scores ${fmtShape(scoreShape)}`);
    maskStrides = broadcastStrides(mask.shape, mask.strides, scoreShape);
    maskRef = mask.ref();
  }
  const rowsPerGroup = rep * L;
  if (G > 0 && L > 0 && Ev > 0) {
    const gemm = kernel('gemm', q.device, op);
    const smax = kernel('softmax', q.device, op);
    // Causal attention runs in query blocks of CAUSAL_ROWS: a block needs only the keys up to its last
    // row, which skips the masked upper triangle (about half the work for a long prefill).
    const causal = !!a.is_causal;
    const wholeGroups = rowsPerGroup * S <= SCORE_BLOCK && !(causal && L > CAUSAL_ROWS);
    const blockRows = wholeGroups ? rowsPerGroup : Math.max(1, Math.min(L, causal ? CAUSAL_ROWS : L, Math.floor(SCORE_BLOCK / Math.max(S, 1))));
    const gChunk = wholeGroups ? Math.max(1, Math.min(G, Math.floor(SCORE_BLOCK / Math.max(rowsPerGroup * S, 1)))) : 1;
    const scores = Tensor.empty([gChunk * blockRows * S], cd, q.device, false);
    const sref = scores.ref();
    const hStride = maskStrides[scoreShape.length - 3] ?? 0, lStride = maskStrides[scoreShape.length - 2] ?? 0, sStride = maskStrides[scoreShape.length - 1] ?? 0;
    /** Mask offset of head-row (flat index over the score shape's leading dims) `hr`, query row l0. */
    const maskOffset = (hr: number, l0: number): number => {
      let off = maskRef!.offset + l0 * lStride;
      for (let d = scoreShape.length - 3; d >= 0; d--) { const sz = scoreShape[d]!; off += (hr % sz) * maskStrides[d]!; hr = Math.floor(hr / sz); }
      return off;
    };
    /** gc groups from g0; within each, heads [h0, h0+hc) of the group and query rows [l0, l0+lc). */
    const block = (g0: number, gc: number, h0: number, hc: number, l0: number, lc: number): void => {
      const rows = hc * lc, start = h0 * L + l0;
      const n = causal ? Math.min(S, l0 + lc) : S; // keys this block can see
      const ref = (t: Tensor, off: number): StridedRef => ({ ...t.ref(), offset: t.offset + off });
      gemm({ transA: false, transB: true, m: rows, n, k: E, alpha: scale, beta: 0,
        a: ref(qc, (g0 * rowsPerGroup + start) * E), lda: Math.max(E, 1), b: ref(kc, g0 * strideK), ldb: ldk, c: sref, ldc: Math.max(n, 1),
        batch: gc, strideA: rowsPerGroup * E, strideB: strideK, strideC: rows * n });
      const sm = (off: number, count: number, m?: StridedRef): void => {
        const view = { ...sref, shape: [count, lc, n], strides: [lc * n, n, 1], offset: sref.offset + off };
        smax({ x: view, out: view, dim: 2, log: false, mask: m, causal, causalOffset: l0, safe: true });
      };
      if (!maskRef) sm(0, gc * hc);
      else {
        for (let i = 0; i < gc; i++) {
          sm(i * rows * n, hc, { ...maskRef, shape: [hc, lc, n], strides: [hStride, lStride, sStride], offset: maskOffset((g0 + i) * rep + h0, l0) });
        }
      }
      gemm({ transA: false, transB: false, m: rows, n: Ev, k: n, alpha: 1, beta: 0,
        a: sref, lda: Math.max(n, 1), b: ref(vc, g0 * strideV), ldb: ldv, c: ref(out, (g0 * rowsPerGroup + start) * Ev), ldc: Ev,
        batch: gc, strideA: rows * n, strideB: strideV, strideC: rowsPerGroup * Ev });
    };
    if (wholeGroups) for (let g0 = 0; g0 < G; g0 += gChunk) block(g0, Math.min(gChunk, G - g0), 0, rep, 0, L);
    else {
      for (let g = 0; g < G; g++) for (let h = 0; h < rep; h++) for (let l0 = 0; l0 < L; l0 += blockRows) block(g, 1, h, 1, l0, Math.min(blockRows, L - l0));
    }
    scores.dispose();
  }
  for (const [c, t] of [[qc, q], [kc, kk], [vc, vv]] as const) release(c, t);
  if (kk !== k) kk.dispose();
  if (vv !== v) vv.dispose();
  if (cd === q.dt) return out;
  const r = out.copyAs(q.dt);
  out.dispose();
  return r;
});

// ---- exports -------------------------------------------------------------------------------------

/** nbx.nn.functional.X entries of this family. */
export const functional: Record<string, Fn> = {
  softmax: f_softmax, log_softmax: f_log_softmax, softmin, glu,
  layer_norm, rms_norm, group_norm, batch_norm, instance_norm, normalize, local_response_norm,
  cross_entropy, nll_loss, mse_loss, l1_loss, smooth_l1_loss, huber_loss, binary_cross_entropy,
  binary_cross_entropy_with_logits, kl_div, scaled_dot_product_attention,
};
/** Tensor methods of this family (tensor as first argument). */
export const methods: Record<string, Fn> = { softmax, log_softmax };

