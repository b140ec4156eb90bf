// CUDA's nbx.llm kernels (src/backend/cuda/kernels/llm.ts) against the CPU (skipped without a CUDA
// device; runs under the emulator too): fused_add_rms_norm and apply_rotary_pos_emb on every float dtype,
// strided q/k, broadcast cos/sin, partial rotary; the CUDA kernels against CUDA's own composites
// (nbx.llm.set_fusion(false)); and a tiny Llama's greedy tokens, fused and not, on CUDA.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import * as nbx from '../src/index.js';
import type { Tensor } from '../src/tensor/tensor.js';
import { FLOAT_DTYPES, check, noStaging, rand, same, skip } from './cuda_compare.js';
import { greedy } from './models_util.js';
import { setFusedGemvForms } from '../src/backend/cuda/kernels/gemv.js';

const EMU = !!process.env.NBX_EMU_DIR;
const unfused = <T>(fn: () => T): T => { const was = nbx.llm.set_fusion(false); try { return fn(); } finally { nbx.llm.set_fusion(was); } };

test('llm.fused_add_rms_norm on CUDA: every float dtype, with and without weight, against the CPU and CUDA\'s composite', { skip }, () => {
  for (const dt of FLOAT_DTYPES) {
    for (const [rows, n] of EMU ? [[1, 64], [3, 200]] : [[1, 256], [4, 2048], [7, 4099], [1, 8192]]) {
      const x = rand([rows, n], n, -2, 2, dt), r = rand([rows, n], n + 1, -2, 2, dt), w = rand([n], n + 2, 0.5, 1.5, dt);
      check(`add_rms ${dt} ${rows}x${n}`, (a, b, c) => nbx.llm.fused_add_rms_norm(a, b, c, 1e-5), [x, r, w]);
      check(`add_rms ${dt} ${rows}x${n} no weight`, (a, b) => nbx.llm.fused_add_rms_norm(a, b, null, 1e-5), [x, r]);
      const [gx, gr, gw] = [x, r, w].map((t) => t.to('cuda'));
      same(`add_rms ${dt} fused vs composite`, unfused(() => nbx.llm.fused_add_rms_norm(gx!, gr!, gw!, 1e-5)), nbx.llm.fused_add_rms_norm(gx!, gr!, gw!, 1e-5));
    }
  }
  noStaging(['fused_add_rms_norm']);
});

test('llm.apply_rotary_pos_emb on CUDA: every float dtype, strided q/k, broadcast and partial cos/sin', { skip }, () => {
  for (const dt of FLOAT_DTYPES) {
    for (const [B, H, KVH, T, D, R] of [[1, 8, 4, 1, 32, 32], [2, 4, 2, 5, 16, 16], [1, 3, 1, 4, 24, 12]]) {
      const q = rand([B!, T!, H!, D!], 1, -2, 2, dt), k = rand([B!, T!, KVH!, D!], 2, -2, 2, dt);
      const ang = rand([B!, T!, R! / 2], 3, 0, 6, 'float64');
      const cos = nbx.cat([ang, ang], -1).cos().to(dt), sin = nbx.cat([ang, ang], -1).sin().to(dt);
      const f = (a: Tensor, b: Tensor, c: Tensor, s: Tensor): unknown => nbx.llm.apply_rotary_pos_emb(a.transpose(1, 2), b.transpose(1, 2), c, s);
      check(`rope ${dt} [${B},${H},${KVH},${T},${D},${R}]`, f, [q, k, cos, sin]);
      check(`rope ${dt} broadcast cos/sin`, f, [q, k, cos.slice(0, 0, 1), sin.slice(0, 0, 1)]);
      const g = [q, k, cos, sin].map((t) => t.to('cuda')) as [Tensor, Tensor, Tensor, Tensor];
      same(`rope ${dt} fused vs composite`, unfused(() => f(...g)), f(...g));
    }
  }
  noStaging(['rotary_embedding']);
});

