// nbx serve (issue #22) driven by the official `openai` npm client and by raw HTTP, on the embedded
// model (assets/nbx-kjv) on the CPU: response shapes and usage counts, streaming and not, chat
// (through the chat template) and completions, stop strings, seeded determinism, OpenAI's error
// shapes (400 / 401 / 404 / 429), a client that disconnects mid-stream freeing its sequence, /metrics
// parsing, and the server answering normally after every bad request. Small max_tokens keep it fast.

import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync } from 'node:fs';
import { connect } from 'node:net';
import { join } from 'node:path';
import OpenAI from 'openai';
import * as nbx from '../src/index.js';
import { parsePrometheus } from '../src/serve/index.js';
import type { ServeHandle } from '../src/serve/index.js';

const DIR = join(process.cwd(), 'assets', 'nbx-kjv');
const skip = existsSync(join(DIR, 'model.safetensors')) ? false : 'assets/nbx-kjv is missing';
const MODEL = 'nbx-kjv';

let model: nbx.models.CausalLMModel;
let server: ServeHandle;
let client: OpenAI;
const logLines: string[] = [];

before(async () => {
  if (skip) return;
  model = await nbx.models.load(DIR, { device: 'cpu' });
  server = await nbx.serve(model, { port: 0, modelName: MODEL, log: (l) => logLines.push(l) });
  client = new OpenAI({ baseURL: `${server.url}/v1`, apiKey: 'unused', maxRetries: 0 });
});

after(async () => {
  if (skip) return;
  await server.close();
  model.dispose();
});

async function raw(path: string, init: { method?: string; body?: string | object; headers?: Record<string, string> } = {}, url = server.url):
  Promise<{ status: number; headers: Headers; json: any; text: string }> {
  const body = init.body === undefined ? undefined : typeof init.body === 'string' ? init.body : JSON.stringify(init.body);
  const r = await fetch(url + path, { method: init.method ?? (body === undefined ? 'GET' : 'POST'), headers: { 'content-type': 'application/json', ...init.headers }, body });
  const text = await r.text();
  let json: unknown = null;
  try { json = JSON.parse(text); } catch { /* not JSON */ }
  return { status: r.status, headers: r.headers, json, text };
}

/** OpenAI's error body: { error: { message, type, param, code } }. */
function assertErrorShape(json: any, param?: string | null): void {
  assert.ok(json && typeof json.error === 'object', `an error body, got ${JSON.stringify(json)}`);
  assert.deepEqual(Object.keys(json.error).sort(), ['code', 'message', 'param', 'type']);
  assert.equal(typeof json.error.message, 'string');
  assert.ok(json.error.message.length > 0);
  assert.equal(typeof json.error.type, 'string');
  if (param !== undefined) assert.equal(json.error.param, param);
}

const waitFor = async (cond: () => boolean | Promise<boolean>, ms = 5000): Promise<void> => {
  const t0 = Date.now();
  while (!(await cond())) {
    if (Date.now() - t0 > ms) assert.fail(`condition not reached in ${ms} ms`);
    await new Promise((r) => setTimeout(r, 10));
  }
};

const messages = [{ role: 'system' as const, content: 'The book of Genesis.' }, { role: 'user' as const, content: 'And God said' }];

test('GET /v1/models, /health; the client lists the model', { skip }, async () => {
  const list = await client.models.list();
  assert.deepEqual(list.data.map((m) => m.id), [MODEL]);
  assert.equal(list.data[0]!.object, 'model');
  const one = await client.models.retrieve(MODEL);
  assert.equal(one.id, MODEL);
  const h = await raw('/health');
  assert.equal(h.status, 200);
  assert.deepEqual(h.json, { status: 'ok' });
});

