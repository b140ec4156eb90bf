// Operation family: shape. View operations (reshape, permute, narrow, ...) are the Tensor's own view
// methods, re-exported as torch-style functions. Operations that copy are built from strided views and
// one device kernel, 'copy_strided' (contract: src/kernels/copy.ts): cat copies each input into a narrow()
// of the output; flip, roll and pad copy per-dimension pieces (a source start and a step of +1, -1 or 0
// per piece); repeat copies one broadcast view; im2col copies one window view. Fills are copies from a
// one-element tensor with stride 0. So a backend that implements copy_strided (and the elementwise IR)
// runs the whole family.

import { Tensor, sizesArg } from '../tensor/tensor.js';
import { backendFor, Device, type StridedRef } from '../backend/backend.js';
import { kernel } from '../kernels/registry.js';
import { allocStorage, DTYPES, isFloat, type DTypeName } from '../dtype/dtypes.js';
import { writeNumber } from '../dtype/convert.js';
import { resultType } from '../dtype/promotion.js';
import { Expr } from '../ir/expr.js';
import { DTypeError, IndexError, ShapeError, UnsupportedError, ValueError } from '../errors.js';
import { broadcastShapes, contiguousStrides, fmtShape, inferShape, normDim, numelOf } from '../tensor/shape.js';
import { def, isScalarLike, Scalar, scalarOf, type ScalarLike } from './registry.js';
import { add, describe, deviceOf, participant, scalarValue } from './elementwise.js';

// eslint-disable-next-line @typescript-eslint/no-explicit-any
type Fn = (...args: any[]) => any;

// ---- argument helpers (shared with src/ops/indexing.ts) ----------------------------------------

export function asTensor(op: string, x: unknown, name = 'input'): Tensor {
  if (!(x instanceof Tensor)) throw new ValueError(op, `${op}(): argument '${name}' must be Tensor, not ${describe(x)}`);
  return x;
}

/** A Python int argument: an integral number, a bigint, an int Scalar or a 0-d integer tensor. */
/** The most tensors one call returns (tensor_split, chunk): a count beyond it is a mistake, not a request. */
export const MAX_PIECES = 2 ** 24;

export function toInt(op: string, v: unknown, name: string): number {
  if (v instanceof Scalar && v.kind !== 'float') v = v.value;
  if (typeof v === 'bigint') v = Number(v);
  if (typeof v === 'boolean') v = v ? 1 : 0;
  if (v instanceof Tensor && v.ndim === 0 && (DTYPES[v.dt].kind === 'int' || v.dt === 'bool')) v = Number(v.item());
  if (typeof v !== 'number' || !Number.isSafeInteger(v)) throw new ValueError(op, `${op}(): argument '${name}' must be int, not ${describe(v)}`);
  return v;
}

/** x as 1-D (a view where the layout allows). 0-d tensors become [1]. */
export const flat1 = (x: Tensor): Tensor => (x.ndim === 0 ? x.unsqueeze(0) : x.reshape([-1]));

/** An int or a list of ints. */
export function toIntList(op: string, v: unknown, name: string): number[] {
  if (Array.isArray(v)) return v.map((x, i) => toInt(op, x, `${name}[${i}]`));
  return [toInt(op, v, name)];
}

/** Tensors of a list argument (cat, stack, ...). */
function tensorList(op: string, v: unknown, name = 'tensors'): Tensor[] {
  if (!Array.isArray(v)) throw new ValueError(op, `${op}(): argument '${name}' must be tuple of Tensors, not ${describe(v)}`);
  return v.map((t, i) => asTensor(op, t, `${name}[${i}]`));
}

// ---- data movement: one strided copy -------------------------------------------------------------

/** Copies `src` into `dst`: equal shapes and dtypes, any strides (negative and zero included). */
export function copyRef(op: string, device: Device, src: StridedRef, dst: StridedRef): void {
  if (numelOf(dst.shape) === 0) return;
  kernel('copy_strided', device, op)(src, dst);
}

/** Copies tensor `src` (cast to dst's dtype, broadcast to dst's shape) into the view `dst`. */
export function copyInto(dst: Tensor, src: Tensor, op = 'copy_'): void {
  deviceOf(op, [dst, src]);
  const s = src.dt === dst.dt ? src : src.copyAs(dst.dt);
  const e = s.expand(dst.shape as number[]);
  copyRef(op, dst.device, e.ref(), dst.ref());
  if (s !== src) s.dispose();
}

/** A one-element tensor holding `v` in `dtype` (rounded/wrapped as a cast would). */
export function scalarTensor(op: string, v: ScalarLike, dtype: DTypeName, device: Device): Tensor {
  if (DTYPES[dtype].kind === 'complex') throw new UnsupportedError(op, `filling complex tensors with a scalar is not supported (dtype ${dtype})`);
  const a = allocStorage(dtype, 1);
  const x = scalarValue(v, DTYPES[dtype].storageOnly ? 'float32' : dtype);
  if (typeof x === 'bigint') (a as BigInt64Array)[0] = x;
  else writeNumber(dtype, a, 0, x);
  return Tensor.fromStorage(a, dtype, [], device);
}

