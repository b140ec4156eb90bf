// CUDA layer self-check: run on a GPU machine after building.
//
//   node dist/tools/cuda_selfcheck.js            full sizes (H200: ~1 minute)
//   node dist/tools/cuda_selfcheck.js --small    tiny sizes (smoke run; also used by the tests with a mock driver)
//
// Prints one PASS/FAIL line per check (with measurements) and a final "N passed, N failed"
// line; exits 1 when anything failed. Each check is independent: a failure is printed with
// its error and the next check runs.

import { spawnSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { DeviceFaultError, OutOfMemoryError } from '../src/errors.js';
import { CachingAllocator, formatBytes } from '../src/memory/caching_allocator.js';
import { CublasLt, type GemmArgs, type GemmDType } from '../src/backend/cuda/runtime/cublaslt.js';
import { CudaContext, type CudaKernel, contextPoisoned, driverLibraryPath, driverVersionString } from '../src/backend/cuda/runtime/driver.js';
import { probeCuda } from '../src/backend/cuda/runtime/libs.js';
import { Nvrtc, NvrtcCompileError, getKernel, kernelCacheDir, loadSource, nvrtcStats } from '../src/backend/cuda/runtime/nvrtc.js';

const KERNELS = String.raw`
extern "C" __global__ void nbx_axpb(const float* __restrict__ x, float* __restrict__ y, float a, float b, unsigned long long n) {
  unsigned long long i = blockIdx.x * (unsigned long long)blockDim.x + threadIdx.x;
  const unsigned long long stride = (unsigned long long)gridDim.x * blockDim.x;
  for (; i < n; i += stride) y[i] = a * x[i] + b;
}
extern "C" __global__ void nbx_tiny(float* p, int v) {
  if (p != nullptr && threadIdx.x == 0 && blockIdx.x == 0) p[0] = (float)v;
}
extern "C" __global__ void nbx_echo(double* out, int a, unsigned int b, long long c, unsigned long long d, float e, double f) {
  if (threadIdx.x == 0 && blockIdx.x == 0) {
    out[0] = a; out[1] = b; out[2] = (double)c; out[3] = (double)d; out[4] = e; out[5] = f;
  }
}
`;

const FAULT_KERNEL = String.raw`
extern "C" __global__ void nbx_fault(float* p) { p[threadIdx.x] = 1.0f; }
`;

const argv = process.argv.slice(2);
const SMALL = argv.includes('--small');

let passed = 0;
let failed = 0;

function fmt(n: number, digits = 2): string {
  return n.toFixed(digits);
}

async function check(name: string, fn: () => string | void | Promise<string | void>): Promise<boolean> {
  const t0 = performance.now();
  try {
    const info = await fn();
    passed++;
    console.log(`PASS ${name}${info ? `: ${info}` : ''} [${fmt(performance.now() - t0, 0)} ms]`);
    return true;
  } catch (e) {
    failed++;
    const msg = e instanceof Error ? `${e.name}: ${e.message}${e.stack ? `\n${e.stack.split('\n').slice(1, 6).join('\n')}` : ''}` : String(e);
    console.log(`FAIL ${name}: ${msg}`);
    return false;
  }
}

function assert(cond: unknown, msg: string): asserts cond {
  if (!cond) throw new Error(msg);
}

// deterministic pseudo-random numbers in [-1, 1)
function rng(seed: number): () => number {
  let s = seed >>> 0 || 1;
  return () => {
    s ^= s << 13;
    s >>>= 0;
    s ^= s >>> 17;
    s ^= s << 5;
    s >>>= 0;
    return (s / 2 ** 32) * 2 - 1;
  };
}

// --- fp16 / bf16 host conversions ---
const f32 = new Float32Array(1);
const u32 = new Uint32Array(f32.buffer);
function toBf16(x: number): number {
  f32[0] = x;
  const u = u32[0]!;
  return ((u + 0x7fff + ((u >>> 16) & 1)) >>> 16) & 0xffff;
}
function fromBf16(h: number): number {
  u32[0] = h << 16;
  return f32[0]!;
}
function toF16(x: number): number {
  // exact for the small integers / halves used here; round-to-nearest otherwise
  const s = x < 0 ? 0x8000 : 0;
  const a = Math.abs(x);
  if (a === 0) return s;
  if (a >= 65520) return s | 0x7c00;
  let e = Math.floor(Math.log2(a));
  if (e < -14) return s | Math.round(a / 2 ** -24);
  let m = Math.round((a / 2 ** e - 1) * 1024);
  if (m === 1024) {
    m = 0;
    e++;
  }
  return s | ((e + 15) << 10) | m;
}
function fromF16(h: number): number {
  const s = h & 0x8000 ? -1 : 1;
  const e = (h >> 10) & 31;
  const m = h & 1023;
  if (e === 0) return s * m * 2 ** -24;
  if (e === 31) return m ? NaN : s * Infinity;
  return s * (1 + m / 1024) * 2 ** (e - 15);
}

function encode(dtype: GemmDType, vals: Float64Array | number[]): Uint8Array {
  if (dtype === 'float32') return new Uint8Array(Float32Array.from(vals).buffer);
  const conv = dtype === 'bfloat16' ? toBf16 : toF16;
  return new Uint8Array(Uint16Array.from(vals, (v) => conv(v)).buffer);
}
function decode(dtype: GemmDType, bytes: Uint8Array): Float64Array {
  if (dtype === 'float32') return Float64Array.from(new Float32Array(bytes.buffer, bytes.byteOffset, bytes.byteLength / 4));
  const conv = dtype === 'bfloat16' ? fromBf16 : fromF16;
  return Float64Array.from(new Uint16Array(bytes.buffer, bytes.byteOffset, bytes.byteLength / 2), (h) => conv(h));
}
function roundTo(dtype: GemmDType, v: Float64Array): Float64Array {
  return decode(dtype, encode(dtype, v));
}

/** Reference row-major GEMM in float64: C = alpha op(A) op(B) + beta C + bias, batched with strides. */
function refGemm(g: {
  transA: boolean;
  transB: boolean;
  m: number;
  n: number;
  k: number;
  A: Float64Array;
  lda: number;
  sA: number;
  B: Float64Array;
  ldb: number;
  sB: number;
  C: Float64Array;
  ldc: number;
  sC: number;
  batch: number;
  alpha: number;
  beta: number;
  bias?: Float64Array;
}): { out: Float64Array; scale: Float64Array } {
  const out = Float64Array.from(g.C);
  const scale = new Float64Array(g.C.length); // sum |a||b| per element, for tolerances
  for (let bt = 0; bt < g.batch; bt++) {
    for (let i = 0; i < g.m; i++) {
      for (let j = 0; j < g.n; j++) {
        let acc = 0;
        let sc = 0;
        for (let l = 0; l < g.k; l++) {
          const a = g.A[bt * g.sA + (g.transA ? l * g.lda + i : i * g.lda + l)]!;
          const b = g.B[bt * g.sB + (g.transB ? j * g.ldb + l : l * g.ldb + j)]!;
          acc += a * b;
          sc += Math.abs(a * b);
        }
        const idx = bt * g.sC + i * g.ldc + j;
        out[idx] = g.alpha * acc + g.beta * g.C[idx]! + (g.bias ? g.bias[j]! : 0);
        scale[idx] = Math.abs(g.alpha) * sc + Math.abs(g.beta * g.C[idx]!) + (g.bias ? Math.abs(g.bias[j]!) : 0);
      }
    }
  }
  return { out, scale };
}

interface GemmCase {
  dtype: GemmDType;
  transA?: boolean;
  transB?: boolean;
  m: number;
  n: number;
  k: number;
  batch?: number;
  /** broadcast B over the batch (strideB = 0) */
  broadcastB?: boolean;
  alpha?: number;
  beta?: number;
  bias?: boolean;
  allowTF32?: boolean;
  /** integer-valued data (exact in every dtype) */
  ints?: boolean;
  /** extra padding of leading dimensions */
  pad?: number;
}

function runGemmCase(ctx: CudaContext, lt: CublasLt, c: GemmCase, seed: number): { maxRel: number; maxAbs: number } {
  const tA = c.transA ?? false;
  const tB = c.transB ?? false;
  const batch = c.batch ?? 1;
  const pad = c.pad ?? 0;
  const esz = c.dtype === 'float32' ? 4 : 2;
  const aRows = tA ? c.k : c.m;
  const aCols = tA ? c.m : c.k;
  const bRows = tB ? c.n : c.k;
  const bCols = tB ? c.k : c.n;
  const lda = aCols + pad;
  const ldb = bCols + pad;
  const ldc = c.n + pad;
  const sA = aRows * lda;
  const sB = c.broadcastB ? 0 : bRows * ldb;
  const sC = c.m * ldc;
  const r = rng(seed);
  const gen = (n: number): Float64Array => Float64Array.from({ length: n }, () => (c.ints ? Math.round(r() * 4) : r()));
  const A = roundTo(c.dtype, gen(sA * batch));
  const B = roundTo(c.dtype, gen(c.broadcastB ? bRows * ldb : sB * batch));
  const C0 = roundTo(c.dtype, gen(sC * batch));
  const bias = c.bias ? roundTo(c.dtype, gen(c.n)) : undefined;
  const dA = ctx.malloc(A.length * esz);
  const dB = ctx.malloc(B.length * esz);
  const dC = ctx.malloc(C0.length * esz);
  const dBias = bias ? ctx.malloc(bias.length * esz) : undefined;
  try {
    ctx.copyHtoD(dA, encode(c.dtype, A));
    ctx.copyHtoD(dB, encode(c.dtype, B));
    ctx.copyHtoD(dC, encode(c.dtype, C0));
    if (bias && dBias) ctx.copyHtoD(dBias, encode(c.dtype, bias));
    const args: GemmArgs = {
      dtype: c.dtype,
      transA: tA,
      transB: tB,
      m: c.m,
      n: c.n,
      k: c.k,
      A: dA,
      lda,
      strideA: sA,
      B: dB,
      ldb,
      strideB: sB,
      C: dC,
      ldc,
      strideC: sC,
      batch,
      alpha: c.alpha ?? 1,
      beta: c.beta ?? 0,
      bias: dBias,
      allowTF32: c.allowTF32 ?? false,
    };
    lt.gemm(args);
    ctx.synchronize();
    const out = new Uint8Array(C0.length * esz);
    ctx.copyDtoH(out, dC);
    const got = decode(c.dtype, out);
    const ref = refGemm({ transA: tA, transB: tB, m: c.m, n: c.n, k: c.k, A, lda, sA, B, ldb, sB, C: C0, ldc, sC, batch, alpha: c.alpha ?? 1, beta: c.beta ?? 0, bias });
    let maxRel = 0;
    let maxAbs = 0;
    for (let bt = 0; bt < batch; bt++) {
      for (let i = 0; i < c.m; i++) {
        for (let j = 0; j < ldc; j++) {
          const idx = bt * sC + i * ldc + j;
          if (j >= c.n) {
            assert(got[idx] === C0[idx], `padding column ${j} of row ${i} was written`);
            continue;
          }
          const err = Math.abs(got[idx]! - ref.out[idx]!);
          maxAbs = Math.max(maxAbs, err);
          maxRel = Math.max(maxRel, err / Math.max(ref.scale[idx]!, 1e-30));
        }
      }
    }
    return { maxRel, maxAbs };
  } finally {
    ctx.free(dA);
    ctx.free(dB);
    ctx.free(dC);
    if (dBias) ctx.free(dBias);
  }
}

// -------------------------------------------------------------------------------------------
// child modes

async function childCompile(nonce: string): Promise<void> {
  const ctx = CudaContext.get(0);
  const src = `// nbx selfcheck cache probe ${nonce}\n${KERNELS}`;
  loadSource(ctx, src, { name: 'nbx_cache_probe' });
  console.log(JSON.stringify(nvrtcStats()));
}

async function childFault(): Promise<void> {
  const ctx = CudaContext.get(0);
  const k = getKernel(ctx, FAULT_KERNEL, 'nbx_fault', 'p');
  const res: Record<string, unknown> = {};
  try {
    ctx.launch(k, 1, 32, [0x10n]); // writes to address 0x10: illegal address
    ctx.synchronize();
    res.first = 'no error';
  } catch (e) {
    res.first = e instanceof Error ? `${e.name}: ${e.message}` : String(e);
    res.firstIsFault = e instanceof DeviceFaultError;
  }
  try {
    ctx.malloc(1024);
    res.second = 'no error';
  } catch (e) {
    res.second = e instanceof Error ? `${e.name}: ${e.message}` : String(e);
    res.secondIsFault = e instanceof DeviceFaultError;
  }
  res.poisoned = contextPoisoned();
  console.log(JSON.stringify(res));
}

function runChild(args: string[]): { stdout: string; stderr: string; status: number | null } {
  const r = spawnSync(process.execPath, [fileURLToPath(import.meta.url), ...args], { env: process.env, encoding: 'utf8', timeout: 120_000 });
  return { stdout: r.stdout ?? '', stderr: r.stderr ?? '', status: r.status };
}

function lastJsonLine(s: string): Record<string, unknown> {
  const lines = s.trim().split('\n');
  for (let i = lines.length - 1; i >= 0; i--) {
    try {
      return JSON.parse(lines[i]!) as Record<string, unknown>;
    } catch {
      /* keep looking */
    }
  }
  throw new Error(`no JSON in child output:\n${s}`);
}

// -------------------------------------------------------------------------------------------
// main

async function main(): Promise<void> {
  if (argv[0] === '--child-compile') return childCompile(argv[1] ?? 'x');
  if (argv[0] === '--child-fault') return childFault();

  console.log(`nbxtensor CUDA self-check${SMALL ? ' (--small)' : ''}: node ${process.version}, pid ${process.pid}`);
  const probe = probeCuda();
  const ok = await check('probe', () => {
    const devs = (probe.devices ?? []).map(
      (d) =>
        `#${d.index} ${d.name} ${d.arch} ${formatBytes(d.totalMem)} ${d.smCount} SMs, smem/block ${d.maxSharedMemPerBlock}/${d.maxSharedMemPerBlockOptin} (opt-in), ` +
        `regs/block ${d.maxRegsPerBlock}, warp ${d.warpSize}, L2 ${formatBytes(d.l2CacheSize)}, mem ${d.memoryClockKHz} kHz × ${d.memoryBusWidth} bit ≈ ${fmt(d.peakBandwidthGBs, 0)} GB/s`,
    );
    console.log(`  driver CUDA ${probe.driverVersionString ?? '?'}, NVRTC ${probe.nvrtcVersion?.join('.') ?? '?'}, cuBLASLt ${probe.cublasLtVersion ?? '?'}`);
    for (const [k, v] of Object.entries(probe.libs)) console.log(`  lib ${k}: ${v ?? `(not found) ${probe.libErrors[k as keyof typeof probe.libErrors]?.split('\n')[0] ?? ''}`}`);
    for (const d of devs) console.log(`  ${d}`);
    assert(probe.available, `CUDA not available: ${probe.reason}`);
    return `${devs.length} device(s)`;
  });
  if (!ok) {
    console.log(`0 passed, 1 failed`);
    process.exitCode = 1;
    return;
  }

  let ctx!: CudaContext;
  await check('context', () => {
    ctx = CudaContext.get(0);
    const mi = ctx.memInfo();
    return `${ctx.info.name} (${ctx.info.arch}), driver ${driverVersionString()} from ${driverLibraryPath()}, free ${formatBytes(mi.free)} of ${formatBytes(mi.total)}`;
  });
  if (!ctx) {
    console.log(`${passed} passed, ${failed} failed`);
    process.exitCode = 1;
    return;
  }

  await check('alloc + copy round trip', () => {
    const n = SMALL ? 1 << 12 : 1 << 22;
    const r = rng(1);
    const host = Float32Array.from({ length: n }, () => r());
    const d = ctx.malloc(n * 4);
    try {
      ctx.copyHtoD(d, host);
      const back = new Float32Array(n);
      ctx.copyDtoH(back, d);
      for (let i = 0; i < n; i++) assert(back[i] === host[i], `mismatch at ${i}: ${back[i]} != ${host[i]}`);
      // partial copies with offsets (subarray views)
      const part = new Float32Array(100);
      ctx.copyDtoH(part, d + 400n);
      for (let i = 0; i < 100; i++) assert(part[i] === host[100 + i], `offset copy mismatch at ${i}`);
      const d2 = ctx.malloc(n * 4);
      ctx.copyDtoD(d2, d, n * 4);
      ctx.copyDtoH(back, d2);
      assert(back[n - 1] === host[n - 1], 'device-to-device copy mismatch');
      ctx.free(d2);
    } finally {
      ctx.free(d);
    }
    return `${formatBytes(n * 4)} up, back, device-to-device`;
  });

  await check('pinned memory + async copies + memset', async () => {
    const n = SMALL ? 1 << 12 : 1 << 24;
    const pin = ctx.hostAlloc(n * 4);
    const s = ctx.createStream();
    const d = ctx.malloc(n * 4);
    try {
      const view = new Float32Array(pin.buffer);
      for (let i = 0; i < n; i++) view[i] = i;
      const t0 = performance.now();
      ctx.copyHtoD(d, pin, n * 4, s);
      await s.synchronizeAsync(); // the copy reads the pinned buffer asynchronously: wait before reusing it
      view.fill(-1);
      ctx.copyDtoH(pin, d, n * 4, s);
      await s.synchronizeAsync();
      const ms = performance.now() - t0;
      for (let i = 0; i < n; i += 997) assert(view[i] === i, `pinned round trip mismatch at ${i}: ${view[i]}`);
      ctx.memsetD8(d, 0, n * 4, s);
      ctx.memsetD32(d, 0x3f800000, 16, s); // 1.0f
      s.synchronize();
      const back = new Float32Array(32);
      ctx.copyDtoH(back, d);
      assert(back[15] === 1 && back[16] === 0, `memset result ${back[15]}, ${back[16]}`);
      return `${formatBytes(n * 4)} each way in ${fmt(ms)} ms (${fmt((2 * n * 4) / (ms / 1e3) / 1e9)} GB/s incl. sync)`;
    } finally {
      ctx.free(d);
      s.destroy();
      ctx.hostFree(pin);
    }
  });

  let axpb: CudaKernel | null = null;
  let tiny: CudaKernel | null = null;
  await check('NVRTC compile + load', () => {
    const nv = Nvrtc.get();
    const t0 = performance.now();
    const { module, compiled } = loadSource(ctx, KERNELS, { name: 'nbx_selfcheck' });
    axpb = module.getFunction('nbx_axpb', 'ppffL');
    tiny = module.getFunction('nbx_tiny', 'pi');
    const res = axpb.resources();
    return (
      `NVRTC ${nv.versionString} (${nv.libPath}), supported ${nv.supportedArchs.join(',') || '?'}; ${compiled.kind} for ${compiled.arch} ` +
      `(${compiled.image.length} bytes, from ${compiled.from}) in ${fmt(performance.now() - t0, 1)} ms; nbx_axpb: ${res.numRegs} regs, ${res.localBytes} B local`
    );
  });

  await check('kernel argument marshaling (i32 u32 i64 u64 f32 f64)', () => {
    const { module } = loadSource(ctx, KERNELS, { name: 'nbx_selfcheck' });
    const echo = module.getFunction('nbx_echo', ['ptr', 'i32', 'u32', 'i64', 'u64', 'f32', 'f64']);
    const d = ctx.malloc(64);
    try {
      ctx.launch(echo, 1, 32, [d, -123456, 4000000000, -(2n ** 40n) - 7n, 2n ** 50n + 3n, 1.5, Math.PI]);
      ctx.synchronize();
      const out = new Float64Array(6);
      ctx.copyDtoH(out, d);
      const want = [-123456, 4000000000, -(2 ** 40) - 7, 2 ** 50 + 3, 1.5, Math.PI];
      for (let i = 0; i < 6; i++) assert(out[i] === want[i], `argument ${i + 1}: got ${out[i]}, want ${want[i]}`);
      return out.join(', ');
    } finally {
      ctx.free(d);
    }
  });

  await check('a*x+b bandwidth', async () => {
    assert(axpb, 'kernel not compiled');
    const n = SMALL ? 1 << 16 : 1 << 28;
    const x = ctx.malloc(n * 4);
    const y = ctx.malloc(n * 4);
    const e0 = ctx.createEvent();
    const e1 = ctx.createEvent();
    try {
      const r = rng(7);
      const chunk = Float32Array.from({ length: Math.min(n, 1 << 20) }, () => r());
      for (let off = 0; off < n; off += chunk.length) ctx.copyHtoD(x + BigInt(off * 4), chunk, Math.min(chunk.length, n - off) * 4);
      const block = 256;
      const grid = Math.min(Math.ceil(n / block), ctx.info.smCount * 32);
      ctx.launch(axpb, grid, block, [x, y, 2.0, -1.0, n]); // warm-up
      const reps = SMALL ? 2 : 10;
      e0.record();
      for (let i = 0; i < reps; i++) ctx.launch(axpb, grid, block, [x, y, 2.0, -1.0, n]);
      e1.record();
      await e1.wait();
      const ms = e1.elapsedSince(e0) / reps;
      const got = new Float32Array(chunk.length);
      ctx.copyDtoH(got, y);
      for (let i = 0; i < got.length; i += 101) assert(got[i] === Math.fround(2 * chunk[i]! - 1), `y[${i}] = ${got[i]}, want ${2 * chunk[i]! - 1}`);
      const last = new Float32Array(1);
      ctx.copyDtoH(last, y + BigInt((n - 1) * 4));
      const lastX = new Float32Array(1);
      ctx.copyDtoH(lastX, x + BigInt((n - 1) * 4));
      assert(last[0] === Math.fround(2 * lastX[0]! - 1), `y[n-1] = ${last[0]}, want ${2 * lastX[0]! - 1}`);
      const gbs = (2 * n * 4) / (ms / 1e3) / 1e9;
      return `${n} floats: ${fmt(ms, 3)} ms/pass = ${fmt(gbs, 0)} GB/s (device peak ≈ ${fmt(ctx.info.peakBandwidthGBs, 0)} GB/s)`;
    } finally {
      e0.destroy();
      e1.destroy();
      ctx.free(x);
      ctx.free(y);
    }
  });

  await check('launch host cost', () => {
    assert(tiny, 'kernel not compiled');
    const n = SMALL ? 1000 : 10_000;
    const d = ctx.malloc(4);
    try {
      for (let i = 0; i < 100; i++) ctx.launch(tiny, 1, 32, [d, i]);
      ctx.synchronize();
      const t0 = performance.now();
      for (let i = 0; i < n; i++) ctx.launch(tiny, 1, 32, [d, i]);
      const host = ((performance.now() - t0) / n) * 1e3;
      ctx.synchronize();
      const total = ((performance.now() - t0) / n) * 1e3;
      const v = new Float32Array(1);
      ctx.copyDtoH(v, d);
      assert(v[0] === n - 1, `last launch wrote ${v[0]}, want ${n - 1}`);
      return `${fmt(host)} µs/launch host (target ≤ 5 µs${host > 5 ? ', ABOVE TARGET' : ''}), ${fmt(total)} µs/launch incl. device, over ${n} launches`;
    } finally {
      ctx.free(d);
    }
  });

  await check('non-blocking wait keeps the event loop running', async () => {
    assert(axpb, 'kernel not compiled');
    const n = SMALL ? 1 << 16 : 1 << 26;
    const x = ctx.malloc(n * 4);
    const y = ctx.malloc(n * 4);
    const s = ctx.createStream();
    try {
      ctx.memsetD8(x, 0, n * 4, s);
      let ticks = 0;
      let running = true;
      const tick = (): void => {
        ticks++;
        if (running) setImmediate(tick);
      };
      setImmediate(tick);
      const t0 = performance.now();
      for (let i = 0; i < (SMALL ? 2 : 50); i++) ctx.launch(axpb, ctx.info.smCount * 8, 256, [x, y, 1, 1, n], 0, s);
      await s.synchronizeAsync();
      running = false;
      const ms = performance.now() - t0;
      return `waited ${fmt(ms)} ms while the event loop ran ${ticks} times`;
    } finally {
      s.destroy();
      ctx.free(x);
      ctx.free(y);
    }
  });

  let lt: CublasLt | null = null;
  const ws = { ptr: 0n, bytes: 32 << 20 };
  await check('cuBLASLt handle', () => {
    lt = CublasLt.get(ctx);
    ws.ptr = ctx.malloc(ws.bytes);
    lt.setDefaultWorkspace(ws);
    return `cuBLASLt ${lt.version} from ${lt.libPath}, workspace ${formatBytes(ws.bytes)}`;
  });

  await check(`cuBLASLt bf16 GEMM ${SMALL ? 256 : 8192}³ throughput`, async () => {
    assert(lt, 'no cuBLASLt');
    const N = SMALL ? 256 : 8192;
    const bytes = N * N * 2;
    const A = ctx.malloc(bytes);
    const B = ctx.malloc(bytes);
    const C = ctx.malloc(bytes);
    const e0 = ctx.createEvent();
    const e1 = ctx.createEvent();
    try {
      ctx.memsetD32(A, 0x3f803f80, bytes / 4); // bf16 1.0 everywhere
      ctx.memsetD32(B, 0x3f803f80, bytes / 4);
      const args: GemmArgs = { dtype: 'bfloat16', m: N, n: N, k: N, A, B, C };
      for (let i = 0; i < 3; i++) lt.gemm(args);
      const reps = SMALL ? 2 : 20;
      e0.record();
      for (let i = 0; i < reps; i++) lt.gemm(args);
      e1.record();
      await e1.wait();
      const ms = e1.elapsedSince(e0) / reps;
      const out = new Uint16Array(4);
      ctx.copyDtoH(out, C + BigInt(((N * N) / 2 + 17) * 2));
      for (const h of out) assert(fromBf16(h) === N, `C element = ${fromBf16(h)}, want ${N}`);
      const tflops = (2 * N ** 3) / (ms / 1e3) / 1e12;
      return `${fmt(ms, 3)} ms = ${fmt(tflops, 1)} TFLOP/s (plans cached: ${lt.planCount})`;
    } finally {
      e0.destroy();
      e1.destroy();
      ctx.free(A);
      ctx.free(B);
      ctx.free(C);
    }
  });

  await check('cuBLASLt fp32 GEMM 256×384 · 384×512 vs CPU reference (exact fp32)', () => {
    assert(lt, 'no cuBLASLt');
    const r = runGemmCase(ctx, lt, { dtype: 'float32', m: 256, n: 512, k: 384 }, 11);
    assert(r.maxRel < 1e-5, `max relative error ${r.maxRel} (abs ${r.maxAbs}) too large for fp32`);
    return `max rel err ${r.maxRel.toExponential(2)}, max abs err ${r.maxAbs.toExponential(2)}`;
  });

  await check('cuBLASLt fp32 GEMM with TF32 allowed', () => {
    assert(lt, 'no cuBLASLt');
    const r = runGemmCase(ctx, lt, { dtype: 'float32', m: 256, n: 512, k: 384, allowTF32: true }, 11);
    assert(r.maxRel < 5e-3, `max relative error ${r.maxRel} too large even for TF32`);
    return `max rel err ${r.maxRel.toExponential(2)} (TF32 has a 10-bit mantissa)`;
  });

  await check('cuBLASLt transposed operands (all four combinations, odd sizes, padded leading dims)', () => {
    assert(lt, 'no cuBLASLt');
    const out: string[] = [];
    for (const [tA, tB] of [
      [false, false],
      [true, false],
      [false, true],
      [true, true],
    ] as const) {
      const r = runGemmCase(ctx, lt, { dtype: 'float32', transA: tA, transB: tB, m: 67, n: 45, k: 33, pad: 3 }, 21);
      assert(r.maxRel < 1e-5, `transA=${tA} transB=${tB}: max rel err ${r.maxRel}`);
      out.push(`${tA ? 'T' : 'N'}${tB ? 'T' : 'N'} ${r.maxRel.toExponential(1)}`);
    }
    return out.join(', ');
  });

  await check('cuBLASLt bias epilogue + alpha/beta', () => {
    assert(lt, 'no cuBLASLt');
    const r1 = runGemmCase(ctx, lt, { dtype: 'float32', m: 64, n: 96, k: 32, bias: true, alpha: 0.5, beta: 2 }, 31);
    assert(r1.maxRel < 1e-5, `fp32 bias: max rel err ${r1.maxRel}`);
    const r2 = runGemmCase(ctx, lt, { dtype: 'bfloat16', m: 32, n: 48, k: 16, bias: true, ints: true, transB: true }, 32);
    assert(r2.maxAbs === 0, `bf16 bias (integer data): max abs err ${r2.maxAbs}`);
    return `fp32 ${r1.maxRel.toExponential(1)}, bf16 exact`;
  });

  await check('cuBLASLt batched strided GEMM (fp16, broadcast B) and bf16', () => {
    assert(lt, 'no cuBLASLt');
    const r1 = runGemmCase(ctx, lt, { dtype: 'float16', m: 40, n: 24, k: 16, batch: 3, broadcastB: true, ints: true }, 41);
    assert(r1.maxAbs === 0, `fp16 batched: max abs err ${r1.maxAbs}`);
    const r2 = runGemmCase(ctx, lt, { dtype: 'bfloat16', m: 33, n: 17, k: 64, batch: 4, transA: true }, 42);
    assert(r2.maxRel < 1e-2, `bf16 batched: max rel err ${r2.maxRel}`);
    return `fp16 exact, bf16 max rel err ${r2.maxRel.toExponential(1)}`;
  });

  await check('NVRTC disk cache (same process, then a second process)', () => {
    const nonce = `${process.pid}-${Date.now()}`;
    const src = `// nbx selfcheck cache probe ${nonce}\n${KERNELS}`;
    const before = nvrtcStats();
    Nvrtc.get().compile(src, ctx.info.cc, { name: 'nbx_cache_probe' });
    const mid = nvrtcStats();
    assert(mid.compiles === before.compiles + 1, 'first compile of a new source did not compile');
    Nvrtc.get().clearMemoryCache();
    const again = Nvrtc.get().compile(src, ctx.info.cc, { name: 'nbx_cache_probe' });
    const after = nvrtcStats();
    assert(again.from === 'disk' && after.compiles === mid.compiles && after.diskHits === mid.diskHits + 1, `second compile was not a disk hit (${again.from})`);
    const child = runChild(['--child-compile', nonce]);
    assert(child.status === 0, `child failed (${child.status}): ${child.stderr || child.stdout}`);
    const st = lastJsonLine(child.stdout);
    assert(st.compiles === 0 && st.diskHits === 1, `second process: ${JSON.stringify(st)}`);
    return `second process: 0 compiles, 1 disk hit (cache: ${kernelCacheDir()})`;
  });

  await check('NVRTC compile error is typed and carries the log', () => {
    try {
      Nvrtc.get().compile('extern "C" __global__ void nbx_broken(float* p) { p[0] = undefined_thing; }\n#error forced', ctx.info.cc, { diskCache: false });
    } catch (e) {
      assert(e instanceof NvrtcCompileError, `got ${String(e)}`);
      assert(e.message.includes('nbx_broken'), `message lacks the kernel name: ${e.message}`);
      assert(e.log.length > 0, 'empty log');
      return e.message.split('\n').slice(0, 2).join(' | ');
    }
    throw new Error('a broken kernel compiled');
  });

  await check('out of memory (10 TB) is typed and the engine keeps working', () => {
    assert(axpb, 'kernel not compiled');
    const alloc = new CachingAllocator(ctx.rawAllocator(), { deviceName: `cuda:${ctx.device}` });
    let msg = '';
    try {
      alloc.malloc(10e12);
    } catch (e) {
      assert(e instanceof OutOfMemoryError, `expected OutOfMemoryError, got ${String(e)}`);
      msg = e.message;
    }
    assert(msg.includes('tried to allocate') && msg.includes('emptyCache'), `message: ${msg}`);
    try {
      ctx.malloc(10e12);
      throw new Error('10 TB cuMemAlloc succeeded');
    } catch (e) {
      assert(e instanceof OutOfMemoryError, `raw cuMemAlloc: expected OutOfMemoryError, got ${String(e)}`);
    }
    // still works
    const n = 1 << 16;
    const x = alloc.malloc(n * 4);
    const y = alloc.malloc(n * 4);
    ctx.memsetD32(x, 0x40000000, n); // 2.0f
    ctx.launch(axpb, 64, 256, [x, y, 3, 1, n]);
    ctx.synchronize();
    const out = new Float32Array(n);
    ctx.copyDtoH(out, y);
    assert(out[0] === 7 && out[n - 1] === 7, `after OOM: y = ${out[0]}`);
    alloc.free(x);
    alloc.free(y);
    alloc.checkInvariants();
    const st = alloc.memoryStats();
    alloc.emptyCache();
    return `${msg.split('. ')[0]}… ; afterwards a*x+b ran fine (reserved ${formatBytes(st.reservedBytes)}, ooms ${st.ooms})`;
  });

  await check('device fault is a DeviceFaultError naming the kernel, and poisons the context (child process)', () => {
    const child = runChild(['--child-fault']);
    assert(child.status === 0, `child exited ${child.status}: ${child.stderr || child.stdout}`);
    const r = lastJsonLine(child.stdout);
    assert(r.firstIsFault === true, `fault was not a DeviceFaultError: ${String(r.first)}`);
    assert(String(r.first).includes('nbx_fault'), `fault message does not name the kernel: ${String(r.first)}`);
    assert(r.secondIsFault === true && String(r.second).includes('context is unusable'), `later call: ${String(r.second)}`);
    return String(r.first).split('. ')[0];
  });

  if (ws.ptr !== 0n) ctx.free(ws.ptr);
  const st = nvrtcStats();
  console.log(`  NVRTC: ${st.compiles} compiles (${fmt(st.compileMs, 0)} ms), ${st.diskHits} disk hits, ${st.memoryHits} memory hits, ${st.modulesLoaded} modules loaded`);
  console.log(`${passed} passed, ${failed} failed`);
  if (failed > 0) process.exitCode = 1;
}

main().catch((e) => {
  console.log(`FAIL selfcheck crashed: ${e instanceof Error ? (e.stack ?? e.message) : String(e)}`);
  console.log(`${passed} passed, ${failed + 1} failed`);
  process.exitCode = 1;
});
