// Launch batching for small elementwise kernels (issue #7: host cost of a small op).
//
// One cuLaunchKernel costs 4-5 µs of host time on its own, so a loop of tiny ops cannot be fast if
// each op launches. Small elementwise ops (numel <= maxNumel, operands contiguous or single-element
// broadcasts) are appended instead as commands to a host-side batch, and a flush submits the whole
// batch as ONE launch of a "batch kernel":
//
// * The command list travels BY VALUE as the kernel's only parameter (`struct { u64 w[NW]; }`):
//   no device buffer, no copy, no event. Parameter space is 4 KiB everywhere and 32764 bytes on
//   compute capability >= 7.0 with a CUDA >= 12.1 driver and NVRTC; two variants are compiled (the
//   small one is used when the commands fit, so the driver copies less).
// * Command layout (8-byte words): header {u32 kind, u32 numel}, the output pointer, one pointer per
//   input (element offsets folded in), one word per scalar parameter. Its length is known from the
//   kind, so the kernel walks the list without lengths.
// * One thread block runs the commands in order with __syncthreads() between them: global writes
//   before the barrier are visible to the whole block after it, so dependent ops (and a buffer freed
//   and reused inside one batch, which the caching allocator allows) are correct.
// * Each distinct expression (an interned Expr + which inputs are single-element broadcasts) is a
//   "kind": a __device__ function rendered by the same CudaRenderer as the standalone kernels, and
//   the batch kernel switches on the kind. The module is compiled for a SET of kinds: kinds not in the
//   current module launch directly (as without batching); after `rebuildAfter` such direct launches,
//   the module is rebuilt with every kind seen so far (sorted by their code, so the next process hits
//   the disk cache), and the threshold grows with the module so recompiles stay rare.
//
// Safety: the batch sits in front of the stream. CudaContext.pending is set while commands are
// queued, and every driver call of the context, every read of Stream.handle (so cuBLASLt and every
// other library call) and every event call flushes first (driver.ts). The flush itself launches on
// the stream's raw handle. Flushes also happen when the parameter block is full, on setImmediate (a
// program that enqueues and then waits on something else still runs its work) and before exit.
// NBX_CUDA_BATCH=0 turns batching off.

import { DTYPES, type DTypeName } from '../../dtype/dtypes.js';
import type { Expr } from '../../ir/expr.js';
import { CUDA_PRELUDE } from '../../ir/render_c.js';
import type { StridedRef } from '../backend.js';
import { allocParamBuffer, driverVersion, launchParamBuffer, type CudaContext, type CudaKernel, type ParamBuffer, type Stream } from './driver.js';
import { getKernel, Nvrtc } from './nvrtc.js';
import { R, type CudaBuffer } from './backend.js';

/** Parameter space every architecture and driver accepts (bytes). */
const PARAM_BYTES_SMALL = 4096;
/** Parameter space on compute capability >= 7.0 with CUDA >= 12.1 (driver and NVRTC). */
const PARAM_BYTES_LARGE = 32764;
/** Kinds compiled into one module at most: beyond that, new kinds keep launching directly. */
const MAX_KINDS = 256;
/** Direct launches of kinds outside the module before it is rebuilt (grows with the module). */
const REBUILD_AFTER = 32;
/**
 * Direct launches of one kind before it is a candidate for the module: kinds that run once or twice
 * (a test suite, a warm-up) never cost a compile; a loop's kinds qualify within a few iterations.
 */
const MIN_USES = 4;

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
}

interface BackendLike {
  readonly ctx: CudaContext;
  readonly stream: Stream;
}

export class LaunchBatch {
  /** Largest op (elements) that is batched: see create(). */
  readonly maxNumel: number;
  readonly threads: number;
  readonly stats: LaunchBatchStats = { batches: 0, commands: 0, direct: 0, rebuilds: 0, kinds: 0 };
  private readonly ctx: CudaContext;
  private readonly stream: Stream;
  private readonly pb: ParamBuffer;
  private readonly u32: Uint32Array;
  private readonly i32: Int32Array;
  private readonly f32: Float32Array;
  private readonly f64: Float64Array;
  private readonly u64: BigUint64Array;
  private readonly i64: BigInt64Array;
  /** Capacity in words of the large / small variants (word 0 holds the command count). */
  private readonly capWords: number;
  private readonly smallWords: number;
  private kSmall: CudaKernel | null = null;
  private kLarge: CudaKernel | null = null;
  private pos = 1;
  private count = 0;
  private flushNo = 1;
  private batchKinds: Kind[] = [];
  private readonly seen: Kind[] = [];
  private misses = 0;
  private rebuildAt: number;
  private readonly minUses: number;
  /** Kinds that reached minUses since the last rebuild. */
  private candidates = 0;
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

