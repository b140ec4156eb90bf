// CUDA kernels 'conv' and 'conv_transpose' with the CPU kernels' signature (ConvKernelParams: contiguous
// operands with three spatial dims; contract: src/kernels/conv.ts). Paths:
//   - depthwise (one input channel per group, any multiplier): a direct kernel, a thread per output;
//   - pointwise (1×1×1, stride 1, no padding): the input already is the column matrix: GEMM only;
//   - otherwise im2col into a temporary, then cuBLASLt GEMMs (batched over images or groups), for a
//     chunk of images at a time so the column buffer stays bounded.
// The bias is written first and the GEMM accumulates onto it (beta = 1), so the result rounds once.
// Transposed convolution: GEMM (weightᵀ · input) into columns, then col2im as a gather: each output
// element sums its taps in a fixed order (the CPU's scatter order), no atomics: deterministic.
// float32/float64/float16/bfloat16 (GEMMs through cuBLASLt with fp32 accumulation for the half types).

import { DTYPES, type DTypeName } from '../../../dtype/dtypes.js';
import type { StridedRef } from '../../backend.js';
import { kernel } from '../../../kernels/registry.js';
import { R, type CudaBackend, type CudaBuffer } from '../runtime/backend.js';
import type { ArgType } from '../runtime/driver.js';
import { FLOATS, basePtr, indexType, numel, requireDType } from './util.js';
import type { ConvKernelParams } from '../../../kernels/conv.js';
import type { GemmParams } from '../../../kernels/gemm.js';
import type { BackendKernels } from '../../../kernels/table.js';

let be: CudaBackend;
export const kernels = {
  conv: cudaConv,
  conv_transpose: cudaConvTranspose,
} satisfies BackendKernels;

/** Points this family's kernels at the backend (called once, when the backend starts). */
export function bind(backend: CudaBackend): void {
  be = backend;
}

/** Column buffers are split into chunks of images so a temporary stays under this many bytes. */
let colBudget = 256 * 2 ** 20;
/** Tests and benchmarks: sets the column-buffer budget in bytes; returns the previous one. */
export function setConvColumnBudget(bytes: number): number { const o = colBudget; colBudget = bytes; return o; }

/** The accumulator of direct kernels: float for float32 and the half types (as GPU convolutions do), double for float64. */
const accOf = (d: DTypeName): string => (d === 'float64' ? 'double' : 'float');

const GEOM_ARGS = 'int C, int D, int H, int W, int KD, int KH, int KW, int OD, int OH, int OW, int sD, int sH, int sW, int pD, int pH, int pW, int dD, int dH, int dW';
const GEOM_SIG: ArgType[] = Array<ArgType>(19).fill('i32');

/** Output coordinates (n, c, od, oh, ow) of linear index i over [*, CH, OD, OH, OW]. */
const decodeOut = (I: string, CH: string): string =>
  `${I} r_ = i; const int ow = (int)(r_ % OW); r_ /= OW; const int oh = (int)(r_ % OH); r_ /= OH; const int od = (int)(r_ % OD); r_ /= OD;
    const int co = (int)(r_ % ${CH}); const ${I} n = r_ / ${CH};`;

const gridLoop = (I: string): string => `for (${I} i = blockIdx.x * (${I})blockDim.x + threadIdx.x; i < total; i += (${I})gridDim.x * blockDim.x)`;

/** col[n, (c, kd, kh, kw), (od, oh, ow)] = x[n, c, od·s − p + kd·d, ...], or 0 outside the input. */
export function im2colSource(dtype: DTypeName, I: string) {
  const T = R.storageType(dtype);
  const src = `extern "C" __global__ void __launch_bounds__(256) im2col(const ${T}* __restrict__ x, ${T}* __restrict__ col, long long xoff, long long total_, ${GEOM_ARGS}) {
  const ${I} total = (${I})total_;
  const int cols = OD * OH * OW, rows = C * KD * KH * KW;
  ${gridLoop(I)} {
    const int pix = (int)(i % cols); ${I} r = i / cols; const int row = (int)(r % rows); const ${I} n = r / rows;
    const int ow = pix % OW, oh = (pix / OW) % OH, od = pix / (OW * OH);
    const int kw = row % KW, kh = (row / KW) % KH, kd = (row / (KW * KH)) % KD, c = row / (KW * KH * KD);
    const int id = od * sD - pD + kd * dD, ih = oh * sH - pH + kh * dH, iw = ow * sW - pW + kw * dW;
    ${T} v = 0;
    if (id >= 0 && id < D && ih >= 0 && ih < H && iw >= 0 && iw < W) v = x[xoff + (((n * C + c) * D + id) * H + ih) * (${I})W + iw];
    col[i] = v;
  }
}`;
  return { src, name: 'im2col', sig: ['ptr', 'ptr', 'i64', 'i64', ...GEOM_SIG] as ArgType[] };
}

