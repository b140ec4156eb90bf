// Every specialization of the CUDA attention kernels (prefill: dtype x head dim x tile config x mask kind;
// decode: dtype x head dim x threads x mask kind; the chunk merge), compiled with nvcc for sm_90, and
// the Hopper kernel (attention_sm90.ts: dtype x head dim 64/128/256 x its tiles x mask kind) for sm_90a:
// node test/gen/cuda_attention_compile.mjs
import { compileAll } from './cuda_compile_util.mjs';
import { prefillSource, decodeSource, decodeReduceSource, decodeMmaSource, PREFILL_SPACE, DECODE_SPACE, DECODE_TMA_WORDS } from '../../dist/src/backend/cuda/kernels/attention.js';
import { sm90Source, sm90Configs, sm90MoreConfigs, sm90SplitConfigs, sm90OStore, sm90Tag, SM90_TMA_WORDS } from '../../dist/src/backend/cuda/kernels/attention_sm90.js';
import { enumerate } from '../../dist/src/autotune/index.js';

const specs = [];
const masks = (dt) => ['none', 'bool', 'float32', ...(dt === 'float32' ? [] : [dt])];
for (const D of [64, 128]) {
  for (const dt of ['float16', 'bfloat16']) {
    for (const c of enumerate(PREFILL_SPACE).filter((x) => x.impl === 'mma' && !PREFILL_SPACE.constraint(x, { D }))) for (const m of masks(dt)) {
      specs.push({ label: `fwd ${dt} D${D} ${JSON.stringify(c)} ${m}`, ...prefillSource(dt, D, c, m) });
    }
  }
  for (const dt of ['float16', 'bfloat16', 'float32']) {
    for (const t of DECODE_SPACE.knobs.find((k) => k.name === 'threads').values) for (const m of masks(dt)) for (const rb of [1, 2, 4]) {
      specs.push({ label: `dec ${dt} D${D} t${t} ${m} rb${rb}`, ...decodeSource(dt, D, t, m, rb) });
    }
    specs.push({ label: `dec_reduce ${dt} D${D}`, ...decodeReduceSource(dt, D) });
    if (dt !== 'float32') for (const m of masks(dt)) specs.push({ label: `dec_mma ${dt} D${D} ${m}`, ...decodeMmaSource(dt, D, m) });
    // the diagnostic builds (NBX_ATTENTION_DECODE_STAGES, NBX_ATTENTION_ABLATE=nocompute)
    if (dt === 'bfloat16') for (const o of [{ stages: 3 }, { stages: 4 }, { ablate: 'nocompute' }]) specs.push({ label: `dec_mma ${dt} D${D} ${JSON.stringify(o)}`, ...decodeMmaSource(dt, D, 'none', o) });
    // DECODE_SPACE v5: per-warp cp.async tiles, per-warp TMA tiles (its descriptors' struct: DECODE_TMA_WORDS words
    // of the launcher's signature), rings of 2 and 3; the lane kernel's transposed reduction at 2 and 4 rows
    if (dt !== 'float32') for (const m of masks(dt)) for (const o of [{ warpTiles: true }, { warpTiles: true, stages: 3 }, { tma: true }, { tma: true, stages: 3 }]) {
      const s = decodeMmaSource(dt, D, m, o);
      specs.push({ label: `dec_mma ${dt} D${D} ${m} ${JSON.stringify(o)}`, ...s, sig: o.tma ? [...s.sig.slice(0, -DECODE_TMA_WORDS), '?__grid_constant__ DMaps'] : s.sig });
    }
    for (const t of DECODE_SPACE.knobs.find((k) => k.name === 'threads').values) for (const rb of [2, 4]) specs.push({ label: `dec ${dt} D${D} t${t} none rb${rb} scatter`, ...decodeSource(dt, D, t, 'none', rb, true) });
  }
}
await compileAll('attention', specs, 8);
const sm90 = [];
// the TMA build's last parameter is the descriptors' struct (SM90_TMA_WORDS words of the launcher's signature)
const tmaSig = (s) => ({ ...s, sig: [...s.sig.slice(0, -SM90_TMA_WORDS), '?__grid_constant__ TMaps'] });
// (persistent configs are TMA builds only: the launcher runs their cp.async build, for inputs TMA cannot address,
// as the same tile without persistence)
// (sm90MoreConfigs, sm90SplitConfigs: the tiles offered on some problems only)
for (const D of [64, 128, 256]) for (const dt of ['float16', 'bfloat16']) for (const c of [...sm90Configs(D), ...sm90MoreConfigs(D), ...sm90SplitConfigs(D), ...sm90OStore([...sm90Configs(D), ...sm90MoreConfigs(D), ...sm90SplitConfigs(D)])]) for (const m of masks(dt)) {
  if (!c.persistent) sm90.push({ label: `fwd90 ${dt} D${D} ${sm90Tag(c)} ${m}`, ...sm90Source(dt, D, c, m) });
  sm90.push({ label: `fwd90 tma ${dt} D${D} ${sm90Tag(c)} ${m}`, ...tmaSig(sm90Source(dt, D, c, m, { tma: true })) });
}
for (const ablate of ['noload', 'nosoftmax']) sm90.push({ label: `fwd90 tma ${ablate}`, ...tmaSig(sm90Source('bfloat16', 128, sm90Configs(128)[0], 'none', { tma: true, ablate })) });
await compileAll('attention_sm90', sm90, 4, 'sm_90a');
