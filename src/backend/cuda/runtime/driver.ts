// CUDA driver API bindings (through koffi) and a thin typed wrapper.
//
// * Only libcuda is used (no CUDA runtime). Versioned entry points (_v2) are bound by their
//   exported names, as cuda.h of CUDA 13.0 maps them (cuMemAlloc -> cuMemAlloc_v2, ...).
// * Every CUresult != 0 becomes a typed error naming the call and the error name:
//   OutOfMemoryError for CUDA_ERROR_OUT_OF_MEMORY, CudaFaultError (a DeviceFaultError) for the
//   sticky errors that leave the context unusable (illegal address, launch failed, ...), and
//   CudaError (a DeviceError) for everything else. After a sticky error the context is marked
//   poisoned: every later call throws DeviceFaultError("context is unusable after ...").
// * Kernel launches go through one reusable, natively allocated parameter block: argument
//   values are written into fixed 8-byte slots through typed-array views, and the void*[]
//   array that cuLaunchKernel reads points at those slots once and for all. A launch therefore
//   allocates nothing on the native side and costs one FFI call.
// * Waiting without blocking the event loop: Stream.synchronizeAsync() and CudaEvent.wait()
//   poll cuStreamQuery / cuEventQuery with setImmediate for the first ~2 ms, then with timers.

import koffi, { type LibraryHandle } from 'koffi';
import { DeviceError, DeviceFaultError, GraphCaptureError, OutOfMemoryError, UnsupportedError, ValueError } from '../../../errors.js';
import type { RawAllocator } from '../../../memory/caching_allocator.js';
import {
  CU_RESULT_NAMES,
  CuQueryError,
  type CudaDeviceInfo,
  type DeviceQueryFns,
  bindDeviceQueries,
  formatCudaVersion,
  loadCudaLibrary,
  queryDevice,
} from './libs.js';

export type { CudaDeviceInfo } from './libs.js';

/** A device address (CUdeviceptr). */
export type DevicePtr = bigint;

/**
 * CUresult codes after which the context cannot be used any more ("This leaves the process in
 * an inconsistent state and any further CUDA work will return the same error", cuda.h 13.0),
 * plus the uncorrectable ECC / NVLink errors.
 */
export const STICKY_ERRORS: ReadonlySet<number> = new Set([
  214, // ECC_UNCORRECTABLE
  220, // NVLINK_UNCORRECTABLE
  226, // CONTAINED
  700, // ILLEGAL_ADDRESS
  702, // LAUNCH_TIMEOUT
  710, // ASSERT (device-side assert)
  714, // HARDWARE_STACK_ERROR
  715, // ILLEGAL_INSTRUCTION
  716, // MISALIGNED_ADDRESS
  717, // INVALID_ADDRESS_SPACE
  718, // INVALID_PC
  719, // LAUNCH_FAILED
  721, // TENSOR_MEMORY_LEAK
  810, // MPS_CLIENT_TERMINATED
  911, // EXTERNAL_DEVICE
]);

export const CUDA_SUCCESS = 0;
export const CUDA_ERROR_OUT_OF_MEMORY = 2;
export const CUDA_ERROR_NOT_READY = 600;

export const CU_STREAM_DEFAULT = 0;
const CU_STREAM_CAPTURE_MODE_THREAD_LOCAL = 1;
const CU_STREAM_CAPTURE_MODE_RELAXED = 2;
export const CU_STREAM_NON_BLOCKING = 1;
export const CU_EVENT_DEFAULT = 0;
export const CU_EVENT_BLOCKING_SYNC = 1;
export const CU_EVENT_DISABLE_TIMING = 2;
export const CU_MEMHOSTALLOC_PORTABLE = 1;
export const CU_MEMHOSTALLOC_DEVICEMAP = 2;
export const CU_MEMHOSTALLOC_WRITECOMBINED = 4;

/** CUfunction_attribute (cuda.h 13.0). */
export const CU_FUNC_ATTRIBUTE = {
  MAX_THREADS_PER_BLOCK: 0,
  SHARED_SIZE_BYTES: 1,
  CONST_SIZE_BYTES: 2,
  LOCAL_SIZE_BYTES: 3,
  NUM_REGS: 4,
  PTX_VERSION: 5,
  BINARY_VERSION: 6,
  CACHE_MODE_CA: 7,
  MAX_DYNAMIC_SHARED_SIZE_BYTES: 8,
  PREFERRED_SHARED_MEMORY_CARVEOUT: 9,
} as const;

/** A CUDA error that does not poison the context. `code` is the CUresult. */
export class CudaError extends DeviceError {
  readonly code: number;
  readonly errorName: string;
  readonly call: string;
  constructor(call: string, code: number, errorName: string, message: string) {
    super(`cuda.${call}`, message);
    this.code = code;
    this.errorName = errorName;
    this.call = call;
  }
}

/** A sticky CUDA error: the context is unusable from now on. */
export class CudaFaultError extends DeviceFaultError {
  readonly code: number;
  readonly errorName: string;
  readonly call: string;
  /** Name of the kernel launched last before the fault was seen (faults are asynchronous). */
  readonly kernel: string | null;
  constructor(call: string, code: number, errorName: string, kernel: string | null, message: string) {
    super(`cuda.${call}`, message);
    this.code = code;
    this.errorName = errorName;
    this.call = call;
    this.kernel = kernel;
  }
}

// -------------------------------------------------------------------------------------------
// bindings

type Ptr = bigint | null;
type Out64 = BigUint64Array;
type Out32 = Int32Array;

interface CuFns extends DeviceQueryFns {
  cuInit(flags: number): number;
  cuDriverGetVersion(out: Out32): number;
  cuDeviceGetCount(out: Out32): number;
  cuGetErrorName(code: number, out: Out64): number;
  cuGetErrorString(code: number, out: Out64): number;
  cuDevicePrimaryCtxRetain(out: Out64, dev: number): number;
  cuCtxSetCurrent(ctx: Ptr): number;
  cuCtxSynchronize(): number;
  cuMemGetInfo(free: Out64, total: Out64): number;
  cuMemAlloc(out: Out64, bytes: number): number;
  cuMemFree(ptr: bigint): number;
  cuMemHostAlloc(out: Out64, bytes: number, flags: number): number;
  cuMemHostGetDevicePointer(out: Out64, host: bigint, flags: number): number;
  cuMemFreeHost(p: bigint): number;
  cuMemcpyHtoDAsync(dst: bigint, src: ArrayBufferView | bigint, bytes: number, stream: Ptr): number;
  cuMemcpyDtoHAsync(dst: ArrayBufferView | bigint, src: bigint, bytes: number, stream: Ptr): number;
  cuMemcpyDtoDAsync(dst: bigint, src: bigint, bytes: number, stream: Ptr): number;
  cuMemsetD8Async(dst: bigint, value: number, count: number, stream: Ptr): number;
  cuMemsetD32Async(dst: bigint, value: number, count: number, stream: Ptr): number;
  cuStreamCreate(out: Out64, flags: number): number;
  cuStreamDestroy(s: bigint): number;
  cuStreamSynchronize(s: Ptr): number;
  cuStreamQuery(s: Ptr): number;
  cuStreamWaitEvent(s: Ptr, e: bigint, flags: number): number;
  cuEventCreate(out: Out64, flags: number): number;
  cuEventDestroy(e: bigint): number;
  cuEventRecord(e: bigint, s: Ptr): number;
  cuEventQuery(e: bigint): number;
  cuEventSynchronize(e: bigint): number;
  cuStreamBeginCapture(s: bigint, mode: number): number;
  cuStreamEndCapture(s: bigint, out: Out64): number;
  cuStreamIsCapturing(s: bigint, out: Out32): number;
  cuThreadExchangeStreamCaptureMode(mode: Out32): number;
  cuGraphInstantiate(out: Out64, graph: bigint, flags: bigint): number;
  cuGraphLaunch(exec: bigint, s: bigint): number;
  cuGraphExecDestroy(exec: bigint): number;
  cuGraphDestroy(graph: bigint): number;
  cuGraphGetNodes(graph: bigint, nodes: null, count: Out64): number;
  cuEventElapsedTime(out: Float32Array, start: bigint, end: bigint): number;
  cuModuleLoadData(out: Out64, image: Uint8Array): number;
  cuModuleUnload(m: bigint): number;
  cuModuleGetFunction(out: Out64, m: bigint, name: string): number;
  cuFuncSetAttribute(f: bigint, attr: number, value: number): number;
  cuFuncGetAttribute(out: Out32, attr: number, f: bigint): number;
  cuLaunchKernelEx: ((config: bigint, f: bigint, params: bigint, extra: null) => number) | null;
  cuTensorMapEncodeTiled: ((...a: unknown[]) => number) | null;
  cuLaunchKernel(
    f: bigint,
    gx: number,
    gy: number,
    gz: number,
    bx: number,
    by: number,
    bz: number,
    smem: number,
    stream: Ptr,
    params: bigint,
    extra: null,
  ): number;
}

