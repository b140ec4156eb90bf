// CUDA 'conv' / 'conv_transpose' kernels against the CPU kernels (skipped without a CUDA device):
// im2col + GEMM (groups batched over images or per image), pointwise, depthwise (with multipliers),
// strides / padding / dilation / 'same', 1-D to 3-D, bias or none, every float dtype, empty batches,
// non-contiguous inputs, and transposed convolution's GEMM + gather col2im (output_padding, groups).
import { test } from 'node:test';
import * as nbx from '../src/index.js';
import { Tensor } from '../src/tensor/tensor.js';
import { kernel } from '../src/kernels/registry.js';
import type { StridedRef } from '../src/backend/backend.js';
import { setConvColumnBudget } from '../src/backend/cuda/kernels/conv.js';
import { FLOAT_DTYPES, check, noStaging, rand, same, skip } from './cuda_compare.js';
import type { ConvKernelParams } from '../src/kernels/conv.js';

const F = nbx.nn.functional;
const tol = (dt: string): [number, number] | undefined => (dt === 'float32' ? [1e-4, 1e-4] : undefined);

test('conv2d: im2col + GEMM, pointwise, groups, strides, dilation, bias, every float dtype', { skip }, () => {
  for (const dt of FLOAT_DTYPES) {
    const x = rand([2, 6, 9, 8], 1, -1, 1, dt);
    const cases: [string, number[], Record<string, unknown>, boolean][] = [
      ['3x3', [4, 6, 3, 3], {}, true],
      ['3x3 s2 p1', [4, 6, 3, 3], { stride: 2, padding: 1 }, false],
      ['g2 dil2', [4, 3, 3, 3], { groups: 2, padding: [2, 1], dilation: 2 }, true],
      ['g3 > batch', [6, 2, 3, 2], { groups: 3, stride: [1, 2], padding: 1 }, true],
      ['1x1', [5, 6, 1, 1], {}, true],
      ['1x1 g2', [4, 3, 1, 1], { groups: 2 }, false],
      ['1x1 s2', [5, 6, 1, 1], { stride: 2 }, true],
      ['same', [3, 6, 4, 3], { padding: 'same', dilation: [1, 2] }, true],
      ['5x5 s3', [2, 6, 5, 5], { stride: 3, padding: 2 }, false],
    ];
    for (const [name, ws, kw, withBias] of cases) {
      const w = rand(ws, 7, -0.5, 0.5, dt), b = withBias ? rand([ws[0]!], 9, -1, 1, dt) : null;
      check(`conv2d ${name} ${dt}`, (xx, ww, bb) => F.conv2d!(xx, ww, bb ?? null, kw), b ? [x, w, b] : [x, w], tol(dt));
    }
  }
  noStaging(['conv', 'conv_transpose']);
});

test('depthwise conv (multipliers, strides, padding, dilation) and 1-D / 3-D convolutions', { skip }, () => {
  for (const dt of ['float32', 'float64', 'bfloat16'] as const) {
    const x = rand([2, 4, 10, 9], 2, -1, 1, dt);
    check(`depthwise ${dt}`, (a, w, b) => F.conv2d!(a, w, b, { groups: 4, padding: 1 }), [x, rand([4, 1, 3, 3], 3, -1, 1, dt), rand([4], 4, -1, 1, dt)], tol(dt));
    check(`depthwise x2 s2 ${dt}`, (a, w) => F.conv2d!(a, w, null, { groups: 4, stride: 2, padding: [0, 2], dilation: [2, 1] }), [x, rand([8, 1, 3, 5], 5, -1, 1, dt)], tol(dt));
    check(`conv1d ${dt}`, (a, w, b) => F.conv1d!(a, w, b, { padding: 2, stride: 2 }), [rand([3, 4, 17], 6, -1, 1, dt), rand([5, 4, 4], 7, -1, 1, dt), rand([5], 8, -1, 1, dt)], tol(dt));
    check(`conv1d depthwise ${dt}`, (a, w) => F.conv1d!(a, w, null, { groups: 4, padding: 1 }), [rand([3, 4, 17], 6, -1, 1, dt), rand([4, 1, 3], 7, -1, 1, dt)], tol(dt));
    check(`conv3d ${dt}`, (a, w, b) => F.conv3d!(a, w, b, { padding: [0, 1, 1], stride: [1, 2, 1] }), [rand([2, 2, 4, 5, 6], 9, -1, 1, dt), rand([3, 2, 2, 3, 3], 10, -1, 1, dt), rand([3], 11, -1, 1, dt)], tol(dt));
    check(`conv3d depthwise ${dt}`, (a, w) => F.conv3d!(a, w, null, { groups: 2, padding: 1 }), [rand([1, 2, 4, 5, 6], 9, -1, 1, dt), rand([2, 1, 3, 3, 3], 10, -1, 1, dt)], tol(dt));
  }
  noStaging(['conv']);
});

