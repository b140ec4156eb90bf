// The CUDA backend's fused mixture-of-experts kernels (contracts in src/kernels/moe.ts; operations
// nbx.llm.moe_align and nbx.llm.grouped_expert_linear in src/ops/llm.ts), vLLM's moe_align_block_size
// and fused_moe:
//
// - moe_align: one block of 1024 threads. A shared-memory histogram of the expert ids, each expert's
//   padded start (a serial prefix over E by one thread: E is small), every block's expert (a binary
//   search over the starts), then the slots scattered to their positions in tiles of 1024: within a
//   warp, the lanes of one expert are found by __match_any_sync and ranked by popcount, the warps' counts
//   of each expert are prefixed in warp order, and a running count per expert carries across tiles. So
//   the slots of an expert keep their order (the composite's stable sort: the result is deterministic,
//   unlike vLLM's atomics) and the routing never goes to the host: a CUDA graph records it. One block is
//   enough at prefill sizes (M = N·k slots ≤ a few 10⁴: a handful of tiles).
// - grouped_expert_gemm: one CTA per (block of BM = block_size sorted positions, BN = 128 output features).
//   The block's expert is read on the device; its BM slots give the rows of x to gather (slot / k, or the
//   slot itself for a per-slot input; padding rows are zeros). Tiles of x and of the expert's weight
//   ([O, K]: nn.Linear's layout is already the column-major B operand) move to shared memory with
//   cp.async in a 4-stage ring of 32-deep K slices (rows padded by 8 elements: ldmatrix without bank
//   conflicts; other tiles by NBX_MOE_GEMM_TILE, for measuring), fragments
//   by ldmatrix, products by mma.sync m16n8k16 with float32 accumulators; the epilogue multiplies by
//   the routing weight (optional) and writes each row to its slot of out [M, O]. Blocks past the total
//   return at once, so the grid has a fixed size (moe_align's capacity) and needs no host read.
// - grouped_expert_gemm90 (Hopper: compute capability 9.0 with the profile's wgmma matrix unit, block
//   sizes 64 and 128): the same work split and epilogue on warpgroup MMA. Two warpgroups (256 threads);
//   a stage is the tile's rows of x and BN rows of the weight, 64 of K (one 128-byte row each), in
//   shared memory as the hardware's 128B-swizzled K-major layout, so both operands are wgmma descriptors
//   (m64nNk16, fp32 accumulators in registers: 64 x BN per warpgroup at BM 128, 64 x BN/2 at BM 64).
//   All 256 threads fill a ring of `stages` slots with cp.async, STAGES - 2 tiles ahead: at iteration kt
//   the wgmma of tile kt - 1 may still run (wgmma.wait_group 1), so the slot refilled is kt - 2's, free
//   once every warpgroup passed the barrier of iteration kt (each waited for its kt - 2 wgmma at kt - 1).
//   The mma.sync kernel's 64 x 128 tile with ldmatrix fragments reached about 150-220 TFLOP/s on the
//   H200 (BENCHMARKS.md, fourth session), below cuBLASLt's per-expert GEMMs; this one is measured by
//   scripts/moe-bench.mjs (NBX_MOE_GEMM90=0 takes the mma.sync kernel, NBX_MOE_GEMM90_TILE another tile).
//
// Both record bad indices in an error word, read after an eager launch (a host sync per call; deferred
// to the replay inside a capture), as expert_gemv does.

import type { BackendKernels } from '../../../kernels/table.js';
import type { GroupedExpertGemmParams, MoeAlignParams } from '../../../kernels/moe.js';
import { IndexError, ValueError } from '../../../errors.js';
import type { CudaBuffer } from '../runtime/device.js';
import { DTYPES, type DTypeName } from '../../../dtype/dtypes.js';
import type { StridedRef } from '../../backend.js';
import type { ArgType } from '../runtime/driver.js';
import { R, type CudaBackend } from '../runtime/backend.js';
import { CP_ASYNC_DEVICE, CP_ASYNC_EMU, basePtr, requireDType } from './util.js';
import { wgmmaHelpers } from './attention_sm90.js';
import { getKernel } from '../runtime/nvrtc.js';
import { CUDA_PRELUDE } from '../../../ir/render_c.js';
import { encodeTensorMapTiled, CU_TENSOR_MAP_DATA_TYPE, CU_TENSOR_MAP_SWIZZLE, type CudaKernel } from '../runtime/driver.js';

let be: CudaBackend;

/** Points this family's kernels at the backend (called once, when the backend starts). */
export function bind(backend: CudaBackend): void { be = backend; }

/** The device address of a ref's first element. */
const at = (r: StridedRef | undefined): bigint => (r ? basePtr(r) + BigInt(r.offset * DTYPES[r.dtype].itemsize) : 0n);

/** The error word of this family (cleared per call), or the capture's (checked after a replay). */
let errWord: CudaBuffer | null = null;
function errorWord(): bigint {
  if (be.capture !== null) return be.capture.errBuf.ptr;
  errWord ??= be.alloc('int64', 1);
  be.ctx.memsetD8(errWord.ptr, 0, 8, be.stream);
  return errWord.ptr;
}
/** The error word's value after the launch (0: none); inside a capture the check is deferred to the replay. */
function readError(op: string): bigint {
  if (be.capture !== null) { be.capture.defer(op); return 0n; }
  return (be.downloadSync(errWord!, 'int64', 0, 1) as BigInt64Array)[0]!;
}
/** Error words: kind in bits 48+, position below. */
const KIND_SHIFT = 48n;

