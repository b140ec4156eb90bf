// cuBLAS's legacy API, for the one thing cuBLASLt does not offer: its GEMV kernels. cublasSgemm with
// one row picks a matrix-vector kernel internally (what PyTorch's float32 x @ w runs), where
// cuBLASLt only has GEMM tiles; the small-M tuner (kernels/gemv.ts, impl 'cublas') times it against
// ours and cuBLASLt's. Row-major is handled as in cublaslt.ts: C = op(A) op(B) row-major is
// Cᵀ = op(B)ᵀ op(A)ᵀ column-major, so B goes first with its own transpose flag.
// The handle runs on the caller's stream and shares cuBLASLt's workspace (one stream, calls in order),
// so cuBLAS allocates nothing of its own outside the caching allocator.

import { UnsupportedError } from '../../../errors.js';
import { CudaContext, contextPoisoned } from './driver.js';
import { loadCudaLibrary } from './libs.js';
import { CUBLAS_OP_N, CUBLAS_OP_T, CUBLAS_STATUS_NAMES, CublasError, type GemmWorkspace } from './cublaslt.js';

interface CublasFns {
  cublasCreate_v2(out: BigUint64Array): number;
  cublasDestroy_v2(h: bigint): number;
  cublasSetStream_v2(h: bigint, stream: bigint | null): number;
  cublasSetWorkspace_v2(h: bigint, ptr: bigint, bytes: number): number;
  cublasSgemm_v2(h: bigint, ta: number, tb: number, m: number, n: number, k: number, alpha: Float32Array, A: bigint, lda: number,
    B: bigint, ldb: number, beta: Float32Array, C: bigint, ldc: number): number;
}

/** Row-major float32 product C (m × n, row stride ldc) = alpha · op(A) · op(B) + beta · C. */
export interface SgemmArgs {
  transA: boolean; transB: boolean; m: number; n: number; k: number;
  A: bigint; lda: number; B: bigint; ldb: number; C: bigint; ldc: number;
  alpha: number; beta: number;
}

const handles = new Map<CudaContext, Cublas>();

export class Cublas {
  readonly libPath: string;
  readonly ctx: CudaContext;
  private readonly f: CublasFns;
  private readonly handle: bigint;
  private readonly alpha = new Float32Array(1);
  private readonly beta = new Float32Array(1);
  private stream: bigint | null | undefined = undefined;
  private ws: GemmWorkspace | null = null;

  private constructor(ctx: CudaContext) {
    this.ctx = ctx;
    const { lib, path } = loadCudaLibrary('cublas');
    this.libPath = path;
    const P = 'void *';
    this.f = {
      cublasCreate_v2: lib.func('cublasCreate_v2', 'int', [P]),
      cublasDestroy_v2: lib.func('cublasDestroy_v2', 'int', [P]),
      cublasSetStream_v2: lib.func('cublasSetStream_v2', 'int', [P, P]),
      cublasSetWorkspace_v2: lib.func('cublasSetWorkspace_v2', 'int', [P, P, 'size_t']),
      cublasSgemm_v2: lib.func('cublasSgemm_v2', 'int', [P, 'int', 'int', 'int', 'int', 'int', P, P, 'int', P, 'int', P, P, 'int']),
    } as unknown as CublasFns;
    ctx.makeCurrent();
    const out = new BigUint64Array(1);
    this.check(this.f.cublasCreate_v2(out), 'cublasCreate_v2');
    this.handle = out[0]!;
  }

  /** A separate handle, not the context's shared one (diagnostics; destroy() it when done). */
  static create(ctx: CudaContext): Cublas {
    return new Cublas(ctx);
  }

  /** The handle of `ctx` (created on first use; the library is loaded then). */
  static get(ctx: CudaContext): Cublas {
    let h = handles.get(ctx);
    if (!h) handles.set(ctx, (h = new Cublas(ctx)));
    return h;
  }

  /** Row-major SGEMM (see SgemmArgs) on `stream`, with `workspace` as cuBLAS's scratch memory. Asynchronous. */
  sgemm(a: SgemmArgs, stream: bigint | null, workspace: GemmWorkspace | null): void {
    const p = contextPoisoned();
    if (p) throw new CublasError('sgemm', 13, 'CUBLAS_STATUS_EXECUTION_FAILED', `the CUDA context is unusable after ${p.what}`, 'cublas');
    if (a.k === 0) throw new UnsupportedError('cublas.sgemm', 'k = 0 (the product is all zeros): fill the output instead');
    if (stream !== this.stream) { this.check(this.f.cublasSetStream_v2(this.handle, stream), 'cublasSetStream_v2'); this.stream = stream; }
    if (workspace && workspace !== this.ws) {
      this.check(this.f.cublasSetWorkspace_v2(this.handle, workspace.ptr, workspace.bytes), 'cublasSetWorkspace_v2');
      this.ws = workspace;
    }
    this.alpha[0] = a.alpha; this.beta[0] = a.beta;
    // column-major: Cᵀ (n × m, ld ldc) = op(B)ᵀ (n × k) · op(A)ᵀ (k × m)
    const s = this.f.cublasSgemm_v2(this.handle, a.transB ? CUBLAS_OP_T : CUBLAS_OP_N, a.transA ? CUBLAS_OP_T : CUBLAS_OP_N, a.n, a.m, a.k,
      this.alpha, a.B, a.ldb, a.A, a.lda, this.beta, a.C, a.ldc);
    if (s !== 0) this.check(s, 'cublasSgemm_v2', `m=${a.m} n=${a.n} k=${a.k} transA=${a.transA} transB=${a.transB} lda=${a.lda} ldb=${a.ldb} ldc=${a.ldc}`);
  }

  destroy(): void {
    this.f.cublasDestroy_v2(this.handle);
    if (handles.get(this.ctx) === this) handles.delete(this.ctx);
  }

  private check(s: number, call: string, detail = ''): void {
    if (s === 0) return;
    throw new CublasError(call, s, CUBLAS_STATUS_NAMES[s] ?? `cublasStatus ${s}`, detail, 'cublas');
  }
}
