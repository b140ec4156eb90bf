// CUDA kernels 'pool' and 'adaptive_pool' with the contract in src/kernels/pool.ts:
// window max (first maximum, a NaN wins and the last NaN's index is kept, int64 flat indices into the
// D·H·W plane) and average (double accumulation, count_include_pad, divisor_override; exact integer
// averages truncating like C++), over [B, D, H, W] with PyTorch's window bounds.
//
// Two shapes of kernel: a thread per output element (small windows, the usual case), and a warp per
// output element for large windows (global average pooling, adaptive pooling to 1×1), whose lanes
// split the window and merge in a fixed shuffle order, so results are identical run to run. The max
// merge is order-independent: the NaN with the largest index, else the largest value with the
// smallest index, which is exactly what the sequential scan picks.

import { DTYPES, type DTypeName } from '../../../dtype/dtypes.js';
import type { BackendKernels } from '../../../kernels/table.js';
import { R, type CudaBackend } from '../runtime/backend.js';
import type { ArgType } from '../runtime/driver.js';
import { FLOATS, INTS, NARROW_SRC, basePtr, indexType, isFloat, numel, requireDType, storeD } from './util.js';
import type { AdaptivePoolKernelParams, PoolKernelParams } from '../../../kernels/pool.js';

let be: CudaBackend;
export const kernels = {
  pool: cudaPool,
  adaptive_pool: cudaAdaptivePool,
} satisfies BackendKernels;

/** Points this family's kernels at the backend (called once, when the backend starts). */
export function bind(backend: CudaBackend): void {
  be = backend;
}

export type PoolKind = 'max' | 'avg';
/** How window bounds are computed: PyTorch's pooling windows, or adaptive pooling's. */
export type Windows = 'window' | 'adaptive';

/** Windows at least this large (elements) get a warp each. */
const WARP_WINDOW = 128;

const lowest = (d: DTypeName): string => {
  if (isFloat(d)) return '(-INFINITY)';
  if (d === 'int64') return '(-9223372036854775807LL - 1LL)';
  return `(${DTYPES[d].min})`;
};

