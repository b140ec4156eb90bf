// Quantized models in the serving engine (issues #21, #22): on the CPU a request batched with others gets
// the tokens it gets alone, as with float weights (the quant GEMV runs each of up to 16 rows alone).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import * as nbx from '../src/index.js';
import { Engine, type EngineRequest } from '../src/generation/engine.js';
import { defaultModelDir } from '../src/cli/generate.js';

test('quantized embedded model (int8, int4 g64): batched requests get their solo tokens', async () => {
  for (const opts of [{ scheme: 'int8' }, { scheme: 'int4', group_size: 64 }] as const) {
    const model = await nbx.models.load(defaultModelDir(), { device: 'cpu', dtype: 'float32' });
    nbx.quant.quantize_(model, opts);
    try {
      const reqs: EngineRequest[] = Array.from({ length: 5 }, (_, i) => ({
        prompt: Array.from({ length: 2 + i * 3 }, (_, j) => (i * 131 + j * 17 + 5) % 4096),
        max_new_tokens: 4 + i, eos_token_id: [], ...(i % 2 ? { temperature: 0.8, seed: 7 + i } : { temperature: 0 }),
      }));
      const eo = { blockSize: 8, prefillChunk: 6 };
      const alone: number[][] = [];
      for (const r of reqs) { const e = new Engine(model, { maxBatch: 1, ...eo }); alone.push((await e.submit(r).result).tokens); await e.close(); }
      const e = new Engine(model, { maxBatch: 4, ...eo });
      const got = await Promise.all(reqs.map((r) => e.submit(r).result));
      await e.close();
      assert.deepEqual(got.map((r) => r.tokens), alone, opts.scheme);
    } finally { model.dispose(); }
  }
});
