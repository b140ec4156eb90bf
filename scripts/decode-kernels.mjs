#!/usr/bin/env node
// The kernels of one decode step, for a kernel profiler: builds a random-weight model, runs the prompt
// and `--steps` fixed-shape decode steps eagerly (cache_implementation 'static' without graph replay:
// the same kernels a replay runs, launched one by one), printing a marker line before each step.
// Under Nsight Compute, the last step's launches are the per-kernel GPU times of a replayed step:
//   ncu --metrics gpu__time_duration.sum --csv node scripts/decode-kernels.mjs --shape tinyllama [--batch 8] > k.csv
import { parseArgs } from 'node:util';

process.env.NBX_CUDA_GRAPHS = '0';
const { values } = parseArgs({ options: { shape: { type: 'string', default: 'tinyllama' }, steps: { type: 'string', default: '3' }, prompt: { type: 'string', default: '128' }, batch: { type: 'string', default: '1' } } });
const nbx = await import('../dist/src/index.js');
const SHAPES = {
  tinyllama: { hidden_size: 2048, intermediate_size: 5632, num_hidden_layers: 22, num_attention_heads: 32, num_key_value_heads: 4, vocab_size: 32000 },
  'llama3-8b': { hidden_size: 4096, intermediate_size: 14336, num_hidden_layers: 32, num_attention_heads: 32, num_key_value_heads: 8, vocab_size: 128256, rope_theta: 500000 },
  tiny: { hidden_size: 64, intermediate_size: 128, num_hidden_layers: 2, num_attention_heads: 4, num_key_value_heads: 2, vocab_size: 256 },
};
const config = { model_type: 'llama', max_position_embeddings: 4096, rms_norm_eps: 1e-5, hidden_act: 'silu', tie_word_embeddings: false, ...SHAPES[values.shape] };
const model = nbx.models.fromConfig(config, { device: 'cuda', dtype: 'bfloat16', seed: 0 });
const P = Number(values.prompt);
const B = Number(values.batch);
const dec = model.staticDecoder({ batch: B, maxLength: P + 64, greedy: true, force: true });
dec.begin(null, P);
const prompt = nbx.tensor(Array.from({ length: B }, (_, b) => Array.from({ length: P }, (_, i) => 1 + ((i * 7919 + b * 104729) % (config.vocab_size - 1)))), { dtype: 'int64', device: 'cuda' });
model.forward(prompt, { cache: dec.cache, logits_to_keep: 1 }).dispose();
await nbx.cuda.synchronize();
let tok = new Array(B).fill(1);
for (let s = 0; s < Number(values.steps); s++) {
  process.stderr.write(`== decode step ${s}\n`);
  const r = dec.step(tok, new Array(B).fill(P + s));
  tok = Array.from(await r.next.data(), Number);
}
await nbx.cuda.synchronize();
model.dispose();
