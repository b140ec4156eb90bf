// The paged KV cache (issue #19), laid out as vLLM lays it out: per layer a pool of fixed-size blocks
// for keys and one for values, [num_blocks, block_size, kv_heads, head_dim] in the model's dtype on its
// device, and per sequence a block table (the pool blocks holding its positions 0.., block_size each).
// Sequences of different lengths join and leave; a sequence's blocks return to the free list when it
// ends. Position p of a sequence lives in slot table[p / block_size] · block_size + p % block_size.
//
// The pools grow as blocks are first needed, up to `numBlocks`, and never shrink (a server's memory
// stays flat after warm-up). Where the CUDA driver has the virtual memory API, one address range for
// every pool at its largest is reserved up front and physical memory is mapped into it as the pools
// grow: nothing is copied and the tensors keep their addresses (src/models/paged_vmm.ts). Elsewhere
// (CPU, WebGPU, the emulator, a driver without VMM) a pool grows by copying into a larger tensor.
//
// The model runs on it without changing its code: PagedLayerCache is the decoder's LayerCache (see
// src/models/decoder.ts), which writes each layer's new keys/values into their slots
// (nbx.llm.reshape_and_cache) and either returns the sequence's keys/values for the usual attention
// (a prompt or a chunk of one: one sequence) or runs nbx.llm.paged_attention itself (a decode step of
// many sequences, one token each, each at its own position).

import * as nbx from '../index.js';
import { Tensor } from '../tensor/tensor.js';
import type { Device } from '../backend/backend.js';
import { DTYPES, type DTypeName } from '../dtype/dtypes.js';
import { DisposedError, KVCacheFullError, ValueError } from '../errors.js';
import type { LayerCache, AttendOptions } from './decoder.js';
import { openVmmPools, type VmmPools } from './paged_vmm.js';

export interface PagedCacheShape {
  layers: number; kvHeads: number; headDim: number;
  dtype: DTypeName; device: Device;
}

export interface PagedCacheOptions {
  /** Blocks the pools may hold at most (every sequence together). */
  numBlocks: number;
  /** Positions per block (default 16, vLLM's). */
  blockSize?: number;
  /** Blocks allocated at once (default: 64 or numBlocks when fewer). */
  initialBlocks?: number;
  /** 'auto' (default): VMM where the device has it, else plain tensors; 'plain': always plain tensors. */
  backing?: 'auto' | 'plain';
}

/** What the pools hold and how: for allocator statistics and the soak test. */
export interface PagedCacheMemory {
  backing: 'vmm' | 'plain';
  /** Blocks the pools can hold now (backed by memory). */
  capacityBlocks: number;
  /** Bytes of address space reserved (VMM: the whole range; plain: the tensors' bytes). */
  reservedBytes: number;
  /** Bytes backed by physical memory. */
  mappedBytes: number;
}

interface SeqState { blocks: number[]; length: number }

export class PagedKVCache {
  readonly blockSize: number;
  readonly numBlocks: number;
  private capacity = 0;
  private keys: Tensor[] = [];
  private values: Tensor[] = [];
  private readonly freeList: number[] = [];
  private readonly seqs = new Map<number, SeqState>();
  private used = 0;
  private disposed = false;
  private readonly vmm: VmmPools | null;
  private grown = 0;
  /** Bytes of one block of one pool (keys or values of one layer). */
  readonly blockBytes: number;

  constructor(readonly shape: PagedCacheShape, opts: PagedCacheOptions) {
    const op = 'PagedKVCache';
    const bs = opts.blockSize ?? 16;
    if (!Number.isInteger(bs) || bs < 1) throw new ValueError(op, `blockSize must be a positive integer, got ${String(opts.blockSize)}`);
    if (!Number.isInteger(opts.numBlocks) || opts.numBlocks < 1) throw new ValueError(op, `numBlocks must be a positive integer, got ${String(opts.numBlocks)}`);
    this.blockSize = bs;
    this.numBlocks = opts.numBlocks;
    this.blockBytes = bs * shape.kvHeads * shape.headDim * DTYPES[shape.dtype].itemsize;
    this.vmm = opts.backing === 'plain' ? null : openVmmPools(shape, this.numBlocks, this.blockBytes, 2 * shape.layers);
    const first = opts.initialBlocks ?? Math.min(64, this.numBlocks);
    this.grow(Math.max(1, Math.min(first, this.numBlocks)));
  }

