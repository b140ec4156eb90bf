// Operation family: indexing. The op layer checks dtypes and shapes (with PyTorch's messages), builds
// strided views and allocates; three device kernels do the data movement (contract: src/kernels/indexing.ts):
//   'gather'  — gather, take_along_dim, take, index_select, embedding, repeat_interleave (a stride-0
//               index view turns index_select into a gather);
//   'scatter' — scatter (src or value, reduce), scatter_add, scatter_reduce, index_add, index_copy,
//               index_fill, index_put (on the linear index of the indexed dims), one_hot;
//   'nonzero' / 'masked_select' / 'masked_scatter' for the data-dependent shapes, plus 'linear_index'.
// Kernels check index values (out of range → IndexError naming the op, the value, the dim and its size).
// Outputs are fresh tensors; the input is never modified (the in-place variants are not provided).

import { Tensor } from '../tensor/tensor.js';
import type { Device, StridedRef } from '../backend/backend.js';
import { kernel } from '../kernels/registry.js';
import { DTYPES, type DTypeName } from '../dtype/dtypes.js';
import { DTypeError, IndexError, ShapeError, UnsupportedError, ValueError } from '../errors.js';
import { broadcastShapes, broadcastStrides, contiguousStrides, fmtShape, normDim, numelOf } from '../tensor/shape.js';
import { def, isScalarLike, scalarOf, type ScalarLike } from './registry.js';
import { deviceOf, describe, setNonzeroTuple } from './elementwise.js';
import { count_nonzero } from './reduce.js';
import { asTensor, copyRef, flat1, scalarTensor, toInt } from './shape.js';
import type { ScatterMode } from '../kernels/indexing.js';
import { torchTypeName as tname } from './torch_names.js';

// eslint-disable-next-line @typescript-eslint/no-explicit-any
type Fn = (...args: any[]) => any;

// ---- helpers ---------------------------------------------------------------------------------------


/** Checks an index tensor's dtype: int64, or int32 too where PyTorch allows it. */
function indexDType(op: string, idx: Tensor, allowInt32: boolean, message?: string): void {
  if (idx.dt === 'int64' || (allowInt32 && idx.dt === 'int32')) return;
  throw new DTypeError(op, message ?? `${op}(): Expected dtype ${allowInt32 ? 'int32 or int64' : 'int64'} for index, but got ${idx.dt}`);
}

/** A ref with at least one dim: PyTorch treats 0-d and one-element 1-d alike in gather/scatter. */
const atLeast1 = (r: StridedRef): StridedRef => (r.shape.length ? r : { ...r, shape: [1], strides: [1] });
const ndim1 = (t: Tensor): number => Math.max(t.ndim, 1);
const shape1 = (t: Tensor): readonly number[] => (t.ndim ? t.shape : [1]);

/** The index of index_select-like ops (1-D, along `dim`) as a view of `shape`: stride 0 elsewhere. */
function alongDim(idx: Tensor, dim: number, shape: readonly number[]): StridedRef {
  const r = idx.ref();
  const s = idx.ndim ? r.strides[0]! : 0;
  return { ...r, shape, strides: shape.map((_, k) => (k === dim ? s : 0)) };
}

function vectorIndex(op: string, idx: unknown, allowInt32: boolean, name = 'index'): Tensor {
  const t = asTensor(op, idx, name);
  indexDType(op, t, allowInt32);
  if (t.ndim > 1) throw new IndexError(op, `${op}(): Index is supposed to be a vector`);
  return t;
}

/** Scalar arguments may come as JS values, Scalars or 0-d tensors. */
function scalarArg(op: string, v: unknown, name: string): ScalarLike {
  if (v instanceof Tensor) {
    if (v.ndim !== 0) throw new ValueError(op, `${op}(): argument '${name}' must be a scalar or a 0-dim tensor, got a ${v.ndim}-dim tensor`);
    return v.item() as ScalarLike;
  }
  if (!isScalarLike(v)) throw new ValueError(op, `${op}(): argument '${name}' must be a Number, not ${describe(v)}`);
  return v;
}

