// Launch configurations for the CUDA kernels: each tunable kernel declares a space; the device
// profile (merged with the driver's numbers) prunes it before anything compiles; the tuner picks from
// the user cache, then the configurations shipped for known cards (src/autotune/shipped), and sweeps
// with CUDA events only on a miss (NBX_AUTOTUNE=off|cached|full). Small problems skip tuning: their
// time is launch overhead, whatever the configuration.
//
// Which knobs can move bits: `threads` of the reductions and row kernels changes the summation tree,
// so results can differ in the last bits between configurations (never between runs of one
// configuration); the elementwise knobs never change results.

import { defineSpace, prune, tuneSync, autotuneMode, deviceKey, bucketSize, type Config, type ConfigSpace } from '../../../autotune/index.js';
import { matchProfile, withDriverLimits, type DeviceProfile } from '../../../profiles/index.js';
import type { CudaContext, CudaEvent, Stream } from '../runtime/driver.js';

/** Problems smaller than this many elements use the default configuration (no sweep). */
export const TUNE_MIN_ELEMENTS = 1 << 16;

const threads = (cfg: Config): number => cfg.threads as number;

export const ELEMENTWISE_SPACE = defineSpace({
  name: 'cuda.elementwise',
  knobs: [
    { name: 'threads', values: [128, 256, 512, 1024], movesBits: false, doc: 'threads per block' },
    { name: 'waves', values: [4, 8, 16, 32], movesBits: false, doc: 'resident blocks per SM the grid-stride loop is sized for' },
  ],
  defaultConfig: { threads: 256, waves: 16 },
  resources: (cfg) => ({ threads: threads(cfg) }),
});

/**
 * The one-pass contiguous kernel and the rows x vectors broadcast kernel (runtime/elementwise.ts): threads per
 * block, 16-byte vectors per thread, and whether the streamed operands use evict-first (`cs`) accesses.
 * The default is PyTorch's vectorized_elementwise_kernel shape (128 threads, one vector each): it is
 * what runs untuned, so it must be good on its own.
 */
function vectorSpace(name: string): ConfigSpace {
  return defineSpace({
    name,
    knobs: [
      { name: 'threads', values: [128, 256], movesBits: false, doc: 'threads per block' },
      { name: 'unroll', values: [1, 2, 4], movesBits: false, doc: '16-byte vectors per thread (all loads issued before the arithmetic)' },
      { name: 'hint', values: ['none', 'cs', 'pf'], movesBits: false, doc: 'cache hint of the streamed loads and stores: none, cs (evict first), or pf (loads with a 256-byte L2 prefetch)' },
    ],
    defaultConfig: { threads: 128, unroll: 1, hint: 'none' },
    resources: (cfg) => ({ threads: threads(cfg) }),
  });
}
export const EW_FLAT_SPACE = vectorSpace('cuda.ew_flat');
export const EW_BCAST_SPACE = vectorSpace('cuda.ew_bcast');

/**
 * The vector kernels sweep only where the launch shape can matter: below this many elements a launch
 * is a few microseconds whatever its shape (and a sweep would cost more than it ever saves).
 */
export const EW_TUNE_MIN_ELEMENTS = 1 << 20;
/** Operands of at least this many elements stream through L2 (50 MiB on an H200): cache hints and 4 vectors per thread are worth trying. */
export const EW_STREAM_ELEMENTS = 1 << 24;
/**
 * A cheap sweep, so that a first run does not stall on tuning: every candidate compiles into ONE
 * module (runtime/elementwise.ts), then one warm-up and the median of three samples of five
 * back-to-back launches each. Back to back is how consecutive ops run; a lone launch's sample also
 * holds the host's enqueue time and the kernel's ramp-up, which can rank candidates wrongly.
 */
export const EW_SWEEP = { warmup: 1, reps: 3, batch: 5 } as const;

/**
 * The candidates of a vector-kernel sweep at `n` elements: below EW_STREAM_ELEMENTS threads x 1-2
 * vectors (4); from there every unroll without hints, 4 vectors with the evict-first hint and 2-4 with
 * the L2 prefetch (12). A sweep module of 12 kernels is one NVRTC compile of about a second.
 */
