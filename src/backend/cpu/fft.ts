// CPU kernels: FFT. Any length, computed in float64 and rounded once into the output dtype.
//
// Plans: mixed-radix Cooley-Tukey (kissfft's decomposition: radix 4, 2, 3, then odd factors) for lengths
// whose prime factors are small, Bluestein's chirp-z algorithm (through a power-of-two FFT) for lengths
// with a large prime factor. Twiddles are computed directly for every index (no recurrences), so the
// error stays at a few ulps times log n.

import type { StridedRef } from '../backend.js';
import { DTYPES } from '../../dtype/dtypes.js';
import { registerKernel } from '../registry.js';

export type FftKind = 'c2c' | 'r2c' | 'c2r';

/** The largest prime factor handled by the O(p^2) generic butterfly; larger ones go through Bluestein. */
const MAX_DIRECT_PRIME = 61;

interface Plan {
  readonly n: number;
  /** In-place forward transform (exponent sign -1) of (re, im), each of length n. */
  forward(re: Float64Array, im: Float64Array): void;
}

/** Mixed radix: the recursive decimation in time of kissfft, out of place through scratch buffers. */
class MixedRadixPlan implements Plan {
  private readonly factors: number[] = [];
  private readonly twRe: Float64Array;
  private readonly twIm: Float64Array;
  private readonly inRe: Float64Array;
  private readonly inIm: Float64Array;
  private readonly scRe: Float64Array;
  private readonly scIm: Float64Array;

  constructor(readonly n: number) {
    this.twRe = new Float64Array(n);
    this.twIm = new Float64Array(n);
    for (let k = 0; k < n; k++) {
      const [c, s] = unitRoot(k, n);
      this.twRe[k] = c;
      this.twIm[k] = -s;
    }
    // kissfft's factorization: 4s first, then 2s, then 3, 5, 7, ...
    let rest = n, p = 4;
    const root = Math.floor(Math.sqrt(n));
    while (rest > 1) {
      while (rest % p !== 0) {
        p = p === 4 ? 2 : p === 2 ? 3 : p + 2;
        if (p > root) p = rest;
      }
      rest /= p;
      this.factors.push(p, rest);
    }
    this.inRe = new Float64Array(n);
    this.inIm = new Float64Array(n);
    const maxP = Math.max(2, ...this.factors.filter((_, i) => i % 2 === 0));
    this.scRe = new Float64Array(maxP);
    this.scIm = new Float64Array(maxP);
  }

  forward(re: Float64Array, im: Float64Array): void {
    if (this.n === 1) return;
    this.inRe.set(re.subarray(0, this.n));
    this.inIm.set(im.subarray(0, this.n));
    this.work(re, im, 0, 0, 1, 0);
  }

  private work(oRe: Float64Array, oIm: Float64Array, out: number, inp: number, fstride: number, fi: number): void {
    const p = this.factors[fi]!, m = this.factors[fi + 1]!;
    if (m === 1) {
      for (let k = 0; k < p; k++) { oRe[out + k] = this.inRe[inp + k * fstride]!; oIm[out + k] = this.inIm[inp + k * fstride]!; }
    } else {
      for (let k = 0; k < p; k++) this.work(oRe, oIm, out + k * m, inp + k * fstride, fstride * p, fi + 2);
    }
    if (p === 2) this.bfly2(oRe, oIm, out, fstride, m);
    else if (p === 4) this.bfly4(oRe, oIm, out, fstride, m);
    else if (p === 3) this.bfly3(oRe, oIm, out, fstride, m);
    else this.bflyGeneric(oRe, oIm, out, fstride, m, p);
  }

  private bfly2(re: Float64Array, im: Float64Array, o: number, fstride: number, m: number): void {
    const wr = this.twRe, wi = this.twIm;
    for (let k = 0; k < m; k++) {
      const a = o + k, b = a + m, t = k * fstride;
      const tr = re[b]! * wr[t]! - im[b]! * wi[t]!, ti = re[b]! * wi[t]! + im[b]! * wr[t]!;
      re[b] = re[a]! - tr; im[b] = im[a]! - ti;
      re[a] = re[a]! + tr; im[a] = im[a]! + ti;
    }
  }

