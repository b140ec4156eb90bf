// nbx.llm's fused operations against their composites (the operations' definitions), and the models'
// fused paths against their unfused ones (nbx.llm.set_fusion(false)) on every model fixture family and
// on the embedded model.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync, readdirSync } from 'node:fs';
import { join } from 'node:path';
import * as nbx from '../src/index.js';
import type { Tensor } from '../src/tensor/tensor.js';
import { addRmsNormComposite, rotaryComposite } from '../src/ops/llm.js';
import { greedy, maxRelErr } from './models_util.js';

const g = (): nbx.Generator => new nbx.Generator().manual_seed(7);
const same = (a: Tensor, b: Tensor, what: string): void => {
  assert.deepEqual(a.shape, b.shape, `${what}: shape`);
  assert.equal(a.dt, b.dt, `${what}: dtype`);
  assert.deepEqual(a.flatten().tolist(), b.flatten().tolist(), `${what}: values`);
};
/** Runs fn with the fused paths switched on or off, restoring the setting. */
function withFusion<T>(on: boolean, fn: () => T): T {
  const was = nbx.llm.set_fusion(on);
  try { return fn(); } finally { nbx.llm.set_fusion(was); }
}

test('llm.fused_add_rms_norm: the CPU kernel equals the composite bit for bit (float32, float64; with and without weight)', () => {
  for (const dtype of ['float32', 'float64'] as const) {
    for (const shape of [[1, 1, 256], [3, 5, 48], [7]]) {
      const n = shape[shape.length - 1]!;
      const x = nbx.randn(shape, { generator: g(), dtype }), r = nbx.randn(shape, { generator: g(), dtype }).mul(3);
      const w = nbx.rand([n], { generator: g(), dtype }).add(0.5);
      for (const weight of [w, null]) {
        const [out, res] = nbx.llm.fused_add_rms_norm(x, r, weight, 1e-5) as [Tensor, Tensor];
        const [cOut, cRes] = addRmsNormComposite(x, r, weight, 1e-5);
        same(res, cRes, `${dtype} ${shape} residual`);
        same(out, cOut, `${dtype} ${shape} out`);
        same(res, x.add(r), 'residual = input + residual');
        same(out, nbx.nn.functional.rms_norm(x.add(r), [n], weight, 1e-5), 'out = rms_norm(input + residual)');
      }
    }
  }
  // non-contiguous inputs, default eps, half types (the composite runs)
  const x = nbx.randn([4, 6], { generator: g() }).t(), r = nbx.randn([6, 4], { generator: g() });
  const [o1, s1] = nbx.llm.fused_add_rms_norm(x, r) as [Tensor, Tensor];
  const [o2, s2] = addRmsNormComposite(x, r, null, 1.1920928955078125e-7);
  same(o1, o2, 'strided out'); same(s1, s2, 'strided residual');
  const xb = nbx.randn([2, 8], { generator: g() }).to('bfloat16'), rb = nbx.randn([2, 8], { generator: g() }).to('bfloat16');
  const [ob, sb] = nbx.llm.fused_add_rms_norm(xb, rb, nbx.ones([8], { dtype: 'bfloat16' })) as [Tensor, Tensor];
  same(sb, xb.add(rb), 'bf16 residual');
  same(ob, nbx.nn.functional.rms_norm(xb.add(rb), [8], nbx.ones([8], { dtype: 'bfloat16' })), 'bf16 out');
});

test('llm.fused_add_rms_norm: typed errors', () => {
  const x = nbx.zeros([2, 4]);
  assert.throws(() => nbx.llm.fused_add_rms_norm(x, nbx.zeros([2, 5])), (e: Error) => e.name === 'ShapeError' && /same shape/.test(e.message));
  assert.throws(() => nbx.llm.fused_add_rms_norm(x, nbx.zeros([2, 4], { dtype: 'float64' })), (e: Error) => e.name === 'DTypeError');
  assert.throws(() => nbx.llm.fused_add_rms_norm(x, x, nbx.ones([3])), (e: Error) => e.name === 'ShapeError' && /weight must be \[4\]/.test(e.message));
  assert.throws(() => nbx.llm.fused_add_rms_norm(nbx.zeros([2, 4], { dtype: 'int64' }), nbx.zeros([2, 4], { dtype: 'int64' })), (e: Error) => e.name === 'DTypeError');
});

