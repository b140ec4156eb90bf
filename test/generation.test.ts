// generate() and stream() against a scripted fake model (test/fake_lm.ts): greedy continuation, the
// KV-cache protocol (the prompt once, then one token a step), EOS, stop strings, max_new_tokens,
// left-padded batches, option checking, and streaming of characters split across tokens.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import * as nbx from '../src/index.js';
import { generate, stream } from '../src/generation/index.js';
import { IncrementalDecoder } from '../src/generation/text.js';
import { resolveConfig } from '../src/generation/config.js';
import { processLogits } from '../src/generation/logits.js';
import { ScriptedLM, EOS, bytes, byteTokenizer } from './fake_lm.js';
import { transformersIdsMismatches } from './models_util.js';

const ids = (t: nbx.Tensor): number[][] => t.tolist() as number[][];
const text = (s: number[]): string => byteTokenizer().decode(s);

async function collect(it: AsyncIterable<string>): Promise<string[]> {
  const out: string[] = [];
  for await (const p of it) out.push(p);
  return out;
}

test('greedy: continues the script, prompt once then one token per step, logits_to_keep 1', async () => {
  const script = bytes('In the beginning God created the heaven and the earth.');
  const m = new ScriptedLM(script);
  const out = await generate(m, 'In the beg', { max_new_tokens: 12 });
  assert.deepEqual(out.shape, [1, 10 + 12]);
  assert.equal(text(ids(out)[0]!), 'In the beginning God c');
  assert.equal(m.calls.length, 12);
  assert.equal(m.calls[0]!.ids[0]!.length, 10);
  for (const c of m.calls.slice(1)) assert.equal(c.ids[0]!.length, 1);
  assert.ok(m.calls.every((c) => c.keep === 1));
  assert.deepEqual(m.calls.map((c) => c.past), [0, ...Array.from({ length: 11 }, (_, i) => 10 + i)]);
  assert.ok(m.caches.every((c) => c.disposed), 'the cache is disposed');
});

test('EOS stops generation and is kept in the output, as transformers does', async () => {
  const m = new ScriptedLM([...bytes('Amen.'), EOS, ...bytes('xyz')]);
  const out = await generate(m, 'Am', { max_new_tokens: 20 });
  assert.deepEqual(ids(out)[0], [...bytes('Amen.'), EOS]);
  // A list of EOS ids: any of them stops.
  const m2 = new ScriptedLM(bytes('Amen. And'));
  const out2 = await generate(m2, 'Am', { max_new_tokens: 20, eos_token_id: [EOS, bytes('.')[0]!] });
  assert.equal(text(ids(out2)[0]!), 'Amen.');
});

test('max_new_tokens, max_length (transformers default 20) and min_new_tokens', async () => {
  const script = bytes('abcdefghijklmnopqrstuvwxyz0123456789');
  assert.equal((await generate(new ScriptedLM(script), 'abc', { max_new_tokens: 1 })).shape[1], 4);
  assert.equal((await generate(new ScriptedLM(script), 'abc')).shape[1], 20, 'max_length 20 by default');
  assert.equal((await generate(new ScriptedLM(script), 'abc', { max_length: 7 })).shape[1], 7);
  assert.equal((await generate(new ScriptedLM(script, { max_new_tokens: 5 }), 'abc')).shape[1], 8, 'generation_config.json max_new_tokens');
  // min_new_tokens masks EOS until enough tokens exist
  const withEos = [...bytes('ab'), EOS, ...bytes('cdefg')];
  const early = await generate(new ScriptedLM(withEos), 'ab', { max_new_tokens: 5 });
  assert.deepEqual(ids(early)[0], [...bytes('ab'), EOS]);
  const late = await generate(new ScriptedLM(withEos), 'ab', { max_new_tokens: 3, min_new_tokens: 3 });
  assert.equal(ids(late)[0]!.includes(EOS), false);
});

test('stop strings (and the stop alias) end generation once the text contains them', async () => {
  const script = bytes('Let there be light: and there was light.');
  const out = await generate(new ScriptedLM(script), 'Let', { max_new_tokens: 30, stop_strings: ['light'] });
  assert.equal(text(ids(out)[0]!), 'Let there be light');
  const out2 = await generate(new ScriptedLM(script), 'Let', { max_new_tokens: 30, stop: ':' });
  assert.equal(text(ids(out2)[0]!), 'Let there be light:');
});

