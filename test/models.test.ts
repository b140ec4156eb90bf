// nbx.models without fixtures: every family built from a config runs, the KV cache reproduces the
// full-sequence logits step by step, a saved folder loads back to the same logits (also from per-expert
// MoE checkpoints and transformers-4 configs), and bad input is a typed error after which the process
// loads another model. The transformers fixtures are checked in models_transformers.test.ts.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, writeFileSync, rmSync, mkdirSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import * as nbx from '../src/index.js';
import type { Tensor } from '../src/tensor/tensor.js';
import { DTypeError, FormatError, NbxError, ShapeError, UnsupportedError, ValueError } from '../src/errors.js';
import { positionsFromMask, maxRelErr } from './models_util.js';

const base = { vocab_size: 50, hidden_size: 32, intermediate_size: 40, num_hidden_layers: 2, num_attention_heads: 4, num_key_value_heads: 2, max_position_embeddings: 64, rms_norm_eps: 1e-6 };
export const TINY: Record<string, Record<string, unknown>> = {
  llama: { model_type: 'llama', ...base, attention_bias: true, mlp_bias: true, rope_scaling: { rope_type: 'llama3', factor: 8, low_freq_factor: 1, high_freq_factor: 4, original_max_position_embeddings: 16 } },
  llama_dynamic: { model_type: 'llama', ...base, max_position_embeddings: 4, rope_scaling: { type: 'dynamic', factor: 2 } },
  mistral: { model_type: 'mistral', ...base, sliding_window: 3 },
  qwen2: { model_type: 'qwen2', ...base, use_sliding_window: true, sliding_window: 3, max_window_layers: 1, tie_word_embeddings: true },
  qwen3: { model_type: 'qwen3', ...base, head_dim: 16 },
  mixtral: { model_type: 'mixtral', ...base, num_local_experts: 4, num_experts_per_tok: 2 },
  qwen3_moe: { model_type: 'qwen3_moe', ...base, head_dim: 8, num_experts: 4, num_experts_per_tok: 2, moe_intermediate_size: 24, norm_topk_prob: true, decoder_sparse_step: 1, mlp_only_layers: [1] },
  phi3: { model_type: 'phi3', ...base, partial_rotary_factor: 0.5 },
  gemma2: { model_type: 'gemma2', ...base, head_dim: 8, query_pre_attn_scalar: 8, sliding_window: 3, attn_logit_softcapping: 50, final_logit_softcapping: 30 },
  gemma3_text: { model_type: 'gemma3_text', ...base, head_dim: 8, query_pre_attn_scalar: 8, sliding_window: 3, sliding_window_pattern: 2, rope_scaling: { rope_type: 'linear', factor: 2 }, rope_local_base_freq: 100 },
};

const ids = (): Tensor => nbx.tensor([[0, 0, 5, 7, 9, 11, 13], [1, 2, 3, 4, 5, 6, 7]]);
const mask = (): Tensor => nbx.tensor([[0, 0, 1, 1, 1, 1, 1], [1, 1, 1, 1, 1, 1, 1]]);

for (const [name, cfg] of Object.entries(TINY)) {
  test(`${name}: decoding with the KV cache gives the full-sequence logits`, () => {
    const m = nbx.models.fromConfig(cfg, { seed: 3, std: 0.2 });
    try {
      const x = ids(), am = mask();
      const pos = positionsFromMask(am);
      const full = m.forward(x, { attention_mask: am, position_ids: pos });
      assert.deepEqual(full.shape, [2, 7, 50]);
      const cache = m.newCache({ batch: 2, maxLength: 3 }); // grows twice on the way
      const parts = [m.forward(x.slice(1, 0, 4), { attention_mask: am.slice(1, 0, 4), position_ids: pos.slice(1, 0, 4), cache })];
      for (let t = 4; t < 7; t++) parts.push(m.forward(x.slice(1, t, t + 1), { attention_mask: am.slice(1, 0, t + 1), position_ids: pos.slice(1, t, t + 1), cache }));
      assert.equal(cache.length, 7);
      const inc = nbx.cat(parts, 1);
      // padded query rows see no key: their values depend on what the implementation does with an
      // all-masked row, and nothing downstream reads them; compare the real tokens
      const real = am.ne(0).unsqueeze(-1);
      const err = maxRelErr(inc.mul(real), full.mul(real));
      assert.ok(err < 1e-5, `step-by-step vs full: ${err}`);
      // the cache's own position derivation (generate's cumsum rule) matches the explicit positions
      const cache2 = m.newCache({ batch: 2 });
      const viaMask = m.forward(x, { attention_mask: am, cache: cache2 });
      assert.ok(maxRelErr(viaMask.mul(real), full.mul(real)) < 1e-6);
      cache.dispose(); cache2.dispose();
    } finally { m.dispose(); }
  });
}

