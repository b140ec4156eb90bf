// Runs a command against an emulated CUDA stack (no GPU needed): libcuda / libnvrtc / libcublasLt
// replaced by cuda_emu/emu_driver.cpp, kernels compiled with g++ against cuda_emu/emu_rt.h and run on
// the host. Exercises the real CUDA backend end to end: NVRTC sources, argument marshalling, launch
// geometry, shared memory, barriers and shuffles, cuBLASLt calls. Slow; for correctness only.
//   node test/gen/cuda_emu.mjs node dist/src/cli/nbx.js conformance ../shared/conformance/public --device cuda --filter '^fft'
//   NBX_CUDA_HOST_STAGING=0 node test/gen/cuda_emu.mjs node --test dist/test/cuda_conv.test.js
import { spawnSync } from 'node:child_process';
import { mkdirSync, existsSync, statSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const here = join(dirname(fileURLToPath(import.meta.url)), 'cuda_emu');
const work = process.env.NBX_EMU_WORK ?? '/tmp/nbx_cuda_emu';
mkdirSync(join(work, 'kernels'), { recursive: true });
const lib = join(work, 'libemucuda.so');
const src = join(here, 'emu_driver.cpp');
if (!existsSync(lib) || statSync(lib).mtimeMs < statSync(src).mtimeMs) {
  const r = spawnSync('g++', ['-std=c++17', '-O2', '-shared', '-fPIC', '-o', lib, src, '-ldl'], { stdio: 'inherit' });
  if (r.status !== 0) process.exit(1);
}
const env = {
  ...process.env, NBX_LIBCUDA: lib, NBX_LIBNVRTC: lib, NBX_LIBCUBLASLT: lib, NBX_LIBCUBLAS: lib,
  NBX_EMU_DIR: join(work, 'kernels'), NBX_EMU_RT: join(here, 'emu_rt.h'), NBX_CACHE_DIR: join(work, 'cache'),
};
const [cmd, ...args] = process.argv.slice(2);
if (!cmd) { console.error('usage: node test/gen/cuda_emu.mjs <command> [args...]'); process.exit(2); }
const r = spawnSync(cmd, args, { env, stdio: 'inherit' });
process.exit(r.status ?? 1);
