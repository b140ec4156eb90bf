// CUDA kernels 'nll_loss' and 'local_response_norm' with the CPU kernels' signatures (src/backend/cpu/kernels/nn.ts).
//
// nll_loss: per-item losses -w[t]·input[i, t, d] in double; the two sums (loss, weight) reduce in a
// fixed order (fixed chunks per block, thread-strided, then a shuffle tree; a second one-block kernel
// adds the blocks' partials in order), so the result is identical run to run. Out-of-range targets
// raise the CPU's IndexError: the kernel records the first bad item in a device flag, read back once
// per call (the only host synchronization; one 8-byte copy).
// local_response_norm: a thread per element sums the squares of its channel window in double.

import type { DTypeName } from '../../../dtype/dtypes.js';
import { IndexError } from '../../../errors.js';
import type { StridedRef } from '../../backend.js';
import type { BackendKernels } from '../../../kernels/table.js';
import { R, type CudaBackend, type CudaBuffer } from '../runtime/backend.js';
import type { ArgType } from '../runtime/driver.js';
import { FLOATS, NARROW_SRC, basePtr, loadD, numel, requireDType, storeD } from './util.js';
import type { LrnParams, NllParams } from '../../../kernels/nn.js';

let be: CudaBackend;
export const kernels = {
  nll_loss: cudaNllLoss,
  local_response_norm: cudaLocalResponseNorm,
} satisfies BackendKernels;

/** Points this family's kernels at the backend (called once, when the backend starts). */
export function bind(backend: CudaBackend): void {
  be = backend;
}

const NLL_BLOCK = 256;

/** Sums (a, b) over the block in a fixed order; thread 0 gets the totals. */
const BLOCK_SUM2 = String.raw`
__device__ __forceinline__ void nbx_block_sum2(double& a, double& b, double* sh) {
  #pragma unroll
  for (int o = 16; o > 0; o >>= 1) { a += __shfl_down_sync(0xffffffffu, a, o); b += __shfl_down_sync(0xffffffffu, b, o); }
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, nw = blockDim.x >> 5;
  if (lane == 0) { sh[2 * warp] = a; sh[2 * warp + 1] = b; }
  __syncthreads();
  if (warp == 0) {
    a = lane < nw ? sh[2 * lane] : 0.0; b = lane < nw ? sh[2 * lane + 1] : 0.0;
    #pragma unroll
    for (int o = 16; o > 0; o >>= 1) { a += __shfl_down_sync(0xffffffffu, a, o); b += __shfl_down_sync(0xffffffffu, b, o); }
  }
}`;

export function nllSource(inD: DTypeName, tD: DTypeName, withWeight: boolean, withOut: boolean) {
  const T = R.storageType(inD), TT = R.storageType(tD);
  const src = `${NARROW_SRC}
${BLOCK_SUM2}
extern "C" __global__ void __launch_bounds__(${NLL_BLOCK}) nll(const ${T}* __restrict__ in, const ${TT}* __restrict__ tgt, const ${T}* __restrict__ w,
  ${T}* __restrict__ out, double* __restrict__ part, unsigned long long* __restrict__ flag,
  long long inoff, long long toff, long long woff, long long ooff, long long items, long long C, long long D, long long ignore, long long chunk) {
  __shared__ double sh[64];
  const long long k0 = blockIdx.x * chunk, k1 = min(items, k0 + chunk);
  double s = 0, ws = 0;
  for (long long k = k0 + threadIdx.x; k < k1; k += blockDim.x) {
    const long long t = (long long)tgt[toff + k];
    double l = 0;
    if (t != ignore) {
      if (t < 0 || t >= C) atomicMax(flag, (unsigned long long)(items - k));
      else {
        const double wt = ${withWeight ? loadD(inD, 'w', 'woff + t') : '1.0'};
        l = -wt * ${loadD(inD, 'in', 'inoff + ((k / D) * C + t) * D + k % D')};
        s += l; ws += wt;
      }
    }
    ${withOut ? storeD(inD, 'out', 'ooff + k', 'l') : ''}
  }
  nbx_block_sum2(s, ws, sh);
  if (threadIdx.x == 0) { part[2 * blockIdx.x] = s; part[2 * blockIdx.x + 1] = ws; }
}`;
  return { src, name: 'nll', sig: ['ptr', 'ptr', 'ptr', 'ptr', 'ptr', 'ptr', 'i64', 'i64', 'i64', 'i64', 'i64', 'i64', 'i64', 'i64', 'i64'] as ArgType[] };
}

/** The blocks' partial sums, added in block order, stored into `sums` (two elements). */
export function nllFinalSource(sD: DTypeName) {
  const src = `${NARROW_SRC}
${BLOCK_SUM2}
extern "C" __global__ void __launch_bounds__(${NLL_BLOCK}) nll_final(const double* __restrict__ part, ${R.storageType(sD)}* __restrict__ sums, long long soff, int nb) {
  __shared__ double sh[64];
  double s = 0, ws = 0;
  for (int b = threadIdx.x; b < nb; b += blockDim.x) { s += part[2 * b]; ws += part[2 * b + 1]; }
  nbx_block_sum2(s, ws, sh);
  if (threadIdx.x == 0) { ${storeD(sD, 'sums', 'soff', 's')} ${storeD(sD, 'sums', 'soff + 1', 'ws')} }
}`;
  return { src, name: 'nll_final', sig: ['ptr', 'ptr', 'i64', 'i32'] as ArgType[] };
}

