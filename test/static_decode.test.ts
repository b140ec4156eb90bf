// Fixed-shape decode steps (src/models/static_decode.ts, cache_implementation 'static'): on every fixture
// family the ids equal transformers' (greedy and seeded sampling, a left-padded batch of 2), and the
// logits of a static step equal the dynamic cache's within float32 rounding. On CUDA the steps replay a
// CUDA graph (src/backend/cuda/runtime/graph.ts); those tests skip without a CUDA device.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync, readdirSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import * as nbx from '../src/index.js';
import { generate } from '../src/generation/index.js';
import { StaticDecoder } from '../src/models/static_decode.js';
import type { CausalLMModel } from '../src/models/causal_lm.js';
import { GraphCaptureError, IndexError, UnsupportedError } from '../src/errors.js';
import { skip } from './cuda_compare.js';
import { transformersIdsMismatches } from './models_util.js';

const MODELS = join(dirname(fileURLToPath(import.meta.url)), '../../test/fixtures/models');
const CASES = readdirSync(MODELS).filter((c) => existsSync(join(MODELS, c, 'expected.safetensors'))).sort();
const ids = (t: nbx.Tensor): number[][] => t.tolist() as number[][];
const DYNAMIC_ROPE = new Set(['llama_dynamic_rope']);

test(`cache_implementation 'static': transformers' greedy and sampled ids on every fixture family (${CASES.length})`, async () => {
  const mismatches: string[] = [];
  for (const c of CASES) {
    if (DYNAMIC_ROPE.has(c)) {
      const model = await nbx.models.load(join(MODELS, c), { device: 'cpu', dtype: 'float32' });
      try { await assert.rejects(generate(model, nbx.tensor([[1, 2, 3]]), { cache_implementation: 'static', max_new_tokens: 2 }), UnsupportedError); } finally { model.dispose(); }
      continue;
    }
    mismatches.push(...await transformersIdsMismatches(join(MODELS, c), c, { cache_implementation: 'static' }));
  }
  assert.deepEqual(mismatches, []);
});

/** Logits of `steps` one-token steps after a prompt: the static decoder's and the dynamic cache's. */
async function stepLogits(model: CausalLMModel, prompt: number[][], steps: number): Promise<{ stat: Float32Array[]; dyn: Float32Array[] }> {
  const B = prompt.length, P = prompt[0]!.length;
  const feed = nbx.tensor(prompt, { dtype: 'int64', device: model.device });
  const dec = new StaticDecoder(model, B, 64, true);
  const dynCache = model.newCache({ batch: B, maxLength: 8 });
  const stat: Float32Array[] = [], dyn: Float32Array[] = [];
  try {
    dec.begin(null, P);
    model.forward(feed, { cache: dec.cache, logits_to_keep: 1 }).dispose();
    model.forward(feed, { cache: dynCache, logits_to_keep: 1 }).dispose();
    let tok = prompt.map((r) => r[r.length - 1]!);
    for (let s = 0; s < steps; s++) {
      const pos = P + s;
      const r = dec.step(tok, new Array<number>(B).fill(pos));
      stat.push(await r.logits.to('float32').data() as Float32Array);
      const d = model.forward(nbx.tensor(tok.map((t) => [t]), { dtype: 'int64', device: model.device }), { cache: dynCache });
      dyn.push(await d.to('float32').data() as Float32Array);
      d.dispose();
      tok = Array.from(await r.next!.data() as BigInt64Array, Number);
    }
  } finally { dec.dispose(); dynCache.dispose(); feed.dispose(); }
  return { stat, dyn };
}

test('a static step\'s logits equal the dynamic cache\'s (float32, every family, 5 steps)', async () => {
  for (const c of CASES) {
    if (DYNAMIC_ROPE.has(c)) continue;
    const model = await nbx.models.load(join(MODELS, c), { device: 'cpu', dtype: 'float32' }) as unknown as CausalLMModel;
    try {
      const { stat, dyn } = await stepLogits(model, [[3, 5, 7, 9, 11], [2, 4, 6, 8, 10]], 5);
      for (let s = 0; s < stat.length; s++) {
        let worst = 0;
        for (let i = 0; i < stat[s]!.length; i++) worst = Math.max(worst, Math.abs(stat[s]![i]! - dyn[s]![i]!));
        assert.ok(worst < 1e-4, `${c} step ${s}: max |static - dynamic| = ${worst}`);
      }
    } finally { model.dispose(); }
  }
});

