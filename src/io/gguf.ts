// GGUF files (llama.cpp's format, version 2 and 3): the header (metadata key/values and the tensor
// table) parsed from a file handle without reading the tensor data, and tensor data read on demand.
// dequantize() turns the float, 32-element block and K-quant (Q2_K to Q6_K) formats into float32 (the
// reference the dequantizing kernels of issue #21 are checked against, itself checked against gguf-py).
//
// A file is untrusted input, as a safetensors header is: every count, length, dimension and offset is
// checked against the file's size and the format's limits before anything is allocated, and a file
// that breaks a rule is a FormatError naming the rule, never a crash or an allocation the size of a
// lying count.
//
// Layout (little-endian): "GGUF", u32 version, u64 tensor count, u64 metadata count; metadata as
// (string key, u32 type, value); tensor infos as (string name, u32 n_dims, u64 ne[n_dims], u32 ggml
// type, u64 offset); then padding to `general.alignment` (default 32) and the data section, each
// tensor at its offset from the section's start. ne[0] is the innermost (fastest) dimension, so the
// row-major shape is ne reversed.

import { open, type FileHandle } from 'node:fs/promises';
import { FormatError, fileErrorOf } from '../errors.js';
import { Tensor } from '../tensor/tensor.js';
import { fromFloat16Bits, fromBFloat16Bits } from '../dtype/convert.js';

/** ggml tensor types: name, elements per block, bytes per block. */
export const GGML_TYPES: Record<number, { name: string; block: number; bytes: number }> = {
  0: { name: 'F32', block: 1, bytes: 4 }, 1: { name: 'F16', block: 1, bytes: 2 },
  2: { name: 'Q4_0', block: 32, bytes: 18 }, 3: { name: 'Q4_1', block: 32, bytes: 20 },
  6: { name: 'Q5_0', block: 32, bytes: 22 }, 7: { name: 'Q5_1', block: 32, bytes: 24 },
  8: { name: 'Q8_0', block: 32, bytes: 34 }, 9: { name: 'Q8_1', block: 32, bytes: 36 },
  10: { name: 'Q2_K', block: 256, bytes: 84 }, 11: { name: 'Q3_K', block: 256, bytes: 110 },
  12: { name: 'Q4_K', block: 256, bytes: 144 }, 13: { name: 'Q5_K', block: 256, bytes: 176 },
  14: { name: 'Q6_K', block: 256, bytes: 210 }, 15: { name: 'Q8_K', block: 256, bytes: 292 },
  24: { name: 'I8', block: 1, bytes: 1 }, 25: { name: 'I16', block: 1, bytes: 2 }, 26: { name: 'I32', block: 1, bytes: 4 },
  27: { name: 'I64', block: 1, bytes: 8 }, 28: { name: 'F64', block: 1, bytes: 8 }, 30: { name: 'BF16', block: 1, bytes: 2 },
};

export type GgufValue = number | bigint | boolean | string | GgufValue[];

export interface GgufTensorInfo {
  name: string;
  /** Row-major shape (ne reversed: the last dim is ne[0], the innermost). */
  shape: number[];
  type: number;
  typeName: string;
  /** Absolute byte offset of the data in the file, and its length. */
  offset: number;
  byteLength: number;
}

/** Limits a well-formed file never reaches; past them the counts are lies (checked before allocating). */
const MAX_DIMS = 4;
const MAX_STRING = 1 << 30;
const MAX_NESTING = 4;

/** Reads forward through a file in chunks, never past its end. */
class Reader {
  private buf = new Uint8Array(0);
  private view = new DataView(this.buf.buffer);
  private start = 0; // file offset of buf[0]
  pos = 0; // file offset of the next byte
  constructor(private readonly fh: FileHandle, readonly size: number, private readonly path: string) {}