interface Driver {
  fns: CuFns;
  libPath: string;
  version: number;
}

let driver: Driver | null = null;

function bind(lib: LibraryHandle, names: string[], ret: string, args: string[]): (...a: unknown[]) => number {
  let lastErr: unknown = null;
  for (const n of names) {
    try {
      return lib.func(n, ret, args) as (...a: unknown[]) => number;
    } catch (e) {
      lastErr = e;
    }
  }
  throw new DeviceError('cuda', `libcuda lacks ${names.join(' / ')}: ${lastErr instanceof Error ? lastErr.message : String(lastErr)}`);
}

/** An entry point some drivers lack, as null when missing (the caller takes another path). */
function bindMaybe(lib: LibraryHandle, names: string[], ret: string, args: string[]): ((...a: unknown[]) => number) | null {
  try { return bind(lib, names, ret, args); } catch { return null; }
}

/** An entry point some drivers lack: calling it then throws UnsupportedError naming it (nothing else is affected). */
function bindOptional(lib: LibraryHandle, names: string[], ret: string, args: string[]): (...a: unknown[]) => number {
  try {
    return bind(lib, names, ret, args);
  } catch {
    return () => { throw new UnsupportedError('cuda.graph', `this CUDA driver lacks ${names.join(' / ')}: CUDA graphs need a driver for CUDA 11.4 or later`); };
  }
}

/** Load libcuda, bind the entry points and cuInit(0) (once). Throws DeviceError when unavailable. */
export function loadDriver(): Driver {
  if (driver) return driver;
  const { lib, path } = loadCudaLibrary('cuda');
  const P = 'void *';
  const q = bindDeviceQueries(lib);
  const f = {
    ...q,
    cuGetErrorString: bind(lib, ['cuGetErrorString'], 'int', ['int', P]),
    cuDevicePrimaryCtxRetain: bind(lib, ['cuDevicePrimaryCtxRetain'], 'int', [P, 'int']),
    cuCtxSetCurrent: bind(lib, ['cuCtxSetCurrent'], 'int', [P]),
    cuCtxSynchronize: bind(lib, ['cuCtxSynchronize'], 'int', []),
    cuMemGetInfo: bind(lib, ['cuMemGetInfo_v2'], 'int', [P, P]),
    cuMemAlloc: bind(lib, ['cuMemAlloc_v2'], 'int', [P, 'size_t']),
    cuMemFree: bind(lib, ['cuMemFree_v2'], 'int', ['uint64_t']),
    cuMemHostAlloc: bind(lib, ['cuMemHostAlloc'], 'int', [P, 'size_t', 'uint']),
    cuMemHostGetDevicePointer: bindOptional(lib, ['cuMemHostGetDevicePointer_v2', 'cuMemHostGetDevicePointer'], 'int', [P, P, 'uint']),
    cuMemFreeHost: bind(lib, ['cuMemFreeHost'], 'int', [P]),
    cuMemcpyHtoDAsync: bind(lib, ['cuMemcpyHtoDAsync_v2'], 'int', ['uint64_t', P, 'size_t', P]),
    cuMemcpyDtoHAsync: bind(lib, ['cuMemcpyDtoHAsync_v2'], 'int', [P, 'uint64_t', 'size_t', P]),
    cuMemcpyDtoDAsync: bind(lib, ['cuMemcpyDtoDAsync_v2'], 'int', ['uint64_t', 'uint64_t', 'size_t', P]),
    cuMemsetD8Async: bind(lib, ['cuMemsetD8Async'], 'int', ['uint64_t', 'uint8_t', 'size_t', P]),
    cuMemsetD32Async: bind(lib, ['cuMemsetD32Async'], 'int', ['uint64_t', 'uint', 'size_t', P]),
    cuStreamCreate: bind(lib, ['cuStreamCreate'], 'int', [P, 'uint']),
    cuStreamDestroy: bind(lib, ['cuStreamDestroy_v2'], 'int', [P]),
    cuStreamSynchronize: bind(lib, ['cuStreamSynchronize'], 'int', [P]),
    cuStreamQuery: bind(lib, ['cuStreamQuery'], 'int', [P]),
    cuStreamWaitEvent: bind(lib, ['cuStreamWaitEvent'], 'int', [P, P, 'uint']),
    cuEventCreate: bind(lib, ['cuEventCreate'], 'int', [P, 'uint']),
    cuEventDestroy: bind(lib, ['cuEventDestroy_v2'], 'int', [P]),
    cuEventRecord: bind(lib, ['cuEventRecord'], 'int', [P, P]),
    cuEventQuery: bind(lib, ['cuEventQuery'], 'int', [P]),
    cuEventSynchronize: bind(lib, ['cuEventSynchronize'], 'int', [P]),
    // CUDA 13.0 maps cuEventElapsedTime to _v2; older drivers only have the original.
    cuEventElapsedTime: bind(lib, ['cuEventElapsedTime_v2', 'cuEventElapsedTime'], 'int', [P, P, P]),
    cuModuleLoadData: bind(lib, ['cuModuleLoadData'], 'int', [P, P]),
    cuModuleUnload: bind(lib, ['cuModuleUnload'], 'int', [P]),
    cuModuleGetFunction: bind(lib, ['cuModuleGetFunction'], 'int', [P, P, 'const char *']),
    cuFuncSetAttribute: bind(lib, ['cuFuncSetAttribute'], 'int', [P, 'int', 'int']),
    cuFuncGetAttribute: bind(lib, ['cuFuncGetAttribute'], 'int', [P, 'int', P]),
    cuLaunchKernel: bind(lib, ['cuLaunchKernel'], 'int', [P, 'uint', 'uint', 'uint', 'uint', 'uint', 'uint', 'uint', P, P, P]),
    // launches with attributes (programmatic dependent launch); CUDA 12.0+, absent from older drivers and the emulator
    cuLaunchKernelEx: bindMaybe(lib, ['cuLaunchKernelEx'], 'int', [P, P, P, P]),
    // tensor-memory-accelerator descriptors (CUDA 12.0+; absent: the kernels that use them take their other path)
    cuTensorMapEncodeTiled: bindMaybe(lib, ['cuTensorMapEncodeTiled'], 'int', [P, 'int', 'uint', 'uint64_t', P, P, P, P, 'int', 'int', 'int', 'int']),
    // stream capture and graphs (CUDA >= 11.4 has every one of these names; a driver without them
    // still runs everything else, and a capture says what is missing)
    cuStreamBeginCapture: bindOptional(lib, ['cuStreamBeginCapture_v2', 'cuStreamBeginCapture'], 'int', [P, 'int']),
    cuStreamEndCapture: bindOptional(lib, ['cuStreamEndCapture'], 'int', [P, P]),
    cuStreamIsCapturing: bindOptional(lib, ['cuStreamIsCapturing'], 'int', [P, P]),
    cuThreadExchangeStreamCaptureMode: bindOptional(lib, ['cuThreadExchangeStreamCaptureMode'], 'int', [P]),
    cuGraphInstantiate: bindOptional(lib, ['cuGraphInstantiateWithFlags'], 'int', [P, P, 'uint64_t']),
    cuGraphLaunch: bindOptional(lib, ['cuGraphLaunch'], 'int', [P, P]),
    cuGraphExecDestroy: bindOptional(lib, ['cuGraphExecDestroy'], 'int', [P]),
    cuGraphDestroy: bindOptional(lib, ['cuGraphDestroy'], 'int', [P]),
    cuGraphGetNodes: bindOptional(lib, ['cuGraphGetNodes'], 'int', [P, P, P]),
  } as unknown as CuFns;
  const i32 = new Int32Array(1);
  const rv = f.cuDriverGetVersion(i32);
  const version = rv === 0 ? i32[0]! : 0;
  const r = f.cuInit(0);
  if (r !== 0) {
    const name = CU_RESULT_NAMES[r] ?? `CUresult ${r}`;
    throw new CudaError('cuInit', r, name, `cuInit failed: ${name} (${r})${r === 100 ? ': no CUDA-capable device is visible' : ''} [libcuda: ${path}]`);
  }
  driver = { fns: f, libPath: path, version };
  return driver;
}

