// The persistent autotune cache.
//
// Key:   (kernel name, shape bucket, dtype, device key)
// Value: the best configuration, its measured time, every candidate tried with its time, and every
//        candidate that failed with its error.
//
// Two layers, consulted in order:
//   1. the user cache: `$NBX_CACHE_DIR/autotune.json`, else `$XDG_CACHE_HOME/nbxtensor/autotune.json`,
//      else `~/.cache/nbxtensor/autotune.json`. Written atomically (temporary file + rename, after
//      re-reading the file so entries written meanwhile by another process are kept). A file that
//      cannot be parsed is moved aside to `autotune.json.bad`, said once on stderr, and the cache
//      starts empty. A file from a newer format version is left alone and not written over.
//   2. the shipped cache: `src/autotune/shipped/*.json` in the package, one file per device key,
//      measured on known cards. Read-only. A device key matches exactly, or else on everything but
//      its driver part (a measurement on "NVIDIA H200|sm_90|driver 580" serves driver 575 too; the
//      user cache, which is consulted first, is keyed exactly).
//
// File format (both layers):
//   { "format": "nbxtensor-autotune", "version": 1,
//     "entries": { "<device key>": { "<kernel>": { "<shape bucket>|<dtype>": <entry> } } } }
//
// Shape buckets: each dimension rounds up to the next power of two (`bucketSize`), so 3000 and 4096
// share an entry and 4097 starts the next. A configuration cached for a bucket is therefore used for
// every size in it: kernels must handle the remainder (masking) for any size, which they do anyway.
// 0 stays 0 (empty dimensions are their own bucket).

import { mkdirSync, readdirSync, readFileSync, renameSync, unlinkSync, writeFileSync, existsSync } from 'node:fs';
import { homedir } from 'node:os';
import { join } from 'node:path';
import { FormatError, ValueError } from '../errors.js';
import { shippedCacheDir } from '../profiles/root.js';
import type { Config, KnobValue } from './space.js';

export const CACHE_FORMAT = 'nbxtensor-autotune';
export const CACHE_VERSION = 1;
export const CACHE_FILE = 'autotune.json';

/** Where one tuning result applies. */
export interface TuneKey {
  /** Shape bucket, e.g. `shapeBucket([4096, 3000])` = "4096x4096". */
  shape: string;
  /** e.g. "float16". */
  dtype: string;
  /** Device key, e.g. `deviceKey({ name: 'NVIDIA H200', arch: 'sm_90', driver: '580' })`. */
  device: string;
}

export interface TriedCandidate {
  config: Config;
  /** Median time, milliseconds. */
  timeMs: number;
}

export interface FailedCandidate {
  config: Config;
  /** The error's class and message. */
  error: string;
}

export interface CacheEntry {
  config: Config;
  timeMs: number;
  tried: TriedCandidate[];
  failures: FailedCandidate[];
  /** ISO-8601 time of the sweep. */
  measuredAt: string;
  warmup: number;
  reps: number;
  /** Bit-moving knobs on which `config` differs from the kernel's default (results may differ bitwise). */
  bitsMoved: string[];
}

export type CacheSource = 'user' | 'shipped';

export interface CacheHit {
  entry: CacheEntry;
  source: CacheSource;
  /** The file the entry came from. */
  file: string;
}

interface CacheFile {
  format: typeof CACHE_FORMAT;
  version: number;
  entries: Record<string, Record<string, Record<string, CacheEntry>>>;
}

// ---------------------------------------------------------------------------------------------
// Keys
// ---------------------------------------------------------------------------------------------

/** The bucket of one size: the next power of two at or above it (0 stays 0). */
export function bucketSize(n: number): number {
  if (!Number.isInteger(n) || n < 0) throw new ValueError('autotune', `a size to bucket must be a non-negative integer, got ${n}`);
  if (n <= 1) return n;
  if (n > 2 ** 52) throw new ValueError('autotune', `size ${n} is too large to bucket`);
  let b = 1;
  while (b < n) b *= 2;
  return b;
}

/** The bucket of a shape: each dimension bucketed, joined with 'x' ("4096x1024"; a scalar is "scalar"). */
export function shapeBucket(shape: readonly number[]): string {
  return shape.length === 0 ? 'scalar' : shape.map(bucketSize).join('x');
}

