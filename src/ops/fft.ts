// Operation family: FFT (the nbx.fft namespace) and complex tensors (view_as_real, view_as_complex, real,
// imag, complex, polar, conj).
//
// Complex tensors store interleaved (re, im) pairs; view_as_real/real/imag are views of the same buffer
// with a float dtype (an aliasing Storage keeps the owner alive). Every transform is a chain of 1-d
// transforms, each along one dim: c2c (complex to complex), r2c (real in, onesided out) and
// c2r (onesided Hermitian in, real out), with the exponent's sign and the norm's scale as parameters.

import { Tensor } from '../tensor/tensor.js';
import { Storage } from '../tensor/storage.js';
import { DTYPES, allocStorage, dtypeName, type DTypeLike, type DTypeName } from '../dtype/dtypes.js';
import { writeNumber } from '../dtype/convert.js';
import { defaultFloatDType } from '../dtype/promotion.js';
import { DTypeError, IndexError, ShapeError, ValueError } from '../errors.js';
import { broadcastShapes, normDim, numelOf } from '../tensor/shape.js';
import { Device, backendFor, type DeviceLike } from '../backend/backend.js';
import { hasKernel, kernel } from '../kernels/registry.js';
import { Expr } from '../ir/expr.js';
import { def, isScalarLike, scalarNumber, scalarOf } from './registry.js';
import { describe, mul, cos as cosOp, sin as sinOp, hypot, atan2, registerComplexOp, resultTypeOf, type Operand } from './elementwise.js';
import { isScalarLike as isScalar } from './registry.js';
import type { FftKind } from '../kernels/fft.js';

// eslint-disable-next-line @typescript-eslint/no-explicit-any
type Fn = (...args: any[]) => any;

const CNAME: Partial<Record<DTypeName, string>> = {
  float16: 'Half', bfloat16: 'BFloat16', complex64: 'ComplexFloat', complex128: 'ComplexDouble',
  float8_e4m3fn: 'Float8_e4m3fn', float8_e5m2: 'Float8_e5m2',
};
const complexOf = (real: DTypeName): DTypeName => (real === 'float64' ? 'complex128' : 'complex64');
const realOf = (c: DTypeName): DTypeName => (c === 'complex128' ? 'float64' : c === 'complex64' ? 'float32' : c);
const isC = (t: Tensor): boolean => DTYPES[t.dt].kind === 'complex';

function asTensor(op: string, x: unknown, name = 'input'): Tensor {
  if (!(x instanceof Tensor)) throw new ValueError(op, `${op}(): argument '${name}' must be Tensor, not ${describe(x)}`);
  return x;
}
function intArg(op: string, v: unknown, name: string): number {
  if (isScalarLike(v) && scalarOf(v).kind !== 'float' && Number.isInteger(scalarNumber(v))) return scalarNumber(v);
  throw new ValueError(op, `${op}(): argument '${name}' must be int, not ${describe(v)}`);
}
function intList(op: string, v: unknown, name: string): number[] {
  if (Array.isArray(v)) return v.map((x) => intArg(op, x, name));
  return [intArg(op, v, name)];
}

// ---- complex views ------------------------------------------------------------------------------

/** A storage that reinterprets another one's buffer as a different dtype; holds the owner while it lives. */
class AliasStorage extends Storage {
  private uses = 0;
  constructor(readonly owner: Storage, dtype: DTypeName, numel: number) {
    super(owner.device, dtype, numel, owner.buf);
    owner.retain();
  }
  override retain(): this { this.uses++; return this; }
  override release(): void {
    if (--this.uses === 0 && this.buf !== null) { this.buf = null; this.owner.release(); }
  }
}

/** A view of t's buffer as `dtype` (float <-> complex of the same width). */
function aliasAs(t: Tensor, dtype: DTypeName, shape: readonly number[], strides: readonly number[], offset: number): Tensor {
  const s = t.storage;
  const target = s instanceof AliasStorage && s.owner.dtype === dtype && s.owner.alive ? s.owner
    : new AliasStorage(s, dtype, Math.floor((s.numel * DTYPES[s.dtype].lanes) / DTYPES[dtype].lanes));
  return new Tensor(target, shape, strides, offset);
}

