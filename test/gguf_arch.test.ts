// GGUF architectures gemma2, gemma3 and phi3 (issue #21): the model fixtures converted as llama.cpp's
// convert_hf_to_gguf.py does (its tensor names — Gemma's four norms per layer, Phi-3's fused attn_qkv and
// ffn_up —, Gemma's norm weights stored as 1 + w, no lm_head when tied, its metadata keys) load with the
// fixture folder's logits. What llama.cpp does not store is set to what llama.cpp assumes, in the
// reference too: Gemma's query scale 1/√head_dim, Gemma 3's layer pattern (every 6th layer global).

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import * as nbx from '../src/index.js';
import { GgufBytes } from './gguf_writer.js';
import type { Tensor } from '../src/tensor/tensor.js';

const FIX = join(import.meta.dirname, '..', '..', 'test', 'fixtures', 'models');

const W = GgufBytes;
type W = GgufBytes;

type Kv = [string, 'u32' | 'f32' | 'str', number | string];
function writeGguf(path: string, kv: Kv[], tensors: [string, Tensor][]): void {
  const head = new W().u32(0x46554747).u32(3).u64(tensors.length).u64(kv.length);
  for (const [k, t, v] of kv) {
    head.str(k);
    if (t === 'u32') head.u32(4).u32(v as number); else if (t === 'f32') head.u32(6).f32(v as number); else head.u32(8).str(v as string);
  }
  const blobs = tensors.map(([, t]) => { const w = new W(); for (const v of t.flatten().tolist() as number[]) w.f32(v); return w.pad(32); });
  let off = 0;
  tensors.forEach(([name, t], i) => {
    head.str(name).u32(t.ndim); for (const n of [...t.shape].reverse()) head.u64(n);
    head.u32(0).u64(off); off += blobs[i]!.parts.length;
  });
  head.pad(32);
  for (const b of blobs) head.parts.push(...b.parts);
  writeFileSync(path, Uint8Array.from(head.parts));
}

const COMMON: Record<string, string> = {
  input_layernorm: 'attn_norm', 'self_attn.q_proj': 'attn_q', 'self_attn.k_proj': 'attn_k', 'self_attn.v_proj': 'attn_v', 'self_attn.o_proj': 'attn_output',
  'self_attn.q_norm': 'attn_q_norm', 'self_attn.k_norm': 'attn_k_norm', 'mlp.gate_proj': 'ffn_gate', 'mlp.up_proj': 'ffn_up', 'mlp.down_proj': 'ffn_down',
  post_attention_layernorm: 'ffn_norm',
};
const GEMMA: Record<string, string> = { post_attention_layernorm: 'post_attention_norm', pre_feedforward_layernorm: 'ffn_norm', post_feedforward_layernorm: 'post_ffw_norm' };
const PHI3: Record<string, string> = { 'self_attn.qkv_proj': 'attn_qkv', 'mlp.gate_up_proj': 'ffn_up' };