test('chat completion: shape, chat template, usage counts; the stream carries the same text', { skip }, async () => {
  const r = await client.chat.completions.create({ model: MODEL, messages, max_tokens: 8, temperature: 0 });
  assert.match(r.id, /^chatcmpl-/);
  assert.equal(r.object, 'chat.completion');
  assert.equal(r.model, MODEL);
  assert.equal(typeof r.created, 'number');
  assert.equal(r.choices.length, 1);
  const c = r.choices[0]!;
  assert.equal(c.index, 0);
  assert.equal(c.message.role, 'assistant');
  assert.equal(typeof c.message.content, 'string');
  assert.ok(c.finish_reason === 'length' || c.finish_reason === 'stop');
  const promptIds = model.tokenizer!.apply_chat_template(messages, { add_generation_prompt: true }) as number[];
  assert.equal(r.usage!.prompt_tokens, promptIds.length, 'prompt tokens: the chat template\'s ids');
  assert.ok(r.usage!.completion_tokens >= 1 && r.usage!.completion_tokens <= 8);
  if (c.finish_reason === 'length') assert.equal(r.usage!.completion_tokens, 8);
  assert.equal(r.usage!.total_tokens, r.usage!.prompt_tokens + r.usage!.completion_tokens);
  // the same greedy request through the engine directly gives the same text
  const direct = await server.engine.submit({ prompt: promptIds, max_new_tokens: 8, temperature: 0 }).result;
  assert.equal(c.message.content, direct.text);

  const stream = await client.chat.completions.create({ model: MODEL, messages, max_tokens: 8, temperature: 0, stream: true, stream_options: { include_usage: true } });
  const chunks = [];
  for await (const ch of stream) chunks.push(ch);
  assert.equal(chunks[0]!.choices[0]!.delta.role, 'assistant', 'the first chunk carries the role');
  for (const ch of chunks) {
    assert.equal(ch.object, 'chat.completion.chunk');
    assert.equal(ch.id, chunks[0]!.id);
    assert.equal(ch.model, MODEL);
  }
  const text = chunks.map((ch) => ch.choices[0]?.delta.content ?? '').join('');
  assert.equal(text, c.message.content);
  const finals = chunks.filter((ch) => ch.choices[0]?.finish_reason);
  assert.equal(finals.length, 1);
  assert.equal(finals[0]!.choices[0]!.finish_reason, c.finish_reason);
  const last = chunks[chunks.length - 1]!;
  assert.deepEqual(last.choices, [], 'include_usage: a last chunk with no choices and the usage');
  assert.deepEqual(last.usage, r.usage);
  for (const ch of chunks.slice(0, -1)) assert.equal(ch.usage, null, 'the other chunks have usage: null');
});

test('completions: string and token-id prompts, streaming and not; usage; default max_tokens 16', { skip }, async () => {
  const r = await client.completions.create({ model: MODEL, prompt: 'In the beginning', max_tokens: 6, temperature: 0 });
  assert.match(r.id, /^cmpl-/);
  assert.equal(r.object, 'text_completion');
  assert.equal(r.choices[0]!.index, 0);
  const ids = model.tokenizer!.encode('In the beginning');
  assert.equal(r.usage!.prompt_tokens, ids.length);
  assert.equal(r.usage!.total_tokens, ids.length + r.usage!.completion_tokens);
  const byIds = await client.completions.create({ model: MODEL, prompt: ids, max_tokens: 6, temperature: 0 });
  assert.equal(byIds.choices[0]!.text, r.choices[0]!.text, 'token ids give the same completion as their text');
  const stream = await client.completions.create({ model: MODEL, prompt: 'In the beginning', max_tokens: 6, temperature: 0, stream: true });
  let text = '', finish: string | null = null;
  for await (const ch of stream) {
    assert.equal(ch.object, 'text_completion');
    assert.equal(ch.usage, undefined, 'no usage field without include_usage');
    text += ch.choices[0]!.text;
    if (ch.choices[0]!.finish_reason) finish = ch.choices[0]!.finish_reason;
  }
  assert.equal(text, r.choices[0]!.text);
  assert.equal(finish, r.choices[0]!.finish_reason);
  // OpenAI's default for the legacy endpoint: 16 tokens (EOS off by a stop-free prompt is not assured: at most 16)
  const d = await client.completions.create({ model: MODEL, prompt: 'And the LORD', temperature: 0 });
  assert.ok(d.usage!.completion_tokens <= 16);
  if (d.choices[0]!.finish_reason === 'length') assert.equal(d.usage!.completion_tokens, 16);
});

