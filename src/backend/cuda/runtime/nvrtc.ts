// NVRTC: compile CUDA C++ source at run time for the device's own architecture, with an
// on-disk cache (so a second process compiles nothing) and in-memory caches of compiled
// images and loaded modules/functions.
//
// * Target: `--gpu-architecture=sm_XY` from the compute capability when NVRTC supports that
//   architecture (the result is a CUBIN, fetched with nvrtcGetCUBIN); otherwise the newest
//   supported `compute_XY` not above the device (the result is PTX that the driver JITs).
// * Default options: `-default-device --std=c++17` plus `--include-path` for a CUDA toolkit
//   include folder when one is found (for cuda_fp16.h / cuda_bf16.h). NVRTC has no -O3 flag:
//   device code is optimized by default and ptxas runs at -O3.
// * Disk cache: $NBX_CACHE_DIR, else $XDG_CACHE_HOME/nbxtensor, else ~/.cache/nbxtensor; files
//   in its nvrtc/ folder, named by sha256(format, source, headers, arch, NVRTC version, options,
//   name expressions), written atomically (temporary file + rename). NBX_NVRTC_CACHE=0 turns
//   the disk cache off.

import { createHash } from 'node:crypto';
import { packageRoot } from '../../../profiles/root.js';
import { existsSync, mkdirSync, readFileSync, renameSync, unlinkSync, writeFileSync } from 'node:fs';
import { homedir } from 'node:os';
import { join } from 'node:path';
import koffi from 'koffi';
import { DeviceError, NbxError, UnsupportedError } from '../../../errors.js';
import { gridDependencyEnabled, type ArgType, type CudaContext, type CudaKernel, type CudaModule } from './driver.js';
import { cudaToolkitRoots, loadCudaLibrary, pythonSitePackages } from './libs.js';

/** A compilation that failed; `log` holds NVRTC's whole log. */
/** A program created for a compile that missed the caches (Nvrtc.begin → NVRTC → Nvrtc.end). */
interface CompileJob { source: string; p: ReturnType<Nvrtc['prepare']>; disk: boolean; prog: bigint; t0: number }

export class NvrtcCompileError extends NbxError {
  readonly log: string;
  readonly kernel: string;
  readonly code: number;
  constructor(kernel: string, code: number, message: string, log: string) {
    super(`nvrtc.compile(${kernel})`, message);
    this.kernel = kernel;
    this.code = code;
    this.log = log;
  }
}

export interface CompileOptions {
  /** Program name shown in NVRTC messages and errors (default: the first __global__ function found). */
  name?: string;
  /** Extra NVRTC options, e.g. ['--use_fast_math', '-DBLOCK=256']. */
  options?: string[];
  /** Target override, e.g. 'sm_90a' (arch-specific features such as wgmma) or 'compute_90'. */
  arch?: string;
  /** C++ name expressions (templates) whose lowered (mangled) names are wanted, e.g. 'gemm<float, 64>'. */
  nameExpressions?: string[];
  /** Virtual headers: include name → content. */
  headers?: Record<string, string>;
  /** Use the disk cache (default: true unless NBX_NVRTC_CACHE=0). */
  diskCache?: boolean;
  /** Add a CUDA toolkit include folder if one is found (default: true). */
  includeCudaHeaders?: boolean;
}

export interface CompiledModule {
  /** Cache key (sha256 hex). */
  key: string;
  kind: 'cubin' | 'ptx';
  /** CUBIN bytes, or PTX text with its terminating NUL. */
  image: Uint8Array;
  arch: string;
  /** Compile log (warnings), '' when none. */
  log: string;
  /** Name expression → lowered name. */
  loweredNames: Record<string, string>;
  /** Where this result came from. */
  from: 'compiled' | 'memory' | 'disk';
  /** Time spent compiling (0 for cache hits). */
  compileMs: number;
  options: string[];
  name: string;
}

export interface NvrtcStats {
  compiles: number;
  compileMs: number;
  compileFailures: number;
  memoryHits: number;
  diskHits: number;
  diskMisses: number;
  diskWrites: number;
  diskErrors: number;
  modulesLoaded: number;
  moduleHits: number;
}

