// safetensors, at the format level: header parsing and validation, lazy tensor reads, writing, and
// sharded checkpoints (model.safetensors.index.json). Nothing here knows about the Tensor class; a
// tensor's bytes come back as a Uint8Array (or go straight into a caller's buffer).
//
// File layout: u64 little-endian N, then N bytes of UTF-8 JSON (the header), then the data section.
// The header maps each tensor name to {dtype, shape, data_offsets: [begin, end]} (offsets relative
// to the data section) plus an optional "__metadata__" object of string values.
//
// Every number read from a file is validated before it is used to size anything, so a hostile or
// corrupt file costs at most its own size in memory and fails with a FormatError that names the
// file, the tensor (where there is one) and the rule it broke.

import * as fs from 'node:fs';
import * as path from 'node:path';
import { fileErrorOf, FormatError, UnsupportedError, ValueError } from '../errors.js';
import { checkOptions } from '../ops/registry.js';

// ---------------------------------------------------------------------------------------------
// Dtypes

/** The engine dtypes (PyTorch names) that safetensors can hold. */
export type SafetensorsDType =
  | 'bool' | 'uint8' | 'int8' | 'int16' | 'int32' | 'int64'
  | 'float16' | 'bfloat16' | 'float32' | 'float64'
  | 'float8_e4m3fn' | 'float8_e5m2';
/** Alias used by the entry type; structurally a subset of the engine's DTypeName. */
export type DTypeName = SafetensorsDType;

/** Engine dtype name -> safetensors code. */
export const DTYPE_TO_SAFETENSORS: Readonly<Record<SafetensorsDType, string>> = Object.freeze({
  bool: 'BOOL', uint8: 'U8', int8: 'I8', int16: 'I16', int32: 'I32', int64: 'I64',
  float16: 'F16', bfloat16: 'BF16', float32: 'F32', float64: 'F64',
  float8_e4m3fn: 'F8_E4M3', float8_e5m2: 'F8_E5M2',
});

/** safetensors code -> engine dtype name. A Map, so a code like "__proto__" can never match. */
export const SAFETENSORS_TO_DTYPE: ReadonlyMap<string, SafetensorsDType> = new Map(
  (Object.entries(DTYPE_TO_SAFETENSORS) as [SafetensorsDType, string][]).map(([d, c]) => [c, d]));

/** Bytes per element, by engine dtype name. */
export const SAFETENSORS_ITEMSIZE: Readonly<Record<SafetensorsDType, number>> = Object.freeze({
  bool: 1, uint8: 1, int8: 1, int16: 2, int32: 4, int64: 8,
  float16: 2, bfloat16: 2, float32: 4, float64: 8, float8_e4m3fn: 1, float8_e5m2: 1,
});

const KNOWN_CODES = [...SAFETENSORS_TO_DTYPE.keys()].join(', ');

/** Order of the Python library's Dtype enum (increasing alignment). Writers sort by it, descending. */
const WRITE_RANK: Readonly<Record<SafetensorsDType, number>> = {
  bool: 0, uint8: 1, int8: 2, float8_e5m2: 3, float8_e4m3fn: 4, int16: 5, float16: 6, bfloat16: 7,
  int32: 8, float32: 9, float64: 10, int64: 11,
};

// ---------------------------------------------------------------------------------------------
// Header parsing

/** Limit from the reference implementation: a larger header is refused before it is read. */
export const MAX_HEADER_BYTES = 100_000_000;

export interface SafetensorsEntry {
  name: string;
  dtype: DTypeName;
  shape: number[];
  /** Absolute offset of the first byte in the file. */
  byteOffset: number;
  byteLength: number;
}

export interface ParsedHeader {
  /** N, the JSON header's length in bytes (the data section starts at 8 + N). */
  headerLength: number;
  /** Sorted by position in the file. */
  entries: SafetensorsEntry[];
  metadata: Record<string, string>;
}

const OP = 'safetensors';

/** Quote a name from a file for an error message, keeping messages short and printable. */
function q(s: string): string {
  const t = s.length > 200 ? `${s.slice(0, 200)}...(${s.length} chars)` : s;
  // eslint-disable-next-line no-control-regex
  return `'${t.replace(/[\u0000-\u001f\u007f]/g, (c) => `\\x${c.charCodeAt(0).toString(16).padStart(2, '0')}`)}'`;
}

function bad(file: string, tensor: string | undefined, rule: string): FormatError {
  return new FormatError(OP, tensor === undefined ? `${file}: ${rule}` : `tensor ${q(tensor)} in ${file}: ${rule}`);
}
/** A file whose framing (length prefix, JSON object header) is not safetensors' at all: /etc/passwd, a PNG... */
function notSafetensors(file: string, rule: string): FormatError {
  return bad(file, undefined, `not a safetensors file (${rule})`);
}

