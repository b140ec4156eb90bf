// CUDA benchmarks against PyTorch measured in the same run (the GPU machine's python3 has torch 2.11).
// Prints a markdown table: our figure, PyTorch's, and the ratio. Run: node dist/bench/cuda.js [--quick] [--only gemm|host]
// GEMM rows: both sides are timed the same way, wall clock over back-to-back calls then one synchronize
// (so host cost per call counts on both sides), on random data (all-ones inputs draw less power and
// clock higher); the 8192³ figure is the best of three trials of 20 calls.
// --only gemm --peer FILE: PyTorch's GEMM figures from FILE when it exists, else measured and written
// there (three bench processes share one peer run); --peer-only stops after that.
import { execFileSync } from 'node:child_process';
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import * as nbx from '../src/index.js';
import { TORCH_EVENT_TIMER, timeEvents } from './gpu_timing.js';
import { CublasLt } from '../src/backend/cuda/runtime/cublaslt.js';

const quick = process.argv.includes('--quick');
const onlyAt = process.argv.indexOf('--only');
const only = onlyAt >= 0 ? process.argv[onlyAt + 1] ?? '' : ''; // --only ew: the elementwise and reduction rows alone
const GiB = 1 << 30;

type Row = { name: string; unit: string; ours: number; torch: number; higherIsBetter: boolean };

/**
 * The elementwise and reduction rows: CUDA events around back-to-back calls, best of three samples, on
 * both sides (the peer's `t`). The allocation of our output is inside the loop (PyTorch's add writes
 * into `out=`).
 */
const timeGpu = timeEvents;

const PEER = String.raw`
import torch, time, json, sys
q = '--quick' in sys.argv
gemm_only = '--only-gemm' in sys.argv
dev = 'cuda'
out = {}
def wall(fn, reps):
    fn(); torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(reps): fn()
    torch.cuda.synchronize()
    return (time.perf_counter() - t0) / reps
M = 4096 if q else 8192
torch.manual_seed(0)
x = torch.randn(M, M, device=dev, dtype=torch.bfloat16); y = torch.randn(M, M, device=dev, dtype=torch.bfloat16)
for _ in range(3): x @ y
out['gemm bf16 %d^3' % M] = 2 * M**3 / min(wall(lambda: x @ y, 20) for _ in range(3)) / 1e12
del x, y
w = torch.randn(4096, 4096, device=dev, dtype=torch.bfloat16)
for m in (1, 4, 16):
    xa = torch.randn(m, 4096, device=dev, dtype=torch.bfloat16)
    out['gemm bf16 m=%d n=k=4096 (us)' % m] = min(wall(lambda: xa @ w, 200) for _ in range(3)) * 1e6
    out['linear bf16 m=%d 4096->4096 (us)' % m] = min(wall(lambda: torch.nn.functional.linear(xa, w), 200) for _ in range(3)) * 1e6
xf = torch.randn(1, 4096, device=dev); wf = torch.randn(4096, 4096, device=dev)
out['gemm f32 m=1 n=k=4096 (us)'] = min(wall(lambda: xf @ wf, 200) for _ in range(3)) * 1e6
if gemm_only:
    print(json.dumps(out)); sys.exit(0)
${TORCH_EVENT_TIMER}
G = 1 << 30
for dt, name in ((torch.float32, 'f32'), (torch.bfloat16, 'bf16')):
    n = G // (2 * dt.itemsize) // (16 if q else 1)
    a = torch.randn(n, device=dev, dtype=dt); b = torch.randn(n, device=dev, dtype=dt); o = torch.empty_like(a)
    out['add contiguous ' + name] = 3 * n * dt.itemsize / t(lambda: torch.add(a, b, out=o), 20)
    r = 16384; c = n // r
    A = a.view(r, c); row = torch.randn(c, device=dev, dtype=dt)
    out['add broadcast row ' + name] = 2 * n * dt.itemsize / t(lambda: torch.add(A, row), 20)
    col = torch.randn(r, 1, device=dev, dtype=dt)
    out['add broadcast col ' + name] = 2 * n * dt.itemsize / t(lambda: torch.add(A, col), 20)
    s0 = torch.tensor(1.5, device=dev, dtype=dt)
    out['mul 0-d tensor ' + name] = 2 * n * dt.itemsize / t(lambda: torch.mul(a, s0), 20)
    B = b.view(c, r)
    out['add transposed ' + name] = 3 * n * dt.itemsize / t(lambda: torch.add(A, B.t()), 20)
    out['sum rows ' + name] = n * dt.itemsize / t(lambda: A.sum(-1), 20)
    out['sum cols ' + name] = n * dt.itemsize / t(lambda: A.sum(0), 20)
    out['sum all ' + name] = n * dt.itemsize / t(lambda: a.sum(), 20)
print(json.dumps(out))
`;