test('llm.rotary_and_cache on CUDA: rotated queries and the cache writes against the CPU composite; a bad index is an IndexError', { skip }, () => {
  for (const dt of FLOAT_DTYPES) {
    for (const [B, H, KVH, T, D, R, S] of [[1, 8, 4, 1, 32, 32, 16], [2, 4, 2, 2, 16, 16, 9], [1, 3, 1, 1, 24, 12, 5]]) {
      const qkv = rand([B!, T!, H! + 2 * KVH!, D!], 7, -2, 2, dt);
      const ang = rand([B!, T!, R! / 2], 3, 0, 6, 'float64');
      const cos = nbx.cat([ang, ang], -1).cos().to(dt), sin = nbx.cat([ang, ang], -1).sin().to(dt);
      const kc0 = rand([B!, KVH!, S!, D!], 11, -1, 1, dt), vc0 = rand([B!, KVH!, S!, D!], 12, -1, 1, dt);
      const index = nbx.tensor(Array.from({ length: T! }, (_, t) => (S! - 1 - 2 * t)), { dtype: 'int64' });
      // q, k and v as the decoder has them: slices of one projection, transposed to [B, heads, T, D]
      const f = (x: Tensor, c: Tensor, s: Tensor, kc: Tensor, vc: Tensor, i: Tensor): unknown => {
        const kcc = kc.clone(), vcc = vc.clone();
        const q = nbx.llm.rotary_and_cache(x.slice(2, 0, H).transpose(1, 2), x.slice(2, H, H! + KVH!).transpose(1, 2), x.slice(2, H! + KVH!).transpose(1, 2), c, s, kcc, vcc, i);
        return [q, kcc, vcc];
      };
      check(`rope+cache ${dt} [${B},${H},${KVH},${T},${D},${R},${S}]`, f, [qkv, cos, sin, kc0, vc0, index]);
      check(`rope+cache ${dt} broadcast cos/sin`, f, [qkv, cos.slice(0, 0, 1), sin.slice(0, 0, 1), kc0, vc0, index]);
      const g = [qkv, cos, sin, kc0, vc0, index].map((t) => t.to('cuda')) as [Tensor, Tensor, Tensor, Tensor, Tensor, Tensor];
      same(`rope+cache ${dt} fused vs composite`, unfused(() => f(...g)), f(...g));
    }
  }
  const g = [rand([1, 1, 4, 8], 1), rand([1, 1, 8], 2), rand([1, 1, 8], 3), nbx.zeros([1, 1, 4, 8]), nbx.zeros([1, 1, 4, 8])].map((t) => t.to('cuda')) as Tensor[];
  const bad = nbx.tensor([4], { dtype: 'int64', device: 'cuda' });
  assert.throws(() => nbx.llm.rotary_and_cache(g[0]!.slice(2, 0, 2).transpose(1, 2), g[0]!.slice(2, 2, 3).transpose(1, 2), g[0]!.slice(2, 3).transpose(1, 2), g[1]!, g[2]!, g[3]!, g[4]!, bad), (e: Error) => e.name === 'IndexError');
  const ok = nbx.llm.rotary_and_cache(g[0]!.slice(2, 0, 2).transpose(1, 2), g[0]!.slice(2, 2, 3).transpose(1, 2), g[0]!.slice(2, 3).transpose(1, 2), g[1]!, g[2]!, g[3]!, g[4]!, nbx.tensor([3], { dtype: 'int64', device: 'cuda' }));
  assert.equal(ok.shape.join(), '1,2,1,8');
  noStaging(['rotary_cache']);
});

test('llm.gated_linear on CUDA: the activation fused into the GEMV against the CPU composite (rows 1-16, bias, every activation)', { skip }, (t) => {
  const was = setFusedGemvForms('all'); // off by default (slower on the H200), tested all the same
  t.after(() => setFusedGemvForms(was));
  for (const dt of ['bfloat16', 'float16', 'float32'] as const) {
    for (const [rows, K, N] of [[1, 64, 40], [3, 128, 24], [9, 64, 16], [16, 32, 8]]) {
      const gu = rand([rows!, 2 * K!], 5, -3, 3, dt), w = rand([N!, K!], 6, -0.5, 0.5, dt), b = rand([N!], 8, -1, 1, dt);
      for (const act of ['silu', 'gelu_tanh']) {
        check(`gated_linear ${dt} ${rows}x${K}->${N} ${act}`, (x, y) => nbx.llm.gated_linear(x, y, null, { act }), [gu, w]);
      }
      check(`gated_linear ${dt} ${rows}x${K}->${N} bias`, (x, y, z) => nbx.llm.gated_linear(x.view([1, rows!, 2 * K!]), y, z), [gu, w, b]);
    }
  }
});

