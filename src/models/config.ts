// config.json → one normalized configuration. Hugging Face configs come in two styles: transformers 4
// (`rope_theta` + `rope_scaling` with a `type` or `rope_type` key; gemma3's `rope_local_base_freq`) and
// transformers 5 (`rope_parameters`, flat or per layer type). Keys a config leaves out take the
// defaults of the family's transformers configuration class, as `from_pretrained` would.

import { FormatError, UnsupportedError } from '../errors.js';

export type LayerType = 'full_attention' | 'sliding_attention';

/** One RoPE parameterization (transformers' RopeParameters), standardized. */
export interface RopeParameters {
  rope_type: string;
  rope_theta: number;
  factor?: number;
  partial_rotary_factor?: number;
  original_max_position_embeddings?: number;
  low_freq_factor?: number;
  high_freq_factor?: number;
  attention_factor?: number | null;
  beta_fast?: number | null;
  beta_slow?: number | null;
  mscale?: number | null;
  mscale_all_dim?: number | null;
  truncate?: boolean;
  short_factor?: number[];
  long_factor?: number[];
}

export interface ModelConfig {
  /** Every key of config.json as read (family-specific keys live here too). */
  readonly raw: Readonly<Record<string, unknown>>;
  model_type: string;
  vocab_size: number;
  hidden_size: number;
  intermediate_size: number;
  num_hidden_layers: number;
  num_attention_heads: number;
  num_key_value_heads: number;
  head_dim: number;
  rms_norm_eps: number;
  max_position_embeddings: number;
  tie_word_embeddings: boolean;
  attention_bias: boolean;
  mlp_bias: boolean;
  hidden_act: string;
  /** Per layer: full or sliding-window attention. */
  layer_types: LayerType[];
  /** Window of sliding-window layers (a query sees this many positions, itself included); null: none. */
  sliding_window: number | null;
  /** RoPE per layer type (both keys always present). */
  rope: Record<LayerType, RopeParameters>;
  /** `dtype` / `torch_dtype` of the checkpoint, as written. */
  checkpoint_dtype: string | null;
  /** transformers' attention implementation this family runs by default ('sdpa' or 'eager'). */
  attn_implementation: 'sdpa' | 'eager';
  // family extras (0 / null where the family has none)
  attn_logit_softcapping: number | null;
  final_logit_softcapping: number | null;
  query_pre_attn_scalar: number | null;
  num_experts: number;
  num_experts_per_tok: number;
  moe_intermediate_size: number;
  norm_topk_prob: boolean;
  decoder_sparse_step: number;
  mlp_only_layers: number[];
}

export const SUPPORTED_MODEL_TYPES = ['llama', 'mistral', 'qwen2', 'qwen3', 'mixtral', 'qwen3_moe', 'phi3', 'gemma2', 'gemma3_text'] as const;
export type SupportedModelType = typeof SUPPORTED_MODEL_TYPES[number];
export const SUPPORTED_ROPE_TYPES = ['default', 'linear', 'dynamic', 'llama3', 'yarn', 'longrope'] as const;