test('stop strings (string or array): the text ends before the stop, finish_reason stop, streaming too', { skip }, async () => {
  const prompt = 'And God said';
  const full = (await client.completions.create({ model: MODEL, prompt, max_tokens: 12, temperature: 0 })).choices[0]!.text;
  assert.ok(full.length > 6, `greedy text long enough to cut: ${JSON.stringify(full)}`);
  // a stop string that starts inside the text (not at its very start)
  const at = Math.max(2, Math.floor(full.length / 2));
  const stop = full.slice(at, at + 2);
  const expected = full.slice(0, full.indexOf(stop));
  const r = await client.completions.create({ model: MODEL, prompt, max_tokens: 12, temperature: 0, stop });
  assert.equal(r.choices[0]!.text, expected);
  assert.equal(r.choices[0]!.finish_reason, 'stop');
  assert.ok(r.usage!.completion_tokens < 12 || full.endsWith(stop));
  const s = await client.completions.create({ model: MODEL, prompt, max_tokens: 12, temperature: 0, stop: ['\u0000never', stop], stream: true });
  let text = '', finish = null;
  for await (const ch of s) { text += ch.choices[0]!.text; finish = ch.choices[0]!.finish_reason ?? finish; }
  assert.equal(text, expected);
  assert.equal(finish, 'stop');
});

test('seed: the same seed gives the same sampled text, streaming or not', { skip }, async () => {
  const ask = { model: MODEL, messages, max_tokens: 10, temperature: 1, top_p: 0.95, seed: 1234 };
  const a = (await client.chat.completions.create(ask)).choices[0]!.message.content;
  const b = (await client.chat.completions.create(ask)).choices[0]!.message.content;
  assert.equal(a, b);
  let c = '';
  for await (const ch of await client.chat.completions.create({ ...ask, stream: true })) c += ch.choices[0]?.delta.content ?? '';
  assert.equal(c, a);
  const others = new Set<string>();
  for (const seed of [1, 2, 3]) others.add((await client.chat.completions.create({ ...ask, seed, max_tokens: 6 })).choices[0]!.message.content!);
  assert.ok(others.size > 1, 'different seeds sample different texts');
});

