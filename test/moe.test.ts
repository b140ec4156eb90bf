// nbx.llm's fused mixture-of-experts operations on the CPU (their composites: the definitions):
// moe_align against a plain reading of vLLM's moe_align_block_size (stable within an expert), and
// grouped_expert_linear against expert_linear (each slot times its expert) and the host-routed loop of
// the Experts layer; argument checks and bad indices.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import * as nbx from '../src/index.js';
import type { Tensor } from '../src/tensor/tensor.js';
import { routing } from './moe_util.js';

const g = (seed: number): nbx.Generator => new nbx.Generator().manual_seed(seed);

/** vLLM's moe_align_block_size, written out: slots grouped by expert in slot order, groups padded to BS. */
function alignRef(ids: number[], E: number, BS: number): { sorted: number[]; blocks: number[]; total: number } {
  const M = ids.length, cap = M + E * (BS - 1), nb = Math.ceil(cap / BS);
  const sorted: number[] = [], blocks: number[] = [];
  for (let e = 0; e < E; e++) {
    const mine = ids.flatMap((v, i) => (v === e ? [i] : []));
    const padded = Math.ceil(mine.length / BS) * BS;
    for (let i = 0; i < padded; i++) sorted.push(i < mine.length ? mine[i]! : M);
    for (let b = 0; b < padded / BS; b++) blocks.push(e);
  }
  const total = sorted.length;
  while (sorted.length < cap) sorted.push(M);
  while (blocks.length < nb) blocks.push(-1);
  return { sorted, blocks, total };
}

test('llm.moe_align: sorted slots, block experts and padded total as vLLM\'s moe_align_block_size (stable within an expert)', () => {
  for (const [N, k, E, BS] of [[4, 2, 4, 4], [1, 1, 8, 16], [37, 2, 8, 16], [50, 4, 6, 8], [200, 2, 8, 64], [3, 2, 16, 32]] as const) {
    const ids = routing(N, k, E, N * 31 + E);
    const ref = alignRef((ids.flatten().tolist() as number[]), E, BS);
    for (const idx of [ids, ids.to('int32')]) {
      const [s, b, t] = nbx.llm.moe_align(idx, E, BS) as [Tensor, Tensor, Tensor];
      assert.equal(s.dt, 'int32'); assert.equal(b.dt, 'int32'); assert.equal(t.dt, 'int32');
      assert.deepEqual(s.tolist(), ref.sorted, `sorted ${N}x${k} E${E} BS${BS}`);
      assert.deepEqual(b.tolist(), ref.blocks, `blocks ${N}x${k} E${E} BS${BS}`);
      assert.deepEqual(t.tolist(), [ref.total]);
    }
  }
  // experts with no slots (their groups are empty), repeated experts in a row (not top-k, still defined)
  const ids = nbx.tensor([[3, 3], [3, 0], [5, 3]], { dtype: 'int64' });
  const [s, b, t] = nbx.llm.moe_align(ids, 6, 2) as [Tensor, Tensor, Tensor];
  const ref = alignRef([3, 3, 3, 0, 5, 3], 6, 2);
  assert.deepEqual([s.tolist(), b.tolist(), t.tolist()], [ref.sorted, ref.blocks, [ref.total]]);
  // no tokens: the sizes still follow (capacity E·(BS − 1)), every block past the total
  const [s0, b0, t0] = nbx.llm.moe_align(nbx.empty([0, 2], { dtype: 'int64' }), 4, 8) as [Tensor, Tensor, Tensor];
  assert.deepEqual([s0.shape, b0.tolist(), t0.tolist()], [[28], [-1, -1, -1, -1], [0]]);
});

test('llm.moe_align: checked arguments and out-of-range expert ids', () => {
  const ids = nbx.tensor([[0, 1]], { dtype: 'int64' });
  assert.throws(() => nbx.llm.moe_align(nbx.tensor([[0.5, 1]]), 2, 4), nbx.DTypeError);
  assert.throws(() => nbx.llm.moe_align(nbx.tensor([0, 1], { dtype: 'int64' }), 2, 4), nbx.DTypeError);
  assert.throws(() => nbx.llm.moe_align(ids, 0, 4), nbx.ValueError);
  assert.throws(() => nbx.llm.moe_align(ids, 2, 0), nbx.ValueError);
  assert.throws(() => nbx.llm.moe_align(nbx.tensor([[0, 2]], { dtype: 'int64' }), 2, 4), nbx.IndexError);
  assert.throws(() => nbx.llm.moe_align(nbx.tensor([[-1, 0]], { dtype: 'int64' }), 2, 4), nbx.IndexError);
});

