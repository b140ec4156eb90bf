// The autotuner: picks a kernel configuration for one key, from the cache or by measuring.
//
// NBX_AUTOTUNE selects the mode (an option can override it):
//   off     the kernel's default configuration, always; the cache is not even read.
//   cached  the user cache, then the shipped cache; on a miss the default, without measuring.
//   full    (the default) the caches; on a miss, measure every candidate, keep the fastest, store it.
//
// Measuring: each candidate is timed by the backend's `timeFn` (e.g. CUDA events around one launch):
// `warmup` calls are discarded, then the median of `reps` calls is the candidate's time. A candidate
// whose compile or launch throws is recorded as failed and skipped; a DeviceFaultError (a sticky CUDA
// error, a lost WebGPU device) ends the sweep instead, since nothing measured after it means anything.
// When every candidate fails, an AutotuneFailedError lists each one's failure.
//
// A cached configuration that is not among the caller's candidates (the space changed, the device's
// limits now prune it, a bit-exact run excludes it) is stale and treated as a miss.
//
// The first sweep of a process says so once on stderr:
//   nbx: autotuning <kernel> for <device> (first run only; results cached in <path>)
// and, on a terminal, every sweep draws a progress bar (N/M candidates) that it erases when done.

import { DeviceFaultError, UnsupportedError, ValueError } from '../errors.js';
import { AutotuneCache, defaultCache, type CacheEntry, type FailedCandidate, type NoticeStream, type TriedCandidate, type TuneKey } from './cache.js';
import { bitStableCandidates, checkConfig, configKey, movedBits, type Config, type Knob } from './space.js';

export type AutotuneMode = 'off' | 'cached' | 'full';
export const AUTOTUNE_MODES: readonly AutotuneMode[] = ['off', 'cached', 'full'];

/** The mode from NBX_AUTOTUNE (unset or empty: 'full'); any other value is a ValueError. */
export function autotuneMode(env: NodeJS.ProcessEnv = process.env): AutotuneMode {
  const v = env.NBX_AUTOTUNE?.trim().toLowerCase();
  if (v === undefined || v === '') return 'full';
  if ((AUTOTUNE_MODES as readonly string[]).includes(v)) return v as AutotuneMode;
  throw new ValueError('autotune', `NBX_AUTOTUNE=${JSON.stringify(env.NBX_AUTOTUNE)} is not one of ${AUTOTUNE_MODES.join(', ')}`);
}

/** What the tuner needs of a kernel. A ConfigSpace is one. */
export interface TunableKernel {
  readonly name: string;
  readonly defaultConfig: Config;
  /** When given, candidates are checked against the knobs and `bitExact` can filter them. */
  readonly knobs?: readonly Knob[];
}

/** Milliseconds of one run of the kernel under `cfg`. Throws if the config cannot compile or launch. */
export type TimeFn = (cfg: Config) => Promise<number>;

export interface TuneOptions {
  /** Overrides NBX_AUTOTUNE. */
  mode?: AutotuneMode;
  /** Default: `defaultCache()` (NBX_CACHE_DIR / XDG_CACHE_HOME / ~/.cache). */
  cache?: AutotuneCache;
  /** Discarded timing calls per candidate (default 2). */
  warmup?: number;
  /** Timed calls per candidate; the median is kept (default 5). */
  reps?: number;
  /** Only candidates bit-identical to the default (every `movesBits` knob at its default value). */
  bitExact?: boolean;
  /** Device name used in the notice (default: the key's device). */
  deviceLabel?: string;
  /** Where the notice and progress go (default process.stderr). */
  stderr?: NoticeStream;
}

export type TuneSource = 'default' | 'cache' | 'shipped' | 'sweep';

export interface TuneResult {
  config: Config;
  /** default: the kernel's default (mode off, or a miss in mode cached); cache/shipped: a cache hit; sweep: measured now. */
  source: TuneSource;
  /** Measured median of the chosen config, when known. */
  timeMs?: number;
  entry?: CacheEntry;
}

/** Every candidate failed: `failures` holds each one's error. */
export class AutotuneFailedError extends UnsupportedError {
  readonly failures: readonly FailedCandidate[];
  constructor(kernel: string, key: TuneKey, failures: FailedCandidate[]) {
    super('autotune', `every candidate of ${kernel} failed for ${key.shape} ${key.dtype} on ${key.device} ` +
      `(${failures.length} of ${failures.length}); no configuration of this kernel runs here:\n` +
      failures.map((f) => `  ${configKey(f.config)}: ${f.error}`).join('\n'));
    this.failures = failures;
  }
}