test('400s in OpenAI\'s error shape (raw HTTP and the client), the server answering normally after each', { skip }, async () => {
  const chat = (extra: object): object => ({ model: MODEL, messages: [{ role: 'user', content: 'Hi' }], max_tokens: 2, ...extra });
  const cases: [string, string | object, string | null][] = [
    ['/v1/chat/completions', '{"model": "nbx-kjv", "messages": [', null],
    ['/v1/chat/completions', '[1, 2]', null],
    ['/v1/chat/completions', chat({ max_tokens: '5' }), 'max_tokens'],
    ['/v1/chat/completions', chat({ max_tokens: 0 }), 'max_tokens'],
    ['/v1/chat/completions', chat({ max_completion_tokens: 2.5 }), 'max_completion_tokens'],
    ['/v1/chat/completions', chat({ temperature: 'hot' }), 'temperature'],
    ['/v1/chat/completions', chat({ temperature: 3 }), 'temperature'],
    ['/v1/chat/completions', chat({ top_p: -0.1 }), 'top_p'],
    ['/v1/chat/completions', chat({ n: 2 }), 'n'],
    ['/v1/chat/completions', chat({ stop: 5 }), 'stop'],
    ['/v1/chat/completions', chat({ stop: ['a', 'b', 'c', 'd', 'e'] }), 'stop'],
    ['/v1/chat/completions', chat({ seed: 'x' }), 'seed'],
    ['/v1/chat/completions', chat({ seed: -5 }), 'seed'],
    ['/v1/chat/completions', chat({ stream: 'yes' }), 'stream'],
    ['/v1/chat/completions', chat({ stream_options: { include_usage: true } }), 'stream_options'],
    ['/v1/chat/completions', chat({ logprobs: true }), 'logprobs'],
    ['/v1/chat/completions', chat({ tools: [{ type: 'function', function: { name: 'f' } }] }), 'tools'],
    ['/v1/chat/completions', chat({ frobnicate: 1 }), 'frobnicate'],
    ['/v1/chat/completions', chat({ messages: 'hello' }), 'messages'],
    ['/v1/chat/completions', chat({ messages: [] }), 'messages'],
    ['/v1/chat/completions', chat({ messages: [{ role: 'user' }] }), 'messages[0].content'],
    ['/v1/chat/completions', chat({ messages: [{ role: 'wizard', content: 'x' }] }), 'messages[0].role'],
    ['/v1/chat/completions', chat({ messages: [{ role: 'user', content: [{ type: 'image_url', image_url: { url: 'x' } }] }] }), 'messages[0].content[0].type'],
    ['/v1/chat/completions', { messages: [{ role: 'user', content: 'x' }] }, 'model'],
    ['/v1/chat/completions', chat({ max_tokens: 5000 }), 'max_tokens'],
    ['/v1/chat/completions', chat({ messages: [{ role: 'user', content: 'and '.repeat(1100) }] }), 'messages'],
    ['/v1/completions', { model: MODEL, prompt: 'x', max_tokens: 1024 }, 'max_tokens'],
    ['/v1/completions', { model: MODEL, prompt: ['a', 'b'] }, 'prompt'],
    ['/v1/completions', { model: MODEL, prompt: [1, 99999] }, 'prompt'],
    ['/v1/completions', { model: MODEL, prompt: { text: 'x' } }, 'prompt'],
    ['/v1/completions', { model: MODEL, prompt: '' }, 'prompt'],
    ['/v1/completions', { model: MODEL, prompt: 'x', echo: true }, 'echo'],
    ['/v1/completions', { model: MODEL, prompt: 'x', best_of: 3 }, 'best_of'],
  ];
  for (const [path, body, param] of cases) {
    const r = await raw(path, { body });
    assert.equal(r.status, 400, `${path} ${typeof body === 'string' ? body : JSON.stringify(body).slice(0, 120)}: ${r.text}`);
    assertErrorShape(r.json, param);
    assert.equal(r.json.error.type, 'invalid_request_error');
  }
  const long = await raw('/v1/completions', { body: { model: MODEL, prompt: 'x', max_tokens: 1024 } });
  assert.equal(long.json.error.code, 'context_length_exceeded');
  // other statuses
  const wrongModel = await raw('/v1/chat/completions', { body: chat({ model: 'gpt-4o' }) });
  assert.equal(wrongModel.status, 404);
  assertErrorShape(wrongModel.json, 'model');
  assert.equal(wrongModel.json.error.code, 'model_not_found');
  const unknown = await raw('/v1/nothing');
  assert.equal(unknown.status, 404);
  assertErrorShape(unknown.json);
  const method = await raw('/v1/chat/completions');
  assert.equal(method.status, 405);
  assertErrorShape(method.json);
  // the client maps them to its typed errors
  await assert.rejects(client.chat.completions.create({ model: MODEL, messages, max_tokens: 2, n: 3 }), (e: unknown) => {
    assert.ok(e instanceof OpenAI.BadRequestError, String(e));
    assert.equal(e.status, 400);
    assert.equal(e.param, 'n');
    return true;
  });
  await assert.rejects(client.chat.completions.create({ model: 'nope', messages, max_tokens: 2 }), OpenAI.NotFoundError);
  // a malformed HTTP request line: 400 on that connection only
  const answer = await new Promise<string>((resolve, reject) => {
    const sock = connect(server.port, '127.0.0.1', () => sock.write('THIS IS NOT HTTP\r\n\r\n'));
    let got = '';
    sock.on('data', (d) => { got += d.toString(); });
    sock.on('end', () => resolve(got));
    sock.on('error', reject);
  });
  assert.match(answer, /^HTTP\/1\.1 400/);
  // a body cut short by a client that goes away, and a body over the limit (413)
  await new Promise<void>((resolve, reject) => {
    const sock = connect(server.port, '127.0.0.1', () => {
      sock.write('POST /v1/chat/completions HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\ncontent-length: 1000\r\n\r\n{"model": "nbx');
      setTimeout(() => { sock.destroy(); resolve(); }, 50);
    });
    sock.on('error', reject);
  });
  const huge = await raw('/v1/completions', { body: { model: MODEL, prompt: 'x'.repeat(17 * 2 ** 20) } });
  assert.equal(huge.status, 413);
  assertErrorShape(huge.json);
  // and the server still answers
  const ok = await client.chat.completions.create({ model: MODEL, messages, max_tokens: 2, temperature: 0 });
  assert.equal(ok.choices.length, 1);
});

