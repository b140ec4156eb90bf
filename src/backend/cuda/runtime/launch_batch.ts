// Launch batching for small elementwise kernels: the host cost of a small op.
//
// One cuLaunchKernel costs 4-5 µs of host time on its own, so a loop of tiny ops cannot be fast if
// each op launches. Small elementwise ops (numel <= maxNumel, operands contiguous or single-element
// broadcasts) are appended instead as commands to a host-side batch, and a flush submits the whole
// batch as ONE launch of a "batch kernel":
//
// * The command list travels BY VALUE as the kernel's only parameter (`struct { u64 w[512]; }`):
//   no device buffer, no copy, no event. 4 KiB of parameters is accepted everywhere and holds ~120
//   commands of a binary op, so one launch's host cost (~5 µs) spreads to < 0.05 µs per op; the
//   32 KiB parameter space of newer drivers would save little and double the compile (one variant).
// * Command layout (8-byte words): header {u32 kind, u32 numel}, the output pointer, one pointer per
//   input (element offsets folded in), one word per scalar parameter. Its length is known from the
//   kind, so the kernel walks the list without lengths.
// * One thread block runs the commands in order with __syncthreads() between them: global writes
//   before the barrier are visible to the whole block after it, so dependent ops (and a buffer freed
//   and reused inside one batch, which the caching allocator allows) are correct.
// * Each distinct expression (an interned Expr + which inputs are single-element broadcasts) is a
//   "kind": a __device__ function rendered by the same CudaRenderer as the standalone kernels, and
//   the batch kernel switches on the kind. The module is compiled for a SET of kinds (sorted by their
//   code, so the next process hits the disk cache); kinds not in it launch directly, as without
//   batching.
// * Rebuild policy (bounded compile cost): a kind is a candidate once it ran MIN_USES times; every
//   direct launch of a candidate ("hot miss") is host time batching would have saved (~MISS_US). A
//   rebuild is considered after REBUILD_AFTER (+ module size) hot misses, and happens only if its
//   estimated NVRTC time (measured ms per kind) fits the compile allowance: COMPILE_BUDGET_MS per
//   process plus what the hot misses so far cost. So a loop's few kinds join within a few dozen
//   iterations, while a program of many one-off kinds (a test suite) spends at most about the budget
//   plus the host time the misses cost anyway. When the allowance does not cover every candidate,
//   the module keeps the most used kinds.
//
// Safety: the batch sits in front of the stream. CudaContext.pending is set while commands are
// queued, and every driver call of the context, every read of Stream.handle (so cuBLASLt and every
// other library call) and every event call flushes first (driver.ts). The flush itself launches on
// the stream's raw handle. Flushes also happen when the parameter block is full, on setImmediate (a
// program that enqueues and then waits on something else still runs its work) and before exit.
// NBX_CUDA_BATCH=0 turns batching off.

import { DTYPES, type DTypeName } from '../../../dtype/dtypes.js';
import type { Expr } from '../../../ir/expr.js';
import { CUDA_PRELUDE } from '../../../ir/render_c.js';
import { denseAs, type StridedRef } from '../../backend.js';
import { allocParamBuffer, launchParamBuffer, type CudaContext, type CudaKernel, type ParamBuffer, type Stream } from './driver.js';
import { loadSource } from './nvrtc.js';
import type { CudaBuffer } from './device.js';
import { R } from './elementwise.js';

/** Parameter space every architecture and driver accepts (bytes). */
const PARAM_BYTES = 4096;
/** Kinds compiled into one module at most. */
const MAX_KINDS = 256;
/** Hot misses (direct launches of candidate kinds) before a rebuild is considered (+ module size). */
const REBUILD_AFTER = 32;
/**
 * Direct launches of one kind before it is a candidate for the module: kinds that run once or twice
 * (a test suite, a warm-up) never cost a compile; a loop's kinds qualify within a few iterations.
 */
const MIN_USES = 4;
/** Host time a direct launch costs more than a batch command (µs): what one hot miss is worth. */
const MISS_US = 4;
/** Module compile time (ms) a process may spend before rebuilds must be paid for by hot misses. */
const COMPILE_BUDGET_MS = 2000;
/**
 * Estimated compile time of a module: fixed part, and per kind until a compile was measured. Kinds
 * are inlined into the batch kernel's switch, which costs tens of ms each (nvcc -cubin on a loaded
 * 2-core host: 23 kinds 2.6 s, 256 kinds 20 s).
 */
