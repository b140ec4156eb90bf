// Elementwise operations, each declared once: signature, dtype rule, and its math as an IR expression.
// Every backend runs the same expression (src/ir); nothing here is CPU-specific.

import { Expr } from '../ir/expr.js';
import { Tensor } from '../tensor/tensor.js';
import { backendFor, type Device, type StridedRef } from '../backend/backend.js';
import { DTYPES, isFloat, type DTypeName } from '../dtype/dtypes.js';
import { defaultFloatDType, promoteTypes, resultType, toFloatingDType, type Participant } from '../dtype/promotion.js';
import { encodeNumber, roundTo } from '../dtype/convert.js';
import { broadcastShapes } from '../tensor/shape.js';
import { DeviceError, DTypeError, ValueError } from '../errors.js';
import { def, isScalarLike, scalarOf, Scalar, type ScalarLike } from './registry.js';

export type Operand = Tensor | ScalarLike;

export function participant(x: Operand): Participant {
  if (x instanceof Tensor) return { kind: 'tensor', dtype: x.dt, ndim: x.ndim };
  if (!isScalarLike(x)) throw new ValueError('elementwise', `expected a Tensor or a scalar, got ${describe(x)}`);
  return { kind: 'scalar', scalarKind: scalarOf(x).kind };
}

export function describe(x: unknown): string {
  if (x instanceof Tensor) return `Tensor(${x.dt}, [${x.shape}])`;
  if (x === null) return 'None';
  if (Array.isArray(x)) return `list[${x.length}]`;
  return typeof x === 'object' ? (x as object).constructor?.name ?? 'object' : `${typeof x} ${String(x)}`;
}

export function resultTypeOf(...xs: Operand[]): DTypeName {
  // Fast path: tensors of one dtype (promotion is the identity then, whatever their ranks).
  const x0 = xs[0];
  if (x0 instanceof Tensor) {
    let same = true;
    for (let i = 1; i < xs.length; i++) { const x = xs[i]; if (!(x instanceof Tensor) || x.dt !== x0.dt) { same = false; break; } }
    if (same) return x0.dt;
  }
  return resultType(xs.map(participant));
}

export function deviceOf(op: string, xs: readonly unknown[]): Device {
  let dev: Device | undefined;
  for (const x of xs) {
    if (!(x instanceof Tensor)) continue;
    const d = x.device;
    if (dev === undefined) dev = d;
    else if (d !== dev) {
      // PyTorch allows zero-dim CPU tensors as scalars next to device tensors.
      if (d.type === 'cpu' && x.ndim === 0) continue;
      if (dev.type === 'cpu' && (xs.find((t) => t instanceof Tensor && t.device === dev) as Tensor).ndim === 0) { dev = d; continue; }
      throw new DeviceError(op, `Expected all tensors to be on the same device, but found at least two devices, ${dev} and ${d}!`);
    }
  }
  return dev ?? (undefined as unknown as Device);
}

/** The value of scalar `v` in the JS domain of dtype `d` (bigint for int64, rounded for half types). */
export function scalarValue(v: ScalarLike, d: DTypeName): number | bigint {
  const s = scalarOf(v);
  if (d === 'int64') {
    if (typeof s.value === 'bigint') return s.value;
    return encodeNumber('int64', typeof s.value === 'boolean' ? Number(s.value) : s.value) as bigint;
  }
  const n = typeof s.value === 'boolean' ? (s.value ? 1 : 0) : Number(s.value);
  return DTYPES[d].kind === 'float' ? roundTo(d, n) : roundTo(d, n);
}

export interface EwContext {
  /** A kernel parameter (not baked into the compiled code, so one kernel serves every value). */
  param(v: ScalarLike | number, dtype: DTypeName): Expr;
  const(v: number, dtype: DTypeName): Expr;
}

/**
 * Runs an elementwise computation: tensors are loaded and cast to `compute`, scalars become
 * parameters in `compute`, `build` gives the result, cast to `out`. Shapes broadcast.
 */
