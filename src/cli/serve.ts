// `nbx serve`: loads a model (the embedded nbx-kjv by default) and serves it with the OpenAI API
// (src/serve) until Ctrl-C / SIGTERM, which stop taking requests, cancel those in flight and exit 0.

import { basename } from 'node:path';
import { parseArgs } from 'node:util';
import { ValueError } from '../errors.js';
import { loadForCommand } from './generate.js';
import type { CausalLMModel } from '../models/causal_lm.js';

const OP = 'nbx serve';

function intFlag(name: string, s: string | undefined, min: number): number | undefined {
  if (s === undefined) return undefined;
  if (!/^\d+$/.test(s.trim()) || Number(s) < min) throw new ValueError(OP, `--${name} must be an integer >= ${min}, got '${s}'`);
  return Number(s);
}

export async function serveCommand(args: string[]): Promise<number> {
  const { values, positionals } = parseArgs({
    args, allowPositionals: false,
    options: {
      model: { type: 'string' }, device: { type: 'string' }, dtype: { type: 'string' },
      host: { type: 'string', default: '127.0.0.1' }, port: { type: 'string', default: '8000' },
      'max-batch': { type: 'string' }, 'max-queue': { type: 'string' }, 'kv-blocks': { type: 'string' }, 'block-size': { type: 'string' },
      'api-key': { type: 'string' }, 'served-model-name': { type: 'string' }, warmup: { type: 'string' },
    },
  });
  void positionals;
  const port = intFlag('port', values.port, 0)!;
  if (port > 65535) throw new ValueError(OP, `--port must be at most 65535, got ${port}`);
  const maxBatch = intFlag('max-batch', values['max-batch'], 1);
  const maxQueue = intFlag('max-queue', values['max-queue'], 0);
  const kvBlocks = intFlag('kv-blocks', values['kv-blocks'], 1);
  const blockSize = intFlag('block-size', values['block-size'], 1);
  const apiKey = values['api-key'] ?? process.env.NBX_API_KEY ?? null;
  if (apiKey === '') throw new ValueError(OP, '--api-key is empty');
  const warmup = values.warmup;
  if (warmup !== undefined && warmup !== 'on' && warmup !== 'off') throw new ValueError(OP, `--warmup must be on or off, got '${warmup}'`);

  const loaded = await loadForCommand(OP, values.model, values.device, values.dtype);
  const { model } = loaded;
  const modelName = values['served-model-name'] ?? basename(loaded.dir).replace(/\.gguf$/i, '');
  const { serve } = await import('../serve/index.js');
  let handle;
  try {
    handle = await serve(model as CausalLMModel, {  // load() makes a CausalLMModel
      host: values.host, port, apiKey, modelName,
      ...(maxBatch !== undefined ? { maxBatch } : {}), ...(maxQueue !== undefined ? { maxQueue } : {}),
      ...(kvBlocks !== undefined ? { kvBlocks } : {}), ...(blockSize !== undefined ? { blockSize } : {}),
      ...(warmup !== undefined ? { warmup: warmup === 'on' } : {}),
    });
  } catch (e) {
    model.dispose();
    throw e;
  }
  const e = handle.engine;
  process.stderr.write(`nbx serve: ${loaded.dir} (${model.config.model_type}, ${model.dtype.name}) on ${loaded.device}, loaded in ${loaded.loadMs.toFixed(0)} ms; ` +
    `max batch ${e.maxBatch}, max queue ${e.maxQueue}, ${e.kvBlocks} KV blocks of ${e.blockSize}${apiKey ? '; API key required' : ''}\n`);
  process.stderr.write(`nbx serve: model '${modelName}' at ${handle.url}/v1 (OpenAI API); ${handle.url}/health, ${handle.url}/metrics — Ctrl-C stops\n`);
  if (values.host !== '127.0.0.1' && values.host !== 'localhost' && values.host !== '::1') {
    process.stderr.write(`nbx serve: listening on ${values.host}: reachable from other machines${apiKey ? '' : ', without an API key (--api-key)'}\n`);
  }
  await new Promise<void>((resolve) => {
    let stopping = false;
    const stop = (sig: string): void => {
      if (stopping) process.exit(130);
      stopping = true;
      process.stderr.write(`nbx serve: ${sig}: stopping (requests in flight are cancelled)\n`);
      handle.close().then(resolve, resolve);
    };
    process.on('SIGINT', () => stop('SIGINT'));
    process.on('SIGTERM', () => stop('SIGTERM'));
  });
  model.dispose();
  return 0;
}
