// nbx.llm.fused_decode_step (a decode step of B sequences in one call): on the CPU its composite equals the
// static decoder's op-by-op step; on CUDA the whole-step kernel (src/backend/cuda/kernels/decode_step.ts),
// in one launch and launched phase by phase, gives the op-by-op step's greedy tokens, logits within
// bfloat16 rounding, and the same cache contents, at batch 1 and batch 3; bad ids are IndexErrors. The CUDA tests skip without a
// CUDA device (they also run on the emulator: node test/gen/cuda_emu.mjs node --test dist/test/decode_step.test.js,
// where NBX_DECODE_STEP=phases is the mode that can run).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import * as nbx from '../src/index.js';
import { StaticDecoder, decodeStepMode } from '../src/models/static_decode.js';
import type { CausalLMModel } from '../src/models/causal_lm.js';
import { IndexError, ShapeError, ValueError } from '../src/errors.js';
import { skip } from './cuda_compare.js';
import { decodeStepLaunches } from '../src/backend/cuda/kernels/decode_step.js';

const CONFIG = {
  model_type: 'llama', max_position_embeddings: 256, rms_norm_eps: 1e-5, hidden_act: 'silu', tie_word_embeddings: false,
  hidden_size: 64, intermediate_size: 128, num_hidden_layers: 2, num_attention_heads: 4, num_key_value_heads: 2, vocab_size: 256,
};
const PROMPT = [3, 17, 99, 5, 200, 42, 7];
/** Three different prompts of PROMPT's length (batch 3: the kernel's MMA columns 0-2, rows of odd count). */
const PROMPTS = [PROMPT, [9, 1, 250, 33, 64, 128, 2], [77, 77, 12, 180, 5, 6, 240]];

/** The step's tensors for the op from a static decoder whose cache holds the prompts (the decoder's own inputs are private). */
function opArgs(model: CausalLMModel, dec: StaticDecoder, tokens: number[], at: number) {
  const dev = model.device, cap = dec.capacity, m = model.model;
  const layers = [...m.layers].map((l, i) => {
    const t = (l as unknown as { decodeStepTensors(eps: number): Record<string, nbx.Tensor> }).decodeStepTensors(1e-5)! as Record<string, nbx.Tensor> & { qkv: nbx.Tensor };
    const c = dec.cache.buffers(i);
    return { ...t, key_cache: c.keys, value_cache: c.values };
  });
  const B = tokens.length;
  const pos = nbx.tensor(tokens.map(() => [at]), { dtype: 'int64', device: dev });
  const rope = (m as unknown as { ropes: { full_attention: { forward(p: nbx.Tensor, max: number, dt: string, d: unknown, b: number): { cos: nbx.Tensor; sin: nbx.Tensor } } } }).ropes.full_attention;
  const { cos, sin } = rope.forward(pos, cap - 1, model.model.embed_tokens.weight.dt, dev, cap);
  return {
    ids: nbx.tensor(tokens.map((t) => [t]), { dtype: 'int64', device: dev }), index: nbx.tensor([at], { dtype: 'int64', device: dev }),
    notPadding: nbx.ones([B, cap], { dtype: 'bool', device: dev }), cos, sin, layers,
  };
}

/** The first `dec.batch` prompts of PROMPTS prefilled into the decoder's cache; each row's first token. */
async function prefill(model: CausalLMModel, dec: StaticDecoder): Promise<number[]> {
  const B = dec.batch;
  dec.begin(null, PROMPT.length);
  const out = model.forward(nbx.tensor(PROMPTS.slice(0, B), { dtype: 'int64', device: model.device }), { cache: dec.cache, logits_to_keep: 1 });
  const first = Array.from(await out.view([B, CONFIG.vocab_size]).argmax(1).data(), Number);
  out.dispose();
  return first;
}

