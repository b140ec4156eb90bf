// Small-M GEMM (m ≤ 16 rows, or n ≤ 16 columns as in mv) on CUDA: a GEMV-style kernel that streams
// the weight once with 16-byte loads. At these shapes the product is bound by reading the weight
// (32 MB for a 4096² bf16 matrix, ~7 µs at the H200's HBM bandwidth); cuBLASLt's tensor-core tiles
// are 64+ rows tall, and for m ≤ 16 it pays for tiles it mostly leaves empty plus a split-K pass.
//
// The problem is normalised to  O[i, j] = alpha · Σ_l X[i, l] · W(l, j)  (+ beta · O[i, j] + bias[j])
// for i < m ≤ 16 rows of a small operand X and the big operand W in one of two layouts:
//   'nk'  W(l, j) at W[j·ldw + l]  (linear's weight [N, K]; mv's matrix): a warp owns `cols` outputs
//         columns and its lanes stride K with vector loads; one butterfly of warp shuffles per output.
//   'kn'  W(l, j) at W[l·ldw + j]  (x @ w with w row-major [K, N]): a thread owns CV adjacent columns
//         (one vector load per row), the 8 warps of a block take interleaved rows of a K chunk and meet
//         in shared memory; K chunks (grid.y) write float partials, and the last block of a column tile
//         to finish (elected by a counter) sums them in chunk order: one launch, no reduction atomics.
// Accumulation is float32 and every sum has a fixed order for a given shape and SM count (no atomics),
// so results are identical run to run. Rows, strides and pointers that do not allow vector loads take
// the scalar loop of the same kernel.
//
// Choice against cuBLASLt: by measurement through the autotuner (space 'cuda.gemv.nk.v3' / 'cuda.gemv.kn.v6',
// knob `impl`), timed on the call's own operands when beta = 0; the default (NBX_AUTOTUNE=off, tiny
// problems, beta ≠ 0 before a measurement exists) is this kernel. `impl` moves bits (a different
// summation order than cuBLASLt's); `cols` does not (each column's sum is the same warp's, whatever
// the number of columns per warp).

import { DTYPES } from '../../../dtype/dtypes.js';
import type { StridedRef } from '../../backend.js';
import { R, unpack, type CudaBackend, type CudaBuffer } from '../runtime/backend.js';
import type { ArgType, CudaEvent, CudaKernel } from '../runtime/driver.js';
import { defineSpace, bucketSize, prune, tuneSync, type Config } from '../../../autotune/index.js';
import { TUNE_MIN_ELEMENTS } from '../tuning/spaces.js';
import { Cublas } from '../runtime/cublas.js';
import { CublasLt } from '../runtime/cublaslt.js';
import { UnsupportedError } from '../../../errors.js';
import type { Expr } from '../../../ir/expr.js';

/** Largest small dimension (rows of X) this path takes. */
export const GEMV_MAX_ROWS = 16;
const WARPS = 8;
const THREADS = WARPS * 32;

export type GemvDType = 'float32' | 'float16' | 'bfloat16';
export type GemvLayout = 'nk' | 'kn';

export const GEMV_NK_SPACE = defineSpace({
  name: 'cuda.gemv.nk.v3',
  knobs: [
    { name: 'impl', values: ['gemv', 'mma', 'cublaslt', 'cublas'], movesBits: true, doc: "the FMA kernel, the tensor-core kernel (float16/bfloat16), cuBLASLt, or cuBLAS's SGEMM (float32: its matrix-vector kernels)" },
    { name: 'cols', values: [1, 2, 4], movesBits: false, doc: "the FMA kernel's output columns per warp" },
    { name: 'nt', values: [1, 2, 4], movesBits: false, doc: "the tensor-core kernel's 8-column tiles per warp" },
    { name: 'split', values: [1, 2, 4], movesBits: true, doc: "the tensor-core kernel's blocks per SM (K chunks)" },
  ],
  defaultConfig: { impl: 'gemv', cols: 2, nt: 2, split: 2 },
  resources: () => ({ threads: THREADS, sharedMemoryBytes: 16 * 1024 }),
  constraint: (cfg) => (cfg.impl !== 'gemv' && cfg.cols !== 2 ? 'cols is the FMA kernel\'s'
    : cfg.impl !== 'mma' && (cfg.nt !== 2 || cfg.split !== 2) ? 'nt and split are the tensor-core kernel\'s' : undefined),
});

/**
 * 'mmat': warps side by side over columns. 4 and 8 were measured slower on the H200 and are not
 * offered; neither is a cp.async ring in shared memory instead of register batches, which was slower
 * at every size tried (figures: BENCHMARKS.md and git history).
 */
const MMAT_WC = [1, 2] as const;

export const GEMV_KN_SPACE = defineSpace({
  name: 'cuda.gemv.kn.v6',
  knobs: [
    { name: 'impl', values: ['gemv', 'mma', 'mmat', 'cublaslt', 'cublas'], movesBits: true,
      doc: "the FMA kernel, the tensor-core kernels (float16/bfloat16; W through shared memory, or transposed in registers), cuBLASLt, or cuBLAS's SGEMM (float32: its matrix-vector kernels)" },
    { name: 'split', values: [1, 2, 4, 8], movesBits: true, doc: 'blocks per SM the K chunks aim for (the chunk partials are summed in another grouping)' },
    { name: 'nt', values: [2, 4, 8], movesBits: false, doc: "the tensor-core kernels' 8-column tiles per warp (2 or 4 for 'mma', 4 or 8 for 'mmat')" },
    { name: 'wc', values: [...MMAT_WC], movesBits: true, doc: "'mmat': warps of a block side by side over columns (the other 8 / wc split K: another summation grouping)" },
  ],
  defaultConfig: { impl: 'gemv', split: 4, nt: 2, wc: 1 },
  resources: () => ({ threads: THREADS, sharedMemoryBytes: 40 * 1024 }),
  constraint: (cfg) => ((cfg.impl === 'cublaslt' || cfg.impl === 'cublas') && (cfg.split !== 4 || cfg.nt !== 2) ? 'split and nt mean nothing to the cuBLAS libraries'
    : cfg.impl === 'gemv' && (cfg.nt !== 2 || cfg.split === 1) ? 'nt is the tensor-core kernels\''
    : cfg.impl === 'mma' && cfg.nt === 8 ? "'mma' takes 2 or 4 tiles"
    : cfg.impl === 'mmat' && cfg.nt === 2 ? "'mmat' takes 4 or 8 tiles"
    : cfg.impl !== 'mmat' && cfg.wc !== 1 ? "wc is 'mmat''s" : undefined),
});

/** Rows rounded up to the kernel's compile-time row count. */
export const rowsFor = (m: number): number => (m <= 1 ? 1 : m <= 2 ? 2 : m <= 4 ? 4 : m <= 8 ? 8 : 16);
/** Elements per 16-byte vector. */
const vecOf = (d: GemvDType): number => 16 / DTYPES[d].itemsize;
/** 'kn': adjacent columns per thread, keeping MR × CV ≤ 32 accumulators. */
export const knColumns = (d: GemvDType, mr: number): number => Math.min(vecOf(d), 32 / mr);
const vecType = (bytes: number): string => (bytes === 16 ? 'uint4' : bytes === 8 ? 'uint2' : 'unsigned');

const HEAD = (d: GemvDType, name: string, extra: string, minBlocks = 1): string => {
  const T = R.storageType(d);
  return `extern "C" __global__ void __launch_bounds__(${THREADS}${minBlocks > 1 ? `, ${minBlocks}` : ''}) ${name}(const ${T}* __restrict__ X, const ${T}* __restrict__ W, ${T}* __restrict__ O,
  const ${T}* __restrict__ bias, ${extra}int m, long long n, long long k, long long xsi, long long xsl, long long ldw, long long osi, long long osj,
  float alpha, float beta, int vec`;
};

/** alpha·acc (+ beta·O) (+ bias[j]), rounded once into O[o]. */
const epilogue = (d: GemvDType, acc: string, o: string, j: string): string =>
  `{ float v_ = alpha * (${acc}); if (beta != 0.f) v_ += beta * ${R.load(d, 'O', o)}; if (bias) v_ += ${R.load(d, 'bias', j)}; ${R.store(d, 'O', o, 'v_')} }`;

/**
 * The start of an 'nk' kernel under programmatic dependent launch (nvrtc.ts): the block's rows of W
 * (`rows` from row `j0`, columns l0 … l1) are requested into L2 before the wait for the previous kernel,
 * so the weight stream of this kernel's first blocks overlaps the previous kernel's tail (W is never an
 * output of the kernels before it in a step; a prefetch is a hint and reads nothing into the SM anyway).
 * Vector-aligned rows only; the wait itself then guards every read of X and write of O.
 */
const prefetchRows = (d: GemvDType, j0: string, rows: number, l0: string, l1: string): string => (PREFETCH_ROW_BYTES > 0 ? `if (vec && threadIdx.x < ${rows}) {
    const long long jp_ = ${j0} + threadIdx.x;
    long long bytes_ = ((${l1} - ${l0}) * ${DTYPES[d].itemsize}) & ~15ll;
    if (bytes_ > ${PREFETCH_ROW_BYTES}) bytes_ = ${PREFETCH_ROW_BYTES};
    if (jp_ < n && bytes_ > 0) NBX_PREFETCH_L2(W + jp_ * ldw + ${l0}, bytes_);
  }
  ` : '') + 'NBX_GRID_DEPENDENCY_WAIT();';

/**
 * Bytes of each weight row a block asks L2 for before its wait: the start of its stream only. Whole
 * slices (tens of KB per block, over every resident block) exceed L2 and evict each other before use.
 * NBX_GEMV_PREFETCH=bytes overrides (0: none), for measuring.
 */
const PREFETCH_ROW_BYTES = (() => {
  const v = Number((globalThis as { process?: { env?: Record<string, string | undefined> } }).process?.env?.NBX_GEMV_PREFETCH ?? 1024);
  return Number.isFinite(v) && v >= 0 ? Math.floor(v / 16) * 16 : 1024;
})();

