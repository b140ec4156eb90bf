// decode_step: a batch-1 decode step of a pre-norm Llama-family decoder in one persistent launch
// (nbx.llm.fused_decode_step). A step launched op by op is about ten kernels per layer; at batch 1 each
// streams a few MB of weights, and a kernel boundary (drain, launch, ramp-up) costs as much as the
// streaming of the smaller projections. Here one block per SM runs every phase of every layer:
//
//   per layer: A  RMSNorm (each block, redundantly) + q/k/v rows      → qkv
//              B  RoPE, cache write, attention (a block per head)     → att
//              C  o_proj rows + residual add                           → res
//              D  RMSNorm + gate/up rows + act(gate)·up                → act
//              E  down rows + residual add                             → res
//   then       F  final RMSNorm + lm_head rows + each block's argmax; the last block to finish picks the step's
//
// with a grid-wide barrier between phases (every phase reads what all blocks wrote in the one before).
// Weights never depend on activations, so each warp streams its share of every phase's weight rows into its
// own ring in shared memory (cp.async, a group of units per lane at a time, several groups in flight) and
// refills the ring as it consumes it, whatever phase the next units belong to: the loads in flight at a
// barrier, at the norm prologues and during the attention phase are the next phase's, so the weight stream
// does not stop at every phase boundary the way it stops at every kernel boundary.
//
// Every value the op-by-op step stores in the model dtype is rounded to it here at the same point
// (projection outputs, residual sums, norm outputs, rotated q/k, attention output, activation), so the
// steps differ only in the order of float sums.
//
// Grid = the SM count with one 512-thread block per SM (checked by occupancy), so all blocks are resident
// and the barrier cannot wait on a block that never starts; a barrier that still waits for 2 s sets the
// error word (the step's outputs are then invalid) instead of hanging. NBX_DECODE_STEP=phases launches
// each phase on its own (the same code, no barriers): how the CPU emulator runs it, and an A/B setting.

import type { BackendKernels } from '../../../kernels/table.js';
import type { DecodeStepParams } from '../../../kernels/decode_step.js';
import { DeviceFaultError, IndexError, ValueError } from '../../../errors.js';
import type { CudaBuffer } from '../runtime/device.js';
import { DTYPES } from '../../../dtype/dtypes.js';
import type { StridedRef } from '../../backend.js';
import type { ArgType } from '../runtime/driver.js';
import type { CudaBackend } from '../runtime/backend.js';
import { basePtr } from './util.js';

let be: CudaBackend;

/** Points this family's kernels at the backend (called once, when the backend starts). */
export function bind(backend: CudaBackend): void { be = backend; }

const THREADS = 512;
const WARPS = THREADS / 32;
/** Key passes of the attention loaded before their arithmetic. */
const ATT_UNROLL = 4;
const DTYPES_TAKEN = ['bfloat16', 'float16'] as const;
/** A lane's 16-byte pieces per cp.async group (the weight ring's stage), and the most groups in flight. */
const RING_CH = 4;
const RING_NS_MAX = 6;

interface Shape { H: number; NH: number; NKV: number; D: number; RD: number; I: number; V: number; L: number; S: number; G: number }

const rowsPerBlock = (n: number, g: number): number => Math.ceil(n / g);
/** Rows a warp's contiguous share of a block's (row, 256-column segment) units can touch, for the partial sums' shared array. */
function maxRowsPerWarp(s: Shape): number {
  const cases: [number, number][] = [[(s.NH + 2 * s.NKV) * s.D, s.H], [s.H, s.NH * s.D], [2 * s.I, s.H], [s.H, s.I], [s.V, s.H]];
  let m = 1;
  for (const [n, k] of cases) {
    const rows = n === 2 * s.I ? 2 * rowsPerBlock(s.I, s.G) : rowsPerBlock(n, s.G);
    const segs = Math.ceil(k / 256), per = Math.ceil((rows * segs) / WARPS);
    m = Math.max(m, Math.ceil(per / segs) + 2);
  }
  return m;
}

