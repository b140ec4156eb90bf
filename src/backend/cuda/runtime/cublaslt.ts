// cuBLASLt bindings and a row-major GEMM.
//
// Row-major ↔ column-major: cuBLASLt is column-major. A row-major matrix X (r × c, row stride
// ld) has exactly the memory of the column-major matrix Xᵀ (c × r, leading dimension ld). We
// want, row-major,  C = op(A) · op(B)  (m × n). Transposing both sides, Cᵀ = op(B)ᵀ · op(A)ᵀ,
// and Cᵀ (n × m, ld = ldc) is precisely C's memory seen column-major. So we ask cuBLASLt for
// the column-major product  D' = op'(B') · op'(A')  with m' = n, n' = m, the same k, where the
// first operand is our B and the second our A, each keeping its own transpose flag:
//   * B not transposed: memory is Bᵀ (n × k, ld = ldb) column-major, used as is: TRANSA = N;
//     B transposed (stored n × k row-major): memory is k × n column-major: TRANSA = T.
//   * A likewise with TRANSB, layouts k × m (N) or m × k (T) with ld = lda.
// A bias epilogue adds a vector of length rows(D') = n broadcast over the m columns of D',
// i.e. bias[j] is added to C[i][j] for every row i: exactly Linear's  y = x Wᵀ + b.
//
// Algorithm choice (per plan, i.e. per exact shape/layout/alignment, once per process): cuBLASLt's
// heuristic is asked for its top GEMM_CANDIDATES algorithms; its first pick is not always the fastest
// and varies across processes (BENCHMARKS.md); large products also get the first
// four again with CTA swizzling on (GEMM_SWIZZLE_MIN_MACS). With NBX_AUTOTUNE=off the first one runs;
// otherwise the autotune cache decides (user cache, then src/autotune/shipped), and on a miss in mode
// full each candidate is timed with CUDA events on the call's own operands (warmup 2, median of 5
// samples, a sample being several calls back to back: gemmTimingCalls) and the fastest is stored:
// kernel 'cuda.gemm.cublaslt', shape bucket m×n×k(×batch), "dtype" = dtype.layouts[.bias][.tf32].lt<cuBLASLt version>, device key = card. The stored config
// is the 64-byte cublasLtMatmulAlgo_t (hex; valid for the same cuBLASLt version and card, hence both
// in the key) plus its readable id/tile/stages/splitK/reduction/swizzle/custom attributes. A cached
// algorithm from another size of the bucket is used only if cublasLtMatmulAlgoCheck accepts it here.
// Sweeps need beta = 0 (C is not an input, so timing runs may overwrite it), a Stream, and at least
// GEMM_TUNE_MIN_MACS multiply-adds; other plans consult the caches only.
// Bits: algorithms differ in summation order (tile K order, and split-K (splitK > 1) with its
// reduction scheme adds partial sums in another order), so a different choice can change results in
// the last bits; one choice gives the same bits run to run (cuBLAS's reproducibility rule: same
// version, architecture and SM count). The choice itself can differ between machines whose caches
// differ: NBX_AUTOTUNE=off (heuristic #0) or a shipped cache pins it.
//
// Enum values below come from cublasLt.h / cublas_api.h / library_types.h of CUDA 12 and 13
// (the attribute enums carry explicit values that have not changed since CUDA 11).

import { DeviceError, UnsupportedError, ValueError } from '../../../errors.js';
import { CudaContext, Stream, contextPoisoned, type CudaEvent } from './driver.js';
import { loadCudaLibrary } from './libs.js';
import { autotuneMode, bucketSize, defaultCache, deviceKey, tuneSync, type Config, type TuneKey } from '../../../autotune/index.js';

// cudaDataType_t (library_types.h)
export const CUDA_R_32F = 0;
export const CUDA_R_16F = 2;
export const CUDA_R_16BF = 14;

// cublasComputeType_t (cublas_api.h)
export const CUBLAS_COMPUTE_32F = 68;
export const CUBLAS_COMPUTE_32F_FAST_TF32 = 77;

// cublasOperation_t
export const CUBLAS_OP_N = 0;
export const CUBLAS_OP_T = 1;

// cublasLtMatmulDescAttributes_t
export const CUBLASLT_MATMUL_DESC_COMPUTE_TYPE = 0; // int32
export const CUBLASLT_MATMUL_DESC_SCALE_TYPE = 1; // int32
export const CUBLASLT_MATMUL_DESC_POINTER_MODE = 2; // int32
export const CUBLASLT_MATMUL_DESC_TRANSA = 3; // int32 (cublasOperation_t)
export const CUBLASLT_MATMUL_DESC_TRANSB = 4; // int32
export const CUBLASLT_MATMUL_DESC_EPILOGUE = 7; // uint32 (cublasLtEpilogue_t)
export const CUBLASLT_MATMUL_DESC_BIAS_POINTER = 8; // void*
export const CUBLASLT_MATMUL_DESC_BIAS_BATCH_STRIDE = 10; // int64

// cublasLtEpilogue_t
export const CUBLASLT_EPILOGUE_DEFAULT = 1;
export const CUBLASLT_EPILOGUE_RELU = 2;
export const CUBLASLT_EPILOGUE_BIAS = 4;
export const CUBLASLT_EPILOGUE_RELU_BIAS = 6;
export const CUBLASLT_EPILOGUE_GELU = 32;
export const CUBLASLT_EPILOGUE_GELU_BIAS = 36;