export function elementwise(op: string, operands: readonly Operand[], compute: DTypeName, out: DTypeName,
  build: (xs: Expr[], ctx: EwContext) => Expr): Tensor {
  const device = deviceOf(op, operands);
  if (device === undefined) throw new ValueError(op, 'needs at least one tensor operand');
  checkComputable(op, compute);
  if (out !== compute) checkComputable(op, out);
  // This is the hot path of every small op: plain loops, no per-call closures beyond `ctx`.
  const tensors: Tensor[] = [];
  const refs: StridedRef[] = [];
  const params: (number | bigint)[] = [];
  const ctx: EwContext = {
    param: (v, dtype) => { params.push(scalarValue(v, dtype)); return Expr.param(params.length - 1, dtype); },
    const: (v, dtype) => Expr.const(v, dtype),
  };
  const xs: Expr[] = [];
  for (let i = 0; i < operands.length; i++) {
    const x = operands[i]!;
    if (x instanceof Tensor) {
      if (DTYPES[x.dt].storageOnly) throw new DTypeError(op, `"${op}" is not implemented for '${x.dt}' (float8 types are storage only: convert with .to() first)`);
      xs.push(Expr.load(tensors.length, x.dt).cast(compute));
      tensors.push(x);
      refs.push(x.ref());
    } else xs.push(ctx.param(x, compute));
  }
  const shape = tensors.length === 1 ? tensors[0]!.shape : broadcastShapes(op, ...tensors.map((t) => t.shape));
  const expr = build(xs, ctx).cast(out);
  const result = Tensor.empty(shape, out, device, false); // every element is written
  if (result.numel() > 0) backendFor(device).elementwise(expr, refs, params, result.ref());
  return result;
}

function checkComputable(op: string, d: DTypeName): void {
  const info = DTYPES[d];
  if (info.storageOnly) throw new DTypeError(op, `"${op}" is not implemented for '${d}' (float8 types are storage only: convert with .to() first)`);
  if (info.kind === 'complex') throw new DTypeError(op, `"${op}" is not implemented for complex tensors yet`);
}

// ---- complex operands ------------------------------------------------------------------------------

/**
 * Complex arithmetic is defined with the complex family (ops/fft.ts), which registers a handler per
 * operation here; an elementwise op whose result type is complex goes to it, or is refused by name.
 */
export type ComplexHandler = (op: string, operands: Operand[], args: Record<string, unknown>) => Tensor;
const complexHandlers = new Map<string, ComplexHandler>();
export function registerComplexOp(name: string, handler: ComplexHandler): void { complexHandlers.set(name, handler); }
function complexOp(op: string, operands: Operand[], args: Record<string, unknown>): Tensor {
  const h = complexHandlers.get(op);
  if (!h) throw new DTypeError(op, `"${op}" is not implemented for complex tensors yet (complex tensors support add, sub, mul, div, neg, abs, angle, sum, conj, real/imag views)`);
  return h(op, operands, args);
}
const isComplexDT = (d: DTypeName): boolean => DTYPES[d].kind === 'complex';

// ---- dtype rules ---------------------------------------------------------------------------------

const floatOnly = (op: string, d: DTypeName): void => {
  if (!isFloat(d)) throw new DTypeError(op, `"${op}" not implemented for '${d}' (expects a floating point tensor)`);
};
const noBool = (op: string, d: DTypeName, msg?: string): void => {
  if (d === 'bool') throw new DTypeError(op, msg ?? `"${op}" not implemented for 'Bool'`);
};
const intOrBool = (op: string, d: DTypeName): void => {
  if (isFloat(d) || DTYPES[d].kind === 'complex') throw new DTypeError(op, `"${op}" only supports integer and bool tensors, got ${d}`);
};

function asTensor(op: string, x: unknown, name = 'input'): Tensor {
  if (!(x instanceof Tensor)) throw new ValueError(op, `${op}(): argument '${name}' must be Tensor, not ${describe(x)}`);
  return x;
}

// ---- unary ---------------------------------------------------------------------------------------

type UnaryBuild = (x: Expr, ctx: EwContext, a: Record<string, unknown>) => Expr;