export function ewCandidates(fit: readonly Config[], n: number): Config[] {
  return fit.filter((c) => (n >= EW_STREAM_ELEMENTS ? c.hint === 'none' || (c.hint === 'cs' && c.unroll === 4) || (c.hint === 'pf' && (c.unroll as number) >= 2)
    : c.hint === 'none' && (c.unroll as number) <= 2));
}

/** Options of CudaTuning.pick: a subset of the space's candidates, and the sweep's repetitions. */
export interface PickOptions {
  candidates?: (fit: readonly Config[]) => Config[];
  warmup?: number;
  reps?: number;
  /** Launches per timed sample, back to back between the two events (default 1). */
  batch?: number;
}

/** Row-kernel space (reduce): one block per row, `threads` per block. */
function rowSpace(name: string): ConfigSpace {
  return defineSpace({
    name,
    knobs: [{ name: 'threads', values: [64, 128, 256, 512, 1024], movesBits: true, doc: 'threads per block (the reduction tree)' }],
    defaultConfig: { threads: 256 },
    resources: (cfg) => ({ threads: threads(cfg), sharedMemoryBytes: 33 * 8 }),
  });
}
export const REDUCE_SPACE = rowSpace('cuda.reduce');
/**
 * The simple reductions (kernels/reduce.ts; sum/mean/prod/max/min/any/all/count_nonzero/norm).
 * rows: threads per block (a power-of-two group of them per row, the whole block per slice when few
 * long rows split into slices) and loads in flight per thread. cols (the kept dim contiguous, e.g. a
 * sum over dim 0): threads per 2-D block (up to a warp along the columns, the rest along the reduced
 * dim) and loads in flight per thread. Both reshape the combination tree (and the float pre-sums of
 * half/float32 sums), so both move bits; the kernel of every unroll is in one module per sweep.
 */
export const REDUCE_ROWS_SPACE = defineSpace({
  name: 'cuda.reduce_rows',
  knobs: [
    { name: 'threads', values: [64, 128, 256, 512, 1024], movesBits: true, doc: 'threads per block' },
    { name: 'unroll', values: [1, 2, 4], movesBits: true, doc: 'loads in flight per thread (16-byte vectors when contiguous)' },
  ],
  defaultConfig: { threads: 256, unroll: 2 },
  resources: (cfg) => ({ threads: threads(cfg), sharedMemoryBytes: 32 * 8 }),
});
export const REDUCE_COLS_SPACE = defineSpace({
  name: 'cuda.reduce_cols',
  knobs: [
    { name: 'threads', values: [128, 256, 512], movesBits: true, doc: 'threads per 2-D block' },
    { name: 'unroll', values: [1, 2, 4], movesBits: true, doc: 'reduced-dim loads in flight per thread' },
  ],
  defaultConfig: { threads: 256, unroll: 4 },
  // a column vector of up to 8 accumulators of 8 bytes per thread in shared memory
  resources: (cfg) => ({ threads: threads(cfg), sharedMemoryBytes: threads(cfg) * 64 }),
});
/**
 * softmax and row_norm (kernels/nn.ts): `threads` per block; a row gets a power-of-two group of them
 * (fewer than the block for short rows, several rows per block) and is cached in registers when it
 * fits. The group size and chunks per thread follow from threads and the row length, so `threads`
 * reshapes the summation tree (moves bits); the vector width is fixed by the operands' alignment.
 * Named .v2: the shipped entries of the earlier block-per-row kernels do not apply.
 */
function rowGroupSpace(name: string): ConfigSpace {
  return defineSpace({
    name,
    knobs: [{ name: 'threads', values: [128, 256, 512, 1024], movesBits: true, doc: 'threads per block (rows spread over power-of-two groups of them)' }],
    defaultConfig: { threads: 256 },
    resources: (cfg) => ({ threads: threads(cfg), sharedMemoryBytes: 32 * 8 }),
  });
}
export const SOFTMAX_SPACE = rowGroupSpace('cuda.softmax.v2');
export const ROWNORM_SPACE = rowGroupSpace('cuda.row_norm.v2');

