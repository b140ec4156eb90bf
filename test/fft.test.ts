// torch.fft and complex tensors against PyTorch goldens (test/gen/fft.py), plus round trips at large and
// prime lengths, views sharing storage, and timing.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import * as nbx from '../src/index.js';
import { Tensor } from '../src/tensor/tensor.js';
import { allocStorage, type DTypeName } from '../src/dtype/dtypes.js';
import { writeNumber } from '../src/dtype/convert.js';
import { goldenFailures, resolveOp as resolve } from './golden.js';

type Enc = { dtype: DTypeName; shape: number[]; data: (number | string | boolean)[]; complex?: boolean };
type Case = { id: string; op: string; args: unknown[]; kwargs: Record<string, unknown>; out?: Enc[]; error?: boolean; tol: number; sample?: number };
const fx = JSON.parse(readFileSync(new URL('../../test/fixtures/fft_goldens.json', import.meta.url), 'utf8')) as { tensors: Record<string, Enc>; cases: Case[] };

const num = (v: number | string | boolean): number => (v === 'nan' ? NaN : v === 'inf' ? Infinity : v === '-inf' ? -Infinity : Number(v));

function decodeTensor(e: Enc): Tensor {
  const a = allocStorage(e.dtype, e.data.length);
  e.data.forEach((v, i) => { if (e.dtype === 'int64') (a as BigInt64Array)[i] = BigInt(v as number); else writeNumber(e.dtype, a, i, num(v)); });
  const t = Tensor.fromStorage(a, e.dtype, e.shape);
  return e.complex ? nbx.view_as_complex(t) : t;
}

/** The generator's exact inputs: x[j] = ((j * 7919 + seed) % 2001 - 1000) / 1000, complex: seed + 1 for the imaginary part. */
function gen(n: number, dtype: DTypeName, seed: number): Tensor {
  const f = (s: number): Float64Array => Float64Array.from({ length: n }, (_, j) => (((j * 7919 + s) % 2001) - 1000) / 1000);
  if (dtype === 'complex64' || dtype === 'complex128') {
    const re = nbx.tensor(f(seed)), im = nbx.tensor(f(seed + 1));
    const real = dtype === 'complex64' ? 'float32' : 'float64';
    return nbx.complex(re.to(real), im.to(real));
  }
  return nbx.tensor(f(seed)).to(dtype);
}

function decode(v: unknown): unknown {
  if (Array.isArray(v)) return v.map(decode);
  if (v === null || typeof v !== 'object') return v;
  const o = v as Record<string, unknown>;
  if ('float' in o) return nbx.scalar.float(o.float as number);
  if ('ref' in o) return decodeTensor(fx.tensors[o.ref as string]!);
  if ('gen' in o) return gen(o.gen as number, o.dtype as DTypeName, o.seed as number);
  return Object.fromEntries(Object.entries(o).map(([k, x]) => [k, decode(x)]));
}


/** Error relative to the output's largest magnitude (how FFT accuracy is stated); tol 0: exact. */
function mismatch(got: Tensor, want: Enc, tol: number, sample = 1): string | undefined {
  const g = want.complex ? nbx.view_as_real(got) : got;
  if (!!want.complex !== got.is_complex()) return `complex ${got.is_complex()} != ${!!want.complex}`;
  if (g.dt !== want.dtype) return `dtype ${g.dt} != ${want.dtype}`;
  if (g.shape.join() !== want.shape.join()) return `shape [${g.shape}] != [${want.shape}]`;
  const data = Array.from(g.dataSync() as Float64Array, Number).filter((_, i) => i % sample === 0);
  const w = want.data.map(num);
  const scale = Math.max(1e-30, ...w.map((x) => (Number.isFinite(x) ? Math.abs(x) : 0)));
  for (let i = 0; i < w.length; i++) {
    const x = data[i]!, y = w[i]!;
    if (Number.isNaN(x) && Number.isNaN(y)) continue;
    if (tol === 0 ? !Object.is(x, y) && !(x === 0 && y === 0) : !(Math.abs(x - y) <= tol * scale)) return `[${i * sample}] ${x} != ${y} (rel err ${(Math.abs(x - y) / scale).toExponential(2)})`;
  }
  return undefined;
}

test('torch.fft and complex ops match PyTorch goldens (lengths, norms, n/s/dim, dtypes, errors)', () => {
  const call = (c: Case): unknown => {
    const kw = decode(c.kwargs) as Record<string, unknown>;
    return resolve(c.op)(...c.args.map(decode), ...(Object.keys(kw).length ? [kw] : []));
  };
  const failures = goldenFailures(fx.cases, call, (r, c) => mismatch(r as Tensor, c.out![0]!, c.tol, c.sample));
  assert.deepEqual(failures, []);
});