// cublasLtMatrixLayoutAttribute_t
export const CUBLASLT_MATRIX_LAYOUT_TYPE = 0; // uint32
export const CUBLASLT_MATRIX_LAYOUT_ORDER = 1; // int32 (cublasLtOrder_t: COL = 0, ROW = 1)
export const CUBLASLT_MATRIX_LAYOUT_ROWS = 2; // uint64
export const CUBLASLT_MATRIX_LAYOUT_COLS = 3; // uint64
export const CUBLASLT_MATRIX_LAYOUT_LD = 4; // int64
export const CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT = 5; // int32
export const CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET = 6; // int64
export const CUBLASLT_ORDER_COL = 0;
export const CUBLASLT_ORDER_ROW = 1;

// cublasLtMatmulPreferenceAttributes_t
export const CUBLASLT_MATMUL_PREF_SEARCH_MODE = 0; // uint32
export const CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES = 1; // uint64
export const CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES = 5; // uint32, default 256
export const CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES = 6;
export const CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES = 7;
export const CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES = 8;

// cublasLtMatmulAlgoConfigAttributes_t (read back to describe a chosen algorithm; all uint32 but ID int32)
export const CUBLASLT_ALGO_CONFIG_ID = 0;
export const CUBLASLT_ALGO_CONFIG_TILE_ID = 1;
export const CUBLASLT_ALGO_CONFIG_SPLITK_NUM = 2;
export const CUBLASLT_ALGO_CONFIG_REDUCTION_SCHEME = 3;
export const CUBLASLT_ALGO_CONFIG_CTA_SWIZZLING = 4;
export const CUBLASLT_ALGO_CONFIG_CUSTOM_OPTION = 5;
export const CUBLASLT_ALGO_CONFIG_STAGES_ID = 6;

/** sizeof(cublasLtMatmulHeuristicResult_t): algo (uint64_t[8]) + size_t workspaceSize + int state + float wavesCount + int reserved[4]. */
export const HEURISTIC_RESULT_BYTES = 96;
const HEUR_WORKSPACE_OFFSET = 64;
const HEUR_STATE_OFFSET = 72;
const HEUR_WAVES_OFFSET = 76;
const ALGO_BYTES = 64;

export const CUBLAS_STATUS_NAMES: Record<number, string> = {
  0: 'CUBLAS_STATUS_SUCCESS',
  1: 'CUBLAS_STATUS_NOT_INITIALIZED',
  3: 'CUBLAS_STATUS_ALLOC_FAILED',
  7: 'CUBLAS_STATUS_INVALID_VALUE',
  8: 'CUBLAS_STATUS_ARCH_MISMATCH',
  11: 'CUBLAS_STATUS_MAPPING_ERROR',
  13: 'CUBLAS_STATUS_EXECUTION_FAILED',
  14: 'CUBLAS_STATUS_INTERNAL_ERROR',
  15: 'CUBLAS_STATUS_NOT_SUPPORTED',
  16: 'CUBLAS_STATUS_LICENSE_ERROR',
};

export type GemmDType = 'float32' | 'float16' | 'bfloat16' | 'float64';
/** cudaDataType CUDA_R_64F and cublasComputeType_t CUBLAS_COMPUTE_64F (library_types.h, cublas_api.h). */
export const CUDA_R_64F = 1;
export const CUBLAS_COMPUTE_64F = 70;

const DTYPE_INFO: Record<GemmDType, { cuda: number; bytes: number }> = {
  float32: { cuda: CUDA_R_32F, bytes: 4 },
  float16: { cuda: CUDA_R_16F, bytes: 2 },
  bfloat16: { cuda: CUDA_R_16BF, bytes: 2 },
  float64: { cuda: CUDA_R_64F, bytes: 8 },
};

/** cuBLASLt (or cuBLAS: `library`) status failure. */
export class CublasError extends DeviceError {
  readonly status: number;
  constructor(call: string, status: number, statusName: string, detail = '', library = 'cublasLt') {
    super(`${library}.${call}`, `${call} failed: ${statusName} (${status})${detail ? `: ${detail}` : ''}`);
    this.status = status;
  }
}

export interface GemmWorkspace {
  ptr: bigint;
  bytes: number;
}

/**
 * Row-major GEMM:  C = alpha · op(A) · op(B) + beta · C  (+ bias broadcast over rows), batched
 * with strides. op(A) is m × k, op(B) is k × n, C is m × n. Leading dimensions are row strides
 * in elements (defaults: dense); strides are in elements between consecutive batch matrices
 * (defaults: dense; 0 broadcasts one matrix to every batch).
 */
export interface GemmArgs {
  transA?: boolean;
  transB?: boolean;
  m: number;
  n: number;
  k: number;
  A: bigint;
  lda?: number;
  strideA?: number;
  B: bigint;
  ldb?: number;
  strideB?: number;
  /** Output (and input when beta != 0). */
  C: bigint;
  ldc?: number;
  strideC?: number;
  /** Separate output with C's layout; default C. */
  D?: bigint;
  batch?: number;
  dtype: GemmDType;
  alpha?: number;
  beta?: number;
  /** Device vector of n elements (dtype of C) added to every row of the result. */
  bias?: bigint;
  /** float32 only: allow TF32 tensor cores (CUBLAS_COMPUTE_32F_FAST_TF32) instead of exact fp32. */
  allowTF32?: boolean;
  /** CUDA stream (Stream or raw CUstream); default: the NULL stream. */
  stream?: Stream | bigint | null;
  /** Scratch memory for cuBLASLt (32 MiB recommended on Hopper). Default: the handle's default workspace, if set. */
  workspace?: GemmWorkspace;
}

