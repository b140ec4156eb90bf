// WebAssembly SIMD decode GEMVs for the CPU's quant kernels (part of kernels/quant.ts): one input row
// x [K] (float32, in the quant memory) against all N packed rows of a weight that lives in the quant
// memory (src/quant/wasm_memory.ts), out [N] float32. Each kernel widens the packed integers to float32
// lanes (i8/u8 → i16 → i32 → f32), multiplies by x and sums in float32x4 accumulators; the scale (and
// int4's zero point, through the group sums of x: Σx(q − z) = Σxq − z·Σx) is applied once per row,
// group or block. So the numbers are dequantize-then-matmul's up to the order of accumulation, in
// float32 as the contract says.
//
// Exports (all parameters i32 byte addresses or counts):
//   i8(x, q, s, out, N, K)                   int8 per channel, K % 16 == 0
//   fp8(x, q, s, out, N, K, perTensor)       e4m3fn: bits (b & 0x7f) << 20 | sign, × 2^120 (exact, NaN codes not special)
//   int4(x, q, s, z, xs, out, N, K, g, asym) g % 32 == 0; z, xs float32 [N, K/g] and [K/g]; sym: z = 8
//   q8_0(x, q, out, N, K), q4_0(x, q, out, N, K)   GGUF blocks; the f16 d decoded in the kernel
//   q4_k / q5_k(x, q, xs, out, N, K), q6_k(x, q, out, N, K)   GGUF K-quants (xs: Σx of every 32 elements)
//   f32(x, w, out, N, K)                     plain float rows (K % 4 == 0), for formats dequantized to a scratch

import { uleb, sleb, name as wname, section, vec as wvec } from '../../../ir/wasm.js';

const I32 = 0x7f, F32 = 0x7d, V128 = 0x7b;

class Fn {
  c: number[] = [];
  constructor(readonly params: number, readonly i32Locals: number, readonly f32Locals: number, readonly vLocals: number) {}
  e(...b: number[]): this { this.c.push(...b); return this; }
  get(l: number): this { return this.e(0x20, ...uleb(l)); }
  set(l: number): this { return this.e(0x21, ...uleb(l)); }
  tee(l: number): this { return this.e(0x22, ...uleb(l)); }
  i32(v: number): this { return this.e(0x41, ...sleb(v)); }
  f32c(v: number): this { const b = new Uint8Array(new Float32Array([v]).buffer); return this.e(0x43, ...b); }
  simd(op: number, ...imm: number[]): this { return this.e(0xfd, ...uleb(op), ...imm); }
  vload(off = 0): this { return this.simd(0x00, 0, ...uleb(off)); } // align 1: packed rows are not 16-byte aligned
  vconst(bytes: number[]): this { return this.simd(0x0c, ...bytes); }
  add(): this { return this.e(0x6a); }
  mul(): this { return this.e(0x6c); }
  /** for (v = 0; v < bound(local); v += step) body */
  loop(v: number, bound: number, step: number, body: () => void): this {
    this.i32(0).set(v);
    this.e(0x02, 0x40, 0x03, 0x40).get(v).get(bound).e(0x4e /* ge_s */, 0x0d, 1);
    body();
    this.get(v).i32(step).add().set(v).e(0x0c, 0, 0x0b, 0x0b);
    return this;
  }
  bytes(): number[] {
    const locals = [[...uleb(this.i32Locals), I32], [...uleb(this.f32Locals), F32], [...uleb(this.vLocals), V128]].filter((l) => l[0] !== 0);
    const body = [...wvec(locals), ...this.c, 0x0b];
    return [...uleb(body.length), ...body];
  }
}

// SIMD opcodes
const F32X4_ADD = 0xe4, F32X4_MUL = 0xe6, F32X4_SPLAT = 0x13, F32X4_EXTRACT = 0x1f, CONVERT_S = 0xfa;
const I16_LOW_S = 0x87, I16_HIGH_S = 0x88, I16_LOW_U = 0x89, I16_HIGH_U = 0x8a;
const I32_LOW_S = 0xa7, I32_HIGH_S = 0xa8, I32_LOW_U = 0xa9, I32_HIGH_U = 0xaa;
const V_AND = 0x4e, V_OR = 0x50, I8_SUB = 0x71, I8_SHR_U = 0x6d, SHUFFLE = 0x0d, I32_SHL = 0xab;
const splat8 = (v: number): number[] => new Array<number>(16).fill(v & 255);
const splat32 = (v: number): number[] => { const b = new Uint8Array(16); new Uint32Array(b.buffer).fill(v >>> 0); return [...b]; };

