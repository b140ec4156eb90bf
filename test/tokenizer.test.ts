// Tokenizers: (1) transformers' own results in test/fixtures/tokenizers/<style>/cases.json (encode,
// decode, apply_chat_template) for a byte-level BPE and a BPE with byte fallback; (2) hand-made
// tokenizer.json files of both styles whose results follow from the format; (3) loadTokenizer's
// files and errors.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, dirname } from 'node:path';
import { fileURLToPath } from 'node:url';
import * as nbx from '../src/index.js';
import { loadTokenizer, PretrainedTokenizer } from '../src/tokenizer/index.js';
import { byteTokenizer, byteTokenizerConfig, byteTokenizerJson, bytes, EOS } from './fake_lm.js';

const FIXTURES = join(dirname(fileURLToPath(import.meta.url)), '../../test/fixtures/tokenizers');

// ---- byte-level BPE (GPT-2, Llama 3, Qwen) --------------------------------------------------------

test('byte-level BPE: every byte is a token, text round-trips, special tokens are recognized', () => {
  const tok = byteTokenizer();
  for (const s of ['In the beginning', 'Dieu dit: «Que la lumière soit!»', '光あれ 🙂', ' leading and  double  spaces ', 'tab\tnew\nline']) {
    const ids = tok.encode(s);
    assert.deepEqual(ids, bytes(s), s);
    assert.equal(tok.decode(ids), s);
  }
  assert.deepEqual(tok.encode('a<|endoftext|>b'), [0x61, EOS, 0x62]);
  assert.equal(tok.decode([0x61, EOS, 0x62]), 'a<|endoftext|>b');
  assert.equal(tok.decode([0x61, EOS, 0x62], { skip_special_tokens: true }), 'ab');
  assert.equal(tok.eos_token_id, EOS);
  assert.equal(tok.eos_token, '<|endoftext|>');
  assert.equal(tok.bos_token_id, null);
  assert.equal(tok.pad_token_id, null);
  assert.deepEqual(tok.all_special_ids, [EOS]);
  assert.equal(tok.vocab_size, 257);
  assert.equal(tok.decode([]), '');
  assert.equal(tok.decode(bytes('é').slice(0, 1)), '\ufffd', 'half a character decodes to U+FFFD');
});

test('chat template: rendered with the special tokens, tokenized without adding any', () => {
  const tok = byteTokenizer();
  const messages = [{ role: 'user', content: 'Hi' }, { role: 'assistant', content: 'Peace' }, { role: 'user', content: 'Amen' }];
  const text = tok.apply_chat_template(messages, { tokenize: false, add_generation_prompt: true });
  assert.equal(text, '<user>Hi<|endoftext|><assistant>Peace<|endoftext|><user>Amen<|endoftext|><assistant>');
  const ids = tok.apply_chat_template(messages, { add_generation_prompt: true }) as number[];
  assert.deepEqual(ids, tok.encode(text as string, { add_special_tokens: false }));
  assert.equal(ids.filter((i) => i === EOS).length, 3);
  assert.equal(tok.apply_chat_template(messages.slice(0, 1), { tokenize: false }), '<user>Hi<|endoftext|>');
  // continue_final_message leaves the last message open.
  const cont = tok.apply_chat_template([{ role: 'user', content: 'Hi' }, { role: 'assistant', content: 'Pea' }], { tokenize: false, continue_final_message: true });
  assert.equal(cont, '<user>Hi<|endoftext|><assistant>Pea');
});

test('chat template errors are typed: no template, a failing template, bad messages', () => {
  const noTemplate = new PretrainedTokenizer(byteTokenizerJson(), { ...byteTokenizerConfig(), chat_template: undefined });
  assert.throws(() => noTemplate.apply_chat_template([{ role: 'user', content: 'x' }]), (e: Error) => e instanceof nbx.ValueError && /no chat template/.test(e.message));
  const raising = new PretrainedTokenizer(byteTokenizerJson(), { ...byteTokenizerConfig(), chat_template: "{{ raise_exception('roles must alternate') }}" });
  assert.throws(() => raising.apply_chat_template([{ role: 'user', content: 'x' }]), /roles must alternate/);
  const broken = new PretrainedTokenizer(byteTokenizerJson(), { ...byteTokenizerConfig(), chat_template: '{% for m in messages %}' });
  assert.throws(() => broken.apply_chat_template([{ role: 'user', content: 'x' }]), nbx.NbxError);
  assert.throws(() => byteTokenizer().apply_chat_template('hi' as never), nbx.ValueError);
  assert.throws(() => byteTokenizer().decode([999]), (e: Error) => e instanceof nbx.ValueError && /outside the vocabulary/.test(e.message));
  // A named-template list uses "default", as transformers does.
  const named = new PretrainedTokenizer(byteTokenizerJson(), { ...byteTokenizerConfig(), chat_template: [{ name: 'tool_use', template: 'T' }, { name: 'default', template: 'D{{ messages[0].content }}' }] });
  assert.equal(named.apply_chat_template([{ role: 'user', content: 'x' }], { tokenize: false }), 'Dx');
});

