// Quantizing the output projection (issue #21): nbx.quant.quantize_(model, { lm_head: true }) and
// `nbx quantize --lm-head` (gpt-fast's convention; the default keeps lm_head float, as AWQ/GPTQ do). A
// lm_head tied to the embedding is untied: the embedding keeps its float weight, so its lookup is unchanged.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import * as nbx from '../src/index.js';
import type { Tensor } from '../src/tensor/tensor.js';
import type { QuantizeOptions } from '../src/quant/index.js';
import { quantizeCommand, quantizeFolder } from '../src/cli/quantize.js';

const KJV = join(import.meta.dirname, '..', '..', 'assets', 'nbx-kjv');
const vals = (t: Tensor): number[] => t.flatten().to('float32').tolist() as number[];
function maxRel(a: Tensor, b: Tensor): number {
  const x = vals(a), y = vals(b);
  assert.equal(x.length, y.length);
  let d = 0, m = 0;
  for (let i = 0; i < x.length; i++) { d = Math.max(d, Math.abs(x[i]! - y[i]!)); m = Math.max(m, Math.abs(y[i]!)); }
  return d / m;
}

const TINY = {
  model_type: 'llama', architectures: ['LlamaForCausalLM'], hidden_size: 128, intermediate_size: 256, num_hidden_layers: 2,
  num_attention_heads: 4, num_key_value_heads: 2, vocab_size: 200, max_position_embeddings: 64, rms_norm_eps: 1e-5,
  tie_word_embeddings: false, hidden_act: 'silu',
};
const TIED = { ...TINY, tie_word_embeddings: true };
const IDS = nbx.tensor([[1, 5, 9, 77, 3, 150, 42]], { dtype: 'int64' });
const SCHEMES: [string, QuantizeOptions][] = [
  ['int8', { scheme: 'int8' }],
  ['int4 g128 asym', { scheme: 'int4', group_size: 128 }],
  ['int4 g32 sym', { scheme: 'int4', group_size: 32, symmetric: true }],
];
const linear = (m: nbx.nn.Module, name: string): nbx.nn.Linear => m.get_submodule(name) as nbx.nn.Linear;

/** The float twin of a (partly) quantized model: an untied model holding its float tensors and every quantized Linear's dequantize(). */
function floatTwin(m: ReturnType<typeof nbx.models.fromConfig>): ReturnType<typeof nbx.models.fromConfig> {
  const ref = nbx.models.fromConfig({ ...TINY }, { seed: 9 });
  const sd: Record<string, Tensor> = {};
  for (const [n, t] of Object.entries(m.state_dict())) if (!/\.(qweight|scales|zeros)$/.test(n)) sd[n] = t;
  for (const [n, mod] of m.named_modules()) if (mod instanceof nbx.nn.Linear && mod.is_quantized) sd[`${n}.weight`] = mod.quantized_weight!.dequantize();
  ref.load_state_dict(sd, { strict: true });
  return ref;
}

test('quantize_ keeps lm_head float by default; lm_head: true quantizes it, whatever skip says', () => {
  const cases: [string, Parameters<typeof nbx.quant.quantize_>[1], boolean][] = [
    ['default', { scheme: 'int8' }, false],
    ['lm_head: false', { scheme: 'int8', lm_head: false }, false],
    ['lm_head: true', { scheme: 'int8', lm_head: true }, true],
    ['skip none (as before)', { scheme: 'int8', skip: () => false }, true],
    ['skip none, lm_head: false', { scheme: 'int8', skip: () => false, lm_head: false }, false],
    ['skip everything, lm_head: true', { scheme: 'int8', skip: () => true, lm_head: true }, true],
  ];
  for (const [label, opts, head] of cases) {
    const m = nbx.models.fromConfig(TINY, { seed: 1 });
    const r = nbx.quant.quantize_(m, opts);
    assert.equal(linear(m, 'lm_head').is_quantized, head, label);
    assert.equal(r.quantized.includes('lm_head'), head, label);
    assert.equal(r.skipped.includes('lm_head'), !head, label);
    assert.deepEqual(r.untied, [], label);
    const layers = opts.skip?.('x') ? 0 : 14;
    assert.equal(r.quantized.length, layers + (head ? 1 : 0), label);
    m.dispose();
  }
});

