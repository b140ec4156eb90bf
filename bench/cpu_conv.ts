// CPU convolution benchmark: conv2d, batch 8, 64 → 64 channels, 56×56, 3×3, padding 1, float32 (a
// ResNet stage-1 layer) and three neighbours, ours next to PyTorch CPU (/usr/bin/python3, whatever torch
// it has) measured in the same run. Prints a markdown table. Run: `node dist/bench/cpu_conv.js
// [--reps N] [--threads N]`.
//
// PyTorch runs in a helper process that times one call per request, and the two sides alternate call
// by call, so both see the same machine load. Each side reports the best and the median wall time of N
// calls after warm-up (GFLOP/s from the best wall time), and the best CPU time (all threads of the
// process), which other processes on a shared machine disturb much less than wall time. `--threads N`
// runs both on N threads (OPENBLAS_NUM_THREADS, read when the BLAS is first loaded, and
// torch.set_num_threads); the default is 1 for both, a like-for-like comparison.

import { spawn, type ChildProcessWithoutNullStreams } from 'node:child_process';
import { createInterface } from 'node:readline';
import * as nbx from '../src/index.js';
import { blasInfo } from '../src/backend/cpu/runtime/blas.js';

const argv = process.argv.slice(2);
const opt = (name: string, def: number): number => (argv.includes(name) ? Number(argv[argv.indexOf(name) + 1]) : def);
const THREADS = opt('--threads', 1);
process.env.OPENBLAS_NUM_THREADS ??= String(THREADS); // before the first GEMM loads OpenBLAS

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

interface Timing { min: number; median: number; cpu: number }
function summary(xs: Sample[]): Timing {
  const s = xs.map((x) => x.wall).sort((a, b) => a - b);
  return { min: s[0]!, median: s[Math.floor(s.length / 2)]!, cpu: Math.min(...xs.map((x) => x.cpu)) };
}

interface Sample { wall: number; cpu: number }

/** Our conv as a timed closure over fixed inputs. */
function ours(c: Cfg): { once(): Sample; dispose(): void } {
  const input = nbx.tensor(Float32Array.from({ length: c.n * c.cin * c.hw * c.hw }, (_, i) => Math.sin(i))).reshape([c.n, c.cin, c.hw, c.hw]);
  const w = nbx.tensor(Float32Array.from({ length: c.cout * (c.cin / c.groups) * c.k * c.k }, (_, i) => Math.cos(i) * 0.1)).reshape([c.cout, c.cin / c.groups, c.k, c.k]);
  return {
    once(): Sample {
      const c0 = process.cpuUsage(), t0 = performance.now();
      nbx.conv2d(input, w, null, { stride: c.stride, padding: c.pad, groups: c.groups }).dispose();
      const wall = performance.now() - t0, u = process.cpuUsage(c0);
      return { wall, cpu: (u.user + u.system) / 1000 };
    },
    dispose(): void { input.dispose(); w.dispose(); },
  };
}

const TORCH_WORKER = `
import json, sys, time, torch, torch.nn.functional as F
cfgs = json.loads(sys.argv[1])
torch.set_num_threads(int(sys.argv[2]))
torch.set_grad_enabled(False)
data = [(torch.randn(c["n"], c["cin"], c["hw"], c["hw"]), torch.randn(c["cout"], c["cin"] // c["groups"], c["k"], c["k"])) for c in cfgs]
print(json.dumps({"version": torch.__version__, "threads": torch.get_num_threads()}), flush=True)
for line in sys.stdin:
    k = int(line)
    c, (x, w) = cfgs[k], data[k]
    c0, t0 = time.process_time(), time.perf_counter()
    F.conv2d(x, w, None, c["stride"], c["pad"], 1, c["groups"])
    t1, c1 = time.perf_counter(), time.process_time()
    print(json.dumps({"wall": (t1 - t0) * 1000, "cpu": (c1 - c0) * 1000}), flush=True)
`;

/** A PyTorch process answering "time config k once" requests; null (with the reason) when unavailable. */
async function startTorch(): Promise<{ info: { version: string; threads: number }; once(k: number): Promise<Sample>; close(): void } | string> {
  let proc: ChildProcessWithoutNullStreams;
  try { proc = spawn('/usr/bin/python3', ['-c', TORCH_WORKER, JSON.stringify(CONFIGS), String(THREADS)]); } catch (e) { return `PyTorch not measured: ${(e as Error).message}`; }
  const lines = createInterface({ input: proc.stdout })[Symbol.asyncIterator]();
  let stderr = '';
  proc.stderr.on('data', (d) => { stderr += String(d); });
  proc.on('error', () => {});
  const next = async (): Promise<string | null> => { const r = await lines.next(); return r.done ? null : r.value; };
  const first = await next();
  if (first === null) return `PyTorch not measured: ${stderr.trim().split('\n').pop() ?? 'python3 exited'}`;
  return {
    info: JSON.parse(first) as { version: string; threads: number },
    async once(k: number): Promise<Sample> { proc.stdin.write(`${k}\n`); return JSON.parse((await next()) ?? 'null') as Sample; },
    close(): void { proc.stdin.end(); },
  };
}

export async function run(args: string[] = argv): Promise<void> {
  const reps = args.includes('--reps') ? Number(args[args.indexOf('--reps') + 1]) : 10;
  const torch = await startTorch();
  const rows: [Timing, Timing | null][] = [];
  for (const [k, c] of CONFIGS.entries()) {
    const mine = ours(c), a: Sample[] = [], b: Sample[] = [];
    for (let i = 0; i < 2; i++) { mine.once(); if (typeof torch !== 'string') await torch.once(k); } // warm-up
    for (let i = 0; i < reps; i++) {
      a.push(mine.once());
      if (typeof torch !== 'string') b.push(await torch.once(k));
    }
    mine.dispose();
    rows.push([summary(a), b.length ? summary(b) : null]);
  }
  if (typeof torch !== 'string') torch.close();
  const lines = [
    `nbxtensor CPU (BLAS: ${blasInfo()}); PyTorch ${typeof torch === 'string' ? '-' : `${torch.info.version}, ${torch.info.threads} thread(s)`}; ` +
      `${reps} alternating timed calls each; ms = best (median) wall time, CPU = best CPU time of the process`,
    '',
    '| problem | GFLOP | nbx ms | nbx GFLOP/s | nbx CPU ms | torch ms | torch GFLOP/s | torch CPU ms | nbx / torch (wall) |',
    '| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |',
  ];
  const ms = (t: Timing): string => `${t.min.toFixed(2)} (${t.median.toFixed(2)})`;
  CONFIGS.forEach((c, k) => {
    const g = flops(c) / 1e9, [m, t] = rows[k]!;
    lines.push(`| ${c.name} | ${g.toFixed(3)} | ${ms(m)} | ${(g / (m.min / 1e3)).toFixed(1)} | ${m.cpu.toFixed(1)} | ${t ? ms(t) : '-'} | ` +
      `${t ? (g / (t.min / 1e3)).toFixed(1) : '-'} | ${t ? t.cpu.toFixed(1) : '-'} | ${t ? `${(m.min / t.min).toFixed(2)}×` : '-'} |`);
  });
  if (typeof torch === 'string') lines.push('', torch);
  process.stdout.write(lines.join('\n') + '\n');
}

if (process.argv[1] && import.meta.url === new URL(`file://${process.argv[1]}`).href) await run();
