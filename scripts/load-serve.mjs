#!/usr/bin/env node
// Bounded load generator for `nbx serve` (issue #22). Requests go to the loopback only and the run
// stops by itself (a request count, and a wall-clock limit after which everything is aborted).
//
// It starts the server as a child process (or uses --url, which must be a loopback address), then:
//  1. warm-up: one burst of --concurrency requests whose prompts fill as many KV blocks as the load's
//     longest requests will, then one long request alone (both discarded);
//  2. single stream: --single requests one at a time (output = the longest of --output): decode tok/s
//     and inter-token latency of one stream alone (the baseline of the issue's ratio); with
//     --baseline-max-batch B also first on a server of batch B (started and stopped before the load's:
//     an engine that pads its steps to the batch size is slower alone), the faster figure being the
//     baseline; then the warm level of reserved device memory, read from /metrics;
//  3. load: --requests streaming chat requests, --concurrency at a time, random prompt and output
//     lengths, a --cancel share aborted mid-stream after a random number of tokens; each request has
//     its own seed (sampling at --temperature; 0 = greedy);
//  4. after: memory, running/waiting/KV blocks from /metrics: nothing running, no block used;
//  5. verify: a random sample of --verify completed requests (or all) run again one at a time with the
//     same body: the text must be identical (no sequence sees another's tokens; batching changes
//     nothing). Verification has its own time budget (--verify-timeout-s, from its start): the sample is
//     cut beforehand, if it must be, to what the single-stream figures say fits in 80% of it, so every
//     request of the sample runs to its end; the report says how many were planned and checked.
// Memory: the allocator's reserved bytes (CUDA / WebGPU; the process's RSS on the CPU) and the KV cache's
// mapped bytes (on CUDA's virtual memory API outside the allocator; on plain backing inside it), read
// when the server listens (after the engine's warm-up: nbx.serve's Engine.warmup()), at the warm level
// (after this script's warm-up and the single streams), after the load and after the verification. PASS
// when both are, to the byte, at the warm level after the load and after the verification (on the CPU,
// the KV cache only: the RSS moves with the JavaScript heap and is only reported).
// Report: completed, cancelled, errors by kind, aggregate tokens/s, TTFT and ITL p50/p99, the ratio of
// aggregate to single-stream tokens/s, memory, verification. Build first (`npm run build`).
//
//   node scripts/load-serve.mjs [--model DIR | --shape tinyllama|tiny | --url http://127.0.0.1:PORT]
//        [--device cpu|cuda] [--dtype D] [--concurrency 64] [--requests 1000] [--cancel 0.1]
//        [--prompt 8:64] [--output 16:128] [--temperature 0.8] [--single 3] [--verify 64|all]
//        [--max-batch N] [--baseline-max-batch 1] [--timeout-s 540] [--verify-timeout-s 120]
//        [--seed 1] [--json FILE] [--mem-dump DIR]
// --mem-dump (with --shape on a device with a caching allocator): the server child writes the allocator's
// segments (size, stream or graph pool, blocks) at each memory reading to DIR/mem_<label>.json, and when
// the memory check fails the report lists the segments that differ from the warm level's.
// --timeout-s bounds everything before the verification (servers' start, warm-up, single streams, load);
// --verify-timeout-s the verification. A run takes at most their sum plus the server's stop (5 s).
//
// --shape builds a random-weight model of that shape in the server process (bfloat16 on CUDA) with a
// word-level tokenizer of the model's vocabulary ("w123" is token 123), so prompt lengths are exact.

import { parseArgs } from 'node:util';
import { spawn } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import { cpus, hostname, loadavg } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const here = dirname(fileURLToPath(import.meta.url));
const { values: V } = parseArgs({ options: {
  url: { type: 'string' }, model: { type: 'string' }, shape: { type: 'string' }, device: { type: 'string' }, dtype: { type: 'string' },
  concurrency: { type: 'string', default: '64' }, requests: { type: 'string', default: '1000' }, cancel: { type: 'string', default: '0.1' },
  prompt: { type: 'string', default: '8:64' }, output: { type: 'string', default: '16:128' }, temperature: { type: 'string', default: '0.8' },
  single: { type: 'string', default: '3' }, verify: { type: 'string', default: '64' }, 'max-batch': { type: 'string' },
  'timeout-s': { type: 'string', default: '540' }, 'baseline-max-batch': { type: 'string' }, seed: { type: 'string', default: '1' }, json: { type: 'string' },
  'verify-timeout-s': { type: 'string', default: '120' }, 'mem-dump': { type: 'string' }, 'serve-child': { type: 'boolean', default: false }, help: { type: 'boolean', default: false },
} });
if (V.help) {
  const { readFileSync } = await import('node:fs');
  const lines = readFileSync(fileURLToPath(import.meta.url), 'utf8').split('\n').slice(1);
  console.log(lines.slice(0, lines.findIndex((l) => !l.startsWith('//'))).map((l) => l.slice(3)).join('\n'));
  process.exit(0);
}

