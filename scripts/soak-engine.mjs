#!/usr/bin/env node
// Soak test of the serving engine (src/generation/engine.ts) and its paged KV cache (issues #19, #22):
// --steps engine steps (default 10,000) with requests joining and leaving at random (random prompt
// and output lengths, greedy and seeded sampling, a --cancel share cancelled mid-stream), then:
//  - memory: the paged pools' backed blocks and mapped bytes, and on CUDA the caching allocator's
//    reserved bytes plus the VMM-mapped bytes (nbx.cuda.memory_stats), must not grow after the warm-up
//    (--warm steps, default 30% of --steps: the caching allocator adds a segment when a new mix of
//    prompt lengths and batch sizes first meets, seen up to step ~2,000 of 10,000 on an H200) to the end;
//  - isolation: --verify requests (all, or a random sample of N) run again, each alone in an engine of
//    its own with the same seed: the tokens must be the same (a cancelled one: its prefix), so no
//    sequence read another's pages or was changed by what it was batched with.
// Exit 0 = PASS. One progress line per 1,000 steps, a summary at the end (--json FILE for the numbers).
//
//   node scripts/soak-engine.mjs [--model DIR | --random] [--device cpu|cuda] [--dtype float32]
//        [--steps 10000] [--warm N] [--max-batch 8] [--block-size 16] [--kv-blocks N] [--prefill-chunk 64]
//        [--prompt 1:32] [--output 1:48] [--cancel 0.1] [--verify all|N] [--seed 1] [--json FILE]
//        [--mixed] [--graphs on|off]
// --mixed: the engine's mixed steps with device sampling (the CUDA default; opt-in elsewhere); --graphs:
// their replay (CUDA graphs; CPU step recordings) on or off (default: the engine's, on for CUDA).
//
// Default model: the embedded one (`nbx generate` without --model); --random: a tiny random Llama
// (2 layers, hidden 64, GQA 4/2, vocab 256). Build first (`npm run build`).

