// Every specialization of the CUDA FFT kernels, compiled with nvcc for sm_90: node test/gen/cuda_fft_compile.mjs
import { compileAll, BOOLS } from './cuda_compile_util.mjs';
import { smemSource, globalSource } from '../../dist/src/backend/cuda/kernels/fft.js';

const real = ['float32', 'float64'], cplx = ['complex64', 'complex128'];
const pairs = { c2c: [...real, ...cplx].map((i) => [i, i.endsWith('64') && i !== 'float64' ? 'complex64' : i === 'float32' ? 'complex64' : 'complex128']),
  r2c: real.map((i) => [i, i === 'float32' ? 'complex64' : 'complex128']), c2r: [...real, ...cplx].map((i) => [i, i === 'float32' || i === 'complex64' ? 'float32' : 'float64']) };
const specs = [];
for (const [kind, list] of Object.entries(pairs)) for (const [i, o] of list) for (const blue of BOOLS) {
  specs.push({ label: `fft smem ${kind} ${i}->${o} ${blue}`, ...smemSource(i, o, kind, blue) });
  specs.push({ label: `fft global ${kind} ${i}->${o} ${blue}`, ...globalSource(i, o, kind, blue) });
}
await compileAll('fft', specs);