test('cache_implementation is checked: a bad value is a ValueError naming the choices', async () => {
  const model = await nbx.models.load(join(MODELS, 'llama'), { device: 'cpu', dtype: 'float32' });
  try {
    await assert.rejects(generate(model, nbx.tensor([[1, 2, 3]]), { cache_implementation: 'paged' as never }), /'static', 'dynamic' or null/);
  } finally { model.dispose(); }
});

// ---- CUDA graphs --------------------------------------------------------------------------------

test('CUDA graph: capture, replay with new inputs, typed errors for what cannot be captured, deferred index checks', { skip }, async () => {
  const x = nbx.ones([1000], { device: 'cuda' });
  nbx.scope(() => { x.mul(2).add(1); }); // warm-up
  const g = new nbx.cuda.CUDAGraph();
  const y = nbx.cuda.graph(g, () => nbx.scope(() => x.mul(2).add(1)));
  assert.equal(nbx.cuda.is_current_stream_capturing(), false);
  x.copy_(nbx.full([1000], 3));
  g.replay();
  assert.deepEqual([...(await y.data() as Float32Array).slice(0, 2)], [7, 7]);
  x.copy_(nbx.full([1000], -1));
  g.replay();
  assert.equal((await y.data() as Float32Array)[999], -1);
  // a host read and a host copy inside a capture: GraphCaptureError, and the engine goes on
  const g2 = new nbx.cuda.CUDAGraph();
  assert.throws(() => nbx.cuda.graph(g2, () => x.sum().item()), GraphCaptureError);
  assert.throws(() => nbx.cuda.graph(g2, () => nbx.tensor([1, 2, 3], { device: 'cuda' })), GraphCaptureError);
  assert.equal(nbx.cuda.is_current_stream_capturing(), false);
  assert.equal((await x.add(1).data() as Float32Array)[0], 0);
  // an embedding's index check is answered after the replay
  const table = nbx.arange(0, 40, { dtype: 'float32', device: 'cuda' }).view([10, 4]);
  const tokens = nbx.tensor([[1, 2]], { dtype: 'int64', device: 'cuda' });
  nbx.nn.functional.embedding(tokens, table).dispose();
  const g3 = new nbx.cuda.CUDAGraph();
  const e = nbx.cuda.graph(g3, () => nbx.nn.functional.embedding(tokens, table));
  tokens.copy_(nbx.tensor([[3, 9]]));
  g3.replay(); g3.checkErrors();
  assert.deepEqual(Array.from(await e.data() as Float32Array), [12, 13, 14, 15, 36, 37, 38, 39]);
  tokens.copy_(nbx.tensor([[3, 12]]));
  g3.replay();
  assert.throws(() => g3.checkErrors(), IndexError);
  // scalar fills inside a capture travel as kernel parameters (stored values equal the eager ones)
  const fills = (): nbx.Tensor[] => [nbx.full([3], 2.7, { dtype: 'bfloat16', device: 'cuda' }), nbx.full([2], -3.4028234663852886e38, { dtype: 'float32', device: 'cuda' }),
    nbx.full([2], 7, { dtype: 'int64', device: 'cuda' }), nbx.full([2], true, { dtype: 'bool', device: 'cuda' })];
  const eagerFills = fills();
  const g4 = new nbx.cuda.CUDAGraph();
  const graphFills = nbx.cuda.graph(g4, fills);
  g4.replay();
  for (let i = 0; i < eagerFills.length; i++) assert.deepEqual(await graphFills[i]!.data(), await eagerFills[i]!.data());
  g4.reset();
  // any error inside a capture abandons it: the stream leaves capture mode, its pool is freed, work goes on
  const g5 = new nbx.cuda.CUDAGraph();
  assert.throws(() => nbx.cuda.graph(g5, () => nbx.scope(() => x.view([7, 3]))), nbx.ShapeError);
  assert.equal(nbx.cuda.is_current_stream_capturing(), false);
  assert.throws(() => g5.replay(), /nothing was captured/);
  assert.throws(() => nbx.cuda.graph(g5, (async () => x.add(1)) as never), GraphCaptureError);
  assert.equal((await x.mul(3).data() as Float32Array)[0], -3);
  const before = nbx.cuda.memoryStats().reservedBytes;
  g.reset(); g3.reset(); y.dispose(); e.dispose();
  nbx.cuda.emptyCache();
  assert.ok(nbx.cuda.memoryStats().reservedBytes <= before);
  for (const t of [x, table, tokens]) t.dispose();
});

/**
 * On every fixture family (float32, the left-padded batch of 2): generate() with replayed steps, twice (the
 * second replays the kept decoder without recording again), against the dynamic cache's ids. Returns the
 * mismatches and, per family, the kept decoder's stats.
 */
