// Generator: PyTorch's CPUGeneratorImpl (aten/src/ATen/CPUGeneratorImpl.cpp) in TypeScript.
//
// A Generator is an MT19937 engine plus the two cached Box-Muller samples PyTorch keeps
// (`next_float_normal_sample_`, `next_double_normal_sample_`). Seeding clears both caches, as
// `set_current_seed` does. get_state()/set_state() use PyTorch's own 5056-byte layout
// (CPUGeneratorImplState), so a state taken from `torch.get_rng_state()` can be loaded here and the
// reverse, byte for byte:
//
//   offset  size  field
//        0     8  the_initial_seed (uint64 LE)
//        8     4  left (int32)
//       12     4  seeded (int32, 0/1)
//       16     8  next (uint64)
//       24  4992  state[624] (each word as uint64; high halves zero)
//     5016     8  normal_x   (double, unused: 0)
//     5024     8  normal_y   (double: the cached double normal sample)
//     5032     8  normal_rho (double, unused: 0)
//     5040     4  normal_is_valid (int32)
//     5044     4  padding (0)
//     5048     4  next_float_normal_sample (float)
//     5052     1  is_next_float_normal_sample_valid (bool)
//     5053     3  padding (0)
//
// Streams for servers: `fork(key)` derives an independent generator from (this generator's initial
// seed, key) without drawing from or otherwise touching this generator, so the default stream's
// numbers are identical whether or not forks are made. See `fork` for the derivation.

import { UnsupportedError, ValueError } from '../errors.js';
import { MT19937, MT_N, toUint64 } from './mt19937.js';

/** sizeof(CPUGeneratorImplState) in PyTorch. */
export const CPU_STATE_BYTES = 5056;

/** PyTorch's default_rng_seed_val. */
export const DEFAULT_RNG_SEED = 67280421310721n;

const TWO64 = 1n << 64n;

function checkSeed(op: string, seed: number | bigint): bigint {
  let s: bigint;
  if (typeof seed === 'number') {
    if (!Number.isInteger(seed)) throw new ValueError(op, `seed must be an integer, got ${seed}`);
    s = BigInt(seed);
  } else if (typeof seed === 'bigint') {
    s = seed;
  } else {
    throw new ValueError(op, `seed must be a number or bigint, got ${typeof seed}`);
  }
  // PyTorch accepts [-2^63, 2^64) and keeps the value modulo 2^64 ("Overflow when unpacking long").
  if (s < -(1n << 63n) || s >= TWO64) throw new ValueError(op, `Overflow when unpacking long: seed ${s} is outside [-2^63, 2^64)`);
  return toUint64(s);
}

/** A nondeterministic 64-bit seed (PyTorch reads /dev/urandom; we use the platform CSPRNG). */
function nondeterministicSeed(): bigint {
  const b = new BigUint64Array(1);
  const c = (globalThis as { crypto?: { getRandomValues?: (a: BigUint64Array) => BigUint64Array } }).crypto;
  if (c?.getRandomValues) {
    c.getRandomValues(b);
    return b[0]!;
  }
  // Fallback: time and Math.random (only reached on platforms without WebCrypto).
  const t = BigInt(Date.now()) ^ (BigInt(Math.floor(Math.random() * 2 ** 32)) << 20n);
  return BigInt.asUintN(64, t * 0x9e3779b97f4a7c15n);
}

/** SplitMix64 finalizer: a bijective 64-bit mix. */
function mix64(z: bigint): bigint {
  z = BigInt.asUintN(64, z);
  z = BigInt.asUintN(64, (z ^ (z >> 30n)) * 0xbf58476d1ce4e5b9n);
  z = BigInt.asUintN(64, (z ^ (z >> 27n)) * 0x94d049bb133111ebn);
  return z ^ (z >> 31n);
}

