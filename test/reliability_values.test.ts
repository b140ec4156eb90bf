// Reliability: bad arguments give a typed error, never a silent wrong answer (issue 17's first list).
// Each case runs on the CPU and, where an adapter comes up (llvmpipe in CI), on WebGPU.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import * as nbx from '../src/index.js';
import type { Tensor } from '../src/tensor/tensor.js';
import { DeviceLimitError, IndexError, NbxError, OutOfMemoryError, ShapeError, ValueError } from '../src/errors.js';

const probe = await nbx.webgpu.probe();
if (!probe.available) process.stdout.write(`# reliability_values: webgpu cases NOT RUN: no WebGPU adapter (${probe.reason})\n`);
const DEVICES = probe.available ? ['cpu', 'webgpu'] : ['cpu'];

/** Shape and values, read without blocking (WebGPU only reads asynchronously). */
async function read(t: Tensor): Promise<number[]> {
  return Array.from(await t.data() as ArrayLike<number | bigint>, (v) => Number(v));
}
const isErr = (cls: new (...a: never[]) => Error, msg?: RegExp) => (e: unknown): boolean =>
  e instanceof cls && (!msg || msg.test((e as Error).message));

for (const dev of DEVICES) {
  test(`${dev}: cumsum/cumprod of complex tensors are complex scans`, async () => {
    for (const dt of dev === 'webgpu' ? ['complex64'] as const : ['complex64', 'complex128'] as const) {
      const x = nbx.complex(nbx.tensor([[1.5, 0.5], [2.5, -1.5]], { dtype: 'float64' }), nbx.tensor([[0.5, 0], [0, -1]], { dtype: 'float64' })).to(dt).to(dev);
      assert.deepEqual(await read(nbx.view_as_real(x.cumsum(0))), [1.5, 0.5, 0.5, 0, 4, 0.5, -1, -1]);
      const y = nbx.complex(nbx.tensor([[1, 2], [3, 4], [1, 1]], { dtype: 'float64' }), nbx.tensor([[1, 0], [1, -1], [0, 1]], { dtype: 'float64' })).to(dt).to(dev);
      assert.deepEqual(await read(nbx.view_as_real(y.cumprod(0))), [1, 1, 2, 0, 2, 4, 8, -2, 2, 4, 10, 6]);
      assert.deepEqual(await read(nbx.view_as_real(y.cumprod(1))), [1, 1, 2, 2, 3, 1, 13, 1, 1, 0, 1, 1]);
    }
    const z = nbx.complex(nbx.tensor(2.0, { dtype: 'float32' }), nbx.tensor(1.0, { dtype: 'float32' })).to(dev);
    assert.deepEqual(z.cumsum(0).shape, []);
    assert.throws(() => nbx.cummax(nbx.complex(nbx.ones([2]), nbx.ones([2])).to(dev), 0), isErr(NbxError));
  });

  test(`${dev}: integer division by zero raises ZeroDivisionError for every integer dtype`, async () => {
    for (const d of ['int8', 'uint8', 'int16', 'int32', 'int64'] as const) {
      if (dev === 'webgpu' && d === 'int16') continue; // no int16 on WebGPU (a DeviceLimitError)
      const ops: [string, (a: Tensor, b: Tensor) => Tensor][] = [
        ['floor_divide', (a, b) => nbx.floor_divide(a, b)], ['remainder', (a, b) => nbx.remainder(a, b)],
        ['fmod', (a, b) => nbx.fmod(a, b)], ['div trunc', (a, b) => nbx.div(a, b, { rounding_mode: 'trunc' })],
        ['div floor', (a, b) => nbx.div(a, b, { rounding_mode: 'floor' })],
      ];
      for (const [name, f] of ops) {
        await assert.rejects(async () => read(f(nbx.tensor([1, 2], { dtype: d, device: dev }), nbx.tensor([0, 1], { dtype: d, device: dev }))),
          isErr(ValueError, /ZeroDivisionError/), `${name} ${d}`);
      }
      // no zero divisor: the right answer, and the engine keeps working after the error
      assert.deepEqual(await read(nbx.floor_divide(nbx.tensor([7, -7], { dtype: d === 'uint8' ? 'int32' : d, device: dev }), nbx.tensor([2, 2], { dtype: d === 'uint8' ? 'int32' : d, device: dev }))), [3, -4]);
    }
  });

  test(`${dev}: an out-of-range gather fails the reads that depend on it, not unrelated ones`, async () => {
    const x = nbx.arange(6, { device: dev }).reshape(2, 3);
    let bad: Tensor | null = null;
    try { bad = nbx.gather(x, 1, nbx.tensor([[0, 5], [1, 1]], { device: dev })); } catch (e) { assert.ok(isErr(IndexError)(e)); }
    const ok = nbx.add(x, 1);
    assert.deepEqual(await read(ok), [1, 2, 3, 4, 5, 6]);
    if (bad) {
      await assert.rejects(read(bad), isErr(IndexError, /index 5 is out of bounds for dimension 1 with size 3/));
      await assert.rejects(read(bad), isErr(IndexError), 'a second read raises again');
      await assert.rejects(read(nbx.mul(bad, 2)), isErr(IndexError), 'derived tensors carry the fault');
    }
    assert.deepEqual(await read(nbx.sub(x, 1)), [-1, 0, 1, 2, 3, 4]);
  });

  test(`${dev}: creation ops validate sizes, steps, indices and fill values`, () => {
    const o = { device: dev };
    assert.throws(() => nbx.linspace(0, 1, 2.5, o), isErr(ValueError, /steps/));
    assert.throws(() => nbx.linspace(0, 1, NaN, o), isErr(ValueError, /steps/));
    assert.throws(() => nbx.linspace(0, 1, -1, o), isErr(ValueError));
    assert.throws(() => nbx.zeros([1, 3], o).expand(-2, 3), isErr(ShapeError));
    assert.throws(() => nbx.zeros([1, 3], o).expand(2.5, 3), isErr(ValueError));
    assert.throws(() => nbx.arange(5, o).slice(0, 1.5, 3), isErr(ValueError, /integer/));
    assert.throws(() => nbx.arange(5, o).slice(0, 1, 3, 0.5), isErr(ValueError));
    assert.throws(() => nbx.arange(5, o).select(0, 1.5), isErr(ValueError));
    assert.throws(() => nbx.arange(5, o).narrow(0, 0.5, 2), isErr(ValueError));
    assert.throws(() => nbx.tensor(3, o).slice(-1, 0), isErr(IndexError, /0-dim/)); // found by the fuzzer (a NaN-sized view)
    for (const size of [[2.5], [NaN], [-1, 2], [Infinity], [2 ** 40, 2 ** 40]]) {
      for (const f of [nbx.zeros, nbx.ones, nbx.empty]) assert.throws(() => f(size, o), isErr(ValueError), `${f.name}(${size})`);
      assert.throws(() => nbx.full(size, 1, o), isErr(ValueError));
      assert.throws(() => nbx.rand(size, o), isErr(ValueError));
    }
    const overflow = /value cannot be converted to type int(32|64|8) without overflow/;
    assert.throws(() => nbx.tensor([NaN], { dtype: 'int32', ...o }), isErr(ValueError, overflow));
    assert.throws(() => nbx.full([2], NaN, { dtype: 'int32', ...o }), isErr(ValueError, overflow));
    assert.throws(() => nbx.full([2], Infinity, { dtype: 'int64', ...o }), isErr(ValueError, overflow));
    assert.throws(() => nbx.tensor([Infinity], { dtype: 'int64', ...o }), isErr(ValueError, overflow));
    assert.throws(() => nbx.tensor([200], { dtype: 'int8', ...o }), isErr(ValueError, overflow));
    assert.throws(() => nbx.full_like(nbx.zeros([2], { dtype: 'int32', ...o }), NaN), isErr(ValueError, overflow));
    assert.throws(() => nbx.full([2], 2 ** 31, { dtype: 'int32', ...o }), isErr(ValueError, overflow));
    // what stays valid: fractions truncate, -1 wraps into uint8 (as c10 allows), bounds are fine
    assert.deepEqual(nbx.tensor([1.7, -1.7], { dtype: 'int32' }).tolist(), [1, -1]);
    assert.deepEqual(nbx.tensor([-1], { dtype: 'uint8' }).tolist(), [255]);
    assert.deepEqual(nbx.full([1], 2 ** 31 - 1, { dtype: 'int32' }).tolist(), [2147483647]);
  });
}

test('cpu: a huge allocation is an OutOfMemoryError naming the size, and the process keeps working', () => {
  assert.throws(() => nbx.zeros([1e6, 1e6]), isErr(OutOfMemoryError, /3\.64 TiB/));
  assert.throws(() => nbx.empty([2 ** 50]), isErr(OutOfMemoryError));
  assert.deepEqual(nbx.ones([2]).tolist(), [1, 1]);
});

test('webgpu: a tensor over the device buffer limit is refused at creation, naming the limit', { skip: probe.available ? false : 'no WebGPU adapter' }, async () => {
  assert.throws(() => nbx.zeros([1e6, 1e6], { device: 'webgpu' }), isErr(DeviceLimitError, /maxStorageBufferBindingSize/));
  assert.throws(() => nbx.empty([2 ** 26, 2 ** 26], { device: 'webgpu' }), isErr(DeviceLimitError, /maxBufferSize/));
  assert.deepEqual(await read(nbx.add(nbx.ones([2], { device: 'webgpu' }), 1)), [2, 2]);
});