/**
 * Which fused GEMV forms run (NBX_LLM_FUSED_GEMV=all|none|norm|gated). Default none: with both on, decode
 * measured slower than with the separate norm and activation kernels on the H200 (BENCHMARKS.md, fourth
 * session); declined, the ops run their composites.
 */
let fusedGemv = (globalThis as { process?: { env?: Record<string, string | undefined> } }).process?.env?.NBX_LLM_FUSED_GEMV ?? 'none';
const fusedGemvOn = (form: 'norm' | 'gated'): boolean => fusedGemv === 'all' || fusedGemv === form;
/** Sets which fused GEMV forms run ('all' | 'none' | 'norm' | 'gated'; tests of the kernels); returns the previous setting. */
export function setFusedGemvForms(forms: string): string { const was = fusedGemv; fusedGemv = forms; return was; }

/** 'nk': vector steps per lane whose loads (cols each) are issued before their arithmetic: 4 to 8 loads in flight, fewer for many rows (registers). */
export const nkUnroll = (mr: number, cols: number): number => (mr <= 2 ? Math.max(2, 8 / cols) : mr <= 4 ? Math.max(1, 4 / cols) : mr <= 8 ? Math.max(1, 2 / cols) : 1);

/** Source of the 'nk' kernel for MR rows and `cols` columns per warp. */
export function gemvNkSource(d: GemvDType, mr: number, cols: number): { src: string; name: string; sig: ArgType[] } {
  const T = R.storageType(d), V = vecOf(d), VT = vecType(16), U = nkUnroll(mr, cols);
  // one vector step: W's vectors u[c] (vector index q) times X's rows into the accumulators
  const nkStep = (u: string, q: string): string => `{
        float w[${cols}][${V}];
        #pragma unroll
        for (int c = 0; c < ${cols}; c++) {
          const ${T} e[${V}] = { ${unpack(d, `${u}[c]`, V)} };
          #pragma unroll
          for (int t = 0; t < ${V}; t++) w[c][t] = ${R.load(d, 'e', 't')};
        }
        #pragma unroll
        for (int i = 0; i < ${mr}; i++) {
          if (i < m) {
            const ${VT} ux = *reinterpret_cast<const ${VT}*>(X + i * xsi + (${q}) * ${V});
            const ${T} e[${V}] = { ${unpack(d, 'ux', V)} };
            #pragma unroll
            for (int t = 0; t < ${V}; t++) {
              const float x = ${R.load(d, 'e', 't')};
              #pragma unroll
              for (int c = 0; c < ${cols}; c++) acc[i][c] = fmaf(x, w[c][t], acc[i][c]);
            }
          }
        }
      }`;
  const src = `${HEAD(d, 'gemv_nk', '')}) {
  const int lane = threadIdx.x & 31;
  const long long j0 = ((long long)blockIdx.x * ${WARPS} + (threadIdx.x >> 5)) * ${cols};
  ${prefetchRows(d, `(long long)blockIdx.x * ${WARPS * cols}`, WARPS * cols, '0', 'k')}
  if (j0 >= n) return; // uniform per warp
  float acc[${mr}][${cols}];
  #pragma unroll
  for (int i = 0; i < ${mr}; i++) {
    #pragma unroll
    for (int c = 0; c < ${cols}; c++) acc[i][c] = 0.f;
  }
  if (vec) {
    // lane q takes vectors q, q + 32, ... in increasing order (the summation order); ${U} of them per
    // column are loaded before their arithmetic (more 16-byte loads in flight per lane)
    const long long kv = k / ${V};
    long long q = lane;
    for (; q + ${(U - 1) * 32} < kv; q += ${U * 32}) {
      ${VT} u[${U}][${cols}];
      #pragma unroll
      for (int r = 0; r < ${U}; r++) {
        #pragma unroll
        for (int c = 0; c < ${cols}; c++) {
          const long long j = j0 + c < n ? j0 + c : n - 1; // past the end: a repeated load, never stored
          u[r][c] = *reinterpret_cast<const ${VT}*>(W + j * ldw + (q + r * 32) * ${V});
        }
      }
      #pragma unroll
      for (int r = 0; r < ${U}; r++) ${nkStep('u[r]', `q + r * 32`)}
    }
    for (; q < kv; q += 32) {
      ${VT} u1[${cols}];
      #pragma unroll
      for (int c = 0; c < ${cols}; c++) {
        const long long j = j0 + c < n ? j0 + c : n - 1;
        u1[c] = *reinterpret_cast<const ${VT}*>(W + j * ldw + q * ${V});
      }
      ${nkStep('u1', 'q')}
    }
  } else {
    for (long long l = lane; l < k; l += 32) {
      float w[${cols}];
      #pragma unroll
      for (int c = 0; c < ${cols}; c++) { const long long j = j0 + c < n ? j0 + c : n - 1; w[c] = ${R.load(d, 'W', 'j * ldw + l')}; }
      #pragma unroll
      for (int i = 0; i < ${mr}; i++) {
        if (i < m) {
          const float x = ${R.load(d, 'X', 'i * xsi + l * xsl')};
          #pragma unroll
          for (int c = 0; c < ${cols}; c++) acc[i][c] = fmaf(x, w[c], acc[i][c]);
        }
      }
    }
  }
  #pragma unroll
  for (int i = 0; i < ${mr}; i++) {
    #pragma unroll
    for (int c = 0; c < ${cols}; c++) {
      #pragma unroll
      for (int o = 16; o > 0; o >>= 1) acc[i][c] += __shfl_xor_sync(0xffffffffu, acc[i][c], o);
    }
  }
  if (lane == 0) {
    #pragma unroll
    for (int c = 0; c < ${cols}; c++) {
      const long long j = j0 + c;
      if (j < n) {
        #pragma unroll
        for (int i = 0; i < ${mr}; i++) if (i < m) ${epilogue(d, 'acc[i][c]', 'i * osi + j * osj', 'j')}
      }
    }
  }
}`;
  return { src, name: 'gemv_nk', sig: ['ptr', 'ptr', 'ptr', 'ptr', 'i32', 'i64', 'i64', 'i64', 'i64', 'i64', 'i64', 'i64', 'f32', 'f32', 'i32'] };
}

/**
 * The end of a kernel whose warps left their partial sums in red[slot][row][column of the tile] (a slot
 * per warp, or per group of warps that split K): sums over slots in order, then either the epilogue (one K chunk) or the chunk's partials to P and,
 * in the last block of the column tile to finish (elected by a counter, which it re-arms), the sum of
 * every chunk's partial in chunk order: one launch, no reduction atomics, the same bits every run.
 */
function finishTile(d: GemvDType, mr: number, span: number, slots = WARPS): string {
  return `  __syncthreads();
  for (int t = threadIdx.x; t < ${mr * span}; t += ${THREADS}) {
    const int i = t / ${span}, cc = t % ${span};
    const long long jj = jb + cc;
    if (i < m && jj < n) {
      float s = 0.f;
      #pragma unroll
      for (int w = 0; w < ${slots}; w++) s += red[w][i][cc];
      if (gridDim.y == 1) ${epilogue(d, 's', 'i * osi + jj * osj', 'jj')}
      else P[((long long)blockIdx.y * m + i) * n + jj] = s;
    }
  }
  if (gridDim.y == 1) return;
  __shared__ int last;
  __threadfence();
  __syncthreads();
  if (threadIdx.x == 0) last = atomicAdd(&cnt[blockIdx.x], 1u) == gridDim.y - 1;
  __syncthreads();
  if (!last) return;
  __threadfence();
  const long long ps = (long long)m * n;
  const int gy = (int)gridDim.y;
  for (int t = threadIdx.x; t < ${mr * span}; t += ${THREADS}) {
    const int i = t / ${span}, cc = t % ${span};
    const long long jj = jb + cc;
    if (i < m && jj < n) {
      const float* p = P + (long long)i * n + jj;
      float s = 0.f;
      int y = 0;
      for (; y + 8 <= gy; y += 8) { // eight loads in flight, then added in chunk order
        float v[8];
        #pragma unroll
        for (int q = 0; q < 8; q++) v[q] = __ldcg(p + (y + q) * ps);
        #pragma unroll
        for (int q = 0; q < 8; q++) s += v[q];
      }
      for (; y < gy; y++) s += __ldcg(p + y * ps);
      ${epilogue(d, 's', 'i * osi + jj * osj', 'jj')}
    }
  }
  if (threadIdx.x == 0) cnt[blockIdx.x] = 0u;`;
}

/** 'kn': rows of W whose loads a thread issues before using any (loads in flight vs registers: x values are MR per row). */
export const knUnroll = (mr: number): number => (mr <= 2 ? 8 : mr <= 4 ? 4 : 2);

/** 'kn': rows of X's shared-memory tile (8 KB of floats), a whole number of the warps' unrolled row batches. */
export const knTileRows = (mr: number): number => Math.max(WARPS * knUnroll(mr), 2048 / mr);