/**
 * acc += Σ over the 16 i8 (signed) or u8 lanes on the stack (as a v128 in local `v`) × x[p .. p+16]:
 * widen to four i32x4, convert, multiply by x, add into acc. `signed` picks the extends.
 */
function dot16(f: Fn, v: number, p: number, acc: number, signed: boolean, base = 0): void {
  const [lo16, hi16, lo32, hi32] = signed ? [I16_LOW_S, I16_HIGH_S, I32_LOW_S, I32_HIGH_S] : [I16_LOW_U, I16_HIGH_U, I32_LOW_U, I32_HIGH_U];
  for (let h = 0; h < 2; h++) {
    for (let q = 0; q < 2; q++) {
      f.get(acc);
      f.get(v).simd(h ? hi16 : lo16).simd(q ? hi32 : lo32).simd(CONVERT_S);
      f.get(p).vload(base + (h * 2 + q) * 16).simd(F32X4_MUL).simd(F32X4_ADD).set(acc);
    }
  }
}
/** The horizontal sum of f32x4 local `v` onto the stack. */
function hsum(f: Fn, v: number): void {
  f.get(v).simd(F32X4_EXTRACT, 0).get(v).simd(F32X4_EXTRACT, 1).e(0x92).get(v).simd(F32X4_EXTRACT, 2).get(v).simd(F32X4_EXTRACT, 3).e(0x92).e(0x92);
}
/** f16 bits at address (local a) + off → f32 on the stack: ((h & 0x7fff) << 13 as f32) × 2^112, sign or'ed. */
function f16At(f: Fn, a: number, off: number, tmp: number): void {
  f.get(a).e(0x2f, 1, ...uleb(off)).set(tmp); // i32.load16_u
  f.get(tmp).i32(0x7fff).e(0x71).i32(13).e(0x74).get(tmp).i32(0x8000).e(0x71).i32(16).e(0x74).e(0x72).e(0xbe); // f32.reinterpret
  f.f32c(2 ** 112).e(0x94);
}

function i8Fn(): Fn {
  // params x q s out N K | i32: n k o p | v128: acc0 acc1 v
  const f = new Fn(6, 4, 0, 3);
  const [x, q, s, out, N, K, n, k, o, p, a0, a1, v] = [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12];
  f.loop(n, N, 1, () => {
    f.vconst(splat8(0)).set(a0).vconst(splat8(0)).set(a1);
    f.get(q).get(n).get(K).mul().add().set(o).get(x).set(p);
    f.loop(k, K, 32, () => {
      f.get(o).vload(0).set(v); dot16(f, v, p, a0, true);
      f.get(o).vload(16).set(v); f.get(p).i32(64).add().set(p); dot16(f, v, p, a1, true);
      f.get(o).i32(32).add().set(o).get(p).i32(64).add().set(p);
    });
    f.get(a0).get(a1).simd(F32X4_ADD).set(a0);
    f.get(out).get(n).i32(4).mul().add();
    hsum(f, a0); f.get(s).get(n).i32(4).mul().add().e(0x2a, 2, 0).e(0x94);
    f.e(0x38, 2, 0); // f32.store
  });
  return f;
}

function fp8Fn(): Fn {
  // params x q s out N K perTensor | i32: n k o p | v128: acc v w
  const f = new Fn(7, 4, 0, 3);
  const [x, q, s, out, N, K, per, n, k, o, p, acc, v, w] = [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13];
  f.loop(n, N, 1, () => {
    f.vconst(splat8(0)).set(acc);
    f.get(q).get(n).get(K).mul().add().set(o).get(x).set(p);
    f.loop(k, K, 16, () => {
      f.get(o).vload(0).set(v);
      for (let h = 0; h < 2; h++) for (let qq = 0; qq < 2; qq++) {
        // u32 lanes b → f32 bits ((b & 0x7f) << 20) | ((b & 0x80) << 24), then × 2^120
        f.get(v).simd(h ? I16_HIGH_U : I16_LOW_U).simd(qq ? I32_HIGH_U : I32_LOW_U).set(w);
        f.get(w).vconst(splat32(0x7f)).simd(V_AND).i32(20).simd(I32_SHL);
        f.get(w).vconst(splat32(0x80)).simd(V_AND).i32(24).simd(I32_SHL).simd(V_OR);
        f.f32c(2 ** 120).simd(F32X4_SPLAT).simd(F32X4_MUL);
        f.get(p).vload((h * 2 + qq) * 16).simd(F32X4_MUL).get(acc).simd(F32X4_ADD).set(acc);
      }
      f.get(o).i32(16).add().set(o).get(p).i32(64).add().set(p);
    });
    f.get(out).get(n).i32(4).mul().add();
    hsum(f, acc);
    f.get(s).get(per).e(0x45 /* eqz */).get(n).mul().i32(4).mul().add().e(0x2a, 2, 0).e(0x94);
    f.e(0x38, 2, 0);
  });
  return f;
}

