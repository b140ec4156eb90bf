// nbx.models.load('model.gguf'): a llama.cpp GGUF file as a CausalLM (architectures llama, qwen2, qwen3,
// gemma2, gemma3, phi3). The config comes from the file's
// metadata (`<arch>.block_count`, `.embedding_length`, ... as llama.cpp's converter writes them), the
// tensors are renamed to transformers' names, and Llama's query and key rows are put back in
// transformers' order (llama.cpp's converter interleaves the two rotary halves of every head).
//
// Linear weights in a block format (Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, Q2_K..Q6_K) stay packed: the Linear
// holds an nbx.quant.QuantizedTensor of the file's blocks (uint8 rows exactly as llama.cpp stores them;
// Llama's Q/K row permutation is undone on the packed rows, which are whole output features), and runs
// through the device's dequantizing kernels, on devices whose quant features list the format (the CPU:
// all). Everything else (the token embedding, norms, float tensors, formats a device lacks) is
// dequantized to the model dtype at load (src/io/gguf.ts decodes every float, 32-element block and
// K-quant type), as is lm_head when tied to the embedding.
// The tokenizer is rebuilt from the metadata as transformers' GGUF loader does it (tokenizerFromGguf:
// byte-level BPE and SentencePiece); a file without one loads with `model.tokenizer` null.

import { GgufFile, type GgufValue } from '../io/gguf.js';
import type { TensorInfo } from '../io/index.js';
import { FormatError, UnsupportedError } from '../errors.js';
import { Tensor } from '../tensor/tensor.js';
import { Device, backendFor, type DeviceLike } from '../backend/backend.js';
import { hasKernel, kernelFeatures } from '../kernels/registry.js';
import { formatOfGgml, makeLayout } from '../quant/formats.js';
import { onDevice, type QuantDecl } from './load_quant.js';
import type { DTypeLike } from '../dtype/dtypes.js';
import { assembleModel, type LoadModelOptions, type WeightSource } from './load.js';
import type { CausalLMModel } from './causal_lm.js';
import { PretrainedTokenizer, type TokenizerConfig } from '../tokenizer/index.js';

const OP = 'models.load';

/** GGUF architectures this loader maps, and their transformers model_type. */
const ARCHES: Record<string, { modelType: string; architecture: string; permuteQK: boolean }> = {
  llama: { modelType: 'llama', architecture: 'LlamaForCausalLM', permuteQK: true },
  qwen2: { modelType: 'qwen2', architecture: 'Qwen2ForCausalLM', permuteQK: false },
  qwen3: { modelType: 'qwen3', architecture: 'Qwen3ForCausalLM', permuteQK: false },
  gemma2: { modelType: 'gemma2', architecture: 'Gemma2ForCausalLM', permuteQK: false },
  gemma3: { modelType: 'gemma3_text', architecture: 'Gemma3ForCausalLM', permuteQK: false },
  phi3: { modelType: 'phi3', architecture: 'Phi3ForCausalLM', permuteQK: false },
};

/**
 * Per-architecture tensor names where llama.cpp's differ from the common ones: Gemma 2/3's four norms
 * per layer (post_attention_norm is transformers' post_attention_layernorm, ffn_norm its
 * pre_feedforward_layernorm, post_ffw_norm its post_feedforward_layernorm); Phi-3's fused projections
 * (attn_qkv, and ffn_up holding gate_up_proj).
 */
const ARCH_LAYER_NAMES: Record<string, Record<string, string>> = {
  gemma2: { post_attention_norm: 'post_attention_layernorm', ffn_norm: 'pre_feedforward_layernorm', post_ffw_norm: 'post_feedforward_layernorm' },
  gemma3: { post_attention_norm: 'post_attention_layernorm', ffn_norm: 'pre_feedforward_layernorm', post_ffw_norm: 'post_feedforward_layernorm' },
  phi3: { attn_qkv: 'self_attn.qkv_proj', ffn_up: 'mlp.gate_up_proj' },
};

