import { strict as assert } from 'node:assert';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import { FormatError, OutOfMemoryError, ValueError } from '../src/errors.js';
import {
  CachingAllocator,
  FakeRawAllocator,
  LARGE_BUFFER,
  SMALL_BUFFER,
  type StreamEvents,
  type TraceEntry,
  loadTrace,
  replayTrace,
  roundSize,
  saveTrace,
  segmentSizeFor,
  traceFromTSV,
  traceToTSV,
} from '../src/memory/caching_allocator.js';

const KiB = 1024;
const MiB = 1024 * 1024;

function fresh(capacity = Infinity, opts = {}): { a: CachingAllocator; raw: FakeRawAllocator } {
  const raw = new FakeRawAllocator(capacity);
  return { a: new CachingAllocator(raw, { deviceName: 'fake:0', ...opts }), raw };
}

describe('size policy', () => {
  it('rounds to 512 B with a 512 B minimum', () => {
    assert.equal(roundSize(0), 512);
    assert.equal(roundSize(1), 512);
    assert.equal(roundSize(512), 512);
    assert.equal(roundSize(513), 1024);
    assert.equal(roundSize(1000), 1024);
  });
  it('sizes segments like PyTorch', () => {
    assert.equal(segmentSizeFor(512), SMALL_BUFFER);
    assert.equal(segmentSizeFor(1 * MiB), SMALL_BUFFER);
    assert.equal(segmentSizeFor(1 * MiB + 512), LARGE_BUFFER);
    assert.equal(segmentSizeFor(9 * MiB), LARGE_BUFFER);
    assert.equal(segmentSizeFor(10 * MiB), 10 * MiB);
    assert.equal(segmentSizeFor(11 * MiB), 12 * MiB);
    assert.equal(segmentSizeFor(18 * MiB + 1), 20 * MiB);
  });
});

describe('CachingAllocator: small pool', () => {
  it('serves small requests from one 2 MiB segment, splitting it', () => {
    const { a, raw } = fresh();
    const p1 = a.malloc(1000);
    const p2 = a.malloc(1000);
    assert.equal(p2 - p1, 1024n, 'second block follows the first in the same segment');
    const st = a.memoryStats();
    assert.equal(st.allocatedBytes, 2048);
    assert.equal(st.requestedBytes, 2000);
    assert.equal(st.reservedBytes, SMALL_BUFFER);
    assert.equal(st.segments, 1);
    assert.equal(st.rawAllocs, 1);
    assert.equal(raw.allocCalls, 1);
    assert.equal(st.activeBlocks, 2);
    assert.equal(a.blockSize(p1), 1024);
    a.checkInvariants();
  });

  it('splits when the remainder is >= 512 B and reuses freed blocks best-fit', () => {
    const { a } = fresh();
    const p1 = a.malloc(1024);
    const guard = a.malloc(512);
    a.free(p1);
    const q = a.malloc(512); // best fit: the freed 1024 block (not the big tail), split in two
    assert.equal(q, p1);
    const r = a.malloc(512); // the 512 B remainder
    assert.equal(r, p1 + 512n);
    assert.ok(guard > r);
    a.checkInvariants();
  });

  it('coalesces neighbours on free and emptyCache returns wholly free segments', () => {
    const { a, raw } = fresh();
    const x = a.malloc(4096);
    const y = a.malloc(4096);
    const z = a.malloc(4096);
    a.free(y);
    a.free(x); // x+y coalesce
    let snap = a.snapshot();
    assert.equal(snap.length, 1);
    assert.deepEqual(
      snap[0]!.blocks.map((b) => [b.size, b.allocated]),
      [
        [8192, false],
        [4096, true],
        [SMALL_BUFFER - 12288, false],
      ],
    );
    a.free(z); // everything merges back into one block
    snap = a.snapshot();
    assert.equal(snap[0]!.blocks.length, 1);
    assert.equal(snap[0]!.blocks[0]!.size, SMALL_BUFFER);
    a.checkInvariants();
    assert.equal(a.memoryStats().reservedBytes, SMALL_BUFFER, 'memory stays cached after free');
    assert.equal(raw.freeCalls, 0);
    assert.equal(a.emptyCache(), SMALL_BUFFER);
    const st = a.memoryStats();
    assert.equal(st.reservedBytes, 0);
    assert.equal(st.segments, 0);
    assert.equal(st.rawFrees, 1);
    assert.equal(raw.liveBytes, 0);
    a.checkInvariants();
  });

  it('emptyCache keeps segments that still hold a live block', () => {
    const { a } = fresh();
    const p = a.malloc(100);
    const big = a.malloc(3 * MiB);
    a.free(big);
    assert.equal(a.emptyCache(), LARGE_BUFFER);
    assert.equal(a.memoryStats().reservedBytes, SMALL_BUFFER);
    a.free(p);
    assert.equal(a.emptyCache(), SMALL_BUFFER);
    a.checkInvariants();
  });

  it('best fit: smallest block first, then lowest address', () => {
    const { a } = fresh();
    const x1 = a.malloc(4096);
    a.malloc(512);
    const x2 = a.malloc(4096);
    a.malloc(512);
    const x3 = a.malloc(8192);
    a.malloc(512);
    a.free(x3);
    a.free(x2);
    a.free(x1);
    assert.equal(a.malloc(4096), x1, 'two 4 KiB candidates: the lower address wins');
    assert.equal(a.malloc(4096), x2);
    assert.equal(a.malloc(6000), x3, 'the 8 KiB block beats the large tail');
    a.checkInvariants();
  });
});