const COMPILE_BASE_MS = 100;
const COMPILE_MS_PER_KIND = 30;

let batchCount = 0;

const P_F32 = 0, P_F64 = 1, P_I32 = 2, P_I64 = 3;

/** One batchable expression specialization. */
interface Kind {
  /** Index in the current batch module, or -1 (launched directly until the next rebuild). */
  index: number;
  readonly nin: number;
  /** Scalar parameter kinds (P_*). */
  readonly pcodes: Uint8Array;
  /** Words per command: header, out, inputs, params. */
  readonly words: number;
  /** The device function without its name: the structural key the module is sorted by. */
  readonly body: string;
  /** For fault reports: root op and dtype. */
  readonly label: string;
  /** Times it ran (batched or not; ranks kinds when MAX_KINDS is exceeded). */
  uses: number;
  /** The flush number it was last added in (builds the list of kinds for a fault report). */
  mark: number;
}

export interface LaunchBatchStats {
  /** Batch launches submitted. */
  batches: number;
  /** Elementwise ops that ran as batch commands. */
  commands: number;
  /** Small elementwise ops launched directly because their kind was not in the batch module yet. */
  direct: number;
  /** Batch modules built. */
  rebuilds: number;
  /** Kinds in the current batch module. */
  kinds: number;
  /** Kinds compiled over all rebuilds (a kind counts again in every module it is part of). */
  compiledKinds: number;
  /** Milliseconds spent building modules (NVRTC compile, or disk-cache read, plus module load). */
  compileMs: number;
  /** Rebuilds not done (or done with fewer kinds) because the compile allowance did not cover them. */
  deferred: number;
}

interface BackendLike {
  readonly ctx: CudaContext;
  readonly stream: Stream;
}

export class LaunchBatch {
  /** Largest op (elements) that is batched: see create(). */
  readonly maxNumel: number;
  readonly threads: number;
  readonly stats: LaunchBatchStats = { batches: 0, commands: 0, direct: 0, rebuilds: 0, kinds: 0, compiledKinds: 0, compileMs: 0, deferred: 0 };
  private readonly ctx: CudaContext;
  private readonly stream: Stream;
  private readonly pb: ParamBuffer;
  private readonly u32: Uint32Array;
  private readonly i32: Int32Array;
  private readonly f32: Float32Array;
  private readonly f64: Float64Array;
  private readonly u64: BigUint64Array;
  private readonly i64: BigInt64Array;
  /** Capacity in words of the parameter block (word 0 holds the command count). */
  private readonly capWords = PARAM_BYTES / 8;
  private kernel: CudaKernel | null = null;
  private pos = 1;
  private count = 0;
  private flushNo = 1;
  private batchKinds: Kind[] = [];
  private readonly seen: Kind[] = [];
  /** Where this batch keeps its kinds on an (interned, shared) Expr: kind numbers are per module. */
  private readonly memoKey = `ewb${batchCount++}`;
  /** Hot misses since the last rebuild (attempt), and in all. */
  private hotMisses = 0;
  private hotMissesTotal = 0;
  private rebuildAt: number;
  private readonly rebuildAfter: number;
  private readonly minUses: number;
  private readonly budgetMs: number;
  /** Measured compile ms per kind (the estimate until a module was really compiled). */
  private msPerKind = COMPILE_MS_PER_KIND;
  private scheduled = false;
  /** The current batch module's source (for compile checks with nvcc). */
  source = '';
  private deferred: unknown = null;
  /** The pending hook installed on the context while commands are queued. */
  private readonly flushFn = (): void => this.flush();
  private readonly onImmediate = (): void => {
    this.scheduled = false;
    try {
      this.ctx.flushPending();
    } catch (e) {
      this.deferred = e; // surfaces at the next batched op instead of as an uncaught exception
    }
  };

  /** The batch for a backend, or null when NBX_CUDA_BATCH=0. */
  static create(be: BackendLike, env: Record<string, string | undefined> = process.env): LaunchBatch | null {
    if (env.NBX_CUDA_BATCH === '0') return null;
    return new LaunchBatch(be, env);
  }