const stats: NvrtcStats = {
  compiles: 0,
  compileMs: 0,
  compileFailures: 0,
  memoryHits: 0,
  diskHits: 0,
  diskMisses: 0,
  diskWrites: 0,
  diskErrors: 0,
  modulesLoaded: 0,
  moduleHits: 0,
};

export function nvrtcStats(): NvrtcStats {
  return { ...stats };
}

export function resetNvrtcStats(): void {
  for (const k of Object.keys(stats) as (keyof NvrtcStats)[]) stats[k] = 0;
}

/** Root of nbxtensor's caches: $NBX_CACHE_DIR, else $XDG_CACHE_HOME/nbxtensor, else ~/.cache/nbxtensor. */
export function cacheRoot(): string {
  const env = process.env;
  if (env.NBX_CACHE_DIR) return env.NBX_CACHE_DIR;
  const xdg = env.XDG_CACHE_HOME || join(homedir(), '.cache');
  return join(xdg, 'nbxtensor');
}

/** Kernels compiled on known cards, shipped in the package (src/backend/cuda/shipped-kernels). */
export function shippedKernelDir(): string {
  return join(packageRoot(), 'src', 'backend', 'cuda', 'shipped-kernels');
}

/** Folder of compiled kernels. */
export function kernelCacheDir(): string {
  return join(cacheRoot(), 'nvrtc');
}

function diskCacheEnabled(opt: boolean | undefined): boolean {
  if (opt !== undefined) return opt;
  const v = process.env.NBX_NVRTC_CACHE;
  return !(v === '0' || v === 'off' || v === 'false');
}

// -------------------------------------------------------------------------------------------
// disk format: "NBXMOD1\n" | u32 LE json length | json meta | image bytes

const MAGIC = Buffer.from('NBXMOD1\n', 'latin1');
const FORMAT_VERSION = 1;

interface DiskMeta {
  kind: 'cubin' | 'ptx';
  arch: string;
  nvrtc: string;
  name: string;
  loweredNames: Record<string, string>;
  log: string;
  imageBytes: number;
  created: string;
}

/** Encode a cache file (exported for tests). */
export function encodeCacheFile(meta: DiskMeta, image: Uint8Array): Buffer {
  const json = Buffer.from(JSON.stringify(meta), 'utf8');
  const len = Buffer.alloc(4);
  len.writeUInt32LE(json.length, 0);
  return Buffer.concat([MAGIC, len, json, image]);
}

/** Decode a cache file; null when it is not a complete, valid file. */
export function decodeCacheFile(buf: Buffer): { meta: DiskMeta; image: Uint8Array } | null {
  if (buf.length < MAGIC.length + 4 || !buf.subarray(0, MAGIC.length).equals(MAGIC)) return null;
  const n = buf.readUInt32LE(MAGIC.length);
  const start = MAGIC.length + 4;
  if (start + n > buf.length) return null;
  let meta: DiskMeta;
  try {
    meta = JSON.parse(buf.subarray(start, start + n).toString('utf8')) as DiskMeta;
  } catch {
    return null;
  }
  const image = buf.subarray(start + n);
  if (meta.imageBytes !== image.length || (meta.kind !== 'cubin' && meta.kind !== 'ptx')) return null;
  return { meta, image: new Uint8Array(image) };
}

/** Write `data` to `path` atomically: a temporary file in the same folder, then rename. */
export function writeFileAtomic(path: string, data: Uint8Array): void {
  const tmp = `${path}.tmp-${process.pid}-${Math.random().toString(36).slice(2)}`;
  try {
    writeFileSync(tmp, data);
    renameSync(tmp, path);
  } catch (e) {
    try {
      unlinkSync(tmp);
    } catch {
      /* nothing to clean */
    }
    throw e;
  }
}

