// OpenAI's request schema for /v1/chat/completions and /v1/completions, checked field by field: a
// field of the wrong type or out of OpenAI's range, an unknown field, or a feature this server does not
// implement (n > 1, logprobs, tools, penalties, ...) is an ApiError (400) naming the parameter, in
// OpenAI's error shape. Nothing is silently ignored except fields that change nothing about the
// output (user, metadata, store, service_tier, ...), which OpenAI also accepts.

import { NbxError } from '../errors.js';
import type { ChatMessage } from '../tokenizer/index.js';

/** An error the server answers with: HTTP status and OpenAI's { error: { message, type, param, code } }. */
export class ApiError extends NbxError {
  constructor(readonly status: number, message: string, readonly type = 'invalid_request_error',
    readonly param: string | null = null, readonly code: string | null = null, readonly headers: Record<string, string> = {}) {
    super('nbx serve', message);
  }

  /** The JSON body: OpenAI's message has no operation prefix. */
  body(): { error: { message: string; type: string; param: string | null; code: string | null } } {
    return { error: { message: this.message.replace(/^nbx serve: /, ''), type: this.type, param: this.param, code: this.code } };
  }
}

export const badRequest = (message: string, param: string | null = null, code: string | null = null): ApiError =>
  new ApiError(400, message, 'invalid_request_error', param, code);

/** A parameter that OpenAI defines but this server does not implement: a 400 that says so. */
const unsupported = (param: string, what: string): ApiError =>
  badRequest(`'${param}' ${what} is not supported by this server (nbx serve)`, param, 'unsupported_parameter');

/** What both endpoints resolve a request to. `undefined` fields fall back to the model's defaults. */
export interface ParsedRequest {
  kind: 'chat' | 'completion';
  model: string;
  /** Chat messages (kind 'chat'). */
  messages?: ChatMessage[];
  /** Text (kind 'completion'), or token ids. */
  prompt?: string | number[];
  /** max_tokens / max_completion_tokens; null: not given. */
  max_tokens: number | null;
  temperature?: number;
  top_p?: number;
  top_k?: number;
  seed?: number;
  stop: string[];
  stream: boolean;
  include_usage: boolean;
}

type Json = Record<string, unknown>;

const typeName = (v: unknown): string => (v === null ? 'null' : Array.isArray(v) ? 'array' : typeof v);

function wrongType(param: string, want: string, v: unknown): ApiError {
  return badRequest(`Invalid type for '${param}': expected ${want}, but got ${typeName(v)} (${JSON.stringify(v)?.slice(0, 60)}).`, param, 'invalid_type');
}

function optNumber(body: Json, key: string, min: number, max: number, int = false): number | undefined {
  const v = body[key];
  if (v === undefined || v === null) return undefined;
  if (typeof v !== 'number' || !Number.isFinite(v) || (int && !Number.isInteger(v))) throw wrongType(key, int ? 'an integer' : 'a number', v);
  if (v < min) throw badRequest(`Invalid '${key}': ${v} is less than the minimum of ${min}.`, key, 'invalid_value');
  if (v > max) throw badRequest(`Invalid '${key}': ${v} is greater than the maximum of ${max}.`, key, 'invalid_value');
  return v;
}

function optBool(body: Json, key: string): boolean | undefined {
  const v = body[key];
  if (v === undefined || v === null) return undefined;
  if (typeof v !== 'boolean') throw wrongType(key, 'a boolean', v);
  return v;
}

function optString(body: Json, key: string): string | undefined {
  const v = body[key];
  if (v === undefined || v === null) return undefined;
  if (typeof v !== 'string') throw wrongType(key, 'a string', v);
  return v;
}

function optObject(body: Json, key: string): Json | undefined {
  const v = body[key];
  if (v === undefined || v === null) return undefined;
  if (typeof v !== 'object' || Array.isArray(v)) throw wrongType(key, 'an object', v);
  return v as Json;
}

