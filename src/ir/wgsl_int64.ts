// int64 on WebGPU by exact emulation. WGSL has no 64-bit integers, so an int64 value computes as a
// vec2<u32> (x = low word, y = high word, two's complement) and is stored as two u32 words, little-endian:
// the same 8 bytes as every other backend, so uploads, downloads and safetensors are plain copies.
// Every IR primitive on int64 renders as a call to a helper below (emitted only when a kernel uses it),
// with the CPU backend's (BigInt64Array) semantics: wraparound, shifts >= 64, INT64_MIN / -1 = INT64_MIN.
// Integer division by zero (int64 here, narrower ints in render_wgsl.ts) raises the CPU's ZeroDivisionError: a kernel cannot raise, so the helpers set
// a flag (`nbx_divzero`) that the elementwise kernel stores to an error word, and a host step after it
// raises at the next read, like an index error (the result holds 0 there). Long division is 64
// shift-subtract steps per element: llvmpipe stops a shader invocation after ~65,535 loop iterations.

import type { Expr } from './expr.js';
import { DeviceLimitError } from '../errors.js';
import { DTYPES } from '../dtype/dtypes.js';

/** Literal of an int64 value (a JS number: consts of the IR; or a bigint). */
export function i64Literal(v: number | bigint): string {
  const b = BigInt.asUintN(64, typeof v === 'bigint' ? v : BigInt(Math.trunc(v)));
  return `vec2<u32>(${Number(b & 0xffffffffn)}u, ${Number(b >> 32n)}u)`;
}

/** The two uniform words of an int64 kernel parameter (low, high). */
export function i64Words(v: number | bigint): [number, number] {
  const b = BigInt.asUintN(64, typeof v === 'bigint' ? v : BigInt(Math.trunc(v)));
  return [Number(b & 0xffffffffn), Number(b >> 32n)];
}

const INT64_PRIMS = new Set(['neg', 'abs', 'floor', 'ceil', 'trunc', 'rint', 'sign', 'isnan', 'isinf', 'not', 'bnot', 'add', 'sub', 'mul',
  'div', 'floordiv', 'truncdiv', 'mod', 'fmod', 'pow', 'max', 'min', 'lt', 'le', 'gt', 'ge', 'eq', 'ne', 'and', 'or', 'xor', 'shl', 'shr', 'cast']);
const DIVIDES = new Set(['div', 'floordiv', 'truncdiv', 'mod', 'fmod']);
/**
 * Whether `e` divides integer values of any width (its kernel then reports division by zero through an
 * error word: the int64 helpers here and the i32 helpers of render_wgsl.ts set `nbx_divzero`).
 */
export function integerDivides(e: Expr): boolean {
  const memo = e.memo as { intdiv?: boolean };
  if (memo.intdiv === undefined) {
    let found = false;
    e.walk((n) => { const d = n.src[1]?.dtype; if (d !== undefined && DTYPES[d].kind === 'int' && DIVIDES.has(n.op)) found = true; });
    memo.intdiv = found;
  }
  return memo.intdiv;
}

/** Raises DeviceLimitError (before any kernel is recorded) if `e` applies a primitive to int64 that is not emulated. */
export function checkInt64Expr(e: Expr): void {
  e.walk((n) => {
    if (n.src[0]?.dtype === 'int64' && !INT64_PRIMS.has(n.op)) {
      throw new DeviceLimitError('elementwise', `the IR primitive '${n.op}' on int64 is not emulated on webgpu (cast to float32 first)`);
    }
  });
}

/**
 * WGSL for IR node `e` whose first operand is int64 (not casts), given its operands' code: a
 * vec2<u32> for int64 results, an i32 0/1 for comparisons.
 */
