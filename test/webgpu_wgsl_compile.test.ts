// The WebGPU decode kernels' WGSL compiled by Dawn's null backend, with and without subgroups: the
// subgroup variants run only on adapters with 32-wide subgroups (not the local software adapter), so
// this is where their source is checked off the card. In a file of its own: a second Dawn instance in a
// process whose backend already made one aborts.
import { test } from 'node:test';
import assert from 'node:assert/strict';

/** Held for the whole test: Dawn's instance must outlive its adapter and device. */
let nullGpu: GPU | undefined;

test('the matrix-vector and 16-byte-word attention kernels compile with and without subgroups (Dawn null backend)', async (t) => {
  let dev: GPUDevice | undefined;
  try {
    const { create } = await import('webgpu' as string) as { create(flags: string[]): GPU };
    nullGpu = create(['backend=null']);
    const a = await nullGpu.requestAdapter();
    if (a?.features.has('subgroups' as GPUFeatureName)) dev = await a.requestDevice({ requiredFeatures: ['subgroups'] as GPUFeatureName[] });
  } catch { /* no Dawn here */ }
  if (!dev) { t.skip('Dawn null backend with subgroups not available'); return; }
  const { allGemvSources } = await import('../src/backend/webgpu/kernels/gemv.js');
  const { allDecodeAttentionSources } = await import('../src/backend/webgpu/kernels/llm.js');
  const { gatedActivationExpr } = await import('../src/ops/llm.js');
  for (const sub of [true, false]) {
    const sources = [...allGemvSources(sub, (d) => gatedActivationExpr('silu', d)), ...allDecodeAttentionSources(sub)];
    assert.ok(sources.length > 100);
    for (const { key, code } of sources) {
      const info = await dev.createShaderModule({ code }).getCompilationInfo();
      const msgs = info.messages.filter((m) => m.type === 'error').map((m) => `${m.lineNum}:${m.linePos} ${m.message}`);
      assert.deepEqual(msgs, [], key);
    }
  }
  dev.destroy();
});
