// Random sampling kernels, bit for bit as PyTorch's CPU kernels compute them.
//
// Every function draws from a Generator (MT19937 + cached normal samples) in exactly the order
// PyTorch's kernels do and returns a fresh storage array in the engine's convention for the dtype
// (float16/bfloat16 as Uint16Array bits, int64 as BigInt64Array, bool as Uint8Array).
//
// Sources (ATen): core/TransformationHelper.h, core/DistributionsHelper.h,
// native/cpu/DistributionTemplates.h + DistributionKernels.cpp (normal, uniform, random_, bernoulli,
// exponential), native/cpu/avx_mathfun.h (the AVX2 normal_fill that float32 randn of >= 16 values
// takes on x86-64), native/TensorFactories.cpp (randperm), native/Distributions.cpp (multinomial,
// normal with tensor mean/std), native/cpu/MultinomialKernel.cpp, native/Dropout.cpp.
//
// Floating-point details that matter for bit equality:
// - PyTorch's x86-64 kernels are compiled with FMA enabled and GCC contracts `a * b + c`; the
//   emulation below uses exactly-rounded float/double FMAs where the shipped binary has them.
// - Double-precision log/sin/cos/log1p are glibc's (libm.ts), not V8's fdlibm, which differ in the
//   last bit for a few percent of arguments.

import { DTypeError, ValueError } from '../errors.js';
import { allocStorage, type DTypeName, type StorageArray } from '../dtype/dtypes.js';
import { toBFloat16Bits, toFloat16Bits, fromFloat16Bits, fromBFloat16Bits } from '../dtype/convert.js';
import type { Generator } from './generator.js';
import * as libm from './libm.js';
import { simdKernel, SIMD_CHUNK_BLOCKS, SIMD_BLOCK_STEP } from './simd.js';

export type FloatDTypeName = 'float32' | 'float64' | 'float16' | 'bfloat16';

/**
 * Internal switch for tests against Debian's PyTorch 1.13 (the only torch on the build machine):
 * where 1.13 and 2.x compute differently, `torch113: true` reproduces 1.13. The default (false) is
 * PyTorch 2.x, the reference. Differences: normal_distribution<double> and exponential use
 * log(1 - u) in 1.13 and log1p(-u) in 2.x; float16 normal_fill rounds every intermediate to half in
 * 2.x (c10 Half math overloads) but only the stored values in 1.13.
 */
export const __compat = { torch113: false };

const fr = Math.fround;
const TWO_M24 = 2 ** -24;
const TWO_M53 = 2 ** -53;

// ------------------------------------------------------------------------------------------------
// Exact arithmetic helpers

/** fmaf(a, b, c) for float32 a, b, c: a*b + c rounded once to float32 (as vfmadd...ss/ps does). */
export function fmaf(a: number, b: number, c: number): number {
  const p = a * b; // exact: two 24-bit significands fit in 53 bits
  const s = p + c;
  const r = fr(s);
  if (r === s) return r;
  const t = s + (s - r); // the other float neighbour if s is exactly halfway
  if (fr(t) !== t) return r;
  // s is exactly halfway between two floats: the rounding error of p + c decides.
  const bb = s - p;
  const err = (p - (s - bb)) + (c - bb);
  if (err === 0) return r;
  return (err > 0) === (t > r) ? t : r;
}

/** Correctly rounded double fma (glibc-exact paths need it): see libm.ts. */
const fma = libm.fma;

/** Round a number to float16 and back (c10::Half arithmetic: compute in float, round to half). */
const h16 = (x: number): number => fromFloat16Bits(toFloat16Bits(x));
const hbf = (x: number): number => fromBFloat16Bits(toBFloat16Bits(x));

// ------------------------------------------------------------------------------------------------
// Argument checks

function checkNumel(op: string, numel: number): void {
  if (!Number.isInteger(numel) || numel < 0) throw new ValueError(op, `numel must be a non-negative integer, got ${numel}`);
}

function checkFloatDType(op: string, dtype: DTypeName): asserts dtype is FloatDTypeName {
  if (dtype !== 'float32' && dtype !== 'float64' && dtype !== 'float16' && dtype !== 'bfloat16') {
    throw new DTypeError(op, `"${op}" not implemented for dtype ${dtype}: expected a floating point dtype (float32, float64, float16, bfloat16)`);
  }
}

const FLOAT_MAX: Record<FloatDTypeName, number> = {
  float32: 3.4028234663852886e38, float64: Number.MAX_VALUE, float16: 65504, bfloat16: 3.3895313892515355e38,
};

// ------------------------------------------------------------------------------------------------
// Uniform

/**
 * torch.rand / Tensor.uniform_(from, to): `numel` values in [from, to).
 * float32: (random() & (2^24-1)) * 2^-24; float64: (random64() & (2^53-1)) * 2^-53;
 * float16: 11 bits; bfloat16: 8 bits; then x * (to - from) + from (fused, as the FMA build computes it).
 */
export function uniform(gen: Generator, numel: number, dtype: DTypeName = 'float32', from = 0, to = 1): StorageArray {
  const op = 'uniform_';
  checkNumel(op, numel);
  checkFloatDType(op, dtype);
  if (!(from <= to)) throw new ValueError(op, `uniform_ expects to return a [from, to) range, but found from=${from} > to=${to}`);
  if (to - from > FLOAT_MAX[dtype]) {
    throw new ValueError(op, `uniform_ expects to-from <= std::numeric_limits<${dtype}>::max(), but found to=${to} and from=${from} which result in to-from to exceed the limit`);
  }
  const eng = gen.engine;
  switch (dtype) {
    case 'float32': {
      const out = new Float32Array(numel);
      const f = fr(from), t = fr(to);
      const d = fr(t - f);
      if (f === 0 && d === 1) {
        fillUniform24(eng, out, 0, numel);
      } else {
        for (let i = 0; i < numel; i++) out[i] = fmaf((eng.nextInt32() & 0xffffff) * TWO_M24, d, f);
      }
      return out;
    }
    case 'float64': {
      const out = new Float64Array(numel);
      const d = to - from;
      if (from === 0 && d === 1) {
        for (let i = 0; i < numel; i++) out[i] = eng.next53() * TWO_M53;
      } else {
        for (let i = 0; i < numel; i++) out[i] = fma(eng.next53() * TWO_M53, d, from);
      }
      return out;
    }
    case 'float16':
    case 'bfloat16': {
      // uniform_real<Half>: MASK/DIVISOR from 11 (half) or 8 (bfloat16) digits, computed in float;
      // from/to are first cast to the dtype; `to - from` is Half arithmetic (rounded to the dtype).
      const half = dtype === 'float16';
      const rnd = half ? h16 : hbf;
      const bits = half ? 11 : 8;
      const mask = (1 << bits) - 1, div = 2 ** -bits;
      const enc = half ? toFloat16Bits : toBFloat16Bits;
      const f = rnd(from), t = rnd(to);
      const d = rnd(t - f);
      const out = new Uint16Array(numel);
      for (let i = 0; i < numel; i++) out[i] = enc(fmaf((eng.nextInt32() & mask) * div, d, f));
      return out;
    }
  }
}