export class CudaTuning {
  readonly profile: DeviceProfile;
  readonly profileReason: string;
  readonly deviceKey: string;
  private readonly memo = new Map<string, Config>();
  private readonly candidates = new Map<string, Config[]>();
  private start?: CudaEvent;
  private end?: CudaEvent;

  constructor(private readonly ctx: CudaContext, private readonly stream: Stream) {
    const info = ctx.info;
    const m = matchProfile({ vendor: 'nvidia', computeCapability: info.cc as [number, number] });
    // The driver's numbers win over the profile's where it reports them.
    this.profile = withDriverLimits(m.profile, {
      maxThreadsPerBlock: info.maxThreadsPerBlock, warpSize: info.warpSize,
      sharedMemoryPerBlock: info.maxSharedMemPerBlock, sharedMemoryPerBlockOptin: info.maxSharedMemPerBlockOptin,
      sharedMemoryPerSM: info.maxSharedMemPerSM, registersPerBlock: info.maxRegsPerBlock,
    });
    this.profileReason = m.reason;
    this.deviceKey = deviceKey({ name: info.name, arch: `sm_${info.cc[0]}${info.cc[1]}` });
  }

  /** The space's candidates that fit this device's limits (pruned once per space). */
  fit(space: ConfigSpace): Config[] {
    let c = this.candidates.get(space.name);
    if (!c) { c = prune(space, this.profile.limits).kept; this.candidates.set(space.name, c); }
    return c;
  }

  /** Default threads for a row kernel from the profile, capped by the row length. */
  rowDefault(n: number): Config {
    const t = Math.min(this.profile.defaults.reduction.threadsPerBlock, Math.max(64, 2 ** Math.ceil(Math.log2(Math.max(n, 1)))));
    return { threads: Math.min(t, this.profile.limits.maxThreadsPerBlock) };
  }

  /**
   * The configuration for `space` at (shape, dtype): memoised, else the tuner's answer. `run(cfg)`
   * launches the kernel once with a configuration; `size` below TUNE_MIN_ELEMENTS returns `fallback`.
   * `run` null (the launch must not be repeated, e.g. an in-place update): the caches only, no sweep.
   */
  pick(space: ConfigSpace, shape: string, dtype: string, size: number, fallback: Config, run: ((cfg: Config) => void) | null, opts: PickOptions = {}): Config {
    if (size < TUNE_MIN_ELEMENTS) return fallback;
    const mk = `${space.name}|${shape}|${dtype}`;
    const hit = this.memo.get(mk);
    if (hit) return hit;
    const kernel = { name: space.name, knobs: space.knobs, defaultConfig: fallback };
    const cands = opts.candidates ? opts.candidates(this.fit(space)) : this.fit(space);
    const key = { shape, dtype, device: this.deviceKey };
    if (run === null) return tuneSync(kernel, key, cands, () => 0, { mode: autotuneMode() === 'off' ? 'off' : 'cached' }).config;
    const res = tuneSync(kernel, key, cands, (cfg) => this.time(cfg, run, opts.batch ?? 1), { deviceLabel: this.ctx.info.name, warmup: opts.warmup, reps: opts.reps });
    this.memo.set(mk, res.config);
    return res.config;
  }

  /** Milliseconds per launch of `batch` back-to-back launches between two events. */
  private time(cfg: Config, run: (cfg: Config) => void, batch: number): number {
    this.start ??= this.ctx.createEvent({ timing: true });
    this.end ??= this.ctx.createEvent({ timing: true });
    this.start.record(this.stream);
    for (let i = 0; i < batch; i++) run(cfg);
    this.end.record(this.stream);
    this.end.synchronize();
    return this.end.elapsedSince(this.start) / batch;
  }

  /** The shape-bucket part of a key: powers of two. */
  static bucket(n: number): number { return bucketSize(n); }
}

