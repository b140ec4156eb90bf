// CPU kernels: linalg. `gemm` is the one matrix-multiply primitive every op (matmul, conv via im2col,
// linear, ...) lowers to: row-major C = alpha·op(A)·op(B) + beta·C, float32/float64, optionally batched.
// It goes to the system BLAS when one was found (src/backend/cpu/runtime/blas.ts), else to a packed WebAssembly
// SIMD kernel on worker threads, or a scalar loop for tiny and gemv-like products. `gemm_int` is its
// exact integer twin.

import { UnsupportedError } from '../../../errors.js';
import type { BackendKernels } from '../../../kernels/table.js';
import { blasGemm, getBlas } from '../runtime/blas.js';
import { availableParallelism } from 'node:os';
import { Worker } from 'node:worker_threads';
import { threadCount } from '../runtime/threads.js';
import v8 from 'node:v8';
import type { GemmParams } from '../../../kernels/gemm.js';
import { uleb, sleb, name as wname, section, vec as wvec } from '../../../ir/wasm.js';

type FArr = Float32Array | Float64Array;

/**
 * The scalar kernel, sums in double: for tiny products, and for products of at most a few rows or
 * columns (gemv-like), which it runs without packing: dot products where op(B)'s columns are
 * contiguous (a linear layer's weight), row updates where B's rows are. B is walked in blocks that
 * stay in cache while every row of op(A) uses them, so a wide B is read from memory once.
 */
function gemmJs(p: GemmParams, A: FArr, B: FArr, C: FArr, offA: number, offB: number, offC: number): void {
  const { m, n, k, alpha, beta, lda, ldb, ldc, transA, transB } = p;
  const acc = new Float64Array(m * n);
  const blk = Math.max(1, Math.floor(JS_BLOCK / Math.max(1, transB ? k : n))); // B rows per block
  if (transB) {
    // op(A) rows contiguous (copied once when A is transposed), dotted with B's rows.
    const a = transA ? new Float64Array(m * k) : A, lda2 = transA ? k : lda, offA2 = transA ? 0 : offA;
    if (transA) for (let i = 0; i < m; i++) for (let l = 0; l < k; l++) a[i * k + l] = A[offA + l * lda + i]!;
    for (let j0 = 0; j0 < n; j0 += blk) {
      const j1 = Math.min(n, j0 + blk);
      for (let i = 0; i < m; i++) {
        const ao = offA2 + i * lda2;
        for (let j = j0; j < j1; j++) {
          const bo = offB + j * ldb;
          let s0 = 0, s1 = 0, s2 = 0, s3 = 0, l = 0;
          for (; l + 3 < k; l += 4) {
            s0 += a[ao + l]! * B[bo + l]!; s1 += a[ao + l + 1]! * B[bo + l + 1]!;
            s2 += a[ao + l + 2]! * B[bo + l + 2]!; s3 += a[ao + l + 3]! * B[bo + l + 3]!;
          }
          for (; l < k; l++) s0 += a[ao + l]! * B[bo + l]!;
          acc[i * n + j] = (s0 + s1) + (s2 + s3);
        }
      }
    }
  } else {
    // acc row i += op(A)[i, l] · B row l, a block of B rows at a time.
    for (let l0 = 0; l0 < k; l0 += blk) {
      const l1 = Math.min(k, l0 + blk);
      for (let i = 0; i < m; i++) {
        const ro = i * n;
        for (let l = l0; l < l1; l++) {
          const av = A[offA + (transA ? l * lda + i : i * lda + l)]!, bo = offB + l * ldb;
          for (let j = 0; j < n; j++) acc[ro + j] += av * B[bo + j]!;
        }
      }
    }
  }
  for (let i = 0; i < m; i++) {
    const co = offC + i * ldc, ro = i * n;
    // beta == 0 overwrites C (NaN in C is ignored, as BLAS and PyTorch do).
    if (beta === 0) for (let j = 0; j < n; j++) C[co + j] = alpha * acc[ro + j]!;
    else for (let j = 0; j < n; j++) C[co + j] = alpha * acc[ro + j]! + beta * C[co + j]!;
  }
}
/** Elements of B per cache block in the scalar kernel (256 KiB of float32). */
const JS_BLOCK = 65536;

let rowInvariant = false;