test('llm.gated_activation: act(gate)·up in one pass, within one rounding of the two-op composition', () => {
  const F = nbx.nn.functional;
  const acts: [string, (t: Tensor) => Tensor][] = [
    ['silu', (t) => F.silu(t)], ['gelu', (t) => F.gelu(t)], ['gelu_tanh', (t) => F.gelu(t, { approximate: 'tanh' })],
    ['gelu_pytorch_tanh', (t) => F.gelu(t, { approximate: 'tanh' })], ['relu', (t) => F.relu(t)],
  ];
  for (const dtype of ['float32', 'float64', 'bfloat16'] as const) {
    const tol = dtype === 'float32' ? 2e-7 : dtype === 'float64' ? 1e-15 : 8e-3;
    const gu = nbx.randn([2, 3, 2 * 40], { generator: g() }).mul(3).to(dtype);
    const gate = gu.slice(-1, 0, 40), up = gu.slice(-1, 40);
    for (const [name, act] of acts) {
      const want = act(gate).mul(up);
      const fused = nbx.llm.gated_activation(gu, { act: name });
      const split = nbx.llm.gated_activation(gate.contiguous(), up.contiguous(), { act: name });
      assert.deepEqual(fused.shape, [2, 3, 40]);
      same(fused, split, `${dtype} ${name}: [.., 2I] layout = separate gate/up`);
      assert.ok(maxRelErr(fused, want) <= tol, `${dtype} ${name}: ${maxRelErr(fused, want)} from act(gate)*up`);
    }
  }
  assert.throws(() => nbx.llm.gated_activation(nbx.zeros([2, 5])), (e: Error) => e.name === 'ShapeError' && /even/.test(e.message));
  assert.throws(() => nbx.llm.gated_activation(nbx.zeros([2, 4]), { act: 'tanh' }), (e: Error) => e.name === 'ValueError' && /act must be one of/.test(e.message));
  assert.throws(() => nbx.llm.gated_activation(nbx.zeros([2, 4]), nbx.zeros([2, 3])), (e: Error) => e.name === 'ShapeError');
});

/** transformers' apply_rotary_pos_emb written out with plain ops (rotate_half = cat(-x2, x1)). */
function rotaryReference(x: Tensor, cos: Tensor, sin: Tensor): Tensor {
  const R = cos.shape[cos.ndim - 1]!, D = x.shape[x.ndim - 1]!;
  const c = cos.unsqueeze(1), s = sin.unsqueeze(1);
  const xr = x.slice(-1, 0, R);
  const rh = nbx.cat([xr.slice(-1, R / 2).neg(), xr.slice(-1, 0, R / 2)], -1);
  const e = xr.mul(c).add(rh.mul(s));
  return R === D ? e : nbx.cat([e, x.slice(-1, R)], -1);
}