/** The defaults of each family's transformers configuration class, for keys a config.json leaves out. */
const FAMILY_DEFAULTS: Record<SupportedModelType, Record<string, unknown>> = {
  llama: { vocab_size: 32000, hidden_size: 4096, intermediate_size: 11008, num_hidden_layers: 32, num_attention_heads: 32, hidden_act: 'silu', max_position_embeddings: 2048, rms_norm_eps: 1e-6, rope_theta: 10000, tie_word_embeddings: false, attention_bias: false, mlp_bias: false },
  mistral: { vocab_size: 32000, hidden_size: 4096, intermediate_size: 14336, num_hidden_layers: 32, num_attention_heads: 32, num_key_value_heads: 8, hidden_act: 'silu', max_position_embeddings: 4096 * 32, rms_norm_eps: 1e-6, rope_theta: 10000, sliding_window: 4096, tie_word_embeddings: false },
  qwen2: { vocab_size: 151936, hidden_size: 4096, intermediate_size: 22016, num_hidden_layers: 32, num_attention_heads: 32, num_key_value_heads: 32, hidden_act: 'silu', max_position_embeddings: 32768, rms_norm_eps: 1e-6, rope_theta: 10000, use_sliding_window: false, sliding_window: 4096, max_window_layers: 28, tie_word_embeddings: false },
  qwen3: { vocab_size: 151936, hidden_size: 4096, intermediate_size: 22016, num_hidden_layers: 32, num_attention_heads: 32, num_key_value_heads: 32, head_dim: 128, hidden_act: 'silu', max_position_embeddings: 32768, rms_norm_eps: 1e-6, rope_theta: 10000, attention_bias: false, use_sliding_window: false, sliding_window: 4096, max_window_layers: 28, tie_word_embeddings: false },
  mixtral: { vocab_size: 32000, hidden_size: 4096, intermediate_size: 14336, num_hidden_layers: 32, num_attention_heads: 32, num_key_value_heads: 8, hidden_act: 'silu', max_position_embeddings: 4096 * 32, rms_norm_eps: 1e-5, rope_theta: 1e6, sliding_window: null, num_experts_per_tok: 2, num_local_experts: 8, tie_word_embeddings: false },
  qwen3_moe: { vocab_size: 151936, hidden_size: 2048, intermediate_size: 6144, num_hidden_layers: 24, num_attention_heads: 32, num_key_value_heads: 4, hidden_act: 'silu', max_position_embeddings: 32768, rms_norm_eps: 1e-6, rope_theta: 10000, attention_bias: false, use_sliding_window: false, sliding_window: 4096, max_window_layers: 28, decoder_sparse_step: 1, moe_intermediate_size: 768, num_experts_per_tok: 8, num_experts: 128, norm_topk_prob: false, mlp_only_layers: [], tie_word_embeddings: false },
  phi3: { vocab_size: 32064, hidden_size: 3072, intermediate_size: 8192, num_hidden_layers: 32, num_attention_heads: 32, hidden_act: 'silu', max_position_embeddings: 4096, rms_norm_eps: 1e-5, rope_theta: 10000, partial_rotary_factor: 1.0, sliding_window: null, tie_word_embeddings: false },
  gemma2: { vocab_size: 256000, hidden_size: 2304, intermediate_size: 9216, num_hidden_layers: 26, num_attention_heads: 8, num_key_value_heads: 4, head_dim: 256, hidden_activation: 'gelu_pytorch_tanh', max_position_embeddings: 8192, rms_norm_eps: 1e-6, rope_theta: 10000, attention_bias: false, query_pre_attn_scalar: 256, sliding_window: 4096, final_logit_softcapping: 30.0, attn_logit_softcapping: 50.0, tie_word_embeddings: true },
  gemma3_text: { vocab_size: 262208, hidden_size: 2304, intermediate_size: 9216, num_hidden_layers: 26, num_attention_heads: 8, num_key_value_heads: 4, head_dim: 256, hidden_activation: 'gelu_pytorch_tanh', max_position_embeddings: 131072, rms_norm_eps: 1e-6, rope_theta: 1e6, attention_bias: false, query_pre_attn_scalar: 256, sliding_window: 4096, final_logit_softcapping: null, attn_logit_softcapping: null, rope_local_base_freq: 10000, sliding_window_pattern: 6, tie_word_embeddings: true },
};

const isObj = (v: unknown): v is Record<string, unknown> => v !== null && typeof v === 'object' && !Array.isArray(v);

function num(cfg: Record<string, unknown>, key: string, where: string): number {
  const v = cfg[key];
  if (typeof v !== 'number' || !Number.isFinite(v)) {
    throw new FormatError('models.config', `${where}: '${key}' must be a number, got ${JSON.stringify(v)}`);
  }
  return v;
}
function positiveInt(cfg: Record<string, unknown>, key: string, where: string): number {
  const v = num(cfg, key, where);
  if (!Number.isInteger(v) || v <= 0) throw new FormatError('models.config', `${where}: '${key}' must be a positive integer, got ${v}`);
  return v;
}

