// CPU kernels: convolution and transposed convolution over contiguous operands with three spatial dims
// (the op layer lifts 1-D and 2-D problems). Floating convolutions take one of three paths:
//   - depthwise (one input channel per group): a direct loop over a zero-padded copy of each plane,
//     since per-group GEMMs would be tiny;
//   - stride 1: "shifted GEMM" (see shiftedGemm): each image is zero-padded once and every kernel tap
//     is a GEMM reading the padded image at a fixed offset, so there is no im2col gather;
//   - otherwise im2col + one GEMM per image (batched over groups).
// Integer convolutions (exact, wrapping as PyTorch's integer kernels do) always take im2col with the
// 'gemm_int' kernel. Transposed convolution is GEMM (weightᵀ · input) + col2im for every dtype.
// Matrix products go to the 'gemm' kernel (OpenBLAS or its fallback; src/backend/cpu/kernels/gemm.ts).

import type { StridedRef } from '../../backend.js';
import { kernel } from '../../../kernels/registry.js';
import type { BackendKernels } from '../../../kernels/table.js';
import type { ConvKernelParams } from '../../../kernels/conv.js';
import type { GemmParams } from '../../../kernels/gemm.js';
import { uleb as leb, vec, section as sect, name as str } from '../../../ir/wasm.js';

type FArr = Float32Array | Float64Array;
/** Any storage array: im2col, col2im and the bias fill also serve integer convolution. */
type Arr = FArr | Int8Array | Uint8Array | Int16Array | Int32Array | BigInt64Array;

/** 'gemm' for floats, the exact wrapping 'gemm_int' for integers. */
const gemm = (p: GemmParams): void => kernel(p.c.dtype.startsWith('float') ? 'gemm' : 'gemm_int', 'cpu')(p);

/** A flat ref over a scratch buffer (or a buffer at an element offset). */
const flat = (buf: Arr, dtype: string, offset = 0): StridedRef =>
  ({ buf, dtype: dtype as StridedRef['dtype'], shape: [buf.length - offset], strides: [1], offset });

function alloc<T extends Arr>(like: T, n: number): T {
  return new (like.constructor as new (n: number) => T)(n);
}

/**
 * Scratch buffers reused across calls (one per role and element type): a fresh multi-megabyte array
 * per call costs page faults and zeroing comparable to the copies it holds. Contents are stale unless
 * `zero`; buffers above SCRATCH_MAX bytes are not kept.
 */
const scratchPool = new Map<string, Arr>();
const SCRATCH_MAX = 64 << 20;
function scratch<T extends Arr>(role: string, like: T, n: number, zero = false): T {
  const bytes = n * (like as Float32Array).BYTES_PER_ELEMENT;
  if (bytes > SCRATCH_MAX) return alloc(like, n);
  const key = `${role}:${like.constructor.name}`;
  let buf = scratchPool.get(key) as T | undefined;
  if (!buf || buf.length < n) { buf = alloc(like, n); scratchPool.set(key, buf); }
  else if (zero) (buf as Float64Array).fill(zeroOf(like), 0, n);
  return (buf.length === n ? buf : buf.subarray(0, n)) as T;
}
/**
 * dst[d..d+n) = src[s..s+n). Image rows are short: a loop beats subarray() + set(), whose view object
 * per row costs more than the copy and feeds the garbage collector.
 */
function copyRow(dst: FArr, d: number, src: FArr, s: number, n: number): void {
  if (n >= 256) { dst.set(src.subarray(s, s + n), d); return; }
  for (let i = 0; i < n; i++) dst[d + i] = src[s + i]!;
}

/** Copies one D×H×W input plane starting at `src` into a zero-padded PD×PH×PW buffer at (pd, ph, pw). */
function padPlane(dst: FArr, X: FArr, src: number, D: number, H: number, W: number, PH: number, PW: number, pd: number, ph: number, pw: number): void {
  for (let z = 0; z < D; z++) for (let y = 0; y < H; y++) copyRow(dst, ((z + pd) * PH + y + ph) * PW + pw, X, src + (z * H + y) * W, W);
}

/** The zero of an array's element type (BigInt64Array takes 0n). */
const zeroOf = (a: Arr): number => (a instanceof BigInt64Array ? 0n : 0) as number;

