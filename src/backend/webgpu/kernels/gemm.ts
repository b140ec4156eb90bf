// WebGPU's gemm (contract: src/kernels/gemm.ts): a tiled WGSL kernel with float32 accumulation, or
// the subgroup-matrix kernel (gemm_smm.ts) for large products where the adapter has one, or the
// matrix-vector kernel (gemv.ts) for a few rows times a transposed weight. float16/bfloat16 operands are
// read as they are (float32 accumulation, one rounding on store): the `halfInputs` feature, so a
// half-precision linear layer streams its weights at two bytes an element, not widened copies.

import { DTYPES, type DTypeName } from '../../../dtype/dtypes.js';
import type { StridedRef } from '../../backend.js';
import type { BackendKernels } from '../../../kernels/table.js';
import type { GemmParams } from '../../../kernels/gemm.js';
import { WGSL as R, perWord, checkWgslDType } from '../../../ir/render_wgsl.js';
import { DeviceLimitError, UnsupportedError } from '../../../errors.js';
import type { Program, WebGPUBackend, WGBuffer } from '../runtime/backend.js';
import { module, U } from '../runtime/elementwise.js';
import { gemmConfig, registerTuneProblem } from '../tuning/spaces.js';
import { smmProgram, validateSmm } from './gemm_smm.js';
import { gemvRun } from './gemv.js';
import { bindings, f32w, outAccess, program, storeOut } from './util.js';

let be: WebGPUBackend;
export const kernels = {
  gemm: webgpuGemm,
} satisfies BackendKernels;

/** Points this family's kernels at the backend (called once, when the backend starts). */
export function bind(backend: WebGPUBackend): void {
  be = backend;
  backend.initHooks.push(validateSmm);
}

// ---- GEMM ----------------------------------------------------------------------------------------

interface GemmTile { TX: number; TY: number; TM: number; TNV: number; BK: number }

/**
 * C = alpha·op(A)·op(B) + beta·C, row-major. A workgroup of TX×TY threads computes a BM×BN tile
 * (BM = TY·TM rows, BN = TX·4·TNV columns) from BK-deep slices of A and B staged in workgroup memory;
 * each thread keeps TM×(4·TNV) accumulators as vec4s. Batches are the z dimension of the grid.
 * uniform: [m, n, k, lda, ldb, ldc, aoff, boff, coff, sA, sB, sC, alpha, beta, batch0]
 */