export function i64Node(e: Expr, a: string[]): string {
  const [x, y] = a as [string, string];
  const B = (c: string): string => `select(0i, 1i, ${c})`;
  switch (e.op) {
    case 'neg': return `nbx_neg_l(${x})`;
    case 'abs': return `nbx_abs_l(${x})`;
    case 'floor': case 'ceil': case 'trunc': case 'rint': return x;
    case 'sign': return `nbx_sign_l(${x})`;
    case 'isnan': case 'isinf': return '0i';
    case 'not': return B(`all(${x} == vec2<u32>(0u))`);
    case 'bnot': return `(~${x})`;
    case 'add': return `nbx_add_l(${x}, ${y})`;
    case 'sub': return `nbx_sub_l(${x}, ${y})`;
    case 'mul': return `nbx_mul_l(${x}, ${y})`;
    // the CPU backend's int64 'div' is floor division (H.idiv64)
    case 'div': case 'floordiv': return `nbx_ifloordiv_l(${x}, ${y})`;
    case 'truncdiv': return `nbx_itruncdiv_l(${x}, ${y})`;
    case 'mod': return `nbx_imod_l(${x}, ${y})`;
    case 'fmod': return `nbx_ifmod_l(${x}, ${y})`;
    case 'pow': return `nbx_ipow_l(${x}, ${y})`;
    case 'max': return `select(${y}, ${x}, nbx_lt_l(${y}, ${x}))`;
    case 'min': return `select(${y}, ${x}, nbx_lt_l(${x}, ${y}))`;
    case 'lt': return B(`nbx_lt_l(${x}, ${y})`);
    case 'le': return B(`!nbx_lt_l(${y}, ${x})`);
    case 'gt': return B(`nbx_lt_l(${y}, ${x})`);
    case 'ge': return B(`!nbx_lt_l(${x}, ${y})`);
    case 'eq': return B(`all(${x} == ${y})`);
    case 'ne': return B(`any(${x} != ${y})`);
    case 'and': return `(${x} & ${y})`;
    case 'or': return `(${x} | ${y})`;
    case 'xor': return `(${x} ^ ${y})`;
    case 'shl': return `nbx_shl_l(${x}, ${y})`;
    case 'shr': return `nbx_shr_l(${x}, ${y})`;
    // float functions of int64 operands (the op layer casts ints to float before them)
    default: throw new DeviceLimitError('elementwise', `the IR primitive '${e.op}' on int64 is not emulated on webgpu (cast to float32 first)`);
  }
}

/** int64 conversions: `to` a compute dtype of the WGSL renderer ('i32' ints, 'f32' floats). */
export const i64FromI32 = (x: string): string => `nbx_i2l(${x})`;
export const i64FromF32 = (x: string): string => `nbx_f2l(${x})`;
export const i64ToF32 = (x: string): string => `nbx_l2f(${x})`;
export const i64ToI32 = (x: string): string => `bitcast<i32>((${x}).x)`;
export const i64ToBool = (x: string): string => `select(0i, 1i, any((${x}) != vec2<u32>(0u)))`;

