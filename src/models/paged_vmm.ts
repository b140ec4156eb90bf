// The paged KV cache's pools on the CUDA driver's virtual memory API (filled in below).
import type { Tensor } from '../tensor/tensor.js';
import type { PagedCacheShape } from './paged_cache.js';

export interface VmmPools {
  /** Maps memory for at least `blocks` blocks in every pool; returns the blocks now backed. */
  mapBlocks(blocks: number): number;
  /** Pool `i` (2·layer for keys, 2·layer + 1 for values) as [numBlocks, block_size, kv_heads, head_dim]. */
  tensor(i: number): Tensor;
  readonly reservedBytes: number;
  readonly mappedBytes: number;
  dispose(): void;
}

export function openVmmPools(shape: PagedCacheShape, numBlocks: number, blockBytes: number, pools: number): VmmPools | null {
  void shape; void numBlocks; void blockBytes; void pools;
  return null;
}
