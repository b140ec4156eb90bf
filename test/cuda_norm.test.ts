// CUDA 'softmax' and 'row_norm' kernels against the CPU kernels (skipped without a CUDA device):
// softmax/log_softmax/softmin over every float dtype and dtype= outputs, row lengths 1..70000 (odd,
// unaligned, vectorized, cached in registers and streamed), non-last dims and strided/offset views,
// masks and causal rows through attention's kernel call; layer_norm/rms_norm/group_norm with and
// without weight/bias, float32 parameters next to half inputs, eps, statistics outputs (batch_norm
// training). The row lengths cover warp and sub-warp groups, several rows per block, 16-byte vectors
// and the scalar path, register-cached and streamed rows. Runs under the emulator too (small cases).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import * as nbx from '../src/index.js';
import type { Tensor } from '../src/tensor/tensor.js';
import { FLOAT_DTYPES, check, noStaging, rand, skip } from './cuda_compare.js';

const F = nbx.nn.functional as unknown as Record<string, (...a: unknown[]) => Tensor>;
// The emulator runs kernels on the host: keep its rows short (NBX_NORM_LONG=1 adds the long ones on a GPU).
const EMU = !!process.env.NBX_EMU_DIR;
const LENGTHS = EMU ? [1, 3, 8, 33, 64, 200, 1000] : [1, 2, 3, 7, 8, 31, 64, 100, 257, 1000, 1024, 4096, 8192, 8200, 20000, 70000];
const rowsFor = (n: number): number => Math.max(1, Math.min(EMU ? 6 : 40, Math.floor((EMU ? 3000 : 400000) / n)));

test('softmax family: every float dtype, row lengths, dtype= outputs', { skip }, () => {
  for (const dt of FLOAT_DTYPES) {
    for (const n of LENGTHS) {
      const x = rand([rowsFor(n), n], n + 1, -6, 6, dt);
      check(`softmax ${dt} n${n}`, (a) => F.softmax!(a, -1), [x]);
      check(`log_softmax ${dt} n${n}`, (a) => F.log_softmax!(a, -1), [x]);
      if (n % 7 === 1) check(`softmin ${dt} n${n}`, (a) => F.softmin!(a, 1), [x]);
      if (dt !== 'float64' && n % 3 === 1) check(`softmax ${dt}>f32 n${n}`, (a) => F.softmax!(a, -1, { dtype: 'float32' }), [x]);
      if (n % 5 === 0) check(`log_softmax ${dt}>f64 n${n}`, (a) => F.log_softmax!(a, -1, { dtype: 'float64' }), [x]);
    }
  }
  noStaging(['softmax']);
});

test('softmax: non-last dims, strided and offset views, infinities and NaN', { skip }, () => {
  const x = rand([3, 5, 40, 6], 2, -4, 4);
  for (let d = 0; d < 4; d++) check(`softmax dim ${d}`, (a) => F.softmax!(a, d), [x]);
  check('softmax permuted', (a) => F.softmax!(a.permute(2, 0, 3, 1), -1), [x]);
  check('softmax step 2', (a) => F.softmax!(a.slice(3, 0, 6, 2), -1), [x]);
  // an offset of one element: the rows are no longer 16-byte aligned (scalar path)
  const y = rand([9, 65], 3, -3, 3, 'bfloat16');
  check('softmax offset', (a) => F.softmax!(a.flatten().narrow(0, 1, 64 * 9).reshape([9, 64]), -1), [y]);
  check('softmax narrow cols', (a) => F.log_softmax!(a.narrow(1, 1, 64), -1), [y]);
  const z = nbx.tensor([[0, -Infinity, 1, 2], [-Infinity, -Infinity, -Infinity, -Infinity], [NaN, 1, 2, 3], [Infinity, 1, 2, 3]]);
  for (const dt of FLOAT_DTYPES) {
    check(`softmax special ${dt}`, (a) => F.softmax!(a, -1), [z.to(dt)]);
    check(`log_softmax special ${dt}`, (a) => F.log_softmax!(a, -1), [z.to(dt)]);
  }
  check('softmax 0-d', (a) => F.softmax!(a, 0), [nbx.tensor(2.5)]);
  check('softmax empty', (a) => F.softmax!(a, -1), [rand([0, 7], 4)]);
  noStaging(['softmax']);
});

test('softmax with masks and causal rows (attention composed path)', { skip }, () => {
  for (const dt of ['float32', 'bfloat16'] as const) {
    const q = rand([2, 3, 9, 16], 5, -1, 1, dt), k = rand([2, 3, 11, 16], 6, -1, 1, dt), v = rand([2, 3, 11, 16], 7, -1, 1, dt);
    const bm = nbx.gt(rand([9, 11], 8), -0.5) as Tensor, fm = rand([3, 1, 11], 9, -2, 0, dt);
    check(`sdpa bool mask ${dt}`, (a, b, c, m) => F.scaled_dot_product_attention!(a, b, c, { attn_mask: m }), [q, k, v, bm]);
    check(`sdpa float mask ${dt}`, (a, b, c, m) => F.scaled_dot_product_attention!(a, b, c, { attn_mask: m }), [q, k, v, fm]);
    check(`sdpa causal ${dt}`, (a, b, c) => F.scaled_dot_product_attention!(a, b, c, { is_causal: true }), [q, k, v]);
  }
});