  protected constructor(be: BackendLike, env: Record<string, string | undefined>) {
    this.ctx = be.ctx;
    this.stream = be.stream;
    const info = be.ctx.info;
    // A whole block: the batch runs on one SM, so use as many threads as a block may have.
    // NBX_CUDA_BATCH_THREADS overrides (tests under the emulator run fewer, faster).
    const t = Number(env.NBX_CUDA_BATCH_THREADS);
    this.threads = Math.min(info.maxThreadsPerBlock, 1024, t > 0 ? 2 ** Math.floor(Math.log2(t)) : 1024);
    // Up to 8 elements per thread: a larger op would spend more GPU time in one block than a
    // full-grid launch costs, and its host cost is small next to its memory traffic anyway.
    this.maxNumel = 8 * this.threads;
    // knobs (tests, experiments): NBX_CUDA_BATCH_REBUILD_AFTER=1 NBX_CUDA_BATCH_MIN_USES=1 batch every
    // kind at once; NBX_CUDA_BATCH_COMPILE_MS sets the compile budget (ms per process)
    this.rebuildAfter = this.rebuildAt = Number(env.NBX_CUDA_BATCH_REBUILD_AFTER) || REBUILD_AFTER;
    this.minUses = Number(env.NBX_CUDA_BATCH_MIN_USES) || MIN_USES;
    const budget = Number(env.NBX_CUDA_BATCH_COMPILE_MS);
    this.budgetMs = env.NBX_CUDA_BATCH_COMPILE_MS !== undefined && budget >= 0 ? budget : COMPILE_BUDGET_MS;
    this.pb = allocParamBuffer(this.capWords * 8);
    const ab = this.pb.buffer;
    this.u32 = new Uint32Array(ab);
    this.i32 = new Int32Array(ab);
    this.f32 = new Float32Array(ab);
    this.f64 = new Float64Array(ab);
    this.u64 = new BigUint64Array(ab);
    this.i64 = new BigInt64Array(ab);
    process.on('beforeExit', () => {
      try {
        this.ctx.flushPending();
      } catch {
        /* exiting: a failure here has nobody to report to */
      }
    });
    // NBX_CUDA_BATCH_STATS=1: the counters on stderr at exit (rebuilds and compile time of a run)
    if (env.NBX_CUDA_BATCH_STATS === '1') process.on('exit', () => process.stderr.write(`nbx launch batch: ${JSON.stringify(this.stats)}\n`));
  }

  /** Queue a small elementwise op (see add); false when it must launch directly. */
  tryElementwise(expr: Expr, ins: readonly StridedRef[], params: readonly (number | bigint)[], out: StridedRef): boolean {
    const shape = out.shape;
    let n = 1;
    for (let d = 0; d < shape.length; d++) n *= shape[d]!;
    return n > 0 && n <= this.maxNumel && this.add(expr, ins, params, out, n);
  }

  /**
   * Queue `expr` over `ins` into `out` (numel `n` <= maxNumel) as a batch command. False when the op
   * must launch directly: operand layouts the batch kernel does not express, unsupported dtypes, or a
   * kind not in the current module yet.
   */
  add(expr: Expr, ins: readonly StridedRef[], params: readonly (number | bigint)[], out: StridedRef, n: number): boolean {
    if (this.deferred !== null) { const e = this.deferred; this.deferred = null; throw e; }
    // operands: same shape as out and contiguous, or a single element (broadcast scalar)
    const shape = out.shape;
    let mask = 0;
    for (let s = 0; s < ins.length; s++) {
      const r = ins[s]!;
      if (!denseAs(r, shape)) {
        if (numelOf(r.shape) !== 1) return false;
        mask |= 1 << s;
      }
    }
    const memo = expr.memo as Record<string, (Kind | null)[] | undefined>;
    const byMask = memo[this.memoKey] ?? (memo[this.memoKey] = []);
    let k = byMask[mask];
    if (k === undefined) k = byMask[mask] = this.makeKind(expr, ins, out, mask);
    if (k === null) return false;
    k.uses++;
    // a hot miss may rebuild the module (see the policy at the top); then this op joins the batch
    if (k.index < 0 && (k.uses < this.minUses || ++this.hotMisses < this.rebuildAt || Boolean(this.ctx.capturing) || !this.rebuild() || k.index < 0)) {
      this.stats.direct++;
      return false;
    }
    // write the command
    let p = this.pos;
    if (p + k.words > this.capWords) { this.flush(); p = this.pos; }
    if (this.count === 0) {
      this.ctx.pending = this.flushFn;
      if (!this.scheduled) { this.scheduled = true; setImmediate(this.onImmediate); }
    }
    this.u32[2 * p] = k.index;
    this.u32[2 * p + 1] = n;
    const u64 = this.u64;
    u64[p + 1] = out.offset === 0 ? (out.buf as CudaBuffer).ptr : (out.buf as CudaBuffer).ptr + BigInt(out.offset * DTYPES[out.dtype].itemsize);
    p += 2;
    for (let s = 0; s < ins.length; s++) {
      const r = ins[s]!;
      u64[p++] = r.offset === 0 ? (r.buf as CudaBuffer).ptr : (r.buf as CudaBuffer).ptr + BigInt(r.offset * DTYPES[r.dtype].itemsize);
    }
    const pc = k.pcodes;
    for (let j = 0; j < pc.length; j++, p++) {
      const v = params[j]!;
      switch (pc[j]) {
        case P_F64: this.f64[p] = Number(v); break;
        case P_F32: this.f32[2 * p] = Number(v); this.u32[2 * p + 1] = 0; break;
        case P_I32: this.i32[2 * p] = Number(v); this.u32[2 * p + 1] = 0; break;
        default: this.i64[p] = typeof v === 'bigint' ? v : BigInt(v);
      }
    }
    this.pos = p;
    this.count++;
    if (k.mark !== this.flushNo) { k.mark = this.flushNo; this.batchKinds.push(k); }
    return true;
  }