/** Output positions o in [lo, hi) whose input coordinate o*s + off lies in [0, n). */
function validRange(off: number, s: number, n: number, count: number): [number, number] {
  const lo = Math.max(0, Math.ceil(-off / s));
  const hi = Math.min(count, Math.floor((n - 1 - off) / s) + 1);
  return [lo, Math.max(lo, hi)];
}

interface Geometry {
  C: number; D: number; H: number; W: number; // image (gathered from / scattered into)
  KD: number; KH: number; KW: number;
  OD: number; OH: number; OW: number; // column grid
  s: number[]; p: number[]; d: number[];
}

/**
 * im2col (scatter = false): col[(c,kd,kh,kw), (od,oh,ow)] = img[c, od*s-p+kd*d, ...] or 0 outside.
 * col2im (scatter = true): img[...] += col[...] over the same index map (transposed convolution, where
 * the column grid is the input and the image is the output).
 */
function im2col(img: Arr, imgOff: number, col: Arr, g: Geometry, scatter: boolean): void {
  const { C, D, H, W, KD, KH, KW, OD, OH, OW, s, p, d } = g;
  const I = img as Float64Array, Cl = col as Float64Array; // any element type: only copies and adds
  const zero = zeroOf(col);
  const cols = OD * OH * OW;
  const [sD, sH, sW] = s as [number, number, number];
  let row = 0;
  for (let c = 0; c < C; c++) {
    for (let kd = 0; kd < KD; kd++) {
      const offD = kd * d[0]! - p[0]!;
      for (let kh = 0; kh < KH; kh++) {
        const offH = kh * d[1]! - p[1]!;
        for (let kw = 0; kw < KW; kw++, row++) {
          const offW = kw * d[2]! - p[2]!;
          const [lo, hi] = validRange(offW, sW, W, OW);
          let dst = row * cols;
          for (let od = 0; od < OD; od++) {
            const id = od * sD + offD;
            for (let oh = 0; oh < OH; oh++, dst += OW) {
              const ih = oh * sH + offH;
              const inside = id >= 0 && id < D && ih >= 0 && ih < H;
              const src = imgOff + ((c * D + id) * H + ih) * W + offW;
              if (scatter) {
                if (!inside) continue;
                for (let ow = lo; ow < hi; ow++) I[src + ow * sW] += Cl[dst + ow]!;
              } else if (!inside) Cl.fill(zero, dst, dst + OW);
              else {
                for (let ow = 0; ow < lo; ow++) Cl[dst + ow] = zero;
                if (sW === 1) for (let ow = lo; ow < hi; ow++) Cl[dst + ow] = I[src + ow]!;
                else for (let ow = lo; ow < hi; ow++) Cl[dst + ow] = I[src + ow * sW]!;
                for (let ow = hi; ow < OW; ow++) Cl[dst + ow] = zero;
              }
            }
          }
        }
      }
    }
  }
}

/** out[n, c, ...] = bias[c] (or 0) for every image. */
function fillBias(out: Arr, outOff: number, N: number, CO: number, plane: number, bias: StridedRef | null): void {
  const B = bias ? (bias.buf as Float64Array) : null, O = out as Float64Array;
  for (let n = 0; n < N; n++) {
    for (let c = 0; c < CO; c++) {
      const o = outOff + (n * CO + c) * plane;
      O.fill(B ? B[bias!.offset + c]! : zeroOf(out), o, o + plane);
    }
  }
}

// ---- depthwise float32 rows in WebAssembly SIMD --------------------------------------------------
//
// run(P, O, offs, ws, T, OH, NV, rowStep, outRow, bias): for oh < OH and v < NV, the four outputs
// O[oh·outRow + 16v ..] = bias + Σ_t ws[t] · P[oh·rowStep + 16v + offs[t] ..] (byte addresses, f32x4
// lanes). Four adjacent outputs of one row read four adjacent inputs per tap, so unit width stride
// only; lanes past the row end compute garbage that is never copied out. float32 arithmetic with a
// float32 accumulator, as PyTorch's own float32 depthwise kernels.