/** A stride-0 view of a one-element tensor holding `v`, shaped `shape`. */
function scalarRef(op: string, v: ScalarLike, dtype: DTypeName, device: Device, shape: readonly number[]): [StridedRef, Tensor] {
  const t = scalarTensor(op, v, dtype, device);
  return [{ ...t.ref(), shape, strides: shape.map(() => 0) }, t];
}

/** A fresh contiguous copy of x: the output of every scatter-like op. */
function cloneOf(op: string, x: Tensor): Tensor {
  const out = Tensor.empty(x.shape, x.dt, x.device);
  copyRef(op, x.device, x.ref(), out.ref());
  return out;
}

function noComplexReduce(op: string, x: Tensor): void {
  if (DTYPES[x.dt].kind === 'complex' || DTYPES[x.dt].storageOnly) throw new DTypeError(op, `"${op}" is not implemented for '${x.dt}'`);
}

// ---- gather family -------------------------------------------------------------------------------

function gatherImpl(op: string, x: Tensor, dimArg: unknown, index: Tensor): Tensor {
  const d = normDim(op, toInt(op, dimArg, 'dim'), x.ndim);
  deviceOf(op, [x, index]);
  if (ndim1(index) !== ndim1(x)) throw new ShapeError(op, 'Index tensor must have the same number of dimensions as input tensor');
  const xs = shape1(x), is = shape1(index);
  for (let k = 0; k < is.length; k++) {
    if (k !== d && is[k]! > xs[k]!) {
      throw new ShapeError(op, `Size does not match at dimension ${k} expected index ${fmtShape(index.shape)} to be smaller than self ${fmtShape(x.shape)} apart from dimension ${d}`);
    }
  }
  const out = Tensor.empty(index.shape, x.dt, x.device);
  if (out.numel() > 0) kernel('gather', x.device, op)(atLeast1(x.ref()), d, atLeast1(index.ref()), atLeast1(out.ref()), op, false);
  return out;
}

export const gather = def('gather(input, dim, index, *, sparse_grad=False)', (a) => {
  const index = asTensor('gather', a.index, 'index');
  indexDType('gather', index, false, 'gather(): Expected dtype int64 for index');
  return gatherImpl('gather', asTensor('gather', a.input), a.dim, index);
});

export const take_along_dim = def('take_along_dim(input, indices, dim=None)', (a) => {
  const op = 'take_along_dim';
  const x = asTensor(op, a.input), idx = asTensor(op, a.indices, 'indices');
  if (idx.dt !== 'int64') throw new DTypeError(op, `torch.take_along_dim(): dtype of indices should be Long but got ${tname(idx.dt)}`);
  if (a.dim === null) {
    const fx = flat1(x), fi = flat1(idx);
    return gatherImpl(op, fx, 0, fi);
  }
  if (x.ndim !== idx.ndim) {
    throw new ShapeError(op, `torch.take_along_dim(): input and indices should have the same number of dimensions, but got ${x.ndim} dimensions for input, and ${idx.ndim} dimensions for indices`);
  }
  const d = normDim(op, toInt(op, a.dim, 'dim'), x.ndim);
  // Broadcast every dim but `dim` (as PyTorch: each side keeps its own size there).
  const xs = [...x.shape], is = [...idx.shape];
  xs[d] = idx.shape[d] ?? 1;
  const ib = broadcastShapes(op, xs, idx.shape);
  is[d] = x.shape[d] ?? 1;
  const xb = broadcastShapes(op, is, x.shape);
  return gatherImpl(op, x.expand(xb), d, idx.expand(ib));
});

export const take = def('take(input, index)', (a) => {
  const op = 'take';
  const x = asTensor(op, a.input), idx = asTensor(op, a.index, 'index');
  if (idx.dt !== 'int64') throw new DTypeError(op, `take(): Expected a long tensor for index, but got ${tname(idx.dt)}`);
  deviceOf(op, [x, idx]);
  const out = Tensor.empty(idx.shape, x.dt, x.device);
  if (out.numel() === 0) return out;
  if (x.numel() === 0) throw new IndexError(op, 'take(): tried to take from an empty tensor');
  const flat = flat1(x), fi = flat1(idx);
  kernel('gather', x.device, op)(flat.ref(), 0, fi.ref(), { ...out.ref(), shape: [out.numel()], strides: [1] }, op, true);
  return out;
});

