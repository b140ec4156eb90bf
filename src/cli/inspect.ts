// `nbx inspect FILE|DIR`: the tensors of a safetensors file, a sharded index, or every file of a folder.

import { statSync, readdirSync } from 'node:fs';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { SafetensorsFile, openSharded } from '../io/safetensors.js';
import { fileErrorOf } from '../errors.js';
import { formatBytes as fmtBytes } from '../memory/caching_allocator.js';

export async function inspect(args: string[]): Promise<number> {
  // strict: an unknown flag is an error (exit 2 with the usage), never ignored
  const { positionals } = parseArgs({ args, allowPositionals: true, strict: true, options: {} });
  const target = positionals[0];
  if (!target) { process.stderr.write('nbx inspect: give a .safetensors file, a model.safetensors.index.json, or a folder\n'); return 2; }
  if (positionals.length > 1) { process.stderr.write(`nbx inspect: one path at a time (got ${positionals.length})\n`); return 2; }
  let files: SafetensorsFile[];
  let isDir: boolean;
  try { isDir = statSync(target).isDirectory(); } catch (e) { throw fileErrorOf('inspect', target, e); }
  if (isDir) {
    const names = readdirSync(target);
    const idx = names.find((f) => f.endsWith('.safetensors.index.json'));
    const plain = names.filter((f) => f.endsWith('.safetensors')).sort();
    if (!idx && plain.length === 0) { process.stderr.write(`nbx inspect: ${target} holds no .safetensors file or index\n`); return 1; }
    files = idx ? (await openSharded(join(target, idx))).files : await Promise.all(plain.map((f) => SafetensorsFile.open(join(target, f))));
  } else if (target.endsWith('.json')) files = (await openSharded(target)).files;
  else files = [await SafetensorsFile.open(target)];
  const rows: string[][] = [];
  let total = 0, count = 0;
  const byDtype = new Map<string, number>();
  for (const f of files) {
    for (const [name, e] of f.entries) {
      rows.push([name, e.dtype, `[${e.shape.join(', ')}]`, fmtBytes(e.byteLength), files.length > 1 ? f.path.split('/').pop()! : '']);
      total += e.byteLength; count++;
      byDtype.set(e.dtype, (byDtype.get(e.dtype) ?? 0) + e.byteLength);
    }
    await f.close();
  }
  const head = ['name', 'dtype', 'shape', 'bytes', files.length > 1 ? 'file' : ''];
  // column widths by loops: a file may hold millions of tensors (no spreading rows into arguments)
  const w = head.map((h) => h.length);
  for (const r of rows) for (let i = 0; i < r.length; i++) if (r[i]!.length > w[i]!) w[i] = r[i]!.length;
  const line = (r: string[]): string => r.map((c, i) => c.padEnd(w[i]!)).join('  ').trimEnd();
  const out: string[] = [line(head), line(w.map((n) => '-'.repeat(n)))];
  const flush = (): void => { process.stdout.write(`${out.join('\n')}\n`); out.length = 0; };
  for (const r of rows) { out.push(line(r)); if (out.length >= 10000) flush(); }
  flush();
  process.stdout.write(`\n${count} tensors, ${fmtBytes(total)} in ${files.length} file(s); by dtype: ${[...byDtype].map(([d, b]) => `${d} ${fmtBytes(b)}`).join(', ')}\n`);
  return 0;
}
