// Operation family: linalg. Matrix products (matmul and its PyTorch relatives: mm, bmm, baddbmm,
// addbmm, addmm, addmv, addr, dot, vdot, mv, outer, linear), trace and matrix_power.
//
// Every product lowers to one device-neutral kernel, `gemm` (float32/float64; `gemm_int` for integer
// dtypes): strided and transposed operands are passed as transA/transB plus a leading dimension, so
// views reach the kernel without copies wherever the layout allows; broadcast batch dimensions become
// batch strides (0 for a broadcast operand). float16/bfloat16 are widened to float32 and rounded once
// at the end, as PyTorch's CPU does.

import { Tensor } from '../tensor/tensor.js';
import { DTYPES, isFloat, type DTypeName } from '../dtype/dtypes.js';
import { promoteTypes } from '../dtype/promotion.js';
import { kernel, kernelFeatures } from '../kernels/registry.js';
import type { Device, StridedRef } from '../backend/backend.js';
import { DTypeError, ShapeError, UnsupportedError, ValueError } from '../errors.js';
import { broadcastShapes, broadcastStrides, contiguousStrides, numelOf, viewStrides } from '../tensor/shape.js';
import { def, scalarOf, type ScalarLike } from './registry.js';
import { eye } from './creation.js';
import { add, describe, deviceOf, elementwise, mul } from './elementwise.js';
import { sum } from './reduce.js';

// eslint-disable-next-line @typescript-eslint/no-explicit-any
type Fn = (...args: any[]) => any;

// ---- helpers ---------------------------------------------------------------------------------------

function asT(op: string, x: unknown, name: string): Tensor {
  if (!(x instanceof Tensor)) throw new ValueError(op, `${op}(): argument '${name}' (position ${name === 'input' ? 1 : 2}) must be Tensor, not ${describe(x)}`);
  return x;
}

/** PyTorch's C++ names (as its dtype-mismatch messages print them) and ScalarType names. */
const CNAME: Partial<Record<DTypeName, string>> = {
  float32: 'float', float64: 'double', float16: 'c10::Half', bfloat16: 'c10::BFloat16', int64: 'long int', int32: 'int',
  int16: 'short int', int8: 'signed char', uint8: 'unsigned char', bool: 'bool',
};
const SNAME: Partial<Record<DTypeName, string>> = {
  float32: 'Float', float64: 'Double', float16: 'Half', bfloat16: 'BFloat16', int64: 'Long', int32: 'Int', int16: 'Short',
  int8: 'Char', uint8: 'Byte', bool: 'Bool', complex64: 'ComplexFloat', complex128: 'ComplexDouble',
};
const cname = (d: DTypeName): string => CNAME[d] ?? d;
const sname = (d: DTypeName): string => SNAME[d] ?? d;

/** Rejects dtypes no product kernel takes, with the message PyTorch gives for them. */
function checkProductDType(op: string, d: DTypeName, kernelName = 'addmm_impl_cpu_'): void {
  if (d === 'bool') throw new DTypeError(op, `"${kernelName}" not implemented for 'Bool'`);
  if (DTYPES[d].kind === 'complex') throw new UnsupportedError(op, `complex ${d} matrix products are not implemented (real float and integer dtypes are)`);
  if (DTYPES[d].storageOnly) throw new DTypeError(op, `"${kernelName}" not implemented for '${d}' (float8 types are storage only: convert with .to() first)`);
}

function sameDType(op: string, a: Tensor, b: Tensor): void {
  if (a.dt !== b.dt) throw new DTypeError(op, `expected m1 and m2 to have the same dtype, but got: ${cname(a.dt)} != ${cname(b.dt)}`);
}

/** alpha/beta as numbers in the compute domain: integral for integer products (PyTorch casts them). */
function coef(v: ScalarLike, integral: boolean): number {
  const s = scalarOf(v);
  const x = typeof s.value === 'boolean' ? Number(s.value) : Number(s.value);
  return integral ? Math.trunc(x) : x;
}

interface Layout { trans: boolean; ld: number }

/**
 * How a rows×cols matrix with strides (s0, s1) reaches gemm without a copy: row-major as it is
 * (trans=false, ld=s0), or as the transpose of a row-major cols×rows matrix (trans=true, ld=s1).
 * Null when neither (then the caller copies). Leading dims always satisfy BLAS's rules.
 */
function matLayout(rows: number, cols: number, s0: number, s1: number): Layout | null {
  if (rows === 0 || cols === 0) return { trans: false, ld: Math.max(1, cols) };
  if ((s1 === 1 || cols <= 1) && (rows <= 1 || s0 >= Math.max(1, cols))) return { trans: false, ld: rows <= 1 ? Math.max(1, cols) : s0 };
  if ((s0 === 1 || rows <= 1) && (cols <= 1 || s1 >= Math.max(1, rows))) return { trans: true, ld: cols <= 1 ? Math.max(1, rows) : s1 };
  return null;
}

/**
 * The compute dtype of a product: float16/bfloat16 go through float32 (widened, rounded once) unless
 * the device's gemm takes half types natively (accumulating in float32), as its features declare.
 */
const computeDType = (d: DTypeName, device?: Device): DTypeName =>
  (d === 'float16' || d === 'bfloat16') && !(device && kernelFeatures('gemm', device).halfInputs) ? 'float32' : d;

interface Addend { input: Tensor; beta: ScalarLike }

/**
 * The product at the heart of every op here: a (..., m, k) @ b (..., k, n), batch dims broadcast,
 * times alpha, plus beta·input (input broadcast one-way to the result, as PyTorch's expand) when
 * given. Dtype and inner-size checks are the caller's (their messages differ per op); a and b share
 * a dtype. beta = 0 ignores the input's values (NaN included), as PyTorch does.
 */