test('--api-key: 401 for a wrong or missing key (OpenAI\'s shape), the right key works; /health stays open', { skip }, async () => {
  const s = await nbx.serve(model, { port: 0, modelName: MODEL, apiKey: 'sk-test-123', log: false });
  try {
    const noKey = await raw('/v1/models', {}, s.url);
    assert.equal(noKey.status, 401);
    assertErrorShape(noKey.json);
    assert.equal(noKey.json.error.code, 'invalid_api_key');
    const wrong = await raw('/v1/chat/completions', { body: { model: MODEL, messages, max_tokens: 2 }, headers: { authorization: 'Bearer sk-wrong' } }, s.url);
    assert.equal(wrong.status, 401);
    assertErrorShape(wrong.json);
    const bad = new OpenAI({ baseURL: `${s.url}/v1`, apiKey: 'sk-wrong', maxRetries: 0 });
    await assert.rejects(bad.chat.completions.create({ model: MODEL, messages, max_tokens: 2 }), OpenAI.AuthenticationError);
    const good = new OpenAI({ baseURL: `${s.url}/v1`, apiKey: 'sk-test-123', maxRetries: 0 });
    const r = await good.chat.completions.create({ model: MODEL, messages, max_tokens: 2 });
    assert.equal(r.choices.length, 1);
    assert.equal((await raw('/health', {}, s.url)).status, 200);
  } finally { await s.close(); }
});

test('queue full: 429 with Retry-After in OpenAI\'s shape; the running and waiting requests finish', { skip }, async () => {
  const s = await nbx.serve(model, { port: 0, modelName: MODEL, maxBatch: 1, maxQueue: 1, log: false });
  try {
    const c = new OpenAI({ baseURL: `${s.url}/v1`, apiKey: 'x', maxRetries: 0 });
    const ask = { model: MODEL, messages, max_tokens: 24, temperature: 0, stream: true as const };
    const a = await c.chat.completions.create(ask);
    const ia = a[Symbol.asyncIterator]();
    await ia.next(); // the role chunk
    await ia.next(); // a token: A runs
    const b = c.chat.completions.create(ask);
    await waitFor(() => s.engine.stats().waiting === 1);
    const r = await raw('/v1/chat/completions', { body: { ...ask, stream: false } }, s.url);
    assert.equal(r.status, 429, r.text);
    assert.equal(r.headers.get('retry-after'), '1');
    assertErrorShape(r.json);
    assert.equal(r.json.error.code, 'queue_full');
    await assert.rejects(c.chat.completions.create({ ...ask, stream: false }), OpenAI.RateLimitError);
    let textA = '';
    for (let x = await ia.next(); !x.done; x = await ia.next()) textA += x.value.choices[0]?.delta.content ?? '';
    let textB = '';
    for await (const ch of await b) textB += ch.choices[0]?.delta.content ?? '';
    assert.ok(textB.length > 0 && textA.length > 0);
  } finally { await s.close(); }
});

