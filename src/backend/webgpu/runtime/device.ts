/// <reference types="@webgpu/types" />
// What the runtime's lower modules (the elementwise lowering, the tuner) and the kernels see of the
// WebGPU backend: its buffers, programs, device facts and recording calls. WebGPUBackend (backend.ts)
// implements WebGPUDevice; modules that backend.ts itself imports name this interface, never the
// class, so that no import (type-only included) runs back into backend.ts.

import type { Config, ConfigSpace } from '../../../autotune/index.js';
import type { DTypeName } from '../../../dtype/dtypes.js';
import type { AdapterChoice, SubgroupMatrixConfig } from './gpu.js';

/** A tensor's device memory: `bytes` requested, `size` the pooled buffer's size. `gpu` arrives with the device. */
export class WGBuffer {
  gpu: GPUBuffer | null = null;
  /** Set when freed before the device existed: the recorded-command stamp of the free. */
  freedAt = -1;
  /** The recorded-command stamp when it was allocated (used to place early buffers in order). */
  allocAt = 0;
  /** Allocated before the device for an upload: its write is not ordered with commands, so it needs a buffer no command used. */
  clean = false;
  /**
   * A data-dependent error of the kernel that wrote this buffer (an index out of range, an integer
   * division by zero), or of one it read: every read of the buffer raises it, reads of others do not.
   */
  fault: Error | null = null;
  constructor(readonly bytes: number, public size: number) {}
}

/** A compute kernel: WGSL source (made once per key), its bindings and its uniform block. */
export interface Program {
  key: string;
  /** One letter per storage binding after the uniform block (binding 0): r read-only, w read-write, a atomic read-write (v, x: r, w as vec4 arrays). */
  access: string;
  /** 32-bit words of the uniform block. */
  words: number;
  source(): string;
}

export interface WebGPUInfo {
  adapter: string;
  via: AdapterChoice['via'];
  compatibility: boolean;
  profile: string;
  features: string[];
  limits: Record<string, number>;
  /** Threads per workgroup for elementwise and reduction kernels. */
  wgElementwise: number;
  wgReduce: number;
  /** Dawn's adapter info (vendor, architecture, device, description, subgroup sizes). */
  identity: Record<string, string | number>;
  /** Every feature the adapter offers, and the Dawn toggles the instance was created with. */
  adapterFeatures: string[];
  toggles: string[];
  /** Subgroup-matrix shapes the adapter offers (usable when the device has the feature). */
  subgroupMatrixConfigs: SubgroupMatrixConfig[];
  /** The autotune cache's device key: 'webgpu' and the adapter's identity. */
  tuneKey: string;
}

/** The backend as its runtime modules and kernels use it (implemented by WebGPUBackend). */
export interface WebGPUDevice {
  /** Set when the device is up (readers run after `ready`, or check isReady). */
  readonly device: GPUDevice;
  readonly info: WebGPUInfo;
  readonly isReady: boolean;
  /** Launch configurations (autotuned, cached per adapter); null until the device is up. */
  readonly tuning: { config(space: ConfigSpace, dims: number[], dtype: DTypeName, fallback: Config, size?: number): Config } | null;
  /** Threads per workgroup for elementwise and reduction kernels (256 until the device is up). */
  readonly wgElementwise: number;
  readonly wgReduce: number;
  allocBytes(bytes: number, zero?: boolean, clean?: boolean): WGBuffer;
  free(buf: unknown): void;
  copyBuffer(src: WGBuffer, dst: WGBuffer, bytes: number): void;
  dispatch(prog: Program, bufs: WGBuffer[], u: Uint32Array, threads: number, wg: number): void;
  /** A host step in the recorded order: `run` reads the mapped `bufs`; what it throws poisons `poisons`. */
  host(name: string, bufs: WGBuffer[], run: (host: Map<WGBuffer, ArrayBuffer>) => void, poisons?: WGBuffer[]): void;
  /** A kernel's error check from its 16-byte error record `err` (a host step; deferred by a graph capture). */
  check(name: string, err: WGBuffer, run: (host: Map<WGBuffer, ArrayBuffer>) => void, poisons?: WGBuffer[]): void;
  timestamp(set: GPUQuerySet, index: number, resolve?: GPUBuffer, read?: GPUBuffer): void;
  /** Resolves when everything recorded so far has run. */
  idle(): Promise<void>;
}
