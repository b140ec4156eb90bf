// Compile check for the CUDA shape/indexing kernels without a GPU (run after `npx tsc`):
//   node test/gen/cuda_indexing_compile.mjs [--no-suite] [--keep DIR] | --simulate [NAME]
// 1. Runs the public conformance suite on a fake 'cuda' device that computes on the CPU: each of this
//    family's kernels runs its real launcher against a recording backend (sources rendered, argument lists
//    checked against the kernel signatures, shared memory against the device limit), then the CPU kernel
//    gives the result. Kernels that would go through host staging are listed.
// 2. Adds every specialization the source generators can produce (dtypes, modes, flags, ranks).
// 3. Compiles them all with nvcc for sm_90 (one translation unit per batch; each source in its own
//    namespace, kernels renamed uniquely, the prelude once) and prints the counts.
// The helpers are exported for test/gen/cuda_sort_compile.mjs.

import { mkdtempSync, writeFileSync, existsSync, mkdirSync, readFileSync, renameSync } from 'node:fs';
import { tmpdir, cpus } from 'node:os';
import { join, dirname, resolve } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';

const here = dirname(fileURLToPath(import.meta.url));
const dist = resolve(here, '../../dist/src');
const imp = (p) => import(pathToFileURL(join(dist, p)).href);

const { registerBackend } = await imp('backend/backend.js');
const { cpuBackend } = await imp('backend/cpu/index.js');
const { registerKernel, setStagingProvider, kernelCpu, hasKernel } = await imp('kernels/registry.js');
const { CUDA_PRELUDE } = await imp('ir/render_c.js');
const { runSuite } = await imp('conformance/runner.js');
await imp('index.js');

export const OPTIN = 232448; // H100/H200 opt-in shared memory per block (the recording backend's "device")
/** Every kernel source a launcher asked for, by cache key. */
export const sources = new Map();
/** Launch problems found by the recording backend. */
export const problems = [];
const INT_ARGS = new Set(['i32', 'u32', 'i64']);

/** A CudaBackend stand-in: compiles nothing, launches nothing, records sources and checks launches. */
export const recordingBackend = {
  smCount: 132,
  ctx: {
    info: { maxSharedMemPerBlockOptin: OPTIN, smCount: 132 },
    copyDtoD() {}, memsetD8() {}, memsetD32() {}, copyHtoD() {},
  },
  stream: { synchronize() {} },
  alloc: (dtype, numel) => ({ ptr: 0x1000n, bytes: numel }),
  free() {},
  checkDType() {},
  downloadSync: (_buf, dtype, _off, numel) => new (({ int64: BigInt64Array, int32: Int32Array, float64: Float64Array, float32: Float32Array, float16: Uint16Array, bfloat16: Uint16Array, int16: Int16Array, int8: Int8Array })[dtype] ?? Uint8Array)(numel),
  gridFor: (work, block) => Math.max(1, Math.min(Math.ceil(work / block), 132 * 16)),
  kernel(key, make) {
    if (!sources.has(key)) sources.set(key, make());
    const { sig, name } = sources.get(key);
    return {
      name, argTypes: sig,
      setMaxDynamicSharedMemory(bytes) { if (bytes > OPTIN) problems.push(`${key}: ${bytes} bytes of shared memory requested`); },
    };
  },
  launch(k, grid, block, args, smem = 0) {
    const bad = (m) => problems.push(`${k.name}: ${m}`);
    if (args.length !== k.argTypes.length) bad(`${args.length} arguments for ${k.argTypes.length} parameters`);
    if (args.length > 64) bad(`${args.length} arguments (the driver takes 64)`);
    if (!(Number.isInteger(grid) && grid >= 1 && grid < 2 ** 31)) bad(`grid ${grid}`);
    if (!(Number.isInteger(block) && block >= 1 && block <= 1024)) bad(`block ${block}`);
    if (smem > OPTIN) bad(`shared memory ${smem}`);
    k.argTypes.forEach((t, i) => {
      const a = args[i];
      if (t === 'ptr' || t === 'u64') { if (a !== undefined && typeof a !== 'bigint' && !Number.isInteger(a)) bad(`argument ${i} (${t}) is ${a}`); return; }
      if (INT_ARGS.has(t) && !(typeof a === 'bigint' || Number.isInteger(a))) bad(`argument ${i} (${t}) is ${a}`);
      if (t === 'i32' && typeof a === 'number' && (a >= 2 ** 31 || a < -(2 ** 31))) bad(`argument ${i} (i32) overflows: ${a}`);
      if ((t === 'f32' || t === 'f64') && typeof a !== 'number') bad(`argument ${i} (${t}) is ${a}`);
    });
  },
};

