// The paged KV cache (src/models/paged_cache.ts) and its operations (nbx.llm.reshape_and_cache,
// nbx.llm.paged_attention): the CPU kernel against the composite (the definition), the block
// allocator, and the model's paged path against its dynamic cache on every fixture family.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync, readdirSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import * as nbx from '../src/index.js';
import type { Tensor } from '../src/tensor/tensor.js';
import { PagedKVCache, PagedLayerCache, pagedLogits } from '../src/models/paged_cache.js';
import { IndexError, KVCacheFullError, ShapeError, DTypeError, ValueError } from '../src/errors.js';

const MODELS = join(dirname(fileURLToPath(import.meta.url)), '../../test/fixtures/models');

function maxAbs(a: Tensor, b: Tensor): number {
  return Number(a.to('float64').sub(b.to('float64')).abs().max().item());
}

/** A random paged setup: pools, a block table per sequence (blocks shuffled), lengths. */
function setup(dtype: 'float32' | 'float64', B: number, H: number, KVH: number, D: number, BS: number, lens: number[]) {
  const g = new nbx.Generator().manual_seed(5);
  const NB = 40;
  const kc = nbx.randn([NB, BS, KVH, D], { dtype, generator: g });
  const vc = nbx.randn([NB, BS, KVH, D], { dtype, generator: g });
  const q = nbx.randn([B, H, D], { dtype, generator: g });
  const MB = Math.max(...lens.map((l) => Math.ceil(l / BS)), 1);
  const ids = Array.from({ length: NB }, (_, i) => (i * 17 + 3) % NB);
  let next = 0;
  const rows = lens.map((l) => Array.from({ length: MB }, (_, j) => (j < Math.ceil(l / BS) ? ids[next++ % NB]! : 0)));
  const bt = nbx.tensor(rows, { dtype: 'int32' });
  const sl = nbx.tensor(lens, { dtype: 'int64' });
  return { q, kc, vc, bt, sl };
}

test('llm.paged_attention: the CPU kernel equals the composite (GQA, lengths 0..33, window, softcap, float32/float64)', () => {
  for (const dtype of ['float32', 'float64'] as const) {
    for (const [H, KVH] of [[4, 4], [8, 2]] as const) {
      for (const opts of [{}, { sliding_window: 5 }, { softcap: 2.5 }, { sliding_window: 7, softcap: 1.5, scale: 0.3 }]) {
        const lens = [1, 16, 17, 33, 0, 9];
        const { q, kc, vc, bt, sl } = setup(dtype, lens.length, H, KVH, 8, 4, lens);
        const fused = nbx.llm.paged_attention(q, kc, vc, bt, sl, opts);
        const was = nbx.llm.set_fusion(false);
        let ref: Tensor;
        try { ref = nbx.llm.paged_attention(q, kc, vc, bt, sl, opts); } finally { nbx.llm.set_fusion(was); }
        assert.deepEqual(fused.shape, [lens.length, H, 8]);
        const tol = dtype === 'float32' ? 2e-6 : 1e-12;
        assert.ok(maxAbs(fused, ref) < tol, `${dtype} H${H}/${KVH} ${JSON.stringify(opts)}: ${maxAbs(fused, ref)}`);
        // a sequence of length 0 sees nothing: zeros, as scaled_dot_product_attention's safe softmax
        assert.equal(Number(fused[4]!.abs().max().item()), 0);
      }
    }
  }
});

test('llm.paged_attention: each sequence alone gets the numbers it gets in the batch (CPU kernel)', () => {
  const lens = [5, 30, 12];
  const { q, kc, vc, bt, sl } = setup('float32', 3, 8, 2, 16, 8, lens);
  const all = nbx.llm.paged_attention(q, kc, vc, bt, sl).dataSync() as Float32Array;
  for (let b = 0; b < 3; b++) {
    const one = nbx.llm.paged_attention(q.slice(0, b, b + 1), kc, vc, bt.slice(0, b, b + 1), sl.slice(0, b, b + 1)).dataSync() as Float32Array;
    assert.deepEqual(Array.from(one), Array.from(all.subarray(b * 8 * 16, (b + 1) * 8 * 16)));
  }
});