const INTERLEAVE_LO = [0, 16, 1, 17, 2, 18, 3, 19, 4, 20, 5, 21, 6, 22, 7, 23];
const INTERLEAVE_HI = [8, 24, 9, 25, 10, 26, 11, 27, 12, 28, 13, 29, 14, 30, 15, 31];

function int4Fn(): Fn {
  // params x q s z xs out N K g asym | i32: n gi j o p G rowB sidx | f32: total t | v128: acc v lo hi
  const f = new Fn(10, 8, 2, 4);
  const [x, q, s, z, xs, out, N, K, g, asym] = [0, 1, 2, 3, 4, 5, 6, 7, 8, 9];
  const [n, gi, j, o, p, G, , sidx] = [10, 11, 12, 13, 14, 15, 16, 17];
  const [total, t] = [18, 19];
  const [acc, v, lo, hi] = [20, 21, 22, 23];
  f.get(K).get(g).e(0x6e /* div_u */).set(G);
  f.loop(n, N, 1, () => {
    f.f32c(0).set(total);
    f.get(q).get(n).get(K).mul().i32(1).e(0x76 /* shr_u */).add().set(o).get(x).set(p);
    f.loop(gi, G, 1, () => {
      f.vconst(splat8(0)).set(acc);
      f.loop(j, g, 32, () => {
        f.get(o).vload(0).set(v);
        f.get(v).vconst(splat8(15)).simd(V_AND).set(lo);
        f.get(v).i32(4).simd(I8_SHR_U).set(hi);
        f.get(lo).get(hi).simd(SHUFFLE, ...INTERLEAVE_LO).set(v); dot16(f, v, p, acc, false);
        f.get(p).i32(64).add().set(p);
        f.get(lo).get(hi).simd(SHUFFLE, ...INTERLEAVE_HI).set(v); dot16(f, v, p, acc, false);
        f.get(p).i32(64).add().set(p).get(o).i32(16).add().set(o);
      });
      // total += s[n, gi] · (Σxq − z·Σx)
      f.get(n).get(G).mul().get(gi).add().i32(4).mul().set(sidx);
      hsum(f, acc); f.set(t);
      f.get(t);
      // z: zeros[n, gi] when asym, else 8
      f.get(z).get(sidx).add().e(0x2a, 2, 0).f32c(8).get(asym).e(0x1b /* select: zeros[...] when asym */);
      f.get(xs).get(gi).i32(4).mul().add().e(0x2a, 2, 0).e(0x94).e(0x93 /* f32.sub */);
      f.get(s).get(sidx).add().e(0x2a, 2, 0).e(0x94).get(total).e(0x92).set(total);
    });
    f.get(out).get(n).i32(4).mul().add().get(total).e(0x38, 2, 0);
  });
  return f;
}

