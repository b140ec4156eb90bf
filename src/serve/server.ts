// `nbx.serve(model, options)`: an OpenAI-compatible HTTP server on Node's own `http` module, in front
// of the continuous-batching Engine (src/generation/engine.ts). Each generation request is checked
// against OpenAI's schema (protocol.ts), tokenized (chat through the model's chat template), checked
// against the context, and submitted to the engine; its stream goes out as server-sent events or one
// JSON body. Every failure is answered in OpenAI's error shape and the server goes on: a bad request
// costs only its own answer. A client that goes away cancels its engine stream at once, which frees
// its sequence and KV blocks.

import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { randomUUID, timingSafeEqual } from 'node:crypto';
import * as nbx from '../index.js';
import { Engine, type EngineOptions, type EngineRequest, type EngineResult, type EngineStream } from '../generation/engine.js';
import type { CausalLMModel } from '../models/causal_lm.js';
import { KVCacheFullError, NbxError, QueueFullError, ValueError } from '../errors.js';
import { ApiError, badRequest, parseChatRequest, parseCompletionRequest, type ParsedRequest } from './protocol.js';
import { ServerMetrics } from './metrics.js';

const OP = 'nbx serve';

export interface ServeOptions extends EngineOptions {
  /** Interface to bind (default 127.0.0.1: the loopback only). */
  host?: string;
  /** Port (default 8000; 0 picks a free one, see the handle's port). */
  port?: number;
  /** When set, /v1/* requests need `Authorization: Bearer <apiKey>` (else 401). */
  apiKey?: string | null;
  /** The model's id in /v1/models and in responses; requests must name it (default: the config's model_type). */
  modelName?: string;
  /** Serve through this engine instead of making one (close() then leaves it open). */
  engine?: Engine;
  /** One line per request; default: stderr. false: no log. */
  log?: ((line: string) => void) | false;
  /** Largest request body accepted (bytes, default 16 MiB; larger: 413). */
  maxBodyBytes?: number;
  /**
   * Engine.warmup() before listening: the KV cache backed for all its blocks (or `kvBlocks`) and every
   * step shape run and recorded, so that the memory the server holds once it listens is what it holds
   * under any load. Default: on for an engine it makes, off the CPU (whose steps are not recorded and
   * whose KV pools grow by copying, in the process's own memory).
   */
  warmup?: boolean | { kvBlocks?: number };
}

export interface ServeHandle {
  /** http://host:port */
  readonly url: string;
  readonly port: number;
  readonly host: string;
  readonly engine: Engine;
  readonly metrics: ServerMetrics;
  /** Stops listening, cancels the requests in flight, closes the engine it made. */
  close(): Promise<void>;
}

/** One generation request between arrival and its last byte. */
interface Flight { abort: AbortController; done: boolean }

