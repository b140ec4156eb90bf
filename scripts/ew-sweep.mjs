// Elementwise launch configurations on the GPU (issue #7), run by scripts/gpu-ew.sh:
//   NBX_CACHE_DIR=$(mktemp -d) NBX_AUTOTUNE=full node scripts/ew-sweep.mjs OUTDIR
// 1. Sweeps (the way a user's first run does: CudaTuning's cheap sweep, every candidate in one module)
//    the keys of cuda.ew_flat and cuda.ew_bcast that the benchmark hits, for float32 and bfloat16:
//    contiguous add, x * 2, add of a row vector, of a column, mul by a 0-d tensor, where(bool, x, y), at the
//    benchmark's size (1 GiB per operand pair) and at 2^20, 2^22, 2^24, 2^26 elements. Operands are
//    zeros (a device memset: no host fill). Stops early (and still writes everything) past
//    EW_SWEEP_BUDGET_S seconds (default 25).
// 2. Prints, for every swept key, each candidate's time from the tuner's own record (no extra runs):
//    GB/s of the default, of the best, and the chosen configuration; OUTDIR/variants.md has the table.
// 3. Writes OUTDIR/nvidia-h200-sm_90.json: the shipped file (src/autotune/shipped/) with the new
//    entries merged in (old contiguous cuda.elementwise keys dropped: nothing looks them up), and
//    OUTDIR/autotune.json: the raw cache of this run.
import { readFileSync, writeFileSync, existsSync, openSync, writeSync } from 'node:fs';
import { join } from 'node:path';
import * as nbx from '../dist/src/index.js';
import { configKey } from '../dist/src/autotune/index.js';
import { CudaBackend } from '../dist/src/backend/cuda/runtime/backend.js';

const outDir = process.argv[2] ?? '.';
const cacheDir = process.env.NBX_CACHE_DIR;
if (!cacheDir) { console.error('set NBX_CACHE_DIR to an empty directory'); process.exit(2); }
const budget = Number(process.env.EW_SWEEP_BUDGET_S ?? 25) * 1000;
// EW_SWEEP_SHRINK divides the sizes (a dry run on the emulator)
const shrink = Number(process.env.EW_SWEEP_SHRINK ?? 1);
const dev = { device: 'cuda' };
const t0 = performance.now();
const secs = () => ((performance.now() - t0) / 1000).toFixed(1);

// OUTDIR/launches.log: every launch (kernel, grid, block, arguments) written before it is submitted,
// synchronously: the tuner synchronizes after each candidate, so after a stall the last line names
// the kernel and the arguments it never finished with.
const trace = openSync(join(outDir, 'launches.log'), 'w');
const launch = CudaBackend.prototype.launch;
CudaBackend.prototype.launch = function (k, grid, block, args, smem) {
  writeSync(trace, `${secs()}s ${k.name} grid ${grid} block ${block} args ${args.map(String).join(',')}\n`);
  return launch.call(this, k, grid, block, args, smem);
};

// ---- 1. the sweep --------------------------------------------------------------------------------
let stopped = false;
for (const dt of ['float32', 'bfloat16']) {
  const isz = dt === 'float32' ? 4 : 2, bench = (1 << 30) / (2 * isz);
  for (const n0 of [bench, 1 << 20, 1 << 22, 1 << 24, 1 << 26]) {
    if (performance.now() - t0 > budget) { stopped = true; break; }
    const n = Math.max(4096, n0 / shrink), r = n >= 16384 * 64 ? 16384 : 64, c = n / r;
    const t1 = performance.now();
    try {
      const z = (shape, d = dt) => nbx.zeros(shape, { ...dev, dtype: d });
      const a = z([n]), b = z([n]), cond = z([n], 'bool'), row = z([c]), col = z([r, 1]), s0 = z([]);
      const A = a.view(r, c);
      // contiguous add, x * 2 (one input), row vector, column, 0-d tensor, where(bool, x, y); each op announced before it
      // runs and synchronized after, so a stall names its op (run 1 stalled without saying where)
      const ops = { add: () => nbx.add(a, b), scale: () => nbx.mul(a, 2), row: () => nbx.add(A, row), col: () => nbx.add(A, col), '0-d': () => nbx.mul(a, s0), where: () => nbx.where(cond, a, b) };
      for (const [name, f] of Object.entries(ops)) {
        const t2 = performance.now();
        process.stdout.write(`  ${dt} n=${n} ${name} ... `);
        f().dispose();
        await nbx.cuda.synchronize();
        process.stdout.write(`${(performance.now() - t2).toFixed(0)} ms\n`);
      }
      for (const t of [a, b, cond, row, col, s0]) t.dispose();
      console.log(`sweep ${dt} n=${n}: ${((performance.now() - t1) / 1000).toFixed(2)} s (${secs()} s so far)`);
    } catch (e) { console.error(`sweep ${dt} n=${n} failed: ${e?.stack ?? e}`); }
  }
}
if (stopped) console.log(`sweep stopped at the ${budget / 1000} s budget`);
console.log(`sweep done: ${secs()} s`);

