// CPU kernels: convolution and transposed convolution over contiguous float32/float64 operands with
// three spatial dims (the op layer lifts 1-D and 2-D problems). Three paths:
//   - depthwise (one input channel per group): a direct loop, since per-group GEMMs would be tiny;
//   - stride 1: "shifted GEMM": the zero-padded input is laid out channel-major over the whole batch, so
//     each kernel tap is one GEMM over every output pixel at once, reading the padded input at a fixed
//     offset (no im2col copy; a few garbage columns at the padding are computed and dropped);
//   - otherwise im2col + GEMM per image.
// Transposed convolution is GEMM (weightᵀ · input) + col2im. Matrix products go to the 'gemm' kernel.

import type { ConvKernelParams } from '../../ops/conv.js';
import type { StridedRef } from '../backend.js';
import { kernel, registerKernel } from '../registry.js';

type FArr = Float32Array | Float64Array;

interface GemmCall {
  transA: boolean; transB: boolean; m: number; n: number; k: number; alpha: number; beta: number;
  a: StridedRef; lda: number; b: StridedRef; ldb: number; c: StridedRef; ldc: number;
  batch?: number; strideA?: number; strideB?: number; strideC?: number;
}
const gemm = (p: GemmCall): void => kernel<(p: GemmCall) => void>('gemm', 'cpu')(p);

/** A flat ref over a scratch buffer (or a buffer at an element offset). */
const flat = (buf: FArr, dtype: string, offset = 0): StridedRef =>
  ({ buf, dtype: dtype as StridedRef['dtype'], shape: [buf.length - offset], strides: [1], offset });

const alloc = (like: FArr, n: number): FArr => (like instanceof Float32Array ? new Float32Array(n) : new Float64Array(n));

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
function im2col(img: FArr, imgOff: number, col: FArr, g: Geometry, scatter: boolean): void {
  const { C, D, H, W, KD, KH, KW, OD, OH, OW, s, p, d } = g;
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
                for (let ow = lo; ow < hi; ow++) img[src + ow * sW] += col[dst + ow]!;
              } else if (!inside) col.fill(0, dst, dst + OW);
              else {
                for (let ow = 0; ow < lo; ow++) col[dst + ow] = 0;
                if (sW === 1) for (let ow = lo; ow < hi; ow++) col[dst + ow] = img[src + ow]!;
                else for (let ow = lo; ow < hi; ow++) col[dst + ow] = img[src + ow * sW]!;
                for (let ow = hi; ow < OW; ow++) col[dst + ow] = 0;
              }
            }
          }
        }
      }
    }
  }
}

/** out[n, c, ...] = bias[c] (or 0) for every image. */
function fillBias(out: FArr, outOff: number, N: number, CO: number, plane: number, bias: StridedRef | null): void {
  const B = bias ? (bias.buf as FArr) : null;
  for (let n = 0; n < N; n++) {
    for (let c = 0; c < CO; c++) {
      const o = outOff + (n * CO + c) * plane;
      out.fill(B ? B[bias!.offset + c]! : 0, o, o + plane);
    }
  }
}

function depthwise(p: ConvKernelParams, X: FArr, Wt: FArr, O: FArr): void {
  const [N, C, D, H, W] = p.x.shape as number[];
  const [CO, , KD, KH, KW] = p.w.shape as number[];
  const [, , OD, OH, OW] = p.out.shape as number[];
  const mult = CO / C!;
  const [sD, sH, sW] = p.stride as [number, number, number];
  const row = new Float64Array(OW!);
  const B = p.bias ? (p.bias.buf as FArr) : null;
  for (let n = 0; n < N!; n++) {
    for (let co = 0; co < CO!; co++) {
      const c = Math.floor(co / mult);
      const xBase = p.x.offset + (n * C! + c) * D! * H! * W!;
      const wBase = p.w.offset + co * KD! * KH! * KW!;
      const b = B ? B[p.bias!.offset + co]! : 0;
      let o = p.out.offset + (n * CO! + co) * OD! * OH! * OW!;
      for (let od = 0; od < OD!; od++) {
        for (let oh = 0; oh < OH!; oh++, o += OW!) {
          row.fill(0);
          for (let kd = 0; kd < KD!; kd++) {
            const id = od * sD + kd * p.dilation[0]! - p.padding[0]!;
            if (id < 0 || id >= D!) continue;
            for (let kh = 0; kh < KH!; kh++) {
              const ih = oh * sH + kh * p.dilation[1]! - p.padding[1]!;
              if (ih < 0 || ih >= H!) continue;
              const src = xBase + (id * H! + ih) * W!;
              for (let kw = 0; kw < KW!; kw++) {
                const wv = Wt[wBase + (kd * KH! + kh) * KW! + kw]!;
                const offW = kw * p.dilation[2]! - p.padding[2]!;
                const [lo, hi] = validRange(offW, sW, W!, OW!);
                const s0 = src + offW;
                if (sW === 1) for (let ow = lo; ow < hi; ow++) row[ow] += wv * X[s0 + ow]!;
                else for (let ow = lo; ow < hi; ow++) row[ow] += wv * X[s0 + ow * sW]!;
              }
            }
          }
          for (let ow = 0; ow < OW!; ow++) O[o + ow] = row[ow]! + b;
        }
      }
    }
  }
}

