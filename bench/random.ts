// Random-number benchmark: randn of 16M float32 values (PyTorch's AVX2 normal_fill, reproduced bit
// for bit) next to torch.randn(16M) timed in the same run by /usr/bin/python3 (torch's default
// thread count; its normal_fill is single-threaded), plus rand.
//
// One Python process is kept open and the two sides alternate for several rounds, so that load from
// other processes on the machine affects both alike; the table shows the best round of each side
// (wall clock) and, as a load-insensitive cross-check, CPU time (process.cpuUsage / time.process_time).
//
// Run: npx tsc -p tsconfig.json && node dist/bench/random.js   (ROUNDS=5 REPS=3 to change)
import { spawn } from 'node:child_process';
import { createInterface } from 'node:readline';
import { loadavg } from 'node:os';
import { Generator } from '../src/random/generator.js';
import { rand, randn } from '../src/random/sample.js';
import { simdKernel } from '../src/random/simd.js';

const N = 1 << 24;
const ROUNDS = Number(process.env.ROUNDS ?? 5);
const REPS = Number(process.env.REPS ?? 3);

interface Timing { wall: number; cpu: number }

/** Best wall time and best CPU time over `reps` calls (after one warm-up call). */
function timeOurs(fn: () => void, reps: number): Timing {
  fn();
  let wall = Infinity, cpu = Infinity;
  for (let i = 0; i < reps; i++) {
    const c0 = process.cpuUsage();
    const t0 = performance.now();
    fn();
    wall = Math.min(wall, performance.now() - t0);
    const c = process.cpuUsage(c0);
    cpu = Math.min(cpu, (c.user + c.system) / 1000);
  }
  return { wall, cpu };
}

const TORCH = `
import sys, time, json, torch
N = 1 << 24
torch.manual_seed(0)
ops = {'randn': lambda: torch.randn(N), 'rand': lambda: torch.rand(N)}
print(json.dumps({'version': torch.__version__, 'threads': torch.get_num_threads()}), flush=True)
for line in sys.stdin:
    op, reps = line.split()
    f = ops[op]; f()
    wall = cpu = float('inf')
    for _ in range(int(reps)):
        c0 = time.process_time(); t0 = time.perf_counter(); f()
        wall = min(wall, (time.perf_counter() - t0) * 1000); cpu = min(cpu, (time.process_time() - c0) * 1000)
    print(json.dumps({'wall': wall, 'cpu': cpu}), flush=True)
`;

class Torch {
  private readonly lines: AsyncIterator<string>;
  private readonly proc;
  constructor() {
    this.proc = spawn('/usr/bin/python3', ['-c', TORCH], { stdio: ['pipe', 'pipe', 'inherit'] });
    this.lines = createInterface({ input: this.proc.stdout! })[Symbol.asyncIterator]();
  }
  async next(): Promise<string> {
    const r = await this.lines.next();
    if (r.done) throw new Error('torch process ended');
    return r.value;
  }
  async time(op: string, reps: number): Promise<Timing> {
    this.proc.stdin!.write(`${op} ${reps}\n`);
    return JSON.parse(await this.next()) as Timing;
  }
  close(): void { this.proc.stdin!.end(); }
}

async function main(): Promise<void> {
  const gen = new Generator().manual_seed(0);
  const ours: Record<string, Timing[]> = { randn: [], rand: [] };
  const theirs: Record<string, Timing[]> = { randn: [], rand: [] };
  let torch: Torch | undefined;
  let info: { version: string; threads: number } | undefined;
  try {
    torch = new Torch();
    info = JSON.parse(await torch.next());
  } catch (e) {
    console.log(`(torch not available: ${(e as Error).message})`);
    torch = undefined;
  }
  const fns: Record<string, () => void> = { randn: () => randn(gen, N, 'float32'), rand: () => rand(gen, N, 'float32') };
  for (let r = 0; r < ROUNDS; r++) {
    for (const op of ['randn', 'rand']) {
      ours[op]!.push(timeOurs(fns[op]!, REPS));
      if (torch) theirs[op]!.push(await torch.time(op, REPS));
    }
  }
  torch?.close();
  const best = (ts: Timing[], k: keyof Timing) => Math.min(...ts.map((t) => t[k]));
  console.log(`randn/rand of ${N} float32 values; best of ${ROUNDS} alternating rounds x ${REPS} reps; ` +
    `SIMD kernel: ${simdKernel() ? 'on' : 'off'}; load average ${loadavg().map((x) => x.toFixed(1)).join(' ')}`);
  console.log(`| op | nbxtensor ms | torch ${info?.version ?? '-'} ms (threads=${info?.threads ?? '-'}) | ratio | CPU ms nbx / torch | CPU ratio |`);
  console.log('| --- | --- | --- | --- | --- | --- |');
  for (const op of ['randn', 'rand']) {
    const ow = best(ours[op]!, 'wall'), oc = best(ours[op]!, 'cpu');
    if (!torch) { console.log(`| ${op} | ${ow.toFixed(1)} | - | - | ${oc.toFixed(1)} / - | - |`); continue; }
    const tw = best(theirs[op]!, 'wall'), tc = best(theirs[op]!, 'cpu');
    console.log(`| ${op} | ${ow.toFixed(1)} | ${tw.toFixed(1)} | ${(ow / tw).toFixed(2)}x | ${oc.toFixed(1)} / ${tc.toFixed(1)} | ${(oc / tc).toFixed(2)}x |`);
  }
}

await main();
