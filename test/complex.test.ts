// Complex arithmetic (add/sub/mul/div/neg/abs/angle), casts to and from complex, and item() of a
// complex element. Expected values computed with PyTorch 1.13 (CPU).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import * as nbx from '../src/index.js';

const close = (got: unknown, want: unknown, tol = 1e-6): void => {
  const g = (got as number[]).flat(3) as number[], w = (want as number[]).flat(3) as number[];
  assert.equal(g.length, w.length);
  g.forEach((x, i) => assert.ok(Math.abs(x - w[i]!) <= tol * (1 + Math.abs(w[i]!)), `element ${i}: ${x} vs ${w[i]}`));
};

test('complex arithmetic matches PyTorch', () => {
  const z = nbx.view_as_complex(nbx.tensor([[1.5, -2], [0, 0], [3, 4]], { dtype: "float32" }));
  const w = nbx.view_as_complex(nbx.tensor([[0.5, 1], [2, -3], [1e-3, 4]], { dtype: "float32" }));
  close(nbx.view_as_real(nbx.mul(z, w)).tolist(), [[2.75, 0.5], [0, 0], [-15.996999740600586, 12.003999710083008]]);
  close(nbx.view_as_real(nbx.div(z, w)).tolist(), [[-1, -2], [0, 0], [1.0001873970031738, -0.7497499585151672]]);
  close(nbx.view_as_real(nbx.sub(z, w, { alpha: 2 })).tolist(), [[0.5, -4], [-4, 6], [2.997999906539917, -4]]);
  close(nbx.abs(z).tolist(), [2.5, 0, 5]);
  close(nbx.angle(z).tolist(), [-0.9272952079772949, 0, 0.9272952079772949]);
  close(nbx.view_as_real(nbx.neg(z)).tolist(), [[-1.5, 2], [0, 0], [-3, -4]]);
  // broadcasting against a real tensor and a scalar (the RoPE pattern: complex rows times a complex table)
  const rows = nbx.add(nbx.view_as_complex(nbx.tensor([[[1, 0], [0, 1]], [[2, 0], [0, 2]]], { dtype: "float32" })), 1);
  close(nbx.view_as_real(nbx.mul(rows, nbx.view_as_complex(nbx.tensor([[0, 1], [1, 0]], { dtype: "float32" })))).tolist(), [[[0, 2], [1, 1]], [[0, 3], [1, 2]]]);
  assert.equal(nbx.mul(z, 2).dtype, nbx.complex64);
  assert.equal(nbx.add(z, nbx.tensor([1, 2, 3], { dtype: 'float64' })).dtype, nbx.complex128);
});

test('casts to and from complex, angle of real input, item()', () => {
  const x = nbx.tensor([-1, 0, 3]);
  assert.deepEqual(x.to('complex64').tolist(), [[-1, 0], [0, 0], [3, 0]]);
  assert.deepEqual(nbx.angle(x).tolist(), [Math.fround(Math.PI), 0, 0]);
  assert.equal(nbx.angle(x).dtype, nbx.float32);
  const z = nbx.view_as_complex(nbx.tensor([[1.5, -2], [3, 4]]));
  assert.deepEqual(z.to('complex128').tolist(), [[1.5, -2], [3, 4]]);
  assert.deepEqual(z.to('float32').tolist(), [1.5, 3]);
  assert.deepEqual(z.select(0, 1).item(), [3, 4]);
  assert.throws(() => nbx.exp(z), /exp.*not implemented for complex/);
  assert.throws(() => nbx.angle(nbx.tensor([true])), nbx.DTypeError);
});

// The same arithmetic on each GPU backend present, compared with the CPU (skipped with a message otherwise).
const { probeCuda } = await import('../src/backend/cuda/runtime/libs.js');
const gpus: [string, string | false][] = [
  ['webgpu', await nbx.webgpu.probe().then((p) => (p.available ? false : `no WebGPU adapter (${p.reason})`))],
  ['cuda', (() => { const p = probeCuda(); return p.available ? false : `no CUDA device (${p.reason})`; })()],
];
for (const [dev, skip] of gpus) {
  if (skip) process.stdout.write(`# complex tests on ${dev} NOT RUN: ${skip}.\n`);
  test(`complex arithmetic on ${dev} equals the CPU`, { skip }, async () => {
    const z = nbx.view_as_complex(nbx.tensor([[1.5, -2], [0, 0], [3, 4], [-7, 0.25]], { dtype: 'float32' }));
    const w = nbx.view_as_complex(nbx.tensor([[0.5, 1], [2, -3], [1e-3, 4], [0, -2]], { dtype: 'float32' }));
    const zg = z.to(dev), wg = w.to(dev);
    const cases: [string, (a: nbx.Tensor, b: nbx.Tensor) => nbx.Tensor][] = [
      ['mul', (a, b) => nbx.view_as_real(nbx.mul(a, b))], ['div', (a, b) => nbx.view_as_real(nbx.div(a, b))],
      ['sub alpha', (a, b) => nbx.view_as_real(nbx.sub(a, b, { alpha: 2 }))], ['abs', (a) => nbx.abs(a)], ['angle', (a) => nbx.angle(a)],
    ];
    for (const [name, f] of cases) {
      const got = Array.from(await f(zg, wg).data() as Float32Array), want = Array.from(f(z, w).dataSync() as Float32Array);
      // GPU division and transcendental functions may differ from the CPU in the last bits
      got.forEach((x, i) => assert.ok(Math.abs(x - want[i]!) <= 1e-6 * (1 + Math.abs(want[i]!)), `${name}[${i}] on ${dev}: ${x} vs ${want[i]}`));
    }
    assert.deepEqual(Array.from(await nbx.view_as_real(nbx.tensor([1, 2], { dtype: 'float32' }).to(dev).to('complex64')).data() as Float32Array), [1, 0, 2, 0]);
  });
}

test('sum and mean of complex tensors (real and imaginary parts reduced apart); other reductions refuse', () => {
  const c = nbx.complex(nbx.arange(6, { dtype: 'float32' }).reshape([2, 3]), nbx.ones([2, 3]));
  assert.deepEqual(nbx.sum(c).item(), [15, 6]); // torch: 15+6j
  assert.deepEqual(nbx.sum(c.t(), 0).tolist(), [[3, 3], [12, 3]]);
  assert.deepEqual(nbx.mean(c).item(), [2.5, 1]);
  assert.deepEqual(nbx.sum(c, [0], { keepdim: true }).shape, [1, 3]);
  assert.equal(nbx.sum(c, 1).dtype.name, 'complex64');
  assert.throws(() => nbx.amax(c), /complex/);
  assert.deepEqual(nbx.sum(c).item(), [15, 6]); // the input is intact
});