interface LtFns {
  cublasLtCreate(out: BigUint64Array): number;
  cublasLtDestroy(h: bigint): number;
  cublasLtGetVersion(): number | bigint;
  cublasLtGetStatusName(s: number): string;
  cublasLtGetStatusString(s: number): string;
  cublasLtMatmulDescCreate(out: BigUint64Array, compute: number, scale: number): number;
  cublasLtMatmulDescDestroy(d: bigint): number;
  cublasLtMatmulDescSetAttribute(d: bigint, attr: number, buf: ArrayBufferView, size: number): number;
  cublasLtMatrixLayoutCreate(out: BigUint64Array, type: number, rows: number, cols: number, ld: number): number;
  cublasLtMatrixLayoutDestroy(l: bigint): number;
  cublasLtMatrixLayoutSetAttribute(l: bigint, attr: number, buf: ArrayBufferView, size: number): number;
  cublasLtMatmulPreferenceCreate(out: BigUint64Array): number;
  cublasLtMatmulPreferenceDestroy(p: bigint): number;
  cublasLtMatmulPreferenceSetAttribute(p: bigint, attr: number, buf: ArrayBufferView, size: number): number;
  cublasLtMatmulAlgoGetHeuristic(
    h: bigint,
    desc: bigint,
    a: bigint,
    b: bigint,
    c: bigint,
    d: bigint,
    pref: bigint,
    requested: number,
    results: Uint8Array,
    returned: Int32Array,
  ): number;
  cublasLtMatmulAlgoCheck(h: bigint, desc: bigint, a: bigint, b: bigint, c: bigint, d: bigint, algo: Uint8Array, result: Uint8Array): number;
  cublasLtMatmulAlgoConfigGetAttribute(algo: Uint8Array, attr: number, buf: ArrayBufferView, size: number, written: BigUint64Array): number;
  cublasLtMatmulAlgoConfigSetAttribute(algo: Uint8Array, attr: number, buf: ArrayBufferView, size: number): number;
  cublasLtMatmul(
    h: bigint,
    desc: bigint,
    alpha: Float32Array,
    A: bigint,
    Adesc: bigint,
    B: bigint,
    Bdesc: bigint,
    beta: Float32Array,
    C: bigint,
    Cdesc: bigint,
    D: bigint,
    Ddesc: bigint,
    algo: Uint8Array,
    ws: bigint | null,
    wsBytes: number,
    stream: bigint | null,
  ): number;
}

interface Plan {
  key: string;
  desc: bigint;
  /** cuBLASLt's A (our B), B (our A), C/D layouts. */
  aDesc: bigint;
  bDesc: bigint;
  cDesc: bigint;
  algo: Uint8Array;
  workspaceNeeded: number;
  wavesCount: number;
  hasBias: boolean;
  lastBias: bigint;
  /** Where the algorithm came from: heuristic #0, a cache entry, or a sweep now. */
  source: 'default' | 'cache' | 'shipped' | 'sweep';
  config: Config;
  /** How many algorithms were there to choose from. */
  candidates: number;
}

/** One heuristic result: the algorithm blob, the workspace it needs, and its readable configuration. */
interface Candidate {
  algo: Uint8Array;
  workspace: number;
  waves: number;
  config: Config;
}

/** Autotune cache kernel name of cuBLASLt algorithm choices. */
export const GEMM_TUNE_NAME = 'cuda.gemm.cublaslt';
/** Heuristic results a sweep times. */
export const GEMM_CANDIDATES = 16;
/** Products from this many multiply-adds (≈ 2048³) also time swizzled variants of the first candidates. */
export const GEMM_SWIZZLE_MIN_MACS = 2 ** 33;
/** Products with fewer multiply-adds keep heuristic #0 (their time is launch overhead, whatever the algorithm). */
export const GEMM_TUNE_MIN_MACS = 1 << 24;

/**
 * Calls per timing sample of a cuBLASLt sweep, run back to back between two events (the sample is their
 * time divided). Small products: a call alone between events on an idle GPU also counts the host's
 * work before its launch(es), which back to back overlaps the previous kernel, as in a model. Large
 * ones (milliseconds): several calls in a row hold the card at its sustained clock and power, where
 * algorithms rank differently than from a cold start (an algorithm chosen by lone calls can be slower
 * per call back to back).
 */
export function gemmTimingCalls(macs: number): number {
  return macs >= 2 ** 36 ? 4 : 10;
}

/** A binding, or a stand-in returning `status` when the library lacks the symbol. */
function optional<F>(bind: () => F, status: number): F {
  try {
    return bind();
  } catch {
    return (() => status) as F;
  }
}

const hex = (b: Uint8Array): string => Buffer.from(b.buffer, b.byteOffset, b.byteLength).toString('hex');
const unhex = (s: string): Uint8Array => new Uint8Array(Buffer.from(s, 'hex'));

/** Largest power of two (≤ 256) dividing the address (256 for 0). */
export function pointerAlignment(p: bigint): number {
  // one BigInt operation: this runs for every pointer of every GEMM call (the plan key)
  const low = Number(BigInt.asUintN(8, p));
  return low === 0 ? 256 : low & -low;
}

/** The cuBLASLt column-major problem for a row-major GEMM (exported for tests: no GPU needed). */
export function columnMajorProblem(a: {
  transA: boolean;
  transB: boolean;
  m: number;
  n: number;
  k: number;
  lda: number;
  ldb: number;
  ldc: number;
}): {
  transa: number;
  transb: number;
  mPrime: number;
  nPrime: number;
  k: number;
  /** cuBLASLt's A = our B. */
  aLayout: { rows: number; cols: number; ld: number };
  /** cuBLASLt's B = our A. */
  bLayout: { rows: number; cols: number; ld: number };
  cLayout: { rows: number; cols: number; ld: number };
} {
  return {
    transa: a.transB ? CUBLAS_OP_T : CUBLAS_OP_N,
    transb: a.transA ? CUBLAS_OP_T : CUBLAS_OP_N,
    mPrime: a.n,
    nPrime: a.m,
    k: a.k,
    aLayout: a.transB ? { rows: a.k, cols: a.n, ld: a.ldb } : { rows: a.n, cols: a.k, ld: a.ldb },
    bLayout: a.transA ? { rows: a.m, cols: a.k, ld: a.lda } : { rows: a.k, cols: a.m, ld: a.lda },
    cLayout: { rows: a.n, cols: a.m, ld: a.ldc },
  };
}

