// The Tensor: a strided view (shape, strides, offset) of a Storage. Views share storage exactly where
// PyTorch's do; everything here is metadata and works the same on every device. Operations that compute
// are attached as methods by src/ops/methods.ts.

import { DType, DTYPES, allocStorage, dtypeName, isDTypeLike, type DTypeLike, type DTypeName, type StorageArray } from '../dtype/dtypes.js';
import { readNumber } from '../dtype/convert.js';
import { Device, backendFor, type DeviceLike, type StridedRef } from '../backend/backend.js';
import { cpuRecording, refuseReadWhileRecording } from '../backend/cpu/runtime/recording.js';
import { DeviceLimitError, DisposedError, DTypeError, IndexError, ShapeError, ValueError } from '../errors.js';
import { Expr } from '../ir/expr.js';
import { Storage, finalizer, track } from './storage.js';
import {
  broadcastShapes, checkInt, contiguousStrides, fmtShape, inferShape, isContiguous, normDim, numelOf, viewStrides, type Shape,
} from './shape.js';

/** Keywords of Tensor.to. */
export interface ToOptions { dtype?: DTypeLike; device?: DeviceLike; copy?: boolean; non_blocking?: boolean }

/** Sizes given as varargs (`view(2, 3)`) or one array (`view([2, 3])`). */
export function sizesArg(args: readonly (number | readonly number[])[]): number[] {
  if (args.length === 1 && Array.isArray(args[0])) return [...(args[0] as number[])];
  return args as number[];
}

export class Tensor {
  readonly shape: readonly number[];
  private readonly _strides: readonly number[];
  private readonly _offset: number;
  readonly dt: DTypeName;
  private _storage: Storage | null;

  /** Internal: use the creation functions (nbx.tensor, nbx.zeros, ...). */
  constructor(storage: Storage, shape: Shape, strides: readonly number[], offset: number, owned = false) {
    this._storage = storage.retain();
    // `owned`: the caller made fresh arrays for this tensor alone, so they need no defensive copy.
    this.shape = Object.freeze(owned ? shape as number[] : [...shape]);
    this._strides = Object.freeze(owned ? strides as number[] : [...strides]);
    this._offset = offset;
    this.dt = storage.dtype;
    // GC safety net for device memory only: a CPU buffer is reclaimed by the GC with its tensor anyway,
    // and registering every small CPU result costs more than the op itself.
    if (storage.device.type !== 'cpu') finalizer.register(this, storage, this);
    track(this);
  }

  /**
   * A fresh contiguous tensor of `shape` on `device`. `zero`: true fills with zeros; false leaves the
   * contents arbitrary (the caller overwrites every element); omitted: zeros on the CPU (where it is
   * nearly free and older kernels rely on it), arbitrary on GPUs.
   */
  static empty(shape: Shape, dtype: DTypeName, device: DeviceLike = 'cpu', zero?: boolean): Tensor {
    const dev = Device.of(device);
    const numel = numelOf(shape);
    if (dev.type === 'cpu') {
      const buf = allocStorage(dtype, numel, zero ?? true);
      const rec = cpuRecording();
      // a replayed step must see this buffer as fresh (zeros) again, and it must never be pooled for reuse
      if (rec && (zero ?? true)) rec.push(buf instanceof BigInt64Array ? () => { buf.fill(0n); } : () => { (buf as Float32Array).fill(0); });
      return new Tensor(new Storage(dev, dtype, numel, buf, rec !== null), shape.slice(), contiguousStrides(shape), 0, true);
    }
    const buf = backendFor(dev).alloc(dtype, numel, zero ?? false);
    return new Tensor(new Storage(dev, dtype, numel, buf), shape.slice(), contiguousStrides(shape), 0, true);
  }