test('a client that disconnects mid-stream frees its sequence at once; the server goes on', { skip }, async () => {
  const before = server.engine.stats();
  const ac = new AbortController();
  const stream = await client.chat.completions.create({ model: MODEL, messages, max_tokens: 400, temperature: 0, stream: true }, { signal: ac.signal });
  let n = 0, atAbort = 0;
  try {
    for await (const ch of stream) {
      if (ch.choices[0]?.delta.content) n++;
      if (n === 3) { atAbort = server.engine.stats().tokens_out; ac.abort(); }
    }
  } catch { /* the client may end the aborted stream with an error or quietly */ }
  assert.equal(n, 3, 'aborted after 3 pieces');
  await waitFor(() => { const s = server.engine.stats(); return s.running === 0 && s.waiting === 0; }, 3000);
  const after = server.engine.stats();
  assert.ok(after.tokens_out - atAbort <= 8, `the sequence stopped within a few steps of the disconnect (${after.tokens_out - atAbort} tokens after it)`);
  assert.ok(after.tokens_out - before.tokens_out < 100);
  assert.equal(after.kv_blocks_used, 0);
  // raw socket closed mid-stream, non-streaming request closed early: the same
  await new Promise<void>((resolve, reject) => {
    const body = JSON.stringify({ model: MODEL, messages, max_tokens: 400, temperature: 0, stream: true });
    const sock = connect(server.port, '127.0.0.1', () => sock.write(`POST /v1/chat/completions HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\ncontent-length: ${Buffer.byteLength(body)}\r\n\r\n${body}`));
    let got = '';
    sock.on('data', (d) => { got += d.toString(); if ((got.match(/data: /g) ?? []).length >= 3) { sock.destroy(); resolve(); } });
    sock.on('error', reject);
  });
  await waitFor(() => { const s = server.engine.stats(); return s.running === 0 && s.waiting === 0; }, 3000);
  const ok = await client.completions.create({ model: MODEL, prompt: 'And', max_tokens: 2 });
  assert.equal(ok.choices.length, 1);
  assert.ok(logLines.some((l) => / 200 \d+ms cancelled: the client went away/.test(l)), `a log line for the cancelled stream:\n${logLines.join('\n')}`);
});

