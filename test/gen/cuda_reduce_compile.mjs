// Every specialization of the CUDA reduction kernels (kernels/reduce.ts) compiled with nvcc for sm_90:
// the rows and cols modules (every unroll depth) of each simple kind x dtype (the op layer's default
// output dtypes, plus a few dtype= outputs), every column
// vector width; the general kernels (argmax/argmin, values+indices, var, logsumexp) in row and
// vertical mode. Run after `npx tsc`: node test/gen/cuda_reduce_compile.mjs
import { compileAll, FLOATS, INTS } from './cuda_compile_util.mjs';
import { reduceModules, rowsModule, colsModule, ROWS_SIG, COLS_SIG } from '../../dist/src/backend/cuda/kernels/reduce.js';

// compileAll renames one kernel per spec: split each module into its kernels (extern "C" names clash otherwise)
const split = (m) => m.src.split(/\n(?=extern "C")/).map((src, i) => ({ label: `${m.label} #${i}`, src, name: /void (?:__launch_bounds__\(\d+\) )?(\w+)\(/.exec(src)[1], sig: m.sig }));
const mods = reduceModules(['bool', ...INTS, ...FLOATS]);
// dtype= outputs
mods.push({ label: 'sum f32>f64', src: rowsModule('sum', 'float32', 'float64'), sig: ROWS_SIG }, { label: 'sum i32>i32', src: rowsModule('sum', 'int32', 'int32'), sig: ROWS_SIG },
  { label: 'cols sum bf16>f32', src: colsModule('sum', 'bfloat16', 'float32', 8), sig: COLS_SIG });
await compileAll('reduce', mods.flatMap(split), 40);