function depthwiseModule(): Uint8Array<ArrayBuffer> {
  const [P, O, OFFS, WS, T, OH, NV, STEP, OROW, BIAS] = [0, 1, 2, 3, 4, 5, 6, 7, 8, 9];
  const [oh, v, t, q, o, acc] = [10, 11, 12, 13, 14, 15];
  const get = (l: number): number[] => [0x20, l], set = (l: number): number[] => [0x21, l];
  const i32 = (x: number): number[] => [0x41, ...leb(x)]; // small non-negative constants only
  const add = 0x6a, mul = 0x6c, ges = 0x4e, shl = 0x74;
  /** block { loop { if (i >= n) break; body; i++; continue } } with i starting at 0. */
  const count = (i: number, n: number, body: number[]): number[] => [
    ...i32(0), ...set(i), 0x02, 0x40, 0x03, 0x40, ...get(i), ...get(n), ges, 0x0d, 1,
    ...body, ...get(i), ...i32(1), add, ...set(i), 0x0c, 0, 0x0b, 0x0b,
  ];
  const tapBody = [
    ...get(acc),
    ...get(q), ...get(OFFS), ...get(t), ...i32(2), shl, add, 0x28, 2, 0, add, 0xfd, 0x00, 0, 0, // v128.load P[q + offs[t]]
    ...get(WS), ...get(t), ...i32(2), shl, add, 0xfd, 0x09, 2, 0, // v128.load32_splat ws[t]
    0xfd, ...leb(0xe6), 0xfd, ...leb(0xe4), ...set(acc), // acc += x * w
  ];
  const vecBody = [
    ...get(q), ...get(v), ...i32(4), shl, add, ...set(q), // q advances 16 bytes per vector below
    ...get(BIAS), 0xfd, ...leb(0x13), ...set(acc),
    ...count(t, T, tapBody),
    ...get(o), ...get(v), ...i32(4), shl, add, ...get(acc), 0xfd, 0x0b, 0, 0,
    ...get(q), ...get(v), ...i32(4), shl, 0x6b, ...set(q), // restore q (i32.sub)
  ];
  const rowBody = [
    ...get(P), ...get(oh), ...get(STEP), mul, add, ...set(q),
    ...get(O), ...get(oh), ...get(OROW), mul, add, ...set(o),
    ...count(v, NV, vecBody),
  ];
  const body = [...vec([[5, 0x7f], [1, 0x7b]]), ...count(oh, OH, rowBody), 0x0b];
  return new Uint8Array([
    0x00, 0x61, 0x73, 0x6d, 1, 0, 0, 0,
    ...sect(1, vec([[0x60, ...leb(10), ...Array<number>(9).fill(0x7f), 0x7d, 0]])), // (9 × i32, f32) → ()
    ...sect(3, vec([[0]])),
    ...sect(5, vec([[0x00, 1]])),
    ...sect(7, vec([[...str('run'), 0x00, 0], [...str('mem'), 0x02, 0]])),
    ...sect(10, vec([[...leb(body.length), ...body]])),
  ]);
}

interface DepthwiseSimd {
  run(P: number, O: number, offs: number, ws: number, T: number, OH: number, NV: number, step: number, outRow: number, bias: number): void;
  mem: WebAssembly.Memory;
}
let simd: DepthwiseSimd | null | undefined;
/** The SIMD module, or null where WebAssembly SIMD is unavailable (the JavaScript loop runs then). */
function depthwiseSimd(): DepthwiseSimd | null {
  if (simd !== undefined) return simd;
  try {
    simd = new WebAssembly.Instance(new WebAssembly.Module(depthwiseModule())).exports as unknown as DepthwiseSimd;
  } catch { simd = null; }
  return simd;
}

/**
 * float32, unit width stride: each padded plane goes into WebAssembly memory once, every output
 * channel it feeds is computed there four pixels at a time.
 */
