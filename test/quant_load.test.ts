// Quantized checkpoints (issue #21): AWQ, GPTQ and fp8 (compressed-tensors) fixtures from
// test/gen/quant_fixtures.py load with QuantizedTensor weights equal to the tools' dequantization, and
// give the logits of the float model holding those weights; act-order GPTQ is refused; `nbx quantize`
// writes a folder that loads back to the same quantized weights.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { cpSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import * as nbx from '../src/index.js';
import type { Tensor } from '../src/tensor/tensor.js';
import { quantizeFolder } from '../src/cli/quantize.js';

const FIX = join(import.meta.dirname, '..', '..', 'test', 'fixtures', 'quant');
const KJV = join(import.meta.dirname, '..', '..', 'assets', 'nbx-kjv');
const vals = (t: Tensor): number[] => t.flatten().to('float32').tolist() as number[];
const maxRel = (a: Tensor, b: Tensor): number => {
  const x = vals(a), y = vals(b);
  let d = 0, m = 0;
  for (let i = 0; i < x.length; i++) { d = Math.max(d, Math.abs(x[i]! - y[i]!)); m = Math.max(m, Math.abs(y[i]!)); }
  return d / m;
};
const IDS = nbx.tensor([[0, 3, 17, 30, 5, 9, 22]], { dtype: 'int64' });

/** The same model in float: the fixture's float tensors plus the expected dequantized weights. */
async function floatTwin(dir: string): Promise<ReturnType<typeof nbx.models.fromConfig>> {
  const cfg = JSON.parse(readFileSync(join(dir, 'config.json'), 'utf8')) as Record<string, unknown>;
  delete cfg.quantization_config;
  const ref = nbx.models.fromConfig(cfg);
  const { tensors: exp } = await nbx.io.loadSafetensors(join(dir, 'expected.safetensors'));
  const { tensors: all } = await nbx.io.loadSafetensors(join(dir, 'model.safetensors'));
  const sd: Record<string, Tensor> = {};
  for (const [n, t] of Object.entries(all)) if (/(norm|embed_tokens|lm_head)\.weight$/.test(n)) sd[n] = t.to('float32');
  for (const [n, t] of Object.entries(exp)) sd[n] = t;
  ref.load_state_dict(sd, { strict: true });
  return ref;
}

for (const kind of ['awq', 'gptq', 'fp8']) {
  test(`${kind} checkpoint: QuantizedTensor weights equal the tool's dequantization; logits equal the float twin`, async () => {
    const dir = join(FIX, kind);
    const m = await nbx.models.load(dir);
    const { tensors: exp } = await nbx.io.loadSafetensors(join(dir, 'expected.safetensors'));
    assert.equal(Object.keys(exp).length, 7);
    for (const [n, want] of Object.entries(exp)) {
      const lin = m.get_submodule(n.replace(/\.weight$/, '')) as nbx.nn.Linear;
      assert.equal(lin.is_quantized, true, n);
      const qw = lin.quantized_weight!;
      assert.equal(qw.format, kind === 'fp8' ? 'fp8_e4m3' : 'int4');
      if (kind !== 'fp8') assert.equal(qw.layout.groupSize, 32);
      assert.deepEqual(vals(qw.dequantize()), vals(want), `${kind} ${n}`);
    }
    assert.equal((m.get_submodule('lm_head') as nbx.nn.Linear).is_quantized, false);
    const ref = await floatTwin(dir);
    const d = maxRel(m.forward(IDS), ref.forward(IDS));
    assert.ok(d < 1e-5, `${kind}: logits differ by ${d}`);
    m.dispose(); ref.dispose();
  });
}

test('GPTQ with an act-order g_idx is an UnsupportedError naming it; the process goes on', async () => {
  const tmp = mkdtempSync(join(tmpdir(), 'nbx-gptq-'));
  try {
    cpSync(join(FIX, 'gptq'), tmp, { recursive: true });
    const { tensors } = await nbx.io.loadSafetensors(join(tmp, 'model.safetensors'));
    // a g_idx of a K = 64 layer that interleaves its two groups
    const gd = 'model.layers.0.mlp.down_proj.g_idx';
    tensors[gd] = nbx.tensor(Array.from({ length: 64 }, (_, k) => k % 2), { dtype: 'int32' });
    await nbx.io.saveSafetensors(join(tmp, 'model.safetensors'), tensors);
    await assert.rejects(nbx.models.load(tmp), (e: Error) => e instanceof nbx.UnsupportedError && /g_idx.*act-order/.test(e.message));
    const m = await nbx.models.load(join(FIX, 'gptq'));
    m.dispose();
  } finally { rmSync(tmp, { recursive: true, force: true }); }
});

