// CPU kernels: FFT. Any length, computed in float64 and rounded once into the output dtype.
//
// Plans: mixed-radix Stockham (radix 4, 2, 3, then odd factors) for lengths
// whose prime factors are small, Bluestein's chirp-z algorithm (through a power-of-two FFT) for lengths
// with a large prime factor. Twiddles are computed directly for every index (no recurrences), so the
// error stays at a few ulps times log n.

import type { StridedRef } from '../../backend.js';
import { DTYPES } from '../../../dtype/dtypes.js';
import type { BackendKernels } from '../../../kernels/table.js';
import type { FftKind } from '../../../kernels/fft.js';
import { MAX_DIRECT_PRIME, cached, largestPrime, unitRoot } from '../../fft_host.js';

interface Plan {
  readonly n: number;
  /** In-place forward transform (exponent sign -1) of (re, im), each of length n. */
  forward(re: Float64Array, im: Float64Array): void;
}

/**
 * Mixed radix, Stockham autosort (decimation in frequency): stage by stage from `x` to `y` and back, each
 * reading and writing memory in order, no bit reversal. A stage of radix p over the current length n (stride
 * s = N / n) maps x[q + s (j + r m)] (m = n / p) to y[q + s (p j + t)] = W_n^{j t} sum_r x[...] W_p^{r t}.
 */
class StockhamPlan implements Plan {
  private readonly factors: number[] = [];
  private readonly twRe: Float64Array;
  private readonly twIm: Float64Array;
  private readonly yRe: Float64Array;
  private readonly yIm: Float64Array;

  constructor(readonly n: number) {
    this.twRe = new Float64Array(n);
    this.twIm = new Float64Array(n);
    for (let k = 0; k < n; k++) {
      const [c, s] = unitRoot(k, n);
      this.twRe[k] = c;
      this.twIm[k] = -s;
    }
    let rest = n;
    for (const p of [4, 2, 3, 5]) while (rest % p === 0) { this.factors.push(p); rest /= p; }
    for (let p = 7; rest > 1; p += 2) while (rest % p === 0) { this.factors.push(p); rest /= p; }
    this.yRe = new Float64Array(n);
    this.yIm = new Float64Array(n);
  }

  forward(re: Float64Array, im: Float64Array): void {
    let xr = re, xi = im, yr = this.yRe, yi = this.yIm;
    let len = this.n, s = 1;
    for (const p of this.factors) {
      const m = len / p;
      if (p === 4) this.radix4(xr, xi, yr, yi, m, s);
      else if (p === 2) this.radix2(xr, xi, yr, yi, m, s);
      else if (p === 3) this.radix3(xr, xi, yr, yi, m, s);
      else if (p === 5) this.radix5(xr, xi, yr, yi, m, s);
      else this.radixP(xr, xi, yr, yi, m, s, p);
      [xr, yr] = [yr, xr];
      [xi, yi] = [yi, xi];
      len = m;
      s *= p;
    }
    if (xr !== re) { re.set(xr); im.set(xi); }
  }

  private radix2(xr: Float64Array, xi: Float64Array, yr: Float64Array, yi: Float64Array, m: number, s: number): void {
    const tr = this.twRe, ti = this.twIm;
    for (let j = 0; j < m; j++) {
      const wr = tr[j * s]!, wi = ti[j * s]!;
      for (let q = 0; q < s; q++) {
        const i0 = q + s * j, i1 = i0 + s * m, o0 = q + 2 * s * j, o1 = o0 + s;
        const ar = xr[i0]!, ai = xi[i0]!, br = xr[i1]!, bi = xi[i1]!;
        const dr = ar - br, di = ai - bi;
        yr[o0] = ar + br; yi[o0] = ai + bi;
        yr[o1] = dr * wr - di * wi; yi[o1] = dr * wi + di * wr;
      }
    }
  }

