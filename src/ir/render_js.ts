// Renders the elementwise IR to JavaScript. int64 computes in BigInt (exact, as PyTorch), every other
// dtype in JS numbers; narrow integers wrap after each operation; float16/bfloat16 compute in double
// and are rounded at their casts, which gives PyTorch CPU's "compute in float32, round once" results.
//
// `evaluate` is the reference evaluator of the IR: the same rendering, compiled for one element.

import { Expr, type Prim } from './expr.js';
import { DTYPES, type DTypeName } from '../dtype/dtypes.js';
import * as cv from '../dtype/convert.js';
import { ValueError } from '../errors.js';

const isBig = (d: DTypeName): boolean => d === 'int64';
const isIntLike = (d: DTypeName): boolean => DTYPES[d].kind === 'int' || d === 'bool';

/** Runtime helpers the generated code calls (passed in as `H`). */
export const H = {
  F16: cv.f16Table(),
  bf16: cv.fromBFloat16Bits,
  e4m3: cv.fromFloat8E4M3FNBits,
  e5m2: cv.fromFloat8E5M2Bits,
  encF16: cv.toFloat16Bits,
  encBF16: cv.toBFloat16Bits,
  encE4M3: cv.toFloat8E4M3FNBits,
  encE5M2: cv.toFloat8E5M2Bits,
  roundF16: (x: number) => cv.fromFloat16Bits(cv.toFloat16Bits(x)),
  roundBF16: (x: number) => cv.fromBFloat16Bits(cv.toBFloat16Bits(x)),
  toI32: cv.numberToInt32,
  toI64: cv.numberToInt64,
  rint(x: number): number {
    const r = Math.round(x);
    return r - x === 0.5 && r % 2 !== 0 ? r - 1 : r; // Math.round rounds halves up; PyTorch to even
  },
  sign: (x: number) => (x > 0 ? 1 : x < 0 ? -1 : 0), // (0 < x) - (x < 0): NaN and -0.0 give 0, as PyTorch
  erf(x: number): number {
    // erf(x) = 2/sqrt(pi) * exp(-x^2) * sum_n (2x^2)^n x / (1*3*...*(2n+1)): every term positive, so no
    // cancellation; accurate to a few ulp for |x| < 6, beyond which erf is +-1 in double.
    const ax = Math.abs(x);
    if (!(ax < 6)) return Number.isNaN(x) ? x : x > 0 ? 1 : -1;
    if (ax < 1e-8) return x * 1.1283791670955126;
    const x2 = x * x;
    let term = ax, sum = ax;
    for (let n = 1; n < 400; n++) {
      term *= (2 * x2) / (2 * n + 1);
      sum += term;
      if (term < sum * 1e-17) break;
    }
    const r = 1.1283791670955126 * Math.exp(-x2) * sum;
    return x < 0 ? -r : r;
  },
  pow(a: number, b: number): number {
    // C's pow: pow(1, y) = 1 and pow(x, 0) = 1 even for NaN; pow(-1, ±inf) = 1. JS differs there.
    if (a === 1 || b === 0) return 1;
    if (a === -1 && !Number.isFinite(b) && !Number.isNaN(b)) return 1;
    return Math.pow(a, b);
  },
  ipow(a: number, b: number): number {
    if (b < 0) return a === 1 ? 1 : a === -1 ? (b % 2 === 0 ? 1 : -1) : 0;
    let r = 1, base = a, e = b;
    while (e > 0) { if (e & 1) r = Math.imul(r, base); base = Math.imul(base, base); e = Math.floor(e / 2); }
    return r;
  },
  ipow64(a: bigint, b: bigint): bigint {
    if (b < 0n) return a === 1n ? 1n : a === -1n ? (b % 2n === 0n ? 1n : -1n) : 0n;
    let r = 1n, base = a, e = b;
    while (e > 0n) { if (e & 1n) r = BigInt.asIntN(64, r * base); base = BigInt.asIntN(64, base * base); e >>= 1n; }
    return r;
  },
  floordivF(a: number, b: number): number {
    if (b === 0) return a / b;
    const mod = a % b;
    let div = (a - mod) / b;
    if (mod !== 0 && (b < 0) !== (mod < 0)) div -= 1;
    if (div === 0) return Math.sign(a / b) * 0 || (a / b < 0 ? -0 : 0);
    let fl = Math.floor(div);
    if (div - fl > 0.5) fl += 1;
    return fl;
  },
  /** floordivF with float32 arithmetic (each step rounded), as PyTorch's float kernel computes it. */
  floordivF32(a: number, b: number): number {
    if (b === 0) return Math.fround(a / b);
    const mod = a % b; // fmod is exact
    let div = Math.fround(Math.fround(a - mod) / b);
    if (mod !== 0 && (b < 0) !== (mod < 0)) div = Math.fround(div - 1);
    if (div === 0) return (a / b < 0 || Object.is(a / b, -0)) ? -0 : 0;
    let fl = Math.floor(div);
    if (Math.fround(div - fl) > 0.5) fl += 1;
    return fl;
  },
  modF(a: number, b: number): number {
    let m = a % b;
    if (m !== 0 && (b < 0) !== (m < 0)) m += b;
    return m === 0 ? (b < 0 ? -0 : 0) : m;
  },
  zeroDiv(): never { throw new ValueError('div', 'ZeroDivisionError: integer division or modulo by zero'); },
  idiv(a: number, b: number): number { if (b === 0) H.zeroDiv(); return Math.floor(a / b); },
  itdiv(a: number, b: number): number { if (b === 0) H.zeroDiv(); return Math.trunc(a / b); },
  imod(a: number, b: number): number { if (b === 0) H.zeroDiv(); const m = a % b; return m !== 0 && (m < 0) !== (b < 0) ? m + b : m; },
  ifmod(a: number, b: number): number { if (b === 0) H.zeroDiv(); return a % b; },
  idiv64(a: bigint, b: bigint): bigint {
    if (b === 0n) H.zeroDiv();
    const q = a / b;
    return (a % b !== 0n) && ((a < 0n) !== (b < 0n)) ? q - 1n : q;
  },
  imod64(a: bigint, b: bigint): bigint { if (b === 0n) H.zeroDiv(); const m = a % b; return m !== 0n && (m < 0n) !== (b < 0n) ? m + b : m; },
  copysign: (a: number, b: number) => (b < 0 || Object.is(b, -0) || (Number.isNaN(b) && false) ? -Math.abs(a) : Math.abs(a)),
  shl(a: number, b: number, bits: number): number { return b < 0 || b >= bits ? 0 : b >= 32 ? 0 : a << b; },
  shr(a: number, b: number, bits: number): number { return b < 0 || b >= bits ? (a < 0 ? -1 : 0) : a >> Math.min(b, 31); },
  ushr(a: number, b: number, bits: number): number { return b < 0 || b >= bits ? 0 : a >>> b; },
  /** int64 `b` rounded to `bits` significant bits (ties to even), exactly, as a double. */
  bigRound(b: bigint, bits: number): number {
    const lim = 1n << BigInt(bits);
    if (b < lim && b > -lim) return Number(b); // already exact in `bits` bits
    const neg = b < 0n, a = neg ? -b : b;
    const shift = BigInt(a.toString(2).length - bits);
    let q = a >> shift;
    const rem = a - (q << shift), half = 1n << (shift - 1n);
    if (rem > half || (rem === half && (q & 1n) === 1n)) q += 1n;
    const r = Number(q << shift); // ≤ bits+1 significant bits: exact
    return neg ? -r : r;
  },
  shl64: (a: bigint, b: bigint) => (b < 0n || b >= 64n ? 0n : BigInt.asIntN(64, a << b)),
  shr64: (a: bigint, b: bigint) => (b < 0n || b >= 64n ? (a < 0n ? -1n : 0n) : a >> b),
  nan: NaN,
};

