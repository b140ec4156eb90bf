// WebGPU kernels 'fft' and 'fft_strided' with the CPU kernels' signatures and contract
// (contract: src/kernels/fft.ts): one 1-d transform per row along `dim` (any strides): c2c, r2c, c2r, trimmed or
// zero-padded to n points, `sign` +1 through conj(F(conj x)), `scale` applied last.
//
// The algorithm is the CUDA kernel's (src/backend/cuda/kernels/fft.ts): Stockham autosort passes (radix 4,
// 2, then odd factors up to 61 with a generic butterfly), twiddles from a per-length table computed on the
// host with the CPU's exact symmetries; lengths with a larger prime factor go through Bluestein's chirp-z
// with a power-of-two transform of M >= 2n - 1 points (chirp and the chirp's spectrum made on the host in
// float64). WGSL has no float64: the passes run in float32 on float32 tables (error a few ulps times
// log n, well inside the suite's tolerances). Every row is staged through two scratch buffers of
// rows × L complex points, one dispatch per stage: load (gather along the dim, Hermitian extension,
// conjugation, chirp), each radix pass, Bluestein's pointwise product, store (scatter along the dim).

import { DTYPES, type DTypeName } from '../../../dtype/dtypes.js';
import type { StridedRef } from '../../backend.js';
import type { BackendKernels } from '../../../kernels/table.js';
import { WGSL as R, checkWgslDType } from '../../../ir/render_wgsl.js';
import { UnsupportedError } from '../../../errors.js';
import type { Program, WebGPUBackend, WGBuffer } from '../runtime/backend.js';
import { module, U } from '../runtime/elementwise.js';
import { FftPlans } from '../../fft_host.js';
import type { FftKind } from '../../../kernels/fft.js';
import { program } from './util.js';

let be: WebGPUBackend;
export const kernels = {
  fft_strided: webgpuFftStrided,
  fft: (input: StridedRef, rows: number, m: number, out: StridedRef, n: number, kind: FftKind, sign: number, scale: number) => {
    const outLen = kind === 'r2c' ? (n >> 1) + 1 : n;
    webgpuFftStrided({ ...input, shape: [rows, m], strides: [m, 1] }, 1, { ...out, shape: [rows, outLen], strides: [outLen, 1] }, n, kind, sign, scale);
  },
} satisfies BackendKernels;

/** Points this family's kernels at the backend (called once, when the backend starts). */
export function bind(backend: WebGPUBackend): void {
  be = backend;
}

const WG = 64;

// ---- host-side plans (as the CUDA kernel's, tables rounded to float32) ----------------------------

const plans = new FftPlans<WGBuffer, { chirp: WGBuffer; spectrum: WGBuffer }>({
  twiddles: (_L, _factors, table) => be.upload('float32', Float32Array.from(table)),
  releaseTwiddles: (t) => be.free(t),
  chirp: (chirp, spectrum) => ({ chirp: be.upload('float32', Float32Array.from(chirp)), spectrum: be.upload('float32', Float32Array.from(spectrum)) }),
  releaseChirp: (c) => { be.free(c.chirp); be.free(c.spectrum); },
});

// ---- programs ------------------------------------------------------------------------------------


type Stage = 'load' | 'pass' | 'mul' | 'store';
/**
 * uniform: [rows, n, m, L, take, outLen, ioff, ooff, is, os, inv, scale, p, Ns, 0, 0] then per batch dim
 * (outermost first): [size, istride, ostride, 0]. Bindings: b1 written (scratch or output), b2 read
 * (input or scratch), b3 read table (chirp, twiddles or spectrum; a stand-in when unused).
 */
const HEAD = 16;
const cx = (buf: string, i: string): string => `vec2<f32>(bitcast<f32>(${buf}[2u * (${i})]), bitcast<f32>(${buf}[2u * (${i}) + 1u]))`;
const put = (buf: string, i: string, v: string): string => `${buf}[2u * (${i})] = bitcast<u32>(${v}.x); ${buf}[2u * (${i}) + 1u] = bitcast<u32>(${v}.y);`;