export function poolSource(kind: PoolKind, win: Windows, dtype: DTypeName, withIdx: boolean, warp: boolean, idx32: boolean) {
  const T = R.storageType(dtype), I = idx32 ? 'int' : 'long long';
  const fl = isFloat(dtype);
  const A = fl ? 'double' : 'long long'; // avg accumulator
  const V = R.computeType(dtype); // max: values compare in the compute type (exact for every dtype)
  const ld = (i: string): string => `(${V})${R.load(dtype, 'xb', i)}`;
  // Window [a, b) along one dim and, for averages, its padded size.
  const bounds = (o: string, n: string, on: string, k: string, s: string, p: string, d: string, v: string): string => {
    if (win === 'adaptive') {
      return `const int ${v}0 = (int)(((long long)${o} * ${n}) / ${on}); const int ${v}1 = (int)(((long long)(${o} + 1) * ${n} + ${on} - 1) / ${on});`;
    }
    if (kind === 'max') {
      return `int ${v}0 = ${o} * ${s} - ${p}; const int ${v}1 = min(${v}0 + (${k} - 1) * ${d} + 1, ${n}); if (${v}0 < 0) ${v}0 += ((-${v}0 + ${d} - 1) / ${d}) * ${d};`;
    }
    return `int ${v}0 = ${o} * ${s} - ${p}; int ${v}1 = min(${v}0 + ${k}, ${n} + ${p}); const int ${v}n = ${v}1 - ${v}0; ${v}0 = max(${v}0, 0); ${v}1 = min(${v}1, ${n});`;
  };
  const dil = kind === 'max' && win === 'window';
  const [sd, sh, sw] = dil ? ['dD', 'dH', 'dW'] : ['1', '1', '1'];
  const decode = `${I} r_ = i; const int ow = (int)(r_ % OW); r_ /= OW; const int oh = (int)(r_ % OH); r_ /= OH; const int od = (int)(r_ % OD); const ${I} b = r_ / OD;
    ${bounds('od', 'D', 'OD', 'kD', 'sD', 'pD', 'dD', 'z')}
    ${bounds('oh', 'H', 'OH', 'kH', 'sH', 'pH', 'dH', 'y')}
    ${bounds('ow', 'W', 'OW', 'kW', 'sW', 'pW', 'dW', 'x')}
    const ${T}* xb = x + xoff + b * ((${I})D * H * W);`;
  const divisor = win === 'adaptive' ? 'count' : '(divisor ? divisor : cip ? (long long)zn * yn * xn : count)';
  const finishAvg = (acc: string): string => (fl
    ? storeD(dtype, 'out', 'ooff + i', `${acc} / (double)(${divisor})`)
    : R.store(dtype, 'out', 'ooff + i', `${acc} / (long long)(${divisor})`));
  const better = fl ? '(v > best || isnan(v))' : 'v > best';
  let body: string;
  if (!warp) {
    body = kind === 'max'
      ? `${V} best = 0; bool any = false; long long bi = ((long long)z0 * H + y0) * W + x0;
    for (int z = z0; z < z1; z += ${sd}) for (int y = y0; y < y1; y += ${sh}) {
      const long long r = ((long long)z * H + y) * W;
      for (int xx = x0; xx < x1; xx += ${sw}) { const ${V} v = ${ld('r + xx')}; if (!any || ${better}) { best = v; bi = r + xx; any = true; } }
    }
    ${R.store(dtype, 'out', 'ooff + i', `any ? best : ${lowest(dtype)}`)}
    ${withIdx ? 'ind[ioff + i] = bi;' : ''}`
      : `if (z0 >= z1 || y0 >= y1 || x0 >= x1) { ${R.store(dtype, 'out', 'ooff + i', '0')} continue; }
    const long long count = (long long)(z1 - z0) * (y1 - y0) * (x1 - x0);
    ${A} acc = 0;
    for (int z = z0; z < z1; z++) for (int y = y0; y < y1; y++) {
      const long long r = ((long long)z * H + y) * W;
      for (int xx = x0; xx < x1; xx++) acc += (${A})${R.load(dtype, 'xb', 'r + xx')};
    }
    ${finishAvg('acc')}`;
  } else {
    // The window flattened (with steps); lane l takes elements l, l + 32, ... (increasing index order).
    const steps = `const int zc = (z1 - z0 + ${sd} - 1) / ${sd}, yc = (y1 - y0 + ${sh} - 1) / ${sh}, xc = (x1 - x0 + ${sw} - 1) / ${sw};
    const int cnt = z0 < z1 && y0 < y1 && x0 < x1 ? zc * yc * xc : 0;`;
    const elem = `const int zi = e / (yc * xc), yi = (e / xc) % yc, xi = e % xc;
      const long long r = ((long long)(z0 + zi * ${sd}) * H + (y0 + yi * ${sh})) * W + (x0 + xi * ${sw});`;
    body = kind === 'max'
      ? `${steps}
    ${V} best = 0; bool any = false; long long bi = ((long long)z0 * H + y0) * W + x0;
    for (int e = lane; e < cnt; e += 32) { ${elem} const ${V} v = ${ld('r')}; if (!any || ${better}) { best = v; bi = r; any = true; } }
    #pragma unroll
    for (int o = 16; o > 0; o >>= 1) {
      const ${V} v = __shfl_xor_sync(0xffffffffu, best, o); const long long vi = __shfl_xor_sync(0xffffffffu, bi, o); const bool va = __shfl_xor_sync(0xffffffffu, (int)any, o) != 0;
      bool take;
      if (!va) take = false; else if (!any) take = true;
      ${fl ? `else if (isnan(v) || isnan(best)) take = isnan(v) && (!isnan(best) || vi > bi);` : ''}
      else take = v > best || (v == best && vi < bi);
      if (take) { best = v; bi = vi; any = true; }
    }
    if (lane == 0) {
      ${R.store(dtype, 'out', 'ooff + i', `any ? best : ${lowest(dtype)}`)}
      ${withIdx ? 'ind[ioff + i] = bi;' : ''}
    }`
      : `${steps}
    const long long count = (long long)cnt;
    ${A} acc = 0;
    for (int e = lane; e < cnt; e += 32) { ${elem} acc += (${A})${R.load(dtype, 'xb', 'r')}; }
    #pragma unroll
    for (int o = 16; o > 0; o >>= 1) acc += __shfl_xor_sync(0xffffffffu, acc, o);
    if (lane == 0) { if (cnt == 0) { ${R.store(dtype, 'out', 'ooff + i', '0')} } else { ${finishAvg('acc')} } }`;
  }
  const loop = warp
    ? `const int lane = threadIdx.x & 31;
  for (${I} i = (blockIdx.x * (${I})blockDim.x + threadIdx.x) >> 5; i < total; i += ((${I})gridDim.x * blockDim.x) >> 5) {`
    : `for (${I} i = blockIdx.x * (${I})blockDim.x + threadIdx.x; i < total; i += (${I})gridDim.x * blockDim.x) {`;
  const src = `${NARROW_SRC}
extern "C" __global__ void __launch_bounds__(256) pool(const ${T}* __restrict__ x, ${T}* __restrict__ out, long long* __restrict__ ind,
  long long xoff, long long ooff, long long ioff, long long total_, int D, int H, int W, int OD, int OH, int OW,
  int kD, int kH, int kW, int sD, int sH, int sW, int pD, int pH, int pW, int dD, int dH, int dW, int cip, long long divisor) {
  const ${I} total = (${I})total_;
  ${loop}
    ${decode}
    ${body}
  }
}`;
  const sig: ArgType[] = ['ptr', 'ptr', 'ptr', 'i64', 'i64', 'i64', 'i64', ...Array<ArgType>(6 + 12).fill('i32'), 'i32', 'i64'];
  return { src, name: 'pool', sig };
}

