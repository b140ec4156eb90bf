// CUDA kernel 'fft' with the contract in src/kernels/fft.ts: one 1-d
// transform per row of a contiguous [rows, m] operand (c2c, r2c, c2r; trimmed or zero-padded to n
// points; `sign` +1 through conj(F(conj x)); `scale` applied last), computed in float64 and rounded once.
//
// Algorithm: Stockham autosort passes (radix 4, 2, then odd factors up to 61 with a generic butterfly),
// with twiddles from a per-length table computed on the host as the CPU does (exact symmetries), so
// the error stays at a few ulps times log n. Lengths with a larger prime factor use Bluestein's chirp-z
// through a power-of-two transform of M >= 2n - 1 points (chirp and the chirp's spectrum cached per n).
// A row fits in shared memory up to a few thousand points: one kernel per launch loads, runs every
// pass (both transforms and the pointwise product for Bluestein) and stores, several short rows per
// block. Longer rows run pass by pass through global scratch.

import { DTYPES, type DTypeName } from '../../../dtype/dtypes.js';
import type { StridedRef } from '../../backend.js';
import type { BackendKernels } from '../../../kernels/table.js';
import { type CudaBackend, type CudaBuffer } from '../runtime/backend.js';
import type { ArgType } from '../runtime/driver.js';
import { basePtr, requireDType } from './util.js';
import { FftPlans } from '../../fft_host.js';
import type { FftKind } from '../../../kernels/fft.js';
import { nextPow2 } from '../../backend.js';

let be: CudaBackend;
export const kernels = {
  fft: cudaFft,
} satisfies BackendKernels;

/** Points this family's kernels at the backend (called once, when the backend starts). */
export function bind(backend: CudaBackend): void {
  be = backend;
}

// ---- host-side plans ---------------------------------------------------------------------------------

/** Twiddles in float64 (as the CPU's) with the radices; Bluestein's chirp and spectrum in float64. */
const plans = new FftPlans<{ tw: CudaBuffer; fac: CudaBuffer }, { chirp: CudaBuffer; spectrum: CudaBuffer }>({
  twiddles: (_L, factors, table) => ({
    tw: be.upload('float64', table) as CudaBuffer,
    fac: be.upload('int32', Int32Array.from(factors.length ? factors : [1])) as CudaBuffer,
  }),
  releaseTwiddles: (t) => { be.free(t.tw); be.free(t.fac); },
  chirp: (chirp, spectrum) => ({ chirp: be.upload('float64', chirp) as CudaBuffer, spectrum: be.upload('float64', spectrum) as CudaBuffer }),
  releaseChirp: (c) => { be.free(c.chirp); be.free(c.spectrum); },
});

// ---- sources -----------------------------------------------------------------------------------------

const scalarOf = (d: DTypeName): 'float' | 'double' => (d === 'float64' || d === 'complex128' ? 'double' : 'float');
const isComplex = (d: DTypeName): boolean => DTYPES[d].kind === 'complex';

