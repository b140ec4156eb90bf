// CPU convolution benchmark: conv2d, batch 8, 64 → 64 channels, 56×56, 3×3, padding 1, float32 (a
// ResNet stage-1 layer), ours next to PyTorch CPU (/usr/bin/python3, whatever torch it has) measured in
// the same run. Prints a markdown table. Run: `node dist/bench/cpu_conv.js [--reps N]`.
//
// Both sides time the median of N calls after warm-up, on the same inputs' shapes; PyTorch uses its
// default thread count, which the table reports next to OpenBLAS's.

import { spawnSync } from 'node:child_process';
import * as nbx from '../src/index.js';
import { blasInfo } from '../src/backend/cpu/blas.js';

interface Cfg { name: string; n: number; cin: number; cout: number; hw: number; k: number; stride: number; pad: number; groups: number }

const CONFIGS: Cfg[] = [
  { name: 'conv2d 8×64→64 56² 3×3 p1', n: 8, cin: 64, cout: 64, hw: 56, k: 3, stride: 1, pad: 1, groups: 1 },
  { name: 'conv2d 8×64→128 56² 3×3 s2 p1', n: 8, cin: 64, cout: 128, hw: 56, k: 3, stride: 2, pad: 1, groups: 1 },
  { name: 'conv2d 8×64→256 56² 1×1', n: 8, cin: 64, cout: 256, hw: 56, k: 1, stride: 1, pad: 0, groups: 1 },
  { name: 'depthwise 8×64 56² 3×3 p1', n: 8, cin: 64, cout: 64, hw: 56, k: 3, stride: 1, pad: 1, groups: 64 },
];

const flops = (c: Cfg): number => {
  const o = Math.floor((c.hw + 2 * c.pad - c.k) / c.stride) + 1;
  return 2 * c.n * c.cout * o * o * (c.cin / c.groups) * c.k * c.k;
};

function median(xs: number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.floor(s.length / 2)]!;
}

function ours(c: Cfg, reps: number): number {
  const input = nbx.tensor(Float32Array.from({ length: c.n * c.cin * c.hw * c.hw }, (_, i) => Math.sin(i))).reshape([c.n, c.cin, c.hw, c.hw]);
  const w = nbx.tensor(Float32Array.from({ length: c.cout * (c.cin / c.groups) * c.k * c.k }, (_, i) => Math.cos(i) * 0.1)).reshape([c.cout, c.cin / c.groups, c.k, c.k]);
  const run = (): void => { nbx.conv2d(input, w, null, { stride: c.stride, padding: c.pad, groups: c.groups }).dispose(); };
  for (let i = 0; i < 2; i++) run();
  const times: number[] = [];
  for (let i = 0; i < reps; i++) {
    const t0 = performance.now();
    run();
    times.push(performance.now() - t0);
  }
  input.dispose(); w.dispose();
  return median(times);
}

function torch(cfgs: Cfg[], reps: number): { ms: number[]; version: string; threads: number } | string {
  const py = `
import json, sys, time, torch, torch.nn.functional as F
cfgs, reps = json.loads(sys.argv[1]), int(sys.argv[2])
out = []
with torch.no_grad():
    for c in cfgs:
        x = torch.randn(c["n"], c["cin"], c["hw"], c["hw"])
        w = torch.randn(c["cout"], c["cin"] // c["groups"], c["k"], c["k"])
        f = lambda: F.conv2d(x, w, None, c["stride"], c["pad"], 1, c["groups"])
        for _ in range(2): f()
        ts = []
        for _ in range(reps):
            t0 = time.perf_counter(); f(); ts.append((time.perf_counter() - t0) * 1000)
        out.append(sorted(ts)[len(ts) // 2])
print(json.dumps({"ms": out, "version": torch.__version__, "threads": torch.get_num_threads()}))
`;
  const r = spawnSync('/usr/bin/python3', ['-c', py, JSON.stringify(cfgs), String(reps)], { encoding: 'utf8' });
  if (r.status !== 0) return `PyTorch not measured: ${(r.stderr || r.error?.message || '').trim().split('\n').pop()}`;
  return JSON.parse(r.stdout.trim().split('\n').pop()!) as { ms: number[]; version: string; threads: number };
}

export async function run(args: string[] = process.argv.slice(2)): Promise<void> {
  const i = args.indexOf('--reps');
  const reps = i >= 0 ? Number(args[i + 1]) : 10;
  const mine = CONFIGS.map((c) => ours(c, reps));
  const ref = torch(CONFIGS, reps);
  const info = blasInfo();
  const lines = [
    `nbxtensor CPU (BLAS: ${info}); PyTorch ${typeof ref === 'string' ? '-' : `${ref.version}, ${ref.threads} thread(s)`}; median of ${reps}`,
    '',
    '| problem | GFLOP | nbx ms | nbx GFLOP/s | torch ms | torch GFLOP/s | nbx / torch time |',
    '| --- | ---: | ---: | ---: | ---: | ---: | ---: |',
  ];
  CONFIGS.forEach((c, k) => {
    const g = flops(c) / 1e9;
    const t = typeof ref === 'string' ? null : ref.ms[k]!;
    lines.push(`| ${c.name} | ${g.toFixed(3)} | ${mine[k]!.toFixed(2)} | ${(g / (mine[k]! / 1e3)).toFixed(1)} | ${t === null ? '-' : t.toFixed(2)} | ${t === null ? '-' : (g / (t / 1e3)).toFixed(1)} | ${t === null ? '-' : (mine[k]! / t).toFixed(2)}× |`);
  });
  if (typeof ref === 'string') lines.push('', ref);
  process.stdout.write(lines.join('\n') + '\n');
}

if (process.argv[1] && import.meta.url === new URL(`file://${process.argv[1]}`).href) await run();
