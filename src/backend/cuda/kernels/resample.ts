// CUDA kernels 'interpolate' and 'grid_sample' with the CPU kernels' signatures and arithmetic
// (contract: src/kernels/resample.ts).
//
// interpolate applies the op layer's per-dim tables (uploaded once per call, one packed copy). Pure
// gathers (nearest) copy storage directly. Otherwise one thread per output element sums D over H over W
// taps in double, innermost W first, exactly the nesting of the CPU's separable passes (and with
// non-contracted multiply/add, so the sums are the CPU's bit for bit). Tables with very many taps
// (antialiased downscaling) run as separable passes through double scratch instead, like the CPU.
//
// grid_sample reproduces the CPU's coordinate math in the compute dtype step by step (float32 with
// explicitly rounded, non-fused operations; for float16/bfloat16 inputs each step, the sums included,
// also rounds to the half type, as PyTorch computes in it), since coordinates decide which pixels are
// read; a thread owns a grid point and loops over channels (coalesced stores across grid points).

import type { DTypeName } from '../../../dtype/dtypes.js';
import type { BackendKernels } from '../../../kernels/table.js';
import { R, type CudaBackend, type CudaBuffer } from '../runtime/backend.js';
import type { ArgType } from '../runtime/driver.js';
import { FLOATS, INTS, NARROW_SRC, basePtr, indexType, loadD, numel, requireDType, storeD } from './util.js';
import type { GridSampleKernelParams, InterpolateKernelParams, ResampleTable } from '../../../kernels/resample.js';

let be: CudaBackend;
export const kernels = {
  interpolate: cudaInterpolate,
  grid_sample: cudaGridSample,
} satisfies BackendKernels;

/** Points this family's kernels at the backend (called once, when the backend starts). */
export function bind(backend: CudaBackend): void {
  be = backend;
}

/** Above this many taps per output element, separable passes are cheaper than the fused sum. */
const FUSED_TAPS = 64;

const gridLoop = (I: string): string => `for (${I} i = blockIdx.x * (${I})blockDim.x + threadIdx.x; i < total; i += (${I})gridDim.x * blockDim.x)`;

const TABLE_ARGS = 'int tD, int tH, int tW, int wD, int wH, int wW, int iD, int iH, int iW';
const TABLE_SIG: ArgType[] = Array<ArgType>(9).fill('i32');
const OUT_DECODE = (I: string): string =>
  `${I} r_ = i; const int ox = (int)(r_ % OW); r_ /= OW; const int oy = (int)(r_ % OH); r_ /= OH; const int oz = (int)(r_ % OD); const ${I} b = r_ / OD;`;

/** Pure gather: out[b, z, y, x] = x[b, iD[z], iH[y], iW[x]] (storage copied, so uint8 stays exact). */
export function gatherSource(dtype: DTypeName, I: string) {
  const T = R.storageType(dtype);
  const src = `extern "C" __global__ void __launch_bounds__(256) interp_gather(const ${T}* __restrict__ x, ${T}* __restrict__ out, const int* __restrict__ ix,
  long long xoff, long long ooff, long long total_, int D, int H, int W, int OD, int OH, int OW, int iD, int iH, int iW) {
  const ${I} total = (${I})total_;
  ${gridLoop(I)} {
    ${OUT_DECODE(I)}
    out[ooff + i] = x[xoff + b * ((${I})D * H * W) + ((${I})ix[iD + oz] * H + ix[iH + oy]) * W + ix[iW + ox]];
  }
}`;
  return { src, name: 'interp_gather', sig: ['ptr', 'ptr', 'ptr', 'i64', 'i64', 'i64', ...Array<ArgType>(9).fill('i32')] as ArgType[] };
}

