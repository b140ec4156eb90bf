// The CPU's packed-weight kernels (contract: src/kernels/quant.ts; formats defined by
// src/quant/formats.ts's dequantizeRows). Activations float32, bfloat16 or float16, accumulated in double
// (JavaScript numbers), stored once in the output dtype.
//
// Decode (m ≤ GEMV_ROWS), weights in the quant memory (src/quant/wasm_memory.ts: what quantize() and the
// loaders make on the CPU): WebAssembly SIMD kernels (quant_simd.ts) read the packed bytes in place, for
// int8, int4, fp8 and every GGUF format (a float32 scratch and its SIMD dot remain for formats without
// a kernel of their own). Elsewhere (plain arrays, or no WebAssembly), JavaScript loops:
// one pass over the packed bytes, no float copy of the weight. The scale is taken
// out of the inner sum (Σ_k x·(q·s) = s·Σ_k x·q per channel or group), and int4's zero point too
// (Σ x·(q − z) = Σ x·q − z·Σ x, the group sums of x computed once per call), so the inner loops are
// integer-to-double multiply-adds on bytes: this differs from dequantize-then-matmul only in rounding
// order (measured in BENCHMARKS.md: packed int8/int4 GEMV against the float32 path). GGUF block formats
// other than q8_0/q4_0 dequantize a few rows at a time into a small float scratch and dot it (their
// block layouts interleave scales with data; a per-format loop is future work).
// Prefill (m > GEMV_ROWS): tiles of rows dequantized into a float32 scratch fed to the gemm kernel, so
// the float path's BLAS or SIMD kernel does the flops.

import type { StridedRef } from '../../backend.js';
import type { BackendKernels } from '../../../kernels/table.js';
import type { DequantizeParams, QuantFeatures, QuantMatmulParams } from '../../../kernels/quant.js';
import type { DTypeName } from '../../../dtype/dtypes.js';
import { f16Table, fromBFloat16Bits, toBFloat16Bits, toFloat16Bits } from '../../../dtype/convert.js';
import { UnsupportedError } from '../../../errors.js';
import { QUANT_FORMATS, dequantizeRows, fp8E4M3Table } from '../../../quant/formats.js';
import { gemm } from './gemm.js';
import { quantModule, SIMD_NAMES, type QuantSimd } from './quant_simd.js';
import { parallelRows } from './quant_threads.js';
import { MAX_PAGES, allocRegion, freeRegion, isResident, memoryBytes, quantMemory } from '../../../quant/wasm_memory.js';

/**
 * Up to this many rows each row runs the decode GEMV on its own, so a row's result does not depend on how
 * many rows came with it (the engine's batched decode steps, up to its default 16 sequences, give each
 * sequence its solo numbers, as setRowInvariant does for float products); more rows (prefill) go
 * through tiles of dequantized rows and the float gemm.
 */
const GEMV_ROWS = 16;
/** Rows of float32 scratch per prefill tile: ~512 KiB (L2-sized), at least 8 rows. */
const TILE_BYTES = 512 << 10;

const u8 = (r: StridedRef): Uint8Array => {
  const b = r.buf as Uint8Array;
  return r.offset === 0 ? b : b.subarray(r.offset);
};
const f32 = (r: StridedRef | undefined): Float32Array | null => {
  if (!r) return null;
  const b = r.buf as Float32Array;
  return r.offset === 0 ? b : b.subarray(r.offset);
};

/** x [m, k] as float32 (a view when it already is). */
function activations(x: StridedRef, len: number): Float32Array {
  if (x.dtype === 'float32') return (x.buf as Float32Array).subarray(x.offset, x.offset + len);
  const src = x.buf as Uint16Array, out = new Float32Array(len), o = x.offset;
  if (x.dtype === 'bfloat16') for (let i = 0; i < len; i++) out[i] = fromBFloat16Bits(src[o + i]!);
  else { const t = f16Table(); for (let i = 0; i < len; i++) out[i] = t[src[o + i]!]!; }
  return out;
}

