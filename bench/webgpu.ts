// WebGPU benchmarks: fused elementwise a*x+b and a row reduction (GB/s), float32 GEMM (TFLOP/s), and the
// per-operation cost of a dependent chain of small ops (µs/op, amortized by command batching; next to
// it, the same ops each followed by a readback, i.e. one submit + wait round trip per op).
// Sizes: 1 GiB operands and a 4096^3 GEMM, reduced to the device's largest storage binding; --quick
// (or a software adapter such as llvmpipe) uses small sizes for a smoke run.
// Run: node dist/bench/webgpu.js [--quick]
import * as nbx from '../src/index.js';
import { elementwise } from '../src/ops/elementwise.js';
import type { Tensor } from '../src/tensor/tensor.js';

const GiB = 2 ** 30;

async function timeGpu(fn: () => void, reps: number): Promise<number> {
  fn();
  await nbx.webgpu.synchronize();
  const t0 = performance.now();
  for (let i = 0; i < reps; i++) fn();
  await nbx.webgpu.synchronize();
  return (performance.now() - t0) / 1000 / reps;
}

/** a*x + b as one kernel (a, b are kernel parameters). */
const axpb = (x: Tensor, a: number, b: number): Tensor =>
  elementwise('axpb', [x, a, b], 'float32', 'float32', ([v, p, q]) => v!.mul(p!).add(q!));

export async function run(args: string[] = []): Promise<void> {
  const info = await nbx.webgpu.init();
  const soft = /llvmpipe|swiftshader|lavapipe|software/i.test(info.adapter);
  const quick = args.includes('--quick') || soft;
  const maxBind = Math.min(info.limits.maxStorageBufferBindingSize ?? GiB, info.limits.maxBufferSize ?? GiB);
  const bytes = Math.min(quick ? 64 * 2 ** 20 : GiB, 2 ** Math.floor(Math.log2(maxBind)));
  const n = bytes / 4;
  const rows: [string, string, string, string][] = [];
  const fmtBytes = (b: number): string => (b >= GiB ? `${b / GiB} GiB` : `${b / 2 ** 20} MiB`);

  // elementwise: read x, write the result
  const x = nbx.sin(nbx.arange(n, { dtype: 'float32', device: 'webgpu' }));
  const reps = quick ? 5 : 20;
  const tEw = await timeGpu(() => axpb(x, 1.5, 0.25).dispose(), reps);
  rows.push(['elementwise a*x+b (f32, fused)', fmtBytes(bytes), (2 * bytes / tEw / 1e9).toFixed(1), 'GB/s']);
  const tEw2 = await timeGpu(() => { const t = nbx.mul(x, 1.5); nbx.add(t, 0.25).dispose(); t.dispose(); }, reps);
  rows.push(['elementwise mul then add (f32, 2 kernels)', fmtBytes(bytes), (4 * bytes / tEw2 / 1e9).toFixed(1), 'GB/s']);

  // row reduction: sum over the last dim of a [rows, 16384] matrix
  const cols = 16384, r = n / cols;
  const X = x.view(r, cols);
  const tRed = await timeGpu(() => nbx.sum(X, -1).dispose(), reps);
  rows.push([`row reduction sum(dim=-1) [${r}, ${cols}] f32`, fmtBytes(bytes), (bytes / tRed / 1e9).toFixed(1), 'GB/s']);
  const tCol = await timeGpu(() => nbx.sum(X, 0).dispose(), reps);
  rows.push([`column reduction sum(dim=0) [${r}, ${cols}] f32`, fmtBytes(bytes), (bytes / tCol / 1e9).toFixed(1), 'GB/s']);
  const tAll = await timeGpu(() => nbx.sum(x).dispose(), reps);
  rows.push(['full reduction sum() f32', fmtBytes(bytes), (bytes / tAll / 1e9).toFixed(1), 'GB/s']);
  x.dispose();

  // GEMM
  const M = quick ? 512 : 4096;
  const A = nbx.sin(nbx.arange(M * M, { dtype: 'float32', device: 'webgpu' })).view(M, M);
  const B = nbx.cos(nbx.arange(M * M, { dtype: 'float32', device: 'webgpu' })).view(M, M);
  const tMm = await timeGpu(() => nbx.matmul(A, B).dispose(), quick ? 3 : 10);
  rows.push([`GEMM f32 ${M}x${M}x${M}`, `${M}^3`, (2 * M ** 3 / tMm / 1e12).toFixed(3), 'TFLOP/s']);
  A.dispose(); B.dispose();

  // per-op cost: a dependent chain of 1000 small ops, one readback at the end
  const small = nbx.ones([256], { device: 'webgpu' });
  const chain = async (ops: number, readEach: boolean): Promise<number> => {
    let y = nbx.mul(small, 1);
    await y.data();
    const t0 = performance.now();
    for (let i = 0; i < ops; i++) {
      const z = nbx.add(y, 1);
      y.dispose();
      y = z;
      if (readEach) await y.data();
    }
    await y.data();
    const us = (performance.now() - t0) * 1000 / ops;
    y.dispose();
    return us;
  };
  await chain(50, false);
  rows.push(['dependent chain of 1000 small adds, batched', '256 f32', (await chain(1000, false)).toFixed(1), 'µs/op']);
  rows.push(['the same with a readback after every op', '256 f32', (await chain(100, true)).toFixed(1), 'µs/op']);
  small.dispose();

  const s = nbx.webgpu.memoryStats();
  process.stdout.write(`WebGPU: ${info.adapter} (${info.via}${info.compatibility ? ', compatibility' : ''}); profile ${info.profile}\n`);
  process.stdout.write(`workgroups: elementwise ${info.wgElementwise}, reduction ${info.wgReduce}; largest binding ${fmtBytes(maxBind)}${quick ? '; quick sizes' : ''}\n\n`);
  const lines = ['| benchmark | size | result | unit |', '| --- | --- | ---: | --- |', ...rows.map((r) => `| ${r.join(' | ')} |`)];
  process.stdout.write(`${lines.join('\n')}\n\n`);
  process.stdout.write(`${s.dispatches} dispatches in ${s.submits} submits; ${s.pipelines} pipelines; pool: ${s.created} buffers created, ${s.reuses}/${s.allocations} allocations reused\n`);
}

if (process.argv[1]?.endsWith('webgpu.js')) run(process.argv.slice(2)).catch((e) => { console.error(e); process.exitCode = 1; });