/** torch.rand: uniform on [0, 1). */
export function rand(gen: Generator, numel: number, dtype: DTypeName = 'float32'): StorageArray {
  return uniform(gen, numel, dtype, 0, 1);
}

/** Fill out[off..off+n) with float32 uniforms (random() & 0xffffff) * 2^-24, in draw order. */
function fillUniform24(eng: Generator['engine'], out: Float32Array, off: number, n: number): void {
  const kern = n >= 2048 ? simdKernel() : undefined;
  if (!kern) {
    eng.fillUniform24(out, off, n);
    return;
  }
  const CH = kern.src.length;
  kern.loadState(eng);
  for (let i = 0; i < n; i += CH) {
    const m = Math.min(CH, n - i);
    kern.uniforms(m);
    out.set(m === CH ? kern.src : kern.src.subarray(0, m), off + i);
  }
  kern.saveState(eng);
}

// ------------------------------------------------------------------------------------------------
// Normal

/** One draw of at::normal_distribution<double> (Box-Muller with the generator's cached second value). */
function normalDouble(gen: Generator): number {
  const cached = gen.nextDoubleNormal;
  if (cached !== undefined) {
    gen.nextDoubleNormal = undefined;
    return cached;
  }
  const eng = gen.engine;
  const u1 = eng.next53() * TWO_M53;
  const u2 = eng.next53() * TWO_M53;
  const r = Math.sqrt(-2.0 * (__compat.torch113 ? libm.log(1.0 - u2) : libm.log1p(-u2)));
  const theta = 2.0 * Math.PI * u1;
  gen.nextDoubleNormal = r * libm.sin(theta);
  return r * libm.cos(theta);
}

// avx_mathfun.h constants (as float32)
const SQRTHF = fr(0.707106781186547524);
const LP0 = fr(7.0376836292e-2), LP1 = fr(-1.1514610310e-1), LP2 = fr(1.1676998740e-1);
const LP3 = fr(-1.2420140846e-1), LP4 = fr(1.4249322787e-1), LP5 = fr(-1.6668057665e-1);
const LP6 = fr(2.0000714765e-1), LP7 = fr(-2.4999993993e-1), LP8 = fr(3.3333331174e-1);
const LQ1 = fr(-2.12194440e-4), LQ2 = fr(0.693359375);
const FOPI = fr(1.27323954473516);
const DP1 = fr(-0.78515625), DP2 = fr(-2.4187564849853515625e-4), DP3 = fr(-3.77489497744594108e-8);
const SC0 = fr(-1.9515295891e-4), SC1 = fr(8.3321608736e-3), SC2 = fr(-1.6666654611e-1);
const CC0 = fr(2.443315711809948e-5), CC1 = fr(-1.388731625493765e-3), CC2 = fr(4.166664568298827e-2);
const TWO_PI_F = fr(2.0 * Math.PI);

const FB = new Float32Array(1);
const IB = new Int32Array(FB.buffer);

/** The rare tie case of the inlined float FMAs below: a*b + c rounded once to float32. */
const fmafTie = fmaf;

/**
 * normal_fill_AVX2, pass 1 (log256_ps): for each 16-block in [start, end), lanes j < 8 get
 * radius = sqrt(-2 * log(1 - u)). Reproduces avx_mathfun's log256_ps with the FMA contractions of
 * the shipped x86-64 binary. The 8 polynomial FMAs are exact in double for every float uniform
 * k * 2^-24 (checked exhaustively), so only the e*q1 step needs the tie check.
 */
function avx2LogPass(d: Float32Array, start: number, end: number): void {
  let s = 0, r = 0, t = 0;
  const fb = FB, ib = IB;
  for (let b = start; b < end; b += 16) {
    for (let j = b; j < b + 8; j++) {
      const u1 = fr(1 - d[j]!); // in (0, 1]
      fb[0] = u1;
      const bits = ib[0]!;
      ib[0] = (bits & 0x807fffff) | 0x3f000000;
      let x = fb[0]!; // mantissa in [0.5, 1)
      let e = (bits >>> 23) - 126;
      if (x < SQRTHF) { e -= 1; x = x + x - 1; } else { x = x - 1; } // exact
      const z = fr(x * x);
      let y = 0;
      y = fr(LP0 * x + LP1);
      y = fr(y * x + LP2);
      y = fr(y * x + LP3);
      y = fr(y * x + LP4);
      y = fr(y * x + LP5);
      y = fr(y * x + LP6);
      y = fr(y * x + LP7);
      y = fr(y * x + LP8);
      y = fr(y * x);
      const eq1 = fr(e * LQ1);
      s = y * z + eq1; r = fr(s);
      if (r !== s) { t = s + (s - r); if (fr(t) === t) r = fmafTie(y, z, eq1); }
      y = r;
      y = fr(y - z * 0.5); // z * 0.5 is exact
      let lg = fr(x + y);
      lg = fr(lg + e * LQ2); // e * LQ2 is exact
      d[j] = Math.sqrt(-2 * lg); // the Float32Array store rounds, as vsqrtps does
    }
  }
}

/**
 * normal_fill_AVX2, pass 2 (sincos256_ps and the final fmadd): lanes j < 8 hold the radius from
 * pass 1, lanes j + 8 the second uniform. Writes radius*cos*std + mean to j and radius*sin*std + mean
 * to j + 8. The three Cody-Waite reduction FMAs are exact in double (checked exhaustively).
 */