/**
 * Row-invariant products (returns the previous setting): every row of C is computed as it would be in a
 * product with any other number of rows, so a sequence decoded in a batch gets the numbers it gets
 * alone (the serving engine's steps, src/generation/engine.ts). BLAS (whose kernels for one row and for
 * many differ) and the scalar kernel for few rows are skipped: every product takes the packed kernel,
 * whose sum for an element runs over k in one fixed order whatever m is, never transposed.
 */
export function setRowInvariant(on: boolean): boolean { const was = rowInvariant; rowInvariant = on; return was; }

export function gemm(p: GemmParams): void {
  const dt = p.c.dtype;
  if ((dt !== 'float32' && dt !== 'float64') || p.a.dtype !== dt || p.b.dtype !== dt) {
    throw new UnsupportedError('gemm', `CPU gemm takes float32 or float64 operands of one dtype, got ${p.a.dtype}, ${p.b.dtype} -> ${p.c.dtype}`);
  }
  const batch = p.batch ?? 1;
  const { m, n, k } = p;
  if (batch === 0 || m === 0 || n === 0) return;
  const A = p.a.buf as FArr, B = p.b.buf as FArr, C = p.c.buf as FArr;
  const blas = k > 0 && !rowInvariant && blasLayoutOk(p) ? getBlas() : null;
  // Tiny and gemv-like products: packing costs more than it saves.
  const packed = !blas && k > 0 && (rowInvariant || (m * n * k >= 4096 && Math.min(m, n) > 4)) ? wasmGemm() : null;
  for (let q = 0; q < batch; q++) {
    const oa = p.a.offset + q * (p.strideA ?? 0), ob = p.b.offset + q * (p.strideB ?? 0), oc = p.c.offset + q * (p.strideC ?? 0);
    if (blas) blasGemm(blas, p.transA, p.transB, m, n, k, p.alpha, A, oa, p.lda, B, ob, p.ldb, p.beta, C, oc, p.ldc);
    else if (packed) packed.run(p, A, B, C, oa, ob, oc);
    else gemmJs(p, A, B, C, oa, ob, oc);
  }
}

/** BLAS insists on leading dimensions of at least the row length (and 1); the JS kernel takes any. */
function blasLayoutOk(p: GemmParams): boolean {
  return p.lda >= Math.max(1, p.transA ? p.m : p.k) && p.ldb >= Math.max(1, p.transB ? p.k : p.n) && p.ldc >= Math.max(1, p.n);
}

// ---- the fallback: a packed WebAssembly SIMD gemm, on every core ------------------------------------
//
// GotoBLAS's scheme: op(A) is packed into MR-row panels and op(B) into NR-column panels, KC deep, so
// the micro-kernel streams both contiguously and keeps an MR×NR block of C in SIMD registers. The
// micro-kernel is generated as WebAssembly (128-bit SIMD, which V8 compiles to SSE/AVX; fused
// multiply-add where relaxed SIMD is on) because plain JavaScript is scalar (~1.5 GFLOP/s here).
// Products accumulate in the operands' precision, as BLAS does (float64 accumulation of float32 would
// halve the SIMD width: measured 11-16 vs 21-34 GFLOP/s per core). Packed panels and the C accumulator live in one shared WebAssembly.Memory, so worker threads
// split the tiles of large products; the calling thread takes a share and waits (Atomics.wait), which
// keeps the kernel synchronous.

/** Tile shapes: MR rows × NV vectors (NR = NV·lanes columns); 4×8 float32 and 4×4 float64 keep 8 accumulators in registers. */
const TILE = { f32: { MR: 4, NV: 2, lane: 4 }, f64: { MR: 4, NV: 2, lane: 8 } } as const;
const KC = 256, MC = 128, NC = 1024;


/**
 * The module: imports memory `e.m` (shared), exports
 * `run(pa, pb, pc, nI, nJ, kc, ldc)`: for nJ B panels × nI A panels (byte addresses pa, pb), adds the
 * MR×NR tile products of depth kc into C at pc (row stride ldc bytes).
 */
