// Python's `x[...]` for tensors. JavaScript cannot overload `[]` with several items, so the same index
// is written as arguments: `x.index(0, nbx.slice(1, null, 2), null, '...')` or as Python's text,
// `x.index('0, 1::2, None, ...')`; assignment is `x.index_set_(index, value)` (Python's
// `x[index] = value`). Integers in [-1024, 4096) also work as JS properties: `x[0]`, `x[-1]`,
// `x[2] = 5` (prototype accessors, not a Proxy, so ordinary property access stays as fast as before).
//
// The rules are PyTorch's: integers, slices, None, `...` and Python bools are basic indexing and give
// a view (writes through it reach `x`); an index tensor (int64/int32), a bool mask or a JS list makes
// the result a copy. Integers are applied first (they select, removing their dim), then the index
// tensors broadcast together; their result dims go where the first one was when they are adjacent,
// first otherwise.

import { Tensor } from '../tensor/tensor.js';
import { kernel } from '../kernels/registry.js';
import { DeviceLimitError, IndexError, ValueError } from '../errors.js';
import { backendFor } from '../backend/backend.js';
import { broadcastShapes, broadcastStrides, fmtShape, numelOf } from '../tensor/shape.js';
import { Scalar, isScalarLike, type ScalarLike } from './registry.js';
import { tensor } from './creation.js';
import { index_select, nonzero } from './indexing.js';
import { copy_, methods as inplace } from './inplace.js';
import { scalarTensor } from './shape.js';

/** Python's `slice(start, stop, step)`; `nbx.slice(stop)` with one argument, as Python's. */
export class Slice {
  constructor(readonly start: number | null, readonly stop: number | null, readonly step: number | null) {}
  toString(): string { return `${this.start ?? ''}:${this.stop ?? ''}${this.step === null ? '' : `:${this.step}`}`; }
}
export function slice(startOrStop: number | null = null, stop?: number | null, step: number | null = null): Slice {
  return stop === undefined ? new Slice(null, startOrStop, null) : new Slice(startOrStop, stop, step);
}

/** The Ellipsis, as an item: the string '...' works too. */
export const Ellipsis = '...';

/** One item of an index: Python's int, slice, None, Ellipsis, bool, index tensor, or list. */
export type IndexItem = number | bigint | boolean | null | '...' | Slice | Tensor | readonly unknown[];

// ---- the text form --------------------------------------------------------------------------------

function splitTop(s: string): string[] {
  const out: string[] = [];
  let depth = 0, cur = '';
  for (const ch of s) {
    if (ch === '[') depth++;
    if (ch === ']') depth--;
    if (ch === ',' && depth === 0) { out.push(cur); cur = ''; } else cur += ch;
  }
  out.push(cur);
  return out;
}

const INT = /^[+-]?\d+$/;

function parseItem(text: string, whole: string): IndexItem {
  const t = text.trim();
  const bad = (): never => { throw new ValueError('index', `cannot read '${t}' in the index '${whole}': items are integers, slices (a:b:c), None, ..., True/False or lists [1, 2]`); };
  if (t === '...' || t === 'Ellipsis') return '...';
  if (t === 'None') return null;
  if (t === 'True' || t === 'False') return t === 'True';
  if (INT.test(t)) return Number(t);
  if (t.startsWith('[') && t.endsWith(']')) {
    const inner = t.slice(1, -1).trim();
    if (inner === '') return [];
    return splitTop(inner).map((p) => { const v = parseItem(p, whole); if (typeof v !== 'number' && typeof v !== 'boolean' && !Array.isArray(v)) bad(); return v; });
  }
  if (t.includes(':')) {
    const parts = t.split(':');
    if (parts.length > 3) bad();
    const num = (p: string | undefined): number | null => { const q = (p ?? '').trim(); if (q === '' || q === 'None') return null; if (!INT.test(q)) bad(); return Number(q); };
    return new Slice(num(parts[0]), num(parts[1]), num(parts[2]));
  }
  return bad();
}

