// Compiles generated CUDA kernel sources with nvcc for sm_90 (no GPU needed): every specialization a
// family's generators can produce, each wrapped in its own namespace (helpers may repeat) with its
// kernel renamed, the prelude once per file; batches compile in parallel. Run after `npx tsc`.
import { writeFileSync, mkdtempSync } from 'node:fs';
import { spawn } from 'node:child_process';
import { tmpdir, cpus } from 'node:os';
import { join } from 'node:path';
import { CUDA_PRELUDE } from '../../dist/src/ir/render_c.js';

function run(args) {
  return new Promise((resolve) => {
    const p = spawn('nvcc', args, { stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    p.stdout.on('data', (d) => { out += d; });
    p.stderr.on('data', (d) => { out += d; });
    p.on('close', (code) => resolve({ code, out }));
  });
}

/** The launcher's argument types (sig) must match the kernel's C parameters one for one. */
export function checkSignature(s) {
  const m = new RegExp(`void (?:__launch_bounds__\\(\\d+(?:, *\\d+)?\\) )?${s.name}\\(`).exec(s.src);
  let i = m.index + m[0].length, depth = 1, params = '';
  for (; depth > 0; i++) { const c = s.src[i]; if (c === '(') depth++; if (c === ')') depth--; if (depth > 0) params += c; }
  const kinds = params.split(',').map((p) => p.trim()).filter(Boolean).map((p) => {
    if (p.includes('*')) return 'ptr';
    const t = p.replace(/\b(const|__restrict__)\b/g, '').trim().split(/\s+/).slice(0, -1).join(' ');
    return { int: 'i32', unsigned: 'u32', 'unsigned int': 'u32', 'long long': 'i64', 'unsigned long long': 'u64', float: 'f32', double: 'f64' }[t] ?? `?${t}`;
  });
  if (kinds.join() !== s.sig.join()) throw new Error(`${s.label}: signature [${s.sig.join()}] does not match the kernel's parameters [${kinds.join()}]`);
}

/** specs: [{ label, src, name, sig }]. Returns the number of kernels compiled; exits non-zero on any failure. */
export async function compileAll(family, specs, batch = 24, arch = 'sm_90') {
  for (const s of specs) checkSignature(s);
  const dir = mkdtempSync(join(tmpdir(), `nbx_${family}_`));
  const files = [];
  for (let b = 0; b * batch < specs.length; b++) {
    let all = CUDA_PRELUDE;
    specs.slice(b * batch, (b + 1) * batch).forEach((s, j) => {
      const i = b * batch + j;
      const re = new RegExp(`void (__launch_bounds__\\(\\d+(?:, *\\d+)?\\) )?${s.name}\\(`);
      if (!re.test(s.src)) throw new Error(`${s.label}: kernel ${s.name} not found in its source`);
      all += `\n// ${s.label}\nnamespace k${i} {\n${s.src.replace(re, (m, lb) => `void ${lb ?? ''}${s.name}_${i}(`)}\n}\n`;
    });
    const f = join(dir, `${family}_${b}.cu`);
    writeFileSync(f, all);
    files.push(f);
  }
  const limit = Math.max(1, cpus().length);
  let failed = 0, next = 0;
  const worker = async () => {
    while (next < files.length) {
      const f = files[next++];
      const r = await run([`-arch=${arch}`, '-cubin', '--std=c++17', '-w', '-o', f.replace(/\.cu$/, '.cubin'), f]);
      if (r.code !== 0) { failed++; console.error(`FAILED ${f}\n${r.out.slice(0, 4000)}`); }
    }
  };
  await Promise.all(Array.from({ length: Math.min(limit, files.length) }, worker));
  console.log(`${family}: ${specs.length} kernels in ${files.length} files, ${failed ? `${failed} files FAILED` : 'all compiled'} for ${arch} (${dir})`);
  if (failed) process.exitCode = 1;
  return specs.length;
}

export const FLOATS = ['float32', 'float64', 'float16', 'bfloat16'];
export const INTS = ['uint8', 'int8', 'int16', 'int32', 'int64'];
export const IDX = ['int', 'long long'];
export const BOOLS = [false, true];