test('conv_transpose: GEMM + gather col2im, output_padding, groups, dilation, the 1x1 direct path', { skip }, () => {
  for (const dt of FLOAT_DTYPES) {
    const x = rand([2, 4, 5, 6], 12, -1, 1, dt);
    check(`convT s2 p1 ${dt}`, (a, w, b) => F.conv_transpose2d!(a, w, b, { stride: 2, padding: 1 }), [x, rand([4, 3, 4, 4], 13, -0.5, 0.5, dt), rand([3], 14, -1, 1, dt)], tol(dt));
    check(`convT g2 outpad ${dt}`, (a, w) => F.conv_transpose2d!(a, w, null, { stride: 2, padding: 1, output_padding: 1, groups: 2 }), [x, rand([4, 2, 3, 3], 15, -0.5, 0.5, dt)], tol(dt));
    check(`convT dil ${dt}`, (a, w) => F.conv_transpose2d!(a, w, null, { stride: [1, 3], dilation: [2, 1], padding: [1, 0], output_padding: [1, 2] }), [x, rand([4, 2, 3, 2], 16, -0.5, 0.5, dt)], tol(dt));
    check(`convT 1x1 ${dt}`, (a, w, b) => F.conv_transpose2d!(a, w, b, {}), [x, rand([4, 5, 1, 1], 17, -0.5, 0.5, dt), rand([5], 18, -1, 1, dt)], tol(dt));
    check(`convT 1x1 g4 ${dt}`, (a, w) => F.conv_transpose2d!(a, w, null, { groups: 4 }), [x, rand([4, 2, 1, 1], 19, -0.5, 0.5, dt)], tol(dt));
    check(`convT1d ${dt}`, (a, w, b) => F.conv_transpose1d!(a, w, b, { stride: 3, padding: 1 }), [rand([2, 3, 7], 20, -1, 1, dt), rand([3, 2, 4], 21, -0.5, 0.5, dt), rand([2], 22, -1, 1, dt)], tol(dt));
    check(`convT3d ${dt}`, (a, w) => F.conv_transpose3d!(a, w, null, { stride: 2, padding: [0, 1, 1], groups: 2 }), [rand([1, 2, 3, 3, 4], 23, -1, 1, dt), rand([2, 2, 2, 3, 3], 24, -0.5, 0.5, dt)], tol(dt));
  }
  noStaging(['conv_transpose']);
});

test('conv: column buffers in chunks of images (small budget)', { skip }, () => {
  const old = setConvColumnBudget(3000);
  try {
    check('chunked conv', (a, w, b) => F.conv2d!(a, w, b, { padding: 1, groups: 2 }), [rand([5, 4, 6, 7], 45), rand([6, 2, 3, 3], 46), rand([6], 47)], [1e-4, 1e-4]);
    check('chunked conv g1', (a, w) => F.conv2d!(a, w, null, { stride: 2 }), [rand([7, 3, 8, 8], 48), rand([4, 3, 3, 3], 49)], [1e-4, 1e-4]);
    check('chunked convT', (a, w, b) => F.conv_transpose2d!(a, w, b, { stride: 2, groups: 2 }), [rand([5, 4, 4, 5], 50), rand([4, 3, 3, 3], 51), rand([6], 52)], [1e-4, 1e-4]);
  } finally { setConvColumnBudget(old); }
});