/** GGUF q8_0 (34-byte blocks: f16 d, 32 int8) or q4_0 (18-byte blocks: f16 d, 16 bytes: lo nibbles 0..15, hi 16..31, minus 8). */
function ggufFn(kind: 'q8_0' | 'q4_0'): Fn {
  // params x q out N K | i32: n b o p B tmp | v128: acc bacc v
  const f = new Fn(5, 6, 0, 3);
  const [x, q, out, N, K, n, b, o, p, B, tmp, acc, bacc, v] = [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13];
  const bs = kind === 'q8_0' ? 34 : 18;
  f.get(K).i32(32).e(0x6e).set(B);
  f.get(q).set(o);
  f.loop(n, N, 1, () => {
    f.vconst(splat8(0)).set(acc).get(x).set(p);
    f.loop(b, B, 1, () => {
      f.vconst(splat8(0)).set(bacc);
      if (kind === 'q8_0') {
        f.get(o).vload(2).set(v); dot16(f, v, p, bacc, true);
        f.get(p).i32(64).add().set(p);
        f.get(o).vload(18).set(v); dot16(f, v, p, bacc, true);
      } else {
        f.get(o).vload(2).vconst(splat8(15)).simd(V_AND).vconst(splat8(8)).simd(I8_SUB).set(v); dot16(f, v, p, bacc, true);
        f.get(p).i32(64).add().set(p);
        f.get(o).vload(2).i32(4).simd(I8_SHR_U).vconst(splat8(8)).simd(I8_SUB).set(v); dot16(f, v, p, bacc, true);
      }
      f.get(bacc); f16At(f, o, 0, tmp); f.simd(F32X4_SPLAT).simd(F32X4_MUL).get(acc).simd(F32X4_ADD).set(acc);
      f.get(p).i32(64).add().set(p).get(o).i32(bs).add().set(o);
    });
    f.get(out).get(n).i32(4).mul().add();
    hsum(f, acc);
    f.e(0x38, 2, 0);
  });
  return f;
}

/**
 * GGUF q4_k (144-byte blocks of 256: f16 d, dmin, 12 bytes of 6-bit scales/mins, 128 bytes of nibbles:
 * byte l of sub-block pair j holds element 64j + l (low nibble) and 64j + 32 + l (high)). Per 32 elements
 * Σx·(d1·q − m1) = d1·Σx·q − m1·Σx, with Σx of every 32 elements precomputed (xs).
 */
function q4kFn(five = false): Fn {
  // params x q xs out N K | i32: n b o p B tmp sc mn c | f32: d dmin tmin d1 | v128: tvec acc v
  const f = new Fn(6, 9, 4, 3);
  const [x, q, xs, out, N, K] = [0, 1, 2, 3, 4, 5];
  const [n, b, o, p, B, tmp, sc, mn, c] = [6, 7, 8, 9, 10, 11, 12, 13, 14];
  const [d, dmin, tmin, d1] = [15, 16, 17, 18];
  const [tvec, acc, v] = [19, 20, 21];
  const ld8 = (off: number): void => { f.get(o).e(0x2d, 0, ...uleb(off)); }; // i32.load8_u
  f.get(K).i32(256).e(0x6e).set(B);
  f.get(q).set(o);
  f.loop(n, N, 1, () => {
    f.vconst(splat8(0)).set(tvec).f32c(0).set(tmin).get(x).set(p).get(xs).set(c);
    f.loop(b, B, 1, () => {
      f16At(f, o, 0, tmp); f.set(d);
      f16At(f, o, 2, tmp); f.set(dmin);
      for (let is = 0; is < 8; is++) {
        const j = is >> 1, half = is & 1;
        if (is < 4) {
          ld8(4 + is); f.i32(63).e(0x71).set(sc);
          ld8(8 + is); f.i32(63).e(0x71).set(mn);
        } else {
          ld8(8 + is); f.i32(15).e(0x71); ld8(is); f.i32(6).e(0x76).i32(4).e(0x74).e(0x72).set(sc);
          ld8(8 + is); f.i32(4).e(0x76); ld8(4 + is); f.i32(6).e(0x76).i32(4).e(0x74).e(0x72).set(mn);
        }
        f.get(d).get(sc).e(0xb3 /* f32.convert_i32_u */).e(0x94).set(d1);
        f.vconst(splat8(0)).set(acc);
        for (let w = 0; w < 2; w++) {
          f.get(o).vload((five ? 48 : 16) + 32 * j + 16 * w);
          if (half) f.i32(4).simd(I8_SHR_U); else f.vconst(splat8(15)).simd(V_AND);
          // q5_k: + 16 where bit (2j + half) of qh[l] is set
          if (five) f.get(o).vload(16 + 16 * w).i32(is).simd(I8_SHR_U).vconst(splat8(1)).simd(V_AND).i32(4).simd(0x6b /* i8x16.shl */).simd(V_OR);
          f.set(v);
          dot16(f, v, p, acc, false, (64 * j + 32 * half + 16 * w) * 4);
        }
        f.get(acc).get(d1).simd(F32X4_SPLAT).simd(F32X4_MUL).get(tvec).simd(F32X4_ADD).set(tvec);
        // tmin += fround(dmin · m) · Σx over these 32 elements
        f.get(dmin).get(mn).e(0xb3).e(0x94).get(c).e(0x2a, 2, ...uleb(is * 4)).e(0x94).get(tmin).e(0x92).set(tmin);
      }
      f.get(p).i32(1024).add().set(p).get(c).i32(32).add().set(c).get(o).i32(five ? 176 : 144).add().set(o);
    });
    f.get(out).get(n).i32(4).mul().add();
    hsum(f, tvec); f.get(tmin).e(0x93);
    f.e(0x38, 2, 0);
  });
  return f;
}

