// The public conformance suite (computed by PyTorch 2.11) on every device this machine has.
// CPU always runs; CUDA and WebGPU run where present and otherwise skip with a message saying so.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { runSuite } from '../src/conformance/runner.js';

const candidates = [process.env.NBX_CONFORMANCE_DIR, '../shared/conformance/public', '.gpu/conformance', 'test/conformance']
  .filter((d): d is string => !!d);
const dir = candidates.find((d) => existsSync(d));
void fileURLToPath;

test('public conformance suite on cpu', { skip: dir ? false : `no conformance suite found (looked in ${candidates.join(', ')}); set NBX_CONFORMANCE_DIR` }, async () => {
  const res = await runSuite(dir!, { device: 'cpu' });
  const failed = res.results.filter((r) => r.status === 'fail');
  for (const f of failed.slice(0, 40)) console.log(`FAIL ${f.id}: ${f.message}`);
  console.log(`cpu: ${res.passed} passed, ${res.failed} failed, ${res.skipped} skipped`);
  assert.equal(res.failed, 0, `${res.failed} conformance cases failed on cpu`);
});
