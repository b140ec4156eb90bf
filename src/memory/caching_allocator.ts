// A caching device-memory allocator, independent of CUDA.
//
// It follows the policy of PyTorch's CUDACachingAllocator in spirit:
//   * every request is rounded up to a multiple of 512 B (minimum 512 B);
//   * requests of at most 1 MiB come from the *small* pool, whose segments are 2 MiB;
//     larger requests come from the *large* pool, whose segments are 20 MiB for requests
//     under 10 MiB and the request rounded up to 2 MiB otherwise;
//   * a free block is chosen best-fit: the smallest free block that fits, ties broken by
//     the lowest address (pools are sorted by (size, address));
//   * a block is split when the remainder is worth keeping (small pool: >= 512 B, large
//     pool: > 1 MiB), and on free it is coalesced with free neighbours of its segment;
//   * pools are per stream: a block freed on stream S is only reused for requests on S
//     (memory used on other streams can be declared with recordStream(), see below);
//   * memory is never returned to the raw allocator, except by emptyCache() (wholly free
//     segments) or when a raw allocation fails: then every wholly free cached segment is
//     released and the raw allocation is retried once. If it still fails the allocator
//     throws OutOfMemoryError and stays consistent.
//
// The raw allocator is an interface so that the allocator is unit-testable with a fake
// (FakeRawAllocator below) and so that traces can be replayed offline (replayTrace()).

import { readFileSync, writeFileSync } from 'node:fs';
import { FormatError, OutOfMemoryError, ValueError } from '../errors.js';

/** The memory source under the cache (cuMemAlloc/cuMemFree for CUDA). */
export interface RawAllocator {
  /** Allocate `bytes`; return the device address. Throw (preferably OutOfMemoryError) on failure. */
  alloc(bytes: number): bigint;
  free(ptr: bigint): void;
  /** Device memory as the driver sees it, when known. */
  memInfo?(): { free: number; total: number };
}

/** Optional cross-stream support: events recorded on streams that used a block before it was freed. */
export interface StreamEvents {
  record(stream: StreamKey): unknown;
  /** true once the event has completed. */
  query(event: unknown): boolean;
  destroy?(event: unknown): void;
}

export type StreamKey = number | bigint;

export interface CachingAllocatorOptions {
  /** Blocks larger than this are never split, and not handed out for requests much smaller (PyTorch's max_split_size). Default: Infinity. */
  maxSplitSize?: number;
  /** Cap reserved memory at this fraction of memInfo().total (needs memInfo). Default: 1 (no cap). */
  memoryFraction?: number;
  /** Name used in error messages (e.g. "cuda:0"). */
  deviceName?: string;
  /** Enables recordStream() to defer frees until other streams are done with a block. */
  events?: StreamEvents;
}

export const MIN_BLOCK_SIZE = 512;
export const SMALL_SIZE = 1 << 20; // 1 MiB: largest request served by the small pool
export const SMALL_BUFFER = 2 << 20; // 2 MiB: small-pool segment size
export const LARGE_BUFFER = 20 << 20; // 20 MiB: large-pool segment for requests < MIN_LARGE_ALLOC
export const MIN_LARGE_ALLOC = 10 << 20; // 10 MiB
export const ROUND_LARGE = 2 << 20; // 2 MiB: large segments are rounded to this

/** Round a request as the allocator does: to a multiple of 512 B, at least 512 B. */
export function roundSize(bytes: number): number {
  if (bytes < MIN_BLOCK_SIZE) return MIN_BLOCK_SIZE;
  return Math.ceil(bytes / MIN_BLOCK_SIZE) * MIN_BLOCK_SIZE;
}

/** Size of the raw segment allocated for a (rounded) request. */
export function segmentSizeFor(rounded: number): number {
  if (rounded <= SMALL_SIZE) return SMALL_BUFFER;
  if (rounded < MIN_LARGE_ALLOC) return LARGE_BUFFER;
  return Math.ceil(rounded / ROUND_LARGE) * ROUND_LARGE;
}

interface Segment {
  ptr: bigint;
  size: number;
  stream: StreamKey;
  small: boolean;
  /** First block (lowest address) of the segment's block list. */
  head: Block;
}

interface Block {
  ptr: bigint;
  size: number;
  /** Bytes the caller asked for (0 when free). */
  requested: number;
  stream: StreamKey;
  small: boolean;
  segment: Segment;
  prev: Block | null;
  next: Block | null;
  allocated: boolean;
  /** Allocation id (recording); -1 when free. */
  id: number;
  /** Streams other than `stream` that used the block (recordStream). */
  streamUses: Set<StreamKey> | null;
}

