// Fused scaled-dot-product attention on CUDA, registered as the 'attention' kernel (called by
// nn.functional.scaled_dot_product_attention for the cases `fusedAttentionCase` in src/ops/nn.ts admits).
//
// Two kernels, neither materialises the L x S score matrix:
// * prefill (FlashAttention-2 style): float16/bfloat16, head dim 64/128. A block owns BLOCK_M query rows
//   of one (batch, head); each warp 16 rows. K/V tiles of BLOCK_N keys stream through shared memory
//   (cp.async, XOR-swizzled 16-byte chunks, optionally double-buffered); Q·Kᵀ and P·V run on tensor
//   cores through `mma.sync.m16n8k16` (fragments by `ldmatrix`), fp32 accumulators, fp32 online-softmax
//   statistics in base 2 (scale·log2(e) folded into the scores). P is rounded to the input dtype for
//   P·V, as FlashAttention does.
// * decode (flash-decoding, L·rep ≤ a few rows per KV head, S long): float16/bfloat16/float32. Blocks
//   over KV chunks; each group of lanes owns one key at a time (16-byte loads of K and V rows), keeps
//   its own (max, sum, acc) in registers, groups merge in shared memory, then a second small kernel
//   merges the chunks' partials. Query heads sharing a KV head (GQA) share one read of K/V.
// * prefill on Hopper (compute capability 9.0 with the profile's `wgmma` matrix unit): the warp-specialized
//   wgmma kernel of attention_sm90.ts (head dims 64/128/256), a candidate beside this file's kernel; head
//   dim 256 (float16/bfloat16) runs only there, and SDPA learns it from cudaAttention.headDims.
// Masks: bool (true = keep) or additive float, any broadcast strides over (batch, head, L, S); causal
// is top-left aligned (key j visible to row i iff j ≤ i, PyTorch's tril(diagonal=0)). A row that sees
// no key gives 0, as the composed path's safe softmax (PyTorch ≥ 2.5 math/flash behaviour).
//
// Knobs that move bits: impl and BLOCK_N (prefill: where the running max is rescaled) and the decode
// chunk size and thread count (the order partial sums merge). BLOCK_M and stages never change results.
//
// First-run tuning: each candidate is a compile (seconds each through NVRTC), so a problem is offered a
// short list made from its shape (prefill: the default tile, BLOCK_N 128 where the profile's ceiling
// allows, a 64-row tile, and on Hopper the wgmma kernel's tiles for the head dim; decode: every chunk
// size, a launch argument, at two thread counts, i.e. two compiles), never the whole space.

import type { DTypeName } from '../../../dtype/dtypes.js';
import type { StridedRef } from '../../backend.js';
import type { BackendKernels } from '../../../kernels/table.js';
import { R, type CudaBackend, type CudaBuffer } from '../runtime/backend.js';
import type { ArgType } from '../runtime/driver.js';
import { CP_ASYNC_DEVICE, CP_ASYNC_EMU } from './util.js';
import { DeviceFaultError, UnsupportedError } from '../../../errors.js';
import { defineSpace, prune, tuneSync, autotuneMode, bucketSize, median, type Config, type ConfigSpace } from '../../../autotune/index.js';
import { attentionTileCeiling } from '../../../profiles/index.js';
import type { AttentionParams } from '../../../kernels/attention.js';
import { basePtr as ptr } from './util.js';
import { getKernel, loadSourceAsync, type CompileOptions } from '../runtime/nvrtc.js';
import { CUDA_PRELUDE } from '../../../ir/render_c.js';
import { encodeTensorMapTiled, CU_TENSOR_MAP_DATA_TYPE, CU_TENSOR_MAP_SWIZZLE, type CudaKernel } from '../runtime/driver.js';
import { sm90Source, sm90Smem, sm90Ones, sm90Offered, sm90Tag, SM90_GROUPS, type Sm90Group, prefillStoreO, wgmmaHelpers, SM90_BLOCK_M, SM90_THREADS, SM90_HEAD_DIMS, SM90_SOFTMAX, SM90_SOFTMAX_DEFAULT, type Sm90Softmax, type Sm90Config } from './attention_sm90.js';

/** Query rows per KV head at or below which the decode kernel runs (else prefill). */
export const DECODE_MAX_ROWS = 16;
const HEAD_DIMS = [64, 128];

let be: CudaBackend;
export const kernels = {
  attention: cudaAttention,
} satisfies BackendKernels;

/** Points this family's kernels at the backend (called once, when the backend starts). */
export function bind(backend: CudaBackend): void {
  be = backend;
}

const esize = (d: DTypeName): number => (d === 'float32' ? 4 : 2);
type MaskKind = 'none' | 'bool' | DTypeName;

// ---- shared device helpers -----------------------------------------------------------------------

/** Tensor-core and async-copy primitives; under the host emulator (NBX_EMU) scalar versions from emu_rt.h. */
function primitives(bf16: boolean): string {
  const ty = bf16 ? 'bf16' : 'f16';
  return String.raw`
typedef unsigned short u16;
typedef unsigned int u32;
#ifdef NBX_EMU
${CP_ASYNC_EMU}
__device__ __forceinline__ void ldsm4(u32 (&r)[4], const void* p) { emu_ldmatrix_x4(r, p, false); }
__device__ __forceinline__ void ldsm4t(u32 (&r)[4], const void* p) { emu_ldmatrix_x4(r, p, true); }
__device__ __forceinline__ void mma16816(float (&c)[4], const u32 (&a)[4], u32 b0, u32 b1) { emu_mma16816(c, a, b0, b1, ${bf16}); }
__device__ __forceinline__ u32 pack2(float lo, float hi) { return (u32)${bf16 ? 'nbx_f2bf' : 'nbx_f2h'}(lo) | ((u32)${bf16 ? 'nbx_f2bf' : 'nbx_f2h'}(hi) << 16); }
__device__ __forceinline__ float fexp2(float x) { return exp2f(x); }
#else
// 2^x, one MUFU instruction (-inf → 0); arguments are ≤ 0 here
__device__ __forceinline__ float fexp2(float x) { float y; asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x)); return y; }
__device__ __forceinline__ u32 smem_u32(const void* p) { u32 r; asm("{ .reg .u64 a; cvta.to.shared.u64 a, %1; cvt.u32.u64 %0, a; }" : "=r"(r) : "l"(p)); return r; }
${CP_ASYNC_DEVICE}
__device__ __forceinline__ void ldsm4(u32 (&r)[4], const void* p) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];" : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]) : "r"(smem_u32(p)));
}
__device__ __forceinline__ void ldsm4t(u32 (&r)[4], const void* p) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];" : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]) : "r"(smem_u32(p)));
}
// D = A·B + D, A 16x16 (row), B 16x8 (col), fp32 accumulators
__device__ __forceinline__ void mma16816(float (&c)[4], const u32 (&a)[4], u32 b0, u32 b1) {
  asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.${ty}.${ty}.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"
    : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3]) : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}
// two floats → packed pair (lo in the low half), round to nearest even
__device__ __forceinline__ u32 pack2(float lo, float hi) { u32 r; asm("cvt.rn.${ty}x2.f32 %0, %1, %2;" : "=r"(r) : "f"(hi), "f"(lo)); return r; }
#endif
`;
}

/** The mask term for score element (row, col) added to `x` (already in log2 units). */
function maskTerm(mask: MaskKind, x: string, idx: string): string {
  if (mask === 'none') return '';
  if (mask === 'bool') return `if (mb[${idx}] == 0) ${x} = -INFINITY;`;
  return `${x} += (float)${R.load(mask, 'mb', idx)} * 1.4426950408889634f;`;
}

// ---- prefill ---------------------------------------------------------------------------------------

export interface PrefillConfig { impl?: string; blockM: number; blockN: number; stages: number; pingpong?: boolean; persistent?: boolean; deep?: boolean; chain?: boolean; softmax?: Sm90Softmax; edge?: boolean; split?: boolean; ostore?: boolean; group?: Sm90Group }

export const prefillSmem = (D: number, c: PrefillConfig): number => 2 * D * (c.blockM + 2 * c.stages * c.blockN);

export function prefillSource(dt: DTypeName, D: number, c: PrefillConfig, mask: MaskKind): { src: string; name: string; sig: ArgType[] } {
  if (dt !== 'float16' && dt !== 'bfloat16') throw new UnsupportedError('attention', `prefill kernel takes float16/bfloat16, got ${dt}`);
  const { blockM: BM, blockN: BN, stages: ST } = c;
  const NW = BM / 16;
  const MT = mask === 'none' ? 'unsigned char' : R.storageType(mask);
  const src = `${primitives(dt === 'bfloat16')}
constexpr int D_ = ${D};
constexpr int CH = D_ / 8;
// element index of 16-byte chunk c of row r in a [rows][D_] tile: chunks XOR-swizzled by row (ldmatrix without bank conflicts)
__device__ __forceinline__ int swz(int r, int c) { return r * D_ + ((c ^ (r & 7)) << 3); }

extern "C" __global__ void __launch_bounds__(${NW * 32}) attn_fwd(
  const u16* __restrict__ Q, const u16* __restrict__ K, const u16* __restrict__ V, u16* __restrict__ O, const ${MT}* __restrict__ MK,
  long long qo, long long qsb, long long qsh, long long qsl, long long ko, long long ksb, long long ksh, long long ksl,
  long long vo, long long vsb, long long vsh, long long vsl, long long oo, long long osb, long long osh, long long osl,
  long long mo, long long msb, long long msh, long long msl, long long mss,
  int H, int rep, int L, int S, int BH, int ntiles, float sl2, int causal) {
  extern __shared__ __align__(16) u16 smem[];
  u16* sQ = smem;
  u16* sK = smem + ${BM} * D_;
  u16* sV = sK + ${ST * BN} * D_;
  const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31, g = lane >> 2, tg = lane & 3;
  // consecutive blocks: the query tiles of one (batch, head), heaviest (causal: last) first, so the
  // blocks running together share K/V in L2
  const int z = blockIdx.x / ntiles, mt = ntiles - 1 - blockIdx.x % ntiles;
  const int b = z / H, h = z % H, hk = h / rep, m0 = mt * ${BM};
  const u16* qb = Q + qo + b * qsb + h * qsh;
  const u16* kb = K + ko + b * ksb + hk * ksh;
  const u16* vb = V + vo + b * vsb + hk * vsh;
  const ${MT}* mb = MK + mo + b * msb + h * msh;
  for (int c = tid; c < ${BM} * CH; c += ${NW * 32}) {
    const int r = c / CH, ch = c % CH; const bool ok = m0 + r < L;
    cp16(sQ + swz(r, ch), qb + (ok ? (long long)(m0 + r) * qsl : 0LL) + ch * 8, ok);
  }
  const int nEnd = causal ? min(S, m0 + ${BM}) : S;
  const int nt = (nEnd + ${BN - 1}) / ${BN};
  auto loadKV = [&](int t, int st) {
    const int n0 = t * ${BN};
    for (int c = tid; c < ${BN} * CH; c += ${NW * 32}) {
      const int r = c / CH, ch = c % CH; const bool ok = n0 + r < S;
      const long long rr = ok ? (long long)(n0 + r) : 0LL;
      cp16(sK + st * ${BN} * D_ + swz(r, ch), kb + rr * ksl + ch * 8, ok);
      cp16(sV + st * ${BN} * D_ + swz(r, ch), vb + rr * vsl + ch * 8, ok);
    }
  };
  if (nt > 0) loadKV(0, 0);
  cp_commit();
  float oacc[D_ / 8][4];
  #pragma unroll
  for (int i = 0; i < D_ / 8; i++) { oacc[i][0] = 0.f; oacc[i][1] = 0.f; oacc[i][2] = 0.f; oacc[i][3] = 0.f; }
  float mrow[2] = {-INFINITY, -INFINITY}, lrow[2] = {0.f, 0.f};
  u32 qf[D_ / 16][4];
  const int rowA = m0 + warp * 16 + g; // this thread's rows: rowA, rowA + 8
  for (int t = 0; t < nt; t++) {
    const int st = ${ST === 2 ? 't & 1' : '0'};
    ${ST === 2
    ? `if (t + 1 < nt) { loadKV(t + 1, (t + 1) & 1); cp_commit(); cp_wait<1>(); } else cp_wait<0>();`
    : `if (t > 0) { loadKV(t, 0); cp_commit(); } cp_wait<0>();`}
    __syncthreads();
    if (t == 0) {
      #pragma unroll
      for (int kk = 0; kk < D_ / 16; kk++) ldsm4(qf[kk], sQ + swz(warp * 16 + (lane & 7) + ((lane >> 3) & 1) * 8, 2 * kk + (lane >> 4)));
    }
    const u16* sk = sK + st * ${BN} * D_;
    const u16* sv = sV + st * ${BN} * D_;
    const int n0 = t * ${BN};
    float s[${BN / 8}][4];
    #pragma unroll
    for (int j = 0; j < ${BN / 8}; j++) {
      s[j][0] = 0.f; s[j][1] = 0.f; s[j][2] = 0.f; s[j][3] = 0.f;
      #pragma unroll
      for (int kk = 0; kk < D_ / 16; kk += 2) {
        u32 bk[4]; ldsm4(bk, sk + swz(j * 8 + (lane & 7), 2 * kk + (lane >> 3)));
        mma16816(s[j], qf[kk], bk[0], bk[1]);
        mma16816(s[j], qf[kk + 1], bk[2], bk[3]);
      }
    }
    // scale (log2 units), masks
    const bool edge = n0 + ${BN} > S || (causal && n0 + ${BN} - 1 > m0 + warp * 16);
    #pragma unroll
    for (int j = 0; j < ${BN / 8}; j++) {
      #pragma unroll
      for (int e = 0; e < 4; e++) {
        const int row = rowA + (e >> 1) * 8, col = n0 + j * 8 + tg * 2 + (e & 1);
        float x = s[j][e] * sl2;
        ${mask === 'none' ? '' : `if (row < L && col < S) { const long long mi = (long long)row * msl + (long long)col * mss; ${maskTerm(mask, 'x', 'mi')} }`}
        if (edge && (col >= S || (causal && col > row))) x = -INFINITY;
        s[j][e] = x;
      }
    }
    // online softmax over this tile, rows rowA (e = 0,1) and rowA + 8 (e = 2,3); 4 lanes share a row
    #pragma unroll
    for (int r = 0; r < 2; r++) {
      float mx = mrow[r];
      #pragma unroll
      for (int j = 0; j < ${BN / 8}; j++) mx = fmaxf(mx, fmaxf(s[j][2 * r], s[j][2 * r + 1]));
      mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
      mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 2));
      const float mu = mx == -INFINITY ? 0.f : mx;
      const float corr = fexp2(mrow[r] - mu);
      mrow[r] = mx;
      float ls = 0.f;
      #pragma unroll
      for (int j = 0; j < ${BN / 8}; j++) {
        const float p0 = fexp2(s[j][2 * r] - mu), p1 = fexp2(s[j][2 * r + 1] - mu);
        s[j][2 * r] = p0; s[j][2 * r + 1] = p1; ls += p0 + p1;
      }
      lrow[r] = lrow[r] * corr + ls;
      #pragma unroll
      for (int i = 0; i < D_ / 8; i++) { oacc[i][2 * r] *= corr; oacc[i][2 * r + 1] *= corr; }
    }
    // O += P·V: the score accumulators are already in the A-fragment layout
    #pragma unroll
    for (int kk = 0; kk < ${BN / 16}; kk++) {
      const u32 a[4] = { pack2(s[2 * kk][0], s[2 * kk][1]), pack2(s[2 * kk][2], s[2 * kk][3]),
                         pack2(s[2 * kk + 1][0], s[2 * kk + 1][1]), pack2(s[2 * kk + 1][2], s[2 * kk + 1][3]) };
      #pragma unroll
      for (int c = 0; c < D_ / 8; c += 2) {
        u32 bv[4]; ldsm4t(bv, sv + swz(kk * 16 + (lane & 7) + ((lane >> 3) & 1) * 8, c + (lane >> 4)));
        mma16816(oacc[c], a, bv[0], bv[1]);
        mma16816(oacc[c + 1], a, bv[2], bv[3]);
      }
    }
    __syncthreads();
  }
  cp_wait<0>();
${prefillStoreO(D / 8, (c) => `oacc[i][2 * r + ${c}]`)}
}`;
  const sig: ArgType[] = ['ptr', 'ptr', 'ptr', 'ptr', 'ptr', ...Array<ArgType>(21).fill('i64'), 'i32', 'i32', 'i32', 'i32', 'i32', 'i32', 'f32', 'i32'];
  return { src, name: 'attn_fwd', sig };
}

