// Renders the elementwise IR to WGSL: the same C-like base as CUDA (src/ir/render_c.ts), with WGSL's
// type names, literals and math functions. WGSL has no 64-bit types and no 8/16-bit storage, so:
//
// - every storage buffer is an array<u32>: 4-byte dtypes are bitcast, bool/uint8/int8/float8 are bytes
//   packed four to a word, int16/float16/bfloat16 halves packed two to a word (little-endian, so the
//   buffer's bytes equal the host storage's bytes and uploads/downloads are plain copies);
// - float16/bfloat16/float8 compute in f32 and are rounded by exact integer code (no shader-f16 needed);
// - int64 is emulated exactly: vec2<u32> values, two words of storage (src/ir/wgsl_int64.ts); hand
//   kernels that do not handle it refuse it (checkWgslDType without `int64`) with DeviceLimitError;
// - float64/complex128 cannot be represented: DeviceLimitError, never a silent dtype change.
//
// WGSL also lets implementations assume floats are finite, and its builtins are loosely specified
// (sin is only 2^-11 accurate, atan2 4096 ulp, log/sqrt undefined below zero), so NaN/Inf tests are bit
// tests and the functions PyTorch users compare closely are our own (Cephes-style) implementations.

import { DTYPES, type DTypeName } from '../dtype/dtypes.js';
import { DeviceLimitError } from '../errors.js';
import { CLikeRenderer, type Capabilities } from './render_c.js';
import type { Expr } from './expr.js';
import { i64FromF32, i64FromI32, i64Literal, i64Node, i64ToBool, i64ToF32, i64ToI32, INT64_PRELUDE } from './wgsl_int64.js';

/** dtypes WebGPU tensors can hold; the others raise DeviceLimitError. */
export const WGSL_DTYPES: ReadonlySet<DTypeName> = new Set<DTypeName>(['bool', 'uint8', 'int8', 'int16', 'int32', 'int64', 'float16',
  'bfloat16', 'float32', 'float8_e4m3fn', 'float8_e5m2', 'complex64']);

/** Why a dtype cannot live on WebGPU (for error messages). */
export function wgslDTypeLimit(d: DTypeName): string {
  if (d === 'int64') return 'WGSL has no 64-bit integer type and this kernel does not emulate int64 (elementwise ops, copies, casts, reductions, scans and index inputs/outputs do); cast to int32, or run it on the CPU';
  if (d === 'float64' || d === 'complex128') return 'WGSL has no 64-bit float type; use float32, or keep the tensor on the CPU';
  return `dtype ${d} has no WGSL representation`;
}

/** Raises DeviceLimitError for dtypes webgpu cannot hold, and for int64 unless the caller emulates it (`int64`). */
export function checkWgslDType(op: string, d: DTypeName, int64 = false): void {
  if (!WGSL_DTYPES.has(d) || (d === 'int64' && !int64)) throw new DeviceLimitError(op, `${d} is not supported on webgpu: ${wgslDTypeLimit(d)}`);
}

/** Elements of dtype `d` in one 32-bit storage word (4 for bytes, 2 for halves, 1 otherwise). */
export function perWord(d: DTypeName): number {
  const s = DTYPES[d].itemsize;
  return s === 1 ? 4 : s === 2 ? 2 : 1;
}

const f32Bits = (v: number): number => new Uint32Array(new Float32Array([v]).buffer)[0]!;

export class WgslRenderer extends CLikeRenderer {
  readonly caps: Capabilities = { dtypes: WGSL_DTYPES };

  override node(e: Expr, a: string[]): string {
    if (e.src[0]?.dtype === 'int64' && e.op !== 'cast') return i64Node(e, a);
    // Shader compilers may assume finite floats and fold x - x to 0 (Mesa does): keep NaN/Inf - x = NaN,
    // which isfinite's `x - x == 0` relies on.
    if (e.op === 'sub' && a[0] === a[1] && DTYPES[e.dtype].kind === 'float') {
      return `select(0.0f, nbx_nan(), nbx_isnan(${a[0]}) || nbx_isinf(${a[0]}))`;
    }
    // GPUs may flush subnormals to zero in comparisons (NVIDIA over Vulkan does): decide the sign of a
    // float from its bits so sign() of a subnormal stays +-1, as on the CPU.
    if (e.op === 'sign' && DTYPES[e.src[0]!.dtype].kind === 'float') {
      const x = a[0]!;
      return `select(select(1.0f, -1.0f, (bitcast<u32>(${x}) & 0x80000000u) != 0u), 0.0f, (bitcast<u32>(${x}) & 0x7fffffffu) == 0u || nbx_isnan(${x}))`;
    }
    return super.node(e, a);
  }

