// The serving engine (src/generation/engine.ts): continuous batching over the paged KV cache on the
// CPU. A request's tokens equal those it gets run alone with the same seed (greedy and sampled, prompts
// in chunks, sequences joining and leaving), stop strings / EOS / length, the queue and KV-block
// limits, cancellation freeing blocks at once, and typed errors for bad requests.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import * as nbx from '../src/index.js';
import { Engine, type EngineOptions, type EngineRequest } from '../src/generation/engine.js';
import type { CausalLMModel } from '../src/models/causal_lm.js';
import { KVCacheFullError, QueueFullError, ValueError } from '../src/errors.js';
import { defaultModelDir } from '../src/cli/generate.js';

const MODELS = join(dirname(fileURLToPath(import.meta.url)), '../../test/fixtures/models');
const load = (name: string): Promise<CausalLMModel> => nbx.models.load(join(MODELS, name), { device: 'cpu', dtype: 'float32' });

/** Each request alone in an engine of its own (the reference a batched run must equal). */
async function solo(model: CausalLMModel, reqs: EngineRequest[], opts = {}): Promise<number[][]> {
  const out: number[][] = [];
  for (const r of reqs) {
    const e = new Engine(model, { maxBatch: 1, ...opts } as EngineOptions);
    out.push((await e.submit(r).result).tokens);
    await e.close();
  }
  return out;
}

function requests(n: number, vocab: number): EngineRequest[] {
  return Array.from({ length: n }, (_, i) => ({
    prompt: Array.from({ length: 1 + ((i * 7) % 13) }, (_, j) => (i * 31 + j * 17 + 3) % vocab),
    max_new_tokens: 3 + ((i * 5) % 11),
    ...(i % 3 === 0 ? { temperature: 0 } : { temperature: 0.9, seed: 100 + i, ...(i % 3 === 2 ? { top_k: 20, top_p: 0.8 } : {}) }),
    eos_token_id: [],
  }));
}

test('a request batched with others gets the tokens it gets alone (greedy and seeded sampling; Llama and Gemma 2 with window and soft-capping)', async () => {
  for (const name of ['llama', 'gemma2']) {
    const model = await load(name);
    try {
      const reqs = requests(9, model.config.vocab_size);
      const opts = { blockSize: 4, prefillChunk: 5 };
      const alone = await solo(model, reqs, opts);
      const e = new Engine(model, { maxBatch: 4, ...opts });
      // joining at different times: three now, the rest while those run
      const first = reqs.slice(0, 3).map((r) => e.submit(r).result);
      await new Promise((r) => setTimeout(r, 5));
      const rest = reqs.slice(3).map((r) => e.submit(r).result);
      const got = await Promise.all([...first, ...rest]);
      assert.deepEqual(got.map((r) => r.tokens), alone, name);
      assert.ok(got.every((r, i) => r.finish_reason === 'length' && r.completion_tokens === reqs[i]!.max_new_tokens && r.prompt_tokens === reqs[i]!.prompt.length));
      const st = e.stats();
      assert.equal(st.running + st.waiting + st.kv_blocks_used, 0);
      assert.equal(st.tokens_out, reqs.reduce((a, r) => a + r.max_new_tokens, 0));
      assert.equal(st.tokens_in, reqs.reduce((a, r) => a + r.prompt.length, 0));
      await e.close();
    } finally { model.dispose(); }
  }
});

test('device sampling and padded decode steps (as on GPUs): batched = alone, greedy rows = host sampling', async () => {
  const model = await load('qwen3');
  try {
    const reqs = requests(7, model.config.vocab_size);
    const opts = { blockSize: 4, sampling: 'device' as const, padBatch: true };
    const alone = await solo(model, reqs, { ...opts, maxBatch: 3 });
    const e = new Engine(model, { maxBatch: 3, ...opts });
    const got = await Promise.all(reqs.map((r) => e.submit(r).result));
    await e.close();
    assert.deepEqual(got.map((r) => r.tokens), alone);
    const host = await solo(model, reqs, { blockSize: 4 });
    reqs.forEach((r, i) => { if (r.temperature === 0) assert.deepEqual(alone[i], host[i]); });
  } finally { model.dispose(); }
});