/** Python's index text ('0, 1:3, ::2, None, ...') as items. */
export function parseIndex(text: string): IndexItem[] {
  if (text.trim() === '') throw new ValueError('index', "an empty index: write ':' for the whole tensor or '...'");
  const items = splitTop(text).map((p) => parseItem(p, text));
  // Python's rule: x[[[0, 1], [1, 0]]], a lone list holding lists, is the tuple x[[0, 1], [1, 0]].
  const only = items[0];
  if (items.length === 1 && Array.isArray(only) && only.some((v) => Array.isArray(v))) return only as IndexItem[];
  return items;
}

function itemsOf(args: readonly unknown[]): IndexItem[] {
  if (args.length === 1 && typeof args[0] === 'string' && args[0] !== '...') return parseIndex(args[0]);
  return args as IndexItem[];
}

// ---- applying an index ------------------------------------------------------------------------------

/** The basic-indexing view of `x` and, per dim of the view, the index tensor (null: not indexed). */
interface Applied { view: Tensor; adv: (Tensor | null)[]; made: Tensor[]; copy: boolean }

const consumes = (it: IndexItem): number =>
  it === null || typeof it === 'boolean' || it === '...' ? 0 : it instanceof Tensor && it.dt === 'bool' ? Math.max(it.ndim, 0) : 1;

function indexTensor(op: string, it: Tensor | readonly unknown[], device: Tensor['device'], made: Tensor[]): Tensor {
  if (it instanceof Tensor) {
    if (it.dt !== 'int64' && it.dt !== 'int32' && it.dt !== 'bool' && it.dt !== 'uint8') {
      throw new IndexError(op, `tensors used as indices must be long, int, byte or bool tensors, got ${it.dt}`);
    }
    // A mask stays where it is: its nonzero() is read there (see maskIndices), only the indices move.
    if (it.dt === 'bool' || it.dt === 'uint8' || it.device === device) return it;
    made.push(it.to(device));
    return made[made.length - 1]!;
  }
  const flat = (it as unknown[]).flat(Infinity as 1);
  const isBool = flat.length > 0 && flat.every((v) => typeof v === 'boolean');
  if (!isBool && !flat.every((v) => (typeof v === 'number' && Number.isInteger(v)) || typeof v === 'bigint')) {
    throw new IndexError(op, `a list index must hold integers or booleans, got [${flat.map(String).join(', ')}]`);
  }
  const t = tensor(it, { dtype: isBool ? 'bool' : 'int64', device });
  made.push(t);
  return t;
}

