// CUDA's fused mixture-of-experts kernels (src/backend/cuda/kernels/moe.ts) against the CPU composites
// (skipped without a CUDA device; runs under the host emulator too: node test/gen/cuda_emu.mjs node
// --test dist/test/moe_cuda.test.js): moe_align exactly (several tiles of 1024 slots, empty experts,
// int32 and int64 ids), the grouped GEMM on bfloat16/float16 for every block size, shared and per-slot
// input, routing weights, output features past a tile and K past a stage; bad indices as IndexError;
// a Mixtral layer's prompt (> 128 tokens: the grouped path) against the host-routed loop; and both kernels
// inside a CUDA graph (which also proves moe_align ran its kernel: the composite uploads host data).

import { test } from 'node:test';
import assert from 'node:assert/strict';
import * as nbx from '../src/index.js';
import type { Tensor } from '../src/tensor/tensor.js';
import { groupedExpertKernel } from '../src/ops/llm.js';
import { check, rand, same, skip } from './cuda_compare.js';
import { routing } from './moe_util.js';
import { moeStats, gemm90Enabled } from '../src/backend/cuda/kernels/moe.js';

const EMU = !!process.env.NBX_EMU_DIR;

test('llm.moe_align on CUDA: the kernel equals the composite (several tiles, empty experts, int32/int64 ids)', { skip }, () => {
  const cases: [number, number, number, number][] = EMU
    ? [[5, 2, 4, 4], [600, 2, 8, 64], [40, 3, 64, 16]]
    : [[5, 2, 4, 4], [600, 2, 8, 64], [2048, 2, 8, 64], [4096, 8, 128, 16], [1, 1, 256, 128], [3000, 6, 60, 32]];
  for (const [N, k, E, BS] of cases) {
    const ids = routing(N, k, E, N + E);
    check(`moe_align ${N}x${k} E${E} BS${BS}`, (i) => nbx.llm.moe_align(i!, E, BS), [ids]);
    check(`moe_align int32 ${N}x${k} E${E} BS${BS}`, (i) => nbx.llm.moe_align(i!, E, BS), [ids.to('int32')]);
  }
  // only experts 3 and 5 of 8 routed to
  check('moe_align empty experts', (i) => nbx.llm.moe_align(i!, 8, 4), [nbx.tensor([[3, 5], [5, 3], [3, 3]], { dtype: 'int64' })]);
  assert.throws(() => nbx.llm.moe_align(nbx.tensor([[0, 8]], { dtype: 'int64', device: 'cuda' }), 8, 16), nbx.IndexError);
  assert.throws(() => nbx.llm.moe_align(nbx.tensor([[-1, 0]], { dtype: 'int64', device: 'cuda' }), 8, 16), nbx.IndexError);
});