// ---- decode ----------------------------------------------------------------------------------------

export interface DecodeConfig { chunk: number; threads: number }
/** Query rows one decode block holds in registers (more rows: more blocks along grid z). */
export const DECODE_ROWS = 4;
/** Keys a lane group loads before computing (loads in flight). */
const DECODE_UNROLL = 4;

/** Element i (an expression) of a 16-byte vector held as four 32-bit words `w`, as float. */
function elem(dt: DTypeName, w: string, i: string): string {
  if (dt === 'float32') return `__uint_as_float(${w}[${i}])`;
  const half = `((${w}[(${i}) >> 1] >> (((${i}) & 1) * 16)) & 0xffffu)`;
  return dt === 'bfloat16' ? `__uint_as_float(${half} << 16)` : `nbx_h2f((unsigned short)${half})`;
}

/** Rows held per decode block for `rows` query rows per KV head: a power of two up to DECODE_ROWS. */
export const decodeRowBlock = (rows: number): number => Math.min(DECODE_ROWS, 2 ** Math.ceil(Math.log2(Math.max(rows, 1))));

/**
 * The lane kernel's decode: RB rows per block, `threads` threads; xr (the knob reduce = 'scatter', RB ≥ 2): the
 * scores' lane reduction transposed over the rows. Each lane's RB partial dot products are reduce-scattered (at
 * the first log2(RB) xor steps a lane keeps half of its values and adds its partner's other half: RB - 1 shuffles),
 * the one row left per lane finishes with the remaining xor steps, and an all-gather (RB - 1 shuffles) brings
 * the RB scores back to every lane: RB = 4 at 16 lanes per key, 8 shuffles and 5 adds per key and lane instead
 * of 16 and 16. A lane's register slot s holds query row s ^ H(lane) (H: the lane's bits at the scatter steps),
 * so a lane keeps the first half of its slots at every step and no select is needed. Each row's sum is the
 * same addition tree as the butterfly's, so the bits do not change.
 */
export function decodeSource(dt: DTypeName, D: number, threads: number, mask: MaskKind, RB = DECODE_ROWS, xr = false, stream = false): { src: string; name: string; sig: ArgType[] } {
  const T = R.storageType(dt);
  const VEC = 16 / esize(dt), LPK = D / VEC, KPW = 32 / LPK, NG = (threads / 32) * KPW, U = DECODE_UNROLL;
  // (X false: the row-by-row butterflies, the source as before the knob)
  const X = xr && RB >= 2 && LPK >= RB, LRB = Math.log2(RB);
  // scatter steps: xor offset LPK/2 >> k moves row bit RB/2 >> k; H(lane) = the row bits of the lane's set offsets
  const hExpr = X ? Array.from({ length: LRB }, (_, k) => `((li & ${LPK / 2 >> k}) ? ${RB / 2 >> k} : 0)`).join(' | ') : '0';
  const reduce = (): string => {
    const lines: string[] = [];
    let n = RB, o = LPK / 2;
    for (; n > 1; n /= 2, o /= 2) for (let i = 0; i < n / 2; i++) lines.push(`d[${i}] += __shfl_xor_sync(0xffffffffu, d[${i + n / 2}], ${o});`);
    for (; o >= 1; o /= 2) lines.push(`d[0] += __shfl_xor_sync(0xffffffffu, d[0], ${o});`);
    // all-gather: slot i + n from the partner at the scatter step that split slots [0, 2n)
    for (n = 1, o = LPK / RB; n < RB; n *= 2, o *= 2) for (let i = 0; i < n; i++) lines.push(`d[${i + n}] = __shfl_xor_sync(0xffffffffu, d[${i}], ${o});`);
    return lines.join('\n        ');
  };
  const MT = mask === 'none' ? 'unsigned char' : R.storageType(mask);
  const load16 = (dst: string, p: string): string => `{ const uint4 v_ = *(const uint4*)(${p}); ${dst}[0] = v_.x; ${dst}[1] = v_.y; ${dst}[2] = v_.z; ${dst}[3] = v_.w; }`;
  // stream (the knob ld = 'stream'): K and V, read once, through the non-coherent path without allocating in L1 and with
  // L2 fetching 256-byte blocks from memory (ld.global.nc.L1::no_allocate.L2::256B); Q as before. Same values.
  const loadKV = (dst: string, p: string): string => (stream ? `ldkv(${dst}, ${p});` : load16(dst, p));
  const src = `typedef unsigned int u32;${stream ? `
#ifdef NBX_EMU
__device__ __forceinline__ void ldkv(u32 (&w)[4], const void* p) { const uint4 v = *(const uint4*)p; w[0] = v.x; w[1] = v.y; w[2] = v.z; w[3] = v.w; }
#else
__device__ __forceinline__ void ldkv(u32 (&w)[4], const void* p) {
  asm volatile("ld.global.nc.L1::no_allocate.L2::256B.v4.u32 {%0, %1, %2, %3}, [%4];" : "=r"(w[0]), "=r"(w[1]), "=r"(w[2]), "=r"(w[3]) : "l"(p));
}
#endif` : ''}
${decodeMergeFn(dt, D)}
// grid (chunks, KV heads x batch, row groups); block: lane groups of ${LPK} lanes, one key each
extern "C" __global__ void __launch_bounds__(${threads}) attn_dec(
  const ${T}* __restrict__ Q, const ${T}* __restrict__ K, const ${T}* __restrict__ V, ${T}* __restrict__ O, const ${MT}* __restrict__ MK,
  float* __restrict__ pml, float* __restrict__ pacc, int* __restrict__ cnt,
  long long qo, long long qsb, long long qsh, long long qsl, long long ko, long long ksb, long long ksh, long long ksl,
  long long vo, long long vsb, long long vsh, long long vsl, long long oo, long long osb, long long osh, long long osl,
  long long mo, long long msb, long long msh, long long msl, long long mss,
  int HK, int rep, int L, int S, int z0, int chunk, float sl2, int causal) {
  __shared__ float sm_m[${NG}][${RB}], sm_s[${NG}][${RB}];
  const ${MT}* mb = MK;
  __shared__ float sm_acc[${NG}][${RB}][${D}];
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, kg = lane / ${LPK}, li = lane % ${LPK};
  const int grp = warp * ${KPW} + kg;
  const int z = z0 + blockIdx.y, b = z / HK, hk = z % HK, nrows = rep * L, r0 = blockIdx.z * ${RB};
  const int c0 = blockIdx.x * chunk, c1 = min(S, c0 + chunk);
${X ? `  // register slot s holds row s ^ hx of the block's rows (the transposed reduction)
  const int hx = ${hExpr};
` : ''}  float q[${RB}][${VEC}], m[${RB}], s[${RB}], acc[${RB}][${VEC}];
  int lr[${RB}]; long long mrow[${RB}]; bool rok[${RB}];
  #pragma unroll
  for (int r = 0; r < ${RB}; r++) {
    const int rr = r0 + ${X ? '(r ^ hx)' : 'r'}; rok[r] = rr < nrows;
    const int hh = hk * rep + (rok[r] ? rr / L : 0), l = rok[r] ? rr % L : 0;
    lr[r] = l; mrow[r] = mo + b * msb + hh * msh + (long long)l * msl;
    u32 w[4]; ${load16('w', `Q + qo + b * qsb + hh * qsh + (long long)l * qsl + li * ${VEC}`)}
    #pragma unroll
    for (int i = 0; i < ${VEC}; i++) { q[r][i] = ${elem(dt, 'w', 'i')} * sl2; acc[r][i] = 0.f; }
    m[r] = -INFINITY; s[r] = 0.f;
  }
  const ${T}* kb = K + ko + b * ksb + hk * ksh + li * ${VEC};
  const ${T}* vb = V + vo + b * vsb + hk * vsh + li * ${VEC};
  for (int j0 = c0 + warp * ${KPW}; j0 < c1; j0 += ${NG * U}) {
    u32 kw[${U}][4], vw[${U}][4];
    #pragma unroll
    for (int u = 0; u < ${U}; u++) {
      const int j = j0 + u * ${NG} + kg;
      if (j < c1) { ${loadKV('kw[u]', 'kb + (long long)j * ksl')} ${loadKV('vw[u]', 'vb + (long long)j * vsl')} }
      else { kw[u][0] = kw[u][1] = kw[u][2] = kw[u][3] = 0u; vw[u][0] = vw[u][1] = vw[u][2] = vw[u][3] = 0u; }
    }
    // the U keys' scores first, then one online-softmax step for all of them: one rescale (exp2 and VEC
    // multiplies) per U keys instead of per key
    float xs[${U}][${RB}];
    #pragma unroll
    for (int u = 0; u < ${U}; u++) {
      const int j = j0 + u * ${NG} + kg;
      float kf[${VEC}];
      #pragma unroll
      for (int i = 0; i < ${VEC}; i++) kf[i] = ${elem(dt, 'kw[u]', 'i')};
${X ? `      float d[${RB}];
      #pragma unroll
      for (int r = 0; r < ${RB}; r++) {
        d[r] = 0.f;
        #pragma unroll
        for (int i = 0; i < ${VEC}; i++) d[r] += q[r][i] * kf[i];
      }
      ${reduce()}
      #pragma unroll
      for (int r = 0; r < ${RB}; r++) {
        float x = d[r];` : `      #pragma unroll
      for (int r = 0; r < ${RB}; r++) {
        float d = 0.f;
        #pragma unroll
        for (int i = 0; i < ${VEC}; i++) d += q[r][i] * kf[i];
        #pragma unroll
        for (int o = ${LPK / 2}; o > 0; o >>= 1) d += __shfl_xor_sync(0xffffffffu, d, o);
        float x = d;`}
        if (j >= c1 || !rok[r] || (causal && j > lr[r])) x = -INFINITY;
        ${mask === 'none' ? '' : `else { const long long mi = mrow[r] + (long long)j * mss; ${maskTerm(mask, 'x', 'mi')} }`}
        xs[u][r] = x;
      }
    }
    #pragma unroll
    for (int r = 0; r < ${RB}; r++) {
      float mn = m[r];
      #pragma unroll
      for (int u = 0; u < ${U}; u++) mn = fmaxf(mn, xs[u][r]);
      const float mu = mn == -INFINITY ? 0.f : mn;
      const float corr = exp2f(m[r] - mu);
      m[r] = mn; s[r] *= corr;
      #pragma unroll
      for (int i = 0; i < ${VEC}; i++) acc[r][i] *= corr;
      #pragma unroll
      for (int u = 0; u < ${U}; u++) {
        const float p = exp2f(xs[u][r] - mu);
        s[r] += p;
        #pragma unroll
        for (int i = 0; i < ${VEC}; i++) acc[r][i] += p * ${elem(dt, 'vw[u]', 'i')};
      }
    }
  }
  // merge the lane groups of the block (fixed order)
  #pragma unroll
  for (int r = 0; r < ${RB}; r++) {
    if (li == 0) { sm_m[grp][r] = m[r]; sm_s[grp][r] = s[r]; }${X ? ' // (lane 0 of a group: hx = 0)' : ''}
    #pragma unroll
    for (int i = 0; i < ${VEC}; i++) sm_acc[grp][${X ? 'r ^ hx' : 'r'}][li * ${VEC} + i] = acc[r][i];
  }
  __syncthreads();
  const int nch = gridDim.x;
  for (int e = threadIdx.x; e < ${RB * D}; e += ${threads}) {
    const int r = e / ${D}, d = e % ${D}, rr = r0 + r;
    if (rr >= nrows) continue;
    float M = -INFINITY;
    for (int gi = 0; gi < ${NG}; gi++) M = fmaxf(M, sm_m[gi][r]);
    const float mu = M == -INFINITY ? 0.f : M;
    float sum = 0.f, a = 0.f;
    for (int gi = 0; gi < ${NG}; gi++) { const float f = exp2f(sm_m[gi][r] - mu); sum += sm_s[gi][r] * f; a += sm_acc[gi][r][d] * f; }
    if (nch == 1) {
      const int hh = hk * rep + rr / L, l = rr % L;
      ${R.store(dt, 'O', 'oo + b * osb + hh * osh + (long long)l * osl + d', 'sum > 0.f ? a / sum : 0.f')}
    } else {
      const long long pi = ((long long)z * nrows + rr) * nch + blockIdx.x; // partial (z, row, chunk)
      if (d == 0) { pml[2 * pi] = M; pml[2 * pi + 1] = sum; }
      pacc[pi * ${D} + d] = a;
    }
  }
${decodeFusedTail(RB, D, threads)}
}
`;
  const sig: ArgType[] = ['ptr', 'ptr', 'ptr', 'ptr', 'ptr', 'ptr', 'ptr', 'ptr', ...Array<ArgType>(21).fill('i64'), 'i32', 'i32', 'i32', 'i32', 'i32', 'i32', 'f32', 'i32'];
  return { src, name: 'attn_dec', sig };
}
/** Keys per shared-memory tile of the tensor-core decode kernel (16 per warp). */
export const DECODE_MMA_KEYS = 64;
/**
 * Dynamic shared memory of the tensor-core decode kernel: Q (16 rows) and a ring of `stages` K/V tiles (the warps' merge
 * reuses it); tma: 1 KiB of alignment slack (the 128B swizzle), the K/V ring, Q, and an mbarrier per warp and slot.
 */
export const decodeMmaSmem = (D: number, stages = 2, tma = false): number => (tma
  ? 1024 + 2 * D * (2 * stages * DECODE_MMA_KEYS + 16) + 8 * 4 * stages
  : Math.max(2 * D * (16 + 2 * stages * DECODE_MMA_KEYS), 4 * 16 * (D + 2) * 4));

/**
 * The tensor-core decode kernel's build options (diagnostics; the tuner runs the defaults): stages, the K/V ring
 * depth (2; NBX_ATTENTION_DECODE_STAGES); ablate 'nocompute', the tiles' loads and waits without the MMAs and
 * softmax (NBX_ATTENTION_ABLATE=nocompute; wrong results).
 */
export interface DecodeMmaOptions { stages?: number; ablate?: 'nocompute'; warpTiles?: boolean; tma?: boolean }
/** The TMA decode kernel's descriptors (K's and V's, 16 words each) at the end of its parameters. */
export const DECODE_TMA_WORDS = 32;

/**
 * Decode on tensor cores (float16/bfloat16, ≤ 16 query rows per KV head): the rows of a KV group (GQA's query
 * heads, or a short prompt's positions) are one m16 tile, so each key costs a few mma.sync per warp instead
 * of a dot product and a shuffle reduction per row on the CUDA cores (which bound the lane kernel once a
 * KV head serves 4+ rows). Grid and partials as attn_dec: blocks over KV chunks, (m, l, acc) per chunk
 * merged by attn_dec_reduce. A block's 4 warps take 16 keys each of every 64-key tile (cp.async, double
 * buffered), each with its own online softmax; they merge in shared memory in warp order. P is rounded to
 * the input dtype for P·V, as in prefill.
 * warpTiles (the knob tiles = 'warp'): each warp loads the 16 keys of every tile it consumes itself and waits
 * for its own cp.async groups alone (__syncwarp), so no block barrier per tile: the warps stream independently
 * and a slow warp's tile holds back no other warp's loads. One block barrier for Q (tile 0), one before the
 * merge. Same shared memory, same arithmetic (same bits).
 * tma (the knob tiles = 'tma', sm_90): per-warp tiles loaded by the tensor memory accelerator: lane 0 of each warp
 * issues its 16 keys' K and V boxes (64 columns x 16 rows, 128B swizzle; 4 instructions at D128 instead of 16
 * cp.async per lane) completing on the warp's mbarrier of the slot (transaction bytes); the lanes wait on its
 * phase. No cp.async and no block barrier in the loop. Keys past S arrive as zeros; keys past the chunk's end are
 * masked as before. K and V come in by descriptor (DECODE_TMA_WORDS words at the end), so the arguments K, V and
 * their strides are unused. Same arithmetic (same bits).
 */
export function decodeMmaSource(dt: DTypeName, D: number, mask: MaskKind, opts: DecodeMmaOptions = {}): { src: string; name: string; sig: ArgType[] } {
  const { stages = 2, ablate, tma = false } = opts;
  const warpTiles = opts.warpTiles || tma;
  if (dt !== 'float16' && dt !== 'bfloat16') throw new UnsupportedError('attention', `the tensor-core decode kernel takes float16/bfloat16, got ${dt}`);
  const T = R.storageType(dt), NK = DECODE_MMA_KEYS, bf = dt === 'bfloat16';
  const MT = mask === 'none' ? 'unsigned char' : R.storageType(mask);
  // a K/V fragment's shared address: row (of the warp's 16 keys), 16-byte chunk
  const kvAt = (base: string, row: string, ch: string): string => (tma ? `(const u16*)(${base} + tofs(${row}, ${ch}))` : `${base} + swz(warp * 16 + ${row}, ${ch})`);
  const prelude = tma ? `${wgmmaHelpers(bf, [])}
