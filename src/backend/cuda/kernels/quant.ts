// Packed quantized weights on CUDA (contract: src/kernels/quant.ts): quant_matmul and dequantize for
// every format of the contract, float32/float16/bfloat16 activations.
//
// Decode (m ≤ QUANT_GEMV_MAX_ROWS): dequantizing GEMV kernels. Decoding a token is bound by the bytes
// of weight streamed, so each reads the packed rows once with coalesced 16-byte loads, keeps several
// loads per lane in flight through its arithmetic, and prefetches its block's packed rows into L2
// before its grid-dependency wait (programmatic dependent launch: that read overlaps the previous
// kernel's tail; x is read after the wait). Three kernels:
// - 'vec' (int8, int4, fp8, q4_k, q5_k: formats whose rows tile into self-contained 16-byte units): lane l
//   of a warp takes units l, l + 32, ... of NR rows straight into a register ring (no shared memory);
// - 'mma' (int4, groups ≥ 128, 16-bit x): nibbles to bf16/f16 pairs feeding mma.sync, also a register ring;
//   int8 (16-bit x) has a tensor-core form too (mma8CpSource: hi / lo nibble pairs), sweep-only;
// - 'fma', the tile kernel (every format; the only one for the blocks of 2-byte alignment, 34/18/22/110/
//   210 bytes, whose 16-byte vectors do not map to lanes): each warp copies tiles of R rows into its own
//   shared memory (the next tile's loads issued before this one is decoded) and lanes decode from there.
// With x staged in shared memory (knob xs), the loads can also be kept in flight by two rounds of registers
// (db) or cp.async rings in shared memory (cp; co: the tensor-core kernels' stages copied as whole 128-byte
// lines). What the sm_90a SASS showed: the single register "ring" was no ring (a round's loads issued at its
// end, all waited for at the next round's start). What the H200 showed (BENCHMARKS.md, 2026-12-03): db and
// the rings changed int8 by a few %, whole-line copies helped the tensor-core kernels, and int4 stayed at
// ~1.7 TB/s whichever form; the tuner keeps the forms that won on some shape.
// The xf form (x converted once to float32 in shared memory, several rows a warp) also runs int4 on tensor cores
// without changing its loads (tc: a lane's 16 bytes of one row are the B fragment of its 4-lane, 128-element
// segment, staged 16-bit x pairs the A fragment, the mma's diagonal the segment's dot: 64 SASS instructions per 16
// packed bytes and row against 96) and on a persistent grid (pg); knob ab times parts of it apart (diagnostics).
// Warps of a block split K by a launch argument (kw) where N is short. Quants are decoded in halves of
// 16 elements to small exact floats q (1 + q/2^B under 1.0's exponent for ≤ 6-bit quants, integers
// through the 2^23 magic-number trick: no I2F on the slow conversion pipe) and an affine map
// w = a·q + b per half, so the inner loop is one FMA per element and row of x:
// Σ x·w = a·Σ x·q + b·Σ x, Σ x shared by the weight rows. Accumulation is float32; each lane sums its
// units in order, then a butterfly, then the warps splitting K in warp order: a fixed order, the same
// bits every run. The affine factoring changes only the rounding order against dequantize-then-matmul
// (the contract's "up to the order of accumulation").
//
// Prefill (more rows) and shapes the GEMV does not take (K not a multiple of 32): dequantize into a
// scratch weight in x's dtype (one elementwise-like pass, exactly the CPU dequantizer's numbers) and
// the backend's GEMM (cuBLASLt, bias in its epilogue). A tensor-core kernel dequantizing tiles in shared
// memory would avoid the scratch; not written yet (the scratch costs one extra pass over N·K·2 bytes,
// small next to a prefill's GEMM).
//
// The bit layouts are src/io/gguf.ts's dequantizeBlocks (ggml's dequantize_row_*) for the GGUF block
// formats and the contract's comments for int8 / int4 / fp8_e4m3.

import { DTYPES, type DTypeName } from '../../../dtype/dtypes.js';
import { UnsupportedError, ShapeError } from '../../../errors.js';
import type { StridedRef } from '../../backend.js';
import type { BackendKernels } from '../../../kernels/table.js';
import type { DequantizeParams, QuantFeatures, QuantFormat, QuantMatmulParams } from '../../../kernels/quant.js';
import { kernel } from '../../../kernels/registry.js';
import { R, unpack, type CudaBackend, type CudaBuffer } from '../runtime/backend.js';
import type { ArgType } from '../runtime/driver.js';
import { defineSpace, bucketSize, tuneSync, type Config } from '../../../autotune/index.js';
import { timeColdL2 } from './gemv.js';
import { TUNE_MIN_ELEMENTS } from '../tuning/spaces.js';

let be: CudaBackend;
/** Points this family's kernels at the backend (called once, when the backend starts). */
export function bind(backend: CudaBackend): void { be = backend; }

export type QuantDType = 'float32' | 'float16' | 'bfloat16';
const DTYPES_OK: readonly QuantDType[] = ['float32', 'float16', 'bfloat16'];
export const QUANT_FORMATS: readonly QuantFormat[] = ['int8', 'int4', 'fp8_e4m3', 'q8_0', 'q4_0', 'q4_1', 'q5_0', 'q5_1', 'q2_k', 'q3_k', 'q4_k', 'q5_k', 'q6_k'];

/** Rows of x the GEMV kernel takes; more run dequantize + GEMM. */
export const QUANT_GEMV_MAX_ROWS = 8;
const WARPS = 8;
const THREADS = WARPS * 32;

/**
 * A format's block geometry: `elems` elements in `bytes` bytes (for int8/int4/fp8 a virtual block of
 * one 32-element sub-block), `align` the byte alignment every field of a block has when rows start
 * 4-aligned (2 for the blocks of odd half-word size), `mins` whether the affine map has an offset.
 */
export interface FormatGeom { elems: number; bytes: number; align: 2 | 4; mins: boolean; external: boolean }
export const GEOM: Record<QuantFormat, FormatGeom> = {
  int8: { elems: 32, bytes: 32, align: 4, mins: false, external: true },
  fp8_e4m3: { elems: 32, bytes: 32, align: 4, mins: false, external: true },
  int4: { elems: 32, bytes: 16, align: 4, mins: false, external: true },
  q8_0: { elems: 32, bytes: 34, align: 2, mins: false, external: false },
  q4_0: { elems: 32, bytes: 18, align: 2, mins: false, external: false },
  q4_1: { elems: 32, bytes: 20, align: 4, mins: true, external: false },
  q5_0: { elems: 32, bytes: 22, align: 2, mins: false, external: false },
  q5_1: { elems: 32, bytes: 24, align: 4, mins: true, external: false },
  q2_k: { elems: 256, bytes: 84, align: 4, mins: true, external: false },
  q3_k: { elems: 256, bytes: 110, align: 2, mins: false, external: false },
  q4_k: { elems: 256, bytes: 144, align: 4, mins: true, external: false },
  q5_k: { elems: 256, bytes: 176, align: 4, mins: true, external: false },
  q6_k: { elems: 256, bytes: 210, align: 2, mins: false, external: false },
};

/** The packed bytes of one row for K inputs (int4: ⌈K/2⌉; GGUF: K / block · block bytes). */
export function rowBytesOf(format: QuantFormat, k: number): number {
  if (format === 'int8' || format === 'fp8_e4m3') return k;
  if (format === 'int4') return Math.ceil(k / 2);
  const g = GEOM[format];
  return (k / g.elems) * g.bytes;
}

// ---- device code: per-format decoders ----------------------------------------------------------

/**
 * Common helpers: 32-bit words of a block at 4- or 2-byte aligned offsets, float16 fields, and the
 * conversion of four byte-lane values (each < 256) of a word to floats minus a bias: PRMT places byte t
 * under float32's exponent of 2^23 (0x4B000000 | v = 2^23 + v, exact), one FADD subtracts 2^23 + bias
 * (exact for the small integers here): 2 instructions an element, none on the slow conversion pipe.
 */
const HELPERS = String.raw`
__device__ __forceinline__ unsigned nbxq_w4(const unsigned char* p) { return *reinterpret_cast<const unsigned*>(p); }
__device__ __forceinline__ unsigned nbxq_w2(const unsigned char* p) {
  const unsigned short* h = reinterpret_cast<const unsigned short*>(p); return (unsigned)h[0] | ((unsigned)h[1] << 16); }
__device__ __forceinline__ float nbxq_f16(const unsigned char* p) { return nbx_h2f(*reinterpret_cast<const unsigned short*>(p)); }
#ifdef NBX_EMU
__device__ __forceinline__ unsigned nbxq_prmt(unsigned a, unsigned b, unsigned s) {
  const unsigned long long v = ((unsigned long long)b << 32) | a; unsigned r = 0;
  for (int i = 0; i < 4; i++) r |= (unsigned)((v >> (8 * ((s >> (4 * i)) & 7u))) & 255u) << (8 * i);
  return r; }
#else
__device__ __forceinline__ unsigned nbxq_prmt(unsigned a, unsigned b, unsigned s) { return __byte_perm(a, b, s); }
#endif
// q[0..3] (stride st) = byte t of m minus bias
__device__ __forceinline__ void nbxq_b4(unsigned m, float bias, float* q, int st) {
  #pragma unroll
  for (int t = 0; t < 4; t++) q[st * t] = __uint_as_float(nbxq_prmt(m, 0x4B000000u, 0x7540u | (unsigned)t)) - (8388608.f + bias);
}
// q[0..3] (stride st) = 1 + v/128 for byte lane t of m = 0x80 | v (v < 128): byte t under 1.0's exponent, exact
__device__ __forceinline__ void nbxq_f4(unsigned m, float* q, int st) {
  #pragma unroll
  for (int t = 0; t < 4; t++) q[st * t] = __uint_as_float(nbxq_prmt(m, 0x3F800000u, 0x7054u | ((unsigned)t << 8)));
}
// Programmatic dependent launch (runtime/nvrtc.ts): a source whose kernels call the grid-dependency wait
// themselves (the GEMV kernels; never written here with its semicolon, which would tell nvrtc.ts that the
// dequantize kernels place it too) may read what no earlier kernel writes (packed weights) before it. Where the compiler's prelude
// does not define the hooks (no PDL, older runtime), the wait is nothing and the prefetch a bulk L2
// prefetch on sm_90 (nothing elsewhere and under the emulator).
#ifndef NBX_GRID_DEPENDENCY_WAIT
#define NBX_GRID_DEPENDENCY_WAIT()
#endif
#ifndef NBX_PREFETCH_L2
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900 && !defined(NBX_EMU)
#define NBX_PREFETCH_L2(p, bytes) asm volatile("{ .reg .u64 g_; cvta.to.global.u64 g_, %0; cp.async.bulk.prefetch.L2.global [g_], %1; }" :: "l"(p), "r"((unsigned)(bytes)) : "memory")
#else
#define NBX_PREFETCH_L2(p, bytes)
#endif
#endif
// [p, p + bytes) shrunk to 16-byte boundaries (the bulk prefetch's unit; never past either end) into L2
__device__ __forceinline__ void nbxq_prefetch(const void* p, long long bytes) {
  if (p == nullptr || bytes <= 0) return;
  const unsigned long long a = (unsigned long long)p, s = (a + 15ull) & ~15ull, e = (a + (unsigned long long)bytes) & ~15ull;
  if (e > s) NBX_PREFETCH_L2((const unsigned char*)s, (e - s < 0x7ffffff0ull ? e - s : 0x7ffffff0ull));
}
// 16 bytes of packed weights (16-byte aligned): read once, so not kept in L1 (x stays there)
__device__ __forceinline__ uint4 nbxq_ld16(const unsigned char* p) {
#ifdef NBX_EMU
  return *reinterpret_cast<const uint4*>(p);
#else
  uint4 v; asm volatile("ld.global.nc.L1::no_allocate.v4.u32 {%0,%1,%2,%3}, [%4];" : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w) : "l"(p)); return v;
#endif
}
// the same load where c holds (a predicated instruction, no branch: the double-buffered loops' last
// refill of a round that does not exist issues nothing); v keeps its old value where c is false
__device__ __forceinline__ void nbxq_ld16p(uint4& v, const unsigned char* p, bool c) {
#ifdef NBX_EMU
  if (c) v = *reinterpret_cast<const uint4*>(p);
#else
  asm volatile("{ .reg .pred p_; setp.ne.b32 p_, %4, 0; @p_ ld.global.nc.L1::no_allocate.v4.u32 {%0,%1,%2,%3}, [%5]; }"
    : "+r"(v.x), "+r"(v.y), "+r"(v.z), "+r"(v.w) : "r"((int)c), "l"(p));
#endif
}
// cp.async of 16 / 4 bytes into shared memory (the lane-private rings of the 'cp' kernels), its groups
#ifdef NBX_EMU
__device__ __forceinline__ void nbxq_cp16(void* dst, const void* src) { *reinterpret_cast<uint4*>(dst) = *reinterpret_cast<const uint4*>(src); }
__device__ __forceinline__ void nbxq_cp4(void* dst, const void* src) { *reinterpret_cast<unsigned*>(dst) = *reinterpret_cast<const unsigned*>(src); }
__device__ __forceinline__ void nbxq_commit() {}
template <int N> __device__ __forceinline__ void nbxq_wait() {}
#else
__device__ __forceinline__ void nbxq_cp16(void* dst, const void* src) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" :: "r"((unsigned)__cvta_generic_to_shared(dst)), "l"(src) : "memory"); }
__device__ __forceinline__ void nbxq_cp4(void* dst, const void* src) {
  asm volatile("cp.async.ca.shared.global [%0], [%1], 4;" :: "r"((unsigned)__cvta_generic_to_shared(dst)), "l"(src) : "memory"); }
__device__ __forceinline__ void nbxq_commit() { asm volatile("cp.async.commit_group;" ::: "memory"); }
template <int N> __device__ __forceinline__ void nbxq_wait() { asm volatile("cp.async.wait_group %0;" :: "n"(N) : "memory"); }
#endif
// (u & m) | c as one LOP3 (left to itself the compiler emitted two: an AND, then an OR with the magic)
#ifdef NBX_EMU
__device__ __forceinline__ unsigned nbxq_andor(unsigned u, unsigned m, unsigned c) { return (u & m) | c; }
#else
__device__ __forceinline__ unsigned nbxq_andor(unsigned u, unsigned m, unsigned c) { unsigned d; asm("lop3.b32 %0, %1, %2, %3, 0xEA;" : "=r"(d) : "r"(u), "r"(m), "r"(c)); return d; }
#endif
// e4m3fn: sign and the 7 exponent/mantissa bits moved to float32's positions, times 2^120 (subnormals
// come out as float32 subnormals, exact); 0x7f / 0xff are NaN
__device__ __forceinline__ float nbxq_e4m3(unsigned v) {
  const float f = __uint_as_float(((v & 0x80u) << 24) | ((v & 0x7fu) << 20)) * 1.329227995784916e+36f;
  return (v & 0x7fu) == 0x7fu ? __int_as_float(0x7fc00000) : f;
}`;

/** Bits of the quant values a GEMV-form decoder turns into 1 + q/2^B (formats whose values fit 6 bits). */
const FAST_BITS: Partial<Record<QuantFormat, number>> = { int4: 4, q4_0: 4, q4_1: 4, q5_0: 5, q5_1: 5, q2_k: 2, q3_k: 3, q4_k: 4, q5_k: 5, q6_k: 6 };
/** Whether the GEMV needs Σx of each half (formats with mins, and every fast-form decoder). */
const needsSx = (f: QuantFormat): boolean => GEOM[f].mins || FAST_BITS[f] !== undefined;

/**
 * The decoder of format `f`: `nbxq_dq(blk, sb, h, q, a, b, s, z)` fills q[16] with half h of sub-block
 * sb of the block at blk (32-element sub-blocks; 8 per K-quant block) and sets the affine map
 * w = a·q + b that gives the CPU dequantizer's numbers when evaluated as fl(fl(a·q) + b). `s`, `z`:
 * the external scale and zero point (int8 / int4 / fp8), unused otherwise. Each 32-bit word of quants
 * becomes a word of byte-lane values (masks and shifts over 4 or 8 elements at once), then nbxq_b4.
 */
function decoderSource(f: QuantFormat, asym: boolean, fast = false): string {
  const W = GEOM[f].align === 4 ? 'nbxq_w4' : 'nbxq_w2';
  // fast (the GEMV's form, formats of ≤ 6-bit quants): q as 1 + q/2^B (the value's bits under 1.0's exponent,
  // no subtraction), and the affine map rewritten for it: w = a·(q − off) + b = (a·2^B)·f + (b − a·(2^B + off))
  fast = fast && FAST_BITS[f] !== undefined;
  const bits = FAST_BITS[f] ?? 0;
  const B4 = (e: string, off: string, dest: string, st: number): string => (fast
    ? `nbxq_f4((${e}) * ${2 ** (7 - bits)}u + 0x80808080u, ${dest}, ${st});`
    : `nbxq_b4(${e}, ${off}, ${dest}, ${st});`);
  const fin = (off: string): string => (fast ? `
  { const float a0_ = a; a = a0_ * ${2 ** bits}.f; b = b - a0_ * (${2 ** bits}.f + ${off}); }` : '');
  const head = `__device__ __forceinline__ void nbxq_dq(const unsigned char* __restrict__ blk, int sb, int h, float* q, float& a, float& b, float s, float z) {`;
  let body: string;
  switch (f) {
    case 'int8':
      body = `a = s; b = 0.f;
  const uint4 v = *reinterpret_cast<const uint4*>(blk + 16 * h);
  nbxq_b4(v.x ^ 0x80808080u, 128.f, q, 1); nbxq_b4(v.y ^ 0x80808080u, 128.f, q + 4, 1);
  nbxq_b4(v.z ^ 0x80808080u, 128.f, q + 8, 1); nbxq_b4(v.w ^ 0x80808080u, 128.f, q + 12, 1);`;
      break;
    case 'fp8_e4m3':
      body = `a = s; b = 0.f;
  const uint4 v = *reinterpret_cast<const uint4*>(blk + 16 * h);
  const unsigned u[4] = { v.x, v.y, v.z, v.w };
  #pragma unroll
  for (int w = 0; w < 4; w++) {
    #pragma unroll
    for (int t = 0; t < 4; t++) q[4 * w + t] = nbxq_e4m3((u[w] >> (8 * t)) & 255u); }`;
      break;
    case 'int4':
      // element e of the sub-block in byte e/2, the even e in the low nibble: low nibbles are the even
      // elements, high nibbles the odd ones
      body = `a = s; b = 0.f;
  const uint2 v = *reinterpret_cast<const uint2*>(blk + 8 * h);
  const unsigned u[2] = { v.x, v.y };
  #pragma unroll
  for (int w = 0; w < 2; w++) {
    ${B4('u[w] & 0x0F0F0F0Fu', asym ? '0.f' : '8.f', 'q + 8 * w', 2)}
    ${B4('(u[w] >> 4) & 0x0F0F0F0Fu', asym ? '0.f' : '8.f', 'q + 8 * w + 1', 2)} }${asym && !fast ? `
  #pragma unroll
  for (int c = 0; c < 16; c++) q[c] -= z;` : ''}${fin(asym ? 'z' : '8.f')}`;
      break;
    case 'q8_0':
      body = `a = nbxq_f16(blk); b = 0.f;
  #pragma unroll
  for (int w = 0; w < 4; w++) nbxq_b4(${W}(blk + 2 + 16 * h + 4 * w) ^ 0x80808080u, 128.f, q + 4 * w, 1);`;
      break;
    case 'q4_0': case 'q4_1': {
      const qo = f === 'q4_0' ? 2 : 4;
      body = `a = nbxq_f16(blk); b = ${f === 'q4_1' ? 'nbxq_f16(blk + 2)' : '0.f'};
  #pragma unroll
  for (int w = 0; w < 4; w++) ${B4(`(${W}(blk + ${qo} + 4 * w) >> (4 * h)) & 0x0F0F0F0Fu`, f === 'q4_0' ? '8.f' : '0.f', 'q + 4 * w', 1)}${fin(f === 'q4_0' ? '8.f' : '0.f')}`;
      break;
    }
    case 'q5_0': case 'q5_1': {
      // the 32 high bits (bit j: element j): 4 of them spread to the byte lanes by one multiply
      const one = f === 'q5_1', qh = one ? 4 : 2, qo = one ? 8 : 6;
      body = `a = nbxq_f16(blk); b = ${one ? 'nbxq_f16(blk + 2)' : '0.f'};
  const unsigned hb = ${W}(blk + ${qh}) >> (16 * h);
  #pragma unroll
  for (int w = 0; w < 4; w++) {
    const unsigned hi = ((((hb >> (4 * w)) & 15u) * 0x00204081u) & 0x01010101u) << 4;
    ${B4(`((${W}(blk + ${qo} + 4 * w) >> (4 * h)) & 0x0F0F0F0Fu) | hi`, one ? '0.f' : '16.f', 'q + 4 * w', 1)} }${fin(one ? '0.f' : '16.f')}`;
      break;
    }
    case 'q2_k':
      // sub-block sb: 2-bit field (sb & 3) of the 32 bytes at 16 + (sb >> 2)·32; scale byte 2·sb + h
      body = `const float d = nbxq_f16(blk + 80), dmin = nbxq_f16(blk + 82);
  const unsigned sc = blk[2 * sb + h];
  a = d * (float)(sc & 15u); b = -(dmin * (float)(sc >> 4));
  const int sh = 2 * (sb & 3);
  #pragma unroll
  for (int w = 0; w < 4; w++) ${B4('(nbxq_w4(blk + 16 + (sb >> 2) * 32 + 16 * h + 4 * w) >> sh) & 0x03030303u', '0.f', 'q + 4 * w', 1)}${fin('0.f')}`;
      break;
    case 'q3_k':
      // scale 2·sb + h (ggml's kmask unpacking of the 12 bytes at 96), high bit sb of the 32 bytes at 0
      body = `const int is = 2 * sb + h, j = is & 3, wd = is >> 2;
  const unsigned lo = wd < 2 ? (blk[96 + (wd & 1) * 4 + j] & 15u) : (blk[96 + (wd & 1) * 4 + j] >> 4);
  const unsigned hi = (blk[104 + j] >> (2 * wd)) & 3u;
  a = nbxq_f16(blk + 108) * (float)((int)(lo | (hi << 4)) - 32); b = 0.f;
  const int sh = 2 * (sb & 3);
  #pragma unroll
  for (int w = 0; w < 4; w++) {
    const unsigned u = (${W}(blk + 32 + (sb >> 2) * 32 + 16 * h + 4 * w) >> sh) & 0x03030303u;
    const unsigned m = ((${W}(blk + 16 * h + 4 * w) >> sb) & 0x01010101u) << 2;
    ${B4('u | m', '4.f', 'q + 4 * w', 1)} }${fin('4.f')}`;
      break;
    case 'q4_k': case 'q5_k': {
      // ggml's get_scale_min_k4 for scale sb; nibble (sb & 1) of the 32 bytes at qo + (sb >> 1)·32
      // (16-byte aligned in a block of 144 or 176 bytes: one vector load)
      const five = f === 'q5_k', qo = five ? 48 : 16;
      body = `const unsigned char* S = blk + 4;
  unsigned sc, mn;
  if (sb < 4) { sc = S[sb] & 63u; mn = S[sb + 4] & 63u; }
  else { sc = (S[sb + 4] & 15u) | ((S[sb - 4] >> 6) << 4); mn = (S[sb + 4] >> 4) | ((S[sb] >> 6) << 4); }
  a = nbxq_f16(blk) * (float)sc; b = -(nbxq_f16(blk + 2) * (float)mn);
  const int sh = 4 * (sb & 1);
  const uint4 v = *reinterpret_cast<const uint4*>(blk + ${qo} + (sb >> 1) * 32 + 16 * h);
  const unsigned u[4] = { v.x, v.y, v.z, v.w };${five ? `
  const uint4 hv = *reinterpret_cast<const uint4*>(blk + 16 + 16 * h);
  const unsigned hm[4] = { hv.x, hv.y, hv.z, hv.w };` : ''}
  #pragma unroll
  for (int w = 0; w < 4; w++) ${B4(`((u[w] >> sh) & 0x0F0F0F0Fu)${five ? ' | (((hm[w] >> sb) & 0x01010101u) << 4)' : ''}`, '0.f', 'q + 4 * w', 1)}${fin('0.f')}`;
      break;
    }
    case 'q6_k':
      // sub-block sb: half n = sb >> 2 of 128, part p = sb & 3: low nibbles (p < 2) or high of the 32
      // bytes at n·64 + (p & 1)·32, 2-bit field p of the bytes at 128 + n·32, int8 scale 192 + n·8 + 2p + h
      body = `const int n = sb >> 2, p = sb & 3;
  a = nbxq_f16(blk + 208) * (float)(signed char)blk[192 + n * 8 + 2 * p + h]; b = 0.f;
  #pragma unroll
  for (int w = 0; w < 4; w++) {
    const unsigned u = (${W}(blk + n * 64 + (p & 1) * 32 + 16 * h + 4 * w) >> (4 * (p >> 1))) & 0x0F0F0F0Fu;
    const unsigned m = ((${W}(blk + 128 + n * 32 + 16 * h + 4 * w) >> (2 * p)) & 0x03030303u) << 4;
    ${B4('u | m', '32.f', 'q + 4 * w', 1)} }${fin('32.f')}`;
      break;
  }
  return `${head}\n  ${body}\n}`;
}

// ---- the GEMV kernel ----------------------------------------------------------------------------

/**
 * The decode kernels and their one launch-time knob. 'vec': the register kernel (VEC_FORMATS); 'mma': int4
 * on tensor cores (groups ≥ 128, 16-bit x); 'fma': the shared-memory tile kernel (every format; the
 * others' only kernel), its weight rows per warp and sub-blocks per lane fixed per format (tileShape)
 * unless a forced configuration names them. `kw` is a launch argument: trying its values compiles
 * nothing, so first-use tuning costs one compile per kernel and a few milliseconds of timing; without
 * tuning (NBX_AUTOTUNE=off, small shapes) defaultGemv picks kw from the shape.
 */
export const QUANT_GEMV_SPACE = defineSpace({
  name: 'cuda.quant_gemv.v8',
  knobs: [
    { name: 'impl', values: ['vec', 'mma', 'fma', 'svec', 'smma', 'sfma'], movesBits: true, doc: "the register kernel (int8, int4, fp8, q4_k, q5_k), tensor cores (int4, groups ≥ 128, 16-bit x), the shared-memory tile kernel (every format), or the streaming schedule of the register / tensor-core / tile kernels (split K across blocks)" },
    { name: 'kw', values: [1, 2, 4, 8], movesBits: true, doc: "warps splitting a row group's K inside a block (a kernel argument: no extra compile; not the streaming kernels')" },
    { name: 'ring', values: [2, 3, 4, 6, 8], movesBits: false, doc: "the streaming kernels' K steps in flight: register ring slots per lane and row ('svec', 'smma'), shared-memory stages per warp ('sfma')" },
    { name: 'bps', values: [1, 2], movesBits: true, doc: "the streaming kernels' resident blocks per SM (the grid is bps × SMs; it decides the split of K)" },
    { name: 'pf', values: [0, 1], movesBits: false, doc: "whether the streaming kernels prefetch the start of each block's run into L2 before the grid-dependency wait" },
    { name: 'ms', values: [0, 1], movesBits: true, doc: "'mma' with x staged (xs): nibble pairs as magic + q (one LOP3 a pair) and the offset taken off through Σx from an all-ones mma, instead of a packed FMA a pair" },
    { name: 'xs', values: [0, 1], movesBits: false, doc: "whether 'vec', 'mma' and 'fma' stage x in shared memory (where m·K fits XS_MAX_BYTES), keeping their weight loads in flight" },
    { name: 'db', values: [0, 1], movesBits: false, doc: "'vec' and 'mma' with x staged: two rounds of weight loads in distinct registers, the next round's issued before this round's arithmetic (same sums, same order)" },
    { name: 'cp', values: [0, 2, 3, 4, 6, 8], movesBits: true, doc: "'vec' / 'mma' with x staged: 0, or the stages of a lane-private cp.async ring in shared memory (each lane copies what it decodes; exact waits, no registers held by loads in flight; 'mma' with ms: x staged in the pairs' order and each chunk's Σx staged, which moves bits)" },
    { name: 'co', values: [0, 1], movesBits: false, doc: "the tensor-core cp kernels: a warp's 16 rows copied as whole 128-byte lines into shared memory (4 lines a cp.async instruction) instead of each lane copying its own fragment's pieces (16 lines an instruction)" },
    { name: 'U', values: [0, 2, 3, 4], movesBits: false, doc: "'vec' / 'mma' loads per lane and weight row in a round (0: the kernel's default)" },
    { name: 'xf', values: [0, 1], movesBits: true, doc: "'vec' int4 / int8 with x staged (xs), m ≤ 2: x converted once to float32 in shared memory, laid out so a quarter warp's 16-byte reads hit every bank once, with each unit's Σx (int4), instead of 16-bit x converted and summed by every warp" },
    { name: 'nr', values: [0, 1, 2, 4, 8], movesBits: false, doc: "'vec' with xf: weight rows per warp sharing each read of x (0: the register kernel's, 2 for m ≤ 4)" },
    { name: 'lb', values: [0, 3, 4], movesBits: false, doc: "'vec' with x staged (xs, no cp ring): resident blocks per SM asked of ptxas by __launch_bounds__ (3: ≤ 80 registers, 24 warps per SM; 4: ≤ 64, 32 warps where shared memory allows); 0: 2 blocks (≤ 128 registers, 16 warps)" },
    { name: 'pg', values: [0, 1], movesBits: false, doc: "'vec' with xf: a persistent grid (as many blocks as fit at once, lb or 2 per SM, shared memory allowing), each staging x once and taking the block tiles blockIdx.x, + gridDim.x, ... (0: one block per tile, each staging all of x)" },
    { name: 'tc', values: [0, 1], movesBits: true, doc: "'vec' with xf, int4 (groups ≥ 128, K % 128 == 0, 16-bit x): the register kernel's lanes and loads (16 contiguous bytes of one row a lane) on tensor cores: a lane's 32 nibbles are the B fragment of its row segment (4 lanes, 128 elements), its staged x pairs the A fragment, mma.sync's diagonal D[g][g] the segment's dot (magic + nibble, one LOP3 a pair, Σx staged per segment): ~half the float form's instructions" },
    { name: 'bk', values: [0, 2, 3, 4, 6, 8], movesBits: false, doc: "'vec' with xf (int4 / int8 / q4_k, whole 32-unit stripes, 16-byte aligned rows): the weight stream through a per-warp ring of bk stages in shared memory filled by bulk copies (cp.async.bulk on sm_90: lane 0 copies a stripe of each of the warp's rows, and int4's scales, completing on the stage's mbarrier; no registers hold the bytes in flight) instead of register loads; with pg a persistent grid (kw 1) whose rings run on across tiles; 0: the register ring. Same sums as U 1 without db. Sweep-only: slower than the register kernel on the H200 (quant-7)" },
    { name: 'wu', values: [0, 1], movesBits: true, doc: "'vec' with xf, q4_k: a lane's unit is a whole 64-element chunk of a block (its 32 quant bytes: sub-blocks 2c and 2c + 1, two 16-byte loads, and the header) instead of half of one, so each sub-block's scale and min are decoded once a row, not twice, and the header is loaded once per 32 quant bytes; x staged for it (xfStage)" },
    { name: 'pb', values: [0, 1], movesBits: false, doc: "'vec' with xf and db: both rounds of weight loads issued before the grid-dependency wait (not only the first), so twice the bytes are in flight while the previous kernel ends and x is staged; in the loop the second round's next loads follow its arithmetic. Same sums, same order" },
    { name: 'ab', values: [0, 1, 2, 3], movesBits: true, doc: "diagnostics of the xf kernel, WRONG results, sweep-only (bench quant --sweep-pg): 1 weight loads from the rows' first 1 KB (L1 hits: the arithmetic's time), 2 loads only (words xor-folded, no decode: the memory stream's time), 3 x not staged (the prologue's cost); 0 none" },
  ],
  defaultConfig: { impl: 'vec', kw: 1, ring: 4, bps: 2, pf: 0, ms: 0, xs: 1, db: 0, U: 0, cp: 0, co: 0, xf: 0, nr: 0, lb: 0, pg: 0, tc: 0, ab: 0, bk: 0, wu: 0, pb: 0 },
  resources: () => ({ threads: THREADS, sharedMemoryBytes: 40 * 1024 }),
  constraint: (cfg) => (cfg.impl === 'mma' && cfg.kw !== 1 ? "kw is the other kernels'" : undefined),
});

