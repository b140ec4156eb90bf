// Bit-exact conversions between JavaScript numbers and each dtype's storage, matching PyTorch (c10):
// round-to-nearest-even, subnormals, overflow to infinity (float16, e5m2) or NaN (e4m3fn), float to int
// truncation with C-style wrap-around, and anything non-zero (NaN included) is `true`.
//
// PyTorch converts a double to a half type through float (static_cast<float> first), so every
// narrowing here goes through Math.fround first: double rounding included, exactly as c10 does it.

import { DTYPES, type DTypeName, type StorageArray } from './dtypes.js';
import { ValueError } from '../errors.js';

const f32 = new Float32Array(1);
const u32 = new Uint32Array(f32.buffer);

export function f32Bits(x: number): number { f32[0] = x; return u32[0]!; }
export function bitsToF32(b: number): number { u32[0] = b >>> 0; return f32[0]!; }

// ---- float16 -----------------------------------------------------------------------------------

/** float32 (given as a number) → IEEE half bits, round-to-nearest-even. */
export function toFloat16Bits(x: number): number {
  f32[0] = x;
  let u = u32[0]!;
  const sign = (u >>> 16) & 0x8000;
  u &= 0x7fffffff;
  if (u >= 0x7f800000) return sign | (u > 0x7f800000 ? 0x7e00 : 0x7c00);
  if (u >= 0x477ff000) return sign | 0x7c00; // >= 65520 rounds to infinity
  if (u < 0x38800000) {
    // Below 2^-14: the half is subnormal. Adding 0.5 in float32 rounds at 2^-24, the half quantum.
    f32[0] = Math.fround(bitsToF32(u) + 0.5);
    return sign | (u32[0]! - 0x3f000000);
  }
  const odd = (u >>> 13) & 1;
  u = (u + 0xc8000fff + odd) >>> 0; // rebias exponent (15-127) and round
  return sign | ((u >>> 13) & 0x7fff);
}

let F16_TABLE: Float32Array | undefined;
function buildF16Table(): Float32Array {
  const t = new Float32Array(65536);
  for (let h = 0; h < 65536; h++) {
    const s = h & 0x8000 ? -1 : 1, e = (h >>> 10) & 0x1f, m = h & 0x3ff;
    t[h] = e === 0 ? s * m * 2 ** -24 : e === 31 ? (m ? NaN : s * Infinity) : s * (1 + m / 1024) * 2 ** (e - 15);
  }
  return t;
}
/** Decoding table: 65536 floats, built on first use. Hot loops index it directly. */
export function f16Table(): Float32Array { return (F16_TABLE ??= buildF16Table()); }
export function fromFloat16Bits(h: number): number { return f16Table()[h & 0xffff]!; }

// ---- bfloat16 ----------------------------------------------------------------------------------

export function toBFloat16Bits(x: number): number {
  f32[0] = x;
  const u = u32[0]!;
  if ((u & 0x7fffffff) > 0x7f800000) return ((u >>> 16) & 0x8000) | 0x7fc0;
  return ((u + 0x7fff + ((u >>> 16) & 1)) >>> 16) & 0xffff;
}
export function fromBFloat16Bits(b: number): number { u32[0] = (b & 0xffff) << 16; return f32[0]!; }

// ---- float8 ------------------------------------------------------------------------------------

/** Round |a| (finite, > 0) to a binary format with `man` mantissa bits and minimum normal exponent `emin`. */
function roundToGrid(a: number, man: number, emin: number): number {
  let e = Math.floor(Math.log2(a));
  if (2 ** e > a) e -= 1; else if (2 ** (e + 1) <= a) e += 1; // guard log2's last-bit error
  if (e < emin) e = emin;
  const q = 2 ** (e - man);
  const r = a / q;
  let n = Math.floor(r);
  const frac = r - n;
  if (frac > 0.5 || (frac === 0.5 && n % 2 === 1)) n += 1;
  return n * q;
}

function encodeGrid(v: number, man: number, emin: number, bias: number): number {
  if (v === 0) return 0;
  if (v < 2 ** emin) return Math.round(v / 2 ** (emin - man)); // subnormal
  let e = Math.floor(Math.log2(v));
  if (2 ** e > v) e -= 1; else if (2 ** (e + 1) <= v) e += 1;
  const m = Math.round((v / 2 ** e - 1) * 2 ** man);
  return ((e + bias) << man) | m;
}

export function toFloat8E4M3FNBits(x: number): number {
  x = Math.fround(x);
  const sign = x < 0 || Object.is(x, -0) ? 0x80 : 0;
  if (Number.isNaN(x)) return 0x7f | sign; // c10 keeps the sign bit of a NaN
  const a = Math.abs(x);
  if (a === 0) return sign;
  if (!Number.isFinite(a)) return sign | 0x7f;
  const v = roundToGrid(a, 3, -6);
  if (v > 448) return sign | 0x7f; // e4m3fn has no infinity: overflow is NaN
  return sign | encodeGrid(v, 3, -6, 7);
}
export function fromFloat8E4M3FNBits(b: number): number {
  const s = b & 0x80 ? -1 : 1, e = (b >>> 3) & 0xf, m = b & 7;
  if (e === 15 && m === 7) return NaN;
  return e === 0 ? s * m * 2 ** -9 : s * (1 + m / 8) * 2 ** (e - 7);
}

