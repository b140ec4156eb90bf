// `nbx bench quant` (issue #21): the dequantizing GEMV's bandwidth per format, and decode speed of a
// Llama-3-8B-shaped model with quantized weights next to the same model in bfloat16, in one run.
//
// --check first: every format of the quant contract through the device's quant_matmul (m = 1, 4, 8 and
// a prefill m) and dequantize, against the CPU dequantizers (bench/quant_ref.ts: src/io/gguf.ts's
// ggml dequantizers and the contract's int8/int4/fp8 formulas); a failure is printed and the exit code
// is 1, the measurements still run.
//
// GEMV: out[m, N] = x[m, K] · dequantize(W)ᵀ for W [N, K] = 4096×14336 and 14336×4096 (Llama-3-8B's
// down and gate/up projections), bfloat16 x. Bandwidth is counted in packed bytes (qweight + scales +
// zeros) per call; time per call on CUDA is measured with weights coming from memory as in a model
// (quant.ts's timeCleanL2: L2 evicted and left clean before each of 10 calls, events around each; --flush
// dirty: gemv.ts's timeColdL2, memsets only, whose dirty lines the timed call writes back), on WebGPU the wall
// clock of 20 calls. --sweep times every CUDA kernel that takes the format at every kw and shows the
// best next to the one the tuner/default gives (last, for the main formats, as --budget-s allows). The roofline is data: --roofline-gbs, else measured
// here (a + b over 1 GiB float32 operands, as bench/decode.ts measures it). Issue #21's target: ≥ 85%.
//
// Decode (--decode, default on cuda): nbx.models.fromConfig (random weights, bf16) greedy decode tok/s,
// then the same shape with every nn.Linear but lm_head quantized (int8 per channel, int4 g128:
// lm_head bf16, the AWQ/GPTQ convention), the same with lm_head quantized in the same format too
// (int8+lm, int4-g128+lm: gpt-fast's convention, whose int8 / int4 modes quantize every Linear), and a
// Q4_K_M-like model (q4_k, with q6_k for attn v / ffn down on llama.cpp's use_more_bits layers and for
// lm_head). Each row says which lm_head it ran. Packed weights are random (a valid 64-row pattern
// repeated on the device: building them on the host would take minutes); speed does not depend on the values.
// Targets (ratio to bf16 tok/s): int4 g128 ≥ 2.8×, int8 ≥ 1.7× (with either lm_head), Q4_K_M ≥ 2.5×.
//
// Run: node dist/bench/quant.js [--device cuda|webgpu|cpu] [--check [--quick]] [--no-gemv] [--sweep]
//        [--formats all|int4,q4_k,...] [--gemv-formats int4,...] [--m 1,4,8] [--shapes 4096x14336,14336x4096] [--decode|--no-decode] [--decode-schemes bf16,int8,int4-g128,q4_k_m,int8+lm,int4-g128+lm] [--shape llama3-8b|tiny]
//        [--new-tokens 64] [--roofline-gbs N] [--json FILE] [--budget-s S] [--flush clean|dirty] [--sweep-stream] [--sweep-focus] [--sweep-xf] [--sweep-lb] [--sweep-pg] [--sweep-cfgs JSON|@FILE] [--check-filter STR|STR...] [--sass DIR]     (or `nbx bench quant ...`)
//   --budget-s: past S seconds from the start, the sweep and the remaining decode models are skipped (said so).

import { readFileSync, writeFileSync } from 'node:fs';
import { pathToFileURL } from 'node:url';
import { parseArgs } from 'node:util';
import * as nbx from '../src/index.js';
import { Tensor } from '../src/tensor/tensor.js';
import { Device } from '../src/backend/backend.js';
import { kernel, kernelFeatures } from '../src/kernels/registry.js';
import type { QuantFormat, QuantLayout } from '../src/kernels/quant.js';
import { generateSteps, type PreparedPrompt } from '../src/generation/index.js';
import type { CausalLMModel } from '../src/models/index.js';
import { measureStreamGBs, syncDevice } from './roofline.js';
import { deviceRandn } from './device_randn.js';
import { ALL_FORMATS, QUANT_TOL, dequantRef, lcg, matmulRef, randomPacked, relErr, rowBytes, type PackedWeight } from './quant_ref.js';

const OP = 'bench quant';
const now = (): number => performance.now();
const out = (s: string): void => { process.stdout.write(`${s}\n`); };

const sync = syncDevice;

export interface DevWeight { q: Tensor; s?: Tensor; z?: Tensor; layout: QuantLayout; bytes: number }

function toDevice(p: PackedWeight, device: string): DevWeight {
  const q = Tensor.fromStorage(p.qweight, 'uint8', [p.layout.n, p.layout.rowBytes]).to(device);
  const s = p.scales ? Tensor.fromStorage(p.scales, 'float32', p.scaleShape!).to(device) : undefined;
  const z = p.zeros ? Tensor.fromStorage(p.zeros, 'float32', p.scaleShape!).to(device) : undefined;
  const bytes = p.qweight.length + (p.scales?.length ?? 0) * 4 + (p.zeros?.length ?? 0) * 4;
  return { q, ...(s ? { s } : {}), ...(z ? { z } : {}), layout: p.layout, bytes };
}

/** A random packed weight [n, k] built on the device: a valid 64-row pattern repeated (n a multiple of 64). */
export function bigPacked(f: QuantFormat, n: number, k: number, device: string, seed: number, opts: { asym?: boolean } = {}): DevWeight {
  const R = 64;
  const p = randomPacked(f, R, k, seed, { groupSize: 128, ...opts });
  const small = toDevice(p, device);
  const rep = (t: Tensor | undefined): Tensor | undefined => {
    if (!t) return undefined;
    if (t.numel() === 1) return t;
    const r = t.unsqueeze(0).expand([n / R, ...t.shape]).reshape([n, ...t.shape.slice(1)]).contiguous();
    t.dispose();
    return r;
  };
  const q = rep(small.q)!, s = rep(small.s), z = rep(small.z);
  const layout = { ...p.layout, n };
  const bytes = n * rowBytes(f, k) + (s ? s.numel() * 4 : 0) + (z ? z.numel() * 4 : 0);
  return { q, ...(s ? { s } : {}), ...(z ? { z } : {}), layout, bytes };
}

export function disposeW(w: DevWeight): void { w.q.dispose(); w.s?.dispose(); w.z?.dispose(); }

export function callQuant(device: string, w: DevWeight, x: Tensor, o: Tensor, m: number, dt: string): void {
  kernel('quant_matmul', Device.of(device))({
    x: x.ref(), qweight: w.q.ref(), ...(w.s ? { scales: w.s.ref() } : {}), ...(w.z ? { zeros: w.z.ref() } : {}),
    out: o.ref(), m, layout: w.layout, dtype: dt as 'bfloat16',
  });
}

// ---- correctness -------------------------------------------------------------------------------

