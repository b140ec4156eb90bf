// Loading a model where there is no file system (browsers, or bytes a program already holds):
// nbx.models.loadFromFiles takes a Hugging Face folder's files as contents (text, parsed JSON or
// bytes), nbx.models.loadFromUrl fetches them from a base URL. Both build the model exactly as
// nbx.models.load does (assembleModel in load.ts: config parsing, the model declared empty, every
// checkpoint name and shape checked, tensors installed as they are); only the source of the bytes differs.

import { Tensor } from '../tensor/tensor.js';
import { allocStorage, storageBytes, dtypeName, type DTypeLike } from '../dtype/dtypes.js';
import { Device, type DeviceLike } from '../backend/backend.js';
import { FileError, FormatError, ValueError } from '../errors.js';
import { checkOptions } from '../ops/registry.js';
import { parseHeader, type SafetensorsEntry } from '../io/safetensors.js';
import type { TensorInfo } from '../io/index.js';
import { PretrainedTokenizer, type Tokenizer, type TokenizerConfig } from '../tokenizer/index.js';
import { assembleModel, type LoadModelOptions, type WeightSource } from './load.js';
import type { CausalLMModel } from './causal_lm.js';

/** One file's content: its text, its parsed JSON (for .json files), or its bytes. */
export type ModelFileContent = string | ArrayBuffer | ArrayBufferView | Record<string, unknown>;
/** A model folder as file name → content ('config.json', 'model.safetensors', 'tokenizer.json', ...). */
export type ModelFiles = Readonly<Record<string, ModelFileContent>>;

export interface LoadFromUrlOptions extends LoadModelOptions {
  /** The fetch to use (default globalThis.fetch): for credentials, caching or a test's stand-in. */
  fetch?: (url: string) => Promise<Response>;
  /** Called as each file downloads, with its bytes so far and its size (0 when the server does not say). */
  onDownload?: (p: { file: string; loadedBytes: number; totalBytes: number }) => void;
}

const LOAD_OPTIONS = ['device', 'dtype', 'onProgress', 'progress'] as const;
const OP_FILES = 'models.loadFromFiles';
const OP_URL = 'models.loadFromUrl';
const INDEX = 'model.safetensors.index.json';
const TOKENIZER_FILES = ['tokenizer.json', 'tokenizer_config.json', 'chat_template.jinja'] as const;

function isBytes(v: unknown): v is ArrayBuffer | ArrayBufferView {
  return v instanceof ArrayBuffer || ArrayBuffer.isView(v)
    || (typeof SharedArrayBuffer !== 'undefined' && v instanceof SharedArrayBuffer);
}

function bytesOf(v: ArrayBuffer | ArrayBufferView): Uint8Array {
  return ArrayBuffer.isView(v) ? new Uint8Array(v.buffer, v.byteOffset, v.byteLength) : new Uint8Array(v);
}

function textOf(op: string, name: string, v: ModelFileContent): string {
  if (typeof v === 'string') return v;
  if (isBytes(v)) {
    try { return new TextDecoder('utf-8', { fatal: true }).decode(bytesOf(v)); } catch {
      throw new FormatError(op, `${name} is not UTF-8 text`);
    }
  }
  throw new ValueError(op, `${name} must be given as text or bytes, got ${typeof v}`);
}

/** A .json file's content: parsed here from text or bytes, or already parsed by the caller. */
function jsonOf(op: string, name: string, v: ModelFileContent | undefined): unknown {
  if (v === undefined) return undefined;
  if (typeof v === 'object' && v !== null && !isBytes(v)) return v;
  const text = textOf(op, name, v);
  try { return JSON.parse(text); } catch (e) {
    throw new FormatError(op, `${name} is not valid JSON (${(e as Error).message}); the file is corrupt or truncated`);
  }
}

function checkFiles(op: string, files: unknown): asserts files is ModelFiles {
  if (files === null || typeof files !== 'object' || Array.isArray(files) || files instanceof Map) {
    throw new ValueError(op, `expected an object of file name → content ({ 'config.json': text, 'model.safetensors': ArrayBuffer, ... }), got ${files instanceof Map ? 'a Map' : Array.isArray(files) ? 'an array' : typeof files}`);
  }
  for (const [name, v] of Object.entries(files)) {
    if (v === undefined) continue;
    if (v === null || (typeof v !== 'string' && typeof v !== 'object')) throw new ValueError(op, `${name}: a file's content is text, bytes (ArrayBuffer, Uint8Array) or parsed JSON, got ${v === null ? 'null' : typeof v}`);
  }
}