  /** Wraps host storage (already in the engine's storage convention) as a contiguous CPU tensor, moved to `device`. */
  static fromStorage(data: StorageArray, dtype: DTypeName, shape: Shape, device: DeviceLike = 'cpu'): Tensor {
    const dev = Device.of(device);
    const numel = numelOf(shape);
    const buf = dev.type === 'cpu' ? data : backendFor(dev).upload(dtype, data);
    return new Tensor(new Storage(dev, dtype, numel, buf, dev.type === 'cpu' && cpuRecording() !== null), shape, contiguousStrides(shape), 0);
  }

  // ---- metadata --------------------------------------------------------------------------------

  get storage(): Storage {
    if (this._storage === null || !this._storage.alive) {
      throw new DisposedError('Tensor', `tensor of shape ${fmtShape(this.shape)} and dtype ${this.dt} was used after dispose()`);
    }
    return this._storage;
  }
  get dtype(): DType { return DType.all[this.dt]; }
  get device(): Device { return this.storage.device; }
  get ndim(): number { return this.shape.length; }
  dim(): number { return this.shape.length; }
  numel(): number { return numelOf(this.shape); }
  nelement(): number { return this.numel(); }
  element_size(): number { return DTYPES[this.dt].itemsize; }
  size(): number[];
  size(dim: number): number;
  size(dim?: number): number[] | number {
    return dim === undefined ? [...this.shape] : this.shape[normDim('size', dim, this.ndim)]!;
  }
  stride(): number[];
  stride(dim: number): number;
  stride(dim?: number): number[] | number {
    return dim === undefined ? [...this._strides] : this._strides[normDim('stride', dim, this.ndim)]!;
  }
  get strides(): readonly number[] { return this._strides; }
  get offset(): number { return this._offset; }
  storage_offset(): number { return this._offset; }
  is_contiguous(): boolean { return isContiguous(this.shape, this._strides); }
  get is_cuda(): boolean { return this.device.type === 'cuda'; }
  is_floating_point(): boolean { return DTYPES[this.dt].kind === 'float'; }
  is_complex(): boolean { return DTYPES[this.dt].kind === 'complex'; }
  get isDisposed(): boolean { return this._storage === null || !this._storage.alive; }
  /** Internal: the operand descriptor backends consume. */
  ref(): StridedRef {
    return { buf: this.storage.buf, dtype: this.dt, shape: this.shape, strides: this._strides, offset: this._offset };
  }

  /** Releases this tensor's reference to its storage now; the memory goes when the last view goes. */
  dispose(): void {
    if (this._storage === null) return;
    const s = this._storage;
    if (s.device.type !== 'cpu') finalizer.unregister(this); // registered only off the CPU (constructor)
    this._storage = null;
    s.release();
  }

  /** TypeScript's `using t = ...` disposes the tensor at the end of the block. */
  [Symbol.dispose](): void { this.dispose(); }

  toString(): string { return `tensor(shape=${fmtShape(this.shape)}, dtype=${this.dt}, device=${this._storage?.device ?? 'disposed'})`; }

  // ---- views -----------------------------------------------------------------------------------

  /** A view on the same storage. */
  as_strided(size: readonly number[], stride: readonly number[], storageOffset?: number): Tensor {
    if (size.length !== stride.length) throw new ShapeError('as_strided', `mismatch in length of strides and shape (${size.length} vs ${stride.length})`);
    const off = storageOffset ?? this._offset;
    const s = this.storage;
    if (numelOf(size) > 0) {
      let hi = off;
      for (let i = 0; i < size.length; i++) { if (stride[i]! < 0) throw new ValueError('as_strided', 'negative strides are not supported'); hi += (size[i]! - 1) * stride[i]!; }
      if (off < 0 || hi >= s.numel) {
        throw new IndexError('as_strided', `setStorage: sizes ${fmtShape(size)}, strides ${fmtShape(stride)}, storage offset ${off} require a storage of at least ${hi + 1} elements, but it has ${s.numel}`);
      }
    }
    return new Tensor(s, size, stride, off);
  }

