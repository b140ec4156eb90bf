// WebGPU decode-step kernels against the CPU: the matrix-vector path of gemm (src/backend/webgpu/kernels/gemv.ts)
// through nn.functional.linear. Runs on any adapter (the local software one included; the subgroup
// variant where the adapter has 32-wide subgroups); skipped without one, with a message saying so.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import * as nbx from '../src/index.js';
import type { Tensor } from '../src/tensor/tensor.js';

process.env.NBX_WEBGPU_HOST_STAGING = '0';
const probe = await nbx.webgpu.probe();
const skip = probe.available ? false : `no WebGPU adapter (${probe.reason})`;
if (skip) process.stdout.write(`# webgpu decode tests NOT RUN: ${skip}.\n`);

type DT = 'float32' | 'float16' | 'bfloat16';
const G = 'webgpu';
const TOL: Record<DT, number> = { float32: 2e-5, float16: 2e-3, bfloat16: 1.6e-2 };

function lcg(seed: number): () => number {
  let s = seed >>> 0;
  return () => { s = (Math.imul(s, 1664525) + 1013904223) >>> 0; return s / 2 ** 32; };
}
const rand = (shape: number[], seed: number, scale = 1): Tensor => {
  const r = lcg(seed), n = shape.reduce((a, b) => a * b, 1);
  return nbx.tensor(Array.from({ length: n }, () => (r() * 2 - 1) * scale)).reshape(shape);
};
/** max |got - want| / max |want| */
async function relErr(got: Tensor, want: Tensor): Promise<number> {
  const g = (await got.cpu()).to('float64').dataSync() as Float64Array, w = want.to('float64').dataSync() as Float64Array;
  assert.equal(g.length, w.length);
  let d = 0, m = 0;
  for (let i = 0; i < g.length; i++) { d = Math.max(d, Math.abs(g[i]! - w[i]!)); m = Math.max(m, Math.abs(w[i]!)); if (Number.isNaN(g[i]!)) return Infinity; }
  return d / (m || 1);
}

test('webgpu linear with few rows (the matrix-vector kernel) equals the CPU: dtypes, rows 1..8, aligned and unaligned shapes, views', { skip }, async () => {
  let seed = 1;
  for (const dt of ['float32', 'bfloat16', 'float16'] as DT[]) {
    for (const [m, n, k] of [[1, 37, 256], [3, 20, 2048], [8, 9, 264], [1, 5, 12], [2, 7, 13]] as [number, number, number][]) {
      const x = rand([m, k], seed++).to(dt), w = rand([n, k], seed++, 0.1).to(dt);
      const want = nbx.nn.functional.linear(x, w);
      const got = nbx.nn.functional.linear(x.to(G), w.to(G));
      const e = await relErr(got, want);
      assert.ok(e <= TOL[dt], `${dt} m=${m} n=${n} k=${k}: relative error ${e}`);
    }
    // a row of a larger weight (offset), batched input [1, 1, k]
    const w = rand([10, 512], seed++, 0.1).to(dt), x = rand([1, 1, 512], seed++).to(dt);
    const e = await relErr(nbx.nn.functional.linear(x.to(G), w.to(G).slice(0, 2, 9)), nbx.nn.functional.linear(x, w.slice(0, 2, 9)));
    assert.ok(e <= TOL[dt], `${dt} sliced weight: relative error ${e}`);
  }
});

const llm = nbx.llm as unknown as {
  fused_add_rms_norm(x: Tensor, r: Tensor, w: Tensor | null, opts?: { eps?: number }): [Tensor, Tensor];
  rotary_and_cache(q: Tensor, k: Tensor, v: Tensor, cos: Tensor, sin: Tensor, kc: Tensor, vc: Tensor, idx: Tensor): Tensor;
  decode_attention(q: Tensor, k: Tensor, v: Tensor, mask: Tensor | null, opts?: { is_causal?: boolean; scale?: number }): Tensor;
};

