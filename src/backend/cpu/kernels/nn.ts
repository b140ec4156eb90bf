// CPU kernels: nn. Softmax-family rows, row normalizations (layer/rms/group norm, per-row moments),
// negative log likelihood and local response normalization.
//
// Every kernel walks "rows" (all positions but the reduced dim) of a strided operand with an odometer and
// loads each row into scratch memory, computes, and stores it rounded once to the output dtype, so a
// softmax over a non-last dim needs no transposed copy. Rows of float32/float16/bfloat16 go through a
// WebAssembly SIMD module (float32 arithmetic as PyTorch's CPU kernels, float64 sums); float64 rows,
// and every row where SIMD is unavailable, through scalar JavaScript in double.

import type { StridedRef } from '../../backend.js';
import type { BackendKernels } from '../../../kernels/table.js';
import { DTYPES, type StorageArray } from '../../../dtype/dtypes.js';
import { IndexError } from '../../../errors.js';
import { f16Table, fromBFloat16Bits, toBFloat16Bits, toFloat16Bits } from '../../../dtype/convert.js';
import type { LrnParams, NllParams, RowNormParams, SoftmaxParams } from '../../../kernels/nn.js';
import { uleb, sleb, vec, section, bytesOf, name } from '../../../ir/wasm.js';

// ---- row access ----------------------------------------------------------------------------------

let BF16: Float32Array | undefined;
function bf16Table(): Float32Array {
  if (!BF16) { BF16 = new Float32Array(65536); for (let h = 0; h < 65536; h++) BF16[h] = fromBFloat16Bits(h); }
  return BF16;
}

/** Reads n elements of `ref` (element `base`, step `stride`) into dst[0..n) as doubles. */
export function loadRow(ref: StridedRef, base: number, stride: number, n: number, dst: Float64Array): void {
  const a = ref.buf as StorageArray;
  const st = DTYPES[ref.dtype].storage;
  if (st === 'f32' || st === 'f64') {
    const f = a as Float32Array | Float64Array;
    if (stride === 1) dst.set(f.subarray(base, base + n));
    else for (let j = 0, i = base; j < n; j++, i += stride) dst[j] = f[i]!;
    return;
  }
  if (ref.dtype === 'float16' || ref.dtype === 'bfloat16') {
    const t = ref.dtype === 'float16' ? f16Table() : bf16Table();
    const u = a as Uint16Array;
    for (let j = 0, i = base; j < n; j++, i += stride) dst[j] = t[u[i]!]!;
    return;
  }
  throw new Error(`nn kernels: unsupported dtype ${ref.dtype}`);
}

/** Writes src[0..n) into `ref` (element `base`, step `stride`), rounding once to its dtype. */
export function storeRow(ref: StridedRef, base: number, stride: number, n: number, src: Float64Array): void {
  const a = ref.buf as StorageArray;
  const st = DTYPES[ref.dtype].storage;
  if (st === 'f32' || st === 'f64') {
    const f = a as Float32Array | Float64Array;
    if (stride === 1) f.set(src.subarray(0, n), base);
    else for (let j = 0, i = base; j < n; j++, i += stride) f[i] = src[j]!;
    return;
  }
  if (ref.dtype === 'float16' || ref.dtype === 'bfloat16') {
    const enc = ref.dtype === 'float16' ? toFloat16Bits : toBFloat16Bits;
    const u = a as Uint16Array;
    for (let j = 0, i = base; j < n; j++, i += stride) u[i] = enc(src[j]!);
    return;
  }
  throw new Error(`nn kernels: unsupported dtype ${ref.dtype}`);
}

/**
 * Calls fn(offsets, r) for every row r (C order over all dims but `dim`, one dim or several) with each
 * ref's element offset of that row's first element; strides[q] are ref q's strides over the same shape.
 */
export function forRows(shape: readonly number[], dim: number | readonly number[], strides: readonly (readonly number[])[], offsets: readonly number[],
  fn: (offs: number[], r: number) => void): void {
  const skip = typeof dim === 'number' ? [dim] : dim;
  const dims = [...shape.keys()].filter((d) => !skip.includes(d));
  let rows = 1;
  for (const d of dims) rows *= shape[d]!;
  if (rows === 0) return;
  const cur = offsets.slice();
  const idx = new Array<number>(dims.length).fill(0);
  for (let r = 0; r < rows; r++) {
    fn(cur, r);
    for (let k = dims.length - 1; k >= 0; k--) {
      const d = dims[k]!;
      for (let q = 0; q < cur.length; q++) cur[q]! += strides[q]![d]!;
      if (++idx[k]! < shape[d]!) break;
      for (let q = 0; q < cur.length; q++) cur[q]! -= strides[q]![d]! * shape[d]!;
      idx[k] = 0;
    }
  }
}