async function check(device: string, formats: readonly QuantFormat[], quick: boolean): Promise<boolean> {
  let ok = true;
  const K: Record<string, number> = { q2_k: 1280, q3_k: 1280, q4_k: 1280, q5_k: 1280, q6_k: 1280 };
  let seed = 7;
  for (const f of formats) {
    const parts: string[] = [];
    let fail = '';
    const cases: [string, number, string?][] = quick
      ? [['bfloat16', 1], ['float16', 3], ...(f === 'int4' || f === 'q4_k' ? [['bfloat16', 8] as [string, number], ['bfloat16', 37] as [string, number]] : [])]
      : [['bfloat16', 1], ['bfloat16', 4], ['bfloat16', 8], ['float16', 3], ['float32', 2], ['bfloat16', 37]];
    // the tensor-core int4 kernel forced (the tuner may pick it on large shapes, which the check's are not)
    if (f === 'int8' && device === 'cuda') cases.push(['bfloat16', 1, 'mma-cp-kw1-xs'], ['float16', 5, 'mma-cp-kw1-xs'], ['bfloat16', 1, 'mma-cp-co-kw1-xs'], ['float16', 3, 'mma-cp-co-kw1-xs']); // int8 on tensor cores
    if (f === 'int4' && device === 'cuda') cases.push(['bfloat16', 1, 'mma'], ['bfloat16', 8, 'mma-asym'], ['float16', 3, 'mma'], ['bfloat16', 1, 'mma-xs'], ['bfloat16', 8, 'mma-asym-xs'], ['bfloat16', 1, 'mma-sum-xs'], ['float16', 3, 'mma-asym-sum-xs'], ['bfloat16', 1, 'mma-sum-db-kw1-xs'], ['bfloat16', 8, 'mma-asym-db-kw1-xs'], ['bfloat16', 1, 'mma-sum-cp-kw1-xs'], ['float16', 8, 'mma-asym-cp-kw1-xs'], ['bfloat16', 1, 'mma-sum-cp-co-kw1-xs'], ['float16', 8, 'mma-asym-sum-cp-co-kw1-xs']);
    const cudaMod = device === 'cuda' ? await import('../src/backend/cuda/kernels/quant.js') : null;
    // the default stages x in shared memory (xs); the kernel with x from global memory forced too
    // and one warp per row group (kw 1) on a longer K, where the register kernel's unguarded rounds run
    if (cudaMod) {
      const kern = cudaMod.VEC_FORMATS.includes(f) ? 'vec' : 'fma';
      cases.push(['bfloat16', 1, `${kern}-x0`], ['bfloat16', 1, `${kern}-kw1-xs`]);
      if (kern === 'vec') cases.push(['bfloat16', 1, 'vec-db-kw1-xs'], ['float16', 8, 'vec-db-kw1-xs']); // double-buffered rounds
      if (cudaMod.XF_FORMATS.includes(f)) cases.push(['bfloat16', 1, 'vec-xf-nr4-kw1-xs'], ['bfloat16', 1, 'vec-xf-nr4-db-kw1-xs'], ['float16', 2, 'vec-xf-nr8-kw1-xs'], ['bfloat16', 2, 'vec-xf-nr2-kw1-xs']); // x as float32
      // and at 3 / 4 blocks per SM (lb), q4_k's tuner forms
      // the persistent grid (pg) and int4 on tensor cores in the register kernel (tc: bf16 / f16, one row of x)
      if (cudaMod.XF_FORMATS.includes(f)) cases.push(['bfloat16', 1, 'vec-xf-nr4-db-pg-kw1-xs'], ['float16', 2, 'vec-xf-nr8-pg-kw1-xs'], ['bfloat16', 1, 'vec-xf-nr2-db-U1-pg-kw1-xs']);
      if (f === 'int4') cases.push(['bfloat16', 1, 'vec-xf-nr4-db-tc-kw1-xs'], ['float16', 1, 'vec-xf-nr4-db-tc-kw1-xs'], ['bfloat16', 1, 'vec-xf-nr4-U2-tc-kw1-xs'], ['bfloat16', 1, 'vec-xf-nr2-db-U2-tc-kw1-xs'], ['bfloat16', 1, 'vec-xf-nr4-db-tc-pg-kw1-xs']);
      if (cudaMod.XF_FORMATS.includes(f)) cases.push(['bfloat16', 1, 'vec-xf-nr4-db-lb3-kw1-xs'], ['float16', 2, 'vec-xf-nr2-db-U1-lb4-kw1-xs'], ['bfloat16', 1, 'vec-xf-nr1-db-U2-lb3-kw1-xs'], ['bfloat16', 1, 'vec-xf-nr8-lb3-kw1-xs'], ['bfloat16', 1, 'vec-xf-nr2-db-U1-kw1-xs']);
      // the weight stream through per-warp bulk-copy rings (bk; K 5120: whole stripes), kw 1 / 2, int4 sym / asym
      if (cudaMod.XF_FORMATS.includes(f)) cases.push(['bfloat16', 1, 'vec-xf-nr4-bk4-kw1-xs'], ['float16', 2, 'vec-xf-nr2-bk3-kw2-xs'], ['bfloat16', 1, 'vec-xf-nr1-bk8-kw2-xs'], ['bfloat16', 1, 'vec-xf-nr2-bk4-pg-kw1-xs'], ['float16', 2, 'vec-xf-nr1-bk6-pg-kw1-xs'], ...(f === 'int4' ? [['bfloat16', 1, 'vec-xf-nr2-bk4-asym-kw2-xs'] as [string, number, string]] : []));
      // q4_k's wide unit (wu: a lane takes a whole 64-element chunk of a block): the tuner's forms, m 1 / 2
      // both db rounds before the grid-dependency wait (pb): int4 / int8 / q4_k, with pg, lb 4, wu, m 2
      if (cudaMod.XF_FORMATS.includes(f)) cases.push(['bfloat16', 1, 'vec-xf-nr4-db-pb-kw1-xs'], ['float16', 2, 'vec-xf-nr2-db-U1-pb-kw1-xs'], ['bfloat16', 1, 'vec-xf-nr4-db-pg-pb-kw1-xs'], ['bfloat16', 1, 'vec-xf-nr2-db-U1-lb4-pb-kw1-xs'], ...(f === 'q4_k' ? [['bfloat16', 1, 'vec-xf-nr2-db-U1-wu-pb-kw1-xs'] as [string, number, string]] : []));
      if (f === 'q4_k') cases.push(['bfloat16', 1, 'vec-xf-nr2-db-U1-wu-kw1-xs'], ['float16', 2, 'vec-xf-nr2-U2-wu-kw1-xs'], ['bfloat16', 1, 'vec-xf-nr1-db-U1-lb3-wu-kw1-xs'], ['bfloat16', 1, 'vec-xf-nr2-db-U1-wu-pg-kw1-xs']);
      cases.push(['bfloat16', 1, `${kern}-cp-kw1-xs`], ['float16', 3, `${kern}-cp-kw1-xs`]); // cp.async ring
      if (f === 'q4_k') cases.push(['bfloat16', 1, 'fma-kw1-xs']); // the tile kernel (a tuner candidate for q4_k)
      if (!quick) cases.push(['float16', 3, `${kern}-x0`], ['float16', 2, `${kern}-kw1-xs`]);
    }
    for (const [dt, m, impl] of cases.filter(([, , im]) => !checkFilter || checkFilter.split('|').some((cf) => (im ?? '').includes(cf)))) {
      const k = impl?.includes('-bk') ? 5120 : impl?.includes('-kw1') ? 4608 : K[f] ?? 2304, n = 72;
      const p = randomPacked(f, n, k, seed++, impl?.startsWith('mma') ? { asym: impl.startsWith('mma-asym'), groupSize: 128 } : { asym: f === 'int4' && (m === 4 || (quick && m === 3) || !!impl?.includes('-asym')), groupSize: m === 8 ? 64 : 128 });
      const bk0 = cudaMod?.bkLaunches() ?? 0, wu0 = cudaMod?.wuLaunches() ?? 0;
      if (impl) cudaMod?.forceQuantGemvConfig({ impl: impl.slice(0, 3), kw: 1, xs: impl.endsWith('-xs') ? 1 : 0, ms: impl.includes('-sum') ? 1 : 0, db: impl.includes('-db') ? 1 : 0, cp: impl.includes('-cp') ? 6 : 0, co: impl.includes('-co') ? 1 : 0, xf: impl.includes('-xf') ? 1 : 0, nr: Number(/-nr(\d)/.exec(impl)?.[1] ?? 0), U: Number(/-U(\d)/.exec(impl)?.[1] ?? 0), lb: Number(/-lb(\d)/.exec(impl)?.[1] ?? 0), pg: impl.includes('-pg') ? 1 : 0, tc: impl.includes('-tc') ? 1 : 0, wu: impl.includes('-wu') ? 1 : 0, pb: impl.includes('-pb') ? 1 : 0, bk: Number(/-bk(\d)/.exec(impl)?.[1] ?? 0), ...(impl.includes('-bk') ? { kw: Number(/-kw(\d)/.exec(impl)?.[1] ?? 1) } : {}), ...(impl.includes('-pg') ? { pgGrid: 2 } : {}) }); // kw 1 (a launch argument), bk cases as named
      const w = toDevice(p, device);
      const r = lcg(seed++);
      const x = nbx.tensor(Array.from({ length: m * k }, () => r() * 2 - 1)).reshape([m, k]).to(dt as 'float32');
      const b = nbx.tensor(Array.from({ length: n }, () => r() - 0.5)).to(dt as 'float32');
      const want = matmulRef(x.to('float64').dataSync() as Float64Array, dequantRef(p), m, n, k, b.to('float64').dataSync() as Float64Array);
      const xg = x.to(device), bg = b.to(device), o = Tensor.empty([m, n], dt as 'float32', device);
      try {
        kernel('quant_matmul', Device.of(device))({
          x: xg.ref(), qweight: w.q.ref(), ...(w.s ? { scales: w.s.ref() } : {}), ...(w.z ? { zeros: w.z.ref() } : {}), bias: bg.ref(),
          out: o.ref(), m, layout: w.layout, dtype: dt as 'bfloat16',
        });
        const got = (await o.cpu()).to('float64').dataSync() as Float64Array;
        const e = relErr(got, want);
        parts.push(`${impl ? `${impl} ` : ''}${dt === 'bfloat16' ? 'bf16' : dt === 'float16' ? 'f16' : 'f32'} m${m} ${e.toExponential(1)}`);
        if (!(e <= QUANT_TOL[dt]!)) fail += ` [${impl ?? ''} ${dt} m=${m}: error ${e} > ${QUANT_TOL[dt]}]`;
        if (impl?.includes('-bk') && cudaMod && cudaMod.bkLaunches() === bk0) fail += ` [${impl} ${dt} m=${m}: the bk kernel did not run]`;
        if (impl?.includes('-wu') && cudaMod && cudaMod.wuLaunches() === wu0) fail += ` [${impl} ${dt} m=${m}: the wu kernel did not run]`;
      } catch (err) { fail += ` [${impl ?? ''} ${dt} m=${m}: ${(err as Error).message}]`; } finally { if (impl) cudaMod?.forceQuantGemvConfig(null); }
      disposeW(w); xg.dispose(); bg.dispose(); o.dispose();
    }
    // dequantize bit for bit (bfloat16)
    try {
      const p = randomPacked(f, 8, K[f] ?? 256, seed++, { asym: f === 'int4' });
      const w = toDevice(p, device), o = Tensor.empty([8, p.layout.k], 'bfloat16', device);
      kernel('dequantize', Device.of(device))({ qweight: w.q.ref(), ...(w.s ? { scales: w.s.ref() } : {}), ...(w.z ? { zeros: w.z.ref() } : {}), out: o.ref(), layout: w.layout, dtype: 'bfloat16' });
      const want = Tensor.fromStorage(dequantRef(p), 'float32', [8, p.layout.k]).to('bfloat16').to('float32').dataSync() as Float32Array;
      const got = (await o.cpu()).to('float32').dataSync() as Float32Array;
      let bad = -1;
      for (let i = 0; i < want.length && bad < 0; i++) if (!Object.is(got[i], want[i])) bad = i;
      parts.push(bad < 0 ? 'dequant exact' : `dequant DIFFERS at ${bad}`);
      if (bad >= 0) fail += ` [dequantize element ${bad}: ${got[bad]} vs ${want[bad]}]`;
      disposeW(w); o.dispose();
    } catch (err) { fail += ` [dequantize: ${(err as Error).message}]`; }
    out(`check ${f.padEnd(8)} ${fail ? 'FAIL' : 'ok  '} ${parts.join(', ')}${fail}`);
    if (fail) ok = false;
  }
  return ok;
}