describe('CachingAllocator: large pool', () => {
  it('uses 20 MiB segments below 10 MiB and splits when > 1 MiB remains', () => {
    const { a } = fresh();
    const p = a.malloc(3 * MiB);
    let st = a.memoryStats();
    assert.equal(st.reservedBytes, LARGE_BUFFER);
    const q = a.malloc(11_000_000); // fits in the 17 MiB remainder of the first segment
    assert.equal(q, p + BigInt(3 * MiB));
    st = a.memoryStats();
    assert.equal(st.segments, 1);
    assert.equal(st.allocatedBytes, 3 * MiB + roundSize(11_000_000));
    a.checkInvariants();
  });

  it('does not split when the remainder is at most 1 MiB', () => {
    const { a } = fresh();
    const p = a.malloc(19.5 * MiB);
    assert.equal(a.blockSize(p), LARGE_BUFFER, 'the whole segment is handed out');
    assert.equal(a.memoryStats().allocatedBytes, LARGE_BUFFER);
    a.free(p);
    a.checkInvariants();
  });

  it('rounds big segments to 2 MiB', () => {
    const { a, raw } = fresh();
    a.malloc(18 * MiB + 1);
    assert.equal(a.memoryStats().reservedBytes, 20 * MiB);
    assert.equal([...raw.live.values()][0], 20 * MiB);
  });

  it('keeps small and large pools apart', () => {
    const { a } = fresh();
    const big = a.malloc(3 * MiB);
    a.free(big);
    a.malloc(1000); // must not carve the cached 20 MiB large block
    const st = a.memoryStats();
    assert.equal(st.segments, 2);
    assert.equal(st.reservedBytes, LARGE_BUFFER + SMALL_BUFFER);
  });

  it('honours maxSplitSize', () => {
    const { a } = fresh(Infinity, { maxSplitSize: 16 * MiB });
    const p = a.malloc(30 * MiB);
    a.free(p);
    const q = a.malloc(2 * MiB); // must not take the 30 MiB oversize block
    assert.notEqual(q, p);
    assert.equal(a.memoryStats().segments, 2);
    const r = a.malloc(29 * MiB); // oversize request may reuse it, unsplit
    assert.equal(r, p);
    assert.equal(a.blockSize(r), 30 * MiB);
    a.checkInvariants();
  });
});