let scratch = new Float64Array(1024);
const scratchOf = (n: number): Float64Array => (scratch.length >= n ? scratch : (scratch = new Float64Array(n)));

// ---- exp -----------------------------------------------------------------------------------------

// exp(t) = 2^(k/64) · e^r with k = round(t·64/ln2), |r| <= ln2/128: a degree-5 polynomial is accurate to
// a few double ulps, and the table lookups are cheaper than Math.exp in V8 (the softmax hot loop).
const K64 = 64 / Math.LN2, LN2_64_HI = 0.010830424696223417, LN2_64_LO = 2.572804622327669e-14;
const EXP_FRAC = new Float64Array(64).map((_, j) => 2 ** (j / 64));
const EXP_INT = new Float64Array(2200).map((_, i) => 2 ** (i - 1100));

/** e^t for t <= 0 (softmax arguments after subtracting the max); NaN propagates. */
function expNonPos(t: number): number {
  if (!(t > -745)) return t === t ? 0 : t;
  const k = Math.round(t * K64);
  const r = (t - k * LN2_64_HI) - k * LN2_64_LO;
  const p = 1 + r * (1 + r * (0.5 + r * (1 / 6 + r * (1 / 24 + r * (1 / 120)))));
  return p * EXP_FRAC[k & 63]! * EXP_INT[(k >> 6) + 1100]!;
}

// ---- softmax -------------------------------------------------------------------------------------

/** In-place softmax (or log-softmax) of buf[0..n), in double. */
function softmaxRow(buf: Float64Array, n: number, log: boolean, safe: boolean): void {
  let m = -Infinity;
  for (let j = 0; j < n; j++) { const v = buf[j]!; if (v > m || v !== v) m = v; }
  if (m === -Infinity) { buf.fill(safe ? 0 : NaN, 0, n); return; } // -inf - -inf is NaN, as PyTorch
  let s = 0;
  if (log) {
    for (let j = 0; j < n; j++) s += expNonPos(buf[j]! - m);
    const lse = m + Math.log(s);
    for (let j = 0; j < n; j++) buf[j] = buf[j]! - lse;
    return;
  }
  for (let j = 0; j < n; j++) { const e = expNonPos(buf[j]! - m); buf[j] = e; s += e; }
  const inv = 1 / s;
  for (let j = 0; j < n; j++) buf[j] = buf[j]! * inv;
}

// ---- WebAssembly SIMD rows (float32 arithmetic, float64 sums) ----------------------------------------
//
// Scalar JavaScript spends ~20 ns per Math.exp; a 128-bit SIMD module (assembled here byte by byte; V8
// compiles it to SSE/AVX) does four float32 exps in a few ns. Rows whose input and output are float32 or
// half types go through it: the row is copied into the module's memory as float32, padded to a multiple
// of 16 with -inf (exp gives 0, the max is unchanged), and processed in place. exp is Cephes' expf
// (~1 ulp); sums accumulate in float64, like the scalar path.


/** A function body under construction: params, then `nLocals` v128 locals; emits a stack-machine program. */
class Fn {
  readonly c: number[] = [];
  constructor(readonly nParams: number, public nV = 0) {}
  v(): number { return this.nParams + this.nV++; }
  e(...b: number[]): this { this.c.push(...b); return this; }
  get(l: number): this { return this.e(0x20, ...uleb(l)); }
  set(l: number): this { return this.e(0x21, ...uleb(l)); }
  op(code: number, ...imm: number[]): this { return this.e(0xfd, ...uleb(code), ...imm); }
  f32s(x: number): this { return this.op(0x0c, ...bytesOf(new Float32Array([x, x, x, x]))); }
  f64s(x: number): this { return this.op(0x0c, ...bytesOf(new Float64Array([x, x]))); }
  i32s(x: number): this { return this.op(0x0c, ...bytesOf(new Int32Array([x, x, x, x]))); }
  load(p: number): this { return this.get(p).op(0x00, 4, 0); }
  f32(x: number): this { return this.e(0x43, ...bytesOf(new Float32Array([x]))); }
  /** for (p = param0; p < param0 + 4·param1; p += step) body() — p is an i32 local. */
  rows(p: number, body: () => void, step = 16): this {
    this.get(0).set(p);
    this.e(0x02, 0x40, 0x03, 0x40).get(p).get(0).get(1).e(0x41, ...sleb(2), 0x74, 0x6a, 0x4f, 0x0d, 1);
    body();
    return this.get(p).e(0x41, ...sleb(step), 0x6a).set(p).e(0x0c, 0, 0x0b, 0x0b);
  }
  /** The encoded body: v128 locals first (indices from nParams, as v() hands them out), then nI32 i32 locals. */
  body(nI32: number): number[] {
    const locals = vec([...(this.nV ? [[...uleb(this.nV), 0x7b]] : []), [...uleb(nI32), 0x7f]]);
    const b = [...locals, ...this.c, 0x0b];
    return [...uleb(b.length), ...b];
  }
}