/**
 * GGUF q6_k (210-byte blocks of 256: 128 bytes of low nibbles ql, 64 of 2-bit high parts qh, 16 int8
 * scales, f16 d): per half n and 16 lanes l, the four values (ql[l] & 15 | (qh[l] & 3) << 4) − 32 at
 * 128n + l, (ql[l+32] & 15 | ...) at +32, (ql[l] >> 4 | ...) at +64, (ql[l+32] >> 4 | ...) at +96, each
 * 16 sharing the scale fround(d · sc[...]).
 */
function q6kFn(): Fn {
  // params x q out N K | i32: n b o p B tmp | f32: d | v128: tvec acc A Bv H v
  const f = new Fn(5, 6, 1, 6);
  const [x, q, out, N, K, n, b, o, p, B, tmp, d, tvec, acc, A, Bv, H, v] = [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17];
  const I8_SHL = 0x6b;
  f.get(K).i32(256).e(0x6e).set(B);
  f.get(q).set(o);
  f.loop(n, N, 1, () => {
    f.vconst(splat8(0)).set(tvec).get(x).set(p);
    f.loop(b, B, 1, () => {
      f16At(f, o, 208, tmp); f.set(d);
      for (let nn = 0; nn < 2; nn++) {
        for (let l0 = 0; l0 < 32; l0 += 16) {
          const is = l0 >> 4;
          f.get(o).vload(64 * nn + l0).set(A).get(o).vload(64 * nn + 32 + l0).set(Bv).get(o).vload(128 + 32 * nn + l0).set(H);
          for (let t = 0; t < 4; t++) {
            // low part
            if (t === 0) f.get(A).vconst(splat8(15)).simd(V_AND);
            else if (t === 1) f.get(Bv).vconst(splat8(15)).simd(V_AND);
            else if (t === 2) f.get(A).i32(4).simd(I8_SHR_U);
            else f.get(Bv).i32(4).simd(I8_SHR_U);
            // high part ((qh >> 2t) & 3) << 4
            f.get(H); if (t) f.i32(2 * t).simd(I8_SHR_U);
            f.vconst(splat8(3)).simd(V_AND).i32(4).simd(I8_SHL).simd(V_OR).vconst(splat8(32)).simd(I8_SUB).set(v);
            f.vconst(splat8(0)).set(acc);
            dot16(f, v, p, acc, true, (128 * nn + l0 + 32 * t) * 4);
            f.get(acc).get(d).get(o).e(0x2c /* i32.load8_s */, 0, ...uleb(192 + 8 * nn + is + 2 * t)).e(0xb2).e(0x94).simd(F32X4_SPLAT).simd(F32X4_MUL);
            f.get(tvec).simd(F32X4_ADD).set(tvec);
          }
        }
      }
      f.get(p).i32(1024).add().set(p).get(o).i32(210).add().set(o);
    });
    f.get(out).get(n).i32(4).mul().add();
    hsum(f, tvec);
    f.e(0x38, 2, 0);
  });
  return f;
}

/**
 * GGUF q4_1 (20-byte blocks: f16 d, m, 16 bytes of nibbles), q5_0 (22: d, u32 qh, nibbles; value
 * d·(q − 16)) and q5_1 (24: d, m, qh, nibbles; value d·q + m): low nibbles are elements 0..15, high
 * 16..31, q5's fifth bit of element j is bit j of qh. Per block Σx·w = d·Σx·q (+ m·Σx).
 */