/** Chunks of 128 elements each lane of the tensor-core kernel loads before using them. */
const MMA_CHUNKS = 4;

/** Whether the tensor-core kernel takes the call (see quantGemvMmaSource). */
export function quantMmaOk(c: Checked, p: QuantMatmulParams): boolean {
  return c.f === 'int4' && (c.d === 'bfloat16' || c.d === 'float16') && c.gsize >= 128 && (c.gsize & (c.gsize - 1)) === 0
    && c.k % 128 === 0 && addr(p.qweight) % 16n === 0n && addr(p.x) % 16n === 0n && p.m >= 1 && p.m <= 8;
}

/** Whether int8's tensor-core kernel takes the call (mma8CpSource: 16-bit x, K a multiple of 128, x staged with a cp ring). */
export function quantMma8Ok(c: Checked, p: QuantMatmulParams): boolean {
  return c.f === 'int8' && (c.d === 'bfloat16' || c.d === 'float16') && c.k % 128 === 0 && addr(p.qweight) % 16n === 0n && addr(p.x) % 16n === 0n
    && p.m >= 1 && p.m <= 8;
}

/** Tile bytes of a row for `sub` sub-blocks per lane. */
export const tileBytes = (f: QuantFormat, sub: number): number => ((32 * sub * 32) / GEOM[f].elems) * GEOM[f].bytes;

/** Static shared memory of the GEMV kernel for a configuration (the tiles of every warp's rows). */
export const gemvSmem = (f: QuantFormat, cfg: { rows?: unknown; sub?: unknown }): number => WARPS * (cfg.rows as number) * Math.ceil(tileBytes(f, cfg.sub as number) / 16) * 16;
/** The static shared-memory ceiling for the tiles: 48 KiB less the split-K partials (8 warps × 8 rows of x × 4 weight rows × 4 bytes); larger configurations are not offered. */
export const GEMV_SMEM_MAX = 48 * 1024 - WARPS * 8 * 4 * 4;

/** Rows of x the kernel is compiled for. */
export const quantRowsFor = (m: number): number => (m <= 1 ? 1 : m <= 2 ? 2 : m <= 4 ? 4 : 8);

/** A 16-element segment's products for `rows` weight rows and x row i: acc += a·Σ x·q (+ b·Σx, held in `sum`). */
function segmentDots(rows: number, sx: boolean, sum: string): string {
  return `              #pragma unroll
              for (int r = 0; r < ${rows}; r++) {
                float dot = 0.f;
                #pragma unroll
                for (int c = 0; c < 16; c++) dot = fmaf(x[c], q[r][c], dot);
                acc[i][r] = fmaf(a[r], dot, acc[i][r]);${sx ? `
                acc[i][r] = fmaf(b[r], ${sum}, acc[i][r]);` : ''}
              }`;
}

/**
 * The tile kernels' decode of one tile (index t in its row) of `rows` rows in shared memory at
 * tileRef[r]: lane l takes sub-blocks l, l + 32, ... (sub of them), each in halves of 16 elements, and
 * adds their products with x to acc[i][r] (the affine form: a·Σx·q + b·Σx).
 */
function tileDecode(f: QuantFormat, asym: boolean, d: QuantDType, mr: number, rows: number, sub: number, tileRef: string, xb = 'X'): string {
  const g = GEOM[f], T = R.storageType(d), SPB = g.elems / 32;
  const XV = 16 / DTYPES[d].itemsize, xLoads = 16 / XV;
  const sx = needsSx(f);
  return `    #pragma unroll
    for (int s = 0; s < ${sub}; s++) {
      const int ls = s * 32 + lane;            // sub-block within the tile
      const int gs = t * ${32 * sub} + ls;      // sub-block within the row
      if (gs < nsub) {
        float sc[${rows}], zp[${rows}];
        #pragma unroll
        for (int r = 0; r < ${rows}; r++) {
          ${g.external ? `const long long si = (long long)(n0 + r < n ? n0 + r : n - 1) * sRow + (sRow == 0 ? 0 : ((gs << 5) >> gshift));
          sc[r] = S[si]; zp[r] = ${asym ? 'Z[si]' : '0.f'};` : 'sc[r] = 0.f; zp[r] = 0.f;'}
        }
        #pragma unroll
        for (int h = 0; h < 2; h++) {
          float q[${rows}][16], a[${rows}], b[${rows}];
          #pragma unroll
          for (int r = 0; r < ${rows}; r++) nbxq_dq(&${tileRef}[r][(ls / ${SPB}) * ${g.bytes}], ls % ${SPB}, h, q[r], a[r], b[r], sc[r], zp[r]);
          #pragma unroll
          for (int i = 0; i < ${mr}; i++) {
            if (i == 0 || i < m) { // m ≥ 1
              float x[16];
              const ${T}* xp = ${xb} + (long long)i * K + (gs << 5) + 16 * h;
              #pragma unroll
              for (int v = 0; v < ${xLoads}; v++) {
                const uint4 ux = reinterpret_cast<const uint4*>(xp)[v];
                const ${T} e[${XV}] = { ${unpack(d, 'ux', XV)} };
                #pragma unroll
                for (int c = 0; c < ${XV}; c++) x[v * ${XV} + c] = ${R.load(d, 'e', 'c')};
              }
              ${sx ? `float sx = 0.f;
              #pragma unroll
              for (int c = 0; c < 16; c++) sx += x[c];` : ''}
${segmentDots(rows, sx, 'sx')}
            }
          }
        }
      }
    }
`;
}

/** The tile GEMV kernels' signature (quant_gemv: x, packed rows, scales, zeros, bias, out; sizes; kw). */
const tileKernelHead = (T: string): string => `extern "C" __global__ void __launch_bounds__(${THREADS}) quant_gemv(const ${T}* __restrict__ X, const unsigned char* __restrict__ Wq,
  const float* __restrict__ S, const float* __restrict__ Z, const ${T}* __restrict__ bias, ${T}* __restrict__ O,
  int m, int n, int K, long long rowBytes, int sRow, int gshift, int kw) {
`;

/** The tile kernels' row group: K's 32-element sub-blocks, tiles of TB bytes, this warp's row pointers and accumulators. */
const tileRows = (TB: number, rows: number, mr: number): string => `  const int nsub = K >> 5;
  const long long tb = ${TB};
  const int ntiles = (int)((rowBytes + tb - 1) / tb);
  const unsigned char* wrow[${rows}];
  #pragma unroll
  for (int r = 0; r < ${rows}; r++) wrow[r] = Wq + (long long)(n0 + r < n ? n0 + r : n - 1) * rowBytes; // past the end: repeated, never stored
  float acc[${mr}][${rows}];
  #pragma unroll
  for (int i = 0; i < ${mr}; i++) {
    #pragma unroll
    for (int r = 0; r < ${rows}; r++) acc[i][r] = 0.f;
  }
`;

/** Each lane's acc[mr][rows] summed over the warp (butterfly). */
const warpSums = (mr: number, rows: number): string => `  #pragma unroll
  for (int i = 0; i < ${mr}; i++) {
    #pragma unroll
    for (int r = 0; r < ${rows}; r++) {
      #pragma unroll
      for (int o = 16; o > 0; o >>= 1) acc[i][r] += __shfl_xor_sync(0xffffffffu, acc[i][r], o);
    }
  }
`;

