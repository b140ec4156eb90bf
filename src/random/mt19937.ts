// MT19937, exactly as PyTorch's CPU generator runs it (aten/src/ATen/core/MT19937RNGEngine.h).
//
// - Seeding: the seed is a uint64, but only its low 32 bits enter the state (`init_with_uint32`):
//   state[0] = seed & 0xffffffff; state[j] = 1812433253 * (state[j-1] ^ (state[j-1] >> 30)) + j.
//   The full 64-bit seed is kept (it is what `initial_seed()` returns and what get_state stores).
// - `left`/`next` bookkeeping is PyTorch's: a fresh engine has left = 1, next = 0, so the first
//   draw regenerates the whole state ("twist") and returns tempered state[0].
// - next32() is CPUGeneratorImpl::random(); next64() is random64() = (first << 32) | second.
//
// Hot paths never touch BigInt: words are kept in an Int32Array and tempered with 32-bit integer
// arithmetic. `fill32` draws many words at once (same sequence as repeated next32()).

export const MT_N = 624;
const MT_M = 397;
const MATRIX_A = 0x9908b0df | 0;
const UMASK = 0x80000000 | 0;
const LMASK = 0x7fffffff;

const U32 = 4294967296;

export class MT19937 {
  /** The 624 state words (as int32 bit patterns). */
  readonly state = new Int32Array(MT_N);
  /** PyTorch's `left_`: draws remaining + 1 before the next twist. */
  left = 1;
  /** PyTorch's `next_`: index of the next state word to temper. */
  next = 0;
  /** PyTorch's `seeded_`. */
  seeded = true;
  /** The full uint64 seed (`seed_`). */
  seed: bigint = 5489n;

  constructor(seed: number | bigint = 5489n) {
    this.reseed(seed);
  }

  /** init_with_uint32: only the low 32 bits of the seed matter for the stream. */
  reseed(seed: number | bigint): void {
    const s64 = toUint64(seed);
    this.seed = s64;
    this.seeded = true;
    const st = this.state;
    let s = Number(s64 & 0xffffffffn) | 0;
    st[0] = s;
    for (let j = 1; j < MT_N; j++) {
      s = (Math.imul(1812433253, s ^ (s >>> 30)) + j) | 0;
      st[j] = s;
    }
    this.left = 1;
    this.next = 0;
  }

  /** Regenerate all 624 words (PyTorch's next_state), resetting left/next. Branch-free twist. */
  twist(): void {
    const st = this.state;
    this.left = MT_N;
    this.next = 0;
    let kk = 0;
    for (; kk < MT_N - MT_M; kk++) {
      const u = st[kk]!, v = st[kk + 1]!;
      st[kk] = st[kk + MT_M]! ^ (((u & UMASK) | (v & LMASK)) >>> 1) ^ (-(v & 1) & MATRIX_A);
    }
    for (; kk < MT_N - 1; kk++) {
      const u = st[kk]!, v = st[kk + 1]!;
      st[kk] = st[kk + MT_M - MT_N]! ^ (((u & UMASK) | (v & LMASK)) >>> 1) ^ (-(v & 1) & MATRIX_A);
    }
    const u = st[MT_N - 1]!, v = st[0]!;
    st[MT_N - 1] = st[MT_M - 1]! ^ (((u & UMASK) | (v & LMASK)) >>> 1) ^ (-(v & 1) & MATRIX_A);
  }

  /** One 32-bit draw as an int32 bit pattern (fastest form; `>>> 0` gives the unsigned value). */
  nextInt32(): number {
    if (--this.left === 0) this.twist();
    let y = this.state[this.next++]!;
    y ^= y >>> 11;
    y ^= (y << 7) & 0x9d2c5680;
    y ^= (y << 15) & 0xefc60000;
    y ^= y >>> 18;
    return y;
  }

  /** CPUGeneratorImpl::random(): a uint32 as a non-negative number. */
  next32(): number {
    return this.nextInt32() >>> 0;
  }

