// CUDA row kernels for the nn family, with the CPU kernels' signatures (src/backend/cpu/nn.ts):
// 'softmax' (softmax/log_softmax/softmin, masks, causal, safe rows) and 'row_norm' (layer/rms/group
// norm statistics and affine). A block owns a row; a row of up to 16 elements per thread stays in
// registers, so the row is read from memory once. Block reductions run in a fixed order: deterministic.

import { DTYPES, type DTypeName } from '../../dtype/dtypes.js';
import type { StridedRef } from '../backend.js';
import { registerKernel } from '../registry.js';
import { R, type CudaBackend, type CudaBuffer } from './backend.js';
import type { SoftmaxParams, RowNormParams } from '../cpu/nn.js';
import type { ArgType } from './driver.js';
import { SOFTMAX_SPACE, ROWNORM_SPACE } from './tuning.js';
import { bucketSize, type Config } from '../../autotune/index.js';

let be: CudaBackend;
export function installCudaNnKernels(backend: CudaBackend): void {
  be = backend;
  registerKernel('softmax', 'cuda', cudaSoftmax);
  registerKernel('row_norm', 'cuda', cudaRowNorm);
}

const ptr = (r: StridedRef | undefined): bigint => (r ? (r.buf as CudaBuffer).ptr : 0n);
const nextPow2 = (n: number): number => 2 ** Math.ceil(Math.log2(Math.max(n, 1)));

/** Block size and per-thread register items for a row of n. ITEMS 0: too long to cache, stream from memory. */
export function rowPlan(n: number, threads?: number): { block: number; items: number } {
  const block = threads ?? Math.min(1024, Math.max(32, nextPow2(n)));
  const items = Math.ceil(n / block);
  return { block, items: items <= 16 ? items : 0 };
}

const BLOCK_REDUCE = String.raw`
// Sum/max over the block, same order every run; every thread gets the result.
template <typename T, bool MAX> __device__ __forceinline__ T nbx_block_all(T v, T* sh) {
  #pragma unroll
  for (int o = 16; o > 0; o >>= 1) { T w = __shfl_xor_sync(0xffffffffu, v, o); v = MAX ? (w > v || isnan(w) ? w : v) : v + w; }
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, nw = blockDim.x >> 5;
  __syncthreads();
  if (lane == 0) sh[warp] = v;
  __syncthreads();
  v = lane < nw ? sh[lane] : (MAX ? -INFINITY : (T)0);
  #pragma unroll
  for (int o = 16; o > 0; o >>= 1) { T w = __shfl_xor_sync(0xffffffffu, v, o); v = MAX ? (w > v || isnan(w) ? w : v) : v + w; }
  return v;
}
`;

