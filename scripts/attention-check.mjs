#!/usr/bin/env node
// CUDA attention check for the device (issue #20). The device command is scripts/gpu-attn.sh, which runs
// the parts below each in its own process under `timeout -k 5` (a hung kernel costs one part, not the call):
//   node scripts/attention-check.mjs --part=check   compiles every prefill specialization side by side
//        (precompileAttention), then every variant through the wgmma (sm_90a) kernel, each of its tiles
//        forced, and through the mma.sync kernel, against the CPU reference in float32 on the same inputs:
//        bf16/f16, head dims 64/128/256, causal (L = S, L < S, L > S) and not, GQA, bool mask with fully
//        masked rows, additive masks, an all-masked input (must be 0, NaN-free), ragged lengths, long K/V
//        (many ring wraps, odd tile counts); the same call twice bit for bit. Prints max |error| per kernel
//        and PASS/FAIL (wgmma error ≤ max(2 x mma error, FlashAttention-class tolerance)).
//   node scripts/attention-check.mjs --part=stall   the shape of the 08:35 run's "stall" (B4 H32 L4096 D128 bf16,
//        non-causal and causal) with each wgmma tile, 20 launches back to back each, a line per configuration
//        as it finishes (NBX_ATTENTION_WATCH=1: the kernel traps naming the barrier a wait exceeded 4 s on).
//        That stall was the inputs: nbx.randn of 3 x 128 MiB bfloat16 draws PyTorch's stream on the host
//        (tens of seconds per shape), past the step limits; large inputs are now tiled on the device
//        (bench/device_randn.ts)
//   node scripts/attention-check.mjs --part=time    the wgmma tiles and the mma kernel forced on the bench's
//        prefill shapes, TFLOP/s
// and then dist/bench/cuda_attention.js (nbx as tuned vs PyTorch SDPA in the same run).
// Without --part it runs check, time and bench in children with kill timeouts (no shell needed).
import { spawnSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { dirname, join } from 'node:path';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
const part = process.argv.find((a) => a.startsWith('--part='))?.slice(7);

if (!part) {
  const t0 = performance.now();
  const step = (label, args, timeoutS) => {
    const s = performance.now();
    const r = spawnSync(process.execPath, args, { cwd: root, stdio: 'inherit', timeout: timeoutS * 1000, killSignal: 'SIGKILL', env: { NBX_ATTENTION_WGMMA: '1', ...process.env } });
    const why = r.error ? ` (${r.error.code === 'ETIMEDOUT' ? `killed after ${timeoutS} s: a hang?` : r.error.message})` : r.status ? ` (exit ${r.status})` : '';
    console.log(`== ${label}: ${((performance.now() - s) / 1000).toFixed(0)} s${why}`);
    return r.status === 0;
  };
  const self = fileURLToPath(import.meta.url);
  const fw = process.argv.filter((a) => a.startsWith('--filter='));
  const ok = process.argv.includes('--no-check') || step('check', [self, '--part=check', ...fw], 120);
  if (!process.argv.includes('--no-stall')) step('stall', [self, '--part=stall'], 40);
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

/** n<BLOCK_N>s<stages>, 'p' with ping-pong, 'd' deep, 'P' persistent, 'C' chained items */
const tagOf = sm90.sm90Tag;
const MMA = att.PREFILL_SPACE.defaultConfig;
const wgCfg = att.wgmmaConfig;
/** The Hopper tiles the tuner can pick at head dim D: sm90Configs, and sm90MoreConfigs and sm90SplitConfigs (offered on some problems only), and the persistent ones with ostore. */
const tilesAll = (D) => { const b = [...sm90.sm90Configs(D), ...(sm90.sm90MoreConfigs?.(D) ?? []), ...(sm90.sm90SplitConfigs?.(D) ?? [])]; return [...b, ...(sm90.sm90OStore?.(b) ?? [])]; };
/** Every prefill kernel the check and the timings use, compiled side by side first. */
async function precompile(withTimes) {
  if (process.argv.includes('--no-precompile')) return; // (the host emulator: each kernel is a g++ build)
  const t0 = performance.now();
  const specs = [];
  for (const dt of ['bfloat16', 'float16']) for (const D of [64, 128, 256]) for (const mask of dt === 'bfloat16' ? ['none', 'bool', 'float32'] : ['none']) {
    if (att.hasWgmma()) for (const w of tilesAll(D)) specs.push({ dt, D, cfg: wgCfg(w), mask });
    if (D !== 256) specs.push({ dt, D, cfg: MMA, mask });
    if (withTimes && D !== 256 && mask === 'none') specs.push({ dt, D, cfg: { ...MMA, blockN: 128 }, mask });
  }
  const jobs = [att.precompileAttention(specs)];
  if (att.hasWgmma()) {
    // the cp.async build (inputs TMA cannot address) of bfloat16 without a mask, for the check's cp.async cases
    // (and the tensor-core decode kernel: block tiles, per-warp cp.async and TMA tiles at rings of 2 and 3)
    const dec = [{}, { tiles: 'warp' }, { tiles: 'warp', stages: 3 }, { tiles: 'tma' }, { tiles: 'tma', stages: 3 }];
    jobs.push(att.precompileAttention([['bfloat16', 64], ['bfloat16', 128], ['float16', 128]].flatMap(([dt, D]) => dec.map((x) => ({ dt, D, cfg: { impl: 'decode-mma', ...x }, mask: 'none' })))));
    process.env.NBX_ATTENTION_TMA = '0';
    try { jobs.push(att.precompileAttention([64, 128, 256].flatMap((D) => tilesAll(D).map((w) => ({ dt: 'bfloat16', D, cfg: wgCfg(w), mask: 'none' }))))); } finally { delete process.env.NBX_ATTENTION_TMA; }
  }
  const n = (await Promise.all(jobs)).reduce((a, b) => a + b, 0);
  console.log(`precompiled ${n} prefill kernels in ${((performance.now() - t0) / 1000).toFixed(1)} s`);
}
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

/** Runs attention on CUDA through sdpa (head dim 256 takes the fused path where the Hopper kernel runs: forced here). */
function runCuda(q, k, v, o) {
  return sdpa(q, k, v, o.mask, o.causal, o.scale, q.shape[1] !== k.shape[1]);
}

if (part === 'check') {
  const wg = (() => { nbx.zeros([1], { device: 'cuda' }); return att.hasWgmma(); })();
  console.log(`device: wgmma kernel ${wg ? 'available (sm_90a)' : 'NOT available on this device: only the mma.sync kernel is checked'}`);
  await precompile(false);
  let fails = 0, lines = 0;
  const cases = [];
  for (const dt of ['bfloat16', 'float16']) for (const D of [64, 128, 256]) {
    cases.push({ dt, D, name: 'plain', B: 2, H: 3, Hk: 3, L: 200, S: 333 });
    cases.push({ dt, D, name: 'causal L=S', B: 1, H: 2, Hk: 2, L: 300, S: 300, causal: true });
    if (dt === 'bfloat16') cases.push({ dt, D, name: 'cp.async', B: 1, H: 2, Hk: 2, L: 300, S: 300, causal: true, tma: '0' });
    cases.push({ dt, D, name: 'causal L<S', B: 1, H: 2, Hk: 2, L: 70, S: 260, causal: true });
    cases.push({ dt, D, name: 'causal L>S', B: 1, H: 2, Hk: 2, L: 260, S: 70, causal: true, scale: 0.3 });
    cases.push({ dt, D, name: 'gqa causal', B: 2, H: 8, Hk: 2, L: 257, S: 257, causal: true });
    // masks in bfloat16 only (float16's kernels differ in the mma/convert instruction names alone): fewer compiles
    if (dt === 'bfloat16') {
      cases.push({ dt, D, name: 'bool mask', B: 1, H: 2, Hk: 2, L: 150, S: 190, mask: 'bool' });
      cases.push({ dt, D, name: 'float mask', B: 2, H: 2, Hk: 2, L: 150, S: 190, mask: 'float' });
      cases.push({ dt, D, name: 'all masked', B: 1, H: 1, Hk: 1, L: 130, S: 140, mask: 'none-kept' });
    }
    // many K/V tiles: the ring wraps 8+ times, an odd tile count at every BLOCK_N, and two query tiles
    cases.push({ dt, D, name: 'long K/V', B: 1, H: 2, Hk: 2, L: 250, S: 2000 });
    cases.push({ dt, D, name: 'long causal', B: 1, H: 1, Hk: 1, L: 1100, S: 1100, causal: true });
  }
  // more work items (batch·head x query tile) than SMs: the persistent kernel's blocks take several from its
  // counter; scores that grow along the keys (q > 0, k scaled by its position): the running max moves by
  // ~10 (log2 units) per tile, past the lazy rescale's threshold, and by less within a tile
  cases.push({ dt: 'bfloat16', D: 64, name: 'many items', B: 1, H: 48, Hk: 48, L: 384, S: 384, causal: true });
  cases.push({ dt: 'bfloat16', D: 128, name: 'many items', B: 2, H: 40, Hk: 20, L: 260, S: 260, causal: true });
  // the persistent grid capped at 3 blocks: each walks ~20 items of 1-6 tiles back to back (the chained forms
  // carry Q, the sums and the finished O from one item to the next), with GQA and a bool mask
  for (const D of [64, 128]) {
    cases.push({ dt: 'bfloat16', D, name: '3 blocks', B: 2, H: 4, Hk: 2, L: 700, S: 700, causal: true, blocks: 3 });
    cases.push({ dt: 'bfloat16', D, name: '3 blocks mask', B: 2, H: 3, Hk: 3, L: 150, S: 190, mask: 'bool', blocks: 3 });
    // L2 groups of 3 batch·heads over 8 (3, 3, 2: the group rules' uneven and even cases alike)
    cases.push({ dt: 'bfloat16', D, name: '3 blocks G3', B: 2, H: 4, Hk: 2, L: 500, S: 500, causal: true, blocks: 3, group: 3 });
  }
  // the split tiles (k) with their split forced (tail: the last items split, parts: parts each; other tiles ignore it): runs
  // of 2-3 tiles, causal items in more parts than tiles (empty runs), a bool mask with a row that sees no key, GQA f16
  for (const D of [64, 128]) {
    // (tail: batch·heads of the last batch run split in a second launch, whole KV groups; parts: key runs an item)
    cases.push({ dt: 'bfloat16', D, name: 'split', B: 1, H: 3, Hk: 3, L: 300, S: 1000, blocks: 4, tail: 1, parts: 3 });
    cases.push({ dt: 'bfloat16', D, name: 'split causal', B: 1, H: 2, Hk: 2, L: 400, S: 400, causal: true, blocks: 3, tail: 1, parts: 4 });
    cases.push({ dt: 'bfloat16', D, name: 'split mask', B: 2, H: 2, Hk: 2, L: 150, S: 700, mask: 'bool', blocks: 3, tail: 2, parts: 2 });
    cases.push({ dt: 'float16', D, name: 'split gqa', B: 1, H: 8, Hk: 2, L: 200, S: 900, blocks: 5, tail: 4, parts: 3, scale: 0.3 });
  }
  for (const D of [64, 128, 256]) cases.push({ dt: 'bfloat16', D, name: 'ramp', B: 1, H: 2, Hk: 2, L: 300, S: 300, causal: true, scale: 32 / D, ramp: true });
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
    const q32 = c.ramp ? rand([B, H, L, D], seed, 0.5, 1) : rand([B, H, L, D], seed);
    const k32 = c.ramp ? nbx.mul(rand([B, Hk, S, D], seed + 1, 0.5, 1), grid([1, 1, S, 1], (i) => i / S)) : rand([B, Hk, S, D], seed + 1);
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
      att._forceAttentionConfig({ prefill: MMA });
      try { const r = err(host(runCuda(qd, kd, vd, opts))); mmaErr = r.m; parts.push(`mma ${r.m.toExponential(1)}${r.nan ? ` NaN×${r.nan}` : ''}`); if (r.nan) fails++; } finally { att._forceAttentionConfig({}); }
    }
    const tol = dt === 'bfloat16' ? 2e-2 : 4e-3;
    let ok = true;
    if (wg) {
      for (const w of tilesAll(D)) {
        att._forceAttentionConfig({ prefill: wgCfg(w), blocks: c.blocks, tail: c.tail, parts: c.parts, group: c.group });
        if (c.tma) process.env.NBX_ATTENTION_TMA = c.tma;
        try {
          const w0 = att.attentionStats.prefill90, t0 = att.attentionStats.prefill90tma;
          const a = host(runCuda(qd, kd, vd, opts)), b = host(runCuda(qd, kd, vd, opts));
          if (att.attentionStats.prefill90 < w0 + 2) throw new Error('the wgmma kernel did not run (sdpa took another path)');
          if ((att.attentionStats.prefill90tma > t0) !== !c.tma) throw new Error(c.tma ? 'the TMA build ran' : 'the TMA build did not run');
          const r = err(a);
          let same = true;
          for (let i = 0; i < a.length; i++) if (!Object.is(a[i], b[i])) { same = false; break; }
          const bound = Math.max(2 * (mmaErr ?? 0), tol);
          const good = r.nan === 0 && r.m <= bound && same;
          if (!good) ok = false;
          parts.push(`wgmma ${tagOf(w)} ${r.m.toExponential(1)}${r.nan ? ` NaN×${r.nan}` : ''}${same ? '' : ' NOT-REPEATABLE'}`);
        } catch (e) { ok = false; parts.push(`wgmma ${tagOf(w)} ERROR ${String(e.message).slice(0, 160)}`); }
        finally { att._forceAttentionConfig({}); delete process.env.NBX_ATTENTION_TMA; }
      }
    }
    if (!ok) fails++;
    console.log(`${ok ? 'ok  ' : 'FAIL'} ${dt === 'bfloat16' ? 'bf16' : 'f16 '} D${String(D).padEnd(3)} ${c.name.padEnd(11)} B${B} H${H}/${Hk} L${L} S${S}: ${parts.join(' | ')}`);
    lines++;
    for (const t of [q32, k32, v32, qh, kh, vh, qr, kr, vr, qd, kd, vd]) t.dispose();
  }
  // decode (≤ 16 query rows per KV head): the lane kernel and the tensor-core kernel, each forced, several chunks
  for (const [dt, D, H, Hk, L, S] of [['bfloat16', 128, 32, 8, 1, 3000], ['bfloat16', 64, 8, 2, 2, 777], ['float16', 128, 16, 1, 1, 1500]]) {
    if (!filter.test(`${dt} D${D} decode`)) continue;
    const seed = lines * 7 + 1;
    const [qh, kh, vh] = [rand([1, H, L, D], seed), rand([1, Hk, S, D], seed + 1), rand([1, Hk, S, D], seed + 2)].map((t) => t.to(dt));
    const want = host(sdpa(qh.to('float32'), kh.to('float32'), vh.to('float32'), null, false, undefined, H !== Hk));
    const [qd, kd, vd] = [qh, kh, vh].map((t) => t.to('cuda'));
    const parts = [];
    let ok = true;
    // (attn-6: the transposed reduction 'lanes t128 x', per-warp tiles 'mma w' and per-warp TMA tiles 'mma tma', rings of 2 and 3)
    for (const cfg of [{ impl: 'lanes', chunk: 256, threads: 128 }, { impl: 'mma', chunk: 256, threads: 128 }, { impl: 'mma', chunk: 4096, threads: 128 }, { impl: 'mma', chunk: 0, threads: 128 }, { impl: 'lanes', chunk: 0, threads: 128 },
      { impl: 'lanes', chunk: 256, threads: 128, reduce: 'scatter' }, { impl: 'lanes', chunk: 0, threads: 128, reduce: 'scatter' }, { impl: 'mma', chunk: 256, threads: 128, tiles: 'warp' }, { impl: 'mma', chunk: 4096, threads: 128, tiles: 'warp', stages: 3 },
      { impl: 'mma', chunk: 256, threads: 128, tiles: 'tma' }, { impl: 'mma', chunk: 4096, threads: 128, tiles: 'tma' }, { impl: 'mma', chunk: 512, threads: 128, tiles: 'tma', stages: 3 }]) {
      att._forceAttentionConfig({ decode: cfg });
      try {
        const d0 = att.attentionStats.decode;
        const got = host(runCuda(qd, kd, vd, {}));
        if (att.attentionStats.decode === d0) throw new Error('the decode kernel did not run');
        let m = 0, nan = 0;
        for (let i = 0; i < want.length; i++) { const d = Math.abs(got[i] - want[i]); if (Number.isNaN(got[i])) nan++; else if (d > m) m = d; }
        const good = nan === 0 && m <= (dt === 'bfloat16' ? 2e-2 : 4e-3);
        if (!good) ok = false;
        parts.push(`${att.decodeTag(cfg).replace(' t128', '')} c${cfg.chunk} ${m.toExponential(1)}${nan ? ` NaN×${nan}` : ''}${cfg.tiles === 'tma' && !att.attentionStats.lastDecode.includes('tma') ? ' (not TMA)' : ''}`);
      } catch (e) { ok = false; parts.push(`${att.decodeTag(cfg)} c${cfg.chunk} ERROR ${String(e.message).slice(0, 160)}`); }
      finally { att._forceAttentionConfig({}); }
    }
    if (!ok) fails++;
    console.log(`${ok ? 'ok  ' : 'FAIL'} ${dt === 'bfloat16' ? 'bf16' : 'f16 '} D${String(D).padEnd(3)} decode      B1 H${H}/${Hk} L${L} S${S}: ${parts.join(' | ')}`);
    lines++;
    for (const t of [qh, kh, vh, qd, kd, vd]) t.dispose();
  }
  console.log(`check: ${lines - fails}/${lines} cases pass${wg ? '' : ' (mma kernel only)'}; max |error| vs the CPU float32 reference on dt-rounded inputs`);
  process.exit(fails ? 1 : 0);
}

