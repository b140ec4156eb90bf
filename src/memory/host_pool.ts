// A small cache of large host buffers. A fresh multi-megabyte typed array costs a page fault per 4 KiB
// on first touch (often more than the operation that fills it); disposed CPU tensors hand their
// buffers back here and the next allocation of the same size takes one. Bounded (NBX_HOST_POOL_MB,
// default 256); buffers taken for a zero-filled tensor are cleared first.
//
// Small buffers (< 64 KiB) have their own free lists, keyed by constructor and length without
// building strings: a loop of small ops then allocates no typed arrays at all (a fresh 128-byte
// Float32Array is an off-heap allocation plus GC bookkeeping, which dominated a 32-element add).

import type { StorageArray } from '../dtype/storage.js';

const MIN_BYTES = 64 << 10;
const limitBytes = (): number => (Number(process.env.NBX_HOST_POOL_MB) >= 0 && process.env.NBX_HOST_POOL_MB !== '' && process.env.NBX_HOST_POOL_MB !== undefined ? Number(process.env.NBX_HOST_POOL_MB) : 256) * 2 ** 20;

const free = new Map<string, StorageArray[]>();
let pooledBytes = 0;
export const hostPoolStats = { hits: 0, misses: 0, returned: 0 };

const keyOf = (ctorName: string, length: number, shared: boolean): string => `${ctorName}:${length}:${shared ? 's' : 'p'}`;

const SMALL_PER_LENGTH = 32;
const SMALL_LIMIT_BYTES = 16 << 20;
const small = new Map<unknown, Map<number, StorageArray[]>>(); // constructor → length → free arrays
let smallBytes = 0;

/** A pooled small array (byteLength < 64 KiB) of this constructor and length, or undefined. */
export function takeSmallHost(ctor: unknown, length: number, zero: boolean): StorageArray | undefined {
  const a = small.get(ctor)?.get(length)?.pop();
  if (a === undefined) return undefined;
  smallBytes -= a.byteLength;
  if (zero) { if (a instanceof BigInt64Array) a.fill(0n); else (a as Uint8Array).fill(0); }
  return a;
}

/** A pooled array of this constructor and length, or undefined. */
export function takeHost(ctorName: string, length: number, shared: boolean, zero: boolean): StorageArray | undefined {
  if (length * 8 < MIN_BYTES / 8) return undefined;
  const list = free.get(keyOf(ctorName, length, shared));
  const a = list?.pop();
  if (!a) { hostPoolStats.misses++; return undefined; }
  pooledBytes -= a.byteLength;
  hostPoolStats.hits++;
  if (zero) { if (a instanceof BigInt64Array) a.fill(0n); else (a as Uint8Array).fill(0); }
  return a;
}

/** Returns a buffer nobody references any more (its storage was released). */
export function giveHost(a: StorageArray): void {
  if (a.byteOffset !== 0 || a.byteLength !== a.buffer.byteLength) return; // only whole buffers
  if (a.byteLength < MIN_BYTES) {
    if (a.byteLength === 0 || smallBytes + a.byteLength > SMALL_LIMIT_BYTES || a.buffer instanceof SharedArrayBuffer) return;
    let byLen = small.get(a.constructor);
    if (!byLen) { byLen = new Map(); small.set(a.constructor, byLen); }
    let list = byLen.get(a.length);
    if (!list) { list = []; byLen.set(a.length, list); }
    if (list.length >= SMALL_PER_LENGTH) return;
    list.push(a);
    smallBytes += a.byteLength;
    return;
  }
  if (pooledBytes + a.byteLength > limitBytes()) return;
  const k = keyOf(a.constructor.name, a.length, a.buffer instanceof SharedArrayBuffer);
  let list = free.get(k);
  if (!list) { list = []; free.set(k, list); }
  if (list.length >= 8) return;
  list.push(a);
  pooledBytes += a.byteLength;
  hostPoolStats.returned++;
}

export function clearHostPool(): void { free.clear(); pooledBytes = 0; small.clear(); smallBytes = 0; }
