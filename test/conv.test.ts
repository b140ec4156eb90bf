// Convolution tests: goldens from torch 1.13 (test/gen/conv.py) plus checks of the kernel paths
// (depthwise, shifted GEMM for stride 1, im2col) against a direct reference, error classes, and
// float16/bfloat16 rounding once.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import * as nbx from '../src/index.js';
import { Tensor } from '../src/tensor/tensor.js';
import { DTypeError, ShapeError, ValueError } from '../src/errors.js';
import { assertGoldens } from './conv_golden.js';
import { setShiftMode, setSimdDepthwise, type ShiftMode } from '../src/backend/cpu/kernels/conv.js';

const F = nbx.nn.functional;

function rand(shape: number[], seed: number, dtype: nbx.DTypeName = 'float64'): Tensor {
  let s = seed >>> 0;
  const n = shape.reduce((a, b) => a * b, 1);
  const data = Array.from({ length: n }, () => { s = (Math.imul(s, 1664525) + 1013904223) >>> 0; return s / 2 ** 31 - 1; });
  return nbx.tensor(data, { dtype }).reshape(shape);
}

/** Direct N-d convolution (any dims), the textbook sum, in float64. */
function naiveConv2d(x: Tensor, w: Tensor, b: Tensor | null, stride: number[], pad: number[], dil: number[], groups: number): number[][][][] {
  const [N, C, H, W] = x.shape as number[];
  const [CO, CIg, KH, KW] = w.shape as number[];
  const X = x.tolist() as number[][][][], Wt = w.tolist() as number[][][][], B = b ? (b.tolist() as number[]) : null;
  const OH = Math.floor((H! + 2 * pad[0]! - dil[0]! * (KH! - 1) - 1) / stride[0]!) + 1;
  const OW = Math.floor((W! + 2 * pad[1]! - dil[1]! * (KW! - 1) - 1) / stride[1]!) + 1;
  const COg = CO! / groups;
  const out: number[][][][] = [];
  for (let n = 0; n < N!; n++) {
    out.push([]);
    for (let co = 0; co < CO!; co++) {
      const g = Math.floor(co / COg);
      const plane: number[][] = [];
      for (let oh = 0; oh < OH; oh++) {
        const row: number[] = [];
        for (let ow = 0; ow < OW; ow++) {
          let acc = B ? B[co]! : 0;
          for (let ci = 0; ci < CIg!; ci++) for (let kh = 0; kh < KH!; kh++) for (let kw = 0; kw < KW!; kw++) {
            const ih = oh * stride[0]! - pad[0]! + kh * dil[0]!, iw = ow * stride[1]! - pad[1]! + kw * dil[1]!;
            if (ih >= 0 && ih < H! && iw >= 0 && iw < W!) acc += X[n]![g * CIg! + ci]![ih]![iw]! * Wt[co]![ci]![kh]![kw]!;
          }
          row.push(acc);
        }
        plane.push(row);
      }
      out[n]!.push(plane);
    }
  }
  void C;
  return out;
}

function close(got: Tensor, want: number[][][][], tol: number): void {
  const g = got.dataSync(), w = want.flat(3);
  assert.equal(g.length, w.length);
  for (let i = 0; i < w.length; i++) assert.ok(Math.abs(Number(g[i]) - w[i]!) <= tol * (1 + Math.abs(w[i]!)), `element ${i}: ${g[i]} vs ${w[i]}`);
}

test('conv goldens (torch 1.13)', () => assertGoldens('conv_goldens'));

test('conv goldens with every stride-1 strategy and the scalar depthwise path', () => {
  for (const m of ['row', 'all'] as ShiftMode[]) {
    const old = setShiftMode(m);
    try { assertGoldens('conv_goldens'); } finally { setShiftMode(old); }
  }
  const old = setSimdDepthwise(false);
  try { assertGoldens('conv_goldens'); } finally { setSimdDepthwise(old); }
});

test('SIMD depthwise rows match the float64 direct sum (3-D, multiplier, dilation, odd widths)', () => {
  const x = rand([1, 3, 3, 5, 11], 41), w = rand([6, 1, 2, 3, 3], 42), b = rand([6], 43);
  const opts = { padding: [1, 1, 2], dilation: [1, 2, 1], stride: [2, 1, 1], groups: 3 };
  const want = F.conv3d(x, w, b, opts).dataSync();
  const got = F.conv3d(x.to('float32'), w.to('float32'), b.to('float32'), opts).dataSync();
  assert.equal(got.length, want.length);
  Array.from(want as Float64Array).forEach((v, i) => assert.ok(Math.abs(Number(got[i]) - v) < 1e-5 * (1 + Math.abs(v)), `${i}`));
});

