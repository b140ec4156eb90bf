#!/usr/bin/env node
// nbx.llm.fused_decode_step against the op-by-op step on one device: a random-weight model decoded
// greedily with the static decoder (CUDA graph replay) for --steps steps under NBX_DECODE_STEP=off, fused
// and phases (a fresh decoder each), comparing the tokens and the last step's logits. Build first.
//   node scripts/decode-step-check.mjs [--shape tinyllama|llama3-8b|small|tiny] [--steps 64] [--prompt 128] [--batch 1] [--device cuda] [--quant int8|int4-g128]
// --quant: the projections (not the lm_head) replaced by random packed weights of that scheme (bench/quant.ts's quantizeModel).
// At --batch B each row's prompt is another sequence of ids; tokens are compared row by row.
import { parseArgs } from 'node:util';

const { values } = parseArgs({ options: {
  shape: { type: 'string', default: 'tinyllama' }, steps: { type: 'string', default: '64' }, prompt: { type: 'string', default: '128' }, batch: { type: 'string', default: '1' },
  device: { type: 'string', default: 'cuda' }, dtype: { type: 'string', default: 'bfloat16' }, modes: { type: 'string', default: 'off,fused,phases' },
  quant: { type: 'string' },
} });
const nbx = await import('../dist/src/index.js');
const { backendFor } = await import('../dist/src/backend/backend.js');
const { decodeStepTrace } = await import('../dist/src/backend/cuda/kernels/decode_step.js');
const SHAPES = {
  tinyllama: { hidden_size: 2048, intermediate_size: 5632, num_hidden_layers: 22, num_attention_heads: 32, num_key_value_heads: 4, vocab_size: 32000 },
  'llama3-8b': { hidden_size: 4096, intermediate_size: 14336, num_hidden_layers: 32, num_attention_heads: 32, num_key_value_heads: 8, vocab_size: 128256, rope_theta: 500000 },
  small: { hidden_size: 256, intermediate_size: 512, num_hidden_layers: 2, num_attention_heads: 4, num_key_value_heads: 2, vocab_size: 512 }, // packed formats in the kernel (K a multiple of 256), small enough for the emulator
  tiny: { hidden_size: 64, intermediate_size: 128, num_hidden_layers: 2, num_attention_heads: 4, num_key_value_heads: 2, vocab_size: 256 },
};
const config = { model_type: 'llama', max_position_embeddings: 4096, rms_norm_eps: 1e-5, hidden_act: 'silu', tie_word_embeddings: false, ...SHAPES[values.shape] };
const model = nbx.models.fromConfig(config, { device: values.device, dtype: values.dtype, seed: 0 });
if (values.quant) (await import('../dist/bench/quant.js')).quantizeModel(model, values.quant, values.device);
const P = Number(values.prompt), N = Number(values.steps), B = Number(values.batch);
const promptIds = Array.from({ length: B }, (_, b) => Array.from({ length: P }, (_, i) => 1 + ((i * 7919 + b * 104729) % (config.vocab_size - 1))));
const results = {};
for (const mode of values.modes.split(',')) {
  process.env.NBX_DECODE_STEP = mode;
  const dec = model.staticDecoder({ batch: B, maxLength: P + N + 1, greedy: true, force: true });
  dec.begin(null, P);
  const prompt = nbx.tensor(promptIds, { dtype: 'int64', device: values.device });
  const first = model.forward(prompt, { cache: dec.cache, logits_to_keep: 1 });
  let tok = Array.from(await first.view([B, config.vocab_size]).argmax(1).data(), Number);
  first.dispose(); prompt.dispose();
  const toks = [];
  let logits = null, first0 = null;
  const t0 = performance.now();
  for (let s = 0; s < N; s++) {
    const r = dec.step(tok, Array(B).fill(P + s));
    tok = Array.from(await r.next.data(), Number);
    toks.push(...tok);
    if (s === 0) first0 = Float32Array.from(await r.logits.float().data());
    if (s === N - 1) logits = Float32Array.from(await r.logits.float().data());
  }
  const ms = (performance.now() - t0) / N;
  dec.checkErrors();
  results[mode] = { toks, logits, first0, ms, stats: dec.stats() };
  if ((process.env.NBX_DECODE_STEP_TRACE === '1' || process.env.NBX_DECODE_STEP_TRACE === '2') && mode === 'fused') traceSummary();
  console.log(`${mode}: ${N} steps, ${ms.toFixed(3)} ms/step (incl. reading each id), graph ${JSON.stringify(results[mode].stats)}, first tokens ${toks.slice(0, 8).join(',')}`);
  dec.dispose();
}
/**
 * Per-phase times of the last traced fused step, each stage's mean over layers: the span (first block's start to
 * the last block's end), and per block (means over blocks) the time to its input (norm or load), its products
 * (the weight stream), the rest (sums over warps, stores), and its wait at the barrier after the phase.
 */
