// Printing, as PyTorch prints (torch/_tensor_str.py): the same float formatter (integer mode, fixed
// point with `precision` digits, scientific notation when the magnitudes span more than 1000x or
// leave [1e-4, 1e8]), the same summarization (`...` with `edgeitems` per side once numel exceeds
// `threshold`), the same line wrapping at `linewidth`, and the same suffixes. The one deliberate
// difference is the dtype suffix, which names nbx's dtype objects: `dtype=nbx.int32` where PyTorch
// prints `dtype=torch.int32`. test/fixtures/printing.json holds PyTorch's own text for the cases
// the tests compare, made by scripts/gen-printing-fixture.py.

import { DTYPES, type DTypeName } from '../dtype/dtypes.js';
import { defaultFloatDType } from '../dtype/promotion.js';
import { backendFor } from '../backend/backend.js';
import { def } from '../ops/registry.js';
import { ValueError } from '../errors.js';
import { Tensor, toValues } from './tensor.js';

export interface PrintOptions {
  /** Digits after the decimal point (default 4). */
  precision: number;
  /** Elements beyond which a tensor is summarized with `...` (default 1000). */
  threshold: number;
  /** Items shown at each end of a summarized dimension (default 3). */
  edgeitems: number;
  /** Characters per line before wrapping (default 80). */
  linewidth: number;
  /** Force (true) or forbid (false) scientific notation; null lets the formatter choose. */
  sci_mode: boolean | null;
}

const DEFAULTS: PrintOptions = { precision: 4, threshold: 1000, edgeitems: 3, linewidth: 80, sci_mode: null };
const PROFILES: Record<string, Partial<PrintOptions>> = {
  default: { precision: 4, threshold: 1000, edgeitems: 3, linewidth: 80 },
  short: { precision: 2, threshold: 1000, edgeitems: 2, linewidth: 80 },
  full: { precision: 4, threshold: Infinity, edgeitems: 3, linewidth: 80 },
};
const OPTS: PrintOptions = { ...DEFAULTS };

const checkCount = (name: string, v: unknown, min: number): number => {
  if (typeof v !== 'number' || Number.isNaN(v) || v < min || (!Number.isInteger(v) && v !== Infinity)) {
    throw new ValueError('set_printoptions', `${name} must be an integer >= ${min}, got ${String(v)}`);
  }
  return v;
};

/** `nbx.set_printoptions({ precision, threshold, edgeitems, linewidth, profile, sci_mode })`, as torch.set_printoptions. */
export const set_printoptions = def(
  'set_printoptions(precision=None, threshold=None, edgeitems=None, linewidth=None, profile=None, sci_mode=None)',
  (a): void => {
    if (a.profile !== null) {
      const p = PROFILES[a.profile as string];
      if (!p) throw new ValueError('set_printoptions', `unknown profile '${String(a.profile)}'; known: ${Object.keys(PROFILES).join(', ')}`);
      Object.assign(OPTS, p);
    }
    if (a.precision !== null) OPTS.precision = checkCount('precision', a.precision, 0);
    if (a.threshold !== null) OPTS.threshold = checkCount('threshold', a.threshold, 0);
    if (a.edgeitems !== null) OPTS.edgeitems = checkCount('edgeitems', a.edgeitems, 0);
    if (a.linewidth !== null) OPTS.linewidth = checkCount('linewidth', a.linewidth, 1);
    if (a.sci_mode !== null && typeof a.sci_mode !== 'boolean') throw new ValueError('set_printoptions', `sci_mode must be true, false or null, got ${String(a.sci_mode)}`);
    // As in PyTorch, a call without sci_mode resets it to automatic.
    OPTS.sci_mode = a.sci_mode as boolean | null;
  });

/** The current print options (a copy). */
export const get_printoptions = (): PrintOptions => ({ ...OPTS });

// ---- Python's float formatting, exactly: '{:.Nf}' and '{:.Ne}' round the exact binary value half to even

