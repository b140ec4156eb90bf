// The key/value cache: per layer, one preallocated buffer for keys and one for values, [B, KVH, capacity, D]
// in the model's dtype on its device. A forward writes its new keys/values into the next free
// positions through views (copy_), and attends over the view of the filled part, so decoding one token
// writes one position instead of concatenating the whole history. A buffer that is full grows to twice
// its size (one copy, amortized). Sliding-window layers keep every position too: their mask hides what
// lies outside the window, which gives the same result as transformers' sliding cache.

import * as nbx from '../index.js';
import type { Tensor } from '../tensor/tensor.js';
import type { Device } from '../backend/backend.js';
import type { DTypeName } from '../dtype/dtypes.js';
import type { KVCache } from './types.js';
import { DisposedError, ShapeError, ValueError } from '../errors.js';

export interface CacheShape {
  layers: number; batch: number; kvHeads: number; headDim: number;
  dtype: DTypeName; device: Device;
}

export class KVCacheBuffers implements KVCache {
  private keys: (Tensor | null)[];
  private values: (Tensor | null)[];
  private filled = 0;
  private disposed = false;

  constructor(readonly shape: CacheShape, private capacity: number) {
    this.keys = new Array<Tensor | null>(shape.layers).fill(null);
    this.values = new Array<Tensor | null>(shape.layers).fill(null);
  }

  get length(): number { return this.filled; }
  get batch(): number { return this.shape.batch; }
  get isDisposed(): boolean { return this.disposed; }

  private check(op: string): void {
    if (this.disposed) throw new DisposedError(op, 'this KV cache was disposed; create a new one with model.newCache()');
  }

  /** Buffers of `layer` with room for `needed` positions (allocated on first use, grown ×2 when full). */
  private room(layer: number, needed: number): void {
    const { batch, kvHeads, headDim, dtype, device } = this.shape;
    if (needed > this.capacity) this.capacity = Math.max(needed, this.capacity * 2);
    for (const store of [this.keys, this.values]) {
      const old = store[layer];
      if (old && old.shape[2]! >= needed) continue;
      const grown = nbx.keep(nbx.empty([batch, kvHeads, this.capacity, headDim], { dtype, device }));
      if (old) { grown.slice(2, 0, this.filled).copy_(old.slice(2, 0, this.filled)); old.dispose(); }
      store[layer] = grown;
    }
  }

  /**
   * Writes this forward's keys and values [B, KVH, T, D] of `layer` after the cached ones and returns
   * views of all of them [B, KVH, length + T, D]. The length moves on only with advance(), once every
   * layer has written, so a forward that fails halfway leaves the cache as it was.
   */
  update(layer: number, k: Tensor, v: Tensor): { keys: Tensor; values: Tensor } {
    this.check('KVCache.update');
    const [B, KVH, T, D] = k.shape as [number, number, number, number];
    if (B !== this.shape.batch || KVH !== this.shape.kvHeads || D !== this.shape.headDim) {
      throw new ShapeError('KVCache.update', `keys of shape [${k.shape.join(', ')}] do not fit a cache made for batch ${this.shape.batch}, ${this.shape.kvHeads} key/value heads of dim ${this.shape.headDim}`);
    }
    const end = this.filled + T;
    this.room(layer, end);
    const kb = this.keys[layer]!, vb = this.values[layer]!;
    kb.slice(2, this.filled, end).copy_(k);
    vb.slice(2, this.filled, end).copy_(v);
    return { keys: kb.slice(2, 0, end), values: vb.slice(2, 0, end) };
  }

  /** Allocates every layer's buffers at the full capacity now (a CUDA graph needs fixed addresses). */
  preallocate(): void {
    this.check('KVCache.preallocate');
    for (let l = 0; l < this.shape.layers; l++) this.room(l, this.capacity);
  }

  /** Positions the buffers hold before they would grow. */
  get size(): number { return this.capacity; }

  /** The whole key and value buffers of `layer` [B, KVH, capacity, D] (after preallocate()). */
  buffers(layer: number): { keys: Tensor; values: Tensor } {
    const keys = this.keys[layer], values = this.values[layer];
    if (!keys || !values) throw new ValueError('KVCache.buffers', `layer ${layer} has no buffers yet (call preallocate())`);
    return { keys, values };
  }

  /** Marks `n` more positions as filled (called by the model after all layers wrote). */
  advance(n: number): void { this.check('KVCache.advance'); this.filled += n; }

  /** Forgets the cached positions (buffers stay allocated for reuse). */
  reset(): void { this.check('KVCache.reset'); this.filled = 0; }

  dispose(): void {
    if (this.disposed) return;
    this.disposed = true;
    for (const store of [this.keys, this.values]) for (let i = 0; i < store.length; i++) { store[i]?.dispose(); store[i] = null; }
  }
}
