// `nbx inspect FILE|DIR`: the tensors of a safetensors file, a sharded index, or every file of a folder.

import { statSync, readdirSync } from 'node:fs';
import { join } from 'node:path';
import { SafetensorsFile, openSharded } from '../io/safetensors.js';
import { formatBytes as fmtBytes } from '../memory/caching_allocator.js';

export async function inspect(args: string[]): Promise<number> {
  const target = args[0];
  if (!target) { process.stderr.write('nbx inspect: give a .safetensors file, a model.safetensors.index.json, or a folder\n'); return 2; }
  let files: SafetensorsFile[];
  if (statSync(target).isDirectory()) {
    const idx = readdirSync(target).find((f) => f.endsWith('.safetensors.index.json'));
    files = idx ? (await openSharded(join(target, idx))).files
      : await Promise.all(readdirSync(target).filter((f) => f.endsWith('.safetensors')).sort().map((f) => SafetensorsFile.open(join(target, f))));
  } else if (target.endsWith('.json')) files = (await openSharded(target)).files;
  else files = [await SafetensorsFile.open(target)];
  const rows: string[][] = [];
  let total = 0, count = 0;
  const byDtype = new Map<string, number>();
  for (const f of files) {
    for (const name of f.names()) {
      const e = f.entries.get(name)!;
      rows.push([name, e.dtype, `[${e.shape.join(', ')}]`, fmtBytes(e.byteLength), files.length > 1 ? f.path.split('/').pop()! : '']);
      total += e.byteLength; count++;
      byDtype.set(e.dtype, (byDtype.get(e.dtype) ?? 0) + e.byteLength);
    }
    await f.close();
  }
  const head = ['name', 'dtype', 'shape', 'bytes', files.length > 1 ? 'file' : ''];
  const w = head.map((h, i) => Math.max(h.length, ...rows.map((r) => r[i]!.length)));
  const line = (r: string[]): string => r.map((c, i) => c.padEnd(w[i]!)).join('  ').trimEnd();
  process.stdout.write(`${line(head)}\n${line(w.map((n) => '-'.repeat(n)))}\n${rows.map(line).join('\n')}\n`);
  process.stdout.write(`\n${count} tensors, ${fmtBytes(total)} in ${files.length} file(s); by dtype: ${[...byDtype].map(([d, b]) => `${d} ${fmtBytes(b)}`).join(', ')}\n`);
  return 0;
}