// SIMD opcodes used below.
const F32X4 = { add: 0xe4, sub: 0xe5, mul: 0xe6, pmax: 0xeb, ne: 0x42, eq: 0x41, splat: 0x13, lane: 0x1f };
const V128 = { and: 0x4e, or: 0x50, anyTrue: 0x53 };
const F64X2 = { add: 0xf0, sub: 0xf1, mul: 0xf2, splat: 0x14, lane: 0x21, promote: 0x5f, demote: 0x5e };
const I32X4 = { add: 0xae, sub: 0xb1, shl: 0xab, shr: 0xac };
const SHUFFLE = 0x0d, HI_TO_LO = [8, 9, 10, 11, 12, 13, 14, 15, 0, 1, 2, 3, 4, 5, 6, 7], JOIN_LO = [0, 1, 2, 3, 4, 5, 6, 7, 16, 17, 18, 19, 20, 21, 22, 23];
const CEPHES_P = [1.9875691500e-4, 1.3981999507e-3, 8.3334519073e-3, 4.1665795894e-2, 1.6666665459e-1, 5.0000001201e-1];

/**
 * Leaves exp(t + lo) of the v128 locals t, lo (float32 lanes; t <= 0 or NaN, lo a tiny correction) on
 * the stack; kf, r: scratch locals.
 */
function emitExp(f: Fn, t: number, lo: number, kf: number, r: number): void {
  const MAGIC = 12582912; // 1.5·2^23: adding it rounds to an integer held in the low mantissa bits
  f.get(t).f32s(-110).op(F32X4.pmax).set(t); // below -110 exp is 0 in float32; pmax(NaN, c) keeps the NaN
  f.get(t).f32s(Math.LOG2E).op(F32X4.mul).f32s(MAGIC).op(F32X4.add).set(kf); // kf = k + MAGIC, k = round(t·log2 e)
  f.get(t).get(kf).f32s(MAGIC).op(F32X4.sub).set(r); // r = k (as a float) for the reduction
  f.get(r).f32s(0.693359375).op(F32X4.mul).op(F32X4.sub).get(r).f32s(-2.12194440e-4).op(F32X4.mul).op(F32X4.sub);
  f.get(lo).op(F32X4.add).set(r); // r = t - k·ln2 + lo (Cody-Waite: the first product is exact)
  f.f32s(CEPHES_P[0]!);
  for (const c of CEPHES_P.slice(1)) f.get(r).op(F32X4.mul).f32s(c).op(F32X4.add);
  f.get(r).get(r).op(F32X4.mul).op(F32X4.mul).get(r).op(F32X4.add).f32s(1).op(F32X4.add);
  // times 2^k as 2^(k>>1) · 2^(k - (k>>1)): k down to -159 (subnormal results) keeps both factors normal
  f.get(kf).i32s(0x4b400000).op(I32X4.sub).set(kf); // the integer k from the bits
  f.get(kf).e(0x41, 1).op(I32X4.shr).set(r);
  f.get(r).i32s(127).op(I32X4.add).e(0x41, 23).op(I32X4.shl).op(F32X4.mul);
  f.get(kf).get(r).op(I32X4.sub).i32s(127).op(I32X4.add).e(0x41, 23).op(I32X4.shl).op(F32X4.mul);
}

/** t = x + nm rounded, lo = its exact rounding error (TwoSum; NaN errors, from infinities, become 0). */
function emitTwoSum(f: Fn, x: number, nm: number, t: number, lo: number, bb: number): void {
  f.get(x).get(nm).op(F32X4.add).set(t);
  f.get(t).get(x).op(F32X4.sub).set(bb);
  f.get(x).get(t).get(bb).op(F32X4.sub).op(F32X4.sub).get(nm).get(bb).op(F32X4.sub).op(F32X4.add).set(lo);
  f.get(lo).get(lo).get(lo).op(F32X4.eq).op(V128.and).set(lo);
}

/**
 * Exports (rows at byte address p, n4 floats, n4 a multiple of 16):
 *   max(p, n4) -> f32                max of the row (NaN if any)
 *   expsum(p, n4, m: f32, store) -> f64   sum of exp(x - m); with store, x = exp(x - m) in place
 *   scale(p, n4, s: f32)             x = x · s
 *   sub(p, n4, c: f64)               x = float32(x - c), the difference taken in float64
 */