  /** Blocks not held by any sequence (backed or not yet). */
  get freeBlocks(): number { return this.numBlocks - this.used - (this.scratch === null ? 0 : 1); }

  private scratch: number | null = null;
  /**
   * A slot no sequence owns (one block taken from the pool the first time): where the padding rows of a
   * fixed-size decode step write their keys and values (PagedLayerCache.decode with padTo).
   */
  scratchSlot(): number {
    if (this.scratch === null) {
      if (this.freeBlocks < 1) throw new KVCacheFullError('PagedKVCache.scratchSlot', `a padded decode step needs 1 scratch block, but 0 of ${this.numBlocks} are free`, 1, 0, this.numBlocks);
      if (this.freeList.length === 0) this.grow(this.capacity + 1);
      this.scratch = this.freeList.pop()!;
    }
    return this.scratch * this.blockSize;
  }
  get usedBlocks(): number { return this.used; }
  /**
   * Changes whenever the pools grow: their tensors (plain backing: new buffers) and block count (a
   * launch argument of paged_attention) change then, so a captured step that read them is stale.
   */
  get generation(): number { return this.grown; }
  get sequences(): number { return this.seqs.size; }

  private check(op: string): void {
    if (this.disposed) throw new DisposedError(op, 'this paged KV cache was disposed');
  }

  /** Backs at least `blocks` blocks (VMM: maps more of the range; plain: a larger tensor, the old blocks copied). */
  private grow(blocks: number): void {
    const { layers, kvHeads, headDim, dtype, device } = this.shape;
    const target = Math.min(this.numBlocks, Math.max(blocks, this.capacity * 2));
    if (target <= this.capacity) return;
    let cap: number;
    if (this.vmm) {
      // more of each pool's range mapped: the blocks stay where they are, the views get longer
      cap = this.vmm.mapBlocks(target);
      for (let l = 0; l < layers; l++) {
        this.keys[l]?.dispose(); this.values[l]?.dispose();
        this.keys[l] = this.vmm.tensor(2 * l); this.values[l] = this.vmm.tensor(2 * l + 1);
      }
    } else {
      cap = target;
      for (let l = 0; l < 2 * layers; l++) {
        const store = l % 2 === 0 ? this.keys : this.values, i = l >> 1;
        // zeros: a pool's unwritten slots are read as masked-out keys by the composite (0 · v, never NaN)
        const t = nbx.keep(nbx.zeros([cap, this.blockSize, kvHeads, headDim], { dtype, device }));
        const old = store[i];
        if (old) { t.slice(0, 0, this.capacity).copy_(old); old.dispose(); }
        store[i] = t;
      }
    }
    this.grown++;
    for (let b = cap - 1; b >= this.capacity; b--) this.freeList.push(b);
    // lowest ids first: the pools fill from the start
    this.freeList.sort((a, b) => b - a);
    this.capacity = cap;
  }

  /** Starts an empty sequence. */
  addSequence(id: number): void {
    this.check('PagedKVCache.addSequence');
    if (this.seqs.has(id)) throw new ValueError('PagedKVCache.addSequence', `sequence ${id} is already in the cache`);
    this.seqs.set(id, { blocks: [], length: 0 });
  }

  hasSequence(id: number): boolean { return this.seqs.has(id); }

  private seq(op: string, id: number): SeqState {
    this.check(op);
    const s = this.seqs.get(id);
    if (!s) throw new ValueError(op, `sequence ${id} is not in the cache`);
    return s;
  }

  /** Blocks for `tokens` positions. */
  blocksFor(tokens: number): number { return Math.ceil(tokens / this.blockSize); }

  /**
   * Makes room for positions up to `tokens` of sequence `id` (allocating blocks as needed). Out of blocks
   * is a KVCacheFullError saying how many were needed and how many are free; nothing is allocated then.
   */
  reserve(id: number, tokens: number): void {
    const op = 'PagedKVCache.reserve';
    const s = this.seq(op, id);
    const need = this.blocksFor(tokens) - s.blocks.length;
    if (need <= 0) return;
    if (need > this.freeBlocks) {
      throw new KVCacheFullError(op, `sequence ${id} needs ${need} more block(s) of ${this.blockSize} positions for ${tokens} tokens, but only ${this.freeBlocks} of ${this.numBlocks} are free`, need, this.freeBlocks, this.numBlocks);
    }
    if (need > this.freeList.length) this.grow(this.capacity + need - this.freeList.length);
    for (let i = 0; i < need; i++) s.blocks.push(this.freeList.pop()!);
    this.used += need;
  }

