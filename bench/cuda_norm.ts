// Softmax, layer_norm and rms_norm over (8192, 8192) on the CUDA backend against PyTorch in the same
// run (issue #7: at least PyTorch in bfloat16). Bandwidth = bytes read + written once.
// Run: node dist/bench/cuda_norm.js
import { execFileSync } from 'node:child_process';
import * as nbx from '../src/index.js';
import { timeCuda as timeGpu } from './gpu_timing.js';

const R = 8192, C = 8192;
const F = nbx.nn.functional as unknown as Record<string, (...a: unknown[]) => nbx.Tensor>;

const PEER = String.raw`
import torch, json, time
import torch.nn.functional as F
R, C = 8192, 8192
def t(fn, reps=30):
    fn(); torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(reps): fn()
    torch.cuda.synchronize()
    return (time.perf_counter() - t0) / reps
out = {}
for dt, name in ((torch.bfloat16, 'bf16'), (torch.float32, 'f32')):
    x = torch.randn(R, C, device='cuda', dtype=dt); w = torch.randn(C, device='cuda', dtype=dt); b = torch.randn(C, device='cuda', dtype=dt)
    out['softmax ' + name] = t(lambda: F.softmax(x, -1))
    out['layer_norm ' + name] = t(lambda: F.layer_norm(x, (C,), w, b))
    out['rms_norm ' + name] = t(lambda: F.rms_norm(x, (C,), w))
print(json.dumps(out))
`;

let peer: Record<string, number> = {};
try { peer = JSON.parse(execFileSync('python3', ['-c', PEER], { encoding: 'utf8' })) as Record<string, number>; } catch (e) { process.stderr.write(`PyTorch peer failed: ${(e as Error).message.slice(0, 300)}\n`); }
const lines = ['| benchmark (8192 x 8192) | nbx GB/s | PyTorch GB/s | nbx vs PyTorch |', '| --- | ---: | ---: | ---: |'];
for (const [dt, name] of [['bfloat16', 'bf16'], ['float32', 'f32']] as const) {
  const x = nbx.randn([R, C], { device: 'cuda', dtype: dt }), w = nbx.randn([C], { device: 'cuda', dtype: dt }), b = nbx.randn([C], { device: 'cuda', dtype: dt });
  const bytes = 2 * R * C * (dt === 'bfloat16' ? 2 : 4);
  const cases: [string, () => nbx.Tensor][] = [
    ['softmax', () => F.softmax!(x, -1)],
    ['layer_norm', () => F.layer_norm!(x, [C], w, b)],
    ['rms_norm', () => F.rms_norm!(x, [C], w)],
  ];
  for (const [op, fn] of cases) {
    const s = await timeGpu(() => fn().dispose(), 30);
    const p = peer[`${op} ${name}`];
    lines.push(`| ${op} ${name} | ${(bytes / s / 1e9).toFixed(0)} | ${p ? (bytes / p / 1e9).toFixed(0) : '-'} | ${p ? `${((p / s) * 100).toFixed(1)}%` : '-'} |`);
  }
  x.dispose(); w.dispose(); b.dispose();
}
process.stdout.write(`${lines.join('\n')}\n`);
