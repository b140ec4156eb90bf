// Host-side FFT planning shared by the backends' kernels: twiddles by exact symmetries (the CPU's and
// the GPUs'), and for the GPU kernels the plan of a transform (radix factorisation, Bluestein's chirp
// tables, the lengths a launch reads and writes) with a cache of its device tables, which each backend
// uploads in its own precision.

import type { FftKind } from '../kernels/fft.js';

/** Lengths whose largest prime factor exceeds this run through Bluestein's algorithm (as the CPU's plan). */
export const MAX_DIRECT_PRIME = 61;
/** Plans and chirps cached per backend (least recently created dropped first). */
const MAX_CACHED = 64;

/** (cos, sin) of 2π num / den, reduced to [0, π/4] by exact symmetries (every backend's twiddles). */
export function unitRoot(num: number, den: number): [number, number] {
  num %= den;
  let negSin = false, negCos = false, swap = false;
  if (2 * num > den) { num = den - num; negSin = true; }
  if (4 * num > den) { num = den - 2 * num; den *= 2; negCos = true; }
  if (8 * num > den) { num = den - 4 * num; den *= 4; swap = true; }
  const a = (2 * Math.PI * num) / den;
  let c = Math.cos(a), s = Math.sin(a);
  if (swap) [c, s] = [s, c];
  return [negCos ? -c : c, negSin ? -s : s];
}

/** Radices: 4s, then 2s, then odd factors (the CPU plan's order). */
export function factorize(n: number): number[] {
  const f: number[] = [];
  let p = 4;
  while (n > 1) {
    while (n % p !== 0) {
      p = p === 4 ? 2 : p === 2 ? 3 : p + 2;
      if (p * p > n) p = n;
    }
    f.push(p);
    n /= p;
  }
  return f;
}

export const largestPrime = (n: number): number => Math.max(1, ...factorize(n).map((p) => (p === 4 ? 2 : p)));

/** e^{-2πik/L} for k < L, interleaved (re, im). */
export function twiddles(L: number): Float64Array {
  const t = new Float64Array(2 * L);
  for (let k = 0; k < L; k++) { const [c, s] = unitRoot(k, L); t[2 * k] = c; t[2 * k + 1] = -s; }
  return t;
}

/** In-place forward radix-2 FFT of interleaved data (power-of-two length; the Bluestein chirp spectrum). */
export function hostFft2(a: Float64Array): void {
  const n = a.length / 2;
  for (let i = 1, j = 0; i < n; i++) {
    let bit = n >> 1;
    for (; j & bit; bit >>= 1) j ^= bit;
    j ^= bit;
    if (i < j) { [a[2 * i], a[2 * j]] = [a[2 * j]!, a[2 * i]!]; [a[2 * i + 1], a[2 * j + 1]] = [a[2 * j + 1]!, a[2 * i + 1]!]; }
  }
  for (let len = 2; len <= n; len <<= 1) {
    for (let k = 0; k < len / 2; k++) {
      const [c, s] = unitRoot(k, len);
      const wr = c, wi = -s;
      for (let i = k; i < n; i += len) {
        const u = i, v = i + len / 2;
        const tr = a[2 * v]! * wr - a[2 * v + 1]! * wi, ti = a[2 * v]! * wi + a[2 * v + 1]! * wr;
        a[2 * v] = a[2 * u]! - tr; a[2 * v + 1] = a[2 * u + 1]! - ti;
        a[2 * u] = a[2 * u]! + tr; a[2 * u + 1] = a[2 * u + 1]! + ti;
      }
    }
  }
}

/** The cached device tables for `key`, made (and remembered, evicting the oldest) on a miss. */
export function cached<T>(m: Map<number, T>, key: number, make: () => T, release: (v: T) => void): T {
  return m.get(key) ?? remember(m, key, make(), release);
}

