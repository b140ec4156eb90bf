#!/usr/bin/env node
// Decode soak: many generations of varying batch size on one model, so decode steps replay CUDA graphs
// and static decoders are made, kept and dropped (two are kept per model: a third batch size evicts
// one, whose graph and pool are freed), and checks that the device allocator's reserved memory is flat
// after the warm-up rounds. Exit 1 when it grows. Build first (`npm run build`).
// --isolation N: every Nth greedy generation of more than one row runs again with row 0's prompt
// replaced, and every other row's tokens must be the same (a row that read another row's cache would
// change); exit 1 when one differs. The reruns' steps count towards --steps.
//
//   node scripts/soak-decode.mjs [--device cuda] [--steps 10000] [--shape tiny|tinyllama] [--isolation N] [--json FILE]
import { parseArgs } from 'node:util';
import { writeFileSync } from 'node:fs';

const { values } = parseArgs({ options: {
  device: { type: 'string', default: 'cuda' }, steps: { type: 'string', default: '10000' }, shape: { type: 'string', default: 'tiny' }, json: { type: 'string' },
  isolation: { type: 'string', default: '0' },
} });
const nbx = await import('../dist/src/index.js');
const SHAPES = {
  tiny: { hidden_size: 256, intermediate_size: 512, num_hidden_layers: 4, num_attention_heads: 8, num_key_value_heads: 2, vocab_size: 1024 },
  tinyllama: { hidden_size: 2048, intermediate_size: 5632, num_hidden_layers: 22, num_attention_heads: 32, num_key_value_heads: 4, vocab_size: 32000 },
};
const device = values.device;
const config = { model_type: 'llama', max_position_embeddings: 4096, rms_norm_eps: 1e-5, hidden_act: 'silu', tie_word_embeddings: false, ...SHAPES[values.shape] };
const model = nbx.models.fromConfig(config, { device, dtype: device === 'cpu' ? 'float32' : 'bfloat16', seed: 0 });
const reserved = () => (device === 'cuda' ? nbx.cuda.memoryStats().reservedBytes : device === 'webgpu' ? nbx.webgpu.memoryStats().reservedBytes : process.memoryUsage().rss);
const MiB = 2 ** 20;
const target = Number(values.steps);
// batch sizes and lengths cycle: a batch "joins" (a new size, a new static decoder) and another "leaves"
const plan = [[1, 96], [4, 64], [2, 128], [8, 48], [1, 160], [4, 96]];
let steps = 0, round = 0, seed = 1;
const samples = [];
const isolateEvery = Number(values.isolation);
let isoChecked = 0, isoDiffer = 0, greedyMulti = 0;
const randomIds = (n) => Array.from({ length: n }, () => { seed = (seed * 1103515245 + 12345) % 2 ** 31; return 1 + (seed % (config.vocab_size - 1)); });
const t0 = performance.now();
while (steps < target) {
  const [B, N] = plan[round % plan.length];
  const P = 8 + (round % 5) * 8;
  const rows = Array.from({ length: B }, () => randomIds(P));
  const ids = nbx.tensor(rows, { dtype: 'int64' });
  const greedy = round % 3 !== 2;
  const out = await model.generate(ids, { max_new_tokens: N, do_sample: !greedy, seed: round, eos_token_id: null });
  steps += N - 1;
  if (isolateEvery > 0 && greedy && B > 1 && greedyMulti++ % isolateEvery === 0) {
    // the same batch with row 0's prompt replaced: rows 1.. must not change
    const ids2 = nbx.tensor([randomIds(P), ...rows.slice(1)], { dtype: 'int64' });
    const out2 = await model.generate(ids2, { max_new_tokens: N, do_sample: false, eos_token_id: null });
    steps += N - 1;
    const a = out.tolist(), b = out2.tolist();
    const bad = a.slice(1).filter((r, i) => r.join() !== b[i + 1].join()).length;
    isoChecked += B - 1; isoDiffer += bad;
    if (bad) console.log(`isolation: round ${round} (batch ${B}, ${N} tokens): ${bad} of ${B - 1} rows changed when row 0's prompt changed`);
    out2.dispose(); ids2.dispose();
  }
  out.dispose(); ids.dispose();
  round++;
  if (round % plan.length === 0) {
    await (device === 'cuda' ? nbx.cuda.synchronize() : Promise.resolve());
    samples.push({ round, steps, reservedMiB: reserved() / MiB });
    console.log(`round ${String(round).padStart(4)}  steps ${String(steps).padStart(6)}  reserved ${(reserved() / MiB).toFixed(1)} MiB  ${((performance.now() - t0) / 1000).toFixed(1)} s`);
  }
}
// flat: after the first full cycle of (batch, length, prompt) combinations (30 generations: every
// decoder and prompt shape made once), reserved never exceeds that point by more than 5% + 2 MiB
const warm = samples.findIndex((s) => s.round >= 30);
const base = samples[warm >= 0 ? warm : samples.length - 1]?.reservedMiB ?? 0;
const last = samples[samples.length - 1]?.reservedMiB ?? 0;
const peak = Math.max(...samples.slice(Math.max(warm, 0)).map((s) => s.reservedMiB), base);
const flat = peak <= base * 1.05 + 2, isolated = isoDiffer === 0;
const ok = flat && isolated;
if (isolateEvery > 0) console.log(`isolation: ${isoChecked - isoDiffer} of ${isoChecked} rows unchanged when another row's prompt changed: ${isolated ? 'isolated' : 'ROWS MIX'}`);
console.log(`decode soak: ${steps} steps in ${round} generations, reserved after warm-up ${base.toFixed(1)} MiB, at the end ${last.toFixed(1)} MiB, peak ${peak.toFixed(1)} MiB: ${flat ? 'flat' : 'GROWS'} (${((performance.now() - t0) / 1000).toFixed(1)} s)`);
if (values.json) writeFileSync(values.json, JSON.stringify({ steps, rounds: round, samples, flat, isolation: { checked: isoChecked, differ: isoDiffer }, ok }, null, 1));
model.dispose();
process.exitCode = ok ? 0 : 1;