test('llm.apply_rotary_pos_emb: the CPU kernel equals the composite bit for bit, and transformers\' formula within rounding', () => {
  for (const dtype of ['float32', 'float64'] as const) {
    for (const [B, H, KVH, T, D, R] of [[1, 8, 4, 1, 32, 32], [2, 4, 2, 5, 16, 16], [1, 3, 1, 4, 24, 12]] as const) {
      // q and k as the layers make them: heads of a [B, T, heads, D] projection, transposed (strided views)
      const q = nbx.randn([B, T, H, D], { generator: g(), dtype }).transpose(1, 2);
      const k = nbx.randn([B, T, KVH, D], { generator: g(), dtype }).transpose(1, 2);
      const ang = nbx.rand([B, T, R / 2], { generator: g(), dtype: 'float64' }).mul(6);
      const cos = nbx.cat([ang, ang], -1).cos().to(dtype), sin = nbx.cat([ang, ang], -1).sin().to(dtype);
      const [qe, ke] = nbx.llm.apply_rotary_pos_emb(q, k, cos, sin) as [Tensor, Tensor];
      const [qc, kc] = rotaryComposite(q, k, cos, sin);
      same(qe, qc.contiguous(), `${dtype} q`); same(ke, kc.contiguous(), `${dtype} k`);
      const tol = dtype === 'float32' ? 1e-6 : 1e-14;
      assert.ok(maxRelErr(qe, rotaryReference(q, cos, sin)) < tol && maxRelErr(ke, rotaryReference(k, cos, sin)) < tol, `${dtype}: transformers' formula`);
      // cos/sin for one batch row, broadcast over B
      const [q1] = nbx.llm.apply_rotary_pos_emb(q, k, cos.slice(0, 0, 1), sin.slice(0, 0, 1)) as [Tensor, Tensor];
      same(q1, rotaryComposite(q, k, cos.slice(0, 0, 1), sin.slice(0, 0, 1))[0].contiguous(), `${dtype} broadcast cos/sin`);
    }
  }
  // with the fused paths off the composite runs (same numbers)
  const q = nbx.randn([1, 2, 3, 8], { generator: g() }), k = nbx.randn([1, 1, 3, 8], { generator: g() });
  const cos = nbx.rand([1, 3, 8], { generator: g() }), sin = nbx.rand([1, 3, 8], { generator: g() });
  const on = nbx.llm.apply_rotary_pos_emb(q, k, cos, sin) as [Tensor, Tensor];
  const off = withFusion(false, () => nbx.llm.apply_rotary_pos_emb(q, k, cos, sin) as [Tensor, Tensor]);
  same(on[0], off[0].contiguous(), 'fusion off: q'); same(on[1], off[1].contiguous(), 'fusion off: k');
  assert.throws(() => nbx.llm.apply_rotary_pos_emb(q, k, nbx.rand([1, 3, 9]), nbx.rand([1, 3, 9])), (e: Error) => e.name === 'ShapeError' && /rotary dim/.test(e.message));
  assert.throws(() => nbx.llm.apply_rotary_pos_emb(q, k.double(), cos, sin), (e: Error) => e.name === 'DTypeError');
});

test('llm.decode_attention: equals scaled_dot_product_attention(enable_gqa=True) bit for bit over a KV cache\'s strided views', () => {
  const F = nbx.nn.functional;
  for (const dtype of ['float32', 'float64'] as const) {
    for (const [B, H, KVH, L, S, D] of [[1, 8, 4, 1, 37, 32], [2, 4, 2, 3, 9, 16], [1, 2, 2, 1, 1, 8], [2, 6, 1, 2, 20, 8]] as const) {
      // keys/values as the cache holds them: the filled part of a [B, KVH, capacity, D] buffer
      const kc = nbx.randn([B, KVH, 64, D], { generator: g(), dtype }), vc = nbx.randn([B, KVH, 64, D], { generator: g(), dtype });
      const k = kc.slice(2, 0, S), v = vc.slice(2, 0, S);
      const q = nbx.randn([B, L, H, D], { generator: g(), dtype }).transpose(1, 2);
      const pad = nbx.rand([B, S], { generator: g() }).gt(0.3);
      const masks: (Tensor | null)[] = [null, pad.unsqueeze(1).unsqueeze(1), nbx.randn([B, 1, L, S], { generator: g(), dtype }), nbx.rand([S], { generator: g() }).gt(0.5)];
      for (const mask of masks) {
        const got = nbx.llm.decode_attention(q, k, v, mask, { scale: 0.3 });
        const want = F.scaled_dot_product_attention(q, k, v, { attn_mask: mask, scale: 0.3, enable_gqa: true });
        same(got, want, `${dtype} [${B},${H},${KVH},${L},${S},${D}] mask ${mask ? mask.shape : 'none'}`);
      }
    }
  }
  // is_causal (a short prompt: keys = queries), top-left as SDPA's
  for (const [H, KVH, L] of [[8, 4, 4], [4, 1, 7]] as const) {
    const q = nbx.randn([2, H, L, 16], { generator: g() }), k = nbx.randn([2, KVH, L, 16], { generator: g() }), v = nbx.randn([2, KVH, L, 16], { generator: g() });
    same(nbx.llm.decode_attention(q, k, v, null, { is_causal: true }), F.scaled_dot_product_attention(q, k, v, { is_causal: true, enable_gqa: true }), `causal ${H}/${KVH} L${L}`);
    const k2 = nbx.randn([2, KVH, L + 3, 16], { generator: g() }), v2 = nbx.randn([2, KVH, L + 3, 16], { generator: g() });
    assert.ok(maxRelErr(nbx.llm.decode_attention(q, k2, v2, null, { is_causal: true }), F.scaled_dot_product_attention(q, k2, v2, { is_causal: true, enable_gqa: true })) < 1e-6, 'causal with more keys than queries');
  }
  // beyond the kernel (a prompt's many rows, half types): the definition runs, so the same numbers again
  const q = nbx.randn([1, 4, 20, 8], { generator: g() }), k = nbx.randn([1, 2, 20, 8], { generator: g() }), v = nbx.randn([1, 2, 20, 8], { generator: g() });
  same(nbx.llm.decode_attention(q, k, v), F.scaled_dot_product_attention(q, k, v, { enable_gqa: true }), 'L = 20');
  const qb = q.to('bfloat16'), kb = k.to('bfloat16'), vb = v.to('bfloat16');
  same(nbx.llm.decode_attention(qb, kb, vb), F.scaled_dot_product_attention(qb, kb, vb, { enable_gqa: true }), 'bfloat16');
  const k3 = nbx.randn([1, 3, 20, 8], { generator: g() });
  assert.throws(() => nbx.llm.decode_attention(q, k3, k3), (e: Error) => e.name === 'ShapeError' && /must divide/.test(e.message));
});