function indexSelectImpl(op: string, x: Tensor, dimArg: unknown, idx: Tensor): Tensor {
  deviceOf(op, [x, idx]);
  const d = normDim(op, toInt(op, dimArg, 'dim'), x.ndim);
  const shape = [...shape1(x)];
  shape[d] = idx.numel();
  if (x.ndim === 0 && idx.numel() !== 1) throw new IndexError(op, `${op}(): Index to scalar can have only 1 value, got ${idx.numel()} value(s)`);
  const out = Tensor.empty(x.ndim ? shape : [], x.dt, x.device);
  if (out.numel() > 0) kernel('gather', x.device, op)(atLeast1(x.ref()), d, alongDim(idx, d, shape), { ...out.ref(), shape, strides: contiguousStrides(shape) }, op, false);
  return out;
}

export const index_select = def('index_select(input, dim, index)', (a) =>
  indexSelectImpl('index_select', asTensor('index_select', a.input), a.dim, vectorIndex('index_select', a.index, true)));

export const embedding = def('nn.functional.embedding(input, weight, padding_idx=None, max_norm=None, norm_type=2.0, scale_grad_by_freq=False, sparse=False)', (a) => {
  const op = 'nn.functional.embedding';
  const ids = asTensor(op, a.input), w = asTensor(op, a.weight, 'weight');
  if (a.max_norm !== null) {
    throw new UnsupportedError(op, 'max_norm is not supported: PyTorch renormalizes the weight rows in place; renormalize the weight once beforehand instead');
  }
  if (w.ndim !== 2) throw new ShapeError(op, "'weight' must be 2-D");
  if (ids.dt !== 'int64' && ids.dt !== 'int32') {
    throw new DTypeError(op, `Expected tensor for argument #1 'indices' to have one of the following scalar types: Long, Int; but got ${ids.dt} instead (while checking arguments for embedding)`);
  }
  if (a.padding_idx !== null) {
    const p = toInt(op, a.padding_idx, 'padding_idx');
    if (p >= w.shape[0]! || p < -w.shape[0]!) throw new ValueError(op, 'Padding_idx must be within num_embeddings');
  }
  const flat = flat1(ids);
  const rows = indexSelectImpl(op, w, 0, flat);
  return rows.view([...ids.shape, w.shape[1]!]);
});

export const repeat_interleave = def('repeat_interleave(input, repeats=None, dim=None, *, output_size=None)', (a) => {
  const op = 'repeat_interleave';
  let x = asTensor(op, a.input);
  let reps = a.repeats as unknown;
  if (reps === null) {
    // repeat_interleave(repeats): the indices 0..n-1, each repeated repeats[i] times.
    if (x.ndim !== 1 || (x.dt !== 'int64' && x.dt !== 'int32')) throw new ValueError(op, 'repeat_interleave(repeats): repeats must be a 1-D int64 or int32 tensor');
    reps = x;
    x = Tensor.fromStorage(BigInt64Array.from({ length: x.shape[0]! }, (_, i) => BigInt(i)), 'int64', [x.shape[0]!], x.device);
  }
  let d: number;
  if (a.dim === null) { x = flat1(x); d = 0; } else d = normDim(op, toInt(op, a.dim, 'dim'), x.ndim);
  if (x.ndim === 0) x = x.reshape([1]);
  const n = x.shape[d]!;
  let counts: number[] | null = null;
  let uniform: number;
  if (reps instanceof Tensor) {
    if (reps.dt !== 'int64' && reps.dt !== 'int32') throw new DTypeError(op, `repeats has to be Long or Int tensor, got ${reps.dt}`);
    if (reps.ndim > 1) throw new ShapeError(op, 'repeats must be 0-dim or 1-dim tensor');
    const vals = (reps.ndim === 0 ? [reps.item()] : (reps.tolist() as unknown[])).map(Number);
    if (vals.some((v) => v < 0)) throw new ValueError(op, 'repeats can not be negative');
    if (vals.length === 1) uniform = vals[0]!;
    else {
      if (vals.length !== n) throw new ShapeError(op, `repeats must have the same size as input along dim, but got repeats.size(0) = ${vals.length} and input.size(${d}) = ${n}`);
      counts = vals;
      uniform = 0;
    }
  } else {
    uniform = toInt(op, reps, 'repeats');
    if (uniform < 0) throw new ValueError(op, 'repeats can not be negative');
  }
  const total = counts ? counts.reduce((p, q) => p + q, 0) : n * uniform;
  if (a.output_size !== null && toInt(op, a.output_size, 'output_size') !== total) {
    throw new ValueError(op, `allocated size does not match required size: output_size=${String(a.output_size)}, but the repeats sum to ${total}`);
  }
  if (counts) {
    const idx = new BigInt64Array(total);
    let w = 0;
    counts.forEach((c, i) => { for (let k = 0; k < c; k++) idx[w++] = BigInt(i); });
    const it = Tensor.fromStorage(idx, 'int64', [total], x.device);
    const r = indexSelectImpl(op, x, d, it);
    it.dispose();
    return r;
  }
  // A uniform count: copy x viewed as [..., n, r (stride 0), ...] into the output.
  const shape = [...x.shape];
  shape[d] = total;
  const out = Tensor.empty(shape, x.dt, x.device);
  const xr = x.ref();
  const srcShape = [...x.shape.slice(0, d + 1), uniform, ...x.shape.slice(d + 1)];
  const src: StridedRef = { ...xr, shape: srcShape, strides: [...xr.strides.slice(0, d + 1), 0, ...xr.strides.slice(d + 1)] };
  copyRef(op, x.device, src, { ...out.ref(), shape: srcShape, strides: contiguousStrides(srcShape) });
  return out;
});