function gemmProgram(d: DTypeName, transA: boolean, transB: boolean, t: GemmTile, bindA: number, bindB: number): Program {
  const { TX, TY, TM, TNV, BK } = t;
  const BM = TY * TM, BN = TX * 4 * TNV, T = TX * TY;
  const access = `${outAccess(d)}${'r'.repeat(Math.max(bindA, bindB) - 1)}`;
  const key = `gemm|${d}|${transA}|${transB}|${TX}x${TY}x${TM}x${TNV}x${BK}|${bindA}${bindB}`;
  return program(key, access, 15, () => {
    const ld = (b: number, idx: string): string => R.load(d, `b${b}`, idx);
    const loadsA = (BM * BK) / T, loadsB = (BK * BN) / T;
    // A tile element e: (row i, depth p); consecutive threads walk the contiguous direction
    const aIdx = transA ? 'let i = e % BM; let p = e / BM;' : 'let p = e % BK; let i = e / BK;';
    const aAddr = transA ? 'aoff + (k0 + p) * lda + row0 + i' : 'aoff + (row0 + i) * lda + k0 + p';
    const bIdx = transB ? 'let p = e % BK; let j = e / BK;' : 'let j = e % BN; let p = e / BN;';
    const bAddr = transB ? 'boff + (col0 + j) * ldb + k0 + p' : 'boff + (k0 + p) * ldb + col0 + j';
    const accDecl = [...Array(TM * TNV).keys()].map((q) => `var acc${q} = vec4<f32>(0.0f);`).join(' ');
    // one BK step: TM/4 vec4 reads of A (broadcast across the row of threads), TNV vec4 reads of B
    // A is stored k-major with rows padded by 4 floats: the transposing stores then spread over the banks
    const aReads = [...Array(TM / 4).keys()].map((q) => `let av${q} = As[(p * AP) / 4u + ty * ${TM / 4}u + ${q}u];`).join(' ');
    const bReads = [...Array(TNV).keys()].map((v) => `let bv${v} = Bs[(p * BN) / 4u + ${v * TX}u + tx];`).join(' ');
    const fma: string[] = [];
    for (let i = 0; i < TM; i++) for (let v = 0; v < TNV; v++) fma.push(`acc${i * TNV + v} += av${i >> 2}[${i & 3}] * bv${v};`);
    const stores: string[] = [];
    for (let i = 0; i < TM; i++) {
      for (let v = 0; v < TNV; v++) {
        for (let c = 0; c < 4; c++) {
          stores.push(`{ let r = row0 + ty * ${TM}u + ${i}u; let cc = col0 + ${v * TX * 4}u + tx * 4u + ${c}u;
      if (r < m && cc < n) { let ci = coff + r * ldc + cc; var val = alpha * acc${i * TNV + v}[${c}];
        if (beta != 0.0f) { val += beta * ${perWord(d) > 1 ? R.load(d, 'nbx_c', 'ci').replace(/nbx_c\[([^\]]*)\]/g, 'atomicLoad(&b1[$1])') : ld(1, 'ci')}; }
        ${storeOut(d, 'float32', 'ci', 'val')} } }`);
        }
      }
    }
    const fns = `const BM = ${BM}u; const BN = ${BN}u; const BK = ${BK}u; const AP = ${BM + 4}u;
var<workgroup> As: array<vec4<f32>, ${(BK * (BM + 4)) / 4}>;
var<workgroup> Bs: array<vec4<f32>, ${(BK * BN) / 4}>;`;
    const body = `let m = ${U(0)}; let n = ${U(1)}; let k = ${U(2)}; let lda = ${U(3)}; let ldb = ${U(4)}; let ldc = ${U(5)};
  let z = wid.z + ${U(14)};
  let aoff = ${U(6)} + z * ${U(9)}; let boff = ${U(7)} + z * ${U(10)}; let coff = ${U(8)} + z * ${U(11)};
  let alpha = bitcast<f32>(${U(12)}); let beta = bitcast<f32>(${U(13)});
  let tx = lid % ${TX}u; let ty = lid / ${TX}u;
  let row0 = wid.y * BM; let col0 = wid.x * BN;
  ${accDecl}
  for (var k0 = 0u; k0 < k; k0 += BK) {
    for (var t = 0u; t < ${loadsA}u; t++) {
      let e = lid + t * ${T}u; ${aIdx}
      var v = 0.0f;
      if (row0 + i < m && k0 + p < k) { v = ${ld(bindA, aAddr)}; }
      As[(p * AP + i) / 4u][i % 4u] = v;
    }
    for (var t = 0u; t < ${loadsB}u; t++) {
      let e = lid + t * ${T}u; ${bIdx}
      var v = 0.0f;
      if (col0 + j < n && k0 + p < k) { v = ${ld(bindB, bAddr)}; }
      Bs[(p * BN + j) / 4u][j % 4u] = v;
    }
    workgroupBarrier();
    for (var p = 0u; p < BK; p++) {
      ${aReads}
      ${bReads}
      ${fma.join('\n      ')}
    }
    workgroupBarrier();
  }
  ${stores.join('\n  ')}`;
    // gemm uses a 2-D tile grid plus batches in z: its own entry point
    const entryCode = `@compute @workgroup_size(${T})
fn main(@builtin(workgroup_id) wid: vec3u, @builtin(local_invocation_index) lid: u32) {
  ${body}
}`;
    return module(15, access, T, '', fns, entryCode);
  });
}

/** The tiles of the tiled GEMM by name (BM x BN), the autotuner's knob. */
const GEMM_TILES: Record<string, GemmTile> = {
  '128x128': { TX: 16, TY: 16, TM: 8, TNV: 2, BK: 16 },
  '128x64': { TX: 16, TY: 16, TM: 8, TNV: 1, BK: 16 },
  '64x64': { TX: 16, TY: 16, TM: 4, TNV: 1, BK: 16 },
  '64x32': { TX: 8, TY: 16, TM: 4, TNV: 1, BK: 16 }, // for 128-invocation devices
};