/** Unary op computing in a float dtype: integer inputs give the default float dtype, as PyTorch. */
function unaryFloat(sig: string, build: UnaryBuild, opts: { floatInputOnly?: boolean } = {}) {
  const name = sig.slice(0, sig.indexOf('('));
  return def(sig, (a) => {
    const x = asTensor(name, a.input);
    if (isComplexDT(x.dt)) return complexOp(name, [x], a);
    if (opts.floatInputOnly) floatOnly(name, x.dt);
    const out = toFloatingDType(x.dt);
    return elementwise(name, [x], out, out, ([e], ctx) => build(e!, ctx, a));
  });
}

/** Unary op keeping the input dtype. */
function unarySame(sig: string, build: UnaryBuild, check?: (op: string, d: DTypeName) => void) {
  const name = sig.slice(0, sig.indexOf('('));
  return def(sig, (a) => {
    const x = asTensor(name, a.input);
    if (isComplexDT(x.dt)) return complexOp(name, [x], a);
    check?.(name, x.dt);
    return elementwise(name, [x], x.dt, x.dt, ([e], ctx) => build(e!, ctx, a));
  });
}

function unaryBool(sig: string, build: (x: Expr, d: DTypeName) => Expr) {
  const name = sig.slice(0, sig.indexOf('('));
  return def(sig, (a) => {
    const x = asTensor(name, a.input);
    return elementwise(name, [x], x.dt, 'bool', ([e]) => build(e!, x.dt));
  });
}

const c = (v: number, like: Expr): Expr => Expr.const(v, like.dtype);
const sigmoidE = (x: Expr): Expr => c(1, x).div(c(1, x).add(x.neg().exp()));
const softplusE = (x: Expr): Expr => x.exp().un('log1p');

export const exp = unaryFloat('exp(input)', (x) => x.exp());
export const exp2 = unaryFloat('exp2(input)', (x) => x.un('exp2'));
export const expm1 = unaryFloat('expm1(input)', (x) => x.un('expm1'));
export const log = unaryFloat('log(input)', (x) => x.log());
export const log2 = unaryFloat('log2(input)', (x) => x.un('log2'));
export const log10 = unaryFloat('log10(input)', (x) => x.log().div(c(Math.LN10, x)));
export const log1p = unaryFloat('log1p(input)', (x) => x.un('log1p'));
export const sqrt = unaryFloat('sqrt(input)', (x) => x.un('sqrt'));
export const rsqrt = unaryFloat('rsqrt(input)', (x) => x.un('rsqrt'));
export const sin = unaryFloat('sin(input)', (x) => x.un('sin'));
export const cos = unaryFloat('cos(input)', (x) => x.un('cos'));
export const tan = unaryFloat('tan(input)', (x) => x.un('tan'));
export const tanh = unaryFloat('tanh(input)', (x) => x.un('tanh'));
export const erf = unaryFloat('erf(input)', (x) => x.un('erf'));
export const sigmoid = unaryFloat('sigmoid(input)', sigmoidE);
export const reciprocal = unaryFloat('reciprocal(input)', (x) => x.un('recip'));

export const abs = unarySame('abs(input)', (x) => (x.dtype === 'bool' ? x : x.abs()));
export const neg = unarySame('neg(input)', (x) => x.neg(),
  (op, d) => noBool(op, d, 'Negation, the `-` operator, on a bool tensor is not supported. If you are trying to invert a mask, use the `~` or `logical_not()` operator instead.'));
