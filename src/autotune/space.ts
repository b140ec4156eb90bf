// Configuration spaces of tunable kernels.
//
// A tunable kernel declares named knobs (threads per block, rows per block, vector width, tile
// M/N/K, pipeline stages, ...) with their candidate values, a default configuration, and an
// estimate of the resources one configuration uses (shared memory, registers, threads, stages).
// `prune` removes every configuration the device's limits cannot hold *before anything is
// compiled*, and says why for each one.
//
// Each knob also declares whether it can change results bitwise (`movesBits`): a knob that only
// partitions independent work (rows per block, vector width of an elementwise op) cannot; a knob
// that reshapes a reduction (split-K, reduction-tree width, K chunk order) can. A caller that needs
// results bit-identical to the default configuration restricts the sweep with `bitStableCandidates`.

import { ValueError } from '../errors.js';
import type { ProfileLimits } from '../profiles/schema.js';

export type KnobValue = number | string | boolean;
export type Config = { readonly [knob: string]: KnobValue };

export interface Knob {
  readonly name: string;
  readonly values: readonly KnobValue[];
  /** True when two values of this knob can give results that differ bitwise (reduction order). */
  readonly movesBits: boolean;
  readonly doc?: string;
}

/** What one configuration asks of the device, per block. */
export interface ResourceUse {
  /** Threads per block. */
  threads: number;
  /** Shared memory per block, bytes (static + dynamic). Default 0. */
  sharedMemoryBytes?: number;
  /** Estimated 32-bit registers per thread; omitted when the kernel cannot estimate them. */
  registersPerThread?: number;
  /** Software pipeline stages. */
  stages?: number;
}

export interface ConfigSpace<P = void> {
  /** Kernel name: the autotune cache key's first part. */
  readonly name: string;
  readonly knobs: readonly Knob[];
  readonly defaultConfig: Config;
  /** Whether the kernel opts in to the large shared-memory carve-out (CUDA: cudaFuncSetAttribute). */
  readonly sharedMemoryOptIn: boolean;
  /** Resource estimate of one configuration for one problem. */
  resources(cfg: Config, problem: P): ResourceUse;
  /** A kernel-specific rule (e.g. "tile must divide the head dim"): a reason to refuse, or undefined. */
  constraint?(cfg: Config, problem: P): string | undefined;
}

export interface SpaceSpec<P = void> {
  name: string;
  knobs: Knob[];
  defaultConfig: Config;
  sharedMemoryOptIn?: boolean;
  resources(cfg: Config, problem: P): ResourceUse;
  constraint?(cfg: Config, problem: P): string | undefined;
}

/** Largest Cartesian product `enumerate` will build. */
export const MAX_SPACE_SIZE = 1_000_000;

/** Builds and checks a space: unique knob names, non-empty value lists, a default drawn from them. */
export function defineSpace<P = void>(spec: SpaceSpec<P>): ConfigSpace<P> {
  const op = `autotune space ${spec.name}`;
  if (!spec.name || typeof spec.name !== 'string') throw new ValueError('autotune', 'a config space needs a kernel name');
  if (spec.name.includes('|')) throw new ValueError(op, "kernel names may not contain '|'");
  const seen = new Set<string>();
  for (const k of spec.knobs) {
    if (seen.has(k.name)) throw new ValueError(op, `knob '${k.name}' is declared twice`);
    seen.add(k.name);
    if (k.values.length === 0) throw new ValueError(op, `knob '${k.name}' has no candidate values`);
    const uniq = new Set(k.values.map((v) => JSON.stringify(v)));
    if (uniq.size !== k.values.length) throw new ValueError(op, `knob '${k.name}' lists a value twice`);
    if (typeof k.movesBits !== 'boolean') throw new ValueError(op, `knob '${k.name}' must declare movesBits (true or false)`);
  }
  const space: ConfigSpace<P> = {
    name: spec.name,
    knobs: spec.knobs.map((k) => Object.freeze({ ...k, values: Object.freeze([...k.values]) })),
    defaultConfig: Object.freeze({ ...spec.defaultConfig }),
    sharedMemoryOptIn: spec.sharedMemoryOptIn ?? true,
    resources: spec.resources,
    ...(spec.constraint ? { constraint: spec.constraint } : {}),
  };
  checkConfig(space, space.defaultConfig, 'the default config');
  return Object.freeze(space);
}

/** Throws ValueError unless `cfg` names exactly the space's knobs, each with a declared value. */
export function checkConfig(space: Pick<ConfigSpace<never>, 'name' | 'knobs'>, cfg: Config, what = 'config'): void {
  const op = `autotune space ${space.name}`;
  for (const k of space.knobs) {
    if (!(k.name in cfg)) throw new ValueError(op, `${what} ${configKey(cfg)} has no value for knob '${k.name}'`);
    if (!k.values.includes(cfg[k.name]!)) {
      throw new ValueError(op, `${what} ${configKey(cfg)}: ${k.name}=${JSON.stringify(cfg[k.name])} is not among its values ${JSON.stringify(k.values)}`);
    }
  }
  for (const name of Object.keys(cfg)) {
    if (!space.knobs.some((k) => k.name === name)) throw new ValueError(op, `${what} ${configKey(cfg)} sets unknown knob '${name}'`);
  }
}

/** Canonical string of a config (knobs sorted by name): equality, cache records, messages. */
export function configKey(cfg: Config): string {
  const names = Object.keys(cfg).sort();
  return `{${names.map((n) => `${n}:${JSON.stringify(cfg[n])}`).join(',')}}`;
}