async function replayedVsDynamic(device: 'cpu' | 'cuda'): Promise<{ mismatches: string[]; stats: Map<string, ReturnType<StaticDecoder['stats']>> }> {
  const mismatches: string[] = [];
  const stats = new Map<string, ReturnType<StaticDecoder['stats']>>();
  for (const c of CASES) {
    if (DYNAMIC_ROPE.has(c)) continue;
    const { tensors: e } = await nbx.io.loadSafetensors(join(MODELS, c, 'expected.safetensors'), { names: ['input_ids', 'attention_mask'] });
    const model = await nbx.models.load(join(MODELS, c), { device, dtype: 'float32' }) as unknown as CausalLMModel;
    try {
      const common = { attention_mask: e.attention_mask!, max_new_tokens: 8, do_sample: false };
      const dynamic = await generate(model, e.input_ids!, { ...common, cache_implementation: 'dynamic' });
      const replayed = await generate(model, e.input_ids!, common);
      const again = await generate(model, e.input_ids!, common);
      stats.set(c, model.staticDecoder({ batch: 2, maxLength: e.input_ids!.shape[1]! + 8, greedy: true })!.stats());
      for (const [name, got] of [['replayed', replayed], ['again', again]] as const) {
        if (JSON.stringify(ids(got)) !== JSON.stringify(ids(dynamic))) mismatches.push(`${c} ${name}: ${JSON.stringify(ids(got))} vs dynamic ${JSON.stringify(ids(dynamic))}`);
      }
    } finally { model.dispose(); }
  }
  return { mismatches, stats };
}

test('CUDA: generate() replays a CUDA graph per step and gives the dynamic cache\'s ids (every family, float32)', { skip }, async () => {
  const { mismatches, stats } = await replayedVsDynamic('cuda');
  // mixture-of-experts layers too: a decode step's experts are read by device-held ids (llm.expert_linear)
  for (const [c, st] of stats) if (!st.captured) mismatches.push(`${c}: not captured (${st.fallbackReason})`);
  assert.deepEqual(mismatches, []);
});

test('concurrent generations on one model never share a static decoder\'s cache (interleaved at their awaits)', async () => {
  const model = await nbx.models.load(join(MODELS, 'llama'), { device: 'cpu', dtype: 'float32' });
  try {
    const opts = { max_new_tokens: 12, do_sample: false, cache_implementation: 'static' as const, eos_token_id: null };
    const a = nbx.tensor([[3, 5, 7, 9, 11]]), b = nbx.tensor([[12, 4, 8, 1, 6]]);
    const alone = [ids(await generate(model, a, opts)), ids(await generate(model, b, opts))];
    const together = await Promise.all([generate(model, a, opts), generate(model, b, opts)]);
    assert.deepEqual(together.map(ids), alone);
    // and the kept decoder still serves a later generation
    assert.deepEqual(ids(await generate(model, a, opts)), alone[0]);
  } finally { model.dispose(); }
});

