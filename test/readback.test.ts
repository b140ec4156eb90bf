// `await t.cpu()` gives a CPU tensor on every device; synchronous reads that a device cannot do fail
// with an error naming the call that works; a WebGPU tensor prints what it is and how to see its values.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import * as nbx from '../src/index.js';

test('await t.cpu() on the CPU is the tensor itself; without await it is a Tensor too', async () => {
  const x = nbx.arange(4).reshape(2, 2);
  const c = await x.cpu();
  assert.equal(c, x);
  assert.deepEqual((x.cpu() as nbx.Tensor).tolist(), [[0, 1], [2, 3]]);
  assert.deepEqual((await x.t().cpu()).tolist(), [[0, 2], [1, 3]]);
});

test('WebGPU: await t.cpu(), readback errors that name a working call, printing', async (t) => {
  if (!(await nbx.webgpu.isAvailable())) { t.skip('no WebGPU adapter on this machine'); return; }
  const g = nbx.arange(6, { dtype: nbx.float }).reshape(2, 3).to('webgpu');
  const c = await g.cpu();
  assert.equal(c.device.type, 'cpu');
  assert.deepEqual(c.tolist(), [[0, 1, 2], [3, 4, 5]]);
  assert.deepEqual((await g.t().cpu()).tolist(), [[0, 3], [1, 4], [2, 5]]);
  assert.equal(String(await g.sum().cpu()), 'tensor(15.)');
  assert.deepEqual((await nbx.webgpu.toCpu(g)).tolist(), c.tolist());
  const calls: [string, () => unknown, RegExp][] = [
    ['tolist', () => g.tolist(), /use \(await t\.cpu\(\)\)\.tolist\(\)/],
    ['item', () => g.sum().item(), /use \(await t\.cpu\(\)\)\.item\(\)/],
    ['dataSync', () => g.dataSync(), /use await t\.data\(\)/],
    ["to('cpu')", () => g.to('cpu'), /use await t\.cpu\(\)/],
  ];
  for (const [name, f, re] of calls) {
    assert.throws(f, (e: Error) => e instanceof nbx.DeviceLimitError && re.test(e.message) && /await t\.cpu\(\) gives a CPU tensor on every device/.test(e.message), name);
  }
  assert.equal(String(g), "tensor(<values on webgpu:0: print await t.cpu() to see them>, size=(2, 3), dtype=nbx.float32, device='webgpu:0')");
  const back = nbx.ones(2).to('webgpu');
  assert.deepEqual((await back.cpu()).tolist(), [1, 1]);
});