  private async need(n: number): Promise<number> {
    if (n > this.size - this.pos) throw new FormatError('gguf', `${this.path}: truncated: ${n} more bytes needed at offset ${this.pos}, the file has ${this.size - this.pos} left`);
    const have = this.start + this.buf.length - this.pos;
    if (have < n) {
      const len = Math.min(this.size - this.pos, Math.max(n, 1 << 20));
      const b = new Uint8Array(len);
      const { bytesRead } = await this.fh.read(b, 0, len, this.pos);
      if (bytesRead < n) throw new FormatError('gguf', `${this.path}: short read at offset ${this.pos}`);
      this.buf = b; this.view = new DataView(b.buffer); this.start = this.pos;
    }
    return this.pos - this.start;
  }
  async u8(): Promise<number> { const o = await this.need(1); this.pos += 1; return this.view.getUint8(o); }
  async u32(): Promise<number> { const o = await this.need(4); this.pos += 4; return this.view.getUint32(o, true); }
  async u64(what: string): Promise<number> {
    const o = await this.need(8); this.pos += 8;
    const v = this.view.getBigUint64(o, true);
    if (v > BigInt(Number.MAX_SAFE_INTEGER)) throw new FormatError('gguf', `${this.path}: ${what} ${v} at offset ${this.pos - 8} is beyond any file`);
    return Number(v);
  }
  async scalar(type: number): Promise<GgufValue> {
    const sizes: Record<number, number> = { 0: 1, 1: 1, 2: 2, 3: 2, 4: 4, 5: 4, 6: 4, 7: 1, 10: 8, 11: 8, 12: 8 };
    const o = await this.need(sizes[type]!);
    this.pos += sizes[type]!;
    const v = this.view;
    switch (type) {
      case 0: return v.getUint8(o); case 1: return v.getInt8(o); case 2: return v.getUint16(o, true); case 3: return v.getInt16(o, true);
      case 4: return v.getUint32(o, true); case 5: return v.getInt32(o, true); case 6: return v.getFloat32(o, true); case 7: return v.getUint8(o) !== 0;
      case 10: return v.getBigUint64(o, true); case 11: return v.getBigInt64(o, true); default: return v.getFloat64(o, true);
    }
  }
  async string(what: string): Promise<string> {
    const n = await this.u64(`length of ${what}`);
    if (n > MAX_STRING || n > this.size - this.pos) throw new FormatError('gguf', `${this.path}: ${what} claims ${n} bytes at offset ${this.pos - 8}, the file has ${this.size - this.pos} left`);
    const o = await this.need(n);
    this.pos += n;
    return new TextDecoder('utf-8', { fatal: false }).decode(this.buf.subarray(o, o + n));
  }
  async value(type: number, what: string, depth = 0): Promise<GgufValue> {
    if (type === 8) return this.string(what);
    if (type === 9) {
      if (depth >= MAX_NESTING) throw new FormatError('gguf', `${this.path}: ${what}: arrays nested deeper than ${MAX_NESTING}`);
      const et = await this.u32();
      const n = await this.u64(`element count of ${what}`);
      // each element takes at least one byte (a string at least eight): a count the rest of the file cannot hold is a lie
      const min = et === 8 ? 8 : et === 9 ? 12 : ({ 0: 1, 1: 1, 2: 2, 3: 2, 4: 4, 5: 4, 6: 4, 7: 1, 10: 8, 11: 8, 12: 8 } as Record<number, number>)[et];
      if (min === undefined) throw new FormatError('gguf', `${this.path}: ${what}: unknown array element type ${et}`);
      if (n * min > this.size - this.pos) throw new FormatError('gguf', `${this.path}: ${what} claims ${n} elements, the file has ${this.size - this.pos} bytes left`);
      const out: GgufValue[] = [];
      for (let i = 0; i < n; i++) out.push(await this.value(et, what, depth + 1));
      return out;
    }
    if (![0, 1, 2, 3, 4, 5, 6, 7, 10, 11, 12].includes(type)) throw new FormatError('gguf', `${this.path}: ${what}: unknown value type ${type}`);
    return this.scalar(type);
  }
}

export class GgufFile {
  private constructor(
    readonly path: string,
    private readonly fh: FileHandle,
    readonly version: number,
    readonly metadata: Map<string, GgufValue>,
    readonly tensors: Map<string, GgufTensorInfo>,
    readonly alignment: number,
    readonly dataOffset: number,
    readonly fileSize: number,
  ) {}

