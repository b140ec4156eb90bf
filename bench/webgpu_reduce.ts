// Issue #8's elementwise and reduction rows (a trimmed bench/webgpu.ts): a*x+b and a+b, sum(dim=-1),
// sum(dim=0) and sum() over 1 GiB in float32 and float16, on WebGPU and on the CUDA backend of the same
// card, with three timings per row, because a WebGPU wait costs ~0.7 ms (submit, then Dawn's
// completion callback), which a 0.25 ms reduction does not hide:
//   wall10  bench/webgpu.ts's figure: a warm-up, 10 calls, one wait (comparable with earlier runs);
//   steady  enough calls for ~150 ms, one wait (what a long stream of work sees);
//   device  WebGPU only: timestamp queries around 20 calls (the kernels' own time).
// Ratios WebGPU/CUDA are given for wall10 and steady (the CUDA backend measured the same way) and for
// device (WebGPU's device time against CUDA's steady wall clock, whose overhead is ~1%).
// It prints the start-up checks (float16 rounding, subgroups) and where each launch configuration came
// from. --variants then times WebGPU rows again with one choice changed (hardware float16 rounding off,
// subgroups off, 1/2/8 loads in flight per thread instead of 4), steady and device time, so the next
// change can be chosen from measurements. --quick (or a software adapter) uses 64 MiB; --no-cuda skips
// the CUDA part.
// Run: node dist/bench/webgpu_reduce.js [--quick] [--no-cuda] [--variants]
import * as nbx from '../src/index.js';
import type { Tensor } from '../src/tensor/tensor.js';
import { type Dev, secs, out, sync, axpb, filledOn, tuneSources } from './webgpu_util.js';
import { caps } from '../src/backend/webgpu/runtime/caps.js';
import { setReduceUnroll } from '../src/backend/webgpu/kernels/reduce.js';



/** Seconds per call over `reps` back-to-back calls closed by one wait. */
async function wall(dev: Dev, fn: () => void, reps: number): Promise<number> {
  const t = performance.now();
  for (let i = 0; i < reps; i++) fn();
  await sync(dev);
  return (performance.now() - t) / 1000 / reps;
}

/** WebGPU device seconds per call: timestamps around `reps` calls (null without timestamp queries). */
async function deviceTime(fn: () => void, reps: number): Promise<number | null> {
  const be = nbx.webgpu.backend();
  if (!be.device.features.has('timestamp-query')) return null;
  const set = be.device.createQuerySet({ type: 'timestamp', count: 2 });
  const resolve = be.device.createBuffer({ size: 16, usage: 0x0200 | 0x0004 }); // QUERY_RESOLVE | COPY_SRC
  const read = be.device.createBuffer({ size: 16, usage: 0x0001 | 0x0008 }); // MAP_READ | COPY_DST
  await be.idle();
  be.timestamp(set, 0);
  for (let i = 0; i < reps; i++) fn();
  be.timestamp(set, 1, resolve, read);
  await be.idle();
  await read.mapAsync(1);
  const t = new BigInt64Array(read.getMappedRange().slice(0));
  read.unmap();
  set.destroy(); resolve.destroy(); read.destroy();
  return Number(t[1]! - t[0]!) / 1e9 / reps;
}



interface Times { wall10: number; steady: number; device?: number | null; first: number }
type Rows = Map<string, { label: string; gb: number; webgpu?: Times; cuda?: Times }>;

/** The benchmark's operations on x, y of one dtype: [key, label, operand-sizes moved, call]. */
function cases(x: Tensor, y: Tensor, name: string): [string, string, number, () => void][] {
  const n = x.numel(), X = (t: Tensor): Tensor => t.view(-1, 16384);
  return [
    [`axpb ${name}`, `a*x+b (${name})`, 2, () => axpb(x, 1.5, 0.25).dispose()],
    [`add ${name}`, `a+b (${name})`, 3, () => nbx.add(x, y).dispose()],
    [`sum rows ${name}`, `sum(dim=-1) [${n / 16384}, 16384] (${name})`, 1, () => nbx.sum(X(x), -1).dispose()],
    [`sum cols ${name}`, `sum(dim=0) [${n / 16384}, 16384] (${name})`, 1, () => nbx.sum(X(x), 0).dispose()],
    [`sum all ${name}`, `sum() [${n}] (${name})`, 1, () => nbx.sum(x).dispose()],
  ];
}

