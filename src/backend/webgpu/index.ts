// Registers the WebGPU backend loader; nothing touches Dawn / navigator.gpu until a tensor asks for
// 'webgpu'. The device arrives asynchronously: work recorded before it exists waits for it, and
// `await nbx.webgpu.init()` reports a missing adapter up front.

import { registerBackendLoader, loadedBackends } from '../backend.js';
import { WebGPUBackend, type WebGPUInfo } from './runtime/backend.js';
import { installWebGPUKernels, stagingStats } from './kernels/index.js';
import { probeWebGPU, type WebGPUProbe } from './runtime/probe.js';
import type { PoolStats } from './runtime/buffer_pool.js';
import { Tensor } from '../../tensor/tensor.js';
import { nativeMessages } from '../native_stderr.js';

let instance: WebGPUBackend | null = null;
function load(): WebGPUBackend {
  if (!instance) {
    instance = new WebGPUBackend();
    installWebGPUKernels(instance);
  }
  return instance;
}
registerBackendLoader('webgpu', load);

/** nbx.webgpu: device start-up, availability, memory statistics and the buffer pool. */
export const webgpu = {
  /** Starts the device (if not yet) and waits for it; rejects with the reason when there is no adapter. */
  async init(): Promise<WebGPUInfo> { const b = load(); await b.ready; return b.info; },
  /** Whether an adapter can be found (does not start the backend). */
  async isAvailable(): Promise<boolean> { return (await probeWebGPU()).available; },
  probe(): Promise<WebGPUProbe> { return probeWebGPU(); },
  /** Adapter, profile, limits and workgroup sizes in use (after init). */
  info(): WebGPUInfo | undefined { return instance?.isReady ? instance.info : undefined; },
  memoryStats(): PoolStats & WebGPUBackend['counters'] { return load().memoryStats(); },
  emptyCache(): number { return load().emptyCache(); },
  /** Submits recorded work and waits for the GPU; surfaces an asynchronous fault. */
  async synchronize(): Promise<void> { if (instance) await instance.synchronize(); },
  /** Kernels that ran through host staging in this process, and how often. */
  hostStagingStats(): Record<string, number> { return Object.fromEntries(stagingStats); },
  /** The same as `await t.cpu()`, which works on every device. */
  async toCpu(t: Tensor): Promise<Tensor> { return t.cpu(); },
  /** Dawn's start-up messages in this process (kept off stderr unless NBX_DEBUG=1; `nbx info` shows them). */
  messages(): string[] { return [...nativeMessages]; },
  backend(): WebGPUBackend { return load(); },
  loaded(): boolean { return loadedBackends().some((b) => b.type === 'webgpu'); },
};