/** Fused separable sum; `weighted[d]` false: that dim is a plain gather (no multiply, as the CPU skips it). */
export function fusedSource(inD: DTypeName, outD: DTypeName, weighted: [boolean, boolean, boolean], I: string) {
  const TI = R.storageType(inD), TO = R.storageType(outD);
  const level = (d: 0 | 1 | 2, inner: string, acc: string): string => (weighted[d]
    ? `${acc} = __dadd_rn(${acc}, __dmul_rn(${inner}, wt[w${'DHW'[d]} + o${'zyx'[d]} * t${'DHW'[d]} + q${'zyx'[d]}]));`
    : `${acc} = ${inner};`);
  const src = `${NARROW_SRC}
extern "C" __global__ void __launch_bounds__(256) interp(const ${TI}* __restrict__ x, ${TO}* __restrict__ out, const double* __restrict__ wt, const int* __restrict__ ix,
  long long xoff, long long ooff, long long total_, int D, int H, int W, int OD, int OH, int OW, ${TABLE_ARGS}) {
  const ${I} total = (${I})total_;
  ${gridLoop(I)} {
    ${OUT_DECODE(I)}
    const ${TI}* xb = x + xoff + b * ((${I})D * H * W);
    double sD = 0;
    for (int qz = 0; qz < tD; qz++) {
      const ${I} zr = (${I})ix[iD + oz * tD + qz] * H;
      double sH = 0;
      for (int qy = 0; qy < tH; qy++) {
        const ${TI}* row = xb + (zr + ix[iH + oy * tH + qy]) * W;
        double sW = 0;
        for (int qx = 0; qx < tW; qx++) { const double v = ${loadD(inD, 'row', `ix[iW + ox * tW + qx]`)}; ${level(2, 'v', 'sW')} }
        ${level(1, 'sW', 'sH')}
      }
      ${level(0, 'sH', 'sD')}
    }
    ${storeD(outD, 'out', 'ooff + i', 'sD')}
  }
}`;
  return { src, name: 'interp', sig: ['ptr', 'ptr', 'ptr', 'ptr', 'i64', 'i64', 'i64', ...Array<ArgType>(6).fill('i32'), ...TABLE_SIG] as ArgType[] };
}

/** One separable pass: dst[o, j, i] = Σ_q w[j, q] · src[o, idx[j, q], i] over [outer, n, inner] → [outer, on, inner]. */
export function passSource(inD: DTypeName, outD: DTypeName, weighted: boolean, I: string) {
  const TI = R.storageType(inD), TO = R.storageType(outD);
  const src = `${NARROW_SRC}
extern "C" __global__ void __launch_bounds__(256) interp_pass(const ${TI}* __restrict__ src, ${TO}* __restrict__ dst, const double* __restrict__ wt, const int* __restrict__ ix,
  long long soff, long long doff, long long total_, int n, int on, long long inner, int taps, int wo, int io) {
  const ${I} total = (${I})total_;
  ${gridLoop(I)} {
    const ${I} ii = i % inner; ${I} r = i / inner; const int j = (int)(r % on); const ${I} o = r / on;
    const ${TI}* s = src + soff + o * ((${I})n * inner) + ii;
    double acc = 0;
    for (int q = 0; q < taps; q++) {
      const double v = ${loadD(inD, 's', `(${I})ix[io + j * taps + q] * inner`)};
      ${weighted ? 'acc = __dadd_rn(acc, __dmul_rn(v, wt[wo + j * taps + q]));' : 'acc = v;'}
    }
    ${storeD(outD, 'dst', 'doff + i', 'acc')}
  }
}`;
  return { src, name: 'interp_pass', sig: ['ptr', 'ptr', 'ptr', 'ptr', 'i64', 'i64', 'i64', 'i32', 'i32', 'i64', 'i32', 'i32', 'i32'] as ArgType[] };
}

/** The three tables packed into one upload: weights (float64) first, then indices (int32). */
function packTables(dims: ResampleTable[]): { bytes: Uint8Array; wOff: number[]; iOff: number[]; weightBytes: number } {
  const wLen = dims.map((t) => (t.weight ? t.weight.length : 0));
  const iLen = dims.map((t) => t.index.length);
  const wTotal = wLen.reduce((a, b) => a + b, 0), iTotal = iLen.reduce((a, b) => a + b, 0);
  const buf = new ArrayBuffer(wTotal * 8 + iTotal * 4);
  const wv = new Float64Array(buf, 0, wTotal), iv = new Int32Array(buf, wTotal * 8, iTotal);
  const wOff: number[] = [], iOff: number[] = [];
  let wo = 0, io = 0;
  dims.forEach((t, d) => {
    wOff.push(wo); iOff.push(io);
    if (t.weight) wv.set(t.weight, wo);
    iv.set(t.index, io);
    wo += wLen[d]!; io += iLen[d]!;
  });
  return { bytes: new Uint8Array(buf), wOff, iOff, weightBytes: wTotal * 8 };
}

const isIdentity = (t: ResampleTable, n: number, on: number): boolean =>
  n === on && t.taps === 1 && t.weight === null && t.index.every((v, i) => v === i);