  /** Opens and checks a GGUF file's header (the tensor data is read on demand). */
  static async open(path: string): Promise<GgufFile> {
    let fh: FileHandle;
    try { fh = await open(path, 'r'); } catch (e) { throw fileErrorOf('gguf', path, e); }
    try {
      const size = (await fh.stat()).size;
      const r = new Reader(fh, size, path);
      if (size < 24) throw new FormatError('gguf', `${path}: ${size} bytes is too short for a GGUF header (24)`);
      const magic = await r.u32();
      if (magic !== 0x46554747) throw new FormatError('gguf', `${path}: not a GGUF file (magic 0x${magic.toString(16)}, expected "GGUF")`);
      const version = await r.u32();
      if (version !== 2 && version !== 3) throw new FormatError('gguf', `${path}: GGUF version ${version} is not supported (2 and 3 are)`);
      const nTensors = await r.u64('tensor count'), nKv = await r.u64('metadata count');
      // a metadata entry takes at least 8 + 4 + 1 bytes, a tensor info at least 8 + 4 + 8 + 4 + 8
      if (nKv * 13 > size - r.pos) throw new FormatError('gguf', `${path}: ${nKv} metadata entries cannot fit in ${size - r.pos} bytes`);
      if (nTensors * 32 > size - r.pos) throw new FormatError('gguf', `${path}: ${nTensors} tensors cannot fit in ${size - r.pos} bytes`);
      const metadata = new Map<string, GgufValue>();
      for (let i = 0; i < nKv; i++) {
        const key = await r.string(`metadata key ${i}`);
        const type = await r.u32();
        metadata.set(key, await r.value(type, `metadata '${key}'`));
      }
      const al = metadata.get('general.alignment');
      const alignment = al === undefined ? 32 : Number(al);
      if (!Number.isInteger(alignment) || alignment < 1 || alignment > 1 << 20 || (alignment & (alignment - 1)) !== 0) {
        throw new FormatError('gguf', `${path}: general.alignment ${String(al)} is not a power of two up to 1 MiB`);
      }
      const infos: { name: string; ne: number[]; type: number; rel: number }[] = [];
      for (let i = 0; i < nTensors; i++) {
        const name = await r.string(`tensor ${i}'s name`);
        const nd = await r.u32();
        if (nd < 1 || nd > MAX_DIMS) throw new FormatError('gguf', `${path}: tensor '${name}' has ${nd} dimensions (1 to ${MAX_DIMS} allowed)`);
        const ne: number[] = [];
        for (let d = 0; d < nd; d++) ne.push(await r.u64(`dimension ${d} of '${name}'`));
        const type = await r.u32();
        const rel = await r.u64(`offset of '${name}'`);
        infos.push({ name, ne, type, rel });
      }
      const dataOffset = Math.ceil(r.pos / alignment) * alignment;
      const tensors = new Map<string, GgufTensorInfo>();
      for (const { name, ne, type, rel } of infos) {
        const t = GGML_TYPES[type];
        if (!t) throw new FormatError('gguf', `${path}: tensor '${name}' has unknown ggml type ${type}`);
        let numel = 1;
        for (const n of ne) {
          numel *= n;
          if (!Number.isSafeInteger(numel)) throw new FormatError('gguf', `${path}: tensor '${name}' of dims [${ne.join(', ')}] has more elements than any file holds`);
        }
        if (ne[0]! % t.block !== 0) throw new FormatError('gguf', `${path}: tensor '${name}' (${t.name}) has a row of ${ne[0]} elements, not a multiple of its ${t.block}-element blocks`);
        const byteLength = (numel / t.block) * t.bytes;
        if (rel % alignment !== 0) throw new FormatError('gguf', `${path}: tensor '${name}' at data offset ${rel} is not aligned to ${alignment}`);
        const offset = dataOffset + rel;
        if (offset + byteLength > size) throw new FormatError('gguf', `${path}: tensor '${name}' spans bytes ${offset}..${offset + byteLength} but the file has ${size}`);
        if (tensors.has(name)) throw new FormatError('gguf', `${path}: tensor '${name}' appears twice`);
        tensors.set(name, { name, shape: [...ne].reverse(), type, typeName: t.name, offset, byteLength });
      }
      return new GgufFile(path, fh, version, metadata, tensors, alignment, dataOffset, size);
    } catch (e) {
      await fh.close();
      throw e;
    }
  }

  /** The raw bytes of a tensor (its GGUF encoding). */
  async bytes(name: string): Promise<Uint8Array> {
    const t = this.tensors.get(name);
    if (!t) throw new FormatError('gguf', `${this.path} has no tensor '${name}'`);
    const b = new Uint8Array(t.byteLength);
    const { bytesRead } = await this.fh.read(b, 0, t.byteLength, t.offset);
    if (bytesRead !== t.byteLength) throw new FormatError('gguf', `${this.path}: short read of '${name}' (the file changed?)`);
    return b;
  }

  /** A tensor as float32 on the CPU: float, 32-element block and K-quant types (others: FormatError naming the type). */
  async dequantize(name: string): Promise<Tensor> {
    const t = this.tensors.get(name);
    if (!t) throw new FormatError('gguf', `${this.path} has no tensor '${name}'`);
    const out = dequantizeBlocks(t.typeName, await this.bytes(name), t.shape.reduce((a, b) => a * b, 1));
    return Tensor.fromStorage(out, 'float32', t.shape, 'cpu');
  }

  async close(): Promise<void> { await this.fh.close(); }
}

