// A little-endian byte writer for GGUF v3 files built in tests (headers, metadata, tensor data).
import { toFloat16Bits } from '../src/dtype/convert.js';

export class GgufBytes {
  parts: number[] = [];
  u8(v: number): this { this.parts.push(v & 255); return this; }
  u32(v: number): this { for (let i = 0; i < 4; i++) this.u8(v >>> (8 * i)); return this; }
  u64(v: number): this { const b = BigInt(v); for (let i = 0n; i < 8n; i++) this.u8(Number((b >> (8n * i)) & 255n)); return this; }
  f32(v: number): this { const b = new DataView(new ArrayBuffer(4)); b.setFloat32(0, v, true); for (let i = 0; i < 4; i++) this.u8(b.getUint8(i)); return this; }
  f16(v: number): this { const h = toFloat16Bits(v); return this.u8(h).u8(h >> 8); }
  str(s: string): this { const b = new TextEncoder().encode(s); this.u64(b.length); for (const x of b) this.u8(x); return this; }
  pad(a: number): this { while (this.parts.length % a) this.u8(0); return this; }
}