test('CPU: generate() replays a recorded step and gives the dynamic cache\'s ids (every family, float32, left-padded batch)', async () => {
  const { mismatches, stats } = await replayedVsDynamic('cpu');
  const recorded: string[] = [];
  // mixture-of-experts layers route on the host on the CPU: refused while recording, run eagerly
  for (const [c, st] of stats) if (st.captured) recorded.push(c); else if (!/reads a tensor's values on the host/.test(st.fallbackReason ?? '')) mismatches.push(`${c}: not recorded (${st.fallbackReason})`);
  assert.deepEqual(mismatches, []);
  assert.ok(recorded.includes('llama') && recorded.length >= CASES.length - 4, `recorded: ${recorded.join(', ')}`);
});

test('CPU step recording: a replay repeats every kernel with the values written since; host reads are refused', async () => {
  const { recordCpu } = await import('../src/backend/cpu/runtime/recording.js');
  const x = nbx.keep(nbx.tensor([1, 2, 3], { dtype: 'float32' }));
  const { recording, result } = recordCpu(() => nbx.scope(() => x.mul(2).add(1).exp().log().sum(0, { keepdim: true })));
  assert.deepEqual(Array.from(result.dataSync()), [15]);
  x.copy_(nbx.tensor([10, 20, 30], { dtype: 'float32' }));
  recording.replay();
  assert.ok(Math.abs(result.dataSync()[0]! - 123) < 1e-3);
  // a fresh (zero-filled) buffer is zeroed again at each replay: index_add_ accumulates into it
  const idx = nbx.keep(nbx.tensor([0, 0, 1]));
  const acc = recordCpu(() => nbx.zeros([2]).index_add_(0, idx, x));
  acc.recording.replay(); acc.recording.replay();
  assert.deepEqual(Array.from(acc.result.dataSync()), [30, 30]);
  assert.throws(() => recordCpu(() => x.sum().item()), GraphCaptureError);
  assert.throws(() => recordCpu(() => nbx.nonzero(x)), GraphCaptureError);
  x.dispose(); idx.dispose(); result.dispose(); acc.result.dispose();
});

test('CUDA: a MoE layer\'s batched step (17-128 tokens) runs every expert densely and equals the host-routed loop on the CPU', { skip }, async () => {
  const cpuModel = await nbx.models.load(join(MODELS, 'mixtral'), { device: 'cpu', dtype: 'float32' }) as unknown as CausalLMModel;
  const cudaModel = await nbx.models.load(join(MODELS, 'mixtral'), { device: 'cuda', dtype: 'float32' }) as unknown as CausalLMModel;
  try {
    type Moe = { forward(x: nbx.Tensor, i: nbx.Tensor, w: nbx.Tensor): nbx.Tensor; num_experts: number };
    const experts = (m: CausalLMModel): Moe => (m.model.layers.get(0) as unknown as { mlp: { experts: Moe } }).mlp.experts;
    const E = experts(cpuModel).num_experts, H = cpuModel.cfg.hidden_size;
    for (const N of [17, 64, 128]) {
      const g = new nbx.Generator().manual_seed(N);
      const x = nbx.randn([N, H], { generator: g });
      const idx = nbx.stack([nbx.randint(0, E, [N], { generator: g }), nbx.randint(0, E, [N], { generator: g })], 1);
      const distinct = idx.select(1, 1).ne(idx.select(1, 0));
      const indices = nbx.stack([idx.select(1, 0), nbx.where(distinct, idx.select(1, 1), idx.select(1, 0).add(1).remainder(E))], 1);
      const w = nbx.softmax(nbx.randn([N, 2], { generator: g }), -1);
      const ref = experts(cpuModel).forward(x, indices, w);
      const got = await experts(cudaModel).forward(x.to('cuda'), indices.to('cuda'), w.to('cuda')).to('float32').data() as Float32Array;
      const r = ref.dataSync() as Float32Array;
      let worst = 0, scale = 0;
      for (let i = 0; i < r.length; i++) { worst = Math.max(worst, Math.abs(r[i]! - got[i]!)); scale = Math.max(scale, Math.abs(r[i]!)); }
      assert.ok(worst <= 1e-4 * Math.max(scale, 1), `N=${N}: max |dense - routed| = ${worst} (scale ${scale})`);
    }
  } finally { cpuModel.dispose(); cudaModel.dispose(); }
});

test('CUDA: a greedy step graph publishes its ids to mapped host memory; readNext equals the ids on the device, steps queued ahead included, and a read too late is a ValueError', { skip }, async () => {
  const config = { model_type: 'llama', hidden_size: 64, intermediate_size: 128, num_hidden_layers: 2, num_attention_heads: 4, num_key_value_heads: 2, vocab_size: 256, max_position_embeddings: 1024, tie_word_embeddings: false };
  const model = nbx.models.fromConfig(config, { device: 'cuda', dtype: 'float32', seed: 3 });
  const B = 2, P = 4;
  const dec = (model as unknown as { staticDecoder(o: object): StaticDecoder }).staticDecoder({ batch: B, maxLength: 600, greedy: true, force: true });
  dec.begin(null, P);
  let r = dec.step([5, 9], [P, P]); // eager
  r = dec.step(Array.from(await r.next!.data(), Number), [P + 1, P + 1]); // captured
  const seen: number[][] = [];
  for (let s = 0; s < 6; s++) { // a step queued before the last one is read (generate()'s loop)
    const read = dec.readNext(r.next!);
    const onDevice = Array.from(await r.next!.data(), Number);
    assert.deepEqual(await read, onDevice);
    seen.push(onDevice);
    r = dec.stepFromDevice();
  }
  assert.ok(dec.stats().captured);
  const first = dec.readNext(r.next!);
  const late: nbx.Tensor[] = [];
  for (let s = 0; s < 260; s++) late.push(dec.stepFromDevice().next!);
  late.at(-1)!.dataSync(); // blocks: the read's first look comes after all 260 steps wrote their slots
  await assert.rejects(first, (e: unknown) => e instanceof nbx.ValueError && /overwritten/.test((e as Error).message));
  dec.dispose();
});