test('/metrics: Prometheus text that parses, with requests, tokens, queue, batch, KV blocks and latency histograms', { skip }, async () => {
  const r = await fetch(`${server.url}/metrics`);
  assert.equal(r.status, 200);
  assert.match(r.headers.get('content-type') ?? '', /^text\/plain; version=0\.0\.4/);
  const text = await r.text();
  const m = parsePrometheus(text);
  const get = (name: string): number => {
    const v = [...m.entries()].filter(([k]) => k === name || k.startsWith(`${name}{`)).reduce((a, [, x]) => a + x, 0);
    return v;
  };
  assert.ok(get('nbx_requests_total') > 10);
  assert.ok((m.get(`nbx_requests_total{model="${MODEL}",endpoint="chat",status="200"}`) ?? 0) >= 3);
  assert.ok((m.get(`nbx_requests_total{model="${MODEL}",endpoint="chat",status="400"}`) ?? 0) >= 10);
  assert.ok(get('nbx_prompt_tokens_total') > 0);
  assert.ok(get('nbx_generation_tokens_total') > 0);
  for (const g of ['nbx_generation_tokens_per_second', 'nbx_requests_waiting', 'nbx_requests_running', 'nbx_kv_blocks_used', 'nbx_kv_blocks_free']) {
    assert.ok(m.has(`${g}{model="${MODEL}"}`), g);
  }
  // on the CPU, the process's RSS (no device allocator), labelled so
  assert.ok((m.get(`nbx_device_memory_reserved_bytes{model="${MODEL}",source="rss"}`) ?? 0) > 0);
  assert.equal(m.get(`nbx_kv_blocks_free{model="${MODEL}"}`)! + m.get(`nbx_kv_blocks_used{model="${MODEL}"}`)!, server.engine.stats().kv_blocks_total);
  for (const h of ['nbx_time_to_first_token_seconds', 'nbx_inter_token_latency_seconds']) {
    const count = m.get(`${h}_count{model="${MODEL}"}`)!;
    assert.ok(count > 0, h);
    assert.equal(m.get(`${h}_bucket{model="${MODEL}",le="+Inf"}`), count);
    const buckets = [...m.entries()].filter(([k]) => k.startsWith(`${h}_bucket`)).map(([, v]) => v);
    for (let i = 1; i < buckets.length; i++) assert.ok(buckets[i]! >= buckets[i - 1]!, `${h}: cumulative buckets`);
    assert.ok(text.includes(`# TYPE ${h} histogram`));
  }
  // one log line per request
  assert.ok(logLines.length >= get('nbx_requests_total') - 1);
});

test('KV cache: a request waits for blocks while others run; one that can never fit is a 503 in OpenAI\'s shape', { skip }, async () => {
  // 4 blocks of 16 positions: room for one request of <= 64 positions at a time
  const s = await nbx.serve(model, { port: 0, modelName: MODEL, maxBatch: 4, kvBlocks: 4, blockSize: 16, log: false });
  try {
    const c = new OpenAI({ baseURL: `${s.url}/v1`, apiKey: 'x', maxRetries: 0 });
    const ask = { model: MODEL, prompt: 'And God said', max_tokens: 40, temperature: 0 };
    let sawWaiting = false;
    const poll = setInterval(() => { if (s.engine.stats().waiting > 0) sawWaiting = true; }, 5);
    const [a, b] = await Promise.all([c.completions.create(ask), c.completions.create(ask)]);
    clearInterval(poll);
    assert.equal(a.choices[0]!.text, b.choices[0]!.text, 'the one that waited gives the same greedy text');
    assert.ok(sawWaiting, 'the second request waited for blocks');
    const big = await raw('/v1/completions', { body: { ...ask, max_tokens: 200 } }, s.url);
    assert.equal(big.status, 503, big.text);
    assertErrorShape(big.json);
    assert.equal(big.json.error.code, 'kv_cache_full');
    const again = await c.completions.create({ ...ask, max_tokens: 4 });
    assert.equal(again.choices.length, 1);
  } finally { await s.close(); }
});

test('close() with requests in flight: they end (503 in OpenAI\'s shape or the connection closes), nothing hangs', { skip }, async () => {
  const s = await nbx.serve(model, { port: 0, modelName: MODEL, log: false });
  const pending = raw('/v1/completions', { body: { model: MODEL, prompt: 'And God said', max_tokens: 300, temperature: 0 } }, s.url)
    .then((r) => r, (e: unknown) => ({ status: -1, json: null, text: String(e) }));
  await waitFor(() => s.engine.stats().tokens_out > 0);
  const t0 = Date.now();
  await s.close();
  const r = await pending;
  assert.ok(Date.now() - t0 < 3000);
  if (r.status !== -1) {
    assert.equal(r.status, 503, r.text);
    assertErrorShape(r.json);
  }
  assert.equal(s.engine.stats().running, 0);
});

