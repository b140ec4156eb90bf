/// <reference types="@webgpu/types" />
// Finding a WebGPU adapter: `navigator.gpu` in browsers; in Node, Dawn through the `webgpu` package,
// tried as Vulkan/the platform default first, then OpenGL ES (Mesa's llvmpipe on GPU-less machines,
// which needs the "compatibility" feature level and EGL's surfaceless platform). NBX_WEBGPU_BACKEND
// (vulkan | opengles | default) forces one. Nothing here runs until a caller asks for a device.

import { quietNative } from '../../native_stderr.js';

/** GPUBufferUsage / GPUMapMode / GPUShaderStage values (the globals are not defined under Node). */
export const USAGE = { MAP_READ: 1, MAP_WRITE: 2, COPY_SRC: 4, COPY_DST: 8, UNIFORM: 64, STORAGE: 128 } as const;
export const MAP_READ = 1;
export const STAGE_COMPUTE = 4;

export const isNode = typeof process !== 'undefined' && !!process.versions?.node;
export const env = (name: string): string | undefined => (isNode ? process.env[name] : undefined);

/** A line on stderr (Node) or the console (browsers). */
export function notice(msg: string): void {
  if (isNode) process.stderr.write(`${msg}\n`);
  else console.warn(msg);
}

export interface AdapterChoice {
  gpu: GPU;
  adapter: GPUAdapter;
  /** Which path found it: 'browser', 'default' (Dawn's choice: Vulkan on Linux), 'vulkan' or 'opengles'. */
  via: 'browser' | 'default' | 'vulkan' | 'opengles' | 'null';
  compatibility: boolean;
  /** Adapter description as the driver states it. */
  description: string;
}

let dawn: Promise<{ create(flags: string[]): GPU }> | undefined;
/**
 * Every GPU object created: Dawn destroys its instance when the object is collected, and an instance
 * collected while its event pump is scheduled crashes the process (dawn.node), so none is let go.
 */
const instances: GPU[] = [];
function loadDawn(): Promise<{ create(flags: string[]): GPU }> {
  // A computed specifier keeps browser bundlers from trying to resolve the Node-only package.
  const name = 'webgpu';
  return (dawn ??= import(/* @vite-ignore */ name) as Promise<{ create(flags: string[]): GPU }>);
}

export function describeAdapter(a: GPUAdapter): string {
  const i = a.info;
  const parts = [i.vendor, i.architecture, i.device, i.description].filter((s) => s && s.trim() !== '');
  return [...new Set(parts)].join(' / ') || 'unnamed adapter';
}

/**
 * Dawn toggles for `create`: `vulkan_enable_f16_on_nvidia` (Dawn withholds shader-f16 on NVIDIA's
 * Vulkan driver unless asked; without it f16 subgroup matrices are unusable there), `allow_unsafe_apis`
 * with NBX_WEBGPU_SUBGROUP_MATRIX=1 (the GEMM's tensor-core path), plus any in NBX_WEBGPU_DAWN_TOGGLES
 * (comma-separated). NBX_WEBGPU_F16=0 leaves the f16 toggle off. `timestamp_quantization` is disabled:
 * Dawn rounds timestamps down to 2^16 ns by default (a browser's guard against timing attacks, moot in
 * a Node process with its own clocks), which made the autotuner's small-problem timings noise.
 */
export function dawnToggles(): string[] {
  const t = env('NBX_WEBGPU_F16') === '0' ? [] : ['vulkan_enable_f16_on_nvidia'];
  // Dawn offers subgroup matrices only with its unsafe APIs allowed: opt-in until verified on each card
  if (env('NBX_WEBGPU_SUBGROUP_MATRIX') === '1') t.push('allow_unsafe_apis');
  for (const x of (env('NBX_WEBGPU_DAWN_TOGGLES') ?? '').split(',')) if (x.trim()) t.push(x.trim());
  return [...(t.length ? [`enable-dawn-features=${t.join(',')}`] : []), 'disable-dawn-features=timestamp_quantization'];
}

