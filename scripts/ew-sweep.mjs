// Elementwise launch configurations on the GPU (issue #7), run by scripts/gpu-ew.sh:
//   node scripts/ew-sweep.mjs OUTDIR
// 1. Sweeps (NBX_AUTOTUNE=full, NBX_CACHE_DIR empty) the keys of cuda.ew_flat and cuda.ew_bcast for
//    float32 and bfloat16, every power of two from 2^16 to 2^28 elements: contiguous with 1, 2 and 3
//    inputs (aligned) and 2 inputs (unaligned), broadcast row vectors with 1 and 2 inputs (aligned)
//    and 2 inputs (odd row length).
// 2. Times every configuration of the space at the benchmark's shapes (1 GiB per operand pair:
//    contiguous add, A[16384, c] + row[c], A + col[16384, 1]) and prints GB/s per variant.
// 3. Writes OUTDIR/nvidia-h200-sm_90.json: the shipped file (src/autotune/shipped/) with the new
//    entries merged in, and OUTDIR/autotune.json: the raw cache of this run.
import { readFileSync, writeFileSync, existsSync } from 'node:fs';
import { join } from 'node:path';
import * as nbx from '../dist/src/index.js';
import { ewOverride } from '../dist/src/backend/cuda/ew_kernels.js';
import { EW_FLAT_SPACE } from '../dist/src/backend/cuda/tuning.js';
import { enumerate, configKey } from '../dist/src/autotune/index.js';

const outDir = process.argv[2] ?? '.';
const cacheDir = process.env.NBX_CACHE_DIR;
if (!cacheDir) { console.error('set NBX_CACHE_DIR to an empty directory'); process.exit(2); }
const lo = Number(process.env.EW_SWEEP_LO ?? 16), hi = Number(process.env.EW_SWEEP_HI ?? 28);
// EW_VARIANT_SHRINK divides the variant timing's sizes (a dry run on the emulator)
const shrink = Number(process.env.EW_VARIANT_SHRINK ?? 1);
const dev = { device: 'cuda' };
const t0 = performance.now();

// ---- 1. the sweep --------------------------------------------------------------------------------
for (const dt of ['float32', 'bfloat16']) {
  for (let k = lo; k <= hi; k++) {
    const n = 2 ** k;
    try {
    const a = nbx.ones([n], { ...dev, dtype: dt }), b = nbx.ones([n], { ...dev, dtype: dt }), c = nbx.ones([n], { ...dev, dtype: 'bool' });
    nbx.mul(a, 2).dispose(); // flat v 1in
    nbx.add(a, b).dispose(); // flat v 2in
    nbx.where(c, a, b).dispose(); // flat v 3in
    nbx.add(a.narrow(0, 1, n - 1), b.narrow(0, 1, n - 1)).dispose(); // flat s 2in
    const C = Math.min(4096, n >> 4), R = n / C;
    const row = nbx.ones([C], { ...dev, dtype: dt });
    nbx.add(a.view(R, C), row).dispose(); // bcast v 2in
    row.reshape(1, C).expand(R, C).contiguous().dispose(); // bcast v 1in
    nbx.add(a.view(R, C).narrow(1, 0, C - 1), row.narrow(0, 0, C - 1)).dispose(); // bcast s 2in (odd rows)
    await nbx.cuda.synchronize();
    a.dispose(); b.dispose(); c.dispose(); row.dispose();
    } catch (e) { console.error(`sweep ${dt} 2^${k} failed: ${e?.stack ?? e}`); }
  }
  console.log(`sweep ${dt}: ${((performance.now() - t0) / 1000).toFixed(1)} s`);
}