// ---- BPE with byte fallback (Llama 2, Mistral) ----------------------------------------------------

/** A Llama-2-style tokenizer.json: Metaspace by normalizer, <0xXX> byte tokens at 3..258, a few merges. */
function byteFallbackJson(): Record<string, unknown> {
  const vocab: Record<string, number> = { '<unk>': 0, '<s>': 1, '</s>': 2 };
  for (let b = 0; b < 256; b++) vocab[`<0x${b.toString(16).toUpperCase().padStart(2, '0')}>`] = 3 + b;
  const pieces = ['▁', 'T', 'h', 'e', 'a', 'n', 'd', 'G', 'o', 's', 'i', ',', '▁T', 'he', '▁The', '▁a', '▁an', '▁and', '▁G', '▁Go', '▁God'];
  pieces.forEach((p, i) => { vocab[p] = 259 + i; });
  const merges = ['▁ T', 'h e', '▁T he', '▁ a', '▁a n', '▁an d', '▁ G', '▁G o', '▁Go d'];
  const special = (id: number, content: string) => ({ id, content, single_word: false, lstrip: false, rstrip: false, normalized: false, special: true });
  return {
    version: '1.0', truncation: null, padding: null,
    added_tokens: [special(0, '<unk>'), special(1, '<s>'), special(2, '</s>')],
    normalizer: { type: 'Sequence', normalizers: [{ type: 'Prepend', prepend: '▁' }, { type: 'Replace', pattern: { String: ' ' }, content: '▁' }] },
    pre_tokenizer: null,
    post_processor: {
      type: 'TemplateProcessing',
      single: [{ SpecialToken: { id: '<s>', type_id: 0 } }, { Sequence: { id: 'A', type_id: 0 } }],
      pair: [{ SpecialToken: { id: '<s>', type_id: 0 } }, { Sequence: { id: 'A', type_id: 0 } }, { SpecialToken: { id: '<s>', type_id: 1 } }, { Sequence: { id: 'B', type_id: 1 } }],
      special_tokens: { '<s>': { id: '<s>', ids: [1], tokens: ['<s>'] } },
    },
    decoder: { type: 'Sequence', decoders: [{ type: 'Replace', pattern: { String: '▁' }, content: ' ' }, { type: 'ByteFallback' }, { type: 'Fuse' }, { type: 'Strip', content: ' ', start: 1, stop: 0 }] },
    model: { type: 'BPE', dropout: null, unk_token: '<unk>', continuing_subword_prefix: null, end_of_word_suffix: null, fuse_unk: true, byte_fallback: true, ignore_merges: false, vocab, merges },
  };
}

test('BPE with byte fallback: merges, <0xXX> tokens for unknown characters, BOS, decoding back', () => {
  const tok = new PretrainedTokenizer(byteFallbackJson(), { bos_token: '<s>', eos_token: '</s>', unk_token: '<unk>', add_bos_token: true });
  const id = (p: string): number => tok.token_to_id(p)!;
  assert.deepEqual(tok.encode('The God'), [1, id('▁The'), id('▁God')]);
  assert.deepEqual(tok.encode('The God', { add_special_tokens: false }), [id('▁The'), id('▁God')]);
  // "é" is not in the vocabulary: its two UTF-8 bytes become <0xC3> <0xA9>.
  assert.deepEqual(tok.encode('é', { add_special_tokens: false }), [id('▁'), 3 + 0xc3, 3 + 0xa9]);
  assert.equal(tok.decode(tok.encode('The God and é'), { skip_special_tokens: true }), 'The God and é');
  assert.equal(tok.decode(tok.encode('The God')), '<s> The God');
  assert.deepEqual([tok.bos_token_id, tok.eos_token_id, tok.unk_token_id], [1, 2, 0]);
  assert.deepEqual(tok.all_special_ids, [0, 1, 2]);
});

