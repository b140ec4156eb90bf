// The CUDA backend's LLM kernels (contracts in src/kernels/llm.ts): CUDA C rendered per dtype and
// compiled by NVRTC, every float dtype (half types compute in float). Each does in one launch what its
// operation's composite does in several (src/ops/llm.ts); the composite stays the definition, so the
// results agree within the dtype's rounding (summation order differs from the row-norm kernel's).
// decode_attention has no kernel here: its composite, scaled_dot_product_attention, already runs the
// fused attention kernel (flash-decoding) on CUDA where that covers the case.

import type { BackendKernels } from '../../../kernels/table.js';
import type { ExpertGemvParams, FusedAddRmsNormParams, GatedGemvParams, NormGemvParams, PagedAttentionParams, RotaryCacheParams, RotaryParams } from '../../../kernels/llm.js';
import { IndexError } from '../../../errors.js';
import type { CudaBuffer } from '../runtime/device.js';
import { DTYPES, type DTypeName } from '../../../dtype/dtypes.js';
import type { StridedRef } from '../../backend.js';
import type { ArgType } from '../runtime/driver.js';
import { R, type CudaBackend } from '../runtime/backend.js';
import { FLOATS, basePtr, requireDType } from './util.js';
import { cudaGatedGemv, cudaNormGemv } from './gemv.js';

let be: CudaBackend;

/** Points this family's kernels at the backend (called once, when the backend starts). */
export function bind(backend: CudaBackend): void { be = backend; }

/** The compute type of a storage dtype: double for float64, float otherwise. */
const computeOf = (d: DTypeName): string => (d === 'float64' ? 'double' : 'float');
/** `v` (compute type) rounded to dtype `d` and back, as storing and re-loading it would. */
function roundTo(d: DTypeName, v: string): string {
  if (d === 'float16') return `nbx_round_f16(${v})`;
  if (d === 'bfloat16') return `nbx_round_bf16(${v})`;
  return v;
}

/** The device address of a ref's first element (the kernels index from 0). */
const at = (r: StridedRef | undefined): bigint => (r ? basePtr(r) + BigInt(r.offset * DTYPES[r.dtype].itemsize) : 0n);

const NORM_BLOCK = 256;

/**
 * One block per row (grid-stride over rows): each thread adds its elements of x and the residual, stores
 * the sum rounded to the dtype (residualOut) and sums the squares of the rounded values; a shared-memory
 * tree gives the row's sum; then each thread re-reads the sums it wrote and stores (s · rstd) · w.
 */
export function fusedAddRmsNormSource(d: DTypeName, weight: boolean) {
  const T = R.storageType(d), A = computeOf(d);
  const src = `
extern "C" __global__ void __launch_bounds__(${NORM_BLOCK}) fused_add_rms_norm(const ${T}* __restrict__ x, const ${T}* __restrict__ r,
  const ${T}* __restrict__ w, ${T}* __restrict__ out, ${T}* __restrict__ res, long long rows, long long n, double eps) {
  __shared__ ${A} sh[${NORM_BLOCK}];
  for (long long row = blockIdx.x; row < rows; row += gridDim.x) {
    const long long base = row * n;
    ${A} ss = 0;
    for (long long j = threadIdx.x; j < n; j += ${NORM_BLOCK}) {
      const ${A} v = ${roundTo(d, `(${A})${R.load(d, 'x', 'base + j')} + (${A})${R.load(d, 'r', 'base + j')}`)};
      ${R.store(d, 'res', 'base + j', 'v')}
      ss += v * v;
    }
    sh[threadIdx.x] = ss;
    __syncthreads();
    for (int s = ${NORM_BLOCK / 2}; s > 0; s >>= 1) {
      if (threadIdx.x < s) sh[threadIdx.x] += sh[threadIdx.x + s];
      __syncthreads();
    }
    const ${A} rstd = (${A})1 / sqrt(sh[0] / (${A})n + (${A})eps);
    __syncthreads(); // sh[0] is read by every thread before the next row overwrites it
    for (long long j = threadIdx.x; j < n; j += ${NORM_BLOCK}) {
      const ${A} v = (${A})${R.load(d, 'res', 'base + j')};
      ${R.store(d, 'out', 'base + j', weight ? `v * rstd * (${A})${R.load(d, 'w', 'j')}` : 'v * rstd')}
    }
  }
}`;
  return { src, name: 'fused_add_rms_norm', sig: ['ptr', 'ptr', 'ptr', 'ptr', 'ptr', 'i64', 'i64', 'f64'] as ArgType[] };
}