/** sha256 cache key of everything that determines the compiled image. */
export function cacheKey(parts: {
  source: string;
  arch: string;
  nvrtcVersion: string;
  options: readonly string[];
  nameExpressions: readonly string[];
  headers: Record<string, string>;
}): string {
  const h = createHash('sha256');
  h.update(
    JSON.stringify({
      format: FORMAT_VERSION,
      source: parts.source,
      arch: parts.arch,
      nvrtc: parts.nvrtcVersion,
      options: parts.options,
      names: parts.nameExpressions,
      headers: Object.entries(parts.headers).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)),
    }),
  );
  return h.digest('hex');
}

/** The __global__ function names declared in `source` (best effort, for messages). */
export function globalFunctionNames(source: string): string[] {
  const out: string[] = [];
  const re = /__global__\s+(?:__launch_bounds__\s*\([^)]*\)\s*)?(?:void)\s+(?:__launch_bounds__\s*\([^)]*\)\s*)?([A-Za-z_]\w*)/g;
  for (let m = re.exec(source); m; m = re.exec(source)) out.push(m[1]!);
  return out;
}

// -------------------------------------------------------------------------------------------
// bindings

interface NvrtcFns {
  nvrtcVersion(major: Int32Array, minor: Int32Array): number;
  nvrtcGetErrorString(code: number): string;
  nvrtcCreateProgram(out: BigUint64Array, src: string, name: string, n: number, headers: string[] | null, names: string[] | null): number;
  nvrtcDestroyProgram(prog: BigUint64Array): number;
  nvrtcCompileProgram: ((prog: bigint, n: number, opts: string[] | null) => number) & {
    async: (prog: bigint, n: number, opts: string[] | null, cb: (err: unknown, res: number) => void) => void;
  };
  nvrtcGetProgramLogSize(prog: bigint, out: BigUint64Array): number;
  nvrtcGetProgramLog(prog: bigint, buf: Uint8Array): number;
  nvrtcGetPTXSize(prog: bigint, out: BigUint64Array): number;
  nvrtcGetPTX(prog: bigint, buf: Uint8Array): number;
  nvrtcGetCUBINSize: ((prog: bigint, out: BigUint64Array) => number) | null;
  nvrtcGetCUBIN: ((prog: bigint, buf: Uint8Array) => number) | null;
  nvrtcAddNameExpression(prog: bigint, expr: string): number;
  nvrtcGetLoweredName(prog: bigint, expr: string, out: BigUint64Array): number;
  nvrtcGetNumSupportedArchs: ((out: Int32Array) => number) | null;
  nvrtcGetSupportedArchs: ((out: Int32Array) => number) | null;
}

const NVRTC_ERROR_COMPILATION = 6;

let instance: Nvrtc | null = null;

export class Nvrtc {
  readonly libPath: string;
  readonly version: [number, number];
  /** Real architectures NVRTC can emit CUBIN for, e.g. [75, 80, 86, 89, 90, 100, ...]. */
  readonly supportedArchs: number[];
  private readonly f: NvrtcFns;
  private readonly images = new Map<string, CompiledModule>();
  private includeDirsCache: string[] | null = null;

