// Every specialization of the CUDA mixture-of-experts kernels (src/backend/cuda/kernels/moe.ts):
// moe_align for int32/int64 ids, the grouped GEMM for bfloat16/float16 × block sizes 16/32/64/128 ×
// routing weights absent/float32/bfloat16/float16 (and the other NBX_MOE_GEMM_TILE tiles), compiled with nvcc for sm_90 (no GPU needed; run
// after `npx tsc`), and the Hopper kernel (block sizes 64/128 × its tiles × routing) for sm_90a. `--verbose` prints ptxas's registers, spills and shared memory per kernel.
//   node scripts/moe-compile.mjs [--verbose]
import { spawnSync } from 'node:child_process';
import { writeFileSync, mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { compileAll, checkSignature } from '../test/gen/cuda_compile_util.mjs';
import { CUDA_PRELUDE } from '../dist/src/ir/render_c.js';
import { moeAlignSource, groupedGemmSource, gemmTile, GEMM_BLOCK_SIZES, groupedGemm90Source, gemm90Tile, GEMM90_BLOCK_SIZES } from '../dist/src/backend/cuda/kernels/moe.js';

const specs = [];
for (const it of ['int32', 'int64']) specs.push({ label: `moe_align ${it}`, ...moeAlignSource(it) });
for (const d of ['bfloat16', 'float16']) for (const bm of GEMM_BLOCK_SIZES) for (const rd of [null, 'float32', 'bfloat16', 'float16']) {
  specs.push({ label: `grouped_expert_gemm ${d} BM${bm} routing ${rd}`, ...groupedGemmSource(d, gemmTile(bm, ''), rd) });
}
// the other tiles NBX_MOE_GEMM_TILE offers (bn,bk,stages)
for (const bm of GEMM_BLOCK_SIZES) for (const spec of ['256,32,4', '128,64,3', '256,64,3', '128,32,3', '128,32,5']) {
  specs.push({ label: `grouped_expert_gemm bfloat16 BM${bm} tile ${spec} routing float32`, ...groupedGemmSource('bfloat16', gemmTile(bm, spec), 'float32') });
}
const sm90 = [];
for (const d of ['bfloat16', 'float16']) for (const bs of GEMM90_BLOCK_SIZES) for (const rd of [null, 'float32', 'bfloat16', 'float16']) {
  sm90.push({ label: `grouped_expert_gemm90 ${d} BS${bs} routing ${rd}`, ...groupedGemm90Source(d, gemm90Tile(bs, ''), rd) });
}
for (const [bs, spec] of [[128, '128,128,4'], [128, '128,256,3'], [128, '64,256,4'], [64, '64,128,5'], [64, '64,256,5'], [64, '64,256,3'], [128, '128,256,4,ws'], [128, '128,256,3,ws'], [64, '64,256,4,ws'], [64, '64,256,5,ws'], [128, '128,128,5,ws']]) {
  const k = groupedGemm90Source('bfloat16', gemm90Tile(bs, spec), 'float32');
  // the warp-specialized kernel's last parameter is the descriptor's struct (16 words of the launcher's signature)
  sm90.push({ label: `grouped_expert_gemm90 bfloat16 BS${bs} tile ${spec} routing float32`, ...k, sig: spec.endsWith('ws') ? [...k.sig.slice(0, -16), '?__grid_constant__ TMap'] : k.sig });
}
if (!process.argv.includes('--sm90-only')) await compileAll('moe', specs, 8);
await compileAll('moe_sm90', sm90, 4, 'sm_90a');
if (process.argv.includes('--verbose')) {
  const dir = mkdtempSync(join(tmpdir(), 'nbx_moe_v_'));
  const all = [...(process.argv.includes('--sm90-only') ? [] : specs), ...sm90.map((s) => ({ ...s, arch: 'sm_90a' }))];
  for (const s of all.filter((s) => !s.label.includes('routing bfloat16') && !s.label.includes('routing float16'))) {
    checkSignature(s);
    const f = join(dir, 'k.cu');
    writeFileSync(f, `${CUDA_PRELUDE}\n${s.src}`);
    const r = spawnSync('nvcc', [`-arch=${s.arch ?? 'sm_90'}`, '-cubin', '--std=c++17', '-w', '-Xptxas', '-v', '-o', join(dir, 'k.cubin'), f], { encoding: 'utf8' });
    const info = (r.stderr + r.stdout).split('\n').filter((l) => /registers|spill|serializ|error/.test(l)).map((l) => l.replace(/^ptxas info\s*:\s*/, '').trim());
    console.log(`${s.label}: ${info.join(' | ')}`);
  }
}
