// Launch batching of small elementwise ops (src/backend/cuda/runtime/launch_batch.ts): results equal the CPU
// and NBX_CUDA_BATCH=0 across dependent chains, interleaved big ops / GEMM / reductions / copies /
// downloads / frees, buffers reused inside one batch, batches longer than the parameter block, and
// kinds crossing the rebuild threshold. Runs only where CUDA (or the emulator) is present.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import * as nbx from '../src/index.js';
import { probeCuda } from '../src/backend/cuda/runtime/libs.js';

// the emulator runs every thread of the block as a fiber: a smaller block keeps the test fast
if (process.env.NBX_EMU_DIR && !process.env.NBX_CUDA_BATCH_THREADS) process.env.NBX_CUDA_BATCH_THREADS = '64';
// These tests check what batched kinds compute, across many kinds: no compile budget (the emulator's
// g++ takes seconds per module; on a GPU the dtype test alone could use the default budget up). The
// budget itself is tested in test/cuda_batch_policy.test.ts.
if (!process.env.NBX_CUDA_BATCH_COMPILE_MS) process.env.NBX_CUDA_BATCH_COMPILE_MS = '600000';

const probe = probeCuda();
const skip = probe.available ? false : `no CUDA device (${probe.reason}): CUDA batch tests not run`;
if (skip) console.log(`# SKIP cuda batch tests: ${probe.reason}`);

type T = nbx.Tensor;
const vals = (t: T): number[] => Array.from(t.to('float64').to('cpu').dataSync() as Float64Array);
const close = (a: number[], b: number[], tol = 1e-5): void => {
  assert.equal(a.length, b.length);
  a.forEach((x, i) => assert.ok(Math.abs(x - b[i]!) <= tol * (1 + Math.abs(b[i]!)) || (Number.isNaN(x) && Number.isNaN(b[i]!)), `index ${i}: ${x} vs ${b[i]}`));
};

/** A mixed program of small dependent ops, big ops and library calls; returns its outputs (float64 arrays). */
function program(dev: 'cpu' | 'cuda', small: number): number[][] {
  const a = nbx.sin(nbx.arange(small, { dtype: 'float32' })).to(dev);
  const b = nbx.cos(nbx.arange(small, { dtype: 'float32' })).to(dev);
  let c = a;
  for (let i = 0; i < 50; i++) c = nbx.add(nbx.mul(c, 0.5), b); // dependent chain inside one batch
  const big = nbx.sin(nbx.arange(small * 64, { dtype: 'float32' })).to(dev); // a direct launch
  const d = nbx.add(nbx.mul(big, 2), 1);
  const s = nbx.sum(d.reshape(64, small), 0); // reduction kernel reads the batch's inputs' successors
  const e = nbx.sub(s, c); // small op on a reduction's output
  const m = nbx.matmul(e.reshape(1, small), nbx.ones([small, 3], { device: dev })); // cuBLASLt
  const f = nbx.mul(m, 3);
  const t = nbx.exp(nbx.mul(a.reshape(8, small / 8).t().contiguous(), -1)); // copy kernel + small ops
  const half = nbx.add(a.to('float16'), 1).to('float32'); // casts
  const i64 = nbx.add(nbx.arange(small, { device: dev }), 7); // int64 with an int64 parameter
  const w = nbx.where(nbx.gt(a, 0), a, b); // three inputs
  const sc = nbx.add(a, nbx.tensor(2.5, { device: dev })); // a single-element (broadcast) input
  return ([c, d.narrow(0, 0, 16), s, e, f, t, half, i64, w, sc] as T[]).map(vals);
}

const SMALL = 64;