  private constructor() {
    const { lib, path } = loadCudaLibrary('nvrtc');
    this.libPath = path;
    const P = 'void *';
    const opt = <T>(fn: () => T): T | null => {
      try {
        return fn();
      } catch {
        return null;
      }
    };
    this.f = {
      nvrtcVersion: lib.func('nvrtcVersion', 'int', [P, P]),
      nvrtcGetErrorString: lib.func('nvrtcGetErrorString', 'const char *', ['int']),
      nvrtcCreateProgram: lib.func('nvrtcCreateProgram', 'int', [P, 'const char *', 'const char *', 'int', 'const char **', 'const char **']),
      nvrtcDestroyProgram: lib.func('nvrtcDestroyProgram', 'int', [P]),
      nvrtcCompileProgram: lib.func('nvrtcCompileProgram', 'int', [P, 'int', 'const char **']),
      nvrtcGetProgramLogSize: lib.func('nvrtcGetProgramLogSize', 'int', [P, P]),
      nvrtcGetProgramLog: lib.func('nvrtcGetProgramLog', 'int', [P, P]),
      nvrtcGetPTXSize: lib.func('nvrtcGetPTXSize', 'int', [P, P]),
      nvrtcGetPTX: lib.func('nvrtcGetPTX', 'int', [P, P]),
      nvrtcGetCUBINSize: opt(() => lib.func('nvrtcGetCUBINSize', 'int', [P, P])),
      nvrtcGetCUBIN: opt(() => lib.func('nvrtcGetCUBIN', 'int', [P, P])),
      nvrtcAddNameExpression: lib.func('nvrtcAddNameExpression', 'int', [P, 'const char *']),
      nvrtcGetLoweredName: lib.func('nvrtcGetLoweredName', 'int', [P, 'const char *', P]),
      nvrtcGetNumSupportedArchs: opt(() => lib.func('nvrtcGetNumSupportedArchs', 'int', [P])),
      nvrtcGetSupportedArchs: opt(() => lib.func('nvrtcGetSupportedArchs', 'int', [P])),
    } as unknown as NvrtcFns;
    const a = new Int32Array(1);
    const b = new Int32Array(1);
    this.check(this.f.nvrtcVersion(a, b), 'nvrtcVersion');
    this.version = [a[0]!, b[0]!];
    this.supportedArchs = [];
    if (this.f.nvrtcGetNumSupportedArchs && this.f.nvrtcGetSupportedArchs) {
      if (this.f.nvrtcGetNumSupportedArchs(a) === 0 && a[0]! > 0) {
        const arr = new Int32Array(a[0]!);
        if (this.f.nvrtcGetSupportedArchs(arr) === 0) this.supportedArchs = [...arr].sort((x, y) => x - y);
      }
    }
  }

  /** The process-wide NVRTC (loaded on first use). Throws DeviceError when libnvrtc cannot be loaded. */
  static get(): Nvrtc {
    return (instance ??= new Nvrtc());
  }

  get versionString(): string {
    return `${this.version[0]}.${this.version[1]}`;
  }

  private check(r: number, call: string): void {
    if (r !== 0) throw new DeviceError(`nvrtc.${call}`, `${call} failed: ${this.errorString(r)} (${r})`);
  }

  errorString(code: number): string {
    try {
      return this.f.nvrtcGetErrorString(code) ?? `nvrtcResult ${code}`;
    } catch {
      return `nvrtcResult ${code}`;
    }
  }

  /**
   * The target for compute capability `cc`: sm_XY (CUBIN) when NVRTC supports it, else the
   * newest supported compute_XY not above the device (PTX, JIT-compiled by the driver).
   */
  targetFor(cc: readonly [number, number]): { arch: string; kind: 'cubin' | 'ptx' } {
    const want = cc[0] * 10 + cc[1];
    const sup = this.supportedArchs;
    const cubinOk = this.f.nvrtcGetCUBIN !== null;
    if ((sup.length === 0 || sup.includes(want)) && cubinOk) return { arch: `sm_${want}`, kind: 'cubin' };
    const below = sup.filter((a) => a <= want);
    if (sup.length > 0 && below.length === 0) {
      throw new UnsupportedError(
        'nvrtc',
        `NVRTC ${this.versionString} supports architectures ${sup.join(', ')} but the device is sm_${want}; use an older CUDA toolkit`,
      );
    }
    const best = below.length > 0 ? below[below.length - 1]! : want;
    return { arch: `compute_${best}`, kind: 'ptx' };
  }

  /** CUDA include folders found (toolkit roots, then NVIDIA pip wheels); cached. */
  includeDirs(): string[] {
    if (this.includeDirsCache) return this.includeDirsCache;
    const out: string[] = [];
    const cands: string[] = [];
    for (const root of cudaToolkitRoots()) {
      cands.push(join(root, 'include'), join(root, 'targets', `${process.arch === 'arm64' ? 'sbsa' : 'x86_64'}-linux`, 'include'));
    }
    for (const sp of pythonSitePackages()) {
      for (const pkg of ['cuda_runtime', 'cu13', 'cu12', 'cuda_nvrtc']) cands.push(join(sp, 'nvidia', pkg, 'include'));
    }
    for (const d of cands) {
      if (existsSync(join(d, 'cuda_fp16.h'))) {
        out.push(d);
        // CUDA 13 keeps the CCCL headers (cuda/std, nv/target, cub, thrust) in include/cccl.
        if (existsSync(join(d, 'cccl'))) out.push(join(d, 'cccl'));
        break;
      }
    }
    this.includeDirsCache = out;
    return out;
  }

