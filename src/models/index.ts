// nbx.models: Hugging Face causal language models (transformers' <Family>ForCausalLM) on nbx.
export { fromConfig, type LoadModelOptions, type FromConfigOptions } from './load.js';
export { loadGguf, configFromGguf, tokenizerFromGguf } from './load_gguf.js';
import { load as loadFolder, type LoadModelOptions } from './load.js';
import { loadGguf } from './load_gguf.js';
import type { CausalLMModel } from './causal_lm.js';

/**
 * Loads a Hugging Face model folder (or a .safetensors / index file inside one), or a llama.cpp .gguf
 * file (src/models/load_gguf.ts).
 */
export function load(dirOrFile: string, opts: LoadModelOptions = {}): Promise<CausalLMModel> {
  return dirOrFile.endsWith('.gguf') ? loadGguf(dirOrFile, opts) : loadFolder(dirOrFile, opts);
}
export { loadFromFiles, loadFromUrl, loadTokenizerFromFiles, type ModelFiles, type ModelFileContent, type LoadFromUrlOptions } from './load_remote.js';
export { SUPPORTED_MODEL_TYPES, SUPPORTED_ROPE_TYPES, parseConfig, type ModelConfig, type RopeParameters, type LayerType } from './config.js';
export { CausalLMModel } from './causal_lm.js';
export { KVCacheBuffers } from './cache.js';
export type { CausalLM, KVCache, ForwardOptions } from './types.js';
/** AutoTokenizer's job: the tokenizer of a folder that holds only tokenizer files. */
export { loadTokenizer } from '../tokenizer/index.js';
