// Every kind of specialization of the CUDA softmax and row_norm kernels (dtypes, vector widths, cached
// and streaming rows, group sizes below/at/above a warp, masks, log/softmin/safe, stats, affine kinds),
// compiled with nvcc for sm_90: node test/gen/cuda_norm_compile.mjs
import { compileAll } from './cuda_compile_util.mjs';
import { softmaxSource, rowNormSource, rowPlan } from '../../dist/src/backend/cuda/kernels/nn.js';

const FL = ['float32', 'float64', 'float16', 'bfloat16'];
const size = { float32: 4, float64: 8, float16: 2, bfloat16: 2 };
const outs = (x) => [...new Set([x, x === 'float64' ? 'float64' : 'float32', 'float64'])];
const vecs = (a, b) => [1, 16 / Math.max(size[a], size[b])];
const plans = (V, A) => {
  const seen = new Map();
  for (const n of [3, 64, 1000, 8192, 70000]) for (const t of [128, 1024]) {
    const p = rowPlan(n, t, V, A);
    seen.set(`${p.block}:${p.G}:${p.K}`, p);
  }
  return [...seen.values()];
};
const specs = [];
for (const x of FL) for (const out of outs(x)) for (const V of vecs(x, out)) {
  const A = x === 'float64' || out === 'float64' ? 'double' : 'float';
  plans(V, A).forEach((plan, i) => {
    const mask = [null, 'bool', out][i % 3];
    const [log, negate, safe] = [i % 2 === 1, i % 3 === 2, i % 4 === 3];
    specs.push({ label: `softmax ${x}>${out} V${V} ${JSON.stringify(plan)} ${mask} ${log}${negate}${safe}`, ...softmaxSource(x, out, mask, i % 3, plan, log, negate, safe) });
  });
}
for (const x of FL) for (const out of [x, ...(x === 'float16' || x === 'bfloat16' ? ['float32'] : [])]) for (const V of vecs(x, out)) {
  const A = x === 'float64' ? 'double' : 'float';
  const wd = out === x ? x : 'float32';
  plans(V, A).forEach((plan, i) => {
    for (const rms of [false, true]) {
      const simple = i % 2 === 0 || V > 1;
      const stats = i % 3 === 0 ? (A === 'double' ? 'float64' : 'float32') : null;
      specs.push({ label: `row_norm ${x}>${out} V${V} ${JSON.stringify(plan)} rms${rms} simple${simple}`,
        ...rowNormSource(x, out, i % 2 ? wd : null, rms ? null : wd, stats, rms, plan, simple) });
    }
    specs.push({ label: `row_norm stats only ${x} ${JSON.stringify(plan)}`, ...rowNormSource(x, null, null, null, A === 'double' ? 'float64' : 'float32', false, plan, true) });
  });
}
await compileAll('norm', specs, 12);