// ---- GEMV bandwidth -----------------------------------------------------------------------------

/** Milliseconds per call: CUDA with L2 evicted before each call (events), else the wall clock of 20 calls. */
async function timeCall(device: string, fn: () => void): Promise<number> {
  if (device === 'cuda') {
    const { timeColdL2 } = await import('../src/backend/cuda/kernels/gemv.js');
    const { timeCleanL2 } = await import('../src/backend/cuda/kernels/quant.js');
    const be = nbx.cuda.backend();
    const time = (calls: number): number => (dirtyFlush ? timeColdL2(be, fn, calls) : timeCleanL2(fn, calls));
    fn(); // compile / tune
    time(3);
    return time(10);
  }
  fn();
  await sync(device);
  const t = now();
  for (let i = 0; i < 20; i++) fn();
  await sync(device);
  return (now() - t) / 20;
}

/** --flush dirty: evict L2 by memsets only (gemv.ts's timeColdL2, the figures before 2026-12-02's fifth session), which leaves ~L2-size dirty lines for the timed call to write back; default: evicted and clean (quant.ts's timeCleanL2). */
let dirtyFlush = false;
/** --sweep-stream: the sweep also times the streaming kernels (svec / smma / sfma, without their prefetch). */
let sweepStream = false;
/** --sweep-focus: the sweep times only the baselines and the tensor-core / ring variants. */
let sweepFocus = false;
/** --sweep-xf: the sweep times only the baselines and the xf forms (int4, int8). */
let sweepXf = false;
/** --sweep-lb: the sweep times only the xf forms that won before (and vec xs) against the xf forms at 3 / 4 blocks per SM and q4_k's xf forms. */
let sweepLb = false;