// ------------------------------------------------------------------ random-shape server (child mode)

const SHAPES = {
  tinyllama: { num_hidden_layers: 22, hidden_size: 2048, intermediate_size: 5632, num_attention_heads: 32, num_key_value_heads: 4, vocab_size: 32000 },
  tiny: { num_hidden_layers: 2, hidden_size: 64, intermediate_size: 128, num_attention_heads: 4, num_key_value_heads: 2, vocab_size: 1000 },
};

/** A WordPiece tokenizer whose tokens are "w<id>" (0: [UNK], 1: [EOS]); the chat template joins the contents. */
function wordTokenizerFiles(vocabSize) {
  const vocab = { '[UNK]': 0, '[EOS]': 1 };
  for (let i = 2; i < vocabSize; i++) vocab[`w${i}`] = i;
  const special = (id, content) => ({ id, content, single_word: false, lstrip: false, rstrip: false, normalized: false, special: true });
  return {
    'tokenizer.json': { version: '1.0', truncation: null, padding: null, added_tokens: [special(0, '[UNK]'), special(1, '[EOS]')],
      normalizer: null, pre_tokenizer: { type: 'WhitespaceSplit' }, post_processor: null, decoder: { type: 'WordPiece', prefix: '##', cleanup: false },
      model: { type: 'WordPiece', unk_token: '[UNK]', continuing_subword_prefix: '##', max_input_chars_per_word: 100, vocab } },
    'tokenizer_config.json': { eos_token: '[EOS]', unk_token: '[UNK]', chat_template: "{% for m in messages %}{{ m['content'] }} {% endfor %}" },
  };
}

let dumpSeq = 0;
if (V['serve-child']) {
  const nbx = await import('../dist/src/index.js');
  const shape = SHAPES[V.shape];
  if (!shape) throw new Error(`--shape must be one of ${Object.keys(SHAPES).join(', ')}`);
  const device = V.device ?? 'cpu';
  const dtype = V.dtype ?? (device === 'cpu' ? 'float32' : 'bfloat16');
  const config = { model_type: 'llama', architectures: ['LlamaForCausalLM'], max_position_embeddings: 2048, rms_norm_eps: 1e-5, hidden_act: 'silu',
    rope_theta: 10000, tie_word_embeddings: false, eos_token_id: 1, bos_token_id: null, ...shape };
  const t0 = performance.now();
  const model = nbx.models.fromConfig(config, { device, dtype, seed: 0 });
  model.tokenizer = await nbx.models.loadTokenizerFromFiles(wordTokenizerFiles(shape.vocab_size));
  const maxBatch = V['max-batch'] ? Number(V['max-batch']) : undefined;
  // the engine's warm-up on every device (nbx.serve's default skips it on the CPU): the memory check
  const h = await nbx.serve(model, { port: 0, modelName: V.shape, ...(maxBatch ? { maxBatch } : {}), maxQueue: 100000, warmup: true });
  process.stderr.write(`load-serve child: ${V.shape} (${dtype}) on ${device} built in ${(performance.now() - t0).toFixed(0)} ms; ` +
    `max batch ${h.engine.maxBatch}, ${h.engine.kvBlocks} KV blocks of ${h.engine.blockSize}\n`);
  process.stderr.write(`nbx serve: model '${V.shape}' at ${h.url}/v1 (OpenAI API)\n`);
  // exitPromptly: a process that used CUDA ends without the runtime's native teardown (as the nbx CLI does).
  if (V['mem-dump']) {
    // SIGUSR2: the caching allocator's segments into the next file the parent named (its memory readings)
    const { backendFor } = await import('../dist/src/backend/backend.js');
    const { mkdirSync } = await import('node:fs');
    mkdirSync(V['mem-dump'], { recursive: true });
    process.on('SIGUSR2', () => {
      const a = backendFor(model.device).allocator;
      let body;
      try {
        const segs = a?.snapshot?.() ?? [];
        body = { stats: nbx.cuda.memoryStats(), segments: segs.map((g) => ({ ptr: `0x${g.ptr.toString(16)}`, size: g.size, stream: String(g.stream), pool: g.pool,
          allocated: g.blocks.filter((b) => b.allocated).map((b) => b.requested) })) };
      } catch (e) { body = { error: String(e) }; }
      writeFileSync(join(V['mem-dump'], `mem_${dumpSeq++}.json`), `${JSON.stringify(body, (k, v) => (typeof v === 'bigint' ? String(v) : v))}\n`);
    });
  }
  const { exitPromptly } = await import('../dist/src/backend/exit.js');
  const stop = () => { h.close().then(() => { model.dispose(); exitPromptly(0); }); };
  process.on('SIGINT', stop);
  process.on('SIGTERM', stop);
  await new Promise(() => {});
}