  private radix4(xr: Float64Array, xi: Float64Array, yr: Float64Array, yi: Float64Array, m: number, s: number): void {
    const tr = this.twRe, ti = this.twIm;
    for (let j = 0; j < m; j++) {
      const w1r = tr[j * s]!, w1i = ti[j * s]!, w2r = tr[2 * j * s]!, w2i = ti[2 * j * s]!, w3r = tr[3 * j * s]!, w3i = ti[3 * j * s]!;
      for (let q = 0; q < s; q++) {
        const i0 = q + s * j, i1 = i0 + s * m, i2 = i1 + s * m, i3 = i2 + s * m;
        const a0r = xr[i0]!, a0i = xi[i0]!, a1r = xr[i1]!, a1i = xi[i1]!, a2r = xr[i2]!, a2i = xi[i2]!, a3r = xr[i3]!, a3i = xi[i3]!;
        const t0r = a0r + a2r, t0i = a0i + a2i, t1r = a0r - a2r, t1i = a0i - a2i;
        const t2r = a1r + a3r, t2i = a1i + a3i, t3r = a1i - a3i, t3i = a3r - a1r; // t3 = -i (a1 - a3)
        const o0 = q + 4 * s * j, o1 = o0 + s, o2 = o1 + s, o3 = o2 + s;
        yr[o0] = t0r + t2r; yi[o0] = t0i + t2i;
        const b1r = t1r + t3r, b1i = t1i + t3i, b2r = t0r - t2r, b2i = t0i - t2i, b3r = t1r - t3r, b3i = t1i - t3i;
        yr[o1] = b1r * w1r - b1i * w1i; yi[o1] = b1r * w1i + b1i * w1r;
        yr[o2] = b2r * w2r - b2i * w2i; yi[o2] = b2r * w2i + b2i * w2r;
        yr[o3] = b3r * w3r - b3i * w3i; yi[o3] = b3r * w3i + b3i * w3r;
      }
    }
  }

  private radix3(xr: Float64Array, xi: Float64Array, yr: Float64Array, yi: Float64Array, m: number, s: number): void {
    const tr = this.twRe, ti = this.twIm, c = Math.sqrt(3) / 2;
    for (let j = 0; j < m; j++) {
      const w1r = tr[j * s]!, w1i = ti[j * s]!, w2r = tr[2 * j * s]!, w2i = ti[2 * j * s]!;
      for (let q = 0; q < s; q++) {
        const i0 = q + s * j, i1 = i0 + s * m, i2 = i1 + s * m;
        const a0r = xr[i0]!, a0i = xi[i0]!, a1r = xr[i1]!, a1i = xi[i1]!, a2r = xr[i2]!, a2i = xi[i2]!;
        const sr = a1r + a2r, si = a1i + a2i, dr = a1r - a2r, di = a1i - a2i;
        const mr = a0r - sr / 2, mi = a0i - si / 2;
        const b1r = mr + c * di, b1i = mi - c * dr, b2r = mr - c * di, b2i = mi + c * dr;
        const o0 = q + 3 * s * j, o1 = o0 + s, o2 = o1 + s;
        yr[o0] = a0r + sr; yi[o0] = a0i + si;
        yr[o1] = b1r * w1r - b1i * w1i; yi[o1] = b1r * w1i + b1i * w1r;
        yr[o2] = b2r * w2r - b2i * w2i; yi[o2] = b2r * w2i + b2i * w2r;
      }
    }
  }

