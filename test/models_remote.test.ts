// nbx.models.loadFromFiles / loadFromUrl / loadTokenizerFromFiles (the browser's way in): the same
// model as nbx.models.load on the folder (logits, tokens, sampled text), sharded checkpoints held in
// memory, fetch with progress and 404s for optional files, and bad input as typed errors after which
// loading still works.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync, readFileSync, readdirSync } from 'node:fs';
import { join } from 'node:path';
import * as nbx from '../src/index.js';
import { encodeSafetensors } from '../src/io/safetensors.js';
import { FileError, FormatError, ShapeError, ValueError } from '../src/errors.js';
import { maxRelErr } from './models_util.js';

const KJV = join(process.cwd(), 'assets', 'nbx-kjv');
const TINY = join(process.cwd(), 'test', 'fixtures', 'models', 'llama');
const REF = join(process.cwd(), 'test', 'fixtures', 'models', 'nbx-kjv-reference.json');
const skipKjv = existsSync(join(KJV, 'model.safetensors')) && existsSync(REF) ? false : 'assets/nbx-kjv or its reference is missing';
if (skipKjv) console.log(`# SKIP embedded-model cases: ${skipKjv}`);

/** A folder's files as loadFromFiles takes them: JSON and text as strings, the rest as bytes. */
function filesOf(dir: string): Record<string, string | Uint8Array> {
  const out: Record<string, string | Uint8Array> = {};
  for (const f of readdirSync(dir)) out[f] = /\.(json|jinja|md)$/.test(f) ? readFileSync(join(dir, f), 'utf8') : readFileSync(join(dir, f));
  return out;
}

/** A fetch serving `files` under http://models.test/m/, recording the URLs asked for. */
function fakeFetch(files: Record<string, string | Uint8Array>, status: Record<string, number> = {}) {
  const asked: string[] = [];
  const fetch = async (url: string): Promise<Response> => {
    asked.push(url);
    const name = url.replace('http://models.test/m/', '');
    if (status[name]) return new Response('nope', { status: status[name] });
    const body = files[name];
    return body === undefined ? new Response('not found', { status: 404 }) : new Response(body as BodyInit, { headers: { 'content-length': String(typeof body === 'string' ? Buffer.byteLength(body) : body.byteLength) } });
  };
  return { fetch, asked };
}

test('loadFromFiles: the tiny llama fixture gives load()\'s logits, bit for bit', async () => {
  const a = await nbx.models.load(TINY);
  const b = await nbx.models.loadFromFiles(filesOf(TINY));
  try {
    const ids = nbx.tensor([[1, 5, 9, 20, 3]]);
    const la = a.forward(ids).dataSync(), lb = b.forward(ids).dataSync();
    assert.deepEqual(Array.from(lb as Float32Array), Array.from(la as Float32Array));
    assert.deepEqual(b.generationConfig, a.generationConfig);
  } finally { a.dispose(); b.dispose(); }
});

test('loadFromFiles: a sharded checkpoint in memory (index + shards, ArrayBuffers and parsed JSON)', async () => {
  const files = filesOf(TINY);
  const { tensors } = await nbx.io.loadSafetensors(join(TINY, 'model.safetensors'));
  const names = Object.keys(tensors).sort();
  const shard = (part: string[]): ArrayBuffer => {
    const bytes = encodeSafetensors(part.map((n) => {
      const d = tensors[n]!.dataSync() as Float32Array;
      return { name: n, dtype: tensors[n]!.dt, shape: tensors[n]!.shape, data: new Uint8Array(d.buffer, d.byteOffset, d.byteLength) };
    }));
    return bytes.buffer.slice(bytes.byteOffset, bytes.byteOffset + bytes.byteLength) as ArrayBuffer;
  };
  const half = Math.ceil(names.length / 2);
  const weight_map: Record<string, string> = {};
  names.forEach((n, i) => { weight_map[n] = i < half ? 'model-00001-of-00002.safetensors' : 'model-00002-of-00002.safetensors'; });
  const sharded = {
    'config.json': JSON.parse(files['config.json'] as string) as Record<string, unknown>,
    'model.safetensors.index.json': { metadata: {}, weight_map },
    'model-00001-of-00002.safetensors': shard(names.slice(0, half)),
    'model-00002-of-00002.safetensors': shard(names.slice(half)),
  };
  const a = await nbx.models.load(TINY);
  const b = await nbx.models.loadFromFiles(sharded);
  try {
    const ids = nbx.tensor([[1, 5, 9, 20, 3]]);
    assert.equal(maxRelErr(b.forward(ids), a.forward(ids)), 0);
    assert.equal(b.tokenizer, null);
  } finally {
    a.dispose(); b.dispose();
    for (const t of Object.values(tensors)) t.dispose();
  }
});