function depthwiseF32(p: ConvKernelParams, X: Float32Array, Wt: Float32Array, O: Float32Array, m: DepthwiseSimd,
  geo: { PD: number; PH: number; PW: number; off: Int32Array }): void {
  const [N, C, D, H, W] = p.x.shape as number[];
  const [CO, , KD, KH, KW] = p.w.shape as number[];
  const [, , OD, OH, OW] = p.out.shape as number[];
  const { PD, PH, PW, off } = geo;
  const T = KD! * KH! * KW!, mult = CO! / C!, NV = Math.ceil(OW! / 4);
  const [sD, sH] = p.stride as [number, number, number];
  const [pd, ph, pw] = p.padding as [number, number, number];
  // Layout (floats): padded plane (+ slack for the last vector's overreach) | output rows | offsets | weights.
  const plane = PD * PH * PW + PW + 8, outLen = OH! * NV * 4;
  const bytes = (plane + outLen + 2 * T) * 4;
  if (m.mem.buffer.byteLength < bytes) m.mem.grow(Math.ceil((bytes - m.mem.buffer.byteLength) / 65536));
  const F = new Float32Array(m.mem.buffer), I = new Int32Array(m.mem.buffer);
  const oBase = plane, offBase = plane + outLen, wBase = offBase + T;
  F.fill(0, 0, plane);
  for (let t = 0; t < T; t++) I[offBase + t] = off[t]! * 4;
  const B = p.bias ? (p.bias.buf as FArr) : null;
  let o = p.out.offset;
  for (let n = 0; n < N!; n++) {
    for (let c = 0; c < C!; c++) {
      padPlane(F, X, p.x.offset + (n * C! + c) * D! * H! * W!, D!, H!, W!, PH, PW, pd, ph, pw);
      for (let j = 0; j < mult; j++) {
        const co = c * mult + j;
        copyRow(F, wBase, Wt, p.w.offset + co * T, T);
        const b = B ? B[p.bias!.offset + co]! : 0;
        for (let od = 0; od < OD!; od++) {
          m.run(od * sD * PH * PW * 4, oBase * 4, offBase * 4, wBase * 4, T, OH!, NV, sH * PW * 4, NV * 16, b);
          for (let y = 0; y < OH!; y++, o += OW!) copyRow(O, o, F, oBase + y * NV * 4, OW!);
        }
      }
    }
  }
}

/**
 * Depthwise (one input channel per group, any multiplier): each input plane is copied once into a
 * zero-padded buffer, so every output pixel is a bounds-check-free dot product over the kernel taps.
 */
function depthwise(p: ConvKernelParams, X: FArr, Wt: FArr, O: FArr): void {
  const [N, C, D, H, W] = p.x.shape as number[];
  const [CO, , KD, KH, KW] = p.w.shape as number[];
  const [, , OD, OH, OW] = p.out.shape as number[];
  const mult = CO! / C!, T = KD! * KH! * KW!;
  const [sD, sH, sW] = p.stride as [number, number, number];
  const [pd, ph, pw] = p.padding as [number, number, number];
  const [dd, dh, dw] = p.dilation as [number, number, number];
  const PD = Math.max(D! + pd, (OD! - 1) * sD + dd * (KD! - 1) + 1);
  const PH = Math.max(H! + ph, (OH! - 1) * sH + dh * (KH! - 1) + 1);
  const PW = Math.max(W! + pw, (OW! - 1) * sW + dw * (KW! - 1) + 1);
  const off = new Int32Array(T), wt = new Float64Array(T);
  for (let kd = 0, t = 0; kd < KD!; kd++) for (let kh = 0; kh < KH!; kh++) for (let kw = 0; kw < KW!; kw++, t++) off[t] = (kd * dd * PH + kh * dh) * PW + kw * dw;
  const m = X instanceof Float32Array && sW === 1 && simdDepthwise ? depthwiseSimd() : null;
  if (m) return depthwiseF32(p, X as Float32Array, Wt as Float32Array, O as Float32Array, m, { PD, PH, PW, off });
  const P = scratch('pad', X, PD * PH * PW, true);
  const B = p.bias ? (p.bias.buf as FArr) : null;
  let o = p.out.offset;
  for (let n = 0; n < N!; n++) {
    for (let c = 0; c < C!; c++) {
      padPlane(P, X, p.x.offset + (n * C! + c) * D! * H! * W!, D!, H!, W!, PH, PW, pd, ph, pw);
      for (let j = 0; j < mult; j++) {
        const co = c * mult + j;
        for (let t = 0; t < T; t++) wt[t] = Wt[p.w.offset + co * T + t]!;
        const b = B ? B[p.bias!.offset + co]! : 0;
        for (let od = 0; od < OD!; od++) {
          for (let oh = 0; oh < OH!; oh++) {
            const base = (od * sD * PH + oh * sH) * PW;
            if (T === 9) { o = dot9(P, base, sW, OW!, off, wt, b, O, o); continue; }
            for (let ow = 0; ow < OW!; ow++) {
              const q = base + ow * sW;
              let acc = 0;
              for (let t = 0; t < T; t++) acc += wt[t]! * P[q + off[t]!]!;
              O[o++] = acc + b;
            }
          }
        }
      }
    }
  }
}

