// WebGPU fast paths (issue #8): 16-byte elementwise and reduction accesses for every element width,
// with offsets and broadcast scalars, against the CPU; launch configuration lookup (NBX_AUTOTUNE=off
// gives the default, the cache key names the adapter); and the subgroup-matrix GEMM's WGSL, compiled
// on Dawn's null backend (which accepts the feature) so its spelling is checked even without a GPU.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import * as nbx from '../src/index.js';
import type { Tensor } from '../src/tensor/tensor.js';
import type { DTypeName } from '../src/dtype/dtypes.js';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { EW_SPACE, GEMM_SPACE, REDUCE_SPACE, TUNE_MIN_ELEMENTS, tuneKeyOf } from '../src/backend/webgpu/tuning/spaces.js';
import { AutotuneCache, configKey, enumerate, shapeBucket } from '../src/autotune/index.js';
import { smmSource, type SmmPlan } from '../src/backend/webgpu/kernels/gemm_smm.js';
import { dawnToggles } from '../src/backend/webgpu/runtime/gpu.js';

// no background sweeps (nor cache writes) from a test run
process.env.NBX_AUTOTUNE ??= 'off';
const probe = await nbx.webgpu.probe();
const skip = probe.available ? false : `no WebGPU adapter (${probe.reason})`;
if (skip) process.stdout.write(`# webgpu_perf tests NOT RUN: ${skip}\n`);
const it = (name: string, fn: () => Promise<void>): void => { test(name, { skip }, fn); };

/** Values suited to `dtype`, deterministic. */
function data(n: number, dtype: DTypeName): Tensor {
  const v: number[] = [];
  for (let i = 0; i < n; i++) {
    const r = ((i * 2654435761) % 4294967296) / 4294967296;
    v.push(dtype === 'bool' ? (r > 0.5 ? 1 : 0) : dtype === 'uint8' ? Math.floor(r * 256) : dtype === 'int8' ? Math.floor(r * 256) - 128
      : dtype.startsWith('int') ? Math.floor(r * 2000) - 1000 : Math.round((r * 8 - 4) * 1000) / 1000);
  }
  return nbx.tensor(v, { dtype });
}

async function same(got: Tensor, want: Tensor, what: string, tol = 0): Promise<void> {
  const g = Float64Array.from(await got.copyAs('float32').data() as Float32Array), w = Float64Array.from(want.copyAs('float32').dataSync() as Float32Array);
  assert.equal(g.length, w.length, `${what}: length`);
  for (let i = 0; i < w.length; i++) {
    const ok = Number.isNaN(w[i]!) ? Number.isNaN(g[i]!) : Math.abs(g[i]! - w[i]!) <= tol * (Math.abs(w[i]!) + 1);
    assert.ok(ok, `${what}[${i}]: got ${g[i]}, want ${w[i]}`);
  }
}

it('16-byte elementwise path: every element width, offset views, broadcast scalars, casts', async () => {
  for (const dt of ['float32', 'float16', 'bfloat16', 'int8', 'uint8', 'int16', 'int32'] as DTypeName[]) {
    for (const [n, off] of [[4096, 0], [4096, 32], [2048, 16], [3000, 0]] as const) {
      const base = data(n + off + 64, dt);
      const a = base.narrow(0, off, n), b = nbx.flip(base, [0]).narrow(0, off, n);
      const ag = base.to('webgpu').narrow(0, off, n), bg = nbx.flip(base, [0]).to('webgpu').narrow(0, off, n);
      const s = nbx.full([1], 3, { dtype: dt });
      await same(nbx.add(ag, bg), nbx.add(a, b), `${dt} add n=${n} off=${off}`);
      await same(nbx.mul(ag, s.to('webgpu')), nbx.mul(a, s), `${dt} mul by a 1-element tensor`);
      await same(nbx.where(nbx.gt(ag, bg), ag, bg) as Tensor, nbx.where(nbx.gt(a, b), a, b) as Tensor, `${dt} where`);
      await same(ag.copyAs('float32'), a.copyAs('float32'), `${dt} cast to float32`);
    }
  }
});

