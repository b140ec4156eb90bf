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
}

const als = new AsyncLocalStorage<Scope[]>();
const syncStack: Scope[] = [];

function currentScope(): Scope | undefined {
  return syncStack.length ? syncStack[syncStack.length - 1] : als.getStore()?.at(-1);
}

/** Called by every tensor constructor. */
export function track(t: Disposable): void { currentScope()?.created.push(t); }

function keepSet(result: unknown): Set<unknown> {
  const keep = new Set<unknown>();
  const visit = (v: unknown, depth: number): void => {
    if (v === null || typeof v !== 'object' || depth > 4) return;
    if ('dispose' in v && 'isDisposed' in v) { keep.add(v); return; }
    if (Array.isArray(v)) v.forEach((x) => visit(x, depth + 1));
    else if (Object.getPrototypeOf(v) === Object.prototype) Object.values(v).forEach((x) => visit(x, depth + 1));
  };
  visit(result, 0);
  return keep;
}

function close(scope: Scope, result: unknown): void {
  const keep = keepSet(result);
  for (const t of scope.created) if (!keep.has(t) && !t.isDisposed) t.dispose();
  // Kept tensors belong to the enclosing scope now.
  const parent = currentScope();
  if (parent) for (const t of keep) parent.created.push(t as Disposable);
}

/**
 * Runs fn and disposes every tensor it created that is not part of its result (a tensor, or arrays/
 * plain objects of tensors). Works for async functions: tensors created after an await still belong
 * to this scope.
 */
export function scope<T>(fn: () => T): T {
  const s = new Scope();
  const outer = als.getStore() ?? [];
  const isAsyncFn = fn.constructor.name === 'AsyncFunction';
  if (isAsyncFn) {
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
    throw new TypeError('nbx.scope: fn returned a Promise but is not an async function; declare it `async` so the scope can follow it');
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