/** Wraps an integer result back into its dtype's range (C++ overflow behaviour). */
function wrap(d: DTypeName, x: string): string {
  switch (d) {
    case 'int32': return `((${x})|0)`;
    case 'int16': return `(((${x})<<16)>>16)`;
    case 'int8': return `(((${x})<<24)>>24)`;
    case 'uint8': return `((${x})&255)`;
    case 'bool': return `((${x})!==0?1:0)`;
    case 'int64': return `BigInt.asIntN(64,${x})`;
    default: return x;
  }
}

function lit(value: number, d: DTypeName): string {
  if (isBig(d)) return `${BigInt(Math.trunc(value))}n`;
  if (Number.isNaN(value)) return 'NaN';
  if (value === Infinity) return 'Infinity';
  if (value === -Infinity) return '(-Infinity)';
  if (Object.is(value, -0)) return '(-0)';
  return value < 0 ? `(${value})` : `${value}`;
}

/** Renders one node given its rendered operands. */
function renderNode(e: Expr, a: string[]): string {
  const d = e.dtype;
  const sd = e.src[0]?.dtype ?? d; // operand dtype (comparisons produce bool from other dtypes)
  const big = isBig(sd), int = isIntLike(sd);
  const [x, y] = a;
  const bits = DTYPES[sd].itemsize * 8;
  switch (e.op as Prim) {
    case 'neg': return int ? wrap(sd, big ? `-${x}` : `-(${x})`) : `(-${x})`;
    case 'abs': return big ? `(${x}<0n?BigInt.asIntN(64,-${x}):${x})` : int ? wrap(sd, `Math.abs(${x})`) : `Math.abs(${x})`;
    case 'floor': return int ? x! : `Math.floor(${x})`;
    case 'ceil': return int ? x! : `Math.ceil(${x})`;
    case 'trunc': return int ? x! : `Math.trunc(${x})`;
    case 'rint': return int ? x! : `H.rint(${x})`;
    case 'sign': return big ? `(${x}>0n?1n:${x}<0n?-1n:0n)` : int ? `(${x}>0?1:${x}<0?-1:0)` : `H.sign(${x})`;
    case 'exp': return `Math.exp(${x})`;
    case 'exp2': return `Math.pow(2,${x})`;
    case 'expm1': return `Math.expm1(${x})`;
    case 'log': return `Math.log(${x})`;
    case 'log2': return `Math.log2(${x})`;
    case 'log1p': return `Math.log1p(${x})`;
    case 'sqrt': return `Math.sqrt(${x})`;
    case 'rsqrt': return `(1/Math.sqrt(${x}))`;
    case 'recip': return `(1/${x})`;
    case 'sin': return `Math.sin(${x})`;
    case 'cos': return `Math.cos(${x})`;
    case 'tan': return `Math.tan(${x})`;
    case 'tanh': return `Math.tanh(${x})`;
    case 'erf': return `H.erf(${x})`;
    case 'isnan': return int ? '0' : `(${x}!==${x}?1:0)`;
    case 'isinf': return int ? '0' : `((${x}===Infinity||${x}===-Infinity)?1:0)`;
    case 'not': return big ? `(${x}===0n?1:0)` : `(${x}===0?1:0)`;
    case 'bnot': return sd === 'bool' ? `(${x}?0:1)` : big ? `(~${x})` : wrap(sd, `~${x}`);
    case 'add': return int ? wrap(sd, `${x}+${y}`) : `(${x}+${y})`;
    case 'sub': return int ? wrap(sd, `${x}-${y}`) : `(${x}-${y})`;
    case 'mul': return big ? wrap(sd, `${x}*${y}`) : sd === 'int32' ? `Math.imul(${x},${y})` : int ? wrap(sd, `${x}*${y}`) : `(${x}*${y})`;
    case 'div': return int ? (big ? `H.idiv64(${x},${y})` : wrap(sd, `H.itdiv(${x},${y})`)) : `(${x}/${y})`;
    case 'floordiv': return big ? `H.idiv64(${x},${y})` : int ? wrap(sd, `H.idiv(${x},${y})`) : sd === 'float64' ? `H.floordivF(${x},${y})` : `H.floordivF32(${x},${y})`;
    // trunc: the quotient is rounded to the operands' float type first (for the half types PyTorch's
    // Half/BFloat16 division returns a half: 34.84375 / 3.16796875 truncs to 11); floor: float32 steps
    case 'truncdiv': return big ? `(${y}===0n?H.zeroDiv():BigInt.asIntN(64,${x}/${y}))` : int ? wrap(sd, `H.itdiv(${x},${y})`) : sd === 'float64' ? `Math.trunc(${x}/${y})` : sd === 'float16' ? `Math.trunc(H.roundF16(${x}/${y}))` : sd === 'bfloat16' ? `Math.trunc(H.roundBF16(${x}/${y}))` : `Math.trunc(Math.fround(${x}/${y}))`;
    case 'mod': return big ? `H.imod64(${x},${y})` : int ? `H.imod(${x},${y})` : `H.modF(${x},${y})`;
    case 'fmod': return big ? `(${y}===0n?H.zeroDiv():${x}%${y})` : int ? `H.ifmod(${x},${y})` : `(${x}%${y})`;
    case 'pow': return big ? `H.ipow64(${x},${y})` : int ? wrap(sd, `H.ipow(${x},${y})`) : `H.pow(${x},${y})`;
    case 'atan2': return `Math.atan2(${x},${y})`;
    case 'max': return int ? `(${x}>${y}?${x}:${y})` : `((${x}!==${x}||${y}!==${y})?NaN:Math.max(${x},${y}))`;
    case 'min': return int ? `(${x}<${y}?${x}:${y})` : `((${x}!==${x}||${y}!==${y})?NaN:Math.min(${x},${y}))`;
    case 'lt': return `(${x}<${y}?1:0)`;
    case 'le': return `(${x}<=${y}?1:0)`;
    case 'gt': return `(${x}>${y}?1:0)`;
    case 'ge': return `(${x}>=${y}?1:0)`;
    case 'eq': return `(${x}===${y}?1:0)`;
    case 'ne': return `(${x}!==${y}?1:0)`;
    case 'and': return big ? `(${x}&${y})` : `(${x}&${y})`;
    case 'or': return `(${x}|${y})`;
    case 'xor': return `(${x}^${y})`;
    case 'shl': return big ? `H.shl64(${x},${y})` : wrap(sd, `H.shl(${x},${y},${bits})`);
    case 'shr': return big ? `H.shr64(${x},${y})` : DTYPES[sd].signed ? `H.shr(${x},${y},${bits})` : `H.ushr(${x},${y},${bits})`;
    case 'copysign': return `H.copysign(${x},${y})`;
    case 'hypot': return `Math.hypot(${x},${y})`;
    case 'where': return `(${a[0]}?${a[1]}:${a[2]})`;
    case 'cast': return renderCast(sd, d, x!);
    default: throw new Error(`render_js: no rule for ${e.op}`);
  }
}