/** out[n, co, ...] = bias[co] (or 0). */
export function fillBiasSource(dtype: DTypeName, I: string, withBias: boolean) {
  const T = R.storageType(dtype);
  const src = `extern "C" __global__ void __launch_bounds__(256) fill_bias(${T}* __restrict__ out, const ${T}* __restrict__ bias, long long ooff, long long boff, long long total_, int CO, int plane) {
  const ${I} total = (${I})total_;
  ${gridLoop(I)} out[ooff + i] = ${withBias ? `bias[boff + (int)((i / plane) % CO)]` : '0'};
}`;
  return { src, name: 'fill_bias', sig: ['ptr', 'ptr', 'i64', 'i64', 'i64', 'i32', 'i32'] as ArgType[] };
}

/** Depthwise: out[n, co] = bias[co] + Σ_taps w[co, 0, tap] · x[n, co / mult, ...]. */
export function depthwiseSource(dtype: DTypeName, I: string, withBias: boolean) {
  const T = R.storageType(dtype), A = accOf(dtype);
  const src = `extern "C" __global__ void __launch_bounds__(256) depthwise(const ${T}* __restrict__ x, const ${T}* __restrict__ w, const ${T}* __restrict__ bias, ${T}* __restrict__ out,
  long long xoff, long long woff, long long boff, long long ooff, long long total_, int CO, int mult, ${GEOM_ARGS}) {
  const ${I} total = (${I})total_;
  ${gridLoop(I)} {
    ${decodeOut(I, 'CO')}
    const ${T}* xp = x + xoff + (n * C + co / mult) * ((${I})D * H * W);
    const ${T}* wp = w + woff + (${I})co * KD * KH * KW;
    ${A} acc = 0;
    for (int kd = 0; kd < KD; kd++) {
      const int id = od * sD - pD + kd * dD;
      if (id < 0 || id >= D) continue;
      for (int kh = 0; kh < KH; kh++) {
        const int ih = oh * sH - pH + kh * dH;
        if (ih < 0 || ih >= H) continue;
        const ${T}* xr = xp + ((${I})id * H + ih) * W;
        const ${T}* wr = wp + (kd * KH + kh) * KW;
        for (int kw = 0; kw < KW; kw++) {
          const int iw = ow * sW - pW + kw * dW;
          if (iw >= 0 && iw < W) acc += (${A})${R.load(dtype, 'wr', 'kw')} * (${A})${R.load(dtype, 'xr', 'iw')};
        }
      }
    }
    ${withBias ? `acc = acc + (${A})${R.load(dtype, 'bias', 'boff + co')};` : ''}
    ${R.store(dtype, 'out', 'ooff + i', 'acc')}
  }
}`;
  return { src, name: 'depthwise', sig: ['ptr', 'ptr', 'ptr', 'ptr', 'i64', 'i64', 'i64', 'i64', 'i64', 'i32', 'i32', ...GEOM_SIG] as ArgType[] };
}

/**
 * col2im as a gather for transposed convolution: out[n, co, o] = bias[co] + Σ over taps (ascending) of
 * col[n, (co, tap), i] where o = i·s − p + tap·d. Here the geometry's D/H/W is the output and OD/OH/OW
 * the column grid (the transposed convolution's input). float32 sums round at each tap, as the CPU's.
 */
export function col2imSource(dtype: DTypeName, I: string, withBias: boolean) {
  const T = R.storageType(dtype), A = accOf(dtype);
  const src = `extern "C" __global__ void __launch_bounds__(256) col2im(const ${T}* __restrict__ col, const ${T}* __restrict__ bias, ${T}* __restrict__ out,
  long long boff, long long ooff, long long total_, int CO, int ID, int IH, int IW, int OD, int OH, int OW, int KD, int KH, int KW,
  int sD, int sH, int sW, int pD, int pH, int pW, int dD, int dH, int dW) {
  const ${I} total = (${I})total_;
  const int cols = ID * IH * IW, taps = KD * KH * KW;
  ${gridLoop(I)} {
    ${decodeOut(I, 'CO')}
    const ${T}* cp = col + (n * CO + co) * (${I})taps * cols;
    ${A} acc = ${withBias ? R.load(dtype, 'bias', 'boff + co') : '0'};
    for (int kd = 0; kd < KD; kd++) {
      const int zd = od + pD - kd * dD;
      if (zd < 0 || zd % sD != 0 || zd / sD >= ID) continue;
      for (int kh = 0; kh < KH; kh++) {
        const int zh = oh + pH - kh * dH;
        if (zh < 0 || zh % sH != 0 || zh / sH >= IH) continue;
        for (int kw = 0; kw < KW; kw++) {
          const int zw = ow + pW - kw * dW;
          if (zw < 0 || zw % sW != 0 || zw / sW >= IW) continue;
          acc += (${A})${R.load(dtype, 'cp', `(${I})((kd * KH + kh) * KW + kw) * cols + ((zd / sD) * IH + zh / sH) * IW + zw / sW`)};
        }
      }
    }
    ${R.store(dtype, 'out', 'ooff + i', 'acc')}
  }
}`;
  return { src, name: 'col2im', sig: ['ptr', 'ptr', 'ptr', 'i64', 'i64', 'i64', ...Array<ArgType>(19).fill('i32')] as ArgType[] };
}

