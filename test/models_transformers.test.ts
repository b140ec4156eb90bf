// nbx.models against transformers: every fixture folder under test/fixtures/models/<case>/ holds a tiny
// random model saved by transformers (float32) and what transformers computed with it
// (expected.safetensors: input_ids with row 0 left-padded, attention_mask, logits, greedy, and
// logits_bf16_cuda from a bf16 run on a GPU). Checked here: float32 logits on the CPU within 1e-4 of
// the logits' scale, greedy decoding with the KV cache token for token, the same on WebGPU for a few
// cases, and on CUDA float32 and bf16 (skipped, saying so, where the device is missing).

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import * as nbx from '../src/index.js';
import type { Tensor } from '../src/tensor/tensor.js';
import { probeCuda } from '../src/backend/cuda/runtime/libs.js';
import { greedy } from './models_util.js';

const ROOT = join(process.cwd(), 'test', 'fixtures', 'models');
const cases = existsSync(ROOT) ? readdirSync(ROOT).filter((c) => existsSync(join(ROOT, c, 'expected.safetensors'))).sort() : [];
if (!cases.length) console.log(`# SKIP transformers model fixtures: none under ${ROOT}`);

/** Float32 on the CPU: max |Δ| / max |logits| (the brief's bound). */
const F32_TOL = 1e-4;
/**
 * bf16 against transformers' own bf16 CUDA run: both round every layer's output to bf16 (8 mantissa
 * bits, relative step 2^-8 ≈ 0.4%) in different orders and with different kernels, so two correct bf16
 * runs differ by a few of those steps: measured 1.6-2.9% of the logits' scale for the dense families
 * (nbx's CPU bf16 run against transformers' CUDA one). 5% bounds that with room and still catches a wrong
 * layer, which moves logits by their own scale. MoE routers are the exception: where two experts' router
 * probabilities are within one bf16 step, rounding picks a different expert and the logits move by tens of
 * percent; transformers' bf16 run is then as far from its own float32 logits (measured 19-42%). So the
 * bound is 5% or 1.5 × transformers' own bf16-vs-float32 distance, whichever is larger.
 */
const BF16_TOL = 5e-2;

/** Checks bf16 logits against transformers' bf16 run (see BF16_TOL); returns the errors for the log. */
function checkBf16(c: string, where: string, got: Tensor, e: Expected): string {
  const err = logitErrors(got, e.bf16!, e.mask).real;
  const own = logitErrors(e.bf16!, e.logits, e.mask).real;
  const bound = Math.max(BF16_TOL, 1.5 * own);
  assert.ok(err < bound, `${c}: ${where} bf16 logits differ from transformers' bf16 by ${err} of their scale (bound ${bound})`);
  return `# ${c}: ${where} bf16 vs transformers' cuda bf16 ${err.toExponential(2)} (transformers' bf16 vs its float32 ${own.toExponential(2)})`;
}
const WEBGPU_CASES = new Set(['llama', 'qwen3', 'mixtral', 'gemma2', 'phi3']);

interface Expected {
  /** position_ids: what generate() derives from the mask, which the fixture's forward was given. */
  ids: Tensor; mask: Tensor; pos: Tensor | null; logits: Tensor; greedy: Tensor | null; bf16: Tensor | null; json: Record<string, unknown>;
}

async function expected(c: string): Promise<Expected> {
  const { tensors } = await nbx.io.loadSafetensors(join(ROOT, c, 'expected.safetensors'));
  const jsonPath = join(ROOT, c, 'expected.json');
  const json = existsSync(jsonPath) ? JSON.parse(readFileSync(jsonPath, 'utf8')) as Record<string, unknown> : {};
  return { ids: tensors.input_ids!, mask: tensors.attention_mask!.to('int64'), pos: tensors.position_ids?.to('int64') ?? null, logits: tensors.logits!, greedy: tensors.greedy ?? null, bf16: tensors.logits_bf16_cuda ?? null, json };
}

/** EOS ids and the pad id transformers' generate used (generation_config.json, else config.json). */
function eosAndPad(model: nbx.models.CausalLMModel): { eos: number[]; pad: number } {
  const g = model.generationConfig as Record<string, unknown>, c = model.config as Record<string, unknown>;
  const e = g.eos_token_id ?? c.eos_token_id ?? [];
  const eos = (Array.isArray(e) ? e : [e]).filter((x) => typeof x === 'number') as number[];
  const pad = (g.pad_token_id ?? c.pad_token_id ?? eos[0] ?? 0) as number;
  return { eos, pad };
}

/** Compares the real (unpadded) positions, and reports the padded ones separately. */
function logitErrors(got: Tensor, want: Tensor, mask: Tensor): { real: number; padded: number } {
  const real = mask.ne(0).unsqueeze(-1);
  const scale = Number(want.to('float32').mul(real).abs().max().item());
  const diff = got.to('float32').sub(want.to('float32')).abs();
  return { real: Number(diff.mul(real).max().item()) / scale, padded: Number(diff.mul(real.logical_not()).max().item()) / scale };
}