/**
 * --sweep-pg: quant-5's best xf forms against the persistent grid (pg), int4 on tensor cores in the register kernel
 * (tc), and the diagnostics (ab 1: weight loads from the rows' first 1 KB, L1 hits: the arithmetic alone; ab 2: the
 * loads alone; ab 3: x not staged: the prologue's cost) of the best float form and of tc. ab rows give WRONG
 * results: timing only (labels /abN), never the tuner's.
 */
let sweepPg = false;

/**
 * --sweep-cfgs JSON (or @FILE): the sweep times exactly these configurations per format ({"int4": [{...}, ...]}), each merged
 * over { impl: 'vec', kw: 1, xs: 1, xf: 1 } (e.g. {"kw": 2, "nr": 2, "db": 1, "U": 4, "ab": 2}), after vec xs as the baseline.
 */
let sweepCfgs: Record<string, Record<string, number | string>[]> | null = null;
/** --check-filter STR[|STR...]: the check runs only its forced cases whose label contains one of the STRs (e.g. '-bk', '-wu|-pb'). */
let checkFilter = '';

/** --sweep times every configuration for these (the others run the tuner's / default choice only: the sweep's compiles cost time). */
const SWEEP_FORMATS: readonly QuantFormat[] = ['int4', 'int8', 'q4_k', 'q6_k', 'q8_0'];
let deadline = Infinity;
const overBudget = (): boolean => now() > deadline;

/** A CUDA GEMV configuration as the log shows it: 'mma', 'vec/kw4', 'fma/kw2' (the tile kernel; r·s· when forced). */
const cfgLabel = (c: Record<string, unknown>): string => (c.impl === 'mma' ? `mma${c.xs === 1 ? '/xs' : ''}${c.ms === 1 ? '/sum' : ''}${c.db === 1 ? '/db' : ''}${c.cp ? `/cp${String(c.cp)}` : ''}${c.co ? '/co' : ''}${c.U ? `/U${String(c.U)}` : ''}`
  : c.impl === 'svec' || c.impl === 'smma' || c.impl === 'sfma' ? `${String(c.impl)}/ring${String(c.ring)}/bps${String(c.bps)}${c.pf === 0 ? '/nopf' : ''}`
  : `${String(c.impl)}${c.rows !== undefined ? `r${String(c.rows)}s${String(c.sub)}` : ''}/kw${String(c.kw ?? 1)}${c.xs === 1 ? '/xs' : ''}${c.xf === 1 ? '/xf' : ''}${c.nr ? `/nr${String(c.nr)}` : ''}${c.db === 1 ? '/db' : ''}${c.cp ? `/cp${String(c.cp)}` : ''}${c.U ? `/U${String(c.U)}` : ''}${c.lb ? `/lb${String(c.lb)}` : ''}${c.pg ? '/pg' : ''}${c.tc ? '/tc' : ''}${c.bk ? `/bk${String(c.bk)}` : ''}${c.wu ? '/wu' : ''}${c.pb ? '/pb' : ''}${c.ab ? `/ab${String(c.ab)}` : ''}`);

interface GemvRow { format: string; n: number; k: number; m: number; us: number; gbs: number; pct?: number; config?: string; best?: { config: string; us: number; gbs: number } }