/** A checkpoint held in memory: one or more safetensors files' bytes, validated by the same header parser as files on disk. */
class InMemoryWeights implements WeightSource {
  private readonly where = new Map<string, { bytes: Uint8Array; entry: SafetensorsEntry }>();

  constructor(shards: ReadonlyMap<string, Uint8Array>, weightMap: ReadonlyMap<string, string> | null, op: string) {
    const parsed = new Map<string, Map<string, SafetensorsEntry>>();
    for (const [file, bytes] of shards) {
      const h = parseHeader(bytes, bytes.byteLength, file);
      parsed.set(file, new Map(h.entries.map((e) => [e.name, e])));
    }
    if (weightMap) {
      for (const [tensor, file] of weightMap) {
        const entry = parsed.get(file)?.get(tensor);
        if (!entry) throw new FormatError(op, `${INDEX}: weight_map says shard '${file}' holds '${tensor}', but that file has no such tensor`);
        this.where.set(tensor, { bytes: shards.get(file)!, entry });
      }
    } else {
      for (const [file, entries] of parsed) for (const [n, e] of entries) this.where.set(n, { bytes: shards.get(file)!, entry: e });
    }
  }

  names(): string[] { return [...this.where.keys()]; }

  info(name: string): TensorInfo {
    const e = this.at(name).entry;
    return { name, dtype: e.dtype, shape: [...e.shape], byteOffset: e.byteOffset, byteLength: e.byteLength };
  }

  /** The tensor on `device`: copied out of the file's bytes (they may be unaligned), converted on the host, then moved. */
  async get(name: string, opts: { device?: DeviceLike; dtype?: DTypeLike } = {}): Promise<Tensor> {
    const { bytes, entry } = this.at(name);
    const data = allocStorage(entry.dtype, entry.shape.reduce((a, b) => a * b, 1), false);
    storageBytes(data).set(bytes.subarray(entry.byteOffset, entry.byteOffset + entry.byteLength));
    let t = Tensor.fromStorage(data, entry.dtype, entry.shape.slice(), 'cpu');
    if (opts.dtype !== undefined && dtypeName(opts.dtype) !== entry.dtype) { const c = t.to(dtypeName(opts.dtype)); t.dispose(); t = c; }
    const device = Device.of(opts.device ?? 'cpu');
    if (device.type !== 'cpu') { const moved = t.to(device); t.dispose(); t = moved; }
    return t;
  }

  async close(): Promise<void> { /* the bytes belong to the caller */ }

  private at(name: string): { bytes: Uint8Array; entry: SafetensorsEntry } {
    const w = this.where.get(name);
    if (!w) throw new ValueError('models.loadFromFiles', `no tensor named '${name}' in the checkpoint`);
    return w;
  }
}

/** The shard file names a model.safetensors.index.json maps tensors to. */
function readIndex(op: string, json: unknown): Map<string, string> {
  const wm = (json as { weight_map?: unknown } | null)?.weight_map;
  if (json === null || typeof json !== 'object' || wm === null || typeof wm !== 'object' || Array.isArray(wm)) {
    throw new FormatError(op, `${INDEX} needs a 'weight_map' object {tensor name: shard file}`);
  }
  const map = new Map<string, string>();
  for (const [tensor, shard] of Object.entries(wm as Record<string, unknown>)) {
    // shards are siblings of the index (as transformers writes them); a path leaving the folder is refused
    if (typeof shard !== 'string' || shard === '' || shard.includes('/') || shard.includes('\\') || shard === '..') {
      throw new FormatError(op, `${INDEX}: weight_map value for '${tensor}' must be a shard file name in the same folder, got ${JSON.stringify(shard)}`);
    }
    map.set(tensor, shard);
  }
  return map;
}