/** "<name>|<arch>|driver <driver>", e.g. "NVIDIA H200|sm_90|driver 580". */
export function deviceKey(d: { name: string; arch: string; driver?: string }): string {
  for (const [k, v] of Object.entries(d)) {
    if (v !== undefined && (typeof v !== 'string' || v.trim() === '' || v.includes('|'))) {
      throw new ValueError('autotune', `device key part ${k} must be a non-empty string without '|', got ${JSON.stringify(v)}`);
    }
  }
  return d.driver === undefined ? `${d.name.trim()}|${d.arch.trim()}` : `${d.name.trim()}|${d.arch.trim()}|driver ${d.driver.trim()}`;
}

/** The device key without its driver part: what a shipped measurement is matched on when no exact key exists. */
export function deviceKeySansDriver(key: string): string {
  return key.split('|').filter((p) => !p.startsWith('driver ')).join('|');
}

function entryKey(key: TuneKey): string {
  for (const [k, v] of [['shape', key.shape], ['dtype', key.dtype]] as const) {
    if (typeof v !== 'string' || v === '' || v.includes('|')) throw new ValueError('autotune', `tune key ${k} must be a non-empty string without '|', got ${JSON.stringify(v)}`);
  }
  if (typeof key.device !== 'string' || key.device.trim() === '') throw new ValueError('autotune', `tune key device must be a non-empty string, got ${JSON.stringify(key.device)}`);
  return `${key.shape}|${key.dtype}`;
}

/** `$NBX_CACHE_DIR`, else `$XDG_CACHE_HOME/nbxtensor`, else `~/.cache/nbxtensor`. */
export function defaultCacheDir(env: NodeJS.ProcessEnv = process.env): string {
  if (env.NBX_CACHE_DIR) return env.NBX_CACHE_DIR;
  if (env.XDG_CACHE_HOME) return join(env.XDG_CACHE_HOME, 'nbxtensor');
  return join(homedir(), '.cache', 'nbxtensor');
}

// ---------------------------------------------------------------------------------------------
// File validation (a thrown string is the reason the file is unusable)
// ---------------------------------------------------------------------------------------------

const isObj = (v: unknown): v is Record<string, unknown> => v !== null && typeof v === 'object' && !Array.isArray(v);

function checkConfigValue(v: unknown, where: string): Config {
  if (!isObj(v)) throw `${where}: config is not an object`;
  for (const [k, x] of Object.entries(v)) {
    if (!['number', 'string', 'boolean'].includes(typeof x)) throw `${where}: config.${k} is not a number, string or boolean`;
  }
  return v as Record<string, KnobValue>;
}

function checkEntry(v: unknown, where: string): CacheEntry {
  if (!isObj(v)) throw `${where}: entry is not an object`;
  checkConfigValue(v.config, where);
  if (typeof v.timeMs !== 'number' || !Number.isFinite(v.timeMs) || v.timeMs < 0) throw `${where}: timeMs is not a non-negative number`;
  if (!Array.isArray(v.tried)) throw `${where}: tried is not a list`;
  v.tried.forEach((t, i) => {
    if (!isObj(t)) throw `${where}: tried[${i}] is not an object`;
    checkConfigValue(t.config, `${where}: tried[${i}]`);
    if (typeof t.timeMs !== 'number' || !Number.isFinite(t.timeMs)) throw `${where}: tried[${i}].timeMs is not a number`;
  });
  if (!Array.isArray(v.failures)) throw `${where}: failures is not a list`;
  v.failures.forEach((f, i) => {
    if (!isObj(f)) throw `${where}: failures[${i}] is not an object`;
    checkConfigValue(f.config, `${where}: failures[${i}]`);
    if (typeof f.error !== 'string') throw `${where}: failures[${i}].error is not a string`;
  });
  if (typeof v.measuredAt !== 'string') throw `${where}: measuredAt is not a string`;
  if (!Number.isInteger(v.warmup) || !Number.isInteger(v.reps)) throw `${where}: warmup/reps are not integers`;
  if (!Array.isArray(v.bitsMoved) || !v.bitsMoved.every((b) => typeof b === 'string')) throw `${where}: bitsMoved is not a list of strings`;
  return v as unknown as CacheEntry;
}