/** Writes the scalar `v` to every element of `dst`. */
export function fillRef(op: string, device: Device, dst: StridedRef, v: ScalarLike): void {
  if (numelOf(dst.shape) === 0) return;
  const be = backendFor(device);
  // In a CUDA graph capture the scalar cannot be copied from the host (a replay would re-read those
  // bytes): it travels as a kernel parameter instead, rounded to the destination's dtype here first,
  // so the stored value is the one the copy path stores.
  if ((be as { capture?: unknown }).capture && DTYPES[dst.dtype].kind !== 'complex') {
    const t = scalarTensor(op, v, dst.dtype, Device.of('cpu'));
    const stored = t.dataSync()[0] as number | bigint | boolean;
    t.dispose();
    const d = dst.dtype, kind = DTYPES[d].kind;
    const pdt: DTypeName = kind === 'float' ? (d === 'float64' ? 'float64' : 'float32') : d === 'int64' ? 'int64' : 'int32';
    const value = typeof stored === 'boolean' ? Number(stored) : stored;
    be.elementwise(Expr.param(0, pdt).cast(d), [], [value], dst);
    return;
  }
  const t = scalarTensor(op, v, dst.dtype, device);
  copyRef(op, device, { ...t.ref(), shape: dst.shape, strides: dst.shape.map(() => 0) }, dst);
  t.dispose();
}

/** Along one dim: out[o + k] = in[s + step * k] for k < len (step 1: a slice, -1: reversed, 0: repeated). */
interface Piece { o: number; s: number; len: number; step: number }

/** Copies the product of per-dim pieces (null: the identity on that dim) of `src` into `out`. */
function copyPieces(op: string, src: StridedRef, out: StridedRef, device: Device, pieces: (Piece[] | null)[]): void {
  const nd = out.shape.length;
  const shape = new Array<number>(nd), sst = new Array<number>(nd);
  const go = (d: number, so: number, oo: number): void => {
    if (d === nd) {
      copyRef(op, device, { ...src, shape: [...shape], strides: [...sst], offset: so }, { ...out, shape: [...shape], offset: oo });
      return;
    }
    const ps = pieces[d];
    if (!ps) { shape[d] = out.shape[d]!; sst[d] = src.strides[d]!; go(d + 1, so, oo); return; }
    for (const p of ps) {
      if (p.len <= 0) continue;
      shape[d] = p.len;
      sst[d] = src.strides[d]! * p.step;
      go(d + 1, so + p.s * src.strides[d]!, oo + p.o * out.strides[d]!);
    }
  };
  go(0, src.offset, out.offset);
}

// ---- views as functions ------------------------------------------------------------------------

/** A 0-d tensor viewed as `shape` (all ones): the core's view of a 0-d tensor refuses non-empty shapes. */
const view0d = (op: string, x: Tensor, shape: number[]): Tensor => {
  const target = inferShape(op, shape, 1);
  return x.as_strided(target, target.map(() => 1));
};
export const reshape = def('reshape(input, shape)', (a) => {
  const x = asTensor('reshape', a.input), shape = toIntList('reshape', a.shape, 'shape');
  return x.ndim === 0 && shape.length > 0 ? view0d('reshape', x, shape) : x.reshape(shape);
});
export const flatten = def('flatten(input, start_dim=0, end_dim=-1)', (a) => {
  const x = asTensor('flatten', a.input);
  const s = toInt('flatten', a.start_dim, 'start_dim'), e = toInt('flatten', a.end_dim, 'end_dim');
  if (x.ndim === 0) { normDim('flatten', s, 0); normDim('flatten', e, 0); return view0d('flatten', x, [1]); }
  return x.flatten(s, e);
});
export const unflatten = def('unflatten(input, dim, sizes)', (a) =>
  asTensor('unflatten', a.input).unflatten(toInt('unflatten', a.dim, 'dim'), toIntList('unflatten', a.sizes, 'sizes')));
export const squeeze = def('squeeze(input, dim=None)', (a) =>
  asTensor('squeeze', a.input).squeeze(a.dim === null ? undefined : Array.isArray(a.dim) ? toIntList('squeeze', a.dim, 'dim') : toInt('squeeze', a.dim, 'dim')));
export const unsqueeze = def('unsqueeze(input, dim)', (a) => asTensor('unsqueeze', a.input).unsqueeze(toInt('unsqueeze', a.dim, 'dim')));
export const permute = def('permute(input, dims)', (a) => asTensor('permute', a.input).permute(toIntList('permute', a.dims, 'dims')));
export const transpose = def('transpose(input, dim0, dim1)', (a) =>
  asTensor('transpose', a.input).transpose(toInt('transpose', a.dim0, 'dim0'), toInt('transpose', a.dim1, 'dim1')));
export const swapaxes = def('swapaxes(input, axis0, axis1)', (a) =>
  asTensor('swapaxes', a.input).transpose(toInt('swapaxes', a.axis0, 'axis0'), toInt('swapaxes', a.axis1, 'axis1')));
export const swapdims = def('swapdims(input, dim0, dim1)', (a) =>
  asTensor('swapdims', a.input).transpose(toInt('swapdims', a.dim0, 'dim0'), toInt('swapdims', a.dim1, 'dim1')));
export const t = def('t(input)', (a) => asTensor('t', a.input).t());
export const movedim = def('movedim(input, source, destination)', (a) =>
  asTensor('movedim', a.input).movedim(toIntList('movedim', a.source, 'source'), toIntList('movedim', a.destination, 'destination')));
export const moveaxis = def('moveaxis(input, source, destination)', (a) =>
  asTensor('moveaxis', a.input).movedim(toIntList('moveaxis', a.source, 'source'), toIntList('moveaxis', a.destination, 'destination')));
export const narrow = def('narrow(input, dim, start, length)', (a) =>
  asTensor('narrow', a.input).narrow(toInt('narrow', a.dim, 'dim'), toInt('narrow', a.start, 'start'), toInt('narrow', a.length, 'length')));
export const select = def('select(input, dim, index)', (a) =>
  asTensor('select', a.input).select(toInt('select', a.dim, 'dim'), toInt('select', a.index, 'index')));