function product(op: string, a: Tensor, b: Tensor, alpha: ScalarLike = 1, addend?: Addend): Tensor {
  const dt = a.dt;
  checkProductDType(op, dt);
  deviceOf(op, addend ? [a, b, addend.input] : [a, b]);
  const m = a.shape[a.ndim - 2]!, k = a.shape[a.ndim - 1]!, n = b.shape[b.ndim - 1]!;
  const batch = a.ndim === 2 && b.ndim === 2 ? [] : broadcastShapes(op, a.shape.slice(0, -2), b.shape.slice(0, -2));
  const outShape = [...batch, m, n];
  const cdt = computeDType(dt, a.device);
  const integral = !isFloat(dt);
  const owned: Tensor[] = [];
  const own = (t: Tensor): Tensor => { owned.push(t); return t; };
  try {
    // C starts as the broadcast input (cast to the compute dtype) or fresh.
    let beta = 0;
    let c: Tensor;
    // A row bias (linear's) rides in the GEMM's epilogue, where the device's gemm has one, instead of being copied into C first.
    const epilogueBias = addend && kernelFeatures('gemm', a.device).biasEpilogue && !integral && coef(addend.beta, integral) === 1 && addend.input.ndim === 1
      && addend.input.shape[0] === n && addend.input.dt === cdt && addend.input.strides[0] === 1 && n > 1 && k > 0 ? addend.input : null;
    if (epilogueBias) {
      c = Tensor.empty(outShape, cdt, a.device);
      if (c.numel() > 0) {
        if (cdt !== dt) { a = own(a.copyAs(cdt)); b = own(b.copyAs(cdt)); }
        gemmStrided(op, a, b, c, coef(alpha, integral), 0, m, k, n, batch, integral, own, epilogueBias);
      }
      if (cdt === dt) return c;
      owned.push(c);
      return c.copyAs(dt);
    }
    if (addend) {
      const expanded = addend.input.expand(outShape);
      beta = coef(addend.beta, integral);
      c = beta === 0 ? Tensor.empty(outShape, cdt, a.device, false) : expanded.copyAs(cdt); // every gemm kernel overwrites C when beta = 0
      expanded.dispose();
    } else c = Tensor.empty(outShape, cdt, a.device, false); // every gemm kernel overwrites C when beta = 0
    if (c.numel() > 0) {
      if (cdt !== dt) { a = own(a.copyAs(cdt)); b = own(b.copyAs(cdt)); }
      gemmStrided(op, a, b, c, coef(alpha, integral), beta, m, k, n, batch, integral, own);
    }
    if (cdt === dt) return c;
    owned.push(c);
    return c.copyAs(dt);
  } finally { for (const t of owned) t.dispose(); }
}

/** Calls the gemm kernel for c (contiguous, batch..×m×n) = alpha·a@b + beta·c, folding batch dims into as few calls as the strides allow. */
function gemmStrided(op: string, a: Tensor, b: Tensor, c: Tensor, alpha: number, beta: number, m: number, k: number, n: number,
  batch: number[], integral: boolean, own: (t: Tensor) => Tensor, bias: Tensor | null = null): void {
  const st = (t: Tensor, i: number): number => t.strides[t.ndim + i]!;
  let la = matLayout(m, k, st(a, -2), st(a, -1));
  if (!la) { a = own(a.contiguous()); la = matLayout(m, k, st(a, -2), st(a, -1))!; }
  let lb = matLayout(k, n, st(b, -2), st(b, -1));
  if (!lb) { b = own(b.contiguous()); lb = matLayout(k, n, st(b, -2), st(b, -1))!; }
  const gemm = kernel(integral ? 'gemm_int' : 'gemm', a.device, op);
  const ra = a.ref(), rb = b.ref(), rc = c.ref();
  // One literal with every field (object spreads here cost V8 microseconds per call).
  const rbias = bias ? bias.ref() : undefined; // undefined: every gemm kernel reads `bias` only when set
  const call = (rows: number, lda: number, offA: number, offB: number, offC: number, count: number, strideA: number, strideB: number, strideC: number): void =>
    gemm({
      transA: la.trans, transB: lb.trans, m: rows, n, k, alpha, beta, a: at(ra, offA), lda, b: at(rb, offB), ldb: lb.ld,
      c: at(rc, offC), ldc: n, batch: count, strideA, strideB, strideC, bias: rbias,
    });

  if (batch.length === 0) { call(m, la.ld, 0, 0, 0, 1, 0, 0, 0); return; }

  // b shared by every batch and a's rows evenly spaced: one (batch·m)×k product (linear layers).
  const bBatched = b.shape.slice(0, -2).some((s) => s !== 1);
  if (!bBatched && !la.trans && numelOf(batch) > 1) {
    const rows = numelOf(batch) * m;
    const rs = viewStrides(a.shape.slice(0, -1), a.strides.slice(0, -1), [rows]);
    if (rs !== null && (rows <= 1 || rs[0]! >= Math.max(1, k))) {
      call(rows, rows <= 1 ? Math.max(1, k) : rs[0]!, 0, 0, 0, 1, 0, 0, 0);
      return;
    }
  }

  // General case: batch dims (size-1 dims dropped) as element strides; the innermost run of dims
  // that collapse for a, b and c alike is one batched call, outer dims are looped.
  const sa = broadcastStrides(a.shape.slice(0, -2), a.strides.slice(0, -2), batch);
  const sb = broadcastStrides(b.shape.slice(0, -2), b.strides.slice(0, -2), batch);
  const sc = contiguousStrides(batch).map((s) => s * m * n);
  const dims = batch.map((_, i) => i).filter((i) => batch[i] !== 1);
  const nd = dims.length;
  let inner = nd, count = 1;
  if (nd > 0) {
    inner = nd - 1;
    count = batch[dims[inner]!]!;
    const collapses = (s: number[]): boolean => s[dims[inner - 1]!] === s[dims[inner]!]! * batch[dims[inner]!]!;
    while (inner > 0 && collapses(sa) && collapses(sb) && collapses(sc)) { inner--; count *= batch[dims[inner]!]!; }
  }
  const last = dims[nd - 1];
  const [strideA, strideB, strideC] = last === undefined ? [0, 0, 0] : [sa[last]!, sb[last]!, sc[last]!];
  const outer = dims.slice(0, inner);
  const idx = new Array<number>(outer.length).fill(0);
  const off = (s: number[]): number => outer.reduce((acc, d, i) => acc + idx[i]! * s[d]!, 0);
  for (;;) {
    call(m, la.ld, off(sa), off(sb), off(sc), count, strideA, strideB, strideC);
    let i = outer.length - 1;
    while (i >= 0 && ++idx[i]! === batch[outer[i]!]!) idx[i--] = 0;
    if (i < 0) break;
  }
}