function fftProgram(stage: Stage, inD: DTypeName, outD: DTypeName, kind: FftKind, blue: boolean, nb: number): Program {
  const words = HEAD + 4 * nb;
  const access = 'wrr';
  const key = `fft|${stage}|${inD}|${outD}|${kind}|${blue}|${nb}`;
  return program(key, access, words, () => {
    // row -> input and output element offsets along the batch dims
    const dims: string[] = [];
    for (let d = nb - 1; d >= 0; d--) {
      const w = HEAD + 4 * d;
      dims.push(`{ let c = q % ${U(w)}; q = q / ${U(w)}; xo += i32(c) * bitcast<i32>(${U(w + 1)}); oo += i32(c) * bitcast<i32>(${U(w + 2)}); }`);
    }
    const fns = `fn cmul(a: vec2<f32>, b: vec2<f32>) -> vec2<f32> { return vec2<f32>(a.x * b.x - a.y * b.y, a.x * b.y + a.y * b.x); }
fn tw(i: u32) -> vec2<f32> { return ${cx('b3', 'i')}; }`;
    const head = `let rows = ${U(0)}; let n = ${U(1)}; let L = ${U(3)}; let take = ${U(4)}; let outLen = ${U(5)};
  let inv = ${U(10)} != 0u; let scale = bitcast<f32>(${U(11)});`;
    const rowOf = (per: string): string => `let row = g / ${per}; let j = g % ${per}; if (row >= rows) { return; }`;
    const offsets = `var q = row; var xo = i32(${U(6)}); var oo = i32(${U(7)});
  ${dims.join('\n  ')}`;
    let body: string;
    if (stage === 'load') {
      const src = (k: string): string => (DTYPES[inD].kind === 'complex'
        ? cx('b2', `u32(xo + i32(${k}) * bitcast<i32>(${U(8)}))`)
        : `vec2<f32>(${R.load(inD, 'b2', `u32(xo + i32(${k}) * bitcast<i32>(${U(8)}))`)}, 0.0f)`);
      const get = (k: string): string => `select(vec2<f32>(0.0f), ${src(`min(${k}, take - 1u)`)}, ${k} < take)`;
      body = `${head}
  ${rowOf('L')}
  ${offsets}
  var v = vec2<f32>(0.0f);
  ${blue ? 'if (j < n) {' : '{'}
    ${kind === 'c2r' ? `let half = n / 2u + 1u; if (j < half) { v = ${get('j')}; } else { v = ${get('n - j')}; v.y = -v.y; }` : `v = ${get('j')};`}
    if (inv) { v.y = -v.y; }
    ${blue ? 'v = cmul(v, tw(j));' : ''}
  }
  ${put('b1', 'row * L + j', 'v')}`;
    } else if (stage === 'pass') {
      // one Stockham butterfly of radix p: reads a[j + r·L/p], writes b[(j / Ns)·Ns·p + j % Ns + t·Ns]
      const a = (i: string): string => cx('b2', `base + ${i}`);
      body = `${head}
  let p = ${U(12)}; let Ns = ${U(13)}; let Lp = L / p;
  ${rowOf('Lp')}
  let base = row * L; let st = L / (Ns * p); let k = j % Ns; let ob = base + (j / Ns) * Ns * p + k;
  if (p == 2u) {
    let v0 = ${a('j')}; let v1 = cmul(${a('j + Lp')}, tw(k * st));
    ${put('b1', 'ob', '(v0 + v1)')} ${put('b1', 'ob + Ns', '(v0 - v1)')}
  } else if (p == 4u) {
    let v0 = ${a('j')}; let v1 = cmul(${a('j + Lp')}, tw(k * st)); let v2 = cmul(${a('j + 2u * Lp')}, tw(2u * k * st)); let v3 = cmul(${a('j + 3u * Lp')}, tw(3u * k * st));
    let s0 = v0 + v2; let s1 = v0 - v2; let s2 = v1 + v3; let s3 = v1 - v3;
    ${put('b1', 'ob', '(s0 + s2)')} ${put('b1', 'ob + 2u * Ns', '(s0 - s2)')}
    ${put('b1', 'ob + Ns', 'vec2<f32>(s1.x + s3.y, s1.y - s3.x)')} ${put('b1', 'ob + 3u * Ns', 'vec2<f32>(s1.x - s3.y, s1.y + s3.x)')}
  } else {
    for (var t = 0u; t < p; t++) {
      var acc = vec2<f32>(0.0f);
      for (var r = 0u; r < p; r++) { acc += cmul(cmul(${a('j + r * Lp')}, tw(r * k * st)), tw(((r * t) % p) * Lp)); }
      ${put('b1', 'ob + t * Ns', 'acc')}
    }
  }`;
    } else if (stage === 'mul') {
      body = `${head}
  ${rowOf('L')}
  let v = cmul(${cx('b2', 'row * L + j')}, tw(j));
  ${put('b1', 'row * L + j', 'vec2<f32>(v.x, -v.y)')}`;
    } else {
      const o = `u32(oo + i32(j) * bitcast<i32>(${U(9)}))`;
      const store = DTYPES[outD].kind === 'complex'
        ? put('b1', o, 'vec2<f32>(v.x * scale, v.y * select(scale, -scale, inv))')
        : `b1[${o}] = bitcast<u32>(v.x * scale);`;
      body = `${head}
  ${rowOf('outLen')}
  ${offsets}
  var v = ${cx('b2', 'row * L + j')};
  ${blue ? 'v = cmul(vec2<f32>(v.x / f32(L), -v.y / f32(L)), tw(j));' : ''}
  ${store}`;
    }
    return module(words, access, WG, body, fns);
  });
}