/** The float [..., 2] view of a complex tensor (no checks). */
function realView(t: Tensor): Tensor {
  return aliasAs(t, realOf(t.dt), [...t.shape, 2], [...t.strides.map((s) => s * 2), 1], t.offset * 2);
}

export const view_as_real = def('view_as_real(input)', (a) => {
  const t = asTensor('view_as_real', a.input);
  if (!isC(t)) throw new DTypeError('view_as_real', `view_as_real is only supported for complex tensors (got ${t.dt})`);
  return realView(t);
});

export const view_as_complex = def('view_as_complex(input)', (a) => {
  const op = 'view_as_complex';
  const t = asTensor(op, a.input);
  if (t.dt !== 'float32' && t.dt !== 'float64') {
    throw new DTypeError(op, `view_as_complex is only supported for float and double tensors, but got a tensor of scalar type: ${CNAME[t.dt] ?? t.dt}`);
  }
  if (t.ndim === 0) throw new ShapeError(op, 'Input tensor must have one or more dimensions');
  if (t.shape[t.ndim - 1] !== 2) throw new ShapeError(op, 'Tensor must have a last dimension of size 2');
  if (t.strides[t.ndim - 1] !== 1) throw new ShapeError(op, 'Tensor must have a last dimension with stride 1');
  if (t.strides.slice(0, -1).some((s) => s % 2 !== 0)) throw new ShapeError(op, 'Tensor must have a stride divisible by 2 for all but last dimension');
  if (t.offset % 2 !== 0) throw new ShapeError(op, 'Tensor must have a storage_offset divisible by 2');
  return aliasAs(t, complexOf(t.dt), t.shape.slice(0, -1), t.strides.slice(0, -1).map((s) => s / 2), t.offset / 2);
});

export const real = def('real(input)', (a) => {
  const t = asTensor('real', a.input);
  return isC(t) ? aliasAs(t, realOf(t.dt), t.shape, t.strides.map((s) => s * 2), t.offset * 2) : t;
});

export const imag = def('imag(input)', (a) => {
  const t = asTensor('imag', a.input);
  if (!isC(t)) throw new DTypeError('imag', 'imag is not implemented for tensors with non-complex dtypes.');
  return aliasAs(t, realOf(t.dt), t.shape, t.strides.map((s) => s * 2), t.offset * 2 + 1);
});

// t.real / t.imag are properties in PyTorch (views, like the functions).
for (const [name, fn] of [['real', real], ['imag', imag]] as const) {
  if (!Object.getOwnPropertyDescriptor(Tensor.prototype, name)) {
    Object.defineProperty(Tensor.prototype, name, { get(this: Tensor) { return fn(this); }, configurable: true });
  }
}

/** Builds a complex tensor from per-lane expressions: lane 0 (real) and lane 1 (imaginary) of `shape`. */
function interleave(shape: readonly number[], dt: DTypeName, device: Device, ins: Tensor[], lanes: (xs: Expr[]) => [Expr, Expr]): Tensor {
  const out = Tensor.empty(shape, complexOf(dt), device);
  if (out.numel() === 0) return out;
  const laneMask = Tensor.fromStorage(new Uint8Array([1, 0]), 'bool', [2], device);
  try {
    const view = realView(out);
    const xs = ins.map((t, i) => Expr.load(i + 1, t.dt));
    const [re, im] = lanes(xs);
    backendFor(device).elementwise(Expr.where(Expr.load(0, 'bool'), re, im), [laneMask.ref(), ...ins.map((t) => t.ref())], [], view.ref());
    view.dispose();
    return out;
  } finally { laneMask.dispose(); }
}