  view(...shape: (number | readonly number[])[]): Tensor {
    const target = inferShape('view', sizesArg(shape), this.numel());
    const st = viewStrides(this.shape, this._strides, target);
    if (st === null) {
      throw new ShapeError('view', `view size is not compatible with input tensor's size ${fmtShape(this.shape)} and stride ${fmtShape(this._strides)} (at least one dimension spans across two contiguous subspaces). Use .reshape(...) instead.`);
    }
    return new Tensor(this.storage, target, st, this._offset);
  }

  reshape(...shape: (number | readonly number[])[]): Tensor {
    const target = inferShape('reshape', sizesArg(shape), this.numel());
    const st = viewStrides(this.shape, this._strides, target);
    if (st !== null) return new Tensor(this.storage, target, st, this._offset);
    return this.contiguous().view(target);
  }

  view_as(other: Tensor): Tensor { return this.view(other.shape as number[]); }
  reshape_as(other: Tensor): Tensor { return this.reshape(other.shape as number[]); }

  permute(...dims: (number | readonly number[])[]): Tensor {
    const d = sizesArg(dims).map((x) => normDim('permute', x, this.ndim));
    if (d.length !== this.ndim || new Set(d).size !== d.length) {
      throw new ShapeError('permute', `number of dims don't match in permute: input has ${this.ndim} dims, got ${fmtShape(sizesArg(dims))}`);
    }
    return new Tensor(this.storage, d.map((i) => this.shape[i]!), d.map((i) => this._strides[i]!), this._offset);
  }

  transpose(dim0: number, dim1: number): Tensor {
    if (this.ndim === 0) return this.alias();
    const a = normDim('transpose', dim0, this.ndim), b = normDim('transpose', dim1, this.ndim);
    const p = [...Array(this.ndim).keys()];
    p[a] = b; p[b] = a;
    return this.permute(p);
  }
  swapaxes(a: number, b: number): Tensor { return this.transpose(a, b); }

  t(): Tensor {
    if (this.ndim > 2) throw new ShapeError('t', `t() expects a tensor with <= 2 dimensions, but self is ${this.ndim}D`);
    return this.ndim < 2 ? this.alias() : this.transpose(0, 1);
  }
  get T(): Tensor { return this.permute([...Array(this.ndim).keys()].reverse()); }
  get mT(): Tensor {
    if (this.ndim < 2) throw new ShapeError('mT', `tensor.mT is only supported on matrices or batches of matrices. Got ${this.ndim}-D tensor.`);
    return this.transpose(-2, -1);
  }

  alias(): Tensor { return new Tensor(this.storage, this.shape, this._strides, this._offset); }

  expand(...sizes: (number | readonly number[])[]): Tensor {
    const want = sizesArg(sizes);
    if (want.length < this.ndim) {
      throw new ShapeError('expand', `the number of sizes provided (${want.length}) must be greater or equal to the number of dimensions in the tensor (${this.ndim})`);
    }
    const off = want.length - this.ndim;
    const shape: number[] = [], strides: number[] = [];
    for (let i = 0; i < want.length; i++) {
      const j = i - off;
      const cur = j >= 0 ? this.shape[j]! : 1;
      let w = checkInt('expand', 'size', want[i]);
      if (w < -1) throw new ShapeError('expand', `The expanded size of the tensor (${w}) isn't allowed: sizes must be non-negative, or -1 to keep a dimension. Target sizes: ${fmtShape(want)}`);
      if (w === -1) {
        if (j < 0) throw new ShapeError('expand', `the expanded size of the tensor (-1) isn't allowed in a leading, non-existing dimension ${i}`);
        w = cur;
      }
      if (j >= 0 && cur !== 1 && cur !== w) {
        throw new ShapeError('expand', `The expanded size of the tensor (${w}) must match the existing size (${cur}) at non-singleton dimension ${i}.  Target sizes: ${fmtShape(want)}.  Tensor sizes: ${fmtShape(this.shape)}`);
      }
      shape.push(w);
      strides.push(j >= 0 && cur === w ? this._strides[j]! : 0);
    }
    return new Tensor(this.storage, shape, strides, this._offset);
  }
  expand_as(other: Tensor): Tensor { return this.expand(other.shape as number[]); }
  broadcast_to(shape: readonly number[]): Tensor { return this.expand(shape); }