export const chunk = def('chunk(input, chunks, dim=0)', (a) => {
  const x = asTensor('chunk', a.input);
  const n = toInt('chunk', a.chunks, 'chunks'), d = toInt('chunk', a.dim, 'dim');
  // PyTorch gives `chunks` empty pieces of an empty dim.
  if (n > 0 && x.ndim > 0 && x.shape[normDim('chunk', d, x.ndim)] === 0) return Array.from({ length: n }, () => x.alias());
  return x.chunk(n, d);
});
export const split = def('split(tensor, split_size_or_sections, dim=0)', (a) => {
  const x = asTensor('split', a.tensor, 'tensor');
  const s = a.split_size_or_sections;
  return x.split(Array.isArray(s) ? toIntList('split', s, 'split_size_or_sections') : toInt('split', s, 'split_size_or_sections'), toInt('split', a.dim, 'dim'));
});
export const unbind = def('unbind(input, dim=0)', (a) => asTensor('unbind', a.input).unbind(toInt('unbind', a.dim, 'dim')));
export const broadcast_to = def('broadcast_to(input, size)', (a) => asTensor('broadcast_to', a.input).expand(toIntList('broadcast_to', a.size, 'size')));

/** tensor_split: n near-equal sections (the first n % size one longer), or split points. */
export const tensor_split = def('tensor_split(input, indices_or_sections, dim=0)', (a) => {
  const op = 'tensor_split';
  const x = asTensor(op, a.input);
  if (x.ndim === 0) throw new ShapeError(op, 'tensor_split expected at least a 1-dimensional tensor, but got a tensor with 0 dims');
  const d = normDim(op, toInt(op, a.dim, 'dim'), x.ndim);
  const n = x.shape[d]!;
  let spec = a.indices_or_sections;
  if (spec instanceof Tensor) {
    if (!['int64', 'int32', 'int16', 'int8', 'uint8'].includes(spec.dt) || spec.ndim > 1) {
      throw new ValueError(op, `tensor_split expected tensor_indices_or_sections to be a zero-dimensional or one-dimensional tensor of integer type, but got ${spec.dt} of dim ${spec.ndim}`);
    }
    spec = spec.ndim === 0 ? Number(spec.item()) : (spec.tolist() as number[]).map(Number);
  }
  const bounds: number[] = [];
  if (Array.isArray(spec)) bounds.push(...toIntList(op, spec, 'indices'));
  else {
    const sections = toInt(op, spec, 'sections');
    if (sections <= 0) throw new ValueError(op, `number of sections must be larger than 0, got ${sections}`);
    if (sections > MAX_PIECES) throw new ValueError(op, `${sections} sections would return more than ${MAX_PIECES} tensors`);
    const q = Math.floor(n / sections), r = n % sections;
    let at = 0;
    for (let i = 0; i < sections - 1; i++) { at += q + (i < r ? 1 : 0); bounds.push(at); }
  }
  const clampB = (v: number): number => Math.min(Math.max(v < 0 ? v + n : v, 0), n);
  const out: Tensor[] = [];
  let start = 0;
  for (const b of [...bounds, n]) {
    const s = clampB(start), e = Math.max(clampB(b), s);
    out.push(x.slice(d, s, e));
    start = b;
  }
  return out;
});

export const broadcast_tensors = def('broadcast_tensors(*tensors)', (a) => {
  const ts = tensorList('broadcast_tensors', a.tensors);
  const shape = broadcastShapes('broadcast_tensors', ...ts.map((x) => x.shape));
  return ts.map((x) => x.expand(shape));
});

export const meshgrid = def('meshgrid(*tensors, indexing=None)', (a) => {
  const op = 'meshgrid';
  const ts = tensorList(op, a.tensors);
  const indexing = (a.indexing ?? 'ij') as string;
  if (indexing !== 'ij' && indexing !== 'xy') throw new ValueError(op, `torch.meshgrid: indexing must be one of "xy" or "ij", but received: ${indexing}`);
  ts.forEach((x) => { if (x.ndim > 1) throw new ShapeError(op, `torch.meshgrid: Expected 0D or 1D tensor in the tensor list but got: ${x.ndim}D`); });
  if (ts.length === 0) return [];
  deviceOf(op, ts);
  const dt = ts[0]!.dt;
  if (ts.some((x) => x.dt !== dt)) throw new DTypeError(op, 'torch.meshgrid: Expected all tensors in the tensor list to have the same dtype');
  const swap = indexing === 'xy' && ts.length >= 2;
  const order = ts.map((_, i) => i);
  if (swap) { order[0] = 1; order[1] = 0; }
  const sizes = order.map((i) => ts[i]!.numel());
  return ts.map((x, i) => {
    const pos = order.indexOf(i);
    const v = sizes.map((_, k) => (k === pos ? -1 : 1));
    return x.reshape(v).expand(sizes);
  });
});

export const diagonal = def('diagonal(input, offset=0, dim1=0, dim2=1)', (a) => {
  const op = 'diagonal';
  const x = asTensor(op, a.input);
  const off = toInt(op, a.offset, 'offset');
  const d1 = normDim(op, toInt(op, a.dim1, 'dim1'), x.ndim), d2 = normDim(op, toInt(op, a.dim2, 'dim2'), x.ndim);
  if (d1 === d2) throw new ShapeError(op, `diagonal dimensions cannot be identical ${a.dim1}, ${a.dim2}`);
  const s1 = x.shape[d1]!, s2 = x.shape[d2]!;
  const len = Math.max(off >= 0 ? Math.min(s1, s2 - off) : Math.min(s1 + off, s2), 0);
  const keep = x.shape.map((_, i) => i).filter((i) => i !== d1 && i !== d2);
  const shape = [...keep.map((i) => x.shape[i]!), len];
  const strides = [...keep.map((i) => x.strides[i]!), x.strides[d1]! + x.strides[d2]!];
  const start = len === 0 ? x.offset : x.offset + (off >= 0 ? off * x.strides[d2]! : -off * x.strides[d1]!);
  return x.as_strided(shape, strides, start);
});