test('fused_decode_step on the CPU (its composite) equals the static decoder\'s op-by-op step (batch 1 and 3)', async () => {
  const model = nbx.models.fromConfig(CONFIG, { device: 'cpu', dtype: 'float32', seed: 0 });
  try {
   for (const B of [1, 3]) {
    const a = new StaticDecoder(model, B, 32, true), b = new StaticDecoder(model, B, 32, true);
    const toks = await prefill(model, a);
    await prefill(model, b);
    const P = PROMPT.length;
    const ref = a.step(toks, toks.map(() => P));
    const args = opArgs(model, b, toks, P);
    const [logits, next] = nbx.llm.fused_decode_step(args.ids, args.index, args.notPadding, args.cos, args.sin, model.model.embed_tokens.weight, args.layers,
      (model.model.norm as unknown as { weight: nbx.Tensor }).weight, model.lm_head.weight, { heads: 4, kv_heads: 2, eps: 1e-5, scaling: 16 ** -0.5 }) as [nbx.Tensor, nbx.Tensor];
    assert.deepEqual(logits.shape, [B, 1, CONFIG.vocab_size]);
    assert.deepEqual(await logits.tolist(), await ref.logits.tolist());
    assert.deepEqual(await next.tolist(), await ref.next!.tolist());
    // the cache now holds the step's key at index P in both
    assert.deepEqual(await a.cache.buffers(1).keys.select(2, P).tolist(), await b.cache.buffers(1).keys.select(2, P).tolist());
    assert.throws(() => nbx.llm.fused_decode_step(args.ids, args.index, args.notPadding, args.cos, args.sin, model.model.embed_tokens.weight, args.layers.slice(0, 1).map((l) => ({ ...l, o: l.qkv })),
      (model.model.norm as unknown as { weight: nbx.Tensor }).weight, model.lm_head.weight, { heads: 4, kv_heads: 2, eps: 1e-5, scaling: 0.25 }), ShapeError);
    a.dispose(); b.dispose();
   }
  } finally { model.dispose(); }
});

test('fused_decode_step\'s composite with packed weights (int4 group 128, the lm_head too) equals the static decoder\'s op-by-op step', async () => {
  const model = nbx.models.fromConfig(CONFIG, { device: 'cpu', dtype: 'float32', seed: 0 });
  try {
    nbx.quant.quantize_(model, { scheme: 'int4', group_size: 32, skip: () => false });
    const a = new StaticDecoder(model, 1, 32, true), b = new StaticDecoder(model, 1, 32, true);
    const toks = await prefill(model, a);
    await prefill(model, b);
    const P = PROMPT.length;
    const ref = a.step(toks, toks.map(() => P));
    const args = opArgs(model, b, toks, P);
    assert.ok(args.layers.every((l) => !(l.qkv instanceof nbx.Tensor)), 'the layers\' projections are packed');
    const [logits, next] = nbx.llm.fused_decode_step(args.ids, args.index, args.notPadding, args.cos, args.sin, model.model.embed_tokens.weight, args.layers,
      (model.model.norm as unknown as { weight: nbx.Tensor }).weight, model.lm_head.quantized_weight!, { heads: 4, kv_heads: 2, eps: 1e-5, scaling: 16 ** -0.5 }) as [nbx.Tensor, nbx.Tensor];
    assert.deepEqual(await logits.tolist(), await ref.logits.tolist());
    assert.deepEqual(await next.tolist(), await ref.next!.tolist());
    a.dispose(); b.dispose();
  } finally { model.dispose(); }
});

test('NBX_DECODE_STEP: auto (unset), fused/on/phases, off/0; anything else is a ValueError naming the choices', () => {
  assert.equal(decodeStepMode({}), 'auto');
  assert.equal(decodeStepMode({ NBX_DECODE_STEP: 'phases' }), 'fused');
  assert.equal(decodeStepMode({ NBX_DECODE_STEP: 'OFF' }), 'off');
  assert.throws(() => decodeStepMode({ NBX_DECODE_STEP: 'fast' }), (e: unknown) => e instanceof ValueError && /auto, fused, phases, off/.test(e.message));
});