// The host cost of a small op in a loop (issue #7): median of 7 rounds of 1000 adds of two 32-element
// tensors (output allocation included), each round ending with a synchronize. The same on both sides.
const PEER_HOST = String.raw`
import torch, time, json
s = torch.randn(32, device='cuda')
N = 2000
def loop():
    for _ in range(N): torch.add(s, s)
for _ in range(3): loop(); torch.cuda.synchronize()
ts = []
for _ in range(7):
    t0 = time.perf_counter(); loop(); torch.cuda.synchronize(); ts.append((time.perf_counter() - t0) / N * 1e6)
print(json.dumps({'host cost per small add (us)': sorted(ts)[3]}))
`;

function pyPeer(src: string): Record<string, number> {
  try { return JSON.parse(execFileSync('python3', ['-c', src, ...(quick ? ['--quick'] : []), ...(only === 'gemm' ? ['--only-gemm'] : [])], { encoding: 'utf8' })) as Record<string, number>; } catch (e) { process.stderr.write(`PyTorch peer failed: ${(e as Error).message.slice(0, 300)}\n`); return {}; }
}

/** The GEMM peer's figures: read from --peer FILE when it exists, else measured (and written there). */
function gemmPeer(): Record<string, number> {
  const at = process.argv.indexOf('--peer'), file = at >= 0 ? process.argv[at + 1] : undefined;
  if (file && existsSync(file)) return JSON.parse(readFileSync(file, 'utf8')) as Record<string, number>;
  const p = pyPeer(PEER);
  if (file && Object.keys(p).length > 0) writeFileSync(file, JSON.stringify(p));
  return p;
}

async function hostCostRow(peer: Record<string, number>): Promise<Row> {
  const s = nbx.ones([32], { device: 'cuda' });
  const N = 2000;
  const loop = (): void => { for (let i = 0; i < N; i++) nbx.add(s, s).dispose(); };
  // warm-up: the batch module is built within the first ~40 ops, the JIT needs a few thousand
  for (let w = 0; w < 3; w++) { loop(); await nbx.cuda.synchronize(); }
  const ts: number[] = [];
  for (let r = 0; r < 7; r++) {
    const t0 = performance.now(); loop(); await nbx.cuda.synchronize();
    ts.push((performance.now() - t0) / N * 1000);
  }
  s.dispose();
  const bs = nbx.cuda.batchStats();
  process.stderr.write(`host cost rounds (us/op): ${ts.map((t) => t.toFixed(2)).join(' ')}; launch batching: ${bs ? JSON.stringify(bs) : 'off (NBX_CUDA_BATCH=0)'}\n`);
  return { name: 'host cost per small add (us)', unit: 'µs', ours: ts.sort((a, b) => a - b)[3]!, torch: peer['host cost per small add (us)'] ?? NaN, higherIsBetter: false };
}