async function gemv(device: string, formats: readonly QuantFormat[], ms: number[], sweep: boolean, roof: number | undefined, shapes: [number, number][]): Promise<GemvRow[]> {
  const rows: GemvRow[] = [];
  const cudaMod = device === 'cuda' ? await import('../src/backend/cuda/kernels/quant.js') : null;
  const pct = (g: number): string => (roof ? ` ${((g / roof) * 100).toFixed(1).padStart(5)}%` : '');
  out(`GEMV, bf16 x, time per call with weights from memory; GB/s of packed bytes${roof ? ` and % of ${roof.toFixed(0)} GB/s` : ''}`);
  for (const [n, k] of shapes) {
    for (const m of ms) {
      if (overBudget()) { out(`  ${n}x${k} m=${m}: skipped (--budget-s reached)`); continue; }
      // the bfloat16 reference: nn.functional.linear through the device's GEMM/GEMV (its own tuner)
      const wb0 = device === 'cuda' ? deviceRandn([n, k], 'bfloat16') : nbx.randn([n, k], { device, dtype: 'bfloat16' }); // nbx.randn draws on the host: minutes for 59M values
      const wb = wb0.mul(0.02), xb = nbx.randn([m, k], { device, dtype: 'bfloat16' });
      wb0.dispose();
      const ref = await timeCall(device, () => { nbx.nn.functional.linear(xb, wb).dispose(); });
      const refG = (n * k * 2) / (ref / 1000) / 1e9;
      rows.push({ format: 'bf16', n, k, m, us: ref * 1000, gbs: refG, ...(roof ? { pct: (refG / roof) * 100 } : {}) });
      out(`  ${'bf16'.padEnd(8)} ${n}x${k} m=${m}: ${(ref * 1000).toFixed(1).padStart(7)} us ${refG.toFixed(0).padStart(5)} GB/s${pct(refG)}`);
      wb.dispose(); xb.dispose();
      for (const f of formats) {
        const w = bigPacked(f, n, k, device, 11);
        const x = nbx.randn([m, k], { device, dtype: 'bfloat16' }), o = Tensor.empty([m, n], 'bfloat16', device);
        try {
          const ms1 = await timeCall(device, () => callQuant(device, w, x, o, m, 'bfloat16'));
          const g = w.bytes / (ms1 / 1000) / 1e9;
          const row: GemvRow = { format: f, n, k, m, us: ms1 * 1000, gbs: g, ...(roof ? { pct: (g / roof) * 100 } : {}) };
          let extra = '';
          const chosen = cudaMod?.lastQuantGemvConfig(); // the tuner's / default choice, before the sweep forces others
          if (sweep && cudaMod && !overBudget()) {
            let best: { config: string; us: number; gbs: number } | undefined;
            const all: string[] = [];
            // every kernel that takes the format at every kw (the tile kernel at its per-format shape)
            // the streaming kernels at ring × blocks per SM, and once without their L2 prefetch (pf 0)
            // x from global memory and staged in shared memory (xs), and the streaming kernels with --sweep-stream
            const cfgs: Record<string, string | number>[] = f === 'int4' ? [{ impl: 'mma', kw: 1, xs: 0 }, { impl: 'mma', kw: 1, xs: 1 }, { impl: 'mma', kw: 1, xs: 1, ms: 1 }] : [];
            if (sweepStream) {
              if (f === 'int4') for (const [ring, bps, pf] of [[4, 2, 0], [8, 1, 0]]) cfgs.push({ impl: 'smma', kw: 1, ring, bps, pf });
              if (cudaMod.VEC_FORMATS.includes(f)) for (const [ring, bps, pf] of [[2, 2, 0], [4, 2, 0]]) cfgs.push({ impl: 'svec', kw: 1, ring, bps, pf });
              if (cudaMod.sfmaShape(f)) for (const [ring, bps, pf] of [[3, 2, 0], [4, 2, 0]]) cfgs.push({ impl: 'sfma', kw: 1, ring, bps, pf });
            }
            for (const impl of cudaMod.VEC_FORMATS.includes(f) ? ['vec'] : ['fma']) for (const xs of [0, 1]) for (const kw of [1, 2, 4]) cfgs.push({ impl, kw, xs });
            if (f === 'int8' || f === 'int4') for (const U of [2, 3]) cfgs.push({ impl: 'vec', kw: 1, xs: 1, U }); // register ring depth (default 4)
            // double-buffered rounds (db): the register kernel at 2-4 loads per lane and row a round, int4's tensor-core kernel at 2-4 chunks
            if (cudaMod.VEC_FORMATS.includes(f)) for (const U of [2, 4]) cfgs.push({ impl: 'vec', kw: 1, xs: 1, db: 1, U });
            if (f === 'int4') for (const U of [2, 4]) cfgs.push({ impl: 'mma', kw: 1, xs: 1, ms: 1, db: 1, U });
            // lane-private cp.async rings of 4, 6, 8 stages
            if (cudaMod.VEC_FORMATS.includes(f)) for (const cp of [4, 6, 8]) cfgs.push({ impl: 'vec', kw: 1, xs: 1, cp });
            if (f === 'int4') for (const [cp, ms] of [[4, 1], [6, 1], [8, 1], [6, 0]]) cfgs.push({ impl: 'mma', kw: 1, xs: 1, ms, cp });
            if (f === 'int8') for (const [cp, co] of [[4, 0], [6, 0], [4, 1], [6, 1], [8, 1]]) cfgs.push({ impl: 'mma', kw: 1, xs: 1, cp, co }); // int8 on tensor cores
            if (f === 'int4') for (const cp of [4, 6, 8]) cfgs.push({ impl: 'mma', kw: 1, xs: 1, ms: 1, cp, co: 1 }); // whole-line copies
            // the tile kernel's cp ring: the format's tile shape at 4 / 6 stages, and one row of 2 sub-blocks a lane at 4 / 8
            if (!cudaMod.VEC_FORMATS.includes(f)) for (const [cp, rs] of [[4, null], [6, null], [4, [1, 2]], [8, [1, 2]]] as [number, [number, number] | null][]) cfgs.push({ impl: 'fma', kw: 1, xs: 1, cp, ...(rs ? { rows: rs[0], sub: rs[1] } : {}) });
            // --sweep-focus: the baselines and the tensor-core rings only (fewer compiles on the card)
            if (sweepFocus) {
              cfgs.length = 0;
              const kern = cudaMod.VEC_FORMATS.includes(f) ? 'vec' : 'fma';
              cfgs.push({ impl: kern, kw: 1, xs: 1 }, { impl: kern, kw: 1, xs: 0 });
              if (kern === 'vec') cfgs.push({ impl: 'vec', kw: 1, xs: 1, db: 1, U: 2 }, { impl: 'vec', kw: 1, xs: 1, cp: 4 });
              if (f === 'q4_k' || kern === 'fma') cfgs.push({ impl: 'fma', kw: 1, xs: 1 }, { impl: 'fma', kw: 1, xs: 1, cp: 4 }); // the tile kernel (q4_k too)
              // (co rings of 2-3 stages: three blocks per SM where x is 28 KB; 6-8 stages left one and lost in call 5)
              if (f === 'int4') cfgs.push({ impl: 'mma', kw: 1, xs: 1 }, { impl: 'mma', kw: 1, xs: 1, ms: 1, cp: 6 }, ...[2, 3, 4, 6].map((cp) => ({ impl: 'mma', kw: 1, xs: 1, ms: 1, cp, co: 1 })));
              if (f === 'int8') for (const [cp, co] of [[4, 0], [2, 1], [3, 1], [4, 1], [6, 1]]) cfgs.push({ impl: 'mma', kw: 1, xs: 1, cp, co });
            }
            // x as float32 in shared memory (xf) at 2 / 4 / 8 rows a warp, single ring or db, kw 1 / 2 / 4 (4 rows a warp at
            // N 4096 and kw 1 is 128 blocks: fewer than the SMs); --sweep-xf: only these and the baselines (vec xs, db U2)
            if (cudaMod.XF_FORMATS.includes(f) && (sweepXf || sweepFocus)) {
              if (sweepXf) cfgs.splice(0, cfgs.length, { impl: 'vec', kw: 1, xs: 1 }, { impl: 'vec', kw: 1, xs: 1, db: 1, U: 2 }, ...(f === 'int4' ? [{ impl: 'mma', kw: 1, xs: 1 }] : []));
              for (const [nr, db] of [[2, 0], [4, 0], [4, 1], [8, 0]]) for (const kw of [1, 2, 4]) cfgs.push({ impl: 'vec', kw, xs: 1, xf: 1, nr, db });
            }
            // --sweep-lb: call 2's best forms (int4 xf nr4 db kw 1 / 2, int8 xf nr8 / nr2 kw 1, q4_k vec xs) against the xf
            // kernels at 3 / 4 blocks per SM (ptxas -v sm_90a: 80 / 63-64 registers, 0 spills) and q4_k's xf forms
            if (cudaMod.XF_FORMATS.includes(f) && sweepLb) {
              const xf = (kw: number, nr: number, db: number, U: number, lb: number): Record<string, number | string> => ({ impl: 'vec', kw, xs: 1, xf: 1, nr, db, U, lb });
              cfgs.splice(0, cfgs.length, { impl: 'vec', kw: 1, xs: 1 });
              if (f === 'int4') cfgs.push(xf(1, 4, 1, 0, 0), xf(2, 4, 1, 0, 0), ...[1, 2, 4].map((kw) => xf(kw, 4, 1, 0, 3)), ...[1, 2, 4].map((kw) => xf(kw, 2, 1, 1, 4)), xf(1, 1, 1, 4, 3), xf(2, 1, 1, 4, 3));
              if (f === 'int8') cfgs.push(xf(1, 8, 0, 0, 0), xf(1, 2, 0, 0, 0), ...[1, 2].map((kw) => xf(kw, 8, 0, 0, 3)), ...[1, 2].map((kw) => xf(kw, 4, 1, 0, 3)), ...[1, 2].map((kw) => xf(kw, 2, 1, 1, 4)));
              if (f === 'q4_k') cfgs.push({ impl: 'vec', kw: 1, xs: 1, db: 1, U: 2 }, ...[1, 2, 4].map((kw) => xf(kw, 2, 1, 1, 0)), ...[1, 2].map((kw) => xf(kw, 1, 1, 2, 3)), xf(1, 1, 1, 1, 4), xf(2, 4, 1, 0, 0));
            }
            if (cudaMod.XF_FORMATS.includes(f) && sweepPg) {
              type C = Record<string, number | string>;
              const xf = (kw: number, nr: number, db: number, U: number, more: C = {}): C => ({ impl: 'vec', kw, xs: 1, xf: 1, nr, db, U, ...more });
              cfgs.splice(0, cfgs.length, { impl: 'vec', kw: 1, xs: 1 });
              if (f === 'int4') {
                cfgs.push(xf(1, 4, 1, 0), xf(2, 4, 1, 0), xf(2, 4, 1, 0, { pg: 1 }), xf(1, 2, 1, 1, { lb: 4, pg: 1 }));
                cfgs.push(...[1, 2].map((kw) => xf(kw, 4, 1, 0, { tc: 1 })), ...[1, 2].map((kw) => xf(kw, 4, 0, 2, { tc: 1 })), ...[1, 2].map((kw) => xf(kw, 2, 1, 2, { tc: 1 })), xf(2, 4, 1, 0, { tc: 1, pg: 1 }));
                cfgs.push(...[1, 2, 3].map((ab) => xf(2, 4, 1, 0, { ab })), ...[1, 2, 3].map((ab) => xf(2, 4, 1, 0, { tc: 1, ab })));
              }
              if (f === 'int8') cfgs.push(xf(1, 8, 0, 0), xf(1, 2, 0, 0), xf(1, 4, 1, 0), xf(1, 8, 0, 0, { pg: 1 }), xf(1, 4, 1, 0, { pg: 1 }), xf(2, 4, 1, 0, { pg: 1 }), ...[1, 2, 3].map((ab) => xf(1, 8, 0, 0, { ab })));
              if (f === 'q4_k') cfgs.push(xf(1, 2, 1, 1), xf(1, 2, 1, 1, { pg: 1 }), xf(2, 2, 1, 1, { pg: 1 }), ...[1, 2, 3].map((ab) => xf(1, 2, 1, 1, { ab })));
            }
            if (sweepCfgs) cfgs.splice(0, cfgs.length, { impl: 'vec', kw: 1, xs: 1 }, ...(sweepCfgs[f] ?? []).map((c) => ({ impl: 'vec', kw: 1, xs: 1, xf: 1, ...c })));
            for (const cfg of cfgs) {
              cudaMod.forceQuantGemvConfig(cfg);
              try {
                const t = await timeCall(device, () => callQuant(device, w, x, o, m, 'bfloat16'));
                const gg = w.bytes / (t / 1000) / 1e9;
                const label = cfgLabel(cfg);
                all.push(`${label}:${gg.toFixed(0)}`);
                if (!best || t * 1000 < best.us) best = { config: label, us: t * 1000, gbs: gg };
              } finally { cudaMod.forceQuantGemvConfig(null); }
            }
            if (best) { row.best = best; extra = ` | best ${best.config}: ${best.gbs.toFixed(0)} GB/s${pct(best.gbs)} [${all.join(' ')}]`; }
          }
          if (chosen) row.config = cfgLabel(chosen);
          rows.push(row);
          out(`  ${f.padEnd(8)} ${n}x${k} m=${m}: ${(ms1 * 1000).toFixed(1).padStart(7)} us ${g.toFixed(0).padStart(5)} GB/s${pct(g)}  (${(w.bytes / 2 ** 20).toFixed(1)} MiB, ${(refG > 0 ? (ref / ms1) : 0).toFixed(2)}x bf16${row.config ? `, ${row.config}` : ''})${extra}`);
        } catch (e) {
          out(`  ${f.padEnd(8)} ${n}x${k} m=${m}: failed (${(e as Error).message})`);
        } finally { disposeW(w); x.dispose(); o.dispose(); }
      }
    }
  }
  return rows;
}