  computeType(d: DTypeName): string {
    checkWgslDType('webgpu kernel', d, true);
    if (d === 'int64') return 'vec2<u32>';
    return DTYPES[d].kind === 'float' ? 'f32' : 'i32';
  }
  literal(v: number, d: DTypeName): string {
    if (DTYPES[d].kind === 'float' || DTYPES[d].kind === 'complex') {
      // NaN/Inf through a runtime value: a constant expression evaluating to them is a WGSL compile error.
      if (Number.isNaN(v)) return 'nbx_nan()';
      if (!Number.isFinite(v)) return v > 0 ? 'nbx_inf()' : '(-nbx_inf())';
      const f = Math.fround(v);
      if (Object.is(f, -0)) return '(-0.0f)';
      if (f === 0) return '0.0f';
      if (Math.abs(f) < 1.1754943508222875e-38) return `bitcast<f32>(${f32Bits(f)}u)`; // subnormal
      if (!Number.isFinite(f)) return f > 0 ? 'nbx_inf()' : '(-nbx_inf())';
      const s = `${f.toPrecision(9)}f`;
      return f < 0 ? `(${s})` : s;
    }
    checkWgslDType('webgpu kernel', d, true);
    if (d === 'int64') return i64Literal(v);
    const i = Math.trunc(v) | 0;
    if (i === -2147483648) return 'bitcast<i32>(0x80000000u)';
    return i < 0 ? `(${i}i)` : `${i}i`;
  }
  mathFn(name: string, d: DTypeName): string {
    checkWgslDType('webgpu kernel', d);
    const map: Record<string, string> = {
      abs: 'abs', floor: 'floor', ceil: 'ceil', trunc: 'trunc', rint: 'round',
      exp: 'nbx_exp', exp2: 'nbx_exp2', expm1: 'nbx_expm1', log: 'nbx_log', log2: 'nbx_log2', log1p: 'nbx_log1p',
      sqrt: 'nbx_sqrt', rsqrt: 'nbx_rsqrt', sin: 'nbx_sin', cos: 'nbx_cos', tan: 'nbx_tan', tanh: 'nbx_tanh',
      erf: 'nbx_erf', atan2: 'nbx_atan2', hypot: 'nbx_hypot', copysign: 'nbx_copysign',
    };
    const f = map[name];
    if (!f) throw new Error(`render_wgsl: no math function ${name}`);
    return f;
  }
  wrapInt(d: DTypeName, x: string): string {
    switch (d) {
      case 'int8': return `((${x} << 24u) >> 24u)`;
      case 'uint8': return `(${x} & 255i)`;
      case 'int16': return `((${x} << 16u) >> 16u)`;
      case 'bool': return `select(0i, 1i, ${x} != 0i)`;
      case 'int32': return x; // i32 arithmetic wraps in WGSL
      default: checkWgslDType('webgpu kernel', d); return x;
    }
  }
  ternary(c: string, a: string, b: string): string { return `select(${b}, ${a}, ${c})`; }
  boolToCompute(x: string): string { return `select(0i, 1i, ${x})`; }
  isNanExpr(x: string): string { return `nbx_isnan(${x})`; }
  isInfExpr(x: string): string { return `nbx_isinf(${x})`; }
  declare(name: string, type: string, value: string): string { return `let ${name}: ${type} = ${value};`; }
  helper(name: string, d: DTypeName, args: string[]): string {
    checkWgslDType('webgpu kernel', d);
    return `nbx_${name}_${DTYPES[d].kind === 'float' ? 'f' : d === 'int64' ? 'l' : 'i'}(${args.join(', ')})`;
  }
  castExpr(from: DTypeName, to: DTypeName, x: string): string {
    if (from === to) return x;
    checkWgslDType('webgpu kernel', from, true);
    checkWgslDType('webgpu kernel', to, true);
    const fromF = DTYPES[from].kind === 'float';
    if (to === 'int64') return fromF ? i64FromF32(x) : i64FromI32(x);
    if (from === 'int64') {
      if (to === 'bool') return i64ToBool(x);
      if (DTYPES[to].kind === 'float') return this.castExpr('float32', to, i64ToF32(x));
      return this.castExpr('int32', to, i64ToI32(x));
    }
    // from the bits: a subnormal is true even where the GPU flushes it to zero in a comparison
    if (to === 'bool') return fromF ? `select(0i, 1i, (bitcast<u32>(${x}) & 0x7fffffffu) != 0u)` : `select(0i, 1i, ${x} != 0i)`;
    const asF = fromF ? x : `f32(${x})`;
    switch (to) {
      case 'float32': return asF;
      case 'float16': return `nbx_round_f16(${asF})`;
      case 'bfloat16': return `nbx_round_bf16(${asF})`;
      case 'float8_e4m3fn': return `nbx_e4m3_to_f(nbx_f_to_e4m3(${asF}))`;
      case 'float8_e5m2': return `nbx_e5m2_to_f(nbx_f_to_e5m2(${asF}))`;
      case 'int32': return fromF ? `nbx_f2i(${x})` : x;
      default: return this.wrapInt(to, fromF ? `nbx_f2i(${x})` : x);
    }
  }