test('logits_to_keep keeps the last positions; forward without a mask uses arange positions', () => {
  const m = nbx.models.fromConfig(TINY.llama!, { seed: 1, std: 0.2 });
  try {
    const x = ids();
    const all = m.forward(x);
    const last = m.forward(x, { logits_to_keep: 2 });
    assert.deepEqual(last.shape, [2, 2, 50]);
    assert.ok(maxRelErr(last, all.slice(1, 5)) < 1e-6);
    const explicit = m.forward(x, { position_ids: nbx.arange(7).unsqueeze(0) });
    assert.ok(maxRelErr(explicit, all) < 1e-7);
  } finally { m.dispose(); }
});

function saveFolder(model: ReturnType<typeof nbx.models.fromConfig>, cfg: Record<string, unknown>, rename?: (sd: Record<string, Tensor>) => Record<string, Tensor>): Promise<string> {
  const dir = mkdtempSync(join(tmpdir(), 'nbx-model-'));
  writeFileSync(join(dir, 'config.json'), JSON.stringify(cfg));
  let sd = model.state_dict();
  if (cfg.tie_word_embeddings) { sd = { ...sd }; delete sd['lm_head.weight']; }
  if (rename) sd = rename(sd);
  return nbx.io.saveSafetensors(join(dir, 'model.safetensors'), sd).then(() => dir);
}

test('a saved folder loads back to the same logits (tied embeddings, generation_config.json)', async () => {
  const cfg = TINY.qwen2!;
  const m = nbx.models.fromConfig(cfg, { seed: 2, std: 0.2 });
  const dir = await saveFolder(m, cfg);
  writeFileSync(join(dir, 'generation_config.json'), JSON.stringify({ eos_token_id: 3, do_sample: false }));
  try {
    const back = await nbx.models.load(dir);
    assert.equal(back.generationConfig.eos_token_id, 3);
    assert.equal(back.dtype, nbx.float32);
    const a = m.forward(ids(), { attention_mask: mask() }), b = back.forward(ids(), { attention_mask: mask() });
    assert.equal(maxRelErr(a, b), 0);
    back.dispose();
  } finally { m.dispose(); rmSync(dir, { recursive: true }); }
});

test('a sharded checkpoint (model.safetensors.index.json) loads; its shard file names the error when missing', async () => {
  const cfg = TINY.mistral!;
  const m = nbx.models.fromConfig(cfg, { seed: 8, std: 0.2 });
  const dir = mkdtempSync(join(tmpdir(), 'nbx-sharded-'));
  try {
    writeFileSync(join(dir, 'config.json'), JSON.stringify(cfg));
    const sd = m.state_dict(), names = Object.keys(sd), half = Math.ceil(names.length / 2);
    const shards = [names.slice(0, half), names.slice(half)];
    const weight_map: Record<string, string> = {};
    for (let i = 0; i < 2; i++) {
      const file = `model-0000${i + 1}-of-00002.safetensors`;
      await nbx.io.saveSafetensors(join(dir, file), Object.fromEntries(shards[i]!.map((n) => [n, sd[n]!])));
      for (const n of shards[i]!) weight_map[n] = file;
    }
    writeFileSync(join(dir, 'model.safetensors.index.json'), JSON.stringify({ metadata: {}, weight_map }));
    const back = await nbx.models.load(dir);
    assert.equal(maxRelErr(back.forward(ids()), m.forward(ids())), 0);
    back.dispose();
    rmSync(join(dir, 'model-00002-of-00002.safetensors'));
    await assert.rejects(nbx.models.load(dir), (e: unknown) => e instanceof NbxError && /model-00002-of-00002\.safetensors/.test(String(e)));
  } finally { m.dispose(); rmSync(dir, { recursive: true }); }
});