/** Source of the GEMV kernel: format, asymmetric zeros (int4), x dtype, MR rows of x, R weight rows per warp, S sub-blocks per lane, VW-byte loads. */
export function quantGemvSource(f: QuantFormat, asym: boolean, d: QuantDType, mr: number, rows: number, sub: number, vw: number, xs = false, cp = 0): { src: string; name: string; sig: ArgType[] } {
  if (xs && cp > 0 && vw === 16) return tileCpSource(f, asym, d, mr, rows, sub, cp);
  const g = GEOM[f], T = R.storageType(d), TB = tileBytes(f, sub), SPB = g.elems / 32;
  const VT = vw === 16 ? 'uint4' : vw === 8 ? 'uint2' : vw === 4 ? 'unsigned' : 'unsigned short';
  const UPL = Math.ceil(TB / vw / 32), TBP = Math.ceil(TB / 16) * 16;
  const XV = 16 / DTYPES[d].itemsize; // x elements per 16-byte vector
  const xLoads = 16 / XV;
  const sig: ArgType[] = ['ptr', 'ptr', 'ptr', 'ptr', 'ptr', 'ptr', 'i32', 'i32', 'i32', 'i64', 'i32', 'i32', 'i32'];
  const sx = needsSx(f);
  const src = `${HELPERS}
${decoderSource(f, asym, true)}
${tileKernelHead(T)}  __align__(16) __shared__ unsigned char tile[${WARPS}][${rows}][${TBP}];
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  // kw warps share a row group and take its tiles in turn (split K: more loads in flight for long rows)
  const int rg = warp / kw, ks = warp - rg * kw;
  const int nb = blockIdx.x * (${WARPS} / kw) * ${rows};
  if (threadIdx.x == 0) { // the block's packed rows (and scales) into L2 before waiting for the previous kernel
    const int nr_ = n - nb < (${WARPS} / kw) * ${rows} ? n - nb : (${WARPS} / kw) * ${rows};
    nbxq_prefetch(Wq + (long long)nb * rowBytes, (long long)nr_ * rowBytes);${g.external ? `
    nbxq_prefetch(S + (long long)nb * sRow, (long long)nr_ * sRow * 4);${asym ? `
    nbxq_prefetch(Z + (long long)nb * sRow, (long long)nr_ * sRow * 4);` : ''}` : ''}
  }
${xs ? '' : '  NBX_GRID_DEPENDENCY_WAIT();\n'}  const int n0 = nb + rg * ${rows};
  const bool live = n0 < n; // uniform per warp; dead warps still meet the block's barrier below
${tileRows(TB, rows, mr)}  ${VT} pre[${rows}][${UPL}];
  // the tile's ${VT} units: lane u, u + 32, ... (coalesced), only those inside the row
  #define NBXQ_LOAD(t) { const long long base_ = (long long)(t) * tb; const long long left_ = rowBytes - base_; \\
    const int units_ = (int)((left_ < tb ? left_ : tb) / ${vw}); \\
    _Pragma("unroll") for (int r = 0; r < ${rows}; r++) { \\
      _Pragma("unroll") for (int j = 0; j < ${UPL}; j++) { const int u_ = lane + 32 * j; \\
        if (u_ < units_) pre[r][j] = reinterpret_cast<const ${VT}*>(wrow[r] + base_)[u_]; } } }
${xs ? `  // xs: the first tile's loads before the wait (packed weights: never written by earlier kernels), then x staged
  if (live) NBXQ_LOAD(ks)
  NBX_GRID_DEPENDENCY_WAIT();
${xStage(T)}
  if (live) {` : `  if (live) {
  NBXQ_LOAD(ks)`}
  for (int t = ks; t < ntiles; t += kw) {
    __syncwarp();
    #pragma unroll
    for (int r = 0; r < ${rows}; r++) {
      #pragma unroll
      for (int j = 0; j < ${UPL}; j++) { const int u_ = lane + 32 * j; if (u_ * ${vw} < ${TB}) reinterpret_cast<${VT}*>(tile[warp][r])[u_] = pre[r][j]; }
    }
    __syncwarp();
    if (t + kw < ntiles) NBXQ_LOAD(t + kw)
${tileDecode(f, asym, d, mr, rows, sub, 'tile[warp]', xs ? 'Xs' : 'X')}  }
  }
  #undef NBXQ_LOAD
${warpSums(mr, rows)}${warpPartialsAndStore(d, mr, rows, 'live')}
}`;
  return { src, name: 'quant_gemv', sig };
}

/** Dynamic shared memory of the tile kernel's cp ring past x: every warp's stages of `rows` padded tiles. */
export const tileCpRingBytes = (f: QuantFormat, rows: number, sub: number, stages: number): number => WARPS * stages * rows * Math.ceil(tileBytes(f, sub) / 16) * 16;

/**
 * The tile kernel with a cp.async ring (knob cp = stages, x staged, 16-byte loads): each warp's tiles go
 * from memory into its own NST stages in dynamic shared memory past x, lane u copying units u, u + 32, …
 * (coalesced), a commit group per tile; before decoding, cp.async.wait_group NST − 1 (this lane's copies
 * of the tile landed) and a warp barrier (every lane's: lanes decode sub-blocks other lanes copied).
 * NST − 1 tiles stay in flight through the decode without registers (the register staging of quantGemvSource
 * had ptxas wait for a tile's loads before its shared stores, each tile's loads drained).
 */
function tileCpSource(f: QuantFormat, asym: boolean, d: QuantDType, mr: number, rows: number, sub: number, NST: number): { src: string; name: string; sig: ArgType[] } {
  const g = GEOM[f], T = R.storageType(d), TB = tileBytes(f, sub), TBP = Math.ceil(TB / 16) * 16, UPL = Math.ceil(TB / 16 / 32);
  const src = `${HELPERS}
${decoderSource(f, asym, true)}
${tileKernelHead(T)}  ${XS_DECL}
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int rg = warp / kw, ks = warp - rg * kw;
  const int nb = blockIdx.x * (${WARPS} / kw) * ${rows};
  const int n0 = nb + rg * ${rows};
  const bool live = n0 < n; // uniform per warp; dead warps still stage x
${tileRows(TB, rows, mr)}  // this warp's stages past x: stage st, row r at ring + (st·rows + r)·TBP
  unsigned char* ring = nbxq_xs_ + ((((long long)m * K * (long long)sizeof(${T})) + 15) & ~15LL) + (long long)warp * ${NST * rows * TBP};
  // tile t (if any) into stage st: the 16-byte units inside the row, lane u, u + 32, ...; then a commit
  #define NBXQ_CPT(st, t) { if (live && (t) < ntiles) { const long long base_ = (long long)(t) * tb; const long long left_ = rowBytes - base_; \
    const int units_ = (int)((left_ < tb ? left_ : tb) >> 4); \
    _Pragma("unroll") for (int r = 0; r < ${rows}; r++) { \
      _Pragma("unroll") for (int j = 0; j < ${UPL}; j++) { const int u_ = lane + 32 * j; \
        if (u_ < units_) nbxq_cp16(ring + ((st) * ${rows} + r) * ${TBP} + u_ * 16, wrow[r] + base_ + u_ * 16); } } } \
    nbxq_commit(); }
  #pragma unroll
  for (int i_ = 0; i_ < ${NST}; i_++) NBXQ_CPT(i_, ks + i_ * kw)
  NBX_GRID_DEPENDENCY_WAIT();
${xStage(T, true)}
  if (live) {
    int st = 0;
    for (int t = ks; t < ntiles; t += kw) {
      nbxq_wait<${NST - 1}>(); // this lane's copies of tile t
      __syncwarp();            // and every lane's
      unsigned char (*tl)[${TBP}] = reinterpret_cast<unsigned char (*)[${TBP}]>(ring + st * ${rows * TBP});
${tileDecode(f, asym, d, mr, rows, sub, 'tl', 'Xs')}      __syncwarp(); // every lane done with the stage before it is refilled
      NBXQ_CPT(st, t + ${NST} * kw)
      st = st + 1 == ${NST} ? 0 : st + 1;
    }
  }
  #undef NBXQ_CPT
${warpSums(mr, rows)}${warpPartialsAndStore(d, mr, rows, 'live')}
}`;
  return { src, name: 'quant_gemv', sig: ['ptr', 'ptr', 'ptr', 'ptr', 'ptr', 'ptr', 'i32', 'i32', 'i32', 'i64', 'i32', 'i32', 'i32'] };
}

/**
 * The end of a decode GEMV whose warps hold acc[mr][rows] for output rows n0 … n0 + rows − 1: with kw
 * warps splitting K, their partials are added in warp order by the row group's first warp (ks == 0),
 * which then adds the bias and stores (where `live`).
 */
function warpPartialsAndStore(d: DTypeName, mr: number, rows: number, live: string): string {
  return `  __shared__ float red[${WARPS}][${mr * rows}];
  if (kw > 1) {
    // the kw warps' partial sums, added in warp order by the row group's first warp
    if (lane == 0) {
      #pragma unroll
      for (int i = 0; i < ${mr}; i++) {
        #pragma unroll
        for (int r = 0; r < ${rows}; r++) red[warp][i * ${rows} + r] = acc[i][r];
      }
    }
    __syncthreads();
    if (lane == 0 && ks == 0) {
      for (int q = 1; q < kw; q++) {
        #pragma unroll
        for (int i = 0; i < ${mr}; i++) {
          #pragma unroll
          for (int r = 0; r < ${rows}; r++) acc[i][r] += red[warp + q][i * ${rows} + r];
        }
      }
    }
  }
  if (lane == 0 && ks == 0 && (${live})) {
    #pragma unroll
    for (int r = 0; r < ${rows}; r++) {
      const int j = n0 + r;
      if (j < n) {
        #pragma unroll
        for (int i = 0; i < ${mr}; i++) if (i < m) { float v_ = acc[i][r]; if (bias) v_ += ${R.load(d, 'bias', 'j')}; ${R.store(d, 'O', '(long long)i * n + j', 'v_')} }
      }
    }
  }`;
}

// ---- the register GEMV (formats whose packed rows tile into 16-byte units) -------------------------

/**
 * Formats of the register kernel: every 16-byte vector of packed quants ("unit") decodes on its own
 * (int8 / fp8: 16 elements under a per-row scale; int4: 32 elements of one group; q4_k / q5_k: the
 * 16 bytes of quants of half of two sub-blocks, with the block's 16-byte header (and q5_k's 16 bytes
 * of high bits) loaded by the same lane), so lane l of a warp takes units l, l + 32, ... of a row:
 * coalesced 16-byte loads straight into registers, no shared memory.
 */
export const VEC_FORMATS: readonly QuantFormat[] = ['int8', 'fp8_e4m3', 'int4', 'q4_k', 'q5_k'];
/** Elements per unit. */
const unitElems = (f: QuantFormat): number => (f === 'int8' || f === 'fp8_e4m3' ? 16 : 32);
/** 16-byte loads per unit and weight row (quants, plus header / high bits). */
const unitLoads = (f: QuantFormat): number => (f === 'q4_k' ? 2 : f === 'q5_k' ? 3 : 1);
/** Weight rows per warp (x converted once for all of them) for MR rows of x. */
export const vecRows = (mr: number): number => (mr <= 4 ? 2 : 1);
/** Units per lane and weight row in the register ring (8 × 16-byte loads in flight per lane for the 1-load formats), within 2 blocks' 128 registers. */
export const vecUnroll = (f: QuantFormat, mr: number): number => (f === 'q5_k' ? 2 : f === 'q4_k' && mr !== 1 ? 2 : 4); // more spills past 128 registers (ptxas -v, sm_90a)

/** The xf form's units per lane and row a round: 8 16-byte loads per lane in flight (as vecUnroll's 4 × 2 rows), in one round or two (db). */
export const xfUnroll = (nr: number, db: boolean): number => Math.max(1, (db ? 4 : 8) / nr);

/** Elements of the xf form's unit: q4_k's wide unit (wu) is a whole 64-element chunk of a block (two 16-byte quant loads). */
const xfUnitElems = (f: QuantFormat, wide: boolean): number => (wide ? 64 : unitElems(f));

/**
 * q4_k's wide unit (wu) in ring slot j: unit u is chunk c = u & 3 of block u >> 2, its 32 quant bytes
 * (wv: bytes 0-15, qv: 16-31; byte b: element b of sub-block 2c in the low nibble, of 2c + 1 in the
 * high one) and the block's header (hv). Past the row's end: its last unit again, never used.
 */
const kWideLoads = (nr: number) => (j: string, uExpr: string, pred?: string): string => {
  const ld = (dst: string, a: string): string => (pred ? `nbxq_ld16p(${dst}, ${a}, ${pred});` : `${dst} = nbxq_ld16(${a});`);
  return `{
        const int u_ = ${uExpr};
        const int u = u_ < upr ? u_ : upr - 1;
        #pragma unroll
        for (int r = 0; r < ${nr}; r++) {
          const unsigned char* b_ = wr[r] + (long long)(u >> 2) * 144;
          ${ld(`wv[${j}][r]`, 'b_ + 16 + 32 * (u & 3)')}
          ${ld(`qv[${j}][r]`, 'b_ + 32 + 32 * (u & 3)')}
          ${ld(`hv[${j}][r]`, 'b_')}
        }
      }`;
};

/** 16 x values (float) at element p of x, any dtype (16-byte aligned). */
function x16Source(d: QuantDType): string {
  const T = R.storageType(d);
  if (d === 'float32') {
    return `__device__ __forceinline__ void nbxq_x16(const ${T}* p, float* x) {
  #pragma unroll
  for (int v = 0; v < 4; v++) { const uint4 u = reinterpret_cast<const uint4*>(p)[v]; x[4 * v] = __uint_as_float(u.x); x[4 * v + 1] = __uint_as_float(u.y); x[4 * v + 2] = __uint_as_float(u.z); x[4 * v + 3] = __uint_as_float(u.w); }
}`;
  }
  const cv = d === 'bfloat16' ? (w: string, hi: boolean): string => (hi ? `__uint_as_float(${w} & 0xffff0000u)` : `__uint_as_float(${w} << 16)`)
    : (w: string, hi: boolean): string => `nbx_h2f((unsigned short)(${w}${hi ? ' >> 16' : ''}))`;
  return `__device__ __forceinline__ void nbxq_x16(const ${T}* p, float* x) {
  #pragma unroll
  for (int v = 0; v < 2; v++) {
    const uint4 u = reinterpret_cast<const uint4*>(p)[v];
    const unsigned w[4] = { u.x, u.y, u.z, u.w };
    #pragma unroll
    for (int j = 0; j < 4; j++) { x[8 * v + 2 * j] = ${cv('w[j]', false)}; x[8 * v + 2 * j + 1] = ${cv('w[j]', true)}; }
  }
}`;
}

/**
 * The register kernels' per-format pieces ('vec' and 'svec'): loads(j, u) fills ring slot j with unit u
 * of the rows at wr[r] (int4: scales / zeros through srow[r]; past the row's end: zeros, never used),
 * body decodes slot j (unit u) and adds its products to acc[i][r] (int8 / fp8: row scales rs[r]).
 */
/**
 * The K-quant header of ring slot j, row r (hv[j][r]): sub-block 2·kc + hi's 6-bit scale sc_ and min mn_
 * (ggml's get_scale_min_k4 with this lane's constant shifts sh0 / sh1 and branch-free selects on khi).
 */
const kScaleMin = (hi: number): string => `const unsigned A_ = hv[j][r].y >> sh${hi}, B_ = hv[j][r].z >> sh${hi}, C_ = hv[j][r].w >> sh${hi};
            const unsigned sc_ = khi ? ((C_ & 15u) | ((A_ >> 2) & 0x30u)) : (A_ & 63u), mn_ = khi ? (((C_ >> 4) & 15u) | ((B_ >> 2) & 0x30u)) : (B_ & 63u);`;

interface VecParts { loads: (j: string, uExpr: string, pred?: string) => string; body: string; cpIssue: (st: string, uExpr: string) => string; cpRead: (st: string) => string }
function vecParts(f: QuantFormat, asym: boolean, mr: number, nr: number, xb = 'X'): VecParts {
  const kq = f === 'q4_k' || f === 'q5_k', five = f === 'q5_k';
  const sx = f === 'int4' || kq; // the fast form 1 + q/2^B needs Σx
  // the unit's loads: quants (wv), K-quant header (hv), q5_k high bits (qv)
  const unitOff = f === 'q4_k' ? '(long long)(u >> 3) * 144 + 16 + 16 * (u & 7)' : f === 'q5_k' ? '(long long)(u >> 3) * 176 + 48 + 16 * (u & 7)' : '16LL * u';
  // the loads of unit u (slot j of the register ring); past the row's end: zeros, never used
  // unconditional (past the row's end: its last unit again, never used): straight-line loads that the
  // compiler counts in issue order, so using slot j waits for slot j's loads only
  // (pred: a condition under which the 16-byte loads are issued at all; scales stay unconditional)
  const ld = (dst: string, a: string, pred?: string): string => (pred ? `nbxq_ld16p(${dst}, ${a}, ${pred});` : `${dst} = nbxq_ld16(${a});`);
  const loads = (j: string, uExpr: string, pred?: string): string => `{
        const int u_ = ${uExpr};
        const int u = u_ < upr ? u_ : upr - 1;
        #pragma unroll
        for (int r = 0; r < ${nr}; r++) {
          ${ld(`wv[${j}][r]`, `wr[r] + ${unitOff}`, pred)}${kq ? `
          ${ld(`hv[${j}][r]`, `wr[r] + (long long)(u >> 3) * ${five ? 176 : 144}`, pred)}` : ''}${five ? `
          ${ld(`qv[${j}][r]`, `wr[r] + (long long)(u >> 3) * 176 + 16 + 16 * (u & 1)`, pred)}` : ''}${f === 'int4' ? `
          { const long long si_ = srow[r] + (((long long)u << 5) >> gshift); sc[${j}][r] = S[si_];${asym ? ` zz[${j}][r] = Z[si_];` : ''} }` : ''}
        }
      }`;
  // the 'cp' ring (vecCpSource): the same vectors and scalars of unit u copied into this thread's slots of
  // stage st (RW[stage][row][vector][thread], RS[stage][row][scale, zero][thread]), read back into slot 0
  const V = 1 + (kq ? 1 : 0) + (five ? 1 : 0), NSC = asym ? 2 : 1;
  const vecs: [string, string][] = [['wv', `wr[r] + ${unitOff}`], ...(kq ? [['hv', `wr[r] + (long long)(u >> 3) * ${five ? 176 : 144}`] as [string, string]] : []),
    ...(five ? [['qv', 'wr[r] + (long long)(u >> 3) * 176 + 16 + 16 * (u & 1)'] as [string, string]] : [])];
  const rw = (st: string, v: number): string => `RW[((${st} * ${nr} + r) * ${V} + ${v}) * ${THREADS} + tid]`;
  const rs = (st: string, v: number): string => `RS[((${st} * ${nr} + r) * ${NSC} + ${v}) * ${THREADS} + tid]`;
  const cpIssue = (st: string, uExpr: string): string => `{
        const int u = ${uExpr};
        if (u < upr) {
          #pragma unroll
          for (int r = 0; r < ${nr}; r++) {
            ${vecs.map(([, a], v) => `nbxq_cp16(&${rw(st, v)}, ${a});`).join(' ')}${f === 'int4' ? `
            { const long long si_ = srow[r] + (((long long)u << 5) >> gshift); nbxq_cp4(&${rs(st, 0)}, S + si_);${asym ? ` nbxq_cp4(&${rs(st, 1)}, Z + si_);` : ''} }` : ''}
          }
        }
        nbxq_commit();
      }`;
  const cpRead = (st: string): string => `#pragma unroll
        for (int r = 0; r < ${nr}; r++) { ${vecs.map(([n], v) => `${n}[0][r] = ${rw(st, v)};`).join(' ')}${f === 'int4' ? ` sc[0][r] = ${rs(st, 0)};${asym ? ` zz[0][r] = ${rs(st, 1)};` : ''}` : ''} }`;
  // one 16-element segment: q[r][16] and the affine map (a[r], b[r]) of each row, x at element xoff
  const segment = (decode: string, xoff: string): string => `{
          float q[${nr}][16], a[${nr}], b[${nr}];
          #pragma unroll
          for (int r = 0; r < ${nr}; r++) { ${decode} }
          #pragma unroll
          for (int i = 0; i < ${mr}; i++) {
            if (i == 0 || i < m) { // m ≥ 1: row 0 unguarded (no branch around the whole decode for one row)
              float x[16];
              nbxq_x16(${xb} + (long long)i * K + (${xoff}), x);${sx ? `
              float s_ = 0.f;
              #pragma unroll
              for (int c = 0; c < 16; c++) s_ += x[c];` : ''}
${segmentDots(nr, sx, 's_')}
            }
          }
        }`;
  let body: string;
  switch (f) {
    case 'int8':
      body = segment(`const unsigned w_[4] = { wv[j][r].x, wv[j][r].y, wv[j][r].z, wv[j][r].w };
            #pragma unroll
            for (int t = 0; t < 4; t++) nbxq_b4(w_[t] ^ 0x80808080u, 128.f, q[r] + 4 * t, 1);
            a[r] = rs[r]; b[r] = 0.f;`, '(u << 4)');
      break;
    case 'fp8_e4m3':
      body = segment(`const unsigned w_[4] = { wv[j][r].x, wv[j][r].y, wv[j][r].z, wv[j][r].w };
            #pragma unroll
            for (int t = 0; t < 16; t++) q[r][t] = nbxq_e4m3((w_[t >> 2] >> (8 * (t & 3))) & 255u);
            a[r] = rs[r]; b[r] = 0.f;`, '(u << 4)');
      break;
    case 'int4':
      // element e of the unit in byte e/2 (even e in the low nibble); segment h: words 2h, 2h + 1
      body = [0, 1].map((h) => segment(`const unsigned w_[2] = { ${h ? 'wv[j][r].z, wv[j][r].w' : 'wv[j][r].x, wv[j][r].y'} };
            #pragma unroll
            for (int t = 0; t < 2; t++) { nbxq_f4((w_[t] & 0x0F0F0F0Fu) * 8u + 0x80808080u, q[r] + 8 * t, 2); nbxq_f4(((w_[t] >> 4) & 0x0F0F0F0Fu) * 8u + 0x80808080u, q[r] + 8 * t + 1, 2); }
            a[r] = sc[j][r] * 16.f; b[r] = -(sc[j][r] * (16.f + ${asym ? 'zz[j][r]' : '8.f'}));`, `(u << 5) + ${16 * h}`)).join('\n        ');
      break;
    default: {
      // q4_k / q5_k: unit p = u & 7 (= lane & 7) of block u >> 3 holds bytes 16·(p & 1) .. + 15 of the 32
      // quant bytes of sub-blocks 2c and 2c + 1 (c = p >> 1): low nibbles sub-block 2c, high nibbles 2c + 1,
      // elements 16·(p & 1) + 0..15 of each; scale and min of sub-block sb from the header (ggml's
      // get_scale_min_k4) with this lane's constant shifts and branch-free selects
      const B = five ? 5 : 4;
      const dec = (hi: number): string => `const unsigned w_[4] = { wv[j][r].x, wv[j][r].y, wv[j][r].z, wv[j][r].w };${five ? `
            const unsigned h_[4] = { qv[j][r].x, qv[j][r].y, qv[j][r].z, qv[j][r].w };` : ''}
            #pragma unroll
            for (int t = 0; t < 4; t++) nbxq_f4(((${hi ? '(w_[t] >> 4)' : 'w_[t]'} & 0x0F0F0F0Fu)${five ? ` | (((h_[t] >> (2 * kc + ${hi})) & 0x01010101u) << 4)` : ''}) * ${2 ** (7 - B)}u + 0x80808080u, q[r] + 4 * t, 1);
            ${kScaleMin(hi)}
            const float a0_ = nbx_h2f((unsigned short)hv[j][r].x) * (float)sc_;
            a[r] = a0_ * ${2 ** B}.f; b[r] = -(nbx_h2f((unsigned short)(hv[j][r].x >> 16)) * (float)mn_) - a0_ * ${2 ** B}.f;`;
      body = [0, 1].map((hi) => segment(dec(hi), `(u >> 3) * 256 + kc * 64 + ${hi * 32} + 16 * (u & 1)`)).join('\n        ');
    }
  }
  return { loads, body, cpIssue, cpRead };
}

/** Formats of the register kernel's xf form (x as float32 in shared memory, vecXfBody). */
export const XF_FORMATS: readonly QuantFormat[] = ['int8', 'int4', 'q4_k'];
/** Rows of x the xf form takes (decode): at 8 rows × 4 weight rows its dots and x chunks spilled (ptxas -v, sm_90a: ~2 KB). */
export const XF_MAX_ROWS = 2;

/**
 * Shared memory of the xf form for m rows of x: x as float32, each row padded to whole groups of 8 units
 * (xfStage's layout), then int4's unit sums Σx.
 */
export function quantXfBytes(f: QuantFormat, m: number, k: number, wide = false): number {
  const ue = xfUnitElems(f, wide), xk = Math.ceil(k / (8 * ue)) * 8 * ue;
  const sums = f === 'int4' ? 1 : f === 'q4_k' ? 2 : 0; // Σx per unit (q4_k: its two sub-blocks' halves)
  return m * xk * 4 + Math.ceil((m * (k / ue) * 4 * sums) / 16) * 16;
}

/**
 * The xf form's staging of x (after the grid-dependency wait): one thread per unit of each row of x
 * converts its UE elements to float32 and stores them as UE/4 16-byte chunks. Layout: 8 consecutive units
 * form a group of 8·UE floats in which chunk c of unit u sits at 32·c + 4·(u & 7) floats, so when a warp
 * reads chunk c of its 32 consecutive units each quarter warp (8 units of one group) covers 128 contiguous
 * bytes: every bank once. Why: read in place, a lane's unit of 16-bit x is 32-64 contiguous bytes and the
 * lanes of a quarter warp collide on the same banks (2-4 ways); and every warp converted the same x to
 * float32 and summed it again. int4 also stores each unit's Σx (fixed order) for the affine form.
 * q4_k: a unit's 16 bytes hold elements e of sub-block 2·kc (low nibbles) and 2·kc + 1 (high nibbles),
 * e = 16·(u & 1) + 0..15 (vecParts); its 32 floats are staged interleaved, the low sub-block's at even
 * places and the high one's at odd places, so int4's word decode (low nibble, high nibble of byte b)
 * meets them in order; each half's Σx is staged (two scales a unit).
 */
function xfStage(f: QuantFormat, T: string, stage = true, off = '', declared = false, wide = false): string {
  const ue = xfUnitElems(f, wide), ch = ue / 4, sx = f === 'int4', kq = f === 'q4_k', H = ue / 2; // q4_k: H elements of each of the unit's two sub-blocks
  return `  ${declared ? '' : XS_DECL}
  const int XK = ((K + ${8 * ue - 1}) / ${8 * ue}) * ${8 * ue}; // a row of x in shared memory: whole groups of 8 units
  ${stage ? '{' : 'if (false) { // diagnostics ab 3: x left unstaged'}
    float* xf_ = reinterpret_cast<float*>(nbxq_xs_${off});
    const uint4* xg_ = reinterpret_cast<const uint4*>(X); // ${ue} elements of x are a whole number of 16-byte vectors
    for (int t_ = threadIdx.x; t_ < m * upr; t_ += ${THREADS}) {
      const int i_ = t_ / upr, u_ = t_ - i_ * upr;
      float v_[${ue}];${kq ? `
      const long long e0_ = (long long)i_ * K + ${wide ? '(u_ >> 2) * 256 + (u_ & 3) * 64' : '(u_ >> 3) * 256 + ((u_ & 7) >> 1) * 64 + 16 * (u_ & 1)'}; // sub-block 2·kc's first element of the unit
      float lo_[${H}], hi_[${H}];
      #pragma unroll
      for (int h = 0; h < ${H / 16}; h++) {
        nbxq_x16(reinterpret_cast<const ${T}*>(xg_ + (((e0_ + 16 * h) * (long long)sizeof(${T})) >> 4)), lo_ + 16 * h);
        nbxq_x16(reinterpret_cast<const ${T}*>(xg_ + (((e0_ + 32 + 16 * h) * (long long)sizeof(${T})) >> 4)), hi_ + 16 * h);
      }
      #pragma unroll
      for (int e = 0; e < ${H}; e++) { v_[2 * e] = lo_[e]; v_[2 * e + 1] = hi_[e]; }` : `
      const long long v0_ = (((long long)i_ * K + (long long)u_ * ${ue}) * (long long)sizeof(${T})) >> 4;
      #pragma unroll
      for (int h = 0; h < ${ue / 16}; h++) nbxq_x16(reinterpret_cast<const ${T}*>(xg_ + v0_) + 16 * h, v_ + 16 * h);`}
      float* d_ = xf_ + (long long)i_ * XK + (u_ >> 3) * ${8 * ue} + (u_ & 7) * 4;
      #pragma unroll
      for (int c = 0; c < ${ch}; c++) { const float4 o_ = { v_[4 * c], v_[4 * c + 1], v_[4 * c + 2], v_[4 * c + 3] }; *reinterpret_cast<float4*>(d_ + 32 * c) = o_; }${sx ? `
      float s_ = 0.f;
      #pragma unroll
      for (int c = 0; c < ${ue}; c++) s_ += v_[c];
      xf_[(long long)m * XK + t_] = s_;` : ''}${kq ? `
      float s0_ = 0.f, s1_ = 0.f;
      #pragma unroll
      for (int e = 0; e < ${H}; e++) { s0_ += lo_[e]; s1_ += hi_[e]; }
      xf_[(long long)m * XK + 2 * t_] = s0_; xf_[(long long)m * XK + 2 * t_ + 1] = s1_;` : ''}
    }
  }
  __syncthreads();
  const float* Xf = reinterpret_cast<const float*>(nbxq_xs_${off});${sx ? `
  const float* SX = Xf + (long long)m * XK; // unit u of x row i: SX[i * upr + u]` : ''}${kq ? `
  const float* SX = Xf + (long long)m * XK; // unit u of x row i, half h: SX[2 * (i * upr + u) + h]` : ''}`;
}

/**
 * The xf form's decode of ring slot j (unit u) for int4 / int8, word t of the unit at a time: x's float32
 * chunks of the word (every row of x), then per weight row the word decoded to floats q and one dot
 * per row of x; the affine map once per unit. int4: q = 1/2 + n/256 (the nibble under 1/2's exponent:
 * one LOP3 (low nibbles) or SHF + LOP3 (high) per word, then a PRMT per element; the 1 + n/16 form
 * needed a shift for the low nibbles too), so Σ x·w = s·(256·dot − (128 + z)·Σx); int8: exact integers
 * (PRMT, FADD), the row scale. q4_k: int4's word decode on x staged interleaved (xfStage), the even
 * places' dot (sub-block 2·kc) and the odd places' (2·kc + 1) apart, each half w = d·sc·n − dmin·mn:
 * Σ x·w = d·sc·(256·dot − 128·Σx) − dmin·mn·Σx.
 */
function vecXfBody(f: QuantFormat, asym: boolean, mr: number, nr: number, wide = false): string {
  const int4 = f === 'int4', kq = f === 'q4_k', nib = int4 || kq, ue = xfUnitElems(f, wide), epw = nib ? 8 : 4, nh = kq ? 2 : 1, words = wide ? 8 : 4;
  const dec = nib
    ? `const unsigned lo_ = w_ & 0x0F0F0F0Fu, hi_ = (w_ >> 4) & 0x0F0F0F0Fu;
              #pragma unroll
              for (int b = 0; b < 4; b++) { q[2 * b] = __uint_as_float(nbxq_prmt(lo_, 0x3F000000u, 0x7054u | ((unsigned)b << 8))); q[2 * b + 1] = __uint_as_float(nbxq_prmt(hi_, 0x3F000000u, 0x7054u | ((unsigned)b << 8))); }`
    : 'nbxq_b4(w_ ^ 0x80808080u, 128.f, q, 1);';
  return `{
          float dot[${mr}][${nr}][${nh}];
          #pragma unroll
          for (int i = 0; i < ${mr}; i++) {
            #pragma unroll
            for (int r = 0; r < ${nr}; r++) {
              #pragma unroll
              for (int h = 0; h < ${nh}; h++) dot[i][r][h] = 0.f;
            }
          }
          const int xu_ = (u >> 3) * ${8 * ue} + (u & 7) * 4;
          #pragma unroll
          for (int t = 0; t < ${words}; t++) {
            float x_[${mr}][${epw}];
            #pragma unroll
            for (int i = 0; i < ${mr}; i++) {
              if (i == 0 || i < m) {
                const float* xc_ = Xf + (long long)i * XK + xu_ + ${nib ? 64 : 32} * t;
                const float4 xa_ = *reinterpret_cast<const float4*>(xc_);
                x_[i][0] = xa_.x; x_[i][1] = xa_.y; x_[i][2] = xa_.z; x_[i][3] = xa_.w;${nib ? `
                const float4 xb_ = *reinterpret_cast<const float4*>(xc_ + 32);
                x_[i][4] = xb_.x; x_[i][5] = xb_.y; x_[i][6] = xb_.z; x_[i][7] = xb_.w;` : ''}
              }
            }
            #pragma unroll
            for (int r = 0; r < ${nr}; r++) {
              const unsigned w_ = t == 0 ? wv[j][r].x : t == 1 ? wv[j][r].y : t == 2 ? wv[j][r].z : ${wide ? 't == 3 ? wv[j][r].w : t == 4 ? qv[j][r].x : t == 5 ? qv[j][r].y : t == 6 ? qv[j][r].z : qv[j][r].w' : 'wv[j][r].w'};
              float q[${epw}];
              ${dec}
              #pragma unroll
              for (int i = 0; i < ${mr}; i++) {
                if (i == 0 || i < m) {
                  #pragma unroll
                  for (int e = 0; e < ${epw}; e++) dot[i][r][${kq ? 'e & 1' : '0'}] = fmaf(x_[i][e], q[e], dot[i][r][${kq ? 'e & 1' : '0'}]);
                }
              }
            }
          }
          #pragma unroll
          for (int i = 0; i < ${mr}; i++) {
            if (i == 0 || i < m) {${int4 ? `
              const float sx_ = SX[i * upr + u];${asym ? '' : `
              const float c_ = -136.f * sx_; // −(128 + 8)·Σx, shared by the rows`}` : ''}${kq ? `
              const float sx_[2] = { SX[2 * (i * upr + u)], SX[2 * (i * upr + u) + 1] };` : ''}
              #pragma unroll
              for (int r = 0; r < ${nr}; r++) {${int4 ? `
                acc[i][r] = fmaf(sc[j][r], fmaf(256.f, dot[i][r][0], ${asym ? '-((128.f + zz[j][r]) * sx_)' : 'c_'}), acc[i][r]);` : kq ? `
                const float d_ = nbx_h2f((unsigned short)hv[j][r].x), dm_ = nbx_h2f((unsigned short)(hv[j][r].x >> 16));${[0, 1].map((hi) => `
                { ${kScaleMin(hi)}
                  acc[i][r] = fmaf(d_ * (float)sc_, fmaf(256.f, dot[i][r][${hi}], -128.f * sx_[${hi}]), fmaf(-(dm_ * (float)mn_), sx_[${hi}], acc[i][r])); }`).join('')}` : `
                acc[i][r] = fmaf(rs[r], dot[i][r][0], acc[i][r]);`}
              }
            }
          }
        }`;
}

/** Shared memory of the tc form for m rows of x: 16-bit x in mma pair order (16 words a unit, rows of whole 8-unit groups), then Σx per 128-element segment. */
export function quantTcBytes(m: number, k: number): number {
  const upr = k / 32;
  return m * Math.ceil(upr / 8) * 128 * 4 + m * Math.ceil(upr / 4) * 4;
}

/** Whether the tc form takes the call: int4, 16-bit x, one row of x, groups of ≥ 128 (a power of 2: a 4-lane segment in one group), K % 128 == 0. */
export const tcOk = (c: { f: QuantFormat; d: QuantDType; gsize: number; k: number }, m: number): boolean =>
  c.f === 'int4' && c.d !== 'float32' && m === 1 && c.gsize >= 128 && (c.gsize & (c.gsize - 1)) === 0 && c.k % 128 === 0;

/**
 * The tc form's staging of x (after the grid-dependency wait): one thread per 128-element segment (4 units) of
 * each row of x; unit u's 32 16-bit elements as 16 pair words X[4w + e] = (x[8w + e], x[8w + e + 4]) (the nibble
 * pairs' order of nbxq_raw(word w >> 4e)), chunk w (4 words) at 128·(u >> 3) + 32·w + 4·(u & 7) words (a quarter
 * warp's reads of chunk w cover 128 contiguous bytes), then the segment's Σx in float32 (units in order).
 */
function tcStage(T: string, bf: boolean, stage = true): string {
  const cv = (w: string, hi: boolean): string => (bf ? (hi ? `__uint_as_float(${w} & 0xffff0000u)` : `__uint_as_float(${w} << 16)`) : `nbx_h2f((unsigned short)(${w}${hi ? ' >> 16' : ''}))`);
  return `  ${XS_DECL}
  const int XW = ((upr + 7) >> 3) * 128, nseg = upr >> 2; // words of a row of staged x; segments of a row
  ${stage ? '{' : 'if (false) { // diagnostics ab 3: x left unstaged'}
    unsigned* xw_ = reinterpret_cast<unsigned*>(nbxq_xs_);
    float* sx_ = reinterpret_cast<float*>(xw_ + (long long)m * XW);
    const uint4* xg_ = reinterpret_cast<const uint4*>(X);
    for (int t_ = threadIdx.x; t_ < m * nseg; t_ += ${THREADS}) {
      const int i_ = t_ / nseg, s_ = t_ - i_ * nseg;
      float tot_ = 0.f;
      #pragma unroll
      for (int q_ = 0; q_ < 4; q_++) {
        const int u_ = 4 * s_ + q_;
        const long long v0_ = ((long long)i_ * K + (long long)u_ * 32) >> 3; // 8 16-bit elements a 16-byte vector
        unsigned xv[16];
        #pragma unroll
        for (int v = 0; v < 4; v++) { const uint4 a_ = xg_[v0_ + v]; xv[4 * v] = a_.x; xv[4 * v + 1] = a_.y; xv[4 * v + 2] = a_.z; xv[4 * v + 3] = a_.w; }
        unsigned* d_ = xw_ + (long long)i_ * XW + (u_ >> 3) * 128 + (u_ & 7) * 4;
        #pragma unroll
        for (int w = 0; w < 4; w++) {
          uint4 o_;
          o_.x = nbxq_prmt(xv[4 * w], xv[4 * w + 2], 0x5410u); o_.y = nbxq_prmt(xv[4 * w], xv[4 * w + 2], 0x7632u);
          o_.z = nbxq_prmt(xv[4 * w + 1], xv[4 * w + 3], 0x5410u); o_.w = nbxq_prmt(xv[4 * w + 1], xv[4 * w + 3], 0x7632u);
          *reinterpret_cast<uint4*>(d_ + 32 * w) = o_;
        }
        float su_ = 0.f;
        #pragma unroll
        for (int v = 0; v < 16; v++) su_ += ${cv('xv[v]', false)} + ${cv('xv[v]', true)};
        tot_ += su_;
      }
      sx_[t_] = tot_; // row i_, segment s_
    }
  }
  __syncthreads();
  const unsigned* Xw = reinterpret_cast<const unsigned*>(nbxq_xs_);
  const float* SX = reinterpret_cast<const float*>(Xw + (long long)m * XW); // segment s of x row i: SX[i * nseg + s]`;
}

/**
 * The tc form's decode of ring slot j (unit u), one row of x: per word w of each weight row's 16 bytes, the staged
 * chunk w of x (X[4w..4w+3], one LDS.128, is the A fragment as loaded: rows g and g + 8 of A take pairs 4w, 4w + 2
 * and 4w + 1, 4w + 3) and two mma.sync m16n8k16 into two accumulators: B = pairs (4w, 4w + 2) of the word
 * (nbxq_raw(q), nbxq_raw(q >> 8): magic + n, one LOP3 a pair) into c1, B = pairs (4w + 1, 4w + 3) into c2. Lanes
 * 4g..4g+3 hold the 4 units of segment g (one int4 group), so c1's D[g][g] + c2's D[g + 8][g] is the segment's
 * Σ x·(M + n) (exact products, float32 sums); its owner lane (g, g / 2) adds s·(that − (M + 8 | M + z)·Σx) to
 * acc, every other lane 0 (lanes past the row's end too: the guarded rounds run the body on all lanes). The first
 * mma of each accumulator starts from zero (nbxq_mma0). Every weight row's chain interleaved.
 */
function vecTcBody(asym: boolean, bf: boolean, nr: number): string {
  const M = bf ? 128 : 1024;
  return `{
          const int uc_ = u < upr ? u : upr - 1; // (the guarded rounds: lanes past the row read in bounds, masked below)
          const unsigned* xc_ = Xw + (uc_ >> 3) * 128 + (uc_ & 7) * 4;
          float c1_[${nr}][4], c2_[${nr}][4];
          #pragma unroll
          for (int w = 0; w < 4; w++) {
            const uint4 v_ = *reinterpret_cast<const uint4*>(xc_ + 32 * w);
            const unsigned a_[4] = { v_.x, v_.y, v_.z, v_.w };
            #pragma unroll
            for (int r = 0; r < ${nr}; r++) {
              const unsigned q_ = w == 0 ? wv[j][r].x : w == 1 ? wv[j][r].y : w == 2 ? wv[j][r].z : wv[j][r].w;
              if (w == 0) { nbxq_mma0(c1_[r], a_, nbxq_raw(q_), nbxq_raw(q_ >> 8)); nbxq_mma0(c2_[r], a_, nbxq_raw(q_ >> 4), nbxq_raw(q_ >> 12)); }
              else { nbxq_mma(c1_[r], a_, nbxq_raw(q_), nbxq_raw(q_ >> 8)); nbxq_mma(c2_[r], a_, nbxq_raw(q_ >> 4), nbxq_raw(q_ >> 12)); }
            }
          }
          const bool in_ = own_ && u < upr;
          const float sx_ = SX[uc_ >> 2];
          #pragma unroll
          for (int r = 0; r < ${nr}; r++) {
            const float o_ = ${asym ? `${M}.f + zz[j][r]` : `${M + 8}.f`};
            const float d_ = odd_ ? c1_[r][1] + c2_[r][3] : c1_[r][0] + c2_[r][2];
            acc[0][r] += in_ ? sc[j][r] * fmaf(-o_, sx_, d_) : 0.f;
          }
        }`;
}

/** The tc form's mma.sync (non-volatile: pure, the compiler may schedule it) and the same from a zero accumulator. */
function tcPrelude(bf: boolean): string {
  const ty = bf ? 'bf16.bf16' : 'f16.f16';
  return `#ifdef NBX_EMU
__device__ __forceinline__ void nbxq_mma(float (&c)[4], const unsigned (&a)[4], unsigned b0, unsigned b1) { emu_mma16816(c, a, b0, b1, ${bf}); }
__device__ __forceinline__ void nbxq_mma0(float (&c)[4], const unsigned (&a)[4], unsigned b0, unsigned b1) { c[0] = c[1] = c[2] = c[3] = 0.f; emu_mma16816(c, a, b0, b1, ${bf}); }
#else
__device__ __forceinline__ void nbxq_mma(float (&c)[4], const unsigned (&a)[4], unsigned b0, unsigned b1) {
  asm("mma.sync.aligned.m16n8k16.row.col.f32.${ty}.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"
    : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3]) : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}
__device__ __forceinline__ void nbxq_mma0(float (&c)[4], const unsigned (&a)[4], unsigned b0, unsigned b1) {
  asm("mma.sync.aligned.m16n8k16.row.col.f32.${ty}.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%10,%10,%10,%10};"
    : "=f"(c[0]), "=f"(c[1]), "=f"(c[2]), "=f"(c[3]) : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1), "f"(0.f));
}
#endif
__device__ __forceinline__ unsigned nbxq_raw(unsigned u) { return nbxq_andor(u, 0x000F000Fu, ${bf ? '0x43004300u' : '0x64006400u'}); }`;
}

/** The register kernels' rows: nr packed row pointers and scale-row offsets from n0 (past n: the last row again). */
const vecRowPointers = (nr: number): string => `  const unsigned char* wr[${nr}];
  long long srow[${nr}];
  #pragma unroll
  for (int r = 0; r < ${nr}; r++) { const int rr = n0 + r < n ? n0 + r : n - 1; wr[r] = Wq + (long long)rr * rowBytes; srow[r] = (long long)rr * sRow; } // past the end: repeated, never stored
`;

/** The register kernels' accumulators, the per-row scales of int8 / fp8, and the k-quant lanes' byte shifts (kq). */
const vecAccumulators = (f: QuantFormat, mr: number, nr: number, kq: boolean, wide = false): string => `  float acc[${mr}][${nr}];
  #pragma unroll
  for (int i = 0; i < ${mr}; i++) {
    #pragma unroll
    for (int r = 0; r < ${nr}; r++) acc[i][r] = 0.f;
  }${f === 'int8' || f === 'fp8_e4m3' ? `
  float rs[${nr}];
  #pragma unroll
  for (int r = 0; r < ${nr}; r++) rs[r] = S[srow[r]];` : ''}${kq ? `
  const int kc = ${wide ? 'lane & 3' : '(lane & 7) >> 1'}, sh0 = 8 * ((2 * kc) & 3), sh1 = 8 * ((2 * kc + 1) & 3);${wide ? ' // wu: unit u = chunk u & 3 (= lane & 3) of its block' : ''}
  const bool khi = kc >= 2;` : ''}`;

/**
 * Source of the register kernel: format `f`, asymmetric zeros (int4), x dtype, MR rows of x, NR weight
 * rows per warp, U units per lane and row in flight. A block is 8 warps; `kw` (a launch argument)
 * warps share a group of NR rows and take its 32-unit stripes in turn (split K inside the block, for
 * short N), so a block covers 8 / kw · NR rows. Before the grid-dependency wait the block's packed rows
 * (and int4 scales / zeros) are prefetched into L2: they are not written by earlier kernels, so with
 * programmatic dependent launch that read overlaps the previous kernel; x is read after the wait.
 * A unit is decoded in 16-element segments to 1 + q/2^B (formats of ≤ 6 bits) or exact integers, each
 * segment's dot with x scaled once (w = a·q + b: a·Σx·q + b·Σx). Each lane sums its units in stripe
 * order, then a butterfly, then the kw warps' partials in warp order: the same bits every run.
 */
export function quantGemvVecSource(f: QuantFormat, asym: boolean, d: QuantDType, mr: number, nr: number, U: number, xs = false, db = false, cp = 0, xf = false, lb = 2, pg = false, ab = 0, tc = false, wu = false, pb = false): { src: string; name: string; sig: ArgType[] } {
  if (pb && !(xf && db)) throw new UnsupportedError('quant_matmul', 'both rounds before the wait (pb) is the xf form\'s with db');
  if (wu && !(xf && f === 'q4_k' && !tc)) throw new UnsupportedError('quant_matmul', `the wide unit (wu) is q4_k's in the xf form, got '${f}'${xf ? '' : ' without xf'}`);
  if (!VEC_FORMATS.includes(f)) throw new UnsupportedError('quant_matmul', `the register GEMV has no decoder for '${f}'`);
  const T = R.storageType(d), UE = unitElems(f), kq = f === 'q4_k' || f === 'q5_k', five = f === 'q5_k';
  const ext = f === 'int8' || f === 'fp8_e4m3' || f === 'int4';
  const parts = vecParts(f, asym, mr, nr, xs ? 'Xs' : 'X'), { loads, body } = parts;
  if (xf) { // x as float32 in shared memory (xfStage): its own body; the ring is the xs kernel's (db or not), no cp
    if (!XF_FORMATS.includes(f)) throw new UnsupportedError('quant_matmul', `the register GEMV stages x as float32 for ${XF_FORMATS.join(', ')} only, got '${f}'`);
    if (tc && (f !== 'int4' || d === 'float32' || mr !== 1)) throw new UnsupportedError('quant_matmul', `the register kernel on tensor cores (tc) takes int4 with 16-bit x, one row of x, got '${f}' with ${d}, ${mr} rows`);
    const ld = wu ? kWideLoads(nr) : loads;
    return vecXsSource(f, asym, d, mr, nr, U, ab === 1 ? (j, u, pred) => ld(j, `((${u}) & 63)`, pred) : ld,
      ab === 2 ? vecAblateBody(f, asym, nr, wu) : tc ? vecTcBody(asym, d === 'bfloat16', nr) : vecXfBody(f, asym, mr, nr, wu), db, true, lb, pg, ab, tc, wu, pb);
  }
  if (pg || ab !== 0) throw new UnsupportedError('quant_matmul', 'the persistent grid (pg) and the diagnostics (ab) are the xf form\'s');
  if (lb !== 2 && !(xs && cp === 0)) throw new UnsupportedError('quant_matmul', `blocks per SM other than 2 (lb ${lb}) are the x-staged register kernel's without a cp ring`);
  if (xs && cp > 0) return vecCpSource(f, asym, d, mr, nr, cp, parts);
  if (xs) return vecXsSource(f, asym, d, mr, nr, U, loads, body, db, false, lb);
  const ld = unitLoads(f);
  const src = `${HELPERS}
${x16Source(d)}
extern "C" __global__ void __launch_bounds__(${THREADS}, 2) quant_gemv_v(const ${T}* __restrict__ X, const unsigned char* __restrict__ Wq,
  const float* __restrict__ S, const float* __restrict__ Z, const ${T}* __restrict__ bias, ${T}* __restrict__ O,
  int m, int n, int K, long long rowBytes, int sRow, int gshift, int kw) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int rg = warp / kw, ks = warp - rg * kw;
  const int rpb = (${WARPS} / kw) * ${nr};
  const int nb = blockIdx.x * rpb;
  if (threadIdx.x == 0) {
    const int nr_ = n - nb < rpb ? n - nb : rpb;
    nbxq_prefetch(Wq + (long long)nb * rowBytes, (long long)nr_ * rowBytes);${f === 'int4' ? `
    nbxq_prefetch(S + (long long)nb * sRow, (long long)nr_ * sRow * 4);${asym ? `
    nbxq_prefetch(Z + (long long)nb * sRow, (long long)nr_ * sRow * 4);` : ''}` : ''}
  }
  NBX_GRID_DEPENDENCY_WAIT();
  const int n0 = nb + rg * ${nr};
  const int upr = K / ${UE}, nst = (upr + 31) >> 5;
${vecRowPointers(nr)}  float acc[${mr}][${nr}];
  #pragma unroll
  for (int i = 0; i < ${mr}; i++) {
    #pragma unroll
    for (int r = 0; r < ${nr}; r++) acc[i][r] = 0.f;
  }${ext && f !== 'int4' ? `
  float rs[${nr}];
  #pragma unroll
  for (int r = 0; r < ${nr}; r++) rs[r] = S[srow[r]];` : ''}${kq ? `
  // this lane's sub-blocks 2kc, 2kc + 1: byte shifts in the header's scale words, and which unpacking
  const int kc = (lane & 7) >> 1, sh0 = 8 * ((2 * kc) & 3), sh1 = 8 * ((2 * kc + 1) & 3);
  const bool khi = kc >= 2;` : ''}
  if (n0 < n) { // uniform per warp
    // a ring of ${U} units per row in registers: unit j of a round is used, then slot j is refilled with
    // unit j of the next round, so ~${U * nr * ld} 16-byte loads per lane stay in flight through the arithmetic
    uint4 wv[${U}][${nr}];${kq ? `
    uint4 hv[${U}][${nr}];` : ''}${five ? `
    uint4 qv[${U}][${nr}];` : ''}${f === 'int4' ? `
    float sc[${U}][${nr}];${asym ? ` float zz[${U}][${nr}];` : ''}` : ''}
    #pragma unroll
    for (int j = 0; j < ${U}; j++) ${loads('j', '(ks + j * kw) * 32 + lane')}
    for (int s0 = ks; s0 < nst; s0 += kw * ${U}) {
      #pragma unroll
      for (int j = 0; j < ${U}; j++) {
        const int u = (s0 + j * kw) * 32 + lane;
        if (u < upr) {
        ${body}
        }
        ${loads('j', `(s0 + (${U} + j) * kw) * 32 + lane`)}
      }
    }
  }
${warpSums(mr, nr)}${warpPartialsAndStore(d, mr, nr, 'n0 < n')}
}`;
  return { src, name: 'quant_gemv_v', sig: ['ptr', 'ptr', 'ptr', 'ptr', 'ptr', 'ptr', 'i32', 'i32', 'i32', 'i64', 'i32', 'i32', 'i32'] };
}

/**
 * x staged in shared memory ('xs' kernels): the block's m rows of x copied once after the grid-dependency
 * wait, then read with shared loads. Why: a global load of x right before its use waits, in the
 * compiler's in-order count of outstanding global loads, for every weight load issued before it, which
 * drains a register ring of weight loads at each step (about one 16-byte load per lane in flight: time
 * followed elements, not bytes). Shared loads are counted apart, so the ring's loads stay in flight.
 * Dynamic shared memory of m·K·itemsize bytes (quantXsBytes); kernels are launched with it where it fits.
 */
function xStage(T: string, declared = false): string {
  return `  ${declared ? '' : XS_DECL}
  { // x into shared memory (m·K elements, a whole number of 16-byte vectors: K % 32 == 0)
    const int nv_ = (int)(((long long)m * K * (long long)sizeof(${T})) >> 4);
    uint4* xd_ = reinterpret_cast<uint4*>(nbxq_xs_);
    const uint4* xg_ = reinterpret_cast<const uint4*>(X);
    for (int i_ = threadIdx.x; i_ < nv_; i_ += ${THREADS}) xd_[i_] = xg_[i_];
  }
  __syncthreads();
  const ${T}* Xs = reinterpret_cast<const ${T}*>(nbxq_xs_);`;
}
const XS_DECL = 'extern __shared__ __align__(16) unsigned char nbxq_xs_[]; // declared in the kernel (the emulator maps it per launch)';

/** Bytes of shared memory the 'xs' kernels take for x; 0 where x does not fit (they are not used then). */
export function quantXsBytes(m: number, k: number, d: QuantDType): number {
  const b = m * k * DTYPES[d].itemsize;
  return b <= XS_MAX_BYTES ? b : 0;
}
/** The largest x the 'xs' kernels stage: two blocks of the register kernel per SM and the tile kernel's static tiles still fit. */
export const XS_MAX_BYTES = 64 * 1024;

/**
 * The register kernel with x in shared memory (see xStage): the first ring of weight loads is issued
 * before the grid-dependency wait (packed weights are never written by earlier kernels: their reads
 * overlap the previous kernel's tail, in place of an L2 prefetch), then x is staged and the ring runs.
 */
function vecXsSource(f: QuantFormat, asym: boolean, d: QuantDType, mr: number, nr: number, U: number, loads: (j: string, u: string, pred?: string) => string, body: string, db = false, xf = false, lb = 2, pg = false, ab = 0, tc = false, wu = false, pb = false): { src: string; name: string; sig: ArgType[] } {
  const T = R.storageType(d), UE = xfUnitElems(f, wu), kq = f === 'q4_k' || f === 'q5_k', five = f === 'q5_k';
  const NS = db ? 2 * U : U; // register slots: one round, or two (db)
  // pb: the db loop's second round (slots U..2U-1, stripes s + (U..2U-1)·kw) issued ahead of its pass: before the
  // grid-dependency wait for the first pass, after the second round's arithmetic for the next one (where that pass runs)
  const roundB = (sExpr: string): string => (pb ? `
  #pragma unroll
  for (int j = ${U}; j < ${2 * U}; j++) ${loads('j', `(${sExpr} + j * kw) * 32 + lane`, `${sExpr} + ${2 * U - 1} * kw < (upr >> 5)`)}` : '');
  // lb blocks per SM: at 2 (128 registers, 16 warps per SM) the int4 kernel was latency-bound (ncu, H200:
  // 1.27 eligible warps per scheduler, 22% occupancy); 3 / 4 trade registers for warps (the ring's slots
  // are the same registers, so fewer rows or units per warp keep it spill-free: ptxas -v)
  const src = `${HELPERS}
${x16Source(d)}${tc ? `
${tcPrelude(d === 'bfloat16')}` : ''}
extern "C" __global__ void __launch_bounds__(${THREADS}, ${lb}) quant_gemv_v(const ${T}* __restrict__ X, const unsigned char* __restrict__ Wq,
  const float* __restrict__ S, const float* __restrict__ Z, const ${T}* __restrict__ bias, ${T}* __restrict__ O,
  int m, int n, int K, long long rowBytes, int sRow, int gshift, int kw) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int rg = warp / kw, ks = warp - rg * kw;${pg ? `
  // persistent grid (pg): block tiles blockIdx.x, + gridDim.x, ... (the launch gives every block at least one)
  const int rpb_ = (${WARPS} / kw) * ${nr}, tiles_ = (n + rpb_ - 1) / rpb_;
  int tile_ = blockIdx.x;
  int n0 = tile_ * rpb_ + rg * ${nr};
  bool live = n0 < n; // uniform per warp; dead warps still stage x` : `
  const int n0 = blockIdx.x * (${WARPS} / kw) * ${nr} + rg * ${nr};
  const bool live = n0 < n; // uniform per warp; dead warps still stage x`}
  const int upr = K / ${UE}, nst = (upr + 31) >> 5;
${vecRowPointers(nr)}${vecAccumulators(f, mr, nr, kq, wu)}${ab === 2 ? `
  unsigned ab_ = 0u; // ab 2 (diagnostics): the loaded words folded, kept alive through the store` : ''}
  uint4 wv[${NS}][${nr}];${kq ? `
  uint4 hv[${NS}][${nr}];` : ''}${five || wu ? `
  uint4 qv[${NS}][${nr}];` : ''}${f === 'int4' ? `
  float sc[${NS}][${nr}];${asym ? ` float zz[${NS}][${nr}];` : ''}` : ''}
  #pragma unroll
  for (int j = 0; j < ${U}; j++) ${loads('j', '(ks + j * kw) * 32 + lane')}${roundB('ks')}
  NBX_GRID_DEPENDENCY_WAIT();
${tc ? tcStage(T, d === 'bfloat16', ab !== 3) : xf ? xfStage(f, T, ab !== 3, '', false, wu) : xStage(T)}${tc ? `
  // this lane's place in the mma fragments: segment g = lane / 4 (4 lanes, 128 elements), D[g][g] at lane (g, g / 2), element g & 1
  const bool own_ = (lane & 3) == (lane >> 3), odd_ = ((lane >> 2) & 1) != 0;` : ''}${pg ? `
  for (;;) {` : ''}
  if (live) {
    int s0 = ks;${db ? `
    // double-buffered (db): slots 0..U-1 (round A) and U..2U-1 (round B) in distinct registers. The next
    // round's loads are issued before this round's arithmetic, into the other slots, so the compiler
    // neither waits for them nor sinks them below the arithmetic: refilling a slot right after its use
    // (the single ring below) had ptxas (sm_90a SASS) issue a whole round's loads at the round's end
    // and wait for all of them at the next round's start: nothing in flight while a warp computed.
    for (; s0 + ${2 * U - 1} * kw < (upr >> 5); s0 += ${2 * U} * kw) {${pb ? '' : `
      #pragma unroll
      for (int j = ${U}; j < ${2 * U}; j++) ${loads('j', '(s0 + j * kw) * 32 + lane')}`}
      #pragma unroll
      for (int j = 0; j < ${U}; j++) {
        const int u = (s0 + j * kw) * 32 + lane;
        ${body}
      }
      #pragma unroll
      for (int j = 0; j < ${U}; j++) ${loads('j', `(s0 + (${2 * U} + j) * kw) * 32 + lane`, `s0 + ${2 * U} * kw < nst`)}
      #pragma unroll
      for (int j = ${U}; j < ${2 * U}; j++) {
        const int u = (s0 + j * kw) * 32 + lane;
        ${body}
      }${roundB(`s0 + ${2 * U} * kw`)}
    }` : ''}
    // rounds whose stripes are all whole: no per-lane guard, so the loop is straight-line code between its
    // loads (the compiler keeps them counted in order across the back edge)
    for (; s0 + (${U - 1}) * kw < (upr >> 5); s0 += kw * ${U}) {
      #pragma unroll
      for (int j = 0; j < ${U}; j++) {
        const int u = (s0 + j * kw) * 32 + lane;
        ${body}
        ${loads('j', `(s0 + (${U} + j) * kw) * 32 + lane`)}
      }
    }
    for (; s0 < nst; s0 += kw * ${U}) {
      #pragma unroll
      for (int j = 0; j < ${U}; j++) {
        const int u = (s0 + j * kw) * 32 + lane;
        ${tc ? '{ // every lane (mma.sync is the warp\'s): lanes past the row masked in the body' : 'if (u < upr) {'}
        ${body}
        }
        ${loads('j', `(s0 + (${U} + j) * kw) * 32 + lane`)}
      }
    }
  }${ab === 2 ? `
  if (ab_ == 0x9e3779b9u) acc[0][0] += 1.f;` : ''}
${warpSums(mr, nr)}${warpPartialsAndStore(d, mr, nr, 'live')}${pg ? `
  tile_ += gridDim.x;
  if (tile_ >= tiles_) break;
  if (kw > 1) __syncthreads(); // the row groups' first warps have read red[] before the next tile writes it
  n0 = tile_ * rpb_ + rg * ${nr}; live = n0 < n;
  #pragma unroll
  for (int r = 0; r < ${nr}; r++) { const int rr = n0 + r < n ? n0 + r : n - 1; wr[r] = Wq + (long long)rr * rowBytes; srow[r] = (long long)rr * sRow; }
  #pragma unroll
  for (int i = 0; i < ${mr}; i++) {
    #pragma unroll
    for (int r = 0; r < ${nr}; r++) acc[i][r] = 0.f;
  }${f === 'int8' || f === 'fp8_e4m3' ? `
  #pragma unroll
  for (int r = 0; r < ${nr}; r++) rs[r] = S[srow[r]];` : ''}
  #pragma unroll
  for (int j = 0; j < ${U}; j++) ${loads('j', '(ks + j * kw) * 32 + lane')}${roundB('ks')}
  }` : ''}
}`;
  return { src, name: 'quant_gemv_v', sig: ['ptr', 'ptr', 'ptr', 'ptr', 'ptr', 'ptr', 'i32', 'i32', 'i32', 'i64', 'i32', 'i32', 'i32'] };
}

// ---- the xf kernel fed by per-warp bulk copies (bk) ------------------------------------------------

/** Packed bytes of one 32-unit stripe of a row (int4 / int8: 32 × 16; q4_k: 4 blocks of 144). */
const bkStripeBytes = (f: QuantFormat): number => (f === 'q4_k' ? 576 : 512);
/** Bytes of one stage slot of the bk ring: nr rows' stripes, then int4's scales (and zeros) of each row's stripe (1024 elements: 1024 / g floats). */
export function bkSlotBytes(f: QuantFormat, asym: boolean, nr: number, gsize: number): number {
  const sc = f === 'int4' ? (1024 / gsize) * 4 * (asym ? 2 : 1) : 0;
  return nr * (bkStripeBytes(f) + sc);
}
/** Dynamic shared memory of the bk kernel: every warp's ring (at offset 0), then x as the xf form stages it. */
export function quantBkBytes(f: QuantFormat, asym: boolean, m: number, k: number, nr: number, st: number, gsize: number): number {
  return WARPS * st * bkSlotBytes(f, asym, nr, gsize) + quantXfBytes(f, m, k);
}
let bkCount = 0;
/** Launches of the bk kernel so far (the benchmark's check asserts its forced cases ran it). */
export const bkLaunches = (): number => bkCount;
let wuCount = 0;
/** Launches of q4_k's wide-unit xf kernel (wu) so far: the check and the tests tell that it ran. */
export const wuLaunches = (): number => wuCount;
/**
 * Whether the bk kernel takes the call: an xf format, whole stripes (32 units a row: K % 1024 for int4 / q4_k, % 512 for
 * int8), 16-byte aligned rows (and int4 scale rows: K / g floats, groups 64-256 so a stripe's
 * scales are ≥ 16 bytes).
 */
export function bkOk(c: { f: QuantFormat; k: number; gsize: number; rowBytes: number; sRow: number }, w: bigint, sc: bigint, z: bigint, asym: boolean): boolean {
  if (!XF_FORMATS.includes(c.f)) return false;
  const upr = c.k / unitElems(c.f);
  if (!Number.isInteger(upr) || upr % 32 !== 0 || c.rowBytes % 16 !== 0 || w % 16n !== 0n) return false;
  if (c.f === 'int4') return c.gsize >= 64 && c.gsize <= 256 && c.sRow === c.k / c.gsize && (c.sRow * 4) % 16 === 0 && sc % 16n === 0n && (!asym || z % 16n === 0n);
  return true;
}

/**
 * The xf kernel (vecXfBody: x as float32 in shared memory, nr rows a warp) with its weight stream through a per-warp ring of
 * ST stages in shared memory filled by bulk copies (cp.async.bulk, the TMA engine: no registers hold the bytes in flight).
 * Quant-6 (H200): the register kernel's loads alone (ab 2) ran no faster than the whole kernel (1.9-2.1 TB/s): its
 * stream was capped by the bytes a warp keeps in flight (8 × 16 bytes a lane within 128 registers). Stage i of warp w
 * holds stripe ks + kw·i of its nr rows (512 contiguous bytes a row, q4_k 576: 4 whole blocks) and, int4, the stripe's
 * scales (zeros): lane 0 issues one copy per row (and per scale row) completing on the stage's mbarrier
 * (expect_tx); every lane waits on its parity, reads its 16-byte unit(s) into slot 0 of the register kernel's arrays,
 * __syncwarp, lane 0 refills the stage with stripe i + ST, then the body runs on the registers. The first ST stages are
 * issued before the grid-dependency wait (weights are never written by earlier kernels), x is staged after it. Same
 * sums in the same order as the xf kernel at U = 1 without db (the loads' source differs, not the arithmetic).
 * Under the host emulator (NBX_EMU) the warp copies each stage itself (plain loads, __syncwarp) at the same points.
 */
export function vecBkSource(f: QuantFormat, asym: boolean, d: QuantDType, mr: number, nr: number, ST: number, lb: number, ab = 0, pg = false): { src: string; name: string; sig: ArgType[] } {
  const T = R.storageType(d), kq = f === 'q4_k', int4 = f === 'int4', SB = bkStripeBytes(f);
  const rowsB = nr * SB; // a slot: rows' stripes, then int4 scale rows (SCB bytes each), then zero rows
  const body = ab === 2 ? vecAblateBody(f, asym, nr) : vecXfBody(f, asym, mr, nr);
  const src = `${HELPERS}
${x16Source(d)}
extern "C" __global__ void __launch_bounds__(${THREADS}, ${lb}) quant_gemv_v(const ${T}* __restrict__ X, const unsigned char* __restrict__ Wq,
  const float* __restrict__ S, const float* __restrict__ Z, const ${T}* __restrict__ bias, ${T}* __restrict__ O,
  int m, int n, int K, long long rowBytes, int sRow, int gshift, int kw) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int rg = warp / kw, ks = warp - rg * kw;
  const int upr = K / ${unitElems(f)}, nst = upr >> 5; // whole stripes (bkOk)${pg ? `
  // persistent grid (pg, kw 1): the block takes tiles blockIdx.x, + gridDim.x, ...; the warp's items are (tile, stripe)
  // pairs in order and its ring runs on across tiles (the next tile's stripes in flight while this tile ends)
  (void)rg; (void)ks;
  const int rpb_ = ${WARPS * nr}, tiles_ = (n + rpb_ - 1) / rpb_;
  const int ntile_ = (tiles_ - (int)blockIdx.x + (int)gridDim.x - 1) / (int)gridDim.x;
  int n0 = blockIdx.x * rpb_ + warp * ${nr};
  const bool live = true; // a warp past n copies clamped rows and stores nothing` : `
  const int n0 = blockIdx.x * (${WARPS} / kw) * ${nr} + rg * ${nr};
  const bool live = n0 < n; // uniform per warp; dead warps still stage x`}
${vecRowPointers(nr)}${vecAccumulators(f, mr, nr, kq)}${ab === 2 ? `
  unsigned ab_ = 0u;` : ''}
  uint4 wv[1][${nr}];${kq ? `
  uint4 hv[1][${nr}];` : ''}${int4 ? `
  float sc[1][${nr}];${asym ? ` float zz[1][${nr}];` : ''}
  const int SCB = (1024 >> gshift) * 4; // bytes of a stripe's scales a row` : ''}
  const int SLOT = ${rowsB}${int4 ? ` + ${nr * (asym ? 2 : 1)} * SCB` : ''};
  ${XS_DECL}
  unsigned char* ring_ = nbxq_xs_ + (long long)warp * ${ST} * SLOT;
  __shared__ unsigned long long bar_[${WARPS}][${ST}];
  // stage st <- stripe s of the warp's rows (and int4's scales / zeros of that stripe)
  auto issue = [&](int st, int s) {
    unsigned char* d_ = ring_ + st * SLOT;${pg ? `
    const unsigned char* wr[${nr}]; long long srow[${nr}]; // item s: tile s / nst, stripe s % nst
    { const int ti_ = s / nst; s -= ti_ * nst;
      const int nb_ = ((int)blockIdx.x + ti_ * (int)gridDim.x) * rpb_ + warp * ${nr};
      #pragma unroll
      for (int r = 0; r < ${nr}; r++) { const int rr = nb_ + r < n ? nb_ + r : n - 1; wr[r] = Wq + (long long)rr * rowBytes; srow[r] = (long long)rr * sRow; } }` : ''}
#if defined(NBX_EMU) || !defined(__CUDA_ARCH__) || __CUDA_ARCH__ < 900
    #pragma unroll
    for (int r = 0; r < ${nr}; r++) {
      for (int o = 16 * lane; o < ${SB}; o += 512) *reinterpret_cast<uint4*>(d_ + r * ${SB} + o) = *reinterpret_cast<const uint4*>(wr[r] + (long long)s * ${SB} + o);${int4 ? `
      for (int o = 4 * lane; o < SCB; o += 128) {
        *reinterpret_cast<float*>(d_ + ${rowsB} + r * SCB + o) = S[srow[r] + (((long long)s << 10) >> gshift) + (o >> 2)];${asym ? `
        *reinterpret_cast<float*>(d_ + ${rowsB} + (${nr} + r) * SCB + o) = Z[srow[r] + (((long long)s << 10) >> gshift) + (o >> 2)];` : ''}
      }` : ''}
    }
    __syncwarp();
#else
    if (lane == 0) {
      const unsigned b_ = (unsigned)__cvta_generic_to_shared(&bar_[warp][st]);
      asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" :: "r"(b_), "r"(SLOT) : "memory");
      #pragma unroll
      for (int r = 0; r < ${nr}; r++) {
        asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];"
          :: "r"((unsigned)__cvta_generic_to_shared(d_ + r * ${SB})), "l"(wr[r] + (long long)s * ${SB}), "r"(${SB}), "r"(b_) : "memory");${int4 ? `
        asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];"
          :: "r"((unsigned)__cvta_generic_to_shared(d_ + ${rowsB} + r * SCB)), "l"(S + srow[r] + (((long long)s << 10) >> gshift)), "r"(SCB), "r"(b_) : "memory");${asym ? `
        asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];"
          :: "r"((unsigned)__cvta_generic_to_shared(d_ + ${rowsB} + (${nr} + r) * SCB)), "l"(Z + srow[r] + (((long long)s << 10) >> gshift)), "r"(SCB), "r"(b_) : "memory");` : ''}` : ''}
      }
    }