// ---- scatter family ------------------------------------------------------------------------------

/** Shared checks and the kernel call for every dim-based scatter; returns a fresh result. */
function scatterImpl(op: string, x: Tensor, dimArg: unknown, index: Tensor, src: Tensor | ScalarLike, mode: ScatterMode,
  includeSelf = true): Tensor {
  const d = normDim(op, toInt(op, dimArg, 'dim'), x.ndim);
  indexDType(op, index, false, `${op}(): Expected dtype int64 for index`);
  if (mode !== 'none') noComplexReduce(op, x);
  deviceOf(op, [x, index, src]);
  if (ndim1(index) !== ndim1(x)) throw new ShapeError(op, 'Index tensor must have the same number of dimensions as self tensor');
  const xs = shape1(x), is = shape1(index);
  if (src instanceof Tensor) {
    if (src.dt !== x.dt) throw new DTypeError(op, `${op}(): Expected self.dtype to be equal to src.dtype`);
    if (ndim1(src) !== ndim1(x)) throw new ShapeError(op, 'Index tensor must have the same number of dimensions as src tensor');
  }
  const ss = src instanceof Tensor ? shape1(src) : null;
  for (let k = 0; k < is.length; k++) {
    if ((k !== d && is[k]! > xs[k]!) || (ss && is[k]! > ss[k]!)) {
      throw new ShapeError(op, `Expected index ${fmtShape(index.shape)} to be smaller than self ${fmtShape(x.shape)} apart from dimension ${d}${ss ? ` and to be smaller size than src ${fmtShape(src instanceof Tensor ? src.shape : [])}` : ''}`);
    }
  }
  const out = cloneOf(op, x);
  if (index.numel() === 0) return out;
  let hold: Tensor | undefined, sref: StridedRef;
  if (src instanceof Tensor) sref = { ...atLeast1(src.ref()), shape: is };
  else [sref, hold] = scalarRef(op, src, x.dt, x.device, is);
  kernel('scatter', x.device, op)(atLeast1(out.ref()), d, atLeast1(index.ref()), sref, mode, { op, includeSelf });
  hold?.dispose();
  return out;
}

