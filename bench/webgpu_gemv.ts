// The WebGPU matrix-vector kernel's launch shapes on a decode step's products (TinyLlama-1.1B shape,
// bfloat16, one row): GPU time per call from timestamp queries around `reps` calls queued back to back
// (each call reads another copy of the weight, so the L2 does not hold the next call's weight), the
// weight bytes per µs as GB/s, for every launch shape of the sweep (NBX_WEBGPU_GEMV="lpr,unroll,cap").
// Without timestamp queries, wall-clock times (a check of the bench itself). Also the floor of a dependent dispatch: `reps` one-element adds in a chain.
//   node dist/bench/webgpu_gemv.js [--quick] [--shapes 'default;32,4,0'] [--json FILE]
// Prints a line per (product, shape) and the best shape per product.
import { writeFileSync } from 'node:fs';
import * as nbx from '../src/index.js';
import type { Tensor } from '../src/tensor/tensor.js';

const G = 'webgpu';
const argv = process.argv.slice(2);
const quick = argv.includes('--quick');
const jsonAt = argv.indexOf('--json');
const jsonFile = jsonAt >= 0 ? argv[jsonAt + 1] : undefined;
const shapesAt = argv.indexOf('--shapes');
/** --shapes 'default;32,4,0;...': only these launch shapes. */
const onlyShapes = shapesAt >= 0 ? argv[shapesAt + 1]!.split(';').filter(Boolean) : null;

type Kind = 'norm' | 'plain' | 'gated';
interface Product { name: string; kind: Kind; n: number; k: number }
const PRODUCTS: Product[] = [
  { name: 'qkv (norm)', kind: 'norm', n: 2560, k: 2048 },
  { name: 'gate_up (norm)', kind: 'norm', n: 11264, k: 2048 },
  { name: 'o_proj', kind: 'plain', n: 2048, k: 2048 },
  { name: 'down (gated)', kind: 'gated', n: 2048, k: 5632 },
  { name: 'lm_head', kind: 'plain', n: 32000, k: 2048 },
];

const llm = nbx.llm as unknown as {
  gated_linear(gu: Tensor, w: Tensor, b: Tensor | null, o: { act: string }): Tensor;
  add_rms_norm_linear(x: Tensor, r: Tensor, nw: Tensor, w: Tensor, b: Tensor | null, o: { eps: number }): [Tensor, Tensor];
};

async function gpuMicros(be: ReturnType<typeof nbx.webgpu.backend>, reps: number, call: (i: number) => void): Promise<number> {
  const dev = be.device;
  if (!dev.features.has('timestamp-query')) { // wall clock (adapters without timestamps: a local check of the bench itself)
    await be.idle();
    const t0 = performance.now();
    for (let i = 0; i < reps; i++) call(i);
    await be.idle();
    return ((performance.now() - t0) * 1000) / reps;
  }
  // the same calls untimed first, right before: the GPU comes out of the idle of the previous shape's compile
  // (a guess at why call B's figures were ~2.7x the step's own: clocks after an idle gap; not verified)
  for (let i = 0; i < reps; i++) call(i);
  const set = dev.createQuerySet({ type: 'timestamp', count: 2 });
  const resolve = dev.createBuffer({ size: 16, usage: 0x0200 | 0x0004 });
  const read = dev.createBuffer({ size: 16, usage: 0x0001 | 0x0008 });
  await be.idle();
  be.timestamp(set, 0);
  for (let i = 0; i < reps; i++) call(i);
  be.timestamp(set, 1, resolve, read);
  await be.idle();
  await read.mapAsync(1);
  const t = new BigInt64Array(read.getMappedRange().slice(0));
  read.unmap(); set.destroy(); resolve.destroy(); read.destroy();
  return Number(t[1]! - t[0]!) / 1000 / reps;
}