/** Fill in default leading dimensions and strides, and validate (exported for tests). */
export function normalizeGemmArgs(g: GemmArgs): Required<Omit<GemmArgs, 'bias' | 'stream' | 'workspace' | 'D'>> & {
  D: bigint;
  bias: bigint | null;
} {
  const transA = g.transA ?? false;
  const transB = g.transB ?? false;
  const { m, n, k } = g;
  for (const [nm, v] of [
    ['m', m],
    ['n', n],
    ['k', k],
  ] as const) {
    if (!Number.isSafeInteger(v) || v < 0) throw new ValueError('cublasLt.gemm', `${nm} must be a non-negative integer, got ${v}`);
  }
  if (!(g.dtype in DTYPE_INFO)) throw new UnsupportedError('cublasLt.gemm', `dtype ${String(g.dtype)} (supported: float32, float64, float16, bfloat16)`);
  const aCols = transA ? m : k; // row-major A is stored (transA ? k × m : m × k)
  const aRows = transA ? k : m;
  const bCols = transB ? k : n;
  const bRows = transB ? n : k;
  const lda = g.lda ?? Math.max(1, aCols);
  const ldb = g.ldb ?? Math.max(1, bCols);
  const ldc = g.ldc ?? Math.max(1, n);
  if (lda < Math.max(1, aCols)) throw new ValueError('cublasLt.gemm', `lda=${lda} is smaller than A's row length ${aCols}`);
  if (ldb < Math.max(1, bCols)) throw new ValueError('cublasLt.gemm', `ldb=${ldb} is smaller than B's row length ${bCols}`);
  if (ldc < Math.max(1, n)) throw new ValueError('cublasLt.gemm', `ldc=${ldc} is smaller than C's row length ${n}`);
  const batch = g.batch ?? 1;
  if (!Number.isSafeInteger(batch) || batch < 1) throw new ValueError('cublasLt.gemm', `batch must be a positive integer, got ${batch}`);
  // TF32 only concerns fp32 inputs; fp16/bf16 always multiply-accumulate in fp32.
  const allowTF32 = g.allowTF32 ?? false;
  return {
    transA,
    transB,
    m,
    n,
    k,
    A: g.A,
    lda,
    strideA: g.strideA ?? aRows * lda,
    B: g.B,
    ldb,
    strideB: g.strideB ?? bRows * ldb,
    C: g.C,
    ldc,
    strideC: g.strideC ?? m * ldc,
    D: g.D ?? g.C,
    batch,
    dtype: g.dtype,
    alpha: g.alpha ?? 1,
    beta: g.beta ?? 0,
    bias: g.bias ?? null,
    allowTF32,
  };
}

export interface CublasLtStats {
  gemms: number;
  planHits: number;
  planMisses: number;
  heuristicMs: number;
  /** Plans whose algorithm was chosen by timing candidates in this process. */
  sweeps: number;
}

let instance: CublasLt | null = null;

export class CublasLt {
  readonly libPath: string;
  /** cublasLtGetVersion(), e.g. 130100 for 13.1.0. */
  readonly version: number;
  readonly handle: bigint;
  readonly ctx: CudaContext;
  private readonly f: LtFns;
  private readonly plans = new Map<string, Plan>();
  private defaultWorkspace: GemmWorkspace | null = null;
  private readonly alpha = new Float32Array(1);
  private readonly beta = new Float32Array(1);
  // float64 GEMMs take double scalars (the scale type follows the compute type)
  private readonly alpha64 = new Float64Array(1);
  private readonly beta64 = new Float64Array(1);
  private readonly i32 = new Int32Array(1);
  private readonly u32 = new Uint32Array(1);
  private readonly i64 = new BigInt64Array(1);
  private readonly u64 = new BigUint64Array(1);
  private readonly out = new BigUint64Array(1);
  readonly stats: CublasLtStats = { gemms: 0, planHits: 0, planMisses: 0, heuristicMs: 0, sweeps: 0 };
  private devKey?: string;
  private evStart?: CudaEvent;
  private evEnd?: CudaEvent;