/** One output row of a 9-tap (3×3) depthwise kernel, unrolled: about 3x faster in V8 than the tap loop. */
function dot9(P: FArr, base: number, s: number, n: number, off: Int32Array, w: Float64Array, b: number, O: FArr, o: number): number {
  const [o0, o1, o2, o3, o4, o5, o6, o7, o8] = off as unknown as number[];
  const [w0, w1, w2, w3, w4, w5, w6, w7, w8] = w as unknown as number[];
  for (let x = 0, q = base; x < n; x++, q += s) {
    O[o++] = w0! * P[q + o0!]! + w1! * P[q + o1!]! + w2! * P[q + o2!]! + w3! * P[q + o3!]! + w4! * P[q + o4!]!
      + w5! * P[q + o5!]! + w6! * P[q + o6!]! + w7! * P[q + o7!]! + w8! * P[q + o8!]! + b;
  }
  return o;
}

let simdDepthwise = true;
/** Tests and benchmarks: use (or not) the WebAssembly SIMD depthwise rows (returns the previous setting). */
export function setSimdDepthwise(on: boolean): boolean { const o = simdDepthwise; simdDepthwise = on; return o; }

/** How many kernel taps the stride-1 path materializes as shifted copies: none, each kW, or all. */
export type ShiftMode = 'tap' | 'row' | 'all';
let shiftMode: ShiftMode = 'tap';
/** Benchmarks: pick the stride-1 strategy (returns the previous one). */
export function setShiftMode(m: ShiftMode): ShiftMode { const o = shiftMode; shiftMode = m; return o; }

/**
 * Stride-1 convolution without im2col's per-pixel gathering. Each image is copied once, zero-padded,
 * into P[c, z, y, x]; on that padded grid, output pixel q and kernel tap t read P[c, q + offset(t)], so
 * a tap is a plain GEMM over the whole image at a column offset (the few columns that land on padding
 * are computed and dropped when the result is compacted). Some taps can be materialized as shifted
 * copies of P to make each GEMM's K larger: 'row' copies the kW shifts (one GEMM per (kd, kh), K =
 * C·kW), 'all' every tap (one GEMM, K = C·kD·kH·kW; the copies are whole-row memcpys), 'tap' none.
 */
