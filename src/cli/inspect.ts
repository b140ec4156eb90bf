// `nbx inspect FILE|DIR`: the tensors of a safetensors file, a sharded index, or every file of a folder.

import { statSync, readdirSync } from 'node:fs';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { SafetensorsFile, openSharded } from '../io/safetensors.js';
import { GgufFile, type GgufValue } from '../io/gguf.js';
import { fileErrorOf } from '../errors.js';
import { formatBytes as fmtBytes } from '../memory/caching_allocator.js';

export async function inspect(args: string[]): Promise<number> {
  // strict: an unknown flag is an error (exit 2 with the usage), never ignored
  const { positionals } = parseArgs({ args, allowPositionals: true, strict: true, options: {} });
  const target = positionals[0];
  if (!target) { process.stderr.write('nbx inspect: give a .safetensors file, a model.safetensors.index.json, or a folder\n'); return 2; }
  if (positionals.length > 1) { process.stderr.write(`nbx inspect: one path at a time (got ${positionals.length})\n`); return 2; }
  if (target.endsWith('.gguf')) return inspectGguf(target);
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
  printTable(['name', 'dtype', 'shape', 'bytes', files.length > 1 ? 'file' : ''], rows);
  process.stdout.write(`\n${count} tensors, ${fmtBytes(total)} in ${files.length} file(s); by dtype: ${[...byDtype].map(([d, b]) => `${d} ${fmtBytes(b)}`).join(', ')}\n`);
  return 0;
}

/** A column-aligned table on stdout (widths by loops: a file may hold millions of tensors). */
function printTable(head: string[], rows: string[][]): void {
  const w = head.map((h) => h.length);
  for (const r of rows) for (let i = 0; i < r.length; i++) if (r[i]!.length > w[i]!) w[i] = r[i]!.length;
  const line = (r: string[]): string => r.map((c, i) => c.padEnd(w[i]!)).join('  ').trimEnd();
  const out: string[] = [line(head), line(w.map((n) => '-'.repeat(n)))];
  const flush = (): void => { process.stdout.write(`${out.join('\n')}\n`); out.length = 0; };
  for (const r of rows) { out.push(line(r)); if (out.length >= 10000) flush(); }
  flush();
}

/** A GGUF file: its metadata (long arrays summarized) and tensor table. */
async function inspectGguf(path: string): Promise<number> {
  const f = await GgufFile.open(path);
  try {
    const show = (v: GgufValue): string => {
      if (Array.isArray(v)) return v.length > 8 ? `[${v.slice(0, 4).map(show).join(', ')}, ... ${v.length} items]` : `[${v.map(show).join(', ')}]`;
      if (typeof v === 'string') return JSON.stringify(v.length > 120 ? `${v.slice(0, 117)}...` : v);
      return String(v);
    };
    process.stdout.write(`GGUF v${f.version}, ${f.metadata.size} metadata entries, ${f.tensors.size} tensors, alignment ${f.alignment}, data at byte ${f.dataOffset}\n\n`);
    printTable(['key', 'value'], [...f.metadata].map(([k, v]) => [k, show(v)]));
    process.stdout.write('\n');
    const rows: string[][] = [];
    const byType = new Map<string, number>();
    let total = 0;
    for (const t of f.tensors.values()) {
      rows.push([t.name, t.typeName, `[${t.shape.join(', ')}]`, fmtBytes(t.byteLength)]);
      total += t.byteLength;
      byType.set(t.typeName, (byType.get(t.typeName) ?? 0) + t.byteLength);
    }
    printTable(['name', 'type', 'shape', 'bytes'], rows);
    process.stdout.write(`\n${f.tensors.size} tensors, ${fmtBytes(total)}; by type: ${[...byType].map(([d, b]) => `${d} ${fmtBytes(b)}`).join(', ')}\n`);
  } finally { await f.close(); }
  return 0;
}