/** Rows of at most this many elements per thread keep their values in registers (one read of x and r). */
const NORM_MAX_PER_THREAD = 16;

/**
 * The same arithmetic for rows of n ≤ NORM_BLOCK · PER elements: each thread keeps its PER rounded sums
 * in registers (the second pass re-reads nothing), and the sum of squares reduces by warp shuffles and
 * one shared array of per-warp sums that every thread adds in the same order: two barriers per row
 * instead of a shared-memory tree's nine. A decode step's norm of one 2048-wide row is latency, not
 * bandwidth: this is what it costs.
 */
export function fusedAddRmsNormRegSource(d: DTypeName, weight: boolean, per: number) {
  const T = R.storageType(d), A = computeOf(d);
  const W = NORM_BLOCK / 32;
  const src = `
extern "C" __global__ void __launch_bounds__(${NORM_BLOCK}) fused_add_rms_norm_reg(const ${T}* __restrict__ x, const ${T}* __restrict__ r,
  const ${T}* __restrict__ w, ${T}* __restrict__ out, ${T}* __restrict__ res, long long rows, int n, double eps) {
  __shared__ ${A} warps[${W}];
  for (long long row = blockIdx.x; row < rows; row += gridDim.x) {
    const long long base = row * n;
    ${A} v[${per}];
    ${A} ss = 0;
#pragma unroll
    for (int i = 0; i < ${per}; i++) {
      const int j = threadIdx.x + i * ${NORM_BLOCK};
      v[i] = 0;
      if (j < n) {
        v[i] = ${roundTo(d, `(${A})${R.load(d, 'x', 'base + j')} + (${A})${R.load(d, 'r', 'base + j')}`)};
        ${R.store(d, 'res', 'base + j', 'v[i]')}
        ss += v[i] * v[i];
      }
    }
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) ss += __shfl_xor_sync(0xffffffffu, ss, o);
    if ((threadIdx.x & 31) == 0) warps[threadIdx.x >> 5] = ss;
    __syncthreads();
    ${A} tot = 0;
#pragma unroll
    for (int k = 0; k < ${W}; k++) tot += warps[k];
    const ${A} rstd = (${A})1 / sqrt(tot / (${A})n + (${A})eps);
#pragma unroll
    for (int i = 0; i < ${per}; i++) {
      const int j = threadIdx.x + i * ${NORM_BLOCK};
      if (j < n) { ${R.store(d, 'out', 'base + j', weight ? `v[i] * rstd * (${A})${R.load(d, 'w', 'j')}` : 'v[i] * rstd')} }
    }
    __syncthreads(); // every thread has read warps[] before the next row writes it
  }
}`;
  return { src, name: 'fused_add_rms_norm_reg', sig: ['ptr', 'ptr', 'ptr', 'ptr', 'ptr', 'i64', 'i32', 'f64'] as ArgType[] };
}

function cudaFusedAddRmsNorm(p: FusedAddRmsNormParams): void {
  const d = p.x.dtype;
  requireDType('fused_add_rms_norm', d, FLOATS);
  if (p.rows === 0 || p.n === 0) return;
  const per = Math.ceil(p.n / NORM_BLOCK);
  if (per <= NORM_MAX_PER_THREAD) {
    const k = be.kernel(`llm_add_rms_reg:${d}:${!!p.weight}:${per}`, () => fusedAddRmsNormRegSource(d, !!p.weight, per));
    be.launch(k, Math.min(p.rows, be.smCount * 32), NORM_BLOCK, [at(p.x), at(p.residual), at(p.weight), at(p.out), at(p.residualOut), p.rows, p.n, p.eps]);
    return;
  }
  const k = be.kernel(`llm_add_rms:${d}:${!!p.weight}`, () => fusedAddRmsNormSource(d, !!p.weight));
  be.launch(k, Math.min(p.rows, be.smCount * 32), NORM_BLOCK, [at(p.x), at(p.residual), at(p.weight), at(p.out), at(p.residualOut), p.rows, p.n, p.eps]);
}

