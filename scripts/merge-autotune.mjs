// Merges autotune cache files into a shipped file: node scripts/merge-autotune.mjs OUT BASE [MORE...]
// Entries of later files win per (device, kernel, key). Used after a device run to fold freshly
// measured configurations into src/autotune/shipped/<card>.json.
import { readFileSync, writeFileSync, existsSync } from 'node:fs';
const [out, ...inputs] = process.argv.slice(2);
if (!out || inputs.length === 0) { console.error('usage: merge-autotune.mjs OUT BASE [MORE...]'); process.exit(2); }
const merged = { format: 'nbxtensor-autotune', version: 1, entries: {} };
let added = 0;
for (const f of inputs) {
  if (!existsSync(f)) { console.error(`skip ${f} (missing)`); continue; }
  const d = JSON.parse(readFileSync(f, 'utf8'));
  for (const [dev, kernels] of Object.entries(d.entries ?? {})) {
    const md = (merged.entries[dev] ??= {});
    for (const [k, keys] of Object.entries(kernels)) {
      const mk = (md[k] ??= {});
      for (const [key, e] of Object.entries(keys)) { if (!(key in mk)) added++; mk[key] = e; }
    }
  }
}
writeFileSync(out, `${JSON.stringify(merged, null, 1)}\n`);
console.log(`${out}: ${added} entries`);