test('webgpu fused_add_rms_norm equals the CPU (dtypes, with and without weight, long rows)', { skip }, async () => {
  let seed = 100;
  for (const dt of ['float32', 'bfloat16', 'float16'] as DT[]) {
    for (const [rows, n, w] of [[1, 2048, true], [3, 100, false], [2, 5000, true]] as [number, number, boolean][]) {
      const x = rand([rows, n], seed++).to(dt), r = rand([rows, n], seed++).to(dt), wt = w ? rand([n], seed++).to(dt) : null;
      const [o, s] = llm.fused_add_rms_norm(x, r, wt, { eps: 1e-5 });
      const [og, sg] = llm.fused_add_rms_norm(x.to(G), r.to(G), wt?.to(G) ?? null, { eps: 1e-5 });
      assert.ok(await relErr(sg, s) <= TOL[dt], `${dt} ${rows}x${n} residual`);
      const e = await relErr(og, o);
      assert.ok(e <= TOL[dt], `${dt} ${rows}x${n} weight=${w}: relative error ${e}`);
    }
  }
});

test('webgpu rotary_and_cache equals the CPU: q rotated, k rotated and v written at the device index, partial rotary, strided inputs; a bad index raises; half types by words and by elements', { skip }, async () => {
  let seed = 200;
  for (const [dt, pairs] of [['float32', '1'], ['bfloat16', '1'], ['bfloat16', '0'], ['float16', '1']] as [DT, string][]) {
    process.env.NBX_WEBGPU_ROTARY_PAIRS = pairs;
    for (const [B, H, KVH, T, D, R, S] of [[1, 8, 2, 1, 64, 64, 16], [2, 4, 4, 3, 32, 16, 12]] as number[][]) {
      // q/k/v as the decoder makes them: one projection [B, T, (H + 2KVH)·D] viewed as heads and transposed
      const qkv = rand([B!, T!, H! + 2 * KVH!, D!], seed++).to(dt);
      const q = qkv.slice(2, 0, H).transpose(1, 2), k = qkv.slice(2, H, H! + KVH!).transpose(1, 2), v = qkv.slice(2, H! + KVH!).transpose(1, 2);
      const ang = rand([1, T!, R! / 2], seed++, 3);
      const emb = nbx.cat([ang, ang], -1);
      const cos = emb.cos().to(dt), sin = emb.sin().to(dt);
      const kc = rand([B!, KVH!, S!, D!], seed++).to(dt), vc = rand([B!, KVH!, S!, D!], seed++).to(dt);
      const idx = nbx.tensor(Array.from({ length: T! }, (_, t) => (5 + 3 * t) % S!), { dtype: 'int64' });
      const kcg = kc.to(G), vcg = vc.to(G);
      const want = llm.rotary_and_cache(q, k, v, cos, sin, kc, vc, idx);
      const got = llm.rotary_and_cache(q.to(G), k.to(G), v.to(G), cos.to(G), sin.to(G), kcg, vcg, idx.to(G));
      const tol = dt === 'float32' ? 1e-6 : 1e-2;
      assert.ok(await relErr(got, want) <= tol, `${dt} pairs=${pairs} q`);
      assert.ok(await relErr(kcg, kc) <= tol, `${dt} pairs=${pairs} key cache`);
      assert.ok(await relErr(vcg, vc) <= 0, `${dt} pairs=${pairs} value cache (exact copies)`);
    }
  }
  delete process.env.NBX_WEBGPU_ROTARY_PAIRS;
  // an index past the cache: nothing written, IndexError at the next read
  for (const dt of ['float32', 'bfloat16'] as DT[]) {
    const q = rand([1, 2, 1, 8], 1).to(dt).to(G), k = rand([1, 1, 1, 8], 2).to(dt).to(G), cs = rand([1, 1, 8], 3).to(dt).to(G);
    const kc = nbx.zeros([1, 1, 4, 8]).to(dt).to(G), vc = nbx.zeros([1, 1, 4, 8]).to(dt).to(G);
    const out = llm.rotary_and_cache(q, k, k, cs, cs, kc, vc, nbx.tensor([4], { dtype: 'int64' }).to(G));
    await assert.rejects(async () => out.cpu(), (e: Error) => e.name === 'IndexError' && /out of bounds/.test(e.message), dt);
  }
});