function softmaxModule(): Uint8Array<ArrayBuffer> {
  const I32 = 0x7f, F32 = 0x7d, F64 = 0x7c;
  const fns: { type: number[]; body: number[]; name: string }[] = [];
  { // max: pmax (one instruction, no NaN rule) in 4 independent chains; NaN lanes flagged separately
    const f = new Fn(2); const acc = [f.v(), f.v(), f.v(), f.v()], nan = f.v(), v = f.v(), p = 2 + f.nV;
    for (const a of acc) f.f32s(-Infinity).set(a);
    f.i32s(0).set(nan);
    f.rows(p, () => {
      acc.forEach((a, k) => {
        f.get(p).op(0x00, 4, 16 * k).set(v);
        f.get(a).get(v).op(F32X4.pmax).set(a);
        f.get(nan).get(v).get(v).op(F32X4.ne).op(V128.or).set(nan);
      });
    }, 64);
    f.get(acc[0]!).get(acc[1]!).op(F32X4.pmax).get(acc[2]!).get(acc[3]!).op(F32X4.pmax).op(F32X4.pmax).set(v);
    f.get(v).op(F32X4.lane, 0).get(v).op(F32X4.lane, 1).e(0x97).get(v).op(F32X4.lane, 2).get(v).op(F32X4.lane, 3).e(0x97, 0x97);
    f.f32(NaN).get(nan).op(V128.anyTrue).e(0x45, 0x1b); // select(max, NaN, !anyNaN)
    fns.push({ name: 'max', type: [0x60, ...vec([[I32], [I32]]), ...vec([[F32]])], body: f.body(1) });
  }
  { // expsum: two vectors per step, x - m taken exactly (TwoSum) so large logits lose nothing
    const f = new Fn(4); const nm = f.v(), s0 = f.v(), s1 = f.v();
    const lanes = [0, 1].map(() => ({ x: f.v(), t: f.v(), lo: f.v(), kf: f.v(), r: f.v(), e: f.v() }));
    const p = 4 + f.nV;
    f.f32s(0).get(2).op(F32X4.splat).op(F32X4.sub).set(nm).f64s(0).set(s0).f64s(0).set(s1);
    f.rows(p, () => {
      lanes.forEach((l, k) => {
        f.get(p).op(0x00, 4, 16 * k).set(l.x);
        emitTwoSum(f, l.x, nm, l.t, l.lo, l.r);
        emitExp(f, l.t, l.lo, l.kf, l.r);
        f.set(l.e);
      });
      f.get(3).e(0x04, 0x40); // if (store) write the exps back
      lanes.forEach((l, k) => f.get(p).get(l.e).op(0x0b, 4, 16 * k));
      f.e(0x0b);
      for (const l of lanes) {
        f.get(s0).get(l.e).op(F64X2.promote).op(F64X2.add).set(s0);
        f.get(s1).get(l.e).get(l.e).op(SHUFFLE, ...HI_TO_LO).op(F64X2.promote).op(F64X2.add).set(s1);
      }
    }, 32);
    f.get(s0).get(s1).op(F64X2.add).set(s0).get(s0).op(F64X2.lane, 0).get(s0).op(F64X2.lane, 1).e(0xa0);
    fns.push({ name: 'expsum', type: [0x60, ...vec([[I32], [I32], [F32], [I32]]), ...vec([[F64]])], body: f.body(1) });
  }
  { // scale
    const f = new Fn(3); const sv = f.v(), p = 3 + f.nV;
    f.get(2).op(F32X4.splat).set(sv).rows(p, () => f.get(p).load(p).get(sv).op(F32X4.mul).op(0x0b, 4, 0));
    fns.push({ name: 'scale', type: [0x60, ...vec([[I32], [I32], [F32]]), 0], body: f.body(1) });
  }
  { // sub
    const f = new Fn(3); const cv = f.v(), x = f.v(), p = 3 + f.nV;
    f.get(2).op(F64X2.splat).set(cv).rows(p, () => {
      f.load(p).set(x).get(p);
      f.get(x).op(F64X2.promote).get(cv).op(F64X2.sub).op(F64X2.demote);
      f.get(x).get(x).op(SHUFFLE, ...HI_TO_LO).op(F64X2.promote).get(cv).op(F64X2.sub).op(F64X2.demote);
      f.op(SHUFFLE, ...JOIN_LO).op(0x0b, 4, 0);
    });
    fns.push({ name: 'sub', type: [0x60, ...vec([[I32], [I32], [F64]]), 0], body: f.body(1) });
  }
  { // moments: sums of (x - k) and (x - k)^2 in float64 (the row padded with k adds nothing)
    const f = new Fn(3); const kv = f.v(), x = f.v(), d = f.v(), a = [f.v(), f.v()], q = [f.v(), f.v()], p = 3 + f.nV;
    f.get(2).op(F64X2.splat).set(kv);
    for (const l of [...a, ...q]) f.f64s(0).set(l);
    f.rows(p, () => {
      f.load(p).set(x);
      [0, 1].forEach((h) => {
        f.get(x);
        if (h) f.get(x).op(SHUFFLE, ...HI_TO_LO);
        f.op(F64X2.promote).get(kv).op(F64X2.sub).set(d);
        f.get(a[h]!).get(d).op(F64X2.add).set(a[h]!);
        f.get(q[h]!).get(d).get(d).op(F64X2.mul).op(F64X2.add).set(q[h]!);
      });
    });
    for (const u of [a, q]) f.get(u[0]!).get(u[1]!).op(F64X2.add).set(d).get(d).op(F64X2.lane, 0).get(d).op(F64X2.lane, 1).e(0xa0);
    fns.push({ name: 'moments', type: [0x60, ...vec([[I32], [I32], [F64]]), ...vec([[F64], [F64]])], body: f.body(1) });
  }
  { // norm: x = float32(((x - mean)·rstd)·w + b), in float64; w and b are rows at byte addresses wp, bp
    const f = new Fn(6); const mv = f.v(), rv = f.v(), x = f.v(), w = f.v(), b = f.v(), p = 6 + f.nV, o = p + 1;
    f.get(2).op(F64X2.splat).set(mv).get(3).op(F64X2.splat).set(rv);
    f.rows(p, () => {
      f.load(p).set(x);
      f.get(p).get(0).e(0x6b).set(o); // o = offset within the row
      f.get(o).get(4).e(0x6a).op(0x00, 4, 0).set(w).get(o).get(5).e(0x6a).op(0x00, 4, 0).set(b);
      f.get(p);
      [0, 1].forEach((h) => {
        const half = (v: number): void => { f.get(v); if (h) f.get(v).op(SHUFFLE, ...HI_TO_LO); f.op(F64X2.promote); };
        half(x); f.get(mv).op(F64X2.sub).get(rv).op(F64X2.mul);
        half(w); f.op(F64X2.mul);
        half(b); f.op(F64X2.add).op(F64X2.demote);
      });
      f.op(SHUFFLE, ...JOIN_LO).op(0x0b, 4, 0);
    });
    fns.push({ name: 'norm', type: [0x60, ...vec([[I32], [I32], [F64], [F64], [I32], [I32]]), 0], body: f.body(2) });
  }
  return new Uint8Array([0x00, 0x61, 0x73, 0x6d, 1, 0, 0, 0,
    ...section(1, vec(fns.map((f) => f.type))),
    ...section(3, vec(fns.map((_, i) => uleb(i)))),
    ...section(5, vec([[0x00, 1]])), // memory: 1 page to start, grown on demand
    ...section(7, vec([[...name('mem'), 0x02, 0], ...fns.map((f, i) => [...name(f.name), 0x00, ...uleb(i)])])),
    ...section(10, vec(fns.map((f) => f.body))),
  ]);
}