// ---- 2. every variant at the benchmark's shapes ----------------------------------------------------
async function time(fn, reps = 10) {
  fn(); await nbx.cuda.synchronize();
  const s = performance.now();
  for (let i = 0; i < reps; i++) fn();
  await nbx.cuda.synchronize();
  return (performance.now() - s) / 1000 / reps;
}
async function variants() {
  const lines = ['| variant | ' + ['add f32', 'row f32', 'col f32', 'add bf16', 'row bf16', 'col bf16'].join(' | ') + ' |', '| --- |' + ' ---: |'.repeat(6)];
  const results = new Map();
  const tensors = {};
  for (const dt of ['float32', 'bfloat16']) {
    const isz = dt === 'float32' ? 4 : 2, n = (1 << 30) / (2 * isz) / shrink, r = 16384 / Math.sqrt(shrink);
    tensors[dt] = { isz, n, a: nbx.ones([n], { ...dev, dtype: dt }), b: nbx.ones([n], { ...dev, dtype: dt }), row: nbx.ones([n / r], { ...dev, dtype: dt }), col: nbx.ones([r, 1], { ...dev, dtype: dt }), r };
  }
  for (const cfg of [null, ...enumerate(EW_FLAT_SPACE)]) {
    ewOverride.config = cfg;
    const cells = [];
    for (const dt of ['float32', 'bfloat16']) {
      const { isz, n, a, b, row, col, r } = tensors[dt];
      const A = a.view(r, n / r);
      cells.push(3 * n * isz / await time(() => nbx.add(a, b).dispose()) / 1e9);
      cells.push(2 * n * isz / await time(() => nbx.add(A, row).dispose()) / 1e9);
      cells.push(2 * n * isz / await time(() => nbx.add(A, col).dispose()) / 1e9);
    }
    const name = cfg ? configKey(cfg) : 'tuned (this cache)';
    results.set(name, cells);
    lines.push(`| ${name} | ${cells.map((x) => x.toFixed(0)).join(' | ')} |`);
  }
  ewOverride.config = null;
  const best = [0, 1, 2, 3, 4, 5].map((i) => [...results.entries()].filter(([k]) => !k.startsWith('tuned')).sort((x, y) => y[1][i] - x[1][i])[0]);
  lines.push(`| best per column | ${best.map(([k, v], i) => `${v[i].toFixed(0)} ${k}`).join(' | ')} |`);
  console.log(`\nGB/s per launch configuration (1 GiB per operand pair; ${((performance.now() - t0) / 1000).toFixed(1)} s so far)\n${lines.join('\n')}`);
  writeFileSync(join(outDir, 'variants.md'), `${lines.join('\n')}\n`);
  for (const t of Object.values(tensors)) { t.a.dispose(); t.b.dispose(); t.row.dispose(); t.col.dispose(); }
}
try { await variants(); } catch (e) { ewOverride.config = null; console.error(`variant timing failed: ${e?.stack ?? e}`); }

// ---- 3. shipped entries -----------------------------------------------------------------------------
const cachePath = join(cacheDir, 'autotune.json');
if (!existsSync(cachePath)) { console.error(`no ${cachePath}: nothing was swept`); process.exit(1); }
const fresh = JSON.parse(readFileSync(cachePath, 'utf8'));
writeFileSync(join(outDir, 'autotune.json'), JSON.stringify(fresh, null, 1));
const shippedPath = 'src/autotune/shipped/nvidia-h200-sm_90.json';
const shipped = JSON.parse(readFileSync(shippedPath, 'utf8'));
let added = 0;
for (const [devKey, kernels] of Object.entries(fresh.entries)) {
  const key = devKey.split('|').slice(0, 2).join('|');
  shipped.entries[key] ??= {};
  for (const name of ['cuda.ew_flat', 'cuda.ew_bcast']) {
    if (!kernels[name]) continue;
    shipped.entries[key][name] = { ...(shipped.entries[key][name] ?? {}), ...kernels[name] };
    added += Object.keys(kernels[name]).length;
    for (const [k, e] of Object.entries(kernels[name])) if (/:(134217728|268435456)\|/.test(k)) console.log(`${name} ${k}: ${configKey(e.config)} ${e.timeMs.toFixed(3)} ms`);
  }
}
// cuda.elementwise now tunes only the N-d kernel: its old contiguous keys (v4/v8/flat) are unused
let dropped = 0;
for (const kernels of Object.values(shipped.entries)) {
  const ew = kernels['cuda.elementwise'];
  if (ew) for (const k of Object.keys(ew)) if (!k.startsWith('nd')) { delete ew[k]; dropped++; }
}
console.log(`${dropped} unused cuda.elementwise entries (contiguous keys of the old kernel) dropped`);
writeFileSync(join(outDir, 'nvidia-h200-sm_90.json'), JSON.stringify(shipped, null, 1));
console.log(`\n${added} entries of cuda.ew_flat / cuda.ew_bcast merged into ${join(outDir, 'nvidia-h200-sm_90.json')} (copy to ${shippedPath}); ${((performance.now() - t0) / 1000).toFixed(1)} s`);
