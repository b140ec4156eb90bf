// Fused CUDA scaled_dot_product_attention ('attention' kernel: prefill on tensor cores, split-KV decode)
// against the CPU composed path (skipped without a CUDA device; runs under the emulator too:
// node test/gen/cuda_emu.mjs node --test dist/test/cuda_attention.test.js). Covers float16/bfloat16
// (and float32 decode), head dims 64/128, causal with L = S, L < S, L > S, bool masks with fully
// masked rows, additive float masks broadcast over batch/heads, GQA, scale, strided (transposed) and
// 2-D/3-D inputs, decode with one and several KV chunks, and every prefill tile configuration; on a
// device with warpgroup MMA (an H200, or the emulator, which reports compute capability 9.0) the
// sm_90a kernel forced with each of its tiles over the same kinds of cases.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import * as nbx from '../src/index.js';
import type { Tensor } from '../src/tensor/tensor.js';
import type { DTypeName } from '../src/dtype/dtypes.js';
import { check, rand, skip } from './cuda_compare.js';
import { attentionStats, _forceAttentionConfig, PREFILL_SPACE, DECODE_SPACE, hasWgmma, wgmmaConfig } from '../src/backend/cuda/kernels/attention.js';
import { sm90Configs, sm90MoreConfigs, sm90Offered, sm90Tag, sm90Smem, sm90Ones, type Sm90Config } from '../src/backend/cuda/kernels/attention_sm90.js';
import { enumerate, type Config } from '../src/autotune/index.js';

const F = nbx.nn.functional;
const sdpa = (...a: unknown[]): Tensor => (F.scaled_dot_product_attention as (...x: unknown[]) => Tensor)(...a);
const HALF: DTypeName[] = ['float16', 'bfloat16'];
// fused kernels round P to the input dtype for P·V (FlashAttention does too): a little above tolFor's
const tol = (dt: DTypeName): [number, number] => (dt === 'bfloat16' ? [2e-2, 2e-2] : dt === 'float16' ? [4e-3, 4e-3] : [1e-4, 1e-4]);

/** Runs `f` and asserts it launched the fused kernel of `kind`. */
function fused(kind: 'prefill' | 'decode', label: string, f: (...xs: Tensor[]) => unknown, ins: Tensor[], dt: DTypeName): void {
  const before = attentionStats[kind];
  check(label, f, ins, tol(dt));
  assert.ok(attentionStats[kind] > before, `${label}: the fused ${kind} kernel did not run`);
}

function qkv(B: number, H: number, Hk: number, L: number, S: number, D: number, dt: DTypeName, seed: number): Tensor[] {
  return [rand([B, H, L, D], seed, -1, 1, dt), rand([B, Hk, S, D], seed + 1, -1, 1, dt), rand([B, Hk, S, D], seed + 2, -1, 1, dt)];
}

test('attention prefill: dtypes, head dims, causal (L = S, L < S, L > S), scale', { skip }, () => {
  for (const dt of HALF) for (const D of [64, 128]) {
    fused('prefill', `plain ${dt} D${D}`, (q, k, v) => sdpa(q, k, v), qkv(2, 3, 3, 37, 53, D, dt, 1), dt);
    fused('prefill', `causal L=S ${dt} D${D}`, (q, k, v) => sdpa(q, k, v, { is_causal: true }), qkv(1, 2, 2, 70, 70, D, dt, 2), dt);
    fused('prefill', `causal L<S ${dt} D${D}`, (q, k, v) => sdpa(q, k, v, { is_causal: true }), qkv(1, 2, 2, 20, 90, D, dt, 3), dt);
    fused('prefill', `causal L>S ${dt} D${D}`, (q, k, v) => sdpa(q, k, v, { is_causal: true, scale: 0.3 }), qkv(1, 1, 1, 80, 24, D, dt, 4), dt);
  }
});