interface SimdRows {
  moments(p: number, n4: number, k: number): [number, number];
  norm(p: number, n4: number, mean: number, rstd: number, wp: number, bp: number): void;
  max(p: number, n4: number): number;
  expsum(p: number, n4: number, m: number, store: number): number;
  scale(p: number, n4: number, s: number): void;
  sub(p: number, n4: number, c: number): void;
  mem: WebAssembly.Memory;
}
let simdState: SimdRows | null | undefined;
/** The module, or null where WebAssembly SIMD is unavailable (the scalar path runs then). */
function simdRows(): SimdRows | null {
  if (simdState === undefined) {
    try {
      const inst = new WebAssembly.Instance(new WebAssembly.Module(softmaxModule()));
      const x = inst.exports as unknown as SimdRows & { mem: WebAssembly.Memory };
      simdState = { moments: x.moments, norm: x.norm, max: x.max, expsum: x.expsum, scale: x.scale, sub: x.sub, mem: x.mem };
    } catch (e) {
      simdState = null;
      console.warn(`nbxtensor: WebAssembly SIMD rows unavailable (${(e as Error).message}); using scalar JavaScript`);
    }
  }
  return simdState;
}
/**
 * Float32 views of the module memory, `count` consecutive rows of n floats (the memory grows first:
 * growing detaches older views). The views are kept per (n, count) until the memory grows, so the
 * per-call kernels (a norm or softmax of every layer, every token) allocate none; callers read the
 * returned list, never change it.
 */