/** stop: a string or an array of up to 4 strings (OpenAI's limit), or null. */
function parseStop(body: Json): string[] {
  const v = body.stop;
  if (v === undefined || v === null) return [];
  const list = typeof v === 'string' ? [v] : Array.isArray(v) ? v : null;
  if (list === null) throw wrongType('stop', 'a string or an array of strings', v);
  if (list.length > 4) throw badRequest(`Invalid 'stop': array too long. Expected an array with maximum length 4, but got an array with length ${list.length} instead.`, 'stop', 'array_above_max_length');
  list.forEach((s, i) => { if (typeof s !== 'string') throw wrongType(`stop[${i}]`, 'a string', s); });
  return (list as string[]).filter((s) => s.length > 0);
}

/** Fields both endpoints share: sampling, stop, stream, n, seed, and the unsupported ones. */
function parseCommon(body: Json, kind: 'chat' | 'completion'): Omit<ParsedRequest, 'kind' | 'messages' | 'prompt' | 'max_tokens'> {
  const model = body.model;
  if (model === undefined || model === null) throw badRequest("you must provide a model parameter", 'model', 'missing_required_parameter');
  if (typeof model !== 'string') throw wrongType('model', 'a string', model);
  const temperature = optNumber(body, 'temperature', 0, 2);
  const top_p = optNumber(body, 'top_p', 0, 1);
  // top_k is not OpenAI's, but vLLM and most OpenAI-compatible servers take it; -1 or 0 means off.
  const top_k = optNumber(body, 'top_k', -1, Number.MAX_SAFE_INTEGER, true);
  const seedV = body.seed;
  let seed: number | undefined;
  if (seedV !== undefined && seedV !== null) {
    if (typeof seedV !== 'number' || !Number.isSafeInteger(seedV)) throw wrongType('seed', 'an integer', seedV);
    // OpenAI takes any int64; the generator here is seeded from 0 .. 2^53 - 1 (a JSON number's exact range).
    if (seedV < 0) throw badRequest(`Invalid 'seed': this server takes seeds from 0 to 2^53 - 1, got ${seedV}.`, 'seed', 'unsupported_value');
    seed = seedV;
  }
  const n = optNumber(body, 'n', 1, 128, true);
  if (n !== undefined && n !== 1) throw badRequest(`Invalid 'n': this server returns one choice per request (n = 1), got ${n}.`, 'n', 'unsupported_parameter');
  const stream = optBool(body, 'stream') ?? false;
  const so = optObject(body, 'stream_options');
  if (so !== undefined && !stream) throw badRequest("The 'stream_options' parameter is only allowed when 'stream' is enabled.", 'stream_options', 'invalid_value');
  let include_usage = false;
  if (so) {
    for (const k of Object.keys(so)) if (k !== 'include_usage' && k !== 'include_obfuscation') throw badRequest(`Unrecognized request argument supplied: stream_options.${k}`, `stream_options.${k}`, 'unknown_parameter');
    include_usage = optBool(so, 'include_usage') ?? false;
    optBool(so, 'include_obfuscation');
  }
  for (const p of ['frequency_penalty', 'presence_penalty']) {
    const v = optNumber(body, p, -2, 2);
    if (v !== undefined && v !== 0) throw unsupported(p, `(${v})`);
  }
  const lb = optObject(body, 'logit_bias');
  if (lb && Object.keys(lb).length) throw unsupported('logit_bias', '');
  optString(body, 'user');
  const out = { model, stop: parseStop(body), stream, include_usage } as ReturnType<typeof parseCommon>;
  if (temperature !== undefined) out.temperature = temperature;
  if (top_p !== undefined) out.top_p = top_p;
  if (top_k !== undefined && top_k > 0) out.top_k = top_k;
  if (seed !== undefined) out.seed = seed;
  void kind;
  return out;
}

const COMMON_KEYS = ['model', 'temperature', 'top_p', 'top_k', 'seed', 'n', 'stream', 'stream_options', 'stop',
  'frequency_penalty', 'presence_penalty', 'logit_bias', 'user', 'max_tokens'];