/** Converts a value of dtype `from` (in its JS domain) into dtype `to`. */
export function renderCast(from: DTypeName, to: DTypeName, x: string): string {
  if (from === to) return x;
  const fromBig = isBig(from), fromInt = isIntLike(from);
  if (to === 'bool') return fromBig ? `(${x}!==0n?1:0)` : `(${x}!==0?1:0)`;
  if (isBig(to)) return fromBig ? x : fromInt ? `BigInt(${x})` : `H.toI64(${x})`;
  const num = fromBig ? `Number(${x})` : x;
  switch (to) {
    case 'float64': return num;
    // One rounding, as PyTorch: int32 and int64 values need not fit a float32 (nor an int64 a double).
    case 'float32': return fromBig ? `Math.fround(H.bigRound(${x},24))` : from === 'int32' ? `Math.fround(${x})` : fromInt ? num : `Math.fround(${num})`;
    case 'float16': return `H.roundF16(${fromBig ? `H.bigRound(${x},11)` : num})`;
    case 'bfloat16': return `H.roundBF16(${fromBig ? `H.bigRound(${x},8)` : num})`;
    case 'float8_e4m3fn': return `H.e4m3(H.encE4M3(${num}))`;
    case 'float8_e5m2': return `H.e5m2(H.encE5M2(${num}))`;
    case 'int32': return fromBig ? `Number(BigInt.asIntN(32,${x}))` : fromInt ? wrap('int32', x) : `H.toI32(${x})`;
    default: // int16, int8, uint8
      if (fromBig) return `Number(BigInt.as${to === 'uint8' ? 'Uint' : 'Int'}N(${DTYPES[to].itemsize * 8},${x}))`;
      return wrap(to, fromInt ? x : `H.toI32(${x})`);
  }
}

