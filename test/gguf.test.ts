// GGUF files (src/io/gguf.ts): the header of a file written here byte by byte (metadata of every value
// type, tensors of the float and 32-element block types), ggml's dequantization, `nbx inspect`, and
// hostile files (truncated, lying counts and offsets, absurd dimensions, unknown types): FormatError.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import * as nbx from '../src/index.js';
import { FormatError } from '../src/errors.js';
import { toFloat16Bits } from '../src/dtype/convert.js';

/** A little-endian byte writer. */
class W {
  parts: number[] = [];
  u8(v: number): this { this.parts.push(v & 255); return this; }
  u32(v: number): this { for (let i = 0; i < 4; i++) this.u8(v >>> (8 * i)); return this; }
  u64(v: number | bigint): this { const b = BigInt(v); for (let i = 0n; i < 8n; i++) this.u8(Number((b >> (8n * i)) & 255n)); return this; }
  f32(v: number): this { const b = new DataView(new ArrayBuffer(4)); b.setFloat32(0, v, true); for (let i = 0; i < 4; i++) this.u8(b.getUint8(i)); return this; }
  f16(v: number): this { const h = toFloat16Bits(v); this.u8(h); this.u8(h >> 8); return this; }
  str(s: string): this { const b = new TextEncoder().encode(s); this.u64(b.length); for (const x of b) this.u8(x); return this; }
  pad(align: number): this { while (this.parts.length % align) this.u8(0); return this; }
  get length(): number { return this.parts.length; }
  bytes(): Uint8Array { return Uint8Array.from(this.parts); }
}

interface T { name: string; ne: number[]; type: number; data: (w: W) => void }

/** A GGUF v3 file: metadata via `meta`, tensors laid out at 32-byte alignment. */
function gguf(tensors: T[], meta: (w: W) => number = () => 0, opts: { tensorCount?: number } = {}): Uint8Array {
  const head = new W().u32(0x46554747).u32(3).u64(opts.tensorCount ?? tensors.length);
  const m = new W();
  const nKv = meta(m);
  head.u64(nKv);
  for (const b of m.parts) head.u8(b);
  // data offsets: each tensor's bytes, padded to 32
  const blobs = tensors.map((t) => { const w = new W(); t.data(w); return w; });
  let off = 0;
  const offs = blobs.map((b) => { const o = off; off += Math.ceil(b.length / 32) * 32; return o; });
  tensors.forEach((t, i) => { head.str(t.name).u32(t.ne.length); for (const n of t.ne) head.u64(n); head.u32(t.type).u64(offs[i]!); });
  head.pad(32);
  for (const b of blobs) { for (const x of b.parts) head.u8(x); head.pad(32); }
  return head.bytes();
}

const dir = mkdtempSync(join(tmpdir(), 'nbx-gguf-'));
const file = (name: string, bytes: Uint8Array): string => { const p = join(dir, name); writeFileSync(p, bytes); return p; };

const q8 = (w: W, d: number, qs: number[]): void => { w.f16(d); for (const q of qs) w.u8(q); };
const TENSORS: T[] = [
  { name: 'f32', ne: [3, 2], type: 0, data: (w) => { for (const v of [1, 2, 3, 4, 5, -6.5]) w.f32(v); } },
  { name: 'f16', ne: [4], type: 1, data: (w) => { for (const v of [0.5, -1, 65504, 0.0999755859375]) w.f16(v); } },
  { name: 'q8', ne: [32, 2], type: 8, data: (w) => { q8(w, 0.5, Array.from({ length: 32 }, (_, j) => j - 16)); q8(w, -0.25, Array.from({ length: 32 }, (_, j) => 100 - j)); } },
  { name: 'q4', ne: [32], type: 2, data: (w) => { w.f16(2); for (let j = 0; j < 16; j++) w.u8((j & 15) | ((15 - j) << 4)); } },
];