// ---- launchers -------------------------------------------------------------------------------------

const gemm = (p: GemmParams): void => kernel('gemm', 'cuda')(p);
const flatRef = (buf: unknown, dtype: DTypeName, offset = 0): StridedRef => ({ buf, dtype, shape: [0], strides: [1], offset });

interface Strided3 { ref: StridedRef; ld: number; group: number; image: number }

/**
 * C = A·B for `images` images × G groups, each operand advancing by its own per-group and per-image
 * element stride: one batched call when G = 1, else one batched call per group or per image (fewer).
 */
function groupedGemm(transA: boolean, m: number, n: number, k: number, a: Strided3, b: Strided3, c: Strided3, G: number, images: number, beta: number): void {
  const at = (s: Strided3, off: number): StridedRef => ({ ...s.ref, offset: s.ref.offset + off });
  const call = (aOff: number, bOff: number, cOff: number, batch: number, sa: number, sb: number, sc: number): void => gemm({
    transA, transB: false, m, n, k, alpha: 1, beta, a: at(a, aOff), lda: a.ld, b: at(b, bOff), ldb: b.ld, c: at(c, cOff), ldc: c.ld,
    batch, strideA: sa, strideB: sb, strideC: sc,
  });
  if (G === 1 || G <= images) {
    for (let g = 0; g < G; g++) call(g * a.group, g * b.group, g * c.group, images, a.image, b.image, c.image);
  } else {
    for (let q = 0; q < images; q++) call(q * a.image, q * b.image, q * c.image, G, a.group, b.group, c.group);
  }
}

const geomArgs = (C: number, D: number, H: number, W: number, k: number[], o: number[], p: ConvKernelParams): number[] =>
  [C, D, H, W, ...k, ...o, ...p.stride, ...p.padding, ...p.dilation];

function fillBias(out: StridedRef, bias: StridedRef | null, N: number, CO: number, plane: number): void {
  const total = N * CO * plane;
  if (total === 0) return;
  const I = indexType(total);
  const k = be.kernel(`conv_fill:${out.dtype}:${I}:${!!bias}`, () => fillBiasSource(out.dtype, I, !!bias));
  be.launch(k, be.gridFor(total, 256), 256, [basePtr(out), basePtr(bias), out.offset, bias?.offset ?? 0, total, CO, plane]);
}

/** Images per chunk so that a per-image temporary of `perImage` elements stays under the budget. */
const chunkOf = (N: number, perImage: number, dtype: DTypeName): number =>
  Math.max(1, Math.min(N, Math.floor(colBudget / Math.max(1, perImage * DTYPES[dtype].itemsize))));

