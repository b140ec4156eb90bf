// The serving engine's mixed steps (src/generation/engine.ts: decode tokens and prompt tokens as rows of
// one forward over fixed input buffers, sampled on the device) and their replay: CPU step recordings
// here, CUDA graphs on a CUDA device (skipped visibly without one; the CUDA test also runs under the host
// emulator: NBX_EMU_WORK=/tmp/nbx_emu_$USER node test/gen/cuda_emu.mjs node --test dist/test/engine_graphs.test.js).
// Replayed steps give the eager steps' tokens, which are each request's tokens run alone with the same
// seed, and the tokens of the split path (one prompt chunk through the model's attention, then decode).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import * as nbx from '../src/index.js';
import { Engine, type EngineOptions, type EngineRequest } from '../src/generation/engine.js';
import type { CausalLMModel } from '../src/models/causal_lm.js';
import { cpuRecording } from '../src/backend/cpu/runtime/recording.js';
import { skip as noCuda } from './cuda_compare.js';

const MODELS = join(dirname(fileURLToPath(import.meta.url)), '../../test/fixtures/models');
const EMU = !!process.env.NBX_EMU_DIR;

function requests(n: number, vocab: number, long = 0): EngineRequest[] {
  return Array.from({ length: n }, (_, i) => ({
    prompt: Array.from({ length: 1 + ((i * 7) % 13) + long }, (_, j) => (i * 31 + j * 17 + 3) % vocab),
    max_new_tokens: 3 + ((i * 5) % 11),
    ...(i % 3 === 0 ? { temperature: 0 } : { temperature: 0.9, seed: 100 + i, ...(i % 3 === 2 ? { top_k: 20, top_p: 0.8 } : {}) }),
    eos_token_id: [],
  }));
}

/** Every request at once (some joining later), then each alone in an engine of its own. */
async function batchedAndAlone(model: CausalLMModel, reqs: EngineRequest[], opts: EngineOptions): Promise<{ batched: number[][]; alone: number[][]; stats: ReturnType<Engine['graphStats']> }> {
  const e = new Engine(model, opts);
  const first = reqs.slice(0, 3).map((r) => e.submit(r).result);
  await new Promise((r) => setTimeout(r, 5));
  const rest = reqs.slice(3).map((r) => e.submit(r).result);
  const batched = (await Promise.all([...first, ...rest])).map((r) => r.tokens);
  const stats = e.graphStats();
  assert.equal(e.stats().kv_blocks_used, 0);
  await e.close();
  const alone: number[][] = [];
  for (const r of reqs) {
    const a = new Engine(model, opts);
    alone.push((await a.submit(r).result).tokens);
    await a.close();
  }
  return { batched, alone, stats };
}

const cpu = (name: string): Promise<CausalLMModel> => nbx.models.load(join(MODELS, name), { device: 'cpu', dtype: 'float32' });

test('mixed steps replayed as CPU step recordings = eager mixed steps = each request alone = the split path (Llama; Gemma 2 with window and soft-capping; one shape and power-of-two buckets)', async () => {
  for (const name of ['llama', 'gemma2']) {
    const model = await cpu(name);
    try {
      const reqs = requests(8, model.config.vocab_size);
      const base = { maxBatch: 3, blockSize: 4, prefillChunk: 5, sampling: 'device' as const, mixedSteps: true };
      const split: number[][] = [];
      for (const r of reqs) {
        const e = new Engine(model, { ...base, padBatch: true, mixedSteps: false });
        split.push((await e.submit(r).result).tokens);
        await e.close();
      }
      for (const padBatch of [true, false]) {
        const eager = await batchedAndAlone(model, reqs, { ...base, padBatch, graphs: false });
        const replay = await batchedAndAlone(model, reqs, { ...base, padBatch, graphs: true });
        const what = `${name} padBatch ${padBatch}`;
        assert.equal(eager.stats.replays, 0, what);
        assert.ok(replay.stats.captures > 0 && replay.stats.replays > replay.stats.eagerSteps, `${what}: ${JSON.stringify(replay.stats)}`);
        assert.equal(replay.stats.fallbackReason, null);
        assert.deepEqual(replay.batched, eager.batched, `${what}: replayed = eager`);
        assert.deepEqual(eager.batched, eager.alone, `${what}: batched = alone`);
        assert.deepEqual(replay.alone, eager.alone, `${what}: alone, replayed = eager`);
        assert.deepEqual(eager.batched, split, `${what}: mixed = split path`);
      }
    } finally { model.dispose(); }
  }
});

