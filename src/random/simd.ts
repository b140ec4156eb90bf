// WebAssembly SIMD kernels: PyTorch's AVX2 normal_fill (float32 randn/normal of >= 16 values) and
// the MT19937 stream of float32 uniforms that feeds it (also used by rand).
//
// The scalar TypeScript kernel in sample.ts is the reference; this one computes the same bits four
// lanes at a time, because the emulation of PyTorch's fused multiply-adds (float FMA = exact double
// product + sum, rounded to float, with a tie check) is latency-bound in scalar JS.
//
// - Plain float32 operations (mul, add, sub, sqrt) use f32x4, which rounds exactly like AVX2.
// - Each FMA of the shipped binary is done on f64x2 halves: product and sum in double, then demote
//   to float. For the steps where the double sum is provably exact (the log polynomial and the
//   Cody-Waite reduction: exhaustively checked for all 2^24 uniforms) that is the fused result.
//   For the others the kernel flags a block when the double sum lands exactly halfway between two
//   floats (where double rounding could differ from a true FMA); sample.ts recomputes flagged blocks
//   with the scalar kernel. That happens for a few blocks per million.
// - The MT19937 twist runs 4 words at a time (the recurrence reads words >= 4 positions away), the
//   tempering and the (y & 0xffffff) * 2^-24 conversion likewise; the engine's state is copied in
//   and out around each batch, so the stream is the JS engine's, word for word.
//
// The module is assembled here, byte by byte, so no build step or binary blob is needed. If the
// platform lacks WebAssembly SIMD, `simdKernel()` returns undefined and the scalar kernels are used.

import type { MT19937 } from './mt19937.js';
import { uleb, sleb, section, name } from '../ir/wasm.js';

// ---- constants ---------------------------------------------------------------------------------

const fr = Math.fround;
const SQRTHF = fr(0.707106781186547524);
const LP = [7.0376836292e-2, -1.1514610310e-1, 1.1676998740e-1, -1.2420140846e-1, 1.4249322787e-1,
  -1.6668057665e-1, 2.0000714765e-1, -2.4999993993e-1, 3.3333331174e-1].map(fr);
const LQ1 = fr(-2.12194440e-4), LQ2 = fr(0.693359375);
const FOPI = fr(1.27323954473516);
const DP1 = fr(-0.78515625), DP2 = fr(-2.4187564849853515625e-4), DP3 = fr(-3.77489497744594108e-8);
const SC0 = fr(-1.9515295891e-4), SC1 = fr(8.3321608736e-3), SC2 = fr(-1.6666654611e-1);
const CC0 = fr(2.443315711809948e-5), CC1 = fr(-1.388731625493765e-3), CC2 = fr(4.166664568298827e-2);
const TWO_PI_F = fr(2.0 * Math.PI);

// ---- a tiny assembler --------------------------------------------------------------------------

const simd = (op: number): number[] => [0xfd, ...uleb(op)];

const OP = {
  f32x4_add: simd(0xe4), f32x4_sub: simd(0xe5), f32x4_mul: simd(0xe6), f32x4_sqrt: simd(0xe3),
  f32x4_neg: simd(0xe1), f32x4_lt: simd(0x43),
  f64x2_add: simd(0xf0), f64x2_sub: simd(0xf1), f64x2_mul: simd(0xf2), f64x2_eq: simd(0x47), f64x2_ne: simd(0x48),
  and: simd(0x4e), andnot: simd(0x4f), or: simd(0x50), xor: simd(0x51), bitselect: simd(0x52), any_true: simd(0x53),
  demote: simd(0x5e), promote: simd(0x5f),
  i32x4_shl: simd(0xab), i32x4_shr_u: simd(0xad), i32x4_add: simd(0xae), i32x4_sub: simd(0xb1), i32x4_eq: simd(0x37),
  trunc_sat_s: simd(0xf8), convert_s: simd(0xfa), i64x2_eq: simd(0xd6),
};