#endif
  };
  // wait for stage st's copies (phase parity ph)
  auto wait = [&](int st, unsigned ph) {
#if defined(NBX_EMU) || !defined(__CUDA_ARCH__) || __CUDA_ARCH__ < 900
    (void)st; (void)ph;
#else
    const unsigned b_ = (unsigned)__cvta_generic_to_shared(&bar_[warp][st]);
    unsigned done_ = 0;
    while (!done_) asm volatile("{ .reg .pred p; mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2; selp.u32 %0, 1, 0, p; }" : "=r"(done_) : "r"(b_), "r"(ph) : "memory");
#endif
  };
#if !defined(NBX_EMU) && defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  if (lane == 0) {
    #pragma unroll
    for (int st = 0; st < ${ST}; st++) asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;" :: "r"((unsigned)__cvta_generic_to_shared(&bar_[warp][st])) : "memory");
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
  }
  __syncwarp();
#endif
  // the warp's stripes ks, ks + kw, ...: the first ${ST} in flight before the grid-dependency wait
  const int ns_ = ${pg ? 'ntile_ * nst' : 'live ? (nst - ks + kw - 1) / kw : 0'};
  #pragma unroll
  for (int st = 0; st < ${ST}; st++) if (st < ns_) issue(st, ${pg ? 'st' : 'ks + st * kw'});${pg && (f === 'int8') ? `
  float rsn_[${nr}]; // the next tile's row scales, loaded a tile ahead
  #pragma unroll
  for (int r = 0; r < ${nr}; r++) { const int rr = n0 + (int)gridDim.x * rpb_ + r; rsn_[r] = S[(long long)(rr < n ? rr : n - 1) * sRow]; }` : ''}
  NBX_GRID_DEPENDENCY_WAIT();
${xfStage(f, T, ab !== 3, ` + ${WARPS * ST} * SLOT`, true)}
  for (int i = 0; i < ns_; i++) {
    const int st = i % ${ST}, s = ${pg ? 'i % nst' : 'ks + i * kw'};
    wait(st, (unsigned)(i / ${ST}) & 1u);
    {
      const unsigned char* d_ = ring_ + st * SLOT;
      #pragma unroll
      for (int r = 0; r < ${nr}; r++) {${kq ? `
        wv[0][r] = *reinterpret_cast<const uint4*>(d_ + r * ${SB} + (lane >> 3) * 144 + 16 + 16 * (lane & 7));
        hv[0][r] = *reinterpret_cast<const uint4*>(d_ + r * ${SB} + (lane >> 3) * 144);` : `
        wv[0][r] = *reinterpret_cast<const uint4*>(d_ + r * ${SB} + 16 * lane);`}${int4 ? `
        sc[0][r] = *reinterpret_cast<const float*>(d_ + ${rowsB} + r * SCB + 4 * ((lane << 5) >> gshift));${asym ? `
        zz[0][r] = *reinterpret_cast<const float*>(d_ + ${rowsB} + (${nr} + r) * SCB + 4 * ((lane << 5) >> gshift));` : ''}` : ''}
      }
    }
    __syncwarp(); // every lane has read stage st before it is refilled
    if (i + ${ST} < ns_) issue(st, ${pg ? `i + ${ST}` : `s + ${ST} * kw`});
    const int j = 0, u = s * 32 + lane;
    ${body}${pg ? `
    if (s == nst - 1) { // the tile's last stripe: the rows' dots to the output, then the next tile's rows
      #pragma unroll
      for (int i2 = 0; i2 < ${mr}; i2++) {
        #pragma unroll
        for (int r = 0; r < ${nr}; r++) {
          #pragma unroll
          for (int o = 16; o > 0; o >>= 1) acc[i2][r] += __shfl_xor_sync(0xffffffffu, acc[i2][r], o);
        }
      }
      if (lane == 0) {
        #pragma unroll
        for (int r = 0; r < ${nr}; r++) {
          const int jn = n0 + r;
          if (jn < n) {
            #pragma unroll
            for (int i2 = 0; i2 < ${mr}; i2++) if (i2 < m) { float v_ = acc[i2][r]; if (bias) v_ += ${R.load(d, 'bias', 'jn')}; ${R.store(d, 'O', '(long long)i2 * n + jn', 'v_')} }
          }
        }
      }
      #pragma unroll
      for (int i2 = 0; i2 < ${mr}; i2++) {
        #pragma unroll
        for (int r = 0; r < ${nr}; r++) acc[i2][r] = 0.f;
      }
      n0 += (int)gridDim.x * rpb_;${f === 'int8' ? `
      #pragma unroll
      for (int r = 0; r < ${nr}; r++) { rs[r] = rsn_[r]; const int rr = n0 + (int)gridDim.x * rpb_ + r; rsn_[r] = S[(long long)(rr < n ? rr : n - 1) * sRow]; }` : ''}
    }` : ''}
  }${ab === 2 ? `
  if (ab_ == 0x9e3779b9u) acc[0][0] += 1.f;` : ''}
${pg ? '' : `${warpSums(mr, nr)}${warpPartialsAndStore(d, mr, nr, 'live')}`}
}`;
  return { src, name: 'quant_gemv_v', sig: ['ptr', 'ptr', 'ptr', 'ptr', 'ptr', 'ptr', 'i32', 'i32', 'i32', 'i64', 'i32', 'i32', 'i32'] };
}

/** The xf kernel's body under diagnostics ab 2: ring slot j's loaded words xor-folded into ab_, no decode, no x. */
function vecAblateBody(f: QuantFormat, asym: boolean, nr: number, wide = false): string {
  return `{
          #pragma unroll
          for (int r = 0; r < ${nr}; r++) ab_ ^= wv[j][r].x ^ wv[j][r].y ^ wv[j][r].z ^ wv[j][r].w${f === 'int4' ? ` ^ __float_as_uint(sc[j][r])${asym ? ' ^ __float_as_uint(zz[j][r])' : ''}` : ''}${f === 'q4_k' ? ' ^ hv[j][r].x ^ hv[j][r].w' : ''}${wide ? ' ^ qv[j][r].x ^ qv[j][r].y ^ qv[j][r].z ^ qv[j][r].w' : ''};
        }`;
}

// ---- int4 on tensor cores ------------------------------------------------------------------------

/** The tensor-core kernels' device helpers: mma.sync m16n8k16 (f32 accumulate), packed FMA, and nibble pairs to 16-bit floats. */
function mmaPrelude(bf: boolean, asym: boolean, viaSum = false): string {
  // magic: 2^7 (bf16 0x4300) or 2^10 (f16 0x6400) with the nibble in the low mantissa bits; subtract it (+ 8 symmetric)
  const MAG = bf ? '0x43004300u' : '0x64006400u', ONE = bf ? '0x3F803F80u' : '0x3C003C00u';
  const SUB = bf ? (asym ? '0xC300C300u' : '0xC308C308u') : (asym ? '0xE400E400u' : '0xE408E408u');
  return `#ifdef NBX_EMU
__device__ __forceinline__ void mma16816(float (&c)[4], const unsigned (&a)[4], unsigned b0, unsigned b1) { emu_mma16816(c, a, b0, b1, ${bf}); }
__device__ __forceinline__ unsigned nbxq_fma2(unsigned a, unsigned b, unsigned c) {
  unsigned r = 0;
  for (int i = 0; i < 2; i++) {
    const float v = emu_b16f((unsigned short)(a >> (16 * i)), ${bf}) * emu_b16f((unsigned short)(b >> (16 * i)), ${bf}) + emu_b16f((unsigned short)(c >> (16 * i)), ${bf});
    r |= (unsigned)(${bf ? 'nbx_f2bf(v)' : 'emu_f2h(v)'}) << (16 * i);
  }
  return r; }
#else
__device__ __forceinline__ void mma16816(float (&c)[4], const unsigned (&a)[4], unsigned b0, unsigned b1) {
  asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.${bf ? 'bf16.bf16' : 'f16.f16'}.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"
    : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3]) : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}
__device__ __forceinline__ unsigned nbxq_fma2(unsigned a, unsigned b, unsigned c) {
  unsigned d; asm("fma.rn.${bf ? 'bf16x2' : 'f16x2'} %0, %1, %2, %3;" : "=r"(d) : "r"(a), "r"(b), "r"(c)); return d; }
#endif
// nibbles (e, e + 4) of a word already shifted right by 4·e, as a pair of 16-bit floats minus the offset
__device__ __forceinline__ unsigned nbxq_pair(unsigned u) { return nbxq_fma2(nbxq_andor(u, 0x000F000Fu, ${MAG}), ${ONE}, ${SUB}); }${viaSum ? `
// the same pair without the subtraction: magic + nibble (one LOP3), the offset taken off the chunk's sums
__device__ __forceinline__ unsigned nbxq_raw(unsigned u) { return nbxq_andor(u, 0x000F000Fu, ${MAG}); }` : ''}
`;
}

/** A chunk's operands for the int4 tensor-core chunks: x's 128 elements of this lane's x row (zeros past m), the two rows' packed words. */
const MMA_CHUNK_OPERANDS = `        unsigned xv[16];
        if (xr) {
          #pragma unroll
          for (int v = 0; v < 4; v++) { const uint4 q = reinterpret_cast<const uint4*>(xp + 128LL * c)[v]; xv[4 * v] = q.x; xv[4 * v + 1] = q.y; xv[4 * v + 2] = q.z; xv[4 * v + 3] = q.w; }
        } else {
          #pragma unroll
          for (int v = 0; v < 16; v++) xv[v] = 0u;
        }
        float cc[4] = { 0.f, 0.f, 0.f, 0.f };
        const unsigned ua[4] = { wa[u].x, wa[u].y, wa[u].z, wa[u].w }, ub[4] = { wb[u].x, wb[u].y, wb[u].z, wb[u].w };