  squeeze(dim?: number | readonly number[]): Tensor {
    const dims = dim === undefined ? [...Array(this.ndim).keys()]
      : (typeof dim === 'number' ? [dim] : dim).map((d) => normDim('squeeze', d, this.ndim));
    const keep = [...Array(this.ndim).keys()].filter((i) => !(dims.includes(i) && this.shape[i] === 1));
    return new Tensor(this.storage, keep.map((i) => this.shape[i]!), keep.map((i) => this._strides[i]!), this._offset);
  }

  unsqueeze(dim: number): Tensor {
    const d = normDim('unsqueeze', dim, this.ndim + 1);
    const shape = [...this.shape], strides = [...this._strides];
    const st = d < this.ndim ? this.shape[d]! * this._strides[d]! : 1;
    shape.splice(d, 0, 1);
    strides.splice(d, 0, st);
    return new Tensor(this.storage, shape, strides, this._offset);
  }

  flatten(startDim = 0, endDim = -1): Tensor {
    if (this.ndim === 0) return this.reshape([1]);
    const s = normDim('flatten', startDim, this.ndim), e = normDim('flatten', endDim, this.ndim);
    if (s > e) throw new ValueError('flatten', 'flatten() has invalid args: start_dim cannot come after end_dim');
    if (s === e) return this.alias();
    const shape = [...this.shape.slice(0, s), numelOf(this.shape.slice(s, e + 1)), ...this.shape.slice(e + 1)];
    return this.reshape(shape);
  }
  ravel(): Tensor { return this.reshape([-1]); }

  unflatten(dim: number, sizes: readonly number[]): Tensor {
    const d = normDim('unflatten', dim, this.ndim);
    const inner = inferShape('unflatten', sizes, this.shape[d]!);
    return this.view([...this.shape.slice(0, d), ...inner, ...this.shape.slice(d + 1)]);
  }

  /** Python slicing of one dimension: t[..., start:end:step, ...]. Negative and out-of-range bounds clamp like Python. */
  slice(dim: number, start: number | null = null, end: number | null = null, step = 1): Tensor {
    if (this.ndim === 0) throw new IndexError('slice', 'slice() cannot be applied to a 0-dim tensor.');
    const d = normDim('slice', dim, this.ndim);
    if (start !== null) checkInt('slice', 'start', start);
    if (end !== null) checkInt('slice', 'end', end);
    checkInt('slice', 'step', step);
    if (step <= 0) throw new ValueError('slice', 'slice step must be positive');
    const n = this.shape[d]!;
    const clamp = (v: number | null, def: number): number => {
      if (v === null) return def;
      if (v < 0) v += n;
      return Math.min(Math.max(v, 0), n);
    };
    const s = clamp(start, 0), e = Math.max(clamp(end, n), s);
    const len = Math.ceil((e - s) / step);
    const shape = [...this.shape], strides = [...this._strides];
    shape[d] = len;
    strides[d] = this._strides[d]! * step;
    return new Tensor(this.storage, shape, strides, this._offset + (len > 0 ? s * this._strides[d]! : 0));
  }

  narrow(dim: number, start: number, length: number): Tensor {
    const d = normDim('narrow', dim, this.ndim);
    checkInt('narrow', 'start', start); checkInt('narrow', 'length', length);
    const n = this.shape[d]!;
    if (start < -n || start > n) throw new IndexError('narrow', `start (${start}) is out of bounds for dimension of size ${n}`);
    if (start < 0) start += n;
    if (length < 0 || start + length > n) throw new IndexError('narrow', `start (${start}) + length (${length}) exceeds dimension size (${n}).`);
    return this.slice(d, start, start + length);
  }

