#!/usr/bin/env node
// CUDA attention check for the device (issue #20): one command, a compact log, < 4 minutes.
//   npm run build && node scripts/attention-check.mjs            (check + kernel timings + bench)
//   node scripts/attention-check.mjs --no-bench                  (skip bench/cuda_attention.ts)
//   node scripts/attention-check.mjs --no-check --probe --no-time --no-bench
//        (each wgmma tile and two mma tiles alone on B4 H32 L4096 D128 bf16, causal and not, in a child killed
//        after 12 s: which configuration, if any, hangs)
// 1. correctness (child process, 120 s limit, so a hung kernel cannot eat the device call): every
//    variant through the wgmma (sm_90a) kernel, each of its tiles forced, and through the mma.sync
//    kernel, against the CPU reference in float32 on the same inputs: bf16/f16, head dims 64/128/256,
//    causal (L = S, L < S, L > S) and not, GQA, bool mask with fully masked rows, additive masks, an
//    all-masked input (must be 0, NaN-free), ragged lengths; and the same call twice bit for bit.
//    Prints max |error| per kernel and PASS/FAIL (wgmma error ≤ max(2 x mma error, FlashAttention-
//    class tolerance)).
// 2. kernel timings: the wgmma kernel and the mma kernel forced on the bench's prefill shapes, TFLOP/s.
// 3. bench/cuda_attention.ts (nbx as tuned vs PyTorch SDPA in the same run, when torch imports).
import { spawnSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { dirname, join } from 'node:path';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
const part = process.argv.find((a) => a.startsWith('--part='))?.slice(7);

async function sm90ConfigsForImpl(D) {
  const m = await import(join(root, 'dist/src/backend/cuda/kernels/attention_sm90.js'));
  return m.sm90Configs(D).map((w) => ({ impl: 'wgmma', blockM: 128, blockN: w.blockN, stages: w.stages, overlap: !!w.overlap, tag: `n${w.blockN}s${w.stages}${w.overlap ? 'o' : ''}` }));
}
if (!part) {
  const t0 = performance.now();
  const step = (label, args, timeoutS) => {
    const s = performance.now();
    // the tuner offers the wgmma kernel only with NBX_ATTENTION_WGMMA=1 while it is unverified on a card
    const r = spawnSync(process.execPath, args, { cwd: root, stdio: 'inherit', timeout: timeoutS * 1000, killSignal: 'SIGKILL', env: { NBX_ATTENTION_WGMMA: '1', ...process.env } });
    const why = r.error ? ` (${r.error.code === 'ETIMEDOUT' ? `killed after ${timeoutS} s: a hang?` : r.error.message})` : r.status ? ` (exit ${r.status})` : '';
    console.log(`== ${label}: ${((performance.now() - s) / 1000).toFixed(0)} s${why}`);
    return r.status === 0;
  };
  const self = fileURLToPath(import.meta.url);
  const fw = process.argv.filter((a) => a.startsWith('--filter='));
  const ok = process.argv.includes('--no-check') || step('check', [self, '--part=check', ...fw], 120);
  if (process.argv.includes('--probe')) {
    // each wgmma (and mma) configuration alone in a child with a 12 s limit, B4 H32 L4096 D128 bf16: does one hang?
    const cfgs = [...await sm90ConfigsForImpl(128), { impl: 'mma', blockM: 128, blockN: 64, stages: 2, overlap: false, tag: 'mma n64' },
      { impl: 'mma', blockM: 128, blockN: 128, stages: 2, overlap: false, tag: 'mma n128' }];
    for (const causal of [0, 1]) for (const L of [4096]) for (const c of cfgs) {
      const r = spawnSync(process.execPath, [self, '--part=one', String(L), String(causal), JSON.stringify(c)], { cwd: root, encoding: 'utf8', timeout: 12000, killSignal: 'SIGKILL', env: process.env });
      console.log(`probe ${causal ? 'causal' : 'full  '} L${L} ${c.tag}: ${r.error ? 'KILLED after 12 s (hang?)' : (r.stdout || r.stderr).trim().split('\n').pop()}`);
    }
  }
  if (!process.argv.includes('--no-time')) step('kernel timings', [self, '--part=time'], 45);
  if (!process.argv.includes('--no-bench')) step('bench', ['dist/bench/cuda_attention.js'], 75);
  console.log(`== attention-check ${ok ? 'PASS' : 'FAIL'} in ${((performance.now() - t0) / 1000).toFixed(0)} s`);
  process.exit(ok ? 0 : 1);
}

const nbx = await import(join(root, 'dist/src/index.js'));
const { Tensor } = await import(join(root, 'dist/src/tensor/tensor.js'));
const att = await import(join(root, 'dist/src/backend/cuda/kernels/attention.js'));
const sm90 = await import(join(root, 'dist/src/backend/cuda/kernels/attention_sm90.js'));
const F = nbx.nn.functional;
const sdpa = (q, k, v, mask, causal, scale, gqa) => F.scaled_dot_product_attention(q, k, v, { ...(mask ? { attn_mask: mask } : {}), is_causal: !!causal, ...(scale ? { scale } : {}), enable_gqa: gqa });
const filter = new RegExp(process.argv.find((a) => a.startsWith('--filter='))?.slice(9) ?? '.');

/** n<BLOCK_N>s<stages>, 'o' when Q·K(t+1)ᵀ overlaps the softmax. */
const tagOf = (w) => `n${w.blockN}s${w.stages}${w.overlap ? 'o' : ''}`;
/** Deterministic values in [lo, hi) (an LCG) as a CPU float32 tensor. */
function rand(shape, seed, lo = -1, hi = 1) {
  const n = shape.reduce((a, b) => a * b, 1);
  let s = (seed * 2654435761) >>> 0;
  const v = new Float32Array(n);
  for (let i = 0; i < n; i++) { s = (Math.imul(s, 1664525) + 1013904223) >>> 0; v[i] = lo + ((s >>> 8) / 2 ** 24) * (hi - lo); }
  return Tensor.fromStorage(v, 'float32', shape, 'cpu');
}
/** A CPU float32 tensor whose element i (flat) is f(i). */
function grid(shape, f) {
  const n = shape.reduce((a, b) => a * b, 1);
  const v = new Float32Array(n);
  for (let i = 0; i < n; i++) v[i] = f(i);
  return Tensor.fromStorage(v, 'float32', shape, 'cpu');
}
const host = (t) => t.to('cpu').to('float32').contiguous().dataSync();
/** CUDA [B,H,L,D] tensors as the kernel contract's refs (contiguous). */
const ref = (t) => ({ ...t.ref(), shape: t.shape.slice(), strides: t.strides.slice() });

/** Runs attention on CUDA: through sdpa (D 64/128), or the kernel directly (D 256: sdpa's fused path stops at 128). */
function runCuda(q, k, v, o) {
  const D = q.shape[3];
  if (D !== 256) return sdpa(q, k, v, o.mask, o.causal, o.scale, q.shape[1] !== k.shape[1]);
  const out = nbx.empty(q.shape, { device: 'cuda', dtype: q.dtype });
  att.cudaAttention({ q: ref(q), k: ref(k), v: ref(v), out: ref(out), mask: o.mask ? { ...o.mask.ref(), shape: [q.shape[0], q.shape[1], q.shape[2], k.shape[2]], strides: o.maskStrides } : undefined,
    causal: !!o.causal, scale: o.scale ?? 1 / Math.sqrt(D), rep: q.shape[1] / k.shape[1] });
  return out;
}

if (part === 'check') {
  const wg = (() => { nbx.zeros([1], { device: 'cuda' }); return att.hasWgmma(); })();
  console.log(`device: wgmma kernel ${wg ? 'available (sm_90a)' : 'NOT available on this device: only the mma.sync kernel is checked'}`);
  let fails = 0, lines = 0;
  const cases = [];
  for (const dt of ['bfloat16', 'float16']) for (const D of [64, 128, 256]) {
    cases.push({ dt, D, name: 'plain', B: 2, H: 3, Hk: 3, L: 200, S: 333 });
    cases.push({ dt, D, name: 'causal L=S', B: 1, H: 2, Hk: 2, L: 300, S: 300, causal: true });
    cases.push({ dt, D, name: 'causal L<S', B: 1, H: 2, Hk: 2, L: 70, S: 260, causal: true });
    cases.push({ dt, D, name: 'causal L>S', B: 1, H: 2, Hk: 2, L: 260, S: 70, causal: true, scale: 0.3 });
    cases.push({ dt, D, name: 'gqa causal', B: 2, H: 8, Hk: 2, L: 257, S: 257, causal: true });
    cases.push({ dt, D, name: 'bool mask', B: 1, H: 2, Hk: 2, L: 150, S: 190, mask: 'bool' });
    cases.push({ dt, D, name: 'float mask', B: 2, H: 2, Hk: 2, L: 150, S: 190, mask: 'float' });
    cases.push({ dt, D, name: 'all masked', B: 1, H: 1, Hk: 1, L: 130, S: 140, mask: 'none-kept' });
  }
  // diagnostics (they localise a layout error): V varying along the head dim only (O = V's row whatever
  // the scores: the N-major V descriptor's head-dim direction and the O write), V varying along the keys
  // only (Q·Kᵀ, softmax and the V descriptor's key direction)
  for (const D of [64, 128, 256]) {
    cases.push({ dt: 'bfloat16', D, name: 'V by dim', B: 1, H: 1, Hk: 1, L: 130, S: 300, vmode: 'dim' });
    cases.push({ dt: 'bfloat16', D, name: 'V by key', B: 1, H: 1, Hk: 1, L: 130, S: 300, vmode: 'key' });
  }
  for (const c of cases) {
    const { dt, D, B, H, Hk, L, S } = c;
    if (!filter.test(`${dt} D${D} ${c.name}`)) continue;
    const seed = lines * 7 + 1;
    const q32 = rand([B, H, L, D], seed), k32 = rand([B, Hk, S, D], seed + 1);
    const v32 = c.vmode ? grid([B, Hk, S, D], (i) => (c.vmode === 'dim' ? (i % D) / D : (Math.floor(i / D) % S) / S)) : rand([B, Hk, S, D], seed + 2);
    // inputs rounded to dt first, so the reference sees the same values
    const [qh, kh, vh] = [q32, k32, v32].map((t) => t.to(dt));
    const [qr, kr, vr] = [qh, kh, vh].map((t) => t.to('float32'));
    let mask32 = null, maskDev = null, maskStrides = null;
    if (c.mask === 'bool' || c.mask === 'none-kept') {
      let keep = c.mask === 'bool' ? nbx.gt(rand([L, S], seed + 3), -0.5) : nbx.zeros([L, S], { dtype: 'bool' });
      if (c.mask === 'bool') keep = nbx.logical_and(keep, nbx.ne(nbx.arange(L).view(L, 1), 5)); // row 5 sees no key
      mask32 = keep; maskDev = keep.to('cuda'); maskStrides = [0, 0, S, 1];
    } else if (c.mask === 'float') {
      mask32 = rand([1, H, L, S], seed + 3, -3, 1); maskDev = mask32.to('cuda'); maskStrides = [0, L * S, S, 1];
    }
    const opts = { causal: c.causal, scale: c.scale, mask: maskDev, maskStrides };
    const want = host(sdpa(qr, kr, vr, mask32, c.causal, c.scale, H !== Hk));
    const [qd, kd, vd] = [qh, kh, vh].map((t) => t.to('cuda'));
    const err = (got) => {
      let m = 0, nan = 0;
      for (let i = 0; i < want.length; i++) { const d = Math.abs(got[i] - want[i]); if (Number.isNaN(got[i])) nan++; else if (d > m) m = d; }
      return { m, nan };
    };
    const parts = [];
    let mmaErr = null;
    if (D !== 256) {
      att._forceAttentionConfig({ prefill: { impl: 'mma', blockM: 128, blockN: 64, stages: 2, overlap: false } });
      try { const r = err(host(runCuda(qd, kd, vd, opts))); mmaErr = r.m; parts.push(`mma ${r.m.toExponential(1)}${r.nan ? ` NaN×${r.nan}` : ''}`); if (r.nan) fails++; } finally { att._forceAttentionConfig({}); }
    }
    const tol = dt === 'bfloat16' ? 2e-2 : 4e-3;
    let ok = true;
    if (wg) {
      for (const w of sm90.sm90Configs(D)) {
        att._forceAttentionConfig({ prefill: { impl: 'wgmma', blockM: 128, blockN: w.blockN, stages: w.stages, overlap: !!w.overlap } });
        try {
          const a = host(runCuda(qd, kd, vd, opts)), b = host(runCuda(qd, kd, vd, opts));
          const r = err(a);
          let same = true;
          for (let i = 0; i < a.length; i++) if (!Object.is(a[i], b[i])) { same = false; break; }
          const bound = Math.max(2 * (mmaErr ?? 0), tol);
          const good = r.nan === 0 && r.m <= bound && same;
          if (!good) ok = false;
          parts.push(`wgmma ${tagOf(w)} ${r.m.toExponential(1)}${r.nan ? ` NaN×${r.nan}` : ''}${same ? '' : ' NOT-REPEATABLE'}`);
        } catch (e) { ok = false; parts.push(`wgmma ${tagOf(w)} ERROR ${String(e.message).slice(0, 160)}`); }
        finally { att._forceAttentionConfig({}); }
      }
    }
    if (!ok) fails++;
    console.log(`${ok ? 'ok  ' : 'FAIL'} ${dt === 'bfloat16' ? 'bf16' : 'f16 '} D${String(D).padEnd(3)} ${c.name.padEnd(11)} B${B} H${H}/${Hk} L${L} S${S}: ${parts.join(' | ')}`);
    lines++;
    for (const t of [q32, k32, v32, qh, kh, vh, qr, kr, vr, qd, kd, vd]) t.dispose();
  }
  console.log(`check: ${lines - fails}/${lines} cases pass${wg ? '' : ' (mma kernel only)'}; max |error| vs the CPU float32 reference on dt-rounded inputs`);
  process.exit(fails ? 1 : 0);
}

if (part === 'one') {
  // one timed run of a forced configuration: L, causal, config JSON
  const { timeCuda } = await import(join(root, 'dist/bench/gpu_timing.js'));
  const [L, causal, cj] = process.argv.slice(3, 6);
  const { tag, ...cfg } = JSON.parse(cj);
  const o = { device: 'cuda', dtype: 'bfloat16' };
  const B = 4, H = 32, D = 128, n = +L;
  const q = nbx.randn([B, H, n, D], o), k = nbx.randn([B, H, n, D], o), v = nbx.randn([B, H, n, D], o);
  att._forceAttentionConfig({ prefill: cfg });
  const t = await timeCuda(() => runCuda(q, k, v, { causal: causal === '1' }).dispose(), 5);
  console.log(`${(4 * B * H * n * n * D / (causal === '1' ? 2 : 1) / t / 1e12).toFixed(0)} TFLOP/s (${tag})`);
  process.exit(0);
}

if (part === 'time') {
  const { timeCuda } = await import(join(root, 'dist/bench/gpu_timing.js'));
  nbx.zeros([1], { device: 'cuda' });
  const wg = att.hasWgmma();
  const shapes = [
    { name: 'causal B4 H32 L4096 D128 bf16', B: 4, H: 32, Hk: 32, L: 4096, D: 128, causal: true, dt: 'bfloat16' },
    { name: 'B4 H32 L4096 D128 bf16', B: 4, H: 32, Hk: 32, L: 4096, D: 128, causal: false, dt: 'bfloat16' },
    { name: 'causal B8 H16 L1024 D128 bf16', B: 8, H: 16, Hk: 16, L: 1024, D: 128, causal: true, dt: 'bfloat16' },
    { name: 'causal GQA B4 H32/8 L4096 D128 bf16', B: 4, H: 32, Hk: 8, L: 4096, D: 128, causal: true, dt: 'bfloat16' },
    { name: 'causal B4 H32 L4096 D128 f16', B: 4, H: 32, Hk: 32, L: 4096, D: 128, causal: true, dt: 'float16' },
    { name: 'causal B4 H32 L4096 D64 bf16', B: 4, H: 32, Hk: 32, L: 4096, D: 64, causal: true, dt: 'bfloat16' },
    { name: 'causal B4 H16 L4096 D256 bf16', B: 4, H: 16, Hk: 16, L: 4096, D: 256, causal: true, dt: 'bfloat16' },
  ];
  for (const s of shapes) {
    const o = { device: 'cuda', dtype: s.dt };
    const q = nbx.randn([s.B, s.H, s.L, s.D], o), k = nbx.randn([s.B, s.Hk, s.L, s.D], o), v = nbx.randn([s.B, s.Hk, s.L, s.D], o);
    const fl = 4 * s.B * s.H * s.L * s.L * s.D / (s.causal ? 2 : 1);
    const cfgs = [...(s.D !== 256 ? [['mma', { impl: 'mma', blockM: 128, blockN: 64, stages: 2, overlap: false }], ['mma n128', { impl: 'mma', blockM: 128, blockN: 128, stages: 2, overlap: false }]] : []),
      ...(wg ? sm90.sm90Configs(s.D).map((w) => [`wgmma ${tagOf(w)}`, { impl: 'wgmma', blockM: 128, blockN: w.blockN, stages: w.stages, overlap: !!w.overlap }]) : [])];
    const parts = [];
    for (const [label, cfg] of cfgs) {
      att._forceAttentionConfig({ prefill: cfg });
      try { const t = await timeCuda(() => runCuda(q, k, v, { causal: s.causal }).dispose(), 10); parts.push(`${label} ${(fl / t / 1e12).toFixed(0)}`); console.error(`  ${s.name} ${label} ${(fl / t / 1e12).toFixed(0)} TFLOP/s`); }
      catch (e) { parts.push(`${label} ERROR ${String(e.message).slice(0, 120)}`); }
      finally { att._forceAttentionConfig({}); }
    }
    console.log(`time ${s.name.padEnd(36)} TFLOP/s: ${parts.join(' | ')}`);
    q.dispose(); k.dispose(); v.dispose();
  }
  process.exit(0);
}