// ---- decode -------------------------------------------------------------------------------------

const COMMON = { max_position_embeddings: 4096, rms_norm_eps: 1e-5, bos_token_id: 1, eos_token_id: 2, pad_token_id: 0, tie_word_embeddings: false, hidden_act: 'silu' };
export const SHAPES: Record<string, Record<string, unknown>> = {
  'llama3-8b': { model_type: 'llama', architectures: ['LlamaForCausalLM'], num_hidden_layers: 32, hidden_size: 4096, intermediate_size: 14336, num_attention_heads: 32, num_key_value_heads: 8, vocab_size: 128256, rope_theta: 500000.0, ...COMMON },
  tiny: { model_type: 'llama', architectures: ['LlamaForCausalLM'], num_hidden_layers: 2, hidden_size: 256, intermediate_size: 512, num_attention_heads: 4, num_key_value_heads: 2, vocab_size: 1024, rope_theta: 10000.0, ...COMMON },
};

export type Scheme = 'bf16' | 'int8' | 'int8+lm' | 'int4-g128' | 'int4-g128+lm' | 'q4_k_m';
const TARGET: Record<Scheme, number> = { bf16: 1, int8: 1.7, 'int8+lm': 1.7, 'int4-g128': 2.8, 'int4-g128+lm': 2.8, q4_k_m: 2.5 };
/** The default --decode-schemes: both lm_head conventions, the +lm rows last (a --budget-s run keeps its earlier rows). */
const DEFAULT_SCHEMES: Scheme[] = ['bf16', 'int8', 'int4-g128', 'q4_k_m', 'int8+lm', 'int4-g128+lm'];
/** What each scheme does with lm_head (printed on its row, so both conventions read as what they are). */
const LM_HEAD: Record<Scheme, string> = {
  bf16: 'lm_head bf16', int8: 'lm_head bf16 (AWQ/GPTQ convention)', 'int8+lm': "lm_head int8 (gpt-fast's convention)",
  'int4-g128': 'lm_head bf16 (AWQ/GPTQ convention)', 'int4-g128+lm': "lm_head int4 g128 (gpt-fast's convention)", q4_k_m: "lm_head q6_k (llama.cpp's Q4_K_M)",
};

/** llama.cpp's use_more_bits(i, n): the layers whose attn_v / ffn_down Q4_K_M keeps in Q6_K. */
const moreBits = (i: number, n: number): boolean => i < n / 8 || i >= (7 * n) / 8 || (i - Math.floor(n / 8)) % 3 === 2;