export function softmaxSource(x: DTypeName, out: DTypeName, mask: DTypeName | null, k: number, items: number, log: boolean, negate: boolean, safe: boolean) {
  const A = x === 'float64' || out === 'float64' ? 'double' : 'float';
  const dims = [...Array(k).keys()];
  const ld = (v: string, d: DTypeName, p: string, i: string): string => `${A} ${v} = (${A})${R.load(d, p, i)};`;
  const maskApply = (v: string, j: string): string => {
    if (!mask) return '';
    return mask === 'bool' ? `if (mk[mo + (long long)(${j}) * ms] == 0) ${v} = -INFINITY;`
      : `${v} += (${A})${R.load(mask, 'mk', `mo + (long long)(${j}) * ms`)};`;
  };
  // the row's value at j after negation, mask and causal mask (a lambda: no GNU statement expressions)
  const lambda = `auto val = [&](long long j) -> ${A} { ${ld('v_', x, 'in', 'xo + j * xs')} ${negate ? 'v_ = -v_;' : ''} ${maskApply('v_', 'j')} if (causal && j > lim) v_ = -INFINITY; return v_; };`;
  const value = (j: string): string => `val(${j})`;
  const emit = (v: string, j: string): string => R.store(out, 'o', `oo + (long long)(${j}) * os`, log ? `${v} - mx - lse` : `${A === 'double' ? 'exp' : 'expf'}(${v} - mx) * inv`);
  const E = A === 'double' ? 'exp' : '__expf';
  const body = items > 0
    ? `${A} v[${items}];
    ${A} m = -INFINITY;
    #pragma unroll
    for (int t = 0; t < ${items}; t++) { const int j = threadIdx.x + t * blockDim.x; v[t] = j < n ? ${value('j')} : -INFINITY; m = (v[t] > m || isnan(v[t])) ? v[t] : m; }
    const ${A} mx0 = nbx_block_all<${A}, true>(m, sh);
    const ${A} mx = isinf(mx0) && mx0 < 0 ? (${A})0 : mx0;
    ${A} s = 0;
    #pragma unroll
    for (int t = 0; t < ${items}; t++) { const int j = threadIdx.x + t * blockDim.x; if (j < n) s += ${E}(v[t] - mx); }
    s = nbx_block_all<${A}, false>(s, sh);
    const bool empty = ${safe ? 's == 0' : 'false'};
    const ${A} inv = (${A})1 / s, lse = ${A === 'double' ? 'log' : 'logf'}(s);
    #pragma unroll
    for (int t = 0; t < ${items}; t++) { const int j = threadIdx.x + t * blockDim.x; if (j < n) { if (empty) { ${R.store(out, 'o', 'oo + (long long)j * os', '0')} } else { ${emit('v[t]', 'j')} } } }`
    : `${A} m = -INFINITY;
    for (int j = threadIdx.x; j < n; j += blockDim.x) { ${A} vv = ${value('j')}; m = (vv > m || isnan(vv)) ? vv : m; }
    const ${A} mx0 = nbx_block_all<${A}, true>(m, sh);
    const ${A} mx = isinf(mx0) && mx0 < 0 ? (${A})0 : mx0;
    ${A} s = 0;
    for (int j = threadIdx.x; j < n; j += blockDim.x) s += ${E}(${value('j')} - mx);
    s = nbx_block_all<${A}, false>(s, sh);
    const bool empty = ${safe ? 's == 0' : 'false'};
    const ${A} inv = (${A})1 / s, lse = ${A === 'double' ? 'log' : 'logf'}(s);
    for (int j = threadIdx.x; j < n; j += blockDim.x) { if (empty) { ${R.store(out, 'o', 'oo + (long long)j * os', '0')} } else { ${A} vv = ${value('j')}; ${emit('vv', 'j')} } }`;
  const src = `${BLOCK_REDUCE}
extern "C" __global__ void softmax(const ${R.storageType(x)}* __restrict__ in, ${R.storageType(out)}* __restrict__ o, const ${mask ? R.storageType(mask) : 'unsigned char'}* __restrict__ mk,
  long long rows, int n, long long xoff, long long xs, long long ooff, long long os, long long moff, long long ms, int causal, long long L, long long c0
  ${dims.map((d) => `, long long s${d}, long long xst${d}, long long ost${d}, long long mst${d}`).join('')}) {
  __shared__ ${A} sh[32];
  for (long long r = blockIdx.x; r < rows; r += gridDim.x) {
    long long rem = r, xo = xoff, oo = ooff, mo = moff;
    ${dims.slice().reverse().map((d) => `{ long long c = rem % s${d}; rem /= s${d}; xo += c * xst${d}; oo += c * ost${d}; mo += c * mst${d}; }`).join(' ')}
    const long long lim = (r % L) + c0;
    ${lambda}
    ${body}
  }
}`;
  const sig: ArgType[] = ['ptr', 'ptr', 'ptr', 'i64', 'i32', 'i64', 'i64', 'i64', 'i64', 'i64', 'i64', 'i32', 'i64', 'i64', ...dims.flatMap(() => ['i64', 'i64', 'i64', 'i64'] as ArgType[])];
  return { src, name: 'softmax', sig };
}

