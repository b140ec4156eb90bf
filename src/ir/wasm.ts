// The few WebAssembly binary-format pieces our hand-written modules need (SIMD kernels on the CPU,
// the random sampler): LEB128 integers, vectors, sections, names.

/** Unsigned LEB128. */
export function uleb(n: number): number[] {
  const out: number[] = [];
  do {
    let b = n & 0x7f;
    n >>>= 7;
    if (n !== 0) b |= 0x80;
    out.push(b);
  } while (n !== 0);
  return out;
}

/** Signed LEB128 (i32 constants). */
export function sleb(n: number): number[] {
  const out: number[] = [];
  for (;;) {
    const b = n & 0x7f;
    n >>= 7;
    if ((n === 0 && (b & 0x40) === 0) || (n === -1 && (b & 0x40) !== 0)) { out.push(b); return out; }
    out.push(b | 0x80);
  }
}

/** A vector: its length, then the items. */
export const vec = (items: number[][]): number[] => [...uleb(items.length), ...items.flat()];
/** A section: id, byte length, body. */
export const section = (id: number, body: number[]): number[] => [id, ...uleb(body.length), ...body];
/** A name (ASCII), length-prefixed. */
export const name = (s: string): number[] => [...uleb(s.length), ...Array.from(s, (c) => c.charCodeAt(0))];
/** The bytes of a typed array, for data segments. */
export const bytesOf = (a: Float32Array | Float64Array | Int32Array): number[] => Array.from(new Uint8Array(a.buffer, a.byteOffset, a.byteLength));