export function sameConfig(a: Config, b: Config): boolean {
  return configKey(a) === configKey(b);
}

/** Every configuration of the space (Cartesian product, knobs in declaration order). */
export function enumerate(space: Pick<ConfigSpace<never>, 'name' | 'knobs'>): Config[] {
  const size = space.knobs.reduce((n, k) => n * k.values.length, 1);
  if (size > MAX_SPACE_SIZE) throw new ValueError(`autotune space ${space.name}`, `${size} configurations exceed ${MAX_SPACE_SIZE}; narrow the knobs`);
  let out: Record<string, KnobValue>[] = [{}];
  for (const k of space.knobs) {
    const next: Record<string, KnobValue>[] = [];
    for (const partial of out) for (const v of k.values) next.push({ ...partial, [k.name]: v });
    out = next;
  }
  return out.map((c) => Object.freeze(c));
}

/** The limits `prune` checks: a DeviceProfile's `limits` (merged with the driver's) satisfies it. */
export type PruneLimits = Pick<ProfileLimits,
  'sharedMemoryPerBlock' | 'sharedMemoryPerBlockOptin' | 'registersPerBlock' | 'registersPerThread' |
  'maxThreadsPerBlock' | 'warpSize' | 'maxPipelineStages'>;

export interface PrunedConfig {
  config: Config;
  /** Every limit the configuration breaks, in words. */
  reasons: string[];
}

export interface PruneResult {
  kept: Config[];
  pruned: PrunedConfig[];
}

/** Why `cfg` cannot run under `limits` (empty when it can). */
export function violations<P>(space: ConfigSpace<P>, cfg: Config, limits: PruneLimits, problem: P): string[] {
  const op = `autotune space ${space.name}`;
  const use = space.resources(cfg, problem);
  const reasons: string[] = [];
  if (!Number.isInteger(use.threads) || use.threads <= 0) {
    throw new ValueError(op, `resources(${configKey(cfg)}) gave ${use.threads} threads; expected a positive integer`);
  }
  for (const [k, v] of [['sharedMemoryBytes', use.sharedMemoryBytes], ['registersPerThread', use.registersPerThread], ['stages', use.stages]] as const) {
    if (v !== undefined && (!Number.isFinite(v) || v < 0)) throw new ValueError(op, `resources(${configKey(cfg)}) gave ${k} = ${v}`);
  }
  if (use.threads > limits.maxThreadsPerBlock) {
    reasons.push(`${use.threads} threads per block > ${limits.maxThreadsPerBlock} allowed`);
  }
  const smem = use.sharedMemoryBytes ?? 0;
  const smemLimit = space.sharedMemoryOptIn ? limits.sharedMemoryPerBlockOptin : limits.sharedMemoryPerBlock;
  if (smem > smemLimit) {
    reasons.push(`shared memory ${smem} B > ${smemLimit} B per block (${space.sharedMemoryOptIn ? 'opt-in' : 'default'} limit)`);
  }
  if (use.registersPerThread !== undefined) {
    if (use.registersPerThread > limits.registersPerThread) {
      reasons.push(`${use.registersPerThread} registers per thread > ${limits.registersPerThread} allowed`);
    }
    // registers are allocated per warp: a partial warp costs a whole one
    const warps = Math.ceil(use.threads / limits.warpSize);
    const total = use.registersPerThread * warps * limits.warpSize;
    if (total > limits.registersPerBlock) {
      reasons.push(`${total} registers per block (${use.registersPerThread} x ${warps * limits.warpSize} threads) > ${limits.registersPerBlock} allowed`);
    }
  }
  if (use.stages !== undefined && use.stages > limits.maxPipelineStages) {
    reasons.push(`${use.stages} pipeline stages > ${limits.maxPipelineStages} allowed`);
  }
  const rule = space.constraint?.(cfg, problem);
  if (rule) reasons.push(rule);
  return reasons;
}

/**
 * Splits configurations into those the limits can hold and those they cannot (with every reason).
 * `candidates` defaults to the whole space; `problem` is passed to the resource estimate.
 * Nothing is compiled: this runs on the estimates alone.
 */
export function prune<P>(space: ConfigSpace<P>, limits: PruneLimits, opts: { problem?: P; candidates?: readonly Config[] } = {}): PruneResult {
  const candidates = opts.candidates ?? enumerate(space);
  const kept: Config[] = [];
  const pruned: PrunedConfig[] = [];
  for (const cfg of candidates) {
    checkConfig(space, cfg);
    const reasons = violations(space, cfg, limits, opts.problem as P);
    if (reasons.length === 0) kept.push(cfg);
    else pruned.push({ config: cfg, reasons });
  }
  return { kept, pruned };
}

/** Human-readable account of a prune, one line per pruned config. */
export function describePrune(result: PruneResult): string {
  return result.pruned.map((p) => `${configKey(p.config)}: ${p.reasons.join('; ')}`).join('\n');
}

/** The bit-moving knobs on which `cfg` differs from the space's default. */
export function movedBits(space: Pick<ConfigSpace<never>, 'knobs' | 'defaultConfig'>, cfg: Config): string[] {
  return space.knobs.filter((k) => k.movesBits && cfg[k.name] !== space.defaultConfig[k.name]).map((k) => k.name);
}

/** The candidates whose results are bit-identical to the default's: every bit-moving knob at its default value. */
export function bitStableCandidates(space: Pick<ConfigSpace<never>, 'knobs' | 'defaultConfig'>, candidates: readonly Config[]): Config[] {
  return candidates.filter((c) => movedBits(space, c).length === 0);
}