class Body {
  readonly code: number[] = [];
  private nV128 = 0;
  /** Hoisted v128 constants: key -> local; materialised once in the prologue (see hoist()). */
  private readonly consts = new Map<string, { local: number; bytes: number[] }>();
  private hoisting = false;
  constructor(private readonly nParams: number, private readonly nI32: number) {}
  /** A new v128 local. */
  v(): number { return this.nParams + this.nI32 + this.nV128++; }
  i32Local(k: number): number { return this.nParams + k; }
  emit(...bytes: (number | number[])[]): this {
    for (const b of bytes) { if (Array.isArray(b)) this.code.push(...b); else this.code.push(b); }
    return this;
  }
  get(l: number): this { return this.emit(0x20, uleb(l)); }
  set(l: number): this { return this.emit(0x21, uleb(l)); }
  tee(l: number): this { return this.emit(0x22, uleb(l)); }
  i32(n: number): this { return this.emit(0x41, sleb(n)); }
  load(offset: number): this { return this.emit(simd(0x00), 0, uleb(offset)); }
  store(offset: number): this { return this.emit(simd(0x0b), 0, uleb(offset)); }
  /** Push a v128 constant: from a hoisted local when hoisting is on, else inline v128.const. */
  private vconst(bytes: number[]): this {
    if (!this.hoisting) return this.emit(simd(0x0c), bytes);
    const key = bytes.join(',');
    let c = this.consts.get(key);
    if (!c) { c = { local: this.v(), bytes }; this.consts.set(key, c); }
    return this.get(c.local);
  }
  /** Start collecting constants into locals (the prologue that fills them is `constPrologue()`). */
  startHoisting(): void { this.hoisting = true; }
  /** Code that initialises every hoisted constant local. */
  constPrologue(): number[] {
    const out: number[] = [];
    for (const c of this.consts.values()) out.push(...simd(0x0c), ...c.bytes, 0x21, ...uleb(c.local));
    return out;
  }
  /** v128.const with four copies of a float32. */
  f32s(x: number): this {
    const b = new Uint8Array(16), dv = new DataView(b.buffer);
    for (let i = 0; i < 4; i++) dv.setFloat32(4 * i, x, true);
    return this.vconst(Array.from(b));
  }
  /** v128.const with two copies of a float64. */
  f64s(x: number): this {
    const b = new Uint8Array(16), dv = new DataView(b.buffer);
    for (let i = 0; i < 2; i++) dv.setFloat64(8 * i, x, true);
    return this.vconst(Array.from(b));
  }
  /** v128.const with two copies of a (small, non-negative) int64. */
  i64s(x: number): this {
    const b = new Uint8Array(16), dv = new DataView(b.buffer);
    for (let i = 0; i < 2; i++) dv.setBigInt64(8 * i, BigInt(x), true);
    return this.vconst(Array.from(b));
  }
  /** v128.const with four copies of an int32. */
  i32s(x: number): this {
    const b = new Uint8Array(16), dv = new DataView(b.buffer);
    for (let i = 0; i < 4; i++) dv.setInt32(4 * i, x, true);
    return this.vconst(Array.from(b));
  }
  shuffle(lanes: number[]): this { return this.emit(simd(0x0d), lanes); }
  locals(): number[] {
    return [2, ...uleb(this.nI32), 0x7f, ...uleb(this.nV128), 0x7b];
  }
}

// shuffle patterns (bytes): high two floats to the low half; low halves of two vectors joined
const HI_TO_LO = [8, 9, 10, 11, 12, 13, 14, 15, 24, 25, 26, 27, 28, 29, 30, 31]; // punpckhqdq
const JOIN_LO = [0, 1, 2, 3, 4, 5, 6, 7, 16, 17, 18, 19, 20, 21, 22, 23];

/** Independent 4-lane groups interleaved in the loop body (2 blocks of 16 floats = 4 groups). */
const GROUPS = 4;
/** Blocks handled per loop iteration. */
export const SIMD_BLOCK_STEP = GROUPS / 2;

/**
 * Build the module. Export `k(src, dst, flags, nblocks, mean, std, plain)`: for each 16-float block
 * at src (uniforms), writes PyTorch's normal_fill_16_AVX2 result to dst, and flags[b] = 1 when the
 * block must be recomputed by the scalar kernel (a possible double-rounding tie). nblocks must be a
 * multiple of SIMD_BLOCK_STEP.
 *
 * The emulation is a long chain of dependent roundings per lane, so the body interleaves GROUPS
 * independent 4-lane groups step by step to give the CPU independent work.
 */