function shiftedGemm(p: ConvKernelParams, X: FArr, O: FArr): void {
  const [N, C, D, H, W] = p.x.shape as number[];
  const [CO, CIg, KD, KH, KW] = p.w.shape as number[];
  const [, , OD, OH, OW] = p.out.shape as number[];
  const G = p.groups, COg = CO! / G, taps = KD! * KH! * KW!;
  const [pd, ph, pw] = p.padding as [number, number, number];
  const [dd, dh, dw] = p.dilation as [number, number, number];
  // Padded extents: enough for every output pixel's farthest tap (right padding may exceed the left).
  const PD = Math.max(D! + pd, OD! + dd * (KD! - 1)), PH = Math.max(H! + ph, OH! + dh * (KH! - 1)), PW = Math.max(W! + pw, OW! + dw * (KW! - 1));
  const L = PD * PH * PW;
  const span = ((OD! - 1) * PH + OH! - 1) * PW + OW!; // columns of the result that hold output pixels
  const tapOff = (kd: number, kh: number, kw: number): number => (kd * dd * PH + kh * dh) * PW + kw * dw;
  // Materialized shifts (S) and GEMM offsets (B): every tap is one s + one b.
  const S: number[][] = [], Bo: number[][] = []; // [kd, kh, kw] parts
  const mode = taps === 1 ? 'tap' : shiftMode;
  for (let kd = 0; kd < KD!; kd++) for (let kh = 0; kh < KH!; kh++) for (let kw = 0; kw < KW!; kw++) {
    if (mode === 'all') { if (kd + kh + kw === 0) Bo.push([0, 0, 0]); S.push([kd, kh, kw]); }
    else if (mode === 'row') { if (kd + kh === 0) S.push([0, 0, kw]); if (kw === 0) Bo.push([kd, kh, 0]); }
    else { if (kd + kh + kw === 0) S.push([0, 0, 0]); Bo.push([kd, kh, kw]); }
  }
  const nS = S.length, K = CIg! * nS;
  // Weights per GEMM b: WT[b][co][ci·nS + s] = w[co, ci, tap(s + b)].
  const Wt = p.w.buf as FArr;
  const WT = scratch('weights', X, Bo.length * CO! * K);
  for (let bi = 0; bi < Bo.length; bi++) {
    for (let si = 0; si < nS; si++) {
      const tap = ((Bo[bi]![0]! + S[si]![0]!) * KH! + Bo[bi]![1]! + S[si]![1]!) * KW! + Bo[bi]![2]! + S[si]![2]!;
      for (let co = 0; co < CO!; co++) {
        for (let ci = 0; ci < CIg!; ci++) WT[(bi * CO! + co) * K + ci * nS + si] = Wt[p.w.offset + (co * CIg! + ci) * taps + tap]!;
      }
    }
  }
  const P = scratch('pad', X, C! * L, true); // the padding stays zero: only the interior is rewritten per image
  const Q = nS === 1 ? P : scratch('shifted', X, C! * nS * L);
  const R = scratch('result', X, CO! * span);
  const B = p.bias ? (p.bias.buf as FArr) : null;
  const dt = p.x.dtype;
  for (let n = 0; n < N!; n++) {
    for (let c = 0; c < C!; c++) {
      const src = p.x.offset + (n * C! + c) * D! * H! * W!;
      for (let z = 0; z < D!; z++) for (let y = 0; y < H!; y++) {
        const s0 = src + (z * H! + y) * W!;
        copyRow(P, c * L + ((z + pd) * PH + y + ph) * PW + pw, X, s0, W!);
      }
      if (Q !== P) {
        S.forEach(([kd, kh, kw], si) => {
          const off = tapOff(kd!, kh!, kw!), row = (c * nS + si) * L;
          copyRow(Q, row, P, c * L + off, L - off);
          Q.fill(0, row + L - off, row + L);
        });
      }
    }
    Bo.forEach(([kd, kh, kw], bi) => {
      gemm({
        transA: false, transB: false, m: COg, n: span, k: K, alpha: 1, beta: bi === 0 ? 0 : 1,
        a: flat(WT, dt, bi * CO! * K), lda: K, b: flat(Q, dt, tapOff(kd!, kh!, kw!)), ldb: L, c: flat(R, dt), ldc: span,
        batch: G, strideA: COg * K, strideB: K * L, strideC: COg * span,
      });
    });
    for (let co = 0; co < CO!; co++) {
      const b = B ? B[p.bias!.offset + co]! : 0;
      let o = p.out.offset + (n * CO! + co) * OD! * OH! * OW!;
      for (let z = 0; z < OD!; z++) {
        for (let y = 0; y < OH!; y++, o += OW!) {
          const s0 = co * span + (z * PH + y) * PW;
          if (b === 0) copyRow(O, o, R, s0, OW!);
          else for (let x = 0; x < OW!; x++) O[o + x] = R[s0 + x]! + b;
        }
      }
    }
  }
}

