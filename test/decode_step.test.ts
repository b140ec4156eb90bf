// nbx.llm.fused_decode_step (a batch-1 decode step in one call): on the CPU its composite equals the
// static decoder's op-by-op step; on CUDA the whole-step kernel (src/backend/cuda/kernels/decode_step.ts),
// in one launch and launched phase by phase, gives the op-by-op step's greedy tokens, logits within
// bfloat16 rounding, and the same cache contents; bad ids are IndexErrors. The CUDA tests skip without a
// CUDA device (they also run on the emulator: node test/gen/cuda_emu.mjs node --test dist/test/decode_step.test.js,
// where NBX_DECODE_STEP=phases is the mode that can run).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import * as nbx from '../src/index.js';
import { StaticDecoder, decodeStepMode } from '../src/models/static_decode.js';
import type { CausalLMModel } from '../src/models/causal_lm.js';
import { IndexError, ShapeError, ValueError } from '../src/errors.js';
import { skip } from './cuda_compare.js';

const CONFIG = {
  model_type: 'llama', max_position_embeddings: 256, rms_norm_eps: 1e-5, hidden_act: 'silu', tie_word_embeddings: false,
  hidden_size: 64, intermediate_size: 128, num_hidden_layers: 2, num_attention_heads: 4, num_key_value_heads: 2, vocab_size: 256,
};
const PROMPT = [3, 17, 99, 5, 200, 42, 7];

/** The step's tensors for the op from a static decoder whose cache holds the prompt (the decoder's own inputs are private). */
function opArgs(model: CausalLMModel, dec: StaticDecoder, token: number, at: number) {
  const dev = model.device, cap = dec.capacity, m = model.model;
  const layers = [...m.layers].map((l, i) => {
    const t = (l as unknown as { decodeStepTensors(eps: number): Record<string, nbx.Tensor> }).decodeStepTensors(1e-5)! as Record<string, nbx.Tensor> & { qkv: nbx.Tensor };
    const c = dec.cache.buffers(i);
    return { ...t, key_cache: c.keys, value_cache: c.values };
  });
  const pos = nbx.tensor([[at]], { dtype: 'int64', device: dev });
  const rope = (m as unknown as { ropes: { full_attention: { forward(p: nbx.Tensor, max: number, dt: string, d: unknown, b: number): { cos: nbx.Tensor; sin: nbx.Tensor } } } }).ropes.full_attention;
  const { cos, sin } = rope.forward(pos, cap - 1, model.model.embed_tokens.weight.dt, dev, cap);
  return {
    ids: nbx.tensor([[token]], { dtype: 'int64', device: dev }), index: nbx.tensor([at], { dtype: 'int64', device: dev }),
    notPadding: nbx.ones([1, cap], { dtype: 'bool', device: dev }), cos, sin, layers,
  };
}

async function prefill(model: CausalLMModel, dec: StaticDecoder): Promise<number> {
  dec.begin(null, PROMPT.length);
  const out = model.forward(nbx.tensor([PROMPT], { dtype: 'int64', device: model.device }), { cache: dec.cache, logits_to_keep: 1 });
  const first = Number((await out.view([CONFIG.vocab_size]).argmax().data())[0]);
  out.dispose();
  return first;
}

