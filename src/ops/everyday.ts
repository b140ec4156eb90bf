// Everyday functions a PyTorch user reaches for in the first hour, written with the existing
// operations (so every device that runs those runs these): comparisons (isclose, allclose, equal),
// tensors over existing memory (as_tensor, frombuffer), cdist, bincount, diff, isin,
// nn.functional.cosine_similarity, and the Tensor methods new_zeros/new_ones/new_full/new_empty/
// new_tensor and type().

import { Tensor } from '../tensor/tensor.js';
import { Storage } from '../tensor/storage.js';
import { Device, backendFor } from '../backend/backend.js';
import { DTYPES, STORAGE_CTORS, dtypeName, type DTypeLike, type DTypeName, type StorageArray } from '../dtype/dtypes.js';
import { DeviceLimitError, DTypeError, ShapeError, ValueError } from '../errors.js';
import { contiguousStrides } from '../tensor/shape.js';
import { def, isScalarLike } from './registry.js';
import * as ew from './elementwise.js';
import { torchTypeName } from './conv.js';
import * as red from './reduce.js';
import { cat } from './shape.js';
import { index_add } from './indexing.js';
import { tensor, zeros, ones, full, empty, TYPED, type CreateOptions } from './creation.js';

// eslint-disable-next-line @typescript-eslint/no-explicit-any
type Fn = (...args: any[]) => any;


function tensorArg(op: string, v: unknown, name: string): Tensor {
  if (!(v instanceof Tensor)) throw new ValueError(op, `${op}(): argument '${name}' must be Tensor, not ${v === null ? 'None' : typeof v}`);
  return v;
}

/** Disposes the intermediates of a chain of operations once the result exists. */
function chain<T>(f: (keep: (t: Tensor) => Tensor) => T): T {
  const made: Tensor[] = [];
  try { return f((t) => { made.push(t); return t; }); } finally { for (const t of made) t.dispose(); }
}

// ---- comparisons ---------------------------------------------------------------------------------

export const isclose = def('isclose(input, other, rtol=1e-05, atol=1e-08, equal_nan=False)', (a): Tensor => {
  const op = 'isclose';
  const x = tensorArg(op, a.input, 'input'), y = tensorArg(op, a.other, 'other');
  if (x.dt !== y.dt) throw new DTypeError(op, `${torchTypeName(x.dt)} did not match ${torchTypeName(y.dt)}`);
  const rtol = Number(a.rtol), atol = Number(a.atol);
  if (!(rtol >= 0)) throw new ValueError(op, `rtol must be greater than or equal to zero, but got ${a.rtol}`);
  if (!(atol >= 0)) throw new ValueError(op, `atol must be greater than or equal to zero, but got ${a.atol}`);
  return chain((k) => {
    let close = ew.eq(x, y) as Tensor;
    if (x.dt === 'bool') return close;
    const floating = DTYPES[x.dt].kind !== 'int';
    if (a.equal_nan && floating) close = ew.logical_or(k(close), k(ew.logical_and(k(ew.isnan(x)), k(ew.isnan(y))))) as Tensor;
    if (rtol === 0 && atol === 0) return close;
    // |x - y| <= atol + rtol * |y|, for finite differences (infinities only match exactly, above)
    const diff = k(ew.abs(k(ew.sub(x, y))));
    const allowed = k(ew.add(k(ew.mul(k(ew.abs(y)), rtol)), atol));
    const within = k(ew.le(diff, allowed));
    return ew.logical_or(k(close), floating ? k(ew.logical_and(k(ew.isfinite(diff)), within)) : within) as Tensor;
  });
});

/**
 * A one-element bool tensor as a JS boolean: at once where the device reads synchronously (CPU, CUDA),
 * a Promise of it on WebGPU, so `await nbx.allclose(a, b)` works on every device. Disposes `t`.
 */
function readBool(t: Tensor): boolean | Promise<boolean> {
  if (t.device.type === 'cpu' || backendFor(t.device).downloadSync) { try { return Boolean(t.item()); } finally { t.dispose(); } }
  return (t.cpu() as Promise<Tensor>).then((c) => Boolean(c.item())).finally(() => t.dispose());
}

/** PyTorch's allclose: a boolean (a Promise of one on WebGPU, which reads only asynchronously). */
export const allclose = def('allclose(input, other, rtol=1e-05, atol=1e-08, equal_nan=False)', (a): boolean | Promise<boolean> =>
  readBool(chain((k) => red.all(k(isclose(a.input, a.other, { rtol: a.rtol, atol: a.atol, equal_nan: a.equal_nan }))) as Tensor)));

