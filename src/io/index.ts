// nbx.io: safetensors files as tensors. Reading goes straight into the destination (host storage, or
// device memory through one small reusable staging chunk), so peak host memory stays near the chunk
// size, not the file size. Every file is validated before anything is allocated from its numbers.

import { statSync } from 'node:fs';
import { join } from 'node:path';
import { Tensor } from '../tensor/tensor.js';
import { allocStorage, dtypeName, storageBytes, DTYPES, type DTypeLike, type DTypeName } from '../dtype/dtypes.js';
import { Device, backendFor, type DeviceLike } from '../backend/backend.js';
import { fileErrorOf, ValueError } from '../errors.js';
import { checkOptions } from '../ops/registry.js';
import { SafetensorsFile, openSharded, writeSafetensors, type SafetensorsEntry } from './safetensors.js';
import { createProgress } from './progress.js';
import { GgufFile } from './gguf.js';

export interface LoadOptions {
  /** Where the tensors go (default 'cpu'). */
  device?: DeviceLike;
  /** Convert every floating tensor to this dtype after loading. */
  dtype?: DTypeLike;
  /** Load only these tensors. */
  names?: readonly string[];
  /** Bytes per read (default 16 MiB). */
  chunkBytes?: number;
  /** Show a progress bar on a terminal (default: for loads over 256 MiB). */
  progress?: boolean;
}

export interface LoadResult {
  tensors: Record<string, Tensor>;
  metadata: Record<string, string>;
  /** Bytes read, seconds, and the read rate. */
  stats: { bytes: number; seconds: number; mbPerSec: number };
}

const CHUNK = 16 << 20;
const LOAD_OPTIONS = ['device', 'dtype', 'names', 'chunkBytes', 'progress'] as const;

/** Reads one entry into a new tensor on `device`. */
async function readEntry(file: SafetensorsFile, e: SafetensorsEntry, device: Device, chunkBytes: number, onBytes: (n: number) => void): Promise<Tensor> {
  const dtype = e.dtype as DTypeName;
  const numel = e.shape.reduce((a, b) => a * b, 1);
  if (device.type === 'cpu') {
    const data = allocStorage(dtype, numel);
    let last = 0;
    await file.readInto(e.name, storageBytes(data), { chunkBytes, onProgress: (n) => { onBytes(n - last); last = n; } });
    return Tensor.fromStorage(data, dtype, e.shape, 'cpu');
  }
  const backend = backendFor(device);
  const t = Tensor.empty(e.shape, dtype, device);
  const write = (backend as { writeBytes?: (buf: unknown, byteOffset: number, data: Uint8Array) => void }).writeBytes;
  if (write) {
    // one reused staging chunk: host memory stays at chunkBytes whatever the tensor's size
    await file.readStream(e.name, chunkBytes, (chunk, off) => { write.call(backend, t.storage.buf, off, chunk); onBytes(chunk.byteLength); });
    return t;
  }
  t.dispose();
  const data = allocStorage(dtype, numel);
  await file.readInto(e.name, storageBytes(data), { chunkBytes });
  onBytes(e.byteLength);
  return Tensor.fromStorage(data, dtype, e.shape, device);
}

async function openAll(op: string, path: string): Promise<{ files: SafetensorsFile[]; where: Map<string, SafetensorsFile>; metadata: Record<string, string> }> {
  if (typeof path !== 'string') throw new ValueError(op, `expected a path string, got ${typeof path}`);
  let isDir: boolean;
  try { isDir = statSync(path).isDirectory(); } catch (e) { throw fileErrorOf(op, path, e); }
  const index = isDir ? join(path, 'model.safetensors.index.json') : path.endsWith('.json') ? path : null;
  if (index) {
    const sh = await openSharded(index);
    const meta: Record<string, string> = Object.create(null); // keys from a file: "__proto__" is a key like any other
    for (const [k, v] of Object.entries(sh.metadata ?? {})) meta[k] = typeof v === 'string' ? v : JSON.stringify(v);
    return { files: sh.files, where: sh.weightMap, metadata: meta };
  }
  const f = await SafetensorsFile.open(path);
  return { files: [f], where: new Map(f.names().map((n) => [n, f])), metadata: f.metadata };
}

/**
 * Loads tensors from a .safetensors file, a sharded checkpoint's model.safetensors.index.json, or a
 * folder holding one.
 */
