// Every specialization of the CUDA interpolate / grid_sample kernels, compiled with nvcc for sm_90:
// node test/gen/cuda_resample_compile.mjs
import { compileAll, FLOATS, INTS, IDX, BOOLS } from './cuda_compile_util.mjs';
import { gatherSource, fusedSource, passSource, gridSampleSource } from '../../dist/src/backend/cuda/kernels/resample.js';

const specs = [];
for (const I of IDX) {
  for (const dt of [...FLOATS, ...INTS, 'bool']) specs.push({ label: `gather ${dt} ${I}`, ...gatherSource(dt, I) });
  for (const dt of FLOATS) {
    for (const a of BOOLS) for (const b of BOOLS) for (const c of BOOLS) specs.push({ label: `fused ${dt} ${a}${b}${c} ${I}`, ...fusedSource(dt, dt, [a, b, c], I) });
    for (const [s, d] of [[dt, 'float64'], ['float64', dt], [dt, dt], ['float64', 'float64']]) for (const w of BOOLS) specs.push({ label: `pass ${s}->${d} ${w} ${I}`, ...passSource(s, d, w, I) });
  }
}
for (const dt of ['float32', 'float64']) for (const sp of [2, 3]) for (const mode of sp === 2 ? ['bilinear', 'nearest', 'bicubic'] : ['bilinear', 'nearest'])
  for (const pad of ['zeros', 'border', 'reflection']) for (const ac of BOOLS)
    specs.push({ label: `grid_sample ${dt} ${sp}d ${mode} ${pad} ${ac}`, ...gridSampleSource(dt, sp, mode, pad, ac) });
await compileAll('resample', specs);