/** Median of a non-empty list (mean of the middle two for an even count). */
export function median(xs: readonly number[]): number {
  if (xs.length === 0) throw new ValueError('autotune', 'median of no samples');
  const s = [...xs].sort((a, b) => a - b);
  const mid = s.length >> 1;
  return s.length % 2 ? s[mid]! : (s[mid - 1]! + s[mid]!) / 2;
}

/** Times one config: `warmup` discarded calls, then the median of `reps` calls. */
export async function measure(timeFn: TimeFn, cfg: Config, warmup = 2, reps = 5): Promise<number> {
  if (!Number.isInteger(warmup) || warmup < 0) throw new ValueError('autotune', `warmup must be a non-negative integer, got ${warmup}`);
  if (!Number.isInteger(reps) || reps < 1) throw new ValueError('autotune', `reps must be a positive integer, got ${reps}`);
  for (let i = 0; i < warmup; i++) await timeFn(cfg);
  const samples: number[] = [];
  for (let i = 0; i < reps; i++) {
    const t = await timeFn(cfg);
    if (typeof t !== 'number' || !Number.isFinite(t) || t < 0) {
      throw new ValueError('autotune', `the timing function returned ${String(t)} ms, not a finite non-negative number`);
    }
    samples.push(t);
  }
  return median(samples);
}

let sweepAnnounced = false;
const inFlight = new Map<string, Promise<TuneResult>>();

/** Forget that the first sweep was announced (tests). */
export function resetTunerNotices(): void {
  sweepAnnounced = false;
}

function errorText(e: unknown): string {
  if (e instanceof Error) return `${e.name}: ${e.message}`;
  return String(e);
}

class Progress {
  private active = false;
  constructor(private readonly out: NoticeStream, private readonly kernel: string, private readonly total: number) {}
  update(done: number): void {
    if (!this.out.isTTY) return;
    const width = 20;
    const filled = Math.round((done / this.total) * width);
    this.out.write(`\rnbx: autotuning ${this.kernel} [${'#'.repeat(filled)}${'.'.repeat(width - filled)}] ${done}/${this.total} candidates`);
    this.active = true;
  }
  end(): void {
    if (this.active) this.out.write('\r\x1b[2K');
    this.active = false;
  }
}

/**
 * The configuration to run `kernel` with at `key`. See the module comment for the modes. `candidates`
 * are the configurations to choose among (normally `prune(space, limits).kept`); in mode full a miss
 * with no candidates is an UnsupportedError.
 */
export async function tune(kernel: TunableKernel, key: TuneKey, candidates: readonly Config[], timeFn: TimeFn, opts: TuneOptions = {}): Promise<TuneResult> {
  const mode = opts.mode ?? autotuneMode();
  if (!(AUTOTUNE_MODES as readonly string[]).includes(mode)) throw new ValueError('autotune', `mode ${JSON.stringify(mode)} is not one of ${AUTOTUNE_MODES.join(', ')}`);
  if (mode === 'off') return { config: kernel.defaultConfig, source: 'default' };

  if (kernel.knobs) for (const c of candidates) checkConfig({ name: kernel.name, knobs: kernel.knobs }, c, 'candidate');
  let pool = [...candidates];
  if (opts.bitExact) {
    if (!kernel.knobs) throw new ValueError('autotune', `bitExact needs the knobs of ${kernel.name} (pass its ConfigSpace)`);
    pool = bitStableCandidates({ knobs: kernel.knobs, defaultConfig: kernel.defaultConfig }, pool);
  }
  const cache = opts.cache ?? defaultCache();

  const hit = cache.lookup(kernel.name, key);
  if (hit && isCandidate(pool, hit.entry.config)) {
    return { config: hit.entry.config, source: hit.source === 'user' ? 'cache' : 'shipped', timeMs: hit.entry.timeMs, entry: hit.entry };
  }
  if (mode === 'cached') return { config: kernel.defaultConfig, source: 'default' };

  const flightKey = [cache.path, kernel.name, key.device, key.shape, key.dtype, opts.bitExact ? 'exact' : '', pool.map(configKey).join(';')].join('\u0000');
  const running = inFlight.get(flightKey);
  if (running) return running;
  const p = sweep(kernel, key, pool, timeFn, cache, opts).finally(() => inFlight.delete(flightKey));
  inFlight.set(flightKey, p);
  return p;
}