describe('CachingAllocator: streams', () => {
  it('keeps per-stream pools', () => {
    const { a } = fresh();
    const p = a.malloc(4096, 1);
    a.free(p);
    const q = a.malloc(4096, 2);
    assert.notEqual(q, p, 'a block freed on stream 1 is not handed to stream 2');
    assert.equal(a.memoryStats().segments, 2);
    assert.equal(a.malloc(4096, 1), p);
    a.checkInvariants();
  });

  it('defers the reuse of blocks used on other streams until their events complete', () => {
    let done = false;
    const recorded: unknown[] = [];
    const events: StreamEvents = {
      record: (s) => {
        const ev = { s };
        recorded.push(ev);
        return ev;
      },
      query: () => done,
    };
    const { a } = fresh(Infinity, { events });
    const p = a.malloc(4096, 0);
    a.recordStream(p, 7);
    a.recordStream(p, 0); // own stream: ignored
    a.free(p);
    assert.equal(recorded.length, 1);
    let st = a.memoryStats();
    assert.equal(st.pendingFreeBytes, 4096);
    assert.equal(st.allocatedBytes, 0);
    const q = a.malloc(4096, 0);
    assert.notEqual(q, p, 'still in use on stream 7');
    a.checkInvariants();
    done = true;
    const r = a.malloc(4096, 0);
    assert.equal(r, p, 'reused once stream 7 is done');
    st = a.memoryStats();
    assert.equal(st.pendingFreeBytes, 0);
    a.checkInvariants();
  });

  it('recordStream without an events interface is an error', () => {
    const { a } = fresh();
    const p = a.malloc(10);
    assert.throws(() => a.recordStream(p, 3), ValueError);
  });
});

describe('CachingAllocator: stats', () => {
  it('tracks peaks, counts, largest free block and fragmentation', () => {
    const { a } = fresh();
    const ps = [a.malloc(4096), a.malloc(4096), a.malloc(4096), a.malloc(4096)];
    a.free(ps[1]!);
    a.free(ps[3]!); // merges with the tail
    let st = a.memoryStats();
    assert.equal(st.peakAllocatedBytes, 4 * 4096);
    assert.equal(st.allocatedBytes, 2 * 4096);
    assert.equal(st.allocCount, 4);
    assert.equal(st.freeCount, 2);
    assert.equal(st.freeReservedBytes, SMALL_BUFFER - 2 * 4096);
    assert.equal(st.largestFreeBlock, SMALL_BUFFER - 3 * 4096);
    assert.ok(Math.abs(st.fragmentation - (1 - st.largestFreeBlock / st.freeReservedBytes)) < 1e-12);
    assert.equal(st.inactiveSplitBytes, st.freeReservedBytes);
    a.free(ps[0]!);
    a.free(ps[2]!);
    st = a.memoryStats();
    assert.equal(st.fragmentation, 0, 'one free block: no fragmentation');
    assert.equal(st.inactiveSplitBytes, 0, 'an unsplit segment is not an inactive split');
    assert.equal(st.peakAllocatedBytes, 4 * 4096);
    a.resetPeakStats();
    assert.equal(a.memoryStats().peakAllocatedBytes, 0);
  });

  it('rejects bad sizes and double frees', () => {
    const { a } = fresh();
    assert.throws(() => a.malloc(-1), ValueError);
    assert.throws(() => a.malloc(1.5), ValueError);
    const p = a.malloc(64);
    a.free(p);
    assert.throws(() => a.free(p), /not an active allocation/);
    assert.throws(() => a.free(12345n), ValueError);
  });
});