function buildModule(pages: number): Uint8Array<ArrayBuffer> {
  // params: 0 src, 1 dst, 2 flags, 3 nblocks (i32), 4 mean, 5 std (f32), 6 plain (i32)
  const P_SRC = 0, P_DST = 1, P_FLAGS = 2, P_N = 3, P_MEAN = 4, P_STD = 5, P_PLAIN = 6;
  const f = new Body(7, 3);
  const B = f.i32Local(0), PIN = f.i32Local(1), POUT = f.i32Local(2);
  const G = Array.from({ length: GROUPS }, (_, g) => g);
  const vs = () => G.map(() => f.v());
  const flag = Array.from({ length: SIMD_BLOCK_STEP }, () => f.v());
  const meanV = f.v(), stdV = f.v(), meanL = f.v(), stdL = f.v();
  const u1 = vs(), u2 = vs(), x = vs(), e = vs(), mask = vs(), z = vs();
  const xL = vs(), xH = vs(), yL = vs(), yH = vs(), zL = vs(), zH = vs(), cL = vs(), cH = vs();
  const y = vs(), radius = vs(), ax = vs(), k = vs(), kf = vs(), kL = vs(), kH = vs();
  const xr = vs(), xrL = vs(), xrH = vs(), zz = vs(), zzL = vs(), zzH = vs();
  const yc = vs(), ys = vs(), aL = vs(), aH = vs(), tmp = vs(), n1 = vs(), n2 = vs();
  const sinv = vs(), cosv = vs(), pm = vs(), sv = vs(), rv = vs(), tv = vs();
  /** byte offset of group g's 4 lanes from the iteration's block pointer */
  const goff = (g: number) => (g >> 1) * 64 + (g & 1) * 16;

  // helpers ---------------------------------------------------------------
  const splitLo = (src: number, dst: number) => f.get(src).emit(OP.promote).set(dst);
  const splitHi = (src: number, dst: number) => f.get(src).get(src).shuffle(HI_TO_LO).emit(OP.promote).set(dst);
  const join = (lo: number, hi: number, dst: number) =>
    f.get(lo).emit(OP.demote).get(hi).emit(OP.demote).shuffle(JOIN_LO).set(dst);
  /** dst = round_to_float(a*b + c) on one f64x2 half; the double sum is known to be exact. */
  const exactFma = (a: () => void, b: () => void, c: () => void, dst: number) => {
    a(); b(); f.emit(OP.f64x2_mul); c(); f.emit(OP.f64x2_add).emit(OP.demote).emit(OP.promote).set(dst);
  };
  /**
   * dst = round_to_float(a*b + c) with the tie check OR-ed into the group's block flag: the double
   * sum s is exactly halfway between two floats iff the low 29 bits of its significand are
   * 1000...0 (valid because every checked sum here is 0 or in the normal float range).
   */
  const checkedFma = (g: number, a: () => void, b: () => void, c: () => void, dst: number) => {
    const s = sv[g]!;
    a(); b(); f.emit(OP.f64x2_mul); c(); f.emit(OP.f64x2_add).tee(s);
    f.emit(OP.demote).emit(OP.promote).set(dst);
    f.get(s).i64s(0x1fffffff).emit(OP.and).i64s(0x10000000).emit(OP.i64x2_eq);
    f.get(flag[g >> 1]!).emit(OP.or).set(flag[g >> 1]!);
  };
  /** The same with the general tie test (for mean/std, whose sums may be tiny or subnormal). */
  const checkedFmaGeneral = (g: number, a: () => void, b: () => void, c: () => void, dst: number) => {
    const s = sv[g]!, r = rv[g]!, t = tv[g]!;
    a(); b(); f.emit(OP.f64x2_mul); c(); f.emit(OP.f64x2_add).tee(s);
    f.emit(OP.demote).emit(OP.promote).tee(r).set(dst);
    // t = s + (s - r); flag |= (round(t) == t) & (s != r)
    f.get(s).get(s).get(r).emit(OP.f64x2_sub).emit(OP.f64x2_add).tee(t);
    f.emit(OP.demote).emit(OP.promote).get(t).emit(OP.f64x2_eq);
    f.get(s).get(r).emit(OP.f64x2_ne).emit(OP.and);
    f.get(flag[g >> 1]!).emit(OP.or).set(flag[g >> 1]!);
  };
  const L = (l: number) => () => { f.get(l); };
  const K64 = (c: number) => () => { f.f64s(c); };
  /** Emit one step for every group (interleaving independent work). */
  const each = (fn: (g: number) => void) => { for (const g of G) fn(g); };
  f.startHoisting();

  // prologue: splats of mean/std
  f.get(P_MEAN).emit(simd(0x13)).set(meanV); // f32x4.splat
  f.get(P_STD).emit(simd(0x13)).set(stdV);
  splitLo(meanV, meanL);
  splitLo(stdV, stdL);

  // for (b = 0; b < n; b += SIMD_BLOCK_STEP)
  f.i32(0).set(B);
  f.emit(0x02, 0x40); // block
  f.get(B).get(P_N).emit(0x4f).emit(0x0d, 0); // i32.ge_u; br_if 0
  f.emit(0x03, 0x40); // loop
  for (const fl of flag) f.i32s(0).set(fl);
  f.get(P_SRC).get(B).i32(6).emit(0x74).emit(0x6a).set(PIN);
  f.get(P_DST).get(B).i32(6).emit(0x74).emit(0x6a).set(POUT);

  // ---------------- log256_ps(1 - u) ----------------
  each((g) => {
    f.f32s(1).get(PIN).load(goff(g)).emit(OP.f32x4_sub).set(u1[g]!);
    f.get(PIN).load(goff(g) + 32).set(u2[g]!);
  });
  each((g) => {
    f.get(u1[g]!).i32s(0x807fffff).emit(OP.and).i32s(0x3f000000).emit(OP.or).set(x[g]!);
    f.get(u1[g]!).i32(23).emit(OP.i32x4_shr_u).i32s(126).emit(OP.i32x4_sub).emit(OP.convert_s).set(e[g]!);
  });
  each((g) => {
    f.get(x[g]!).f32s(SQRTHF).emit(OP.f32x4_lt).set(mask[g]!);
    // x = mask ? (x + x) - 1 : x - 1 ; e -= mask ? 1 : 0
    f.get(x[g]!).get(x[g]!).emit(OP.f32x4_add).f32s(1).emit(OP.f32x4_sub);
    f.get(x[g]!).f32s(1).emit(OP.f32x4_sub);
    f.get(mask[g]!).emit(OP.bitselect).set(x[g]!);
    f.get(e[g]!).get(mask[g]!).f32s(1).emit(OP.and).emit(OP.f32x4_sub).set(e[g]!);
  });
  each((g) => {
    f.get(x[g]!).get(x[g]!).emit(OP.f32x4_mul).set(z[g]!);
    splitLo(x[g]!, xL[g]!); splitHi(x[g]!, xH[g]!);
    f.f64s(LP[0]!).set(yL[g]!); f.f64s(LP[0]!).set(yH[g]!);
  });
  for (let i = 1; i < 9; i++) {
    each((g) => {
      exactFma(L(yL[g]!), L(xL[g]!), K64(LP[i]!), yL[g]!);
      exactFma(L(yH[g]!), L(xH[g]!), K64(LP[i]!), yH[g]!);
    });
  }
  each((g) => {
    join(yL[g]!, yH[g]!, y[g]!);
    f.get(y[g]!).get(x[g]!).emit(OP.f32x4_mul).set(y[g]!); // y = y * x
    f.get(e[g]!).f32s(LQ1).emit(OP.f32x4_mul).set(tmp[g]!); // e * q1 (rounded)
    splitLo(y[g]!, yL[g]!); splitHi(y[g]!, yH[g]!); splitLo(z[g]!, zL[g]!); splitHi(z[g]!, zH[g]!);
    splitLo(tmp[g]!, cL[g]!); splitHi(tmp[g]!, cH[g]!);
  });
  each((g) => {
    checkedFma(g, L(yL[g]!), L(zL[g]!), L(cL[g]!), yL[g]!);
    checkedFma(g, L(yH[g]!), L(zH[g]!), L(cH[g]!), yH[g]!);
  });
  each((g) => {
    join(yL[g]!, yH[g]!, y[g]!);
    f.get(y[g]!).get(z[g]!).f32s(0.5).emit(OP.f32x4_mul).emit(OP.f32x4_sub).set(y[g]!); // y - z*0.5
    f.get(x[g]!).get(y[g]!).emit(OP.f32x4_add); // x + y
    f.get(e[g]!).f32s(LQ2).emit(OP.f32x4_mul).emit(OP.f32x4_add); // + e*q2 (exact product)
    f.f32s(-2).emit(OP.f32x4_mul).emit(OP.f32x4_sqrt).set(radius[g]!);
  });

  // ---------------- sincos256_ps(2*pi*u2) ----------------
  each((g) => {
    f.f32s(TWO_PI_F).get(u2[g]!).emit(OP.f32x4_mul).set(ax[g]!);
    f.get(ax[g]!).f32s(FOPI).emit(OP.f32x4_mul).emit(OP.trunc_sat_s);
    f.i32s(1).emit(OP.i32x4_add).i32s(~1).emit(OP.and).set(k[g]!);
    f.get(k[g]!).emit(OP.convert_s).set(kf[g]!);
    f.get(ax[g]!).get(kf[g]!).f32s(DP1).emit(OP.f32x4_mul).emit(OP.f32x4_add).set(xr[g]!); // exact product
    splitLo(kf[g]!, kL[g]!); splitHi(kf[g]!, kH[g]!); splitLo(xr[g]!, xrL[g]!); splitHi(xr[g]!, xrH[g]!);
  });
  for (const D of [DP2, DP3]) {
    each((g) => {
      exactFma(L(kL[g]!), K64(D), L(xrL[g]!), xrL[g]!);
      exactFma(L(kH[g]!), K64(D), L(xrH[g]!), xrH[g]!);
    });
  }
  each((g) => {
    join(xrL[g]!, xrH[g]!, xr[g]!);
    f.get(xr[g]!).get(xr[g]!).emit(OP.f32x4_mul).set(zz[g]!);
    splitLo(zz[g]!, zzL[g]!); splitHi(zz[g]!, zzH[g]!);
  });
  // cos polynomial
  each((g) => {
    checkedFma(g, L(zzL[g]!), K64(CC0), K64(CC1), aL[g]!);
    checkedFma(g, L(zzH[g]!), K64(CC0), K64(CC1), aH[g]!);
  });
  each((g) => {
    checkedFma(g, L(zzL[g]!), L(aL[g]!), K64(CC2), aL[g]!);
    checkedFma(g, L(zzH[g]!), L(aH[g]!), K64(CC2), aH[g]!);
  });
  each((g) => {
    join(aL[g]!, aH[g]!, yc[g]!);
    f.get(zz[g]!).get(yc[g]!).emit(OP.f32x4_mul).set(yc[g]!);
    f.get(zz[g]!).f32s(0.5).emit(OP.f32x4_mul).emit(OP.f32x4_neg).set(tmp[g]!);
    splitLo(yc[g]!, aL[g]!); splitHi(yc[g]!, aH[g]!); splitLo(tmp[g]!, cL[g]!); splitHi(tmp[g]!, cH[g]!);
  });
  each((g) => {
    checkedFma(g, L(aL[g]!), L(zzL[g]!), L(cL[g]!), aL[g]!);
    checkedFma(g, L(aH[g]!), L(zzH[g]!), L(cH[g]!), aH[g]!);
  });
  each((g) => {
    join(aL[g]!, aH[g]!, yc[g]!);
    f.get(yc[g]!).f32s(1).emit(OP.f32x4_add).set(yc[g]!);
  });
  // sin polynomial
  each((g) => {
    checkedFma(g, K64(SC0), L(zzL[g]!), K64(SC1), aL[g]!);
    checkedFma(g, K64(SC0), L(zzH[g]!), K64(SC1), aH[g]!);
  });
  each((g) => {
    checkedFma(g, L(zzL[g]!), L(aL[g]!), K64(SC2), aL[g]!);
    checkedFma(g, L(zzH[g]!), L(aH[g]!), K64(SC2), aH[g]!);
  });
  each((g) => {
    join(aL[g]!, aH[g]!, ys[g]!);
    f.get(zz[g]!).get(ys[g]!).emit(OP.f32x4_mul).set(ys[g]!);
    splitLo(ys[g]!, aL[g]!); splitHi(ys[g]!, aH[g]!);
  });
  each((g) => {
    checkedFma(g, L(aL[g]!), L(xrL[g]!), L(xrL[g]!), aL[g]!);
    checkedFma(g, L(aH[g]!), L(xrH[g]!), L(xrH[g]!), aH[g]!);
  });
  each((g) => {
    join(aL[g]!, aH[g]!, ys[g]!);
    // select the polynomials and the signs
    f.get(k[g]!).i32s(2).emit(OP.and).i32s(0).emit(OP.i32x4_eq).set(pm[g]!);
    f.get(pm[g]!).get(ys[g]!).emit(OP.and).set(tmp[g]!); // ysin2
    f.get(yc[g]!).get(pm[g]!).emit(OP.andnot).set(cL[g]!); // ysin1 (andnot(a, b) = a & ~b)
    f.get(cL[g]!).get(tmp[g]!).emit(OP.f32x4_add).set(sinv[g]!); // ysin1 + ysin2
    f.get(ys[g]!).get(tmp[g]!).emit(OP.f32x4_sub); // y2 - ysin2
    f.get(yc[g]!).get(cL[g]!).emit(OP.f32x4_sub); // y - ysin1
    f.emit(OP.f32x4_add).set(cosv[g]!);
    f.get(sinv[g]!).get(k[g]!).i32s(4).emit(OP.and).i32(29).emit(OP.i32x4_shl).emit(OP.xor).set(sinv[g]!);
    f.get(cosv[g]!).i32s(4).get(k[g]!).i32s(2).emit(OP.i32x4_sub).emit(OP.andnot).i32(29).emit(OP.i32x4_shl).emit(OP.xor).set(cosv[g]!);
    f.get(radius[g]!).get(cosv[g]!).emit(OP.f32x4_mul).set(n1[g]!);
    f.get(radius[g]!).get(sinv[g]!).emit(OP.f32x4_mul).set(n2[g]!);
  });
  // output: plain randn adds 0 (fma(n, 1, 0)); otherwise a checked fma with std and mean
  f.get(P_PLAIN).emit(0x04, 0x40); // if
  each((g) => {
    f.get(POUT).get(n1[g]!).f32s(0).emit(OP.f32x4_add).store(goff(g));
    f.get(POUT).get(n2[g]!).f32s(0).emit(OP.f32x4_add).store(goff(g) + 32);
  });
  f.emit(0x05); // else
  for (const [nv, off] of [[n1, 0], [n2, 32]] as const) {
    each((g) => {
      splitLo(nv[g]!, aL[g]!); splitHi(nv[g]!, aH[g]!);
      checkedFmaGeneral(g, L(aL[g]!), L(stdL), L(meanL), aL[g]!);
      checkedFmaGeneral(g, L(aH[g]!), L(stdL), L(meanL), aH[g]!);
      f.get(POUT);
      join(aL[g]!, aH[g]!, tmp[g]!);
      f.get(tmp[g]!).store(goff(g) + off);
    });
  }
  f.emit(0x0b); // end if
  // flags[b + i] = any_true(flag[i])
  for (let i = 0; i < SIMD_BLOCK_STEP; i++) {
    f.get(P_FLAGS).get(B).emit(0x6a).get(flag[i]!).emit(OP.any_true).emit(0x3a, 0, uleb(i)); // i32.store8 offset i
  }
  // b += step ; continue while b < n
  f.get(B).i32(SIMD_BLOCK_STEP).emit(0x6a).tee(B).get(P_N).emit(0x49).emit(0x0d, 0); // i32.lt_u ; br_if loop
  f.emit(0x0b); // end loop
  f.emit(0x0b); // end block
  f.emit(0x0b); // end function

  const body = [...f.locals(), ...f.constPrologue(), ...f.code];
  const tBody = buildTwist();
  const uBody = buildUniform();
  const str = name;
  const type = section(1, [3,
    0x60, 7, 0x7f, 0x7f, 0x7f, 0x7f, 0x7d, 0x7d, 0x7f, 0, // k
    0x60, 1, 0x7f, 0, // t(st)
    0x60, 3, 0x7f, 0x7f, 0x7f, 0, // u(st, out, count)
  ]);
  const func = section(3, [3, 0, 1, 2]);
  const mem = section(5, [1, 0, ...uleb(pages)]);
  const exp = section(7, [3, ...str('k'), 0, 0, ...str('u'), 0, 2, ...str('mem'), 2, 0]);
  const fnBody = (b: number[]) => [...uleb(b.length), ...b];
  const code = section(10, [3, ...fnBody(body), ...fnBody(tBody), ...fnBody(uBody)]);
  return new Uint8Array([0, 0x61, 0x73, 0x6d, 1, 0, 0, 0, ...type, ...func, ...mem, ...exp, ...code]);
}