#ifdef NBX_EMU
__device__ __forceinline__ void ldsm4(u32 (&r)[4], const void* p) { emu_ldmatrix_x4(r, p, false); }
__device__ __forceinline__ void ldsm4t(u32 (&r)[4], const void* p) { emu_ldmatrix_x4(r, p, true); }
__device__ __forceinline__ void mma16816(float (&c)[4], const u32 (&a)[4], u32 b0, u32 b1) { emu_mma16816(c, a, b0, b1, ${bf}); }
#else
__device__ __forceinline__ void ldsm4(u32 (&r)[4], const void* p) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];" : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]) : "r"(smem_u32(p)));
}
__device__ __forceinline__ void ldsm4t(u32 (&r)[4], const void* p) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];" : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]) : "r"(smem_u32(p)));
}
__device__ __forceinline__ void mma16816(float (&c)[4], const u32 (&a)[4], u32 b0, u32 b1) {
  asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.${bf ? 'bf16' : 'f16'}.${bf ? 'bf16' : 'f16'}.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"
    : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3]) : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}
#endif
#if !defined(__grid_constant__) && !defined(NBX_EMU)
#define __grid_constant__ __attribute__((grid_constant))
#endif
#ifdef NBX_EMU
#define __grid_constant__
#endif
// K's and V's TMA descriptors (CUtensorMap: 128 bytes, 64-aligned), dims {D, S, KV heads, batch}, box 64 x 16
// (the emulator: no over-alignment, as it copies the parameter from an 8-byte slot)
#ifdef NBX_EMU
struct DMaps { u64 k[16]; u64 v[16]; };
#else
struct alignas(64) DMaps { u64 k[16]; u64 v[16]; };
#endif
// byte offset of chunk ch of row r in a [D_/64][16][64] tile, 128B-swizzled (tile base 1024-aligned)
__device__ __forceinline__ u32 tofs(int r, int ch) { return (u32)((ch >> 3) * 2048 + r * 128 + (((ch & 7) ^ (r & 7)) << 4)); }` : primitives(bf);
  const src = `${prelude}
constexpr int D_ = ${D};
constexpr int CH = D_ / 8;
// element index of 16-byte chunk c of row r in a [rows][D_] tile: chunks XOR-swizzled by row (ldmatrix without bank conflicts)
__device__ __forceinline__ int swz(int r, int c) { return r * D_ + ((c ^ (r & 7)) << 3); }