/** StridedRefs over host arrays as the launchers see device refs: a CudaBuffer-like buf. */
function deviceRefs(v, depth) {
  if (v && typeof v === 'object' && 'buf' in v && 'dtype' in v && 'strides' in v) return { ...v, buf: { ptr: 0x1000n, bytes: v.buf.byteLength ?? 0 } };
  if (depth < 2 && Array.isArray(v)) return v.map((x) => deviceRefs(x, depth + 1));
  if (depth < 2 && v && typeof v === 'object' && Object.getPrototypeOf(v) === Object.prototype) return Object.fromEntries(Object.entries(v).map(([k, x]) => [k, deviceRefs(x, depth + 1)]));
  return v;
}

/** Kernels that ran through (fake) host staging during the suite, by name. */
export const staged = new Map();

/**
 * Registers a fake 'cuda' backend computing on the CPU; `install(be, register)` installs a family's kernels,
 * whose launchers then run against the recording backend before the CPU kernel answers.
 */
export function fakeCuda(installs) {
  registerBackend({ ...cpuBackend, type: 'cuda' });
  const register = (name, device, fn) => {
    const cpu = kernelCpu(name);
    registerKernel(name, device, (...args) => {
      try { fn(...args.map((a) => deviceRefs(a, 0))); } catch (e) { if (!(e && e.name && /Error$/.test(e.name) && e.op)) problems.push(`${name}: launcher threw ${e?.stack ?? e}`); }
      return cpu(...args);
    });
  };
  for (const install of installs) install(recordingBackend, register);
  setStagingProvider('cuda', (name) => { const cpu = kernelCpu(name); return (...a) => { staged.set(name, (staged.get(name) ?? 0) + 1); return cpu(...a); }; });
}

/** Runs the public suite on the fake device; returns the counts. */
export async function runConformance(filter) {
  const dir = resolve(here, '../../../shared/conformance/public');
  if (!existsSync(dir)) { console.log(`(no conformance suite at ${dir})`); return null; }
  return runSuite(dir, { device: 'cuda', filter });
}