test('attention prefill: bool mask (fully masked rows), float mask broadcast, GQA, strided and 2-D/3-D inputs', { skip }, () => {
  for (const dt of HALF) {
    const D = 64, L = 33, S = 45;
    const keep = nbx.gt(rand([L, S], 9), -0.3) as Tensor;
    const rows = nbx.arange(L).view(L, 1);
    const boolMask = nbx.logical_and(keep, nbx.ne(rows, 5)) as Tensor; // row 5 sees no key → 0
    fused('prefill', `bool mask ${dt}`, (q, k, v, m) => sdpa(q, k, v, m), [...qkv(2, 2, 2, L, S, D, dt, 10), boolMask], dt);
    fused('prefill', `float mask f32 ${dt}`, (q, k, v, m) => sdpa(q, k, v, m), [...qkv(2, 3, 3, L, S, D, dt, 11), rand([1, 3, L, S], 12, -3, 1)], dt);
    fused('prefill', `float mask ${dt}`, (q, k, v, m) => sdpa(q, k, v, m), [...qkv(2, 3, 3, L, S, D, dt, 13), rand([2, 1, 1, S], 14, -3, 1, dt)], dt);
    fused('prefill', `gqa ${dt}`, (q, k, v) => sdpa(q, k, v, { enable_gqa: true, is_causal: true }), qkv(2, 6, 2, 40, 40, 128, dt, 15), dt);
    // q/k/v as transposes of [B, L, H, D] (projection layout), k/v narrowed
    const t = (x: Tensor): Tensor => x.transpose(1, 2);
    const [q, k, v] = [rand([2, 30, 4, 64], 16, -1, 1, dt), rand([2, 50, 4, 64], 17, -1, 1, dt), rand([2, 50, 4, 64], 18, -1, 1, dt)];
    fused('prefill', `strided ${dt}`, (a, b, c) => sdpa(t(a), t(b).narrow(2, 3, 41), t(c).narrow(2, 3, 41)), [q, k, v], dt);
    fused('prefill', `2-D ${dt}`, (a, b, c) => sdpa(a, b, c), [rand([29, 64], 19, -1, 1, dt), rand([31, 64], 20, -1, 1, dt), rand([31, 64], 21, -1, 1, dt)], dt);
    fused('prefill', `3-D broadcast k/v ${dt}`, (a, b, c) => sdpa(a, b, c), [rand([3, 25, 128], 22, -1, 1, dt), rand([1, 27, 128], 23, -1, 1, dt), rand([1, 27, 128], 24, -1, 1, dt)], dt);
  }
});

// No device needed: every Hopper tile offered fits the 232,448 bytes of dynamic shared memory an sm_90 block can have
// (db1f4b1 listed n160s2Pt at 238,688 bytes; its device check entries failed to launch)
test('attention prefill: every offered Hopper tile fits the shared memory of an sm_90 block', () => {
  for (const D of [64, 128, 256]) for (const w of [...sm90Offered(D, false), ...sm90Offered(D, true)]) {
    const b = sm90Smem(D, w, sm90Ones(D, w.softmax));
    assert.ok(b <= 232448, `wgmma ${sm90Tag(w)} D${D}: ${b} bytes of shared memory`);
  }
});

test('attention prefill: every tile configuration gives the same answer', { skip }, () => {
  try {
    // every mma configuration the space allows, and the wgmma kernel's where the device has it
    const wg = [...sm90Configs(128), ...sm90MoreConfigs(128)]; // (sm90MoreConfigs: tiles offered on some problems only)
    const cfgs = enumerate(PREFILL_SPACE).filter((c) => !PREFILL_SPACE.constraint?.(c, { D: 128 }) &&
      (c.impl === 'mma' || (hasWgmma() && wg.some((w) => sm90Tag(w) === sm90Tag(c as unknown as Sm90Config)))));
    for (const c of cfgs) {
      _forceAttentionConfig({ prefill: c });
      // bfloat16 only: the float16 kernels differ in the mma/convert instruction names alone
      fused('prefill', `cfg ${JSON.stringify(c)}`, (q, k, v) => sdpa(q, k, v, { is_causal: true }), qkv(1, 2, 2, 150, 150, 128, 'bfloat16', 30), 'bfloat16');
    }
  } finally { _forceAttentionConfig({}); }
});