/** A StridedRef moved by `delta` elements. */
const at = (r: StridedRef, delta: number): StridedRef =>
  delta === 0 ? r : { buf: r.buf, dtype: r.dtype, shape: r.shape, strides: r.strides, offset: r.offset + delta };

// ---- matmul and its 1-D forms ------------------------------------------------------------------------

/** matmul with PyTorch's 1-D promotions (a vector becomes a 1×k row or k×1 column, removed after). */
function matmulImpl(op: string, a: Tensor, b: Tensor, alpha: ScalarLike = 1, addend?: Addend): Tensor {
  if (a.ndim === 0 || b.ndim === 0) {
    throw new ShapeError(op, `both arguments to matmul need to be at least 1D, but they are ${a.ndim}D and ${b.ndim}D`);
  }
  if (a.ndim === 1 && b.ndim === 1) return dotImpl(op, a, b, alpha, addend);
  if (a.dt !== b.dt) sameDType(op, a, b);
  const k = a.shape[a.ndim - 1]!, kb = b.shape[Math.max(0, b.ndim - 2)]!;
  if (k !== kb) {
    if (b.ndim === 1) throw new ShapeError(op, `size mismatch, got ${a.shape[a.ndim - 2]}, ${a.shape[a.ndim - 2]}x${k},${kb}`);
    const m = a.ndim === 1 ? 1 : numelOf(a.shape.slice(0, -1));
    throw new ShapeError(op, `mat1 and mat2 shapes cannot be multiplied (${m}x${k} and ${kb}x${b.shape[b.ndim - 1]})`);
  }
  const a2 = a.ndim === 1 ? a.unsqueeze(0) : a, b2 = b.ndim === 1 ? b.unsqueeze(1) : b;
  const r = product(op, a2, b2, alpha, addend);
  if (a.ndim === 1) return r.squeeze(-2);
  if (b.ndim === 1) return r.squeeze(-1);
  return r;
}

function dotImpl(op: string, a: Tensor, b: Tensor, alpha: ScalarLike = 1, addend?: Addend): Tensor {
  if (a.ndim !== 1 || b.ndim !== 1) throw new ShapeError(op, `1D tensors expected, but got ${a.ndim}D and ${b.ndim}D tensors`);
  if (a.shape[0] !== b.shape[0]) {
    throw new ShapeError(op, `inconsistent tensor size, expected tensor [${a.shape[0]}] and src [${b.shape[0]}] to have the same number of elements, but got ${a.shape[0]} and ${b.shape[0]} elements respectively`);
  }
  if (a.dt !== b.dt) throw new DTypeError(op, `dot : expected both vectors to have same dtype, but found ${sname(a.dt)} and ${sname(b.dt)}`);
  if (a.dt === 'bool') throw new DTypeError(op, `"dot" not implemented for 'Bool'`);
  return product(op, a.unsqueeze(0), b.unsqueeze(1), alpha, addend).reshape([]);
}

export const matmul = def('matmul(input, other)', (x) => matmulImpl('matmul', asT('matmul', x.input, 'input'), asT('matmul', x.other, 'other')));

export const dot = def('dot(input, tensor)', (x) => dotImpl('dot', asT('dot', x.input, 'input'), asT('dot', x.tensor, 'tensor')));
/** Real dtypes only: vdot conjugates its first argument, which is the identity there. */
export const vdot = def('vdot(input, other)', (x) => {
  const a = asT('vdot', x.input, 'input'), b = asT('vdot', x.other, 'other');
  return dotImpl('vdot', a, b);
});

// ---- mm, bmm, mv and their add* forms -------------------------------------------------------------

function checkMatrix(op: string, t: Tensor, name: string, withDim: boolean): void {
  if (t.ndim !== 2) throw new ShapeError(op, `${name} must be a matrix${withDim ? `, got ${t.ndim}-D tensor` : ''}`);
}

function mmChecks(op: string, a: Tensor, b: Tensor, addmm: boolean): void {
  checkMatrix(op, a, addmm ? 'mat1' : 'self', addmm);
  checkMatrix(op, b, 'mat2', addmm);
  if (a.shape[1] !== b.shape[0]) {
    throw new ShapeError(op, `mat1 and mat2 shapes cannot be multiplied (${a.shape[0]}x${a.shape[1]} and ${b.shape[0]}x${b.shape[1]})`);
  }
  sameDType(op, a, b);
}

/** The additive input of addmm/addmv/baddbmm/linear must match the matrices' dtype. */
function inputDType(op: string, input: Tensor, mat: Tensor): void {
  if (input.dt !== mat.dt) throw new DTypeError(op, `self and mat2 must have the same dtype, but got ${sname(input.dt)} and ${sname(mat.dt)}`);
}