/** Writes value v (a double) at out[i] in the output dtype (one rounding). */
function storer(out: StridedRef): (i: number, v: number) => void {
  const o = out.offset;
  if (out.dtype === 'float32') { const b = out.buf as Float32Array; return (i, v) => { b[o + i] = v; }; }
  const b = out.buf as Uint16Array;
  // double → float32 → half: the contract accumulates in float32, then rounds to the dtype
  if (out.dtype === 'bfloat16') return (i, v) => { b[o + i] = toBFloat16Bits(Math.fround(v)); };
  return (i, v) => { b[o + i] = toFloat16Bits(Math.fround(v)); };
}

function biasValues(bias: StridedRef | undefined, n: number): Float32Array | null {
  return bias ? activations(bias, n) : null;
}

function checkDType(d: DTypeName): void {
  if (d !== 'float32' && d !== 'bfloat16' && d !== 'float16') throw new UnsupportedError('quant_matmul', `the CPU quant kernels take float32, bfloat16 or float16 activations, got ${d}`);
}

/** Decode: every output row n = one pass over the packed row, for each of the m (≤ GEMV_ROWS) inputs. */
function gemv(p: QuantMatmulParams, x: Float32Array, acc: Float64Array): void {
  const l = p.layout, N = l.n, K = l.k, M = p.m, rb = l.rowBytes;
  const q = u8(p.qweight), s = f32(p.scales), z = f32(p.zeros);
  switch (l.format) {
    case 'int8': {
      const qi = new Int8Array(q.buffer, q.byteOffset, q.byteLength);
      for (let m = 0; m < M; m++) {
        const xo = m * K;
        for (let n = 0; n < N; n++) {
          const o = n * rb;
          let s0 = 0, s1 = 0, s2 = 0, s3 = 0, k = 0;
          for (; k + 3 < K; k += 4) {
            s0 += x[xo + k]! * qi[o + k]!; s1 += x[xo + k + 1]! * qi[o + k + 1]!;
            s2 += x[xo + k + 2]! * qi[o + k + 2]!; s3 += x[xo + k + 3]! * qi[o + k + 3]!;
          }
          for (; k < K; k++) s0 += x[xo + k]! * qi[o + k]!;
          acc[m * N + n] = (s0 + s1 + s2 + s3) * s![n]!;
        }
      }
      return;
    }
    case 'fp8_e4m3': {
      const lut = fp8E4M3Table(), perTensor = s!.length === 1;
      for (let m = 0; m < M; m++) {
        const xo = m * K;
        for (let n = 0; n < N; n++) {
          const o = n * rb;
          let s0 = 0, s1 = 0, k = 0;
          for (; k + 1 < K; k += 2) { s0 += x[xo + k]! * lut[q[o + k]!]!; s1 += x[xo + k + 1]! * lut[q[o + k + 1]!]!; }
          for (; k < K; k++) s0 += x[xo + k]! * lut[q[o + k]!]!;
          acc[m * N + n] = (s0 + s1) * (perTensor ? s![0]! : s![n]!);
        }
      }
      return;
    }
    case 'int4': {
      const g = l.groupSize, G = K / g, hb = g >> 1;
      // group sums of x, for the zero points
      const xs = new Float64Array(M * G);
      for (let m = 0; m < M; m++) for (let gi = 0; gi < G; gi++) {
        let t = 0;
        for (let k = gi * g; k < (gi + 1) * g; k++) t += x[m * K + k]!;
        xs[m * G + gi] = t;
      }
      for (let m = 0; m < M; m++) {
        const xo = m * K;
        for (let n = 0; n < N; n++) {
          let total = 0;
          for (let gi = 0; gi < G; gi++) {
            const bo = n * rb + gi * hb, xg = xo + gi * g;
            let s0 = 0, s1 = 0;
            for (let j = 0; j < hb; j++) {
              const b = q[bo + j]!;
              s0 += x[xg + 2 * j]! * (b & 15);
              s1 += x[xg + 2 * j + 1]! * (b >> 4);
            }
            const zg = z ? z[n * G + gi]! : 8;
            total += (s0 + s1 - zg * xs[m * G + gi]!) * s![n * G + gi]!;
          }
          acc[m * N + n] = total;
        }
      }
      return;
    }
    case 'q8_0': {
      // blocks of 34 bytes: f16 d, 32 int8
      const qi = new Int8Array(q.buffer, q.byteOffset, q.byteLength), h = f16Table(), B = K / 32;
      for (let m = 0; m < M; m++) {
        const xo = m * K;
        for (let n = 0; n < N; n++) {
          let total = 0;
          for (let blk = 0; blk < B; blk++) {
            const o = n * rb + blk * 34, xb = xo + blk * 32;
            const d = h[q[o]! | (q[o + 1]! << 8)]!;
            let t = 0;
            for (let j = 0; j < 32; j++) t += x[xb + j]! * qi[o + 2 + j]!;
            total += t * d;
          }
          acc[m * N + n] = total;
        }
      }
      return;
    }
    case 'q4_0': {
      // blocks of 18 bytes: f16 d, 16 bytes: x[j] = d·(lo − 8), x[j+16] = d·(hi − 8)
      const h = f16Table(), B = K / 32;
      for (let m = 0; m < M; m++) {
        const xo = m * K;
        for (let n = 0; n < N; n++) {
          let total = 0;
          for (let blk = 0; blk < B; blk++) {
            const o = n * rb + blk * 18, xb = xo + blk * 32;
            const d = h[q[o]! | (q[o + 1]! << 8)]!;
            let t = 0, xsum = 0;
            for (let j = 0; j < 16; j++) {
              const b = q[o + 2 + j]!, a = x[xb + j]!, c = x[xb + j + 16]!;
              t += a * (b & 15) + c * (b >> 4);
              xsum += a + c;
            }
            total += (t - 8 * xsum) * d;
          }
          acc[m * N + n] = total;
        }
      }
      return;
    }
    default: {
      // other GGUF blocks: a few rows dequantized by the definition, then dotted
      const R = Math.max(1, Math.min(N, Math.floor((64 << 10) / K)));
      const w = new Float32Array(R * K);
      for (let n0 = 0; n0 < N; n0 += R) {
        const n1 = Math.min(N, n0 + R);
        dequantRowsFast(l, q, s, z, n0, n1, w);
        for (let m = 0; m < M; m++) {
          const xo = m * K;
          for (let n = n0; n < n1; n++) {
            const wo = (n - n0) * K;
            let s0 = 0, s1 = 0, k = 0;
            for (; k + 1 < K; k += 2) { s0 += x[xo + k]! * w[wo + k]!; s1 += x[xo + k + 1]! * w[wo + k + 1]!; }
            for (; k < K; k++) s0 += x[xo + k]! * w[wo + k]!;
            acc[m * N + n] = s0 + s1;
          }
        }
      }
    }
  }
}