export const negative = neg;
export const sign = unarySame('sign(input)', (x) => (x.dtype === 'bool' ? x : x.un('sign')));
export const floor = unarySame('floor(input)', (x) => x.un('floor'));
export const ceil = unarySame('ceil(input)', (x) => x.un('ceil'));
export const trunc = unarySame('trunc(input)', (x) => x.un('trunc'));
export const fix = trunc;
export const round = def('round(input, *, decimals=0)', (a) => {
  const x = asTensor('round', a.input);
  const decimals = a.decimals as number;
  return elementwise('round', [x], x.dt, x.dt, ([e], ctx) => {
    if (decimals === 0 || !isFloat(e!.dtype)) return e!.un('rint');
    // PyTorch: for decimals > 0, x * 10^d rounded then divided; for < 0, divided then multiplied.
    const ten = ctx.param(10 ** Math.abs(decimals), e!.dtype);
    return decimals > 0 ? e!.mul(ten).un('rint').div(ten) : e!.div(ten).un('rint').mul(ten);
  });
});
export const square = def('square(input)', (a) => {
  const x = asTensor('square', a.input);
  const d = x.dt === 'bool' ? 'int64' : x.dt;
  return elementwise('square', [x], d, d, ([e]) => e!.mul(e!));
});
export const bitwise_not = unarySame('bitwise_not(input)', (x) => x.un('bnot'), intOrBool);
export const logical_not = unaryBool('logical_not(input)', (x) => x.un('not'));
export const isnan = unaryBool('isnan(input)', (x) => x.un('isnan'));
export const isinf = unaryBool('isinf(input)', (x) => x.un('isinf'));
export const isfinite = unaryBool('isfinite(input)', (x) => (isFloat(x.dtype) ? x.sub(x).eq(c(0, x)) : Expr.const(1, 'bool')));
export const isposinf = unaryBool('isposinf(input)', (x) => (isFloat(x.dtype) ? x.eq(c(Infinity, x)) : Expr.const(0, 'bool')));
export const isneginf = unaryBool('isneginf(input)', (x) => (isFloat(x.dtype) ? x.eq(c(-Infinity, x)) : Expr.const(0, 'bool')));
export const nan_to_num = def('nan_to_num(input, nan=0.0, posinf=None, neginf=None)', (a) => {
  const x = asTensor('nan_to_num', a.input);
  if (!isFloat(x.dt)) return x.clone();
  const big = x.dt === 'float16' ? 65504 : x.dt === 'bfloat16' ? 3.3895313892515355e38 : x.dt === 'float32' ? 3.4028234663852886e38 : Number.MAX_VALUE;
  return elementwise('nan_to_num', [x], x.dt, x.dt, ([e], ctx) => {
    const nanV = ctx.param(a.nan as number ?? 0, x.dt);
    const pos = ctx.param(a.posinf === null ? big : (a.posinf as number), x.dt);
    const negV = ctx.param(a.neginf === null ? -big : (a.neginf as number), x.dt);
    return Expr.where(e!.un('isnan'), nanV, Expr.where(e!.eq(c(Infinity, e!)), pos, Expr.where(e!.eq(c(-Infinity, e!)), negV, e!)));
  });
});

// activations (nn.functional)
const actSig = (sig: string, build: UnaryBuild) => unaryFloat(sig, build, { floatInputOnly: true });
const relu = unarySame('nn.functional.relu(input, inplace=False)', (x) => (x.dtype === 'bool' ? x : Expr.where(x.gt(c(0, x)), x, Expr.where(x.un('isnan'), x, c(0, x)))),
  (op, d) => noBool(op, d));
export const nn_relu = relu;
export const relu6 = actSig('nn.functional.relu6(input, inplace=False)', (x) => x.max(c(0, x)).min(c(6, x)));
export const gelu = actSig("nn.functional.gelu(input, approximate='none')", (x, _ctx, a) => {
  const half = c(0.5, x), one = c(1, x);
  if (a.approximate === 'tanh') {
    const inner = c(Math.sqrt(2 / Math.PI), x).mul(x.add(c(0.044715, x).mul(x).mul(x).mul(x)));
    return half.mul(x).mul(one.add(inner.un('tanh')));
  }
  if (a.approximate !== 'none') throw new ValueError('nn.functional.gelu', `approximate argument must be either none or tanh, got '${String(a.approximate)}'`);
  return half.mul(x).mul(one.add(x.mul(c(Math.SQRT1_2, x)).un('erf')));
});
export const silu = actSig('nn.functional.silu(input, inplace=False)', (x) => x.div(c(1, x).add(x.neg().exp())));
export const mish = actSig('nn.functional.mish(input, inplace=False)', (x) => x.mul(softplusE(x).un('tanh')));
export const elu = actSig('nn.functional.elu(input, alpha=1.0, inplace=False)', (x, ctx, a) =>
  Expr.where(x.gt(c(0, x)), x, ctx.param(a.alpha as number, x.dtype).mul(x.un('expm1'))));