/** Compiles the sources (arrays of {src, name}) with nvcc for sm_90 in parallel batches; returns the kernel count. */
export function compileAll(list, label, keepDir) {
  const dir = keepDir ?? mkdtempSync(join(tmpdir(), 'nbx-nvcc-'));
  if (keepDir) mkdirSync(dir, { recursive: true });
  const uniq = [...new Map(list.map((s) => [s.src, s])).values()];
  const per = Math.ceil(uniq.length / Math.max(1, Math.min(cpus().length, 8)));
  const files = [];
  for (let b = 0; b * per < uniq.length; b++) {
    let text = `${CUDA_PRELUDE}\n`;
    uniq.slice(b * per, (b + 1) * per).forEach((s, i) => {
      const id = b * per + i;
      let renamed = 0;
      const src = s.src.replace(/extern "C" __global__ void (__launch_bounds__\(\d+\) )?(\w+)\(/g, (_m, lb, n) => { renamed++; return `extern "C" __global__ void ${lb ?? ''}${n}_${id}(`; });
      if (renamed !== 1) throw new Error(`source ${s.name} has ${renamed} kernels`);
      text += `namespace k${id} {\n${src}\n}\n`;
    });
    const f = join(dir, `${label}_${b}.cu`);
    writeFileSync(f, text);
    files.push(f);
  }
  const procs = files.map((f) => new Promise((res, rej) => {
    import('node:child_process').then(({ execFile }) => execFile('nvcc', ['-arch=sm_90', '-cubin', '--std=c++17', '-Xptxas', '-warn-spills', '-o', f.replace(/\.cu$/, '.cubin'), f],
      { maxBuffer: 1 << 26 }, (err, stdout, stderr) => (err ? rej(new Error(`${f}:\n${stderr}`)) : res(stderr))));
  }));
  return Promise.all(procs).then((warnings) => {
    let entries = 0;
    for (const f of files) {
      // kernel entry points: the ELF's .text.<name> sections
      const elf = readFileSync(f.replace(/\.cu$/, '.cubin')).toString('latin1');
      entries += new Set(elf.match(/\.text\.[A-Za-z_]\w*/g) ?? []).size;
    }
    const w = warnings.filter((x) => x.trim()).join('\n');
    return { sources: uniq.length, entries, dir, warnings: w };
  });
}

// ---- this family ---------------------------------------------------------------------------------

const COPY = await imp('backend/cuda/kernels/copy.js');
const COMPACTION = await imp('backend/cuda/kernels/compaction.js');
const IDX = await imp('backend/cuda/kernels/indexing.js');
const SORT = await imp('backend/cuda/kernels/sort.js');

/** Binds the CUDA copy, indexing and sort families to `be` and hands their kernels to `register(name, 'cuda', fn)`. */
export function installIndexingAndSort(be, register) {
  COPY.bind(be);
  IDX.bind(be);
  SORT.bind(be);
  for (const [name, fn] of Object.entries({ ...COPY.kernels, ...IDX.kernels, ...SORT.kernels })) register(name, 'cuda', fn);
}
const DTYPES_ALL = ['bool', 'uint8', 'int8', 'int16', 'int32', 'int64', 'float16', 'bfloat16', 'float32', 'float64'];
const MODES = ['none', 'sum', 'prod', 'mean', 'amax', 'amin'];
const SIZES = [1, 2, 4, 8, 16];

/** Every specialization the indexing generators produce for the dimensions kernels are launched with. */
export function indexingSpecializations() {
  const out = [];
  for (const isz of SIZES) {
    for (const nd of [1, 2, 3, 6]) for (const i32 of [true, false]) out.push(COPY.copySource(isz, nd, i32));
    for (const nb of [0, 1, 3]) out.push(COPY.transposeSource(isz, nb));
    for (const iT of ['int', 'long long']) for (const nd of [1, 2, 3]) for (const wrap of [false, true]) out.push(IDX.gatherSource(isz, iT, nd, wrap, nd !== 3));
  }
  for (const d of [...DTYPES_ALL, 'complex64', 'complex128', 'float8_e4m3fn']) {
    const arith = DTYPES_ALL.includes(d);
    for (const mode of arith ? MODES : ['none']) {
      for (const inc of mode === 'none' ? [true] : [true, false]) out.push(IDX.scatterColumnSource(d, 'long long', 1, mode, inc, false, true));
      if (mode === 'mean') for (const inc of [true, false]) out.push(IDX.scatterFinishSource('mean', d, mode, inc));
    }
    out.push(IDX.scatterParallelSource('win', d, 'long long', 2, 'none', false, true), IDX.scatterParallelSource('write', d, 'long long', 2, 'none', false, false));
    if (arith && (d === 'bool' || d.startsWith('int') || d === 'uint8')) {
      for (const mode of MODES.slice(1)) {
        for (const check of [false, true]) out.push(IDX.scatterParallelSource('atomic', d, 'long long', 1, mode, true, check));
        out.push(IDX.scatterParallelSource('count', d, 'long long', 1, mode, false, true));
        out.push(IDX.scatterFinishSource('identity', d, mode, false));
      }
    }
  }
  for (const nd of [0, 2]) for (const wrap of [false, true]) out.push(IDX.scatterColumnSource('float32', 'int', nd, 'sum', true, wrap, false));
  for (const ts of [['long long'], ['int', 'long long'], ['long long', 'long long', 'int']]) for (const nd of [1, 3]) out.push(IDX.linearIndexSource(ts, nd));
  out.push(COMPACTION.blockScanSource());
  return out;
}

/** The compaction kernels (nonzero / masked_*) through the launchers, run against the recording backend. */
function compactionSpecializations(be) {
  const ref = (dtype, shape) => ({ buf: { ptr: 0x1000n, bytes: 8 }, dtype, shape, strides: shape.map((_, i) => shape.slice(i + 1).reduce((a, b) => a * b, 1)), offset: 0 });
  for (const d of [...DTYPES_ALL, 'complex64', 'complex128', 'float8_e4m3fn', 'float8_e5m2']) {
    for (const shape of [[5], [3, 4], [2, 3, 4]]) IDX.cudaNonzero(ref(d, shape), ref('int64', [60, shape.length]));
    IDX.cudaMaskedSelect(ref(d, [3, 4]), { ...ref('bool', [3, 4]), strides: [0, 1] }, ref(d, [12]));
    IDX.cudaMaskedScatter(ref(d, [3, 4]), ref('bool', [3, 4]), ref(d, [12]));
  }
  void be;
}

// ---- simulated CUDA: the generated kernels compiled for the host and run with fibers as threads --------
//
// `--simulate` (both compile scripts) runs the family's GPU test checks (dist/test/cuda_*.test.js) on a fake
// 'cuda' device whose memory is host memory and whose kernels are the real generated sources compiled by
// g++ against a small shim: each block's threads are ucontext fibers, __syncthreads and the warp intrinsics
// (ballot, shuffles) are barriers over them, atomics are plain (one OS thread). The real launchers plan and
// launch; other families' kernels and the elementwise IR run through host staging (CPU). This checks the
// kernels' logic (indexing, barriers, ballots, data layout), not the GPU's timing or memory model.

const SIM_SHIM = String.raw`
#include <cstdint>
#include <cstring>
#include <cstdio>
#include <cstdlib>
#include <cmath>
#include <math.h>
#include <utility>
#include <ucontext.h>
using std::isnan; using std::isinf; using std::signbit;
#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
#define __restrict__ __restrict
#define __launch_bounds__(...)
#define __shared__ static
#define __align__(n) alignas(n)
struct uint4 { unsigned x, y, z, w; };
struct float2 { float x, y; };
struct double2 { double x, y; };
struct nbx_dim3 { unsigned x, y, z; };
static nbx_dim3 threadIdx, blockIdx, blockDim, gridDim;
static unsigned char* nbx_dyn_smem;
template <typename A, typename B> static inline A nbx_bits(B b) { static_assert(sizeof(A) == sizeof(B), "size"); A a; memcpy(&a, &b, sizeof a); return a; }
static inline unsigned __float_as_uint(float f) { return nbx_bits<unsigned>(f); }
static inline int __float_as_int(float f) { return nbx_bits<int>(f); }
static inline float __uint_as_float(unsigned u) { return nbx_bits<float>(u); }
static inline float __int_as_float(int u) { return nbx_bits<float>(u); }
static inline long long __double_as_longlong(double d) { return nbx_bits<long long>(d); }
static inline double __longlong_as_double(long long v) { return nbx_bits<double>(v); }
static inline float __double2float_rz(double d) { float f = (float)d; if (!std::isnan(d) && std::fabs((double)f) > std::fabs(d)) f = std::nextafter(f, 0.0f); return f; }
static inline double __dadd_rn(double a, double b) { return a + b; }
static inline double __dmul_rn(double a, double b) { return a * b; }
static inline double __ddiv_rn(double a, double b) { return a / b; }
static inline int __popc(unsigned v) { return __builtin_popcount(v); }
static inline int __clzll(long long v) { return v == 0 ? 64 : __builtin_clzll((unsigned long long)v); }
#define NBX_MINMAX(T) static inline T min(T a, T b) { return a < b ? a : b; } static inline T max(T a, T b) { return a > b ? a : b; }
NBX_MINMAX(int) NBX_MINMAX(unsigned) NBX_MINMAX(long long) NBX_MINMAX(unsigned long long)
// atomics: one OS thread runs every fiber, and fibers switch only at barriers
static inline unsigned long long atomicMax(unsigned long long* p, unsigned long long v) { unsigned long long o = *p; if (v > o) *p = v; return o; }
static inline unsigned atomicMax(unsigned* p, unsigned v) { unsigned o = *p; if (v > o) *p = v; return o; }
static inline unsigned atomicAdd(unsigned* p, unsigned v) { unsigned o = *p; *p = o + v; return o; }
static inline int atomicAdd(int* p, int v) { int o = *p; *p = o + v; return o; }
static inline int atomicOr(int* p, int v) { int o = *p; *p = o | v; return o; }
static inline unsigned atomicCAS(unsigned* p, unsigned c, unsigned v) { unsigned o = *p; if (o == c) *p = v; return o; }
static inline unsigned long long atomicCAS(unsigned long long* p, unsigned long long c, unsigned long long v) { unsigned long long o = *p; if (o == c) *p = v; return o; }
// fibers: 0 runnable, 1 at __syncthreads, 2 at a warp barrier, 3 done
enum { NBX_MAXT = 1024, NBX_STACK = 1 << 18 };
static ucontext_t nbx_sched, nbx_ctx[NBX_MAXT];
static int nbx_state[NBX_MAXT], nbx_cur, nbx_n;
static char* nbx_stacks;
static unsigned long long nbx_slot[NBX_MAXT];
static void (*nbx_body)(void**); static void** nbx_params;
static void nbx_yield(int st) { nbx_state[nbx_cur] = st; swapcontext(&nbx_ctx[nbx_cur], &nbx_sched); threadIdx.x = nbx_cur; }
static void __syncthreads() { nbx_yield(1); }
static int nbx_lanes() { const int base = nbx_cur & ~31; return (nbx_n - base) < 32 ? nbx_n - base : 32; }
template <typename T> static T nbx_shfl(T v, int src) {
  unsigned long long b = 0; memcpy(&b, &v, sizeof v); nbx_slot[nbx_cur] = b;
  nbx_yield(2);
  const int base = nbx_cur & ~31;
  T r = v;
  if (src >= 0 && src < nbx_lanes()) memcpy(&r, &nbx_slot[base + src], sizeof r);
  nbx_yield(2);
  return r;
}
template <typename T> static T __shfl_xor_sync(unsigned, T v, int o) { return nbx_shfl(v, (nbx_cur & 31) ^ o); }
template <typename T> static T __shfl_up_sync(unsigned, T v, int o) { const int l = nbx_cur & 31; return l >= o ? nbx_shfl(v, l - o) : nbx_shfl(v, -1); }
static unsigned __ballot_sync(unsigned, bool p) {
  nbx_slot[nbx_cur] = p ? 1 : 0;
  nbx_yield(2);
  const int base = nbx_cur & ~31, n = nbx_lanes();
  unsigned m = 0;
  for (int l = 0; l < n; l++) if (nbx_slot[base + l]) m |= 1u << l;
  nbx_yield(2);
  return m;
}
static void nbx_entry() { nbx_body(nbx_params); nbx_state[nbx_cur] = 3; swapcontext(&nbx_ctx[nbx_cur], &nbx_sched); }
static int nbx_run_block(int n) {
  nbx_n = n;
  for (int t = 0; t < n; t++) {
    getcontext(&nbx_ctx[t]);
    nbx_ctx[t].uc_stack.ss_sp = nbx_stacks + (size_t)t * NBX_STACK; nbx_ctx[t].uc_stack.ss_size = NBX_STACK; nbx_ctx[t].uc_link = &nbx_sched;
    makecontext(&nbx_ctx[t], nbx_entry, 0);
    nbx_state[t] = 0;
  }
  for (;;) {
    for (int t = 0; t < n; t++) if (nbx_state[t] == 0) { nbx_cur = t; threadIdx.x = t; swapcontext(&nbx_sched, &nbx_ctx[t]); }
    int done = 0, atBlock = 0, released = 0;
    for (int t = 0; t < n; t++) { done += nbx_state[t] == 3; atBlock += nbx_state[t] == 1; }
    if (done == n) return 0;
    for (int w = 0; w * 32 < n; w++) {
      int live = 0, waiting = 0;
      for (int t = w * 32; t < n && t < w * 32 + 32; t++) { live += nbx_state[t] != 3; waiting += nbx_state[t] == 2; }
      if (live && waiting == live) { for (int t = w * 32; t < n && t < w * 32 + 32; t++) if (nbx_state[t] == 2) nbx_state[t] = 0; released++; }
    }
    if (!released && atBlock == n - done) { for (int t = 0; t < n; t++) if (nbx_state[t] == 1) nbx_state[t] = 0; released++; }
    if (!released) { fprintf(stderr, "simulated kernel: threads wait at different barriers (deadlock)\n"); return 1; }
  }
}
template <typename... A, size_t... I> static void nbx_call(void (*f)(A...), void** p, std::index_sequence<I...>) { f(*(A*)p[I]...); }
template <typename... A> static void nbx_invoke(void (*f)(A...), void** p) { nbx_call(f, p, std::index_sequence_for<A...>{}); }
`;

const SIM_RT = String.raw`
#include <sys/mman.h>
#include <cstdlib>
#include <cstring>
#include <cstdint>
extern "C" {
int64_t sim_alloc(int64_t bytes, int zero) { void* p = zero ? calloc((size_t)bytes + 64, 1) : malloc((size_t)bytes + 64); if (!zero) memset(p, 0xcd, (size_t)bytes + 64); return (int64_t)(uintptr_t)p; }
void sim_free(int64_t p) { free((void*)(uintptr_t)p); }
void sim_copy_in(int64_t dst, const void* src, int64_t n) { memcpy((void*)(uintptr_t)dst, src, (size_t)n); }
void sim_copy_out(void* dst, int64_t src, int64_t n) { memcpy(dst, (const void*)(uintptr_t)src, (size_t)n); }
void sim_copy(int64_t dst, int64_t src, int64_t n) { memmove((void*)(uintptr_t)dst, (const void*)(uintptr_t)src, (size_t)n); }
void sim_memset(int64_t dst, int v, int64_t n) { memset((void*)(uintptr_t)dst, v, (size_t)n); }
void sim_memset32(int64_t dst, unsigned v, int64_t n) { unsigned* p = (unsigned*)(uintptr_t)dst; for (int64_t i = 0; i < n; i++) p[i] = v; }
// the fibers' stacks, shared by every kernel library (reserved, committed as touched)
int64_t sim_stacks(int64_t bytes) { void* p = mmap(nullptr, (size_t)bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0); return (int64_t)(uintptr_t)p; }
}
`;

/** Host versions of the prelude's PTX conversions (round to nearest even, as cvt.rn). */
const HOST_HALF = String.raw`
__device__ __forceinline__ float nbx_h2f(unsigned short h) { _Float16 x; memcpy(&x, &h, 2); return (float)x; }
__device__ __forceinline__ unsigned short nbx_f2h(float f) { _Float16 x = (_Float16)f; unsigned short h; memcpy(&h, &x, 2); if (f != f) h = 0x7fff; return h; }
`;

export async function simCuda(installs) {
  const { createHash } = await import('node:crypto');
  const { execFileSync: run } = await import('node:child_process');
  const koffi = (await import('koffi')).default;
  const { DTYPES, allocStorage } = await imp('dtype/dtypes.js');
  const cache = join(tmpdir(), 'nbx-simcuda');
  mkdirSync(cache, { recursive: true });
  const build = (name, src, extra = []) => {
    const h = createHash('sha1').update(src).digest('hex').slice(0, 16);
    const so = join(cache, `${name}_${h}.so`);
    if (!existsSync(so)) {
      const cpp = so.replace(/\.so$/, `.${process.pid}.cpp`);
      writeFileSync(cpp, src);
      run('g++', ['-std=c++17', '-O1', '-ffp-contract=off', '-fPIC', '-shared', '-w', ...extra, '-o', `${cpp}.so`, cpp], { stdio: ['ignore', 'ignore', 'pipe'] });
      renameSync(`${cpp}.so`, so); // atomic: concurrent runs share the cache
    }
    return koffi.load(so);
  };
  const rt = build('rt', SIM_RT);
  const f = {
    alloc: rt.func('int64_t sim_alloc(int64_t, int)'), free: rt.func('void sim_free(int64_t)'),
    copyIn: rt.func('void sim_copy_in(int64_t, const void*, int64_t)'), copyOut: rt.func('void sim_copy_out(void*, int64_t, int64_t)'),
    copy: rt.func('void sim_copy(int64_t, int64_t, int64_t)'), memset: rt.func('void sim_memset(int64_t, int, int64_t)'),
    memset32: rt.func('void sim_memset32(int64_t, uint32_t, int64_t)'),
  };
  const stacks = BigInt(rt.func('int64_t sim_stacks(int64_t)')(1024 * (1 << 18)));
  const prelude = CUDA_PRELUDE.replace(/__device__ __forceinline__ float nbx_h2f[^\n]*\n/, '').replace(/__device__ __forceinline__ unsigned short nbx_f2h[^\n]*\n/, HOST_HALF);
  const live = new Set();
  const be = {
    type: 'cuda', smCount: 4,
    ctx: {
      info: { maxSharedMemPerBlockOptin: OPTIN, smCount: 4 },
      copyDtoD: (d, s, n) => f.copy(d, s, n), memsetD8: (d, v, n) => f.memset(d, v, n), memsetD32: (d, v, n) => f.memset32(d, v, n),
      copyHtoD: (d, arr, n) => f.copyIn(d, arr, n ?? arr.byteLength),
    },
    stream: { synchronize() {} },
    alloc(dtype, numel, zero = false) {
      const bytes = Math.max(numel * DTYPES[dtype].itemsize, 1);
      const p = BigInt(f.alloc(bytes, zero ? 1 : 0));
      live.add(p);
      return { ptr: p, bytes };
    },
    free(buf) { if (live.delete(buf.ptr)) f.free(buf.ptr); },
    upload(dtype, data) { const b = be.alloc(dtype, data.length / DTYPES[dtype].lanes); if (data.byteLength) f.copyIn(b.ptr, data, data.byteLength); return b; },
    downloadSync(buf, dtype, offset, numel) {
      const host = allocStorage(dtype, numel);
      if (host.byteLength) f.copyOut(host, buf.ptr + BigInt(offset * DTYPES[dtype].itemsize), host.byteLength);
      return host;
    },
    async download(buf, dtype, offset, numel) { return be.downloadSync(buf, dtype, offset, numel); },
    async synchronize() {},
    checkDType() {},
    gridFor: (work, block) => Math.max(1, Math.min(Math.ceil(work / block), 4 * 16)),
    elementwise(expr, ins, params, out) { staged('elementwise', (i, p, o) => cpuBackend.elementwise(expr, i, p, o))(ins, params, out); },
    kernel(key, make) {
      const k = simKernels.get(key);
      if (k) return k;
      const { src, name, sig } = make();
      const m = /extern "C" __global__ void (?:__launch_bounds__\(\d+\) )?(\w+)\(/.exec(src);
      const body = src.replace(/extern __shared__ __align__\(16\) unsigned char (\w+)\[\];/g, 'unsigned char* $1 = nbx_dyn_smem;');
      const text = `${SIM_SHIM}\n${prelude}\n${body}
static void nbx_tramp(void** p) { nbx_invoke(&${m[1]}, p); }
extern "C" int nbx_launch(int grid, int block, int smem, long long* slots, int nargs, long long stacks) {
  void* params[64]; for (int i = 0; i < nargs; i++) params[i] = &slots[i];
  static unsigned char* dyn = nullptr; static int dynSize = 0;
  if (smem > dynSize) { free(dyn); dyn = (unsigned char*)calloc((size_t)smem, 1); dynSize = smem; }
  nbx_dyn_smem = dyn;
  nbx_stacks = (char*)(uintptr_t)stacks;
  nbx_body = nbx_tramp; nbx_params = params;
  gridDim.x = grid; gridDim.y = gridDim.z = 1; blockDim.x = block; blockDim.y = blockDim.z = 1;
  for (int b = 0; b < grid; b++) { blockIdx.x = b; if (nbx_run_block(block)) return 1; }
  return 0;
}`;
      const lib = build(name, text);
      const launch = lib.func('int nbx_launch(int, int, int, int64_t*, int, int64_t)');
      const kk = { name, argTypes: sig, launch, setMaxDynamicSharedMemory(bytes) { if (bytes > OPTIN) throw new Error(`${key}: ${bytes} bytes of shared memory`); } };
      simKernels.set(key, kk);
      return kk;
    },
    launch(k, grid, block, args, smem = 0) {
      recordingBackend.launch(k, grid, block, args, smem); // the same argument checks
      const slots = new BigInt64Array(Math.max(args.length, 1));
      const dv = new DataView(slots.buffer);
      k.argTypes.forEach((t, i) => {
        const a = args[i];
        if (t === 'f32') dv.setFloat32(8 * i, a, true);
        else if (t === 'f64') dv.setFloat64(8 * i, a, true);
        else if (t === 'i32' || t === 'u32') dv.setInt32(8 * i, Number(a) | 0, true);
        else slots[i] = BigInt.asIntN(64, BigInt(a ?? 0));
      });
      if (k.launch(grid, block, smem, slots, args.length, stacks) !== 0) throw new Error(`simulated kernel ${k.name} deadlocked`);
    },
  };
  const simKernels = new Map();
  /** Runs a CPU kernel on the simulated device's memory (copies in and out), as the real backend's host staging. */
  function staged(name, cpu) {
    return (...args) => {
      stagedSim.set(name, (stagedSim.get(name) ?? 0) + 1);
      const host = new Map();
      const map = (v, depth) => {
        if (v && typeof v === 'object' && 'buf' in v && 'dtype' in v && 'strides' in v && v.buf && typeof v.buf.ptr === 'bigint') {
          let h = host.get(v.buf);
          if (!h) { h = { arr: be.downloadSync(v.buf, v.dtype, 0, Math.floor(v.buf.bytes / DTYPES[v.dtype].itemsize)) }; host.set(v.buf, h); }
          return { ...v, buf: h.arr };
        }
        if (depth < 2 && Array.isArray(v)) return v.map((x) => map(x, depth + 1));
        if (depth < 2 && v && typeof v === 'object' && !ArrayBuffer.isView(v) && Object.getPrototypeOf(v) === Object.prototype) return Object.fromEntries(Object.entries(v).map(([k, x]) => [k, map(x, depth + 1)]));
        return v;
      };
      const result = cpu(...args.map((a) => map(a, 0)));
      for (const [buf, h] of host) if (h.arr.byteLength) f.copyIn(buf.ptr, h.arr, h.arr.byteLength);
      return result;
    };
  }
  registerBackend(be);
  for (const install of installs) install(be, registerKernel);
  setStagingProvider('cuda', (name) => staged(name, kernelCpu(name)));
  return { be, stagedSim };
}
const stagedSim = new Map();

/** Runs the named checks exported by a compiled GPU test file on the simulated device; prints a summary. */
export async function runSimChecks(testFile, checksName, only) {
  process.env.NBX_SIM_CHECKS = '1';
  const mod = await import(pathToFileURL(resolve(here, '../../dist/test', testFile)).href);
  const checks = mod[checksName];
  let ok = 0, bad = 0;
  for (const [name, check] of Object.entries(checks)) {
    if (only && !only.startsWith('--') && !name.includes(only)) continue;
    const t0 = Date.now();
    try { await check('cuda'); ok++; console.log(`ok   ${name} (${Date.now() - t0} ms)`); } catch (e) { bad++; console.log(`FAIL ${name}: ${e?.stack ?? e}`); }
  }
  console.log(`simulated cuda: ${ok} checks passed, ${bad} failed; kernels through host staging: ${[...stagedSim.keys()].join(', ') || 'none'}`);
  if (bad) process.exitCode = 1;
}

if (import.meta.url === pathToFileURL(process.argv[1]).href) {
  const keep = process.argv.includes('--keep') ? process.argv[process.argv.indexOf('--keep') + 1] : undefined;
  if (process.argv.includes('--simulate')) {
    await simCuda([(be, reg) => installIndexingAndSort(be, reg)]);
    await runSimChecks('cuda_indexing.test.js', 'indexingChecks', process.argv[process.argv.indexOf('--simulate') + 1]);
    process.exit();
  }
  fakeCuda([(be, reg) => installIndexingAndSort(be, reg)]);
  const mine = ['copy_strided', 'gather', 'scatter', 'linear_index', 'nonzero', 'masked_select', 'masked_scatter'];
  if (!process.argv.includes('--no-suite')) {
    const filter = /^(gather|take|take_along_dim|index_\w+|scatter\w*|nonzero|argwhere|masked_\w+|repeat_interleave|nn\.functional\.(embedding|one_hot|pad|pixel_\w+|unfold|fold)|cat|stack|flip|roll|Tensor\.\w+|tril|triu|reshape|flatten|movedim|chunk|split|narrow|squeeze|unsqueeze)\//;
    const res = await runConformance(filter);
    if (res) console.log(`conformance (fake cuda, shape/indexing ops): ${res.passed} passed, ${res.failed} failed, ${res.skipped} skipped`);
    const stagedMine = mine.filter((n) => staged.has(n));
    console.log(`staged kernels of this family: ${stagedMine.length ? stagedMine.join(', ') : 'none'}; others staged: ${[...staged.keys()].filter((n) => !mine.includes(n)).join(', ') || 'none'}`);
    console.log(`native kernels registered: ${mine.filter((n) => hasKernel(n, 'cuda')).join(', ')}`);
  }
  const fromSuite = sources.size;
  installIndexingAndSort(recordingBackend, () => {}); // the recording backend for direct launcher calls
  compactionSpecializations(recordingBackend);
  const all = [...sources.values(), ...indexingSpecializations()];
  if (problems.length) { console.log(`launch problems:\n  ${problems.join('\n  ')}`); process.exitCode = 1; }
  const r = await compileAll(all, 'indexing', keep);
  console.log(`sources: ${fromSuite} rendered by the suite, ${all.length} with the enumerated specializations; nvcc sm_90: ${r.sources} distinct sources, ${r.entries} kernels compiled (${r.dir})`);
  if (r.warnings) console.log(`nvcc warnings:\n${r.warnings}`);
}