export async function run(args: string[] = []): Promise<void> {
  const rows: Row[] = [];
  const peer: Record<string, number> = { ...(only === 'host' ? {} : only === 'gemm' ? gemmPeer() : pyPeer(PEER)), ...(only === 'gemm' ? {} : pyPeer(PEER_HOST)) };
  if (process.argv.includes('--peer-only')) { process.stdout.write(`${JSON.stringify(peer)}\n`); return; }
  if (only === 'host') { rows.push(await hostCostRow(peer)); print(rows); return; }
  const gb = (name: string, bytes: number, s: number): void => { rows.push({ name, unit: 'GB/s', ours: bytes / s / 1e9, torch: (peer[name] ?? NaN) / 1e9, higherIsBetter: true }); };
  if (only !== 'gemm') {
    for (const [dt, name] of [['float32', 'f32'], ['bfloat16', 'bf16']] as const) {
      const isz = dt === 'float32' ? 4 : 2;
      const n = GiB / (2 * isz) / (quick ? 16 : 1);
      const a = nbx.sin(nbx.arange(n, { dtype: dt, device: "cuda" }));
      const b = nbx.add(a, 1);
      gb(`add contiguous ${name}`, 3 * n * isz, await timeGpu(() => nbx.add(a, b).dispose(), 20));
      // diagnostic: the same calls by wall clock (host cost and the final synchronize included)
      rows.push({ name: `add contiguous ${name}, wall clock`, unit: 'GB/s', ours: 3 * n * isz / (await best(() => nbx.add(a, b).dispose(), 20)) / 1e9, torch: NaN, higherIsBetter: true });
      const r = 16384, c = n / r;
      const A = a.view(r, c), row = nbx.ones([c], { device: 'cuda', dtype: dt });
      gb(`add broadcast row ${name}`, 2 * n * isz, await timeGpu(() => nbx.add(A, row).dispose(), 20));
      const col = nbx.ones([r, 1], { device: 'cuda', dtype: dt }), s0 = nbx.full([], 1.5, { device: 'cuda', dtype: dt });
      gb(`add broadcast col ${name}`, 2 * n * isz, await timeGpu(() => nbx.add(A, col).dispose(), 20));
      gb(`mul 0-d tensor ${name}`, 2 * n * isz, await timeGpu(() => nbx.mul(a, s0).dispose(), 20));
      const B = b.view(c, r);
      gb(`add transposed ${name}`, 3 * n * isz, await timeGpu(() => nbx.add(A, B.t()).dispose(), 20));
      gb(`sum rows ${name}`, n * isz, await timeGpu(() => nbx.sum(A, -1).dispose(), 20));
      gb(`sum cols ${name}`, n * isz, await timeGpu(() => nbx.sum(A, 0).dispose(), 20));
      gb(`sum all ${name}`, n * isz, await timeGpu(() => nbx.sum(a).dispose(), 20));
      a.dispose(); b.dispose(); row.dispose(); col.dispose(); s0.dispose();
    }
  }
  if (only === 'ew') { print(rows); return; }
  await gemmRows(rows, peer);
  if (only === 'gemm') { print(rows); return; }
  rows.push(await hostCostRow(peer));
  print(rows);
  void args;
}

function print(rows: Row[]): void {
  const lines = ['| benchmark | unit | nbx | PyTorch | nbx vs PyTorch |', '| --- | --- | ---: | ---: | ---: |'];
  for (const r of rows) {
    const ratio = r.higherIsBetter ? r.ours / r.torch : r.torch / r.ours;
    lines.push(`| ${r.name} | ${r.unit} | ${r.ours.toFixed(2)} | ${Number.isNaN(r.torch) ? '-' : r.torch.toFixed(2)} | ${Number.isNaN(ratio) ? '-' : `${(ratio * 100).toFixed(1)}%`} |`);
  }
  process.stdout.write(`${lines.join('\n')}\n`);
}

/** Wall clock over back-to-back calls, then one synchronize: the same method as the peer's wall(). */
async function wall(fn: () => void, reps: number): Promise<number> {
  fn(); await nbx.cuda.synchronize();
  const t0 = performance.now();
  for (let i = 0; i < reps; i++) fn();
  await nbx.cuda.synchronize();
  return (performance.now() - t0) / 1000 / reps;
}
async function best(fn: () => void, reps: number, trials = 3): Promise<number> {
  let b = Infinity;
  for (let t = 0; t < trials; t++) b = Math.min(b, await wall(fn, reps));
  return b;
}