test('webgpu decode_attention equals the CPU: GQA, bool and additive masks, causal rows, a cache view, keys past one chunk, wide and odd heads; 16-byte-word kernel and the general one', { skip }, async () => {
  let seed = 300;
  for (const [dt, vec, awg] of [['float32', '1', '256'], ['bfloat16', '1', '256'], ['float16', '1', '256'], ['float32', '0', '256'], ['bfloat16', '0', '256'],
    ['bfloat16', '1', '512'], ['float32', '1', '1024'], ['bfloat16', '1', '1024']] as [DT, string, string][]) {
    process.env.NBX_WEBGPU_ATTN_VEC = vec;
    process.env.NBX_WEBGPU_ATTN_WG = awg; // 512/1024 where the device takes them (else 256)
    for (const [B, H, KVH, L, S, D, mask, causal] of [
      [1, 8, 2, 1, 40, 64, 'bool', false], [2, 4, 4, 3, 7, 32, 'none', true], [1, 4, 1, 2, 1500, 16, 'float', false], [1, 32, 4, 1, 512, 64, 'bool', false],
      [1, 2, 1, 1, 30, 200, 'none', false], [1, 2, 2, 1, 9, 15, 'bool', false],
    ] as [number, number, number, number, number, number, string, boolean][]) {
      const q = rand([B, H, L, D], seed++).to(dt);
      // keys and values: the first S positions of a larger cache (a view, as the static decoder's)
      const kc = rand([B, KVH, S + 5, D], seed++).to(dt), vc = rand([B, KVH, S + 5, D], seed++).to(dt);
      const k = kc.slice(2, 0, S), v = vc.slice(2, 0, S);
      let m: Tensor | null = null;
      if (mask === 'bool') m = rand([B, 1, 1, S], seed++).gt(-0.6);
      if (mask === 'float') m = rand([B, 1, L, S], seed++, 2).to(dt);
      const want = llm.decode_attention(q, k, v, m, { is_causal: causal });
      const got = llm.decode_attention(q.to(G), k.to(G), v.to(G), m?.to(G) ?? null, { is_causal: causal });
      const e = await relErr(got, want);
      assert.ok(e <= (dt === 'float32' ? 1e-5 : 2e-2), `${dt} vec=${vec} wg=${awg} B${B} H${H}/${KVH} L${L} S${S} D${D} ${mask}${causal ? ' causal' : ''}: relative error ${e}`);
    }
  }
  delete process.env.NBX_WEBGPU_ATTN_VEC;
  delete process.env.NBX_WEBGPU_ATTN_WG;
  // every key masked: zeros (the safe softmax)
  const z = llm.decode_attention(rand([1, 2, 1, 8], 1).to(G), rand([1, 2, 5, 8], 2).to(G), rand([1, 2, 5, 8], 3).to(G), nbx.zeros([1, 1, 1, 5], { dtype: 'bool' }).to(G));
  assert.deepEqual(Array.from((await z.cpu()).dataSync() as Float32Array), new Array(16).fill(0));
});

test('a tiny Llama on WebGPU decodes the CPU\'s greedy tokens, with the replayed step graph and without', { skip }, async () => {
  const cfg = { model_type: 'llama', architectures: ['LlamaForCausalLM'], num_hidden_layers: 2, hidden_size: 64, intermediate_size: 128, num_attention_heads: 4, num_key_value_heads: 2,
    vocab_size: 500, rope_theta: 10000, max_position_embeddings: 512, rms_norm_eps: 1e-5, bos_token_id: 1, eos_token_id: 2, pad_token_id: 0, tie_word_embeddings: false, hidden_act: 'silu' };
  const cpu = nbx.models.fromConfig(cfg, { device: 'cpu', dtype: 'float32', seed: 3 });
  const gpu = nbx.models.fromConfig(cfg, { device: G, dtype: 'float32', seed: 3 });
  const ids = nbx.tensor([[5, 9, 77, 300, 12, 8]], { dtype: 'int64' });
  const opts = { max_new_tokens: 12, do_sample: false, eos_token_id: null };
  const want = (await cpu.generate(ids, opts)).tolist();
  assert.deepEqual((await gpu.generate(ids, opts)).tolist(), want, 'replayed');
  assert.deepEqual((await gpu.generate(ids, opts)).tolist(), want, 'replayed again (the kept decoder)');
  process.env.NBX_WEBGPU_REPLAY = '0';
  try { assert.deepEqual((await gpu.generate(ids, opts)).tolist(), want, 'eager'); } finally { delete process.env.NBX_WEBGPU_REPLAY; }
  cpu.dispose(); gpu.dispose();
});

