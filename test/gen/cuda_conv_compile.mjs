// Every specialization of the CUDA conv kernels, compiled with nvcc for sm_90: node test/gen/cuda_conv_compile.mjs
import { compileAll, FLOATS, IDX, BOOLS } from './cuda_compile_util.mjs';
import { im2colSource, fillBiasSource, depthwiseSource, col2imSource } from '../../dist/src/backend/cuda/kernels/conv.js';

const specs = [];
for (const dt of FLOATS) for (const I of IDX) {
  specs.push({ label: `im2col ${dt} ${I}`, ...im2colSource(dt, I) });
  for (const b of BOOLS) {
    specs.push({ label: `fill ${dt} ${I} ${b}`, ...fillBiasSource(dt, I, b) });
    specs.push({ label: `depthwise ${dt} ${I} ${b}`, ...depthwiseSource(dt, I, b) });
    specs.push({ label: `col2im ${dt} ${I} ${b}`, ...col2imSource(dt, I, b) });
  }
}
await compileAll('conv', specs);