it('float16 on the 16-byte paths: all 65536 bit patterns (subnormals, -0, inf, NaN) exact against the CPU', async () => {
  const bits = new Uint16Array(65536).map((_, i) => i);
  const a = nbx.Tensor.fromStorage(bits, 'float16', [65536], 'cpu'), b = nbx.flip(a, [0]).contiguous();
  const ag = a.to('webgpu'), bg = b.to('webgpu');
  const isNaN16 = (h: number): boolean => (h & 0x7c00) === 0x7c00 && (h & 0x3ff) !== 0;
  const exact = (got: Uint16Array, want: Uint16Array, what: string): void => {
    for (let i = 0; i < want.length; i++) {
      if (isNaN16(want[i]!)) assert.ok(isNaN16(got[i]!), `${what}[${i}]: got ${got[i]!.toString(16)}, want NaN`);
      else assert.equal(got[i], want[i], `${what}[${i}] (${bits[i]!.toString(16)}): got ${got[i]!.toString(16)}, want ${want[i]!.toString(16)}`);
    }
  };
  const ops: [string, (p: Tensor, q: Tensor) => Tensor][] = [['add', (p, q) => nbx.add(p, q)], ['mul', (p, q) => nbx.mul(p, q)], ['neg', (p) => nbx.neg(p)]];
  for (const [name, f] of ops) exact(Uint16Array.from(await f(ag, bg).dataStorage() as Uint16Array), f(a, b).dataStorageSync() as Uint16Array, name);
  const r = a.view(256, 256), rg = ag.view(256, 256);
  exact(Uint16Array.from(await nbx.amax(rg, -1).dataStorage() as Uint16Array), nbx.amax(r, -1).dataStorageSync() as Uint16Array, 'amax rows');
  exact(Uint16Array.from(await nbx.amin(rg, -1).dataStorage() as Uint16Array), nbx.amin(r, -1).dataStorageSync() as Uint16Array, 'amin rows');
  // the scalar loads: columns (a thread per column) and rows of odd length at an odd offset
  exact(Uint16Array.from(await nbx.amax(rg, 0).dataStorage() as Uint16Array), nbx.amax(r, 0).dataStorageSync() as Uint16Array, 'amax columns');
  const o = a.narrow(0, 3, 254 * 257).view(254, 257), og = ag.narrow(0, 3, 254 * 257).view(254, 257);
  exact(Uint16Array.from(await nbx.amin(og, -1).dataStorage() as Uint16Array), nbx.amin(o, -1).dataStorageSync() as Uint16Array, 'amin odd rows');
});

it('16-byte reductions along rows: every element width, offsets, split rows', async () => {
  for (const dt of ['float32', 'float16', 'bfloat16', 'int8', 'int32'] as DTypeName[]) {
    for (const [r, c, off] of [[4, 4096, 0], [3, 1024, 16], [1, 1 << 17, 0], [64, 96, 32]] as const) {
      const base = data(r * c + off, dt);
      const x = base.narrow(0, off, r * c).view(r, c), xg = base.to('webgpu').narrow(0, off, r * c).view(r, c);
      await same(nbx.amax(xg, -1), nbx.amax(x, -1), `${dt} amax [${r}, ${c}] off=${off}`);
      if (dt.startsWith('f') || dt === 'bfloat16') {
        const tol = dt === 'float32' ? 1e-4 : 1e-2;
        await same(nbx.sum(xg, -1), nbx.sum(x, -1), `${dt} sum [${r}, ${c}] off=${off}`, tol);
        await same(nbx.sum(xg), nbx.sum(x), `${dt} sum all [${r}, ${c}]`, tol);
      }
    }
  }
});

it('launch configurations: NBX_AUTOTUNE=off gives the default; the cache key names the backend and adapter', async () => {
  const info = await nbx.webgpu.init();
  assert.match(info.tuneKey, /^webgpu\|/);
  assert.ok(!/\|\|/.test(info.tuneKey), 'no empty parts');
  const be = nbx.webgpu.backend();
  const saved = process.env.NBX_AUTOTUNE;
  process.env.NBX_AUTOTUNE = 'off';
  try {
    const cfg = be.tuning!.config(EW_SPACE, [TUNE_MIN_ELEMENTS * 4], 'int16', { wg: 128, vpt: 2 });
    assert.deepEqual(cfg, { wg: 128, vpt: 2 });
    assert.deepEqual(be.tuning!.config(EW_SPACE, [16], 'int16', { wg: 64, vpt: 1 }), { wg: 64, vpt: 1 }, 'small problems are not tuned');
  } finally {
    if (saved === undefined) delete process.env.NBX_AUTOTUNE; else process.env.NBX_AUTOTUNE = saved;
  }
});