test('webgpu gated_linear (the activation computed as the matrix-vector kernel loads it) equals the CPU; with a bias the composite', { skip }, async () => {
  const gl = (nbx.llm as unknown as { gated_linear(gu: Tensor, w: Tensor, b: Tensor | null, o: { act: string }): Tensor }).gated_linear;
  let seed = 400;
  for (const dt of ['float32', 'bfloat16'] as DT[]) {
    for (const [rows, K, N, act, bias] of [[1, 256, 40, 'silu', false], [3, 64, 9, 'gelu_tanh', false], [2, 32, 5, 'silu', true]] as [number, number, number, string, boolean][]) {
      const gu = rand([rows, 2 * K], seed++).to(dt), w = rand([N, K], seed++, 0.2).to(dt), b = bias ? rand([N], seed++).to(dt) : null;
      const want = gl(gu, w, b, { act });
      const got = gl(gu.to(G), w.to(G), b?.to(G) ?? null, { act });
      const e = await relErr(got, want);
      assert.ok(e <= TOL[dt], `${dt} rows ${rows} K ${K} N ${N} ${act}${bias ? ' bias' : ''}: relative error ${e}`);
    }
  }
});

test('a WebGPU step graph replays what it captured on new inputs, and raises a replay\'s bad cache index (deferred check)', { skip }, async () => {
  const { WebGPUGraph, captureWebGPU } = await import('../src/backend/webgpu/runtime/graph.js');
  const be = nbx.webgpu.backend();
  await be.ready;
  const q = rand([1, 2, 1, 8], 1).to(G), k = rand([1, 1, 1, 8], 2).to(G), cs = rand([1, 1, 8], 3).to(G);
  const kc = nbx.zeros([1, 1, 4, 8]).to(G), vc = nbx.zeros([1, 1, 4, 8]).to(G);
  const idx = nbx.tensor([1], { dtype: 'int64' }).to(G);
  const g = new WebGPUGraph(be as never);
  const out = captureWebGPU(g, () => llm.rotary_and_cache(q, k, k, cs, cs, kc, vc, idx).mul(2));
  const first = (await out.cpu()).tolist();
  idx.copy_(nbx.tensor([3], { dtype: 'int64' }));
  g.replay();
  assert.deepEqual((await out.cpu()).tolist(), first, 'same inputs, same outputs');
  await g.settle();
  const rows = (await kc.cpu()).tolist() as number[][][][];
  assert.ok(rows[0]![0]![1]!.some((x) => x !== 0) && rows[0]![0]![3]!.some((x) => x !== 0), 'keys written at the captured and at the replayed index');
  idx.copy_(nbx.tensor([7], { dtype: 'int64' }));
  g.replay();
  await assert.rejects(async () => { await out.cpu(); await g.settle(); }, (e: Error) => e.name === 'IndexError' && /cache_index\[0\]/.test(e.message));
  g.reset();
});