  private bfly4(re: Float64Array, im: Float64Array, o: number, fstride: number, m: number): void {
    const wr = this.twRe, wi = this.twIm;
    for (let k = 0; k < m; k++) {
      const i0 = o + k, i1 = i0 + m, i2 = i1 + m, i3 = i2 + m;
      const t1 = k * fstride, t2 = 2 * t1, t3 = 3 * t1;
      const s0r = re[i1]! * wr[t1]! - im[i1]! * wi[t1]!, s0i = re[i1]! * wi[t1]! + im[i1]! * wr[t1]!;
      const s1r = re[i2]! * wr[t2]! - im[i2]! * wi[t2]!, s1i = re[i2]! * wi[t2]! + im[i2]! * wr[t2]!;
      const s2r = re[i3]! * wr[t3]! - im[i3]! * wi[t3]!, s2i = re[i3]! * wi[t3]! + im[i3]! * wr[t3]!;
      const s5r = re[i0]! - s1r, s5i = im[i0]! - s1i;
      const f0r = re[i0]! + s1r, f0i = im[i0]! + s1i;
      const s3r = s0r + s2r, s3i = s0i + s2i, s4r = s0r - s2r, s4i = s0i - s2i;
      re[i2] = f0r - s3r; im[i2] = f0i - s3i;
      re[i0] = f0r + s3r; im[i0] = f0i + s3i;
      re[i1] = s5r + s4i; im[i1] = s5i - s4r;
      re[i3] = s5r - s4i; im[i3] = s5i + s4r;
    }
  }

  private bfly3(re: Float64Array, im: Float64Array, o: number, fstride: number, m: number): void {
    const wr = this.twRe, wi = this.twIm;
    const epi3 = -Math.sqrt(3) / 2; // Im(e^{-2 pi i / 3})
    for (let k = 0; k < m; k++) {
      const i0 = o + k, i1 = i0 + m, i2 = i1 + m;
      const t1 = k * fstride, t2 = 2 * t1;
      const s1r = re[i1]! * wr[t1]! - im[i1]! * wi[t1]!, s1i = re[i1]! * wi[t1]! + im[i1]! * wr[t1]!;
      const s2r = re[i2]! * wr[t2]! - im[i2]! * wi[t2]!, s2i = re[i2]! * wi[t2]! + im[i2]! * wr[t2]!;
      const s3r = s1r + s2r, s3i = s1i + s2i;
      const s0r = (s1r - s2r) * epi3, s0i = (s1i - s2i) * epi3;
      const mr = re[i0]! - s3r / 2, mi = im[i0]! - s3i / 2;
      re[i0] = re[i0]! + s3r; im[i0] = im[i0]! + s3i;
      re[i2] = mr + s0i; im[i2] = mi - s0r;
      re[i1] = mr - s0i; im[i1] = mi + s0r;
    }
  }

  private bflyGeneric(re: Float64Array, im: Float64Array, o: number, fstride: number, m: number, p: number): void {
    const wr = this.twRe, wi = this.twIm, n = this.n, sr = this.scRe, si = this.scIm;
    for (let u = 0; u < m; u++) {
      for (let q = 0, k = o + u; q < p; q++, k += m) { sr[q] = re[k]!; si[q] = im[k]!; }
      for (let q1 = 0, k = u; q1 < p; q1++, k += m) {
        let accR = sr[0]!, accI = si[0]!, tw = 0;
        for (let q = 1; q < p; q++) {
          tw += fstride * k;
          if (tw >= n) tw -= n;
          accR += sr[q]! * wr[tw]! - si[q]! * wi[tw]!;
          accI += sr[q]! * wi[tw]! + si[q]! * wr[tw]!;
        }
        re[o + k] = accR; im[o + k] = accI;
      }
    }
  }
}

/** Bluestein: a length-n DFT as a circular convolution of length M = 2^k >= 2n - 1 with a chirp. */
class BluesteinPlan implements Plan {
  private readonly m: number;
  private readonly inner: Plan;
  private readonly wRe: Float64Array; // chirp e^{-i pi k^2 / n}
  private readonly wIm: Float64Array;
  private readonly bRe: Float64Array; // FFT of the conjugate chirp, wrapped
  private readonly bIm: Float64Array;
  private readonly aRe: Float64Array;
  private readonly aIm: Float64Array;

  constructor(readonly n: number) {
    let m = 1;
    while (m < 2 * n - 1) m *= 2;
    this.m = m;
    this.inner = planFor(m);
    this.wRe = new Float64Array(n);
    this.wIm = new Float64Array(n);
    // k^2 mod 2n, kept exact by the recurrence (k+1)^2 = k^2 + 2k + 1
    for (let k = 0, sq = 0; k < n; k++) {
      const [c, s] = unitRoot(sq, 2 * n);
      this.wRe[k] = c;
      this.wIm[k] = -s;
      sq = (sq + 2 * k + 1) % (2 * n);
    }
    this.bRe = new Float64Array(m);
    this.bIm = new Float64Array(m);
    for (let k = 0; k < n; k++) {
      this.bRe[k] = this.wRe[k]!; this.bIm[k] = -this.wIm[k]!;
      if (k > 0) { this.bRe[m - k] = this.wRe[k]!; this.bIm[m - k] = -this.wIm[k]!; }
    }
    this.inner.forward(this.bRe, this.bIm);
    this.aRe = new Float64Array(m);
    this.aIm = new Float64Array(m);
  }