  private prepare(source: string, target: string | readonly [number, number], o: CompileOptions) {
    const t = typeof target === 'string' ? { arch: target, kind: target.startsWith('sm_') ? ('cubin' as const) : ('ptx' as const) } : this.targetFor(target);
    const arch = o.arch ?? t.arch;
    const kind: 'cubin' | 'ptx' = o.arch ? (o.arch.startsWith('sm_') && this.f.nvrtcGetCUBIN ? 'cubin' : 'ptx') : t.kind;
    const user = o.options ?? [];
    for (const u of user) {
      if (/^(--gpu-architecture|-arch|--gpu-name)\b/.test(u)) {
        throw new UnsupportedError('nvrtc.compile', `pass the target as options.arch ('sm_90a', 'compute_90', ...), not as ${u}`);
      }
    }
    const options = [`--gpu-architecture=${arch}`, '-default-device'];
    // The caller's language standard wins over the default.
    if (!user.some((u) => /^(--std|-std)[=\s]/.test(u))) options.push('--std=c++17');
    if (o.includeCudaHeaders !== false) for (const d of this.includeDirs()) options.push(`--include-path=${d}`);
    for (const u of user) if (!options.includes(u)) options.push(u);
    const names = o.nameExpressions ?? [];
    const headers = o.headers ?? {};
    const name = o.name ?? globalFunctionNames(source)[0] ?? 'kernel';
    const key = cacheKey({ source, arch, nvrtcVersion: this.versionString, options, nameExpressions: names, headers });
    return { arch, kind, options, names, headers, name, key };
  }

  private lookup(p: ReturnType<Nvrtc['prepare']>, disk: boolean): CompiledModule | null {
    const mem = this.images.get(p.key);
    if (mem) {
      stats.memoryHits++;
      return { ...mem, from: 'memory', compileMs: 0 };
    }
    if (!disk) return null;
    const file = join(kernelCacheDir(), `${p.key}.nbxmod`);
    let buf: Buffer;
    try {
      buf = readFileSync(file);
    } catch {
      // Kernels precompiled for known cards ship with the package (read-only, same key scheme):
      // a first run compiles nothing for the common operations.
      try {
        buf = readFileSync(join(shippedKernelDir(), `${p.key}.nbxmod`));
      } catch {
        stats.diskMisses++;
        return null;
      }
    }
    const dec = decodeCacheFile(buf);
    if (!dec || dec.meta.arch !== p.arch || dec.meta.kind !== p.kind) {
      stats.diskMisses++;
      stats.diskErrors++;
      return null; // corrupt or foreign: recompile and overwrite
    }
    stats.diskHits++;
    const cm: CompiledModule = {
      key: p.key,
      kind: dec.meta.kind,
      image: dec.image,
      arch: p.arch,
      log: dec.meta.log,
      loweredNames: dec.meta.loweredNames,
      from: 'disk',
      compileMs: 0,
      options: p.options,
      name: p.name,
    };
    this.images.set(p.key, cm);
    return cm;
  }

  private store(cm: CompiledModule, disk: boolean): void {
    this.images.set(cm.key, cm);
    if (!disk) return;
    try {
      const dir = kernelCacheDir();
      mkdirSync(dir, { recursive: true });
      const meta: DiskMeta = {
        kind: cm.kind,
        arch: cm.arch,
        nvrtc: this.versionString,
        name: cm.name,
        loweredNames: cm.loweredNames,
        log: cm.log,
        imageBytes: cm.image.length,
        created: new Date().toISOString(),
      };
      writeFileAtomic(join(dir, `${cm.key}.nbxmod`), encodeCacheFile(meta, cm.image));
      stats.diskWrites++;
    } catch {
      stats.diskErrors++; // a read-only or full cache folder must not break compilation
    }
  }

