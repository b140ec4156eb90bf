// Cold start: a chain of 20 different operations in a first process on an empty cache (kernels to
// compile, configurations to find) against a second process that finds both cached.
// node dist/bench/cuda_coldstart.js          (runs both processes and prints the comparison)
import { spawnSync } from 'node:child_process';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import * as nbx from '../src/index.js';

async function chain(): Promise<number> {
  const t0 = performance.now();
  const F = nbx.nn.functional;
  const x = nbx.ones([1024, 1024], { device: 'cuda' });
  const w = nbx.ones([1024, 1024], { device: 'cuda' });
  const steps: ((t: nbx.Tensor) => nbx.Tensor)[] = [
    (t) => nbx.add(t, 1), (t) => nbx.mul(t, 0.5), (t) => nbx.exp(t), (t) => nbx.tanh(t), (t) => nbx.sigmoid(t),
    (t) => F.gelu(t), (t) => F.silu(t), (t) => F.softmax(t, { dim: -1 }), (t) => F.layer_norm(t, [1024]), (t) => F.rms_norm(t, [1024]),
    (t) => nbx.matmul(t, w), (t) => t.t().contiguous(), (t) => nbx.where(nbx.gt(t, 0), t, 0), (t) => nbx.clamp(t, -1, 1),
    (t) => nbx.sqrt(nbx.abs(t)), (t) => nbx.log1p(t), (t) => nbx.sum(t, -1, { keepdim: true }).expand(1024, 1024).contiguous(),
    (t) => nbx.amax(t, 0, { keepdim: true }).add(t), (t) => nbx.var(t, -1, { keepdim: true }).add(t), (t) => nbx.mean(t, 0, { keepdim: true }).add(t),
  ];
  let t = x;
  for (const f of steps) t = f(t);
  await t.data();
  return performance.now() - t0;
}

if (process.argv[2] === '--child') {
  chain().then((ms) => { process.stdout.write(`${ms.toFixed(1)}\n`); });
} else {
  const cache = mkdtempSync(join(tmpdir(), 'nbx-cold-'));
  const env = { ...process.env, NBX_CACHE_DIR: cache };
  const run = (): number => Number(spawnSync(process.execPath, [process.argv[1]!, '--child'], { env, encoding: 'utf8' }).stdout.trim().split('\n').pop());
  const first = run(), second = run();
  process.stdout.write(`| cold start, 20-op chain | first process (empty cache) ${first.toFixed(0)} ms | second process ${second.toFixed(0)} ms | ratio ${(first / second).toFixed(2)} (target <= 1.5) |\n`);
}