import { parseArgs } from 'node:util';
import { writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { hostname } from 'node:os';

const here = dirname(fileURLToPath(import.meta.url));
const dist = join(here, '..', 'dist', 'src');
const nbx = await import(join(dist, 'index.js'));
const { Engine } = await import(join(dist, 'generation', 'engine.js'));
const { defaultModelDir } = await import(join(dist, 'cli', 'generate.js'));

const { values: A } = parseArgs({ options: {
  model: { type: 'string' }, random: { type: 'boolean', default: false }, device: { type: 'string', default: 'cpu' }, dtype: { type: 'string', default: 'float32' },
  steps: { type: 'string', default: '10000' }, warm: { type: 'string' }, 'max-batch': { type: 'string', default: '8' },
  'block-size': { type: 'string', default: '16' }, 'kv-blocks': { type: 'string' }, 'prefill-chunk': { type: 'string', default: '64' },
  prompt: { type: 'string', default: '1:32' }, output: { type: 'string', default: '1:48' }, cancel: { type: 'string', default: '0.1' },
  verify: { type: 'string', default: 'all' }, seed: { type: 'string', default: '1' }, json: { type: 'string' },
  mixed: { type: 'boolean', default: false }, graphs: { type: 'string' },
} });

const STEPS = Number(A.steps), WARM = A.warm !== undefined ? Number(A.warm) : Math.floor(STEPS * 0.3);
const range = (s) => { const [a, b] = s.split(':').map(Number); return [a, b ?? a]; };
const [pMin, pMax] = range(A.prompt), [oMin, oMax] = range(A.output);
// a seeded PRNG (mulberry32): the run is the same every time
let rs = Number(A.seed) >>> 0;
const rnd = () => { rs = (rs + 0x6d2b79f5) >>> 0; let t = rs; t = Math.imul(t ^ (t >>> 15), t | 1); t ^= t + Math.imul(t ^ (t >>> 7), t | 61); return ((t ^ (t >>> 14)) >>> 0) / 2 ** 32; };
const rint = (a, b) => a + Math.floor(rnd() * (b - a + 1));

const TINY = {
  architectures: ['LlamaForCausalLM'], model_type: 'llama', hidden_size: 64, intermediate_size: 128, num_hidden_layers: 2,
  num_attention_heads: 4, num_key_value_heads: 2, head_dim: 16, vocab_size: 256, max_position_embeddings: 512,
  rms_norm_eps: 1e-5, rope_theta: 10000, hidden_act: 'silu', tie_word_embeddings: false, bos_token_id: 1, eos_token_id: 2,
};
const model = A.random
  ? nbx.models.fromConfig(TINY, { device: A.device, dtype: A.dtype, seed: 3, std: 0.3 })
  : await nbx.models.load(A.model ?? defaultModelDir(), { device: A.device, dtype: A.dtype });
const vocab = model.config.vocab_size;
const name = A.random ? 'tiny random llama' : (A.model ?? 'embedded nbx-kjv');
const engineOpts = { maxBatch: Number(A['max-batch']), blockSize: Number(A['block-size']), prefillChunk: Number(A['prefill-chunk']), ...(A['kv-blocks'] ? { kvBlocks: Number(A['kv-blocks']) } : {}),
  ...(A.mixed ? { sampling: 'device', mixedSteps: true } : {}), ...(A.graphs ? { graphs: A.graphs === 'on' } : {}) };
const engine = new Engine(model, engineOpts);
const cuda = model.device.type === 'cuda';

function memory() {
  const kv = engine.kvMemory();
  const m = { kvBacking: kv.backing, kvCapacityBlocks: kv.capacityBlocks, kvMappedBytes: kv.mappedBytes, rssBytes: process.memoryUsage().rss };
  if (cuda) {
    const s = nbx.cuda.memory_stats();
    Object.assign(m, { cudaReservedBytes: s.reservedBytes, vmmMappedBytes: s.vmmMappedBytes ?? 0, vmmReservedBytes: s.vmmReservedBytes ?? 0 });
  }
  return m;
}
const mib = (b) => (b / 2 ** 20).toFixed(1);

console.log(`soak-engine: ${name} on ${model.device} ${A.dtype}, ${STEPS} steps (warm-up ${WARM}), ${JSON.stringify(engineOpts)}, prompts ${A.prompt}, outputs ${A.output}, cancel ${A.cancel}, host ${hostname()}`);

const records = [];
let inFlight = 0, submitted = 0, errors = 0;
const errorKinds = {};
const t0 = performance.now();

function makeRequest() {
  const plen = rint(pMin, pMax);
  const greedy = rnd() < 0.4;
  const req = {
    prompt: Array.from({ length: plen }, () => rint(3, vocab - 1)),
    max_new_tokens: rint(oMin, oMax),
    ...(greedy ? { temperature: 0 } : { temperature: [0.7, 1, 1.3][rint(0, 2)], seed: rint(0, 1e9), ...(rnd() < 0.5 ? { top_k: rint(1, 50), top_p: 0.5 + rnd() / 2 } : {}) }),
    eos_token_id: rnd() < 0.8 ? [] : undefined,
  };
  const cancelAt = rnd() < Number(A.cancel) ? rint(1, req.max_new_tokens) : null;
  return { req, cancelAt };
}

async function drive({ req, cancelAt }) {
  const rec = { req, cancelAt, tokens: null, finish: null };
  records.push(rec);
  inFlight++; submitted++;
  try {
    const s = engine.submit(req);
    let n = 0;
    for await (const _ of s) { if (cancelAt !== null && ++n >= cancelAt) s.cancel(); }
    const r = await s.result;
    rec.tokens = r.tokens; rec.finish = r.finish_reason;
  } catch (e) {
    errors++; const k = e?.constructor?.name ?? 'Error'; errorKinds[k] = (errorKinds[k] ?? 0) + 1;
    rec.error = String(e?.message ?? e);
  } finally { inFlight--; }
}

let warmMem = null, lastLog = 0;
// when the device memory last grew (step, bytes): reported, so a late growth shows where it happened
let peakSeen = 0, lastGrowth = null;
const footprint = (m) => (m.cudaReservedBytes ?? 0) + (m.vmmMappedBytes ?? 0) + m.kvMappedBytes;
const running = [];
// keep the batch changing: a target load drifts between 1 and 2·maxBatch; new requests come at random
let target = engineOpts.maxBatch;
for (;;) {
  const st = engine.stats();
  if (st.steps >= STEPS) break;
  if (warmMem === null && st.steps >= WARM) warmMem = memory();
  if (st.steps % 50 === 0) {
    const f = footprint(memory());
    if (f > peakSeen) { if (peakSeen > 0) lastGrowth = { step: st.steps, from: peakSeen, to: f }; peakSeen = f; }
  }
  if (rnd() < 0.05) target = rint(1, 2 * engineOpts.maxBatch);
  while (inFlight < target && rnd() < 0.5) running.push(drive(makeRequest()));
  if (st.steps - lastLog >= 1000) {
    lastLog = st.steps - (st.steps % 1000);
    const m = memory();
    console.log(`step ${st.steps}: running ${st.running}, waiting ${st.waiting}, kv blocks ${st.kv_blocks_used}/${st.kv_blocks_total} (backed ${m.kvCapacityBlocks}), tokens out ${st.tokens_out}, ${(st.tokens_out / ((performance.now() - t0) / 1000)).toFixed(0)} tok/s` +
      (cuda ? `, cuda reserved ${mib(m.cudaReservedBytes)} MiB + vmm mapped ${mib(m.vmmMappedBytes)} MiB` : `, kv ${mib(m.kvMappedBytes)} MiB, rss ${mib(m.rssBytes)} MiB`));
  }
  await new Promise((r) => setImmediate(r));
}
await Promise.all(running);
warmMem ??= memory();
const endStats = engine.stats(), endMem = memory();
const soakS = (performance.now() - t0) / 1000;
console.log(`soak: ${submitted} requests, ${endStats.steps} steps, ${endStats.tokens_out} tokens in ${soakS.toFixed(1)} s (${(endStats.tokens_out / soakS).toFixed(0)} tok/s), errors ${errors} ${JSON.stringify(errorKinds)}`);
const gs = engine.graphStats();
if (engine.mixedSteps) console.log(`steps: mixed (${engine.rowBuckets.join('/')} rows), graphs ${gs.enabled ? 'on' : 'off'}: ${gs.captures} captured, ${gs.replays} replayed, ${gs.eagerSteps} eager${gs.fallbackReason ? `; fell back to eager steps: ${gs.fallbackReason}` : ''}`);

// memory: flat after warm-up
const grew = [];
if (endMem.kvCapacityBlocks > warmMem.kvCapacityBlocks) grew.push(`kv pool ${warmMem.kvCapacityBlocks} -> ${endMem.kvCapacityBlocks} blocks`);
if (cuda) {
  if (endMem.cudaReservedBytes > warmMem.cudaReservedBytes) grew.push(`cuda reserved ${mib(warmMem.cudaReservedBytes)} -> ${mib(endMem.cudaReservedBytes)} MiB`);
  if (endMem.vmmMappedBytes > warmMem.vmmMappedBytes) grew.push(`vmm mapped ${mib(warmMem.vmmMappedBytes)} -> ${mib(endMem.vmmMappedBytes)} MiB`);
}
const leftover = endStats.running + endStats.waiting + endStats.kv_blocks_used;
console.log(`memory at warm-up / end: kv ${warmMem.kvBacking} ${warmMem.kvCapacityBlocks}/${endMem.kvCapacityBlocks} blocks, ${mib(warmMem.kvMappedBytes)}/${mib(endMem.kvMappedBytes)} MiB` +
  (cuda ? `; cuda reserved ${mib(warmMem.cudaReservedBytes)}/${mib(endMem.cudaReservedBytes)} MiB; vmm mapped ${mib(warmMem.vmmMappedBytes)}/${mib(endMem.vmmMappedBytes)} MiB, reserved ${mib(endMem.vmmReservedBytes)} MiB` : '') +
  `; rss ${mib(warmMem.rssBytes)}/${mib(endMem.rssBytes)} MiB (informational); after the run: running+waiting+blocks used = ${leftover}` +
  (lastGrowth ? `; device memory last grew at step ~${lastGrowth.step} (${mib(lastGrowth.from)} -> ${mib(lastGrowth.to)} MiB)` : '; device memory never grew after the first step'));

// isolation: each verified request alone, same seed
const done = records.filter((r) => r.tokens !== null);
let pick = done;
if (A.verify !== 'all') {
  const n = Math.min(Number(A.verify), done.length);
  pick = [...done].sort(() => rnd() - 0.5).slice(0, n);
}
// the same engine settings (a GPU engine pads every decode step to maxBatch rows); one request at a time
const solo = new Engine(model, engineOpts);
const mismatches = [];
const tv = performance.now();
for (const rec of pick) {
  const r = await solo.submit(rec.req).result;
  const want = rec.finish === 'cancelled' ? r.tokens.slice(0, rec.tokens.length) : r.tokens;
  if (JSON.stringify(want) !== JSON.stringify(rec.tokens)) {
    const at = rec.tokens.findIndex((t, i) => t !== want[i]);
    mismatches.push(`prompt ${rec.req.prompt.length} tokens, ${rec.req.temperature === 0 ? 'greedy' : `seed ${rec.req.seed}`}: first difference at token ${at} of ${rec.tokens.length} (${rec.finish})`);
  }
}
await solo.close();
console.log(`isolation: ${pick.length} of ${done.length} requests run alone again in ${((performance.now() - tv) / 1000).toFixed(1)} s: ${mismatches.length} differ${mismatches.length ? `\n  ${mismatches.slice(0, 8).join('\n  ')}` : ''}`);
await engine.close();

const pass = grew.length === 0 && mismatches.length === 0 && errors === 0 && leftover === 0 && endStats.steps >= STEPS;
if (grew.length) console.log(`memory grew after warm-up: ${grew.join('; ')}`);
console.log(pass ? 'PASS' : 'FAIL');
if (A.json) writeFileSync(A.json, JSON.stringify({ name, device: String(model.device), dtype: A.dtype, engineOpts, steps: endStats.steps, requests: submitted, tokens: endStats.tokens_out, seconds: soakS, warmMem, endMem, grew, verified: pick.length, mismatches, errors: errorKinds, pass }, null, 2));
model.dispose();
process.exit(pass ? 0 : 1);