/** Free blocks of one (pool, stream), sorted by (size, address). */
class BlockPool {
  readonly blocks: Block[] = [];

  private lowerBound(size: number, ptr: bigint): number {
    const a = this.blocks;
    let lo = 0;
    let hi = a.length;
    while (lo < hi) {
      const mid = (lo + hi) >>> 1;
      const b = a[mid]!;
      if (b.size < size || (b.size === size && b.ptr < ptr)) lo = mid + 1;
      else hi = mid;
    }
    return lo;
  }

  insert(b: Block): void {
    this.blocks.splice(this.lowerBound(b.size, b.ptr), 0, b);
  }

  remove(b: Block): void {
    const i = this.lowerBound(b.size, b.ptr);
    if (this.blocks[i] !== b) throw new Error('caching allocator: free block missing from its pool (internal error)');
    this.blocks.splice(i, 1);
  }

  /** Smallest block with size >= `size` (lowest address among equals). */
  bestFit(size: number): Block | null {
    const i = this.lowerBound(size, -1n);
    return i < this.blocks.length ? this.blocks[i]! : null;
  }
}

export interface MemoryStats {
  /** Bytes in blocks handed out to callers (rounded sizes). */
  allocatedBytes: number;
  peakAllocatedBytes: number;
  /** Bytes callers asked for (unrounded). */
  requestedBytes: number;
  /** Bytes held from the raw allocator (all segments). */
  reservedBytes: number;
  peakReservedBytes: number;
  /** Blocks handed out and not yet freed (including frees deferred by recordStream). */
  activeBlocks: number;
  segments: number;
  /** malloc() / free() calls. */
  allocCount: number;
  freeCount: number;
  rawAllocs: number;
  rawFrees: number;
  /** Raw allocations that failed (each followed by a cache flush and one retry). */
  rawAllocFailures: number;
  ooms: number;
  /** Free cached bytes (reserved − allocated − pending deferred frees). */
  freeReservedBytes: number;
  /** Largest free cached block. */
  largestFreeBlock: number;
  /** Free bytes in blocks that are split off partially used segments (PyTorch's inactive_split_bytes). */
  inactiveSplitBytes: number;
  /**
   * External fragmentation of the cache: 1 − largestFreeBlock / freeReservedBytes
   * (0 when nothing is cached free). 0 means all free cached memory is one block; near 1 means
   * the free memory is scattered in many small pieces.
   */
  fragmentation: number;
  /** Bytes of blocks freed by the caller but waiting for other streams (recordStream). */
  pendingFreeBytes: number;
  /** CUDA: address space reserved and physical memory mapped through the driver's VMM API (outside the cache). */
  vmmReservedBytes?: number;
  vmmMappedBytes?: number;
  vmmRanges?: number;
}

export interface TraceEntry {
  op: 'alloc' | 'free';
  /** Allocation id: a free names the id of its alloc. */
  id: number;
  /** Requested bytes (for a free: the size of the allocation it frees). */
  size: number;
  stream: string;
  /** Milliseconds since startRecording(). */
  t: number;
}

function fmtBytes(n: number): string {
  if (!Number.isFinite(n)) return String(n);
  const abs = Math.abs(n);
  if (abs >= 2 ** 40) return `${(n / 2 ** 40).toFixed(2)} TiB`;
  if (abs >= 1 << 30) return `${(n / 2 ** 30).toFixed(2)} GiB`;
  if (abs >= 1 << 20) return `${(n / 2 ** 20).toFixed(2)} MiB`;
  if (abs >= 1 << 10) return `${(n / 2 ** 10).toFixed(2)} KiB`;
  return `${n} B`;
}
export { fmtBytes as formatBytes };

function isOomError(e: unknown): boolean {
  if (e instanceof OutOfMemoryError) return true;
  const msg = e instanceof Error ? e.message : String(e);
  return /out of memory|OUT_OF_MEMORY/i.test(msg);
}

export class CachingAllocator {
  private readonly raw: RawAllocator;
  private readonly maxSplitSize: number;
  private memoryFraction: number;
  private readonly deviceName: string;
  private readonly events: StreamEvents | undefined;

  private readonly smallPools = new Map<StreamKey, BlockPool>();
  private readonly largePools = new Map<StreamKey, BlockPool>();
  /** Active blocks by address as a number (device addresses are < 2^53; number keys hash faster than bigints). */
  private readonly active = new Map<number, Block>();
  private readonly segments = new Map<bigint, Segment>();
  /** Blocks freed by the caller, waiting for events on other streams. */
  private pending: { block: Block; events: unknown[] }[] = [];
  /**
   * Freed small blocks by exact size (LIFO), not yet returned to their pool: a loop that frees and
   * allocates the same sizes (small ops) skips the best-fit search, splitting and coalescing. Any
   * other request, and every reader of the block structure (stats, snapshot, emptyCache), first
   * drains them (really frees them, coalescing as always), so only exact-size reuse sees them.
   */
  private readonly quick = new Map<number, Block[]>();
  private quickCount = 0;

