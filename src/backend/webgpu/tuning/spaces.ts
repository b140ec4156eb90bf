// Launch configurations of the WebGPU kernels, autotuned like CUDA's (src/backend/cuda/tuning/spaces.ts): a
// space per kernel (workgroup size × vectors per invocation for elementwise, workgroup size for
// reductions, the tile of the f32 GEMM), the persistent cache of src/autotune keyed by the adapter
// (`tuneKeyOf`: "webgpu|<vendor>|<architecture>|<device>|driver <description>"), NBX_AUTOTUNE=off|cached|full.
//
// WebGPU records work synchronously but can only time it asynchronously, so a kernel's configuration
// is looked up synchronously (memo, user cache, shipped cache) and a miss in mode `full` uses the
// default now and queues a sweep that runs in the background on the backend's own scratch tensors of
// the same size bucket and dtype (never the caller's buffers); later calls use its result.
// `settled()` waits for queued sweeps (benchmarks call it after a warm-up). Each candidate is timed
// with timestamp queries when the device has them (the span of a batch of its dispatches), else the
// wall clock of a batch and a wait. The first sweep of a process says so once on stderr (the tuner).

import { defineSpace, prune, tune, autotuneMode, bucketSize, configKey, defaultCache, shapeBucket, type Config, type ConfigSpace } from '../../../autotune/index.js';
import type { DTypeName } from '../../../dtype/dtypes.js';
import type { WebGPUDevice } from '../runtime/device.js';

/** Problems below this many elements keep the default (their time is dispatch overhead). */
export const TUNE_MIN_ELEMENTS = 1 << 16;

export const EW_SPACE = defineSpace({
  name: 'webgpu.elementwise',
  knobs: [
    { name: 'wg', values: [64, 128, 256, 512], movesBits: false, doc: 'invocations per workgroup' },
    { name: 'vpt', values: [1, 2, 4], movesBits: false, doc: '16-byte vectors per invocation (a grid stride apart)' },
  ],
  defaultConfig: { wg: 256, vpt: 1 },
  resources: (cfg) => ({ threads: cfg.wg as number }),
});

export const REDUCE_SPACE = defineSpace({
  name: 'webgpu.reduce',
  knobs: [{ name: 'wg', values: [64, 128, 256, 512, 1024], movesBits: true, doc: 'invocations per workgroup (the reduction tree)' }],
  defaultConfig: { wg: 256 },
  resources: (cfg) => ({ threads: cfg.wg as number, sharedMemoryBytes: 4 * (cfg.wg as number) }),
});

export const GEMM_SPACE = defineSpace({
  name: 'webgpu.gemm',
  knobs: [{ name: 'tile', values: ['64x32', '64x64', '128x64', '128x128'], movesBits: false, doc: 'output tile of the f32-accumulating tiled kernel (BM x BN)' }],
  defaultConfig: { tile: '128x128' },
  resources: (cfg) => {
    const [bm, bn] = String(cfg.tile).split('x').map(Number) as [number, number];
    return { threads: bm === 64 && bn === 32 ? 128 : 256, sharedMemoryBytes: 16 * (bm + 4 + bn) * 4 };
  },
});

/** A scratch problem of a space at (shape bucket, dtype): `run(cfg)` records one dispatch. */
export interface TuneProblem { run(cfg: Config): void; dispose(): void }
/** Builds the scratch problem of a kernel (registered by the kernel's module, so no import cycle); `shape` is bucketed. */
export type ProblemMaker = (be: WebGPUDevice, shape: number[], dtype: DTypeName) => TuneProblem;
const makers = new Map<string, ProblemMaker>();
export function registerTuneProblem(space: string, make: ProblemMaker): void { makers.set(space, make); }

/**
 * The cache's device key of an adapter: "webgpu|<vendor>|<architecture>|<device>|driver <description>", empty
 * parts dropped, '|' in a part made '/'. When the adapter names its device, the description is the
 * driver's (Dawn on Vulkan: "NVIDIA: 580.159.04 580.159.4.0") and is marked "driver ...", so entries
 * shipped for one driver serve the card under another (the cache's match without the driver part).
 */