/** PyTorch's equal: same shape and elements; a boolean (a Promise of one on WebGPU). */
export const equal = def('equal(input, other)', (a): boolean | Promise<boolean> => {
  const x = tensorArg('equal', a.input, 'input'), y = tensorArg('equal', a.other, 'other');
  if (x.ndim !== y.ndim || x.shape.some((s, i) => s !== y.shape[i])) return x.device.type === 'cpu' || backendFor(x.device).downloadSync ? false : Promise.resolve(false);
  return readBool(chain((k) => red.all(k(ew.eq(x, y))) as Tensor));
});

// ---- tensors over existing memory -----------------------------------------------------------------

const typedDType = (v: unknown): DTypeName | undefined => TYPED.find(([c]) => v instanceof c)?.[1];

/** A CPU tensor over `bytes` (no copy): writes through either side are seen by the other. */
function borrowed(op: string, buffer: ArrayBufferLike, byteOffset: number, dtype: DTypeName, count: number): Tensor {
  const info = DTYPES[dtype];
  const ctor = STORAGE_CTORS[info.storage] as unknown as new (b: ArrayBufferLike, o: number, n: number) => StorageArray;
  const lane = STORAGE_CTORS[info.storage].BYTES_PER_ELEMENT;
  if (byteOffset % lane !== 0) {
    throw new ValueError(op, `offset ${byteOffset} is not a multiple of ${lane} bytes, which a ${dtype} view of the memory needs (JavaScript typed arrays are aligned): copy with nbx.tensor(...) instead`);
  }
  const data = new ctor(buffer, byteOffset, count * info.lanes);
  // A borrowed buffer is never handed to the host pool when the tensor goes: it belongs to the caller.
  return new Tensor(new Storage(Device.of('cpu'), dtype, count, data, true), [count], contiguousStrides([count]), 0);
}

/**
 * `nbx.frombuffer(buffer, { dtype, count, offset })`, as torch.frombuffer: a 1-d CPU tensor sharing the
 * memory of an ArrayBuffer, SharedArrayBuffer or typed array (offset in bytes, from the view's start).
 */
export const frombuffer = def('frombuffer(buffer, *, dtype, count=-1, offset=0, requires_grad=False)', (a): Tensor => {
  const op = 'frombuffer';
  const b = a.buffer as unknown;
  let buf: ArrayBufferLike, start = 0, len: number;
  if (b instanceof ArrayBuffer || (typeof SharedArrayBuffer !== 'undefined' && b instanceof SharedArrayBuffer)) { buf = b; len = b.byteLength; } else if (ArrayBuffer.isView(b)) { buf = b.buffer; start = b.byteOffset; len = b.byteLength; } else {
    throw new ValueError(op, `frombuffer(): argument 'buffer' must be an ArrayBuffer, SharedArrayBuffer or typed array, not ${b === null ? 'None' : typeof b}`);
  }
  if (a.requires_grad) throw new ValueError(op, 'requires_grad=True: nbxtensor has no autograd');
  const dtype = dtypeName(a.dtype as DTypeLike);
  const size = DTYPES[dtype].itemsize, offset = Number(a.offset), count = Number(a.count);
  if (!Number.isInteger(offset) || offset < 0 || offset > len) throw new ValueError(op, `offset (${offset} bytes) must be a non-negative integer no greater than buffer length (${len} bytes)`);
  const rest = len - offset;
  if (count === -1) {
    if (rest % size !== 0) throw new ValueError(op, `buffer length (${rest} bytes) after offset (${offset} bytes) must be a multiple of element size (${size})`);
    if (rest === 0) throw new ValueError(op, `both buffer length (${len}) and count (-1) must not be 0`);
    return borrowed(op, buf, start + offset, dtype, rest / size);
  }
  if (!Number.isInteger(count) || count <= 0) throw new ValueError(op, `count must be a positive integer or -1, got ${a.count}`);
  if (count * size > rest) throw new ValueError(op, `requested buffer length (${count} * ${size} bytes) after offset (${offset} bytes) must not be greater than actual buffer length (${len} bytes)`);
  return borrowed(op, buf, start + offset, dtype, count);
});

/**
 * `nbx.as_tensor(data, { dtype, device })`, as torch.as_tensor: a tensor is returned as is (or converted
 * when dtype/device differ); a typed array whose dtype matches, on the CPU, shares its memory, as
 * torch.as_tensor (and torch.from_numpy) share a NumPy array's; anything else is copied as nbx.tensor.
 */