export const mm = def('mm(input, mat2)', (x) => {
  const a = asT('mm', x.input, 'input'), b = asT('mm', x.mat2, 'mat2');
  mmChecks('mm', a, b, false);
  return product('mm', a, b);
});

export const addmm = def('addmm(input, mat1, mat2, *, beta=1, alpha=1)', (x) => {
  const input = asT('addmm', x.input, 'input'), a = asT('addmm', x.mat1, 'mat1'), b = asT('addmm', x.mat2, 'mat2');
  mmChecks('addmm', a, b, true);
  inputDType('addmm', input, b);
  return product('addmm', a, b, x.alpha, { input, beta: x.beta });
});

function bmmChecks(op: string, a: Tensor, b: Tensor): void {
  if (a.ndim !== 3) throw new ShapeError(op, 'batch1 must be a 3D tensor');
  if (b.ndim !== 3) throw new ShapeError(op, 'batch2 must be a 3D tensor');
  if (b.shape[0] !== a.shape[0] || b.shape[1] !== a.shape[2]) {
    throw new ShapeError(op, `Expected size for first two dimensions of batch2 tensor to be: [${a.shape[0]}, ${a.shape[2]}] but got: [${b.shape[0]}, ${b.shape[1]}].`);
  }
  if (a.dt !== b.dt) throw new DTypeError(op, `expected batch1 and batch2 to have the same dtype, but got: ${cname(a.dt)} != ${cname(b.dt)}`);
}

export const bmm = def('bmm(input, mat2)', (x) => {
  const a = asT('bmm', x.input, 'input'), b = asT('bmm', x.mat2, 'mat2');
  bmmChecks('bmm', a, b);
  return product('bmm', a, b);
});

export const baddbmm = def('baddbmm(input, batch1, batch2, *, beta=1, alpha=1)', (x) => {
  const input = asT('baddbmm', x.input, 'input'), a = asT('baddbmm', x.batch1, 'batch1'), b = asT('baddbmm', x.batch2, 'batch2');
  bmmChecks('baddbmm', a, b);
  if (input.dt !== a.dt) {
    throw new DTypeError('baddbmm', `Input dtypes must be the same, got: input ${cname(input.dt)}, batch1: ${cname(a.dt)}, batch2: ${cname(b.dt)}`);
  }
  return product('baddbmm', a, b, x.alpha, { input, beta: x.beta });
});

/** beta·input + alpha·Σ_b batch1[b] @ batch2[b]: one m×(B·k) @ (B·k)×n product. */
export const addbmm = def('addbmm(input, batch1, batch2, *, beta=1, alpha=1)', (x) => {
  const input = asT('addbmm', x.input, 'input'), a = asT('addbmm', x.batch1, 'batch1'), b = asT('addbmm', x.batch2, 'batch2');
  bmmChecks('addbmm', a, b);
  inputDType('addbmm', input, b);
  const [nb, m, k] = a.shape as [number, number, number];
  const a2 = a.permute(1, 0, 2).reshape([m, nb * k]), b2 = b.reshape([nb * k, b.shape[2]!]);
  return product('addbmm', a2, b2, x.alpha, { input, beta: x.beta });
});

function mvChecks(op: string, mat: Tensor, vec: Tensor, inputDim: number, inputSize?: number): void {
  if (mat.ndim !== 2 || vec.ndim !== 1 || inputDim > 1) {
    throw new ShapeError(op, `vector + matrix @ vector expected, got ${inputDim}, ${mat.ndim}, ${vec.ndim}`);
  }
  const m = mat.shape[0]!, k = mat.shape[1]!;
  if (k !== vec.shape[0] || (inputSize !== undefined && inputSize !== 1 && inputSize !== m)) {
    throw new ShapeError(op, `size mismatch, got ${inputSize ?? m}, ${m}x${k},${vec.shape[0]}`);
  }
  if (mat.dt !== vec.dt) throw new DTypeError(op, `expected m1 and m2 to have the same dtype, but got: ${cname(mat.dt)} != ${cname(vec.dt)}`);
}

export const mv = def('mv(input, vec)', (x) => {
  const a = asT('mv', x.input, 'input'), v = asT('mv', x.vec, 'vec');
  mvChecks('mv', a, v, 1);
  return product('mv', a, v.unsqueeze(1)).squeeze(1);
});

export const addmv = def('addmv(input, mat, vec, *, beta=1, alpha=1)', (x) => {
  const input = asT('addmv', x.input, 'input'), a = asT('addmv', x.mat, 'mat'), v = asT('addmv', x.vec, 'vec');
  mvChecks('addmv', a, v, input.ndim, input.ndim === 0 ? 1 : input.shape[0]);
  // The input is read in the matrices' dtype (PyTorch copies it into the result).
  return product('addmv', a, v.unsqueeze(1), x.alpha, { input: input.unsqueeze(-1), beta: x.beta }).squeeze(1);
});

// ---- outer products -------------------------------------------------------------------------------

function check1d(op: string, t: Tensor, name: string): void {
  if (t.ndim !== 1) throw new ShapeError(op, `${op}: Expected 1-D argument ${name}, but got ${t.ndim}-D`);
}

/** outer/ger: an elementwise product with type promotion, as PyTorch. */
function outerImpl(op: string) {
  return def(`${op}(input, vec2)`, (x) => {
    const a = asT(op, x.input, 'input'), b = asT(op, x.vec2, 'vec2');
    check1d('outer', a, 'self');
    check1d('outer', b, 'vec2');
    return mul(a.unsqueeze(1), b.unsqueeze(0));
  });
}
export const outer = outerImpl('outer');
export const ger = outerImpl('ger');

