// Architecture checks: imports run one way (ops → kernels ← backend/<name>), no backend imports
// another backend or ops, no import cycles; every backend folder has the same shape (a kernel lives in
// kernels/<family>.ts, named after its contract's file in src/kernels; kernel families do not import
// each other); and, per backend, which kernels of the table it implements itself, which it stages
// through the host, and which it lacks (printed, so a gap is visible in every test run).

import { it } from 'node:test';
import assert from 'node:assert/strict';
import { readdirSync, readFileSync, existsSync } from 'node:fs';
import { pathToFileURL } from 'node:url';
import { basename, dirname, join, relative, resolve, sep } from 'node:path';
import { fileURLToPath } from 'node:url';
import { cpuKernels } from '../src/backend/cpu/kernels/index.js';
import { cudaKernels } from '../src/backend/cuda/kernels/index.js';
import { webgpuKernels } from '../src/backend/webgpu/kernels/index.js';
import { KERNEL_NAMES, type BackendKernels, type KernelName } from '../src/kernels/table.js';
import { coverageOf } from '../src/kernels/registry.js';

const root = resolve(dirname(fileURLToPath(import.meta.url)), '../../src');

interface Edge {
  from: string;
  to: string;
  /** A type-only import (erased) or a dynamic import() (loaded on demand): neither orders module loading. */
  deferred: boolean;
  /** A dynamic import(). */
  dynamic: boolean;
}

/** Every relative import of every .ts file under src/, resolved to a src-relative path. */
function importGraph(): { files: string[]; edges: Edge[] } {
  const files: string[] = [];
  const walk = (d: string): void => {
    for (const e of readdirSync(d, { withFileTypes: true })) {
      const p = join(d, e.name);
      if (e.isDirectory()) walk(p);
      else if (p.endsWith('.ts') && !p.endsWith('.d.ts')) files.push(p);
    }
  };
  walk(root);
  const edges: Edge[] = [];
  const pattern = /^\s*(?:import|export)\s+(type\s+)?(?:[^'";]*?\sfrom\s+)?['"](\.[^'"]+)['"]|import\(\s*['"](\.[^'"]+)['"]\s*\)/gm;
  for (const f of files) {
    for (const m of readFileSync(f, 'utf8').matchAll(pattern)) {
      const spec = m[2] ?? m[3]!;
      let target = resolve(dirname(f), spec).replace(/\.js$/, '.ts');
      if (!existsSync(target)) continue; // a non-source import (a worker URL, JSON)
      target = relative(root, target);
      // dynamic import() loads later, on demand: it orders nothing at load time but still counts for direction
      edges.push({ from: relative(root, f), to: target, deferred: m[1] !== undefined || m[3] !== undefined, dynamic: m[3] !== undefined });
    }
  }
  return { files: files.map((f) => relative(root, f)), edges };
}

/** 'ops', 'kernels', 'backend' (the shared contract files), 'backend/cpu', ... */
function area(file: string): string {
  const parts = file.split(sep);
  return parts[0] === 'backend' && parts.length > 2 ? `backend/${parts[1]}` : parts[0]!;
}

it('imports run one way: ops → kernels ← backend/<name>; no backend imports another backend or ops', () => {
  const wrong: string[] = [];
  for (const e of importGraph().edges) {
    const a = area(e.from), b = area(e.to);
    const toBackend = b.startsWith('backend/');
    if (a.startsWith('backend/') && (b === 'ops' || (toBackend && b !== a))) wrong.push(`${e.from} → ${e.to}`);
    if ((a === 'ops' || a === 'kernels') && toBackend) wrong.push(`${e.from} → ${e.to}`);
    if (a === 'kernels' && b === 'ops') wrong.push(`${e.from} → ${e.to}`);
  }
  assert.deepEqual(wrong, [], `imports against the direction ops → kernels ← backend/<name>:\n  ${wrong.join('\n  ')}`);
});

/**
 * The model layer (models/, generation/, ...) is written against the package's public API, as a user
 * writes a model, so it imports the entry point (src/index.ts) that also exports it. Those imports are
 * the API, not engine structure; the cycle check skips edges into the entry point.
 */
const ENTRY = 'index.ts';