/** Butterflies, input loading and output storing shared by the shared-memory and global kernels. */
function commonSource(inD: DTypeName, outD: DTypeName, kind: FftKind, blue: boolean): string {
  const IT = scalarOf(inD), OT = scalarOf(outD);
  const src = isComplex(inD)
    ? 'nbx_c2((double)x[2 * (base + j)], (double)x[2 * (base + j) + 1])'
    : 'nbx_c2((double)x[base + j], 0.0)';
  const load = kind === 'c2r'
    ? `const int half = n / 2 + 1; double2 v; if (k < half) v = fft_src(x, base, k, take); else { v = fft_src(x, base, n - k, take); v.y = -v.y; }`
    : 'double2 v = fft_src(x, base, k, take);';
  const store = isComplex(outD)
    ? `out[2 * o] = (${OT})(v.x * scale); out[2 * o + 1] = (${OT})(v.y * (inv ? -scale : scale));`
    : `out[o] = (${OT})(v.x * scale);`;
  return String.raw`
__device__ __forceinline__ double2 nbx_c2(double x, double y) { double2 r; r.x = x; r.y = y; return r; }
__device__ __forceinline__ double2 cmul(double2 a, double2 b) { return nbx_c2(a.x * b.x - a.y * b.y, a.x * b.y + a.y * b.x); }
__device__ __forceinline__ double2 cadd(double2 a, double2 b) { return nbx_c2(a.x + b.x, a.y + b.y); }
__device__ __forceinline__ double2 csub(double2 a, double2 b) { return nbx_c2(a.x - b.x, a.y - b.y); }

// One Stockham butterfly of radix p: reads a[j + r·L/p], writes b[(j / Ns)·Ns·p + j % Ns + q·Ns].
__device__ __forceinline__ void fft_bfly(const double2* __restrict__ a, double2* __restrict__ b, const double2* __restrict__ tw, int L, int p, int Ns, int j) {
  const int Lp = L / p, st = L / (Ns * p), k = j % Ns, ob = (j / Ns) * Ns * p + k;
  if (p == 2) {
    const double2 v0 = a[j], v1 = cmul(a[j + Lp], tw[k * st]);
    b[ob] = cadd(v0, v1); b[ob + Ns] = csub(v0, v1);
  } else if (p == 4) {
    const double2 v0 = a[j], v1 = cmul(a[j + Lp], tw[k * st]), v2 = cmul(a[j + 2 * Lp], tw[2 * k * st]), v3 = cmul(a[j + 3 * Lp], tw[3 * k * st]);
    const double2 s0 = cadd(v0, v2), s1 = csub(v0, v2), s2 = cadd(v1, v3), s3 = csub(v1, v3);
    b[ob] = cadd(s0, s2); b[ob + 2 * Ns] = csub(s0, s2);
    b[ob + Ns] = nbx_c2(s1.x + s3.y, s1.y - s3.x); b[ob + 3 * Ns] = nbx_c2(s1.x - s3.y, s1.y + s3.x);
  } else {
    for (int q = 0; q < p; q++) {
      double2 acc = nbx_c2(0.0, 0.0);
      for (int r = 0; r < p; r++) acc = cadd(acc, cmul(cmul(a[j + r * Lp], tw[r * k * st]), tw[((r * q) % p) * Lp]));
      b[ob + q * Ns] = acc;
    }
  }
}

__device__ __forceinline__ double2 fft_src(const ${IT}* __restrict__ x, long long base, int j, int take) {
  return j < take ? ${src} : nbx_c2(0.0, 0.0);
}

// Point k of the sequence transformed (Bluestein: times the chirp, zero beyond n).
__device__ __forceinline__ double2 fft_in(const ${IT}* __restrict__ x, const double2* __restrict__ chirp, long long row, int k,
  long long xoff, int m, int n, int take, int inv) {
  ${blue ? 'if (k >= n) return nbx_c2(0.0, 0.0);' : ''}
  const long long base = xoff + row * m;
  ${load}
  if (inv) v.y = -v.y;
  ${blue ? 'v = cmul(v, chirp[k]);' : ''}
  return v;
}

// Output point j from the transform's value v (Bluestein: conjugate, divide by M, times the chirp).
__device__ __forceinline__ void fft_out(${OT}* __restrict__ out, const double2* __restrict__ chirp, long long row, int j, double2 v,
  long long ooff, int outLen, double scale, int inv, int M) {
  ${blue ? 'v = cmul(nbx_c2(v.x / M, -v.y / M), chirp[j]);' : ''}
  const long long o = ooff + row * outLen + j;
  ${store}
}
`;
}

const KERNEL_ARGS = (IT: string, OT: string): string => `const ${IT}* __restrict__ x, ${OT}* __restrict__ out, const double2* __restrict__ tw, const int* __restrict__ fac,
  const double2* __restrict__ chirp, const double2* __restrict__ spec, long long rows, long long xoff, long long ooff,
  int nf, int n, int m, int L, int take, int outLen, double scale, int inv`;
const KERNEL_SIG: ArgType[] = ['ptr', 'ptr', 'ptr', 'ptr', 'ptr', 'ptr', 'i64', 'i64', 'i64', 'i32', 'i32', 'i32', 'i32', 'i32', 'i32', 'f64', 'i32'];

/** Whole rows in shared memory: `rpb` rows of L points per block, `tpr` threads per row, two buffers each. */
export function smemSource(inD: DTypeName, outD: DTypeName, kind: FftKind, blue: boolean) {
  const IT = scalarOf(inD), OT = scalarOf(outD);
  const passes = `for (int f = 0; f < nf; f++) {
      const int p = fac[f];
      if (act) for (int j = t; j < L / p; j += tpr) fft_bfly(a, b, tw, L, p, Ns, j);
      __syncthreads();
      double2* s_ = a; a = b; b = s_; Ns *= p;
    }`;
  const src = `${commonSource(inD, outD, kind, blue)}
extern "C" __global__ void fft_smem(${KERNEL_ARGS(IT, OT)}, int tpr, int rpb) {
  extern __shared__ double2 sm[];
  const int g = threadIdx.x / tpr, t = threadIdx.x % tpr;
  for (long long r0 = (long long)blockIdx.x * rpb; r0 < rows; r0 += (long long)gridDim.x * rpb) {
    const long long row = r0 + g;
    const bool act = row < rows;
    double2* a = sm + (long long)g * 2 * L;
    double2* b = a + L;
    if (act) for (int k = t; k < L; k += tpr) a[k] = fft_in(x, chirp, row, k, xoff, m, n, take, inv);
    __syncthreads();
    int Ns = 1;
    ${passes}
    ${blue ? `if (act) for (int k = t; k < L; k += tpr) { const double2 v = cmul(a[k], spec[k]); a[k] = nbx_c2(v.x, -v.y); }
    __syncthreads();
    Ns = 1;
    ${passes}` : ''}
    if (act) for (int j = t; j < outLen; j += tpr) fft_out(out, chirp, row, j, a[j], ooff, outLen, scale, inv, L);
    __syncthreads();
  }
}`;
  return { src, name: 'fft_smem', sig: [...KERNEL_SIG, 'i32', 'i32'] as ArgType[] };
}