describe('CachingAllocator: out of memory', () => {
  it('frees cached segments and retries once when the raw allocation fails', () => {
    const { a, raw } = fresh(64 * MiB);
    const p = a.malloc(40 * MiB);
    a.free(p); // 40 MiB cached
    const q = a.malloc(50 * MiB); // 40 + 50 > 64: flush the cache, retry
    const st = a.memoryStats();
    assert.equal(st.rawAllocFailures, 1);
    assert.equal(st.rawFrees, 1);
    assert.equal(st.reservedBytes, 50 * MiB);
    assert.equal(raw.liveBytes, 50 * MiB);
    a.free(q);
    a.checkInvariants();
  });

  it('throws OutOfMemoryError with a useful message and stays consistent', () => {
    const { a, raw } = fresh(64 * MiB);
    const keep = a.malloc(50 * MiB);
    const small = a.malloc(1000);
    let err: unknown;
    try {
      a.malloc(30 * MiB);
    } catch (e) {
      err = e;
    }
    assert.ok(err instanceof OutOfMemoryError, `expected OutOfMemoryError, got ${String(err)}`);
    const msg = (err as Error).message;
    for (const want of [
      'tried to allocate 30.00 MiB',
      'In use by tensors: 50.00 MiB',
      'cached and free',
      'largest free block',
      'Device memory:',
      'of 64.00 MiB total',
      'dispose',
      'emptyCache',
      'smaller batch',
      'memory fraction',
      'fake:0',
    ]) {
      assert.ok(msg.includes(want), `OOM message lacks "${want}":\n${msg}`);
    }
    a.checkInvariants();
    const st = a.memoryStats();
    assert.equal(st.ooms, 1);
    assert.equal(st.allocatedBytes, 50 * MiB + 1024);
    assert.equal(st.activeBlocks, 2);
    // still usable: small requests fit in the cached small segment, and freeing makes room
    const s2 = a.malloc(2000);
    a.free(s2);
    a.free(keep);
    const big = a.malloc(30 * MiB);
    a.free(big);
    a.free(small);
    a.emptyCache();
    a.checkInvariants();
    assert.equal(a.memoryStats().reservedBytes, 0);
    assert.equal(raw.liveBytes, 0);
  });

  it('enforces a memory fraction', () => {
    const { a } = fresh(100 * MiB, { memoryFraction: 0.5 });
    assert.throws(() => a.malloc(60 * MiB), (e: unknown) => e instanceof OutOfMemoryError && /Memory fraction cap: 0.5/.test(e.message));
    const p = a.malloc(40 * MiB);
    a.free(p);
    a.setMemoryFraction(1);
    a.malloc(60 * MiB); // the cached 40 MiB segment gets released to make room if needed
    a.checkInvariants();
    assert.throws(() => a.setMemoryFraction(0), ValueError);
  });

  it('propagates raw allocator errors that are not out-of-memory', () => {
    const raw = new FakeRawAllocator();
    const boom = new Error('driver exploded');
    const a = new CachingAllocator({ alloc: () => raw.alloc(1) && (() => { throw boom; })(), free: (p) => raw.free(p) });
    assert.throws(() => a.malloc(100), /driver exploded/);
    assert.equal(a.memoryStats().reservedBytes, 0);
  });

  it('survives injected raw failures (retry path)', () => {
    const { a, raw } = fresh();
    raw.failNext = 1;
    const p = a.malloc(4096);
    assert.ok(p > 0n);
    raw.failNext = 2;
    assert.throws(() => a.malloc(3 * MiB), OutOfMemoryError);
    a.checkInvariants();
    assert.ok(a.malloc(3 * MiB) > 0n);
  });
});

describe('CachingAllocator: randomized', () => {
  it('keeps its invariants under a random workload', () => {
    let seed = 12345;
    const rnd = (): number => {
      seed = (seed * 1103515245 + 12345) & 0x7fffffff;
      return seed / 0x7fffffff;
    };
    const { a, raw } = fresh(512 * MiB);
    const live: bigint[] = [];
    let ooms = 0;
    for (let i = 0; i < 4000; i++) {
      if (live.length > 0 && rnd() < 0.45) {
        const j = Math.floor(rnd() * live.length);
        a.free(live[j]!);
        live.splice(j, 1);
      } else {
        const r = rnd();
        const size = r < 0.6 ? Math.floor(rnd() * 64 * KiB) : r < 0.9 ? Math.floor(rnd() * 4 * MiB) : Math.floor(rnd() * 48 * MiB);
        try {
          live.push(a.malloc(size, rnd() < 0.8 ? 0 : 1));
        } catch (e) {
          assert.ok(e instanceof OutOfMemoryError);
          ooms++;
        }
      }
      if (i % 97 === 0) a.checkInvariants();
      if (i % 1000 === 999) a.emptyCache();
    }
    a.checkInvariants();
    for (const p of live) a.free(p);
    a.emptyCache();
    a.checkInvariants();
    const st = a.memoryStats();
    assert.equal(st.allocatedBytes, 0);
    assert.equal(st.reservedBytes, 0);
    assert.equal(raw.liveBytes, 0);
    assert.equal(st.ooms, ooms);
  });
});

