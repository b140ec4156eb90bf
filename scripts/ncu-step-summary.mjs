#!/usr/bin/env node
// The last decode step's kernels from an Nsight Compute CSV of scripts/decode-kernels.mjs, grouped by kernel name:
//   ncu --metrics gpu__time_duration.sum --csv node scripts/decode-kernels.mjs --shape tinyllama --batch 8 --steps 2 > k.csv
//   node scripts/ncu-step-summary.mjs k.csv [--steps 2]
// decode-kernels.mjs runs the prompt, then --steps eager steps with the same kernels each; the last step is the
// last 1/steps of the launches after the prompt, found as the longest repeating tail (the steps' kernel sequences
// are identical). Prints each kernel name's count and total µs in that step, largest first, and the step's sum.
import { readFileSync } from 'node:fs';
import { parseArgs } from 'node:util';

const { values, positionals } = parseArgs({ allowPositionals: true, options: { steps: { type: 'string', default: '2' } } });
if (positionals.length !== 1) { console.error('usage: node scripts/ncu-step-summary.mjs FILE.csv [--steps N]'); process.exit(2); }
const steps = Number(values.steps);

/** The CSV rows (quoted fields) of ncu's --csv output, from its header line on. */
function rows(text) {
  const lines = text.split('\n');
  const h = lines.findIndex((l) => l.startsWith('"ID"'));
  if (h < 0) throw new Error('no ncu CSV header ("ID",...) in the file');
  const parse = (l) => [...l.matchAll(/"((?:[^"]|"")*)"/g)].map((m) => m[1].replace(/""/g, '"'));
  const head = parse(lines[h]);
  return lines.slice(h + 1).filter((l) => l.startsWith('"')).map((l) => Object.fromEntries(parse(l).map((v, i) => [head[i], v])));
}

const all = rows(readFileSync(positionals[0], 'utf8')).filter((r) => r['Metric Name'] === 'gpu__time_duration.sum');
const launches = all.map((r) => ({ name: (r['Kernel Name'] ?? '').replace(/\(.*$/, ''), ns: Number(String(r['Metric Value']).replace(/,/g, '')) * (r['Metric Unit'] === 'usecond' ? 1e3 : r['Metric Unit'] === 'msecond' ? 1e6 : 1) }));
// the step's length: the largest n with the last `steps` runs of n launches having the same names
let n = 0;
for (let k = Math.floor(launches.length / steps); k > 0; k--) {
  const tail = launches.slice(-k * steps).map((l) => l.name);
  if (tail.every((v, i) => v === tail[i % k])) { n = k; break; }
}
if (n === 0) throw new Error('no repeating tail of launches: were the steps eager and alike?');
const step = launches.slice(-n);
const by = new Map();
for (const l of step) { const x = by.get(l.name) ?? { count: 0, ns: 0 }; x.count++; x.ns += l.ns; by.set(l.name, x); }
const total = step.reduce((a, l) => a + l.ns, 0);
console.log(`last step: ${n} launches, ${(total / 1e3).toFixed(1)} µs of kernel time`);
for (const [name, x] of [...by].sort((a, b) => b[1].ns - a[1].ns)) {
  console.log(`${(x.ns / 1e3).toFixed(1).padStart(9)} µs ${(100 * x.ns / total).toFixed(1).padStart(5)}% ${String(x.count).padStart(4)}×  ${name}`);
}