// ---- moe_align ----------------------------------------------------------------------------------------

const ALIGN_THREADS = 1024;
const ALIGN_WARPS = ALIGN_THREADS / 32;

export function moeAlignSource(idx: 'int32' | 'int64') {
  const IT = idx === 'int32' ? 'int' : 'long long';
  const src = `
#ifdef NBX_EMU
// the lanes of this warp holding the same value (scalar form of __match_any_sync)
__device__ __forceinline__ unsigned match_any(int v) {
  unsigned m = 0;
  for (int l = 0; l < 32; l++) if (__shfl_sync(0xffffffffu, v, l) == v) m |= 1u << l;
  return m;
}
#else
__device__ __forceinline__ unsigned match_any(int v) { return __match_any_sync(0xffffffffu, v); }
#endif
extern "C" __global__ void __launch_bounds__(${ALIGN_THREADS}) moe_align(const ${IT}* __restrict__ ids, int* __restrict__ sorted,
  int* __restrict__ bexp, int* __restrict__ total, unsigned long long* __restrict__ err, int M, int E, int BS, int cap, int nb) {
  extern __shared__ int sh[];
  int* cnt = sh;          // [E] slots per expert
  int* start = sh + E;    // [E] padded start of each expert's group
  int* run = sh + 2 * E;  // [E] slots of each expert placed by earlier tiles
  int* wc = sh + 3 * E;   // [${ALIGN_WARPS}][E] this tile's count, then start, per warp and expert
  __shared__ int tot;
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  for (int i = tid; i < E; i += ${ALIGN_THREADS}) { cnt[i] = 0; run[i] = 0; }
  for (int i = tid; i < cap; i += ${ALIGN_THREADS}) sorted[i] = M;
  __syncthreads();
  for (int i = tid; i < M; i += ${ALIGN_THREADS}) {
    const long long e = (long long)ids[i];
    if (e >= 0 && e < E) atomicAdd(&cnt[e], 1);
    else atomicMax(err, (1ull << ${KIND_SHIFT}) | (unsigned long long)i);
  }
  __syncthreads();
  if (tid == 0) {
    int s = 0;
    for (int e = 0; e < E; e++) { start[e] = s; s += (cnt[e] + BS - 1) / BS * BS; }
    tot = s; total[0] = s;
  }
  __syncthreads();
  // a block's expert: the last one whose padded start is at or before the block's first position (an
  // empty expert starts where the next one does, so the last of equal starts is the one that owns it)
  for (int b = tid; b < nb; b += ${ALIGN_THREADS}) {
    const int p = b * BS;
    int e = -1;
    if (p < tot) {
      int lo = 0, hi = E - 1;
      while (lo < hi) { const int mid = (lo + hi + 1) >> 1; if (start[mid] <= p) lo = mid; else hi = mid - 1; }
      e = lo;
    }
    bexp[b] = e;
  }
  for (int base = 0; base < M; base += ${ALIGN_THREADS}) {
    const int i = base + tid;
    int e = -1;
    if (i < M) { const long long v = (long long)ids[i]; if (v >= 0 && v < E) e = (int)v; }
    for (int j = tid; j < ${ALIGN_WARPS} * E; j += ${ALIGN_THREADS}) wc[j] = 0;
    __syncthreads();
    const unsigned same = match_any(e);
    const int rank = __popc(same & ((1u << lane) - 1u));
    if (e >= 0 && rank == 0) wc[warp * E + e] = __popc(same);
    __syncthreads();
    for (int x = tid; x < E; x += ${ALIGN_THREADS}) {
      int s = run[x];
      for (int w = 0; w < ${ALIGN_WARPS}; w++) { const int c = wc[w * E + x]; wc[w * E + x] = s; s += c; }
      run[x] = s;
    }
    __syncthreads();
    if (e >= 0) sorted[start[e] + wc[warp * E + e] + rank] = i;
    __syncthreads(); // wc is cleared for the next tile
  }
}`;
  return { src, name: 'moe_align', sig: ['ptr', 'ptr', 'ptr', 'ptr', 'ptr', 'i32', 'i32', 'i32', 'i32', 'i32'] as ArgType[] };
}

function cudaMoeAlign(p: MoeAlignParams): void {
  const op = 'llm.moe_align';
  const it = p.ids.dtype as 'int32' | 'int64';
  requireDType(op, it, ['int32', 'int64']);
  const k = be.kernel(`moe_align:${it}`, () => moeAlignSource(it));
  const smem = (3 + ALIGN_WARPS) * p.experts * 4;
  if (smem > 48 * 1024) k.setMaxDynamicSharedMemory(smem);
  const err = errorWord();
  be.ctx.launch(k, 1, ALIGN_THREADS, [at(p.ids), at(p.sorted), at(p.blockExperts), at(p.total), err, p.slots, p.experts, p.blockSize, p.capacity, p.blocks], smem, be.stream);
  const v = readError(op);
  if (v !== 0n) {
    const pos = Number(v & ((1n << KIND_SHIFT) - 1n));
    throw new IndexError(op, `expert id at position ${pos} of expert_ids is out of range for ${p.experts} experts`);
  }
}

// ---- grouped_expert_gemm --------------------------------------------------------------------------------

