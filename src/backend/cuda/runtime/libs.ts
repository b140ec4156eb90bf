// Finding and loading the NVIDIA libraries (driver, NVRTC, cuBLASLt, cuBLAS), and probing
// the machine for `nbx info` without ever throwing.
//
// Only the driver API (libcuda), NVRTC and cuBLASLt are used by the engine; the CUDA
// runtime (libcudart) is never loaded.

import { existsSync, readdirSync, realpathSync, statSync } from 'node:fs';
import { homedir } from 'node:os';
import { join } from 'node:path';
import koffi, { type LibraryHandle } from 'koffi';
import { DeviceError } from '../../../errors.js';

export type CudaLibKind = 'cuda' | 'nvrtc' | 'cublasLt' | 'cublas';

/** Usual sonames, most specific first within what the brief of each library allows. */
export const SONAMES: Record<CudaLibKind, readonly string[]> = {
  cuda: ['libcuda.so.1', 'libcuda.so'],
  nvrtc: ['libnvrtc.so', 'libnvrtc.so.13', 'libnvrtc.so.12', 'libnvrtc.so.11.2'],
  cublasLt: ['libcublasLt.so', 'libcublasLt.so.13', 'libcublasLt.so.12', 'libcublasLt.so.11'],
  cublas: ['libcublas.so', 'libcublas.so.13', 'libcublas.so.12', 'libcublas.so.11'],
};

/** Environment variable naming an exact file that overrides the search. */
export const LIB_ENV_OVERRIDE: Record<CudaLibKind, string> = {
  cuda: 'NBX_LIBCUDA',
  nvrtc: 'NBX_LIBNVRTC',
  cublasLt: 'NBX_LIBCUBLASLT',
  cublas: 'NBX_LIBCUBLAS',
};

const LIB_LABEL: Record<CudaLibKind, string> = {
  cuda: 'the CUDA driver library (libcuda)',
  nvrtc: 'NVRTC (libnvrtc)',
  cublasLt: 'cuBLASLt (libcublasLt)',
  cublas: 'cuBLAS (libcublas)',
};

function isDir(p: string): boolean {
  try {
    return statSync(p).isDirectory();
  } catch {
    return false;
  }
}

function listDir(p: string): string[] {
  try {
    return readdirSync(p);
  } catch {
    return [];
  }
}

/** Compare names like python3.12 / cuda-12.8 by their numeric parts, highest first. */
function byVersionDesc(a: string, b: string): number {
  const na = (a.match(/\d+/g) ?? []).map(Number);
  const nb = (b.match(/\d+/g) ?? []).map(Number);
  for (let i = 0; i < Math.max(na.length, nb.length); i++) {
    const d = (nb[i] ?? -1) - (na[i] ?? -1);
    if (d !== 0) return d;
  }
  return a < b ? -1 : a > b ? 1 : 0;
}

/** site-packages / dist-packages folders of the Pythons we can guess. */
export function pythonSitePackages(): string[] {
  const out: string[] = [];
  const add = (p: string): void => {
    if (!out.includes(p) && isDir(p)) out.push(p);
  };
  const env = process.env;
  for (const prefix of [env.VIRTUAL_ENV, env.CONDA_PREFIX]) {
    if (!prefix) continue;
    for (const py of listDir(join(prefix, 'lib')).filter((n) => /^python3(\.\d+)?$/.test(n)).sort(byVersionDesc)) {
      add(join(prefix, 'lib', py, 'site-packages'));
    }
  }
  const home = (() => {
    try {
      return homedir();
    } catch {
      return '';
    }
  })();
  const roots: { dir: string; kinds: string[] }[] = [
    { dir: '/usr/local/lib', kinds: ['dist-packages', 'site-packages'] },
    { dir: '/usr/lib', kinds: ['dist-packages', 'site-packages'] },
    { dir: '/usr/lib64', kinds: ['site-packages'] },
    { dir: '/opt/conda/lib', kinds: ['site-packages'] },
  ];
  if (home) roots.push({ dir: join(home, '.local', 'lib'), kinds: ['site-packages'] });
  add('/usr/lib/python3/dist-packages');
  for (const r of roots) {
    for (const py of listDir(r.dir).filter((n) => /^python3(\.\d+)?$/.test(n)).sort(byVersionDesc)) {
      for (const k of r.kinds) add(join(r.dir, py, k));
    }
  }
  return out;
}