test('batch of prompts of different lengths: left padding, mask and positions as transformers', async () => {
  const script = bytes('0123456789abcdefghij');
  const m = new ScriptedLM(script);
  const out = await generate(m, ['0123', '01'], { max_new_tokens: 3, pad_token_id: 0x2e });
  const rows = ids(out);
  assert.equal(text(rows[0]!), '0123456');
  assert.equal(text(rows[1]!), '..01234');
  const first = m.calls[0]!;
  assert.deepEqual(first.mask, [[1, 1, 1, 1], [0, 0, 1, 1]]);
  assert.deepEqual(first.positions, [[0, 1, 2, 3], [1, 1, 0, 1]]);
  assert.deepEqual(m.calls[1]!.positions, [[4], [2]]);
  assert.deepEqual(m.calls[1]!.mask, [[1, 1, 1, 1, 1], [0, 0, 1, 1, 1]]);
});

test('a finished row gets pad tokens while the others go on', async () => {
  // Row 0 hits EOS at position 3; row 1 (shorter prompt, positions behind) goes on.
  const script = [...bytes('abc'), EOS, ...bytes('defgh')];
  const m = new ScriptedLM(script);
  const input = nbx.tensor([[0x61, 0x62, 0x63], [0x2e, 0x61, 0x62]], { dtype: nbx.int64 });
  const mask = nbx.tensor([[1, 1, 1], [0, 1, 1]], { dtype: nbx.int64 });
  const out = await generate(m, input, { attention_mask: mask, max_new_tokens: 4, pad_token_id: 0x2e });
  const rows = ids(out);
  // Both rows finished after two steps, which ends generation.
  assert.deepEqual(rows[0], [0x61, 0x62, 0x63, EOS, 0x2e]);
  assert.deepEqual(rows[1], [0x2e, 0x61, 0x62, 0x63, EOS]);
});

test('token-id input: the mask is inferred from pad_token_id when it differs from EOS', async () => {
  const m = new ScriptedLM(bytes('0123456789'));
  await generate(m, nbx.tensor([[0x30, 0x31, 0x32], [0x21, 0x30, 0x31]], { dtype: nbx.int64 }), { max_new_tokens: 1, pad_token_id: 0x21 });
  assert.deepEqual(m.calls[0]!.mask, [[1, 1, 1], [0, 1, 1]]);
});

test('sampling: seeded draws are reproducible, generator and seed agree, top_k 1 is greedy', async () => {
  const script = bytes('the quick brown fox jumps over the lazy dog');
  const opts = { do_sample: true, temperature: 1.5, top_k: 0, max_new_tokens: 16 };
  const a = await generate(new ScriptedLM(script, {}, 1), 'the', { ...opts, seed: 7 });
  const b = await generate(new ScriptedLM(script, {}, 1), 'the', { ...opts, generator: new nbx.Generator().manual_seed(7) });
  const c = await generate(new ScriptedLM(script, {}, 1), 'the', { ...opts, seed: 8 });
  assert.deepEqual(ids(a), ids(b));
  assert.notDeepEqual(ids(a), ids(c));
  const greedy = await generate(new ScriptedLM(script, {}, 1), 'the', { max_new_tokens: 16 });
  const k1 = await generate(new ScriptedLM(script, {}, 1), 'the', { do_sample: true, top_k: 1, max_new_tokens: 16, seed: 3 });
  assert.deepEqual(ids(k1), ids(greedy));
  const p = await generate(new ScriptedLM(script, {}, 1), 'the', { do_sample: true, top_p: 1e-6, top_k: 0, max_new_tokens: 16, seed: 3 });
  assert.deepEqual(ids(p), ids(greedy), 'top_p keeps at least the top token');
  const mp = await generate(new ScriptedLM(script, {}, 1), 'the', { do_sample: true, min_p: 1, top_k: 0, max_new_tokens: 16, seed: 3 });
  assert.deepEqual(ids(mp), ids(greedy), 'min_p 1 keeps only the top token');
});

test('top-k then top-p on the k kept scores equals the two warpers applied in full, ties included', () => {
  const cfg = (o: Record<string, unknown>) => resolveConfig(new ScriptedLM([0]), { do_sample: true, temperature: 1, ...o });
  const ctx = { curLen: 1, promptLen: 1, inputIds: () => { throw new Error('unused'); } };
  const g = new nbx.Generator().manual_seed(3);
  const random = nbx.randn([3, 257], { generator: g });
  // Row 2 has ties inside the top k (the order then depends on the sort): the full computation is used.
  const tied = nbx.round(nbx.mul(random, 2));
  for (const scores of [random, tied]) {
    for (const [k, p] of [[40, 0.9], [5, 0.5], [256, 0.99], [1, 0.3]] as const) {
      const fused = processLogits(scores, cfg({ top_k: k, top_p: p }), ctx);
      const stepwise = processLogits(processLogits(scores, cfg({ top_k: k, top_p: 1 }), ctx), cfg({ top_k: 0, top_p: p }), ctx);
      assert.deepEqual(Array.from(fused.dataStorageSync() as Float32Array), Array.from(stepwise.dataStorageSync() as Float32Array), `k ${k} p ${p}`);
    }
  }
});

