// WebGPU reductions and float16 outputs (issue #8), against the CPU backend on the same inputs: the
// layouts each kernel plan takes (wide and tall matrices, full reductions of 1-D tensors of odd length,
// rows and columns that do and do not start on 16-byte boundaries, transposed / sliced / stepped views,
// several reduced dims), every kind the kernels split into parts, and float32 / float16 / bfloat16 /
// int32 / uint8 / bool inputs; the same reduction twice gives the same bits; float16 outputs of the
// 16-byte elementwise path over all 65536 bit patterns, exact (the hardware rounding caps.ts checked, or
// the bit-level one); and the subgroup kernels' WGSL, compiled on Dawn's null backend in a child process
// (it accepts the feature but runs nothing), so their spelling is checked without a GPU.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import * as nbx from '../src/index.js';
import type { Tensor } from '../src/tensor/tensor.js';
import type { DTypeName } from '../src/dtype/dtypes.js';
import { caps, halfProbe } from '../src/backend/webgpu/runtime/caps.js';
import { toFloat16Bits } from '../src/dtype/convert.js';
import { copyInto } from '../src/ops/shape.js';
import { UnsupportedError } from '../src/errors.js';

process.env.NBX_AUTOTUNE ??= 'off'; // no background sweeps from a test run
const probe = await nbx.webgpu.probe();
const skip = probe.available ? false : `no WebGPU adapter (${probe.reason})`;
if (skip) process.stdout.write(`# webgpu_reduce tests NOT RUN: ${skip}\n`);
const it = (name: string, fn: () => Promise<void>): void => { test(name, { skip }, fn); };

/**
 * n deterministic values suited to `dtype`: floats in [-4, 4) with three decimals, or with `ints` whole
 * numbers in [-8, 8], whose float32 sums are exact in any order (so sums compare exactly: a dropped or
 * repeated element shows).
 */
function data(n: number, dtype: DTypeName, seed = 1, ints = false): Tensor {
  const v = new Float32Array(n);
  let s = (seed * 2654435761) >>> 0;
  for (let i = 0; i < n; i++) {
    s = (Math.imul(s, 1664525) + 1013904223) >>> 0;
    const r = s / 4294967296;
    v[i] = dtype === 'bool' ? (r > 0.5 ? 1 : 0) : dtype === 'uint8' ? Math.floor(r * 256) : dtype === 'int32' ? Math.floor(r * 2000) - 1000
      : ints ? Math.floor(r * 17) - 8 : Math.round((r * 8 - 4) * 1000) / 1000;
  }
  return nbx.Tensor.fromStorage(v, 'float32', [n], 'cpu').copyAs(dtype);
}

type Red = (t: Tensor) => Tensor;
/** Elements of the base tensor the layouts below are views of. */
const BASE = (1 << 20) + 8;

/**
 * f of the GPU tensor `xg` equals f of the CPU tensor `x`: exactly (rtol 0), else within
 * rtol * (|cpu| + 1).
 */
async function check(what: string, x: Tensor, f: Red, rtol = 0, xg: Tensor = x.to('webgpu')): Promise<void> {
  const want = f(x), got = f(xg);
  assert.equal(got.dt, want.dt, `${what}: dtype`);
  assert.deepEqual([...got.shape], [...want.shape], `${what}: shape`);
  const g = await got.copyAs('float32').data() as Float32Array, w = want.copyAs('float32').dataSync() as Float32Array;
  for (let i = 0; i < w.length; i++) {
    if (Number.isNaN(w[i]!)) { assert.ok(Number.isNaN(g[i]!), `${what}[${i}]: got ${g[i]}, want NaN`); continue; }
    if (rtol === 0 || !Number.isFinite(w[i]!)) { assert.ok(g[i] === w[i], `${what}[${i}]: got ${g[i]}, want ${w[i]}`); continue; }
    assert.ok(Math.abs(g[i]! - w[i]!) <= rtol * (Math.abs(w[i]!) + 1), `${what}[${i}]: got ${g[i]}, want ${w[i]} (rtol ${rtol})`);
  }
}