test('shipped H200 (Vulkan) launch configurations: the key the backend computes for that adapter finds them', () => {
  // the adapter as Dawn reports it on the H200 (run 1's probe)
  const h200 = { vendor: 'nvidia', architecture: '', device: 'nvidia-h200', description: 'NVIDIA: 580.159.04 580.159.4.0' };
  const key = tuneKeyOf(h200);
  assert.equal(key, 'webgpu|nvidia|nvidia-h200|driver NVIDIA: 580.159.04 580.159.4.0');
  assert.equal(tuneKeyOf({ vendor: '', architecture: '', device: '', description: 'Apple M2' }), 'webgpu|Apple M2', 'a description that names the card stays as is');
  assert.ok(dawnToggles().includes('disable-dawn-features=timestamp_quantization'), 'timestamps unquantized (the sweeps time microsecond kernels)');
  const dir = mkdtempSync(join(tmpdir(), 'nbx-tune-')); // an empty user cache: only shipped entries
  try {
    const cache = new AutotuneCache({ dir });
    const hit = cache.lookup(EW_SPACE.name, { shape: shapeBucket([2 ** 28]), dtype: 'float32', device: key });
    assert.ok(hit, '1 GiB float32 elementwise entry');
    assert.equal(hit.source, 'shipped');
    assert.match(hit.file, /webgpu-nvidia-h200-vulkan\.json$/);
    // another driver version: the entries still apply (matched without the driver part)
    const other = cache.lookup(REDUCE_SPACE.name, { shape: shapeBucket([16384, 16384]), dtype: 'float32', device: tuneKeyOf({ ...h200, description: 'NVIDIA: 590.1.2 590.1.2.0' }) });
    assert.equal(other?.source, 'shipped');
    assert.equal(cache.lookup(GEMM_SPACE.name, { shape: shapeBucket([4096, 4096, 4096]), dtype: 'float32', device: key })?.source, 'shipped');
    // every shipped configuration is a candidate of its space (else the backend ignores it)
    for (const space of [EW_SPACE, REDUCE_SPACE, GEMM_SPACE]) {
      const cands = new Set(enumerate(space).map(configKey));
      for (const [dims, dtype] of [[[2 ** 16], 'float32'], [[2 ** 28], 'float32'], [[2 ** 29], 'float16'], [[1, 2 ** 26], 'float32'], [[4096, 16384], 'float32'], [[1024, 1024, 1024], 'float32']] as const) {
        const e = cache.lookup(space.name, { shape: shapeBucket([...dims]), dtype, device: key });
        if (e) assert.ok(cands.has(configKey(e.entry.config)), `${space.name} ${dims} ${dtype}: ${JSON.stringify(e.entry.config)}`);
      }
    }
    // a different card does not pick them up
    assert.equal(cache.lookup(EW_SPACE.name, { shape: shapeBucket([2 ** 28]), dtype: 'float32', device: tuneKeyOf({ ...h200, device: 'nvidia-a100' }) }), undefined);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test('subgroup-matrix GEMM WGSL compiles (Dawn null backend)', async (t) => {
  let dev: GPUDevice | undefined;
  try {
    const { create } = await import('webgpu' as string) as { create(flags: string[]): GPU };
    const gpu = create(['backend=null', 'enable-dawn-features=allow_unsafe_apis']);
    const a = await gpu.requestAdapter();
    if (a?.features.has('chromium-experimental-subgroup-matrix' as GPUFeatureName) && a.features.has('shader-f16')) {
      dev = await a.requestDevice({ requiredFeatures: ['chromium-experimental-subgroup-matrix', 'subgroups', 'shader-f16'] as GPUFeatureName[] });
    }
  } catch { /* no Dawn here */ }
  if (!dev) { t.skip('Dawn null backend with subgroup matrices not available'); return; }
  for (const [d, ct, M, N, K] of [['float32', 'f32', 8, 8, 8], ['float16', 'f16', 16, 16, 16], ['bfloat16', 'f32', 16, 8, 8]] as const) {
    const plan: SmmPlan = { cfg: { componentType: ct, resultComponentType: 'f32', M, N, K }, ct, rt: 'f32', sg: 32,
      TM: Math.max(1, Math.floor(32 / M)), TN: Math.max(1, Math.floor(32 / N)), BK: 32 };
    for (const [ta, tb] of [[false, false], [true, false], [false, true], [true, true]] as const) {
      const code = smmSource(d, ta, tb, plan, 2, 3, d === 'float32' ? 'wrr' : 'arr');
      const info = await dev.createShaderModule({ code }).getCompilationInfo();
      const msgs = info.messages.filter((m) => m.type !== 'info').map((m) => `${m.type} ${m.lineNum}:${m.linePos} ${m.message}`);
      assert.deepEqual(msgs, [], `${d} transA=${ta} transB=${tb}`);
    }
  }
  dev.destroy();
});
