// The system BLAS (OpenBLAS, reference CBLAS, or Apple Accelerate) through koffi, for the CPU gemm.
// Looked up once, on first use. When none is found, or NBX_BLAS=off, the CPU gemm uses its built-in
// kernel (WebAssembly SIMD, see ./linalg.ts); that is announced once on stderr, and `blasInfo()` (shown
// by `nbx info`) says which library is used or why none is.

import koffi from 'koffi';

// CBLAS enums (cblas.h).
const CblasRowMajor = 101, CblasNoTrans = 111, CblasTrans = 112;

type GemmFn = (order: number, ta: number, tb: number, m: number, n: number, k: number, alpha: number,
  a: Float32Array | Float64Array, lda: number, b: Float32Array | Float64Array, ldb: number, beta: number,
  c: Float32Array | Float64Array, ldc: number) => void;

type GemvFn = (order: number, trans: number, m: number, n: number, alpha: number, a: Float32Array | Float64Array, lda: number,
  x: Float32Array | Float64Array, incx: number, beta: number, y: Float32Array | Float64Array, incy: number) => void;

export interface Blas {
  /** The library path koffi opened, and what it says about itself where it can. */
  readonly name: string;
  readonly sgemm: GemmFn;
  readonly dgemm: GemmFn;
  /** Matrix-vector products (null where the library lacks them): gemm packs its operands, gemv streams the matrix once. */
  readonly sgemv: GemvFn | null;
  readonly dgemv: GemvFn | null;
  /** OpenBLAS's thread count setter (null for other libraries), and the count it started with. */
  readonly setThreads: ((n: number) => void) | null;
  readonly maxThreads: number;
}

const CANDIDATES = process.platform === 'darwin'
  ? ['/System/Library/Frameworks/Accelerate.framework/Accelerate', 'libopenblas.dylib', '/opt/homebrew/opt/openblas/lib/libopenblas.dylib', '/usr/local/opt/openblas/lib/libopenblas.dylib']
  : process.platform === 'win32'
    ? ['libopenblas.dll', 'openblas.dll']
    : ['libopenblas.so.0', 'libopenblas.so', 'libblas.so.3', 'libcblas.so.3'];

let state: { blas: Blas | null; why: string } | undefined;

function tryLoad(): { blas: Blas | null; why: string } {
  if ((process.env.NBX_BLAS ?? '').toLowerCase() === 'off') return { blas: null, why: 'disabled by NBX_BLAS=off' };
  const failures: string[] = [];
  for (const path of CANDIDATES) {
    let lib: ReturnType<typeof koffi.load>;
    try { lib = koffi.load(path); } catch { failures.push(`${path} (not found)`); continue; }
    try {
      // `void *` for the matrices: koffi hands the typed array's memory to the callee, no copy.
      const proto = (name: string, t: string): string =>
        `void ${name}(int order, int transA, int transB, int m, int n, int k, ${t} alpha, void *a, int lda, void *b, int ldb, ${t} beta, void *c, int ldc)`;
      const sgemm = lib.func(proto('cblas_sgemm', 'float')) as GemmFn;
      const dgemm = lib.func(proto('cblas_dgemm', 'double')) as GemmFn;
      const gemv = (name: string, t: string): GemvFn | null => {
        try { return lib.func(`void ${name}(int order, int trans, int m, int n, ${t} alpha, void *a, int lda, void *x, int incx, ${t} beta, void *y, int incy)`) as GemvFn; } catch { return null; }
      };
      const sgemv = gemv('cblas_sgemv', 'float'), dgemv = gemv('cblas_dgemv', 'double');
      let name = path, setThreads: ((n: number) => void) | null = null, maxThreads = 1;
      try {
        const cfg = lib.func('const char *openblas_get_config()') as () => string;
        const core = lib.func('const char *openblas_get_corename()') as () => string;
        const threads = lib.func('int openblas_get_num_threads()') as () => number;
        maxThreads = threads();
        name = `${path} (${cfg().trim()}; core ${core()}; ${maxThreads} threads, one below ${SINGLE_THREAD_GEMM_WORK} multiply-adds)`;
        setThreads = lib.func('void openblas_set_num_threads(int n)') as (n: number) => void;
      } catch { /* not OpenBLAS: the path is the name */ }
      return { blas: { name, sgemm, dgemm, sgemv, dgemv, setThreads, maxThreads }, why: '' };
    } catch (e) {
      failures.push(`${path} (no cblas_sgemm/cblas_dgemm: ${(e as Error).message})`);
    }
  }
  return { blas: null, why: `no BLAS library found; looked for ${failures.join(', ')}` };
}

let announced = false;
let suspended = false;

/** Tests and benchmarks: run the built-in kernels even though a BLAS was found (returns the previous setting). */
export function setBlasEnabled(on: boolean): boolean {
  const was = !suspended;
  suspended = !on;
  return was;
}

