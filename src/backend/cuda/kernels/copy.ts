// CUDA kernel 'copy_strided' with the CPU kernel's signature and semantics (contract: src/kernels/copy.ts):
// a driver copy when both sides are contiguous; a widened (up to 16-byte) element copy when rows are
// contiguous on both sides; a shared-memory tiled transpose when each side is contiguous along a
// different dim; an N-d index decomposition otherwise. Copies move raw bits (elements as 1/2/4/8/16-byte
// words), so every dtype, complex included, works.

import { DTYPES } from '../../../dtype/dtypes.js';
import type { StridedRef } from '../../backend.js';
import type { BackendKernels } from '../../../kernels/table.js';
import { coalesce, numelOf } from '../../../tensor/shape.js';
import type { CudaBackend } from '../runtime/backend.js';
import { UnsupportedError } from '../../../errors.js';
import { Params, RAW, basePtr as ptr, decompose, dimArgs, gridLoop, widenFactor, widenStrides } from './util.js';

let be: CudaBackend;
export const kernels = {
  copy_strided: cudaCopyStrided,
} satisfies BackendKernels;

/** Points this family's kernels at the backend (called once, when the backend starts). */
export function bind(backend: CudaBackend): void {
  be = backend;
}

const BLOCK = 256;

export function copySource(isz: number, nd: number, idx32: boolean) {
  const T = RAW[isz]!, I = idx32 ? 'unsigned' : 'unsigned long long';
  const p = new Params().alias(T, 'dst').alias(`const ${T}`, 'src').i64('n', 'd0', 's0_').dims(nd, ['d', 's']);
  const src = `extern "C" __global__ void __launch_bounds__(${BLOCK}) copy_nd(${p.text}) {
  ${gridLoop(I, 'i', 'n')} {
    long long d_off = d0, s_off = s0_;
    ${decompose(nd, ['d', 's'], I, 'i')}
    dst[d_off] = src[s_off];
  }
}`;
  return { src, name: 'copy_nd', sig: p.sig };
}

/** A batched transpose through shared memory: reads along dim A (src-contiguous), writes along dim B (dst-contiguous). */
export function transposeSource(isz: number, nb: number) {
  const T = RAW[isz]!;
  const p = new Params().alias(T, 'dst').alias(`const ${T}`, 'src').i64('d0', 's0_', 'A', 'B', 'dsa', 'dsb', 'ssa', 'ssb', 'nbatch').dims(nb, ['d', 's']);
  const src = `extern "C" __global__ void __launch_bounds__(256) transpose(${p.text}) {
  __shared__ ${T} tile[32][33];
  const int tx = threadIdx.x & 31, ty = threadIdx.x >> 5;
  const long long ta = (A + 31) / 32, tb = (B + 31) / 32, total = nbatch * ta * tb;
  for (long long t = blockIdx.x; t < total; t += gridDim.x) {
    const long long bt = t / (ta * tb), rt = t % (ta * tb), ia = rt % ta, ib = rt / ta;
    (void)bt;
    long long d_off = d0, s_off = s0_;
    ${decompose(nb, ['d', 's'], 'long long', 'bt')}
    const long long a = ia * 32 + tx;
    for (int y = ty; y < 32; y += 8) { const long long b = ib * 32 + y; if (a < A && b < B) tile[y][tx] = src[s_off + a * ssa + b * ssb]; }
    __syncthreads();
    const long long b2 = ib * 32 + tx;
    for (int y = ty; y < 32; y += 8) { const long long a2 = ia * 32 + y; if (a2 < A && b2 < B) dst[d_off + a2 * dsa + b2 * dsb] = tile[tx][y]; }
    __syncthreads();
  }
}`;
  return { src, name: 'transpose', sig: p.sig };
}

interface CopyPlan { shape: number[]; ds: number[]; ss: number[]; doff: number; soff: number; isz: number }