/** Source of the 'kn' kernel for MR rows (CV adjacent columns per thread) and its partial-sum finisher. */
export function gemvKnSource(d: GemvDType, mr: number): { src: string; name: string; sig: ArgType[] } {
  const T = R.storageType(d), CV = knColumns(d, mr), VB = CV * DTYPES[d].itemsize, VT = vecType(VB), U = knUnroll(mr);
  const span = 32 * CV, TL = knTileRows(mr);
  // one row (local index r of the tile) of W, already loaded as u, into the accumulators; X's values
  // come from the tile in shared memory (rows past m are zeros there: no branch per row)
  const fmaRow = (u: string, r: string): string => `{
          const ${T} e[${CV}] = { ${unpack(d, u, CV)} };
          #pragma unroll
          for (int i = 0; i < ${mr}; i++) {
            const float x = xs[${r}][i];
            #pragma unroll
            for (int c = 0; c < ${CV}; c++) acc[i][c] = fmaf(x, ${R.load(d, 'e', 'c')}, acc[i][c]);
          }
        }`;
  const src = `${HEAD(d, 'gemv_kn', 'float* __restrict__ P, unsigned* __restrict__ cnt, long long kchunk, ', 2)}) {
  __shared__ float red[${WARPS}][${mr}][${span}];
  __align__(16) __shared__ float xs[${TL}][${mr}];
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const long long jb = (long long)blockIdx.x * ${span}, j = jb + lane * ${CV};
  const long long l0 = (long long)blockIdx.y * kchunk, l1 = l0 + kchunk < k ? l0 + kchunk : k;
  float acc[${mr}][${CV}];
  #pragma unroll
  for (int i = 0; i < ${mr}; i++) {
    #pragma unroll
    for (int c = 0; c < ${CV}; c++) acc[i][c] = 0.f;
  }
  // The chunk in tiles of ${TL} rows: X's tile is staged once per block in shared memory as floats
  // (one ${mr * 4}-byte shared load per W row instead of ${mr} global loads per thread).
  for (long long t0 = l0; t0 < l1; t0 += ${TL}) {
    const int tn = (int)(l1 - t0 < ${TL} ? l1 - t0 : ${TL});
    __syncthreads(); // the previous tile is consumed
    for (int e = threadIdx.x; e < tn * ${mr}; e += ${THREADS}) {
      const int i = e / tn, r = e - i * tn;
      xs[r][i] = i < m ? ${R.load(d, 'X', 'i * xsi + (t0 + r) * xsl')} : 0.f;
    }
    __syncthreads();
    if (j < n) {
      // warp w takes rows w, w + ${WARPS}, ... of each tile in increasing order (the summation order);
      // ${U} rows' loads are issued before their arithmetic, so each thread keeps ${U * VB} bytes in flight
      int r = warp;
      if (vec) {
        for (; r + ${(U - 1) * WARPS} < tn; r += ${U * WARPS}) {
          ${VT} u[${U}];
          #pragma unroll
          for (int q = 0; q < ${U}; q++) u[q] = *reinterpret_cast<const ${VT}*>(W + (t0 + r + q * ${WARPS}) * ldw + j);
          #pragma unroll
          for (int q = 0; q < ${U}; q++) ${fmaRow('u[q]', `r + q * ${WARPS}`)}
        }
        for (; r < tn; r += ${WARPS}) {
          const ${VT} u1 = *reinterpret_cast<const ${VT}*>(W + (t0 + r) * ldw + j);
          ${fmaRow('u1', 'r')}
        }
      } else {
        for (; r < tn; r += ${WARPS}) {
          #pragma unroll
          for (int i = 0; i < ${mr}; i++) {
            const float x = xs[r][i];
            #pragma unroll
            for (int c = 0; c < ${CV}; c++) if (j + c < n) acc[i][c] = fmaf(x, ${R.load(d, 'W', '(t0 + r) * ldw + j + c')}, acc[i][c]);
          }
        }
      }
    }
  }
  #pragma unroll
  for (int i = 0; i < ${mr}; i++) {
    #pragma unroll
    for (int c = 0; c < ${CV}; c++) red[warp][i][lane * ${CV} + c] = acc[i][c];
  }
${finishTile(d, mr, span)}
}`;
  return { src, name: 'gemv_kn', sig: ['ptr', 'ptr', 'ptr', 'ptr', 'ptr', 'ptr', 'i64', 'i32', 'i64', 'i64', 'i64', 'i64', 'i64', 'i64', 'i64', 'f32', 'f32', 'i32'] };
}

// ---- the tensor-core form of 'nk' (float16/bfloat16) -----------------------------------------------
// mma.sync m16n8k16 with X as the 16-row A operand (rows past m are zeros) and eight rows of W (eight
// output columns) as B. The sum over k does not care which k each fragment slot holds as long as A and
// B agree, so every lane loads 16 bytes of its X rows and 16 bytes of its W row (k = t*8 .. t*8+7 of a
// 32-wide step, t = lane % 4) and feeds them to two MMAs: fully used 16-byte loads, no shuffles or
// shared-memory staging. The 8 warps of a block split K (interleaved 32-wide steps), grid.y K chunks,
// and the partials meet as in the 'kn' kernel (finishTile).

/** mma.sync m16n8k16 (fp32 accumulators) and ldmatrix.x4.trans; scalar versions under the host emulator. */
const mmaHelpers = (bf: boolean): string => `#ifdef NBX_EMU
__device__ __forceinline__ void mma16816(float (&c)[4], const unsigned (&a)[4], unsigned b0, unsigned b1) { emu_mma16816(c, a, b0, b1, ${bf}); }
__device__ __forceinline__ void ldsm4t(unsigned (&r)[4], const void* p) { emu_ldmatrix_x4(r, p, true); }
__device__ __forceinline__ unsigned movt(unsigned a) { return emu_movmatrix_trans(a); }
#else
__device__ __forceinline__ void mma16816(float (&c)[4], const unsigned (&a)[4], unsigned b0, unsigned b1) {
  asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.${bf ? 'bf16.bf16' : 'f16.f16'}.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"
    : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3]) : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}
__device__ __forceinline__ void ldsm4t(unsigned (&r)[4], const void* p) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];"
    : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]) : "r"((unsigned)__cvta_generic_to_shared(p)));
}
__device__ __forceinline__ unsigned movt(unsigned a) {
  unsigned d; asm volatile("movmatrix.sync.aligned.m8n8.trans.b16 %0, %1;" : "=r"(d) : "r"(a)); return d;
}
#endif`;

/** The C fragments of a warp's n-tiles into red[warp][row][column] (rows g and, for 16 rows, g + 8). */
const fragsToRed = (mr: number, nt: number): string => `#pragma unroll
  for (int q = 0; q < ${nt}; q++) {
    red[warp][g][q * 8 + t * 2] = c[q][0];
    red[warp][g][q * 8 + t * 2 + 1] = c[q][1];
    ${mr === 16 ? 'red[warp][g + 8][q * 8 + t * 2] = c[q][2];\n    red[warp][g + 8][q * 8 + t * 2 + 1] = c[q][3];' : ''}
  }`;

/** 32-wide K steps per warp whose loads are issued before their MMAs. */
const MMA_UNROLL = 2;

/**
 * A gated MLP's activation (nbx.llm.gated_activation's expression: loads 0 = gate, 1 = up) applied to
 * eight elements of each, for a kernel whose X is the gate_up rows [m, 2K] (gate, then up, K apart): the
 * same rendered expression as the elementwise kernel's, so the product reads the values the unfused
 * activation would have stored.
 */
function gatedHelper(d: 'float16' | 'bfloat16', gate: Expr): string {
  const T = R.storageType(d);
  const [stmts, res] = R.render(gate, (slot) => R.load(d, slot === 0 ? 'gp' : 'up', 'e'), () => { throw new Error('gated activation: no parameters'); });
  return `__device__ __forceinline__ uint4 nbx_gated8(uint4 g, uint4 u) {
  const ${T}* gp = reinterpret_cast<const ${T}*>(&g); const ${T}* up = reinterpret_cast<const ${T}*>(&u);
  uint4 r; ${T}* rp = reinterpret_cast<${T}*>(&r);
  #pragma unroll
  for (int e = 0; e < 8; e++) {
    ${stmts}
    ${R.store(d, 'rp', 'e', res)}
  }
  return r;
}`;
}

/**
 * Source of the tensor-core 'nk' kernel: MR = 8 or 16 rows, NT 8-column tiles per warp. With `gate`
 * (an expression of gated activation), X is a gate_up matrix and the product's input is act(gate)·up,
 * computed as it is loaded (the down projection of a gated MLP without the activation's own launch).
 */
export function gemvMmaSource(d: 'float16' | 'bfloat16', mr: 8 | 16, nt: number, gate: Expr | null = null, norm = false): { src: string; name: string; sig: ArgType[] } {
  const T = R.storageType(d), U = MMA_UNROLL, bf = d === 'bfloat16';
  const off = norm ? 'kq - l0' : 'kq';
  const xload = (p: string): string => (gate ? `nbx_gated8(*reinterpret_cast<const uint4*>(${p} + kq), *reinterpret_cast<const uint4*>(${p} + k + kq))` : `*reinterpret_cast<const uint4*>(${p} + ${off})`);
  const extra = `float* __restrict__ P, unsigned* __restrict__ cnt, long long kchunk, ${norm ? `const ${T}* __restrict__ Rs, const ${T}* __restrict__ NW, ${T}* __restrict__ RO, float eps, ` : ''}`;
  const src = `${mmaHelpers(bf)}
${gate ? gatedHelper(d, gate) : ''}
${HEAD(d, 'gemv_mma', extra)}) {
  __shared__ float red[${WARPS}][${mr}][${8 * nt}];
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, g = lane >> 2, t = lane & 3;
  const long long jb = (long long)blockIdx.x * ${8 * nt};
  const long long l0 = (long long)blockIdx.y * kchunk, l1 = l0 + kchunk < k ? l0 + kchunk : k;
  ${prefetchRows(d, 'jb', 8 * nt, 'l0', 'l1')}
${norm ? normPrologue(d, mr) : ''}
  float c[${nt}][4];
  const ${T}* wr[${nt}];
  #pragma unroll
  for (int q = 0; q < ${nt}; q++) {
    c[q][0] = c[q][1] = c[q][2] = c[q][3] = 0.f;
    long long jn = jb + q * 8 + g;
    if (jn > n - 1) jn = n - 1; // past the end: a repeated load, never stored
    wr[q] = W + jn * ldw + t * 8;
  }
  const bool ra = g < m, rb = g + 8 < m;
  const ${T}* xa = ${norm ? 'xs' : 'X'} + (ra ? g : 0) * ${norm ? 'kw' : 'xsi'} + t * 8;
  const ${T}* xb = ${norm ? 'xs' : 'X'} + (rb ? g + 8 : 0) * ${norm ? 'kw' : 'xsi'} + t * 8;
  uint4 z; z.x = z.y = z.z = z.w = 0u;
  for (long long kk = l0 + warp * 32; kk < l1; kk += ${WARPS * 32 * U}) {
    uint4 wv[${U}][${nt}], av[${U}], bv[${U}];
    #pragma unroll
    for (int u = 0; u < ${U}; u++) {
      const long long kq = kk + u * ${WARPS * 32};
      const bool ok = kq + t * 8 < l1; // k is a multiple of 8: a vector is wholly in or out
      #pragma unroll
      for (int q = 0; q < ${nt}; q++) wv[u][q] = ok ? *reinterpret_cast<const uint4*>(wr[q] + kq) : z;
      av[u] = ok && ra ? ${xload('xa')} : z;
      ${mr === 16 ? `bv[u] = ok && rb ? ${xload('xb')} : z;` : 'bv[u] = z;'}
    }
    #pragma unroll
    for (int u = 0; u < ${U}; u++) {
      const unsigned a0[4] = { av[u].x, bv[u].x, av[u].y, bv[u].y }, a1[4] = { av[u].z, bv[u].z, av[u].w, bv[u].w };
      #pragma unroll
      for (int q = 0; q < ${nt}; q++) { mma16816(c[q], a0, wv[u][q].x, wv[u][q].y); mma16816(c[q], a1, wv[u][q].z, wv[u][q].w); }
    }
  }
  ${fragsToRed(mr, nt)}
${finishTile(d, mr, 8 * nt)}
}`;
  return { src, name: 'gemv_mma', sig: ['ptr', 'ptr', 'ptr', 'ptr', 'ptr', 'ptr', 'i64', ...(norm ? ['ptr', 'ptr', 'ptr', 'f32'] as ArgType[] : []), 'i32', 'i64', 'i64', 'i64', 'i64', 'i64', 'i64', 'i64', 'f32', 'f32', 'i32'] };
}

