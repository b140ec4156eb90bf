// decode_step: a decode step of up to eight sequences of a pre-norm Llama-family decoder in one persistent
// launch (nbx.llm.fused_decode_step). A step launched op by op is about ten kernels per layer; at small
// batches each streams a few MB of weights, and a kernel boundary (drain, launch, ramp-up) costs as much as
// the streaming of the smaller projections. Here one block per SM runs every phase of every layer:
//
//   per layer: A  RMSNorm (each block, redundantly) + q/k/v rows      → qkv
//              B  RoPE, cache write, attention (a block per sequence and head) → att
//              C  o_proj rows + residual add                           → res
//              D  RMSNorm + gate/up rows + act(gate)·up                → act
//              E  down rows + residual add                             → res
//   then       F  final RMSNorm + lm_head rows + each block's argmax; the last block to finish picks the step's
//
// with a grid-wide barrier between phases (every phase reads what all blocks wrote in the one before).
// Weights never depend on activations, so each warp streams its share of every phase's weight rows into its
// own ring in shared memory (cp.async, a 2 KB item per group, several in flight) and refills the ring as it
// consumes it, whatever phase the next item belongs to: the loads in flight at a barrier, at the norm
// prologues and during the attention phase are the next phase's, so the weight stream does not stop at every
// phase boundary the way it stops at every kernel boundary. The products run on tensor cores: with only 16
// warps per SM (one block, all registers), float FMAs per weight element were the limit (an issue-bound
// ~125 instructions per 512 bytes streamed), not memory.
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
import { isQuantWeight, type DecodeStepParams, type DecodeStepWeight } from '../../../kernels/decode_step.js';
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
/** Sequences a step takes at most: the MMAs' eight columns (each sequence's x is one). */
const MAX_BATCH = 8;
/** The most items (2 KB each) a warp's weight ring holds in flight. */
const RING_NS_MAX = 5;
/**
 * The same with packed weights, whose products are bound more by the unpacking than by the loads in flight: three
 * items a warp (BENCHMARKS.md, eleventh and thirteenth sessions: two were best before the unpacking got cheaper).
 */
const RING_NS_MAX_PACKED = 3;
/**
 * The longest cache (positions) over which one block a query head takes the attention phase where its head dim is
 * SPLIT1_MIN_D or more: every o_proj block copies all the parts of a split, and over short caches that costs more than
 * the split saves (BENCHMARKS.md, thirteenth session).
 */
const SPLIT1_MAX_S = 256, SPLIT1_MIN_D = 128;

interface Shape { H: number; NH: number; NKV: number; D: number; RD: number; I: number; V: number; L: number; S: number; G: number; B: number }
/** Build choices besides the shape: blocks per query head in the attention phase, and the grid barrier's arrival. */
interface Variant { asplit: number; bar: 'fence' | 'release'; bulk?: boolean; hpi?: number; l2?: { ahead: number; cap: number }; markAtCopy?: boolean; normRows?: boolean; fmt?: Formats; q4xsum?: boolean; q4perm?: boolean }
/**
 * The weights' formats by projection (q/k/v, o, gate/up, down, lm_head): 0 the model dtype, 1 int8 per output channel,
 * 2 int4 in groups of 128 along K, symmetric, 3 the same with zero points (src/quant/formats.ts defines them). Every
 * layer's projection of a kind has the same format.
 */
interface Formats { qkv: WFmt; o: WFmt; gu: WFmt; down: WFmt; lm: WFmt }
type WFmt = 0 | 1 | 2 | 3;
const DTYPE_FORMATS: Formats = { qkv: 0, o: 0, gu: 0, down: 0, lm: 0 };
/** Bytes of a weight row of K elements in a format. */
const rowBytesOf = (f: WFmt, k: number): number => (f === 0 ? 2 * k : f === 1 ? k : k / 2);
/** A ring item: 16 rows × 128 bytes of weights, then (packed formats) 16 rows × 8 bytes of their scales (and of their zero points). */
const stageBytes = (fmt: Formats): number => {
  const fs = Object.values(fmt);
  return 2048 + (fs.includes(3) ? 256 : fs.some((f) => f !== 0) ? 128 : 0);
};
/** Bytes of the int4 zero-point formats' group sums of x (each sequence's sums over 128 columns), 0 without them. */
const xsumBytes = (s: Shape, fmt: Formats, q4xsum = false): number =>
  (Object.values(fmt).includes(3) || (q4xsum && Object.values(fmt).includes(2)) ? s.B * Math.ceil(Math.max(s.H, s.NH * s.D, s.I) / 128) * 4 : 0);

const rowsPerBlock = (n: number, g: number): number => Math.ceil(n / g);
/**
 * Elements between the sequences' rows of x in shared memory: the longest input plus 64 bytes past a multiple of
 * 128 bytes. A quarter-warp's 16-byte reads of x in block_gemv are four pieces of each of two sequences' rows
 * (lanes g = 2i, 2i + 1): 64 bytes apart, the second row's pieces fall in the banks the first row's leave free (16
 * bytes apart, as before, three of the four collided: Nsight Compute counted 4.1-way conflicts at batch 8).
 */
const xsStride = (s: Shape): number => (s.B === 1 ? Math.max(s.H, s.NH * s.D, s.I) : Math.ceil(Math.max(s.H, s.NH * s.D, s.I) / 64) * 64 + 32);
/** Tiles (16 rows) a warp's contiguous run of a block's (tile, 64-column chunk) items can touch, for the partial sums' shared array. */
function maxTilesPerWarp(s: Shape, f: Formats = DTYPE_FORMATS): number {
  const t16 = (n: number): number => Math.ceil(n / 16);
  const cases: [number, number][] = [[t16(rowsPerBlock((s.NH + 2 * s.NKV) * s.D, s.G)), rowBytesOf(f.qkv, s.H)], [t16(rowsPerBlock(s.H, s.G)), rowBytesOf(f.o, s.NH * s.D)],
    [2 * t16(rowsPerBlock(s.I, s.G)), rowBytesOf(f.gu, s.H)], [t16(rowsPerBlock(s.H, s.G)), rowBytesOf(f.down, s.I)], [t16(rowsPerBlock(s.V, s.G)), rowBytesOf(f.lm, s.H)]];
  let m = 1;
  for (const [tiles, rb] of cases) {
    const kcs = rb / 128, up = Math.ceil((tiles * kcs) / WARPS);
    m = Math.max(m, Math.ceil(up / kcs) + 2);
  }
  return m;
}

export function decodeStepSource(d: 'bfloat16' | 'float16', s: Shape, ring: Ring, v: Variant = { asplit: 1, bar: 'release' }): { src: string; name: string; sig: ArgType[] } {
  const bf = d === 'bfloat16';
  const fm = v.fmt ?? DTYPE_FORMATS, fv = Object.values(fm);
  const MAXT = maxTilesPerWarp(s, fm);
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
#define MAXT_ ${MAXT}
#define LG_ ${LG}
#define KPW_ (32 / LG_)
#define NS_ ${ring.ns}
#define STG_ ${stageBytes(fm)}
#define FQKV_ ${fm.qkv}
#define FO_ ${fm.o}
#define FGU_ ${fm.gu}
#define FDN_ ${fm.down}
#define FLM_ ${fm.lm}
${fv.includes(1) ? '#define Q8_ 1\n' : ''}${fv.includes(2) || fv.includes(3) ? '#define Q4_ 1\n' : ''}${fv.includes(3) ? '#define Q4Z_ 1\n' : ''}${v.q4xsum && fv.includes(2) ? '#define Q4X_ 1\n' : ''}${v.q4perm && (fv.includes(2) || fv.includes(3)) ? '#define Q4P_ 1\n' : ''}${xsumBytes(s, fm, v.q4xsum) ? `#define QXS_ 1\n#define XG_ ${Math.ceil(Math.max(s.H, s.NH * s.D, s.I) / 128)}\n#define XSUM_OFF_ ${xsumOffset(s, v.asplit, fm)}\n` : ''}${fv.some((x) => x !== 0) ? '#define QANY_ 1\n' : ''}#define ATTU_ ${(v.hpi ?? 1) === 2 ? ATT_UNROLL / 2 : ATT_UNROLL}
#define XMAX_ ${Math.max(s.H, s.NH * s.D, s.I)}
#define XSTR_ ${xsStride(s)}
#define B_ ${s.B}
#define NPT_ ${Math.ceil(s.H / THREADS)}
#define ASPLIT_ ${v.asplit}
#define HPI_ ${v.hpi ?? 1}
${v.bar === 'release' ? '#define BAR_RELEASE_ 1\n' : ''}${v.bulk === false ? '#define NBX_NO_BULK_ROWS_ 1\n' : ''}${v.l2 ? `#define L2AHEAD_ ${v.l2.ahead}\n#define L2CAP_ ${v.l2.cap}ll\n` : ''}${v.markAtCopy ? '#define MARK_AT_COPY_ 1\n' : ''}${v.normRows ? '#define NBX_NORM_ROWS_ 1\n' : ''}#ifdef NBX_EMU
#define CP16(dst, src_) (*reinterpret_cast<uint4*>(dst) = *reinterpret_cast<const uint4*>(src_))
#define CP8(dst, src_) (*reinterpret_cast<unsigned long long*>(dst) = *reinterpret_cast<const unsigned long long*>(src_))
#define CP4(dst, src_) (*reinterpret_cast<unsigned*>(dst) = *reinterpret_cast<const unsigned*>(src_))
#define CP_COMMIT()
#define CP_WAIT()
#define CP_WAIT_ALL()
#else
#define CP16(dst, src_) asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" :: "r"((unsigned)__cvta_generic_to_shared(dst)), "l"(src_) : "memory")
#define CP8(dst, src_) asm volatile("cp.async.ca.shared.global [%0], [%1], 8;" :: "r"((unsigned)__cvta_generic_to_shared(dst)), "l"(src_) : "memory")
#define CP4(dst, src_) asm volatile("cp.async.ca.shared.global [%0], [%1], 4;" :: "r"((unsigned)__cvta_generic_to_shared(dst)), "l"(src_) : "memory")
#define CP_COMMIT() asm volatile("cp.async.commit_group;" ::: "memory")
#define CP_WAIT() asm volatile("cp.async.wait_group ${ring.ns - 1};" ::: "memory")
#define CP_WAIT_ALL() asm volatile("cp.async.wait_all;" ::: "memory")
#endif

// a projection's weights are rows of bytes in its format (FQKV_ ...), with float32 scales where the format has them
struct Layer { const T_* ln1; const unsigned char* wqkv; const unsigned char* wo; const T_* ln2; const unsigned char* wgu; const unsigned char* wdown; T_* kc; T_* vc;
  const float* sqkv; const float* so; const float* sgu; const float* sdown; const float* zqkv; const float* zo; const float* zgu; const float* zdown; };
/** The weights a phase streams: the layers' and the lm_head's (and its scales and zero points). */
struct Net { const Layer* layers; const unsigned char* lm; const float* lms; const float* lmz; };

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

/** Sums over the block of each of B_ values; every thread gets them (red: WARPS_ · B_ floats of shared memory). */
__device__ void block_sums(float (&v)[B_], float* red) {
#pragma unroll
  for (int b = 0; b < B_; b++) { v[b] = warp_sum(v[b]); if ((threadIdx.x & 31) == 0) red[(threadIdx.x >> 5) * B_ + b] = v[b]; }
  __syncthreads();
#pragma unroll
  for (int b = 0; b < B_; b++) {
    float t = 0.f;
#pragma unroll
    for (int w = 0; w < WARPS_; w++) t += red[w * B_ + b];
    v[b] = t;
  }
  __syncthreads();
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
#if defined(BAR_RELEASE_) && !defined(NBX_EMU)
    asm volatile("red.release.gpu.global.add.u32 [%0], 1;" :: "l"(bar) : "memory"); // the block's writes before it (bar.sync, then a cumulative release)
#else
    __threadfence();
    atomicAdd(bar, 1u);
#endif
#ifndef NBX_EMU
    const unsigned long long t0 = nbx_globaltimer();
    for (;;) {
      unsigned v; asm volatile("ld.acquire.gpu.global.u32 %0, [%1];" : "=r"(v) : "l"(bar) : "memory");
      if (v >= target) break;
      if (nbx_globaltimer() - t0 > 2000000000ull) { atomicOr(err, 1ull << 62); break; }
    }
#endif
#ifndef BAR_RELEASE_
    __threadfence();
#endif
  }
  __syncthreads();
}