test('repetition_penalty changes greedy choices away from seen tokens', async () => {
  // The penalty on the already-seen wanted token lets the background win.
  const script = bytes('aaaaaaaaaa');
  const plain = await generate(new ScriptedLM(script, {}, 3), 'a', { max_new_tokens: 3 });
  assert.deepEqual(ids(plain)[0], bytes('aaaa'));
  const pen = await generate(new ScriptedLM(script, {}, 3), 'a', { max_new_tokens: 3, repetition_penalty: 100 });
  assert.notEqual(ids(pen)[0]![1], 0x61);
});

test('invalid options and inputs are typed errors naming the option', async () => {
  const m = new ScriptedLM(bytes('abc'));
  const bad: [Record<string, unknown>, RegExp, typeof nbx.NbxError][] = [
    [{ temperature: -1 }, /temperature/, nbx.ValueError],
    [{ temperature: 0, do_sample: true }, /temperature/, nbx.ValueError],
    [{ top_p: 0 }, /top_p/, nbx.ValueError],
    [{ top_p: 1.5 }, /top_p/, nbx.ValueError],
    [{ top_k: 2.5 }, /top_k/, nbx.ValueError],
    [{ min_p: 2 }, /min_p/, nbx.ValueError],
    [{ max_new_tokens: 0 }, /max_new_tokens/, nbx.ValueError],
    [{ max_new_tokens: '5' }, /max_new_tokens/, nbx.ValueError],
    [{ do_sample: 'yes' }, /do_sample/, nbx.ValueError],
    [{ eos_token_id: [-1] }, /eos_token_id/, nbx.ValueError],
    [{ stop: [''] }, /stop/, nbx.ValueError],
    [{ seed: -3 }, /seed/, nbx.ValueError],
    [{ generator: {} }, /generator/, nbx.ValueError],
    [{ max_tokens: 5 }, /max_tokens/, nbx.ValueError],
    [{ num_beams: 4 }, /num_beams/, nbx.UnsupportedError],
    [{ repetition_penalty: 0 }, /repetition_penalty/, nbx.ValueError],
  ];
  for (const [opts, re, cls] of bad) {
    await assert.rejects(generate(m, 'ab', opts as never), (e: Error) => e instanceof cls && re.test(e.message), JSON.stringify(opts));
  }
  await assert.rejects(generate(m, ''), (e: Error) => e instanceof nbx.ValueError && /empty/.test(e.message));
  await assert.rejects(generate(m, ['ab', '']), nbx.ValueError);
  await assert.rejects(generate(m, nbx.zeros([1, 0], { dtype: nbx.int64 })), /empty/);
  await assert.rejects(generate(m, nbx.tensor([1, 2], { dtype: nbx.int64 })), nbx.ShapeError);
  await assert.rejects(generate(m, nbx.tensor([[1.5]])), nbx.DTypeError);
  await assert.rejects(generate(m, nbx.tensor([[300]], { dtype: nbx.int64 })), /vocabulary/);
  // Longer than the context, or asking past it.
  const small = new ScriptedLM(bytes('abc'), {}, 10, 8);
  await assert.rejects(generate(small, 'abcdefghij', { max_new_tokens: 1 }), (e: Error) => e instanceof nbx.ValueError && /context of 8/.test(e.message));
  await assert.rejects(generate(small, 'abcdef', { max_new_tokens: 5 }), /at most 2/);
  // A bad value in generation_config.json is named with its source; unsupported settings too.
  await assert.rejects(generate(new ScriptedLM(bytes('abc'), { do_sample: true, top_p: 2 }), 'ab'), /top_p.*generation_config\.json/);
  await assert.rejects(generate(new ScriptedLM(bytes('abc'), { num_beams: 3 }), 'ab'), nbx.UnsupportedError);
  // The model still works afterwards.
  assert.equal((await generate(m, 'ab', { max_new_tokens: 1 })).shape[1], 3);
});

test('stream(): whole characters only when a character spans several tokens', async () => {
  const sentence = 'Dieu dit: «Que la lumière soit!» ✓ 光あれ 🙂';
  const script = [...bytes(sentence), EOS];
  const pieces = await collect(stream(new ScriptedLM(script), 'Dieu', { max_new_tokens: 200 }));
  assert.equal(pieces.join(''), sentence.slice(4));
  for (const p of pieces) assert.equal(p.includes('\ufffd'), false, `piece ${JSON.stringify(p)}`);
  // The 4-byte emoji arrives as one piece, after its fourth byte.
  assert.ok(pieces.includes('🙂'));
  assert.equal(pieces.length, [...sentence.slice(4)].length, 'one piece per character');
});

