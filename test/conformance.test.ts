// The public conformance suite (computed by PyTorch 2.11) on every device this machine has.
// CPU always runs; CUDA and WebGPU run where present and otherwise skip with a message saying so.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { runSuite } from '../src/conformance/runner.js';

const candidates = [process.env.NBX_CONFORMANCE_DIR, 'test/conformance', '../shared/conformance/public', '.gpu/conformance']
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

// The same suite on the GPU backends present here: CUDA where a driver and device exist, WebGPU where
// an adapter comes up (in CI: Dawn on Mesa's llvmpipe through OpenGL ES). Skips are only the
// documented device limits (WebGPU: float64, int64, synchronous readback).
const { probeCuda } = await import('../src/backend/cuda/runtime/libs.js');
const cudaProbe = probeCuda();
test('public conformance suite on cuda', { skip: !dir ? 'no suite' : cudaProbe.available ? false : `no CUDA device (${cudaProbe.reason}): cuda conformance not run` }, async () => {
  const res = await runSuite(dir!, { device: 'cuda' });
  for (const f of res.results.filter((r) => r.status === 'fail').slice(0, 40)) console.log(`FAIL ${f.id}: ${f.message}`);
  console.log(`cuda: ${res.passed} passed, ${res.failed} failed, ${res.skipped} skipped`);
  assert.equal(res.failed, 0);
});

const { probeWebGPU } = await import('../src/backend/webgpu/runtime/probe.js');
const gpuProbe = await probeWebGPU();
test('public conformance suite on webgpu', { skip: !dir ? 'no suite' : gpuProbe.available ? false : `no WebGPU adapter (${gpuProbe.reason}): webgpu conformance not run` }, async () => {
  const res = await runSuite(dir!, { device: 'webgpu' });
  for (const f of res.results.filter((r) => r.status === 'fail').slice(0, 40)) console.log(`FAIL ${f.id}: ${f.message}`);
  console.log(`webgpu: ${res.passed} passed, ${res.failed} failed, ${res.skipped} skipped`);
  assert.equal(res.failed, 0);
});