function avx2SinCosPass(d: Float32Array, start: number, end: number, mean: number, std: number): void {
  let s = 0, r = 0, t = 0;
  const plain = mean === 0 && std === 1;
  for (let b = start; b < end; b += 16) {
    for (let j = b; j < b + 8; j++) {
      const radius = d[j]!;
      const ax = fr(TWO_PI_F * d[j + 8]!); // >= 0
      let k = fr(ax * FOPI) | 0;
      k = (k + 1) & ~1;
      let xr = 0;
      xr = fr(k * DP1 + ax);
      xr = fr(k * DP2 + xr);
      xr = fr(k * DP3 + xr);
      const zz = fr(xr * xr);
      let yc = 0;
      s = zz * CC0 + CC1; r = fr(s);
      if (r !== s) { t = s + (s - r); if (fr(t) === t) r = fmafTie(zz, CC0, CC1); }
      yc = r;
      s = zz * yc + CC2; r = fr(s);
      if (r !== s) { t = s + (s - r); if (fr(t) === t) r = fmafTie(zz, yc, CC2); }
      yc = r;
      yc = fr(zz * yc);
      const hz = -fr(zz * 0.5);
      s = yc * zz + hz; r = fr(s);
      if (r !== s) { t = s + (s - r); if (fr(t) === t) r = fmafTie(yc, zz, hz); }
      yc = r;
      yc = fr(yc + 1);
      let ys = 0;
      s = SC0 * zz + SC1; r = fr(s);
      if (r !== s) { t = s + (s - r); if (fr(t) === t) r = fmafTie(SC0, zz, SC1); }
      ys = r;
      s = zz * ys + SC2; r = fr(s);
      if (r !== s) { t = s + (s - r); if (fr(t) === t) r = fmafTie(zz, ys, SC2); }
      ys = r;
      ys = fr(zz * ys);
      s = ys * xr + xr; r = fr(s);
      if (r !== s) { t = s + (s - r); if (fr(t) === t) r = fmafTie(ys, xr, xr); }
      ys = r;
      let sn: number, cs: number;
      if ((k & 2) === 0) { sn = 0 + ys; cs = (ys - ys) + yc; } else { sn = yc + 0; cs = ys + (yc - yc); }
      if (k & 4) sn = -sn;
      if ((~(k - 2)) & 4) cs = -cs;
      const n1 = fr(radius * cs), n2 = fr(radius * sn);
      if (plain) {
        d[j] = n1 + 0; // fma(n1, 1, 0): exact, and -0 becomes +0
        d[j + 8] = n2 + 0;
      } else {
        s = n1 * std + mean; r = fr(s);
        if (r !== s) { t = s + (s - r); if (fr(t) === t) r = fmafTie(n1, std, mean); }
        d[j] = r;
        s = n2 * std + mean; r = fr(s);
        if (r !== s) { t = s + (s - r); if (fr(t) === t) r = fmafTie(n2, std, mean); }
        d[j + 8] = r;
      }
    }
  }
}

/**
 * PyTorch's normal_fill for float32 on x86-64 (normal_fill_AVX2): all n uniforms are drawn first,
 * every full 16-block is transformed, then the last 16 values are recomputed from 16 fresh uniforms
 * when n is not a multiple of 16. Full blocks go through the WebAssembly SIMD kernel when available
 * (flagged blocks, a few per million, are redone by the scalar kernel); otherwise the scalar one.
 */
function normalFillFloat32(gen: Generator, n: number, mean: number, std: number): Float32Array {
  const out = new Float32Array(n);
  const eng = gen.engine;
  const full = n - (n % 16);
  const plain = mean === 0 && std === 1;
  const kern = full > 0 ? simdKernel() : undefined;
  if (kern) {
    const CH = SIMD_CHUNK_BLOCKS * 16;
    kern.loadState(eng);
    for (let off = 0; off < full; off += CH) {
      const m = Math.min(CH, full - off);
      const nb = m >> 4;
      const nk = nb - (nb % SIMD_BLOCK_STEP); // blocks for the kernel; the rest go scalar
      kern.uniforms(m);
      kern.run(nk, mean, std, plain);
      out.set(m === CH ? kern.dst : kern.dst.subarray(0, nk * 16), off);
      const fl = kern.flags;
      for (let b = 0; b < nb; b++) {
        if (b >= nk || fl[b]) {
          const blk = kern.src.slice(b * 16, b * 16 + 16);
          avx2LogPass(blk, 0, 16);
          avx2SinCosPass(blk, 0, 16, mean, std);
          out.set(blk, off + b * 16);
        }
      }
    }
    kern.saveState(eng);
    // the uniforms of the partial block are drawn too (and then overwritten below)
    if (n > full) eng.fillUniform24(out, full, n - full);
  } else {
    fillUniform24(eng, out, 0, n);
    // Blocks are independent, so the two passes can each sweep all full blocks.
    avx2LogPass(out, 0, full);
    avx2SinCosPass(out, 0, full, mean, std);
  }
  if (n % 16 !== 0) {
    // PyTorch recomputes the last 16 values from 16 fresh uniforms.
    const b = n - 16;
    fillUniform24(eng, out, b, 16);
    avx2LogPass(out, b, n);
    avx2SinCosPass(out, b, n, mean, std);
  }
  return out;
}

/** normal_fill_16<double> (scalar template, double precision, glibc log/cos/sin). */
function normalFill16Double(d: Float64Array, i: number, mean: number, std: number): void {
  const twoPi = 2.0 * Math.PI;
  for (let j = 0; j < 8; j++) {
    const u1 = 1 - d[i + j]!;
    const u2 = d[i + j + 8]!;
    const radius = Math.sqrt(-2 * libm.log(u1));
    const theta = twoPi * u2;
    d[i + j] = fma(radius * libm.cos(theta), std, mean);
    d[i + j + 8] = fma(radius * libm.sin(theta), std, mean);
  }
}

function normalFillFloat64(gen: Generator, n: number, mean: number, std: number): Float64Array {
  const d = new Float64Array(n);
  const eng = gen.engine;
  for (let i = 0; i < n; i++) d[i] = eng.next53() * TWO_M53;
  for (let i = 0; i + 16 <= n; i += 16) normalFill16Double(d, i, mean, std);
  if (n % 16 !== 0) {
    const b = n - 16;
    for (let i = 0; i < 16; i++) d[b + i] = eng.next53() * TWO_M53;
    normalFill16Double(d, b, mean, std);
  }
  return d;
}

/**
 * normal_fill_16<Half/BFloat16>. c10 reduced-float arithmetic: every binary op between two
 * reduced floats computes in float and rounds to the dtype; the std:: math overloads for reduced
 * floats (log, sqrt, cos, sin) return the dtype too (c10/util/BFloat16-math.h, which PyTorch 2.x
 * applies to Half as well; 1.13 had them for BFloat16 only, so its float16 randn rounded less).
 */
function normalFill16Reduced(d: Float64Array, i: number, mean: number, std: number, rnd: (x: number) => number): void {
  const twoPi = 2.0 * Math.PI;
  for (let j = 0; j < 8; j++) {
    const u1 = rnd(1 - d[i + j]!);
    const u2 = d[i + j + 8]!;
    const radius = rnd(Math.sqrt(rnd(-2 * rnd(libm.logf(u1)))));
    const theta = rnd(twoPi * u2);
    d[i + j] = rnd(rnd(rnd(radius * rnd(libm.cosf(theta))) * std) + mean);
    d[i + j + 8] = rnd(rnd(rnd(radius * rnd(libm.sinf(theta))) * std) + mean);
  }
}