export function cudaSoftmax(p: SoftmaxParams): void {
  const { x, out, dim } = p;
  const nd = x.shape.length;
  const n = nd ? x.shape[dim]! : 1;
  const others = [...Array(nd).keys()].filter((d) => d !== dim);
  const rows = others.reduce((a, d) => a * x.shape[d]!, 1);
  if (rows === 0 || n === 0) return;
  const mask = p.mask;
  const st = (r: StridedRef | undefined, d: number): number => (r ? r.strides[d] ?? 0 : 0);
  const L = nd >= 2 ? x.shape[nd - 2]! : 1;
  const args = [ptr(x), ptr(out), ptr(mask), rows, n, x.offset, st(x, dim), out.offset, st(out, dim),
    mask?.offset ?? 0, st(mask, dim), p.causal ? 1 : 0, L, p.causalOffset ?? 0,
    ...others.flatMap((d) => [x.shape[d]!, st(x, d), st(out, d), st(mask, d)])];
  const run = (c: Config): void => {
    const { block, items } = rowPlan(n, c.threads as number);
    const key = `softmax:${x.dtype}:${out.dtype}:${mask?.dtype ?? '-'}:${others.length}:${items}:${p.log}:${!!p.negate}:${!!p.safe}`;
    const k = be.kernel(key, () => softmaxSource(x.dtype, out.dtype, mask?.dtype ?? null, others.length, items, p.log, !!p.negate, !!p.safe));
    be.launch(k, Math.min(rows, be.smCount * 64), block, args);
  };
  const fallback = { threads: rowPlan(n).block };
  run(be.tuning.pick(SOFTMAX_SPACE, `${bucketSize(n)}:${bucketSize(rows)}:${mask ? 'mask' : '-'}`, `${x.dtype}>${out.dtype}`, rows * n, fallback, run));
}