/**
 * A CTA's tile: bm rows (the block size), bn output features, bk of K per pipeline stage, `stages` stages
 * in flight, wm × wn warps. Shared-memory rows are bk + 8 elements long (ldmatrix without bank conflicts).
 */
export interface GemmTile { bm: number; bn: number; bk: number; stages: number; wm: number; wn: number }

/**
 * The tile for a block size: bn 128, bk 32, 4 stages by default. NBX_MOE_GEMM_TILE="bn,bk,stages" (bn 128
 * or 256, bk 32 or 64, 2-5 stages) picks another, for measuring (scripts/moe-bench.mjs). A CTA reads
 * (bm + bn)·K elements for 2·bm·bn·K flops, through L2 for the most part (every expert's tile is read by
 * each of its row blocks): the card's first run (about 200 TFLOP/s at 2048 tokens, 44 flops a byte for
 * 64 × 128) works out near L2's bandwidth, hence the larger tiles to measure (bm 128 with bn 256: warps of
 * 64 × 64, 128 accumulators, one CTA of 8 warps per SM).
 */
export function gemmTile(bm: number, spec = (globalThis as { process?: { env?: Record<string, string | undefined> } }).process?.env?.NBX_MOE_GEMM_TILE): GemmTile {
  let bn = 128, bk = 32, stages = 4;
  if (spec) {
    const v = spec.split(',').map(Number);
    if (v.length !== 3 || ![128, 256].includes(v[0]!) || ![32, 64].includes(v[1]!) || !(v[2]! >= 2 && v[2]! <= 5)) {
      throw new ValueError('llm.grouped_expert_linear', `NBX_MOE_GEMM_TILE must be "bn,bk,stages" with bn 128 or 256, bk 32 or 64, 2 to 5 stages; got '${spec}' for block size ${bm}`);
    }
    [bn, bk, stages] = v as [number, number, number];
  }
  // warps: 64 × 32 (bm 128), 32 × 64 (bm 64), bm × 32 (bm 16, 32 with bn 128), bm × 64 or 64 × 64 (bn 256)
  const wm = bm >= 64 ? 2 : 1, wn = bm === 64 && bn === 128 ? 2 : 4;
  return { bm, bn, bk, stages, wm, wn };
}
/** The moe_align block sizes the kernel's row tiles cover. */
export const GEMM_BLOCK_SIZES: readonly number[] = [16, 32, 64, 128];
export const GEMM_DTYPES: readonly DTypeName[] = ['bfloat16', 'float16'];

/** Dynamic shared memory of the stage ring for a row tile of BM. */
export const gemmSmem = (t: GemmTile): number => t.stages * (t.bm + t.bn) * (t.bk + 8) * 2;