/** Checks PyTorch's addr scalar rules: no bool scalars unless the result is bool, no floats for integer results. */
function addrScalar(d: DTypeName, v: ScalarLike, name: string): void {
  const s = scalarOf(v);
  if (s.kind === 'bool' && d !== 'bool') throw new DTypeError('addr', `Boolean ${name} only supported for Boolean results.`);
  if (!isFloat(d) && DTYPES[d].kind !== 'complex' && s.kind === 'float') {
    throw new DTypeError('addr', `For integral input tensors, argument ${name} must not be a floating point number.`);
  }
}

export const addr = def('addr(input, vec1, vec2, *, beta=1, alpha=1)', (x) => {
  const input = asT('addr', x.input, 'input'), v1 = asT('addr', x.vec1, 'vec1'), v2 = asT('addr', x.vec2, 'vec2');
  check1d('addr', v1, 'vec1');
  check1d('addr', v2, 'vec2');
  const self = input.expand([v1.shape[0]!, v2.shape[0]!]);
  const out = promoteTypes(promoteTypes(input.dt, v1.dt), v2.dt);
  addrScalar(out, x.beta, 'beta');
  addrScalar(out, x.alpha, 'alpha');
  const beta = x.beta as ScalarLike, alpha = x.alpha as ScalarLike;
  const compute = computeDType(out);
  return elementwise('addr', [self, v1.unsqueeze(1), v2.unsqueeze(0)], compute, out, ([s, p, q], ctx) => {
    if (out === 'bool') {
      const pq = p!.bin('and', q!).bin('and', ctx.const(Number(truthy(alpha)), 'bool'));
      return truthy(beta) ? s!.bin('or', pq) : pq;
    }
    const term = ctx.param(alpha, compute).mul(p!.mul(q!));
    // beta == 0 ignores the input entirely (NaN included).
    return scalarIsZero(beta) ? term : ctx.param(beta, compute).mul(s!).add(term);
  });
});

const truthy = (v: ScalarLike): boolean => { const s = scalarOf(v).value; return typeof s === 'bigint' ? s !== 0n : Boolean(s); };
const scalarIsZero = (v: ScalarLike): boolean => !truthy(v);

// ---- nn.functional.linear -----------------------------------------------------------------------

/**
 * input @ weightᵀ for the common layer call (no bias, a contiguous float input of at least two dims,
 * a contiguous 2-D weight of the same dtype and device, no empty sizes): one gemm call with exactly the
 * arguments the general path (weight.t() → matmul → product → gemmStrided) reaches, without its
 * transposed view, batch-shape broadcasting and stride arrays per call. Null: take the general path.
 */
function linearDirect(input: Tensor, weight: Tensor): Tensor | null {
  const dt = input.dt, nd = input.ndim;
  if (nd < 2 || weight.ndim !== 2 || weight.dt !== dt || (dt !== 'float32' && dt !== 'float64') || input.device !== weight.device) return null;
  const k = input.shape[nd - 1]!, n = weight.shape[0]!;
  if (k < 2 || n < 2 || weight.shape[1] !== k || weight.strides[0] !== k || weight.strides[1] !== 1 || !input.is_contiguous()) return null;
  const outShape: number[] = [];
  let rows = 1;
  for (let i = 0; i < nd - 1; i++) { const s = input.shape[i]!; outShape.push(s); rows *= s; }
  outShape.push(n);
  if (rows === 0) return null;
  const c = Tensor.empty(outShape, dt, input.device, false); // every gemm kernel overwrites C when beta = 0
  // A contiguous input is a rows×k row-major matrix (ld k, or max(1, k) = k for a single row); the
  // weight is the transpose of a row-major n×k matrix (ld k).
  kernel('gemm', input.device, 'nn.functional.linear')({
    transA: false, transB: true, m: rows, n, k, alpha: 1, beta: 0, a: input.ref(), lda: k, b: weight.ref(), ldb: k,
    c: c.ref(), ldc: n, batch: 1, strideA: 0, strideB: 0, strideC: 0, bias: undefined,
  });
  return c;
}

export const linear = def('nn.functional.linear(input, weight, bias=None)', (x) => {
  const input = asT('nn.functional.linear', x.input, 'input'), weight = asT('nn.functional.linear', x.weight, 'weight');
  const bias = x.bias === null ? null : asT('nn.functional.linear', x.bias, 'bias');
  if (bias === null) { const y = linearDirect(input, weight); if (y !== null) return y; }
  const wt = weight.t(); // PyTorch's own error for weights of more than 2 dims
  // the transposed view is released at once: left to the GC, a view per call is measurable host time
  try {
    if (input.ndim > 0 && wt.ndim === 2 && input.dt !== wt.dt) sameDType('nn.functional.linear', input, wt);
    if (bias === null) return matmulImpl('nn.functional.linear', input, wt);
    if (input.dt === wt.dt) inputDType('nn.functional.linear', bias, wt);
    // Fused (bias as the gemm's C, one rounding) when the bias cannot change the result's shape.
    if (wt.ndim === 2 && bias.ndim <= 1) return matmulImpl('nn.functional.linear', input, wt, 1, { input: bias, beta: 1 });
    return add(matmulImpl('nn.functional.linear', input, wt), bias);
  } finally { wt.dispose(); }
});

// ---- trace, matrix_power --------------------------------------------------------------------------

export const trace = def('trace(input)', (x) => {
  const t = asT('trace', x.input, 'input');
  if (t.ndim !== 2) throw new ShapeError('trace', `trace: expected a matrix, but got tensor with dim ${t.ndim}`);
  if (t.dt === 'bool') throw new DTypeError('trace', `"trace" not implemented for 'Bool'`);
  const n = Math.min(t.shape[0]!, t.shape[1]!);
  const diag = t.as_strided([n], [t.strides[0]! + t.strides[1]!], t.offset);
  return sum(diag); // integer traces are int64, as PyTorch
});

