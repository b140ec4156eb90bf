// CUDA benchmarks against PyTorch measured in the same run (the GPU machine's python3 has torch 2.11).
// Prints a markdown table: our figure, PyTorch's, and the ratio. Run: node dist/bench/cuda.js [--quick]
import { execFileSync } from 'node:child_process';
import * as nbx from '../src/index.js';

const quick = process.argv.includes('--quick');
const GiB = 1 << 30;

type Row = { name: string; unit: string; ours: number; torch: number; higherIsBetter: boolean };

async function timeGpu(fn: () => void, reps: number): Promise<number> {
  fn(); await nbx.cuda.synchronize();
  const t0 = performance.now();
  for (let i = 0; i < reps; i++) fn();
  await nbx.cuda.synchronize();
  return (performance.now() - t0) / 1000 / reps;
}

const PEER = String.raw`
import torch, time, json, sys
q = '--quick' in sys.argv
dev = 'cuda'
out = {}
def t(fn, reps):
    fn(); torch.cuda.synchronize()
    s = torch.cuda.Event(enable_timing=True); e = torch.cuda.Event(enable_timing=True)
    s.record()
    for _ in range(reps): fn()
    e.record(); torch.cuda.synchronize()
    return s.elapsed_time(e) / 1000 / reps
G = 1 << 30
for dt, name in ((torch.float32, 'f32'), (torch.bfloat16, 'bf16')):
    n = G // (2 * dt.itemsize) // (16 if q else 1)
    a = torch.randn(n, device=dev, dtype=dt); b = torch.randn(n, device=dev, dtype=dt); o = torch.empty_like(a)
    out['add contiguous ' + name] = 3 * n * dt.itemsize / t(lambda: torch.add(a, b, out=o), 20)
    r = 16384; c = n // r
    A = a.view(r, c); row = torch.randn(c, device=dev, dtype=dt)
    out['add broadcast row ' + name] = 2 * n * dt.itemsize / t(lambda: torch.add(A, row), 20)
    B = b.view(c, r)
    out['add transposed ' + name] = 3 * n * dt.itemsize / t(lambda: torch.add(A, B.t()), 20)
    out['sum rows ' + name] = n * dt.itemsize / t(lambda: A.sum(-1), 20)
    out['sum all ' + name] = n * dt.itemsize / t(lambda: a.sum(), 20)
M = 4096 if q else 8192
x = torch.randn(M, M, device=dev, dtype=torch.bfloat16); y = torch.randn(M, M, device=dev, dtype=torch.bfloat16)
out['gemm bf16 %d^3' % M] = 2 * M**3 / t(lambda: x @ y, 10) / 1e12
for m in (1, 4, 16):
    xa = torch.randn(m, 4096, device=dev, dtype=torch.bfloat16); w = torch.randn(4096, 4096, device=dev, dtype=torch.bfloat16)
    out['gemm bf16 m=%d n=k=4096 (us)' % m] = t(lambda: xa @ w, 50) * 1e6
s = torch.randn(32, device=dev)
def loop():
    for _ in range(1000): torch.add(s, s)
t0 = time.perf_counter(); loop(); torch.cuda.synchronize(); t0 = time.perf_counter(); loop(); torch.cuda.synchronize()
out['host cost per small add (us)'] = (time.perf_counter() - t0) / 1000 * 1e6
print(json.dumps(out))
`;