for (const [cfgName, cfg] of [['untied', TINY], ['tied', TIED]] as const) {
  test(`lm_head quantized (${cfgName} embeddings): logits and greedy tokens are the float twin's on the dequantized weights`, async () => {
    for (const [name, opts] of SCHEMES) {
      const m = nbx.models.fromConfig(cfg, { seed: 1, std: 0.05 });
      const fresh = nbx.models.fromConfig(cfg, { seed: 1, std: 0.05 });
      const embed0 = vals(fresh.model.embed_tokens.weight);
      const r = nbx.quant.quantize_(m, { ...opts, lm_head: true });
      const head = linear(m, 'lm_head');
      assert.ok(head.is_quantized && r.quantized.includes('lm_head'), name);
      assert.equal(head.quantized_weight!.format, opts.scheme, name);
      assert.deepEqual(r.untied, cfgName === 'tied' ? ['lm_head'] : [], name);
      // the packed lm_head is the float lm_head's (for a tied one: the embedding's) quantize()
      const src = cfgName === 'tied' ? fresh.model.embed_tokens.weight : linear(fresh, 'lm_head').weight;
      assert.deepEqual(vals(head.quantized_weight!.dequantize()), vals(nbx.quant.quantize(src, opts).dequantize()), name);
      // the embedding keeps its float weight: the lookup is unchanged
      assert.equal(m.model.embed_tokens.weight.dt, 'float32');
      assert.deepEqual(vals(m.model.embed_tokens.weight), embed0, `${name}: embedding`);
      const e = m.model.embed_tokens.forward(IDS), ef = fresh.model.embed_tokens.forward(IDS);
      assert.deepEqual(vals(e), vals(ef), `${name}: embedding lookup`);
      const sd = m.state_dict();
      assert.ok('lm_head.qweight' in sd && !('lm_head.weight' in sd) && 'model.embed_tokens.weight' in sd, name);
      const ref = floatTwin(m);
      const d = maxRel(m.forward(IDS), ref.forward(IDS));
      assert.ok(d < 1e-5, `${cfgName} ${name}: logits differ by ${d}`);
      // decode steps (one row: the lm_head through the GEMV kernels) give the float twin's greedy tokens
      const ga = (await m.generate(IDS, { max_new_tokens: 8, do_sample: false })).tolist();
      const gb = (await ref.generate(IDS, { max_new_tokens: 8, do_sample: false })).tolist();
      assert.deepEqual(ga, gb, `${cfgName} ${name}: greedy tokens`);
      m.dispose(); fresh.dispose(); ref.dispose();
    }
  });
}

/** A model folder of a random tiny model (config.json, model.safetensors; a tied lm_head.weight not written). */
async function writeFolder(dir: string, cfg: Record<string, unknown>): Promise<void> {
  mkdirSync(dir, { recursive: true });
  const m = nbx.models.fromConfig(cfg, { seed: 3, std: 0.05 });
  const sd = m.state_dict();
  if (cfg.tie_word_embeddings) delete sd['lm_head.weight'];
  await nbx.io.saveSafetensors(join(dir, 'model.safetensors'), sd, { format: 'pt' });
  writeFileSync(join(dir, 'config.json'), JSON.stringify({ ...cfg, torch_dtype: 'float32' }));
  m.dispose();
}

/** stderr silenced while fn runs (the command's one-line summary). */
async function quiet<T>(fn: () => Promise<T>): Promise<{ value: T; err: string }> {
  const w = process.stderr.write.bind(process.stderr);
  let err = '';
  process.stderr.write = ((s: string | Uint8Array): boolean => { err += String(s); return true; }) as typeof process.stderr.write;
  try { return { value: await fn(), err }; } finally { process.stderr.write = w; }
}