export const diag = def('diag(input, diagonal=0)', (a) => {
  const op = 'diag';
  const x = asTensor(op, a.input);
  const k = toInt(op, a.diagonal, 'diagonal');
  if (x.ndim === 2) return (diagonal(x, k) as Tensor).clone();
  if (x.ndim !== 1) throw new ShapeError(op, `diag(): Supports 1D or 2D tensors. Got ${x.ndim}D`);
  const n = x.shape[0]! + Math.abs(k);
  const out = Tensor.empty([n, n], x.dt, x.device, true);
  const d = diagonal(out, k) as Tensor;
  copyRef(op, x.device, x.ref(), d.ref());
  d.dispose();
  return out;
});

// ---- concatenation -----------------------------------------------------------------------------

/** cat into a fresh tensor: dtype promoted over all inputs; 1-D empty inputs skipped (PyTorch legacy). */
function catImpl(op: string, ts: Tensor[], dimArg: unknown): Tensor {
  if (ts.length === 0) throw new ValueError(op, `torch.${op}(): expected a non-empty list of Tensors`);
  ts.forEach((x, i) => { if (x.ndim === 0) throw new ShapeError(op, `zero-dimensional tensor (at position ${i}) cannot be concatenated`); });
  const device = deviceOf(op, ts);
  const dtype = resultType(ts.map(participant));
  const live = ts.map((x, i) => [x, i] as const).filter(([x]) => !(x.ndim === 1 && x.shape[0] === 0));
  if (live.length === 0) return Tensor.empty([0], dtype, device);
  const ref = live[0]![0];
  const d = normDim(op, toInt(op, dimArg, 'dim'), ref.ndim);
  let total = 0;
  for (const [x, i] of live) {
    if (x.ndim !== ref.ndim) throw new ShapeError(op, `Tensors must have same number of dimensions: got ${ref.ndim} and ${x.ndim}`);
    for (let k = 0; k < ref.ndim; k++) {
      if (k !== d && x.shape[k] !== ref.shape[k]) {
        throw new ShapeError(op, `Sizes of tensors must match except in dimension ${d}. Expected size ${ref.shape[k]} but got size ${x.shape[k]} for tensor number ${i} in the list.`);
      }
    }
    total += x.shape[d]!;
  }
  const shape = [...ref.shape];
  shape[d] = total;
  const out = Tensor.empty(shape, dtype, device);
  const or = out.ref();
  let at = 0;
  for (const [x] of live) {
    const src = x.dt === dtype ? x : x.copyAs(dtype);
    const len = x.shape[d]!;
    copyRef(op, device, src.ref(), { ...or, shape: x.shape, offset: or.offset + at * or.strides[d]! });
    if (src !== x) src.dispose();
    at += len;
  }
  return out;
}

export const cat = def('cat(tensors, dim=0)', (a) => catImpl('cat', tensorList('cat', a.tensors), a.dim));
export const concat = cat;
export const concatenate = cat;

function stackImpl(op: string, ts: Tensor[], dimArg: unknown): Tensor {
  if (ts.length === 0) throw new ValueError(op, 'stack expects a non-empty TensorList');
  const d = normDim(op, toInt(op, dimArg, 'dim'), ts[0]!.ndim + 1);
  ts.forEach((x, i) => {
    if (x.ndim !== ts[0]!.ndim || x.shape.some((s, k) => s !== ts[0]!.shape[k])) {
      throw new ShapeError(op, `stack expects each tensor to be equal size, but got ${fmtShape(ts[0]!.shape)} at entry 0 and ${fmtShape(x.shape)} at entry ${i}`);
    }
  });
  const views = ts.map((x) => x.unsqueeze(d));
  const out = catImpl(op, views, d);
  views.forEach((v) => v.dispose());
  return out;
}
export const stack = def('stack(tensors, dim=0)', (a) => stackImpl('stack', tensorList('stack', a.tensors), a.dim));

/** atleast_nd as the *stack helpers need it: 0-d → [1], 1-d → [1, n] (2-d) or [1, n, 1] (3-d). */
function atleast(x: Tensor, n: number): Tensor {
  if (x.ndim >= n) return x;
  if (x.ndim === 0) return x.reshape(Array(n).fill(1));
  if (n === 2) return x.unsqueeze(0);
  return x.ndim === 1 ? x.reshape([1, x.shape[0]!, 1]) : x.unsqueeze(-1);
}
export const atleast_1d = def('atleast_1d(*tensors)', (a) => { const ts = tensorList('atleast_1d', a.tensors).map((x) => atleast(x, 1)); return ts.length === 1 ? ts[0] : ts; });
export const atleast_2d = def('atleast_2d(*tensors)', (a) => { const ts = tensorList('atleast_2d', a.tensors).map((x) => atleast(x, 2)); return ts.length === 1 ? ts[0] : ts; });
export const atleast_3d = def('atleast_3d(*tensors)', (a) => { const ts = tensorList('atleast_3d', a.tensors).map((x) => atleast(x, 3)); return ts.length === 1 ? ts[0] : ts; });
export const hstack = def('hstack(tensors)', (a) => {
  const ts = tensorList('hstack', a.tensors).map((x) => atleast(x, 1));
  return catImpl('hstack', ts, ts.length && ts[0]!.ndim === 1 ? 0 : 1);
});
export const vstack = def('vstack(tensors)', (a) => catImpl('vstack', tensorList('vstack', a.tensors).map((x) => atleast(x, 2)), 0));
export const row_stack = vstack;
export const dstack = def('dstack(tensors)', (a) => catImpl('dstack', tensorList('dstack', a.tensors).map((x) => atleast(x, 3)), 2));
export const column_stack = def('column_stack(tensors)', (a) =>
  catImpl('column_stack', tensorList('column_stack', a.tensors).map((x) => (x.ndim === 0 ? x.reshape([1, 1]) : x.ndim === 1 ? x.unsqueeze(1) : x)), 1));