export const celu = actSig('nn.functional.celu(input, alpha=1.0, inplace=False)', (x, ctx, a) => {
  const al = ctx.param(a.alpha as number, x.dtype);
  return Expr.where(x.gt(c(0, x)), x, al.mul(x.div(al).un('expm1')));
});
const SELU_ALPHA = 1.6732632423543772848170429916717, SELU_SCALE = 1.0507009873554804934193349852946;
export const selu = actSig('nn.functional.selu(input, inplace=False)', (x) =>
  c(SELU_SCALE, x).mul(Expr.where(x.gt(c(0, x)), x, c(SELU_ALPHA, x).mul(x.un('expm1')))));
export const softplus = actSig('nn.functional.softplus(input, beta=1.0, threshold=20.0)', (x, ctx, a) => {
  const beta = ctx.param(a.beta as number, x.dtype), th = ctx.param(a.threshold as number, x.dtype);
  const xb = x.mul(beta);
  return Expr.where(xb.gt(th), x, xb.exp().un('log1p').div(beta));
});
export const hardswish = actSig('nn.functional.hardswish(input, inplace=False)', (x) =>
  x.mul(x.add(c(3, x)).max(c(0, x)).min(c(6, x))).div(c(6, x)));
export const hardsigmoid = actSig('nn.functional.hardsigmoid(input, inplace=False)', (x) =>
  x.add(c(3, x)).max(c(0, x)).min(c(6, x)).div(c(6, x)));
export const leaky_relu = actSig('nn.functional.leaky_relu(input, negative_slope=0.01, inplace=False)', (x, ctx, a) =>
  Expr.where(x.gt(c(0, x)), x, x.mul(ctx.param(a.negative_slope as number, x.dtype))));
export const logsigmoid = actSig('nn.functional.logsigmoid(input)', (x) =>
  x.min(c(0, x)).sub(x.abs().neg().exp().un('log1p')));
export const hardtanh = unarySame('nn.functional.hardtanh(input, min_val=-1.0, max_val=1.0, inplace=False)', (x, ctx, a) =>
  x.max(ctx.param(a.min_val as number, x.dtype)).min(ctx.param(a.max_val as number, x.dtype)), (op, d) => noBool(op, d));
export const threshold = unarySame('nn.functional.threshold(input, threshold, value, inplace=False)', (x, ctx, a) =>
  Expr.where(x.gt(ctx.param(a.threshold as number, x.dtype)), x, ctx.param(a.value as number, x.dtype)), (op, d) => noBool(op, d));
export const tanhshrink = actSig('nn.functional.tanhshrink(input)', (x) => x.sub(x.un('tanh')));
export const softsign = actSig('nn.functional.softsign(input)', (x) => x.div(c(1, x).add(x.abs())));

// ---- binary --------------------------------------------------------------------------------------

type BinaryBuild = (x: Expr, y: Expr, ctx: EwContext, a: Record<string, unknown>) => Expr;

function checkOperands(op: string, a: unknown, b: unknown): void {
  if (!(a instanceof Tensor) && !(b instanceof Tensor)) {
    throw new ValueError(op, `${op}() expects at least one Tensor argument, got ${describe(a)} and ${describe(b)}`);
  }
  for (const x of [a, b]) if (!(x instanceof Tensor) && !isScalarLike(x)) throw new ValueError(op, `${op}(): expected a Tensor or a number, got ${describe(x)}`);
}

/** Binary op in the promoted dtype (result = compute unless `outBool`). */
function binary(sig: string, build: BinaryBuild, opts: {
  compute?: (d: DTypeName, op: string) => DTypeName; out?: 'same' | 'bool'; check?: (op: string, d: DTypeName, x: Operand, y: Operand) => void;
  other?: string;
} = {}) {
  const name = sig.slice(0, sig.indexOf('('));
  const otherName = opts.other ?? 'other';
  return def(sig, (a) => {
    const x = a.input as Operand, y = a[otherName] as Operand;
    checkOperands(name, x, y);
    const common = resultTypeOf(x, y);
    if (isComplexDT(common)) return complexOp(name, [x, y], a);
    const compute = opts.compute ? opts.compute(common, name) : common;
    opts.check?.(name, compute, x, y);
    const out = opts.out === 'bool' ? 'bool' : compute;
    return elementwise(name, [x, y], compute, out, ([ex, ey], ctx) => build(ex!, ey!, ctx, a));
  });
}