test('llm.grouped_expert_linear: each slot times its expert\'s weight (= expert_linear), per-slot input, routing weights, slots not named are 0', () => {
  for (const dtype of ['float32', 'float64'] as const) {
    for (const [N, k, E, K, O, BS] of [[5, 2, 4, 12, 7, 4], [33, 2, 8, 16, 24, 16], [9, 3, 5, 8, 10, 2]] as const) {
      const ids = routing(N, k, E, N + K);
      const x = nbx.randn([N, K], { generator: g(1), dtype }), w = nbx.randn([E, O, K], { generator: g(2), dtype });
      const xs = nbx.randn([N, k, K], { generator: g(3), dtype }), rw = nbx.rand([N, k], { generator: g(4) });
      const [s, b, t] = nbx.llm.moe_align(ids, E, BS) as [Tensor, Tensor, Tensor];
      const opts = { top_k: k, block_size: BS };
      const close = (got: Tensor, want: Tensor, what: string): void => {
        assert.deepEqual(got.shape, want.shape, what);
        assert.equal(got.dt, want.dt, what);
        assert.ok(nbx.allclose(got, want, { rtol: 1e-5, atol: 1e-5 }), `${what}: max |diff| ${got.sub(want).abs().max().item()}`);
      };
      close(nbx.llm.grouped_expert_linear(x, w, s, b, t, opts), nbx.llm.expert_linear(x, w, ids), `shared ${dtype} ${N}x${k}`);
      close(nbx.llm.grouped_expert_linear(xs, w, s, b, t, opts), nbx.llm.expert_linear(xs, w, ids), `per slot ${dtype} ${N}x${k}`);
      const weighted = nbx.llm.expert_linear(x, w, ids).mul(rw.unsqueeze(-1)).to(dtype);
      close(nbx.llm.grouped_expert_linear(x, w, s, b, t, { ...opts, routing_weights: rw }), weighted, `weighted ${dtype} ${N}x${k}`);
    }
  }
  // a total that leaves the last expert's block out: its slots stay 0
  const ids = nbx.tensor([[0, 1], [1, 0]], { dtype: 'int64' });
  const x = nbx.randn([2, 8], { generator: g(5) }), w = nbx.randn([2, 3, 8], { generator: g(6) });
  const [s, b] = nbx.llm.moe_align(ids, 2, 4) as [Tensor, Tensor, Tensor];
  const got = nbx.llm.grouped_expert_linear(x, w, s, b, nbx.tensor([4], { dtype: 'int32' }), { top_k: 2, block_size: 4 });
  const want = nbx.llm.expert_linear(x, w, ids).mul(nbx.tensor([[1, 0], [0, 1]]).unsqueeze(-1));
  assert.ok(nbx.allclose(got, want, { rtol: 1e-5, atol: 1e-6 }));
});

test('llm.grouped_expert_linear: checked arguments and bad indices', () => {
  const ids = nbx.tensor([[0, 1], [1, 0]], { dtype: 'int64' });
  const x = nbx.randn([2, 8], { generator: g(7) }), w = nbx.randn([2, 3, 8], { generator: g(8) });
  const [s, b, t] = nbx.llm.moe_align(ids, 2, 4) as [Tensor, Tensor, Tensor];
  const opts = { top_k: 2, block_size: 4 };
  assert.throws(() => nbx.llm.grouped_expert_linear(x, w, s.to('int64'), b, t, opts), nbx.DTypeError);
  assert.throws(() => nbx.llm.grouped_expert_linear(x, w.to('float64'), s, b, t, opts), nbx.DTypeError);
  assert.throws(() => nbx.llm.grouped_expert_linear(nbx.randn([2, 7]), w, s, b, t, opts), nbx.ShapeError);
  assert.throws(() => nbx.llm.grouped_expert_linear(nbx.randn([2, 3, 8]), w, s, b, t, opts), nbx.ShapeError);
  assert.throws(() => nbx.llm.grouped_expert_linear(x, w, s, b, t, { top_k: 2, block_size: 8 }), nbx.ShapeError);
  assert.throws(() => nbx.llm.grouped_expert_linear(x, w, s, b, t, { ...opts, routing_weights: nbx.rand([2, 3]) }), nbx.ShapeError);
  // a slot past the padding value, an expert id past E before the total
  const badSlot = s.clone(); badSlot.index_fill_(0, nbx.tensor([0]), 5);
  assert.throws(() => nbx.llm.grouped_expert_linear(x, w, badSlot, b, t, opts), nbx.IndexError);
  const badExpert = b.clone(); badExpert.index_fill_(0, nbx.tensor([0]), 2);
  assert.throws(() => nbx.llm.grouped_expert_linear(x, w, s, badExpert, t, opts), nbx.IndexError);
});