// ---- flip, roll, repeat, tile ------------------------------------------------------------------

function uniqueDims(op: string, dims: number[], ndim: number): number[] {
  const ds = dims.map((d) => normDim(op, d, ndim));
  const seen = new Set<number>();
  for (const d of ds) {
    if (seen.has(d)) throw new ValueError(op, `dim ${d} appears multiple times in the list of dims`);
    seen.add(d);
  }
  return ds;
}

export const flip = def('flip(input, dims)', (a) => {
  const op = 'flip';
  const x = asTensor(op, a.input);
  const dims = uniqueDims(op, toIntList(op, a.dims, 'dims'), x.ndim);
  const out = Tensor.empty(x.shape, x.dt, x.device);
  if (x.ndim === 0) { copyRef(op, x.device, x.ref(), out.ref()); return out; }
  copyPieces(op, x.ref(), out.ref(), x.device,
    x.shape.map((n, d) => (dims.includes(d) ? [{ o: 0, s: n - 1, len: n, step: -1 }] : null)));
  return out;
});
export const fliplr = def('fliplr(input)', (a) => {
  const x = asTensor('fliplr', a.input);
  if (x.ndim < 2) throw new ShapeError('fliplr', 'Input must be >= 2-d.');
  return flip(x, [1]);
});
export const flipud = def('flipud(input)', (a) => {
  const x = asTensor('flipud', a.input);
  if (x.ndim < 1) throw new ShapeError('flipud', 'Input must be >= 1-d.');
  return flip(x, [0]);
});

export const roll = def('roll(input, shifts, dims=None)', (a) => {
  const op = 'roll';
  const x = asTensor(op, a.input);
  const shifts = toIntList(op, a.shifts, 'shifts');
  if (a.dims === null || (Array.isArray(a.dims) && a.dims.length === 0)) {
    if (shifts.length !== 1) throw new ValueError(op, `shifts and dimensions must align. shifts: ${shifts.length}, dims:0`);
    // No dims: roll the flattened tensor, shape restored.
    const flat = flat1(x);
    const r = roll(flat, shifts[0]!, 0) as Tensor;
    if (flat !== x) flat.dispose();
    return r.view(x.shape as number[]);
  }
  const dims = toIntList(op, a.dims, 'dims');
  if (dims.length !== shifts.length) throw new ValueError(op, `shifts and dimensions must align. shifts: ${shifts.length}, dims:${dims.length}`);
  const total = new Array<number>(x.ndim).fill(0);
  dims.forEach((d, i) => { total[normDim(op, d, x.ndim)]! += shifts[i]!; }); // a repeated dim rolls twice
  const out = Tensor.empty(x.shape, x.dt, x.device);
  if (x.ndim === 0) { copyRef(op, x.device, x.ref(), out.ref()); return out; }
  copyPieces(op, x.ref(), out.ref(), x.device, x.shape.map((n, d) => {
    if (n === 0) return null;
    const s = ((total[d]! % n) + n) % n;
    return s === 0 ? null : [{ o: s, s: 0, len: n - s, step: 1 }, { o: 0, s: n - s, len: s, step: 1 }];
  }));
  return out;
});

/** Tensor.repeat: one copy from the input viewed as [r0 (stride 0), s0, r1, s1, ...] into the output. */
export const repeat = def('Tensor.repeat(input, *sizes)', (a) => {
  const op = 'repeat';
  const x = asTensor(op, a.input);
  const reps = toIntList(op, a.sizes, 'sizes');
  if (reps.length < x.ndim) throw new ShapeError(op, 'Number of dimensions of repeat dims can not be smaller than number of dimensions of tensor');
  const lead = reps.length - x.ndim;
  const inShape = [...Array(lead).fill(1), ...x.shape] as number[];
  const inStrides = [...Array(lead).fill(0), ...x.strides] as number[];
  const outShape = reps.map((r, i) => r * inShape[i]!);
  if (reps.some((r) => r < 0)) throw new ValueError(op, `Trying to create tensor with negative dimension ${Math.min(...outShape)}: ${fmtShape(outShape)}`);
  const out = Tensor.empty(outShape, x.dt, x.device);
  const os = out.strides;
  const src: StridedRef = { ...x.ref(), shape: reps.flatMap((r, i) => [r, inShape[i]!]), strides: reps.flatMap((_, i) => [0, inStrides[i]!]) };
  const dst: StridedRef = { ...out.ref(), shape: src.shape, strides: reps.flatMap((_, i) => [inShape[i]! * os[i]!, os[i]!]) };
  copyRef(op, x.device, src, dst);
  return out;
});

export const tile = def('tile(input, dims)', (a) => {
  const x = asTensor('tile', a.input);
  const dims = toIntList('tile', a.dims, 'dims');
  return repeat(x, [...Array(Math.max(x.ndim - dims.length, 0)).fill(1), ...dims]);
});

// ---- tril / triu ---------------------------------------------------------------------------------