function matrixPowerImpl(op: string) {
  return def(`${op}(input, n)`, (x) => {
    const t = asT(op, x.input, 'input');
    const n = x.n as number;
    if (typeof n !== 'number' || !Number.isInteger(n)) throw new ValueError(op, `${op}(): argument 'n' must be int, not ${describe(n)}`);
    if (t.ndim < 2) throw new ShapeError(op, 'linalg.matrix_power: The input tensor A must have at least 2 dimensions.');
    const r = t.shape[t.ndim - 2]!, c = t.shape[t.ndim - 1]!;
    if (r !== c) throw new ShapeError(op, `linalg.matrix_power: A must be batches of square matrices, but they are ${r} by ${c} matrices`);
    if (n < 0) throw new UnsupportedError(op, `negative powers need a matrix inverse, which is not implemented (got n=${n}); non-negative n works`);
    if (n === 0) return identityLike(t);
    if (n === 1) return t.clone();
    checkProductDType(op, t.dt);
    // Binary exponentiation; intermediate results are freed as they go.
    let result: Tensor | null = null, base = t;
    for (let e = n; e > 0; e = Math.floor(e / 2)) {
      if (e & 1) {
        const next: Tensor = result === null ? base.clone() : product(op, result, base);
        result?.dispose();
        result = next;
      }
      if (e > 1) { const sq = product(op, base, base); if (base !== t) base.dispose(); base = sq; }
    }
    if (base !== t) base.dispose();
    return result!;
  });
}
export const matrix_power = matrixPowerImpl('matrix_power');
export const linalg_matrix_power = matrixPowerImpl('linalg.matrix_power');

/** Identity matrices of t's shape and dtype (batched). */
function identityLike(t: Tensor): Tensor {
  const n = t.shape[t.ndim - 1]!;
  const e = eye(n, { dtype: t.dt, device: t.device });
  if (t.ndim === 2) return e;
  const r = e.expand(t.shape as number[]).contiguous();
  e.dispose();
  return r;
}

// ---- tensordot, inner, multi_dot, vecdot --------------------------------------------------------

/** Contracts dims `da` of a with dims `db` of b (in pairs): one (free a)×K @ K×(free b) product. */
function tensordotImpl(op: string, a: Tensor, b: Tensor, da: number[], db: number[]): Tensor {
  if (da.length !== db.length) throw new ShapeError(op, `both dimension lists should have same length, got ${da.length} and ${db.length}`);
  const na = da.map((d) => normAxis(op, d, a.ndim)), nbd = db.map((d) => normAxis(op, d, b.ndim));
  na.forEach((d, i) => {
    if (a.shape[d] !== b.shape[nbd[i]!]) {
      throw new ShapeError(op, `contracted dimensions need to match, but first has size ${a.shape[d]} in dim ${da[i]} and second has size ${b.shape[nbd[i]!]} in dim ${db[i]}`);
    }
  });
  if (a.dt !== b.dt) sameDType(op, a, b);
  const freeA = [...Array(a.ndim).keys()].filter((d) => !na.includes(d)), freeB = [...Array(b.ndim).keys()].filter((d) => !nbd.includes(d));
  const K = numelOf(na.map((d) => a.shape[d]!));
  const a2 = a.permute([...freeA, ...na]).reshape([numelOf(freeA.map((d) => a.shape[d]!)), K]);
  const b2 = b.permute([...nbd, ...freeB]).reshape([K, numelOf(freeB.map((d) => b.shape[d]!))]);
  return product(op, a2, b2).reshape([...freeA.map((d) => a.shape[d]!), ...freeB.map((d) => b.shape[d]!)]);
}

function normAxis(op: string, d: number, ndim: number): number {
  if (d < -ndim || d >= ndim) throw new ShapeError(op, `Dimension out of range (expected to be in range of [${-ndim}, ${ndim - 1}], but got ${d})`);
  return d < 0 ? d + ndim : d;
}

export const tensordot = def('tensordot(a, b, dims=2)', (x) => {
  const a = asT('tensordot', x.a, 'a'), b = asT('tensordot', x.b, 'b');
  const dims = x.dims as number | (number | number[])[];
  if (typeof dims === 'number') {
    if (dims < 0) throw new ValueError('tensordot', `tensordot expects dims >= 0, but got dims=${dims}`);
    if (dims > a.ndim || dims > b.ndim) throw new ShapeError('tensordot', `tensordot expects dims < ndim_a or ndim_b, but got dims=${dims}`);
    return tensordotImpl('tensordot', a, b, [...Array(dims).keys()].map((i) => a.ndim - dims + i), [...Array(dims).keys()]);
  }
  if (!Array.isArray(dims) || dims.length !== 2) throw new ValueError('tensordot', `tensordot expects dims to be an int or a pair of dim lists, got ${describe(dims)}`);
  const list = (v: number | number[]): number[] => (typeof v === 'number' ? [v] : v);
  return tensordotImpl('tensordot', a, b, list(dims[0]!), list(dims[1]!));
});

export const inner = def('inner(input, other)', (x) => {
  const a = asT('inner', x.input, 'input'), b = asT('inner', x.other, 'other');
  if (a.ndim === 0 || b.ndim === 0) return mul(a, b);
  if (a.shape[a.ndim - 1] !== b.shape[b.ndim - 1]) {
    throw new ShapeError('inner', `inner() the last dimension must match on both input tensors but got shapes [${a.shape.join(', ')}] and [${b.shape.join(', ')}]`);
  }
  return tensordotImpl('inner', a, b, [-1], [-1]);
});