// --part=tuned: the attention sweeps recorded in NBX_CACHE_DIR's autotune.json (after a bench with a fresh cache): per
// problem the pick and every candidate's time (prefill) or the five fastest (decode), in ms per launch
if (part === 'tuned') {
  const { readFileSync } = await import('node:fs');
  const j = JSON.parse(readFileSync(join(process.env.NBX_CACHE_DIR ?? '.', 'autotune.json'), 'utf8'));
  const tag = (c) => (c.impl === 'wgmma' ? tagOf(c) : c.impl === 'mma' && c.blockM ? `mma m${c.blockM}n${c.blockN}` : `${att.decodeTag(c)} c${c.chunk} ${c.merge}`);
  for (const [dev, kernels] of Object.entries(j.entries ?? {})) for (const [kn, probs] of Object.entries(kernels)) {
    if (!kn.startsWith('cuda.attention')) continue;
    for (const [prob, e] of Object.entries(probs)) {
      const tried = [...(e.tried ?? [])].sort((a, b) => a.timeMs - b.timeMs);
      const shown = kn.includes('decode') ? tried.slice(0, 5) : tried;
      console.log(`tuned ${kn} ${prob} (${dev}; warmup ${e.warmup}, reps ${e.reps}): pick ${tag(e.config)} ${e.timeMs.toFixed(4)} | ${shown.map((t) => `${tag(t.config)} ${t.timeMs.toFixed(4)}`).join(' | ')}${(e.failures ?? []).length ? ` | failed ${e.failures.length}` : ''}`);
    }
  }
  process.exit(0);
}

