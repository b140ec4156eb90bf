// Elementwise CUDA kernels: source generation for each operand layout, and the dispatcher behind
// CudaBackend.elementwise. Every kernel renders the same IR expression with CudaRenderer; they differ
// only in how elements are addressed:
//   flat   every operand contiguous with the output: one pass, `unroll` 16-byte vectors per thread
//          (block b covers vectors [b*T*U, (b+1)*T*U), thread t the vectors t, t+T, ...: coalesced),
//          no grid-stride loop, the tail (< one vector) done by block 0.
//   bcast  after coalescing, at most 3 dims and every input either contiguous along the innermost
//          dim or constant along it (broadcast row vectors, columns, scalars, expanded views): rows
//          times vectors, no division per element (one per row for 3 dims), operands constant over
//          the rows read through the read-only cache, per-row values loaded once per row.
//   tile   2-d with a transposed input: shared-memory tiles (both sides coalesced).
//   nd     anything else: the linear index decomposed per element.
// Vectors: V = 16 / (widest itemsize) elements, so the widest operand moves 16 bytes per access and
// narrower ones 8/4/2/1; used when every vector-accessed operand's offset (and row pitch) is a
// multiple of V. Launch shapes come from the autotuner (tuning.ts: EW_FLAT_SPACE, EW_BCAST_SPACE).

import { DTYPES, type DTypeName } from '../../../dtype/dtypes.js';
import type { Expr } from '../../../ir/expr.js';
import { CudaRenderer } from '../../../ir/render_c.js';
import { denseAs, type StridedRef } from '../../backend.js';
import { coalesce } from '../../../tensor/shape.js';
import { broadcastStrides } from '../../../tensor/shape.js';
import type { ArgType, KernelArg } from './driver.js';
import type { CudaBuffer, CudaDevice } from './device.js';
import { bucketSize, type Config } from '../../../autotune/index.js';
import { ELEMENTWISE_SPACE, EW_BCAST_SPACE, EW_FLAT_SPACE, EW_SWEEP, EW_TUNE_MIN_ELEMENTS, ewCandidates } from '../tuning/spaces.js';
import { UnsupportedError } from '../../../errors.js';

export const R = new CudaRenderer();

export const cParam = (t: string): string => ({ f32: 'float', f64: 'double', i32: 'int', i64: 'long long' } as Record<string, string>)[t]!;
const paramDecls = (pTypes: string[]): string[] => pTypes.map((t, i) => `${cParam(t)} p${i}`);

// ---- vectors as explicit bit fields ------------------------------------------------------------
// The elements live in registers (no address-taken arrays, which would push sub-word elements to
// local memory). A vector of V elements of dtype d is a container of V * itemsize bytes.

const WORDS = ['x', 'y', 'z', 'w'];
const CONTAINER: Record<number, string> = { 16: 'uint4', 8: 'uint2', 4: 'unsigned', 2: 'unsigned short', 1: 'unsigned char' };
function word(r: string, bytes: number, w: number): string { return bytes >= 8 ? `${r}.${WORDS[w]}` : r; }

/** Storage-typed element expressions of a container `r` holding V elements of `d`. */
function unpackN(d: DTypeName, r: string, V: number): string[] {
  const size = DTYPES[d].itemsize, T = R.storageType(d), bytes = V * size;
  return [...Array(V).keys()].map((j) => {
    if (size === 8) {
      const lo = word(r, bytes, 2 * j), hi = word(r, bytes, 2 * j + 1);
      return d === 'float64' ? `__hiloint2double((int)${hi}, (int)${lo})` : `(${T})(((unsigned long long)${hi} << 32) | ${lo})`;
    }
    const per = Math.min(4, bytes) / size, w = word(r, bytes, Math.floor(j / per)), shift = 8 * size * (j % per);
    if (size === 4) return d === 'float32' ? `__uint_as_float(${w})` : `(${T})${w}`;
    return `(${T})(${w} >> ${shift})`;
  });
}

/** The existing 16-byte form (also used by the reduction kernels). */
export function unpack(d: DTypeName, r: string, V: number): string { return unpackN(d, r, V).join(', '); }

/** Statements filling container `r` from the storage-typed array `v` of V elements of `d`. */
function packN(d: DTypeName, v: string, r: string, V: number): string {
  const size = DTYPES[d].itemsize, bytes = V * size;
  const bits = (j: number): string => (d === 'float32' ? `__float_as_uint(${v}[${j}])` : size === 4 ? `(unsigned)${v}[${j}]`
    : `(unsigned)(${size === 1 ? 'unsigned char' : 'unsigned short'})${v}[${j}]`);
  if (size === 8) {
    const out: string[] = [];
    for (let j = 0; j < V; j++) {
      const u = d === 'float64' ? `(unsigned long long)__double_as_longlong(${v}[${j}])` : `(unsigned long long)${v}[${j}]`;
      out.push(`${word(r, bytes, 2 * j)} = (unsigned)${u}; ${word(r, bytes, 2 * j + 1)} = (unsigned)(${u} >> 32);`);
    }
    return out.join(' ');
  }
  if (bytes < 4) return `${r} = (${CONTAINER[bytes]})(${[...Array(V).keys()].map((j) => `(${bits(j)} << ${8 * size * j})`).join(' | ')});`;
  const per = 4 / size, out: string[] = [];
  for (let w = 0; w < bytes / 4; w++) out.push(`${word(r, bytes, w)} = ${[...Array(per).keys()].map((k) => `(${bits(w * per + k)} << ${8 * size * k})`).join(' | ')};`);
  return out.join(' ');
}