// The sm_90a kernel (attention_sm90.ts), each of its tiles forced: on an H200 and under the emulator,
// which emulates wgmma from the PTX ISA's descriptor and fragment layouts (skipped on other cards).
const wgSkip = (): boolean => !hasWgmma();
// NBX_ATTN_TILES (a regular expression on 'wgmma n96s3dP D128'-style tags) narrows the tiles, for the emulator
const tiles = new RegExp(process.env.NBX_ATTN_TILES ?? '.');
test('attention prefill, wgmma kernel: dtypes, head dims, causal, masks, GQA, several K/V tiles', { skip }, (t) => {
  nbx.zeros([1], { device: 'cuda' }).dispose(); // starts the backend
  if (wgSkip()) { t.skip('this device has no warpgroup MMA (sm_90a)'); return; }
  try {
    for (const D of [64, 128, 256]) for (const w of [...sm90Configs(D), ...sm90MoreConfigs(D)]) {
      const tag = `wgmma ${sm90Tag(w)} D${D}`;
      if (!tiles.test(tag)) continue;
      _forceAttentionConfig({ prefill: wgmmaConfig(w) });
      for (const dt of HALF) {
        const before = attentionStats.prefill90, tma = attentionStats.prefill90tma;
        fused('prefill', `${tag} plain ${dt}`, (q, k, v) => sdpa(q, k, v), qkv(1, 2, 2, 150, 330, D, dt, 60), dt);
        // K/V through the tensor memory accelerator where the driver encodes descriptors (the emulator does)
        if (process.env.NBX_ATTENTION_TMA !== '0') assert.ok(attentionStats.prefill90tma > tma, `${tag}: the TMA build did not run`);
        fused('prefill', `${tag} causal ${dt}`, (q, k, v) => sdpa(q, k, v, { is_causal: true }), qkv(1, 1, 1, 260, 260, D, dt, 61), dt);
        fused('prefill', `${tag} causal L>S ${dt}`, (q, k, v) => sdpa(q, k, v, { is_causal: true, scale: 0.3 }), qkv(1, 1, 1, 200, 70, D, dt, 62), dt);
        assert.ok(attentionStats.prefill90 > before, `${tag}: the wgmma kernel did not run`);
      }
      const dt = 'bfloat16';
      fused('prefill', `${tag} gqa`, (q, k, v) => sdpa(q, k, v, { enable_gqa: true, is_causal: true }), qkv(1, 4, 2, 140, 140, D, dt, 63), dt);
      const L = 133, S = 201;
      const keep = nbx.logical_and(nbx.gt(rand([L, S], 64), -0.3), nbx.ne(nbx.arange(L).view(L, 1), 5)) as Tensor; // row 5 sees no key → 0
      fused('prefill', `${tag} bool mask`, (q, k, v, m) => sdpa(q, k, v, m), [...qkv(1, 2, 2, L, S, D, dt, 65), keep], dt);
      fused('prefill', `${tag} float mask`, (q, k, v, m) => sdpa(q, k, v, m), [...qkv(1, 2, 2, L, S, D, dt, 66), rand([1, 2, L, S], 67, -3, 1)], dt);
      fused('prefill', `${tag} all masked`, (q, k, v, m) => sdpa(q, k, v, m), [...qkv(1, 1, 1, L, S, D, dt, 68), nbx.zeros([L, S], { dtype: 'bool' })], dt);
      // K/V broadcast over the heads (stride 0): no TMA descriptor, the cp.async build. (Rows 8 bytes longer than
      // the head, this case until the seventh session, are copied by the op layer, whose kernels need 16-byte
      // strides, and then took the TMA build.)
      const tma = attentionStats.prefill90tma, bc = (x: Tensor): Tensor => x.expand(1, 2, 90, D);
      fused('prefill', `${tag} broadcast K/V`, (q, k, v) => sdpa(q, bc(k), bc(v), { is_causal: true }),
        [rand([1, 2, 90, D], 69, -1, 1, dt), rand([1, 1, 90, D], 70, -1, 1, dt), rand([1, 1, 90, D], 71, -1, 1, dt)], dt);
      assert.equal(attentionStats.prefill90tma, tma, `${tag}: broadcast K/V took the TMA build`);
    }
  } finally { _forceAttentionConfig({}); }
});

// The per-warpgroup causal edge (config edge, tag e; forced only, not offered): warpgroup 0 releases the tiles past its
// rows' causal edge unread, where the tile-less form computes them fully masked (P = 0, the running max and sums
// unchanged), so the bits are those of the same tile without edge: persistent (several items per block, grid capped)
// and not, TMA and cp.async (K/V broadcast over heads), L = S, L > S, L < S, GQA, float16, a scale, D64/D128.
test('attention prefill, wgmma: the per-warpgroup causal edge gives the same bits', { skip }, (t) => {
  nbx.zeros([1], { device: 'cuda' }).dispose();
  if (wgSkip()) { t.skip('this device has no warpgroup MMA (sm_90a)'); return; }
  try {
    const tilesE: [number, Sm90Config][] = [[128, { blockN: 160, stages: 2, persistent: true }], [128, { blockN: 96, stages: 2 }], [64, { blockN: 192, stages: 2, persistent: true }]];
    for (const [D, w] of tilesE) {
      const tag = `wgmma ${sm90Tag({ ...w, edge: true })} D${D}`;
      if (!tiles.test(tag)) continue;
      const bc = (x: Tensor): Tensor => x.expand(1, 2, 230, D);
      const cases: [string, Tensor[], (...x: Tensor[]) => Tensor][] = [
        ['causal L=S', qkv(2, 2, 2, 300, 300, D, 'bfloat16', 90), (q, k, v) => sdpa(q, k, v, { is_causal: true })],
        ['causal L>S gqa', qkv(1, 4, 2, 290, 170, D, 'bfloat16', 91), (q, k, v) => sdpa(q, k, v, { is_causal: true, enable_gqa: true })],
        ['causal L<S f16', qkv(1, 2, 2, 140, 330, D, 'float16', 92), (q, k, v) => sdpa(q, k, v, { is_causal: true })],
        ['causal scale', qkv(1, 3, 3, 260, 260, D, 'bfloat16', 93), (q, k, v) => sdpa(q, k, v, { is_causal: true, scale: 0.3 })],
        ['causal broadcast K/V', [rand([1, 2, 230, D], 95, -1, 1, 'bfloat16'), rand([1, 1, 230, D], 96, -1, 1, 'bfloat16'), rand([1, 1, 230, D], 97, -1, 1, 'bfloat16')], (q, k, v) => sdpa(q, bc(k), bc(v), { is_causal: true })],
      ];
      for (const [name, ins, f] of cases) {
        const xs = ins.map((x) => x.to('cuda'));
        const out: Float32Array[] = [];
        for (const e of [false, true]) {
          _forceAttentionConfig({ prefill: wgmmaConfig({ ...w, edge: e }), ...(w.persistent ? { blocks: 3 } : {}) });
          const p0 = attentionStats.prefill90;
          out.push(f(...xs).to('float32').to('cpu').contiguous().dataSync() as Float32Array);
          assert.ok(attentionStats.prefill90 > p0, `${tag} ${name}: the wgmma kernel did not run`);
        }
        assert.deepEqual(out[1], out[0], `${tag} ${name}: bits differ from the tile without edge`);
      }
      // and right against the CPU path (the pair above could share a mistake)
      _forceAttentionConfig({ prefill: wgmmaConfig({ ...w, edge: true }) });
      fused('prefill', `${tag} causal`, (q, k, v) => sdpa(q, k, v, { is_causal: true }), qkv(1, 2, 2, 260, 260, D, 'bfloat16', 98), 'bfloat16');
    }
  } finally { _forceAttentionConfig({}); }
});