const floatCompute = (d: DTypeName): DTypeName => toFloatingDType(d);
const checkAlpha = (op: string, d: DTypeName, alpha: unknown): void => {
  const s = scalarOf(alpha as ScalarLike);
  if (DTYPES[d].kind === 'int' && s.kind === 'float') throw new DTypeError(op, 'For integral input tensors, argument alpha must not be a floating point number.');
  if (d === 'bool' && s.kind !== 'bool' && Number(s.value) !== 1) throw new DTypeError(op, 'Boolean alpha only supported for Boolean results.');
};
const withAlpha = (y: Expr, ctx: EwContext, alpha: unknown): Expr => {
  if (alpha === 1 || (alpha instanceof Scalar && Number(alpha.value) === 1)) return y;
  // For half types PyTorch's CPU kernel rounds alpha·other to the half type before adding (checked
  // against torch 1.13 and 2.11: add(250, -100.1, alpha=2.5) in float16 gives -0.25, not -0.3125).
  const scaled = y.mul(ctx.param(alpha as ScalarLike, y.dtype));
  return y.dtype === 'float16' || y.dtype === 'bfloat16' ? scaled.cast('float32').cast(y.dtype) : scaled;
};

export const add = binary('add(input, other, *, alpha=1)', (x, y, ctx, a) => (x.dtype === 'bool' ? x.bin('or', withAlpha(y, ctx, a.alpha)) : x.add(withAlpha(y, ctx, a.alpha))),
  { check: (op, d, _x, _y) => void op });
export const sub = binary('sub(input, other, *, alpha=1)', (x, y, ctx, a) => x.sub(withAlpha(y, ctx, a.alpha)), {
  check: (op, d) => noBool(op, d, 'Subtraction, the `-` operator, with two bool tensors is not supported. Use the `^` or `logical_xor()` operator instead.'),
});
export const subtract = sub;
export const mul = binary('mul(input, other)', (x, y) => (x.dtype === 'bool' ? x.bin('and', y) : x.mul(y)));
export const multiply = mul;
export const div = def('div(input, other, *, rounding_mode=None)', (a) => {
  const x = a.input as Operand, y = a.other as Operand;
  checkOperands('div', x, y);
  const common = resultTypeOf(x, y);
  const mode = a.rounding_mode as string | null;
  if (isComplexDT(common)) {
    if (mode !== null) throw new DTypeError('div', `div with rounding_mode='${mode}' is not supported for complex inputs`);
    return complexOp('div', [x, y], a);
  }
  if (mode === null) return elementwise('div', [x, y], floatCompute(common), floatCompute(common), ([ex, ey]) => ex!.div(ey!));
  if (mode !== 'trunc' && mode !== 'floor') throw new ValueError('div', `div expected rounding_mode to be one of None, 'trunc', or 'floor' but found '${mode}'`);
  const d = common === 'bool' ? 'int64' : common;
  return elementwise('div', [x, y], d, d, ([ex, ey]) => ex!.bin(mode === 'trunc' ? 'truncdiv' : 'floordiv', ey!));
});
export const true_divide = (input: Operand, other: Operand): Tensor => div(input, other);
export const divide = div;
export const floor_divide = binary('floor_divide(input, other)', (x, y) => x.bin('floordiv', y), { compute: (d) => (d === 'bool' ? 'int64' : d) });
export const remainder = binary('remainder(input, other)', (x, y) => x.bin('mod', y), { compute: (d) => (d === 'bool' ? 'int64' : d) });
export const fmod = binary('fmod(input, other)', (x, y) => x.bin('fmod', y), { compute: (d) => (d === 'bool' ? 'int64' : d) });
export const pow = binary('pow(input, exponent)', (x, y) => (x.dtype === 'bool' ? x.bin('or', y.un('not')) : x.bin('pow', y)), {
  other: 'exponent',
  check: (op, d, x, y) => {
    if (DTYPES[d].kind === 'int' && x instanceof Tensor && isScalarLike(y) && scalarOf(y).kind === 'int' && Number(scalarOf(y).value) < 0) {
      throw new ValueError(op, 'Integers to negative integer powers are not allowed.');
    }
  },
});
export const float_power = def('float_power(input, exponent)', (a) =>
  elementwise('float_power', [a.input, a.exponent], 'float64', 'float64', ([x, y]) => x!.bin('pow', y!)));