function simdRows32(s: SimdRows, n: number, count = 1): readonly Float32Array[] {
  const need = count * n * 4 - s.mem.buffer.byteLength;
  if (need > 0) s.mem.grow(Math.ceil(need / 65536));
  if (rowViewsOf !== s.mem.buffer) { rowViews.clear(); rowViewsOf = s.mem.buffer; }
  const key = n * 32 + count; // count <= 16
  let views = rowViews.get(key);
  if (views === undefined) {
    views = Array.from({ length: count }, (_, i) => new Float32Array(s.mem.buffer, i * n * 4, n));
    if (rowViews.size >= 64) rowViews.clear(); // many row lengths (a test sweep): a bounded cache
    rowViews.set(key, views);
  }
  return views;
}
let rowViewsOf: ArrayBuffer | null = null;
const rowViews = new Map<number, readonly Float32Array[]>();

/** Moves one row between a float32/float16/bfloat16 ref and `row` (float32): loads, or stores when `store`. */
function rowF32(ref: StridedRef, base: number, stride: number, n: number, row: Float32Array, store: boolean): void {
  if (ref.dtype === 'float32' && stride === 1) {
    const f = ref.buf as Float32Array;
    if (store) f.set(row.subarray(0, n), base); else row.set(f.subarray(base, base + n));
    return;
  }
  tileF32(ref, base, stride, n, 1, row, n, store);
}
const F32ROW = new Set(['float32', 'float16', 'bfloat16']);

/**
 * Moves tc neighbouring rows (row t starts at element base + t, elements `stride` apart) between a
 * float32/half ref and dst (row t at dst[t·ld ..]): loads, or stores when `store`.
 */
function tileF32(ref: StridedRef, base: number, stride: number, n: number, tc: number, dst: Float32Array, ld: number, store: boolean): void {
  if (ref.dtype === 'float32') {
    const f = ref.buf as Float32Array;
    for (let j = 0, i = base; j < n; j++, i += stride) {
      if (store) for (let t = 0; t < tc; t++) f[i + t] = dst[t * ld + j]!;
      else for (let t = 0; t < tc; t++) dst[t * ld + j] = f[i + t]!;
    }
    return;
  }
  const u = ref.buf as Uint16Array;
  if (store) {
    const enc = ref.dtype === 'float16' ? toFloat16Bits : toBFloat16Bits;
    for (let j = 0, i = base; j < n; j++, i += stride) for (let t = 0; t < tc; t++) u[i + t] = enc(dst[t * ld + j]!);
  } else {
    const tab = ref.dtype === 'float16' ? f16Table() : bf16Table();
    for (let j = 0, i = base; j < n; j++, i += stride) for (let t = 0; t < tc; t++) dst[t * ld + j] = tab[u[i + t]!]!;
  }
}

export function cpuSoftmax(p: SoftmaxParams): void {
  const { x, out, dim, log } = p;
  const shape = x.shape;
  const n = shape.length ? shape[dim]! : 1;
  const xs = shape.length ? x.strides[dim]! : 1, os = shape.length ? out.strides[dim]! : 1;
  const mask = p.mask, maskBool = mask?.dtype === 'bool';
  const ms = mask && shape.length ? mask.strides[dim]! : 0;
  const causal = !!p.causal, L = shape.length >= 2 ? shape[shape.length - 2]! : 1, c0 = p.causalOffset ?? 0;
  const mbuf = mask && !maskBool ? new Float64Array(n) : undefined;
  const strides = [x.strides, out.strides, ...(mask ? [mask.strides] : [])];
  const offsets = [x.offset, out.offset, ...(mask ? [mask.offset] : [])];
  /** Negation, mask and causal mask on a loaded row. */
  const prepare = (row: Float32Array | Float64Array, o: number[], r: number): void => {
    if (p.negate) for (let j = 0; j < n; j++) row[j] = -row[j]!;
    if (mask) {
      if (maskBool) {
        const mb = mask.buf as Uint8Array;
        for (let j = 0, i = o[2]!; j < n; j++, i += ms) if (mb[i] === 0) row[j] = -Infinity;
      } else {
        loadRow(mask, o[2]!, ms, n, mbuf!);
        for (let j = 0; j < n; j++) row[j] = row[j]! + mbuf![j]!;
      }
    }
    if (causal) row.fill(-Infinity, Math.max((r % L) + c0 + 1, 0), n);
  };
  const simd = F32ROW.has(x.dtype) && F32ROW.has(out.dtype) ? simdRows() : null;
  if (simd) {
    const n16 = (n + 15) & ~15; // the module steps up to 16 floats at a time
    /** Softmax of the row held at float offset `at` of the module memory (view: that row). */
    const rowSoftmax = (view: Float32Array, at: number): void => {
      view.fill(-Infinity, n, n16);
      const m = simd.max(at * 4, n16);
      if (m === -Infinity) view.fill(p.safe ? 0 : NaN, 0, n); // -inf - -inf is NaN, as PyTorch
      else if (log) simd.sub(at * 4, n16, m + Math.log(simd.expsum(at * 4, n16, m, 0)));
      else simd.scale(at * 4, n16, 1 / simd.expsum(at * 4, n16, m, 1));
    };
    // Along a strided dim, T neighbouring rows (adjacent in memory) are gathered together, so each step
    // reads T contiguous elements instead of one element per cache line.
    let inner = -1;
    for (let d = shape.length - 1; d >= 0 && inner < 0; d--) if (d !== dim && shape[d]! > 1) inner = d;
    if (xs !== 1 && inner >= 0 && x.strides[inner] === 1 && out.strides[inner] === 1 && !mask && !causal) {
      const size = shape[inner]!, T = Math.max(1, Math.min(16, size, Math.floor((1 << 22) / n16)));
      const views = simdRows32(simd, n16, T);
      const all = new Float32Array(simd.mem.buffer, 0, T * n16);
      forRows(shape, [dim, inner], [x.strides, out.strides], [x.offset, out.offset], (o) => {
        for (let t0 = 0; t0 < size; t0 += T) {
          const tc = Math.min(T, size - t0);
          tileF32(x, o[0]! + t0, xs, n, tc, all, n16, false);
          for (let t = 0; t < tc; t++) {
            if (p.negate) for (let j = 0, v = views[t]!; j < n; j++) v[j] = -v[j]!;
            rowSoftmax(views[t]!, t * n16);
          }
          tileF32(out, o[1]! + t0, os, n, tc, all, n16, true);
        }
      });
      return;
    }
    const [row] = simdRows32(simd, n16) as [Float32Array];
    forRows(shape, dim, strides, offsets, (o, r) => {
      rowF32(x, o[0]!, xs, n, row, false);
      prepare(row, o, r);
      rowSoftmax(row, 0);
      rowF32(out, o[1]!, os, n, row, true);
    });
    return;
  }
  const buf = scratchOf(n);
  forRows(shape, dim, strides, offsets, (o, r) => {
    loadRow(x, o[0]!, xs, n, buf);
    prepare(buf, o, r);
    softmaxRow(buf, n, log, !!p.safe);
    storeRow(out, o[1]!, os, n, buf);
  });
}