`;

/**
 * One 128-element chunk of rows g and g + 8 (ring slot u: wa[u], wb[u], scales sa / sb, zeros za / zb)
 * against x at xp + 128·c (lanes of x rows g < m: xr), added to acc[4] (rows g, g + 8 × x rows 2t, 2t + 1).
 */
function mmaChunk(bf: boolean, asym: boolean, viaSum = false): string {
  if (viaSum) return mmaChunkViaSum(bf, asym);
  return `${MMA_CHUNK_OPERANDS}        #pragma unroll
        for (int w = 0; w < 4; w++) {
          // x elements 8w .. 8w+7 as pairs (e, e + 4), the weight pairs' order
          const unsigned p0 = nbxq_prmt(xv[4 * w], xv[4 * w + 2], 0x5410u), p1 = nbxq_prmt(xv[4 * w], xv[4 * w + 2], 0x7632u);
          const unsigned p2 = nbxq_prmt(xv[4 * w + 1], xv[4 * w + 3], 0x5410u), p3 = nbxq_prmt(xv[4 * w + 1], xv[4 * w + 3], 0x7632u);
          const unsigned a1[4] = { nbxq_pair(ua[w]), nbxq_pair(ub[w]), nbxq_pair(ua[w] >> 4), nbxq_pair(ub[w] >> 4) };
          mma16816(cc, a1, p0, p1);
          const unsigned a2[4] = { nbxq_pair(ua[w] >> 8), nbxq_pair(ub[w] >> 8), nbxq_pair(ua[w] >> 12), nbxq_pair(ub[w] >> 12) };
          mma16816(cc, a2, p2, p3);
        }
        const float s0 = sa[u], s1 = sb[u];${asym ? `
        // Σx of this chunk for x rows 2t and 2t + 1 (lanes with g = row hold them after the butterfly over t)
        float sx = 0.f;
        #pragma unroll
        for (int v = 0; v < 16; v++) sx += ${bf ? '__uint_as_float(xv[v] << 16) + __uint_as_float(xv[v] & 0xffff0000u)' : 'nbx_h2f((unsigned short)xv[v]) + nbx_h2f((unsigned short)(xv[v] >> 16))'};
        sx += __shfl_xor_sync(0xffffffffu, sx, 1); sx += __shfl_xor_sync(0xffffffffu, sx, 2);
        const float sxa = __shfl_sync(0xffffffffu, sx, 8 * t), sxb = __shfl_sync(0xffffffffu, sx, 8 * t + 4);
        const float z0 = za[u], z1 = zb[u];
        acc[0] = fmaf(s0, cc[0] - z0 * sxa, acc[0]); acc[1] = fmaf(s0, cc[1] - z0 * sxb, acc[1]);
        acc[2] = fmaf(s1, cc[2] - z1 * sxa, acc[2]); acc[3] = fmaf(s1, cc[3] - z1 * sxb, acc[3]);` : `
        acc[0] = fmaf(s0, cc[0], acc[0]); acc[1] = fmaf(s0, cc[1], acc[1]);
        acc[2] = fmaf(s1, cc[2], acc[2]); acc[3] = fmaf(s1, cc[3], acc[3]);`}
`;
}

/**
 * mmaChunk with one instruction less per nibble pair: the pairs are magic + q (2^7 or 2^10 with the
 * nibble in the low mantissa bits, exact), a second mma of all-ones rows gives the chunk's Σx per x row
 * (on the tensor pipe, not the ALUs), and the offset comes off in float32: s·(Σx·(M + q) − (M + z)·Σx),
 * z = 8 symmetric. The cancellation costs ~7-10 bits of the float32 sums (2^7 / 2^10 against the
 * nibble's 4), far below the 16-bit output's rounding.
 */
function mmaChunkViaSum(bf: boolean, asym: boolean): string {
  const M = bf ? 128 : 1024, ONE = bf ? '0x3F803F80u' : '0x3C003C00u';
  return `        unsigned xv[16];
        if (xr) {
          #pragma unroll
          for (int v = 0; v < 4; v++) { const uint4 q = reinterpret_cast<const uint4*>(xp + 128LL * c)[v]; xv[4 * v] = q.x; xv[4 * v + 1] = q.y; xv[4 * v + 2] = q.z; xv[4 * v + 3] = q.w; }
        } else {
          #pragma unroll
          for (int v = 0; v < 16; v++) xv[v] = 0u;
        }
        float cc[4] = { 0.f, 0.f, 0.f, 0.f }, cx[4] = { 0.f, 0.f, 0.f, 0.f };
        const unsigned ones[4] = { ${ONE}, ${ONE}, ${ONE}, ${ONE} };
        const unsigned ua[4] = { wa[u].x, wa[u].y, wa[u].z, wa[u].w }, ub[4] = { wb[u].x, wb[u].y, wb[u].z, wb[u].w };
        #pragma unroll
        for (int w = 0; w < 4; w++) {
          // x elements 8w .. 8w+7 as pairs (e, e + 4), the weight pairs' order
          const unsigned p0 = nbxq_prmt(xv[4 * w], xv[4 * w + 2], 0x5410u), p1 = nbxq_prmt(xv[4 * w], xv[4 * w + 2], 0x7632u);
          const unsigned p2 = nbxq_prmt(xv[4 * w + 1], xv[4 * w + 3], 0x5410u), p3 = nbxq_prmt(xv[4 * w + 1], xv[4 * w + 3], 0x7632u);
          const unsigned a1[4] = { nbxq_raw(ua[w]), nbxq_raw(ub[w]), nbxq_raw(ua[w] >> 4), nbxq_raw(ub[w] >> 4) };
          mma16816(cc, a1, p0, p1);
          mma16816(cx, ones, p0, p1);
          const unsigned a2[4] = { nbxq_raw(ua[w] >> 8), nbxq_raw(ub[w] >> 8), nbxq_raw(ua[w] >> 12), nbxq_raw(ub[w] >> 12) };
          mma16816(cc, a2, p2, p3);
          mma16816(cx, ones, p2, p3);
        }
        // cx[0] / cx[1]: Σx of x rows 2t / 2t + 1 (every row of the all-ones operand alike)
        const float o0 = ${asym ? `${M}.f + za[u]` : `${M + 8}.f`}, o1 = ${asym ? `${M}.f + zb[u]` : `${M + 8}.f`};
        const float s0 = sa[u], s1 = sb[u];
        acc[0] = fmaf(s0, fmaf(-o0, cx[0], cc[0]), acc[0]); acc[1] = fmaf(s0, fmaf(-o0, cx[1], cc[1]), acc[1]);
        acc[2] = fmaf(s1, fmaf(-o1, cx[0], cc[2]), acc[2]); acc[3] = fmaf(s1, fmaf(-o1, cx[1], cc[3]), acc[3]);
`;
}

/**
 * mmaChunkViaSum for the cp kernel's staged x (xStagePerm): x already in the weight pairs' order (no PRMT)
 * and each chunk's Σx per x row read from shared memory (sxa / sxb: rows 2t, 2t + 1) instead of the
 * all-ones mma: 8 mma a chunk instead of 16, no x permutes.
 */
function mmaChunkPre(bf: boolean, asym: boolean): string {
  const M = bf ? 128 : 1024;
  return `${MMA_CHUNK_OPERANDS}        #pragma unroll
        for (int w = 0; w < 4; w++) {
          const unsigned a1[4] = { nbxq_raw(ua[w]), nbxq_raw(ub[w]), nbxq_raw(ua[w] >> 4), nbxq_raw(ub[w] >> 4) };
          mma16816(cc, a1, xv[4 * w], xv[4 * w + 1]);
          const unsigned a2[4] = { nbxq_raw(ua[w] >> 8), nbxq_raw(ub[w] >> 8), nbxq_raw(ua[w] >> 12), nbxq_raw(ub[w] >> 12) };
          mma16816(cc, a2, xv[4 * w + 2], xv[4 * w + 3]);
        }
        const float x0 = sxa[c], x1 = sxb[c];
        const float o0 = ${asym ? `${M}.f + za[u]` : `${M + 8}.f`}, o1 = ${asym ? `${M}.f + zb[u]` : `${M + 8}.f`};
        const float s0 = sa[u], s1 = sb[u];
        acc[0] = fmaf(s0, fmaf(-o0, x0, cc[0]), acc[0]); acc[1] = fmaf(s0, fmaf(-o0, x1, cc[1]), acc[1]);
        acc[2] = fmaf(s1, fmaf(-o1, x0, cc[2]), acc[2]); acc[3] = fmaf(s1, fmaf(-o1, x1, cc[3]), acc[3]);
`;
}

/** The tensor-core GEMV kernels' signature (x, packed rows, scales, zeros, bias, out; sizes) and their warps' sum array. */
const mmaKernelHead = (name: string, T: string): string => `extern "C" __global__ void __launch_bounds__(${THREADS}) ${name}(const ${T}* __restrict__ X, const unsigned char* __restrict__ Wq,
  const float* __restrict__ S, const float* __restrict__ Z, const ${T}* __restrict__ bias, ${T}* __restrict__ O,
  int m, int n, int K, long long rowBytes, int sRow, int gshift) {
  __shared__ float red[${WARPS}][32][4];
`;

/** A tensor-core GEMV block's 16 rows: lane (g, t) reads rows r0 = n0 + g and r1 = n0 + g + 8. */
const MMA_ROWS = `  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5, g = lane >> 2, t = lane & 3;
  const int n0 = blockIdx.x * 16;
  const int r0 = n0 + g < n ? n0 + g : n - 1, r1 = n0 + g + 8 < n ? n0 + g + 8 : n - 1; // past the end: repeated, never stored
`;

/**
 * The tensor-core GEMV kernels' end: each warp's results (rows g, g + 8 of its 16, columns 2t, 2t + 1) into
 * shared memory `red` (`fill`; default: the accumulators as they are), summed over the block's warps in warp
 * order, then bias and the store.
 */
const mmaEpilogue = (d: 'float16' | 'bfloat16', fill = `  #pragma unroll
  for (int i = 0; i < 4; i++) red[warp][lane][i] = acc[i];`): string => `${fill}
  __syncthreads();
  if (warp == 0) {
    float v[4] = { 0.f, 0.f, 0.f, 0.f };
    for (int w = 0; w < ${WARPS}; w++) {
      #pragma unroll
      for (int i = 0; i < 4; i++) v[i] += red[w][lane][i];
    }
    #pragma unroll
    for (int i = 0; i < 4; i++) {
      const int j = n0 + g + (i >> 1) * 8, col = 2 * t + (i & 1);
      if (j < n && col < m) { float o = v[i]; if (bias) o += ${R.load(d, 'bias', 'j')}; ${R.store(d, 'O', '(long long)col * n + j', 'o')} }
    }
  }`;

/**
 * x staged for the tensor-core kernels' B fragments (16-bit x): element pairs (e, e + span) — span 4, int4's
 * mmaChunkPre: each 8-element group as (0, 4), (1, 5), (2, 6), (3, 7); span 2, int8's kernel: (0, 2), (1, 3)
 * of each 4 — and the Σx of every 128-element chunk of every row (float32: a group's 8 in order, then a
 * butterfly over the 16 lanes holding the chunk's groups) into XSUM[row · nch + chunk] (declared by the kernel).
 */
function xStagePerm(T: string, bf: boolean, span: 2 | 4 = 4): string {
  const [a0, a1, b0, b1] = span === 4 ? ['x', 'z', 'y', 'w'] : ['x', 'y', 'z', 'w'];
  const cv = (w: string, hi: boolean): string => (bf ? (hi ? `__uint_as_float(${w} & 0xffff0000u)` : `__uint_as_float(${w} << 16)`) : `nbx_h2f((unsigned short)(${w}${hi ? ' >> 16' : ''}))`);
  return `  {
    const int nv_ = (int)(((long long)m * K) >> 3);
    uint4* xd_ = reinterpret_cast<uint4*>(nbxq_xs_);
    const uint4* xg_ = reinterpret_cast<const uint4*>(X);
    for (int b_ = warp * 32; b_ < nv_; b_ += ${THREADS}) { // whole warps: the butterfly needs every lane
      const int i_ = b_ + lane;
      const bool ok_ = i_ < nv_;
      uint4 v_; v_.x = v_.y = v_.z = v_.w = 0u;
      if (ok_) v_ = xg_[i_];
      const unsigned w_[4] = { v_.x, v_.y, v_.z, v_.w };
      float s_ = 0.f;
      #pragma unroll
      for (int e = 0; e < 4; e++) { s_ += ${cv('w_[e]', false)}; s_ += ${cv('w_[e]', true)}; }
      uint4 o_;
      o_.x = nbxq_prmt(v_.${a0}, v_.${a1}, 0x5410u); o_.y = nbxq_prmt(v_.${a0}, v_.${a1}, 0x7632u);
      o_.z = nbxq_prmt(v_.${b0}, v_.${b1}, 0x5410u); o_.w = nbxq_prmt(v_.${b0}, v_.${b1}, 0x7632u);
      if (ok_) xd_[i_] = o_;
      #pragma unroll
      for (int o = 1; o < 16; o <<= 1) s_ += __shfl_xor_sync(0xffffffffu, s_, o);
      if (ok_ && (lane & 15) == 0) XSUM[i_ >> 4] = s_;
    }
  }
  __syncthreads();
  const ${T}* Xs = reinterpret_cast<const ${T}*>(nbxq_xs_);`;
}

/**
 * int4 with groups of ≥ 128 (powers of two), 16-bit x: the FMA kernel spends ~3.5 instructions an
 * element (PRMT, FADD, FFMA, x conversion), close to the issue rate that HBM's 9 Telem/s of int4 needs;
 * here nibbles become bf16/f16 pairs (2^7/2^10 magic: one mask-or and one packed FMA per pair, exact)
 * that feed mma.sync m16n8k16 with x as the 8-column B operand (rows past m zero), so an element costs
 * ~1.5 instructions and m ≤ 8 rows come for free. A warp owns 16 weight rows; lane (g, t) loads 16
 * bytes (32 elements) of rows g and g + 8 for each 128-element chunk (one group), k slots assigned so
 * that a nibble word's pairs (e, e + 4) are the fragment's pairs and x is permuted to match (PRMT). The
 * 8 warps of a block take interleaved chunks; a chunk's products are scaled (and, asymmetric, minus
 * z·Σx) into float32 sums, which the warps combine in shared memory in warp order: a fixed order, the
 * same bits every run.
 */
export function quantGemvMmaSource(asym: boolean, d: 'float16' | 'bfloat16', U: number, xs = false, viaSum = false, db = false, cp = 0, co = false): { src: string; name: string; sig: ArgType[] } {
  const bf = d === 'bfloat16', T = R.storageType(d);
  if (xs && cp > 0 && viaSum && co) return mmaCoSource(asym, d, cp);
  if (xs && cp > 0) return mmaCpSource(asym, d, cp, viaSum);
  if (xs) return mmaXsSource(asym, d, U, viaSum, db);
  const src = `${HELPERS}
${mmaPrelude(bf, asym)}${mmaKernelHead('quant_gemv_mma', T)}  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, g = lane >> 2, t = lane & 3;
  const int n0 = blockIdx.x * 16;
  if (threadIdx.x == 0) { // the block's 16 packed rows, scales and zeros into L2 before waiting for the previous kernel
    const int nr_ = n - n0 < 16 ? n - n0 : 16;
    nbxq_prefetch(Wq + (long long)n0 * rowBytes, (long long)nr_ * rowBytes);
    nbxq_prefetch(S + (long long)n0 * sRow, (long long)nr_ * sRow * 4);${asym ? `
    nbxq_prefetch(Z + (long long)n0 * sRow, (long long)nr_ * sRow * 4);` : ''}
  }
  NBX_GRID_DEPENDENCY_WAIT();
  const int r0 = n0 + g < n ? n0 + g : n - 1, r1 = n0 + g + 8 < n ? n0 + g + 8 : n - 1; // past the end: repeated, never stored
  const unsigned char* w0 = Wq + (long long)r0 * rowBytes + 16 * t;
  const unsigned char* w1 = Wq + (long long)r1 * rowBytes + 16 * t;
  const bool xr = g < m;
  const ${T}* xp = X + (long long)(xr ? g : 0) * K + 32 * t;
  float acc[4] = { 0.f, 0.f, 0.f, 0.f };
  const int nch = K >> 7;
  // a ring of ${U} chunks in registers (weights, scales, zeros): chunk u of a round is used, then its slot
  // is refilled with chunk u of the next round, so the loads stay in flight through the arithmetic
  uint4 wa[${U}], wb[${U}];
  float sa[${U}], sb[${U}];${asym ? `
  float za[${U}], zb[${U}];` : ''}
  #define NBXQ_MMA_LOAD(u, c) if ((c) < nch) { const long long gi_ = (128LL * (c)) >> gshift; \
    wa[u] = nbxq_ld16(w0 + 64LL * (c)); wb[u] = nbxq_ld16(w1 + 64LL * (c)); \
    sa[u] = S[(long long)r0 * sRow + gi_]; sb[u] = S[(long long)r1 * sRow + gi_];${asym ? ' \\\n    za[u] = Z[(long long)r0 * sRow + gi_]; zb[u] = Z[(long long)r1 * sRow + gi_];' : ''} }
  #pragma unroll
  for (int u = 0; u < ${U}; u++) NBXQ_MMA_LOAD(u, warp + u * ${WARPS})
  for (int c0 = warp; c0 < nch; c0 += ${WARPS * U}) {
    #pragma unroll
    for (int u = 0; u < ${U}; u++) {
      const int c = c0 + u * ${WARPS};
      if (c < nch) {
${mmaChunk(bf, asym)}      }
      NBXQ_MMA_LOAD(u, c + ${WARPS * U})
    }
  }
  #undef NBXQ_MMA_LOAD
${mmaEpilogue(d)}
}`;
  return { src, name: 'quant_gemv_mma', sig: ['ptr', 'ptr', 'ptr', 'ptr', 'ptr', 'ptr', 'i32', 'i32', 'i32', 'i64', 'i32', 'i32'] };
}

/**
 * The tensor-core kernel with x in shared memory (xStage): the first ring of chunks loaded before the
 * grid-dependency wait, unconditional loads (past the row's end: its last chunk again, never used).
 */
function mmaXsSource(asym: boolean, d: 'float16' | 'bfloat16', U: number, viaSum: boolean, db = false): { src: string; name: string; sig: ArgType[] } {
  const bf = d === 'bfloat16', T = R.storageType(d), NS = db ? 2 * U : U; // register slots: one round, or two (db: see vecXsSource)
  const src = `${HELPERS}
${mmaPrelude(bf, asym, viaSum)}
${mmaKernelHead('quant_gemv_mma', T)}  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, g = lane >> 2, t = lane & 3;
  const int n0 = blockIdx.x * 16;
  const int r0 = n0 + g < n ? n0 + g : n - 1, r1 = n0 + g + 8 < n ? n0 + g + 8 : n - 1; // past the end: repeated, never stored
  const unsigned char* w0 = Wq + (long long)r0 * rowBytes + 16 * t;
  const unsigned char* w1 = Wq + (long long)r1 * rowBytes + 16 * t;
  const bool xr = g < m;
  float acc[4] = { 0.f, 0.f, 0.f, 0.f };
  const int nch = K >> 7;
  uint4 wa[${NS}], wb[${NS}];
  float sa[${NS}], sb[${NS}];${asym ? `
  float za[${NS}], zb[${NS}];` : ''}
  // chunk c into slot u (past the row's end: its last chunk); the P form issues the weight loads only where p holds
  #define NBXQ_MMA_LOADP(u, c, p) { const int lc_ = (c) < nch ? (c) : nch - 1; const long long gi_ = (128LL * lc_) >> gshift; \\
    nbxq_ld16p(wa[u], w0 + 64LL * lc_, p); nbxq_ld16p(wb[u], w1 + 64LL * lc_, p); \\
    sa[u] = S[(long long)r0 * sRow + gi_]; sb[u] = S[(long long)r1 * sRow + gi_];${asym ? ' \\\n    za[u] = Z[(long long)r0 * sRow + gi_]; zb[u] = Z[(long long)r1 * sRow + gi_];' : ''} }
  #define NBXQ_MMA_LOAD(u, c) { const int lc_ = (c) < nch ? (c) : nch - 1; const long long gi_ = (128LL * lc_) >> gshift; \\
    wa[u] = nbxq_ld16(w0 + 64LL * lc_); wb[u] = nbxq_ld16(w1 + 64LL * lc_); \\
    sa[u] = S[(long long)r0 * sRow + gi_]; sb[u] = S[(long long)r1 * sRow + gi_];${asym ? ' \\\n    za[u] = Z[(long long)r0 * sRow + gi_]; zb[u] = Z[(long long)r1 * sRow + gi_];' : ''} }
  #pragma unroll
  for (int u = 0; u < ${U}; u++) NBXQ_MMA_LOAD(u, warp + u * ${WARPS})
  NBX_GRID_DEPENDENCY_WAIT();
${xStage(T)}
  const ${T}* xp = Xs + (long long)(xr ? g : 0) * K + 32 * t;
  int c0 = warp;${db ? `
  // double-buffered: round B (slots U..2U-1) loaded before round A's arithmetic, A refilled before B's
  for (; c0 + ${(2 * U - 1) * WARPS} < nch; c0 += ${2 * WARPS * U}) {
    #pragma unroll
    for (int u = ${U}; u < ${2 * U}; u++) NBXQ_MMA_LOAD(u, c0 + u * ${WARPS})
    #pragma unroll
    for (int u = 0; u < ${U}; u++) {
      const int c = c0 + u * ${WARPS};
      {
${mmaChunk(bf, asym, viaSum)}      }
    }
    #pragma unroll
    for (int u = 0; u < ${U}; u++) NBXQ_MMA_LOADP(u, c0 + (${2 * U} + u) * ${WARPS}, c0 + ${2 * U * WARPS} < nch)
    #pragma unroll
    for (int u = ${U}; u < ${2 * U}; u++) {
      const int c = c0 + u * ${WARPS};
      {
${mmaChunk(bf, asym, viaSum)}      }
    }
  }` : ''}
  for (; c0 + ${(U - 1) * WARPS} < nch; c0 += ${WARPS * U}) { // whole rounds: straight-line code between the loads
    #pragma unroll
    for (int u = 0; u < ${U}; u++) {
      const int c = c0 + u * ${WARPS};
      {
${mmaChunk(bf, asym, viaSum)}      }
      NBXQ_MMA_LOAD(u, c + ${WARPS * U})
    }
  }
  for (; c0 < nch; c0 += ${WARPS * U}) {
    #pragma unroll
    for (int u = 0; u < ${U}; u++) {
      const int c = c0 + u * ${WARPS};
      if (c < nch) {
${mmaChunk(bf, asym, viaSum)}      }
      NBXQ_MMA_LOAD(u, c + ${WARPS * U})
    }
  }
  #undef NBXQ_MMA_LOAD
  #undef NBXQ_MMA_LOADP
${mmaEpilogue(d)}
}`;
  return { src, name: 'quant_gemv_mma', sig: ['ptr', 'ptr', 'ptr', 'ptr', 'ptr', 'ptr', 'i32', 'i32', 'i32', 'i64', 'i32', 'i32'] };
}

// ---- lane-private cp.async rings ('cp' kernels) ---------------------------------------------------

/**
 * Bytes per thread and stage of the 'cp' rings: the 16-byte weight vectors a lane decodes (mma: rows g and
 * g + 8 of a chunk; vec: each weight row's quants, q4_k / q5_k headers and high bits) and its 4-byte scales
 * and zeros (int4), each array lane-contiguous (16-byte loads without bank conflicts).
 */
export function cpSlotBytes(kind: 'mma' | 'vec', f: QuantFormat, asym: boolean, nr: number): number {
  if (kind === 'mma') return 32 + (asym ? 16 : 8);
  const vecs = f === 'q4_k' ? 2 : f === 'q5_k' ? 3 : 1;
  return nr * (16 * vecs + (f === 'int4' ? (asym ? 8 : 4) : 0));
}
/** Dynamic shared memory of a 'cp' launch: x (16-byte aligned), then the ring of `stages` stages for every thread. */
export const cpSmemBytes = (xsBytes: number, stages: number, slot: number, extra = 0): number => Math.ceil((xsBytes + extra) / 16) * 16 + stages * THREADS * slot;

/**
 * int4 on tensor cores with a lane-private cp.async ring ('mma' with knob cp = stages): each lane copies the
 * 16-byte vectors of rows g and g + 8 it will itself decode (and their scales / zeros) into its own slots
 * of NST stages in shared memory, a commit group per chunk, and waits with cp.async.wait_group NST − 1:
 * the wait is exact per chunk (in order), the copies hold no registers, and NST − 1 chunks stay in
 * flight through the arithmetic. (The register rings could not: ptxas issued a round's loads at its end
 * and waited for all of them at the next round's start.) No lane reads another lane's slots, so no
 * barrier; a slot is refilled after its values were used.
 */
function mmaCpSource(asym: boolean, d: 'float16' | 'bfloat16', NST: number, viaSum: boolean): { src: string; name: string; sig: ArgType[] } {
  const bf = d === 'bfloat16', T = R.storageType(d), NSC = asym ? 4 : 2;
  const src = `${HELPERS}
${mmaPrelude(bf, asym, viaSum)}
${mmaKernelHead('quant_gemv_mma', T)}  ${XS_DECL}
${MMA_ROWS}  const unsigned char* w0 = Wq + (long long)r0 * rowBytes + 16 * t;
  const unsigned char* w1 = Wq + (long long)r1 * rowBytes + 16 * t;
  const bool xr = g < m;
  float acc[4] = { 0.f, 0.f, 0.f, 0.f };
  const int nch = K >> 7;
  // the ring after x: RW[stage][row a / b][thread], RS[stage][scale a, b (zero a, b)][thread]
  // (viaSum: the chunks' Σx past x, XSUM[row · nch + chunk])
  float* XSUM = reinterpret_cast<float*>(nbxq_xs_ + (long long)m * K * (long long)sizeof(${T}));
  uint4* RW = reinterpret_cast<uint4*>(nbxq_xs_ + ((((long long)m * K * (long long)sizeof(${T}))${viaSum ? ' + (long long)m * nch * 4' : ''} + 15) & ~15LL));
  float* RS = reinterpret_cast<float*>(RW + ${NST * 2 * THREADS});
  const float* s0p = S + (long long)r0 * sRow; const float* s1p = S + (long long)r1 * sRow;${asym ? `
  const float* z0p = Z + (long long)r0 * sRow; const float* z1p = Z + (long long)r1 * sRow;` : ''}
  // chunk c (if any) into stage st, then a commit (a group per chunk, empty past the end: the count stays exact)
  #define NBXQ_CP_ISSUE(st, c) { if ((c) < nch) { const long long gi_ = (128LL * (c)) >> gshift; \
    nbxq_cp16(&RW[((st) * 2) * ${THREADS} + tid], w0 + 64LL * (c)); nbxq_cp16(&RW[((st) * 2 + 1) * ${THREADS} + tid], w1 + 64LL * (c)); \
    nbxq_cp4(&RS[((st) * ${NSC}) * ${THREADS} + tid], s0p + gi_); nbxq_cp4(&RS[((st) * ${NSC} + 1) * ${THREADS} + tid], s1p + gi_);${asym ? ` \\
    nbxq_cp4(&RS[((st) * ${NSC} + 2) * ${THREADS} + tid], z0p + gi_); nbxq_cp4(&RS[((st) * ${NSC} + 3) * ${THREADS} + tid], z1p + gi_);` : ''} } \
    nbxq_commit(); }
  #pragma unroll
  for (int s_ = 0; s_ < ${NST}; s_++) NBXQ_CP_ISSUE(s_, warp + s_ * ${WARPS})
  NBX_GRID_DEPENDENCY_WAIT();
${viaSum ? xStagePerm(T, bf) : xStage(T, true)}
  const ${T}* xp = Xs + (long long)(xr ? g : 0) * K + 32 * t;${viaSum ? `
  const float* sxa = XSUM + (long long)(2 * t < m ? 2 * t : m - 1) * nch; // x rows 2t, 2t + 1 (past m: never stored)
  const float* sxb = XSUM + (long long)(2 * t + 1 < m ? 2 * t + 1 : m - 1) * nch;` : ''}
  int st = 0;
  for (int c = warp; c < nch; c += ${WARPS}) {
    nbxq_wait<${NST - 1}>(); // this lane's copies of chunk c have landed
    {
      const int u = 0;
      uint4 wa[1], wb[1];
      float sa[1], sb[1];${asym ? `
      float za[1], zb[1];` : ''}
      wa[0] = RW[(st * 2) * ${THREADS} + tid]; wb[0] = RW[(st * 2 + 1) * ${THREADS} + tid];
      sa[0] = RS[(st * ${NSC}) * ${THREADS} + tid]; sb[0] = RS[(st * ${NSC} + 1) * ${THREADS} + tid];${asym ? `
      za[0] = RS[(st * ${NSC} + 2) * ${THREADS} + tid]; zb[0] = RS[(st * ${NSC} + 3) * ${THREADS} + tid];` : ''}
${viaSum ? mmaChunkPre(bf, asym) : mmaChunk(bf, asym, false)}    }
    NBXQ_CP_ISSUE(st, c + ${NST * WARPS})
    st = st + 1 == ${NST} ? 0 : st + 1;
  }
  #undef NBXQ_CP_ISSUE
${mmaEpilogue(d)}
}`;
  return { src, name: 'quant_gemv_mma', sig: ['ptr', 'ptr', 'ptr', 'ptr', 'ptr', 'ptr', 'i32', 'i32', 'i32', 'i64', 'i32', 'i32'] };
}

/**
 * The register kernel with a lane-private cp.async ring ('vec' with knob cp = stages; see mmaCpSource):
 * lane l's units of stripe s (its 16-byte vectors of every weight row, int4's scales) go into its own
 * slots of stage (s − ks) / kw mod NST, a commit group per stripe, NST − 1 stripes in flight; the
 * arithmetic is the register kernel's, on slot 0 read back from shared memory.
 */
function vecCpSource(f: QuantFormat, asym: boolean, d: QuantDType, mr: number, nr: number, NST: number, parts: VecParts): { src: string; name: string; sig: ArgType[] } {
  const T = R.storageType(d), UE = unitElems(f), kq = f === 'q4_k' || f === 'q5_k', five = f === 'q5_k';
  const V = 1 + (kq ? 1 : 0) + (five ? 1 : 0);
  const src = `${HELPERS}