/** Reads storage element `idx` of an array holding dtype `d`, as the JS domain value of `d`. */
export function renderLoad(d: DTypeName, arr: string, idx: string): string {
  switch (d) {
    case 'float16': return `H.F16[${arr}[${idx}]]`;
    case 'bfloat16': return `H.bf16(${arr}[${idx}])`;
    case 'float8_e4m3fn': return `H.e4m3(${arr}[${idx}])`;
    case 'float8_e5m2': return `H.e5m2(${arr}[${idx}])`;
    default: return `${arr}[${idx}]`;
  }
}

/** Writes a JS domain value of dtype `d` into its storage. */
export function renderStore(d: DTypeName, arr: string, idx: string, v: string): string {
  switch (d) {
    case 'float16': return `${arr}[${idx}]=H.encF16(${v})`;
    case 'bfloat16': return `${arr}[${idx}]=H.encBF16(${v})`;
    case 'float8_e4m3fn': return `${arr}[${idx}]=H.encE4M3(${v})`;
    case 'float8_e5m2': return `${arr}[${idx}]=H.encE5M2(${v})`;
    default: return `${arr}[${idx}]=${v}`;
  }
}

/**
 * Renders `e` as statements computing it into a variable; returns [statements, result variable].
 * `loadExpr(slot)` gives the JS expression of a loaded input; `paramExpr(slot)` of a parameter.
 */