function fns(): CuFns {
  return (driver ?? loadDriver()).fns;
}

/** CUDA version supported by the driver, e.g. 13000 (see formatCudaVersion). */
export function driverVersion(): number {
  return (driver ?? loadDriver()).version;
}

/** CUtensorMapDataType codes of the 16-bit float types. */
export const CU_TENSOR_MAP_DATA_TYPE = { float16: 6, bfloat16: 9 } as const;
/** CUtensorMapSwizzle: none, 32, 64, 128 bytes. */
export const CU_TENSOR_MAP_SWIZZLE = { none: 0, b32: 1, b64: 2, b128: 3 } as const;

/**
 * cuTensorMapEncodeTiled: the 128-byte descriptor of a tiled TMA load (as 16 words, passed by value to a
 * kernel), zero fill out of bounds, L2 promotion of 128 bytes. dims and box innermost first; strides in
 * bytes of dims 1..rank-1. null where the driver lacks the entry point or rejects the arguments
 * (alignment, strides): the caller then takes a path without TMA.
 */
export function encodeTensorMapTiled(dataType: number, address: bigint, dims: readonly number[], strides: readonly number[], box: readonly number[], swizzle: number): BigUint64Array | null {
  const f = fns().cuTensorMapEncodeTiled;
  if (!f) return null;
  const map = new BigUint64Array(16);
  const r = f(map, dataType, dims.length, address, new BigUint64Array(dims.map(BigInt)), new BigUint64Array(strides.map(BigInt)),
    new Uint32Array(box), new Uint32Array(dims.length).fill(1), 0, swizzle, 2, 0);
  return r === CUDA_SUCCESS ? map : null;
}

export function driverLibraryPath(): string {
  return (driver ?? loadDriver()).libPath;
}

export function deviceCount(): number {
  const i32 = new Int32Array(1);
  check(fns().cuDeviceGetCount(i32), 'cuDeviceGetCount');
  return i32[0]!;
}

/** Properties of device `ordinal` (no context needed). */
export function deviceInfo(ordinal: number): CudaDeviceInfo {
  try {
    return queryDevice(fns(), ordinal);
  } catch (e) {
    if (e instanceof CuQueryError) throw makeError(e.code, e.call);
    throw e;
  }
}

/** The raw value of a CUdevice_attribute (see CU_DEVICE_ATTRIBUTE in libs.ts). */
export function deviceAttribute(attr: number, ordinal: number): number {
  const i32 = new Int32Array(1);
  check(fns().cuDeviceGet(i32, ordinal), 'cuDeviceGet');
  const dev = i32[0]!;
  check(fns().cuDeviceGetAttribute(i32, attr, dev), `cuDeviceGetAttribute(${attr})`);
  return i32[0]!;
}

// -------------------------------------------------------------------------------------------
// errors, poisoning

let poisoned: { what: string; code: number; name: string; kernel: string | null } | null = null;

const RECENT = 8;
const recentKernels: (string | null)[] = new Array<string | null>(RECENT).fill(null);
let recentIdx = 0;

function lastKernel(): string | null {
  return recentKernels[(recentIdx - 1 + RECENT) % RECENT] ?? null;
}

function recentKernelList(): string[] {
  const out: string[] = [];
  for (let i = 1; i <= RECENT; i++) {
    const k = recentKernels[(recentIdx - i + RECENT * 2) % RECENT];
    if (k) out.push(k);
  }
  return out;
}

/** Name of a CUresult (cuGetErrorName, else the built-in table). */
export function errorName(code: number): string {
  if (driver) {
    try {
      const out = new BigUint64Array(1);
      if (driver.fns.cuGetErrorName(code, out) === 0 && out[0] !== 0n) return koffi.decode.string(out[0]!);
    } catch {
      /* fall back to the table */
    }
  }
  return CU_RESULT_NAMES[code] ?? `CUresult ${code}`;
}

/** Description of a CUresult (cuGetErrorString), or ''. */
export function errorString(code: number): string {
  if (driver) {
    try {
      const out = new BigUint64Array(1);
      if (driver.fns.cuGetErrorString(code, out) === 0 && out[0] !== 0n) return koffi.decode.string(out[0]!);
    } catch {
      /* none */
    }
  }
  return '';
}

/** The typed error for CUresult `code` returned by `call`; marks the context poisoned for sticky errors. */
export function makeError(code: number, call: string): Error {
  const name = errorName(code);
  const desc = errorString(code);
  const base = `${call} failed: ${name} (${code})${desc ? `: ${desc}` : ''}`;
  if (STICKY_ERRORS.has(code)) {
    const kernel = lastKernel();
    const recent = recentKernelList();
    const first = poisoned === null;
    if (first) poisoned = { what: `${name} in ${call}`, code, name, kernel };
    return new CudaFaultError(
      call,
      code,
      name,
      kernel,
      `${base}. Kernel last launched: ${kernel ?? '(none)'}` +
        (recent.length > 1 ? ` (most recent first: ${recent.join(', ')})` : '') +
        '. Faults are reported asynchronously, so the culprit is usually that kernel or one shortly before it ' +
        '(run with CUDA_LAUNCH_BLOCKING=1 to pinpoint it). The CUDA context is unusable from now on: restart the process.',
    );
  }
  if (code === CUDA_ERROR_OUT_OF_MEMORY) {
    return new OutOfMemoryError(`cuda.${call}`, `${base}`);
  }
  return new CudaError(call, code, name, base);
}

function check(r: number, call: string): void {
  if (r !== 0) throw makeError(r, call);
}

/** A call that a stream capture cannot record: a typed error (the capture is abandoned by whoever started it). */
function refuseInCapture(what: string): never {
  throw new GraphCaptureError('cuda.graph', `${what} cannot be captured in a CUDA graph: run it before the capture (a warm-up run compiles and tunes every kernel) or keep the value on the device`);
}

function throwPoisoned(call: string): never {
  const p = poisoned!;
  throw new CudaFaultError(
    call,
    p.code,
    p.name,
    p.kernel,
    `context is unusable after ${p.what}` +
      (p.kernel ? ` (kernel last launched before the fault: ${p.kernel})` : '') +
      '; restart the process to use CUDA again',
  );
}

/** Whether a sticky error has made the context unusable (and why). */
export function contextPoisoned(): { what: string; code: number; kernel: string | null } | null {
  return poisoned ? { what: poisoned.what, code: poisoned.code, kernel: poisoned.kernel } : null;
}

// -------------------------------------------------------------------------------------------
// non-blocking polling

/** Resolve when `done()` returns true, polling without blocking the event loop. */
export function pollUntil(done: () => boolean): Promise<void> {
  return new Promise<void>((resolve, reject) => {
    const t0 = performance.now();
    const step = (): void => {
      let ok: boolean;
      try {
        ok = done();
      } catch (e) {
        reject(e);
        return;
      }
      if (ok) {
        resolve();
        return;
      }
      // setImmediate wakes within microseconds; a timer cannot wake sooner than 1 ms, which would add up
      // to a millisecond to every wait (and to every timing closed by a synchronize). Poll tightly for
      // the first 50 ms, then yield the CPU with timers.
      const el = performance.now() - t0;
      if (el < 50) setImmediate(step);
      else setTimeout(step, 1);
    };
    step();
  });
}

// -------------------------------------------------------------------------------------------
// kernel-argument block

/** Kernel argument kinds: device pointer (u64), 32/64-bit integers, float, double. */
export type ArgType = 'ptr' | 'i32' | 'u32' | 'i64' | 'u64' | 'f32' | 'f64';
export type KernelArg = bigint | number;

const A_PTR = 0;
const A_I32 = 1;
const A_U32 = 2;
const A_I64 = 3;
const A_U64 = 4;
const A_F32 = 5;
const A_F64 = 6;
const ARG_CODES: Record<ArgType, number> = { ptr: A_PTR, i32: A_I32, u32: A_U32, i64: A_I64, u64: A_U64, f32: A_F32, f64: A_F64 };
/** Short letters accepted in signature strings: p i u l L f d. */
const SIG_LETTERS: Record<string, ArgType> = { p: 'ptr', i: 'i32', u: 'u32', l: 'i64', L: 'u64', f: 'f32', d: 'f64' };