// ---- launcher ------------------------------------------------------------------------------------

const FFT_DTYPES: DTypeName[] = ['float32', 'complex64'];
function checkFftDType(d: DTypeName): void {
  checkWgslDType('fft', d);
  if (!FFT_DTYPES.includes(d)) throw new UnsupportedError('fft', `webgpu fft takes float32 or complex64 tensors, got ${d}`);
}

export function webgpuFftStrided(input: StridedRef, dim: number, out: StridedRef, n: number, kind: FftKind, sign: number, scale: number): void {
  checkFftDType(input.dtype);
  checkFftDType(out.dtype);
  const batch = input.shape.map((_, k) => k).filter((k) => k !== dim);
  const rows = batch.reduce((acc, k) => acc * input.shape[k]!, 1);
  if (rows === 0 || n === 0) return;
  const m = input.shape[dim]!;
  const plan = plans.plan(n, m, kind);
  const { blue, L, take, outLen, chirp: ch } = plan;
  const u = new Uint32Array(HEAD + 4 * batch.length);
  const f32 = new Float32Array([scale]);
  u.set([rows, n, m, L, take, outLen, input.offset, out.offset, input.strides[dim]! >>> 0, out.strides[dim]! >>> 0, sign > 0 ? 1 : 0,
    new Uint32Array(f32.buffer)[0]!, 0, 0, 0, 0]);
  batch.forEach((k, i) => u.set([input.shape[k]!, input.strides[k]! >>> 0, out.strides[k]! >>> 0, 0], HEAD + 4 * i));
  const prog = (s: Stage): Program => fftProgram(s, input.dtype, out.dtype, kind, blue, batch.length);
  const bufs = [be.allocBytes(rows * L * 8), be.allocBytes(rows * L * 8)];
  const x = input.buf as WGBuffer;
  let cur = 0; // the scratch buffer holding the current data
  be.dispatch(prog('load'), [bufs[0]!, x, ch ? ch.chirp : x], u, rows * L, WG);
  const passes = (): void => {
    let Ns = 1;
    for (const p of plan.factors) {
      const up = u.slice();
      up[12] = p; up[13] = Ns;
      be.dispatch(prog('pass'), [bufs[1 - cur]!, bufs[cur]!, plan.tw], up, rows * (L / p), WG);
      cur = 1 - cur;
      Ns *= p;
    }
  };
  passes();
  if (ch) {
    be.dispatch(prog('mul'), [bufs[1 - cur]!, bufs[cur]!, ch.spectrum], u, rows * L, WG);
    cur = 1 - cur;
    passes();
  }
  be.dispatch(prog('store'), [out.buf as WGBuffer, bufs[cur]!, ch ? ch.chirp : bufs[cur]!], u, rows * outLen, WG);
  for (const b of bufs) be.free(b);
}