function tokenizerOf(op: string, files: ModelFiles): Tokenizer {
  const json = jsonOf(op, 'tokenizer.json', files['tokenizer.json']);
  if (json === undefined) throw new ValueError(op, `no tokenizer.json among the files (${Object.keys(files).join(', ') || 'none'}); only the tokenizers-library format is supported`);
  const config = jsonOf(op, 'tokenizer_config.json', files['tokenizer_config.json']) ?? {};
  if (config === null || typeof config !== 'object' || Array.isArray(config)) throw new FormatError(op, 'tokenizer_config.json must hold a JSON object');
  const template = files['chat_template.jinja'] === undefined ? null : textOf(op, 'chat_template.jinja', files['chat_template.jinja']);
  return new PretrainedTokenizer(json, config as TokenizerConfig, template);
}

/** nbx.models.loadTokenizerFromFiles: the tokenizer of tokenizer.json (+ tokenizer_config.json, chat_template.jinja) contents. */
export async function loadTokenizerFromFiles(files: ModelFiles): Promise<Tokenizer> {
  checkFiles('models.loadTokenizerFromFiles', files);
  return tokenizerOf('models.loadTokenizerFromFiles', files);
}

async function fromFiles(op: string, files: ModelFiles, opts: LoadModelOptions, where: string): Promise<CausalLMModel> {
  const names = Object.keys(files).join(', ') || 'none';
  const config = jsonOf(op, 'config.json', files['config.json']);
  if (config === undefined) throw new ValueError(op, `no config.json among the files (${names}): a Hugging Face model folder needs the config.json that transformers saved with the weights`);
  let weightsName: string;
  let open: () => WeightSource;
  if (files['model.safetensors'] !== undefined) {
    const bytes = files['model.safetensors'];
    if (!isBytes(bytes)) throw new ValueError(op, `model.safetensors must be bytes (ArrayBuffer or Uint8Array), got ${typeof bytes}`);
    weightsName = `${where}model.safetensors`;
    open = () => new InMemoryWeights(new Map([[weightsName, bytesOf(bytes)]]), null, op);
  } else if (files[INDEX] !== undefined) {
    const weightMap = readIndex(op, jsonOf(op, INDEX, files[INDEX]));
    const shards = new Map<string, Uint8Array>();
    for (const shard of new Set(weightMap.values())) {
      const bytes = files[shard];
      if (bytes === undefined) throw new ValueError(op, `${INDEX} names shard '${shard}', which is not among the files (${names})`);
      if (!isBytes(bytes)) throw new ValueError(op, `${shard} must be bytes (ArrayBuffer or Uint8Array), got ${typeof bytes}`);
      shards.set(shard, bytesOf(bytes));
    }
    weightsName = `${where}${INDEX}`;
    open = () => new InMemoryWeights(shards, weightMap, op);
  } else {
    throw new ValueError(op, `neither model.safetensors nor ${INDEX} among the files (${names}): only safetensors checkpoints are read`);
  }
  return assembleModel({
    config, configName: `${where}config.json`,
    generationConfig: jsonOf(op, 'generation_config.json', files['generation_config.json']), generationConfigName: `${where}generation_config.json`,
    weights: async () => open(), weightsName,
    tokenizer: async () => (files['tokenizer.json'] === undefined ? null : tokenizerOf(op, files)),
  }, opts);
}

/**
 * nbx.models.loadFromFiles: a model from its folder's files given as contents, e.g.
 * `{ 'config.json': text, 'model.safetensors': arrayBuffer, 'tokenizer.json': text, ... }`.
 * The same model as nbx.models.load on that folder (options: device, dtype, onProgress).
 */
export async function loadFromFiles(files: ModelFiles, opts: LoadModelOptions = {}): Promise<CausalLMModel> {
  checkOptions(OP_FILES, opts, LOAD_OPTIONS);
  checkFiles(OP_FILES, files);
  return fromFiles(OP_FILES, files, opts, '');
}

function baseOf(baseUrl: unknown): URL {
  if (!(typeof baseUrl === 'string' && baseUrl !== '') && !(baseUrl instanceof URL)) {
    throw new ValueError(OP_URL, `expected the URL of a model folder, got ${JSON.stringify(baseUrl)}`);
  }
  // a folder URL: files resolve inside it, whether or not the caller wrote the trailing slash
  const text = String(baseUrl).endsWith('/') ? String(baseUrl) : `${String(baseUrl)}/`;
  const page = (globalThis as { location?: { href?: string } }).location?.href;
  try { return new URL(text, page); } catch {
    throw new ValueError(OP_URL, `${String(baseUrl)} is not a URL${page ? '' : ' (a relative URL needs a page to resolve against: pass an absolute one)'}`);
  }
}