function isPlainObject(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

/** A number the format accepts as a size or offset. */
function isCount(v: unknown): v is number {
  return typeof v === 'number' && Number.isSafeInteger(v) && v >= 0;
}

/** A short, one-level rendering of a value from a file, for error messages. Never recursive: a
 *  header may nest arrays 10^7 deep, and JSON.stringify would overflow the stack. */
function showValue(v: unknown): string {
  const one = (x: unknown): string => {
    if (Array.isArray(x)) return '[...]';
    if (x !== null && typeof x === 'object') return '{...}';
    const s = typeof x === 'string' ? JSON.stringify(x) : String(x);
    return s.length > 40 ? `${s.slice(0, 40)}...` : s;
  };
  if (!Array.isArray(v)) return one(v);
  return `[${v.slice(0, 8).map(one).join(',')}${v.length > 8 ? `,... (${v.length} items)` : ''}]`;
}

/**
 * Scan valid JSON text for what JSON.parse hides: duplicate keys (JSON.parse keeps the last one
 * silently) in any object, and, when `integersOnly`, number literals that are not plain
 * non-negative integers ("1.0", "1e3", "-0": the header's only numbers are sizes and offsets).
 * Iterative, so deep nesting cannot overflow the stack. The text must already be valid JSON.
 */
function scanJson(text: string, file: string, integersOnly: boolean): void {
  const stack: (Set<string> | null)[] = []; // a Set of seen keys per open object, null per array
  let expectKey = false;
  let topKey: string | undefined; // the current top-level key, i.e. the tensor being read
  const n = text.length;
  let i = 0;
  while (i < n) {
    const c = text.charCodeAt(i);
    if (c === 0x7b /* { */) { stack.push(new Set()); expectKey = true; i++; }
    else if (c === 0x5b /* [ */) { stack.push(null); expectKey = false; i++; }
    else if (c === 0x7d /* } */ || c === 0x5d /* ] */) { stack.pop(); expectKey = false; i++; }
    else if (c === 0x2c /* , */) { expectKey = stack.length > 0 && stack[stack.length - 1] !== null; i++; }
    else if (c === 0x3a /* : */) { expectKey = false; i++; }
    else if (c === 0x22 /* " */) {
      // Find the closing quote: one not preceded by an odd number of backslashes.
      let j = i + 1;
      let end: number;
      for (;;) {
        end = text.indexOf('"', j);
        let k = end - 1;
        while (text.charCodeAt(k) === 0x5c) k--;
        if ((end - 1 - k) % 2 === 0) break;
        j = end + 1;
      }
      if (expectKey) {
        const raw = text.slice(i + 1, end);
        const key = raw.includes('\\') ? (JSON.parse(text.slice(i, end + 1)) as string) : raw;
        const seen = stack[stack.length - 1]!;
        if (seen.has(key)) {
          if (stack.length === 1) throw bad(file, undefined, `duplicate key ${q(key)} in the header (the format forbids duplicate tensor names)`);
          throw bad(file, topKey, `duplicate key ${q(key)} in the header`);
        }
        seen.add(key);
        if (stack.length === 1) topKey = key;
        expectKey = false;
      }
      i = end + 1;
    } else if (c === 0x2d /* - */ || (c >= 0x30 && c <= 0x39)) {
      let j = i + 1;
      while (j < n) {
        const d = text.charCodeAt(j);
        if ((d >= 0x30 && d <= 0x39) || d === 0x2e || d === 0x65 || d === 0x45 || d === 0x2b || d === 0x2d) j++;
        else break;
      }
      if (integersOnly && !/^(0|[1-9][0-9]*)$/.test(text.slice(i, j))) {
        throw bad(file, stack.length > 1 ? topKey : undefined,
          `number ${text.slice(i, Math.min(j, i + 40))} is not a non-negative integer (sizes and offsets must be)`);
      }
      i = j;
    } else i++; // whitespace, or the letters of true/false/null
  }
}

// Fatal: invalid UTF-8 is an error, not U+FFFD. ignoreBOM: keep a BOM so JSON.parse rejects it.
const utf8 = new TextDecoder('utf-8', { fatal: true, ignoreBOM: true });

/**
 * Parse and validate a header. `buf` is the start of the file (at least 8 + N bytes; the whole
 * file is fine); `fileSize` the size of the whole file. Pure: reads nothing else.
 */
export function parseHeader(buf: Uint8Array, fileSize: number, fileName: string): ParsedHeader {
  const file = fileName;
  if (!isCount(fileSize)) throw new ValueError(OP, `parseHeader: fileSize must be a non-negative integer, got ${fileSize}`);
  if (fileSize < 8) throw notSafetensors(file, `file is ${fileSize} bytes; a safetensors file is at least 8 (the header length)`);
  if (buf.byteLength < 8) throw bad(file, undefined, `only ${buf.byteLength} bytes given; the header length needs 8`);
  const n64 = new DataView(buf.buffer, buf.byteOffset, 8).getBigUint64(0, true);
  if (n64 === 0n) throw notSafetensors(file, 'header length is 0; the header must be a JSON object');
  if (n64 > BigInt(MAX_HEADER_BYTES)) throw notSafetensors(file, `header length ${n64} exceeds the limit of ${MAX_HEADER_BYTES} bytes`);
  const n = Number(n64);
  if (8 + n > fileSize) throw notSafetensors(file, `header length ${n} runs past the end of the file (${fileSize} bytes)`);
  if (buf.byteLength < 8 + n) throw bad(file, undefined, `header needs ${8 + n} bytes, only ${buf.byteLength} given`);
  const dataSize = fileSize - 8 - n;

  let text: string;
  try { text = utf8.decode(buf.subarray(8, 8 + n)); } catch {
    throw notSafetensors(file, 'header is not valid UTF-8');
  }
  let json: unknown;
  try { json = JSON.parse(text); } catch (e) {
    throw notSafetensors(file, `header is not valid JSON (${(e as Error).message})`);
  }
  if (!isPlainObject(json)) throw notSafetensors(file, 'header must be a JSON object');
  scanJson(text, file, true);

  const metadata: Record<string, string> = {};
  const entries: SafetensorsEntry[] = [];
  for (const name of Object.keys(json)) {
    const value = json[name];
    if (name === '__metadata__') {
      // null is what the reference writer's Option<HashMap> reads as "absent"; accept it likewise.
      if (value === null) continue;
      if (!isPlainObject(value)) throw bad(file, undefined, '__metadata__ must be an object of strings');
      for (const k of Object.keys(value)) {
        const v = value[k];
        if (typeof v !== 'string') throw bad(file, undefined, `__metadata__ value for key ${q(k)} must be a string, got ${showValue(v)}`);
        // defineProperty: a key named "__proto__" stays an ordinary own property.
        Object.defineProperty(metadata, k, { value: v, enumerable: true, writable: true, configurable: true });
      }
      continue;
    }
    if (!isPlainObject(value)) throw bad(file, name, `entry must be an object {dtype, shape, data_offsets}, got ${showValue(value)}`);
    const keys = Object.keys(value);
    for (const k of keys) {
      if (k !== 'dtype' && k !== 'shape' && k !== 'data_offsets') throw bad(file, name, `unexpected field ${q(k)} (allowed: dtype, shape, data_offsets)`);
    }
    for (const k of ['dtype', 'shape', 'data_offsets']) {
      if (!keys.includes(k)) throw bad(file, name, `missing field '${k}'`);
    }
    const code = value.dtype;
    if (typeof code !== 'string') throw bad(file, name, `dtype must be a string, got ${showValue(code)}`);
    const dtype = SAFETENSORS_TO_DTYPE.get(code);
    if (dtype === undefined) {
      throw new FormatError(OP, `unknown dtype ${q(code)} for tensor ${q(name)} in ${file}; known: ${KNOWN_CODES}`);
    }
    const shape = value.shape;
    if (!Array.isArray(shape)) throw bad(file, name, `shape must be an array, got ${showValue(shape)}`);
    for (const d of shape) {
      if (!isCount(d)) throw bad(file, name, `shape ${showValue(shape)}: every dimension must be a non-negative integer`);
    }
    const offs = value.data_offsets;
    if (!Array.isArray(offs) || offs.length !== 2 || !isCount(offs[0]) || !isCount(offs[1])) {
      throw bad(file, name, `data_offsets must be [begin, end] of non-negative integers, got ${showValue(offs)}`);
    }
    const [begin, end] = offs as [number, number];
    if (begin > end) throw bad(file, name, `data_offsets [${begin}, ${end}]: begin is after end`);
    if (end > dataSize) throw bad(file, name, `data_offsets [${begin}, ${end}] run past the data section (${dataSize} bytes)`);
    // numel * itemsize must equal end - begin. We stop multiplying once past 2^53, so the product
    // is exact whenever it could match, and no dimensions can make it overflow or wrap around.
    const itemsize = SAFETENSORS_ITEMSIZE[dtype];
    const want = end - begin;
    let bytes = shape.includes(0) ? 0 : itemsize;
    for (const d of shape as number[]) {
      if (bytes > Number.MAX_SAFE_INTEGER) break;
      bytes *= d;
    }
    if (bytes !== want) {
      const needs = bytes > Number.MAX_SAFE_INTEGER ? `more than ${Number.MAX_SAFE_INTEGER}` : String(bytes);
      throw bad(file, name, `shape ${showValue(shape)} of ${code} needs ${needs} bytes but data_offsets [${begin}, ${end}] hold ${want}`);
    }
    entries.push({ name, dtype, shape: (shape as number[]).slice(), byteOffset: 8 + n + begin, byteLength: want });
  }

  // The tensors must tile the data section exactly: no overlap, no hole, nothing left over.
  entries.sort((a, b) => a.byteOffset - b.byteOffset || a.byteLength - b.byteLength);
  let pos = 8 + n;
  for (const e of entries) {
    const rel = (x: number) => x - 8 - n;
    if (e.byteOffset < pos) throw bad(file, e.name, `data_offsets [${rel(e.byteOffset)}, ${rel(e.byteOffset + e.byteLength)}] overlap the previous tensor (ending at ${rel(pos)})`);
    if (e.byteOffset > pos) throw bad(file, e.name, `gap in the data section: bytes [${rel(pos)}, ${rel(e.byteOffset)}) belong to no tensor`);
    pos = e.byteOffset + e.byteLength;
  }
  if (pos !== fileSize) throw bad(file, undefined, `data section is ${dataSize} bytes but the tensors cover only ${pos - 8 - n} (no trailing bytes allowed)`);
  return { headerLength: n, entries, metadata };
}

// ---------------------------------------------------------------------------------------------
// Reading

/** Default read size: large enough that per-call overhead vanishes, small enough to share the
 *  work among the thread pool. Chosen with bench/safetensors_load.ts. */
export const DEFAULT_CHUNK_BYTES = 16 * 1024 * 1024;
/** Reads in flight at once for one readInto (Node's thread pool has 4 threads by default). */
export const DEFAULT_READ_CONCURRENCY = 4;
/** Node refuses single reads above 2^31 - 1 bytes. */
const MAX_IO_BYTES = 1 << 30;

export interface ReadIntoOptions {
  /** Bytes per read call (default DEFAULT_CHUNK_BYTES). */
  chunkBytes?: number;
  /** Reads in flight at once (default DEFAULT_READ_CONCURRENCY). */
  concurrency?: number;
  /** Called after each chunk with the bytes of this tensor read so far (increasing). */
  onProgress?(bytesDone: number): void;
}

function readAsync(fd: number, buf: Uint8Array, off: number, len: number, pos: number): Promise<number> {
  return new Promise((resolve, reject) => {
    fs.read(fd, buf, off, len, pos, (err, n) => (err ? reject(err) : resolve(n)));
  });
}

function checkChunk(chunkBytes: number | undefined, what: string): number {
  const c = chunkBytes ?? DEFAULT_CHUNK_BYTES;
  if (!Number.isSafeInteger(c) || c <= 0) throw new ValueError(OP, `${what}: chunkBytes must be a positive integer, got ${c}`);
  return Math.min(c, MAX_IO_BYTES);
}

/**
 * A lazy handle on one safetensors file: the header is parsed and validated on open, tensor data
 * is read only when asked for. Keeps the file descriptor open until close().
 */
export class SafetensorsFile {
  readonly path: string;
  readonly metadata: Record<string, string>;
  /** In file order. */
  readonly entries: Map<string, SafetensorsEntry>;
  readonly headerLength: number;
  readonly fileSize: number;
  private fd: number;
  private closing = false;
  private closed: Promise<void> | undefined;
  private inflight = 0;
  private drained: (() => void) | undefined;

  private constructor(filePath: string, fd: number, fileSize: number, h: ParsedHeader) {
    this.path = filePath;
    this.fd = fd;
    this.fileSize = fileSize;
    this.headerLength = h.headerLength;
    this.metadata = h.metadata;
    this.entries = new Map(h.entries.map((e) => [e.name, e]));
  }

  static async open(filePath: string): Promise<SafetensorsFile> {
    const fd = await new Promise<number>((res, rej) => fs.open(filePath, 'r', (e, f) => (e ? rej(fileErrorOf(OP, filePath, e)) : res(f))));
    try {
      const size = (await new Promise<fs.Stats>((res, rej) => fs.fstat(fd, (e, s) => (e ? rej(e) : res(s))))).size;
      const readFully = async (len: number): Promise<Uint8Array> => {
        const b = new Uint8Array(len);
        for (let got = 0; got < len;) {
          const r = await readAsync(fd, b, got, len - got, got);
          if (r === 0) throw bad(filePath, undefined, 'file ended while reading the header (modified while opening?)');
          got += r;
        }
        return b;
      };
      const h = parseHeader(await readFully(headerBytesToRead(await readFully(Math.min(size, 8)), size, filePath)), size, filePath);
      return new SafetensorsFile(filePath, fd, size, h);
    } catch (e) {
      fs.closeSync(fd);
      throw fileErrorOf(OP, filePath, e);
    }
  }

  static openSync(filePath: string): SafetensorsFile {
    let fd: number;
    try { fd = fs.openSync(filePath, 'r'); } catch (e) { throw fileErrorOf(OP, filePath, e); }
    try {
      const size = fs.fstatSync(fd).size;
      const readFully = (len: number): Uint8Array => {
        const b = new Uint8Array(len);
        for (let got = 0; got < len;) {
          const r = fs.readSync(fd, b, got, len - got, got);
          if (r === 0) throw bad(filePath, undefined, 'file ended while reading the header (modified while opening?)');
          got += r;
        }
        return b;
      };
      const h = parseHeader(readFully(headerBytesToRead(readFully(Math.min(size, 8)), size, filePath)), size, filePath);
      return new SafetensorsFile(filePath, fd, size, h);
    } catch (e) {
      fs.closeSync(fd);
      throw fileErrorOf(OP, filePath, e);
    }
  }

  /** Tensor names, in file order. */
  names(): string[] {
    return [...this.entries.keys()];
  }

  /** The entry for `name`; ValueError naming a few of the file's tensors when it has none. */
  entry(name: string): SafetensorsEntry {
    const e = this.entries.get(name);
    if (e === undefined) {
      const some = this.names().slice(0, 5).map(q).join(', ');
      throw new ValueError(OP, `no tensor ${q(name)} in ${this.path} (${this.entries.size} tensors${some ? `, e.g. ${some}` : ''})`);
    }
    return e;
  }

  /** The tensor's bytes in a fresh buffer of exactly its length. */
  async readBytes(name: string): Promise<Uint8Array> {
    const dest = freshBytes(this.entry(name).byteLength);
    await this.readInto(name, dest);
    return dest;
  }

  /** Synchronous readBytes (for openSync users). */
  readBytesSync(name: string): Uint8Array {
    const e = this.entry(name);
    const dest = freshBytes(e.byteLength);
    this.checkOpen();
    for (let done = 0; done < e.byteLength;) {
      const r = fs.readSync(this.fd, dest, done, Math.min(e.byteLength - done, MAX_IO_BYTES), e.byteOffset + done);
      if (r === 0) throw this.truncated(e);
      done += r;
    }
    return dest;
  }

  /**
   * Read the tensor straight into `dest` (exactly its byte length) in chunks, several in flight:
   * no intermediate whole-file or whole-tensor buffer.
   */
  async readInto(name: string, dest: Uint8Array, opts: ReadIntoOptions = {}): Promise<void> {
    const e = this.entry(name);
    if (dest.byteLength !== e.byteLength) {
      throw new ValueError(OP, `readInto ${q(name)}: destination is ${dest.byteLength} bytes, the tensor is ${e.byteLength}`);
    }
    checkOptions('safetensors.readInto', opts, ['chunkBytes', 'concurrency', 'onProgress']);
    const chunk = checkChunk(opts.chunkBytes, 'readInto');
    const conc = opts.concurrency ?? DEFAULT_READ_CONCURRENCY;
    if (!Number.isSafeInteger(conc) || conc < 1) throw new ValueError(OP, `readInto: concurrency must be a positive integer, got ${conc}`);
    const total = e.byteLength;
    let next = 0;
    let done = 0;
    // Workers take the next chunk until none is left; each chunk lands at its own place in dest.
    let failed = false;
    const worker = async (): Promise<void> => {
      while (next < total && !failed) {
        const off = next;
        const len = Math.min(chunk, total - off);
        next += len;
        try {
          await this.readRange(e, dest, off, len);
        } catch (err) {
          failed = true; // the other workers stop after their current chunk
          throw err;
        }
        done += len;
        opts.onProgress?.(done);
      }
    };
    await this.operation(async () => {
      const workers: Promise<void>[] = [];
      for (let w = 0; w < Math.min(conc, Math.ceil(total / chunk)); w++) workers.push(worker());
      // allSettled: no read may still be writing into dest (or using the fd) once we return.
      const results = await Promise.allSettled(workers);
      const bad = results.find((r): r is PromiseRejectedResult => r.status === 'rejected');
      if (bad) throw bad.reason;
    });
  }

  /**
   * Stream the tensor through one staging buffer of min(chunkBytes, tensor size) bytes: `sink`
   * gets a view of that SAME buffer for every chunk, in order, and must finish with it (copy or
   * upload; return a promise to make the next read wait) before it returns. An empty tensor
   * calls sink zero times.
   */
  async readStream(name: string, chunkBytes: number,
    sink: (chunk: Uint8Array, offsetInTensor: number) => void | Promise<void>): Promise<void> {
    const e = this.entry(name);
    const chunk = checkChunk(chunkBytes, 'readStream');
    if (e.byteLength === 0) return;
    const staging = new Uint8Array(Math.min(chunk, e.byteLength));
    await this.operation(async () => {
      for (let off = 0; off < e.byteLength;) {
        const len = Math.min(staging.byteLength, e.byteLength - off);
        await this.readRange(e, staging, 0, len, off);
        await sink(len === staging.byteLength ? staging : staging.subarray(0, len), off);
        off += len;
      }
    });
  }

  /** Close the file. Waits for read operations in flight (the descriptor must not be reused under
   *  them); later reads fail with ValueError. */
  close(): Promise<void> {
    this.closed ??= (async () => {
      this.closing = true;
      if (this.inflight > 0) await new Promise<void>((res) => { this.drained = res; });
      const fd = this.fd;
      this.fd = -1;
      await new Promise<void>((res, rej) => fs.close(fd, (err) => (err ? rej(err) : res())));
    })();
    return this.closed;
  }

  /** Synchronous close; only when no async read is in flight. */
  closeSync(): void {
    if (this.closing) return;
    if (this.inflight > 0) throw new ValueError(OP, `closeSync ${this.path}: reads are in flight; use close()`);
    this.closing = true;
    this.closed = Promise.resolve();
    fs.closeSync(this.fd);
    this.fd = -1;
  }

  /** Run one read operation; close() waits for those begun before it. */
  private async operation<T>(fn: () => Promise<T>): Promise<T> {
    if (this.closing) throw new ValueError(OP, `${this.path} is closed`);
    this.inflight++;
    try {
      return await fn();
    } finally {
      if (--this.inflight === 0 && this.drained) this.drained();
    }
  }

  private checkOpen(): void {
    if (this.closing) throw new ValueError(OP, `${this.path} is closed`);
  }

  private truncated(e: SafetensorsEntry): FormatError {
    return bad(this.path, e.name, `file ended before the tensor's data (${this.fileSize} bytes at open; truncated since?)`);
  }

  /** Read `len` bytes of tensor `e` starting at `tensorOff` (default `destOff`) into dest[destOff..]. */
  private async readRange(e: SafetensorsEntry, dest: Uint8Array, destOff: number, len: number, tensorOff = destOff): Promise<void> {
    for (let got = 0; got < len;) {
      const r = await readAsync(this.fd, dest, destOff + got, len - got, e.byteOffset + tensorOff + got);
      if (r === 0) throw this.truncated(e);
      got += r;
    }
  }
}

/** From the first 8 bytes, how many to read for the header; validates the length first. */
function headerBytesToRead(first8: Uint8Array, fileSize: number, file: string): number {
  if (fileSize < 8) return fileSize; // parseHeader reports it
  const n = new DataView(first8.buffer, first8.byteOffset, 8).getBigUint64(0, true);
  // Out-of-range lengths: read just 8 bytes and let parseHeader name the rule broken.
  if (n === 0n || n > BigInt(MAX_HEADER_BYTES) || 8n + n > BigInt(fileSize)) return 8;
  return 8 + Number(n);
}

/** An unpooled buffer of its own, not zero-filled (every byte is about to be overwritten). */
function freshBytes(n: number): Uint8Array {
  const b = Buffer.allocUnsafeSlow(n);
  return new Uint8Array(b.buffer, b.byteOffset, b.byteLength);
}

// ---------------------------------------------------------------------------------------------
// Writing

export interface SafetensorsInput {
  name: string;
  /** Engine dtype name; complex dtypes have no safetensors code (UnsupportedError). */
  dtype: string;
  shape: readonly number[];
  /** Little-endian, C-contiguous bytes: exactly numel * itemsize. */
  data: Uint8Array;
}

interface Prepared { header: Uint8Array; ordered: SafetensorsInput[]; dataSize: number }

/** Compare strings by code point (= UTF-8 byte order, the Rust library's order). */
function cmpCodePoints(a: string, b: string): number {
  const n = Math.min(a.length, b.length);
  for (let i = 0; i < n; i++) {
    const x = a.codePointAt(i)!;
    const y = b.codePointAt(i)!;
    if (x !== y) return x - y;
    if (x > 0xffff) i++;
  }
  return a.length - b.length;
}

/**
 * Tensor order in written files: as the Python library writes them, by dtype in decreasing
 * alignment (the library's Dtype enum order: I64, F64, F32, I32, BF16, F16, I16, F8_E4M3,
 * F8_E5M2, I8, U8, BOOL), then by name. With the 8-byte-aligned header this puts every tensor at
 * an offset that is a multiple of its item size. Output is byte-identical to the Python library's
 * when metadata has at most one key (it writes metadata keys in hash order).
 */
function prepare(tensors: readonly SafetensorsInput[], metadata: Record<string, string> | undefined): Prepared {
  const W = 'safetensors.write';
  const seen = new Set<string>();
  const typed: { t: SafetensorsInput; dtype: SafetensorsDType }[] = [];
  for (const t of tensors) {
    if (typeof t.name !== 'string') throw new ValueError(W, `tensor name must be a string, got ${showValue(t.name)}`);
    if (t.name === '__metadata__') throw new ValueError(W, `'__metadata__' is reserved and cannot name a tensor`);
    if (seen.has(t.name)) throw new ValueError(W, `duplicate tensor name ${q(t.name)}`);
    seen.add(t.name);
    if (!Object.prototype.hasOwnProperty.call(DTYPE_TO_SAFETENSORS, t.dtype)) {
      if (t.dtype === 'complex64' || t.dtype === 'complex128') {
        throw new UnsupportedError(W, `tensor ${q(t.name)}: safetensors has no code for ${t.dtype}; save torch.view_as_real(t) instead`);
      }
      throw new ValueError(W, `tensor ${q(t.name)}: unknown dtype ${q(String(t.dtype))}`);
    }
    const dtype = t.dtype as SafetensorsDType;
    let numel = 1;
    for (const d of t.shape) {
      if (!isCount(d)) throw new ValueError(W, `tensor ${q(t.name)}: shape ${showValue(t.shape)} must hold non-negative integers`);
      numel *= d;
    }
    if (!Number.isSafeInteger(numel * SAFETENSORS_ITEMSIZE[dtype]) || numel * SAFETENSORS_ITEMSIZE[dtype] !== t.data.byteLength) {
      throw new ValueError(W, `tensor ${q(t.name)}: shape ${showValue(t.shape)} of ${dtype} needs ${numel * SAFETENSORS_ITEMSIZE[dtype]} bytes, data has ${t.data.byteLength}`);
    }
    typed.push({ t, dtype });
  }
  typed.sort((a, b) => WRITE_RANK[b.dtype] - WRITE_RANK[a.dtype] || cmpCodePoints(a.t.name, b.t.name));

  // Compact JSON, fields in the reference writer's order.
  const parts: string[] = [];
  if (metadata !== undefined) {
    const m: string[] = [];
    for (const k of Object.keys(metadata)) {
      const v = metadata[k];
      if (typeof v !== 'string') throw new ValueError(W, `metadata value for ${q(k)} must be a string, got ${showValue(v)}`);
      m.push(`${JSON.stringify(k)}:${JSON.stringify(v)}`);
    }
    parts.push(`"__metadata__":{${m.join(',')}}`);
  }
  let offset = 0;
  for (const { t, dtype } of typed) {
    const end = offset + t.data.byteLength;
    parts.push(`${JSON.stringify(t.name)}:{"dtype":"${DTYPE_TO_SAFETENSORS[dtype]}","shape":[${t.shape.join(',')}],"data_offsets":[${offset},${end}]}`);
    offset = end;
  }
  const json = Buffer.from(`{${parts.join(',')}}`, 'utf8');
  const padded = Math.ceil(json.byteLength / 8) * 8; // spaces up to a multiple of 8, as the reference writer does
  if (padded > MAX_HEADER_BYTES) throw new ValueError(W, `header would be ${padded} bytes, over the format's limit of ${MAX_HEADER_BYTES}`);
  const header = new Uint8Array(8 + padded).fill(0x20, 8);
  new DataView(header.buffer).setBigUint64(0, BigInt(padded), true);
  header.set(json, 8);
  return { header, ordered: typed.map((x) => x.t), dataSize: offset };
}

/** The whole file in memory. See prepare() for the tensor order. */
export function encodeSafetensors(tensors: readonly SafetensorsInput[], metadata?: Record<string, string>): Uint8Array {
  const { header, ordered, dataSize } = prepare(tensors, metadata);
  const out = new Uint8Array(header.byteLength + dataSize);
  out.set(header, 0);
  let pos = header.byteLength;
  for (const t of ordered) { out.set(t.data, pos); pos += t.data.byteLength; }
  return out;
}

/**
 * Write a file, streaming each tensor's bytes to disk (no whole-file buffer). Writes to a
 * temporary file beside `filePath` and renames it into place, so a crash never leaves a
 * half-written file under the real name. Same layout and order as encodeSafetensors.
 */
export async function writeSafetensors(filePath: string, tensors: readonly SafetensorsInput[],
  metadata?: Record<string, string>): Promise<void> {
  const { header, ordered } = prepare(tensors, metadata);
  const tmp = `${filePath}.tmp-${process.pid}-${Math.random().toString(36).slice(2, 10)}`;
  const fh = await fs.promises.open(tmp, 'w').catch((e: unknown) => { throw fileErrorOf(`${OP}.write`, filePath, e); });
  try {
    const writeAll = async (b: Uint8Array) => {
      for (let off = 0; off < b.byteLength;) {
        const { bytesWritten } = await fh.write(b, off, Math.min(b.byteLength - off, MAX_IO_BYTES));
        off += bytesWritten;
      }
    };
    await writeAll(header);
    for (const t of ordered) await writeAll(t.data);
    await fh.close();
    await fs.promises.rename(tmp, filePath);
  } catch (e) {
    await fh.close().catch(() => undefined);
    await fs.promises.unlink(tmp).catch(() => undefined);
    throw fileErrorOf(`${OP}.write`, filePath, e);
  }
}

// ---------------------------------------------------------------------------------------------
// Sharded checkpoints

export interface ShardedSafetensors {
  /** Each shard once, in the order first named by the weight map. */
  files: SafetensorsFile[];
  /** Tensor name -> the shard holding it. */
  weightMap: Map<string, SafetensorsFile>;
  /** The index's "metadata" object (e.g. total_size), or {} when absent. */
  metadata: Record<string, unknown>;
}

/**
 * Open a sharded checkpoint from its model.safetensors.index.json ({metadata, weight_map:
 * {tensor: shard file}}). Shard paths are relative to the index's folder and may not leave it.
 * Every shard is opened (headers validated) and every mapped tensor must exist in its shard.
 */
export async function openSharded(indexJsonPath: string): Promise<ShardedSafetensors> {
  const file = indexJsonPath;
  const text = await fs.promises.readFile(indexJsonPath, 'utf8').catch((e: unknown) => { throw fileErrorOf(OP, indexJsonPath, e); });
  let json: unknown;
  try { json = JSON.parse(text); } catch (e) {
    throw bad(file, undefined, `index is not valid JSON (${(e as Error).message})`);
  }
  if (!isPlainObject(json)) throw bad(file, undefined, 'index must be a JSON object');
  scanJson(text, file, false);
  const wm = json.weight_map;
  if (!isPlainObject(wm)) throw bad(file, undefined, "index needs a 'weight_map' object {tensor name: shard file}");
  const meta = json.metadata ?? {};
  if (!isPlainObject(meta)) throw bad(file, undefined, "index 'metadata' must be an object");

  const dir = path.dirname(path.resolve(indexJsonPath));
  const shardNames: string[] = [];
  for (const [tensor, shard] of Object.entries(wm)) {
    if (typeof shard !== 'string' || shard === '') throw bad(file, tensor, `weight_map value must be a shard file name, got ${showValue(shard)}`);
    const rel = path.relative(dir, path.resolve(dir, shard));
    if (path.isAbsolute(shard) || rel === '' || rel.startsWith('..')) throw bad(file, tensor, `shard path ${q(shard)} leaves the index's folder`);
    if (!shardNames.includes(shard)) shardNames.push(shard);
  }

  const opened = await Promise.allSettled(shardNames.map((s) => SafetensorsFile.open(path.join(dir, s))));
  const failed = opened.findIndex((r) => r.status === 'rejected');
  if (failed >= 0) {
    await Promise.all(opened.map((r) => (r.status === 'fulfilled' ? r.value.close() : undefined)));
    const err = (opened[failed] as PromiseRejectedResult).reason as NodeJS.ErrnoException;
    if (err?.code === 'ENOENT') throw bad(file, undefined, `shard ${q(shardNames[failed]!)} does not exist`);
    throw err;
  }
  const files = opened.map((r) => (r as PromiseFulfilledResult<SafetensorsFile>).value);
  const byName = new Map(shardNames.map((s, i) => [s, files[i]!]));
  const weightMap = new Map<string, SafetensorsFile>();
  for (const [tensor, shard] of Object.entries(wm)) {
    const f = byName.get(shard as string)!;
    if (!f.entries.has(tensor)) {
      await Promise.all(files.map((x) => x.close()));
      throw bad(file, tensor, `weight_map says shard ${q(shard as string)} holds it, but that file has no such tensor`);
    }
    weightMap.set(tensor, f);
  }
  return { files, weightMap, metadata: meta };
}