  private createProgram(source: string, p: ReturnType<Nvrtc['prepare']>): bigint {
    const out = new BigUint64Array(1);
    const hNames = Object.keys(p.headers);
    const hSrc = hNames.map((n) => p.headers[n]!);
    this.check(
      this.f.nvrtcCreateProgram(out, source, `${p.name}.cu`, hNames.length, hNames.length ? hSrc : null, hNames.length ? hNames : null),
      'nvrtcCreateProgram',
    );
    const prog = out[0]!;
    for (const e of p.names) {
      const r = this.f.nvrtcAddNameExpression(prog, e);
      if (r !== 0) {
        this.destroy(prog);
        this.check(r, `nvrtcAddNameExpression(${e})`);
      }
    }
    return prog;
  }

  private destroy(prog: bigint): void {
    this.f.nvrtcDestroyProgram(new BigUint64Array([prog]));
  }

  private programLog(prog: bigint): string {
    const n = new BigUint64Array(1);
    if (this.f.nvrtcGetProgramLogSize(prog, n) !== 0) return '';
    const size = Number(n[0]!);
    if (size <= 1) return '';
    const buf = new Uint8Array(size);
    if (this.f.nvrtcGetProgramLog(prog, buf) !== 0) return '';
    return Buffer.from(buf.subarray(0, size - 1)).toString('utf8').trim();
  }

  private finish(prog: bigint, r: number, p: ReturnType<Nvrtc['prepare']>, source: string, ms: number): CompiledModule {
    try {
      const log = this.programLog(prog);
      if (r !== 0) {
        stats.compileFailures++;
        const lines = log.split('\n');
        const head = lines.slice(0, 30).join('\n');
        const kernels = globalFunctionNames(source);
        throw new NvrtcCompileError(
          p.name,
          r,
          `compiling ${p.name} (kernels: ${kernels.join(', ') || 'none found'}) for ${p.arch} failed: ${this.errorString(r)}` +
            (r === NVRTC_ERROR_COMPILATION ? '' : ` [options: ${p.options.join(' ')}]`) +
            (head ? `\n${head}` : '') +
            (lines.length > 30 ? `\n... (${lines.length - 30} more lines; see error.log)` : ''),
          log,
        );
      }
      const size = new BigUint64Array(1);
      let image: Uint8Array;
      if (p.kind === 'cubin') {
        this.check(this.f.nvrtcGetCUBINSize!(prog, size), 'nvrtcGetCUBINSize');
        image = new Uint8Array(Number(size[0]!));
        this.check(this.f.nvrtcGetCUBIN!(prog, image), 'nvrtcGetCUBIN');
      } else {
        this.check(this.f.nvrtcGetPTXSize(prog, size), 'nvrtcGetPTXSize');
        image = new Uint8Array(Number(size[0]!)); // includes the terminating NUL
        this.check(this.f.nvrtcGetPTX(prog, image), 'nvrtcGetPTX');
      }
      const lowered: Record<string, string> = {};
      for (const e of p.names) {
        const out = new BigUint64Array(1);
        this.check(this.f.nvrtcGetLoweredName(prog, e, out), `nvrtcGetLoweredName(${e})`);
        lowered[e] = koffi.decode.string(out[0]!);
      }
      stats.compiles++;
      stats.compileMs += ms;
      return { key: p.key, kind: p.kind, image, arch: p.arch, log, loweredNames: lowered, from: 'compiled', compileMs: ms, options: p.options, name: p.name };
    } finally {
      this.destroy(prog);
    }
  }

