// linalg family against PyTorch goldens: test/gen/linalg.py writes test/fixtures/linalg_*.json (torch
// 1.13; half-precision products computed in float32 and rounded once, as PyTorch 2.x). Every golden
// runs twice: through the system BLAS and through the fallback kernels (WebAssembly SIMD / JS). The
// gemm kernel itself is checked against a plain triple loop for every transpose, offset, leading
// dimension and batch stride, on both paths, threaded sizes included.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync, readdirSync } from 'node:fs';
import * as nbx from '../src/index.js';
import { decodeArg, makeTensor, numOf, resolveOp as resolve, type Enc, type Num } from './golden.js';
import { assertClose, caseCall, goldenFiles, type GoldenCase, type GoldenFixture } from './golden.js';
import { Tensor } from '../src/tensor/tensor.js';
import type { DTypeName } from '../src/dtype/dtypes.js';
import { kernel } from '../src/kernels/registry.js';
import { blasInfo, setBlasEnabled } from '../src/backend/cpu/runtime/blas.js';
import type { GemmParams } from '../src/kernels/gemm.js';

type Case = GoldenCase;
type Fixture = GoldenFixture;
const { dir, files: fixtures } = goldenFiles('linalg');


function runFixture(fx: Fixture): string[] {
  const failures: string[] = [];
  for (const c of fx.cases) {
    nbx.scope(() => {
      const { call, args } = caseCall(c, fx.tensors);
      try {
        if (c.error) {
          let err: unknown;
          try { call(); } catch (e) { err = e; }
          assert.ok(err, 'expected an error');
          assert.equal((err as Error).constructor.name, c.error, `error class (${(err as Error).message}; torch: ${c.torch_message})`);
          return;
        }
        assertClose(call() as Tensor, c.out![0]!, c.rtol!, c.atol!, 'out');
      } catch (e) {
        failures.push(`${c.name}: ${(e as Error).message.split('\n')[0]}`);
      }
    });
  }
  return failures;
}

for (const file of fixtures) {
  const fx = JSON.parse(readFileSync(new URL(file, dir), 'utf8')) as Fixture;
  for (const blas of [true, false]) {
    test(`goldens ${file} (${fx.cases.length} cases, ${blas ? 'BLAS' : 'fallback kernels'})`, () => {
      const was = setBlasEnabled(blas);
      try { assert.deepEqual(runFixture(fx), []); } finally { setBlasEnabled(was); }
    });
  }
}

// ---- the gemm kernel on its own ---------------------------------------------------------------------

/** A deterministic pseudo-random sequence (no Math.random: failures must reproduce). */
function lcg(seed: number): () => number {
  let s = seed >>> 0;
  return () => { s = (Math.imul(s, 1664525) + 1013904223) >>> 0; return s / 2 ** 32; };
}

function naive(p: GemmParams, A: ArrayLike<number>, B: ArrayLike<number>, C: Float64Array): void {
  for (let q = 0; q < (p.batch ?? 1); q++) {
    for (let i = 0; i < p.m; i++) {
      for (let j = 0; j < p.n; j++) {
        let s = 0;
        for (let l = 0; l < p.k; l++) {
          s += A[p.a.offset + q * (p.strideA ?? 0) + (p.transA ? l * p.lda + i : i * p.lda + l)]!
            * B[p.b.offset + q * (p.strideB ?? 0) + (p.transB ? j * p.ldb + l : l * p.ldb + j)]!;
        }
        const ci = p.c.offset + q * (p.strideC ?? 0) + i * p.ldc + j;
        C[ci] = p.alpha * s + (p.beta === 0 ? 0 : p.beta * C[ci]!);
      }
    }
  }
}