test('llm.paged_attention / reshape_and_cache: typed errors', () => {
  const { q, kc, vc, bt, sl } = setup('float32', 2, 4, 2, 8, 4, [3, 6]);
  assert.throws(() => nbx.llm.paged_attention(q, kc, vc, nbx.tensor([[0, 1], [99, 0]], { dtype: 'int32' }), sl), IndexError);
  assert.throws(() => nbx.llm.paged_attention(q, kc, vc, bt, nbx.tensor([3, 9])), IndexError);
  assert.throws(() => nbx.llm.paged_attention(q.unsqueeze(2), kc, vc, bt, sl), ShapeError);
  assert.throws(() => nbx.llm.paged_attention(q, kc, vc, bt.float(), sl), DTypeError);
  assert.throws(() => nbx.llm.paged_attention(q, kc, vc, bt, sl, { sliding_window: 0 }), ValueError);
  assert.throws(() => nbx.llm.paged_attention(q.double(), kc, vc, bt, sl), DTypeError);
  assert.throws(() => nbx.llm.paged_attention(nbx.randn([2, 3, 8]), kc, vc, bt, sl), ShapeError); // 3 heads over 2 kv heads
  const k = nbx.randn([2, 2, 8]);
  assert.throws(() => nbx.llm.reshape_and_cache(k, k, kc, vc, nbx.tensor([0, 4000])), IndexError);
  assert.throws(() => nbx.llm.reshape_and_cache(k, k, kc, vc, nbx.tensor([0])), ShapeError);
  // the process keeps working
  assert.deepEqual(nbx.llm.paged_attention(q, kc, vc, bt, sl).shape, [2, 4, 8]);
});

test('llm.reshape_and_cache writes each token into its slot (block · block_size + offset)', () => {
  const kc = nbx.zeros([6, 4, 2, 3]), vc = nbx.zeros([6, 4, 2, 3]);
  const k = nbx.arange(1, 13).float().view([2, 2, 3]), v = k.neg();
  nbx.llm.reshape_and_cache(k, v, kc, vc, nbx.tensor([9, 2]));
  assert.deepEqual(kc[2]![1]!.tolist(), k[0]!.tolist());
  assert.deepEqual(kc[0]![2]!.tolist(), k[1]!.tolist());
  assert.deepEqual(vc[2]![1]!.tolist(), v[0]!.tolist());
  assert.equal(Number(kc.abs().sum().item()), Number(k.abs().sum().item()));
});

test('PagedKVCache: blocks by sequence, freed at once, growth keeps the contents, out of blocks is KVCacheFullError', () => {
  const cache = new PagedKVCache({ layers: 2, kvHeads: 2, headDim: 4, dtype: 'float32', device: nbx.Device.of('cpu') }, { numBlocks: 10, blockSize: 4, initialBlocks: 2 });
  try {
    cache.addSequence(1); cache.addSequence(2);
    cache.reserve(1, 5); // 2 blocks
    assert.equal(cache.usedBlocks, 2);
    cache.pools(0).keys.fill_(7);
    cache.reserve(2, 12); // 3 more: the pools grow
    assert.equal(cache.usedBlocks, 5);
    assert.ok(cache.memory().capacityBlocks >= 5);
    const b1 = cache.blocks(1);
    assert.equal(Number(cache.pools(0).keys[b1[0]!]!.min().item()), 7, 'growth copied the old blocks');
    assert.equal(new Set([...cache.blocks(1), ...cache.blocks(2)]).size, 5, 'no block is shared');
    assert.equal(cache.slot(2, 5), cache.blocks(2)[1]! * 4 + 1);
    cache.addSequence(3);
    let err: unknown;
    try { cache.reserve(3, 24); } catch (e) { err = e; }
    assert.ok(err instanceof KVCacheFullError);
    assert.equal((err as KVCacheFullError).needed, 6);
    assert.equal((err as KVCacheFullError).free, 5);
    assert.match((err as Error).message, /needs 6 more block\(s\).*only 5 of 10 are free/);
    assert.equal(cache.usedBlocks, 5, 'a failed reserve allocates nothing');
    cache.free(2);
    assert.equal(cache.usedBlocks, 2);
    cache.reserve(3, 24);
    assert.equal(cache.usedBlocks, 8);
    const mem = cache.memory();
    assert.equal(mem.backing, 'plain');
    assert.equal(mem.mappedBytes, 2 * 2 * mem.capacityBlocks * 4 * 2 * 4 * 4);
  } finally { cache.dispose(); }
});