/**
 * The add + RMSNorm before a projection, done by the projection's blocks (nbx.llm.add_rms_norm_linear):
 * every block sums the squares of its rows h = x + residual (rounded to the dtype, as fused_add_rms_norm)
 * over all of K — a few KB from L2 — and stages its own K chunk of h·rstd·w (rounded once) in dynamic
 * shared memory for the MMAs; the blocks of column tile 0 also store h as the residual out. So the norm
 * costs no launch of its own and no round trip of its output through memory.
 */
function normPrologue(d: 'float16' | 'bfloat16', mr: number): string {
  const T = R.storageType(d);
  return `  extern __shared__ __align__(16) unsigned char nbx_xs_[];
  ${T}* xs = reinterpret_cast<${T}*>(nbx_xs_);
  const int kw = (int)(l1 - l0);
  __shared__ float nsum[${WARPS}][${mr}];
  __shared__ float rstd[${mr}];
  {
    float ss[${mr}];
    #pragma unroll
    for (int i = 0; i < ${mr}; i++) ss[i] = 0.f;
    for (long long j0 = (long long)threadIdx.x * 8; j0 < k; j0 += ${THREADS * 8}) {
      const bool mine = j0 >= l0 && j0 < l1;
      #pragma unroll
      for (int i = 0; i < ${mr}; i++) {
        if (i < m) {
          const uint4 a = *reinterpret_cast<const uint4*>(X + i * xsi + j0), b = *reinterpret_cast<const uint4*>(Rs + i * k + j0);
          const ${T}* pa = reinterpret_cast<const ${T}*>(&a); const ${T}* pb = reinterpret_cast<const ${T}*>(&b);
          uint4 h; ${T}* ph = reinterpret_cast<${T}*>(&h);
          #pragma unroll
          for (int e = 0; e < 8; e++) {
            const float v = ${d === 'bfloat16' ? 'nbx_round_bf16' : 'nbx_round_f16'}(${R.load(d, 'pa', 'e')} + ${R.load(d, 'pb', 'e')});
            ss[i] += v * v;
            ${R.store(d, 'ph', 'e', 'v')}
          }
          if (mine) {
            *reinterpret_cast<uint4*>(xs + i * kw + (j0 - l0)) = h;
            if (blockIdx.x == 0) *reinterpret_cast<uint4*>(RO + i * k + j0) = h;
          }
        }
      }
    }
    #pragma unroll
    for (int i = 0; i < ${mr}; i++) {
      #pragma unroll
      for (int o = 16; o > 0; o >>= 1) ss[i] += __shfl_xor_sync(0xffffffffu, ss[i], o);
      if (lane == 0) nsum[warp][i] = ss[i];
    }
  }
  __syncthreads();
  if (threadIdx.x < ${mr}) {
    float tot = 0.f;
    #pragma unroll
    for (int w = 0; w < ${WARPS}; w++) tot += nsum[w][threadIdx.x];
    rstd[threadIdx.x] = 1.f / sqrtf(tot / (float)k + eps);
  }
  __syncthreads();
  for (int e = threadIdx.x; e < m * kw; e += ${THREADS}) {
    const int i = e / kw, j = e - i * kw;
    const float v = ${R.load(d, 'xs', 'e')};
    ${R.store(d, 'xs', 'e', `v * rstd[i] * ${R.load(d, 'NW', 'l0 + j')}`)}
  }
  __syncthreads();`;
}

/**
 * The tensor-core form of 'kn' (x @ w, W row-major [K, N]): B fragments need K pairs of one column,
 * which lie ldw apart, so each warp stages its 16 × 8·NT tiles of W, one at a time, in its own shared
 * memory (16-byte loads, rows padded so ldmatrix is conflict-free) and reads the fragments with
 * ldmatrix.trans; X's A fragments are 4-byte loads (X is small and cached). Warps take interleaved
 * 16-deep K steps, U = 16 / NT of them loaded into registers before any MMA (128 bytes of W in flight
 * per lane: few steps per warp at these sizes, so each batch pays one memory latency); partials meet in
 * finishTile as in the other kernels.
 */
export function gemvMmaKnSource(d: 'float16' | 'bfloat16', mr: 8 | 16, nt: 2 | 4): { src: string; name: string; sig: ArgType[] } {
  const T = R.storageType(d), U = 16 / nt, bf = d === 'bfloat16', BN = 8 * nt, PAD = BN + 8, V = BN / 8; // V: 16-byte vectors per W row
  const src = `${mmaHelpers(bf)}
${HEAD(d, 'gemv_mma_kn', 'float* __restrict__ P, unsigned* __restrict__ cnt, long long kchunk, ')}) {
  __shared__ float red[${WARPS}][${mr}][${BN}];
  __align__(16) __shared__ ${T} ws[${WARPS}][16][${PAD}];
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, g = lane >> 2, t = lane & 3;
  const long long jb = (long long)blockIdx.x * ${BN};
  const long long l0 = (long long)blockIdx.y * kchunk, l1 = l0 + kchunk < k ? l0 + kchunk : k;
  float c[${nt}][4];
  #pragma unroll
  for (int q = 0; q < ${nt}; q++) c[q][0] = c[q][1] = c[q][2] = c[q][3] = 0.f;
  const bool ra = g < m, rb = g + 8 < m;
  const ${T}* xa = X + (ra ? g : 0) * xsi + t * 2;
  const ${T}* xb = X + (rb ? g + 8 : 0) * xsi + t * 2;
  uint4 z; z.x = z.y = z.z = z.w = 0u;
  for (long long kk = l0 + warp * 16; kk < l1; kk += ${WARPS * 16 * U}) {
    // this lane's 16-byte pieces of U steps' W tiles (row e / V, vector e % V), then the X fragments
    uint4 wv[${U}][${(16 * V + 31) >> 5}];
    unsigned xf[${U}][4];
    #pragma unroll
    for (int u = 0; u < ${U}; u++) {
      const long long ku = kk + u * ${WARPS * 16};
      #pragma unroll
      for (int h = 0; h < ${(16 * V + 31) >> 5}; h++) {
        const int e = lane + h * 32, r = e / ${V}, v = e % ${V};
        const long long col = jb + v * 8;
        wv[u][h] = ${16 * V >= 32 ? '' : 'e < 16 * ' + V + ' && '}ku + r < l1 && col < n ? *reinterpret_cast<const uint4*>(W + (ku + r) * ldw + col) : z;
      }
      const bool lo = ku + t * 2 < l1, hi = ku + t * 2 + 8 < l1; // k is even: a pair is wholly in or out
      xf[u][0] = ra && lo ? *reinterpret_cast<const unsigned*>(xa + ku) : 0u;
      xf[u][1] = ${mr === 16 ? 'rb && lo ? *reinterpret_cast<const unsigned*>(xb + ku) : 0u' : '0u'};
      xf[u][2] = ra && hi ? *reinterpret_cast<const unsigned*>(xa + ku + 8) : 0u;
      xf[u][3] = ${mr === 16 ? 'rb && hi ? *reinterpret_cast<const unsigned*>(xb + ku + 8) : 0u' : '0u'};
    }
    // one shared tile per warp, step after step (all U steps' loads are already in flight above)
    #pragma unroll
    for (int u = 0; u < ${U}; u++) {
      #pragma unroll
      for (int h = 0; h < ${(16 * V + 31) >> 5}; h++) {
        const int e = lane + h * 32;
        if (e < ${16 * V}) *reinterpret_cast<uint4*>(&ws[warp][e / ${V}][(e % ${V}) * 8]) = wv[u][h];
      }
      __syncwarp();
      #pragma unroll
      for (int p = 0; p < ${nt / 2}; p++) {
        // matrices: k rows 0-7 / 8-15 of n-tile 2p, then of n-tile 2p + 1 (lane groups of 8 give the rows)
        unsigned b[4];
        const int mi = lane >> 3;
        ldsm4t(b, &ws[warp][(mi & 1) * 8 + (lane & 7)][p * 16 + (mi >> 1) * 8]);
        mma16816(c[2 * p], xf[u], b[0], b[1]);
        mma16816(c[2 * p + 1], xf[u], b[2], b[3]);
      }
      __syncwarp(); // the tile is read before the next step overwrites it
    }
  }
  ${fragsToRed(mr, nt)}
${finishTile(d, mr, BN)}
}`;
  return { src, name: 'gemv_mma_kn', sig: ['ptr', 'ptr', 'ptr', 'ptr', 'ptr', 'ptr', 'i64', 'i32', 'i64', 'i64', 'i64', 'i64', 'i64', 'i64', 'i64', 'f32', 'f32', 'i32'] };
}

