// Storage: one device buffer shared by a tensor and its views, released when the last of them is
// disposed (reference counted), or by the garbage collector as a safety net.
//
// Scopes: `nbx.scope(fn)` (sync or async) disposes every tensor created inside fn except those it
// returns. Async scopes are tracked with AsyncLocalStorage, so a scope spans `await` correctly —
// the usual pain point of TensorFlow.js's tidy().

import type { DTypeName, StorageArray } from '../dtype/dtypes.js';
import { giveHost } from '../memory/host_pool.js';
import { backendFor, type Device } from '../backend/backend.js';
import { AsyncLocalStorage } from 'node:async_hooks';
import { ValueError } from '../errors.js';

export class Storage {
  private refs = 0;
  /** `borrowed`: the buffer belongs to the caller (nbx.frombuffer, as_tensor), so it is never pooled for reuse. */
  constructor(readonly device: Device, readonly dtype: DTypeName, readonly numel: number, public buf: unknown, readonly borrowed = false) {}
  retain(): this { this.refs++; return this; }
  release(): void {
    if (--this.refs === 0 && this.buf !== null) {
      const b = this.buf;
      this.buf = null;
      if (this.device.type !== 'cpu') backendFor(this.device).free(b);
      else if (!this.borrowed) giveHost(b as StorageArray); // nobody can reach it now: the next allocation of its size reuses it
    }
  }
  get alive(): boolean { return this.buf !== null; }
}

/** A GC safety net: a tensor that was never disposed releases its storage reference when collected. */
export const finalizer = new FinalizationRegistry<Storage>((s) => s.release());

export interface Disposable { dispose(): void; readonly isDisposed: boolean }

class Scope {
  readonly created: Disposable[] = [];
  closed = false;
  /** The scope this one was opened in: what this one keeps is the parent's to dispose. */
  constructor(readonly parent: Scope | undefined) {}
}

const als = new AsyncLocalStorage<Scope[]>();
const syncStack: Scope[] = [];

function currentScope(): Scope | undefined {
  return syncStack.length ? syncStack[syncStack.length - 1] : als.getStore()?.at(-1);
}

/** Called by every tensor constructor. */
export function track(t: Disposable): void { currentScope()?.created.push(t); }

const isDisposable = (v: object): v is Disposable => 'dispose' in v && 'isDisposed' in v;

/**
 * The tensors a scope's result holds: the result itself, and everything reachable from it through
 * arrays, Maps (keys and values), Sets and objects' own enumerable properties (plain objects and class
 * instances alike), at any depth. Containers the walk cannot see into are an error rather than a
 * silent disposal: WeakMap, WeakSet, WeakRef. (Closures are invisible too; a returned function must
 * not capture the scope's tensors unless they are kept with nbx.keep.)
 */
function keepSet(result: unknown): Set<Disposable> {
  const keep = new Set<Disposable>();
  if (result === null || typeof result !== 'object') return keep;
  const seen = new Set<object>();
  const todo: unknown[] = [result];
  while (todo.length) {
    const v = todo.pop();
    if (v === null || typeof v !== 'object' || seen.has(v)) continue;
    seen.add(v);
    if (isDisposable(v)) {
      keep.add(v);
      if ('storage' in v && 'shape' in v) continue; // a tensor: nothing inside it to keep
    }
    if (ArrayBuffer.isView(v) || v instanceof ArrayBuffer || v instanceof SharedArrayBuffer || v instanceof Promise) continue;
    if (v instanceof WeakMap || v instanceof WeakSet || v instanceof WeakRef) {
      throw new ValueError('scope', `the result holds a ${v.constructor.name}, whose contents a scope cannot see; tensors in it would be disposed. Return them in an array, object, Map or Set, or take them out with nbx.keep(t)`);
    }
    if (Array.isArray(v)) { for (const x of v) todo.push(x); continue; }
    if (v instanceof Map) { for (const [k, x] of v) { todo.push(k); todo.push(x); } continue; }
    if (v instanceof Set) { for (const x of v) todo.push(x); continue; }
    for (const k of Object.keys(v)) todo.push((v as Record<string, unknown>)[k]);
  }
  return keep;
}

function close(scope: Scope, result: unknown): void {
  // Most scopes (every composite operation's) return one tensor or nothing: no walk, no Sets.
  if (result === null || result === undefined || typeof result !== 'object' || isPlainTensor(result)) {
    closeKeepingOne(scope, result as Disposable | null | undefined);
    return;
  }
  let keep: Set<Disposable>;
  try { keep = keepSet(result); } catch (e) { disposeAll(scope, new Set()); throw e; }
  disposeAll(scope, keep);
  // Kept tensors belong to the enclosing scope now (the nearest one still open).
  let parent = scope.parent;
  while (parent?.closed) parent = parent.parent;
  if (parent) for (const t of keep) parent.created.push(t);
}
const isPlainTensor = (v: object): v is Disposable => isDisposable(v) && 'storage' in v && 'shape' in v;
function closeKeepingOne(scope: Scope, kept: Disposable | null | undefined): void {
  scope.closed = true;
  const created = scope.created;
  for (let i = 0; i < created.length; i++) { const t = created[i]!; if (t !== kept && !t.isDisposed) t.dispose(); }
  created.length = 0;
  if (kept === null || typeof kept !== 'object') return;
  let parent = scope.parent;
  while (parent?.closed) parent = parent.parent;
  if (parent) parent.created.push(kept);
}
function disposeAll(scope: Scope, keep: Set<Disposable>): void {
  scope.closed = true;
  for (const t of scope.created) if (!keep.has(t) && !t.isDisposed) t.dispose();
  scope.created.length = 0;
}

/**
 * Runs fn and disposes every tensor it created that is not part of its result (see keepSet for what
 * counts). Works for async functions: tensors created after an await still belong to this scope. A
 * nested scope's kept tensors belong to the scope around it, so they go when that one closes unless it
 * returns them too.
 */
export function scope<T>(fn: () => T): T {
  if (typeof fn !== 'function') throw new ValueError('scope', `nbx.scope takes a function, got ${fn === null ? 'null' : typeof fn}`);
  const parent = currentScope();
  const s = new Scope(parent);
  if (fn.constructor.name === 'AsyncFunction') {
    const outer = als.getStore() ?? [];
    return als.run([...outer, ...syncStack, s], () => {
      const p = fn() as unknown as Promise<unknown>;
      return p.then((r) => { close(s, r); return r; }, (e) => { close(s, undefined); throw e; }) as unknown as T;
    });
  }
  syncStack.push(s);
  let result: T;
  try {
    result = fn();
  } catch (e) {
    syncStack.pop();
    close(s, undefined);
    throw e;
  }
  syncStack.pop();
  if (result instanceof Promise) {
    // work after its first await would run outside the scope: refuse, and free what it created so far
    close(s, undefined);
    result.catch(() => {});
    throw new ValueError('scope', 'fn returned a Promise but is not an async function; declare it `async` so the scope can follow it (the tensors it created so far were disposed)');
  }
  close(s, result);
  return result;
}

/** Takes a tensor out of the current scope so it survives it. */
export function keep<T extends Disposable>(t: T): T {
  const s = currentScope();
  if (s) { const i = s.created.indexOf(t); if (i >= 0) s.created.splice(i, 1); }
  return t;
}
