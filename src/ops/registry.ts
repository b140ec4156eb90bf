// Operations are declared once, with a PyTorch-style signature string. The signature gives positional
// order, keyword names and defaults; the binder turns `f(a, b, { alpha: 2 })` into named arguments,
// rejecting unknown keywords and missing arguments the way Python would. The registry is the list the
// CLI, the docs and the conformance runner read.

import { ValueError } from '../errors.js';

/** A Python-like scalar: the kind matters for type promotion (an int scalar keeps an int8 tensor int8). */
export class Scalar {
  constructor(readonly value: number | bigint | boolean, readonly kind: 'int' | 'float' | 'bool') {}
  toString(): string { return `${this.kind}(${String(this.value)})`; }
}
/**
 * `nbx.scalar.float(2)` is Python's `2.0` and `nbx.scalar.int(2)` is Python's `2`: a JavaScript number
 * cannot say which it is, and the kind decides type promotion (`int8_tensor + 2.0` is float32).
 * `nbx.float`, `nbx.int`, ... are dtypes, as in PyTorch.
 */
export const scalar = {
  /** A float scalar even though the value is integral (Python's `2.0`). */
  float: (v: number): Scalar => new Scalar(v, 'float'),
  /** An int scalar (Python's `2`); bigint for values beyond 2^53. */
  int: (v: number | bigint): Scalar => new Scalar(typeof v === 'number' ? Math.trunc(v) : v, 'int'),
  /** A bool scalar (Python's `True`), the same as a JavaScript boolean. */
  bool: (v: boolean): Scalar => new Scalar(v, 'bool'),
};

export type ScalarLike = number | bigint | boolean | Scalar;

/** How a JavaScript value acts as a scalar: integral numbers as Python ints, others as floats. */
export function scalarOf(v: ScalarLike): Scalar {
  if (v instanceof Scalar) return v;
  if (typeof v === 'boolean') return new Scalar(v, 'bool');
  if (typeof v === 'bigint') return new Scalar(v, 'int');
  return new Scalar(v, Number.isInteger(v) ? 'int' : 'float');
}
export const isScalarLike = (v: unknown): v is ScalarLike =>
  typeof v === 'number' || typeof v === 'boolean' || typeof v === 'bigint' || v instanceof Scalar;
export const scalarNumber = (v: ScalarLike): number => {
  const s = scalarOf(v);
  return typeof s.value === 'boolean' ? (s.value ? 1 : 0) : Number(s.value);
};

import { OPS, type OpInfo, type Param } from '../op_table.js';
export { OPS, type OpInfo };

function parseDefault(text: string): unknown {
  const t = text.trim();
  if (t === 'None') return null;
  if (t === 'True') return true;
  if (t === 'False') return false;
  if (/^'.*'$/.test(t)) return t.slice(1, -1);
  return JSON.parse(t.replace(/\(/g, '[').replace(/\)/g, ']'));
}

function parseSignature(sig: string): { name: string; params: Param[] } {
  const m = /^([\w.]+)\((.*)\)$/.exec(sig.trim());
  if (!m) throw new Error(`bad signature ${sig}`);
  const params: Param[] = [];
  let kwOnly = false;
  // split on commas not inside brackets
  const parts: string[] = [];
  let depth = 0, cur = '';
  for (const ch of m[2]!) {
    if (ch === '[' || ch === '(') depth++;
    if (ch === ']' || ch === ')') depth--;
    if (ch === ',' && depth === 0) { parts.push(cur); cur = ''; } else cur += ch;
  }
  if (cur.trim()) parts.push(cur);
  for (const raw of parts) {
    const p = raw.trim();
    if (p === '*') { kwOnly = true; continue; }
    const variadic = p.startsWith('*');
    const [name, def] = p.replace(/^\*/, '').split('=');
    params.push({ name: name!.trim(), kwOnly, required: def === undefined && !variadic, def: def === undefined ? undefined : parseDefault(def), variadic });
    if (variadic) kwOnly = true;
  }
  return { name: m[1]!, params };
}

export const isOptions = (v: unknown): v is Record<string, unknown> =>
  v !== null && typeof v === 'object' && Object.getPrototypeOf(v) === Object.prototype;

/**
 * Rejects keys of an options object that a function does not take (a misspelt `devcie` must not be
 * ignored silently), the way bind() does for operations; also rejects a non-object in its place.
 */