/** A block's rows of a phase: [r0, r1) of n, split evenly over the grid. */
__device__ __forceinline__ void block_rows(int n, int& r0, int& r1) {
  r0 = (int)(((long long)n * blockIdx.x) / gridDim.x); r1 = (int)(((long long)n * (blockIdx.x + 1)) / gridDim.x);
}

/**
 * A phase's weight rows for this block: nA rows from A, then nB rows from B, each K elements in rb bytes (a multiple
 * of 128) of format fmt (0 the dtype, 1 int8, 2 int4 g128, 3 with zero points). Packed formats' scales: row v of A at
 * sA + v·sk floats (sB for B), an item's first at + kc·si, 4 (int8) or 8 bytes of them an item and row.
 */
struct Slice { const unsigned char* A; int nA; const unsigned char* B; int nB; int K; int rb; int fmt;
#ifdef QANY_
  const float* sA; const float* sB; int sk; int si;
  const float* zA; const float* zB; // zero points (format 3), laid out as the scales
#endif
};

/** The slice's format fields for format f and K elements a row. */
__device__ __forceinline__ void slice_format(Slice& z, int f, int K) {
  z.K = K; z.fmt = f;
  z.rb = f == 0 ? 2 * K : f == 1 ? K : K / 2;
#ifdef QANY_
  z.sk = f == 1 ? 1 : K >> 7; z.si = f >= 2 ? 2 : 0;
#endif
}
#ifdef QANY_
#define SCALES_(x) x
#else
#define SCALES_(x)
#endif

/** The weight rows phase ph (layer ph / 5, step ph % 5, or the lm_head after the layers) streams for this block. */
__device__ Slice phase_slice(int ph, const Net& nt) {
  const int l = ph / 5, st = ph - l * 5;
  Slice z; z.A = nullptr; z.nA = 0; z.B = nullptr; z.nB = 0; SCALES_(z.sA = nullptr; z.sB = nullptr; z.zA = nullptr; z.zB = nullptr;)
  slice_format(z, 0, H_);
  int r0, r1;
  if (l >= L_) { block_rows(V_, r0, r1); slice_format(z, FLM_, H_); z.A = nt.lm + (long long)r0 * z.rb; z.nA = r1 - r0; SCALES_(z.sA = nt.lms + (long long)r0 * z.sk; z.zA = nt.lmz + (long long)r0 * z.sk;) }
  else if (st == 0) { block_rows(QKV_, r0, r1); slice_format(z, FQKV_, H_); z.A = nt.layers[l].wqkv + (long long)r0 * z.rb; z.nA = r1 - r0; SCALES_(z.sA = nt.layers[l].sqkv + (long long)r0 * z.sk; z.zA = nt.layers[l].zqkv + (long long)r0 * z.sk;) }
  else if (st == 2) { block_rows(H_, r0, r1); slice_format(z, FO_, NH_ * D_); z.A = nt.layers[l].wo + (long long)r0 * z.rb; z.nA = r1 - r0; SCALES_(z.sA = nt.layers[l].so + (long long)r0 * z.sk; z.zA = nt.layers[l].zo + (long long)r0 * z.sk;) }
  else if (st == 3) {
    block_rows(I_, r0, r1); slice_format(z, FGU_, H_);
    z.A = nt.layers[l].wgu + (long long)r0 * z.rb; z.nA = r1 - r0; z.B = nt.layers[l].wgu + ((long long)I_ + r0) * z.rb; z.nB = r1 - r0;
    SCALES_(z.sA = nt.layers[l].sgu + (long long)r0 * z.sk; z.sB = nt.layers[l].sgu + ((long long)I_ + r0) * z.sk;
      z.zA = nt.layers[l].zgu + (long long)r0 * z.sk; z.zB = nt.layers[l].zgu + ((long long)I_ + r0) * z.sk;)
  } else if (st == 4) { block_rows(H_, r0, r1); slice_format(z, FDN_, I_); z.A = nt.layers[l].wdown + (long long)r0 * z.rb; z.nA = r1 - r0; SCALES_(z.sA = nt.layers[l].sdown + (long long)r0 * z.sk; z.zA = nt.layers[l].zdown + (long long)r0 * z.sk;) }
  return z;
}

// The products run on tensor cores (mma.sync m16n8k16, float32 accumulators): an item is 16 rows × 128 bytes of a
// slice (tiles of 16 rows: the A rows' tiles, then the B rows'), the A operand, and the sequences' x vectors the B
// operand, sequence n in column n (columns past the batch repeat sequence 0 and are dropped), so a batch of up to eight
// streams the weights once, as batch 1 does. A lane takes two 16-byte pieces of its rows g and g + 8 (pieces tq and
// 4 + tq), so the weights are read from shared memory as 16-byte pieces, no ldmatrix; the sum over k does not care
// which k a fragment slot holds as long as A and B agree, so each format feeds the slots in the order its bytes unpack.
// A warp's items are a contiguous run of the slice's (tile, 128-byte chunk) pairs.
__device__ __forceinline__ int tiles_of(int n) { return (n + 15) >> 4; }
__device__ __forceinline__ void warp_share(const Slice& z, int& u0, int& u1) {
  const int U = (tiles_of(z.nA) + tiles_of(z.nB)) * (z.rb >> 7), up = (U + WARPS_ - 1) / WARPS_;
  u0 = (threadIdx.x >> 5) * up; u1 = u0 + up < U ? u0 + up : U;
}
/** Tile t of a slice: its first row's address, its rows (≤ 16) and its first row's scales. */
__device__ __forceinline__ const unsigned char* tile_at(const Slice& z, int t, int& valid, const float*& sc, bool zeros) {
  const int tA = tiles_of(z.nA);
  if (t < tA) { valid = z.nA - 16 * t < 16 ? z.nA - 16 * t : 16; SCALES_(sc = (zeros ? z.zA : z.sA) + (long long)(16 * t) * z.sk;) return z.A + (long long)(16 * t) * z.rb; }
  valid = z.nB - 16 * (t - tA) < 16 ? z.nB - 16 * (t - tA) : 16; SCALES_(sc = (zeros ? z.zB : z.sB) + (long long)(16 * (t - tA)) * z.sk;) return z.B + (long long)(16 * (t - tA)) * z.rb;
}

/**
 * The load side of a warp's weight ring: the next item to load over the launch's phases. Item q of the
 * stream goes to stage q mod NS_ of the warp's ring (16 rows × 128 bytes; a row's 16-byte pieces swizzled so
 * a quarter-warp's reads of rows g and g + 1 hit distinct banks; then, packed formats, the rows' scales of the item,
 * 8 bytes a row), one cp.async group per item. Lane i loads pieces i + 32j (j < 4): row i/8 + 4j, piece i mod 8, so
 * its source advances by 4 rows per piece and 128 bytes per item, and its destination is fixed within a stage; lanes
 * 0-15 load the scales of rows 0-15. A lane reads pieces other lanes loaded, so the consumer waits for its groups and
 * then __syncwarp()s.
 */
struct Loader {
  int ph, ph1, u, u1, t, kc;
  int rb;                   // the slice's row bytes (its other fields are recomputed at a tile's start: fewer live registers)
#ifdef QANY_
  int fmt, si;
#endif
  const unsigned char* src; // this lane's first piece of the next item
  unsigned vmask;           // bit j: piece j's row is inside the tile; bit 4: the lane's scale row is
#ifdef QANY_
  const float* ssrc;        // this lane's row's scales of the next item (lanes 0-15, packed formats), zero points (lanes 16-31, format 3)
#endif
};

/** The loader at tile t, chunk kc of its slice. */
__device__ __forceinline__ void loader_tile(Loader& ld, const Slice& z) {
  const int lane = threadIdx.x & 31, r = lane >> 3;
  int valid; const float* sc = nullptr; const unsigned char* tile = tile_at(z, ld.t, valid, sc, lane >= 16); // lanes 16-31: the zero points (format 3)
  ld.src = tile + (long long)r * z.rb + ld.kc * 128 + (lane & 7) * 16;
  ld.vmask = (r < valid ? 1u : 0u) | (r + 4 < valid ? 2u : 0u) | (r + 8 < valid ? 4u : 0u) | (r + 12 < valid ? 8u : 0u);
#ifdef QANY_
  if ((lane & 15) < valid && (lane < 16 || z.fmt == 3)) ld.vmask |= 16u;
  ld.ssrc = sc + (long long)(lane & 15) * z.sk + ld.kc * z.si;
#else
  (void)sc;
#endif
}

/** Points the loader at the first phase ≥ ph (before ph1) with items for this warp. */
__device__ void loader_seek(Loader& ld, int ph, const Net& nt) {
  for (; ph < ld.ph1; ph++) {
    if (ph < 5 * L_ && ph % 5 == 1) continue; // attention: no weights
    const Slice z = phase_slice(ph, nt);
    int u0, u1; warp_share(z, u0, u1);
    if (u0 >= u1) continue;
    const int kcs = z.rb >> 7;
    ld.ph = ph; ld.u = u0; ld.u1 = u1; ld.t = u0 / kcs; ld.kc = u0 - ld.t * kcs; ld.rb = z.rb;
#ifdef QANY_
    ld.fmt = z.fmt; ld.si = z.si;
#endif
    loader_tile(ld, z);
    return;
  }
  ld.ph = ld.ph1;
}

/** Loads the stream's next item into the stage at stg (lst: this lane's swizzled place in it) as one cp.async group; an empty group past the stream's end. */
__device__ __forceinline__ void loader_issue(Loader& ld, unsigned char* stg, int lst, const Net& nt) {
  if (ld.ph < ld.ph1) {
    const long long r4 = 4ll * ld.rb;
    unsigned char* st = stg + lst;
#pragma unroll
    for (int j = 0; j < 4; j++) if (ld.vmask & (1u << j)) CP16(st + 512 * j, ld.src + j * r4);
#ifdef QANY_
    if (ld.fmt != 0 && (ld.vmask & 16u)) {
      unsigned char* sd = stg + 2048 + (threadIdx.x & 31) * 8; // lanes 16-31: the zero points, 128 bytes on
      if (ld.fmt != 1) CP8(sd, ld.ssrc); else CP4(sd, ld.ssrc);
    }
    ld.ssrc += ld.si;
#endif
    ld.src += 128;
    if (++ld.u == ld.u1) loader_seek(ld, ld.ph + 1, nt);
    else if (++ld.kc == (ld.rb >> 7)) { ld.kc = 0; ld.t++; loader_tile(ld, phase_slice(ld.ph, nt)); }
  }
  CP_COMMIT();
}

/**
 * Asks L2 for this block's weight rows of phase q (the first L2CAP_ bytes of them), so that the ring's loads of
 * them, issued later as items are consumed, hit L2 instead of waiting on HBM: the ring holds only NS_ items a warp,
 * less than a gap between two phases' products lasts at full bandwidth. sm_90's bulk prefetch: one instruction a
 * contiguous run, no registers and no data back to the SM. Elsewhere (and in the emulator) nothing.
 */
#if defined(L2AHEAD_) && !defined(NBX_EMU) && defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
__device__ void prefetch_phase(int q, const Net& nt) {
  if (q < 5 * L_ && q % 5 == 1) return; // attention: no weights
  const Slice y = phase_slice(q, nt);
  long long left = L2CAP_;
  for (int i = 0; i < 2; i++) {
    const unsigned char* a = i == 0 ? y.A : y.B;
    long long bytes = (long long)(i == 0 ? y.nA : y.nB) * y.rb;
    if (bytes > left) bytes = left;
    left -= bytes;
    for (long long o = 0; o < bytes; o += 65536) {
      const unsigned sz = (unsigned)(bytes - o < 65536 ? bytes - o : 65536);
      asm volatile("cp.async.bulk.prefetch.L2.global [%0], %1;" :: "l"(a + o), "r"(sz) : "memory");
    }
  }
}
#define PREFETCH_L2_ 1
#endif

