#!/usr/bin/env node
// Per kernel launch of an Nsight Compute raw CSV (ncu --page raw --csv with the WarpStateStats / SchedulerStats /
// Occupancy / SpeedOfLight sections): duration, DRAM throughput, warps per scheduler (active, eligible, issued),
// and the warp stall reasons (cycles per issued instruction), largest first.
//   node scripts/ncu-stall-summary.mjs stalls.csv [--labels FILE]   (FILE: one label a line, in launch order)
import { readFileSync } from 'node:fs';
import { parseArgs } from 'node:util';

const { values, positionals } = parseArgs({ allowPositionals: true, options: { labels: { type: 'string' } } });
const text = readFileSync(positionals[0], 'utf8');
const parse = (l) => [...l.matchAll(/"((?:[^"]|"")*)"/g)].map((m) => m[1].replace(/""/g, '"'));
const lines = text.split('\n').filter((l) => l.startsWith('"'));
const h = lines.findIndex((l) => l.startsWith('"ID"'));
if (h < 0) { console.log('no ncu raw CSV header ("ID",...)'); process.exit(0); }
const head = parse(lines[h]);
const rows = lines.slice(h + 2).map((l) => Object.fromEntries(parse(l).map((v, i) => [head[i], v]))); // h + 1: units
const labels = values.labels ? readFileSync(values.labels, 'utf8').split('\n').filter(Boolean) : [];
const num = (r, k) => Number(String(r[k] ?? 'NaN').replace(/,/g, ''));
const pick = (r, re) => Object.keys(r).find((k) => re.test(k));
rows.forEach((r, i) => {
  const f = (re, d = 2) => { const k = pick(r, re); return k ? num(r, k).toFixed(d) : '?'; };
  console.log(`${labels[i] ?? `launch ${i}`}: ${r['Kernel Name']?.replace(/\(.*$/, '')} ${f(/^gpu__time_duration\.sum$/, 0)} ns, DRAM ${f(/^gpu__dram_throughput\.avg\.pct_of_peak_sustained_elapsed$/, 1)}%, `
    + `warps/scheduler active ${f(/^smsp__warps_active\.avg\.per_cycle_active$/)}, eligible ${f(/^smsp__warps_eligible\.avg\.per_cycle_active$/)}, issued ${f(/^smsp__issue_active\.avg\.per_cycle_active$/)}, `
    + `registers ${f(/^launch__registers_per_thread$/, 0)}, achieved occupancy ${f(/^sm__warps_active\.avg\.pct_of_peak_sustained_active$/, 1)}%`);
  const st = Object.keys(r).filter((k) => /^smsp__average_warps_issue_stalled_(.*)_per_issue_active\.ratio$/.test(k))
    .map((k) => [k.replace(/^smsp__average_warps_issue_stalled_|_per_issue_active\.ratio$/g, ''), num(r, k)]).filter(([, v]) => v > 0.05).sort((a, b) => b[1] - a[1]);
  console.log(`  stalls (cycles per issued instruction): ${st.map(([k, v]) => `${k} ${v.toFixed(2)}`).join(', ') || '(none in the CSV)'}`);
});
