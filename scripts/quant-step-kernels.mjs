#!/usr/bin/env node
// The kernels of one decode step of a quantized Llama-3-8B-shaped model (bench/quant.ts's schemes: bf16, int8,
// int4-g128, q4_k_m; random packed weights), for a kernel profiler: fewer layers (--layers, same widths; the
// lm_head and vocabulary as the 8B model), the prompt, then --steps fixed-shape decode steps run eagerly
// (cache_implementation 'static' without graph replay: the kernels a replayed step runs, launched one by one).
// --warm: one run first that tunes every kernel into the tuning cache (run it without the profiler, with the
// same NBX_CACHE_DIR), so the profiled run launches no tuning candidates. Under Nsight Compute:
//   node scripts/quant-step-kernels.mjs --scheme int4-g128 --warm
//   ncu --metrics gpu__time_duration.sum --csv node scripts/quant-step-kernels.mjs --scheme int4-g128 > k.csv
//   node scripts/ncu-step-summary.mjs k.csv --steps 2
import { parseArgs } from 'node:util';

process.env.NBX_CUDA_GRAPHS = '0';
const { values } = parseArgs({ options: { scheme: { type: 'string', default: 'int4-g128' }, layers: { type: 'string', default: '4' }, steps: { type: 'string', default: '2' }, prompt: { type: 'string', default: '16' }, shape: { type: 'string', default: 'llama3-8b' }, warm: { type: 'boolean', default: false } } });
const nbx = await import('../dist/src/index.js');
const { SHAPES, quantizeModel } = await import('../dist/bench/quant.js');
const device = nbx.cuda.is_available() ? 'cuda' : 'cpu';
const config = { ...SHAPES[values.shape], num_hidden_layers: Number(values.layers) };
const model = nbx.models.fromConfig(config, { device, dtype: device === 'cuda' ? 'bfloat16' : 'float32', seed: 0 });
if (values.scheme !== 'bf16') quantizeModel(model, values.scheme, device);
const P = Number(values.prompt), steps = Number(values.steps);
const dec = model.staticDecoder({ batch: 1, maxLength: P + 64, greedy: true, force: true });
dec.begin(null, P);
const prompt = nbx.tensor([Array.from({ length: P }, (_, i) => 1 + ((i * 7919) % (config.vocab_size - 1)))], { dtype: 'int64', device });
model.forward(prompt, { cache: dec.cache, logits_to_keep: 1 }).dispose();
await nbx.cuda.synchronize();
let tok = [1];
for (let s = 0; s < (values.warm ? 1 : steps); s++) {
  process.stderr.write(`== decode step ${s}\n`);
  const r = dec.step(tok, [P + s]);
  tok = Array.from(await r.next.data(), Number);
}
await nbx.cuda.synchronize();
process.stderr.write(`${values.scheme}, ${values.layers} layers: ${values.warm ? 'warmed (kernels tuned)' : `${steps} eager steps`}\n`);
model.dispose();