// ------------------------------------------------------------------ parameters

const int = (name) => { const n = Number(V[name]); if (!Number.isInteger(n) || n < 0) throw new Error(`--${name} must be an integer >= 0`); return n; };
const range = (name) => {
  const m = /^(\d+)(?::(\d+))?$/.exec(V[name]);
  if (!m) throw new Error(`--${name} must be N or MIN:MAX`);
  const lo = Number(m[1]), hi = Number(m[2] ?? m[1]);
  if (lo < 1 || hi < lo) throw new Error(`--${name}: need 1 <= MIN <= MAX`);
  return [lo, hi];
};
const concurrency = Math.max(1, int('concurrency')), total = int('requests'), singles = int('single');
const cancelShare = Number(V.cancel), temperature = Number(V.temperature);
const [pLo, pHi] = range('prompt'), [oLo, oHi] = range('output');
const deadline = performance.now() + int('timeout-s') * 1000;
const baseSeed = int('seed');

// mulberry32: the same --seed gives the same requests
const mulberry32 = (seed) => { let st = seed >>> 0; return () => { st = (st + 0x6D2B79F5) >>> 0; let t = st; t = Math.imul(t ^ (t >>> 15), t | 1); t ^= t + Math.imul(t ^ (t >>> 7), t | 61); return ((t ^ (t >>> 14)) >>> 0) / 4294967296; }; };
const rand = mulberry32(baseSeed * 2654435761);
const randInt = (lo, hi) => lo + Math.floor(rand() * (hi - lo + 1));

const KJV = ('and the of to that in he shall unto for i his a lord they be is him not them it with all thou thy was god which my me said ' +
  'but ye their have will thee from as are when this out were upon man by you israel king son up there hath then people came had house ' +
  'into on her come one we children s before your also day land men against shall did let went go like even earth heaven light waters ' +
  'beginning created called evening morning firmament seed fruit tree herb creeping living soul image blessed').split(' ');

// ------------------------------------------------------------------ the server

const children = new Set();
process.on('exit', () => { for (const c of children) if (c.exitCode === null) c.kill('SIGINT'); });

