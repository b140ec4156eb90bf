// Compiles every specialization of the elementwise generators (src/backend/cuda/runtime/elementwise.ts) with
// nvcc for sm_90, then checks the SASS of the contiguous and broadcast kernels for 16-byte global
// loads and stores (LDG.E.128 / STG.E.128). Run after `npx tsc`: node test/gen/cuda_ew_compile.mjs
import { execFileSync } from 'node:child_process';
import { writeFileSync, mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Expr } from '../../dist/src/ir/expr.js';
import { CUDA_PRELUDE } from '../../dist/src/ir/render_c.js';
import { flatSource, bcastSource } from '../../dist/src/backend/cuda/runtime/elementwise.js';
import { compileAll } from './cuda_compile_util.mjs';

const ref = (dtype) => ({ dtype });
const ld = (s, d, c) => Expr.load(s, d).cast(c);
// [label, expr, input dtypes, out dtype, V for the widest]
const exprs = [
  ['add f32', ld(0, 'float32', 'float32').add(ld(1, 'float32', 'float32')), ['float32', 'float32'], 'float32'],
  ['add bf16', ld(0, 'bfloat16', 'float32').add(ld(1, 'bfloat16', 'float32')).cast('bfloat16'), ['bfloat16', 'bfloat16'], 'bfloat16'],
  ['mul f16 param', ld(0, 'float16', 'float32').mul(Expr.param(0, 'float32')).cast('float16'), ['float16'], 'float16'],
  ['f32 + bf16', ld(0, 'float32', 'float32').add(ld(1, 'bfloat16', 'float32')), ['float32', 'bfloat16'], 'float32'],
  ['int8 * f64', ld(0, 'int8', 'float64').mul(ld(1, 'float64', 'float64')), ['int8', 'float64'], 'float64'],
  ['where bool f16', Expr.where(ld(0, 'bool', 'bool'), ld(1, 'float16', 'float32'), ld(2, 'float16', 'float32')).cast('float16'), ['bool', 'float16', 'float16'], 'float16'],
  ['add i64', ld(0, 'int64', 'int64').add(ld(1, 'int64', 'int64')), ['int64', 'int64'], 'int64'],
  ['bool copy', Expr.load(0, 'bool'), ['bool'], 'bool'],
  ['u8 add', ld(0, 'uint8', 'uint8').add(ld(1, 'uint8', 'uint8')), ['uint8', 'uint8'], 'uint8'],
];
const width = (ds, o) => Math.max(...[...ds, o].map((d) => ({ bool: 1, uint8: 1, int8: 1, int16: 2, float16: 2, bfloat16: 2, int32: 4, float32: 4, int64: 8, float64: 8 })[d]));
const specs = [];
const pT = (e) => e.paramDTypes().map((d) => (d === 'float64' ? 'f64' : d.startsWith('float') || d === 'bfloat16' ? 'f32' : d === 'int64' ? 'i64' : 'i32'));
for (const [label, e, ds, o] of exprs) {
  const ins = ds.map(ref), out = ref(o), V0 = 16 / width(ds, o);
  for (const V of [1, V0]) for (const U of [1, 2, 4]) for (const T of [128, 512]) for (const hint of ['none', 'cs', 'pf']) for (const idx32 of [true, false]) {
    specs.push({ label: `flat ${label} V${V} U${U} T${T} ${hint} ${idx32}`, ...flatSource(e, ins, out, V, U, T, hint, idx32, pT(e)) });
    for (const three of [false, true]) {
      const perRow = ds.map((_, i) => i === ds.length - 1 && ds.length > 1 && three);
      const ro = ds.map((_, i) => i === 0 && ds.length > 1);
      specs.push({ label: `bcast ${label} V${V} U${U} T${T} ${hint} ${idx32} ${three}`, ...bcastSource(e, ins, out, perRow, ro, three, V, U, T, hint, idx32, pT(e)) });
    }
  }
}
if (!process.argv.includes('--ptx-only')) await compileAll('ew', specs, 64);

// The vector paths must use 16-byte global accesses (PTX ld/st .v4.u32; no cuobjdump here) and no
// local memory (ptxas -v: no stack frame, no spills).
const dir = mkdtempSync(join(tmpdir(), 'nbx_ew_ptx_'));
const checks = [
  ['flat add f32 V4 U4 cs', flatSource(exprs[0][1], [ref('float32'), ref('float32')], ref('float32'), 4, 4, 128, 'cs', true, [])],
  ['flat add f32 V4 U2 pf', flatSource(exprs[0][1], [ref('float32'), ref('float32')], ref('float32'), 4, 2, 128, 'pf', true, [])],
  ['flat add bf16 V8 U2', flatSource(exprs[1][1], [ref('bfloat16'), ref('bfloat16')], ref('bfloat16'), 8, 2, 128, 'none', true, [])],
  ['flat where bool f16 V8 U4', flatSource(exprs[5][1], [ref('bool'), ref('float16'), ref('float16')], ref('float16'), 8, 4, 512, 'none', true, [])],
  ['bcast row add f32 V4 U2', bcastSource(exprs[0][1], [ref('float32'), ref('float32')], ref('float32'), [false, false], [false, true], false, 4, 2, 256, 'none', true, [])],
  ['bcast col add bf16 V8', bcastSource(exprs[1][1], [ref('bfloat16'), ref('bfloat16')], ref('bfloat16'), [false, true], [false, false], false, 8, 1, 256, 'cs', true, [])],
];
let bad = 0;
for (const [label, k] of checks) {
  const f = join(dir, `${label.replace(/\W+/g, '_')}.cu`);
  writeFileSync(f, `${CUDA_PRELUDE}\n${k.src}`);
  const ptx = execFileSync('nvcc', ['-arch=sm_90', '-ptx', '--std=c++17', '-w', '-o', '-', f], { encoding: 'utf8' });
  const v = execFileSync('nvcc', ['-arch=sm_90', '-cubin', '--std=c++17', '-w', '-Xptxas', '-v', '-o', f.replace(/\.cu$/, '.cubin'), f], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] });
  const count = (re) => (ptx.match(re) ?? []).length;
  const l128 = count(/ld\.global(?:\.\w+)*\.v4\.[ubf]32/g), s128 = count(/st\.global(?:\.\w+)*\.v4\.[ubf]32/g);
  const info = execFileSync('sh', ['-c', `nvcc -arch=sm_90 -cubin --std=c++17 -w -Xptxas -v -o /dev/null ${f} 2>&1`], { encoding: 'utf8' });
  const regs = /Used (\d+) registers/.exec(info)?.[1], frame = /(\d+) bytes stack frame/.exec(info)?.[1], spill = /(\d+) bytes spill stores/.exec(info)?.[1];
  console.log(`${label}: 16-byte loads ${l128}, 16-byte stores ${s128}, registers ${regs}, stack frame ${frame} B, spills ${spill} B`);
  void v;
  if (!l128 || !s128 || frame !== '0' || spill !== '0') bad++;
}
if (bad) { console.error(`${bad} kernels without 16-byte accesses or with local memory (sources in ${dir})`); process.exitCode = 1; }