function widen(c: CopyPlan, dptr: bigint, sptr: bigint): CopyPlan {
  const f = widenFactor(c.isz, c.shape, [{ strides: c.ds, offset: c.doff, ptr: dptr }, { strides: c.ss, offset: c.soff, ptr: sptr }], []);
  if (f === 1) return c;
  const nd = c.shape.length;
  return { shape: [...c.shape.slice(0, -1), c.shape[nd - 1]! / f], ds: widenStrides(c.ds, f), ss: widenStrides(c.ss, f), doff: c.doff / f, soff: c.soff / f, isz: c.isz * f };
}

/** dst[i] = src[i] for every index i of their (equal) shape; equal dtypes, raw bits. */
export function cudaCopyStrided(src: StridedRef, dst: StridedRef): void {
  const n = numelOf(dst.shape);
  if (n === 0) return;
  const isz = DTYPES[dst.dtype].itemsize;
  // The op layer casts first (as for the CPU kernel); bits are copied by element size, so sizes must agree.
  if (DTYPES[src.dtype].itemsize !== isz) throw new UnsupportedError('copy_strided', `cuda copy_strided copies one dtype, got ${src.dtype} into ${dst.dtype}`);
  const { shape, strides } = coalesce(dst.shape, [[...dst.strides], [...src.strides]]);
  copyPlanned({ shape, ds: strides[0]!, ss: strides[1]!, doff: dst.offset, soff: src.offset, isz }, ptr(dst), ptr(src));
}

function copyPlanned(c: CopyPlan, dptr: bigint, sptr: bigint): void {
  const n = numelOf(c.shape);
  const nd = c.shape.length;
  if (nd === 0 || (nd === 1 && c.ds[0] === 1 && c.ss[0] === 1)) {
    be.ctx.copyDtoD(dptr + BigInt(c.doff * c.isz), sptr + BigInt(c.soff * c.isz), n * c.isz, be.stream);
    return;
  }
  // Each side contiguous along a different dim (a transpose): tiles through shared memory, both sides coalesced.
  const a = c.ss.findIndex((s, d) => s === 1 && c.ds[d] !== 1 && c.shape[d]! >= 16);
  const b = c.ds.findIndex((s, d) => s === 1 && c.ss[d] !== 1 && c.shape[d]! >= 16);
  if (a >= 0 && b >= 0 && nd - 2 <= 12) {
    const rest = [...Array(nd).keys()].filter((d) => d !== a && d !== b);
    const k = be.kernel(`copy:tr:${c.isz}:${rest.length}`, () => transposeSource(c.isz, rest.length));
    const nbatch = numelOf(rest.map((d) => c.shape[d]!));
    const tiles = nbatch * Math.ceil(c.shape[a]! / 32) * Math.ceil(c.shape[b]! / 32);
    be.launch(k, Math.min(tiles, be.smCount * 16), 256, [dptr, sptr, c.doff, c.soff, c.shape[a]!, c.shape[b]!, c.ds[a]!, c.ds[b]!, c.ss[a]!, c.ss[b]!, nbatch,
      ...dimArgs(rest.map((d) => c.shape[d]!), [rest.map((d) => c.ds[d]!), rest.map((d) => c.ss[d]!)])]);
    return;
  }
  const w = widen(c, dptr, sptr);
  const wn = numelOf(w.shape);
  if (w.shape.length > 19) {
    // Beyond the parameter block: one launch per index of the outermost dim.
    for (let i = 0; i < w.shape[0]!; i++) {
      copyPlanned({ ...w, shape: w.shape.slice(1), ds: w.ds.slice(1), ss: w.ss.slice(1), doff: w.doff + i * w.ds[0]!, soff: w.soff + i * w.ss[0]! }, dptr, sptr);
    }
    return;
  }
  const reach = (st: number[], off: number): number => off + st.reduce((acc, s, d) => acc + Math.abs(s) * (w.shape[d]! - 1), 0);
  const idx32 = wn < 2 ** 32 && reach(w.ds, w.doff) < 2 ** 31 && reach(w.ss, w.soff) < 2 ** 31;
  const k = be.kernel(`copy:nd:${w.isz}:${w.shape.length}:${idx32}`, () => copySource(w.isz, w.shape.length, idx32));
  be.launch(k, be.gridFor(wn, BLOCK), BLOCK, [dptr, sptr, wn, w.doff, w.soff, ...dimArgs(w.shape, [w.ds, w.ss])]);
}
