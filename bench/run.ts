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
  // issue #19: decode tok/s, GB/s of weights and % of the roofline next to compiled PyTorch and transformers;
  // `nbx bench decode --device cuda` on a GPU (tiny shapes on the CPU by default)
  decode: ['decode.js'],
  // issue #21: dequantizing GEMV GB/s per format and quantized decode tok/s next to bf16 (--check: correctness first)
  quant: ['quant.js'],
};

export async function bench(args: string[]): Promise<number> {
  // The suite is named first (`nbx bench generate --device cuda`); a flag's value is never taken for a
  // suite. No arguments at all run the CPU suite.
  const known = `${Object.keys(SUITES).join(', ')}, all`;
  if (args.length > 0 && args[0]!.startsWith('-')) {
    process.stderr.write(`nbx bench: name the suite first (${known}), then its flags: e.g. nbx bench generate ${args.join(' ')}\n`);
    return 2;
  }
  const which = args[0] ?? 'cpu';
  const names = which === 'all' ? Object.values(SUITES).flat() : Object.hasOwn(SUITES, which) ? SUITES[which] : undefined;
  if (!names) { process.stderr.write(`nbx bench: unknown suite '${which}' (${known})\n`); return 2; }
  // Everything after the suite's name goes to its scripts (flags with their values: --device cuda).
  const passed = args.slice(1);
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
