// The paged KV cache on WebGPU: nbx.llm.paged_attention's composite (index_select of the blocks, masked
// attention) against the CPU kernel, and the engine (plain growable pools, device sampling, padded
// decode steps) giving the CPU's tokens. Skipped without a WebGPU adapter.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import * as nbx from '../src/index.js';
import type { Tensor } from '../src/tensor/tensor.js';
import { Engine, type EngineRequest } from '../src/generation/engine.js';

const probe = await nbx.webgpu.probe();
const skip = probe.available ? false : `no WebGPU adapter (${probe.reason})`;
const MODELS = join(dirname(fileURLToPath(import.meta.url)), '../../test/fixtures/models');

test('llm.paged_attention / reshape_and_cache on WebGPU (the composite) equal the CPU kernel', { skip }, async () => {
  const g = new nbx.Generator().manual_seed(3);
  const kc = nbx.randn([8, 4, 2, 16], { generator: g }), vc = nbx.randn([8, 4, 2, 16], { generator: g }), q = nbx.randn([3, 4, 16], { generator: g });
  const bt = nbx.tensor([[0, 1, 2], [3, 0, 0], [5, 6, 7]], { dtype: 'int32' }), sl = nbx.tensor([9, 2, 12], { dtype: 'int32' });
  const w = (t: Tensor): Tensor => t.to('webgpu');
  for (const opts of [{}, { sliding_window: 5 }, { softcap: 2 }]) {
    const ref = nbx.llm.paged_attention(q, kc, vc, bt, sl, opts);
    const got = await nbx.llm.paged_attention(w(q), w(kc), w(vc), w(bt), w(sl), opts).cpu();
    assert.ok(Number(got.sub(ref).abs().max().item()) < 1e-5, JSON.stringify(opts));
  }
  const gk = w(nbx.zeros([8, 4, 2, 16])), gv = w(nbx.zeros([8, 4, 2, 16]));
  nbx.llm.reshape_and_cache(w(q.slice(1, 0, 2)), w(q.slice(1, 2, 4)), gk, gv, w(nbx.tensor([5, 30, 0])));
  assert.deepEqual((await gk.cpu())[7]![2]!.tolist(), q[1]!.slice(0, 0, 2).tolist());
});

test('the engine on WebGPU gives the CPU\'s tokens (greedy and seeded, chunked prompts, padded steps)', { skip }, async () => {
  const reqs: EngineRequest[] = [{ prompt: [1, 5, 9, 12, 4, 4], max_new_tokens: 5, temperature: 0, eos_token_id: [] }, { prompt: [3, 2], max_new_tokens: 4, temperature: 0.8, seed: 3, eos_token_id: [] }];
  const out: number[][][] = [];
  for (const device of ['cpu', 'webgpu'] as const) {
    const m = await nbx.models.load(join(MODELS, 'llama'), { device, dtype: 'float32' });
    const e = new Engine(m, { maxBatch: 2, blockSize: 4, kvBlocks: 16, sampling: 'device', padBatch: true, prefillChunk: 4 });
    try {
      out.push((await Promise.all(reqs.map((r) => e.submit(r).result))).map((r) => r.tokens));
      assert.equal(e.kvMemory().backing, 'plain');
    } finally { await e.close(); m.dispose(); }
  }
  assert.deepEqual(out[1], out[0]);
});