export function decodeStepSource(d: 'bfloat16' | 'float16', s: Shape, ring: Ring): { src: string; name: string; sig: ArgType[] } {
  const bf = d === 'bfloat16';
  const MAXR = maxRowsPerWarp(s);
  const LG = s.D / 8; // lanes per key in the attention: 8 columns each
  const src = `
#define T_ unsigned short
#define LD(p, i) ${bf ? '__uint_as_float(((unsigned)(p)[i]) << 16)' : 'nbx_h2f((p)[i])'}
#define RND(f) ${bf ? 'nbx_round_bf16(f)' : 'nbx_round_f16(f)'}
#define TOS(f) ${bf ? 'nbx_f2bf(f)' : 'nbx_f2h(f)'}
#define H_ ${s.H}
#define NH_ ${s.NH}
#define NKV_ ${s.NKV}
#define D_ ${s.D}
#define RD_ ${s.RD}
#define I_ ${s.I}
#define V_ ${s.V}
#define L_ ${s.L}
#define S_ ${s.S}
#define QKV_ ${(s.NH + 2 * s.NKV) * s.D}
#define WARPS_ ${WARPS}
#define THREADS_ ${THREADS}
#define MAXR_ ${MAXR}
#define LG_ ${LG}
#define KPW_ (32 / LG_)
#define CH_ ${ring.ch}
#define NS_ ${ring.ns}
#define ATTU_ ${ATT_UNROLL}
#define XMAX_ ${Math.max(s.H, s.NH * s.D, s.I)}
#define NPT_ ${Math.ceil(s.H / THREADS)}
#ifdef NBX_EMU
#define CP16(dst, src_) (*reinterpret_cast<uint4*>(dst) = *reinterpret_cast<const uint4*>(src_))
#define CP_COMMIT()
#define CP_WAIT()
#define CP_WAIT_ALL()
#else
#define CP16(dst, src_) asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" :: "r"((unsigned)__cvta_generic_to_shared(dst)), "l"(src_) : "memory")
#define CP_COMMIT() asm volatile("cp.async.commit_group;" ::: "memory")
#define CP_WAIT() asm volatile("cp.async.wait_group ${ring.ns - 1};" ::: "memory")
#define CP_WAIT_ALL() asm volatile("cp.async.wait_all;" ::: "memory")
#endif

struct Layer { const T_* ln1; const T_* wqkv; const T_* wo; const T_* ln2; const T_* wgu; const T_* wdown; T_* kc; T_* vc; };

// Mutable workspace is read with ld.global.cg: L1 is not coherent between blocks, and a line of the residual
// cached in one phase would be stale after another block rewrote it.
__device__ __forceinline__ uint4 ldcg4(const void* p) { return __ldcg(reinterpret_cast<const uint4*>(p)); }
__device__ __forceinline__ float ldcgv(const T_* p, long long i) { const unsigned short u = __ldcg(p + i); return LD(&u, 0); }
__device__ __forceinline__ void stcgv(T_* p, long long i, float v) { __stcg(p + i, (unsigned short)TOS(v)); }

__device__ __forceinline__ void unpack8(const uint4 v, float (&f)[8]) {
  const unsigned w[4] = { v.x, v.y, v.z, v.w };
#pragma unroll
  for (int i = 0; i < 4; i++) {
${bf ? `    f[2 * i] = __uint_as_float(w[i] << 16); f[2 * i + 1] = __uint_as_float(w[i] & 0xffff0000u);`
    : `    f[2 * i] = nbx_h2f((unsigned short)(w[i] & 0xffffu)); f[2 * i + 1] = nbx_h2f((unsigned short)(w[i] >> 16));`}
  }
}

__device__ __forceinline__ float dot8(const uint4 a, const uint4 b) {
  float x[8], y[8];
  unpack8(a, x); unpack8(b, y);
  float s = 0.f;
#pragma unroll
  for (int e = 0; e < 8; e++) s = fmaf(x[e], y[e], s);
  return s;
}

__device__ __forceinline__ float warp_sum(float v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

/** Sum over the block; every thread gets it (red: WARPS_ floats of shared memory). */
__device__ float block_sum(float v, float* red) {
  v = warp_sum(v);
  if ((threadIdx.x & 31) == 0) red[threadIdx.x >> 5] = v;
  __syncthreads();
  float t = 0.f;
#pragma unroll
  for (int w = 0; w < WARPS_; w++) t += red[w];
  __syncthreads();
  return t;
}

__device__ __forceinline__ unsigned long long nbx_globaltimer() {
#ifdef NBX_EMU
  return 0ull;
#else
  unsigned long long t; asm volatile("mov.u64 %0, %globaltimer;" : "=l"(t)); return t;
#endif
}

/** Every block of the grid reaches this point before any goes on (the counter grows by the grid each time; the last block of a step resets it). */
__device__ void grid_sync(unsigned* bar, unsigned& target, unsigned long long* err) {
  __syncthreads();
  if (threadIdx.x == 0) {
    target += gridDim.x;
    __threadfence();
    atomicAdd(bar, 1u);
#ifndef NBX_EMU
    const unsigned long long t0 = nbx_globaltimer();
    for (;;) {
      unsigned v; asm volatile("ld.acquire.gpu.global.u32 %0, [%1];" : "=r"(v) : "l"(bar) : "memory");
      if (v >= target) break;
      if (nbx_globaltimer() - t0 > 2000000000ull) { atomicOr(err, 1ull << 62); break; }
    }
#endif
    __threadfence();
  }
  __syncthreads();
}

/** A block's rows of a phase: [r0, r1) of n, split evenly over the grid. */
__device__ __forceinline__ void block_rows(int n, int& r0, int& r1) {
  r0 = (int)(((long long)n * blockIdx.x) / gridDim.x); r1 = (int)(((long long)n * (blockIdx.x + 1)) / gridDim.x);
}

/** A phase's weight rows for this block: nA rows from A, then nB rows from B, K long (a multiple of 8). */
struct Slice { const T_* A; int nA; const T_* B; int nB; int K; };

/** The weight rows phase ph (layer ph / 5, step ph % 5, or the lm_head after the layers) streams for this block. */
__device__ Slice phase_slice(int ph, const Layer* layers, const T_* lmhead) {
  const int l = ph / 5, st = ph - l * 5;
  Slice z; z.A = nullptr; z.nA = 0; z.B = nullptr; z.nB = 0; z.K = H_;
  int r0, r1;
  if (l >= L_) { block_rows(V_, r0, r1); z.A = lmhead + (long long)r0 * H_; z.nA = r1 - r0; }
  else if (st == 0) { block_rows(QKV_, r0, r1); z.A = layers[l].wqkv + (long long)r0 * H_; z.nA = r1 - r0; }
  else if (st == 2) { block_rows(H_, r0, r1); z.K = NH_ * D_; z.A = layers[l].wo + (long long)r0 * z.K; z.nA = r1 - r0; }
  else if (st == 3) {
    block_rows(I_, r0, r1);
    z.A = layers[l].wgu + (long long)r0 * H_; z.nA = r1 - r0; z.B = layers[l].wgu + ((long long)I_ + r0) * H_; z.nB = r1 - r0;
  } else if (st == 4) { block_rows(H_, r0, r1); z.K = I_; z.A = layers[l].wdown + (long long)r0 * I_; z.nA = r1 - r0; }
  return z;
}

/**
 * This warp's share of a phase's units (a unit: one row's 256-column segment, a 16-byte piece per lane):
 * the units of the block's rows are split into contiguous runs per warp, [u0, u1).
 */
__device__ __forceinline__ void warp_share(const Slice& z, int& u0, int& u1) {
  const int U = (z.nA + z.nB) * ((z.K + 255) >> 8), up = (U + WARPS_ - 1) / WARPS_;
  u0 = (threadIdx.x >> 5) * up; u1 = u0 + up < U ? u0 + up : U;
}

__device__ __forceinline__ const T_* slice_row(const Slice& z, int r) { return r < z.nA ? z.A + (long long)r * z.K : z.B + (long long)(r - z.nA) * z.K; }

/**
 * The load side of a warp's weight ring: the next unit to load (phase, unit, its row and segment) over
 * the launch's phases. Lane i's piece of ring unit q lives at ring[((q mod CH_·NS_)·WARPS_ + warp)·32 + i]:
 * each lane reads back only what it loaded itself, so a cp.async group's wait is the only synchronisation.
 */
struct Loader { Slice z; int ph, ph1, u, u1, r, sg; const T_* row; unsigned q; };

/** Points the loader at the first phase ≥ ph (before ph1) with units for this warp. */
__device__ void loader_seek(Loader& ld, int ph, const Layer* layers, const T_* lmhead) {
  for (; ph < ld.ph1; ph++) {
    if (ph < 5 * L_ && ph % 5 == 1) continue; // attention: no weights
    ld.z = phase_slice(ph, layers, lmhead);
    int u0, u1; warp_share(ld.z, u0, u1);
    if (u0 >= u1) continue;
    const int segs = (ld.z.K + 255) >> 8;
    ld.ph = ph; ld.u = u0; ld.u1 = u1; ld.r = u0 / segs; ld.sg = u0 - ld.r * segs; ld.row = slice_row(ld.z, ld.r);
    return;
  }
  ld.ph = ld.ph1;
}

/** Loads the next CH_ units of the stream (fewer at its end) into the ring as one cp.async group. */
__device__ __forceinline__ void loader_issue(Loader& ld, uint4* ring, const Layer* layers, const T_* lmhead) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
#pragma unroll
  for (int i = 0; i < CH_; i++) {
    if (ld.ph < ld.ph1) {
      const int k = ld.sg * 256 + lane * 8;
      if (k < ld.z.K) CP16(ring + ((ld.q % (CH_ * NS_)) * WARPS_ + warp) * 32 + lane, ld.row + k);
      if (++ld.u == ld.u1) loader_seek(ld, ld.ph + 1, layers, lmhead);
      else if (++ld.sg == ((ld.z.K + 255) >> 8)) { ld.sg = 0; ld.r++; ld.row = slice_row(ld.z, ld.r); }
    }
    ld.q++;
  }
  CP_COMMIT();
}

/**
 * Σ_k W_v[k]·x[k] for the block's rows v of a phase (the slice's A rows, then its B rows), x in shared
 * memory, the weights from the warp's ring (c: the units this warp has consumed in the launch); results in
 * out[v]. A warp's partial sum of each row it touches goes to part[warp][row − its first row] and the
 * rows are summed over warps in warp order (the same bits every run).
 */
__device__ void block_gemv(const Slice& z, const T_* xs, float* part, float* out, uint4* ring, unsigned& c, Loader& ld,
    const Layer* layers, const T_* lmhead) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int segs = (z.K + 255) >> 8, rows = z.nA + z.nB;
  const int up = (rows * segs + WARPS_ - 1) / WARPS_;
  int u0, u1; warp_share(z, u0, u1);
  const int rw0 = u0 / segs;
  float acc = 0.f;
  int r = rw0, sg = u0 - rw0 * segs;
  for (int u = u0; u < u1;) {
    // the rest of the current group (a group may have begun in the previous phase)
    const int inG = (int)(c % CH_), n = CH_ - inG < u1 - u ? CH_ - inG : u1 - u;
    if (inG == 0) CP_WAIT();
    uint4 wv[CH_], xv[CH_];
    {
      int ss = sg;
#pragma unroll
      for (int i = 0; i < CH_; i++) {
        wv[i].x = wv[i].y = wv[i].z = wv[i].w = 0u; xv[i] = wv[i];
        if (i < n && ss * 256 + lane * 8 < z.K) { // a ragged row's last segment: lanes past K add nothing
          wv[i] = ring[(((c + i) % (CH_ * NS_)) * WARPS_ + warp) * 32 + lane];
          xv[i] = *reinterpret_cast<const uint4*>(xs + ss * 256 + lane * 8);
        }
        if (++ss == segs) ss = 0;
      }
    }
#pragma unroll
    for (int i = 0; i < CH_; i++) {
      if (i < n) {
        acc += dot8(wv[i], xv[i]);
        if (sg + 1 == segs || u + i + 1 == u1) {
          const float t = warp_sum(acc);
          if (lane == 0) part[warp * MAXR_ + (r - rw0)] = t;
          acc = 0.f;
        }
        if (++sg == segs) { sg = 0; r++; }
      }
    }
    u += n; c += n;
    if (c % CH_ == 0) loader_issue(ld, ring, layers, lmhead);
  }
  __syncthreads();
  for (int v = threadIdx.x; v < rows; v += THREADS_) {
    const int wlo = (v * segs) / up, whi = ((v + 1) * segs - 1) / up;
    float t = 0.f;
    for (int w = wlo; w <= whi && w < WARPS_; w++) t += part[w * MAXR_ + (v - (w * up) / segs)];
    out[v] = t;
  }
  __syncthreads();
}

/** xs = RMSNorm(x)·w rounded to the dtype, x the residual (or the embedding row at layer 0); x read once, into registers. */
__device__ void norm_into(const T_* x, const T_* w, float eps, T_* xs, float* red) {
  float v[NPT_];
  float ss = 0.f;
#pragma unroll
  for (int i = 0; i < NPT_; i++) { const int j = threadIdx.x + i * THREADS_; v[i] = j < H_ ? ldcgv(x, j) : 0.f; ss += v[i] * v[i]; }
  const float tot = block_sum(ss, red);
  const float rstd = 1.f / sqrtf(tot / (float)H_ + eps);
#pragma unroll
  for (int i = 0; i < NPT_; i++) { const int j = threadIdx.x + i * THREADS_; if (j < H_) xs[j] = TOS(v[i] * rstd * LD(w, j)); }
  __syncthreads();
}

/** xs = x (K values of a workspace vector). */
__device__ void load_x(const T_* x, int K, T_* xs) {
  for (int j = threadIdx.x * 8; j < K; j += THREADS_ * 8) *reinterpret_cast<uint4*>(xs + j) = ldcg4(x + j);
  __syncthreads();
}

/** One element of the half-split RoPE of a D-vector (rotary's arithmetic: x·cos rounded, then fma with rotate_half(x)·sin). */
__device__ __forceinline__ float rope_at(const T_* x, int j, const T_* c, const T_* s) {
  if (j >= RD_) return ldcgv(x, j);
  const int half = RD_ / 2;
  const float xv = ldcgv(x, j);
  const float rh = j < half ? -ldcgv(x, j + half) : ldcgv(x, j - half);
  const float a = RND(__fmul_rn(xv, LD(c, j)));
  return RND(fmaf(rh, LD(s, j), a));
}

/** Attention of query head h over cache positions [0, w] (the new key and value at w from shared memory). */
__device__ void attention_head(int h, const Layer& ly, const T_* qkv, const T_* c, const T_* s, int w, const unsigned char* notpad,
    float scale, T_* att, float* sm) {
  const int g = h / (NH_ / NKV_);
  float* qf = sm; float* kf = sm + D_; float* vf = sm + 2 * D_;
  float* gm = sm + 3 * D_; float* gl = gm + WARPS_ * KPW_; float* gacc = gl + WARPS_ * KPW_;
  for (int j = threadIdx.x; j < D_; j += THREADS_) {
    qf[j] = rope_at(qkv + h * D_, j, c, s);
    const float kv = rope_at(qkv + (NH_ + g) * D_, j, c, s), vv = ldcgv(qkv, (NH_ + NKV_ + g) * D_ + j);
    kf[j] = kv; vf[j] = vv;
    if (h % (NH_ / NKV_) == 0) { ly.kc[((long long)g * S_ + w) * D_ + j] = TOS(kv); ly.vc[((long long)g * S_ + w) * D_ + j] = TOS(vv); }
  }
  __syncthreads();
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, grp = lane / LG_, li = lane % LG_;
  float q[8];
#pragma unroll
  for (int e = 0; e < 8; e++) q[e] = qf[li * 8 + e];
  float m = -INFINITY, l = 0.f, acc[8];
#pragma unroll
  for (int e = 0; e < 8; e++) acc[e] = 0.f;
  const T_* kbase = ly.kc + (long long)g * S_ * D_ + li * 8;
  const T_* vbase = ly.vc + (long long)g * S_ * D_ + li * 8;
  const int stride = WARPS_ * KPW_;
  for (int jb = warp * KPW_; jb <= w; jb += stride * ATTU_) { // warp-uniform bounds: the shuffles below need every lane
    uint4 kr[ATTU_], vr[ATTU_];
#pragma unroll
    for (int i = 0; i < ATTU_; i++) {
      const int j = jb + grp + i * stride;
      kr[i].x = kr[i].y = kr[i].z = kr[i].w = 0u; vr[i] = kr[i];
      if (j < w) { kr[i] = ldcg4(kbase + (long long)j * D_); vr[i] = ldcg4(vbase + (long long)j * D_); }
    }
#pragma unroll
    for (int i = 0; i < ATTU_; i++) {
      const int j = jb + grp + i * stride;
      float kx[8], vx[8];
      if (j == w) {
#pragma unroll
        for (int e = 0; e < 8; e++) { kx[e] = kf[li * 8 + e]; vx[e] = vf[li * 8 + e]; }
      } else { unpack8(kr[i], kx); unpack8(vr[i], vx); }
      float dsum = 0.f;
#pragma unroll
      for (int e = 0; e < 8; e++) dsum = fmaf(q[e], kx[e], dsum);
#pragma unroll
      for (int o = LG_ / 2; o > 0; o >>= 1) dsum += __shfl_xor_sync(0xffffffffu, dsum, o);
      if (j <= w && notpad[j]) {
        const float sc = dsum * scale, mn = fmaxf(m, sc), cor = __expf(m - mn), p = __expf(sc - mn);
        l = l * cor + p;
#pragma unroll
        for (int e = 0; e < 8; e++) acc[e] = fmaf(p, vx[e], acc[e] * cor);
        m = mn;
      }
    }
  }
  const int gi = warp * KPW_ + grp;
  if (li == 0) { gm[gi] = m; gl[gi] = l; }
#pragma unroll
  for (int e = 0; e < 8; e++) gacc[gi * D_ + li * 8 + e] = acc[e];
  __syncthreads();
  // the groups' partial softmaxes merged: each group's factor once, then sums over groups per column
  float* fac = gacc + stride * D_;
  if (threadIdx.x < stride) {
    float M = -INFINITY;
    for (int q2 = 0; q2 < stride; q2++) M = fmaxf(M, gm[q2]);
    fac[threadIdx.x] = gm[threadIdx.x] == -INFINITY ? 0.f : __expf(gm[threadIdx.x] - M);
  }
  __syncthreads();
  for (int j = threadIdx.x; j < D_; j += THREADS_) {
    float den = 0.f, num = 0.f;
    for (int q2 = 0; q2 < stride; q2++) { den = fmaf(gl[q2], fac[q2], den); num = fmaf(gacc[q2 * D_ + j], fac[q2], num); }
    stcgv(att, h * D_ + j, den > 0.f ? num / den : 0.f);
  }
  __syncthreads();
}

__device__ __forceinline__ bool argmax_better(float a, int ia, float b, int ib) {
  // b replaces a: larger, or equal at a smaller index, or NaN (torch.argmax: NaN is the maximum)
  if (isnan(a)) return isnan(b) && ib < ia;
  if (isnan(b)) return true;
  return b > a || (b == a && ib < ia);
}

/** The block's maximum of (value, index) under argmax_better, in thread 0 (every thread takes part). */
__device__ void block_argmax(float& bv, int& bi, bool& any) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) {
    const float ov = __shfl_xor_sync(0xffffffffu, bv, o); const int oi = __shfl_xor_sync(0xffffffffu, bi, o);
    const bool oany = __shfl_xor_sync(0xffffffffu, (int)any, o) != 0;
    if (oany && (!any || argmax_better(bv, bi, ov, oi))) { bv = ov; bi = oi; any = true; }
  }
  __shared__ float wv[WARPS_]; __shared__ int wi[WARPS_]; __shared__ int wa[WARPS_];
  if ((threadIdx.x & 31) == 0) { wv[threadIdx.x >> 5] = bv; wi[threadIdx.x >> 5] = bi; wa[threadIdx.x >> 5] = any; }
  __syncthreads();
  if (threadIdx.x == 0) {
    bv = NAN; bi = 0x7fffffff; any = false;
    for (int q2 = 0; q2 < WARPS_; q2++) if (wa[q2] && (!any || argmax_better(bv, bi, wv[q2], wi[q2]))) { bv = wv[q2]; bi = wi[q2]; any = true; }
  }
  __syncthreads();
}

extern "C" __global__ void __launch_bounds__(THREADS_, 1) decode_step(const Layer* __restrict__ layers, const T_* __restrict__ embed,
    const T_* __restrict__ fnorm, const T_* __restrict__ lmhead, const T_* __restrict__ cosr, const T_* __restrict__ sinr,
    const long long* ids, const long long* widx, const unsigned char* notpad, T_* logits, long long* next,
    T_* res, T_* qkv, T_* att, T_* act, float* amax_v, int* amax_i, unsigned* sync, unsigned long long* err,
    unsigned long long* trace, int ph0, int ph1, float eps, float scale) {
  extern __shared__ __align__(16) unsigned char nbx_dyn_[];
  uint4* ring = reinterpret_cast<uint4*>(nbx_dyn_);
  T_* xs = reinterpret_cast<T_*>(nbx_dyn_ + CH_ * NS_ * THREADS_ * 16);
  float* part = reinterpret_cast<float*>(reinterpret_cast<unsigned char*>(xs) + ((XMAX_ * 2 + 15) / 16) * 16);
  float* rowv = part + WARPS_ * MAXR_;
  float* sm = rowv; // attention scratch (phases B only) shares the row values' space
  __shared__ float red[WARPS_];
  __shared__ int sh_last;
  NBX_GRID_DEPENDENCY_WAIT();
  long long id = ids[0];
  if (id < 0 || id >= V_) { if (blockIdx.x == 0 && threadIdx.x == 0) atomicOr(err, 1ull << 61); id = 0; }
  const T_* emb = embed + id * (long long)H_;
  const int w = (int)__ldcg(widx);
  if (w < 0 || w >= S_) { if (blockIdx.x == 0 && threadIdx.x == 0) atomicOr(err, 1ull << 60); return; }
  unsigned target = 0u; // barriers passed in this launch × grid
  // the weight stream: NS_ groups in flight from the start, one more each time a group is consumed
  Loader ld; ld.ph1 = ph1; ld.q = 0u;
  loader_seek(ld, ph0, layers, lmhead);
  for (int g = 0; g < NS_; g++) loader_issue(ld, ring, layers, lmhead);
  unsigned c = 0u; // units this warp consumed
  for (int ph = ph0; ph < ph1; ph++) {
    const int l = ph / 5, st = ph - l * 5;
    if (trace && threadIdx.x == 0) trace[(2ll * ph) * gridDim.x + blockIdx.x] = nbx_globaltimer();
    const Layer ly = l < L_ ? layers[l] : layers[0];
    const T_* rin = l == 0 ? emb : res; // the residual stream (the embedding row before layer 0's first add)
    int r0, r1;
    const Slice z = phase_slice(ph, layers, lmhead);
    if (l < L_ && st == 0) { // A: norm + q/k/v
      block_rows(QKV_, r0, r1);
      norm_into(rin, ly.ln1, eps, xs, red);
      block_gemv(z, xs, part, rowv, ring, c, ld, layers, lmhead);
      for (int v = threadIdx.x; v < r1 - r0; v += THREADS_) stcgv(qkv, r0 + v, rowv[v]);
    } else if (l < L_ && st == 1) { // B: RoPE, cache write, attention
      for (int h = blockIdx.x; h < NH_; h += gridDim.x) attention_head(h, ly, qkv, cosr, sinr, w, notpad, scale, att, sm);
    } else if (l < L_ && st == 2) { // C: o_proj + residual
      block_rows(H_, r0, r1);
      load_x(att, NH_ * D_, xs);
      block_gemv(z, xs, part, rowv, ring, c, ld, layers, lmhead);
      for (int v = threadIdx.x; v < r1 - r0; v += THREADS_) stcgv(res, r0 + v, RND(rowv[v]) + ldcgv(rin, r0 + v));
    } else if (l < L_ && st == 3) { // D: norm + gate/up + act
      block_rows(I_, r0, r1);
      norm_into(res, ly.ln2, eps, xs, red);
      block_gemv(z, xs, part, rowv, ring, c, ld, layers, lmhead);
      for (int v = threadIdx.x; v < r1 - r0; v += THREADS_) {
        const float g = RND(rowv[v]), u = RND(rowv[r1 - r0 + v]);
        stcgv(act, r0 + v, g / (1.f + expf(-g)) * u);
      }
    } else if (l < L_ && st == 4) { // E: down + residual
      block_rows(H_, r0, r1);
      load_x(act, I_, xs);
      block_gemv(z, xs, part, rowv, ring, c, ld, layers, lmhead);
      for (int v = threadIdx.x; v < r1 - r0; v += THREADS_) stcgv(res, r0 + v, RND(rowv[v]) + ldcgv(res, r0 + v));
    } else { // F: final norm, lm_head, argmax
      block_rows(V_, r0, r1);
      norm_into(L_ == 0 ? emb : res, fnorm, eps, xs, red);
      block_gemv(z, xs, part, rowv, ring, c, ld, layers, lmhead);
      float bv = NAN; int bi = 0x7fffffff; bool any = false;
      for (int v = threadIdx.x; v < r1 - r0; v += THREADS_) {
        const float lv = RND(rowv[v]);
        logits[r0 + v] = TOS(lv);
        if (!any || argmax_better(bv, bi, lv, r0 + v)) { bv = lv; bi = r0 + v; any = true; }
      }
      block_argmax(bv, bi, any);
      if (threadIdx.x == 0) {
        __stcg(amax_v + blockIdx.x, any ? bv : -INFINITY); __stcg(amax_i + blockIdx.x, any ? bi : 0x7fffffff);
        __threadfence();
        sh_last = atomicAdd(sync + 1, 1u) == gridDim.x - 1;
      }
      __syncthreads();
      if (sh_last) { // the last block to finish: the step's argmax over the blocks' (an order-free maximum)
        __threadfence();
        bv = NAN; bi = 0x7fffffff; any = false;
        for (unsigned q2 = threadIdx.x; q2 < gridDim.x; q2 += THREADS_) {
          const float ov = __ldcg(amax_v + q2); const int oi = __ldcg(amax_i + q2);
          if (!any || argmax_better(bv, bi, ov, oi)) { bv = ov; bi = oi; any = true; }
        }
        block_argmax(bv, bi, any);
        if (threadIdx.x == 0) {
          next[0] = bi;
          sync[0] = 0u; sync[1] = 0u; // every block is past its last barrier: ready for the next step
        }
      }
    }
    if (trace) { __syncthreads(); if (threadIdx.x == 0) trace[(2ll * ph + 1) * gridDim.x + blockIdx.x] = nbx_globaltimer(); }
    if (ph + 1 < ph1) {
      grid_sync(sync, target, err);
    }
  }
  CP_WAIT_ALL();
}`;
  return {
    src, name: 'decode_step',
    sig: ['ptr', 'ptr', 'ptr', 'ptr', 'ptr', 'ptr', 'ptr', 'ptr', 'ptr', 'ptr', 'ptr', 'ptr', 'ptr', 'ptr', 'ptr', 'ptr', 'ptr', 'ptr', 'ptr', 'ptr', 'i32', 'i32', 'f32', 'f32'] as ArgType[],
  };
}