function gemmModule(f64: boolean, fma: boolean): Uint8Array<ArrayBuffer> {
  const { MR, NV, lane } = f64 ? TILE.f64 : TILE.f32;
  const NR = NV * (16 / lane);
  const c: number[] = [];
  const e = (...b: number[]): void => { c.push(...b); };
  const get = (l: number): void => e(0x20, ...uleb(l)), set = (l: number): void => e(0x21, ...uleb(l));
  const i32 = (v: number): void => e(0x41, ...sleb(v));
  const simd = (op: number, ...imm: number[]): void => e(0xfd, ...uleb(op), ...imm);
  const mem = (align: number, off: number): number[] => [...uleb(align), ...uleb(off)];
  const [ADD, MUL, SPLAT, ALIGN, MADD] = f64 ? [0xf0, 0xf2, 0x0a, 3, 0x107] : [0xe4, 0xe6, 0x09, 2, 0x105];
  const V_LOAD = 0x00, V_STORE = 0x0b, V_CONST = 0x0c;
  const I32_ADD = 0x6a, I32_SUB = 0x6b, I32_MUL = 0x6c, I32_GE_S = 0x4e;
  // Locals: 7 params, 5 i32 scratch, then the v128 accumulators, B vectors and the A broadcast.
  const [pa, pb, pc, nI, nJ, kc, ldc] = [0, 1, 2, 3, 4, 5, 6];
  const [i, j, p, a, b] = [7, 8, 9, 10, 11];
  const acc = Array.from({ length: MR * NV }, (_, x) => 12 + x);
  const bv = Array.from({ length: NV }, (_, x) => 12 + MR * NV + x);
  const av = 12 + MR * NV + NV;
  const cp = a; // a is free again when the tile is stored
  /** for (v = 0; v < bound; v++) body */
  const forLoop = (v: number, bound: number, body: () => void): void => {
    i32(0); set(v);
    e(0x02, 0x40, 0x03, 0x40); get(v); get(bound); e(I32_GE_S, 0x0d, 1);
    body();
    get(v); i32(1); e(I32_ADD); set(v); e(0x0c, 0, 0x0b, 0x0b);
  };
  forLoop(j, nJ, () => forLoop(i, nI, () => {
    get(pa); get(i); i32(MR * lane); e(I32_MUL); get(kc); e(I32_MUL, I32_ADD); set(a);
    get(pb); get(j); i32(NR * lane); e(I32_MUL); get(kc); e(I32_MUL, I32_ADD); set(b);
    for (const x of acc) { simd(V_CONST, ...new Array<number>(16).fill(0)); set(x); }
    get(kc); set(p);
    e(0x03, 0x40); // do { ... } while (--p)
    for (let v = 0; v < NV; v++) { get(b); simd(V_LOAD, ...mem(4, v * 16)); set(bv[v]!); }
    for (let r = 0; r < MR; r++) {
      get(a); simd(SPLAT, ...mem(ALIGN, r * lane)); set(av);
      for (let v = 0; v < NV; v++) {
        const x = acc[r * NV + v]!;
        if (fma) { get(av); get(bv[v]!); get(x); simd(MADD); } else { get(x); get(av); get(bv[v]!); simd(MUL); simd(ADD); }
        set(x);
      }
    }
    get(a); i32(MR * lane); e(I32_ADD); set(a);
    get(b); i32(NR * lane); e(I32_ADD); set(b);
    get(p); i32(1); e(I32_SUB, 0x22, ...uleb(p), 0x0d, 0, 0x0b);
    // C tile += accumulators
    get(pc); get(i); i32(MR); e(I32_MUL); get(ldc); e(I32_MUL, I32_ADD); get(j); i32(NR * lane); e(I32_MUL, I32_ADD); set(cp);
    for (let r = 0; r < MR; r++) {
      for (let v = 0; v < NV; v++) {
        get(cp); get(cp); simd(V_LOAD, ...mem(4, v * 16)); get(acc[r * NV + v]!); simd(ADD); simd(V_STORE, ...mem(4, v * 16));
      }
      if (r < MR - 1) { get(cp); get(ldc); e(I32_ADD); set(cp); }
    }
  }));
  e(0x0b);
  const I32 = 0x7f, V128 = 0x7b;
  const body = [...wvec([[...uleb(5), I32], [...uleb(MR * NV + NV + 1), V128]]), ...c];
  return new Uint8Array([0x00, 0x61, 0x73, 0x6d, 1, 0, 0, 0,
    ...section(1, wvec([[0x60, ...wvec(new Array(7).fill([I32])), 0]])),
    ...section(2, wvec([[...wname('e'), ...wname('m'), 0x02, 0x03, ...uleb(1), ...uleb(MAX_PAGES)]])),
    ...section(3, wvec([[0]])),
    ...section(7, wvec([[...wname('run'), 0x00, 0]])),
    ...section(10, wvec([[...uleb(body.length), ...body]])),
  ]);
}