/** Parse 'ppfi' or ['ptr','ptr','f32','i32'] into argument types. */
export function parseSignature(sig: string | readonly ArgType[]): ArgType[] {
  if (typeof sig !== 'string') {
    for (const t of sig) if (!(t in ARG_CODES)) throw new ValueError('cuda.kernel', `unknown argument type '${t}'`);
    return [...sig];
  }
  const out: ArgType[] = [];
  for (const ch of sig.replace(/[\s,]/g, '')) {
    const t = SIG_LETTERS[ch];
    if (!t) throw new ValueError('cuda.kernel', `unknown signature letter '${ch}' in '${sig}' (use p i u l L f d)`);
    out.push(t);
  }
  return out;
}

// (80: the Hopper attention kernel passes three 128-byte TMA descriptors by value as its last parameter: a
// struct parameter spans consecutive 8-byte slots, whose first slot's pointer the driver reads it from)
export const MAX_KERNEL_ARGS = 80;

class ParamBlock {
  readonly slots: bigint; // MAX_KERNEL_ARGS 8-byte slots
  readonly pointers: bigint; // void*[MAX_KERNEL_ARGS], pointers[i] = slots + 8 i
  readonly u64: BigUint64Array;
  readonly i64: BigInt64Array;
  readonly i32: Int32Array;
  readonly u32: Uint32Array;
  readonly f32: Float32Array;
  readonly f64: Float64Array;
  constructor() {
    this.slots = koffi.alloc('uint64_t', MAX_KERNEL_ARGS) as bigint;
    this.pointers = koffi.alloc('uint64_t', MAX_KERNEL_ARGS) as bigint;
    const ab = koffi.view(this.slots, MAX_KERNEL_ARGS * 8);
    this.u64 = new BigUint64Array(ab);
    this.i64 = new BigInt64Array(ab);
    this.i32 = new Int32Array(ab);
    this.u32 = new Uint32Array(ab);
    this.f32 = new Float32Array(ab);
    this.f64 = new Float64Array(ab);
    const ptrs = new BigUint64Array(koffi.view(this.pointers, MAX_KERNEL_ARGS * 8));
    for (let i = 0; i < MAX_KERNEL_ARGS; i++) ptrs[i] = this.slots + BigInt(8 * i);
  }
}

let params: ParamBlock | null = null;

// -------------------------------------------------------------------------------------------
// context, memory, streams, events, modules

export interface PinnedBuffer {
  /** Host address of the page-locked allocation. */
  readonly ptr: bigint;
  readonly bytes: number;
  /** The memory itself (zero-copy view). */
  readonly buffer: ArrayBuffer;
}

export type Dim3 = number | readonly [number, number?, number?];

/** Component i (x, y, z) of a launch dimension: a number is [n, 1, 1]. */
function dim3(d: Dim3, i: 0 | 1 | 2): number {
  return typeof d === 'number' ? (i === 0 ? d : 1) : d[i] ?? 1;
}

let currentCtx: CudaContext | null = null;
const contexts = new Map<number, CudaContext>();

export class CudaContext {
  readonly device: number;
  readonly handle: bigint;
  readonly info: CudaDeviceInfo;
  /** The legacy default (NULL) stream. */
  readonly nullStream: Stream;
  private readonly out64 = new BigUint64Array(1);
  private readonly out64b = new BigUint64Array(1);
  private readonly out32 = new Int32Array(1);
  /**
   * Work queued on the host that must reach the stream before anything else touches the stream or
   * device memory (the launch batch, launch_batch.ts): set while a batch is pending, null otherwise.
   * Every driver call of this context (enter()), every read of Stream.handle and every event call
   * runs it first, so no other work can overtake the batch.
   */
  pending: (() => void) | null = null;

  private constructor(device: number) {
    const f = fns();
    this.device = device;
    this.info = deviceInfo(device);
    const i32 = new Int32Array(1);
    check(f.cuDeviceGet(i32, device), 'cuDeviceGet');
    check(f.cuDevicePrimaryCtxRetain(this.out64, i32[0]!), 'cuDevicePrimaryCtxRetain');
    this.handle = this.out64[0]!;
    check(f.cuCtxSetCurrent(this.handle), 'cuCtxSetCurrent');
    currentCtx = this;
    this.nullStream = new Stream(this, 0n, false);
  }

  /** The primary context of `device` (default 0), retained and made current on first use. */
  static get(device = 0): CudaContext {
    if (poisoned) throwPoisoned('CudaContext.get');
    let c = contexts.get(device);
    if (!c) {
      const n = deviceCount();
      if (device < 0 || device >= n) throw new DeviceError('cuda', `device ${device} does not exist (${n} CUDA device(s) visible)`);
      c = new CudaContext(device);
      contexts.set(device, c);
    }
    c.makeCurrent();
    return c;
  }

  makeCurrent(): void {
    if (currentCtx === this) return;
    check(fns().cuCtxSetCurrent(this.handle), 'cuCtxSetCurrent');
    currentCtx = this;
  }

  private enter(call: string): CuFns {
    if (this.pending !== null) this.flushPending();
    if (poisoned) throwPoisoned(call);
    if (currentCtx !== this) this.makeCurrent();
    return (driver as Driver).fns;
  }

  /** Submit the pending launch batch (see `pending`); cleared first, so a failing flush is not retried forever. */
  flushPending(): void {
    const f = this.pending;
    if (f === null) return;
    this.pending = null;
    f();
  }

  // --- memory ---

  /** cuMemAlloc. Throws OutOfMemoryError when the device is full. */
  malloc(bytes: number): DevicePtr {
    const f = this.enter('cuMemAlloc');
    if (!(bytes > 0) || !Number.isSafeInteger(bytes)) throw new ValueError('cuda.malloc', `bytes must be a positive integer, got ${bytes}`);
    const r = f.cuMemAlloc(this.out64, bytes);
    if (r !== 0) {
      if (r === CUDA_ERROR_OUT_OF_MEMORY) {
        let extra = '';
        try {
          const mi = this.memInfo();
          extra = `; device has ${(mi.free / 2 ** 30).toFixed(2)} GiB free of ${(mi.total / 2 ** 30).toFixed(2)} GiB`;
        } catch {
          /* informative */
        }
        throw new OutOfMemoryError('cuda.cuMemAlloc', `cuMemAlloc(${bytes} bytes = ${(bytes / 2 ** 30).toFixed(2)} GiB) failed: CUDA_ERROR_OUT_OF_MEMORY${extra}`);
      }
      throw makeError(r, 'cuMemAlloc');
    }
    return this.out64[0]!;
  }

  free(ptr: DevicePtr): void {
    const f = this.enter('cuMemFree');
    check(f.cuMemFree(ptr), 'cuMemFree');
  }

  memInfo(): { free: number; total: number } {
    const f = this.enter('cuMemGetInfo');
    check(f.cuMemGetInfo(this.out64, this.out64b), 'cuMemGetInfo');
    return { free: Number(this.out64[0]!), total: Number(this.out64b[0]!) };
  }

  /** The context as a RawAllocator for the caching allocator. */
  rawAllocator(): RawAllocator {
    return {
      // during a capture, segments come from cuMemAlloc in relaxed mode (not a node of the graph)
      alloc: (bytes: number) => (this.capturing ? this.relaxedCapture(() => this.malloc(bytes)) : this.malloc(bytes)),
      free: (ptr: bigint) => (this.capturing ? this.relaxedCapture(() => this.free(ptr)) : this.free(ptr)),
      memInfo: () => (this.capturing ? this.relaxedCapture(() => this.memInfo()) : this.memInfo()),
    };
  }

  /** Page-locked host memory (cuMemHostAlloc), for truly asynchronous copies. */
  hostAlloc(bytes: number, flags = 0): PinnedBuffer {
    const f = this.enter('cuMemHostAlloc');
    if (!(bytes > 0)) throw new ValueError('cuda.hostAlloc', `bytes must be positive, got ${bytes}`);
    check(f.cuMemHostAlloc(this.out64, bytes, flags), 'cuMemHostAlloc');
    const ptr = this.out64[0]!;
    return { ptr, bytes, buffer: koffi.view(ptr, bytes) };
  }