const ROPE_BLOCK = 256;

/**
 * Element j < R of a rotated row (x at xr, stride xd; cos/sin rows of batch b, position t) stored at
 * out[idx]: x·cos rounded to the dtype, plus rotate_half(x)·sin with one rounding (fma), as the
 * composite's mul then addcmul.
 */
function rotateElement(d: DTypeName, idx: string): string {
  const A = computeOf(d);
  const mul = d === 'float64' ? '__dmul_rn' : '__fmul_rn', fma = d === 'float64' ? 'fma' : 'fmaf';
  return `const long long half = R / 2;
    const ${A} xv = (${A})${R.load(d, 'x', 'xr + j * xd')};
    const ${A} rh = j < half ? -(${A})${R.load(d, 'x', 'xr + (j + half) * xd')} : (${A})${R.load(d, 'x', 'xr + (j - half) * xd')};
    const ${A} cv = (${A})${R.load(d, 'c', 'b * cb + t * ct + j * cr')}, sv = (${A})${R.load(d, 's', 'b * sb + t * st + j * sr')};
    const ${A} a = ${roundTo(d, `${mul}(xv, cv)`)};
    ${R.store(d, 'out', idx, `${fma}(rh, sv, a)`)}`;
}

/**
 * A thread per output element of [B, H, T, D] (grid-stride): x·cos rounded to the dtype, plus
 * rotate_half(x)·sin with one rounding (fma), as the composite's mul then addcmul; channels past the
 * rotary dim are copied.
 */
export function rotarySource(d: DTypeName) {
  const T = R.storageType(d);
  const src = `
extern "C" __global__ void __launch_bounds__(${ROPE_BLOCK}) rotary(const ${T}* __restrict__ x, const ${T}* __restrict__ c, const ${T}* __restrict__ s,
  ${T}* __restrict__ out, long long H, long long Tn, long long D, long long R, long long total,
  long long xb, long long xh, long long xt, long long xd, long long cb, long long ct, long long cr, long long sb, long long st, long long sr) {
  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < total; i += (long long)gridDim.x * blockDim.x) {
    long long rem = i;
    const long long j = rem % D; rem /= D;
    const long long t = rem % Tn; rem /= Tn;
    const long long h = rem % H; const long long b = rem / H;
    const long long xr = b * xb + h * xh + t * xt;
    if (j >= R) { ${R.store(d, 'out', 'i', R.load(d, 'x', 'xr + j * xd'))} continue; }
    ${rotateElement(d, 'i')}
  }
}`;
  return { src, name: 'rotary', sig: ['ptr', 'ptr', 'ptr', 'ptr', ...Array<ArgType>(15).fill('i64')] as ArgType[] };
}

function cudaRotary(p: RotaryParams): void {
  const d = p.x.dtype;
  requireDType('rotary_embedding', d, FLOATS);
  const [B, H, T, D] = p.x.shape as [number, number, number, number];
  const total = B * H * T * D;
  if (total === 0) return;
  const k = be.kernel(`llm_rotary:${d}`, () => rotarySource(d));
  const xs = p.x.strides, cs = p.cos.strides, ss = p.sin.strides;
  be.launch(k, be.gridFor(total, ROPE_BLOCK), ROPE_BLOCK, [at(p.x), at(p.cos), at(p.sin), at(p.out), H, T, D, p.rotary, total,
    xs[0]!, xs[1]!, xs[2]!, xs[3]!, cs[0]!, cs[1]!, cs[2]!, ss[0]!, ss[1]!, ss[2]!]);
}

