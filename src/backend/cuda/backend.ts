// The CUDA backend: device memory from the caching allocator, one stream for all work, elementwise
// kernels rendered from the IR by CudaRenderer and compiled with NVRTC (cached in memory and on disk),
// reductions, GEMM through cuBLASLt. Loaded only when a tensor first asks for 'cuda'.

import { DTYPES, allocStorage, type DTypeName, type StorageArray } from '../../dtype/dtypes.js';
import type { Expr } from '../../ir/expr.js';
import { CudaRenderer, CUDA_PRELUDE } from '../../ir/render_c.js';
import { type Backend, type StridedRef } from '../backend.js';
import { coalesce } from '../cpu/elementwise.js';
import { broadcastStrides } from '../../tensor/shape.js';
import { CudaContext, type CudaKernel, type Stream, type ArgType, type KernelArg } from './driver.js';
import { getKernel } from './nvrtc.js';
import { CachingAllocator } from '../../memory/caching_allocator.js';
import { UnsupportedError } from '../../errors.js';
import { CudaTuning, ELEMENTWISE_SPACE, TUNE_MIN_ELEMENTS } from './tuning.js';
import { PinnedStaging } from './staging.js';
import { bucketSize } from '../../autotune/index.js';
import { LaunchBatch } from './launch_batch.js';

/** A device buffer: the allocator's pointer and its size in bytes. */
export interface CudaBuffer { ptr: bigint; bytes: number }

export const R = new CudaRenderer();

export class CudaBackend implements Backend {
  readonly type = 'cuda' as const;
  readonly ctx: CudaContext;
  readonly stream: Stream;
  readonly allocator: CachingAllocator;
  readonly smCount: number;
  readonly tuning: CudaTuning;
  readonly staging: PinnedStaging;
  private readonly ewDefault: { threads: number; waves: number };
  private readonly kernels = new Map<string, CudaKernel>();
  /** Small elementwise ops queue here and launch together (launch_batch.ts); null when NBX_CUDA_BATCH=0. */
  readonly batch: LaunchBatch | null;

  constructor() {
    this.ctx = CudaContext.get(0);
    this.stream = this.ctx.createStream(true);
    this.allocator = new CachingAllocator(this.ctx.rawAllocator());
    this.smCount = this.ctx.info.smCount;
    this.tuning = new CudaTuning(this.ctx, this.stream);
    // the untuned launch shape comes from the device profile (threads per block), not from code
    this.ewDefault = { threads: this.tuning.profile.defaults.elementwise.threadsPerBlock, waves: 16 };
    this.staging = new PinnedStaging(this.ctx, this.stream);
    this.batch = LaunchBatch.create(this);
  }

  checkDType(op: string, d: DTypeName): void {
    if (!R.caps.dtypes.has(d)) throw new UnsupportedError(op, `dtype ${d} is not supported on cuda yet`);
  }

  alloc(dtype: DTypeName, numel: number, zero = false): CudaBuffer {
    const bytes = Math.max(numel * DTYPES[dtype].itemsize, 1);
    const ptr = this.allocator.malloc(bytes, 0);
    if (zero) this.ctx.memsetD8(ptr, 0, bytes, this.stream);
    return { ptr, bytes };
  }
  free(buf: unknown): void { this.allocator.free((buf as CudaBuffer).ptr); }

  upload(dtype: DTypeName, data: StorageArray): CudaBuffer {
    const buf = this.alloc(dtype, data.length / DTYPES[dtype].lanes);
    if (data.byteLength > 0) this.staging.upload(buf.ptr, new Uint8Array(data.buffer, data.byteOffset, data.byteLength));
    return buf;
  }

  /** Host bytes into a device buffer at a byte offset (streamed checkpoint loading). */
  writeBytes(buf: unknown, byteOffset: number, data: Uint8Array): void {
    if (data.byteLength) this.staging.upload((buf as CudaBuffer).ptr + BigInt(byteOffset), data);
  }

  downloadSync(buf: unknown, dtype: DTypeName, offset: number, numel: number): StorageArray {
    const host = allocStorage(dtype, numel);
    const b = buf as CudaBuffer;
    if (host.byteLength > 0) this.staging.downloadSync(new Uint8Array(host.buffer, host.byteOffset, host.byteLength), b.ptr + BigInt(offset * DTYPES[dtype].itemsize));
    return host;
  }