for (const c of cases) {
  test(`transformers ${c}: float32 logits on the CPU and greedy decoding with the cache`, async () => {
    const e = await expected(c);
    const model = await nbx.models.load(join(ROOT, c));
    try {
      const logits = model.forward(e.ids, { attention_mask: e.mask, position_ids: e.pos });
      const err = logitErrors(logits, e.logits, e.mask);
      console.log(`# ${c}: cpu float32 max|Δ|/max|logits| real tokens ${err.real.toExponential(2)}, padded positions ${err.padded.toExponential(2)}`);
      // padded positions attend to nothing; transformers' values there are meaningless (expected.json says so)
      assert.ok(err.real < F32_TOL, `${c}: logits differ by ${err.real} of their scale`);
      if (e.greedy) {
        const T = e.ids.shape[1]!, n = e.greedy.shape[1]! - T;
        const { eos, pad } = eosAndPad(model);
        const got = greedy(model, e.ids, e.mask, n, eos, pad);
        assert.deepEqual(got, (e.greedy.tolist() as number[][]).map((r) => r.map(Number)), `${c}: greedy tokens`);
      }
    } finally { model.dispose(); }
  });
}

for (const c of cases) {
  test(`transformers ${c}: bf16 on the CPU next to transformers' bf16 CUDA run`, async () => {
    const e = await expected(c);
    if (!e.bf16) return;
    const model = await nbx.models.load(join(ROOT, c), { dtype: 'bfloat16' });
    try {
      const got = model.forward(e.ids, { attention_mask: e.mask, position_ids: e.pos });
      assert.equal(got.dtype, nbx.bfloat16);
      console.log(checkBf16(c, 'cpu', got, e));
    } finally { model.dispose(); }
  });
}

const webgpu = await nbx.webgpu.probe();
const webgpuSkip = webgpu.available ? false : `no WebGPU adapter (${webgpu.reason})`;
if (webgpuSkip && cases.length) console.log(`# SKIP webgpu model tests: ${webgpuSkip}`);
for (const c of cases.filter((x) => WEBGPU_CASES.has(x))) {
  test(`transformers ${c}: float32 logits on WebGPU`, { skip: webgpuSkip }, async () => {
    const e = await expected(c);
    const model = await nbx.models.load(join(ROOT, c), { device: 'webgpu' });
    try {
      assert.equal(model.dtype, nbx.float32);
      const logits = await model.forward(e.ids, { attention_mask: e.mask, position_ids: e.pos }).cpu();
      const err = logitErrors(logits, e.logits, e.mask);
      console.log(`# ${c}: webgpu float32 real ${err.real.toExponential(2)}, padded ${err.padded.toExponential(2)}`);
      assert.ok(err.real < F32_TOL, `${c}: webgpu logits differ by ${JSON.stringify(err)}`);
      // the KV cache on the device: all but the last token, then the last one alone
      const T = e.ids.shape[1]!;
      const cache = model.newCache({ batch: 2, maxLength: 4 });
      try {
        const cut = (t: Tensor, a: number, b: number): Tensor => t.slice(1, a, b).contiguous();
        model.forward(cut(e.ids, 0, T - 1), { attention_mask: cut(e.mask, 0, T - 1), position_ids: e.pos && cut(e.pos, 0, T - 1), cache }).dispose();
        const last = await model.forward(cut(e.ids, T - 1, T), { attention_mask: e.mask, position_ids: e.pos && cut(e.pos, T - 1, T), cache }).cpu();
        const step = logitErrors(last, e.logits.slice(1, T - 1, T), cut(e.mask, T - 1, T));
        assert.ok(step.real < F32_TOL, `${c}: webgpu decode step with the cache differs by ${step.real}`);
      } finally { cache.dispose(); }
    } finally { model.dispose(); }
  });
}

const cuda = probeCuda();
const cudaSkip = cuda.available ? false : `no CUDA device (${cuda.reason})`;
if (cudaSkip && cases.length) console.log(`# SKIP cuda model tests: ${cudaSkip}`);
for (const c of cases) {
  test(`transformers ${c}: CUDA float32 logits and greedy; bf16 logits next to transformers' bf16 run`, { skip: cudaSkip }, async () => {
    const e = await expected(c);
    const f32 = await nbx.models.load(join(ROOT, c), { device: 'cuda', dtype: 'float32' });
    try {
      const err = logitErrors(await f32.forward(e.ids, { attention_mask: e.mask, position_ids: e.pos }).cpu(), e.logits, e.mask);
      console.log(`# ${c}: cuda float32 real ${err.real.toExponential(2)}, padded ${err.padded.toExponential(2)}`);
      assert.ok(err.real < F32_TOL, `${c}: cuda float32 logits differ by ${JSON.stringify(err)}`);
      if (e.greedy) {
        const T = e.ids.shape[1]!, n = e.greedy.shape[1]! - T;
        const { eos, pad } = eosAndPad(f32);
        assert.deepEqual(greedy(f32, e.ids, e.mask, n, eos, pad), (e.greedy.tolist() as number[][]).map((r) => r.map(Number)), `${c}: cuda greedy tokens`);
      }
    } finally { f32.dispose(); }
    if (!e.bf16) return;
    const bf = await nbx.models.load(join(ROOT, c), { device: 'cuda', dtype: 'bfloat16' });
    try {
      const got = await bf.forward(e.ids, { attention_mask: e.mask, position_ids: e.pos }).cpu();
      assert.equal(got.dtype, nbx.bfloat16);
      console.log(checkBf16(c, 'cuda', got, e));
    } finally { bf.dispose(); }
  });
}

test('model fixtures: the folder is there or the skip is announced', () => {
  assert.ok(cases.length > 0 || !existsSync(ROOT) || readdirSync(ROOT).length === 0);
});