test('webgpu add_rms_norm_linear (the norm formed by the matrix-vector kernel) equals the CPU; with a bias the composite', { skip }, async () => {
  const f = (nbx.llm as unknown as { add_rms_norm_linear(x: Tensor, r: Tensor, nw: Tensor, w: Tensor, b: Tensor | null, o: { eps: number }): [Tensor, Tensor] }).add_rms_norm_linear;
  let seed = 500;
  for (const dt of ['float32', 'bfloat16', 'float16'] as DT[]) {
    for (const [rows, K, N, bias] of [[1, 2048, 40, false], [3, 64, 9, false], [2, 32, 5, true]] as [number, number, number, boolean][]) {
      const x = rand([rows, K], seed++).to(dt), r = rand([rows, K], seed++).to(dt), nw = rand([K], seed++).to(dt), w = rand([N, K], seed++, 0.2).to(dt);
      const b = bias ? rand([N], seed++).to(dt) : null;
      const [o, s] = f(x, r, nw, w, b, { eps: 1e-5 });
      const [og, sg] = f(x.to(G), r.to(G), nw.to(G), w.to(G), b?.to(G) ?? null, { eps: 1e-5 });
      assert.ok(await relErr(sg, s) <= TOL[dt], `${dt} residual`);
      const e = await relErr(og, o);
      assert.ok(e <= TOL[dt], `${dt} rows ${rows} K ${K} N ${N}${bias ? ' bias' : ''}: relative error ${e}`);
    }
  }
});

test('webgpu matrix-vector launch shapes (lanes per column 32..256, loads in flight 2..8, capped grids looping over column blocks) equal the CPU: plain, gated, normed', { skip }, async () => {
  const gl = (nbx.llm as unknown as { gated_linear(gu: Tensor, w: Tensor, b: Tensor | null, o: { act: string }): Tensor }).gated_linear;
  const nl = (nbx.llm as unknown as { add_rms_norm_linear(x: Tensor, r: Tensor, nw: Tensor, w: Tensor, b: Tensor | null, o: { eps: number }): [Tensor, Tensor] }).add_rms_norm_linear;
  const was = process.env.NBX_WEBGPU_GEMV;
  let seed = 700;
  try {
    for (const shape of ['32,4,0', '64,8,0', '128,2,3', '256,4,1', '32,8,2', '64,4,0,g']) {
      process.env.NBX_WEBGPU_GEMV = shape;
      // the first weight words loaded before the staging (default), and not (one shape)
      if (shape === '64,8,0') process.env.NBX_WEBGPU_GEMV_PREFETCH = '0'; else delete process.env.NBX_WEBGPU_GEMV_PREFETCH;
      for (const dt of ['float32', 'bfloat16', 'float16'] as DT[]) {
        for (const [m, n, k] of [[1, 37, 2048], [3, 21, 264]] as [number, number, number][]) {
          const x = rand([m, k], seed++).to(dt), w = rand([n, k], seed++, 0.1).to(dt);
          const e = await relErr(nbx.nn.functional.linear(x.to(G), w.to(G)), nbx.nn.functional.linear(x, w));
          assert.ok(e <= TOL[dt], `${shape} ${dt} linear m=${m} n=${n} k=${k}: relative error ${e}`);
        }
        const [rows, K, N] = dt === 'float32' ? [1, 1536, 19] : [2, 4096, 11];
        const gu = rand([rows, 2 * K], seed++).to(dt), wd = rand([N, K], seed++, 0.05).to(dt);
        const eg = await relErr(gl(gu.to(G), wd.to(G), null, { act: 'silu' }), gl(gu, wd, null, { act: 'silu' }));
        assert.ok(eg <= TOL[dt], `${shape} ${dt} gated rows ${rows} K ${K}: relative error ${eg}`);
        const x = rand([rows, K], seed++).to(dt), r = rand([rows, K], seed++).to(dt), nw = rand([K], seed++).to(dt);
        const [o, s] = nl(x, r, nw, wd, null, { eps: 1e-5 });
        const [og, sg] = nl(x.to(G), r.to(G), nw.to(G), wd.to(G), null, { eps: 1e-5 });
        assert.ok(await relErr(sg, s) <= TOL[dt], `${shape} ${dt} normed residual`);
        const en = await relErr(og, o);
        assert.ok(en <= TOL[dt], `${shape} ${dt} normed rows ${rows} K ${K}: relative error ${en}`);
      }
    }
  } finally {
    if (was === undefined) delete process.env.NBX_WEBGPU_GEMV; else process.env.NBX_WEBGPU_GEMV = was;
    delete process.env.NBX_WEBGPU_GEMV_PREFETCH;
  }
});