test('GGUF: metadata of every value type, tensor table, dequantized F32 / F16 / Q8_0 / Q4_0 as ggml computes them, nbx inspect', async () => {
  const p = file('ok.gguf', gguf(TENSORS, (w) => {
    w.str('general.architecture').u32(8).str('llama');
    w.str('llama.block_count').u32(4).u32(22);
    w.str('llama.rope.freq_base').u32(6).f32(10000);
    w.str('flag').u32(7).u8(1);
    w.str('big').u32(11).u64(-5n & ((1n << 64n) - 1n));
    w.str('tokenizer.ggml.tokens').u32(9).u32(8).u64(3).str('<s>').str('a').str('b');
    return 6;
  }));
  const f = await nbx.io.openGguf(p);
  try {
    assert.equal(f.version, 3);
    assert.equal(f.metadata.get('general.architecture'), 'llama');
    assert.equal(f.metadata.get('llama.block_count'), 22);
    assert.equal(f.metadata.get('llama.rope.freq_base'), 10000);
    assert.equal(f.metadata.get('flag'), true);
    assert.equal(f.metadata.get('big'), -5n);
    assert.deepEqual(f.metadata.get('tokenizer.ggml.tokens'), ['<s>', 'a', 'b']);
    assert.deepEqual([...f.tensors.values()].map((t) => [t.name, t.typeName, t.shape]), [['f32', 'F32', [2, 3]], ['f16', 'F16', [4]], ['q8', 'Q8_0', [2, 32]], ['q4', 'Q4_0', [32]]]);
    assert.deepEqual((await f.dequantize('f32')).tolist(), [[1, 2, 3], [4, 5, -6.5]]);
    assert.deepEqual((await f.dequantize('f16')).tolist(), [0.5, -1, 65504, 0.0999755859375]);
    const q = await f.dequantize('q8');
    assert.deepEqual(q.select(0, 0).tolist(), Array.from({ length: 32 }, (_, j) => 0.5 * (j - 16)));
    assert.deepEqual(q.select(0, 1).tolist(), Array.from({ length: 32 }, (_, j) => -0.25 * (100 - j)));
    const q4 = (await f.dequantize('q4')).tolist() as number[];
    assert.deepEqual(q4, [...Array.from({ length: 16 }, (_, j) => 2 * (j - 8)), ...Array.from({ length: 16 }, (_, j) => 2 * (15 - j - 8))]);
  } finally { await f.close(); }
  // nbx inspect prints the metadata and the tensor table
  const { inspect } = await import('../src/cli/inspect.js');
  const out: string[] = [];
  const write = process.stdout.write.bind(process.stdout);
  (process.stdout as { write: unknown }).write = (s: string): boolean => { out.push(String(s)); return true; };
  try { assert.equal(await inspect([p]), 0); } finally { (process.stdout as { write: unknown }).write = write; }
  const text = out.join('');
  assert.match(text, /GGUF v3, 6 metadata entries, 4 tensors/);
  assert.match(text, /q8\s+Q8_0\s+\[2, 32\]/);
  assert.match(text, /general\.architecture\s+"llama"/);
});

