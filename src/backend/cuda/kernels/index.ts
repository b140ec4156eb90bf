// The CUDA backend's kernels: one object, checked against the kernel table (src/kernels/table.ts),
// registered when the backend starts. Kernels it lacks run on the host through staging
// (runtime/host_staging.ts), announced, never silent.

import { registerKernels, registerKernelFeatures, setStagingProvider } from '../../../kernels/registry.js';
import type { BackendKernels } from '../../../kernels/table.js';
import * as attention from './attention.js';
import * as conv from './conv.js';
import * as copy from './copy.js';
import * as decodeStep from './decode_step.js';
import * as fft from './fft.js';
import * as gemm from './gemm.js';
import * as indexing from './indexing.js';
import * as llm from './llm.js';
import * as moe from './moe.js';
import * as nn from './nn.js';
import * as pool from './pool.js';
import * as quant from './quant.js';
import * as reduce from './reduce.js';
import * as resample from './resample.js';
import * as sort from './sort.js';
import type { CudaBackend } from '../runtime/backend.js';
import { hostStaged } from '../runtime/host_staging.js';
export { stagingStats } from '../runtime/host_staging.js';
export { cudaMatmulSettings } from './gemm.js';

const FAMILIES = [copy, reduce, gemm, nn, indexing, sort, conv, pool, resample, fft, attention, llm, quant, moe, decodeStep];

/** Every kernel the CUDA backend implements itself; the CPU's others run through host staging. */
export const cudaKernels: BackendKernels = {
  ...copy.kernels, ...reduce.kernels, ...gemm.kernels, ...nn.kernels, ...indexing.kernels, ...sort.kernels, ...conv.kernels, ...pool.kernels, ...resample.kernels, ...fft.kernels, ...attention.kernels, ...llm.kernels, ...quant.kernels, ...moe.kernels, ...decodeStep.kernels,
};

export function installCudaKernels(backend: CudaBackend): void {
  for (const family of FAMILIES) family.bind(backend);
  registerKernels('cuda', cudaKernels);
  // cuBLASLt multiplies float16/bfloat16 natively and adds linear's bias in its epilogue.
  registerKernelFeatures('cuda', { gemm: { halfInputs: true, biasEpilogue: true }, llm: { ...llm.features.llm, ...moe.llmFeatures, ...decodeStep.llmFeatures }, ...quant.features });
  setStagingProvider('cuda', (name) => hostStaged(backend, name));
}

