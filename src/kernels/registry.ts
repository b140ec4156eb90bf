// Hand kernels, keyed by (operation, device type). Registering twice is a bug and throws; asking for a
// kernel a device lacks is an UnsupportedError naming both, never a silent trip to another device.

import { UnsupportedError } from '../errors.js';
import type { Device, DeviceType } from '../backend/backend.js';

// eslint-disable-next-line @typescript-eslint/no-explicit-any
type KernelFn = (...args: any[]) => any;
const kernels = new Map<string, KernelFn>();

export function registerKernel(name: string, device: DeviceType, fn: KernelFn): void {
  const key = `${name}@${device}`;
  if (kernels.has(key)) throw new Error(`kernel ${name} is registered twice for ${device}`);
  kernels.set(key, fn);
}

export function hasKernel(name: string, device: DeviceType): boolean { return kernels.has(`${name}@${device}`); }

/** A device may run CPU kernels it lacks through a provider (CUDA host staging); announced by the provider. */
const staging = new Map<DeviceType, (name: string) => KernelFn>();
export function setStagingProvider(device: DeviceType, provider: (name: string) => KernelFn): void { staging.set(device, provider); }
/** The CPU implementation of a kernel (for staging providers). */
export function kernelCpu(name: string): KernelFn {
  const fn = kernels.get(`${name}@cpu`);
  if (!fn) throw new UnsupportedError(name, `no '${name}' kernel on cpu either`);
  return fn;
}

// eslint-disable-next-line @typescript-eslint/no-explicit-any
export function kernel<F extends KernelFn = KernelFn>(name: string, device: Device | DeviceType, op = name): F {
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
  return fn as F;
}

export function kernelNames(device: DeviceType): string[] {
  return [...kernels.keys()].filter((k) => k.endsWith(`@${device}`)).map((k) => k.split('@')[0]!);
}