#ifdef NBX_EMU
__device__ __forceinline__ void mma16816(float (&c)[4], unsigned a0, unsigned a1, unsigned a2, unsigned a3, unsigned b0, unsigned b1) {
  const unsigned a[4] = { a0, a1, a2, a3 }; emu_mma16816(c, a, b0, b1, ${bf});
}
#else
__device__ __forceinline__ void mma16816(float (&c)[4], unsigned a0, unsigned a1, unsigned a2, unsigned a3, unsigned b0, unsigned b1) {
  asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.${bf ? 'bf16.bf16' : 'f16.f16'}.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"
    : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3]) : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
}
#endif

#ifdef Q4X_
#define Q4X_ON_ 1
#else
#define Q4X_ON_ 0
#endif
#ifdef QANY_
// Packed weights unpack to exact small integers in the dtype (the MMA's A operand), scaled after the sums.
/**
 * (u & m) | c as one LOP3: written in C, ptxas emits two (an AND with m, then an OR with c: one 32-bit immediate an
 * instruction), and the unpacking is most of the packed products' instructions (BENCHMARKS.md, twelfth session).
 */
__device__ __forceinline__ unsigned andor(unsigned u, unsigned m, unsigned c) {
#ifdef NBX_EMU
  return (u & m) | c;
#else
  unsigned d; asm("lop3.b32 %0, %1, %2, %3, 0xEA;" : "=r"(d) : "r"(u), "r"(m), "r"(c)); return d;
#endif
}
/** Two halves of the dtype less (c, c), exact for the small integers here: one fma.rn.{bf16,f16}x2 (a · 1 + (−c)). */
__device__ __forceinline__ unsigned sub2(unsigned a, unsigned negc2) {
#ifdef NBX_EMU
  const T_ lo = (T_)(a & 0xffffu), hi = (T_)(a >> 16), cl = (T_)(negc2 & 0xffffu);
  const float l = LD(&lo, 0) + LD(&cl, 0), h = LD(&hi, 0) + LD(&cl, 0);
  return (unsigned)(unsigned short)TOS(l) | ((unsigned)(unsigned short)TOS(h) << 16);
#else
  unsigned d;
  asm("fma.rn.${bf ? 'bf16x2' : 'f16x2'} %0, %1, %2, %3;" : "=r"(d) : "r"(a), "r"(${bf ? '0x3f803f80u' : '0x3c003c00u'}), "r"(negc2));
  return d;
#endif
}
#endif
#ifdef Q4_
/** Nibbles 0 and 4 of u (bits 0-3 and 16-19) as q − 8 in two halves of the dtype: the exponent's magic 128 (bf16) or 1024 (f16) carries q, less 136 or 1032. */
template <int F> __device__ __forceinline__ unsigned q4pair(unsigned u) {
  const unsigned m = andor(u, 0x000f000fu, ${bf ? '0x43004300u' : '0x64006400u'});
#ifdef Q4X_
  if (F == 2) return m; // M + q as it is: M + 8 times the group's x sum comes off after the MMAs
#endif
  return sub2(m, F == 2 ? ${bf ? '0xc308c308u' : '0xe408e408u'} : ${bf ? '0xc300c300u' : '0xe400e400u'}); // format 3: q itself
}
#endif
#ifdef Q8_
__device__ __forceinline__ unsigned prmt(unsigned a, unsigned b, unsigned sel) {
#ifdef NBX_EMU
  const unsigned long long v = ((unsigned long long)b << 32) | a; unsigned r = 0;
  for (int i = 0; i < 4; i++) r |= (unsigned)((v >> (8 * ((sel >> (4 * i)) & 7u))) & 255u) << (8 * i);
  return r;
#else
  return __byte_perm(a, b, sel);
#endif
}
/** Bytes 0 and 1 (hi: 2 and 3) of w as signed int8 values in two halves of the dtype (exact: |q| ≤ 128). */
__device__ __forceinline__ unsigned q8pair(unsigned w, bool hi) {
${bf ? `  const unsigned x = w ^ 0x80808080u, t = hi ? 2u : 0u; // q + 128 (once a word: both calls compute it)
  // byte t and t + 1 each under float32's exponent of 2^23 (one PRMT), less 2^23 + 128 (exact), the two results' high
  // halves (one PRMT)
  const float f0 = __uint_as_float(prmt(x, 0x4b000000u, 0x7540u | t)) - 8388736.f, f1 = __uint_as_float(prmt(x, 0x4b000000u, 0x7541u | t)) - 8388736.f;
  return prmt(__float_as_uint(f0), __float_as_uint(f1), 0x7632u);`
    : `  const unsigned x = (hi ? w >> 16 : w) ^ 0x8080u; // q + 128
  return sub2((x & 0xffu) | ((x & 0xff00u) << 8) | 0x64006400u, 0xe480e480u); // 1024 + (q + 128) − 1152`}
}
#endif

/**
 * One item's products into acc (rows g and g + 8, sequences 2·tq and 2·tq + 1), weights at stage st (this lane's
 * pieces at off0 / off1, row g + 8 1024 bytes on), x of this lane's sequence from xp (the item's first column + this
 * lane's first). F: the slice's format. The dtype: 64 columns, a piece 8 of them, 4 MMAs. int8: 128 columns, a
 * piece 16, each 32-bit word four k in order; 8 MMAs, the item's sums scaled by the row's scale. int4 (group 128): 256
 * columns, a piece 32 (pieces tq: group 2·kc, pieces 4 + tq: 2·kc + 1), each word's nibbles paired as (k, k + 4) with
 * x permuted to match; 16 MMAs, each group's sums scaled by the row's scale of the group.
 */
template <int F> __device__ __forceinline__ void item_products(float (&acc)[4], const unsigned char* st, int off0, int off1, const T_* xp, int g, int tq, const float* xg, int xg1) {
  const uint4 w0 = *reinterpret_cast<const uint4*>(st + off0), v0 = *reinterpret_cast<const uint4*>(st + off0 + 1024);
  const uint4 w1 = *reinterpret_cast<const uint4*>(st + off1), v1 = *reinterpret_cast<const uint4*>(st + off1 + 1024);
  if constexpr (F == 0) {
    const uint4 x0 = *reinterpret_cast<const uint4*>(xp), x1 = *reinterpret_cast<const uint4*>(xp + 32);
    mma16816(acc, w0.x, v0.x, w0.y, v0.y, x0.x, x0.y);
    mma16816(acc, w0.z, v0.z, w0.w, v0.w, x0.z, x0.w);
    mma16816(acc, w1.x, v1.x, w1.y, v1.y, x1.x, x1.y);
    mma16816(acc, w1.z, v1.z, w1.w, v1.w, x1.z, x1.w);
  }
#ifdef Q8_
  if constexpr (F == 1) {
    const float* sc = reinterpret_cast<const float*>(st + 2048);
    float a[4] = { 0.f, 0.f, 0.f, 0.f };
#pragma unroll
    for (int p = 0; p < 2; p++) {
      const uint4 w = p ? w1 : w0, v = p ? v1 : v0;
      const uint4 xa = *reinterpret_cast<const uint4*>(xp + 64 * p), xb = *reinterpret_cast<const uint4*>(xp + 64 * p + 8);
      mma16816(a, q8pair(w.x, false), q8pair(v.x, false), q8pair(w.x, true), q8pair(v.x, true), xa.x, xa.y);
      mma16816(a, q8pair(w.y, false), q8pair(v.y, false), q8pair(w.y, true), q8pair(v.y, true), xa.z, xa.w);
      mma16816(a, q8pair(w.z, false), q8pair(v.z, false), q8pair(w.z, true), q8pair(v.z, true), xb.x, xb.y);
      mma16816(a, q8pair(w.w, false), q8pair(v.w, false), q8pair(w.w, true), q8pair(v.w, true), xb.z, xb.w);
    }
    const float s0 = sc[2 * g], s1 = sc[2 * (g + 8)];
    acc[0] = fmaf(s0, a[0], acc[0]); acc[1] = fmaf(s0, a[1], acc[1]); acc[2] = fmaf(s1, a[2], acc[2]); acc[3] = fmaf(s1, a[3], acc[3]);
  }
#endif
#ifdef Q4_
  if constexpr (F == 2 || F == 3) {
    const float* sc = reinterpret_cast<const float*>(st + 2048);
#pragma unroll
    for (int p = 0; p < 2; p++) {
      const uint4 w = p ? w1 : w0, v = p ? v1 : v0;
      const unsigned ww[4] = { w.x, w.y, w.z, w.w }, vv[4] = { v.x, v.y, v.z, v.w };
      float a[4] = { 0.f, 0.f, 0.f, 0.f };
#pragma unroll
      for (int j = 0; j < 4; j++) {
#ifdef Q4P_
        // x of k 0-7 of the word, permuted to the pairs (k, k + 4) and its 16 bytes swizzled in shared memory (block_gemv)
        const uint4 X = *reinterpret_cast<const uint4*>(xp + 128 * p + 8 * (j ^ (tq & 2)));
        const unsigned x04 = X.x, x15 = X.y, x26 = X.z, x37 = X.w;
#else
        const uint4 X = *reinterpret_cast<const uint4*>(xp + 128 * p + 8 * j); // x of k 0-7 of the word: pairs (k, k + 4)
        const unsigned x04 = (X.x & 0xffffu) | (X.z << 16), x15 = (X.x >> 16) | (X.z & 0xffff0000u);
        const unsigned x26 = (X.y & 0xffffu) | (X.w << 16), x37 = (X.y >> 16) | (X.w & 0xffff0000u);
#endif
        const unsigned wj = ww[j], vj = vv[j];
        mma16816(a, q4pair<F>(wj), q4pair<F>(vj), q4pair<F>(wj >> 4), q4pair<F>(vj >> 4), x04, x15);
        mma16816(a, q4pair<F>(wj >> 8), q4pair<F>(vj >> 8), q4pair<F>(wj >> 12), q4pair<F>(vj >> 12), x26, x37);
      }
      const float s0 = sc[2 * g + p], s1 = sc[2 * (g + 8) + p];
#ifdef QXS_
      // Σ (q − z)·x = Σ v·x − (z + v − q)·Σ x over the group, v the value the MMAs took for q (xg: the group sums of
      // sequence 2·tq, xg1 · XG_ on those of 2·tq + 1): format 3 subtracts its zero point; format 2 under Q4X_ took M + q,
      // so M + 8 comes off
      if (F == 3 || (F == 2 && Q4X_ON_)) {
        const float z0 = F == 3 ? sc[32 + 2 * g + p] : ${bf ? '136.f' : '1032.f'}, z1 = F == 3 ? sc[32 + 2 * (g + 8) + p] : ${bf ? '136.f' : '1032.f'};
        const float X0 = xg[p], X1 = xg[xg1 * XG_ + p];
        a[0] = fmaf(-z0, X0, a[0]); a[1] = fmaf(-z0, X1, a[1]); a[2] = fmaf(-z1, X0, a[2]); a[3] = fmaf(-z1, X1, a[3]);
      }
#endif
      acc[0] = fmaf(s0, a[0], acc[0]); acc[1] = fmaf(s0, a[1], acc[1]); acc[2] = fmaf(s1, a[2], acc[2]); acc[3] = fmaf(s1, a[3], acc[3]);
    }
  }
#endif
}

/**
 * Σ_k W_v[k]·x_b[k] for the block's rows v of a phase (the slice's A rows, then its B rows) and each sequence
 * b, x_b in shared memory (row b of xs, XSTR_ apart), the weights from the warp's ring (cs: the stage of the
 * next item, which the loader refills right after it is consumed); results in out[v · B_ + b]. A warp's sums
 * of each tile it touches go to part[warp][tile − its first tile][row][b] and are summed over warps in warp
 * order (the same bits every run).
 */