/** The weight ring: CH 16-byte pieces per lane per cp.async group, NS groups (the ring holds CH·NS·THREADS·16 bytes). */
interface Ring { ch: number; ns: number }
const ringBytes = (r: Ring): number => r.ch * r.ns * THREADS * 16;

/**
 * The ring for a kernel whose other shared memory takes `base` bytes: RING_CH pieces per group and as many
 * groups (up to RING_NS_MAX) as the block's shared memory still holds; null below two groups.
 * NBX_DECODE_STEP_RING="CH,NS" sets both (for sweeps on a card).
 */
function ringFor(base: number, optin: number): Ring | null {
  const env = process.env.NBX_DECODE_STEP_RING;
  const STATIC = 1024; // the kernel's static shared arrays (block reductions, argmax)
  if (env) {
    const [ch, ns] = env.split(',').map(Number);
    if (!Number.isInteger(ch) || !Number.isInteger(ns) || ch! < 1 || ns! < 1) throw new ValueError('llm.fused_decode_step', `NBX_DECODE_STEP_RING must be "CH,NS" (positive integers), got '${env}'`);
    const r = { ch: ch!, ns: ns! };
    return base + ringBytes(r) + STATIC <= optin ? r : null;
  }
  const ns = Math.min(RING_NS_MAX, Math.floor((optin - STATIC - base) / ringBytes({ ch: RING_CH, ns: 1 })));
  return ns >= 2 ? { ch: RING_CH, ns } : null;
}