/** llama.cpp's per-layer tensor names → transformers'. */
const LAYER_NAMES: Record<string, string> = {
  attn_norm: 'input_layernorm', attn_q: 'self_attn.q_proj', attn_k: 'self_attn.k_proj', attn_v: 'self_attn.v_proj',
  attn_output: 'self_attn.o_proj', attn_q_norm: 'self_attn.q_norm', attn_k_norm: 'self_attn.k_norm',
  ffn_norm: 'post_attention_layernorm', ffn_gate: 'mlp.gate_proj', ffn_up: 'mlp.up_proj', ffn_down: 'mlp.down_proj',
};
const TOP_NAMES: Record<string, string> = { 'token_embd.weight': 'model.embed_tokens.weight', 'output_norm.weight': 'model.norm.weight', 'output.weight': 'lm_head.weight' };

/** transformers' name of a GGUF tensor, or the GGUF name itself (then reported as unexpected by the loader). */
export function hfName(ggufName: string, arch = 'llama'): string {
  if (TOP_NAMES[ggufName]) return TOP_NAMES[ggufName]!;
  const m = /^blk\.(\d+)\.(\w+)\.(weight|bias)$/.exec(ggufName);
  const part = m ? ARCH_LAYER_NAMES[arch]?.[m[2]!] ?? LAYER_NAMES[m[2]!] : undefined;
  return m && part ? `model.layers.${m[1]}.${part}.${m[3]}` : ggufName;
}

function num(md: Map<string, GgufValue>, key: string, path: string, required: boolean): number | undefined {
  const v = md.get(key);
  if (v === undefined) {
    if (required) throw new FormatError(OP, `${path}: GGUF metadata lacks '${key}'`);
    return undefined;
  }
  const n = typeof v === 'bigint' ? Number(v) : v;
  if (typeof n !== 'number' || !Number.isFinite(n)) throw new FormatError(OP, `${path}: GGUF metadata '${key}' is ${JSON.stringify(String(v))}, not a number`);
  return n;
}