test('GGUF: hostile files are FormatErrors naming the rule, never a crash or a huge allocation', async () => {
  const good = gguf(TENSORS);
  const cases: [string, Uint8Array, RegExp][] = [
    ['truncated header', good.subarray(0, 40), /truncated|too short/],
    ['truncated data', good.subarray(0, good.length - 40), /spans bytes/],
    ['not gguf', Uint8Array.from([1, 2, 3, 4, ...good.subarray(4)]), /not a GGUF file/],
    ['lying tensor count', gguf(TENSORS, () => 0, { tensorCount: 1e12 }), /cannot fit/],
    ['huge string', (() => { const w = new W().u32(0x46554747).u32(3).u64(0).u64(1).u64(2n ** 40n); return w.bytes(); })(), /claims|truncated|cannot fit/],
    ['lying array count', gguf([], (w) => { w.str('a').u32(9).u32(6).u64(2 ** 40); return 1; }), /claims .* elements/],
    ['absurd dims', gguf([{ name: 'x', ne: [2 ** 30, 2 ** 30, 2 ** 30], type: 0, data: () => {} }]), /more elements than any file|spans bytes/],
    ['unknown type', gguf([{ name: 'x', ne: [4], type: 99, data: (w) => w.f32(0) }]), /unknown ggml type 99/],
    ['row not a block multiple', gguf([{ name: 'x', ne: [30], type: 8, data: (w) => q8(w, 1, new Array(32).fill(0)) }]), /not a multiple of its 32-element blocks/],
    ['too many dims', gguf([{ name: 'x', ne: [1, 1, 1, 1, 1], type: 0, data: (w) => w.f32(0) }]), /5 dimensions/],
    ['unknown value type', gguf([], (w) => { w.str('a').u32(42); return 1; }), /unknown value type 42/],
  ];
  for (const [label, bytes, re] of cases) {
    await assert.rejects(nbx.io.openGguf(file(`${label.replace(/ /g, '_')}.gguf`, bytes)), (e: unknown) => e instanceof FormatError && re.test((e as Error).message), label);
  }
  // a type listed but not decoded (Q8_1, an intermediate format): a FormatError naming what is
  const k = file('k.gguf', gguf([{ name: 'k', ne: [32], type: 9, data: (w) => { for (let i = 0; i < 36; i++) w.u8(0); } }]));
  const f = await nbx.io.openGguf(k);
  try { await assert.rejects(f.dequantize('k'), /Q8_1 is not implemented yet/); } finally { await f.close(); }
});

test('GGUF: every block type dequantizes as gguf-py does (test/fixtures/gguf, from test/gen/gguf_fixtures.py)', async () => {
  const root = join(dirname(fileURLToPath(import.meta.url)), '../../test/fixtures/gguf');
  const ref = JSON.parse(readFileSync(join(root, 'blocks.json'), 'utf8')) as { tensors: Record<string, { type: string; shape: number[]; values: number[] }> };
  const f = await nbx.io.openGguf(join(root, 'blocks.gguf'));
  const bad: string[] = [];
  try {
    for (const [name, r] of Object.entries(ref.tensors)) {
      const t = f.tensors.get(name)!;
      assert.equal(t.typeName, r.type);
      assert.deepEqual(t.shape, r.shape);
      const got = (await f.dequantize(name)).dataSync() as Float32Array;
      let worst = 0;
      for (let i = 0; i < got.length; i++) {
        const want = r.values[i]!;
        worst = Math.max(worst, Math.abs(got[i]! - want) / Math.max(Math.abs(want), 1e-6));
      }
      // gguf-py computes in float32 numpy, op by op as ggml: the same numbers up to one rounding's order
      if (worst > 2 ** -22) bad.push(`${name}: max relative difference ${worst}`);
    }
  } finally { await f.close(); }
  assert.deepEqual(bad, []);
});

test('GGUF: 300 mutated and truncated copies of a real file open or fail with FormatError, never another error', async () => {
  const root = join(dirname(fileURLToPath(import.meta.url)), '../../test/fixtures/gguf');
  const good = readFileSync(join(root, 'blocks.gguf'));
  let s = 12345;
  const rnd = (n: number): number => { s = (Math.imul(s, 1103515245) + 12345) >>> 0; return s % n; };
  const others: string[] = [];
  for (let i = 0; i < 300; i++) {
    const b = Uint8Array.from(good);
    // mostly the header (counts, lengths, dims, types, offsets live there), sometimes anywhere
    const span = i % 4 === 0 ? b.length : Math.min(b.length, 1200);
    for (let k = 0, n = 1 + rnd(4); k < n; k++) b[rnd(span)] = rnd(256);
    const bytes = i % 5 === 0 ? b.subarray(0, rnd(b.length)) : b;
    const p = file(`fuzz${i}.gguf`, bytes);
    try {
      const f = await nbx.io.openGguf(p);
      try { for (const name of f.tensors.keys()) await f.dequantize(name).catch((e: unknown) => { if (!(e instanceof FormatError)) throw e; }); } finally { await f.close(); }
    } catch (e) {
      if (!(e instanceof FormatError)) others.push(`case ${i}: ${(e as Error).constructor.name}: ${(e as Error).message.slice(0, 120)}`);
    }
  }
  assert.deepEqual(others, []);
});