  /**
   * Page-locked host memory that kernels write directly (cuMemHostAlloc with DEVICEMAP): the host address's
   * buffer, and the address kernels use.
   */
  hostAllocMapped(bytes: number): PinnedBuffer & { devicePtr: bigint } {
    const CU_MEMHOSTALLOC_PORTABLE = 1, CU_MEMHOSTALLOC_DEVICEMAP = 2;
    const b = this.hostAlloc(bytes, CU_MEMHOSTALLOC_PORTABLE | CU_MEMHOSTALLOC_DEVICEMAP);
    try {
      const f = this.enter('cuMemHostGetDevicePointer');
      check(f.cuMemHostGetDevicePointer(this.out64, b.ptr, 0), 'cuMemHostGetDevicePointer');
    } catch (e) {
      this.hostFree(b); // a driver without the entry point (UnsupportedError), or one that refuses
      throw e;
    }
    return { ...b, devicePtr: this.out64[0]! };
  }

  hostFree(buf: PinnedBuffer | bigint): void {
    const f = this.enter('cuMemFreeHost');
    check(f.cuMemFreeHost(typeof buf === 'bigint' ? buf : buf.ptr), 'cuMemFreeHost');
  }

  /**
   * Host → device copy of `bytes` (default: all of `src`). From ordinary JS memory the driver
   * stages the data before returning, so `src` may be reused at once; from pinned memory the
   * copy is asynchronous on `stream`.
   */
  copyHtoD(dst: DevicePtr, src: ArrayBufferView | PinnedBuffer, bytes?: number, stream?: Stream): void {
    if (this.capturing) refuseInCapture('a host-to-device copy (the graph would re-read these host bytes at every replay)');
    const f = this.enter('cuMemcpyHtoDAsync');
    const { p, n } = hostArg(src, bytes);
    check(f.cuMemcpyHtoDAsync(dst, p, n, stream ? stream.handle : null), 'cuMemcpyHtoDAsync');
  }

  /**
   * Device → host copy. Into ordinary JS memory the call returns once the copy is complete
   * (driver semantics for pageable memory); into pinned memory it is asynchronous on `stream`.
   */
  copyDtoH(dst: ArrayBufferView | PinnedBuffer, src: DevicePtr, bytes?: number, stream?: Stream): void {
    if (this.capturing) refuseInCapture('a device-to-host copy (reading a value on the host)');
    const f = this.enter('cuMemcpyDtoHAsync');
    const { p, n } = hostArg(dst, bytes);
    check(f.cuMemcpyDtoHAsync(p, src, n, stream ? stream.handle : null), 'cuMemcpyDtoHAsync');
  }

  copyDtoD(dst: DevicePtr, src: DevicePtr, bytes: number, stream?: Stream): void {
    const f = this.enter('cuMemcpyDtoDAsync');
    check(f.cuMemcpyDtoDAsync(dst, src, bytes, stream ? stream.handle : null), 'cuMemcpyDtoDAsync');
  }

  memsetD8(dst: DevicePtr, value: number, bytes: number, stream?: Stream): void {
    const f = this.enter('cuMemsetD8Async');
    check(f.cuMemsetD8Async(dst, value & 0xff, bytes, stream ? stream.handle : null), 'cuMemsetD8Async');
  }

  /** Fill `count` 32-bit words with the bit pattern `value` (e.g. new Uint32Array(new Float32Array([x]).buffer)[0]). */
  memsetD32(dst: DevicePtr, value: number, count: number, stream?: Stream): void {
    const f = this.enter('cuMemsetD32Async');
    check(f.cuMemsetD32Async(dst, value >>> 0, count, stream ? stream.handle : null), 'cuMemsetD32Async');
  }

  // --- streams & events ---

  /** A new stream; non-blocking (does not synchronize with the NULL stream) by default. */
  createStream(nonBlocking = true): Stream {
    const f = this.enter('cuStreamCreate');
    check(f.cuStreamCreate(this.out64, nonBlocking ? CU_STREAM_NON_BLOCKING : CU_STREAM_DEFAULT), 'cuStreamCreate');
    return new Stream(this, this.out64[0]!, true);
  }

  createEvent(options: { timing?: boolean; blockingSync?: boolean } = {}): CudaEvent {
    const f = this.enter('cuEventCreate');
    const flags = (options.timing === false ? CU_EVENT_DISABLE_TIMING : 0) | (options.blockingSync ? CU_EVENT_BLOCKING_SYNC : 0);
    check(f.cuEventCreate(this.out64, flags), 'cuEventCreate');
    return new CudaEvent(this, this.out64[0]!);
  }

  /** Block the thread until all work in the context is done (cuCtxSynchronize). */
  synchronize(): void {
    if (this.capturing) refuseInCapture('a device synchronization');
    const f = this.enter('cuCtxSynchronize');
    check(f.cuCtxSynchronize(), 'cuCtxSynchronize');
  }

  // --- stream capture and graphs (graph.ts builds nbx.cuda.CUDAGraph on these) ---

  /**
   * Starts capturing `stream` (cuStreamBeginCapture, thread-local mode: an unsafe call on this thread
   * such as cuMemAlloc or a synchronization fails instead of being silently left out of the graph;
   * rawAllocator() lifts that for its own cuMemAlloc, as PyTorch's allocator does).
   */
  beginCapture(stream: Stream): void {
    const f = this.enter('cuStreamBeginCapture');
    check(f.cuStreamBeginCapture(stream.raw, CU_STREAM_CAPTURE_MODE_THREAD_LOCAL), 'cuStreamBeginCapture');
    this.capturing = stream;
  }

  /** Ends the capture of `stream`; returns the CUgraph (cuStreamEndCapture). Throws when the capture was invalidated. */
  endCapture(stream: Stream): bigint {
    const f = this.enter('cuStreamEndCapture');
    this.capturing = null;
    check(f.cuStreamEndCapture(stream.raw, this.out64), 'cuStreamEndCapture');
    return this.out64[0]!;
  }

  /** 0: not capturing, 1: capturing, 2: capture invalidated by an earlier error (cuStreamIsCapturing). */
  captureStatus(stream: Stream): number {
    check(fns().cuStreamIsCapturing(stream.raw, this.out32), 'cuStreamIsCapturing');
    return this.out32[0]!;
  }

  /** cuGraphInstantiateWithFlags(graph, 0): the executable graph. */
  instantiateGraph(graph: bigint): bigint {
    const f = this.enter('cuGraphInstantiate');
    check(f.cuGraphInstantiate(this.out64, graph, 0n), 'cuGraphInstantiate');
    return this.out64[0]!;
  }

  /** Nodes of a captured graph (kernels, copies, memsets). */
  graphNodeCount(graph: bigint): number {
    check(fns().cuGraphGetNodes(graph, null, this.out64), 'cuGraphGetNodes');
    return Number(this.out64[0]!);
  }

  launchGraph(exec: bigint, stream: Stream): void {
    const f = this.enter('cuGraphLaunch');
    check(f.cuGraphLaunch(exec, stream.raw), 'cuGraphLaunch');
  }

  destroyGraph(graph: bigint, exec: bigint | null): void {
    if (poisoned) return;
    if (exec !== null) check(fns().cuGraphExecDestroy(exec), 'cuGraphExecDestroy');
    check(fns().cuGraphDestroy(graph), 'cuGraphDestroy');
  }

  /** The stream being captured, or null. */
  capturing: Stream | null = null;

  /** Runs `fn` in relaxed capture mode on this thread (a cuMemAlloc during a capture: the memory is not part of the graph). */
  relaxedCapture<T>(fn: () => T): T {
    const mode = this.out32;
    mode[0] = CU_STREAM_CAPTURE_MODE_RELAXED;
    check(fns().cuThreadExchangeStreamCaptureMode(mode), 'cuThreadExchangeStreamCaptureMode');
    const previous = mode[0]!;
    try { return fn(); } finally {
      mode[0] = previous;
      fns().cuThreadExchangeStreamCaptureMode(mode);
    }
  }

  // --- modules & launches ---

  /** cuModuleLoadData on a CUBIN or a NUL-terminated PTX image. */
  loadModule(image: Uint8Array, label = 'module'): CudaModule {
    const f = this.enter('cuModuleLoadData');
    const r = f.cuModuleLoadData(this.out64, image);
    if (r !== 0) throw makeError(r, `cuModuleLoadData(${label})`);
    return new CudaModule(this, this.out64[0]!, label);
  }