export const atan2 = binary('atan2(input, other)', (x, y) => x.bin('atan2', y), { compute: floatCompute });
export const arctan2 = atan2;
export const hypot = binary('hypot(input, other)', (x, y) => x.bin('hypot', y), { check: (op, d) => floatOnly(op, d) });
export const copysign = binary('copysign(input, other)', (x, y) => x.bin('copysign', y), { compute: floatCompute });
export const xlogy = binary('xlogy(input, other)', (x, y) =>
  Expr.where(y.un('isnan'), y, Expr.where(x.eq(c(0, x)), c(0, x), x.mul(y.log()))), { compute: floatCompute });
export const maximum = binary('maximum(input, other)', (x, y) => x.max(y));
export const minimum = binary('minimum(input, other)', (x, y) => x.min(y));
export const fmax = binary('fmax(input, other)', (x, y) => Expr.where(x.un('isnan'), y, Expr.where(y.un('isnan'), x, x.max(y))));
export const fmin = binary('fmin(input, other)', (x, y) => Expr.where(x.un('isnan'), y, Expr.where(y.un('isnan'), x, x.min(y))));

const cmp = (prim: 'eq' | 'ne' | 'lt' | 'le' | 'gt' | 'ge') => binary(`${prim}(input, other)`, (x, y) => x.bin(prim, y), { out: 'bool' });
export const eq = cmp('eq'), ne = cmp('ne'), lt = cmp('lt'), le = cmp('le'), gt = cmp('gt'), ge = cmp('ge');
export const greater = gt, greater_equal = ge, less = lt, less_equal = le, not_equal = ne;

const logical = (name: string, prim: 'and' | 'or' | 'xor') => def(`${name}(input, other)`, (a) => {
  checkOperands(name, a.input, a.other);
  const x = a.input as Tensor, y = a.other as Tensor;
  return elementwise(name, [x, y], 'bool', 'bool', ([ex, ey]) => ex!.bin(prim, ey!));
});
export const logical_and = logical('logical_and', 'and'), logical_or = logical('logical_or', 'or'), logical_xor = logical('logical_xor', 'xor');

const bitwise = (name: string, prim: 'and' | 'or' | 'xor' | 'shl' | 'shr') =>
  binary(`${name}(input, other)`, (x, y) => x.bin(prim, y), { check: (op, d) => intOrBool(op, d) });
export const bitwise_and = bitwise('bitwise_and', 'and'), bitwise_or = bitwise('bitwise_or', 'or'), bitwise_xor = bitwise('bitwise_xor', 'xor');
export const bitwise_left_shift = bitwise('bitwise_left_shift', 'shl'), bitwise_right_shift = bitwise('bitwise_right_shift', 'shr');

// ---- ternary -------------------------------------------------------------------------------------

export const where = def('where(condition, input=None, other=None)', (a) => {
  const cond = asTensor('where', a.condition, 'condition');
  if (a.input === null && a.other === null) return nonzeroTuple(cond);
  if (cond.dt !== 'bool') throw new DTypeError('where', `where expected condition to be a boolean tensor, but got a tensor with dtype ${cond.dt}`);
  const x = a.input as Operand, y = a.other as Operand;
  const d = resultTypeOf(x, y);
  return elementwise('where', [cond, x, y], d, d, ([cc, ex, ey]) => Expr.where(cc!.cast('bool'), ex!, ey!));
});
let nonzeroTuple: (t: Tensor) => Tensor[] = () => { throw new ValueError('where', 'where(condition) needs nonzero, not loaded'); };
export function setNonzeroTuple(f: (t: Tensor) => Tensor[]): void { nonzeroTuple = f; }