async function suite(dev: Dev, bytes: number, rows: Rows): Promise<void> {
  for (const [dt, name, isz] of [['float32', 'f32', 4], ['float16', 'f16', 2]] as const) {
    const x = filledOn(dev, bytes / isz, 0.5, dt), y = filledOn(dev, bytes / isz, 0.25, dt);
    await sync(dev);
    for (const [key, label, moved, fn] of cases(x, y, name)) {
      try {
        const t0 = performance.now();
        fn(); await sync(dev);
        const first = performance.now() - t0;
        if (dev === 'webgpu') await nbx.webgpu.backend().tuning?.settled(); // a sweep the first call queued
        fn(); await sync(dev);
        const wall10 = await wall(dev, fn, 10);
        const steady = await wall(dev, fn, Math.min(2000, Math.max(10, Math.ceil(0.15 / wall10))));
        const device = dev === 'webgpu' ? await deviceTime(fn, 20) : undefined;
        const r = rows.get(key) ?? { label, gb: (moved * bytes) / 1e9 };
        r[dev] = { wall10, steady, device, first };
        rows.set(key, r);
        const bw = (s: number): string => (r.gb / s).toFixed(r.gb / s >= 100 ? 0 : 1);
        out(`row [${secs()} s] ${dev} | ${label} | wall10 ${bw(wall10)} GB/s | steady ${bw(steady)} GB/s${device ? ` | device ${bw(device)} GB/s` : ''} | first call ${first.toFixed(0)} ms`);
      } catch (e) {
        out(`row ${dev} ${label} FAILED: ${(e as Error).message.split('\n')[0]}`);
      }
    }
    x.dispose(); y.dispose();
  }
}

/** WebGPU rows again with one choice changed (steady and device time), next to the default's device time. */
async function variants(bytes: number, rows: Rows): Promise<void> {
  const sums = (k: string): boolean => k.startsWith('sum');
  const list: [string, (k: string) => boolean, () => () => void][] = [
    ['float16 rounding bit-level', (k) => /^(axpb|add) f16/.test(k), () => { const was = caps.hwHalf; caps.hwHalf = false; return () => { caps.hwHalf = was; }; }],
    ['subgroups off', sums, () => { const was = caps.subgroups; caps.subgroups = false; return () => { caps.subgroups = was; }; }],
    ...[1, 2, 8].map((u): [string, (k: string) => boolean, () => () => void] =>
      [`${u} loads in flight`, (k) => /^sum (rows|all)/.test(k), () => { const was = setReduceUnroll(u); return () => { setReduceUnroll(was); }; }]),
  ];
  out(`\n[${secs()} s] variants (WebGPU; GB/s; "vs default" compares device times)`);
  out('| variant | benchmark | steady | device | vs default |');
  out('| --- | --- | ---: | ---: | ---: |');
  for (const [dt, name, isz] of [['float32', 'f32', 4], ['float16', 'f16', 2]] as const) {
    const x = filledOn('webgpu', bytes / isz, 0.5, dt), y = filledOn('webgpu', bytes / isz, 0.25, dt);
    await sync('webgpu');
    for (const [vname, pick, set] of list) {
      for (const [key, label, moved, fn] of cases(x, y, name)) {
        if (!pick(key)) continue;
        const undo = set();
        try {
          fn(); await sync('webgpu');
          const gb = (moved * bytes) / 1e9, steady = await wall('webgpu', fn, Math.min(2000, Math.max(10, Math.ceil(0.1 / (await wall('webgpu', fn, 5))))));
          const device = await deviceTime(fn, 20), base = rows.get(key)?.webgpu?.device;
          out(`| ${vname} | ${label} | ${(gb / steady).toFixed(0)} | ${device ? (gb / device).toFixed(0) : '—'} | ${device && base ? `${((base / device) * 100).toFixed(0)}%` : '—'} |`);
        } catch (e) {
          out(`| ${vname} | ${label} | FAILED: ${(e as Error).message.split('\n')[0]} | | |`);
        } finally { undo(); }
      }
    }
    x.dispose(); y.dispose();
  }
}


