// The CUDA paged attention kernel (src/backend/cuda/kernels/llm.ts) against the CPU's composite, its
// definition (skipped without a CUDA device; runs under the emulator: node test/gen/cuda_emu.mjs node
// --test dist/test/paged_cuda.test.js), and on a card the engine's paged path against the dynamic cache.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import * as nbx from '../src/index.js';
import type { Tensor } from '../src/tensor/tensor.js';
import { FLOAT_DTYPES, noStaging, rand, same, skip, tolFor } from './cuda_compare.js';
import { IndexError } from '../src/errors.js';
import { Engine } from '../src/generation/engine.js';
import * as pagedModule from '../src/models/paged_cache.js';

const EMU = !!process.env.NBX_EMU_DIR;
const MODELS = join(dirname(fileURLToPath(import.meta.url)), '../../test/fixtures/models');

function composite(q: Tensor, kc: Tensor, vc: Tensor, bt: Tensor, sl: Tensor, opts: { sliding_window?: number; softcap?: number; scale?: number }): Tensor {
  const was = nbx.llm.set_fusion(false);
  try { return nbx.llm.paged_attention(q, kc, vc, bt, sl, opts); } finally { nbx.llm.set_fusion(was); }
}

test('llm.paged_attention on CUDA: every float dtype, GQA (1, 4 and 12 query heads per kv head), windows, softcap, int32/int64 tables', { skip }, () => {
  const cases: [number, number, number, number][] = EMU ? [[4, 1, 16, 4], [12, 1, 32, 4]] : [[4, 4, 64, 16], [8, 2, 128, 16], [12, 1, 64, 8], [32, 4, 128, 16]];
  for (const dt of FLOAT_DTYPES) for (const [H, KVH, D, BS] of cases) {
    for (const opts of [{}, { sliding_window: 5 }, { softcap: 3, scale: 0.2 }]) {
      const lens = EMU ? [3, 9, 0] : [1, 37, 200, 0, 16];
      const NB = 64, MB = Math.max(...lens.map((l) => Math.ceil(l / BS)));
      const kc = rand([NB, BS, KVH, D], 1, -1, 1, dt), vc = rand([NB, BS, KVH, D], 2, -1, 1, dt), q = rand([lens.length, H, D], 3, -1, 1, dt);
      const rows = lens.map((l, b) => Array.from({ length: MB }, (_, j) => (j < Math.ceil(l / BS) ? (b * 13 + j * 7) % NB : 0)));
      for (const idx of ['int32', 'int64'] as const) {
        const bt = nbx.tensor(rows, { dtype: idx }), sl = nbx.tensor(lens, { dtype: idx });
        const f32 = (t: Tensor): Tensor => t.to('float32');
        const want = composite(f32(q), f32(kc), f32(vc), bt, sl, opts);
        const got = nbx.llm.paged_attention(q.to('cuda'), kc.to('cuda'), vc.to('cuda'), bt.to('cuda'), sl.to('cuda'), opts);
        same(`paged ${dt} H${H}/${KVH} D${D} ${JSON.stringify(opts)} ${idx}`, want, got.to('float32'), dt === 'float64' ? [1e-5, 1e-6] : tolFor(dt));
      }
    }
  }
  noStaging(['paged_attention']);
});

test('llm.paged_attention on CUDA: a bad block id or length is an IndexError, and the device keeps working', { skip }, () => {
  const kc = rand([4, 4, 1, 16], 1).to('cuda'), vc = rand([4, 4, 1, 16], 2).to('cuda'), q = rand([2, 2, 16], 3).to('cuda');
  const bt = nbx.tensor([[0, 1], [2, 3]], { dtype: 'int32' }).to('cuda');
  assert.throws(() => nbx.llm.paged_attention(q, kc, vc, nbx.tensor([[0, 1], [2, 9]], { dtype: 'int32' }).to('cuda'), nbx.tensor([5, 6], { dtype: 'int32' }).to('cuda')), IndexError);
  assert.throws(() => nbx.llm.paged_attention(q, kc, vc, bt, nbx.tensor([5, 9], { dtype: 'int32' }).to('cuda')), IndexError);
  const ok = nbx.llm.paged_attention(q, kc, vc, bt, nbx.tensor([5, 8], { dtype: 'int32' }).to('cuda'));
  assert.deepEqual(ok.shape, [2, 2, 16]);
  assert.ok(Number(ok.abs().sum().item()) > 0);
});

