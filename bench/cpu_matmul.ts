// CPU matmul benchmark: float32 n×n @ n×n through nbx.matmul, with the system BLAS and with the
// fallback kernel (NBX_BLAS=off's path: packed WebAssembly SIMD on worker threads), next to numpy
// (/usr/bin/python3; Debian's numpy calls the same OpenBLAS) measured in the same run, size by size so
// both see the same machine load. Prints a markdown table of GFLOP/s (best of the repetitions) and, for
// the fallback, GFLOP per CPU-second of the process (all its threads): its speed per busy core, which
// other load on the machine does not change.
//
// Run: node dist/bench/cpu_matmul.js [--sizes 256,512,1024,2048]
import { execFileSync } from 'node:child_process';
import { availableParallelism, loadavg } from 'node:os';
import * as nbx from '../src/index.js';
import { blasInfo, setBlasEnabled } from '../src/backend/cpu/runtime/blas.js';
import { Tensor } from '../src/tensor/tensor.js';
import { kernel } from '../src/kernels/registry.js';

const argSizes = process.argv.indexOf('--sizes');
const SIZES = argSizes > 0 ? process.argv[argSizes + 1]!.split(',').map(Number) : [256, 512, 1024, 2048];

/** Repetitions for about a second of work at `gflops`, at least 3. */
const repsFor = (n: number, gflops: number): number => Math.max(3, Math.min(50, Math.round(1 / ((2 * n ** 3) / (gflops * 1e9)))));

/** Best wall-clock seconds of `reps` calls, and the CPU seconds (all threads) of that call. */
function best(fn: () => void, reps: number): { wall: number; cpu: number } {
  fn(); // warm-up (and worker start-up for the fallback)
  let wall = Infinity, cpu = Infinity;
  for (let i = 0; i < reps; i++) {
    const c0 = process.cpuUsage(), t0 = performance.now();
    fn();
    const w = performance.now() - t0, c = process.cpuUsage(c0);
    if (w < wall) { wall = w; cpu = (c.user + c.system) / 1000; }
  }
  return { wall: wall / 1000, cpu: cpu / 1000 };
}

const NUMPY = `
import numpy as np, time, json, sys
n = int(sys.argv[1]); reps = int(sys.argv[2])
rng = np.random.default_rng(0)
a = rng.standard_normal((n, n), dtype=np.float32); b = rng.standard_normal((n, n), dtype=np.float32)
a @ b
t = min((lambda t0: (a @ b, time.perf_counter() - t0)[1])(time.perf_counter()) for _ in range(reps))
print(json.dumps(t))
`;

function numpySeconds(n: number, reps: number): number | null {
  // numpy with the library's own defaults: no core-type or cache-size overrides leak in from our environment
  const env = { ...process.env };
  delete env.OPENBLAS_CORETYPE;
  delete env.OPENBLAS_L2_SIZE;
  try {
    return JSON.parse(execFileSync('/usr/bin/python3', ['-c', NUMPY, String(n), String(reps)], { env, encoding: 'utf8' })) as number;
  } catch (e) {
    process.stderr.write(`numpy unavailable: ${(e as Error).message.split('\n')[0]}\n`);
    return null;
  }
}

function main(): void {
  const gf = (n: number, s: number | null): string => (s === null ? 'n/a' : ((2 * n ** 3) / s / 1e9).toFixed(1));
  const rows: string[] = [];
  for (const n of SIZES) {
    const data = (seed: number): Float32Array => Float32Array.from({ length: n * n }, (_, i) => Math.sin(i * 12.9898 + seed) * 0.5);
    const a = nbx.tensor(data(1)).reshape([n, n]), b = nbx.tensor(data(2)).reshape([n, n]);
    const mm = (): void => { (nbx.matmul(a, b) as Tensor).dispose(); };
    // The same gemm kernel writing into one reused output: what nbx.matmul costs beyond it is the fresh
    // output tensor (its pages are first touched by the product; numpy's allocator hands back warm ones).
    const out = Tensor.empty([n, n], 'float32');
    const gemm = kernel('gemm', 'cpu');
    const into = (): void => gemm({ transA: false, transB: false, m: n, n, k: n, alpha: 1, beta: 0, a: a.ref(), lda: n, b: b.ref(), ldb: n, c: out.ref(), ldc: n, batch: 1, strideA: 0, strideB: 0, strideC: 0 });
    // Two rounds, alternating with numpy, best of each: both see the same machine load.
    let np: number | null = null, withBlas = Infinity, kernelOnly = Infinity, fallback = { wall: Infinity, cpu: Infinity };
    for (let round = 0; round < 2; round++) {
      const s = numpySeconds(n, repsFor(n, 100));
      if (s !== null) np = Math.min(np ?? Infinity, s);
      withBlas = Math.min(withBlas, best(mm, repsFor(n, 100)).wall);
      kernelOnly = Math.min(kernelOnly, best(into, repsFor(n, 100)).wall);
      const was = setBlasEnabled(false);
      try { const f = best(mm, repsFor(n, 20)); if (f.wall < fallback.wall) fallback = f; } finally { setBlasEnabled(was); }
    }
    const ratio = np === null ? 'n/a' : `${((100 * np) / withBlas).toFixed(0)}%`;
    rows.push(`| ${n}³ | ${gf(n, np)} | ${gf(n, withBlas)} | ${ratio} | ${gf(n, kernelOnly)} | ${gf(n, fallback.wall)} | ${gf(n, fallback.cpu)} |`);
    a.dispose(); b.dispose(); out.dispose();
  }
  console.log(`BLAS: ${blasInfo()}\n`);
  console.log(`${availableParallelism()} cores; load average ${loadavg().map((x) => x.toFixed(1)).join(' ')} at the end\n`);
  console.log('| float32 matmul | numpy GFLOP/s | nbx BLAS GFLOP/s | BLAS / numpy | BLAS gemm kernel, reused output | nbx fallback GFLOP/s | fallback GFLOP per CPU-second |');
  console.log('| --- | ---: | ---: | ---: | ---: | ---: | ---: |');
  for (const r of rows) console.log(r);
}

main();