  /** Waits for queued work and copies back through pinned buffers, without blocking the event loop. */
  async download(buf: unknown, dtype: DTypeName, offset: number, numel: number): Promise<StorageArray> {
    const host = allocStorage(dtype, numel);
    const b = buf as CudaBuffer;
    if (host.byteLength > 0) await this.staging.download(new Uint8Array(host.buffer, host.byteOffset, host.byteLength), b.ptr + BigInt(offset * DTYPES[dtype].itemsize), true);
    return host;
  }

  async synchronize(): Promise<void> { await this.stream.synchronizeAsync(); }

  /** Compiles (once) and returns a kernel; `key` identifies the source so generation is skipped on hits. */
  kernel(key: string, make: () => { src: string; name: string; sig: ArgType[] }): CudaKernel {
    let k = this.kernels.get(key);
    if (!k) {
      const { src, name, sig } = make();
      k = getKernel(this.ctx, `${CUDA_PRELUDE}\n${src}`, name, sig, { options: ['--std=c++17'], includeCudaHeaders: false }); // no headers: portable cache keys
      this.kernels.set(key, k);
    }
    return k;
  }

  launch(k: CudaKernel, grid: number, block: number, args: KernelArg[], smem = 0): void {
    this.ctx.launch(k, grid, block, args, smem, this.stream);
  }

  gridFor(work: number, block: number, waves = 16): number { return Math.max(1, Math.min(Math.ceil(work / block), this.smCount * waves)); }

  elementwise(expr: Expr, ins: StridedRef[], params: (number | bigint)[], out: StridedRef): void {
    // small ops: a command of the launch batch instead of a launch of their own
    if (this.batch !== null && this.batch.tryElementwise(expr, ins, params, out)) return;
    const shape = out.shape;
    let n = 1;
    for (let d = 0; d < shape.length; d++) n *= shape[d]!;
    if (n === 0) return;
    // The expression carries every dtype (loads and the final cast), so its key names the kernel.
    // Fast path: all inputs contiguous with out's shape: no stride analysis at all.
    let flat = true;
    for (const r of ins) if (!contiguousLike(r, shape)) { flat = false; break; }
    let cs: number[] = [], cst: number[][] = [];
    if (!flat) {
      for (const r of ins) this.checkDType('elementwise', r.dtype);
      const outStrides: number[] = [];
      { let acc = 1; for (let d = shape.length - 1; d >= 0; d--) { outStrides[d] = acc; acc *= shape[d]!; } }
      ({ shape: cs, strides: cst } = coalesce(shape, [outStrides, ...ins.map((r) => broadcastStrides(r.shape, r.strides, shape))]));
      flat = cs.length <= 1 && cst.slice(1).every((st) => (st[0] ?? 1) === 1);
    }
    const idx32 = n < 2 ** 31;
    if (flat) {
      let maxItem = DTYPES[out.dtype].itemsize, same = true, offOk = true;
      for (const r of ins) { const z = DTYPES[r.dtype].itemsize; if (z !== maxItem) { same = false; maxItem = Math.max(maxItem, z); } }
      // 16-byte vector access when every operand is contiguous, the same width, and aligned.
      const V = 16 / maxItem;
      if (same && V > 1) { if (out.offset % V) offOk = false; for (const r of ins) if (r.offset % V) offOk = false; }
      const aligned = same && V > 1 && offOk;
      const mode = aligned ? `v${V}` : 'flat';
      const k = this.kernel(`ew:${mode}:${idx32}:${expr.key}`, () => {
        for (const r of ins) this.checkDType('elementwise', r.dtype);
        this.checkDType('elementwise', out.dtype);
        return flatSource(expr, ins, out, aligned ? V : 1, expr.paramDTypes().map((d) => R.paramType(d)), idx32);
      });
      const args: KernelArg[] = [(out.buf as CudaBuffer).ptr];
      for (const r of ins) args.push((r.buf as CudaBuffer).ptr);
      args.push(n, out.offset);
      for (const r of ins) args.push(r.offset);
      for (const p of params) args.push(p);
      const work = aligned ? Math.ceil(n / V) : n;
      if (n < TUNE_MIN_ELEMENTS) { this.launch(k, this.gridFor(work, this.ewDefault.threads, this.ewDefault.waves), this.ewDefault.threads, args); return; }
      const run = (c: { threads: number; waves: number }): void => this.launch(k, this.gridFor(work, c.threads, c.waves), c.threads, args);
      run(this.tuning.pick(ELEMENTWISE_SPACE, `${mode}:${bucketSize(n)}`, `${ins.length}in:${maxItem}B`, n, this.ewDefault, run as never) as never);
      return;
    }
    const nd = cs.length;
    // A 2-d problem where some input runs down the columns (a transpose): stage those inputs through
    // shared-memory tiles, so both their reads and the output's writes are coalesced.
    const transposed = nd === 2 ? ins.map((_, i) => cst[i + 1]![0] === 1 && cst[i + 1]![1] !== 1 && cst[i + 1]![1] !== 0) : [];
    if (transposed.some((t) => t) && cs[0]! >= 32 && cs[1]! >= 32) {
      const tkey = transposed.map((t) => (t ? 'T' : 'n')).join('');
      const k = this.kernel(`ew:tile:${tkey}:${idx32}:${expr.key}`, () => {
        this.checkDType('elementwise', out.dtype);
        return tiledSource(expr, ins, out, transposed, expr.paramDTypes().map((d) => R.paramType(d)));
      });
      const [rows, cols] = cs as [number, number];
      const args = [...[out, ...ins].map((r) => (r.buf as CudaBuffer).ptr), rows, cols, out.offset, ...ins.flatMap((r, i) => [r.offset, cst[i + 1]![0]!, cst[i + 1]![1]!]), ...params];
      const gx = Math.ceil(cols / 32), gy = Math.min(Math.ceil(rows / 32), 65535);
      this.ctx.launch(k, [gx, gy], [32, 8], args, 0, this.stream);
      return;
    }
    const maxItem = Math.max(DTYPES[out.dtype].itemsize, ...ins.map((r) => DTYPES[r.dtype].itemsize));
    const k = this.kernel(`ew:nd${nd}:${idx32}:${expr.key}`, () => {
      this.checkDType('elementwise', out.dtype);
      return stridedSource(expr, ins, out, nd, expr.paramDTypes().map((d) => R.paramType(d)), idx32);
    });
    const args = [...[out, ...ins].map((r) => (r.buf as CudaBuffer).ptr), n, out.offset, ...cs, ...ins.flatMap((r, i) => [r.offset, ...cst[i + 1]!]), ...params];
    const run = (c: { threads: number; waves: number }): void => this.launch(k, this.gridFor(n, c.threads, c.waves), c.threads, args);
    run(this.tuning.pick(ELEMENTWISE_SPACE, `nd${nd}:${bucketSize(n)}`, `${ins.length}in:${maxItem}B`, n, this.ewDefault, run as never) as never);
  }
}


