// Renders the elementwise IR to C-like kernel languages. One base class holds the expression logic
// (what each primitive means for ints and floats, when to wrap, how casts behave); CUDA C and WGSL
// subclasses supply type names, literals, math function names and load/store of each storage type.
//
// Semantics follow the CPU reference (src/ir/render_js.ts): float16/bfloat16 compute in float32,
// narrow integers wrap after each operation, float→int conversion is x86's (truncation; NaN and
// out-of-range give INT_MIN), so a GPU result equals the CPU result wherever IEEE allows.

import { Expr, type Prim } from './expr.js';
import { DTYPES, type DTypeName } from '../dtype/dtypes.js';

export interface Capabilities {
  /** dtypes this target can compute and store; others are refused with a typed error by the backend. */
  dtypes: ReadonlySet<DTypeName>;
}

export abstract class CLikeRenderer {
  abstract readonly caps: Capabilities;
  /** The type a value of dtype `d` has while computing (float16 computes as float32, int8 as int32, ...). */
  abstract computeType(d: DTypeName): string;
  /** A literal of dtype `d`. */
  abstract literal(v: number, d: DTypeName): string;
  /** Name of a unary math function for float compute type of `d` (e.g. expf vs exp). */
  abstract mathFn(name: string, d: DTypeName): string;
  /** Converts a compute value of `from` to compute value of `to` (includes rounding to half types). */
  abstract castExpr(from: DTypeName, to: DTypeName, x: string): string;
  /** Wraps an integer result to its dtype's range. */
  abstract wrapInt(d: DTypeName, x: string): string;
  abstract ternary(c: string, a: string, b: string): string;
  abstract boolToCompute(x: string, d: DTypeName): string;
  abstract isNanExpr(x: string, d: DTypeName): string;
  abstract isInfExpr(x: string, d: DTypeName): string;

  protected isInt(d: DTypeName): boolean { return DTYPES[d].kind === 'int' || d === 'bool'; }

  node(e: Expr, a: string[]): string {
    const d = e.dtype;
    const sd = e.src[0]?.dtype ?? d;
    const int = this.isInt(sd);
    const [x, y] = a as [string, string];
    const f = (name: string) => `${this.mathFn(name, sd)}(${x})`;
    const bits = DTYPES[sd].itemsize * 8;
    const B = (v: string) => this.boolToCompute(v, 'bool');
    switch (e.op as Prim) {
      case 'neg': return int ? this.wrapInt(sd, `(-${x})`) : `(-${x})`;
      case 'abs': return int ? this.wrapInt(sd, this.ternary(`${x} < ${this.literal(0, sd)}`, `-${x}`, x)) : f('abs');
      case 'floor': case 'ceil': case 'trunc': return int ? x : f(e.op);
      case 'rint': return int ? x : f('rint');
      case 'sign': {
        const one = this.literal(1, sd), m1 = this.literal(-1, sd), z = this.literal(0, sd);
        return this.ternary(`${x} > ${z}`, one, this.ternary(`${x} < ${z}`, m1, z));
      }
      case 'exp': case 'exp2': case 'expm1': case 'log': case 'log2': case 'log1p': case 'sqrt': case 'sin': case 'cos':
      case 'tan': case 'tanh': case 'erf': return f(e.op);
      case 'rsqrt': return f('rsqrt');
      case 'recip': return `(${this.literal(1, sd)} / ${x})`;
      case 'isnan': return int ? B('false') : B(this.isNanExpr(x, sd));
      case 'isinf': return int ? B('false') : B(this.isInfExpr(x, sd));
      case 'not': return B(`${x} == ${this.literal(0, sd)}`);
      case 'bnot': return sd === 'bool' ? `(1 - ${x})` : this.wrapInt(sd, `(~${x})`);
      case 'add': return int ? this.wrapInt(sd, `(${x} + ${y})`) : `(${x} + ${y})`;
      case 'sub': return int ? this.wrapInt(sd, `(${x} - ${y})`) : `(${x} - ${y})`;
      case 'mul': return int ? this.wrapInt(sd, `(${x} * ${y})`) : `(${x} * ${y})`;
      case 'div': return int ? this.helper('itruncdiv', sd, [x, y]) : `(${x} / ${y})`;
      // the half types' quotient is rounded to the half type before truncating, as PyTorch's Half division
      case 'truncdiv': return int ? this.helper('itruncdiv', sd, [x, y])
        : `${this.mathFn('trunc', sd)}(${sd === 'float16' || sd === 'bfloat16' ? this.castExpr('float32', sd, `(${x} / ${y})`) : `(${x} / ${y})`})`;
      case 'floordiv': return this.helper(int ? 'ifloordiv' : 'floordiv', sd, [x, y]);
      case 'mod': return this.helper(int ? 'imod' : 'mod', sd, [x, y]);
      case 'fmod': return int ? this.helper('ifmod', sd, [x, y]) : this.helper('fmod', sd, [x, y]);
      case 'pow': return this.helper(int ? 'ipow' : 'pow', sd, [x, y]);
      case 'atan2': case 'hypot': case 'copysign': return `${this.mathFn(e.op, sd)}(${x}, ${y})`;
      case 'max': case 'min': {
        const op = e.op === 'max' ? '>' : '<';
        if (int) return this.ternary(`${x} ${op} ${y}`, x, y);
        const nan = `${this.isNanExpr(x, sd)} || ${this.isNanExpr(y, sd)}`;
        return this.ternary(nan, this.literal(NaN, sd), this.ternary(`${x} ${op} ${y}`, x, y));
      }
      case 'lt': return B(`${x} < ${y}`);
      case 'le': return B(`${x} <= ${y}`);
      case 'gt': return B(`${x} > ${y}`);
      case 'ge': return B(`${x} >= ${y}`);
      case 'eq': return B(`${x} == ${y}`);
      case 'ne': return B(`${x} != ${y}`);
      case 'and': return `(${x} & ${y})`;
      case 'or': return `(${x} | ${y})`;
      case 'xor': return `(${x} ^ ${y})`;
      case 'shl': return this.wrapInt(sd, this.helper('shl', sd, [x, y, String(bits)]));
      case 'shr': return this.helper(DTYPES[sd].signed ? 'shr' : 'ushr', sd, [x, y, String(bits)]);
      case 'where': return this.ternary(`${a[0]} != 0`, a[1]!, a[2]!);
      case 'cast': return this.castExpr(sd, d, x);
      default: throw new Error(`render_c: no rule for ${e.op}`);
    }
  }

