// Every kind of specialization of the CUDA paged attention kernel (dtypes, head dims 64/128/256/80,
// value dim, heads per block 1..8, int32/int64 block tables and lengths), compiled with nvcc for sm_90
// (register use and shared memory checked by ptxas): node test/gen/cuda_paged_compile.mjs
import { compileAll } from './cuda_compile_util.mjs';
import { pagedAttentionSource } from '../../dist/src/backend/cuda/kernels/llm.js';

const specs = [];
for (const d of ['float32', 'float64', 'float16', 'bfloat16']) for (const [D, Dv] of [[64, 64], [128, 128], [256, 256], [80, 80], [16, 16]]) {
  for (const heads of [1, 4, 8]) for (const [it, lt] of [['int32', 'int32'], ['int64', 'int64'], ['int32', 'int64']]) {
    specs.push({ label: `paged_attention ${d} D${D} Dv${Dv} heads${heads} ${it}/${lt}`, ...pagedAttentionSource(d, D, Dv, heads, it, lt) });
  }
}
const n = await compileAll('paged', specs);
console.log(`paged_attention: ${n} kernels compiled`);