/** The views each plan takes: [label, view of the base tensor, reduced dims]. */
function layouts(base: Tensor): [string, Tensor, number | number[] | null][] {
  const take = (len: number, off = 0): Tensor => base.narrow(0, off, len);
  // the same views of the CPU and the GPU tensor (a view moved to the GPU would arrive contiguous)
  return [
    ['1-D 2^20+3, all', take((1 << 20) + 3), null],
    ['1-D at offset 5 (unaligned), all', take(100003, 5), null],
    ['1-D stepped slice, all', take(200000).slice(0, 1, 200000, 2), null],
    ['wide [8, 65536] rows', take(8 * 65536).view(8, 65536), -1],
    ['wide [32, 16384] columns', take(32 * 16384).view(32, 16384), 0],
    ['tall [8192, 64] rows', take(8192 * 64).view(8192, 64), -1],
    ['tall [8192, 64] columns', take(8192 * 64).view(8192, 64), 0],
    ['tall [600, 1001] columns (odd width)', take(600 * 1001).view(600, 1001), 0],
    ['[128, 8192] columns (split, merged a thread per column)', take(128 * 8192).view(128, 8192), 0],
    ['[32768, 16] columns (few columns, many parts)', take(32768 * 16).view(32768, 16), 0],
    ['[100, 8193] columns (odd width, split, merged a thread per column)', take(100 * 8193).view(100, 8193), 0],
    ['[2051, 256] columns at offset 8', take(2051 * 256, 8).view(2051, 256), 0],
    ['[2051, 256] columns at offset 3 (unaligned)', take(2051 * 256, 3).view(2051, 256), 0],
    ['[7, 1001] rows (odd)', take(7007).view(7, 1001), 1],
    ['[1000, 3] rows (tiny)', take(3000).view(1000, 3), 1],
    ['[3000, 20] rows (short, many)', take(60000).view(3000, 20), 1],
    ['transposed [512, 300]^T rows', take(512 * 300).view(512, 300).t(), 1],
    ['[33, 40, 70] dims (0, 2)', take(33 * 40 * 70).view(33, 40, 70), [0, 2]],
    ['[33, 40, 70] dim 1', take(33 * 40 * 70).view(33, 40, 70), 1],
    ['[600, 528] narrowed to columns 8..520, rows', take(600 * 528).view(600, 528).narrow(1, 8, 512), 1],
  ];
}

/** `name` over `dim` (all dims when null). */
const over = (name: 'sum' | 'mean' | 'amax' | 'amin', dim: number | number[] | null): Red =>
  (t) => (dim === null ? (nbx[name] as (x: Tensor) => Tensor)(t) : (nbx[name] as (x: Tensor, d: unknown) => Tensor)(t, dim));

it('sum / mean / amax / amin / prod / norms over every layout, float32 float16 bfloat16, as the CPU', async () => {
  for (const dt of ['float32', 'float16', 'bfloat16'] as DTypeName[]) {
    // whole numbers: the sums are exact in any order, so they compare exactly (float16/bfloat16 round once)
    const base = data(BASE, dt, dt.length, true), gl = layouts(base.to('webgpu'));
    for (const [i, [label, x, dim]] of layouts(base).entries()) {
      const xg = gl[i]![1];
      await check(`${dt} sum ${label}`, x, over('sum', dim), 0, xg);
      await check(`${dt} amax ${label}`, x, over('amax', dim), 0, xg);
      if (dt !== 'float32') continue;
      await check(`${dt} mean ${label}`, x, over('mean', dim), 1e-6, xg); // the division may differ by an ulp (WGSL allows 2.5)
      await check(`${dt} amin ${label}`, x, over('amin', dim), 0, xg);
    }
    // fractions: any order within float32's accumulation error; products and norms near 1
    const eps = dt === 'float32' ? 1e-5 : dt === 'float16' ? 2e-3 : 1.6e-2;
    const frac = data(1 << 20, dt, 5), fg = frac.to('webgpu');
    await check(`${dt} sum of fractions, all`, frac, (t) => nbx.sum(t), eps * 8, fg);
    await check(`${dt} mean of fractions, columns`, frac.view(1024, 1024), (t) => nbx.mean(t, 0), eps, fg.view(1024, 1024));
    const near1 = nbx.add(nbx.mul(data(64 * 4096, 'float32', 9), 0.001), 1).copyAs(dt);
    await check(`${dt} prod rows`, near1.view(64, 4096), (t) => nbx.prod(t, 1), eps);
    await check(`${dt} prod columns`, near1.view(64, 4096), (t) => nbx.prod(t, 0), eps);
    for (const ord of [2, 1, Infinity]) {
      await check(`${dt} vector_norm ord=${ord} all`, frac, (t) => nbx.linalg.vector_norm(t, ord), ord === Infinity ? 0 : eps, fg);
      await check(`${dt} vector_norm ord=${ord} columns`, frac.view(4096, 256), (t) => nbx.linalg.vector_norm(t, ord, 0), ord === Infinity ? 0 : eps, fg.view(4096, 256));
    }
  }
});