template <int F> __device__ void gemv_items(const Slice& z, const T_* xs, float* part, unsigned char* ringw, int& cs, Loader& ld, const Net& nt, const float* xsum) {
  constexpr int CPI = F == 0 ? 64 : F == 1 ? 128 : 256; // columns an item
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, g = lane >> 2, tq = lane & 3;
  const int kcs = z.rb >> 7;
  int u0, u1; warp_share(z, u0, u1);
  const int t0 = u0 / kcs;
  int t = t0, kc = u0 - t0 * kcs;
  float acc[4] = { 0.f, 0.f, 0.f, 0.f };
  const int sw = (g & 1) << 2, off0 = g * 128 + ((tq ^ sw) << 4), off1 = g * 128 + (((4 + tq) ^ sw) << 4);
  const int lst = (lane >> 3) * 128 + (((lane & 7) ^ (((lane >> 3) & 1) << 2)) << 4); // this lane's place in a stage for the loader
  const T_* xrow = xs + (g < B_ ? g : 0) * XSTR_ + (CPI / 8) * tq; // this lane's columns of the B operand: sequence g
  const T_* xp = xrow + kc * CPI;
  for (int u = u0; u < u1; u++) {
    CP_WAIT();
    __syncwarp();
    unsigned char* st = ringw + cs * STG_;
#ifdef QXS_
    // the item's groups' x sums of sequences 2·tq and 2·tq + 1 (XG_ · the second's distance on); columns past the batch
    // read sequence 0's (they are dropped)
    const float* xg = F >= 2 ? xsum + (2 * tq < B_ ? 2 * tq : 0) * XG_ + 2 * kc : nullptr;
    const int xg1 = (2 * tq + 1 < B_ ? 2 * tq + 1 : 0) - (2 * tq < B_ ? 2 * tq : 0);
#else
    const float* xg = nullptr; const int xg1 = 0; (void)xsum;
#endif
    item_products<F>(acc, st, off0, off1, xp, g, tq, xg, xg1);
    __syncwarp();
    loader_issue(ld, st, lst, nt);
    cs = cs + 1 == NS_ ? 0 : cs + 1;
    xp += CPI;
    if (++kc == kcs || u + 1 == u1) {
      // this lane's sums: rows g and g + 8, sequences 2·tq and 2·tq + 1
      float* pt = part + (warp * MAXT_ + (t - t0)) * 16 * B_;
      if (2 * tq < B_) { pt[g * B_ + 2 * tq] = acc[0]; pt[(g + 8) * B_ + 2 * tq] = acc[2]; }
      if (2 * tq + 1 < B_) { pt[g * B_ + 2 * tq + 1] = acc[1]; pt[(g + 8) * B_ + 2 * tq + 1] = acc[3]; }
      acc[0] = acc[1] = acc[2] = acc[3] = 0.f;
      if (kc == kcs) { kc = 0; t++; xp = xrow; }
    }
  }
}

__device__ void block_gemv(const Slice& z, const T_* xs, float* part, float* out, unsigned char* ringw, int& cs, Loader& ld,
    const Net& nt, unsigned long long* tm) {
#ifndef MARK_AT_COPY_
  if (tm && threadIdx.x == 0) tm[gridDim.x] = nbx_globaltimer(); // trace: input ready
#endif
#ifdef Q8_
  if (z.fmt == 1) gemv_items<1>(z, xs, part, ringw, cs, ld, nt, nullptr); else
#endif
#ifdef Q4P_
  if (z.fmt >= 2) {
    // each 8 columns of x (a 16-byte chunk c) as the pairs (k, k + 4) the int4 words unpack to, stored at chunk c ^ 2 where
    // bit 3 of c is set: lane tq reads chunks 4·tq + j, which for tq and tq + 2 fall 128 bytes apart, in the same banks
    // (Nsight Compute counted 44% excess shared wavefronts); a chunk and its partner are one thread's (x is this phase's alone)
    for (int e = threadIdx.x; e < B_ * (z.K >> 3); e += THREADS_) {
      const int b = e / (z.K >> 3), c = e - b * (z.K >> 3);
      if ((c & 10) == 10) continue; // bits 3 and 1 set: its partner c ^ 2 moves it
      uint4* row = reinterpret_cast<uint4*>(const_cast<T_*>(xs) + b * XSTR_);
      const int c2 = c & 8 ? c ^ 2 : c;
      const uint4 X = row[c], X2 = row[c2];
      uint4 Y; Y.x = (X.x & 0xffffu) | (X.z << 16); Y.y = (X.x >> 16) | (X.z & 0xffff0000u); Y.z = (X.y & 0xffffu) | (X.w << 16); Y.w = (X.y >> 16) | (X.w & 0xffff0000u);
      uint4 Y2; Y2.x = (X2.x & 0xffffu) | (X2.z << 16); Y2.y = (X2.x >> 16) | (X2.z & 0xffff0000u); Y2.z = (X2.y & 0xffffu) | (X2.w << 16); Y2.w = (X2.y >> 16) | (X2.w & 0xffff0000u);
      row[c2] = Y;
      if (c2 != c) row[c] = Y2;
    }
    __syncthreads();
  }
#endif
#ifdef QXS_
  if (z.fmt == 3 || (z.fmt == 2 && Q4X_ON_)) {
    // each sequence's sums of x over the groups of 128 columns (the zero points' term), a warp a (sequence, group)
    float* xsum = reinterpret_cast<float*>(reinterpret_cast<unsigned char*>(const_cast<T_*>(xs)) + XSUM_OFF_);
    const int G = z.K >> 7, lane = threadIdx.x & 31;
    for (int e = threadIdx.x >> 5; e < B_ * G; e += WARPS_) {
      const int b = e / G, q = e - b * G;
      const T_* xr = xs + b * XSTR_ + q * 128 + 4 * lane;
      float v = LD(xr, 0) + LD(xr, 1) + LD(xr, 2) + LD(xr, 3);
      v = warp_sum(v);
      if (lane == 0) xsum[b * XG_ + q] = v;
    }
    __syncthreads();
    if (z.fmt == 3) gemv_items<3>(z, xs, part, ringw, cs, ld, nt, xsum); else gemv_items<2>(z, xs, part, ringw, cs, ld, nt, xsum);
  } else
#endif
#ifdef Q4_
  if (z.fmt == 2) gemv_items<2>(z, xs, part, ringw, cs, ld, nt, nullptr); else
#endif
  gemv_items<0>(z, xs, part, ringw, cs, ld, nt, nullptr);
  __syncthreads();
  if (tm && threadIdx.x == 0) tm[2 * gridDim.x] = nbx_globaltimer(); // trace: products done
  const int kcs = z.rb >> 7, tA = tiles_of(z.nA), rows = z.nA + z.nB;
  const int up = ((tA + tiles_of(z.nB)) * kcs + WARPS_ - 1) / WARPS_;
  for (int e = threadIdx.x; e < rows * B_; e += THREADS_) {
    const int v = e / B_, b = e - v * B_;
    const int T = v < z.nA ? v >> 4 : tA + ((v - z.nA) >> 4), rr = v < z.nA ? v & 15 : (v - z.nA) & 15;
    const int wlo = (T * kcs) / up, whi = ((T + 1) * kcs - 1) / up;
    float sum = 0.f;
    for (int w = wlo; w <= whi && w < WARPS_; w++) sum += part[((w * MAXT_ + (T - (w * up) / kcs)) * 16 + rr) * B_ + b];
    out[e] = sum;
  }
  __syncthreads();
}

/**
 * Row b of xs = row b of a B_-row input of K values (K a multiple of 8): row b at emb[b] (fromEmb) or base + b·K.
 * Not cp.async: its groups complete in order, so waiting for x would also wait for the weight ring's loads in
 * flight and leave the ring empty until then (the H200's phase trace had the inputs 1.5-4 times longer). On sm_90
 * one thread issues a bulk copy a row (the TMA engine: no registers, one round trip, its own barrier xbar, whose
 * phase parity xph flips at every use); elsewhere each thread's 16-byte pieces are loaded SR_ at a time before any
 * is stored (more spill).
 */
#if !defined(NBX_EMU) && !defined(NBX_NO_BULK_ROWS_) && defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
#define BULK_ROWS_ 1
#endif
#ifdef BULK_ROWS_
/**
 * Thread 0 opens a group of bulk copies of BYTES in all on the barrier BAR: ordinary loads and stores (the
 * generic proxy) before the copies (the async proxy) first, the block's earlier use of the destination and the other
 * blocks' stores acquired at the grid barrier.
 */
__device__ __forceinline__ void bulk_expect(unsigned bar, int bytes) {
  asm volatile("fence.proxy.async;" ::: "memory");
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" :: "r"(bar), "r"(bytes) : "memory");
}
__device__ __forceinline__ void bulk_copy(void* dst, const void* src, int bytes, unsigned bar) {
  asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];"
    :: "r"((unsigned)__cvta_generic_to_shared(dst)), "l"(src), "r"(bytes), "r"(bar) : "memory");
}
/** Every thread waits for the group on the barrier bar (phase parity xph, flipped for its next use). */
__device__ __forceinline__ void bulk_wait(unsigned bar, unsigned& xph) {
  unsigned done = 0;
  while (!done) {
    asm volatile("{ .reg .pred p; mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2; selp.u32 %0, 1, 0, p; }" : "=r"(done) : "r"(bar), "r"(xph) : "memory");
  }
  xph ^= 1u;
}
#endif
#define SR_ 2
#ifdef MARK_AT_COPY_
__shared__ unsigned long long* nbx_tm_; // the phase's trace marks (thread 0 sets and reads it)
#endif
__device__ void stage_rows(const T_* const* emb, const T_* base, bool fromEmb, int K, T_* xs, unsigned long long* xbar, unsigned& xph) {
#ifdef BULK_ROWS_
  const unsigned bar = (unsigned)__cvta_generic_to_shared(xbar);
  if (threadIdx.x == 0) {
    // ordinary loads and stores (the generic proxy) before the copies (the async proxy): the block's earlier use of
    // xs, and the other blocks' stores of x, acquired at the grid barrier
    asm volatile("fence.proxy.async;" ::: "memory");
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" :: "r"(bar), "r"(B_ * K * 2) : "memory");
    for (int b = 0; b < B_; b++) {
      const T_* src = fromEmb ? emb[b] : base + (long long)b * K;
      asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];"
        :: "r"((unsigned)__cvta_generic_to_shared(xs + b * XSTR_)), "l"(src), "r"(K * 2), "r"(bar) : "memory");
    }
  }
  bulk_wait(bar, xph);
#else
  (void)xbar; (void)xph;
  const int k8 = K >> 3, n = B_ * k8;
  for (int e0 = threadIdx.x; e0 < n; e0 += SR_ * THREADS_) {
    uint4 v[SR_];
#pragma unroll
    for (int u = 0; u < SR_; u++) {
      const int e = e0 + u * THREADS_, b = e / k8, j = (e - b * k8) * 8;
      if (e < n) v[u] = ldcg4((fromEmb ? emb[b] : base + (long long)b * K) + j);
    }
#pragma unroll
    for (int u = 0; u < SR_; u++) {
      const int e = e0 + u * THREADS_, b = e / k8, j = (e - b * k8) * 8;
      if (e < n) *reinterpret_cast<uint4*>(xs + b * XSTR_ + j) = v[u];
    }
  }
#endif
#ifdef MARK_AT_COPY_
  if (nbx_tm_ && threadIdx.x == 0) nbx_tm_[gridDim.x] = nbx_globaltimer(); // the mark "input ready" moved here: the copy alone
#endif
  __syncthreads();
}

/**
 * Row b of xs = RMSNorm(x_b)·w rounded to the dtype, x_b sequence b's residual (res + b·H_) or, fromEmb, its
 * embedding row (emb[b]): x staged in xs first (held in registers, B_ rows spilled), then each thread's elements'
 * sums of squares, normalized in place.
 */