let accBuf = new Float64Array(4096);

const q3Aux = new Uint32Array(4), q3Sc = new Int8Array(q3Aux.buffer);

/**
 * Rows [r0, r1) of a weight in a GGUF block format into out (K floats per row): ggml's dequantize_row_*
 * with the roundings of src/io/gguf.ts's dequantizeBlocks (the definition; the tests check these equal
 * it bit for bit), written without allocations (the definition's helpers allocate per sub-block, ~10 ns
 * an element; this is the per-token cost of a K-quant GEMV). Other formats: dequantizeRows.
 */
function dequantRowsFast(l: QuantMatmulParams['layout'], q: Uint8Array, s: Float32Array | null, z: Float32Array | null, r0: number, r1: number, out: Float32Array): void {
  const h = f16Table(), fr = Math.fround, K = l.k, rb = l.rowBytes;
  const f16 = (o: number): number => h[q[o]! | (q[o + 1]! << 8)]!;
  const i8 = (v: number): number => (v << 24) >> 24;
  let y = 0;
  switch (l.format) {
    case 'q4_1': case 'q5_0': case 'q5_1': {
      const fmt = l.format, bs = fmt === 'q4_1' ? 20 : fmt === 'q5_0' ? 22 : 24;
      for (let o = r0 * rb, end = r1 * rb; o < end; o += bs, y += 32) {
        const d = f16(o);
        if (fmt === 'q4_1') {
          const m = f16(o + 2);
          for (let j = 0; j < 16; j++) { const b = q[o + 4 + j]!; out[y + j] = fr(d * (b & 15)) + m; out[y + j + 16] = fr(d * (b >> 4)) + m; }
        } else {
          const withMin = fmt === 'q5_1', m = withMin ? f16(o + 2) : 0, qo = withMin ? 8 : 6;
          const hb = o + (withMin ? 4 : 2), qh = (q[hb]! | (q[hb + 1]! << 8) | (q[hb + 2]! << 16) | (q[hb + 3]! << 24)) >>> 0;
          for (let j = 0; j < 16; j++) {
            const b = q[o + qo + j]!;
            const lo = (b & 15) | (((qh >>> j) & 1) << 4), hi = (b >> 4) | (((qh >>> (j + 16)) & 1) << 4);
            out[y + j] = withMin ? fr(d * lo) + m : d * (lo - 16);
            out[y + j + 16] = withMin ? fr(d * hi) + m : d * (hi - 16);
          }
        }
      }
      return;
    }
    case 'q4_k': case 'q5_k': {
      const five = l.format === 'q5_k', bs = five ? 176 : 144, qo = five ? 48 : 16;
      for (let o = r0 * rb, end = r1 * rb; o < end; o += bs) {
        const d = f16(o), dmin = f16(o + 2), sc = o + 4;
        for (let j = 0, u = 1; j < 4; j++, u <<= 2) {
          const is = 2 * j;
          let s1: number, m1: number, s2: number, m2: number;
          if (is < 4) { s1 = q[sc + is]! & 63; m1 = q[sc + is + 4]! & 63; } else { s1 = (q[sc + is + 4]! & 15) | ((q[sc + is - 4]! >> 6) << 4); m1 = (q[sc + is + 4]! >> 4) | ((q[sc + is]! >> 6) << 4); }
          const i2 = is + 1;
          if (i2 < 4) { s2 = q[sc + i2]! & 63; m2 = q[sc + i2 + 4]! & 63; } else { s2 = (q[sc + i2 + 4]! & 15) | ((q[sc + i2 - 4]! >> 6) << 4); m2 = (q[sc + i2 + 4]! >> 4) | ((q[sc + i2]! >> 6) << 4); }
          const d1 = fr(d * s1), n1 = fr(dmin * m1), d2 = fr(d * s2), n2 = fr(dmin * m2);
          const qq = o + qo + j * 32;
          if (five) {
            for (let t = 0; t < 32; t++) out[y + t] = fr(d1 * ((q[qq + t]! & 15) + (q[o + 16 + t]! & u ? 16 : 0))) - n1;
            for (let t = 0; t < 32; t++) out[y + 32 + t] = fr(d2 * ((q[qq + t]! >> 4) + (q[o + 16 + t]! & (u << 1) ? 16 : 0))) - n2;
          } else {
            for (let t = 0; t < 32; t++) out[y + t] = fr(d1 * (q[qq + t]! & 15)) - n1;
            for (let t = 0; t < 32; t++) out[y + 32 + t] = fr(d2 * (q[qq + t]! >> 4)) - n2;
          }
          y += 64;
        }
      }
      return;
    }
    case 'q6_k':
      for (let o = r0 * rb, end = r1 * rb; o < end; o += 210, y += 256) {
        const d = f16(o + 208);
        for (let n = 0; n < 2; n++) {
          const ql = o + n * 64, qh = o + 128 + n * 32, sc = o + 192 + n * 8, yy = y + n * 128;
          for (let t = 0; t < 32; t++) {
            const is = t >> 4, hh = q[qh + t]!, a = q[ql + t]!, c = q[ql + t + 32]!;
            out[yy + t] = fr(d * i8(q[sc + is]!)) * (((a & 15) | ((hh & 3) << 4)) - 32);
            out[yy + t + 32] = fr(d * i8(q[sc + is + 2]!)) * (((c & 15) | (((hh >> 2) & 3) << 4)) - 32);
            out[yy + t + 64] = fr(d * i8(q[sc + is + 4]!)) * (((a >> 4) | (((hh >> 4) & 3) << 4)) - 32);
            out[yy + t + 96] = fr(d * i8(q[sc + is + 6]!)) * (((c >> 4) | (((hh >> 6) & 3) << 4)) - 32);
          }
        }
      }
      return;
    case 'q2_k':
      for (let o = r0 * rb, end = r1 * rb; o < end; o += 84) {
        const d = f16(o + 80), dmin = f16(o + 82);
        let is = 0;
        for (let n = 0; n < 2; n++) {
          const qq = o + 16 + n * 32;
          for (let shift = 0; shift < 8; shift += 2) {
            for (let half = 0; half < 32; half += 16) {
              const sc = q[o + is++]!, dl = fr(d * (sc & 15)), ml = fr(dmin * (sc >> 4));
              for (let t = 0; t < 16; t++) out[y++] = fr(dl * ((q[qq + half + t]! >> shift) & 3)) - ml;
            }
          }
        }
      }
      return;
    case 'q3_k':
      for (let o = r0 * rb, end = r1 * rb; o < end; o += 110) {
        const d = f16(o + 108);
        const so = o + 96;
        for (let i = 0; i < 3; i++) q3Aux[i] = q[so + 4 * i]! | (q[so + 4 * i + 1]! << 8) | (q[so + 4 * i + 2]! << 16) | (q[so + 4 * i + 3]! << 24);
        const k1 = 0x03030303, k2 = 0x0f0f0f0f, tmp = q3Aux[2]!;
        q3Aux[2] = ((q3Aux[0]! >>> 4) & k2) | (((tmp >>> 4) & k1) << 4);
        q3Aux[3] = ((q3Aux[1]! >>> 4) & k2) | (((tmp >>> 6) & k1) << 4);
        q3Aux[0] = (q3Aux[0]! & k2) | (((tmp >>> 0) & k1) << 4);
        q3Aux[1] = (q3Aux[1]! & k2) | (((tmp >>> 2) & k1) << 4);
        let is = 0, m = 1;
        for (let n = 0; n < 2; n++) {
          const qq = o + 32 + n * 32;
          for (let shift = 0; shift < 8; shift += 2, m <<= 1) {
            for (let half = 0; half < 32; half += 16) {
              const dl = fr(d * (q3Sc[is++]! - 32));
              for (let t = 0; t < 16; t++) out[y++] = dl * (((q[qq + half + t]! >> shift) & 3) - ((q[o + half + t]! & m) ? 0 : 4));
            }
          }
        }
      }
      return;
    default: dequantizeRows(l, q, s, z, r0, r1, out);
  }
}