// ---- MT19937 in WebAssembly ------------------------------------------------------------------
//
// State layout at `st`: 624 words, then left (int32) at +2496 and next (int32) at +2500, exactly
// the engine's fields, so a batch of draws here continues the JS engine's stream.

const MT_LEFT = 2496, MT_NEXT = 2500;

/** t(st): PyTorch's next_state (the twist), 4 words at a time where the recurrence allows. */
function buildTwist(): number[] {
  const f = new Body(1, 2);
  const ST = 0, KK = f.i32Local(0), A = f.i32Local(1);
  const u = f.v(), v = f.v();
  // vector step at address A (word kk), reading st[kk + off] through pointer expression `farPtr`
  const vecStep = (far: () => void) => {
    f.get(A).load(0).set(u);
    f.get(A).load(4).set(v);
    f.get(A); // store address
    far(); // st[kk + M] or st[kk + M - N] (v128)
    f.get(u).i32s(0x80000000 | 0).emit(OP.and).get(v).i32s(0x7fffffff).emit(OP.and).emit(OP.or);
    f.i32(1).emit(OP.i32x4_shr_u).emit(OP.xor);
    f.i32s(0).get(v).i32s(1).emit(OP.and).emit(OP.i32x4_sub).i32s(0x9908b0df | 0).emit(OP.and).emit(OP.xor);
    f.store(0);
  };
  const scalarStep = (kk: number, far: number, nextIdx: number) => {
    // st[kk] = st[far] ^ (((st[kk] & U) | (st[next] & L)) >>> 1) ^ (-(st[next] & 1) & A)
    f.get(ST); // address for store
    f.get(ST).emit(0x28, 2, uleb(far * 4)); // i32.load st[far]
    f.get(ST).emit(0x28, 2, uleb(kk * 4)).i32(0x80000000 | 0).emit(0x71);
    f.get(ST).emit(0x28, 2, uleb(nextIdx * 4)).i32(0x7fffffff).emit(0x71).emit(0x72);
    f.i32(1).emit(0x76).emit(0x73);
    f.i32(0).get(ST).emit(0x28, 2, uleb(nextIdx * 4)).i32(1).emit(0x71).emit(0x6b).i32(0x9908b0df | 0).emit(0x71).emit(0x73);
    f.emit(0x36, 2, uleb(kk * 4)); // i32.store
  };
  // kk = 0..223 (vectors)
  f.i32(0).set(KK);
  f.emit(0x03, 0x40);
  f.get(ST).get(KK).i32(2).emit(0x74).emit(0x6a).set(A);
  vecStep(() => { f.get(A).load(397 * 4); });
  f.get(KK).i32(4).emit(0x6a).tee(KK).i32(224).emit(0x49).emit(0x0d, 0);
  f.emit(0x0b);
  for (const kk of [224, 225, 226]) scalarStep(kk, kk + 397, kk + 1);
  // kk = 227..622 (vectors); the far word is st[kk - 227]
  f.i32(227).set(KK);
  f.emit(0x03, 0x40);
  f.get(ST).get(KK).i32(2).emit(0x74).emit(0x6a).set(A);
  vecStep(() => { f.get(A).i32(227 * 4).emit(0x6b).load(0); });
  f.get(KK).i32(4).emit(0x6a).tee(KK).i32(623).emit(0x49).emit(0x0d, 0);
  f.emit(0x0b);
  scalarStep(623, 396, 0);
  f.emit(0x0b);
  return [...f.locals(), ...f.constPrologue(), ...f.code];
}

