// nbx.quant (issue #21): formats, quantizers, the quant_matmul / dequantize kernels against the
// definition (dequantize then linear), nn.Linear with a quantized weight, and a quantized tiny model's
// logits against the float model run on the dequantized weights.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import * as nbx from '../src/index.js';
import { Tensor } from '../src/tensor/tensor.js';
import { isResident, residentCopy } from '../src/quant/wasm_memory.js';
import { dequantizeBlocks } from '../src/io/gguf.js';
import { makeLayout } from '../src/quant/formats.js';
import { toFloat16Bits } from '../src/dtype/convert.js';
import type { QuantFormat, QuantizeOptions } from '../src/quant/index.js';

const q = nbx.quant;
const gen = (s = 3): nbx.Generator => new nbx.Generator().manual_seed(s);
const vals = (t: Tensor): number[] => t.flatten().to('float32').tolist() as number[];
function maxAbsDiff(a: Tensor, b: Tensor): number {
  const x = vals(a), y = vals(b);
  assert.equal(x.length, y.length);
  let m = 0;
  for (let i = 0; i < x.length; i++) m = Math.max(m, Math.abs(x[i]! - y[i]!));
  return m;
}
const maxAbs = (a: Tensor): number => Math.max(...vals(a).map(Math.abs));

const SCHEMES: [string, QuantizeOptions][] = [
  ['int8', { scheme: 'int8' }],
  ['int4 g32 sym', { scheme: 'int4', group_size: 32, symmetric: true }],
  ['int4 g64 asym', { scheme: 'int4', group_size: 64 }],
  ['int4 g128 asym', { scheme: 'int4', group_size: 128 }],
  ['fp8 per-channel', { scheme: 'fp8_e4m3' }],
  ['fp8 per-tensor', { scheme: 'fp8_e4m3', per_channel: false }],
];

/** Random GGUF blocks of `format` for a [n, k] weight (f16 scales kept small and finite). */
function randomGguf(format: string, n: number, k: number, seed: number): Uint8Array {
  const l = makeLayout('test', format as QuantFormat, n, k);
  const b = new Uint8Array(n * l.rowBytes);
  let s = seed;
  for (let i = 0; i < b.length; i++) { s = (s * 1103515245 + 12345) >>> 0; b[i] = s >>> 24; }
  // overwrite every f16 scale field with a sane value (random bits can be NaN/Inf)
  const dOffsets: Record<string, number[]> = {
    q8_0: [0], q4_0: [0], q4_1: [0, 2], q5_0: [0], q5_1: [0, 2], q2_k: [80, 82], q3_k: [108], q4_k: [0, 2], q5_k: [0, 2], q6_k: [208],
  };
  const bsz: Record<string, number> = { q8_0: 34, q4_0: 18, q4_1: 20, q5_0: 22, q5_1: 24, q2_k: 84, q3_k: 110, q4_k: 144, q5_k: 176, q6_k: 210 };
  for (let o = 0; o < b.length; o += bsz[format]!) {
    for (const d of dOffsets[format]!) { const h = toFloat16Bits(0.001 + ((o + d) % 97) / 9700); b[o + d] = h & 255; b[o + d + 1] = h >> 8; }
  }
  return b;
}

test('quantize → dequantize is close to the weight; quant_linear equals linear on the dequantized weight', () => {
  const w = nbx.randn([48, 256], { generator: gen() }).mul(0.05);
  const x = nbx.randn([3, 256], { generator: gen(4) });
  const x7 = nbx.randn([3, 7, 256], { generator: gen(5) }); // prefill route (m > 16)
  const bias = nbx.randn([48], { generator: gen(6) });
  for (const [name, opts] of SCHEMES) {
    const qt = q.quantize(w, opts);
    const dq = qt.dequantize();
    assert.deepEqual(dq.shape, [48, 256]);
    const err = maxAbsDiff(dq, w) / maxAbs(w);
    const bound = name.startsWith('int8') ? 0.01 : name.startsWith('fp8') ? 0.07 : 0.15;
    assert.ok(err < bound, `${name}: quantization error ${err}`);
    // quantize() puts the packed parts in the quant memory (SIMD kernels); a clone is a plain array (JavaScript loops)
    assert.ok(isResident(qt.qdata.storage.buf as Uint8Array), name);
    const plain = new q.QuantizedTensor({ qdata: qt.qdata.clone(), scales: qt.scales!.clone(), zeros: qt.zeros?.clone() ?? null, layout: qt.layout });
    assert.ok(!isResident(plain.qdata.storage.buf as Uint8Array));
    for (const w of [qt, plain]) {
      for (const [xi, b] of [[x, null], [x, bias], [x7, bias]] as [Tensor, Tensor | null][]) {
        const got = q.quant_linear(xi, w, b), want = nbx.nn.functional.linear(xi, dq, b);
        assert.deepEqual(got.shape, want.shape);
        const d = maxAbsDiff(got, want) / maxAbs(want);
        assert.ok(d < 2e-6, `${name} m=${xi.numel() / 256} ${w === qt ? 'simd' : 'js'}: quant_linear vs linear(dequantize) ${d}`);
      }
    }
  }
});