  private radix5(xr: Float64Array, xi: Float64Array, yr: Float64Array, yi: Float64Array, m: number, s: number): void {
    const tr = this.twRe, ti = this.twIm;
    const c1 = Math.cos((2 * Math.PI) / 5), c2 = Math.cos((4 * Math.PI) / 5), s1 = Math.sin((2 * Math.PI) / 5), s2 = Math.sin((4 * Math.PI) / 5);
    for (let j = 0; j < m; j++) {
      const js = j * s;
      const w1r = tr[js]!, w1i = ti[js]!, w2r = tr[2 * js]!, w2i = ti[2 * js]!, w3r = tr[3 * js]!, w3i = ti[3 * js]!, w4r = tr[4 * js]!, w4i = ti[4 * js]!;
      for (let q = 0; q < s; q++) {
        const i0 = q + js, i1 = i0 + s * m, i2 = i1 + s * m, i3 = i2 + s * m, i4 = i3 + s * m;
        const a0r = xr[i0]!, a0i = xi[i0]!;
        const t1r = xr[i1]! + xr[i4]!, t1i = xi[i1]! + xi[i4]!, t3r = xr[i1]! - xr[i4]!, t3i = xi[i1]! - xi[i4]!;
        const t2r = xr[i2]! + xr[i3]!, t2i = xi[i2]! + xi[i3]!, t4r = xr[i2]! - xr[i3]!, t4i = xi[i2]! - xi[i3]!;
        const m1r = a0r + c1 * t1r + c2 * t2r, m1i = a0i + c1 * t1i + c2 * t2i;
        const m2r = a0r + c2 * t1r + c1 * t2r, m2i = a0i + c2 * t1i + c1 * t2i;
        const ur = s1 * t3r + s2 * t4r, ui = s1 * t3i + s2 * t4i; // b1, b4 = m1 -/+ i u
        const vr = s2 * t3r - s1 * t4r, vi = s2 * t3i - s1 * t4i; // b2, b3 = m2 -/+ i v
        const o0 = q + 5 * js, o1 = o0 + s, o2 = o1 + s, o3 = o2 + s, o4 = o3 + s;
        yr[o0] = a0r + t1r + t2r; yi[o0] = a0i + t1i + t2i;
        const b1r = m1r + ui, b1i = m1i - ur, b4r = m1r - ui, b4i = m1i + ur;
        const b2r = m2r + vi, b2i = m2i - vr, b3r = m2r - vi, b3i = m2i + vr;
        yr[o1] = b1r * w1r - b1i * w1i; yi[o1] = b1r * w1i + b1i * w1r;
        yr[o2] = b2r * w2r - b2i * w2i; yi[o2] = b2r * w2i + b2i * w2r;
        yr[o3] = b3r * w3r - b3i * w3i; yi[o3] = b3r * w3i + b3i * w3r;
        yr[o4] = b4r * w4r - b4i * w4i; yi[o4] = b4r * w4i + b4i * w4r;
      }
    }
  }

  /** Any other radix, as a direct p-point DFT (p is at most MAX_DIRECT_PRIME: larger go through Bluestein). */
  private radixP(xr: Float64Array, xi: Float64Array, yr: Float64Array, yi: Float64Array, m: number, s: number, p: number): void {
    const tr = this.twRe, ti = this.twIm, step = this.n / p;
    const ar = new Float64Array(p), ai = new Float64Array(p);
    const dr = new Float64Array(p * p), di = new Float64Array(p * p); // W_p^{r t}
    for (let t = 0; t < p; t++) for (let r = 0; r < p; r++) { dr[t * p + r] = tr[((r * t) % p) * step]!; di[t * p + r] = ti[((r * t) % p) * step]!; }
    for (let j = 0; j < m; j++) {
      for (let q = 0; q < s; q++) {
        for (let r = 0; r < p; r++) { ar[r] = xr[q + s * (j + r * m)]!; ai[r] = xi[q + s * (j + r * m)]!; }
        for (let t = 0; t < p; t++) {
          let br = 0, bi = 0;
          for (let r = 0, k = t * p; r < p; r++, k++) {
            br += ar[r]! * dr[k]! - ai[r]! * di[k]!;
            bi += ar[r]! * di[k]! + ai[r]! * dr[k]!;
          }
          const w = j * t * s, o = q + s * (p * j + t);
          yr[o] = br * tr[w]! - bi * ti[w]!; yi[o] = br * ti[w]! + bi * tr[w]!;
        }
      }
    }
  }
}

/** Bluestein: a length-n DFT as a circular convolution (of a 5-smooth length M >= 2n - 1) with a chirp. */
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
    // the smallest 5-smooth length that holds the linear convolution (about half a power of two's cost)
    let m = 2 * n - 1;
    while (largestPrime(m) > 5) m++;
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