export function groupedGemmSource(d: 'bfloat16' | 'float16', tile: GemmTile, rd: DTypeName | null) {
  const bf = d === 'bfloat16', ty = bf ? 'bf16' : 'f16';
  const { bm, bn: BN, bk: BK, stages: STAGES, wm, wn } = tile, LDS = BK + 8;
  const NT = wm * wn * 32, WTM = bm / wm, WTN = BN / wn, MT = WTM / 16, NTL = WTN / 8;
  const RT = rd ? R.storageType(rd) : 'float';
  const scale = rd ? `(float)${R.load(rd, 'rw', 's')}` : '1.0f';
  const f2 = bf ? 'nbx_f2bf' : 'nbx_f2h';
  const src = `
typedef unsigned int u32;
#ifdef NBX_EMU
${CP_ASYNC_EMU}
__device__ __forceinline__ void ldsm4(u32 (&r)[4], const void* p) { emu_ldmatrix_x4(r, p, false); }
__device__ __forceinline__ void mma16816(float (&c)[4], const u32 (&a)[4], u32 b0, u32 b1) { emu_mma16816(c, a, b0, b1, ${bf}); }
#else
${CP_ASYNC_DEVICE}
__device__ __forceinline__ void ldsm4(u32 (&r)[4], const void* p) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];"
    : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]) : "r"((unsigned)__cvta_generic_to_shared(p)));
}
__device__ __forceinline__ void mma16816(float (&c)[4], const u32 (&a)[4], u32 b0, u32 b1) {
  asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.${ty}.${ty}.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"
    : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3]) : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}
#endif
extern "C" __global__ void __launch_bounds__(${NT}${NT >= 256 ? `, ${MT * NTL > 16 ? 1 : 2}` : ''}) grouped_expert_gemm(const unsigned short* __restrict__ x,
  const unsigned short* __restrict__ w, const int* __restrict__ sorted, const int* __restrict__ bexp, const int* __restrict__ totalp,
  const ${RT}* __restrict__ rw, unsigned short* __restrict__ out, unsigned long long* __restrict__ err,
  int topK, int M, int E, int O, int K, int BS, int cap, int perSlot) {
  extern __shared__ __align__(16) unsigned char smem_[];
  unsigned short* As = (unsigned short*)smem_;               // [STAGES][BM][LDS]
  unsigned short* Bs = As + ${STAGES * bm * LDS};             // [STAGES][BN][LDS]
  __shared__ int rowSrc[${bm}];  // row of x for each position of the tile (-1: padding)
  __shared__ int rowSlot[${bm}]; // slot of out it is written to (-1: none)
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5, g = lane >> 2, t = lane & 3;
  int tot = totalp[0];
  if (tot < 0 || tot > cap) {
    if (tid == 0 && blockIdx.x == 0 && blockIdx.y == 0) atomicMax(err, 3ull << ${KIND_SHIFT});
    tot = tot < 0 ? 0 : cap;
  }
  const int p0 = blockIdx.x * ${bm};
  if (p0 >= tot) return;
  const int e = bexp[p0 / BS];
  if (e < 0 || e >= E) {
    if (tid == 0 && blockIdx.y == 0) atomicMax(err, (2ull << ${KIND_SHIFT}) | (unsigned long long)(p0 / BS));
    return;
  }
  for (int i = tid; i < ${bm}; i += ${NT}) {
    const int p = p0 + i;
    int s = p < tot ? sorted[p] : M;
    if (s < 0 || s > M) { if (blockIdx.y == 0) atomicMax(err, (1ull << ${KIND_SHIFT}) | (unsigned long long)p); s = M; }
    rowSlot[i] = s < M ? s : -1;
    rowSrc[i] = s < M ? (perSlot ? s : s / topK) : -1;
  }
  __syncthreads();
  const int n0 = blockIdx.y * ${BN};
  const unsigned short* we = w + (long long)e * O * K;
  const int KT = (K + ${BK - 1}) / ${BK};
  // one stage: the tile's BM rows of x and BN rows of the expert's weight, K columns k0 .. k0 + BK (K is a
  // multiple of 8: a 16-byte chunk is wholly in or out; out-of-range chunks are zero-filled)
  auto load = [&](int stage, int kt) {
    const int k0 = kt * ${BK};
    unsigned short* as = As + stage * ${bm * LDS};
    unsigned short* bs = Bs + stage * ${BN * LDS};
    for (int c = tid; c < ${bm * (BK / 8)}; c += ${NT}) {
      const int r = c / ${BK / 8}, cc = (c % ${BK / 8}) * 8, src = rowSrc[r];
      const bool ok = src >= 0 && k0 + cc < K;
      cp16(as + r * ${LDS} + cc, ok ? (const void*)(x + (long long)src * K + k0 + cc) : (const void*)x, ok);
    }
    for (int c = tid; c < ${BN * (BK / 8)}; c += ${NT}) {
      const int r = c / ${BK / 8}, cc = (c % ${BK / 8}) * 8, o = n0 + r;
      const bool ok = o < O && k0 + cc < K;
      cp16(bs + r * ${LDS} + cc, ok ? (const void*)(we + (long long)o * K + k0 + cc) : (const void*)w, ok);
    }
  };
  const int wm0 = (warp / ${wn}) * ${WTM}, wn0 = (warp % ${wn}) * ${WTN};
  float acc[${MT}][${NTL}][4];
#pragma unroll
  for (int i = 0; i < ${MT}; i++)
#pragma unroll
    for (int j = 0; j < ${NTL}; j++) acc[i][j][0] = acc[i][j][1] = acc[i][j][2] = acc[i][j][3] = 0.0f;
#pragma unroll
  for (int s = 0; s < ${STAGES - 1}; s++) { if (s < KT) load(s, s); cp_commit(); }
  for (int kt = 0; kt < KT; kt++) {
    cp_wait<${STAGES - 2}>();
    __syncthreads(); // stage kt landed for every thread; stage kt - 1 is free to refill
    if (kt + ${STAGES - 1} < KT) load((kt + ${STAGES - 1}) % ${STAGES}, kt + ${STAGES - 1});
    cp_commit();
    const unsigned short* as = As + (kt % ${STAGES}) * ${bm * LDS};
    const unsigned short* bs = Bs + (kt % ${STAGES}) * ${BN * LDS};
#pragma unroll
    for (int ks = 0; ks < ${BK / 16}; ks++) {
      u32 a[${MT}][4], b[${NTL / 2}][4];
#pragma unroll
      for (int i = 0; i < ${MT}; i++) ldsm4(a[i], as + (wm0 + i * 16 + (lane & 15)) * ${LDS} + ks * 16 + (lane >> 4) * 8);
#pragma unroll
      for (int j = 0; j < ${NTL / 2}; j++) ldsm4(b[j], bs + (wn0 + j * 16 + ((lane >> 4) << 3) + (lane & 7)) * ${LDS} + ks * 16 + ((lane >> 3) & 1) * 8);
#pragma unroll
      for (int i = 0; i < ${MT}; i++)
#pragma unroll
        for (int j = 0; j < ${NTL / 2}; j++) { mma16816(acc[i][2 * j], a[i], b[j][0], b[j][1]); mma16816(acc[i][2 * j + 1], a[i], b[j][2], b[j][3]); }
    }
  }
  cp_wait<0>();
  // epilogue: rows g and g + 8 of each 16-row tile, columns 2t, 2t + 1 of each 8-column tile
#pragma unroll
  for (int i = 0; i < ${MT}; i++) {
#pragma unroll
    for (int h = 0; h < 2; h++) {
      const int s = rowSlot[wm0 + i * 16 + g + h * 8];
      if (s < 0) continue;
      const float sc = ${scale};
      unsigned short* orow = out + (long long)s * O;
#pragma unroll
      for (int j = 0; j < ${NTL}; j++) {
        const int col = n0 + wn0 + j * 8 + 2 * t;
        const float v0 = acc[i][j][2 * h] * sc, v1 = acc[i][j][2 * h + 1] * sc;
        if ((O & 1) == 0 && col + 1 < O) *reinterpret_cast<u32*>(orow + col) = (u32)${f2}(v0) | ((u32)${f2}(v1) << 16);
        else { if (col < O) orow[col] = ${f2}(v0); if (col + 1 < O) orow[col + 1] = ${f2}(v1); }
      }
    }
  }
}`;
  return { src, name: 'grouped_expert_gemm', sig: ['ptr', 'ptr', 'ptr', 'ptr', 'ptr', 'ptr', 'ptr', 'ptr', 'i32', 'i32', 'i32', 'i32', 'i32', 'i32', 'i32', 'i32'] as ArgType[] };
}