async function main(): Promise<void> {
  await nbx.webgpu.init();
  const be = nbx.webgpu.backend();
  const info = be.info;
  if (!be.device.features.has('timestamp-query')) console.log('no timestamp queries: wall-clock times (host included)');
  console.log(`adapter ${info.identity.device ?? ''} ${info.identity.description ?? ''}; subgroups ${be.device.features.has('subgroups' as GPUFeatureName)} (${info.identity.subgroupMinSize}-${info.identity.subgroupMaxSize}); maxComputeWorkgroupStorageSize ${info.limits.maxComputeWorkgroupStorageSize}; toggles ${process.env.NBX_WEBGPU_DAWN_TOGGLES ?? '-'}`);
  const reps = quick ? 8 : 24;
  const dt = 'bfloat16';
  const results: { product: string; shape: string; us: number; gbs: number }[] = [];

  // the floor of a dependent dispatch
  {
    let x = nbx.zeros([1], { device: G, dtype: 'float32' });
    const chain = 200;
    x.add(1).dispose();
    const us = await gpuMicros(be, chain, () => { const y = x.add(1); x.dispose(); x = y; });
    console.log(`floor: ${us.toFixed(2)} µs per dependent one-element dispatch (${chain} chained)`);
    results.push({ product: 'dispatch floor', shape: '-', us, gbs: 0 });
    x.dispose();
  }

  const shapes = quick ? ['32,4,0', '64,4,0', '128,4,0', '32,8,0', '64,8,0']
    : ['32,4,0', '32,8,0', '64,4,0', '64,8,0', '128,4,0', '128,8,0', '256,4,0', '32,4,1056', '64,4,1056', '32,4,0,g', '64,4,0,g'];
  const was = process.env.NBX_WEBGPU_GEMV;
  for (const p of PRODUCTS) {
    const wBytes = p.n * p.k * 2;
    const copies = Math.max(2, Math.ceil(200e6 / wBytes));
    const ws = Array.from({ length: copies }, (_, i) => nbx.full([p.n, p.k], 0.01 * (i + 1), { device: G, dtype: dt }));
    const x = nbx.full([1, p.k], 0.5, { device: G, dtype: dt }), r = nbx.full([1, p.k], 0.25, { device: G, dtype: dt });
    const nw = nbx.full([p.k], 1, { device: G, dtype: dt }), gu = nbx.full([1, 2 * p.k], 0.5, { device: G, dtype: dt });
    const call = (i: number): void => {
      const w = ws[i % copies]!;
      if (p.kind === 'norm') { const [o, s] = llm.add_rms_norm_linear(x, r, nw, w, null, { eps: 1e-5 }); o.dispose(); s.dispose(); }
      else if (p.kind === 'gated') llm.gated_linear(gu, w, null, { act: 'silu' }).dispose();
      else nbx.nn.functional.linear(x, w).dispose();
    };
    let best: { shape: string; us: number } | null = null;
    for (const shape of onlyShapes ?? ['default', ...shapes]) {
      if (shape === 'default') delete process.env.NBX_WEBGPU_GEMV; else process.env.NBX_WEBGPU_GEMV = shape;
      try {
        call(0); await be.idle(); // compile
        const us = await gpuMicros(be, reps, call);
        const gbs = wBytes / us / 1e3;
        results.push({ product: p.name, shape, us, gbs });
        console.log(`${p.name.padEnd(16)} ${p.n}x${p.k} shape ${shape.padEnd(10)} ${us.toFixed(2).padStart(8)} µs  ${gbs.toFixed(0).padStart(5)} GB/s`);
        if (shape !== 'default' && (!best || us < best.us)) best = { shape, us };
      } catch (e) {
        console.log(`${p.name.padEnd(16)} shape ${shape}: ERROR ${(e as Error).message.split('\n')[0]}`);
      }
    }
    if (best) console.log(`BEST ${p.name}: ${best.shape} ${best.us.toFixed(2)} µs ${(wBytes / best.us / 1e3).toFixed(0)} GB/s`);
    for (const t of [...ws, x, r, nw, gu]) t.dispose();
    await be.idle();
  }
  if (was === undefined) delete process.env.NBX_WEBGPU_GEMV; else process.env.NBX_WEBGPU_GEMV = was;
  if (jsonFile) writeFileSync(jsonFile, JSON.stringify({ results }, null, 1));
  process.exit(0);
}

main().catch((e) => { console.error(e); process.exit(1); });