// The persistent tiles with their grid capped at 2 blocks, so each block walks many work items (on the device,
// and the emulator's 132 SMs, the cases above give most blocks one): items of different tile counts back to
// back (causal, L > S), across batch·heads and KV groups, with masks and fully masked rows; the chained forms
// (C) carry the Q buffers, the row sums and the finished item's O from one item to the next.
test('attention prefill, wgmma persistent kernels: many work items per block', { skip }, (t) => {
  nbx.zeros([1], { device: 'cuda' }).dispose();
  if (wgSkip()) { t.skip('this device has no warpgroup MMA (sm_90a)'); return; }
  try {
    for (const D of [64, 128]) for (const w of sm90Configs(D).filter((x) => x.persistent)) {
      const tag = `wgmma ${sm90Tag(w)} D${D}`;
      if (!tiles.test(tag)) continue;
      _forceAttentionConfig({ prefill: wgmmaConfig(w), blocks: 2 });
      const dt = 'bfloat16';
      fused('prefill', `${tag} causal x items`, (q, k, v) => sdpa(q, k, v, { is_causal: true }), qkv(2, 3, 3, 300, 300, D, dt, 80), dt);
      fused('prefill', `${tag} causal L>S gqa x items`, (q, k, v) => sdpa(q, k, v, { is_causal: true, enable_gqa: true, scale: 0.3 }), qkv(1, 4, 2, 290, 150, D, dt, 81), dt);
      const L = 133, S = 201;
      const keep = nbx.logical_and(nbx.gt(rand([L, S], 82), -0.3), nbx.ne(nbx.arange(L).view(L, 1), 5)) as Tensor; // row 5 sees no key → 0
      fused('prefill', `${tag} bool mask x items`, (q, k, v, m) => sdpa(q, k, v, m), [...qkv(2, 3, 3, L, S, D, dt, 83), keep], dt);
      fused('prefill', `${tag} float16 x items`, (q, k, v) => sdpa(q, k, v, { is_causal: true }), qkv(1, 3, 3, 260, 260, D, 'float16', 84), 'float16');
    }
  } finally { _forceAttentionConfig({}); }
});