  /** CPUGeneratorImpl::random64(): (first draw << 32) | second draw, as a BigInt. */
  next64(): bigint {
    const hi = this.nextInt32() >>> 0;
    const lo = this.nextInt32() >>> 0;
    return (BigInt(hi) << 32n) | BigInt(lo);
  }

  /**
   * random64() reduced to the top 53 bits' worth used by uniform_real<double>: returns
   * (random64() & (2^53 - 1)) as an exact double integer, without BigInt.
   */
  next53(): number {
    const hi = this.nextInt32() & 0x1fffff;
    const lo = this.nextInt32() >>> 0;
    return hi * U32 + lo;
  }

  /** Draw `n` words (int32 bit patterns) into out[off .. off+n), same sequence as nextInt32(). */
  fill32(out: Int32Array | Uint32Array, off: number, n: number): void {
    const st = this.state;
    const end = off + n;
    while (off < end) {
      if (this.left === 1) {
        this.twist();
        // The draw that triggers the twist returns state[0] (next becomes 1, left stays 624).
        out[off++] = temper(st[this.next++]!);
        continue;
      }
      // left-1 words are available without another twist.
      const avail = this.left - 1;
      const take = Math.min(avail, end - off);
      let idx = this.next;
      const stop = off + take;
      for (let o = off; o < stop; o++) {
        let y = st[idx++]!;
        y ^= y >>> 11;
        y ^= (y << 7) & 0x9d2c5680;
        y ^= (y << 15) & 0xefc60000;
        y ^= y >>> 18;
        out[o] = y;
      }
      this.next = idx;
      this.left -= take;
      off = stop;
    }
  }

  /**
   * out[off .. off+n) = (random() & 0xffffff) * 2^-24 for n consecutive draws: PyTorch's float
   * uniform_real_distribution(0, 1) in bulk (same sequence as n calls of next32()).
   */
  fillUniform24(out: Float32Array | Float64Array, off: number, n: number): void {
    const st = this.state;
    const end = off + n;
    while (off < end) {
      if (this.left === 1) this.twist(); // then state[0] is the next word and left stays 624
      else this.left--;
      // words available now: state[next] plus (left - 1) more without another twist
      let idx = this.next;
      const take = Math.min(this.left, end - off);
      const stop = off + take;
      for (let o = off; o < stop; o++) {
        let y = st[idx++]!;
        y ^= y >>> 11;
        y ^= (y << 7) & 0x9d2c5680;
        y ^= (y << 15) & 0xefc60000;
        y ^= y >>> 18;
        out[o] = (y & 0xffffff) * 5.9604644775390625e-8;
      }
      this.next = idx;
      this.left -= take - 1;
      off = stop;
    }
  }

  /** A deep copy (state, counters, seed). */
  clone(): MT19937 {
    const c = new MT19937(0n);
    c.copyFrom(this);
    return c;
  }

  copyFrom(o: MT19937): void {
    this.state.set(o.state);
    this.left = o.left;
    this.next = o.next;
    this.seeded = o.seeded;
    this.seed = o.seed;
  }

  /** PyTorch's mt19937::is_valid(). */
  isValid(): boolean {
    return this.seeded && this.left > 0 && this.left <= MT_N && this.next <= MT_N;
  }
}

function temper(y: number): number {
  y ^= y >>> 11;
  y ^= (y << 7) & 0x9d2c5680;
  y ^= (y << 15) & 0xefc60000;
  y ^= y >>> 18;
  return y;
}

/** Interpret a seed like PyTorch's `manual_seed` does: an integer taken modulo 2^64. */
export function toUint64(seed: number | bigint): bigint {
  if (typeof seed === 'number') {
    if (!Number.isInteger(seed)) throw new TypeError(`manual_seed: seed must be an integer, got ${seed}`);
    seed = BigInt(seed);
  }
  return BigInt.asUintN(64, seed);
}