/** Starts a server child with this batch size; resolves { url, stop() } once it listens. */
async function startServer(maxBatch) {
  const args = V.shape
    ? [join(here, 'load-serve.mjs'), '--serve-child', '--shape', V.shape, ...(V.device ? ['--device', V.device] : []), ...(V.dtype ? ['--dtype', V.dtype] : []), '--max-batch', String(maxBatch),
      ...(V['mem-dump'] ? ['--mem-dump', V['mem-dump']] : [])]
    : [join(here, '../dist/src/cli/nbx.js'), 'serve', '--port', '0', '--max-queue', '100000', '--max-batch', String(maxBatch), '--warmup', 'on',
      ...(V.model ? ['--model', V.model] : []), ...(V.device ? ['--device', V.device] : []), ...(V.dtype ? ['--dtype', V.dtype] : [])];
  const child = spawn(process.execPath, args, { stdio: ['ignore', 'ignore', 'pipe'] });
  children.add(child);
  let log = '', header = '', stopping = false;
  const url = await new Promise((resolve, reject) => {
    const t = setTimeout(() => reject(new Error(`the server did not start in 300 s:\n${log}`)), 300_000);
    t.unref();
    child.stderr.on('data', (d) => {
      log += d.toString();
      const m = /at (http:\/\/[^\s]+)\/v1 /.exec(log);
      if (m && !header) { header = log; clearTimeout(t); resolve(m[1]); }
    });
    child.on('exit', (code) => reject(new Error(`the server exited (${code}):\n${log}`)));
  });
  child.stderr.removeAllListeners('data');
  // per-request log lines are dropped; anything else the server says (an error) is kept for the report
  child.stderr.on('data', (d) => { for (const l of d.toString().split('\n')) if (l && !/^nbx serve: \d{4}-/.test(l) && !stopping) console.log(`# server: ${l}`); });
  child.on('exit', (code, sig) => { if (!stopping) console.log(`# THE SERVER EXITED during the run (code ${code}, signal ${sig})`); });
  console.log(header.trim().split('\n').map((l) => `# ${l}`).join('\n'));
  let dumps = 0;
  return {
    url,
    /** With --mem-dump: the child's allocator segments now, as DIR/mem_<label>.json (null when none came). */
    async dumpMemory(label) {
      if (!V['mem-dump'] || !V.shape || child.exitCode !== null) return null;
      const { existsSync, readFileSync, renameSync } = await import('node:fs');
      const file = join(V['mem-dump'], `mem_${dumps++}.json`);
      child.kill('SIGUSR2');
      for (let t = 0; t < 100 && !existsSync(file); t++) await new Promise((r) => setTimeout(r, 50));
      if (!existsSync(file)) return null;
      await new Promise((r) => setTimeout(r, 50));
      const named = join(V['mem-dump'], `mem_${label}.json`);
      renameSync(file, named);
      try { return JSON.parse(readFileSync(named, 'utf8')); } catch { return null; }
    },
    /** SIGINT, then wait for the exit (a next server gets the device to itself). */
    async stop() {
      stopping = true;
      if (child.exitCode === null) child.kill('SIGINT');
      await new Promise((resolve) => { if (child.exitCode !== null) resolve(); else { child.on('exit', resolve); setTimeout(resolve, 5_000).unref(); } });
      if (child.exitCode === null) child.kill('SIGKILL');
    },
  };
}

const baselineBatch = V['baseline-max-batch'] === undefined ? null : int('baseline-max-batch');
if (V.url && baselineBatch !== null) throw new Error('--baseline-max-batch starts its own server: not with --url');
let url = V.url, mainServer = null, baselineServer = null;
if (url) {
  const host = new URL(url).hostname;
  if (!['127.0.0.1', 'localhost', '[::1]', '::1'].includes(host)) throw new Error(`--url must be a loopback address (this generator loads only the local machine), got ${host}`);
} else if (baselineBatch !== null) {
  baselineServer = await startServer(baselineBatch);
  url = baselineServer.url;
} else {
  mainServer = await startServer(V['max-batch'] ? int('max-batch') : concurrency);
  url = mainServer.url;
}

const modelId = (await (await fetch(`${url}/v1/models`, { signal: AbortSignal.timeout(30_000) })).json()).data[0].id;
const wordTokenizer = modelId in SHAPES || V.shape !== undefined;
const vocabSize = wordTokenizer ? SHAPES[V.shape ?? modelId]?.vocab_size ?? 1000 : 0;
const promptText = (n) => Array.from({ length: n }, () => (wordTokenizer ? `w${randInt(2, vocabSize - 1)}` : KJV[randInt(0, KJV.length - 1)])).join(' ');