// Split items (config split, tag k; the tuner offers them on problems that are not causal): the launcher runs the last
// batch·heads in a second launch with their items split over their keys, forced here on small problems (tail: batch·heads,
// parts: key runs an item; grid capped): runs of 2-3 tiles, causal items of 1-3 tiles in 4 parts (empty runs among them), a
// bool mask with a row that sees no key (two batches: the tail in the second), GQA in float16 with a scale. Right against the CPU path, and the same bits twice (whichever block
// merges, it weighs the parts in part order).
test('attention prefill, wgmma: items split over their keys', { skip }, (t) => {
  nbx.zeros([1], { device: 'cuda' }).dispose();
  if (wgSkip()) { t.skip('this device has no warpgroup MMA (sm_90a)'); return; }
  try {
    const tilesK: [number, Sm90Config][] = [[128, { blockN: 128, stages: 2, persistent: true, split: true }], [128, { blockN: 128, stages: 2, persistent: true, softmax: 'tcsum', split: true }],
      [64, { blockN: 192, stages: 2, pingpong: true, persistent: true, split: true }]];
    for (const [D, w] of tilesK) {
      const tag = `wgmma ${sm90Tag(w)} D${D}`;
      if (!tiles.test(tag)) continue;
      const L = 133, S = 201;
      const keep = nbx.logical_and(nbx.gt(rand([L, S], 104), -0.3), nbx.ne(nbx.arange(L).view(L, 1), 5)) as Tensor; // row 5 sees no key → 0
      // (tail: batch·heads of the last batch split in a second launch, whole KV groups; parts: key runs an item)
      const cases: [string, Tensor[], (...x: Tensor[]) => Tensor, DTypeName, { tail: number; parts: number }][] = [
        ['plain', qkv(1, 2, 2, 200, 700, D, 'bfloat16', 100), (q, k, v) => sdpa(q, k, v), 'bfloat16', { tail: 1, parts: 3 }],
        ['causal', qkv(1, 2, 2, 300, 300, D, 'bfloat16', 101), (q, k, v) => sdpa(q, k, v, { is_causal: true }), 'bfloat16', { tail: 1, parts: 4 }],
        ['bool mask', [...qkv(2, 2, 2, L, S, D, 'bfloat16', 102), keep], (q, k, v, m) => sdpa(q, k, v, m), 'bfloat16', { tail: 1, parts: 2 }],
        ['gqa f16 scale', qkv(1, 4, 2, 140, 520, D, 'float16', 103), (q, k, v) => sdpa(q, k, v, { enable_gqa: true, scale: 0.3 }), 'float16', { tail: 2, parts: 2 }],
      ];
      for (const [name, ins, f, dt, sp] of cases) {
        _forceAttentionConfig({ prefill: wgmmaConfig(w), blocks: 3, ...sp });
        fused('prefill', `${tag} ${name}`, f, ins, dt);
        const xs = ins.map((x) => x.to('cuda'));
        const a = f(...xs).to('float32').to('cpu').contiguous().dataSync() as Float32Array;
        const b = f(...xs).to('float32').to('cpu').contiguous().dataSync() as Float32Array;
        assert.deepEqual(b, a, `${tag} ${name}: not the same bits twice`);
        assert.ok(attentionStats.lastPrefill.endsWith('k'), `${tag} ${name}: ran ${attentionStats.lastPrefill}`);
      }
    }
  } finally { _forceAttentionConfig({}); }
});

// O through a staging tile in shared memory (config ostore, tag o): the same packed values as the 4-byte stores, so the
// same bits as the tile without it: several items per block (grid capped), L not a multiple of 128 (rows past L not
// stored; a second warpgroup wholly past L), GQA, a bool mask with a row that sees no key, float16, with split, chained.
test('attention prefill, wgmma: O through shared memory gives the same bits', { skip }, (t) => {
  nbx.zeros([1], { device: 'cuda' }).dispose();
  if (wgSkip()) { t.skip('this device has no warpgroup MMA (sm_90a)'); return; }
  try {
    const tilesO: [number, Sm90Config][] = [[128, { blockN: 128, stages: 2, persistent: true }], [128, { blockN: 128, stages: 2, persistent: true, softmax: 'tcsum' }],
      [128, { blockN: 160, stages: 2, persistent: true, split: true }], [64, { blockN: 192, stages: 2, pingpong: true, persistent: true }],
      [64, { blockN: 192, stages: 2, pingpong: true, persistent: true, chain: true, softmax: 'tcsum' }]];
    for (const [D, w] of tilesO) {
      const tag = `wgmma ${sm90Tag({ ...w, ostore: true })} D${D}`;
      if (!tiles.test(tag)) continue;
      const L = 150, S = 201;
      const keep = nbx.logical_and(nbx.gt(rand([L, S], 114), -0.3), nbx.ne(nbx.arange(L).view(L, 1), 5)) as Tensor; // row 5 sees no key → 0
      const cases: [string, Tensor[], (...x: Tensor[]) => Tensor][] = [
        ['causal x items', qkv(2, 2, 2, 300, 300, D, 'bfloat16', 110), (q, k, v) => sdpa(q, k, v, { is_causal: true })],
        ['L150 gqa', qkv(1, 4, 2, L, 330, D, 'bfloat16', 111), (q, k, v) => sdpa(q, k, v, { enable_gqa: true })],
        ['bool mask', [...qkv(1, 2, 2, L, S, D, 'bfloat16', 112), keep], (q, k, v, m) => sdpa(q, k, v, m)],
        ['f16 scale', qkv(1, 3, 3, 260, 260, D, 'float16', 113), (q, k, v) => sdpa(q, k, v, { is_causal: true, scale: 0.3 })],
      ];
      for (const [name, ins, f] of cases) {
        const xs = ins.map((x) => x.to('cuda'));
        const out: Float32Array[] = [];
        for (const o of [false, true]) {
          _forceAttentionConfig({ prefill: wgmmaConfig({ ...w, ostore: o }), blocks: 2, ...(w.split ? { tail: 2, parts: 2 } : {}) });
          out.push(f(...xs).to('float32').to('cpu').contiguous().dataSync() as Float32Array);
          assert.ok(attentionStats.lastPrefill.endsWith(o ? 'o' : sm90Tag(w).slice(-1)), `${tag} ${name}: ran ${attentionStats.lastPrefill}`);
        }
        assert.deepEqual(out[1], out[0], `${tag} ${name}: bits differ from the 4-byte stores`);
      }
      _forceAttentionConfig({ prefill: wgmmaConfig({ ...w, ostore: true }), blocks: 2 });
      fused('prefill', `${tag} causal`, (q, k, v) => sdpa(q, k, v, { is_causal: true }), qkv(1, 2, 2, 260, 260, D, 'bfloat16', 115), 'bfloat16');
    }
  } finally { _forceAttentionConfig({}); }
});