/**
 * Cache-hinted 16-byte accesses: `cs` streams (evict-first: each byte is touched once), `pf` loads with
 * a 256-byte L2 prefetch (a DRAM burst per sector request: fewer, larger transactions), `nc` reads
 * through the read-only (texture) path for operands many threads re-read. Plain C on the CUDA
 * emulator, which compiles kernels with the host compiler.
 */
/** A packed-pair converter: the sm_80 cvt on the device, two scalar conversions elsewhere. */
const pairCvt = (name: string, ptx: string, scalar: string): string => String.raw`__device__ __forceinline__ unsigned ${name}(float lo, float hi) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  unsigned r; asm("cvt.rn.${ptx}.f32 %0, %1, %2;" : "=r"(r) : "f"(hi), "f"(lo)); return r;
#else
  return (unsigned)${scalar}(lo) | ((unsigned)${scalar}(hi) << 16);
#endif
}`;

const VEC_HELPERS = String.raw`
#ifdef __CUDA_ARCH__
__device__ __forceinline__ uint4 nbx_ld_cs(const void* p) { uint4 r; asm volatile("ld.global.cs.v4.u32 {%0,%1,%2,%3}, [%4];" : "=r"(r.x), "=r"(r.y), "=r"(r.z), "=r"(r.w) : "l"(p)); return r; }
__device__ __forceinline__ uint4 nbx_ld_nc(const void* p) { uint4 r; asm("ld.global.nc.v4.u32 {%0,%1,%2,%3}, [%4];" : "=r"(r.x), "=r"(r.y), "=r"(r.z), "=r"(r.w) : "l"(p)); return r; }
__device__ __forceinline__ void nbx_st_cs(void* p, uint4 v) { asm volatile("st.global.cs.v4.u32 [%0], {%1,%2,%3,%4};" :: "l"(p), "r"(v.x), "r"(v.y), "r"(v.z), "r"(v.w) : "memory"); }
__device__ __forceinline__ uint4 nbx_ld_pf(const void* p) { uint4 r; asm volatile("ld.global.L2::256B.v4.u32 {%0,%1,%2,%3}, [%4];" : "=r"(r.x), "=r"(r.y), "=r"(r.z), "=r"(r.w) : "l"(p)); return r; }
#else
__device__ __forceinline__ uint4 nbx_ld_cs(const void* p) { return *reinterpret_cast<const uint4*>(p); }
__device__ __forceinline__ uint4 nbx_ld_nc(const void* p) { return *reinterpret_cast<const uint4*>(p); }
__device__ __forceinline__ void nbx_st_cs(void* p, uint4 v) { *reinterpret_cast<uint4*>(p) = v; }
__device__ __forceinline__ uint4 nbx_ld_pf(const void* p) { return *reinterpret_cast<const uint4*>(p); }
#endif
// Two floats to a packed pair of 16-bit floats (lo in the low half), one cvt per pair on the device
// (sm_80 on: the packed cvt is an Ampere instruction).
// Callers route NaN through the scalar nbx_f2bf / nbx_f2h (c10's NaN bits); finite and infinite values
// round the same either way (round to nearest even).
${pairCvt('nbx_f2bf2', 'bf16x2', 'nbx_f2bf')}
${pairCvt('nbx_f2h2', 'f16x2', 'nbx_f2h')}
`;

/** Plain loads, only in modules that use them (the helpers are part of every module's cache key). */
const LD_CA_HELPER = String.raw`
#ifdef __CUDA_ARCH__
__device__ __forceinline__ uint4 nbx_ld_ca(const void* p) { uint4 r; asm volatile("ld.global.ca.v4.u32 {%0,%1,%2,%3}, [%4];" : "=r"(r.x), "=r"(r.y), "=r"(r.z), "=r"(r.w) : "l"(p)); return r; }
#else
__device__ __forceinline__ uint4 nbx_ld_ca(const void* p) { return *reinterpret_cast<const uint4*>(p); }
#endif
`;

/** The packed-pair converter of a 16-bit float output dtype. */
const PAIR_CVT: Partial<Record<DTypeName, string>> = { bfloat16: 'nbx_f2bf2', float16: 'nbx_f2h2' };

/**
 * Statements filling container `r` (V >= 2 elements of a 16-bit float `d`) from the float array `f`:
 * one packed cvt per pair (half the conversions, and no shifts to pack). A vector holding a NaN takes
 * the scalar path, whose NaN bits are c10's; the branch is uniform in practice (NaN is rare).
 * Where HBM bounds the kernel the packing changes nothing; it is kept for the fewer instructions, and
 * `ewOverride.scalarPack` selects the scalar path for comparison (figures: BENCHMARKS.md).
 */
