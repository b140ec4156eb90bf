// Every specialization of the CUDA nll_loss / local_response_norm kernels, compiled with nvcc for sm_90:
// node test/gen/cuda_loss_compile.mjs
import { compileAll, FLOATS, BOOLS } from './cuda_compile_util.mjs';
import { nllSource, nllFinalSource, lrnSource } from '../../dist/src/backend/cuda/kernels/nn.js';

const specs = [];
for (const dt of FLOATS) {
  for (const t of ['int64', 'uint8']) for (const w of BOOLS) for (const o of BOOLS) specs.push({ label: `nll ${dt} ${t} ${w} ${o}`, ...nllSource(dt, t, w, o) });
  for (const nd of [3, 4, 5]) for (const dim of [1, nd - 1]) specs.push({ label: `lrn ${dt} ${nd} ${dim}`, ...lrnSource(dt, nd, dim) });
}
for (const s of ['float32', 'float64']) specs.push({ label: `nll_final ${s}`, ...nllFinalSource(s) });
await compileAll('loss', specs);