export function tuneKeyOf(info: { vendor?: string; architecture?: string; device?: string; description?: string }): string {
  const clean = (x: string | undefined): string => (x ?? '').trim().replace(/\|/g, '/');
  const parts = [info.vendor, info.architecture, info.device].map(clean).filter((x) => x !== '');
  const desc = clean(info.description);
  if (desc) parts.push(clean(info.device) ? `driver ${desc}` : desc);
  return ['webgpu', ...(parts.length ? parts : ['unnamed adapter'])].join('|');
}

export class WebGPUTuning {
  private readonly memo = new Map<string, Config>();
  private readonly fits = new Map<string, Config[]>();
  private readonly pending = new Map<string, Promise<void>>();
  private chain: Promise<void> = Promise.resolve();
  private query: { set: GPUQuerySet; resolve: GPUBuffer; read: GPUBuffer } | null = null;

  constructor(private readonly be: WebGPUDevice) {}

  /** The candidates that fit this device (workgroup size and workgroup memory limits). */
  private fit(space: ConfigSpace): Config[] {
    let c = this.fits.get(space.name);
    if (!c) {
      const lim = this.be.info.limits;
      const maxT = Math.min(lim.maxComputeInvocationsPerWorkgroup ?? 256, lim.maxComputeWorkgroupSizeX ?? 256);
      const smem = lim.maxComputeWorkgroupStorageSize ?? 16384;
      c = prune(space, { maxThreadsPerBlock: maxT, sharedMemoryPerBlock: smem, sharedMemoryPerBlockOptin: smem, registersPerBlock: 1 << 30,
        registersPerThread: 1 << 30, warpSize: 32, maxPipelineStages: 1 }).kept;
      this.fits.set(space.name, c);
    }
    return c;
  }

  /**
   * The configuration of `space` for a problem of `dims` (e.g. [n], [rows, cols], [m, n, k]) of `dtype`:
   * memo, then the caches; `fallback` (the untuned default) for small problems (fewer than
   * TUNE_MIN_ELEMENTS in `size`), in mode off, or while a sweep is pending.
   */
  config(space: ConfigSpace, dims: number[], dtype: DTypeName, fallback: Config, size = dims.reduce((a, b) => a * b, 1)): Config {
    if (size < TUNE_MIN_ELEMENTS || !this.be.isReady) return fallback;
    const shape = shapeBucket(dims);
    const mk = `${space.name}|${shape}|${dtype}`;
    const hit = this.memo.get(mk);
    if (hit) return hit;
    const mode = autotuneMode();
    if (mode === 'off') { this.memo.set(mk, fallback); return fallback; }
    const cands = this.fit(space);
    const key = { shape, dtype, device: this.be.info.tuneKey };
    const cached = defaultCache().lookup(space.name, key);
    const ok = (c: Config): Config | undefined => cands.find((x) => configKey(x) === configKey(c));
    const found = cached && ok(cached.entry.config);
    if (found) { this.memo.set(mk, found); return found; }
    if (mode === 'cached' || !makers.has(space.name) || cands.length === 0) { this.memo.set(mk, fallback); return fallback; }
    if (!this.pending.has(mk)) {
      const bucket = dims.map(bucketSize);
      const job = this.chain.then(() => this.sweep(space, bucket, dtype, fallback, cands, key, mk)).catch(() => { this.memo.set(mk, fallback); });
      this.chain = job;
      this.pending.set(mk, job);
    }
    return fallback;
  }

  /** Resolves when every queued sweep has finished. */
  async settled(): Promise<void> {
    while (this.pending.size) await Promise.allSettled([...this.pending.values()]);
  }