  /** Ends a sequence: its blocks are free at once. */
  free(id: number): void {
    const s = this.seqs.get(id);
    if (!s) return;
    this.seqs.delete(id);
    for (let i = s.blocks.length - 1; i >= 0; i--) this.freeList.push(s.blocks[i]!);
    this.used -= s.blocks.length;
  }

  /** Positions written for sequence `id`. */
  length(id: number): number { return this.seq('PagedKVCache.length', id).length; }
  /** The block table of sequence `id`. */
  blocks(id: number): readonly number[] { return this.seq('PagedKVCache.blocks', id).blocks; }

  /** Marks `n` more positions of `id` as written (after a forward wrote them in every layer). */
  advance(id: number, n: number): void { this.seq('PagedKVCache.advance', id).length += n; }

  /** The slot of position `pos` of sequence `id`. */
  slot(id: number, pos: number): number {
    const s = this.seq('PagedKVCache.slot', id);
    const b = s.blocks[Math.floor(pos / this.blockSize)];
    if (b === undefined) throw new ValueError('PagedKVCache.slot', `position ${pos} of sequence ${id} has no block (reserve() first)`);
    return b * this.blockSize + (pos % this.blockSize);
  }

  /** The pools of `layer` [capacity, block_size, kv_heads, head_dim] (views that change when the pools grow). */
  pools(layer: number): { keys: Tensor; values: Tensor } {
    this.check('PagedKVCache.pools');
    return { keys: this.keys[layer]!, values: this.values[layer]! };
  }

  memory(): PagedCacheMemory {
    if (this.vmm) return { backing: 'vmm', capacityBlocks: this.capacity, reservedBytes: this.vmm.reservedBytes, mappedBytes: this.vmm.mappedBytes };
    const bytes = 2 * this.shape.layers * this.capacity * this.blockBytes;
    return { backing: 'plain', capacityBlocks: this.capacity, reservedBytes: bytes, mappedBytes: bytes };
  }

  get isDisposed(): boolean { return this.disposed; }

  dispose(): void {
    if (this.disposed) return;
    this.disposed = true;
    for (const t of [...this.keys, ...this.values]) t.dispose();
    this.keys = []; this.values = [];
    this.vmm?.dispose();
    this.seqs.clear();
  }
}

const int64 = (v: readonly number[], shape: number[], device: Device): Tensor =>
  Tensor.fromStorage(BigInt64Array.from(v, (x) => BigInt(x)), 'int64', shape, device);
const int32 = (v: readonly number[], shape: number[], device: Device): Tensor =>
  Tensor.fromStorage(Int32Array.from(v), 'int32', shape, device);

/**
 * One forward's view of the paged cache, as the decoder's LayerCache. Two forms:
 * - `prefill(cache, id, tokens)`: one sequence, `tokens` new positions after its cached ones (a prompt
 *   or a chunk of it). update() writes them and returns the sequence's keys/values so far [1, KVH, past
 *   + T, D] for the decoder's own attention and masks (`length` is the past).
 * - `decode(cache, ids)`: a batch of sequences, one new token each at its own position. attend() writes
 *   the tokens' keys/values and runs nbx.llm.paged_attention over each sequence's blocks.
 * The positions are reserved before (PagedKVCache.reserve); commit() advances the lengths once every
 * layer has written (a forward that fails leaves them as they were).
 */
