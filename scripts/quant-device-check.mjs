#!/usr/bin/env node
// Quantized models on a GPU device (issue #21, quant-core's loading side): every quantized checkpoint
// kind loads on DEVICE with QuantizedTensor Linear weights and gives the CPU's logits (float32: within
// accumulation order; bfloat16: within its rounding) and, in float32, the CPU's greedy tokens.
//   npm run build && node scripts/quant-device-check.mjs [cuda|webgpu]     (exit 1 on a failure)
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, dirname } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
const nbx = await import(join(root, 'dist/src/index.js'));
const { quantizeFolder } = await import(join(root, 'dist/src/cli/quantize.js'));
const device = process.argv[2] ?? 'cuda';
const tmp = mkdtempSync(join(tmpdir(), 'nbx-qdev-'));
let failed = 0;
const t0 = performance.now();
async function check(label, path, ids, { dtypes = ['float32', 'bfloat16'], tokens = true } = {}) {
  try {
    const cpu = await nbx.models.load(path, { device: 'cpu', dtype: 'float32' });
    const want = cpu.forward(ids);
    const scale = Number(want.abs().max().item());
    const wantIds = tokens ? (await cpu.generate(ids, { max_new_tokens: 12, do_sample: false })).tolist() : null;
    for (const dtype of dtypes) {
      const m = await nbx.models.load(path, { device, dtype });
      const lins = m.named_modules().filter(([, l]) => l instanceof nbx.nn.Linear);
      const packed = lins.filter(([, l]) => l.is_quantized).map(([, l]) => l.quantized_weight.format);
      const got = (await m.forward(ids.to(device)).to('float32').cpu());
      const err = Number(got.sub(want).abs().max().item()) / scale;
      const tol = dtype === 'float32' ? 1e-4 : 0.1; // bfloat16 activations round every layer's output
      let same = '';
      if (tokens && dtype === 'float32') {
        const g = (await (await m.generate(ids.to(device), { max_new_tokens: 12, do_sample: false })).cpu()).tolist();
        same = JSON.stringify(g) === JSON.stringify(wantIds) ? ', greedy ids = cpu' : ', greedy ids DIFFER';
        if (!same.includes('= cpu')) failed++;
      }
      const ok = err < tol;
      if (!ok) failed++;
      console.log(`${ok ? 'ok  ' : 'FAIL'} ${label} ${dtype}: ${packed.length}/${lins.length} Linears packed (${[...new Set(packed)].join(',') || 'none'}), rel logit err ${err.toExponential(1)} (tol ${tol})${same}`);
      m.dispose();
    }
    cpu.dispose();
  } catch (e) { failed++; console.log(`FAIL ${label}: ${e.constructor.name}: ${String(e.message).slice(0, 300)}`); }
}
const kjvIds = nbx.tensor([[0, 1437, 327, 1110, 14, 99, 2048, 7]], { dtype: 'int64' });
const fixIds = nbx.tensor([[0, 3, 17, 30, 5, 9, 22]], { dtype: 'int64' });
for (const scheme of ['int8', 'int4-g64', 'int4-g128', 'fp8']) {
  const out = join(tmp, scheme);
  await quantizeFolder(join(root, 'assets/nbx-kjv'), out, scheme);
  await check(`nbx-kjv ${scheme}`, out, kjvIds);
}
for (const kind of ['awq', 'gptq', 'fp8']) await check(`fixture ${kind}`, join(root, 'test/fixtures/quant', kind), fixIds, { tokens: false });
await check('gguf llama-q8_0', join(root, 'test/fixtures/gguf/llama-q8_0.gguf'), nbx.tensor([[1, 17, 42, 99, 5, 63]], { dtype: 'int64' }), { tokens: false });
rmSync(tmp, { recursive: true, force: true });
console.log(`${failed ? 'FAILED' : 'PASS'}: ${failed} failure(s); ${((performance.now() - t0) / 1000).toFixed(1)} s on ${device}`);
process.exit(failed ? 1 : 0);