/** Parses a cache file's text; throws a string describing the first problem. Version is checked by the caller. */
function parseCacheText(text: string): CacheFile {
  let doc: unknown;
  try {
    doc = JSON.parse(text);
  } catch (e) {
    throw `not JSON (${(e as Error).message})`;
  }
  if (!isObj(doc)) throw 'top level is not an object';
  if (doc.format !== CACHE_FORMAT) throw `format is ${JSON.stringify(doc.format)}, expected "${CACHE_FORMAT}"`;
  if (!Number.isInteger(doc.version)) throw 'version is not an integer';
  if ((doc.version as number) > CACHE_VERSION) return doc as unknown as CacheFile; // the caller refuses it by version
  if (doc.version !== CACHE_VERSION) throw `version ${String(doc.version)} is not ${CACHE_VERSION}`;
  if (!isObj(doc.entries)) throw 'entries is not an object';
  for (const [dev, kernels] of Object.entries(doc.entries)) {
    if (!isObj(kernels)) throw `entries["${dev}"] is not an object`;
    for (const [kernel, shapes] of Object.entries(kernels)) {
      if (!isObj(shapes)) throw `entries["${dev}"]["${kernel}"] is not an object`;
      for (const [sk, entry] of Object.entries(shapes)) checkEntry(entry, `entries["${dev}"]["${kernel}"]["${sk}"]`);
    }
  }
  return doc as unknown as CacheFile;
}

const emptyFile = (): CacheFile => ({ format: CACHE_FORMAT, version: CACHE_VERSION, entries: {} });

// ---------------------------------------------------------------------------------------------
// The cache
// ---------------------------------------------------------------------------------------------

export interface NoticeStream {
  write(s: string): unknown;
  isTTY?: boolean;
}

export interface AutotuneCacheOptions {
  /** Directory of the user cache (default `defaultCacheDir()`). */
  dir?: string;
  /** Directory of shipped caches (default the package's `src/autotune/shipped`); null: none. */
  shippedDir?: string | null;
  /** Where warnings go (default process.stderr). */
  stderr?: NoticeStream;
}

const warnedPaths = new Set<string>();

/** The shipped directory, or null where the package has no root on disk (a bundled browser build). */
function shippedDirIfAny(): string | null {
  try { return shippedCacheDir(); } catch { return null; }
}

export class AutotuneCache {
  readonly dir: string;
  /** The user cache file. */
  readonly path: string;
  readonly shippedDir: string | null;
  private readonly stderr: NoticeStream;
  private user: CacheFile | undefined;
  /** False when the user file belongs to a newer format version: read nothing from it, write nothing over it. */
  private writable = true;
  private shipped: Array<{ file: string; data: CacheFile }> | undefined;

  constructor(opts: AutotuneCacheOptions = {}) {
    this.dir = opts.dir ?? defaultCacheDir();
    this.path = join(this.dir, CACHE_FILE);
    // NBX_AUTOTUNE_SHIPPED=0: ignore the shipped measurements (to measure a known card again, for shipping)
    this.shippedDir = opts.shippedDir === undefined ? (process.env.NBX_AUTOTUNE_SHIPPED === '0' ? null : shippedDirIfAny()) : opts.shippedDir;
    this.stderr = opts.stderr ?? process.stderr;
  }

  private warnOnce(tag: string, msg: string): void {
    const key = `${tag}\u0000${this.path}`;
    if (warnedPaths.has(key)) return;
    warnedPaths.add(key);
    this.stderr.write(`nbx: ${msg}\n`);
  }