export const scatter = def('scatter(input, dim, index, src=None, *, value=None, reduce=None)', (a) => {
  const op = 'scatter';
  const x = asTensor(op, a.input), index = asTensor(op, a.index, 'index');
  let src: Tensor | ScalarLike;
  if (a.src instanceof Tensor) src = a.src;
  else if (a.src !== null) src = scalarArg(op, a.src, 'value');
  else if (a.value !== null) src = scalarArg(op, a.value, 'value');
  else throw new ValueError(op, 'scatter() needs a src tensor or a value');
  const modes: Record<string, ScatterMode> = { add: 'sum', multiply: 'prod' };
  if (a.reduce !== null && !(a.reduce as string in modes)) throw new ValueError(op, 'reduce argument must be either add or multiply.');
  return scatterImpl(op, x, a.dim, index, src, a.reduce === null ? 'none' : modes[a.reduce as string]!);
});

export const scatter_add = def('scatter_add(input, dim, index, src)', (a) =>
  scatterImpl('scatter_add', asTensor('scatter_add', a.input), a.dim, asTensor('scatter_add', a.index, 'index'), asTensor('scatter_add', a.src, 'src'), 'sum'));

export const scatter_reduce = def('scatter_reduce(input, dim, index, src, reduce, *, include_self=True)', (a) => {
  const op = 'scatter_reduce';
  const red = a.reduce as string;
  if (!['sum', 'prod', 'mean', 'amax', 'amin'].includes(red)) throw new ValueError(op, `reduce argument must be either sum, prod, mean, amax or amin, got ${red}`);
  return scatterImpl(op, asTensor(op, a.input), a.dim, asTensor(op, a.index, 'index'), asTensor(op, a.src, 'src'), red as ScatterMode, Boolean(a.include_self));
});

/** index_add / index_copy / index_fill: a scatter along `dim` whose index is a vector (stride 0 elsewhere). */
function indexScatter(op: string, x: Tensor, dimArg: unknown, idx: Tensor, src: Tensor | ScalarLike, mode: ScatterMode,
  alpha?: number | bigint, wrap = false, into: Tensor | null = null): Tensor {
  const d = normDim(op, toInt(op, dimArg, 'dim'), x.ndim);
  deviceOf(op, [x, idx, src]);
  const shape = [...shape1(x)];
  shape[d] = idx.numel();
  if (src instanceof Tensor) {
    if (src.dt !== x.dt) throw new DTypeError(op, `${op}_(): self (${tname(x.dt)}) and source (${tname(src.dt)}) must have the same scalar type`);
    const srcD = src.ndim === 0 ? 1 : src.shape[d];
    if (srcD !== idx.numel()) throw new ShapeError(op, `${op}_(): Number of indices (${idx.numel()}) should be equal to source.size(dim) (${srcD})`);
    const sh = shape1(src);
    if (sh.length !== shape.length || sh.some((s, k) => k !== d && s !== shape[k])) {
      throw new ShapeError(op, `source tensor shape must match self tensor shape, excluding the specified dimension. Got self.shape = ${fmtShape(x.shape)} source.shape = ${fmtShape(src.shape)}`);
    }
  }
  const out = into ?? cloneOf(op, x);
  if (numelOf(shape) === 0) return out;
  let hold: Tensor | undefined, sref: StridedRef;
  if (src instanceof Tensor) sref = { ...atLeast1(src.ref()), shape };
  else [sref, hold] = scalarRef(op, src, x.dt, x.device, shape);
  kernel('scatter', x.device, op)(atLeast1(out.ref()), d, alongDim(idx, d, shape), sref, mode, { op, alpha, wrap });
  hold?.dispose();
  return out;
}

export const index_add = def('index_add(input, dim, index, source, *, alpha=1)', (a) => {
  const op = 'index_add';
  const x = asTensor(op, a.input);
  noComplexReduce(op, x);
  const al = scalarOf(scalarArg(op, a.alpha, 'alpha'));
  const isInt = DTYPES[x.dt].kind === 'int' || x.dt === 'bool';
  if (isInt && al.kind === 'float') throw new DTypeError(op, 'For integral input tensors, argument alpha must not be a floating point number.');
  const alpha = x.dt === 'int64' ? BigInt(typeof al.value === 'boolean' ? Number(al.value) : al.value) : Number(al.value);
  return indexScatter(op, x, a.dim, vectorIndex(op, a.index, true), asTensor(op, a.source, 'source'), 'sum', alpha);
});

