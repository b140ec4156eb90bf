// The CPU backend's kernels: one object, checked against the kernel table, registered when the
// library loads. The CPU implements every kernel except the fused ones the op layer composes itself.

import '../index.js';
import { registerKernels, registerKernelFeatures } from '../../../kernels/registry.js';
import type { BackendKernels } from '../../../kernels/table.js';
import { recordable } from '../runtime/recording.js';
import * as conv from './conv.js';
import * as copy from './copy.js';
import * as fft from './fft.js';
import * as gemm from './gemm.js';
import * as indexing from './indexing.js';
import * as llm from './llm.js';
import * as nn from './nn.js';
import * as pool from './pool.js';
import * as quant from './quant.js';
import * as reduce from './reduce.js';
import * as resample from './resample.js';
import * as sort from './sort.js';

export const cpuKernels: BackendKernels = {
  ...copy.kernels, ...reduce.kernels, ...gemm.kernels, ...indexing.kernels, ...sort.kernels, ...fft.kernels,
  ...conv.kernels, ...pool.kernels, ...resample.kernels, ...nn.kernels, ...llm.kernels,
  ...quant.kernels,
};
// wrapped so that a CPU step recording (runtime/recording.ts) sees every kernel call, however the op got the kernel
registerKernels('cpu', Object.fromEntries(Object.entries(cpuKernels).map(([name, fn]) => [name, recordable(name, fn)])) as BackendKernels);
registerKernelFeatures('cpu', llm.features);
registerKernelFeatures('cpu', quant.features);