export const complex = def('complex(real, imag)', (a) => {
  const op = 'complex';
  const re = asTensor(op, a.real, 'real'), im = asTensor(op, a.imag, 'imag');
  const okDt = (d: DTypeName): boolean => d === 'float32' || d === 'float64';
  if (!okDt(re.dt) || !okDt(im.dt)) {
    const floats = ['float16', 'float32', 'float64'];
    if (floats.includes(re.dt) && floats.includes(im.dt) && re.dt === im.dt) throw new DTypeError(op, 'complex32 (ComplexHalf) tensors are not supported');
    throw new DTypeError(op, `Expected both inputs to be Float or Double tensors but got ${re.dt} and ${im.dt}`);
  }
  if (re.dt !== im.dt) throw new DTypeError(op, `Expected object of scalar type ${re.dt} but got scalar type ${im.dt} for second argument`);
  if (re.device !== im.device) throw new ValueError(op, `Expected all tensors to be on the same device, but found ${re.device} and ${im.device}`);
  const shape = broadcastShapes(op, re.shape, im.shape);
  const r1 = re.unsqueeze(-1), i1 = im.unsqueeze(-1);
  try {
    return interleave(shape, re.dt, re.device, [r1, i1], ([x, y]) => [x!, y!]);
  } finally { r1.dispose(); i1.dispose(); }
});

export const polar = def('polar(abs, angle)', (a) => {
  const ab = asTensor('polar', a.abs, 'abs'), an = asTensor('polar', a.angle, 'angle');
  const c = cosOp(an), s = sinOp(an);
  const re = mul(ab, c), im = mul(ab, s);
  c.dispose(); s.dispose();
  try { return complex(re, im); } finally { re.dispose(); im.dispose(); }
});

/** Complex conjugate, materialized (PyTorch's conj is a lazy view; values are the same). Real input: itself. */
export const conj_physical = def('conj_physical(input)', (a) => {
  const t = asTensor('conj_physical', a.input);
  if (!isC(t)) return t;
  const v = realView(t);
  try {
    const out = Tensor.empty(t.shape, t.dt, t.device);
    const ov = realView(out);
    const laneMask = Tensor.fromStorage(new Uint8Array([1, 0]), 'bool', [2], t.device);
    const x = Expr.load(1, v.dt);
    if (out.numel() > 0) backendFor(t.device).elementwise(Expr.where(Expr.load(0, 'bool'), x, x.un('neg')), [laneMask.ref(), v.ref()], [], ov.ref());
    laneMask.dispose(); ov.dispose();
    return out;
  } finally { v.dispose(); }
});
export const conj = (input: Tensor): Tensor => conj_physical(input);

// ---- complex arithmetic ---------------------------------------------------------------------------
// add/sub/mul/div/neg run as one kernel over the float pair view of the output: a [2] lane mask picks
// the real-part or imaginary-part formula, and each complex operand is read as two broadcast views
// (its real and imaginary lanes). abs and angle compose hypot/atan2 on the real/imag views.

/** The real and imaginary lanes of complex `t` as [..., 1] float views (broadcast against [..., 2]). */
function lanes(t: Tensor): [Tensor, Tensor] {
  const rv = realView(t);
  try { return [rv.narrow(-1, 0, 1), rv.narrow(-1, 1, 1)]; } finally { rv.dispose(); }
}