  /** The compute value of element `idx` (a u32 expression) of buffer `buf` (array<u32>) holding dtype `d`. */
  load(d: DTypeName, buf: string, idx: string): string {
    switch (d) {
      case 'float32': case 'complex64': return `bitcast<f32>(${buf}[${idx}])`;
      case 'int32': return `bitcast<i32>(${buf}[${idx}])`;
      case 'int64': return `vec2<u32>(${buf}[2u * (${idx})], ${buf}[2u * (${idx}) + 1u])`;
      case 'bool': case 'uint8': return `i32((${buf}[(${idx}) >> 2u] >> (((${idx}) & 3u) * 8u)) & 0xffu)`;
      case 'int8': return `(bitcast<i32>(${buf}[(${idx}) >> 2u] << ((3u - ((${idx}) & 3u)) * 8u)) >> 24u)`;
      case 'int16': return `(bitcast<i32>(${buf}[(${idx}) >> 1u] << ((1u - ((${idx}) & 1u)) * 16u)) >> 16u)`;
      case 'float16': return `nbx_h2f((${buf}[(${idx}) >> 1u] >> (((${idx}) & 1u) * 16u)) & 0xffffu)`;
      case 'bfloat16': return `bitcast<f32>(((${buf}[(${idx}) >> 1u] >> (((${idx}) & 1u) * 16u)) & 0xffffu) << 16u)`;
      case 'float8_e4m3fn': return `nbx_e4m3_to_f((${buf}[(${idx}) >> 2u] >> (((${idx}) & 3u) * 8u)) & 0xffu)`;
      case 'float8_e5m2': return `nbx_e5m2_to_f((${buf}[(${idx}) >> 2u] >> (((${idx}) & 3u) * 8u)) & 0xffu)`;
      default: checkWgslDType('webgpu kernel', d); throw new Error(`render_wgsl: no load for ${d}`);
    }
  }

  /**
   * The compute value of the element of dtype `d` held in u32 `word` at position `part` (0 .. 4/itemsize-1,
   * a number or a u32 expression): what `load` does once the word is fetched (16-byte loads fetch 4 words).
   */
  fromWord(d: DTypeName, word: string, part: number | string): string {
    const p = typeof part === 'number' ? `${part}u` : `(${part})`;
    switch (d) {
      case 'float32': case 'complex64': return `bitcast<f32>(${word})`;
      case 'int32': return `bitcast<i32>(${word})`;
      case 'bool': case 'uint8': return `i32((${word} >> (${p} * 8u)) & 0xffu)`;
      case 'int8': return `(bitcast<i32>(${word} << ((3u - ${p}) * 8u)) >> 24u)`;
      case 'int16': return `(bitcast<i32>(${word} << ((1u - ${p}) * 16u)) >> 16u)`;
      case 'float16': return `nbx_h2f((${word} >> (${p} * 16u)) & 0xffffu)`;
      case 'bfloat16': return `bitcast<f32>(((${word} >> (${p} * 16u)) & 0xffffu) << 16u)`;
      case 'float8_e4m3fn': return `nbx_e4m3_to_f((${word} >> (${p} * 8u)) & 0xffu)`;
      case 'float8_e5m2': return `nbx_e5m2_to_f((${word} >> (${p} * 8u)) & 0xffu)`;
      default: checkWgslDType('webgpu kernel', d); throw new Error(`render_wgsl: no load for ${d}`);
    }
  }

  /** The storage bits (u32, only the low itemsize*8 bits set) of compute value `v` stored as dtype `d`. */
  bits(d: DTypeName, v: string): string {
    switch (d) {
      case 'float32': case 'complex64': return `bitcast<u32>(${v})`;
      case 'int32': return `bitcast<u32>(${v})`;
      case 'bool': case 'uint8': case 'int8': return `(bitcast<u32>(${v}) & 0xffu)`;
      case 'int16': return `(bitcast<u32>(${v}) & 0xffffu)`;
      case 'float16': return `nbx_f2h(${v})`;
      case 'bfloat16': return `nbx_f2bf(${v})`;
      case 'float8_e4m3fn': return `nbx_f_to_e4m3(${v})`;
      case 'float8_e5m2': return `nbx_f_to_e5m2(${v})`;
      default: checkWgslDType('webgpu kernel', d); throw new Error(`render_wgsl: no store for ${d}`);
    }
  }

  /**
   * A statement storing compute value `v` of dtype `d` at element `idx` of `buf` (array<u32>), for
   * dtypes of whole words (4 bytes, or int64's two words); narrower ones need `storeShared`.
   */
  store(d: DTypeName, buf: string, idx: string, v: string): string {
    if (d !== 'int64') return `${buf}[${idx}] = ${this.bits(d, v)};`;
    return `{ let nbx_v = ${v}; let nbx_i = 2u * (${idx}); ${buf}[nbx_i] = nbx_v.x; ${buf}[nbx_i + 1u] = nbx_v.y; }`;
  }