  /**
   * Launch `kernel` with `args` (one per parameter, typed by the kernel's signature).
   * Host cost: writing the arguments into the shared native parameter block and one FFI call.
   */
  launch(kernel: CudaKernel, grid: Dim3, block: Dim3, args: readonly KernelArg[], sharedMem = 0, stream?: Stream): void {
    if (this.pending !== null) this.flushPending();
    if (poisoned) throwPoisoned(`cuLaunchKernel(${kernel.name})`);
    if (currentCtx !== this) this.makeCurrent();
    const pb = params ?? (params = new ParamBlock());
    const codes = kernel.codes;
    const n = codes.length;
    if (args.length !== n) {
      throw new ValueError(`cuda.launch(${kernel.name})`, `kernel takes ${n} arguments (${kernel.argTypes.join(', ')}), got ${args.length}`);
    }
    for (let i = 0; i < n; i++) {
      const a = args[i]!;
      switch (codes[i]) {
        case A_PTR:
        case A_U64:
          pb.u64[i] = typeof a === 'bigint' ? a : BigInt(a);
          break;
        case A_I32:
          pb.i32[2 * i] = a as number;
          break;
        case A_U32:
          pb.u32[2 * i] = a as number;
          break;
        case A_I64:
          pb.i64[i] = typeof a === 'bigint' ? a : BigInt(a);
          break;
        case A_F32:
          pb.f32[2 * i] = a as number;
          break;
        default:
          pb.f64[i] = a as number;
      }
    }
    const gx = dim3(grid, 0), gy = dim3(grid, 1), gz = dim3(grid, 2);
    const bx = dim3(block, 0), by = dim3(block, 1), bz = dim3(block, 2);
    recentKernels[recentIdx] = kernel.name;
    recentIdx = (recentIdx + 1) % RECENT;
    const d = driver as Driver;
    const r = kernel.module.gridDependent && d.fns.cuLaunchKernelEx
      ? launchGridDependent(d, kernel.handle, gx, gy, gz, bx, by, bz, sharedMem, stream ? stream.handle : 0n, pb.pointers)
      : d.fns.cuLaunchKernel(kernel.handle, gx, gy, gz, bx, by, bz, sharedMem, stream ? stream.handle : null, pb.pointers, null);
    if (r !== 0) {
      throw makeError(r, `cuLaunchKernel(${kernel.name}, grid=[${gx},${gy},${gz}], block=[${bx},${by},${bz}], smem=${sharedMem})`);
    }
  }
}

// Programmatic dependent launch (Hopper and later). A kernel launched with the attribute may start while
// the kernel before it in the stream is finishing: its blocks are scheduled and run their prologue, and
// wait at `griddepcontrol.wait` (which every kernel compiled with gridDependencyWait starts with) until
// the previous grid has completed and its writes are visible. So results are those of a serialized
// launch, and the gap between two kernels (drain, launch, ramp-up), a large share of a decode step made
// of a few hundred short kernels, overlaps. Only kernels compiled with the wait are launched this way.

/** CUlaunchConfig (56 bytes) followed by one CUlaunchAttribute (72 bytes), reused by every launch. */
let launchConfig: { ptr: bigint; view: DataView } | null = null;
const CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION = 6;

function launchGridDependent(d: Driver, f: bigint, gx: number, gy: number, gz: number, bx: number, by: number, bz: number, smem: number, stream: bigint, params: bigint): number {
  if (!launchConfig) {
    const ptr = koffi.alloc('uint64_t', (56 + 72) / 8) as bigint;
    const view = new DataView(koffi.view(ptr, 56 + 72));
    for (let i = 0; i < 56 + 72; i++) view.setUint8(i, 0);
    view.setBigUint64(40, ptr + 56n, true); // attrs
    view.setUint32(48, 1, true); // numAttrs
    view.setUint32(56, CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION, true);
    view.setUint32(56 + 8, 1, true); // value.programmaticStreamSerializationAllowed
    launchConfig = { ptr, view };
  }
  const v = launchConfig.view;
  v.setUint32(0, gx, true); v.setUint32(4, gy, true); v.setUint32(8, gz, true);
  v.setUint32(12, bx, true); v.setUint32(16, by, true); v.setUint32(20, bz, true);
  v.setUint32(24, smem, true);
  v.setBigUint64(32, stream, true);
  return d.fns.cuLaunchKernelEx!(launchConfig.ptr, f, params, null);
}

/**
 * Whether kernels compiled now for `ctx` start with the grid-dependency wait and launch with programmatic
 * stream serialization: a device of compute capability 9.0 or later (a fact the driver reports) and a
 * driver with cuLaunchKernelEx. NBX_CUDA_PDL=0 turns it off; 1 waits without triggering dependents early
 * (nvrtc.ts); the default also triggers them.
 */
export function gridDependencyEnabled(ctx: CudaContext): boolean {
  const env = process.env.NBX_CUDA_PDL;
  // 'compile': kernels get the wait (a no-op without the launch attribute) on any device; for tests of the rewrite
  if (env === 'compile') return true;
  if (env === '0') return false;
  return ctx.info.cc[0] >= 9 && fns().cuLaunchKernelEx !== null;
}

export interface ParamBuffer {
  /** Native address of the parameter bytes. */
  readonly ptr: bigint;
  /** void*[1] holding `ptr`: the kernelParams of a kernel whose only parameter is this buffer. */
  readonly pointers: bigint;
  readonly bytes: number;
  /** The bytes themselves (zero-copy view). */
  readonly buffer: ArrayBuffer;
}

/** A natively allocated block for one by-value kernel parameter of `bytes` bytes (a struct). */
export function allocParamBuffer(bytes: number): ParamBuffer {
  const ptr = koffi.alloc('uint64_t', Math.ceil(bytes / 8)) as bigint;
  const pointers = koffi.alloc('uint64_t', 1) as bigint;
  new BigUint64Array(koffi.view(pointers, 8))[0] = ptr;
  return { ptr, pointers, bytes, buffer: koffi.view(ptr, Math.ceil(bytes / 8) * 8) };
}

/**
 * Launch a kernel whose single by-value parameter lives in `pb` on `stream`'s raw handle: the
 * launch batch's own submission, which must not trigger the pending-flush hook (it is the flush).
 * `label` names the work for fault reports (recentKernels).
 */
export function launchParamBuffer(kernel: CudaKernel, block: number, pb: ParamBuffer, stream: Stream, label: string): void {
  if (poisoned) throwPoisoned(`cuLaunchKernel(${label})`);
  const ctx = stream.ctx;
  if (currentCtx !== ctx) ctx.makeCurrent();
  recentKernels[recentIdx] = label;
  recentIdx = (recentIdx + 1) % RECENT;
  const r = (driver as Driver).fns.cuLaunchKernel(kernel.handle, 1, 1, 1, block, 1, 1, 0, stream.raw, pb.pointers, null);
  if (r !== 0) throw makeError(r, `cuLaunchKernel(${label}, grid=[1,1,1], block=[${block},1,1])`);
}

function hostArg(buf: ArrayBufferView | PinnedBuffer, bytes: number | undefined): { p: ArrayBufferView | bigint; n: number } {
  if ('ptr' in buf && typeof buf.ptr === 'bigint') {
    const pb = buf as PinnedBuffer;
    const n = bytes ?? pb.bytes;
    if (n > pb.bytes) throw new ValueError('cuda.copy', `${n} bytes requested but the pinned buffer has ${pb.bytes}`);
    return { p: pb.ptr, n };
  }
  const v = buf as ArrayBufferView;
  const n = bytes ?? v.byteLength;
  if (n > v.byteLength) throw new ValueError('cuda.copy', `${n} bytes requested but the host buffer has ${v.byteLength}`);
  return { p: v, n };
}

export class Stream {
  readonly ctx: CudaContext;
  /** CUstream without the flush: only for the launch batch's own submission. */
  readonly raw: bigint;
  private readonly owned: boolean;
  private destroyed = false;

  constructor(ctx: CudaContext, handle: bigint, owned: boolean) {
    this.ctx = ctx;
    this.raw = handle;
    this.owned = owned;
  }

  /**
   * CUstream; 0n is the legacy NULL stream. Reading it submits the context's pending launch batch
   * first, so any work enqueued with it (libraries included) runs after everything queued before.
   */
  get handle(): bigint {
    const c = this.ctx;
    if (c.pending !== null) c.flushPending();
    return this.raw;
  }

  /** Block until all work queued on the stream is done. */
  synchronize(): void {
    if (this.ctx.capturing) refuseInCapture('a stream synchronization (waiting for a result on the host)');
    this.ctx.flushPending();
    if (poisoned) throwPoisoned('cuStreamSynchronize');
    if (this.handle === 0n) this.ctx.makeCurrent(); // the NULL stream is the current context's
    check(fns().cuStreamSynchronize(this.handle), 'cuStreamSynchronize');
  }

