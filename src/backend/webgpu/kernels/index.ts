// The WebGPU backend's kernels: one object, checked against the kernel table (src/kernels/table.ts),
// registered when the backend starts. Kernels it lacks, and operands a kernel does not take (pooling
// with int64 indices, strided convolution operands), run on the host through staging
// (runtime/host_staging.ts), announced, never silent.

import { registerKernels, registerKernelFeatures, setStagingProvider } from '../../../kernels/registry.js';
import type { BackendKernels, KernelName } from '../../../kernels/table.js';
import type { WebGPUBackend } from '../runtime/backend.js';
import { hostStaged } from '../runtime/host_staging.js';
import * as conv from './conv.js';
import * as copy from './copy.js';
import * as fft from './fft.js';
import * as gemm from './gemm.js';
import * as gemmInt from './gemm_int.js';
import * as indexing from './indexing.js';
import * as llm from './llm.js';
import * as nn from './nn.js';
import * as pool from './pool.js';
import * as quant from './quant.js';
import * as reduce from './reduce.js';
import * as resample from './resample.js';
import * as sort from './sort.js';
export { stagingStats } from '../runtime/host_staging.js';

const FAMILIES = [copy, gemm, reduce, fft, sort, indexing, resample, gemmInt, nn, conv, pool, quant, llm];

/** Every kernel the WebGPU backend implements itself; the CPU's others run through host staging. */
export const webgpuKernels: BackendKernels = {
  ...copy.kernels, ...reduce.kernels, ...gemm.kernels, ...gemmInt.kernels,
  ...nn.kernels, ...conv.kernels, ...pool.kernels, ...fft.kernels, ...sort.kernels, ...indexing.kernels, ...resample.kernels, ...quant.kernels, ...llm.kernels,
};

export function installWebGPUKernels(backend: WebGPUBackend): void {
  for (const family of FAMILIES) family.bind(backend);
  registerKernels('webgpu', webgpuKernels);
  registerKernelFeatures('webgpu', { gemm: { halfInputs: true, biasEpilogue: false }, ...quant.features, ...llm.features });
  setStagingProvider('webgpu', (name: KernelName) => hostStaged(backend, name));
}
