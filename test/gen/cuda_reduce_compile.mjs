// Every specialization of the CUDA reduction kernels (reduce_kernels.ts) compiled with nvcc for sm_90:
// the rows and cols kernels for each simple kind x input dtype x output dtype the op layer produces,
// first passes and passes over partials, every unroll and column-vector width; the general kernels
// (argmax/argmin, values+indices, var, logsumexp) in row and vertical mode. Run after `npx tsc`:
//   node test/gen/cuda_reduce_compile.mjs
import { compileAll, FLOATS, INTS } from './cuda_compile_util.mjs';
import { rowsKernel, colsKernel, reduceSource, ROWS_SIG, COLS_SIG } from '../../dist/src/backend/cuda/reduce_kernels.js';

const ALL = ['bool', ...INTS, ...FLOATS];
const size = { bool: 1, uint8: 1, int8: 1, int16: 2, int32: 4, int64: 8, float16: 2, bfloat16: 2, float32: 4, float64: 8 };
const isF = (d) => FLOATS.includes(d);
const part = (d) => (isF(d) ? 'float64' : 'int64');
// (kind, input dtype, output dtype) as src/ops/reduce.ts calls the kernel
const combos = [];
for (const x of ALL) {
  combos.push(['sum', x, isF(x) ? x : 'int64'], ['prod', x, isF(x) ? x : 'int64'], ['max', x, x], ['min', x, x],
    ['any', x, 'bool'], ['all', x, 'bool'], ['count_nonzero', x, 'int64']);
  if (isF(x)) combos.push(['mean', x, x], ['norm', x, x], ['sum', x, 'float64']);
}
combos.push(['sum', 'int32', 'int32'], ['any', 'uint8', 'uint8'], ['all', 'uint8', 'uint8']);
const specs = [];
for (const [kind, x, o] of combos) {
  for (const U of [1, 2, 4]) {
    specs.push({ label: `rows ${kind} ${x}>${o} u${U}`, src: rowsKernel(kind, x, o, false, U, 'k'), name: 'k', sig: ROWS_SIG });
    specs.push({ label: `rows part ${kind} ${part(x)}>${o} u${U}`, src: rowsKernel(kind, part(x), o, true, U, 'k'), name: 'k', sig: ROWS_SIG });
    for (let V = 1; V <= Math.min(8, 16 / size[x]); V *= 2) specs.push({ label: `cols ${kind} ${x}>${o} v${V} u${U}`, src: colsKernel(kind, x, o, false, V, U, 'k'), name: 'k', sig: COLS_SIG });
    for (const V of [1, 2]) specs.push({ label: `cols part ${kind} ${part(x)}>${o} v${V} u${U}`, src: colsKernel(kind, part(x), o, true, V, U, 'k'), name: 'k', sig: COLS_SIG });
  }
}
const SIG = ['ptr', 'ptr', 'ptr', 'i64', 'i64', 'i64', 'i64', 'i64', 'i64', 'i64', 'f64'];
for (const x of ALL) for (const mode of ['row', 'vertical']) {
  specs.push({ label: `argmax ${x} ${mode}`, src: reduceSource('argmax', x, 'int64', false, mode), name: 'red', sig: SIG });
  specs.push({ label: `argmin ${x} ${mode}`, src: reduceSource('argmin', x, 'int64', false, mode), name: 'red', sig: SIG });
  specs.push({ label: `max+idx ${x} ${mode}`, src: reduceSource('max', x, x, true, mode), name: 'red', sig: SIG });
  specs.push({ label: `min+idx ${x} ${mode}`, src: reduceSource('min', x, x, true, mode), name: 'red', sig: SIG });
  if (isF(x)) for (const k of ['var', 'logsumexp']) specs.push({ label: `${k} ${x} ${mode}`, src: reduceSource(k, x, x, false, mode), name: 'red', sig: SIG });
}
await compileAll('reduce', specs, 40);