export function renderExpr(e: Expr, loadExpr: (slot: number, d: DTypeName) => string, paramExpr: (slot: number, d: DTypeName) => string): [string, string] {
  const names = new Map<string, string>();
  const lines: string[] = [];
  let n = 0;
  e.walk((node) => {
    let code: string;
    if (node.op === 'load') code = loadExpr(node.arg, node.dtype);
    else if (node.op === 'param') code = paramExpr(node.arg, node.dtype);
    else if (node.op === 'const') code = lit(node.arg, node.dtype);
    else code = renderNode(node, node.src.map((s) => names.get(s.key)!));
    const v = `t${n++}`;
    lines.push(`const ${v}=${code};`);
    names.set(node.key, v);
  });
  return [lines.join(''), names.get(e.key)!];
}

const scalarCache = new Map<string, (ins: unknown[], params: unknown[]) => unknown>();
/** Reference evaluator: the value of `e` for one element, inputs and params in their JS domain. */
export function evaluate(e: Expr, inputs: readonly (number | bigint)[], params: readonly (number | bigint)[] = []): number | bigint {
  let f = scalarCache.get(e.key);
  if (!f) {
    const [body, out] = renderExpr(e, (s) => `I[${s}]`, (s) => `P[${s}]`);
    f = new Function('H', 'I', 'P', `${body}return ${out};`).bind(null, H) as (ins: unknown[], params: unknown[]) => unknown;
    scalarCache.set(e.key, f);
  }
  return f(inputs as unknown[], params as unknown[]) as number | bigint;
}