/** /metrics summed by name ({} when the server is gone: the report still comes out). */
async function metrics() {
  let text = '';
  try { text = await (await fetch(`${url}/metrics`, { signal: AbortSignal.timeout(5_000) })).text(); } catch (e) { console.log(`# /metrics unreachable: ${e.cause?.code ?? e.message}`); return {}; }
  const m = {};
  for (const line of text.split('\n')) {
    const r = /^(\w+)(?:\{[^}]*\})?\s+(\S+)$/.exec(line);
    if (r && !line.includes('_bucket')) m[r[1]] = (m[r[1]] ?? 0) + Number(r[2]);
    const b = /^nbx_kv_cache_mapped_bytes\{.*backing="(\w+)"/.exec(line);
    if (b) m.kv_backing = b[1];
    const src = /^nbx_device_memory_reserved_bytes\{.*source="(\w+)"/.exec(line);
    if (src) m.reserved_source = src[1];
  }
  return m;
}

// ------------------------------------------------------------------ one streaming request

/** Streams one chat request, aborted at `until` (ms); resolves { status, text, tokens, ttft, itl[], finish, usage, error }. */
async function run(body, cancelAfter = Infinity, until = deadline) {
  const ac = new AbortController();
  const onDeadline = setTimeout(() => ac.abort(), Math.max(0, until - performance.now()));
  const t0 = performance.now();
  const out = { status: 0, text: '', pieces: 0, ttft: null, itl: [], finish: null, usage: null, error: null, cancelled: false, t0, tEnd: 0 };
  try {
    const res = await fetch(`${url}/v1/chat/completions`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body), signal: ac.signal });
    out.status = res.status;
    if (res.status !== 200) {
      const j = await res.json().catch(() => null);
      out.error = `http_${res.status}${j?.error?.code ? `_${j.error.code}` : ''}`;
      return out;
    }
    const dec = new TextDecoder();
    let buf = '', last = 0, done = false;
    for await (const chunk of res.body) {
      buf += dec.decode(chunk, { stream: true });
      let i;
      while ((i = buf.indexOf('\n\n')) >= 0) {
        const ev = buf.slice(0, i); buf = buf.slice(i + 2);
        if (!ev.startsWith('data: ')) continue;
        const data = ev.slice(6);
        if (data === '[DONE]') { done = true; continue; }
        const j = JSON.parse(data);
        if (j.error) { out.error = `stream_${j.error.code ?? j.error.type}`; continue; }
        if (j.usage) out.usage = j.usage;
        const c = j.choices?.[0];
        if (!c) continue;
        if (c.finish_reason) out.finish = c.finish_reason;
        const piece = c.delta?.content;
        if (piece) {
          const now = performance.now();
          if (out.ttft === null) out.ttft = now - t0; else out.itl.push(now - last);
          last = now;
          out.text += piece;
          out.pieces++;
          if (out.pieces >= cancelAfter) { out.cancelled = true; ac.abort(); break; }
        }
      }
      if (out.cancelled) break;
    }
    if (!done && !out.cancelled && !out.error) out.error = 'stream_ended_without_done';
  } catch (e) {
    if (out.cancelled) { /* our own abort */ } else if (ac.signal.aborted) out.error = 'deadline';
    else out.error = `network_${e.cause?.code ?? e.name}`;
  } finally {
    clearTimeout(onDeadline);
    out.tEnd = performance.now();
  }
  return out;
}

const pct = (xs, p) => { if (!xs.length) return NaN; const s = [...xs].sort((a, b) => a - b); return s[Math.min(s.length - 1, Math.max(0, Math.ceil((p / 100) * s.length) - 1))]; };
const f1 = (x) => (Number.isFinite(x) ? x.toFixed(1) : 'n/a');
const MiB = 2 ** 20;

function makeBody(i, outTokens, promptWords) {
  const b = { model: modelId, messages: [{ role: 'user', content: promptText(promptWords) }], max_tokens: outTokens, stream: true,
    stream_options: { include_usage: true }, seed: baseSeed * 100003 + i };
  if (temperature === 0) b.temperature = 0; else { b.temperature = temperature; b.top_p = 0.95; }
  return b;
}

// ------------------------------------------------------------------ 1. warm-up, 2. single stream

const report = { date: new Date().toISOString(), host: hostname(), cpu: `${cpus()[0]?.model} x${cpus().length}`, url, model: modelId,
  device: V.device ?? (V.url ? 'server' : 'default'), concurrency, requests: total, cancel_share: cancelShare, prompt_words: [pLo, pHi], output_tokens: [oLo, oHi], temperature };

/**
 * Warm-up, then --single streams alone. The warm-up's burst fills the KV cache's pools to the load's
 * peak (they grow as blocks are first written and never shrink): `burst` requests at once, each with a
 * prompt as long as the longest prompt and output together and 2 new tokens; then one long stream. Both
 * are discarded.
 */
async function measureSingle(label, burst) {
  await Promise.all(Array.from({ length: burst }, (_, i) => run(makeBody(-1000 - i, 2, pHi + oHi))));
  await run(makeBody(-2000, oHi, Math.round((pLo + pHi) / 2)));
  const single = [];
  for (let i = 0; i < singles; i++) single.push(await run(makeBody(-1 - i, oHi, Math.round((pLo + pHi) / 2))));
  const ok = single.filter((r) => !r.error && r.usage);
  const rate = ok.length ? ok.reduce((a, r) => a + (r.usage.completion_tokens - 1), 0) / ok.reduce((a, r) => a + (r.tEnd - r.t0 - r.ttft) / 1000, 0) : NaN;
  const itl = ok.flatMap((r) => r.itl);
  const out = { runs: singles, ok: ok.length, decode_tok_s: rate, ttft_ms_p50: pct(ok.map((r) => r.ttft), 50), itl_ms_p50: pct(itl, 50), itl_ms_p99: pct(itl, 99) };
  console.log(`single stream, ${label} (${ok.length}/${singles} ok, ${oHi} tokens): ${f1(rate)} tok/s decode; TTFT p50 ${f1(out.ttft_ms_p50)} ms; ITL p50 ${f1(out.itl_ms_p50)} ms, p99 ${f1(out.itl_ms_p99)} ms`);
  return out;
}