test('layer_norm / rms_norm: dtypes, lengths, weight/bias present or absent, float32 parameters, eps', { skip }, () => {
  for (const dt of FLOAT_DTYPES) {
    for (const n of LENGTHS) {
      const x = rand([rowsFor(n), n], n + 11, -3, 5, dt), w = rand([n], n + 12, 0.5, 1.5, dt), b = rand([n], n + 13, -1, 1, dt);
      check(`layer_norm ${dt} n${n}`, (a) => F.layer_norm!(a, [n]), [x]);
      check(`layer_norm wb ${dt} n${n}`, (a, c, d) => F.layer_norm!(a, [n], c, d, { eps: 1e-3 }), [x, w, b]);
      if (n % 2) check(`layer_norm w ${dt} n${n}`, (a, c) => F.layer_norm!(a, [n], c), [x, w]);
      else check(`layer_norm b ${dt} n${n}`, (a, d) => F.layer_norm!(a, [n], null, d), [x, b]);
      check(`rms_norm ${dt} n${n}`, (a) => F.rms_norm!(a, [n]), [x]);
      check(`rms_norm w ${dt} n${n}`, (a, c) => F.rms_norm!(a, [n], c, { eps: 1e-4 }), [x, w]);
      if (dt === 'bfloat16' || dt === 'float16') {
        const w32 = rand([n], n + 14, 0.5, 1.5), b32 = rand([n], n + 15, -1, 1);
        check(`layer_norm f32 params ${dt} n${n}`, (a, c, d) => F.layer_norm!(a, [n], c, d), [x, w32, b32]);
        check(`rms_norm f32 weight ${dt} n${n}`, (a, c) => F.rms_norm!(a, [n], c), [x, w32]);
      }
    }
  }
  noStaging(['row_norm']);
});

test('layer_norm / rms_norm: multi-dim normalized shapes, views, offsets, large means', { skip }, () => {
  const x = rand([4, 6, 10, 16], 21, -2, 2);
  check('layer_norm [10,16]', (a, w, b) => F.layer_norm!(a, [10, 16], w, b), [x, rand([10, 16], 22), rand([10, 16], 23)]);
  check('rms_norm [6,10,16]', (a) => F.rms_norm!(a, [6, 10, 16]), [x]);
  check('layer_norm of a transposed view', (a) => F.layer_norm!(a.transpose(1, 3), [6]), [x]);
  const y = rand([5 * 64 + 1], 24, -2, 2, 'bfloat16');
  check('layer_norm offset rows', (a) => F.layer_norm!(a.narrow(0, 1, 5 * 64).reshape([5, 64]), [64]), [y]);
  check('rms_norm unaligned weight', (a, w) => F.rms_norm!(a, [64], w.narrow(0, 1, 64)), [rand([5, 64], 25, -1, 1, 'bfloat16'), rand([65], 26, 0.5, 1.5, 'bfloat16')]);
  // |mean| >> std: sums shifted by the row's first element keep the mean's digits; what is left is the
  // float32 rounding of the mean itself (ulp(1000)/2 = 3e-5, over std 0.58), unshifted sums were 2e-4 off
  check('layer_norm large mean', (a) => F.layer_norm!(a, [300]), [nbx.add(rand([7, 300], 27, -1, 1), 1000) as Tensor], [1e-4, 1e-4]);
  check('layer_norm empty rows', (a) => F.layer_norm!(a, [8]), [rand([0, 8], 28)]);
  noStaging(['row_norm']);
});

test('group_norm, instance_norm and batch_norm statistics through row_norm', { skip }, () => {
  for (const dt of FLOAT_DTYPES) {
    const x = rand([3, 6, 5, 7], 31, -2, 3, dt), w = rand([6], 32, 0.5, 1.5, dt), b = rand([6], 33, -1, 1, dt);
    check(`group_norm ${dt}`, (a, c, d) => F.group_norm!(a, 3, c, d), [x, w, b]);
    check(`group_norm no affine ${dt}`, (a) => F.group_norm!(a, 2, null, null, { eps: 1e-3 }), [x]);
    check(`group_norm 1d ${dt}`, (a, c) => F.group_norm!(a, 6, c), [rand([4, 6, 8], 34, -2, 2, dt), w]);
    check(`instance_norm ${dt}`, (a, c, d) => F.instance_norm!(a, null, null, c, d), [x, w, b]);
    check(`batch_norm train ${dt}`, (a, c, d) => F.batch_norm!(a, null, null, c, d, { training: true }), [x, w, b]);
  }
  noStaging(['row_norm']);
});

test('same bits every run (fixed reduction order)', { skip }, () => {
  const x = rand([16, EMU ? 512 : 8192], 41, -3, 3, 'bfloat16').to('cuda'), w = rand([EMU ? 512 : 8192], 42, 0.5, 1.5, 'bfloat16').to('cuda');
  const n = x.shape[1]!;
  for (const f of [(a: Tensor) => F.softmax!(a, -1), (a: Tensor) => F.layer_norm!(a, [n], w), (a: Tensor) => F.rms_norm!(a, [n], w)]) {
    const p = f(x), q = f(x);
    assert.deepEqual(Array.from(p.dataStorageSync() as Uint16Array), Array.from(q.dataStorageSync() as Uint16Array));
    p.dispose(); q.dispose();
  }
  x.dispose(); w.dispose();
});