/** config.json's content for a GGUF file's metadata (what llama.cpp's converter wrote from it). */
export function configFromGguf(f: GgufFile): Record<string, unknown> {
  const md = f.metadata, path = f.path;
  const arch = md.get('general.architecture');
  if (typeof arch !== 'string') throw new FormatError(OP, `${path}: GGUF metadata lacks general.architecture`);
  const a = ARCHES[arch];
  if (!a) throw new UnsupportedError(OP, `${path}: GGUF architecture '${arch}' is not supported yet (${Object.keys(ARCHES).join(', ')} are)`);
  const emb = f.tensors.get('token_embd.weight');
  if (!emb) throw new FormatError(OP, `${path}: no token_embd.weight tensor`);
  const scaling = md.get(`${arch}.rope.scaling.type`);
  if (scaling !== undefined && scaling !== 'none' && scaling !== 'linear') throw new UnsupportedError(OP, `${path}: GGUF rope scaling '${String(scaling)}' is not mapped yet (none and linear are)`);
  if (f.tensors.has('rope_factors_long.weight') || f.tensors.has('rope_factors_short.weight')) throw new UnsupportedError(OP, `${path}: LongRoPE factors (rope_factors_long/short) are not mapped yet`);
  const heads = num(md, `${arch}.attention.head_count`, path, true)!;
  const cfg: Record<string, unknown> = {
    model_type: a.modelType, architectures: [a.architecture],
    hidden_size: num(md, `${arch}.embedding_length`, path, true),
    intermediate_size: num(md, `${arch}.feed_forward_length`, path, true),
    num_hidden_layers: num(md, `${arch}.block_count`, path, true),
    num_attention_heads: heads,
    num_key_value_heads: num(md, `${arch}.attention.head_count_kv`, path, false) ?? heads,
    rms_norm_eps: num(md, `${arch}.attention.layer_norm_rms_epsilon`, path, true),
    rope_theta: num(md, `${arch}.rope.freq_base`, path, false) ?? 10000,
    max_position_embeddings: num(md, `${arch}.context_length`, path, false) ?? 2048,
    vocab_size: emb.shape[0],
    tie_word_embeddings: !f.tensors.has('output.weight'),
    hidden_act: 'silu',
    bos_token_id: num(md, 'tokenizer.ggml.bos_token_id', path, false),
    eos_token_id: num(md, 'tokenizer.ggml.eos_token_id', path, false),
  };
  const headDim = num(md, `${arch}.attention.key_length`, path, false);
  if (headDim !== undefined) cfg.head_dim = headDim;
  if (arch === 'qwen2') cfg.attention_bias = true;
  if (scaling === 'linear') cfg.rope_scaling = { rope_type: 'linear', factor: num(md, `${arch}.rope.scaling.factor`, path, true) };
  if (arch === 'gemma2' || arch === 'gemma3') {
    const layers = cfg.num_hidden_layers as number, hidden = cfg.hidden_size as number;
    delete cfg.hidden_act;
    cfg.hidden_activation = 'gelu_pytorch_tanh';
    cfg.head_dim = headDim ?? hidden / heads;
    // llama.cpp scales queries by 1/√head_dim, except the 27B models (46 / 62 layers): 1/√(hidden/heads)
    cfg.query_pre_attn_scalar = (arch === 'gemma2' && layers === 46) || (arch === 'gemma3' && layers === 62) ? hidden / heads : cfg.head_dim;
    cfg.sliding_window = num(md, `${arch}.attention.sliding_window`, path, false) ?? null;
    cfg.attn_logit_softcapping = num(md, `${arch}.attn_logit_softcapping`, path, false) ?? null;
    cfg.final_logit_softcapping = num(md, `${arch}.final_logit_softcapping`, path, false) ?? null;
    if (arch === 'gemma3') {
      // llama.cpp: every 6th layer global (rope.freq_base), the others local with base 10000
      cfg.rope_theta = num(md, `${arch}.rope.freq_base`, path, false) ?? 1e6;
      cfg.rope_local_base_freq = 10000;
      cfg.sliding_window_pattern = num(md, `${arch}.attention.sliding_window_pattern`, path, false) ?? 6;
    }
  }
  if (arch === 'phi3') {
    const dims = num(md, `${arch}.rope.dimension_count`, path, false), hd = headDim ?? (cfg.hidden_size as number) / heads;
    if (dims !== undefined) cfg.partial_rotary_factor = dims / hd;
    const orig = num(md, `${arch}.rope.scaling.original_context_length`, path, false);
    if (orig !== undefined) cfg.original_max_position_embeddings = orig;
    const sw = num(md, `${arch}.attention.sliding_window`, path, false);
    cfg.sliding_window = sw ? sw : null;
  }
  return cfg;
}

/** Linear weights of the model (transformers names) that may stay packed. */
const LINEAR_WEIGHT = /^(model\.layers\.\d+\.(self_attn\.([qkvo]|qkv)_proj|mlp\.(gate|up|down|gate_up)_proj)|lm_head)\.weight$/;

/**
 * The file's tensors under transformers' names, dequantized (and Llama's Q/K rows restored) on get();
 * Linear weights in a block format the device's quant kernels take are given packed as `X.qweight`
 * (decls says their layouts).
 */
