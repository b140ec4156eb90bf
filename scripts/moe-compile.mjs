// Every specialization of the CUDA mixture-of-experts kernels (src/backend/cuda/kernels/moe.ts):
// moe_align for int32/int64 ids, the grouped GEMM for bfloat16/float16 × block sizes 16/32/64/128 ×
// routing weights absent/float32/bfloat16/float16 (and the other NBX_MOE_GEMM_TILE tiles), compiled with nvcc for sm_90 (no GPU needed; run
// after `npx tsc`). `--verbose` prints ptxas's registers, spills and shared memory per kernel.
//   node scripts/moe-compile.mjs [--verbose]
import { spawnSync } from 'node:child_process';
import { writeFileSync, mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { compileAll, checkSignature } from '../test/gen/cuda_compile_util.mjs';
import { CUDA_PRELUDE } from '../dist/src/ir/render_c.js';
import { moeAlignSource, groupedGemmSource, gemmTile, GEMM_BLOCK_SIZES } from '../dist/src/backend/cuda/kernels/moe.js';

const specs = [];
for (const it of ['int32', 'int64']) specs.push({ label: `moe_align ${it}`, ...moeAlignSource(it) });
for (const d of ['bfloat16', 'float16']) for (const bm of GEMM_BLOCK_SIZES) for (const rd of [null, 'float32', 'bfloat16', 'float16']) {
  specs.push({ label: `grouped_expert_gemm ${d} BM${bm} routing ${rd}`, ...groupedGemmSource(d, gemmTile(bm, ''), rd) });
}
// the other tiles NBX_MOE_GEMM_TILE offers (bn,bk,stages)
for (const bm of GEMM_BLOCK_SIZES) for (const spec of ['256,32,4', '128,64,3', '256,64,3', '128,32,3', '128,32,5']) {
  specs.push({ label: `grouped_expert_gemm bfloat16 BM${bm} tile ${spec} routing float32`, ...groupedGemmSource('bfloat16', gemmTile(bm, spec), 'float32') });
}
await compileAll('moe', specs, 8);
if (process.argv.includes('--verbose')) {
  const dir = mkdtempSync(join(tmpdir(), 'nbx_moe_v_'));
  for (const s of specs.filter((s) => !s.label.includes('routing bfloat16') && !s.label.includes('routing float16'))) {
    checkSignature(s);
    const f = join(dir, 'k.cu');
    writeFileSync(f, `${CUDA_PRELUDE}\n${s.src}`);
    const r = spawnSync('nvcc', ['-arch=sm_90', '-cubin', '--std=c++17', '-w', '-Xptxas', '-v', '-o', join(dir, 'k.cubin'), f], { encoding: 'utf8' });
    const info = (r.stderr + r.stdout).split('\n').filter((l) => /registers|spill/.test(l)).map((l) => l.replace(/^ptxas info\s*:\s*/, '').trim());
    console.log(`${s.label}: ${info.join(' | ')}`);
  }
}