export async function loadSafetensors(path: string, opts: LoadOptions = {}): Promise<LoadResult> {
  checkOptions('io.loadSafetensors', opts, LOAD_OPTIONS);
  const device = Device.of(opts.device ?? 'cpu');
  const { files, where, metadata } = await openAll('io.loadSafetensors', path);
  try {
    const names = opts.names ? [...opts.names] : [...where.keys()];
    for (const n of names) if (!where.has(n)) throw new ValueError('io.loadSafetensors', `no tensor named '${n}' in ${path}`);
    const total = names.reduce((s, n) => s + where.get(n)!.entries.get(n)!.byteLength, 0);
    const progress = createProgress(`loading ${path}`, total, { show: opts.progress });
    let done = 0;
    // null prototype: a tensor named "__proto__" (or "constructor") is an ordinary key
    const tensors: Record<string, Tensor> = Object.create(null);
    const target = opts.dtype ? dtypeName(opts.dtype) : null;
    for (const n of names) {
      const f = where.get(n)!;
      let t = await readEntry(f, f.entries.get(n)!, device, opts.chunkBytes ?? CHUNK, (b) => { done += b; progress.update(done); });
      if (target && DTYPES[t.dt].kind === 'float' && t.dt !== target) { const c = t.to(target); t.dispose(); t = c; }
      tensors[n] = t;
    }
    const s = progress.finish();
    return { tensors, metadata, stats: { bytes: s.bytes, seconds: s.seconds, mbPerSec: s.mbPerSec } };
  } finally {
    for (const f of files) await f.close();
  }
}

/** Writes tensors (any device; copied to the host contiguously) to a file Python's safetensors reads. */
export async function saveSafetensors(path: string, tensors: Record<string, Tensor>, metadata?: Record<string, string>): Promise<void> {
  if (tensors === null || typeof tensors !== 'object' || Array.isArray(tensors) || tensors instanceof Tensor) {
    throw new ValueError('io.saveSafetensors', 'tensors must be an object of name: Tensor');
  }
  if (metadata !== undefined && metadata !== null) {
    if (typeof metadata !== 'object' || Array.isArray(metadata)) throw new ValueError('io.saveSafetensors', 'metadata must be an object of name: string');
    for (const [k, v] of Object.entries(metadata)) if (typeof v !== 'string') throw new ValueError('io.saveSafetensors', `metadata value for '${k}' must be a string, got ${typeof v}`);
  }
  const entries = await Promise.all(Object.entries(tensors).map(async ([name, t]) => {
    if (!(t instanceof Tensor)) throw new ValueError('io.saveSafetensors', `'${name}' is not a Tensor`);
    const data = await t.dataStorage();
    return { name, dtype: t.dt, shape: [...t.shape], data: new Uint8Array(data.buffer, data.byteOffset, data.byteLength) };
  }));
  await writeSafetensors(path, entries, metadata);
}

export interface TensorInfo { name: string; dtype: DTypeName; shape: number[]; byteOffset: number; byteLength: number }

/** A lazy handle: names, dtypes, shapes and byte ranges without reading data; one tensor on demand. */
export class SafetensorsHandle {
  private constructor(private readonly files: SafetensorsFile[], private readonly where: Map<string, SafetensorsFile>, readonly metadata: Record<string, string>) {}
  static async open(path: string): Promise<SafetensorsHandle> {
    const { files, where, metadata } = await openAll('io.openSafetensors', path);
    return new SafetensorsHandle(files, where, metadata);
  }
  names(): string[] { return [...this.where.keys()]; }
  info(name: string): TensorInfo {
    const f = this.where.get(name);
    if (!f) throw new ValueError('io.openSafetensors', `no tensor named '${name}'`);
    const e = f.entries.get(name)!;
    return { name, dtype: e.dtype as DTypeName, shape: [...e.shape], byteOffset: e.byteOffset, byteLength: e.byteLength };
  }
  async get(name: string, opts: { device?: DeviceLike; dtype?: DTypeLike } = {}): Promise<Tensor> {
    checkOptions('io.openSafetensors.get', opts, ['device', 'dtype']);
    const f = this.where.get(name);
    if (!f) throw new ValueError('io.openSafetensors', `no tensor named '${name}'`);
    let t = await readEntry(f, f.entries.get(name)!, Device.of(opts.device ?? 'cpu'), CHUNK, () => {});
    if (opts.dtype) { const c = t.to(dtypeName(opts.dtype)); if (c !== t) t.dispose(); t = c; }
    return t;
  }
  async close(): Promise<void> { for (const f of this.files) await f.close(); }
}
export const openSafetensors = (path: string): Promise<SafetensorsHandle> => SafetensorsHandle.open(path);

/** A GGUF file (llama.cpp's format): metadata and tensor table checked at open, tensors read or dequantized on demand. */
export { GgufFile, GGML_TYPES, dequantizeBlocks, type GgufTensorInfo, type GgufValue } from './gguf.js';
/** Opens a GGUF file: see GgufFile. */
export const openGguf = (path: string): Promise<GgufFile> => GgufFile.open(path);