type LaneExprs = { re: Expr; im: Expr };
function complexKernel(op: string, operands: Operand[], cdt: DTypeName,
  formula: (xs: LaneExprs[], param: (v: number) => Expr) => [Expr, Expr]): Tensor {
  const rd = realOf(cdt);
  const tensors = operands.filter((x): x is Tensor => x instanceof Tensor);
  const device = tensors[0]!.device;
  if (tensors.some((t) => t.device !== device)) throw new ValueError(op, `Expected all tensors to be on the same device, but found ${tensors.map((t) => t.device).join(' and ')}`);
  const shape = broadcastShapes(op, ...tensors.map((t) => t.shape));
  const out = Tensor.empty(shape, cdt, device, false);
  if (out.numel() === 0) return out;
  const owned: Tensor[] = [];
  const refs = [Tensor.fromStorage(new Uint8Array([1, 0]), 'bool', [2], device)];
  owned.push(refs[0]!);
  const params: number[] = [];
  const param = (v: number): Expr => { params.push(v); return Expr.param(params.length - 1, rd); };
  try {
    const xs: LaneExprs[] = operands.map((x) => {
      if (!(x instanceof Tensor)) {
        const v = scalarNumber(x as never);
        return { re: param(v), im: Expr.const(0, rd) };
      }
      const c = x.dt === cdt ? x : x.copyAs(cdt);
      if (c !== x) owned.push(c);
      const [re, im] = lanes(c);
      owned.push(re, im);
      refs.push(re, im);
      return { re: Expr.load(refs.length - 2, rd), im: Expr.load(refs.length - 1, rd) };
    });
    const [re, im] = formula(xs, param);
    const ov = realView(out);
    owned.push(ov);
    backendFor(device).elementwise(Expr.where(Expr.load(0, 'bool'), re, im), refs.map((t) => t.ref()), params, ov.ref());
    return out;
  } finally { for (const t of owned) t.dispose(); }
}

const alphaOf = (op: string, a: Record<string, unknown>): number => {
  const al = a.alpha ?? 1;
  if (!isScalar(al)) throw new ValueError(op, `${op}(): argument 'alpha' must be Number, not ${describe(al)}`);
  return scalarNumber(al);
};

function complexBinary(op: string, operands: Operand[], a: Record<string, unknown>): Tensor {
  const cdt = resultTypeOf(...operands);
  const alpha = op === 'add' || op === 'sub' ? alphaOf(op, a) : 1;
  return complexKernel(op, operands, cdt, ([x, y], param) => {
    const yr = alpha === 1 ? y!.re : y!.re.mul(param(alpha)), yi = alpha === 1 ? y!.im : y!.im.mul(param(alpha));
    const { re: xr, im: xi } = x!;
    switch (op) {
      case 'add': return [xr.add(yr), xi.add(yi)];
      case 'sub': return [xr.sub(yr), xi.sub(yi)];
      case 'mul': return [xr.mul(yr).sub(xi.mul(yi)), xr.mul(yi).add(xi.mul(yr))];
      default: {
        // div as c10::complex does it (Smith's scaling, numpy's order): no overflow of c² + d².
        const c = yr, d = yi;
        const big = c.abs().ge(d.abs());
        const r1 = d.div(c), s1 = c.add(d.mul(r1)).un('recip');
        const r2 = c.div(d), s2 = d.add(c.mul(r2)).un('recip');
        const zero = c.abs().eq(0).bin('and', d.abs().eq(0));
        const re = Expr.where(big, Expr.where(zero, xr.div(c.abs()), xr.add(xi.mul(r1)).mul(s1)), xr.mul(r2).add(xi).mul(s2));
        const im = Expr.where(big, Expr.where(zero, xi.div(d.abs()), xi.sub(xr.mul(r1)).mul(s1)), xi.mul(r2).sub(xr).mul(s2));
        return [re, im];
      }
    }
  });
}
for (const op of ['add', 'sub', 'mul', 'div']) registerComplexOp(op, complexBinary);
registerComplexOp('neg', (op, [x]) => complexKernel(op, [x!], (x as Tensor).dt, ([v]) => [v!.re.neg(), v!.im.neg()]));
registerComplexOp('abs', (_op, [x]) => {
  const re = real(x), im = imag(x);
  try { return hypot(re, im); } finally { re.dispose(); im.dispose(); }
});

