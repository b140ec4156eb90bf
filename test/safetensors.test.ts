// Tests for src/io/safetensors.ts (format level) and src/io/progress.ts.
// The fuzz test feeds thousands of corrupted files to parseHeader: each must parse or throw
// FormatError; nothing else (no RangeError/TypeError, no hang, no giant allocation).

import { test } from 'node:test';
import assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { spawnSync } from 'node:child_process';
import { FormatError, UnsupportedError, ValueError } from '../src/errors.js';
import {
  DTYPE_TO_SAFETENSORS, SAFETENSORS_TO_DTYPE, SAFETENSORS_ITEMSIZE, SafetensorsFile, encodeSafetensors,
  openSharded, parseHeader, writeSafetensors, type SafetensorsDType, type SafetensorsInput,
} from '../src/io/safetensors.js';
import { Progress } from '../src/io/progress.js';

// ---- helpers -------------------------------------------------------------------------------

/** Deterministic PRNG (mulberry32), so a failing mutant can be reproduced from its index. */
function rng(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

function bytesOf(n: number, seed: number): Uint8Array {
  const r = rng(seed);
  const b = new Uint8Array(n);
  for (let i = 0; i < n; i++) b[i] = Math.floor(r() * 256);
  return b;
}

function tensor(name: string, dtype: SafetensorsDType, shape: number[], seed = 1): SafetensorsInput {
  const numel = shape.reduce((a, b) => a * b, 1);
  return { name, dtype, shape, data: bytesOf(numel * SAFETENSORS_ITEMSIZE[dtype], seed) };
}

/** A file from raw header text (or bytes) and a data section; `len` overrides the length prefix. */
function rawFile(header: string | Uint8Array, data: Uint8Array | number = 0, len?: bigint): Uint8Array {
  const h = typeof header === 'string' ? new TextEncoder().encode(header) : header;
  const d = typeof data === 'number' ? new Uint8Array(data) : data;
  const out = new Uint8Array(8 + h.byteLength + d.byteLength);
  new DataView(out.buffer).setBigUint64(0, len ?? BigInt(h.byteLength), true);
  out.set(h, 8);
  out.set(d, 8 + h.byteLength);
  return out;
}

const parse = (f: Uint8Array, name = 'mem.safetensors') => parseHeader(f, f.byteLength, name);

function expectFormatError(f: Uint8Array, fragment?: string | RegExp): FormatError {
  let caught: unknown;
  try { parse(f); } catch (e) { caught = e; }
  assert.ok(caught instanceof FormatError, `expected FormatError, got ${caught === undefined ? 'success' : String(caught)}`);
  if (fragment !== undefined) {
    const m = (caught as Error).message;
    if (typeof fragment === 'string') assert.ok(m.includes(fragment), `message ${JSON.stringify(m)} lacks ${JSON.stringify(fragment)}`);
    else assert.match(m, fragment);
  }
  return caught as FormatError;
}

const tmpRoot = fs.mkdtempSync(path.join(os.tmpdir(), 'nbx-safetensors-test-'));
process.on('exit', () => fs.rmSync(tmpRoot, { recursive: true, force: true }));

// Valid files the fuzz test starts from.
const VALID_SETS: { tensors: SafetensorsInput[]; metadata?: Record<string, string> }[] = [
  {
    tensors: [
      tensor('w.f32', 'float32', [3, 4], 1), tensor('b.f16', 'float16', [5], 2), tensor('bf', 'bfloat16', [2, 2], 3),
      tensor('i64', 'int64', [3], 4), tensor('f64', 'float64', [2, 1], 5), tensor('i32', 'int32', [2, 3], 6),
      tensor('i16', 'int16', [3], 7), tensor('i8', 'int8', [7], 8), tensor('u8', 'uint8', [4], 9), tensor('mask', 'bool', [5], 10),
      tensor('f8a', 'float8_e4m3fn', [3], 11), tensor('f8b', 'float8_e5m2', [2], 12),
      tensor('scalar', 'float32', [], 13), tensor('empty', 'float32', [0, 3], 14), tensor('empty8', 'int64', [2, 0], 15),
    ],
    metadata: { format: 'pt', 'nbx.note': 'fuzz "quoted" \\ \u00e9\u4e2d' },
  },
  { tensors: [tensor('only', 'float32', [2, 3], 20)] },
  { tensors: [], metadata: { framework: 'pt' } },
  { tensors: [tensor('z', 'int8', [0], 21), tensor('\u00e9t\u00e9/\u{1F600}', 'float16', [1, 1, 1], 22), tensor('', 'uint8', [1], 23)], metadata: {} },
];
const VALID = VALID_SETS.map((s) => encodeSafetensors(s.tensors, s.metadata));

// ---- round trip and reference bytes --------------------------------------------------------

test('dtype mapping both ways', () => {
  assert.equal(Object.keys(DTYPE_TO_SAFETENSORS).length, 12);
  for (const [d, c] of Object.entries(DTYPE_TO_SAFETENSORS)) assert.equal(SAFETENSORS_TO_DTYPE.get(c), d);
  assert.deepEqual([...SAFETENSORS_TO_DTYPE.keys()], ['BOOL', 'U8', 'I8', 'I16', 'I32', 'I64', 'F16', 'BF16', 'F32', 'F64', 'F8_E4M3', 'F8_E5M2']);
  assert.deepEqual(Object.values(SAFETENSORS_ITEMSIZE), [1, 1, 1, 2, 4, 8, 2, 2, 4, 8, 1, 1]);
});

test('round trip: encode -> parse -> same tensors, re-encode byte-identical', () => {
  for (const [i, set] of VALID_SETS.entries()) {
    const file = VALID[i]!;
    const h = parse(file);
    assert.equal((8 + h.headerLength) % 8, 0, 'header padded to 8 bytes');
    assert.deepEqual({ ...h.metadata }, set.metadata ?? {});
    assert.equal(h.entries.length, set.tensors.length);
    for (const t of set.tensors) {
      const e = h.entries.find((x) => x.name === t.name)!;
      assert.ok(e, t.name);
      assert.equal(e.dtype, t.dtype);
      assert.deepEqual(e.shape, t.shape);
      assert.equal(e.byteOffset % SAFETENSORS_ITEMSIZE[e.dtype], 0, 'aligned to its item size');
      assert.deepEqual(file.subarray(e.byteOffset, e.byteOffset + e.byteLength), t.data);
    }
    // Re-encode from what was parsed, in a shuffled order: the writer's sort makes it identical.
    const again = encodeSafetensors(h.entries.slice().reverse().map((e) => ({
      name: e.name, dtype: e.dtype, shape: e.shape, data: file.subarray(e.byteOffset, e.byteOffset + e.byteLength),
    })), set.metadata);
    assert.deepEqual(again, file);
  }
});

test('writer output matches the reference implementation byte for byte', () => {
  // Vectors from the Rust library's own tests (safetensors/src/tensor.rs).
  const f32 = new Uint8Array(new Float32Array([0, 1, 2, 3, 4, 5]).buffer);
  assert.deepEqual(Array.from(encodeSafetensors([{ name: 'attn.0', dtype: 'float32', shape: [1, 2, 3], data: f32 }])), [
    64, 0, 0, 0, 0, 0, 0, 0, 123, 34, 97, 116, 116, 110, 46, 48, 34, 58, 123, 34, 100,
    116, 121, 112, 101, 34, 58, 34, 70, 51, 50, 34, 44, 34, 115, 104, 97, 112, 101, 34,
    58, 91, 49, 44, 50, 44, 51, 93, 44, 34, 100, 97, 116, 97, 95, 111, 102, 102, 115,
    101, 116, 115, 34, 58, 91, 48, 44, 50, 52, 93, 125, 125, 0, 0, 0, 0, 0, 0, 128, 63,
    0, 0, 0, 64, 0, 0, 64, 64, 0, 0, 128, 64, 0, 0, 160, 64]);
  assert.deepEqual(Array.from(encodeSafetensors([])), [8, 0, 0, 0, 0, 0, 0, 0, 123, 125, 32, 32, 32, 32, 32, 32]);
  assert.deepEqual(Array.from(encodeSafetensors([], { framework: 'pt' })), [
    40, 0, 0, 0, 0, 0, 0, 0, 123, 34, 95, 95, 109, 101, 116, 97, 100, 97, 116, 97, 95,
    95, 34, 58, 123, 34, 102, 114, 97, 109, 101, 119, 111, 114, 107, 34, 58, 34, 112,
    116, 34, 125, 125, 32, 32, 32, 32, 32]);
  // Order: decreasing alignment (the reference Dtype enum, descending), then name.
  const h = parse(encodeSafetensors([tensor('a', 'bool', [1]), tensor('b', 'float32', [1]), tensor('a2', 'float32', [1]),
    tensor('c', 'int64', [1]), tensor('d', 'float64', [1]), tensor('e', 'bfloat16', [1]), tensor('f', 'float16', [1])]));
  assert.deepEqual(h.entries.map((e) => e.name), ['c', 'd', 'a2', 'b', 'e', 'f', 'a']);
});

test('writer rejects bad input with typed errors', () => {
  assert.throws(() => encodeSafetensors([tensor('x', 'float32', [2]), tensor('x', 'float32', [2])]), ValueError);
  assert.throws(() => encodeSafetensors([{ name: 'x', dtype: 'float32', shape: [3], data: new Uint8Array(8) }]), ValueError);
  assert.throws(() => encodeSafetensors([{ name: 'x', dtype: 'complex64', shape: [1], data: new Uint8Array(8) }]), UnsupportedError);
  assert.throws(() => encodeSafetensors([{ name: 'x', dtype: 'float', shape: [1], data: new Uint8Array(4) }]), ValueError);
  assert.throws(() => encodeSafetensors([{ name: 'x', dtype: 'float32', shape: [-1], data: new Uint8Array(0) }]), ValueError);
  assert.throws(() => encodeSafetensors([tensor('__metadata__', 'float32', [1])]), ValueError);
  assert.throws(() => encodeSafetensors([], { k: 1 as unknown as string }), ValueError);
});

test('writeSafetensors streams the same bytes encodeSafetensors builds, atomically', async () => {
  const p = path.join(tmpRoot, 'written.safetensors');
  await writeSafetensors(p, VALID_SETS[0]!.tensors, VALID_SETS[0]!.metadata);
  assert.deepEqual(new Uint8Array(fs.readFileSync(p)), VALID[0]);
  assert.deepEqual(fs.readdirSync(tmpRoot).filter((f) => f.includes('.tmp-')), [], 'no temporary file left');
});

// ---- validation rules, one by one ----------------------------------------------------------

const T = (dtype: string, shape: unknown, offs: unknown) => JSON.stringify({ dtype, shape, data_offsets: offs });

test('each validation rule fails with a FormatError that names it', () => {
  expectFormatError(new Uint8Array(5), 'at least 8');
  expectFormatError(rawFile('', 0), 'header length is 0');
  expectFormatError(rawFile('{}', 0, 100_000_001n), 'exceeds the limit');
  expectFormatError(rawFile('{}', 0, 1n << 63n), 'exceeds the limit');
  expectFormatError(rawFile('{}', 0, 0xffffffffffffffffn), 'exceeds the limit');
  expectFormatError(rawFile('{}', 0, 3n), 'runs past the end');
  expectFormatError(rawFile(new Uint8Array([0x7b, 0xff, 0x7d])), 'UTF-8');
  expectFormatError(rawFile(new Uint8Array([0x7b, 0xed, 0xa0, 0x80, 0x7d])), 'UTF-8'); // encoded lone surrogate
  expectFormatError(rawFile('\ufeff{}'), 'not valid JSON'); // a BOM is not JSON
  expectFormatError(rawFile('{"a":'), 'not valid JSON');
  expectFormatError(rawFile('[]'), 'JSON object');
  expectFormatError(rawFile('null'), 'JSON object');
  expectFormatError(rawFile('{"__metadata__":{"k":1}}'), 'must be a string');
  expectFormatError(rawFile('{"__metadata__":[]}'), '__metadata__ must be an object');
  expectFormatError(rawFile(`{"x":${T('F32', [1], [0, 4]).slice(0, -1)},"extra":1}}`, 4), "unexpected field 'extra'");
  expectFormatError(rawFile('{"x":{"dtype":"F32","shape":[1]}}', 4), "missing field 'data_offsets'");
  expectFormatError(rawFile('{"x":[]}', 0), "tensor 'x'");
  expectFormatError(rawFile(`{"x":${T('F32', 'abc', [0, 4])}}`, 4), 'shape must be an array');
  expectFormatError(rawFile('{"x":{"dtype":"F32","shape":[1.5],"data_offsets":[0,4]}}', 4), 'not a non-negative integer');
  expectFormatError(rawFile('{"x":{"dtype":"F32","shape":[1.0],"data_offsets":[0,4]}}', 4), 'not a non-negative integer');
  expectFormatError(rawFile('{"x":{"dtype":"F32","shape":[1e0],"data_offsets":[0,4]}}', 4), 'not a non-negative integer');
  expectFormatError(rawFile('{"x":{"dtype":"F32","shape":[-0],"data_offsets":[0,4]}}', 4), 'not a non-negative integer');
  expectFormatError(rawFile('{"x":{"dtype":"F32","shape":[1],"data_offsets":[-4,0]}}', 4), 'not a non-negative integer');
  expectFormatError(rawFile('{"x":{"dtype":"F32","shape":[99999999999999999999],"data_offsets":[0,4]}}', 4), 'every dimension');
  expectFormatError(rawFile(`{"x":${T('F32', [1], [0])}}`, 4), 'data_offsets must be');
  expectFormatError(rawFile(`{"x":${T('F32', [1], [4, 0])}}`, 4), 'begin is after end');
  expectFormatError(rawFile(`{"x":${T('F32', [1], [0, 8])}}`, 4), 'run past the data section');
  expectFormatError(rawFile(`{"x":${T('F32', [2], [0, 4])}}`, 4), 'needs 8 bytes');
  // Product overflows 2^64 in u64 arithmetic: must be caught, not wrapped around to a match.
  expectFormatError(rawFile(`{"x":${T('U8', [2 ** 32, 2 ** 32, 1], [0, 0])}}`, 0), 'needs more than 9007199254740991');
  expectFormatError(rawFile(`{"x":${T('F32', [2 ** 52, 2 ** 52], [0, 4])}}`, 4), 'needs more than 9007199254740991');
  // ...while a zero anywhere makes it empty, however big the other dimensions.
  parse(rawFile(`{"x":${T('F32', [2 ** 52, 2 ** 52, 0], [0, 0])}}`, 0));
  expectFormatError(rawFile(`{"x":${T('F32', [1], [0, 4])},"x":${T('F32', [1], [0, 4])}}`, 4), "duplicate key 'x'");
  expectFormatError(rawFile(`{"x":${T('F32', [1], [0, 4])},"\\u0078":${T('F32', [1], [4, 8])}}`, 8), "duplicate key 'x'");
  expectFormatError(rawFile('{"x":{"dtype":"F32","dtype":"F32","shape":[1],"data_offsets":[0,4]}}', 4), "duplicate key 'dtype'");
  expectFormatError(rawFile('{"__metadata__":{"a":"1","a":"2"}}', 0), "duplicate key 'a'");
  expectFormatError(rawFile(`{"x":${T('F32', [2], [0, 8])},"y":${T('F32', [1], [4, 8])}}`, 8), 'overlap');
  expectFormatError(rawFile(`{"x":${T('F32', [1], [0, 4])},"y":${T('F32', [1], [8, 12])}}`, 12), 'gap');
  expectFormatError(rawFile(`{"x":${T('F32', [1], [4, 8])}}`, 8), 'gap');
  expectFormatError(rawFile(`{"x":${T('F32', [1], [0, 4])}}`, 8), 'no trailing bytes');
  expectFormatError(rawFile('{}', 1), 'no trailing bytes');
  // A scalar equals one element; empty tensors may sit anywhere between others.
  parse(rawFile(`{"s":${T('F64', [], [0, 8])},"e":${T('F32', [0, 7], [8, 8])},"t":${T('U8', [1], [8, 9])}}`, 9));
  // null metadata is what the reference reader calls "absent".
  assert.deepEqual(parse(rawFile('{"__metadata__":null}')).metadata, {});
  // A key called __proto__ is just a name.
  const h = parse(rawFile(`{"__metadata__":{"__proto__":"v"},"__proto__":${T('U8', [1], [0, 1])}}`, 1));
  assert.equal(h.entries[0]!.name, '__proto__');
  assert.equal(Object.getOwnPropertyDescriptor(h.metadata, '__proto__')?.value, 'v');
});

test('unknown dtype error names the code, the tensor, the file and the known codes', () => {
  for (const code of ['U16', 'C64', 'F8_E8M0', 'f32', '__proto__']) {
    const e = expectFormatError(rawFile(`{"weight.0":${T(code, [1], [0, 2])}}`, 2));
    assert.equal(e.message, `safetensors: unknown dtype '${code}' for tensor 'weight.0' in mem.safetensors; known: BOOL, U8, I8, I16, I32, I64, F16, BF16, F32, F64, F8_E4M3, F8_E5M2`);
  }
});

// ---- fuzz --------------------------------------------------------------------------------

/** Header JSON of a valid file, as an object we can mutate structurally. */
function headerObject(f: Uint8Array): Record<string, unknown> {
  const n = Number(new DataView(f.buffer, f.byteOffset, 8).getBigUint64(0, true));
  return JSON.parse(new TextDecoder().decode(f.subarray(8, 8 + n))) as Record<string, unknown>;
}

function dataOf(f: Uint8Array): Uint8Array {
  const n = Number(new DataView(f.buffer, f.byteOffset, 8).getBigUint64(0, true));
  return f.subarray(8 + n);
}

const WEIRD_NUMBERS = ['-1', '1.5', '1.0', '1e3', '-0', '9007199254740993', '18446744073709551616', '1e400', '4294967296',
  '"3"', 'null', 'true', '[]', '{}', '0'];

/** One mutant of a valid file; `mustFail` when the mutation surely breaks a rule. */
function mutate(base: Uint8Array, r: () => number): { file: Uint8Array; mustFail: boolean; kind: string } {
  const pick = <X>(xs: readonly X[]): X => xs[Math.floor(r() * xs.length)]!;
  const int = (n: number) => Math.floor(r() * n);
  const kind = pick(['flip', 'flip', 'flipHeader', 'truncate', 'extend', 'length', 'number', 'utf8', 'json',
    'duplicate', 'overlap', 'gap', 'dtype', 'field', 'deep'] as const);
  const h = headerObject(base);
  const names = Object.keys(h).filter((k) => k !== '__metadata__');
  const data = dataOf(base);
  const withHeader = (text: string | Uint8Array, d: Uint8Array = data) => rawFile(text, d);
  switch (kind) {
    case 'flip': { // random bytes anywhere
      const f = base.slice();
      for (let k = 1 + int(4); k > 0; k--) f[int(f.length)] = int(256);
      return { file: f, mustFail: false, kind };
    }
    case 'flipHeader': { // random bytes inside the JSON
      const f = base.slice();
      const n = f.length - data.length - 8;
      for (let k = 1 + int(3); k > 0; k--) f[8 + int(n)] ^= 1 << int(8);
      return { file: f, mustFail: false, kind };
    }
    case 'truncate': return { file: base.slice(0, int(base.length)), mustFail: true, kind };
    case 'extend': return { file: rawFile(new TextEncoder().encode(JSON.stringify(h)), new Uint8Array([...data, ...bytesOf(1 + int(9), int(1e6))])), mustFail: true, kind };
    case 'length': {
      const f = base.slice();
      const n = f.length - data.length - 8;
      const lens = [0n, 1n << 63n, 0xffffffffffffffffn, 100_000_001n, BigInt(f.length), BigInt(f.length - 7), BigInt(int(2 ** 31)), BigInt(n + 1 + int(16)), BigInt(Math.max(0, n - 1 - int(16)))];
      const len = pick(lens);
      new DataView(f.buffer).setBigUint64(0, len, true);
      return { file: f, mustFail: len !== BigInt(n), kind };
    }
    case 'number': { // replace one size or offset with something no valid file has
      if (names.length === 0) return { file: withHeader(`{"x":${T('F32', [WEIRD_NUMBERS[int(4)]], [0, 4])}}`, new Uint8Array(4)), mustFail: false, kind };
      const name = pick(names);
      const e = h[name] as { shape: unknown[]; data_offsets: unknown[] };
      const text = JSON.stringify(h);
      const huge = pick([...WEIRD_NUMBERS, String(2 ** 53), String(int(2 ** 40)), '1' + '0'.repeat(int(40))]);
      const target = pick(['shape', 'data_offsets'] as const);
      const arr = e[target];
      const idx = int(arr.length + 1);
      const parts = arr.map((x) => JSON.stringify(x));
      if (idx === arr.length) parts.push(huge); else parts[idx] = huge;
      const before = `${JSON.stringify(name)}:${JSON.stringify(e)}`;
      const after = before.replace(`"${target}":${JSON.stringify(arr)}`, `"${target}":[${parts.join(',')}]`);
      return { file: withHeader(text.replace(before, after)), mustFail: false, kind };
    }
    case 'utf8': {
      const t = new TextEncoder().encode(JSON.stringify(h));
      const bad = pick([[0xff], [0xc0, 0x80], [0xed, 0xa0, 0x80], [0xe2, 0x82], [0xf8, 0x88, 0x80, 0x80, 0x80], [0x80]]);
      const at = 1 + int(t.length - 1);
      return { file: withHeader(new Uint8Array([...t.subarray(0, at), ...bad, ...t.subarray(at)])), mustFail: true, kind };
    }
    case 'json': {
      const t = JSON.stringify(h);
      const variants = [t.slice(0, int(t.length)), t.slice(1), `${t}}`, t.replace(':', ''), t.replace(':', '::'),
        `[${t}]`, `"${t}"`, t.replace('{', '{,'), `${t.slice(0, -1)},}`, `${'['.repeat(1000 + int(100000))}`];
      return { file: withHeader(pick(variants)), mustFail: true, kind };
    }
    case 'duplicate': {
      if (names.length === 0) return { file: withHeader('{"__metadata__":{"a":"1","a":"1"}}'), mustFail: true, kind };
      const name = pick(names);
      const t = JSON.stringify(h);
      // Same key twice, or written once plainly and once with a \u escape.
      const key = JSON.stringify(name);
      const alt = r() < 0.5 || name.length === 0 ? key : `"\\u${name.charCodeAt(0).toString(16).padStart(4, '0')}${JSON.stringify(name.slice(1)).slice(1)}`;
      return { file: withHeader(`${t.slice(0, -1)},${alt}:${JSON.stringify(h[name])}}`), mustFail: true, kind };
    }
    case 'overlap':
    case 'gap': {
      const nonEmpty = names.filter((k) => {
        const o = (h[k] as { data_offsets: number[] }).data_offsets;
        return o[1]! > o[0]!;
      });
      if (nonEmpty.length === 0) return { file: base.slice(), mustFail: false, kind };
      const name = pick(nonEmpty);
      const e = h[name] as { data_offsets: number[] };
      const [b, en] = e.data_offsets as [number, number];
      const shift = (kind === 'overlap' ? -1 : 1) * (1 + int(4));
      const copy = { ...h, [name]: { ...e, data_offsets: [b + shift, en + shift] } };
      return { file: withHeader(JSON.stringify(copy)), mustFail: true, kind };
    }
    case 'dtype': {
      if (names.length === 0) return { file: base.slice(), mustFail: false, kind };
      const name = pick(names);
      const code = pick(['U16', 'U32', 'U64', 'C64', 'F8_E8M0', 'F4', 'bf16', '', 'F32 ', 'float32', ...SAFETENSORS_TO_DTYPE.keys()]);
      const copy = { ...h, [name]: { ...(h[name] as object), dtype: code } };
      return { file: withHeader(JSON.stringify(copy)), mustFail: !SAFETENSORS_TO_DTYPE.has(code), kind };
    }
    case 'deep': { // valid JSON nested deeper than any recursive code could follow
      const depth = r() < 0.05 ? 200000 : 1 + int(5000); // a few very deep ones: JSON.parse alone takes ~50 ms on those
      const nest = r() < 0.5 ? `${'['.repeat(depth)}${']'.repeat(depth)}` : `${'{"a":'.repeat(depth)}1${'}'.repeat(depth)}`;
      const name = names.length > 0 ? pick(names) : 'x';
      const e = JSON.stringify(h[name] ?? { dtype: 'U8', shape: [0], data_offsets: [0, 0] });
      const where = pick(['dtype', 'shape', 'data_offsets', 'dim', 'entry', 'meta'] as const);
      const ent = where === 'entry' ? nest
        : where === 'dim' ? e.replace(/"shape":\[/, `"shape":[${nest},`)
        : where === 'meta' ? e : e.replace(new RegExp(`"${where}":("[^"]*"|\\[[^\\]]*\\])`), `"${where}":${nest}`);
      const copy = { ...h } as Record<string, unknown>;
      delete copy[name];
      const meta = where === 'meta' ? `"__metadata__":{"k":${nest}},` : '';
      const rest = JSON.stringify(where === 'meta' ? { ...copy, __metadata__: undefined } : copy).slice(1);
      return { file: withHeader(`{${meta}${JSON.stringify(name)}:${ent}${rest === '}' ? '}' : `,${rest}`}`), mustFail: true, kind };
    }
    case 'field': {
      if (names.length === 0) return { file: withHeader('{"__metadata__":"x"}'), mustFail: true, kind };
      const name = pick(names);
      const e = { ...(h[name] as Record<string, unknown>) };
      const op = int(4);
      if (op === 0) delete e[pick(['dtype', 'shape', 'data_offsets'])];
      else if (op === 1) e.extra = 1;
      else if (op === 2) e.shape = pick([null, 'x', 3, [[1]], {}]);
      else return { file: withHeader(JSON.stringify({ ...h, __metadata__: pick([1, 'x', [], { k: 2 }, { k: null }]) })), mustFail: true, kind };
      return { file: withHeader(JSON.stringify({ ...h, [name]: e })), mustFail: true, kind };
    }
  }
}

test('fuzz: 3000 mutants either parse or throw FormatError', () => {
  const r = rng(12345);
  const start = performance.now();
  const rss0 = process.memoryUsage().rss;
  const counts: Record<string, [number, number]> = {};
  for (let i = 0; i < 3000; i++) {
    const base = VALID[i % VALID.length]!;
    const m = mutate(base, r);
    const c = (counts[m.kind] ??= [0, 0]);
    let parsed: ReturnType<typeof parse> | undefined;
    try {
      parsed = parse(m.file, `mutant-${i}.safetensors`);
    } catch (e) {
      if (!(e instanceof FormatError)) {
        assert.fail(`mutant ${i} (${m.kind}) threw ${(e as Error)?.constructor?.name}: ${(e as Error)?.message}`);
      }
      assert.ok(e.message.includes(`mutant-${i}.safetensors`), `error names the file: ${e.message}`);
      c[1]++;
      continue;
    }
    assert.ok(!m.mustFail, `mutant ${i} (${m.kind}) should have been rejected`);
    c[0]++;
    // Whatever parsed must be self-consistent: tensors tile the data section exactly.
    let pos = 8 + parsed.headerLength;
    for (const e of parsed.entries) {
      assert.equal(e.byteOffset, pos);
      assert.equal(e.byteLength, e.shape.reduce((a, b) => a * b, 1) * SAFETENSORS_ITEMSIZE[e.dtype]);
      pos += e.byteLength;
    }
    assert.equal(pos, m.file.byteLength);
  }
  const ms = performance.now() - start;
  const grew = (process.memoryUsage().rss - rss0) / 2 ** 20;
  console.log(`fuzz: 3000 mutants in ${ms.toFixed(0)} ms, rss +${grew.toFixed(0)} MiB; [parsed, rejected] by kind: ${JSON.stringify(counts)}`);
  void ms; // speed is measured in bench/, never asserted in tests
  assert.ok(grew < 512, `rss grew ${grew} MiB`);
});

test('fuzz on disk: open() of mutants never reads past the file or allocates from its numbers', async () => {
  const r = rng(777);
  for (let i = 0; i < 60; i++) {
    const m = mutate(VALID[i % VALID.length]!, r);
    const p = path.join(tmpRoot, `m${i}.safetensors`);
    fs.writeFileSync(p, m.file);
    for (const open of [(x: string) => SafetensorsFile.open(x), async (x: string) => SafetensorsFile.openSync(x)]) {
      try {
        const f = await open(p);
        for (const n of f.names()) assert.equal((await f.readBytes(n)).byteLength, f.entries.get(n)!.byteLength);
        await f.close();
      } catch (e) {
        assert.ok(e instanceof FormatError, `mutant ${i} (${m.kind}): ${String(e)}`);
      }
    }
  }
  // A tiny file claiming an 2^63-byte header.
  const p = path.join(tmpRoot, 'huge-len.safetensors');
  fs.writeFileSync(p, rawFile('{}', 0, 1n << 63n));
  await assert.rejects(SafetensorsFile.open(p), FormatError);
  fs.writeFileSync(p, new Uint8Array(3));
  await assert.rejects(SafetensorsFile.open(p), FormatError);
  assert.throws(() => SafetensorsFile.openSync(p), FormatError);
});

// ---- file reads -------------------------------------------------------------------------------

test('readBytes / readInto (tiny chunks, several in flight) / readStream (one reused buffer)', async () => {
  const set = VALID_SETS[0]!;
  const p = path.join(tmpRoot, 'read.safetensors');
  await writeSafetensors(p, set.tensors, set.metadata);
  const f = await SafetensorsFile.open(p);
  assert.deepEqual({ ...f.metadata }, set.metadata);
  assert.deepEqual(new Set(f.names()), new Set(set.tensors.map((t) => t.name)));
  for (const t of set.tensors) {
    const got = await f.readBytes(t.name);
    assert.equal(Object.getPrototypeOf(got), Uint8Array.prototype);
    assert.deepEqual(got, t.data);
    for (const [chunkBytes, concurrency] of [[1, 1], [3, 2], [5, 7], [1 << 20, undefined]] as const) {
      const dest = new Uint8Array(t.data.byteLength);
      const seen: number[] = [];
      await f.readInto(t.name, dest, { chunkBytes, concurrency, onProgress: (n) => seen.push(n) });
      assert.deepEqual(dest, t.data);
      for (let k = 1; k < seen.length; k++) assert.ok(seen[k]! > seen[k - 1]!);
      assert.equal(seen.at(-1) ?? 0, t.data.byteLength);
    }
    const bufs = new Set<ArrayBufferLike>();
    const parts: number[] = [];
    let expectOff = 0;
    await f.readStream(t.name, 4, async (chunk, off) => {
      assert.equal(off, expectOff);
      expectOff += chunk.byteLength;
      bufs.add(chunk.buffer);
      parts.push(...chunk);
      await new Promise((res) => setImmediate(res));
    });
    assert.deepEqual(new Uint8Array(parts), t.data);
    assert.ok(bufs.size <= 1, 'one staging buffer for every chunk');
  }
  assert.equal(f.readBytesSync('w.f32').byteLength, 48);
  await assert.rejects(f.readInto('w.f32', new Uint8Array(47)), ValueError);
  await assert.rejects(f.readBytes('nope'), ValueError);
  await assert.rejects(f.readInto('w.f32', new Uint8Array(48), { chunkBytes: 0 }), ValueError);
  // close() waits for reads in flight; reads after close fail cleanly.
  const pending = f.readInto('w.f32', new Uint8Array(48), { chunkBytes: 1 });
  await f.close();
  await pending;
  await assert.rejects(f.readBytes('w.f32'), /closed/);
  await f.close(); // idempotent
});

test('a file truncated after open fails with FormatError on read', async () => {
  const p = path.join(tmpRoot, 'shrink.safetensors');
  await writeSafetensors(p, [tensor('a', 'float32', [64])]);
  const f = SafetensorsFile.openSync(p);
  fs.truncateSync(p, 100);
  await assert.rejects(f.readBytes('a'), FormatError);
  f.closeSync();
});

// ---- sharded ------------------------------------------------------------------------------

test('openSharded: index.json -> shards, weight map, metadata; errors', async () => {
  const dir = fs.mkdtempSync(path.join(tmpRoot, 'sharded-'));
  const a = [tensor('model.embed', 'bfloat16', [4, 8], 31), tensor('model.layer.0', 'float32', [8], 32)];
  const b = [tensor('model.layer.1', 'float32', [8], 33), tensor('lm_head', 'float16', [8, 4], 34), tensor('unlisted', 'uint8', [1], 35)];
  await writeSafetensors(path.join(dir, 'model-00001-of-00002.safetensors'), a, { format: 'pt' });
  await writeSafetensors(path.join(dir, 'model-00002-of-00002.safetensors'), b, { format: 'pt' });
  const weight_map: Record<string, string> = {};
  for (const t of a) weight_map[t.name] = 'model-00001-of-00002.safetensors';
  for (const t of b.slice(0, 2)) weight_map[t.name] = 'model-00002-of-00002.safetensors';
  const idx = path.join(dir, 'model.safetensors.index.json');
  fs.writeFileSync(idx, JSON.stringify({ metadata: { total_size: 368 }, weight_map }, null, 2));
  const s = await openSharded(idx);
  assert.equal(s.files.length, 2);
  assert.deepEqual(s.metadata, { total_size: 368 });
  assert.deepEqual([...s.weightMap.keys()], Object.keys(weight_map));
  for (const t of [...a, ...b.slice(0, 2)]) assert.deepEqual(await s.weightMap.get(t.name)!.readBytes(t.name), t.data);
  await Promise.all(s.files.map((f) => f.close()));

  const bad = async (index: unknown, fragment: string) => {
    fs.writeFileSync(idx, typeof index === 'string' ? index : JSON.stringify(index));
    await assert.rejects(openSharded(idx), (e: unknown) => e instanceof FormatError && e.message.includes(fragment));
  };
  await bad({ weight_map: { ...weight_map, ghost: 'model-00001-of-00002.safetensors' } }, "tensor 'ghost'");
  await bad({ weight_map: { x: 'missing.safetensors' } }, 'does not exist');
  await bad({ weight_map: { x: '../escape.safetensors' } }, "leaves the index's folder");
  await bad({ weight_map: { x: '/etc/passwd' } }, "leaves the index's folder");
  await bad({ weight_map: { x: 3 } }, 'shard file name');
  await bad({ metadata: {} }, 'weight_map');
  await bad('{"weight_map":{"x":"a","x":"b"}}', 'duplicate key');
  await bad('{"weight_map":', 'not valid JSON');
});

// ---- interoperability -----------------------------------------------------------------------

test('cross-check with the Python safetensors library', (t) => {
  const probe = spawnSync('/usr/bin/python3', ['-c', 'import safetensors, numpy'], { encoding: 'utf8' });
  if (probe.status !== 0) {
    t.skip('python3 with safetensors+numpy not available here: cross-check skipped');
    return;
  }
  const p = path.join(tmpRoot, 'to-python.safetensors');
  fs.writeFileSync(p, VALID[1]!);
  const py = spawnSync('/usr/bin/python3', ['-c', `
import sys, numpy as np
from safetensors.numpy import load_file, save_file
d = load_file(sys.argv[1])
print(d["only"].tobytes().hex())
save_file({"a": np.arange(6, dtype=np.float32).reshape(2, 3), "b": np.array([1, 2], dtype=np.int64)}, sys.argv[1] + ".py", metadata={"framework": "np"})
`, p], { encoding: 'utf8' });
  assert.equal(py.status, 0, py.stderr);
  assert.equal(py.stdout.trim(), Buffer.from(VALID_SETS[1]!.tensors[0]!.data).toString('hex'));
  const fromPy = new Uint8Array(fs.readFileSync(`${p}.py`));
  const h = parse(fromPy);
  assert.deepEqual(h.entries.map((e) => [e.name, e.dtype, e.shape]), [['b', 'int64', [2]], ['a', 'float32', [2, 3]]]);
  const again = encodeSafetensors(h.entries.map((e) => ({ ...e, data: fromPy.subarray(e.byteOffset, e.byteOffset + e.byteLength) })), { framework: 'np' });
  assert.deepEqual(again, fromPy, 'our writer reproduces the Python library bytes');
});

test('reads every conformance suite file', async (t) => {
  const dir = '/work/shared/conformance/public';
  if (!fs.existsSync(dir)) {
    t.skip(`${dir} not present`);
    return;
  }
  const files = fs.readdirSync(dir).filter((f) => f.endsWith('.safetensors'));
  assert.ok(files.length > 0);
  let tensors = 0;
  for (const name of files) {
    const f = await SafetensorsFile.open(path.join(dir, name));
    const doc = JSON.parse(f.metadata['nbx.conformance']!) as { version: number; cases: unknown[] };
    assert.equal(doc.version, 1, name);
    assert.ok(Array.isArray(doc.cases));
    for (const n of f.names()) {
      const e = f.entries.get(n)!;
      assert.equal((await f.readBytes(n)).byteLength, e.byteLength);
      tensors++;
    }
    await f.close();
  }
  console.log(`conformance: ${files.length} files, ${tensors} tensors read`);
});

// ---- progress -------------------------------------------------------------------------------

test('progress: bar on a TTY for big jobs only, rate in MB/s', () => {
  const out: string[] = [];
  const tty = { isTTY: true, columns: 100, write: (s: string) => out.push(s) };
  const big = new Progress('loading', 512 * 2 ** 20, { stream: tty, intervalMs: 0 });
  assert.ok(big.visible);
  big.update(256 * 2 ** 20);
  big.advance(256 * 2 ** 20);
  const sum = big.finish();
  assert.equal(sum.bytes, 512 * 2 ** 20);
  assert.ok(sum.mbPerSec > 0);
  assert.ok(out.some((s) => s.includes(' 50%')));
  assert.ok(out.at(-1)!.includes('100%') && out.at(-1)!.endsWith('\n') && out.at(-1)!.includes('MB/s'));
  assert.ok(out.every((s) => s.replace(/\x1b\[K|\r|\n/g, '').length <= 100));

  const quiet: string[] = [];
  assert.ok(!new Progress('x', 100 * 2 ** 20, { stream: { isTTY: true, write: (s: string) => quiet.push(s) } }).visible);
  const pipe = new Progress('x', 2 ** 30, { stream: { isTTY: false, write: (s: string) => quiet.push(s) } });
  pipe.update(2 ** 30);
  pipe.finish();
  assert.equal(quiet.length, 0);
});
