// Shape arithmetic shared by every backend: broadcasting, strides, dim normalisation.

import { IndexError, ShapeError, ValueError } from '../errors.js';

export type Shape = readonly number[];

export const numelOf = (shape: Shape): number => shape.reduce((a, b) => a * b, 1);

export function contiguousStrides(shape: Shape): number[] {
  const s = new Array<number>(shape.length);
  let acc = 1;
  for (let i = shape.length - 1; i >= 0; i--) { s[i] = acc; acc *= shape[i]!; }
  return s;
}

export const fmtShape = (s: Shape): string => `[${s.join(', ')}]`;

/** Wraps a possibly negative dim into [0, ndim); scalars accept dims -1 and 0 as PyTorch does. */
export function normDim(op: string, dim: number, ndim: number): number {
  const n = Math.max(ndim, 1);
  if (typeof dim !== 'number') throw new ValueError(op, `${op}(): argument 'dim' must be int, not ${pyTypeName(dim)} ${JSON.stringify(dim) ?? String(dim)}`);
  if (!Number.isInteger(dim) || dim < -n || dim >= n) {
    throw new IndexError(op, `Dimension out of range (expected to be in range of [${-n}, ${n - 1}], but got ${dim})`);
  }
  return dim < 0 ? dim + n : dim;
}

/** Python's name for a JS value's type, for argument errors. */
const pyTypeName = (v: unknown): string => (typeof v === 'string' ? 'str' : typeof v === 'boolean' ? 'bool' : v === null ? 'None' : typeof v);

export function normDims(op: string, dims: number | readonly number[] | null | undefined, ndim: number): number[] {
  if (dims === null || dims === undefined) return [...Array(ndim).keys()];
  if (typeof dims !== 'number' && !Array.isArray(dims)) {
    throw new ValueError(op, `${op}(): argument 'dim' must be int or tuple of ints, not ${pyTypeName(dims)} ${JSON.stringify(dims) ?? String(dims)}`);
  }
  const list = typeof dims === 'number' ? [dims] : dims;
  const out = list.map((d) => normDim(op, d, ndim)).filter((d) => d < ndim || ndim > 0);
  if (new Set(out).size !== out.length) throw new ValueError(op, `dim ${out.join(', ')} appears multiple times in the list of dims`);
  return ndim === 0 ? [] : out;
}

export function broadcastShapes(op: string, ...shapes: Shape[]): number[] {
  // fast path: all shapes equal (the common case)
  const s0 = shapes[0];
  if (s0 && shapes.every((s) => s === s0 || (s.length === s0.length && s.every((d, i) => d === s0[i])))) return [...s0];
  const nd = Math.max(0, ...shapes.map((s) => s.length));
  const out = new Array<number>(nd).fill(1);
  for (const s of shapes) {
    for (let i = 0; i < s.length; i++) {
      const j = nd - s.length + i, d = s[i]!, o = out[j]!;
      if (d === o || d === 1) continue;
      if (o === 1) { out[j] = d; continue; }
      throw new ShapeError(op, `The size of tensor a (${o}) must match the size of tensor b (${d}) at non-singleton dimension ${i}; shapes ${shapes.map(fmtShape).join(' and ')}`);
    }
  }
  return out;
}

/** Strides that read a tensor of (shape, strides) as if broadcast to `target` (0 on broadcast dims). */
export function broadcastStrides(shape: Shape, strides: readonly number[], target: Shape): number[] {
  const nd = target.length, off = nd - shape.length;
  const out: number[] = [];
  for (let i = 0; i < nd; i++) out.push(0); // packed, as the elementwise runner's other stride arrays
  for (let i = 0; i < shape.length; i++) out[off + i] = shape[i] === 1 && target[off + i] !== 1 ? 0 : strides[i]!;
  return out;
}

export function isContiguous(shape: Shape, strides: readonly number[]): boolean {
  let acc = 1;
  for (let i = shape.length - 1; i >= 0; i--) {
    if (shape[i] === 1) continue;
    if (strides[i] !== acc) return false;
    acc *= shape[i]!;
  }
  return true;
}

/**
 * Checks a size argument given by a user (creation ops, new_* methods, random ops): an array of
 * non-negative safe integers whose product is a safe integer. The one place these rules live, so every
 * creation op refuses NaN, fractions, negatives and overflowing products with the same message.
 */
export function checkShape(op: string, shape: unknown): number[] {
  if (!Array.isArray(shape)) throw new ValueError(op, `size must be a sequence of integers, got ${describeArg(shape)}`);
  let numel = 1;
  for (const d of shape) {
    if (typeof d !== 'number' || !Number.isSafeInteger(d) || d < 0) {
      throw new ValueError(op, `${typeof d === 'number' && d < 0 ? 'negative' : 'invalid'} dimension ${describeArg(d)} in size ${fmtArgList(shape)}: sizes must be non-negative integers`);
    }
    numel *= d;
  }
  if (!Number.isSafeInteger(numel)) {
    throw new ValueError(op, `Storage size calculation overflowed with sizes=${fmtShape(shape as number[])} (${numel.toExponential(3)} elements is more than 2^53)`);
  }
  return [...shape as number[]];
}