/** NVIDIA pip wheel library folders: <site-packages>/nvidia/<pkg>/lib (and lib64). */
export function pipWheelLibDirs(): string[] {
  const out: string[] = [];
  for (const sp of pythonSitePackages()) {
    const nv = join(sp, 'nvidia');
    for (const pkg of listDir(nv).sort()) {
      for (const l of ['lib', 'lib64']) {
        const d = join(nv, pkg, l);
        if (isDir(d)) out.push(d);
      }
    }
  }
  return out;
}

/** CUDA toolkit roots: CUDA_HOME, CUDA_PATH, /usr/local/cuda, /usr/local/cuda-X.Y (newest first). */
export function cudaToolkitRoots(): string[] {
  const out: string[] = [];
  const add = (p: string | undefined): void => {
    if (p && !out.includes(p)) out.push(p);
  };
  add(process.env.CUDA_HOME);
  add(process.env.CUDA_PATH);
  add('/usr/local/cuda');
  for (const n of listDir('/usr/local').filter((n) => /^cuda-\d/.test(n)).sort(byVersionDesc)) add(join('/usr/local', n));
  add('/opt/cuda');
  return out;
}

/** Folders searched for `kind`, in order (existing or not: the error message lists them all). */
export function librarySearchDirs(kind: CudaLibKind): string[] {
  const dirs: string[] = [];
  const real = new Set<string>();
  const add = (p: string | undefined): void => {
    if (!p || dirs.includes(p)) return;
    // Skip folders that are the same as one already listed (e.g. /usr/local/cuda -> cuda-13.0).
    let r = p;
    try {
      r = realpathSync(p);
    } catch {
      /* missing folders are still listed */
    }
    if (real.has(r)) return;
    real.add(r);
    dirs.push(p);
  };
  for (const root of [process.env.CUDA_HOME, process.env.CUDA_PATH]) {
    if (!root) continue;
    add(join(root, 'lib64'));
    add(join(root, 'lib'));
    add(join(root, 'targets', `${process.arch === 'arm64' ? 'sbsa' : 'x86_64'}-linux`, 'lib'));
  }
  for (const d of (process.env.LD_LIBRARY_PATH ?? '').split(':')) add(d || undefined);
  if (kind === 'cuda') {
    // Driver library locations (never the toolkit's stubs/ folder: the stub cannot run anything).
    for (const d of ['/usr/lib/x86_64-linux-gnu', '/usr/lib/aarch64-linux-gnu', '/usr/lib64', '/usr/lib/wsl/lib', '/usr/lib']) add(d);
  }
  for (const root of cudaToolkitRoots()) {
    if (root === process.env.CUDA_HOME || root === process.env.CUDA_PATH) continue;
    add(join(root, 'lib64'));
    add(join(root, 'targets', `${process.arch === 'arm64' ? 'sbsa' : 'x86_64'}-linux`, 'lib'));
  }
  if (kind !== 'cuda') {
    for (const d of pipWheelLibDirs()) add(d);
    if (process.env.CONDA_PREFIX) add(join(process.env.CONDA_PREFIX, 'lib'));
  }
  return dirs;
}

export interface LibCandidate {
  /** What to pass to dlopen: a full path, or a bare soname for the system loader's search. */
  path: string;
  /** Where it came from (for messages). */
  where: string;
  /** Whether a file exists there (bare sonames: unknown until loaded). */
  exists: boolean | null;
}

/** Every place `kind` is looked for, in order. */
export function libraryCandidates(kind: CudaLibKind): LibCandidate[] {
  const out: LibCandidate[] = [];
  const override = process.env[LIB_ENV_OVERRIDE[kind]];
  if (override) out.push({ path: override, where: `$${LIB_ENV_OVERRIDE[kind]}`, exists: existsSync(override) });
  const bare = (): void => {
    for (const s of SONAMES[kind]) out.push({ path: s, where: 'system loader search path (ld.so.cache)', exists: null });
  };
  // For the driver the system loader's choice is the right one (it matches the kernel module).
  if (kind === 'cuda') bare();
  for (const d of librarySearchDirs(kind)) {
    for (const s of SONAMES[kind]) {
      const p = join(d, s);
      out.push({ path: p, where: d, exists: existsSync(p) });
    }
  }
  if (kind !== 'cuda') bare();
  return out;
}