it('var / std / logsumexp rows, and NaN / infinity propagation in the split and vector paths', async () => {
  const x = data(64 * 5000, 'float32', 3).view(64, 5000);
  await check('var rows', x, (t) => nbx.var(t, 1), 1e-5);
  await check('std columns', x, (t) => nbx.std(t, 0), 1e-5);
  await check('logsumexp rows', x, (t) => nbx.logsumexp(t, 1), 1e-5);
  const v = data((1 << 20) + 3, 'float32', 4).dataSync() as Float32Array;
  v[777777] = NaN; v[5] = Infinity; v[(1 << 20) + 1] = -Infinity;
  const y = nbx.tensor(v);
  for (const dt of ['float32', 'float16'] as DTypeName[]) {
    const z = y.copyAs(dt);
    await check(`${dt} sum with NaN`, z, (t) => nbx.sum(t));
    await check(`${dt} amax with NaN`, z, (t) => nbx.amax(t));
    await check(`${dt} amax columns with NaN`, z.narrow(0, 0, 4096 * 256).view(4096, 256), (t) => nbx.amax(t, 0));
    await check(`${dt} amin rows with infinities`, z.narrow(0, 0, 256 * 4096).view(256, 4096), (t) => nbx.amin(t, 1));
  }
});

it('integer and bool inputs: int32 / uint8 / bool sums (exact), max / min, any / all', async () => {
  for (const dt of ['int32', 'uint8', 'bool'] as DTypeName[]) {
    const base = data(BASE, dt, 7), gl = layouts(base.to('webgpu'));
    for (const [i, [label, x, dim]] of layouts(base).entries()) {
      const xg = gl[i]![1];
      // (integer sums accumulate in int64: the emulated kernels; a few layouts suffice here)
      if (i % 4 === 0) await check(`${dt} sum ${label}`, x, over('sum', dim), 0, xg);
      if (dt !== 'bool') {
        await check(`${dt} amax ${label}`, x, over('amax', dim), 0, xg);
        await check(`${dt} amin ${label}`, x, over('amin', dim), 0, xg);
      }
    }
    const m = base.narrow(0, 0, 4096 * 64).view(4096, 64);
    for (const [name, f] of [['any', nbx.any], ['all', nbx.all]] as const) {
      await check(`${dt} ${name} rows`, m, (t) => f(t, 1) as Tensor);
      await check(`${dt} ${name} columns`, m, (t) => f(t, 0) as Tensor);
      await check(`${dt} ${name} all`, base, (t) => f(t) as Tensor);
    }
  }
  // all-true columns and rows (the split paths' identity elements)
  const ones = nbx.ones([2048, 128], { dtype: nbx.bool });
  await check('all of all-true columns', ones, (t) => nbx.all(t, 0) as Tensor);
  await check('any of all-false rows', nbx.zeros([128, 8192], { dtype: nbx.bool }), (t) => nbx.any(t, 1) as Tensor);
});

it('complex inputs: sum reduces the parts apart (the op layer), max is a typed error', async () => {
  const z = nbx.complex(nbx.ones([4, 100]), nbx.full([4, 100], 2.5)).to('webgpu');
  assert.deepEqual(Array.from(await nbx.sum(z, 1).data() as Float32Array).slice(0, 2), [100, 250]);
  assert.throws(() => nbx.amax(z, 1), /complex/);
});

it('the same reduction twice gives the same bits (fixed order)', async () => {
  const x = data((1 << 20) + 3, 'float32', 11).to('webgpu');
  const m = x.narrow(0, 0, 4096 * 256).view(4096, 256);
  for (const f of [() => nbx.sum(x), () => nbx.sum(m, 0), () => nbx.sum(x.narrow(0, 0, 1 << 20).view(16, 65536), 1)]) {
    const a = await f().data() as Float32Array, b = await f().data() as Float32Array;
    assert.deepEqual([...a], [...b]);
  }
});