test('conv: non-contiguous inputs, empty batch, unbatched input, batch larger than groups', { skip }, () => {
  const x = rand([3, 8, 7, 6], 30).permute(0, 1, 3, 2);
  check('permuted input', (a, w, b) => F.conv2d!(a, w, b, { padding: 1, groups: 2 }), [x, rand([6, 4, 3, 3], 31), rand([6], 32)], [1e-4, 1e-4]);
  check('empty batch', (a, w, b) => F.conv2d!(a, w, b), [rand([0, 3, 5, 5], 33), rand([2, 3, 3, 3], 34), rand([2], 35)]);
  check('unbatched', (a, w) => F.conv2d!(a, w, null, { padding: 1 }), [rand([3, 5, 5], 36), rand([2, 3, 3, 3], 37)], [1e-4, 1e-4]);
  check('batch 5, groups 2', (a, w) => F.conv2d!(a, w, null, { groups: 2, stride: 2 }), [rand([5, 4, 9, 9], 38), rand([4, 2, 3, 3], 39)], [1e-4, 1e-4]);
  check('convT empty batch', (a, w) => F.conv_transpose2d!(a, w, null), [rand([0, 2, 3, 3], 40), rand([2, 3, 2, 2], 41)]);
  check('conv NaN / inf propagate', (a, w) => F.conv2d!(a, w, null, { padding: 1 }), [nbx.where(nbx.gt(rand([1, 2, 6, 6], 42), 0.8), NaN, rand([1, 2, 6, 6], 43)) as Tensor, rand([3, 2, 3, 3], 44)], [1e-4, 1e-4]);
});

/** A contiguous tensor's ref seen with a leading size-1 depth dim (the kernels' 3-D layout). */
function ref3(t: Tensor): StridedRef {
  const shape = [t.shape[0]!, t.shape[1]!, 1, ...t.shape.slice(2)];
  return { ...t.ref(), shape, strides: shape.map((_, i) => shape.slice(i + 1).reduce((a, b) => a * b, 1)) };
}

test('conv kernels take float16 / bfloat16 operands natively (GEMM in fp32, one rounding)', { skip }, () => {
  // The op layer widens half inputs to float32; the kernels also take them directly.
  const cfgs: [string, number[], number[], number, number, number, number, boolean][] = [
    // name, x, w, stride, padding, dilation, groups, transposed
    ['im2col', [2, 4, 9, 8], [6, 4, 3, 3], 1, 1, 1, 1, false],
    ['im2col g2 s2', [3, 4, 9, 8], [6, 2, 3, 3], 2, 1, 2, 2, false],
    ['pointwise', [2, 4, 5, 6], [3, 4, 1, 1], 1, 0, 1, 1, false],
    ['depthwise', [2, 4, 7, 7], [8, 1, 3, 3], 2, 1, 1, 4, false],
    ['transposed', [2, 4, 5, 6], [4, 3, 4, 4], 2, 1, 1, 1, true],
    ['transposed g2', [2, 4, 5, 6], [4, 2, 3, 3], 2, 1, 1, 2, true],
    ['transposed 1x1', [2, 4, 5, 6], [4, 3, 1, 1], 1, 0, 1, 1, true],
  ];
  for (const dt of ['float16', 'bfloat16'] as const) {
    for (const [name, xs, ws, st, pad, dil, g, tr] of cfgs) {
      const x = rand(xs, 50, -1, 1, dt), w = rand(ws, 51, -0.5, 0.5, dt), b = rand([tr ? ws[1]! * g : ws[0]!], 52, -1, 1, dt);
      const kw = { stride: st, padding: pad, dilation: dil, groups: g };
      const f32 = (t: Tensor): Tensor => t.to('float32');
      const want = (tr ? F.conv_transpose2d! : F.conv2d!)(f32(x), f32(w), f32(b), kw).to(dt) as Tensor;
      const gx = x.to('cuda'), gw = w.to('cuda'), gb = b.to('cuda');
      const out = Tensor.empty(want.shape, dt, 'cuda');
      const params: ConvKernelParams = {
        x: ref3(gx), w: ref3(gw), bias: gb.ref(), out: ref3(out),
        stride: [1, st, st], padding: [0, pad, pad], dilation: [1, dil, dil], groups: g,
      };
      kernel(tr ? 'conv_transpose' : 'conv', 'cuda')(params);
      same(`${name} ${dt} (direct kernel)`, want, out);
      for (const t of [x, w, b, want, gx, gw, gb, out]) t.dispose();
    }
  }
});
