import { takeHost, takeSmallHost } from '../memory/host_pool.js';
import type { StorageArray } from './storage.js';
import { DTypeError, OutOfMemoryError } from '../errors.js';
import { formatBytes } from '../memory/caching_allocator.js';
import { collectGarbage, hostPressure, physicalMemoryBytes } from '../memory/gc_pressure.js';

// The dtype table. Everything the engine knows about a dtype is in this one table: size, category,
// how the CPU stores it, its range, and its names in other formats. Code asks the table; it does not
// switch on dtype names.

export type DTypeName =
  | 'bool' | 'uint8' | 'int8' | 'int16' | 'int32' | 'int64'
  | 'float16' | 'bfloat16' | 'float32' | 'float64'
  | 'float8_e4m3fn' | 'float8_e5m2'
  | 'complex64' | 'complex128';

/** Category, in PyTorch's promotion order: bool < int < float < complex. */
export type DTypeKind = 'bool' | 'int' | 'float' | 'complex';

/** How the CPU backend holds elements. Half-precision types are held as their bits. */
export type StorageKind = 'u8' | 'i8' | 'i16' | 'i32' | 'i64' | 'u16' | 'f32' | 'f64';

export interface DTypeInfo {
  readonly name: DTypeName;
  readonly itemsize: number;
  readonly kind: DTypeKind;
  readonly signed: boolean;
  readonly storage: StorageKind;
  /** Elements of storage per logical element (2 for complex: real, imaginary). */
  readonly lanes: number;
  /** Storage-only types: conversion works, arithmetic is refused (as in PyTorch). */
  readonly storageOnly: boolean;
  /** Integer range (for wrap-around and clamping); undefined for floats. */
  readonly min?: number;
  readonly max?: number;
  /** safetensors code. */
  readonly safetensors?: string;
  /** Rank inside its kind for promotion (wider = higher). */
  readonly rank: number;
}

const row = (name: DTypeName, itemsize: number, kind: DTypeKind, signed: boolean, storage: StorageKind,
  rank: number, extra: Partial<DTypeInfo> = {}): DTypeInfo =>
  ({ name, itemsize, kind, signed, storage, lanes: 1, storageOnly: false, rank, ...extra });

export const DTYPES: Readonly<Record<DTypeName, DTypeInfo>> = {
  bool: row('bool', 1, 'bool', false, 'u8', 0, { min: 0, max: 1, safetensors: 'BOOL' }),
  uint8: row('uint8', 1, 'int', false, 'u8', 1, { min: 0, max: 255, safetensors: 'U8' }),
  int8: row('int8', 1, 'int', true, 'i8', 1, { min: -128, max: 127, safetensors: 'I8' }),
  int16: row('int16', 2, 'int', true, 'i16', 2, { min: -32768, max: 32767, safetensors: 'I16' }),
  int32: row('int32', 4, 'int', true, 'i32', 3, { min: -2147483648, max: 2147483647, safetensors: 'I32' }),
  int64: row('int64', 8, 'int', true, 'i64', 4, { min: -9223372036854775808, max: 9223372036854775807, safetensors: 'I64' }),
  float16: row('float16', 2, 'float', true, 'u16', 1, { safetensors: 'F16' }),
  bfloat16: row('bfloat16', 2, 'float', true, 'u16', 1, { safetensors: 'BF16' }),
  float32: row('float32', 4, 'float', true, 'f32', 2, { safetensors: 'F32' }),
  float64: row('float64', 8, 'float', true, 'f64', 3, { safetensors: 'F64' }),
  float8_e4m3fn: row('float8_e4m3fn', 1, 'float', true, 'u8', 0, { storageOnly: true, safetensors: 'F8_E4M3' }),
  float8_e5m2: row('float8_e5m2', 1, 'float', true, 'u8', 0, { storageOnly: true, safetensors: 'F8_E5M2' }),
  complex64: row('complex64', 8, 'complex', true, 'f32', 2, { lanes: 2 }),
  complex128: row('complex128', 16, 'complex', true, 'f64', 3, { lanes: 2 }),
};

export const ALL_DTYPES = Object.keys(DTYPES) as DTypeName[];

/** A dtype object, as `nbx.float32`; compares by identity and prints like PyTorch. */
export class DType {
  private constructor(readonly name: DTypeName) {}
  get info(): DTypeInfo { return DTYPES[this.name]; }
  get itemsize(): number { return DTYPES[this.name].itemsize; }
  get is_floating_point(): boolean { return DTYPES[this.name].kind === 'float'; }
  get is_complex(): boolean { return DTYPES[this.name].kind === 'complex'; }
  get is_signed(): boolean { return DTYPES[this.name].signed; }
  toString(): string { return `nbx.${this.name}`; }
  static readonly all: Readonly<Record<DTypeName, DType>> = Object.fromEntries(
    ALL_DTYPES.map((n) => [n, new DType(n)])) as Record<DTypeName, DType>;
}

export type DTypeLike = DType | DTypeName;

/** Aliases PyTorch accepts (torch.float, torch.half, torch.long, ...). */
const ALIASES: Record<string, DTypeName> = {
  float: 'float32', double: 'float64', half: 'float16', long: 'int64', int: 'int32', short: 'int16',
  cfloat: 'complex64', cdouble: 'complex128',
};
/** PyTorch's alias names, for documentation and error messages. */
export const DTYPE_ALIASES: Readonly<Record<string, DTypeName>> = ALIASES;