/** Helper functions (name → WGSL), merged into the WGSL prelude. */
export const INT64_PRELUDE: Record<string, string> = {
  nbx_divzero: 'var<private> nbx_divzero: bool = false;',
  nbx_i2l: 'fn nbx_i2l(x: i32) -> vec2<u32> { return vec2<u32>(bitcast<u32>(x), select(0u, 0xffffffffu, x < 0i)); }',
  nbx_isneg_l: 'fn nbx_isneg_l(a: vec2<u32>) -> bool { return (a.y >> 31u) != 0u; }',
  nbx_add_l: `fn nbx_add_l(a: vec2<u32>, b: vec2<u32>) -> vec2<u32> {
  let lo = a.x + b.x;
  return vec2<u32>(lo, a.y + b.y + select(0u, 1u, lo < a.x));
}`,
  nbx_sub_l: `fn nbx_sub_l(a: vec2<u32>, b: vec2<u32>) -> vec2<u32> {
  return vec2<u32>(a.x - b.x, a.y - b.y - select(0u, 1u, a.x < b.x));
}`,
  nbx_neg_l: 'fn nbx_neg_l(a: vec2<u32>) -> vec2<u32> { return nbx_sub_l(vec2<u32>(0u), a); }',
  nbx_abs_l: 'fn nbx_abs_l(a: vec2<u32>) -> vec2<u32> { return select(a, nbx_neg_l(a), nbx_isneg_l(a)); }',
  nbx_sign_l: 'fn nbx_sign_l(a: vec2<u32>) -> vec2<u32> { return select(select(vec2<u32>(1u, 0u), vec2<u32>(0u), all(a == vec2<u32>(0u))), vec2<u32>(0xffffffffu), nbx_isneg_l(a)); }',
  // signed and unsigned a < b
  nbx_lt_l: `fn nbx_lt_l(a: vec2<u32>, b: vec2<u32>) -> bool {
  if (a.y != b.y) { return bitcast<i32>(a.y) < bitcast<i32>(b.y); }
  return a.x < b.x;
}`,
  nbx_ult_l: `fn nbx_ult_l(a: vec2<u32>, b: vec2<u32>) -> bool {
  if (a.y != b.y) { return a.y < b.y; }
  return a.x < b.x;
}`,
  // the full 64-bit product of two u32s from 16-bit partial products
  nbx_mul32_l: `fn nbx_mul32_l(a: u32, b: u32) -> vec2<u32> {
  let a0 = a & 0xffffu; let a1 = a >> 16u; let b0 = b & 0xffffu; let b1 = b >> 16u;
  let p00 = a0 * b0; let p01 = a0 * b1; let p10 = a1 * b0; let p11 = a1 * b1;
  let mid = (p00 >> 16u) + (p01 & 0xffffu) + (p10 & 0xffffu);
  return vec2<u32>((p00 & 0xffffu) | (mid << 16u), p11 + (p01 >> 16u) + (p10 >> 16u) + (mid >> 16u));
}`,
  nbx_mul_l: `fn nbx_mul_l(a: vec2<u32>, b: vec2<u32>) -> vec2<u32> {
  let p = nbx_mul32_l(a.x, b.x);
  return vec2<u32>(p.x, p.y + a.x * b.y + a.y * b.x);
}`,
  nbx_shl_l: `fn nbx_shl_l(a: vec2<u32>, b: vec2<u32>) -> vec2<u32> {
  if (b.y != 0u || b.x >= 64u) { return vec2<u32>(0u); }
  let s = b.x;
  if (s == 0u) { return a; }
  if (s >= 32u) { return vec2<u32>(0u, a.x << (s - 32u)); }
  return vec2<u32>(a.x << s, (a.y << s) | (a.x >> (32u - s)));
}`,
  nbx_shr_l: `fn nbx_shr_l(a: vec2<u32>, b: vec2<u32>) -> vec2<u32> {
  let fill = select(0u, 0xffffffffu, nbx_isneg_l(a));
  if (b.y != 0u || b.x >= 64u) { return vec2<u32>(fill); }
  let s = b.x;
  if (s == 0u) { return a; }
  if (s >= 32u) { return vec2<u32>(bitcast<u32>(bitcast<i32>(a.y) >> (s - 32u)), fill); }
  return vec2<u32>((a.x >> s) | (a.y << (32u - s)), bitcast<u32>(bitcast<i32>(a.y) >> s));
}`,
  // unsigned long division, 64 shift-subtract steps (d != 0): quotient in .xy, remainder in .zw
  nbx_udivmod_l: `fn nbx_udivmod_l(num: vec2<u32>, d: vec2<u32>) -> vec4<u32> {
  if (num.y == 0u && d.y == 0u) { return vec4<u32>(num.x / d.x, 0u, num.x % d.x, 0u); }
  var n = num; var q = vec2<u32>(0u); var r = vec2<u32>(0u);
  for (var i = 0u; i < 64u; i++) {
    r = vec2<u32>((r.x << 1u) | (n.y >> 31u), (r.y << 1u) | (r.x >> 31u));
    n = vec2<u32>(n.x << 1u, (n.y << 1u) | (n.x >> 31u));
    q = vec2<u32>(q.x << 1u, (q.y << 1u) | (q.x >> 31u));
    if (!nbx_ult_l(r, d)) { r = nbx_sub_l(r, d); q.x = q.x | 1u; }
  }
  return vec4<u32>(q, r);
}`,
  // C division on magnitudes (|INT64_MIN| = 2^63 as unsigned): quotient truncated, remainder with a's sign
  nbx_itruncdiv_l: `fn nbx_itruncdiv_l(a: vec2<u32>, b: vec2<u32>) -> vec2<u32> {
  if (all(b == vec2<u32>(0u))) { nbx_divzero = true; return vec2<u32>(0u); }
  let q = nbx_udivmod_l(nbx_abs_l(a), nbx_abs_l(b)).xy;
  return select(q, nbx_neg_l(q), nbx_isneg_l(a) != nbx_isneg_l(b));
}`,
  nbx_ifmod_l: `fn nbx_ifmod_l(a: vec2<u32>, b: vec2<u32>) -> vec2<u32> {
  if (all(b == vec2<u32>(0u))) { nbx_divzero = true; return vec2<u32>(0u); }
  let r = nbx_udivmod_l(nbx_abs_l(a), nbx_abs_l(b)).zw;
  return select(r, nbx_neg_l(r), nbx_isneg_l(a));
}`,
  nbx_ifloordiv_l: `fn nbx_ifloordiv_l(a: vec2<u32>, b: vec2<u32>) -> vec2<u32> {
  if (all(b == vec2<u32>(0u))) { nbx_divzero = true; return vec2<u32>(0u); }
  let qr = nbx_udivmod_l(nbx_abs_l(a), nbx_abs_l(b));
  var q = select(qr.xy, nbx_neg_l(qr.xy), nbx_isneg_l(a) != nbx_isneg_l(b));
  if (any(qr.zw != vec2<u32>(0u)) && nbx_isneg_l(a) != nbx_isneg_l(b)) { q = nbx_sub_l(q, vec2<u32>(1u, 0u)); }
  return q;
}`,
  nbx_imod_l: `fn nbx_imod_l(a: vec2<u32>, b: vec2<u32>) -> vec2<u32> {
  let m = nbx_ifmod_l(a, b);
  if (any(m != vec2<u32>(0u)) && nbx_isneg_l(m) != nbx_isneg_l(b)) { return nbx_add_l(m, b); }
  return m;
}`,
  nbx_ipow_l: `fn nbx_ipow_l(a: vec2<u32>, b: vec2<u32>) -> vec2<u32> {
  if (nbx_isneg_l(b)) {
    if (all(a == vec2<u32>(1u, 0u))) { return a; }
    if (all(a == vec2<u32>(0xffffffffu))) { return select(a, vec2<u32>(1u, 0u), (b.x & 1u) == 0u); }
    return vec2<u32>(0u);
  }
  var r = vec2<u32>(1u, 0u); var base = a; var e = b;
  loop {
    if (all(e == vec2<u32>(0u))) { break; }
    if ((e.x & 1u) != 0u) { r = nbx_mul_l(r, base); }
    base = nbx_mul_l(base, base);
    e = vec2<u32>((e.x >> 1u) | (e.y << 31u), e.y >> 1u);
  }
  return r;
}`,
  // int64 -> f32 rounded once to nearest even (as PyTorch converts), from the magnitude's leading bit
  nbx_l2f: `fn nbx_l2f(a: vec2<u32>) -> f32 {
  let neg = nbx_isneg_l(a);
  let m = nbx_abs_l(a);
  var f: f32;
  if (m.y == 0u && m.x < 0x1000000u) { f = f32(m.x); }
  else {
    let p = select(u32(firstLeadingBit(m.x)), 32u + u32(firstLeadingBit(m.y)), m.y != 0u);
    let sh = p - 23u;
    // mantissa (24 bits) = m >> sh; rest = the bits shifted out, compared with half
    var mant: u32; var rest: vec2<u32>; var half: vec2<u32>;
    if (sh >= 32u) {
      mant = m.y >> (sh - 32u);
      rest = vec2<u32>(m.x, m.y & ((1u << (sh - 32u)) - 1u));
      half = select(vec2<u32>(0u, 1u << (sh - 33u)), vec2<u32>(0x80000000u, 0u), sh == 32u);
    } else {
      mant = (m.x >> sh) | (m.y << (32u - sh));
      rest = vec2<u32>(m.x & ((1u << sh) - 1u), 0u);
      half = vec2<u32>(1u << (sh - 1u), 0u);
    }
    if (nbx_ult_l(half, rest) || (all(rest == half) && (mant & 1u) != 0u)) { mant += 1u; }
    f = bitcast<f32>(((p + 126u) << 23u) + mant);
  }
  return select(f, -f, neg);
}`,
  // f32 -> int64 by truncation; NaN and out of range give INT64_MIN (x86, as the CPU backend)
  nbx_f2l: `fn nbx_f2l(x: f32) -> vec2<u32> {
  let u = bitcast<u32>(x);
  let e = i32((u >> 23u) & 0xffu) - 127;
  if (e < 31) { return nbx_i2l(i32(x)); }
  if (e >= 63) { return vec2<u32>(0u, 0x80000000u); }
  let m = (u & 0x7fffffu) | 0x800000u;
  let sh = u32(e - 23);
  var v: vec2<u32>;
  if (sh >= 32u) { v = vec2<u32>(0u, m << (sh - 32u)); } else { v = vec2<u32>(m << sh, m >> (32u - sh)); }
  return select(v, nbx_neg_l(v), (u >> 31u) != 0u);
}`,
};