/** FNV-1a over the UTF-8 bytes of a string, 64-bit. */
function hashString(s: string): bigint {
  let h = 0xcbf29ce484222325n;
  for (const byte of new TextEncoder().encode(s)) {
    h ^= BigInt(byte);
    h = BigInt.asUintN(64, h * 0x100000001b3n);
  }
  return h;
}

export interface GeneratorOptions {
  /** Only 'cpu' streams exist: every backend draws from the CPU MT19937 stream (like torch's CPU generator). */
  device?: string;
}

export class Generator {
  /** The engine. Exposed for the samplers in sample.ts; treat as internal. */
  readonly engine: MT19937;
  /** PyTorch's next_float_normal_sample_ (undefined = empty optional). */
  nextFloatNormal: number | undefined = undefined;
  /** PyTorch's next_double_normal_sample_ (undefined = empty optional). */
  nextDoubleNormal: number | undefined = undefined;
  readonly device: string;

  constructor(opts: GeneratorOptions = {}) {
    const device = opts.device ?? 'cpu';
    if (device !== 'cpu' && !device.startsWith('cpu:')) {
      // Device generators (CUDA's Philox streams) are not implemented: refuse rather than differ.
      throw new UnsupportedError('Generator', `only CPU generators (MT19937) are implemented; got device '${device}'`);
    }
    this.device = 'cpu';
    this.engine = new MT19937(DEFAULT_RNG_SEED);
  }

  /** torch.Generator.manual_seed: seeds the stream and clears the cached normal samples. */
  manual_seed(seed: number | bigint): this {
    const s = checkSeed('manual_seed', seed);
    this.nextFloatNormal = undefined;
    this.nextDoubleNormal = undefined;
    this.engine.reseed(s);
    return this;
  }

  /** camelCase alias of manual_seed. */
  manualSeed(seed: number | bigint): this {
    return this.manual_seed(seed);
  }

  /** torch.Generator.seed: reseed from a nondeterministic source and return that seed. */
  seed(): bigint {
    const s = nondeterministicSeed();
    this.manual_seed(s);
    return s;
  }

  /** torch.Generator.initial_seed: the seed the stream was last seeded with (uint64). */
  initial_seed(): bigint {
    return this.engine.seed;
  }

  initialSeed(): bigint {
    return this.initial_seed();
  }

  /** torch.Generator.get_state: PyTorch's 5056-byte CPUGeneratorImplState. */
  get_state(): Uint8Array {
    const out = new Uint8Array(CPU_STATE_BYTES);
    const dv = new DataView(out.buffer);
    const e = this.engine;
    dv.setBigUint64(0, e.seed, true);
    dv.setInt32(8, e.left, true);
    dv.setInt32(12, e.seeded ? 1 : 0, true);
    dv.setBigUint64(16, BigInt(e.next >>> 0), true);
    for (let i = 0; i < MT_N; i++) {
      dv.setUint32(24 + 8 * i, e.state[i]! >>> 0, true);
      // high half stays 0
    }
    // normal_x (5016) and normal_rho (5032) stay 0.
    if (this.nextDoubleNormal !== undefined) {
      dv.setFloat64(5024, this.nextDoubleNormal, true);
      dv.setInt32(5040, 1, true);
    }
    if (this.nextFloatNormal !== undefined) {
      dv.setFloat32(5048, this.nextFloatNormal, true);
      out[5052] = 1;
    }
    return out;
  }

  getState(): Uint8Array {
    return this.get_state();
  }