/** torch.angle: atan2(imag, real) for complex input; for real input π where negative, 0 elsewhere, NaN kept. */
export const angle = def('angle(input)', (a) => {
  const t = asTensor('angle', a.input);
  if (isC(t)) {
    const re = real(t), im = imag(t);
    try { return atan2(im, re); } finally { re.dispose(); im.dispose(); }
  }
  if (t.dt === 'bool') throw new DTypeError('angle', '"angle_cpu" not implemented for \'Bool\'');
  const fd = DTYPES[t.dt].kind === 'float' ? t.dt : defaultFloatDType;
  const out = Tensor.empty(t.shape, fd, t.device, false);
  if (out.numel() > 0) {
    const x = Expr.load(0, t.dt).cast(fd);
    backendFor(t.device).elementwise(Expr.where(x.un('isnan'), x, Expr.where(x.lt(0), Expr.const(Math.PI, fd), Expr.const(0, fd))), [t.ref()], [], out.ref());
  }
  return out;
});

// ---- 1-d transforms -------------------------------------------------------------------------------

/** The input as a tensor the kernel reads: float32/float64 or complex; integers promote to the default float. */
function fftInput(op: string, x: unknown, requireReal: boolean): Tensor {
  const t = asTensor(op, x);
  const info = DTYPES[t.dt];
  if (info.storageOnly || t.dt === 'float16' || t.dt === 'bfloat16') throw new DTypeError(op, `Unsupported dtype ${CNAME[t.dt]}`);
  if (info.kind === 'complex') {
    if (requireReal) throw new DTypeError(op, `${op} expects a real input tensor, but got ${CNAME[t.dt]}`);
    return t;
  }
  return info.kind === 'float' ? t : t.copyAs(defaultFloatDType);
}

const NORMS = ['backward', 'forward', 'ortho'];
/** The factor a transform of `n` points applies: norm 'backward' scales the inverse, 'forward' the forward. */
function normScale(op: string, norm: unknown, n: number, forward: boolean): number {
  const mode = norm === null || norm === undefined ? 'backward' : norm;
  if (typeof mode !== 'string' || !NORMS.includes(mode)) throw new ValueError(op, `Invalid normalization mode: "${String(mode)}"`);
  if (mode === 'ortho') return 1 / Math.sqrt(n);
  return (mode === 'forward') === forward ? 1 / n : 1;
}
const checkPoints = (op: string, n: number): void => {
  if (!(n >= 1)) throw new ValueError(op, `Invalid number of data points (${n}) specified`);
};

/** One transform over dim `d` of `n` points (c2r: n real outputs). `sign` -1 is the forward direction. */
function fft1(op: string, x: Tensor, d: number, n: number, kind: FftKind, sign: number, norm: unknown): Tensor {
  const scale = normScale(op, norm, n, sign < 0);
  const real = realOf(x.dt), outDt = kind === 'c2r' ? real : complexOf(real);
  const outLen = kind === 'r2c' ? (n >> 1) + 1 : n;
  const name = `fft.${op}`;
  // A backend with a strided kernel reads the dim in place; the others get it moved last, contiguous.
  if (hasKernel('fft_strided', x.device.type)) {
    const out = Tensor.empty(x.shape.map((s, i) => (i === d ? outLen : s)), outDt, x.device);
    if (out.numel() > 0) kernel('fft_strided', x.device, name)(x.ref(), d, out.ref(), n, kind, sign, scale);
    return out;
  }
  const moved = x.movedim(d, -1), mat = moved.contiguous();
  const lead = moved.shape.slice(0, -1);
  const out = Tensor.empty([...lead, outLen], outDt, x.device);
  try {
    if (out.numel() > 0) kernel('fft', x.device, name)(mat.ref(), numelOf(lead), x.shape[d]!, out.ref(), n, kind, sign, scale);
  } finally {
    if (mat !== moved) mat.dispose();
    moved.dispose();
  }
  if (d === x.ndim - 1) return out;
  const v = out.movedim(-1, d), c = v.contiguous();
  if (c !== v) v.dispose();
  out.dispose();
  return c;
}

function lastDimOf(op: string, x: Tensor, dim: unknown): number {
  if (x.ndim === 0) throw new IndexError(op, 'Dimension specified as -1 but tensor has no dimensions');
  return normDim(op, intArg(op, dim, 'dim'), x.ndim);
}