  /** Reads the user file from disk: a missing file is empty, a corrupt one is moved to .bad (said once). */
  private readUser(): CacheFile {
    let text: string;
    try {
      text = readFileSync(this.path, 'utf8');
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code === 'ENOENT') return emptyFile();
      this.warnOnce('unreadable', `autotune cache ${this.path} cannot be read (${(e as Error).message}); tuning results will not persist`);
      this.writable = false;
      return emptyFile();
    }
    try {
      const doc = parseCacheText(text);
      if (doc.version > CACHE_VERSION) {
        this.warnOnce('newer', `autotune cache ${this.path} was written by a newer nbxtensor (format version ${doc.version}); ` +
          'it is left untouched and this process keeps its results in memory');
        this.writable = false;
        return emptyFile();
      }
      return doc;
    } catch (reason) {
      if (typeof reason !== 'string') throw reason;
      const bad = `${this.path}.bad`;
      let kept = `the bad file is kept as ${bad}`;
      try {
        renameSync(this.path, bad);
      } catch (e) {
        kept = `the bad file could not be moved aside (${(e as Error).message})`;
      }
      this.warnOnce('corrupt', `autotune cache ${this.path} is unreadable (${reason}); starting fresh, ${kept}`);
      return emptyFile();
    }
  }

  private userFile(): CacheFile {
    this.user ??= this.readUser();
    return this.user;
  }

  private shippedFiles(): Array<{ file: string; data: CacheFile }> {
    if (this.shipped) return this.shipped;
    const out: Array<{ file: string; data: CacheFile }> = [];
    if (this.shippedDir !== null && existsSync(this.shippedDir)) {
      for (const f of readdirSync(this.shippedDir).filter((x) => x.endsWith('.json')).sort()) {
        const file = join(this.shippedDir, f);
        let data: CacheFile;
        try {
          data = parseCacheText(readFileSync(file, 'utf8'));
        } catch (reason) {
          // shipped files are package data: a bad one is a packaging bug, refused loudly
          throw new FormatError('autotune', `${file}: shipped autotune cache is malformed: ${typeof reason === 'string' ? reason : (reason as Error).message}`);
        }
        if (data.version !== CACHE_VERSION) throw new FormatError('autotune', `${file}: shipped autotune cache has format version ${data.version}, expected ${CACHE_VERSION}`);
        out.push({ file, data });
      }
    }
    this.shipped = out;
    return out;
  }

  /** The user entry, else the shipped one (exact device key, then the key without its driver part). */
  lookup(kernel: string, key: TuneKey): CacheHit | undefined {
    const ek = entryKey(key);
    const u = this.userFile().entries[key.device]?.[kernel]?.[ek];
    if (u) return { entry: u, source: 'user', file: this.path };
    const shipped = this.shippedFiles();
    for (const { file, data } of shipped) {
      const e = data.entries[key.device]?.[kernel]?.[ek];
      if (e) return { entry: e, source: 'shipped', file };
    }
    const loose = deviceKeySansDriver(key.device);
    for (const { file, data } of shipped) {
      for (const [dev, kernels] of Object.entries(data.entries)) {
        if (deviceKeySansDriver(dev) !== loose) continue;
        const e = kernels[kernel]?.[ek];
        if (e) return { entry: e, source: 'shipped', file };
      }
    }
    return undefined;
  }

  /**
   * Records an entry in the user cache and writes the file atomically. The file is re-read first so
   * entries other processes wrote since this one loaded it survive. A write that fails is said once
   * on stderr; the entry stays in memory for this process.
   */
  store(kernel: string, key: TuneKey, entry: CacheEntry): void {
    const ek = entryKey(key);
    try {
      checkEntry(JSON.parse(JSON.stringify(entry)), 'entry to store');
    } catch (reason) {
      throw new ValueError('autotune', `cannot store ${kernel} at ${ek}: ${String(reason)}`);
    }
    const put = (f: CacheFile): void => {
      const dev = (f.entries[key.device] ??= {});
      const k = (dev[kernel] ??= {});
      k[ek] = entry;
    };
    put(this.userFile());
    if (!this.writable) return;
    const onDisk = this.readUser();
    if (!this.writable) return;
    put(onDisk);
    // keep anything this process stored that the disk copy lacks
    for (const [dev, kernels] of Object.entries(this.userFile().entries)) {
      for (const [kn, shapes] of Object.entries(kernels)) {
        for (const [sk, e] of Object.entries(shapes)) {
          const d = (onDisk.entries[dev] ??= {});
          const kk = (d[kn] ??= {});
          kk[sk] ??= e;
        }
      }
    }
    this.user = onDisk;
    const tmp = `${this.path}.${process.pid}.${Math.random().toString(36).slice(2)}.tmp`;
    try {
      mkdirSync(this.dir, { recursive: true });
      writeFileSync(tmp, `${JSON.stringify(onDisk, null, 1)}\n`);
      renameSync(tmp, this.path);
    } catch (e) {
      try {
        unlinkSync(tmp);
      } catch {
        // nothing was written
      }
      this.warnOnce('write', `autotune cache ${this.path} cannot be written (${(e as Error).message}); tuning results will not persist`);
    }
  }

  /** Every user entry (for listing / inspection). */
  userEntries(): Array<{ device: string; kernel: string; shape: string; dtype: string; entry: CacheEntry }> {
    const out: Array<{ device: string; kernel: string; shape: string; dtype: string; entry: CacheEntry }> = [];
    for (const [device, kernels] of Object.entries(this.userFile().entries)) {
      for (const [kernel, shapes] of Object.entries(kernels)) {
        for (const [sk, entry] of Object.entries(shapes)) {
          const [shape, dtype] = sk.split('|') as [string, string];
          out.push({ device, kernel, shape, dtype, entry });
        }
      }
    }
    return out;
  }
}

const byDir = new Map<string, AutotuneCache>();

/** The process's cache for the current `NBX_CACHE_DIR` / XDG setting (one instance per directory). */
export function defaultCache(): AutotuneCache {
  const dir = defaultCacheDir();
  let c = byDir.get(dir);
  if (!c) {
    c = new AutotuneCache({ dir });
    byDir.set(dir, c);
  }
  return c;
}

/** Forget once-only warnings and default instances (tests). */
export function resetCacheState(): void {
  warnedPaths.clear();
  byDir.clear();
}