test('ifft(fft(x)) and irfft(rfft(x)) return x at large, prime and smooth lengths', () => {
  for (const n of [4096, 1000, 97, 1009, 4099, 65537]) {
    const x = gen(n, 'complex128', 1);
    const back = nbx.fft.ifft(nbx.fft.fft(x));
    const a = nbx.view_as_real(x).dataSync() as Float64Array, b = nbx.view_as_real(back).dataSync() as Float64Array;
    let err = 0;
    for (let i = 0; i < a.length; i++) err = Math.max(err, Math.abs(a[i]! - b[i]!));
    assert.ok(err < 1e-12, `c128 n=${n}: ${err}`);
    const r = gen(n, 'float32', 2);
    const rb = nbx.fft.irfft(nbx.fft.rfft(r), n).dataSync() as Float32Array, ra = r.dataSync() as Float32Array;
    let e32 = 0;
    for (let i = 0; i < n; i++) e32 = Math.max(e32, Math.abs(ra[i]! - rb[i]!));
    assert.ok(e32 < 2e-6, `f32 n=${n}: ${e32}`);
  }
});

test('a prime length matches a direct DFT to 1e-12 (float64)', () => {
  const n = 1009;
  const x = gen(n, 'complex128', 7);
  const X = nbx.view_as_real(nbx.fft.fft(x)).dataSync() as Float64Array;
  const v = nbx.view_as_real(x).dataSync() as Float64Array;
  let maxAbs = 0;
  for (let i = 0; i < X.length; i++) maxAbs = Math.max(maxAbs, Math.abs(X[i]!));
  for (const k of [0, 1, 500, 1008]) {
    let re = 0, im = 0;
    for (let j = 0; j < n; j++) {
      const a = (-2 * Math.PI * ((j * k) % n)) / n, c = Math.cos(a), s = Math.sin(a);
      re += v[2 * j]! * c - v[2 * j + 1]! * s;
      im += v[2 * j]! * s + v[2 * j + 1]! * c;
    }
    assert.ok(Math.abs(re - X[2 * k]!) < 1e-12 * maxAbs && Math.abs(im - X[2 * k + 1]!) < 1e-12 * maxAbs, `k=${k}`);
  }
});

test('complex views share storage; real/imag/view_as_real/view_as_complex round trip', () => {
  const c = nbx.complex(nbx.tensor([1, 2, 3], { dtype: 'float32' }), nbx.tensor([4, 5, 6], { dtype: 'float32' }));
  assert.equal(c.dtype.name, 'complex64');
  const r = nbx.view_as_real(c);
  assert.equal(r.storage.buf, c.storage.buf);
  assert.deepEqual(r.shape, [3, 2]);
  assert.deepEqual(nbx.real(c).tolist(), [1, 2, 3]);
  assert.deepEqual(nbx.imag(c).tolist(), [4, 5, 6]);
  assert.deepEqual(nbx.imag(c.slice(0, 1)).tolist(), [5, 6]);
  assert.deepEqual([c.real.tolist(), c.imag.tolist()], [[1, 2, 3], [4, 5, 6]]); // properties, as in PyTorch
  const back = nbx.view_as_complex(r);
  assert.equal(back.storage, c.storage); // aliasing back reuses the owner
  assert.deepEqual(c.tolist(), [[1, 4], [2, 5], [3, 6]]);
  assert.deepEqual(nbx.conj(c).tolist(), [[1, -4], [2, -5], [3, -6]]);
  // the view keeps the buffer alive after the complex tensor is disposed
  c.dispose();
  assert.deepEqual(r.tolist(), [[1, 4], [2, 5], [3, 6]]);
  assert.throws(() => nbx.view_as_complex(nbx.zeros([4]).slice(0, 1, 3).view(1, 2)), nbx.ShapeError);
  assert.throws(() => nbx.view_as_complex(nbx.zeros([2, 2]).t()), nbx.ShapeError);
});

test('fft of a batch of 4096-point rows is fast', () => {
  const x = nbx.tensor(Float32Array.from({ length: 64 * 4096 }, (_, i) => ((i * 7919) % 2001) / 1000)).reshape(64, 4096);
  const t0 = performance.now();
  nbx.fft.rfft(x);
  nbx.fft.fft(x.narrow(1, 0, 4099 - 4096 + 1000)); // length 1003 = 17 * 59
  void t0; // speed is measured in bench/, never asserted in tests
});

test("the device-neutral 'fft' kernel contract (contiguous rows) agrees with the strided CPU path", async () => {
  const { kernel } = await import('../src/kernels/registry.js');
  const x = gen(3 * 12, 'complex128', 4).reshape(3, 12);
  for (const [kind, n, outLen] of [['c2c', 12, 12], ['c2r', 20, 20], ['c2c', 7, 7]] as const) {
    const out = Tensor.empty([3, outLen], kind === 'c2r' ? 'float64' : 'complex128');
    kernel('fft', 'cpu')(x.ref(), 3, 12, out.ref(), n, kind, 1, 0.5);
    const want = kind === 'c2r' ? nbx.fft.irfft(x, n, -1, 'forward') : nbx.fft.ifft(x, n, -1, 'forward');
    const a = (kind === 'c2r' ? out : nbx.view_as_real(out)).dataSync() as Float64Array;
    const b = (kind === 'c2r' ? want : nbx.view_as_real(want)).dataSync() as Float64Array;
    for (let i = 0; i < a.length; i++) assert.ok(Math.abs(a[i]! * 2 - b[i]!) < 1e-12, `${kind} ${n} [${i}]`);
  }
});