test('llm.grouped_expert_linear on CUDA: the tensor-core kernel against the CPU composite (dtypes, block sizes, per-slot input, routing weights)', { skip }, () => {
  // [N, k, E, K, O, block sizes]; the emulator runs each tensor-core instruction as 64 warp shuffles (a
  // few small shapes there), and the CPU composite of the larger ones takes about a second a check
  const shapes = (dt: string): [number, number, number, number, number, number[]][] => (EMU
    ? (dt === 'float16' ? [[7, 3, 5, 72, 18, [32, 128]]] : [[20, 2, 4, 40, 136, [16, 64]], [7, 3, 5, 72, 18, [16, 64]], [70, 2, 3, 328, 264, [64, 128]]])
    : [[20, 2, 4, 40, 136, [16, 32, 64, 128]], [7, 3, 5, 72, 18, [16, 32, 64, 128]], [300, 2, 8, 256, 384, [64, 128]], [150, 4, 16, 136, 130, [16, 32]],
      [600, 2, 8, 1096, 520, [64, 128]]]);
  // (K 328 / 1096: the Hopper kernel's ring of 64-deep slots wraps; O 264 / 520: a partial 256-wide tile)
  const was = { ...moeStats };
  for (const dt of ['bfloat16', 'float16'] as const) {
    for (const [N, k, E, K, O, sizes] of shapes(dt)) {
      for (const BS of sizes) {
        const ids = routing(N, k, E, N * 7 + BS);
        const x = rand([N, K], N + K, -1, 1, dt), xs = rand([N, k, K], N + 1, -1, 1, dt), w = rand([E, O, K], E + O, -1, 1, dt);
        const rw = rand([N, k], 5, 0, 1, 'float32');
        assert.ok(groupedExpertKernel(x.to('cuda'), BS), `the kernel covers ${dt} block ${BS}`);
        const opts = { top_k: k, block_size: BS };
        const f = (xx: Tensor, ww: Tensor, ii: Tensor, r?: Tensor): Tensor => {
          const [s, b, t] = nbx.llm.moe_align(ii, E, BS) as [Tensor, Tensor, Tensor];
          return nbx.llm.grouped_expert_linear(xx, ww, s, b, t, r ? { ...opts, routing_weights: r } : opts);
        };
        const label = `${dt} N${N} k${k} E${E} K${K} O${O} BS${BS}`;
        check(`grouped shared ${label}`, (a, b, c) => f(a!, b!, c!), [x, w, ids]);
        check(`grouped per slot ${label}`, (a, b, c) => f(a!, b!, c!), [xs, w, ids]);
        check(`grouped weighted ${label}`, (a, b, c, d) => f(a!, b!, c!, d!), [x, w, ids, rw]);
        if (BS === 16) check(`grouped weighted (${dt} weights) ${label}`, (a, b, c, d) => f(a!, b!, c!, d!), [x, w, ids, rw.to(dt)]);
      }
    }
  }
  // block sizes 64 and 128 went to the warpgroup-MMA kernel where the device has it, the others to mma.sync
  assert.ok(moeStats.gemm > was.gemm, 'the mma.sync kernel ran');
  if (gemm90Enabled()) assert.ok(moeStats.gemm90 > was.gemm90, 'the Hopper kernel ran');
});

test('llm.grouped_expert_linear on CUDA: the Hopper kernel\'s other tiles (warp-specialized with the weight by TMA, 3-5 slots) against the composite', { skip }, (t) => {
  nbx.zeros([1], { device: 'cuda' }).dispose(); // the backend started: its device facts known
  if (!gemm90Enabled()) { t.skip('the device has no warpgroup MMA'); return; }
  // K 328: the ring wraps; O 264: a partial tile (the TMA box's rows past O arrive as zeros)
  const [N, k, E, K, O] = EMU ? [70, 2, 3, 328, 264] : [600, 2, 8, 1096, 520];
  const tiles: [number, string][] = [[128, '128,256,4,ws'], [64, '64,256,3,ws'], [128, '128,128,5,ws'], [64, '64,128,5'], [128, '64,256,3']];
  for (const [BS, spec] of tiles) {
    const ids = routing(N, k, E, BS + spec.length);
    const x = rand([N, K], 11, -1, 1, 'bfloat16'), w = rand([E, O, K], 12, -1, 1, 'bfloat16'), rw = rand([N, k], 13, 0, 1, 'float32');
    const was = { ...moeStats };
    process.env.NBX_MOE_GEMM90_TILE = spec;
    try {
      check(`grouped ${spec} BS${BS}`, (a, b, c, d) => {
        const [s, bx, t] = nbx.llm.moe_align(c!, E, BS) as [Tensor, Tensor, Tensor];
        return nbx.llm.grouped_expert_linear(a!, b!, s, bx, t, { top_k: k, block_size: BS, routing_weights: d! });
      }, [x, w, ids, rw]);
    } finally { delete process.env.NBX_MOE_GEMM90_TILE; }
    if (spec.endsWith('ws')) assert.ok(moeStats.gemm90ws > was.gemm90ws, `${spec}: the warp-specialized kernel ran`);
  }
});