/** PyTorch 1.13's normal_fill_16<Half>: float intermediates, only the stored values rounded to half. */
function normalFill16Half113(d: Float64Array, i: number, mean: number, std: number): void {
  const twoPi = 2.0 * Math.PI;
  for (let j = 0; j < 8; j++) {
    const u1 = h16(1 - d[i + j]!);
    const u2 = d[i + j + 8]!;
    const radius = h16(fr(Math.sqrt(fr(-2 * libm.logf(u1)))));
    const theta = h16(twoPi * u2);
    d[i + j] = h16(fr(fr(fr(radius * libm.cosf(theta)) * std) + mean));
    d[i + j + 8] = h16(fr(fr(fr(radius * libm.sinf(theta)) * std) + mean));
  }
}

function normalFillReduced(gen: Generator, n: number, mean: number, std: number, half: boolean): Uint16Array {
  const rnd = half ? h16 : hbf;
  const fill16 = half && __compat.torch113
    ? (dd: Float64Array, ii: number, mm: number, ss: number) => normalFill16Half113(dd, ii, mm, ss)
    : (dd: Float64Array, ii: number, mm: number, ss: number) => normalFill16Reduced(dd, ii, mm, ss, rnd);
  const bits = half ? 11 : 8;
  const mask = (1 << bits) - 1, div = 2 ** -bits;
  const eng = gen.engine;
  const d = new Float64Array(n);
  const m = rnd(mean), s = rnd(std);
  for (let i = 0; i < n; i++) d[i] = (eng.nextInt32() & mask) * div;
  for (let i = 0; i + 16 <= n; i += 16) fill16(d, i, m, s);
  if (n % 16 !== 0) {
    const b = n - 16;
    for (let i = 0; i < 16; i++) d[b + i] = (eng.nextInt32() & mask) * div;
    fill16(d, b, m, s);
  }
  const enc = half ? toFloat16Bits : toBFloat16Bits;
  const out = new Uint16Array(n);
  for (let i = 0; i < n; i++) out[i] = enc(d[i]!);
  return out;
}

/**
 * torch.normal(mean, std, size) / Tensor.normal_(mean, std): `numel` normal values.
 * numel >= 16: PyTorch's vectorised normal_fill (uniforms first, Box-Muller per 16-block, the last
 * partial block recomputed from 16 fresh uniforms). numel < 16: one at::normal_distribution<double>
 * draw per element (which uses and refills the generator's cached double sample).
 */
export function normal(gen: Generator, numel: number, dtype: DTypeName = 'float32', mean = 0, std = 1): StorageArray {
  const op = 'normal';
  checkNumel(op, numel);
  checkFloatDType(op, dtype);
  if (!(std >= 0)) throw new ValueError(op, `normal expects std >= 0.0, but found std ${std}`);
  if (numel >= 16) {
    switch (dtype) {
      case 'float32': return normalFillFloat32(gen, numel, fr(mean), fr(std));
      case 'float64': return normalFillFloat64(gen, numel, mean, std);
      case 'float16': return normalFillReduced(gen, numel, mean, std, true);
      case 'bfloat16': return normalFillReduced(gen, numel, mean, std, false);
    }
  }
  const out = allocStorage(dtype, numel);
  for (let i = 0; i < numel; i++) {
    const v = fma(normalDouble(gen), std, mean);
    switch (dtype) {
      case 'float32': (out as Float32Array)[i] = v; break;
      case 'float64': (out as Float64Array)[i] = v; break;
      case 'float16': (out as Uint16Array)[i] = toFloat16Bits(v); break;
      case 'bfloat16': (out as Uint16Array)[i] = toBFloat16Bits(v); break;
    }
  }
  return out;
}

/** torch.randn: standard normal. */
export function randn(gen: Generator, numel: number, dtype: DTypeName = 'float32'): StorageArray {
  return normal(gen, numel, dtype, 0, 1);
}

/**
 * torch.normal with tensor arguments (DistributionTemplates.h normal_out_impl). `means`/`stds` are
 * numbers or arrays of `numel` values (already broadcast; length 1 also accepted):
 * - (Tensor mean, float std): output.normal_(0, std), then output.add_(mean);
 * - (float mean, Tensor std) and (Tensor mean, Tensor std): output.normal_(0, 1), then
 *   output.mul_(std).add_(mean), a float mean being a 0-dim tensor of the output dtype;
 * - (float, float): the same as normal().
 * Each tensor op rounds once in the output dtype (float16/bfloat16 compute in float).
 */
export function normalTensor(gen: Generator, means: Float64Array | number, stds: Float64Array | number, numel: number, dtype: DTypeName = 'float32'): StorageArray {
  const op = 'normal';
  checkNumel(op, numel);
  checkFloatDType(op, dtype);
  if (typeof means === 'number' && typeof stds === 'number') return normal(gen, numel, dtype, means, stds);
  const meanArr = typeof means === 'number' ? undefined : means;
  const stdArr = typeof stds === 'number' ? undefined : stds;
  if (meanArr && meanArr.length !== numel && meanArr.length !== 1) throw new ValueError(op, `mean has ${meanArr.length} elements, expected ${numel} (broadcast first)`);
  if (stdArr && stdArr.length !== numel && stdArr.length !== 1) throw new ValueError(op, `std has ${stdArr.length} elements, expected ${numel} (broadcast first)`);
  if (stdArr) {
    for (let i = 0; i < stdArr.length; i++) if (!(stdArr[i]! >= 0)) throw new ValueError(op, 'normal expects all elements of std >= 0.0');
  } else if (!((stds as number) >= 0)) {
    throw new ValueError(op, `normal expects std >= 0.0, but found std ${stds}`);
  }
  const meanAt = (i: number): number => (meanArr ? meanArr[meanArr.length === 1 ? 0 : i]! : (means as number));
  const stdAt = (i: number): number => stdArr![stdArr!.length === 1 ? 0 : i]!;
  // round a value to the dtype (tensor operands hold values of the dtype)
  const cast = dtype === 'float64' ? (x: number) => x : dtype === 'float32' ? fr : dtype === 'float16' ? h16 : hbf;
  const z = stdArr ? normal(gen, numel, dtype, 0, 1) : normal(gen, numel, dtype, 0, stds as number);
  const scaled = (v: number, i: number) => (stdArr ? cast(v * cast(stdAt(i))) : v);
  switch (dtype) {
    case 'float32': {
      const o = z as Float32Array;
      for (let i = 0; i < numel; i++) o[i] = fr(scaled(o[i]!, i) + fr(meanAt(i)));
      return o;
    }
    case 'float64': {
      const o = z as Float64Array;
      for (let i = 0; i < numel; i++) o[i] = scaled(o[i]!, i) + meanAt(i);
      return o;
    }
    case 'float16':
    case 'bfloat16': {
      const dec = dtype === 'float16' ? fromFloat16Bits : fromBFloat16Bits;
      const enc = dtype === 'float16' ? toFloat16Bits : toBFloat16Bits;
      const o = z as Uint16Array;
      for (let i = 0; i < numel; i++) o[i] = enc(fr(scaled(dec(o[i]!), i) + cast(meanAt(i))));
      return o;
    }
  }
}