  forward(re: Float64Array, im: Float64Array): void {
    const { n, m, wRe, wIm, aRe, aIm, bRe, bIm } = this;
    aRe.fill(0); aIm.fill(0);
    for (let k = 0; k < n; k++) {
      aRe[k] = re[k]! * wRe[k]! - im[k]! * wIm[k]!;
      aIm[k] = re[k]! * wIm[k]! + im[k]! * wRe[k]!;
    }
    this.inner.forward(aRe, aIm);
    // pointwise product, conjugated so a forward FFT performs the inverse
    for (let k = 0; k < m; k++) {
      const r = aRe[k]! * bRe[k]! - aIm[k]! * bIm[k]!, i = aRe[k]! * bIm[k]! + aIm[k]! * bRe[k]!;
      aRe[k] = r; aIm[k] = -i;
    }
    this.inner.forward(aRe, aIm);
    for (let k = 0; k < n; k++) {
      const cr = aRe[k]! / m, ci = -aIm[k]! / m;
      re[k] = cr * wRe[k]! - ci * wIm[k]!;
      im[k] = cr * wIm[k]! + ci * wRe[k]!;
    }
  }
}

/** (cos, sin) of 2 pi num / den, reduced to [0, pi/4] by exact integer symmetries for accurate twiddles. */
function unitRoot(num: number, den: number): [number, number] {
  num %= den;
  let negSin = false, negCos = false, swap = false;
  if (2 * num > den) { num = den - num; negSin = true; } // 2 pi - x
  if (4 * num > den) { num = den - 2 * num; den *= 2; negCos = true; } // pi - x
  if (8 * num > den) { num = den - 4 * num; den *= 4; swap = true; } // pi/2 - x
  const a = (2 * Math.PI * num) / den;
  let c = Math.cos(a), s = Math.sin(a);
  if (swap) [c, s] = [s, c];
  return [negCos ? -c : c, negSin ? -s : s];
}

function largestPrimeFactor(n: number): number {
  let best = 1;
  for (let p = 2; p * p <= n; p++) while (n % p === 0) { best = p; n /= p; }
  return n > 1 ? Math.max(best, n) : best;
}

const plans = new Map<number, Plan>();
function planFor(n: number): Plan {
  let p = plans.get(n);
  if (!p) {
    p = largestPrimeFactor(n) > MAX_DIRECT_PRIME ? new BluesteinPlan(n) : new MixedRadixPlan(n);
    if (plans.size > 64) plans.delete(plans.keys().next().value!);
    plans.set(n, p);
  }
  return p;
}

/**
 * One 1-d transform per row of a contiguous [rows, m] operand into a contiguous [rows, outLen] output.
 * c2c: n points (input trimmed or zero-padded to n), n out. r2c: real in, n/2+1 out. c2r: the first
 * n/2+1 points of a Hermitian spectrum in, n real out. `sign` is the exponent's sign (-1 forward);
 * `scale` multiplies the result. Real inputs to c2c/c2r count as complex with zero imaginary part.
 */
export function cpuFft(input: StridedRef, rows: number, m: number, out: StridedRef, n: number, kind: FftKind, sign: number, scale: number): void {
  const inC = DTYPES[input.dtype].kind === 'complex', outC = DTYPES[out.dtype].kind === 'complex';
  const src = input.buf as Float64Array, dst = out.buf as Float64Array;
  const plan = planFor(n);
  const re = new Float64Array(n), im = new Float64Array(n);
  const half = (n >> 1) + 1;
  const take = Math.min(m, kind === 'c2r' ? half : n);
  const outLen = kind === 'r2c' ? half : n;
  for (let r = 0; r < rows; r++) {
    re.fill(0); im.fill(0);
    const base = input.offset + r * m;
    if (inC) for (let j = 0; j < take; j++) { re[j] = src[2 * (base + j)]!; im[j] = src[2 * (base + j) + 1]!; }
    else for (let j = 0; j < take; j++) re[j] = src[base + j]!;
    if (kind === 'c2r') for (let k = half; k < n; k++) { re[k] = re[n - k]!; im[k] = -im[n - k]!; }
    // the inverse direction through the forward plan: conj(F(conj(x)))
    if (sign > 0) for (let j = 0; j < n; j++) im[j] = -im[j]!;
    plan.forward(re, im);
    const ob = out.offset + r * outLen;
    const s = scale, si = sign > 0 ? -scale : scale;
    if (outC) for (let j = 0; j < outLen; j++) { dst[2 * (ob + j)] = re[j]! * s; dst[2 * (ob + j) + 1] = im[j]! * si; }
    else for (let j = 0; j < outLen; j++) dst[ob + j] = re[j]! * s;
  }
}

registerKernel('fft', 'cpu', cpuFft);