let simdState: QuantSimd | null | undefined;
function quantSimd(): QuantSimd | null {
  if (simdState === undefined) {
    simdState = null;
    const mem = quantMemory();
    if (mem && process.env.NBX_QUANT_SIMD !== '0') {
      try {
        simdState = new WebAssembly.Instance(new WebAssembly.Module(quantModule(MAX_PAGES)), { e: { m: mem } }).exports as unknown as QuantSimd;
      } catch (e) {
        console.warn(`nbxtensor: WebAssembly SIMD quant kernels unavailable (${(e as Error).message}); using JavaScript loops`);
      }
    }
  }
  return simdState;
}

/** A scratch region of the quant memory, grown as needed (kept between calls). */
let scratch = { ptr: -1, bytes: 0 };
function scratchRegion(bytes: number): number {
  if (scratch.bytes < bytes) {
    if (scratch.ptr >= 0) freeRegion(scratch.ptr, scratch.bytes);
    const want = Math.max(bytes, 1 << 16);
    scratch = { ptr: allocRegion(want), bytes: want };
    if (scratch.ptr < 0) scratch.bytes = 0;
  }
  return scratch.ptr;
}

const SIMD_FORMATS = new Set(['int8', 'int4', 'fp8_e4m3', 'q8_0', 'q4_0', 'q4_1', 'q5_0', 'q5_1', 'q2_k', 'q3_k', 'q4_k', 'q5_k', 'q6_k']);