export function cudaInterpolate(p: InterpolateKernelParams): void {
  const { x, out } = p;
  const [tD, tH, tW] = p.dims as [ResampleTable, ResampleTable, ResampleTable];
  const gather = tD.weight === null && tH.weight === null && tW.weight === null;
  requireDType('interpolate', x.dtype, gather ? [...FLOATS, ...INTS, 'bool'] : FLOATS);
  const total = numel(out.shape);
  if (total === 0) return;
  const [B, D, H, W] = x.shape as number[];
  const [, OD, OH, OW] = out.shape as number[];
  const { bytes, wOff, iOff, weightBytes } = packTables(p.dims);
  const tables = be.upload('uint8', bytes) as CudaBuffer;
  const wPtr = tables.ptr, iPtr = tables.ptr + BigInt(weightBytes);
  try {
    const I = indexType(Math.max(total, numel(x.shape)));
    if (gather) {
      const k = be.kernel(`interp_gather:${x.dtype}:${I}`, () => gatherSource(x.dtype, I));
      be.launch(k, be.gridFor(total, 256), 256, [basePtr(x), basePtr(out), iPtr, x.offset, out.offset, total, D!, H!, W!, OD!, OH!, OW!, ...iOff]);
      return;
    }
    if (tD.taps * tH.taps * tW.taps <= FUSED_TAPS) {
      const weighted = p.dims.map((t) => t.weight !== null) as [boolean, boolean, boolean];
      const k = be.kernel(`interp:${x.dtype}:${out.dtype}:${weighted.join('')}:${I}`, () => fusedSource(x.dtype, out.dtype, weighted, I));
      be.launch(k, be.gridFor(total, 256), 256, [basePtr(x), basePtr(out), wPtr, iPtr, x.offset, out.offset, total, D!, H!, W!, OD!, OH!, OW!,
        tD.taps, tH.taps, tW.taps, ...wOff, ...iOff]);
      return;
    }
    // Separable passes W → H → D through float64 scratch; the last pass that does work writes the output.
    const steps: [number, number, number, number, number][] = []; // [dim, outer, n, inner, on]
    if (!isIdentity(tW, W!, OW!)) steps.push([2, B! * D! * H!, W!, 1, OW!]);
    if (!isIdentity(tH, H!, OH!)) steps.push([1, B! * D!, H!, OW!, OH!]);
    if (!isIdentity(tD, D!, OD!)) steps.push([0, B!, D!, OH! * OW!, OD!]);
    let src: { ptr: bigint; off: number; dtype: DTypeName } = { ptr: basePtr(x), off: x.offset, dtype: x.dtype };
    const scratch: CudaBuffer[] = [];
    try {
      steps.forEach(([d, outer, n, inner, on], s) => {
        const last = s === steps.length - 1;
        const count = outer * on * inner;
        const t = p.dims[d]!;
        const dst = last ? { ptr: basePtr(out), off: out.offset, dtype: out.dtype } : { ptr: (scratch[scratch.push(be.alloc('float64', count) as CudaBuffer) - 1]!).ptr, off: 0, dtype: 'float64' as DTypeName };
        const PI = indexType(Math.max(count, outer * n * inner));
        const k = be.kernel(`interp_pass:${src.dtype}:${dst.dtype}:${t.weight !== null}:${PI}`, () => passSource(src.dtype, dst.dtype, t.weight !== null, PI));
        be.launch(k, be.gridFor(count, 256), 256, [src.ptr, dst.ptr, wPtr, iPtr, src.off, dst.off, count, n, on, inner, t.taps, wOff[d]!, iOff[d]!]);
        src = dst;
      });
    } finally { for (const b of scratch) be.free(b); }
  } finally { be.free(tables); }
}

// ---- grid_sample -------------------------------------------------------------------------------------

/** A C math function for compute type S (floorf for float, floor for double). */
const mathOf = (S: string) => (name: string): string => (S === 'float' ? `${name}f` : name);

/**
 * Coordinate helpers for compute type S (float: every step rounded, never fused; double likewise); `round`
 * names a device function every step's result passes through (nbx_round_f16/bf16 for half inputs: PyTorch
 * computes in the half type), or is empty.
 */