${decodeMergeFn(dt, D)}
extern "C" __global__ void __launch_bounds__(128) attn_dec_mma(
  const u16* __restrict__ Q, const u16* __restrict__ K, const u16* __restrict__ V, ${T}* __restrict__ O, const ${MT}* __restrict__ MK,
  float* __restrict__ pml, float* __restrict__ pacc, int* __restrict__ cnt,
  long long qo, long long qsb, long long qsh, long long qsl, long long ko, long long ksb, long long ksh, long long ksl,
  long long vo, long long vsb, long long vsh, long long vsl, long long oo, long long osb, long long osh, long long osl,
  long long mo, long long msb, long long msh, long long msl, long long mss,
  int HK, int rep, int L, int S, int z0, int chunk, float sl2, int causal${tma ? ', const __grid_constant__ DMaps tm' : ''}) {
${tma ? `  extern __shared__ __align__(1024) unsigned char smraw[];
  unsigned char* sm = smraw + ((1024 - (smem_u32(smraw) & 1023)) & 1023);
  u16* smem = (u16*)sm;                                      // (the warps' merge)
  unsigned char* sKb = sm;                                   // [4 warps][${stages}][D_/64][16][64]
  unsigned char* sVb = sm + ${4 * stages * 32} * D_;
  u16* sQ = (u16*)(sVb + ${4 * stages * 32} * D_);           // [16][D_]
  const u32 bars = smem_u32(sQ + 16 * D_);                   // [4 warps][${stages}]: the slot's tile landed` : `  extern __shared__ __align__(16) u16 smem[];
  u16* sQ = smem;               // [16][D_]
  u16* sK = smem + 16 * D_;     // ${stages} x [${NK}][D_]
  u16* sV = sK + ${stages * NK} * D_;`}
  const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31, g = lane >> 2, tg = lane & 3;
  const int z = z0 + blockIdx.y, b = z / HK, hk = z % HK, nrows = rep * L;
  const int c0 = blockIdx.x * chunk, c1 = min(S, c0 + chunk);
  // row rr of the tile: query head hk·rep + rr / L, position rr % L; rows past nrows are zeros
  for (int c = tid; c < 16 * CH; c += 128) {
    const int r = c / CH, ch = c % CH; const bool ok = r < nrows;
    const int hh = hk * rep + (ok ? r / L : 0), l = ok ? r % L : 0;
    cp16(sQ + swz(r, ch), Q + qo + b * qsb + hh * qsh + (long long)l * qsl + ch * 8, ok);
  }
  const u16* kb = K + ko + b * ksb + hk * ksh;
  const u16* vb = V + vo + b * vsb + hk * vsh;
  const int nt = c1 > c0 ? (c1 - c0 + ${NK - 1}) / ${NK} : 0;
${tma ? `  (void)kb; (void)vb;
  if (tid == 0) {
    for (int i = 0; i < ${4 * stages}; i++) mbar_init(bars + 8u * i, 1);
    init_fence();
  }
  // this warp's 16 keys of tile t into slot st: lane 0 issues the boxes; the slot's barrier counts their bytes
  auto load = [&](int t, int st) {
    proxy_fence(); // the warp's ldmatrix reads of the slot (generic proxy) before the TMA writes (async proxy)
    const u32 bar = bars + 8u * (warp * ${stages} + st);
    mbar_arrive_tx(bar, ${2 * 16 * 2} * D_);
    const int row = c0 + t * ${NK} + warp * 16;
    #pragma unroll
    for (int j = 0; j < D_ / 64; j++) {
      tma_load4(smem_u32(sKb + (warp * ${stages} + st) * 32 * D_ + j * 2048), &tm.k, j * 64, row, hk, b, bar);
      tma_load4(smem_u32(sVb + (warp * ${stages} + st) * 32 * D_ + j * 2048), &tm.v, j * 64, row, hk, b, bar);
    }
  };
  cp_wait_all();
  __syncthreads(); // Q landed, barriers initialised
  if (lane == 0) {
    #pragma unroll
    for (int i = 0; i < ${stages - 1}; i++) if (i < nt) load(i, i);
  }` : `  auto load = [&](int t, int st) {
    const int n0 = c0 + t * ${NK};
${warpTiles ? `    // this warp's 16 rows of the tile
    #pragma unroll
    for (int c = lane; c < 16 * CH; c += 32) {
      const int r = warp * 16 + c / CH, ch = c % CH; const bool ok = n0 + r < c1;` : `    for (int c = tid; c < ${NK} * CH; c += 128) {
      const int r = c / CH, ch = c % CH; const bool ok = n0 + r < c1;`}
      const long long rr = ok ? (long long)(n0 + r) : 0LL;
      cp16(sK + st * ${NK} * D_ + swz(r, ch), kb + rr * ksl + ch * 8, ok);
      cp16(sV + st * ${NK} * D_ + swz(r, ch), vb + rr * vsl + ch * 8, ok);
    }
  };
  // tiles 0 .. ${stages - 2} ahead (Q with the first); one commit group per tile, empty past the chunk's end
  #pragma unroll
  for (int i = 0; i < ${stages - 1}; i++) { if (i < nt) load(i, i); cp_commit(); }`}
  int lr[2]; long long mrow[2]; bool rok[2];
  #pragma unroll
  for (int r = 0; r < 2; r++) {
    const int rr = g + 8 * r; rok[r] = rr < nrows;
    const int hh = hk * rep + (rok[r] ? rr / L : 0), l = rok[r] ? rr % L : 0;
    lr[r] = l; mrow[r] = mo + b * msb + hh * msh + (long long)l * msl;
  }
  const ${MT}* mb = MK;
  float oacc[D_ / 8][4];
  #pragma unroll
  for (int i = 0; i < D_ / 8; i++) { oacc[i][0] = 0.f; oacc[i][1] = 0.f; oacc[i][2] = 0.f; oacc[i][3] = 0.f; }
  float mrun[2] = {-INFINITY, -INFINITY}, lrun[2] = {0.f, 0.f};
  u32 qf[D_ / 16][4];
  for (int t = 0; t < nt; t++) {
    // tile t + ${stages - 1} into the slot tile t - 1 left (free: every warp passed the loop's closing barrier),
    // then wait for tile t: ${stages} tiles in flight during the wait, ${stages - 1} during the tile's MMAs
    const int st = t % ${stages};
${tma ? `    // (tma: the slot's refill by lane 0 after the warp's __syncwarp that closed tile t - 1; then the slot's phase)
    if (lane == 0 && t + ${stages - 1} < nt) load(t + ${stages - 1}, (t + ${stages - 1}) % ${stages});
    mbar_wait(bars + 8u * (warp * ${stages} + st), (t / ${stages}) & 1, 1, t);` : `    if (t + ${stages - 1} < nt) load(t + ${stages - 1}, (t + ${stages - 1}) % ${stages});
    cp_commit(); cp_wait<${stages - 1}>();
${warpTiles ? `    // the warp's own rows (and, at tile 0, Q from every thread)
    if (t == 0) __syncthreads(); else __syncwarp();` : '    __syncthreads();'}`}
${ablate ? '    // nocompute (diagnostics): the tiles\' loads and waits alone\n' : `    if (t == 0) {
      #pragma unroll
      for (int kk = 0; kk < D_ / 16; kk++) ldsm4(qf[kk], sQ + swz((lane & 7) + ((lane >> 3) & 1) * 8, 2 * kk + (lane >> 4)));
    }
${tma ? `    const unsigned char* sk = sKb + (warp * ${stages} + st) * 32 * D_;
    const unsigned char* sv = sVb + (warp * ${stages} + st) * 32 * D_;` : `    const u16* sk = sK + st * ${NK} * D_;
    const u16* sv = sV + st * ${NK} * D_;`}
    const int n0 = c0 + t * ${NK} + warp * 16; // this warp's 16 keys
    float s[2][4];
    #pragma unroll
    for (int j = 0; j < 2; j++) {
      s[j][0] = 0.f; s[j][1] = 0.f; s[j][2] = 0.f; s[j][3] = 0.f;
      #pragma unroll
      for (int kk = 0; kk < D_ / 16; kk += 2) {
        u32 bk[4]; ldsm4(bk, ${kvAt('sk', 'j * 8 + (lane & 7)', '2 * kk + (lane >> 3)')});
        mma16816(s[j], qf[kk], bk[0], bk[1]);
        mma16816(s[j], qf[kk + 1], bk[2], bk[3]);
      }
    }
    #pragma unroll
    for (int j = 0; j < 2; j++) {
      #pragma unroll
      for (int e = 0; e < 4; e++) {
        const int r = e >> 1, col = n0 + j * 8 + tg * 2 + (e & 1);
        float x = s[j][e] * sl2;
        if (col >= c1 || !rok[r] || (causal && col > lr[r])) x = -INFINITY;
        ${mask === 'none' ? '' : `else { const long long mi = mrow[r] + (long long)col * mss; ${maskTerm(mask, 'x', 'mi')} }`}
        s[j][e] = x;
      }
    }
    // online softmax over the warp's 16 keys, rows g (e = 0,1) and g + 8 (e = 2,3); 4 lanes share a row
    #pragma unroll
    for (int r = 0; r < 2; r++) {
      float mx = fmaxf(mrun[r], fmaxf(fmaxf(s[0][2 * r], s[0][2 * r + 1]), fmaxf(s[1][2 * r], s[1][2 * r + 1])));
      mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
      mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 2));
      const float mu = mx == -INFINITY ? 0.f : mx;
      const float corr = fexp2(mrun[r] - mu);
      mrun[r] = mx;
      float ls = 0.f;
      #pragma unroll
      for (int j = 0; j < 2; j++) {
        const float p0 = fexp2(s[j][2 * r] - mu), p1 = fexp2(s[j][2 * r + 1] - mu);
        s[j][2 * r] = p0; s[j][2 * r + 1] = p1; ls += p0 + p1;
      }
      lrun[r] = lrun[r] * corr + ls;
      #pragma unroll
      for (int i = 0; i < D_ / 8; i++) { oacc[i][2 * r] *= corr; oacc[i][2 * r + 1] *= corr; }
    }
    // O += P·V over the warp's 16 keys (one k16 step; the score accumulators are the A fragment)
    const u32 a[4] = { pack2(s[0][0], s[0][1]), pack2(s[0][2], s[0][3]), pack2(s[1][0], s[1][1]), pack2(s[1][2], s[1][3]) };
    #pragma unroll
    for (int c = 0; c < D_ / 8; c += 2) {
      u32 bv[4]; ldsm4t(bv, ${kvAt('sv', '(lane & 7) + ((lane >> 3) & 1) * 8', 'c + (lane >> 4)')});
      mma16816(oacc[c], a, bv[0], bv[1]);
      mma16816(oacc[c + 1], a, bv[2], bv[3]);
    }
`}    ${warpTiles ? '__syncwarp(); // the warp\'s reads of slot st done before its lanes refill it' : '__syncthreads();'}
  }
  ${tma ? 'cp_wait_all(); // (no copy pending: every tile issued was waited for)' : 'cp_wait<0>();'}
  __syncthreads();
  // merge the 4 warps (fixed order) through shared memory: per warp and row its max, sum and accumulator
  float* wm = (float*)smem;            // [4][16]
  float* wl = wm + 64;                 // [4][16]
  float* wa = wl + 64;                 // [4][16][D_]
  #pragma unroll
  for (int r = 0; r < 2; r++) {
    float l = lrun[r];
    l += __shfl_xor_sync(0xffffffffu, l, 1);
    l += __shfl_xor_sync(0xffffffffu, l, 2);
    const int rr = g + 8 * r;
    if (tg == 0) { wm[warp * 16 + rr] = mrun[r]; wl[warp * 16 + rr] = l; }
    #pragma unroll
    for (int i = 0; i < D_ / 8; i++) { wa[(warp * 16 + rr) * D_ + i * 8 + tg * 2] = oacc[i][2 * r]; wa[(warp * 16 + rr) * D_ + i * 8 + tg * 2 + 1] = oacc[i][2 * r + 1]; }
  }
  __syncthreads();
  const int nch = gridDim.x;
  for (int e = tid; e < 16 * D_; e += 128) {
    const int rr = e / D_, d = e % D_;
    if (rr >= nrows) break;
    float M = -INFINITY;
    #pragma unroll
    for (int w = 0; w < 4; w++) M = fmaxf(M, wm[w * 16 + rr]);
    const float mu = M == -INFINITY ? 0.f : M;
    float sum = 0.f, acc = 0.f;
    #pragma unroll
    for (int w = 0; w < 4; w++) { const float f = exp2f(wm[w * 16 + rr] - mu); sum += wl[w * 16 + rr] * f; acc += wa[(w * 16 + rr) * D_ + d] * f; }
    if (nch == 1) {
      const int hh = hk * rep + rr / L, l = rr % L;
      ${R.store(dt, 'O', 'oo + b * osb + hh * osh + (long long)l * osl + d', 'sum > 0.f ? acc / sum : 0.f')}
    } else {
      const long long pi = ((long long)z * nrows + rr) * nch + blockIdx.x; // partial (z, row, chunk)
      if (d == 0) { pml[2 * pi] = M; pml[2 * pi + 1] = sum; }
      pacc[pi * ${D} + d] = acc;
    }
  }
  const int r0 = 0;
${decodeFusedTail(16, D, 128)}
}
`;
  const sig: ArgType[] = ['ptr', 'ptr', 'ptr', 'ptr', 'ptr', 'ptr', 'ptr', 'ptr', ...Array<ArgType>(21).fill('i64'), 'i32', 'i32', 'i32', 'i32', 'i32', 'i32', 'f32', 'i32',
    ...(tma ? Array<ArgType>(DECODE_TMA_WORDS).fill('u64') : [])];
  return { src, name: 'attn_dec_mma', sig };
}
/**
 * dec_merge: the chunks' partials (pml: max and sum, pacc: unnormalised O) of query row rr of KV group z at
 * head-dim element d merged into O, in chunk order. The reduce kernel and the decode kernels' fused tail (the
 * block that writes a row group's last partial merges it) share it, so both give the same bits. Loads bypass
 * L1 (__ldcg): in the fused tail the partials come from other blocks.
 */
function decodeMergeFn(dt: DTypeName, D: number): string {
  const T = R.storageType(dt);
  return `__device__ __forceinline__ void dec_merge(const float* __restrict__ pml, const float* __restrict__ pacc, ${T}* __restrict__ O,
  long long oo, long long osb, long long osh, long long osl, int HK, int rep, int L, int nch, int z, int rr, int d) {
  const int nrows = rep * L, b = z / HK, hk = z % HK, hh = hk * rep + rr / L, l = rr % L;
  const long long p0 = ((long long)z * nrows + rr) * nch;
  float M = -INFINITY;
  for (int c = 0; c < nch; c++) M = fmaxf(M, __ldcg(pml + 2 * (p0 + c)));
  const float mu = M == -INFINITY ? 0.f : M;
  float sum = 0.f, a = 0.f;
  for (int c = 0; c < nch; c++) { const float f = exp2f(__ldcg(pml + 2 * (p0 + c)) - mu); sum += __ldcg(pml + 2 * (p0 + c) + 1) * f; a += __ldcg(pacc + (p0 + c) * ${D} + d) * f; }
  ${R.store(dt, 'O', 'oo + b * osb + hh * osh + (long long)l * osl + d', 'sum > 0.f ? a / sum : 0.f')}
}`;
}

/**
 * The decode kernels' fused merge (cnt non-null, several chunks): after writing its partials a block counts
 * itself in cnt[z·gridDim.z + blockIdx.z]; the last of the row group's nch blocks resets the counter and
 * merges the group's rows r0 .. r0 + rows - 1 (dec_merge), so no second kernel runs.
 */
function decodeFusedTail(rows: number, D: number, threads: number): string {
  return `  if (nch > 1 && cnt) {
    __shared__ int lastBlk;
    __threadfence(); // this block's partials visible to the block that merges
    __syncthreads();
    if (threadIdx.x == 0) {
      const int ci = z * gridDim.z + blockIdx.z;
      lastBlk = atomicAdd(cnt + ci, 1) == nch - 1;
      if (lastBlk) cnt[ci] = 0; // every block of the group has counted itself: ready for the next launch
    }
    __syncthreads();
    if (lastBlk) {
      __threadfence();
      for (int e = threadIdx.x; e < ${rows * D}; e += ${threads}) {
        const int rr = r0 + e / ${D};
        if (rr < nrows) dec_merge(pml, pacc, O, oo, osb, osh, osl, HK, rep, L, nch, z, rr, e % ${D});
      }
    }
  }`;
}

export function decodeReduceSource(dt: DTypeName, D: number): { src: string; name: string; sig: ArgType[] } {
  const T = R.storageType(dt);
  const src = `${decodeMergeFn(dt, D)}
// merges the chunks' partials of one (z, row): block of D threads
extern "C" __global__ void attn_dec_reduce(const float* __restrict__ pml, const float* __restrict__ pacc, ${T}* __restrict__ O,
  long long oo, long long osb, long long osh, long long osl, int HK, int rep, int L, int nch) {
  const int nrows = rep * L, zr = blockIdx.x;
  dec_merge(pml, pacc, O, oo, osb, osh, osl, HK, rep, L, nch, zr / nrows, zr % nrows, threadIdx.x);
}`;
  return { src, name: 'attn_dec_reduce', sig: ['ptr', 'ptr', 'ptr', 'i64', 'i64', 'i64', 'i64', 'i32', 'i32', 'i32', 'i32'] };
}

// ---- tuning ------------------------------------------------------------------------------------------

interface AttnProblem { D: number }

/**
 * Prefill: impl 'mma' (this file's mma.sync kernel: BLOCK_M with 16 rows per warp, BLOCK_N, 1 or 2 K/V
 * stages) or 'wgmma' (attention_sm90.ts: BLOCK_M 128 = two consumer warpgroups, BLOCK_N, a ring of
 * 2-4 stages, ping-pong or not); pruned by the profile's attention tile ceiling (mma) and shared memory.
 * v3: the reworked Hopper kernel (asynchronous producer, FlashAttention-3's intra-warpgroup overlap) times
 * differently from v2's, so its tuning results are not reused. v5: knobs chain (chained persistent items) and softmax (tcsum per tile).
 * v6: knob edge (each consumer warpgroup stops at its own rows' causal edge). v7: knobs split (the last round's items split
 * over their keys, attention_sm90.ts) and ostore (O through a staging tile in shared memory). v8: knob group (the
 * persistent kernel's L2 group rule, Sm90Group; a launch choice).
 */
export const PREFILL_SPACE: ConfigSpace<AttnProblem> = defineSpace<AttnProblem>({
  name: 'cuda.attention.v8',
  knobs: [
    { name: 'impl', values: ['mma', 'wgmma'], movesBits: true, doc: 'mma.sync kernel (any card) or the sm_90a warpgroup-MMA kernel' },
    { name: 'blockM', values: [64, 128], movesBits: false, doc: 'query rows per block (mma: 16 per warp; wgmma: 128)' },
    { name: 'blockN', values: [32, 64, 80, 96, 128, 144, 160, 176, 192], movesBits: true, doc: 'keys per K/V tile (where the running max is rescaled)' },
    { name: 'stages', values: [1, 2, 3, 4], movesBits: false, doc: 'K/V tiles in flight (mma: 1 or 2, cp.async double buffering; wgmma: ring slots)' },
    { name: 'pingpong', values: [false, true], movesBits: false, doc: 'wgmma: the two consumer warpgroups take turns issuing their MMAs (named barriers)' },
    { name: 'persistent', values: [false, true], movesBits: false, doc: 'wgmma with TMA: one block per SM walks the (batch·head, query tile) items' },
    { name: 'deep', values: [false, true], movesBits: false, doc: 'wgmma: Q·K(t+1)ᵀ issued with P·V(t-1) before the softmax of tile t (two S tiles live)' },
    { name: 'chain', values: [false, true], movesBits: false, doc: 'wgmma persistent: one loop over the tiles of all a block\'s items (an item\'s first Q·Kᵀ under the previous one\'s last P·V)' },
    { name: 'softmax', values: ['lazy', 'tcsum'], movesBits: true, doc: 'wgmma: the row sums on the ALUs (lazy) or on the tensor cores (tcsum: V gets a slab of ones)' },
    { name: 'edge', values: [false, true], movesBits: false, doc: 'wgmma, causal: each consumer warpgroup stops at its own rows\' causal edge (the tiles past it released unread)' },
    { name: 'split', values: [false, true], movesBits: true, doc: 'wgmma persistent: the items of a partial last round split over their keys (parts merged by the last block of each item)' },
    { name: 'group', values: [...SM90_GROUPS], movesBits: false, doc: 'wgmma persistent: the L2 groups the items go out in, heaviest first within each (l2: as many batch·heads as fill half the L2, the last group the rest; even: as many groups, equal; wide: up to 90% of the L2, equal)' },
    { name: 'ostore', values: [false, true], movesBits: false, doc: 'wgmma persistent: O through a staging tile in shared memory and 16-byte stores (instead of 4-byte stores from the accumulators)' },
  ],
  defaultConfig: { impl: 'mma', blockM: 128, blockN: 64, stages: 2, pingpong: false, persistent: false, deep: false, chain: false, softmax: 'lazy', edge: false, split: false, ostore: false, group: 'l2' },
  sharedMemoryOptIn: true,
  constraint: (c) => {
    if (c.impl === 'mma') return (c.stages as number) > 2 ? 'the mma kernel keeps 1 or 2 K/V stages' : (c.blockN as number) % 32 !== 0 || (c.blockN as number) > 128 ? 'the mma kernel takes BLOCK_N 32/64/128' : c.pingpong || c.persistent || c.deep || c.chain || c.softmax !== 'lazy' || c.edge || c.split || c.ostore || c.group !== 'l2' ? 'pingpong, persistent, deep, chain, softmax, edge, split, ostore and group are wgmma knobs' : undefined;
    if (c.blockM !== SM90_BLOCK_M) return `the wgmma kernel has BLOCK_M ${SM90_BLOCK_M}`;
    if ((c.blockN as number) < 64 || (c.stages as number) < 2) return 'the wgmma kernel takes BLOCK_N 64-192 and 2-4 stages';
    if (c.deep && c.pingpong) return 'the deep schedule has no ping-pong variant';
    if (c.chain && (!c.persistent || c.deep)) return 'chained items are a persistent build without the deep schedule';
    if (c.edge && (c.pingpong || c.deep || c.chain)) return 'the per-warpgroup causal edge is a build without ping-pong, the deep schedule or chained items';
    if (c.split && (!c.persistent || c.chain || c.deep || c.edge)) return 'split items are a persistent build without chained items, the deep schedule or the edge';
    if (c.ostore && !c.persistent) return 'O through shared memory is a persistent build';
    if (c.group !== 'l2' && !c.persistent) return 'the L2 group rule is the persistent kernel\'s';
    return undefined;
  },
  resources: (c, p) => (c.impl === 'wgmma'
    ? { threads: SM90_THREADS, sharedMemoryBytes: smem90(p.D, c as unknown as PrefillConfig), stages: c.stages as number }
    : { threads: (c.blockM as number) * 2, sharedMemoryBytes: prefillSmem(p.D, c as unknown as PrefillConfig), stages: c.stages as number }),
});

/**
 * Decode: kernel, keys per block (the split-KV chunk), threads per block and where chunks merge. v2: the tensor-core
 * kernel; v3: merge; v4: chunk 0 (fill); v5: knobs tiles (mma: per-warp tiles without block barriers), stages (mma:
 * the K/V ring) and reduce (lanes: the rows' transposed shuffle reduction); v6: ld (lanes: streaming loads of K and V).
 */
export const DECODE_SPACE: ConfigSpace<AttnProblem> = defineSpace<AttnProblem>({
  name: 'cuda.attention_decode.v6',
  knobs: [
    { name: 'impl', values: ['lanes', 'mma'], movesBits: true, doc: 'lane groups on the CUDA cores (any dtype) or the rows of a KV group as one mma.sync tile (float16/bfloat16)' },
    { name: 'chunk', values: [0, 32, 64, 128, 256, 512, 1024, 2048, 4096], movesBits: true, doc: 'keys per block (split-KV chunk; partials merged in chunk order); 0: fill, the multiple of 64 that makes the grid one wave of resident blocks' },
    { name: 'threads', values: [64, 128, 256], movesBits: true, doc: 'threads per block (lane groups merged in a fixed order)' },
    { name: 'merge', values: ['fused', 'kernel'], movesBits: false, doc: 'the chunks\' partials merged by the last block of each row group (one launch) or by a second kernel' },
    { name: 'tiles', values: ['block', 'warp', 'tma'], movesBits: false, doc: 'mma: the K/V tiles loaded by the block (a block barrier per tile), or each warp its own 16 keys of a tile (warp sync only) by cp.async (warp) or by TMA boxes on a per-warp mbarrier (tma, sm_90)' },
    { name: 'stages', values: [2, 3], movesBits: false, doc: 'mma: K/V tiles in the cp.async ring' },
    { name: 'ld', values: ['plain', 'stream'], movesBits: false, doc: 'lanes: K and V by plain 16-byte loads or by ld.global.nc.L1::no_allocate.L2::256B (read once: no L1 allocation, 256-byte L2 fetches)' },
    { name: 'reduce', values: ['rows', 'scatter'], movesBits: false, doc: 'lanes: the scores\' shuffle reduction row by row, or transposed over the rows (reduce-scatter, then all-gather: fewer shuffles at 2-4 rows)' },
  ],
  defaultConfig: { impl: 'lanes', chunk: 1024, threads: 128, merge: 'kernel', tiles: 'block', stages: 2, reduce: 'rows', ld: 'plain' },
  sharedMemoryOptIn: true,
  constraint: (c) => (c.impl === 'mma'
    ? (c.threads !== 128 ? 'the tensor-core decode kernel has 128 threads' : c.reduce !== 'rows' || c.ld !== 'plain' ? 'reduce and ld are lanes knobs' : undefined)
    : (c.tiles !== 'block' || c.stages !== 2 ? 'tiles and stages are mma knobs' : undefined)),
  resources: (c, p) => (c.impl === 'mma'
    ? { threads: 128, sharedMemoryBytes: decodeMmaSmem(p.D, c.stages as number, c.tiles === 'tma') }
    : { threads: c.threads as number, sharedMemoryBytes: decodeSmem(p.D, 'float32', c.threads as number) }),
});
function decodeSmem(D: number, dt: DTypeName, threads: number): number {
  const NG = (threads / 32) * (32 / (D / (16 / esize(dt))));
  return NG * DECODE_ROWS * (D + 2) * 4;
}

/** Launch counts (tests check that the fused kernels ran); prefill90: launches of the wgmma kernel, prefill90tma: of those, with TMA loads. */
export const attentionStats = {
  prefill: 0, decode: 0, prefill90: 0, prefill90tma: 0,
  /** the last prefill launch's kernel and tile, e.g. 'wgmma tma n128s2pP' */ lastPrefill: '',
  /** the last decode launch's kernel, chunk and merge, e.g. 'mma c1024 fused' (one chunk: 'single') */ lastDecode: '',
};

const DECODE_CHUNKS = [32, 64, 128, 256, 512, 1024, 2048, 4096];

/**
 * Decode chunk 0 ('fill'): keys per block, a multiple of 64, such that the groups' blocks are one wave of blocks
 * resident together (the kernel's blocks per SM, from its threads, registers and shared memory, times the SMs):
 * no second, partial wave, and each block's per-chunk cost (its Q, its merge) paid once per resident slot.
 */
function fillChunk(k: CudaKernel, threads: number, smem: number, groups: number, Se: number): number {
  let perSM = residentBlocks.get(k);
  if (perSM === undefined) {
    const info = be.ctx.info, r = k.resources();
    perSM = Math.max(1, Math.min(Math.floor(info.maxThreadsPerSM / threads), Math.floor(info.maxRegsPerSM / (Math.max(r.numRegs, 1) * threads)),
      Math.floor(info.maxSharedMemPerSM / (smem + r.sharedBytes + 1024)), 32));
    residentBlocks.set(k, perSM);
  }
  const nch = Math.max(1, Math.floor((perSM * be.smCount) / groups));
  return Math.min(Math.ceil(Se / nch / 64) * 64, Math.max(Se, 1));
}
/** Blocks of a decode kernel resident per SM (fillChunk; the driver's attributes read once per kernel). */
const residentBlocks = new WeakMap<CudaKernel, number>();

const sm90Kernels = new Map<string, CudaKernel>();
/**
 * The decode kernels' merge counters (one per row group; zero between launches: the merging block resets its
 * own). A larger need takes a new buffer and keeps the old one: a captured CUDA graph may still point at it.
 */
let decCounters: CudaBuffer | undefined, decCountersLen = 0;
function decodeCounters(n: number): bigint {
  if (n > decCountersLen) {
    decCountersLen = Math.max(n, 1 << 14);
    decCounters = be.alloc('int32', decCountersLen, true);
  }
  return decCounters!.ptr;
}
/** The persistent Hopper kernel's work counters (int32 x 2, zero between launches). */
let sm90Queue: CudaBuffer | undefined;
/** The sm_90a kernel's source and compile options (NVRTC target sm_90a: wgmma and setmaxnreg need the arch-specific target). */
function sm90Build(dt: DTypeName, D: number, cfg: PrefillConfig, maskKind: MaskKind, watch: boolean, tma: boolean): { source: string; name: string; sig: ArgType[]; options: CompileOptions } {
  const { src, name, sig } = sm90Source(dt, D, tma ? cfg : { ...cfg, persistent: false, chain: false, split: false, ostore: false }, maskKind, { watch, tma, ablate: ablation(), softmax: softmaxOf(cfg), regs: regsVariant(), early: process.env.NBX_ATTENTION_EARLY !== '0' });
  const cc = be.ctx.info.cc;
  return { source: `${CUDA_PRELUDE}\n${src}`, name, sig, options: { options: ['--std=c++17'], includeCudaHeaders: false, arch: `sm_${cc[0]}${cc[1]}a`, name } };
}
/** The sm_90a kernel, compiled once per specialization. */
function sm90Kernel(dt: DTypeName, D: number, cfg: PrefillConfig, maskKind: MaskKind, tma: boolean): CudaKernel {
  const watch = process.env.NBX_ATTENTION_WATCH === '1';
  const key = `${dt}:${D}:${cfg.blockN}:${cfg.stages}:${cfg.pingpong ? 'pp' : ''}:${cfg.persistent ? 'ps' : ''}:${cfg.deep ? 'dp' : ''}:${cfg.chain ? 'ch' : ''}:${cfg.edge ? 'eg' : ''}${cfg.split ? 'k' : ''}${cfg.ostore ? 'o' : ''}:${maskKind}:${watch ? 'w' : ''}:${tma ? 'tma' : ''}:${ablation() ?? ''}:${softmaxOf(cfg)}:${process.env.NBX_ATTENTION_REGS ?? ''}:${process.env.NBX_ATTENTION_EARLY ?? ''}`;
  let k = sm90Kernels.get(key);
  if (!k) {
    const b = sm90Build(dt, D, cfg, maskKind, watch, tma);
    k = getKernel(be.ctx, b.source, b.name, b.sig, b.options);
    k.setMaxDynamicSharedMemory(smem90(D, cfg));
    sm90Kernels.set(key, k);
  }
  attentionStats.prefill90++;
  if (tma) attentionStats.prefill90tma++;
  return k;
}

/** NBX_ATTENTION_REGS=p,c (for measuring): the Hopper kernel's producer and consumer registers after setmaxnreg. */
function regsVariant(): [number, number] | undefined {
  const v = process.env.NBX_ATTENTION_REGS;
  if (!v) return undefined;
  const [p, c] = v.split(',').map(Number);
  return [p!, c!];
}
/** NBX_ATTENTION_ABLATE (diagnostics, wrong results): a part of the Hopper kernel left out (Sm90SourceOptions.ablate). */
function ablation(): 'noload' | 'nosoftmax' | undefined {
  const a = process.env.NBX_ATTENTION_ABLATE;
  return a === 'noload' || a === 'nosoftmax' ? a : undefined;
}

/**
 * The tensor-core decode kernel's build options for a configuration (knobs tiles and stages; absent: block, 2),
 * NBX_ATTENTION_DECODE_STAGES (diagnostics: 2, 3 or 4, over the knob) and NBX_ATTENTION_ABLATE (DecodeMmaOptions).
 */
function decodeMmaOptions(c: Config = {}): Required<Pick<DecodeMmaOptions, 'stages'>> & DecodeMmaOptions {
  const v = process.env.NBX_ATTENTION_DECODE_STAGES;
  const stages = v === undefined || v === '' ? (c.stages as number | undefined) ?? 2 : Number(v);
  if (![2, 3, 4].includes(stages)) throw new UnsupportedError('attention', `NBX_ATTENTION_DECODE_STAGES takes 2, 3 or 4, got ${v}`);
  return { stages, ablate: process.env.NBX_ATTENTION_ABLATE === 'nocompute' ? 'nocompute' : undefined, warpTiles: c.tiles === 'warp' || c.tiles === 'tma', tma: c.tiles === 'tma' };
}
/** A decode configuration's kernel tag: 'mma', 'mma w s3' (per-warp tiles, ring of 3), 'mma tma' (per-warp TMA tiles), 'lanes t128', 'lanes t128 x' (transposed reduction). */
export function decodeTag(c: Config): string {
  if (c.impl === 'mma') {
    const o = decodeMmaOptions(c);
    return `mma${o.tma ? ' tma' : o.warpTiles ? ' w' : ''}${o.stages !== 2 ? ` s${o.stages}` : ''}`;
  }
  return `lanes t${c.threads as number}${c.reduce === 'scatter' ? ' x' : ''}${c.ld === 'stream' ? ' ld' : ''}`;
}

/** NBX_ATTENTION_SOFTMAX (for measuring): the Hopper kernel's softmax arithmetic (Sm90SourceOptions.softmax); unset: the default. */
function softmaxVariant(): Sm90Softmax | undefined {
  const v = process.env.NBX_ATTENTION_SOFTMAX;
  if (v === undefined || v === '') return undefined;
  if (!(SM90_SOFTMAX as readonly string[]).includes(v)) throw new UnsupportedError('attention', `NBX_ATTENTION_SOFTMAX takes ${SM90_SOFTMAX.join(', ')}, got ${v}`);
  return v as Sm90Softmax;
}

/** The Hopper kernel's softmax form: NBX_ATTENTION_SOFTMAX where set (measuring), else the configuration's. */
const softmaxOf = (cfg: PrefillConfig): Sm90Softmax => softmaxVariant() ?? cfg.softmax ?? SM90_SOFTMAX_DEFAULT;
/** The Hopper kernel's dynamic shared memory with its softmax form (tcsum: a slab of ones per V slot). */
const smem90 = (D: number, cfg: PrefillConfig): number => sm90Smem(D, cfg, sm90Ones(D, softmaxOf(cfg)));

/** Whether the Hopper kernel loads K/V through TMA where the descriptors encode (NBX_ATTENTION_TMA=0: cp.async). */
const tmaEnabled = (): boolean => process.env.NBX_ATTENTION_TMA !== '0';

/**
 * K's or V's TMA descriptor for the Hopper kernel: dims {D, S, KV heads, batch}, a box of 64 columns x
 * BLOCK_N rows, 128B swizzle (the kernel's shared-memory layout). null where TMA cannot address the
 * tensor (base or a stride not a multiple of 16 bytes) or the driver lacks it: the cp.async build then runs.
 */
function sm90TmaMap(r: StridedRef, dt: DTypeName, rows: number): BigUint64Array | null {
  const [B, HK, S, D] = r.shape as [number, number, number, number];
  const [sb, sh, sl] = r.strides as [number, number, number, number];
  // a dim of size 1 is only ever at coordinate 0: any legal stride describes it
  const row = D * 2, s0 = sl * 2, s1 = HK === 1 ? row * S : sh * 2, s2 = B === 1 ? row * S * HK : sb * 2;
  if (s0 <= 0 || s1 <= 0 || s2 <= 0 || s0 % 16 !== 0 || s1 % 16 !== 0 || s2 % 16 !== 0) return null;
  const addr = ptr(r) + BigInt(r.offset * 2);
  if (addr % 16n !== 0n) return null;
  // a descriptor is a function of these arguments alone, so one encoded before is reused: the driver call and
  // its marshalling were a quarter of a call's host time (call 2 of 2026-12-03: at L 1024 the host, 87.5 us a
  // call, set the pace)
  const key = `${dt}:${addr}:${D}:${S}:${HK}:${B}:${s0}:${s1}:${s2}:${rows}`;
  let m = tmaMaps.get(key);
  if (m === undefined) {
    m = encodeTensorMapTiled(CU_TENSOR_MAP_DATA_TYPE[dt as 'float16' | 'bfloat16'], addr, [D, S, HK, B], [s0, s1, s2], [64, rows, 1, 1], CU_TENSOR_MAP_SWIZZLE.b128);
    if (tmaMaps.size >= 1024) tmaMaps.clear();
    tmaMaps.set(key, m);
  }
  return m;
}
/** Encoded TMA descriptors by their arguments (null: the driver refused them). */
const tmaMaps = new Map<string, BigUint64Array | null>();
const mmaKey = (dt: DTypeName, D: number, c: PrefillConfig, maskKind: MaskKind): string => `attn_fwd:${dt}:${D}:${c.blockM}:${c.blockN}:${c.stages}:${maskKind}`;

/**
 * Compiles the prefill kernels (and, impl 'decode-mma', the tensor-core decode kernel) of these specializations side by side (NVRTC on libuv's worker threads,
 * UV_THREADPOOL_SIZE of them) into the kernel caches, so a device check on a fresh cache spends seconds,
 * not a minute, compiling before it measures. Resolves to the number of kernels.
 */
export async function precompileAttention(specs: { dt: DTypeName; D: number; cfg: PrefillConfig; mask: MaskKind }[]): Promise<number> {
  const watch = process.env.NBX_ATTENTION_WATCH === '1';
  const jobs = new Map<string, { source: string; options: CompileOptions }>();
  for (const { dt, D, cfg, mask } of specs) {
    if (cfg.impl === 'wgmma') {
      const b = sm90Build(dt, D, cfg, mask, watch, tmaEnabled());
      jobs.set(b.source, { source: b.source, options: b.options });
    } else {
      // impl 'decode-mma': the tensor-core decode kernel of (dt, D, mask)
      // (cfg.tiles / cfg.stages: the decode configuration's knobs)
      const { src, name } = cfg.impl === 'decode-mma' ? decodeMmaSource(dt, D, mask, decodeMmaOptions(cfg as unknown as Config)) : prefillSource(dt, D, cfg, mask);
      const source = `${CUDA_PRELUDE}\n${src}`;
      jobs.set(source, { source, options: { options: ['--std=c++17'], includeCudaHeaders: false, name } });
    }
  }
  await Promise.all([...jobs.values()].map((j) => loadSourceAsync(be.ctx, j.source, j.options)));
  return jobs.size;
}
/** A Hopper tile as a PREFILL_SPACE configuration (the tuner's candidates; tests and scripts force them). */
export const wgmmaConfig = (x: Sm90Config): Config => ({ impl: 'wgmma', blockM: SM90_BLOCK_M, blockN: x.blockN, stages: x.stages, pingpong: !!x.pingpong, persistent: !!x.persistent, deep: !!x.deep, chain: !!x.chain, softmax: x.softmax ?? 'lazy', edge: !!x.edge, split: !!x.split, ostore: !!x.ostore, group: x.group ?? 'l2' });
/**
 * Test/bench hook: force a configuration (empty: tune as usual); blocks caps the persistent Hopper kernel's grid
 * (tests: many work items per block, on the emulator in minutes); group sets its L2 group (batch·heads whose
 * query tiles interleave; 1: head after head, as the one-item-per-block kernel), for measuring.
 */
let forced: { prefill?: Config; decode?: Config; blocks?: number; group?: number; tail?: number; parts?: number } = {};
/** (tail, parts: a split tile's last `tail` items split into `parts` each, whatever the rounds; tests on small problems) */
export function _forceAttentionConfig(f: { prefill?: Config; decode?: Config; blocks?: number; group?: number; tail?: number; parts?: number }): void { forced = f; }

/**
 * Whether this device runs the sm_90a kernel: the driver's compute capability is exactly 9.0 (sm_90a
 * code runs on nothing else) and the matched profile's matrix unit is the warpgroup MMA.
 */
export function hasWgmma(): boolean {
  if (!be) return false; // the CUDA backend has not started
  const cc = be.ctx.info.cc;
  return cc[0] === 9 && cc[1] === 0 && be.tuning.profile.matrixUnit.name === 'wgmma';
}

/**
 * Whether the Hopper kernel runs (the tuner offers it, and head dim 256 goes through it): the device has
 * it (hasWgmma) and NBX_ATTENTION_WGMMA is not '0'; WGMMA_DEFAULT says what an unset variable means.
 */
// On by default since device call 4 of 2026-12-02: every variant right on the H200 (57/57 against the CPU
// reference), the B4 H32 L4096 shapes that "stalled" (the inputs' host randn, not the kernel) run, and it is
// faster than the mma kernel on every bench row (BENCHMARKS.md). NBX_ATTENTION_WGMMA=0 turns it off.
const WGMMA_DEFAULT = true;
function wgmmaEnabled(): boolean {
  const v = process.env.NBX_ATTENTION_WGMMA;
  return hasWgmma() && (v === undefined || v === '' ? WGMMA_DEFAULT : v !== '0');
}

/** Head dims the fused kernel covers for `dtype` on this device: 64/128, and 256 for float16/bfloat16 where the Hopper kernel runs. */
cudaAttention.headDims = (dtype: DTypeName): readonly number[] =>
  ((dtype === 'float16' || dtype === 'bfloat16') && (wgmmaEnabled() || forced.prefill?.impl === 'wgmma') ? SM90_HEAD_DIMS : HEAD_DIMS);

const candidates = new Map<string, Config[]>();
/**
 * The candidates for head dim D (and, for decode, the chunk that fills the device), pruned by this
 * device's limits and attention tile ceiling: a short list, since every one is a compile on first use.
 */
function fit(space: ConfigSpace<AttnProblem>, D: number, half = true, rb = 1, causal = false): Config[] {
  const key = `${space.name}:${D}:${half}:${rb}:${causal}`;
  let c = candidates.get(key);
  if (!c) {
    const profile = be.tuning.profile;
    let list: Config[];
    if (space === PREFILL_SPACE) {
      const ceil = attentionTileCeiling(profile, D);
      list = HEAD_DIMS.includes(D)
        ? [{ blockM: 128, blockN: 64 }, { blockM: 128, blockN: 128 }, { blockM: 64, blockN: 64 }].map((t) => ({ ...PREFILL_SPACE.defaultConfig, ...t }))
          .filter((x) => x.blockM <= ceil.blockM && x.blockN <= ceil.blockN)
        : [];
      if (half && wgmmaEnabled() && SM90_HEAD_DIMS.includes(D)) {
        // the Hopper kernel's tiles, and the mma kernel's default tile only (a compile each on first use;
        // the other mma tiles are not in the running on this device)
        // (sm90Offered: on causal problems the persistent tiles only, on the others sm90MoreConfigs(D) too)
        list = [...sm90Offered(D, causal).map(wgmmaConfig), ...list.slice(0, 1)];
      }
    } else {
      // the chunk is a launch argument (no compile): every chunk size, at two thread counts (two compiles),
      // and for half types every chunk of a tile or more on tensor cores (one compile). Fill (chunk 0) on the
      // lane kernel only: on the tensor-core kernel it lost to a fixed chunk on every row of call 3 (more
      // resident blocks did not raise that kernel's rate; the commit that dropped it has the figures).
      // Per-warp tiles (tiles 'warp' and 'tma', rings of 2 and 3) at chunks of 512+ (the tensor-core kernel's rate fell with
      // smaller chunks in every call); the transposed reduction (reduce 'scatter') where a block holds 2-4 rows
      // (rb 1: the same kernel), at 128 threads (256 at 4 rows: 1 block of 8 warps per SM, 2.6 TB/s in attn-5).
      const dflt = DECODE_SPACE.defaultConfig;
      list = [128, 256].flatMap((threads) => [...DECODE_CHUNKS, 0].map((ch) => ({ ...dflt, impl: 'lanes', chunk: ch, threads })));
      if (rb >= 2) list.push(...[...DECODE_CHUNKS, 0].map((ch) => ({ ...dflt, impl: 'lanes', chunk: ch, threads: 128, reduce: 'scatter' })));
      // (the lane kernel's streaming loads, ld 'stream', are no candidates: attn-12 (s11call3, forced, GB/s) lost on every
      // decode row, B4 t256 fill 4158 vs 4407, B1 t256 c4096 3995 vs 4234, B8 t128 c2048 4005 vs 4213)
      // On the sm_90 devices, per-warp TMA tiles replace the cp.async forms from chunk 512 on: in attn-6 (forced, GB/s;
      // B1 H32/32 S32768 / B4 H32/32 / GQA B4 H32/8 / B8 H32/32 S4096) the best tma form 4287 / 4480 / 4233 / 4305, the best
      // per-warp cp.async ('w', rings 2 and 3, c1024-4096) 3714 / 3895 / 3682 / 3734, the best block tiles (c256-4096)
      // 3721 / 3910 / 3697 / 3718: 'w' and block tiles of 512+ keys lost every row in both timed runs. Block tiles
      // stay below chunk 512, where no tma form is offered (tma on inputs TMA cannot address runs the 'w' build).
      if (half) {
        const sm90 = hasWgmma(); // (TMA: the sm_90 devices; hasWgmma's test of the profile)
        list.push(...DECODE_CHUNKS.filter((ch) => ch >= DECODE_MMA_KEYS && (!sm90 || ch < 512)).map((ch) => ({ ...dflt, impl: 'mma', chunk: ch, threads: 128 })));
        const tiles = sm90 ? ['tma'] : ['warp'];
        for (const t of tiles) for (const stages of [2, 3]) list.push(...DECODE_CHUNKS.filter((ch) => ch >= 512).map((ch) => ({ ...dflt, impl: 'mma', chunk: ch, threads: 128, tiles: t, stages })));
      }
      list = list.flatMap((c) => [{ ...c, merge: 'fused' }, { ...c, merge: 'kernel' }]);
    }
    c = prune(space, profile.limits, { problem: { D }, candidates: list }).kept;
    candidates.set(key, c);
  }
  return c;
}

/**
 * Launches per timing sample, back to back as a prefill's layers (and the benchmark) run them. One launch
 * after an idle synchronisation ranked the Hopper tiles differently: it took n128s2p where back-to-back
 * launches measured n128s2 8-13% faster at L 4096 (BENCHMARKS.md, fifth session, call C).
 */
const TUNE_LAUNCHES = 4;
let events: { start: ReturnType<CudaBackend['ctx']['createEvent']>; end: ReturnType<CudaBackend['ctx']['createEvent']> } | undefined;
function timeRun(cfg: Config, run: (cfg: Config) => void, launches = TUNE_LAUNCHES): number {
  events ??= { start: be.ctx.createEvent({ timing: true }), end: be.ctx.createEvent({ timing: true }) };
  events.start.record(be.stream);
  for (let i = 0; i < launches; i++) run(cfg);
  events.end.record(be.stream);
  events.end.synchronize();
  return events.end.elapsedSince(events.start) / launches;
}

/** Problems below this many score elements run the default configuration (launch-bound). */
const TUNE_MIN_SCORES = 1 << 22;
/**
 * Decode reads K and V once, so its cost is their bytes, not its score elements: a decode is tuned from this many
 * bytes of K and V on (~60 us at 4.3 TB/s, far from launch-bound) even below TUNE_MIN_SCORES. Before (ninth
 * session, attn-5 and attn-6), the bench's B1 H32 S32768 and B8 H32 S4096 rows (512 MiB of K/V each, 2^20 scores)
 * were never tuned: both ran the untuned default, lanes t128 c2048 kernel (4079-4110 / 4154-4207 GB/s), while
 * forced forms of the candidate list reached 4234-4287 (B1: lanes t256 c4096, mma tma c4096) and 4227-4305 (B8:
 * mma tma s3 c4096) against SDPA's 4188 / 4281.
 */
const TUNE_MIN_DECODE_BYTES = 256 << 20;

function pick(space: ConfigSpace<AttnProblem>, D: number, shape: string, dtype: string, work: number, fallback: Config, run: (cfg: Config) => void, rb = 1, causal = false): Config {
  const f = space === PREFILL_SPACE ? forced.prefill : forced.decode;
  if (f) return f;
  const cands = fit(space, D, dtype !== 'float32', rb, causal);
  // untuned (small problems, NBX_AUTOTUNE=off): the first candidate, the wgmma kernel where there is one
  const fb = space === PREFILL_SPACE ? cands[0] : cands.find((c) => Object.keys(fallback).every((k) => c[k] === fallback[k])) ?? cands[0];
  if (!fb) throw new UnsupportedError('attention', `no ${space.name} configuration fits this device for head dim ${D}`);
  // (NBX_ATTN_TUNE_MIN: the threshold in score elements, for tests of the tuning path on small problems)
  if (work < Number(process.env.NBX_ATTN_TUNE_MIN || TUNE_MIN_SCORES)) return fb;
  // the pick of an earlier call of this problem (same candidate list and tuning mode): a cache hit in tuneSync
  // compares each candidate's key string with the entry's, ~85 us per call on the dev box for a decode problem
  // whose pick is last of 46, which left short calls (a GQA decode of 134 MB: ~35 us on the card) host-bound
  const mk = `${space.name}|${shape}|${dtype}|${autotuneMode()}|${process.env.NBX_CACHE_DIR ?? ''}`;
  const m = picked.get(mk);
  if (m !== undefined && m.cands === cands) return m.config;
  const config = pickTuned(space, shape, dtype, cands, fb, run);
  picked.set(mk, { cands, config });
  return config;
}
/** Tuned picks by problem (pick), for this process. */
const picked = new Map<string, { cands: Config[]; config: Config }>();
function pickTuned(space: ConfigSpace<AttnProblem>, shape: string, dtype: string, cands: Config[], fb: Config, run: (cfg: Config) => void): Config {
  const kernel = { name: space.name, knobs: space.knobs, defaultConfig: fb };
  const key = { shape, dtype, device: be.tuning.deviceKey }, timeFn = (c: Config): number => timeRun(c, run);
  if (autotuneMode() !== 'full' || process.env.NBX_ATTN_TUNE_SERIAL === '1') return tuneSync(kernel, key, cands, timeFn, { deviceLabel: be.ctx.info.name }).config;
  const hit = tuneSync(kernel, key, cands, timeFn, { mode: 'cached', deviceLabel: be.ctx.info.name });
  if (hit.source !== 'default') return hit.config;
  if (space === PREFILL_SPACE) {
    // before a sweep, ~30 ms of the first candidate back to back, so that the first candidates are not timed
    // while the clocks come up from idle (call 2 of 2026-12-03: the tuner took D64 n128s3p, 362 TFLOP/s in the
    // bench row, over n128s3pP, the first candidate, 384 forced)
    const ms = timeRun(fb, run);
    for (let i = Math.min(200, Math.ceil(30 / Math.max(ms, 0.01) / TUNE_LAUNCHES)); i > 0; i--) timeRun(fb, run);
  }
  // the sweep's figures come from interleavedSweep; tuneSync ranks them and keeps the pick in its cache as usual
  const times = interleavedSweep(cands, run);
  const fromSweep = (c: Config): number => { const t = times.get(c); if (t === undefined) return timeRun(c, run); if (t instanceof Error) throw t; return t; };
  return tuneSync(kernel, key, cands, fromSweep, { deviceLabel: be.ctx.info.name, warmup: 1, reps: TUNE_ROUNDS }).config;
}

/** Timed rounds of an interleaved sweep (after one round that compiles and warms every candidate). */
const TUNE_ROUNDS = 5;
/** The least time a sweep's sample spans (ms): short launches (decode, L 1024) take more launches a sample, up to TUNE_MAX_LAUNCHES. */
const TUNE_SAMPLE_MS = 2, TUNE_MAX_LAUNCHES = 16;
/**
 * Every candidate's time as the median of TUNE_ROUNDS samples taken in rounds: one sample of each candidate per round,
 * in list order, so that each candidate is timed early and late in the sweep. tuneSync's own sweep times a candidate's
 * samples back to back, one candidate after the other: a candidate's figure then depends on where it stands in the list
 * (the clocks and the card's power state move over a sweep of hundreds of launches). In sessions 7-9 the tuner took the
 * first prefill candidate (n128s2, timed right after the warm-up of the same tile) on the f16 row four times and the
 * bench row then read 550-566 TFLOP/s, while the rows that ran a persistent tile read 575-608; in attn-8 (this sweep,
 * best sample) every prefill row took n128s2Pt, the best or within 0.2% of the best tile in forced timings with an idle
 * pause before each (attn-8 timefresh), and f16 rose to 105.1% of SDPA.
 * Median, not the best sample, and samples of at least TUNE_SAMPLE_MS: with the best of 5 four-launch samples attn-8 took
 * lanes t256 c4096 (one chunk, 256 blocks) for decode B8 H32 S4096 at 0.1246 ms (4,309 GB/s), which ran at 3,204 GB/s in
 * the bench (50 launches a sample) and 3,219-3,228 in every forced timing before: a form whose short samples are
 * sometimes fast. Launches per sample from the warm-up round's least time (4 at L4096 prefill, 16 for decode).
 * A candidate whose first run throws is left out of the rounds (its error returned); a DeviceFaultError ends the sweep.
 * NBX_ATTN_TUNE_SERIAL=1: tuneSync's own sweep (for comparing the two).
 */
function interleavedSweep(cands: Config[], run: (cfg: Config) => void): Map<Config, number | Error> {
  const out = new Map<Config, number | Error>();
  const samples = new Map<Config, number[]>();
  let fastest = Infinity; // the warm-up round's least time (a first run that compiled reads long): the problem's scale
  const fail = (c: Config, e: unknown): void => {
    if (e instanceof DeviceFaultError) throw e;
    out.set(c, e instanceof Error ? e : new Error(String(e)));
    samples.delete(c);
  };
  for (const c of cands) {
    try {
      fastest = Math.min(fastest, timeRun(c, run));
      samples.set(c, []);
    } catch (e) { fail(c, e); }
  }
  const launches = Math.max(TUNE_LAUNCHES, Math.min(TUNE_MAX_LAUNCHES, Math.ceil(TUNE_SAMPLE_MS / Math.max(fastest, 1e-3))));
  for (let r = 0; r < TUNE_ROUNDS; r++) for (const c of cands) {
    const xs = samples.get(c);
    if (!xs) continue;
    try { xs.push(timeRun(c, run, launches)); } catch (e) { fail(c, e); }
  }
  for (const [c, xs] of samples) out.set(c, median(xs));
  return out;
}

// ---- launcher ------------------------------------------------------------------------------------------

/** Strides of a 4-D ref as kernel arguments (elements). */
const st4 = (r: StridedRef | undefined): number[] => (r ? [r.offset, r.strides[0]!, r.strides[1]!, r.strides[2]!] : [0, 0, 0, 0]);

/**
 * The persistent kernel's L2 group G (batch·heads; Sm90Group): 'l2' as many as fill half the L2 with their K and V (kv bytes
 * a KV head), the last group the rest; 'even' as many groups, equal; 'wide' K and V up to 90% of the L2, groups equal. Equal
 * groups count whole KV heads (rep query heads each), so a group shares its K and V.
 */
function l2Group(rule: Sm90Group, BH: number, rep: number, l2: number, kv: number): number {
  const G0 = Math.max(1, Math.min(BH, Math.floor(l2 / 2 / kv) * rep));
  if (rule === 'l2') return G0;
  const kvMax = Math.max(1, Math.floor((rule === 'wide' ? l2 * 0.9 : l2 / 2) / kv)), BHk = Math.ceil(BH / rep);
  return Math.max(1, Math.min(BH, Math.ceil(BHk / Math.ceil(BHk / kvMax)) * rep));
}

/** Parts at most per split item (the merge weighs them in registers, attention_sm90.ts). */
const SPLIT_MAX = 8;
/** The split build's workspace (parts' O, maxima and sums) and counters (zero between launches); grown, never shrunk or freed (graphs may hold them). */
let splitWs: CudaBuffer | undefined, splitWsLen = 0, splitCnt: CudaBuffer | undefined, splitCntLen = 0;
/**
 * A split tile's tail (config split): items of equal cost (not causal) on `grid` blocks run in ⌈items / grid⌉ rounds, the
 * last partial (B4 H32 L4096: 4,096 items on 132 SMs, 31.03 rounds of work in 32). The last kt batch·heads (whole KV groups
 * of the last batch) leave the main launch, which then ends on a fuller last round, and run in a second launch of the split
 * build, each of their items in PK runs of its key tiles (PK ≤ SPLIT_MAX, kt·ntiles·PK ≤ grid: one round). Chosen by a
 * model in tiles (an item nt; the tail ⌈nt / PK⌉ + 3 for its launch and merge) where it saves 1% or more. The split build
 * itself ran 3-10% slower than the same tile unsplit in attn-11 (its loop's code), so only the tail runs it. attn-13 (s11call4,
 * forced, non-causal B4 H32 L4096): n128s2Pk 646 / n128s2Ptk 658 TFLOP/s against n128s2P 653 / n128s2Pt 661, no gain: the
 * rounds model's lost last round (3%) does not show in the timings; the split tiles are selectable by force only.
 * Causal problems: none (their heaviest-first order ends on one-tile items). forced.tail / forced.parts set kt and PK.
 */
function tailPlan(B: number, H: number, rep: number, ntiles: number, nt: number, grid: number, causal: boolean): { kt: number; parts: number } | null {
  const cap = Math.min(SPLIT_MAX, Number(process.env.NBX_ATTN_SPLIT_PARTS || SPLIT_MAX));
  if (forced.tail !== undefined) {
    const kt = forced.tail, parts = Math.min(forced.parts ?? 2, cap, Math.max(nt, 1));
    return kt > 0 && kt % rep === 0 && kt <= H && kt < B * H && parts >= 2 ? { kt, parts } : null;
  }
  if (causal) return null;
  const BH = B * H, base = Math.ceil((BH * ntiles) / grid) * nt;
  let best: { kt: number; parts: number; cost: number } | null = null;
  for (let kt = rep; kt <= H && kt < BH; kt += rep) {
    const parts = Math.min(cap, nt, Math.floor(grid / (kt * ntiles)));
    if (parts < 2) break;
    const cost = Math.ceil(((BH - kt) * ntiles) / grid) * nt + Math.ceil(nt / parts) + 3;
    if (cost <= base * 0.99 && (!best || cost < best.cost)) best = { kt, parts, cost };
  }
  return best && { kt: best.kt, parts: best.parts };
}
/** The split build's arguments R0, PK, WS, WC for a launch whose `items` are all split into `parts`. */
function splitArgs(items: number, parts: number, D: number): (number | bigint)[] {
  const need = items * parts * SM90_BLOCK_M * (D + 2);
  if (need > splitWsLen) { splitWsLen = Math.max(need, 1 << 20); splitWs = be.alloc('float32', splitWsLen); }
  if (items > splitCntLen) { splitCntLen = Math.max(items, 1024); splitCnt = be.alloc('int32', splitCntLen, true); }
  return [0, parts, splitWs!.ptr, splitCnt!.ptr];
}

export function cudaAttention(p: AttentionParams): void {
  const { q, k, v, out, mask, causal, rep } = p;
  const dt = q.dtype;
  const [B, H, L, D] = q.shape as [number, number, number, number];
  const S = k.shape[2]!;
  const wg = (dt === 'float16' || dt === 'bfloat16') && (wgmmaEnabled() || forced.prefill?.impl === 'wgmma');
  if (!HEAD_DIMS.includes(D) && !(wg && SM90_HEAD_DIMS.includes(D))) {
    throw new UnsupportedError('attention', `cuda attention kernel takes head dims ${HEAD_DIMS.join(', ')}${wg ? ` (${SM90_HEAD_DIMS.join(', ')} on this device)` : ''}, got ${D}`);
  }
  if (dt !== 'float16' && dt !== 'bfloat16' && dt !== 'float32') throw new UnsupportedError('attention', `cuda attention kernel does not support dtype ${dt}`);
  if (B * H * L === 0) return;
  const maskKind: MaskKind = mask ? (mask.dtype === 'bool' ? 'bool' : mask.dtype) : 'none';
  const sl2 = p.scale * Math.LOG2E;
  const HK = H / rep;
  const rows = rep * L;
  const maskArgs = mask ? [mask.offset, mask.strides[0]!, mask.strides[1]!, mask.strides[2]!, mask.strides[3]!] : [0, 0, 0, 0, 0];
  const common = [...st4(q), ...st4(k), ...st4(v), ...st4(out), ...maskArgs];
  if ((rows <= DECODE_MAX_ROWS && HEAD_DIMS.includes(D)) || dt === 'float32') {
    if (dt === 'float32' && rows > DECODE_MAX_ROWS) throw new UnsupportedError('attention', `cuda attention kernel runs float32 only for decode (≤ ${DECODE_MAX_ROWS} query rows per KV head), got ${rows}`);
    const Se = causal ? Math.min(S, L) : S; // top-left causal: no row sees a key past L - 1
    const rb = decodeRowBlock(rows);
    const Z = B * HK, zg = Math.ceil(rows / rb);
    const run = (c: Config): void => {
      const threads = c.threads as number, mmaImpl = c.impl === 'mma';
      let dmo = mmaImpl ? decodeMmaOptions(c) : undefined;
      // tiles 'tma': K's and V's descriptors (boxes of 64 columns x 16 keys); inputs TMA cannot address, and devices
      // before compute capability 9.0, run the per-warp cp.async build (the same tiles, the same bits)
      let maps: bigint[] = [];
      if (dmo?.tma) {
        const mk = be.ctx.info.cc[0] >= 9 ? sm90TmaMap(k, dt, 16) : null, mv = mk && sm90TmaMap(v, dt, 16);
        if (mk && mv) maps = [...mk, ...mv];
        else dmo = { ...dmo, tma: false };
      }
      const xr = c.reduce === 'scatter' && rb >= 2;
      const kd = dmo
        ? be.kernel(`attn_dec_mma:${dt}:${D}:${maskKind}:${dmo.stages}:${dmo.ablate ?? ''}:${dmo.tma ? 'tma' : dmo.warpTiles ? 'w' : ''}`, () => decodeMmaSource(dt, D, maskKind, dmo))
        : be.kernel(`attn_dec:${dt}:${D}:${threads}:${maskKind}:${rb}:${xr ? 'x' : ''}:${c.ld === 'stream' ? 's' : ''}`, () => decodeSource(dt, D, threads, maskKind, rb, xr, c.ld === 'stream'));
      const smem = dmo ? decodeMmaSmem(D, dmo.stages, dmo.tma) : 0;
      if (smem > 48 * 1024) kd.setMaxDynamicSharedMemory(smem);
      const chunk = c.chunk === 0 ? fillChunk(kd, mmaImpl ? 128 : threads, smem, Z * (mmaImpl ? 1 : zg), Se) : Math.min(c.chunk as number, Math.max(Se, 1));
      const nch = Math.max(1, Math.ceil(Se / chunk));
      let pml: CudaBuffer | null = null, pacc: CudaBuffer | null = null;
      if (nch > 1) { pml = be.alloc('float32', Z * rows * nch * 2); pacc = be.alloc('float32', Z * rows * nch * D); }
      const fused = nch > 1 && c.merge !== 'kernel';
      attentionStats.lastDecode = `${decodeTag(xr ? c : mmaImpl ? { ...c, tiles: dmo!.tma ? 'tma' : dmo!.warpTiles ? 'warp' : 'block' } : { ...c, reduce: 'rows' })} c${chunk} ${nch === 1 ? 'single' : fused ? 'fused' : 'kernel'}`;
      const cnt = fused ? decodeCounters(Z * (mmaImpl ? 1 : zg)) : 0n;
      for (let z0 = 0; z0 < Z; z0 += 65535) {
        const zc = Math.min(65535, Z - z0);
        be.ctx.launch(kd, [nch, zc, mmaImpl ? 1 : zg], mmaImpl ? 128 : threads, [ptr(q), ptr(k), ptr(v), ptr(out), ptr(mask), pml?.ptr ?? 0n, pacc?.ptr ?? 0n, cnt,
          ...common, HK, rep, L, Se, z0, chunk, sl2, causal ? 1 : 0, ...maps], smem, be.stream);
      }
      if (pml && pacc && fused) { be.free(pml); be.free(pacc); }
      if (pml && pacc && !fused) {
        const kr = be.kernel(`attn_dec_reduce:${dt}:${D}`, () => decodeReduceSource(dt, D));
        be.launch(kr, Z * rows, D, [pml.ptr, pacc.ptr, ptr(out), ...st4(out), HK, rep, L, nch]);
        be.free(pml); be.free(pacc);
      }
    };
    // default chunk: about four blocks per SM over the whole problem. Short caches with few KV heads (a
    // decode step of one sequence: 4 KV heads x 256 keys) need chunks of a few dozen keys to fill the
    // device at all; one block per KV head would leave all but a handful of SMs idle.
    const want = Math.max(1, Math.ceil((be.smCount * 4) / (Z * zg)));
    const chunk = DECODE_CHUNKS.find((c) => Math.ceil(Se / c) <= want) ?? 256;
    attentionStats.decode++;
    // untuned (small problems): the merge kernel. Call 2 of 2026-12-03 (GB/s, lanes t128 c2048): B1 H32 S32768
    // fused 2752 vs kernel 4094, B8 H32 S4096 2789 vs 4160 (c1024 and the mma kernel: within 3% either way)
    const work = Z * Se * D * 2 * esize(dt) >= TUNE_MIN_DECODE_BYTES ? Math.max(Z * rows * Se, TUNE_MIN_SCORES) : Z * rows * Se;
    run(pick(DECODE_SPACE, D, `D${D}:r${bucketSize(rows)}:S${bucketSize(Se)}:Z${bucketSize(Z)}:${maskKind}`, dt, work, { impl: 'lanes', chunk, threads: 128, merge: 'kernel', reduce: 'rows' }, run, rb));
    return;
  }
  const run = (c: Config): void => {
    let cfg = c as unknown as PrefillConfig;
    if (c.impl === 'wgmma') {
      // ostore copies O out in 16-byte pieces: an O whose rows are not 16-byte aligned runs the same tile with 4-byte stores
      if (cfg.ostore && ((ptr(out) + BigInt(out.offset * 2)) % 16n !== 0n || out.strides.slice(0, 3).some((x) => (x * 2) % 16 !== 0))) cfg = { ...cfg, ostore: false };
      const ntiles = Math.ceil(L / SM90_BLOCK_M);
      const tail = [H, rep, L, S, B * H, ntiles, sl2, causal ? 1 : 0];
      const mq = tmaEnabled() ? sm90TmaMap(q, dt, SM90_BLOCK_M) : null;
      const mk = mq && sm90TmaMap(k, dt, cfg.blockN), mv = mk && sm90TmaMap(v, dt, cfg.blockN);
      if (mq && mk && mv) {
        attentionStats.lastPrefill = `wgmma tma ${sm90Tag(cfg)}`;
        const items = ntiles * B * H;
        if (cfg.persistent) {
          // the work counters (next item, blocks done; zero between launches: the last block resets them) and
          // the L2 group: batch·heads whose K and V fit in half the L2 together (the driver's L2 size)
          sm90Queue ??= be.alloc('int32', 2, true);
          const l2 = be.ctx.info.l2CacheSize > 0 ? be.ctx.info.l2CacheSize : 32 << 20;
          const cap = forced.blocks ?? Infinity;
          // split: the last kt batch·heads (whole KV groups of the last batch) leave the main launch, which then ends on a
          // full round, and run next in the split build, each item in PK key runs (tailPlan)
          const plan = cfg.split ? tailPlan(B, H, rep, ntiles, Math.ceil(S / cfg.blockN), Math.min(be.smCount, cap), causal) : null;
          const BHa = B * H - (plan?.kt ?? 0), itemsA = ntiles * BHa;
          const grid = Math.min(itemsA, be.smCount, cap);
          const G = forced.group !== undefined ? Math.max(1, Math.min(BHa, forced.group)) : l2Group(cfg.group ?? 'l2', BHa, rep, l2, 4 * S * D);
          const kw = sm90Kernel(dt, D, { ...cfg, split: false }, maskKind, true);
          be.launch(kw, grid, SM90_THREADS, [ptr(out), ptr(mask), sm90Queue.ptr, ...st4(out), ...maskArgs, H, rep, L, S, BHa, ntiles, sl2, causal ? 1 : 0, G, ...mq, ...mk, ...mv], smem90(D, cfg));
          if (plan) {
            // the tail heads as a problem of their own: batch B - 1, query heads H - kt .. H - 1 (KV heads from (H - kt) / rep)
            const h0 = H - plan.kt, sub = (r: StridedRef, h: number, n: number): StridedRef => ({ ...r, offset: r.offset + (B - 1) * r.strides[0]! + h * r.strides[1]!, shape: [1, n, r.shape[2]!, r.shape[3]!] });
            const qt = sub(q, h0, plan.kt), kt = sub(k, h0 / rep, plan.kt / rep), vt = sub(v, h0 / rep, plan.kt / rep), ot = sub(out, h0, plan.kt);
            const mqt = sm90TmaMap(qt, dt, SM90_BLOCK_M), mkt = mqt && sm90TmaMap(kt, dt, cfg.blockN), mvt = mkt && sm90TmaMap(vt, dt, cfg.blockN);
            if (!mqt || !mkt || !mvt) throw new Error('attention: the split tail\'s TMA descriptors failed where the whole problem\'s did not');
            const maskT = mask ? [mask.offset + (B - 1) * mask.strides[0]! + h0 * mask.strides[1]!, ...maskArgs.slice(1)] : maskArgs;
            const itemsB = ntiles * plan.kt;
            const kb = sm90Kernel(dt, D, { ...cfg, split: true }, maskKind, true);
            be.launch(kb, Math.min(itemsB * plan.parts, be.smCount, cap), SM90_THREADS, [ptr(out), ptr(mask), sm90Queue.ptr, ...st4(ot), ...maskT, plan.kt, rep, L, S, plan.kt, ntiles, sl2, causal ? 1 : 0, plan.kt,
              ...splitArgs(itemsB, plan.parts, D), ...mqt, ...mkt, ...mvt], smem90(D, cfg));
          }
        } else {
          const kw = sm90Kernel(dt, D, cfg, maskKind, true);
          be.launch(kw, items, SM90_THREADS, [ptr(out), ptr(mask), ...st4(out), ...maskArgs, ...tail, ...mq, ...mk, ...mv], smem90(D, cfg));
        }
        return;
      }
      // inputs TMA cannot address: the cp.async build, one block per item (the same results: persistence moves no bits)
      // (its dynamic shared memory is that of the non-persistent build: call 1 of 2026-12-03 launched a persistent
      // config's cp.async build with the persistent size, 16 bytes past the kernel's limit, and the launch failed)
      const cfg1 = { ...cfg, persistent: false, chain: false, split: false, ostore: false };
      const kw = sm90Kernel(dt, D, cfg1, maskKind, false);
      attentionStats.lastPrefill = `wgmma cp.async ${sm90Tag(cfg1)}`;
      be.launch(kw, ntiles * B * H, SM90_THREADS, [ptr(q), ptr(k), ptr(v), ptr(out), ptr(mask), ...common, ...tail], smem90(D, cfg1));
      return;
    }
    const kf = be.kernel(mmaKey(dt, D, cfg, maskKind), () => prefillSource(dt, D, cfg, maskKind));
    attentionStats.lastPrefill = `mma m${cfg.blockM}n${cfg.blockN}s${cfg.stages}`;
    const smem = prefillSmem(D, cfg);
    if (smem > 48 * 1024) kf.setMaxDynamicSharedMemory(smem);
    const ntiles = Math.ceil(L / cfg.blockM);
    be.launch(kf, ntiles * B * H, cfg.blockM * 2, [ptr(q), ptr(k), ptr(v), ptr(out), ptr(mask), ...common, H, rep, L, S, B * H, ntiles, sl2, causal ? 1 : 0], smem);
  };
  attentionStats.prefill++;
  const work = B * H * L * S / (causal ? 2 : 1);
  // (causal: the candidates of sm90Offered(D, true))
  run(pick(PREFILL_SPACE, D, `D${D}:L${bucketSize(L)}:S${bucketSize(S)}:BH${bucketSize(B * H)}:${causal ? 'causal' : maskKind}`, dt, work, PREFILL_SPACE.defaultConfig, run, 1, causal));
}
