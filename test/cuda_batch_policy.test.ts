// The launch batch's rebuild policy (src/backend/cuda/runtime/launch_batch.ts) without a GPU: a LaunchBatch
// whose compile is a cost model and whose flush only counts, fed real expressions. Checks that a loop's
// kind joins the module within a few dozen ops, that many kinds cost a bounded compile time, that a
// zero budget waits until the hot misses paid for the compile, and that the most used kinds win.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { LaunchBatch, type LaunchBatchStats } from '../src/backend/cuda/runtime/launch_batch.js';
import { Expr } from '../src/ir/expr.js';
import type { StridedRef } from '../src/backend/backend.js';
import type { CudaKernel } from '../src/backend/cuda/runtime/driver.js';

let available = true;
try {
  await import('koffi'); // the parameter block is natively allocated
} catch {
  available = false;
}

/** Modelled NVRTC cost: base + per kind (ms). */
const BASE = 200, PER_KIND = 40;

class ModelBatch extends LaunchBatch {
  readonly modules: number[] = [];
  constructor(env: Record<string, string | undefined>) {
    const ctx = { info: { maxThreadsPerBlock: 1024 }, pending: null as null | (() => void), flushPending(): void { const f = this.pending; this.pending = null; f?.(); } };
    super({ ctx, stream: {} } as never, env);
  }
  protected override compile(src: string): { kernel: CudaKernel; compiledMs: number } {
    const kinds = (src.match(/^__device__ __forceinline__ void ewb/gm) ?? []).length;
    this.modules.push(kinds);
    return { kernel: {} as CudaKernel, compiledMs: BASE + PER_KIND * kinds };
  }
  override flush(): void {
    const self = this as unknown as { ctx: { pending: unknown }; flushFn: unknown; count: number; pos: number; flushNo: number; batchKinds: unknown[]; stats: LaunchBatchStats };
    if (self.ctx.pending === self.flushFn) self.ctx.pending = null;
    if (self.count === 0) return;
    self.stats.batches++;
    self.stats.commands += self.count;
    self.count = 0; self.pos = 1; self.flushNo++; self.batchKinds = [];
  }
}

const ref = (dtype: 'float32' = 'float32'): StridedRef => ({ buf: { ptr: 0x10000n, bytes: 128 }, dtype, shape: [32], strides: [1], offset: 0 }) as StridedRef;
/** Distinct expressions: x * (i + 2) + 1 for i = 0, 1, ... */
const kindExpr = (i: number): Expr => Expr.load(0, 'float32').bin('mul', i + 2).bin('add', 1);
const run = (b: ModelBatch, e: Expr, times = 1): void => { for (let t = 0; t < times; t++) b.tryElementwise(e, [ref()], [], ref()); };

test('a loop kind joins the module within a few dozen ops; steady state compiles nothing', { skip: !available && 'koffi missing' }, () => {
  const b = new ModelBatch({});
  run(b, kindExpr(0), 40);
  assert.equal(b.stats.rebuilds, 1, JSON.stringify(b.stats));
  assert.equal(b.stats.kinds, 1);
  run(b, kindExpr(0), 1000);
  b.flush(); // commands count when submitted
  assert.equal(b.stats.rebuilds, 1);
  assert.ok(b.stats.commands >= 1000 && b.stats.direct < 40, JSON.stringify(b.stats));
});

test('many kinds (a test suite): compile time stays within the allowance', { skip: !available && 'koffi missing' }, () => {
  const b = new ModelBatch({});
  let ops = 0;
  for (let i = 0; i < 400; i++) { run(b, kindExpr(i), 6); ops += 6; } // each kind a candidate, then gone
  const allowance = 2000 + (ops * 4) / 1000;
  // one estimate may be wrong before the first measurement: the allowance plus one module
  assert.ok(b.stats.compileMs <= allowance + BASE + PER_KIND * (b.stats.kinds + 1), JSON.stringify(b.stats));
  assert.ok(b.stats.compiledKinds < 100, JSON.stringify({ ...b.stats, modules: b.modules }));
});

test('zero budget: a rebuild waits until the hot misses paid for it (ski rental)', { skip: !available && 'koffi missing' }, () => {
  const b = new ModelBatch({ NBX_CUDA_BATCH_COMPILE_MS: '0' });
  run(b, kindExpr(1000), 20000); // 20000 * 4 µs = 80 ms < the 130 ms estimate of a 1-kind module
  assert.equal(b.stats.rebuilds, 0, JSON.stringify(b.stats));
  run(b, kindExpr(1000), 20000);
  b.flush();
  assert.equal(b.stats.rebuilds, 1, JSON.stringify(b.stats));
  assert.ok(b.stats.commands > 0);
});

test('over the allowance the most used kinds are kept', { skip: !available && 'koffi missing' }, () => {
  // room for two kinds at the initial estimate (100 ms + 30 ms per kind)
  const b = new ModelBatch({ NBX_CUDA_BATCH_COMPILE_MS: '175', NBX_CUDA_BATCH_REBUILD_AFTER: '64' });
  const [hot, warm, cold] = [kindExpr(2000), kindExpr(2001), kindExpr(2002)];
  for (let r = 0; r < 8; r++) { run(b, cold); run(b, warm, 3); run(b, hot, 8); }
  assert.equal(b.stats.rebuilds, 1, JSON.stringify(b.stats));
  assert.equal(b.stats.kinds, 2);
  assert.ok(b.stats.deferred >= 1);
  b.flush();
  const c0 = b.stats.commands;
  run(b, hot); run(b, warm); b.flush();
  assert.equal(b.stats.commands - c0, 2, 'hot and warm are batched');
  run(b, cold); b.flush();
  assert.equal(b.stats.commands - c0, 2, 'cold launches directly');
});
