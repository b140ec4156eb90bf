// The driver's own host cost of cuLaunchKernel (an empty kernel, 1 block of 32 threads, 4 pointer
// arguments), measured from C so the FFI layer is out of the picture. Loads libcuda with dlopen, so it
// builds without the CUDA toolkit's link stubs:  gcc -O2 -o launch_cost launch_cost.c -ldl
// Run on the GPU machine: ./launch_cost  (prints microseconds per launch, with and without a sync each 1000).
#include <dlfcn.h>
#include <stdio.h>
#include <stdint.h>
#include <time.h>

typedef int (*fn_t)();
static const char *PTX =
  ".version 7.0\n.target sm_50\n.address_size 64\n"
  ".visible .entry noop(.param .u64 a, .param .u64 b, .param .u64 c, .param .u32 n) { ret; }\n";

static double now(void) { struct timespec t; clock_gettime(CLOCK_MONOTONIC, &t); return t.tv_sec * 1e6 + t.tv_nsec / 1e3; }

int main(void) {
  void *h = dlopen("libcuda.so.1", RTLD_NOW);
  if (!h) { printf("no libcuda: %s\n", dlerror()); return 1; }
  int (*cuInit)(unsigned) = dlsym(h, "cuInit");
  int (*cuDeviceGet)(int *, int) = dlsym(h, "cuDeviceGet");
  int (*cuCtxRetain)(void **, int) = dlsym(h, "cuDevicePrimaryCtxRetain");
  int (*cuCtxSetCurrent)(void *) = dlsym(h, "cuCtxSetCurrent");
  int (*cuModuleLoadData)(void **, const void *) = dlsym(h, "cuModuleLoadData");
  int (*cuModuleGetFunction)(void **, void *, const char *) = dlsym(h, "cuModuleGetFunction");
  int (*cuStreamCreate)(void **, unsigned) = dlsym(h, "cuStreamCreate");
  int (*cuLaunchKernel)(void *, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, void *, void **, void **) = dlsym(h, "cuLaunchKernel");
  int (*cuStreamSynchronize)(void *) = dlsym(h, "cuStreamSynchronize");
  int dev, r; void *ctx, *mod, *fn, *stream;
  if ((r = cuInit(0)) || (r = cuDeviceGet(&dev, 0)) || (r = cuCtxRetain(&ctx, dev)) || (r = cuCtxSetCurrent(ctx))) { printf("init failed %d\n", r); return 1; }
  if ((r = cuModuleLoadData(&mod, PTX)) || (r = cuModuleGetFunction(&fn, mod, "noop")) || (r = cuStreamCreate(&stream, 1))) { printf("module failed %d\n", r); return 1; }
  uint64_t a = 0, b = 0, c = 0; unsigned n = 32;
  void *args[] = { &a, &b, &c, &n };
  for (int rep = 0; rep < 3; rep++) {
    const int N = 20000;
    double t0 = now();
    for (int i = 0; i < N; i++) {
      cuLaunchKernel(fn, 1, 1, 1, 32, 1, 1, 0, stream, args, 0);
      if (i % 1000 == 999) cuStreamSynchronize(stream);
    }
    cuStreamSynchronize(stream);
    double t1 = now();
    printf("cuLaunchKernel from C: %.2f us per launch (incl. device drain every 1000)\n", (t1 - t0) / N);
  }
  for (int rep = 0; rep < 2; rep++) {
    const int N = 1000;
    double t0 = now();
    for (int i = 0; i < N; i++) cuLaunchKernel(fn, 1, 1, 1, 32, 1, 1, 0, stream, args, 0);
    double t1 = now();
    cuStreamSynchronize(stream);
    printf("cuLaunchKernel from C, host time only, 1000 queued: %.2f us per launch\n", (t1 - t0) / N);
  }
  return 0;
}