  private allocated = 0;
  private peakAllocated = 0;
  private requested = 0;
  private reserved = 0;
  private peakReserved = 0;
  private pendingBytes = 0;
  private allocCount = 0;
  private freeCount = 0;
  private rawAllocs = 0;
  private rawFrees = 0;
  private rawAllocFailures = 0;
  private ooms = 0;
  private nextId = 1;

  private recording: TraceEntry[] | null = null;
  private recordT0 = 0;

  constructor(raw: RawAllocator, options: CachingAllocatorOptions = {}) {
    this.raw = raw;
    this.maxSplitSize = options.maxSplitSize ?? Infinity;
    this.memoryFraction = options.memoryFraction ?? 1;
    this.deviceName = options.deviceName ?? 'device';
    this.events = options.events;
    if (!(this.memoryFraction > 0 && this.memoryFraction <= 1)) {
      throw new ValueError('CachingAllocator', `memoryFraction must be in (0, 1], got ${this.memoryFraction}`);
    }
  }

  // ---------------------------------------------------------------------------------------
  // allocation

  /** Allocate `bytes` on `stream`; returns the device address. Throws OutOfMemoryError. */
  malloc(bytes: number, stream: StreamKey = 0): bigint {
    if (!Number.isSafeInteger(bytes) || bytes < 0) {
      throw new ValueError('cuda.malloc', `size must be a non-negative integer number of bytes, got ${bytes}`);
    }
    if (this.pending.length > 0) this.processPending();
    const size = roundSize(bytes);
    if (this.quickCount > 0) {
      const q = this.quick.get(size);
      const b = q !== undefined && q.length > 0 ? q[q.length - 1]! : undefined;
      if (b !== undefined && b.stream === stream) {
        q!.pop();
        this.quickCount--;
        return this.handOut(b, bytes);
      }
      this.drainQuick();
    }
    const small = size <= SMALL_SIZE;
    const pool = this.poolFor(small, stream);

    let block = this.findFree(pool, size);
    if (block === null) {
      block = this.allocSegment(size, small, stream, bytes);
    } else {
      pool.remove(block);
    }

    // split
    const remaining = block.size - size;
    if (this.shouldSplit(block, remaining)) {
      const rest: Block = {
        ptr: block.ptr + BigInt(size),
        size: remaining,
        requested: 0,
        stream,
        small,
        segment: block.segment,
        prev: block,
        next: block.next,
        allocated: false,
        id: -1,
        streamUses: null,
      };
      if (block.next) block.next.prev = rest;
      block.next = rest;
      block.size = size;
      pool.insert(rest);
    }
    return this.handOut(block, bytes);
  }

  /** Mark `block` allocated for a request of `bytes`: counters, active map, trace. */
  private handOut(block: Block, bytes: number): bigint {
    block.allocated = true;
    block.requested = bytes;
    block.id = this.nextId++;
    this.active.set(Number(block.ptr), block);
    this.allocated += block.size;
    this.requested += bytes;
    if (this.allocated > this.peakAllocated) this.peakAllocated = this.allocated;
    this.allocCount++;
    if (this.recording) {
      this.recording.push({ op: 'alloc', id: block.id, size: bytes, stream: String(block.stream), t: performance.now() - this.recordT0 });
    }
    return block.ptr;
  }

  /** Return a block to the cache. The pointer must come from malloc() and not be freed yet. */
  free(ptr: bigint): void {
    const key = Number(ptr);
    const block = this.active.get(key);
    if (block === undefined || block.ptr !== ptr) {
      throw new ValueError('cuda.free', `0x${ptr.toString(16)} is not an active allocation of this allocator (double free?)`);
    }
    this.active.delete(key);
    this.freeCount++;
    this.allocated -= block.size;
    this.requested -= block.requested;
    if (this.recording) {
      this.recording.push({ op: 'free', id: block.id, size: block.requested, stream: String(block.stream), t: performance.now() - this.recordT0 });
    }
    if (block.streamUses && block.streamUses.size > 0 && this.events) {
      const evs: unknown[] = [];
      for (const s of block.streamUses) evs.push(this.events.record(s));
      block.streamUses = null;
      this.pending.push({ block, events: evs });
      this.pendingBytes += block.size;
      return;
    }
    block.streamUses = null;
    if (block.small) {
      // stays marked allocated in its segment (no coalescing) until drained or reused
      block.requested = 0;
      block.id = -1;
      const q = this.quick.get(block.size);
      if (q === undefined) this.quick.set(block.size, [block]);
      else q.push(block);
      this.quickCount++;
      return;
    }
    this.freeBlock(block);
  }

