// GGUF files keep their block formats (issue #21): the llama fixture stored as Q8_0 loads with
// QuantizedTensor Linear weights (Llama's permuted Q/K rows restored on the packed rows) whose logits
// equal the same model with those weights dequantize()d, and match the float folder within Q8_0's rounding.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import * as nbx from '../src/index.js';
import { GgufBytes } from './gguf_writer.js';
import type { Tensor } from '../src/tensor/tensor.js';

const root = join(import.meta.dirname, '..', '..', 'test', 'fixtures');

test('GGUF Q8_0 Linear weights stay packed (q8_0 QuantizedTensor); logits equal the dequantized model\'s', async () => {
  const q8 = await nbx.models.load(join(root, 'gguf/llama-q8_0.gguf'), { device: 'cpu', dtype: 'float32' });
  const twin = await nbx.models.load(join(root, 'gguf/llama-q8_0.gguf'), { device: 'cpu', dtype: 'float32' });
  const ref = await nbx.models.load(join(root, 'models/llama'), { device: 'cpu', dtype: 'float32' });
  try {
    const lins = q8.named_modules().filter(([, m]) => m instanceof nbx.nn.Linear) as [string, nbx.nn.Linear][];
    const packed = lins.filter(([, l]) => l.is_quantized);
    assert.ok(packed.length > 0);
    for (const [, l] of packed) assert.equal(l.quantized_weight!.format, 'q8_0');
    assert.ok(Object.keys(q8.state_dict()).some((n) => n.endsWith('down_proj.qweight'))); // this fixture's only rows of 32·k elements
    for (const [n, m] of twin.named_modules()) if (m instanceof nbx.nn.Linear && m.is_quantized) { m.dequantize_(); assert.ok(!m.is_quantized, n); }
    const ids = nbx.tensor([[1, 17, 42, 99, 5, 63]]);
    const a = q8.forward(ids), b = twin.forward(ids), want = ref.forward(ids);
    const scale = Number(b.abs().max().item());
    assert.ok(Number(a.sub(b).abs().max().item()) / scale < 1e-5, 'packed vs dequantized');
    assert.ok(Number(a.sub(want).abs().max().item()) / scale < 0.05, 'Q8_0 vs float folder');
  } finally { q8.dispose(); twin.dispose(); ref.dispose(); }
});

const W = GgufBytes;
type W = GgufBytes;

/** ggml's reference quantizers (quantize_row_q8_0_ref / quantize_row_q4_0_ref) of one row into w. */
function quantRow(w: W, x: number[], type: 'q8_0' | 'q4_0'): void {
  for (let b = 0; b < x.length; b += 32) {
    const blk = x.slice(b, b + 32);
    if (type === 'q8_0') {
      const amax = Math.max(...blk.map(Math.abs)), d = amax / 127, id = d ? 1 / d : 0;
      w.f16(d); for (const v of blk) w.u8(Math.round(v * id));
    } else {
      let max = 0; for (const v of blk) if (Math.abs(v) > Math.abs(max)) max = v;
      const d = max / -8, id = d ? 1 / d : 0;
      w.f16(d);
      for (let j = 0; j < 16; j++) {
        const a = Math.min(15, Math.trunc(blk[j]! * id + 8.5)), c = Math.min(15, Math.trunc(blk[j + 16]! * id + 8.5));
        w.u8(a | (c << 4));
      }
    }
  }
}