export const as_tensor = def('as_tensor(data, dtype=None, device=None)', (a): Tensor => {
  const d = a.data as unknown;
  const want = a.dtype === null ? undefined : dtypeName(a.dtype as DTypeLike);
  if (d instanceof Tensor) return d.to({ dtype: want ?? d.dt, device: (a.device as string | null) ?? d.device });
  const own = typedDType(d);
  const device = a.device === null ? Device.of('cpu') : Device.of(a.device as string);
  if (own && (want === undefined || want === own)) {
    const arr = d as StorageArray;
    const t = borrowed('as_tensor', arr.buffer, arr.byteOffset, own, arr.length);
    return device.type === 'cpu' ? t : t.to(device);
  }
  return tensor(d, { dtype: want, device } as CreateOptions);
});

// ---- distances, counts, differences, membership ---------------------------------------------------

export const cdist = def("cdist(x1, x2, p=2.0, compute_mode='use_mm_for_euclid_dist_if_necessary')", (a): Tensor => {
  const op = 'cdist';
  const x1 = tensorArg(op, a.x1, 'x1'), x2 = tensorArg(op, a.x2, 'x2');
  const p = Number(a.p);
  if (x1.ndim < 2 || x2.ndim < 2) throw new ShapeError(op, `cdist only supports at least 2D tensors, X1 got: ${x1.ndim}D${x2.ndim < 2 ? `, X2 got: ${x2.ndim}D` : ''}`);
  if (DTYPES[x1.dt].kind !== 'float') throw new DTypeError(op, `cdist only supports floating-point dtypes, X1 got: ${torchTypeName(x1.dt)}`);
  if (DTYPES[x2.dt].kind !== 'float') throw new DTypeError(op, `cdist only supports floating-point dtypes, X2 got: ${torchTypeName(x2.dt)}`);
  if (x1.shape[x1.ndim - 1] !== x2.shape[x2.ndim - 1]) throw new ShapeError(op, `X1 and X2 must have the same number of columns. X1: ${x1.shape[x1.ndim - 1]} X2: ${x2.shape[x2.ndim - 1]}`);
  if (!(p >= 0)) throw new ValueError(op, `cdist only supports non-negative p values, got ${a.p}`);
  const modes = ['use_mm_for_euclid_dist_if_necessary', 'use_mm_for_euclid_dist', 'donot_use_mm_for_euclid_dist'];
  if (!modes.includes(a.compute_mode as string)) throw new ValueError(op, `${String(a.compute_mode)} is not a valid value for compute_mode; known: ${modes.join(', ')}`);
  // Every pair's difference [..., P, R, M], then its p-norm over M (the direct form for every p).
  return chain((k) => {
    const d = k(ew.abs(k(ew.sub(k(x1.unsqueeze(-2)), k(x2.unsqueeze(-3))))));
    if (p === 0) return (red.count_nonzero(d, -1) as Tensor).to(d.dt);
    if (p === Infinity) return red.amax(d, -1) as Tensor;
    if (p === 1) return red.sum(d, -1) as Tensor;
    if (p === 2) return ew.sqrt(k(red.sum(k(ew.mul(d, d)), -1))) as Tensor;
    return ew.pow(k(red.sum(k(ew.pow(d, p)), -1)), 1 / p) as Tensor;
  });
});

export const bincount = def('bincount(input, weights=None, minlength=0)', (a): Tensor => {
  const op = 'bincount';
  const x = tensorArg(op, a.input, 'input');
  if (DTYPES[x.dt].kind !== 'int' && x.dt !== 'bool') throw new DTypeError(op, `"bincount_cpu" not implemented for '${torchTypeName(x.dt)}'`);
  const minlength = Number(a.minlength);
  if (!Number.isInteger(minlength) || minlength < 0) throw new ValueError(op, `minlength should be >= 0, got ${a.minlength}`);
  if (x.ndim !== 1) throw new ShapeError(op, 'bincount only supports 1-d non-negative integral inputs.');
  const w = a.weights === null ? null : tensorArg(op, a.weights, 'weights');
  if (w && (w.ndim !== 1 || w.shape[0] !== x.shape[0])) throw new ShapeError(op, 'weights should be 1-d and have the same length as input');
  // The output length depends on the values, so it reads the largest one back (as PyTorch's kernels do).
  let len = minlength;
  if (x.device.type !== 'cpu' && !backendFor(x.device).downloadSync) {
    throw new DeviceLimitError(op, `the output's length is the largest input value + 1, read back synchronously, and ${x.device} reads only asynchronously: nbx.bincount(await x.cpu())`);
  }
  if (x.numel() > 0) {
    const lo = Number((red.amin(x) as Tensor).item()), hi = Number((red.amax(x) as Tensor).item());
    if (lo < 0) throw new ValueError(op, 'bincount only supports 1-d non-negative integral inputs.');
    len = Math.max(len, hi + 1);
  }
  const outDtype: DTypeName = w ? (w.dt === 'float32' || w.dt === 'float64' ? w.dt : 'float64') : 'int64';
  return chain((k) => {
    const out = k(zeros([len], { dtype: outDtype, device: x.device }));
    const src = w ? (w.dt === outDtype ? w : k(w.to(outDtype))) : k(ones([x.numel()], { dtype: 'int64', device: x.device }));
    const idx = x.dt === 'int64' ? x : k(x.to('int64'));
    return index_add(out, 0, idx, src) as Tensor;
  });
});