test('llm.grouped_expert_linear on CUDA: bad indices are IndexErrors', { skip }, () => {
  const ids = nbx.tensor([[0, 1], [1, 0]], { dtype: 'int64', device: 'cuda' });
  const x = rand([2, 16], 1, -1, 1, 'bfloat16').to('cuda'), w = rand([2, 8, 16], 2, -1, 1, 'bfloat16').to('cuda');
  const [s, b, t] = nbx.llm.moe_align(ids, 2, 16) as [Tensor, Tensor, Tensor];
  const opts = { top_k: 2, block_size: 16 };
  const badSlot = s.clone(); badSlot.index_fill_(0, nbx.tensor([0], { device: 'cuda' }), 9);
  assert.throws(() => nbx.llm.grouped_expert_linear(x, w, badSlot, b, t, opts), nbx.IndexError);
  const badExpert = b.clone(); badExpert.index_fill_(0, nbx.tensor([1], { device: 'cuda' }), 7);
  assert.throws(() => nbx.llm.grouped_expert_linear(x, w, s, badExpert, t, opts), nbx.IndexError);
  assert.throws(() => nbx.llm.grouped_expert_linear(x, w, s, b, nbx.tensor([999], { dtype: 'int32', device: 'cuda' }), opts), nbx.IndexError);
  // the error word is cleared between calls: a good call after bad ones succeeds
  nbx.llm.grouped_expert_linear(x, w, s, b, t, opts);
});

test('a Mixtral layer on CUDA (bfloat16): a prompt of more than 128 tokens takes the grouped path, within bf16 tolerance of the host-routed loop', { skip }, () => {
  const H = 64, I = 96, E = 4, N = EMU ? 136 : 600;
  const model = nbx.models.fromConfig({
    model_type: 'mixtral', hidden_size: H, intermediate_size: I, num_hidden_layers: 1, num_attention_heads: 4, num_key_value_heads: 2,
    num_local_experts: E, num_experts_per_tok: 2, vocab_size: 64, max_position_embeddings: 1024, rms_norm_eps: 1e-5,
  }, { device: 'cuda', dtype: 'bfloat16', seed: 3, std: 0.2 });
  try {
    const block = (model as unknown as { model: { layers: { mlp: { forward(x: Tensor): Tensor } }[] } }).model.layers[0]!.mlp;
    const x = rand([1, N, H], 9, -2, 2, 'bfloat16').to('cuda');
    assert.ok(groupedExpertKernel(x, 64), 'the grouped path is there for bf16 on CUDA');
    const fused = block.forward(x);
    const was = nbx.llm.set_fusion(false);
    let loop: Tensor;
    try { loop = block.forward(x); } finally { nbx.llm.set_fusion(was); }
    const a = fused.to('float32'), b = loop.to('float32');
    const err = a.sub(b).abs().max().item() as number, scale = b.abs().max().item() as number;
    assert.ok(err <= 2e-2 * scale, `grouped vs host-routed: max |diff| ${err} (max |loop| ${scale})`);
  } finally { model.dispose(); }
});

test('the grouped path in a CUDA graph: captured once, replayed with new routing (= eager), a bad id raised by checkErrors', { skip }, () => {
  const N = EMU ? 40 : 300, k = 2, E = 4, K = 64, O = 48, BS = 16;
  const x = rand([N, K], 1, -1, 1, 'bfloat16').to('cuda'), w = rand([E, O, K], 2, -1, 1, 'bfloat16').to('cuda');
  const rw = rand([N, k], 4, 0, 1).to('cuda'), ids = routing(N, k, E, 3).to('cuda');
  const f = (): Tensor => nbx.scope(() => {
    const [s, b, t] = nbx.llm.moe_align(ids, E, BS) as [Tensor, Tensor, Tensor];
    return nbx.llm.grouped_expert_linear(x, w, s, b, t, { top_k: k, block_size: BS, routing_weights: rw });
  });
  f().dispose(); // compiles outside the capture
  const g = new nbx.cuda.CUDAGraph();
  const y = nbx.cuda.graph(g, f);
  for (const seed of [5, 6]) {
    ids.copy_(routing(N, k, E, seed));
    g.replay(); g.checkErrors();
    same(`replay (routing ${seed}) vs eager`, f(), y, [0, 0]);
  }
  const bad = routing(N, k, E, 7); bad.index_fill_(0, nbx.tensor([N - 1]), E);
  ids.copy_(bad);
  g.replay();
  assert.throws(() => g.checkErrors(), nbx.IndexError);
});