if (baselineServer) {
  report.single_baseline = { max_batch: baselineBatch, ...(await measureSingle(`on a server with --max-batch ${baselineBatch}`, 2)) };
  await baselineServer.stop();
  mainServer = await startServer(V['max-batch'] ? int('max-batch') : concurrency);
  url = report.url = mainServer.url;
}
// memory as the server listens: after the engine's warm-up, before any request
const memOf = (m) => ({ reserved_mib: m.nbx_device_memory_reserved_bytes / MiB, kv_mapped_mib: (m.nbx_kv_cache_mapped_bytes ?? NaN) / MiB, kv_backing: m.kv_backing ?? null, reserved_source: m.reserved_source ?? null,
  reserved_bytes: m.nbx_device_memory_reserved_bytes, kv_mapped_bytes: m.nbx_kv_cache_mapped_bytes ?? null });
report.start = memOf(await metrics());
const dumps = { start: await mainServer?.dumpMemory('start') };
report.single = await measureSingle('on the load\'s server', concurrency);
// the ratio's baseline: the faster single-stream figure (a batch-1 server need not pad its steps)
const singleRate = Math.max(report.single.decode_tok_s, report.single_baseline?.decode_tok_s ?? 0);
const singleItlP99 = report.single_baseline && report.single_baseline.decode_tok_s > report.single.decode_tok_s ? report.single_baseline.itl_ms_p99 : report.single.itl_ms_p99;

const before = await metrics();
dumps.warm = await mainServer?.dumpMemory('warm');
report.before = { ...memOf(before), kv_blocks_used: before.nbx_kv_blocks_used, running: before.nbx_requests_running, waiting: before.nbx_requests_waiting };

// ------------------------------------------------------------------ 3. load

const plan = Array.from({ length: total }, (_, i) => {
  const out = randInt(oLo, oHi);
  const cancel = rand() < cancelShare;
  return { i, body: makeBody(i, out, randInt(pLo, pHi)), cancelAfter: cancel ? randInt(1, Math.max(1, Math.floor(out / 2))) : Infinity };
});
const results = new Array(total);
let next = 0;
const tLoad = performance.now();
let maxRunning = 0;
const sampler = setInterval(() => { metrics().then((m) => { maxRunning = Math.max(maxRunning, m.nbx_requests_running ?? 0); }, () => {}); }, 500);
await Promise.all(Array.from({ length: concurrency }, async () => {
  while (next < total && performance.now() < deadline) {
    const p = plan[next++];
    results[p.i] = { ...(await run(p.body, p.cancelAfter)), plan: p };
  }
}));
clearInterval(sampler);
const loadS = (performance.now() - tLoad) / 1000;
const done = results.filter(Boolean);
const completed = done.filter((r) => !r.error && !r.cancelled);
const cancelled = done.filter((r) => r.cancelled);
const errors = {};
for (const r of done) if (r.error) errors[r.error] = (errors[r.error] ?? 0) + 1;
// tokens delivered: usage for completed requests, streamed pieces for cancelled ones (a lower bound)
const tokens = completed.reduce((a, r) => a + (r.usage?.completion_tokens ?? r.pieces), 0) + cancelled.reduce((a, r) => a + r.pieces, 0);
const ttfts = done.filter((r) => r.ttft !== null).map((r) => r.ttft);
const itls = done.flatMap((r) => r.itl);
report.load = {
  seconds: loadS, sent: done.length, completed: completed.length, cancelled: cancelled.length, errors, tokens,
  aggregate_tok_s: tokens / loadS, ttft_ms_p50: pct(ttfts, 50), ttft_ms_p99: pct(ttfts, 99), itl_ms_p50: pct(itls, 50), itl_ms_p99: pct(itls, 99),
  max_running_seen: maxRunning,
  finish: { stop: completed.filter((r) => r.finish === 'stop').length, length: completed.filter((r) => r.finish === 'length').length },
};
report.ratio = report.load.aggregate_tok_s / singleRate;
report.single_rate_for_ratio = singleRate;
report.itl_p99_vs_single = report.load.itl_ms_p99 / singleItlP99;