function gemmTile(m: number, n: number, k: number, d: DTypeName): GemmTile {
  const maxT = be.isReady ? Math.min(be.info.limits.maxComputeInvocationsPerWorkgroup ?? 256, 256) : 256;
  const fallback = maxT < 256 ? '64x32' : m >= 512 && n >= 512 ? '128x128' : '64x64';
  return GEMM_TILES[maxT < 256 ? fallback : gemmConfig(be, m, n, k, d, fallback)] ?? GEMM_TILES[fallback]!;
}

// The autotuner's scratch GEMM: C[m, n] = A[m, k] B[k, n] at the bucket's sizes (tiled kernel only).
registerTuneProblem('webgpu.gemm', (b, [m, n, k], d) => {
  const isz = DTYPES[d].itemsize;
  const A = b.allocBytes(m! * k! * isz, true), B = b.allocBytes(k! * n! * isz, true), C = b.allocBytes(m! * n! * isz);
  const ref = (buf: WGBuffer, shape: number[]): StridedRef => ({ buf, dtype: d, shape, strides: [shape[1]!, 1], offset: 0 });
  const prm = { transA: false, transB: false, m: m!, n: n!, k: k!, alpha: 1, beta: 0, a: ref(A, [m!, k!]), lda: k!, b: ref(B, [k!, n!]), ldb: n!, c: ref(C, [m!, n!]), ldc: n! };
  return { run: (cfg) => gemmRun(prm, GEMM_TILES[cfg.tile as string]!), dispose: () => { b.free(A); b.free(B); b.free(C); } };
});

export function webgpuGemm(p: GemmParams): void { gemmRun(p); }

/** The GEMM; `tile` forces the tiled kernel with that tile (the autotuner's candidates). */
function gemmRun(p: GemmParams, tile?: GemmTile): void {
  const d = p.c.dtype;
  if ((d !== 'float32' && d !== 'float16' && d !== 'bfloat16') || p.a.dtype !== d || p.b.dtype !== d) {
    checkWgslDType('matmul', d);
    throw new UnsupportedError('matmul', `webgpu GEMM takes float32, float16 or bfloat16 operands of one dtype, got ${p.a.dtype}, ${p.b.dtype} -> ${d}`);
  }
  const batch = p.batch ?? 1;
  if (batch === 0 || p.m === 0 || p.n === 0) return;
  // a decode step's few rows times a weight: the matrix-vector kernel streams the weight (gemv.ts)
  if (!tile && gemvRun(be, p)) return;
  const { bufs, idx, temp } = bindings(be, p.c.buf as WGBuffer, [p.a.buf as WGBuffer, p.b.buf as WGBuffer]);
  // tensor cores (subgroup matrices) where the device has a validated plan and the product is not tiny
  const smm = !tile && p.m * p.n * p.k >= 1 << 18 ? smmProgram(d, p.transA, p.transB, idx[0]!, idx[1]!) : null;
  const t = smm ? null : tile ?? gemmTile(p.m, p.n, p.k, d);
  const BM = t ? t.TY * t.TM : smm!.BM, BN = t ? t.TX * 4 * t.TNV : smm!.BN;
  const prog = t ? gemmProgram(d, p.transA, p.transB, t, idx[0]!, idx[1]!) : smm!.prog;
  const gx = Math.ceil(p.n / BN), gy = Math.ceil(p.m / BM);
  const maxDim = be.isReady ? be.info.limits.maxComputeWorkgroupsPerDimension ?? 65535 : 65535;
  if (gx > maxDim || gy > maxDim) throw new DeviceLimitError('matmul', `a ${p.m}x${p.n} product needs more than ${maxDim} workgroups along one dimension`);
  for (let z0 = 0; z0 < batch; z0 += maxDim) {
    const u = new Uint32Array(15);
    u.set([p.m, p.n, p.k, p.lda, p.ldb, p.ldc, p.a.offset, p.b.offset, p.c.offset, p.strideA ?? 0, p.strideB ?? 0, p.strideC ?? 0,
      f32w(p.alpha), f32w(p.beta), z0]);
    be.dispatchGroups(prog, bufs, u, gx, gy, Math.min(maxDim, batch - z0));
  }
  if (temp) be.free(temp);
}