export function cudaConv(p: ConvKernelParams): void {
  const { x, w, out, bias } = p;
  requireDType('conv', x.dtype, FLOATS);
  const [N, C, D, H, W] = x.shape as number[];
  const [CO, CIg, KD, KH, KW] = w.shape as number[];
  const [, , OD, OH, OW] = out.shape as number[];
  const cols = OD! * OH! * OW!, taps = KD! * KH! * KW!, G = p.groups;
  if (numel(out.shape) === 0) return;
  if (CIg === 0 || N === 0) { fillBias(out, bias, N!, CO!, cols); return; }
  const dt = x.dtype;
  const kk = [KD!, KH!, KW!], oo = [OD!, OH!, OW!];
  if (CIg === 1 && G === C) {
    const total = N! * CO! * cols, I = indexType(Math.max(total, numel(x.shape)));
    const k = be.kernel(`conv_dw:${dt}:${I}:${!!bias}`, () => depthwiseSource(dt, I, !!bias));
    be.launch(k, be.gridFor(total, 256), 256, [basePtr(x), basePtr(w), basePtr(bias), basePtr(out), x.offset, w.offset, bias?.offset ?? 0, out.offset,
      total, CO!, CO! / C!, ...geomArgs(C!, D!, H!, W!, kk, oo, p)]);
    return;
  }
  const COg = CO! / G, K = CIg! * taps;
  if (bias) fillBias(out, bias, N!, CO!, cols);
  const beta = bias ? 1 : 0;
  const wS: Strided3 = { ref: w, ld: K, group: COg * K, image: 0 };
  const outS = (off: number): Strided3 => ({ ref: { ...out, offset: out.offset + off }, ld: cols, group: COg * cols, image: CO! * cols });
  const pointwise = taps === 1 && p.stride.every((s) => s === 1) && p.padding.every((q) => q === 0);
  if (pointwise) {
    groupedGemm(false, COg, cols, K, wS, { ref: x, ld: cols, group: K * cols, image: C! * cols }, outS(0), G, N!, beta);
    return;
  }
  const perImage = C! * taps * cols;
  const Nc = chunkOf(N!, perImage, dt);
  const col = be.alloc(dt, Nc * perImage);
  try {
    for (let n0 = 0; n0 < N!; n0 += Nc) {
      const nc = Math.min(Nc, N! - n0);
      const total = nc * perImage, I = indexType(Math.max(total, numel(x.shape)));
      const k = be.kernel(`conv_im2col:${dt}:${I}`, () => im2colSource(dt, I));
      be.launch(k, be.gridFor(total, 256), 256, [basePtr(x), (col as CudaBuffer).ptr, x.offset + n0 * C! * D! * H! * W!, total, ...geomArgs(C!, D!, H!, W!, kk, oo, p)]);
      groupedGemm(false, COg, cols, K, wS, { ref: flatRef(col, dt), ld: cols, group: K * cols, image: perImage }, outS(n0 * CO! * cols), G, nc, beta);
    }
  } finally { be.free(col); } // stream-ordered: the caching allocator reuses it only for later work
}

export function cudaConvTranspose(p: ConvKernelParams): void {
  const { x, w, out, bias } = p;
  requireDType('conv_transpose', x.dtype, FLOATS);
  const [N, C, ID, IH, IW] = x.shape as number[];
  const [, COg, KD, KH, KW] = w.shape as number[];
  const [, CO, OD, OH, OW] = out.shape as number[];
  const G = p.groups, CIg = C! / G, taps = KD! * KH! * KW!, cols = ID! * IH! * IW!, plane = OD! * OH! * OW!;
  if (numel(out.shape) === 0) return;
  if (N === 0 || CIg === 0 || cols === 0) { fillBias(out, bias, N!, CO!, plane); return; }
  const dt = x.dtype;
  const wS: Strided3 = { ref: w, ld: COg! * taps, group: CIg * COg! * taps, image: 0 };
  const xS = (off: number): Strided3 => ({ ref: { ...x, offset: x.offset + off }, ld: cols, group: CIg * cols, image: C! * cols });
  // 1×1×1 taps onto the same grid: the GEMM writes the output directly.
  if (taps === 1 && plane === cols && p.stride.every((s) => s === 1) && p.padding.every((q) => q === 0)) {
    if (bias) fillBias(out, bias, N!, CO!, plane);
    groupedGemm(true, COg!, cols, CIg, wS, xS(0), { ref: out, ld: cols, group: COg! * cols, image: CO! * cols }, G, N!, bias ? 1 : 0);
    return;
  }
  const perImage = CO! * taps * cols;
  const Nc = chunkOf(N!, perImage, dt);
  const col = be.alloc(dt, Nc * perImage);
  try {
    for (let n0 = 0; n0 < N!; n0 += Nc) {
      const nc = Math.min(Nc, N! - n0);
      groupedGemm(true, COg! * taps, cols, CIg, wS, xS(n0 * C! * cols), { ref: flatRef(col, dt), ld: cols, group: COg! * taps * cols, image: perImage }, G, nc, 0);
      const total = nc * CO! * plane, I = indexType(Math.max(total, nc * perImage));
      const k = be.kernel(`conv_col2im:${dt}:${I}:${!!bias}`, () => col2imSource(dt, I, !!bias));
      be.launch(k, be.gridFor(total, 256), 256, [(col as CudaBuffer).ptr, basePtr(bias), basePtr(out), bias?.offset ?? 0, out.offset + n0 * CO! * plane, total,
        CO!, ID!, IH!, IW!, OD!, OH!, OW!, KD!, KH!, KW!, ...p.stride, ...p.padding, ...p.dilation]);
    }
  } finally { be.free(col); }
}