function packPairs(d: DTypeName, f: string, r: string, V: number): string {
  const bytes = V * 2, scalar = d === 'bfloat16' ? 'nbx_f2bf' : 'nbx_f2h', v = `${r}s`;
  const words = [...Array(bytes / 4).keys()].map((w) => `${word(r, bytes, w)} = ${PAIR_CVT[d]}(${f}[${2 * w}], ${f}[${2 * w + 1}]);`);
  return `bool ${r}n = false;
      #pragma unroll
      for (int j = 0; j < ${V}; j++) ${r}n |= ${f}[j] != ${f}[j];
      if (__builtin_expect(${r}n, 0)) { unsigned short ${v}[${V}];
        #pragma unroll
        for (int j = 0; j < ${V}; j++) ${v}[j] = ${scalar}(${f}[j]);
        ${packN(d, v, r, V)} }
      else { ${words.join(' ')} }`;
}

/** `ca`: a plain ld.global (PyTorch's loads) instead of the read-only path `none` gets from const __restrict__; not in the tuned space (scripts/diag-ew.mjs). */
export type CacheHint = 'none' | 'cs' | 'pf' | 'ca';

interface VecPlan {
  expr: Expr; ins: StridedRef[]; out: StridedRef; V: number; U: number; hint: CacheHint;
  /** Element index (in storage elements) of vector u's first element, for input s and for the output. */
  inIdx: (s: number, u: number) => string; outIdx: (u: number) => string;
  /** Vector u is in range / all U vectors are. */
  guard: (u: number) => string; full: string;
  /** Inputs whose value is one per row (already loaded into `w<s>`), by slot. */
  rowValue?: boolean[];
  /** Inputs read through the read-only cache. */
  readOnly?: boolean[];
}

/**
 * U vectors per thread: when all are in range, every load is issued before any arithmetic (memory
 * parallelism); otherwise each vector is guarded.
 */
function vecBody(p: VecPlan): string {
  const { expr, ins, out, V, U, hint } = p;
  const OT = R.storageType(out.dtype), obytes = V * DTYPES[out.dtype].itemsize;
  const load = (s: number, u: number): string => {
    if (p.rowValue?.[s]) return '';
    const r = ins[s]!, T = R.storageType(r.dtype), bytes = V * DTYPES[r.dtype].itemsize, ptr = `in${s} + ${p.inIdx(s, u)}`;
    // single elements: const __restrict__ already makes them read-only-cache loads (LDG.E.CONSTANT)
    if (V === 1) return `const ${T} v${s}_${u}[1] = { in${s}[${p.inIdx(s, u)}] };`;
    const ld = bytes === 16 && p.readOnly?.[s] ? `nbx_ld_nc(${ptr})` : bytes === 16 && hint === 'cs' ? `nbx_ld_cs(${ptr})` : bytes === 16 && hint === 'pf' ? `nbx_ld_pf(${ptr})` : bytes === 16 && hint === 'ca' ? `nbx_ld_ca(${ptr})` : `*reinterpret_cast<const ${CONTAINER[bytes]}*>(${ptr})`;
    return `const ${CONTAINER[bytes]} r${s}_${u} = ${ld}; const ${T} v${s}_${u}[${V}] = { ${unpackN(r.dtype, `r${s}_${u}`, V).join(', ')} };`;
  };
  const compute = (u: number): string => {
    const [code, res] = R.render(expr, (s, d) => (p.rowValue?.[s] ? `w${s}` : R.load(d, `v${s}_${u}`, 'j')), (s) => `p${s}`);
    const st = V === 1 ? `${R.store(out.dtype, 'out', p.outIdx(u), res)}` : `${R.store(out.dtype, `vo${u}`, 'j', res)}`;
    if (V === 1) return `{ const int j = 0; (void)j;\n      ${code}\n      ${st} }`;
    const optr = `out + ${p.outIdx(u)}`;
    const stv = obytes === 16 && hint === 'cs' ? `nbx_st_cs(${optr}, ro${u});` : `*reinterpret_cast<${CONTAINER[obytes]}*>(${optr}) = ro${u};`;
    if (PAIR_CVT[out.dtype] && !ewOverride.scalarPack) {
      return `{ float fo${u}[${V}]; ${CONTAINER[obytes]} ro${u};
      #pragma unroll
      for (int j = 0; j < ${V}; j++) {
        ${code}
        fo${u}[j] = ${res};
      }
      ${packPairs(out.dtype, `fo${u}`, `ro${u}`, V)}
      ${stv} }`;
    }
    return `{ ${OT} vo${u}[${V}]; ${CONTAINER[obytes]} ro${u};
      #pragma unroll
      for (int j = 0; j < ${V}; j++) {
        ${code}
        ${st}
      }
      ${packN(out.dtype, `vo${u}`, `ro${u}`, V)}
      ${stv} }`;
  };
  const us = [...Array(U).keys()];
  const loads = (u: number): string => ins.map((_, s) => load(s, u)).filter((x) => x).join(' ');
  if (U === 1) return `if (${p.guard(0)}) {\n      ${loads(0)}\n      ${compute(0)}\n    }`;
  return `if (${p.full}) {
      ${us.map(loads).join('\n      ')}
      ${us.map(compute).join('\n      ')}
    } else {
      ${us.map((u) => `if (${p.guard(u)}) {\n        ${loads(u)}\n        ${compute(u)}\n      }`).join('\n      ')}
    }`;
}

const inDecls = (ins: StridedRef[]): string[] => ins.map((r, i) => `const ${R.storageType(r.dtype)}* __restrict__ in${i}`);