test('GGUF block formats: dequantize is src/io/gguf.ts\'s, quant_linear matches it (decode and prefill)', () => {
  const N = 8, K = 512;
  for (const f of ['q8_0', 'q4_0', 'q4_1', 'q5_0', 'q5_1', 'q2_k', 'q3_k', 'q4_k', 'q5_k', 'q6_k']) {
    const bytes = randomGguf(f, N, K, 11);
    const l = makeLayout('t', f as QuantFormat, N, K);
    const qt = new q.QuantizedTensor({ qdata: nbx.frombuffer(bytes, { dtype: 'uint8' }).view([N, l.rowBytes]), layout: l });
    const resident = new q.QuantizedTensor({ qdata: Tensor.fromStorage(residentCopy(bytes), 'uint8', [N, l.rowBytes]), layout: l });
    const dq = qt.dequantize();
    const ref = dequantizeBlocks(f.toUpperCase(), bytes, N * K);
    assert.deepEqual(Array.from(dq.flatten().tolist() as number[]), Array.from(ref), `${f}: dequantize`);
    for (const w of [qt, resident]) {
      for (const m of [1, 3, 9, 20]) {
        const x = nbx.randn([m, K], { generator: gen(m) });
        const d = maxAbsDiff(q.quant_linear(x, w), nbx.nn.functional.linear(x, dq)) / maxAbs(nbx.nn.functional.linear(x, dq));
        assert.ok(d < 2e-6, `${f} m=${m} ${w === qt ? 'js' : 'simd'}: ${d}`);
      }
    }
  }
});

test('bfloat16 activations: computed in float32, rounded once', () => {
  const w = nbx.randn([32, 128], { generator: gen() });
  const qt = q.quantize(w, { scheme: 'int4', group_size: 32 });
  const x = nbx.randn([2, 128], { generator: gen(9) }).to('bfloat16');
  const got = q.quant_linear(x, qt);
  assert.equal(got.dt, 'bfloat16');
  const want = nbx.nn.functional.linear(x.to('float32'), qt.dequantize('float32'));
  assert.ok(maxAbsDiff(got, want) / maxAbs(want) < 1e-2);
});

test('typed errors: shapes, dtypes, devices, layouts', () => {
  const w = nbx.randn([16, 64], { generator: gen() });
  assert.throws(() => q.quantize(w, { scheme: 'int4', group_size: 128 }), nbx.ShapeError);
  assert.throws(() => q.quantize(w, { scheme: 'int3' as never }), nbx.ValueError);
  assert.throws(() => q.quantize(w.view([4, 4, 64]), { scheme: 'int8' }), nbx.ShapeError);
  const qt = q.quantize(w, { scheme: 'int8' });
  assert.throws(() => q.quant_linear(nbx.randn([2, 63]), qt), nbx.ShapeError);
  assert.throws(() => q.quant_linear(nbx.ones([2, 64], { dtype: 'int32' }), qt), nbx.DTypeError);
  assert.throws(() => q.quant_linear(nbx.randn([2, 64], { dtype: 'float64' }), qt), /float32, bfloat16, float16/);
  assert.throws(() => new q.QuantizedTensor({ qdata: qt.qdata, scales: null, layout: qt.layout }), nbx.ShapeError);
  assert.equal(String(qt), 'QuantizedTensor(int8, shape=[16, 64], dtype=float32, device=cpu)');
  assert.equal(qt.nbytes, 16 * 64 + 16 * 4);
});

test('nn.Linear with a quantized weight: forward, state_dict, to(dtype) keeps scales float32', () => {
  const lin = new nbx.nn.Linear(128, 24);
  const w = lin.weight;
  const qt = q.quantize(w, { scheme: 'int4', group_size: 64 });
  const dq = qt.dequantize();
  lin.set_quantized_weight(qt);
  assert.equal(lin.is_quantized, true);
  assert.deepEqual(Object.keys(lin.state_dict()).sort(), ['bias', 'qweight', 'scales', 'zeros']);
  assert.deepEqual(lin.named_parameters().map(([n]) => n), ['bias']);
  const x = nbx.randn([5, 128], { generator: gen() });
  const want = nbx.nn.functional.linear(x, dq, lin.bias);
  assert.ok(maxAbsDiff(lin.forward(x), want) < 1e-5);
  assert.match(String(lin.extra_repr()), /quant=int4\(group=64\)/);
  lin.to('bfloat16');
  assert.equal(lin.bias!.dt, 'bfloat16');
  assert.equal(lin.state_dict().scales!.dt, 'float32');
  assert.equal(lin.state_dict().qweight!.dt, 'uint8');
  assert.equal(lin.forward(x.to('bfloat16')).dt, 'bfloat16');
  lin.dispose();
});