test('the engine on CUDA (tiny Llama, float32): batched greedy tokens equal each request run alone (decode steps padded to one shape)', { skip: skip || (EMU ? 'slow under the emulator' : false) }, async () => {
  const model = await nbx.models.load(join(MODELS, 'llama'), { device: 'cuda', dtype: 'float32' });
  try {
    const prompts = [[1, 5, 9, 12], [3], [7, 7, 8, 2, 4, 6, 1, 2, 3, 4, 5], [9, 10]];
    const solo: number[][] = [];
    for (const p of prompts) {
      // alone: the same engine settings (decode steps padded to maxBatch rows), one request at a time
      const e = new Engine(model, { maxBatch: 4, blockSize: 4, kvBlocks: 64 });
      solo.push((await e.submit({ prompt: p, max_new_tokens: 12, temperature: 0, eos_token_id: [] }).result).tokens);
      await e.close();
    }
    const e = new Engine(model, { maxBatch: 4, blockSize: 4, kvBlocks: 64 });
    const batched = await Promise.all(prompts.map((p) => e.submit({ prompt: p, max_new_tokens: 12, temperature: 0, eos_token_id: [] }).result));
    await e.close();
    assert.deepEqual(batched.map((r) => r.tokens), solo);
  } finally { model.dispose(); }
});

test('PagedKVCache on CUDA: the pools live in VMM ranges that grow in place (no copy, same address), counted in nbx.cuda.memory_stats()', { skip }, () => {
  const { PagedKVCache } = pagedModule;
  const before = nbx.cuda.memory_stats();
  const cache = new PagedKVCache({ layers: 2, kvHeads: 2, headDim: 64, dtype: 'bfloat16', device: nbx.Device.of('cuda') }, { numBlocks: 4096, blockSize: 16, initialBlocks: 8 });
  try {
    const mem0 = cache.memory();
    assert.equal(mem0.backing, 'vmm', 'a driver with VMM backs the pools with it');
    const blockBytes = 16 * 2 * 64 * 2;
    assert.equal(mem0.reservedBytes >= 4 * 4096 * blockBytes, true);
    const addr = (t: Tensor): bigint => (t.ref().buf as { ptr: bigint }).ptr;
    const k0 = addr(cache.pools(1).keys);
    cache.addSequence(1);
    cache.reserve(1, 40);
    const b = cache.blocks(1);
    cache.pools(1).keys[b[0]!]!.fill_(3);
    const mid = nbx.cuda.memory_stats();
    assert.equal((mid.vmmReservedBytes ?? 0) - (before.vmmReservedBytes ?? 0), mem0.reservedBytes);
    cache.addSequence(2);
    cache.reserve(2, 16 * 600); // past the first mapping: more of each range is mapped
    const mem1 = cache.memory();
    assert.ok(mem1.mappedBytes > mem0.mappedBytes && mem1.capacityBlocks >= 603, `mapped ${mem0.mappedBytes} -> ${mem1.mappedBytes}`);
    assert.equal(addr(cache.pools(1).keys), k0, 'the pool kept its address');
    assert.equal(Number(cache.pools(1).keys[b[0]!]!.float().min().item()), 3, 'the blocks kept their contents');
    assert.equal(mem1.reservedBytes, mem0.reservedBytes);
    const after = nbx.cuda.memory_stats();
    assert.equal((after.vmmMappedBytes ?? 0) - (before.vmmMappedBytes ?? 0), mem1.mappedBytes);
  } finally { cache.dispose(); }
  const end = nbx.cuda.memory_stats();
  assert.equal(end.vmmMappedBytes ?? 0, before.vmmMappedBytes ?? 0);
  assert.equal(end.vmmReservedBytes ?? 0, before.vmmReservedBytes ?? 0);
});