test('greedy engine tokens equal model.generate() (embedded model); text streams in pieces equal to the result', async () => {
  const model = await nbx.models.load(defaultModelDir(), { device: 'cpu', dtype: 'float32' });
  const tok = model.tokenizer!;
  const e = new Engine(model, { maxBatch: 4 });
  try {
    const prompt = tok.encode('And God said');
    const s = e.submit({ prompt, max_new_tokens: 12, temperature: 0, eos_token_id: [] });
    let text = '';
    const toks: number[] = [];
    for await (const ev of s) { text += ev.text; toks.push(ev.token); }
    const r = await s.result;
    assert.equal(text, r.text);
    assert.deepEqual(toks, r.tokens);
    const g = await model.generate(nbx.tensor([prompt]), { max_new_tokens: 12, do_sample: false, eos_token_id: null });
    assert.deepEqual(r.tokens, (g.tolist() as number[][])[0]!.slice(prompt.length).map(Number));
    assert.equal(r.text, tok.decode(r.tokens));

    // a stop string ends the request; the text stops before it (OpenAI), also while streaming
    const cut = r.text.indexOf(' ', 3);
    const stop = r.text.slice(cut, cut + 3);
    const st = e.submit({ prompt, max_new_tokens: 12, temperature: 0, stop: [stop], eos_token_id: [] });
    let streamed = '';
    for await (const ev of st) streamed += ev.text;
    const sr = await st.result;
    assert.equal(sr.finish_reason, 'stop');
    assert.equal(sr.text, r.text.slice(0, cut));
    assert.equal(streamed, sr.text);
    // EOS: the model's own (the first greedy token declared an EOS here)
    const eos = await e.submit({ prompt, max_new_tokens: 12, temperature: 0, eos_token_id: [r.tokens[2]!] }).result;
    assert.equal(eos.finish_reason, 'stop');
    assert.deepEqual(eos.tokens, r.tokens.slice(0, 3));
  } finally { await e.close(); model.dispose(); }
});

test('maxQueue: QueueFullError; out of KV blocks: the request waits and running ones go on; too large for the cache: KVCacheFullError', async () => {
  const model = await load('llama');
  try {
    const e = new Engine(model, { maxBatch: 1, maxQueue: 1 });
    const a = e.submit({ prompt: [1, 2, 3], max_new_tokens: 4, temperature: 0 });
    assert.throws(() => e.submit({ prompt: [1], max_new_tokens: 2 }), QueueFullError);
    await a.result;
    await e.close();

    // 6 blocks of 4: each request holds ceil((4 + 12 - 1) / 4) = 4, so the second waits for the first
    const reqs: EngineRequest[] = [0, 1].map((i) => ({ prompt: [5 + i, 6, 7, 8], max_new_tokens: 12, temperature: 0, eos_token_id: [] }));
    const alone = await solo(model, reqs, { blockSize: 4 });
    const k = new Engine(model, { maxBatch: 4, blockSize: 4, kvBlocks: 6 });
    const r0 = k.submit(reqs[0]!), r1 = k.submit(reqs[1]!);
    let sawWaiting = false;
    for await (const _ of r0) { const st = k.stats(); if (st.waiting === 1 && st.running === 1) sawWaiting = true; assert.ok(st.kv_blocks_used <= 4); }
    assert.ok(sawWaiting, 'the second request waited for blocks');
    assert.deepEqual([(await r0.result).tokens, (await r1.result).tokens], alone);
    let err: unknown;
    try { k.submit({ prompt: Array.from({ length: 20 }, () => 1), max_new_tokens: 10 }); } catch (x) { err = x; }
    assert.ok(err instanceof KVCacheFullError);
    assert.equal((err as KVCacheFullError).needed, 8);
    assert.equal((err as KVCacheFullError).total, 6);
    await k.close();
  } finally { model.dispose(); }
});

