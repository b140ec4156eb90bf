// nbx.models: Hugging Face causal language models (transformers' <Family>ForCausalLM) on nbx.
export { load, loadTokenizer, fromConfig, type LoadModelOptions, type FromConfigOptions } from './load.js';
export { SUPPORTED_MODEL_TYPES, SUPPORTED_ROPE_TYPES, parseConfig, type ModelConfig, type RopeParameters, type LayerType } from './config.js';
export { CausalLMModel } from './causal_lm.js';
export { KVCacheBuffers } from './cache.js';
export type { CausalLM, KVCache, ForwardOptions } from './types.js';