function coordHelpers(S: 'float' | 'double', round: string): string {
  const sfx = S === 'float' ? 'f' : 'd';
  const q = (e: string): string => (round ? `${round}(${e})` : e);
  return `
  auto ADD = [](${S} a, ${S} b) -> ${S} { return ${q(`__${sfx}add_rn(a, b)`)}; };
  auto SUB = [](${S} a, ${S} b) -> ${S} { return ${q(`__${sfx}sub_rn(a, b)`)}; };
  auto MUL = [](${S} a, ${S} b) -> ${S} { return ${q(`__${sfx}mul_rn(a, b)`)}; };
  auto DIV = [](${S} a, ${S} b) -> ${S} { return ${q(`__${sfx}div_rn(a, b)`)}; };
  auto Q = [](${S} a) -> ${S} { return ${q('a')}; };
  auto JMIN = [](${S} a, ${S} b) -> ${S} { return (isnan(a) || isnan(b)) ? a + b : (a < b ? a : b); };
  auto JMAX = [](${S} a, ${S} b) -> ${S} { return (isnan(a) || isnan(b)) ? a + b : (a > b ? a : b); };
  (void)Q;`;
}

/** The source coordinate math of one axis (unnormalize, then the padding rule), as C lambdas. */
function axisSource(ax: string, S: string, vec: boolean, ac: boolean, pad: GridSampleKernelParams['padding']): string {
  const size = `${ax}size`;
  const fn = mathOf(S);
  let unnorm: string, reflect: string;
  if (vec) {
    // GridSamplerKernel.cpp ComputeLocationBase (its constants in the step dtype too)
    unnorm = ac ? `MUL(ADD(g, (${S})1), ${ax}scale)` : `SUB(MUL(ADD(g, (${S})1), ${ax}scale), (${S})0.5)`;
    const twice = ac ? `MUL(Q((${S})(${size} - 1)), (${S})2)` : `MUL(Q((${S})${size}), (${S})2)`, low = ac ? `(${S})0` : `(${S})-0.5`;
    reflect = `const ${S} tw = ${twice}; if (tw == 0) return (${S})0;
      const ${S} a = ${fn('fabs')}(SUB(v, ${low})); const ${S} flips = ${fn('trunc')}(DIV(a, tw)); const ${S} extra = SUB(a, MUL(flips, tw));
      return ADD(JMIN(extra, SUB(tw, extra)), ${low});`;
  } else {
    // GridSampler.h grid_sampler_unnormalize / reflect_coordinates (fmod is exact)
    unnorm = ac ? `MUL(DIV(ADD(g, (${S})1), (${S})2), Q((${S})(${size} - 1)))` : `DIV(SUB(MUL(ADD(g, (${S})1), Q((${S})${size})), (${S})1), (${S})2)`;
    const [lo2, hi2] = ac ? ['0', `2 * (${size} - 1)`] : ['-1', `2 * ${size} - 1`];
    reflect = `if (${lo2} == ${hi2}) return (${S})0;
      const ${S} mn = (${S})(${lo2}) / 2, span = DIV(Q((${S})(${hi2} - (${lo2}))), (${S})2);
      const ${S} a = ${fn('fabs')}(SUB(v, mn)); const ${S} extra = ${fn('fmod')}(a, span); const ${S} flips = ${fn('floor')}(DIV(a, span));
      return ${fn('fmod')}(flips, (${S})2) == 0 ? ADD(extra, mn) : ADD(SUB(span, extra), mn);`;
  }
  const clip = (v: string): string => `JMIN(Q((${S})(${size} - 1)), JMAX(${v}, (${S})0))`;
  const bound = pad === 'border' ? clip('v') : pad === 'reflection' ? clip(`${ax}reflect(v)`) : 'v';
  return `
  const ${S} ${ax}scale = DIV(Q((${S})${ac ? `(${size} - 1)` : size}), (${S})2);
  auto ${ax}unnorm = [&](${S} g) -> ${S} { return ${unnorm}; };
  auto ${ax}reflect = [&](${S} v) -> ${S} { ${reflect} };
  auto ${ax}bound = [&](${S} v) -> ${S} { return ${bound}; };
  (void)${ax}scale; (void)${ax}reflect;`;
}

/**
 * `step`: the dtype PyTorch computes in (the input's): float16/bfloat16 round every step to it, the
 * weighted sums included; float32/float64 sum in double (the CPU's sums).
 */