/** Chat fields accepted because they change nothing about the text (or are checked below). */
const CHAT_KEYS = new Set([...COMMON_KEYS, 'messages', 'max_completion_tokens', 'logprobs', 'top_logprobs', 'metadata', 'store',
  'service_tier', 'parallel_tool_calls', 'tools', 'tool_choice', 'functions', 'function_call', 'response_format', 'modalities',
  'prompt_cache_key', 'safety_identifier', 'reasoning_effort', 'verbosity', 'audio', 'prediction', 'web_search_options']);
const COMPLETION_KEYS = new Set([...COMMON_KEYS, 'prompt', 'best_of', 'echo', 'logprobs', 'suffix']);

function checkKeys(body: Json, allowed: Set<string>): void {
  for (const k of Object.keys(body)) if (!allowed.has(k)) throw badRequest(`Unrecognized request argument supplied: ${k}`, k, 'unknown_parameter');
}

function maxTokens(body: Json, key: string): number | null {
  return optNumber(body, key, 1, Number.MAX_SAFE_INTEGER, true) ?? null;
}

/** The body of POST /v1/chat/completions. */
export function parseChatRequest(raw: unknown): ParsedRequest {
  const body = requireObject(raw);
  checkKeys(body, CHAT_KEYS);
  const common = parseCommon(body, 'chat');
  const m = body.messages;
  if (m === undefined || m === null) throw badRequest("Missing required parameter: 'messages'.", 'messages', 'missing_required_parameter');
  if (!Array.isArray(m)) throw wrongType('messages', 'an array', m);
  if (m.length === 0) throw badRequest("Invalid 'messages': empty array. Expected an array with minimum length 1, but got an empty array instead.", 'messages', 'empty_array');
  const messages = m.map((msg, i) => parseMessage(msg, i));
  if (optBool(body, 'logprobs')) throw unsupported('logprobs', '(true)');
  if (optNumber(body, 'top_logprobs', 0, 20, true)) throw unsupported('top_logprobs', '');
  const tools = body.tools;
  if (tools !== undefined && tools !== null) {
    if (!Array.isArray(tools)) throw wrongType('tools', 'an array', tools);
    if (tools.length) throw unsupported('tools', '(tool calling)');
  }
  if (Array.isArray(body.functions) && body.functions.length) throw unsupported('functions', '(function calling)');
  const tc = body.tool_choice;
  if (tc !== undefined && tc !== null && tc !== 'none' && tc !== 'auto') throw unsupported('tool_choice', `(${JSON.stringify(tc)})`);
  const rf = optObject(body, 'response_format');
  if (rf && rf.type !== 'text') throw unsupported('response_format', `of type ${JSON.stringify(rf.type)}`);
  const mod = body.modalities;
  if (mod !== undefined && mod !== null) {
    if (!Array.isArray(mod)) throw wrongType('modalities', 'an array', mod);
    if (mod.some((x) => x !== 'text')) throw unsupported('modalities', `${JSON.stringify(mod)} (text only)`);
  }
  for (const k of ['audio', 'prediction', 'web_search_options']) if (body[k] !== undefined && body[k] !== null) throw unsupported(k, '');
  optObject(body, 'metadata');
  optBool(body, 'store');
  optBool(body, 'parallel_tool_calls');
  for (const k of ['service_tier', 'prompt_cache_key', 'safety_identifier', 'reasoning_effort', 'verbosity']) optString(body, k);
  // max_completion_tokens replaces the deprecated max_tokens; given both, the newer one wins.
  const max_tokens = maxTokens(body, 'max_completion_tokens') ?? maxTokens(body, 'max_tokens');
  return { kind: 'chat', ...common, messages, max_tokens };
}

const ROLES = new Set(['system', 'developer', 'user', 'assistant', 'tool', 'function']);