/** One launch configuration of a vector kernel: threads per block, vectors per thread, cache hint. */
export type VecShape = readonly [T: number, U: number, hint: CacheHint];
/** A configuration's kernel name inside a sweep module (every candidate in one module). */
export const shapeName = ([T, U, hint]: VecShape): string => `ew_${T}_${U}_${hint}`;

/** A module: the vector helpers once, then each kernel. */
const vecModule = (kernels: string[], shapes: readonly VecShape[]): string =>
  `${VEC_HELPERS}${shapes.some((sh) => sh[2] === 'ca') ? LD_CA_HELPER : ''}\n${kernels.join('\n')}`;

/**
 * Contiguous operands: a one-pass grid of T-thread blocks, each thread U vectors of V elements.
 * Args: out, in..., n, oo, o_i..., params.
 */
export function flatSource(expr: Expr, ins: StridedRef[], out: StridedRef, V: number, U: number, T: number, hint: CacheHint, idx32: boolean, pTypes: string[]) {
  return flatModule(expr, ins, out, V, [[T, U, hint]], idx32, pTypes, 'ew');
}

/** Flat kernels for several configurations in one module (named by shapeName; `name` when there is one). */
export function flatModule(expr: Expr, ins: StridedRef[], out: StridedRef, V: number, shapes: readonly VecShape[], idx32: boolean, pTypes: string[], name?: string) {
  const args = [`${R.storageType(out.dtype)}* __restrict__ out`, ...inDecls(ins), 'long long n_', 'long long oo', ...ins.map((_, i) => `long long o${i}`), ...paramDecls(pTypes)];
  const sig: ArgType[] = ['ptr', ...ins.map(() => 'ptr' as ArgType), 'i64', 'i64', ...ins.map(() => 'i64' as ArgType), ...(pTypes as ArgType[])];
  const kernels = shapes.map((sh) => flatKernel(expr, ins, out, V, sh, idx32, args, name ?? shapeName(sh)));
  return { src: vecModule(kernels, shapes), name: name ?? shapeName(shapes[0]!), sig };
}

function flatKernel(expr: Expr, ins: StridedRef[], out: StridedRef, V: number, [T, U, hint]: VecShape, idx32: boolean, args: string[], name: string): string {
  const I = idx32 ? 'int' : 'long long';
  const body = vecBody({ expr, ins, out, V, U, hint, inIdx: (s, u) => `o${s} + q${u} * ${V}`, outIdx: (u) => `oo + q${u} * ${V}`,
    guard: (u) => `q${u} < nv`, full: `q${U - 1} < nv` });
  const [tcode, tres] = R.render(expr, (s, d) => R.load(d, `in${s}`, `o${s} + i`), (s) => `p${s}`);
  const tail = V === 1 ? '' : `if (blockIdx.x == 0 && (${I})threadIdx.x < n - nv * ${V}) {
    const ${I} i = nv * ${V} + threadIdx.x;
    ${tcode}
    ${R.store(out.dtype, 'out', 'oo + i', tres)}
  }`;
  return `extern "C" __global__ void __launch_bounds__(${T}) ${name}(${args.join(', ')}) {
  const ${I} n = (${I})n_, nv = n / ${V};
  const ${I} q0 = (${I})blockIdx.x * ${T * U} + threadIdx.x;
  ${[...Array(U).keys()].slice(1).map((u) => `const ${I} q${u} = q0 + ${u * T};`).join(' ')}
  ${body}
  ${tail}
}`;
}

/**
 * Rows x columns (up to 3 dims: rows = D0 * D1). Input s is contiguous along the row
 * (`perRow[s]` false: vectors) or one value per row (`perRow[s]` true); `readOnly[s]` reads its
 * 16-byte vectors through the read-only cache (ld.global.nc: the operand is constant over the rows, so
 * small and re-read; never the streaming hint). Single elements need no hint: const __restrict__
 * pointers already load through that cache.
 * A block of T threads is TX = 2^txlog threads along the row times T / TX rows; the 2-d block grid
 * is flattened (gx blocks per row band) so the launch stays 1-d.
 * Args: out, in..., C, D1, rows, gx, txlog, oo, (o_i, a_i, b_i)..., params;
 * input s's element (r0, r1, c) is at o_s + r0 * a_s + r1 * b_s + c * (perRow ? 0 : 1).
 */
export function bcastSource(expr: Expr, ins: StridedRef[], out: StridedRef, perRow: boolean[], readOnly: boolean[], three: boolean,
  V: number, U: number, T: number, hint: CacheHint, idx32: boolean, pTypes: string[]) {
  return bcastModule(expr, ins, out, perRow, readOnly, three, V, [[T, U, hint]], idx32, pTypes, 'ew');
}

/** Broadcast kernels for several configurations in one module (named by shapeName; `name` when there is one). */
export function bcastModule(expr: Expr, ins: StridedRef[], out: StridedRef, perRow: boolean[], readOnly: boolean[], three: boolean,
  V: number, shapes: readonly VecShape[], idx32: boolean, pTypes: string[], name?: string) {
  const args = [`${R.storageType(out.dtype)}* __restrict__ out`, ...inDecls(ins), 'long long C_', 'long long D1_', 'long long rows_', 'int gx', 'int txlog', 'long long oo',
    ...ins.flatMap((_, i) => [`long long o${i}`, `long long a${i}`, `long long b${i}`]), ...paramDecls(pTypes)];
  const sig: ArgType[] = ['ptr', ...ins.map(() => 'ptr' as ArgType), 'i64', 'i64', 'i64', 'i32', 'i32', 'i64', ...ins.flatMap(() => ['i64', 'i64', 'i64'] as ArgType[]), ...(pTypes as ArgType[])];
  const kernels = shapes.map((sh) => bcastKernel(expr, ins, out, perRow, readOnly, three, V, sh, idx32, args, name ?? shapeName(sh)));
  return { src: vecModule(kernels, shapes), name: name ?? shapeName(shapes[0]!), sig };
}