function legacyFn(kind: 'q4_1' | 'q5_0' | 'q5_1'): Fn {
  // params x q xs out N K | i32: n b o p B tmp c qh | f32: d plus | v128: acc bacc v
  const f = new Fn(6, 8, 2, 3);
  const [x, q, xs, out, N, K, n, b, o, p, B, tmp, c, qh, d, plus, acc, bacc, v] = [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18];
  const bs = kind === 'q4_1' ? 20 : kind === 'q5_0' ? 22 : 24, qs = kind === 'q4_1' ? 4 : kind === 'q5_0' ? 6 : 8, qhOff = kind === 'q5_0' ? 2 : 4;
  const five = kind !== 'q4_1', withMin = kind !== 'q5_0';
  const BYTE_SEL = [0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1], BIT = [1, 2, 4, 8, 16, 32, 64, 128, 1, 2, 4, 8, 16, 32, 64, 128];
  /** 16 on the lanes j whose bit j of the 16-bit value on the stack is set, OR'ed into the v128 below it. */
  const highBits = (): void => {
    f.simd(0x11 /* i32x4.splat */).vconst(BYTE_SEL).simd(0x0e /* swizzle */).vconst(BIT).simd(V_AND).vconst(BIT).simd(0x23 /* i8x16.eq */);
    f.vconst(splat8(16)).simd(V_AND).simd(V_OR);
  };
  f.get(K).i32(32).e(0x6e).set(B);
  f.get(q).set(o);
  f.loop(n, N, 1, () => {
    f.vconst(splat8(0)).set(acc).f32c(0).set(plus).get(x).set(p).get(xs).set(c);
    f.loop(b, B, 1, () => {
      if (five) f.get(o).e(0x28 /* i32.load */, 0, ...uleb(qhOff)).set(qh);
      f.vconst(splat8(0)).set(bacc);
      for (let half = 0; half < 2; half++) {
        f.get(o).vload(qs);
        if (half) f.i32(4).simd(I8_SHR_U); else f.vconst(splat8(15)).simd(V_AND);
        if (five) { f.get(qh); if (half) f.i32(16).e(0x76); else f.i32(0xffff).e(0x71); highBits(); }
        if (!withMin) f.vconst(splat8(16)).simd(I8_SUB);
        f.set(v);
        dot16(f, v, p, bacc, !withMin, half * 64);
      }
      f.get(bacc); f16At(f, o, 0, tmp); f.simd(F32X4_SPLAT).simd(F32X4_MUL).get(acc).simd(F32X4_ADD).set(acc);
      if (withMin) { f16At(f, o, 2, tmp); f.get(c).e(0x2a, 2, 0).e(0x94).get(plus).e(0x92).set(plus); }
      f.get(p).i32(128).add().set(p).get(c).i32(4).add().set(c).get(o).i32(bs).add().set(o);
    });
    f.get(out).get(n).i32(4).mul().add();
    hsum(f, acc); f.get(plus).e(0x92);
    f.e(0x38, 2, 0);
  });
  return f;
}

/**
 * GGUF q2_k (84-byte blocks of 256: 16 scale bytes (low nibble scale, high nibble min), 64 bytes of 2-bit
 * values, f16 d and dmin at 80 and 82): sub-block is = 8n + 2j + half holds elements
 * 128n + 32j + 16·half + l = (qs[32n + 16·half + l] >> 2j) & 3, value fround(d·sc)·q − fround(dmin·m).
 * Per 16 elements Σx·w = fround(d·sc)·Σx·q − fround(dmin·m)·Σx (xs: Σx of every 16 elements).
 */
function q2kFn(): Fn {
  // params x q xs out N K | i32: n b o p B tmp c sc | f32: d dmin tmin | v128: tvec acc v
  const f = new Fn(6, 8, 3, 3);
  const [x, q, xs, out, N, K, n, b, o, p, B, tmp, c, sc, d, dmin, tmin, tvec, acc, v] = [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19];
  f.get(K).i32(256).e(0x6e).set(B);
  f.get(q).set(o);
  f.loop(n, N, 1, () => {
    f.vconst(splat8(0)).set(tvec).f32c(0).set(tmin).get(x).set(p).get(xs).set(c);
    f.loop(b, B, 1, () => {
      f16At(f, o, 80, tmp); f.set(d);
      f16At(f, o, 82, tmp); f.set(dmin);
      for (let nn = 0; nn < 2; nn++) for (let j = 0; j < 4; j++) for (let half = 0; half < 2; half++) {
        const is = 8 * nn + 2 * j + half, y = 128 * nn + 32 * j + 16 * half;
        f.get(o).e(0x2d, 0, ...uleb(is)).set(sc); // i32.load8_u
        f.get(o).vload(16 + 32 * nn + 16 * half);
        if (j) f.i32(2 * j).simd(I8_SHR_U);
        f.vconst(splat8(3)).simd(V_AND).set(v);
        f.vconst(splat8(0)).set(acc);
        dot16(f, v, p, acc, false, 4 * y);
        f.get(acc).get(d).get(sc).i32(15).e(0x71).e(0xb3).e(0x94).simd(F32X4_SPLAT).simd(F32X4_MUL).get(tvec).simd(F32X4_ADD).set(tvec);
        f.get(dmin).get(sc).i32(4).e(0x76).e(0xb3).e(0x94).get(c).e(0x2a, 2, ...uleb(4 * (y >> 4))).e(0x94).get(tmin).e(0x92).set(tmin);
      }
      f.get(p).i32(1024).add().set(p).get(c).i32(64).add().set(c).get(o).i32(84).add().set(o);
    });
    f.get(out).get(n).i32(4).mul().add();
    hsum(f, tvec); f.get(tmin).e(0x93);
    f.e(0x38, 2, 0);
  });
  return f;
}