/** First existing file for `kind` (does not load it). Throws DeviceError listing every place looked. */
export function findLibrary(kind: CudaLibKind): string {
  const cands = libraryCandidates(kind);
  const hit = cands.find((c) => c.exists === true);
  if (hit) return hit.path;
  throw new DeviceError('cuda', notFoundMessage(kind, cands, new Map()));
}

/** One line per folder (names not found there), one line per load that failed with its reason. */
function notFoundMessage(kind: CudaLibKind, cands: LibCandidate[], loadErrors: Map<string, string>): string {
  const hint =
    kind === 'cuda'
      ? 'Is the NVIDIA driver installed (does nvidia-smi work)? Point $NBX_LIBCUDA at libcuda.so.1 to override.'
      : `Install the CUDA toolkit or NVIDIA's pip wheel, set CUDA_HOME, add its lib64 folder to LD_LIBRARY_PATH, or point $${LIB_ENV_OVERRIDE[kind]} at the file.`;
  const lines: string[] = [];
  const byDir = new Map<string, string[]>();
  for (const c of cands) {
    const err = loadErrors.get(c.path);
    if (err !== undefined) {
      lines.push(`${c.path} (${c.where}): ${err}`);
    } else if (c.exists === false && c.where.startsWith('/')) {
      const names = byDir.get(c.where) ?? [];
      names.push(c.path.slice(c.where.length + 1));
      if (!byDir.has(c.where)) {
        byDir.set(c.where, names);
        lines.push(`\u0000${c.where}`); // placeholder, filled below to keep the search order
      }
    } else if (c.exists === false) {
      lines.push(`${c.path} (${c.where}): not found`);
    }
  }
  const out = lines.map((l) => {
    if (!l.startsWith('\u0000')) return l;
    const dir = l.slice(1);
    return `${dir}/{${byDir.get(dir)!.join(',')}}: not found${isDir(dir) ? '' : ' (no such folder)'}`;
  });
  if (kind !== 'cuda') {
    const sp = pythonSitePackages();
    out.push(sp.length > 0 ? `NVIDIA pip wheels (nvidia/*/lib) under: ${sp.join(', ')}` : 'no Python site-packages folder found for NVIDIA pip wheels');
  }
  return `could not load ${LIB_LABEL[kind]}. ${hint} Looked in:\n  ${out.join('\n  ')}`;
}

export interface LoadedLibrary {
  lib: LibraryHandle;
  path: string;
}

const loaded = new Map<CudaLibKind, LoadedLibrary>();

/**
 * dlopen `kind` (cached). Tries every candidate in order; throws DeviceError listing each
 * place looked and why it failed.
 */
export function loadCudaLibrary(kind: CudaLibKind): LoadedLibrary {
  const hit = loaded.get(kind);
  if (hit) return hit;
  const cands = libraryCandidates(kind);
  const errors = new Map<string, string>();
  for (const c of cands) {
    if (c.exists === false) continue;
    try {
      const lib = koffi.load(c.path);
      const r = { lib, path: c.path };
      loaded.set(kind, r);
      return r;
    } catch (e) {
      const msg = e instanceof Error ? e.message : String(e);
      errors.set(c.path, c.exists === null && /cannot open shared object|No such file/i.test(msg) ? 'not found' : msg);
    }
  }
  throw new DeviceError('cuda', notFoundMessage(kind, cands, errors));
}

// -------------------------------------------------------------------------------------------
// CUresult names (checked against cuda.h of CUDA 13.0). Used when cuGetErrorName is unavailable.