/**
 * rotary_cache: a thread per element of the step's queries, keys and values ([B, H + 2·KVH, T, D] side
 * by side, grid-stride): query heads rotate into qOut, key heads rotate into the key cache at position
 * index[t], value heads are copied into the value cache there. The rotation's arithmetic is rotary's.
 */
export function rotaryCacheSource(d: DTypeName) {
  const T = R.storageType(d);
  const src = `
extern "C" __global__ void __launch_bounds__(${ROPE_BLOCK}) rotary_cache(const ${T}* __restrict__ q, const ${T}* __restrict__ k, const ${T}* __restrict__ v,
  const ${T}* __restrict__ c, const ${T}* __restrict__ s, ${T}* __restrict__ qo, ${T}* __restrict__ kc, ${T}* __restrict__ vc,
  const long long* __restrict__ index, unsigned long long* __restrict__ err, long long H, long long KVH, long long Tn, long long D, long long R, long long S, long long total,
  long long qb, long long qh, long long qt, long long qd, long long kb, long long kh, long long kt, long long kd, long long vb, long long vh, long long vt, long long vd,
  long long cb, long long ct, long long cr, long long sb, long long st, long long sr,
  long long kcb, long long kch, long long kcs, long long kcd, long long vcb, long long vch, long long vcs, long long vcd) {
  const long long HT = H + 2 * KVH;
  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < total; i += (long long)gridDim.x * blockDim.x) {
    long long rem = i;
    const long long j = rem % D; rem /= D;
    const long long t = rem % Tn; rem /= Tn;
    const long long h = rem % HT; const long long b = rem / HT;
    if (h >= H + KVH) { // a value: copied to its cache slot
      const long long g = h - H - KVH, p = index[t];
      if (p < 0 || p >= S) { if (j == 0) atomicMax(err, ~(unsigned long long)t); continue; }
      vc[b * vcb + g * vch + p * vcs + j * vcd] = v[b * vb + g * vh + t * vt + j * vd];
      continue;
    }
    const bool isq = h < H;
    const ${T}* x = isq ? q : k;
    const long long xr = isq ? b * qb + h * qh + t * qt : b * kb + (h - H) * kh + t * kt, xd = isq ? qd : kd;
    long long o;
    ${T}* out;
    if (isq) { out = qo; o = ((b * H + h) * Tn + t) * D + j; }
    else {
      const long long p = index[t];
      if (p < 0 || p >= S) { if (j == 0) atomicMax(err, ~(unsigned long long)t); continue; }
      out = kc; o = b * kcb + (h - H) * kch + p * kcs + j * kcd;
    }
    if (j >= R) { out[o] = x[xr + j * xd]; continue; }
    ${rotateElement(d, 'o')}
  }
}`;
  return { src, name: 'rotary_cache', sig: ['ptr', 'ptr', 'ptr', 'ptr', 'ptr', 'ptr', 'ptr', 'ptr', 'ptr', 'ptr', ...Array<ArgType>(33).fill('i64')] as ArgType[] };
}

/** An error word for a kernel that records bad indices: the capture's own (checked after a replay), else `own`, cleared. */
function errorWord(own: CudaBuffer): bigint {
  if (be.capture !== null) return be.capture.errBuf.ptr;
  be.ctx.memsetD8(own.ptr, 0, 8, be.stream);
  return own.ptr;
}