/**
 * The 2-d tiled kernel: a 32x32 tile per block (32x8 threads). Inputs marked `transposed` are read
 * down their contiguous dimension into shared memory, then every thread computes along the output's
 * rows; other inputs are read directly (row-contiguous or broadcast).
 */
export function tiledSource(expr: Expr, ins: StridedRef[], out: StridedRef, transposed: boolean[], pTypes: string[]) {
  const args = [`${R.storageType(out.dtype)}* __restrict__ out`, ...ins.map((r, i) => `const ${R.storageType(r.dtype)}* __restrict__ in${i}`),
    'long long rows', 'long long cols', 'long long oo', ...ins.flatMap((_, i) => [`long long o${i}`, `long long sr${i}`, `long long sc${i}`]),
    ...pTypes.map((t, i) => `${cParam(t)} p${i}`)];
  const sig: ArgType[] = ['ptr', ...ins.map(() => 'ptr' as ArgType), 'i64', 'i64', 'i64', ...ins.flatMap(() => ['i64', 'i64', 'i64'] as ArgType[]), ...(pTypes as ArgType[])];
  const [code, res] = R.render(expr, (s, d) => (transposed[s] ? `tile${s}[i][threadIdx.x]` : R.load(d, `in${s}`, `o${s} + r * sr${s} + c * sc${s}`)), (s) => `p${s}`);
  const tiles = ins.map((r, s) => (transposed[s] ? `__shared__ ${R.computeType(r.dtype)} tile${s}[32][33];` : '')).join(' ');
  // load: thread (x, y) reads rows r0+x (contiguous for a transposed input) of columns c0+y, c0+y+8, ...
  const loads = ins.map((r, s) => (transposed[s] ? `for (int i = threadIdx.y; i < 32; i += 8) { const long long r = r0 + threadIdx.x, c = c0 + i;
        if (r < rows && c < cols) tile${s}[threadIdx.x][i] = ${R.load(r.dtype, `in${s}`, `o${s} + r * sr${s} + c * sc${s}`)}; }` : '')).join('\n      ');
  const src = `extern "C" __global__ void __launch_bounds__(256) ew(${args.join(', ')}) {
  ${tiles}
  const long long c0 = (long long)blockIdx.x * 32;
  for (long long rt = blockIdx.y; rt * 32 < rows; rt += gridDim.y) {
    const long long r0 = rt * 32;
    ${loads}
    __syncthreads();
    for (int i = threadIdx.y; i < 32; i += 8) {
      const long long r = r0 + i, c = c0 + threadIdx.x;
      if (r < rows && c < cols) {
        ${code}
        ${R.store(out.dtype, 'out', 'oo + r * cols + c', res)}
      }
    }
    __syncthreads();
  }
}`;
  return { src, name: 'ew', sig };
}

