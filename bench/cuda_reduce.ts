// Sum reductions on the CUDA backend against PyTorch in the same run (issue #7: at least 98% of
// PyTorch's bandwidth): sum rows (A.sum(-1)), sum cols (A.sum(0)) and sum all (a.sum()) of A =
// [16384, m] contiguous, in float32, bfloat16 and float16, at bench/cuda.ts's size (512 MiB) and at
// 1 GiB. Bandwidth = bytes read once. Both sides: CUDA events around 20 back-to-back calls after a
// warm-up call (ours compiles and, on an autotune cache miss, sweeps the launch configurations).
// Run: node dist/bench/cuda_reduce.js [--quick | --mib N]
import { execFileSync } from 'node:child_process';
import * as nbx from '../src/index.js';
import { TORCH_EVENT_TIMER, timeEvents } from './gpu_timing.js';

const MiB = 1 << 20;
const mibAt = process.argv.indexOf('--mib'); // --mib N: one size of N MiB (a quick check; the emulator)
const SIZES = mibAt >= 0 ? [Number(process.argv[mibAt + 1]) * MiB] : process.argv.includes('--quick') ? [64 * MiB] : [512 * MiB, 1024 * MiB];
const DTS = [['float32', 'f32', 4], ['bfloat16', 'bf16', 2], ['float16', 'f16', 2]] as const;
const R = 16384;

const PEER = String.raw`
import torch, json, sys
${TORCH_EVENT_TIMER}
out = {}
for bytes_, name in json.loads(sys.argv[1]):
    dt = {'f32': torch.float32, 'bf16': torch.bfloat16, 'f16': torch.float16}[name]
    n = bytes_ // dt.itemsize
    a = torch.randn(n, device='cuda', dtype=dt); A = a.view(16384, n // 16384)
    tag = '%s %dMiB' % (name, bytes_ >> 20)
    out['sum rows ' + tag] = t(lambda: A.sum(-1), 20)
    out['sum cols ' + tag] = t(lambda: A.sum(0), 20)
    out['sum all ' + tag] = t(lambda: a.sum(), 20)
    del a, A
    torch.cuda.empty_cache()
print(json.dumps(out))
`;

let peer: Record<string, number> = {};
try {
  const cases = SIZES.flatMap((b) => DTS.map(([, s]) => [b, s]));
  peer = JSON.parse(execFileSync('python3', ['-c', PEER, JSON.stringify(cases)], { encoding: 'utf8' })) as Record<string, number>;
} catch (e) { process.stderr.write(`PyTorch peer failed: ${(e as Error).message.slice(0, 300)}\n`); }

const lines = ['| benchmark | nbx GB/s | PyTorch GB/s | nbx vs PyTorch | first call ms |', '| --- | ---: | ---: | ---: | ---: |'];
for (const bytes of SIZES) {
  for (const [dt, short, isz] of DTS) {
    const n = bytes / isz;
    const a = nbx.randn([n], { device: 'cuda', dtype: dt }), A = a.view(R, n / R);
    const cases: [string, () => nbx.Tensor][] = [['sum rows', () => nbx.sum(A, -1)], ['sum cols', () => nbx.sum(A, 0)], ['sum all', () => nbx.sum(a)]];
    for (const [op, fn] of cases) {
      const t0 = performance.now();
      fn().dispose(); await nbx.cuda.synchronize(); // compile + tune (a cache miss sweeps the launch configurations)
      const first = performance.now() - t0;
      const s = await timeEvents(() => fn().dispose(), 20);
      const tag = `${op} ${short} ${bytes / MiB}MiB`, p = peer[tag];
      lines.push(`| ${tag} | ${(bytes / s / 1e9).toFixed(0)} | ${p ? (bytes / p / 1e9).toFixed(0) : '-'} | ${p ? `${((p / s) * 100).toFixed(1)}%` : '-'} | ${first.toFixed(0)} |`);
      process.stdout.write(`${lines[lines.length - 1]}\n`);
    }
    a.dispose();
  }
}
process.stdout.write(`\n${lines.join('\n')}\n`);