export const CU_RESULT_NAMES: Readonly<Record<number, string>> = {
  0: 'CUDA_SUCCESS',
  1: 'CUDA_ERROR_INVALID_VALUE',
  2: 'CUDA_ERROR_OUT_OF_MEMORY',
  3: 'CUDA_ERROR_NOT_INITIALIZED',
  4: 'CUDA_ERROR_DEINITIALIZED',
  5: 'CUDA_ERROR_PROFILER_DISABLED',
  34: 'CUDA_ERROR_STUB_LIBRARY',
  36: 'CUDA_ERROR_CALL_REQUIRES_NEWER_DRIVER',
  46: 'CUDA_ERROR_DEVICE_UNAVAILABLE',
  100: 'CUDA_ERROR_NO_DEVICE',
  101: 'CUDA_ERROR_INVALID_DEVICE',
  102: 'CUDA_ERROR_DEVICE_NOT_LICENSED',
  200: 'CUDA_ERROR_INVALID_IMAGE',
  201: 'CUDA_ERROR_INVALID_CONTEXT',
  202: 'CUDA_ERROR_CONTEXT_ALREADY_CURRENT',
  205: 'CUDA_ERROR_MAP_FAILED',
  206: 'CUDA_ERROR_UNMAP_FAILED',
  209: 'CUDA_ERROR_NO_BINARY_FOR_GPU',
  214: 'CUDA_ERROR_ECC_UNCORRECTABLE',
  215: 'CUDA_ERROR_UNSUPPORTED_LIMIT',
  216: 'CUDA_ERROR_CONTEXT_ALREADY_IN_USE',
  218: 'CUDA_ERROR_INVALID_PTX',
  220: 'CUDA_ERROR_NVLINK_UNCORRECTABLE',
  221: 'CUDA_ERROR_JIT_COMPILER_NOT_FOUND',
  222: 'CUDA_ERROR_UNSUPPORTED_PTX_VERSION',
  223: 'CUDA_ERROR_JIT_COMPILATION_DISABLED',
  224: 'CUDA_ERROR_UNSUPPORTED_EXEC_AFFINITY',
  225: 'CUDA_ERROR_UNSUPPORTED_DEVSIDE_SYNC',
  226: 'CUDA_ERROR_CONTAINED',
  300: 'CUDA_ERROR_INVALID_SOURCE',
  301: 'CUDA_ERROR_FILE_NOT_FOUND',
  302: 'CUDA_ERROR_SHARED_OBJECT_SYMBOL_NOT_FOUND',
  303: 'CUDA_ERROR_SHARED_OBJECT_INIT_FAILED',
  304: 'CUDA_ERROR_OPERATING_SYSTEM',
  400: 'CUDA_ERROR_INVALID_HANDLE',
  401: 'CUDA_ERROR_ILLEGAL_STATE',
  402: 'CUDA_ERROR_LOSSY_QUERY',
  500: 'CUDA_ERROR_NOT_FOUND',
  600: 'CUDA_ERROR_NOT_READY',
  700: 'CUDA_ERROR_ILLEGAL_ADDRESS',
  701: 'CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES',
  702: 'CUDA_ERROR_LAUNCH_TIMEOUT',
  703: 'CUDA_ERROR_LAUNCH_INCOMPATIBLE_TEXTURING',
  708: 'CUDA_ERROR_PRIMARY_CONTEXT_ACTIVE',
  709: 'CUDA_ERROR_CONTEXT_IS_DESTROYED',
  710: 'CUDA_ERROR_ASSERT',
  714: 'CUDA_ERROR_HARDWARE_STACK_ERROR',
  715: 'CUDA_ERROR_ILLEGAL_INSTRUCTION',
  716: 'CUDA_ERROR_MISALIGNED_ADDRESS',
  717: 'CUDA_ERROR_INVALID_ADDRESS_SPACE',
  718: 'CUDA_ERROR_INVALID_PC',
  719: 'CUDA_ERROR_LAUNCH_FAILED',
  720: 'CUDA_ERROR_COOPERATIVE_LAUNCH_TOO_LARGE',
  721: 'CUDA_ERROR_TENSOR_MEMORY_LEAK',
  800: 'CUDA_ERROR_NOT_PERMITTED',
  801: 'CUDA_ERROR_NOT_SUPPORTED',
  802: 'CUDA_ERROR_SYSTEM_NOT_READY',
  803: 'CUDA_ERROR_SYSTEM_DRIVER_MISMATCH',
  804: 'CUDA_ERROR_COMPAT_NOT_SUPPORTED_ON_DEVICE',
  810: 'CUDA_ERROR_MPS_CLIENT_TERMINATED',
  909: 'CUDA_ERROR_TIMEOUT',
  911: 'CUDA_ERROR_EXTERNAL_DEVICE',
  912: 'CUDA_ERROR_INVALID_CLUSTER_SIZE',
  913: 'CUDA_ERROR_FUNCTION_NOT_LOADED',
  999: 'CUDA_ERROR_UNKNOWN',
};