function bcastKernel(expr: Expr, ins: StridedRef[], out: StridedRef, perRow: boolean[], readOnly: boolean[], three: boolean,
  V: number, [T, U, hint]: VecShape, idx32: boolean, args: string[], name: string): string {
  const I = idx32 ? 'int' : 'long long';
  const body = vecBody({ expr, ins, out, V, U, hint, inIdx: (s, u) => `e${s} + q${u} * ${V}`, outIdx: (u) => `eo + q${u} * ${V}`,
    guard: (u) => `q${u} < cv`, full: `q${U - 1} < cv`, rowValue: perRow, readOnly });
  const rowVals = ins.map((r, s) => (perRow[s] ? `const ${R.storageType(r.dtype)} w${s}s[1] = { in${s}[e${s}] }; const ${R.computeType(r.dtype)} w${s} = ${R.load(r.dtype, `w${s}s`, '0')};` : '')).filter((x) => x);
  return `extern "C" __global__ void __launch_bounds__(${T}) ${name}(${args.join(', ')}) {
  const ${I} C = (${I})C_, rows = (${I})rows_, cv = C / ${V};
  ${three ? `const ${I} D1 = (${I})D1_;` : '(void)D1_;'}
  const int tx = threadIdx.x & ((1 << txlog) - 1), ty = threadIdx.x >> txlog, TX = 1 << txlog, TY = ${T} >> txlog;
  const int bx = blockIdx.x % gx, by = blockIdx.x / gx, gy = gridDim.x / gx;
  const ${I} q0 = (${I})bx * (TX * ${U}) + tx;
  ${[...Array(U).keys()].slice(1).map((u) => `const ${I} q${u} = q0 + ${u} * TX;`).join(' ')}
  for (${I} r = (${I})by * TY + ty; r < rows; r += (${I})gy * TY) {
    ${three ? `const ${I} r0 = r / D1, r1 = r - r0 * D1;` : `const ${I} r1 = r;`}
    const long long eo = oo + (long long)r * C;
    ${ins.map((_, s) => `const long long e${s} = o${s} + ${three ? `r0 * a${s} + ` : ''}r1 * b${s};`).join(' ')}
    ${rowVals.join('\n    ')}
    ${body}
  }
}`;
}

/**
 * The 2-d tiled kernel: a 32x32 tile per block (32x8 threads). Inputs marked `transposed` are read
 * down their contiguous dimension into shared memory, then every thread computes along the output's
 * rows; other inputs are read directly (row-contiguous or broadcast).
 */
export function tiledSource(expr: Expr, ins: StridedRef[], out: StridedRef, transposed: boolean[], pTypes: string[]) {
  const args = [`${R.storageType(out.dtype)}* __restrict__ out`, ...inDecls(ins),
    'long long rows', 'long long cols', 'long long oo', ...ins.flatMap((_, i) => [`long long o${i}`, `long long sr${i}`, `long long sc${i}`]), ...paramDecls(pTypes)];
  const sig: ArgType[] = ['ptr', ...ins.map(() => 'ptr' as ArgType), 'i64', 'i64', 'i64', ...ins.flatMap(() => ['i64', 'i64', 'i64'] as ArgType[]), ...(pTypes as ArgType[])];
  const [code, res] = R.render(expr, (s, d) => (transposed[s] ? `tile${s}[i][threadIdx.x]` : R.load(d, `in${s}`, `o${s} + r * sr${s} + c * sc${s}`)), (s) => `p${s}`);
  const tiles = ins.map((r, s) => (transposed[s] ? `__shared__ ${R.computeType(r.dtype)} tile${s}[32][33];` : '')).join(' ');
  // load: thread (x, y) reads rows r0+x (contiguous for a transposed input) of columns c0+y, c0+y+8, ...
  const loads = ins.map((r, s) => (transposed[s] ? `for (int i = threadIdx.y; i < 32; i += 8) { const long long r = r0 + threadIdx.x, c = c0 + i;
        if (r < rows && c < cols) tile${s}[threadIdx.x][i] = ${R.load(r.dtype, `in${s}`, `o${s} + r * sr${s} + c * sc${s}`)}; }` : '')).join('\n      ');
  const src = `extern "C" __global__ void __launch_bounds__(256) ew(${args.join(', ')}) {
  ${tiles}
  const long long c0 = (long long)blockIdx.x * 32;
  for (long long rt = blockIdx.y; rt * 32 < rows; rt += gridDim.y) {
    const long long r0 = rt * 32;
    ${loads}
    __syncthreads();
    for (int i = threadIdx.y; i < 32; i += 8) {
      const long long r = r0 + i, c = c0 + threadIdx.x;
      if (r < rows && c < cols) {
        ${code}
        ${R.store(out.dtype, 'out', 'oo + r * cols + c', res)}
      }
    }
    __syncthreads();
  }
}`;
  return { src, name: 'ew', sig };
}