// ---- row normalization ---------------------------------------------------------------------------

function decodeAll(ref: StridedRef | undefined): Float64Array | undefined {
  if (!ref) return undefined;
  const n = ref.shape.reduce((a, b) => a * b, 1);
  const d = new Float64Array(n);
  loadRow(ref, ref.offset, 1, n, d);
  return d;
}

/**
 * (mean, variance) of a row from its shifted sums: shifting by the first element avoids catastrophic
 * cancellation when |mean| >> std; rms_norm takes the plain mean square.
 */
function rowStats(rms: boolean, s1: number, s2: number, k: number, n: number): [number, number] {
  return rms ? [0, s2 / n] : [k + s1 / n, Math.max((s2 - (s1 * s1) / n) / n, 0)];
}

// The SIMD path and the scalar path are separate functions, so that each is optimized (and, on a new
// layout, deoptimized) on its own and a decode step's norm compiles only the path it runs.
export function cpuRowNorm(p: RowNormParams): void {
  const { x, rows, out } = p;
  const affine = !!(p.weight || p.bias);
  const means = p.mean ? new Float64Array(rows) : undefined, vars = p.var ? new Float64Array(rows) : undefined;
  const simd = F32ROW.has(x.dtype) && (!out || F32ROW.has(out.dtype)) && (!p.weight || F32ROW.has(p.weight.dtype))
    && (!p.bias || F32ROW.has(p.bias.dtype)) && (!affine || ((p.groups ?? 1) === 1 && (p.chan ?? 1) === 1)) ? simdRows() : null;
  if (simd) rowNormSimd(p, simd, means, vars);
  else rowNormScalar(p, affine, means, vars);
  if (means) storeRow(p.mean!, p.mean!.offset, 1, rows, means);
  if (vars) storeRow(p.var!, p.var!.offset, 1, rows, vars);
}

function rowNormSimd(p: RowNormParams, simd: SimdRows, means: Float64Array | undefined, vars: Float64Array | undefined): void {
  const { x, rows, n, eps, out } = p;
  const rms = p.mode === 'rms';
  const n16 = (n + 15) & ~15;
  const views = simdRows32(simd, n16, 3);
  const row = views[0]!, wrow = views[1]!, brow = views[2]!;
  if (p.weight) rowF32(p.weight, p.weight.offset, 1, n, wrow, false); else wrow.fill(1);
  if (p.bias) rowF32(p.bias, p.bias.offset, 1, n, brow, false); else brow.fill(0);
  for (let r = 0; r < rows; r++) {
    rowF32(x, x.offset + r * n, 1, n, row, false);
    const k = rms ? 0 : row[0]!;
    row.fill(k, n, n16); // padding equal to the shift adds nothing to the sums
    const [s1, s2] = simd.moments(0, n16, k);
    const [mean, v] = rowStats(rms, s1, s2, k, n);
    if (means) means[r] = mean;
    if (vars) vars[r] = v;
    if (!out) continue;
    simd.norm(0, n16, mean, 1 / Math.sqrt(v + eps), n16 * 4, 2 * n16 * 4);
    rowF32(out, out.offset + r * n, 1, n, row, true);
  }
}