export function toFloat8E5M2Bits(x: number): number {
  x = Math.fround(x);
  const sign = x < 0 || Object.is(x, -0) ? 0x80 : 0;
  if (Number.isNaN(x)) return 0x7f | sign;
  const a = Math.abs(x);
  if (a === 0) return sign;
  if (!Number.isFinite(a)) return sign | 0x7c;
  const v = roundToGrid(a, 2, -14);
  if (v > 57344) return sign | 0x7c;
  return sign | encodeGrid(v, 2, -14, 15);
}
export function fromFloat8E5M2Bits(b: number): number {
  const s = b & 0x80 ? -1 : 1, e = (b >>> 2) & 0x1f, m = b & 3;
  if (e === 31) return m ? NaN : s * Infinity;
  return e === 0 ? s * m * 2 ** -16 : s * (1 + m / 4) * 2 ** (e - 15);
}

// ---- integers ----------------------------------------------------------------------------------

const INT64_MIN = -(2n ** 63n);
/** float → int64 as x86 does it (cvttsd2si): truncation; NaN and out-of-range give INT64_MIN. */
export function numberToInt64(x: number): bigint {
  if (!Number.isFinite(x) || x >= 9223372036854775808 || x < -9223372036854775808) return INT64_MIN;
  return BigInt(Math.trunc(x));
}
/** float → int32 as x86 does (cvttss2si): NaN and out-of-range give INT32_MIN. */
export function numberToInt32(x: number): number {
  if (!(x > -2147483649 && x < 2147483648)) return -2147483648;
  return Math.trunc(x) | 0;
}

// ---- element access ------------------------------------------------------------------------------

/** Reads element `i` of a storage array of dtype `d` as a JavaScript number (int64 via Number()). */
export function readNumber(d: DTypeName, a: StorageArray, i: number): number {
  switch (d) {
    case 'float16': return f16Table()[(a as Uint16Array)[i]!]!;
    case 'bfloat16': return fromBFloat16Bits((a as Uint16Array)[i]!);
    case 'float8_e4m3fn': return fromFloat8E4M3FNBits((a as Uint8Array)[i]!);
    case 'float8_e5m2': return fromFloat8E5M2Bits((a as Uint8Array)[i]!);
    case 'int64': return Number((a as BigInt64Array)[i]!);
    default: return (a as Float64Array)[i]!;
  }
}

/** Encodes a number into dtype `d`'s storage value (bits for half types, bigint for int64). */
export function encodeNumber(d: DTypeName, x: number): number | bigint {
  switch (d) {
    case 'bool': return x !== 0 ? 1 : 0; // NaN is true, as in C++
    case 'float16': return toFloat16Bits(x);
    case 'bfloat16': return toBFloat16Bits(x);
    case 'float8_e4m3fn': return toFloat8E4M3FNBits(x);
    case 'float8_e5m2': return toFloat8E5M2Bits(x);
    case 'int64': return numberToInt64(x);
    case 'int32': return numberToInt32(x);
    case 'int16': case 'int8': case 'uint8':
      // C++ converts float → int32 then narrows with wrap-around; typed-array stores wrap the same way.
      return Number.isFinite(x) ? Math.trunc(x) : numberToInt32(x);
    default: return x;
  }
}

/**
 * A user's scalar stored into an integer dtype, checked as PyTorch's c10::checked_convert does (creation
 * ops, fills): fractions truncate, but NaN, ±Infinity and values outside the dtype's range are errors,
 * never a silent INT_MIN or a wrap. Unsigned types also take negative integers down to -max (they wrap),
 * as c10 allows. The one place this rule and its message live.
 */
export function checkedIntValue(op: string, d: DTypeName, x: number | bigint): number | bigint {
  const info = DTYPES[d];
  if (info.kind !== 'int') return x;
  const big = info.storage === 'i64';
  const lo = big ? -9223372036854775808n : BigInt(info.min!), hi = big ? 9223372036854775807n : BigInt(info.max!);
  let v: bigint | null;
  if (typeof x === 'bigint') v = x;
  else v = Number.isFinite(x) ? BigInt(Math.trunc(x)) : null;
  const unsignedWrap = lo === 0n && v !== null && v < 0n && -v <= hi;
  if (v === null || ((v < lo || v > hi) && !unsignedWrap)) {
    throw new ValueError(op, `value cannot be converted to type ${d} without overflow (got ${String(x)})`);
  }
  return big ? v : Number(v);
}

export function writeNumber(d: DTypeName, a: StorageArray, i: number, x: number): void {
  (a as unknown as (number | bigint)[])[i] = encodeNumber(d, x);
}

/** Rounds a number to what dtype `d` can hold (the value read back after a store). */
export function roundTo(d: DTypeName, x: number): number {
  switch (d) {
    case 'float32': return Math.fround(x);
    case 'float64': return x;
    case 'float16': return fromFloat16Bits(toFloat16Bits(x));
    case 'bfloat16': return fromBFloat16Bits(toBFloat16Bits(x));
    default: {
      const tmp = new (DTYPES[d].storage === 'i64' ? BigInt64Array : Float64Array)(1) as StorageArray;
      if (DTYPES[d].storage === 'i64') { writeNumber(d, tmp, 0, x); return readNumber(d, tmp, 0); }
      const enc = encodeNumber(d, x) as number;
      if (d === 'float8_e4m3fn') return fromFloat8E4M3FNBits(enc);
      if (d === 'float8_e5m2') return fromFloat8E5M2Bits(enc);
      const r = DTYPES[d];
      const span = r.max! - r.min! + 1;
      return ((((enc - r.min!) % span) + span) % span) + r.min!;
    }
  }
}
