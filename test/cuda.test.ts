// CUDA backend: runs only where a CUDA device is present; elsewhere each test is skipped with a message.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import * as nbx from '../src/index.js';
import { probeCuda } from '../src/backend/cuda/runtime/libs.js';

const probe = probeCuda();
const skip = probe.available ? false : `no CUDA device (${probe.reason}): CUDA backend tests not run`;
if (skip) console.log(`# SKIP cuda tests: ${probe.reason}`);

const close = (a: number[], b: number[], tol = 1e-5): void => {
  assert.equal(a.length, b.length);
  a.forEach((x, i) => assert.ok(Math.abs(x - b[i]!) <= tol * (1 + Math.abs(b[i]!)) || (Number.isNaN(x) && Number.isNaN(b[i]!)), `index ${i}: ${x} vs ${b[i]}`));
};

test('elementwise on cuda equals cpu across dtypes, strides and broadcasting', { skip }, async () => {
  const x = nbx.sin(nbx.arange(4096, { dtype: 'float32' })).reshape(64, 64);
  for (const dt of ['float32', 'float16', 'bfloat16', 'float64', 'int32', 'int64', 'int8', 'uint8', 'bool'] as const) {
    const c = x.mul(100).to(dt), g = c.to('cuda');
    const f = (t: nbx.Tensor) => nbx.add(nbx.mul(t, t.t()), t);
    assert.deepEqual((await f(g).data()).length, f(c).numel());
    const cpu = Array.from(f(c).to('float64').dataSync() as Float64Array);
    const gpu = Array.from(f(g).to('float64').to('cpu').dataSync() as Float64Array);
    close(gpu, cpu, dt === 'float16' || dt === 'bfloat16' ? 1e-2 : 1e-6);
  }
  close(nbx.exp(x.cuda()).to('cpu').dataSync() as unknown as number[], nbx.exp(x).dataSync() as unknown as number[]);
});

test('reductions on cuda equal cpu (row, column, all, arg, var)', { skip }, () => {
  const x = nbx.cos(nbx.arange(3 * 2000, { dtype: 'float32' })).reshape(3, 2000);
  const g = x.cuda();
  for (const [name, f] of [['sum', (t: nbx.Tensor) => nbx.sum(t, -1)], ['sum0', (t: nbx.Tensor) => nbx.sum(t, 0)], ['all', (t: nbx.Tensor) => nbx.sum(t)],
    ['amax', (t: nbx.Tensor) => nbx.amax(t, 1)], ['argmax', (t: nbx.Tensor) => nbx.argmax(t, 1)], ['var', (t: nbx.Tensor) => nbx.var(t, 1)],
    ['lse', (t: nbx.Tensor) => nbx.logsumexp(t, 1)], ['norm', (t: nbx.Tensor) => nbx.norm(t, 3, 1)]] as const) {
    close(Array.from(f(g).to('float64').to('cpu').dataSync() as Float64Array), Array.from(f(x).to('float64').dataSync() as Float64Array), 1e-5);
    void name;
  }
});

test('memory: dispose returns blocks to the cache, OOM is typed and the engine keeps working', { skip }, () => {
  const before = nbx.cuda.memoryStats();
  const t = nbx.zeros([1 << 20], { device: 'cuda' });
  assert.ok(nbx.cuda.memoryStats().allocatedBytes >= before.allocatedBytes + 4 * (1 << 20));
  t.dispose();
  assert.equal(nbx.cuda.memoryStats().allocatedBytes, before.allocatedBytes);
  assert.throws(() => nbx.zeros([2 ** 42], { device: 'cuda', dtype: 'float32' }), nbx.OutOfMemoryError);
  assert.deepEqual(nbx.add(nbx.ones([2], { device: 'cuda' }), 1).to('cpu').tolist(), [2, 2]);
});

test('mixing devices in one operation is a typed error', { skip }, () => {
  assert.throws(() => nbx.add(nbx.ones([2], { device: 'cuda' }), nbx.ones(2)), nbx.DeviceError);
});