class GgufWeights implements WeightSource {
  private readonly byHf = new Map<string, string>();
  readonly decls = new Map<string, QuantDecl>();
  constructor(private readonly f: GgufFile, private readonly cfg: Record<string, unknown>, private readonly permuteQK: boolean, device: Device, private readonly arch: string) {
    backendFor(device); // a lazily started backend registers its kernels (and features) now
    const feats = hasKernel('quant_matmul', device.type) ? kernelFeatures('quant', device).formats : [];
    for (const n of f.tensors.keys()) {
      const hf = hfName(n, arch), t = f.tensors.get(n)!;
      const format = formatOfGgml(t.typeName);
      if (format && feats.includes(format) && LINEAR_WEIGHT.test(hf) && t.shape.length === 2) {
        const p = hf.slice(0, -'.weight'.length);
        this.decls.set(p, { layout: makeLayout(OP, format, t.shape[0]!, t.shape[1]!), asymmetric: false, perTensor: false });
        this.byHf.set(`${p}.qweight`, n);
      } else this.byHf.set(hf, n);
    }
  }
  names(): string[] { return [...this.byHf.keys()]; }
  info(name: string): TensorInfo {
    const t = this.f.tensors.get(this.byHf.get(name)!)!;
    const d = name.endsWith('.qweight') ? this.decls.get(name.slice(0, -'.qweight'.length)) : undefined;
    if (d) return { name, dtype: 'uint8', shape: [d.layout.n, d.layout.rowBytes], byteOffset: t.offset, byteLength: t.byteLength };
    return { name, dtype: 'float32', shape: t.shape, byteOffset: t.offset, byteLength: t.byteLength };
  }
  private qkHeads(name: string): number {
    return /self_attn\.q_proj\.(q?weight)$/.test(name) ? this.cfg.num_attention_heads as number
      : /self_attn\.k_proj\.(q?weight)$/.test(name) ? this.cfg.num_key_value_heads as number : 0;
  }
  async get(name: string, opts: { device?: DeviceLike; dtype?: DTypeLike } = {}): Promise<Tensor> {
    const d = name.endsWith('.qweight') ? this.decls.get(name.slice(0, -'.qweight'.length)) : undefined;
    if (d) {
      let b = await this.f.bytes(this.byHf.get(name)!);
      const heads = this.qkHeads(name), rb = d.layout.rowBytes, rows = d.layout.n;
      if (this.permuteQK && heads > 0) {
        // llama.cpp's row order per head: [r0, r_h, r1, r_h+1, ...] (h = rows/heads/2); undone row by row
        const out = new Uint8Array(b.length), half = rows / heads / 2;
        for (let hd = 0; hd < heads; hd++) for (let i = 0; i < half; i++) for (let two = 0; two < 2; two++) {
          const src = hd * 2 * half + i * 2 + two, dst = hd * 2 * half + two * half + i;
          out.set(b.subarray(src * rb, (src + 1) * rb), dst * rb);
        }
        b = out;
      }
      return onDevice(b, [rows, rb], opts.device ?? 'cpu');
    }
    let t = await this.f.dequantize(this.byHf.get(name)!);
    if ((this.arch === 'gemma2' || this.arch === 'gemma3') && /norm\.weight$/.test(name)) {
      // llama.cpp's converter stores Gemma's norm weights as 1 + w (its RMSNorm multiplies by the weight)
      const w = t.sub(1); t.dispose(); t = w;
    }
    const heads = this.qkHeads(name);
    if (this.permuteQK && heads > 0) {
      // llama.cpp: w.reshape(heads, 2, rows / heads / 2, cols).swapaxes(1, 2); undone here
      const [rows, cols] = t.shape as [number, number];
      const back = t.view([heads, rows / heads / 2, 2, cols]).transpose(1, 2).contiguous().view([rows, cols]);
      t.dispose(); t = back;
    }
    const out = t.to({ dtype: opts.dtype ?? 'float32', device: opts.device ?? 'cpu' });
    if (out !== t) t.dispose();
    return out;
  }
  async close(): Promise<void> { await this.f.close(); }
}

/** Loads a GGUF file (see the top of this file). */
export async function loadGguf(path: string, opts: LoadModelOptions & { device?: DeviceLike; dtype?: DTypeLike } = {}): Promise<CausalLMModel> {
  const f = await GgufFile.open(path);
  let config: Record<string, unknown>;
  try { config = configFromGguf(f); } catch (e) { await f.close(); throw e; }
  const arch = f.metadata.get('general.architecture') as string;
  return assembleModel({
    config, configName: `${path} (GGUF metadata)`,
    generationConfig: undefined, generationConfigName: path,
    weights: async () => new GgufWeights(f, config, ARCHES[arch]!.permuteQK, Device.of(opts.device ?? 'cpu'), arch), weightsName: path,
    tokenizer: async () => tokenizerFromGguf(f),
  }, opts);
}