  private constructor(be: BackendLike, env: Record<string, string | undefined>) {
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
    // knobs for tests: NBX_CUDA_BATCH_REBUILD_AFTER=1 NBX_CUDA_BATCH_MIN_USES=1 batch every kind at once
    this.rebuildAt = Number(env.NBX_CUDA_BATCH_REBUILD_AFTER) || REBUILD_AFTER;
    this.minUses = Number(env.NBX_CUDA_BATCH_MIN_USES) || MIN_USES;
    let nvrtcOk = false;
    try {
      const v = Nvrtc.get().version;
      nvrtcOk = v[0] > 12 || (v[0] === 12 && v[1] >= 1);
    } catch {
      nvrtcOk = false;
    }
    const large = info.cc[0] >= 7 && driverVersion() >= 12010 && nvrtcOk;
    const bytes = large ? PARAM_BYTES_LARGE : PARAM_BYTES_SMALL;
    this.capWords = Math.floor(bytes / 8);
    this.smallWords = Math.floor(PARAM_BYTES_SMALL / 8);
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
      if (!contiguousAs(r, shape)) {
        if (numelOf(r.shape) !== 1) return false;
        mask |= 1 << s;
      }
    }
    const memo = expr.memo as { ewb?: (Kind | null)[] };
    const byMask = memo.ewb ?? (memo.ewb = []);
    let k = byMask[mask];
    if (k === undefined) k = byMask[mask] = this.makeKind(expr, ins, out, mask);
    if (k === null) return false;
    if (k.index < 0) {
      if (++k.uses === this.minUses) this.candidates++;
      if (++this.misses < this.rebuildAt || this.candidates === 0 || !this.rebuild() || k.index < 0) { this.stats.direct++; return false; }
      k.uses--; // counted again below
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
    k.uses++;
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
    const k = (this.pos <= this.smallWords ? this.kSmall : this.kLarge)!;
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

  /** Rebuild the module with every kind seen so far; false when nothing changed. */
  private rebuild(): boolean {
    this.misses = 0;
    this.candidates = 0;
    let kinds = this.seen.filter((k) => k.uses >= this.minUses);
    if (kinds.length > MAX_KINDS) kinds = kinds.sort((a, b) => b.uses - a.uses).slice(0, MAX_KINDS);
    // sorted by code: the same set of kinds gives the same source (disk cache) in every process
    kinds.sort((a, b) => (a.body < b.body ? -1 : a.body > b.body ? 1 : 0));
    if (kinds.length === this.stats.kinds && kinds.every((k) => k.index >= 0)) return false;
    this.flush(); // queued commands use the old module's kind numbers
    const cases = kinds.map((k, i) => {
      const a = ['n'];
      for (let j = 1; j < k.words; j++) a.push(`b.w[p + ${j}]`);
      return `case ${i}: ewb${i}(${a.join(', ')}); p += ${k.words}; break;`;
    }).join('\n      ');
    const variant = (name: string, words: number): string => `struct ${name}_t { unsigned long long w[${words}]; };
extern "C" __global__ void __launch_bounds__(1024) ${name}(const ${name}_t b) {
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
}`;
    const src = [
      CUDA_PRELUDE,
      ...kinds.map((k, i) => `__device__ __forceinline__ void ewb${i}${k.body}`),
      variant('ew_batch_s', this.smallWords),
      ...(this.capWords > this.smallWords ? [variant('ew_batch_l', this.capWords)] : []),
    ].join('\n');
    const opts = { options: ['--std=c++17'], includeCudaHeaders: false };
    let ks: CudaKernel, kl: CudaKernel;
    try {
      ks = getKernel(this.ctx, src, 'ew_batch_s', [], opts);
      kl = this.capWords > this.smallWords ? getKernel(this.ctx, src, 'ew_batch_l', [], opts) : ks;
    } catch (e) {
      this.rebuildAt = Infinity; // a generator bug: report it once, then keep launching directly
      throw e;
    }
    for (const k of this.seen) k.index = -1;
    kinds.forEach((k, i) => { k.index = i; });
    this.source = src;
    this.kSmall = ks;
    this.kLarge = kl;
    this.stats.rebuilds++;
    this.stats.kinds = kinds.length;
    this.rebuildAt = Math.max(this.rebuildAt, kinds.length);
    return true;
  }
}

function numelOf(shape: readonly number[]): number {
  let n = 1;
  for (let d = 0; d < shape.length; d++) n *= shape[d]!;
  return n;
}

/** A contiguous operand whose shape is exactly `shape` (size-1 dims may have any stride). */
function contiguousAs(r: StridedRef, shape: readonly number[]): boolean {
  if (r.shape.length !== shape.length) return false;
  let acc = 1;
  for (let d = shape.length - 1; d >= 0; d--) {
    const z = shape[d]!;
    if (r.shape[d] !== z) return false;
    if (z !== 1 && r.strides[d] !== acc) return false;
    acc *= z;
  }
  return true;
}