export const diff = def('diff(input, n=1, dim=-1, prepend=None, append=None)', (a): Tensor => {
  const op = 'diff';
  const x = tensorArg(op, a.input, 'input');
  if (x.ndim === 0) throw new ShapeError(op, 'diff expects input to be at least one-dimensional');
  const n = Number(a.n);
  if (!Number.isInteger(n) || n < 0) throw new ValueError(op, `order must be non-negative but got ${a.n}`);
  const dim = Number(a.dim);
  return chain((k) => {
    let t = x;
    if (a.prepend !== null || a.append !== null) {
      const part = (v: unknown, name: string): Tensor => {
        if (v instanceof Tensor) return v;
        if (isScalarLike(v)) { const s = [...x.shape]; s.splice(dim < 0 ? dim + x.ndim : dim, 1, 1); return k(full(s, v, { dtype: x.dt, device: x.device })); }
        return tensorArg(op, v, name);
      };
      t = k(cat([...(a.prepend !== null ? [part(a.prepend, 'prepend')] : []), x, ...(a.append !== null ? [part(a.append, 'append')] : [])], dim));
    }
    for (let i = 0; i < n; i++) {
      const len = t.shape[dim < 0 ? dim + t.ndim : dim]!;
      if (len === 0) break;
      const hi = t.narrow(dim, 1, len - 1), lo = t.narrow(dim, 0, len - 1);
      t = k((t.dt === 'bool' ? ew.logical_xor(hi, lo) : ew.sub(hi, lo)) as Tensor);
    }
    return t === x ? x.clone() : t.clone();
  });
});

export const isin = def('isin(elements, test_elements, *, assume_unique=False, invert=False)', (a): Tensor => {
  const op = 'isin';
  if (!(a.elements instanceof Tensor) && !(a.test_elements instanceof Tensor)) {
    throw new ValueError(op, 'isin(): at least one of elements and test_elements must be a Tensor');
  }
  return chain((k) => {
    const dev = (a.elements instanceof Tensor ? a.elements : a.test_elements as Tensor).device;
    const el = a.elements instanceof Tensor ? a.elements : k(tensor(a.elements, { device: dev }));
    const te = a.test_elements instanceof Tensor ? a.test_elements : k(tensor(a.test_elements, { device: dev }));
    const found = k(red.any(k(ew.eq(k(el.unsqueeze(-1)), k(te.reshape([-1])))), -1) as Tensor);
    return (a.invert ? ew.logical_not(found) : found.clone()) as Tensor;
  });
});

export const cosine_similarity = def('nn.functional.cosine_similarity(x1, x2, dim=1, eps=1e-08)', (a): Tensor => {
  const op = 'nn.functional.cosine_similarity';
  const x1 = tensorArg(op, a.x1, 'x1'), x2 = tensorArg(op, a.x2, 'x2');
  // PyTorch's form: each side divided by its norm (clamped to eps), then the dot product.
  return chain((k) => {
    const n1 = k(ew.clamp_min(k(red.vector_norm(x1, 2, a.dim, true) as Tensor), a.eps));
    const n2 = k(ew.clamp_min(k(red.vector_norm(x2, 2, a.dim, true) as Tensor), a.eps));
    return red.sum(k(ew.mul(k(ew.div(x1, n1)), k(ew.div(x2, n2)))), a.dim) as Tensor;
  });
});

// ---- Tensor methods ----------------------------------------------------------------------------------