test('llm.add_rms_norm_linear on CUDA: the norm done by the GEMV\'s blocks against the CPU composite (rows 1-16, split K, bias)', { skip }, (t) => {
  const was = setFusedGemvForms('all');
  t.after(() => setFusedGemvForms(was));
  for (const dt of ['bfloat16', 'float16', 'float32'] as const) {
    for (const [rows, K, N] of [[1, 64, 40], [2, 256, 24], [9, 64, 16], [16, 512, 8], [1, 2048, 16]]) {
      const x = rand([rows!, K!], 15, -2, 2, dt), r = rand([rows!, K!], 16, -2, 2, dt), nw = rand([K!], 17, 0.5, 1.5, dt);
      const w = rand([N!, K!], 18, -0.5, 0.5, dt), b = rand([N!], 19, -1, 1, dt);
      check(`norm_linear ${dt} ${rows}x${K}->${N}`, (a, c, d, e) => nbx.llm.add_rms_norm_linear(a, c, d, e, null, 1e-5), [x, r, nw, w]);
      check(`norm_linear ${dt} ${rows}x${K}->${N} bias`, (a, c, d, e, f) => nbx.llm.add_rms_norm_linear(a.view([1, rows!, K!]), c.view([1, rows!, K!]), d, e, f, 1e-6), [x, r, nw, w, b]);
    }
  }
});

const LLAMA = join(process.cwd(), 'test', 'fixtures', 'models', 'llama');
test('a tiny Llama on CUDA: greedy tokens with the fused kernels equal the unfused path\'s (float32)', { skip: skip || (existsSync(join(LLAMA, 'model.safetensors')) ? false : 'no llama fixture') }, async () => {
  const model = await nbx.models.load(LLAMA, { device: 'cuda', dtype: 'float32' });
  try {
    const ids = nbx.tensor([[1, 5, 9, 14, 3]]); // on the host, as the model tests pass them
    const mask = nbx.ones_like(ids);
    const a = greedy(model, ids, mask, 6), b = unfused(() => greedy(model, ids, mask, 6));
    assert.deepEqual(a, b);
  } finally { model.dispose(); }
});

test('llm.expert_linear on CUDA: the routed-expert kernel against the CPU composite (shared and per-slot input, dtypes, bad ids)', { skip }, () => {
  for (const dt of ['float32', 'bfloat16', 'float16'] as const) {
    const w = rand([5, 24, 40], 11, -1, 1, dt), ids = nbx.tensor([[4, 0], [2, 2], [1, 3]], { dtype: 'int64' });
    check(`expert_linear shared ${dt}`, (x, ww, ii) => nbx.llm.expert_linear(x!, ww!, ii!), [rand([3, 40], 12, -1, 1, dt), w, ids]);
    check(`expert_linear per slot ${dt}`, (x, ww, ii) => nbx.llm.expert_linear(x!, ww!, ii!), [rand([3, 2, 40], 13, -1, 1, dt), w, ids]);
    // K not a multiple of the 16-byte load: the scalar loop
    check(`expert_linear odd K ${dt}`, (x, ww, ii) => nbx.llm.expert_linear(x!, ww!, ii!), [rand([3, 37], 14, -1, 1, dt), rand([5, 8, 37], 15, -1, 1, dt), ids]);
  }
  const bad = nbx.tensor([[0, 7]], { dtype: 'int64', device: 'cuda' });
  assert.throws(() => nbx.llm.expert_linear(rand([1, 40], 1).to('cuda'), rand([5, 24, 40], 2).to('cuda'), bad), nbx.IndexError);
});
