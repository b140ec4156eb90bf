// nbx.nn's layers (the classes); nbx.nn.functional is assembled in src/index.ts from the op families.
export {
  Module, MetaTensor, init_empty_weights, emptyParameter, isMetaConstruction, type FactoryOptions, type StateDict, type LoadStateDictOptions,
  type IncompatibleKeys, type StateEntrySpec,
} from './module.js';
export { Linear, Identity, type LinearOptions } from './linear.js';
export { Embedding, type EmbeddingOptions } from './embedding.js';
export { LayerNorm, RMSNorm, type LayerNormOptions, type RMSNormOptions } from './normalization.js';
export { Conv1d, Conv2d, type ConvOptions } from './conv.js';
export { Dropout } from './dropout.js';
export { ReLU, SiLU, GELU, Tanh, Sigmoid, Softmax } from './activation.js';
export { Sequential, ModuleList, ModuleDict } from './containers.js';
export * as init from './init.js';