// ------------------------------------------------------------------------------------------------
// Integers

const INT_RANGE: Partial<Record<DTypeName, [bigint, bigint, string]>> = {
  bool: [0n, 1n, 'bool'],
  uint8: [0n, 255n, 'unsigned char'],
  int8: [-128n, 127n, 'signed char'],
  int16: [-32768n, 32767n, 'short int'],
  int32: [-2147483648n, 2147483647n, 'int'],
  int64: [-(1n << 63n), (1n << 63n) - 1n, 'long int'],
};
const FLOAT_DIGITS: Record<FloatDTypeName, number> = { float32: 24, float64: 53, float16: 11, bfloat16: 8 };
const FLOAT_TYPE_NAME: Record<FloatDTypeName, string> = { float32: 'float', float64: 'double', float16: 'c10::Half', bfloat16: 'c10::BFloat16' };

function toBigIntArg(op: string, name: string, v: number | bigint): bigint {
  if (typeof v === 'bigint') return v;
  if (!Number.isInteger(v)) throw new ValueError(op, `${name} must be an integer, got ${v}`);
  return BigInt(v);
}

/** The value of the dtype nearest to integer v as PyTorch casts int64 -> scalar_t. */
function castIntTo(dtype: FloatDTypeName, v: bigint): number {
  const x = Number(v);
  switch (dtype) {
    case 'float64': return x;
    case 'float32': return fr(x);
    case 'float16': return h16(x);
    case 'bfloat16': return hbf(x);
  }
}

/** update_from / update_to (DistributionTemplates.h) for floating dtypes. */
function updateFrom(dtype: FloatDTypeName, from: bigint): bigint {
  const fp1 = BigInt(castIntTo(dtype, from + 1n));
  if (fp1 < from) {
    let f = from + 1n; if (f < 0n) f = -f;
    let n = 0; while ((f >>= 1n) > 0n) n++;
    from = fp1 + (1n << BigInt(n - FLOAT_DIGITS[dtype] + 1));
  }
  return from;
}
function updateTo(dtype: FloatDTypeName, to: bigint): bigint {
  const tm1 = BigInt(castIntTo(dtype, to - 1n));
  if (tm1 >= to) {
    let t = to - 1n; if (t < 0n) t = -t;
    let n = 0; while ((t >>= 1n) > 0n) n++;
    to = tm1 - (1n << BigInt(n - FLOAT_DIGITS[dtype] + 1));
  }
  return to;
}

/**
 * torch.randint(low, high, size) / Tensor.random_(from, to): integers in [low, high).
 * Each value is (random() % range) + low, or (random64() % range) + low when range >= 2^32 and the
 * dtype is int64, float64, float32 or bfloat16 (uniform_int_from_to_distribution).
 */
export function randint(gen: Generator, numel: number, dtype: DTypeName, low: number | bigint, high: number | bigint): StorageArray {
  const op = 'randint';
  checkNumel(op, numel);
  let from = toBigIntArg(op, 'low', low);
  let to = toBigIntArg(op, 'high', high);
  if (!(from < to)) throw new ValueError(op, `random_ expects 'from' to be less than 'to', but got from=${from} >= to=${to}`);
  const isF = dtype === 'float32' || dtype === 'float64' || dtype === 'float16' || dtype === 'bfloat16';
  if (isF) {
    from = updateFrom(dtype, from);
    to = updateTo(dtype, to);
    if (!(from < to)) throw new ValueError(op, `random_ expects 'from' casted to dtype to be less than 'to' casted to dtype, but got from=${from} >= to=${to}`);
    const max = FLOAT_MAX[dtype];
    if (Number(from) < -max || Number(from) > max) throw new ValueError(op, `from is out of bounds for ${FLOAT_TYPE_NAME[dtype]}`);
    if (Number(to - 1n) < -max || Number(to - 1n) > max) throw new ValueError(op, `to - 1 is out of bounds for ${FLOAT_TYPE_NAME[dtype]}`);
  } else {
    const r = INT_RANGE[dtype];
    if (!r) throw new DTypeError(op, `"random_from_to_kernel_cpu" not implemented for '${dtype}'`);
    if (from < r[0] || from > r[1]) throw new ValueError(op, `from is out of bounds for ${r[2]}`);
    if (to - 1n < r[0] || to - 1n > r[1]) throw new ValueError(op, `to - 1 is out of bounds for ${r[2]}`);
  }
  const range = to - from;
  const eng = gen.engine;
  const out = allocStorage(dtype, numel);
  const use64 = range >= 1n << 32n && (dtype === 'int64' || dtype === 'float64' || dtype === 'float32' || dtype === 'bfloat16');
  if (use64) {
    // Rare: huge ranges. BigInt per value.
    for (let i = 0; i < numel; i++) {
      const v = BigInt.asIntN(64, eng.next64() % range + from);
      writeInt(out, dtype, i, v);
    }
    return out;
  }
  // range < 2^32: exact in doubles.
  const rg = Number(range);
  const base = Number(from);
  if (dtype === 'int64') {
    const o = out as BigInt64Array;
    if (Number.isSafeInteger(base + rg)) {
      for (let i = 0; i < numel; i++) o[i] = BigInt((eng.nextInt32() >>> 0) % rg + base);
    } else {
      for (let i = 0; i < numel; i++) o[i] = BigInt((eng.nextInt32() >>> 0) % rg) + from;
    }
    return out;
  }
  for (let i = 0; i < numel; i++) {
    const v = (eng.nextInt32() >>> 0) % rg + base;
    writeIntNumber(out, dtype, i, v);
  }
  return out;
}

function writeIntNumber(out: StorageArray, dtype: DTypeName, i: number, v: number): void {
  switch (dtype) {
    case 'float16': (out as Uint16Array)[i] = toFloat16Bits(v); break;
    case 'bfloat16': (out as Uint16Array)[i] = toBFloat16Bits(v); break;
    case 'bool': (out as Uint8Array)[i] = v !== 0 ? 1 : 0; break;
    case 'int64': (out as BigInt64Array)[i] = BigInt(v); break;
    default: (out as Float32Array)[i] = v; // typed-array store casts (int wrap / float round)
  }
}

function writeInt(out: StorageArray, dtype: DTypeName, i: number, v: bigint): void {
  if (dtype === 'int64') (out as BigInt64Array)[i] = v;
  else writeIntNumber(out, dtype, i, Number(v));
}

/**
 * torch.randperm(n): for n < floor((2^32-1)/20) the classic Fisher-Yates swap with random() % (n-i);
 * above, the inside-out variant with random64() % (i+1) (TensorFactories.cpp randperm_cpu).
 */