/** The fixture `dir` converted as llama.cpp does, written to a temporary file; returns its path and the reference config. */
async function convert(dir: string, arch: 'gemma2' | 'gemma3' | 'phi3'): Promise<{ path: string; cfg: Record<string, unknown>; sd: Record<string, Tensor> }> {
  const cfg = JSON.parse(readFileSync(join(FIX, dir, 'config.json'), 'utf8')) as Record<string, unknown>;
  const { tensors: sd } = await nbx.io.loadSafetensors(join(FIX, dir, 'model.safetensors'));
  const names = { ...COMMON, ...(arch === 'phi3' ? PHI3 : GEMMA) };
  const out: [string, Tensor][] = [];
  for (const [n, t] of Object.entries(sd)) {
    if (n === 'lm_head.weight' && cfg.tie_word_embeddings) continue;
    let g: string | undefined;
    if (n === 'model.embed_tokens.weight') g = 'token_embd.weight';
    else if (n === 'model.norm.weight') g = 'output_norm.weight';
    else if (n === 'lm_head.weight') g = 'output.weight';
    else {
      const m = /^model\.layers\.(\d+)\.(.+)\.weight$/.exec(n)!;
      g = `blk.${m[1]}.${names[m[2]!]!}.weight`;
    }
    assert.ok(!g.includes('undefined'), n);
    out.push([g, arch !== 'phi3' && n.endsWith('norm.weight') ? t.add(1) : t]);
  }
  const H = cfg.num_attention_heads as number, hd = cfg.head_dim as number | undefined ?? (cfg.hidden_size as number) / H;
  const rope = cfg.rope_parameters as Record<string, unknown>;
  const kv: Kv[] = [
    ['general.architecture', 'str', arch], [`${arch}.block_count`, 'u32', cfg.num_hidden_layers as number],
    [`${arch}.context_length`, 'u32', cfg.max_position_embeddings as number], [`${arch}.embedding_length`, 'u32', cfg.hidden_size as number],
    [`${arch}.feed_forward_length`, 'u32', cfg.intermediate_size as number], [`${arch}.attention.head_count`, 'u32', H],
    [`${arch}.attention.head_count_kv`, 'u32', cfg.num_key_value_heads as number], [`${arch}.attention.layer_norm_rms_epsilon`, 'f32', cfg.rms_norm_eps as number],
    [`${arch}.attention.key_length`, 'u32', hd], [`${arch}.attention.value_length`, 'u32', hd],
  ];
  const ref = { ...cfg };
  if (arch === 'gemma2') {
    kv.push([`${arch}.rope.freq_base`, 'f32', rope.rope_theta as number], [`${arch}.attn_logit_softcapping`, 'f32', cfg.attn_logit_softcapping as number],
      [`${arch}.final_logit_softcapping`, 'f32', cfg.final_logit_softcapping as number], [`${arch}.attention.sliding_window`, 'u32', cfg.sliding_window as number]);
    ref.query_pre_attn_scalar = hd;
  } else if (arch === 'gemma3') {
    kv.push([`${arch}.rope.freq_base`, 'f32', (rope.full_attention as Record<string, number>).rope_theta!], [`${arch}.attention.sliding_window`, 'u32', cfg.sliding_window as number]);
    ref.query_pre_attn_scalar = hd;
    ref.layer_types = Array.from({ length: cfg.num_hidden_layers as number }, (_, i) => ((i + 1) % 6 === 0 ? 'full_attention' : 'sliding_attention'));
  } else {
    kv.push([`${arch}.rope.freq_base`, 'f32', rope.rope_theta as number], [`${arch}.rope.dimension_count`, 'u32', hd * ((rope.partial_rotary_factor as number | undefined) ?? 1)],
      [`${arch}.rope.scaling.original_context_length`, 'u32', cfg.original_max_position_embeddings as number]);
  }
  const path = join(mkdtempSync(join(tmpdir(), 'nbx-gguf-arch-')), `${dir}.gguf`);
  writeGguf(path, kv, out);
  return { path, cfg: ref, sd };
}

for (const [dir, arch] of [['gemma2', 'gemma2'], ['gemma3_text', 'gemma3'], ['phi3', 'phi3']] as const) {
  test(`GGUF ${arch}: the ${dir} fixture converted as llama.cpp does gives the folder's logits`, async () => {
    const { path, cfg, sd } = await convert(dir, arch);
    const m = await nbx.models.load(path);
    const ref = nbx.models.fromConfig(cfg);
    ref.load_state_dict(sd);
    try {
      assert.equal(m.config.model_type, cfg.model_type);
      const ids = nbx.tensor([[1, 17, 42, 99, 5, 63, 7, 8, 120]]);
      const want = ref.forward(ids), got = m.forward(ids);
      const err = Number(got.sub(want).abs().max().item()) / Number(want.abs().max().item());
      assert.ok(err < 1e-5, `${arch}: relative logit difference ${err}`);
    } finally { m.dispose(); ref.dispose(); }
  });
}
