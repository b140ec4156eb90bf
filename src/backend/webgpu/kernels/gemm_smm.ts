// GEMM on subgroup matrices (tensor cores through Dawn's `chromium-experimental-subgroup-matrix`):
// used when the device has the feature and the adapter reports a configuration for the operands'
// component type (f32, or f16 when the device also has shader-f16), preferring an f32 result.
//
// A workgroup of 4 subgroups computes a BM×BN tile of C, each subgroup a (BM/2)×(BN/2) quarter as
// TM×TN result matrices of the config's M×N. Each BK-deep step stages A (BM×BK) and B (BK×BN) into
// workgroup memory as the component type, zero-padded at the edges and transposed as needed, so the
// subgroup matrices always load row-major from workgroup memory; any shape, offset, transposition
// and leading dimension works. At the end the results go through workgroup memory once more, and every
// invocation writes its share of C with alpha/beta, the bounds check and the output dtype's rounding.
//
// Nothing here runs unless `validate` (at device start) compiled the kernel without error: a driver
// or Dawn that refuses it leaves the tiled f32 kernel in charge. Opt-in (NBX_WEBGPU_SUBGROUP_MATRIX=1,
// which also allows Dawn's unsafe APIs, where the feature lives) until verified on a card.

import type { DTypeName } from '../../../dtype/dtypes.js';
import { WGSL as R, perWord, wgslPrelude } from '../../../ir/render_wgsl.js';
import type { Program, WebGPUBackend } from '../runtime/backend.js';
import { U } from '../runtime/elementwise.js';
import { env, type SubgroupMatrixConfig } from '../runtime/gpu.js';

export interface SmmPlan {
  cfg: SubgroupMatrixConfig;
  /** WGSL component and result types. */
  ct: 'f32' | 'f16';
  rt: 'f32' | 'f16';
  sg: number;
  TM: number; TN: number; BK: number;
}

/** Per operand dtype, the plan this device can run (validated at start-up), if any. */
const plans = new Map<DTypeName, SmmPlan>();
export const smmStatus: { enabled: boolean; reason: string; plans: Record<string, string> } = { enabled: false, reason: 'not checked', plans: {} };

/** The configuration for operands of `d` among the adapter's, preferring an f32 result and the largest tile. */
function choose(be: WebGPUBackend, d: DTypeName): SmmPlan | null {
  const f16 = be.device.features.has('shader-f16');
  const want = d === 'float32' ? 'f32' : d === 'float16' && f16 ? 'f16' : null;
  if (!want) return null;
  const sg = Number(be.info.identity.subgroupMaxSize ?? 32);
  const ok = be.info.subgroupMatrixConfigs.filter((c) => c.componentType === want && (c.resultComponentType === 'f32' || c.resultComponentType === 'f16'));
  ok.sort((a, b) => (Number(b.resultComponentType === 'f32') - Number(a.resultComponentType === 'f32')) || (b.M * b.N * b.K - a.M * a.N * a.K));
  const cfg = ok[0];
  if (!cfg) return null;
  // a subgroup's quarter of the tile: about 32x32 (at least one matrix each way)
  const TM = Math.max(1, Math.floor(32 / cfg.M)), TN = Math.max(1, Math.floor(32 / cfg.N));
  const BK = Math.max(cfg.K, Math.ceil(32 / cfg.K) * cfg.K);
  return { cfg, ct: want, rt: cfg.resultComponentType as 'f32' | 'f16', sg, TM, TN, BK };
}