test('mixed steps: the pools growing mid-run (plain tensors replaced) drop the recorded steps, which are recorded again; tokens unchanged', async () => {
  const model = await cpu('llama');
  try {
    // 64 blocks at first; prompts of ~30 tokens in blocks of 2 take the cache past them while steps replay
    const reqs = requests(6, model.config.vocab_size, 24);
    const opts = { maxBatch: 4, blockSize: 2, kvBlocks: 400, sampling: 'device' as const, mixedSteps: true, padBatch: true };
    const run = async (graphs: boolean): Promise<{ tokens: number[][]; stats: ReturnType<Engine['graphStats']>; blocks: number }> => {
      const e = new Engine(model, { ...opts, graphs });
      const tokens = (await Promise.all(reqs.map((r) => e.submit(r).result))).map((r) => r.tokens);
      const out = { tokens, stats: e.graphStats(), blocks: e.kvMemory().capacityBlocks };
      await e.close();
      return out;
    };
    const eager = await run(false), replay = await run(true);
    assert.ok(replay.blocks > 64, `the pools grew (${replay.blocks} blocks)`);
    assert.deepEqual(replay.tokens, eager.tokens);
    assert.ok(replay.stats.replays > 0 && replay.stats.fallbackReason === null, JSON.stringify(replay.stats));
  } finally { model.dispose(); }
});