/**
 * Whether relaxed SIMD's fused multiply-add (twice the flops of mul + add) compiles. Newer Node has it
 * natively; Node 20's V8 has the finished proposal behind a flag, which is turned on here (it only
 * makes more modules valid); NBX_WASM_FMA=0 declines.
 */
function relaxedSimd(): boolean {
  const probe = gemmModule(false, true);
  if (WebAssembly.validate(probe)) return true;
  if (process.env.NBX_WASM_FMA === '0') return false;
  try { v8.setFlagsFromString('--experimental-wasm-relaxed-simd'); } catch { return false; }
  return WebAssembly.validate(probe);
}

/** 2 GiB of address space at most (reserved, not committed); products are chunked to stay well below. */
const MAX_PAGES = 32768;
const BUDGET_BYTES = 256 * 2 ** 20;

type RunFn = (pa: number, pb: number, pc: number, nI: number, nJ: number, kc: number, ldc: number) => void;

/**
 * The shared control block: [generation, finished helpers, next unit], then the task: [kind (0 f32,
 * 1 f64), pa, pb, pc, mP, nP, k, ldc, threads] (byte addresses, panel counts, depth, C row bytes),
 * then a failure word a helper raises.
 */
const CTRL_WORDS = 13;

/**
 * A thread's part of a product. The tiles are cut into units along A panels or B panels (whichever
 * has more); threads take units from a shared counter until none is left, so a thread slowed by other
 * load does less. Within a unit: KC deep → NC columns → MC rows, so the B block stays in L2 and each A
 * panel in L1. This function's source is also the worker's (toString): it must not use module scope.
 */
function runShare(run: RunFn, c: Int32Array, KC: number, MC: number, NC: number, MR: number, NR: number, lane: number): void {
  const pa = c[4]!, pb = c[5]!, pc = c[6]!, mP = c[7]!, nP = c[8]!, k = c[9]!, ldc = c[10]!, T = c[11]!;
  const byRows = mP > nP;
  const split = byRows ? mP : nP;
  const mcP = Math.max(1, Math.floor(MC / MR)), ncP = Math.max(1, Math.floor(NC / NR));
  const per = Math.max(1, Math.min(byRows ? mcP : ncP, Math.ceil(split / (4 * T))));
  for (let u = Atomics.add(c, 2, 1); u * per < split; u = Atomics.add(c, 2, 1)) {
    const s0 = u * per, s1 = Math.min(split, s0 + per);
    const i0 = byRows ? s0 : 0, i1 = byRows ? s1 : mP, j0 = byRows ? 0 : s0, j1 = byRows ? nP : s1;
    for (let p0 = 0; p0 < k; p0 += KC) {
      const kc = Math.min(KC, k - p0);
      const aBlk = pa + p0 * mP * MR * lane, bBlk = pb + p0 * nP * NR * lane;
      for (let jc = j0; jc < j1; jc += ncP) {
        const nJ = Math.min(ncP, j1 - jc);
        for (let ic = i0; ic < i1; ic += mcP) {
          run(aBlk + ic * MR * kc * lane, bBlk + jc * NR * kc * lane, pc + ic * MR * ldc + jc * NR * lane, Math.min(mcP, i1 - ic), nJ, kc, ldc);
        }
      }
    }
  }
}

class WasmGemm {
  private readonly memory = new WebAssembly.Memory({ initial: 16, maximum: MAX_PAGES, shared: true });
  private readonly modules: [WebAssembly.Module, WebAssembly.Module];
  private readonly runs: [RunFn, RunFn];
  private readonly ctrl = new Int32Array(new SharedArrayBuffer(4 * CTRL_WORDS));
  private workers: Worker[] | null = null;

  constructor() {
    const fma = relaxedSimd();
    this.modules = [new WebAssembly.Module(gemmModule(false, fma)), new WebAssembly.Module(gemmModule(true, fma))];
    this.runs = this.modules.map((mod) => new WebAssembly.Instance(mod, { e: { m: this.memory } }).exports.run as RunFn) as [RunFn, RunFn];
  }