export const index_copy = def('index_copy(input, dim, index, source)', (a) => {
  const op = 'index_copy';
  return indexScatter(op, asTensor(op, a.input), a.dim, vectorIndex(op, a.index, false), asTensor(op, a.source, 'source'), 'none');
});

/**
 * self.index_copy_(dim, index, source) written straight into self's elements (one scatter; the generic
 * in-place path would copy self twice): a KV cache written at positions held on the device. Callers
 * ensure source does not share self's storage (then the result equals out-of-place + copy back).
 */
export function index_copy_into(self: Tensor, dim: number, index: Tensor, source: Tensor): Tensor {
  const op = 'index_copy_';
  return indexScatter(op, self, dim, vectorIndex(op, index, false), source, 'none', undefined, false, self);
}

export const index_fill = def('index_fill(input, dim, index, value)', (a) => {
  const op = 'index_fill';
  const x = asTensor(op, a.input);
  return indexScatter(op, x, a.dim, vectorIndex(op, a.index, false), scalarArg(op, a.value, 'value'), 'none', undefined, true);
});

export const index_put = def('index_put(input, indices, values, accumulate=False)', (a) => {
  const op = 'index_put';
  const x = asTensor(op, a.input);
  if (!Array.isArray(a.indices)) throw new ValueError(op, `index_put(): argument 'indices' must be tuple of Tensors, not ${describe(a.indices)}`);
  let values: Tensor;
  if (a.values instanceof Tensor) values = a.values;
  else values = scalarTensor(op, scalarArg(op, a.values, 'values'), x.dt, x.device);
  if (values.dt !== x.dt) {
    throw new DTypeError(op, `Index put requires the source and destination dtypes match, got ${tname(x.dt)} for the destination and ${tname(values.dt)} for the source.`);
  }
  const accumulate = Boolean(a.accumulate);
  if (accumulate) noComplexReduce(op, x);
  deviceOf(op, [x, values, ...(a.indices as unknown[])]);
  // One long index per indexed dim: bool/uint8 masks become their nonzero coordinates.
  const perDim: (Tensor | null)[] = [];
  for (const [i, t] of (a.indices as unknown[]).entries()) {
    if (t === null || t === undefined) { perDim.push(null); continue; }
    const idx = asTensor(op, t, `indices[${i}]`);
    if (idx.dt === 'bool' || idx.dt === 'uint8') {
      const at = perDim.length;
      if (at + idx.ndim > x.ndim || idx.shape.some((s, k) => s !== x.shape[at + k])) {
        throw new IndexError(op, `The shape of the mask ${fmtShape(idx.shape)} at index ${i} does not match the shape of the indexed tensor ${fmtShape(x.shape)} at index ${at}`);
      }
      if (idx.ndim === 0) throw new UnsupportedError(op, 'a 0-dim boolean index is not supported');
      const nz = nonzeroImpl(op, idx);
      for (let k = 0; k < idx.ndim; k++) perDim.push(nz.select(1, k));
      continue;
    }
    if (idx.dt !== 'int64' && idx.dt !== 'int32') throw new IndexError(op, `tensors used as indices must be long, int, byte or bool tensors, got ${idx.dt}`);
    perDim.push(idx);
  }
  if (perDim.length > x.ndim) throw new IndexError(op, `too many indices for tensor of dimension ${x.ndim} (got ${perDim.length})`);
  while (perDim.length < x.ndim) perDim.push(null);
  const D = perDim.flatMap((t, k) => (t ? [k] : []));
  const rest = perDim.flatMap((t, k) => (t ? [] : [k]));
  if (D.length === 0) {
    // No index tensors: the whole tensor is the indexed result.
    const v = values.expand(x.shape as number[]);
    return accumulate ? indexScatterAll(op, x, v) : (() => { const o = cloneOf(op, x); copyRef(op, x.device, v.ref(), o.ref()); return o; })();
  }
  const idxs = D.map((k) => perDim[k]!);
  const B = broadcastShapes(op, ...idxs.map((t) => t.shape));
  const adjacent = D[D.length - 1]! - D[0]! === D.length - 1;
  const restShape = rest.map((k) => x.shape[k]!);
  const resShape = adjacent
    ? [...x.shape.slice(0, D[0]), ...B, ...x.shape.slice(D[D.length - 1]! + 1)]
    : [...B, ...restShape];
  let v: Tensor;
  try { v = values.expand(resShape); } catch {
    throw new ShapeError(op, `shape mismatch: value tensor of shape ${fmtShape(values.shape)} cannot be broadcast to indexing result of shape ${fmtShape(resShape)}`);
  }
  if (adjacent && D[0]! > 0) v = v.movedim(B.map((_, k) => D[0]! + k), B.map((_, k) => k)); // B dims first
  // Work in a copy laid out [indexed dims..., other dims...]: the indexed dims then merge into one.
  const perm = [...D, ...rest];
  const identity = perm.every((p, k) => p === k);
  const xp = x.permute(perm);
  const work = cloneOf(op, xp);
  const P = numelOf(D.map((k) => x.shape[k]!)), nB = numelOf(B);
  const lin = Tensor.empty(B, 'int64', x.device);
  if (nB > 0 && P === 0) {
    throw new IndexError(op, `index is out of bounds for dimension ${D[0]} with size 0`);
  }
  if (nB > 0) {
    kernel('linear_index', x.device, op)(idxs.map((t) => ({ ...t.ref(), shape: B, strides: broadcastStrides(t.shape, t.strides, B) })),
      D.map((k) => x.shape[k]!), lin.ref(), op, D);
    const wshape = [P, ...restShape];
    const vflat = v.reshape([nB, ...restShape]);
    const ishape = [nB, ...restShape];
    kernel('scatter', x.device, op)({ ...work.ref(), shape: wshape, strides: contiguousStrides(wshape) }, 0,
      { ...lin.ref(), shape: ishape, strides: ishape.map((_, k) => (k === 0 ? 1 : 0)) }, vflat.ref(), accumulate ? 'sum' : 'none', { op });
    if (vflat !== v) vflat.dispose();
  }
  lin.dispose();
  if (identity) return work;
  const inv = perm.map((_, k) => perm.indexOf(k));
  const back = work.permute(inv);
  const out = cloneOf(op, back);
  work.dispose();
  return out;
});