export function randperm(gen: Generator, n: number, dtype: DTypeName = 'int64'): StorageArray {
  const op = 'randperm';
  if (!Number.isInteger(n)) throw new ValueError(op, `n must be an integer, got ${n}`);
  if (n < 0) throw new ValueError(op, `n must be non-negative, got${n}`);
  const nm = n > 0 ? n - 1 : n;
  const r = INT_RANGE[dtype];
  if (r) {
    if (dtype === 'bool') throw new DTypeError(op, `"randperm" not implemented for 'Bool'`);
    if (BigInt(nm) > r[1]) throw new ValueError(op, `value cannot be converted to type ${r[2]} without overflow (n is too large for result tensor type)`);
  } else if (dtype === 'float16') {
    if (n > 2049) throw new ValueError(op, 'n cannot be greater than 2049 for Half type.');
  } else if (dtype === 'float32') {
    if (n > 2 ** 24 + 1) throw new ValueError(op, 'n cannot be greater than 2^24+1 for Float type.');
  } else if (dtype !== 'float64' && dtype !== 'bfloat16') {
    throw new DTypeError(op, `"randperm" not implemented for '${dtype}'`);
  }
  const eng = gen.engine;
  const perm = new Float64Array(n);
  if (n < Math.floor(4294967295 / 20)) {
    for (let i = 0; i < n; i++) perm[i] = i;
    for (let i = 0; i < n - 1; i++) {
      const z = (eng.nextInt32() >>> 0) % (n - i);
      const sv = perm[i]!;
      perm[i] = perm[z + i]!;
      perm[z + i] = sv;
    }
  } else {
    for (let i = 0; i < n; i++) {
      const z = Number(eng.next64() % BigInt(i + 1));
      perm[i] = perm[z]!;
      perm[z] = i;
    }
  }
  const out = allocStorage(dtype, n);
  for (let i = 0; i < n; i++) writeIntNumber(out, dtype, i, perm[i]!);
  return out;
}

// ------------------------------------------------------------------------------------------------
// Bernoulli, dropout

function writeBit(out: StorageArray, dtype: DTypeName, i: number, b: boolean): void {
  switch (dtype) {
    case 'float16': (out as Uint16Array)[i] = b ? 0x3c00 : 0; break;
    case 'bfloat16': (out as Uint16Array)[i] = b ? 0x3f80 : 0; break;
    case 'int64': (out as BigInt64Array)[i] = b ? 1n : 0n; break;
    default: (out as Float32Array)[i] = b ? 1 : 0;
  }
}

function checkBernoulliDType(op: string, dtype: DTypeName): void {
  if (dtype === 'complex64' || dtype === 'complex128' || dtype === 'float8_e4m3fn' || dtype === 'float8_e5m2') {
    throw new DTypeError(op, `"${op}" not implemented for '${dtype}'`);
  }
}

/**
 * Tensor.bernoulli_(p) with a Python float p: each element is (uniform53() < p) — the default
 * CPU kernel (bernoulli_distribution<double>). See the note on MKL builds in `dropoutMask`.
 */
export function bernoulliScalar(gen: Generator, numel: number, dtype: DTypeName = 'float32', p = 0.5): StorageArray {
  const op = 'bernoulli_';
  checkNumel(op, numel);
  checkBernoulliDType(op, dtype);
  if (!(p >= 0 && p <= 1)) throw new ValueError(op, `bernoulli_ expects p to be in [0, 1], but got p=${p}`);
  const eng = gen.engine;
  const out = allocStorage(dtype, numel);
  for (let i = 0; i < numel; i++) writeBit(out, dtype, i, eng.next53() * TWO_M53 < p);
  return out;
}

/**
 * torch.bernoulli(probs) / Tensor.bernoulli_(p_tensor): element i is 1 with probability probs[i].
 * `probDtype` is the dtype of the probability tensor (default: `dtype`, as torch.bernoulli(input)
 * returns the input's dtype): float64 probabilities compare against a 53-bit uniform, every other
 * dtype against a 24-bit float uniform (bernoulli_distribution<float>).
 */
export function bernoulliTensor(gen: Generator, probs: Float64Array, dtype: DTypeName = 'float32', probDtype: DTypeName = dtype): StorageArray {
  const op = 'bernoulli';
  checkBernoulliDType(op, dtype);
  checkFloatDType(op, probDtype);
  const n = probs.length;
  const eng = gen.engine;
  const out = allocStorage(dtype, n);
  const bad = (): never => { throw new ValueError(op, 'Expected p_in >= 0 && p_in <= 1 to be true, but got false.'); };
  if (probDtype === 'float64') {
    for (let i = 0; i < n; i++) {
      const p = probs[i]!;
      if (!(p >= 0 && p <= 1)) bad();
      writeBit(out, dtype, i, eng.next53() * TWO_M53 < p);
    }
  } else {
    for (let i = 0; i < n; i++) {
      const p = fr(probs[i]!);
      if (!(p >= 0 && p <= 1)) bad();
      writeBit(out, dtype, i, (eng.nextInt32() & 0xffffff) * TWO_M24 < p);
    }
  }
  return out;
}

/**
 * The noise tensor of nn.functional.dropout(input, p, training=True) on CPU (Dropout.cpp
 * _dropout_impl): noise = empty_like(input).bernoulli_(1 - p).div_(1 - p). The caller multiplies:
 * output = input * noise (one rounded multiply in the dtype, so dropped negatives become -0).
 * p == 0 returns ones and p == 1 zeros without drawing, as PyTorch returns early.
 */
export function dropoutMask(gen: Generator, numel: number, dtype: DTypeName = 'float32', p = 0.5): StorageArray {
  const op = 'nn.functional.dropout';
  checkNumel(op, numel);
  checkFloatDType(op, dtype);
  if (!(p >= 0 && p <= 1)) throw new ValueError(op, `dropout probability has to be between 0 and 1, but got ${p}`);
  const out = allocStorage(dtype, numel);
  if (p === 1) return out;
  if (p === 0) {
    for (let i = 0; i < numel; i++) writeBit(out, dtype, i, true);
    return out;
  }
  const q = 1 - p;
  const mask = bernoulliScalar(gen, numel, dtype, q);
  // div_(1 - p): float32/float64 divide by the scalar cast to the dtype; reduced floats multiply by
  // the float reciprocal (div_true_kernel's reduced-float scalar path).
  let scale: number;
  switch (dtype) {
    case 'float32': scale = fr(1 / fr(q)); break;
    case 'float64': scale = 1 / q; break;
    default: scale = fr(1 / fr(q)); break;
  }
  for (let i = 0; i < numel; i++) {
    switch (dtype) {
      case 'float32': case 'float64': (out as Float32Array)[i] = (mask as Float32Array)[i]! ? scale : 0; break;
      case 'float16': (out as Uint16Array)[i] = (mask as Uint16Array)[i]! ? toFloat16Bits(scale) : 0; break;
      case 'bfloat16': (out as Uint16Array)[i] = (mask as Uint16Array)[i]! ? toBFloat16Bits(scale) : 0; break;
    }
  }
  return out;
}