test('assets/nbx-kjv from files and from a URL: transformers\' greedy and sampled text, its tokenizer', { skip: skipKjv }, async () => {
  const ref = JSON.parse(readFileSync(REF, 'utf8')) as { cases: { prompt: string; input_ids: number[]; greedy_text: string; sampled_text: string }[] };
  const c = ref.cases[0]!;
  const files = filesOf(KJV);
  const { fetch, asked } = fakeFetch(files);
  const progress: number[] = [];
  const fromUrl = await nbx.models.loadFromUrl('http://models.test/m', {
    fetch, onDownload: (p) => { if (p.file === 'model.safetensors') { assert.equal(p.totalBytes, (files['model.safetensors'] as Uint8Array).byteLength); progress.push(p.loadedBytes); } },
  });
  const fromFiles = await nbx.models.loadFromFiles(files);
  try {
    assert.ok(asked.includes('http://models.test/m/config.json') && asked.includes('http://models.test/m/tokenizer.json'));
    assert.equal(progress.at(-1), (files['model.safetensors'] as Uint8Array).byteLength);
    for (const m of [fromFiles, fromUrl]) {
      assert.deepEqual(m.tokenizer!.encode(c.prompt), c.input_ids);
      const ids = await m.generate(c.prompt, { do_sample: false, max_new_tokens: 32 });
      assert.equal(m.tokenizer!.decode(Array.from(ids.dataSync() as BigInt64Array, Number), { skip_special_tokens: true }), c.greedy_text);
      let text = '';
      for await (const piece of m.stream(c.prompt, { seed: 42, max_new_tokens: 32 })) text += piece;
      assert.equal(c.prompt + text, c.sampled_text);
    }
    const tok = await nbx.models.loadTokenizerFromFiles({ 'tokenizer.json': JSON.parse(files['tokenizer.json'] as string), 'tokenizer_config.json': files['tokenizer_config.json']! });
    assert.deepEqual(tok.encode(c.prompt), c.input_ids);
  } finally { fromFiles.dispose(); fromUrl.dispose(); }
});

test('bad input: typed errors, then loading still works', async () => {
  const files = filesOf(TINY);
  const bytes = files['model.safetensors'] as Uint8Array;
  const without = (name: string): Record<string, string | Uint8Array> => { const f = { ...files }; delete f[name]; return f; };
  await assert.rejects(nbx.models.loadFromFiles(without('config.json')), (e: unknown) => e instanceof ValueError && /no config\.json among the files/.test((e as Error).message));
  await assert.rejects(nbx.models.loadFromFiles(without('model.safetensors')), (e: unknown) => e instanceof ValueError && /neither model\.safetensors nor/.test((e as Error).message));
  await assert.rejects(nbx.models.loadFromFiles({ ...files, 'config.json': '{"model_type": ' }), FormatError);
  await assert.rejects(nbx.models.loadFromFiles({ ...files, 'model.safetensors': 'weights' }), (e: unknown) => e instanceof ValueError && /must be bytes/.test((e as Error).message));
  await assert.rejects(nbx.models.loadFromFiles({ ...files, 'model.safetensors': bytes.subarray(0, bytes.byteLength - 7) }), FormatError);
  await assert.rejects(nbx.models.loadFromFiles({ ...files, 'model.safetensors': new Uint8Array(4) }), FormatError);
  const wrongConfig = { ...JSON.parse(files['config.json'] as string), hidden_size: 64 };
  await assert.rejects(nbx.models.loadFromFiles({ ...files, 'config.json': wrongConfig }), ShapeError);
  await assert.rejects(nbx.models.loadFromFiles({ ...files, 'generation_config.json': '[1]' }), FormatError);
  await assert.rejects(nbx.models.loadFromFiles({ 'config.json': files['config.json']!, 'model.safetensors.index.json': { weight_map: { a: 'x.safetensors' } } }), (e: unknown) => e instanceof ValueError && /shard 'x\.safetensors'/.test((e as Error).message));
  await assert.rejects(nbx.models.loadFromFiles({ 'config.json': files['config.json']!, 'model.safetensors.index.json': { weight_map: { a: '../x.safetensors' } } }), FormatError);
  await assert.rejects(nbx.models.loadFromFiles(files, { device: 'cpu', devcie: 'cpu' } as never), ValueError);
  await assert.rejects(nbx.models.loadFromFiles(null as never), ValueError);
  await assert.rejects(nbx.models.loadFromFiles(new Map() as never), ValueError);
  await assert.rejects(nbx.models.loadTokenizerFromFiles({ 'config.json': '{}' }), ValueError);

  await assert.rejects(nbx.models.loadFromUrl('models/m/'), (e: unknown) => e instanceof ValueError && /relative URL/.test((e as Error).message));
  await assert.rejects(nbx.models.loadFromUrl('http://models.test/m/', { fetch: fakeFetch(without('config.json')).fetch }), (e: unknown) => e instanceof FileError && /config\.json not found/.test((e as Error).message));
  await assert.rejects(nbx.models.loadFromUrl('http://models.test/m/', { fetch: fakeFetch(files, { 'model.safetensors': 500 }).fetch }), (e: unknown) => e instanceof FileError && /HTTP 500/.test((e as Error).message));
  const spa = async (url: string): Promise<Response> => (url.endsWith('chat_template.jinja')
    ? new Response('<!doctype html><html></html>', { headers: { 'content-type': 'text/html; charset=utf-8' } }) : fakeFetch(files).fetch(url));
  await assert.rejects(nbx.models.loadFromUrl('http://models.test/m/', { fetch: spa }), (e: unknown) => e instanceof FormatError && /chat_template\.jinja: the server answered with an HTML page/.test((e as Error).message));
  await assert.rejects(nbx.models.loadFromUrl('http://models.test/m/', { fetch: async () => { throw new TypeError('network down'); } }), (e: unknown) => e instanceof FileError && /network down/.test((e as Error).message));

  const m = await nbx.models.loadFromUrl(new URL('http://models.test/m/'), { fetch: fakeFetch(files).fetch });
  try { assert.deepEqual(m.forward(nbx.tensor([[1, 2]])).shape, [1, 2, 128]); } finally { m.dispose(); }
});