/** Long rows: stage = 0 load into scratch, 1 one radix pass, 2 Bluestein's pointwise product, 3 store. */
export function globalSource(inD: DTypeName, outD: DTypeName, kind: FftKind, blue: boolean) {
  const IT = scalarOf(inD), OT = scalarOf(outD);
  const src = `${commonSource(inD, outD, kind, blue)}
extern "C" __global__ void fft_global(${KERNEL_ARGS(IT, OT)}, const double2* __restrict__ bin, double2* __restrict__ bout, int stage, int p, int Ns) {
  const long long per = stage == 1 ? L / p : stage == 3 ? outLen : L;
  const long long total = rows * per;
  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < total; i += (long long)gridDim.x * blockDim.x) {
    const long long row = i / per; const int j = (int)(i % per);
    if (stage == 0) bout[i] = fft_in(x, chirp, row, j, xoff, m, n, take, inv);
    else if (stage == 1) fft_bfly(bin + row * L, bout + row * L, tw, L, p, Ns, j);
    else if (stage == 2) { const double2 v = cmul(bin[i], spec[j]); bout[i] = nbx_c2(v.x, -v.y); }
    else fft_out(out, chirp, row, j, bin[row * L + j], ooff, outLen, scale, inv, L);
  }
}`;
  return { src, name: 'fft_global', sig: [...KERNEL_SIG, 'ptr', 'ptr', 'i32', 'i32', 'i32'] as ArgType[] };
}

// ---- launcher ----------------------------------------------------------------------------------------


export function cudaFft(input: StridedRef, rows: number, m: number, out: StridedRef, n: number, kind: FftKind, sign: number, scale: number): void {
  requireDType('fft', input.dtype, ['float32', 'float64', 'complex64', 'complex128']);
  requireDType('fft', out.dtype, ['float32', 'float64', 'complex64', 'complex128']);
  if (rows === 0 || n === 0) return;
  const plan = plans.plan(n, m, kind);
  const { blue, L, take, outLen, chirp: ch } = plan;
  const inv = sign > 0 ? 1 : 0;
  const common = [basePtr(input), basePtr(out), plan.tw.tw.ptr, plan.tw.fac.ptr, ch?.chirp.ptr ?? 0n, ch?.spectrum.ptr ?? 0n, rows, input.offset, out.offset,
    plan.factors.length, n, m, L, take, outLen, scale, inv];
  const tag = `${input.dtype}:${out.dtype}:${kind}:${blue}`;
  const smemMax = be.ctx.info.maxSharedMemPerBlockOptin || 48 * 1024;
  const rowBytes = 32 * L; // two double2 buffers
  if (rowBytes <= smemMax) {
    const tpr = Math.min(256, nextPow2(Math.ceil(L / 4)));
    const rpb = Math.max(1, Math.min(256 / tpr, rows, Math.floor(smemMax / rowBytes)));
    const bytes = rpb * rowBytes;
    const k = be.kernel(`fft_smem:${tag}`, () => smemSource(input.dtype, out.dtype, kind, blue));
    if (bytes > 48 * 1024) k.setMaxDynamicSharedMemory(smemMax);
    be.launch(k, Math.min(Math.ceil(rows / rpb), be.smCount * 16), tpr * rpb, [...common, tpr, rpb], bytes);
    return;
  }
  // Pass by pass through two scratch buffers of rows × L points.
  const k = be.kernel(`fft_global:${tag}`, () => globalSource(input.dtype, out.dtype, kind, blue));
  const bufs = [be.alloc('complex128', rows * L) as CudaBuffer, be.alloc('complex128', rows * L) as CudaBuffer];
  try {
    let cur = 0;
    const stage = (s: number, per: number, p = 1, Ns = 1): void => {
      be.launch(k, be.gridFor(rows * per, 256), 256, [...common, bufs[cur]!.ptr, bufs[1 - cur]!.ptr, s, p, Ns]);
    };
    const passes = (): void => {
      let Ns = 1;
      for (const p of plan.factors) { stage(1, L / p, p, Ns); cur = 1 - cur; Ns *= p; }
    };
    stage(0, L); cur = 1; // loaded into bufs[1]
    passes();
    if (blue) { stage(2, L); cur = 1 - cur; passes(); }
    stage(3, outLen);
  } finally { for (const b of bufs) be.free(b); }
}