function rowNormScalar(p: RowNormParams, affine: boolean, means: Float64Array | undefined, vars: Float64Array | undefined): void {
  const { x, rows, n, eps, out } = p;
  const rms = p.mode === 'rms';
  const groups = p.groups ?? 1, chan = p.chan ?? 1, cpg = n / chan;
  const w = decodeAll(p.weight), b = decodeAll(p.bias);
  const buf = scratchOf(n);
  for (let r = 0; r < rows; r++) {
    loadRow(x, x.offset + r * n, 1, n, buf);
    const k = rms || n === 0 ? 0 : buf[0]!;
    let s1 = 0, s2 = 0;
    for (let j = 0; j < n; j++) { const d = buf[j]! - k; s1 += d; s2 += d * d; }
    const [mean, v] = rowStats(rms, s1, s2, k, n);
    if (means) means[r] = mean;
    if (vars) vars[r] = v;
    if (!out) continue;
    const rstd = 1 / Math.sqrt(v + eps);
    for (let j = 0; j < n; j++) buf[j] = (buf[j]! - mean) * rstd;
    if (affine) {
      const base = (r % groups) * cpg;
      for (let c = 0, j = 0; c < cpg; c++) {
        for (let s = 0; s < chan; s++, j++) {
          buf[j] = buf[j]! * (w ? w[base + c]! : 1) + (b ? b[base + c]! : 0); // chan 1: c === j
        }
      }
    }
    storeRow(out, out.offset + r * n, 1, n, buf);
  }
}

// ---- negative log likelihood ---------------------------------------------------------------------

export function cpuNllLoss(p: NllParams): void {
  const { input, target, N, C, D, ignoreIndex } = p;
  const w = decodeAll(p.weight);
  const tb = target.buf as BigInt64Array | Uint8Array;
  const big = target.dtype === 'int64';
  const row = scratchOf(C);
  const losses = p.out ? new Float64Array(N * D) : undefined;
  let sum = 0, wsum = 0;
  for (let i = 0; i < N; i++) {
    for (let d = 0; d < D; d++) {
      const k = i * D + d;
      const t = big ? Number((tb as BigInt64Array)[target.offset + k]!) : (tb as Uint8Array)[target.offset + k]!;
      if (t === ignoreIndex) continue;
      if (!(t >= 0 && t < C)) throw new IndexError('nll_loss', `Target ${t} is out of bounds.`);
      loadRow(input, input.offset + (i * C + t) * D + d, 0, 1, row);
      const wt = w ? w[t]! : 1;
      const l = -wt * row[0]!;
      if (losses) losses[k] = l;
      sum += l;
      wsum += wt;
    }
  }
  if (losses) storeRow(p.out!, p.out!.offset, 1, N * D, losses);
  if (p.sums) storeRow(p.sums, p.sums.offset, 1, 2, Float64Array.of(sum, wsum));
}

// ---- local response normalization ----------------------------------------------------------------

/** y[c] = x[c] / (k + alpha/size · sum of x^2 over channels [c - size/2, c + (size-1)/2] (zero padded))^beta. */
export function cpuLocalResponseNorm(p: LrnParams): void {
  const { x, out, dim, size, alpha, beta, k } = p;
  const n = x.shape[dim]!, lo = Math.floor(size / 2), hi = Math.floor((size - 1) / 2);
  const buf = scratchOf(n), pre = new Float64Array(n + 1);
  forRows(x.shape, dim, [x.strides, out.strides], [x.offset, out.offset], (o) => {
    loadRow(x, o[0]!, x.strides[dim]!, n, buf);
    for (let j = 0; j < n; j++) pre[j + 1] = pre[j]! + buf[j]! * buf[j]!;
    for (let c = 0; c < n; c++) {
      const s = pre[Math.min(n, c + hi + 1)]! - pre[Math.max(0, c - lo)]!;
      buf[c] = buf[c]! / (k + (alpha * s) / size) ** beta;
    }
    storeRow(out, o[1]!, out.strides[dim]!, n, buf);
  });
}

export const kernels = {
  local_response_norm: cpuLocalResponseNorm,
  softmax: cpuSoftmax,
  nll_loss: cpuNllLoss,
  row_norm: cpuRowNorm,
} satisfies BackendKernels;
