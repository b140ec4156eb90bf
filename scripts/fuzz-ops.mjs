#!/usr/bin/env node
// Long property-based fuzzing run over the operation registry (test/fuzz/ops_fuzz.ts; build first with
// `npm run build`). Every case: a correct result or an NbxError, never another exception, crash or
// hang; non-CPU devices are compared with the CPU.
//
//   node scripts/fuzz-ops.mjs [--runs N] [--seed S] [--devices cpu,webgpu] [--ops add,sum] [--minutes M] [--json FILE] [--errors] [--trace]
//
// --errors lists the typed errors by kind (what the drawn arguments got wrong), --trace every case.
//
// The case being run is written to stderr before it starts (with --trace), so a crash or a hang names it.
// Exit status 1 when any failure was found.
import { parseArgs } from 'node:util';
import { writeFileSync } from 'node:fs';

const { values } = parseArgs({ options: {
  runs: { type: 'string', default: '5000' }, seed: { type: 'string' }, devices: { type: 'string' }, ops: { type: 'string' },
  minutes: { type: 'string' }, json: { type: 'string' }, trace: { type: 'boolean', default: false }, errors: { type: 'boolean', default: false },
} });
const { fuzzOps, loadFastCheck, describeCase } = await import('../dist/test/fuzz/ops_fuzz.js');
const nbx = await import('../dist/src/index.js');
const fc = await loadFastCheck();
if (typeof fc === 'string') { console.error(`fuzz-ops: ${fc}; run npm install (dev dependencies)`); process.exit(2); }
let devices = values.devices?.split(',');
if (!devices) {
  devices = ['cpu'];
  if ((await nbx.webgpu.probe()).available) devices.push('webgpu');
  try { if ((await import('../dist/src/backend/cuda/runtime/libs.js')).probeCuda().available) devices.push('cuda'); } catch { /* no cuda */ }
}
const seed = values.seed !== undefined ? Number(values.seed) : Date.now() % 2 ** 31;
const numRuns = Number(values.runs);
console.log(`fuzz-ops: seed ${seed}, ${numRuns} cases, devices ${devices.join(', ')}`);
const report = await fuzzOps(fc, {
  seed, numRuns, devices, ops: values.ops?.split(','), timeLimitSeconds: values.minutes ? Number(values.minutes) * 60 : undefined,
  onProgress: (n, c) => {
    if (values.trace) process.stderr.write(`[${n}] ${describeCase(c)}\n`);
    else if (n % 500 === 0) process.stderr.write(`  ${n} cases\n`);
  },
});
// the engine must still work after all of it
const sane = nbx.add(nbx.ones([3]), 1).tolist();
const byKey = new Map();
for (const f of report.failures) {
  const key = `${f.kind} ${f.op} ${f.device} ${f.message.replace(/[-\d.e]+/g, 'N').slice(0, 80)}`;
  if (!byKey.has(key)) byKey.set(key, { ...f, count: 0 });
  byKey.get(key).count++;
}
if (values.errors) {
  console.log('typed errors by kind (most frequent first):');
  for (const [k, n] of [...report.errorKinds].sort((a, b) => b[1] - a[1]).slice(0, 40)) console.log(`  ${String(n).padStart(5)}  ${k}`);
}
for (const f of byKey.values()) console.log(`FAIL x${f.count} [${f.kind}] ${f.op} on ${f.device}: ${f.message}\n    ${f.repro}`);
console.log(`\n${report.cases} cases, ${report.calls} calls in ${report.seconds.toFixed(1)} s: ${report.ok} ok, ${report.typedErrors} typed errors, ` +
  `${report.deviceLimits} device limits, ${report.compared} compared with the cpu; ${report.failures.length} failures (${byKey.size} distinct); ` +
  `engine still working: ${JSON.stringify(sane) === '[2,2,2]'}`);
if (values.json) writeFileSync(values.json, JSON.stringify({ seed, devices, ...report, errorKinds: Object.fromEntries(report.errorKinds), distinct: [...byKey.values()] }, null, 1));
process.exitCode = report.failures.length ? 1 : 0;