/** uniform: [m, n, k, lda, ldb, ldc, aoff, boff, coff, sA, sB, sC, alpha, beta, batch0] (as the tiled kernel). */
export function smmSource(d: DTypeName, transA: boolean, transB: boolean, p: SmmPlan, bindA: number, bindB: number, access: string): string {
  const { cfg, ct, rt, sg, TM, TN, BK } = p;
  const { M, N, K } = cfg;
  const WM = TM * M, WN = TN * N, BM = 2 * WM, BN = 2 * WN, T = 4 * sg;
  const ld = (b: number, idx: string): string => R.load(d, `b${b}`, idx);
  const left = `subgroup_matrix_left<${ct}, ${K}, ${M}>`, right = `subgroup_matrix_right<${ct}, ${N}, ${K}>`, result = `subgroup_matrix_result<${rt}, ${N}, ${M}>`;
  const accs: string[] = [];
  for (let i = 0; i < TM; i++) for (let j = 0; j < TN; j++) accs.push(`var acc${i}_${j} = ${result}();`);
  const step: string[] = [];
  for (let i = 0; i < TM; i++) step.push(`let l${i} = subgroupMatrixLoad<${left}, row_major>(&As, (wm + ${i * M}u) * BK + kk, BK);`);
  for (let j = 0; j < TN; j++) step.push(`let r${j} = subgroupMatrixLoad<${right}, row_major>(&Bs, kk * BN + wn + ${j * N}u, BN);`);
  for (let i = 0; i < TM; i++) for (let j = 0; j < TN; j++) step.push(`acc${i}_${j} = subgroupMatrixMultiplyAccumulate(l${i}, r${j}, acc${i}_${j});`);
  const stores: string[] = [];
  for (let i = 0; i < TM; i++) for (let j = 0; j < TN; j++) stores.push(`subgroupMatrixStore<row_major>(&Cs, (wm + ${i * M}u) * BN + wn + ${j * N}u, acc${i}_${j}, BN);`);
  // staging: consecutive invocations walk the operand's contiguous direction
  const aIdx = transA ? 'let i = e % BM; let p = e / BM;' : 'let p = e % BK; let i = e / BK;';
  const aAddr = transA ? 'aoff + (k0 + p) * lda + row0 + i' : 'aoff + (row0 + i) * lda + k0 + p';
  const bIdx = transB ? 'let p = e % BK; let j = e / BK;' : 'let j = e % BN; let p = e / BN;';
  const bAddr = transB ? 'boff + (col0 + j) * ldb + k0 + p' : 'boff + (k0 + p) * ldb + col0 + j';
  const cLoad = perWord(d) > 1 ? R.load(d, 'nbx_c', 'ci').replace(/nbx_c\[([^\]]*)\]/g, 'atomicLoad(&b1[$1])') : R.load(d, 'b1', 'ci');
  const storeC = perWord(d) > 1 ? R.storeShared(d, 'b1', 'ci', R.bits(d, R.castExpr('float32', d, 'val'))) : `b1[ci] = ${R.bits(d, R.castExpr('float32', d, 'val'))};`;
  const header = [`struct Params { w: array<vec4<u32>, 4> }`, '@group(0) @binding(0) var<uniform> u: Params;'];
  for (let i = 0; i < access.length; i++) {
    const a = access[i]!;
    header.push(`@group(0) @binding(${i + 1}) var<storage, ${a === 'r' ? 'read' : 'read_write'}> b${i + 1}: array<${a === 'a' ? 'atomic<u32>' : 'u32'}>;`);
  }
  const main = `const BM = ${BM}u; const BN = ${BN}u; const BK = ${BK}u;
var<workgroup> As: array<${ct}, ${BM * BK}>;
var<workgroup> Bs: array<${ct}, ${BK * BN}>;
var<workgroup> Cs: array<${rt}, ${BM * BN}>;
@compute @workgroup_size(${T})
fn main(@builtin(workgroup_id) wid: vec3u, @builtin(local_invocation_index) lid: u32, @builtin(subgroup_id) sgid: u32) {
  let m = ${U(0)}; let n = ${U(1)}; let k = ${U(2)}; let lda = ${U(3)}; let ldb = ${U(4)}; let ldc = ${U(5)};
  let z = wid.z + ${U(14)};
  let aoff = ${U(6)} + z * ${U(9)}; let boff = ${U(7)} + z * ${U(10)}; let coff = ${U(8)} + z * ${U(11)};
  let alpha = bitcast<f32>(${U(12)}); let beta = bitcast<f32>(${U(13)});
  let row0 = wid.y * BM; let col0 = wid.x * BN;
  let wm = (sgid / 2u) * ${WM}u; let wn = (sgid % 2u) * ${WN}u;
  ${accs.join('\n  ')}
  for (var k0 = 0u; k0 < k; k0 += BK) {
    for (var e = lid; e < BM * BK; e += ${T}u) {
      ${aIdx}
      var v = 0.0f;
      if (row0 + i < m && k0 + p < k) { v = ${ld(bindA, aAddr)}; }
      As[i * BK + p] = ${ct}(v);
    }
    for (var e = lid; e < BK * BN; e += ${T}u) {
      ${bIdx}
      var v = 0.0f;
      if (col0 + j < n && k0 + p < k) { v = ${ld(bindB, bAddr)}; }
      Bs[p * BN + j] = ${ct}(v);
    }
    workgroupBarrier();
    for (var kk = 0u; kk < BK; kk += ${K}u) {
      ${step.join('\n      ')}
    }
    workgroupBarrier();
  }
  ${stores.join('\n  ')}
  workgroupBarrier();
  for (var e = lid; e < BM * BN; e += ${T}u) {
    let r = row0 + e / BN; let cc = col0 + e % BN;
    if (r < m && cc < n) {
      let ci = coff + r * ldc + cc;
      var val = alpha * f32(Cs[e]);
      if (beta != 0.0f) { val += beta * ${cLoad}; }
      ${storeC}
    }
  }
}`;
  const enables = ['enable chromium_experimental_subgroup_matrix;', 'enable subgroups;', ...(ct === 'f16' || rt === 'f16' ? ['enable f16;'] : []),
    'diagnostic(off, chromium_experimental.subgroup_matrix_uniformity);'];
  return `${enables.join('\n')}\n${header.join('\n')}\n${wgslPrelude(main)}\n${main}\n`;
}

