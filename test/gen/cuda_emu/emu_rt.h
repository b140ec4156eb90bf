// Host emulation of the CUDA device runtime, for running nbxtensor's generated kernels on a machine
// without a GPU (test tool; see cuda_emu.mjs). A kernel source is compiled with g++ after including
// this header; blocks run one at a time; the threads of a block are plain calls, or cooperative fibers
// (ucontext) when the source synchronizes (__syncthreads, warp shuffles), so barriers and shuffles have
// CUDA's semantics. Float arithmetic is IEEE (compiled with -ffp-contract=off): results can differ
// from a GPU's only where the GPU fuses multiply-adds.
#pragma once
#include <cstdint>
#include <cstring>
#include <cstdio>
#include <cstdlib>
#include <cmath>
#include <cfloat>
#include <vector>
#include <type_traits>
#include <utility>
#include <tuple>
#include <ucontext.h>

#define __global__
#define __device__
#define __host__
#define __noinline__
#define __forceinline__ inline
#define __restrict__ __restrict
#define __launch_bounds__(...)
#define __shared__ static
#define __align__(n) alignas(n)
#define __constant__ static

using std::isnan; using std::isinf; using std::signbit; using std::isfinite;
using std::floor; using std::ceil; using std::trunc; using std::round; using std::fabs; using std::sqrt; using std::exp; using std::log;
using std::fmod; using std::pow; using std::rint; using std::nearbyint; using std::copysign; using std::fmin; using std::fmax;

struct float2 { float x, y; };
struct double2 { double x, y; };
struct int2 { int x, y; };
struct uint2 { unsigned x, y; };
struct float4 { float x, y, z, w; };
struct int4 { int x, y, z, w; };
struct uint4 { unsigned x, y, z, w; };
struct emu_dim3 { unsigned x, y, z; };
inline float2 make_float2(float a, float b) { return {a, b}; }
inline double2 make_double2(double a, double b) { return {a, b}; }
#define warpSize 32