/** The largest adaptive window along a dim of n split into `on`. */
function adaptiveMax(n: number, on: number): number {
  let m = 0;
  for (let o = 0; o < on; o++) m = Math.max(m, Math.floor(((o + 1) * n + on - 1) / on) - Math.floor((o * n) / on));
  return m;
}

function launchPool(op: string, kind: PoolKind, win: Windows, x: PoolKernelParams['x'], out: PoolKernelParams['out'], indices: PoolKernelParams['indices'],
  k: number[], s: number[], p: number[], d: number[], cip: boolean, divisor: number | null): void {
  requireDType(op, x.dtype, kind === 'max' ? [...FLOATS, ...INTS] : [...FLOATS, ...INTS]);
  const total = numel(out.shape);
  if (total === 0) return;
  const [, D, H, W] = x.shape as number[];
  const [, OD, OH, OW] = out.shape as number[];
  const windowSize = win === 'adaptive'
    ? adaptiveMax(D!, OD!) * adaptiveMax(H!, OH!) * adaptiveMax(W!, OW!)
    : k.reduce((a, b) => a * b, 1);
  const warp = windowSize >= WARP_WINDOW;
  const withIdx = kind === 'max' && !!indices;
  const idx32 = indexType(Math.max(total * (warp ? 32 : 1), numel(x.shape))) === 'int';
  const key = `pool:${kind}:${win}:${x.dtype}:${withIdx}:${warp}:${idx32}`;
  const kern = be.kernel(key, () => poolSource(kind, win, x.dtype, withIdx, warp, idx32));
  const block = 256;
  be.launch(kern, be.gridFor(total * (warp ? 32 : 1), block), block, [basePtr(x), basePtr(out), basePtr(indices), x.offset, out.offset, indices?.offset ?? 0,
    total, D!, H!, W!, OD!, OH!, OW!, ...k, ...s, ...p, ...d, cip ? 1 : 0, divisor ?? 0]);
}

export function cudaPool(p: PoolKernelParams): void {
  launchPool('pool', p.kind, 'window', p.x, p.out, p.indices, p.kernel, p.stride, p.padding, p.dilation, p.countIncludePad, p.divisor);
}

export function cudaAdaptivePool(p: AdaptivePoolKernelParams): void {
  launchPool('adaptive_pool', p.kind, 'adaptive', p.x, p.out, p.indices, [1, 1, 1], [1, 1, 1], [0, 0, 0], [1, 1, 1], false, null);
}