  /** True when all work queued on the stream is done. */
  query(): boolean {
    if (this.ctx.capturing) refuseInCapture('a stream query (waiting for a result on the host)');
    this.ctx.flushPending();
    if (poisoned) throwPoisoned('cuStreamQuery');
    if (this.handle === 0n) this.ctx.makeCurrent();
    const r = fns().cuStreamQuery(this.handle);
    if (r === 0) return true;
    if (r === CUDA_ERROR_NOT_READY) return false;
    throw makeError(r, 'cuStreamQuery');
  }

  /** Resolve when the stream is idle, without blocking the event loop. */
  synchronizeAsync(): Promise<void> {
    return pollUntil(() => this.query());
  }

  /** Make future work on this stream wait for `event`. */
  waitEvent(event: CudaEvent): void {
    this.ctx.flushPending();
    if (poisoned) throwPoisoned('cuStreamWaitEvent');
    check(fns().cuStreamWaitEvent(this.handle, event.handle, 0), 'cuStreamWaitEvent');
  }

  destroy(): void {
    if (!this.owned || this.destroyed) return;
    this.destroyed = true;
    if (poisoned) return;
    check(fns().cuStreamDestroy(this.handle), 'cuStreamDestroy');
  }
}

export class CudaEvent {
  readonly ctx: CudaContext;
  readonly handle: bigint;
  private destroyed = false;
  private static readonly ms = new Float32Array(1);

  constructor(ctx: CudaContext, handle: bigint) {
    this.ctx = ctx;
    this.handle = handle;
  }

  record(stream?: Stream): this {
    if (this.ctx.pending !== null) this.ctx.flushPending();
    if (poisoned) throwPoisoned('cuEventRecord');
    this.ctx.makeCurrent();
    check(fns().cuEventRecord(this.handle, stream ? stream.handle : null), 'cuEventRecord');
    return this;
  }

  /** True when the work captured by the last record() is complete. */
  query(): boolean {
    if (this.ctx.capturing) refuseInCapture('an event query (waiting for a result on the host)');
    if (this.ctx.pending !== null) this.ctx.flushPending();
    if (poisoned) throwPoisoned('cuEventQuery');
    const r = fns().cuEventQuery(this.handle);
    if (r === 0) return true;
    if (r === CUDA_ERROR_NOT_READY) return false;
    throw makeError(r, 'cuEventQuery');
  }

  synchronize(): void {
    if (this.ctx.capturing) refuseInCapture('an event synchronization (waiting for a result on the host)');
    if (this.ctx.pending !== null) this.ctx.flushPending();
    if (poisoned) throwPoisoned('cuEventSynchronize');
    check(fns().cuEventSynchronize(this.handle), 'cuEventSynchronize');
  }

  /** Resolve when the event has completed, without blocking the event loop. */
  wait(): Promise<void> {
    return pollUntil(() => this.query());
  }

  /** Milliseconds between `start` (recorded earlier) and this event; both must have completed. */
  elapsedSince(start: CudaEvent): number {
    if (this.ctx.capturing) refuseInCapture('event timing (autotuning or a benchmark)');
    if (this.ctx.pending !== null) this.ctx.flushPending();
    if (poisoned) throwPoisoned('cuEventElapsedTime');
    check(fns().cuEventElapsedTime(CudaEvent.ms, start.handle, this.handle), 'cuEventElapsedTime');
    return CudaEvent.ms[0]!;
  }

  destroy(): void {
    if (this.destroyed) return;
    this.destroyed = true;
    this.ctx.flushPending();
    if (poisoned) return;
    check(fns().cuEventDestroy(this.handle), 'cuEventDestroy');
  }
}

export class CudaModule {
  readonly ctx: CudaContext;
  readonly handle: bigint;
  readonly label: string;
  private readonly functions = new Map<string, CudaKernel>();
  private unloaded = false;
  /** Its kernels begin with the grid-dependency wait (nvrtc.ts withGridDependencyWait): launch them with PDL. */
  gridDependent = false;

  constructor(ctx: CudaContext, handle: bigint, label: string) {
    this.ctx = ctx;
    this.handle = handle;
    this.label = label;
  }

  /**
   * The kernel `name` (its mangled name for C++ kernels; use extern "C" or NVRTC name
   * expressions) with argument types `signature` ('ppfi' or ['ptr','ptr','f32','i32']).
   */
  getFunction(name: string, signature: string | readonly ArgType[]): CudaKernel {
    const sig = parseSignature(signature);
    const key = `${name}\u0000${sig.join(',')}`;
    const hit = this.functions.get(key);
    if (hit) return hit;
    if (poisoned) throwPoisoned('cuModuleGetFunction');
    if (this.unloaded) throw new ValueError('cuda.getFunction', `module ${this.label} was unloaded`);
    if (sig.length > MAX_KERNEL_ARGS) throw new ValueError('cuda.getFunction', `${name}: at most ${MAX_KERNEL_ARGS} kernel arguments are supported`);
    this.ctx.makeCurrent();
    const out = new BigUint64Array(1);
    const r = fns().cuModuleGetFunction(out, this.handle, name);
    if (r !== 0) throw makeError(r, `cuModuleGetFunction(${name} in ${this.label})`);
    const k = new CudaKernel(this, out[0]!, name, sig);
    this.functions.set(key, k);
    return k;
  }

  unload(): void {
    if (this.unloaded) return;
    this.unloaded = true;
    this.functions.clear();
    if (poisoned) return;
    this.ctx.makeCurrent();
    check(fns().cuModuleUnload(this.handle), 'cuModuleUnload');
  }
}

export class CudaKernel {
  readonly module: CudaModule;
  readonly handle: bigint;
  readonly name: string;
  readonly argTypes: readonly ArgType[];
  /** Argument kinds as small integers (launch fast path). */
  readonly codes: Uint8Array;
  private dynSmemLimit = -1;

  constructor(module: CudaModule, handle: bigint, name: string, argTypes: ArgType[]) {
    this.module = module;
    this.handle = handle;
    this.name = name;
    this.argTypes = argTypes;
    this.codes = Uint8Array.from(argTypes.map((t) => ARG_CODES[t]));
  }

  /** Allow up to `bytes` of dynamic shared memory (needed above 48 KiB; up to the opt-in limit). */
  setMaxDynamicSharedMemory(bytes: number): void {
    if (bytes === this.dynSmemLimit) return;
    if (poisoned) throwPoisoned('cuFuncSetAttribute');
    const optin = this.module.ctx.info.maxSharedMemPerBlockOptin;
    if (bytes > optin) {
      throw new ValueError(`cuda.kernel(${this.name})`, `${bytes} bytes of dynamic shared memory requested; the device allows at most ${optin} per block`);
    }
    const r = fns().cuFuncSetAttribute(this.handle, CU_FUNC_ATTRIBUTE.MAX_DYNAMIC_SHARED_SIZE_BYTES, bytes);
    if (r !== 0) throw makeError(r, `cuFuncSetAttribute(${this.name}, MAX_DYNAMIC_SHARED_SIZE_BYTES=${bytes})`);
    this.dynSmemLimit = bytes;
  }

  /** A CUfunction_attribute value (CU_FUNC_ATTRIBUTE). */
  attribute(attr: number): number {
    if (poisoned) throwPoisoned('cuFuncGetAttribute');
    const out = new Int32Array(1);
    check(fns().cuFuncGetAttribute(out, attr, this.handle), `cuFuncGetAttribute(${this.name}, ${attr})`);
    return out[0]!;
  }

  /** Registers per thread, static shared / local memory, max threads per block. */
  resources(): { numRegs: number; sharedBytes: number; localBytes: number; maxThreadsPerBlock: number } {
    return {
      numRegs: this.attribute(CU_FUNC_ATTRIBUTE.NUM_REGS),
      sharedBytes: this.attribute(CU_FUNC_ATTRIBUTE.SHARED_SIZE_BYTES),
      localBytes: this.attribute(CU_FUNC_ATTRIBUTE.LOCAL_SIZE_BYTES),
      maxThreadsPerBlock: this.attribute(CU_FUNC_ATTRIBUTE.MAX_THREADS_PER_BLOCK),
    };
  }
}

/** "13.0" from driverVersion(). */
export function driverVersionString(): string {
  return formatCudaVersion(driverVersion());
}

// -------------------------------------------------------------------------------------------
// Virtual memory management (optional): an address range reserved once, physical memory created and
// mapped into it piece by piece, so a buffer grows in place without a copy and keeps its address (the
// paged KV cache's block pools, src/models/paged_vmm.ts). CUDA >= 10.2 drivers have every entry point;
// a driver without them (or the host emulator) gets null from vmmDriver() and the caller uses plain
// allocations. Bytes reserved and mapped here are counted in vmmMemoryStats() (nbx.cuda.memory_stats).