  select(dim: number, index: number): Tensor {
    if (this.ndim === 0) throw new IndexError('select', 'select() cannot be applied to a 0-dim tensor.');
    const d = normDim('select', dim, this.ndim);
    checkInt('select', 'index', index);
    const n = this.shape[d]!;
    if (index < -n || index >= n) throw new IndexError('select', `index ${index} is out of bounds for dimension ${d} with size ${n}`);
    if (index < 0) index += n;
    const shape = [...this.shape], strides = [...this._strides];
    shape.splice(d, 1);
    strides.splice(d, 1);
    return new Tensor(this.storage, shape, strides, this._offset + index * this._strides[d]!);
  }

  movedim(source: number | readonly number[], destination: number | readonly number[]): Tensor {
    const src = (typeof source === 'number' ? [source] : source).map((d) => normDim('movedim', d, this.ndim));
    const dst = (typeof destination === 'number' ? [destination] : destination).map((d) => normDim('movedim', d, this.ndim));
    if (src.length !== dst.length) throw new ValueError('movedim', `Invalid source or destination dims: source (${src}) and destination (${dst}) must have the same number of elements`);
    const order = new Array<number>(this.ndim).fill(-1);
    src.forEach((s, i) => { order[dst[i]!] = s; });
    const rest = [...Array(this.ndim).keys()].filter((d) => !src.includes(d));
    let k = 0;
    for (let i = 0; i < this.ndim; i++) if (order[i] === -1) order[i] = rest[k++]!;
    return this.permute(order);
  }
  moveaxis(s: number | readonly number[], d: number | readonly number[]): Tensor { return this.movedim(s, d); }

  split(splitSize: number | readonly number[], dim = 0): Tensor[] {
    const d = normDim('split', dim, this.ndim);
    const n = this.shape[d]!;
    const sizes: number[] = [];
    if (typeof splitSize === 'number') {
      checkInt('split', 'split_size', splitSize);
      if (splitSize < 0 || (splitSize === 0 && n > 0)) throw new ValueError('split', `split expects split_size be non-negative (and positive for a non-empty dimension), but got split_size=${splitSize}`);
      for (let s = 0; s < n || (n === 0 && sizes.length === 0); s += splitSize) sizes.push(Math.min(splitSize, n - s));
    } else {
      splitSize.forEach((v) => { if (checkInt('split', 'split_sizes', v) < 0) throw new ValueError('split', `split_with_sizes expects split_sizes have only non-negative entries, but got split_sizes=${fmtShape(splitSize)}`); });
      if (splitSize.reduce((a, b) => a + b, 0) !== n) {
        throw new ShapeError('split', `split_with_sizes expects split_sizes to sum exactly to ${n} (input tensor's size at dimension ${d}), but got split_sizes=${fmtShape(splitSize)}`);
      }
      sizes.push(...splitSize);
    }
    let start = 0;
    return sizes.map((len) => { const t = this.narrow(d, start, len); start += len; return t; });
  }

  chunk(chunks: number, dim = 0): Tensor[] {
    checkInt('chunk', 'chunks', chunks);
    if (chunks > 2 ** 24) throw new ValueError('chunk', `${chunks} chunks would return more than 2^24 tensors`);
    if (chunks <= 0) throw new ValueError('chunk', 'chunk expects `chunks` to be greater than 0');
    const d = normDim('chunk', dim, this.ndim);
    const n = this.shape[d]!;
    if (n === 0) return [...Array(chunks).keys()].map(() => this.narrow(d, 0, 0)); // PyTorch: `chunks` empty pieces
    return this.split(Math.ceil(n / chunks), d);
  }

  unbind(dim = 0): Tensor[] {
    const d = normDim('unbind', dim, this.ndim);
    return [...Array(this.shape[d]!).keys()].map((i) => this.select(d, i));
  }