${x16Source(d)}
extern "C" __global__ void __launch_bounds__(${THREADS}) quant_gemv_v(const ${T}* __restrict__ X, const unsigned char* __restrict__ Wq,
  const float* __restrict__ S, const float* __restrict__ Z, const ${T}* __restrict__ bias, ${T}* __restrict__ O,
  int m, int n, int K, long long rowBytes, int sRow, int gshift, int kw) {
  ${XS_DECL}
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const int rg = warp / kw, ks = warp - rg * kw;
  const int n0 = blockIdx.x * (${WARPS} / kw) * ${nr} + rg * ${nr};
  const bool live = n0 < n; // uniform per warp; dead warps still stage x
  const int upr = K / ${UE}, nst = (upr + 31) >> 5;
${vecRowPointers(nr)}  uint4* RW = reinterpret_cast<uint4*>(nbxq_xs_ + ((((long long)m * K * (long long)sizeof(${T})) + 15) & ~15LL));
  float* RS = reinterpret_cast<float*>(RW + ${NST * nr * V * THREADS});
${vecAccumulators(f, mr, nr, kq)}
  // the first NST stripes' copies before the grid-dependency wait (packed weights: never written by earlier kernels)
  #pragma unroll
  for (int i_ = 0; i_ < ${NST}; i_++) {
    const int s_ = live ? ks + i_ * kw : nst; // dead warps: empty groups
    ${parts.cpIssue('i_', 's_ * 32 + lane')}
  }
  NBX_GRID_DEPENDENCY_WAIT();
${xStage(T, true)}
  if (live) {
    int st = 0;
    for (int s0 = ks; s0 < nst; s0 += kw) {
      nbxq_wait<${NST - 1}>(); // this lane's copies of stripe s0 have landed
      {
        const int j = 0, u = s0 * 32 + lane;
        uint4 wv[1][${nr}];${kq ? `
        uint4 hv[1][${nr}];` : ''}${five ? `
        uint4 qv[1][${nr}];` : ''}${f === 'int4' ? `
        float sc[1][${nr}];${asym ? ` float zz[1][${nr}];` : ''}` : ''}
        ${parts.cpRead('st')}
        if (u < upr) {
        ${parts.body}
        }
      }
      ${parts.cpIssue('st', `(s0 + ${NST} * kw) * 32 + lane`)}
      st = st + 1 == ${NST} ? 0 : st + 1;
    }
  }
${warpSums(mr, nr)}${warpPartialsAndStore(d, mr, nr, 'live')}
}`;
  return { src, name: 'quant_gemv_v', sig: ['ptr', 'ptr', 'ptr', 'ptr', 'ptr', 'ptr', 'i32', 'i32', 'i32', 'i64', 'i32', 'i32', 'i32'] };
}

/**
 * The 'co' copy of the tensor-core kernels: a warp's 16 rows × 128 bytes at byte offset `off` into a stage
 * of 16 row-major 128-byte rows, lane L copying 16-byte piece L & 7 of rows L / 8, L / 8 + 4, ... so every
 * cp.async instruction reads 4 whole 128-byte lines (the lane-private copies read 16 rows × 64 bytes or
 * 4 × 16 bytes per row: 16 lines an instruction, which measured no faster than the register kernels);
 * piece p of row r lands at p ^ (SW · (r & 1)), so the fragment reads (8 lanes: rows r, r + 1) hit every bank once.
 * rp[i]: row (L / 8 + 4i)'s base (clamped), pieces past the row's end not copied.
 */
function coCopy(SW: number): string {
  return `#define NBXQ_CP_ROWS(stage, off) { _Pragma("unroll") for (int i_ = 0; i_ < 4; i_++) { const int r_ = (lane >> 3) + 4 * i_, p_ = lane & 7; \\
    if ((off) + 16LL * p_ < rowBytes) nbxq_cp16((stage) + r_ * 128 + ((p_ ^ (${SW} * (r_ & 1))) << 4), rp[i_] + (off) + 16 * p_); } }`;
}

/**
 * int4 (groups ≥ 128) on tensor cores with the 'co' copy (knob co): a stage is two 128-element chunks of
 * the warp's 16 rows (128 bytes a row: whole lines), the 8 warps on interleaved stages; lanes copy pieces
 * of other lanes' fragments, so the wait is cp.async.wait_group and a warp barrier, and another barrier
 * before a stage is refilled. Scales (and zeros) of both chunks copied by lanes 2r + h. The arithmetic is
 * mmaChunkPre's (x staged in the pairs' order, chunk sums staged).
 */
function mmaCoSource(asym: boolean, d: 'float16' | 'bfloat16', NST: number): { src: string; name: string; sig: ArgType[] } {
  const bf = d === 'bfloat16', T = R.storageType(d), NSC = asym ? 64 : 32; // floats a stage: scales (and zeros) of 16 rows × 2 chunks
  const STB = 2048 + NSC * 4; // bytes a stage
  const src = `${HELPERS}
${mmaPrelude(bf, asym, true)}
${mmaKernelHead('quant_gemv_mma', T)}  ${XS_DECL}
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5, g = lane >> 2, t = lane & 3;
  const int n0 = blockIdx.x * 16;
  const bool xr = g < m;
  float acc[4] = { 0.f, 0.f, 0.f, 0.f };
  const int nch = K >> 7, nstg = (nch + 1) >> 1;
  float* XSUM = reinterpret_cast<float*>(nbxq_xs_ + (long long)m * K * (long long)sizeof(${T}));
  // this warp's stages past x and the chunk sums: 16 rows × 128 bytes, then the scales (zeros) [row][chunk of 2]
  unsigned char* ring = nbxq_xs_ + ((((long long)m * K * (long long)sizeof(${T})) + (long long)m * nch * 4 + 15) & ~15LL) + (long long)warp * ${NST * STB};
  const unsigned char* rp[4];
  #pragma unroll
  for (int i = 0; i < 4; i++) { const int r = n0 + (lane >> 3) + 4 * i; rp[i] = Wq + (long long)(r < n ? r : n - 1) * rowBytes; }
  const int sr_ = n0 + (lane >> 1) < n ? n0 + (lane >> 1) : n - 1, sh_ = lane & 1; // the scale this lane copies: row lane / 2, chunk 2s + (lane & 1)
  const float* sp = S + (long long)sr_ * sRow;${asym ? `
  const float* zp = Z + (long long)sr_ * sRow;` : ''}
  ${coCopy(4)}
  #define NBXQ_CO_ISSUE(st, s) { if ((s) < nstg) { unsigned char* b_ = ring + (st) * ${STB}; NBXQ_CP_ROWS(b_, 128LL * (s)) \
    const int c_ = 2 * (s) + sh_; if (c_ < nch) { const long long gi_ = (128LL * c_) >> gshift; float* f_ = reinterpret_cast<float*>(b_ + 2048); \
      nbxq_cp4(f_ + lane, sp + gi_);${asym ? ' nbxq_cp4(f_ + 32 + lane, zp + gi_);' : ''} } } \
    nbxq_commit(); }
  #pragma unroll
  for (int s_ = 0; s_ < ${NST}; s_++) NBXQ_CO_ISSUE(s_, warp + s_ * ${WARPS})
  NBX_GRID_DEPENDENCY_WAIT();
${xStagePerm(T, bf)}
  const ${T}* xp = Xs + (long long)(xr ? g : 0) * K + 32 * t;
  const float* sxa = XSUM + (long long)(2 * t < m ? 2 * t : m - 1) * nch; // x rows 2t, 2t + 1 (past m: never stored)
  const float* sxb = XSUM + (long long)(2 * t + 1 < m ? 2 * t + 1 : m - 1) * nch;
  const int sw = 4 * (g & 1); // rows g and g + 8 share the swizzle
  int st = 0;
  for (int s = warp; s < nstg; s += ${WARPS}) {
    nbxq_wait<${NST - 1}>(); // this lane's copies of stage s
    __syncwarp();            // and every lane's
    const unsigned char* b_ = ring + st * ${STB};
    const float* f_ = reinterpret_cast<const float*>(b_ + 2048);
    #pragma unroll
    for (int h = 0; h < 2; h++) {
      const int c = 2 * s + h;
      if (c < nch) {
        const int u = 0;
        uint4 wa[1], wb[1];
        float sa[1], sb[1];${asym ? `
        float za[1], zb[1];` : ''}
        wa[0] = *reinterpret_cast<const uint4*>(b_ + g * 128 + (((4 * h + t) ^ sw) << 4));
        wb[0] = *reinterpret_cast<const uint4*>(b_ + (g + 8) * 128 + (((4 * h + t) ^ sw) << 4));
        sa[0] = f_[2 * g + h]; sb[0] = f_[2 * (g + 8) + h];${asym ? `
        za[0] = f_[32 + 2 * g + h]; zb[0] = f_[32 + 2 * (g + 8) + h];` : ''}
${mmaChunkPre(bf, asym)}      }
    }
    __syncwarp(); // every lane done with the stage before it is refilled
    NBXQ_CO_ISSUE(st, s + ${NST * WARPS})
    st = st + 1 == ${NST} ? 0 : st + 1;
  }
  #undef NBXQ_CO_ISSUE
  #undef NBXQ_CP_ROWS
${mmaEpilogue(d)}
}`;
  return { src, name: 'quant_gemv_mma', sig: ['ptr', 'ptr', 'ptr', 'ptr', 'ptr', 'ptr', 'i32', 'i32', 'i32', 'i64', 'i32', 'i32'] };
}
/** Dynamic shared memory of mmaCoSource's ring (past x and the chunk sums). */
export const mmaCoRingBytes = (asym: boolean, stages: number): number => WARPS * stages * (2048 + (asym ? 64 : 32) * 4);

/**
 * int8 (per-channel scales) on tensor cores, 16-bit x, x staged and a lane-private cp.async ring of NST
 * stages (as mmaCpSource). A byte q = 16·h + l (h the signed high nibble, l the low one) is two bf16/f16
 * values under the magic M = 2^7 / 2^10: (h ^ 8) | M and l | M, one LOP3 a pair each ((w >> s) & 0x000F000F,
 * the XOR folded in), so a word of 4 bytes is 7 instructions for its 4 elements (the FMA kernel spends
 * ~3 an element: PRMT, FADD, FFMA) and two mma.sync m16n8k16, hi and lo, accumulate across all chunks:
 * Σ x·q = 16·Σ x·A_hi + Σ x·A_lo − (16·(M + 8) + M)·Σx, the row scale applied once at the end. A warp owns
 * 16 rows; lane (g, t) copies bytes 32t .. 32t + 31 of rows g and g + 8 of each 128-element chunk. x is
 * staged in the pairs' order ((0, 2), (1, 3) of each 4) with each chunk's Σx; the 8 warps take
 * interleaved chunks and add their sums in shared memory in warp order (a fixed order).
 * The cancellation of the magic costs ~6-9 bits of the float32 sums, below a 16-bit output's rounding.
 */
function mma8CpSource(d: 'float16' | 'bfloat16', NST: number, co = false): { src: string; name: string; sig: ArgType[] } {
  const bf = d === 'bfloat16', T = R.storageType(d), M = bf ? 128 : 1024;
  const MAG = bf ? '0x43004300u' : '0x64006400u', MAGX = bf ? '0x43084308u' : '0x64086408u';
  const src = `${HELPERS}
${mmaPrelude(bf, false)}
#ifdef NBX_EMU
__device__ __forceinline__ unsigned nbxq_andxor(unsigned u, unsigned m, unsigned c) { return (u & m) ^ c; }
#else
__device__ __forceinline__ unsigned nbxq_andxor(unsigned u, unsigned m, unsigned c) { unsigned d; asm("lop3.b32 %0, %1, %2, %3, 0x6A;" : "=r"(d) : "r"(u), "r"(m), "r"(c)); return d; }
#endif
${mmaKernelHead('quant_gemv_mma8', T)}  ${XS_DECL}
${MMA_ROWS}  const unsigned char* w0 = Wq + (long long)r0 * rowBytes + 32 * t;
  const unsigned char* w1 = Wq + (long long)r1 * rowBytes + 32 * t;
  const bool xr = g < m;
  const int nch = K >> 7;
  float* XSUM = reinterpret_cast<float*>(nbxq_xs_ + (long long)m * K * (long long)sizeof(${T}));
  // the ring past x and the chunk sums: RW[stage][row g lo, row g hi, row g + 8 lo, hi][thread]
  uint4* RW = reinterpret_cast<uint4*>(nbxq_xs_ + ((((long long)m * K * (long long)sizeof(${T})) + (long long)m * nch * 4 + 15) & ~15LL));
  // chunk c (if any) from the running row pointers p0 / p1 (at chunk c) into stage st, then a commit; the
  // pointers then move on by the warps' stride (chunks c, c + 8, ... in order)
  const unsigned char* p0 = w0 + 128LL * warp;
  const unsigned char* p1 = w1 + 128LL * warp;
  uint4* rw = RW + tid;${co ? `
  // co: the warp's 16 rows × 128 bytes of chunk c as whole lines into its own stages (coCopy, swizzle ^ (r & 1))
  unsigned char* ring = reinterpret_cast<unsigned char*>(RW) + (long long)warp * ${NST * 2048};
  const unsigned char* rp[4];
  #pragma unroll
  for (int i = 0; i < 4; i++) { const int r = n0 + (lane >> 3) + 4 * i; rp[i] = Wq + (long long)(r < n ? r : n - 1) * rowBytes; }
  ${coCopy(1)}
  #define NBXQ_CP_ISSUE(st, c) { if ((c) < nch) { NBXQ_CP_ROWS(ring + (st) * 2048, 128LL * (c)) } nbxq_commit(); }` : `
  #define NBXQ_CP_ISSUE(st, c) { if ((c) < nch) { \
    nbxq_cp16(rw + ((st) * 4) * ${THREADS}, p0); nbxq_cp16(rw + ((st) * 4 + 1) * ${THREADS}, p0 + 16); \
    nbxq_cp16(rw + ((st) * 4 + 2) * ${THREADS}, p1); nbxq_cp16(rw + ((st) * 4 + 3) * ${THREADS}, p1 + 16); } \
    nbxq_commit(); p0 += ${128 * WARPS}; p1 += ${128 * WARPS}; }`}
  #pragma unroll
  for (int s_ = 0; s_ < ${NST}; s_++) NBXQ_CP_ISSUE(s_, warp + s_ * ${WARPS})
  NBX_GRID_DEPENDENCY_WAIT();
${xStagePerm(T, bf, 2)}
  // lanes of x rows g ≥ m read row 0: B's column g only reaches C's column g, which is never stored
  const ${T}* xp = Xs + (long long)(xr ? g : 0) * K + 32 * t + 128LL * warp;
  const float* sxa = XSUM + (long long)(2 * t < m ? 2 * t : m - 1) * nch; // x rows 2t, 2t + 1 (past m: never stored)
  const float* sxb = XSUM + (long long)(2 * t + 1 < m ? 2 * t + 1 : m - 1) * nch;
  float hi[4] = { 0.f, 0.f, 0.f, 0.f }, lo[4] = { 0.f, 0.f, 0.f, 0.f }, sx0 = 0.f, sx1 = 0.f;
  int st = 0;
  for (int c = warp; c < nch; c += ${WARPS}, xp += ${128 * WARPS}) {
    nbxq_wait<${NST - 1}>(); // this lane's copies of chunk c have landed${co ? `
    __syncwarp();            // and every lane's (co: lanes read pieces other lanes copied)` : ''}
    {
      unsigned xv[16];
      #pragma unroll
      for (int v = 0; v < 4; v++) { const uint4 q = reinterpret_cast<const uint4*>(xp)[v]; xv[4 * v] = q.x; xv[4 * v + 1] = q.y; xv[4 * v + 2] = q.z; xv[4 * v + 3] = q.w; }
${co ? `      const unsigned char* b_ = ring + st * 2048;
      const int s0_ = (2 * t) ^ (g & 1), s1_ = (2 * t + 1) ^ (g & 1); // rows g and g + 8: the same swizzle
      const uint4 a0 = *reinterpret_cast<const uint4*>(b_ + g * 128 + (s0_ << 4)), a1 = *reinterpret_cast<const uint4*>(b_ + g * 128 + (s1_ << 4));
      const uint4 b0 = *reinterpret_cast<const uint4*>(b_ + (g + 8) * 128 + (s0_ << 4)), b1 = *reinterpret_cast<const uint4*>(b_ + (g + 8) * 128 + (s1_ << 4));` : `      const uint4 a0 = rw[(st * 4) * ${THREADS}], a1 = rw[(st * 4 + 1) * ${THREADS}];
      const uint4 b0 = rw[(st * 4 + 2) * ${THREADS}], b1 = rw[(st * 4 + 3) * ${THREADS}];`}
      const unsigned ua[8] = { a0.x, a0.y, a0.z, a0.w, a1.x, a1.y, a1.z, a1.w }, ub[8] = { b0.x, b0.y, b0.z, b0.w, b1.x, b1.y, b1.z, b1.w };
      #pragma unroll
      for (int w = 0; w < 8; w++) {
        // word w: elements 4w .. 4w + 3 of the lane's 32; pairs (0, 2) and (1, 3), rows g and g + 8
        const unsigned ah[4] = { nbxq_andxor(ua[w] >> 4, 0x000F000Fu, ${MAGX}), nbxq_andxor(ub[w] >> 4, 0x000F000Fu, ${MAGX}),
                                 nbxq_andxor(ua[w] >> 12, 0x000F000Fu, ${MAGX}), nbxq_andxor(ub[w] >> 12, 0x000F000Fu, ${MAGX}) };
        mma16816(hi, ah, xv[2 * w], xv[2 * w + 1]);
        const unsigned al[4] = { nbxq_andor(ua[w], 0x000F000Fu, ${MAG}), nbxq_andor(ub[w], 0x000F000Fu, ${MAG}),
                                 nbxq_andor(ua[w] >> 8, 0x000F000Fu, ${MAG}), nbxq_andor(ub[w] >> 8, 0x000F000Fu, ${MAG}) };
        mma16816(lo, al, xv[2 * w], xv[2 * w + 1]);
      }
      sx0 += sxa[c]; sx1 += sxb[c];
    }${co ? `
    __syncwarp(); // every lane done with the stage before it is refilled` : ''}
    NBXQ_CP_ISSUE(st, c + ${NST * WARPS})
    st = st + 1 == ${NST} ? 0 : st + 1;
  }
  #undef NBXQ_CP_ISSUE${co ? `
  #undef NBXQ_CP_ROWS` : ''}
${mmaEpilogue(d, `  { // Σ x·q = 16·hi + lo − (16·(M + 8) + M)·Σx, per row's scale
    const float off = ${16 * (M + 8) + M}.f, sa_ = S[(long long)r0 * sRow], sb_ = S[(long long)r1 * sRow];
    red[warp][lane][0] = sa_ * fmaf(-off, sx0, fmaf(16.f, hi[0], lo[0]));
    red[warp][lane][1] = sa_ * fmaf(-off, sx1, fmaf(16.f, hi[1], lo[1]));
    red[warp][lane][2] = sb_ * fmaf(-off, sx0, fmaf(16.f, hi[2], lo[2]));
    red[warp][lane][3] = sb_ * fmaf(-off, sx1, fmaf(16.f, hi[3], lo[3]));
  }`)}
}`;
  return { src, name: 'quant_gemv_mma8', sig: ['ptr', 'ptr', 'ptr', 'ptr', 'ptr', 'ptr', 'i32', 'i32', 'i32', 'i64', 'i32', 'i32'] };
}
export const quantGemvMma8Source = mma8CpSource;

// ---- streaming GEMVs: every warp one contiguous run of K steps, split K across blocks ------------

/**
 * The streaming kernels ('svec': the register kernel's decoders; 'smma': int4 on tensor cores) size
 * their grid to what the SMs hold at once (bps blocks of 8 warps each) and give every warp one
 * contiguous run of the T = row groups × K steps of the whole product, floor(w·T/W) to
 * floor((w+1)·T/W): all warps stream from start to end (no tail of blocks, no wave quantization, short N
 * or long K alike), each with a ring of loads in flight that never drains at row-group boundaries. A
 * row group whose steps one warp covers is stored by that warp; one shared by several warps (split K)
 * gets their partial sums in a workspace slot each, and the last warp to count itself in (an atomic
 * counter per row group, reset by that warp) adds them in warp order: a fixed order, the same bits
 * every run. Before the grid-dependency wait the block's packed bytes are prefetched into L2, as the
 * other kernels do.
 */
function streamFlush(nv: number, whole: string, wholeCode: string, partials: string, reduce: string): string {
  return `{
        const long long ga_ = (long long)cg * spr;
        if (${whole}) {
          ${wholeCode}
        } else { // the warp's partial sums into its slot (0: its first row group, 1: its last), then counted in
          const long long slot_ = gw * 2 + (first ? 0 : 1);
          ${partials}
          __threadfence();
          __syncwarp();
          unsigned old_ = 0u;
          if (lane == 0) old_ = atomicAdd(C + cg, 1u);
          old_ = __shfl_sync(0xffffffffu, old_, 0);
          // the row group's warps: those whose runs hold its first and last steps, and all between
          const long long wa_ = ((ga_ + 1) * W + T - 1) / T - 1, wb_ = ((ga_ + spr) * W + T - 1) / T - 1;
          if (old_ == (unsigned)(wb_ - wa_)) { // the last to count in: the partials in warp order
            __threadfence();
            for (int v_ = lane; v_ < ${nv}; v_ += 32) {
              float t_ = 0.f;
              for (long long w_ = wa_; w_ <= wb_; w_++) t_ += __ldcg(P + (w_ * 2 + (w_ * T / W >= ga_ ? 0 : 1)) * ${nv} + v_);
              ${reduce}
            }
            if (lane == 0) C[cg] = 0u; // ready for the next call
          }
        }
      }`;
}

/**
 * The streaming kernels' head: warp w's run [s0, s1) of steps, the first pfs steps of the block's run
 * into L2 (pfs from the host: all blocks are resident from the start, so prefetching every block's
 * whole run would ask for the whole matrix at once and, past the L2's size, evict lines before their
 * use), then the wait.
 */
function streamHead(nr: number, int4: boolean, asym: boolean): string {
  return `  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const long long W = (long long)gridDim.x * ${WARPS}, gw = (long long)blockIdx.x * ${WARPS} + warp;
  const long long s0 = gw * T / W, s1 = (gw + 1) * T / W;
  { // the block's steps [b0, b1): row r of row group g from stripe (b0 − g·spr or 0) to (b1 − g·spr or spr)
    const long long b0 = (long long)blockIdx.x * ${WARPS} * T / W, be_ = ((long long)blockIdx.x + 1) * ${WARPS} * T / W, b1 = be_ < b0 + pfs ? be_ : b0 + pfs;
    const int g0 = (int)(b0 / spr), g1 = (int)((b1 - 1) / spr);
    if (b1 > b0)
    for (int i = threadIdx.x; i < (g1 - g0 + 1) * ${nr}; i += ${THREADS}) {
      const int g = g0 + i / ${nr}, row = g * ${nr} + i % ${nr};
      if (row < n) {
        const long long a = (g == g0 ? b0 - (long long)g * spr : 0LL) * stepBytes, e_ = (g == g1 ? b1 - (long long)g * spr : (long long)spr) * stepBytes;
        nbxq_prefetch(Wq + (long long)row * rowBytes + a, (e_ < rowBytes ? e_ : rowBytes) - a);
      }
    }${int4 ? `
    if (threadIdx.x == ${THREADS - 1} && b1 > b0) {
      const long long r0_ = (long long)g0 * ${nr}, r1_ = (long long)(g1 + 1) * ${nr} < n ? (long long)(g1 + 1) * ${nr} : (long long)n;
      nbxq_prefetch(S + r0_ * sRow, (r1_ - r0_) * sRow * 4);${asym ? `
      nbxq_prefetch(Z + r0_ * sRow, (r1_ - r0_) * sRow * 4);` : ''}
    }` : ''}
  }
  NBX_GRID_DEPENDENCY_WAIT();
  const int nsteps = (int)(s1 - s0);`;
}

const STREAM_SIG: ArgType[] = ['ptr', 'ptr', 'ptr', 'ptr', 'ptr', 'ptr', 'i32', 'i32', 'i32', 'i64', 'i32', 'i32', 'ptr', 'ptr', 'i32', 'i64', 'i64', 'i64'];
const streamParams = (T: string): string => `const ${T}* __restrict__ X, const unsigned char* __restrict__ Wq,
  const float* __restrict__ S, const float* __restrict__ Z, const ${T}* __restrict__ bias, ${T}* __restrict__ O,
  int m, int n, int K, long long rowBytes, int sRow, int gshift, float* P, unsigned* C, int spr, long long T, long long stepBytes, long long pfs`;

/**
 * The end of a row group's segment for kernels whose lanes hold acc[mr][nr] (rows cg·nr + r): the
 * butterfly, then the store or the partials (streamFlush), acc zeroed, and at the group's last step
 * the compute cursor moved to the next group (`next`: what else the kernel reloads there).
 */
function rowGroupEnd(d: QuantDType, mr: number, nr: number, next = ''): string {
  const nv = mr * nr;
  const store = (val: string, i: string, r: string): string => `{ const int row_ = cg * ${nr} + ${r}; if (${i} < m && row_ < n) { float v_ = ${val}; if (bias) v_ += ${R.load(d, 'bias', 'row_')}; ${R.store(d, 'O', `(long long)(${i}) * n + row_`, 'v_')} } }`;
  const each = (code: string): string => `if (lane == 0) {
            #pragma unroll
            for (int i = 0; i < ${mr}; i++) {
              #pragma unroll
              for (int r = 0; r < ${nr}; r++) ${code}
            }
          }`;
  return `#pragma unroll
          for (int i = 0; i < ${mr}; i++) {
            #pragma unroll
            for (int r = 0; r < ${nr}; r++) {
              #pragma unroll
              for (int o = 16; o > 0; o >>= 1) acc[i][r] += __shfl_xor_sync(0xffffffffu, acc[i][r], o);
            }
          }
          ${streamFlush(nv, 'k0 == 0 && ck == spr', each(store('acc[i][r]', 'i', 'r')), each(`P[slot_ * ${nv} + i * ${nr} + r] = acc[i][r];`), `const int i_ = v_ / ${nr}, r_ = v_ - i_ * ${nr};
              ${store('t_', 'i_', 'r_')}`)}
          #pragma unroll
          for (int i = 0; i < ${mr}; i++) {
            #pragma unroll
            for (int r = 0; r < ${nr}; r++) acc[i][r] = 0.f;
          }
          if (ck == spr) { ck = 0; k0 = 0; cg++; first = false;${next} }`;
}

/** A streaming kernel's compute cursor (row group cg, stripe ck, segment start k0, first segment) and its zeroed accumulators [mr][rows]. */
const streamCursor = (mr: number, rows: number): string => `  int cg = lg, ck = lk, k0 = lk;
  bool first = true;
  float acc[${mr}][${rows}];
  #pragma unroll
  for (int i = 0; i < ${mr}; i++) {
    #pragma unroll
    for (int r = 0; r < ${rows}; r++) acc[i][r] = 0.f;
  }`;

/**
 * 'svec': the register kernel's formats and decoders (vecParts) on the streaming schedule. A step is
 * one stripe of 32 units (one per lane) of a group of NR rows; the ring holds U steps.
 */
export function quantGemvStreamSource(f: QuantFormat, asym: boolean, d: QuantDType, mr: number, nr: number, U: number, bps: number): { src: string; name: string; sig: ArgType[] } {
  if (!VEC_FORMATS.includes(f)) throw new UnsupportedError('quant_matmul', `the streaming GEMV has no decoder for '${f}'`);
  const T = R.storageType(d), UE = unitElems(f), kq = f === 'q4_k' || f === 'q5_k', five = f === 'q5_k';
  const rowScale = f === 'int8' || f === 'fp8_e4m3';
  const { loads, body } = vecParts(f, asym, mr, nr);
  const src = `${HELPERS}
${x16Source(d)}
extern "C" __global__ void __launch_bounds__(${THREADS}, ${bps}) quant_gemv_s(${streamParams(T)}) {
${streamHead(nr, f === 'int4', asym)}
  const int upr = K / ${UE};
  // the load cursor: row group lg, stripe lk, its rows (past the end: the last row, never stored)
  int lg = (int)(s0 / spr), lk = (int)(s0 - (long long)lg * spr);
  const unsigned char* wr[${nr}];
  long long srow[${nr}];
  #define NBXQ_ROWS _Pragma("unroll") for (int r = 0; r < ${nr}; r++) { const int rr = lg * ${nr} + r < n ? lg * ${nr} + r : n - 1; wr[r] = Wq + (long long)rr * rowBytes; srow[r] = (long long)rr * sRow; }
  #define NBXQ_NEXT { if (++lk == spr) { lk = 0; lg++; NBXQ_ROWS } }
  NBXQ_ROWS
  // the compute cursor: row group cg, stripe ck; k0 the stripe its segment started at, first: the warp's first segment
${streamCursor(mr, nr)}${rowScale ? `
  float rs[${nr}];
  #pragma unroll
  for (int r = 0; r < ${nr}; r++) rs[r] = S[srow[r]];` : ''}${kq ? `
  const int kc = (lane & 7) >> 1, sh0 = 8 * ((2 * kc) & 3), sh1 = 8 * ((2 * kc + 1) & 3);
  const bool khi = kc >= 2;` : ''}
  uint4 wv[${U}][${nr}];${kq ? `
  uint4 hv[${U}][${nr}];` : ''}${five ? `
  uint4 qv[${U}][${nr}];` : ''}${f === 'int4' ? `
  float sc[${U}][${nr}];${asym ? ` float zz[${U}][${nr}];` : ''}` : ''}
  #pragma unroll
  for (int j = 0; j < ${U}; j++) if (j < nsteps) { ${loads('j', 'lk * 32 + lane')} NBXQ_NEXT }
  for (int s = 0; s < nsteps; s += ${U}) {
    #pragma unroll
    for (int j = 0; j < ${U}; j++) {
      if (s + j < nsteps) {
        { const int u = ck * 32 + lane;
        if (u < upr) {
        ${body}
        } }
        if (s + j + ${U} < nsteps) { ${loads('j', 'lk * 32 + lane')} NBXQ_NEXT }
        if (++ck == spr || s + j + 1 == nsteps) {
          ${rowGroupEnd(d, mr, nr, rowScale ? `
            #pragma unroll
            for (int r = 0; r < ${nr}; r++) rs[r] = S[(long long)(cg * ${nr} + r < n ? cg * ${nr} + r : n - 1) * sRow];` : '')}
        }
      }
    }
  }
  #undef NBXQ_ROWS
  #undef NBXQ_NEXT
}`;
  return { src, name: 'quant_gemv_s', sig: STREAM_SIG };
}

/**
 * 'smma': int4 (groups ≥ 128, 16-bit x) on tensor cores on the streaming schedule. A step is one
 * 128-element chunk of a group of 16 rows (the tensor-core kernel's fragments: lane (g, t) loads 16
 * bytes of rows g and g + 8, see quantGemvMmaSource); the ring holds U chunks.
 */
export function quantGemvStreamMmaSource(asym: boolean, d: 'float16' | 'bfloat16', mr: number, U: number, bps: number): { src: string; name: string; sig: ArgType[] } {
  const bf = d === 'bfloat16', T = R.storageType(d), nv = 16 * mr;
  // acc[i]: row g + 8·(i >> 1), x row 2t + (i & 1)
  const each = (code: (i: number) => string): string => [0, 1, 2, 3].map((i) => `{ const int row_ = ${i >> 1 ? 'g + 8' : 'g'}, col_ = 2 * t + ${i & 1}; ${code(i)} }`).join('\n          ');
  const store = (val: string): string => `if (col_ < m && cg * 16 + row_ < n) { float v_ = ${val}; const int j_ = cg * 16 + row_; if (bias) v_ += ${R.load(d, 'bias', 'j_')}; ${R.store(d, 'O', '(long long)col_ * n + j_', 'v_')} }`;
  const flush = streamFlush(nv, 'k0 == 0 && ck == spr', each((i) => store(`acc[${i}]`)),
    each((i) => `if (col_ < ${mr}) P[slot_ * ${nv} + col_ * 16 + row_] = acc[${i}];`),
    `const int col_ = v_ >> 4, row_ = v_ & 15;
              ${store('t_')}`);
  const src = `${HELPERS}
