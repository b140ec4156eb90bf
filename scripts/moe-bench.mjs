#!/usr/bin/env node
// Issue #19's fused mixture of experts on the card: Mixtral-8x7B-layer-shaped prefill (hidden 4096,
// intermediate 14336, 8 experts top-2, bfloat16) through the grouped path (nbx.llm.moe_align + the
// grouped tensor-core GEMM) against the host-routed loop (indices read back, per-expert index_select,
// linear, index_add: transformers' loop), on a random-weight model from nbx.models.fromConfig.
//   1. correctness: the MoE layer's output, grouped vs host-routed, same routing (bf16 tolerance);
//      moe_align's kernel vs its CPU composite on that routing (exact)
//   2. the Experts module alone, grouped vs host-routed, at each --tokens (ms, expert TFLOP/s); on Hopper also
//      the grouped path with the mma.sync kernel (NBX_MOE_GEMM90=0) instead of the warpgroup-MMA one
//   3. the grouped GEMMs alone at block sizes 16/32/64/128 (the row tile; padding E·BS/2 rows)
//   4. 17–128 tokens: the dense path (every expert on every token) vs the grouped path
//   5. the whole model's prefill (--layers layers), grouped vs host-routed (everything else the same)
//   6. other CTA tiles of the grouped GEMM at block sizes 64 and 128: the Hopper kernel's (NBX_MOE_GEMM90_TILE=
//      "bm,bn,stages[,ws]") where it runs, else the mma.sync kernel's (NBX_MOE_GEMM_TILE="bn,bk,stages")
// Writes $OUT/moe-bench.json (default /tmp/out) and prints a line per figure. About 60 s on an H200:
//   timeout -k 5 100 node scripts/moe-bench.mjs [--tokens 512,2048] [--layers 1] [--reps 5]
import { parseArgs } from 'node:util';
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';

const { values } = parseArgs({ options: {
  tokens: { type: 'string', default: '512,2048' }, layers: { type: 'string', default: '1' }, reps: { type: 'string', default: '5' },
  // a tiny shape, one block size and one dense size: for checking the script itself under the host emulator
  small: { type: 'boolean', default: false },
  parts: { type: 'string', default: '1,2,3,4,5,6' }, // which of the parts below run (1 and 2 together)
} });
const nbx = await import('../dist/src/index.js');
const { kernelFeatures, registerKernelFeatures } = await import('../dist/src/kernels/registry.js');
const { moeAlignComposite } = await import('../dist/src/ops/llm.js');
const { gemm90Enabled, moeStats } = await import('../dist/src/backend/cuda/kernels/moe.js');
const OUT = process.env.OUT || '/tmp/out';
mkdirSync(OUT, { recursive: true });
const started = performance.now();
const results = { config: null, checks: [], experts: [], blockSizes: [], dense: [], prefill: [], tiles: [] };
const log = (s) => { console.log(`[${((performance.now() - started) / 1000).toFixed(1)}s] ${s}`); };
const save = () => writeFileSync(join(OUT, 'moe-bench.json'), JSON.stringify(results, null, 1));

const H = values.small ? 16 : 4096, I = values.small ? 16 : 14336, E = 8, K = 2;
const config = {
  model_type: 'mixtral', hidden_size: H, intermediate_size: I, num_hidden_layers: Number(values.layers), num_attention_heads: values.small ? 2 : 32,
  num_key_value_heads: values.small ? 1 : 8, num_local_experts: E, num_experts_per_tok: K, vocab_size: values.small ? 256 : 32000,
  max_position_embeddings: 8192, rms_norm_eps: 1e-5, hidden_act: 'silu', rope_theta: 1e6, tie_word_embeddings: false,
};
results.config = config;
const reps = Number(values.reps);
const TOKENS = values.tokens.split(',').map(Number);
const PARTS = new Set(values.parts.split(',').map(Number));
const sync = () => nbx.cuda.synchronize();

/** Mean ms of fn over `n` runs after two warm-ups (compiles, first-use autotuning), each run's tensors freed. */
async function time(fn, n = reps) {
  nbx.scope(() => { fn(); });
  nbx.scope(() => { fn(); });
  await sync();
  const t0 = performance.now();
  for (let i = 0; i < n; i++) nbx.scope(() => { fn(); });
  await sync();
  return (performance.now() - t0) / n;
}
/** The grouped path of Experts.forward at a chosen block size (the module uses its own constant). */
function grouped(ex, x, idx, w, bs) {
  const [s, b, t] = nbx.llm.moe_align(idx, E, bs);
  const opts = { top_k: K, block_size: bs };
  const h = nbx.llm.gated_activation(nbx.llm.grouped_expert_linear(x, ex.gate_up_proj, s, b, t, opts), { act: 'silu' });
  const y = nbx.llm.grouped_expert_linear(h, ex.down_proj, s, b, t, { ...opts, routing_weights: w });
  return y.select(1, 0).add(y.select(1, 1));
}
/** Runs fn with the grouped path off (the feature list says no dtype): Experts then takes the host-routed loop for > 128 tokens. */
function withoutGrouped(fn) {
  const was = kernelFeatures('llm', 'cuda');
  registerKernelFeatures('cuda', { llm: { ...was, groupedGemmDtypes: [] } });
  try { return fn(); } finally { registerKernelFeatures('cuda', { llm: was }); }
}
const tflops = (n, ms) => (6 * n * K * H * I) / (ms * 1e-3) / 1e12;