/**
 * Pre-tokenizer regexes of the `tokenizer.ggml.pre` names llama.cpp writes for byte-level BPE
 * tokenizers (the Split patterns of the tokenizer.json those files were converted from).
 */
const PRE_REGEX: Record<string, string> = {
  'llama-bpe': "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+",
  'qwen2': "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+",
  gpt2: "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+",
};
PRE_REGEX.llama3 = PRE_REGEX['llama-bpe']!;
PRE_REGEX.default = PRE_REGEX.gpt2!;

/**
 * The tokenizer in a GGUF file's metadata, rebuilt as transformers' GGUF loader rebuilds it
 * (transformers/integrations/gguf/gguf_tokenizer_mapping.py): byte-level BPE ('gpt2' model, with a
 * known `tokenizer.ggml.pre`) and SentencePiece BPE ('llama' model: byte fallback, Metaspace, merges
 * from the file or recovered from the pieces' scores). As there, control tokens are special added
 * tokens and no BOS is added by the tokenizer (transformers ignores `tokenizer.ggml.add_bos_token`).
 * Returns null when the file has no tokenizer; other models are an UnsupportedError.
 */
export function tokenizerFromGguf(f: GgufFile): PretrainedTokenizer | null {
  const md = f.metadata, path = f.path;
  const model = md.get('tokenizer.ggml.model');
  if (model === undefined) return null;
  if (model !== 'gpt2' && model !== 'llama') throw new UnsupportedError(OP, `${path}: GGUF tokenizer model '${String(model)}' is not read yet ('gpt2' byte-level BPE and 'llama' SentencePiece are)`);
  const tokens = md.get('tokenizer.ggml.tokens'), types = md.get('tokenizer.ggml.token_type') ?? [];
  if (!Array.isArray(tokens) || !tokens.every((t) => typeof t === 'string')) throw new FormatError(OP, `${path}: tokenizer.ggml.tokens must be a list of strings`);
  if (!Array.isArray(types)) throw new FormatError(OP, `${path}: tokenizer.ggml.token_type must be a list`);
  const pieces = tokens as string[];
  const vocab: Record<string, number> = Object.create(null) as Record<string, number>; // a piece may be spelled '__proto__'
  pieces.forEach((t, id) => { vocab[t] = id; });
  const idOf = (key: string): number | undefined => { const v = md.get(key); return v === undefined ? undefined : Number(v); };
  const tokenOf = (id: number | undefined): string | null => (id !== undefined && id >= 0 && id < pieces.length ? pieces[id]! : null);
  const unk = tokenOf(idOf('tokenizer.ggml.unknown_token_id'));
  // control tokens (type 3) are special; for SentencePiece the unknown piece is special too
  const added = pieces.flatMap((t, id) => {
    const type = Number(types[id] ?? 1);
    const special = type === 3 || (model === 'llama' && t === unk);
    return special || type === 4 ? [{ id, content: t, single_word: false, lstrip: false, rstrip: false, normalized: false, special }] : [];
  });
  let merges = md.get('tokenizer.ggml.merges');
  if (merges !== undefined && (!Array.isArray(merges) || !merges.every((m) => typeof m === 'string'))) throw new FormatError(OP, `${path}: tokenizer.ggml.merges must be a list of strings`);
  let json: Record<string, unknown>;
  if (model === 'gpt2') {
    const pre = String(md.get('tokenizer.ggml.pre') ?? 'default');
    const regex = PRE_REGEX[pre];
    if (!regex) throw new UnsupportedError(OP, `${path}: GGUF pre-tokenizer '${pre}' is not known (${Object.keys(PRE_REGEX).join(', ')} are)`);
    json = {
      normalizer: null,
      pre_tokenizer: { type: 'Sequence', pretokenizers: [
        { type: 'Split', pattern: { Regex: regex }, behavior: 'Isolated', invert: false },
        { type: 'ByteLevel', add_prefix_space: false, trim_offsets: true, use_regex: false },
      ] },
      decoder: { type: 'ByteLevel', add_prefix_space: true, trim_offsets: true, use_regex: true },
      model: { type: 'BPE', dropout: null, unk_token: null, continuing_subword_prefix: '', end_of_word_suffix: '', fuse_unk: false,
        byte_fallback: false, ignore_merges: false, vocab, merges: merges ?? [] },
    };
  } else {
    const scores = md.get('tokenizer.ggml.scores');
    if (merges === undefined) {
      if (!Array.isArray(scores) || scores.length !== pieces.length) throw new FormatError(OP, `${path}: a SentencePiece tokenizer without merges needs tokenizer.ggml.scores, one per token`);
      merges = mergesFromScores(pieces, vocab, scores.map(Number)).map(([l, r]) => `${l} ${r}`);
    }
    const prefix = md.get('tokenizer.ggml.add_space_prefix') !== false;
    json = {
      normalizer: null,
      pre_tokenizer: { type: 'Metaspace', replacement: '\u2581', prepend_scheme: prefix ? 'first' : 'never', split: false },
      decoder: { type: 'Sequence', decoders: [
        { type: 'Replace', pattern: { String: '\u2581' }, content: ' ' }, { type: 'ByteFallback' }, { type: 'Fuse' },
        ...(prefix ? [{ type: 'Strip', content: ' ', start: 1, stop: 0 }] : []),
      ] },
      model: { type: 'BPE', dropout: null, unk_token: null, continuing_subword_prefix: null, end_of_word_suffix: null, fuse_unk: true,
        byte_fallback: true, ignore_merges: false, vocab, merges },
    };
  }
  const tokenizerJson = {
    version: '1.0', truncation: null, padding: null, added_tokens: added, ...json,
    post_processor: { type: 'TemplateProcessing', single: [{ Sequence: { id: 'A', type_id: 0 } }],
      pair: [{ Sequence: { id: 'A', type_id: 0 } }, { Sequence: { id: 'B', type_id: 1 } }], special_tokens: {} },
  };
  const config: TokenizerConfig = {
    bos_token: tokenOf(idOf('tokenizer.ggml.bos_token_id')), eos_token: tokenOf(idOf('tokenizer.ggml.eos_token_id')), unk_token: unk,
    pad_token: tokenOf(idOf('tokenizer.ggml.padding_token_id')), clean_up_tokenization_spaces: false,
  };
  const template = md.get('tokenizer.chat_template');
  if (typeof template === 'string') config.chat_template = template;
  return new PretrainedTokenizer(tokenizerJson, config, null);
}

