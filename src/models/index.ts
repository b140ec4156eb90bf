// nbx.models: Hugging Face causal language models (transformers' <Family>ForCausalLM) on nbx.
export { load, fromConfig, type LoadModelOptions, type FromConfigOptions } from './load.js';
export { loadFromFiles, loadFromUrl, loadTokenizerFromFiles, type ModelFiles, type ModelFileContent, type LoadFromUrlOptions } from './load_remote.js';
export { SUPPORTED_MODEL_TYPES, SUPPORTED_ROPE_TYPES, parseConfig, type ModelConfig, type RopeParameters, type LayerType } from './config.js';
export { CausalLMModel } from './causal_lm.js';
export { KVCacheBuffers } from './cache.js';
export type { CausalLM, KVCache, ForwardOptions } from './types.js';
/** AutoTokenizer's job: the tokenizer of a folder that holds only tokenizer files. */
export { loadTokenizer } from '../tokenizer/index.js';