function parseMessage(msg: unknown, i: number): ChatMessage {
  const p = `messages[${i}]`;
  if (msg === null || typeof msg !== 'object' || Array.isArray(msg)) throw wrongType(p, 'an object', msg);
  const o = msg as Json;
  if (typeof o.role !== 'string') throw o.role === undefined ? badRequest(`Missing required parameter: '${p}.role'.`, `${p}.role`, 'missing_required_parameter') : wrongType(`${p}.role`, 'a string', o.role);
  if (!ROLES.has(o.role)) throw badRequest(`Invalid value: '${o.role}'. Supported values are: 'system', 'developer', 'user', 'assistant', 'tool', and 'function'.`, `${p}.role`, 'invalid_value');
  if (o.name !== undefined && o.name !== null && typeof o.name !== 'string') throw wrongType(`${p}.name`, 'a string', o.name);
  let content: string;
  const c = o.content;
  if (typeof c === 'string') content = c;
  else if (c === null || c === undefined) {
    if (o.role !== 'assistant') throw badRequest(`Missing required parameter: '${p}.content'.`, `${p}.content`, 'missing_required_parameter');
    content = '';
  } else if (Array.isArray(c)) {
    // Content parts: text only, joined by newlines (as vLLM does for text parts).
    content = c.map((part, j) => {
      const pp = `${p}.content[${j}]`;
      if (part === null || typeof part !== 'object' || Array.isArray(part)) throw wrongType(pp, 'an object', part);
      const t = (part as Json).type;
      if (t !== 'text') throw unsupported(`${pp}.type`, `${JSON.stringify(t)} (text content only)`);
      const text = (part as Json).text;
      if (typeof text !== 'string') throw wrongType(`${pp}.text`, 'a string', text);
      return text;
    }).join('\n');
  } else throw wrongType(`${p}.content`, 'a string or an array of content parts', c);
  if (o.tool_calls !== undefined && o.tool_calls !== null && !(Array.isArray(o.tool_calls) && o.tool_calls.length === 0)) throw unsupported(`${p}.tool_calls`, '');
  // 'developer' is OpenAI's newer name for 'system'; chat templates know 'system'.
  return { role: o.role === 'developer' ? 'system' : o.role, content };
}

/** The body of POST /v1/completions (legacy): one prompt, a string or token ids. */
export function parseCompletionRequest(raw: unknown): ParsedRequest {
  const body = requireObject(raw);
  checkKeys(body, COMPLETION_KEYS);
  const common = parseCommon(body, 'completion');
  const v = body.prompt;
  let prompt: string | number[];
  const isIds = (a: unknown[]): boolean => a.length > 0 && a.every((x) => typeof x === 'number');
  if (v === undefined || v === null) throw badRequest("Missing required parameter: 'prompt'.", 'prompt', 'missing_required_parameter');
  if (typeof v === 'string') prompt = v;
  else if (Array.isArray(v)) {
    if (isIds(v)) {
      if (!v.every((x) => Number.isInteger(x) && (x as number) >= 0)) throw wrongType('prompt', 'token ids (integers >= 0)', v);
      prompt = v as number[];
    } else if (v.length === 1 && typeof v[0] === 'string') prompt = v[0];
    else if (v.length === 1 && Array.isArray(v[0]) && isIds(v[0])) prompt = v[0] as number[];
    else if (v.length > 1 && v.every((x) => typeof x === 'string' || Array.isArray(x))) throw badRequest(`Invalid 'prompt': this server takes one prompt per request, got ${v.length}.`, 'prompt', 'unsupported_parameter');
    else throw wrongType('prompt', 'a string, an array of strings, or an array of token ids', v);
  } else throw wrongType('prompt', 'a string, an array of strings, or an array of token ids', v);
  const bestOf = optNumber(body, 'best_of', 0, 20, true);
  if (bestOf !== undefined && bestOf !== 1) throw unsupported('best_of', `(${bestOf})`);
  if (optBool(body, 'echo')) throw unsupported('echo', '(true)');
  if (optNumber(body, 'logprobs', 0, 5, true) !== undefined) throw unsupported('logprobs', '');
  const suffix = optString(body, 'suffix');
  if (suffix) throw unsupported('suffix', '');
  // OpenAI's default for the legacy endpoint is 16 tokens; the server applies it.
  return { kind: 'completion', ...common, prompt, max_tokens: maxTokens(body, 'max_tokens') };
}

function requireObject(raw: unknown): Json {
  if (raw === null || typeof raw !== 'object' || Array.isArray(raw)) {
    throw badRequest(`The request body must be a JSON object, got ${typeName(raw)}.`, null, 'invalid_request_body');
  }
  return raw as Json;
}