function triangle(op: 'tril' | 'triu', a: Record<string, unknown>): Tensor {
  const x = asTensor(op, a.input);
  const k = toInt(op, a.diagonal, 'diagonal');
  if (x.ndim < 2) throw new ShapeError(op, `${op}: input tensor must have at least 2 dimensions`);
  if (DTYPES[x.dt].kind === 'complex' || DTYPES[x.dt].storageOnly) throw new DTypeError(op, `"${op}" is not implemented for '${x.dt}'`);
  const m = x.shape[x.ndim - 2]!, n = x.shape[x.ndim - 1]!;
  const out = Tensor.empty(x.shape, x.dt, x.device);
  if (out.numel() === 0) return out;
  // out = where(col - row <= k (tril) / >= k (triu), x, 0), with row/col index vectors broadcast.
  const rows = Tensor.fromStorage(Int32Array.from({ length: m }, (_, i) => i), 'int32', [m, 1], x.device);
  const cols = Tensor.fromStorage(Int32Array.from({ length: n }, (_, i) => i), 'int32', [n], x.device);
  const diff = Expr.load(2, 'int32').sub(Expr.load(1, 'int32'));
  const keep = op === 'tril' ? diff.le(Expr.param(0, 'int32')) : diff.ge(Expr.param(0, 'int32'));
  const expr = Expr.where(keep, Expr.load(0, x.dt), Expr.const(0, x.dt));
  backendFor(x.device).elementwise(expr, [x.ref(), rows.ref(), cols.ref()], [k], out.ref());
  rows.dispose(); cols.dispose();
  return out;
}
export const tril = def('tril(input, diagonal=0)', (a) => triangle('tril', a));
export const triu = def('triu(input, diagonal=0)', (a) => triangle('triu', a));

// ---- nn.functional.pad -------------------------------------------------------------------------

const MODES = ['constant', 'reflect', 'replicate', 'circular'];

/** The pieces of one padded dim of size n with pads (l, r): output index j reads input index f(j). */
function padPieces(op: string, mode: string, n: number, l: number, r: number, dim: number, shape: readonly number[]): Piece[] {
  const outN = n + l + r;
  const lo = Math.max(l, 0), cropL = Math.max(-l, 0), inner = n - cropL - Math.max(-r, 0);
  const pieces: Piece[] = [{ o: lo, s: cropL, len: inner, step: 1 }];
  if (mode === 'constant') return pieces;
  if (mode === 'reflect') {
    if (l >= n || r >= n) {
      throw new ValueError(op, `Argument #4: Padding size should be less than the corresponding input dimension, but got: padding (${l}, ${r}) at dimension ${dim} of input ${fmtShape(shape)}`);
    }
    // Reflection about the input's first and last elements (not repeating them).
    if (l > 0) pieces.push({ o: 0, s: l, len: l, step: -1 });
    if (r > 0) pieces.push({ o: outN - r, s: n - 2, len: r, step: -1 });
  } else if (mode === 'replicate') {
    if (n === 0 && (l > 0 || r > 0)) throw new ValueError(op, `padding size is expected to be less than the input size: input dimension ${dim} has size 0`);
    if (l > 0) pieces.push({ o: 0, s: 0, len: l, step: 0 });
    if (r > 0) pieces.push({ o: outN - r, s: n - 1, len: r, step: 0 });
  } else {
    // circular: the (cropped) interior wraps around, at most once.
    if (l > inner || r > inner) throw new ValueError(op, 'Padding value causes wrapping around more than once.');
    if (l > 0) pieces.push({ o: 0, s: cropL + inner - l, len: l, step: 1 });
    if (r > 0) pieces.push({ o: outN - r, s: cropL, len: r, step: 1 });
  }
  return pieces;
}

export const pad = def("nn.functional.pad(input, pad, mode='constant', value=None)", (a) => {
  const op = 'nn.functional.pad';
  const x = asTensor(op, a.input);
  const p = toIntList(op, a.pad, 'pad');
  const mode = a.mode as string;
  if (!MODES.includes(mode)) throw new ValueError(op, `Unrecognised padding mode ${String(mode)} (expected one of ${MODES.join(', ')})`);
  if (p.length % 2 !== 0) throw new ValueError(op, 'Padding length must be divisible by 2');
  const k = p.length / 2;
  if (k > x.ndim) {
    throw new ValueError(op, `Padding length should be less than or equal to two times the input dimension but got padding length ${p.length} and input of dimension ${x.ndim}`);
  }
  if (mode !== 'constant') {
    if (a.value !== null && scalarNum(a.value) !== 0) throw new ValueError(op, `Padding mode "${mode}" doesn't take in value argument`);
    const ok = (k === 1 && (x.ndim === 2 || x.ndim === 3)) || (k === 2 && (x.ndim === 3 || x.ndim === 4)) || (k === 3 && (x.ndim === 4 || x.ndim === 5));
    if (!ok) {
      throw new UnsupportedError(op, `Only 2D, 3D, 4D, 5D padding with non-constant padding are supported for now (mode '${mode}', padding length ${p.length}, input of dimension ${x.ndim}; pad the last 1, 2 or 3 dims of a batched or unbatched input)`);
    }
  }
  const outShape = [...x.shape];
  const pads = x.shape.map(() => [0, 0] as [number, number]);
  for (let i = 0; i < k; i++) {
    const d = x.ndim - 1 - i;
    const l = p[2 * i]!, r = p[2 * i + 1]!;
    pads[d] = [l, r];
    outShape[d] = x.shape[d]! + l + r;
    if (outShape[d]! < 0 || (mode !== 'constant' && outShape[d]! < 1)) {
      throw new ShapeError(op, `The input size ${x.shape[d]}, plus negative padding ${l} and ${r} resulted in a negative output size, which is invalid. Check dimension ${d} of your input.`);
    }
  }
  const out = Tensor.empty(outShape, x.dt, x.device);
  const or = out.ref();
  if (mode === 'constant') {
    const value = (a.value ?? 0) as ScalarLike;
    // Fill only the border slabs (corners twice); the interior is copied below.
    pads.forEach(([l, r], d) => {
      if (l > 0) fillRef(op, x.device, { ...or, shape: outShape.map((s, i) => (i === d ? l : s)) }, value);
      if (r > 0) fillRef(op, x.device, { ...or, shape: outShape.map((s, i) => (i === d ? r : s)), offset: or.offset + (outShape[d]! - r) * or.strides[d]! }, value);
    });
  }
  copyPieces(op, x.ref(), or, x.device, x.shape.map((n, d) => {
    const [l, r] = pads[d]!;
    return l === 0 && r === 0 ? null : padPieces(op, mode, n, l, r, d, x.shape);
  }));
  return out;
});