  /** Helper threads (created on the first large product): one per further core, NBX_NUM_THREADS caps the total. */
  private helpers(): Worker[] {
    if (this.workers) return this.workers;
    const cores = Math.min(threadCount(), availableParallelism());
    this.workers = [];
    // A helper that cannot instantiate still checks in (the callers' threads take every unit); one that
    // fails inside a unit raises the failure word, and the call throws rather than return a partial C.
    const src = `
      const { workerData } = require('node:worker_threads');
      const { modules, memory, ctrl, consts } = workerData;
      const c = new Int32Array(ctrl);
      let runs = null;
      try { runs = modules.map((m) => new WebAssembly.Instance(m, { e: { m: memory } }).exports.run); } catch (e) { console.error('nbxtensor gemm worker:', e); }
      const runShare = ${runShare.toString()};
      let gen = 0;
      for (;;) {
        Atomics.wait(c, 0, gen);
        gen = Atomics.load(c, 0);
        if (runs) {
          try { const [MR, NR, lane] = consts[c[3]]; runShare(runs[c[3]], c, ${KC}, ${MC}, ${NC}, MR, NR, lane); }
          catch (e) { Atomics.store(c, ${CTRL_WORDS - 1}, 1); console.error('nbxtensor gemm worker:', e); }
        }
        Atomics.add(c, 1, 1);
        Atomics.notify(c, 1);
      }`;
    try {
      for (let t = 1; t < cores; t++) {
        const w = new Worker(src, { eval: true, workerData: { modules: this.modules, memory: this.memory, ctrl: this.ctrl.buffer, consts: [tileConsts(false), tileConsts(true)] } });
        w.unref();
        this.workers.push(w);
      }
    } catch { /* no worker threads here: the calling thread does all the work */ }
    return this.workers;
  }

  private ensure(bytes: number): void {
    const have = this.memory.buffer.byteLength;
    if (bytes > have) this.memory.grow(Math.ceil((bytes - have) / 65536));
  }

  /** C = alpha·op(A)·op(B) + beta·C for one matrix, element offsets oa, ob, oc. */
  run(p: GemmParams, A: FArr, B: FArr, C: FArr, oa: number, ob: number, oc: number): void {
    const f64 = C instanceof Float64Array;
    const [MR, NR, lane] = tileConsts(f64);
    // A gemv-like product with few columns runs transposed (Cᵀ = op(B)ᵀ·op(A)ᵀ), padding MR instead of NR.
    const swap = !rowInvariant && p.n < NR && p.m > p.n;
    const X = swap ? { buf: B, off: ob, ld: p.ldb, trans: !p.transB, rows: p.n } : { buf: A, off: oa, ld: p.lda, trans: p.transA, rows: p.m };
    const Y = swap ? { buf: A, off: oa, ld: p.lda, trans: p.transA, cols: p.m } : { buf: B, off: ob, ld: p.ldb, trans: !p.transB, cols: p.n };
    const k = p.k;
    // Chunks of rows/columns so that packed A, packed B and the accumulator fit the budget.
    const colChunk = Math.max(NR, Math.min(roundUp(Y.cols, NR), Math.floor(BUDGET_BYTES / 2 / (k * lane) / NR) * NR));
    const rowChunk = Math.max(MR, Math.min(roundUp(X.rows, MR), Math.floor((BUDGET_BYTES / 2 / lane / (k + colChunk)) / MR) * MR));
    for (let r0 = 0; r0 < X.rows; r0 += rowChunk) {
      for (let c0 = 0; c0 < Y.cols; c0 += colChunk) {
        const rows = Math.min(rowChunk, X.rows - r0), cols = Math.min(colChunk, Y.cols - c0);
        const mP = Math.ceil(rows / MR), nP = Math.ceil(cols / NR);
        const aBytes = mP * MR * k * lane, bBytes = nP * NR * k * lane, cBytes = mP * MR * nP * NR * lane;
        this.ensure(aBytes + bBytes + cBytes);
        const V = f64 ? new Float64Array(this.memory.buffer) : new Float32Array(this.memory.buffer);
        packPanels(V, 0, X.buf, X.off, X.ld, X.trans, r0, rows, MR, k);
        packPanels(V, aBytes / lane, Y.buf, Y.off, Y.ld, Y.trans, c0, cols, NR, k);
        const acc = (aBytes + bBytes) / lane;
        V.fill(0, acc, acc + cBytes / lane);
        this.compute(f64, [0, aBytes, aBytes + bBytes, mP, nP, k, nP * NR * lane], 2 * rows * cols * k);
        // Epilogue: C = alpha·acc + beta·C (beta = 0 never reads C, so NaN there is ignored).
        const ldAcc = nP * NR, { alpha, beta } = p;
        for (let r = 0; r < rows; r++) {
          const src = acc + r * ldAcc;
          if (swap) {
            for (let cc = 0; cc < cols; cc++) {
              const ci = oc + (c0 + cc) * p.ldc + r0 + r, v = alpha * V[src + cc]!;
              C[ci] = beta === 0 ? v : v + beta * C[ci]!;
            }
            continue;
          }
          const dst = oc + (r0 + r) * p.ldc + c0;
          if (alpha === 1 && beta === 0) { C.set(V.subarray(src, src + cols), dst); continue; } // a memcpy
          if (beta === 0) for (let cc = 0; cc < cols; cc++) C[dst + cc] = alpha * V[src + cc]!;
          else for (let cc = 0; cc < cols; cc++) C[dst + cc] = alpha * V[src + cc]! + beta * C[dst + cc]!;
        }
      }
    }
  }