// CUdevice_attribute values (cuda.h; unchanged from CUDA 11 through 13).
export const CU_DEVICE_ATTRIBUTE = {
  MAX_THREADS_PER_BLOCK: 1,
  MAX_BLOCK_DIM_X: 2,
  MAX_GRID_DIM_X: 5,
  MAX_SHARED_MEMORY_PER_BLOCK: 8,
  TOTAL_CONSTANT_MEMORY: 9,
  WARP_SIZE: 10,
  MAX_REGISTERS_PER_BLOCK: 12,
  CLOCK_RATE: 13,
  MULTIPROCESSOR_COUNT: 16,
  INTEGRATED: 18,
  CONCURRENT_KERNELS: 31,
  ECC_ENABLED: 32,
  PCI_BUS_ID: 33,
  PCI_DEVICE_ID: 34,
  MEMORY_CLOCK_RATE: 36, // kHz
  GLOBAL_MEMORY_BUS_WIDTH: 37, // bits
  L2_CACHE_SIZE: 38,
  MAX_THREADS_PER_MULTIPROCESSOR: 39,
  ASYNC_ENGINE_COUNT: 40,
  UNIFIED_ADDRESSING: 41,
  PCI_DOMAIN_ID: 50,
  COMPUTE_CAPABILITY_MAJOR: 75,
  COMPUTE_CAPABILITY_MINOR: 76,
  MAX_SHARED_MEMORY_PER_MULTIPROCESSOR: 81,
  MAX_REGISTERS_PER_MULTIPROCESSOR: 82,
  MANAGED_MEMORY: 83,
  COOPERATIVE_LAUNCH: 95,
  MAX_SHARED_MEMORY_PER_BLOCK_OPTIN: 97,
  MAX_BLOCKS_PER_MULTIPROCESSOR: 106,
} as const;

export interface CudaDeviceInfo {
  index: number;
  name: string;
  /** Compute capability [major, minor]. */
  cc: [number, number];
  /** "sm_90" etc. */
  arch: string;
  totalMem: number;
  smCount: number;
  warpSize: number;
  maxThreadsPerBlock: number;
  maxThreadsPerSM: number;
  maxSharedMemPerBlock: number;
  maxSharedMemPerBlockOptin: number;
  maxSharedMemPerSM: number;
  maxRegsPerBlock: number;
  maxRegsPerSM: number;
  l2CacheSize: number;
  /** Peak memory clock (kHz) and bus width (bits) as reported; may be 0 on recent drivers. */
  memoryClockKHz: number;
  memoryBusWidth: number;
  /** 2 × clock × bus width / 8, in GB/s (0 when the driver does not report them). */
  peakBandwidthGBs: number;
  pciBusId: string;
}

/** The driver entry points device queries need (bound by probeCuda and by driver.ts). */
export interface DeviceQueryFns {
  cuDeviceGet(out: Int32Array, ordinal: number): number;
  cuDeviceGetName(buf: Uint8Array, len: number, dev: number): number;
  cuDeviceTotalMem(out: BigUint64Array, dev: number): number;
  cuDeviceGetAttribute(out: Int32Array, attr: number, dev: number): number;
}

export class CuQueryError extends Error {
  constructor(
    readonly call: string,
    readonly code: number,
  ) {
    super(`${call} failed: ${CU_RESULT_NAMES[code] ?? 'CUresult'} (${code})`);
  }
}

