// Stream compaction on CUDA, shared by the indexing family (nonzero, masked_select, masked_scatter) and
// the sort family (unique's grouping): per-block counts, a one-block exclusive scan of the counts, and
// an ordered emit, so selected positions come out row-major as on the CPU. A helper, not a family: no
// kernel of the table lives here.

import type { CudaBackend, CudaBuffer } from '../runtime/backend.js';
import type { ArgType, KernelArg } from '../runtime/driver.js';
import { Params } from './util.js';

const BLOCK = 256;

/**
 * A data-dependent selection over positions i in [0, n) (row-major): `flag` says whether position i is
 * selected; `emit` runs for selected positions with `pos` = how many selected positions precede it;
 * `all` (optional) runs for every position with `excl` (that count) and `f` (the flag). `pre` computes
 * locals from i by index arithmetic only (it also runs for positions past the end); loads go in `flag`,
 * `emit` and `all`. The kernels process each block's chunk in order, so positions come out row-major.
 */
export interface Compaction { key: string; params: Params; pre: string; flag: string; emit: string; all?: string; helpers?: string }

export function compactionSources(c: Compaction) {
  const cntP = new Params().ptr('long long', 'bcount').i64('n', 'chunk');
  const emitP = new Params().ptr('const long long', 'boff').i64('n', 'chunk');
  cntP.decl.push(...c.params.decl); cntP.sig.push(...c.params.sig);
  emitP.decl.push(...c.params.decl); emitP.sig.push(...c.params.sig);
  const count = `${c.helpers ?? ''}
extern "C" __global__ void __launch_bounds__(${BLOCK}) sel_count(${cntP.text}) {
  __shared__ long long ws[${BLOCK / 32}];
  const long long start = (long long)blockIdx.x * chunk, end = min(start + chunk, n);
  long long cnt = 0;
  for (long long i = start + threadIdx.x; i < end; i += blockDim.x) { ${c.pre} if (${c.flag}) cnt++; }
  #pragma unroll
  for (int o = 16; o > 0; o >>= 1) cnt += __shfl_xor_sync(0xffffffffu, cnt, o);
  if ((threadIdx.x & 31) == 0) ws[threadIdx.x >> 5] = cnt;
  __syncthreads();
  if (threadIdx.x == 0) { long long s = 0; for (int w = 0; w < ${BLOCK / 32}; w++) s += ws[w]; bcount[blockIdx.x] = s; }
}`;
  const emit = `${c.helpers ?? ''}
extern "C" __global__ void __launch_bounds__(${BLOCK}) sel_emit(${emitP.text}) {
  __shared__ int ws[${BLOCK / 32}];
  const long long start = (long long)blockIdx.x * chunk, end = min(start + chunk, n);
  long long base = boff[blockIdx.x];
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  for (long long t0 = start; t0 < end; t0 += blockDim.x) {
    const long long i = t0 + threadIdx.x;
    const bool in_ = i < end;
    ${c.pre}
    const bool f = in_ && (${c.flag});
    const unsigned bal = __ballot_sync(0xffffffffu, f);
    if (lane == 0) ws[warp] = __popc(bal);
    __syncthreads();
    int before = 0, total = 0;
    for (int w = 0; w < ${BLOCK / 32}; w++) { const int s = ws[w]; before += w < warp ? s : 0; total += s; }
    const long long excl = base + before + __popc(bal & ((1u << lane) - 1u));
    if (in_) {
      ${c.all ?? ''}
      if (f) { const long long pos = excl; ${c.emit} }
    }
    base += total;
    __syncthreads();
  }
}`;
  return { count: { src: count, name: 'sel_count', sig: cntP.sig }, emit: { src: emit, name: 'sel_emit', sig: emitP.sig } };
}

/** Exclusive scan of the per-block counts in one block; off[B] gets the total. */
const BLOCK_SCAN = {
  src: `extern "C" __global__ void __launch_bounds__(1024) block_scan(const long long* __restrict__ cnt, long long* __restrict__ off, int B) {
  __shared__ long long ws[32];
  __shared__ long long carry;
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  if (threadIdx.x == 0) carry = 0;
  __syncthreads();
  for (int b0 = 0; b0 < B; b0 += 1024) {
    const int b = b0 + threadIdx.x;
    const long long v = b < B ? cnt[b] : 0;
    long long x = v;
    #pragma unroll
    for (int o = 1; o < 32; o <<= 1) { const long long y = __shfl_up_sync(0xffffffffu, x, o); if (lane >= o) x += y; }
    if (lane == 31) ws[warp] = x;
    __syncthreads();
    if (warp == 0) {
      long long s = ws[lane];
      #pragma unroll
      for (int o = 1; o < 32; o <<= 1) { const long long y = __shfl_up_sync(0xffffffffu, s, o); if (lane >= o) s += y; }
      ws[lane] = s;
    }
    __syncthreads();
    const long long incl = x + (warp > 0 ? ws[warp - 1] : 0);
    if (b < B) off[b] = carry + incl - v;
    __syncthreads();
    if (threadIdx.x == 1023) carry += incl;
    __syncthreads();
  }
  if (threadIdx.x == 0) off[B] = carry;
}`,
  name: 'block_scan', sig: ['ptr', 'ptr', 'i32'] as ArgType[],
};
export const blockScanSource = (): typeof BLOCK_SCAN => BLOCK_SCAN;

/**
 * Runs a compaction over n positions with the spec's extra arguments; returns the device buffer whose
 * element [B] (returned index) holds the total count (the caller frees it).
 */
export function runCompaction(be: CudaBackend, c: Compaction, n: number, args: KernelArg[]): { offsets: CudaBuffer; totalAt: number } {
  const B = Math.max(1, Math.min(Math.ceil(n / BLOCK), be.smCount * 16));
  const chunk = Math.ceil(n / B / BLOCK) * BLOCK;
  const blocks = Math.max(1, Math.ceil(n / chunk));
  const srcs = (): ReturnType<typeof compactionSources> => compactionSources(c);
  const kc = be.kernel(`sel:count:${c.key}`, () => srcs().count);
  const ke = be.kernel(`sel:emit:${c.key}`, () => srcs().emit);
  const ks = be.kernel('sel:scan', blockScanSource);
  const counts = be.alloc('int64', blocks), offsets = be.alloc('int64', blocks + 1);
  be.launch(kc, blocks, BLOCK, [counts.ptr, n, chunk, ...args]);
  be.launch(ks, 1, 1024, [counts.ptr, offsets.ptr, blocks]);
  be.launch(ke, blocks, BLOCK, [offsets.ptr, n, chunk, ...args]);
  be.free(counts);
  return { offsets, totalAt: blocks };
}