  /** Submit the queued commands as one launch (no-op when empty). */
  flush(): void {
    if (this.ctx.pending === this.flushFn) this.ctx.pending = null;
    const count = this.count;
    if (count === 0) return;
    this.u32[0] = count;
    this.u32[1] = 0;
    const k = this.kernel!;
    const label = `ew_batch(${count} ops: ${this.batchKinds.map((x) => x.label).join(', ')})`;
    this.count = 0;
    this.pos = 1;
    this.flushNo++;
    this.batchKinds = [];
    this.stats.batches++;
    this.stats.commands += count;
    launchParamBuffer(k, this.threads, this.pb, this.stream, label);
  }

  private makeKind(expr: Expr, ins: readonly StridedRef[], out: StridedRef, mask: number): Kind | null {
    const dts: DTypeName[] = [out.dtype, ...ins.map((r) => r.dtype)];
    for (const d of dts) if (!R.caps.dtypes.has(d) || DTYPES[d].kind === 'complex') return null;
    const pds = expr.paramDTypes();
    const pcodes = new Uint8Array(pds.length);
    for (let j = 0; j < pds.length; j++) {
      const d = pds[j]!;
      if (DTYPES[d].kind === 'complex') return null;
      const t = R.paramType(d);
      pcodes[j] = t === 'f32' ? P_F32 : t === 'f64' ? P_F64 : t === 'i32' ? P_I32 : P_I64;
    }
    const nin = ins.length;
    const args = ['const int n', 'const unsigned long long w0', ...ins.map((_, s) => `const unsigned long long w${s + 1}`), ...pds.map((_, j) => `const unsigned long long q${j}`)];
    const decl = [
      `${R.storageType(out.dtype)}* out = (${R.storageType(out.dtype)}*)w0;`,
      ...ins.map((r, s) => `const ${R.storageType(r.dtype)}* in${s} = (const ${R.storageType(r.dtype)}*)w${s + 1};`),
      ...pds.map((_, j) => {
        switch (pcodes[j]) {
          case P_F64: return `const double p${j} = __longlong_as_double((long long)q${j});`;
          case P_F32: return `const float p${j} = __int_as_float((int)(unsigned)q${j});`;
          case P_I32: return `const int p${j} = (int)(unsigned)q${j};`;
          default: return `const long long p${j} = (long long)q${j};`;
        }
      }),
    ];
    // no __restrict__: in-place ops write the buffer they read (each element by the thread that read it)
    const [code, res] = R.render(expr, (s, d) => R.load(d, `in${s}`, mask & (1 << s) ? '0' : 'i'), (s) => `p${s}`);
    const body = `(${args.join(', ')}) {
  ${decl.join('\n  ')}
  for (int i = threadIdx.x; i < n; i += blockDim.x) {
    ${code}
    ${R.store(out.dtype, 'out', 'i', res)}
  }
}`;
    const k: Kind = { index: -1, nin, pcodes, words: 2 + nin + pds.length, body, label: `${expr.op}:${expr.dtype}`, uses: 0, mark: 0 };
    this.seen.push(k);
    return k;
  }