  /** A call to a helper function of the prelude, specialised by compute type. */
  abstract helper(name: string, d: DTypeName, args: string[]): string;
  abstract declare(name: string, type: string, value: string): string;

  /** Statements computing `e`; returns [statements, result variable]. Common subexpressions are computed once. */
  render(e: Expr, load: (slot: number, d: DTypeName) => string, param: (slot: number, d: DTypeName) => string): [string, string] {
    const names = new Map<string, string>();
    const lines: string[] = [];
    let n = 0;
    e.walk((node) => {
      let code: string;
      if (node.op === 'load') code = load(node.arg, node.dtype);
      else if (node.op === 'param') code = param(node.arg, node.dtype);
      else if (node.op === 'const') code = this.literal(node.arg, node.dtype);
      else code = this.node(node, node.src.map((s) => names.get(s.key)!));
      const v = `t${n++}`;
      lines.push(this.declare(v, this.computeType(node.dtype), code));
      names.set(node.key, v);
    });
    return [lines.join('\n    '), names.get(e.key)!];
  }
}

// ---- CUDA C -------------------------------------------------------------------------------------

const CUDA_STORAGE: Record<DTypeName, string> = {
  bool: 'unsigned char', uint8: 'unsigned char', int8: 'signed char', int16: 'short', int32: 'int', int64: 'long long',
  float16: 'unsigned short', bfloat16: 'unsigned short', float32: 'float', float64: 'double',
  float8_e4m3fn: 'unsigned char', float8_e5m2: 'unsigned char', complex64: 'float2', complex128: 'double2',
};