test('stream(): stops at stop strings and max_new_tokens; early break disposes the cache', async () => {
  const script = bytes('And God said, Let there be light: and there was light.');
  const pieces = await collect(stream(new ScriptedLM(script), 'And God', { max_new_tokens: 100, stop: ['light'] }));
  assert.equal(pieces.join(''), ' said, Let there be light');
  const five = await collect(stream(new ScriptedLM(script), 'And God', { max_new_tokens: 5 }));
  assert.equal(five.join(''), ' said');
  const m = new ScriptedLM(script);
  for await (const p of stream(m, 'And', { max_new_tokens: 50 })) { void p; break; }
  assert.ok(m.caches[0]!.disposed);
  await assert.rejects(collect(stream(m, ['a', 'b'])), nbx.UnsupportedError);
});

test('streamer: put() gets the prompt, then each step\'s tokens; end() once (transformers\' BaseStreamer)', async () => {
  const got: number[][] = [];
  let ended = 0;
  const streamer = { put: (t: nbx.Tensor) => { got.push((t.tolist() as number[] | number[][]).flat()); }, end: () => { ended++; } };
  await generate(new ScriptedLM(bytes('abcdef')), 'ab', { max_new_tokens: 3, streamer });
  assert.deepEqual(got, [bytes('ab'), bytes('c'), bytes('d'), bytes('e')]);
  assert.equal(ended, 1);
});

test('IncrementalDecoder: held-back bytes come out at flush as decode() gives them', () => {
  const tok = byteTokenizer();
  const d = new IncrementalDecoder(tok);
  const e = bytes('é');
  assert.equal(d.push(e[0]!), '');
  assert.equal(d.push(e[1]!), 'é');
  assert.equal(d.push(bytes('€')[0]!), '');
  assert.equal(d.flush(), '\ufffd');
});

// ---- transformers' own generate() on the fixture models (test/fixtures/models) --------------------

const MODELS = join(dirname(fileURLToPath(import.meta.url)), '../../test/fixtures/models');
const CASES = readdirSync(MODELS).filter((c) => existsSync(join(MODELS, c, 'expected.safetensors'))).sort();

test(`transformers' greedy and seeded sampled ids, batch of 2 with left padding, for every fixture model (${CASES.length})`, async () => {
  assert.ok(CASES.length > 0, `fixture models in ${MODELS}`);
  const mismatches: string[] = [];
  for (const c of CASES) mismatches.push(...await transformersIdsMismatches(join(MODELS, c), c));
  assert.deepEqual(mismatches, []);
});

test('the embedded model: greedy and seed-42 sampled continuations equal transformers\' (nbx-kjv-reference.json)', async () => {
  const ref = JSON.parse(readFileSync(join(MODELS, 'nbx-kjv-reference.json'), 'utf8')) as {
    sampled: { temperature: number; top_k: number; top_p: number; max_new_tokens: number; manual_seed_before_generate: number };
    greedy: { max_new_tokens: number };
    cases: { prompt: string; input_ids: number[]; greedy_ids: number[]; greedy_text: string; sampled_ids: number[]; sampled_text: string }[];
  };
  const model = await nbx.models.load(join(MODELS, '../../../assets/nbx-kjv'), { device: 'cpu', dtype: 'float32' });
  try {
    const tok = model.tokenizer!;
    for (const c of ref.cases) {
      assert.deepEqual(tok.encode(c.prompt), c.input_ids);
      const greedy = await generate(model, c.prompt, { do_sample: false, max_new_tokens: ref.greedy.max_new_tokens });
      assert.deepEqual(ids(greedy)[0], c.greedy_ids, `greedy ${c.prompt}`);
      assert.equal(tok.decode(c.greedy_ids, { skip_special_tokens: true }), c.greedy_text);
      const s = ref.sampled;
      const sampled = await generate(model, c.prompt, { do_sample: true, temperature: s.temperature, top_k: s.top_k, top_p: s.top_p, max_new_tokens: s.max_new_tokens, seed: s.manual_seed_before_generate });
      assert.deepEqual(ids(sampled)[0], c.sampled_ids, `sampled ${c.prompt}`);
      // stream() gives the same text, piece by piece.
      const pieces = await collect(stream(model, c.prompt, { do_sample: true, temperature: s.temperature, top_k: s.top_k, top_p: s.top_p, max_new_tokens: s.max_new_tokens, seed: s.manual_seed_before_generate }));
      assert.equal(c.prompt + pieces.join(''), c.sampled_text);
    }
  } finally { model.dispose(); }
});