  private async sweep(space: ConfigSpace, bucket: number[], dtype: DTypeName, fallback: Config, cands: Config[],
    key: { shape: string; dtype: string; device: string }, mk: string): Promise<void> {
    // after the caller's current recording (the sweep's dispatches then follow it in order)
    await new Promise((r) => setTimeout(r, 0));
    let problem: TuneProblem | undefined;
    try {
      problem = makers.get(space.name)!(this.be, bucket, dtype);
      const res = await tune({ name: space.name, knobs: space.knobs, defaultConfig: fallback }, key, cands,
        (cfg) => this.time(() => problem!.run(cfg)), { deviceLabel: this.be.info.adapter, warmup: 1, reps: 3 });
      this.memo.set(mk, res.config);
    } finally {
      problem?.dispose();
      this.pending.delete(mk);
    }
  }

  /**
   * Milliseconds per run of `record`: timestamp queries around a batch when available, else the wall
   * clock. A batch shorter than 1 ms is measured again with enough runs to last about 1 ms, so a coarse
   * timer (Dawn's timestamp quantization where it is on, the wall clock's wait) does not decide.
   */
  private async time(record: () => void): Promise<number> {
    let reps = 8;
    for (let attempt = 0; ; attempt++) {
      const ms = await this.batch(record, reps);
      if (ms >= 1 || attempt === 1 || reps >= MAX_REPS) {
        if (ms > 0) return ms / reps;
        return (await this.batch(record, reps, true)) / reps; // the timestamps did not move: the wall clock
      }
      reps = Math.min(MAX_REPS, Math.ceil(reps * (ms > 0 ? 1.2 / ms : MAX_REPS)));
    }
  }

  /** Milliseconds for `reps` runs of `record` (0 when the timestamps did not move). */
  private async batch(record: () => void, reps: number, wall = false): Promise<number> {
    await this.be.idle();
    if (!wall && this.be.device.features.has('timestamp-query')) {
      const q = (this.query ??= {
        set: this.be.device.createQuerySet({ type: 'timestamp', count: 2 }),
        resolve: this.be.device.createBuffer({ size: 16, usage: 0x0200 | 0x0004 }), // QUERY_RESOLVE | COPY_SRC
        read: this.be.device.createBuffer({ size: 16, usage: 0x0001 | 0x0008 }), // MAP_READ | COPY_DST
      });
      this.be.timestamp(q.set, 0);
      for (let i = 0; i < reps; i++) record();
      this.be.timestamp(q.set, 1, q.resolve, q.read);
      await this.be.idle();
      await q.read.mapAsync(1);
      const t = new BigInt64Array(q.read.getMappedRange().slice(0));
      q.read.unmap();
      return Math.max(0, Number(t[1]! - t[0]!) / 1e6);
    }
    const t0 = performance.now();
    for (let i = 0; i < reps; i++) record();
    await this.be.idle();
    return performance.now() - t0;
  }
}

/** Most runs in one timed batch (tiny kernels: about 1 ms of them). */
const MAX_REPS = 1024;

/** Elementwise launch configuration for a vectorized problem of n elements. */
export function elementwiseConfig(be: WebGPUDevice, n: number, dtype: DTypeName): { wg: number; vpt: number } {
  const fallback = { wg: be.wgElementwise, vpt: 1 };
  const c = be.tuning ? be.tuning.config(EW_SPACE, [n], dtype, fallback) : fallback;
  return { wg: c.wg as number, vpt: c.vpt as number };
}

/** Workgroup size of the row reductions for [rows, n] (the tree's width: it can move bits). */
export function reduceConfig(be: WebGPUDevice, rows: number, n: number, dtype: DTypeName): number {
  const fallback = { wg: be.wgReduce };
  return (be.tuning ? be.tuning.config(REDUCE_SPACE, [rows, n], dtype, fallback) : fallback).wg as number;
}

/** Output tile (BM x BN) of the tiled GEMM for m x n x k. */
export function gemmConfig(be: WebGPUDevice, m: number, n: number, k: number, dtype: DTypeName, fallback: string): string {
  const f = { tile: fallback };
  return (be.tuning ? be.tuning.config(GEMM_SPACE, [m, n, k], dtype, f) : f).tile as string;
}