test('nn.RMSNorm.forward(x, residual): [norm(x + residual), x + residual], fused and not', () => {
  const m = new nbx.nn.RMSNorm(16, { eps: 1e-6 });
  m.weight!.copy_(nbx.rand([16], { generator: g() }));
  const x = nbx.randn([2, 3, 16], { generator: g() }), r = nbx.randn([2, 3, 16], { generator: g() });
  const [o, s] = m.forward(x, r);
  const [o0, s0] = withFusion(false, () => m.forward(x, r));
  same(o, o0, 'out'); same(s, s0, 'residual');
  same(o, m.forward(x.add(r)), 'out = forward(x + residual)');
});

const ROOT = join(process.cwd(), 'test', 'fixtures', 'models');
const cases = existsSync(ROOT) ? readdirSync(ROOT).filter((c) => existsSync(join(ROOT, c, 'expected.safetensors'))).sort() : [];
if (!cases.length) console.log(`# SKIP fused-vs-unfused model fixtures: none under ${ROOT}`);

for (const c of cases) {
  test(`${c}: the fused path's logits and greedy tokens equal the unfused path's (float32, CPU)`, async () => {
    const { tensors } = await nbx.io.loadSafetensors(join(ROOT, c, 'expected.safetensors'));
    const ids = tensors.input_ids!, mask = tensors.attention_mask!.to('int64'), pos = tensors.position_ids?.to('int64') ?? null;
    const model = await nbx.models.load(join(ROOT, c));
    try {
      const fused = model.forward(ids, { attention_mask: mask, position_ids: pos });
      const plain = withFusion(false, () => model.forward(ids, { attention_mask: mask, position_ids: pos }));
      const real = mask.ne(0).unsqueeze(-1);
      const err = maxRelErr(fused.mul(real), plain.mul(real));
      console.log(`# ${c}: fused vs unfused logits max|Δ|/max|logits| ${err.toExponential(2)}`);
      assert.ok(err < 1e-5, `${c}: fused logits differ from unfused by ${err} of their scale`);
      const n = 8;
      const a = greedy(model, ids, mask, n), b = withFusion(false, () => greedy(model, ids, mask, n));
      assert.deepEqual(a, b, `${c}: greedy tokens`);
      // the transformers names stay in state_dict, and a copying load writes through them into the fused weights
      const sd = model.state_dict();
      const q = Object.keys(sd).find((k) => k.endsWith('self_attn.q_proj.weight') || k.endsWith('mlp.gate_proj.weight'));
      if (q) {
        const saved = sd[q]!.clone();
        model.load_state_dict({ [q]: nbx.zeros_like(saved) }, { strict: false });
        const changed = model.forward(ids, { attention_mask: mask, position_ids: pos });
        const changedPlain = withFusion(false, () => model.forward(ids, { attention_mask: mask, position_ids: pos }));
        assert.ok(maxRelErr(changed.mul(real), changedPlain.mul(real)) < 1e-5, `${c}: after loading ${q}, fused = unfused`);
        assert.ok(maxRelErr(changed.mul(real), fused.mul(real)) > 1e-3, `${c}: loading ${q} changed the output`);
        model.load_state_dict({ [q]: saved }, { strict: false });
        // (against a fresh unfused forward: dynamic RoPE's frequencies depend on the longest forward seen)
        const restored = model.forward(ids, { attention_mask: mask, position_ids: pos });
        const restoredPlain = withFusion(false, () => model.forward(ids, { attention_mask: mask, position_ids: pos }));
        assert.ok(maxRelErr(restored.mul(real), restoredPlain.mul(real)) < 1e-5, `${c}: restored`);
        same(model.state_dict()[q]!, saved, `${c}: ${q} reads back`);
      }
    } finally { model.dispose(); }
  });
}