export class CudaRenderer extends CLikeRenderer {
  readonly caps: Capabilities = { dtypes: new Set<DTypeName>(['bool', 'uint8', 'int8', 'int16', 'int32', 'int64', 'float16', 'bfloat16', 'float32', 'float64', 'float8_e4m3fn', 'float8_e5m2']) };
  storageType(d: DTypeName): string { return CUDA_STORAGE[d]; }
  computeType(d: DTypeName): string {
    if (d === 'float64') return 'double';
    if (DTYPES[d].kind === 'float') return 'float';
    return d === 'int64' ? 'long long' : 'int';
  }
  literal(v: number, d: DTypeName): string {
    if (d === 'float64') {
      if (Number.isNaN(v)) return '__longlong_as_double(0x7ff8000000000000LL)';
      if (!Number.isFinite(v)) return v > 0 ? '__longlong_as_double(0x7ff0000000000000LL)' : '__longlong_as_double(0xfff0000000000000LL)';
      return Object.is(v, -0) ? '(-0.0)' : `(${v.toPrecision(17)})`;
    }
    if (DTYPES[d].kind === 'float') {
      if (Number.isNaN(v)) return '__int_as_float(0x7fc00000)';
      if (!Number.isFinite(v)) return v > 0 ? '__int_as_float(0x7f800000)' : '__int_as_float(0xff800000)';
      return Object.is(v, -0) ? '(-0.0f)' : `(${Math.fround(v).toPrecision(9)}f)`;
    }
    if (d === 'int64') return `(${BigInt(Math.trunc(v))}LL)`;
    return `(${Math.trunc(v) | 0})`;
  }
  mathFn(name: string, d: DTypeName): string {
    const dbl = d === 'float64';
    const base: Record<string, string> = { abs: 'fabs', rsqrt: 'rsqrt' };
    const n = base[name] ?? name;
    return dbl ? n : `${n}f`;
  }
  wrapInt(d: DTypeName, x: string): string {
    switch (d) {
      case 'int8': return `((int)(signed char)${x})`;
      case 'uint8': return `((int)(unsigned char)${x})`;
      case 'int16': return `((int)(short)${x})`;
      case 'bool': return `((int)(${x} != 0))`;
      default: return x; // int32/int64 wrap in two's complement on the GPU
    }
  }
  ternary(c: string, a: string, b: string): string { return `((${c}) ? ${a} : ${b})`; }
  boolToCompute(x: string): string { return `((int)(${x}))`; }
  isNanExpr(x: string): string { return `isnan(${x})`; }
  isInfExpr(x: string): string { return `isinf(${x})`; }
  declare(name: string, type: string, value: string): string { return `const ${type} ${name} = ${value};`; }
  helper(name: string, d: DTypeName, args: string[]): string {
    const suffix = d === 'float64' ? 'd' : DTYPES[d].kind === 'float' ? 'f' : d === 'int64' ? 'l' : 'i';
    return `nbx_${name}_${suffix}(${args.join(', ')})`;
  }
  castExpr(from: DTypeName, to: DTypeName, x: string): string {
    if (from === to) return x;
    const fromF = DTYPES[from].kind === 'float';
    if (to === 'bool') return `((int)(${x} != 0))`;
    switch (to) {
      case 'float64': return `((double)${x})`;
      case 'float32': return `((float)${x})`;
      case 'float16': return `nbx_round_f16((float)${x})`;
      case 'bfloat16': return `nbx_round_bf16((float)${x})`;
      case 'float8_e4m3fn': return `nbx_e4m3_to_f(nbx_f_to_e4m3((float)${x}))`;
      case 'float8_e5m2': return `nbx_e5m2_to_f(nbx_f_to_e5m2((float)${x}))`;
      case 'int64': return fromF ? `nbx_f2i64((double)${x})` : `((long long)${x})`;
      case 'int32': return fromF ? `nbx_f2i32((double)${x})` : `((int)${x})`;
      default: return this.wrapInt(to, fromF ? `nbx_f2i32((double)${x})` : `(${x})`);
    }
  }
  load(d: DTypeName, ptr: string, idx: string): string {
    switch (d) {
      case 'float16': return `nbx_h2f(${ptr}[${idx}])`;
      case 'bfloat16': return `__uint_as_float(((unsigned)${ptr}[${idx}]) << 16)`;
      case 'float8_e4m3fn': return `nbx_e4m3_to_f(${ptr}[${idx}])`;
      case 'float8_e5m2': return `nbx_e5m2_to_f(${ptr}[${idx}])`;
      case 'float32': case 'float64': return `${ptr}[${idx}]`;
      default: return `((${this.computeType(d)})${ptr}[${idx}])`;
    }
  }
  store(d: DTypeName, ptr: string, idx: string, v: string): string {
    switch (d) {
      case 'float16': return `${ptr}[${idx}] = nbx_f2h(${v});`;
      case 'bfloat16': return `${ptr}[${idx}] = nbx_f2bf(${v});`;
      case 'float8_e4m3fn': return `${ptr}[${idx}] = nbx_f_to_e4m3(${v});`;
      case 'float8_e5m2': return `${ptr}[${idx}] = nbx_f_to_e5m2(${v});`;
      default: return `${ptr}[${idx}] = (${this.storageType(d)})(${v});`;
    }
  }
  /** The kernel-argument type a parameter of dtype `d` is passed as. */
  paramType(d: DTypeName): 'f32' | 'f64' | 'i32' | 'i64' {
    if (d === 'float64') return 'f64';
    if (DTYPES[d].kind === 'float') return 'f32';
    return d === 'int64' ? 'i64' : 'i32';
  }
}