/** Import cycles (strongly connected components of two or more files) over `edges`, edges into the entry point skipped. */
function cyclesOf(files: string[], edges: Edge[]): string[][] {
  const out = new Map<string, string[]>(files.map((f) => [f, []]));
  for (const e of edges) if (e.to !== ENTRY) out.get(e.from)!.push(e.to);
  // Tarjan's strongly connected components: any component of two or more files is a cycle.
  let next = 0;
  const index = new Map<string, number>(), low = new Map<string, number>(), stack: string[] = [], onStack = new Set<string>();
  const cycles: string[][] = [];
  const visit = (v: string): void => {
    index.set(v, next); low.set(v, next); next++;
    stack.push(v); onStack.add(v);
    for (const w of out.get(v) ?? []) {
      if (!index.has(w)) { visit(w); low.set(v, Math.min(low.get(v)!, low.get(w)!)); }
      else if (onStack.has(w)) low.set(v, Math.min(low.get(v)!, index.get(w)!));
    }
    if (low.get(v) === index.get(v)) {
      const component: string[] = [];
      let w: string;
      do { w = stack.pop()!; onStack.delete(w); component.push(w); } while (w !== v);
      if (component.length > 1 || (out.get(v) ?? []).includes(v)) cycles.push(component);
    }
  };
  for (const f of files) if (!index.has(f)) visit(f);
  return cycles;
}

it('has no import cycles (value imports; type-only imports are erased by the compiler)', () => {
  const { files, edges } = importGraph();
  const cycles = cyclesOf(files, edges.filter((e) => !e.deferred));
  assert.deepEqual(cycles, [], `import cycles:\n  ${cycles.map((c) => c.join(' ↔ ')).join('\n  ')}`);
});

// Type-only cycles cost nothing at run time but say that a shared type sits in the wrong module: it
// belongs in the lower one (as cuda/runtime/device.ts and webgpu/runtime/device.ts hold what the
// runtime modules see of their backend). Static imports only: a dynamic import() loads on demand.
it('has no import cycles through type-only imports either', () => {
  const { files, edges } = importGraph();
  const cycles = cyclesOf(files, edges.filter((e) => !e.dynamic));
  assert.deepEqual(cycles, [], `import cycles (type-only imports included):\n  ${cycles.map((c) => c.join(' ↔ ')).join('\n  ')}`);
});

/** Kernel name → its family: the src/kernels file its signature type is imported from in table.ts. */
function kernelFamilies(): Map<string, string> {
  const table = readFileSync(join(root, 'kernels/table.ts'), 'utf8');
  const fileOfType = new Map<string, string>();
  for (const m of table.matchAll(/import\s+type\s*\{([^}]*)\}\s*from\s*'\.\/(\w+)\.js'/g)) {
    for (const name of m[1]!.split(',')) if (name.trim()) fileOfType.set(name.trim(), m[2]!);
  }
  const body = table.slice(table.indexOf('export interface KernelTable'), table.indexOf('export type KernelName'));
  const families = new Map<string, string>();
  for (const m of body.matchAll(/^\s*(\w+):\s*(\w+);/gm)) families.set(m[1]!, fileOfType.get(m[2]!)!);
  return families;
}