  /** Return the exact-size free lists' blocks to their pools. */
  private drainQuick(): void {
    if (this.quickCount === 0) return;
    for (const q of this.quick.values()) {
      for (const b of q) this.freeBlock(b);
      q.length = 0;
    }
    this.quickCount = 0;
  }

  /** Declare that `ptr` is (also) used by work on `stream`; its reuse waits until that work is done. */
  recordStream(ptr: bigint, stream: StreamKey): void {
    const block = this.active.get(Number(ptr));
    if (block === undefined || block.ptr !== ptr) throw new ValueError('cuda.recordStream', `0x${ptr.toString(16)} is not an active allocation`);
    if (stream === block.stream) return;
    if (!this.events) {
      throw new ValueError('cuda.recordStream', 'this allocator was created without an events interface, so cross-stream use cannot be tracked');
    }
    (block.streamUses ??= new Set()).add(stream);
  }

  /** Size (rounded) of an active allocation, or undefined. */
  blockSize(ptr: bigint): number | undefined {
    const b = this.active.get(Number(ptr));
    return b !== undefined && b.ptr === ptr ? b.size : undefined;
  }

  /** Release every wholly free cached segment to the raw allocator. Returns the bytes released. */
  emptyCache(): number {
    this.drainQuick();
    this.processPending();
    return this.releaseAllFree();
  }

  /** Cap reserved memory at `fraction` of the device's total memory (needs raw.memInfo). */
  setMemoryFraction(fraction: number): void {
    if (!(fraction > 0 && fraction <= 1)) throw new ValueError('cuda.setMemoryFraction', `fraction must be in (0, 1], got ${fraction}`);
    this.memoryFraction = fraction;
  }

  getMemoryFraction(): number {
    return this.memoryFraction;
  }

  // ---------------------------------------------------------------------------------------
  // statistics

  memoryStats(): MemoryStats {
    this.drainQuick();
    let largest = 0;
    let freeCached = 0;
    let inactiveSplit = 0;
    const scan = (pools: Map<StreamKey, BlockPool>): void => {
      for (const pool of pools.values()) {
        for (const b of pool.blocks) {
          freeCached += b.size;
          if (b.size > largest) largest = b.size;
          if (b.prev !== null || b.next !== null) inactiveSplit += b.size;
        }
      }
    };
    scan(this.smallPools);
    scan(this.largePools);
    return {
      allocatedBytes: this.allocated,
      peakAllocatedBytes: this.peakAllocated,
      requestedBytes: this.requested,
      reservedBytes: this.reserved,
      peakReservedBytes: this.peakReserved,
      activeBlocks: this.active.size + this.pending.length,
      segments: this.segments.size,
      allocCount: this.allocCount,
      freeCount: this.freeCount,
      rawAllocs: this.rawAllocs,
      rawFrees: this.rawFrees,
      rawAllocFailures: this.rawAllocFailures,
      ooms: this.ooms,
      freeReservedBytes: freeCached,
      largestFreeBlock: largest,
      inactiveSplitBytes: inactiveSplit,
      fragmentation: freeCached > 0 ? 1 - largest / freeCached : 0,
      pendingFreeBytes: this.pendingBytes,
    };
  }

  /** Reset peak counters to the current values. */
  resetPeakStats(): void {
    this.peakAllocated = this.allocated;
    this.peakReserved = this.reserved;
  }

  /** A snapshot of segments and their blocks (for debugging and tests). */
  snapshot(): { ptr: bigint; size: number; stream: StreamKey; pool: 'small' | 'large'; blocks: { ptr: bigint; size: number; allocated: boolean; requested: number }[] }[] {
    this.drainQuick();
    const out = [];
    for (const seg of this.segments.values()) {
      const blocks = [];
      for (let b: Block | null = seg.head; b; b = b.next) {
        blocks.push({ ptr: b.ptr, size: b.size, allocated: b.allocated, requested: b.requested });
      }
      out.push({ ptr: seg.ptr, size: seg.size, stream: seg.stream, pool: seg.small ? ('small' as const) : ('large' as const), blocks });
    }
    out.sort((a, b) => (a.ptr < b.ptr ? -1 : a.ptr > b.ptr ? 1 : 0));
    return out;
  }