test('MoE checkpoints saved per expert (block_sparse_moe.experts.N.w1/w2/w3, mlp.experts.N.gate_proj/...) load', async () => {
  for (const name of ['mixtral', 'qwen3_moe']) {
    const cfg = TINY[name]!;
    const m = nbx.models.fromConfig(cfg, { seed: 4, std: 0.2 });
    const dir = await saveFolder(m, cfg, (sd) => {
      const out: Record<string, Tensor> = {};
      for (const [k, v] of Object.entries(sd)) {
        const g = /^(model\.layers\.\d+)\.mlp\.(experts\.(gate_up_proj|down_proj)|gate\.weight)$/.exec(k);
        if (!g) { out[k] = v; continue; }
        const moe = name === 'mixtral' ? `${g[1]}.block_sparse_moe` : `${g[1]}.mlp`;
        if (g[2] === 'gate.weight') { out[`${moe}.gate.weight`] = v; continue; }
        const [gate, up, down] = name === 'mixtral' ? ['w1', 'w3', 'w2'] : ['gate_proj', 'up_proj', 'down_proj'];
        for (let e = 0; e < v.shape[0]!; e++) {
          const w = v.select(0, e);
          if (g[3] === 'down_proj') out[`${moe}.experts.${e}.${down}.weight`] = w.contiguous();
          else {
            const [a, b] = w.chunk(2, 0) as [Tensor, Tensor];
            out[`${moe}.experts.${e}.${gate}.weight`] = a.contiguous();
            out[`${moe}.experts.${e}.${up}.weight`] = b.contiguous();
          }
        }
      }
      return out;
    });
    try {
      const back = await nbx.models.load(dir);
      assert.equal(maxRelErr(m.forward(ids()), back.forward(ids())), 0, name);
      back.dispose();
    } finally { m.dispose(); rmSync(dir, { recursive: true }); }
  }
});

test('transformers 4 and 5 config styles give the same model', async () => {
  const v4 = { ...TINY.gemma3_text! };
  const v5 = { ...v4, rope_parameters: { full_attention: { rope_type: 'linear', factor: 2, rope_theta: 1e6 }, sliding_attention: { rope_type: 'default', rope_theta: 100 } } } as Record<string, unknown>;
  delete v5.rope_scaling; delete v5.rope_local_base_freq;
  const a = nbx.models.fromConfig(v4, { seed: 5, std: 0.2 }), b = nbx.models.fromConfig(v5, { seed: 5, std: 0.2 });
  try {
    assert.equal(maxRelErr(a.forward(ids()), b.forward(ids())), 0);
  } finally { a.dispose(); b.dispose(); }
  const p = nbx.models.parseConfig({ ...TINY.llama!, rope_scaling: undefined, rope_parameters: { rope_type: 'llama3', rope_theta: 5e5, factor: 8, low_freq_factor: 1, high_freq_factor: 4, original_max_position_embeddings: 16 } });
  assert.equal(p.rope.full_attention.rope_type, 'llama3');
  assert.equal(p.rope.full_attention.rope_theta, 5e5);
});