/** Standardizes one RoPE dict (transformers' standardize_rope_params) and checks its type is supported. */
function standardizeRope(d: Record<string, unknown>, theta: number, partial: number | undefined, maxPos: number, origMax: number | undefined, where: string): RopeParameters {
  const rope_type = String(d.rope_type ?? d.type ?? 'default');
  if (!(SUPPORTED_ROPE_TYPES as readonly string[]).includes(rope_type)) {
    throw new UnsupportedError('models.config', `${where}: RoPE type '${rope_type}' is not supported; supported: ${SUPPORTED_ROPE_TYPES.join(', ')}`);
  }
  const r: RopeParameters = { ...(d as Partial<RopeParameters>), rope_type, rope_theta: typeof d.rope_theta === 'number' ? d.rope_theta : theta };
  delete (r as unknown as Record<string, unknown>).type;
  if (partial !== undefined) r.partial_rotary_factor = partial;
  if (['llama3', 'yarn', 'longrope'].includes(rope_type)) {
    // Phi-3 keeps the pretraining length outside the RoPE dict; transformers gives that one priority.
    if (origMax !== undefined) r.original_max_position_embeddings = origMax;
    else r.original_max_position_embeddings ??= maxPos;
  }
  const need = (k: keyof RopeParameters): void => {
    if (typeof r[k] !== 'number') throw new FormatError('models.config', `${where}: RoPE type '${rope_type}' needs a numeric '${k}', got ${JSON.stringify(r[k])}`);
  };
  if (rope_type === 'linear' || rope_type === 'dynamic' || rope_type === 'llama3') need('factor');
  if (rope_type === 'llama3') { need('low_freq_factor'); need('high_freq_factor'); }
  if (rope_type === 'longrope' && (!Array.isArray(r.short_factor) || !Array.isArray(r.long_factor))) {
    throw new FormatError('models.config', `${where}: RoPE type 'longrope' needs 'short_factor' and 'long_factor' lists`);
  }
  return r;
}