// ---- grouped_expert_gemm90 (Hopper) -------------------------------------------------------------------------

/**
 * The Hopper kernel's CTA tile: bm rows (64 or 128, dividing the block size), bn weight rows, `stages` ring
 * slots of 64 of K; ws: warp-specialized (a producer warpgroup loads, TMA for the weight; two consumer
 * warpgroups only multiply) instead of every thread loading and multiplying.
 */
export interface Gemm90Tile { bm: number; bn: number; stages: number; ws: boolean }
/** Threads of a CTA: two consumer warpgroups, and the producer's in the warp-specialized kernel. */
export const gemm90Threads = (t: Gemm90Tile): number => (t.ws ? 384 : 256);
/**
 * The tile for a block size: 128 x 256 at block size 128 (a warpgroup's m64n256: 128 accumulators a
 * thread), 64 x 256 at 64 (two warpgroups side by side, m64n128 each), 4 slots, warp-specialized;
 * NBX_MOE_GEMM90_TILE="bm,bn,stages[,ws]" (bm 64/128 dividing the block size, bn 128/256, 3-5 stages within
 * 227 KiB) picks another, for measuring.
 */
export function gemm90Tile(bs: number, spec = (globalThis as { process?: { env?: Record<string, string | undefined> } }).process?.env?.NBX_MOE_GEMM90_TILE): Gemm90Tile {
  // warp-specialized by default: on the H200 (BENCHMARKS.md, sixth session) the Mixtral layer's grouped path took
  // 1.62 ms (64,256,4,ws) vs 2.80 (64,256,4) at 512 tokens, 4.28 ms (128,256,4,ws) vs 4.51 (128,256,4) at 2048
  let t: Gemm90Tile = { bm: bs >= 128 ? 128 : 64, bn: 256, stages: 4, ws: true };
  if (spec) {
    const f = spec.split(','), v = f.slice(0, 3).map(Number);
    const c: Gemm90Tile = { bm: v[0]!, bn: v[1]!, stages: v[2]!, ws: f[3] === 'ws' };
    if ((f.length !== 3 && !(f.length === 4 && c.ws)) || ![64, 128].includes(c.bm) || bs % c.bm !== 0 || ![128, 256].includes(c.bn) || !(c.stages >= 3 && c.stages <= 5) || gemm90Smem(c) > 227 * 1024) {
      throw new ValueError('llm.grouped_expert_linear', `NBX_MOE_GEMM90_TILE must be "bm,bn,stages" or "bm,bn,stages,ws" with bm 64 or 128 dividing the block size (${bs}), bn 128 or 256, 3 to 5 stages within 227 KiB of shared memory; got '${spec}'`);
    }
    t = c;
  }
  return t;
}
/** Dynamic shared memory: the ring (128-byte rows of x and of the weight per slot), 1 KiB to align it for the 128B swizzle, the ring's mbarriers. */
export const gemm90Smem = (t: Gemm90Tile): number => t.stages * (t.bm + t.bn) * 128 + 1024 + 16 * t.stages;
/** The moe_align block sizes the Hopper kernel covers. */
export const GEMM90_BLOCK_SIZES: readonly number[] = [64, 128];
/** Words of the warp-specialized kernel's last parameter (the weight's TMA descriptor, 128 bytes). */
export const GEMM90_TMA_WORDS = 16;