/** Replaces the model's Linear weights by random packed ones of the scheme (built on the device). */
export function quantizeModel(model: CausalLMModel, scheme: Scheme, device: string): void {
  const { QuantizedTensor } = nbx.quant;
  const nLayers = Number((model.config as Record<string, unknown>).num_hidden_layers);
  let seed = 100;
  for (const [name, mod] of model.named_modules()) {
    if (!(mod instanceof nbx.nn.Linear)) continue;
    const lm = /(^|\.)lm_head$/.test(name);
    let f: QuantFormat;
    if (scheme === 'q4_k_m') {
      const layer = Number(/layers\.(\d+)\./.exec(name)?.[1] ?? -1);
      f = lm || ((/v_proj$/.test(name) || /down_proj$/.test(name)) && moreBits(layer, nLayers)) ? 'q6_k' : 'q4_k';
    } else {
      // int8 / int4-g128: lm_head stays float, as nbx.quant.quantize_'s default (and AWQ/GPTQ checkpoints);
      // the +lm schemes quantize it in the same format (quantize_ with lm_head: true; gpt-fast)
      if (lm && !scheme.endsWith('+lm')) continue;
      f = scheme.startsWith('int8') ? 'int8' : 'int4';
    }
    const w = bigPacked(f, mod.out_features, mod.in_features, device, seed++);
    const old = mod.weight;
    mod.set_quantized_weight(new QuantizedTensor({ qdata: w.q, scales: w.s ?? null, zeros: w.z ?? null, layout: w.layout, dtype: 'bfloat16' }));
    if (!(lm && model.cfg.tie_word_embeddings)) old?.dispose(); // a tied lm_head's weight is the embedding's
  }
}

function weightBytes(model: CausalLMModel): number {
  let total = 0;
  for (const [name, t] of [...model.named_parameters(), ...model.named_buffers()]) {
    if (/embed_tokens/.test(name) || /rotary|inv_freq|cos|sin/.test(name)) continue; // a decode step reads one embedding row
    total += t.numel() * t.element_size();
  }
  return total;
}

async function timeDecode(model: CausalLMModel, prompt: number[], newTokens: number, device: string): Promise<number> {
  const prepared: PreparedPrompt = { rows: [prompt.slice()], mask: null, length: prompt.length };
  await sync(device);
  let first = 0, n = 0;
  for await (const _ of generateSteps(model, prepared, { max_new_tokens: newTokens, eos_token_id: null, do_sample: false })) {
    if (n === 0) first = now();
    n++;
  }
  await sync(device);
  return (n - 1) / ((now() - first) / 1000);
}

interface DecodeRow { scheme: Scheme; lm_head: string; tok_s?: number; ratio?: number; target: number; gb_per_step?: number; error?: string }

async function decode(device: string, shape: string, newTokens: number, schemes: Scheme[] = DEFAULT_SCHEMES): Promise<DecodeRow[]> {
  const cfg = SHAPES[shape]!;
  const rows: DecodeRow[] = [];
  const prompt = Array.from({ length: 16 }, (_, i) => 3 + ((i * 7919) % 1000));
  let base: number | undefined;
  out(`decode ${shape}, batch 1, prompt 16, ${newTokens} new tokens (greedy, random weights)`);
  for (const scheme of schemes) {
    const lmHead = device === 'cuda' ? LM_HEAD[scheme] : LM_HEAD[scheme].replace('bf16', 'float32'); // the model dtype off CUDA
    if (overBudget()) { out(`  ${scheme.padEnd(12)} skipped (--budget-s reached)`); rows.push({ scheme, lm_head: lmHead, target: TARGET[scheme], error: 'time budget' }); continue; }
    let model: CausalLMModel | null = null;
    try {
      model = nbx.models.fromConfig(cfg, { device, dtype: device === 'cuda' ? 'bfloat16' : 'float32', seed: 0 });
      if (scheme !== 'bf16') quantizeModel(model, scheme, device);
      const gb = weightBytes(model) / 1e9;
      await timeDecode(model, prompt, Math.min(newTokens, 24), device); // warm-up: compile, tune, capture
      const tps = await timeDecode(model, prompt, newTokens, device);
      if (scheme === 'bf16') base = tps;
      const ratio = base ? tps / base : undefined;
      rows.push({ scheme, lm_head: lmHead, tok_s: tps, ...(ratio ? { ratio } : {}), target: TARGET[scheme], gb_per_step: gb });
      out(`  ${scheme.padEnd(12)} ${tps.toFixed(1).padStart(7)} tok/s  ${gb.toFixed(2)} GB/step  ${(gb * tps).toFixed(0)} GB/s${ratio && scheme !== 'bf16' ? `  ${ratio.toFixed(2)}x bf16 (target ${TARGET[scheme]}x${ratio >= TARGET[scheme] ? ', met' : ', NOT met'})` : ''}  [${lmHead}]`);
    } catch (e) {
      rows.push({ scheme, lm_head: lmHead, target: TARGET[scheme], error: (e as Error).message });
      out(`  ${scheme.padEnd(12)} failed: ${(e as Error).message}  [${lmHead}]`);
    } finally {
      model?.dispose();
      if (device === 'cuda') nbx.cuda.empty_cache();
    }
  }
  return rows;
}

// ---- SASS of the GEMV kernels (--sass DIR) ------------------------------------------------------

/**
 * The SASS of every quant GEMV kernel this process compiled (read back from the kernel cache, which
 * --sass needs on: set NBX_CACHE_DIR to an empty folder), through the toolkit's cuobjdump, one file per
 * kernel in DIR, and per kernel the counts that tell where the weight loads wait: global loads (LDG),
 * shared loads (LDS), dependency barriers (DEPBAR) and instructions.
 */
async function dumpSass(dir: string): Promise<void> {
  const { kernelCacheDir, decodeCacheFile } = await import('../src/backend/cuda/runtime/nvrtc.js');
  const { readdirSync, readFileSync, mkdirSync, existsSync } = await import('node:fs');
  const { execFileSync } = await import('node:child_process');
  const { join } = await import('node:path');
  const { tmpdir } = await import('node:os');
  const tool = join(process.env.CUDA_HOME ?? '/usr/local/cuda', 'bin', 'cuobjdump');
  if (!existsSync(tool)) { out(`sass: no ${tool}`); return; }
  mkdirSync(dir, { recursive: true });
  const cache = kernelCacheDir();
  for (const f of existsSync(cache) ? readdirSync(cache) : []) {
    const d = decodeCacheFile(readFileSync(join(cache, f)));
    if (!d || d.meta.kind !== 'cubin' || !/^quant_gemv/.test(d.meta.name)) continue;
    const base = join(dir, `${d.meta.name}_${f.slice(0, 10)}`), cubin = join(tmpdir(), `nbx_sass_${process.pid}.cubin`);
    writeFileSync(cubin, d.image);
    try {
      const sass = execFileSync(tool, ['-sass', cubin], { encoding: 'utf8', maxBuffer: 1 << 28 });
      writeFileSync(`${base}.sass`, sass);
      const count = (re: RegExp): number => (sass.match(re) ?? []).length;
      // no source name in the cache: the counts tell the kernels apart (HMMA: tensor cores, LDS: x staged)
      out(`sass ${base}: ${count(/\bLDG\b/g)} LDG, ${count(/\bLDS\b/g)} LDS, ${count(/HMMA/g)} HMMA, ${count(/\bPRMT\b/g)} PRMT, ${count(/DEPBAR/g)} DEPBAR, ${count(/^\s+\/\*[0-9a-f]{4,}\*\//gm)} instructions, ${d.meta.created}`);
    } catch (e) { out(`sass ${base}: ${(e as Error).message.split('\n')[0]}`); }
  }
}