/**
 * transformers' generate_merges(vocab, scores): every split of every piece into two pieces of the
 * vocabulary, each piece's splits ordered by the halves' ids, then all of them by (score, left length,
 * right length), highest first, ties kept in that order (a stable sort, as Python's).
 */
function mergesFromScores(pieces: string[], vocab: Record<string, number>, scores: number[]): [string, string][] {
  const scoreOf = new Map<string, number>();
  pieces.forEach((p, i) => { scoreOf.set(p, scores[i]!); }); // a repeated piece keeps its first place, its last score
  const all: [string, string, number][] = [];
  for (const [piece, score] of scoreOf) {
    const chars = [...piece]; // split between code points, as Python's str indexing
    const local: [string, string, number][] = [];
    for (let k = 1; k < chars.length; k++) {
      const l = chars.slice(0, k).join(''), r = chars.slice(k).join('');
      if (l in vocab && r in vocab) local.push([l, r, score]);
    }
    local.sort((a, b) => vocab[a[0]]! - vocab[b[0]]! || vocab[a[1]]! - vocab[b[1]]!);
    all.push(...local);
  }
  const len = (s: string): number => [...s].length;
  all.sort((a, b) => b[2] - a[2] || len(b[0]) - len(a[0]) || len(b[1]) - len(a[1]));
  return all.map(([l, r]) => [l, r]);
}