/** Read a device's properties (no context needed). Throws CuQueryError. */
export function queryDevice(fns: DeviceQueryFns, ordinal: number): CudaDeviceInfo {
  const i32 = new Int32Array(1);
  let r = fns.cuDeviceGet(i32, ordinal);
  if (r !== 0) throw new CuQueryError('cuDeviceGet', r);
  const dev = i32[0]!;
  const nameBuf = new Uint8Array(256);
  r = fns.cuDeviceGetName(nameBuf, nameBuf.length, dev);
  if (r !== 0) throw new CuQueryError('cuDeviceGetName', r);
  const end = nameBuf.indexOf(0);
  const name = Buffer.from(nameBuf.subarray(0, end < 0 ? nameBuf.length : end)).toString('utf8');
  const u64 = new BigUint64Array(1);
  r = fns.cuDeviceTotalMem(u64, dev);
  if (r !== 0) throw new CuQueryError('cuDeviceTotalMem', r);
  const attr = (a: number): number => {
    const rr = fns.cuDeviceGetAttribute(i32, a, dev);
    if (rr !== 0) throw new CuQueryError(`cuDeviceGetAttribute(${a})`, rr);
    return i32[0]!;
  };
  const A = CU_DEVICE_ATTRIBUTE;
  const major = attr(A.COMPUTE_CAPABILITY_MAJOR);
  const minor = attr(A.COMPUTE_CAPABILITY_MINOR);
  const memClock = attr(A.MEMORY_CLOCK_RATE);
  const busWidth = attr(A.GLOBAL_MEMORY_BUS_WIDTH);
  const hex = (n: number, w: number): string => n.toString(16).padStart(w, '0');
  return {
    index: ordinal,
    name,
    cc: [major, minor],
    arch: `sm_${major}${minor}`,
    totalMem: Number(u64[0]!),
    smCount: attr(A.MULTIPROCESSOR_COUNT),
    warpSize: attr(A.WARP_SIZE),
    maxThreadsPerBlock: attr(A.MAX_THREADS_PER_BLOCK),
    maxThreadsPerSM: attr(A.MAX_THREADS_PER_MULTIPROCESSOR),
    maxSharedMemPerBlock: attr(A.MAX_SHARED_MEMORY_PER_BLOCK),
    maxSharedMemPerBlockOptin: attr(A.MAX_SHARED_MEMORY_PER_BLOCK_OPTIN),
    maxSharedMemPerSM: attr(A.MAX_SHARED_MEMORY_PER_MULTIPROCESSOR),
    maxRegsPerBlock: attr(A.MAX_REGISTERS_PER_BLOCK),
    maxRegsPerSM: attr(A.MAX_REGISTERS_PER_MULTIPROCESSOR),
    l2CacheSize: attr(A.L2_CACHE_SIZE),
    memoryClockKHz: memClock,
    memoryBusWidth: busWidth,
    peakBandwidthGBs: (2 * memClock * 1e3 * (busWidth / 8)) / 1e9,
    pciBusId: `${hex(attr(A.PCI_DOMAIN_ID), 4)}:${hex(attr(A.PCI_BUS_ID), 2)}:${hex(attr(A.PCI_DEVICE_ID), 2)}.0`,
  };
}

/** Bind the device-query entry points on a loaded libcuda. */
export function bindDeviceQueries(lib: LibraryHandle): DeviceQueryFns & {
  cuInit(flags: number): number;
  cuDriverGetVersion(out: Int32Array): number;
  cuDeviceGetCount(out: Int32Array): number;
  cuGetErrorName(code: number, out: BigUint64Array): number;
} {
  return {
    cuInit: lib.func('cuInit', 'int', ['uint']),
    cuDriverGetVersion: lib.func('cuDriverGetVersion', 'int', ['void *']),
    cuDeviceGetCount: lib.func('cuDeviceGetCount', 'int', ['void *']),
    cuDeviceGet: lib.func('cuDeviceGet', 'int', ['void *', 'int']),
    cuDeviceGetName: lib.func('cuDeviceGetName', 'int', ['void *', 'int', 'int']),
    cuDeviceTotalMem: lib.func('cuDeviceTotalMem_v2', 'int', ['void *', 'int']),
    cuDeviceGetAttribute: lib.func('cuDeviceGetAttribute', 'int', ['void *', 'int', 'int']),
    cuGetErrorName: lib.func('cuGetErrorName', 'int', ['int', 'void *']),
  };
}

/** "13.0" from 13000. */
export function formatCudaVersion(v: number): string {
  return `${Math.floor(v / 1000)}.${Math.floor((v % 1000) / 10)}`;
}

// -------------------------------------------------------------------------------------------
// probe

export interface CudaProbe {
  /** True when the driver works, at least one device is present, and NVRTC and cuBLASLt load. */
  available: boolean;
  /** Why not, when not available (or a warning, e.g. cuBLAS missing). */
  reason?: string;
  /** CUDA version the driver supports, e.g. 13000. */
  driverVersion?: number;
  driverVersionString?: string;
  nvrtcVersion?: [number, number];
  cublasLtVersion?: number;
  devices?: CudaDeviceInfo[];
  /** Paths loaded (null when not found). */
  libs: Record<CudaLibKind, string | null>;
  /** Per-library load errors. */
  libErrors: Partial<Record<CudaLibKind, string>>;
}