/** x + v over the whole tensor, exact for ints (index_put with accumulate and no index tensors). */
function indexScatterAll(op: string, x: Tensor, v: Tensor): Tensor {
  const out = cloneOf(op, x);
  if (out.numel() === 0) return out;
  const shape = [1, out.numel()];
  const vv = v.contiguous();
  const [zero, hold] = scalarRef(op, 0, 'int64', x.device, shape);
  kernel('scatter', x.device, op)({ ...out.ref(), shape, strides: [out.numel(), 1] }, 0, zero, { ...vv.ref(), shape, strides: [out.numel(), 1] }, 'sum', { op });
  hold.dispose();
  if (vv !== v) vv.dispose();
  return out;
}

// ---- data-dependent shapes ------------------------------------------------------------------------

/** Number of non-zero elements, read back (the output shape depends on it). */
const countNonzero = (t: Tensor): number => {
  if (t.numel() === 0) return 0;
  const c = count_nonzero(t) as Tensor;
  const n = Number(c.item());
  c.dispose();
  return n;
};

function nonzeroImpl(op: string, x: Tensor): Tensor {
  const n = countNonzero(x);
  const out = Tensor.empty([n, x.ndim], 'int64', x.device);
  if (n > 0 && x.ndim > 0) kernel('nonzero', x.device, op)(x.ref(), out.ref());
  return out;
}

export const nonzero = def('nonzero(input, *, as_tuple=False)', (a) => {
  const x = asTensor('nonzero', a.input);
  const nz = nonzeroImpl('nonzero', x);
  if (!a.as_tuple) return nz;
  if (x.ndim === 0) { const n = nz.shape[0]!; nz.dispose(); return [Tensor.empty([n], 'int64', x.device, true)]; }
  return [...Array(x.ndim).keys()].map((k) => cloneOf('nonzero', nz.select(1, k)));
});
export const argwhere = def('argwhere(input)', (a) => nonzeroImpl('argwhere', asTensor('argwhere', a.input)));
setNonzeroTuple((t) => nonzero(t, { as_tuple: true }) as Tensor[]);