const plans = new Map<number, Plan>();
/** Lengths whose largest prime factor is beyond the generic butterfly's MAX_DIRECT_PRIME run through Bluestein. */
const planFor = (n: number): Plan =>
  cached(plans, n, () => (largestPrime(n) > MAX_DIRECT_PRIME ? new BluesteinPlan(n) : new StockhamPlan(n)), () => {});

/**
 * One 1-d transform along dim `dim` of `input` (any strides) into `out` (same shape but that dim). c2c: n
 * points (the input trimmed or zero-padded to n), n out. r2c: real in, n/2+1 out. c2r: the first n/2+1
 * points of a Hermitian spectrum in, n real out. `sign` is the exponent's sign (-1 forward); `scale`
 * multiplies the result. Real inputs to c2c/c2r count as complex with zero imaginary part.
 */
export function cpuFftStrided(input: StridedRef, dim: number, out: StridedRef, n: number, kind: FftKind, sign: number, scale: number): void {
  const inC = DTYPES[input.dtype].kind === 'complex', outC = DTYPES[out.dtype].kind === 'complex';
  const src = input.buf as Float64Array, dst = out.buf as Float64Array;
  const plan = planFor(n);
  const re = new Float64Array(n), im = new Float64Array(n);
  const half = (n >> 1) + 1;
  const m = input.shape[dim]!, take = Math.min(m, kind === 'c2r' ? half : n);
  const outLen = kind === 'r2c' ? half : n;
  const is = input.strides[dim]!, os = out.strides[dim]!;
  const si = sign > 0 ? -scale : scale;
  // every other dim is a batch dim: walk them with an odometer
  const batch = input.shape.map((_, k) => k).filter((k) => k !== dim);
  const idx = batch.map(() => 0);
  const rows = batch.reduce((acc, k) => acc * input.shape[k]!, 1);
  let ib = input.offset, ob = out.offset;
  for (let r = 0; r < rows; r++) {
    re.fill(0); im.fill(0);
    if (inC) for (let j = 0; j < take; j++) { const at = 2 * (ib + j * is); re[j] = src[at]!; im[j] = src[at + 1]!; }
    else for (let j = 0; j < take; j++) re[j] = src[ib + j * is]!;
    if (kind === 'c2r') for (let k = half; k < n; k++) { re[k] = re[n - k]!; im[k] = -im[n - k]!; }
    // the inverse direction through the forward plan: conj(F(conj(x)))
    if (sign > 0) for (let j = 0; j < n; j++) im[j] = -im[j]!;
    plan.forward(re, im);
    if (outC) for (let j = 0; j < outLen; j++) { const at = 2 * (ob + j * os); dst[at] = re[j]! * scale; dst[at + 1] = im[j]! * si; }
    else for (let j = 0; j < outLen; j++) dst[ob + j * os] = re[j]! * scale;
    for (let b = batch.length - 1; b >= 0; b--) {
      const k = batch[b]!;
      ib += input.strides[k]!; ob += out.strides[k]!;
      if (++idx[b]! < input.shape[k]!) break;
      ib -= input.strides[k]! * input.shape[k]!; ob -= out.strides[k]! * out.shape[k]!;
      idx[b] = 0;
    }
  }
}

/**
 * The device-neutral contract ('fft'): one transform per row of a contiguous [rows, m] operand into a
 * contiguous [rows, outLen] output. Backends without a strided variant get their input in this layout.
 */
export function cpuFft(input: StridedRef, rows: number, m: number, out: StridedRef, n: number, kind: FftKind, sign: number, scale: number): void {
  const outLen = kind === 'r2c' ? (n >> 1) + 1 : n;
  cpuFftStrided({ ...input, shape: [rows, m], strides: [m, 1] }, 1, { ...out, shape: [rows, outLen], strides: [outLen, 1] }, n, kind, sign, scale);
}

export const kernels = {
  fft: cpuFft,
  fft_strided: cpuFftStrided,
} satisfies BackendKernels;