const scalarNum = (v: unknown): number => (isScalarLike(v) ? Number(scalarOf(v).value) : v instanceof Tensor ? Number(v.item()) : NaN);

// ---- pixel shuffle -------------------------------------------------------------------------------

function pixelShuffle(op: string, x: Tensor, r: number, up: boolean): Tensor {
  if (x.ndim < 3) throw new ShapeError(op, `${op.split('.').pop()} expects input to have at least 3 dimensions, but got input with ${x.ndim} dimension(s)`);
  if (r <= 0) throw new ValueError(op, `${up ? 'upscale' : 'downscale'}_factor must be greater than 0, but got ${r}`);
  const lead = x.shape.slice(0, -3) as number[];
  const [c, h, w] = x.shape.slice(-3) as number[];
  const nl = lead.length;
  let view: Tensor, perm: number[], outShape: number[];
  if (up) {
    if (c! % (r * r) !== 0) throw new ShapeError(op, `pixel_shuffle expects its input's 'channel' dimension to be divisible by the square of upscale_factor, but input.size(-3)=${c} is not divisible by ${r * r}`);
    view = x.reshape([...lead, c! / (r * r), r, r, h!, w!]);
    perm = [nl, nl + 3, nl + 1, nl + 4, nl + 2]; // [C, H, r, W, r]
    outShape = [...lead, c! / (r * r), h! * r, w! * r];
  } else {
    if (h! % r !== 0) throw new ShapeError(op, `pixel_unshuffle expects height to be divisible by downscale_factor, but input.size(-2)=${h} is not divisible by ${r}`);
    if (w! % r !== 0) throw new ShapeError(op, `pixel_unshuffle expects width to be divisible by downscale_factor, but input.size(-1)=${w} is not divisible by ${r}`);
    view = x.reshape([...lead, c!, h! / r, r, w! / r, r]);
    perm = [nl, nl + 2, nl + 4, nl + 1, nl + 3]; // [C, r, r, H/r, W/r]
    outShape = [...lead, c! * r * r, h! / r, w! / r];
  }
  const p = view.permute([...lead.keys(), ...perm]);
  const out = Tensor.empty(p.shape, x.dt, x.device);
  copyRef(op, x.device, p.ref(), out.ref());
  return out.view(outShape);
}
export const pixel_shuffle = def('nn.functional.pixel_shuffle(input, upscale_factor)', (a) =>
  pixelShuffle('nn.functional.pixel_shuffle', asTensor('nn.functional.pixel_shuffle', a.input), toInt('nn.functional.pixel_shuffle', a.upscale_factor, 'upscale_factor'), true));
export const pixel_unshuffle = def('nn.functional.pixel_unshuffle(input, downscale_factor)', (a) =>
  pixelShuffle('nn.functional.pixel_unshuffle', asTensor('nn.functional.pixel_unshuffle', a.input), toInt('nn.functional.pixel_unshuffle', a.downscale_factor, 'downscale_factor'), false));

// ---- im2col / col2im -----------------------------------------------------------------------------

function pair(op: string, v: unknown, name: string): [number, number] {
  const l = toIntList(op, v, name);
  if (l.length === 1) return [l[0]!, l[0]!];
  if (l.length !== 2) throw new ValueError(op, `${name} must be an int or a pair of ints, got ${fmtShape(l)}`);
  return [l[0]!, l[1]!];
}

interface Sliding { k: [number, number]; d: [number, number]; p: [number, number]; s: [number, number] }
function slidingArgs(op: string, a: Record<string, unknown>): Sliding {
  const g: Sliding = { k: pair(op, a.kernel_size, 'kernel_size'), d: pair(op, a.dilation, 'dilation'), p: pair(op, a.padding, 'padding'), s: pair(op, a.stride, 'stride') };
  if (g.k.some((v) => v <= 0)) throw new ValueError(op, `kernel size should be greater than zero, but got kernel_height: ${g.k[0]} kernel_width: ${g.k[1]}`);
  if (g.d.some((v) => v <= 0)) throw new ValueError(op, `dilation should be greater than zero, but got dilation_height: ${g.d[0]} dilation_width: ${g.d[1]}`);
  if (g.s.some((v) => v <= 0)) throw new ValueError(op, `stride should be greater than zero, but got stride_height: ${g.s[0]} stride_width: ${g.s[1]}`);
  if (g.p.some((v) => v < 0)) throw new ValueError(op, `padding should be non-negative, but got pad_height: ${g.p[0]} pad_width: ${g.p[1]}`);
  return g;
}
/** Number of sliding blocks along one spatial dim. */
const blocks = (size: number, g: Sliding, i: 0 | 1): number => Math.floor((size + 2 * g.p[i] - g.d[i] * (g.k[i] - 1) - 1) / g.s[i]) + 1;
const fmtPair = (v: number[]): string => `(${v.join(', ')})`;

function floatOnly(op: string, x: Tensor, kernelName: string): void {
  if (!isFloat(x.dt)) throw new DTypeError(op, `"${kernelName}" not implemented for '${x.dt}' (expects a floating point tensor)`);
}

/** The [N, C, kh, kw, oh, ow] window view of a (zero-padded) [N, C, H, W] tensor. */
function windows(x: Tensor, g: Sliding, oh: number, ow: number): StridedRef {
  const r = x.ref();
  const [sN, sC, sH, sW] = r.strides as number[];
  return { ...r, shape: [x.shape[0]!, x.shape[1]!, g.k[0], g.k[1], oh, ow], strides: [sN!, sC!, g.d[0] * sH!, g.d[1] * sW!, g.s[0] * sH!, g.s[1] * sW!] };
}

