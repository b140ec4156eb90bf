#!/usr/bin/env node
// One launch of each given CUDA quant GEMV configuration (forced, no tuning), for a kernel profiler: random packed
// weights [N, K] of the format (bench/quant.ts's bigPacked), bf16 x of one row. The configurations print in launch
// order (stderr), so the profiler's report reads in the same order. Under Nsight Compute:
//   ncu -k quant_gemv_v --section WarpStateStats --section SchedulerStats node scripts/quant-gemv-one.mjs \
//     --format q4_k --shape 4096x14336 --cfgs '[{"kw":1,"nr":2,"db":1,"U":1,"wu":1}]'
// (each configuration is merged over { impl: 'vec', kw: 1, xs: 1, xf: 1 }, as bench quant's --sweep-cfgs; its "f", if any,
// names its format instead of --format).
import { parseArgs } from 'node:util';

const { values } = parseArgs({ options: { format: { type: 'string', default: 'int4' }, shape: { type: 'string', default: '4096x14336' }, cfgs: { type: 'string', default: '[{}]' }, calls: { type: 'string', default: '1' } } });
const nbx = await import('../dist/src/index.js');
const { bigPacked, callQuant, disposeW } = await import('../dist/bench/quant.js');
const q = await import('../dist/src/backend/cuda/kernels/quant.js');
const { Tensor } = await import('../dist/src/tensor/tensor.js');
const [n, k] = values.shape.split('x').map(Number);
const weights = new Map(); // per format (a configuration's "f" names its format, else --format)
const x = nbx.randn([1, k], { device: 'cuda', dtype: 'bfloat16' }), o = Tensor.empty([1, n], 'bfloat16', 'cuda');
for (const { f = values.format, ...c } of JSON.parse(values.cfgs)) {
  if (!weights.has(f)) weights.set(f, bigPacked(f, n, k, 'cuda', 11));
  const cfg = { impl: 'vec', kw: 1, xs: 1, xf: 1, ...c };
  q.forceQuantGemvConfig(cfg);
  try {
    process.stderr.write(`${f} ${n}x${k} ${JSON.stringify(c)}\n`);
    for (let i = 0; i < Number(values.calls); i++) callQuant('cuda', weights.get(f), x, o, 1, 'bfloat16');
    await nbx.cuda.synchronize();
  } finally { q.forceQuantGemvConfig(null); }
}
for (const w of weights.values()) disposeW(w);
x.dispose(); o.dispose();