test('cancel() and an aborted signal end a request at once and free its blocks; waiting requests can be cancelled too', async () => {
  const model = await load('llama');
  const e = new Engine(model, { maxBatch: 1, blockSize: 4 });
  try {
    const long = e.submit({ prompt: [1, 2, 3, 4, 5], max_new_tokens: 100, temperature: 0, eos_token_id: [] });
    const ac = new AbortController();
    const queued = e.submit({ prompt: [3], max_new_tokens: 5, signal: ac.signal });
    let n = 0;
    for await (const _ of long) {
      if (++n === 3) {
        assert.ok(e.stats().kv_blocks_used > 0);
        long.cancel();
        assert.equal(e.stats().kv_blocks_used, 0, 'blocks freed at once');
        assert.equal(e.stats().running, 0);
      }
    }
    const r = await long.result;
    assert.equal(r.finish_reason, 'cancelled');
    assert.equal(r.tokens.length, 3);
    // the waiting one got admitted after the cancel; abort it through its signal
    ac.abort();
    assert.equal((await queued.result).finish_reason, 'cancelled');
    assert.equal(e.stats().kv_blocks_used, 0);
    const pre = new AbortController(); pre.abort();
    assert.equal((await e.submit({ prompt: [1], max_new_tokens: 3, signal: pre.signal }).result).finish_reason, 'cancelled');
    // the engine keeps serving
    assert.equal((await e.submit({ prompt: [1, 2], max_new_tokens: 3, temperature: 0 }).result).completion_tokens, 3);
  } finally { await e.close(); model.dispose(); }
});

test('bad requests are typed errors naming the field; close() cancels what is left', async () => {
  const model = await load('llama');
  const e = new Engine(model, { maxBatch: 2 });
  try {
    const bad: unknown[] = [
      { prompt: [], max_new_tokens: 3 }, { prompt: [1, 999], max_new_tokens: 3 }, { prompt: [1.5], max_new_tokens: 3 },
      { prompt: [1], max_new_tokens: 0 }, { prompt: [1], max_new_tokens: 500 }, { prompt: [1], max_new_tokens: 3, temperature: -1 },
      { prompt: [1], max_new_tokens: 3, top_p: 0 }, { prompt: [1], max_new_tokens: 3, stop: [''] }, { prompt: [1], max_new_tokens: 3, seed: -2 },
      { prompt: [1], max_new_tokens: 3, eos_token_id: [-1] }, null,
    ];
    for (const r of bad) assert.throws(() => e.submit(r as EngineRequest), ValueError, JSON.stringify(r));
    assert.throws(() => new Engine(model, { maxBatch: 0 }), ValueError);
    const s = e.submit({ prompt: [1, 2], max_new_tokens: 60, temperature: 0 });
    await e.close();
    assert.equal((await s.result).finish_reason, 'cancelled');
    assert.throws(() => e.submit({ prompt: [1], max_new_tokens: 2 }), ValueError);
  } finally { model.dispose(); }
});

test('a forward that fails rejects the requests in it (typed error passed through), frees their blocks, and the engine goes on', async () => {
  const model = await load('llama');
  const e = new Engine(model, { maxBatch: 2, blockSize: 4 });
  try {
    const head = model.lm_head, orig = head.forward.bind(head);
    let fail = true;
    head.forward = (x) => { if (fail) { fail = false; throw new ValueError('test', 'injected failure'); } return orig(x); };
    const s = e.submit({ prompt: [1, 2, 3], max_new_tokens: 4, temperature: 0 });
    await assert.rejects(s.result, /injected failure/);
    await assert.rejects((async () => { for await (const _ of s) { /* the stream ends with the error */ } })(), ValueError);
    assert.equal(e.stats().kv_blocks_used, 0);
    head.forward = orig;
    assert.equal((await e.submit({ prompt: [1, 2, 3], max_new_tokens: 4, temperature: 0 }).result).completion_tokens, 4);
  } finally { await e.close(); model.dispose(); }
});