/** |x| = digits * 10^exp10 exactly (x finite). */
function exactDecimal(x: number): { digits: bigint; exp10: number } {
  const view = new DataView(new ArrayBuffer(8));
  view.setFloat64(0, Math.abs(x));
  const hi = view.getUint32(0), lo = view.getUint32(4);
  const bexp = (hi >>> 20) & 0x7ff;
  let mant = (BigInt(hi & 0xfffff) << 32n) | BigInt(lo);
  let e: number;
  if (bexp === 0) e = -1074; else { mant |= 1n << 52n; e = bexp - 1075; }
  if (e >= 0) return { digits: mant << BigInt(e), exp10: 0 };
  return { digits: mant * 5n ** BigInt(-e), exp10: e }; // mant * 2^e = mant * 5^-e / 10^-e
}

/** round(digits * 10^scale) with ties to even. */
function roundScaled(digits: bigint, scale: number): bigint {
  if (scale >= 0) return digits * 10n ** BigInt(scale);
  const d = 10n ** BigInt(-scale);
  const q = digits / d, r2 = (digits % d) * 2n;
  return r2 > d || (r2 === d && q % 2n === 1n) ? q + 1n : q;
}

const negative = (x: number): boolean => x < 0 || Object.is(x, -0);
const nonFinite = (x: number): string | null => (Number.isNaN(x) ? 'nan' : x === Infinity ? 'inf' : x === -Infinity ? '-inf' : null);

/** Python's `'{:.{prec}f}'.format(x)`. */
export function formatFixed(x: number, prec: number): string {
  const nf = nonFinite(x);
  if (nf !== null) return nf;
  const { digits, exp10 } = exactDecimal(x);
  let s = roundScaled(digits, exp10 + prec).toString();
  if (prec > 0) {
    s = s.padStart(prec + 1, '0');
    s = `${s.slice(0, -prec)}.${s.slice(-prec)}`;
  }
  return (negative(x) ? '-' : '') + s;
}

/** Python's `'{:.{prec}e}'.format(x)`. */
export function formatExp(x: number, prec: number): string {
  const nf = nonFinite(x);
  if (nf !== null) return nf;
  let mant: string, e10 = 0;
  if (x === 0) mant = '0'.repeat(prec + 1);
  else {
    const { digits, exp10 } = exactDecimal(x);
    e10 = digits.toString().length - 1 + exp10;
    let q = roundScaled(digits, exp10 + prec - e10);
    if (q.toString().length > prec + 1) { q /= 10n; e10 += 1; }
    mant = q.toString();
  }
  const m = prec > 0 ? `${mant[0]}.${mant.slice(1)}` : mant;
  const ex = `${e10 < 0 ? '-' : '+'}${String(Math.abs(e10)).padStart(2, '0')}`;
  return `${negative(x) ? '-' : ''}${m}e${ex}`;
}

// ---- the formatter (torch._tensor_str._Formatter) --------------------------------------------

type Value = number | bigint | boolean;

class Formatter {
  intMode = true;
  sciMode = false;
  maxWidth = 1;

  constructor(private readonly floating: boolean, values: readonly Value[]) {
    if (!floating) {
      for (const v of values) this.maxWidth = Math.max(this.maxWidth, plain(v).length);
      return;
    }
    const vals = (values as number[]).filter((v) => Number.isFinite(v) && v !== 0);
    if (vals.length === 0) return; // as PyTorch: the sci_mode option is not applied here
    let lo = Infinity, hi = 0;
    for (const v of vals) { const a = Math.abs(v); if (a < lo) lo = a; if (a > hi) hi = a; }
    this.intMode = vals.every((v) => v === Math.ceil(v));
    const p = OPTS.precision;
    if (this.intMode) {
      if (hi / lo > 1000 || hi > 1e8) {
        this.sciMode = true;
        for (const v of vals) this.maxWidth = Math.max(this.maxWidth, formatExp(v, p).length);
      } else {
        for (const v of vals) this.maxWidth = Math.max(this.maxWidth, formatFixed(v, 0).length + 1);
      }
    } else if (hi / lo > 1000 || hi > 1e8 || lo < 1e-4) {
      this.sciMode = true;
      for (const v of vals) this.maxWidth = Math.max(this.maxWidth, formatExp(v, p).length);
    } else {
      for (const v of vals) this.maxWidth = Math.max(this.maxWidth, formatFixed(v, p).length);
    }
    if (OPTS.sci_mode !== null) this.sciMode = OPTS.sci_mode;
  }