interface VmmFns {
  cuMemAddressReserve(out: BigUint64Array, size: number, alignment: number, addr: bigint, flags: bigint): number;
  cuMemAddressFree(ptr: bigint, size: number): number;
  cuMemCreate(out: BigUint64Array, size: number, prop: Uint8Array, flags: bigint): number;
  cuMemRelease(handle: bigint): number;
  cuMemMap(ptr: bigint, size: number, offset: number, handle: bigint, flags: bigint): number;
  cuMemUnmap(ptr: bigint, size: number): number;
  cuMemSetAccess(ptr: bigint, size: number, desc: Uint8Array, count: number): number;
  cuMemGetAllocationGranularity(out: BigUint64Array, prop: Uint8Array, option: number): number;
}

let vmmFns: VmmFns | null | undefined;
/** CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED. */
const CU_DEVICE_ATTRIBUTE_VMM_SUPPORTED = 102;
const vmmTotals = { reservedBytes: 0, mappedBytes: 0, ranges: 0 };

/** Bytes of address space reserved and of physical memory mapped through the VMM API, by this process. */
export function vmmMemoryStats(): { vmmReservedBytes: number; vmmMappedBytes: number; vmmRanges: number } {
  return { vmmReservedBytes: vmmTotals.reservedBytes, vmmMappedBytes: vmmTotals.mappedBytes, vmmRanges: vmmTotals.ranges };
}

function vmmBindings(): VmmFns | null {
  if (vmmFns !== undefined) return vmmFns;
  try {
    const lib = koffi.load(driverLibraryPath());
    const P = 'void *';
    vmmFns = {
      cuMemAddressReserve: bind(lib, ['cuMemAddressReserve'], 'int', [P, 'size_t', 'size_t', 'uint64_t', 'uint64_t']),
      cuMemAddressFree: bind(lib, ['cuMemAddressFree'], 'int', ['uint64_t', 'size_t']),
      cuMemCreate: bind(lib, ['cuMemCreate'], 'int', [P, 'size_t', P, 'uint64_t']),
      cuMemRelease: bind(lib, ['cuMemRelease'], 'int', ['uint64_t']),
      cuMemMap: bind(lib, ['cuMemMap'], 'int', ['uint64_t', 'size_t', 'size_t', 'uint64_t', 'uint64_t']),
      cuMemUnmap: bind(lib, ['cuMemUnmap'], 'int', ['uint64_t', 'size_t']),
      cuMemSetAccess: bind(lib, ['cuMemSetAccess'], 'int', ['uint64_t', 'size_t', P, 'size_t']),
      cuMemGetAllocationGranularity: bind(lib, ['cuMemGetAllocationGranularity'], 'int', [P, P, 'int']),
    } as unknown as VmmFns;
  } catch {
    vmmFns = null;
  }
  return vmmFns;
}

/** CUmemAllocationProp (32 bytes): pinned device memory on `ordinal`, no shareable handle. */
function allocationProp(ordinal: number): Uint8Array {
  const b = new Uint8Array(32), v = new DataView(b.buffer);
  v.setInt32(0, 1, true); // type = CU_MEM_ALLOCATION_TYPE_PINNED
  v.setInt32(4, 0, true); // requestedHandleTypes = CU_MEM_HANDLE_TYPE_NONE
  v.setInt32(8, 1, true); // location.type = CU_MEM_LOCATION_TYPE_DEVICE
  v.setInt32(12, ordinal, true); // location.id
  return b; // win32HandleMetaData and allocFlags: 0
}

/** CUmemAccessDesc (12 bytes): read/write from device `ordinal`. */
function accessDesc(ordinal: number): Uint8Array {
  const b = new Uint8Array(12), v = new DataView(b.buffer);
  v.setInt32(0, 1, true); v.setInt32(4, ordinal, true); // location: device `ordinal`
  v.setInt32(8, 3, true); // CU_MEM_ACCESS_FLAGS_PROT_READWRITE
  return b;
}

/**
 * One reserved address range of a context's device, mapped from its start as it grows: map(bytes)
 * backs [0, bytes) with physical memory (new allocations for the part not yet mapped, zero-filled on
 * `stream`), dispose() unmaps and releases everything.
 */
export class VmmRange {
  private readonly handles: { offset: number; size: number; handle: bigint }[] = [];
  private mappedBytes = 0;
  private disposed = false;
  private readonly out = new BigUint64Array(1);

  private constructor(private readonly ctx: CudaContext, private readonly f: VmmFns, readonly base: bigint, readonly reservedBytes: number, readonly granularity: number) {}

  /** Reserves `bytes` (rounded up to the granularity) on ctx's device; null where the driver or device has no VMM. */
  static reserve(ctx: CudaContext, bytes: number): VmmRange | null {
    const f = vmmBindings();
    if (!f) return null;
    ctx.flushPending();
    ctx.makeCurrent();
    let supported = 0;
    try { supported = deviceAttribute(CU_DEVICE_ATTRIBUTE_VMM_SUPPORTED, ctx.device); } catch { return null; }
    if (!supported) return null;
    const g = new BigUint64Array(1);
    if (f.cuMemGetAllocationGranularity(g, allocationProp(ctx.device), 0) !== 0) return null;
    const gran = Number(g[0]!);
    const size = Math.ceil(bytes / gran) * gran;
    const r = f.cuMemAddressReserve(g, size, gran, 0n, 0n);
    if (r !== 0) throw makeError(r, `cuMemAddressReserve(${size} bytes)`);
    vmmTotals.reservedBytes += size; vmmTotals.ranges++;
    return new VmmRange(ctx, f, g[0]!, size, gran);
  }

  get mapped(): number { return this.mappedBytes; }

  /** Backs [0, bytes) (rounded up to the granularity, at most the range); returns the bytes mapped. */
  map(bytes: number, stream?: Stream): number {
    if (this.disposed) throw new ValueError('cuda.VmmRange.map', 'this range was released');
    const want = Math.min(this.reservedBytes, Math.ceil(bytes / this.granularity) * this.granularity);
    if (want <= this.mappedBytes) return this.mappedBytes;
    const size = want - this.mappedBytes, at = this.base + BigInt(this.mappedBytes);
    this.ctx.flushPending();
    this.ctx.makeCurrent();
    const f = this.f;
    let r = f.cuMemCreate(this.out, size, allocationProp(this.ctx.device), 0n);
    if (r === CUDA_ERROR_OUT_OF_MEMORY) {
      throw new OutOfMemoryError('cuda.cuMemCreate', `cuMemCreate(${size} bytes = ${(size / 2 ** 20).toFixed(1)} MiB) for a growing buffer failed: CUDA_ERROR_OUT_OF_MEMORY`);
    }
    if (r !== 0) throw makeError(r, 'cuMemCreate');
    const handle = this.out[0]!;
    r = f.cuMemMap(at, size, 0, handle, 0n);
    if (r !== 0) { f.cuMemRelease(handle); throw makeError(r, 'cuMemMap'); }
    r = f.cuMemSetAccess(at, size, accessDesc(this.ctx.device), 1);
    if (r !== 0) { f.cuMemUnmap(at, size); f.cuMemRelease(handle); throw makeError(r, 'cuMemSetAccess'); }
    this.handles.push({ offset: this.mappedBytes, size, handle });
    this.ctx.memsetD8(at, 0, size, stream);
    this.mappedBytes = want;
    vmmTotals.mappedBytes += size;
    return want;
  }

  /** Unmaps and releases the physical memory and frees the address range (after the device is done with it). */
  dispose(): void {
    if (this.disposed) return;
    this.disposed = true;
    this.ctx.flushPending();
    this.ctx.makeCurrent();
    check(fns().cuCtxSynchronize(), 'cuCtxSynchronize');
    for (const h of this.handles) {
      check(this.f.cuMemUnmap(this.base + BigInt(h.offset), h.size), 'cuMemUnmap');
      check(this.f.cuMemRelease(h.handle), 'cuMemRelease');
    }
    check(this.f.cuMemAddressFree(this.base, this.reservedBytes), 'cuMemAddressFree');
    vmmTotals.mappedBytes -= this.mappedBytes; vmmTotals.reservedBytes -= this.reservedBytes; vmmTotals.ranges--;
    this.mappedBytes = 0;
  }
}
