// The seeded quick run of the property-based operation fuzzer (test/fuzz/ops_fuzz.ts): operations
// drawn from the registry with valid and invalid arguments on the CPU and, where an adapter comes up,
// WebGPU. Every call must give a readable result or an NbxError; WebGPU results must equal the CPU's.
// Long runs: `node scripts/fuzz-ops.mjs --runs 100000`. fast-check is a development dependency: where
// only production dependencies are installed this test is skipped, saying so.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import * as nbx from '../src/index.js';
import { fuzzOps, loadFastCheck } from './fuzz/ops_fuzz.js';

const fc = await loadFastCheck();
const probe = await nbx.webgpu.probe();
const skip = typeof fc === 'string' ? `${fc}: the property-based fuzz tests were NOT RUN` : false;
if (skip) process.stdout.write(`# reliability_fuzz: ${skip}\n`);
if (!skip && !probe.available) process.stdout.write(`# reliability_fuzz: webgpu part NOT RUN: no WebGPU adapter (${probe.reason})\n`);

const devices = probe.available ? ['cpu', 'webgpu'] : ['cpu'];

for (const seed of [17, 4242]) {
  test(`fuzz the op registry (seed ${seed}, ${devices.join(' + ')}): a result or an NbxError, never anything else`, { skip, timeout: 120_000 }, async () => {
    const report = await fuzzOps(fc as Exclude<typeof fc, string>, { seed, numRuns: 2500, devices, timeLimitSeconds: 25 });
    for (const f of report.failures.slice(0, 20)) console.log(`FAIL [${f.kind}] ${f.message}\n    ${f.repro}`);
    console.log(`seed ${seed}: ${report.cases} cases, ${report.calls} calls in ${report.seconds.toFixed(1)} s: ${report.ok} ok, ${report.typedErrors} typed errors, ${report.deviceLimits} device limits, ${report.compared} compared with the cpu`);
    assert.ok(report.cases >= 500, `only ${report.cases} cases ran`);
    assert.ok(report.ok >= report.cases / 10, `too few valid calls (${report.ok}) to test results`);
    assert.equal(report.failures.length, 0, `${report.failures.length} failures`);
    assert.deepEqual(nbx.add(nbx.ones([2]), 1).tolist(), [2, 2], 'the engine still works afterwards');
  });
}