/** The loaded BLAS, or null (the built-in kernels are used then; `nbx info` says why). */
export function getBlas(): Blas | null {
  if (suspended) return null;
  if (!state) state = tryLoad();
  // Said by `nbx info`; on stderr only when asked (NBX_DEBUG=1), not in every process that multiplies.
  if (!state.blas && !announced && process.env.NBX_DEBUG === '1') {
    announced = true;
    process.stderr.write(`nbxtensor: ${state.why}; CPU matrix products use the built-in kernel (WebAssembly SIMD, JavaScript for tiny products)\n`);
  }
  return state.blas;
}

/** One line for `nbx info`: which library, or why none. */
export function blasInfo(): string {
  if (!state) state = tryLoad();
  return state.blas ? state.blas.name : `none (${state.why}); using the built-in gemm kernel (WebAssembly SIMD on worker threads)`;
}

/** Products with at most this many rows or columns go through gemv. */
const GEMV_MAX = 4;

/**
 * Products of at most this many multiply-adds run on the calling thread alone. OpenBLAS splits any
 * gemm over 2^18 and any gemv over ~2^13 multiply-adds across its threads, which then spin while they
 * wait for work; for products this small waking and joining them costs about what it saves on an idle
 * machine, and on a busy one (threads descheduled while the caller waits) it made a 256×256 gemv of
 * a decode step 40x slower than the 10 µs it takes on one thread. Larger products use every thread.
 */
export const SINGLE_THREAD_GEMM_WORK = 1 << 21;
/** gemv streams its matrix once; it gains little from threads until the matrix leaves the caches. */
const SINGLE_THREAD_GEMV_WORK = 1 << 20;

/** The thread count last set in OpenBLAS (it is process-wide), so that it is set only when it changes. */
let threadsSet = 0;
function useThreads(blas: Blas, single: boolean): void {
  if (!blas.setThreads) return;
  const n = single ? 1 : blas.maxThreads;
  if (n !== threadsSet) { blas.setThreads(n); threadsSet = n; }
}

/**
 * Row-major C = alpha·op(A)·op(B) + beta·C through the BLAS, element offsets into each array.
 * Leading dimensions must satisfy BLAS's rules (the caller checks); subarray() keeps it copy-free.
 */
export function blasGemm(blas: Blas, transA: boolean, transB: boolean, m: number, n: number, k: number, alpha: number,
  A: Float32Array | Float64Array, offA: number, lda: number, B: Float32Array | Float64Array, offB: number, ldb: number,
  beta: number, C: Float32Array | Float64Array, offC: number, ldc: number): void {
  const f32 = C instanceof Float32Array;
  const gemv = f32 ? blas.sgemv : blas.dgemv;
  const at = <T extends Float32Array | Float64Array>(x: T, off: number): T => (off ? x.subarray(off) as T : x);
  const tr = (t: boolean): number => (t ? CblasTrans : CblasNoTrans);
  // Few rows (or columns): one gemv per row streams B once each, where OpenBLAS's gemm would pack all
  // of B first (for a 1×4096 @ 4096×4096 product, 10x slower here).
  if (gemv && Math.min(m, n) <= GEMV_MAX) {
    useThreads(blas, Math.max(m, n) * k <= SINGLE_THREAD_GEMV_WORK);
    const rows = m <= n;
    // beta = 0 must not read C (NaN there would survive a scaling by 0).
    if (beta === 0) for (let i = 0; i < m; i++) C.fill(0, offC + i * ldc, offC + i * ldc + n);
    if (rows) {
      // C row i (1×n) = alpha·op(B)ᵀ·(row i of op(A)) + beta·C: op(B) is B stored k×n (ldb) or n×k.
      for (let i = 0; i < m; i++) {
        gemv(CblasRowMajor, tr(!transB), transB ? n : k, transB ? k : n, alpha, at(B, offB), ldb,
          at(A, offA + (transA ? i : i * lda)), transA ? lda : 1, beta, at(C, offC + i * ldc), 1);
      }
    } else {
      // C column j (m×1) = alpha·op(A)·(column j of op(B)) + beta·C.
      for (let j = 0; j < n; j++) {
        gemv(CblasRowMajor, tr(transA), transA ? k : m, transA ? m : k, alpha, at(A, offA), lda,
          at(B, offB + (transB ? j * ldb : j)), transB ? 1 : ldb, beta, at(C, offC + j), ldc);
      }
    }
    return;
  }
  useThreads(blas, m * n * k <= SINGLE_THREAD_GEMM_WORK);
  (f32 ? blas.sgemm : blas.dgemm)(CblasRowMajor, tr(transA), tr(transB), m, n, k, alpha, at(A, offA), lda, at(B, offB), ldb, beta, at(C, offC), ldc);
}