test('attention decode: one/several chunks, GQA row groups, masks, causal, float32', { skip }, () => {
  for (const dt of [...HALF, 'float32'] as DTypeName[]) for (const D of [64, 128]) {
    fused('decode', `decode 1x300 ${dt} D${D}`, (q, k, v) => sdpa(q, k, v), qkv(2, 2, 2, 1, 300, D, dt, 40), dt);
    fused('decode', `decode gqa rep4 L2 ${dt} D${D}`, (q, k, v) => sdpa(q, k, v, { enable_gqa: true }), qkv(1, 8, 2, 2, 777, D, dt, 41), dt);
  }
  for (const dt of [...HALF, 'float32'] as DTypeName[]) {
    const [q, k, v] = qkv(1, 2, 2, 3, 600, 64, dt, 42);
    fused('decode', `decode bool mask ${dt}`, (a, b, c, m) => sdpa(a, b, c, m), [q!, k!, v!, nbx.gt(rand([3, 600], 43), 0.2) as Tensor], dt);
    fused('decode', `decode float mask ${dt}`, (a, b, c, m) => sdpa(a, b, c, m), [q!, k!, v!, rand([1, 2, 1, 600], 44, -2, 2)], dt);
    fused('decode', `decode causal ${dt}`, (a, b, c) => sdpa(a, b, c, { is_causal: true }), [q!, k!, v!], dt);
    const none = nbx.zeros([3, 600], { dtype: 'bool' });
    fused('decode', `decode all masked ${dt}`, (a, b, c, m) => sdpa(a, b, c, m), [q!, k!, v!, none], dt);
  }
  try {
    for (const c of enumerate(DECODE_SPACE).filter((x) => !DECODE_SPACE.constraint?.(x, { D: 128 }))) {
      _forceAttentionConfig({ decode: c });
      fused('decode', `decode cfg ${JSON.stringify(c)}`, (q, k, v) => sdpa(q, k, v), qkv(1, 2, 2, 1, 3000, 128, 'bfloat16', 45), 'bfloat16');
    }
  } finally { _forceAttentionConfig({}); }
});

// The chunks' partials merged by the last block of each row group (one launch) or by the reduce kernel: the
// same function in the same order, so the same bits; the counters reset themselves (repeated launches).
test('attention decode: fused and kernel merges give the same bits', { skip }, () => {
  try {
    for (const impl of ['lanes', 'mma']) for (const [H, Hk, L] of [[2, 2, 1], [8, 2, 2], [16, 1, 1]]) {
      const [q, k, v] = qkv(2, H!, Hk!, L!, 1000, 128, 'bfloat16', 47).map((t) => t.to('cuda'));
      const out: Float32Array[] = [];
      for (const merge of ['fused', 'kernel', 'fused']) {
        _forceAttentionConfig({ decode: { impl, chunk: 128, threads: 128, merge } });
        const d0 = attentionStats.decode;
        out.push(sdpa(q, k, v, { enable_gqa: H !== Hk }).to('float32').to('cpu').contiguous().dataSync() as Float32Array);
        assert.ok(attentionStats.decode > d0, `${impl} ${merge}: the decode kernel did not run`);
      }
      assert.deepEqual(out[1], out[0], `${impl} H${H}/${Hk} L${L}: kernel merge differs from the fused one`);
      assert.deepEqual(out[2], out[0], `${impl} H${H}/${Hk} L${L}: a second fused launch differs`);
    }
  } finally { _forceAttentionConfig({}); }
});

// The decode forms that change no arithmetic (DECODE_SPACE v5): the lane kernel's transposed reduction (reduce
// 'scatter', at 2 and 4 rows per block: the same addition tree per row) and the tensor-core kernel's per-warp tiles
// (tiles 'warp', rings of 2 and 3: the same tiles) give the bits of the row-by-row reduction / block tiles; and
// they are right against the CPU path with masks and causal rows (a wrong slot-to-row map shows there).
// The lane kernel's streaming loads of K and V (knob ld 'stream': ld.global.nc.L1::no_allocate.L2::256B; plain loads under
// the emulator) move no bits: the same as plain loads at 1-4 rows a block, f16/bf16/f32, chunks ending inside the cache.
test('attention decode: streaming loads give the same bits', { skip }, () => {
  try {
    for (const [dt, H, Hk, L, threads] of [['bfloat16', 2, 2, 1, 128], ['float16', 8, 2, 2, 256], ['float32', 4, 1, 1, 128]] as [DTypeName, number, number, number, number][]) {
      const [q, k, v] = qkv(2, H, Hk, L, 777, 128, dt, 48).map((t) => t.to('cuda'));
      const out: Float32Array[] = [];
      for (const ld of ['plain', 'stream']) {
        _forceAttentionConfig({ decode: { impl: 'lanes', chunk: 256, threads, merge: 'kernel', ld } });
        out.push(sdpa(q, k, v, { enable_gqa: H !== Hk }).to('float32').to('cpu').contiguous().dataSync() as Float32Array);
        assert.ok(attentionStats.lastDecode.includes(ld === 'stream' ? ' ld ' : `t${threads} c`), `${dt} ${ld}: ran ${attentionStats.lastDecode}`);
      }
      assert.deepEqual(out[1], out[0], `${dt} H${H}/${Hk} L${L}: streaming loads differ`);
    }
  } finally { _forceAttentionConfig({}); }
});