let rotaryCacheErr: CudaBuffer | null = null;
function cudaRotaryCache(p: RotaryCacheParams): void {
  const d = p.q.dtype;
  requireDType('llm.rotary_and_cache', d, FLOATS);
  const [B, H, T, D] = p.q.shape as [number, number, number, number];
  const KVH = p.k.shape[1]!, S = p.keyCache.shape[2]!;
  const total = B * (H + 2 * KVH) * T * D;
  if (total === 0) return;
  const kern = be.kernel(`llm_rotary_cache:${d}`, () => rotaryCacheSource(d));
  rotaryCacheErr ??= be.alloc('int64', 1);
  const err = errorWord(rotaryCacheErr);
  const qs = p.q.strides, ks = p.k.strides, vs = p.v.strides, cs = p.cos.strides, ss = p.sin.strides, kcs = p.keyCache.strides, vcs = p.valueCache.strides;
  be.launch(kern, be.gridFor(total, ROPE_BLOCK), ROPE_BLOCK, [at(p.q), at(p.k), at(p.v), at(p.cos), at(p.sin), at(p.qOut), at(p.keyCache), at(p.valueCache), at(p.index), err,
    H, KVH, T, D, p.rotary, S, total, qs[0]!, qs[1]!, qs[2]!, qs[3]!, ks[0]!, ks[1]!, ks[2]!, ks[3]!, vs[0]!, vs[1]!, vs[2]!, vs[3]!,
    cs[0]!, cs[1]!, cs[2]!, ss[0]!, ss[1]!, ss[2]!, kcs[0]!, kcs[1]!, kcs[2]!, kcs[3]!, vcs[0]!, vcs[1]!, vcs[2]!, vcs[3]!]);
  if (be.capture !== null) { be.capture.defer('llm.rotary_and_cache'); return; }
  const w = (be.downloadSync(rotaryCacheErr, 'int64', 0, 1) as BigInt64Array)[0]!;
  if (w !== 0n) throw new IndexError('llm.rotary_and_cache', `cache_index[${Number(~w)}] is out of bounds for a cache of ${S} positions`);
}

/** gated_gemv: the tensor-core GEMV with the activation applied as it loads X (gemv.ts cudaGatedGemv). */
function cudaGatedGemvKernel(p: GatedGemvParams): boolean {
  return cudaGatedGemv(be, { gateUp: p.gateUp, weight: p.weight, bias: p.bias, out: p.out, m: p.rows, n: p.n, k: p.k, gate: p.gate });
}

/** norm_gemv: the tensor-core GEMV whose blocks compute the add + RMSNorm of their input first (gemv.ts cudaNormGemv). */
function cudaNormGemvKernel(p: NormGemvParams): boolean {
  return cudaNormGemv(be, { x: p.x, residual: p.residual, normWeight: p.normWeight, eps: p.eps, weight: p.weight, bias: p.bias, out: p.out,
    residualOut: p.residualOut, m: p.rows, n: p.n, k: p.k });
}

const EXPERT_WARPS = 8;

/**
 * expert_gemv: a warp per output row of one (token, slot): the row of the slot's expert (its id read
 * on the device) dotted with the token's input, 16-byte loads where K and the pointers allow, float32
 * accumulation, one shuffle butterfly. Grid (ceil(O / 8), N·k). An id outside [0, E) records its
 * position in the error word and writes 0.
 */
export function expertGemvSource(d: DTypeName, vec: boolean) {
  const T = R.storageType(d);
  const per = 16 / DTYPES[d].itemsize; // elements per 16-byte load
  const body = vec
    ? `const uint4* wv = (const uint4*)(wr); const uint4* xv = (const uint4*)(xr);
    for (long long c = lane; c < K / ${per}; c += 32) {
      const uint4 a = wv[c], b = xv[c];
      const ${T}* pa = (const ${T}*)&a; const ${T}* pb = (const ${T}*)&b;
#pragma unroll
      for (int e = 0; e < ${per}; e++) acc += (float)${R.load(d, 'pa', 'e')} * (float)${R.load(d, 'pb', 'e')};
    }`
    : `for (long long c = lane; c < K; c += 32) acc += (float)${R.load(d, 'wr', 'c')} * (float)${R.load(d, 'xr', 'c')};`;
  const src = `
extern "C" __global__ void __launch_bounds__(${EXPERT_WARPS * 32}) expert_gemv(const ${T}* __restrict__ x, const ${T}* __restrict__ w,
  const long long* __restrict__ ids, ${T}* __restrict__ out, unsigned long long* __restrict__ err, int slots, int E, int O, long long K, int xPerSlot) {
  const int lane = threadIdx.x & 31;
  const int o = blockIdx.x * ${EXPERT_WARPS} + (threadIdx.x >> 5);
  const int ns = blockIdx.y; // token · slots + slot
  if (o >= O) return;
  const long long e = ids[ns];
  if (e < 0 || e >= E) { if (lane == 0) { atomicMax(err, ~(unsigned long long)ns); ${R.store(d, 'out', '(long long)ns * O + o', '0.0f')} } return; }
  const ${T}* wr = w + (e * O + o) * K;
  const ${T}* xr = x + (xPerSlot ? (long long)ns : (long long)(ns / slots)) * K;
  float acc = 0.0f;
  ${body}
#pragma unroll
  for (int s = 16; s > 0; s >>= 1) acc += __shfl_xor_sync(0xffffffffu, acc, s);
  if (lane == 0) { ${R.store(d, 'out', '(long long)ns * O + o', 'acc')} }
}`;
  return { src, name: 'expert_gemv', sig: ['ptr', 'ptr', 'ptr', 'ptr', 'ptr', 'i32', 'i32', 'i32', 'i64', 'i32'] as ArgType[] };
}