it('every backend folder has the same shape: a kernel lives in kernels/<family>.ts, families import only helpers', async () => {
  const families = kernelFamilies();
  assert.deepEqual([...families.keys()].sort(), [...KERNEL_NAMES].sort(), 'table.ts: every kernel\'s signature type is imported from its family file');
  const tables: Record<string, BackendKernels> = { cpu: cpuKernels, cuda: cudaKernels, webgpu: webgpuKernels };
  const wrong: string[] = [];
  for (const [name, table] of Object.entries(tables)) {
    const dir = join(root, 'backend', name, 'kernels');
    const files = readdirSync(dir).filter((f) => f.endsWith('.ts') && f !== 'index.ts');
    const defined = new Map<string, string>();
    for (const f of files) {
      const mod = await import(pathToFileURL(join(dirname(fileURLToPath(import.meta.url)), '../src/backend', name, 'kernels', f.replace(/\.ts$/, '.js'))).href) as { kernels?: BackendKernels };
      for (const k of Object.keys(mod.kernels ?? {})) {
        const family = families.get(k)!;
        const stem = basename(f, '.ts');
        // a family may split into helper files of its own (webgpu gemm_int.ts, gemm_smm.ts)
        if (stem !== family && !stem.startsWith(`${family}_`)) wrong.push(`${name}: '${k}' (contract in kernels/${family}.ts) is defined in kernels/${f}`);
        defined.set(k, f);
      }
    }
    for (const k of Object.keys(table)) {
      if (!defined.has(k)) wrong.push(`${name}: '${k}' is in the backend's kernel object but in no family file's \`kernels\``);
      const family = families.get(k)!;
      if (!files.includes(`${family}.ts`)) wrong.push(`${name}: implements '${k}' but has no kernels/${family}.ts`);
    }
  }
  // A family file takes its helpers from util.ts (or helper files such as cuda compaction.ts, its own
  // <family>_*.ts parts), never from another family; it may call another family's kernels (a fused
  // kernel reusing a plain one), i.e. functions listed in that family's `kernels` object.
  const familyNames = new Set(families.values());
  for (const e of importGraph().edges) {
    const m = /^backend\/(\w+)\/kernels\/(\w+)\.ts$/.exec(e.from.split(sep).join('/'));
    const t = /^backend\/(\w+)\/kernels\/(\w+)\.ts$/.exec(e.to.split(sep).join('/'));
    if (!m || !t || m[2] === 'index') continue;
    const from = m[2]!, to = t[2]!;
    if (!familyNames.has(to) || to === from || from.startsWith(`${to}_`) || to.startsWith(`${from}_`)) continue;
    const text = readFileSync(join(root, e.from), 'utf8');
    const target = await import(pathToFileURL(join(dirname(fileURLToPath(import.meta.url)), '../src', e.to.replace(/\.ts$/, '.js'))).href) as Record<string, unknown> & { kernels?: BackendKernels };
    const kernelFns = new Set<unknown>(Object.values(target.kernels ?? {}));
    for (const im of text.matchAll(new RegExp(`^\\s*(import|export)\\s+(type\\s+)?\\{([^}]*)\\}\\s*from\\s*'\\./${to}\\.js'`, 'gm'))) {
      if (im[2]) continue; // types only
      for (const spec of im[3]!.split(',').map((x) => x.trim()).filter((x) => x && !x.startsWith('type '))) {
        const name = spec.split(/\s+as\s+/)[0]!;
        if (!kernelFns.has(target[name])) wrong.push(`${e.from} imports '${name}' from the kernel family ${e.to} (helpers belong in util.ts)`);
      }
    }
    if (new RegExp(`^\\s*import\\s+\\*\\s+as\\s+\\w+\\s+from\\s*'\\./${to}\\.js'`, 'm').test(text)) wrong.push(`${e.from} imports the whole kernel family ${e.to}`);
  }
  assert.deepEqual(wrong, [], wrong.join('\n'));
});

it('reports, per backend, the kernels it implements natively, stages through the host, and lacks', () => {
  const cpu = Object.keys(cpuKernels) as KernelName[];
  const backends: [string, BackendKernels, boolean][] = [['cpu', cpuKernels, false], ['cuda', cudaKernels, true], ['webgpu', webgpuKernels, true]];
  for (const [name, table, staging] of backends) {
    for (const k of Object.keys(table)) assert.ok((KERNEL_NAMES as string[]).includes(k), `${name} exports '${k}', which is not in KernelTable`);
    const c = coverageOf(Object.keys(table) as KernelName[], staging, cpu);
    console.log(`${name.padEnd(6)} native (${c.native.length}): ${c.native.join(', ')}`);
    console.log(`${name.padEnd(6)} host-staged (${c.staged.length}): ${c.staged.join(', ') || 'none'}`);
    console.log(`${name.padEnd(6)} missing (${c.missing.length}): ${c.missing.join(', ') || 'none'}`);
  }
  // The CPU is the reference: every kernel but the optional fused attention and routed-expert GEMV
  // (their ops compose them from gemm, softmax and gathers there).
  assert.deepEqual(coverageOf(cpu, false, cpu).missing, ['attention', 'rotary_cache', 'gated_gemv', 'norm_gemv', 'expert_gemv', 'decode_step', 'moe_align', 'grouped_expert_gemm']);
});