test('a llama GGUF written as llama.cpp converts it (permuted Q/K, Q4_0 and Q8_0 Linears, Q8_0 output): packed rows in transformers\' order', async () => {
  const cfg = { model_type: 'llama', architectures: ['LlamaForCausalLM'], hidden_size: 64, intermediate_size: 128, num_hidden_layers: 1,
    num_attention_heads: 4, num_key_value_heads: 2, head_dim: 16, vocab_size: 64, max_position_embeddings: 64, rms_norm_eps: 1e-5, tie_word_embeddings: false, hidden_act: 'silu' };
  const src = nbx.models.fromConfig(cfg, { seed: 3, std: 0.1 });
  const sd = src.state_dict();
  const permute = (t: Tensor, heads: number): Tensor => { const [r, c] = t.shape as [number, number]; return t.view([heads, 2, r / heads / 2, c]).transpose(1, 2).contiguous().view([r, c]); };
  const rows = (t: Tensor): number[][] => t.tolist() as number[][];
  const spec: [string, string, 'f32' | 'q8_0' | 'q4_0', (t: Tensor) => Tensor][] = [
    ['token_embd.weight', 'model.embed_tokens.weight', 'f32', (t) => t], ['output_norm.weight', 'model.norm.weight', 'f32', (t) => t],
    ['output.weight', 'lm_head.weight', 'q8_0', (t) => t], ['blk.0.attn_norm.weight', 'model.layers.0.input_layernorm.weight', 'f32', (t) => t],
    ['blk.0.ffn_norm.weight', 'model.layers.0.post_attention_layernorm.weight', 'f32', (t) => t],
    ['blk.0.attn_q.weight', 'model.layers.0.self_attn.q_proj.weight', 'q4_0', (t) => permute(t, 4)],
    ['blk.0.attn_k.weight', 'model.layers.0.self_attn.k_proj.weight', 'q8_0', (t) => permute(t, 2)],
    ['blk.0.attn_v.weight', 'model.layers.0.self_attn.v_proj.weight', 'q8_0', (t) => t], ['blk.0.attn_output.weight', 'model.layers.0.self_attn.o_proj.weight', 'q4_0', (t) => t],
    ['blk.0.ffn_gate.weight', 'model.layers.0.mlp.gate_proj.weight', 'q4_0', (t) => t], ['blk.0.ffn_up.weight', 'model.layers.0.mlp.up_proj.weight', 'q8_0', (t) => t],
    ['blk.0.ffn_down.weight', 'model.layers.0.mlp.down_proj.weight', 'q8_0', (t) => t],
  ];
  const TYPE = { f32: 0, q8_0: 8, q4_0: 2 };
  const meta = new W();
  const kv: [string, number, (w: W) => void][] = [
    ['general.architecture', 8, (w) => w.str('llama')], ['llama.block_count', 4, (w) => w.u32(1)], ['llama.context_length', 4, (w) => w.u32(64)],
    ['llama.embedding_length', 4, (w) => w.u32(64)], ['llama.feed_forward_length', 4, (w) => w.u32(128)], ['llama.attention.head_count', 4, (w) => w.u32(4)],
    ['llama.attention.head_count_kv', 4, (w) => w.u32(2)], ['llama.attention.layer_norm_rms_epsilon', 6, (w) => w.f32(1e-5)], ['llama.rope.freq_base', 6, (w) => w.f32(10000)],
  ];
  for (const [k, type, v] of kv) { meta.str(k).u32(type); v(meta); }
  const head = new W().u32(0x46554747).u32(3).u64(spec.length).u64(kv.length);
  head.parts.push(...meta.parts);
  const blobs = spec.map(([, hf, type, f]) => {
    const w = new W(), t = f(sd[hf]!);
    if (type === 'f32') for (const v of t.flatten().tolist() as number[]) w.f32(v);
    else for (const r of rows(t)) quantRow(w, r, type);
    return w.pad(32);
  });
  let off = 0;
  spec.forEach(([name, hf, type], i) => {
    const shape = sd[hf]!.shape;
    head.str(name).u32(shape.length); for (const n of [...shape].reverse()) head.u64(n);
    head.u32(TYPE[type]).u64(off); off += blobs[i]!.parts.length;
  });
  head.pad(32);
  for (const b of blobs) head.parts.push(...b.parts);
  const path = join(mkdtempSync(join(tmpdir(), 'nbx-qgguf-')), 'tiny.gguf');
  writeFileSync(path, Uint8Array.from(head.parts));

  const m = await nbx.models.load(path);
  const twin = await nbx.models.load(path);
  try {
    const formats = Object.fromEntries(m.named_modules().filter(([, l]) => l instanceof nbx.nn.Linear).map(([n, l]) => [n, (l as nbx.nn.Linear).quantized_weight?.format ?? 'float']));
    assert.deepEqual(formats, {
      'model.layers.0.self_attn.q_proj': 'q4_0', 'model.layers.0.self_attn.k_proj': 'q8_0', 'model.layers.0.self_attn.v_proj': 'q8_0',
      'model.layers.0.self_attn.o_proj': 'q4_0', 'model.layers.0.mlp.gate_proj': 'q4_0', 'model.layers.0.mlp.up_proj': 'q8_0',
      'model.layers.0.mlp.down_proj': 'q8_0', lm_head: 'q8_0',
    });
    // every packed weight dequantizes to the source weight within its format's rounding (Q4_0 clips one end of a
    // block to 7/8 of its max: error ≤ max/8), so its rows are in transformers' order
    for (const [, hf, type] of spec) {
      if (type === 'f32') continue;
      const l = m.get_submodule(hf.replace(/\.weight$/, '')) as nbx.nn.Linear;
      const w = sd[hf]!, err = Number(l.quantized_weight!.dequantize().sub(w).abs().max().item()), amax = Number(w.abs().max().item());
      assert.ok(err < amax * (type === 'q4_0' ? 0.13 : 0.01), `${hf}: ${err} (max ${amax})`);
    }
    for (const [, l] of twin.named_modules()) if (l instanceof nbx.nn.Linear) l.dequantize_();
    const ids = nbx.tensor([[1, 2, 3, 40, 50, 63, 7]]);
    const a = m.forward(ids), b = twin.forward(ids);
    assert.ok(Number(a.sub(b).abs().max().item()) / Number(b.abs().max().item()) < 1e-5);
  } finally { m.dispose(); twin.dispose(); src.dispose(); }
});
