// Tests of the CUDA layer's library discovery and probe (run everywhere), a smoke test on a
// real GPU when one is present, and tests of the driver / NVRTC / cuBLASLt bindings against a
// mock libcuda+libnvrtc+libcublasLt compiled from C on the fly (when gcc is available): the
// mock runs "kernels" and GEMMs on the host with cuBLAS's column-major semantics, so the
// row-major trick, argument marshaling, error typing, poisoning and caches are all exercised
// without a GPU. Processes that load the mock are children, so this process stays clean.

import { strict as assert } from 'node:assert';
import { spawnSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { describe, it, after } from 'node:test';
import { fileURLToPath } from 'node:url';
import { DeviceError } from '../src/errors.js';
import { findLibrary, librarySearchDirs, libraryCandidates, pipWheelLibDirs, probeCuda, type CudaProbe } from '../src/backend/cuda/runtime/libs.js';

const here = dirname(fileURLToPath(import.meta.url)); // dist/test
const distRoot = join(here, '..'); // dist
const selfcheck = join(distRoot, 'tools', 'cuda_selfcheck.js');

function withEnv<T>(vars: Record<string, string | undefined>, fn: () => T): T {
  const saved: Record<string, string | undefined> = {};
  for (const k of Object.keys(vars)) {
    saved[k] = process.env[k];
    if (vars[k] === undefined) delete process.env[k];
    else process.env[k] = vars[k];
  }
  try {
    return fn();
  } finally {
    for (const k of Object.keys(saved)) {
      if (saved[k] === undefined) delete process.env[k];
      else process.env[k] = saved[k];
    }
  }
}

const probe: CudaProbe = probeCuda();

describe('probeCuda', () => {
  it('never throws and explains itself', () => {
    assert.equal(typeof probe.available, 'boolean');
    assert.ok(probe.libs && 'cuda' in probe.libs && 'nvrtc' in probe.libs && 'cublasLt' in probe.libs && 'cublas' in probe.libs);
    if (!probe.available) {
      assert.equal(typeof probe.reason, 'string');
      assert.ok(probe.reason!.length > 10, `reason too short: ${probe.reason}`);
      console.log(`# probeCuda: not available: ${probe.reason}`);
    } else {
      assert.ok(probe.devices && probe.devices.length > 0);
      const d = probe.devices[0]!;
      assert.ok(d.name.length > 0 && d.cc[0] >= 3 && d.totalMem > 0 && d.smCount > 0 && d.warpSize === 32);
      console.log(`# probeCuda: ${d.name} ${d.arch}, driver CUDA ${probe.driverVersionString}`);
    }
  });

  it('never throws with a broken environment', () => {
    const dir = mkdtempSync(join(tmpdir(), 'nbx-probe-'));
    try {
      const fake = join(dir, 'libcuda.so.1');
      writeFileSync(fake, 'this is not an ELF file');
      const p = withEnv({ NBX_LIBCUDA: fake, LD_LIBRARY_PATH: `${dir}::/nonexistent`, CUDA_HOME: '/nonexistent/cuda' }, () => probeCuda());
      assert.equal(typeof p.available, 'boolean');
      if (!probe.available) {
        assert.equal(p.available, false);
        assert.ok(p.reason);
        assert.ok(p.libErrors.cuda!.includes(fake), 'the override path is listed with its error');
      }
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});

describe('library search', () => {
  it('looks in CUDA_HOME, LD_LIBRARY_PATH and /usr/local/cuda', () => {
    const dirs = withEnv({ CUDA_HOME: '/opt/my-cuda', CUDA_PATH: undefined, LD_LIBRARY_PATH: '/a/b:/c/d' }, () => librarySearchDirs('cublasLt'));
    assert.equal(dirs[0], '/opt/my-cuda/lib64');
    assert.ok(dirs.includes('/opt/my-cuda/lib'));
    assert.ok(dirs.includes('/a/b') && dirs.includes('/c/d'));
    assert.ok(dirs.indexOf('/a/b') < dirs.indexOf('/c/d'));
    assert.ok(dirs.some((d) => d.startsWith('/usr/local/cuda')), dirs.join(' '));
  });

  it('finds NVIDIA pip wheel folders', () => {
    const venv = mkdtempSync(join(tmpdir(), 'nbx-venv-'));
    try {
      const lib = join(venv, 'lib', 'python3.12', 'site-packages', 'nvidia', 'cublas', 'lib');
      mkdirSync(lib, { recursive: true });
      writeFileSync(join(lib, 'libcublasLt.so.12'), 'x');
      const { dirs, cands } = withEnv({ VIRTUAL_ENV: venv }, () => ({ dirs: pipWheelLibDirs(), cands: libraryCandidates('cublasLt') }));
      assert.ok(dirs.includes(lib), dirs.join(' '));
      const hit = cands.find((c) => c.path === join(lib, 'libcublasLt.so.12'));
      assert.ok(hit && hit.exists === true);
    } finally {
      rmSync(venv, { recursive: true, force: true });
    }
  });

  it('tries the driver through the system loader first', () => {
    const c = libraryCandidates('cuda');
    const first = c.find((x) => x.where !== '$NBX_LIBCUDA');
    assert.equal(first?.path, 'libcuda.so.1');
    assert.ok(!c.some((x) => x.path.includes('/stubs/')), 'never the toolkit stub');
  });

  it('a missing library is a DeviceError listing every place looked', (t) => {
    if (probe.libs.nvrtc) {
      t.skip('NVRTC is installed here');
      return;
    }
    let err: unknown;
    try {
      withEnv({ CUDA_HOME: '/nonexistent/cuda-home', LD_LIBRARY_PATH: '/nonexistent/ldpath' }, () => findLibrary('nvrtc'));
    } catch (e) {
      err = e;
    }
    assert.ok(err instanceof DeviceError, String(err));
    const msg = (err as Error).message;
    for (const want of ['/nonexistent/cuda-home/lib64', '/nonexistent/ldpath', '/usr/local/cuda', 'libnvrtc.so.13', 'libnvrtc.so.12', 'pip']) {
      assert.ok(msg.includes(want), `message lacks ${want}:\n${msg}`);
    }
  });
});

describe('real GPU smoke test', () => {
  it('allocates, copies, compiles and launches', async (t) => {
    if (!probe.available) {
      t.skip(`no CUDA device: ${probe.reason}`);
      return;
    }
    const { CudaContext } = await import('../src/backend/cuda/runtime/driver.js');
    const { getKernel } = await import('../src/backend/cuda/runtime/nvrtc.js');
    const ctx = CudaContext.get(0);
    const n = 1 << 20;
    const x = Float32Array.from({ length: n }, (_, i) => i % 1000);
    const dx = ctx.malloc(n * 4);
    const dy = ctx.malloc(n * 4);
    try {
      ctx.copyHtoD(dx, x);
      const k = getKernel(
        ctx,
        'extern "C" __global__ void nbx_test_axpb(const float* x, float* y, float a, float b, unsigned long long n) {' +
          ' unsigned long long i = blockIdx.x * (unsigned long long)blockDim.x + threadIdx.x; if (i < n) y[i] = a * x[i] + b; }',
        'nbx_test_axpb',
        'ppffL',
      );
      ctx.launch(k, n / 256, 256, [dx, dy, 2, 1, n]);
      await ctx.nullStream.synchronizeAsync();
      const y = new Float32Array(n);
      ctx.copyDtoH(y, dy);
      for (let i = 0; i < n; i += 4099) assert.equal(y[i], 2 * (i % 1000) + 1);
    } finally {
      ctx.free(dx);
      ctx.free(dy);
    }
  });
});

// -------------------------------------------------------------------------------------------
// mock driver

const MOCK_C = String.raw`// Mock of the few libcuda / libnvrtc / libcublasLt entry points nbxtensor binds, for testing
// the bindings on machines without a GPU. "Device" memory is host memory; kernels run on the host.
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <math.h>

typedef int CUresult;
static int sticky = 0;            /* pending sticky error, returned by every later call */
static int pending_polls = 0;     /* cuStreamQuery/cuEventQuery answer NOT_READY this many times */
static long long mem_limit = 1LL << 30;
static long long mem_used = 0;
static int launches = 0;

#define STICKY() do { if (sticky) return sticky; } while (0)

CUresult cuInit(unsigned flags) { (void)flags; const char *e = getenv("MOCK_CUINIT"); return e ? atoi(e) : 0; }
CUresult cuDriverGetVersion(int *v) { *v = 13000; return 0; }
CUresult cuDeviceGetCount(int *n) { *n = 1; return 0; }
CUresult cuDeviceGet(int *d, int ord) { if (ord != 0) return 101; *d = 0; return 0; }
CUresult cuDeviceGetName(char *name, int len, int dev) { (void)dev; snprintf(name, len, "Mock H200"); return 0; }
CUresult cuDeviceTotalMem_v2(size_t *b, int dev) { (void)dev; *b = (size_t)mem_limit; return 0; }
CUresult cuDeviceGetAttribute(int *v, int attr, int dev) {
  (void)dev;
  switch (attr) {
    case 1: *v = 1024; break; case 8: *v = 49152; break; case 10: *v = 32; break; case 12: *v = 65536; break;
    case 16: *v = 132; break; case 36: *v = 2619000; break; case 37: *v = 6144; break; case 38: *v = 52428800; break;
    case 39: *v = 2048; break; case 75: *v = 9; break; case 76: *v = 0; break; case 81: *v = 233472; break;
    case 82: *v = 65536; break; case 97: *v = 232448; break; case 33: *v = 0x1b; break;
    default: *v = 0;
  }
  return 0;
}
static const char *errname(int c) {
  switch (c) { case 0: return "CUDA_SUCCESS"; case 1: return "CUDA_ERROR_INVALID_VALUE"; case 2: return "CUDA_ERROR_OUT_OF_MEMORY";
    case 200: return "CUDA_ERROR_INVALID_IMAGE"; case 500: return "CUDA_ERROR_NOT_FOUND"; case 600: return "CUDA_ERROR_NOT_READY";
    case 700: return "CUDA_ERROR_ILLEGAL_ADDRESS"; case 719: return "CUDA_ERROR_LAUNCH_FAILED"; default: return 0; }
}
CUresult cuGetErrorName(int c, const char **s) { const char *n = errname(c); if (!n) return 1; *s = n; return 0; }
CUresult cuGetErrorString(int c, const char **s) {
  if (c == 700) { *s = "an illegal memory access was encountered"; return 0; }
  if (c == 2) { *s = "out of memory"; return 0; }
  return 1;
}
static int ctx_obj;
CUresult cuDevicePrimaryCtxRetain(void **ctx, int dev) { (void)dev; *ctx = &ctx_obj; return 0; }
CUresult cuCtxSetCurrent(void *ctx) { (void)ctx; STICKY(); return 0; }
CUresult cuCtxSynchronize(void) { STICKY(); return 0; }
CUresult cuMemGetInfo_v2(size_t *f, size_t *t) { STICKY(); *f = (size_t)(mem_limit - mem_used); *t = (size_t)mem_limit; return 0; }
CUresult cuMemAlloc_v2(uint64_t *p, size_t n) {
  STICKY();
  if (n == 0) return 1;
  if (mem_used + (long long)n > mem_limit) return 2;
  size_t *m = malloc(n + 16);
  if (!m) return 2;
  m[0] = n; mem_used += n;
  *p = (uint64_t)(uintptr_t)(m + 2);
  return 0;
}
CUresult cuMemFree_v2(uint64_t p) { STICKY(); size_t *m = (size_t *)(uintptr_t)p - 2; mem_used -= m[0]; free(m); return 0; }
CUresult cuMemHostAlloc(void **p, size_t n, unsigned f) { (void)f; STICKY(); *p = malloc(n); return *p ? 0 : 2; }
CUresult cuMemFreeHost(void *p) { STICKY(); free(p); return 0; }
CUresult cuMemHostGetDevicePointer_v2(unsigned long long *d, void *p, unsigned f) { (void)f; STICKY(); *d = (unsigned long long)(uintptr_t)p; return 0; }
CUresult cuMemcpyHtoDAsync_v2(uint64_t d, const void *s, size_t n, void *st) { (void)st; STICKY(); memcpy((void *)(uintptr_t)d, s, n); return 0; }
CUresult cuMemcpyDtoHAsync_v2(void *d, uint64_t s, size_t n, void *st) { (void)st; STICKY(); memcpy(d, (void *)(uintptr_t)s, n); return 0; }
CUresult cuMemcpyDtoDAsync_v2(uint64_t d, uint64_t s, size_t n, void *st) { (void)st; STICKY(); memmove((void *)(uintptr_t)d, (void *)(uintptr_t)s, n); return 0; }
CUresult cuMemsetD8Async(uint64_t d, unsigned char v, size_t n, void *st) { (void)st; STICKY(); memset((void *)(uintptr_t)d, v, n); return 0; }
CUresult cuMemsetD32Async(uint64_t d, unsigned v, size_t n, void *st) { (void)st; STICKY(); uint32_t *p = (uint32_t *)(uintptr_t)d; for (size_t i = 0; i < n; i++) p[i] = v; return 0; }
static int stream_objs[64]; static int nstreams = 0;
CUresult cuStreamCreate(void **s, unsigned f) { (void)f; STICKY(); *s = &stream_objs[nstreams++ % 64]; return 0; }
CUresult cuStreamDestroy_v2(void *s) { (void)s; STICKY(); return 0; }
CUresult cuStreamSynchronize(void *s) { (void)s; STICKY(); pending_polls = 0; return 0; }
CUresult cuStreamQuery(void *s) { (void)s; STICKY(); if (pending_polls > 0) { pending_polls--; return 600; } return 0; }
CUresult cuStreamWaitEvent(void *s, void *e, unsigned f) { (void)s; (void)e; (void)f; STICKY(); return 0; }
static int event_objs[64]; static int nevents = 0;
CUresult cuEventCreate(void **e, unsigned f) { (void)f; STICKY(); *e = &event_objs[nevents++ % 64]; return 0; }
CUresult cuEventDestroy_v2(void *e) { (void)e; STICKY(); return 0; }
CUresult cuEventRecord(void *e, void *s) { (void)e; (void)s; STICKY(); return 0; }
CUresult cuEventQuery(void *e) { (void)e; STICKY(); if (pending_polls > 0) { pending_polls--; return 600; } return 0; }
CUresult cuEventSynchronize(void *e) { (void)e; STICKY(); pending_polls = 0; return 0; }
CUresult cuEventElapsedTime_v2(float *ms, void *a, void *b) { (void)a; (void)b; STICKY(); *ms = 1.5f; return 0; }
static int module_obj;
CUresult cuModuleLoadData(void **m, const void *image) {
  STICKY();
  if (strncmp((const char *)image, "MOCKCUBIN", 9) != 0) return 200;
  *m = &module_obj; return 0;
}
CUresult cuModuleUnload(void *m) { (void)m; STICKY(); return 0; }
static int k_axpb = 1, k_echo = 2, k_fault = 3, k_tiny = 4;
CUresult cuModuleGetFunction(void **f, void *m, const char *name) {
  (void)m; STICKY();
  if (!strcmp(name, "nbx_axpb")) *f = &k_axpb;
  else if (!strcmp(name, "nbx_echo")) *f = &k_echo;
  else if (!strcmp(name, "nbx_fault")) *f = &k_fault;
  else if (!strcmp(name, "nbx_tiny")) *f = &k_tiny;
  else if (!strncmp(name, "_mangled_", 9)) *f = &k_axpb;
  else return 500;
  return 0;
}
static int last_smem_attr = 0;
CUresult cuFuncSetAttribute(void *f, int attr, int v) { (void)f; STICKY(); if (attr == 8) last_smem_attr = v; return 0; }
CUresult cuFuncGetAttribute(int *v, int attr, void *f) { (void)f; STICKY(); *v = attr == 4 ? 32 : attr == 0 ? 1024 : attr == 8 ? last_smem_attr : 0; return 0; }
CUresult cuLaunchKernel(void *f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by, unsigned bz,
                        unsigned smem, void *stream, void **params, void **extra) {
  (void)gy; (void)gz; (void)by; (void)bz; (void)smem; (void)stream; (void)extra;
  STICKY();
  if (gx == 0 || bx == 0 || bx > 1024) return 1;
  launches++;
  pending_polls = 3;
  int id = *(int *)f;
  if (id == 1) {
    float *x = (float *)(uintptr_t)*(uint64_t *)params[0];
    float *y = (float *)(uintptr_t)*(uint64_t *)params[1];
    float a = *(float *)params[2], b = *(float *)params[3];
    unsigned long long n = *(unsigned long long *)params[4];
    for (unsigned long long i = 0; i < n; i++) y[i] = a * x[i] + b;
  } else if (id == 2) {
    double *out = (double *)(uintptr_t)*(uint64_t *)params[0];
    out[0] = *(int *)params[1];
    out[1] = *(unsigned *)params[2];
    out[2] = (double)*(long long *)params[3];
    out[3] = (double)*(unsigned long long *)params[4];
    out[4] = *(float *)params[5];
    out[5] = *(double *)params[6];
  } else if (id == 3) {
    sticky = 700; /* reported asynchronously, by the next call */
  } else if (id == 4) {
    float *p = (float *)(uintptr_t)*(uint64_t *)params[0];
    if (p) p[0] = (float)*(int *)params[1];
  }
  return 0;
}
int mock_launches(void) { return launches; }

/* ------------------------------------------------------------------ NVRTC */
typedef struct { char *src; char *name; char log[512]; char image[1024]; size_t image_len; int nexpr; char exprs[8][128]; char lowered[8][160]; int nheaders; char arch[32]; } prog_t;
int nvrtcVersion(int *a, int *b) { *a = 13; *b = 0; return 0; }
int nvrtcGetNumSupportedArchs(int *n) { *n = 7; return 0; }
int nvrtcGetSupportedArchs(int *a) { int v[] = {75, 80, 86, 89, 90, 100, 120}; memcpy(a, v, sizeof v); return 0; }
const char *nvrtcGetErrorString(int r) {
  switch (r) { case 0: return "NVRTC_SUCCESS"; case 5: return "NVRTC_ERROR_INVALID_OPTION"; case 6: return "NVRTC_ERROR_COMPILATION"; default: return "NVRTC_ERROR_MOCK"; }
}
int nvrtcCreateProgram(prog_t **out, const char *src, const char *name, int nh, const char *const *h, const char *const *hn) {
  prog_t *p = calloc(1, sizeof(prog_t));
  p->src = strdup(src); p->name = strdup(name ? name : "x.cu"); p->nheaders = nh;
  for (int i = 0; i < nh; i++) if (!h[i] || !hn[i]) return 3;
  *out = p; return 0;
}
int nvrtcDestroyProgram(prog_t **p) { free((*p)->src); free((*p)->name); free(*p); *p = 0; return 0; }
int nvrtcAddNameExpression(prog_t *p, const char *e) { strncpy(p->exprs[p->nexpr++], e, 127); return 0; }
int nvrtcCompileProgram(prog_t *p, int n, const char *const *opts) {
  char all[600] = ""; p->arch[0] = 0;
  int has_default_device = 0, has_std = 0;
  for (int i = 0; i < n; i++) {
    if (!strncmp(opts[i], "--gpu-architecture=", 19)) strncpy(p->arch, opts[i] + 19, 31);
    if (!strcmp(opts[i], "-default-device")) has_default_device = 1;
    if (!strcmp(opts[i], "--std=c++17")) has_std = 1;
    if (!strcmp(opts[i], "--bogus")) { snprintf(p->log, sizeof p->log, "nvrtc: error: unrecognized option --bogus"); return 5; }
    strncat(all, opts[i], sizeof all - strlen(all) - 2); strcat(all, " ");
  }
  if (strstr(p->src, "#error")) {
    snprintf(p->log, sizeof p->log, "%s(3): error: forced failure\n%s(4): error: second problem\n2 errors detected in the compilation of \"%s\".", p->name, p->name, p->name);
    return 6;
  }
  if (strstr(p->src, "#warning")) snprintf(p->log, sizeof p->log, "%s(1): warning: mock warning", p->name);
  snprintf(p->image, sizeof p->image, "MOCKCUBIN arch=%s dd=%d std=%d headers=%d srclen=%zu opts=%s", p->arch, has_default_device, has_std, p->nheaders, strlen(p->src), all);
  p->image_len = strlen(p->image) + 1;
  for (int i = 0; i < p->nexpr; i++) snprintf(p->lowered[i], 160, "_mangled_%s", p->exprs[i]);
  return 0;
}
int nvrtcGetProgramLogSize(prog_t *p, size_t *n) { *n = strlen(p->log) + 1; return 0; }
int nvrtcGetProgramLog(prog_t *p, char *buf) { strcpy(buf, p->log); return 0; }
int nvrtcGetCUBINSize(prog_t *p, size_t *n) { if (strncmp(p->arch, "sm_", 3)) return 3; *n = p->image_len; return 0; }
int nvrtcGetCUBIN(prog_t *p, char *buf) { memcpy(buf, p->image, p->image_len); return 0; }
int nvrtcGetPTXSize(prog_t *p, size_t *n) { *n = p->image_len; return 0; }
int nvrtcGetPTX(prog_t *p, char *buf) { memcpy(buf, p->image, p->image_len); return 0; }
int nvrtcGetLoweredName(prog_t *p, const char *e, const char **out) {
  for (int i = 0; i < p->nexpr; i++) if (!strcmp(p->exprs[i], e)) { *out = p->lowered[i]; return 0; }
  return 10;
}

/* ------------------------------------------------------------------ cuBLASLt */
typedef struct { int compute, scale, transa, transb; unsigned epilogue; void *bias; } desc_t;
typedef struct { int type; uint64_t rows, cols; int64_t ld; int batch; int64_t stride; } layout_t;
typedef struct { uint64_t ws; unsigned align[4]; } pref_t;
static int lt_obj;
int cublasLtCreate(void **h) { STICKY(); *h = &lt_obj; return 0; }
int cublasLtDestroy(void *h) { (void)h; return 0; }
size_t cublasLtGetVersion(void) { return 130100; }
const char *cublasLtGetStatusName(int s) { return s == 7 ? "CUBLAS_STATUS_INVALID_VALUE" : s == 15 ? "CUBLAS_STATUS_NOT_SUPPORTED" : s == 0 ? "CUBLAS_STATUS_SUCCESS" : "CUBLAS_STATUS_MOCK"; }
const char *cublasLtGetStatusString(int s) { (void)s; return "mock"; }
int cublasLtMatmulDescCreate(desc_t **d, int compute, int scale) {
  if (compute != 68 && compute != 77) return 7;
  if (scale != 0) return 7;
  *d = calloc(1, sizeof(desc_t)); (*d)->compute = compute; (*d)->scale = scale; (*d)->epilogue = 1; return 0;
}
int cublasLtMatmulDescDestroy(desc_t *d) { free(d); return 0; }
int cublasLtMatmulDescSetAttribute(desc_t *d, int attr, const void *buf, size_t n) {
  switch (attr) {
    case 3: if (n != 4) return 7; d->transa = *(const int *)buf; return 0;
    case 4: if (n != 4) return 7; d->transb = *(const int *)buf; return 0;
    case 7: if (n != 4) return 7; d->epilogue = *(const unsigned *)buf; return 0;
    case 8: if (n != 8) return 7; d->bias = *(void *const *)buf; return 0;
    default: return 7;
  }
}
int cublasLtMatrixLayoutCreate(layout_t **l, int type, uint64_t rows, uint64_t cols, int64_t ld) {
  if (type != 0 && type != 2 && type != 14) return 7;
  if (ld < (int64_t)rows) return 7;
  *l = calloc(1, sizeof(layout_t)); (*l)->type = type; (*l)->rows = rows; (*l)->cols = cols; (*l)->ld = ld; (*l)->batch = 1; return 0;
}
int cublasLtMatrixLayoutDestroy(layout_t *l) { free(l); return 0; }
int cublasLtMatrixLayoutSetAttribute(layout_t *l, int attr, const void *buf, size_t n) {
  if (attr == 5) { if (n != 4) return 7; l->batch = *(const int *)buf; return 0; }
  if (attr == 6) { if (n != 8) return 7; l->stride = *(const int64_t *)buf; return 0; }
  return 7;
}
int cublasLtMatmulPreferenceCreate(pref_t **p) { *p = calloc(1, sizeof(pref_t)); return 0; }
int cublasLtMatmulPreferenceDestroy(pref_t *p) { free(p); return 0; }
int cublasLtMatmulPreferenceSetAttribute(pref_t *p, int attr, const void *buf, size_t n) {
  if (attr == 1) { if (n != 8) return 7; p->ws = *(const uint64_t *)buf; return 0; }
  if (attr >= 5 && attr <= 8) { if (n != 4) return 7; p->align[attr - 5] = *(const unsigned *)buf; return 0; }
  return 7;
}
static int heuristics = 0;
int mock_heuristics(void) { return heuristics; }
int cublasLtMatmulAlgoGetHeuristic(void *h, desc_t *d, layout_t *a, layout_t *b, layout_t *c, layout_t *dd, pref_t *p, int req, unsigned char *res, int *ret) {
  (void)h; (void)d; (void)a; (void)b; (void)c; (void)dd; (void)p;
  heuristics++;
  if (req < 1) return 7;
  memset(res, 0, 96 * req);
  res[0] = 42;                      /* algo marker */
  *(uint64_t *)(res + 64) = 0;      /* workspaceSize */
  *(int *)(res + 72) = 0;           /* state */
  *(float *)(res + 76) = 1.0f;      /* wavesCount */
  *ret = 1; return 0;
}
static float h2f(uint16_t h) {
  uint32_t s = (h >> 15) & 1, e = (h >> 10) & 31, m = h & 1023; float v;
  if (e == 0) v = ldexpf((float)m, -24); else if (e == 31) v = m ? NAN : INFINITY; else v = ldexpf((float)(m | 1024), (int)e - 25);
  return s ? -v : v;
}
static uint16_t f2h(float f) { /* round to nearest, enough for the small exact values the tests use */
  uint16_t s = f < 0 ? 0x8000 : 0; float a = fabsf(f);
  if (a == 0) return s;
  int e;
  float m = frexpf(a, &e); /* a = m * 2^e, m in [0.5,1) */
  int he = e + 14; if (he <= 0) return s | (uint16_t)lrintf(a * 16777216.0f);
  if (he >= 31) return s | 0x7c00;
  return s | (uint16_t)(he << 10) | (uint16_t)(lrintf((m * 2 - 1) * 1024) & 1023);
}
static float bf2f(uint16_t b) { uint32_t u = (uint32_t)b << 16; float f; memcpy(&f, &u, 4); return f; }
static uint16_t f2bf(float f) { uint32_t u; memcpy(&u, &f, 4); u += 0x7fff + ((u >> 16) & 1); return (uint16_t)(u >> 16); }
static float ld_el(int type, const void *p, int64_t i) {
  if (type == 0) return ((const float *)p)[i];
  if (type == 2) return h2f(((const uint16_t *)p)[i]);
  return bf2f(((const uint16_t *)p)[i]);
}
static void st_el(int type, void *p, int64_t i, float v) {
  if (type == 0) ((float *)p)[i] = v; else if (type == 2) ((uint16_t *)p)[i] = f2h(v); else ((uint16_t *)p)[i] = f2bf(v);
}
int cublasLtMatmul(void *h, desc_t *d, const float *alpha, const void *A, layout_t *la, const void *B, layout_t *lb,
                   const float *beta, const void *C, layout_t *lc, void *D, layout_t *ld_, const unsigned char *algo,
                   void *ws, size_t wsn, void *stream) {
  (void)h; (void)ws; (void)wsn; (void)stream;
  STICKY();
  if (!algo || algo[0] != 42) return 7;
  if (!A || !B || !C || !D) return 7;
  uint64_t m = ld_->rows, n = ld_->cols;
  uint64_t k = d->transa == 0 ? la->cols : la->rows;
  uint64_t am = d->transa == 0 ? la->rows : la->cols;
  uint64_t bk = d->transb == 0 ? lb->rows : lb->cols, bn = d->transb == 0 ? lb->cols : lb->rows;
  if (am != m || bk != k || bn != n || lc->rows != m || lc->cols != n) return 7;
  int batch = ld_->batch;
  if (la->batch != batch || lb->batch != batch || lc->batch != batch) return 7;
  for (int bt = 0; bt < batch; bt++) {
    for (uint64_t i = 0; i < m; i++) for (uint64_t j = 0; j < n; j++) {
      double acc = 0;
      for (uint64_t l = 0; l < k; l++) {
        int64_t ia = d->transa == 0 ? (int64_t)(i + l * la->ld) : (int64_t)(l + i * la->ld);
        int64_t ib = d->transb == 0 ? (int64_t)(l + j * lb->ld) : (int64_t)(j + l * lb->ld);
        acc += (double)ld_el(la->type, A, ia + bt * la->stride) * (double)ld_el(lb->type, B, ib + bt * lb->stride);
      }
      double v = (double)*alpha * acc;
      if (*beta != 0) v += (double)*beta * ld_el(lc->type, C, (int64_t)(i + j * lc->ld) + bt * lc->stride);
      if (d->epilogue == 4) { if (!d->bias) return 7; v += ld_el(ld_->type, d->bias, (int64_t)i); }
      st_el(ld_->type, D, (int64_t)(i + j * ld_->ld) + bt * ld_->stride, (float)v);
    }
  }
  return 0;
}
`;

const CHILD_SCRIPT = String.raw`
import fs from 'node:fs';
import path from 'node:path';
const dist = process.env.NBX_TEST_DIST;
const libs = await import(dist + '/src/backend/cuda/runtime/libs.js');
const drv = await import(dist + '/src/backend/cuda/runtime/driver.js');
const nv = await import(dist + '/src/backend/cuda/runtime/nvrtc.js');
const lt = await import(dist + '/src/backend/cuda/runtime/cublaslt.js');
const errors = await import(dist + '/src/errors.js');
const alloc = await import(dist + '/src/memory/caching_allocator.js');
function ok(cond, name, detail) {
  if (!cond) throw new Error('FAILED ' + name + (detail === undefined ? '' : ': ' + detail));
  console.log('ok - ' + name);
}
function throwsLike(fn, cls, re, name) {
  try { fn(); } catch (e) {
    ok(e instanceof cls && (!re || re.test(e.message)), name, e && e.stack ? e.stack : String(e));
    return e;
  }
  throw new Error('FAILED ' + name + ': did not throw');
}
const enc = (s) => new TextEncoder().encode(s);
const dec = (b) => new TextDecoder().decode(b);

const p = libs.probeCuda();
ok(p.available && p.devices[0].arch === 'sm_90' && p.devices[0].maxSharedMemPerBlockOptin === 232448, 'probe through the mock');
ok(drv.driverVersion() === 13000 && drv.deviceCount() === 1, 'driver version and device count');
const ctx = drv.CudaContext.get(0);
ok(drv.CudaContext.get(0) === ctx, 'primary context is cached');
throwsLike(() => drv.CudaContext.get(3), errors.DeviceError, /device 3 does not exist/, 'missing device');

// modules and kernels
throwsLike(() => ctx.loadModule(enc('garbage\0'), 'bad'), drv.CudaError, /cuModuleLoadData\(bad\).*CUDA_ERROR_INVALID_IMAGE/, 'invalid image is a typed CudaError');
const SRC = 'extern "C" __global__ void nbx_axpb(const float* x, float* y, float a, float b, unsigned long long n) {}';
const { module, compiled } = nv.loadSource(ctx, SRC);
ok(compiled.kind === 'cubin' && compiled.arch === 'sm_90' && compiled.name === 'nbx_axpb', 'CUBIN for sm_90, named after the kernel');
const img = dec(compiled.image);
ok(img.includes('arch=sm_90') && img.includes('dd=1') && img.includes('std=1'), 'NVRTC gets --gpu-architecture=sm_90 -default-device --std=c++17', img);
ok(nv.loadSource(ctx, SRC).module === module, 'loaded modules are cached');
throwsLike(() => module.getFunction('nope', 'p'), drv.CudaError, /CUDA_ERROR_NOT_FOUND/, 'unknown function is typed');
const k = module.getFunction('nbx_axpb', 'ppffL');
ok(module.getFunction('nbx_axpb', 'ppffL') === k, 'functions are cached');
throwsLike(() => ctx.launch(k, 1, 1, [1n]), errors.ValueError, /takes 5 arguments/, 'argument count is checked');
const le = throwsLike(() => ctx.launch(k, 1, 2048, [0n, 0n, 1, 1, 0]), drv.CudaError, /cuLaunchKernel\(nbx_axpb.*CUDA_ERROR_INVALID_VALUE/, 'launch errors name the kernel');
ok(le.code === 1 && le.errorName === 'CUDA_ERROR_INVALID_VALUE' && !(le instanceof errors.DeviceFaultError), 'launch error fields');
throwsLike(() => drv.parseSignature('pq'), errors.ValueError, /unknown signature letter/, 'bad signature letters');
ok(drv.parseSignature('p i,u l L f d').join() === 'ptr,i32,u32,i64,u64,f32,f64', 'signature letters');
k.setMaxDynamicSharedMemory(100000);
ok(k.attribute(8) === 100000, 'max dynamic shared memory is set');
throwsLike(() => k.setMaxDynamicSharedMemory(1 << 20), errors.ValueError, /at most 232448/, 'dynamic shared memory above the opt-in limit');
ok(k.resources().numRegs === 32, 'kernel resources');

// data path
const N = 4096;
const x = Float32Array.from({ length: N }, (_, i) => i - 100);
const dx = ctx.malloc(N * 4), dy = ctx.malloc(N * 4);
ctx.copyHtoD(dx, x);
ctx.launch(k, [N / 256, 1, 1], [256], [dx, dy, 0.5, 3, N]);
const y = new Float32Array(N);
ctx.copyDtoH(y, dy);
ok(y.every((v, i) => v === 0.5 * (i - 100) + 3), 'a*x+b through the parameter block');
ctx.copyDtoH(y.subarray(10, 20), dy + 400n, 40);
ok(y[10] === 0.5 * (100 - 100) + 3, 'offset copies into subarrays');
throwsLike(() => ctx.copyDtoH(new Float32Array(2), dy, 64), errors.ValueError, /host buffer has 8/, 'copy size is checked');
const pin = ctx.hostAlloc(N * 4);
new Float32Array(pin.buffer).set(x);
ctx.copyHtoD(dy, pin);
ctx.copyDtoH(y, dy);
ok(y[N - 1] === N - 101, 'pinned buffers');
ctx.hostFree(pin);

// streams and events (the mock answers NOT_READY three times after each launch)
const s = ctx.createStream();
ctx.launch(k, 1, 32, [dx, dy, 1, 0, 0], 0, s);
ok(s.query() === false, 'cuStreamQuery NOT_READY is false, not an error');
await s.synchronizeAsync();
ok(s.query() === true, 'synchronizeAsync resolves when the stream is idle');
const e0 = ctx.createEvent(), e1 = ctx.createEvent();
e0.record(s);
ctx.launch(k, 1, 32, [dx, dy, 1, 0, 0], 0, s);
e1.record(s);
await e1.wait();
ok(e1.elapsedSince(e0) === 1.5, 'event wait and timing');
e0.destroy(); e1.destroy(); s.destroy();

// out of memory
const oom = throwsLike(() => ctx.malloc(2 ** 40), errors.OutOfMemoryError, /CUDA_ERROR_OUT_OF_MEMORY.*free of/, 'cuMemAlloc OOM is an OutOfMemoryError');
const ca = new alloc.CachingAllocator(ctx.rawAllocator(), { deviceName: 'cuda:0' });
const keep = ca.malloc(600 << 20);
throwsLike(() => ca.malloc(600 << 20), errors.OutOfMemoryError, /tried to allocate 600.00 MiB[\s\S]*Device memory: .* free of 1.00 GiB/, 'caching allocator over the driver reports OOM with device memory');
ca.free(keep);
const again = ca.malloc(600 << 20);
ok(again === keep, 'cached block reused after OOM');
ca.free(again); ca.emptyCache(); ca.checkInvariants();

// NVRTC: targets, name expressions, headers, logs, errors, disk cache, async
const nvr = nv.Nvrtc.get();
ok(nvr.versionString === '13.0' && nvr.supportedArchs.includes(90), 'NVRTC version and archs');
ok(nvr.targetFor([9, 0]).arch === 'sm_90' && nvr.targetFor([9, 0]).kind === 'cubin', 'target sm_90 -> cubin');
ok(nvr.targetFor([9, 5]).arch === 'compute_90' && nvr.targetFor([9, 5]).kind === 'ptx', 'unsupported newer arch -> PTX of the newest older one');
throwsLike(() => nvr.targetFor([7, 0]), errors.UnsupportedError, /sm_70/, 'arch older than NVRTC supports');
const ptx = nvr.compile(SRC, 'compute_90', { diskCache: false });
ok(ptx.kind === 'ptx' && ptx.image[ptx.image.length - 1] === 0, 'PTX keeps its NUL terminator');
const ptx2 = nvr.compile(SRC, [9, 0], { arch: 'compute_90', diskCache: false });
ok(ptx2.kind === 'ptx', 'arch override');
const TPL = '#include "h.cuh"\ntemplate<int N> __global__ void t(float* p) {}';
const c2 = nvr.compile(TPL, [9, 0], { nameExpressions: ['t<4>'], headers: { 'h.cuh': '#pragma once' } });
ok(c2.loweredNames['t<4>'] === '_mangled_t<4>' && dec(c2.image).includes('headers=1'), 'name expressions and virtual headers');
const kk = nv.getKernel(ctx, TPL, 't<4>', 'p', { nameExpressions: ['t<4>'], headers: { 'h.cuh': '#pragma once' } });
ok(kk.name === '_mangled_t<4>', 'getKernel resolves lowered names');
const dup = dec(nvr.compile(SRC, [9, 0], { options: ['--std=c++17', '-DA=1', '-DA=1'], diskCache: false }).image);
ok(dup.split('--std=c++17').length === 2 && dup.split('-DA=1').length === 2, 'duplicate options are dropped', dup);
const s20 = dec(nvr.compile(SRC, [9, 0], { options: ['--std=c++20'], diskCache: false }).image);
ok(s20.includes('--std=c++20') && !s20.includes('--std=c++17'), 'the caller picks the language standard', s20);
throwsLike(() => nvr.compile(SRC, [9, 0], { options: ['-arch=sm_80'] }), errors.UnsupportedError, /options.arch/, 'the target goes through options.arch');
const w = nvr.compile(SRC + '\n#warning x', [9, 0], { diskCache: false });
ok(w.log.includes('mock warning'), 'warnings are kept in the log');
throwsLike(() => nvr.compile(SRC, [9, 0], { options: ['--bogus'], diskCache: false }), nv.NvrtcCompileError, /INVALID_OPTION[\s\S]*--bogus/, 'invalid option reported with the options');
const ce = throwsLike(() => nvr.compile('__global__ void my_bad_kernel() {}\n#error x', [9, 0], { diskCache: false }), nv.NvrtcCompileError, /my_bad_kernel[\s\S]*NVRTC_ERROR_COMPILATION[\s\S]*forced failure/, 'compile errors carry the kernel name and the log');
ok(ce.log.includes('second problem') && ce.kernel === 'my_bad_kernel', 'full log on the error');
const uniq = SRC + '// cache test ' + Date.now();
const st0 = nv.nvrtcStats();
const first = nvr.compile(uniq, [9, 0]);
const file = path.join(nv.kernelCacheDir(), first.key + '.nbxmod');
ok(fs.existsSync(file) && nv.nvrtcStats().diskWrites === st0.diskWrites + 1, 'compiled module written to the disk cache');
nvr.clearMemoryCache();
ok(nvr.compile(uniq, [9, 0]).from === 'disk', 'disk hit after clearing the memory cache');
ok(nvr.compile(uniq, [9, 0]).from === 'memory', 'memory hit');
ok(nvr.compile(uniq, [9, 0], { options: ['-DX=1'] }).from === 'compiled', 'options are part of the key');
fs.writeFileSync(file, fs.readFileSync(file).subarray(0, 20));
nvr.clearMemoryCache();
const st1 = nv.nvrtcStats();
const rec = nvr.compile(uniq, [9, 0]);
ok(rec.from === 'compiled' && nv.nvrtcStats().diskErrors === st1.diskErrors + 1, 'a truncated cache file is recompiled');
nvr.clearMemoryCache();
ok(nvr.compile(uniq, [9, 0]).from === 'disk', 'and rewritten');
ok(fs.readdirSync(nv.kernelCacheDir()).every((f) => f.endsWith('.nbxmod')), 'no temporary files left behind');
const ac = await nvr.compileAsync(SRC + '// async ' + Date.now(), [9, 0]);
ok(ac.from === 'compiled' && dec(ac.image).startsWith('MOCKCUBIN'), 'compileAsync');
const ro = process.env.NBX_CACHE_DIR;
const notADir = path.join(process.env.NBX_CACHE_DIR, 'not-a-folder');
fs.writeFileSync(notADir, 'x');
process.env.NBX_CACHE_DIR = notADir; // mkdir under a file fails: the cache cannot be written
const roc = nvr.compile(SRC + '// ro ' + Date.now(), [9, 0]);
ok(roc.from === 'compiled' && nv.nvrtcStats().diskErrors > st1.diskErrors + 1, 'an unwritable cache folder does not break compilation');
process.env.NBX_CACHE_DIR = ro;

// cuBLASLt: row-major results and plan cache (the mock computes column-major cuBLAS semantics)
const L = lt.CublasLt.get(ctx);
const m = 3, n = 4, kk2 = 2;
const A = new Float32Array([1, 2, 3, 4, 5, 6]);           // 3x2 row-major
const B = new Float32Array([1, 0, 2, 1, 0, 1, 1, 3]);     // 2x4 row-major
const dA = ctx.malloc(64), dB = ctx.malloc(64), dC = ctx.malloc(64), dBias = ctx.malloc(16);
ctx.copyHtoD(dA, A); ctx.copyHtoD(dB, B);
ctx.copyHtoD(dBias, new Float32Array([100, 200, 300, 400]));
L.gemm({ dtype: 'float32', m, n, k: kk2, A: dA, B: dB, C: dC });
const C = new Float32Array(12);
ctx.copyDtoH(C, dC);
const want = [1, 2, 4, 7, 3, 4, 10, 15, 5, 6, 16, 23];
ok(C.every((v, i) => v === want[i]), 'row-major C = A B', Array.from(C).join(','));
L.gemm({ dtype: 'float32', m, n, k: kk2, A: dA, B: dB, C: dC, bias: dBias });
ctx.copyDtoH(C, dC);
ok(C.every((v, i) => v === want[i] + 100 * ((i % 4) + 1)), 'bias is added per column (output feature)', Array.from(C).join(','));
const st = { ...L.stats };
L.gemm({ dtype: 'float32', m, n, k: kk2, A: dA, B: dB, C: dC });
ok(L.stats.planHits === st.planHits + 1 && L.stats.planMisses === st.planMisses, 'plan cache hit for the same problem');
L.gemm({ dtype: 'float32', m, n, k: kk2, A: dA + 4n, B: dB, C: dC });
ok(L.stats.planMisses === st.planMisses + 1, 'a differently aligned pointer gets its own plan');
throwsLike(() => L.gemm({ dtype: 'float32', m, n, k: kk2, A: dA, B: dB, C: dC, lda: 1 }), errors.ValueError, /lda=1/, 'leading dimensions are validated');
throwsLike(() => L.gemm({ dtype: 'int8', m, n, k: kk2, A: dA, B: dB, C: dC }), errors.UnsupportedError, /int8/, 'unsupported dtype');
throwsLike(() => L.gemm({ dtype: 'float32', m, n, k: 0, A: dA, B: dB, C: dC }), errors.UnsupportedError, /k = 0/, 'k = 0');
L.gemm({ dtype: 'float32', m: 0, n, k: kk2, A: dA, B: dB, C: dC });
ok(true, 'm = 0 is a no-op');
lt.gemm({ dtype: 'float32', m, n, k: kk2, A: dA, B: dB, C: dC });
ok(true, 'module-level gemm() uses the default context');

// sticky fault: typed, names the kernel, poisons the context (last: nothing works afterwards)
const kf = nv.getKernel(ctx, 'extern "C" __global__ void nbx_fault(float* p) {}', 'nbx_fault', 'p');
ctx.launch(kf, 1, 1, [16n]);
const fe = throwsLike(() => ctx.synchronize(), errors.DeviceFaultError, /CUDA_ERROR_ILLEGAL_ADDRESS[\s\S]*Kernel last launched: nbx_fault/, 'a device fault is a DeviceFaultError naming the kernel');
ok(fe.kernel === 'nbx_fault' && fe.code === 700 && fe instanceof drv.CudaFaultError, 'fault fields');
ok(drv.contextPoisoned() && drv.contextPoisoned().code === 700, 'contextPoisoned() reports it');
throwsLike(() => ctx.malloc(16), errors.DeviceFaultError, /context is unusable after CUDA_ERROR_ILLEGAL_ADDRESS/, 'later calls: context is unusable');
throwsLike(() => ctx.launch(k, 1, 1, [0n, 0n, 1, 1, 0]), errors.DeviceFaultError, /unusable/, 'later launches too');
throwsLike(() => L.gemm({ dtype: 'float32', m, n, k: kk2, A: dA, B: dB, C: dC }), errors.DeviceError, /unusable/, 'and GEMMs');
console.log('ALL OK');
`;

function hasGcc(): boolean {
  const r = spawnSync('gcc', ['--version'], { encoding: 'utf8' });
  return r.status === 0;
}

describe('bindings against a mock driver', () => {
  let work = '';
  let lib = '';
  let why = '';
  const setup = (): boolean => {
    if (lib) return true;
    if (why) return false;
    if (!hasGcc()) {
      why = 'gcc not available to build the mock driver';
      return false;
    }
    work = mkdtempSync(join(tmpdir(), 'nbx-mockcuda-'));
    writeFileSync(join(work, 'mock.c'), MOCK_C);
    const out = join(work, 'libmockcuda.so');
    const r = spawnSync('gcc', ['-shared', '-fPIC', '-O2', '-o', out, join(work, 'mock.c'), '-lm'], { encoding: 'utf8' });
    if (r.status !== 0) {
      why = `gcc failed: ${r.stderr}`;
      return false;
    }
    writeFileSync(join(work, 'child.mjs'), CHILD_SCRIPT);
    lib = out;
    return true;
  };
  after(() => {
    if (work) rmSync(work, { recursive: true, force: true });
  });
  const env = (extra: Record<string, string> = {}): NodeJS.ProcessEnv => ({
    ...process.env,
    NBX_LIBCUDA: lib,
    NBX_LIBNVRTC: lib,
    NBX_LIBCUBLASLT: lib,
    NBX_LIBCUBLAS: lib,
    NBX_CACHE_DIR: join(work, 'cache'),
    NBX_TEST_DIST: distRoot,
    ...extra,
  });

  it('driver, NVRTC and cuBLASLt wrappers behave', (t) => {
    if (!setup()) {
      t.skip(why);
      return;
    }
    const r = spawnSync(process.execPath, [join(work, 'child.mjs')], { env: env(), encoding: 'utf8', timeout: 120_000 });
    const out = `${r.stdout}\n${r.stderr}`;
    assert.equal(r.status, 0, out);
    assert.ok(r.stdout.includes('ALL OK'), out);
  });

  it('the self-check script passes against the mock (--small)', (t) => {
    if (!setup()) {
      t.skip(why);
      return;
    }
    const r = spawnSync(process.execPath, [selfcheck, '--small'], { env: env(), encoding: 'utf8', timeout: 300_000 });
    const out = `${r.stdout}\n${r.stderr}`;
    assert.equal(r.status, 0, out);
    assert.match(r.stdout, /^\d+ passed, 0 failed$/m, out);
    assert.ok(!/^FAIL/m.test(r.stdout), out);
  });

  it('probeCuda explains a driver without devices', (t) => {
    if (!setup()) {
      t.skip(why);
      return;
    }
    const script = `const m = await import(${JSON.stringify(join(distRoot, 'src', 'backend', 'cuda', 'runtime', 'libs.js'))}); console.log(JSON.stringify(m.probeCuda()));`;
    const r = spawnSync(process.execPath, ['--input-type=module', '-e', script], { env: env({ MOCK_CUINIT: '100' }), encoding: 'utf8' });
    assert.equal(r.status, 0, r.stderr);
    const p = JSON.parse(r.stdout) as CudaProbe;
    assert.equal(p.available, false);
    assert.match(p.reason!, /CUDA_ERROR_NO_DEVICE.*no CUDA-capable device/);
    assert.equal(p.driverVersion, 13000);
  });
});