async function main(args: string[]): Promise<void> {
  const info = await nbx.webgpu.init();
  const soft = /llvmpipe|swiftshader|lavapipe|software/i.test(info.adapter);
  if (soft && !process.env.NBX_AUTOTUNE) process.env.NBX_AUTOTUNE = 'cached';
  const maxBind = Math.min(info.limits.maxStorageBufferBindingSize ?? 2 ** 30, info.limits.maxBufferSize ?? 2 ** 30);
  const bytes = Math.min(args.includes('--quick') || soft ? 64 * 2 ** 20 : 2 ** 30, 2 ** Math.floor(Math.log2(maxBind)));
  out(`WebGPU: ${info.adapter} (${info.via}); features ${info.features.join(' ')}; subgroup sizes ${info.identity.subgroupMinSize}..${info.identity.subgroupMaxSize}`);
  out(`start-up checks: float16 rounding: ${caps.reason.hwHalf}; subgroups: ${caps.reason.subgroups}`);
  out(`workgroups: elementwise ${info.wgElementwise}, reduction ${info.wgReduce}; NBX_AUTOTUNE=${process.env.NBX_AUTOTUNE ?? '(unset: full)'}`);
  out(`launch configurations: ${tuneSources(info.tuneKey, bytes)}`);
  out(`operands: ${bytes / 2 ** 20} MiB\n`);

  const rows: Rows = new Map();
  const s0 = nbx.webgpu.memoryStats();
  await suite('webgpu', bytes, rows);
  const s1 = nbx.webgpu.memoryStats();
  out(`WebGPU: ${s1.dispatches - s0.dispatches} dispatches in ${s1.submits - s0.submits} submits`);
  if (args.includes('--variants')) await variants(bytes, rows);
  nbx.webgpu.emptyCache();
  if (!args.includes('--no-cuda') && !soft) {
    if (nbx.cuda.is_available()) { await suite('cuda', bytes, rows); nbx.cuda.emptyCache(); } else out('CUDA backend: not available');
  }

  const pct = (a?: number | null, b?: number): string => (a && b ? `${((b / a) * 100).toFixed(0)}%` : '—');
  const gbs = (r: { gb: number }, s?: number | null): string => (s ? (r.gb / s).toFixed(r.gb / s >= 100 ? 0 : 1) : '—');
  out(`\n[${secs()} s] summary (GB/s; ratio = WebGPU / CUDA backend; target >= 90%)`);
  out('| benchmark | WebGPU wall10 | CUDA wall10 | ratio wall10 | WebGPU steady | CUDA steady | ratio steady | WebGPU device | device vs CUDA steady |');
  out('| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |');
  for (const r of rows.values()) {
    const g = r.webgpu, c = r.cuda;
    out(`| ${r.label} | ${gbs(r, g?.wall10)} | ${gbs(r, c?.wall10)} | ${pct(g?.wall10, c?.wall10)} | ${gbs(r, g?.steady)} | ${gbs(r, c?.steady)} | ${pct(g?.steady, c?.steady)} | ${gbs(r, g?.device)} | ${pct(g?.device, c?.steady)} |`);
  }
  out(`total ${secs()} s`);
}

main(process.argv.slice(2)).then(() => process.exit(process.exitCode ?? 0), (e) => { console.error(e); process.exit(1); });