/** Dynamic shared memory of the kernel besides the ring: the input vector, the warps' partial sums, the rows' sums or the attention's scratch. */
function smemBytes(s: Shape): number {
  const xs = Math.ceil((Math.max(s.H, s.NH * s.D, s.I) * 2) / 16) * 16;
  const part = WARPS * maxRowsPerWarp(s) * 4;
  const rows = Math.max(rowsPerBlock((s.NH + 2 * s.NKV) * s.D, s.G), 2 * rowsPerBlock(s.I, s.G), rowsPerBlock(s.V, s.G), rowsPerBlock(s.H, s.G)) * 4;
  const kpw = 32 / (s.D / 8);
  const attn = (3 * s.D + 3 * WARPS * kpw + WARPS * kpw * s.D) * 4;
  return xs + part + Math.max(rows, attn);
}

const at = (r: StridedRef): bigint => basePtr(r) + BigInt(r.offset * DTYPES[r.dtype].itemsize);

/** Per-backend state: the layer tables (by the layers' addresses), the workspace, the error word. */
interface StepState { tables: Map<string, CudaBuffer>; ws: CudaBuffer | null; wsBytes: number; err: CudaBuffer; trace: CudaBuffer | null; traceShape: [number, number] }
const states = new WeakMap<CudaBackend, StepState>();