#if THREADS_ % B_ == 0 && !defined(NBX_NORM_ROWS_)
// THREADS_ / B_ threads a row (whole warps), each with 4-element pieces of it: per thread a few 8-byte loads and one
// warp sum, not every row's elements and a block sum per row (at batch 8 the arithmetic alone took microseconds)
#define TPR_ (THREADS_ / B_)
#define NPC_ ((H_ / 4 + TPR_ - 1) / TPR_)
__device__ __forceinline__ float lo16(unsigned u) { const T_ h = (T_)(u & 0xffffu); return LD(&h, 0); }
__device__ __forceinline__ float hi16(unsigned u) { const T_ h = (T_)(u >> 16); return LD(&h, 0); }
__device__ __forceinline__ unsigned pack16(float a, float b) { return (unsigned)(unsigned short)TOS(a) | ((unsigned)(unsigned short)TOS(b) << 16); }
__device__ void norm_into(const T_* const* emb, const T_* res, bool fromEmb, const T_* w, float eps, T_* xs, float* red, unsigned long long* xbar, unsigned& xph) {
  const int b = threadIdx.x / TPR_, t = threadIdx.x - b * TPR_;
  uint2 wq[NPC_];
#pragma unroll
  for (int c = 0; c < NPC_; c++) { const int k = t + c * TPR_; if (k < H_ / 4) wq[c] = __ldg(reinterpret_cast<const uint2*>(w) + k); }
  stage_rows(emb, res, fromEmb, H_, xs, xbar, xph);
  uint2* xr = reinterpret_cast<uint2*>(xs + b * XSTR_);
  float ss = 0.f;
#pragma unroll
  for (int c = 0; c < NPC_; c++) {
    const int k = t + c * TPR_;
    if (k < H_ / 4) { const uint2 u = xr[k]; const float a = lo16(u.x), e = hi16(u.x), f = lo16(u.y), g = hi16(u.y); ss += a * a; ss += e * e; ss += f * f; ss += g * g; }
  }
  ss = warp_sum(ss);
  if ((threadIdx.x & 31) == 0) red[threadIdx.x >> 5] = ss;
  __syncthreads();
  ss = 0.f;
#pragma unroll
  for (int k = 0; k < TPR_ / 32; k++) ss += red[b * (TPR_ / 32) + k];
  const float rstd = 1.f / sqrtf(ss / (float)H_ + eps);
#pragma unroll
  for (int c = 0; c < NPC_; c++) {
    const int k = t + c * TPR_;
    if (k < H_ / 4) {
      const uint2 u = xr[k], v = wq[c];
      uint2 o; o.x = pack16(lo16(u.x) * rstd * lo16(v.x), hi16(u.x) * rstd * hi16(v.x)); o.y = pack16(lo16(u.y) * rstd * lo16(v.y), hi16(u.y) * rstd * hi16(v.y));
      xr[k] = o;
    }
  }
  __syncthreads();
}
#else
__device__ void norm_into(const T_* const* emb, const T_* res, bool fromEmb, const T_* w, float eps, T_* xs, float* red, unsigned long long* xbar, unsigned& xph) {
  float wv[NPT_], ss[B_];
#pragma unroll
  for (int i = 0; i < NPT_; i++) { const int j = threadIdx.x + i * THREADS_; wv[i] = j < H_ ? LD(w, j) : 0.f; }
  stage_rows(emb, res, fromEmb, H_, xs, xbar, xph);
#pragma unroll
  for (int b = 0; b < B_; b++) {
    ss[b] = 0.f;
#pragma unroll
    for (int i = 0; i < NPT_; i++) { const int j = threadIdx.x + i * THREADS_; if (j < H_) { const float v = LD(xs, b * XSTR_ + j); ss[b] += v * v; } }
  }
  block_sums(ss, red);
#pragma unroll
  for (int b = 0; b < B_; b++) {
    const float rstd = 1.f / sqrtf(ss[b] / (float)H_ + eps);
#pragma unroll
    for (int i = 0; i < NPT_; i++) { const int j = threadIdx.x + i * THREADS_; if (j < H_) xs[b * XSTR_ + j] = TOS(LD(xs, b * XSTR_ + j) * rstd * wv[i]); }
  }
  __syncthreads();
}
#endif

/** One element of the half-split RoPE of a D-vector (rotary's arithmetic: x·cos rounded, then fma with rotate_half(x)·sin). */
__device__ __forceinline__ float rope_at(const T_* x, int j, const T_* c, const T_* s) {
  if (j >= RD_) return ldcgv(x, j);
  const int half = RD_ / 2;
  const float xv = ldcgv(x, j);
  const float rh = j < half ? -ldcgv(x, j + half) : ldcgv(x, j - half);
  const float a = RND(__fmul_rn(xv, LD(c, j)));
  return RND(fmaf(rh, LD(s, j), a));
}

/**
 * Part sp of ASPLIT_ of sequence b's query heads h0 .. h0 + HPI_ − 1 (one KV group: each key and value is loaded
 * once for them all), cache positions [lo, hi) of [0, w] (the new key and value at w from shared memory), as
 * partial softmaxes (each head's maximum M, Σ exp(score − M) and Σ exp(score − M)·v) in patt / pml, merged over
 * the parts by merge_att. Splitting a head over blocks puts every block to work; two heads an item halve the
 * items where B_·NH_ would take the grid more than one round. qkv, c, s and notpad are sequence b's rows.
 */
__device__ void attention_heads(int b, int h0, int sp, const Layer& ly, const T_* qkv, const T_* c, const T_* s, int w, const unsigned char* notpad,
    float scale, float* patt, float* pml, float* sm) {
  const int g = h0 / (NH_ / NKV_);
  T_* const kcb = ly.kc + (long long)b * NKV_ * S_ * D_;
  T_* const vcb = ly.vc + (long long)b * NKV_ * S_ * D_;
  const int chunk = (w + ASPLIT_) / ASPLIT_, lo = sp * chunk, hi = lo + chunk < w + 1 ? lo + chunk : w + 1;
  const int stride = WARPS_ * KPW_;
  float* qf = sm; float* kf = sm + HPI_ * D_; float* vf = kf + D_;
  float* gm = vf + D_; float* gl = gm + HPI_ * stride; float* gacc = gl + HPI_ * stride; float* fac = gacc + stride * D_;
  for (int j = threadIdx.x; j < D_; j += THREADS_) {
#pragma unroll
    for (int hh = 0; hh < HPI_; hh++) qf[hh * D_ + j] = rope_at(qkv + (h0 + hh) * D_, j, c, s);
    const float kv = rope_at(qkv + (NH_ + g) * D_, j, c, s), vv = ldcgv(qkv, (NH_ + NKV_ + g) * D_ + j);
    kf[j] = kv; vf[j] = vv;
    if (h0 % (NH_ / NKV_) == 0 && sp == 0) { kcb[((long long)g * S_ + w) * D_ + j] = TOS(kv); vcb[((long long)g * S_ + w) * D_ + j] = TOS(vv); }
  }
  __syncthreads();
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, grp = lane / LG_, li = lane % LG_;
  float q[HPI_][8], m[HPI_], l[HPI_], acc[HPI_][8];
#pragma unroll
  for (int hh = 0; hh < HPI_; hh++) {
    m[hh] = -INFINITY; l[hh] = 0.f;
#pragma unroll
    for (int e = 0; e < 8; e++) { q[hh][e] = qf[hh * D_ + li * 8 + e]; acc[hh][e] = 0.f; }
  }
  const T_* kbase = kcb + (long long)g * S_ * D_ + li * 8;
  const T_* vbase = vcb + (long long)g * S_ * D_ + li * 8;
  for (int jb = lo + warp * KPW_; jb < hi; jb += stride * ATTU_) { // warp-uniform bounds: the shuffles below need every lane
    uint4 kr[ATTU_], vr[ATTU_];
#pragma unroll
    for (int i = 0; i < ATTU_; i++) {
      const int j = jb + grp + i * stride;
      kr[i].x = kr[i].y = kr[i].z = kr[i].w = 0u; vr[i] = kr[i];
      if (j < w && j < hi) { kr[i] = ldcg4(kbase + (long long)j * D_); vr[i] = ldcg4(vbase + (long long)j * D_); }
    }
#pragma unroll
    for (int i = 0; i < ATTU_; i++) {
      const int j = jb + grp + i * stride;
      float kx[8], vx[8];
      if (j == w) {
#pragma unroll
        for (int e = 0; e < 8; e++) { kx[e] = kf[li * 8 + e]; vx[e] = vf[li * 8 + e]; }
      } else { unpack8(kr[i], kx); unpack8(vr[i], vx); }
#pragma unroll
      for (int hh = 0; hh < HPI_; hh++) {
        float dsum = 0.f;
#pragma unroll
        for (int e = 0; e < 8; e++) dsum = fmaf(q[hh][e], kx[e], dsum);
#pragma unroll
        for (int o = LG_ / 2; o > 0; o >>= 1) dsum += __shfl_xor_sync(0xffffffffu, dsum, o);
        if (j < hi && notpad[j]) {
          const float sc = dsum * scale, mn = fmaxf(m[hh], sc), cor = __expf(m[hh] - mn), p = __expf(sc - mn);
          l[hh] = l[hh] * cor + p;
#pragma unroll
          for (int e = 0; e < 8; e++) acc[hh][e] = fmaf(p, vx[e], acc[hh][e] * cor);
          m[hh] = mn;
        }
      }
    }
  }
  const int gi = warp * KPW_ + grp;
  if (li == 0) {
#pragma unroll
    for (int hh = 0; hh < HPI_; hh++) { gm[hh * stride + gi] = m[hh]; gl[hh * stride + gi] = l[hh]; }
  }
  // each head's groups' partial softmaxes merged in turn (one gacc for all: shared memory is the ring's): each
  // group's factor once, then sums over groups per column
#pragma unroll
  for (int hh = 0; hh < HPI_; hh++) {
    const int item = (b * NH_ + h0 + hh) * ASPLIT_ + sp;
#pragma unroll
    for (int e = 0; e < 8; e++) gacc[gi * D_ + li * 8 + e] = acc[hh][e];
    __syncthreads();
    if (threadIdx.x < stride) {
      float M = -INFINITY;
      for (int q2 = 0; q2 < stride; q2++) M = fmaxf(M, gm[hh * stride + q2]);
      fac[threadIdx.x] = gm[hh * stride + threadIdx.x] == -INFINITY ? 0.f : __expf(gm[hh * stride + threadIdx.x] - M);
      if (threadIdx.x == 0) __stcg(pml + 2 * item, M);
    }
    __syncthreads();
    for (int j = threadIdx.x; j < D_; j += THREADS_) {
      float den = 0.f, num = 0.f;
      for (int q2 = 0; q2 < stride; q2++) { den = fmaf(gl[hh * stride + q2], fac[q2], den); num = fmaf(gacc[q2 * D_ + j], fac[q2], num); }
#if ASPLIT_ == 1
      // the head's whole softmax: its output in the dtype, as merge_att would give it, copied by o_proj's blocks as is
      stcgv(reinterpret_cast<T_*>(patt), (long long)item * D_ + j, den > 0.f ? __fdividef(num, den) : 0.f); // (IEEE division here spilled)
#else
      __stcg(patt + item * D_ + j, num);
      if (j == 0) __stcg(pml + 2 * item + 1, den);
#endif
    }
    __syncthreads();
  }
}

/**
 * Row b of xs = sequence b's attention output: each head's ASPLIT_ partial softmaxes merged (o_proj's input, rounded
 * to the dtype). The parts and their (max, sum) pairs (contiguous in the workspace) come into shared memory first,
 * whole: one bulk copy on sm_90, like the other inputs (loads a thread's pieces at a time made this input ~3 µs at
 * batch 1 on the H200, against ~1.3 µs for a bulk-copied one); elsewhere loads by every thread. scratch: the
 * partial sums' space, free before the products.
 */
__device__ void merge_att(const float* patt, float* scratch, T_* xs, unsigned long long* xbar, unsigned& xph) {
  const int nf = B_ * NH_ * ASPLIT_ * (D_ + 2), nb = (nf * 4 + 15) & ~15; // floats: the parts, then the pairs; bytes copied (16s: the workspace runs on)
#ifdef BULK_ROWS_
  const unsigned bar = (unsigned)__cvta_generic_to_shared(xbar);
  if (threadIdx.x == 0) { bulk_expect(bar, nb); bulk_copy(scratch, patt, nb, bar); }
  bulk_wait(bar, xph);
#else
  (void)xbar; (void)xph;
  for (int e = threadIdx.x; e < nb / 16; e += THREADS_) reinterpret_cast<uint4*>(scratch)[e] = ldcg4(patt + 4 * e);
#endif
  __syncthreads();
  const float* pml = scratch + B_ * NH_ * ASPLIT_ * D_;
  for (int e = threadIdx.x; e < B_ * NH_ * D_ / 4; e += THREADS_) {
    const int bh = (4 * e) / D_, j = 4 * e - bh * D_, b = bh / NH_, hb = bh - b * NH_; // bh = b · NH_ + h
    float M = -INFINITY;
#pragma unroll
    for (int q2 = 0; q2 < ASPLIT_; q2++) M = fmaxf(M, pml[2 * (bh * ASPLIT_ + q2)]);
    float den = 0.f, n0 = 0.f, n1 = 0.f, n2 = 0.f, n3 = 0.f;
#pragma unroll
    for (int q2 = 0; q2 < ASPLIT_; q2++) {
      const float m = pml[2 * (bh * ASPLIT_ + q2)], l = pml[2 * (bh * ASPLIT_ + q2) + 1];
      const float4 a = *reinterpret_cast<const float4*>(scratch + (bh * ASPLIT_ + q2) * D_ + j);
      const float f = m == -INFINITY ? 0.f : __expf(m - M);
      den = fmaf(l, f, den);
      n0 = fmaf(a.x, f, n0); n1 = fmaf(a.y, f, n1); n2 = fmaf(a.z, f, n2); n3 = fmaf(a.w, f, n3);
    }
    T_* const xo = xs + b * XSTR_ + hb * D_ + j;
    xo[0] = TOS(den > 0.f ? n0 / den : 0.f); xo[1] = TOS(den > 0.f ? n1 / den : 0.f);
    xo[2] = TOS(den > 0.f ? n2 / den : 0.f); xo[3] = TOS(den > 0.f ? n3 / den : 0.f);
  }
  __syncthreads();
}