namespace emu {
inline emu_dim3 tIdx, bIdx, bDim, gDim;
inline char* dyn_smem = nullptr;
inline size_t dyn_smem_size = 0;

// ---- cooperative fibers for kernels that synchronize ----
enum State { RUN = 0, BLOCK_BAR = 1, WARP_BAR = 2, DONE = 3 };
struct Fiber { ucontext_t ctx; char* stack; int state; };
inline std::vector<Fiber> fibers;
inline ucontext_t sched;
inline int cur = -1;
inline std::vector<uint64_t> slots; // one 8-byte slot per thread for shuffles
inline void (*body)() = nullptr;
constexpr size_t STACK = 256 * 1024;

inline void set_tid(unsigned t) { tIdx.x = t % bDim.x; tIdx.y = (t / bDim.x) % bDim.y; tIdx.z = t / (bDim.x * bDim.y); }
inline void fiber_main(int i) { (void)i; body(); fibers[cur].state = DONE; swapcontext(&fibers[cur].ctx, &sched); }
inline void yield(int st) {
  if (cur < 0) { fprintf(stderr, "emu: barrier outside fiber mode\n"); abort(); }
  fibers[cur].state = st;
  swapcontext(&fibers[cur].ctx, &sched);
}
inline void sync_block() { yield(BLOCK_BAR); }
inline void sync_warp() { yield(WARP_BAR); }

/** Runs the current block's threads as fibers until all are done; barriers release when every live thread arrived. */
inline void run_block_fibers(unsigned nthreads) {
  if (fibers.size() < nthreads) {
    size_t old = fibers.size();
    fibers.resize(nthreads);
    for (size_t i = old; i < nthreads; i++) fibers[i].stack = (char*)malloc(STACK);
  }
  slots.assign(nthreads, 0);
  for (unsigned i = 0; i < nthreads; i++) {
    Fiber& f = fibers[i];
    getcontext(&f.ctx);
    f.ctx.uc_stack.ss_sp = f.stack; f.ctx.uc_stack.ss_size = STACK; f.ctx.uc_link = nullptr;
    makecontext(&f.ctx, (void (*)())fiber_main, 1, (int)i);
    f.state = RUN;
  }
  for (;;) {
    bool ran = false;
    for (unsigned i = 0; i < nthreads; i++) {
      if (fibers[i].state != RUN) continue;
      cur = (int)i; set_tid(i);
      swapcontext(&sched, &fibers[i].ctx);
      ran = true;
    }
    cur = -1;
    if (ran) continue;
    bool all_done = true, released = false;
    for (unsigned i = 0; i < nthreads; i++) all_done = all_done && fibers[i].state == DONE;
    if (all_done) return;
    // warps whose live lanes all wait at a warp barrier
    for (unsigned w0 = 0; w0 < nthreads; w0 += 32) {
      unsigned w1 = w0 + 32 < nthreads ? w0 + 32 : nthreads;
      bool any = false, all = true;
      for (unsigned i = w0; i < w1; i++) {
        if (fibers[i].state == DONE) continue;
        any = true;
        if (fibers[i].state != WARP_BAR) all = false;
      }
      if (any && all) { for (unsigned i = w0; i < w1; i++) if (fibers[i].state == WARP_BAR) fibers[i].state = RUN; released = true; }
    }
    if (released) continue;
    bool block_ready = true;
    for (unsigned i = 0; i < nthreads; i++) if (fibers[i].state != DONE && fibers[i].state != BLOCK_BAR) block_ready = false;
    if (block_ready) { for (unsigned i = 0; i < nthreads; i++) if (fibers[i].state == BLOCK_BAR) fibers[i].state = RUN; continue; }
    fprintf(stderr, "emu: deadlock (threads wait at different barriers)\n");
    abort();
  }
}

inline unsigned lin_tid() { return tIdx.x + bDim.x * (tIdx.y + bDim.y * tIdx.z); }

template <class T> T shfl(T v, int src_lane) {
  static_assert(sizeof(T) <= 8, "shuffle of a value wider than 8 bytes");
  const unsigned t = lin_tid(), w0 = t & ~31u;
  uint64_t s = 0; memcpy(&s, &v, sizeof(T)); slots[t] = s;
  sync_warp();
  unsigned n = bDim.x * bDim.y * bDim.z;
  unsigned src = w0 + (unsigned)src_lane;
  if (src_lane < 0 || src_lane >= 32 || src >= n || fibers[src].state == DONE) src = t;
  T r; uint64_t rs = slots[src]; memcpy(&r, &rs, sizeof(T));
  sync_warp();
  return r;
}

template <class F, class... A, size_t... I>
void call(F f, void** params, std::index_sequence<I...>) { f(*reinterpret_cast<std::remove_cv_t<A>*>(params[I])...); }

template <class... A>
void launch(void (*k)(A...), bool use_fibers, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by, unsigned bz, unsigned smem, void** params) {
  static void (*kern)(A...);
  static void** prm;
  kern = k; prm = params;
  gDim = {gx, gy, gz}; bDim = {bx, by, bz};
  std::vector<char> sm(smem + 16);
  dyn_smem = sm.data(); dyn_smem_size = smem;
  body = [] { call<void (*)(A...), A...>(kern, prm, std::index_sequence_for<A...>{}); };
  const unsigned nt = bx * by * bz;
  for (unsigned z = 0; z < gz; z++) for (unsigned y = 0; y < gy; y++) for (unsigned x = 0; x < gx; x++) {
    bIdx = {x, y, z};
    if (use_fibers) run_block_fibers(nt);
    else for (unsigned t = 0; t < nt; t++) { set_tid(t); body(); }
  }
  dyn_smem = nullptr;
}
} // namespace emu

#define threadIdx emu::tIdx
#define blockIdx emu::bIdx
#define blockDim emu::bDim
#define gridDim emu::gDim

inline void __syncthreads() { emu::sync_block(); }
inline void __syncwarp(unsigned = 0xffffffffu) { emu::sync_warp(); }
inline void __threadfence() {}
inline void __threadfence_block() {}
inline void __threadfence_system() {}
template <class T> T __shfl_xor_sync(unsigned, T v, int o, int = 32) { return emu::shfl(v, (int)((emu::lin_tid() & 31) ^ (unsigned)o)); }
template <class T> T __shfl_down_sync(unsigned, T v, unsigned o, int = 32) { int l = (int)(emu::lin_tid() & 31) + (int)o; return emu::shfl(v, l < 32 ? l : (int)(emu::lin_tid() & 31)); }
template <class T> T __shfl_up_sync(unsigned, T v, unsigned o, int = 32) { int l = (int)(emu::lin_tid() & 31) - (int)o; return emu::shfl(v, l >= 0 ? l : (int)(emu::lin_tid() & 31)); }
template <class T> T __shfl_sync(unsigned, T v, int src, int = 32) { return emu::shfl(v, src & 31); }
inline unsigned __ballot_sync(unsigned, int p) {
  unsigned r = 0;
  for (int l = 0; l < 32; l++) { int q = emu::shfl(p ? 1 : 0, l); if (q) r |= 1u << l; }
  return r;
}
inline unsigned __activemask() { return 0xffffffffu; }
template <class T> T __ldg(const T* p) { return *p; }