  /** torch.Generator.set_state: accepts PyTorch's 5056-byte layout (e.g. from torch.get_rng_state()). */
  set_state(s: Uint8Array): void {
    if (!(s instanceof Uint8Array)) throw new ValueError('set_state', 'expected a Uint8Array (byte tensor) state');
    if (s.length !== CPU_STATE_BYTES) {
      throw new ValueError('set_state', `Expected a CPUGeneratorImplState of size ${CPU_STATE_BYTES} but found the input RNG state size to be ${s.length}`);
    }
    const dv = new DataView(s.buffer, s.byteOffset, s.byteLength);
    const seed = dv.getBigUint64(0, true);
    const left = dv.getInt32(8, true);
    const seeded = dv.getInt32(12, true) !== 0;
    const next = Number(BigInt.asUintN(32, dv.getBigUint64(16, true)));
    const e = new MT19937(0n);
    for (let i = 0; i < MT_N; i++) e.state[i] = dv.getUint32(24 + 8 * i, true) | 0; // std::copy truncates to uint32
    e.seed = seed;
    e.left = left;
    e.seeded = seeded;
    e.next = next;
    if (!e.isValid()) throw new ValueError('set_state', 'Invalid mt19937 state');
    this.engine.copyFrom(e);
    this.nextDoubleNormal = dv.getInt32(5040, true) !== 0 ? dv.getFloat64(5024, true) : undefined;
    this.nextFloatNormal = s[5052] !== 0 ? dv.getFloat32(5048, true) : undefined;
  }

  setState(s: Uint8Array): void {
    this.set_state(s);
  }

  /** An independent copy with the same state (PyTorch's CPUGeneratorImpl::clone). */
  clone(): Generator {
    const g = new Generator({ device: this.device });
    g.engine.copyFrom(this.engine);
    g.nextFloatNormal = this.nextFloatNormal;
    g.nextDoubleNormal = this.nextDoubleNormal;
    return g;
  }

  /**
   * A new generator whose stream is a deterministic function of (this.initial_seed(), key) only.
   *
   * - It does not draw from, reseed or otherwise change this generator: the parent's numbers are the
   *   same whether or not (and how often) fork is called, and fork(key) gives the same stream
   *   whenever it is called.
   * - Derivation: seed = mix64(mix64(initial_seed) ^ mix64(keyHash + φ)), with mix64 the SplitMix64
   *   finalizer, φ = 0x9e3779b97f4a7c15 and keyHash the key itself for an integer key (taken
   *   modulo 2^64) or FNV-1a-64 of its UTF-8 bytes for a string key. The child is then seeded with
   *   that 64-bit value exactly as manual_seed does.
   * - Caveat: like every MT19937 seed in PyTorch, only the low 32 bits of the derived seed shape the
   *   stream, so distinct keys map to distinct streams with probability 1 - ~n²/2^33 for n keys;
   *   use it for "one generator per request", not as a cryptographic separation.
   */
  fork(key: number | bigint | string): Generator {
    let k: bigint;
    if (typeof key === 'string') k = hashString(key);
    else if (typeof key === 'number') {
      if (!Number.isInteger(key)) throw new ValueError('Generator.fork', `key must be an integer or string, got ${key}`);
      k = BigInt.asUintN(64, BigInt(key));
    } else k = BigInt.asUintN(64, key);
    const derived = mix64(mix64(this.engine.seed) ^ mix64(k + 0x9e3779b97f4a7c15n));
    const g = new Generator({ device: this.device });
    g.manual_seed(derived);
    return g;
  }
}

/** The default CPU generator (torch.default_generator). Seeded nondeterministically at load, as torch does. */
export const defaultGenerator: Generator = new Generator();
defaultGenerator.seed();

/** torch.manual_seed: seeds the default generator; returns it. */
export function manual_seed(seed: number | bigint): Generator {
  return defaultGenerator.manual_seed(seed);
}

export const manualSeed = manual_seed;

/** torch.seed: reseeds the default generator nondeterministically and returns the seed. */
export function seed(): bigint {
  return defaultGenerator.seed();
}

/** torch.initial_seed. */
export function initial_seed(): bigint {
  return defaultGenerator.initial_seed();
}

/** torch.get_rng_state / torch.set_rng_state for the default generator. */
export function get_rng_state(): Uint8Array {
  return defaultGenerator.get_state();
}

export function set_rng_state(s: Uint8Array): void {
  defaultGenerator.set_state(s);
}