export function groupedGemm90Source(d: 'bfloat16' | 'float16', tile: Gemm90Tile, rd: DTypeName | null) {
  const bf = d === 'bfloat16';
  const { bm: BM, bn: BN, stages: ST, ws: WS } = tile;
  const NT = gemm90Threads(tile);
  // a consumer warpgroup's tile: 64 rows; at BM 128 consumer g takes rows 64g.. and every column, at BM 64
  // both take the 64 rows and consumer g the columns g·BN/2..
  const WN = BM === 128 ? BN : BN / 2, NR = WN / 2;
  const RT = rd ? R.storageType(rd) : 'float';
  const scale = rd ? `(float)${R.load(rd, 'rw', 's')}` : '1.0f';
  const f2 = bf ? 'nbx_f2bf' : 'nbx_f2h';
  // one stage's rows of x (gathered: cp.async by the loading threads, `lt` of `ln`); the weight's rows the same
  // way, or (warp-specialized) one TMA box of 64 x BN from the descriptor (rows past O arrive as zeros)
  const loadA = (lt: string, ln: number): string => `
    #pragma unroll
    for (int c = ${lt}; c < ${BM * 8}; c += ${ln}) {
      const int r = c >> 3, ch = c & 7, src = rowSrc[r];
      const bool ok = src >= 0 && k0 + ch * 8 < K;
      cp16(as + r * 128 + ((ch ^ (r & 7)) << 4), ok ? (const void*)(x + (long long)src * K + k0 + ch * 8) : (const void*)x, ok);
    }`;
  const loadB = `
    #pragma unroll
    for (int c = tid; c < ${BN * 8}; c += ${NT}) {
      const int r = c >> 3, ch = c & 7, o = n0 + r;
      const bool ok = o < O && k0 + ch * 8 < K;
      cp16(bs + r * 128 + ((ch ^ (r & 7)) << 4), ok ? (const void*)(we + (long long)o * K + k0 + ch * 8) : (const void*)w, ok);
    }`;
  const mma = `
    wg_arrive();
    #pragma unroll
    for (int ks = 0; ks < 4; ks++) wg_ss${WN}(acc, sw128_desc(a0 + ks * 32, 16, 1024), sw128_desc(b0 + ks * 32, 16, 1024), kt > 0 || ks > 0);
    wg_commit();
    wg_wait<1>();`;
  const mainloop = WS ? `
  const u32 bars = smem_u32(sB + ${ST * BN * 128});
  auto full = [&](int s) { return bars + 8u * s; };
  auto empty = [&](int s) { return bars + 8u * (${ST} + s); };
  if (tid == 0) {
    // full: the producer's 128 deferred cp.async arrivals and the TMA thread's arrival with the box's bytes;
    // empty: one arrival per consumer warp
    for (int s = 0; s < ${ST}; s++) { mbar_init(full(s), 129); mbar_init(empty(s), 8); }
    init_fence();
  }
  __syncthreads();
  const int wg = tid >> 7;
  if (wg == 0) {
    // ---- producer: tile kt into slot kt mod ${ST} once both consumers released its previous tile; never waits for its own copies
    reg_dealloc<40>();
    for (int kt = 0; kt < KT; kt++) {
      const int slot = kt % ${ST}, k0 = kt * 64;
      if (kt >= ${ST}) mbar_wait(empty(slot), ((kt / ${ST}) + 1) & 1, 1, kt - ${ST});
      unsigned char* as = sA + slot * ${BM * 128};
      if (tid == 0) { mbar_arrive_tx(full(slot), ${BN * 128}); tma_load4(smem_u32(sB + slot * ${BN * 128}), &tb, k0, n0, e, 0, full(slot)); }
${loadA('tid', 128)}
      cp_arrive(full(slot));
    }
    cp_wait_all(); // (its deferred arrivals are counted by the consumers' waits; nothing in flight at exit)
    return;
  }
  reg_alloc<232>();
  const int cg = wg - 1; // consumer warpgroup
  const u32 aOff = ${BM === 128 ? 'cg * 64 * 128' : '0'}, bOff = ${BM === 128 ? '0' : `cg * ${WN * 128}`};
  float acc[${NR}];
  for (int kt = 0; kt < KT; kt++) {
    const int slot = kt % ${ST};
    mbar_wait(full(slot), (kt / ${ST}) & 1, 0, kt);
    proxy_fence(); // the cp.async rows came through the generic proxy, wgmma reads through the async proxy
    const u32 a0 = smem_u32(sA + slot * ${BM * 128}) + aOff, b0 = smem_u32(sB + slot * ${BN * 128}) + bOff;${mma}
    // tile kt - 1's wgmma is done: its slot is free (one arrival per warp)
    if (kt > 0 && (tid & 31) == 0) mbar_arrive(empty((kt - 1) % ${ST}));
  }
  wg_wait<0>();
  reg_fence${WN}(acc);
  const int wgE = cg;` : `
  const int wg = tid >> 7;
  const u32 aOff = ${BM === 128 ? 'wg * 64 * 128' : '0'}, bOff = ${BM === 128 ? '0' : `wg * ${WN * 128}`};
  auto load = [&](int slot, int kt) {
    const int k0 = kt * 64;
    unsigned char* as = sA + slot * ${BM * 128};
    unsigned char* bs = sB + slot * ${BN * 128};${loadA('tid', NT)}${loadB}
  };
  float acc[${NR}];
  #pragma unroll
  for (int s = 0; s < ${ST - 2}; s++) { if (s < KT) load(s, s); cp_commit(); }
  for (int kt = 0; kt < KT; kt++) {
    cp_wait<${ST - 3}>();
    proxy_fence(); // cp.async wrote the tile through the generic proxy, wgmma reads through the async proxy
    __syncthreads(); // tile kt is in for every thread; every warpgroup's wgmma of tile kt - 2 is done
    if (kt + ${ST - 2} < KT) load((kt + ${ST - 2}) % ${ST}, kt + ${ST - 2});
    cp_commit();
    const int slot = kt % ${ST};
    const u32 a0 = smem_u32(sA + slot * ${BM * 128}) + aOff, b0 = smem_u32(sB + slot * ${BN * 128}) + bOff;${mma}
  }
  wg_wait<0>();
  reg_fence${WN}(acc);
  const int wgE = wg;`;
  const name = WS ? 'grouped_expert_gemm90ws' : 'grouped_expert_gemm90';
  const src = `${wgmmaHelpers(bf, [WN])}
#ifdef NBX_EMU
__device__ __forceinline__ void cp_commit() {}
template <int N> __device__ __forceinline__ void cp_wait() {}
#else
__device__ __forceinline__ void cp_commit() { asm volatile("cp.async.commit_group;" ::: "memory"); }
template <int N> __device__ __forceinline__ void cp_wait() { asm volatile("cp.async.wait_group %0;" :: "n"(N) : "memory"); }
#endif
${WS ? `#if !defined(__grid_constant__) && !defined(NBX_EMU)
#define __grid_constant__ __attribute__((grid_constant))
#endif
#ifdef NBX_EMU
#define __grid_constant__
#endif
// the weight's TMA descriptor (CUtensorMap: 128 bytes, 64-aligned), dims {K, O, E, 1}
struct alignas(64) TMap { u64 w[16]; };
` : ''}extern "C" __global__ void __launch_bounds__(${NT}, 1) ${name}(const u16* __restrict__ x,
  const u16* __restrict__ w, const int* __restrict__ sorted, const int* __restrict__ bexp, const int* __restrict__ totalp,
  const ${RT}* __restrict__ rw, u16* __restrict__ out, unsigned long long* __restrict__ err,
  int topK, int M, int E, int O, int K, int BS, int cap, int perSlot${WS ? ', const __grid_constant__ TMap tb' : ''}) {
  extern __shared__ __align__(1024) unsigned char smraw[];
  unsigned char* sm = smraw + ((1024 - (smem_u32(smraw) & 1023)) & 1023);
  unsigned char* sA = sm;                    // ${ST} x [${BM}][64]: rows of x, 128B-swizzled
  unsigned char* sB = sm + ${ST * BM * 128};  // ${ST} x [${BN}][64]: rows of the expert's weight
  __shared__ int rowSrc[${BM}];  // row of x for each position of the tile (-1: padding)
  __shared__ int rowSlot[${BM}]; // slot of out it is written to (-1: none)
  const int tid = threadIdx.x;
  int tot = totalp[0];
  if (tot < 0 || tot > cap) {
    if (tid == 0 && blockIdx.x == 0 && blockIdx.y == 0) atomicMax(err, 3ull << ${KIND_SHIFT});
    tot = tot < 0 ? 0 : cap;
  }
  const int p0 = blockIdx.x * ${BM};
  if (p0 >= tot) return;
  const int e = bexp[p0 / BS];
  if (e < 0 || e >= E) {
    if (tid == 0 && blockIdx.y == 0) atomicMax(err, (2ull << ${KIND_SHIFT}) | (unsigned long long)(p0 / BS));
    return;
  }
  for (int i = tid; i < ${BM}; i += ${NT}) {
    const int p = p0 + i;
    int s = p < tot ? sorted[p] : M;
    if (s < 0 || s > M) { if (blockIdx.y == 0) atomicMax(err, (1ull << ${KIND_SHIFT}) | (unsigned long long)p); s = M; }
    rowSlot[i] = s < M ? s : -1;
    rowSrc[i] = s < M ? (perSlot ? s : s / topK) : -1;
  }
  __syncthreads();
  const int n0 = blockIdx.y * ${BN};
  const u16* we = w + (long long)e * O * K;
  const int KT = (K + 63) / 64;
  // a stage: 16-byte chunk ch of row r at r·128 + ((ch ^ r mod 8)·16), the hardware's 128B swizzle (K is a
  // multiple of 8: a chunk is wholly in or out; out-of-range chunks and padding rows are zero-filled)
${mainloop}
  // epilogue: the m64nN accumulator layout: warp q of the warpgroup holds rows 16q + lane/4 (+ 8), columns
  // 8j + 2·(lane mod 4) (+ 1) of its 64 x ${WN} tile
  const int lane = tid & 31, q = (tid >> 5) & 3;
  const int rBase = ${BM === 128 ? 'wgE * 64' : '0'} + 16 * q + (lane >> 2), cBase = n0 + ${BM === 128 ? '0' : `wgE * ${WN}`} + 2 * (lane & 3);
  #pragma unroll
  for (int h = 0; h < 2; h++) {
    const int s = rowSlot[rBase + 8 * h];
    if (s < 0) continue;
    const float sc = ${scale};
    u16* orow = out + (long long)s * O;
    #pragma unroll
    for (int j = 0; j < ${WN / 8}; j++) {
      const int col = cBase + 8 * j;
      const float v0 = acc[4 * j + 2 * h] * sc, v1 = acc[4 * j + 2 * h + 1] * sc;
      if ((O & 1) == 0 && col + 1 < O) *reinterpret_cast<u32*>(orow + col) = (u32)${f2}(v0) | ((u32)${f2}(v1) << 16);
      else { if (col < O) orow[col] = ${f2}(v0); if (col + 1 < O) orow[col + 1] = ${f2}(v1); }
    }
  }
}`;
  const sig: ArgType[] = ['ptr', 'ptr', 'ptr', 'ptr', 'ptr', 'ptr', 'ptr', 'ptr', 'i32', 'i32', 'i32', 'i32', 'i32', 'i32', 'i32', 'i32', ...Array<ArgType>(WS ? GEMM90_TMA_WORDS : 0).fill('u64')];
  return { src, name, sig };
}