test('conv2d kernel paths agree with the direct sum', () => {
  const cfgs: [number[], number[], number[], number[], number[], number, boolean][] = [
    // x shape, w shape, stride, padding, dilation, groups, bias
    [[2, 4, 7, 6], [6, 4, 3, 3], [1, 1], [1, 1], [1, 1], 1, true], // shifted GEMM
    [[1, 6, 9, 5], [4, 3, 2, 3], [1, 1], [0, 2], [2, 1], 2, false], // shifted GEMM, groups, dilation
    [[2, 4, 7, 6], [6, 4, 3, 3], [2, 1], [1, 0], [1, 2], 1, true], // im2col
    [[1, 4, 6, 6], [8, 1, 3, 3], [2, 2], [1, 1], [1, 1], 4, true], // depthwise, multiplier 2
    [[2, 3, 5, 5], [5, 3, 1, 1], [1, 1], [0, 0], [1, 1], 1, true], // pointwise (no im2col)
  ];
  cfgs.forEach(([xs, ws, s, p, d, g, hasB], i) => {
    const x = rand(xs, 10 + i), w = rand(ws, 20 + i), b = hasB ? rand([ws[0]!], 30 + i) : null;
    for (const dt of ['float64', 'float32'] as const) {
      const r = F.conv2d(x.to(dt), w.to(dt), b ? b.to(dt) : null, { stride: s, padding: p, dilation: d, groups: g });
      assert.equal(r.dt, dt);
      close(r, naiveConv2d(x, w, b, s, p, d, g), dt === 'float64' ? 1e-12 : 1e-5);
    }
  });
});

test("padding='same' keeps the size, with the odd extra on the right", () => {
  const x = rand([1, 1, 6, 7], 1), w = rand([1, 1, 4, 2], 2);
  const r = F.conv2d(x, w, null, { padding: 'same' });
  assert.deepEqual(r.shape, [1, 1, 6, 7]);
  // Left pads are floor((k-1)/2) = (1, 0): equal to explicit padding on a right-padded input.
  // Reference: pad (2, 1) on both sides (the right-hand amounts), then drop the extra left output.
  const full = naiveConv2d(x, w, null, [1, 1], [2, 1], [1, 1], 1);
  const want = full.map((n) => n.map((c) => c.slice(1, 7).map((row) => row.slice(1, 8))));
  close(r, want, 1e-12);
});

test('unbatched input gives an unbatched result', () => {
  const r = F.conv1d(rand([3, 10], 3), rand([2, 3, 3], 4), null, { stride: 2 });
  assert.deepEqual(r.shape, [2, 4]);
  const t = F.conv_transpose2d(rand([3, 4, 4], 5), rand([3, 2, 3, 3], 6));
  assert.deepEqual(t.shape, [2, 6, 6]);
});

test('half types compute in float32 and round once', () => {
  const x = rand([1, 3, 5, 5], 7, 'float32'), w = rand([2, 3, 3, 3], 8, 'float32');
  for (const dt of ['float16', 'bfloat16'] as const) {
    const xh = x.to(dt), wh = w.to(dt);
    const want = F.conv2d(xh.to('float32'), wh.to('float32'), null, { padding: 1 }).to(dt);
    const got = F.conv2d(xh, wh, null, { padding: 1 });
    assert.equal(got.dt, dt);
    assert.deepEqual(Array.from(got.dataSync()), Array.from(want.dataSync()));
  }
});

test('conv errors are typed', () => {
  const x = rand([2, 4, 9, 8], 1, 'float32'), w = rand([6, 4, 3, 3], 2, 'float32');
  assert.throws(() => F.conv2d(rand([4, 9], 1, 'float32'), w), ShapeError);
  assert.throws(() => F.conv2d(rand([2, 5, 9, 8], 1, 'float32'), w), /expected input\[2, 5, 9, 8\] to have 4 channels, but got 5 channels instead/);
  assert.throws(() => F.conv2d(x, w, null, { groups: 4 }), /expected weight to be divisible by 4 at dimension 0/);
  assert.throws(() => F.conv2d(rand([1, 4, 2, 2], 1, 'float32'), w), /Kernel size can't be greater than actual input size/);
  assert.throws(() => F.conv2d(x, w, null, { stride: 2, padding: 'same' }), ValueError);
  assert.throws(() => F.conv2d(x.to('float64'), w), DTypeError);
  assert.throws(() => F.conv_transpose2d(x.to('int32'), rand([4, 3, 3, 3], 3).to('int32')), DTypeError);
  assert.throws(() => F.conv2d(x.to('bool'), w.to('bool')), DTypeError);
  assert.throws(() => F.conv_transpose2d(x, rand([4, 3, 3, 3], 3, 'float32'), null, { output_padding: 1 }), /output padding must be smaller than either stride or dilation/);
});

test('conv_transpose2d is the adjoint of conv2d', () => {
  // <conv(x, w), y> = <x, conv_transpose(y, w)> for matching stride/padding/dilation/groups.
  const x = rand([2, 4, 7, 8], 11), w = rand([6, 2, 3, 2], 12);
  const opts = { stride: [2, 1], padding: [1, 1], dilation: [1, 2], groups: 2 };
  const y = F.conv2d(x, w, null, opts);
  const r = rand(y.shape as number[], 13);
  const xt = F.conv_transpose2d(r, w, null, { ...opts, output_padding: [0, 0] });
  const sliced = xt.shape[2] === 7 ? xt : xt.slice(2, 0, 7);
  const lhs = nbx.sum(nbx.mul(y, r)).item() as number;
  const rhs = nbx.sum(nbx.mul(x, sliced)).item() as number;
  assert.ok(Math.abs(lhs - rhs) < 1e-9 * (1 + Math.abs(lhs)), `${lhs} vs ${rhs}`);
});