const programs = new Map<string, Program>();

/** The subgroup-matrix program for these operands, or null when this device has no validated plan. */
export function smmProgram(d: DTypeName, transA: boolean, transB: boolean, bindA: number, bindB: number): { prog: Program; BM: number; BN: number } | null {
  const p = smmStatus.enabled ? plans.get(d) : undefined;
  if (!p) return null;
  const access = `${perWord(d) > 1 ? 'a' : 'w'}${'r'.repeat(Math.max(bindA, bindB) - 1)}`;
  const key = `smm|${d}|${transA}|${transB}|${p.cfg.M}x${p.cfg.N}x${p.cfg.K}|${p.ct}>${p.rt}|${p.TM}x${p.TN}x${p.BK}|${bindA}${bindB}`;
  let prog = programs.get(key);
  if (!prog) {
    prog = { key, access, words: 15, source: () => smmSource(d, transA, transB, p, bindA, bindB, access) };
    programs.set(key, prog);
  }
  return { prog, BM: 2 * p.TM * p.cfg.M, BN: 2 * p.TN * p.cfg.N };
}

/**
 * Turns the validated subgroup-matrix plans on or off for later GEMMs (benchmarks measure both
 * paths in one process); returns whether they were on. Without validated plans it stays off.
 */
export function useSubgroupMatrix(on: boolean): boolean {
  const was = smmStatus.enabled;
  smmStatus.enabled = on && plans.size > 0;
  return was;
}

/** Whether a validated subgroup-matrix plan exists for operands of `d`. */
export function hasSmmPlan(d: DTypeName): boolean { return plans.has(d); }

/**
 * At device start: for each operand dtype with a matching configuration, compiles the kernel (all four
 * transpositions) and keeps the plan only if every pipeline builds without error.
 */
export async function validateSmm(be: WebGPUBackend): Promise<void> {
  plans.clear();
  smmStatus.enabled = false;
  smmStatus.plans = {};
  if (env('NBX_WEBGPU_SUBGROUP_MATRIX') !== '1') { smmStatus.reason = 'off (opt in with NBX_WEBGPU_SUBGROUP_MATRIX=1)'; return; }
  if (!be.device.features.has('chromium-experimental-subgroup-matrix' as GPUFeatureName)) {
    smmStatus.reason = be.info.adapterFeatures.includes('chromium-experimental-subgroup-matrix') ? 'offered by the adapter but not granted to the device' : 'the adapter has no subgroup matrices';
    return;
  }
  if (Number(be.info.identity.subgroupMinSize ?? 0) !== Number(be.info.identity.subgroupMaxSize ?? -1)) {
    smmStatus.reason = `varying subgroup size (${be.info.identity.subgroupMinSize}..${be.info.identity.subgroupMaxSize})`;
    return;
  }
  for (const d of ['float32', 'float16'] as const) {
    const p = choose(be, d);
    if (!p) { smmStatus.plans[d] = 'no usable configuration'; continue; }
    const label = `${p.ct}x${p.ct}->${p.rt} ${p.cfg.M}x${p.cfg.N}x${p.cfg.K}, tile ${2 * p.TM * p.cfg.M}x${2 * p.TN * p.cfg.N}x${p.BK}`;
    try {
      for (const [ta, tb] of [[false, false], [false, true], [true, false], [true, true]] as const) {
        const access = `${perWord(d) > 1 ? 'a' : 'w'}rr`;
        const code = smmSource(d, ta, tb, p, 2, 3, access);
        be.device.pushErrorScope('validation');
        let failure = '';
        try {
          const module = be.device.createShaderModule({ code });
          const info = await module.getCompilationInfo();
          failure = info.messages.filter((m) => m.type === 'error').map((m) => `${m.lineNum}:${m.linePos} ${m.message}`).join('; ');
          if (!failure) await be.device.createComputePipelineAsync({ layout: 'auto', compute: { module, entryPoint: 'main' } });
        } catch (e) {
          failure ||= (e as Error).message;
        } finally {
          const e = await be.device.popErrorScope();
          if (e && !failure) failure = e.message;
        }
        if (failure) throw new Error(failure);
      }
      plans.set(d, p);
      smmStatus.plans[d] = label;
    } catch (e) {
      smmStatus.plans[d] = `${label}: refused: ${(e as Error).message.split('\n')[0]!.slice(0, 300)}`;
    }
  }
  smmStatus.enabled = plans.size > 0;
  smmStatus.reason = plans.size ? 'in use' : 'no configuration compiled';
}