/**
 * u(st, out, count): out[i] = (random() & 0xffffff) * 2^-24 for `count` draws (float32), with
 * PyTorch's left/next bookkeeping. Writes up to 3 floats past out[count] (callers leave slack).
 */
function buildUniform(): number[] {
  const f = new Body(3, 6);
  const ST = 0, OUT = 1, COUNT = 2;
  const LEFT = f.i32Local(0), NEXT = f.i32Local(1), O = f.i32Local(2), TAKE = f.i32Local(3), P = f.i32Local(4), Q = f.i32Local(5);
  const y = f.v();
  f.startHoisting();
  f.get(ST).emit(0x28, 2, uleb(MT_LEFT)).set(LEFT);
  f.get(ST).emit(0x28, 2, uleb(MT_NEXT)).set(NEXT);
  f.i32(0).set(O);
  f.emit(0x02, 0x40); // block
  f.emit(0x03, 0x40); // loop
  f.get(O).get(COUNT).emit(0x4f).emit(0x0d, 1); // if o >= count: break
  // if (left == 1) { twist; left = 625; next = 0 }
  f.get(LEFT).i32(1).emit(0x46).emit(0x04, 0x40);
  f.get(ST).emit(0x10, 1); // call t
  f.i32(625).set(LEFT).i32(0).set(NEXT);
  f.emit(0x0b);
  f.get(LEFT).i32(1).emit(0x6b).set(LEFT);
  // take = min(left, count - o)
  f.get(LEFT).get(COUNT).get(O).emit(0x6b).get(LEFT).get(COUNT).get(O).emit(0x6b).emit(0x49).emit(0x1b).set(TAKE);
  // p = st + next*4 ; q = out + o*4 ; emit vectors while p < st + (next + take)*4
  f.get(ST).get(NEXT).i32(2).emit(0x74).emit(0x6a).set(P);
  f.get(OUT).get(O).i32(2).emit(0x74).emit(0x6a).set(Q);
  f.emit(0x03, 0x40);
  f.get(Q);
  f.get(P).load(0).set(y);
  f.get(y).get(y).i32(11).emit(OP.i32x4_shr_u).emit(OP.xor).set(y);
  f.get(y).get(y).i32(7).emit(OP.i32x4_shl).i32s(0x9d2c5680 | 0).emit(OP.and).emit(OP.xor).set(y);
  f.get(y).get(y).i32(15).emit(OP.i32x4_shl).i32s(0xefc60000 | 0).emit(OP.and).emit(OP.xor).set(y);
  f.get(y).get(y).i32(18).emit(OP.i32x4_shr_u).emit(OP.xor);
  f.i32s(0xffffff).emit(OP.and).emit(OP.convert_s).f32s(2 ** -24).emit(OP.f32x4_mul);
  f.store(0);
  f.get(Q).i32(16).emit(0x6a).set(Q);
  f.get(P).i32(16).emit(0x6a).tee(P);
  f.get(ST).get(NEXT).get(TAKE).emit(0x6a).i32(2).emit(0x74).emit(0x6a).emit(0x49).emit(0x0d, 0); // p < end
  f.emit(0x0b);
  // next += take; left -= take - 1; o += take
  f.get(NEXT).get(TAKE).emit(0x6a).set(NEXT);
  f.get(LEFT).get(TAKE).emit(0x6b).i32(1).emit(0x6a).set(LEFT);
  f.get(O).get(TAKE).emit(0x6a).set(O);
  f.emit(0x0c, 0); // br loop
  f.emit(0x0b, 0x0b); // end loop, end block
  f.get(ST).get(LEFT).emit(0x36, 2, uleb(MT_LEFT));
  f.get(ST).get(NEXT).emit(0x36, 2, uleb(MT_NEXT));
  f.emit(0x0b);
  return [...f.locals(), ...f.constPrologue(), ...f.code];
}