/** Checks an integer argument (an index, a length, a step, a count): a safe integer, never a fraction, NaN or Infinity. */
export function checkInt(op: string, name: string, v: unknown): number {
  if (typeof v !== 'number' || !Number.isSafeInteger(v)) {
    throw new ValueError(op, `argument '${name}' must be an integer, got ${describeArg(v)}`);
  }
  return v;
}

/** A short, unambiguous rendering of an argument for an error message (strings quoted, NaN as NaN). */
export function describeArg(v: unknown): string {
  if (typeof v === 'string') return JSON.stringify(v);
  if (typeof v === 'number' || typeof v === 'bigint' || typeof v === 'boolean' || v === null || v === undefined) return String(v);
  if (Array.isArray(v)) return fmtArgList(v);
  return typeof v;
}
const fmtArgList = (a: readonly unknown[]): string => `[${a.slice(0, 8).map(describeArg).join(', ')}${a.length > 8 ? ', ...' : ''}]`;

/**
 * Strides for viewing (shape, strides) as `newShape` without copying, or null when the layout does not
 * allow it (PyTorch's computeStride): `view` throws then, `reshape` copies.
 */
export function viewStrides(oldShape: Shape, oldStrides: readonly number[], newShape: Shape): number[] | null {
  const numel = numelOf(oldShape);
  const newStrides = new Array<number>(newShape.length).fill(0);
  if (numel === 0 || oldShape.length === 0) return contiguousStrides(newShape); // empty or 0-d: any layout works
  let viewD = newShape.length - 1;
  let chunkBase = oldStrides[oldStrides.length - 1] ?? 1;
  let tensorNumel = 1, viewNumel = 1;
  for (let d = oldShape.length - 1; d >= 0; d--) {
    tensorNumel *= oldShape[d]!;
    if (d === 0 || (oldShape[d - 1] !== 1 && oldStrides[d - 1] !== tensorNumel * chunkBase)) {
      while (viewD >= 0 && (viewNumel < tensorNumel || newShape[viewD] === 1)) {
        newStrides[viewD] = viewNumel * chunkBase;
        viewNumel *= newShape[viewD]!;
        viewD--;
      }
      if (viewNumel !== tensorNumel) return null;
      if (d > 0) { chunkBase = oldStrides[d - 1]!; tensorNumel = 1; viewNumel = 1; }
    }
  }
  if (viewD !== -1) return null;
  return newStrides;
}

/** Resolves a single -1 in a requested shape. */
export function inferShape(op: string, shape: readonly number[], numel: number): number[] {
  let infer = -1, known = 1;
  shape.forEach((d, i) => {
    if (d === -1) {
      if (infer >= 0) throw new ShapeError(op, 'only one dimension can be inferred');
      infer = i;
    } else if (!Number.isInteger(d) || d < 0) throw new ShapeError(op, `invalid shape dimension ${d}`);
    else known *= d;
  });
  const out = [...shape];
  if (infer >= 0) {
    if (known === 0 || numel % known !== 0) throw new ShapeError(op, `shape '${fmtShape(shape)}' is invalid for input of size ${numel}`);
    out[infer] = numel / known;
  } else if (known !== numel) throw new ShapeError(op, `shape '${fmtShape(shape)}' is invalid for input of size ${numel}`);
  return out;
}

/** Merges adjacent dims that every operand walks contiguously relative to each other. */
export function coalesce(shape: readonly number[], strides: number[][]): { shape: number[]; strides: number[][] } {
  const nd = shape.length;
  if (nd === 0) return { shape: [], strides: strides.map(() => []) };
  const outShape = [shape[0]!];
  const outStrides = strides.map((s) => [s[0]!]);
  for (let d = 1; d < nd; d++) {
    const sz = shape[d]!;
    const last = outShape.length - 1;
    const can = strides.every((s, k) => outStrides[k]![last] === s[d]! * sz) || outShape[last] === 1;
    if (sz === 1) continue;
    if (can && outShape[last] !== 1) {
      outShape[last] = outShape[last]! * sz;
      strides.forEach((s, k) => { outStrides[k]![last] = s[d]!; });
    } else if (outShape[last] === 1) {
      outShape[last] = sz;
      strides.forEach((s, k) => { outStrides[k]![last] = s[d]!; });
    } else {
      outShape.push(sz);
      strides.forEach((s, k) => outStrides[k]!.push(s[d]!));
    }
  }
  return { shape: outShape, strides: outStrides };
}