/** Greedy tokens (per step, per row) and last logits of `steps` static-decoder steps of `batch` rows on CUDA under NBX_DECODE_STEP=`mode`. */
async function decodeCuda(model: CausalLMModel, mode: string, steps: number, batch = 1): Promise<{ toks: number[][]; logits: number[]; keys: number[] }> {
  const was = process.env.NBX_DECODE_STEP;
  process.env.NBX_DECODE_STEP = mode;
  try {
    const dec = new StaticDecoder(model, batch, 32, true);
    let tok = await prefill(model, dec);
    const toks: number[][] = [];
    let logits: number[] = [];
    for (let s = 0; s < steps; s++) {
      const r = dec.step(tok, tok.map(() => PROMPT.length + s));
      tok = Array.from(await r.next!.data(), Number);
      toks.push(tok);
      if (s === steps - 1) logits = Array.from(await r.logits.float().data(), Number);
    }
    dec.checkErrors();
    const keys = Array.from(await dec.cache.buffers(1).keys.float().data(), Number);
    dec.dispose();
    return { toks, logits, keys };
  } finally { if (was === undefined) delete process.env.NBX_DECODE_STEP; else process.env.NBX_DECODE_STEP = was; }
}

test('CUDA decode_step kernel: the op-by-op step\'s tokens, logits and cache (bfloat16; batch 1 and 3; one launch and per phase)', { skip }, async () => {
  const model = nbx.models.fromConfig(CONFIG, { device: 'cuda', dtype: 'bfloat16', seed: 0 });
  try {
    for (const B of [1, 3]) {
      const off = await decodeCuda(model, 'off', 6, B);
      // the emulator runs blocks one after another: only the per-phase launches can run there
      const modes = process.env.NBX_EMU_DIR ? ['phases'] : ['fused', 'phases'];
      for (const mode of modes) {
        const launched = decodeStepLaunches();
        const r = await decodeCuda(model, mode, 6, B);
        assert.ok(decodeStepLaunches() > launched, `${mode}, batch ${B}: the whole-step kernel ran (not the op's composite)`);
        assert.deepEqual(r.toks, off.toks, `${mode}, batch ${B}: tokens`);
        const md = r.logits.reduce((m, v, i) => Math.max(m, Math.abs(v - off.logits[i]!)), 0);
        assert.ok(md <= 2e-2, `${mode}, batch ${B}: last logits differ by ${md}`);
        const kd = r.keys.reduce((m, v, i) => Math.max(m, Math.abs(v - off.keys[i]!)), 0);
        assert.ok(kd <= 2e-2, `${mode}, batch ${B}: layer 1's cached keys differ by ${kd}`);
      }
    }
  } finally { model.dispose(); }
});

/** A shape whose projections the kernel takes packed: K a multiple of 256 (int4's 128-byte items of 256 columns). */
const QCONFIG = { ...CONFIG, hidden_size: 256, intermediate_size: 512 };

/**
 * Each step's logits of `steps` static-decoder steps of `batch` rows under NBX_DECODE_STEP=`mode`, fed `feed[s]` at step s
 * (its own argmax where feed has no step): the paths compared on the same tokens, so that a near tie the two orders of
 * float sums break differently (a random tiny model has many) cannot send them down different sequences.
 */
async function stepLogits(model: CausalLMModel, mode: string, steps: number, batch: number, feed: number[][] = []): Promise<{ toks: number[][]; logits: number[][] }> {
  const was = process.env.NBX_DECODE_STEP;
  process.env.NBX_DECODE_STEP = mode;
  try {
    const dec = new StaticDecoder(model, batch, 32, true);
    let tok = await prefill(model, dec);
    const toks: number[][] = [], logits: number[][] = [];
    for (let s = 0; s < steps; s++) {
      if (feed[s]) tok = feed[s]!;
      const r = dec.step(tok, tok.map(() => PROMPT.length + s));
      logits.push(Array.from(await r.logits.float().data(), Number));
      tok = Array.from(await r.next!.data(), Number);
      toks.push(tok);
    }
    dec.checkErrors();
    dec.dispose();
    return { toks, logits };
  } finally { if (was === undefined) delete process.env.NBX_DECODE_STEP; else process.env.NBX_DECODE_STEP = was; }
}

