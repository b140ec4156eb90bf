// Reliability under memory pressure and lifetimes (issue 17): scopes keep exactly what they return
// (any nesting, Maps, Sets, class instances) and dispose the rest, nested async scopes included;
// large CPU results left to the garbage collector stay bounded; a long WebGPU chain recorded before
// the device exists reuses its buffers; emptyCache returns cached device memory.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import * as nbx from '../src/index.js';
import type { Tensor } from '../src/tensor/tensor.js';
import { NbxError, ValueError } from '../src/errors.js';

const INDEX = fileURLToPath(new URL('../src/index.js', import.meta.url));
const probe = await nbx.webgpu.probe();
if (!probe.available) process.stdout.write(`# reliability_memory: webgpu cases NOT RUN: no WebGPU adapter (${probe.reason})\n`);

test('scope keeps tensors returned in arrays, objects, Maps, Sets, class instances, at any depth', () => {
  class Pair { constructor(readonly a: Tensor, readonly b: Tensor) {} }
  let tmp: Tensor | undefined;
  const r = nbx.scope(() => {
    tmp = nbx.ones([2]);
    let deep: unknown = nbx.full([1], 7);
    for (let i = 0; i < 50; i++) deep = { next: [deep] };
    return { map: new Map([['w', nbx.ones([3])]]), set: new Set([nbx.zeros([1])]), pair: new Pair(nbx.ones([1]), nbx.zeros([1])), deep };
  });
  assert.ok(tmp!.isDisposed, 'a tensor not returned is disposed');
  assert.deepEqual(r.map.get('w')!.tolist(), [1, 1, 1]);
  assert.deepEqual([...r.set][0]!.tolist(), [0]);
  assert.deepEqual(r.pair.a.tolist(), [1]);
  let d = r.deep as { next: unknown[] } | Tensor;
  while (!(d instanceof nbx.Tensor)) d = (d as { next: unknown[] }).next[0] as never;
  assert.deepEqual(d.tolist(), [7]);
});

test('scope: containers it cannot see into and a sync fn returning a Promise are errors that still free', () => {
  let made: Tensor | undefined;
  assert.throws(() => nbx.scope(() => { made = nbx.ones([1]); return new WeakMap([[{}, made]]); }), (e: unknown) => e instanceof ValueError && /WeakMap/.test((e as Error).message));
  assert.ok(made!.isDisposed);
  assert.throws(() => nbx.scope((() => { made = nbx.ones([1]); return Promise.resolve(made); }) as () => unknown),
    (e: unknown) => e instanceof NbxError && /not an async function/.test((e as Error).message));
  assert.ok(made!.isDisposed, 'the tensors it created were disposed');
  assert.throws(() => nbx.scope(42 as never), ValueError);
});

test('nested async scopes: an inner result not returned by the outer scope is disposed with it', async () => {
  let inner: Tensor | undefined, innerTmp: Tensor | undefined;
  const out = await nbx.scope(async () => {
    inner = await nbx.scope(async () => { innerTmp = nbx.ones([2]); await Promise.resolve(); return nbx.add(innerTmp, 1); });
    assert.ok(innerTmp!.isDisposed);
    assert.ok(!inner.isDisposed, 'alive inside the outer scope');
    return nbx.mul(inner, 2);
  });
  assert.ok(inner!.isDisposed, 'the inner result was the outer scope\'s to dispose');
  assert.deepEqual(out.tolist(), [4, 4]);
  // sync inside async and async inside sync-less nesting
  let s: Tensor | undefined;
  const kept = await nbx.scope(async () => { s = nbx.scope(() => nbx.ones([1])); await Promise.resolve(); return null; });
  assert.equal(kept, null);
  assert.ok(s!.isDisposed);
  // keep() takes a tensor out of every scope
  const k = nbx.scope(() => { nbx.scope(() => nbx.keep(nbx.ones([1]))); return 0; });
  assert.equal(k, 0);
});

test('cpu: large results left to the garbage collector stay bounded (64 MiB x 60, no dispose)', () => {
  // A child process with a 512 MiB budget: without collection under pressure this grows to ~4 GiB.
  const code = `const nbx = await import(${JSON.stringify(INDEX)});
    const x = nbx.ones([16 << 20]); let peak = 0;
    for (let i = 0; i < 60; i++) { nbx.add(x, i); peak = Math.max(peak, process.memoryUsage().rss); }
    console.log(JSON.stringify({ peak }));`;
  const r = spawnSync(process.execPath, ['--input-type=module', '-e', code], { encoding: 'utf8', env: { ...process.env, NBX_HOST_GC_MB: '512', NBX_NUM_THREADS: '1' }, timeout: 120_000 });
  assert.equal(r.status, 0, r.stderr);
  const { peak } = JSON.parse(r.stdout.trim().split('\n').pop()!) as { peak: number };
  assert.ok(peak < 1.6 * 2 ** 30, `peak RSS ${(peak / 2 ** 30).toFixed(2)} GiB`);
});

test('webgpu: a chain recorded before the device exists reuses buffers; emptyCache returns the cache', { skip: probe.available ? false : 'no WebGPU adapter' }, async () => {
  // A fresh process: the device must not exist yet when the chain is recorded.
  const code = `const nbx = await import(${JSON.stringify(INDEX)});
    let x = nbx.ones([12288], { device: 'webgpu' });
    for (let i = 0; i < 3000; i++) { const y = x.add(1); x.dispose(); x = y; }
    const v = (await x.data())[0];
    const before = nbx.webgpu.memoryStats();
    await nbx.scope(async () => { for (let i = 0; i < 200; i++) nbx.add(x, i); });
    await nbx.webgpu.synchronize();
    const freed = nbx.webgpu.emptyCache();
    console.log(JSON.stringify({ v, before, freed, after: nbx.webgpu.memoryStats() }));`;
  const r = spawnSync(process.execPath, ['--input-type=module', '-e', code], { encoding: 'utf8', timeout: 120_000 });
  assert.equal(r.status, 0, r.stderr);
  const res = JSON.parse(r.stdout.trim().split('\n').pop()!) as { v: number; before: { created: number; reservedBytes: number }; freed: number; after: { reservedBytes: number } };
  assert.equal(res.v, 3001);
  assert.ok(res.before.created <= 8, `${res.before.created} buffers created for a chain with 2 live tensors`);
  assert.ok(res.freed >= 200 * 12288 * 4, `emptyCache freed ${res.freed} bytes`);
  assert.ok(res.after.reservedBytes <= 4 * 65536, `reserved after emptyCache: ${res.after.reservedBytes}`);
});

test('webgpu: emptyCache never destroys a buffer that recorded work still reads', { skip: probe.available ? false : 'no WebGPU adapter' }, async () => {
  const w = nbx.ones([4], { device: 'webgpu' });
  await w.data();
  const a = nbx.add(w, 1);
  const y = a.mul(3);
  a.dispose(); // its buffer goes back to the pool while the mul that reads it is only recorded
  nbx.webgpu.emptyCache();
  assert.deepEqual(Array.from(await y.data() as Float32Array), [6, 6, 6, 6]);
  assert.deepEqual(Array.from(await nbx.add(w, 2).data() as Float32Array), [3, 3, 3, 3]);
});