/**
 * The SIMD decode path: true when it ran (into acc, double values of float32 sums), false when the
 * weight is not in the quant memory or the shape does not fit a kernel (then the JavaScript loops run).
 */
function gemvSimd(p: QuantMatmulParams, x: Float32Array, acc: Float64Array): boolean {
  const l = p.layout, N = l.n, K = l.k, M = p.m;
  const qa = p.qweight.buf as Uint8Array;
  if (!isResident(qa)) return false;
  const direct = SIMD_FORMATS.has(l.format);
  if (l.format === 'int8' ? K % 32 !== 0 : l.format === 'fp8_e4m3' ? K % 16 !== 0 : l.format === 'int4' ? l.groupSize % 32 !== 0 : !direct && K % 4 !== 0) return false;
  const sim = quantSimd();
  if (!sim) return false;
  const G = l.format === 'int4' ? K / l.groupSize : ['q4_k', 'q5_k', 'q4_1', 'q5_0', 'q5_1'].includes(l.format) ? K / 32 : l.format === 'q2_k' ? K / 16 : 0;
  const s = f32(p.scales), z = f32(p.zeros);
  const sBytes = s ? s.byteLength : 0, zBytes = z ? z.byteLength : 0;
  // scratch: x [K], group sums [G], out [N], scales and zeros when not resident, float rows for other formats
  const rows = direct ? 0 : Math.max(1, Math.min(N, Math.floor((256 << 10) / (4 * K))));
  const sRes = !s || isResident(s), zRes = !z || isResident(z);
  const need = 4 * (K + G + N) + 64 * 4 + (sRes ? 0 : sBytes) + (zRes ? 0 : zBytes) + 4 * rows * K;
  const base = scratchRegion(need);
  if (base < 0) return false;
  const align = (v: number): number => Math.ceil(v / 64) * 64;
  const xp = base, xsp = align(xp + 4 * K), op = align(xsp + 4 * G), sp0 = align(op + 4 * N), zp0 = align(sp0 + (sRes ? 0 : sBytes)), wp = align(zp0 + (zRes ? 0 : zBytes));
  const mem = memoryBytes();
  const f32v = new Float32Array(mem.buffer);
  const sp = !s ? 0 : sRes ? s.byteOffset : (mem.set(new Uint8Array(s.buffer, s.byteOffset, sBytes), sp0), sp0);
  const zp = !z ? sp : zRes ? z.byteOffset : (mem.set(new Uint8Array(z.buffer, z.byteOffset, zBytes), zp0), zp0);
  const qp = qa.byteOffset + p.qweight.offset;
  for (let m = 0; m < M; m++) {
    f32v.set(x.subarray(m * K, (m + 1) * K), xp >>> 2);
    const rb = l.rowBytes, fn = (sim as unknown as Record<string, (...a: number[]) => void>);
    /** The kernel over rows [0, N), spread over worker threads for large weights (quant_threads.ts). */
    const rowsOf = (name: string, args: (n0: number, n1: number) => number[]): void =>
      parallelRows(() => quantModule(MAX_PAGES), quantMemory()!, SIMD_NAMES, name, N, K, args, (a) => fn[name]!(...a));
    /** Σx over every `w` elements of x, for the kernels that take zero points or block minimums that way. */
    const sums = (w: number): void => { for (let c = 0; c < K / w; c++) { let t = 0; for (let k = w * c; k < w * c + w; k++) t += f32v[(xp >>> 2) + k]!; f32v[(xsp >>> 2) + c] = t; } };
    switch (l.format) {
      case 'int8': rowsOf('i8', (n0, n1) => [xp, qp + n0 * rb, sp + 4 * n0, op + 4 * n0, n1 - n0, K]); break;
      case 'fp8_e4m3': {
        const per = s!.length === 1 ? 1 : 0;
        rowsOf('fp8', (n0, n1) => [xp, qp + n0 * rb, per ? sp : sp + 4 * n0, op + 4 * n0, n1 - n0, K, per]);
        break;
      }
      case 'int4': {
        sums(l.groupSize);
        rowsOf('int4', (n0, n1) => [xp, qp + n0 * rb, sp + 4 * n0 * G, z ? zp + 4 * n0 * G : sp + 4 * n0 * G, xsp, op + 4 * n0, n1 - n0, K, l.groupSize, z ? 1 : 0]);
        break;
      }
      case 'q8_0': case 'q4_0': case 'q6_k': case 'q3_k': rowsOf(l.format, (n0, n1) => [xp, qp + n0 * rb, op + 4 * n0, n1 - n0, K]); break;
      case 'q4_k': case 'q5_k': case 'q4_1': case 'q5_0': case 'q5_1': case 'q2_k':
        sums(l.format === 'q2_k' ? 16 : 32);
        rowsOf(l.format, (n0, n1) => [xp, qp + n0 * rb, xsp, op + 4 * n0, n1 - n0, K]);
        break;
      default: {
        const w = new Float32Array(mem.buffer, wp, rows * K);
        for (let n0 = 0; n0 < N; n0 += rows) {
          const n1 = Math.min(N, n0 + rows);
          dequantRowsFast(l, qa.subarray(p.qweight.offset), s, z, n0, n1, w);
          sim.f32(xp, wp, op + 4 * n0, n1 - n0, K);
        }
      }
    }
    for (let n = 0; n < N; n++) acc[m * N + n] = f32v[(op >>> 2) + n]!;
  }
  return true;
}