test('a step that cannot be recorded (a host read) raises GraphCaptureError inside the capture: the engine runs eagerly from then on, with the same tokens', async () => {
  const model = await cpu('llama');
  try {
    const reqs = requests(5, model.config.vocab_size);
    const opts = { maxBatch: 3, blockSize: 4, sampling: 'device' as const, mixedSteps: true, padBatch: true };
    const want = (await batchedAndAlone(model, reqs, { ...opts, graphs: false })).batched;
    const head = model.lm_head, orig = head.forward.bind(head);
    head.forward = (x) => { if (cpuRecording()) void x.sum().item(); return orig(x); };
    try {
      const e = new Engine(model, { ...opts, graphs: true });
      const got = (await Promise.all(reqs.map((r) => e.submit(r).result))).map((r) => r.tokens);
      const st = e.graphStats();
      await e.close();
      assert.deepEqual(got, want);
      assert.match(st.fallbackReason ?? '', /GraphCaptureError: .*reads a tensor's values on the host/);
      assert.equal(st.replays, 0);
      assert.equal(st.captured, 0);
    } finally { head.forward = orig; }
  } finally { model.dispose(); }
});

test('mixed-step options: typed errors', async () => {
  const model = await cpu('llama');
  try {
    assert.throws(() => new Engine(model, { mixedSteps: true }), /device/); // host sampling is the CPU default
    assert.throws(() => new Engine(model, { sampling: 'device', maxBatch: 8, stepTokens: 4 }), /stepTokens/);
    assert.throws(() => new Engine(model, { sampling: 'device', stepTokens: 16, rowBuckets: [4, 8] }), /rowBuckets/);
    assert.throws(() => new Engine(model, { graphs: true }), /mixedSteps/);
    const e = new Engine(model, { sampling: 'device', maxBatch: 1, stepTokens: 9, padBatch: true });
    assert.deepEqual(e.rowBuckets, [1, 9]); // one sequence at a time: a decode step needs one row
    await e.close();
  } finally { model.dispose(); }
});

test('mixed steps replayed as CUDA graphs = eager steps = each request alone (tiny Llama, float32; bfloat16 on a card)', { skip: noCuda }, async () => {
  for (const dtype of EMU ? ['float32'] as const : ['float32', 'bfloat16'] as const) {
    const model = await nbx.models.load(join(MODELS, 'llama'), { device: 'cuda', dtype });
    try {
      const reqs = requests(EMU ? 4 : 8, model.config.vocab_size);
      const opts = { maxBatch: 3, blockSize: 4, prefillChunk: 5, kvBlocks: 64 };
      const eager = await batchedAndAlone(model, reqs, { ...opts, graphs: false });
      const replay = await batchedAndAlone(model, reqs, opts); // graphs: the default on CUDA
      assert.ok(replay.stats.enabled || process.env.NBX_CUDA_GRAPHS === '0');
      if (replay.stats.enabled) {
        assert.equal(replay.stats.fallbackReason, null);
        assert.ok(replay.stats.captures > 0 && replay.stats.replays > replay.stats.eagerSteps, JSON.stringify(replay.stats));
      }
      assert.deepEqual(replay.batched, eager.batched, `${dtype}: replayed = eager`);
      assert.deepEqual(eager.batched, eager.alone, `${dtype}: batched = alone`);
      assert.deepEqual(replay.alone, eager.alone, `${dtype}: alone, replayed = eager`);
    } finally { model.dispose(); }
  }
});

test('mixed steps with recordings: cancelling frees blocks at once, a request waits for blocks, stop strings and EOS end requests; a failing step rejects its requests and the engine goes on', async () => {
  const model = await cpu('llama');
  const opts = { maxBatch: 2, blockSize: 4, sampling: 'device' as const, mixedSteps: true, padBatch: true, graphs: true };
  try {
    const e = new Engine(model, { ...opts, kvBlocks: 12 });
    const long = e.submit({ prompt: [1, 2, 3, 4, 5], max_new_tokens: 40, temperature: 0, eos_token_id: [] });
    // 12 blocks: the first holds ceil((5 + 39) / 4) = 11, so this one waits until the first is cancelled
    const waiting = e.submit({ prompt: [3, 4], max_new_tokens: 8, temperature: 0.7, seed: 5, eos_token_id: [] });
    let n = 0;
    for await (const _ of long) {
      if (++n === 4) {
        assert.equal(e.stats().waiting, 1);
        long.cancel();
        assert.equal(e.stats().kv_blocks_used, 0, 'blocks freed at once');
      }
    }
    assert.equal((await long.result).finish_reason, 'cancelled');
    const w = await waiting.result;
    assert.equal(w.completion_tokens, 8);
    const alone = new Engine(model, { ...opts, kvBlocks: 12 });
    assert.deepEqual((await alone.submit({ prompt: [3, 4], max_new_tokens: 8, temperature: 0.7, seed: 5, eos_token_id: [] }).result).tokens, w.tokens);
    await alone.close();
    const eos = await e.submit({ prompt: [3, 4], max_new_tokens: 8, temperature: 0.7, seed: 5, eos_token_id: [w.tokens[2]!] }).result;
    assert.equal(eos.finish_reason, 'stop');
    assert.deepEqual(eos.tokens, w.tokens.slice(0, w.tokens.indexOf(w.tokens[2]!) + 1));
    assert.ok(e.graphStats().replays > 0);

    // a step that fails while being recorded: its requests get the error, the engine goes on eagerly
    const head = model.lm_head, orig = head.forward.bind(head);
    head.forward = (x) => { if (cpuRecording()) throw new RangeError('injected failure'); return orig(x); };
    const f = new Engine(model, opts);
    try {
      const rs = [f.submit({ prompt: [1, 2, 3], max_new_tokens: 6, temperature: 0, eos_token_id: [] }), f.submit({ prompt: [4], max_new_tokens: 6, temperature: 0, eos_token_id: [] })];
      const got = await Promise.allSettled(rs.map((r) => r.result));
      assert.ok(got.some((g) => g.status === 'rejected' && /injected failure/.test(String(g.reason))), JSON.stringify(got.map((g) => g.status)));
      assert.equal(f.stats().kv_blocks_used, 0);
      assert.match(f.graphStats().fallbackReason ?? '', /RangeError: injected failure/);
      assert.equal((await f.submit({ prompt: [1, 2, 3], max_new_tokens: 6, temperature: 0, eos_token_id: [] }).result).completion_tokens, 6);
    } finally { head.forward = orig; await f.close(); }
    await e.close();
  } finally { model.dispose(); }
});

/** A load of random requests (some cancelled mid-stream), `concurrency` at a time; resolves their tokens. */
async function randomLoad(e: Engine, vocab: number, n: number, concurrency: number, maxPrompt: number, maxNew: number): Promise<number[][]> {
  let s = 12345;
  const rnd = (lo: number, hi: number): number => { s = (s * 1103515245 + 12345) % 2147483648; return lo + Math.floor((s / 2147483648) * (hi - lo + 1)); };
  const out: number[][] = new Array<number[]>(n);
  let next = 0;
  await Promise.all(Array.from({ length: concurrency }, async () => {
    while (next < n) {
      const i = next++;
      const ac = new AbortController();
      const req: EngineRequest = {
        prompt: Array.from({ length: rnd(1, maxPrompt) }, () => rnd(3, vocab - 1)), max_new_tokens: rnd(1, maxNew), eos_token_id: [], signal: ac.signal,
        ...(i % 3 === 0 ? { temperature: 0 } : { temperature: 0.8, top_p: 0.9, seed: 1000 + i }),
      };
      const cut = i % 7 === 3 ? rnd(1, 3) : Infinity;
      const st = e.submit(req);
      let k = 0;
      for await (const _ of st) if (++k >= cut) ac.abort();
      out[i] = (await st.result).tokens;
    }
  }));
  return out;
}

test('warmup(): the pools backed for every block and every step shape recorded before the load, none after it; tokens unchanged; typed errors', async () => {
  const model = await cpu('llama');
  try {
    const opts = { maxBatch: 4, blockSize: 4, prefillChunk: 8, kvBlocks: 96, sampling: 'device' as const, mixedSteps: true, padBatch: true, graphs: true };
    const plain = new Engine(model, opts);
    const want = await randomLoad(plain, model.config.vocab_size, 24, 4, 40, 30);
    assert.ok(plain.kvMemory().capacityBlocks < 97, 'without warm-up the pools grow as needed');
    await plain.close();

    const e = new Engine(model, opts);
    const w = await e.warmup();
    // context 128 / 4 = 32 blocks at most: widths 4, 8, 16, 32; one rows bucket (padBatch); greedy and sorted
    assert.deepEqual({ kvBlocks: w.kvBlocks, shapes: w.shapes, recorded: w.recorded }, { kvBlocks: 97, shapes: 8, recorded: 8 });
    const warm = { ...e.graphStats() }, mem = e.kvMemory();
    const got = await randomLoad(e, model.config.vocab_size, 24, 4, 40, 30);
    assert.deepEqual(got, want, 'the warm-up changes no token');
    const after = e.graphStats();
    assert.equal(after.captures, warm.captures, 'no step recorded during the load');
    assert.equal(after.eagerSteps, warm.eagerSteps, 'no eager step during the load');
    assert.ok(after.replays > warm.replays);
    assert.deepEqual(e.kvMemory(), mem, 'the pools did not grow');
    assert.equal(e.stats().kv_blocks_used, 0);

    // busy: a typed error; requests submitted during a warm-up wait for it
    const r = e.submit({ prompt: [1, 2], max_new_tokens: 3, temperature: 0, eos_token_id: [] });
    await assert.rejects(e.warmup(), /idle engine/);
    await r.result;
    await e.close();
    const f = new Engine(model, opts);
    await assert.rejects(f.warmup({ kvBlocks: 1000 }), /kvBlocks must be an integer in 0\.\.96/);
    const during = f.warmup({ kvBlocks: 10 });
    const queued = f.submit({ prompt: [5, 6, 7], max_new_tokens: 4, temperature: 0, eos_token_id: [] });
    assert.ok((await during).kvBlocks >= 11);
    assert.equal((await queued.result).completion_tokens, 4);
    await f.close();
  } finally { model.dispose(); }
});

test('warmup() on CUDA: the caching allocator\'s reserved bytes and the KV pools after a random load equal those after the warm-up (tiny Llama, float32)', { skip: noCuda }, async () => {
  const model = await nbx.models.load(join(MODELS, 'llama'), { device: 'cuda', dtype: 'float32' });
  try {
    const e = new Engine(model, { maxBatch: 4, blockSize: 4, prefillChunk: 8, kvBlocks: 96 });
    await e.warmup();
    const reserved = (): number => nbx.cuda.memoryStats().reservedBytes;
    const before = { reserved: reserved(), kv: e.kvMemory(), graphs: { ...e.graphStats() } };
    await randomLoad(e, model.config.vocab_size, EMU ? 12 : 48, 4, EMU ? 20 : 40, EMU ? 12 : 30);
    const after = { reserved: reserved(), kv: e.kvMemory(), graphs: e.graphStats() };
    assert.equal(after.graphs.captures, before.graphs.captures, 'no step recorded during the load');
    assert.deepEqual(after.kv, before.kv);
    assert.equal(after.reserved, before.reserved, `reserved ${before.reserved} -> ${after.reserved} bytes`);
    await e.close();
  } finally { model.dispose(); }
});