export function checkOptions(fn: string, opts: unknown, allowed: readonly string[]): void {
  if (opts === undefined || opts === null) return;
  if (typeof opts !== 'object' || Array.isArray(opts)) throw new ValueError(fn, `${fn}() options must be an object, got ${Array.isArray(opts) ? 'an array' : typeof opts}`);
  for (const k of Object.keys(opts)) {
    if (!allowed.includes(k)) throw new ValueError(fn, `${fn}() got an unexpected option '${k}' (allowed: ${allowed.join(', ')})`);
  }
}

/** Binds positional args and a trailing options object to the signature's names. */
export function bind(info: OpInfo, args: readonly unknown[]): Record<string, unknown> {
  // Runs on every call of every operation: index arithmetic instead of slicing, no key scan without options.
  let npos = args.length;
  let opts: Record<string, unknown> | undefined;
  if (npos && isOptions(args[npos - 1])) opts = args[--npos] as Record<string, unknown>;
  const out: Record<string, unknown> = {};
  let i = 0;
  const params = info.params;
  for (let q = 0; q < params.length; q++) {
    const p = params[q]!;
    if (p.variadic) {
      const rest = args.slice(i, npos);
      i = npos;
      out[p.name] = rest.length === 1 && Array.isArray(rest[0]) ? rest[0] : rest;
      continue;
    }
    if (!p.kwOnly && i < npos) {
      if (opts !== undefined && p.name in opts) throw new ValueError(info.name, `${info.name}() got multiple values for argument '${p.name}'`);
      out[p.name] = args[i++];
    } else if (opts !== undefined && p.name in opts && opts[p.name] !== undefined) out[p.name] = opts[p.name];
    else if (p.required) throw new ValueError(info.name, `${info.name}() missing required argument '${p.name}' (signature: ${info.signature})`);
    else out[p.name] = p.def;
  }
  if (i < npos) throw new ValueError(info.name, `${info.name}() takes ${i} positional arguments but ${npos} were given (signature: ${info.signature})`);
  if (opts !== undefined) {
    for (const k of Object.keys(opts)) {
      if (!params.some((p) => p.name === k)) throw new ValueError(info.name, `${info.name}() got an unexpected keyword argument '${k}' (signature: ${info.signature})`);
    }
  }
  return out;
}

/** The bound arguments of a failed call, briefly: tensors by shape and dtype, others by kind or value. */
function describeArgs(bound: Record<string, unknown>): string {
  const one = (v: unknown): string => {
    if (v !== null && typeof v === 'object' && 'shape' in v && 'dt' in v) return `tensor ${JSON.stringify((v as { shape: unknown }).shape)} ${String((v as { dt: unknown }).dt)}`;
    if (typeof v === 'number' || typeof v === 'boolean' || v === null || v === undefined) return String(v);
    if (typeof v === 'string') return JSON.stringify(v.length > 20 ? `${v.slice(0, 20)}...` : v);
    if (Array.isArray(v)) return `list of ${v.length}`;
    return typeof v === 'object' ? (Object.getPrototypeOf(v)?.constructor?.name ?? 'object') : typeof v;
  };
  return Object.entries(bound).filter(([, v]) => v !== undefined).map(([k, v]) => `${k}=${one(v)}`).join(', ');
}

/**
 * Declares an operation: `def('add(input, other, *, alpha=1)', ({input, other, alpha}) => ...)`.
 * Returns the user-facing function, which takes positional arguments and an optional options object.
 */
// eslint-disable-next-line @typescript-eslint/no-explicit-any
export function def<R>(signature: string, impl: (a: any) => R): (...args: any[]) => R {
  const { name, params } = parseSignature(signature);
  const info: OpInfo = { name, signature, params };
  if (OPS.has(name)) throw new Error(`operation ${name} is declared twice`);
  OPS.set(name, info);
  const fn = (...args: unknown[]): R => {
    const bound = bind(info, args);
    try {
      return impl(bound);
    } catch (e) {
      // JavaScript's own TypeError/RangeError inside an operation means an argument of a kind its code
      // did not expect (a number where a tensor goes, a Symbol, a length V8 refuses): a typed error
      // naming the operation, never a raw exception from deep inside it.
      if (e instanceof TypeError || e instanceof RangeError) {
        throw Object.assign(new ValueError(name, `invalid arguments (${describeArgs(bound)}): ${e.message}`), { cause: e });
      }
      throw e;
    }
  };
  Object.defineProperty(fn, 'name', { value: name.split('.').pop() });
  return fn;
}
