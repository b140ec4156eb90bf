// The benchmark's contiguous add on the card, every launch configuration of cuda.ew_flat forced in turn
// (issue #7: bf16 add at 98% of PyTorch). Times are the benchmark's: reps calls between CUDA events,
// best of three samples. Also: registers of each kernel, the operands' device addresses (placement in
// HBM), the same add on operands allocated the way PyTorch's benchmark does (a, b, out in a row), a
// copy and a multiply by 2.   node scripts/diag-ew.mjs
import * as nbx from '../dist/src/index.js';
import { ewOverride } from '../dist/src/backend/cuda/runtime/elementwise.js';
import { EW_FLAT_SPACE } from '../dist/src/backend/cuda/tuning/spaces.js';
import { enumerate } from '../dist/src/autotune/space.js';
import { timeEvents } from '../dist/bench/gpu_timing.js';

const be = nbx.cuda.backend();
const GiB = 2 ** 30;
const fmt = (s, bytes) => `${(s * 1e3).toFixed(4)} ms ${(bytes / s / 1e9).toFixed(1).padStart(7)} GB/s`;
const addr = (t) => `0x${t.ref().buf.ptr.toString(16)}`;
for (const [dt, isz] of [['bfloat16', 2], ['float32', 4]]) {
  const n = GiB / (2 * isz) / Number(process.env.DIAG_SHRINK ?? 1), bytes = 3 * n * isz; // DIAG_SHRINK: a dry run on the emulator
  // as bench/cuda.ts builds them
  const a = nbx.sin(nbx.arange(n, { dtype: dt, device: 'cuda' })), b = nbx.add(a, 1);
  const probe = nbx.add(a, b);
  console.log(`${dt}: a ${addr(a)} b ${addr(b)} out ${addr(probe)}`);
  probe.dispose();
  console.log(`${dt} add, tuned/shipped: ${fmt(await timeEvents(() => nbx.add(a, b).dispose(), 20), bytes)}`);
  for (const cfg of enumerate(EW_FLAT_SPACE)) {
    ewOverride.config = cfg;
    try {
      const s = await timeEvents(() => nbx.add(a, b).dispose(), 20);
      console.log(`${dt} add ${JSON.stringify(cfg).padEnd(44)} ${fmt(s, bytes)}`);
    } catch (e) { console.log(`${dt} add ${JSON.stringify(cfg)} failed: ${e.message}`); }
  }
  // plain ld.global loads (PyTorch's) instead of the read-only path
  for (const threads of [128, 256]) for (const unroll of [1, 2, 4]) {
    ewOverride.config = { threads, unroll, hint: 'ca' };
    console.log(`${dt} add ld.ca ${JSON.stringify(ewOverride.config).padEnd(44)} ${fmt(await timeEvents(() => nbx.add(a, b).dispose(), 20), bytes)}`);
  }
  // the same configurations converting one element at a time (before the packed pairs)
  if (isz === 2) {
    ewOverride.scalarPack = true;
    for (const cfg of enumerate(EW_FLAT_SPACE).filter((c) => c.hint === 'none')) {
      ewOverride.config = cfg;
      console.log(`${dt} add scalar cvt ${JSON.stringify(cfg).padEnd(44)} ${fmt(await timeEvents(() => nbx.add(a, b).dispose(), 20), bytes)}`);
    }
    ewOverride.scalarPack = false;
  }
  ewOverride.config = null;
  // PyTorch's arrangement: a, b and the output allocated one after the other, the output reused
  const a2 = nbx.zeros([n], { dtype: dt, device: 'cuda' }), b2 = nbx.zeros([n], { dtype: dt, device: 'cuda' });
  const p2 = nbx.add(a2, b2);
  console.log(`${dt}: a2 ${addr(a2)} b2 ${addr(b2)} out ${addr(p2)}`);
  p2.dispose();
  console.log(`${dt} add of fresh zeros:  ${fmt(await timeEvents(() => nbx.add(a2, b2).dispose(), 20), bytes)}`);
  console.log(`${dt} add, a and b swapped: ${fmt(await timeEvents(() => nbx.add(b, a).dispose(), 20), bytes)}`);
  console.log(`${dt} clone (copy):         ${fmt(await timeEvents(() => a.clone().dispose(), 20), 2 * n * isz)}`);
  console.log(`${dt} mul by 2:             ${fmt(await timeEvents(() => nbx.mul(a, 2).dispose(), 20), 2 * n * isz)}`);
  a.dispose(); b.dispose(); a2.dispose(); b2.dispose();
}
for (const [key, k] of be.kernels ?? []) {
  if (!/^ew|elementwise/.test(String(key)) && !/^ew/.test(k.name ?? '')) continue;
  try { const r = k.resources(); console.log(`kernel ${k.name} (${String(key).slice(0, 80)}): ${r.numRegs} regs, ${r.localBytes} B local`); } catch { /* not a function handle */ }
}
console.log('allocator', JSON.stringify(nbx.cuda.memoryStats()).slice(0, 300));
