// Every specialization of the CUDA quantized-weight kernels (formats, int4 symmetric/asymmetric, x
// dtypes, x rows, weight rows per warp, sub-blocks per lane; the dequantize kernels), compiled with
// nvcc for sm_90a: node test/gen/cuda_quant_compile.mjs (after npm run build).
import { compileAll } from './cuda_compile_util.mjs';
import { allQuantSources } from '../../dist/src/backend/cuda/kernels/quant.js';

const only = process.argv[2] ? new RegExp(process.argv[2]) : null; // a label filter, e.g. ':1:2:2$'
const specs = allQuantSources().filter((s) => !only || only.test(s.label));
const n = await compileAll('quant', specs);
console.log(`cuda quant: ${n} kernels compiled`);