/**
 * Whether the Hopper kernel runs: compute capability exactly 9.0 (sm_90a code runs on nothing else) and the
 * matched profile's matrix unit is the warpgroup MMA (the facts attention.ts's Hopper kernel asks), and
 * NBX_MOE_GEMM90 is not '0'.
 */
export function gemm90Enabled(): boolean {
  const v = (globalThis as { process?: { env?: Record<string, string | undefined> } }).process?.env?.NBX_MOE_GEMM90;
  if (v === '0' || !be) return false;
  const cc = be.ctx.info.cc;
  return cc[0] === 9 && cc[1] === 0 && be.tuning.profile.matrixUnit.name === 'wgmma';
}
const gemm90Kernels = new Map<string, CudaKernel>();
/** The sm_90a kernel (NVRTC target sm_90a: wgmma needs the arch-specific target), compiled once per specialization. */
function gemm90Kernel(d: 'bfloat16' | 'float16', tile: Gemm90Tile, rd: DTypeName | null): CudaKernel {
  const key = `${d}:${tile.bm}:${tile.bn}:${tile.stages}:${tile.ws ? 'ws' : ''}:${rd}`;
  let k = gemm90Kernels.get(key);
  if (!k) {
    const { src, name, sig } = groupedGemm90Source(d, tile, rd);
    const cc = be.ctx.info.cc;
    k = getKernel(be.ctx, `${CUDA_PRELUDE}\n${src}`, name, sig, { options: ['--std=c++17'], includeCudaHeaders: false, arch: `sm_${cc[0]}${cc[1]}a`, name });
    k.setMaxDynamicSharedMemory(gemm90Smem(tile));
    gemm90Kernels.set(key, k);
  }
  return k;
}
/**
 * The weight's TMA descriptor for the warp-specialized kernel: [E, O, K] as dims {K, O, E, 1}, a box of 64 x
 * bn, 128B swizzle; null where TMA cannot address it (base not 16-byte aligned) or the driver lacks it.
 */
