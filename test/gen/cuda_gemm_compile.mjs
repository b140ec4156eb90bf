// Every specialization of the CUDA small-M GEMM (GEMV) kernels, compiled with nvcc for sm_90:
// node test/gen/cuda_gemm_compile.mjs   (after npx tsc)
import { compileAll } from './cuda_compile_util.mjs';
import { allGemvSources } from '../../dist/src/backend/cuda/kernels/gemv.js';

await compileAll('gemv', allGemvSources(), 8);