function checkGemm(rand: () => number, F: Float32ArrayConstructor | Float64ArrayConstructor, dims: [number, number, number], what: string): void {
  const [m, n, k] = dims;
  const R = (x: number): number => Math.floor(rand() * x);
  const transA = rand() < 0.5, transB = rand() < 0.5, batch = 1 + R(3);
  const lda = (transA ? m : k) + R(3), ldb = (transB ? k : n) + R(3), ldc = n + R(3);
  const sA = (transA ? k : m) * lda + R(5), sB = (transB ? n : k) * ldb + R(5), sC = m * ldc + R(5);
  const oa = R(7), ob = R(7), oc = R(7);
  const fill = (len: number): Float32Array | Float64Array => { const x = new F(len); for (let i = 0; i < len; i++) x[i] = rand() * 2 - 1; return x; };
  const A = fill(oa + sA * batch), B = fill(ob + sB * batch), C = fill(oc + sC * batch);
  const alpha = [1, 0.5, -2][R(3)]!, beta = [0, 1, 0.25][R(3)]!;
  if (beta === 0) C.fill(NaN); // beta = 0 must never read C
  const dtype = F === Float32Array ? 'float32' : 'float64';
  const ref = (buf: unknown, offset: number) => ({ buf, dtype: dtype as DTypeName, shape: [], strides: [], offset });
  const p: GemmParams = { transA, transB, m, n, k, alpha, beta, a: ref(A, oa), lda, b: ref(B, ob), ldb, c: ref(C, oc), ldc, batch, strideA: sA, strideB: sB, strideC: sC };
  const want = Float64Array.from(C);
  naive(p, A, B, want);
  kernel('gemm', 'cpu')(p);
  const tol = F === Float32Array ? 2e-5 * Math.sqrt(k + 1) : 1e-12 * (k + 1);
  for (let i = 0; i < C.length; i++) {
    const inside = want[i]!, got = C[i]!;
    if (Number.isNaN(inside) && Number.isNaN(got)) continue;
    assert.ok(Math.abs(got - inside) <= tol * (1 + Math.abs(inside)),
      `${what} ${dtype} m${m} n${n} k${k} tA${transA} tB${transB} batch${batch} lda${lda} ldb${ldb} ldc${ldc} alpha${alpha} beta${beta} [${i}]: ${got} vs ${inside}`);
  }
}

for (const blas of [true, false]) {
  test(`gemm kernel: transposes, offsets, leading dims, batches (${blas ? 'BLAS' : 'fallback'})`, () => {
    const was = setBlasEnabled(blas);
    try {
      const rand = lcg(blas ? 7 : 8);
      for (let t = 0; t < 150; t++) {
        const R = (x: number): number => 1 + Math.floor(rand() * x);
        checkGemm(rand, t % 2 ? Float32Array : Float64Array, [R(40), R(40), R(40)], 'small');
      }
      // sizes that reach the threaded path, ragged against the 4×8 tiles and the KC/MC blocks
      for (const dims of [[131, 77, 300], [9, 260, 517], [300, 3, 129], [2, 400, 64]] as [number, number, number][]) {
        checkGemm(rand, Float32Array, dims, 'large');
        checkGemm(rand, Float64Array, dims, 'large');
      }
    } finally { setBlasEnabled(was); }
  });
}

test('gemm kernel: k = 0 scales C by beta; beta = 0 clears NaN', () => {
  for (const blas of [true, false]) {
    const was = setBlasEnabled(blas);
    try {
      const C = new Float32Array([1, 2, NaN, 4]);
      const r = (buf: unknown) => ({ buf, dtype: 'float32' as DTypeName, shape: [], strides: [], offset: 0 });
      kernel('gemm', 'cpu')({ transA: false, transB: false, m: 2, n: 2, k: 0, alpha: 1, beta: 0.5, a: r(new Float32Array(0)), lda: 1, b: r(new Float32Array(0)), ldb: 2, c: r(C), ldc: 2 });
      assert.deepEqual([...C].map(String), ['0.5', '1', 'NaN', '2']);
      C.set([NaN, NaN, NaN, NaN]);
      kernel('gemm', 'cpu')({ transA: false, transB: false, m: 2, n: 2, k: 1, alpha: 1, beta: 0, a: r(new Float32Array([1, 2])), lda: 1, b: r(new Float32Array([3, 4])), ldb: 2, c: r(C), ldc: 2 });
      assert.deepEqual([...C], [3, 4, 6, 8]);
    } finally { setBlasEnabled(was); }
  }
});