if (part === 'stall') {
  // the first Hopper kernel stopped here in the 08:35 run: each tile, non-causal then causal, 20 launches
  // back to back; a line per configuration as soon as it finished (a hang: the step's timeout kills it)
  nbx.zeros([1], { device: 'cuda' });
  if (!att.hasWgmma()) { console.log('stall: no wgmma kernel on this device'); process.exit(0); }
  const o = { device: 'cuda', dtype: 'bfloat16' };
  const B = 4, H = 32, D = 128, n = 4096;
  const { deviceRandn } = await import(join(root, 'dist/bench/device_randn.js'));
  const t0 = performance.now();
  const q = deviceRandn([B, H, n, D], o.dtype), k = deviceRandn([B, H, n, D], o.dtype), v = deviceRandn([B, H, n, D], o.dtype);
  await nbx.cuda.synchronize();
  console.log(`inputs made on the device in ${((performance.now() - t0) / 1000).toFixed(1)} s`);
  for (const causal of [false, true]) for (const w of sm90.sm90Configs(D)) {
    att._forceAttentionConfig({ prefill: wgCfg(w) });
    runCuda(q, k, v, { causal }).dispose(); await nbx.cuda.synchronize();
    const t0 = performance.now();
    for (let i = 0; i < 20; i++) runCuda(q, k, v, { causal }).dispose();
    await nbx.cuda.synchronize();
    const t = (performance.now() - t0) / 1000 / 20;
    console.log(`stall ${causal ? 'causal' : 'full  '} B4 H32 L4096 D128 bf16 wgmma ${tagOf(w)}: 21 launches done, ${(4 * B * H * n * n * D / (causal ? 2 : 1) / t / 1e12).toFixed(0)} TFLOP/s${process.env.NBX_ATTENTION_WATCH === '1' ? ' (watch build)' : ''}`);
  }
  att._forceAttentionConfig({});
  console.log('stall: none');
  process.exit(0);
}