/** Requests an adapter as configured; throws with every reason when none comes up. */
export async function chooseAdapter(): Promise<AdapterChoice> {
  const reasons: string[] = [];
  if (!isNode) {
    const gpu = (globalThis.navigator as Navigator | undefined)?.gpu;
    if (!gpu) throw new Error('navigator.gpu is not defined (this browser has no WebGPU, or the page is not a secure context)');
    for (const opts of [{ powerPreference: 'high-performance' }, { featureLevel: 'compatibility' }] as GPURequestAdapterOptions[]) {
      const adapter = await gpu.requestAdapter(opts);
      if (adapter) return { gpu, adapter, via: 'browser', compatibility: 'featureLevel' in opts, description: describeAdapter(adapter) };
    }
    throw new Error('navigator.gpu.requestAdapter() returned no adapter');
  }
  const mod = await loadDawn().catch((e: Error) => { throw new Error(`the 'webgpu' package (Dawn for Node) cannot be loaded: ${e.message}`); });
  // 'null' is Dawn's backend that executes nothing: for measuring host-side overhead only
  const forced = env('NBX_WEBGPU_BACKEND')?.toLowerCase();
  if (forced && !['vulkan', 'opengles', 'default', 'null'].includes(forced)) {
    throw new Error(`NBX_WEBGPU_BACKEND must be vulkan, opengles or default, got '${forced}'`);
  }
  const tries = (forced ? [forced] : ['default', 'opengles']) as AdapterChoice['via'][];
  // Dawn's start-up warnings go to nbx info (quietNative), not to every process's stderr.
  return quietNative(async () => {
  for (const via of tries) {
    try {
      if (via === 'opengles') process.env.EGL_PLATFORM ??= 'surfaceless'; // headless EGL (read by Mesa)
      const gpu = mod.create([...(via === 'default' ? [] : [`backend=${via}`]), ...dawnToggles()]);
      instances.push(gpu);
      const compatibility = via === 'opengles';
      const adapter = await gpu.requestAdapter(compatibility ? { featureLevel: 'compatibility' } : { powerPreference: 'high-performance' });
      if (adapter) return { gpu, adapter, via, compatibility, description: describeAdapter(adapter) };
      reasons.push(`${via}: no adapter`);
    } catch (e) {
      reasons.push(`${via}: ${(e as Error).message.split('\n')[0]}`);
    }
  }
  throw new Error(`no WebGPU adapter (${reasons.join('; ')})`);
  });
}

/** The limits kernels care about, raised to what the adapter allows (compatibility mode starts low). */
export function requiredLimits(a: GPUAdapter): Record<string, number> {
  const names = ['maxComputeInvocationsPerWorkgroup', 'maxComputeWorkgroupSizeX', 'maxComputeWorkgroupSizeY',
    'maxComputeWorkgroupStorageSize', 'maxStorageBufferBindingSize', 'maxBufferSize', 'maxStorageBuffersPerShaderStage',
    'maxComputeWorkgroupsPerDimension', 'maxUniformBufferBindingSize', 'maxBindingsPerBindGroup',
    'maxComputeWorkgroupSizeZ', 'maxDynamicUniformBuffersPerPipelineLayout'];
  const out: Record<string, number> = {};
  const lim = a.limits as unknown as Record<string, number>;
  for (const n of names) if (typeof lim[n] === 'number') out[n] = lim[n]!;
  return out;
}

/** Optional features the kernels use, requested when the adapter offers them. */
export const WANTED_FEATURES = ['shader-f16', 'subgroups', 'timestamp-query', 'chromium-experimental-subgroup-matrix'] as const;

/** One subgroup-matrix shape the adapter offers (Dawn's GPUSubgroupMatrixConfig). */
export interface SubgroupMatrixConfig { componentType: string; resultComponentType: string; M: number; N: number; K: number }

/** The adapter's subgroup-matrix configurations (empty when it has none). */
export function subgroupMatrixConfigs(a: GPUAdapter): SubgroupMatrixConfig[] {
  const list = (a.info as unknown as { subgroupMatrixConfigs?: Iterable<SubgroupMatrixConfig> }).subgroupMatrixConfigs;
  if (!list) return [];
  return [...list].map((c) => ({ componentType: String(c.componentType), resultComponentType: String(c.resultComponentType), M: c.M, N: c.N, K: c.K }));
}

/** Adapter identity as Dawn reports it (vendor, architecture, device, description, subgroup sizes). */
export function adapterIdentity(a: GPUAdapter): Record<string, string | number> {
  const i = a.info as unknown as Record<string, unknown>;
  const out: Record<string, string | number> = {};
  for (const k of ['vendor', 'architecture', 'device', 'description', 'subgroupMinSize', 'subgroupMaxSize', 'isFallbackAdapter']) {
    const v = i[k];
    if (typeof v === 'string' || typeof v === 'number') out[k] = v;
    else if (typeof v === 'boolean') out[k] = String(v);
  }
  return out;
}

/** The device profile for an adapter (Node only: profiles are YAML files), or why there is none. */
export async function profileFor(adapter: GPUAdapter): Promise<{ family?: string; reason: string; elementwiseThreads?: number; reductionThreads?: number }> {
  if (!isNode) return { reason: 'profiles are not loaded in browsers' };
  try {
    const p = await import('../../../profiles/index.js');
    const i = adapter.info;
    const m = p.matchProfile({ vendor: i.vendor || undefined, adapterDescription: [i.architecture, i.device, i.description].filter(Boolean).join(' ') || undefined, // Dawn puts the card's name in architecture/device on some drivers,
      adapterArchitecture: i.architecture || undefined });
    const limits = p.limitsFromWebGPU(adapter.limits, { subgroupMinSize: (i as { subgroupMinSize?: number }).subgroupMinSize,
      subgroupMaxSize: (i as { subgroupMaxSize?: number }).subgroupMaxSize });
    const prof = p.withDriverLimits(m.profile, limits);
    return { family: prof.family, reason: m.reason, elementwiseThreads: prof.defaults.elementwise.threadsPerBlock,
      reductionThreads: prof.defaults.reduction.threadsPerBlock };
  } catch (e) {
    const msg = (e as Error).message.replace(/^profiles: /, '');
    return { reason: /vendor cannot be told|has no profiles/.test(msg) ? 'the adapter is not a GPU family with a profile (nvidia, amd, apple)' : msg };
  }
}