test('attention decode: transposed reduction and per-warp tiles give the same bits', { skip }, () => {
  try {
    const cases: [number, number, number, number][] = [[8, 2, 1, 700], [8, 2, 2, 700], [4, 2, 1, 333], [16, 1, 1, 500]];
    const pairs: [string, Config, Config][] = [['lanes', { reduce: 'rows' }, { reduce: 'scatter' }], ['mma', { tiles: 'block' }, { tiles: 'warp' }], ['mma', { tiles: 'block' }, { tiles: 'warp', stages: 3 }]];
    for (const [impl, a, b] of pairs) {
      for (const [H, Hk, L, S] of cases) for (const D of [64, 128]) {
        const [q, k, v] = qkv(1, H, Hk, L, S, D, 'bfloat16', 48 + D).map((t) => t.to('cuda'));
        const out: Float32Array[] = [];
        for (const x of [a, b]) {
          _forceAttentionConfig({ decode: { impl, chunk: 128, threads: 128, merge: 'kernel', ...x } });
          out.push(sdpa(q, k, v, { enable_gqa: H !== Hk }).to('float32').to('cpu').contiguous().dataSync() as Float32Array);
        }
        assert.deepEqual(out[1], out[0], `${impl} ${JSON.stringify(b)} H${H}/${Hk} L${L} S${S} D${D}: bits differ from ${JSON.stringify(a)}`);
      }
    }
    const forms: Config[] = [{ impl: 'lanes', reduce: 'scatter', threads: 128 }, { impl: 'lanes', reduce: 'scatter', threads: 256 }, { impl: 'mma', tiles: 'warp', threads: 128 }, { impl: 'mma', tiles: 'warp', stages: 3, threads: 128 }];
    for (const x of forms) {
      _forceAttentionConfig({ decode: { chunk: 256, merge: 'fused', ...x } });
      const tag = JSON.stringify(x);
      for (const dt of HALF) fused('decode', `${tag} gqa rep4 L1 ${dt}`, (q, k, v) => sdpa(q, k, v, { enable_gqa: true }), qkv(1, 8, 2, 1, 777, 128, dt, 49), dt);
      if (x.impl === 'lanes') fused('decode', `${tag} gqa rep4 f32`, (q, k, v) => sdpa(q, k, v, { enable_gqa: true }), qkv(1, 8, 2, 1, 500, 64, 'float32', 50), 'float32');
      const dt = 'bfloat16';
      const [q, k, v] = qkv(1, 2, 2, 3, 600, 64, dt, 42);
      fused('decode', `${tag} bool mask`, (a, b, c, m) => sdpa(a, b, c, m), [q!, k!, v!, nbx.gt(rand([3, 600], 43), 0.2) as Tensor], dt);
      fused('decode', `${tag} causal`, (a, b, c) => sdpa(a, b, c, { is_causal: true }), [q!, k!, v!], dt);
      fused('decode', `${tag} all masked`, (a, b, c, m) => sdpa(a, b, c, m), [q!, k!, v!, nbx.zeros([3, 600], { dtype: 'bool' })], dt);
    }
  } finally { _forceAttentionConfig({}); }
});