// ---- transformers' results (fixtures) -------------------------------------------------------------

interface Cases {
  special_token_ids: Record<string, number | null>;
  cases: {
    text: string; ids_with_special: number[]; ids_no_special: number[];
    decode_with_special_skip: string; decode_with_special_keep: string; decode_no_special_skip: string; decode_no_special_keep: string;
  }[];
  chat: { messages: { role: string; content: string }[]; add_generation_prompt: boolean; text: string; ids: number[] }[];
}

for (const style of ['bytelevel', 'bytefallback']) {
  test(`transformers' results for the ${style} tokenizer (test/fixtures/tokenizers/${style}/cases.json)`, async () => {
    const dir = join(FIXTURES, style);
    const tok = await loadTokenizer(dir);
    const cases = JSON.parse(readFileSync(join(dir, 'cases.json'), 'utf8')) as Cases;
    for (const [name, id] of Object.entries(cases.special_token_ids)) {
      assert.equal(tok[`${name}_id` as 'bos_token_id'], id, name);
    }
    for (const c of cases.cases) {
      const what = JSON.stringify(c.text);
      assert.deepEqual(tok.encode(c.text), c.ids_with_special, `encode ${what}`);
      assert.deepEqual(tok.encode(c.text, { add_special_tokens: false }), c.ids_no_special, `encode ${what} without special tokens`);
      assert.equal(tok.decode(c.ids_with_special), c.decode_with_special_keep, `decode ${what}`);
      assert.equal(tok.decode(c.ids_with_special, { skip_special_tokens: true }), c.decode_with_special_skip, `decode ${what}, skipping special tokens`);
      assert.equal(tok.decode(c.ids_no_special), c.decode_no_special_keep, `decode ${what} (no special tokens)`);
      assert.equal(tok.decode(c.ids_no_special, { skip_special_tokens: true }), c.decode_no_special_skip, `decode ${what} (no special tokens), skipping`);
    }
    for (const c of cases.chat) {
      const opts = { add_generation_prompt: c.add_generation_prompt };
      assert.equal(tok.apply_chat_template(c.messages, { ...opts, tokenize: false }), c.text, `chat of ${c.messages.length}`);
      assert.deepEqual(tok.apply_chat_template(c.messages, opts), c.ids, `chat of ${c.messages.length}, ids`);
    }
    assert.ok(cases.cases.length >= 20 && cases.chat.length >= 6);
  });
}

// ---- loadTokenizer --------------------------------------------------------------------------------

test('loadTokenizer: tokenizer.json + tokenizer_config.json + chat_template.jinja; typed errors for missing or corrupt files', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'nbx-tok-'));
  try {
    await assert.rejects(loadTokenizer(dir), (e: Error) => e instanceof nbx.FormatError && /no tokenizer\.json/.test(e.message));
    writeFileSync(join(dir, 'tokenizer.json'), '{"model": ');
    await assert.rejects(loadTokenizer(dir), (e: Error) => e instanceof nbx.FormatError && /not valid JSON/.test(e.message));
    writeFileSync(join(dir, 'tokenizer.json'), '{"version": "1.0"}');
    await assert.rejects(loadTokenizer(dir), nbx.FormatError);
    writeFileSync(join(dir, 'tokenizer.json'), JSON.stringify(byteTokenizerJson()));
    const bare = await loadTokenizer(dir);
    assert.deepEqual(bare.encode('ab'), [0x61, 0x62]);
    assert.equal(bare.chat_template, null);
    writeFileSync(join(dir, 'tokenizer_config.json'), JSON.stringify(byteTokenizerConfig()));
    writeFileSync(join(dir, 'chat_template.jinja'), '[{{ messages[0].content }}]');
    const full = await loadTokenizer(dir);
    assert.equal(full.eos_token_id, EOS);
    assert.equal(full.apply_chat_template([{ role: 'user', content: 'x' }], { tokenize: false }), '[x]', 'chat_template.jinja wins, as in transformers');
  } finally { rmSync(dir, { recursive: true, force: true }); }
});