/** Parses a config.json object into a ModelConfig; `where` names the file in errors. */
export function parseConfig(json: unknown, where = 'config.json'): ModelConfig {
  if (!isObj(json)) throw new FormatError('models.config', `${where}: expected a JSON object, got ${Array.isArray(json) ? 'an array' : typeof json}`);
  const model_type = json.model_type;
  if (typeof model_type !== 'string') {
    throw new FormatError('models.config', `${where} has no 'model_type'; supported model types: ${SUPPORTED_MODEL_TYPES.join(', ')}`);
  }
  if (!(SUPPORTED_MODEL_TYPES as readonly string[]).includes(model_type)) {
    const hint = model_type === 'gemma3' ? " (a multimodal Gemma 3 checkpoint: only the text model 'gemma3_text' is supported)" : '';
    throw new UnsupportedError('models.config', `model_type '${model_type}' is not supported${hint}; supported model types: ${SUPPORTED_MODEL_TYPES.join(', ')}`);
  }
  const family = model_type as SupportedModelType;
  const c: Record<string, unknown> = { ...FAMILY_DEFAULTS[family] };
  for (const [k, v] of Object.entries(json)) if (v !== undefined) c[k] = v;
  // transformers treats an explicit null like an absent key for these
  for (const k of ['num_key_value_heads', 'head_dim', 'tie_word_embeddings']) if (c[k] === null) delete c[k];

  const hidden_size = positiveInt(c, 'hidden_size', where);
  const num_attention_heads = positiveInt(c, 'num_attention_heads', where);
  const num_key_value_heads = c.num_key_value_heads === undefined ? num_attention_heads : positiveInt(c, 'num_key_value_heads', where);
  if (num_attention_heads % num_key_value_heads !== 0) {
    throw new FormatError('models.config', `${where}: num_attention_heads (${num_attention_heads}) must be a multiple of num_key_value_heads (${num_key_value_heads})`);
  }
  const head_dim = c.head_dim === undefined ? Math.floor(hidden_size / num_attention_heads) : positiveInt(c, 'head_dim', where);
  const num_hidden_layers = positiveInt(c, 'num_hidden_layers', where);
  const max_position_embeddings = positiveInt(c, 'max_position_embeddings', where);

  // sliding windows and layer types, as each family's configuration class derives them
  let sliding_window: number | null = c.sliding_window === null || c.sliding_window === undefined ? null : positiveInt(c, 'sliding_window', where);
  if ((family === 'qwen2' || family === 'qwen3' || family === 'qwen3_moe') && !c.use_sliding_window) sliding_window = null;
  let layer_types: LayerType[];
  if (Array.isArray(c.layer_types)) {
    if (c.layer_types.length !== num_hidden_layers || c.layer_types.some((t) => t !== 'full_attention' && t !== 'sliding_attention')) {
      throw new FormatError('models.config', `${where}: 'layer_types' must list 'full_attention' or 'sliding_attention' for each of the ${num_hidden_layers} layers, got ${JSON.stringify(c.layer_types)}`);
    }
    layer_types = c.layer_types as LayerType[];
  } else if (family === 'gemma2') {
    layer_types = Array.from({ length: num_hidden_layers }, (_, i) => (i % 2 === 0 ? 'sliding_attention' : 'full_attention'));
  } else if (family === 'gemma3_text') {
    const pattern = positiveInt(c, 'sliding_window_pattern', where);
    layer_types = Array.from({ length: num_hidden_layers }, (_, i) => ((i + 1) % pattern === 0 ? 'full_attention' : 'sliding_attention'));
  } else if (family === 'qwen2' || family === 'qwen3' || family === 'qwen3_moe') {
    const mwl = typeof c.max_window_layers === 'number' ? c.max_window_layers : num_hidden_layers;
    layer_types = Array.from({ length: num_hidden_layers }, (_, i) => (sliding_window !== null && i >= mwl ? 'sliding_attention' : 'full_attention'));
  } else {
    // llama, mistral, mixtral, phi3: one mask for every layer (a sliding one when the config sets a window)
    layer_types = Array.from({ length: num_hidden_layers }, () => (sliding_window !== null && family !== 'llama' ? 'sliding_attention' : 'full_attention'));
  }
  if (layer_types.includes('sliding_attention') && sliding_window === null) {
    throw new FormatError('models.config', `${where}: 'layer_types' has sliding_attention layers but 'sliding_window' is not set`);
  }

  // RoPE: transformers 5 `rope_parameters` (flat or per layer type), else transformers 4 keys
  const theta = typeof c.rope_theta === 'number' ? c.rope_theta : 10000;
  const partial = typeof c.partial_rotary_factor === 'number' ? c.partial_rotary_factor : undefined;
  const origMax = family === 'phi3' && typeof c.original_max_position_embeddings === 'number' ? c.original_max_position_embeddings : undefined;
  const std = (d: Record<string, unknown>, t: number, what: string): RopeParameters => standardizeRope(d, t, partial, max_position_embeddings, origMax, `${where} ${what}`);
  let rope: Record<LayerType, RopeParameters>;
  const rp = isObj(c.rope_parameters) ? c.rope_parameters : null;
  if (rp && (isObj(rp.full_attention) || isObj(rp.sliding_attention))) {
    const full = isObj(rp.full_attention) ? rp.full_attention : rp.sliding_attention as Record<string, unknown>;
    const sliding = isObj(rp.sliding_attention) ? rp.sliding_attention : full;
    rope = { full_attention: std(full, theta, 'rope_parameters.full_attention'), sliding_attention: std(sliding, theta, 'rope_parameters.sliding_attention') };
  } else {
    const scaling = isObj(c.rope_scaling) ? c.rope_scaling : null;
    const d = rp ?? scaling ?? {};
    const global = std(d, theta, rp ? 'rope_parameters' : scaling ? 'rope_scaling' : 'rope');
    let local = global;
    if (family === 'gemma3_text') {
      // Gemma 3's local (sliding) layers use plain RoPE on their own base frequency
      const localTheta = typeof c.rope_local_base_freq === 'number' ? c.rope_local_base_freq : 10000;
      local = std({ rope_type: 'default', rope_theta: localTheta }, localTheta, 'rope_local_base_freq');
    }
    rope = { full_attention: global, sliding_attention: local };
  }

  const hidden_act = String((family === 'gemma2' || family === 'gemma3_text') ? (json.hidden_activation ?? c.hidden_activation) : c.hidden_act);
  const dtype = typeof c.dtype === 'string' ? c.dtype : typeof c.torch_dtype === 'string' ? c.torch_dtype : null;
  const implRaw = c._attn_implementation ?? c.attn_implementation;
  const attn_implementation: 'sdpa' | 'eager' = implRaw === 'eager' || implRaw === 'sdpa' ? implRaw
    : (family === 'gemma2' ? 'eager' : 'sdpa');

  const vocab_size = positiveInt(c, 'vocab_size', where);
  const cfg: ModelConfig = {
    raw: json,
    model_type: family,
    vocab_size,
    hidden_size,
    intermediate_size: positiveInt(c, 'intermediate_size', where),
    num_hidden_layers,
    num_attention_heads,
    num_key_value_heads,
    head_dim,
    rms_norm_eps: num(c, 'rms_norm_eps', where),
    max_position_embeddings,
    tie_word_embeddings: c.tie_word_embeddings === undefined ? false : !!c.tie_word_embeddings,
    attention_bias: !!c.attention_bias,
    mlp_bias: !!c.mlp_bias,
    hidden_act,
    layer_types,
    sliding_window,
    rope,
    checkpoint_dtype: dtype,
    attn_implementation,
    attn_logit_softcapping: typeof c.attn_logit_softcapping === 'number' ? c.attn_logit_softcapping : null,
    final_logit_softcapping: typeof c.final_logit_softcapping === 'number' ? c.final_logit_softcapping : null,
    query_pre_attn_scalar: typeof c.query_pre_attn_scalar === 'number' ? c.query_pre_attn_scalar : null,
    // transformers 5 writes num_local_experts for both (num_experts is an alias), transformers 4 wrote Qwen's as num_experts
    num_experts: family === 'mixtral' || family === 'qwen3_moe' ? positiveInt(c, typeof json.num_local_experts === 'number' ? 'num_local_experts' : 'num_experts' in json || family === 'qwen3_moe' ? 'num_experts' : 'num_local_experts', where) : 0,
    num_experts_per_tok: family === 'mixtral' || family === 'qwen3_moe' ? positiveInt(c, 'num_experts_per_tok', where) : 0,
    moe_intermediate_size: family === 'qwen3_moe' ? positiveInt(c, 'moe_intermediate_size', where) : 0,
    // Mixtral always renormalizes its top-k weights; Qwen3-MoE only with norm_topk_prob
    norm_topk_prob: family === 'mixtral' ? true : !!c.norm_topk_prob,
    decoder_sparse_step: family === 'qwen3_moe' ? positiveInt(c, 'decoder_sparse_step', where) : 1,
    mlp_only_layers: Array.isArray(c.mlp_only_layers) ? (c.mlp_only_layers as number[]) : [],
  };
  if (cfg.num_experts_per_tok > cfg.num_experts) {
    throw new FormatError('models.config', `${where}: num_experts_per_tok (${cfg.num_experts_per_tok}) exceeds the number of experts (${cfg.num_experts})`);
  }
  const supportedActs = ['silu', 'gelu_pytorch_tanh', 'gelu', 'gelu_new', 'relu'];
  if (!supportedActs.includes(cfg.hidden_act)) {
    throw new UnsupportedError('models.config', `${where}: activation '${cfg.hidden_act}' is not supported; supported: ${supportedActs.join(', ')}`);
  }
  return cfg;
}

/** The config as transformers' `model.config` exposes it (raw keys plus the normalized ones). */
export function publicConfig(cfg: ModelConfig): Readonly<Record<string, unknown>> & { model_type: string; vocab_size: number; max_position_embeddings?: number } {
  const { raw, rope, ...rest } = cfg;
  return Object.freeze({ ...raw, ...rest, rope_parameters: rope }) as Readonly<Record<string, unknown>> & { model_type: string; vocab_size: number; max_position_embeddings?: number };
}