${mmaPrelude(bf, asym, true)}extern "C" __global__ void __launch_bounds__(${THREADS}, ${bps}) quant_gemv_sm(${streamParams(T)}) {
${streamHead(16, true, asym)}
  const int g = lane >> 2, t = lane & 3;
  // the load cursor: row group lg, chunk lk, the lane's two rows (past the end: the last row, never stored)
  int lg = (int)(s0 / spr), lk = (int)(s0 - (long long)lg * spr);
  const unsigned char *w0, *w1;
  long long q0, q1;
  #define NBXQ_ROWS { const int r0_ = lg * 16 + g < n ? lg * 16 + g : n - 1, r1_ = lg * 16 + g + 8 < n ? lg * 16 + g + 8 : n - 1; \\
    w0 = Wq + (long long)r0_ * rowBytes + 16 * t; w1 = Wq + (long long)r1_ * rowBytes + 16 * t; q0 = (long long)r0_ * sRow; q1 = (long long)r1_ * sRow; }
  #define NBXQ_NEXT { if (++lk == spr) { lk = 0; lg++; NBXQ_ROWS } }
  #define NBXQ_LOAD(u) { const long long gi_ = (128LL * lk) >> gshift; \\
    wa[u] = nbxq_ld16(w0 + 64LL * lk); wb[u] = nbxq_ld16(w1 + 64LL * lk); sa[u] = S[q0 + gi_]; sb[u] = S[q1 + gi_];${asym ? ' za[u] = Z[q0 + gi_]; zb[u] = Z[q1 + gi_];' : ''} NBXQ_NEXT }
  NBXQ_ROWS
  int cg = lg, ck = lk, k0 = lk;
  bool first = true;
  const bool xr = g < m;
  const ${T}* xp = X + (long long)(xr ? g : 0) * K + 32 * t;
  float acc[4] = { 0.f, 0.f, 0.f, 0.f };
  uint4 wa[${U}], wb[${U}];
  float sa[${U}], sb[${U}];${asym ? `
  float za[${U}], zb[${U}];` : ''}
  #pragma unroll
  for (int u = 0; u < ${U}; u++) if (u < nsteps) NBXQ_LOAD(u)
  for (int s = 0; s < nsteps; s += ${U}) {
    #pragma unroll
    for (int u = 0; u < ${U}; u++) {
      if (s + u < nsteps) {
        { const int c = ck;
${mmaChunk(bf, asym, true)} }
        if (s + u + ${U} < nsteps) NBXQ_LOAD(u)
        if (++ck == spr || s + u + 1 == nsteps) {
          ${flush}
          acc[0] = acc[1] = acc[2] = acc[3] = 0.f;
          if (ck == spr) { ck = 0; k0 = 0; cg++; first = false; }
        }
      }
    }
  }
  #undef NBXQ_ROWS
  #undef NBXQ_NEXT
  #undef NBXQ_LOAD
}`;
  return { src, name: 'quant_gemv_sm', sig: STREAM_SIG };
}

/**
 * 'sfma': the tile kernel's decoders (every GGUF block format, whose blocks of 2-byte alignment do not
 * map to lanes) on the streaming schedule. A step is one tile (32·sub sub-blocks) of a group of `rows`
 * rows; tiles go from memory into each warp's shared-memory ring of NS stages by cp.async (no register
 * staging: NS − 1 tiles in flight while one is decoded), lanes decode from there.
 */
export function quantGemvStreamTileSource(f: QuantFormat, d: QuantDType, mr: number, rows: number, sub: number, ns: number, vw: number, bps: number): { src: string; name: string; sig: ArgType[] } {
  if (GEOM[f].external) throw new UnsupportedError('quant_matmul', `the streaming tile GEMV takes the GGUF block formats, not '${f}'`);
  const T = R.storageType(d), TB = tileBytes(f, sub), TBP = Math.ceil(TB / 16) * 16, UPL = Math.ceil(TB / vw / 32);
  const src = `${HELPERS}
${decoderSource(f, false, true)}
#ifdef NBX_EMU
#define NBXQ_CP(dst, src_) { for (int b_ = 0; b_ < ${vw}; b_++) ((unsigned char*)(dst))[b_] = ((const unsigned char*)(src_))[b_]; }
#define NBXQ_COMMIT()
#define NBXQ_WAIT()
#else
#define NBXQ_CP(dst, src_) asm volatile("cp.async.${vw === 16 ? 'cg' : 'ca'}.shared.global [%0], [%1], ${vw};" :: "r"((unsigned)__cvta_generic_to_shared(dst)), "l"(src_) : "memory")
#define NBXQ_COMMIT() asm volatile("cp.async.commit_group;" ::: "memory")
#define NBXQ_WAIT() asm volatile("cp.async.wait_group ${ns - 1};" ::: "memory")
#endif
extern "C" __global__ void __launch_bounds__(${THREADS}, ${bps}) quant_gemv_st(${streamParams(T)}) {
  __align__(16) __shared__ unsigned char ring[${WARPS}][${ns}][${rows}][${TBP}];
${streamHead(rows, false, false)}
  const int nsub = K >> 5;
  // the load cursor: row group lg, tile lk, its rows (past the end: the last row, never stored)
  int lg = (int)(s0 / spr), lk = (int)(s0 - (long long)lg * spr);
  const unsigned char* wr[${rows}];
  #define NBXQ_ROWS _Pragma("unroll") for (int r = 0; r < ${rows}; r++) wr[r] = Wq + (long long)(lg * ${rows} + r < n ? lg * ${rows} + r : n - 1) * rowBytes;
  // tile lk of the rows into stage st_: the ${vw}-byte units inside the row, lane u, u + 32, ...
  #define NBXQ_ISSUE(st_) { const long long base_ = (long long)lk * ${TB}, left_ = rowBytes - base_; \\
    const int units_ = (int)((left_ < ${TB} ? left_ : ${TB}) / ${vw}); \\
    _Pragma("unroll") for (int r = 0; r < ${rows}; r++) { \\
      _Pragma("unroll") for (int j_ = 0; j_ < ${UPL}; j_++) { const int u_ = lane + 32 * j_; \\
        if (u_ < units_) NBXQ_CP(&ring[warp][st_][r][u_ * ${vw}], wr[r] + base_ + u_ * ${vw}); } } \\
    if (++lk == spr) { lk = 0; lg++; NBXQ_ROWS } }
  NBXQ_ROWS
${streamCursor(mr, rows)}
  #pragma unroll
  for (int j = 0; j < ${ns - 1}; j++) { if (j < nsteps) NBXQ_ISSUE(j) NBXQ_COMMIT(); }
  for (int s = 0; s < nsteps; s++) {
    const int st = s % ${ns};
    // the stage decoded last (s − 1) is free: tile s + NS − 1 into it; a group is committed every step
    if (s + ${ns - 1} < nsteps) NBXQ_ISSUE((s + ${ns - 1}) % ${ns})
    NBXQ_COMMIT();
    NBXQ_WAIT();
    __syncwarp();
    { const int t = ck;
${tileDecode(f, false, d, mr, rows, sub, 'ring[warp][st]')} }
    __syncwarp();
    if (++ck == spr || s + 1 == nsteps) {
          ${rowGroupEnd(d, mr, rows)}
    }
  }
  #undef NBXQ_ROWS
  #undef NBXQ_ISSUE
}`;
  return { src, name: 'quant_gemv_st', sig: STREAM_SIG };
}

// ---- the dequantize kernels -----------------------------------------------------------------------

/**
 * GGUF block formats: a thread per 16-element half of a sub-block, decoded by the same function as the
 * GEMV's, written as fl(fl(a·q) + b) (formats with mins) or fl(a·q) (the sign of a zero as the CPU's)
 * rounded once into the dtype: the CPU dequantizer's numbers.
 */
export function dequantBlocksSource(f: QuantFormat, d: QuantDType): { src: string; name: string; sig: ArgType[] } {
  const g = GEOM[f], T = R.storageType(d), SPB = g.elems / 32;
  const src = `${HELPERS}
${decoderSource(f, false)}
extern "C" __global__ void __launch_bounds__(256) quant_dequant(const unsigned char* __restrict__ Wq, ${T}* __restrict__ O, long long n, int K, long long rowBytes) {
  const long long halves = (long long)(K >> 4);
  for (long long t = (long long)blockIdx.x * 256 + threadIdx.x; t < n * halves; t += (long long)gridDim.x * 256) {
    const long long row = t / halves; const int hh = (int)(t - row * halves), gs = hh >> 1, h = hh & 1;
    float q[16], a, b;
    nbxq_dq(Wq + row * rowBytes + (long long)(gs / ${SPB}) * ${g.bytes}, gs % ${SPB}, h, q, a, b, 0.f, 0.f);
    ${T}* o = O + row * K + (long long)hh * 16;
    #pragma unroll
    for (int c = 0; c < 16; c++) { const float v_ = ${g.mins ? '__fadd_rn(__fmul_rn(a, q[c]), b)' : '__fmul_rn(a, q[c])'}; ${R.store(d, 'o', 'c', 'v_')} }
  }
}`;
  return { src, name: 'quant_dequant', sig: ['ptr', 'ptr', 'i64', 'i32', 'i64'] };
}

/** int8 / int4 / fp8: a thread per element (any K), the contract's formulas in float32, rounded once into the dtype. */
export function dequantSimpleSource(f: 'int8' | 'int4' | 'fp8_e4m3', asym: boolean, d: QuantDType): { src: string; name: string; sig: ArgType[] } {
  const T = R.storageType(d);
  const w = f === 'int8' ? `__fmul_rn((float)(signed char)Wq[row * rowBytes + k], S[si])`
    : f === 'fp8_e4m3' ? `__fmul_rn(nbxq_e4m3(Wq[row * rowBytes + k]), S[si])`
    : `__fmul_rn(__fsub_rn((float)((Wq[row * rowBytes + (k >> 1)] >> (4 * (k & 1))) & 15u), ${asym ? 'Z[si]' : '8.f'}), S[si])`;
  const src = `${HELPERS}
extern "C" __global__ void __launch_bounds__(256) quant_dequant(const unsigned char* __restrict__ Wq, const float* __restrict__ S, const float* __restrict__ Z,
  ${T}* __restrict__ O, long long n, int K, long long rowBytes, int sRow, int gsize) {
  for (long long t = (long long)blockIdx.x * 256 + threadIdx.x; t < n * K; t += (long long)gridDim.x * 256) {
    const long long row = t / K; const int k = (int)(t - row * K);
    const long long si = row * sRow + (sRow == 0 ? 0 : k / gsize);
    const float v_ = ${w};
    ${R.store(d, 'O', 't', 'v_')}
  }
}`;
  return { src, name: 'quant_dequant', sig: ['ptr', 'ptr', 'ptr', 'ptr', 'i64', 'i32', 'i64', 'i32', 'i32'] };
}

// ---- host side ----------------------------------------------------------------------------------

const addr = (r: StridedRef | undefined): bigint => (r ? (r.buf as CudaBuffer).ptr + BigInt(r.offset * DTYPES[r.dtype].itemsize) : 0n);

export interface Checked { f: QuantFormat; d: QuantDType; n: number; k: number; rowBytes: number; asym: boolean; sRow: number; gsize: number }

/** Validates the call against the contract (typed errors naming what it got and what works). */
function check(op: string, p: { qweight: StridedRef; scales?: StridedRef; zeros?: StridedRef; layout: QuantMatmulParams['layout']; dtype: DTypeName }): Checked {
  const { layout: L } = p, f = L.format;
  if (!QUANT_FORMATS.includes(f)) throw new UnsupportedError(op, `cuda has no kernel for quantized format '${f}' (supported: ${QUANT_FORMATS.join(', ')})`);
  if (!(DTYPES_OK as readonly string[]).includes(p.dtype)) throw new UnsupportedError(op, `cuda '${op}' takes activations of dtype ${DTYPES_OK.join(', ')}, got ${p.dtype}`);
  const g = GEOM[f];
  if (!g.external && L.k % g.elems !== 0) throw new ShapeError(op, `format '${f}' needs K a multiple of ${g.elems}, got K=${L.k}`);
  const rb = rowBytesOf(f, L.k);
  if (L.rowBytes !== rb) throw new ShapeError(op, `format '${f}' with K=${L.k} has ${rb} bytes per row, the layout says ${L.rowBytes}`);
  if (p.qweight.dtype !== 'uint8' && p.qweight.dtype !== 'int8') throw new UnsupportedError(op, `qweight must be uint8, got ${p.qweight.dtype}`);
  let sRow = 0, gsize = 1 << 30;
  if (g.external) {
    if (!p.scales) throw new ShapeError(op, `format '${f}' needs scales`);
    if (p.scales.dtype !== 'float32') throw new UnsupportedError(op, `scales must be float32, got ${p.scales.dtype}`);
    const ns = p.scales.shape.reduce((a, b) => a * b, 1);
    if (f === 'int4') {
      gsize = L.groupSize;
      if (!Number.isInteger(gsize) || gsize < 2 || gsize % 2 !== 0 || L.k % gsize !== 0) throw new ShapeError(op, `int4 needs an even group size dividing K, got group ${gsize} for K=${L.k}`);
      sRow = L.k / gsize;
      if (ns !== L.n * sRow) throw new ShapeError(op, `int4 scales must hold ${L.n}×${sRow} values, got ${ns}`);
      if (p.zeros && p.zeros.shape.reduce((a, b) => a * b, 1) !== ns) throw new ShapeError(op, `int4 zeros must have the scales' shape`);
      if (p.zeros && p.zeros.dtype !== 'float32') throw new UnsupportedError(op, `zeros must be float32, got ${p.zeros.dtype}`);
    } else {
      sRow = ns === 1 && f === 'fp8_e4m3' ? 0 : 1;
      if (sRow === 1 && ns !== L.n) throw new ShapeError(op, `${f} scales must hold ${L.n} values${f === 'fp8_e4m3' ? ' (or 1)' : ''}, got ${ns}`);
    }
  }
  return { f, d: p.dtype as QuantDType, n: L.n, k: L.k, rowBytes: rb, asym: f === 'int4' && !!p.zeros, sRow, gsize };
}

const log2 = (v: number): number => 31 - Math.clz32(v);

/** The widest load (16/8/4/2 bytes) that divides the row pitch, the tile and the base address. */
export function loadWidth(base: bigint, rowBytes: number, tb: number): number {
  for (const v of [16, 8, 4, 2]) if (rowBytes % v === 0 && tb % v === 0 && Number(base % BigInt(v)) === 0) return v;
  return 1;
}

/** Whether the GEMV kernel takes the call: K a multiple of 32, x and out 16-byte aligned, rows 4-byte aligned for the 4-byte fields. */
function gemvOk(c: Checked, p: QuantMatmulParams): boolean {
  if (p.m < 1 || p.m > QUANT_GEMV_MAX_ROWS || c.k % 32 !== 0) return false;
  // int4 groups must not straddle the kernel's 32-element sub-blocks: powers of two from 32
  if (c.f === 'int4' && (c.gsize < 32 || (c.gsize & (c.gsize - 1)) !== 0)) return false;
  const xa = addr(p.x);
  if (xa % 16n !== 0n) return false;
  return loadWidth(addr(p.qweight), c.rowBytes, tileBytes(c.f, 1)) >= GEOM[c.f].align;
}

/** Whether the register kernel takes the call: its formats, 16-byte aligned packed rows (K % 32 == 0 makes every row pitch a multiple of 16). */
export function vecOk(c: Checked, p: QuantMatmulParams): boolean {
  return VEC_FORMATS.includes(c.f) && addr(p.qweight) % 16n === 0n && c.rowBytes % 16 === 0;
}

/** The tile kernel's weight rows per warp and sub-blocks per lane: 2 × 2 where the tiles fit its shared memory. */
export function tileShape(f: QuantFormat): { rows: number; sub: number } {
  for (const [rows, sub] of [[2, 2], [1, 2], [1, 1]] as const) if (gemvSmem(f, { rows, sub }) <= GEMV_SMEM_MAX) return { rows, sub };
  return { rows: 1, sub: 1 };
}

/** Weight rows a warp of the chosen kernel covers, and the K steps (stripes / tiles) of a row that warps can split. */
function gemvWork(c: Checked, p: QuantMatmulParams, impl: string): { rows: number; steps: number } {
  if (impl === 'vec') return { rows: vecRows(quantRowsFor(p.m)), steps: Math.ceil(c.k / unitElems(c.f) / 32) };
  const t = tileShape(c.f);
  return { rows: t.rows, steps: Math.ceil(c.rowBytes / tileBytes(c.f, t.sub)) };
}

/**
 * kw from the shape: the fewest warps per row group that still give ≥ 3 blocks per SM (short N: split K
 * instead of leaving SMs idle), never more warps than K steps to share.
 */
export function defaultKw(n: number, rowsPerWarp: number, steps: number, sms: number): number {
  let kw = 1;
  while (kw < WARPS && kw * 2 <= steps && Math.ceil(n / ((WARPS / kw) * rowsPerWarp)) < 3 * sms) kw *= 2;
  return kw;
}

/** Row groups the streaming kernels' counters cover (N up to 2^20 rows: every model's). */
const STREAM_GROUPS = 1 << 20;
/** Partial sums per workspace slot: 16 rows × 8 rows of x (the largest of either kernel). */
const STREAM_NV = 128;
interface StreamWs { part: CudaBuffer; cnt: CudaBuffer; slots: number }
const streamWsOf = new WeakMap<CudaBackend, StreamWs>();
/**
 * The streaming kernels' workspace, one per backend for its life: two partial slots per warp of the
 * largest grid, and the row groups' counters (zeroed once; each call's last warp resets its own).
 * Never allocated inside a graph capture (that memory would be the graph's): null there until a call
 * outside one (the warm-up before a capture) made it.
 */
function streamWs(): StreamWs | null {
  let ws = streamWsOf.get(be);
  if (!ws && be.capture === null) {
    const slots = 2 * WARPS * 2 * be.smCount;
    ws = { part: be.alloc('float32', slots * STREAM_NV), cnt: be.alloc('int32', STREAM_GROUPS, true), slots };
    streamWsOf.set(be, ws);
  }
  return ws ?? null;
}

/**
 * The streaming schedule of a call: nr rows per group, spr K steps per group, sb packed bytes per step
 * of a row, t steps in all; null where the kernel does not take the call.
 */
export function streamGeom(c: Checked, p: QuantMatmulParams, impl: string): { nr: number; spr: number; sb: number; t: number } | null {
  let nr: number, spr: number, sb: number;
  if (impl === 'sfma') {
    const t = sfmaShape(c.f);
    if (!t || !gemvOk(c, p) || loadWidth(addr(p.qweight), c.rowBytes, tileBytes(c.f, t.sub)) < 4) return null;
    nr = t.rows; sb = tileBytes(c.f, t.sub); spr = Math.ceil(c.rowBytes / sb);
  } else if (impl === 'smma') {
    if (!quantMmaOk(c, p)) return null;
    nr = 16; spr = c.k / 128; sb = 64;
  } else {
    if (!vecOk(c, p)) return null;
    const ue = unitElems(c.f);
    nr = vecRows(quantRowsFor(p.m)); spr = Math.ceil(c.k / ue / 32); sb = (32 * ue * c.rowBytes) / c.k;
  }
  const groups = Math.ceil(c.n / nr), t = groups * spr;
  if (groups > STREAM_GROUPS || t < WARPS) return null;
  return { nr, spr, sb, t };
}

/**
 * The streaming tile kernel's shape for a GGUF block format: one row per group, the fewest sub-blocks
 * per lane whose tile is a whole number of 16-byte vectors of at least 1 KiB (2-3 tiles in flight per
 * warp), and the most stages (≤ 4, ≥ 3) of 8 warps' tiles in 48 KiB of static shared memory; null for
 * the formats with external scales (their kernels are 'svec').
 */
export function sfmaShape(f: QuantFormat): { rows: number; sub: number; stages: number } | null {
  if (GEOM[f].external) return null;
  for (const sub of [1, 2, 4]) {
    const tb = tileBytes(f, sub);
    if (tb % 16 !== 0 || tb < 1024) continue;
    for (const stages of [4, 3]) if (WARPS * stages * tb <= 48 * 1024) return { rows: 1, sub, stages };
  }
  return null;
}

/** Blocks of a streaming launch: bps per SM, fewer where there are fewer K steps than warps. */
export const streamGrid = (t: number, bps: number, sms: number): number => Math.max(1, Math.min(bps * sms, Math.floor(t / WARPS)));

/**
 * The configuration without tuning: the register kernel where it applies, else the tile kernel; kw from
 * the shape. (The streaming kernels are candidates only: on the H200 (call B of 2026-12-02) they did
 * not beat these under timeColdL2.)
 */
export function defaultGemv(c: Checked, p: QuantMatmulParams, sms = be.smCount): Config {
  const base = { ring: 4, bps: 2, pf: 0, ms: 0, xs: 1, db: 0, U: 0, cp: 0, co: 0, xf: 0, nr: 0, lb: 0 };
  const impl = vecOk(c, p) ? 'vec' : 'fma';
  const w = gemvWork(c, p, impl);
  return { impl, kw: defaultKw(c.n, w.rows, w.steps, sms), ...base };
}

/** Steps of each block's run its prefetch covers: the grid's together half the L2. */
function prefetchSteps(geo: { nr: number; sb: number }, grid: number): number {
  const l2 = be.ctx.info.l2CacheSize > 0 ? be.ctx.info.l2CacheSize : 0;
  return Math.floor(l2 / 2 / (grid * geo.nr * geo.sb));
}

/** The streaming launch (false where its geometry or workspace is missing: the caller takes another kernel). */
function launchStream(c: Checked, p: QuantMatmulParams, cfg: Config): boolean {
  const impl = cfg.impl as string, geo = streamGeom(c, p, impl), ws = geo ? streamWs() : null;
  if (!geo || !ws) return false;
  const mr = quantRowsFor(p.m), ring = (cfg.ring as number | undefined) ?? 4, bps = (cfg.bps as number | undefined) ?? 2;
  const grid = Math.min(streamGrid(geo.t, bps, be.smCount), ws.slots / (2 * WARPS));
  let k;
  if (impl === 'sfma') {
    const t = sfmaShape(c.f)!, vw = loadWidth(addr(p.qweight), c.rowBytes, tileBytes(c.f, t.sub)), st = Math.min(t.stages, Math.max(2, ring));
    k = be.kernel(`quant_gemv_st:${c.f}:${c.d}:${mr}:${t.rows}:${t.sub}:${st}:${vw}:${bps}`, () => quantGemvStreamTileSource(c.f, c.d, mr, t.rows, t.sub, st, vw, bps));
  } else k = impl === 'smma'
    ? be.kernel(`quant_gemv_sm:${c.asym}:${c.d}:${mr}:${ring}:${bps}`, () => quantGemvStreamMmaSource(c.asym, c.d as 'bfloat16', mr, ring, bps))
    : be.kernel(`quant_gemv_s:${c.f}:${c.asym}:${c.d}:${mr}:${geo.nr}:${ring}:${bps}`, () => quantGemvStreamSource(c.f, c.asym, c.d, mr, geo.nr, ring, bps));
  be.launch(k, grid, THREADS, [addr(p.x), addr(p.qweight), addr(p.scales), addr(p.zeros), addr(p.bias), addr(p.out), p.m, c.n, c.k, c.rowBytes, c.sRow,
    c.f === 'int4' ? log2(c.gsize) : 30, ws.part.ptr, ws.cnt.ptr, geo.spr, geo.t, geo.sb, cfg.pf === 1 ? prefetchSteps(geo, grid) : 0]);
  return true;
}

/**
 * The persistent grid's blocks (pg): as many as are resident at once, lb per SM (ptxas's register budget) where
 * shared memory holds that many staged x (dyn bytes each, 1 KiB of the SM's reserved per block, the partials),
 * never more than the tiles; `forced` (tests) caps it lower, so blocks loop over several tiles.
 */
export function pgGrid(tiles: number, lb: number, dyn: number, forced?: number): number {
  const perSm = be.ctx.info.maxSharedMemPerSM > 0 ? be.ctx.info.maxSharedMemPerSM : 233472;
  const fit = Math.max(1, Math.min(lb, Math.floor(perSm / (dyn + 2048))));
  return Math.max(1, Math.min(tiles, fit * be.smCount, forced ?? Infinity));
}

/** Dynamic shared memory the cp / co / xf kernels may take: the block's opt-in limit less the static arrays. */
const dynSmemLimit = (): number => be.ctx.info.maxSharedMemPerBlockOptin - 8192;

export function launchQuantGemv(c: Checked, p: QuantMatmulParams, cfg: Config): void {
  if ((cfg.impl === 'svec' || cfg.impl === 'smma' || cfg.impl === 'sfma') && launchStream(c, p, cfg)) return;
  // x in shared memory where the configuration asks for it and x fits (xStage)
  const xsb = cfg.xs === 1 ? quantXsBytes(p.m, c.k, c.d) : 0, xs = xsb > 0;
  // the limit raised once to the most x can take: static (tiles, partials) + dynamic shared memory past 48 KiB needs it
  const dyn = (k: ReturnType<CudaBackend['kernel']>): number => { if (xsb > 0) k.setMaxDynamicSharedMemory(XS_MAX_BYTES); return xsb; };
  // the 'cp' kernels: x, then the ring (where both fit the block's opt-in limit less the static arrays)
  const cpLimit = dynSmemLimit();
  const sxBytes = cfg.ms === 1 ? p.m * (c.k >> 7) * 4 : 0; // the mma cp kernel's chunk sums of x (viaSum)
  const cpDyn = (k: ReturnType<CudaBackend['kernel']>, bytes: number): number => { k.setMaxDynamicSharedMemory(cpLimit); return bytes; };
  const cpStages = (kind: 'mma' | 'vec', nr: number): number => {
    const st = xs ? ((cfg.cp as number | undefined) ?? 0) : 0;
    return st > 0 && cpSmemBytes(xsb, st, cpSlotBytes(kind, c.f, c.asym, nr), kind === 'mma' ? sxBytes : 0) <= cpLimit ? st : 0;
  };
  if (cfg.impl === 'mma' && quantMma8Ok(c, p) && xs) {
    // int8 on tensor cores: the cp form only (x staged with its chunk sums, the ring past them)
    const st = (cfg.cp as number | undefined) || 6, extra = p.m * (c.k >> 7) * 4, bytes = cpSmemBytes(xsb, st, 64, extra), co = cfg.co === 1;
    if (bytes <= cpLimit) {
      const d = c.d as 'bfloat16' | 'float16';
      const k = be.kernel(`quant_gemv_mma8:${d}:${st}:${co}`, () => quantGemvMma8Source(d, st, co));
      be.launch(k, Math.ceil(c.n / 16), THREADS,
        [addr(p.x), addr(p.qweight), addr(p.scales), addr(p.zeros), addr(p.bias), addr(p.out), p.m, c.n, c.k, c.rowBytes, c.sRow, 30], cpDyn(k, bytes));
      return;
    }
  }
  if (cfg.impl === 'mma' && quantMmaOk(c, p)) {
    const d = c.d as 'bfloat16' | 'float16';
    const ms = xs && cfg.ms === 1, db = xs && cfg.db === 1, U = (cfg.U as number | undefined) || MMA_CHUNKS;
    // co (whole-line copies, ms only): its own ring size
    const coReq = ms && cfg.co === 1 && ((cfg.cp as number | undefined) ?? 0) > 0 ? cfg.cp as number : 0;
    const coBytes = coReq > 0 ? Math.ceil((xsb + sxBytes) / 16) * 16 + mmaCoRingBytes(c.asym, coReq) : 0;
    const co = coReq > 0 && coBytes <= cpLimit;
    const cp = co ? coReq : cpStages('mma', 2);
    const k = be.kernel(`quant_gemv_mma:${c.asym}:${d}:${U}:${xs}:${ms}:${db}:${cp}:${co}`, () => quantGemvMmaSource(c.asym, d, U, xs, ms, db, cp, co));
    be.launch(k, Math.ceil(c.n / 16), THREADS,
      [addr(p.x), addr(p.qweight), addr(p.scales), addr(p.zeros), addr(p.bias), addr(p.out), p.m, c.n, c.k, c.rowBytes, c.sRow, log2(c.gsize)],
      co ? cpDyn(k, coBytes) : cp > 0 ? cpDyn(k, cpSmemBytes(xsb, cp, cpSlotBytes('mma', c.f, c.asym, 2), sxBytes)) : dyn(k));
    return;
  }
  const mr = quantRowsFor(p.m);
  if (cfg.impl === 'mma' || cfg.impl === 'svec' || cfg.impl === 'smma' || cfg.impl === 'sfma' || (cfg.impl === 'vec' && !vecOk(c, p))) {
    // not taken by the chosen kernel: the register kernel where it applies, else the tile kernel
    const impl = vecOk(c, p) ? 'vec' : 'fma', w = gemvWork(c, p, impl);
    cfg = { impl, kw: defaultKw(c.n, w.rows, w.steps, be.smCount), xs: cfg.xs ?? 1, db: cfg.db ?? 0, cp: cfg.cp ?? 0 };
  }
  const kw = (cfg.kw as number | undefined) ?? 1;
  if (cfg.impl === 'vec') {
    // xf: x as float32 (its own shared memory; where it fits the opt-in limit; m ≤ XF_MAX_ROWS), nr rows a warp, no cp ring
    const tcReq = cfg.tc === 1 && tcOk(c, p.m); // tc: int4 on tensor cores in the xf kernel (its own staging of x)
    const wuReq = cfg.wu === 1 && c.f === 'q4_k' && !tcReq; // wu: q4_k's wide unit (xf only)
    const xfb = xs && cfg.xf === 1 && XF_FORMATS.includes(c.f) && mr <= XF_MAX_ROWS ? (tcReq ? quantTcBytes(p.m, c.k) : quantXfBytes(c.f, p.m, c.k, wuReq)) : 0, xf = xfb > 0 && xfb <= cpLimit, tc = xf && tcReq, wu = xf && wuReq;
    const nr = xf ? ((cfg.nr as number | undefined) || vecRows(mr)) : vecRows(mr);
    const U = (cfg.U as number | undefined) || (xf ? xfUnroll(nr, xs && cfg.db === 1) : vecUnroll(c.f, mr)), db = xs && cfg.db === 1, cp = xf ? 0 : cpStages('vec', nr);
    const lb = xs && cp === 0 && ((cfg.lb as number | undefined) ?? 0) > 0 ? cfg.lb as number : 2; // blocks per SM (__launch_bounds__)
    // pg: the persistent grid (xf only); ab: diagnostics (xf only, wrong results)
    const pg = xf && cfg.pg === 1, pb = xf && db && cfg.pb === 1, ab = xf ? ((cfg.ab as number | undefined) ?? 0) : 0, tiles = Math.ceil(c.n / ((WARPS / kw) * nr));
    // bk: the xf kernel fed by per-warp bulk-copy rings (not with tc / pg; ab 2 / 3 apply)
    // (with pg: kw 1, one ring per warp running on across its tiles)
    const bkReq = xf && !tc && !wu && ab !== 1 ? ((cfg.bk as number | undefined) ?? 0) : 0, bkb = bkReq > 0 ? quantBkBytes(c.f, c.asym, p.m, c.k, nr, bkReq, c.gsize) : 0;
    if (bkReq > 0 && bkOk(c, addr(p.qweight), addr(p.scales), addr(p.zeros), c.asym) && bkb <= cpLimit) {
      bkCount++;
      const bt = pg ? Math.ceil(c.n / (WARPS * nr)) : tiles;
      const k = be.kernel(`quant_gemv_bk:${c.f}:${c.asym}:${c.d}:${mr}:${nr}:${bkReq}:${lb}${pg ? ':pg' : ''}${ab ? `:ab${ab}` : ''}`, () => vecBkSource(c.f, c.asym, c.d, mr, nr, bkReq, lb, ab, pg));
      be.launch(k, pg ? pgGrid(bt, lb, bkb, cfg.pgGrid as number | undefined) : tiles, THREADS,
        [addr(p.x), addr(p.qweight), addr(p.scales), addr(p.zeros), addr(p.bias), addr(p.out), p.m, c.n, c.k, c.rowBytes, c.sRow, c.f === 'int4' ? log2(c.gsize) : 30, pg ? 1 : kw],
        cpDyn(k, bkb));
      return;
    }
    if (wu) wuCount++;
    const k = be.kernel(`quant_gemv_v:${c.f}:${c.asym}:${c.d}:${mr}:${nr}:${U}:${xs}:${db}:${cp}:${xf}:${lb}${pg ? ':pg' : ''}${tc ? ':tc' : ''}${wu ? ':wu' : ''}${pb ? ':pb' : ''}${ab ? `:ab${ab}` : ''}`, () => quantGemvVecSource(c.f, c.asym, c.d, mr, nr, U, xs, db, cp, xf, lb, pg, ab, tc, wu, pb));
    be.launch(k, pg ? pgGrid(tiles, lb, xfb, cfg.pgGrid as number | undefined) : tiles, THREADS,
      [addr(p.x), addr(p.qweight), addr(p.scales), addr(p.zeros), addr(p.bias), addr(p.out), p.m, c.n, c.k, c.rowBytes, c.sRow, c.f === 'int4' ? log2(c.gsize) : 30, kw],
      xf ? cpDyn(k, xfb) : cp > 0 ? cpDyn(k, cpSmemBytes(xsb, cp, cpSlotBytes('vec', c.f, c.asym, nr))) : dyn(k));
    return;
  }
  // the tile kernel: rows / sub as forced (bench sweeps, tests), else the format's shape
  let { rows, sub } = cfg.rows !== undefined && cfg.sub !== undefined ? { rows: cfg.rows as number, sub: cfg.sub as number } : tileShape(c.f);
  if (gemvSmem(c.f, { rows, sub }) > GEMV_SMEM_MAX) ({ rows, sub } = tileShape(c.f));
  const W = addr(p.qweight), vw = loadWidth(W, c.rowBytes, tileBytes(c.f, sub));
  // the cp ring where x is staged, the loads are 16 bytes wide and x + every warp's stages fit
  const cpReq = xs && vw === 16 ? ((cfg.cp as number | undefined) ?? 0) : 0;
  const cp = cpReq > 0 && Math.ceil(xsb / 16) * 16 + tileCpRingBytes(c.f, rows, sub, cpReq) <= cpLimit ? cpReq : 0;
  const k = be.kernel(`quant_gemv:${c.f}:${c.asym}:${c.d}:${mr}:${rows}:${sub}:${vw}:${xs}:${cp}`, () => quantGemvSource(c.f, c.asym, c.d, mr, rows, sub, vw, xs, cp));
  be.launch(k, Math.ceil(c.n / ((WARPS / kw) * rows)), THREADS,
    [addr(p.x), W, addr(p.scales), addr(p.zeros), addr(p.bias), addr(p.out), p.m, c.n, c.k, c.rowBytes, c.sRow, c.f === 'int4' ? log2(c.gsize) : 30, kw],
    cp > 0 ? cpDyn(k, Math.ceil(xsb / 16) * 16 + tileCpRingBytes(c.f, rows, sub, cp)) : dyn(k));
}