// The tensor-core decode kernel with per-warp TMA tiles (tiles 'tma', sm_90: on an H200 and under the emulator, which
// emulates the boxes and the mbarriers' transaction bytes): the block tiles' bits, rings of 2 and 3, a chunk that ends
// inside a tile and S not a multiple of 16 (boxes past S arrive as zeros), masks, causal, all masked.
test('attention decode: per-warp TMA tiles give the same bits', { skip }, (t) => {
  nbx.zeros([1], { device: 'cuda' }).dispose(); // starts the backend
  if (wgSkip()) { t.skip('this device has no TMA (sm_90)'); return; }
  try {
    for (const stages of [2, 3]) for (const [H, Hk, L, S, chunk] of [[8, 2, 1, 700, 128], [16, 1, 1, 333, 512], [8, 2, 2, 1000, 4096]] as [number, number, number, number, number][]) for (const D of [64, 128]) {
      const [q, k, v] = qkv(1, H, Hk, L, S, D, 'bfloat16', 51 + D).map((t) => t.to('cuda'));
      const out: Float32Array[] = [];
      for (const tiles of ['block', 'tma']) {
        _forceAttentionConfig({ decode: { impl: 'mma', chunk, threads: 128, merge: 'kernel', tiles, stages } });
        out.push(sdpa(q, k, v, { enable_gqa: H !== Hk }).to('float32').to('cpu').contiguous().dataSync() as Float32Array);
        assert.ok(attentionStats.lastDecode.startsWith(tiles === 'tma' ? 'mma tma' : 'mma'), attentionStats.lastDecode);
      }
      assert.deepEqual(out[1], out[0], `tma s${stages} H${H}/${Hk} L${L} S${S} c${chunk} D${D}: bits differ from block tiles`);
    }
    _forceAttentionConfig({ decode: { impl: 'mma', chunk: 256, threads: 128, merge: 'fused', tiles: 'tma', stages: 2 } });
    for (const dt of HALF) fused('decode', `tma gqa rep4 L1 ${dt}`, (q, k, v) => sdpa(q, k, v, { enable_gqa: true }), qkv(1, 8, 2, 1, 777, 128, dt, 49), dt);
    const dt = 'bfloat16';
    const [q, k, v] = qkv(1, 2, 2, 3, 600, 64, dt, 42);
    fused('decode', 'tma bool mask', (a, b, c, m) => sdpa(a, b, c, m), [q!, k!, v!, nbx.gt(rand([3, 600], 43), 0.2) as Tensor], dt);
    fused('decode', 'tma causal', (a, b, c) => sdpa(a, b, c, { is_causal: true }), [q!, k!, v!], dt);
    fused('decode', 'tma all masked', (a, b, c, m) => sdpa(a, b, c, m), [q!, k!, v!, nbx.zeros([3, 600], { dtype: 'bool' })], dt);
  } finally { _forceAttentionConfig({}); }
});

// The tensor-core decode kernel (a KV group's rows as one m16 tile), forced: one and several chunks,
// GQA groups of 4 and 16 rows, masks, causal, a fully masked input; chunk 0: the chunk that fills the device.
test('attention decode on tensor cores: GQA row groups, chunks, masks, causal', { skip }, () => {
  try {
    for (const chunk of [64, 256, 0]) {
      _forceAttentionConfig({ decode: { impl: 'mma', chunk, threads: 128 } });
      for (const dt of HALF) for (const D of [64, 128]) {
        fused('decode', `mma${chunk} decode 1x300 ${dt} D${D}`, (q, k, v) => sdpa(q, k, v), qkv(2, 2, 2, 1, 300, D, dt, 40), dt);
        fused('decode', `mma${chunk} gqa rep4 L2 ${dt} D${D}`, (q, k, v) => sdpa(q, k, v, { enable_gqa: true }), qkv(1, 8, 2, 2, 777, D, dt, 41), dt);
      }
      const dt = 'bfloat16';
      fused('decode', `mma${chunk} gqa rep16`, (q, k, v) => sdpa(q, k, v, { enable_gqa: true }), qkv(1, 16, 1, 1, 500, 128, dt, 46), dt);
      const [q, k, v] = qkv(1, 2, 2, 3, 600, 64, dt, 42);
      fused('decode', `mma${chunk} bool mask`, (a, b, c, m) => sdpa(a, b, c, m), [q!, k!, v!, nbx.gt(rand([3, 600], 43), 0.2) as Tensor], dt);
      fused('decode', `mma${chunk} float mask`, (a, b, c, m) => sdpa(a, b, c, m), [q!, k!, v!, rand([1, 2, 1, 600], 44, -2, 2)], dt);
      fused('decode', `mma${chunk} causal`, (a, b, c) => sdpa(a, b, c, { is_causal: true }), [q!, k!, v!], dt);
      fused('decode', `mma${chunk} all masked`, (a, b, c, m) => sdpa(a, b, c, m), [q!, k!, v!, nbx.zeros([3, 600], { dtype: 'bool' })], dt);
    }
  } finally { _forceAttentionConfig({}); }
});

test('attention: cases outside the fused kernels take the composed path', { skip }, () => {
  const p0 = attentionStats.prefill, d0 = attentionStats.decode;
  check('f64', (q, k, v) => sdpa(q, k, v), qkv(1, 2, 2, 20, 20, 64, 'float64', 50));
  check('D 32', (q, k, v) => sdpa(q, k, v), qkv(1, 2, 2, 20, 20, 32, 'float16', 51), tol('float16'));
  check('f32 prefill', (q, k, v) => sdpa(q, k, v), qkv(1, 2, 2, 40, 20, 64, 'float32', 52));
  assert.equal(attentionStats.prefill, p0);
  assert.equal(attentionStats.decode, d0);
});