/** General convolution: im2col per image, then one GEMM per group. */
function im2colGemm(p: ConvKernelParams, X: Arr, O: Arr): void {
  const [N, C, D, H, W] = p.x.shape as number[];
  const [CO, CIg, KD, KH, KW] = p.w.shape as number[];
  const [, , OD, OH, OW] = p.out.shape as number[];
  const G = p.groups, COg = CO! / G, K = CIg! * KD! * KH! * KW!, cols = OD! * OH! * OW!;
  if (p.bias) fillBias(O, p.out.offset, N!, CO!, cols, p.bias); // else beta = 0 overwrites
  const pointwise = KD! * KH! * KW! === 1 && p.stride.every((s) => s === 1) && p.padding.every((q) => q === 0);
  const col = pointwise ? null : scratch('col', X, C! * KD! * KH! * KW! * cols);
  const geo: Geometry = { C: C!, D: D!, H: H!, W: W!, KD: KD!, KH: KH!, KW: KW!, OD: OD!, OH: OH!, OW: OW!, s: p.stride, p: p.padding, d: p.dilation };
  const dt = p.x.dtype;
  for (let n = 0; n < N!; n++) {
    const xOff = p.x.offset + n * C! * D! * H! * W!;
    if (col) im2col(X, xOff, col, geo, false);
    gemm({
      transA: false, transB: false, m: COg, n: cols, k: K, alpha: 1, beta: p.bias ? 1 : 0,
      a: p.w, lda: K, b: col ? flat(col, dt) : flat(X, dt, xOff), ldb: cols,
      c: flat(O, dt, p.out.offset + n * CO! * cols), ldc: cols,
      batch: G, strideA: COg * K, strideB: K * cols, strideC: COg * cols,
    });
  }
}

export function cpuConv(p: ConvKernelParams): void {
  const X = p.x.buf as FArr, O = p.out.buf as FArr;
  // Integers (exact, wrapping like PyTorch's integer arithmetic) take the im2col path with 'gemm_int'.
  const integer = !(X instanceof Float32Array || X instanceof Float64Array);
  const [N, C] = p.x.shape as number[];
  const CIg = p.w.shape[1]!;
  if (p.out.shape.reduce((a, b) => a * b, 1) === 0) return;
  if (CIg === 0 || N === 0) { fillBias(O, p.out.offset, N!, p.out.shape[1]!, p.out.shape.slice(2).reduce((a, b) => a * b, 1), p.bias); return; }
  if (integer) return im2colGemm(p, X, O);
  if (CIg === 1 && p.groups === C) return depthwise(p, X, p.w.buf as FArr, O);
  const taps = p.w.shape.slice(2).reduce((a, b) => a * b, 1);
  if (p.stride.every((s) => s === 1) && taps > 1) return shiftedGemm(p, X, O);
  return im2colGemm(p, X, O);
}

export function cpuConvTranspose(p: ConvKernelParams): void {
  const X = p.x.buf as Arr, O = p.out.buf as Arr;
  const [N, C, ID, IH, IW] = p.x.shape as number[];
  const [, COg, KD, KH, KW] = p.w.shape as number[];
  const [, CO, OD, OH, OW] = p.out.shape as number[];
  const G = p.groups, CIg = C! / G, taps = KD! * KH! * KW!, cols = ID! * IH! * IW!, plane = OD! * OH! * OW!;
  fillBias(O, p.out.offset, N!, CO!, plane, p.bias);
  if (plane === 0 || N === 0 || CIg === 0 || cols === 0) return;
  const col = scratch('col', X, CO! * taps * cols);
  const geo: Geometry = { C: CO!, D: OD!, H: OH!, W: OW!, KD: KD!, KH: KH!, KW: KW!, OD: ID!, OH: IH!, OW: IW!, s: p.stride, p: p.padding, d: p.dilation };
  const dt = p.x.dtype;
  for (let n = 0; n < N!; n++) {
    // col[(co, tap), pixel] = Σ_ci w[ci, co, tap] · x[n, ci, pixel], per group.
    gemm({
      transA: true, transB: false, m: COg! * taps, n: cols, k: CIg, alpha: 1, beta: 0,
      a: p.w, lda: COg! * taps, b: flat(X, dt, p.x.offset + n * C! * cols), ldb: cols, c: flat(col, dt), ldc: cols,
      batch: G, strideA: CIg * COg! * taps, strideB: CIg * cols, strideC: COg! * taps * cols,
    });
    im2col(O, p.out.offset + n * CO! * plane, col, geo, true);
  }
}

export const kernels = {
  conv: cpuConv,
  conv_transpose: cpuConvTranspose,
} satisfies BackendKernels;