/**
 * GGUF q3_k (110-byte blocks of 256: 32 bytes of high bits hm, 64 bytes of 2-bit values, 12 bytes of
 * 6-bit scales (ggml's kmask packing, unpacked here as dequantize_row_q3_K does), f16 d at 108):
 * sub-block is = 8n + 2j + half holds elements 128n + 32j + 16·half + l =
 * ((qs[32n + 16·half + l] >> 2j) & 3) − (hm[16·half + l] bit (4n + j) ? 0 : 4), times fround(d·(sc − 32)).
 */
function q3kFn(): Fn {
  // params x q out N K | i32: n b o p B tmp a0 a1 a2 a3 t | f32: d | v128: tvec acc v
  const f = new Fn(5, 11, 1, 3);
  const [x, q, out, N, K, n, b, o, p, B, tmp, a0, a1, a2, a3, t, d, tvec, acc, v] = [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19];
  const k1 = 0x03030303, k2 = 0x0f0f0f0f;
  const ld32 = (off: number): Fn => f.get(o).e(0x28, 0, ...uleb(off));
  f.get(K).i32(256).e(0x6e).set(B);
  f.get(q).set(o);
  f.loop(n, N, 1, () => {
    f.vconst(splat8(0)).set(tvec).get(x).set(p);
    f.loop(b, B, 1, () => {
      f16At(f, o, 108, tmp); f.set(d);
      ld32(104).set(t);
      // a2 = ((aux0 >> 4) & k2) | (((t >> 4) & k1) << 4); a3 = ((aux1 >> 4) & k2) | (((t >> 6) & k1) << 4)
      ld32(96).i32(4).e(0x76).i32(k2).e(0x71).get(t).i32(4).e(0x76).i32(k1).e(0x71).i32(4).e(0x74).e(0x72).set(a2);
      ld32(100).i32(4).e(0x76).i32(k2).e(0x71).get(t).i32(6).e(0x76).i32(k1).e(0x71).i32(4).e(0x74).e(0x72).set(a3);
      // a0 = (aux0 & k2) | ((t & k1) << 4); a1 = (aux1 & k2) | (((t >> 2) & k1) << 4)
      ld32(96).i32(k2).e(0x71).get(t).i32(k1).e(0x71).i32(4).e(0x74).e(0x72).set(a0);
      ld32(100).i32(k2).e(0x71).get(t).i32(2).e(0x76).i32(k1).e(0x71).i32(4).e(0x74).e(0x72).set(a1);
      const words = [a0, a1, a2, a3];
      for (let nn = 0; nn < 2; nn++) for (let j = 0; j < 4; j++) for (let half = 0; half < 2; half++) {
        const is = 8 * nn + 2 * j + half, y = 128 * nn + 32 * j + 16 * half, hb = 4 * nn + j;
        // low 2 bits, plus 4 where the high bit is set, minus 4 (signed −4..3)
        f.get(o).vload(32 + 32 * nn + 16 * half);
        if (j) f.i32(2 * j).simd(I8_SHR_U);
        f.vconst(splat8(3)).simd(V_AND);
        f.get(o).vload(16 * half);
        if (hb) f.i32(hb).simd(I8_SHR_U);
        f.vconst(splat8(1)).simd(V_AND).i32(2).simd(0x6b /* i8x16.shl */).simd(V_OR).vconst(splat8(4)).simd(I8_SUB).set(v);
        f.vconst(splat8(0)).set(acc);
        dot16(f, v, p, acc, true, 4 * y);
        // scale: byte (is & 3) of words[is >> 2], minus 32, times d (rounded to float32)
        f.get(acc).get(d).get(words[is >> 2]!);
        if (is & 3) f.i32(8 * (is & 3)).e(0x76);
        f.i32(255).e(0x71).i32(32).e(0x6b /* i32.sub */).e(0xb2).e(0x94).simd(F32X4_SPLAT).simd(F32X4_MUL).get(tvec).simd(F32X4_ADD).set(tvec);
      }
      f.get(p).i32(1024).add().set(p).get(o).i32(110).add().set(o);
    });
    f.get(out).get(n).i32(4).mul().add();
    hsum(f, tvec);
    f.e(0x38, 2, 0);
  });
  return f;
}