  /** Verify internal invariants; throws with a description when one is broken (tests). */
  checkInvariants(): void {
    this.drainQuick();
    let reserved = 0;
    let allocated = 0;
    let freeInPools = 0;
    const inPool = new Set<Block>();
    for (const pools of [this.smallPools, this.largePools]) {
      for (const pool of pools.values()) {
        for (let i = 0; i < pool.blocks.length; i++) {
          const b = pool.blocks[i]!;
          if (b.allocated) throw new Error('invariant: allocated block in a free pool');
          if (i > 0) {
            const p = pool.blocks[i - 1]!;
            if (p.size > b.size || (p.size === b.size && p.ptr >= b.ptr)) throw new Error('invariant: pool not sorted by (size, ptr)');
          }
          inPool.add(b);
          freeInPools += b.size;
        }
      }
    }
    const pendingSet = new Set(this.pending.map((p) => p.block));
    for (const seg of this.segments.values()) {
      reserved += seg.size;
      let expect = seg.ptr;
      let total = 0;
      let prev: Block | null = null;
      for (let b: Block | null = seg.head; b; b = b.next) {
        if (b.prev !== prev) throw new Error('invariant: broken prev link');
        if (b.ptr !== expect) throw new Error(`invariant: gap or overlap in segment 0x${seg.ptr.toString(16)}`);
        if (b.segment !== seg) throw new Error('invariant: block points to the wrong segment');
        if (b.size <= 0 || b.size % MIN_BLOCK_SIZE !== 0) throw new Error(`invariant: bad block size ${b.size}`);
        if (b.allocated) {
          if (!pendingSet.has(b)) {
            if (this.active.get(Number(b.ptr)) !== b) throw new Error('invariant: allocated block not in the active map');
            allocated += b.size;
          }
        } else {
          if (!inPool.has(b)) throw new Error('invariant: free block missing from its pool');
          if (prev && !prev.allocated) throw new Error('invariant: two adjacent free blocks were not coalesced');
        }
        expect = b.ptr + BigInt(b.size);
        total += b.size;
        prev = b;
      }
      if (total !== seg.size) throw new Error('invariant: blocks do not cover the segment');
    }
    if (reserved !== this.reserved) throw new Error(`invariant: reserved ${this.reserved} != sum of segments ${reserved}`);
    if (allocated !== this.allocated) throw new Error(`invariant: allocated ${this.allocated} != sum of active blocks ${allocated}`);
    if (freeInPools + allocated + this.pendingBytes !== reserved) throw new Error('invariant: free + allocated + pending != reserved');
    if (inPool.size !== [...this.smallPools.values(), ...this.largePools.values()].reduce((n, p) => n + p.blocks.length, 0)) {
      throw new Error('invariant: a block appears twice in the pools');
    }
  }

  // ---------------------------------------------------------------------------------------
  // recording

  startRecording(): void {
    this.recording = [];
    this.recordT0 = performance.now();
  }

  /** Stop recording and return the entries recorded since startRecording(). */
  stopRecording(): TraceEntry[] {
    const r = this.recording ?? [];
    this.recording = null;
    return r;
  }

  /**
   * Pools (stream keys) whose free blocks belong to a captured CUDA graph: its replays write them, so
   * they are never released (emptyCache, out-of-memory retries) nor handed to other streams while the
   * key is here. releasePrivatePool() ends that and returns the pool's wholly free segments.
   */
  private readonly privatePools = new Set<StreamKey>();

  /** Marks `key` as a graph's private pool (see privatePools). */
  retainPrivatePool(key: StreamKey): void { this.privatePools.add(key); }

  /** The graph is gone: its pool's wholly free segments go back to the device; returns the bytes released. */
  releasePrivatePool(key: StreamKey): number {
    this.privatePools.delete(key);
    this.drainQuick();
    let released = 0;
    for (const seg of [...this.segments.values()]) {
      const b = seg.head;
      if (seg.stream === key && !b.allocated && b.next === null) {
        this.poolFor(seg.small, seg.stream).remove(b);
        released += this.releaseSegment(seg);
      }
    }
    return released;
  }

  /** Bytes handed out and not freed (cheap: no drain of the quick-reuse lists, unlike memoryStats()). */
  get allocatedBytes(): number { return this.allocated; }

  get isRecording(): boolean {
    return this.recording !== null;
  }

  // ---------------------------------------------------------------------------------------
  // internals

  private poolFor(small: boolean, stream: StreamKey): BlockPool {
    const pools = small ? this.smallPools : this.largePools;
    let p = pools.get(stream);
    if (p === undefined) {
      p = new BlockPool();
      pools.set(stream, p);
    }
    return p;
  }