// ------------------------------------------------------------------------------------------------
// Multinomial

/** exponential_distribution<double>(1) of the 53-bit uniform `u`, cast to the dtype: -log(1 - u). */
function exponentialOf(u: number, dtype: FloatDTypeName): number {
  const v = -1.0 * (__compat.torch113 ? libm.log(1.0 - u) : libm.log1p(-u));
  return dtype === 'float64' ? v : dtype === 'float32' ? fr(v) : dtype === 'float16' ? h16(v) : hbf(v);
}

/**
 * Uniforms at least this large give an exponential draw that is positive in every dtype (about 2^-20;
 * float16's smallest value is 2^-24), so a zero probability divided by it is 0 without computing it.
 */
const POSITIVE_DRAW_MIN = 2 ** -20;

/**
 * torch.multinomial(probs, numSamples, replacement) for `rows` distributions of `k` categories
 * (probs row-major, rows×k). Returns int64 indices, rows×numSamples.
 *
 * Without replacement: q = exponential_(1) over all rows×k elements, then per row the
 * top-numSamples of probs/q (argmax for one sample), computed in `probDtype`.
 * With replacement: per row, the cumulative sum in probDtype normalised by its total, then for each
 * sample a 53-bit uniform located by binary search (MultinomialKernel.cpp).
 *
 * `probDtype` is the dtype of the probability tensor (default float32, PyTorch's default dtype);
 * probs holds its values.
 */
export function multinomial(gen: Generator, probs: Float64Array, rows: number, k: number, numSamples: number, replacement = false, probDtype: DTypeName = 'float32'): BigInt64Array {
  const op = 'multinomial';
  checkFloatDType(op, probDtype);
  if (!Number.isInteger(rows) || rows < 0 || !Number.isInteger(k) || k < 0) throw new ValueError(op, `invalid shape rows=${rows}, k=${k}`);
  if (probs.length !== rows * k) throw new ValueError(op, `probs has ${probs.length} values, expected rows*k = ${rows * k}`);
  if (!Number.isInteger(numSamples)) throw new ValueError(op, `num_samples must be an integer, got ${numSamples}`);
  if (numSamples <= 0) throw new ValueError(op, 'cannot sample n_sample <= 0 samples');
  if (!replacement && numSamples > k) throw new ValueError(op, 'cannot sample n_sample > prob_dist.size(-1) samples without replacement');
  if (k > 2 ** 24) throw new ValueError(op, 'number of categories cannot exceed 2^24');
  const out = new BigInt64Array(rows * numSamples);
  if (out.length === 0) return out;
  const rnd = probDtype === 'float64' ? (x: number) => x : probDtype === 'float32' ? fr : probDtype === 'float16' ? h16 : hbf;

  // (PyTorch's MPS backend also sends numSamples == 1 with replacement here; the CPU does not.)
  if (!replacement) {
    let ok = true;
    for (let i = 0; i < probs.length; i++) { const v = probs[i]!; if (!(v >= 0 && v < Infinity)) ok = false; }
    if (!ok) throw new ValueError(op, 'probability tensor contains either `inf`, `nan` or element < 0');
    for (let r = 0; r < rows; r++) {
      let any = false;
      for (let j = 0; j < k; j++) if (probs[r * k + j]! !== 0) { any = true; break; }
      if (!any) throw new ValueError(op, 'invalid multinomial distribution (sum of probabilities <= 0)');
    }
    // q = probs / exponential_(1), drawn in element order. A zero probability gives 0 whatever the
    // draw is, unless the draw rounds to 0 (then NaN, as in PyTorch): only tiny uniforms need the log.
    // (Top-k/top-p sampling leaves most of a vocabulary at zero, so this skips most logarithms.)
    const eng = gen.engine;
    const q = new Float64Array(rows * k);
    for (let i = 0; i < q.length; i++) {
      const u = eng.next53() * TWO_M53, p = probs[i]!;
      q[i] = p === 0 && u >= POSITIVE_DRAW_MIN ? 0 : rnd(rnd(p) / exponentialOf(u, probDtype));
    }
    const idx = new Int32Array(k);
    for (let r = 0; r < rows; r++) {
      const base = r * k;
      if (numSamples === 1) {
        // argmax: first maximum (NaN counts as maximum)
        let best = 0, bv = q[base]!;
        for (let j = 1; j < k; j++) {
          const v = q[base + j]!;
          if (!(bv !== bv) && (v > bv || v !== v)) { best = j; bv = v; }
        }
        out[r] = BigInt(best);
        continue;
      }
      // at::topk(q_row, numSamples): PyTorch's TopKImpl over libstdc++'s algorithms, whose
      // ordering of ties (zero-probability categories) this reproduces.
      const vals = Float64Array.from(q.subarray(base, base + k));
      for (let j = 0; j < k; j++) idx[j] = j;
      topkLargest(vals, idx, numSamples);
      const sorted = idx;
      for (let s = 0; s < numSamples; s++) out[r * numSamples + s] = BigInt(sorted[s]!);
    }
    return out;
  }

  // With replacement.
  const eng = gen.engine;
  const cum = new Float64Array(k);
  for (let r = 0; r < rows; r++) {
    let sum = 0;
    for (let j = 0; j < k; j++) {
      const v = rnd(probs[r * k + j]!);
      if (!(v >= 0)) throw new ValueError(op, 'invalid multinomial distribution (encountering probability entry < 0)');
      if (!Number.isFinite(v)) throw new ValueError(op, 'invalid multinomial distribution (encountering probability entry = infinity or NaN)');
      sum = accRound(probDtype, sum + v);
      cum[j] = sum;
    }
    if (!(sum > 0)) throw new ValueError(op, 'invalid multinomial distribution (sum of probabilities <= 0)');
    for (let j = 0; j < k; j++) cum[j] = accRound(probDtype, cum[j]! / sum);
    cum[k - 1] = 1;
    for (let s = 0; s < numSamples; s++) {
      const u = eng.next53() * TWO_M53;
      let left = 0, right = k;
      while (right - left > 0) {
        const mid = left + ((right - left) >> 1);
        if (cum[mid]! < u) left = mid + 1;
        else right = mid;
      }
      out[r * numSamples + s] = BigInt(left);
    }
  }
  return out;
}