  /** A non-overlapping sliding window view: size `size` with step `step` along `dim`, window as the last dim. */
  unfold(dimension: number, size: number, step: number): Tensor {
    const d = normDim('unfold', dimension, this.ndim);
    checkInt('unfold', 'size', size); checkInt('unfold', 'step', step);
    if (size < 0) throw new ValueError('unfold', `size is ${size} but must be >= 0`);
    const n = this.ndim === 0 ? 1 : this.shape[d]!;
    if (size > n) throw new ShapeError('unfold', `maximum size for tensor at dimension ${d} is ${n} but size is ${size}`);
    if (step <= 0) throw new ValueError('unfold', `step is ${step} but must be > 0`);
    const shape = [...this.shape], strides = [...this._strides];
    const st = this.ndim === 0 ? 1 : this._strides[d]!;
    if (this.ndim > 0) { shape[d] = Math.floor((n - size) / step) + 1; strides[d] = st * step; }
    shape.push(size);
    strides.push(st);
    return new Tensor(this.storage, shape, strides, this._offset);
  }

  // ---- copies and conversion -------------------------------------------------------------------

  /** Copies into a new contiguous tensor of `dtype` (a cast when it differs) on the same device. */
  copyAs(dtype: DTypeName = this.dt): Tensor {
    const srcC = DTYPES[this.dt].kind === 'complex', dstC = DTYPES[dtype].kind === 'complex';
    if (srcC || dstC) {
      // Complex values are (re, im) pairs: every cast runs on float views of the pairs.
      const out = Tensor.empty(this.shape, dtype, this.device, false);
      if (out.numel() === 0) return out;
      const realDt = (d: DTypeName): DTypeName => (DTYPES[d].storage === 'f32' ? 'float32' : 'float64');
      const pairs = (t: Tensor, d: DTypeName): StridedRef => ({ ...t.ref(), dtype: realDt(d),
        shape: [...t.shape, 2], strides: [...t.strides.map((s) => s * 2), 1], offset: t.offset * 2 });
      const be = backendFor(this.device);
      if (srcC && dstC) {
        be.elementwise(Expr.load(0, realDt(this.dt)).cast(realDt(dtype)), [pairs(this, this.dt)], [], pairs(out, dtype));
      } else if (dstC) {
        // real → complex: the value in lane 0, zero in lane 1 (a [2] lane mask selects).
        const rd = realDt(dtype);
        const lane = Tensor.fromStorage(new Uint8Array([1, 0]), 'bool', [2], this.device);
        try {
          const x: StridedRef = { ...this.ref(), shape: [...this.shape, 1], strides: [...this._strides, 0] };
          be.elementwise(Expr.where(Expr.load(0, 'bool'), Expr.load(1, this.dt).cast(rd), Expr.const(0, rd)), [lane.ref(), x], [], pairs(out, dtype));
        } finally { lane.dispose(); }
      } else {
        // complex → real keeps the real part, as PyTorch does (it warns that the imaginary part is discarded).
        const re: StridedRef = { ...this.ref(), dtype: realDt(this.dt), strides: this._strides.map((s) => s * 2), offset: this._offset * 2 };
        be.elementwise(Expr.load(0, realDt(this.dt)).cast(dtype), [re], [], out.ref());
      }
      return out;
    }
    const out = Tensor.empty(this.shape, dtype, this.device, false);
    if (out.numel() > 0) backendFor(this.device).elementwise(Expr.load(0, this.dt).cast(dtype), [this.ref()], [], out.ref());
    return out;
  }

  contiguous(): Tensor { return this.is_contiguous() ? this : this.copyAs(); }
  clone(): Tensor { return this.copyAs(); }

