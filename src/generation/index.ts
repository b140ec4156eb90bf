// generate() and stream(): transformers' GenerationMixin for nbx models. Placeholder; the
// implementation replaces the body.

import type { CausalLM } from '../models/types.js';
import type { Tensor } from '../tensor/tensor.js';
import { UnsupportedError } from '../errors.js';

export type GenerateInput = Tensor | string | readonly string[];
export type GenerateOptions = Record<string, unknown>;

export async function generate(_model: CausalLM, _input: GenerateInput, _opts: GenerateOptions = {}): Promise<Tensor> {
  throw new UnsupportedError('generate', 'not implemented yet');
}

export async function* stream(_model: CausalLM, _input: GenerateInput, _opts: GenerateOptions = {}): AsyncGenerator<string> {
  throw new UnsupportedError('stream', 'not implemented yet');
}