export class PagedLayerCache implements LayerCache {
  private readonly slotMapping: Tensor;
  private readonly blockTables: Tensor | null;
  private readonly seqLens: Tensor | null;
  /** Slots of positions 0 .. past + T of the prefilled sequence (past > 0 only). */
  private readonly history: Tensor | null;
  private constructor(private readonly cache: PagedKVCache, readonly ids: readonly number[], readonly past: number, readonly tokens: number, decode: boolean, readonly rows = ids.length) {
    const dev = cache.shape.device;
    if (decode) {
      const pad = rows - ids.length;
      const scratch = pad > 0 ? cache.scratchSlot() : 0;
      const lens = ids.map((id) => cache.length(id) + 1);
      this.slotMapping = int64([...ids.map((id, i) => cache.slot(id, lens[i]! - 1)), ...new Array<number>(pad).fill(scratch)], [rows], dev);
      const width = Math.max(...ids.map((id) => cache.blocks(id).length));
      const table = ids.flatMap((id) => {
        const b = cache.blocks(id);
        // past a sequence's last block: its own last block again (never read: beyond its length)
        return Array.from({ length: width }, (_, j) => b[Math.min(j, b.length - 1)]!);
      });
      // padding rows: the scratch block, length 0 (they attend to nothing and give zeros)
      for (let r = 0; r < pad; r++) for (let j = 0; j < width; j++) table.push(scratch / cache.blockSize);
      this.blockTables = int32(table, [rows, width], dev);
      this.seqLens = int32([...lens, ...new Array<number>(pad).fill(0)], [rows], dev);
      this.history = null;
    } else {
      const id = ids[0]!;
      this.slotMapping = int64(Array.from({ length: tokens }, (_, i) => cache.slot(id, past + i)), [tokens], dev);
      this.history = past > 0 ? int64(Array.from({ length: past + tokens }, (_, i) => cache.slot(id, i)), [past + tokens], dev) : null;
      this.blockTables = null; this.seqLens = null;
    }
  }

  /** A forward of `tokens` new positions of sequence `id` (reserved before). */
  static prefill(cache: PagedKVCache, id: number, tokens: number): PagedLayerCache {
    return new PagedLayerCache(cache, [id], cache.length(id), tokens, false);
  }

  /**
   * A decode step: one new token for each sequence of `ids` (reserved before), as `padTo` rows (default:
   * one per sequence); the rows past the sequences are padding, written to the scratch slot and attending
   * to nothing, so that every step has the same shape (a GPU's matrix products then take the same
   * kernel for a sequence whatever else runs: see src/generation/engine.ts).
   */
  static decode(cache: PagedKVCache, ids: readonly number[], padTo = ids.length): PagedLayerCache {
    if (!(Number.isInteger(padTo) && padTo >= ids.length)) throw new ValueError('PagedLayerCache.decode', `padTo must be an integer >= the ${ids.length} sequences, got ${padTo}`);
    return new PagedLayerCache(cache, ids, 0, 1, true, padTo);
  }

  get length(): number { return this.past; }
  /** A decode step (attend()) rather than one sequence's prompt (update()). */
  get isDecode(): boolean { return this.blockTables !== null; }

  update(layer: number, k: Tensor, v: Tensor): { keys: Tensor; values: Tensor } {
    if (this.blockTables) throw new ValueError('PagedLayerCache.update', 'a decode step attends through attend() (paged attention), not update()');
    const { keys, values } = this.cache.pools(layer);
    const KVH = k.shape[1]!, D = k.shape[3]!, Dv = v.shape[3]!;
    // [1, KVH, T, D] → [T, KVH, D]
    nbx.llm.reshape_and_cache(k[0]!.transpose(0, 1), v[0]!.transpose(0, 1), keys, values, this.slotMapping);
    if (!this.history) return { keys: k, values: v };
    const S = this.past + this.tokens;
    const ks = nbx.index_select(keys.view([-1, KVH, D]), 0, this.history).view([1, S, KVH, D]).transpose(1, 2);
    const vs = nbx.index_select(values.view([-1, KVH, Dv]), 0, this.history).view([1, S, KVH, Dv]).transpose(1, 2);
    return { keys: ks, values: vs };
  }

  attend(layer: number, q: Tensor, k: Tensor, v: Tensor, o: AttendOptions): Tensor | null {
    if (!this.blockTables) return null;
    const { keys, values } = this.cache.pools(layer);
    const B = q.shape[0]!, H = q.shape[1]!, Dv = v.shape[3]!;
    nbx.llm.reshape_and_cache(k.select(2, 0), v.select(2, 0), keys, values, this.slotMapping);
    const out = nbx.llm.paged_attention(q.select(2, 0), keys, values, this.blockTables, this.seqLens!, {
      scale: o.scaling, sliding_window: o.window, softcap: o.softcap,
    });
    return out.reshape([B, 1, H * Dv]);
  }