function cpuQuantMatmul(p: QuantMatmulParams): void {
  checkDType(p.dtype);
  const l = p.layout, N = l.n, K = l.k, M = p.m;
  if (!QUANT_FORMATS.includes(l.format)) throw new UnsupportedError('quant_matmul', `unknown format ${l.format}`);
  if (M === 0 || N === 0) return;
  const x = activations(p.x, M * K);
  const bias = biasValues(p.bias, N);
  const store = storer(p.out);
  if (M <= GEMV_ROWS) {
    if (accBuf.length < M * N) accBuf = new Float64Array(M * N);
    if (!gemvSimd(p, x, accBuf)) gemv(p, x, accBuf);
    for (let i = 0, m = 0; m < M; m++) for (let n = 0; n < N; n++, i++) store(i, bias ? Math.fround(accBuf[i]!) + bias[n]! : accBuf[i]!);
    return;
  }
  // prefill: tiles of dequantized rows through the gemm kernel (float32), into a float32 result
  const q = u8(p.qweight), s = f32(p.scales), z = f32(p.zeros);
  const R = Math.max(8, Math.min(N, Math.floor(TILE_BYTES / (4 * K))));
  const w = new Float32Array(R * K);
  const outF32 = p.dtype === 'float32' ? null : new Float32Array(M * N);
  const c: StridedRef = outF32 ? { buf: outF32, dtype: 'float32', shape: [M * N], strides: [1], offset: 0 } : p.out;
  const a: StridedRef = { buf: x, dtype: 'float32', shape: [M * K], strides: [1], offset: 0 };
  for (let n0 = 0; n0 < N; n0 += R) {
    const n1 = Math.min(N, n0 + R);
    dequantRowsFast(l, q, s, z, n0, n1, w);
    gemm({ transA: false, transB: true, m: M, n: n1 - n0, k: K, alpha: 1, beta: 0, a, lda: K,
      b: { buf: w, dtype: 'float32', shape: [(n1 - n0) * K], strides: [1], offset: 0 }, ldb: K,
      c: { ...c, offset: c.offset + n0 }, ldc: N });
  }
  if (outF32 || bias) {
    const src = outF32 ?? (p.out.buf as Float32Array).subarray(p.out.offset);
    for (let i = 0, m = 0; m < M; m++) for (let n = 0; n < N; n++, i++) store(i, bias ? Math.fround(src[i]! + bias[n]!) : src[i]!);
  }
}

function cpuDequantize(p: DequantizeParams): void {
  checkDType(p.dtype);
  const l = p.layout;
  const q = u8(p.qweight), s = f32(p.scales), z = f32(p.zeros);
  if (p.dtype === 'float32') { dequantRowsFast(l, q, s, z, 0, l.n, (p.out.buf as Float32Array).subarray(p.out.offset)); return; }
  const tmp = new Float32Array(l.n * l.k);
  dequantRowsFast(l, q, s, z, 0, l.n, tmp);
  const store = storer(p.out);
  for (let i = 0; i < tmp.length; i++) store(i, tmp[i]!);
}

export const kernels: BackendKernels = { quant_matmul: cpuQuantMatmul, dequantize: cpuDequantize };
/** Every format, float32 / bfloat16 / float16 activations. */
export const features: { quant: QuantFeatures } = { quant: { formats: QUANT_FORMATS, dtypes: ['float32', 'bfloat16', 'float16'] } };