  /**
   * `to(dtype)`, `to(device)`, `to(device, dtype)`, `to(other)` or `to({ dtype, device, copy })`, as
   * PyTorch. A dtype is a DType (nbx.float32, nbx.float, nbx.long, ...) or its name ('float32', 'long');
   * anything else is a typed error, never ignored.
   */
  to(a?: DTypeLike | DeviceLike | Tensor | ToOptions, b?: DTypeLike | ToOptions, c?: ToOptions): Tensor {
    let dtype: DTypeName | undefined, device: Device | undefined, copy = false;
    for (const x of [a, b, c]) {
      if (x === undefined) continue;
      if (x instanceof Tensor) { dtype = x.dt; device = x.device; continue; }
      if (isDTypeLike(x)) { dtype = dtypeName(x); continue; }
      if (x instanceof Device || (typeof x === 'string' && /^(cpu|cuda|webgpu)(:\d+)?$/.test(x))) { device = Device.of(x); continue; }
      if (x === null || typeof x !== 'object' || Object.getPrototypeOf(x) !== Object.prototype) {
        const hint = typeof x === 'string' ? ` (dtypes: ${Object.keys(DTYPES).join(', ')}; devices: cpu, cuda, webgpu)`
          : x !== null && typeof x === 'object' && 'kind' in x ? ' (a scalar wrapper is not a dtype: nbx.float is the dtype float32)' : '';
        throw new DTypeError('to', `expected a dtype, a device, a tensor or an options object, got ${typeof x === 'string' ? `'${x}'` : String(x)}${hint}`);
      }
      const o = x as Record<string, unknown>;
      for (const k of Object.keys(o)) {
        if (!['dtype', 'device', 'copy', 'non_blocking'].includes(k)) {
          throw new ValueError('to', `to() got an unexpected keyword argument '${k}' (keywords: dtype, device, copy, non_blocking)`);
        }
      }
      if (o.dtype !== undefined && o.dtype !== null) dtype = dtypeName(o.dtype as DTypeLike);
      if (o.device !== undefined && o.device !== null) device = Device.of(o.device as DeviceLike);
      if (o.copy) copy = true;
    }
    let t: Tensor = this;
    if (device && device !== this.device) t = t.toDevice(device);
    if (dtype && dtype !== t.dt) {
      const c = t.copyAs(dtype);
      if (t !== this) t.dispose();
      t = c;
    }
    if (t === this) return copy ? this.clone() : this;
    return t;
  }

  private toDevice(device: Device): Tensor {
    const src = this.contiguous();
    try {
      return Tensor.fromStorage(src.dataStorageSync(`to('${device}')`), this.dt, this.shape, device);
    } finally { if (src !== this) src.dispose(); }
  }

  /**
   * A CPU tensor with the same values. `await t.cpu()` works on every device; on the CPU (itself) and
   * CUDA (synchronous readback) the result is a Tensor, usable without `await` as in PyTorch; on WebGPU,
   * whose buffers can only be mapped asynchronously, it is a Promise of one.
   */
  cpu(): Tensor | Promise<Tensor> {
    if (this.device.type === 'cpu') return this;
    if (backendFor(this.device).downloadSync) return this.to('cpu');
    return this.dataStorage().then((data) => Tensor.fromStorage(data, this.dt, this.shape, 'cpu'));
  }
  cuda(): Tensor { return this.to('cuda'); }

  /** Contiguous storage-convention copy of the elements, read back synchronously. `op` names the caller in errors. */
  dataStorageSync(op = 'dataSync'): StorageArray {
    const c = this.contiguous();
    try {
      const s = c.storage;
      const lanes = DTYPES[this.dt].lanes;
      if (s.device.type === 'cpu') {
        refuseReadWhileRecording(op);
        const a = s.buf as StorageArray;
        // a copy: the caller may keep it after the tensor is disposed and its buffer reused
        return a.slice(c._offset * lanes, (c._offset + c.numel()) * lanes) as StorageArray;
      }
      const b = backendFor(s.device);
      if (!b.downloadSync) throw readbackError(op, s.device);
      return b.downloadSync(s.buf, this.dt, c._offset, c.numel());
    } finally { if (c !== this) c.dispose(); }
  }

