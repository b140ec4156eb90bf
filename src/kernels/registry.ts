// Hand kernels, keyed by (name, device type) and typed by KernelTable. Registering twice is a bug and
// throws; asking for a kernel a device lacks is an UnsupportedError naming both, never a silent trip
// to another device. A device may instead install a staging provider that runs the CPU kernel on
// host copies (announced and counted by the backend).

import { UnsupportedError } from '../errors.js';
import type { Device, DeviceType } from '../backend/backend.js';
import { KERNEL_NAMES, type BackendKernels, type KernelFeatures, type KernelName, type KernelTable } from './table.js';

// eslint-disable-next-line @typescript-eslint/no-explicit-any
type AnyKernel = (...args: any[]) => any;
const kernels = new Map<string, AnyKernel>();
const native = new Map<DeviceType, Set<KernelName>>();

export function registerKernel<K extends KernelName>(name: K, device: DeviceType, fn: KernelTable[K]): void {
  const key = `${name}@${device}`;
  if (kernels.has(key)) throw new Error(`kernel ${name} is registered twice for ${device}`);
  kernels.set(key, fn as AnyKernel);
  let set = native.get(device);
  if (!set) native.set(device, (set = new Set()));
  set.add(name);
}

/** Registers a backend's kernel object (its Partial<KernelTable>). */
export function registerKernels(device: DeviceType, table: BackendKernels): void {
  for (const name of Object.keys(table) as KernelName[]) {
    const fn = table[name];
    if (fn) registerKernel(name, device, fn);
  }
}

export function hasKernel(name: KernelName, device: DeviceType): boolean { return kernels.has(`${name}@${device}`); }

/** A device may run CPU kernels it lacks through a provider (host staging); announced by the provider. */
const staging = new Map<DeviceType, (name: KernelName) => AnyKernel>();
export function setStagingProvider(device: DeviceType, provider: (name: KernelName) => AnyKernel): void { staging.set(device, provider); }
/** The CPU implementation of a kernel (for staging providers). */
export function kernelCpu<K extends KernelName>(name: K): KernelTable[K] {
  const fn = kernels.get(`${name}@cpu`);
  if (!fn) throw new UnsupportedError(name, `no '${name}' kernel on cpu either`);
  return fn as KernelTable[K];
}

/** The kernel `name` for `device`; `op` names the operation in the error when there is none. */
export function kernel<K extends KernelName>(name: K, device: Device | DeviceType, op: string = name): KernelTable[K] {
  const type = typeof device === 'string' ? device : device.type;
  let fn = kernels.get(`${name}@${type}`);
  if (!fn && staging.has(type) && kernels.has(`${name}@cpu`)) {
    fn = staging.get(type)!(name);
    kernels.set(`${name}@${type}`, fn);
  }
  if (!fn) {
    const have = [...kernels.keys()].filter((k) => k.startsWith(`${name}@`)).map((k) => k.split('@')[1]);
    throw new UnsupportedError(op, `no '${name}' kernel for device ${type}${have.length ? ` (available on: ${have.join(', ')})` : ''}`);
  }
  return fn as KernelTable[K];
}

/** Kernels callable on `device` now: its own and those staged so far. */
export function kernelNames(device: DeviceType): KernelName[] {
  return [...kernels.keys()].filter((k) => k.endsWith(`@${device}`)).map((k) => k.split('@')[0] as KernelName);
}

export interface KernelCoverage { native: KernelName[]; staged: KernelName[]; missing: KernelName[] }

/**
 * Where each kernel of the table comes from on a backend: its own implementation (`own`), the CPU's on
 * host copies (when the backend stages and the CPU has it), or nowhere.
 */
export function coverageOf(own: Iterable<KernelName>, staging: boolean, cpu: Iterable<KernelName>): KernelCoverage {
  const mine = new Set(own), host = new Set(cpu);
  const out: KernelCoverage = { native: [], staged: [], missing: [] };
  for (const name of KERNEL_NAMES) {
    if (mine.has(name)) out.native.push(name);
    else if (staging && host.has(name)) out.staged.push(name);
    else out.missing.push(name);
  }
  return out;
}

/** coverageOf for a loaded device, from what is registered now. */
export function kernelCoverage(device: DeviceType): KernelCoverage {
  return coverageOf(native.get(device) ?? [], staging.has(device), native.get('cpu') ?? []);
}

// ---- features: facts about a device's kernels, as data --------------------------------------------

const features = new Map<DeviceType, Partial<KernelFeatures>>();
export function registerKernelFeatures(device: DeviceType, f: Partial<KernelFeatures>): void {
  features.set(device, { ...features.get(device), ...f });
}
const NO_FEATURES: KernelFeatures = { gemm: { halfInputs: false, biasEpilogue: false }, llm: { dtypes: [] }, quant: { formats: [], dtypes: [] } };
/** What `device`'s kernel family `family` supports beyond its contract (all false when not declared). */
export function kernelFeatures<F extends keyof KernelFeatures>(family: F, device: Device | DeviceType): KernelFeatures[F] {
  const type = typeof device === 'string' ? device : device.type;
  return features.get(type)?.[family] ?? NO_FEATURES[family];
}