function traceSummary() {
  const t = decodeStepTrace(backendFor(model.device));
  if (!t) { console.log('trace: none (NBX_DECODE_STEP_TRACE=1 and the CUDA kernel needed)'); return; }
  const { phases, grid: G, marks: M, ns } = t;
  const at = (ph, e, b) => Number(ns[(M * ph + e) * G + b]);
  const stats = {};
  let t0 = Infinity, t1 = 0;
  for (let ph = 0; ph < phases; ph++) {
    let s0 = Infinity, e1 = 0, input = 0, prod = 0, rest = 0, wait = 0;
    for (let b = 0; b < G; b++) {
      s0 = Math.min(s0, at(ph, 0, b)); e1 = Math.max(e1, at(ph, M - 1, b));
      input += at(ph, 1, b) - at(ph, 0, b); prod += at(ph, 2, b) - at(ph, 1, b); rest += at(ph, M - 1, b) - at(ph, 2, b);
      if (ph + 1 < phases) wait += at(ph + 1, 0, b) - at(ph, M - 1, b);
    }
    t0 = Math.min(t0, s0); t1 = Math.max(t1, e1);
    const stage = ph === phases - 1 ? 'F lm_head' : ['A qkv', 'B attention', 'C o_proj', 'D gate_up', 'E down'][ph % 5];
    const x = (stats[stage] ??= { n: 0, span: 0, input: 0, prod: 0, rest: 0, wait: 0 });
    x.n++; x.span += e1 - s0; x.input += input / G; x.prod += prod / G; x.rest += rest / G; x.wait += wait / G;
  }
  console.log(`trace: step ${((t1 - t0) / 1e3).toFixed(1)} µs over ${phases} phases, grid ${G}`);
  const us = (v, n) => (v / n / 1e3).toFixed(2);
  for (const [k, x] of Object.entries(stats)) {
    console.log(`trace ${k.padEnd(12)}: span ${us(x.span, x.n)} µs; per block: input ${us(x.input, x.n)}, products ${us(x.prod, x.n)}, rest ${us(x.rest, x.n)}, barrier wait ${us(x.wait, x.n)} µs; ×${x.n}`);
  }
}

const ref = results.off ?? Object.values(results)[0];
let bad = 0;
for (const [mode, r] of Object.entries(results)) {
  if (r === ref) continue;
  // the first step's inputs are equal in every mode (the prompt ran op by op): its logits compare directly
  let d0 = 0, m0 = 0, arg = [0, 0];
  for (let i = 0; i < r.first0.length; i++) {
    d0 = Math.max(d0, Math.abs(r.first0[i] - ref.first0[i])); m0 = Math.max(m0, Math.abs(ref.first0[i]));
    if (r.first0[i] > r.first0[arg[0]]) arg[0] = i;
    if (ref.first0[i] > ref.first0[arg[1]]) arg[1] = i;
  }
  console.log(`${mode}: first step's logits max |diff| ${d0.toExponential(2)} (max |logit| ${m0.toFixed(3)}); argmax ${arg[0]} (${r.first0[arg[0]]}) vs ${arg[1]} (${ref.first0[arg[1]]}); the reference's logit at ${arg[0]}: ${ref.first0[arg[0]]}`);
  let same = 0; while (same < N * B && r.toks[same] === ref.toks[same]) same++; // row-major: step s, row b at s·B + b
  same = Math.floor(same / B);
  let md = 0, mx = 0;
  if (same === N) for (let i = 0; i < r.logits.length; i++) { md = Math.max(md, Math.abs(r.logits[i] - ref.logits[i])); mx = Math.max(mx, Math.abs(ref.logits[i])); }
  const ok = same === N;
  if (!ok) bad++;
  console.log(`${mode} vs ${ref === results.off ? 'off' : 'first'}: tokens equal for ${same}/${N} steps${same === N ? `, last logits max |diff| ${md.toExponential(2)} (max |logit| ${mx.toFixed(3)})` : ` (first difference at step ${same}: ${r.toks.slice(same * B, same * B + B)} vs ${ref.toks.slice(same * B, same * B + B)})`} ${ok ? 'PASS' : 'DIFFER'}`);
}
process.exit(bad ? 1 : 0);