/** Any strides: the linear output index decomposed into coordinates per element (grid-stride). */
export function stridedSource(expr: Expr, ins: StridedRef[], out: StridedRef, nd: number, pTypes: string[], idx32: boolean) {
  const I = idx32 ? 'int' : 'long long';
  const dims = [...Array(nd).keys()];
  const args = [`${R.storageType(out.dtype)}* __restrict__ out`, ...inDecls(ins),
    'long long n_', 'long long oo', ...dims.map((d) => `long long s${d}`),
    ...ins.flatMap((_, i) => [`long long o${i}`, ...dims.map((d) => `long long st${i}_${d}`)]), ...paramDecls(pTypes)];
  const sig: ArgType[] = ['ptr', ...ins.map(() => 'ptr' as ArgType), 'i64', 'i64', ...dims.map(() => 'i64' as ArgType),
    ...ins.flatMap(() => ['i64' as ArgType, ...dims.map(() => 'i64' as ArgType)]), ...(pTypes as ArgType[])];
  const [code, res] = R.render(expr, (s, d) => R.load(d, `in${s}`, `j${s}`), (s) => `p${s}`);
  // decompose the linear output index into coordinates, innermost first
  const decompose = dims.slice().reverse().map((d) => `{ const ${I} c = rem % (${I})s${d}; rem /= (${I})s${d}; ${ins.map((_, i) => `j${i} += c * (${I})st${i}_${d};`).join(' ')} }`).join('\n      ');
  const src = `extern "C" __global__ void __launch_bounds__(1024) ew(${args.join(', ')}) {
  const ${I} n = (${I})n_;
  for (${I} i = blockIdx.x * (${I})blockDim.x + threadIdx.x; i < n; i += (${I})gridDim.x * blockDim.x) {
    ${I} rem = i; ${ins.map((_, i) => `${I} j${i} = (${I})o${i};`).join(' ')}
    ${decompose}
    ${code}
    ${R.store(out.dtype, 'out', 'oo + i', res)}
  }
}`;
  return { src, name: 'ew', sig };
}

// ---- dispatch ------------------------------------------------------------------------------------

/**
 * Tests and measurements: force one configuration of the flat and broadcast kernels (null: tuned);
 * `scalarPack` makes the vector kernels convert 16-bit float outputs one element at a time, as before the
 * packed pairs (scripts/diag-ew.mjs compares the two on the card).
 */
export const ewOverride: { config: Config | null; scalarPack: boolean } = { config: null, scalarPack: false };

const ptrOf = (r: StridedRef): bigint => (r.buf as CudaBuffer).ptr;

// ---- launch geometry -----------------------------------------------------------------------------
// Pure functions of the problem and the configuration (no device), so tests can check termination,
// coverage and index ranges for every configuration at sizes no test could run.

/** Largest gridDim.x of a launch. */
export const MAX_GRID_X = 2 ** 31 - 1;
/** Row bands of the broadcast kernel at most (rows beyond loop inside the kernel). */
export const MAX_ROW_BANDS = 1 << 20;
/** Indices stay 32-bit below this many elements (every index a vector kernel forms is < 2^31). */
export const IDX32_LIMIT = 2 ** 30;

export interface FlatGeometry { grid: number; nv: number; tail: number }

/**
 * The flat kernel over `n` elements in vectors of V: `nv` full vectors, T * U of them per block, the
 * `tail` (< V <= 16 <= T elements) done by block 0's first threads.
 */
export function flatGeometry(n: number, V: number, T: number, U: number): FlatGeometry {
  const nv = Math.floor(n / V), tail = n - nv * V;
  const grid = Math.max(1, Math.ceil(nv / (T * U)));
  if (grid > MAX_GRID_X) throw new UnsupportedError('elementwise', `${n} elements need ${grid} blocks of ${T * U} vectors, more than a launch may have (${MAX_GRID_X})`);
  return { grid, nv, tail };
}

export interface BcastGeometry { txlog: number; TX: number; TY: number; U: number; gx: number; gy: number; grid: number }

/**
 * The broadcast kernel over `rows` rows of `C` elements in vectors of V: TX = 2^txlog threads along
 * a row (enough to cover it, at most T) times TY = T / TX rows per block; U shrinks so no unrolled
 * vector lies past every row's end; gx blocks along a row, gy row bands, each band stepping by gy * TY
 * rows (the kernel's only loop: its stride is never 0).
 */
export function bcastGeometry(C: number, rows: number, V: number, T: number, U0: number): BcastGeometry {
  const cv = C / V;
  let txlog = 0;
  while ((1 << txlog) < T && (1 << txlog) < cv) txlog++;
  const TX = 1 << txlog, TY = T / TX;
  let U = U0;
  while (U > 1 && TX * (U / 2) >= cv) U /= 2;
  const gx = Math.ceil(cv / (TX * U));
  if (gx > MAX_GRID_X) throw new UnsupportedError('elementwise', `rows of ${C} elements need ${gx} blocks each, more than a launch may have (${MAX_GRID_X})`);
  const gy = Math.max(1, Math.min(Math.ceil(rows / TY), Math.floor(MAX_GRID_X / gx), MAX_ROW_BANDS));
  return { txlog, TX, TY, U, gx, gy, grid: gx * gy };
}

