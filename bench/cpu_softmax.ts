// CPU benchmark: softmax over the last dim and layer_norm of a (4096, 4096) float32 matrix, next to
// PyTorch CPU (/usr/bin/python3, Debian's torch 1.13) and numpy (exp/sum formulation) measured in the
// same run. Prints a markdown table: milliseconds (best of 7 for every implementation: the least
// disturbed run on a shared machine) and GB/s (bytes read + written). "kernel only" runs the kernel into
// one reused output tensor: the op's extra time is allocating and first touching a fresh 64 MiB output.
// Run: node dist/bench/cpu_softmax.js   (or as part of `nbx bench cpu`)
import { execFileSync } from 'node:child_process';
import { pathToFileURL } from 'node:url';
import * as nbx from '../src/index.js';
import { kernel } from '../src/kernels/registry.js';

const R = 4096, C = 4096;

function time(fn: () => void, reps = 7): number {
  fn();
  const ts: number[] = [];
  for (let i = 0; i < reps; i++) { const t0 = performance.now(); fn(); ts.push(performance.now() - t0); }
  return Math.min(...ts);
}

const PEERS = `
import json, time, numpy as np
R=C=4096
rng=np.random.default_rng(0)
x=rng.uniform(-4,4,(R,C)).astype(np.float32); w=rng.standard_normal(C,dtype=np.float32); b=rng.standard_normal(C,dtype=np.float32)
def t(f, reps=7):
    f(); ts=[]
    for _ in range(reps):
        t0=time.perf_counter(); f(); ts.append(time.perf_counter()-t0)
    return min(ts)*1e3
def np_softmax(a):
    e=np.exp(a-a.max(axis=-1,keepdims=True)); return e/e.sum(axis=-1,keepdims=True)
def np_layer_norm(a):
    m=a.mean(axis=-1,keepdims=True); v=a.var(axis=-1,keepdims=True); return (a-m)/np.sqrt(v+1e-5)*w+b
out={'numpy softmax': t(lambda: np_softmax(x)), 'numpy layer_norm': t(lambda: np_layer_norm(x))}
try:
    import torch, torch.nn.functional as F
    tx, tw, tb = torch.from_numpy(x), torch.from_numpy(w), torch.from_numpy(b)
    out['torch softmax'] = t(lambda: torch.softmax(tx, -1))
    out['torch layer_norm'] = t(lambda: F.layer_norm(tx, [C], tw, tb))
    out['torch threads'] = torch.get_num_threads(); out['torch version'] = torch.__version__
except ImportError:
    pass
print(json.dumps(out))
`;

export async function run(_args: string[] = []): Promise<void> {
  const g = nbx.arange(R * C, { dtype: 'float32' });
  const x = nbx.mul(nbx.sin(nbx.mul(g, 0.618)), 4).view(R, C);
  const w = nbx.cos(nbx.arange(C, { dtype: 'float32' })), b = nbx.sin(nbx.arange(C, { dtype: 'float32' }));
  const F = nbx.nn.functional;
  const ours = {
    softmax: time(() => (F.softmax(x, -1) as nbx.Tensor).dispose()),
    layer_norm: time(() => (F.layer_norm(x, [C], w, b) as nbx.Tensor).dispose()),
  };
  const out = nbx.empty([R, C]);
  const kernelOnly = {
    softmax: time(() => kernel('softmax', 'cpu')({ x: x.ref(), out: out.ref(), dim: 1, log: false })),
    layer_norm: time(() => kernel('row_norm', 'cpu')({ x: x.ref(), rows: R, n: C, eps: 1e-5, mode: 'layer', out: out.ref(), weight: w.ref(), bias: b.ref() })),
  };
  let peers: Record<string, number | string> = {};
  try {
    peers = JSON.parse(execFileSync('/usr/bin/python3', ['-c', PEERS], { encoding: 'utf8' })) as Record<string, number | string>;
  } catch (e) { process.stderr.write(`python peers not available (${(e as Error).message.split('\n')[0]}); peer rows empty\n`); }
  const bytes = 2 * R * C * 4; // read the input once, write the output once
  const row = (impl: string, op: string, ms: number | undefined): string =>
    `| ${op} | ${impl} | ${ms === undefined ? '-' : ms.toFixed(1)} | ${ms === undefined ? '-' : (bytes / (ms / 1e3) / 1e9).toFixed(2)} | ${ms === undefined ? '-' : (ms / (ours as Record<string, number>)[op]!).toFixed(2)} |`;
  const lines = [
    `| op (4096x4096 float32, last dim) | implementation | ms | GB/s | peer ms / nbx ms |`,
    '| --- | --- | ---: | ---: | ---: |',
  ];
  for (const op of ['softmax', 'layer_norm'] as const) {
    lines.push(row('nbx', op, ours[op]));
    lines.push(row('nbx kernel only (reused output)', op, kernelOnly[op]));
    lines.push(row(`PyTorch ${peers['torch version'] ?? ''} CPU (${peers['torch threads'] ?? '?'} threads)`, op, peers[`torch ${op}`] as number | undefined));
    lines.push(row('numpy', op, peers[`numpy ${op}`] as number | undefined));
  }
  process.stdout.write(`${lines.join('\n')}\n`);
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? '').href) await run(process.argv.slice(2));