/**
 * The tensor-core form of 'kn' without shared memory (impl 'mmat'): a lane loads 16 bytes (8 adjacent
 * columns) of a W row, as the 'nk' kernels do, and movmatrix.trans turns each 4-byte piece into a B
 * fragment. Over a warp, register j of eight lanes' row loads (lane g of a group of four, c = lane % 4,
 * columns 8c .. 8c + 7 of a 32-column group) is an 8 × 8 matrix (k rows, columns 8c' + 2j + {0, 1});
 * transposed, it is the B fragment of those 8 columns. The C fragments then map back to columns
 * 8t + 2j + {0, 1}: each lane holds 8 adjacent columns per group.
 *
 * Which k each fragment slot holds is free as long as A and B agree, so a 32-deep step is two MMAs whose
 * B rows are chosen to make X's A fragments one 16-byte load per row: lane t takes X[row][8t .. 8t + 7],
 * whose four pairs are a0 / a2 of the first MMA and of the second; the matching W rows of lane g are
 * r = 8·(g / 2) + g % 2 plus 0 and 2 (first MMA, B halves) and 4 and 6 (second).
 *
 * NT 8-column tiles per warp (4 per 32-column group); U = 16 / NT steps loaded before any MMA (256 bytes
 * of W in flight per lane). The block's 8 warps are WC side by side over columns times 8 / WC taking
 * interleaved K steps, which meet in finishTile.
 */
export function gemvMmatKnSource(d: 'float16' | 'bfloat16', mr: 8 | 16, nt: 4 | 8, wc: number): { src: string; name: string; sig: ArgType[] } {
  const T = R.storageType(d), G = nt / 4, U = 16 / nt, bf = d === 'bfloat16', WN = 8 * nt, BN = wc * WN, WK = WARPS / wc;
  const src = `${mmaHelpers(bf)}
/** 8 elements of an X row from k0 (zeros past l1 or for a row past m); one 16-byte load when whole and aligned. */
__device__ __forceinline__ uint4 xrow8(const ${T}* x, long long k0, long long l1, bool ok, int vec) {
  uint4 r; r.x = r.y = r.z = r.w = 0u;
  if (!ok || k0 >= l1) return r;
  if (vec && k0 + 8 <= l1) return *reinterpret_cast<const uint4*>(x + k0);
  unsigned h[8];
  #pragma unroll
  for (int e = 0; e < 8; e++) h[e] = k0 + e < l1 ? (unsigned)x[k0 + e] : 0u;
  r.x = h[0] | (h[1] << 16); r.y = h[2] | (h[3] << 16); r.z = h[4] | (h[5] << 16); r.w = h[6] | (h[7] << 16);
  return r;
}
${HEAD(d, 'gemv_mmat_kn', 'float* __restrict__ P, unsigned* __restrict__ cnt, long long kchunk, ', 2)}) {
  __shared__ float red[${WK}][${mr}][${BN}];
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, g = lane >> 2, t = lane & 3;
  const int cw = warp % ${wc}, kw = warp / ${wc};
  const long long jb = (long long)blockIdx.x * ${BN}, jw = jb + cw * ${WN};
  const long long l0 = (long long)blockIdx.y * kchunk, l1 = l0 + kchunk < k ? l0 + kchunk : k;
  float c[${G}][4][4];
  #pragma unroll
  for (int q = 0; q < ${G}; q++) {
    #pragma unroll
    for (int j = 0; j < 4; j++) c[q][j][0] = c[q][j][1] = c[q][j][2] = c[q][j][3] = 0.f;
  }
  const bool ra = g < m, rb = g + 8 < m;
  const ${T}* xa = X + (ra ? g : 0) * xsi + t * 8;
  const ${T}* xb = X + (rb ? g + 8 : 0) * xsi + t * 8;
  const int wr = 8 * (g >> 1) + (g & 1); // this lane's first W row of a step
  bool colOk[${G}];
  const ${T}* wp[${G}];
  #pragma unroll
  for (int q = 0; q < ${G}; q++) { const long long col = jw + q * 32 + t * 8; colOk[q] = col < n; wp[q] = W + wr * ldw + (colOk[q] ? col : 0); }
  uint4 z; z.x = z.y = z.z = z.w = 0u;
  for (long long kk = l0 + kw * 32; kk < l1; kk += ${WK * 32 * U}) {
    // W (HBM) for all U steps first; X (small, cached) step by step, so its registers live for one step:
    // the kernel stays within 128 registers, two blocks per SM
    uint4 wv[${U}][${G}][4];
    #pragma unroll
    for (int u = 0; u < ${U}; u++) {
      const long long ku = kk + u * ${WK * 32};
      #pragma unroll
      for (int h = 0; h < 4; h++) {
        const bool ok = ku + wr + 2 * h < l1;
        #pragma unroll
        for (int q = 0; q < ${G}; q++) wv[u][q][h] = ok && colOk[q] ? *reinterpret_cast<const uint4*>(wp[q] + (ku + 2 * h) * ldw) : z;
      }
    }
    #pragma unroll
    for (int u = 0; u < ${U}; u++) {
      const long long ku = kk + u * ${WK * 32};
      const uint4 x0 = xrow8(xa, ku, l1 - t * 8, ra, vec); // xa is already t * 8 along
      const uint4 x1 = ${mr === 16 ? 'xrow8(xb, ku, l1 - t * 8, rb, vec)' : 'z'};
      const unsigned aA[4] = { x0.x, x1.x, x0.y, x1.y }, aB[4] = { x0.z, x1.z, x0.w, x1.w };
      #pragma unroll
      for (int q = 0; q < ${G}; q++) {
        const unsigned r0[4] = { wv[u][q][0].x, wv[u][q][0].y, wv[u][q][0].z, wv[u][q][0].w };
        const unsigned r1[4] = { wv[u][q][1].x, wv[u][q][1].y, wv[u][q][1].z, wv[u][q][1].w };
        const unsigned r2[4] = { wv[u][q][2].x, wv[u][q][2].y, wv[u][q][2].z, wv[u][q][2].w };
        const unsigned r3[4] = { wv[u][q][3].x, wv[u][q][3].y, wv[u][q][3].z, wv[u][q][3].w };
        #pragma unroll
        for (int j = 0; j < 4; j++) {
          mma16816(c[q][j], aA, movt(r0[j]), movt(r1[j]));
          mma16816(c[q][j], aB, movt(r2[j]), movt(r3[j]));
        }
      }
    }
  }
  #pragma unroll
  for (int q = 0; q < ${G}; q++) {
    #pragma unroll
    for (int j = 0; j < 4; j++) {
      const int cc = cw * ${WN} + q * 32 + t * 8 + j * 2;
      red[kw][g][cc] = c[q][j][0];
      red[kw][g][cc + 1] = c[q][j][1];
      ${mr === 16 ? 'red[kw][g + 8][cc] = c[q][j][2];\n      red[kw][g + 8][cc + 1] = c[q][j][3];' : ''}
    }
  }
${finishTile(d, mr, BN, WK)}
}`;
  return { src, name: 'gemv_mmat_kn', sig: ['ptr', 'ptr', 'ptr', 'ptr', 'ptr', 'ptr', 'i64', 'i32', 'i64', 'i64', 'i64', 'i64', 'i64', 'i64', 'i64', 'f32', 'f32', 'i32'] };
}

/** Whether the tensor-core 'kn' kernel takes `g`: a half type, whole 16-byte vectors of W, even K and 4-byte X pairs. */
export const mmaKnOk = (g: GemvProblem): boolean => g.layout === 'kn' && g.dtype !== 'float32' && g.n % 8 === 0 && g.ldw % 8 === 0 &&
  g.k % 2 === 0 && g.xsl === 1 && (g.m === 1 || g.xsi % 2 === 0) && aligned16(g.W) && Number(BigInt.asUintN(2, g.X)) === 0;

/**
 * The tensor-core kernels' grid: `blockCols` columns per block, K chunks of whole K steps of the warps
 * that split K (`unit` deep: 8 warps × 32 for 'nk', × 16 for 'kn') so about `perSm` blocks per SM run.
 */
export function mmaSplit(g: GemvProblem, smCount: number, blockCols: number, perSm: number, unit: number): { gx: number; gy: number; kchunk: number } {
  const gx = Math.ceil(g.n / blockCols);
  const want = Math.max(1, Math.min(Math.ceil((perSm * smCount) / gx), Math.ceil(g.k / unit)));
  const kchunk = Math.ceil(Math.ceil(g.k / want) / unit) * unit;
  return { gx, gy: Math.ceil(g.k / kchunk), kchunk };
}

/** Whether a tensor-core kernel takes `g`: 'nk' with a half type and the vector path's alignment, or mmaKnOk. */
export const mmaOk = (g: GemvProblem): boolean => (g.layout === 'nk' ? g.dtype !== 'float32' && gemvVectorOk(g) : mmaKnOk(g));