test('nbx.models.load(.gguf): the llama fixture converted as llama.cpp does (names, permuted Q/K) gives the folder\'s logits; Q8_0 within its rounding', async () => {
  const root = join(dirname(fileURLToPath(import.meta.url)), '../../test/fixtures');
  const ref = await nbx.models.load(join(root, 'models/llama'), { device: 'cpu', dtype: 'float32' });
  const f32 = await nbx.models.load(join(root, 'gguf/llama-f32.gguf'), { device: 'cpu', dtype: 'float32' });
  const q8 = await nbx.models.load(join(root, 'gguf/llama-q8_0.gguf'), { device: 'cpu', dtype: 'float32' });
  try {
    assert.equal(f32.config.model_type, 'llama');
    assert.equal(f32.tokenizer, null);
    const ids = nbx.tensor([[1, 17, 42, 99, 5, 63]]);
    const want = ref.forward(ids);
    const scale = Number(want.abs().max().item());
    const err = (m: typeof ref): number => Number(m.forward(ids).sub(want).abs().max().item()) / scale;
    // the file stores rms_norm_eps as float32 (9.9999997e-6 for 1e-5): the only difference
    assert.ok(err(f32) < 1e-5, `float32 GGUF: relative logit difference ${err(f32)}`);
    assert.ok(err(q8) < 0.05, `Q8_0 GGUF: relative logit difference ${err(q8)}`);
    const gen = async (m: typeof ref): Promise<number[][]> => (await m.generate(ids, { max_new_tokens: 6, do_sample: false })).tolist() as number[][];
    assert.deepEqual(await gen(f32), await gen(ref));
  } finally { ref.dispose(); f32.dispose(); q8.dispose(); }
});

test('GGUF tokenizers (byte-level BPE, SentencePiece with merges recovered from scores): transformers\' ids and decoding for every fixture text', async () => {
  const root = join(dirname(fileURLToPath(import.meta.url)), '../../test/fixtures');
  for (const name of ['tokenizer-bytelevel', 'tokenizer-spm']) {
    const ref = JSON.parse(readFileSync(join(root, `gguf/${name}.json`), 'utf8')) as { cases: { text: string; ids: number[]; decoded: string }[] };
    const f = await nbx.io.openGguf(join(root, `gguf/${name}.gguf`));
    try {
      const tok = nbx.models.tokenizerFromGguf(f)!;
      assert.ok(ref.cases.length >= 20);
      for (const c of ref.cases) {
        assert.deepEqual(tok.encode(c.text), c.ids, `${name}: ${JSON.stringify(c.text)}`);
        assert.equal(tok.decode(c.ids, { skip_special_tokens: true }), c.decoded, `${name} decode: ${JSON.stringify(c.text)}`);
      }
    } finally { await f.close(); }
  }
  // the byte-level file's chat template and special tokens are the tokenizer.json's it came from
  const folder = await nbx.models.loadTokenizer(join(root, 'tokenizers/bytelevel'));
  const f = await nbx.io.openGguf(join(root, 'gguf/tokenizer-bytelevel.gguf'));
  try {
    const tok = nbx.models.tokenizerFromGguf(f)!;
    assert.equal(tok.bos_token, folder.bos_token);
    assert.equal(tok.eos_token_id, folder.eos_token_id);
    const chat = [{ role: 'user', content: 'Hi there' }];
    assert.equal(tok.apply_chat_template(chat, { tokenize: false, add_generation_prompt: true }), folder.apply_chat_template(chat, { tokenize: false, add_generation_prompt: true }));
  } finally { await f.close(); }
});