let expertErr: CudaBuffer | null = null;
function cudaExpertGemv(p: ExpertGemvParams): void {
  const d = p.x.dtype;
  requireDType('llm.expert_linear', d, FLOATS);
  const rows = p.tokens * p.slots;
  if (rows === 0 || p.outFeatures === 0) return;
  const per = 16 / DTYPES[d].itemsize;
  const vec = p.inFeatures % per === 0 && at(p.x) % 16n === 0n && at(p.weight) % 16n === 0n;
  const k = be.kernel(`llm_expert_gemv:${d}:${vec}`, () => expertGemvSource(d, vec));
  // the error word: a capture's own (checked after a replay), else this family's, cleared per call
  let err: bigint;
  if (be.capture !== null) err = be.capture.errBuf.ptr;
  else {
    expertErr ??= be.alloc('int64', 1);
    be.ctx.memsetD8(expertErr.ptr, 0, 8, be.stream);
    err = expertErr.ptr;
  }
  be.ctx.launch(k, [Math.ceil(p.outFeatures / EXPERT_WARPS), rows], EXPERT_WARPS * 32,
    [at(p.x), at(p.weight), at(p.ids), at(p.out), err, p.slots, p.experts, p.outFeatures, p.inFeatures, p.xPerSlot ? 1 : 0], 0, be.stream);
  if (be.capture !== null) { be.capture.defer('llm.expert_linear'); return; }
  const v = (be.downloadSync(expertErr!, 'int64', 0, 1) as BigInt64Array)[0]!;
  if (v !== 0n) {
    const pos = Number(~v);
    throw new IndexError('llm.expert_linear', `expert id at position ${pos} of expert_ids is out of range for ${p.experts} experts`);
  }
}

/** Warps of a paged attention block (each takes every NW-th key of the sequence). */
const PAGED_WARPS = 4;
/** Query heads of one key/value head that one block serves (a group of more runs in several blocks). */
const PAGED_HEADS = 8;

/**
 * paged_attention: a block per (sequence, key/value head, group of ≤ 8 of its query heads), 4 warps.
 * Each warp takes every 4th key of the sequence's visible range, finds its slot through the block
 * table, reads the key row once for all the block's query heads (a lane per 32nd element, dot products
 * by shuffle butterflies), soft-caps, and keeps an online softmax (max, sum, Σ p·v in registers, float);
 * the warps' partials merge in shared memory in warp order. A bad length or block id writes zeros and
 * records the sequence in the error word (checked after the launch, as expert_gemv's).
 */