test('bad input: typed errors naming the file, the tensor or the argument; the process loads a model afterwards', async () => {
  const cfg = TINY.llama!;
  const m = nbx.models.fromConfig(cfg, { seed: 6, std: 0.2 });
  const dir = await saveFolder(m, cfg);
  const scratch = mkdtempSync(join(tmpdir(), 'nbx-bad-'));
  try {
    // forward arguments
    assert.throws(() => m.forward(nbx.tensor([[1, 2]], { dtype: 'int32' })), (e: unknown) => e instanceof DTypeError && /int64/.test(String(e)));
    assert.throws(() => m.forward(nbx.tensor([1, 2])), (e: unknown) => e instanceof ShapeError && /2-D/.test(String(e)));
    assert.throws(() => m.forward(nbx.zeros([1, 0], { dtype: 'int64' })), ValueError);
    assert.throws(() => m.forward(ids(), { attention_mask: nbx.ones([2, 3], { dtype: 'int64' }) }), ShapeError);
    assert.throws(() => m.forward(ids(), { cache: m.newCache({ batch: 3 }) }), ShapeError);
    assert.throws(() => m.forward(nbx.tensor([[1, 99]])), NbxError); // token id out of the vocabulary
    // folders
    await assert.rejects(nbx.models.load(join(scratch, 'nope')), (e: unknown) => e instanceof ValueError && /does not exist/.test(String(e)));
    mkdirSync(join(scratch, 'noweights'));
    writeFileSync(join(scratch, 'noweights', 'config.json'), JSON.stringify(cfg));
    await assert.rejects(nbx.models.load(join(scratch, 'noweights')), /model\.safetensors/);
    const variant = async (name: string, config: string | null, patch?: (sd: Record<string, Tensor>) => Record<string, Tensor>): Promise<string> => {
      const d = join(scratch, name);
      mkdirSync(d);
      let sd = m.state_dict();
      if (patch) sd = patch({ ...sd });
      await nbx.io.saveSafetensors(join(d, 'model.safetensors'), sd);
      if (config !== null) writeFileSync(join(d, 'config.json'), config);
      return d;
    };
    await assert.rejects(nbx.models.load(await variant('noconfig', null)), (e: unknown) => e instanceof ValueError && /config\.json not found/.test(String(e)));
    await assert.rejects(nbx.models.load(await variant('corrupt', '{"model_type": "llama", ')), (e: unknown) => e instanceof FormatError && /config\.json is not valid JSON/.test(String(e)));
    await assert.rejects(nbx.models.load(await variant('arch', JSON.stringify({ ...cfg, model_type: 'gpt2' }))),
      (e: unknown) => e instanceof UnsupportedError && /'gpt2'/.test(String(e)) && /llama, mistral, qwen2/.test(String(e)));
    await assert.rejects(nbx.models.load(await variant('rope', JSON.stringify({ ...cfg, rope_scaling: { rope_type: 'su', factor: 2 } }))),
      (e: unknown) => e instanceof UnsupportedError && /RoPE type 'su'/.test(String(e)) && /llama3/.test(String(e)));
    await assert.rejects(nbx.models.load(await variant('missing', JSON.stringify(cfg), (sd) => { delete sd['model.layers.1.mlp.up_proj.weight']; return sd; })),
      (e: unknown) => e instanceof ShapeError && /missing tensor 'model\.layers\.1\.mlp\.up_proj\.weight' \(expected shape \[40, 32\]\)/.test(String(e)));
    await assert.rejects(nbx.models.load(await variant('shape', JSON.stringify(cfg), (sd) => { sd['model.norm.weight'] = nbx.ones([31]); return sd; })),
      (e: unknown) => e instanceof ShapeError && /'model\.norm\.weight' has shape \[31\], expected \[32\]/.test(String(e)));
    const trunc = await variant('truncated', JSON.stringify(cfg));
    writeFileSync(join(trunc, 'model.safetensors'), Buffer.from([1, 2, 3]));
    await assert.rejects(nbx.models.load(trunc), (e: unknown) => e instanceof FormatError && /model\.safetensors/.test(String(e)));
    // and afterwards a good folder still loads and runs
    const ok = await nbx.models.load(dir);
    assert.equal(maxRelErr(ok.forward(ids()), m.forward(ids())), 0);
    ok.dispose();
  } finally { m.dispose(); rmSync(dir, { recursive: true }); rmSync(scratch, { recursive: true }); }
});

test('dtype: explicit float32/bfloat16 on load converts; the cache follows the model dtype', async () => {
  const cfg = { ...TINY.qwen3!, torch_dtype: 'bfloat16' };
  const m = nbx.models.fromConfig(cfg, { seed: 7, std: 0.2, dtype: 'bfloat16' });
  const dir = await saveFolder(m, cfg);
  try {
    const f32 = await nbx.models.load(dir); // CPU default: float32 from a bf16 checkpoint
    assert.equal(f32.dtype, nbx.float32);
    const bf = await nbx.models.load(dir, { dtype: 'bfloat16' });
    assert.equal(bf.dtype, nbx.bfloat16);
    const lb = bf.forward(ids());
    assert.equal(lb.dtype, nbx.bfloat16);
    const lf = f32.forward(ids());
    assert.ok(maxRelErr(lb.to('float32'), lf) < 0.05);
    f32.to('bfloat16'); // nn.Module.to: the model's dtype follows
    assert.equal(f32.dtype, nbx.bfloat16);
    assert.equal(maxRelErr(f32.forward(ids()), lb), 0);
    f32.dispose(); bf.dispose();
  } finally { m.dispose(); rmSync(dir, { recursive: true }); }
});