  /** Runs the tiles on this thread and the helpers; small products stay on this thread. */
  private compute(f64: boolean, task: number[], flops: number): void {
    const [MR, NR, lane] = tileConsts(f64);
    const helpers = flops >= 2 ** 22 ? this.helpers() : [];
    const run = this.runs[f64 ? 1 : 0];
    const ctl = helpers.length ? this.ctrl : new Int32Array(CTRL_WORDS);
    ctl.set([0, 0, f64 ? 1 : 0, ...task, helpers.length + 1], 1);
    if (helpers.length) { Atomics.add(ctl, 0, 1); Atomics.notify(ctl, 0); }
    runShare(run, ctl, KC, MC, NC, MR, NR, lane);
    for (let done = Atomics.load(ctl, 1); done < helpers.length; done = Atomics.load(ctl, 1)) Atomics.wait(ctl, 1, done, 1000);
    if (Atomics.exchange(ctl, CTRL_WORDS - 1, 0)) throw new Error('gemm: a worker thread failed (see its message above)');
  }
}

const roundUp = (v: number, to: number): number => Math.ceil(v / to) * to;
function tileConsts(f64: boolean): [number, number, number] {
  const t = f64 ? TILE.f64 : TILE.f32;
  return [t.MR, t.NV * (16 / t.lane), t.lane];
}

/**
 * Packs rows [r0, r0+rows) of X (element (r, p) at off + (trans ? p·ld + r : r·ld + p)) into W-wide
 * panels, KC-deep blocks: block p0 holds panel after panel of kc×W values (zero padded past `rows`).
 */
function packPanels(V: FArr, base: number, X: FArr, off: number, ld: number, trans: boolean, r0: number, rows: number, W: number, k: number): void {
  const nP = Math.ceil(rows / W);
  for (let p0 = 0; p0 < k; p0 += KC) {
    const kc = Math.min(KC, k - p0);
    const blk = base + p0 * nP * W;
    for (let q = 0; q < nP; q++) {
      const dst = blk + q * W * kc, w = Math.min(W, rows - q * W), rb = r0 + q * W;
      if (w < W) V.fill(0, dst, dst + W * kc);
      if (trans) packStrips(V, dst, X, off + p0 * ld + rb, ld, 1, kc, W, w);
      else packStrips(V, dst, X, off + rb * ld + p0, 1, ld, kc, W, w);
    }
  }
}

/**
 * One panel: for each of kc steps p, W values X[src + p·sp + r·sr] (r < w) to V[dst + p·W + r].
 * Full 4- and 8-wide panels are unrolled: the generic loop costs twice as much per element.
 */