/**
 * Stride-1 convolution as one GEMM per kernel tap. The input is copied once, zero-padded, into
 * P[c, n, d, h, w] (channel-major, so each channel's rows span the whole batch); output pixel q of the
 * padded grid reads P[:, q + tapOffset]. Columns that fall on padding are computed and discarded.
 */
function shiftedGemm(p: ConvKernelParams, X: FArr, O: FArr): void {
  const [N, C, D, H, W] = p.x.shape as number[];
  const [CO, CIg, KD, KH, KW] = p.w.shape as number[];
  const [, , OD, OH, OW] = p.out.shape as number[];
  const G = p.groups, COg = CO! / G, taps = KD! * KH! * KW!;
  const [pd, ph, pw] = p.padding as [number, number, number];
  const [dd, dh, dw] = p.dilation as [number, number, number];
  // Padded extents: enough for every output pixel's widest tap (right padding may exceed the left).
  const PD = Math.max(D! + pd, OD! + dd * (KD! - 1)), PH = Math.max(H! + ph, OH! + dh * (KH! - 1)), PW = Math.max(W! + pw, OW! + dw * (KW! - 1));
  const img = PD * PH * PW, ld = N! * img;
  const P = alloc(X, C! * ld);
  for (let c = 0; c < C!; c++) {
    for (let n = 0; n < N!; n++) {
      const src = p.x.offset + (n * C! + c) * D! * H! * W!;
      const dst = c * ld + n * img;
      for (let z = 0; z < D!; z++) {
        for (let y = 0; y < H!; y++) {
          const s = src + (z * H! + y) * W!, t = dst + ((z + pd) * PH + y + ph) * PW + pw;
          P.set(X.subarray(s, s + W!), t);
        }
      }
    }
  }
  // Weights as [tap, CO, CIg] so each tap's matrix is contiguous.
  const Wt = p.w.buf as FArr;
  const WT = alloc(X, taps * CO! * CIg!);
  for (let co = 0; co < CO!; co++) {
    for (let ci = 0; ci < CIg!; ci++) {
      const s = p.w.offset + (co * CIg! + ci) * taps;
      for (let t = 0; t < taps; t++) WT[(t * CO! + co) * CIg! + ci] = Wt[s + t]!;
    }
  }
  // Result on the padded grid: R[co, n, z, y, x] for output pixel (z, y, x) of image n.
  const span = (N! - 1) * img + ((OD! - 1) * PH + OH! - 1) * PW + OW!;
  const R = alloc(X, CO! * ld);
  const dt = p.x.dtype;
  let t = 0;
  for (let kd = 0; kd < KD!; kd++) {
    for (let kh = 0; kh < KH!; kh++) {
      for (let kw = 0; kw < KW!; kw++, t++) {
        const shift = (kd * dd * PH + kh * dh) * PW + kw * dw;
        gemm({
          transA: false, transB: false, m: COg, n: span, k: CIg!, alpha: 1, beta: t === 0 ? 0 : 1,
          a: flat(WT, dt, t * CO! * CIg!), lda: CIg!, b: flat(P, dt, shift), ldb: ld, c: flat(R, dt), ldc: ld,
          batch: G, strideA: COg * CIg!, strideB: CIg! * ld, strideC: COg * ld,
        });
      }
    }
  }
  const B = p.bias ? (p.bias.buf as FArr) : null;
  for (let n = 0; n < N!; n++) {
    for (let co = 0; co < CO!; co++) {
      const b = B ? B[p.bias!.offset + co]! : 0;
      let o = p.out.offset + (n * CO! + co) * OD! * OH! * OW!;
      for (let z = 0; z < OD!; z++) {
        for (let y = 0; y < OH!; y++, o += OW!) {
          const s = co * ld + n * img + (z * PH + y) * PW;
          if (b === 0) O.set(R.subarray(s, s + OW!), o);
          else for (let x = 0; x < OW!; x++) O[o + x] = R[s + x]! + b;
        }
      }
    }
  }
}

/** General convolution: im2col per image, then one GEMM per group. */
function im2colGemm(p: ConvKernelParams, X: FArr, O: FArr): void {
  const [N, C, D, H, W] = p.x.shape as number[];
  const [CO, CIg, KD, KH, KW] = p.w.shape as number[];
  const [, , OD, OH, OW] = p.out.shape as number[];
  const G = p.groups, COg = CO! / G, K = CIg! * KD! * KH! * KW!, cols = OD! * OH! * OW!;
  fillBias(O, p.out.offset, N!, CO!, cols, p.bias);
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
  const [N, C] = p.x.shape as number[];
  const CIg = p.w.shape[1]!;
  if (p.out.shape.reduce((a, b) => a * b, 1) === 0) return;
  if (CIg === 0 || N === 0) { fillBias(O, p.out.offset, N!, p.out.shape[1]!, p.out.shape.slice(2).reduce((a, b) => a * b, 1), p.bias); return; }
  if (CIg === 1 && p.groups === C) return depthwise(p, X, p.w.buf as FArr, O);
  const taps = p.w.shape.slice(2).reduce((a, b) => a * b, 1);
  if (p.stride.every((s) => s === 1) && taps > 1) return shiftedGemm(p, X, O);
  return im2colGemm(p, X, O);
}

export function cpuConvTranspose(p: ConvKernelParams): void {
  const X = p.x.buf as FArr, O = p.out.buf as FArr;
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