export function gridSampleSource(dtype: DTypeName, spatial: 2 | 3, mode: GridSampleKernelParams['mode'], pad: GridSampleKernelParams['padding'], ac: boolean,
  step: DTypeName = dtype) {
  const T = R.storageType(dtype), S = dtype === 'float64' ? 'double' : 'float';
  const lowp = step === 'float16' || step === 'bfloat16';
  const round = step === 'float16' ? 'nbx_round_f16' : step === 'bfloat16' ? 'nbx_round_bf16' : '';
  const fn = mathOf(S);
  const vec = spatial === 2;
  const inside = (z: string, y: string, x: string): string => `(${x} >= 0 && ${x} < W && ${y} >= 0 && ${y} < H && ${z} >= 0 && ${z} < D)`;
  // sums: in the step dtype (rounded steps) for half inputs, else in double
  const A = lowp ? S : 'double';
  const add = (a: string, b: string): string => (lowp ? `ADD(${a}, ${b})` : `__dadd_rn(${a}, ${b})`);
  const mul = (a: string, b: string): string => (lowp ? `MUL(${a}, ${b})` : `__dmul_rn(${a}, ${b})`);
  const val = (p: string, i: string): string => (lowp ? `(${S})${R.load(dtype, p, i)}` : loadD(dtype, p, i));
  const dot = (acc: string, from: string, nt: number): string => `${A} ${acc} = 0;
      #pragma unroll
      for (int t = ${from}; t < ${from} + ${nt}; t++) ${acc} = ${add(acc, mul(`offs[t] >= 0 ? ${val('xc', 'offs[t]')} : (${A})0`, 'ws[t]'))};`;
  const accumulate = (nt: number): string => `
    for (int c = 0; c < C; c++) {
      const ${T}* xc = xb + (long long)c * plane;
      ${dot('acc', '0', nt)}
      ${storeD(dtype, 'out', 'obase + (long long)c * oplane', 'acc')}
    }`;
  let body: string;
  if (mode === 'bicubic') {
    // get_cubic_coefficients of the vectorized kernel: distances t + 1, t, 1 - t, 2 - t; rows (x taps)
    // first, then the four row results along y
    const cub1 = (v: string): string => `ADD(MUL(MUL(SUB(MUL((${S})1.25, ${v}), (${S})2.25), ${v}), ${v}), (${S})1)`;
    const cub2 = (v: string): string => `SUB(MUL(ADD(MUL(SUB(MUL((${S})-0.75, ${v}), (${S})-3.75), ${v}), (${S})-6), ${v}), (${S})-3)`;
    const coeffs = (c: string, t: string): string => `${S} ${c}[4]; { const ${S} tt = ${t}; ${c}[0] = ${cub2(`ADD(tt, (${S})1)`)}; ${c}[1] = ${cub1('tt')}; ${c}[2] = ${cub1(`SUB((${S})1, tt)`)}; ${c}[3] = ${cub2(`SUB((${S})2, tt)`)}; }`;
    body = `const ${S} x = Xunnorm(gx), y = Yunnorm(gy);
    const ${S} ix = ${fn('floor')}(x), iy = ${fn('floor')}(y);
    ${coeffs('cx', 'SUB(x, ix)')}
    ${coeffs('cy', 'SUB(y, iy)')}
    long long offs[16]; ${A} ws[16];
    for (int b = 0; b < 4; b++) for (int a = 0; a < 4; a++) {
      const ${S} sx = ${fn('trunc')}(Xbound(ADD(ix, (${S})(a - 1)))), sy = ${fn('trunc')}(Ybound(ADD(iy, (${S})(b - 1))));
      offs[b * 4 + a] = ${inside('0', 'sy', 'sx')} ? (long long)sy * W + (long long)sx : -1;
      ws[b * 4 + a] = (${A})cx[a];
    }
    for (int c = 0; c < C; c++) {
      const ${T}* xc = xb + (long long)c * plane;
      ${A} acc = 0;
      for (int b = 0; b < 4; b++) {
        ${dot('row', 'b * 4', 4)}
        acc = ${add('acc', mul(`(${A})cy[b]`, 'row'))};
      }
      ${storeD(dtype, 'out', 'obase + (long long)c * oplane', 'acc')}
    }`;
  } else if (mode === 'nearest') {
    body = `const ${S} x = Xbound(Xunnorm(gx)), y = Ybound(Yunnorm(gy)), z = ${spatial === 3 ? 'Zbound(Zunnorm(gz))' : `(${S})0`};
    const ${S} ix = ${fn('rint')}(x), iy = ${fn('rint')}(y), iz = ${fn('rint')}(z);
    const bool ok = ${inside('iz', 'iy', 'ix')};
    const long long off = ok ? ((long long)iz * H + (long long)iy) * W + (long long)ix : 0;
    for (int c = 0; c < C; c++) {
      ${T} v = 0;
      if (ok) v = xb[(long long)c * plane + off];
      out[obase + (long long)c * oplane] = v;
    }`;
  } else if (spatial === 2) {
    body = `const ${S} x = Xbound(Xunnorm(gx)), y = Ybound(Yunnorm(gy));
    const ${S} x0 = ${fn('floor')}(x), y0 = ${fn('floor')}(y);
    const ${S} wx = SUB(x, x0), ex = SUB((${S})1, wx), ny = SUB(y, y0), sy = SUB((${S})1, ny);
    const ${S} cyv[4] = { y0, y0, y0 + 1, y0 + 1 }, cxv[4] = { x0, x0 + 1, x0, x0 + 1 };
    const ${S} wv[4] = { MUL(sy, ex), MUL(sy, wx), MUL(ny, ex), MUL(ny, wx) };
    long long offs[4]; ${A} ws[4];
    for (int t = 0; t < 4; t++) { offs[t] = ${inside('0', 'cyv[t]', 'cxv[t]')} ? (long long)cyv[t] * W + (long long)cxv[t] : -1; ws[t] = wv[t]; }
    ${accumulate(4)}`;
  } else {
    body = `const ${S} x = Xbound(Xunnorm(gx)), y = Ybound(Yunnorm(gy)), z = Zbound(Zunnorm(gz));
    const ${S} x0 = ${fn('floor')}(x), y0 = ${fn('floor')}(y), z0 = ${fn('floor')}(z);
    long long offs[8]; ${A} ws[8];
    for (int dz = 0; dz < 2; dz++) for (int dy = 0; dy < 2; dy++) for (int dx = 0; dx < 2; dx++) {
      const ${S} fx = dx ? SUB(x, x0) : SUB(x0 + 1, x), fy = dy ? SUB(y, y0) : SUB(y0 + 1, y), fz = dz ? SUB(z, z0) : SUB(z0 + 1, z);
      const ${S} cz = z0 + dz, cy = y0 + dy, cx = x0 + dx;
      const int t = (dz * 2 + dy) * 2 + dx;
      offs[t] = ${inside('cz', 'cy', 'cx')} ? ((long long)cz * H + (long long)cy) * W + (long long)cx : -1;
      ws[t] = MUL(MUL(fx, fy), fz);
    }
    ${accumulate(8)}`;
  }
  const src = `${NARROW_SRC}
extern "C" __global__ void __launch_bounds__(256) grid_sample(const ${T}* __restrict__ xin, const ${T}* __restrict__ grid, ${T}* __restrict__ out,
  long long xoff, long long goff, long long ooff, long long points, int C, int D, int H, int W, long long oplane) {
  const int Xsize = W, Ysize = H, Zsize = D;
  const long long plane = (long long)D * H * W;
  ${coordHelpers(S as 'float' | 'double', round)}
  ${axisSource('X', S, vec, ac, pad)}
  ${axisSource('Y', S, vec, ac, pad)}
  ${axisSource('Z', S, vec, ac, pad)}
  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < points; i += (long long)gridDim.x * blockDim.x) {
    const long long n = i / oplane, q = i % oplane;
    const ${T}* gp = grid + goff + i * ${spatial};
    const ${S} gx = gp[0], gy = gp[1], gz = ${spatial === 3 ? 'gp[2]' : `(${S})0`};
    (void)gz;
    const ${T}* xb = xin + xoff + n * C * plane;
    const long long obase = ooff + n * C * oplane + q;
    ${body}
  }
}`;
  return { src, name: 'grid_sample', sig: ['ptr', 'ptr', 'ptr', 'i64', 'i64', 'i64', 'i64', 'i32', 'i32', 'i32', 'i32', 'i64'] as ArgType[] };
}

export function cudaGridSample(p: GridSampleKernelParams): void {
  const { x, grid, out } = p;
  requireDType('grid_sample', x.dtype, ['float32', 'float64']);
  const [N, C, D, H, W] = x.shape as number[];
  const [, OD, OH, OW] = grid.shape as number[];
  const oplane = OD! * OH! * OW!, points = N! * oplane;
  if (points === 0 || C === 0) return;
  const step = p.stepDType === 'float16' || p.stepDType === 'bfloat16' ? p.stepDType : x.dtype;
  const key = `grid_sample:${x.dtype}:${step}:${p.spatial}:${p.mode}:${p.padding}:${p.alignCorners}`;
  const k = be.kernel(key, () => gridSampleSource(x.dtype, p.spatial, p.mode, p.padding, p.alignCorners, step));
  be.launch(k, be.gridFor(points, 256), 256, [basePtr(x), basePtr(grid), basePtr(out), x.offset, grid.offset, out.offset, points, C!, D!, H!, W!, oplane]);
}