/** Accumulation rounding of MultinomialKernel: the dtype itself for float/double, float for Half/BFloat16. */
function accRound(dtype: FloatDTypeName, x: number): number {
  return dtype === 'float64' ? x : fr(x);
}

// ------------------------------------------------------------------------------------------------
// topk as PyTorch's CPU kernel runs it (aten/src/ATen/native/TopKImpl.h, largest=true, sorted=true):
// std::partial_sort when k * 64 <= n, else std::nth_element + std::sort of the first k - 1.
// The libstdc++ algorithms are reproduced step for step, so ties come out in the same order.

/** Elements are (vals[i], idx[i]) pairs; comp(a, b) = (isnan(a) && !isnan(b)) || a > b. */
function topkLargest(vals: Float64Array, idx: Int32Array, k: number): void {
  const n = vals.length;
  const A = new StlRange(vals, idx);
  if (k * 64 <= n) {
    A.partialSort(0, k, n);
  } else {
    A.nthElement(0, k - 1, n);
    A.sort(0, k - 1);
  }
}

class StlRange {
  constructor(private readonly v: Float64Array, private readonly ix: Int32Array) {}
  private less(av: number, bv: number): boolean {
    return (av !== av && bv === bv) || av > bv;
  }
  private comp(i: number, j: number): boolean { return this.less(this.v[i]!, this.v[j]!); }
  private swap(i: number, j: number): void {
    const v = this.v, x = this.ix;
    const tv = v[i]!; v[i] = v[j]!; v[j] = tv;
    const tx = x[i]!; x[i] = x[j]!; x[j] = tx;
  }
  private mov(dst: number, src: number): void { this.v[dst] = this.v[src]!; this.ix[dst] = this.ix[src]!; }

  // ---- stl_heap.h ----
  private pushHeap(first: number, hole: number, top: number, val: number, vix: number): void {
    let parent = Math.floor((hole - 1) / 2);
    while (hole > top && this.less(this.v[first + parent]!, val)) {
      this.mov(first + hole, first + parent);
      hole = parent;
      parent = Math.floor((hole - 1) / 2);
    }
    this.v[first + hole] = val; this.ix[first + hole] = vix;
  }
  private adjustHeap(first: number, hole: number, len: number, val: number, vix: number): void {
    const top = hole;
    let second = hole;
    while (second < Math.floor((len - 1) / 2)) {
      second = 2 * (second + 1);
      if (this.comp(first + second, first + second - 1)) second--;
      this.mov(first + hole, first + second);
      hole = second;
    }
    if ((len & 1) === 0 && second === Math.floor((len - 2) / 2)) {
      second = 2 * (second + 1);
      this.mov(first + hole, first + second - 1);
      hole = second - 1;
    }
    this.pushHeap(first, hole, top, val, vix);
  }
  private popHeap(first: number, last: number, result: number): void {
    const val = this.v[result]!, vix = this.ix[result]!;
    this.mov(result, first);
    this.adjustHeap(first, 0, last - first, val, vix);
  }
  private makeHeap(first: number, last: number): void {
    const len = last - first;
    if (len < 2) return;
    let parent = Math.floor((len - 2) / 2);
    for (;;) {
      this.adjustHeap(first, parent, len, this.v[first + parent]!, this.ix[first + parent]!);
      if (parent === 0) return;
      parent--;
    }
  }
  private sortHeap(first: number, last: number): void {
    while (last - first > 1) {
      last--;
      this.popHeap(first, last, last);
    }
  }

  // ---- stl_algo.h ----
  private heapSelect(first: number, middle: number, last: number): void {
    this.makeHeap(first, middle);
    for (let i = middle; i < last; i++) if (this.comp(i, first)) this.popHeap(first, middle, i);
  }
  partialSort(first: number, middle: number, last: number): void {
    this.heapSelect(first, middle, last);
    this.sortHeap(first, middle);
  }
  private moveMedianToFirst(result: number, a: number, b: number, c: number): void {
    if (this.comp(a, b)) {
      if (this.comp(b, c)) this.swap(result, b);
      else if (this.comp(a, c)) this.swap(result, c);
      else this.swap(result, a);
    } else if (this.comp(a, c)) this.swap(result, a);
    else if (this.comp(b, c)) this.swap(result, c);
    else this.swap(result, b);
  }
  private unguardedPartition(first: number, last: number, pivot: number): number {
    for (;;) {
      while (this.comp(first, pivot)) first++;
      last--;
      while (this.comp(pivot, last)) last--;
      if (!(first < last)) return first;
      this.swap(first, last);
      first++;
    }
  }
  private unguardedPartitionPivot(first: number, last: number): number {
    const mid = first + Math.floor((last - first) / 2);
    this.moveMedianToFirst(first, first + 1, mid, last - 1);
    return this.unguardedPartition(first + 1, last, first);
  }
  private unguardedLinearInsert(last: number): void {
    const val = this.v[last]!, vix = this.ix[last]!;
    let next = last - 1;
    while (this.less(val, this.v[next]!)) {
      this.mov(last, next);
      last = next;
      next--;
    }
    this.v[last] = val; this.ix[last] = vix;
  }
  private insertionSort(first: number, last: number): void {
    if (first === last) return;
    for (let i = first + 1; i !== last; i++) {
      if (this.comp(i, first)) {
        const val = this.v[i]!, vix = this.ix[i]!;
        for (let j = i; j > first; j--) this.mov(j, j - 1); // move_backward
        this.v[first] = val; this.ix[first] = vix;
      } else {
        this.unguardedLinearInsert(i);
      }
    }
  }
  private finalInsertionSort(first: number, last: number): void {
    if (last - first > 16) {
      this.insertionSort(first, first + 16);
      for (let i = first + 16; i !== last; i++) this.unguardedLinearInsert(i);
    } else {
      this.insertionSort(first, last);
    }
  }
  private introsortLoop(first: number, last: number, depth: number): void {
    while (last - first > 16) {
      if (depth === 0) {
        this.partialSort(first, last, last);
        return;
      }
      depth--;
      const cut = this.unguardedPartitionPivot(first, last);
      this.introsortLoop(cut, last, depth);
      last = cut;
    }
  }
  sort(first: number, last: number): void {
    if (first === last) return;
    this.introsortLoop(first, last, (31 - Math.clz32(last - first)) * 2);
    this.finalInsertionSort(first, last);
  }
  nthElement(first: number, nth: number, last: number): void {
    if (first === last || nth === last) return;
    let depth = (31 - Math.clz32(last - first)) * 2;
    while (last - first > 3) {
      if (depth === 0) {
        this.heapSelect(first, nth + 1, last);
        this.swap(first, nth);
        return;
      }
      depth--;
      const cut = this.unguardedPartitionPivot(first, last);
      if (cut <= nth) first = cut;
      else last = cut;
    }
    this.insertionSort(first, last);
  }
}
