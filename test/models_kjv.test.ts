// The embedded default model (assets/nbx-kjv) loads and decodes greedily token for token as
// transformers did (test/fixtures/models/nbx-kjv-reference.json: the bfloat16 file computed in float32 on the CPU).

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import * as nbx from '../src/index.js';
import { greedy } from './models_util.js';

const DIR = join(process.cwd(), 'assets', 'nbx-kjv');
const REF = join(process.cwd(), 'test', 'fixtures', 'models', 'nbx-kjv-reference.json');
const skip = existsSync(join(DIR, 'model.safetensors')) && existsSync(REF) ? false : 'assets/nbx-kjv or its reference is missing';
if (skip) console.log(`# SKIP embedded model test: ${skip}`);

test('assets/nbx-kjv: greedy continuations equal transformers\'', { skip }, async () => {
  const ref = JSON.parse(readFileSync(REF, 'utf8')) as { cases: { prompt: string; input_ids: number[]; greedy_ids: number[] }[] };
  const model = await nbx.models.load(DIR);
  try {
    assert.equal(model.config.model_type, 'llama');
    assert.ok(model.tokenizer, 'the folder has tokenizer.json: model.tokenizer is loaded');
    assert.deepEqual(model.tokenizer.encode(ref.cases[0]!.prompt), ref.cases[0]!.input_ids);
    const eos = model.generationConfig.eos_token_id as number;
    for (const c of ref.cases) {
      const ids = nbx.tensor([c.input_ids]);
      const got = greedy(model, ids, nbx.ones_like(ids), c.greedy_ids.length - c.input_ids.length, [eos], eos);
      assert.deepEqual(got[0], c.greedy_ids, `prompt ${JSON.stringify(c.prompt)}`);
    }
  } finally { model.dispose(); }
});