export async function serve(model: CausalLMModel, opts: ServeOptions = {}): Promise<ServeHandle> {
  const host = opts.host ?? '127.0.0.1';
  const port = opts.port ?? 8000;
  if (!Number.isInteger(port) || port < 0 || port > 65535) throw new ValueError(OP, `port must be an integer in 0..65535, got ${String(port)}`);
  if (!model.tokenizer) throw new ValueError(OP, 'the model has no tokenizer: the server needs it to read prompts and write text');
  const apiKey = opts.apiKey ?? null;
  if (apiKey !== null && (typeof apiKey !== 'string' || apiKey.length === 0)) throw new ValueError(OP, 'apiKey must be a non-empty string');
  const modelName = opts.modelName ?? String(model.config.model_type);
  const log = opts.log === false ? null : opts.log ?? ((line: string) => process.stderr.write(`${line}\n`));
  const maxBody = opts.maxBodyBytes ?? 16 * 2 ** 20;
  const ownEngine = opts.engine === undefined;
  const engine = opts.engine ?? new Engine(model, {
    ...(opts.maxBatch !== undefined ? { maxBatch: opts.maxBatch } : {}), ...(opts.maxQueue !== undefined ? { maxQueue: opts.maxQueue } : {}),
    ...(opts.kvBlocks !== undefined ? { kvBlocks: opts.kvBlocks } : {}), ...(opts.blockSize !== undefined ? { blockSize: opts.blockSize } : {}),
  });
  const warm = opts.warmup ?? (ownEngine && model.device.type !== 'cpu');
  if (warm !== false) {
    try {
      const w = await engine.warmup(typeof warm === 'object' ? warm : {});
      log?.(`${OP}: warm-up: KV cache ${w.kvBlocks} blocks (${(w.kvMappedBytes / 2 ** 20).toFixed(1)} MiB), ${w.shapes} step shapes run, ${w.recorded} recorded, ${w.ms.toFixed(0)} ms`);
    } catch (e) {
      if (ownEngine) await engine.close();
      throw e;
    }
  }
  const metrics = new ServerMetrics();
  const flights = new Set<Flight>();
  const created = Math.floor(Date.now() / 1000);
  const context = typeof model.config.max_position_embeddings === 'number' ? model.config.max_position_embeddings : Infinity;
  const tokenizer = model.tokenizer;

  const reserved = (): { bytes: number; source: 'allocator' | 'rss' } => {
    const t = model.device.type;
    try {
      if (t === 'cuda') return { bytes: nbx.cuda.memoryStats().reservedBytes, source: 'allocator' };
      if (t === 'webgpu') return { bytes: nbx.webgpu.memoryStats().reservedBytes, source: 'allocator' };
    } catch { /* the backend went away: report the process instead */ }
    return { bytes: process.memoryUsage().rss, source: 'rss' };
  };

  /** The engine's paged-cache memory when it reports it (not part of the serving interface: read if present). */
  const kvMemory = (): { backing: string; reservedBytes: number; mappedBytes: number } | null => {
    const f = (engine as unknown as { kvMemory?: () => { backing: string; reservedBytes: number; mappedBytes: number } }).kvMemory;
    try { return typeof f === 'function' ? f.call(engine) : null; } catch { return null; }
  };

  // ---------------------------------------------------------------- plumbing

  const sendJson = (res: ServerResponse, status: number, body: unknown, headers: Record<string, string> = {}): void => {
    const text = JSON.stringify(body);
    res.writeHead(status, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(text), ...headers });
    res.end(text);
  };

  const sendError = (res: ServerResponse, e: ApiError): void => {
    if (res.headersSent) { if (!res.writableEnded) res.end(); return; }
    sendJson(res, e.status, e.body(), e.headers);
  };

  const shuttingDown = (): ApiError => new ApiError(503, 'the request was cancelled: the server is shutting down', 'server_error', null, 'server_shutting_down');

  /** An error from anywhere below as the API error to answer with (500 for a bug, without its stack). */
  const toApiError = (e: unknown): ApiError => {
    if (e instanceof ApiError) return e;
    if (e instanceof QueueFullError) return new ApiError(429, e.message.replace(/^Engine: /, ''), 'rate_limit_error', null, 'queue_full', { 'retry-after': '1' });
    // The engine makes a request wait for free blocks; it refuses one that needs more than the cache
    // has in all (503 without Retry-After: retrying cannot help) or, should it, more than is free now.
    if (e instanceof KVCacheFullError) return new ApiError(503, e.message.replace(/^Engine: /, ''), 'server_error', null, 'kv_cache_full', e.needed > e.total ? {} : { 'retry-after': '1' });
    if (e instanceof ValueError) return badRequest(e.message.replace(/^\w+: /, ''));
    const msg = e instanceof NbxError ? e.message : `internal error: ${e instanceof Error ? `${e.name}: ${e.message}` : String(e)}`;
    return new ApiError(500, msg, 'server_error', null, 'internal_error');
  };

  const readBody = (req: IncomingMessage): Promise<string> => new Promise((resolve, reject) => {
    const declared = Number(req.headers['content-length']);
    if (Number.isFinite(declared) && declared > maxBody) { reject(new ApiError(413, `the request body (${declared} bytes) is over the limit of ${maxBody} bytes`, 'invalid_request_error', null, 'request_too_large')); return; }
    const chunks: Buffer[] = [];
    let size = 0, over = false;
    req.on('data', (c: Buffer) => {
      size += c.length;
      if (size > maxBody) { over = true; chunks.length = 0; return; }
      if (!over) chunks.push(c);
    });
    req.on('end', () => (over ? reject(new ApiError(413, `the request body is over the limit of ${maxBody} bytes`, 'invalid_request_error', null, 'request_too_large')) : resolve(Buffer.concat(chunks).toString('utf8'))));
    req.on('error', reject);
    // A client that goes away before sending the whole body: nobody is left to answer.
    req.on('close', () => { if (!req.complete) reject(new ApiError(400, 'the client closed the connection before sending the whole request body', 'invalid_request_error', null, 'incomplete_body')); });
  });

  const authorized = (req: IncomingMessage): boolean => {
    if (apiKey === null) return true;
    const h = req.headers.authorization;
    const m = typeof h === 'string' ? /^Bearer\s+(.+)$/i.exec(h.trim()) : null;
    if (!m) return false;
    const a = Buffer.from(m[1]!), b = Buffer.from(apiKey);
    return a.length === b.length && timingSafeEqual(a, b);
  };

  // ---------------------------------------------------------------- generation

  /** Prompt ids of a parsed request, and the max_tokens it gets; 400 for a prompt over the context. */
  const promptOf = (p: ParsedRequest): { ids: number[]; maxTokens: number } => {
    let ids: number[];
    if (p.kind === 'chat') {
      try {
        ids = tokenizer.apply_chat_template(p.messages!, { add_generation_prompt: true }) as number[];
      } catch (e) {
        throw badRequest(`the chat template could not be applied to these messages: ${(e as Error).message}`, 'messages', 'invalid_messages');
      }
    } else if (typeof p.prompt === 'string') {
      if (p.prompt.length === 0) throw badRequest("Invalid 'prompt': empty string.", 'prompt', 'invalid_value');
      ids = tokenizer.encode(p.prompt);
    } else {
      const vocab = model.config.vocab_size;
      const bad = p.prompt!.find((t) => t >= vocab);
      if (bad !== undefined) throw badRequest(`Invalid 'prompt': token id ${bad} is outside the vocabulary (0..${vocab - 1}).`, 'prompt', 'invalid_value');
      ids = p.prompt!.slice();
    }
    if (ids.length === 0) throw badRequest('the prompt is empty after tokenization', p.kind === 'chat' ? 'messages' : 'prompt', 'invalid_value');
    const room = context - ids.length;
    const param = p.kind === 'chat' ? 'messages' : 'prompt';
    if (room < 1) {
      throw badRequest(`This model's maximum context length is ${context} tokens. However, your ${p.kind === 'chat' ? 'messages resulted in' : 'prompt has'} ${ids.length} tokens, which leaves no room for the completion. Please reduce the length of the ${param}.`, param, 'context_length_exceeded');
    }
    let maxTokens: number;
    if (p.max_tokens !== null) {
      if (p.max_tokens > room) {
        throw badRequest(`This model's maximum context length is ${context} tokens. However, you requested ${ids.length + p.max_tokens} tokens (${ids.length} in the ${param}, ${p.max_tokens} in the completion). Please reduce the length of the ${param} or the completion.`, 'max_tokens', 'context_length_exceeded');
      }
      maxTokens = p.max_tokens;
    } else {
      // OpenAI's defaults: 16 tokens for the legacy completions endpoint, the rest of the context for chat.
      maxTokens = p.kind === 'completion' ? Math.min(16, room) : room;
    }
    return { ids, maxTokens };
  };

  const handleGeneration = async (req: IncomingMessage, res: ServerResponse, kind: 'chat' | 'completion', t0: number, note: (s: string) => void): Promise<void> => {
    const raw = await readBody(req);
    let body: unknown;
    try { body = JSON.parse(raw); } catch (e) {
      throw badRequest(`We could not parse the JSON body of your request. (${(e as Error).message})`, null, 'invalid_json');
    }
    const p = kind === 'chat' ? parseChatRequest(body) : parseCompletionRequest(body);
    if (p.model !== modelName) throw new ApiError(404, `The model \`${p.model}\` does not exist or you do not have access to it (this server serves '${modelName}').`, 'invalid_request_error', 'model', 'model_not_found');
    const { ids, maxTokens } = promptOf(p);
    const flight: Flight = { abort: new AbortController(), done: false };
    const ereq: EngineRequest = {
      prompt: ids, max_new_tokens: maxTokens, stop: p.stop, signal: flight.abort.signal,
      ...(p.temperature !== undefined ? { temperature: p.temperature } : {}),
      ...(p.top_p !== undefined ? { top_p: p.top_p } : {}),
      ...(p.top_k !== undefined ? { top_k: p.top_k } : {}),
      ...(p.seed !== undefined ? { seed: p.seed } : {}),
    };
    // top_p 0 is OpenAI's way of asking for the single most likely token: greedy.
    if (p.top_p === 0) { ereq.temperature = 0; delete ereq.top_p; }
    const stream: EngineStream = engine.submit(ereq);
    let tPrev = 0, n = 0;
    flights.add(flight);
    metrics.promptTokens += ids.length;
    // The client going away (closed socket, aborted request) cancels the sequence at once.
    const gone = (): void => {
      if (flight.done) return;
      note(`cancelled: the client went away after ${n} tokens (prompt ${ids.length})`);
      flight.abort.abort();
      stream.cancel();
    };
    res.on('close', gone);
    if (res.destroyed || req.socket.destroyed) gone();
    const id = `${kind === 'chat' ? 'chatcmpl' : 'cmpl'}-${randomUUID().replace(/-/g, '')}`;
    const createdAt = Math.floor(Date.now() / 1000);
    const object = kind === 'chat' ? 'chat.completion' : 'text_completion';

    const onToken = (): void => {
      const now = performance.now();
      if (n === 0) metrics.ttft.observe((now - t0) / 1000);
      else metrics.itl.observe((now - tPrev) / 1000);
      tPrev = now;
      n++;
      metrics.completionTokens++;
      metrics.tokenOut(now);
    };
    const usageOf = (r: EngineResult): { prompt_tokens: number; completion_tokens: number; total_tokens: number } =>
      ({ prompt_tokens: r.prompt_tokens, completion_tokens: r.completion_tokens, total_tokens: r.prompt_tokens + r.completion_tokens });
    const finishOf = (r: EngineResult): 'stop' | 'length' => (r.finish_reason === 'length' ? 'length' : 'stop');
    try {
      if (!p.stream) {
        for await (const _ of stream) onToken();
        const r = await stream.result;
        // Cancelled with the client still there: the engine or the server is closing.
        if (r.finish_reason === 'cancelled') { if (!res.destroyed) throw shuttingDown(); return; }
        note(`prompt=${r.prompt_tokens} completion=${r.completion_tokens} finish=${r.finish_reason}`);
        const choice = kind === 'chat'
          ? { index: 0, message: { role: 'assistant', content: r.text, refusal: null }, logprobs: null, finish_reason: finishOf(r) }
          : { index: 0, text: r.text, logprobs: null, finish_reason: finishOf(r) };
        sendJson(res, 200, { id, object, created: createdAt, model: modelName, system_fingerprint: null, choices: [choice], usage: usageOf(r) });
        return;
      }
      res.writeHead(200, { 'content-type': 'text/event-stream; charset=utf-8', 'cache-control': 'no-cache', connection: 'keep-alive', 'x-accel-buffering': 'no' });
      res.flushHeaders();
      const chunkObject = kind === 'chat' ? 'chat.completion.chunk' : 'text_completion';
      const usageField = p.include_usage ? { usage: null } : {};
      const send = (choices: unknown[], extra: Record<string, unknown> = usageField): void => {
        if (!res.writableEnded && !res.destroyed) res.write(`data: ${JSON.stringify({ id, object: chunkObject, created: createdAt, model: modelName, system_fingerprint: null, choices, ...extra })}\n\n`);
      };
      const piece = (text: string, finish: string | null): unknown => (kind === 'chat'
        ? { index: 0, delta: finish === null ? { content: text } : {}, logprobs: null, finish_reason: finish }
        : { index: 0, text, logprobs: null, finish_reason: finish });
      // OpenAI's chat stream opens with the role.
      if (kind === 'chat') send([{ index: 0, delta: { role: 'assistant', content: '' }, logprobs: null, finish_reason: null }]);
      try {
        for await (const ev of stream) {
          onToken();
          if (ev.text) send([piece(ev.text, null)]);
        }
        const r = await stream.result;
        if (r.finish_reason === 'cancelled') { if (!res.destroyed) throw shuttingDown(); return; }
        note(`prompt=${r.prompt_tokens} completion=${r.completion_tokens} finish=${r.finish_reason} stream`);
        send([piece('', finishOf(r))]);
        if (p.include_usage) send([], { usage: usageOf(r) });
      } catch (e) {
        // Headers are out: the error goes as an event (as vLLM does), then the stream ends normally.
        const ae = toApiError(e);
        note(`error ${ae.status} in stream: ${ae.body().error.message}`);
        if (!res.writableEnded && !res.destroyed) res.write(`data: ${JSON.stringify(ae.body())}\n\n`);
      }
      if (!res.writableEnded && !res.destroyed) res.end('data: [DONE]\n\n');
    } finally {
      flight.done = true;
      flights.delete(flight);
    }
  };

  // ---------------------------------------------------------------- routing

  const route = async (req: IncomingMessage, res: ServerResponse, path: string, t0: number, note: (s: string) => void): Promise<string> => {
    const method = req.method ?? 'GET';
    const allow = (m: string): void => {
      if (method !== m) throw new ApiError(405, `Method ${method} is not allowed on ${path}; use ${m}.`, 'invalid_request_error', null, 'method_not_allowed', { allow: m });
    };
    if (path === '/health') {
      allow('GET');
      sendJson(res, 200, { status: 'ok' });
      return 'health';
    }
    if (path === '/metrics') {
      allow('GET');
      const s = engine.stats(), mem = reserved();
      const text = metrics.render({
        running: s.running, waiting: s.waiting, kv_blocks_used: s.kv_blocks_used, kv_blocks_total: s.kv_blocks_total,
        engine_steps: s.steps, in_flight: flights.size, reserved_bytes: mem.bytes, reserved_source: mem.source, kv_cache: kvMemory(),
      }, modelName);
      res.writeHead(200, { 'content-type': 'text/plain; version=0.0.4; charset=utf-8', 'content-length': Buffer.byteLength(text) });
      res.end(text);
      return 'metrics';
    }
    if (!path.startsWith('/v1/')) throw new ApiError(404, `Unknown request URL: ${method} ${path}.`, 'invalid_request_error', null, 'unknown_url');
    if (!authorized(req)) {
      throw new ApiError(401, req.headers.authorization ? 'Incorrect API key provided.' : "You didn't provide an API key. Send it as 'Authorization: Bearer YOUR_KEY'.", 'invalid_request_error', null, 'invalid_api_key', { 'www-authenticate': 'Bearer' });
    }
    const card = { id: modelName, object: 'model', created, owned_by: 'nbxtensor', max_model_len: Number.isFinite(context) ? context : null };
    if (path === '/v1/models') {
      allow('GET');
      sendJson(res, 200, { object: 'list', data: [card] });
      return 'models';
    }
    if (path.startsWith('/v1/models/')) {
      allow('GET');
      const name = decodeURIComponent(path.slice('/v1/models/'.length));
      if (name !== modelName) throw new ApiError(404, `The model '${name}' does not exist`, 'invalid_request_error', 'model', 'model_not_found');
      sendJson(res, 200, card);
      return 'models';
    }
    if (path === '/v1/chat/completions' || path === '/v1/completions') {
      const ep = path === '/v1/chat/completions' ? 'chat' : 'completions';
      allow('POST');
      await handleGeneration(req, res, ep === 'chat' ? 'chat' : 'completion', t0, note);
      return ep;
    }
    throw new ApiError(404, `Unknown request URL: ${method} ${path}.`, 'invalid_request_error', null, 'unknown_url');
  };

  const server: Server = createServer((req, res) => {
    const t0 = performance.now();
    const path = (req.url ?? '/').split('?')[0]!;
    let endpoint = path.startsWith('/v1/chat') ? 'chat' : path.startsWith('/v1/completions') ? 'completions' : path.startsWith('/v1/models') ? 'models' : path === '/health' ? 'health' : path === '/metrics' ? 'metrics' : 'other';
    let detail = '';
    const note = (s: string): void => { detail = s; };
    const remote = req.socket.remoteAddress ?? '-';
    // After the other 'close' listeners (a generation's own says why it ended).
    res.on('close', () => process.nextTick(() => {
      const status = res.headersSent ? res.statusCode : 499;  // 499: the client closed before an answer (nginx's code)
      const cut = !res.writableFinished && !detail.startsWith('cancelled') ? ' (the client went away)' : '';
      metrics.request(endpoint, status);
      if (endpoint === 'chat' || endpoint === 'completions') metrics.e2e.observe((performance.now() - t0) / 1000);
      log?.(`${OP}: ${new Date().toISOString()} ${remote} ${req.method} ${path} ${status} ${(performance.now() - t0).toFixed(0)}ms${detail ? ` ${detail}` : ''}${cut}`);
    }));
    route(req, res, path, t0, note).then((ep) => { endpoint = ep; }, (e: unknown) => {
      const ae = toApiError(e);
      if (ae.status >= 500 && !(e instanceof KVCacheFullError)) note(`error: ${ae.body().error.message}${process.env.NBX_DEBUG === '1' && e instanceof Error ? `\n${e.stack}` : ''}`);
      else note(`error: ${ae.body().error.message}`);
      sendError(res, ae);
      // A body not read yet (an error before reading it) is drained so the connection stays usable.
      if (!req.complete) req.resume();
    });
  });
  // A malformed request line or headers: answer 400 and drop that connection only.
  server.on('clientError', (err: NodeJS.ErrnoException, socket) => {
    if (socket.writable && err.code !== 'ECONNRESET') {
      const text = JSON.stringify(badRequest(`malformed HTTP request: ${err.code ?? err.message}`).body());
      socket.end(`HTTP/1.1 400 Bad Request\r\ncontent-type: application/json\r\ncontent-length: ${Buffer.byteLength(text)}\r\nconnection: close\r\n\r\n${text}`);
    } else socket.destroy();
  });

  await new Promise<void>((resolve, reject) => {
    const onError = (e: NodeJS.ErrnoException): void => {
      reject(new ValueError(OP, `cannot listen on ${host}:${port}: ${e.code === 'EADDRINUSE' ? 'the port is in use (pick another with --port, or 0 for any free one)' : e.code ?? e.message}`));
    };
    server.once('error', onError);
    server.listen(port, host, () => { server.off('error', onError); resolve(); });
  });
  const addr = server.address() as AddressInfo;
  const urlHost = addr.family === 'IPv6' ? `[${addr.address}]` : addr.address;
  let closing: Promise<void> | null = null;
  return {
    url: `http://${urlHost}:${addr.port}`, port: addr.port, host: addr.address, engine, metrics,
    close(): Promise<void> {
      closing ??= (async () => {
        const stopped = new Promise<void>((resolve) => server.close(() => resolve()));
        for (const f of flights) f.abort.abort();
        if (ownEngine) await engine.close();
        await new Promise((resolve) => setImmediate(resolve)); // the cancelled requests' 503s go out
        server.closeAllConnections();
        await stopped;
      })();
      return closing;
    },
  };
}