const KJV = join(process.cwd(), 'assets', 'nbx-kjv');
test('assets/nbx-kjv: 60 greedy tokens with the fused path equal the unfused path\'s; to(float64) re-joins the projections', { skip: existsSync(join(KJV, 'model.safetensors')) ? false : 'no assets/nbx-kjv' }, async () => {
  const model = await nbx.models.load(KJV);
  try {
    const ids = nbx.tensor([model.tokenizer!.encode('And God said')]);
    const a = greedy(model, ids, nbx.ones_like(ids), 60), b = withFusion(false, () => greedy(model, ids, nbx.ones_like(ids), 60));
    assert.deepEqual(a, b);
    const sd = model.state_dict();
    for (const name of ['q_proj', 'k_proj', 'v_proj']) assert.ok(`model.layers.0.self_attn.${name}.weight` in sd, name);
    assert.ok(!Object.keys(sd).some((k) => k.includes('_fused_')), 'the concatenations are not in state_dict');
    model.to('float64');
    const c = greedy(model, ids, nbx.ones_like(ids), 20);
    assert.deepEqual(c[0]!.slice(0, 10), a[0]!.slice(0, 10), 'float64 starts the same');
  } finally { model.dispose(); }
});

test('llm.expert_linear: each token times its routed experts\' weights (shared and per-slot input), checked arguments', () => {
  const w = nbx.randn([4, 3, 5], { generator: new nbx.Generator().manual_seed(1) });
  const x = nbx.randn([2, 5], { generator: new nbx.Generator().manual_seed(2) });
  const ids = nbx.tensor([[3, 1], [0, 0]]);
  const got = nbx.llm.expert_linear(x, w, ids);
  assert.deepEqual(got.shape, [2, 2, 3]);
  for (const [n, j, e] of [[0, 0, 3], [0, 1, 1], [1, 0, 0], [1, 1, 0]] as const) {
    const want = nbx.nn.functional.linear(x.select(0, n), w.select(0, e));
    assert.ok(nbx.allclose(got.select(0, n).select(0, j), want, { atol: 1e-6 }), `token ${n} slot ${j}`);
  }
  const xs = nbx.randn([2, 2, 5], { generator: new nbx.Generator().manual_seed(3) });
  const per = nbx.llm.expert_linear(xs, w, ids);
  assert.ok(nbx.allclose(per.select(0, 0).select(0, 1), nbx.nn.functional.linear(xs.select(0, 0).select(0, 1), w.select(0, 1)), { atol: 1e-6 }));
  assert.throws(() => nbx.llm.expert_linear(x, w, nbx.tensor([[1, 2]], { dtype: 'int32' })), /int64/);
  assert.throws(() => nbx.llm.expert_linear(nbx.randn([2, 4]), w, ids), /input must be \[2, 5\]/);
  assert.throws(() => nbx.llm.expert_linear(x, w, nbx.tensor([[9, 0], [0, 0]])), /out of (bounds|range)/);
});