/**
 * nbx.models.loadFromUrl: fetches a Hugging Face model folder served over HTTP (config.json,
 * model.safetensors or its index and shards, generation_config.json and the tokenizer files when
 * present) and loads it as nbx.models.load does. Relative URLs resolve against the page.
 */
export async function loadFromUrl(baseUrl: string | URL, opts: LoadFromUrlOptions = {}): Promise<CausalLMModel> {
  checkOptions(OP_URL, opts, [...LOAD_OPTIONS, 'fetch', 'onDownload']);
  const base = baseOf(baseUrl);
  const fetchFn = opts.fetch ?? (globalThis.fetch ? (u: string) => globalThis.fetch(u) : undefined);
  if (typeof fetchFn !== 'function') throw new ValueError(OP_URL, 'no fetch in this environment: pass { fetch }');

  /** The file's response, or null for a 404 (an optional file that is absent). */
  const get = async (name: string): Promise<Response | null> => {
    const url = new URL(name, base).href;
    let res: Response;
    try { res = await fetchFn(url); } catch (e) {
      throw new FileError(OP_URL, `${url}: the request failed (${(e as Error).message})`, 'EFETCH', url);
    }
    if (res.status === 404) return null;
    if (!res.ok) throw new FileError(OP_URL, `${url}: HTTP ${res.status} ${res.statusText}`.trimEnd(), `HTTP${res.status}`, url);
    // a single-page-app server answers index.html for a file it lacks: never read a page as a model file
    if (/^text\/html\b/i.test(res.headers.get('content-type') ?? '')) {
      throw new FormatError(OP_URL, `${url}: the server answered with an HTML page, not the file (a single-page-app fallback serving index.html for missing files?): configure it to answer 404 for files it does not have`);
    }
    return res;
  };
  const text = async (name: string): Promise<string | undefined> => (await (await get(name))?.text()) ?? undefined;
  const bytes = async (name: string, res: Response): Promise<Uint8Array> => {
    const total = Number(res.headers.get('content-length') ?? 0);
    if (!opts.onDownload || !res.body) return new Uint8Array(await res.arrayBuffer());
    // read in pieces to report progress: one buffer of the announced size when there is one
    const reader = res.body.getReader();
    const pieces: Uint8Array[] = [];
    let loaded = 0;
    for (;;) {
      const { done, value } = await reader.read();
      if (done) break;
      pieces.push(value);
      loaded += value.byteLength;
      opts.onDownload({ file: name, loadedBytes: loaded, totalBytes: total });
    }
    const out = new Uint8Array(loaded);
    let at = 0;
    for (const p of pieces) { out.set(p, at); at += p.byteLength; }
    return out;
  };

  const files: Record<string, ModelFileContent> = {};
  const config = await text('config.json');
  if (config === undefined) throw new FileError(OP_URL, `${new URL('config.json', base).href} not found (404): ${base.href} is not a model folder (config.json + model.safetensors)`, 'HTTP404', new URL('config.json', base).href);
  files['config.json'] = config;
  const single = await get('model.safetensors');
  if (single) files['model.safetensors'] = await bytes('model.safetensors', single);
  else {
    const index = await text(INDEX);
    if (index === undefined) throw new FileError(OP_URL, `${base.href} has neither model.safetensors nor ${INDEX} (404 for both): only safetensors checkpoints are read`, 'HTTP404', base.href);
    files[INDEX] = index;
    for (const shard of new Set(readIndex(OP_URL, jsonOf(OP_URL, INDEX, index)).values())) {
      const res = await get(shard);
      if (!res) throw new FileError(OP_URL, `${new URL(shard, base).href} not found (404): ${INDEX} names it as a shard`, 'HTTP404', new URL(shard, base).href);
      files[shard] = await bytes(shard, res);
    }
  }
  for (const name of ['generation_config.json', ...TOKENIZER_FILES]) {
    const t = await text(name);
    if (t !== undefined) files[name] = t;
  }
  return fromFiles(OP_URL, files, opts, base.href);
}