/** fft, ifft, rfft, irfft, hfft, ihfft: one dim, `n` points. */
function oneDim(name: string, kind: FftKind, sign: number) {
  return def(`fft.${name}(input, n=None, dim=-1, norm=None)`, (a) => {
    const x = fftInput(name, a.input, kind === 'r2c');
    try {
      const d = lastDimOf(name, x, a.dim);
      const m = x.shape[d]!;
      const n = a.n === null ? (kind === 'c2r' ? 2 * (m - 1) : m) : intArg(name, a.n, 'n');
      checkPoints(name, n);
      return fft1(name, x, d, n, kind, sign, a.norm);
    } finally { if (x !== a.input) x.dispose(); }
  });
}

/** The n-d variants: canonical dims and sizes as ATen's canonicalize_fft_shape_and_dim_args. */
function nDim(name: string, kind: FftKind, sign: number, twoD: boolean) {
  return def(`fft.${name}(input, s=None, dim=${twoD ? '(-2, -1)' : 'None'}, norm=None)`, (a) => {
    const x = fftInput(name, a.input, kind === 'r2c');
    try {
      let dims = a.dim === null ? null : intList(name, a.dim, 'dim').map((d) => {
        if (x.ndim === 0) throw new IndexError(name, `Dimension specified as ${d} but tensor has no dimensions`);
        return normDim(name, d, x.ndim);
      });
      if (dims && new Set(dims).size !== dims.length) throw new ValueError(name, 'FFT dims must be unique');
      let sizes: number[];
      const s = a.s === null ? null : intList(name, a.s, 's');
      if (s) {
        if (dims && dims.length !== s.length) throw new ValueError(name, 'When given, dim and shape arguments must have the same length');
        if (s.length > x.ndim) throw new ValueError(name, `Got shape with ${s.length} values but input tensor only has ${x.ndim} dimensions.`);
        dims ??= [...Array(s.length).keys()].map((i) => x.ndim - s.length + i);
        sizes = s;
      } else {
        dims ??= [...Array(x.ndim).keys()];
        sizes = dims.map(() => -1);
      }
      const last = dims.length - 1;
      if (last < 0) {
        if (kind !== 'c2c') throw new ValueError(name, `${name} must transform at least one axis`);
        return isC(x) ? x.clone() : fft1(name, x.unsqueeze(-1), x.ndim, 1, 'c2c', sign, null).squeeze(-1);
      }
      sizes = sizes.map((v, i) => (v !== -1 ? v : kind === 'c2r' && i === last ? 2 * (x.shape[dims![i]!]! - 1) : x.shape[dims![i]!]!));
      sizes.forEach((v) => checkPoints(name, v));
      // r2c first on the last dim; c2r last on the last dim; c2c on the others in between.
      let cur = x;
      const step = (d: number, n: number, k: FftKind): void => {
        const next = fft1(name, cur, d, n, k, sign, a.norm);
        if (cur !== x) cur.dispose();
        cur = next;
      };
      if (kind === 'r2c') step(dims[last]!, sizes[last]!, 'r2c');
      for (let i = kind === 'c2c' ? last : last - 1; i >= 0; i--) step(dims[i]!, sizes[i]!, 'c2c');
      if (kind === 'c2r') step(dims[last]!, sizes[last]!, 'c2r');
      return cur;
    } finally { if (x !== a.input) x.dispose(); }
  });
}

// ---- frequencies and shifts -------------------------------------------------------------------------