/** The paged path's logits against CausalLM.forward with its own dynamic cache, for sequences of different lengths decoding together. */
async function pagedVsDynamic(dir: string): Promise<number> {
  const model = await nbx.models.load(dir, { device: 'cpu', dtype: 'float32' });
  const c = model.cfg;
  const cache = new PagedKVCache({ layers: c.num_hidden_layers, kvHeads: c.num_key_value_heads, headDim: c.head_dim, dtype: 'float32', device: model.device }, { numBlocks: 64, blockSize: 4, initialBlocks: 3 });
  const V = c.vocab_size;
  const prompts = [[3, 7, 9, 11, 2, 5, 8, 13, 4], [5], [6, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12]];
  let worst = 0;
  try {
    const dyn = prompts.map(() => model.newCache({ batch: 1, maxLength: 32 }));
    const last: number[] = [];
    prompts.forEach((p, i) => {
      cache.addSequence(i);
      // prompts in chunks of 5 (a chunk after the first reads its past through the pages)
      let logits: Tensor | null = null;
      for (let s = 0; s < p.length; s += 5) {
        const chunk = p.slice(s, s + 5);
        cache.reserve(i, s + chunk.length);
        const lc = PagedLayerCache.prefill(cache, i, chunk.length);
        logits = pagedLogits(model, [chunk], [chunk.map((_, j) => s + j)], lc);
        lc.dispose();
      }
      const ref = model.forward(nbx.tensor([p]), { cache: dyn[i]!, logits_to_keep: 1 }).reshape([1, V]);
      worst = Math.max(worst, maxAbs(logits!, ref));
      last.push(Number(ref.argmax(-1).item()));
    });
    for (let step = 0; step < 6; step++) {
      const ids = prompts.map((_, i) => i);
      for (const i of ids) cache.reserve(i, cache.length(i) + 1);
      const positions = ids.map((i) => [cache.length(i)]);
      const lc = PagedLayerCache.decode(cache, ids);
      const logits = pagedLogits(model, last.map((t) => [t]), positions, lc);
      lc.dispose();
      ids.forEach((i) => {
        const ref = model.forward(nbx.tensor([[last[i]!]]), { cache: dyn[i]!, logits_to_keep: 1 }).reshape([1, V]);
        worst = Math.max(worst, maxAbs(logits.slice(0, i, i + 1), ref));
        last[i] = Number(ref.argmax(-1).item());
      });
    }
    dyn.forEach((d) => d.dispose());
  } finally { cache.dispose(); model.dispose(); }
  return worst;
}

const FAMILIES = readdirSync(MODELS).filter((c) => existsSync(join(MODELS, c, 'config.json')) && c !== 'llama_dynamic_rope').sort();

test(`the decoder's paged path equals its dynamic cache on every fixture family (${FAMILIES.length}: GQA, sliding windows, soft-capping)`, async () => {
  const bad: string[] = [];
  for (const f of FAMILIES) {
    const worst = await pagedVsDynamic(join(MODELS, f));
    if (!(worst < 1e-4)) bad.push(`${f}: ${worst}`);
  }
  assert.deepEqual(bad, []);
});

test('a decode step\'s logits for a sequence are bit-identical batched and alone (row-invariant CPU products, per-sequence paged attention)', async () => {
  const { setRowInvariant } = await import('../src/backend/cpu/kernels/gemm.js');
  const model = await nbx.models.load(join(MODELS, 'qwen3'), { device: 'cpu', dtype: 'float32' });
  const c = model.cfg;
  const cache = new PagedKVCache({ layers: c.num_hidden_layers, kvHeads: c.num_key_value_heads, headDim: c.head_dim, dtype: 'float32', device: model.device }, { numBlocks: 64, blockSize: 4 });
  const was = setRowInvariant(true);
  try {
    const prompts = [[3, 7, 9, 11, 2, 5], [5, 6], [6, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10], [1], [4, 4], [9, 8, 7]];
    prompts.forEach((p, i) => {
      cache.addSequence(i); cache.reserve(i, p.length + 1);
      const lc = PagedLayerCache.prefill(cache, i, p.length);
      pagedLogits(model, [p], [p.map((_, j) => j)], lc).dispose(); lc.dispose();
    });
    const ids = prompts.map((_, i) => i);
    const step = (rows: number[]): Float32Array => {
      // the same step again: lengths are put back after (commit advanced them)
      const lens = rows.map((i) => cache.length(i));
      const lc = PagedLayerCache.decode(cache, rows);
      const out = pagedLogits(model, rows.map((i) => [prompts[i]!.at(-1)!]), rows.map((i) => [cache.length(i)]), lc);
      lc.dispose();
      rows.forEach((i, k) => cache.advance(i, lens[k]! - cache.length(i)));
      return out.dataSync() as Float32Array;
    };
    const all = step(ids), V = c.vocab_size;
    for (const i of ids) assert.deepEqual(Array.from(step([i])), Array.from(all.subarray(i * V, (i + 1) * V)), `sequence ${i}`);
  } finally { setRowInvariant(was); cache.dispose(); model.dispose(); }
});