  /**
   * Compile `source` for `target` (a compute capability, or an explicit 'sm_90' / 'compute_90').
   * Served from the in-memory cache, then the disk cache, then NVRTC. Blocks the thread while
   * compiling; see compileAsync.
   */
  compile(source: string, target: string | readonly [number, number], options: CompileOptions = {}): CompiledModule {
    const job = this.begin(source, target, options);
    if ('hit' in job) return job.hit;
    let r: number | { error: unknown };
    try {
      r = this.f.nvrtcCompileProgram(job.prog, job.p.options.length, job.p.options);
    } catch (error) {
      r = { error };
    }
    return this.end(job, r);
  }

  /** Like compile(), but NVRTC runs on a worker thread so the event loop keeps going. */
  async compileAsync(source: string, target: string | readonly [number, number], options: CompileOptions = {}): Promise<CompiledModule> {
    const job = this.begin(source, target, options);
    if ('hit' in job) return job.hit;
    const r = await new Promise<number>((resolve, reject) => {
      this.f.nvrtcCompileProgram.async(job.prog, job.p.options.length, job.p.options, (err, res) => (err ? reject(err) : resolve(res)));
    }).catch((error: unknown) => ({ error }));
    return this.end(job, r);
  }

  /** What compile and compileAsync share before NVRTC runs: a cached module, or a program to compile. */
  private begin(source: string, target: string | readonly [number, number], options: CompileOptions): { hit: CompiledModule } | CompileJob {
    const p = this.prepare(source, target, options);
    const disk = diskCacheEnabled(options.diskCache);
    const hit = this.lookup(p, disk);
    if (hit) return { hit };
    return { source, p, disk, prog: this.createProgram(source, p), t0: performance.now() };
  }

  /** What they share after: NVRTC's result code (or the exception of the call) made a module, cached. */
  private end(job: CompileJob, r: number | { error: unknown }): CompiledModule {
    if (typeof r !== 'number') {
      this.destroy(job.prog);
      throw r.error;
    }
    const cm = this.finish(job.prog, r, job.p, job.source, performance.now() - job.t0);
    this.store(cm, job.disk);
    return cm;
  }

  /** Forget compiled images held in memory (the disk cache stays). */
  clearMemoryCache(): void {
    this.images.clear();
  }
}

// -------------------------------------------------------------------------------------------
// loaded modules

const modules = new Map<string, { module: CudaModule; compiled: CompiledModule }>();

/** Compile (or fetch) `source` for `ctx`'s device and load it; loaded modules are cached per context. */
export function loadSource(ctx: CudaContext, source: string, options: CompileOptions = {}): { module: CudaModule; compiled: CompiledModule } {
  const nv = Nvrtc.get();
  const pdl = gridDependencyEnabled(ctx);
  const compiled = nv.compile(pdl ? withGridDependencyWait(source) : withoutGridDependency(source), options.arch ?? ctx.info.cc, options);
  return loadCompiled(ctx, compiled, pdl);
}

/** Async variant of loadSource (compilation off the main thread). */
export async function loadSourceAsync(ctx: CudaContext, source: string, options: CompileOptions = {}): Promise<{ module: CudaModule; compiled: CompiledModule }> {
  const nv = Nvrtc.get();
  const pdl = gridDependencyEnabled(ctx);
  const compiled = await nv.compileAsync(pdl ? withGridDependencyWait(source) : withoutGridDependency(source), options.arch ?? ctx.info.cc, options);
  return loadCompiled(ctx, compiled, pdl);
}

// By default a kernel also lets the next kernel's blocks be scheduled as soon as every block of this one
// has started (they then wait for this grid to complete): more overlap than waiting alone (BENCHMARKS.md,
// decode with programmatic dependent launch); NBX_CUDA_PDL=1 waits without that trigger.
// NBX_PREFETCH_L2(ptr, bytes) asks L2 for a range (16-byte aligned, bytes a multiple of 16) without waiting:
// a kernel issues it for data no earlier kernel writes (its weights) before its own wait, so the reads of
// this kernel's first blocks overlap the previous kernel's tail.
const gridDependencyPrelude = (): string => `#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900 && !defined(NBX_EMU)
#define NBX_GRID_DEPENDENCY_WAIT() asm volatile("griddepcontrol.wait;" ::: "memory")${process.env.NBX_CUDA_PDL === '1' ? '' : '; asm volatile("griddepcontrol.launch_dependents;")'}
#define NBX_PREFETCH_L2(p, bytes) asm volatile("cp.async.bulk.prefetch.L2.global [%0], %1;" :: "l"(p), "r"((unsigned)(bytes)) : "memory")
#else
#define NBX_GRID_DEPENDENCY_WAIT()
#define NBX_PREFETCH_L2(p, bytes)
#endif
`;