__device__ __forceinline__ bool argmax_better(float a, int ia, float b, int ib) {
  // b replaces a: larger, or equal at a smaller index, or NaN (torch.argmax: NaN is the maximum)
  if (isnan(a)) return isnan(b) && ib < ia;
  if (isnan(b)) return true;
  return b > a || (b == a && ib < ia);
}

/** The warp's maximum of (value, index) under argmax_better, in every lane. */
__device__ __forceinline__ void warp_argmax(float& bv, int& bi) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) {
    const float ov = __shfl_xor_sync(0xffffffffu, bv, o); const int oi = __shfl_xor_sync(0xffffffffu, bi, o);
    if (argmax_better(bv, bi, ov, oi)) { bv = ov; bi = oi; }
  }
}

extern "C" __global__ void __launch_bounds__(THREADS_, 1) decode_step(const Layer* __restrict__ layers, const T_* __restrict__ embed,
    const T_* __restrict__ fnorm, const unsigned char* __restrict__ lmhead, const float* __restrict__ lms, const float* __restrict__ lmz, const T_* __restrict__ cosr, const T_* __restrict__ sinr,
    const long long* ids, const long long* widx, const unsigned char* notpad, T_* logits, long long* next,
    T_* res, T_* qkv, float* patt, T_* act, float* amax_v, int* amax_i, unsigned* sync, unsigned long long* err,
    unsigned long long* trace, int ph0, int ph1, float eps, float scale) {
  extern __shared__ __align__(16) unsigned char nbx_dyn_[];
  unsigned char* ring = nbx_dyn_;
  T_* xs = reinterpret_cast<T_*>(nbx_dyn_ + NS_ * WARPS_ * STG_); // B_ rows, XSTR_ apart
  float* part = reinterpret_cast<float*>(reinterpret_cast<unsigned char*>(xs) + ((B_ * XSTR_ * 2 + 15) / 16) * 16);
  float* rowv = part + WARPS_ * MAXT_ * 16 * B_;
  float* sm = rowv; // attention scratch (phases B only) shares the row values' space
  __shared__ float red[WARPS_ * B_];
  __shared__ int sh_last;
  __shared__ unsigned long long xbar; // stage_rows' barrier (sm_90's bulk copies; 8-byte aligned as its type)
  unsigned xph = 0u;
#ifdef BULK_ROWS_
  if (threadIdx.x == 0) {
    asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;" :: "r"((unsigned)__cvta_generic_to_shared(&xbar)) : "memory");
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory"); // the initialized barrier visible to the copies
  }
#endif
  // the weight stream: NS_ items in flight from the start, one more each time one is consumed; issued
  // before the wait for the previous kernel (no kernel writes weights), so they load during its tail
  unsigned char* ringw = ring + (threadIdx.x >> 5) * NS_ * STG_; // this warp's ring
  Net nt; nt.layers = layers; nt.lm = lmhead; nt.lms = lms; nt.lmz = lmz;
  Loader ld; ld.ph1 = ph1;
  loader_seek(ld, ph0, nt);
  {
    const int lane = threadIdx.x & 31, lst = (lane >> 3) * 128 + (((lane & 7) ^ (((lane >> 3) & 1) << 2)) << 4);
    for (int q = 0; q < NS_; q++) loader_issue(ld, ringw + q * STG_, lst, nt);
  }
  NBX_GRID_DEPENDENCY_WAIT();
  __shared__ const T_* emb[B_]; // each sequence's embedding row
  if (threadIdx.x < B_) {
    long long id = ids[threadIdx.x];
    if (id < 0 || id >= V_) { if (blockIdx.x == 0) atomicOr(err, 1ull << 61); id = 0; }
    emb[threadIdx.x] = embed + id * (long long)H_;
  }
  __syncthreads();
  const int w = (int)__ldcg(widx);
  if (w < 0 || w >= S_) { if (blockIdx.x == 0 && threadIdx.x == 0) atomicOr(err, 1ull << 60); CP_WAIT_ALL(); return; }
  unsigned target = 0u; // barriers passed in this launch × grid
  int cs = 0; // the ring's stage holding the next item
  for (int ph = ph0; ph < ph1; ph++) {
    const int l = ph / 5, st = ph - l * 5;
    unsigned long long* tm = trace ? trace + (4ll * ph) * gridDim.x + blockIdx.x : nullptr; // this phase's marks (tracing)
    if (tm && threadIdx.x == 0) tm[0] = nbx_globaltimer();
#ifdef MARK_AT_COPY_
    if (threadIdx.x == 0) nbx_tm_ = tm;
#endif
#ifdef PREFETCH_L2_
    if (threadIdx.x == 32 && ph + L2AHEAD_ < ph1) prefetch_phase(ph + L2AHEAD_, nt); // not thread 0: it issues the inputs' copies
#endif
    const Layer ly = l < L_ ? layers[l] : layers[0];
    // each sequence's residual stream is its embedding row until layer 0's o_proj adds to it (phases A and C of layer 0)
    const bool fromEmb = l == 0 && st < 3;
    int r0, r1;
    const Slice z = phase_slice(ph, nt);
    if (l < L_ && st == 0) { // A: norm + q/k/v
      block_rows(QKV_, r0, r1);
      norm_into(emb, res, fromEmb, ly.ln1, eps, xs, red, &xbar, xph);
      block_gemv(z, xs, part, rowv, ringw, cs, ld, nt, tm);
      for (int e = threadIdx.x; e < (r1 - r0) * B_; e += THREADS_) { const int v = e / B_, b = e - v * B_; stcgv(qkv, b * QKV_ + r0 + v, rowv[e]); }
    } else if (l < L_ && st == 1) { // B: RoPE, cache write, attention
      for (int it = blockIdx.x; it < B_ * NH_ / HPI_ * ASPLIT_; it += gridDim.x) {
        const int sp = it % ASPLIT_, bh = (it / ASPLIT_) * HPI_, b = bh / NH_;
        attention_heads(b, bh - b * NH_, sp, ly, qkv + b * QKV_, cosr + b * RD_, sinr + b * RD_, w, notpad + (long long)b * S_, scale, patt, patt + B_ * NH_ * ASPLIT_ * D_, sm);
      }
      if (tm && threadIdx.x == 0) { tm[gridDim.x] = tm[0]; tm[2 * gridDim.x] = nbx_globaltimer(); }
    } else if (l < L_ && (st == 2 || st == 4)) { // C: o_proj + residual; E: down + residual
      block_rows(H_, r0, r1);
      const int n = (r1 - r0) * B_;
      // the residual (C: the layer's input stream; E: what C wrote), loaded before it is needed
      float rv = 0.f;
      if (threadIdx.x < n) { const int v = threadIdx.x / B_, b = threadIdx.x - v * B_; rv = ldcgv(fromEmb ? emb[b] : res + b * H_, r0 + v); }
      if (st == 2) {
#if ASPLIT_ == 1
        stage_rows(emb, reinterpret_cast<const T_*>(patt), false, NH_ * D_, xs, &xbar, xph); // attention_heads wrote it whole
#else
        merge_att(patt, part, xs, &xbar, xph);
#endif
#ifdef MARK_AT_COPY_
        if (tm && threadIdx.x == 0) tm[gridDim.x] = nbx_globaltimer();
#endif
      }
      else stage_rows(emb, act, false, I_, xs, &xbar, xph);
      block_gemv(z, xs, part, rowv, ringw, cs, ld, nt, tm);
      for (int e = threadIdx.x; e < n; e += THREADS_) {
        const int v = e / B_, b = e - v * B_;
        stcgv(res, b * H_ + r0 + v, RND(rowv[e]) + (e < THREADS_ ? rv : ldcgv(fromEmb ? emb[b] : res + b * H_, r0 + v)));
      }
    } else if (l < L_ && st == 3) { // D: norm + gate/up + act
      block_rows(I_, r0, r1);
      norm_into(emb, res, fromEmb, ly.ln2, eps, xs, red, &xbar, xph);
      block_gemv(z, xs, part, rowv, ringw, cs, ld, nt, tm);
      const int n = r1 - r0;
      for (int e = threadIdx.x; e < n * B_; e += THREADS_) {
        const int v = e / B_, b = e - v * B_;
        const float g = RND(rowv[e]), u = RND(rowv[n * B_ + e]);
        stcgv(act, b * I_ + r0 + v, g / (1.f + expf(-g)) * u);
      }
    } else { // F: final norm, lm_head, argmax
      block_rows(V_, r0, r1);
      norm_into(emb, res, fromEmb, fnorm, eps, xs, red, &xbar, xph);
      block_gemv(z, xs, part, rowv, ringw, cs, ld, nt, tm);
      // each warp's best (value, index) of its threads' rows for each sequence, then the block's: one block barrier
      // for the batch (a block reduction per sequence took ~15 µs at batch 8). (−inf, INT_MAX) loses to every row, so
      // blocks and lanes without rows need no flag.
      const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
      float* wv = part; int* wi = reinterpret_cast<int*>(part + WARPS_ * B_); // part is free once block_gemv has summed it
      for (int b = 0; b < B_; b++) {
        float bv = -INFINITY; int bi = 0x7fffffff;
        for (int v = threadIdx.x; v < r1 - r0; v += THREADS_) {
          const float lv = RND(rowv[v * B_ + b]);
          logits[(long long)b * V_ + r0 + v] = TOS(lv);
          if (argmax_better(bv, bi, lv, r0 + v)) { bv = lv; bi = r0 + v; }
        }
        warp_argmax(bv, bi);
        if (lane == 0) { wv[warp * B_ + b] = bv; wi[warp * B_ + b] = bi; }
      }
      __syncthreads();
      if (warp < B_) { // warp b: sequence b's maximum over the warps
        float v = lane < WARPS_ ? wv[lane * B_ + warp] : -INFINITY; int i = lane < WARPS_ ? wi[lane * B_ + warp] : 0x7fffffff;
        warp_argmax(v, i);
        if (lane == 0) { __stcg(amax_v + warp * gridDim.x + blockIdx.x, v); __stcg(amax_i + warp * gridDim.x + blockIdx.x, i); }
      }
      __syncthreads();
      if (threadIdx.x == 0) {
        __threadfence(); // the block's stores above, ordered by the barrier, before its arrival
        sh_last = atomicAdd(sync + 1, 1u) == gridDim.x - 1;
      }
      __syncthreads();
      if (sh_last) { // the last block to finish: each sequence's argmax over the blocks' (an order-free maximum), warp b for sequence b
        __threadfence();
        if (warp < B_) {
          float v = -INFINITY; int i = 0x7fffffff;
#pragma unroll 4
          for (unsigned q2 = lane; q2 < gridDim.x; q2 += 32) {
            const float ov = __ldcg(amax_v + warp * gridDim.x + q2); const int oi = __ldcg(amax_i + warp * gridDim.x + q2);
            if (argmax_better(v, i, ov, oi)) { v = ov; i = oi; }
          }
          warp_argmax(v, i);
          if (lane == 0) next[warp] = i;
        }
        if (threadIdx.x == 0) { sync[0] = 0u; sync[1] = 0u; } // every block is past its last barrier: ready for the next step
      }
    }
    if (trace) { __syncthreads(); if (threadIdx.x == 0) tm[3 * gridDim.x] = nbx_globaltimer(); }
    if (ph + 1 < ph1) {
      grid_sync(sync, target, err);
    }
  }
  CP_WAIT_ALL();
}`;
  return {
    src, name: 'decode_step',
    sig: ['ptr', 'ptr', 'ptr', 'ptr', 'ptr', 'ptr', 'ptr', 'ptr', 'ptr', 'ptr', 'ptr', 'ptr', 'ptr', 'ptr', 'ptr', 'ptr', 'ptr', 'ptr', 'ptr', 'ptr', 'ptr', 'ptr', 'i32', 'i32', 'f32', 'f32'] as ArgType[],
  };
}

/** The weight ring: NS items of `stage` bytes (stageBytes) per warp. */
interface Ring { ns: number; stage: number }
const ringBytes = (r: Ring): number => r.ns * WARPS * r.stage;

/**
 * The ring for a kernel whose other shared memory takes `base` bytes: as many items per warp (up to
 * RING_NS_MAX) as the block's shared memory still holds; null below two. NBX_DECODE_STEP_RING=NS sets it
 * (for sweeps on a card).
 */
function ringFor(base: number, optin: number, stage: number, most = RING_NS_MAX): Ring | null {
  const env = process.env.NBX_DECODE_STEP_RING;
  const STATIC = 1024; // the kernel's static shared arrays (block reductions, argmax)
  if (env) {
    const ns = Number(env);
    if (!Number.isInteger(ns) || ns < 1) throw new ValueError('llm.fused_decode_step', `NBX_DECODE_STEP_RING must be a positive integer (items per warp), got '${env}'`);
    return base + ringBytes({ ns, stage }) + STATIC <= optin ? { ns, stage } : null;
  }
  const ns = Math.min(most, Math.floor((optin - STATIC - base) / ringBytes({ ns: 1, stage })));
  return ns >= 2 ? { ns, stage } : null;
}

/** Bytes of the attention's parts and their (max, sum) pairs, which merge_att stages whole in shared memory (asplit > 1). */
const mergeBytes = (s: Shape, asplit: number): number => (asplit > 1 ? s.B * s.NH * asplit * (s.D + 2) * 4 : 0);

/**
 * Dynamic shared memory of the kernel besides the ring: the input vectors, then a scratch space that holds the warps'
 * partial sums and the rows' sums or the attention's scratch, or (the o_proj phase's input) the attention's parts.
 */
function smemBytes(s: Shape, asplit: number, fmt: Formats = DTYPE_FORMATS, q4xsum = false): number {
  return xsumOffset(s, asplit, fmt) + xsumBytes(s, fmt, q4xsum);
}
/** Bytes from the input vectors (xs) to the zero-point formats' x sums, past the scratch space (smemBytes). */
function xsumOffset(s: Shape, asplit: number, fmt: Formats): number {
  const xs = Math.ceil((s.B * xsStride(s) * 2) / 16) * 16;
  const part = WARPS * maxTilesPerWarp(s, fmt) * 16 * 4 * s.B;
  const rows = Math.max(rowsPerBlock((s.NH + 2 * s.NKV) * s.D, s.G), 2 * rowsPerBlock(s.I, s.G), rowsPerBlock(s.V, s.G), rowsPerBlock(s.H, s.G)) * 4 * s.B;
  const kpw = 32 / (s.D / 8);
  const attn = (4 * s.D + 5 * WARPS * kpw + WARPS * kpw * s.D) * 4 + 16; // up to two heads an item (attention_heads)
  return Math.ceil((xs + Math.max(part + Math.max(rows, attn), Math.ceil(mergeBytes(s, asplit) / 16) * 16)) / 16) * 16;
}

const at = (r: StridedRef): bigint => basePtr(r) + BigInt(r.offset * DTYPES[r.dtype].itemsize);
/** A projection's weight rows (packed bytes or the dtype's) and its scales (0 where it has none). */
const wAt = (w: DecodeStepWeight): bigint => at(isQuantWeight(w) ? w.qdata : w);
const sAt = (w: DecodeStepWeight): bigint => (isQuantWeight(w) && w.scales ? at(w.scales) : 0n);
const zAt = (w: DecodeStepWeight): bigint => (isQuantWeight(w) && w.zeros ? at(w.zeros) : 0n);
/** Pointers of struct Layer. */
const LAYER_PTRS = 16;

/**
 * The formats of the step's projections (Formats), or why the kernel does not read them: int8 per channel and int4 in
 * groups of 128 (with or without zero points) with rows of whole 128-byte items (K a multiple of 128, 256); other packed
 * formats (GGUF, fp8, other groups) run the op's composite, whose quantized products are nbx.quant's kernels.
 */
function formatsOf(p: DecodeStepParams): { f: Formats; any: boolean } | string {
  const one = (w: DecodeStepWeight): WFmt | string => {
    if (!isQuantWeight(w)) return 0;
    const l = w.layout;
    if (l.format === 'int8' && l.k % 128 === 0 && w.scales && !w.zeros) return 1;
    if (l.format === 'int4' && l.groupSize === 128 && l.k % 256 === 0 && w.scales) return w.zeros ? 3 : 2;
    return `quantized format ${l.format}${l.format === 'int4' ? ` (group ${l.groupSize})` : ''} over K = ${l.k}`;
  };
  const kind = (ws: DecodeStepWeight[]): WFmt | string => {
    const fs = ws.map(one);
    const bad = fs.find((f) => typeof f === 'string');
    if (bad !== undefined) return bad;
    return fs.every((f) => f === fs[0]) ? fs[0] ?? 0 : 'mixed formats across layers';
  };
  const f = { qkv: kind(p.layers.map((l) => l.qkv)), o: kind(p.layers.map((l) => l.o)), gu: kind(p.layers.map((l) => l.gateUp)), down: kind(p.layers.map((l) => l.down)), lm: one(p.lmHead) };
  for (const v of Object.values(f)) if (typeof v === 'string') return v;
  const fm = f as Formats;
  return { f: fm, any: Object.values(fm).some((v) => v !== 0) };
}

/** Per-backend state: the layer tables (by the layers' addresses), the workspace, the error word. */
interface StepState { tables: Map<string, CudaBuffer>; ws: CudaBuffer | null; wsBytes: number; err: CudaBuffer; trace: CudaBuffer | null; traceShape: [number, number] }
const states = new WeakMap<CudaBackend, StepState>();

function contiguous(r: StridedRef, shape: readonly number[]): boolean {
  if (r.shape.length !== shape.length || r.shape.some((v, i) => v !== shape[i])) return false;
  let st = 1;
  for (let i = shape.length - 1; i >= 0; i--) { if (shape[i] !== 1 && r.strides[i] !== st) return false; st *= shape[i]!; }
  return true;
}

/**
 * Blocks per query head (of `items`: heads × sequences) in the attention phase: two where the grid has them for every head. One leaves most
 * blocks idle in that phase; more make the o_proj blocks' merge of the parts (read by every block) cost more
 * than the attention saves (phase traces on the H200, BENCHMARKS.md, seventh session); one over caches of at most
 * SPLIT1_MAX_S positions where the head dim is at least SPLIT1_MIN_D. NBX_DECODE_STEP_ASPLIT=N sets it. The barrier's
 * arrival:
 * Query heads an item of the attention phase: two (of one KV group, each key loaded once for both) where the
 * items would take the grid more than one round, else one; NBX_DECODE_STEP_HEADS=1|2 sets it.
 * NBX_DECODE_STEP_BAR=release (one red.release, no fence after the wait: the default, faster on the H200
 * (BENCHMARKS.md, seventh session)) or fence (a fence, then an atomic add; a fence after). NBX_DECODE_STEP_BULK=0:
 * the inputs staged by loads through registers where sm_90's bulk copies would (stage_rows), for A/B runs.
 * NBX_DECODE_STEP_L2=H[,KB]: on sm_90, each phase asks L2 for the block's weights of the phase H ahead (at most KB
 * of them a block) as it starts (prefetch_phase); off by default until a card's runs say where it pays.
 * NBX_DECODE_STEP_MARK=copy|gemv: where the phase trace's mark "input ready" sits, in the inputs' copy (stage_rows)
 * or at the products' start. Only a trace reads it, but the two compile differently, and not by a little: on the H200
 * at TinyLlama's shape 'copy' ran batch 4 and 8 13% faster, batch 1 1% and batch 2 17% slower (BENCHMARKS.md, tenth
 * session, call 3), so it is the default from batch 4 up.
 * NBX_DECODE_STEP_Q4 (a list; default sub,perm): sub: symmetric int4 weights become q − 8 in the dtype before the
 * MMAs (one fma.bf16x2 a pair, on the float pipe); xsum: they enter as 128 + q and 136 times each group's x sum comes
 * off after them (the sums: one more pass over x and a block barrier a phase); perm: each phase first permutes x in
 * shared memory to the pairs (k, k + 4) the int4 words unpack to, swizzled against bank conflicts (one pass and a block
 * barrier a phase), not each lane's x in registers at every word. xsum saved an instruction a pair while the
 * unpacking's (u & mask) | magic took two LOP3s; with one, sub (its extra instruction on the float pipe, no pass over x)
 * is ~2% faster at Llama-3-8B's shape on the H200 (BENCHMARKS.md, eleventh and twelfth sessions).
 * NBX_DECODE_STEP_NORM=block: the norm's former arithmetic (each thread every row's elements, a block sum per row)
 * where the batch divides the block (warps a row otherwise), for A/B runs.
 */
function variantFor(items: number, G: number, group: number, batch: number, S: number, D: number): Variant {
  const a = process.env.NBX_DECODE_STEP_ASPLIT, b = process.env.NBX_DECODE_STEP_BAR ?? 'release';
  const asplit = a ? Number(a) : S <= SPLIT1_MAX_S && D >= SPLIT1_MIN_D ? 1 : Math.max(1, Math.min(2, Math.floor(G / items)));
  if (!Number.isInteger(asplit) || asplit < 1 || asplit > 16) throw new ValueError('llm.fused_decode_step', `NBX_DECODE_STEP_ASPLIT must be an integer from 1 to 16, got '${a}'`);
  if (b !== 'fence' && b !== 'release') throw new ValueError('llm.fused_decode_step', `NBX_DECODE_STEP_BAR must be fence or release, got '${b}'`);
  const bulk = process.env.NBX_DECODE_STEP_BULK;
  if (bulk !== undefined && bulk !== '0' && bulk !== '1') throw new ValueError('llm.fused_decode_step', `NBX_DECODE_STEP_BULK must be 0 or 1, got '${bulk}'`);
  const hv = process.env.NBX_DECODE_STEP_HEADS;
  const hpi = hv ? Number(hv) : items * asplit > G && group % 2 === 0 ? 2 : 1;
  if (hpi !== 1 && hpi !== 2) throw new ValueError('llm.fused_decode_step', `NBX_DECODE_STEP_HEADS must be 1 or 2, got '${hv}'`);
  if (group % hpi !== 0) throw new ValueError('llm.fused_decode_step', `NBX_DECODE_STEP_HEADS=${hpi} needs query heads per KV head divisible by it, got ${group}`);
  const l2v = process.env.NBX_DECODE_STEP_L2 ?? 'off';
  let l2: Variant['l2'];
  if (l2v !== 'off') {
    const m = /^([1-5])(?:,([0-9]+))?$/.exec(l2v);
    if (!m) throw new ValueError('llm.fused_decode_step', `NBX_DECODE_STEP_L2 must be off, H or H,KB (H phases ahead, 1 to 5; KB a block's cap per phase), got '${l2v}'`);
    l2 = { ahead: Number(m[1]), cap: m[2] ? Number(m[2]) * 1024 : 1 << 30 };
  }
  const norm = process.env.NBX_DECODE_STEP_NORM ?? 'warps';
  if (norm !== 'warps' && norm !== 'block') throw new ValueError('llm.fused_decode_step', `NBX_DECODE_STEP_NORM must be warps or block, got '${norm}'`);
  const mark = process.env.NBX_DECODE_STEP_TRACE === '2' ? 'copy' : process.env.NBX_DECODE_STEP_MARK ?? (batch >= 4 ? 'copy' : 'gemv');
  if (mark !== 'copy' && mark !== 'gemv') throw new ValueError('llm.fused_decode_step', `NBX_DECODE_STEP_MARK must be copy or gemv, got '${mark}'`);
  const q4 = (process.env.NBX_DECODE_STEP_Q4 ?? 'sub,perm').split(',');
  if (q4.some((o) => !['sub', 'xsum', 'perm'].includes(o))) throw new ValueError('llm.fused_decode_step', `NBX_DECODE_STEP_Q4 must list sub, xsum or perm, got '${q4.join(',')}'`);
  return { asplit, bar: b, bulk: bulk !== '0', hpi, l2, markAtCopy: mark === 'copy', normRows: norm === 'block', q4xsum: q4.includes('xsum'), q4perm: q4.includes('perm') };
}

