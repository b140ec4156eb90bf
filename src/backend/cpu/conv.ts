// CPU kernels: convolution and transposed convolution over contiguous operands with three spatial dims
// (the op layer lifts 1-D and 2-D problems). Floating convolutions take one of three paths:
//   - depthwise (one input channel per group): a direct loop over a zero-padded copy of each plane,
//     since per-group GEMMs would be tiny;
//   - stride 1: "shifted GEMM" (see shiftedGemm): each image is zero-padded once and every kernel tap
//     is a GEMM reading the padded image at a fixed offset, so there is no im2col gather;
//   - otherwise im2col + one GEMM per image (batched over groups).
// Integer convolutions (exact, wrapping as PyTorch's integer kernels do) always take im2col with the
// 'gemm_int' kernel. Transposed convolution is GEMM (weightᵀ · input) + col2im for every dtype.
// Matrix products go to the 'gemm' kernel (OpenBLAS or its fallback; src/backend/cpu/linalg.ts).

import type { ConvKernelParams } from '../../ops/conv.js';
import type { StridedRef } from '../backend.js';
import { kernel, registerKernel } from '../registry.js';

type FArr = Float32Array | Float64Array;
/** Any storage array: im2col, col2im and the bias fill also serve integer convolution. */
type Arr = FArr | Int8Array | Uint8Array | Int16Array | Int32Array | BigInt64Array;

interface GemmCall {
  transA: boolean; transB: boolean; m: number; n: number; k: number; alpha: number; beta: number;
  a: StridedRef; lda: number; b: StridedRef; ldb: number; c: StridedRef; ldc: number;
  batch?: number; strideA?: number; strideB?: number; strideC?: number;
}
/** 'gemm' for floats, the exact wrapping 'gemm_int' for integers. */
const gemm = (p: GemmCall): void => kernel<(p: GemmCall) => void>(p.c.dtype.startsWith('float') ? 'gemm' : 'gemm_int', 'cpu')(p);

/** A flat ref over a scratch buffer (or a buffer at an element offset). */
const flat = (buf: Arr, dtype: string, offset = 0): StridedRef =>
  ({ buf, dtype: dtype as StridedRef['dtype'], shape: [buf.length - offset], strides: [1], offset });

function alloc<T extends Arr>(like: T, n: number): T {
  return new (like.constructor as new (n: number) => T)(n);
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
  const P = alloc(X, PD * PH * PW);
  const off = new Int32Array(T), wt = new Float64Array(T);
  for (let kd = 0, t = 0; kd < KD!; kd++) for (let kh = 0; kh < KH!; kh++) for (let kw = 0; kw < KW!; kw++, t++) off[t] = (kd * dd * PH + kh * dh) * PW + kw * dw;
  const B = p.bias ? (p.bias.buf as FArr) : null;
  let o = p.out.offset;
  for (let n = 0; n < N!; n++) {
    for (let c = 0; c < C!; c++) {
      const src = p.x.offset + (n * C! + c) * D! * H! * W!;
      for (let z = 0; z < D!; z++) for (let y = 0; y < H!; y++) {
        const s0 = src + (z * H! + y) * W!;
        P.set(X.subarray(s0, s0 + W!), ((z + pd) * PH + y + ph) * PW + pw);
      }
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
  const WT = alloc(X, Bo.length * CO! * K);
  Bo.forEach((b, bi) => {
    for (let co = 0; co < CO!; co++) for (let ci = 0; ci < CIg!; ci++) for (let si = 0; si < nS; si++) {
      const [kd, kh, kw] = [b[0]! + S[si]![0]!, b[1]! + S[si]![1]!, b[2]! + S[si]![2]!];
      WT[(bi * CO! + co) * K + ci * nS + si] = Wt[p.w.offset + (co * CIg! + ci) * taps + (kd * KH! + kh) * KW! + kw]!;
    }
  });
  const P = alloc(X, C! * L); // zero padding stays zero: only the interior is rewritten per image
  const Q = nS === 1 ? P : alloc(X, C! * nS * L);
  const R = alloc(X, CO! * span);
  const B = p.bias ? (p.bias.buf as FArr) : null;
  const dt = p.x.dtype;
  for (let n = 0; n < N!; n++) {
    for (let c = 0; c < C!; c++) {
      const src = p.x.offset + (n * C! + c) * D! * H! * W!;
      for (let z = 0; z < D!; z++) for (let y = 0; y < H!; y++) {
        const s0 = src + (z * H! + y) * W!;
        P.set(X.subarray(s0, s0 + W!), c * L + ((z + pd) * PH + y + ph) * PW + pw);
      }
      if (Q !== P) {
        S.forEach(([kd, kh, kw], si) => {
          const off = tapOff(kd!, kh!, kw!), row = (c * nS + si) * L;
          Q.set(P.subarray(c * L + off, (c + 1) * L), row);
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
          if (b === 0) O.set(R.subarray(s0, s0 + OW!), o);
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
  const col = pointwise ? null : alloc(X, C! * KD! * KH! * KW! * cols);
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
  const col = alloc(X, CO! * taps * cols);
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

registerKernel('conv', 'cpu', cpuConv);
registerKernel('conv_transpose', 'cpu', cpuConvTranspose);