  constructor(ctx: CudaContext) {
    this.ctx = ctx;
    const { lib, path } = loadCudaLibrary('cublasLt');
    this.libPath = path;
    const P = 'void *';
    this.f = {
      cublasLtCreate: lib.func('cublasLtCreate', 'int', [P]),
      cublasLtDestroy: lib.func('cublasLtDestroy', 'int', [P]),
      cublasLtGetVersion: lib.func('cublasLtGetVersion', 'size_t', []),
      cublasLtGetStatusName: lib.func('cublasLtGetStatusName', 'const char *', ['int']),
      cublasLtGetStatusString: lib.func('cublasLtGetStatusString', 'const char *', ['int']),
      cublasLtMatmulDescCreate: lib.func('cublasLtMatmulDescCreate', 'int', [P, 'int', 'int']),
      cublasLtMatmulDescDestroy: lib.func('cublasLtMatmulDescDestroy', 'int', [P]),
      cublasLtMatmulDescSetAttribute: lib.func('cublasLtMatmulDescSetAttribute', 'int', [P, 'int', P, 'size_t']),
      cublasLtMatrixLayoutCreate: lib.func('cublasLtMatrixLayoutCreate', 'int', [P, 'int', 'uint64_t', 'uint64_t', 'int64_t']),
      cublasLtMatrixLayoutDestroy: lib.func('cublasLtMatrixLayoutDestroy', 'int', [P]),
      cublasLtMatrixLayoutSetAttribute: lib.func('cublasLtMatrixLayoutSetAttribute', 'int', [P, 'int', P, 'size_t']),
      cublasLtMatmulPreferenceCreate: lib.func('cublasLtMatmulPreferenceCreate', 'int', [P]),
      cublasLtMatmulPreferenceDestroy: lib.func('cublasLtMatmulPreferenceDestroy', 'int', [P]),
      cublasLtMatmulPreferenceSetAttribute: lib.func('cublasLtMatmulPreferenceSetAttribute', 'int', [P, 'int', P, 'size_t']),
      cublasLtMatmulAlgoGetHeuristic: lib.func('cublasLtMatmulAlgoGetHeuristic', 'int', [P, P, P, P, P, P, P, 'int', P, P]),
      // optional (every cuBLASLt since 10.1 has them; test doubles may not): without them, algorithms
      // are described by their blob alone and cached choices are reused only for sizes that list them
      cublasLtMatmulAlgoCheck: optional(() => lib.func('cublasLtMatmulAlgoCheck', 'int', [P, P, P, P, P, P, P, P]), 15),
      cublasLtMatmulAlgoConfigGetAttribute: optional(() => lib.func('cublasLtMatmulAlgoConfigGetAttribute', 'int', [P, 'int', P, 'size_t', P]), 15),
      cublasLtMatmulAlgoConfigSetAttribute: optional(() => lib.func('cublasLtMatmulAlgoConfigSetAttribute', 'int', [P, 'int', P, 'size_t']), 15),
      cublasLtMatmul: lib.func('cublasLtMatmul', 'int', [P, P, P, P, P, P, P, P, P, P, P, P, P, P, 'size_t', P]),
    } as unknown as LtFns;
    this.version = Number(this.f.cublasLtGetVersion());
    ctx.makeCurrent();
    this.check(this.f.cublasLtCreate(this.out), 'cublasLtCreate');
    this.handle = this.out[0]!;
  }

  /** The process-wide handle if one was created (tests, diagnostics). */
  static current(): CublasLt | null {
    return instance;
  }

  /** The process-wide handle, bound to `ctx` (created on first use). */
  static get(ctx: CudaContext): CublasLt {
    if (instance && instance.ctx !== ctx) {
      throw new UnsupportedError('cublasLt', 'one cuBLASLt handle per process is supported (multi-device: create CublasLt instances explicitly)');
    }
    return (instance ??= new CublasLt(ctx));
  }

  statusName(s: number): string {
    try {
      return this.f.cublasLtGetStatusName(s) ?? CUBLAS_STATUS_NAMES[s] ?? `cublasStatus ${s}`;
    } catch {
      return CUBLAS_STATUS_NAMES[s] ?? `cublasStatus ${s}`;
    }
  }

  private check(s: number, call: string, detail = ''): void {
    if (s === 0) return;
    let d = detail;
    if (s === 13) {
      const p = contextPoisoned();
      d += `${d ? '; ' : ''}${p ? `the CUDA context is unusable after ${p.what}` : 'a kernel failed on the device; the next CUDA call will report the cause'}`;
    }
    throw new CublasError(call, s, this.statusName(s), d);
  }

  /** Workspace used by gemm() calls that pass none. */
  setDefaultWorkspace(ws: GemmWorkspace | null): void {
    this.defaultWorkspace = ws;
  }

  /** The workspace gemm() calls that pass none use (cuBLAS's legacy handle shares it: one stream, calls in order). */
  get workspace(): GemmWorkspace | null {
    return this.defaultWorkspace;
  }

  private setDesc(desc: bigint, attr: number, buf: ArrayBufferView, what: string): void {
    this.check(this.f.cublasLtMatmulDescSetAttribute(desc, attr, buf, buf.byteLength), `cublasLtMatmulDescSetAttribute(${what})`);
  }

  private layout(type: number, rows: number, cols: number, ld: number, batch: number, stride: number, what: string): bigint {
    this.check(this.f.cublasLtMatrixLayoutCreate(this.out, type, rows, cols, ld), `cublasLtMatrixLayoutCreate(${what})`);
    const l = this.out[0]!;
    if (batch > 1) {
      this.i32[0] = batch;
      this.check(this.f.cublasLtMatrixLayoutSetAttribute(l, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, this.i32, 4), `cublasLtMatrixLayoutSetAttribute(${what}.BATCH_COUNT)`);
      this.i64[0] = BigInt(stride);
      this.check(
        this.f.cublasLtMatrixLayoutSetAttribute(l, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, this.i64, 8),
        `cublasLtMatrixLayoutSetAttribute(${what}.STRIDED_BATCH_OFFSET)`,
      );
    }
    return l;
  }

