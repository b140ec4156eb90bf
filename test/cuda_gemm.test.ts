// CUDA GEMM: the small-M (GEMV) kernel against the CPU across dtypes, layouts, odd sizes and unaligned
// views; cuBLASLt algorithm selection (sweep, cache entry, NBX_AUTOTUNE=off). Runs only where a CUDA
// device is present (or under the emulator: node test/gen/cuda_emu.mjs node --test dist/test/cuda_gemm.test.js).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import * as nbx from '../src/index.js';
import { probeCuda } from '../src/backend/cuda/runtime/libs.js';
import { CublasLt, GEMM_TUNE_NAME } from '../src/backend/cuda/runtime/cublaslt.js';
import { GEMV_KN_SPACE, gemvProblem, gemvVectorOk, knSplit, knUnroll } from '../src/backend/cuda/kernels/gemv.js';
import { prune } from '../src/autotune/index.js';
import { loadProfiles } from '../src/profiles/index.js';

const probe = probeCuda();
const skip = probe.available ? false : `no CUDA device (${probe.reason}): CUDA GEMM tests not run`;
if (skip) console.log(`# SKIP cuda gemm tests: ${probe.reason}`);

type DT = 'float32' | 'float16' | 'bfloat16';
const TOL: Record<DT, number> = { float32: 1e-4, float16: 1e-2, bfloat16: 2e-2 };

/** Random values exactly representable in dt (so cpu and cuda start from the same numbers). */
function rnd(shape: number[], dt: DT, seed: number): nbx.Tensor {
  const n = shape.reduce((a, b) => a * b, 1);
  const v = new Float32Array(n);
  let s = seed >>> 0;
  for (let i = 0; i < n; i++) { s = (Math.imul(s, 1664525) + 1013904223) >>> 0; v[i] = (s / 2 ** 32) * 2 - 1; }
  return nbx.tensor(Array.from(v)).reshape(shape).to(dt);
}

function close(gpu: nbx.Tensor, cpu: nbx.Tensor, dt: DT, what: string): void {
  assert.deepEqual(gpu.shape, cpu.shape, what);
  const a = gpu.to('cpu').to('float64').dataSync() as Float64Array, b = cpu.to('float64').dataSync() as Float64Array;
  let scale = 0;
  for (const x of b) scale = Math.max(scale, Math.abs(x));
  for (let i = 0; i < a.length; i++) {
    assert.ok(Math.abs(a[i]! - b[i]!) <= TOL[dt] * (1 + scale), `${what}: index ${i}: cuda ${a[i]} vs cpu ${b[i]}`);
  }
}

const DTS: DT[] = ['float32', 'float16', 'bfloat16'];

test('small-M products (GEMV kernel) equal the CPU: x@w, x@wᵀ, linear(+bias), mv, odd sizes, unaligned views', { skip }, () => {
  let seed = 1;
  for (const dt of DTS) {
    for (const [m, k, n] of [[1, 64, 40], [3, 37, 53], [4, 256, 96], [16, 72, 64], [9, 40, 17]] as const) {
      const x = rnd([m, k], dt, seed++), w = rnd([k, n], dt, seed++), wt = rnd([n, k], dt, seed++), b = rnd([n], dt, seed++);
      const xg = x.cuda(), wg = w.cuda(), wtg = wt.cuda(), bg = b.cuda();
      const tag = `${dt} m=${m} k=${k} n=${n}`;
      close(nbx.matmul(xg, wg), nbx.matmul(x, w), dt, `x@w ${tag}`);
      close(nbx.matmul(xg, wtg.t()), nbx.matmul(x, wt.t()), dt, `x@wt.t() ${tag}`);
      close(nbx.nn.functional.linear(xg, wtg, bg), nbx.nn.functional.linear(x, wt, b), dt, `linear ${tag}`);
      close(nbx.mv(wtg, xg.select(0, 0)), nbx.mv(wt, x.select(0, 0)), dt, `mv ${tag}`);
      close(nbx.matmul(xg.t().contiguous().t(), wg), nbx.matmul(x, w), dt, `xᵀ-stored @ w ${tag}`);
      // views one element off a 16-byte boundary: the scalar path
      const big = rnd([m, k + 1], dt, seed++), bigw = rnd([k, n + 1], dt, seed++);
      close(nbx.matmul(big.cuda().narrow(1, 1, k), bigw.cuda().narrow(1, 1, n)), nbx.matmul(big.narrow(1, 1, k), bigw.narrow(1, 1, n)), dt, `unaligned ${tag}`);
      // 1-D vector times matrix, and matrix times 1-D vector
      close(nbx.matmul(xg.select(0, 0), wg), nbx.matmul(x.select(0, 0), w), dt, `vec@w ${tag}`);
      close(nbx.matmul(wtg, xg.select(0, 0)), nbx.matmul(wt, x.select(0, 0)), dt, `w@vec ${tag}`);
    }
  }
});

