// CUDA 'fft' kernel against the CPU kernel (skipped without a CUDA device): c2c / r2c / c2r in both
// directions and every norm, lengths that are powers of two, mixed radix, primes up to the direct
// limit, Bluestein lengths (shared-memory and global paths), rows longer than shared memory, padding
// and trimming with n, complex64 / complex128, multi-dimensional transforms.
import { test } from 'node:test';
import * as nbx from '../src/index.js';
import type { Tensor } from '../src/tensor/tensor.js';
import { check, noStaging, rand, skip } from './cuda_compare.js';

const FFT = nbx.fft as Record<string, (...a: unknown[]) => Tensor>;

const cplx = (shape: number[], seed: number, dt: 'float32' | 'float64'): Tensor => nbx.complex(rand(shape, seed, -1, 1, dt), rand(shape, seed + 1, -1, 1, dt));
/** float32 results are float64 sums rounded once: compare relative to the transform's scale. */
const tol = (dt: string, n: number): [number, number] => (dt === 'float64' ? [1e-9, 1e-9 * Math.sqrt(n)] : [1e-5, 1e-5 * Math.sqrt(n)]);

test('fft / ifft / rfft / irfft / hfft / ihfft over many lengths (radix 2/3/4/5, odd primes, Bluestein)', { skip }, () => {
  const lengths = [1, 2, 3, 4, 5, 7, 8, 12, 16, 30, 61, 64, 67, 100, 127, 243, 256, 360, 1000, 1024, 2310];
  for (const n of lengths) {
    for (const dt of ['float32', 'float64'] as const) {
      const x = rand([3, n], n, -1, 1, dt), z = cplx([3, n], n + 7, dt);
      check(`fft ${n} ${dt}`, (a) => FFT.fft!(a), [z], tol(dt, n));
      check(`ifft ${n} ${dt}`, (a) => FFT.ifft!(a, { norm: 'ortho' }), [z], tol(dt, n));
      check(`rfft ${n} ${dt}`, (a) => FFT.rfft!(a), [x], tol(dt, n));
      check(`irfft ${n} ${dt}`, (a) => FFT.irfft!(a, { n: 2 * n }), [z], tol(dt, n));
      check(`hfft ${n} ${dt}`, (a) => FFT.hfft!(a, { n: 2 * n - 1, norm: 'forward' }), [z], tol(dt, n));
      check(`ihfft ${n} ${dt}`, (a) => FFT.ihfft!(a), [x], tol(dt, n));
    }
  }
  noStaging(['fft']);
});

test('fft: padding and trimming with n, real input to c2c, dims, norms, fftn', { skip }, () => {
  const x = rand([4, 3, 10], 1), z = cplx([4, 3, 10], 2, 'float32');
  check('fft n pad', (a) => FFT.fft!(a, { n: 16, dim: 0 }), [z], tol('float32', 16));
  check('fft n trim', (a) => FFT.fft!(a, { n: 6 }), [z], tol('float32', 6));
  check('fft of real', (a) => FFT.fft!(a, { dim: 1, norm: 'forward' }), [x], tol('float32', 3));
  check('irfft trim', (a) => FFT.irfft!(a, { n: 7 }), [z], tol('float32', 7));
  check('rfft n pad prime', (a) => FFT.rfft!(a, { n: 71 }), [x], tol('float32', 71));
  check('fft2', (a) => FFT.fft2!(a), [z], tol('float32', 30));
  check('rfftn', (a) => FFT.rfftn!(a), [x], tol('float32', 120));
  check('irfftn', (a) => FFT.irfftn!(a, { s: [4, 3, 18] }), [z], tol('float32', 216));
  check('fft of a view', (a) => FFT.fft!(a.transpose(0, 2)), [z], tol('float32', 4));
  check('fft empty rows', (a) => FFT.fft!(a), [cplx([0, 8], 3, 'float32')]);
  noStaging(['fft']);
});

test('fft: rows longer than shared memory and large Bluestein lengths (global passes)', { skip }, () => {
  for (const n of [8192, 10007, 12000]) {
    for (const dt of ['float32', 'float64'] as const) {
      const z = cplx([2, n], n, dt);
      check(`fft ${n} ${dt}`, (a) => FFT.fft!(a), [z], tol(dt, n));
      check(`irfft ${n} ${dt}`, (a) => FFT.irfft!(a, { n }), [z], tol(dt, n));
    }
  }
  noStaging(['fft']);
});
