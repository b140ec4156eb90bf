// Softmax, layer_norm and rms_norm on the CUDA backend against PyTorch in the same run (issue #7: at
// least PyTorch in bfloat16): (8192, 8192) in bfloat16 and float32, and short rows (65536, 1024) in
// bfloat16 (several rows per block). Bandwidth = bytes read + written once; wall clock over 30
// back-to-back calls after a warm-up call (which compiles and, on a cache miss, tunes).
// Run: node dist/bench/cuda_norm.js
import { execFileSync } from 'node:child_process';
import * as nbx from '../src/index.js';
import { timeCuda as timeGpu } from './gpu_timing.js';

const F = nbx.nn.functional as unknown as Record<string, (...a: unknown[]) => nbx.Tensor>;
const CASES: [number, number, 'bfloat16' | 'float32'][] = [[8192, 8192, 'bfloat16'], [8192, 8192, 'float32'], [65536, 1024, 'bfloat16']];
const short = (dt: string): string => (dt === 'bfloat16' ? 'bf16' : 'f32');

const PEER = String.raw`
import torch, json, time, sys
import torch.nn.functional as F
def t(fn, reps=30):
    fn(); torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(reps): fn()
    torch.cuda.synchronize()
    return (time.perf_counter() - t0) / reps
out = {}
for R, C, name in json.loads(sys.argv[1]):
    dt = torch.bfloat16 if name == 'bf16' else torch.float32
    x = torch.randn(R, C, device='cuda', dtype=dt); w = torch.randn(C, device='cuda', dtype=dt); b = torch.randn(C, device='cuda', dtype=dt)
    tag = f'{R}x{C} {name}'
    out['softmax ' + tag] = t(lambda: F.softmax(x, -1))
    out['layer_norm ' + tag] = t(lambda: F.layer_norm(x, (C,), w, b))
    out['rms_norm ' + tag] = t(lambda: F.rms_norm(x, (C,), w))
print(json.dumps(out))
`;

let peer: Record<string, number> = {};
try {
  peer = JSON.parse(execFileSync('python3', ['-c', PEER, JSON.stringify(CASES.map(([r, c, d]) => [r, c, short(d)]))], { encoding: 'utf8' })) as Record<string, number>;
} catch (e) { process.stderr.write(`PyTorch peer failed: ${(e as Error).message.slice(0, 300)}\n`); }
const lines = ['| benchmark | nbx GB/s | PyTorch GB/s | nbx vs PyTorch | first call ms |', '| --- | ---: | ---: | ---: | ---: |'];
for (const [R, C, dt] of CASES) {
  const x = nbx.randn([R, C], { device: 'cuda', dtype: dt }), w = nbx.randn([C], { device: 'cuda', dtype: dt }), b = nbx.randn([C], { device: 'cuda', dtype: dt });
  const bytes = 2 * R * C * (dt === 'bfloat16' ? 2 : 4);
  const cases: [string, () => nbx.Tensor][] = [
    ['softmax', () => F.softmax!(x, -1)],
    ['layer_norm', () => F.layer_norm!(x, [C], w, b)],
    ['rms_norm', () => F.rms_norm!(x, [C], w)],
  ];
  for (const [op, fn] of cases) {
    const t0 = performance.now();
    fn().dispose(); await nbx.cuda.synchronize(); // compile + tune (a cache miss sweeps the thread counts)
    const first = performance.now() - t0;
    const s = await timeGpu(() => fn().dispose(), 30);
    const tag = `${op} ${R}x${C} ${short(dt)}`, p = peer[tag];
    lines.push(`| ${tag} | ${(bytes / s / 1e9).toFixed(0)} | ${p ? (bytes / p / 1e9).toFixed(0) : '-'} | ${p ? `${((p / s) * 100).toFixed(1)}%` : '-'} | ${first.toFixed(0)} |`);
    process.stdout.write(`${lines[lines.length - 1]}\n`);
  }
  x.dispose(); w.dispose(); b.dispose();
}
process.stdout.write(`\n${lines.join('\n')}\n`);