test("GEMV batched loads: 'kn' K chunks not a multiple of the finisher's 8 loads, chunks ending mid-batch; 'nk' long K with a tail", { skip }, () => {
  let seed = 101;
  for (const dt of DTS) {
    for (const [m, k, n] of [[1, 1000, 264], [3, 200, 80], [16, 300, 72], [8, 130, 48], [2, 4096, 16]] as const) {
      const x = rnd([m, k], dt, seed++), w = rnd([k, n], dt, seed++);
      close(nbx.matmul(x.cuda(), w.cuda()), nbx.matmul(x, w), dt, `x@w ${dt} m=${m} k=${k} n=${n}`);
    }
    for (const [m, k, n] of [[1, 2056, 40], [3, 1032, 24], [9, 520, 20]] as const) {
      const x = rnd([m, k], dt, seed++), wt = rnd([n, k], dt, seed++), b = rnd([n], dt, seed++);
      close(nbx.nn.functional.linear(x.cuda(), wt.cuda(), b.cuda()), nbx.nn.functional.linear(x, wt, b), dt, `linear ${dt} m=${m} k=${k} n=${n}`);
    }
  }
});

test('small-M addmm with beta (C is an input) and alpha', { skip }, () => {
  for (const dt of DTS) {
    const x = rnd([2, 48], dt, 7), w = rnd([48, 33], dt, 8), c = rnd([2, 33], dt, 9);
    close(nbx.addmm(c.cuda(), x.cuda(), w.cuda(), { beta: 0.5, alpha: 2 }), nbx.addmm(c, x, w, { beta: 0.5, alpha: 2 }), dt, `addmm ${dt}`);
  }
});

test('small-M results are bit-identical run to run (fixed reduction order, no atomics)', { skip }, () => {
  const x = rnd([4, 512], 'bfloat16', 11).cuda(), w = rnd([512, 256], 'bfloat16', 12).cuda(), wt = rnd([256, 512], 'bfloat16', 13).cuda();
  for (const f of [() => nbx.matmul(x, w), () => nbx.nn.functional.linear(x, wt)]) {
    const a = f().to('cpu').dataStorageSync() as Uint16Array, b = f().to('cpu').dataStorageSync() as Uint16Array;
    assert.deepEqual(Array.from(a), Array.from(b));
  }
});

test('GEMV problem normalisation: layouts, the transposed (mv) form, vector-path conditions, K split', () => {
  const ref = (dtype: string, offset = 0) => ({ buf: { ptr: 0x10000n, bytes: 1 << 20 }, dtype, shape: [], strides: [], offset }) as never;
  const base = { transA: false, transB: false, m: 1, n: 4096, k: 4096, alpha: 1, beta: 0, a: ref('bfloat16'), lda: 4096, b: ref('bfloat16'), ldb: 4096, c: ref('bfloat16'), ldc: 4096 };
  const g = gemvProblem(base)!;
  assert.equal(g.layout, 'kn');
  assert.ok(gemvVectorOk(g));
  const s = knSplit(g, 132);
  assert.equal(s.gx, 16);
  assert.ok(s.gy > 1 && s.gy * s.kchunk >= 4096 && (s.gy - 1) * s.kchunk < 4096 && s.kchunk % (8 * knUnroll(1)) === 0);
  assert.equal(gemvProblem({ ...base, transB: true })!.layout, 'nk');
  // mv: m large, n = 1: X = Bᵀ, W = A
  const mv = gemvProblem({ ...base, m: 4096, n: 1, ldb: 1, ldc: 1 })!;
  assert.deepEqual([mv.layout, mv.m, mv.n, mv.osi, mv.osj, mv.xsl], ['nk', 1, 4096, 1, 1, 1]);
  assert.equal(gemvProblem({ ...base, m: 64, n: 64 }), null);
  assert.equal(gemvProblem({ ...base, c: ref('float64') }), null);
  assert.ok(!gemvVectorOk(gemvProblem({ ...base, transB: true, b: ref('bfloat16', 1) })!));
});