  /**
   * Statements storing bits `b` (from `bits`) at element `idx` of `buf`, safe when other invocations
   * write neighbouring elements of the same word: `buf` must then be an array<atomic<u32>>.
   */
  storeShared(d: DTypeName, buf: string, idx: string, b: string): string {
    const k = perWord(d);
    if (k === 1) return `atomicStore(&${buf}[${idx}], ${b});`;
    const w = k === 4 ? 2 : 1, width = k === 4 ? 8 : 16, mask = k === 4 ? '0xffu' : '0xffffu';
    return `{ let nbx_w = (${idx}) >> ${w}u; let nbx_s = ((${idx}) & ${k - 1}u) * ${width}u;
      atomicAnd(&${buf}[nbx_w], ~(${mask} << nbx_s)); atomicOr(&${buf}[nbx_w], (${b}) << nbx_s); }`;
  }
}

export const WGSL = new WgslRenderer();

// ---- the prelude: helper functions, emitted only when the kernel uses them -----------------------

const PRELUDE: Record<string, string> = {
  ...INT64_PRELUDE,
  nbx_nan: `var<private> nbx_nan_bits: u32 = 0x7fc00000u;
fn nbx_nan() -> f32 { return bitcast<f32>(nbx_nan_bits); }`,
  nbx_inf: `var<private> nbx_inf_bits: u32 = 0x7f800000u;
fn nbx_inf() -> f32 { return bitcast<f32>(nbx_inf_bits); }`,
  nbx_isnan: 'fn nbx_isnan(x: f32) -> bool { return (bitcast<u32>(x) & 0x7fffffffu) > 0x7f800000u; }',
  nbx_isinf: 'fn nbx_isinf(x: f32) -> bool { return (bitcast<u32>(x) & 0x7fffffffu) == 0x7f800000u; }',
  nbx_copysign: 'fn nbx_copysign(a: f32, b: f32) -> f32 { return bitcast<f32>((bitcast<u32>(a) & 0x7fffffffu) | (bitcast<u32>(b) & 0x80000000u)); }',
  // x86 float -> int: truncation; NaN and out of range give INT_MIN (PyTorch CPU, the reference)
  nbx_f2i: `fn nbx_f2i(x: f32) -> i32 {
  if (!nbx_isnan(x) && x >= -2147483648.0f && x < 2147483648.0f) { return i32(x); }
  return bitcast<i32>(0x80000000u);
}`,
  // ---- half types (exact, round to nearest even) ----
  nbx_h2f: `fn nbx_h2f(h: u32) -> f32 {
  let s = (h & 0x8000u) << 16u; let e = (h >> 10u) & 0x1fu; let m = h & 0x3ffu;
  if (e == 0u) { return bitcast<f32>(s | bitcast<u32>(f32(m) * 5.9604644775390625e-8f)); }
  if (e == 31u) { return bitcast<f32>(s | 0x7f800000u | (m << 13u)); }
  return bitcast<f32>(s | ((e + 112u) << 23u) | (m << 13u));
}`,
  nbx_f2h: `fn nbx_f2h(f: f32) -> u32 {
  let x = bitcast<u32>(f); let s = (x >> 16u) & 0x8000u; let a = x & 0x7fffffffu;
  if (a > 0x7f800000u) { return s | 0x7e00u; }
  if (a >= 0x477ff000u) { return s | 0x7c00u; }
  if (a >= 0x38800000u) { return s | ((a + 0xfffu + ((a >> 13u) & 1u) - 0x38000000u) >> 13u); }
  return s | u32(round(bitcast<f32>(a) * 16777216.0f));
}`,
  nbx_round_f16: 'fn nbx_round_f16(f: f32) -> f32 { return nbx_h2f(nbx_f2h(f)); }',
  nbx_f2bf: `fn nbx_f2bf(f: f32) -> u32 {
  let u = bitcast<u32>(f);
  if ((u & 0x7fffffffu) > 0x7f800000u) { return ((u >> 16u) & 0x8000u) | 0x7fc0u; }
  return ((u + 0x7fffu + ((u >> 16u) & 1u)) >> 16u) & 0xffffu;
}`,
  nbx_round_bf16: 'fn nbx_round_bf16(f: f32) -> f32 { return bitcast<f32>(nbx_f2bf(f) << 16u); }',
  // ---- float8 (c10 semantics: e4m3fn overflows to NaN, e5m2 to infinity) ----
  nbx_f_to_mini: `fn nbx_f_to_mini(x: f32, man: i32, emin: i32, bias: i32, maxf: f32, inf_or_nan: u32) -> u32 {
  let s = select(0u, 0x80u, (bitcast<u32>(x) & 0x80000000u) != 0u);
  if (nbx_isnan(x)) { return s | 0x7fu; }
  let a = abs(x);
  if (a == 0.0f) { return s; }
  if (nbx_isinf(a)) { return s | inf_or_nan; }
  var e = frexp(a).exp - 1;
  if (e < emin) { e = emin; }
  let q = ldexp(1.0f, e - man);
  let r = a / q; var n = floor(r); let fr = r - n;
  if (fr > 0.5f || (fr == 0.5f && n - 2.0f * floor(n * 0.5f) == 1.0f)) { n += 1.0f; }
  let v = n * q;
  if (v > maxf) { return s | inf_or_nan; }
  if (v < ldexp(1.0f, emin)) { return s | u32(v / ldexp(1.0f, emin - man)); }
  let ve = frexp(v).exp - 1;
  let m = u32((v / ldexp(1.0f, ve) - 1.0f) * f32(1 << u32(man)) + 0.5f);
  return s | (u32(ve + bias) << u32(man)) | m;
}`,
  nbx_f_to_e4m3: 'fn nbx_f_to_e4m3(x: f32) -> u32 { return nbx_f_to_mini(x, 3, -6, 7, 448.0f, 0x7fu); }',
  nbx_f_to_e5m2: 'fn nbx_f_to_e5m2(x: f32) -> u32 { return nbx_f_to_mini(x, 2, -14, 15, 57344.0f, 0x7cu); }',
  nbx_e4m3_to_f: `fn nbx_e4m3_to_f(b: u32) -> f32 {
  let s = select(1.0f, -1.0f, (b & 0x80u) != 0u); let e = i32((b >> 3u) & 15u); let m = f32(b & 7u);
  if (e == 15 && (b & 7u) == 7u) { return nbx_nan(); }
  if (e == 0) { return s * m * 0.001953125f; }
  return s * (1.0f + m / 8.0f) * ldexp(1.0f, e - 7);
}`,
  nbx_e5m2_to_f: `fn nbx_e5m2_to_f(b: u32) -> f32 {
  let s = select(1.0f, -1.0f, (b & 0x80u) != 0u); let e = i32((b >> 2u) & 31u); let m = f32(b & 3u);
  if (e == 31) { if ((b & 3u) != 0u) { return nbx_nan(); } return s * nbx_inf(); }
  if (e == 0) { return s * m * 0.0000152587890625f; }
  return s * (1.0f + m / 4.0f) * ldexp(1.0f, e - 15);
}`,
  // ---- exponentials and logarithms with IEEE edge cases ----
  nbx_exp: `fn nbx_exp(x: f32) -> f32 {
  if (nbx_isnan(x)) { return x; }
  if (x > 88.72283935546875f) { return nbx_inf(); }
  if (x < -103.97208f) { return 0.0f; }
  return exp(x);
}`,
  nbx_exp2: `fn nbx_exp2(x: f32) -> f32 {
  if (nbx_isnan(x)) { return x; }
  if (x >= 128.0f) { return nbx_inf(); }
  if (x < -150.0f) { return 0.0f; }
  return exp2(x);
}`,
  nbx_expm1: `fn nbx_expm1(x: f32) -> f32 {
  if (abs(x) < 0.5f) {
    return x * (1.0f + x * (0.5f + x * (0.16666667f + x * (0.041666668f + x * (0.008333334f + x * (0.0013888889f
      + x * (0.0001984127f + x * (0.0000248015873f + x * 0.0000027557319f))))))));
  }
  return nbx_exp(x) - 1.0f;
}`,
  nbx_log: `fn nbx_log(x: f32) -> f32 {
  if (x < 0.0f || nbx_isnan(x)) { return nbx_nan(); }
  if (x == 0.0f) { return -nbx_inf(); }
  if (nbx_isinf(x)) { return x; }
  return log(x);
}`,
  nbx_log2: `fn nbx_log2(x: f32) -> f32 {
  if (x < 0.0f || nbx_isnan(x)) { return nbx_nan(); }
  if (x == 0.0f) { return -nbx_inf(); }
  if (nbx_isinf(x)) { return x; }
  return log2(x);
}`,
  nbx_log1p: `fn nbx_log1p(x: f32) -> f32 {
  if (abs(x) < 0.25f) {
    let s = x / (2.0f + x); let z = s * s;
    return 2.0f * s * (1.0f + z * (0.33333334f + z * (0.2f + z * (0.14285715f + z * (0.11111111f + z * (0.09090909f + z * 0.07692308f))))));
  }
  return nbx_log(1.0f + x);
}`,
  nbx_sqrt: `fn nbx_sqrt(x: f32) -> f32 {
  if (x < 0.0f || nbx_isnan(x)) { return nbx_nan(); }
  if (nbx_isinf(x) || x == 0.0f) { return x; }
  return sqrt(x);
}`,
  nbx_rsqrt: `fn nbx_rsqrt(x: f32) -> f32 {
  if (x < 0.0f || nbx_isnan(x)) { return nbx_nan(); }
  if (x == 0.0f) { return nbx_copysign(nbx_inf(), x); }
  if (nbx_isinf(x)) { return 0.0f; }
  return 1.0f / sqrt(x);
}`,
  // ---- trigonometry: Cody-Waite reduction by pi/4 and minimax polynomials (Cephes) ----
  nbx_sincos_poly: `fn nbx_sin_poly(x: f32, z: f32) -> f32 { return ((-1.9515295891e-4f * z + 8.3321608736e-3f) * z - 1.6666654611e-1f) * z * x + x; }
fn nbx_cos_poly(z: f32) -> f32 { return ((2.443315711809948e-5f * z - 1.388731625493765e-3f) * z + 4.166664568298827e-2f) * z * z - 0.5f * z + 1.0f; }
fn nbx_reduce_pio4(x: f32, y: f32) -> f32 { return ((x - y * 0.78515625f) - y * 2.4187564849853515625e-4f) - y * 3.77489497744594108e-8f; }`,
  nbx_sin: `fn nbx_sin(xx: f32) -> f32 {
  if (nbx_isnan(xx) || nbx_isinf(xx)) { return nbx_nan(); }
  var x = abs(xx);
  if (x > 8192.0f) { return sin(xx); }
  var neg = xx < 0.0f;
  var i = u32(x * 1.27323954473516f); var y = f32(i);
  if ((i & 1u) != 0u) { i += 1u; y += 1.0f; }
  var j = i & 7u;
  if (j > 3u) { neg = !neg; j -= 4u; }
  x = nbx_reduce_pio4(x, y);
  let z = x * x;
  var r = select(nbx_sin_poly(x, z), nbx_cos_poly(z), j == 1u || j == 2u);
  return select(r, -r, neg);
}`,
  nbx_cos: `fn nbx_cos(xx: f32) -> f32 {
  if (nbx_isnan(xx) || nbx_isinf(xx)) { return nbx_nan(); }
  var x = abs(xx);
  if (x > 8192.0f) { return cos(xx); }
  var neg = false;
  var i = u32(x * 1.27323954473516f); var y = f32(i);
  if ((i & 1u) != 0u) { i += 1u; y += 1.0f; }
  var j = i & 7u;
  if (j > 3u) { j -= 4u; neg = !neg; }
  if (j > 1u) { neg = !neg; }
  x = nbx_reduce_pio4(x, y);
  let z = x * x;
  var r = select(nbx_cos_poly(z), nbx_sin_poly(x, z), j == 1u || j == 2u);
  return select(r, -r, neg);
}`,
  nbx_tan: `fn nbx_tan(xx: f32) -> f32 {
  if (nbx_isnan(xx) || nbx_isinf(xx)) { return nbx_nan(); }
  let x = abs(xx);
  if (x > 8192.0f) { return tan(xx); }
  var j = u32(x * 1.27323954473516f); var y = f32(j);
  if ((j & 1u) != 0u) { j += 1u; y += 1.0f; }
  let z = nbx_reduce_pio4(x, y);
  let zz = z * z;
  var r = z;
  if (x > 1.0e-4f) {
    r = (((((9.38540185543e-3f * zz + 3.11992232697e-3f) * zz + 2.44301354525e-2f) * zz + 5.34112807005e-2f) * zz
      + 1.33387994085e-1f) * zz + 3.33331568548e-1f) * zz * z + z;
  }
  if ((j & 2u) != 0u) { r = -1.0f / r; }
  return select(r, -r, xx < 0.0f);
}`,
  nbx_atan_pos: `fn nbx_atan_pos(xx: f32) -> f32 {
  var x = xx; var y = 0.0f;
  if (x > 2.414213562373095f) { y = 1.5707963267948966f; x = -1.0f / x; }
  else if (x > 0.4142135623730950f) { y = 0.7853981633974483f; x = (x - 1.0f) / (x + 1.0f); }
  let z = x * x;
  return y + (((8.05374449538e-2f * z - 1.38776856032e-1f) * z + 1.99777106478e-1f) * z - 3.33329491539e-1f) * z * x + x;
}`,
  nbx_atan2: `fn nbx_atan2(y: f32, x: f32) -> f32 {
  if (nbx_isnan(x) || nbx_isnan(y)) { return nbx_nan(); }
  let pi = 3.14159265358979f;
  let xneg = (bitcast<u32>(x) & 0x80000000u) != 0u;
  if (y == 0.0f) { return select(y, nbx_copysign(pi, y), xneg); }
  if (x == 0.0f) { return nbx_copysign(1.5707963267948966f, y); }
  if (nbx_isinf(x)) {
    if (nbx_isinf(y)) { return nbx_copysign(select(0.7853981633974483f, 2.356194490192345f, xneg), y); }
    return nbx_copysign(select(0.0f, pi, xneg), y);
  }
  if (nbx_isinf(y)) { return nbx_copysign(1.5707963267948966f, y); }
  let ax = abs(x); let ay = abs(y);
  var r = select(1.5707963267948966f - nbx_atan_pos(ax / ay), nbx_atan_pos(ay / ax), ay <= ax);
  if (xneg) { r = pi - r; }
  return nbx_copysign(r, y);
}`,
  nbx_hypot: `fn nbx_hypot(a: f32, b: f32) -> f32 {
  if (nbx_isinf(a) || nbx_isinf(b)) { return nbx_inf(); }
  if (nbx_isnan(a) || nbx_isnan(b)) { return nbx_nan(); }
  let x = abs(a); let y = abs(b);
  let m = max(x, y); let s = min(x, y);
  if (m == 0.0f) { return 0.0f; }
  let r = s / m;
  return m * sqrt(1.0f + r * r);
}`,
  nbx_tanh: `fn nbx_tanh(x: f32) -> f32 {
  if (nbx_isnan(x)) { return x; }
  let a = abs(x);
  if (a > 9.0f) { return nbx_copysign(1.0f, x); }
  if (a >= 0.625f) { let s = exp(2.0f * a); return nbx_copysign(1.0f - 2.0f / (s + 1.0f), x); }
  let z = x * x;
  return ((((-5.70498872745e-3f * z + 2.06390887954e-2f) * z - 5.37397155531e-2f) * z + 1.33314422036e-1f) * z - 3.33332819422e-1f) * z * x + x;
}`,
  // erf(x) = 2/sqrt(pi) exp(-x^2) sum_n (2x^2)^n x / (1*3*...*(2n+1)): positive terms, no cancellation
  nbx_erf: `fn nbx_erf(x: f32) -> f32 {
  if (nbx_isnan(x)) { return x; }
  let ax = abs(x);
  if (ax >= 4.0f) { return nbx_copysign(1.0f, x); }
  let x2 = ax * ax;
  var term = ax; var sum = ax;
  for (var n = 1; n < 120; n++) {
    term *= (2.0f * x2) / f32(2 * n + 1);
    sum += term;
    if (term < sum * 3.0e-8f) { break; }
  }
  return nbx_copysign(min(1.1283791670955126f * exp(-x2) * sum, 1.0f), x);
}`,
  // ---- float division helpers (C semantics) ----
  // musl's fmodf: exact, on the integer mantissas
  nbx_fmod_f: `fn nbx_fmod_f(x: f32, y: f32) -> f32 {
  var uxi = bitcast<u32>(x); var uyi = bitcast<u32>(y);
  var ex = i32((uxi >> 23u) & 0xffu); var ey = i32((uyi >> 23u) & 0xffu);
  let sx = uxi & 0x80000000u;
  if ((uyi << 1u) == 0u || nbx_isnan(y) || ex == 0xff) { return nbx_nan(); }
  if ((uxi << 1u) <= (uyi << 1u)) { if ((uxi << 1u) == (uyi << 1u)) { return bitcast<f32>(sx); } return x; }
  if (ex == 0) { var i = uxi << 9u; loop { if ((i >> 31u) != 0u) { break; } ex -= 1; i <<= 1u; } uxi <<= u32(-ex + 1); }
  else { uxi &= 0x7fffffu; uxi |= 0x800000u; }
  if (ey == 0) { var i = uyi << 9u; loop { if ((i >> 31u) != 0u) { break; } ey -= 1; i <<= 1u; } uyi <<= u32(-ey + 1); }
  else { uyi &= 0x7fffffu; uyi |= 0x800000u; }
  loop {
    if (ex <= ey) { break; }
    let i = uxi - uyi;
    if ((i >> 31u) == 0u) { if (i == 0u) { return bitcast<f32>(sx); } uxi = i; }
    uxi <<= 1u; ex -= 1;
  }
  let i = uxi - uyi;
  if ((i >> 31u) == 0u) { if (i == 0u) { return bitcast<f32>(sx); } uxi = i; }
  loop { if ((uxi >> 23u) != 0u) { break; } uxi <<= 1u; ex -= 1; }
  if (ex > 0) { uxi -= 0x800000u; uxi |= u32(ex) << 23u; } else { uxi >>= u32(-ex + 1); }
  return bitcast<f32>(uxi | sx);
}`,
  nbx_mod_f: `fn nbx_mod_f(a: f32, b: f32) -> f32 {
  var m = nbx_fmod_f(a, b);
  if (m != 0.0f && ((b < 0.0f) != (m < 0.0f))) { m += b; }
  if (m == 0.0f) { return nbx_copysign(0.0f, b); }
  return m;
}`,
  nbx_floordiv_f: `fn nbx_floordiv_f(a: f32, b: f32) -> f32 {
  if (b == 0.0f) {
    if (a == 0.0f || nbx_isnan(a)) { return nbx_nan(); }
    return bitcast<f32>(((bitcast<u32>(a) ^ bitcast<u32>(b)) & 0x80000000u) | 0x7f800000u);
  }
  let md = nbx_fmod_f(a, b);
  var dv = (a - md) / b;
  if (md != 0.0f && ((b < 0.0f) != (md < 0.0f))) { dv -= 1.0f; }
  if (dv == 0.0f) { return nbx_copysign(0.0f, a / b); }
  var fl = floor(dv);
  if (dv - fl > 0.5f) { fl += 1.0f; }
  return fl;
}`,
  // C pow: pow(x, 0) = pow(1, y) = 1 even for NaN; negative bases with integral exponents; exact by
  // repeated squaring for small integral exponents
  nbx_pow_f: `fn nbx_pow_f(a: f32, b: f32) -> f32 {
  if (b == 0.0f || a == 1.0f) { return 1.0f; }
  if (nbx_isnan(a) || nbx_isnan(b)) { return nbx_nan(); }
  let bint = !nbx_isinf(b) && trunc(b) == b;
  let odd = bint && abs(b) < 16777216.0f && (i32(abs(b)) & 1) == 1;
  let ab = abs(a);
  if (nbx_isinf(b)) {
    if (ab == 1.0f) { return 1.0f; }
    if ((ab < 1.0f) == (b > 0.0f)) { return 0.0f; }
    return nbx_inf();
  }
  if (a == 0.0f) {
    if (b < 0.0f) { return select(nbx_inf(), nbx_copysign(nbx_inf(), a), odd); }
    return select(0.0f, a, odd);
  }
  if (nbx_isinf(a)) {
    let r = select(0.0f, nbx_inf(), b > 0.0f);
    return select(r, -r, a < 0.0f && odd);
  }
  if (a < 0.0f && !bint) { return nbx_nan(); }
  var r: f32;
  if (bint && abs(b) <= 64.0f) {
    var e = u32(abs(b)); var base = ab; r = 1.0f;
    loop { if (e == 0u) { break; } if ((e & 1u) != 0u) { r *= base; } base *= base; e >>= 1u; }
    if (b < 0.0f) { r = 1.0f / r; }
  } else {
    r = nbx_exp2(b * log2(ab));
  }
  return select(r, -r, a < 0.0f && odd);
}`,
  // ---- integer helpers (division by zero gives 0 and sets nbx_divzero, which the elementwise kernel
  // reports so the read raises the CPU's ZeroDivisionError: a GPU cannot raise) ----
  nbx_itruncdiv_i: `fn nbx_itruncdiv_i(a: i32, b: i32) -> i32 {
  if (b == 0) { nbx_divzero = true; return 0; }
  if (b == -1) { return -a; }
  return a / b;
}`,
  nbx_ifmod_i: `fn nbx_ifmod_i(a: i32, b: i32) -> i32 {
  if (b == 0) { nbx_divzero = true; return 0; }
  if (b == -1) { return 0; }
  return a % b;
}`,
  nbx_ifloordiv_i: `fn nbx_ifloordiv_i(a: i32, b: i32) -> i32 {
  if (b == 0) { nbx_divzero = true; return 0; }
  let q = nbx_itruncdiv_i(a, b);
  if (nbx_ifmod_i(a, b) != 0 && ((a < 0) != (b < 0))) { return q - 1; }
  return q;
}`,
  nbx_imod_i: `fn nbx_imod_i(a: i32, b: i32) -> i32 {
  if (b == 0) { nbx_divzero = true; return 0; }
  let m = nbx_ifmod_i(a, b);
  if (m != 0 && ((m < 0) != (b < 0))) { return m + b; }
  return m;
}`,
  nbx_ipow_i: `fn nbx_ipow_i(a: i32, b: i32) -> i32 {
  if (b < 0) { if (a == 1) { return 1; } if (a == -1) { return select(-1, 1, (b & 1) == 0); } return 0; }
  var r = 1i; var base = a; var e = u32(b);
  loop { if (e == 0u) { break; } if ((e & 1u) != 0u) { r *= base; } base *= base; e >>= 1u; }
  return r;
}`,
  nbx_shl_i: 'fn nbx_shl_i(a: i32, b: i32, bits: i32) -> i32 { if (b < 0 || b >= bits || b >= 32) { return 0; } return a << u32(b); }',
  nbx_shr_i: 'fn nbx_shr_i(a: i32, b: i32, bits: i32) -> i32 { if (b < 0 || b >= bits) { return select(0, -1, a < 0); } return a >> u32(min(b, 31)); }',
  nbx_ushr_i: 'fn nbx_ushr_i(a: i32, b: i32, bits: i32) -> i32 { if (b < 0 || b >= bits) { return 0; } return a >> u32(b); }',
};

// Some prelude entries define several functions; map each to its entry.
const PROVIDER = new Map<string, string>();
for (const [key, code] of Object.entries(PRELUDE)) {
  for (const m of code.matchAll(/fn (nbx_\w+)\(/g)) PROVIDER.set(m[1]!, key);
  PROVIDER.set(key, key);
}

/** The helper definitions `code` calls (and those they call), in dependency order. */
export function wgslPrelude(code: string): string {
  const out: string[] = [];
  const done = new Set<string>();
  const visit = (src: string): void => {
    for (const m of src.matchAll(/\bnbx_\w+/g)) {
      const key = PROVIDER.get(m[0]);
      if (!key || done.has(key)) continue;
      done.add(key);
      visit(PRELUDE[key]!);
      out.push(PRELUDE[key]!);
    }
  };
  visit(code);
  return out.join('\n');
}