if (part === 'time') {
  const SHAPES = [
    { name: 'causal B4 H32 L4096 D128 bf16', B: 4, H: 32, Hk: 32, L: 4096, D: 128, causal: true, dt: 'bfloat16' },
    { name: 'B4 H32 L4096 D128 bf16', B: 4, H: 32, Hk: 32, L: 4096, D: 128, causal: false, dt: 'bfloat16' },
    { name: 'causal B8 H16 L1024 D128 bf16', B: 8, H: 16, Hk: 16, L: 1024, D: 128, causal: true, dt: 'bfloat16' },
    { name: 'causal GQA B4 H32/8 L4096 D128 bf16', B: 4, H: 32, Hk: 8, L: 4096, D: 128, causal: true, dt: 'bfloat16' },
    { name: 'causal B4 H32 L4096 D128 f16', B: 4, H: 32, Hk: 32, L: 4096, D: 128, causal: true, dt: 'float16' },
    { name: 'causal B4 H32 L4096 D64 bf16', B: 4, H: 32, Hk: 32, L: 4096, D: 64, causal: true, dt: 'bfloat16' },
    { name: 'causal B4 H16 L4096 D256 bf16', B: 4, H: 16, Hk: 16, L: 4096, D: 256, causal: true, dt: 'bfloat16' },
  ];
  const { timeCuda } = await import(join(root, 'dist/bench/gpu_timing.js'));
  const { deviceRandn } = await import(join(root, 'dist/bench/device_randn.js'));
  nbx.zeros([1], { device: 'cuda' });
  const wg = att.hasWgmma();
  // the builds timed below, compiled side by side first: mma (default tile), the wgmma tiles with TMA loads,
  // the first wgmma tile with cp.async loads (NBX_ATTENTION_TMA=0), and the diagnostics of the first tile
  // (NBX_ATTENTION_ABLATE: wrong results, the time of a part left out)
  // (and the first tile with the softmax arithmetic of the fifth session, 'serial', 'tree' and 'poly': the default is 'lazy';
  // r240: setmaxnreg 24 / 240 as FlashAttention-3, NBX_ATTENTION_REGS; late: the grid-dependency wait first thing, as before
  // the eleventh session, NBX_ATTENTION_EARLY=0)
  // NBX_ATTN_VARIANTS (comma-separated names, e.g. 'nosoftmax,cp.async'; default all) narrows the first tile's variants
  const pickV = process.env.NBX_ATTN_VARIANTS?.split(',');
  const variants = [['', {}], ['serial ', { NBX_ATTENTION_SOFTMAX: 'serial' }], ['tree ', { NBX_ATTENTION_SOFTMAX: 'tree' }], ['poly ', { NBX_ATTENTION_SOFTMAX: 'poly' }], ['tcsum ', { NBX_ATTENTION_SOFTMAX: 'tcsum' }], ['lazy ', { NBX_ATTENTION_SOFTMAX: 'lazy' }], ['r240 ', { NBX_ATTENTION_REGS: '24,240' }], ['late ', { NBX_ATTENTION_EARLY: '0' }], ['cp.async ', { NBX_ATTENTION_TMA: '0' }], ['noload ', { NBX_ATTENTION_ABLATE: 'noload' }], ['nosoftmax ', { NBX_ATTENTION_ABLATE: 'nosoftmax' }]]
    .filter(([n]) => !n || !pickV || pickV.includes(n.trim()));
  // NBX_ATTN_EXTRA (JSON {"128": [{"blockN": 80, "stages": 3, "deep": true}], ...}): tiles timed besides sm90Configs(D)
  const extra = JSON.parse(process.env.NBX_ATTN_EXTRA ?? '{}');
  // the tiles the tuner offers on the shape (sm90Offered: causal or not; persistent tiles under each L2 group rule)
  const tilesOf = (D, causal) => [...sm90.sm90Offered(D, causal), ...(extra[D] ?? [])];
  const setEnv = (env) => { const old = {}; for (const k of Object.keys(env)) { old[k] = process.env[k]; process.env[k] = env[k]; } return () => { for (const k of Object.keys(env)) { if (old[k] === undefined) delete process.env[k]; else process.env[k] = old[k]; } }; };
  const withEnv = (env, f) => { const undo = setEnv(env); try { return f(); } finally { undo(); } };
  const withEnvAsync = async (env, f) => { const undo = setEnv(env); try { return await f(); } finally { undo(); } };
  if (!process.argv.includes('--no-precompile')) {
    const t0 = performance.now(), jobs = [];
    // (the dtypes and head dims of the shapes the filter keeps: SHAPES below)
    for (const dt of ['bfloat16', 'float16']) for (const D of [64, 128, 256]) {
      if (!SHAPES.some((x) => x.dt === dt && x.D === D && filter.test(x.name))) continue;
      if (D !== 256) jobs.push(att.precompileAttention([{ dt, D, cfg: MMA, mask: 'none' }]));
      if (wg) for (const [, env] of variants) {
        if (env.NBX_ATTENTION_ABLATE && (dt !== 'bfloat16' || D !== 128)) continue; // the diagnostics run on bf16 D128 only
        const all = !Object.keys(env).length || (process.env.NBX_ATTN_VARIANTS_ALL === '1' && !env.NBX_ATTENTION_ABLATE);
        withEnv(env, () => jobs.push(att.precompileAttention([...tilesOf(D, true), ...tilesOf(D, false)].filter((w, i, a) => all || i === 0 || i === a.length - tilesOf(D, false).length).map((w) => ({ dt, D, cfg: wgCfg(w), mask: 'none' })))));
      }
    }
    const n = (await Promise.all(jobs)).reduce((a, b) => a + b, 0);
    console.log(`precompiled ${n} prefill kernels in ${((performance.now() - t0) / 1000).toFixed(1)} s`);
  }
  const shapes = SHAPES;
  // NBX_ATTN_GROUPS (comma-separated, e.g. '1,4'): the persistent tiles timed again with that L2 group forced
  // (batch·heads whose query tiles interleave; 1: head after head); --filter= narrows the shapes
  const groups = (process.env.NBX_ATTN_GROUPS ?? '').split(',').filter(Boolean).map(Number);
  for (const s of shapes.filter((x) => filter.test(x.name))) {
    const q = deviceRandn([s.B, s.H, s.L, s.D], s.dt), k = deviceRandn([s.B, s.Hk, s.L, s.D], s.dt), v = deviceRandn([s.B, s.Hk, s.L, s.D], s.dt);
    const fl = 4 * s.B * s.H * s.L * s.L * s.D / (s.causal ? 2 : 1);
    const first = s === shapes[0] || s === shapes[1]; // the diagnostics on the two D128 L4096 shapes only
    const cfgs = [...(s.D !== 256 ? [['mma', MMA, {}]] : []),
      // (NBX_ATTN_VARIANTS_ALL=1: the variants other than the diagnostics on every tile, not only the first)
      ...(wg ? tilesOf(s.D, s.causal).flatMap((w, i) => variants.filter(([, env]) => i === 0 ? first || !env.NBX_ATTENTION_ABLATE : !Object.keys(env).length || (process.env.NBX_ATTN_VARIANTS_ALL === '1' && !env.NBX_ATTENTION_ABLATE))
        .map(([pre, env]) => [`wgmma ${pre}${tagOf(w)}`, wgCfg(w), env])) : []),
      ...(wg ? tilesOf(s.D, s.causal).filter((w) => w.persistent && !w.group).flatMap((w) => groups.map((G) => [`wgmma G${G} ${tagOf(w)}`, wgCfg(w), {}, G])) : [])];
    const parts = [];
    // NBX_ATTN_PAUSE_MS: an idle pause before each configuration's samples (as the bench pauses 1 s before a row), so
    // that no configuration is timed right after the others' launches; NBX_ATTN_REVERSE=1: the configurations in the
    // reverse order (a ranking that flips with the order is the order's, not the tiles')
    const pause = Number(process.env.NBX_ATTN_PAUSE_MS ?? 0);
    for (const [label, cfg, env, group] of process.env.NBX_ATTN_REVERSE === '1' ? [...cfgs].reverse() : cfgs) {
      att._forceAttentionConfig({ prefill: cfg, group });
      if (pause > 0) await new Promise((r) => setTimeout(r, pause));
      try {
        // the best of 3 samples; 50 calls per sample at L 1024 (~0.15 ms a call: 10 left the figure to the final synchronisation)
        let t = Infinity;
        for (let i = 0; i < 3; i++) t = Math.min(t, await withEnvAsync(env, () => timeCuda(() => runCuda(q, k, v, { causal: s.causal }).dispose(), s.L <= 1024 ? 50 : 10)));
        parts.push(`${label} ${(fl / t / 1e12).toFixed(0)}`); console.error(`  ${s.name} ${label} ${(fl / t / 1e12).toFixed(0)} TFLOP/s`);
      } catch (e) { parts.push(`${label} ERROR ${String(e.message).slice(0, 120)}`); }
      finally { att._forceAttentionConfig({}); }
    }
    console.log(`time ${s.name.padEnd(36)} TFLOP/s: ${parts.join(' | ')}`);
    // the short row: host time per call (50 calls queued without a synchronisation) against the wall time per
    // call (with it): equal means the host, not the kernel, sets the pace
    if (s.L <= 1024) {
      const call = () => runCuda(q, k, v, { causal: s.causal }).dispose();
      const host = [], wall = [];
      for (let i = 0; i < 3; i++) {
        await nbx.cuda.synchronize();
        const t0 = performance.now();
        for (let j = 0; j < 50; j++) call();
        const t1 = performance.now();
        await nbx.cuda.synchronize();
        host.push((t1 - t0) / 50 * 1000); wall.push((performance.now() - t0) / 50 * 1000);
      }
      console.log(`host ${s.name.padEnd(36)} tuned ${att.attentionStats.lastPrefill}: host ${Math.min(...host).toFixed(1)} us/call, wall ${Math.min(...wall).toFixed(1)} us/call`);
    }
    q.dispose(); k.dispose(); v.dispose();
  }
  // decode: the bench's shapes with the tuner's choice and forced configurations (GB/s of K/V)
  if (process.env.NBX_ATTN_DECODE !== '0') {
    for (const [B, H, Hk, S] of [[1, 32, 32, 32768], [4, 32, 32, 32768], [4, 32, 8, 32768], [8, 32, 32, 4096]]) {
      const q = deviceRandn([B, H, 1, 128], 'bfloat16'), k = deviceRandn([B, Hk, S, 128], 'bfloat16'), v = deviceRandn([B, Hk, S, 128], 'bfloat16');
      const gb = 2 * B * Hk * S * 128 * 2 / 1e9;
      const parts = [];
      // attn-6's forms after the earlier rows: 'x' the lane kernel's transposed reduction, 'w' per-warp cp.async tiles,
      // 'tma' per-warp TMA tiles, s3 a ring of 3 (NBX_ATTN_DECODE_NEW=0: the earlier rows alone)
      const neu = process.env.NBX_ATTN_DECODE_NEW === '0' ? [] : [['lanes', 128, 1024, 'kernel', { reduce: 'scatter' }], ['lanes', 128, 2048, 'kernel', { reduce: 'scatter' }], ['lanes', 128, 0, 'kernel', { reduce: 'scatter' }],
        ...[{ tiles: 'warp' }, { tiles: 'warp', stages: 3 }, { tiles: 'tma' }, { tiles: 'tma', stages: 3 }].flatMap((x) => [1024, 2048, 4096].map((ch) => ['mma', 128, ch, 'kernel', x])), ['mma', 128, 4096, 'fused', { tiles: 'tma' }],
        // (eleventh session: the lane kernel's streaming loads, ld 'stream')
        ...[[128, 2048], [128, 0], [256, 4096], [256, 0]].flatMap(([t, ch]) => [['lanes', t, ch, 'kernel', { ld: 'stream' }], ['lanes', t, ch, 'kernel', {}]])];
      const cfgs = [['tuned', null], ...[['lanes', 128, 512, 'kernel'], ['lanes', 128, 1024, 'kernel'], ['lanes', 128, 2048, 'kernel'], ['lanes', 128, 2048, 'fused'], ['lanes', 256, 4096, 'kernel'],
        ['mma', 128, 256, 'kernel'], ['mma', 128, 512, 'kernel'], ['mma', 128, 1024, 'kernel'], ['mma', 128, 1024, 'fused'], ['mma', 128, 2048, 'kernel'], ['mma', 128, 4096, 'kernel'],
        ['lanes', 128, 0, 'kernel'], ['lanes', 256, 0, 'kernel'], ['lanes', 256, 0, 'fused'], ...neu]
        .map(([impl, threads, chunk, merge, x]) => [`${att.decodeTag({ impl, threads, ...x })} c${chunk} ${merge}`, { impl, threads, chunk, merge, ...x }])];
      for (const [label, cfg] of cfgs) {
        att._forceAttentionConfig(cfg ? { decode: cfg } : {});
        try {
          let t = Infinity;
          for (let i = 0; i < 3; i++) t = Math.min(t, await timeCuda(() => runCuda(q, k, v, {}).dispose(), 50));
          parts.push(`${cfg ? label : 'tuned'}${!cfg || cfg.chunk === 0 || (cfg.tiles === 'tma' && !att.attentionStats.lastDecode.includes('tma')) ? ` (${att.attentionStats.lastDecode})` : ''} ${(gb / t).toFixed(0)}`);
        } catch (e) { parts.push(`${label} ERROR ${String(e.message).slice(0, 80)}`); }
        finally { att._forceAttentionConfig({}); }
      }
      console.log(`time decode B${B} H${H}/${Hk} S${S} D128 bf16 GB/s: ${parts.join(' | ')}`);
      q.dispose(); k.dispose(); v.dispose();
    }
  }
  process.exit(0);
}