export const linalg_multi_dot = def('linalg.multi_dot(tensors)', (x) => {
  const op = 'linalg.multi_dot';
  const ts = (x.tensors as unknown[]).map((t, i) => asT(op, t, `tensors[${i}]`));
  if (ts.length < 2) throw new ValueError(op, `multi_dot(): expected at least 2 tensors but got ${ts.length}`);
  ts.forEach((t, i) => {
    const end = i === 0 || i === ts.length - 1;
    if (end ? t.ndim < 1 || t.ndim > 2 : t.ndim !== 2) {
      throw new ShapeError(op, i === 0 ? `multi_dot(): the first tensor must be 1D or 2D but got ${t.ndim}D`
        : i === ts.length - 1 ? `multi_dot(): the last tensor must be 1D or 2D but got ${t.ndim}D` : `multi_dot(): tensor ${i} must be 2D but got ${t.ndim}D`);
    }
    if (t.dt !== ts[0]!.dt) throw new DTypeError(op, `multi_dot(): all tensors must have be the same dtype but tensor 0 is ${cname(ts[0]!.dt)} and tensor ${i} ${cname(t.dt)}`);
  });
  const first = ts[0]!, last = ts[ts.length - 1]!;
  const mats = ts.map((t, i) => (t.ndim === 2 ? t : i === 0 ? t.unsqueeze(0) : t.unsqueeze(1)));
  for (let i = 1; i < mats.length; i++) {
    if (mats[i - 1]!.shape[1] !== mats[i]!.shape[0]) {
      throw new ShapeError(op, `multi_dot(): tensors ${i - 1} and ${i} with shapes [${ts[i - 1]!.shape.join(', ')}] and [${ts[i]!.shape.join(', ')}] cannot be multiplied`);
    }
  }
  let r = mats[0]!;
  for (let i = 1; i < mats.length; i++) { const next = product(op, r, mats[i]!); if (i > 1) r.dispose(); r = next; }
  if (first.ndim === 1 && last.ndim === 1) return r.reshape([]);
  if (first.ndim === 1) return r.squeeze(0);
  if (last.ndim === 1) return r.squeeze(1);
  return r;
});

export const linalg_vecdot = def('linalg.vecdot(x, y, *, dim=-1)', (a) => {
  const op = 'linalg.vecdot';
  const x = asT(op, a.x, 'x'), y = asT(op, a.y, 'y');
  if (x.dt !== y.dt) throw new DTypeError(op, `linalg.vecdot: Expected x and y to have the same dtype, but found x of type ${sname(x.dt)} and y of type ${sname(y.dt)} instead`);
  if (!isFloat(x.dt)) throw new DTypeError(op, `linalg.vecdot: Expected a floating point or complex tensor as input. Got ${sname(x.dt)}`);
  const p = mul(x, y);
  const r = sum(p, a.dim as number, false, { dtype: p.dt });
  p.dispose();
  return r;
});

// ---- einsum -------------------------------------------------------------------------------------

/** Label ids as PyTorch orders them (implicit outputs are sorted): A-Z, then a-z, then ellipsis dims. */
const labelId = (ch: string): number => (ch <= 'Z' ? ch.charCodeAt(0) - 65 : ch.charCodeAt(0) - 97 + 26);
const ELL = 52;
const labelName = (id: number): string => (id >= ELL ? '...' : String.fromCharCode(id < 26 ? 65 + id : 97 + id - 26));

interface Term { t: Tensor; labels: number[] }

/** Parses one side of the equation into label ids, ellipsis dims numbered from the right (ELL + k). */
function parseTerm(op: string, text: string, ndim: number | null, maxEll: number, where: string): number[] {
  const body = text.replace('...', '\u2026');
  if ((body.match(/\u2026/g) ?? []).length > 1 || body.includes('.')) throw new ValueError(op, `einsum(): found more than one '...' or a stray '.' in ${where}`);
  const letters = [...body];
  for (const ch of letters) if (ch !== '\u2026' && !/[a-zA-Z]/.test(ch)) throw new ValueError(op, `einsum(): invalid subscript given at index ${text.indexOf(ch)} in the equation string, subscripts must be in [a-zA-Z]`);
  const named = letters.filter((c) => c !== '\u2026').length;
  const hasEll = letters.includes('\u2026');
  const ell = ndim === null ? maxEll : ndim - named;
  if (ndim !== null && (hasEll ? ell < 0 : ell !== 0)) {
    throw new ShapeError(op, hasEll
      ? `einsum(): the number of subscripts in the equation (${named}) is more than the number of dimensions (${ndim}) for ${where}`
      : `einsum(): the number of subscripts in the equation (${named}) does not match the number of dimensions (${ndim}) for ${where} and no ellipsis was given`);
  }
  const out: number[] = [];
  for (const ch of letters) {
    if (ch === '\u2026') for (let e = 0; e < ell; e++) out.push(ELL + maxEll - ell + e);
    else out.push(labelId(ch));
  }
  return out;
}

/** Takes the diagonal of repeated labels, so each label names one dim. */
function distinctLabels(op: string, t: Tensor, labels: number[], index: number): Term {
  const shape: number[] = [], strides: number[] = [], out: number[] = [];
  labels.forEach((l, d) => {
    const j = out.indexOf(l);
    if (j < 0) { out.push(l); shape.push(t.shape[d]!); strides.push(t.strides[d]!); return; }
    if (shape[j] !== t.shape[d]) {
      throw new ShapeError(op, `einsum(): subscript ${labelName(l)} is repeated for operand ${index} but the sizes don't match, ${shape[j]} != ${t.shape[d]}`);
    }
    strides[j]! += t.strides[d]!;
  });
  return { t: out.length === labels.length ? t : t.as_strided(shape, strides, t.offset), labels: out };
}

/** Sums away the labels of `x` that `keep` does not list (dtype kept: einsum's intermediates stay in their dtype). */
function sumAway(x: Term, keep: (l: number) => boolean, promote: boolean): Term {
  const dims = x.labels.map((l, d) => (keep(l) ? -1 : d)).filter((d) => d >= 0);
  if (!dims.length) return x;
  const t = promote ? sum(x.t, dims) : sum(x.t, dims, false, { dtype: x.t.dt });
  return { t, labels: x.labels.filter((l) => keep(l)) };
}