test('nbx quantize round trip on the embedded model: int4-g64 and fp8 folders load to the same quantized weights', async () => {
  const tmp = mkdtempSync(join(tmpdir(), 'nbx-quant-'));
  try {
    const float = await nbx.models.load(KJV);
    for (const scheme of ['int4-g64', 'fp8', 'int4-g128']) {
      const out = join(tmp, scheme);
      const r = await quantizeFolder(KJV, out, scheme);
      // int4-g128: down_proj's K = 576 is not a multiple of 128, so it stays float (listed)
      assert.equal(r.quantized.length, scheme === 'int4-g128' ? 36 : 42, scheme);
      const cfg = JSON.parse(readFileSync(join(out, 'config.json'), 'utf8')) as { quantization_config: Record<string, unknown> };
      assert.equal(cfg.quantization_config.quant_method, 'nbx');
      assert.deepEqual(cfg.quantization_config.modules_not_converted, r.skipped);
      const m = await nbx.models.load(out);
      const q = (m.get_submodule('model.layers.2.mlp.up_proj') as nbx.nn.Linear).quantized_weight!;
      const src = (float.get_submodule('model.layers.2.mlp.up_proj') as nbx.nn.Linear).weight;
      const opts = scheme === 'fp8' ? { scheme: 'fp8_e4m3' as const } : { scheme: 'int4' as const, group_size: scheme === 'int4-g64' ? 64 : 128 };
      assert.deepEqual(vals(q.dequantize()), vals(nbx.quant.quantize(src, opts).dequantize()), scheme);
      assert.equal((m.get_submodule('model.layers.0.mlp.down_proj') as nbx.nn.Linear).is_quantized, scheme !== 'int4-g128');
      const logits = m.forward(nbx.tensor([[0, 100, 200, 300]], { dtype: 'int64' }));
      assert.equal(logits.shape[2], 4096);
      m.dispose();
    }
    float.dispose();
  } finally { rmSync(tmp, { recursive: true, force: true }); }
});

test('hostile or unsupported quantized checkpoints are typed errors, and the process goes on', async () => {
  const tmp = mkdtempSync(join(tmpdir(), 'nbx-qbad-'));
  try {
    const variant = async (name: string, from: string, qc: Record<string, unknown> | null, tensors?: (t: Record<string, Tensor>) => void): Promise<string> => {
      const d = join(tmp, name);
      cpSync(join(FIX, from), d, { recursive: true });
      const cfg = JSON.parse(readFileSync(join(d, 'config.json'), 'utf8')) as Record<string, unknown>;
      if (qc) cfg.quantization_config = { ...(cfg.quantization_config as object), ...qc };
      writeFileSync(join(d, 'config.json'), JSON.stringify(cfg));
      if (tensors) {
        const { tensors: t } = await nbx.io.loadSafetensors(join(d, 'model.safetensors'));
        tensors(t);
        await nbx.io.saveSafetensors(join(d, 'model.safetensors'), t);
      }
      return d;
    };
    const cases: [string, Promise<string>, new (...a: never[]) => Error, RegExp][] = [
      ['unknown method', variant('m', 'awq', { quant_method: 'bitsandbytes' }), nbx.UnsupportedError, /bitsandbytes.*not supported/],
      ['awq gemv packing', variant('v', 'awq', { version: 'gemv' }), nbx.UnsupportedError, /gemv/],
      ['8-bit gptq', variant('b', 'gptq', { bits: 8 }), nbx.UnsupportedError, /8-bit/],
      ['block-wise fp8', variant('f', 'fp8', { weight_block_size: [128, 128] }), nbx.UnsupportedError, /block-wise/],
      ['qzeros of the wrong shape', variant('z', 'awq', null, (t) => { t['model.layers.0.mlp.up_proj.qzeros'] = nbx.zeros([2, 8], { dtype: 'int32' }); }), nbx.FormatError, /do not agree/],
      ['qweight not int32', variant('d', 'gptq', null, (t) => { t['model.layers.0.mlp.up_proj.qweight'] = t['model.layers.0.mlp.up_proj.qweight']!.to('float32'); }), nbx.FormatError, /int32/],
      ['a module the model lacks', variant('x', 'awq', null, (t) => {
        for (const s of ['qweight', 'qzeros', 'scales']) t[`model.layers.0.mlp.extra_proj.${s}`] = t[`model.layers.0.mlp.up_proj.${s}`]!;
      }), nbx.ShapeError, /extra_proj/],
    ];
    for (const [label, dir, cls, re] of cases) {
      await assert.rejects(nbx.models.load(await dir), (e: Error) => e instanceof cls && re.test(e.message), label);
    }
    (await nbx.models.load(join(FIX, 'awq'))).dispose();
  } finally { rmSync(tmp, { recursive: true, force: true }); }
});