  /** Contiguous storage-convention copy, read back without blocking the event loop. */
  async dataStorage(): Promise<StorageArray> {
    if (this.device.type === 'cpu') return this.dataStorageSync();
    const c = this.contiguous();
    try { return await backendFor(c.device).download(c.storage.buf, this.dt, c._offset, c.numel()); } finally { if (c !== this) c.dispose(); }
  }

  /** The elements in row-major order: float16/bfloat16/float8 as Float32Array, int64 as BigInt64Array, bool as Uint8Array. */
  async data(): Promise<StorageArray> { return toValues(this.dt, await this.dataStorage()); }
  dataSync(): StorageArray { return toValues(this.dt, this.dataStorageSync('dataSync')); }

  item(): number | boolean | bigint | [number, number] {
    if (this.numel() !== 1) throw new ValueError('item', `a Tensor with ${this.numel()} elements cannot be converted to Scalar`);
    const a = this.dataStorageSync('item');
    if (this.dt === 'bool') return a[0] !== 0;
    if (this.dt === 'int64') { const v = (a as BigInt64Array)[0]!; return Number.isSafeInteger(Number(v)) ? Number(v) : v; }
    // JavaScript has no complex numbers: a complex element is its [re, im] pair, as in tolist().
    if (DTYPES[this.dt].kind === 'complex') return [(a as Float32Array)[0]!, (a as Float32Array)[1]!];
    return readNumber(this.dt, a, 0);
  }

  /**
   * Nested arrays, like PyTorch's tolist(): booleans for bool, [re, im] pairs for complex, numbers
   * otherwise. int64 has one rule for the whole tensor: numbers when every element is a safe integer
   * (|v| < 2^53), otherwise every element is a bigint, so the element type never varies inside one list.
   */
  tolist(): unknown {
    const a = this.dataStorageSync('tolist');
    const isC = DTYPES[this.dt].kind === 'complex';
    const bigints = this.dt === 'int64' && (a as BigInt64Array).some((v) => v > 9007199254740991n || v < -9007199254740991n);
    const get = (i: number): unknown => {
      if (this.dt === 'bool') return a[i] !== 0;
      if (this.dt === 'int64') { const v = (a as BigInt64Array)[i]!; return bigints ? v : Number(v); }
      if (isC) return [(a as Float32Array)[2 * i]!, (a as Float32Array)[2 * i + 1]!];
      return readNumber(this.dt, a, i);
    };
    const build = (dim: number, base: number): unknown => {
      if (dim === this.ndim) return get(base);
      const stride = numelOf(this.shape.slice(dim + 1));
      return [...Array(this.shape[dim]!).keys()].map((i) => build(dim + 1, base + i * stride));
    };
    return build(0, 0);
  }
}

/** The error of a synchronous read on a device that has none; it names the calls that work. */
function readbackError(op: string, device: Device): DeviceLimitError {
  const call = op === 'item' || op === 'tolist' ? `(await t.cpu()).${op}()` : op === 'dataSync' ? 'await t.data()' : 'await t.cpu()';
  return new DeviceLimitError(op, `${device} tensors cannot be read synchronously (WebGPU maps buffers only asynchronously): use ${call}` +
    (op.startsWith('to(') && !op.includes('cpu') ? `, then .to('${op.slice(4, -2)}')` : '') + '; await t.cpu() gives a CPU tensor on every device');
}

export function toValues(d: DTypeName, a: StorageArray): StorageArray {
  if (d === 'float16' || d === 'bfloat16' || d === 'float8_e4m3fn' || d === 'float8_e5m2') {
    const out = new Float32Array(a.length);
    for (let i = 0; i < a.length; i++) out[i] = readNumber(d, a, i);
    return out;
  }
  return a;
}

/** Broadcast shape of several tensors, with PyTorch's message on mismatch. */
export function broadcastTensors(op: string, ts: readonly Tensor[]): number[] {
  return broadcastShapes(op, ...ts.map((t) => t.shape));
}