/** The macros a kernel uses when it places its own wait; defined empty when PDL is off. */
const noGridDependencyPrelude = `#ifndef NBX_GRID_DEPENDENCY_WAIT
#define NBX_GRID_DEPENDENCY_WAIT()
#define NBX_PREFETCH_L2(p, bytes)
#endif
`;

/**
 * `source` with every __global__ function starting with the grid-dependency wait (driver.ts,
 * programmatic dependent launch): the first statement of each kernel body, so nothing of a kernel reads
 * or writes memory before the previous kernel in the stream has completed. A kernel body is the first
 * `{` at parenthesis depth 0 after `__global__`. A source that calls NBX_GRID_DEPENDENCY_WAIT() itself
 * places the wait in every one of its kernels (after work that reads nothing an earlier kernel writes):
 * it gets the macros only.
 */
export function withGridDependencyWait(source: string): string {
  if (source.includes('NBX_GRID_DEPENDENCY_WAIT();')) return gridDependencyPrelude() + source;
  let out = '', from = 0;
  for (let at = source.indexOf('__global__'); at >= 0; at = source.indexOf('__global__', at + 10)) {
    const lineStart = source.lastIndexOf('\n', at) + 1;
    if (/\/\/|^\s*\*/.test(source.slice(lineStart, at))) continue; // in a comment
    let depth = 0, i = at + 10;
    for (; i < source.length; i++) {
      const c = source[i];
      if (c === '(') depth++;
      else if (c === ')') depth--;
      else if (c === ';' && depth === 0) { i = -1; break; } // a declaration, not a definition
      else if (c === '{' && depth === 0) break;
    }
    if (i < 0 || i >= source.length) continue;
    out += source.slice(from, i + 1) + ' NBX_GRID_DEPENDENCY_WAIT();';
    from = i + 1;
  }
  return from === 0 ? source : gridDependencyPrelude() + out + source.slice(from);
}

/** `source` for a launch without PDL: the macros of a kernel that places its own wait, empty. */
export function withoutGridDependency(source: string): string {
  return source.includes('NBX_GRID_DEPENDENCY_WAIT') || source.includes('NBX_PREFETCH_L2') ? noGridDependencyPrelude + source : source;
}

function loadCompiled(ctx: CudaContext, compiled: CompiledModule, gridDependent = false): { module: CudaModule; compiled: CompiledModule } {
  const mk = `${ctx.device}:${compiled.key}`;
  const hit = modules.get(mk);
  if (hit) {
    stats.moduleHits++;
    return hit;
  }
  const module = ctx.loadModule(compiled.image, compiled.name);
  module.gridDependent = gridDependent;
  stats.modulesLoaded++;
  const r = { module, compiled };
  modules.set(mk, r);
  return r;
}

/**
 * The kernel `kernelName` from `source`, compiled for `ctx`'s device, loaded and cached.
 * `kernelName` may be an extern "C" name, a mangled name, or one of options.nameExpressions.
 */
export function getKernel(
  ctx: CudaContext,
  source: string,
  kernelName: string,
  signature: string | readonly ArgType[],
  options: CompileOptions = {},
): CudaKernel {
  const { module, compiled } = loadSource(ctx, source, { ...options, name: options.name ?? kernelName });
  return module.getFunction(compiled.loweredNames[kernelName] ?? kernelName, signature);
}

/** Unload every cached module (e.g. before tearing a context down) and forget compiled images. */
export function clearKernelCaches(): void {
  for (const { module } of modules.values()) {
    try {
      module.unload();
    } catch {
      /* context may be gone */
    }
  }
  modules.clear();
  instance?.clearMemoryCache();
}
