// `nbx bench [cpu|cuda|webgpu|all]`: runs each benchmark script in its own process (so one's memory and
// threads never skew another's) and prints their tables. Every script measures its peer in the same run.
import { spawnSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { dirname, join } from 'node:path';
import { existsSync } from 'node:fs';

const here = dirname(fileURLToPath(import.meta.url));
const SUITES: Record<string, string[]> = {
  cpu: ['cpu.js', 'cpu_matmul.js', 'cpu_conv.js', 'cpu_softmax.js', 'random.js', 'safetensors_load.js'],
  cuda: ['cuda.js', 'cuda_norm.js', 'cuda_coldstart.js'],
  webgpu: ['webgpu.js'],
  // decode tokens/s and time to first token next to PyTorch; `nbx bench generate --device cuda` on a GPU
  generate: ['generate.js'],
};

export async function bench(args: string[]): Promise<number> {
  const which = args.find((a) => !a.startsWith('-')) ?? 'cpu';
  const names = which === 'all' ? Object.values(SUITES).flat() : SUITES[which];
  if (!names) { process.stderr.write(`nbx bench: unknown suite '${which}' (${Object.keys(SUITES).join(', ')}, all)\n`); return 2; }
  // Everything after the suite's name goes to its scripts (flags with their values: --device cuda).
  const passed = args.filter((_, i) => i !== args.indexOf(which));
  let rc = 0;
  for (const name of names) {
    const file = join(here, name);
    if (!existsSync(file)) { process.stdout.write(`\n## ${name}: not built\n`); continue; }
    process.stdout.write(`\n## ${name.replace(/\.js$/, '')}\n\n`);
    const r = spawnSync(process.execPath, [file, ...passed], { stdio: 'inherit' });
    if (r.status !== 0) rc = 1;
  }
  return rc;
}
