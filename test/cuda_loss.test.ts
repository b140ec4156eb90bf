// CUDA 'nll_loss' and 'local_response_norm' kernels against the CPU kernels (skipped without a CUDA
// device): reductions, class weights, ignore_index, uint8 targets, spatial targets, many blocks of
// items, every float dtype, the typed out-of-range error, cross_entropy built on them; LRN over 3-5
// dims and non-contiguous inputs.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import * as nbx from '../src/index.js';
import type { Tensor } from '../src/tensor/tensor.js';
import { FLOAT_DTYPES, check, noStaging, rand, skip } from './cuda_compare.js';

const F = nbx.nn.functional;

function targets(shape: number[], C: number, seed: number, ignore = -100, dtype: 'int64' | 'uint8' = 'int64'): Tensor {
  const t = rand(shape, seed, 0, C, 'int64');
  const u = rand(shape, seed + 1, 0, 1);
  const r = dtype === 'uint8' ? t.to('uint8') : (nbx.where(nbx.lt(u, 0.15), ignore, t) as Tensor);
  return r;
}

test('nll_loss: reductions, weights, ignore_index, spatial targets, every float dtype', { skip }, () => {
  for (const dt of FLOAT_DTYPES) {
    const lp = F.log_softmax!(rand([13, 5], 1, -2, 2, dt), 1) as Tensor, t = targets([13], 5, 2);
    const w = rand([5], 3, 0.2, 2, dt);
    for (const reduction of ['none', 'mean', 'sum']) {
      check(`nll ${reduction} ${dt}`, (a, b) => F.nll_loss!(a, b, { reduction }), [lp, t]);
      check(`nll w ${reduction} ${dt}`, (a, b, c) => F.nll_loss!(a, b, c, { reduction }), [lp, t, w]);
    }
    check(`nll ignore 3 ${dt}`, (a, b) => F.nll_loss!(a, b, { ignore_index: 3 }), [lp, targets([13], 5, 4, 3)]);
    const sp = rand([2, 4, 3, 5], 5, -3, 0, dt), ts = targets([2, 3, 5], 4, 6);
    check(`nll spatial ${dt}`, (a, b, c) => F.nll_loss!(a, b, c), [sp, ts, rand([4], 7, 0.5, 1.5, dt)]);
    check(`nll spatial none ${dt}`, (a, b) => F.nll_loss!(a, b, { reduction: 'none' }), [sp, ts]);
    check(`nll unbatched ${dt}`, (a, b) => F.nll_loss!(a, b), [rand([6], 8, -3, 0, dt), nbx.tensor(4)]);
  }
  check('nll uint8 targets', (a, b) => F.nll_loss!(a, b, { reduction: 'sum' }), [rand([9, 7], 9, -3, 0), targets([9], 7, 10, -100, 'uint8')]);
  check('nll all ignored', (a, b) => F.nll_loss!(a, b), [rand([4, 3], 11, -3, 0), nbx.full([4], -100, { dtype: 'int64' })]);
  check('nll empty', (a, b) => F.nll_loss!(a, b, { reduction: 'sum' }), [rand([0, 3], 12), nbx.zeros([0], { dtype: 'int64' })]);
  noStaging(['nll_loss']);
});

test('nll_loss over many blocks of items (fixed-order reduction) and cross_entropy', { skip }, () => {
  const lp = rand([3, 6, 70, 90], 13, -4, 0), t = targets([3, 70, 90], 6, 14);
  check('nll 18900 items', (a, b, c) => F.nll_loss!(a, b, c), [lp, t, rand([6], 15, 0.5, 1.5)], [1e-5, 1e-6]);
  check('nll 18900 items sum', (a, b) => F.nll_loss!(a, b, { reduction: 'sum' }), [lp, t], [1e-5, 1e-6]);
  for (const dt of ['float32', 'float64', 'bfloat16'] as const) {
    const x = rand([11, 6], 16, -2, 2, dt), tt = targets([11], 6, 17);
    check(`cross_entropy ${dt}`, (a, b) => F.cross_entropy!(a, b), [x, tt]);
    check(`cross_entropy w sum ${dt}`, (a, b, c) => F.cross_entropy!(a, b, c, { reduction: 'sum' }), [x, nbx.clamp(tt, 0) as Tensor, rand([6], 18, 0.5, 2, dt)]);
  }
  // Same answer every run: the reduction order does not depend on scheduling.
  const g = lp.to('cuda'), gt = t.to('cuda');
  const a = (F.nll_loss!(g, gt) as Tensor).item(), b = (F.nll_loss!(g, gt) as Tensor).item();
  assert.equal(a, b);
  noStaging(['nll_loss']);
});

test('nll_loss: an out-of-range target is the CPU kernel\'s IndexError', { skip }, () => {
  const lp = rand([5, 4], 19, -3, 0).to('cuda');
  for (const bad of [4, -1, 7]) {
    const t = nbx.tensor([0, 1, bad, 2, 9]).to('cuda');
    assert.throws(() => F.nll_loss!(lp, t), (e: Error) => e instanceof nbx.IndexError && e.message.includes(`Target ${bad} is out of bounds.`));
  }
  // ignore_index is checked before the bounds
  check('ignored out-of-range', (a, b) => F.nll_loss!(a, b, { ignore_index: 9 }), [rand([3, 4], 20, -3, 0), nbx.tensor([0, 9, 3])]);
});

test('local_response_norm: 3-5 dims, windows, non-contiguous input, every float dtype', { skip }, () => {
  for (const dt of FLOAT_DTYPES) {
    check(`lrn 3d ${dt}`, (a) => F.local_response_norm!(a, 3), [rand([2, 7, 9], 21, -2, 2, dt)]);
    check(`lrn 4d ${dt}`, (a) => F.local_response_norm!(a, 4, { alpha: 0.01, beta: 0.5, k: 2 }), [rand([2, 6, 5, 4], 22, -2, 2, dt)]);
    check(`lrn 5d wide ${dt}`, (a) => F.local_response_norm!(a, 11, { alpha: 0.1 }), [rand([1, 5, 3, 4, 2], 23, -2, 2, dt)]);
  }
  check('lrn permuted', (a) => F.local_response_norm!(a.permute(0, 3, 1, 2), 5), [rand([2, 6, 5, 8], 24, -2, 2)]);
  noStaging(['local_response_norm']);
});