export function cudaNllLoss(p: NllParams): void {
  const { input, target, N, C, D } = p;
  requireDType('nll_loss', input.dtype, FLOATS);
  requireDType('nll_loss', target.dtype, ['int64', 'uint8']);
  const items = N * D;
  // Fixed chunks per block (a function of the size only): the summation order never changes.
  const nb = Math.max(1, Math.min(1024, Math.ceil(items / 4096)));
  const chunk = Math.max(1, Math.ceil(items / nb));
  const part = be.alloc('float64', 2 * nb, items === 0) as CudaBuffer;
  const flag = be.alloc('int64', 1, true) as CudaBuffer;
  try {
    if (items > 0) {
      const k = be.kernel(`nll:${input.dtype}:${target.dtype}:${!!p.weight}:${!!p.out}`, () => nllSource(input.dtype, target.dtype, !!p.weight, !!p.out));
      be.launch(k, nb, NLL_BLOCK, [basePtr(input), basePtr(target), basePtr(p.weight), basePtr(p.out), part.ptr, flag.ptr,
        input.offset, target.offset, p.weight?.offset ?? 0, p.out?.offset ?? 0, items, C, D, p.ignoreIndex, chunk]);
    }
    const bad = items > 0 ? Number((be.downloadSync(flag, 'int64', 0, 1) as BigInt64Array)[0]!) : 0;
    if (bad > 0) {
      const k = items - bad;
      const t = be.downloadSync(target.buf, target.dtype, target.offset + k, 1)[0]!;
      throw new IndexError('nll_loss', `Target ${t} is out of bounds.`);
    }
    if (p.sums) {
      const f = be.kernel(`nll_final:${p.sums.dtype}`, () => nllFinalSource(p.sums!.dtype));
      be.launch(f, 1, NLL_BLOCK, [part.ptr, basePtr(p.sums), p.sums.offset, nb]);
    }
  } finally { be.free(part); be.free(flag); }
}

// ---- local response normalization ---------------------------------------------------------------

export function lrnSource(dtype: DTypeName, nd: number, dim: number) {
  const T = R.storageType(dtype);
  const dims = [...Array(nd).keys()];
  const decode = dims.slice().reverse().map((d) => `{ const long long c_ = rem % s${d}; rem /= s${d}; xo += c_ * xs${d}; oo += c_ * os${d};${d === dim ? ' c = (int)c_;' : ''} }`).join('\n    ');
  const src = `${NARROW_SRC}
extern "C" __global__ void __launch_bounds__(256) lrn(const ${T}* __restrict__ x, ${T}* __restrict__ out, long long xoff, long long ooff, long long total,
  int lo, int hi, int size, double alpha, double beta, double k${dims.map((d) => `, long long s${d}, long long xs${d}, long long os${d}`).join('')}) {
  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < total; i += (long long)gridDim.x * blockDim.x) {
    long long rem = i, xo = xoff, oo = ooff; int c = 0;
    ${decode}
    const int n = (int)s${dim};
    const int j0 = max(0, c - lo), j1 = min(n - 1, c + hi);
    double s = 0;
    for (int j = j0; j <= j1; j++) { const double v = ${loadD(dtype, 'x', `xo + (long long)(j - c) * xs${dim}`)}; s += v * v; }
    const double y = ${loadD(dtype, 'x', 'xo')} / pow(k + (alpha * s) / size, beta);
    ${storeD(dtype, 'out', 'oo', 'y')}
  }
}`;
  return { src, name: 'lrn', sig: ['ptr', 'ptr', 'i64', 'i64', 'i64', 'i32', 'i32', 'i32', 'f64', 'f64', 'f64', ...dims.flatMap(() => ['i64', 'i64', 'i64'] as ArgType[])] as ArgType[] };
}

export function cudaLocalResponseNorm(p: LrnParams): void {
  const { x, out, dim, size } = p;
  requireDType('local_response_norm', x.dtype, FLOATS);
  const total = numel(x.shape);
  if (total === 0) return;
  const nd = x.shape.length;
  const k = be.kernel(`lrn:${x.dtype}:${nd}:${dim}`, () => lrnSource(x.dtype, nd, dim));
  const st = (r: StridedRef, d: number): number => r.strides[d] ?? 0;
  be.launch(k, be.gridFor(total, 256), 256, [basePtr(x), basePtr(out), x.offset, out.offset, total, Math.floor(size / 2), Math.floor((size - 1) / 2), size,
    p.alpha, p.beta, p.k, ...x.shape.flatMap((s, d) => [s, st(x, d), st(out, d)])]);
}
