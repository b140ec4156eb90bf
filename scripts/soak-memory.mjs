#!/usr/bin/env node
// Memory soak: loops that a long-running program runs, on every device here (cpu; webgpu where an
// adapter comes up; cuda where a driver and device exist), reporting the process's RSS and the device
// allocator's reserved bytes after each phase, and failing (exit 1) when either passes its bound.
// Build first (`npm run build`).
//
//   node scripts/soak-memory.mjs [--devices cpu,webgpu,cuda] [--scale 1] [--rss-mb N] [--json FILE]
//
// Phases per device (sizes x --scale):
//   dispose   results of 4 MiB, each disposed: reserved stays at a few buffers
//   gc        results left to the garbage collector (64 MiB on the cpu, 4 MiB on devices, awaited now
//             and then so finalizers run): RSS stays bounded, as for a program that forgets dispose()
//   scope     a scope per iteration around a chain of ops: nothing survives an iteration
//   chain     a long chain of small ops with no read in between (each intermediate disposed), then one
//             read: the queue and its buffers stay bounded
//   empty     after a collection, emptyCache() returns what the allocator cached: reserved falls to the
//             live tensors (x and a small one)
import { parseArgs } from 'node:util';
import { writeFileSync } from 'node:fs';

const { values } = parseArgs({ options: {
  devices: { type: 'string' }, scale: { type: 'string', default: '1' }, 'rss-mb': { type: 'string' }, json: { type: 'string' },
} });
// the gc phase checks that undisposed device tensors stay bounded by the collection budget: 1 GiB
// here (the CUDA default, 1/8 of the device, would need a 17 GiB bound on an H200)
process.env.NBX_CUDA_GC_MB ??= '1024';
const nbx = await import('../dist/src/index.js');
const scale = Number(values.scale);
const MiB = 2 ** 20;

let devices = values.devices?.split(',');
if (!devices) {
  devices = ['cpu'];
  if ((await nbx.webgpu.probe()).available) devices.push('webgpu');
  try { if ((await import('../dist/src/backend/cuda/runtime/libs.js')).probeCuda().available) devices.push('cuda'); } catch { /* no cuda */ }
}
// RSS bound: the baseline plus 1.5x the CPU's collection budget (1/8 of RAM, at least 1 GiB) plus the
// device phases' own bound (llvmpipe's buffers are host memory)
const { hostPressure, collectGarbage } = await import('../dist/src/memory/gc_pressure.js');
const { segmentSizeFor, roundSize } = await import('../dist/src/memory/caching_allocator.js');
const rssBudget = (values['rss-mb'] ? Number(values['rss-mb']) * MiB : hostPressure.budgetBytes * 1.5 + 1536 * MiB);

const reserved = (device) => {
  if (device === 'webgpu') return nbx.webgpu.memoryStats().reservedBytes;
  if (device === 'cuda') return nbx.cuda.memoryStats().reservedBytes;
  return null;
};
const empty = (device) => (device === 'webgpu' ? nbx.webgpu.emptyCache() : device === 'cuda' ? nbx.cuda.emptyCache() : 0);
const sync = async (device) => { if (device === 'webgpu') await nbx.webgpu.synchronize(); else if (device === 'cuda') await nbx.cuda.synchronize(); };
const rss = () => process.memoryUsage().rss;
const fmt = (b) => (b === null ? '-' : `${(b / MiB).toFixed(1)} MiB`);

const rows = [];
let failed = false;
const baseline = rss();
console.log(`soak: devices ${devices.join(', ')}, scale ${scale}; baseline RSS ${fmt(baseline)}, RSS bound ${fmt(baseline + rssBudget)}`);