test('fused_decode_step on the CPU (its composite) equals the static decoder\'s op-by-op step', async () => {
  const model = nbx.models.fromConfig(CONFIG, { device: 'cpu', dtype: 'float32', seed: 0 });
  try {
    const a = new StaticDecoder(model, 1, 32, true), b = new StaticDecoder(model, 1, 32, true);
    const tok = await prefill(model, a);
    await prefill(model, b);
    const P = PROMPT.length;
    const ref = a.step([tok], [P]);
    const args = opArgs(model, b, tok, P);
    const [logits, next] = nbx.llm.fused_decode_step(args.ids, args.index, args.notPadding, args.cos, args.sin, model.model.embed_tokens.weight, args.layers,
      (model.model.norm as unknown as { weight: nbx.Tensor }).weight, model.lm_head.weight, { heads: 4, kv_heads: 2, eps: 1e-5, scaling: 16 ** -0.5 }) as [nbx.Tensor, nbx.Tensor];
    assert.deepEqual(logits.shape, [1, 1, CONFIG.vocab_size]);
    assert.deepEqual(await logits.tolist(), await ref.logits.tolist());
    assert.deepEqual(await next.tolist(), await ref.next!.tolist());
    // the cache now holds the step's key at index P in both
    assert.deepEqual(await a.cache.buffers(1).keys.select(2, P).tolist(), await b.cache.buffers(1).keys.select(2, P).tolist());
    assert.throws(() => nbx.llm.fused_decode_step(args.ids, args.index, args.notPadding, args.cos, args.sin, model.model.embed_tokens.weight, args.layers.slice(0, 1).map((l) => ({ ...l, o: l.qkv })),
      (model.model.norm as unknown as { weight: nbx.Tensor }).weight, model.lm_head.weight, { heads: 4, kv_heads: 2, eps: 1e-5, scaling: 0.25 }), ShapeError);
    a.dispose(); b.dispose();
  } finally { model.dispose(); }
});

test('NBX_DECODE_STEP: auto (unset), fused/on/phases, off/0; anything else is a ValueError naming the choices', () => {
  assert.equal(decodeStepMode({}), 'auto');
  assert.equal(decodeStepMode({ NBX_DECODE_STEP: 'phases' }), 'fused');
  assert.equal(decodeStepMode({ NBX_DECODE_STEP: 'OFF' }), 'off');
  assert.throws(() => decodeStepMode({ NBX_DECODE_STEP: 'fast' }), (e: unknown) => e instanceof ValueError && /auto, fused, phases, off/.test(e.message));
});

/** Greedy tokens and last logits of `steps` static-decoder steps on CUDA under NBX_DECODE_STEP=`mode`. */
async function decodeCuda(model: CausalLMModel, mode: string, steps: number): Promise<{ toks: number[]; logits: number[]; keys: number[] }> {
  const was = process.env.NBX_DECODE_STEP;
  process.env.NBX_DECODE_STEP = mode;
  try {
    const dec = new StaticDecoder(model, 1, 32, true);
    let tok = await prefill(model, dec);
    const toks: number[] = [];
    let logits: number[] = [];
    for (let s = 0; s < steps; s++) {
      const r = dec.step([tok], [PROMPT.length + s]);
      tok = Number((await r.next!.data())[0]);
      toks.push(tok);
      if (s === steps - 1) logits = Array.from(await r.logits.float().data(), Number);
    }
    dec.checkErrors();
    const keys = Array.from(await dec.cache.buffers(1).keys.float().data(), Number);
    dec.dispose();
    return { toks, logits, keys };
  } finally { if (was === undefined) delete process.env.NBX_DECODE_STEP; else process.env.NBX_DECODE_STEP = was; }
}

test('CUDA decode_step kernel: the op-by-op step\'s tokens, logits and cache (bfloat16; one launch and per phase)', { skip }, async () => {
  const model = nbx.models.fromConfig(CONFIG, { device: 'cuda', dtype: 'bfloat16', seed: 0 });
  try {
    const off = await decodeCuda(model, 'off', 6);
    // the emulator runs blocks one after another: only the per-phase launches can run there
    const modes = process.env.NBX_EMU_DIR ? ['phases'] : ['fused', 'phases'];
    for (const mode of modes) {
      const r = await decodeCuda(model, mode, 6);
      assert.deepEqual(r.toks, off.toks, `${mode}: tokens`);
      const md = r.logits.reduce((m, v, i) => Math.max(m, Math.abs(v - off.logits[i]!)), 0);
      assert.ok(md <= 2e-2, `${mode}: last logits differ by ${md}`);
      const kd = r.keys.reduce((m, v, i) => Math.max(m, Math.abs(v - off.keys[i]!)), 0);
      assert.ok(kd <= 2e-2, `${mode}: layer 1's cached keys differ by ${kd}`);
    }
  } finally { model.dispose(); }
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