function weightTmaMap(w: StridedRef, dt: 'bfloat16' | 'float16', E: number, O: number, K: number, bn: number): BigUint64Array | null {
  const addr = at(w);
  if (addr % 16n !== 0n || (K * 2) % 16 !== 0) return null;
  return encodeTensorMapTiled(CU_TENSOR_MAP_DATA_TYPE[dt], addr, [K, O, E, 1], [K * 2, O * K * 2, E * O * K * 2], [64, bn, 1, 1], CU_TENSOR_MAP_SWIZZLE.b128);
}
/** Launches of each grouped kernel (tests check which one ran). */
export const moeStats = { gemm: 0, gemm90: 0, gemm90ws: 0 };

function cudaGroupedExpertGemm(p: GroupedExpertGemmParams): void {
  const op = 'llm.grouped_expert_linear';
  const d = p.x.dtype;
  requireDType(op, d, GEMM_DTYPES);
  if (!GEMM_BLOCK_SIZES.includes(p.blockSize)) throw new IndexError(op, `block_size ${p.blockSize} is not one of the kernel's row tiles (${GEMM_BLOCK_SIZES.join(', ')})`);
  if (p.blocks === 0 || p.outFeatures === 0) return;
  const rd = p.routing ? p.routing.dtype : null;
  const args = (err: bigint) => [at(p.x), at(p.weight), at(p.sorted), at(p.blockExperts), at(p.total), at(p.routing), at(p.out), err,
    p.topK, p.slots, p.experts, p.outFeatures, p.inFeatures, p.blockSize, p.capacity, p.xPerSlot ? 1 : 0];
  if (GEMM90_BLOCK_SIZES.includes(p.blockSize) && gemm90Enabled()) {
    let t = gemm90Tile(p.blockSize);
    // the warp-specialized kernel loads the weight by TMA; a weight TMA cannot address takes the other one
    const map = t.ws ? weightTmaMap(p.weight, d as 'bfloat16' | 'float16', p.experts, p.outFeatures, p.inFeatures, t.bn) : null;
    if (t.ws && !map) t = { ...t, ws: false };
    const k = gemm90Kernel(d as 'bfloat16' | 'float16', t, rd);
    be.ctx.launch(k, [p.blocks * (p.blockSize / t.bm), Math.ceil(p.outFeatures / t.bn)], gemm90Threads(t), [...args(errorWord()), ...(map ?? [])], gemm90Smem(t), be.stream);
    moeStats.gemm90++;
    if (t.ws) moeStats.gemm90ws++;
  } else {
    const tile = gemmTile(p.blockSize), { bm, bn, bk, stages, wm, wn } = tile;
    const k = be.kernel(`moe_gemm:${d}:${bm}:${bn}:${bk}:${stages}:${rd}`, () => groupedGemmSource(d as 'bfloat16' | 'float16', tile, rd));
    const smem = gemmSmem(tile);
    if (smem > 48 * 1024) k.setMaxDynamicSharedMemory(smem);
    be.ctx.launch(k, [p.blocks, Math.ceil(p.outFeatures / bn)], wm * wn * 32, args(errorWord()), smem, be.stream);
    moeStats.gemm++;
  }
  const v = readError(op);
  if (v !== 0n) {
    const kind = Number(v >> KIND_SHIFT), pos = Number(v & ((1n << KIND_SHIFT) - 1n));
    throw new IndexError(op, kind === 3 ? `num_tokens_post_padded is outside [0, ${p.capacity}] (the length of sorted_token_ids)`
      : kind === 2 ? `block_expert_ids[${pos}] is out of range for ${p.experts} experts`
        : `sorted_token_ids[${pos}] is outside [0, ${p.slots}] (${p.slots} = padding)`);
  }
}

export const kernels = { moe_align: cudaMoeAlign, grouped_expert_gemm: cudaGroupedExpertGemm } satisfies BackendKernels;
/** Facts the operations read (merged into the 'llm' family's features). */
export const llmFeatures = { groupedGemmDtypes: GEMM_DTYPES, groupedGemmBlockSizes: GEMM_BLOCK_SIZES };