describe('CachingAllocator: recording and replay', () => {
  function workload(a: CachingAllocator): void {
    const ps: bigint[] = [];
    for (let i = 0; i < 50; i++) ps.push(a.malloc(((i * 7919) % 5000) * 1000 + 10, i % 3 === 0 ? 1 : 0));
    for (let i = 0; i < 50; i += 2) a.free(ps[i]!);
    for (let i = 0; i < 20; i++) ps.push(a.malloc(i * 100_000 + 1));
    for (let i = 1; i < 50; i += 2) a.free(ps[i]!);
  }

  it('records alloc/free entries', () => {
    const { a } = fresh();
    a.malloc(1);
    a.startRecording();
    assert.ok(a.isRecording);
    const p = a.malloc(1000, 3);
    a.free(p);
    const tr = a.stopRecording();
    assert.ok(!a.isRecording);
    assert.equal(tr.length, 2);
    assert.deepEqual(
      tr.map((e) => [e.op, e.size, e.stream]),
      [
        ['alloc', 1000, '3'],
        ['free', 1000, '3'],
      ],
    );
    assert.equal(tr[0]!.id, tr[1]!.id);
    assert.ok(tr[1]!.t >= tr[0]!.t);
  });

  it('replays a trace offline with the same peaks as the live run', () => {
    const { a } = fresh();
    a.startRecording();
    workload(a);
    const tr = a.stopRecording();
    const live = a.memoryStats();
    const rep = replayTrace(tr);
    assert.equal(rep.entries, tr.length);
    assert.equal(rep.peakReservedBytes, live.peakReservedBytes);
    assert.equal(rep.peakAllocatedBytes, live.peakAllocatedBytes);
    assert.equal(rep.rawAllocs, live.rawAllocs);
    assert.equal(rep.ooms, 0);
    assert.ok(rep.fragmentationAtPeak >= 0 && rep.fragmentationAtPeak <= 1);
    assert.ok(rep.overhead >= 0);
    // The no-cache baseline calls the raw allocator for every segment again.
    const base = replayTrace(tr, { emptyCacheAfterFree: true });
    assert.ok(base.rawAllocs > rep.rawAllocs, `${base.rawAllocs} > ${rep.rawAllocs}`);
    // With too little memory the replay reports where it ran out.
    const tight = replayTrace(tr, { capacity: 30 * MiB });
    assert.ok(tight.ooms > 0);
    assert.notEqual(tight.firstOomAt, null);
  });

  it('saves and loads traces as TSV', () => {
    const tr: TraceEntry[] = [
      { op: 'alloc', id: 1, size: 4096, stream: '0', t: 0.5 },
      { op: 'alloc', id: 2, size: 10, stream: '140000000', t: 1.25 },
      { op: 'free', id: 1, size: 4096, stream: '0', t: 2 },
    ];
    const tsv = traceToTSV(tr);
    assert.ok(tsv.startsWith('op\tid\tsize\tstream\tt\n'));
    assert.deepEqual(traceFromTSV(tsv), tr);
    const dir = mkdtempSync(join(tmpdir(), 'nbx-trace-'));
    try {
      const f = join(dir, 'trace.tsv');
      saveTrace(tr, f);
      assert.deepEqual(loadTrace(f), tr);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
    assert.throws(() => traceFromTSV('nope\n'), FormatError);
    assert.throws(() => traceFromTSV('op\tid\tsize\tstream\tt\nalloc\t1\t-5\t0\t0\n'), /line 2/);
    assert.throws(() => traceFromTSV('op\tid\tsize\tstream\tt\nmalloc\t1\t5\t0\t0\n'), FormatError);
  });
});