export const einsum = def('einsum(equation, *operands)', (x) => {
  const op = 'einsum';
  if (typeof x.equation !== 'string') throw new ValueError(op, `einsum(): argument 'equation' must be str, not ${describe(x.equation)}`);
  const ops = (x.operands as unknown[]).map((t, i) => asT(op, t, `operands[${i}]`));
  const eq = (x.equation as string).replace(/\s+/g, '');
  const [lhs, rhs] = eq.includes('->') ? eq.split('->') as [string, string] : [eq, null];
  const terms = lhs.split(',');
  if (terms.length !== ops.length) {
    throw new ValueError(op, `einsum(): ${terms.length < ops.length ? 'more operands were provided than specified in the equation' : 'fewer operands were provided than were specified in the equation'}`);
  }
  const maxEll = Math.max(0, ...terms.map((tm, i) => (tm.includes('...') ? ops[i]!.ndim - (tm.replace('...', '').length) : 0)));
  let cur: Term[] = terms.map((tm, i) => distinctLabels(op, ops[i]!, parseTerm(op, tm, ops[i]!.ndim, maxEll, `operand ${i}`), i));
  // The output: given, or the ellipsis dims then the labels seen exactly once, in label order.
  let outLabels: number[];
  if (rhs !== null) {
    outLabels = parseTerm(op, rhs, null, maxEll, 'the output');
    const seen = new Set<number>();
    for (const l of outLabels) {
      if (seen.has(l)) throw new ValueError(op, `einsum(): output subscript ${labelName(l)} appears more than once in the output`);
      seen.add(l);
      if (!cur.some((c) => c.labels.includes(l)) && l < ELL) throw new ValueError(op, `einsum(): output subscript ${labelName(l)} does not appear in the equation for any input operand`);
    }
  } else {
    const count = new Map<number, number>();
    terms.forEach((tm, i) => parseTerm(op, tm, ops[i]!.ndim, maxEll, `operand ${i}`).forEach((l) => count.set(l, (count.get(l) ?? 0) + 1)));
    outLabels = [...count.keys()].filter((l) => l >= ELL || count.get(l) === 1).sort((p, q) => (p >= ELL) === (q >= ELL) ? p - q : p >= ELL ? -1 : 1);
  }
  // Every label's size: equal, or 1 (broadcast).
  const size = new Map<number, number>();
  cur.forEach((c, i) => c.labels.forEach((l, d) => {
    const s = c.t.shape[d]!, have = size.get(l);
    if (have === undefined || have === 1) size.set(l, s);
    else if (s !== 1 && s !== have) {
      throw new ShapeError(op, `einsum(): subscript ${labelName(l)} has size ${s} for operand ${i} which does not broadcast with previously seen size ${have}`);
    }
  }));
  const inOut = (l: number): boolean => outLabels.includes(l);
  const neededAfter = (i: number) => (l: number): boolean => inOut(l) || cur.slice(i + 1).some((c) => c.labels.includes(l));
  if (cur.length === 1) cur[0] = sumAway(cur[0]!, inOut, true);
  let acc = sumAway(cur[0]!, (l) => neededAfter(0)(l), false);
  for (let i = 1; i < cur.length; i++) {
    const keepLater = neededAfter(i);
    const b = sumAway(cur[i]!, (l) => keepLater(l) || acc.labels.includes(l), false);
    acc = contract(op, acc, b, keepLater, size);
  }
  return acc.t.permute(outLabels.map((l) => acc.labels.indexOf(l)));
});

/** One pairwise contraction: batch labels (in both, needed later), contracted (in both, not needed), then each side's own. */
function contract(op: string, a: Term, b: Term, keep: (l: number) => boolean, size: Map<number, number>): Term {
  if (a.t.dt !== b.t.dt) sameDType(op, a.t, b.t);
  const batch = a.labels.filter((l) => b.labels.includes(l) && keep(l));
  const red = a.labels.filter((l) => b.labels.includes(l) && !keep(l));
  const left = a.labels.filter((l) => !b.labels.includes(l));
  const right = b.labels.filter((l) => !a.labels.includes(l));
  const arrange = (x: Term, order: number[]): Tensor =>
    x.t.permute(order.map((l) => x.labels.indexOf(l))).expand(order.map((l) => size.get(l)!));
  const n = (ls: number[]): number => ls.reduce((p, l) => p * size.get(l)!, 1);
  const a3 = arrange(a, [...batch, ...left, ...red]).reshape([n(batch), n(left), n(red)]);
  const b3 = arrange(b, [...batch, ...red, ...right]).reshape([n(batch), n(red), n(right)]);
  const r = product(op, a3, b3);
  return { t: r.reshape([...batch, ...left, ...right].map((l) => size.get(l)!)), labels: [...batch, ...left, ...right] };
}

// ---- torch.linalg entries -----------------------------------------------------------------------

export const linalg_matmul = def('linalg.matmul(input, other)', (x) =>
  matmulImpl('linalg.matmul', asT('linalg.matmul', x.input, 'input'), asT('linalg.matmul', x.other, 'other')));

/** nbx.nn.functional.X entries of this family. */
export const functional: Record<string, Fn> = { linear };
/** Tensor methods of this family (tensor as first argument). */
export const methods: Record<string, Fn> = {
  matmul, mm, bmm, baddbmm, addbmm, addmm, addmv, addr, dot, vdot, mv, outer, ger, trace, matrix_power, inner,
  __matmul__: matmul, __rmatmul__: (self: Tensor, other: Tensor) => matmul(other, self),
};