test('nbx quantize --lm-head writes the packed lm_head; nbx.models.load reads it back (tied: untied, the embedding float)', async () => {
  const tmp = mkdtempSync(join(tmpdir(), 'nbx-qlm-'));
  try {
    for (const [cfgName, cfg] of [['untied', TINY], ['tied', TIED]] as const) {
      const srcDir = join(tmp, `src-${cfgName}`);
      await writeFolder(srcDir, cfg);
      for (const [scheme, opts] of [['int8', { scheme: 'int8' }], ['int4-g128', { scheme: 'int4', group_size: 128 }]] as [string, QuantizeOptions][]) {
        const label = `${cfgName} ${scheme}`;
        const out = join(tmp, `${cfgName}-${scheme}`);
        const { value: rc, err } = await quiet(() => quantizeCommand([srcDir, out, '--scheme', scheme, '--lm-head']));
        assert.equal(rc, 0, label);
        assert.match(err, cfgName === 'tied' ? /lm_head quantized \(untied: the embedding stays float\)/ : /lm_head quantized[;)]/, label);
        const written = JSON.parse(readFileSync(join(out, 'config.json'), 'utf8')) as Record<string, unknown> & { quantization_config: Record<string, unknown> };
        assert.equal(written.tie_word_embeddings, false, label);
        assert.ok(!(written.quantization_config.modules_not_converted as string[]).includes('lm_head'), label);
        const { tensors } = await nbx.io.loadSafetensors(join(out, 'model.safetensors'));
        assert.equal(tensors['lm_head.qweight']!.dt, 'uint8', label);
        assert.ok(!('lm_head.weight' in tensors), label);
        assert.equal(tensors['model.embed_tokens.weight']!.dt, 'float32', label);
        const float = await nbx.models.load(srcDir);
        const m = await nbx.models.load(out);
        const head = linear(m, 'lm_head');
        assert.ok(head.is_quantized, label);
        const src = cfgName === 'tied' ? float.model.embed_tokens.weight : linear(float, 'lm_head').weight;
        assert.deepEqual(vals(head.quantized_weight!.dequantize()), vals(nbx.quant.quantize(src, opts).dequantize()), label);
        assert.deepEqual(vals(m.model.embed_tokens.weight), vals(float.model.embed_tokens.weight), `${label}: embedding`);
        // the loaded model computes what quantize_ with lm_head: true computes in memory
        nbx.quant.quantize_(float, { ...opts, lm_head: true });
        const d = maxRel(m.forward(IDS), float.forward(IDS));
        assert.ok(d < 1e-6, `${label}: logits differ by ${d}`);
        // a config that still says tie_word_embeddings: true loads the same (the packed lm_head unties it)
        if (cfgName === 'tied') {
          writeFileSync(join(out, 'config.json'), JSON.stringify({ ...written, tie_word_embeddings: true }));
          const t = await nbx.models.load(out);
          assert.ok(linear(t, 'lm_head').is_quantized, label);
          assert.deepEqual(vals(t.model.embed_tokens.weight), vals(m.model.embed_tokens.weight), `${label}: embedding (tied config)`);
          assert.deepEqual(vals(t.forward(IDS)), vals(m.forward(IDS)), `${label}: logits (tied config)`);
          t.dispose();
        }
        m.dispose(); float.dispose();
        for (const t of Object.values(tensors)) t.dispose();
      }
      // without --lm-head the folder is as before: lm_head float (tied: not written), config unchanged
      const out = join(tmp, `${cfgName}-default`);
      const r = await quiet(() => quantizeFolder(srcDir, out, 'int8'));
      assert.ok(r.value.skipped.includes('lm_head') && r.value.untied.length === 0, cfgName);
      assert.equal((JSON.parse(readFileSync(join(out, 'config.json'), 'utf8')) as Record<string, unknown>).tie_word_embeddings, cfg.tie_word_embeddings);
      const m = await nbx.models.load(out);
      assert.equal(linear(m, 'lm_head').is_quantized, false, cfgName);
      m.dispose();
    }
  } finally { rmSync(tmp, { recursive: true, force: true }); }
});

test('nbx quantize --lm-head on the embedded model (tied): 43 Linears, the embedding float, the model generates', async () => {
  const tmp = mkdtempSync(join(tmpdir(), 'nbx-qlm-kjv-'));
  try {
    const r = await quantizeFolder(KJV, tmp, 'int8', { lmHead: true });
    assert.equal(r.quantized.length, 43);
    assert.deepEqual(r.untied, ['lm_head']);
    const float = await nbx.models.load(KJV);
    const m = await nbx.models.load(tmp);
    assert.ok(linear(m, 'lm_head').is_quantized);
    assert.deepEqual(vals(m.model.embed_tokens.weight), vals(float.model.embed_tokens.weight));
    nbx.quant.quantize_(float, { scheme: 'int8', lm_head: true });
    const ids = nbx.tensor([[0, 100, 200, 300]], { dtype: 'int64' });
    const d = maxRel(m.forward(ids), float.forward(ids));
    assert.ok(d < 1e-6, `logits differ by ${d}`);
    const ga = (await m.generate(ids, { max_new_tokens: 6, do_sample: false })).tolist();
    const gb = (await float.generate(ids, { max_new_tokens: 6, do_sample: false })).tolist();
    assert.deepEqual(ga, gb);
    m.dispose(); float.dispose();
  } finally { rmSync(tmp, { recursive: true, force: true }); }
});