for (const device of devices) {
  const elems4M = MiB; // 4 MiB of float32
  const x = nbx.ones([elems4M], { device });
  await x.data();
  const live = 2 * 4 * MiB; // x and a result at a time
  const phase = async (name, n, body, reservedBound) => {
    const t0 = performance.now();
    const startReserved = reserved(device) ?? 0;
    let peakRss = 0, peakReserved = 0;
    for (let i = 0; i < n; i++) {
      await body(i);
      if (i % 16 === 0) { peakRss = Math.max(peakRss, rss()); peakReserved = Math.max(peakReserved, reserved(device) ?? 0); }
    }
    await sync(device);
    peakRss = Math.max(peakRss, rss());
    const res = reserved(device);
    if (res !== null) peakReserved = Math.max(peakReserved, res);
    const row = { device, phase: name, iterations: n, seconds: (performance.now() - t0) / 1000, peakRss, rss: rss(), reserved: res, peakReserved: res === null ? null : peakReserved };
    const over = [];
    if (peakRss > baseline + rssBudget) over.push(`peak RSS ${fmt(peakRss)} > ${fmt(baseline + rssBudget)}`);
    // the bound is on growth during the phase: what an earlier phase cached is reused, not counted again
    if (reservedBound !== undefined && res !== null && peakReserved - startReserved > reservedBound) over.push(`reserved grew by ${fmt(peakReserved - startReserved)} > ${fmt(reservedBound)}`);
    row.ok = over.length === 0;
    if (!row.ok) failed = true;
    rows.push(row);
    console.log(`${device.padEnd(7)} ${name.padEnd(8)} ${String(n).padStart(6)} it ${row.seconds.toFixed(1).padStart(6)} s  peak RSS ${fmt(peakRss).padStart(11)}  reserved ${fmt(res).padStart(11)} (peak ${fmt(row.peakReserved).padStart(11)})  ${row.ok ? 'ok' : `FAIL: ${over.join('; ')}`}`);
  };

  await phase('dispose', Math.round(400 * scale), (i) => { const y = nbx.add(x, i); y.dispose(); }, 8 * live);
  if (device === 'cpu') {
    const big = nbx.ones([16 * MiB]); // 64 MiB
    await phase('gc', Math.round(300 * scale), (i) => { nbx.add(big, i); });
    big.dispose();
  } else {
    // the device's collection budget (NBX_WEBGPU_GC_MB, NBX_CUDA_GC_MB: 1 GiB here) plus what is in flight
    await phase('gc', Math.round(600 * scale), async (i) => { nbx.add(x, i); if (i % 32 === 31) { await sync(device); await new Promise((r) => setTimeout(r, 0)); } }, 1536 * MiB);
  }
  await phase('scope', Math.round(300 * scale), (i) => nbx.scope(() => { let y = nbx.add(x, i); for (let k = 0; k < 8; k++) y = nbx.mul(y, 1.0001); return null; }), 8 * live);
  const small = nbx.ones([256], { device });
  let chainEnd = null;
  await phase('chain', 1, async () => {
    let y = nbx.add(small, 0);
    for (let i = 0; i < 50_000 * scale; i++) { const z = nbx.add(y, 1); y.dispose(); y = z; }
    chainEnd = (await y.data())[0];
    y.dispose();
  }, 8 * live);
  if (chainEnd !== 1 + 50_000 * scale) { console.log(`  chain value ${chainEnd}, expected ${1 + 50_000 * scale}: FAIL`); failed = true; }
  // tensors of the gc phase that are unreachable but not yet finalized: collect, let finalizers run
  collectGarbage();
  await new Promise((r) => setTimeout(r, 100));
  await sync(device);
  const freed = empty(device);
  await phase('empty', 1, () => {});
  const after = reserved(device);
  // what the live tensors (x, small) hold: the caching allocator keeps them in whole segments (a 4 MiB
  // tensor in a 20 MiB large segment, a small one in a 2 MiB small segment, as PyTorch's allocator)
  const seg = (b) => segmentSizeFor(roundSize(b));
  const keeps = device === 'cuda' ? seg(4 * MiB) + seg(256 * 4) + 64 * 1024 : 2 * live + 64 * 1024;
  if (after !== null && after > keeps) { console.log(`  reserved after emptyCache ${fmt(after)} > ${fmt(keeps)}: FAIL`); failed = true; }
  console.log(`${' '.repeat(8)}emptyCache released ${fmt(freed)}`);
  x.dispose(); small.dispose();
}
if (values.json) writeFileSync(values.json, JSON.stringify({ devices, scale, baseline, rssBudget, rows, failed }, null, 1));
console.log(failed ? 'soak: FAILED' : 'soak: all phases within bounds');
process.exitCode = failed ? 1 : 0;