function apply(op: string, x: Tensor, items: readonly IndexItem[]): Applied {
  const ell = items.filter((it) => it === '...').length;
  if (ell > 1) throw new IndexError(op, "an index can only have a single ellipsis ('...')");
  for (const it of items) {
    if (typeof it === 'string' && it !== '...') throw new ValueError(op, `a string item must be '...', got '${it}' (the whole index can be one string: x.index('0, 1:3'))`);
    if (it !== null && typeof it === 'object' && !(it instanceof Slice) && !(it instanceof Tensor) && !Array.isArray(it)) {
      throw new ValueError(op, `cannot index with ${it instanceof Scalar ? `the scalar ${String(it)}` : 'an object'}: items are integers, nbx.slice(...), null, '...', booleans, index tensors or lists`);
    }
    if (typeof it === 'number' && !Number.isInteger(it)) throw new IndexError(op, `only integers, slices, None, ..., and long or bool tensors are valid indices (got ${it})`);
  }
  const used = items.reduce<number>((n, it) => n + consumes(it), 0);
  if (used > x.ndim) throw new IndexError(op, `too many indices for tensor of dimension ${x.ndim}`);
  const made: Tensor[] = [];
  let v = x, copy = false;
  const adv: (Tensor | null)[] = [];
  let d = 0;
  for (const it of items) {
    if (it === '...') {
      const n = x.ndim - used;
      for (let k = 0; k < n; k++) adv.push(null);
      d += n;
    } else if (it === null || typeof it === 'boolean') {
      if (typeof it === 'boolean') copy = true; // PyTorch indexes with a Python bool as with a tensor: a copy
      v = v.unsqueeze(d);
      if (it === false) v = v.slice(d, 0, 0);
      adv.push(null);
      d++;
    } else if (typeof it === 'number' || typeof it === 'bigint') {
      v = v.select(d, Number(it));
    } else if (it instanceof Slice) {
      if (it.step !== null && it.step === 0) throw new ValueError(op, 'slice step cannot be zero');
      if (it.step !== null && it.step < 0) throw new ValueError(op, 'step must be greater than zero');
      v = v.slice(d, it.start, it.stop, it.step ?? 1);
      adv.push(null);
      d++;
    } else {
      const t = indexTensor(op, it as Tensor | readonly unknown[], x.device, made);
      if (t.dt === 'bool' || t.dt === 'uint8') {
        if (!backendFor(t.device).downloadSync && t.device.type !== 'cpu') {
          throw new DeviceLimitError(op, `a bool mask on ${t.device} selects a number of elements known only after reading the mask, and ${t.device} reads only asynchronously: index with the mask on the cpu, x.index(await mask.cpu())`);
        }
        if (t.ndim === 0) {
          // a 0-dim mask is Python's bool: a new dim of size 1 (true) or 0 (false)
          v = v.unsqueeze(d);
          copy = true;
          if (!t.item()) v = v.slice(d, 0, 0);
          adv.push(null);
          d++;
          continue;
        }
        if (t.shape.some((s, k) => s !== v.shape[d + k])) {
          throw new IndexError(op, `The shape of the mask ${fmtShape(t.shape)} at index ${adv.length} does not match the shape of the indexed tensor ${fmtShape(v.shape)} at index ${d}`);
        }
        let nz = nonzero(t) as Tensor;
        made.push(nz);
        if (nz.device !== x.device) { nz = nz.to(x.device); made.push(nz); }
        for (let k = 0; k < t.ndim; k++) { adv.push(nz.select(1, k)); d++; }
      } else { adv.push(t); d++; }
    }
  }
  while (adv.length < v.ndim) adv.push(null);
  return { view: v, adv, made, copy };
}

/** x[idx] for index tensors `adv` (one per dim of x, null where not indexed): always a copy. */
function gatherAdvanced(op: string, x: Tensor, adv: (Tensor | null)[]): Tensor {
  const D = adv.flatMap((t, k) => (t ? [k] : []));
  const rest = adv.flatMap((t, k) => (t ? [] : [k]));
  const idxs = D.map((k) => adv[k]!);
  const B = broadcastShapes(op, ...idxs.map((t) => t.shape));
  const adjacent = D[D.length - 1]! - D[0]! === D.length - 1;
  const restShape = rest.map((k) => x.shape[k]!);
  const sizes = D.map((k) => x.shape[k]!);
  const P = numelOf(sizes), nB = numelOf(B);
  // Indexed dims first, merged into one of size P; the index tensors become one linear index into it.
  const xp = x.permute([...D, ...rest]).reshape([P, ...restShape]);
  const lin = Tensor.empty(B, 'int64', x.device);
  let out: Tensor;
  try {
    if (nB > 0 && P === 0) throw new IndexError(op, `index is out of bounds for dimension ${D[0]} with size 0`);
    if (nB > 0) {
      kernel('linear_index', x.device, op)(idxs.map((t) => ({ ...t.ref(), shape: B, strides: broadcastStrides(t.shape, t.strides, B) })), sizes, lin.ref(), op, D);
    }
    const picked = index_select(xp, 0, lin.reshape([-1])) as Tensor;
    out = picked.reshape([...B, ...restShape]);
    if (out !== picked) picked.dispose();
  } finally { lin.dispose(); if (xp !== x) xp.dispose(); }
  if (adjacent && D[0]! > 0) {
    const moved = out.movedim(B.map((_, k) => k), B.map((_, k) => D[0]! + k));
    const c = moved.contiguous();
    if (c !== out) out.dispose();
    out = c;
  }
  return out;
}