test('matmul: large float32 products agree between BLAS and the fallback (threaded path)', () => {
  const rand = lcg(3);
  const a = nbx.tensor(Float32Array.from({ length: 190 * 260 }, () => rand() - 0.5)).reshape([190, 260]);
  const b = nbx.tensor(Float32Array.from({ length: 260 * 150 }, () => rand() - 0.5)).reshape([150, 260]).t();
  const x = (nbx.matmul(a, b) as Tensor).dataSync() as Float32Array;
  const was = setBlasEnabled(false);
  try {
    const y = (nbx.matmul(a, b) as Tensor).dataSync() as Float32Array;
    for (let i = 0; i < x.length; i++) assert.ok(Math.abs(x[i]! - y[i]!) < 1e-4, `[${i}] ${x[i]} vs ${y[i]}`);
  } finally { setBlasEnabled(was); }
});

test('matmul: transposed and sliced operands reach the kernel without copies', () => {
  const a = nbx.tensor(Float32Array.from({ length: 24 }, (_, i) => i)).reshape([4, 6]);
  const b = nbx.tensor(Float32Array.from({ length: 30 }, (_, i) => i % 7)).reshape([5, 6]);
  // b.t() is a transposed view; a.slice keeps row stride 6 with 3 columns: both are gemm layouts.
  const r = nbx.matmul(a.slice(1, 0, 3), b.t().slice(0, 0, 3)) as Tensor;
  const want = nbx.matmul(a.slice(1, 0, 3).contiguous(), b.t().slice(0, 0, 3).contiguous()) as Tensor;
  assert.deepEqual(r.tolist(), want.tolist());
});

test('methods, aliases and namespaces', () => {
  const a = nbx.tensor([[1, 2], [3, 4]], { dtype: 'float32' }), v = nbx.tensor([1, -1], { dtype: 'float32' });
  assert.deepEqual((a.matmul(a) as Tensor).tolist(), [[7, 10], [15, 22]]);
  assert.deepEqual((a.__matmul__(v) as Tensor).tolist(), [-1, -1]);
  assert.deepEqual((a.__rmatmul__(v) as Tensor).tolist(), [-2, -2]);
  assert.deepEqual((a.mm(a) as Tensor).tolist(), (nbx.linalg.matmul!(a, a) as Tensor).tolist());
  assert.deepEqual((v.outer(v) as Tensor).tolist(), [[1, -1], [-1, 1]]);
  assert.deepEqual((v.ger(v) as Tensor).tolist(), [[1, -1], [-1, 1]]);
  assert.equal((a.trace() as Tensor).item(), 5);
  assert.equal((v.dot(v) as Tensor).item(), 2);
  assert.deepEqual((a.matrix_power(2) as Tensor).tolist(), [[7, 10], [15, 22]]);
  assert.deepEqual((nbx.nn.functional.linear!(v, a) as Tensor).tolist(), [-1, -1]);
  assert.deepEqual((a.addmm(a, a, { beta: 0 }) as Tensor).tolist(), [[7, 10], [15, 22]]);
  assert.throws(() => nbx.mm(a, a, { alpha: 2 }), /unexpected keyword argument 'alpha'/);
  assert.throws(() => nbx.matrix_power(a, -1), nbx.UnsupportedError);
  assert.throws(() => nbx.matmul(a, 3 as unknown as Tensor), nbx.ValueError);
  assert.match(blasInfo(), /\S/);
});

test('matmul: float16 rounds once after float32 accumulation', () => {
  // 2048 ones: float16 accumulation would stop at 2048 only by luck; 4097 terms of 1 exceed float16's
  // integer range (2048..4096 step 2), so a single final rounding gives 4096.
  const n = 4097;
  const a = nbx.ones([1, n], { dtype: 'float16' }), b = nbx.ones([n, 1], { dtype: 'float16' });
  assert.equal((nbx.matmul(a, b) as Tensor).item(), 4096);
});