// bit casts and conversions
inline unsigned __float_as_uint(float f) { unsigned u; memcpy(&u, &f, 4); return u; }
inline int __float_as_int(float f) { int u; memcpy(&u, &f, 4); return u; }
inline float __uint_as_float(unsigned u) { float f; memcpy(&f, &u, 4); return f; }
inline float __int_as_float(int u) { float f; memcpy(&f, &u, 4); return f; }
inline double __longlong_as_double(long long u) { double f; memcpy(&f, &u, 8); return f; }
inline long long __double_as_longlong(double f) { long long u; memcpy(&u, &f, 8); return u; }
inline double __hiloint2double(int hi, int lo) { unsigned long long u = ((unsigned long long)(unsigned)hi << 32) | (unsigned)lo; double d; memcpy(&d, &u, 8); return d; }
inline int __double2hiint(double d) { unsigned long long u; memcpy(&u, &d, 8); return (int)(u >> 32); }
inline int __double2loint(double d) { unsigned long long u; memcpy(&u, &d, 8); return (int)(unsigned)u; }
inline float __double2float_rz(double x) {
  float f = (float)x;
  if (std::isfinite(x) && std::fabs((double)f) > std::fabs(x)) f = std::nextafter(f, 0.0f);
  return f;
}
inline float emu_h2f(unsigned short h) { _Float16 f; memcpy(&f, &h, 2); return (float)f; }
inline unsigned short emu_f2h(float x) { _Float16 f = (_Float16)x; unsigned short h; memcpy(&h, &f, 2); return h; }

// rounding-mode intrinsics (the host rounds to nearest; no contraction under -ffp-contract=off)
inline float __fadd_rn(float a, float b) { return a + b; }
inline float __fsub_rn(float a, float b) { return a - b; }
inline float __fmul_rn(float a, float b) { return a * b; }
inline float __fdiv_rn(float a, float b) { return a / b; }
inline double __dadd_rn(double a, double b) { return a + b; }
inline double __dsub_rn(double a, double b) { return a - b; }
inline double __dmul_rn(double a, double b) { return a * b; }
inline double __ddiv_rn(double a, double b) { return a / b; }
inline float __fdividef(float a, float b) { return a / b; }
inline float __expf(float x) { return expf(x); }
inline float __logf(float x) { return logf(x); }
inline float __sinf(float x) { return sinf(x); }
inline float __cosf(float x) { return cosf(x); }
inline float __powf(float a, float b) { return powf(a, b); }
inline float rsqrtf(float x) { return 1.0f / sqrtf(x); }
inline double rsqrt(double x) { return 1.0 / std::sqrt(x); }
inline float __frsqrt_rn(float x) { return 1.0f / sqrtf(x); }
inline float exp10f(float x) { return powf(10.0f, x); }
inline double exp10(double x) { return std::pow(10.0, x); }
inline float saturatef(float x) { return x < 0 ? 0 : x > 1 ? 1 : x; }
inline int __popc(unsigned x) { return __builtin_popcount(x); }
inline int __popcll(unsigned long long x) { return __builtin_popcountll(x); }
inline int __clz(int x) { return x == 0 ? 32 : __builtin_clz((unsigned)x); }
inline int __clzll(long long x) { return x == 0 ? 64 : __builtin_clzll((unsigned long long)x); }
inline int __ffs(int x) { return __builtin_ffs(x); }
inline int __ffsll(long long x) { return __builtin_ffsll(x); }
inline unsigned __brev(unsigned x) { unsigned r = 0; for (int i = 0; i < 32; i++) if (x & (1u << i)) r |= 1u << (31 - i); return r; }
inline long long __mul64hi(long long a, long long b) { return (long long)(((__int128)a * b) >> 64); }
inline unsigned long long __umul64hi(unsigned long long a, unsigned long long b) { return (unsigned long long)(((unsigned __int128)a * b) >> 64); }
inline int __mulhi(int a, int b) { return (int)(((long long)a * b) >> 32); }
inline unsigned __umulhi(unsigned a, unsigned b) { return (unsigned)(((unsigned long long)a * b) >> 32); }

// min / max as CUDA's overloads (mixed integer widths promote)
template <class A, class B> inline auto min(A a, B b) -> std::common_type_t<A, B> { using C = std::common_type_t<A, B>; return (C)a < (C)b ? (C)a : (C)b; }
template <class A, class B> inline auto max(A a, B b) -> std::common_type_t<A, B> { using C = std::common_type_t<A, B>; return (C)a > (C)b ? (C)a : (C)b; }
inline float min(float a, float b) { return fminf(a, b); }
inline float max(float a, float b) { return fmaxf(a, b); }
inline double min(double a, double b) { return std::fmin(a, b); }
inline double max(double a, double b) { return std::fmax(a, b); }

