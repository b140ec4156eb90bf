// Containers: Sequential, ModuleList, ModuleDict. Their children are ordinary child modules (own
// properties), named "0", "1", ... for the positional ones, so state_dict names match PyTorch's
// (`layers.0.mlp.up_proj.weight`).


import { IndexError, ValueError } from '../errors.js';
import { Module } from './module.js';

function normIndex(op: string, i: number, n: number): number {
  if (!Number.isInteger(i)) throw new IndexError(op, `index must be an integer, got ${i}`);
  const j = i < 0 ? i + n : i;
  if (j < 0 || j >= n) throw new IndexError(op, `index ${i} is out of range`);
  return j;
}

/** Index of the numbered children "0".."n-1" (ModuleList and positional Sequential). */
function numberedCount(m: Module): number {
  let n = 0;
  while (Object.getOwnPropertyDescriptor(m, String(n))?.value instanceof Module) n++;
  return n;
}

/** PyTorch 2's ModuleList printout: runs of identical children collapse to `(0-11): 12 x Layer(...)`. */
function listRepr(name: string, items: Module[]): string {
  if (!items.length) return `${name}()`;
  const reprs = items.map((m) => m.toString());
  const blocks: { start: number; end: number; repr: string }[] = [];
  reprs.forEach((r, i) => {
    const last = blocks[blocks.length - 1];
    if (last && last.repr === r) last.end = i;
    else blocks.push({ start: i, end: i, repr: r });
  });
  const indent = (s: string): string => s.split('\n').map((l, i) => (i ? '  ' + l : l)).join('\n');
  const lines = blocks.map((b) => indent(b.start === b.end ? `(${b.start}): ${b.repr}` : `(${b.start}-${b.end}): ${b.end - b.start + 1} x ${b.repr}`));
  return `${name}(\n  ${lines.join('\n  ')}\n)`;
}

/** A list of modules, children "0", "1", ...: `list.get(i)` or `list[i]`, `list.length`, `for (const m of list)`. */
export class ModuleList<T extends Module = Module> extends Module implements Iterable<T> {
  readonly [index: number]: T;

  constructor(modules: Iterable<T> = []) {
    super();
    this.extend(modules);
  }
  get length(): number { return numberedCount(this); }
  /** The i-th module; negative i counts from the end. */
  get(i: number): T { return (this as unknown as Record<number, T>)[normIndex('nn.ModuleList', i, this.length)]!; }
  set(i: number, module: T): void { this.register_module(String(normIndex('nn.ModuleList', i, this.length)), module); }
  append(module: T): this {
    this.register_module(String(this.length), module);
    return this;
  }
  extend(modules: Iterable<T>): this {
    for (const m of modules) this.append(m);
    return this;
  }
  /** Inserts before index i, renumbering the ones after. */
  insert(i: number, module: T): void {
    const items = [...this];
    const n = items.length;
    const at = i < 0 ? Math.max(0, i + n) : Math.min(i, n);
    items.splice(at, 0, module);
    this.renumber(items);
  }
  /** Removes and returns the i-th module (default the last), renumbering the ones after. */
  pop(i = -1): T {
    const items = [...this];
    const [m] = items.splice(normIndex('nn.ModuleList', i, items.length), 1);
    this.renumber(items);
    return m!;
  }
  private renumber(items: T[]): void {
    for (let k = numberedCount(this) - 1; k >= 0; k--) delete (this as unknown as Record<number, T>)[k];
    items.forEach((m, k) => this.register_module(String(k), m));
  }
  *[Symbol.iterator](): Iterator<T> {
    const n = this.length;
    for (let i = 0; i < n; i++) yield (this as unknown as Record<number, T>)[i]!;
  }
  override forward(): never {
    throw new ValueError('nn.ModuleList.forward', 'ModuleList is a container and has no forward(); call forward on its modules');
  }
  override toString(): string { return listRepr(this._get_name(), [...this]); }
}

/**
 * Runs its modules in order, each one's output the next one's input. `new Sequential(a, b, c)` names
 * them "0", "1", "2"; `new Sequential({ conv: a, act: b })` (or a Map) keeps the given names.
 */
export class Sequential extends Module implements Iterable<Module> {
  constructor(...modules: Module[] | [Record<string, Module> | Map<string, Module>]) {
    super();
    const first = modules[0];
    if (modules.length === 1 && !(first instanceof Module)) {
      const entries = first instanceof Map ? [...first] : Object.entries(first as Record<string, Module>);
      for (const [k, m] of entries) this.register_module(k, m);
    } else {
      (modules as Module[]).forEach((m, i) => this.register_module(String(i), m));
    }
  }
  get length(): number { return this.named_children().length; }
  /** The i-th module in order; negative i counts from the end. */
  get(i: number): Module {
    const c = this.children();
    return c[normIndex('nn.Sequential', i, c.length)]!;
  }
  append(module: Module): this {
    this.register_module(String(this.length), module);
    return this;
  }
  *[Symbol.iterator](): Iterator<Module> { yield* this.children(); }
  // eslint-disable-next-line @typescript-eslint/no-explicit-any
  override forward(input: any): any {
    for (const m of this.children()) input = m.forward(input);
    return input;
  }
}

/** Modules by name: `dict.get('a')`, `dict.set('a', m)`, `keys()`, `values()`, `items()`; iterating gives the keys. */
export class ModuleDict<T extends Module = Module> extends Module implements Iterable<string> {
  constructor(modules: Record<string, T> | Map<string, T> | Iterable<[string, T]> = {}) {
    super();
    this.update(modules);
  }
  get length(): number { return this.named_children().length; }
  has(key: string): boolean { return this.named_children().some(([k]) => k === key); }
  get(key: string): T {
    const m = this.named_children().find(([k]) => k === key)?.[1];
    if (!m) throw new ValueError('nn.ModuleDict', `no module named '${key}' (keys: ${this.keys().join(', ') || 'none'})`);
    return m as T;
  }
  set(key: string, module: T): void { this.register_module(key, module); }
  pop(key: string): T {
    const m = this.get(key);
    delete (this as unknown as Record<string, unknown>)[key];
    return m;
  }
  clear(): void { for (const k of this.keys()) delete (this as unknown as Record<string, unknown>)[k]; }
  update(modules: Record<string, T> | Map<string, T> | Iterable<[string, T]>): void {
    const entries = modules instanceof Map || Symbol.iterator in Object(modules)
      ? [...(modules as Iterable<[string, T]>)] : Object.entries(modules as Record<string, T>);
    for (const [k, m] of entries) this.register_module(k, m);
  }
  keys(): string[] { return this.named_children().map(([k]) => k); }
  values(): T[] { return this.named_children().map(([, m]) => m as T); }
  items(): [string, T][] { return this.named_children() as [string, T][]; }
  *[Symbol.iterator](): Iterator<string> { yield* this.keys(); }
  override forward(): never {
    throw new ValueError('nn.ModuleDict.forward', 'ModuleDict is a container and has no forward(); call forward on its modules');
  }
}

