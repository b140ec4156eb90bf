// Registers the CUDA backend loader; nothing touches the driver until a tensor asks for 'cuda'.
import { registerBackendLoader, loadedBackends } from '../backend.js';
import { CudaBackend } from './runtime/backend.js';
import { installCudaKernels, cudaMatmulSettings, stagingStats } from './kernels/index.js';
import { probeCuda } from './runtime/libs.js';
import { CUDAGraph as GraphOnBackend, captureGraph } from './runtime/graph.js';
import { replayTrace, saveTrace, loadTrace, type MemoryStats, type TraceEntry } from '../../memory/caching_allocator.js';
import { vmmMemoryStats } from './runtime/driver.js';

let instance: CudaBackend | null = null;
function load(): CudaBackend {
  if (!instance) {
    instance = new CudaBackend();
    installCudaKernels(instance);
  }
  return instance;
}
registerBackendLoader('cuda', load);

/** A CUDA graph on the CUDA backend (see runtime/graph.ts). */
export class CUDAGraph extends GraphOnBackend {
  constructor() { super(load()); }
}

/** nbx.cuda: availability, memory statistics and the allocator's cache, like torch.cuda. */
export const cuda = {
  is_available(): boolean { try { return probeCuda().available; } catch { return false; } },
  device_count(): number { try { return probeCuda().devices?.length ?? 0; } catch { return 0; } },
  /** The caching allocator's statistics, with the bytes reserved and mapped through the VMM API (the paged KV cache's pools). */
  memoryStats(): MemoryStats { return { ...load().allocator.memoryStats(), ...vmmMemoryStats() }; },
  memory_stats(): MemoryStats { return { ...load().allocator.memoryStats(), ...vmmMemoryStats() }; },
  emptyCache(): number { return load().allocator.emptyCache(); },
  empty_cache(): number { return load().allocator.emptyCache(); },
  startRecording(): void { load().allocator.startRecording(); },
  stopRecording(): TraceEntry[] { return load().allocator.stopRecording(); },
  /** Replays a recorded trace against a fresh allocator offline: peak reserved/allocated, fragmentation. */
  replayTrace,
  saveTrace,
  loadTrace,
  async synchronize(): Promise<void> { if (instance) await instance.synchronize(); },
  get matmul() { return cudaMatmulSettings; },
  /** Kernels that ran through host staging in this process, and how often. */
  hostStagingStats(): Record<string, number> { return Object.fromEntries(stagingStats); },
  backend(): CudaBackend { return load(); },
  /** Launch batching of small elementwise ops (launch_batch.ts): batches, commands, direct launches; null when NBX_CUDA_BATCH=0. */
  batchStats(): Record<string, number> | null { const b = load().batch; return b ? { ...b.stats } : null; },
  loaded(): boolean { return loadedBackends().some((b) => b.type === 'cuda'); },
  /** torch.cuda.CUDAGraph: `new nbx.cuda.CUDAGraph()`, capture_begin() / capture_end() / replay() / reset(). */
  CUDAGraph,
  /** torch.cuda.graph(g): records fn() into g (warm it up first) and returns what fn returned. */
  graph<T>(g: CUDAGraph, fn: () => T): T { return captureGraph(g, fn); },
  /** torch.cuda.is_current_stream_capturing(). */
  is_current_stream_capturing(): boolean { return instance !== null && instance.capture !== null; },
};