it('float16 outputs (16-byte, broadcast and strided paths): all 65536 bit patterns through a*x+b, add, casts, exact', async () => {
  const info = await nbx.webgpu.init();
  process.stdout.write(`# float16 rounding: ${caps.reason.hwHalf}; subgroups: ${caps.reason.subgroups} (${info.adapter})\n`);
  const bits = new Uint16Array(65536).map((_, i) => i);
  const a = nbx.Tensor.fromStorage(bits, 'float16', [65536], 'cpu'), b = nbx.flip(a, [0]).contiguous();
  const ag = a.to('webgpu'), bg = b.to('webgpu');
  const isNaN16 = (h: number): boolean => (h & 0x7c00) === 0x7c00 && (h & 0x3ff) !== 0;
  const cases: [string, (p: Tensor, q: Tensor) => Tensor][] = [
    ['a*x+b', (p) => nbx.add(nbx.mul(p, 1.5), 0.25)], ['add', (p, q) => nbx.add(p, q)], ['x*x', (p) => nbx.mul(p, p)],
    ['float32 -> float16', (p, q) => nbx.mul(p.copyAs('float32'), q.copyAs('float32')).copyAs('float16')],
    // the other output paths: broadcast (a word per invocation) and a strided output (atomic halves)
    ['broadcast a*x', (p, q) => nbx.mul(p.view(256, 256), q.view(256, 256).narrow(1, 7, 1))],
    ['strided output', (p) => { const o = nbx.zeros([256, 256], { dtype: nbx.float16, device: p.device }).t(); copyInto(o, nbx.mul(p.view(256, 256), 0.75)); return o; }],
  ];
  for (const [name, f] of cases) {
    const got = await f(ag, bg).dataStorage() as Uint16Array, want = f(a, b).dataStorageSync() as Uint16Array;
    for (let i = 0; i < want.length; i++) {
      if (isNaN16(want[i]!)) assert.ok(isNaN16(got[i]!), `${name}[${i}]: got 0x${got[i]!.toString(16)}, want NaN`);
      else assert.equal(got[i], want[i], `${name}[${i}] (0x${bits[i]!.toString(16)}): got 0x${got[i]!.toString(16)}, want 0x${want[i]!.toString(16)}`);
    }
  }
  // float32 values between halves: ties go to even, the overflow threshold to infinity
  const ties = nbx.tensor(Array.from({ length: 4096 }, (_, i) => (i - 2048) * 2 ** -11 + 2 ** -12 + (i % 3 - 1) * 2 ** -30).concat([65519.99, 65520, -65520, 2 ** -25, 3 * 2 ** -26]));
  const pad = nbx.cat([ties, nbx.zeros([8 - (ties.numel() % 8)])]);
  const want = pad.copyAs('float16').dataStorageSync() as Uint16Array, got = await nbx.mul(pad.to('webgpu'), 1).copyAs('float16').dataStorage() as Uint16Array;
  assert.deepEqual([...got], [...want]);
});

test('the float16 rounding check expects what the CPU conversion gives, on ties and their neighbours', () => {
  const { input, want } = halfProbe();
  const f = new Float32Array(input.buffer);
  assert.ok(input.length > 8 * 0x7c00);
  for (let i = 0; i < input.length; i++) {
    if (Number.isNaN(f[i]!)) assert.equal(want[i], -1);
    else assert.equal(want[i], toFloat16Bits(f[i]!), `0x${input[i]!.toString(16)}`);
  }
});

test('subgroup reduction kernels compile (Dawn null backend, compile only, child process)', async (t) => {
  const script = `
    const nbx = await import(${JSON.stringify(new URL('../src/index.js', import.meta.url).href)});
    const { caps } = await import(${JSON.stringify(new URL('../src/backend/webgpu/runtime/caps.js', import.meta.url).href)});
    const info = await nbx.webgpu.init();
    if (!info.features.includes('subgroups')) { console.log('NO-SUBGROUPS'); process.exit(0); }
    let modules = 0;
    const be = nbx.webgpu.backend(), make = be.device.createShaderModule.bind(be.device);
    be.device.createShaderModule = (d) => { if (d.code.startsWith('enable subgroups')) modules++; return make(d); };
    for (const dt of ['float32', 'float16', 'int32', 'uint8', 'bool']) {
      const x = nbx.zeros([(1 << 20) + 8], { dtype: dt, device: 'webgpu' });
      const m = x.narrow(0, 0, 1024 * 1000).view(1024, 1000);
      const outs = [nbx.amax(x), nbx.amin(m, 1), nbx.amax(m, 0), nbx.amax(x.narrow(0, 0, 64 * 16384).view(64, 16384), 1)];
      if (dt.startsWith('float')) outs.push(nbx.sum(x), nbx.mean(m, 1), nbx.std(m, 1), nbx.logsumexp(m, 1), nbx.linalg.vector_norm(x), nbx.prod(m, 1));
      for (const o of outs) await o.data();
    }
    console.log('OK', modules, caps.reason.subgroups);
    process.exit(0);`;
  let outText: string;
  try {
    outText = execFileSync(process.execPath, ['--input-type=module', '-e', script], {
      encoding: 'utf8', timeout: 60_000, stdio: ['ignore', 'pipe', 'pipe'],
      env: { ...process.env, NBX_WEBGPU_BACKEND: 'null', NBX_WEBGPU_DAWN_TOGGLES: 'allow_unsafe_apis', NBX_WEBGPU_SUBGROUPS: '1', NBX_AUTOTUNE: 'off' },
    });
  } catch (e) {
    const err = e as { stdout?: string; stderr?: string; message: string };
    if (/no WebGPU adapter|cannot be loaded/.test(`${err.stderr ?? ''}${err.message}`)) { t.skip('Dawn null backend not available'); return; }
    assert.fail(`the null-backend run failed: ${(err.stderr ?? err.message).slice(0, 3000)}`);
  }
  if (outText.includes('NO-SUBGROUPS')) { t.skip('the null backend offers no subgroups'); return; }
  const m = /OK (\d+) (.*)/.exec(outText);
  assert.ok(m, outText);
  assert.ok(Number(m[1]) >= 5, `subgroup kernels compiled: ${m[1]} (${m[2]})`);
});