  private findFree(pool: BlockPool, size: number): Block | null {
    const b = pool.bestFit(size);
    if (b === null) return null;
    if (this.maxSplitSize !== Infinity) {
      // Do not hand an unsplittable oversize block to a small request, nor a much larger one.
      if (size < this.maxSplitSize && b.size >= this.maxSplitSize) return null;
      if (size >= this.maxSplitSize && b.size >= size + LARGE_BUFFER) return null;
    }
    return b;
  }

  private shouldSplit(block: Block, remaining: number): boolean {
    if (block.size > this.maxSplitSize) return false;
    return block.small ? remaining >= MIN_BLOCK_SIZE : remaining > SMALL_SIZE;
  }

  private deviceMem(): { free: number; total: number } | undefined {
    try {
      return this.raw.memInfo?.();
    } catch {
      return undefined;
    }
  }

  private allocSegment(size: number, small: boolean, stream: StreamKey, requestedBytes: number): Block {
    const segSize = segmentSizeFor(size);
    if (this.memoryFraction < 1) {
      const mi = this.deviceMem();
      if (mi && this.reserved + segSize > this.memoryFraction * mi.total) {
        this.releaseAllFree();
        if (this.reserved + segSize > this.memoryFraction * mi.total) {
          throw this.oomError(requestedBytes, size, segSize, stream, null);
        }
      }
    }
    let ptr: bigint;
    try {
      ptr = this.raw.alloc(segSize);
    } catch (e) {
      if (!isOomError(e)) throw e;
      this.rawAllocFailures++;
      this.releaseAllFree();
      try {
        ptr = this.raw.alloc(segSize);
      } catch (e2) {
        if (!isOomError(e2)) throw e2;
        this.rawAllocFailures++;
        throw this.oomError(requestedBytes, size, segSize, stream, e2);
      }
    }
    this.rawAllocs++;
    this.reserved += segSize;
    if (this.reserved > this.peakReserved) this.peakReserved = this.reserved;
    const block: Block = {
      ptr,
      size: segSize,
      requested: 0,
      stream,
      small,
      segment: undefined as unknown as Segment,
      prev: null,
      next: null,
      allocated: false,
      id: -1,
      streamUses: null,
    };
    const seg: Segment = { ptr, size: segSize, stream, small, head: block };
    block.segment = seg;
    this.segments.set(ptr, seg);
    return block;
  }

  private releaseSegment(seg: Segment): number {
    this.segments.delete(seg.ptr);
    this.reserved -= seg.size;
    this.rawFrees++;
    this.raw.free(seg.ptr);
    return seg.size;
  }

  /** Release every wholly free segment (all streams); used on raw OOM. */
  private releaseAllFree(): number {
    this.drainQuick();
    let released = 0;
    for (const seg of [...this.segments.values()]) {
      const b = seg.head;
      if (!b.allocated && b.next === null && !this.privatePools.has(seg.stream)) {
        this.poolFor(seg.small, seg.stream).remove(b);
        released += this.releaseSegment(seg);
      }
    }
    return released;
  }

  private freeBlock(block: Block): void {
    block.allocated = false;
    block.requested = 0;
    block.id = -1;
    const pool = this.poolFor(block.small, block.stream);
    // coalesce with the previous free neighbour
    const prev = block.prev;
    if (prev !== null && !prev.allocated) {
      pool.remove(prev);
      prev.size += block.size;
      prev.next = block.next;
      if (block.next) block.next.prev = prev;
      block = prev;
    }
    const next = block.next;
    if (next !== null && !next.allocated) {
      pool.remove(next);
      block.size += next.size;
      block.next = next.next;
      if (next.next) next.next.prev = block;
    }
    if (block.prev === null) block.segment.head = block;
    pool.insert(block);
  }

  private processPending(): void {
    if (this.pending.length === 0 || !this.events) return;
    const still: { block: Block; events: unknown[] }[] = [];
    for (const p of this.pending) {
      const events = this.events;
      if (p.events.every((e) => events.query(e))) {
        for (const e of p.events) events.destroy?.(e);
        this.pendingBytes -= p.block.size;
        this.freeBlock(p.block);
      } else {
        still.push(p);
      }
    }
    this.pending = still;
  }