if (process.env.NBX_BATCH_TEST_CHILD) {
  process.stdout.write(JSON.stringify(program('cuda', SMALL)));
} else {
  test('small-op programs on cuda equal cpu; ops really batch', { skip }, () => {
    const be = nbx.cuda.backend();
    assert.ok(be.batch, 'batching is on by default');
    const cpu = program('cpu', SMALL);
    for (let r = 0; r < 3; r++) { // first rounds launch directly until the module is built
      const gpu = program('cuda', SMALL);
      gpu.forEach((g, i) => close(g, cpu[i]!, 1e-4));
    }
    assert.ok(be.batch.stats.commands > 100, JSON.stringify(be.batch.stats));
    assert.ok(be.batch.stats.batches >= 1);
  });

  test('NBX_CUDA_BATCH=0 gives the same results bit for bit', { skip }, () => {
    const run = (flag: string): number[][] => {
      const r = spawnSync(process.execPath, [fileURLToPath(import.meta.url)], { env: { ...process.env, NBX_BATCH_TEST_CHILD: '1', NBX_CUDA_BATCH: flag }, encoding: 'utf8' });
      assert.equal(r.status, 0, r.stderr);
      return JSON.parse(r.stdout) as number[][];
    };
    assert.deepEqual(run('1'), run('0'));
  });

  test('a buffer freed and reused inside one batch; frees, emptyCache and downloads flush', { skip }, async () => {
    const be = nbx.cuda.backend();
    const n = 48;
    const a = nbx.arange(n, { dtype: 'float32', device: 'cuda' }), b = nbx.ones([n], { device: 'cuda' });
    for (let r = 0; r < 40; r++) nbx.add(nbx.mul(a, 2), b).dispose(); // make sure the kinds are batched
    const before = be.batch!.stats.commands;
    const t1 = nbx.add(a, b); // a + 1
    const t2 = nbx.mul(t1, 2); // reads t1
    t1.dispose(); // t1's block goes back to the cache ...
    const t3 = nbx.add(a, a); // ... and is reused here, in the same batch, after t2 read it
    const t4 = nbx.add(t2, t3);
    assert.ok(be.batch!.stats.commands - before >= 0);
    close(Array.from(await t4.data() as Float32Array), [...Array(n).keys()].map((i) => 2 * (i + 1) + 2 * i));
    const t5 = nbx.mul(t4, 0.5);
    t4.dispose(); t2.dispose(); t3.dispose();
    nbx.cuda.emptyCache(); // cuMemFree of cached blocks flushes the batch first
    close(vals(t5), [...Array(n).keys()].map((i) => (i + 1) + i));
    const t6 = nbx.add(t5, 1);
    await nbx.cuda.synchronize();
    close(vals(t6), [...Array(n).keys()].map((i) => i + 2 + i));
  });

  test('a batch longer than the parameter block flushes and continues', { skip }, () => {
    const be = nbx.cuda.backend();
    const a = nbx.zeros([16], { device: 'cuda' }), one = nbx.ones([16], { device: 'cuda' });
    let c = a;
    for (let i = 0; i < 40; i++) c = nbx.add(c, one);
    const b0 = be.batch!.stats.batches;
    for (let i = 0; i < 3000; i++) { const nc = nbx.add(c, one); c.dispose(); c = nc; } // ~4 words/op: several parameter blocks
    assert.ok(be.batch!.stats.batches - b0 >= 2, JSON.stringify(be.batch!.stats));
    close(vals(c), Array(16).fill(3040));
  });

  test('every dtype through the batch: params, casts, comparisons, broadcast scalars', { skip }, () => {
    const be = nbx.cuda.backend();
    const base = nbx.sub(nbx.mul(nbx.sin(nbx.arange(40, { dtype: 'float64' })), 50), 3);
    const c0 = be.batch!.stats.commands;
    for (const dt of ['float32', 'float64', 'float16', 'bfloat16', 'int64', 'int32', 'int16', 'int8', 'uint8', 'bool'] as const) {
      const xc = base.to(dt), x = xc.cuda(), one = nbx.ones([1], { dtype: dt });
      const fs: ((t: T, o: T) => T)[] = [(t) => nbx.add(t, 3), (t) => nbx.mul(t, 2), (t, o) => nbx.add(t, o), (t) => nbx.gt(t, 0), (t) => t.to('float32'), (t) => nbx.where(nbx.gt(t, 0), t, nbx.zeros_like(t)) as T];
      for (let r = 0; r < 6; r++) {
        for (const f of fs) {
          if (dt === 'bool' && fs.indexOf(f) < 2) continue; // add/mul with a number promote bool; covered elsewhere
          close(vals(f(x, one.cuda())), vals(f(xc, one)), dt === 'float16' || dt === 'bfloat16' ? 1e-2 : 1e-6);
        }
      }
    }
    assert.ok(be.batch!.stats.commands > c0, JSON.stringify(be.batch!.stats));
  });

  test('kinds crossing the rebuild threshold join the module; results stay right', { skip }, () => {
    const be = nbx.cuda.backend();
    const x = nbx.linspace(0.1, 2, 40).to('cuda'), xc = x.to('cpu');
    const ops: ((t: T) => T)[] = [nbx.exp, nbx.log, nbx.sqrt, nbx.tanh, nbx.neg, nbx.abs, (t) => nbx.pow(t, 3), (t) => nbx.clamp(t, 0.5, 1.5),
      (t) => nbx.maximum(t, nbx.mul(t, t)), (t) => nbx.sigmoid(t), (t) => nbx.floor(nbx.mul(t, 3)), (t) => nbx.lt(t, 1).to('float32')];
    const r0 = be.batch!.stats.rebuilds;
    for (let r = 0; r < 40; r++) for (const f of ops) close(vals(f(x)), vals(f(xc)), 1e-5);
    assert.ok(be.batch!.stats.rebuilds > r0, JSON.stringify(be.batch!.stats));
    const k = be.batch!.stats.kinds;
    for (const f of ops) close(vals(f(x)), vals(f(xc)), 1e-5);
    assert.equal(be.batch!.stats.kinds, k, 'no recompiles in a steady-state loop');
  });
}
