// Compiles the launch-batch module (src/backend/cuda/runtime/launch_batch.ts) for real with nvcc: runs a few
// small ops of many kinds under the CUDA emulator so the module is built, then nvcc -arch=sm_90 -cubin.
//   NBX_CUDA_BATCH_THREADS=32 node test/gen/cuda_emu.mjs node test/gen/cuda_batch_compile.mjs   (writes /tmp/ew_batch.cu)
import { writeFileSync } from 'node:fs';
import { execFileSync } from 'node:child_process';
import * as nbx from '../../dist/src/index.js';
const x = nbx.linspace(0.1, 2, 40).to('cuda');
const ops = [nbx.exp, (t) => nbx.add(t, 1), (t) => nbx.mul(t, nbx.tensor(2, { device: 'cuda' })), (t) => t.to('float16').add(1), (t) => t.to('bfloat16').mul(2),
  (t) => nbx.add(nbx.arange(40, { device: 'cuda' }), 3), (t) => nbx.where(nbx.gt(t, 1), t, 0), (t) => t.to('float64').mul(3), (t) => nbx.lt(t, 1), (t) => t.to('int32').add(5)];
for (let r = 0; r < 40; r++) for (const f of ops) f(x);
const b = nbx.cuda.backend().batch;
console.log(JSON.stringify(b.stats));
writeFileSync('/tmp/ew_batch.cu', b.source);
execFileSync('nvcc', ['-arch=sm_90', '-cubin', '-std=c++17', '-o', '/tmp/ew_batch.cubin', '/tmp/ew_batch.cu'], { stdio: 'inherit' });
console.log('nvcc: ok');