  private oomError(requested: number, rounded: number, segSize: number, stream: StreamKey, cause: unknown): OutOfMemoryError {
    this.ooms++;
    const st = this.memoryStats();
    const mi = this.deviceMem();
    const parts: string[] = [];
    parts.push(
      `out of memory on ${this.deviceName}: tried to allocate ${fmtBytes(requested)} (rounded to ${fmtBytes(rounded)}, ` +
        `needing a new ${fmtBytes(segSize)} segment) on stream ${String(stream)}.`,
    );
    parts.push(`In use by tensors: ${fmtBytes(st.allocatedBytes)} in ${st.activeBlocks} blocks (peak ${fmtBytes(st.peakAllocatedBytes)}).`);
    parts.push(
      `Reserved by the caching allocator: ${fmtBytes(st.reservedBytes)} in ${st.segments} segments, of which ` +
        `${fmtBytes(st.freeReservedBytes)} is cached and free (largest free block ${fmtBytes(st.largestFreeBlock)}, ` +
        `fragmentation ${(st.fragmentation * 100).toFixed(1)}%).`,
    );
    if (mi) {
      parts.push(`Device memory: ${fmtBytes(mi.free)} free of ${fmtBytes(mi.total)} total.`);
      if (this.memoryFraction < 1) {
        parts.push(`Memory fraction cap: ${this.memoryFraction} = ${fmtBytes(this.memoryFraction * mi.total)}.`);
      }
    } else {
      parts.push('Device memory: total/free unknown.');
    }
    if (cause !== null) parts.push(`Driver said: ${cause instanceof Error ? cause.message : String(cause)}.`);
    parts.push(
      'Try: free tensors you no longer need (tensor.dispose() / nbx.scope(); tensors never disposed return only after a garbage collection, which the CUDA backend has requested, and an await), release the cached memory with ' +
        'nbx.cuda.emptyCache() (other processes need it), use a smaller batch size, or set a memory fraction ' +
        '(nbx.cuda.setMemoryFraction()) when sharing the device.',
    );
    return new OutOfMemoryError('cuda.malloc', parts.join(' '));
  }
}

// -------------------------------------------------------------------------------------------
// fake raw allocator, traces and replay

/**
 * A raw allocator for tests and offline replay: a bump allocator over a virtual address
 * space with a capacity; throws OutOfMemoryError when the live bytes would exceed it.
 * Addresses are never reused, so use-after-free bugs show up as unknown pointers.
 */
export class FakeRawAllocator implements RawAllocator {
  readonly capacity: number;
  private nextAddr: bigint;
  readonly live = new Map<bigint, number>();
  liveBytes = 0;
  allocCalls = 0;
  freeCalls = 0;
  failedCalls = 0;
  /** When > 0, the next N alloc() calls fail regardless of capacity (tests). */
  failNext = 0;

  constructor(capacity = Infinity, base = 0x7f0000000000n) {
    this.capacity = capacity;
    this.nextAddr = base;
  }

  alloc(bytes: number): bigint {
    this.allocCalls++;
    if (this.failNext > 0) {
      this.failNext--;
      this.failedCalls++;
      throw new OutOfMemoryError('fake.alloc', `injected failure for ${bytes} bytes`);
    }
    if (this.liveBytes + bytes > this.capacity) {
      this.failedCalls++;
      throw new OutOfMemoryError('fake.alloc', `out of memory: ${bytes} bytes requested, ${this.capacity - this.liveBytes} free`);
    }
    const p = this.nextAddr;
    // Leave a gap so that distinct segments are never contiguous.
    this.nextAddr += BigInt(bytes) + 0x100000n;
    this.live.set(p, bytes);
    this.liveBytes += bytes;
    return p;
  }

  free(ptr: bigint): void {
    const n = this.live.get(ptr);
    if (n === undefined) throw new Error(`fake.free: unknown pointer 0x${ptr.toString(16)}`);
    this.live.delete(ptr);
    this.liveBytes -= n;
    this.freeCalls++;
  }

  memInfo(): { free: number; total: number } {
    const total = Number.isFinite(this.capacity) ? this.capacity : 2 ** 50;
    return { free: total - this.liveBytes, total };
  }
}

export interface ReplayOptions {
  /** Capacity of the fake device (bytes). Default: unlimited. */
  capacity?: number;
  allocator?: CachingAllocatorOptions;
  /** Call emptyCache() after every free (to measure the no-cache baseline). */
  emptyCacheAfterFree?: boolean;
}

export interface ReplayReport {
  entries: number;
  peakReservedBytes: number;
  peakAllocatedBytes: number;
  /** Fragmentation (see MemoryStats) at the moment reserved memory peaked. */
  fragmentationAtPeak: number;
  /** Highest fragmentation seen while at least 1 MiB was cached free. */
  maxFragmentation: number;
  /** peakReserved / peakAllocated − 1: the cache's overhead at its worst. */
  overhead: number;
  rawAllocs: number;
  rawFrees: number;
  ooms: number;
  /** Index of the first entry that ran out of memory, if any. */
  firstOomAt: number | null;
  final: MemoryStats;
}