const shapeOf = (c: Config): VecShape => [c.threads as number, c.unroll as number, c.hint as CacheHint];

/**
 * The tuned configuration, or, when the output shares a buffer with an input (an in-place update:
 * timing candidates would apply it repeatedly), a cached one without measuring. While a sweep runs,
 * `sweep.shapes` holds every candidate, so the first candidate's kernel compiles all of them in one
 * module (one NVRTC compile per sweep instead of one per candidate).
 */
function pickConfig(be: CudaDevice, space: typeof EW_FLAT_SPACE, shape: string, dtype: string, n: number, aliased: boolean,
  run: (c: Config) => void, sweep: { shapes: Config[] | null }): Config {
  if (ewOverride.config) return ewOverride.config;
  const fallback = space.defaultConfig;
  if (n < EW_TUNE_MIN_ELEMENTS) return fallback;
  const opts = { ...EW_SWEEP, candidates: (fit: readonly Config[]) => (sweep.shapes = ewCandidates(fit, n)) };
  try {
    return be.tuning.pick(space, shape, dtype, n, fallback, aliased ? null : run, opts);
  } finally {
    sweep.shapes = null;
  }
}

/** Distinct kernel shapes of a list of configurations (after `norm`, e.g. the broadcast kernel's U cap). */
function distinct(cfgs: readonly Config[], norm: (s: VecShape) => VecShape): VecShape[] {
  const seen = new Map<string, VecShape>();
  for (const c of cfgs) { const sh = norm(shapeOf(c)); seen.set(shapeName(sh), sh); }
  return [...seen.values()];
}