// ------------------------------------------------------------------ 4. memory after

await new Promise((r) => setTimeout(r, 200));
const afterM = await metrics();
dumps.after = await mainServer?.dumpMemory('after');
report.after = { ...memOf(afterM), kv_blocks_used: afterM.nbx_kv_blocks_used, running: afterM.nbx_requests_running, waiting: afterM.nbx_requests_waiting, engine_steps: afterM.nbx_engine_steps_total };

// ------------------------------------------------------------------ 5. verify: alone, same seed, same text

// A random sample (its own generator: the load's requests do not change with --verify), cut to what the
// single stream on this server says fits in 80% of the verification's budget: each request's time alone
// estimated as twice the single stream's TTFT p50 plus its tokens at the single stream's decode rate.
const verifyBudgetMs = int('verify-timeout-s') * 1000;
const planned = V.verify === 'all' ? completed.length : Math.min(completed.length, int('verify'));
const vRand = mulberry32(baseSeed ^ 0x5bd1e995);
const order = [...completed].sort((a, b) => a.plan.i - b.plan.i);
for (let k = order.length - 1; k > 0; k--) { const j = Math.floor(vRand() * (k + 1)); [order[k], order[j]] = [order[j], order[k]]; }
const ttftMs = Number.isFinite(report.single.ttft_ms_p50) ? 2 * report.single.ttft_ms_p50 : 1000;
const msPerToken = report.single.decode_tok_s > 0 ? 1000 / report.single.decode_tok_s : 1000;
const estMs = (r) => ttftMs + (r.usage?.completion_tokens ?? r.pieces) * msPerToken;
const sample = [];
let estimate = 0;
for (const r of order.slice(0, planned)) {
  if (estimate + estMs(r) > 0.8 * verifyBudgetMs) break;
  sample.push(r); estimate += estMs(r);
}
sample.sort((a, b) => a.plan.i - b.plan.i);
const tVerify = performance.now(), verifyUntil = tVerify + verifyBudgetMs;
let same = 0;
const mismatches = [];
for (const r of sample) {
  const alone = await run(r.plan.body, Infinity, verifyUntil);
  if (!alone.error && alone.text === r.text) same++;
  else {
    let k = 0;
    while (k < Math.min(alone.text.length, r.text.length) && alone.text[k] === r.text[k]) k++;
    mismatches.push({ i: r.plan.i, error: alone.error, batched_len: r.text.length, alone_len: alone.text.length, first_difference_at_char: k });
  }
}
report.verify = { completed: completed.length, asked: planned, sample: sample.length, estimate_s: estimate / 1000, budget_s: verifyBudgetMs / 1000,
  seconds: (performance.now() - tVerify) / 1000, checked: same + mismatches.length, identical: same, mismatches: mismatches.slice(0, 10) };
const endM = await metrics();
dumps.end = await mainServer?.dumpMemory('end');
report.end = { ...memOf(endM), kv_blocks_used: endM.nbx_kv_blocks_used };
report.loadavg = loadavg().map((x) => Number(x.toFixed(2)));
await mainServer?.stop();

// ------------------------------------------------------------------ report

const L = report.load;
console.log(`load: ${L.sent} requests (${concurrency} concurrent) in ${L.seconds.toFixed(1)} s: ${L.completed} completed (${L.finish.length} length, ${L.finish.stop} stop), ` +
  `${L.cancelled} cancelled mid-stream, errors ${JSON.stringify(errors)}`);