export function dtypeName(d: DTypeLike | string): DTypeName {
  if (d instanceof DType) return d.name;
  if (typeof d !== 'string') {
    const hint = isScalarWrapper(d) ? ` (${String(d)} is a scalar: nbx.scalar.float(x) wraps a value; the dtype is nbx.float32 or 'float32')` : '';
    throw new DTypeError('dtype', `expected a dtype (nbx.float32, nbx.float, 'float32', ...), got ${describe(d)}${hint}`);
  }
  if (d in DTYPES) return d as DTypeName;
  const stripped = d.startsWith('torch.') || d.startsWith('nbx.') ? d.slice(d.indexOf('.') + 1) : d;
  if (stripped in DTYPES) return stripped as DTypeName;
  if (stripped in ALIASES) return ALIASES[stripped]!;
  throw new DTypeError('dtype', `unknown dtype '${d}'; known: ${ALL_DTYPES.join(', ')} and PyTorch's aliases ${Object.keys(ALIASES).join(', ')}`);
}

/** Whether `x` is a dtype or a dtype name (alias included). */
export function isDTypeLike(x: unknown): x is DTypeLike {
  if (x instanceof DType) return true;
  if (typeof x !== 'string') return false;
  const stripped = x.startsWith('torch.') || x.startsWith('nbx.') ? x.slice(x.indexOf('.') + 1) : x;
  return stripped in DTYPES || stripped in ALIASES;
}

const isScalarWrapper = (x: unknown): boolean =>
  x !== null && typeof x === 'object' && 'kind' in x && 'value' in x;
function describe(x: unknown): string {
  if (x === null) return 'null';
  if (typeof x === 'object') return `${x.constructor?.name ?? 'object'} ${String(x)}`;
  return `${typeof x} ${String(x)}`;
}

export const info = (d: DTypeName): DTypeInfo => DTYPES[d];
export const isFloat = (d: DTypeName): boolean => DTYPES[d].kind === 'float';
export const isComplex = (d: DTypeName): boolean => DTYPES[d].kind === 'complex';
export const isIntegral = (d: DTypeName, includeBool = false): boolean =>
  DTYPES[d].kind === 'int' || (includeBool && d === 'bool');
/** Half-precision floats that PyTorch's CPU computes in float32 and rounds once. */
export const isLowPrecisionFloat = (d: DTypeName): boolean => d === 'float16' || d === 'bfloat16';

export function fromSafetensorsCode(code: string): DTypeName | undefined {
  for (const d of ALL_DTYPES) if (DTYPES[d].safetensors === code) return d;
  return undefined;
}

export type { StorageArray } from './storage.js';

export const STORAGE_CTORS = {
  u8: Uint8Array, i8: Int8Array, i16: Int16Array, i32: Int32Array, i64: BigInt64Array,
  u16: Uint16Array, f32: Float32Array, f64: Float64Array,
} as const;

/** Buffers of at least this many bytes are shared memory, so CPU worker threads can work on them in place. */
export const SHARED_MIN_BYTES = 1 << 20;

/** A CPU storage array for `numel` elements of `d`: zero-filled unless `zero` is false (then contents are arbitrary). */
/** Below this size host buffers come from the small-buffer free lists (see memory/host_pool.ts). */
const SMALL_POOL_BYTES = 64 << 10;

/**
 * Refuses a host allocation larger than the machine's memory before anything is computed for it (a
 * random op would otherwise sample for minutes first): OutOfMemoryError naming the size.
 */
export function checkHostAllocation(op: string, d: DTypeName, numel: number): void {
  const bytes = numel * DTYPES[d].itemsize;
  if (bytes > physicalMemoryBytes) {
    throw new OutOfMemoryError(op, `tried to allocate ${formatBytes(bytes)} (${numel} elements of ${d}) on the cpu, more than this machine's ${formatBytes(physicalMemoryBytes)} of memory`);
  }
}

export function allocStorage(d: DTypeName, numel: number, zero = true): StorageArray {
  const i = DTYPES[d];
  const ctor = STORAGE_CTORS[i.storage];
  const count = numel * i.lanes;
  const bytes = count * ctor.BYTES_PER_ELEMENT;
  checkHostAllocation('cpu', d, numel);
  if (bytes < SMALL_POOL_BYTES) return takeSmallHost(ctor, count, zero) ?? new ctor(count);
  const shared = bytes >= SHARED_MIN_BYTES;
  const pooled = takeHost(ctor.name, count, shared, zero);
  if (pooled) return pooled;
  const make = (): StorageArray => {
    if (!shared) return new ctor(count);
    hostPressure.note(bytes);
    return new ctor(new SharedArrayBuffer(bytes) as unknown as ArrayBuffer) as StorageArray;
  };
  try {
    return make();
  } catch (e) {
    // V8 refuses sizes over its ArrayBuffer limit, and any size the OS will not give, with a RangeError.
    if (!(e instanceof RangeError)) throw e;
    // tensors nobody disposed may hold the memory: collect them and try once more
    if (collectGarbage()) { try { return make(); } catch { /* reported below */ } }
    throw new OutOfMemoryError('cpu', `tried to allocate ${formatBytes(bytes)} (${numel} elements of ${d}) on the cpu and the allocation failed (${e.message}); free tensors with dispose() or use a smaller size`);
  }
}

/** View raw bytes (e.g. from a file) as the storage array of `d`, copying only if misaligned. */
export function storageFromBytes(d: DTypeName, bytes: Uint8Array): StorageArray {
  const i = DTYPES[d];
  const ctor = STORAGE_CTORS[i.storage];
  const bpe = ctor.BYTES_PER_ELEMENT;
  if (bytes.byteOffset % bpe !== 0) bytes = bytes.slice();
  return new ctor(bytes.buffer as ArrayBuffer, bytes.byteOffset, bytes.byteLength / bpe) as StorageArray;
}

export function storageBytes(a: StorageArray): Uint8Array {
  return new Uint8Array(a.buffer, a.byteOffset, a.byteLength);
}