test('small-M x@w space: each knob belongs to its kernel, so a sweep times no duplicates', () => {
  const hopper = loadProfiles().find((p) => p.family === 'hopper')!;
  const { kept, pruned } = prune(GEMV_KN_SPACE, hopper.limits);
  const by = (impl: string) => kept.filter((c) => c.impl === impl);
  assert.equal(by('cublaslt').length, 1);
  assert.equal(by('cublas').length, 1);
  assert.deepEqual(by('gemv').map((c) => c.split).sort(), [2, 4, 8]);
  assert.ok(by('mma').every((c) => c.nt === 2 || c.nt === 4) && by('mma').length === 8);
  assert.ok(by('mmat').every((c) => (c.nt === 4 || c.nt === 8) && (c.wc === 1 || c.wc === 2)) && by('mmat').length === 16);
  assert.ok(kept.every((c) => c.impl === 'mmat' || c.wc === 1));
  assert.ok(pruned.every((p) => p.reasons.length > 0));
});

test('cuBLASLt algorithm selection: a sweep (or a cached choice) fills the autotune cache; NBX_AUTOTUNE=off keeps heuristic #0', { skip }, () => {
  const saved = { dir: process.env.NBX_CACHE_DIR, mode: process.env.NBX_AUTOTUNE };
  process.env.NBX_CACHE_DIR = mkdtempSync(join(tmpdir(), 'nbx-gemm-tune-'));
  try {
    delete process.env.NBX_AUTOTUNE;
    const a = rnd([256, 320], 'bfloat16', 21), b = rnd([320, 256], 'bfloat16', 22);
    close(nbx.matmul(a.cuda(), b.cuda()), nbx.matmul(a, b), 'bfloat16', 'tuned 256x320x256');
    const lt = CublasLt.current()!;
    const choice = lt.planChoices().find((p) => p.key.startsWith('bfloat16|00|256|256|320|'));
    assert.ok(choice, 'a plan for the product');
    assert.equal(choice.source, choice.candidates > 1 ? 'sweep' : 'default', `${choice.candidates} candidates`);
    if (choice.candidates < 2) return; // nothing to choose among on this card
    assert.equal(typeof choice.config.algo, 'string');
    assert.equal((choice.config.algo as string).length, 128);
    const file = JSON.parse(readFileSync(join(process.env.NBX_CACHE_DIR, 'autotune.json'), 'utf8'));
    const entries = Object.values(file.entries as Record<string, Record<string, Record<string, { config: { algo: string } }>>>)[0]![GEMM_TUNE_NAME]!;
    const key = Object.keys(entries).find((k) => k.startsWith('256x256x512|bfloat16.NN.lt'));
    assert.ok(key, `cache key for the product among ${Object.keys(entries).join(', ')}`);
    assert.equal(entries[key].config.algo, choice.config.algo);
    // same bucket, other m: the cached choice is reused (when cuBLASLt accepts it for this size) or re-swept
    const a2 = rnd([240, 320], 'bfloat16', 23);
    close(nbx.matmul(a2.cuda(), b.cuda()), nbx.matmul(a2, b), 'bfloat16', 'tuned 240x320x256');
    const second = lt.planChoices().find((p) => p.key.startsWith('bfloat16|00|240|256|320|'));
    assert.ok(second && (second.source === 'cache' || second.source === 'sweep'), `second plan ${second?.source}`);
    process.env.NBX_AUTOTUNE = 'off';
    const a3 = rnd([512, 256], 'float16', 25), b3 = rnd([256, 512], 'float16', 26);
    close(nbx.matmul(a3.cuda(), b3.cuda()), nbx.matmul(a3, b3), 'float16', 'untuned 512x256x512');
    assert.equal(lt.planChoices().find((p) => p.key.startsWith('float16|00|512|512|256|'))?.source, 'default');
  } finally {
    if (saved.dir === undefined) delete process.env.NBX_CACHE_DIR; else process.env.NBX_CACHE_DIR = saved.dir;
    if (saved.mode === undefined) delete process.env.NBX_AUTOTUNE; else process.env.NBX_AUTOTUNE = saved.mode;
  }
});