async function sweep(kernel: TunableKernel, key: TuneKey, pool: Config[], timeFn: TimeFn, cache: AutotuneCache, opts: TuneOptions): Promise<TuneResult> {
  if (pool.length === 0) {
    throw new UnsupportedError('autotune', `${kernel.name} has no candidate configuration for ${key.shape} ${key.dtype} on ${key.device}` +
      `${opts.bitExact ? ' that keeps results bit-identical to its default' : ''} (were they all pruned by the device limits?)`);
  }
  const out = opts.stderr ?? process.stderr;
  const warmup = opts.warmup ?? 2;
  const reps = opts.reps ?? 5;
  if (!sweepAnnounced) {
    sweepAnnounced = true;
    out.write(`nbx: autotuning ${kernel.name} for ${opts.deviceLabel ?? key.device} (first run only; results cached in ${cache.path})\n`);
  }
  const progress = new Progress(out, kernel.name, pool.length);
  const tried: TriedCandidate[] = [];
  const failures: FailedCandidate[] = [];
  progress.update(0);
  try {
    for (let i = 0; i < pool.length; i++) {
      const cfg = pool[i]!;
      try {
        tried.push({ config: cfg, timeMs: await measure(timeFn, cfg, warmup, reps) });
      } catch (e) {
        if (e instanceof DeviceFaultError) throw e;
        failures.push({ config: cfg, error: errorText(e) });
      }
      progress.update(i + 1);
    }
  } finally {
    progress.end();
  }
  return finishSweep(kernel, key, tried, failures, cache, warmup, reps);
}

/** Picks the fastest measured candidate and stores it (shared by the async and sync sweeps). */
function finishSweep(kernel: TunableKernel, key: TuneKey, tried: TriedCandidate[], failures: FailedCandidate[], cache: AutotuneCache, warmup: number, reps: number): TuneResult {
  if (tried.length === 0) throw new AutotuneFailedError(kernel.name, key, failures);
  let best = tried[0]!;
  for (const t of tried) if (t.timeMs < best.timeMs) best = t;
  const entry: CacheEntry = {
    config: best.config,
    timeMs: best.timeMs,
    tried,
    failures,
    measuredAt: new Date().toISOString(),
    warmup,
    reps,
    bitsMoved: kernel.knobs ? movedBits({ knobs: kernel.knobs, defaultConfig: kernel.defaultConfig }, best.config) : [],
  };
  cache.store(kernel.name, key, entry);
  return { config: best.config, source: 'sweep', timeMs: best.timeMs, entry };
}

/** Milliseconds of one run under `cfg`, measured synchronously (e.g. CUDA events and a blocking wait). */
export type TimeFnSync = (cfg: Config) => number;

/**
 * Whether `cfg` is among `candidates` (the same knobs with the same values, as configKey compares them).
 * A cache hit runs this on every call of a tuned kernel, so it compares values instead of building keys.
 */
function isCandidate(candidates: readonly Config[], cfg: Config): boolean {
  const names = Object.keys(cfg);
  return candidates.some((c) => Object.keys(c).length === names.length && names.every((n) => Object.hasOwn(c, n) && c[n] === cfg[n]));
}

/**
 * The synchronous twin of tune(), for backends whose kernels are chosen inside a synchronous op call
 * (CUDA launches): same modes, caches, notice and records; the sweep blocks the calling thread, which
 * only happens on a cache miss, once per key and device.
 */
export function tuneSync(kernel: TunableKernel, key: TuneKey, candidates: readonly Config[], timeFn: TimeFnSync, opts: TuneOptions = {}): TuneResult {
  const mode = opts.mode ?? autotuneMode();
  if (mode === 'off') return { config: kernel.defaultConfig, source: 'default' };
  const cache = opts.cache ?? defaultCache();
  const hit = cache.lookup(kernel.name, key);
  if (hit && isCandidate(candidates, hit.entry.config)) {
    return { config: hit.entry.config, source: hit.source === 'user' ? 'cache' : 'shipped', timeMs: hit.entry.timeMs, entry: hit.entry };
  }
  if (mode === 'cached' || candidates.length === 0) return { config: kernel.defaultConfig, source: 'default' };
  const out = opts.stderr ?? process.stderr;
  const warmup = opts.warmup ?? 2, reps = opts.reps ?? 5;
  if (!sweepAnnounced) {
    sweepAnnounced = true;
    out.write(`nbx: autotuning ${kernel.name} for ${opts.deviceLabel ?? key.device} (first run only; results cached in ${cache.path})\n`);
  }
  const progress = new Progress(out, kernel.name, candidates.length);
  const tried: TriedCandidate[] = [];
  const failures: FailedCandidate[] = [];
  try {
    candidates.forEach((cfg, i) => {
      try {
        for (let w = 0; w < warmup; w++) timeFn(cfg);
        const samples: number[] = [];
        for (let r = 0; r < reps; r++) samples.push(timeFn(cfg));
        tried.push({ config: cfg, timeMs: median(samples) });
      } catch (e) {
        if (e instanceof DeviceFaultError) throw e;
        failures.push({ config: cfg, error: errorText(e) });
      }
      progress.update(i + 1);
    });
  } finally {
    progress.end();
  }
  return finishSweep(kernel, key, tried, failures, cache, warmup, reps);
}