  private makePlan(key: string, g: ReturnType<typeof normalizeGemmArgs>, ws: GemmWorkspace | null, stream: Stream | bigint | null): Plan {
    const t0 = performance.now();
    const wsBytes = ws ? ws.bytes : 0;
    const dt = DTYPE_INFO[g.dtype].cuda;
    const f64 = g.dtype === 'float64';
    const compute = f64 ? CUBLAS_COMPUTE_64F : g.dtype === 'float32' && g.allowTF32 ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F;
    const cm = columnMajorProblem(g);
    const created: { kind: 'desc' | 'layout' | 'pref'; h: bigint }[] = [];
    try {
      this.check(this.f.cublasLtMatmulDescCreate(this.out, compute, f64 ? CUDA_R_64F : CUDA_R_32F), 'cublasLtMatmulDescCreate');
      const desc = this.out[0]!;
      created.push({ kind: 'desc', h: desc });
      this.i32[0] = cm.transa;
      this.setDesc(desc, CUBLASLT_MATMUL_DESC_TRANSA, this.i32, 'TRANSA');
      this.i32[0] = cm.transb;
      this.setDesc(desc, CUBLASLT_MATMUL_DESC_TRANSB, this.i32, 'TRANSB');
      if (g.bias !== null) {
        this.u32[0] = CUBLASLT_EPILOGUE_BIAS;
        this.setDesc(desc, CUBLASLT_MATMUL_DESC_EPILOGUE, this.u32, 'EPILOGUE');
        this.u64[0] = g.bias;
        this.setDesc(desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, this.u64, 'BIAS_POINTER');
      }
      const aDesc = this.layout(dt, cm.aLayout.rows, cm.aLayout.cols, cm.aLayout.ld, g.batch, g.strideB, 'A(=B)');
      created.push({ kind: 'layout', h: aDesc });
      const bDesc = this.layout(dt, cm.bLayout.rows, cm.bLayout.cols, cm.bLayout.ld, g.batch, g.strideA, 'B(=A)');
      created.push({ kind: 'layout', h: bDesc });
      const cDesc = this.layout(dt, cm.cLayout.rows, cm.cLayout.cols, cm.cLayout.ld, g.batch, g.strideC, 'C');
      created.push({ kind: 'layout', h: cDesc });

      this.check(this.f.cublasLtMatmulPreferenceCreate(this.out), 'cublasLtMatmulPreferenceCreate');
      const pref = this.out[0]!;
      created.push({ kind: 'pref', h: pref });
      this.u64[0] = BigInt(wsBytes);
      this.check(this.f.cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, this.u64, 8), 'PreferenceSetAttribute(MAX_WORKSPACE_BYTES)');
      // Declared alignments (cuBLASLt assumes 256 bytes otherwise and would refuse or misuse vector
      // loads): cuBLASLt's A is our B and vice versa; C and D share the output pointer's alignment.
      const aligns: [number, number][] = [
        [CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, pointerAlignment(g.B)],
        [CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, pointerAlignment(g.A)],
        [CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, Math.min(pointerAlignment(g.C), pointerAlignment(g.D))],
        [CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, Math.min(pointerAlignment(g.C), pointerAlignment(g.D))],
      ];
      for (const [attr, v] of aligns) {
        this.u32[0] = v;
        this.check(this.f.cublasLtMatmulPreferenceSetAttribute(pref, attr, this.u32, 4), `PreferenceSetAttribute(${attr})`);
      }
      const requested = GEMM_CANDIDATES;
      const results = new Uint8Array(HEURISTIC_RESULT_BYTES * requested);
      const returned = new Int32Array(1);
      const s = this.f.cublasLtMatmulAlgoGetHeuristic(this.handle, desc, aDesc, bDesc, cDesc, cDesc, pref, requested, results, returned);
      const describe = `${g.dtype} m=${g.m} n=${g.n} k=${g.k} transA=${g.transA} transB=${g.transB} lda=${g.lda} ldb=${g.ldb} ldc=${g.ldc} batch=${g.batch}${g.bias !== null ? ' +bias' : ''} workspace=${wsBytes}`;
      this.check(s, 'cublasLtMatmulAlgoGetHeuristic', describe);
      this.f.cublasLtMatmulPreferenceDestroy(pref);
      created.pop();
      const dv = new DataView(results.buffer);
      const cands: Candidate[] = [];
      for (let i = 0; i < returned[0]!; i++) {
        const off = i * HEURISTIC_RESULT_BYTES;
        if (dv.getInt32(off + HEUR_STATE_OFFSET, true) !== 0) continue;
        const algo = results.slice(off, off + ALGO_BYTES);
        cands.push({ algo, workspace: Number(dv.getBigUint64(off + HEUR_WORKSPACE_OFFSET, true)), waves: dv.getFloat32(off + HEUR_WAVES_OFFSET, true), config: this.algoConfig(algo) });
      }
      if (cands.length === 0) throw new UnsupportedError('cublasLt.gemm', `no cuBLASLt algorithm for ${describe}`);
      this.stats.heuristicMs += performance.now() - t0;
      const plan: Plan = {
        key, desc, aDesc, bDesc, cDesc, algo: cands[0]!.algo, workspaceNeeded: cands[0]!.workspace, wavesCount: cands[0]!.waves,
        hasBias: g.bias !== null, lastBias: g.bias ?? 0n, source: 'default', config: cands[0]!.config, candidates: cands.length,
      };
      this.select(plan, g, cands, ws, stream);
      return plan;
    } catch (e) {
      for (const c of created.reverse()) {
        if (c.kind === 'desc') this.f.cublasLtMatmulDescDestroy(c.h);
        else if (c.kind === 'layout') this.f.cublasLtMatrixLayoutDestroy(c.h);
        else this.f.cublasLtMatmulPreferenceDestroy(c.h);
      }
      throw e;
    }
  }

  /**
   * The algorithm's readable configuration plus its 64-byte blob (hex). The blob is what runs: it is
   * valid across processes for the same cuBLASLt version and card, which the tune key carries.
   */
  private algoConfig(algo: Uint8Array): Config {
    const get = (attr: number): number => {
      this.u32[0] = 0;
      return this.f.cublasLtMatmulAlgoConfigGetAttribute(algo, attr, this.u32, 4, this.out) === 0 ? this.u32[0]! | 0 : -1;
    };
    return {
      algo: hex(algo), id: get(CUBLASLT_ALGO_CONFIG_ID), tile: get(CUBLASLT_ALGO_CONFIG_TILE_ID), stages: get(CUBLASLT_ALGO_CONFIG_STAGES_ID),
      splitK: get(CUBLASLT_ALGO_CONFIG_SPLITK_NUM), reduction: get(CUBLASLT_ALGO_CONFIG_REDUCTION_SCHEME),
      swizzle: get(CUBLASLT_ALGO_CONFIG_CTA_SWIZZLING), custom: get(CUBLASLT_ALGO_CONFIG_CUSTOM_OPTION),
    };
  }

  /** The autotune key of a plan: shape bucket, dtype, layouts, epilogue, cuBLASLt version; the card is the device key. */
  tuneKey(g: ReturnType<typeof normalizeGemmArgs>): TuneKey {
    const info = this.ctx.info;
    this.devKey ??= deviceKey({ name: info.name, arch: `sm_${info.cc[0]}${info.cc[1]}` });
    const shape = `${bucketSize(g.m)}x${bucketSize(g.n)}x${bucketSize(g.k)}${g.batch > 1 ? `x${bucketSize(g.batch)}` : ''}`;
    const dtype = `${g.dtype}.${g.transA ? 'T' : 'N'}${g.transB ? 'T' : 'N'}${g.bias !== null ? '.bias' : ''}${g.allowTF32 ? '.tf32' : ''}.lt${this.version}`;
    return { shape, dtype, device: this.devKey };
  }

  /**
   * Picks the plan's algorithm among the heuristic's candidates (see the file comment): NBX_AUTOTUNE=off
   * keeps heuristic #0; otherwise a cached choice (user, then shipped) wins; on a miss in mode full,
   * every candidate is timed with CUDA events on the call's own operands and the fastest is stored.
   * A sweep needs a Stream, beta = 0 (C is not an input, so timing runs may overwrite it) and a
   * product big enough for the algorithm to matter; otherwise only the caches are consulted.
   */
  private select(plan: Plan, g: ReturnType<typeof normalizeGemmArgs>, cands: Candidate[], ws: GemmWorkspace | null, stream: Stream | bigint | null): void {
    const mode = autotuneMode();
    if (mode === 'off') return;
    const key = this.tuneKey(g);
    // A choice cached for another size of this bucket joins the candidates when cuBLASLt accepts it here.
    const hit = defaultCache().lookup(GEMM_TUNE_NAME, key);
    const cachedAlgo = hit?.entry.config.algo;
    if (typeof cachedAlgo === 'string' && !cands.some((c) => c.config.algo === cachedAlgo)) {
      const algo = unhex(cachedAlgo);
      const res = new Uint8Array(HEURISTIC_RESULT_BYTES);
      if (algo.length === ALGO_BYTES && this.f.cublasLtMatmulAlgoCheck(this.handle, plan.desc, plan.aDesc, plan.bDesc, plan.cDesc, plan.cDesc, algo, res) === 0) {
        const need = Number(new DataView(res.buffer).getBigUint64(HEUR_WORKSPACE_OFFSET, true));
        if (need <= (ws?.bytes ?? 0)) cands.push({ algo, workspace: need, waves: 0, config: hit!.entry.config });
      }
    }
    const macs = g.m * g.n * g.k * g.batch;
    if (macs >= GEMM_SWIZZLE_MIN_MACS) this.swizzled(plan, cands, ws);
    const canTime = stream instanceof Stream && g.beta === 0 && macs >= GEMM_TUNE_MIN_MACS && cands.length > 1;
    const byAlgo = new Map(cands.map((c) => [c.config.algo as string, c]));
    const calls = gemmTimingCalls(macs);
    const time = (cfg: Config): number => {
      const c = byAlgo.get(cfg.algo as string)!;
      const st = stream as Stream;
      this.evStart ??= this.ctx.createEvent({ timing: true });
      this.evEnd ??= this.ctx.createEvent({ timing: true });
      this.evStart.record(st);
      let s = 0;
      for (let i = 0; i < calls && s === 0; i++) s = this.matmul(plan, c.algo, g, ws, st.handle);
      this.evEnd.record(st);
      this.evEnd.synchronize();
      this.check(s, 'cublasLtMatmul', `timing algorithm ${String(cfg.id)} tile ${String(cfg.tile)} for ${key.shape} ${key.dtype}`);
      return this.evEnd.elapsedSince(this.evStart) / calls;
    };
    const kernel = { name: GEMM_TUNE_NAME, defaultConfig: cands[0]!.config };
    const r = tuneSync(kernel, key, cands.map((c) => c.config), time, { mode: canTime ? mode : 'cached', deviceLabel: this.ctx.info.name });
    if (r.source === 'sweep') this.stats.sweeps++;
    const pick = byAlgo.get(r.config.algo as string) ?? cands[0]!;
    plan.algo = pick.algo;
    plan.workspaceNeeded = pick.workspace;
    plan.wavesCount = pick.waves;
    plan.config = pick.config;
    plan.source = r.source;
    plan.candidates = cands.length;
  }

  /**
   * Large products: the heuristic's first candidates again with CTA swizzling on (where cuBLASLt accepts
   * it for this problem). Its candidates all come with swizzling off; swizzled rasterisation makes CTAs
   * that run together share operand tiles in L2, less DRAM traffic for the same work.
   */
  private swizzled(plan: Plan, cands: Candidate[], ws: GemmWorkspace | null): void {
    const have = new Set(cands.map((c) => c.config.algo as string));
    const res = new Uint8Array(HEURISTIC_RESULT_BYTES);
    for (const c of cands.slice(0, 4)) {
      if (c.config.swizzle !== 0) continue;
      const algo = c.algo.slice();
      this.u32[0] = 1;
      if (this.f.cublasLtMatmulAlgoConfigSetAttribute(algo, CUBLASLT_ALGO_CONFIG_CTA_SWIZZLING, this.u32, 4) !== 0) continue;
      if (this.f.cublasLtMatmulAlgoCheck(this.handle, plan.desc, plan.aDesc, plan.bDesc, plan.cDesc, plan.cDesc, algo, res) !== 0) continue;
      const need = Number(new DataView(res.buffer).getBigUint64(HEUR_WORKSPACE_OFFSET, true));
      const config = this.algoConfig(algo);
      if (need > (ws?.bytes ?? 0) || have.has(config.algo as string) || config.swizzle !== 1) continue;
      have.add(config.algo as string);
      cands.push({ algo, workspace: need, waves: c.waves, config });
    }
  }

  /** One cublasLtMatmul call with the plan's descriptors and `algo`; returns the status. */
  private matmul(plan: Plan, algo: Uint8Array, g: ReturnType<typeof normalizeGemmArgs>, ws: GemmWorkspace | null, stream: bigint | null): number {
    const f64 = g.dtype === 'float64';
    if (f64) {
      this.alpha64[0] = g.alpha;
      this.beta64[0] = g.beta;
    } else {
      this.alpha[0] = g.alpha;
      this.beta[0] = g.beta;
    }
    this.ctx.makeCurrent();
    return this.f.cublasLtMatmul(
      this.handle,
      plan.desc,
      f64 ? (this.alpha64 as unknown as Float32Array) : this.alpha,
      g.B,
      plan.aDesc,
      g.A,
      plan.bDesc,
      f64 ? (this.beta64 as unknown as Float32Array) : this.beta,
      g.C,
      plan.cDesc,
      g.D,
      plan.cDesc,
      algo,
      ws && ws.bytes > 0 ? ws.ptr : null,
      ws ? ws.bytes : 0,
      stream,
    );
  }

  /** Row-major GEMM (see GemmArgs and the file comment). Asynchronous on args.stream. */
  gemm(args: GemmArgs): void {
    const p = contextPoisoned();
    if (p) throw new CublasError('gemm', 13, 'CUBLAS_STATUS_EXECUTION_FAILED', `the CUDA context is unusable after ${p.what}`);
    const g = normalizeGemmArgs(args);
    if (g.m === 0 || g.n === 0) return;
    if (g.k === 0) {
      throw new UnsupportedError('cublasLt.gemm', 'k = 0 (the product is all zeros): fill the output instead of calling gemm');
    }
    const ws = args.workspace ?? this.defaultWorkspace;
    const wsBytes = ws ? ws.bytes : 0;
    const align = pointerAlignment;
    const key =
      `${g.dtype}|${g.transA ? 1 : 0}${g.transB ? 1 : 0}|${g.m}|${g.n}|${g.k}|${g.lda}|${g.ldb}|${g.ldc}|${g.batch}|` +
      `${g.batch > 1 ? `${g.strideA}|${g.strideB}|${g.strideC}` : '-'}|${g.bias !== null ? align(g.bias) : 0}|${g.allowTF32 ? 1 : 0}|${wsBytes}|` +
      `${align(g.A)}|${align(g.B)}|${Math.min(align(g.C), align(g.D))}`;
    let plan = this.plans.get(key);
    if (plan) {
      this.stats.planHits++;
    } else {
      this.stats.planMisses++;
      plan = this.makePlan(key, g, ws, args.stream ?? null);
      this.plans.set(key, plan);
    }
    if (plan.hasBias && plan.lastBias !== g.bias) {
      this.u64[0] = g.bias!;
      this.setDesc(plan.desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, this.u64, 'BIAS_POINTER');
      plan.lastBias = g.bias!;
    }
    const stream = args.stream == null ? null : typeof args.stream === 'bigint' ? args.stream : args.stream.handle;
    const s = this.matmul(plan, plan.algo, g, ws, stream);
    if (s !== 0) this.check(s, 'cublasLtMatmul', `${g.dtype} m=${g.m} n=${g.n} k=${g.k} batch=${g.batch}`);
    this.stats.gemms++;
  }

  /** The cached plans' algorithm choices (tests, diagnostics). */
  planChoices(): { key: string; source: Plan['source']; config: Config; candidates: number }[] {
    return [...this.plans.values()].map((p) => ({ key: p.key, source: p.source, config: p.config, candidates: p.candidates }));
  }

  /** Number of cached (shape, dtype, layout) plans. */
  get planCount(): number {
    return this.plans.size;
  }

  /** Destroy every cached plan's descriptors. */
  clearPlans(): void {
    for (const p of this.plans.values()) {
      this.f.cublasLtMatmulDescDestroy(p.desc);
      this.f.cublasLtMatrixLayoutDestroy(p.aDesc);
      this.f.cublasLtMatrixLayoutDestroy(p.bDesc);
      this.f.cublasLtMatrixLayoutDestroy(p.cDesc);
    }
    this.plans.clear();
  }

  destroy(): void {
    this.clearPlans();
    this.f.cublasLtDestroy(this.handle);
    if (instance === this) instance = null;
  }
}

/**
 * Row-major GEMM through the process-wide cuBLASLt handle (see GemmArgs). The context is
 * `args.ctx`, else the stream's, else device 0's primary context.
 */
export function gemm(args: GemmArgs & { ctx?: CudaContext }): void {
  const ctx = args.ctx ?? (args.stream instanceof Stream ? args.stream.ctx : CudaContext.get(0));
  CublasLt.get(ctx).gemm(args);
}
