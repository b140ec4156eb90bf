// The paged KV cache's pools on the CUDA driver's virtual memory API: one address range per pool,
// reserved for the pool at its largest (numBlocks), mapped from its start as the cache grows
// (src/backend/cuda/runtime/driver.ts VmmRange). Growing maps more physical memory behind the blocks
// already there: nothing is copied and a pool's address never changes. The pools' tensors are views
// of the mapped part ([capacity, block_size, kv_heads, head_dim]); their storage belongs to the range
// and never goes to the caching allocator. Where VMM is missing (another device, the host emulator, a
// driver without it, NBX_PAGED_VMM=0) openVmmPools returns null and the cache uses plain tensors.

import { Tensor } from '../tensor/tensor.js';
import { Storage, keep } from '../tensor/storage.js';
import { backendFor } from '../backend/backend.js';
import { DTYPES } from '../dtype/dtypes.js';
import { VmmRange, type CudaContext, type Stream } from '../backend/cuda/runtime/driver.js';
import type { DTypeName } from '../dtype/dtypes.js';
import type { Device } from '../backend/backend.js';

/** What the pools need of the cache's shape (paged_cache.ts's PagedCacheShape has these; named here so the two files do not import each other). */
export interface VmmPoolShape { kvHeads: number; headDim: number; dtype: DTypeName; device: Device }

export interface VmmPools {
  /** Maps memory for at least `blocks` blocks in every pool (at most numBlocks); returns the blocks now backed. */
  mapBlocks(blocks: number): number;
  /** Pool `i` (2·layer for keys, 2·layer + 1 for values) as [capacity, block_size, kv_heads, head_dim]. */
  tensor(i: number): Tensor;
  readonly reservedBytes: number;
  readonly mappedBytes: number;
  dispose(): void;
}

/** What the pools need of the CUDA backend: its context and stream. */
interface CudaBits { ctx: CudaContext; stream: Stream }

/** Reserves one range per pool for numBlocks blocks; null where VMM is missing (the caller uses plain tensors). */
export function openVmmPools(shape: VmmPoolShape, numBlocks: number, blockBytes: number, pools: number): VmmPools | null {
  if (shape.device.type !== 'cuda' || process.env.NBX_PAGED_VMM === '0') return null;
  const be = backendFor(shape.device) as unknown as CudaBits;
  const ranges: VmmRange[] = [];
  try {
    for (let i = 0; i < pools; i++) {
      const r = VmmRange.reserve(be.ctx, numBlocks * blockBytes);
      if (!r) { ranges.forEach((x) => x.dispose()); return null; }
      ranges.push(r);
    }
  } catch (e) { ranges.forEach((x) => x.dispose()); throw e; }
  const { kvHeads, headDim, dtype, device } = shape;
  const item = DTYPES[dtype].itemsize;
  const bs = blockBytes / (kvHeads * headDim * item);
  // one storage per range, pinned by this object (never handed to the allocator; released with the range)
  const storages = ranges.map((r) => new Storage(device, dtype, Math.floor(r.reservedBytes / item), { ptr: r.base, bytes: r.reservedBytes }).retain());
  let capacity = 0;
  return {
    mapBlocks(blocks: number): number {
      const want = Math.min(numBlocks, blocks) * blockBytes;
      let cap = numBlocks;
      for (const r of ranges) cap = Math.min(cap, Math.floor(r.map(want, be.stream) / blockBytes));
      capacity = cap;
      return cap;
    },
    tensor(i: number): Tensor {
      const shp = [capacity, bs, kvHeads, headDim];
      return keep(new Tensor(storages[i]!, shp, [bs * kvHeads * headDim, kvHeads * headDim, headDim, 1], 0));
    },
    get reservedBytes(): number { return ranges.reduce((a, r) => a + r.reservedBytes, 0); },
    get mappedBytes(): number { return ranges.reduce((a, r) => a + r.mapped, 0); },
    dispose(): void {
      for (const s of storages) { s.buf = null; }
      ranges.forEach((r) => r.dispose());
    },
  };
}