  /**
   * Rebuild the module with the most used candidate kinds the compile allowance covers; false when
   * the module would not change (nothing new, or nothing new affordable).
   */
  private rebuild(): boolean {
    this.hotMissesTotal += this.hotMisses;
    this.hotMisses = 0;
    const st = this.stats;
    const allowance = this.budgetMs + (this.hotMissesTotal * MISS_US) / 1000 - st.compileMs;
    const afford = Math.min(MAX_KINDS, Math.floor((allowance - COMPILE_BASE_MS) / this.msPerKind));
    const all = this.seen.filter((k) => k.uses >= this.minUses);
    let kinds = all;
    if (kinds.length > afford) {
      // the most used kinds (current module members first among equals: no churn)
      kinds = [...all].sort((a, b) => b.uses - a.uses || b.index - a.index).slice(0, Math.max(afford, 0));
      st.deferred++;
      // look again once the hot misses have paid for one more kind
      this.rebuildAt = Math.max(this.rebuildAfter, Math.ceil(((COMPILE_BASE_MS + this.msPerKind * (kinds.length + 1) - allowance) * 1000) / MISS_US));
    } else {
      this.rebuildAt = this.rebuildAfter + all.length;
    }
    if (kinds.length === 0 || kinds.every((k) => k.index >= 0)) return false;
    this.flush(); // queued commands use the old module's kind numbers
    // sorted by code: the same set of kinds gives the same source (disk cache) in every process
    kinds.sort((a, b) => (a.body < b.body ? -1 : a.body > b.body ? 1 : 0));
    const cases = kinds.map((k, i) => {
      const a = ['n'];
      for (let j = 1; j < k.words; j++) a.push(`b.w[p + ${j}]`);
      return `case ${i}: ewb${i}(${a.join(', ')}); p += ${k.words}; break;`;
    }).join('\n      ');
    const src = [
      CUDA_PRELUDE,
      ...kinds.map((k, i) => `__device__ __forceinline__ void ewb${i}${k.body}`),
      `struct ew_batch_t { unsigned long long w[${this.capWords}]; };
extern "C" __global__ void __launch_bounds__(1024) ew_batch(const ew_batch_t b) {
  const int count = (int)(unsigned)b.w[0];
  int p = 1;
  for (int c = 0; c < count; c++) {
    const unsigned long long h = b.w[p];
    const int n = (int)(h >> 32);
    switch ((int)(unsigned)h) {
      ${cases}
      default: return;
    }
    __syncthreads();
  }
}`,
    ].join('\n');
    const t0 = performance.now();
    let kernel: CudaKernel, compiledMs: number;
    try {
      ({ kernel, compiledMs } = this.compile(src));
    } catch (e) {
      this.rebuildAt = Infinity; // a generator bug: report it once, then keep launching directly
      throw e;
    }
    st.compileMs += Math.max(performance.now() - t0, compiledMs);
    // refine the estimate from a real compile (cache hits say nothing about compile speed)
    if (compiledMs > 0) this.msPerKind = Math.max(0.25, (compiledMs - COMPILE_BASE_MS) / kinds.length);
    for (const k of this.seen) k.index = -1;
    kinds.forEach((k, i) => { k.index = i; });
    this.source = src;
    this.kernel = kernel;
    st.rebuilds++;
    st.kinds = kinds.length;
    st.compiledKinds += kinds.length;
    return true;
  }

  /** The module's kernel, and its NVRTC time (0 on a cache hit). A seam for scripts/batch-policy-sim.mjs. */
  protected compile(src: string): { kernel: CudaKernel; compiledMs: number } {
    const { module, compiled } = loadSource(this.ctx, src, { options: ['--std=c++17'], includeCudaHeaders: false, name: 'ew_batch' });
    return { kernel: module.getFunction('ew_batch', []), compiledMs: compiled.from === 'compiled' ? compiled.compileMs : 0 };
  }
}

function numelOf(shape: readonly number[]): number {
  let n = 1;
  for (let d = 0; d < shape.length; d++) n *= shape[d]!;
  return n;
}