test('random request bodies: every answer is 200 or an error in OpenAI\'s shape, and the server goes on', { skip }, async () => {
  let state = 12345;
  const rnd = (): number => { state = (Math.imul(state, 1103515245) + 12345) >>> 0; return state / 2 ** 32; };
  const pick = <T>(xs: readonly T[]): T => xs[Math.floor(rnd() * xs.length)]!;
  const junk = (depth = 0): unknown => pick<() => unknown>([
    () => null, () => true, () => -1, () => 0, () => 1, () => 2.5, () => 1e308, () => 'x', () => '', () => 'w'.repeat(50),
    () => (depth < 2 ? [junk(depth + 1), junk(depth + 1)] : []), () => (depth < 2 ? { a: junk(depth + 1), role: 'user', content: junk(depth + 1) } : {}),
  ])();
  const keys = ['model', 'messages', 'prompt', 'max_tokens', 'max_completion_tokens', 'temperature', 'top_p', 'top_k', 'seed', 'n', 'stream',
    'stream_options', 'stop', 'logprobs', 'user', 'tools', 'response_format', 'echo', 'suffix', 'zzz'];
  const statuses = new Map<number, number>();
  for (let i = 0; i < 120; i++) {
    const chat = rnd() < 0.5;
    const body: Record<string, unknown> = { model: MODEL, max_tokens: 1, ...(chat ? { messages: [{ role: 'user', content: 'Hi' }] } : { prompt: 'Hi' }) };
    for (let k = 0; k < 1 + Math.floor(rnd() * 3); k++) body[pick(keys)] = junk();
    if (typeof body.max_tokens === 'number' || typeof body.max_completion_tokens === 'number') { body.max_tokens = 1; delete body.max_completion_tokens; }
    const text = rnd() < 0.1 ? JSON.stringify(body).slice(0, Math.floor(rnd() * 40)) : JSON.stringify(body);
    const r = await raw(chat ? '/v1/chat/completions' : '/v1/completions', { body: text });
    statuses.set(r.status, (statuses.get(r.status) ?? 0) + 1);
    if (r.status === 200) continue;
    assert.ok([400, 404].includes(r.status), `${r.status} for ${text}: ${r.text}`);
    assertErrorShape(r.json);
  }
  assert.ok((statuses.get(400) ?? 0) > 20, JSON.stringify([...statuses]));
  const ok = await client.completions.create({ model: MODEL, prompt: 'And', max_tokens: 2 });
  assert.equal(ok.choices.length, 1);
});

test('warmup: the server backs its KV cache before listening (logged); /metrics reports its mapped bytes and a request streams normally', { skip }, async () => {
  const lines: string[] = [];
  const h = await nbx.serve(model, { port: 0, modelName: MODEL, kvBlocks: 24, maxBatch: 2, warmup: true, log: (l) => lines.push(l) });
  try {
    assert.ok(lines.some((l) => /warm-up: KV cache 2[45] blocks/.test(l)), lines.join('\n'));
    const before = parsePrometheus(await (await fetch(`${h.url}/metrics`)).text());
    const key = [...before.keys()].find((k) => k.startsWith('nbx_kv_cache_mapped_bytes{'))!;
    assert.ok(before.get(key)! > 0);
    const c = new OpenAI({ baseURL: `${h.url}/v1`, apiKey: 'unused', maxRetries: 0 });
    const r = await c.chat.completions.create({ model: MODEL, messages: [{ role: 'user', content: 'In the beginning' }], max_tokens: 4, temperature: 0 });
    assert.equal(r.usage?.completion_tokens, 4);
    const after = parsePrometheus(await (await fetch(`${h.url}/metrics`)).text());
    assert.equal(after.get(key), before.get(key), 'the KV cache did not grow');
  } finally { await h.close(); }
  // a bad warm-up count is a typed error, and the server does not start
  await assert.rejects(nbx.serve(model, { port: 0, kvBlocks: 4, warmup: { kvBlocks: 5 }, log: false }), /kvBlocks must be an integer in 0\.\.4/);
});