/** Device functions the CUDA kernels call. Kept in one place, compiled into every module (NVRTC caches them). */
export const CUDA_PRELUDE = String.raw`
typedef unsigned long long u64;
// NVRTC has no <math.h>: the macros kernels use
#ifndef INFINITY
#define INFINITY __int_as_float(0x7f800000)
#endif
#ifndef NAN
#define NAN __int_as_float(0x7fffffff)
#endif
__device__ __forceinline__ float nbx_h2f(unsigned short h) { float f; asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(h)); return f; }
__device__ __forceinline__ unsigned short nbx_f2h(float f) { unsigned short h; asm("cvt.rn.f16.f32 %0, %1;" : "=h"(h) : "f"(f)); return h; }
// float -> bfloat16, round to nearest even; NaN keeps its sign with the quiet bit only (0x7fc0, as c10).
// On the device one cvt (the integer form costs ~8 instructions per element, which shows in the
// issue slots of bandwidth-bound bfloat16 kernels); the same bits.
__device__ __forceinline__ unsigned short nbx_f2bf(float f) {
  unsigned u = __float_as_uint(f);
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  unsigned short h; asm("cvt.rn.bf16.f32 %0, %1;" : "=h"(h) : "f"(f));
  return f != f ? (unsigned short)(((u >> 16) & 0x8000u) | 0x7fc0u) : h;
#else
  if ((u & 0x7fffffffu) > 0x7f800000u) return (unsigned short)(((u >> 16) & 0x8000u) | 0x7fc0u);
  return (unsigned short)((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
#endif
}
__device__ __forceinline__ float nbx_round_f16(float f) { return nbx_h2f(nbx_f2h(f)); }
__device__ __forceinline__ float nbx_round_bf16(float f) { return __uint_as_float(((unsigned)nbx_f2bf(f)) << 16); }
// float8: round to nearest even on the format's grid; e4m3fn overflows to NaN, e5m2 to infinity (as c10).
__device__ unsigned char nbx_f_to_mini(float x, int man, int emin, int bias, float maxf, unsigned char inf_or_nan) {
  unsigned char s = signbit(x) ? 0x80 : 0;
  if (isnan(x)) return s | 0x7f;
  float a = fabsf(x);
  if (a == 0.f) return s;
  if (isinf(a)) return s | inf_or_nan;
  int e; frexpf(a, &e); e -= 1;
  if (e < emin) e = emin;
  double q = ldexp(1.0, e - man);
  double r = (double)a / q, n = floor(r), fr = r - n;
  if (fr > 0.5 || (fr == 0.5 && fmod(n, 2.0) == 1.0)) n += 1.0;
  double v = n * q;
  if (v > maxf) return s | inf_or_nan;
  if (v < ldexp(1.0, emin)) return s | (unsigned char)(v / ldexp(1.0, emin - man));
  int ve; frexp(v, &ve); ve -= 1;
  int m = (int)((v / ldexp(1.0, ve) - 1.0) * (1 << man) + 0.5);
  return s | (unsigned char)(((ve + bias) << man) | m);
}
__device__ __forceinline__ unsigned char nbx_f_to_e4m3(float x) { return nbx_f_to_mini(x, 3, -6, 7, 448.f, 0x7f); }
__device__ __forceinline__ unsigned char nbx_f_to_e5m2(float x) { return nbx_f_to_mini(x, 2, -14, 15, 57344.f, 0x7c); }
__device__ __forceinline__ float nbx_e4m3_to_f(unsigned char b) {
  float s = (b & 0x80) ? -1.f : 1.f; int e = (b >> 3) & 15, m = b & 7;
  if (e == 15 && m == 7) return __int_as_float(0x7fc00000);
  return e == 0 ? s * m * ldexpf(1.f, -9) : s * (1.f + m / 8.f) * ldexpf(1.f, e - 7);
}
__device__ __forceinline__ float nbx_e5m2_to_f(unsigned char b) {
  float s = (b & 0x80) ? -1.f : 1.f; int e = (b >> 2) & 31, m = b & 3;
  if (e == 31) return m ? __int_as_float(0x7fc00000) : s * __int_as_float(0x7f800000);
  return e == 0 ? s * m * ldexpf(1.f, -16) : s * (1.f + m / 4.f) * ldexpf(1.f, e - 15);
}
// x86 float→int: truncation; NaN and out of range give INT_MIN (PyTorch CPU's result, the reference).
__device__ __forceinline__ int nbx_f2i32(double x) { return (x > -2147483649.0 && x < 2147483648.0) ? (int)x : (int)0x80000000; }
__device__ __forceinline__ long long nbx_f2i64(double x) { return (x >= -9223372036854775808.0 && x < 9223372036854775808.0) ? (long long)x : (long long)0x8000000000000000ULL; }
#define NBX_FLOAT_HELPERS(T, S, FLOOR, FMOD, POW) \
__device__ __forceinline__ T nbx_fmod_##S(T a, T b) { return FMOD(a, b); } \
__device__ __forceinline__ T nbx_mod_##S(T a, T b) { T m = FMOD(a, b); if (m != 0 && ((b < 0) != (m < 0))) m += b; return m == 0 ? (b < 0 ? -(T)0 : (T)0) : m; } \
__device__ __forceinline__ T nbx_floordiv_##S(T a, T b) { \
  if (b == 0) return a / b; T mod = FMOD(a, b); T div = (a - mod) / b; \
  if (mod != 0 && ((b < 0) != (mod < 0))) div -= 1; \
  if (div == 0) return copysign((T)0, a / b); T fl = FLOOR(div); if (div - fl > (T)0.5) fl += 1; return fl; } \
__device__ __forceinline__ T nbx_pow_##S(T a, T b) { return POW(a, b); }
NBX_FLOAT_HELPERS(float, f, floorf, fmodf, powf)
NBX_FLOAT_HELPERS(double, d, floor, fmod, pow)
#define NBX_INT_HELPERS(T, S, UT) \
__device__ __forceinline__ T nbx_itruncdiv_##S(T a, T b) { return b == 0 ? (T)0 : (T)(a / b); } \
__device__ __forceinline__ T nbx_ifloordiv_##S(T a, T b) { if (b == 0) return 0; T q = a / b; return ((a % b) != 0 && ((a < 0) != (b < 0))) ? q - 1 : q; } \
__device__ __forceinline__ T nbx_imod_##S(T a, T b) { if (b == 0) return 0; T m = a % b; return (m != 0 && ((m < 0) != (b < 0))) ? m + b : m; } \
__device__ __forceinline__ T nbx_ifmod_##S(T a, T b) { return b == 0 ? (T)0 : (T)(a % b); } \
__device__ __forceinline__ T nbx_ipow_##S(T a, T b) { \
  if (b < 0) return a == 1 ? 1 : (a == -1 ? ((b % 2 == 0) ? 1 : -1) : 0); \
  UT r = 1, base = (UT)a; while (b > 0) { if (b & 1) r *= base; base *= base; b >>= 1; } return (T)r; } \
__device__ __forceinline__ T nbx_shl_##S(T a, T b, int bits) { return (b < 0 || b >= bits) ? (T)0 : (T)((UT)a << b); } \
__device__ __forceinline__ T nbx_shr_##S(T a, T b, int bits) { return (b < 0 || b >= bits) ? (a < 0 ? (T)-1 : (T)0) : (T)(a >> b); } \
__device__ __forceinline__ T nbx_ushr_##S(T a, T b, int bits) { return (b < 0 || b >= bits) ? (T)0 : (T)((UT)a >> b); }
NBX_INT_HELPERS(int, i, unsigned)
NBX_INT_HELPERS(long long, l, unsigned long long)
// vector norms: p is the reduction kernel's parameter
#define NORM_INIT (p == __longlong_as_double(0xfff0000000000000LL) ? __longlong_as_double(0x7ff0000000000000LL) : 0.0)
__device__ __forceinline__ double NORM_ENTER_(double x, double p) { double ax = fabs(x); return p == 2.0 ? ax * ax : p == 1.0 ? ax : p == 0.0 ? (double)(x != 0) : isinf(p) ? ax : pow(ax, p); }
#define NORM_ENTER(x) NORM_ENTER_(x, p)
#define NORM_MERGE(a, b) (p == __longlong_as_double(0x7ff0000000000000LL) ? ((isnan(a) || b > a) ? b : a) : p == __longlong_as_double(0xfff0000000000000LL) ? ((isnan(a) || b < a) ? b : a) : a + b)
#define NORM_FINAL(a) (p == 2.0 ? sqrt(a) : (p == 1.0 || p == 0.0 || isinf(p)) ? a : pow(a, 1.0 / p))

`;