export const unfold = def('nn.functional.unfold(input, kernel_size, dilation=1, padding=0, stride=1)', (a) => {
  const op = 'nn.functional.unfold';
  let x = asTensor(op, a.input);
  if (x.ndim !== 3 && x.ndim !== 4) throw new ShapeError(op, `Input Error: Only 3D or 4D input Tensors are supported (got ${x.ndim}D)`);
  floatOnly(op, x, 'im2col');
  const g = slidingArgs(op, a);
  const batched = x.ndim === 4;
  if (!batched) x = x.unsqueeze(0);
  const [n, c, h, w] = x.shape as number[];
  const oh = blocks(h!, g, 0), ow = blocks(w!, g, 1);
  if (oh < 1 || ow < 1) {
    throw new ShapeError(op, `Given input with spatial size ${fmtPair([h!, w!])}, kernel_size=${fmtPair(g.k)}, dilation=${fmtPair(g.d)}, padding=${fmtPair(g.p)}, calculated shape of the array of sliding blocks as ${fmtPair([oh, ow])}, but its components must be at least one.`);
  }
  const padded = g.p[0] || g.p[1] ? (pad(x, [g.p[1], g.p[1], g.p[0], g.p[0]]) as Tensor) : x;
  const out = Tensor.empty([n!, c! * g.k[0] * g.k[1], oh * ow], x.dt, x.device);
  const win = windows(padded, g, oh, ow);
  copyRef(op, x.device, win, { ...out.ref(), shape: win.shape, strides: contiguousStrides(win.shape) });
  if (padded !== x) padded.dispose();
  return batched ? out : out.view(out.shape.slice(1) as number[]);
});

export const fold = def('nn.functional.fold(input, output_size, kernel_size, dilation=1, padding=0, stride=1)', (a) => {
  const op = 'nn.functional.fold';
  let x = asTensor(op, a.input);
  if (x.ndim !== 2 && x.ndim !== 3) throw new ShapeError(op, `Input Error: Only unbatched (2D) or batched (3D) input Tensors are supported (got ${x.ndim}D)`);
  floatOnly(op, x, 'col2im');
  const g = slidingArgs(op, a);
  const [H, W] = pair(op, a.output_size, 'output_size');
  const batched = x.ndim === 3;
  if (!batched) x = x.unsqueeze(0);
  const [n, ck, L] = x.shape as number[];
  const kk = g.k[0] * g.k[1];
  if (ck! % kk !== 0) {
    throw new ShapeError(op, `Expected size of input's dimension 1 to be divisible by the product of kernel_size, but got input.size(1)=${ck} and kernel_size=${fmtPair(g.k)}`);
  }
  const oh = blocks(H, g, 0), ow = blocks(W, g, 1);
  if (oh * ow !== L || oh < 1 || ow < 1) {
    throw new ShapeError(op, `Given output_size=${fmtPair([H, W])}, kernel_size=${fmtPair(g.k)}, dilation=${fmtPair(g.d)}, padding=${fmtPair(g.p)}, stride=${fmtPair(g.s)}, expected size of input's dimension 2 to match the calculated number of sliding blocks ${oh} * ${ow} = ${oh * ow}, but got input.size(2)=${L}.`);
  }
  const c = ck! / kk;
  const padded = Tensor.empty([n!, c, H + 2 * g.p[0], W + 2 * g.p[1]], x.dt, x.device, true);
  const cols = x.reshape([n!, c, g.k[0], g.k[1], oh, ow]);
  const win = windows(padded, g, oh, ow);
  // Sum the blocks one kernel offset at a time (PyTorch's col2im order): region += cols[:, :, i, j].
  for (let i = 0; i < g.k[0]; i++) {
    for (let j = 0; j < g.k[1]; j++) {
      const region = padded.as_strided([n!, c, oh, ow], [win.strides[0]!, win.strides[1]!, win.strides[4]!, win.strides[5]!],
        padded.offset + i * win.strides[2]! + j * win.strides[3]!);
      const block = cols.select(3, j).select(2, i);
      const sum = add(region, block) as Tensor;
      copyRef(op, x.device, sum.ref(), region.ref());
      sum.dispose(); region.dispose(); block.dispose();
    }
  }
  if (cols !== x) cols.dispose();
  let out = padded;
  if (g.p[0] || g.p[1]) {
    const crop = padded.slice(2, g.p[0], g.p[0] + H).slice(3, g.p[1], g.p[1] + W);
    out = Tensor.empty(crop.shape, x.dt, x.device);
    copyRef(op, x.device, crop.ref(), out.ref());
    padded.dispose();
  }
  return batched ? out : out.view(out.shape.slice(1) as number[]);
});

// ---- tables for src/index.ts ---------------------------------------------------------------------

/** Tensor methods that take varargs in PyTorch (t.flip(0, 1), t.repeat(2, 3), t.tile(2, 3)). */
const varargs = (f: Fn) => (x: Tensor, ...rest: unknown[]) => f(x, rest.length === 1 ? rest[0] : rest);

/** nbx.nn.functional.X entries of this family. */
export const functional: Record<string, Fn> = { pad, pixel_shuffle, pixel_unshuffle, unfold, fold };
/** Tensor methods of this family (tensor as first argument). */
export const methods: Record<string, Fn> = {
  repeat: (x: Tensor, ...sizes: unknown[]) => repeat(x, sizesArg(sizes as number[])),
  tile: varargs(tile), flip: varargs(flip), fliplr, flipud, roll, tril, triu, diagonal, diag, tensor_split, swapdims,
};