console.log(`  aggregate ${f1(L.aggregate_tok_s)} tok/s (${L.tokens} tokens) = ${report.ratio.toFixed(2)}x single-stream; largest running batch seen ${L.max_running_seen}`);
console.log(`  TTFT p50 ${f1(L.ttft_ms_p50)} ms, p99 ${f1(L.ttft_ms_p99)} ms; ITL p50 ${f1(L.itl_ms_p50)} ms, p99 ${f1(L.itl_ms_p99)} ms (${report.itl_p99_vs_single.toFixed(2)}x single-stream p99)`);
// Memory: at the warm level after the load and after the verification, to the byte. The allocator's
// figure on a device; on the CPU it is the process's RSS (the JavaScript heap moves it), so only the KV
// cache counts there. A KV cache on CUDA's virtual memory API is outside the allocator: both are given.
const rss = report.before.reserved_source === 'rss';
const vmm = report.before.kv_backing === 'vmm';
const same2 = (a, b) => a === b || (a == null && b == null);
const memOk = (m) => same2(m.kv_mapped_bytes, report.before.kv_mapped_bytes) && (rss || same2(m.reserved_bytes, report.before.reserved_bytes));
report.memory_pass = memOk(report.after) && memOk(report.end);
const delta = (a, b) => { const d = b - a; return `${d >= 0 ? '+' : ''}${f1(d)}`; };
const memLine = (label, m) => `    ${label.padEnd(40)} ${rss ? 'process RSS' : 'allocator reserved'} ${f1(m.reserved_mib).padStart(9)} MiB (${delta(report.before.reserved_mib, m.reserved_mib)}), ` +
  `KV cache mapped ${f1(m.kv_mapped_mib).padStart(8)} MiB (${delta(report.before.kv_mapped_mib, m.kv_mapped_mib)})` + (vmm && !rss ? `, together ${f1(m.reserved_mib + m.kv_mapped_mib)} MiB` : '');
console.log(`  memory (${rss ? 'the CPU: RSS only reported' : 'device'}; KV cache ${report.before.kv_backing ?? 'n/a'}${vmm ? ': mapped outside the allocator' : report.before.kv_backing === 'plain' && !rss ? ': inside the allocator\'s figure' : ''}; +/- against the warm level):`);
console.log(memLine('at start (after the engine\'s warm-up)', report.start));
console.log(memLine('warm (before the load)', report.before));
console.log(memLine('after the load', report.after));
console.log(memLine('after the verification', report.end));
console.log(`  memory after the load and the verification == warm (${rss ? 'KV cache' : 'allocator reserved and KV cache mapped'}, to the byte): ${report.memory_pass ? 'PASS' : 'FAIL'}; ` +
  `after: running ${report.after.running}, waiting ${report.after.waiting}, KV blocks used ${report.after.kv_blocks_used}; load average ${report.loadavg.join(' ')} (${report.cpu})`);
if (!report.memory_pass && dumps.warm?.segments) {
  // what moved: the allocator's segments that are not in the warm level's snapshot, and those gone
  const seg = (g) => `${g.ptr} ${f1(g.size / MiB)} MiB ${g.pool} stream/pool ${g.stream}, allocated [${g.allocated.slice(0, 6).join(', ')}${g.allocated.length > 6 ? ', ...' : ''}]`;
  for (const label of ['after', 'end']) {
    const d = dumps[label];
    if (!d?.segments) continue;
    const had = new Set(dumps.warm.segments.map((g) => g.ptr)), has = new Set(d.segments.map((g) => g.ptr));
    const added = d.segments.filter((g) => !had.has(g.ptr)), gone = dumps.warm.segments.filter((g) => !has.has(g.ptr));
    console.log(`  allocator segments ${label} vs warm: ${added.length} new, ${gone.length} gone`);
    for (const g of added.slice(0, 8)) console.log(`    + ${seg(g)}`);
    for (const g of gone.slice(0, 8)) console.log(`    - ${seg(g)}`);
  }
}
const Vf = report.verify;
console.log(`verify: ${same}/${Vf.checked} requests give the same text alone (same seed): a random sample of ${Vf.sample} of the ${Vf.completed} completed` +
  `${Vf.sample < Vf.asked ? ` (${Vf.asked} asked, cut to the ${Vf.budget_s} s budget by the single-stream estimate)` : ''}, ${Vf.checked === Vf.sample ? 'all' : `${Vf.checked} of them`} run in ${Vf.seconds.toFixed(1)} s ` +
  `(estimate ${Vf.estimate_s.toFixed(1)} s, budget ${Vf.budget_s} s)${mismatches.length ? `; first mismatches ${JSON.stringify(mismatches.slice(0, 3))}` : ''}`);
if (V.json) writeFileSync(V.json, `${JSON.stringify(report, null, 1)}\n`);
const ok = report.after.running === 0 && report.after.waiting === 0 && report.after.kv_blocks_used === 0 && mismatches.length === 0 && report.memory_pass &&
  Vf.checked === Vf.sample && Object.keys(errors).length === 0;
console.log(ok ? 'load-serve: OK' : 'load-serve: PROBLEMS (see above)');
process.exitCode = ok ? 0 : 1;