/** Run a recorded trace against a fresh allocator over a FakeRawAllocator. */
export function replayTrace(entries: readonly TraceEntry[], options: ReplayOptions = {}): ReplayReport {
  const raw = new FakeRawAllocator(options.capacity ?? Infinity);
  const a = new CachingAllocator(raw, options.allocator);
  const ptrs = new Map<number, bigint>();
  let fragAtPeak = 0;
  let maxFrag = 0;
  let peakSeen = -1;
  let ooms = 0;
  let firstOomAt: number | null = null;
  // Streams are opaque labels in a trace: map each distinct label to its own key.
  const streamIds = new Map<string, number>();
  const streamKey = (s: string): StreamKey => {
    let k = streamIds.get(s);
    if (k === undefined) {
      k = streamIds.size;
      streamIds.set(s, k);
    }
    return k;
  };
  for (let i = 0; i < entries.length; i++) {
    const e = entries[i]!;
    if (e.op === 'alloc') {
      try {
        ptrs.set(e.id, a.malloc(e.size, streamKey(e.stream)));
      } catch (err) {
        if (!(err instanceof OutOfMemoryError)) throw err;
        ooms++;
        firstOomAt ??= i;
      }
    } else {
      const p = ptrs.get(e.id);
      if (p === undefined) continue; // its alloc failed or was not recorded
      ptrs.delete(e.id);
      a.free(p);
      if (options.emptyCacheAfterFree) a.emptyCache();
    }
    const st = a.memoryStats();
    if (st.reservedBytes > peakSeen) {
      peakSeen = st.reservedBytes;
      fragAtPeak = st.fragmentation;
    }
    if (st.freeReservedBytes >= 1 << 20 && st.fragmentation > maxFrag) maxFrag = st.fragmentation;
  }
  const final = a.memoryStats();
  return {
    entries: entries.length,
    peakReservedBytes: final.peakReservedBytes,
    peakAllocatedBytes: final.peakAllocatedBytes,
    fragmentationAtPeak: fragAtPeak,
    maxFragmentation: maxFrag,
    overhead: final.peakAllocatedBytes > 0 ? final.peakReservedBytes / final.peakAllocatedBytes - 1 : 0,
    rawAllocs: final.rawAllocs,
    rawFrees: final.rawFrees,
    ooms,
    firstOomAt,
    final,
  };
}

const TSV_HEADER = 'op\tid\tsize\tstream\tt';

/** Serialize a trace as TSV (header line, then one entry per line). */
export function traceToTSV(entries: readonly TraceEntry[]): string {
  const lines = [TSV_HEADER];
  for (const e of entries) lines.push(`${e.op}\t${e.id}\t${e.size}\t${e.stream}\t${e.t.toFixed(3)}`);
  return lines.join('\n') + '\n';
}

/** Parse a TSV trace; throws FormatError naming the bad line. */
export function traceFromTSV(text: string, source = 'trace'): TraceEntry[] {
  const lines = text.split(/\r?\n/);
  if (lines[0]?.trim() !== TSV_HEADER) {
    throw new FormatError('loadTrace', `${source}: line 1 must be the header "${TSV_HEADER.replace(/\t/g, '\\t')}"`);
  }
  const out: TraceEntry[] = [];
  for (let i = 1; i < lines.length; i++) {
    const line = lines[i]!;
    if (line.trim() === '') continue;
    const f = line.split('\t');
    const bad = (why: string): never => {
      throw new FormatError('loadTrace', `${source}: line ${i + 1}: ${why}: ${JSON.stringify(line)}`);
    };
    if (f.length !== 5) bad(`expected 5 tab-separated fields, got ${f.length}`);
    const [op, id, size, stream, t] = f as [string, string, string, string, string];
    if (op !== 'alloc' && op !== 'free') bad(`op must be alloc or free`);
    const idN = Number(id);
    const sizeN = Number(size);
    const tN = Number(t);
    if (!Number.isSafeInteger(idN)) bad('id is not an integer');
    if (!Number.isSafeInteger(sizeN) || sizeN < 0) bad('size is not a non-negative integer');
    if (!Number.isFinite(tN)) bad('t is not a number');
    out.push({ op: op as 'alloc' | 'free', id: idN, size: sizeN, stream, t: tN });
  }
  return out;
}

export function saveTrace(entries: readonly TraceEntry[], path: string): void {
  writeFileSync(path, traceToTSV(entries));
}

export function loadTrace(path: string): TraceEntry[] {
  return traceFromTSV(readFileSync(path, 'utf8'), path);
}