/** Python's `x[items]`: a view for basic indexing, a copy once an index tensor or list is involved. */
export function getitem(x: Tensor, ...args: unknown[]): Tensor {
  const op = 'index';
  const { view, adv, made, copy } = apply(op, x, itemsOf(args));
  try {
    if (adv.every((t) => t === null)) return copy ? view.clone() : view === x ? x.alias() : view;
    return gatherAdvanced(op, view, adv);
  } finally { for (const t of made) t.dispose(); }
}

/**
 * Python's `x[index] = value`: `index` is one item, an array of items, or the index text; `value` a
 * number (or scalar wrapper) or a tensor, cast to x's dtype and broadcast. Writes into x; returns x.
 */
export function setitem(x: Tensor, index: IndexItem | readonly IndexItem[] | string, value: ScalarLike | Tensor): Tensor {
  const op = 'index_set_';
  // An array is the tuple of items (Python's x[0, 1]); a list index is wrapped: [[0, 1]] is x[[0, 1]].
  const items = typeof index === 'string' && index !== '...' ? parseIndex(index) : Array.isArray(index) ? index as IndexItem[] : [index as IndexItem];
  if (!(value instanceof Tensor) && !isScalarLike(value)) throw new ValueError(op, `the value must be a number, a scalar wrapper or a tensor, got ${value === null ? 'null' : typeof value}`);
  const { view, adv, made } = apply(op, x, items);
  try {
    if (adv.every((t) => t === null)) {
      if (value instanceof Tensor) copy_(view, value); else inplace.fill_!(view, value);
      return x;
    }
    let v: Tensor;
    if (value instanceof Tensor) v = value.dt === x.dt && value.device === x.device ? value : value.to({ dtype: x.dt, device: x.device });
    else v = scalarTensor(op, value, x.dt, x.device);
    try { inplace.index_put_!(view, adv, v); } finally { if (v !== value) v.dispose(); }
    return x;
  } finally { for (const t of made) t.dispose(); }
}

/**
 * Accessors for `x[i]` / `x[i] = v` with integer i in [LOW, HIGH): prototype properties, no Proxy. They
 * live on a prototype of their own between Tensor.prototype and Object.prototype: 1,024 negative indices
 * are named properties, and an object with that many goes to V8's dictionary mode, where every method
 * and getter lookup on a tensor would be a hash lookup that the optimizing compiler cannot inline.
 * Tensor.prototype keeps only the methods and stays a fast-mode object.
 */
const LOW = -1024, HIGH = 4096;
export function installIndexing(): void {
  const proto = Tensor.prototype as unknown as Record<string, unknown>;
  Object.defineProperty(proto, 'index', { value: function (this: Tensor, ...args: unknown[]) { return getitem(this, ...args); }, writable: true, configurable: true });
  Object.defineProperty(proto, 'index_set_', {
    value: function (this: Tensor, index: IndexItem | readonly IndexItem[] | string, value: ScalarLike | Tensor) { return setitem(this, index, value); },
    writable: true, configurable: true,
  });
  const accessors = Object.create(Object.getPrototypeOf(proto) as object) as object;
  for (let i = LOW; i < HIGH; i++) {
    Object.defineProperty(accessors, String(i), {
      get(this: Tensor) { return getitem(this, i); },
      set(this: Tensor, v: ScalarLike | Tensor) { setitem(this, [i], v); },
      configurable: true,
    });
  }
  Object.setPrototypeOf(proto, accessors);
}

declare module '../tensor/tensor.js' {
  interface Tensor {
    /** Python's `x[...]`: items as arguments (`x.index(0, nbx.slice(1, null, 2), null, '...')`) or Python's text (`x.index('0, 1::2, None, ...')`). */
    index(...items: (IndexItem | string)[]): Tensor;
    /** Python's `x[index] = value`: one item, an array of items (the tuple), or the index text; returns x. */
    index_set_(index: IndexItem | readonly IndexItem[] | string, value: ScalarLike | Tensor): Tensor;
  }
}