/** Probe the CUDA stack. Never throws: everything that goes wrong ends up in `reason`. */
export function probeCuda(): CudaProbe {
  const res: CudaProbe = { available: false, libs: { cuda: null, nvrtc: null, cublasLt: null, cublas: null }, libErrors: {} };
  try {
    const tryLoad = (k: CudaLibKind): LibraryHandle | null => {
      try {
        const l = loadCudaLibrary(k);
        res.libs[k] = l.path;
        return l.lib;
      } catch (e) {
        res.libErrors[k] = e instanceof Error ? e.message : String(e);
        return null;
      }
    };
    const cuda = tryLoad('cuda');
    const nvrtc = tryLoad('nvrtc');
    const lt = tryLoad('cublasLt');
    tryLoad('cublas');
    if (nvrtc) {
      try {
        const ver = nvrtc.func('nvrtcVersion', 'int', ['void *', 'void *']);
        const a = new Int32Array(1);
        const b = new Int32Array(1);
        if (ver(a, b) === 0) res.nvrtcVersion = [a[0]!, b[0]!];
      } catch {
        /* version is informative only */
      }
    }
    if (lt) {
      try {
        const v = lt.func('cublasLtGetVersion', 'size_t', []);
        res.cublasLtVersion = Number(v());
      } catch {
        /* informative */
      }
    }
    if (!cuda) {
      res.reason = `no NVIDIA driver: libcuda.so.1 could not be loaded from the system loader path or ${librarySearchDirs('cuda').length} folders (see libErrors.cuda)`;
      return res;
    }
    let fns: ReturnType<typeof bindDeviceQueries>;
    try {
      fns = bindDeviceQueries(cuda);
    } catch (e) {
      res.reason = `${res.libs.cuda} lacks driver API entry points (${e instanceof Error ? e.message : String(e)}): is it a stub library?`;
      return res;
    }
    const i32 = new Int32Array(1);
    if (fns.cuDriverGetVersion(i32) === 0) {
      res.driverVersion = i32[0]!;
      res.driverVersionString = formatCudaVersion(i32[0]!);
    }
    const r = fns.cuInit(0);
    if (r !== 0) {
      const name = CU_RESULT_NAMES[r] ?? `CUresult ${r}`;
      const why: Record<number, string> = {
        100: 'the NVIDIA driver is installed but no CUDA-capable device is visible (check CUDA_VISIBLE_DEVICES, nvidia-smi, container --gpus)',
        34: 'the loaded libcuda is the toolkit stub, not the real driver library',
        803: 'the user-mode driver (libcuda) and the kernel module versions differ: reboot or reinstall the driver',
        999: 'unknown driver error (a GPU in a bad state? see dmesg / nvidia-smi)',
        3: 'the driver could not initialize',
        46: 'the device is busy or unavailable (exclusive-process mode?)',
      };
      res.reason = `cuInit failed: ${name} (${r}): ${why[r] ?? 'the CUDA driver could not be initialized'}`;
      return res;
    }
    if (fns.cuDeviceGetCount(i32) !== 0 || i32[0] === 0) {
      res.reason = 'no CUDA device found (cuDeviceGetCount returned 0)';
      res.devices = [];
      return res;
    }
    const n = i32[0]!;
    res.devices = [];
    for (let i = 0; i < n; i++) {
      try {
        res.devices.push(queryDevice(fns, i));
      } catch (e) {
        res.reason = `device ${i}: ${e instanceof Error ? e.message : String(e)}`;
      }
    }
    const missing: string[] = [];
    if (!nvrtc) missing.push('NVRTC (needed to compile kernels)');
    if (!lt) missing.push('cuBLASLt (needed for matmul)');
    if (missing.length > 0) {
      res.reason = `driver and ${n} device(s) found, but ${missing.join(' and ')} could not be loaded (see libErrors)`;
      return res;
    }
    if (res.devices.length === 0) return res;
    res.available = true;
    if (res.reason === undefined) delete res.reason;
    return res;
  } catch (e) {
    res.available = false;
    res.reason = `probe failed: ${e instanceof Error ? e.message : String(e)}`;
    return res;
  }
}