/** Keeps `v` under `key`, dropping (and releasing) the oldest entry beyond MAX_CACHED. */
export function remember<T>(m: Map<number, T>, key: number, v: T, release: (v: T) => void): T {
  if (m.size >= MAX_CACHED) { const [k, old] = m.entries().next().value as [number, T]; m.delete(k); release(old); }
  m.set(key, v);
  return v;
}

/** Bluestein's transform length: the power of two M >= 2n - 1 its circular convolution runs at. */
export function bluesteinLength(n: number): number {
  let M = 1;
  while (M < 2 * n - 1) M *= 2;
  return M;
}

/** Bluestein's chirp e^{-iπk²/n} (k < n) and the FFT of its conjugate wrapped to M points (the CPU's). */
export function bluesteinTables(n: number): { M: number; chirp: Float64Array; spectrum: Float64Array } {
  const M = bluesteinLength(n);
  const w = new Float64Array(2 * n), b = new Float64Array(2 * M);
  for (let k = 0, sq = 0; k < n; k++) {
    const [c, s] = unitRoot(sq, 2 * n);
    w[2 * k] = c; w[2 * k + 1] = -s;
    b[2 * k] = c; b[2 * k + 1] = s;
    if (k > 0) { b[2 * (M - k)] = c; b[2 * (M - k) + 1] = s; }
    sq = (sq + 2 * k + 1) % (2 * n);
  }
  hostFft2(b);
  return { M, chirp: w, spectrum: b };
}

/** The plan of one n-point transform, the same on every GPU backend (the kernels differ, not the plan). */
export interface FftPlan {
  /** Through Bluestein's algorithm: n has a prime factor beyond MAX_DIRECT_PRIME. */
  blue: boolean;
  /** The length the radix passes run at: n, or Bluestein's bluesteinLength(n). */
  L: number;
  /** The radices of L's passes, in order (factorize). */
  factors: number[];
  /** Input points read per row (zeros beyond): m trimmed to n, or to n/2+1 for c2r's one-sided input. */
  take: number;
  /** Output points per row: n/2+1 for r2c, else n. */
  outLen: number;
}

/** How a backend makes (and frees) its device copies of the host tables, in its own precision. */
export interface FftUploads<T, C> {
  /** e^{-2πik/L} for k < L (twiddles(L)) and L's radices. */
  twiddles(L: number, factors: number[], table: Float64Array): T;
  releaseTwiddles(t: T): void;
  /** Bluestein's chirp and its spectrum (bluesteinTables). */
  chirp(chirp: Float64Array, spectrum: Float64Array): C;
  releaseChirp(c: C): void;
}

/** A backend's FFT plans with their device tables: twiddles cached per length, chirps per n (MAX_CACHED each). */
export class FftPlans<T, C> {
  private readonly tables = new Map<number, { factors: number[]; tw: T }>();
  private readonly chirps = new Map<number, C>();

  constructor(private readonly up: FftUploads<T, C>) {}

  /** The plan of an n-point `kind` transform of rows of m input points, and the device tables it reads. */
  plan(n: number, m: number, kind: FftKind): FftPlan & { tw: T; chirp: C | null } {
    const blue = largestPrime(n) > MAX_DIRECT_PRIME;
    const chirp = blue ? cached(this.chirps, n, () => {
      const t = bluesteinTables(n);
      return this.up.chirp(t.chirp, t.spectrum);
    }, (c) => this.up.releaseChirp(c)) : null;
    const L = blue ? bluesteinLength(n) : n;
    const { factors, tw } = cached(this.tables, L, () => {
      const f = factorize(L);
      return { factors: f, tw: this.up.twiddles(L, f, twiddles(L)) };
    }, (t) => this.up.releaseTwiddles(t.tw));
    const half = (n >> 1) + 1;
    return { blue, L, factors, take: Math.min(m, kind === 'c2r' ? half : n), outLen: kind === 'r2c' ? half : n, tw, chirp };
  }
}