/** Timestamps per phase and block when tracing: start, input ready, products done, end. */
const TRACE_MARKS = 4;

/** How the step launches: 'fused' (one launch, grid barriers), 'phases' (a launch per phase), or off. */
const MODE = (): string => (process.env.NBX_DECODE_STEP === 'phases' ? 'phases' : process.env.NBX_DECODE_STEP === 'off' || process.env.NBX_DECODE_STEP === '0' ? 'off' : 'fused');

/** Steps the kernel has launched (or captured) in this process: tests check that it, not the op's composite, ran. */
let stepsLaunched = 0;
export function decodeStepLaunches(): number { return stepsLaunched; }

/** The kernel does not take the step (the op runs its composite); NBX_DEBUG says why, once per reason. */
const declinedSeen = new Set<string>();
function declined(why: string): false {
  if (process.env.NBX_DEBUG && !declinedSeen.has(why)) { declinedSeen.add(why); process.stderr.write(`nbx: llm.fused_decode_step runs its composite: the whole-step kernel does not take this step (${why})\n`); }
  return false;
}

function cudaDecodeStep(p: DecodeStepParams): boolean {
  const mode = MODE();
  if (mode === 'off' || mode === '0') return false;
  const d = p.embed.dtype;
  if (!(DTYPES_TAKEN as readonly string[]).includes(d)) return declined('dtype');
  const [V, H] = p.embed.shape as [number, number];
  const L = p.layers.length, NH = p.heads, NKV = p.kvHeads, D = p.headDim, I = p.intermediate;
  const B = p.ids.shape[0]!, S = p.notPadding.shape[0]! / B, RD = p.cos.shape[0]! / B; // notPadding, cos and sin come flat: B rows
  if (!Number.isInteger(B) || B < 1 || B > MAX_BATCH || !Number.isInteger(S) || !Number.isInteger(RD)) return declined('batch');
  if (H % 64 !== 0 || I % 64 !== 0 || (NH * D) % 64 !== 0) return declined('sizes (64)'); // whole 64-column items
  if (D % 8 !== 0 || D > 256 || (256 / D) * D !== 256 && D !== 256 && 256 % D !== 0) return declined('head dim');
  if (H % 8 !== 0 || I % 8 !== 0 || (NH * D) % 8 !== 0 || NH % NKV !== 0 || RD % 2 !== 0 || RD > D) return declined('sizes');
  // the projections' formats: every layer's projection of a kind in one format the kernel reads
  const fmt = formatsOf(p);
  if (typeof fmt === 'string') return declined(fmt);
  // each tensor, its shape and its dtype (null: the model dtype); all contiguous
  const refs: [StridedRef, number[], string | null][] = [[p.embed, [V, H], null], [p.finalNorm, [H], null], [p.logits, [B * V], null], [p.cos, [B * RD], null],
    [p.sin, [B * RD], null], [p.ids, [B], p.ids.dtype], [p.next, [B], p.next.dtype], [p.cacheIndex, [1], p.cacheIndex.dtype], [p.notPadding, [B * S], p.notPadding.dtype]];
  /** A projection's weight [n, k] in its format f: the dtype's [n, k], or packed bytes [n, rowBytes] and float32 scales. */
  const weight = (w: DecodeStepWeight, f: WFmt, n: number, k: number): void => {
    if (!isQuantWeight(w)) refs.push([w, [n, k], null]);
    else {
      refs.push([w.qdata, [n, rowBytesOf(f, k)], 'uint8'], [w.scales!, f === 1 ? [n] : [n, k / 128], 'float32']);
      if (w.zeros) refs.push([w.zeros, [n, k / 128], 'float32']);
    }
  };
  weight(p.lmHead, fmt.f.lm, V, H);
  for (const ly of p.layers) {
    refs.push([ly.inputNorm, [H], null], [ly.postNorm, [H], null], [ly.keyCache, [B, NKV, S, D], null], [ly.valueCache, [B, NKV, S, D], null]);
    weight(ly.qkv, fmt.f.qkv, (NH + 2 * NKV) * D, H); weight(ly.o, fmt.f.o, H, NH * D); weight(ly.gateUp, fmt.f.gu, 2 * I, H); weight(ly.down, fmt.f.down, H, I);
  }
  for (const [i, [r, shape]] of refs.entries()) if (!contiguous(r, shape)) return declined(`layout of tensor ${i} (${r.shape.join('x')}, strides ${r.strides.join(',')}; wanted ${shape.join('x')})`);
  for (const [r, , dt] of refs) if (r.dtype !== (dt ?? d)) return declined('dtypes');
  for (const [r, , dt] of refs) if (((dt === null && r.shape.length === 2) || dt === 'uint8') && Number(at(r) % 16n) !== 0) return declined('alignment'); // 16-byte rows
  for (const [r, , dt] of refs) if (dt === 'float32' && Number(at(r) % 8n) !== 0) return declined('alignment'); // the scales' 8-byte copies
  for (const r of [p.finalNorm, ...p.layers.flatMap((ly) => [ly.inputNorm, ly.postNorm])]) if (Number(at(r) % 8n) !== 0) return declined('alignment'); // norm_into's 8-byte loads
  const G = be.smCount;
  const s: Shape = { H, NH, NKV, D, RD, I, V, L, S, G, B };
  const vt: Variant = { ...variantFor(NH * B, G, NH / NKV, B, S, D), fmt: fmt.f };
  const base = smemBytes(s, vt.asplit, fmt.f, vt.q4xsum), ring = ringFor(base, be.ctx.info.maxSharedMemPerBlockOptin, stageBytes(fmt.f), fmt.any ? RING_NS_MAX_PACKED : RING_NS_MAX);
  if (ring === null) return declined('shared memory');
  const smem = base + ringBytes(ring);
  const key = `decode_step:${ring.ns}:${vt.asplit}:${vt.hpi}:${vt.bar}:${vt.bulk === false ? 'nobulk:' : ''}${vt.l2 ? `l2=${vt.l2.ahead},${vt.l2.cap}:` : ''}${vt.markAtCopy ? 'markcopy:' : ''}${vt.normRows ? 'normblock:' : ''}${fmt.any ? `w${Object.values(fmt.f).join('')}${vt.q4xsum ? 'x' : ''}${vt.q4perm ? 'p' : ''}:` : ''}${d}:${H}:${NH}:${NKV}:${D}:${RD}:${I}:${V}:${L}:${S}:${G}:${B}`;
  const k = be.kernel(key, () => decodeStepSource(d as 'bfloat16' | 'float16', s, ring, vt));
  if (smem > 48 * 1024) k.setMaxDynamicSharedMemory(smem);
  const st = states.get(be) ?? { tables: new Map(), ws: null, wsBytes: 0, err: be.alloc('int64', 1), trace: null, traceShape: [0, 0] };
  states.set(be, st);
  // the layer table: sixteen pointers per layer (struct Layer), uploaded once per set of layers
  const ptrs = new BigUint64Array(LAYER_PTRS * L);
  p.layers.forEach((ly, i) => ptrs.set([at(ly.inputNorm), wAt(ly.qkv), wAt(ly.o), at(ly.postNorm), wAt(ly.gateUp), wAt(ly.down), at(ly.keyCache), at(ly.valueCache),
    sAt(ly.qkv), sAt(ly.o), sAt(ly.gateUp), sAt(ly.down), zAt(ly.qkv), zAt(ly.o), zAt(ly.gateUp), zAt(ly.down)], LAYER_PTRS * i));
  const tkey = Array.from(ptrs, (v) => v.toString(16)).join(',');
  let table = st.tables.get(tkey);
  if (!table) {
    if (be.capture !== null) return declined('layer table upload in a capture'); // uploads are not captured: the eager step before the capture makes it
    table = be.alloc('int64', Math.max(1, LAYER_PTRS * L));
    be.writeBytes(table, 0, new Uint8Array(ptrs.buffer));
    st.tables.set(tkey, table);
  }
  // workspace: the barrier counters first (their place does not move with the batch: they must read zero at a step's
  // start, and only a step's end zeroes them), then per sequence: residual, qkv (model dtype), the attention's partial
  // softmaxes (float32), activation (model dtype), the blocks' argmax
  const sizes = [H * 2, (NH + 2 * NKV) * D * 2, NH * vt.asplit * (D + 2) * 4, I * 2].map((n) => Math.ceil((B * n) / 256) * 256);
  const wsBytes = 256 + sizes.reduce((a, b) => a + b, 0) + B * G * 8;
  if (!st.ws || st.wsBytes < wsBytes) {
    if (be.capture !== null) return declined('workspace allocation in a capture');
    st.ws = be.alloc('uint8', wsBytes); st.wsBytes = wsBytes;
    be.ctx.memsetD8(st.ws.ptr, 0, wsBytes, be.stream);
  }
  const sync = st.ws.ptr;
  let off = st.ws.ptr + 256n;
  const [res, qkv, att, act] = sizes.map((b) => { const o = off; off += BigInt(b); return o; });
  const amaxV = off, amaxI = off + BigInt(B * G * 4);
  let err: bigint;
  if (be.capture !== null) err = be.capture.errBuf.ptr;
  else { be.ctx.memsetD8(st.err.ptr, 0, 8, be.stream); err = st.err.ptr; }
  const phases = 5 * L + 1;
  // NBX_DECODE_STEP_TRACE=1: each block's start and end time of every phase (decodeStepTrace), for profiling; =2: the
  // same with the mark "input ready" taken when the input rows are copied (NBX_DECODE_STEP_MARK=copy)
  const tracing = process.env.NBX_DECODE_STEP_TRACE === '1' || process.env.NBX_DECODE_STEP_TRACE === '2';
  if (tracing && (st.trace === null || st.traceShape[0] !== phases || st.traceShape[1] !== G)) {
    if (be.capture !== null) return declined('trace buffer in a capture');
    st.trace = be.alloc('int64', TRACE_MARKS * phases * G); st.traceShape = [phases, G];
  }
  const trace = tracing && st.trace ? st.trace.ptr : 0n;
  const args = (ph0: number, ph1: number) => [table!.ptr, at(p.embed), at(p.finalNorm), wAt(p.lmHead), sAt(p.lmHead), zAt(p.lmHead), at(p.cos), at(p.sin), at(p.ids), at(p.cacheIndex),
    at(p.notPadding), at(p.logits), at(p.next), res, qkv, att, act, amaxV, amaxI, sync, err, trace, ph0, ph1, p.eps, p.scaling];
  stepsLaunched++;
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
 * The last traced step's timestamps (NBX_DECODE_STEP_TRACE=1): ns of each block's marks in each phase,
 * [phase][mark][block] with marks start, input ready (norm or load done), products done (before the warps' sums
 * are added up), end; with the phase count and grid; null when nothing was traced. For profiling scripts.
 */
export function decodeStepTrace(backend: CudaBackend): { phases: number; grid: number; marks: number; ns: BigInt64Array } | null {
  const st = states.get(backend);
  if (!st?.trace) return null;
  return { phases: st.traceShape[0], grid: st.traceShape[1], marks: TRACE_MARKS, ns: backend.downloadSync(st.trace, 'int64', 0, TRACE_MARKS * st.traceShape[0] * st.traceShape[1]) as BigInt64Array };
}

export const kernels = { decode_step: cudaDecodeStep } satisfies BackendKernels;
/** Facts the operations read (merged into the 'llm' family's features). */
export const llmFeatures = { decodeStepDtypes: DTYPES_TAKEN, decodeStepMaxBatch: MAX_BATCH };