/** Mask and input broadcast together; the count of set positions in the broadcast mask. */
function broadcastMask(op: string, x: Tensor, mask: Tensor): { shape: number[]; count: number } {
  const shape = broadcastShapes(op, x.shape, mask.shape);
  const count = mask.numel() === 0 ? 0 : countNonzero(mask) * (numelOf(shape) / mask.numel());
  return { shape, count };
}

export const masked_select = def('masked_select(input, mask)', (a) => {
  const op = 'masked_select';
  const x = asTensor(op, a.input), mask = asTensor(op, a.mask, 'mask');
  if (mask.dt !== 'bool') throw new DTypeError(op, `masked_select: expected BoolTensor for mask, got ${mask.dt}`);
  deviceOf(op, [x, mask]);
  const { shape, count } = broadcastMask(op, x, mask);
  const out = Tensor.empty([count], x.dt, x.device);
  if (count > 0) kernel('masked_select', x.device, op)(x.expand(shape).ref(), mask.expand(shape).ref(), out.ref());
  return out;
});

export const masked_scatter = def('masked_scatter(input, mask, source)', (a) => {
  const op = 'masked_scatter';
  const x = asTensor(op, a.input), mask = asTensor(op, a.mask, 'mask'), source = asTensor(op, a.source, 'source');
  if (mask.dt !== 'bool') throw new DTypeError(op, `masked_scatter_ only supports boolean masks, but got mask with dtype ${mask.dt}`);
  if (source.dt !== x.dt) throw new DTypeError(op, `masked_scatter: expected self and source to have same dtypes but got ${x.dt} and ${source.dt}`);
  deviceOf(op, [x, mask, source]);
  const { shape, count } = broadcastMask(op, x, mask);
  if (source.numel() < count) throw new ShapeError(op, `Number of elements of source < number of ones in mask (${source.numel()} < ${count})`);
  const out = cloneOf(op, x.expand(shape));
  if (count > 0) {
    const src = source.contiguous();
    kernel('masked_scatter', x.device, op)(out.ref(), mask.expand(shape).ref(), src.ref());
    if (src !== source) src.dispose();
  }
  return out;
});

export const one_hot = def('nn.functional.one_hot(tensor, num_classes=-1)', (a) => {
  const op = 'nn.functional.one_hot';
  const x = asTensor(op, a.tensor, 'tensor');
  if (x.dt !== 'int64') throw new DTypeError(op, 'one_hot is only applicable to index tensor of type LongTensor.');
  let n = toInt(op, a.num_classes, 'num_classes');
  const vals = x.numel() ? (x.dataSync() as BigInt64Array) : new BigInt64Array(0);
  let lo = Infinity, hi = -Infinity;
  for (const v of vals) { const f = Number(v); if (f < lo) lo = f; if (f > hi) hi = f; }
  if (n === -1) {
    if (x.numel() === 0) throw new ValueError(op, 'Can not infer total number of classes from empty tensor.');
    n = hi + 1;
  }
  if (x.numel() && lo < 0) throw new ValueError(op, 'Class values must be non-negative.');
  if (x.numel() && hi >= n) throw new ValueError(op, 'Class values must be smaller than num_classes.');
  const shape = [...x.shape, n];
  const out = Tensor.empty(shape, 'int64', x.device, true);
  if (out.numel() === 0) return out;
  const idx = x.unsqueeze(-1);
  const [sref, hold] = scalarRef(op, 1, 'int64', x.device, idx.shape);
  kernel('scatter', x.device, op)(out.ref(), shape.length - 1, idx.ref(), sref, 'none', { op });
  hold.dispose();
  return out;
});

// ---- tables for src/index.ts ---------------------------------------------------------------------

/** nbx.nn.functional.X entries of this family. */
export const functional: Record<string, Fn> = { embedding, one_hot };
/** Tensor methods of this family (tensor as first argument). */
export const methods: Record<string, Fn> = {
  gather, scatter, scatter_add, scatter_reduce, index_select, index_add, index_copy, index_fill, index_put, take,
  take_along_dim, masked_select, masked_scatter, nonzero, argwhere, repeat_interleave,
};