type NewOptions = CreateOptions;
const like = (self: Tensor, o: NewOptions = {}): CreateOptions => {
  for (const key of Object.keys(o)) if (key !== 'dtype' && key !== 'device') throw new ValueError('new_*', `unexpected keyword argument '${key}' (keywords: dtype, device)`);
  return { dtype: o.dtype ?? self.dt, device: o.device ?? self.device };
};
const sizeAndOptions = (args: unknown[]): [number[], NewOptions] => {
  const last = args[args.length - 1];
  const opts = last !== null && typeof last === 'object' && !Array.isArray(last) ? args.pop() as NewOptions : {};
  const sizes = args.length === 1 && Array.isArray(args[0]) ? args[0] as number[] : args as number[];
  return [sizes, opts];
};

/** The legacy type names PyTorch's Tensor.type() uses, under nbx's prefix. */
const LEGACY: Partial<Record<DTypeName, string>> = {
  float32: 'FloatTensor', float64: 'DoubleTensor', float16: 'HalfTensor', bfloat16: 'BFloat16Tensor', int64: 'LongTensor',
  int32: 'IntTensor', int16: 'ShortTensor', int8: 'CharTensor', uint8: 'ByteTensor', bool: 'BoolTensor',
  complex64: 'ComplexFloatTensor', complex128: 'ComplexDoubleTensor',
};

function type(self: Tensor, dtype?: DTypeLike | string | null): string | Tensor {
  if (dtype === undefined || dtype === null) {
    const dev = self.device.type === 'cpu' ? '' : `${self.device.type}.`;
    return `nbx.${dev}${LEGACY[self.dt] ?? `${self.dt}Tensor`}`;
  }
  if (typeof dtype === 'string') {
    const m = /^(?:torch|nbx)\.(?:(cuda|webgpu)\.)?(\w+Tensor)$/.exec(dtype);
    if (m) {
      const d = (Object.keys(LEGACY) as DTypeName[]).find((k) => LEGACY[k] === m[2]);
      if (!d) throw new DTypeError('type', `invalid type: '${dtype}'; known: ${Object.values(LEGACY).join(', ')}`);
      return self.to(m[1] ? { dtype: d, device: m[1] } : { dtype: d, device: 'cpu' });
    }
  }
  return self.to(dtypeName(dtype));
}

export const methods: Record<string, Fn> = {
  new_zeros: (self: Tensor, ...args: unknown[]) => { const [s, o] = sizeAndOptions(args); return zeros(s, like(self, o)); },
  new_ones: (self: Tensor, ...args: unknown[]) => { const [s, o] = sizeAndOptions(args); return ones(s, like(self, o)); },
  new_empty: (self: Tensor, ...args: unknown[]) => { const [s, o] = sizeAndOptions(args); return empty(s, like(self, o)); },
  new_full: (self: Tensor, size: number[], fill: number, o?: NewOptions) => full(size, fill, like(self, o)),
  new_tensor: (self: Tensor, data: unknown, o?: NewOptions) => tensor(data, like(self, o)),
  type,
  isclose: (self: Tensor, ...args: unknown[]) => isclose(self, ...args),
  allclose: (self: Tensor, ...args: unknown[]) => allclose(self, ...args),
  equal: (self: Tensor, ...args: unknown[]) => equal(self, ...args),
  bincount: (self: Tensor, ...args: unknown[]) => bincount(self, ...args),
  diff: (self: Tensor, ...args: unknown[]) => diff(self, ...args),
};

export const functional: Record<string, Fn> = { cosine_similarity };

declare module '../tensor/tensor.js' {
  interface Tensor {
    new_zeros(...size: (number | readonly number[] | CreateOptions)[]): Tensor;
    new_ones(...size: (number | readonly number[] | CreateOptions)[]): Tensor;
    new_empty(...size: (number | readonly number[] | CreateOptions)[]): Tensor;
    new_full(size: readonly number[], fill_value: number | bigint | boolean, opts?: CreateOptions): Tensor;
    new_tensor(data: unknown, opts?: CreateOptions): Tensor;
    /** No argument: the legacy type name ('nbx.FloatTensor'); with a dtype: this tensor as that dtype. */
    type(): string;
    type(dtype: DTypeLike | string): Tensor;
    /** A boolean (a Promise of one on WebGPU). */
    allclose(other: Tensor, opts?: { rtol?: number; atol?: number; equal_nan?: boolean }): boolean | Promise<boolean>;
    isclose(other: Tensor, opts?: { rtol?: number; atol?: number; equal_nan?: boolean }): Tensor;
    /** A boolean (a Promise of one on WebGPU). */
    equal(other: Tensor): boolean | Promise<boolean>;
  }
}