  format(v: Value): string {
    let s: string;
    if (this.floating) {
      const x = v as number;
      if (this.sciMode) s = formatExp(x, OPTS.precision);
      else if (this.intMode) s = formatFixed(x, 0) + (Number.isFinite(x) ? '.' : '');
      else s = formatFixed(x, OPTS.precision);
    } else s = plain(v);
    return s.padStart(this.maxWidth);
  }
}

/** Python's `'{}'.format(v)` for ints and bools. */
const plain = (v: Value): string => (typeof v === 'boolean' ? (v ? 'True' : 'False') : String(v));

// ---- layout (_tensor_str_with_formatter, _vector_str, _add_suffixes) ------------------------

interface Layout {
  shape: readonly number[]; // the original shape
  kept: readonly number[]; // the (summarized) shape the values have
  summarize: boolean;
  fmt: (flat: number) => string; // formats element `flat` of the kept values
  width: number; // element width for wrapping
}

function tensorStr(L: Layout, dim: number, base: number, indent: number): string {
  const nd = L.shape.length;
  if (nd === 0) return L.fmt(0);
  const n = L.shape[dim]!, e = OPTS.edgeitems;
  const cut = L.summarize && n > 2 * e;
  let stride = 1;
  for (let d = dim + 1; d < nd; d++) stride *= L.kept[d]!;
  const kept = L.kept[dim]!;
  const item = (i: number): string => (dim === nd - 1 ? L.fmt(base + i) : tensorStr(L, dim + 1, base + i * stride, indent + 1));
  const items: string[] = [];
  if (cut) {
    for (let i = 0; i < e; i++) items.push(item(i));
    items.push(dim === nd - 1 ? ' ...' : '...');
    for (let i = kept - e; i < kept; i++) items.push(item(i));
  } else for (let i = 0; i < kept; i++) items.push(item(i));
  if (dim === nd - 1) {
    const perLine = Math.max(1, Math.floor((OPTS.linewidth - indent) / L.width));
    const lines: string[] = [];
    for (let i = 0; i < items.length; i += perLine) lines.push(items.slice(i, i + perLine).join(', '));
    return `[${lines.join(`,\n${' '.repeat(indent + 1)}`)}]`;
  }
  return `[${items.join(`,${'\n'.repeat(nd - dim - 1)}${' '.repeat(indent + 1)}`)}]`;
}

function addSuffixes(str: string, suffixes: readonly string[], indent: number): string {
  const parts = [str];
  let last = str.length - str.lastIndexOf('\n') + 1;
  for (const s of suffixes) {
    if (last + s.length + 2 > OPTS.linewidth) { parts.push(`,\n${' '.repeat(indent)}${s}`); last = indent + s.length; } else { parts.push(`, ${s}`); last += s.length + 2; }
  }
  parts.push(')');
  return parts.join('');
}

/** Python's str(tuple(shape)). */
const pyTuple = (s: readonly number[]): string => (s.length === 1 ? `(${s[0]},)` : `(${s.join(', ')})`);

/** The dtype suffix PyTorch prints (`dtype=torch.int32`), naming nbx's dtype object instead. */
const dtypeSuffix = (d: DTypeName): string => `dtype=nbx.${d}`;

/** Values of a CPU-readable tensor in row-major order: numbers, bigints (int64), booleans, or [re, im] numbers. */
function readValues(t: Tensor): Value[] {
  const a = toValues(t.dt, t.dataStorageSync('print'));
  if (t.dt === 'bool') return Array.from(a as Uint8Array, (v) => v !== 0);
  return Array.from(a as ArrayLike<number | bigint>);
}