export function pagedAttentionSource(d: DTypeName, D: number, Dv: number, heads: number, idx: 'int32' | 'int64', lens: 'int32' | 'int64') {
  const T = R.storageType(d);
  const IT = idx === 'int32' ? 'int' : 'long long', LT = lens === 'int32' ? 'int' : 'long long';
  const NW = PAGED_WARPS, HB = heads, KPL = Math.ceil(D / 32), VPL = Math.ceil(Dv / 32);
  const src = `
extern "C" __global__ void __launch_bounds__(${NW * 32}) paged_attention(const ${T}* __restrict__ q, const ${T}* __restrict__ kc,
  const ${T}* __restrict__ vc, const ${IT}* __restrict__ bt, const ${LT}* __restrict__ sl, ${T}* __restrict__ out,
  unsigned long long* __restrict__ err, int H, int KVH, int chunks, long long numBlocks, int BS, int MB, float scale, int window, float softcap) {
  __shared__ float qs[${HB}][${D}];
  __shared__ float wm[${NW}][${HB}];
  __shared__ float wl[${NW}][${HB}];
  __shared__ float wacc[${NW}][${HB}][${Dv}];
  __shared__ int bad;
  const int b = blockIdx.x, g = blockIdx.y / chunks, h0 = (blockIdx.y % chunks) * ${HB};
  const int rep = H / KVH;
  const int nh = min(${HB}, rep - h0);
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const long long len = (long long)sl[b];
  if (threadIdx.x == 0) bad = (len < 0 || len > (long long)MB * BS) ? 1 : 0;
  __syncthreads();
  const long long first = window > 0 ? (len - window > 0 ? len - window : 0) : 0;
  if (!bad) {
    for (long long j = first / BS + threadIdx.x; j * BS < len; j += blockDim.x) {
      const long long id = (long long)bt[(long long)b * MB + j];
      if (id < 0 || id >= numBlocks) bad = 1;
    }
  }
  __syncthreads();
  const long long headBase = (long long)b * H + (long long)g * rep + h0;
  if (bad) {
    if (threadIdx.x == 0) atomicMax(err, ~(unsigned long long)b);
    for (int i = threadIdx.x; i < nh * ${Dv}; i += blockDim.x) { ${R.store(d, 'out', `(headBase + i / ${Dv}) * ${Dv} + i % ${Dv}`, '0.0f')} }
    return;
  }
  for (int i = threadIdx.x; i < ${HB} * ${D}; i += blockDim.x) {
    const int h = i / ${D}, e = i % ${D};
    qs[h][e] = h < nh ? (float)${R.load(d, 'q', `(headBase + h) * ${D} + e`)} : 0.0f;
  }
  __syncthreads();
  float m[${HB}], l[${HB}], acc[${HB}][${VPL}];
#pragma unroll
  for (int h = 0; h < ${HB}; h++) {
    m[h] = -INFINITY; l[h] = 0.0f;
#pragma unroll
    for (int i = 0; i < ${VPL}; i++) acc[h][i] = 0.0f;
  }
  for (long long s = first + warp; s < len; s += ${NW}) {
    const long long slot = (long long)bt[(long long)b * MB + s / BS] * BS + s % BS;
    const ${T}* kr = kc + (slot * KVH + g) * ${D};
    const ${T}* vr = vc + (slot * KVH + g) * ${Dv};
    float kv[${KPL}], vv[${VPL}];
#pragma unroll
    for (int i = 0; i < ${KPL}; i++) { const int e = lane + 32 * i; kv[i] = e < ${D} ? (float)${R.load(d, 'kr', 'e')} : 0.0f; }
#pragma unroll
    for (int i = 0; i < ${VPL}; i++) { const int e = lane + 32 * i; vv[i] = e < ${Dv} ? (float)${R.load(d, 'vr', 'e')} : 0.0f; }
#pragma unroll
    for (int h = 0; h < ${HB}; h++) {
      if (h >= nh) break;
      float dot = 0.0f;
#pragma unroll
      for (int i = 0; i < ${KPL}; i++) { const int e = lane + 32 * i; if (e < ${D}) dot += qs[h][e] * kv[i]; }
#pragma unroll
      for (int o = 16; o > 0; o >>= 1) dot += __shfl_xor_sync(0xffffffffu, dot, o);
      float sc = dot * scale;
      if (softcap > 0.0f) sc = softcap * tanhf(sc / softcap);
      const float mn = fmaxf(m[h], sc);
      const float c = expf(m[h] - mn), p = expf(sc - mn);
      l[h] = l[h] * c + p;
#pragma unroll
      for (int i = 0; i < ${VPL}; i++) acc[h][i] = acc[h][i] * c + p * vv[i];
      m[h] = mn;
    }
  }
#pragma unroll
  for (int h = 0; h < ${HB}; h++) {
    if (lane == 0) { wm[warp][h] = m[h]; wl[warp][h] = l[h]; }
#pragma unroll
    for (int i = 0; i < ${VPL}; i++) { const int e = lane + 32 * i; if (e < ${Dv}) wacc[warp][h][e] = acc[h][i]; }
  }
  __syncthreads();
  for (int i = threadIdx.x; i < nh * ${Dv}; i += blockDim.x) {
    const int h = i / ${Dv}, e = i % ${Dv};
    float M = -INFINITY;
#pragma unroll
    for (int w = 0; w < ${NW}; w++) M = fmaxf(M, wm[w][h]);
    float L = 0.0f, A = 0.0f;
    if (M != -INFINITY) {
#pragma unroll
      for (int w = 0; w < ${NW}; w++) { const float f = expf(wm[w][h] - M); L += wl[w][h] * f; A += wacc[w][h][e] * f; }
    }
    ${R.store(d, 'out', `(headBase + h) * ${Dv} + e`, 'L > 0.0f ? A / L : 0.0f')}
  }
}`;
  return { src, name: 'paged_attention', sig: ['ptr', 'ptr', 'ptr', 'ptr', 'ptr', 'ptr', 'ptr', 'i32', 'i32', 'i32', 'i64', 'i32', 'i32', 'f32', 'i32', 'f32'] as ArgType[] };
}