function launchMma(be: CudaBackend, g: GemvProblem, cfg: Config, gate: Expr | null = null): void {
  const mr = g.m <= 8 ? 8 : 16, kn = g.layout === 'kn', want = (cfg.nt as number | undefined) ?? 2;
  const form: MmaForm = !kn ? 'nk' : cfg.impl === 'mmat' ? 'mmat' : 'kn';
  const nt = form === 'nk' ? want : form === 'kn' ? (want === 4 ? 4 : 2) : want === 8 ? 8 : 4;
  const wc = form === 'mmat' ? (cfg.wc as number | undefined) ?? 1 : 1;
  const k = gate ? gatedKernelFor(be, g.dtype as 'float16' | 'bfloat16', mr, nt, gate) : mmaKernelFor(be, g.dtype as 'float16' | 'bfloat16', mr, nt, form, wc);
  // K steps: 32 deep ('nk', 'mmat') or 16 ('kn'), taken by the warps that split K
  const unit = form === 'nk' ? WARPS * 32 : form === 'kn' ? WARPS * 16 : (WARPS / wc) * 32;
  const { gx, gy, kchunk } = mmaSplit(g, be.smCount, 8 * nt * wc, (cfg.split as number | undefined) ?? 2, unit);
  const ws = gy > 1 ? workspace(be, gy * g.m * g.n, gx) : null;
  // 'mmat' reads X rows 16 bytes at a time where they are aligned so
  const vec = form !== 'mmat' || (aligned16(g.X) && (g.m === 1 || g.xsi % 8 === 0)) ? 1 : 0;
  be.ctx.launch(k, [gx, gy, 1], THREADS, [g.X, g.W, g.O, g.bias, ws ? ws.part.ptr : 0n, ws ? ws.cnt.ptr : 0n, kchunk, g.m, g.n, g.k,
    g.xsi, g.xsl, g.ldw, g.osi, g.osj, g.alpha, g.beta, vec], 0, be.stream);
}

const gatedKernels = new WeakMap<CudaBackend, Map<string, CudaKernel>>();
function gatedKernelFor(be: CudaBackend, d: 'float16' | 'bfloat16', mr: 8 | 16, nt: number, gate: Expr): CudaKernel {
  let m = gatedKernels.get(be);
  if (!m) gatedKernels.set(be, (m = new Map()));
  const key = `gemv_mma_gated:${d}:${mr}:${nt}:${gate.key}`;
  let k = m.get(key);
  if (!k) m.set(key, (k = be.kernel(key, () => gemvMmaSource(d, mr, nt, gate))));
  return k;
}

/** What the gated product (nbx.llm.gated_linear's kernel) is given: gate_up [m, 2K] rows, weight [N, K], out [m, N]. */
export interface GatedGemvProblem {
  gateUp: StridedRef; weight: StridedRef; bias?: StridedRef; out: StridedRef;
  m: number; n: number; k: number;
  /** The activation's expression (loads 0 = gate, 1 = up; src/ops/llm.ts gatedActivationExpr). */
  gate: Expr;
}

/**
 * The down projection of a gated MLP with the activation computed as X is loaded (nbx.llm.gated_linear
 * on CUDA): the tensor-core 'nk' kernel, its tiles and K split tuned on this product itself (tuner key
 * dtype suffix '.gated'). False when the kernel does not take the problem (dtype, rows, alignment): the
 * caller runs the composite.
 */
export function cudaGatedGemv(be: CudaBackend, p: GatedGemvProblem): boolean {
  const d = p.out.dtype;
  if (!fusedGemvOn('gated') || (d !== 'float16' && d !== 'bfloat16') || p.m < 1 || p.m > GEMV_MAX_ROWS || p.k % 8 !== 0) return false;
  const xs = p.gateUp.strides, ws = p.weight.strides;
  if (xs[xs.length - 1] !== 1 || ws[1] !== 1 || p.out.strides[p.out.strides.length - 1] !== 1) return false;
  const g: GemvProblem = {
    dtype: d, layout: 'nk', m: p.m, n: p.n, k: p.k, X: addr(p.gateUp), xsi: p.m > 1 ? xs[xs.length - 2]! : 2 * p.k, xsl: 1,
    W: addr(p.weight), ldw: ws[0]!, O: addr(p.out), osi: p.m > 1 ? p.out.strides[p.out.strides.length - 2]! : p.n, osj: 1,
    bias: p.bias ? addr(p.bias) : 0n, alpha: 1, beta: 0,
  };
  if (!mmaOk(g)) return false;
  const mr = rowsFor(g.m);
  let cfg: Config | undefined;
  for (const r of gatedRecent) if (r.n === g.n && r.k === g.k && r.mr === mr && r.dtype === d && r.bias === (g.bias !== 0n)) { cfg = r.cfg; break; }
  if (!cfg) {
    cfg = GATED_DEFAULT;
    if (g.n * g.k >= TUNE_MIN_ELEMENTS) {
      const key = { shape: `${mr}x${bucketSize(g.n)}x${bucketSize(g.k)}`, dtype: `${d}${g.bias ? '.bias' : ''}.gated`, device: be.tuning.deviceKey };
      const cands = prune(GEMV_NK_SPACE, be.tuning.profile.limits).kept.filter((c) => c.impl === 'mma');
      cfg = tuneSync({ name: GEMV_NK_SPACE.name, knobs: GEMV_NK_SPACE.knobs, defaultConfig: GATED_DEFAULT }, key, cands,
        (c) => timeColdL2(be, () => launchMma(be, g, c, p.gate), GEMV_TIMING_CALLS), { deviceLabel: be.ctx.info.name }).config;
    }
    if (gatedRecent.length >= 8) gatedRecent.shift();
    gatedRecent.push({ dtype: d, layout: 'nk', mr, n: g.n, k: g.k, bias: g.bias !== 0n, cfg });
  }
  launchMma(be, g, cfg, p.gate);
  return true;
}
const GATED_DEFAULT: Config = { impl: 'mma', cols: 2, nt: 2, split: 2 };

/** What the normed product (nbx.llm.add_rms_norm_linear's kernel) is given: rows [m, K] of x and residual, the norm's weight [K], W [N, K]. */
export interface NormGemvProblem {
  x: StridedRef; residual: StridedRef; normWeight: StridedRef; eps: number;
  weight: StridedRef; bias?: StridedRef; out: StridedRef; residualOut: StridedRef;
  m: number; n: number; k: number;
}

/** Dynamic shared memory the normed kernel may take for its staged rows (more costs blocks per SM). */
const NORM_STAGE_MAX_BYTES = 64 * 1024;

/**
 * A projection of rms_norm(x + residual)·w (nbx.llm.add_rms_norm_linear on CUDA): the tensor-core 'nk'
 * kernel with the norm in its prologue (normPrologue), tuned on this product (tuner key suffix '.norm').
 * False when the kernel does not take the problem (dtype, rows, alignment, staging size): the caller runs
 * the composite.
 */
export function cudaNormGemv(be: CudaBackend, p: NormGemvProblem): boolean {
  const d = p.out.dtype;
  if (!fusedGemvOn('norm') || (d !== 'float16' && d !== 'bfloat16') || p.m < 1 || p.m > GEMV_MAX_ROWS || p.k % 8 !== 0) return false;
  const g: GemvProblem = {
    dtype: d, layout: 'nk', m: p.m, n: p.n, k: p.k, X: addr(p.x), xsi: p.k, xsl: 1,
    W: addr(p.weight), ldw: p.weight.strides[0]!, O: addr(p.out), osi: p.n, osj: 1,
    bias: p.bias ? addr(p.bias) : 0n, alpha: 1, beta: 0,
  };
  if (p.weight.strides[1] !== 1 || !mmaOk(g) || !aligned16(addr(p.residual)) || !aligned16(addr(p.residualOut))) return false;
  const mr = rowsFor(g.m);
  let cfg: Config | undefined;
  for (const r of normRecent) if (r.n === g.n && r.k === g.k && r.mr === mr && r.dtype === d && r.bias === (g.bias !== 0n)) { cfg = r.cfg; break; }
  if (!cfg) {
    const fits = (c: Config): boolean => normSmem(be, g, c) <= NORM_STAGE_MAX_BYTES;
    cfg = fits(GATED_DEFAULT) ? GATED_DEFAULT : { ...GATED_DEFAULT, split: 4 };
    if (!fits(cfg)) return false;
    if (g.n * g.k >= TUNE_MIN_ELEMENTS) {
      const key = { shape: `${mr}x${bucketSize(g.n)}x${bucketSize(g.k)}`, dtype: `${d}${g.bias ? '.bias' : ''}.norm`, device: be.tuning.deviceKey };
      const cands = prune(GEMV_NK_SPACE, be.tuning.profile.limits).kept.filter((c) => c.impl === 'mma' && fits(c));
      cfg = tuneSync({ name: GEMV_NK_SPACE.name, knobs: GEMV_NK_SPACE.knobs, defaultConfig: cfg }, key, cands,
        (c) => timeColdL2(be, () => launchMmaNorm(be, g, c, p), GEMV_TIMING_CALLS), { deviceLabel: be.ctx.info.name }).config;
    }
    if (normRecent.length >= 8) normRecent.shift();
    normRecent.push({ dtype: d, layout: 'nk', mr, n: g.n, k: g.k, bias: g.bias !== 0n, cfg });
  }
  launchMmaNorm(be, g, cfg, p);
  return true;
}
const normRecent: Decision[] = [];

function normSplit(be: CudaBackend, g: GemvProblem, cfg: Config): { gx: number; gy: number; kchunk: number; nt: number } {
  const nt = (cfg.nt as number | undefined) ?? 2;
  return { ...mmaSplit(g, be.smCount, 8 * nt, (cfg.split as number | undefined) ?? 2, WARPS * 32), nt };
}
const normSmem = (be: CudaBackend, g: GemvProblem, cfg: Config): number => g.m * normSplit(be, g, cfg).kchunk * DTYPES[g.dtype].itemsize;