/** fftfreq / rfftfreq: k / (n d), computed as ATen (arange times the scalar 1/(n d), in the result dtype). */
function freqOp(name: 'fftfreq' | 'rfftfreq') {
  return def(`fft.${name}(n, d=1.0, *, dtype=None, device=None)`, (a) => {
    const n = intArg(name, a.n, 'n');
    if (n < 0) throw new ValueError(name, `${name}(): n must be non-negative, got ${n}`);
    const d = scalarNumber(a.d);
    const dt = a.dtype === null ? defaultFloatDType : dtypeName(a.dtype as DTypeLike);
    if (DTYPES[dt].kind !== 'float' || DTYPES[dt].storageOnly) throw new DTypeError(name, `${name}() supports floating point dtypes only, got ${dt}`);
    const count = name === 'fftfreq' ? n : (n >> 1) + 1;
    const f = dt === 'float64' ? (v: number): number => v : Math.fround;
    const step = f(1 / (n * d));
    const data = allocStorage(dt, count);
    for (let i = 0; i < count; i++) {
      const k = name === 'fftfreq' && i >= ((n + 1) >> 1) ? i - n : i;
      writeNumber(dt, data, i, f(k * step));
    }
    return Tensor.fromStorage(data, dt, [count], (a.device ?? 'cpu') as DeviceLike);
  });
}

/** Rolls each of `dims` by shift(size): fftshift moves the zero frequency to the center. */
function shiftOp(name: 'fftshift' | 'ifftshift') {
  return def(`fft.${name}(input, dim=None)`, (a) => {
    const x = asTensor(name, a.input);
    const dims = a.dim === null ? [...Array(x.ndim).keys()] : intList(name, a.dim, 'dim').map((d) => normDim(name, d, x.ndim));
    let cur = x.clone();
    for (const d of x.ndim === 0 ? [] : dims) {
      const n = cur.shape[d]!;
      const sh = n === 0 ? 0 : (name === 'fftshift' ? n >> 1 : (n + 1) >> 1) % n;
      if (sh === 0) continue;
      // The roll is a window of the dim repeated twice: [x, x].narrow(d, n - sh, n), all views and copies.
      const rep = cur.unsqueeze(d).expand(cur.shape.flatMap((s, i) => (i === d ? [2, n] : [s])));
      const twice = rep.contiguous();
      const merged = twice.view(cur.shape.map((s, i) => (i === d ? 2 * n : s)));
      const win = merged.narrow(d, n - sh, n), next = win.contiguous();
      for (const t of [rep, twice, merged, win, cur]) if (t !== next) t.dispose();
      cur = next;
    }
    return cur;
  });
}

/** The nbx.fft namespace (torch.fft). */
export const fft = {
  fft: oneDim('fft', 'c2c', -1),
  ifft: oneDim('ifft', 'c2c', 1),
  rfft: oneDim('rfft', 'r2c', -1),
  irfft: oneDim('irfft', 'c2r', 1),
  hfft: oneDim('hfft', 'c2r', -1),
  ihfft: oneDim('ihfft', 'r2c', 1),
  fft2: nDim('fft2', 'c2c', -1, true),
  ifft2: nDim('ifft2', 'c2c', 1, true),
  rfft2: nDim('rfft2', 'r2c', -1, true),
  irfft2: nDim('irfft2', 'c2r', 1, true),
  hfft2: nDim('hfft2', 'c2r', -1, true),
  ihfft2: nDim('ihfft2', 'r2c', 1, true),
  fftn: nDim('fftn', 'c2c', -1, false),
  ifftn: nDim('ifftn', 'c2c', 1, false),
  rfftn: nDim('rfftn', 'r2c', -1, false),
  irfftn: nDim('irfftn', 'c2r', 1, false),
  hfftn: nDim('hfftn', 'c2r', -1, false),
  ihfftn: nDim('ihfftn', 'r2c', 1, false),
  fftfreq: freqOp('fftfreq'),
  rfftfreq: freqOp('rfftfreq'),
  fftshift: shiftOp('fftshift'),
  ifftshift: shiftOp('ifftshift'),
};

/** nbx.nn.functional.X entries of this family. */
export const functional: Record<string, Fn> = {};
/** Tensor methods of this family (tensor as first argument). */
export const methods: Record<string, Fn> = { conj, conj_physical, angle };