const TINY = {
  model_type: 'llama', architectures: ['LlamaForCausalLM'], hidden_size: 128, intermediate_size: 256, num_hidden_layers: 2,
  num_attention_heads: 4, num_key_value_heads: 2, vocab_size: 200, max_position_embeddings: 64, rms_norm_eps: 1e-5,
  tie_word_embeddings: false, hidden_act: 'silu',
};

test('a quantized tiny random model gives the logits of the float model run on the dequantized weights', async () => {
  const ids = nbx.tensor([[1, 5, 9, 77, 3, 150, 42]], { dtype: 'int64' });
  for (const [name, opts] of SCHEMES) {
    const m = nbx.models.fromConfig(TINY, { seed: 1, std: 0.05 });
    const ref = nbx.models.fromConfig(TINY, { seed: 1, std: 0.05 });
    const { quantized } = q.quantize_(m, opts);
    assert.equal(quantized.length, 2 * 7, name);
    // the reference: the same model with every quantized Linear's weight replaced by its dequantize()
    const sd: Record<string, Tensor> = {};
    for (const [n, mod] of m.named_modules()) {
      const l = mod as nbx.nn.Linear;
      if (l instanceof nbx.nn.Linear && l.is_quantized) sd[`${n}.weight`] = l.quantized_weight!.dequantize();
    }
    ref.load_state_dict(sd, { strict: false });
    const keys = Object.keys(m.state_dict()).sort();
    const a = m.forward(ids), b = ref.forward(ids);
    const d = maxAbsDiff(a, b) / maxAbs(b);
    assert.ok(d < 1e-5, `${name}: logits differ by ${d}`);
    // q/k/v and gate/up ran as one joined quantized weight each (the parts' buffers are views of it); names unchanged
    const attn = (m.get_submodule('model.layers.0.self_attn') as nbx.nn.Module)._member('_fused_qkv_qweight');
    assert.ok(!nbx.llm.fusion_enabled() || attn instanceof Tensor, `${name}: joined q/k/v`);
    assert.deepEqual(Object.keys(m.state_dict()).sort(), keys);
    // decode steps (one row: the GEMV kernels) give the float twin's greedy tokens
    const ga = (await m.generate(ids, { max_new_tokens: 8, do_sample: false })).tolist();
    const gb = (await ref.generate(ids, { max_new_tokens: 8, do_sample: false })).tolist();
    assert.deepEqual(ga, gb, `${name}: greedy tokens`);
    m.dispose(); ref.dispose();
  }
});

test('a quantized Linear whose packed parts are plain arrays (after to()) copies them once into the quant memory', () => {
  const lin = new nbx.nn.Linear(64, 32, { bias: false });
  const qt = q.quantize(lin.weight, { scheme: 'int8' });
  const plain = new q.QuantizedTensor({ qdata: qt.qdata.clone(), scales: qt.scales!.clone(), layout: qt.layout });
  lin.set_quantized_weight(plain);
  assert.ok(!isResident(lin.state_dict().qweight!.storage.buf as Uint8Array));
  const x = nbx.randn([1, 64], { generator: gen() });
  const y = lin.forward(x);
  assert.ok(isResident(lin.state_dict().qweight!.storage.buf as Uint8Array));
  assert.ok(isResident(lin.state_dict().scales!.storage.buf as Float32Array));
  assert.ok(maxAbsDiff(y, nbx.nn.functional.linear(x, qt.dequantize())) < 1e-5);
  lin.dispose();
});

test('up to 16 rows, each row of quant_linear is that row alone, bit for bit (batched decode = solo)', () => {
  const w = nbx.randn([40, 128], { generator: gen() });
  for (const opts of [{ scheme: 'int8' }, { scheme: 'int4', group_size: 32 }, { scheme: 'fp8_e4m3' }] as QuantizeOptions[]) {
    const qt = q.quantize(w, opts);
    const x = nbx.randn([16, 128], { generator: gen(2) });
    const all = q.quant_linear(x, qt).tolist() as number[][];
    for (const i of [0, 5, 15]) assert.deepEqual(all[i], (q.quant_linear(x.slice(0, i, i + 1), qt).tolist() as number[][])[0], `${opts.scheme} row ${i}`);
  }
});