/** Random normal values generated on the card (falls back to host generation). */
function randn(shape: number[], dtype: 'bfloat16' | 'float32'): nbx.Tensor {
  try { return nbx.randn(shape, { dtype, device: 'cuda' }); } catch { return nbx.randn(shape, { dtype }).cuda(); }
}

async function gemmRows(rows: Row[], peer: Record<string, number>): Promise<void> {
  const M = quick ? 4096 : 8192;
  const { matmul } = nbx, linear = nbx.nn.functional.linear;
  const x = randn([M, M], 'bfloat16'), y = randn([M, M], 'bfloat16');
  for (let i = 0; i < 3; i++) matmul(x, y).dispose(); // the first call may sweep cuBLASLt's algorithms
  const s = await best(() => matmul(x, y).dispose(), 20);
  rows.push({ name: `gemm bf16 ${M}^3`, unit: 'TFLOP/s', ours: 2 * M ** 3 / s / 1e12, torch: peer[`gemm bf16 ${M}^3`] ?? NaN, higherIsBetter: true });
  // diagnostics: one call at a time (as the tuner times it) vs back to back; the plan that ran
  let one = Infinity;
  for (let i = 0; i < 5; i++) one = Math.min(one, await wall(() => matmul(x, y).dispose(), 1));
  rows.push({ name: `gemm bf16 ${M}^3 one call, synchronized`, unit: 'TFLOP/s', ours: 2 * M ** 3 / one / 1e12, torch: NaN, higherIsBetter: true });
  for (const p of CublasLt.current()?.planChoices() ?? []) {
    if (p.key.startsWith(`bfloat16|00|${M}|${M}|${M}|`)) process.stdout.write(`# plan ${M}^3: ${p.source} of ${p.candidates}, id ${String(p.config.id)} tile ${String(p.config.tile)} stages ${String(p.config.stages)} splitK ${String(p.config.splitK)} swizzle ${String(p.config.swizzle)} custom ${String(p.config.custom)}\n`);
  }
  x.dispose(); y.dispose();
  const w = randn([4096, 4096], 'bfloat16');
  for (const m of [1, 4, 16]) {
    const xa = randn([m, 4096], 'bfloat16');
    // the first calls sweep; then enough calls for V8 to optimise the host path (a model's steady state:
    // with 50, the first shape measured still ran partly unoptimised host code, +4-9 µs per call)
    for (let i = 0; i < 1000; i++) { matmul(xa, w).dispose(); linear(xa, w).dispose(); }
    await nbx.cuda.synchronize();
    let name = `gemm bf16 m=${m} n=k=4096 (us)`;
    rows.push({ name, unit: 'µs', ours: (await best(() => matmul(xa, w).dispose(), 200)) * 1e6, torch: peer[name] ?? NaN, higherIsBetter: false });
    name = `linear bf16 m=${m} 4096->4096 (us)`;
    rows.push({ name, unit: 'µs', ours: (await best(() => linear(xa, w).dispose(), 200)) * 1e6, torch: peer[name] ?? NaN, higherIsBetter: false });
    xa.dispose();
  }
  w.dispose();
  const xf = randn([1, 4096], 'float32'), wf = randn([4096, 4096], 'float32');
  for (let i = 0; i < 1000; i++) matmul(xf, wf).dispose();
  await nbx.cuda.synchronize();
  const name = 'gemm f32 m=1 n=k=4096 (us)';
  rows.push({ name, unit: 'µs', ours: (await best(() => matmul(xf, wf).dispose(), 200)) * 1e6, torch: peer[name] ?? NaN, higherIsBetter: false });
  xf.dispose(); wf.dispose();
}

if (process.argv[1]?.endsWith('cuda.js')) run(process.argv.slice(2)).catch((e) => { console.error(e); process.exitCode = 1; });