/** ggml's dequantize_row_* for the float and 32-element block types, into float32. */
export function dequantizeBlocks(type: string, b: Uint8Array, numel: number): Float32Array {
  const out = new Float32Array(numel);
  const v = new DataView(b.buffer, b.byteOffset, b.byteLength);
  const f16 = (o: number): number => fromFloat16Bits(v.getUint16(o, true));
  // ggml computes in float: a product rounded to float32, then a sum rounded again (fr)
  const fr = Math.fround;
  switch (type) {
    case 'F32': for (let i = 0; i < numel; i++) out[i] = v.getFloat32(4 * i, true); return out;
    case 'F16': for (let i = 0; i < numel; i++) out[i] = f16(2 * i); return out;
    case 'BF16': for (let i = 0; i < numel; i++) out[i] = fromBFloat16Bits(v.getUint16(2 * i, true)); return out;
    case 'Q8_0': // d (f16), 32 × int8: x = d · q
      for (let blk = 0; blk < numel / 32; blk++) {
        const o = blk * 34, d = f16(o);
        for (let j = 0; j < 32; j++) out[blk * 32 + j] = d * v.getInt8(o + 2 + j);
      }
      return out;
    case 'Q4_0': // d (f16), 16 bytes of nibbles: x[j] = d · (lo(q[j]) − 8), x[j + 16] = d · (hi(q[j]) − 8)
      for (let blk = 0; blk < numel / 32; blk++) {
        const o = blk * 18, d = f16(o);
        for (let j = 0; j < 16; j++) { const q = b[o + 2 + j]!; out[blk * 32 + j] = d * ((q & 15) - 8); out[blk * 32 + j + 16] = d * ((q >> 4) - 8); }
      }
      return out;
    case 'Q4_1': // d, m (f16), nibbles: x = d · q + m
      for (let blk = 0; blk < numel / 32; blk++) {
        const o = blk * 20, d = f16(o), m = f16(o + 2);
        for (let j = 0; j < 16; j++) { const q = b[o + 4 + j]!; out[blk * 32 + j] = fr(d * (q & 15)) + m; out[blk * 32 + j + 16] = fr(d * (q >> 4)) + m; }
      }
      return out;
    case 'Q5_0': case 'Q5_1': { // d (, m), 32 high bits (u32), nibbles: q = nibble | high bit << 4
      const withMin = type === 'Q5_1', bs = withMin ? 24 : 22, qo = withMin ? 8 : 6;
      for (let blk = 0; blk < numel / 32; blk++) {
        const o = blk * bs, d = f16(o), m = withMin ? f16(o + 2) : 0;
        const qh = v.getUint32(o + (withMin ? 4 : 2), true);
        for (let j = 0; j < 16; j++) {
          const q = b[o + qo + j]!;
          const lo = (q & 15) | (((qh >>> j) & 1) << 4), hi = (q >> 4) | (((qh >>> (j + 16)) & 1) << 4);
          out[blk * 32 + j] = withMin ? fr(d * lo) + m : d * (lo - 16);
          out[blk * 32 + j + 16] = withMin ? fr(d * hi) + m : d * (hi - 16);
        }
      }
      return out;
    }
    case 'Q2_K': // 16 scale bytes (4-bit scale, 4-bit min), 64 bytes of 2-bit quants, d, dmin at 80, 82
      for (let blk = 0; blk < numel / 256; blk++) {
        const o = blk * 84, d = f16(o + 80), dmin = f16(o + 82);
        let y = blk * 256, is = 0;
        for (let n = 0; n < 2; n++) {
          const q = o + 16 + n * 32;
          for (let shift = 0; shift < 8; shift += 2) {
            for (const half of [0, 16]) {
              const sc = b[o + is++]!, dl = fr(d * (sc & 15)), ml = fr(dmin * (sc >> 4));
              for (let l = 0; l < 16; l++) out[y++] = fr(dl * ((b[q + half + l]! >> shift) & 3)) - ml;
            }
          }
        }
      }
      return out;
    case 'Q3_K': // 32 bytes of high bits, 64 of 2-bit quants, 12 of packed 6-bit scales, d at 108
      for (let blk = 0; blk < numel / 256; blk++) {
        const o = blk * 110, d = f16(o + 108);
        const sc = q3kScales(b, o + 96);
        let y = blk * 256, is = 0, m = 1;
        for (let n = 0; n < 2; n++) {
          const q = o + 32 + n * 32;
          for (let shift = 0; shift < 8; shift += 2, m <<= 1) {
            for (const half of [0, 16]) {
              const dl = fr(d * (sc[is++]! - 32));
              for (let l = 0; l < 16; l++) out[y++] = dl * (((b[q + half + l]! >> shift) & 3) - ((b[o + half + l]! & m) ? 0 : 4));
            }
          }
        }
      }
      return out;
    case 'Q4_K': case 'Q5_K': { // d, dmin, 12 bytes of 6-bit scales and mins, (Q5: 32 bytes of high bits), 128 bytes of nibbles
      const five = type === 'Q5_K', bs = five ? 176 : 144, qo = five ? 48 : 16;
      for (let blk = 0; blk < numel / 256; blk++) {
        const o = blk * bs, d = f16(o), dmin = f16(o + 2);
        let y = blk * 256;
        for (let j = 0, is = 0, u = 1; j < 4; j++, is += 2, u <<= 2) {
          const [s1, m1] = scaleMinK4(b, o + 4, is), [s2, m2] = scaleMinK4(b, o + 4, is + 1);
          const d1 = fr(d * s1), n1 = fr(dmin * m1), d2 = fr(d * s2), n2 = fr(dmin * m2);
          const q = o + qo + j * 32;
          for (let l = 0; l < 32; l++) out[y++] = fr(d1 * ((b[q + l]! & 15) + (five && (b[o + 16 + l]! & u) ? 16 : 0))) - n1;
          for (let l = 0; l < 32; l++) out[y++] = fr(d2 * ((b[q + l]! >> 4) + (five && (b[o + 16 + l]! & (u << 1)) ? 16 : 0))) - n2;
        }
      }
      return out;
    }
    case 'Q6_K': // 128 bytes of low nibbles, 64 of high 2-bit pairs, 16 int8 scales, d at 208
      for (let blk = 0; blk < numel / 256; blk++) {
        const o = blk * 210, d = f16(o + 208);
        for (let n = 0; n < 2; n++) {
          const ql = o + n * 64, qh = o + 128 + n * 32, sc = o + 192 + n * 8, y = blk * 256 + n * 128;
          for (let l = 0; l < 32; l++) {
            const is = l >> 4, h = b[qh + l]!;
            const q1 = ((b[ql + l]! & 15) | ((h & 3) << 4)) - 32, q2 = ((b[ql + l + 32]! & 15) | (((h >> 2) & 3) << 4)) - 32;
            const q3 = ((b[ql + l]! >> 4) | (((h >> 4) & 3) << 4)) - 32, q4 = ((b[ql + l + 32]! >> 4) | (((h >> 6) & 3) << 4)) - 32;
            out[y + l] = fr(d * v.getInt8(sc + is)) * q1;
            out[y + l + 32] = fr(d * v.getInt8(sc + is + 2)) * q2;
            out[y + l + 64] = fr(d * v.getInt8(sc + is + 4)) * q3;
            out[y + l + 96] = fr(d * v.getInt8(sc + is + 6)) * q4;
          }
        }
      }
      return out;
    default: throw new FormatError('gguf', `dequantizing ${type} is not implemented yet (F32, F16, BF16, Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, Q2_K, Q3_K, Q4_K, Q5_K and Q6_K are)`);
  }
}