// ---- 2. every candidate's time, from the tuner's record --------------------------------------------
const cachePath = join(cacheDir, 'autotune.json');
if (!existsSync(cachePath)) { console.error(`no ${cachePath}: nothing was swept`); process.exit(1); }
const fresh = JSON.parse(readFileSync(cachePath, 'utf8'));
writeFileSync(join(outDir, 'autotune.json'), JSON.stringify(fresh, null, 1));
const lines = ['| kernel | key | candidates | default GB/s | best GB/s | best / default | chosen |', '| --- | --- | ---: | ---: | ---: | ---: | --- |'];
const DEFAULT = configKey({ threads: 128, unroll: 1, hint: 'none' });
for (const kernels of Object.values(fresh.entries)) {
  for (const name of ['cuda.ew_flat', 'cuda.ew_bcast']) {
    for (const [key, e] of Object.entries(kernels[name] ?? {})) {
      // key: "<layout>:<bucket>|<inputs>in:<width>B"; bytes moved ~ (inputs + 1) * width per element
      const m = /:(\d+)\|(\d)in:(\d)B/.exec(key);
      const gbs = (ms) => (m ? (Number(m[1]) * (Number(m[2]) + 1) * Number(m[3])) / (ms / 1e3) / 1e9 : NaN);
      const def = e.tried.find((t) => configKey(t.config) === DEFAULT);
      const best = e.timeMs;
      lines.push(`| ${name} | ${key} | ${e.tried.length} | ${def ? gbs(def.timeMs).toFixed(0) : '-'} | ${gbs(best).toFixed(0)} | ${def ? `${((def.timeMs / best) * 100).toFixed(1)}%` : '-'} | ${configKey(e.config)} |`);
    }
  }
}
console.log(`\nCandidates per key (the tuner's medians; GB/s approximate: (inputs + 1) x width bytes per element)\n${lines.join('\n')}`);
writeFileSync(join(outDir, 'variants.md'), `${lines.join('\n')}\n`);

// ---- 3. shipped entries -----------------------------------------------------------------------------
const shippedPath = 'src/autotune/shipped/nvidia-h200-sm_90.json';
const shipped = JSON.parse(readFileSync(shippedPath, 'utf8'));
let added = 0;
for (const [devKey, kernels] of Object.entries(fresh.entries)) {
  const key = devKey.split('|').slice(0, 2).join('|');
  shipped.entries[key] ??= {};
  for (const name of ['cuda.ew_flat', 'cuda.ew_bcast', 'cuda.elementwise']) {
    if (!kernels[name]) continue;
    shipped.entries[key][name] = { ...(shipped.entries[key][name] ?? {}), ...kernels[name] };
    added += Object.keys(kernels[name]).length;
  }
}
// cuda.elementwise tunes only the N-d kernel now: its old contiguous keys (v4/v8/flat) are never looked up
let dropped = 0;
for (const kernels of Object.values(shipped.entries)) {
  const ew = kernels['cuda.elementwise'];
  if (ew) for (const k of Object.keys(ew)) if (!k.startsWith('nd')) { delete ew[k]; dropped++; }
}
console.log(`${dropped} unused cuda.elementwise entries (contiguous keys of the old kernel) dropped`);
writeFileSync(join(outDir, 'nvidia-h200-sm_90.json'), JSON.stringify(shipped, null, 1));
console.log(`${added} entries merged into ${join(outDir, 'nvidia-h200-sm_90.json')} (copy to ${shippedPath}); ${secs()} s`);