/** The corners numel > threshold prints: `edgeitems` from each end of every long dimension. */
function summarized(t: Tensor): Tensor {
  const e = OPTS.edgeitems;
  let s = t;
  for (let d = 0; d < t.ndim; d++) {
    const n = s.shape[d]!;
    if (n <= 2 * e) continue;
    // Two views and one small copy per long dimension: the full tensor is never read.
    const head = s.slice(d, 0, e), tail = s.slice(d, n - e, n);
    const shape = [...s.shape]; shape[d] = 2 * e;
    const next = Tensor.empty(shape, s.dt, s.device, false);
    next.slice(d, 0, e).copy_(head);
    next.slice(d, e, 2 * e).copy_(tail);
    if (s !== t) s.dispose();
    s = next;
  }
  return s;
}

/** PyTorch's repr of `t` (torch._tensor_str._str). */
export function tensorRepr(t: Tensor): string {
  const prefix = 'tensor(', indent = prefix.length;
  const suffixes: string[] = [];
  if (t.isDisposed) return `${prefix}<disposed>, size=${pyTuple(t.shape)}, ${dtypeSuffix(t.dt)})`;
  const dev = t.device;
  if (dev.type !== 'cpu') suffixes.push(`device='${dev}'`);
  const complexDefault = defaultFloatDType === 'float64' ? 'complex128' : 'complex64';
  const hasDefaultDType = t.dt === defaultFloatDType || t.dt === complexDefault || t.dt === 'int64' || t.dt === 'bool';
  // Suffix order as PyTorch's: device, then size (empty tensors), then dtype.
  if (t.numel() === 0) {
    if (t.ndim !== 1) suffixes.push(`size=${pyTuple(t.shape)}`);
    if (t.dt !== defaultFloatDType) suffixes.push(dtypeSuffix(t.dt)); // nothing to infer the dtype from
    return addSuffixes(`${prefix}[]`, suffixes, indent);
  }
  if (!hasDefaultDType) suffixes.push(dtypeSuffix(t.dt));
  if (dev.type !== 'cpu' && !backendFor(dev).downloadSync) {
    // WebGPU maps buffers only asynchronously: say what the tensor is and how to see its values.
    return `${prefix}<values on ${dev}: print await t.cpu() to see them>, size=${pyTuple(t.shape)}, ${dtypeSuffix(t.dt)}, device='${dev}')`;
  }
  const summarize = t.numel() > OPTS.threshold;
  const small = summarize ? summarized(t) : t;
  let values: Value[];
  try { values = readValues(small); } finally { if (small !== t) small.dispose(); }
  const kind = DTYPES[t.dt].kind;
  let layout: Layout;
  if (kind === 'complex') {
    const re = values.filter((_, i) => i % 2 === 0) as number[], im = values.filter((_, i) => i % 2 === 1) as number[];
    const f1 = new Formatter(true, re), f2 = new Formatter(true, im);
    layout = {
      shape: t.shape, kept: small.shape, summarize, width: f1.maxWidth + 2 + f2.maxWidth + 1,
      fmt: (i) => {
        const r = f1.format(re[i]!), m = `${f2.format(im[i]!)}j`.trimStart();
        return m[0] === '+' || m[0] === '-' ? r + m : `${r}+${m}`;
      },
    };
  } else {
    const f = new Formatter(kind === 'float', values);
    layout = { shape: t.shape, kept: small.shape, summarize, width: f.maxWidth + 2, fmt: (i) => f.format(values[i]!) };
  }
  return addSuffixes(prefix + tensorStr(layout, 0, 0, indent), suffixes, indent);
}

/** Makes `String(t)`, template literals and `console.log(t)` print as PyTorch does. */
export function installPrinting(): void {
  Object.defineProperty(Tensor.prototype, 'toString', { value: function (this: Tensor) { return tensorRepr(this); }, writable: true, configurable: true });
  Object.defineProperty(Tensor.prototype, Symbol.for('nodejs.util.inspect.custom'), {
    value: function (this: Tensor) { return tensorRepr(this); }, writable: true, configurable: true,
  });
}