function packStrips(V: FArr, dst: number, X: FArr, src: number, sp: number, sr: number, kc: number, W: number, w: number): void {
  if (w === 4 && W === 4) {
    for (let p = 0, s = src, d = dst; p < kc; p++, s += sp, d += 4) {
      V[d] = X[s]!; V[d + 1] = X[s + sr]!; V[d + 2] = X[s + 2 * sr]!; V[d + 3] = X[s + 3 * sr]!;
    }
  } else if (w === 8 && W === 8) {
    for (let p = 0, s = src, d = dst; p < kc; p++, s += sp, d += 8) {
      V[d] = X[s]!; V[d + 1] = X[s + sr]!; V[d + 2] = X[s + 2 * sr]!; V[d + 3] = X[s + 3 * sr]!;
      V[d + 4] = X[s + 4 * sr]!; V[d + 5] = X[s + 5 * sr]!; V[d + 6] = X[s + 6 * sr]!; V[d + 7] = X[s + 7 * sr]!;
    }
  } else {
    for (let p = 0; p < kc; p++) for (let r = 0; r < w; r++) V[dst + p * W + r] = X[src + p * sp + r * sr]!;
  }
}

let wasmState: WasmGemm | null | undefined;
/** The packed kernel, or null where WebAssembly SIMD is unavailable (then the reference loop runs). */
function wasmGemm(): WasmGemm | null {
  if (wasmState === undefined) {
    try { wasmState = new WasmGemm(); } catch (e) {
      wasmState = null;
      process.stderr.write(`nbxtensor: WebAssembly SIMD gemm unavailable (${(e as Error).message}); using the scalar JavaScript loop\n`);
    }
  }
  return wasmState;
}


type IArr = Int8Array | Uint8Array | Int16Array | Int32Array | BigInt64Array;

/** The largest magnitude in a rows×cols block (as a double: only compared against 2^53). */
function maxAbs(arr: IArr, off: number, rows: number, cols: number, ld: number): number {
  let mx = 0;
  for (let r = 0; r < rows; r++) {
    for (let c = 0; c < cols; c++) { const v = Math.abs(Number(arr[off + r * ld + c]!)); if (v > mx) mx = v; }
  }
  return mx;
}

/**
 * Integer gemm (same parameters as `gemm`; alpha and beta integers): exact, then wrapped to the
 * output dtype as PyTorch's integer arithmetic does. Sums stay in doubles while they provably fit in
 * 2^53, else the matrix goes through BigInt.
 */
export function gemmInt(p: GemmParams): void {
  const { m, n, k, transA, transB, lda, ldb, ldc } = p;
  const batch = p.batch ?? 1;
  if (batch === 0 || m === 0 || n === 0) return;
  const A = p.a.buf as IArr, B = p.b.buf as IArr, C = p.c.buf as IArr;
  const big = C instanceof BigInt64Array;
  for (let q = 0; q < batch; q++) {
    const oa = p.a.offset + q * (p.strideA ?? 0), ob = p.b.offset + q * (p.strideB ?? 0), oc = p.c.offset + q * (p.strideC ?? 0);
    const safe = Math.abs(p.alpha) * k * maxAbs(A, oa, transA ? k : m, transA ? m : k, lda) * maxAbs(B, ob, transB ? n : k, transB ? k : n, ldb)
      + Math.abs(p.beta) * maxAbs(C, oc, m, n, ldc) < 2 ** 53;
    for (let i = 0; i < m; i++) {
      for (let j = 0; j < n; j++) {
        const ia = (l: number): number => oa + (transA ? l * lda + i : i * lda + l);
        const ib = (l: number): number => ob + (transB ? j * ldb + l : l * ldb + j);
        const ic = oc + i * ldc + j;
        if (safe) {
          let acc = 0;
          for (let l = 0; l < k; l++) acc += Number(A[ia(l)]!) * Number(B[ib(l)]!);
          const r = p.alpha * acc + (p.beta === 0 ? 0 : p.beta * Number(C[ic]!));
          // Typed-array stores wrap modulo 2^bits, as the integer dtype does.
          if (big) (C as BigInt64Array)[ic] = BigInt(r);
          else (C as Int32Array)[ic] = r;
        } else {
          let acc = 0n;
          for (let l = 0; l < k; l++) acc += BigInt(A[ia(l)]!) * BigInt(B[ib(l)]!);
          const r = BigInt(p.alpha) * acc + (p.beta === 0 ? 0n : BigInt(p.beta) * BigInt(C[ic]!));
          if (big) (C as BigInt64Array)[ic] = BigInt.asIntN(64, r);
          else (C as Int32Array)[ic] = Number(BigInt.asIntN(32, r));
        }
      }
    }
  }
}

export const kernels = {
  gemm: gemm,
  gemm_int: gemmInt,
} satisfies BackendKernels;
