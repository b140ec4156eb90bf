// Every specialization of the CUDA attention kernels (prefill: dtype x head dim x tile config x mask kind;
// decode: dtype x head dim x threads x mask kind; the chunk merge), compiled with nvcc for sm_90:
// node test/gen/cuda_attention_compile.mjs
import { compileAll } from './cuda_compile_util.mjs';
import { prefillSource, decodeSource, decodeReduceSource, PREFILL_SPACE, DECODE_SPACE } from '../../dist/src/backend/cuda/kernels/attention.js';
import { enumerate } from '../../dist/src/autotune/index.js';

const specs = [];
const masks = (dt) => ['none', 'bool', 'float32', ...(dt === 'float32' ? [] : [dt])];
for (const D of [64, 128]) {
  for (const dt of ['float16', 'bfloat16']) {
    for (const c of enumerate(PREFILL_SPACE)) for (const m of masks(dt)) {
      specs.push({ label: `fwd ${dt} D${D} ${JSON.stringify(c)} ${m}`, ...prefillSource(dt, D, c, m) });
    }
  }
  for (const dt of ['float16', 'bfloat16', 'float32']) {
    for (const t of DECODE_SPACE.knobs.find((k) => k.name === 'threads').values) for (const m of masks(dt)) for (const rb of [1, 2, 4]) {
      specs.push({ label: `dec ${dt} D${D} t${t} ${m} rb${rb}`, ...decodeSource(dt, D, t, m, rb) });
    }
    specs.push({ label: `dec_reduce ${dt} D${D}`, ...decodeReduceSource(dt, D) });
  }
}
await compileAll('attention', specs, 8);