test('CUDA decode_step kernel with packed weights (int8 with its lm_head; int4 group 128 symmetric with a bfloat16 lm_head; int4 with zero points, its lm_head too): the op-by-op step\'s logits, and its tokens where no near tie decides them', { skip }, async () => {
  const V = QCONFIG.vocab_size;
  for (const [scheme, symmetric, lmToo] of [['int8', true, true], ['int4', true, false], ['int4', false, true]] as const) {
    const model = nbx.models.fromConfig(QCONFIG, { device: 'cuda', dtype: 'bfloat16', seed: 1 });
    try {
      const r = nbx.quant.quantize_(model, { scheme, group_size: 128, symmetric, ...(lmToo ? { skip: () => false } : {}) });
      assert.ok(r.quantized.length >= (lmToo ? 9 : 8), `${scheme}: quantized ${r.quantized.join(', ')}`);
      for (const B of [1, 3]) {
        const off = await stepLogits(model, 'off', 4, B);
        const mode = process.env.NBX_EMU_DIR ? 'phases' : 'fused';
        const launched = decodeStepLaunches();
        const feed = [undefined, ...off.toks.slice(0, -1)] as number[][]; // step s + 1 fed the op-by-op step's argmax of step s
        const got = await stepLogits(model, mode, 4, B, feed);
        const what = `${scheme}${symmetric ? '' : ' with zero points'}, batch ${B}`;
        assert.ok(decodeStepLaunches() > launched, `${what}: the whole-step kernel ran (not the op's composite)`);
        for (let s = 0; s < 4; s++) {
          const a = got.logits[s]!, e = off.logits[s]!;
          const md = a.reduce((m, v, i) => Math.max(m, Math.abs(v - e[i]!)), 0);
          assert.ok(md <= 2e-2, `${what}, step ${s}: logits differ by ${md}`);
          for (let b = 0; b < B; b++) {
            const row = e.slice(b * V, (b + 1) * V), sorted = [...row].sort((x, y) => y - x);
            if (sorted[0]! - sorted[1]! > 2 * md) assert.equal(got.toks[s]![b], off.toks[s]![b], `${what}, step ${s}, row ${b}: token (margin ${sorted[0]! - sorted[1]!})`);
          }
        }
      }
    } finally { model.dispose(); }
  }
});

test('CUDA static decoder, NBX_DECODE_STEP unset (auto): both step graphs timed, the faster kept; the op-by-op step\'s tokens', { skip }, async () => {
  const model = nbx.models.fromConfig(CONFIG, { device: 'cuda', dtype: 'bfloat16', seed: 0 });
  try {
    const off = await decodeCuda(model, 'off', 6);
    const auto = await decodeCuda(model, 'auto', 6);
    assert.deepEqual(auto.toks, off.toks, 'tokens');
    const md = auto.logits.reduce((m, v, i) => Math.max(m, Math.abs(v - off.logits[i]!)), 0);
    assert.ok(md <= 2e-2, `last logits differ by ${md}`);
  } finally { model.dispose(); }
});

test('CUDA decode_step kernel: an out-of-range token id is an IndexError', { skip }, async () => {
  const model = nbx.models.fromConfig(CONFIG, { device: 'cuda', dtype: 'bfloat16', seed: 0 });
  const was = process.env.NBX_DECODE_STEP;
  process.env.NBX_DECODE_STEP = process.env.NBX_EMU_DIR ? 'phases' : 'fused';
  try {
    const dec = new StaticDecoder(model, 1, 32, true);
    await prefill(model, dec);
    assert.throws(() => dec.step([CONFIG.vocab_size + 5], [PROMPT.length]), IndexError); // the eager first step checks at once
    dec.dispose();
  } finally {
    if (was === undefined) delete process.env.NBX_DECODE_STEP; else process.env.NBX_DECODE_STEP = was;
    model.dispose();
  }
});