export async function run(args: string[] = []): Promise<void> {
  const rows: Row[] = [];
  let peer: Record<string, number> = {};
  try { peer = JSON.parse(execFileSync('python3', ['-c', PEER, ...(quick ? ['--quick'] : [])], { encoding: 'utf8' })) as Record<string, number>; } catch (e) { process.stderr.write(`PyTorch peer failed: ${(e as Error).message.slice(0, 300)}\n`); }
  const gb = (name: string, bytes: number, s: number): void => { rows.push({ name, unit: 'GB/s', ours: bytes / s / 1e9, torch: (peer[name] ?? NaN) / 1e9, higherIsBetter: true }); };
  for (const [dt, name] of [['float32', 'f32'], ['bfloat16', 'bf16']] as const) {
    const isz = dt === 'float32' ? 4 : 2;
    const n = GiB / (2 * isz) / (quick ? 16 : 1);
    const a = nbx.sin(nbx.arange(n, { dtype: dt, device: "cuda" }));
    const b = nbx.add(a, 1);
    gb(`add contiguous ${name}`, 3 * n * isz, await timeGpu(() => nbx.add(a, b).dispose(), 20));
    const r = 16384, c = n / r;
    const A = a.view(r, c), row = nbx.ones([c], { device: 'cuda', dtype: dt });
    gb(`add broadcast row ${name}`, 2 * n * isz, await timeGpu(() => nbx.add(A, row).dispose(), 20));
    const B = b.view(c, r);
    gb(`add transposed ${name}`, 3 * n * isz, await timeGpu(() => nbx.add(A, B.t()).dispose(), 20));
    gb(`sum rows ${name}`, n * isz, await timeGpu(() => nbx.sum(A, -1).dispose(), 20));
    gb(`sum all ${name}`, n * isz, await timeGpu(() => nbx.sum(a).dispose(), 20));
    a.dispose(); b.dispose(); row.dispose();
  }
  const M = quick ? 4096 : 8192;
  const matmul = (nbx as any).matmul as ((a: nbx.Tensor, b: nbx.Tensor) => nbx.Tensor) | undefined;
  if (matmul) {
    const x = nbx.ones([M, M], { device: 'cuda', dtype: 'bfloat16' }), y = nbx.ones([M, M], { device: 'cuda', dtype: 'bfloat16' });
    const s = await timeGpu(() => matmul(x, y).dispose(), 10);
    rows.push({ name: `gemm bf16 ${M}^3`, unit: 'TFLOP/s', ours: 2 * M ** 3 / s / 1e12, torch: peer[`gemm bf16 ${M}^3`] ?? NaN, higherIsBetter: true });
    for (const m of [1, 4, 16]) {
      const xa = nbx.ones([m, 4096], { device: 'cuda', dtype: 'bfloat16' }), w = nbx.ones([4096, 4096], { device: 'cuda', dtype: 'bfloat16' });
      const t = await timeGpu(() => matmul(xa, w).dispose(), 50);
      rows.push({ name: `gemm bf16 m=${m} n=k=4096 (us)`, unit: 'µs', ours: t * 1e6, torch: peer[`gemm bf16 m=${m} n=k=4096 (us)`] ?? NaN, higherIsBetter: false });
    }
  }
  const s = nbx.ones([32], { device: 'cuda' });
  const loop = (): void => { for (let i = 0; i < 1000; i++) nbx.add(s, s).dispose(); };
  loop(); await nbx.cuda.synchronize();
  const t0 = performance.now(); loop(); await nbx.cuda.synchronize();
  rows.push({ name: 'host cost per small add (us)', unit: 'µs', ours: (performance.now() - t0) / 1000 * 1000, torch: peer['host cost per small add (us)'] ?? NaN, higherIsBetter: false });
  const lines = ['| benchmark | unit | nbx | PyTorch | nbx vs PyTorch |', '| --- | --- | ---: | ---: | ---: |'];
  for (const r of rows) {
    const ratio = r.higherIsBetter ? r.ours / r.torch : r.torch / r.ours;
    lines.push(`| ${r.name} | ${r.unit} | ${r.ours.toFixed(2)} | ${Number.isNaN(r.torch) ? '-' : r.torch.toFixed(2)} | ${Number.isNaN(ratio) ? '-' : `${(ratio * 100).toFixed(1)}%`} |`);
  }
  process.stdout.write(`${lines.join('\n')}\n`);
  void args;
}

if (process.argv[1]?.endsWith('cuda.js')) run(process.argv.slice(2)).catch((e) => { console.error(e); process.exitCode = 1; });