/** Evaluates `expr` into every element of `out` (contiguous), inputs broadcast to out's shape. */
export function runElementwise(be: CudaDevice, expr: Expr, ins: StridedRef[], params: (number | bigint)[], out: StridedRef): void {
  const shape = out.shape;
  let n = 1;
  for (let d = 0; d < shape.length; d++) n *= shape[d]!;
  if (n === 0) return;
  // The expression carries every dtype (loads and the final cast), so its key names the kernel.
  // Fast path: all inputs contiguous with out's shape: no stride analysis at all.
  let flat = true;
  for (const r of ins) if (!denseAs(r, shape)) { flat = false; break; }
  let cs: number[] = [], cst: number[][] = [];
  if (!flat) {
    for (const r of ins) be.checkDType('elementwise', r.dtype);
    const outStrides: number[] = [];
    { let acc = 1; for (let d = shape.length - 1; d >= 0; d--) { outStrides[d] = acc; acc *= shape[d]!; } }
    ({ shape: cs, strides: cst } = coalesce(shape, [outStrides, ...ins.map((r) => broadcastStrides(r.shape, r.strides, shape))]));
    flat = cs.length <= 1 && cst.slice(1).every((st) => (st[0] ?? 1) === 1);
  }
  const idx32 = n < IDX32_LIMIT;
  const outPtr = ptrOf(out);
  const aliased = ins.some((r) => ptrOf(r) === outPtr);
  let maxItem = DTYPES[out.dtype].itemsize;
  for (const r of ins) maxItem = Math.max(maxItem, DTYPES[r.dtype].itemsize);
  const V0 = 16 / maxItem;
  const pTypes = (): string[] => expr.paramDTypes().map((d) => R.paramType(d));
  const checkOut = (): void => { for (const r of ins) be.checkDType('elementwise', r.dtype); be.checkDType('elementwise', out.dtype); };
  const dkey = `${ins.length}in:${maxItem}B`;
  const sweep: { shapes: Config[] | null } = { shapes: null };

  if (flat) {
    // 16-byte vectors (for the widest operand) when every offset is a multiple of V.
    const V = V0 > 1 && out.offset % V0 === 0 && ins.every((r) => r.offset % V0 === 0) ? V0 : 1;
    const args: KernelArg[] = [outPtr];
    for (const r of ins) args.push(ptrOf(r));
    args.push(n, out.offset);
    for (const r of ins) args.push(r.offset);
    for (const p of params) args.push(p);
    const run = (c: Config): void => {
      const sh = shapeOf(c), [T, U] = sh;
      const { grid } = flatGeometry(n, V, T, U);
      // A sweep's candidates come from one module under their own keys; the chosen configuration is then
      // compiled alone, as a later process (reading the cached choice) compiles it, so the kernels a first
      // run leaves in the cache are exactly the ones the next process needs (and what ships for cold starts).
      const k = be.kernel(`ew:f${V}:${T}:${U}:${sh[2]}:${idx32}:${expr.key}${sweep.shapes ? ':sweep' : ''}${ewOverride.scalarPack ? ':scalarpack' : ''}`, () => {
        checkOut();
        if (!sweep.shapes) return flatSource(expr, ins, out, V, U, T, sh[2], idx32, pTypes());
        return { ...flatModule(expr, ins, out, V, distinct(sweep.shapes, (x) => x), idx32, pTypes()), name: shapeName(sh) };
      });
      be.launch(k, grid, T, args);
    };
    run(pickConfig(be, EW_FLAT_SPACE, `${V > 1 ? 'v' : 's'}:${bucketSize(n)}`, dkey, n, aliased, run, sweep));
    return;
  }

  const nd = cs.length;
  const inner = (i: number): number => cst[i + 1]![nd - 1]!;
  if (nd <= 3 && ins.every((_, i) => inner(i) === 0 || inner(i) === 1)) {
    const C = cs[nd - 1]!, D1 = nd >= 2 ? cs[nd - 2]! : 1, rows = n / C, three = nd === 3;
    const perRow = ins.map((_, i) => inner(i) === 0);
    const rowStrides = ins.map((_, i) => (nd === 3 ? [cst[i + 1]![0]!, cst[i + 1]![1]!] : nd === 2 ? [0, cst[i + 1]![0]!] : [0, 0]));
    // constant over the rows (a row vector, a scalar): small and re-read by every row, so read-only cached
    const readOnly = ins.map((r, i) => rows > 1 && rowStrides[i]!.every((s) => s === 0) && ptrOf(r) !== outPtr);
    const vecOk = V0 > 1 && C % V0 === 0 && out.offset % V0 === 0 &&
      ins.every((r, i) => perRow[i] || (r.offset % V0 === 0 && rowStrides[i]!.every((s) => s % V0 === 0)));
    const V = vecOk ? V0 : 1;
    const args: KernelArg[] = [outPtr];
    for (const r of ins) args.push(ptrOf(r));
    const head = args.length;
    const tail: KernelArg[] = [out.offset];
    ins.forEach((r, i) => tail.push(r.offset, rowStrides[i]![0]!, rowStrides[i]![1]!));
    for (const p of params) tail.push(p);
    const tkey = `${perRow.map((p, i) => (p ? 'r' : readOnly[i] ? 'c' : 'v')).join('')}${three ? '3' : ''}`;
    // the kernel's U: capped by the row length (no unrolled vector that no row has)
    const capU = ([T, U, h]: VecShape): VecShape => [T, bcastGeometry(C, rows, V, T, U).U, h];
    const run = (c: Config): void => {
      const [T, U0, hint] = shapeOf(c);
      const g = bcastGeometry(C, rows, V, T, U0), sh: VecShape = [T, g.U, hint];
      const k = be.kernel(`ew:b${V}:${tkey}:${T}:${g.U}:${hint}:${idx32}:${expr.key}${sweep.shapes ? ':sweep' : ''}${ewOverride.scalarPack ? ':scalarpack' : ''}`, () => {
        checkOut();
        if (!sweep.shapes) return bcastSource(expr, ins, out, perRow, readOnly, three, V, g.U, T, hint, idx32, pTypes());
        return { ...bcastModule(expr, ins, out, perRow, readOnly, three, V, distinct(sweep.shapes, capU), idx32, pTypes()), name: shapeName(sh) };
      });
      const a = args.slice(0, head);
      a.push(C, D1, rows, g.gx, g.txlog, ...tail);
      be.launch(k, g.grid, T, a);
    };
    // the key names the layout (row vector, column, scalar, 3-d; one row): each is a different kernel
    run(pickConfig(be, EW_BCAST_SPACE, `${V > 1 ? 'v' : 's'}${tkey}${rows === 1 ? '1' : ''}:${bucketSize(n)}`, dkey, n, aliased, run, sweep));
    return;
  }

  // A 2-d problem where some input runs down the columns (a transpose): stage those inputs through
  // shared-memory tiles, so both their reads and the output's writes are coalesced.
  const transposed = nd === 2 ? ins.map((_, i) => cst[i + 1]![0] === 1 && cst[i + 1]![1] !== 1 && cst[i + 1]![1] !== 0) : [];
  if (transposed.some((t) => t) && cs[0]! >= 32 && cs[1]! >= 32) {
    const tkey = transposed.map((t) => (t ? 'T' : 'n')).join('');
    const k = be.kernel(`ew:tile:${tkey}:${idx32}:${expr.key}`, () => { checkOut(); return tiledSource(expr, ins, out, transposed, pTypes()); });
    const [rows, cols] = cs as [number, number];
    const args = [...[out, ...ins].map(ptrOf), rows, cols, out.offset, ...ins.flatMap((r, i) => [r.offset, cst[i + 1]![0]!, cst[i + 1]![1]!]), ...params];
    const gx = Math.ceil(cols / 32), gy = Math.min(Math.ceil(rows / 32), 65535);
    be.ctx.launch(k, [gx, gy], [32, 8], args, 0, be.stream);
    return;
  }
  const k = be.kernel(`ew:nd${nd}:${idx32}:${expr.key}`, () => { checkOut(); return stridedSource(expr, ins, out, nd, pTypes(), idx32); });
  const args = [...[out, ...ins].map(ptrOf), n, out.offset, ...cs, ...ins.flatMap((r, i) => [r.offset, ...cst[i + 1]!]), ...params];
  const def = { threads: be.tuning.profile.defaults.elementwise.threadsPerBlock, waves: 16 };
  const run = (c: Config): void => { const t = c.threads as number; be.launch(k, be.gridFor(n, t, c.waves as number), t, args); };
  // one kernel for every configuration (threads and waves are launch parameters): a sweep compiles nothing
  run(n < EW_TUNE_MIN_ELEMENTS ? def : be.tuning.pick(ELEMENTWISE_SPACE, `nd${nd}:${bucketSize(n)}`, dkey, n, def, aliased ? null : run, EW_SWEEP));
}