let pagedErr: CudaBuffer | null = null;
function cudaPagedAttention(p: PagedAttentionParams): void {
  const d = p.q.dtype, op = 'llm.paged_attention';
  requireDType(op, d, FLOATS);
  const rep = p.heads / p.kvHeads, heads = Math.min(PAGED_HEADS, rep), chunks = Math.ceil(rep / heads);
  const it = p.blockTables.dtype as 'int32' | 'int64', lt = p.seqLens.dtype as 'int32' | 'int64';
  const k = be.kernel(`llm_paged:${d}:${p.headDim}:${p.valueDim}:${heads}:${it}:${lt}`, () => pagedAttentionSource(d, p.headDim, p.valueDim, heads, it, lt));
  let err: bigint;
  if (be.capture !== null) err = be.capture.errBuf.ptr;
  else {
    pagedErr ??= be.alloc('int64', 1);
    be.ctx.memsetD8(pagedErr.ptr, 0, 8, be.stream);
    err = pagedErr.ptr;
  }
  be.ctx.launch(k, [p.seqs, p.kvHeads * chunks], PAGED_WARPS * 32,
    [at(p.q), at(p.keyCache), at(p.valueCache), at(p.blockTables), at(p.seqLens), at(p.out), err,
      p.heads, p.kvHeads, chunks, p.numBlocks, p.blockSize, p.maxBlocks, p.scale, p.window ?? 0, p.softcap ?? 0], 0, be.stream);
  if (be.capture !== null) { be.capture.defer(op); return; }
  const v = (be.downloadSync(pagedErr!, 'int64', 0, 1) as BigInt64Array)[0]!;
  if (v !== 0n) {
    const b = Number(~v);
    throw new IndexError(op, `sequence ${b}: its length is outside [0, ${p.maxBlocks * p.blockSize}] or a block id of its row of block_tables is outside [0, ${p.numBlocks})`);
  }
}

export const kernels = { fused_add_rms_norm: cudaFusedAddRmsNorm, rotary_embedding: cudaRotary, rotary_cache: cudaRotaryCache, gated_gemv: cudaGatedGemvKernel, norm_gemv: cudaNormGemvKernel, expert_gemv: cudaExpertGemv, paged_attention: cudaPagedAttention } satisfies BackendKernels;
/** The dtypes these kernels take. */
export const features = { llm: { dtypes: FLOATS } };
