// The backend contract: what the tensor core needs from a device. Kept small on purpose: memory,
// copies, and the elementwise/reduction IR; every other kernel goes through the kernel registry
// (src/kernels/registry.ts), keyed by (operation, device type).

import type { DTypeName, StorageArray } from '../dtype/dtypes.js';
import type { Expr } from '../ir/expr.js';
import { DeviceError } from '../errors.js';

export type DeviceType = 'cpu' | 'cuda' | 'webgpu';

export class Device {
  private constructor(readonly type: DeviceType, readonly index: number) {}
  toString(): string { return this.type === 'cpu' ? 'cpu' : `${this.type}:${this.index}`; }
  private static cache = new Map<string, Device>();
  static of(spec: DeviceLike): Device {
    if (spec instanceof Device) return spec;
    // Every fresh tensor resolves its device ('cpu' by default): a spelling seen before skips the regex.
    const seen = Device.cache.get(spec);
    if (seen !== undefined) return seen;
    const m = /^(cpu|cuda|webgpu)(?::(\d+))?$/.exec(spec);
    if (!m) throw new DeviceError('device', `Expected one of cpu, cuda, webgpu device type at start of device string: ${spec}`);
    const type = m[1] as DeviceType, index = m[2] ? Number(m[2]) : 0;
    const key = `${type}:${index}`;
    let d = Device.cache.get(key);
    if (!d) { d = new Device(type, index); Device.cache.set(key, d); }
    Device.cache.set(spec, d);
    return d;
  }
}
export type DeviceLike = Device | string;

/** A strided operand as a backend sees it: buffer, dtype, and how to index it. */
export interface StridedRef {
  buf: unknown;
  dtype: DTypeName;
  shape: readonly number[];
  strides: readonly number[];
  offset: number;
}

/**
 * True when `r` is laid out exactly like a fresh contiguous tensor of `shape` (size-1 dims may have any
 * stride): every backend's elementwise fast path for operands that need no broadcasting or strides.
 */
export function denseAs(r: StridedRef, shape: readonly number[]): boolean {
  if (r.shape.length !== shape.length) return false;
  let acc = 1;
  for (let d = shape.length - 1; d >= 0; d--) {
    const z = shape[d]!;
    if (r.shape[d] !== z) return false;
    if (z !== 1 && r.strides[d] !== acc) return false;
    acc *= z;
  }
  return true;
}

/** The smallest power of two ≥ n (1 for n ≤ 1): workgroup, block and tree sizes. */
export const nextPow2 = (n: number): number => 2 ** Math.ceil(Math.log2(Math.max(n, 1)));

export interface Backend {
  readonly type: DeviceType;
  /** A buffer of `numel` elements of `dtype`; contents undefined unless `zero`. */
  alloc(dtype: DTypeName, numel: number, zero?: boolean): unknown;
  free(buf: unknown): void;
  /** Copies contiguous host storage into a new device buffer. */
  upload(dtype: DTypeName, data: StorageArray): unknown;
  /** Reads `numel` elements starting at element `offset` back to the host, without blocking the event loop. */
  download(buf: unknown, dtype: DTypeName, offset: number, numel: number): Promise<StorageArray>;
  /** Synchronous readback where the device allows it (CPU always; GPUs block the thread). */
  downloadSync?(buf: unknown, dtype: DTypeName, offset: number, numel: number): StorageArray;
  /** Evaluates `expr` for every element of `out` (contiguous), inputs broadcast to out's shape. */
  elementwise(expr: Expr, inputs: StridedRef[], params: (number | bigint)[], out: StridedRef): void;
  /** Waits for queued work. */
  synchronize(): Promise<void>;
}

const backends = new Map<DeviceType, Backend>();
const loaders = new Map<DeviceType, () => Backend>();

/** Heavy backends register a loader; they are created only when a tensor first asks for them. */
export function registerBackendLoader(type: DeviceType, load: () => Backend): void { loaders.set(type, load); }
export function registerBackend(b: Backend): void { backends.set(b.type, b); }

export function backendFor(device: Device): Backend {
  let b = backends.get(device.type);
  if (!b) {
    const load = loaders.get(device.type);
    if (!load) throw new DeviceError('device', `no ${device.type} backend is available in this build; run 'nbx info' to see the backends found`);
    b = load();
    backends.set(device.type, b);
  }
  return b;
}
export function loadedBackends(): Backend[] { return [...backends.values()]; }