  /** Advances every sequence's length by this forward's tokens (call after the forward succeeded). */
  commit(): void { for (const id of this.ids) this.cache.advance(id, this.tokens); }

  dispose(): void {
    this.slotMapping.dispose(); this.blockTables?.dispose(); this.seqLens?.dispose(); this.history?.dispose();
  }
}

/**
 * The LayerCache of a step whose indices are already on the device, in tensors of fixed address (the
 * serving engine's steps, replayed as CUDA graphs: src/generation/engine.ts). Every row of the step is
 * one token of one sequence at its own position, decode tokens and prompt tokens alike: attend() writes
 * the rows' keys/values at `slotMapping` [R], then each row attends over its own sequence's blocks
 * (`blockTables` [R, W]) up to `seqLens` [R] (a prompt token's own position + 1: causal; 0 for padding
 * rows). A prompt chunk thus runs as rows of the batch (vLLM's chunked prefill), through
 * nbx.llm.paged_attention as decode rows do.
 */
export class PagedStepCache implements LayerCache {
  constructor(private readonly cache: PagedKVCache, private readonly slotMapping: Tensor, private readonly blockTables: Tensor, private readonly seqLens: Tensor) {}
  get length(): number { return 0; }
  update(): { keys: Tensor; values: Tensor } {
    throw new ValueError('PagedStepCache.update', 'a step over the paged cache attends through attend() (paged attention), not update()');
  }
  attend(layer: number, q: Tensor, k: Tensor, v: Tensor, o: AttendOptions): Tensor | null {
    const { keys, values } = this.cache.pools(layer);
    const B = q.shape[0]!, H = q.shape[1]!, Dv = v.shape[3]!;
    nbx.llm.reshape_and_cache(k.select(2, 0), v.select(2, 0), keys, values, this.slotMapping);
    const out = nbx.llm.paged_attention(q.select(2, 0), keys, values, this.blockTables, this.seqLens, {
      scale: o.scaling, sliding_window: o.window, softcap: o.softcap,
    });
    return out.reshape([B, 1, H * Dv]);
  }
}

/** What pagedLogits needs of the model (CausalLMModel): the decoder, the LM head and the config. */
export interface PagedModel {
  readonly model: { forward(ids: Tensor, a: { padding: Tensor | null; positionIds: Tensor; maxPosition: number; positionBound?: number | null; cache: LayerCache | null; masks?: Record<'full_attention' | 'sliding_attention', { mask: Tensor | null; isCausal: boolean }> }): Tensor };
  readonly lm_head: { forward(x: Tensor): Tensor };
  readonly cfg: { final_logit_softcapping: number | null };
  readonly device: Device;
}

const NO_MASK = { mask: null, isCausal: false };

/**
 * Logits [B, V] (model dtype, on its device) of the last position of each row, for `tokens` [B][T] at
 * `positions` [B][T], through the paged cache `lc` (as CausalLMModel.forward computes them: the decoder,
 * the LM head, the final soft-cap). Commits the new positions to the cache when the forward succeeds.
 */
export function pagedLogits(m: PagedModel, tokens: readonly (readonly number[])[], positions: readonly (readonly number[])[], lc: PagedLayerCache): Tensor {
  const B = tokens.length, T = tokens[0]!.length, dev = m.device;
  let maxPos = 0;
  for (const r of positions) for (const p of r) if (p > maxPos) maxPos = p;
  const out = nbx.scope(() => {
    const ids = int64(tokens.flat(), [B, T], dev), pos = int64(positions.flat(), [B, T], dev);
    // a decode step attends through paged_attention (its own length and window per row): no masks to build
    const masks = lc.isDecode ? { full_attention: NO_MASK, sliding_attention: NO_MASK } : undefined;
    let h = m.model.forward(ids, { padding: null, positionIds: pos, maxPosition: maxPos, positionBound: maxPos + 1, cache: lc, masks });
    if (T > 1) h = h.slice(1, T - 1);
    let logits = m.lm_head.forward(h);
    const cap = m.cfg.final_logit_softcapping;
    if (cap !== null) logits = logits.div(cap).tanh().mul(cap);
    return logits.reshape([B, logits.shape[2]!]);
  });
  lc.commit();
  return out;
}