function launchMmaNorm(be: CudaBackend, g: GemvProblem, cfg: Config, p: NormGemvProblem): void {
  const mr = g.m <= 8 ? 8 : 16;
  const { gx, gy, kchunk, nt } = normSplit(be, g, cfg);
  let m = normKernels.get(be);
  if (!m) normKernels.set(be, (m = new Map()));
  const key = `gemv_mma_norm:${g.dtype}:${mr}:${nt}`;
  let k = m.get(key);
  if (!k) m.set(key, (k = be.kernel(key, () => gemvMmaSource(g.dtype as 'float16' | 'bfloat16', mr, nt, null, true))));
  const smem = normSmem(be, g, cfg);
  if (smem > 48 * 1024 && !normLargeSmem.has(k)) { k.setMaxDynamicSharedMemory(NORM_STAGE_MAX_BYTES); normLargeSmem.add(k); }
  const ws = gy > 1 ? workspace(be, gy * g.m * g.n, gx) : null;
  be.ctx.launch(k, [gx, gy, 1], THREADS, [g.X, g.W, g.O, g.bias, ws ? ws.part.ptr : 0n, ws ? ws.cnt.ptr : 0n, kchunk,
    addr(p.residual), addr(p.normWeight), addr(p.residualOut), p.eps, g.m, g.n, g.k,
    g.xsi, g.xsl, g.ldw, g.osi, g.osj, g.alpha, g.beta, 1], smem, be.stream);
}
const normKernels = new WeakMap<CudaBackend, Map<string, CudaKernel>>();
const normLargeSmem = new WeakSet<CudaKernel>();
const gatedRecent: Decision[] = [];

/** The tensor-core kernels: 'nk', 'kn' (W staged in shared memory) and 'mmat' ('kn', W transposed in registers). */
type MmaForm = 'nk' | 'kn' | 'mmat';
const FORM_CODE: Record<MmaForm, number> = { nk: 0, kn: 1, mmat: 2 };
const mmaKernels = new WeakMap<CudaBackend, Map<number, CudaKernel>>();
function mmaKernelFor(be: CudaBackend, d: 'float16' | 'bfloat16', mr: 8 | 16, nt: number, form: MmaForm, wc: number): CudaKernel {
  let m = mmaKernels.get(be);
  if (!m) mmaKernels.set(be, (m = new Map()));
  const code = (((DT_CODE[d] * 32 + mr) * 16 + nt) * 16 + wc) * 4 + FORM_CODE[form];
  let k = m.get(code);
  if (!k) {
    k = form === 'kn' ? be.kernel(`gemv_mma_kn:${d}:${mr}:${nt}`, () => gemvMmaKnSource(d, mr, nt as 2 | 4))
      : form === 'mmat' ? be.kernel(`gemv_mmat_kn:${d}:${mr}:${nt}:${wc}`, () => gemvMmatKnSource(d, mr, nt as 4 | 8, wc))
      : be.kernel(`gemv_mma:${d}:${mr}:${nt}`, () => gemvMmaSource(d, mr, nt));
    m.set(code, k);
  }
  return k;
}

/** The GEMM parameters the 'gemm' kernel receives (the CPU kernel's contract). */
export interface GemvGemmParams {
  transA: boolean; transB: boolean; m: number; n: number; k: number; alpha: number; beta: number;
  a: StridedRef; lda: number; b: StridedRef; ldb: number; c: StridedRef; ldc: number;
  batch?: number; bias?: StridedRef;
}

/** A normalised small-M problem (element strides; byte addresses with the refs' offsets applied). */
export interface GemvProblem {
  dtype: GemvDType; layout: GemvLayout; m: number; n: number; k: number;
  X: bigint; xsi: number; xsl: number; W: bigint; ldw: number; O: bigint; osi: number; osj: number;
  bias: bigint; alpha: number; beta: number;
}

const addr = (r: StridedRef): bigint => (r.offset === 0 ? (r.buf as CudaBuffer).ptr : (r.buf as CudaBuffer).ptr + BigInt(r.offset * DTYPES[r.dtype].itemsize));

/**
 * The GEMV form of a GEMM, or null when it has none: one matrix, float32/float16/bfloat16, and m ≤ 16
 * (X = A, W = B) or else n ≤ 16 without a bias (the transposed problem: X = Bᵀ, W = Aᵀ, as in mv).
 */
export function gemvProblem(p: GemvGemmParams): GemvProblem | null {
  const d = p.c.dtype;
  if ((p.batch ?? 1) !== 1 || p.k < 1 || p.m < 1 || p.n < 1) return null;
  if (d !== 'float32' && d !== 'float16' && d !== 'bfloat16') return null;
  const bias = p.bias ? addr(p.bias) : 0n;
  if (p.m <= GEMV_MAX_ROWS) {
    return {
      dtype: d, layout: p.transB ? 'nk' : 'kn', m: p.m, n: p.n, k: p.k,
      X: addr(p.a), xsi: p.transA ? 1 : p.lda, xsl: p.transA ? p.lda : 1,
      W: addr(p.b), ldw: p.ldb, O: addr(p.c), osi: p.ldc, osj: 1, bias, alpha: p.alpha, beta: p.beta,
    };
  }
  if (p.n <= GEMV_MAX_ROWS && !p.bias) {
    return {
      dtype: d, layout: p.transA ? 'kn' : 'nk', m: p.n, n: p.m, k: p.k,
      X: addr(p.b), xsi: p.transB ? p.ldb : 1, xsl: p.transB ? 1 : p.ldb,
      W: addr(p.a), ldw: p.lda, O: addr(p.c), osi: 1, osj: p.ldc, bias: 0n, alpha: p.alpha, beta: p.beta,
    };
  }
  return null;
}

const aligned16 = (p: bigint): boolean => (Number(BigInt.asUintN(4, p)) === 0);

/** Whether the vector path's loads are all aligned and in bounds. */
export function gemvVectorOk(g: GemvProblem): boolean {
  const isz = DTYPES[g.dtype].itemsize;
  if (g.layout === 'nk') {
    const V = vecOf(g.dtype);
    return g.k % V === 0 && g.ldw % V === 0 && aligned16(g.W) && g.xsl === 1 && (g.m === 1 || g.xsi % V === 0) && aligned16(g.X);
  }
  const CV = knColumns(g.dtype, rowsFor(g.m)), bytes = CV * isz;
  return g.n % CV === 0 && g.ldw % CV === 0 && Number(BigInt.asUintN(8, g.W)) % bytes === 0;
}

/**
 * 'kn': K chunks (grid.y) so that about `perSm` blocks per SM are in flight (1 when the columns alone fill
 * the card); a chunk is a whole number of the warps' unrolled row batches, so no warp ends in the tail loop.
 */
export function knSplit(g: GemvProblem, smCount: number, perSm = 4): { gx: number; gy: number; kchunk: number } {
  const mr = rowsFor(g.m), span = 32 * knColumns(g.dtype, mr), unit = WARPS * knUnroll(mr);
  const gx = Math.ceil(g.n / span);
  const want = Math.max(1, Math.min(Math.ceil((perSm * smCount) / gx), Math.ceil(g.k / unit)));
  const kchunk = Math.ceil(Math.ceil(g.k / want) / unit) * unit;
  return { gx, gy: Math.ceil(g.k / kchunk), kchunk };
}

/** Launches the GEMV kernel for `g` (config: the tuner's `cols` for 'nk'). */
export function launchGemv(be: CudaBackend, g: GemvProblem, cfg: Config): void {
  if (cfg.impl === 'cublas') { launchCublas(be, g); return; }
  if ((cfg.impl === 'mma' || (cfg.impl === 'mmat' && g.layout === 'kn')) && mmaOk(g)) { launchMma(be, g, cfg); return; }
  const mr = rowsFor(g.m), vec = gemvVectorOk(g) ? 1 : 0;
  if (g.layout === 'nk') {
    const cols = Math.min((cfg.cols as number | undefined) ?? 2, 32 / mr);
    const k = kernelFor(be, g.dtype, mr, cols);
    be.launch(k, Math.ceil(g.n / (WARPS * cols)), THREADS,
      [g.X, g.W, g.O, g.bias, g.m, g.n, g.k, g.xsi, g.xsl, g.ldw, g.osi, g.osj, g.alpha, g.beta, vec]);
    return;
  }
  const k = kernelFor(be, g.dtype, mr, 0);
  const { gx, gy, kchunk } = knSplit(g, be.smCount, (cfg.split as number | undefined) ?? 4);
  const ws = gy > 1 ? workspace(be, gy * g.m * g.n, gx) : null;
  be.ctx.launch(k, [gx, gy, 1], THREADS, [g.X, g.W, g.O, g.bias, ws ? ws.part.ptr : 0n, ws ? ws.cnt.ptr : 0n, kchunk, g.m, g.n, g.k,
    g.xsi, g.xsl, g.ldw, g.osi, g.osj, g.alpha, g.beta, vec], 0, be.stream);
}

/**
 * Whether cuBLAS's SGEMM can run `g` (impl 'cublas'): float32, no bias (SGEMM has no epilogue), unit
 * strides along k and along the output row, and the library present (checked once).
 */
export function cublasOk(be: CudaBackend, g: GemvProblem): boolean {
  if (g.dtype !== 'float32' || g.bias !== 0n || g.xsl !== 1 || g.osj !== 1 || (g.m > 1 && (g.xsi < g.k || g.osi < g.n))) return false;
  let ok = cublasPresent.get(be);
  if (ok === undefined) {
    try { Cublas.get(be.ctx); ok = true; } catch { ok = false; }
    cublasPresent.set(be, ok);
  }
  return ok;
}
const cublasPresent = new WeakMap<CudaBackend, boolean>();

/** cuBLAS's SGEMM on `g` ('kn': W is k × n, so Wᵀ in column-major terms is used as is; 'nk': W is n × k, transposed). */
function launchCublas(be: CudaBackend, g: GemvProblem): void {
  if (!cublasOk(be, g)) throw new UnsupportedError('matmul', `cuBLAS's SGEMM cannot run this ${g.dtype} product (it needs float32, no bias and unit strides)`);
  Cublas.get(be.ctx).sgemm({
    transA: false, transB: g.layout === 'nk', m: g.m, n: g.n, k: g.k,
    A: g.X, lda: g.m > 1 ? g.xsi : g.k, B: g.W, ldb: g.ldw, C: g.O, ldc: g.m > 1 ? g.osi : g.n, alpha: g.alpha, beta: g.beta,
  }, be.stream.handle, CublasLt.current()?.workspace ?? null);
}