// ---- main ---------------------------------------------------------------------------------------

export async function run(args: string[] = []): Promise<void> {
  const { values: v } = parseArgs({
    args, allowPositionals: false,
    options: {
      device: { type: 'string', default: nbx.cuda.is_available() ? 'cuda' : 'cpu' }, shapes: { type: 'string' }, quick: { type: 'boolean', default: false }, check: { type: 'boolean', default: false }, 'no-gemv': { type: 'boolean', default: false },
      sweep: { type: 'boolean', default: false }, 'sweep-stream': { type: 'boolean', default: false }, 'sweep-focus': { type: 'boolean', default: false }, 'sweep-xf': { type: 'boolean', default: false }, 'sweep-lb': { type: 'boolean', default: false }, 'sweep-pg': { type: 'boolean', default: false }, 'sweep-cfgs': { type: 'string' }, 'check-filter': { type: 'string' }, sass: { type: 'string' }, formats: { type: 'string', default: 'all' }, m: { type: 'string', default: '1' },
      decode: { type: 'boolean' }, 'no-decode': { type: 'boolean', default: false }, shape: { type: 'string' },
      'new-tokens': { type: 'string', default: '64' }, flush: { type: 'string', default: 'clean' }, 'budget-s': { type: 'string', default: '0' }, 'gemv-formats': { type: 'string' }, 'decode-schemes': { type: 'string' }, 'roofline-gbs': { type: 'string' }, json: { type: 'string' },
    },
  });
  const device = v.device!;
  if (v.flush !== 'clean' && v.flush !== 'dirty') throw new nbx.ValueError(OP, `--flush takes clean or dirty, got '${v.flush}'`);
  dirtyFlush = v.flush === 'dirty';
  sweepStream = v['sweep-stream']!;
  sweepFocus = v['sweep-focus']!;
  sweepXf = v['sweep-xf']!;
  sweepLb = v['sweep-lb']!;
  sweepPg = v['sweep-pg']!;
  checkFilter = v['check-filter'] ?? '';
  if (v['sweep-cfgs']) { const t = v['sweep-cfgs']; sweepCfgs = JSON.parse(t.startsWith('@') ? readFileSync(t.slice(1), 'utf8') : t) as typeof sweepCfgs; }
  if (Number(v['budget-s']) > 0) deadline = now() + Number(v['budget-s']) * 1000;
  if (!['cpu', 'cuda', 'webgpu'].includes(device)) throw new nbx.ValueError(OP, `--device must be cpu, cuda or webgpu, got '${device}'`);
  const feats = kernelFeatures('quant', Device.of(device).type);
  await nbx.ones([1], { device }).cpu(); // starts the backend (registers its kernels and features)
  const have = kernelFeatures('quant', Device.of(device).type).formats.length ? kernelFeatures('quant', Device.of(device).type) : feats;
  const asked = v.formats === 'all' ? ALL_FORMATS : v.formats!.split(',').map((s) => s.trim()) as QuantFormat[];
  for (const f of asked) if (!ALL_FORMATS.includes(f)) throw new nbx.ValueError(OP, `unknown format '${f}' (${ALL_FORMATS.join(', ')})`);
  const formats = asked.filter((f) => have.formats.includes(f));
  const missing = asked.filter((f) => !have.formats.includes(f));
  let info = device;
  if (device === 'cuda') {
    const { probeCuda } = await import('../src/backend/cuda/runtime/libs.js');
    info = probeCuda().devices?.[0]?.name ?? 'cuda';
  }
  out(`nbx bench quant on ${info} (${new Date().toISOString()}); formats with ${device} kernels: ${formats.join(', ')}${missing.length ? `; none for ${missing.join(', ')}` : ''}`);
  const ms = v.m!.split(',').map(Number);
  const result: Record<string, unknown> = { device, date: new Date().toISOString() };
  let ok = true;
  if (v.check) ok = await check(device, formats, v.quick!);
  let roof: number | undefined;
  let gemvArgs: { ms: number[]; roof: number | undefined; shapes: [number, number][] } | undefined;
  if (!v['no-gemv']) {
    if (v['roofline-gbs']) roof = Number(v['roofline-gbs']);
    else {
      try { const r = await measureStreamGBs(device); roof = r.gbs; out(`roofline ${r.gbs.toFixed(0)} GB/s (${r.how})`); } catch (e) { out(`roofline: not measured (${(e as Error).message})`); }
    }
    result.roofline_gbs = roof;
    const shapes = (v.shapes ?? (device === 'cpu' ? '256x1024' : '4096x14336,14336x4096')).split(',').map((x) => {
      const [n, k] = x.split('x').map(Number);
      if (!(n! > 0 && k! > 0 && n! % 64 === 0 && k! % 256 === 0)) throw new nbx.ValueError(OP, `--shapes takes NxK pairs (N a multiple of 64, K of 256), got '${x}'`);
      return [n!, k!] as [number, number];
    });
    const gf = v['gemv-formats'] ? v['gemv-formats'].split(',').map((x) => x.trim()) as QuantFormat[] : formats;
    result.gemv = await gemv(device, formats.filter((f) => gf.includes(f)), ms, false, roof, shapes);
    gemvArgs = { ms, roof, shapes };
  }
  const doDecode = v['no-decode'] ? false : v.decode ?? device === 'cuda';
  const schemes = (v['decode-schemes'] ?? DEFAULT_SCHEMES.join(',')).split(',').map((x) => x.trim()) as Scheme[];
  for (const sc of schemes) if (!(sc in TARGET)) throw new nbx.ValueError(OP, `--decode-schemes: unknown scheme '${sc}' (${Object.keys(TARGET).join(', ')})`);
  if (schemes[0] !== 'bf16') schemes.unshift('bf16'); // the ratios' base, timed first
  if (doDecode) result.decode = await decode(device, v.shape ?? (device === 'cuda' ? 'llama3-8b' : 'tiny'), Number(v['new-tokens']), schemes);
  // last, as the time budget allows: every configuration of the CUDA GEMV for the main formats
  if (v.sweep && gemvArgs && device === 'cuda') {
    out('sweep of the CUDA GEMV configurations (kernel / warps splitting K: GB/s)');
    result.sweep = await gemv(device, formats.filter((f) => SWEEP_FORMATS.includes(f)), gemvArgs.ms.slice(0, 1), true, gemvArgs.roof, gemvArgs.shapes);
  }
  if (v.json) writeFileSync(v.json, JSON.stringify(result, null, 2));
  if (v.sass && device === 'cuda') await dumpSass(v.sass);
  if (!ok) { out('CHECK FAILED'); process.exitCode = 1; }
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? '').href) {
  run(process.argv.slice(2)).then(() => process.exit(process.exitCode ?? 0), (e: Error) => {
    const msg = e.message.startsWith(`${OP}:`) ? e.message : `${OP}: ${e.message}`;
    process.stderr.write(`${process.env.NBX_DEBUG === '1' ? e.stack : msg}\n`);
    process.exit(1);
  });
}