/**
 * Milliseconds per call of `fn` with the weights evicted from L2 and the L2 left clean. gemv.ts's
 * timeColdL2 evicts by memset, which leaves up to the L2's size of dirty lines that the timed call then
 * writes back to HBM while it reads (~50 MB on an H200: ~15 µs, the larger part of a 30 MB GEMV's time);
 * a decode step's previous kernels leave no such thing. Here the memsets still keep the GPU busy while
 * the host enqueues, then one kernel reads another 2 × L2 buffer (writing nothing), which evicts the
 * memsets' lines (their write-back before the start event) and leaves clean lines behind.
 */
export function timeCleanL2(fn: () => void, calls: number): number {
  const l2 = be.ctx.info.l2CacheSize;
  if (!(l2 > 0)) return timeColdL2(be, fn, calls);
  const k = be.kernel('quant_l2_read', () => ({
    name: 'quant_l2_read', sig: ['ptr', 'i64', 'ptr'] as ArgType[],
    src: `extern "C" __global__ void __launch_bounds__(256) quant_l2_read(const uint4* __restrict__ p, long long n, unsigned* out) {
  unsigned a = 0u;
  for (long long i = (long long)blockIdx.x * 256 + threadIdx.x; i < n; i += (long long)gridDim.x * 256) { const uint4 v = p[i]; a ^= v.x ^ v.y ^ v.z ^ v.w; }
  if (a == 0x9e3779b9u && n < 0) *out = a; // never true (n > 0), but the compiler cannot know: keeps the loads
}` }));
  const busy = be.alloc('uint8', 2 * l2), read = be.alloc('uint8', 2 * l2, true);
  const ev = Array.from({ length: 2 * calls }, () => be.ctx.createEvent({ timing: true }));
  try {
    for (let i = 0; i < calls; i++) {
      for (let r = 0; r < 4; r++) be.ctx.memsetD8(busy.ptr, (i + r) & 0xff, busy.bytes, be.stream);
      be.launch(k, be.smCount * 8, 256, [read.ptr, Math.floor(read.bytes / 16), busy.ptr]);
      ev[2 * i]!.record(be.stream);
      fn();
      ev[2 * i + 1]!.record(be.stream);
    }
    ev[2 * calls - 1]!.synchronize();
    let total = 0;
    for (let i = 0; i < calls; i++) total += ev[2 * i + 1]!.elapsedSince(ev[2 * i]!);
    return total / calls;
  } finally { be.free(busy); be.free(read); for (const e of ev) e.destroy?.(); }
}

/** Recent tuner decisions (a model's few shapes skip the string keys). */
const recent: { f: QuantFormat; asym: boolean; d: QuantDType; mr: number; n: number; k: number; cfg: Config }[] = [];
/** Configurations forced by the benchmark and tests ({ impl, kw }, and rows / sub for 'fma'). */
let forced: Config | null = null;
export function forceQuantGemvConfig(cfg: Config | null): void { forced = cfg; }
let lastCfg: Config | null = null;
/** The configuration of the last quant_matmul call (null: it took dequantize + GEMM), for the benchmark's log. */
export function lastQuantGemvConfig(): Config | null { return lastCfg; }

/**
 * The tuner's candidates: the default at kw from the shape, half and twice it, the default with x read
 * from global memory, and for int4 with 16-bit x the tensor-core kernel: at most three compiles per
 * (format, dtype, rows of x). (The streaming kernels are forced only: they never won a tuning.)
 */
export function gemvCandidates(c: Checked, p: QuantMatmulParams): Config[] {
  const d = defaultGemv(c, p);
  const steps = gemvWork(c, p, d.impl as string).steps, kw0 = d.kw as number;
  const out: Config[] = [d];
  for (const kw of [kw0 * 2, kw0 / 2]) if (kw >= 1 && kw <= WARPS && kw <= Math.max(1, steps)) out.push({ ...d, kw });
  // x from global memory (where x fits shared memory, the default stages it), and int4's tensor-core kernel
  if (quantXsBytes(p.m, c.k, c.d) > 0) out.push({ ...d, xs: 0 });
  if (quantMmaOk(c, p)) out.push({ ...d, impl: 'mma', kw: 1 });
  if (quantMmaOk(c, p) && quantXsBytes(p.m, c.k, c.d) > 0) out.push({ ...d, impl: 'mma', kw: 1, ms: 1 });
  // (x staged) the register kernel with double-buffered rounds (and for int8 a cp.async ring), int4 on tensor
  // cores with whole-line cp.async copies: each won or tied on some shape of the H200's calls 3 and 5 of
  // 2026-12-03 (int8 db U2 2,916 GB/s at 4096x14336, cp4 2,620-2,721 at 14336x4096; int4 co 1,687-1,702). The
  // lane-private rings, deeper rings (fewer blocks per SM), the tile kernel's ring, q4_k on the tile kernel
  // and int8 on tensor cores (co 2,322-2,466) never won: sweep-only (bench quant --sweep).
  if (quantXsBytes(p.m, c.k, c.d) > 0) {
    if (d.impl === 'vec') out.push({ ...d, db: 1, U: 2 });
    if (d.impl === 'vec' && c.f === 'int8') out.push({ ...d, cp: 4 });
    if (quantMmaOk(c, p)) out.push({ ...d, impl: 'mma', kw: 1, ms: 1, cp: 4, co: 1 });
  }
  // x as float32 in shared memory (xf). H200, call 2 of the eighth session: int4 nr4 db 1,819-1,958 GB/s (kw 1 /
  // kw 2 at 4096x14336, the previous best 1,706), int8 nr8 2,972 at 14336x4096 and nr2 2,846 at 4096x14336. The
  // lb forms (more blocks per SM, fewer registers: ptxas -v sm_90a, 0 spills each) were added unmeasured: int4 /
  // int8 nr4 db at 3 blocks (80 registers), nr2 db U1 at 4 (63-64), int8 nr8 at 3 (80); q4_k nr2 db U1 (128, 122
  // SASS instructions per 16 packed bytes and row against the register kernel's 170) and nr1 db U2 at 3 (80, 159).
  // The lb forms for one row of x only: at two they spilled 120-300 bytes.
  if (d.impl === 'vec' && XF_FORMATS.includes(c.f) && p.m <= XF_MAX_ROWS && quantXsBytes(p.m, c.k, c.d) > 0 && quantXfBytes(c.f, p.m, c.k) <= dynSmemLimit()) {
    const kwFor = (nr: number): number => defaultKw(c.n, nr, steps, be.smCount), kw = kwFor(4), one = p.m === 1;
    const xf: Config[] = [];
    if (c.f === 'int4') xf.push({ kw, nr: 4 }, { kw, nr: 4, db: 1 }, { kw: Math.max(1, kw / 2), nr: 4, db: 1 }, ...(one ? [{ kw, nr: 4, db: 1, lb: 3 }, { kw: kwFor(2), nr: 2, db: 1, U: 1, lb: 4 }] : []));
    if (c.f === 'int8') xf.push({ kw, nr: 4, db: 1 }, { kw: kwFor(8), nr: 8 }, { kw: kwFor(2), nr: 2 }, ...(one ? [{ kw: kwFor(8), nr: 8, lb: 3 }, { kw, nr: 4, db: 1, lb: 3 }, { kw: kwFor(2), nr: 2, db: 1, U: 1, lb: 4 }] : []));
    if (c.f === 'q4_k') xf.push({ kw: kwFor(2), nr: 2, db: 1, U: 1 }, ...(one ? [{ kw: kwFor(1), nr: 1, db: 1, U: 2, lb: 3 }] : []));
    // (ninth session, unmeasured) the persistent grid (pg: x staged once per resident block) on each format's best
    // form of quant-5 (H200: int4 nr4 db kw/2 1,925-1,968, int8 nr8 2,939 / nr4 db 2,841, q4_k nr2 db U1 1,424-1,513),
    // and int4 on tensor cores in the register kernel (tc, one row of x: 64 SASS instructions per 16 packed bytes
    // and row against the float form's 96, 120-128 registers, 0 spills; ptxas -v sm_90a), alone and with pg
    if (c.f === 'int4') xf.push({ kw: Math.max(1, kw / 2), nr: 4, db: 1, pg: 1 });
    if (c.f === 'int8') xf.push({ kw: kwFor(8), nr: 8, pg: 1 }, { kw, nr: 4, db: 1, pg: 1 });
    if (c.f === 'q4_k') xf.push({ kw: kwFor(2), nr: 2, db: 1, U: 1, pg: 1 });
    // (tenth session) q4_k's wide unit (wu: a lane's unit a whole 64-element chunk, one header decode per two sub-blocks; 109 SASS
    // instructions per 16 packed bytes and row against 131, 128 registers, 0 spills): H200 quant-8, nr2 db U1 at kw 1 1,764 GB/s
    // (4096x14336) / 1,534 (14336x4096) against the narrow form's 1,516 / 1,398; at kw 2 1,448 / 1,223 (the shape's default kw
    // for N 4096, hence kw/2 too). nr2 U2 (1,647 / 1,424), nr1 lb3 / lb4 (1,365-1,440) and pb (int4 1,714-1,718 against
    // 1,903-1,968: slower) are sweep-only.
    if (c.f === 'q4_k') {
      const kwWide = defaultKw(c.n, 2, Math.ceil(c.k / 64 / 32), be.smCount);
      xf.push({ kw: kwWide, nr: 2, db: 1, U: 1, wu: 1 }, { kw: Math.max(1, kwWide / 2), nr: 2, db: 1, U: 1, wu: 1 });
    }
    if (tcOk(c, p.m) && quantTcBytes(p.m, c.k) <= dynSmemLimit()) xf.push({ kw, nr: 4, db: 1, tc: 1 }, { kw: Math.max(1, kw / 2), nr: 4, db: 1, tc: 1 }, { kw: kwFor(2), nr: 2, db: 1, U: 2, tc: 1 }, { kw: Math.max(1, kw / 2), nr: 4, db: 1, tc: 1, pg: 1 });
    // (tenth session) the bulk-copy rings (bk) are sweep-only: on the H200 (quant-7) they lost at both Llama shapes and in
    // every format (int4 1,212-1,467 GB/s against the register kernel's 1,870-1,911; int8 1,715-2,247 against 2,830-2,970;
    // q4_k 1,190-1,348 against 1,404-1,504), and their loads alone (ab 2: int4 1,774-2,108) were no faster than the register
    // kernel's (1,932-2,159)
    const seen = new Set(out.map((o) => JSON.stringify(o)));
    for (const x of xf) {
      const cand = { ...d, xf: 1, ...x }, key = JSON.stringify(cand);
      if (!seen.has(key)) { seen.add(key); out.push(cand); }
    }
  }
  return out;
}

function chooseGemv(c: Checked, p: QuantMatmulParams): Config {
  if (forced) return forced;
  const mr = quantRowsFor(p.m);
  for (const r of recent) if (r.f === c.f && r.asym === c.asym && r.d === c.d && r.mr === mr && r.n === c.n && r.k === c.k) return r.cfg;
  let cfg = defaultGemv(c, p);
  if (c.n * c.k >= TUNE_MIN_ELEMENTS) {
    // timed only where the output is all the call writes (bias is read, never written)
    const key = { shape: `${mr}x${bucketSize(c.n)}x${bucketSize(c.k)}`, dtype: `${c.d}.${c.f}${c.asym ? '.asym' : ''}`, device: be.tuning.deviceKey };
    const r = tuneSync({ name: QUANT_GEMV_SPACE.name, knobs: QUANT_GEMV_SPACE.knobs, defaultConfig: cfg }, key, gemvCandidates(c, p),
      (cand) => timeCleanL2(() => launchQuantGemv(c, p, cand), 10), { deviceLabel: be.ctx.info.name, warmup: 1, reps: 3 }); // a sample is already 10 calls
    cfg = r.config;
  }
  if (recent.length >= 32) recent.shift();
  recent.push({ f: c.f, asym: c.asym, d: c.d, mr, n: c.n, k: c.k, cfg });
  return cfg;
}

function launchDequant(c: Checked, p: DequantizeParams | QuantMatmulParams, out: bigint, d: QuantDType): void {
  const total = c.n * c.k;
  if (total === 0) return;
  if (GEOM[c.f].external) {
    const k = be.kernel(`quant_dequant:${c.f}:${c.asym}:${d}`, () => dequantSimpleSource(c.f as 'int8', c.asym, d));
    be.launch(k, be.gridFor(total, 256), 256, [addr(p.qweight), addr(p.scales), addr(p.zeros), out, c.n, c.k, c.rowBytes, c.sRow, c.gsize]);
  } else {
    // the decoders read a block's fields with 4- and 16-byte loads (q4_k / q5_k quants): a packed view
    // not aligned for them (a slice of a larger buffer) is copied first
    const need = c.f === 'q4_k' || c.f === 'q5_k' ? 16n : BigInt(GEOM[c.f].align);
    let q = addr(p.qweight), tmp: CudaBuffer | null = null;
    if (q % need !== 0n) {
      tmp = be.alloc('uint8', c.n * c.rowBytes);
      be.ctx.copyDtoD(tmp.ptr, q, c.n * c.rowBytes, be.stream);
      q = tmp.ptr;
    }
    const k = be.kernel(`quant_dequant:${c.f}:${d}`, () => dequantBlocksSource(c.f, d));
    be.launch(k, be.gridFor(total / 16, 256), 256, [q, out, c.n, c.k, c.rowBytes]);
    if (tmp) be.free(tmp); // stream-ordered
  }
}

/** out[M, N] = x[M, K] · dequantize(w)ᵀ (+ bias). */
export function cudaQuantMatmul(p: QuantMatmulParams): void {
  const c = check('quant_matmul', p);
  if (p.x.dtype !== p.dtype || p.out.dtype !== p.dtype) throw new UnsupportedError('quant_matmul', `x and out must have dtype ${p.dtype}, got ${p.x.dtype} and ${p.out.dtype}`);
  if (p.m === 0 || c.n === 0) return;
  if (gemvOk(c, p)) { lastCfg = chooseGemv(c, p); launchQuantGemv(c, p, lastCfg); return; }
  lastCfg = null;
  // prefill: the weight dequantized into scratch (x's dtype), then the GEMM with linear's layout
  const scratch = be.alloc(c.d, c.n * c.k);
  try {
    launchDequant(c, p, scratch.ptr, c.d);
    const w: StridedRef = { buf: scratch, dtype: c.d, shape: [c.n, c.k], strides: [c.k, 1], offset: 0 } as StridedRef;
    kernel('gemm', 'cuda', 'quant_matmul')({
      transA: false, transB: true, m: p.m, n: c.n, k: c.k, alpha: 1, beta: 0,
      a: p.x, lda: c.k, b: w, ldb: c.k, c: p.out, ldc: c.n, ...(p.bias ? { bias: p.bias } : {}),
    });
  } finally { be.free(scratch); } // stream-ordered: the GEMM above has read it by the time it is reused
}

/** The float weight [N, K] in `dtype`. */
export function cudaDequantize(p: DequantizeParams): void {
  const c = check('dequantize', p);
  if (p.out.dtype !== p.dtype) throw new UnsupportedError('dequantize', `out must have dtype ${p.dtype}, got ${p.out.dtype}`);
  launchDequant(c, p, addr(p.out), c.d);
}

export const kernels = { quant_matmul: cudaQuantMatmul, dequantize: cudaDequantize } satisfies BackendKernels;
export const features: { quant: QuantFeatures } = { quant: { formats: QUANT_FORMATS, dtypes: DTYPES_OK } };

/** Every specialization for the nvcc compile check (test/gen/cuda_quant_compile.mjs). */
export function allQuantSources(): { label: string; src: string; name: string; sig: ArgType[] }[] {
  const out: { label: string; src: string; name: string; sig: ArgType[] }[] = [];
  for (const f of QUANT_FORMATS) {
    for (const asym of f === 'int4' ? [false, true] : [false]) {
      for (const d of DTYPES_OK) {
        for (const mr of [1, 8]) for (const rows of [1, 2, 4]) for (const sub of [1, 2, 4]) {
          if (gemvSmem(f, { rows, sub }) > GEMV_SMEM_MAX) continue;
          out.push({ label: `gemv:${f}:${asym}:${d}:${mr}:${rows}:${sub}`, ...quantGemvSource(f, asym, d, mr, rows, sub, 16) });
        }
        if (VEC_FORMATS.includes(f)) {
          for (const mr of [1, 2, 4, 8]) out.push({ label: `vec:${f}:${asym}:${d}:${mr}`, ...quantGemvVecSource(f, asym, d, mr, vecRows(mr), vecUnroll(f, mr)) });
          for (const mr of [1, 2, 4, 8]) out.push({ label: `vecxs:${f}:${asym}:${d}:${mr}`, ...quantGemvVecSource(f, asym, d, mr, vecRows(mr), vecUnroll(f, mr), true) });
          for (const mr of [1, 8]) out.push({ label: `vecxs:db:${f}:${asym}:${d}:${mr}`, ...quantGemvVecSource(f, asym, d, mr, vecRows(mr), vecUnroll(f, mr), true, true) });
          for (const mr of [1, 8]) out.push({ label: `vecxs:cp:${f}:${asym}:${d}:${mr}`, ...quantGemvVecSource(f, asym, d, mr, vecRows(mr), vecUnroll(f, mr), true, false, 6) });
        }
        if (XF_FORMATS.includes(f)) {
          for (const [mr, nr] of [[1, 2], [1, 4], [1, 8], [2, 4], [2, 8]] as const) for (const db of nr === 2 ? [false] : [false, true]) {
            out.push({ label: `vecxs:xf:${f}:${asym}:${d}:${mr}:${nr}:${db}`, ...quantGemvVecSource(f, asym, d, mr, nr, xfUnroll(nr, db), true, db, 0, true) });
          }
          // more blocks per SM (lb): the tuner's forms (gemvCandidates) and neighbours
          for (const [mr, nr, U, db, lb] of [[1, 4, 1, true, 3], [1, 2, 1, true, 4], [1, 1, 4, true, 3], [1, 8, 1, false, 3], [2, 2, 1, true, 3]] as const) {
            out.push({ label: `vecxs:xf:lb${lb}:${f}:${asym}:${d}:${mr}:${nr}:${U}:${db}`, ...quantGemvVecSource(f, asym, d, mr, nr, U, true, db, 0, true, lb) });
          }
          // the bulk-copy rings (bk), per tile and on a persistent grid, and their loads-only diagnostics (ab 2)
          for (const [nr, st, lb, pg] of [[2, 4, 2, false], [2, 8, 2, false], [4, 4, 2, false], [2, 4, 2, true], [2, 8, 2, true], [1, 8, 3, true], [4, 4, 2, true]] as const) out.push({ label: `vecxs:bk:${f}:${asym}:${d}:${nr}:${st}:${lb}:${pg}`, ...vecBkSource(f, asym, d, 1, nr, st, lb, 0, pg) });
          out.push({ label: `vecxs:bk:ab2:${f}:${asym}:${d}`, ...vecBkSource(f, asym, d, 1, 2, 8, 2, 2, true) });
          // the persistent grid (pg), the diagnostics (ab) and int4 on tensor cores (tc: 16-bit x, one row)
          for (const [nr, U, db] of [[4, 1, true], [8, 1, false], [2, 1, true]] as const) out.push({ label: `vecxs:xf:pg:${f}:${asym}:${d}:${nr}:${U}:${db}`, ...quantGemvVecSource(f, asym, d, 1, nr, U, true, db, 0, true, 2, true) });
          for (const ab of [1, 2, 3]) out.push({ label: `vecxs:xf:ab${ab}:${f}:${asym}:${d}`, ...quantGemvVecSource(f, asym, d, 1, 4, 1, true, true, 0, true, 2, false, ab) });
          // q4_k's wide unit (wu): the tuner's forms, the persistent grid, the diagnostics
          if (f === 'q4_k') {
            for (const [mr, nr, U, db, lb, pg] of [[1, 2, 1, true, 2, false], [1, 1, 2, true, 3, false], [1, 1, 1, true, 4, false], [1, 4, 1, true, 2, false], [1, 2, 1, false, 2, false], [2, 2, 1, true, 2, false], [2, 1, 2, true, 2, false], [1, 2, 1, true, 2, true]] as const) {
              out.push({ label: `vecxs:xf:wu:${f}:${asym}:${d}:${mr}:${nr}:${U}:${db}:${lb}:${pg}`, ...quantGemvVecSource(f, asym, d, mr, nr, U, true, db, 0, true, lb, pg, 0, false, true) });
            }
            for (const ab of [1, 2, 3]) out.push({ label: `vecxs:xf:wu:ab${ab}:${f}:${asym}:${d}`, ...quantGemvVecSource(f, asym, d, 1, 2, 1, true, true, 0, true, 2, false, ab, false, true) });
          }
          // both db rounds before the grid-dependency wait (pb): the tuner's db forms, with pg, wu, m 2
          for (const [mr, nr, U, lb, pg, wu] of [[1, 4, 1, 2, false, false], [1, 2, 1, 4, false, false], [1, 4, 1, 2, true, false], [2, 2, 1, 2, false, false], [1, 1, 2, 3, false, false], ...(f === 'q4_k' ? [[1, 2, 1, 2, false, true], [1, 1, 1, 3, false, true]] : [])] as [number, number, number, number, boolean, boolean][]) {
            out.push({ label: `vecxs:xf:pb:${f}:${asym}:${d}:${mr}:${nr}:${U}:${lb}:${pg}:${wu}`, ...quantGemvVecSource(f, asym, d, mr, nr, U, true, true, 0, true, lb, pg, 0, false, wu, true) });
          }
          if (f === 'int4' && d !== 'float32') {
            for (const [nr, U, db, pg] of [[4, 1, true, false], [4, 2, false, false], [2, 2, true, false], [4, 1, true, true]] as const) out.push({ label: `vecxs:tc:${asym}:${d}:${nr}:${U}:${db}:${pg}`, ...quantGemvVecSource(f, asym, d, 1, nr, U, true, db, 0, true, 2, pg, 0, true) });
            for (const ab of [1, 2, 3]) out.push({ label: `vecxs:tc:ab${ab}:${asym}:${d}`, ...quantGemvVecSource(f, asym, d, 1, 4, 1, true, true, 0, true, 2, false, ab, true) });
          }
        }
        if (VEC_FORMATS.includes(f)) {
          for (const mr of [1, 2, 8]) for (const [ring, bps] of [[vecUnroll(f, mr), 2], [2 * vecUnroll(f, mr), 1]]) out.push({ label: `svec:${f}:${asym}:${d}:${mr}:${ring}:${bps}`, ...quantGemvStreamSource(f, asym, d, mr, vecRows(mr), ring!, bps!) });
        }
        { const t = tileShape(f); for (const mr of [1, 8]) out.push({ label: `gemvxs:${f}:${asym}:${d}:${mr}:${t.rows}:${t.sub}`, ...quantGemvSource(f, asym, d, mr, t.rows, t.sub, 16, true) }); }
        { const t = tileShape(f); for (const mr of [1, 8]) out.push({ label: `gemvxs:cp:${f}:${asym}:${d}:${mr}:${t.rows}:${t.sub}`, ...quantGemvSource(f, asym, d, mr, t.rows, t.sub, 16, true, 4) }); }
        const st = sfmaShape(f);
        if (st) for (const mr of [1, 8]) out.push({ label: `sfma:${f}:${d}:${mr}:${st.sub}:${st.stages}`, ...quantGemvStreamTileSource(f, d, mr, st.rows, st.sub, st.stages, 16, 2) });
        if (f === 'int8' && d !== 'float32') for (const st of [4, 8]) for (const co of [false, true]) out.push({ label: `mma8xs:cp:${d}:${st}:${co}`, ...quantGemvMma8Source(d, st, co) });
        if (f === 'int4' && d !== 'float32') {
          out.push({ label: `mma:${asym}:${d}`, ...quantGemvMmaSource(asym, d, MMA_CHUNKS) });
          out.push({ label: `mmaxs:${asym}:${d}`, ...quantGemvMmaSource(asym, d, MMA_CHUNKS, true) });
          out.push({ label: `mmaxs:sum:${asym}:${d}`, ...quantGemvMmaSource(asym, d, MMA_CHUNKS, true, true) });
          for (const U of [2, 4]) out.push({ label: `mmaxs:db:sum:${asym}:${d}:${U}`, ...quantGemvMmaSource(asym, d, U, true, true, true) });
          out.push({ label: `mmaxs:db:${asym}:${d}`, ...quantGemvMmaSource(asym, d, 2, true, false, true) });
          for (const ms of [false, true]) out.push({ label: `mmaxs:cp:${ms}:${asym}:${d}`, ...quantGemvMmaSource(asym, d, 4, true, ms, false, 6) });
          for (const st of [4, 6]) out.push({ label: `mmaxs:co:${asym}:${d}:${st}`, ...quantGemvMmaSource(asym, d, 4, true, true, false, st, true) });
          for (const mr of [1, 8]) for (const [ring, bps] of [[4, 2], [8, 1]]) out.push({ label: `smma:${asym}:${d}:${mr}:${ring}:${bps}`, ...quantGemvStreamMmaSource(asym, d, mr, ring!, bps!) });
        }
        out.push({ label: `dequant:${f}:${asym}:${d}`, ...(GEOM[f].external ? dequantSimpleSource(f as 'int8', asym, d) : dequantBlocksSource(f, d)) });
      }
    }
  }
  return out;
}