/** Compiled kernels by (dtype, rows, cols; cols 0 = 'kn'), without building the backend's string key per call. */
const kernels = new WeakMap<CudaBackend, Map<number, CudaKernel>>();
const DT_CODE: Record<GemvDType, number> = { float32: 0, float16: 1, bfloat16: 2 };
function kernelFor(be: CudaBackend, d: GemvDType, mr: number, cols: number): CudaKernel {
  let m = kernels.get(be);
  if (!m) kernels.set(be, (m = new Map()));
  const code = (DT_CODE[d] * 32 + mr) * 8 + cols;
  let k = m.get(code);
  if (!k) {
    k = cols === 0 ? be.kernel(`gemv_kn:${d}:${mr}`, () => gemvKnSource(d, mr)) : be.kernel(`gemv_nk:${d}:${mr}:${cols}`, () => gemvNkSource(d, mr, cols));
    m.set(code, k);
  }
  return k;
}

/**
 * The 'kn' kernel's K-chunk partials and per-column-tile counters: kept per backend and grown on
 * demand (no allocation per call). Counters start at zero and every launch leaves them at zero; launches
 * on the backend's one stream never overlap, so one set serves every call.
 */
const workspaces = new WeakMap<CudaBackend, { part: CudaBuffer; cnt: CudaBuffer; partN: number; cntN: number }>();
function workspace(be: CudaBackend, partN: number, cntN: number): { part: CudaBuffer; cnt: CudaBuffer } {
  let w = workspaces.get(be);
  if (!w || w.partN < partN || w.cntN < cntN) {
    if (w) { be.free(w.part); be.free(w.cnt); } // stream-ordered: reused only by later work
    const pn = Math.max(partN, w?.partN ?? 0, 1 << 16), cn = Math.max(cntN, w?.cntN ?? 0, 1024);
    w = { part: be.alloc('float32', pn), cnt: be.alloc('int32', cn, true), partN: pn, cntN: cn };
    workspaces.set(be, w);
  }
  return w;
}

/**
 * Runs the small-M GEMM here when it has a GEMV form and the tuner (or the default) picks this kernel;
 * false sends the caller to cuBLASLt. `viaCublas` runs the cuBLASLt path (timed as the alternative).
 */
export function cudaGemv(be: CudaBackend, p: GemvGemmParams, viaCublas: () => void): boolean {
  const g = gemvProblem(p);
  if (!g) return false;
  const cfg = g.beta !== 0 ? (g.layout === 'nk' ? GEMV_NK_SPACE : GEMV_KN_SPACE).defaultConfig : choose(be, g, viaCublas);
  if (cfg.impl === 'cublaslt' || (cfg.impl === 'cublas' && !cublasOk(be, g))) return false; // a cached 'cublas' where the library is missing: cuBLASLt
  launchGemv(be, g, cfg);
  return true;
}

/** Recent decisions by problem, compared field by field: a model's few shapes skip the string keys. */
interface Decision { dtype: GemvDType; layout: GemvLayout; mr: number; n: number; k: number; bias: boolean; cfg: Config }
const recent: Decision[] = [];

/** Calls per timing sample: back to back between two events, as a model issues them. */
export const GEMV_TIMING_CALLS = 10;

/**
 * The tuner's choice for a beta = 0 problem (timing runs overwrite O, so only those may measure;
 * beta ≠ 0 takes the default): memoised per exact (n, k) and row bucket.
 *
 * Timing: timeColdL2 (weights from memory, as in a model). Before, one sample was GEMV_TIMING_CALLS calls
 * back to back between two events, divided (timeBackToBack, still used where L2 size is unknown). A single call
 * between events on an idle GPU also counts the host's work before the launch (everything the call does
 * in JavaScript, still unoptimised during a sweep, plus the driver's launch cost; cuBLASLt's split-K
 * algorithms launch twice), so a lone small call reads much slower than the bare library call. Back to back, the host
 * work of one call overlaps the previous call's kernel, so a sample measures what a model sees: the
 * kernel time when the GPU is the bottleneck, the host cost per call when the host is.
 */
function choose(be: CudaBackend, g: GemvProblem, viaCublas: () => void): Config {
  const mr = rowsFor(g.m), bias = g.bias !== 0n;
  for (const r of recent) if (r.n === g.n && r.k === g.k && r.mr === mr && r.dtype === g.dtype && r.layout === g.layout && r.bias === bias) return r.cfg;
  const space = g.layout === 'nk' ? GEMV_NK_SPACE : GEMV_KN_SPACE;
  let cfg = space.defaultConfig;
  if (g.n * g.k >= TUNE_MIN_ELEMENTS) {
    const run = (c: Config): void => (c.impl === 'cublaslt' ? viaCublas() : launchGemv(be, g, c));
    const key = { shape: `${mr}x${bucketSize(g.n)}x${bucketSize(g.k)}`, dtype: `${g.dtype}${bias ? '.bias' : ''}`, device: be.tuning.deviceKey };
    const cands = prune(space, be.tuning.profile.limits).kept.filter((c) => ((c.impl !== 'mma' && c.impl !== 'mmat') || mmaOk(g)) && (c.impl !== 'cublas' || cublasOk(be, g)));
    cfg = tuneSync({ name: space.name, knobs: space.knobs, defaultConfig: space.defaultConfig }, key, cands,
      (c) => timeColdL2(be, () => run(c), GEMV_TIMING_CALLS), { deviceLabel: be.ctx.info.name }).config;
  }
  if (recent.length >= 16) recent.shift();
  recent.push({ dtype: g.dtype, layout: g.layout, mr, n: g.n, k: g.k, bias, cfg });
  return cfg;
}

/**
 * Milliseconds per call of `fn` with the weights coming from memory, as in a model (each layer's
 * weights are read once per step, long evicted from L2 by the other layers'): before each call a
 * memset twice the size of L2 (the driver's figure), four times over, evicts it; events around each call
 * alone time it.
 * Timed back to back on the same operands instead, a weight of up to tens of MB stays in L2 (50 MB on
 * an H200) and the sweep picks the configuration that is fastest from L2, not from HBM.
 */
export function timeColdL2(be: CudaBackend, fn: () => void, calls: number): number {
  const l2 = be.ctx.info.l2CacheSize;
  if (!(l2 > 0)) return timeBackToBack(be, fn, calls);
  let ev = coldEvents.get(be);
  if (!ev) coldEvents.set(be, (ev = []));
  while (ev.length < 2 * calls) ev.push(be.ctx.createEvent({ timing: true }));
  const t = { flush: be.alloc('uint8', 2 * l2), ev }; // freed below: the tuning sweep's scratch
  try {
    for (let i = 0; i < calls; i++) {
      // four passes: the GPU is still busy with them when the host has enqueued the call, so the events
      // time the kernel, not the host's work before its launch (unoptimised JS during a sweep)
      for (let r = 0; r < 4; r++) be.ctx.memsetD8(t.flush.ptr, (i + r) & 0xff, t.flush.bytes, be.stream);
      t.ev[2 * i]!.record(be.stream);
      fn();
      t.ev[2 * i + 1]!.record(be.stream);
    }
    t.ev[2 * calls - 1]!.synchronize();
    let total = 0;
    for (let i = 0; i < calls; i++) total += t.ev[2 * i + 1]!.elapsedSince(t.ev[2 * i]!);
    return total / calls;
  } finally { be.free(t.flush); }
}
const coldEvents = new WeakMap<CudaBackend, CudaEvent[]>();

const events = new WeakMap<CudaBackend, { start: CudaEvent; end: CudaEvent }>();
/** Milliseconds per call of `calls` back-to-back runs of `fn` on the backend's stream (CUDA events). */
export function timeBackToBack(be: CudaBackend, fn: () => void, calls: number): number {
  let ev = events.get(be);
  if (!ev) events.set(be, (ev = { start: be.ctx.createEvent({ timing: true }), end: be.ctx.createEvent({ timing: true }) }));
  ev.start.record(be.stream);
  for (let i = 0; i < calls; i++) fn();
  ev.end.record(be.stream);
  ev.end.synchronize();
  return ev.end.elapsedSince(ev.start) / calls;
}

/** Every kernel specialization the generators can produce (the nvcc compile script). */
export function allGemvSources(): { label: string; src: string; name: string; sig: ArgType[] }[] {
  const out: { label: string; src: string; name: string; sig: ArgType[] }[] = [];
  for (const d of ['float32', 'float16', 'bfloat16'] as GemvDType[]) {
    for (const mr of [1, 2, 4, 8, 16]) {
      for (const cols of [1, 2, 4]) if (mr * cols <= 32) out.push({ label: `nk:${d}:${mr}:${cols}`, ...gemvNkSource(d, mr, cols) });
      out.push({ label: `kn:${d}:${mr}`, ...gemvKnSource(d, mr) });
    }
    if (d !== 'float32') for (const mr of [8, 16] as const) for (const nt of [1, 2, 4]) out.push({ label: `mma:${d}:${mr}:${nt}`, ...gemvMmaSource(d, mr, nt) });
    if (d !== 'float32') for (const mr of [8, 16] as const) for (const nt of [2, 4] as const) out.push({ label: `mma_kn:${d}:${mr}:${nt}`, ...gemvMmaKnSource(d, mr, nt) });
    if (d !== 'float32') for (const mr of [8, 16] as const) for (const nt of [4, 8] as const) for (const wc of MMAT_WC) out.push({ label: `mmat_kn:${d}:${mr}:${nt}:${wc}`, ...gemvMmatKnSource(d, mr, nt, wc) });
  }
  return out;
}