const t0 = performance.now();
const model = nbx.models.fromConfig(config, { device: 'cuda', dtype: 'bfloat16', seed: 0 });
await sync();
log(`model: ${config.num_hidden_layers} Mixtral layer(s), hidden ${H}, intermediate ${I}, ${E} experts top-${K}, bf16, made in ${((performance.now() - t0) / 1000).toFixed(1)} s`);
const block = model.model.layers[0].mlp, ex = block.experts;

/** A prompt's hidden states [N, H] and the router's choice for them (the block's own gate, as its forward does). */
function routed(n, seed) {
  const x = nbx.keep(nbx.randn([n, H], { generator: new nbx.Generator().manual_seed(seed) }).to('cuda', 'bfloat16'));
  const probs = nbx.nn.functional.softmax(block.gate.forward(x), { dim: -1, dtype: 'float32' });
  const top = nbx.topk(probs, K, { dim: -1 });
  const w = nbx.keep(top.values.div(top.values.sum(-1, { keepdim: true })));
  return { x, idx: nbx.keep(top.indices), w };
}

try {
  for (const n of PARTS.has(1) || PARTS.has(3) ? TOKENS : []) {
    const { x, idx, w } = routed(n, n);
    if (PARTS.has(1)) {
      // 1. correctness
      const counts = Array.from(nbx.bincount(idx.flatten().to('cpu'), { minlength: E }).tolist());
      const a = nbx.keep(ex.forward(x, idx, w)), b = nbx.keep(withoutGrouped(() => ex.forward(x, idx, w)));
      const diff = a.to('float32').sub(b.to('float32')).abs(), ref = b.to('float32').abs();
      const maxErr = diff.max().item(), meanErr = diff.mean().item(), scale = ref.max().item(), meanRef = ref.mean().item();
      const [s, bx, tot] = nbx.llm.moe_align(idx, E, 64);
      const [cs, cb, ct] = moeAlignComposite(idx.to('cpu'), E, 64);
      const alignOk = nbx.equal(s.to('cpu'), cs) && nbx.equal(bx.to('cpu'), cb) && nbx.equal(tot.to('cpu'), ct);
      const ok = maxErr <= 3e-2 * scale && meanErr <= 1e-2 * meanRef && alignOk; // bf16: an ulp is 2^-8 of a value
      results.checks.push({ tokens: n, expertCounts: counts, maxErr, meanErr, maxRef: scale, meanRef, alignExact: alignOk, ok });
      log(`check N=${n}: slots per expert [${counts.join(' ')}]; grouped vs host-routed max |diff| ${maxErr.toExponential(2)} (max |out| ${scale.toFixed(3)}), mean |diff| ${meanErr.toExponential(2)} (mean |out| ${meanRef.toExponential(2)}); moe_align = composite: ${alignOk} → ${ok ? 'OK' : 'FAIL'}`);
      for (const t of [a, b, s, bx, tot]) t.dispose();
      // 2. the Experts module
      const tg = await time(() => ex.forward(x, idx, w));
      const tl = await time(() => withoutGrouped(() => ex.forward(x, idx, w)), Math.min(reps, 3));
      let tm = null;
      if (gemm90Enabled()) {
        process.env.NBX_MOE_GEMM90 = '0';
        try { tm = await time(() => ex.forward(x, idx, w)); } finally { delete process.env.NBX_MOE_GEMM90; }
      }
      results.experts.push({ tokens: n, groupedMs: tg, hostLoopMs: tl, groupedTflops: tflops(n, tg), hostLoopTflops: tflops(n, tl), speedup: tl / tg, groupedMmaSyncMs: tm, kernels: { ...moeStats } });
      log(`experts N=${n}: grouped ${tg.toFixed(3)} ms (${tflops(n, tg).toFixed(0)} TFLOP/s${gemm90Enabled() ? ', wgmma kernel' : ''}), host-routed loop ${tl.toFixed(3)} ms (${tflops(n, tl).toFixed(0)} TFLOP/s): ${(tl / tg).toFixed(2)}x` +
        (tm !== null ? `; grouped with the mma.sync kernel ${tm.toFixed(3)} ms (${tflops(n, tm).toFixed(0)} TFLOP/s)` : '') + ` [launches ${JSON.stringify(moeStats)}]`);
      save();
    }
    // 3. block sizes
    for (const bs of !PARTS.has(3) ? [] : values.small ? [64] : [16, 32, 64, 128]) {
      const ta = await time(() => nbx.llm.moe_align(idx, E, bs));
      const tb = await time(() => grouped(ex, x, idx, w, bs));
      results.blockSizes.push({ tokens: n, blockSize: bs, alignMs: ta, groupedMs: tb, tflops: tflops(n, tb) });
      log(`  block ${bs}: moe_align ${(ta * 1000).toFixed(0)} us, grouped path ${tb.toFixed(3)} ms (${tflops(n, tb).toFixed(0)} TFLOP/s)`);
    }
    save();
    x.dispose(); idx.dispose(); w.dispose();
  }
  // 4. 17–128 tokens: dense (Experts' path there) vs grouped
  for (const n of !PARTS.has(4) ? [] : values.small ? [32] : [32, 64, 128]) {
    const { x, idx, w } = routed(n, 100 + n);
    const td = await time(() => ex.forward(x, idx, w));
    const row = { tokens: n, denseMs: td };
    for (const bs of [16, 32, 64]) row[`grouped${bs}Ms`] = await time(() => grouped(ex, x, idx, w, bs));
    results.dense.push(row);
    log(`N=${n}: dense ${td.toFixed(3)} ms; grouped block 16 ${row.grouped16Ms.toFixed(3)}, 32 ${row.grouped32Ms.toFixed(3)}, 64 ${row.grouped64Ms.toFixed(3)} ms`);
    x.dispose(); idx.dispose(); w.dispose();
  }
  save();
  // 5. whole-model prefill
  for (const n of PARTS.has(5) ? TOKENS : []) {
    const ids = nbx.tensor([Array.from({ length: n }, (_, i) => 1 + ((i * 7919) % (config.vocab_size - 1)))], { dtype: 'int64', device: 'cuda' });
    const fwd = () => model.forward(ids, { logits_to_keep: 1 });
    const tg = await time(fwd, 3), tl = await time(() => withoutGrouped(fwd), 3);
    results.prefill.push({ tokens: n, layers: config.num_hidden_layers, groupedMs: tg, hostLoopMs: tl, groupedTokS: n / tg * 1e3, hostLoopTokS: n / tl * 1e3 });
    log(`prefill ${n} tokens, ${config.num_hidden_layers} layer(s): grouped ${tg.toFixed(2)} ms (${(n / tg * 1e3).toFixed(0)} tok/s), host-routed ${tl.toFixed(2)} ms (${(n / tl * 1e3).toFixed(0)} tok/s): ${(tl / tg).toFixed(2)}x`);
    ids.dispose();
  }
  save();
  // 6. tiles (default 128,32,4)
  for (const n of PARTS.has(6) ? TOKENS : []) {
    const { x, idx, w } = routed(n, n);
    const hopper = gemm90Enabled(), VAR = hopper ? 'NBX_MOE_GEMM90_TILE' : 'NBX_MOE_GEMM_TILE';
    const tiles = hopper
      ? (values.small ? [[64, '64,128,5']] : [[64, '64,256,4'], [64, '64,128,5'], [128, '128,256,4'], [128, '128,256,3'], [128, '128,128,4'],
        // warp-specialized (weight by TMA) last: a hang there leaves the others' figures saved
        [64, '64,256,4,ws'], [64, '64,256,5,ws'], [128, '128,256,4,ws'], [128, '128,256,3,ws'], [128, '128,128,5,ws']])
      : (values.small ? [[64, '256,32,4']] : [[64, '128,32,4'], [64, '256,32,4'], [64, '128,64,3'], [64, '256,64,3'], [64, '128,32,3'], [128, '128,32,4'], [128, '128,64,3'], [128, '256,32,3'], [128, '256,64,3']]);
    for (const [bs, tile] of tiles) {
      process.env[VAR] = tile;
      try {
        const tt = await time(() => grouped(ex, x, idx, w, bs));
        results.tiles.push({ tokens: n, blockSize: bs, kernel: hopper ? 'wgmma' : 'mma.sync', tile, groupedMs: tt, tflops: tflops(n, tt) });
        log(`tile N=${n} block ${bs} ${hopper ? 'wgmma bm,bn,stages' : 'mma.sync bn,bk,stages'} ${tile}: grouped path ${tt.toFixed(3)} ms (${tflops(n, tt).toFixed(0)} TFLOP/s)`);
      } finally { delete process.env[VAR]; }
      save();
    }
    x.dispose(); idx.dispose(); w.dispose();
  }
  const bad = results.checks.filter((c) => !c.ok);
  log(bad.length ? `CORRECTNESS FAIL at ${bad.map((c) => c.tokens).join(', ')} tokens` : 'all checks OK');
  process.exitCode = bad.length ? 1 : 0;
} catch (e) {
  results.error = String(e?.stack ?? e);
  save();
  console.error(e);
  process.exitCode = 1;
} finally {
  model.dispose();
}
process.exit();