function contiguous(r: StridedRef, shape: readonly number[]): boolean {
  if (r.shape.length !== shape.length || r.shape.some((v, i) => v !== shape[i])) return false;
  let st = 1;
  for (let i = shape.length - 1; i >= 0; i--) { if (shape[i] !== 1 && r.strides[i] !== st) return false; st *= shape[i]!; }
  return true;
}

/** How the step launches: 'fused' (one launch, grid barriers), 'phases' (a launch per phase), or off. */
const MODE = (): string => (process.env.NBX_DECODE_STEP === 'phases' ? 'phases' : process.env.NBX_DECODE_STEP === 'off' || process.env.NBX_DECODE_STEP === '0' ? 'off' : 'fused');

function cudaDecodeStep(p: DecodeStepParams): boolean {
  const mode = MODE();
  if (mode === 'off' || mode === '0') return false;
  const d = p.embed.dtype;
  if (!(DTYPES_TAKEN as readonly string[]).includes(d)) return false;
  const [V, H] = p.embed.shape as [number, number];
  const L = p.layers.length, NH = p.heads, NKV = p.kvHeads, D = p.headDim, I = p.intermediate, RD = p.cos.shape[p.cos.shape.length - 1]!;
  const S = p.notPadding.shape[p.notPadding.shape.length - 1]!;
  if (D % 8 !== 0 || D > 256 || (256 / D) * D !== 256 && D !== 256 && 256 % D !== 0) return false;
  if (H % 8 !== 0 || I % 8 !== 0 || (NH * D) % 8 !== 0 || NH % NKV !== 0 || RD % 2 !== 0 || RD > D) return false;
  const refs: [StridedRef, number[]][] = [[p.embed, [V, H]], [p.finalNorm, [H]], [p.lmHead, [V, H]], [p.logits, [V]], [p.cos, [RD]], [p.sin, [RD]],
    [p.ids, [1]], [p.next, [1]], [p.cacheIndex, [1]], [p.notPadding, [S]]];
  for (const ly of p.layers) {
    refs.push([ly.inputNorm, [H]], [ly.qkv, [(NH + 2 * NKV) * D, H]], [ly.o, [H, NH * D]], [ly.postNorm, [H]], [ly.gateUp, [2 * I, H]], [ly.down, [H, I]],
      [ly.keyCache, [1, NKV, S, D]], [ly.valueCache, [1, NKV, S, D]]);
  }
  for (const [r, shape] of refs) if (!contiguous(r, shape)) return false;
  for (const [r] of refs) if (r.dtype !== d && r !== p.ids && r !== p.next && r !== p.cacheIndex && r !== p.notPadding) return false;
  for (const [r] of refs) if ((r.dtype === d && r.shape.length === 2) && Number(at(r) % 16n) !== 0) return false; // 16-byte rows
  const G = be.smCount;
  const s: Shape = { H, NH, NKV, D, RD, I, V, L, S, G };
  const base = smemBytes(s), ring = ringFor(base, be.ctx.info.maxSharedMemPerBlockOptin);
  if (ring === null) return false;
  const smem = base + ringBytes(ring);
  const key = `decode_step:${ring.ch},${ring.ns}:${d}:${H}:${NH}:${NKV}:${D}:${RD}:${I}:${V}:${L}:${S}:${G}`;
  const k = be.kernel(key, () => decodeStepSource(d as 'bfloat16' | 'float16', s, ring));
  if (smem > 48 * 1024) k.setMaxDynamicSharedMemory(smem);
  const st = states.get(be) ?? { tables: new Map(), ws: null, wsBytes: 0, err: be.alloc('int64', 1), trace: null, traceShape: [0, 0] };
  states.set(be, st);
  // the layer table: eight pointers per layer, uploaded once per set of layers
  const ptrs = new BigUint64Array(8 * L);
  p.layers.forEach((ly, i) => ptrs.set([at(ly.inputNorm), at(ly.qkv), at(ly.o), at(ly.postNorm), at(ly.gateUp), at(ly.down), at(ly.keyCache), at(ly.valueCache)], 8 * i));
  const tkey = Array.from(ptrs, (v) => v.toString(16)).join(',');
  let table = st.tables.get(tkey);
  if (!table) {
    if (be.capture !== null) return false; // uploads are not captured: the eager step before the capture makes it
    table = be.alloc('int64', Math.max(1, 8 * L));
    be.writeBytes(table, 0, new Uint8Array(ptrs.buffer));
    st.tables.set(tkey, table);
  }
  // workspace: residual, qkv, attention, activation (model dtype), the blocks' argmax, the barrier counters
  const el = 2, sizes = [H, (NH + 2 * NKV) * D, NH * D, I].map((n) => Math.ceil((n * el) / 256) * 256);
  const wsBytes = sizes.reduce((a, b) => a + b, 0) + G * 8 + 256;
  if (!st.ws || st.wsBytes < wsBytes) {
    if (be.capture !== null) return false;
    st.ws = be.alloc('uint8', wsBytes); st.wsBytes = wsBytes;
    be.ctx.memsetD8(st.ws.ptr, 0, wsBytes, be.stream);
  }
  let off = st.ws.ptr;
  const [res, qkv, att, act] = sizes.map((b) => { const o = off; off += BigInt(b); return o; });
  const amaxV = off, amaxI = off + BigInt(G * 4), sync = off + BigInt(G * 8);
  let err: bigint;
  if (be.capture !== null) err = be.capture.errBuf.ptr;
  else { be.ctx.memsetD8(st.err.ptr, 0, 8, be.stream); err = st.err.ptr; }
  const phases = 5 * L + 1;
  // NBX_DECODE_STEP_TRACE=1: each block's start and end time of every phase (decodeStepTrace), for profiling
  if (process.env.NBX_DECODE_STEP_TRACE === '1' && (st.trace === null || st.traceShape[0] !== phases || st.traceShape[1] !== G)) {
    if (be.capture !== null) return false;
    st.trace = be.alloc('int64', 2 * phases * G); st.traceShape = [phases, G];
  }
  const trace = process.env.NBX_DECODE_STEP_TRACE === '1' && st.trace ? st.trace.ptr : 0n;
  const args = (ph0: number, ph1: number) => [table!.ptr, at(p.embed), at(p.finalNorm), at(p.lmHead), at(p.cos), at(p.sin), at(p.ids), at(p.cacheIndex),
    at(p.notPadding), at(p.logits), at(p.next), res, qkv, att, act, amaxV, amaxI, sync, err, trace, ph0, ph1, p.eps, p.scaling];
  if (mode === 'phases') for (let ph = 0; ph < phases; ph++) be.ctx.launch(k, G, THREADS, args(ph, ph + 1), smem, be.stream);
  else be.ctx.launch(k, G, THREADS, args(0, phases), smem, be.stream);
  if (be.capture !== null) { be.capture.defer('llm.fused_decode_step'); return true; }
  const v = (be.downloadSync(st.err, 'int64', 0, 1) as BigInt64Array)[0]!;
  if (v !== 0n) {
    if (v & (1n << 62n)) throw new DeviceFaultError('llm.fused_decode_step', 'a grid barrier waited more than 2 s (blocks not resident together); the step\'s outputs are not valid');
    if (v & (1n << 60n)) throw new IndexError('llm.fused_decode_step', `cache_index is out of bounds for a cache of ${S} positions`);
    throw new IndexError('llm.fused_decode_step', `the token id is out of range for a vocabulary of ${V}`);
  }
  return true;
}

/**
 * The last traced step's timestamps (NBX_DECODE_STEP_TRACE=1): ns of each block's start and end of each phase,
 * [phase][start, end][block], with the phase count and grid; null when nothing was traced. For profiling scripts.
 */
export function decodeStepTrace(backend: CudaBackend): { phases: number; grid: number; ns: BigInt64Array } | null {
  const st = states.get(backend);
  if (!st?.trace) return null;
  return { phases: st.traceShape[0], grid: st.traceShape[1], ns: backend.downloadSync(st.trace, 'int64', 0, 2 * st.traceShape[0] * st.traceShape[1]) as BigInt64Array };
}

export const kernels = { decode_step: cudaDecodeStep } satisfies BackendKernels;
/** Facts the operations read (merged into the 'llm' family's features). */
export const llmFeatures = { decodeStepDtypes: DTYPES_TAKEN };