/** A contiguous operand whose shape is exactly `shape`. */
function contiguousLike(r: StridedRef, shape: readonly number[]): boolean {
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

const cParam = (t: string): string => ({ f32: 'float', f64: 'double', i32: 'int', i64: 'long long' } as Record<string, string>)[t]!;

export function flatSource(expr: Expr, ins: StridedRef[], out: StridedRef, V: number, pTypes: string[], idx32: boolean) {
  const I = idx32 ? 'int' : 'long long';
  const args = [`${R.storageType(out.dtype)}* __restrict__ out`, ...ins.map((r, i) => `const ${R.storageType(r.dtype)}* __restrict__ in${i}`),
    'long long n_', 'long long oo', ...ins.map((_, i) => `long long o${i}`), ...pTypes.map((t, i) => `${cParam(t)} p${i}`)];
  const sig: ArgType[] = ['ptr', ...ins.map(() => 'ptr' as ArgType), 'i64', 'i64', ...ins.map(() => 'i64' as ArgType), ...(pTypes as ArgType[])];
  let body: string;
  if (V === 1) {
    const [code, res] = R.render(expr, (s, d) => R.load(d, `in${s}`, `o${s} + i`), (s) => `p${s}`);
    body = `for (${I} i = blockIdx.x * (${I})blockDim.x + threadIdx.x; i < n; i += (${I})gridDim.x * blockDim.x) {
    ${code}
    ${R.store(out.dtype, 'out', 'oo + i', res)}
  }`;
  } else {
    // V consecutive elements per thread through one 16-byte load/store per operand.
    const [code, res] = R.render(expr, (s, d) => R.load(d, `v${s}`, 'j'), (s) => `p${s}`);
    body = `const ${I} nv = n / ${V};
  for (${I} q = blockIdx.x * (${I})blockDim.x + threadIdx.x; q < nv; q += (${I})gridDim.x * blockDim.x) {
    ${ins.map((r, s) => `const uint4 r${s} = *reinterpret_cast<const uint4*>(in${s} + o${s} + q * ${V}); const ${R.storageType(r.dtype)} v${s}[${V}] = { ${unpack(r.dtype, `r${s}`, V)} };`).join('\n    ')}
    ${R.storageType(out.dtype)} vo[${V}]; uint4 ro;
    #pragma unroll
    for (int j = 0; j < ${V}; j++) {
      ${code}
      ${R.store(out.dtype, 'vo', 'j', res)}
    }
    ${pack(out.dtype, 'vo', 'ro', V)}
    *reinterpret_cast<uint4*>(out + oo + q * ${V}) = ro;
  }
  for (${I} i = nv * ${V} + blockIdx.x * (${I})blockDim.x + threadIdx.x; i < n; i += (${I})gridDim.x * blockDim.x) {
    ${R.render(expr, (s, d) => R.load(d, `in${s}`, `o${s} + i`), (s) => `p${s}`)[0]}
    ${R.store(out.dtype, 'out', 'oo + i', R.render(expr, (s, d) => R.load(d, `in${s}`, `o${s} + i`), (s) => `p${s}`)[1])}
  }`;
  }
  const src = `extern "C" __global__ void __launch_bounds__(1024) ew(${args.join(', ')}) {
  const ${I} n = (${I})n_;
  ${body}
}`;
  return { src, name: 'ew', sig };
}

// 16-byte vectors as explicit bit fields: the elements live in registers (no address-taken arrays,
// which would push sub-word elements to local memory).
const WORDS = ['x', 'y', 'z', 'w'];
export function unpack(d: DTypeName, r: string, V: number): string {
  const size = DTYPES[d].itemsize, T = R.storageType(d);
  return [...Array(V).keys()].map((j) => {
    if (size === 8) {
      const lo = `${r}.${WORDS[2 * j]}`, hi = `${r}.${WORDS[2 * j + 1]}`;
      return d === 'float64' ? `__hiloint2double((int)${hi}, (int)${lo})` : `(${T})(((unsigned long long)${hi} << 32) | ${lo})`;
    }
    const per = 4 / size, word = `${r}.${WORDS[Math.floor(j / per)]}`, shift = 8 * size * (j % per);
    if (size === 4) return d === 'float32' ? `__uint_as_float(${word})` : `(${T})${word}`;
    return `(${T})(${word} >> ${shift})`;
  }).join(', ');
}
function pack(d: DTypeName, v: string, r: string, V: number): string {
  const size = DTYPES[d].itemsize;
  const bits = (j: number): string => (d === 'float32' ? `__float_as_uint(${v}[${j}])` : d === 'float64' ? '' : `(unsigned)(${size === 4 ? `${v}[${j}]` : `(${size === 1 ? 'unsigned char' : 'unsigned short'})${v}[${j}]`})`);
  const out: string[] = [];
  for (let w = 0; w < 4; w++) {
    if (size === 8) {
      const j = w >> 1;
      const u = d === 'float64' ? `(unsigned long long)__double_as_longlong(${v}[${j}])` : `(unsigned long long)${v}[${j}]`;
      out.push(`${r}.${WORDS[w]} = (unsigned)(${u}${w % 2 ? ' >> 32' : ''});`);
      continue;
    }
    const per = 4 / size;
    out.push(`${r}.${WORDS[w]} = ${[...Array(per).keys()].map((k) => `(${bits(w * per + k)} << ${8 * size * k})`).join(' | ')};`);
  }
  return out.join(' ');
}

export function stridedSource(expr: Expr, ins: StridedRef[], out: StridedRef, nd: number, pTypes: string[], idx32: boolean) {
  const I = idx32 ? 'int' : 'long long';
  const dims = [...Array(nd).keys()];
  const args = [`${R.storageType(out.dtype)}* __restrict__ out`, ...ins.map((r, i) => `const ${R.storageType(r.dtype)}* __restrict__ in${i}`),
    'long long n_', 'long long oo', ...dims.map((d) => `long long s${d}`),
    ...ins.flatMap((_, i) => [`long long o${i}`, ...dims.map((d) => `long long st${i}_${d}`)]), ...pTypes.map((t, i) => `${cParam(t)} p${i}`)];
  const sig: ArgType[] = ['ptr', ...ins.map(() => 'ptr' as ArgType), 'i64', 'i64', ...dims.map(() => 'i64' as ArgType),
    ...ins.flatMap(() => ['i64' as ArgType, ...dims.map(() => 'i64' as ArgType)]), ...(pTypes as ArgType[])];
  const [code, res] = R.render(expr, (s, d) => R.load(d, `in${s}`, `j${s}`), (s) => `p${s}`);
  // decompose the linear output index into coordinates, innermost first
  const decompose = dims.slice().reverse().map((d) => `{ const ${I} c = rem % (${I})s${d}; rem /= (${I})s${d}; ${ins.map((_, i) => `j${i} += c * (${I})st${i}_${d};`).join(' ')} }`).join('\n      ');
  const src = `extern "C" __global__ void __launch_bounds__(1024) ew(${args.join(', ')}) {
  const ${I} n = (${I})n_;
  for (${I} i = blockIdx.x * (${I})blockDim.x + threadIdx.x; i < n; i += (${I})gridDim.x * blockDim.x) {
    ${I} rem = i; ${ins.map((_, i) => `${I} j${i} = (${I})o${i};`).join(' ')}
    ${decompose}
    ${code}
    ${R.store(out.dtype, 'out', 'oo + i', res)}
  }
}`;
  return { src, name: 'ew', sig };
}