/** ggml's get_scale_min_k4: the j-th 6-bit scale and min of a Q4_K / Q5_K block's 12 packed bytes at `o`. */
function scaleMinK4(b: Uint8Array, o: number, j: number): [number, number] {
  if (j < 4) return [b[o + j]! & 63, b[o + j + 4]! & 63];
  return [(b[o + j + 4]! & 15) | ((b[o + j - 4]! >> 6) << 4), (b[o + j + 4]! >> 4) | ((b[o + j]! >> 6) << 4)];
}

/** A Q3_K block's 16 6-bit scales, unpacked from its 12 bytes at `o` (ggml's kmask shuffle). */
function q3kScales(b: Uint8Array, o: number): Int8Array {
  const aux = new Uint32Array(4);
  for (let i = 0; i < 3; i++) aux[i] = b[o + 4 * i]! | (b[o + 4 * i + 1]! << 8) | (b[o + 4 * i + 2]! << 16) | (b[o + 4 * i + 3]! << 24);
  const k1 = 0x03030303, k2 = 0x0f0f0f0f, tmp = aux[2]!;
  aux[2] = ((aux[0]! >>> 4) & k2) | (((tmp >>> 4) & k1) << 4);
  aux[3] = ((aux[1]! >>> 4) & k2) | (((tmp >>> 6) & k1) << 4);
  aux[0] = (aux[0]! & k2) | (((tmp >>> 0) & k1) << 4);
  aux[1] = (aux[1]! & k2) | (((tmp >>> 2) & k1) << 4);
  return new Int8Array(aux.buffer);
}
