// CPU benchmarks: elementwise and reductions over 16M float32 elements, next to numpy measured in the
// same run (Debian's python3-numpy with OpenBLAS). Prints a markdown table of GB/s and the ratio.
import { execFileSync } from 'node:child_process';
import * as nbx from '../src/index.js';

const N = 1 << 24;
const ROWS = 4096, COLS = 4096;

function time(fn: () => void, reps = 7): number {
  fn();
  const ts: number[] = [];
  for (let i = 0; i < reps; i++) { const t0 = performance.now(); fn(); ts.push(performance.now() - t0); }
  ts.sort((a, b) => a - b);
  return ts[Math.floor(ts.length / 2)]! / 1000;
}

interface Case { name: string; bytes: number; ours: () => void; numpy: string }

const NUMPY = `
import numpy as np, time, json, sys
N=1<<24; R=4096; C=4096
rng=np.random.default_rng(0)
a=rng.standard_normal(N,dtype=np.float32); b=rng.standard_normal(N,dtype=np.float32); o=np.empty(N,np.float32)
A=a.reshape(R,C); B=b.reshape(R,C); row=rng.standard_normal(C,dtype=np.float32); O=o.reshape(R,C)
def t(f, reps=7):
    f(); ts=[]
    for _ in range(reps):
        t0=time.perf_counter(); f(); ts.append(time.perf_counter()-t0)
    ts.sort(); return ts[len(ts)//2]
cases={
 'add contiguous': lambda: np.add(a,b),
 'mul contiguous': lambda: np.multiply(a,b),
 'exp contiguous': lambda: np.exp(a),
 'add broadcast row': lambda: np.add(A,row),
 'add transposed': lambda: np.add(A.T,B),
 'sum rows (dim=-1)': lambda: A.sum(axis=1),
 'sum cols (dim=0)': lambda: A.sum(axis=0),
 'amax rows': lambda: A.max(axis=1),
}
print(json.dumps({k: t(f) for k,f in cases.items()}))
`;

export async function run(_args: string[]): Promise<void> {
  const g = nbx.arange(N, { dtype: 'float32' });
  const a = nbx.sin(g), b = nbx.cos(g);
  const A = a.view(ROWS, COLS), B = b.view(ROWS, COLS);
  const row = nbx.sin(nbx.arange(COLS, { dtype: 'float32' }));
  const f = 4;
  const cases: Case[] = [
    { name: 'add contiguous', bytes: 3 * N * f, ours: () => nbx.add(a, b).dispose(), numpy: '' },
    { name: 'mul contiguous', bytes: 3 * N * f, ours: () => nbx.mul(a, b).dispose(), numpy: '' },
    { name: 'exp contiguous', bytes: 2 * N * f, ours: () => nbx.exp(a).dispose(), numpy: '' },
    { name: 'add broadcast row', bytes: 2 * N * f, ours: () => nbx.add(A, row).dispose(), numpy: '' },
    { name: 'add transposed', bytes: 3 * N * f, ours: () => nbx.add(A.t(), B).dispose(), numpy: '' },
    { name: 'sum rows (dim=-1)', bytes: N * f, ours: () => nbx.sum(A, -1).dispose(), numpy: '' },
    { name: 'sum cols (dim=0)', bytes: N * f, ours: () => nbx.sum(A, 0).dispose(), numpy: '' },
    { name: 'amax rows', bytes: N * f, ours: () => nbx.amax(A, -1).dispose(), numpy: '' },
  ];
  let numpy: Record<string, number> = {};
  try {
    const env = { ...process.env };
    delete env.OPENBLAS_CORETYPE; delete env.OPENBLAS_L2_SIZE;
    numpy = JSON.parse(execFileSync('/usr/bin/python3', ['-c', NUMPY], { env, encoding: 'utf8' })) as Record<string, number>;
  } catch (e) { process.stderr.write(`numpy not available (${(e as Error).message.split('\n')[0]}); peer column empty\n`); }
  const lines = ['| operation (16M float32) | nbx GB/s | nbx 1 thread GB/s | numpy GB/s | nbx / numpy |', '| --- | ---: | ---: | ---: | ---: |'];
  for (const c of cases) {
    const ours = c.bytes / time(c.ours) / 1e9;
    const saved = process.env.NBX_CPU_THREADS;
    process.env.NBX_CPU_THREADS = '1'; // the same kernels without worker threads: the threads' speed-up
    const single = c.bytes / time(c.ours) / 1e9;
    if (saved === undefined) delete process.env.NBX_CPU_THREADS; else process.env.NBX_CPU_THREADS = saved;
    const np = numpy[c.name] ? c.bytes / numpy[c.name]! / 1e9 : NaN;
    lines.push(`| ${c.name} | ${ours.toFixed(2)} | ${single.toFixed(2)} | ${Number.isNaN(np) ? '-' : np.toFixed(2)} | ${Number.isNaN(np) ? '-' : (ours / np).toFixed(2)} |`);
  }
  process.stdout.write(`${lines.join('\n')}\n`);
}

if (process.argv[1]?.endsWith('cpu.js')) run(process.argv.slice(2)).catch((e) => { console.error(e); process.exitCode = 1; });