// atomics: blocks and fibers run on one OS thread, so plain read-modify-write is atomic
template <class T> T atomicAdd(T* p, T v) { T o = *p; *p = o + v; return o; }
template <class T> T __ldcg(const T* p) { return *p; }
template <class T> void __stcg(T* p, T v) { *p = v; }
template <class T> T atomicSub(T* p, T v) { T o = *p; *p = o - v; return o; }
template <class T> T atomicMax(T* p, T v) { T o = *p; if (v > o) *p = v; return o; }
template <class T> T atomicMin(T* p, T v) { T o = *p; if (v < o) *p = v; return o; }
template <class T> T atomicExch(T* p, T v) { T o = *p; *p = v; return o; }
template <class T> T atomicCAS(T* p, T c, T v) { T o = *p; if (o == c) *p = v; return o; }
template <class T> T atomicOr(T* p, T v) { T o = *p; *p = o | v; return o; }
template <class T> T atomicAnd(T* p, T v) { T o = *p; *p = o & v; return o; }

// ---- tensor-core primitives, scalar (attention kernels: `#ifdef NBX_EMU` picks these over inline PTX) ----
#define NBX_EMU 1
inline float emu_b16f(unsigned short h, bool bf) { return bf ? __uint_as_float((unsigned)h << 16) : emu_h2f(h); }
/** ldmatrix.sync.aligned.m8n8.x4(.trans).shared.b16: lanes 8i..8i+7 give the row addresses of matrix i. */
inline void emu_ldmatrix_x4(unsigned (&r)[4], const void* p, bool trans) {
  const unsigned lane = emu::lin_tid() & 31;
  for (int i = 0; i < 4; i++) {
    if (!trans) {
      const char* row = (const char*)emu::shfl((uintptr_t)p, i * 8 + (int)(lane >> 2));
      memcpy(&r[i], row + (lane & 3) * 4, 4);
    } else {
      const unsigned short* r0 = (const unsigned short*)emu::shfl((uintptr_t)p, i * 8 + 2 * (int)(lane & 3));
      const unsigned short* r1 = (const unsigned short*)emu::shfl((uintptr_t)p, i * 8 + 2 * (int)(lane & 3) + 1);
      r[i] = (unsigned)r0[lane >> 2] | ((unsigned)r1[lane >> 2] << 16);
    }
  }
}
/** movmatrix.sync.aligned.m8n8.trans.b16: lane 4r + c holds elements (r, 2c), (r, 2c + 1); the result is the transpose's. */
inline unsigned emu_movmatrix_trans(unsigned a) {
  const unsigned lane = emu::lin_tid() & 31, g = lane >> 2, t = lane & 3;
  // element (2t + e, g) of the source: lane 4 (2t + e) + g / 2, half g % 2
  const unsigned s0 = emu::shfl(a, (int)(4 * (2 * t) + g / 2)), s1 = emu::shfl(a, (int)(4 * (2 * t + 1) + g / 2));
  const unsigned sh = (g & 1) * 16;
  return ((s0 >> sh) & 0xffffu) | (((s1 >> sh) & 0xffffu) << 16);
}
/** mma.sync.aligned.m16n8k16.row.col.f32.{f16,bf16}: fragments as in the PTX ISA (groupID = lane/4, tid in group = lane%4). */
inline void emu_mma16816(float (&c)[4], const unsigned (&a)[4], unsigned b0, unsigned b1, bool bf) {
  const unsigned lane = emu::lin_tid() & 31, g = lane >> 2, t = lane & 3;
  double acc[4] = {c[0], c[1], c[2], c[3]};
  for (int k = 0; k < 16; k++) {
    const int hi = k >= 8, kl = k & 7, sh = (k & 1) * 16;
    const unsigned ra0 = emu::shfl(a[hi * 2], (int)(g * 4) + kl / 2), ra1 = emu::shfl(a[hi * 2 + 1], (int)(g * 4) + kl / 2);
    const unsigned rb0 = emu::shfl(hi ? b1 : b0, (int)(2 * t) * 4 + kl / 2), rb1 = emu::shfl(hi ? b1 : b0, (int)(2 * t + 1) * 4 + kl / 2);
    const float x0 = emu_b16f((unsigned short)(ra0 >> sh), bf), x1 = emu_b16f((unsigned short)(ra1 >> sh), bf);
    const float y0 = emu_b16f((unsigned short)(rb0 >> sh), bf), y1 = emu_b16f((unsigned short)(rb1 >> sh), bf);
    acc[0] += (double)x0 * y0; acc[1] += (double)x0 * y1; acc[2] += (double)x1 * y0; acc[3] += (double)x1 * y1;
  }
  for (int i = 0; i < 4; i++) c[i] = (float)acc[i];
}
