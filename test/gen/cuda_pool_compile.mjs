// Every specialization of the CUDA pooling kernels, compiled with nvcc for sm_90: node test/gen/cuda_pool_compile.mjs
import { compileAll, FLOATS, INTS, BOOLS } from './cuda_compile_util.mjs';
import { poolSource } from '../../dist/src/backend/cuda/kernels/pool.js';

const specs = [];
for (const kind of ['max', 'avg']) for (const win of ['window', 'adaptive']) for (const dt of [...FLOATS, ...INTS])
  for (const idx of kind === 'max' ? BOOLS : [false]) for (const warp of BOOLS) for (const idx32 of BOOLS)
    specs.push({ label: `pool ${kind} ${win} ${dt} idx=${idx} warp=${warp} idx32=${idx32}`, ...poolSource(kind, win, dt, idx, warp, idx32) });
await compileAll('pool', specs);