export const addcmul = def('addcmul(input, tensor1, tensor2, *, value=1)', (a) => {
  const d = resultTypeOf(a.input, a.tensor1, a.tensor2);
  if (DTYPES[d].kind === 'int' && scalarOf(a.value).kind === 'float') throw new DTypeError('addcmul', 'For integral input tensors, argument value must not be a floating point number.');
  return elementwise('addcmul', [a.input, a.tensor1, a.tensor2], d, d, ([x, t1, t2], ctx) => x!.add(ctx.param(a.value, d).mul(t1!).mul(t2!)));
});
export const addcdiv = def('addcdiv(input, tensor1, tensor2, *, value=1)', (a) => {
  const d = resultTypeOf(a.input, a.tensor1, a.tensor2);
  if (!isFloat(d)) throw new DTypeError('addcdiv', 'Integer division with addcdiv is no longer supported, and in a future release addcdiv will perform a true division of tensor1 and tensor2.');
  return elementwise('addcdiv', [a.input, a.tensor1, a.tensor2], d, d, ([x, t1, t2], ctx) => x!.add(ctx.param(a.value, d).mul(t1!.div(t2!))));
});
export const lerp = def('lerp(input, end, weight)', (a) => {
  const x = asTensor('lerp', a.input), e = asTensor('lerp', a.end, 'end');
  floatOnly('lerp', x.dt);
  if (x.dt !== e.dt) throw new DTypeError('lerp', `expected dtype ${x.dt} for \`end\` but got dtype ${e.dt}`);
  const d = x.dt;
  return elementwise('lerp', [x, e, a.weight as Operand], d, d, ([s, en, w]) => {
    const diff = en!.sub(s!);
    return Expr.where(w!.abs().lt(c(0.5, w!)), s!.add(w!.mul(diff)), en!.sub(diff.mul(c(1, w!).sub(w!))));
  });
});
export const masked_fill = def('masked_fill(input, mask, value)', (a) => {
  const x = asTensor('masked_fill', a.input), m = asTensor('masked_fill', a.mask, 'mask');
  if (m.dt !== 'bool') throw new DTypeError('masked_fill', `masked_fill_ only supports boolean masks, but got mask with dtype ${m.dt}`);
  let v = a.value as Operand;
  if (v instanceof Tensor) {
    if (v.ndim !== 0) throw new ValueError('masked_fill', `masked_fill_ only supports a 0-dimensional value tensor, but got tensor with ${v.ndim} dimension(s).`);
    v = v.item() as ScalarLike;
  }
  const shape = broadcastShapes('masked_fill', x.shape, m.shape);
  if (shape.length !== x.ndim || shape.some((s, i) => s !== x.shape[i])) throw new ValueError('masked_fill', `mask of shape [${m.shape}] cannot broadcast to input of shape [${x.shape}]`);
  return elementwise('masked_fill', [x, m], x.dt, x.dt, ([ex, em], ctx) => Expr.where(em!, ctx.param(v as ScalarLike, x.dt), ex!));
});

function clampImpl(op: string, x: Tensor, lo: Operand | null, hi: Operand | null): Tensor {
  if (lo === null && hi === null) throw new ValueError(op, "torch.clamp: At least one of 'min' or 'max' must not be None");
  const parts = [x, lo, hi].filter((v) => v !== null) as Operand[];
  const d = resultTypeOf(...parts);
  noBool(op, d);
  return elementwise(op, parts, d, d, (xs) => {
    let r = xs[0]!;
    let k = 1;
    // max(x, lo) then min(., hi): if lo > hi the result is hi, as PyTorch documents. NaN propagates.
    if (lo !== null) { const l = xs[k++]!; r = Expr.where(r.un('isnan'), r, Expr.where(l.un('isnan'), l, Expr.where(r.lt(l), l, r))); }
    if (hi !== null) { const h = xs[k++]!; r = Expr.where(r.un('isnan'), r, Expr.where(h.un('isnan'), h, Expr.where(r.gt(h), h, r))); }
    return r;
  });
}
export const clamp = def('clamp(input, min=None, max=None)', (a) => clampImpl('clamp', asTensor('clamp', a.input), a.min as Operand | null, a.max as Operand | null));
export const clip = clamp;
export const clamp_min = def('clamp_min(input, min)', (a) => clampImpl('clamp_min', asTensor('clamp_min', a.input), a.min as Operand, null));
export const clamp_max = def('clamp_max(input, max)', (a) => clampImpl('clamp_max', asTensor('clamp_max', a.input), null, a.max as Operand));

export { defaultFloatDType, promoteTypes };