function f32Fn(): Fn {
  // params x w out N K | i32: n k o p | v128: acc
  const f = new Fn(5, 4, 0, 1);
  const [x, w, out, N, K, n, k, o, p, acc] = [0, 1, 2, 3, 4, 5, 6, 7, 8, 9];
  f.get(w).set(o);
  f.loop(n, N, 1, () => {
    f.vconst(splat8(0)).set(acc).get(x).set(p);
    f.loop(k, K, 4, () => {
      f.get(o).vload(0).get(p).vload(0).simd(F32X4_MUL).get(acc).simd(F32X4_ADD).set(acc);
      f.get(o).i32(16).add().set(o).get(p).i32(16).add().set(p);
    });
    f.get(out).get(n).i32(4).mul().add();
    hsum(f, acc);
    f.e(0x38, 2, 0);
  });
  return f;
}

/** The module's bytes: imports the shared memory `e.m` (its maximum), exports the kernels above. */
export function quantModule(maxPages: number): Uint8Array<ArrayBuffer> {
  const fns: [string, Fn][] = [['i8', i8Fn()], ['fp8', fp8Fn()], ['int4', int4Fn()], ['q8_0', ggufFn('q8_0')], ['q4_0', ggufFn('q4_0')], ['f32', f32Fn()],
    ['q4_k', q4kFn()], ['q6_k', q6kFn()], ['q5_k', q4kFn(true)], ['q4_1', legacyFn('q4_1')], ['q5_0', legacyFn('q5_0')], ['q5_1', legacyFn('q5_1')], ['q2_k', q2kFn()], ['q3_k', q3kFn()]];
  const types = fns.map(([, f]) => [0x60, ...wvec(new Array(f.params).fill([I32])), 0]);
  return new Uint8Array([0x00, 0x61, 0x73, 0x6d, 1, 0, 0, 0,
    ...section(1, wvec(types)),
    ...section(2, wvec([[...wname('e'), ...wname('m'), 0x02, 0x03, ...uleb(1), ...uleb(maxPages)]])),
    ...section(3, wvec(fns.map((_, i) => uleb(i)))),
    ...section(7, wvec(fns.map(([nm], i) => [...wname(nm), 0x00, ...uleb(i)]))),
    ...section(10, wvec(fns.map(([, f]) => f.bytes()))),
  ]);
}

/** The exported kernels' names, in the module's order (worker threads index them). */
export const SIMD_NAMES = ['i8', 'fp8', 'int4', 'q8_0', 'q4_0', 'f32', 'q4_k', 'q6_k', 'q5_k', 'q4_1', 'q5_0', 'q5_1', 'q2_k', 'q3_k'];

export interface QuantSimd {
  i8(x: number, q: number, s: number, out: number, N: number, K: number): void;
  fp8(x: number, q: number, s: number, out: number, N: number, K: number, perTensor: number): void;
  int4(x: number, q: number, s: number, z: number, xs: number, out: number, N: number, K: number, g: number, asym: number): void;
  q8_0(x: number, q: number, out: number, N: number, K: number): void;
  q4_0(x: number, q: number, out: number, N: number, K: number): void;
  f32(x: number, w: number, out: number, N: number, K: number): void;
  q4_k(x: number, q: number, xs: number, out: number, N: number, K: number): void;
  q6_k(x: number, q: number, out: number, N: number, K: number): void;
  q5_k(x: number, q: number, xs: number, out: number, N: number, K: number): void;
  q4_1(x: number, q: number, xs: number, out: number, N: number, K: number): void;
  q5_0(x: number, q: number, xs: number, out: number, N: number, K: number): void;
  q5_1(x: number, q: number, xs: number, out: number, N: number, K: number): void;
  q2_k(x: number, q: number, xs: number, out: number, N: number, K: number): void;
  q3_k(x: number, q: number, out: number, N: number, K: number): void;
}