/** Blocks per call; memory holds src, dst (64 bytes per block each) and one flag byte per block. */
export const SIMD_CHUNK_BLOCKS = 4096;

export interface SimdKernel {
  /** Float32 view of src (uniform input) for the current chunk: 16 * SIMD_CHUNK_BLOCKS floats. */
  readonly src: Float32Array;
  readonly dst: Float32Array;
  readonly flags: Uint8Array;
  run(nblocks: number, mean: number, std: number, plain: boolean): void;
  /** Copy an engine's state in (before `uniforms`) and back out (after). */
  loadState(e: MT19937): void;
  saveState(e: MT19937): void;
  /** src[0..count) = count float32 uniforms drawn from the loaded state (count <= src.length). */
  uniforms(count: number): void;
}

let KERNEL: SimdKernel | null | undefined;
let ENABLED = true;

/** Turn the SIMD kernel off or on (tests compare it with the scalar kernel; both are exact). */
export function setSimdEnabled(on: boolean): void {
  ENABLED = on;
}

/** The SIMD kernel, or undefined when WebAssembly SIMD is not available (or disabled by NBX_RANDOM_SIMD=0). */
export function simdKernel(): SimdKernel | undefined {
  if (!ENABLED) return undefined;
  if (KERNEL !== undefined) return KERNEL ?? undefined;
  KERNEL = null;
  try {
    const env = (globalThis as { process?: { env?: Record<string, string | undefined> } }).process?.env;
    if (env?.NBX_RANDOM_SIMD === '0') return undefined;
    // layout: [MT state 2560 B][src 64 B/block + 64 B slack][dst 64 B/block][flags 1 B/block]
    const stOff = 0, srcOff = 2560, dstOff = srcOff + SIMD_CHUNK_BLOCKS * 64 + 64;
    const flagOff = dstOff + SIMD_CHUNK_BLOCKS * 64;
    const pages = Math.ceil((flagOff + SIMD_CHUNK_BLOCKS) / 65536) + 1;
    const wasm = buildModule(pages);
    if (!WebAssembly.validate(wasm)) return undefined;
    const inst = new WebAssembly.Instance(new WebAssembly.Module(wasm), {});
    const mem = inst.exports.mem as WebAssembly.Memory;
    const k = inst.exports.k as (src: number, dst: number, flags: number, n: number, mean: number, std: number, plain: number) => void;
    const u = inst.exports.u as (st: number, out: number, count: number) => void;
    const src = new Float32Array(mem.buffer, srcOff, SIMD_CHUNK_BLOCKS * 16);
    const dst = new Float32Array(mem.buffer, dstOff, SIMD_CHUNK_BLOCKS * 16);
    const flags = new Uint8Array(mem.buffer, flagOff, SIMD_CHUNK_BLOCKS);
    const st = new Int32Array(mem.buffer, stOff, 640);
    KERNEL = {
      src, dst, flags,
      run(nblocks, mean, std, plain) { k(srcOff, dstOff, flagOff, nblocks, mean, std, plain ? 1 : 0); },
      loadState(e) { st.set(e.state); st[MT_LEFT / 4] = e.left; st[MT_NEXT / 4] = e.next; },
      saveState(e) { e.state.set(st.subarray(0, 624)); e.left = st[MT_LEFT / 4]!; e.next = st[MT_NEXT / 4]!; },
      uniforms(count) { u(stOff, srcOff, count); },
    };
  } catch {
    KERNEL = null;
  }
  return KERNEL ?? undefined;
}