export function rowNormSource(x: DTypeName, out: DTypeName | null, w: DTypeName | null, b: DTypeName | null, stats: DTypeName | null, rms: boolean, items: number) {
  const A = x === 'float64' ? 'double' : 'float';
  const load = (i: string): string => `(${A})${R.load(x, 'in', i)}`;
  const wIdx = '(int)((r % groups) * cpg + j / chan)';
  const affine = (v: string): string => `${w ? `${v} *= (${A})${R.load(w, 'wt', wIdx)};` : ''}${b ? `${v} += (${A})${R.load(b, 'bs', wIdx)};` : ''}`;
  const stats2 = stats ? `if (threadIdx.x == 0) { if (mo) { ${R.store(stats, 'mo', 'moff + r', 'mean')} } if (vo) { ${R.store(stats, 'vo', 'voff + r', 'var_')} } }` : '';
  const writeOut = out ? (v: string): string => `{ ${A} y = (${v} - mean) * rstd; ${affine('y')} ${R.store(out, 'o', 'ooff + r * n + j', 'y')} }` : () => '';
  const body = items > 0
    ? `${A} v[${items}]; ${A} s = 0;
    #pragma unroll
    for (int t = 0; t < ${items}; t++) { const long long j = threadIdx.x + t * blockDim.x; v[t] = j < n ? ${load('xoff + r * n + j')} : (${A})0; s += ${rms ? 'v[t] * v[t]' : 'v[t]'}; }
    s = nbx_block_all<${A}, false>(s, sh);
    ${rms ? `const ${A} mean = 0, var_ = s / n;` : `const ${A} mean = s / n; ${A} q = 0;
    #pragma unroll
    for (int t = 0; t < ${items}; t++) { const long long j = threadIdx.x + t * blockDim.x; if (j < n) { ${A} d = v[t] - mean; q += d * d; } }
    q = nbx_block_all<${A}, false>(q, sh); const ${A} var_ = q / n;`}
    const ${A} rstd = (${A})1 / sqrt(var_ + (${A})eps);
    ${stats2}
    #pragma unroll
    for (int t = 0; t < ${items}; t++) { const long long j = threadIdx.x + t * blockDim.x; if (j < n) ${writeOut('v[t]')} }`
    : `${A} s = 0;
    for (long long j = threadIdx.x; j < n; j += blockDim.x) { ${A} x_ = ${load('xoff + r * n + j')}; s += ${rms ? 'x_ * x_' : 'x_'}; }
    s = nbx_block_all<${A}, false>(s, sh);
    ${rms ? `const ${A} mean = 0, var_ = s / n;` : `const ${A} mean = s / n; ${A} q = 0;
    for (long long j = threadIdx.x; j < n; j += blockDim.x) { ${A} d = ${load('xoff + r * n + j')} - mean; q += d * d; }
    q = nbx_block_all<${A}, false>(q, sh); const ${A} var_ = q / n;`}
    const ${A} rstd = (${A})1 / sqrt(var_ + (${A})eps);
    ${stats2}
    for (long long j = threadIdx.x; j < n; j += blockDim.x) { ${A} x_ = ${load('xoff + r * n + j')}; ${writeOut('x_')} }`;
  const src = `${BLOCK_REDUCE}
extern "C" __global__ void row_norm(const ${R.storageType(x)}* __restrict__ in, ${out ? R.storageType(out) : 'float'}* __restrict__ o,
  const ${w ? R.storageType(w) : 'float'}* __restrict__ wt, const ${b ? R.storageType(b) : 'float'}* __restrict__ bs,
  ${stats ? R.storageType(stats) : 'float'}* __restrict__ mo, ${stats ? R.storageType(stats) : 'float'}* __restrict__ vo,
  long long rows, long long n, long long xoff, long long ooff, long long moff, long long voff, double eps, long long groups, long long cpg, long long chan) {
  __shared__ ${A} sh[32];
  for (long long r = blockIdx.x; r < rows; r += gridDim.x) {
    ${body}
  }
}`;
  return { src, name: 'row_norm', sig: ['ptr', 'ptr', 'ptr', 'ptr', 'ptr', 'ptr', 'i64', 'i64', 'i64', 'i64', 'i64', 'i64', 'f64', 'i64', 'i64', 'i64'] as ArgType[] };
}

export function cudaRowNorm(p: RowNormParams): void {
  const { x, rows, n } = p;
  if (rows === 0) return;
  const stats = p.mean ?? p.var;
  const groups = p.groups ?? 1, chan = p.chan ?? 1;
  const at = (r: StridedRef | undefined): bigint => (r ? ptr(r) + BigInt(r.offset * DTYPES[r.dtype].itemsize) : 0n);
  const args = [ptr(x), ptr(p.out), at(p.weight), at(p.bias), ptr(p.mean), ptr(p.var),
    rows, n, x.offset, p.out?.offset ?? 0, p.mean?.offset ?? 0, p.var?.offset ?? 0, p.eps, groups, n / chan, chan];
  const run = (c: Config): void => {
    const { block, items } = rowPlan(n, c.threads as number);
    const key = `rownorm:${x.dtype}:${p.out?.dtype ?? '-'}:${p.weight?.dtype ?? '-'}:${p.bias?.dtype ?? '-'}:${stats?.dtype ?? '-'}:${p.mode}:${items}`;
    const k = be.kernel(key, () => rowNormSource(x.dtype, p.out?.dtype ?? null, p.weight?.dtype ?? null, p.bias?.dtype ?? null, stats?.dtype ?? null, p.mode === 'rms', items));
    be.launch(k, Math.min(rows, be.smCount * 64), block, args);
  };
  run(be.tuning.pick(ROWNORM_SPACE, `${bucketSize(n)}:${bucketSize(rows)}:${p.mode}`, x.dtype, rows * n, { threads: rowPlan(n).block }, run));
}
