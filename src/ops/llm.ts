// nbx.llm: the fused operations of LLM layers (nbx extensions: PyTorch has no such operations; vLLM's
// and transformers' functions of the same purpose give their semantics). Each operation is ONE
// definition, its composite: a composition of existing operations that every backend runs. A backend
// whose kernel object has the operation's kernel (src/kernels/llm.ts) for the dtype at hand runs that
// kernel instead, which computes the same numbers in one call (the CPU's are bit-identical to the
// composite); a backend without it runs the composite, which is the definition, not a fallback.
// gated_activation is one elementwise expression, so every backend fuses it by construction;
// decode_attention is scaled_dot_product_attention for a decode step.
//
// The layers (nn.RMSNorm with a residual, the decoder's attention and MLP in src/models) take these
// paths themselves; set_fusion(false) switches every fused path off (the operations run their
// composites, the layers their unfused compositions), which the tests compare against.

import { Tensor } from '../tensor/tensor.js';
import { DTYPES, isFloat, type DTypeName } from '../dtype/dtypes.js';
import { DTypeError, ShapeError, ValueError } from '../errors.js';
import { broadcastStrides, fmtShape } from '../tensor/shape.js';
import { hasKernel, kernel, kernelFeatures } from '../kernels/registry.js';
import type { KernelName } from '../kernels/table.js';
import { Expr } from '../ir/expr.js';
import { def } from './registry.js';
import { scope } from '../tensor/storage.js';
import { elementwise } from './elementwise.js';
import { rms_norm, scaled_dot_product_attention } from './nn.js';
import { addcmul } from './elementwise.js';
import { cat } from './shape.js';
import { index_select } from './indexing.js';
import { linear, matmul } from './linalg.js';
import { argsort, searchsorted } from './sort.js';
import { argmax, cumsum } from './reduce.js';
import { arange, full } from './creation.js';
import { quantMatmul, type QuantWeight } from './quant.js';
import type { DecodeStepWeight } from '../kernels/decode_step.js';
import { floor_divide, where } from './elementwise.js';
import { index_add, index_copy } from './indexing.js';

let fusion = (globalThis as { process?: { env?: Record<string, string | undefined> } }).process?.env?.NBX_LLM_FUSION !== '0';

/**
 * Turns the fused paths on or off for the whole process (default on; NBX_LLM_FUSION=0 starts with them
 * off): off, nbx.llm's operations run their composites and the layers their unfused compositions.
 * Returns the previous setting.
 */
export function set_fusion(on: boolean): boolean { const was = fusion; fusion = !!on; return was; }
/** Whether the fused paths are on (see set_fusion). */
export function fusion_enabled(): boolean { return fusion; }

/** Whether nbx.llm.fused_decode_step runs `t`'s device's whole-step kernel for t's dtype (else its composite would run). */
export function decodeStepKernel(t: Tensor): boolean {
  return fusion && hasKernel('decode_step', t.device.type) && (kernelFeatures('llm', t.device).decodeStepDtypes ?? []).includes(t.dt);
}
/** The most sequences `t`'s device's whole-step kernel takes in one step (0 without the kernel). */
export function decodeStepMaxBatch(t: Tensor): number {
  return decodeStepKernel(t) ? kernelFeatures('llm', t.device).decodeStepMaxBatch ?? 1 : 0;
}

/** The device's own kernel `name` runs this dtype (never host-staged: without it the composite runs). */
export function fusedKernel(name: KernelName, t: Tensor): boolean {
  return fusion && hasKernel(name, t.device.type) && kernelFeatures('llm', t.device).dtypes.includes(t.dt);
}

function asT(op: string, x: unknown, name: string): Tensor {
  if (!(x instanceof Tensor)) throw new TypeError(`${op}: argument '${name}' must be Tensor, not ${x === null ? 'None' : typeof x}`);
  return x;
}
function needFloat(op: string, t: Tensor, name: string): void {
  if (!isFloat(t.dt) || DTYPES[t.dt].storageOnly) throw new DTypeError(op, `${name} must be a floating-point tensor (float16, bfloat16, float32 or float64), got ${t.dt}`);
}
function sameDType(op: string, a: Tensor, b: Tensor, an: string, bn: string): void {
  if (a.dt !== b.dt) throw new DTypeError(op, `${an} and ${bn} must have the same dtype, got ${a.dt} and ${b.dt}`);
}
function sameDevice(op: string, a: Tensor, b: Tensor, bn: string): void {
  if (a.device !== b.device) throw new ValueError(op, `${bn} is on ${b.device}, expected ${a.device} like the input`);
}
/** Same shape (plain loop: these checks run a dozen times per decode step, often before V8 optimizes them). */
function sameShape(a: readonly number[], b: readonly number[]): boolean {
  if (a.length !== b.length) return false;
  for (let i = 0; i < a.length; i++) if (a[i] !== b[i]) return false;
  return true;
}
/** torch.finfo(opmath(d)).eps: rms_norm's default eps. */
const defaultEps = (d: DTypeName): number => (d === 'float64' ? 2.220446049250313e-16 : 1.1920928955078125e-7);

// ---- fused_add_rms_norm -----------------------------------------------------------------------------

/**
 * `(out, residual_out)` with residual_out = input + residual and out = rms_norm(residual_out, [n],
 * weight, eps) over the last dim n: vLLM's fused_add_rms_norm (out of place). input and residual have
 * one shape and dtype; weight is [n] (or None); eps defaults to rms_norm's (finfo(float32).eps for
 * half types).
 */
export const fused_add_rms_norm = def('llm.fused_add_rms_norm(input, residual, weight=None, eps=None)', (a): [Tensor, Tensor] => {
  const op = 'llm.fused_add_rms_norm';
  const x = asT(op, a.input, 'input'), r = asT(op, a.residual, 'residual');
  const w = a.weight === null ? null : asT(op, a.weight, 'weight');
  needFloat(op, x, 'input');
  sameDType(op, x, r, 'input', 'residual');
  sameDevice(op, x, r, 'residual');
  if (x.ndim === 0 || !sameShape(x.shape, r.shape)) {
    throw new ShapeError(op, `input and residual must have the same shape (at least 1-D), got ${fmtShape(x.shape)} and ${fmtShape(r.shape)}`);
  }
  const n = x.shape[x.ndim - 1]!;
  if (w) {
    if (w.ndim !== 1 || w.shape[0] !== n) throw new ShapeError(op, `weight must be [${n}] (the input's last dim), got ${fmtShape(w.shape)}`);
    sameDevice(op, x, w, 'weight');
  }
  const eps = a.eps === null ? defaultEps(x.dt) : Number(a.eps);
  if (!Number.isFinite(eps) || eps < 0) throw new ValueError(op, `eps must be a non-negative number, got ${String(a.eps)}`);
  if (fusedKernel('fused_add_rms_norm', x) && (!w || w.dt === x.dt) && x.numel() > 0) {
    const xc = x.contiguous(), rc = r.contiguous(), wc = w?.contiguous();
    const out = Tensor.empty(x.shape, x.dt, x.device, false), res = Tensor.empty(x.shape, x.dt, x.device, false);
    kernel('fused_add_rms_norm', x.device, op)({
      x: xc.ref(), residual: rc.ref(), weight: wc?.ref(), out: out.ref(), residualOut: res.ref(), rows: x.numel() / n, n, eps,
    });
    if (xc !== x) xc.dispose();
    if (rc !== r) rc.dispose();
    if (wc && wc !== w) wc.dispose();
    return [out, res];
  }
  return addRmsNormComposite(x, r, w, eps);
});

/** fused_add_rms_norm's definition. */
/**
 * A pre-norm layer's first projection: (linear(out, weight, bias), residual_out) where (out,
 * residual_out) = fused_add_rms_norm(input, residual, norm_weight, eps). That composition is its
 * definition; a backend with the 'norm_gemv' kernel has the projection's blocks compute the norm of their
 * input themselves (a decode step's few rows: one launch instead of two, no trip of the normalized
 * rows through memory; the sum of squares is added in another order, so the result is the composite's
 * within the dtype's rounding).
 */
export const add_rms_norm_linear = def('llm.add_rms_norm_linear(input, residual, norm_weight, weight, bias=None, eps=None)', (a): [Tensor, Tensor] => {
  const op = 'llm.add_rms_norm_linear';
  const x = asT(op, a.input, 'input'), r = asT(op, a.residual, 'residual'), nw = asT(op, a.norm_weight, 'norm_weight'), w = asT(op, a.weight, 'weight');
  const b = a.bias === null || a.bias === undefined ? null : asT(op, a.bias, 'bias');
  needFloat(op, x, 'input');
  for (const [t, n] of [[r, 'residual'], [nw, 'norm_weight'], [w, 'weight']] as const) { sameDType(op, x, t, 'input', n); sameDevice(op, x, t, n); }
  if (b) { sameDType(op, x, b, 'input', 'bias'); sameDevice(op, x, b, 'bias'); }
  const K = x.ndim ? x.shape[x.ndim - 1]! : 0;
  if (x.ndim === 0 || !sameShape(x.shape, r.shape)) throw new ShapeError(op, `input and residual must have the same shape (at least 1-D), got ${fmtShape(x.shape)} and ${fmtShape(r.shape)}`);
  if (nw.ndim !== 1 || nw.shape[0] !== K) throw new ShapeError(op, `norm_weight must be [${K}] (the input's last dim), got ${fmtShape(nw.shape)}`);
  if (w.ndim !== 2 || w.shape[1] !== K) throw new ShapeError(op, `weight must be [out_features, ${K}], got ${fmtShape(w.shape)}`);
  const N = w.shape[0]!;
  if (b && (b.ndim !== 1 || b.shape[0] !== N)) throw new ShapeError(op, `bias must be [${N}], got ${fmtShape(b.shape)}`);
  const eps = a.eps === null || a.eps === undefined ? defaultEps(x.dt) : Number(a.eps);
  if (!Number.isFinite(eps) || eps < 0) throw new ValueError(op, `eps must be a non-negative number, got ${String(a.eps)}`);
  const rows = x.numel() / Math.max(1, K);
  if (fusedKernel('norm_gemv', x) && rows >= 1 && rows <= 16 && x.is_contiguous() && r.is_contiguous() && nw.is_contiguous()) {
    const out = Tensor.empty([...x.shape.slice(0, -1), N], x.dt, x.device, false), res = Tensor.empty(x.shape, x.dt, x.device, false);
    let done = false;
    try {
      done = kernel('norm_gemv', x.device, op)({ x: x.ref(), residual: r.ref(), normWeight: nw.ref(), eps, weight: w.ref(), bias: b?.ref(), out: out.ref(), residualOut: res.ref(), rows, n: N, k: K });
    } catch (e) { out.dispose(); res.dispose(); throw e; }
    if (done) return [out, res];
    out.dispose(); res.dispose();
  }
  const [h, res] = fused_add_rms_norm(x, r, nw, eps) as [Tensor, Tensor];
  const out = linear(h, w, b);
  h.dispose();
  return [out, res];
});

export function addRmsNormComposite(x: Tensor, r: Tensor, w: Tensor | null, eps: number): [Tensor, Tensor] {
  const sum = x.add(r);
  return [rms_norm(sum, [x.shape[x.ndim - 1]!], w, eps), sum];
}

// ---- gated_activation ---------------------------------------------------------------------------------

type Act = 'silu' | 'gelu' | 'gelu_tanh' | 'relu';
const ACTS: Record<string, Act> = { silu: 'silu', swish: 'silu', gelu: 'gelu', gelu_tanh: 'gelu_tanh', gelu_pytorch_tanh: 'gelu_tanh', gelu_new: 'gelu_tanh', relu: 'relu' };

/** The activation's expression, with the same formula as nn.functional's (src/ops/elementwise.ts). */
function actExpr(act: Act, x: Expr): Expr {
  const k = (v: number): Expr => Expr.const(v, x.dtype);
  switch (act) {
    case 'silu': return x.div(k(1).add(x.neg().exp()));
    case 'gelu': return k(0.5).mul(x).mul(k(1).add(x.mul(k(Math.SQRT1_2)).un('erf')));
    case 'gelu_tanh': {
      const inner = k(Math.sqrt(2 / Math.PI)).mul(x.add(k(0.044715).mul(x).mul(x).mul(x)));
      return k(0.5).mul(x).mul(k(1).add(inner.un('tanh')));
    }
    case 'relu': return Expr.where(x.gt(k(0)), x, Expr.where(x.un('isnan'), x, k(0)));
  }
}

/**
 * act(gate) · up for the gated MLPs (SwiGLU, GeGLU): vLLM's silu_and_mul / gelu_and_mul /
 * gelu_tanh_and_mul. With `up` None, `gate` is the fused [..., 2I] gate_up layout: its first half is the
 * gate, its second half up. `act`: silu (swish), gelu, gelu_tanh (gelu_pytorch_tanh, gelu_new) or relu.
 * One elementwise expression (every backend runs it in one pass), computed in float32 for half types
 * and rounded once, as vLLM's kernels: against act(gate) * up as two operations, which rounds the
 * activation first, results agree to the last unit of the dtype.
 */
export const gated_activation = def("llm.gated_activation(gate, up=None, *, act='silu')", (a): Tensor => {
  const op = 'llm.gated_activation';
  let gate = asT(op, a.gate, 'gate');
  needFloat(op, gate, 'gate');
  const act = ACTS[String(a.act)];
  if (!act) throw new ValueError(op, `act must be one of ${Object.keys(ACTS).join(', ')}; got '${String(a.act)}'`);
  let up: Tensor;
  if (a.up === null) {
    const n = gate.ndim ? gate.shape[gate.ndim - 1]! : 0;
    if (gate.ndim === 0 || n % 2 !== 0) throw new ShapeError(op, `without up, gate is the [..., 2I] gate_up layout: its last dim must be even, got shape ${fmtShape(gate.shape)}`);
    up = gate.slice(-1, n / 2);
    gate = gate.slice(-1, 0, n / 2);
  } else {
    up = asT(op, a.up, 'up');
    sameDType(op, gate, up, 'gate', 'up');
    sameDevice(op, gate, up, 'up');
    if (!sameShape(gate.shape, up.shape)) {
      throw new ShapeError(op, `gate and up must have the same shape, got ${fmtShape(gate.shape)} and ${fmtShape(up.shape)}`);
    }
  }
  const cd: DTypeName = gate.dt === 'float16' || gate.dt === 'bfloat16' ? 'float32' : gate.dt;
  return elementwise(op, [gate, up], cd, gate.dt, ([g, u]) => actExpr(act, g!).mul(u!));
});

/** Normalizes a transformers activation name for gated_activation; null when it has no gated form here. */
/** gated_activation's expression for `dtype` (loads 0 = gate, 1 = up, computed in float32 for half types, rounded once). */
export function gatedActivationExpr(act: Act, dtype: DTypeName): Expr {
  const cd: DTypeName = dtype === 'float16' || dtype === 'bfloat16' ? 'float32' : dtype;
  return actExpr(act, Expr.load(0, dtype).cast(cd)).mul(Expr.load(1, dtype).cast(cd)).cast(dtype);
}

/**
 * A gated MLP's down projection: linear(gated_activation(gate_up, act=act), weight, bias) for gate_up
 * [..., 2I] (gate, then up), weight [out, I], bias [out] or None. That composition is its definition; a
 * backend with the 'gated_gemv' kernel computes the activation as the product loads it (a decode step's
 * few rows: one launch instead of two, the same activation values).
 */
export const gated_linear = def("llm.gated_linear(gate_up, weight, bias=None, *, act='silu')", (a): Tensor => {
  const op = 'llm.gated_linear';
  const gu = asT(op, a.gate_up, 'gate_up'), w = asT(op, a.weight, 'weight');
  const b = a.bias === null || a.bias === undefined ? null : asT(op, a.bias, 'bias');
  needFloat(op, gu, 'gate_up');
  sameDType(op, gu, w, 'gate_up', 'weight'); sameDevice(op, gu, w, 'weight');
  if (b) { sameDType(op, gu, b, 'gate_up', 'bias'); sameDevice(op, gu, b, 'bias'); }
  const act = ACTS[String(a.act)];
  if (!act) throw new ValueError(op, `act must be one of ${Object.keys(ACTS).join(', ')}; got '${String(a.act)}'`);
  const n2 = gu.ndim ? gu.shape[gu.ndim - 1]! : 0;
  if (gu.ndim === 0 || n2 % 2 !== 0) throw new ShapeError(op, `gate_up is the [..., 2I] gate_up layout: its last dim must be even, got shape ${fmtShape(gu.shape)}`);
  const K = n2 / 2;
  if (w.ndim !== 2 || w.shape[1] !== K) throw new ShapeError(op, `weight must be [out_features, ${K}] for gate_up ${fmtShape(gu.shape)}, got ${fmtShape(w.shape)}`);
  const N = w.shape[0]!;
  if (b && (b.ndim !== 1 || b.shape[0] !== N)) throw new ShapeError(op, `bias must be [${N}], got ${fmtShape(b.shape)}`);
  const rows = gu.numel() / Math.max(1, n2);
  if (fusedKernel('gated_gemv', gu) && rows >= 1 && rows <= 16 && gu.is_contiguous()) {
    const out = Tensor.empty([...gu.shape.slice(0, -1), N], gu.dt, gu.device, false);
    let done = false;
    try {
      done = kernel('gated_gemv', gu.device, op)({ gateUp: gu.reshape([rows, n2]).ref(), weight: w.ref(), bias: b?.ref(), out: out.ref(), rows, n: N, k: K, gate: gatedActivationExpr(act, gu.dt) });
    } catch (e) { out.dispose(); throw e; }
    if (done) return out;
    out.dispose();
  }
  return scope(() => linear(gated_activation(gu, null, { act: String(a.act) }), w, b));
});

export function gatedActName(name: string): Act | null { return ACTS[name] ?? null; }

// ---- apply_rotary_pos_emb -----------------------------------------------------------------------------

/**
 * transformers' apply_rotary_pos_emb(q, k, cos, sin, unsqueeze_dim=1): `(q·cos + rotate_half(q)·sin,
 * k·cos + rotate_half(k)·sin)` with cos/sin unsqueezed at `unsqueeze_dim` (the half-split layout;
 * rotate_half(x) = cat(-x2, x1)). With cos's last dim R < head dim (partial rotary, Phi-3), the first R
 * channels rotate and the rest pass through. Computed as mul then addcmul (q·cos rounded to the dtype,
 * then rotate_half(q)·sin added with one rounding).
 */
export const apply_rotary_pos_emb = def('llm.apply_rotary_pos_emb(q, k, cos, sin, unsqueeze_dim=1)', (a): [Tensor, Tensor] => {
  const op = 'llm.apply_rotary_pos_emb';
  const q = asT(op, a.q, 'q'), k = asT(op, a.k, 'k'), cos = asT(op, a.cos, 'cos'), sin = asT(op, a.sin, 'sin');
  needFloat(op, q, 'q');
  sameDType(op, q, k, 'q', 'k'); sameDType(op, q, cos, 'q', 'cos'); sameDType(op, q, sin, 'q', 'sin');
  sameDevice(op, q, k, 'k'); sameDevice(op, q, cos, 'cos'); sameDevice(op, q, sin, 'sin');
  if (!sameShape(cos.shape, sin.shape)) {
    throw new ShapeError(op, `cos and sin must have the same shape, got ${fmtShape(cos.shape)} and ${fmtShape(sin.shape)}`);
  }
  const ud = Number(a.unsqueeze_dim);
  if (!Number.isInteger(ud)) throw new ValueError(op, `unsqueeze_dim must be an int, got ${String(a.unsqueeze_dim)}`);
  const R = cos.ndim ? cos.shape[cos.ndim - 1]! : 0;
  checkRotary(op, q, 'q', R, cos); checkRotary(op, k, 'k', R, cos);
  if (fusedKernel('rotary_embedding', q) && ud === 1 && q.ndim === 4 && k.ndim === 4 && cos.ndim === 3) {
    const B = q.shape[0]!, T = q.shape[2]!;
    if (k.shape[0] === B && k.shape[2] === T && (cos.shape[0] === B || cos.shape[0] === 1) && cos.shape[1] === T && q.numel() > 0 && k.numel() > 0) {
      const cr = tableRef(cos, B, T, R), sr = tableRef(sin, B, T, R);
      const rotary = kernel('rotary_embedding', q.device, op);
      const qo = Tensor.empty(q.shape, q.dt, q.device, false), ko = Tensor.empty(k.shape, k.dt, k.device, false);
      rotary({ x: q.ref(), cos: cr, sin: sr, out: qo.ref(), rotary: R });
      rotary({ x: k.ref(), cos: cr, sin: sr, out: ko.ref(), rotary: R });
      return [qo, ko];
    }
  }
  return rotaryComposite(q, k, cos, sin, ud);
});

/**
 * A decode step's RoPE and KV-cache write: apply_rotary_pos_emb(query, key, cos, sin) (unsqueeze_dim 1),
 * then key_cache.index_copy_(2, cache_index, rotated key) and value_cache.index_copy_(2, cache_index,
 * value); returns the rotated query. query [B, H, T, D], key and value [B, KVH, T, D], cos/sin [B or 1,
 * T, R], caches [B, KVH, S, D], cache_index [T] int64 (an index outside [0, S) is index_copy_'s
 * IndexError). That composition is its definition; a backend with the 'rotary_cache' kernel does it in
 * one pass (the same numbers: rotary's arithmetic, exact copies).
 */
export const rotary_and_cache = def('llm.rotary_and_cache(query, key, value, cos, sin, key_cache, value_cache, cache_index)', (a): Tensor => {
  const op = 'llm.rotary_and_cache';
  const q = asT(op, a.query, 'query'), k = asT(op, a.key, 'key'), v = asT(op, a.value, 'value');
  const cos = asT(op, a.cos, 'cos'), sin = asT(op, a.sin, 'sin');
  const kc = asT(op, a.key_cache, 'key_cache'), vc = asT(op, a.value_cache, 'value_cache'), idx = asT(op, a.cache_index, 'cache_index');
  needFloat(op, q, 'query');
  for (const [t, n] of [[k, 'key'], [v, 'value'], [cos, 'cos'], [sin, 'sin'], [kc, 'key_cache'], [vc, 'value_cache']] as const) { sameDType(op, q, t, 'query', n); sameDevice(op, q, t, n); }
  sameDevice(op, q, idx, 'cache_index');
  if (idx.dt !== 'int64' || idx.ndim !== 1) throw new DTypeError(op, `cache_index must be an int64 tensor [T], got ${idx.dt} ${fmtShape(idx.shape)}`);
  if (q.ndim !== 4 || k.ndim !== 4 || v.ndim !== 4 || kc.ndim !== 4 || vc.ndim !== 4) {
    throw new ShapeError(op, `query, key, value and the caches must be 4-D [batch, heads, len, head_dim], got ${fmtShape(q.shape)}, ${fmtShape(k.shape)}, ${fmtShape(v.shape)}, ${fmtShape(kc.shape)}, ${fmtShape(vc.shape)}`);
  }
  const [B, H, T, D] = q.shape as [number, number, number, number];
  const KVH = k.shape[1]!, S = kc.shape[2]!;
  if (!sameShape(k.shape, [B, KVH, T, D]) || !sameShape(v.shape, [B, KVH, T, v.shape[3]!]) || !sameShape(kc.shape, [B, KVH, S, D]) ||
    !sameShape(vc.shape, [B, KVH, vc.shape[2]!, v.shape[3]!]) || idx.shape[0] !== T || (H % KVH !== 0)) {
    throw new ShapeError(op, `expected key [${B}, KVH, ${T}, ${D}], value [${B}, KVH, ${T}, Dv], caches [${B}, KVH, S, D|Dv] and cache_index [${T}] for query ${fmtShape(q.shape)}; got key ${fmtShape(k.shape)}, value ${fmtShape(v.shape)}, caches ${fmtShape(kc.shape)}, ${fmtShape(vc.shape)}, cache_index ${fmtShape(idx.shape)}`);
  }
  const R = cos.ndim ? cos.shape[cos.ndim - 1]! : 0;
  checkRotary(op, q, 'query', R, cos);
  if (fusedKernel('rotary_cache', q) && cos.ndim === 3 && sameShape(cos.shape, sin.shape) && (cos.shape[0] === B || cos.shape[0] === 1) && cos.shape[1] === T &&
    v.shape[3] === D && vc.shape[2] === S && idx.is_contiguous() && q.numel() > 0) {
    const qo = Tensor.empty(q.shape, q.dt, q.device, false);
    try {
      kernel('rotary_cache', q.device, op)({ q: q.ref(), k: k.ref(), v: v.ref(), cos: tableRef(cos, B, T, R), sin: tableRef(sin, B, T, R), qOut: qo.ref(),
        keyCache: kc.ref(), valueCache: vc.ref(), index: idx.ref(), rotary: R });
    } catch (e) { qo.dispose(); throw e; }
    return qo;
  }
  const [qr, kr] = apply_rotary_pos_emb(q, k, cos, sin) as [Tensor, Tensor];
  kc.index_copy_(2, idx, kr);
  vc.index_copy_(2, idx, v);
  kr.dispose();
  return qr;
});

function checkRotary(op: string, t: Tensor, name: string, R: number, cos: Tensor): void {
  const D = t.ndim ? t.shape[t.ndim - 1]! : 0;
  if (t.ndim === 0 || R === 0 || R % 2 !== 0 || R > D) {
    throw new ShapeError(op, `cos/sin's last dim (the rotary dim, ${R}) must be even, non-zero and at most ${name}'s head dim; got ${name} ${fmtShape(t.shape)} and cos ${fmtShape(cos.shape)}`);
  }
}

/** cos/sin [B or 1, T, R] as a [B, T, R] ref (stride 0 over a broadcast batch). */
function tableRef(t: Tensor, B: number, T: number, R: number): ReturnType<Tensor['ref']> {
  const r = t.ref();
  return t.shape[0] === B ? r : { ...r, shape: [B, T, R], strides: [0, r.strides[1]!, r.strides[2]!] };
}

/** apply_rotary_pos_emb's definition. Queries and keys of the same batch and length rotate together (one pass of ops, heads side by side). */
export function rotaryComposite(q: Tensor, k: Tensor, cos: Tensor, sin: Tensor, ud = 1): [Tensor, Tensor] {
  const c = cos.unsqueeze(ud), s = sin.unsqueeze(ud);
  const R = cos.shape[cos.ndim - 1]!;
  const rot = (x: Tensor): Tensor => {
    const D = x.shape[x.ndim - 1]!;
    const xr = R === D ? x : x.slice(-1, 0, R);
    const rh = cat([xr.slice(-1, R / 2).neg(), xr.slice(-1, 0, R / 2)], -1);
    const e = addcmul(xr.mul(c), rh, s);
    return R === D ? e : cat([e, x.slice(-1, R)], -1);
  };
  const together = ud === 1 && q.ndim === 4 && k.ndim === 4 && q.shape[0] === k.shape[0] && q.shape[2] === k.shape[2] && q.shape[3] === k.shape[3];
  if (!together) return scope(() => [rot(q), rot(k)]);
  return scope(() => {
    const H = q.shape[1]!;
    const e = rot(cat([q, k], 1));
    return [e.slice(1, 0, H), e.slice(1, H)];
  });
}


// ---- decode_attention -------------------------------------------------------------------------------

/** Query rows up to which the decode kernel runs (a decode step has one; a prompt goes the composed way). */
const DECODE_ROWS = 16;

/** (row stride, matrix stride) of a [B, G, S, D] view as B·G row-major S×D matrices, or null. */
function matrices(t: Tensor): { ld: number; stride: number } | null {
  const [B, G, S, D] = t.shape as [number, number, number, number];
  const st = t.strides;
  if (D > 1 && st[3] !== 1) return null;
  const ld = S <= 1 ? D : st[2]!;
  if (ld < D) return null;
  let stride: number;
  if (B === 1) stride = G === 1 ? ld * S : st[1]!;
  else if (G === 1) stride = st[0]!;
  else if (st[0] === G * st[1]!) stride = st[1]!;
  else return null;
  return stride >= ld * S ? { ld, stride } : null;
}

/**
 * nn.functional.scaled_dot_product_attention(query, key, value, attn_mask, is_causal=is_causal,
 * scale=scale, enable_gqa=True) for query [B, H, L, D] and key/value [B, H / rep, S, D]: that call is its
 * definition. A device with the 'decode_attention' kernel runs few query rows (L ≤ 16: a decode step, a
 * short prompt) through it, for float32/float64 on the CPU with the composed path's own gemm and
 * softmax calls (the same numbers).
 */
export const decode_attention = def('llm.decode_attention(query, key, value, attn_mask=None, *, is_causal=False, scale=None)', (a): Tensor => {
  const op = 'llm.decode_attention';
  const q = asT(op, a.query, 'query'), k = asT(op, a.key, 'key'), v = asT(op, a.value, 'value');
  const mask = a.attn_mask === null ? null : asT(op, a.attn_mask, 'attn_mask');
  const causal = !!a.is_causal;
  if (!(causal && mask) && q.ndim === 4 && k.ndim === 4 && v.ndim === 4 && q.dt === k.dt && q.dt === v.dt && k.device === q.device && v.device === q.device && fusedKernel('decode_attention', q)) {
    const B = q.shape[0]!, H = q.shape[1]!, L = q.shape[2]!, E = q.shape[3]!;
    const KVH = k.shape[1]!, S = k.shape[2]!, Ev = v.shape[3]!;
    const fits = k.shape[0] === B && v.shape[0] === B && v.shape[1] === KVH && v.shape[2] === S && k.shape[3] === E
      && KVH > 0 && H % KVH === 0 && L > 0 && L <= DECODE_ROWS && S > 0 && E > 0 && Ev > 0;
    const km = fits ? matrices(k) : null, vm = km ? matrices(v) : null;
    let maskRef: ReturnType<Tensor['ref']> | undefined, maskOk = !mask;
    if (vm && mask && mask.device === q.device && (mask.dt === 'bool' || mask.dt === q.dt) && mask.ndim <= 4) {
      const target = [B, H, L, S];
      if (mask.shape.every((s, i) => s === 1 || s === target[4 - mask.ndim + i])) {
        const ms = broadcastStrides(mask.shape, mask.strides, target);
        if (B === 1 || ms[0] === H * ms[1]!) {
          maskRef = { ...mask.ref(), shape: [B * H, L, S], strides: [ms[1]!, ms[2]!, ms[3]!] };
          maskOk = true;
        }
      }
    }
    if (vm && maskOk) {
      const scale = a.scale === null ? 1 / Math.sqrt(E) : Number(a.scale);
      const qc = q.contiguous();
      const out = Tensor.empty([B, H, L, Ev], q.dt, q.device, false);
      kernel('decode_attention', q.device, op)({
        q: qc.ref(), k: k.ref(), ldk: km!.ld, strideK: km!.stride, v: v.ref(), ldv: vm.ld, strideV: vm.stride, out: out.ref(), mask: maskRef, causal, scale, rep: H / KVH,
      });
      if (qc !== q) qc.dispose();
      return out;
    }
  }
  return scaled_dot_product_attention(q, k, v, { attn_mask: mask, is_causal: causal, scale: a.scale, enable_gqa: true });
});

/**
 * nbx.llm.expert_linear(input, weight, expert_ids): each token's product with the weights of the experts
 * routed to it, out[n, j] = weight[expert_ids[n, j]] @ input[n] (or input[n, j] for a per-slot input
 * [N, k, K]), weight [E, O, K] holding each expert's nn.Linear weight [out, in]: [N, k, O]. The expert
 * ids stay on the device, so a decode step reads only the chosen experts' weights and never routes on
 * the host (a CUDA graph can record it). Definition: index_select of the chosen experts' weights, then
 * matmul (which copies the weights it gathers; the kernel reads them in place).
 */
export const expert_linear = def('llm.expert_linear(input, weight, expert_ids)', (a): Tensor => {
  const op = 'llm.expert_linear';
  const x = asT(op, a.input, 'input'), w = asT(op, a.weight, 'weight'), ids = asT(op, a.expert_ids, 'expert_ids');
  needFloat(op, x, 'input');
  sameDType(op, x, w, 'input', 'weight');
  sameDevice(op, x, w, 'weight');
  sameDevice(op, x, ids, 'expert_ids');
  if (ids.dt !== 'int64' || ids.ndim !== 2) throw new DTypeError(op, `expert_ids must be an int64 tensor [tokens, slots], got ${ids.dt} ${fmtShape(ids.shape)}`);
  const [N, k] = ids.shape as [number, number];
  if (w.ndim !== 3) throw new ShapeError(op, `weight must be [experts, out_features, in_features], got ${fmtShape(w.shape)}`);
  const [E, O, K] = w.shape as [number, number, number];
  const perSlot = x.ndim === 3;
  const want = perSlot ? [N, k, K] : [N, K];
  if (!sameShape(x.shape, want)) throw new ShapeError(op, `input must be [${want.join(', ')}] for expert_ids ${fmtShape(ids.shape)} and weight ${fmtShape(w.shape)}, got ${fmtShape(x.shape)}`);
  if (fusedKernel('expert_gemv', x) && x.numel() > 0) {
    const xc = x.contiguous(), wc = w.contiguous(), ic = ids.contiguous();
    const out = Tensor.empty([N, k, O], x.dt, x.device, false);
    try {
      kernel('expert_gemv', x.device, op)({ x: xc.ref(), xPerSlot: perSlot, weight: wc.ref(), ids: ic.ref(), out: out.ref(), tokens: N, slots: k, experts: E, outFeatures: O, inFeatures: K });
    } catch (e) { out.dispose(); throw e; } finally {
      if (xc !== x) xc.dispose();
      if (wc !== w) wc.dispose();
      if (ic !== ids) ic.dispose();
    }
    return out;
  }
  return expertLinearComposite(x, w, ids);
});

/** expert_linear's definition: the chosen experts' weights gathered, then one batched matmul. */
export function expertLinearComposite(x: Tensor, w: Tensor, ids: Tensor): Tensor {
  const [N, k] = ids.shape as [number, number];
  const [, O, K] = w.shape as [number, number, number];
  return scope(() => {
    const sel = index_select(w, 0, ids.reshape([N * k])).view([N, k, O, K]);
    const xs = x.ndim === 3 ? x.unsqueeze(-1) : x.unsqueeze(1).unsqueeze(-1); // [N, k|1, K, 1]
    return matmul(sel, xs).squeeze(-1);
  });
}

// ---- paged KV cache: reshape_and_cache, paged_attention ---------------------------------------------

/** An integer index tensor (int32 or int64) of rank `ndim`. */
function needIndex(op: string, t: Tensor, name: string, ndim: number): void {
  if ((t.dt !== 'int64' && t.dt !== 'int32') || t.ndim !== ndim) {
    throw new DTypeError(op, `${name} must be an int64 or int32 tensor of rank ${ndim}, got ${t.dt} ${fmtShape(t.shape)}`);
  }
}

/** A paged pool [num_blocks, block_size, kv_heads, head_dim] of a float dtype. */
function needPool(op: string, t: Tensor, name: string): void {
  needFloat(op, t, name);
  if (t.ndim !== 4) throw new ShapeError(op, `${name} must be a block pool [num_blocks, block_size, num_kv_heads, head_size], got ${fmtShape(t.shape)}`);
  if (!t.is_contiguous()) throw new ValueError(op, `${name} must be contiguous (a block pool), got strides [${t.strides.join(', ')}]`);
}

/**
 * vLLM's reshape_and_cache: writes the keys and values of this step's tokens into their slots of the
 * paged pools. key [N, KVH, D] and value [N, KVH, Dv]; key_cache [num_blocks, block_size, KVH, D] and
 * value_cache alike; slot_mapping [N] int64, slot = block · block_size + offset. Definition:
 * key_cache.view(-1, KVH, D).index_copy_(0, slot_mapping, key), and the same for values (a slot out of
 * range is index_copy_'s IndexError). Returns (key_cache, value_cache).
 */
export const reshape_and_cache = def('llm.reshape_and_cache(key, value, key_cache, value_cache, slot_mapping)', (a): [Tensor, Tensor] => {
  const op = 'llm.reshape_and_cache';
  const k = asT(op, a.key, 'key'), v = asT(op, a.value, 'value');
  const kc = asT(op, a.key_cache, 'key_cache'), vc = asT(op, a.value_cache, 'value_cache');
  const slots = asT(op, a.slot_mapping, 'slot_mapping');
  needPool(op, kc, 'key_cache'); needPool(op, vc, 'value_cache');
  sameDType(op, kc, k, 'key_cache', 'key'); sameDType(op, vc, v, 'value_cache', 'value');
  sameDevice(op, kc, k, 'key'); sameDevice(op, kc, v, 'value'); sameDevice(op, kc, vc, 'value_cache'); sameDevice(op, kc, slots, 'slot_mapping');
  if (slots.dt !== 'int64' || slots.ndim !== 1) throw new DTypeError(op, `slot_mapping must be an int64 tensor [num_tokens], got ${slots.dt} ${fmtShape(slots.shape)}`);
  const [, , KVH, D] = kc.shape as [number, number, number, number];
  const N = slots.shape[0]!;
  if (!sameShape(k.shape, [N, KVH, D]) || v.ndim !== 3 || v.shape[0] !== N || v.shape[1] !== KVH || v.shape[2] !== vc.shape[3] || vc.shape[2] !== KVH || vc.shape[0] !== kc.shape[0] || vc.shape[1] !== kc.shape[1]) {
    throw new ShapeError(op, `key must be [${N}, ${KVH}, ${D}] and value [${N}, ${KVH}, Dv] for slot_mapping ${fmtShape(slots.shape)} and pools ${fmtShape(kc.shape)}, ${fmtShape(vc.shape)}; got ${fmtShape(k.shape)} and ${fmtShape(v.shape)}`);
  }
  kc.view([-1, KVH, D]).index_copy_(0, slots, k);
  vc.view([-1, KVH, vc.shape[3]!]).index_copy_(0, slots, v);
  return [kc, vc];
});

/**
 * vLLM's paged_attention for decode: query [B, H, D] (one token per sequence) over each sequence's
 * keys and values in the block pools key_cache [num_blocks, block_size, KVH, D] / value_cache
 * [num_blocks, block_size, KVH, Dv], found through block_tables [B, max_blocks] (int32/int64; entries
 * past a sequence's last block are ignored but must be valid ids) and seq_lens [B] (keys per sequence,
 * the current token's included). GQA: query head h reads key/value head ⌊h·KVH/H⌋. sliding_window: only
 * the last `sliding_window` keys are seen; softcap: scores → softcap·tanh(scores/softcap) (Gemma 2).
 * Returns [B, H, Dv].
 *
 * Definition (the composite): gather every sequence's blocks with index_select, mask the positions past
 * its length (and outside its window), then the existing attention: scaled_dot_product_attention with
 * enable_gqa, or with softcap transformers' eager attention (q·kᵀ·scale, soft-cap, mask, softmax in
 * float32 (float64 for float64), ·v). A backend's 'paged_attention' kernel reads the blocks in place instead, one sequence
 * at a time.
 */
export const paged_attention = def('llm.paged_attention(query, key_cache, value_cache, block_tables, seq_lens, *, scale=None, sliding_window=None, softcap=None)', (a): Tensor => {
  const op = 'llm.paged_attention';
  const q = asT(op, a.query, 'query');
  const kc = asT(op, a.key_cache, 'key_cache'), vc = asT(op, a.value_cache, 'value_cache');
  const bt = asT(op, a.block_tables, 'block_tables'), sl = asT(op, a.seq_lens, 'seq_lens');
  needFloat(op, q, 'query');
  needPool(op, kc, 'key_cache'); needPool(op, vc, 'value_cache');
  sameDType(op, q, kc, 'query', 'key_cache'); sameDType(op, q, vc, 'query', 'value_cache');
  for (const [t, n] of [[kc, 'key_cache'], [vc, 'value_cache'], [bt, 'block_tables'], [sl, 'seq_lens']] as const) sameDevice(op, q, t, n);
  needIndex(op, bt, 'block_tables', 2); needIndex(op, sl, 'seq_lens', 1);
  if (q.ndim !== 3) throw new ShapeError(op, `query must be [num_seqs, num_heads, head_size] (one token per sequence), got ${fmtShape(q.shape)}`);
  const [B, H, D] = q.shape as [number, number, number];
  const [NB, BS, KVH, Dk] = kc.shape as [number, number, number, number];
  const Dv = vc.shape[3]!;
  if (Dk !== D || vc.shape[0] !== NB || vc.shape[1] !== BS || vc.shape[2] !== KVH) {
    throw new ShapeError(op, `key_cache ${fmtShape(kc.shape)} and value_cache ${fmtShape(vc.shape)} must share [num_blocks, block_size, num_kv_heads] and key_cache's head size must be query's (${D})`);
  }
  if (KVH === 0 || H % KVH !== 0) throw new ShapeError(op, `num_heads (${H}) must be a multiple of num_kv_heads (${KVH})`);
  if (bt.shape[0] !== B || sl.shape[0] !== B) throw new ShapeError(op, `block_tables ${fmtShape(bt.shape)} and seq_lens ${fmtShape(sl.shape)} must have one row per sequence (${B})`);
  const MB = bt.shape[1]!;
  const scale = a.scale === null ? 1 / Math.sqrt(D) : Number(a.scale);
  if (!Number.isFinite(scale)) throw new ValueError(op, `scale must be a finite number, got ${String(a.scale)}`);
  const window = a.sliding_window === null ? null : Number(a.sliding_window);
  if (window !== null && !(Number.isInteger(window) && window >= 1)) throw new ValueError(op, `sliding_window must be a positive integer or None, got ${String(a.sliding_window)}`);
  const softcap = a.softcap === null ? null : Number(a.softcap);
  if (softcap !== null && !(softcap > 0 && Number.isFinite(softcap))) throw new ValueError(op, `softcap must be a positive number or None, got ${String(a.softcap)}`);
  if (B === 0 || H === 0) return Tensor.empty([B, H, Dv], q.dt, q.device, false);
  if (fusedKernel('paged_attention', q) && MB > 0) {
    const qc = q.contiguous(), btc = bt.contiguous(), slc = sl.contiguous();
    const out = Tensor.empty([B, H, Dv], q.dt, q.device, false);
    try {
      kernel('paged_attention', q.device, op)({
        q: qc.ref(), keyCache: kc.ref(), valueCache: vc.ref(), blockTables: btc.ref(), seqLens: slc.ref(), out: out.ref(),
        seqs: B, heads: H, kvHeads: KVH, headDim: D, valueDim: Dv, numBlocks: NB, blockSize: BS, maxBlocks: MB, scale, window, softcap,
      });
    } catch (e) { out.dispose(); throw e; } finally {
      if (qc !== q) qc.dispose();
      if (btc !== bt) btc.dispose();
      if (slc !== sl) slc.dispose();
    }
    return out;
  }
  return pagedAttentionComposite(q, kc, vc, bt, sl, scale, window, softcap);
});

/** paged_attention's definition: the blocks gathered by block table, the padding and window masked, then attention. */
export function pagedAttentionComposite(q: Tensor, kc: Tensor, vc: Tensor, bt: Tensor, sl: Tensor, scale: number, window: number | null, softcap: number | null): Tensor {
  const [B, H, D] = q.shape as [number, number, number];
  const [, BS, KVH] = kc.shape as [number, number, number, number];
  const Dv = vc.shape[3]!, MB = bt.shape[1]!, S = MB * BS;
  return scope(() => {
    const ids = bt.reshape([B * MB]).to('int64');
    const keys = index_select(kc, 0, ids).view([B, S, KVH, D]).transpose(1, 2); // [B, KVH, S, D]
    const values = index_select(vc, 0, ids).view([B, S, KVH, Dv]).transpose(1, 2);
    const pos = arangeOn(S, q).unsqueeze(0); // [1, S]
    const len = sl.to('int64').unsqueeze(1); // [B, 1]
    let visible = pos.lt(len);
    if (window !== null) visible = visible.logical_and(pos.ge(len.sub(window)));
    const mask = visible.unsqueeze(1).unsqueeze(1); // [B, 1, 1, S]
    const q4 = q.unsqueeze(2);
    let out: Tensor;
    if (softcap === null) {
      out = scaled_dot_product_attention(q4, keys, values, { attn_mask: mask, scale, enable_gqa: true });
    } else {
      const rep = H / KVH;
      const repeat = (t: Tensor, d: number): Tensor => (rep === 1 ? t : t.unsqueeze(2).expand([B, KVH, rep, S, d]).reshape([B, H, S, d]));
      let w = matmul(q4, repeat(keys, D).transpose(2, 3)).mul(scale);
      w = w.div(softcap).tanh().mul(softcap);
      w = w.masked_fill(mask.logical_not(), -Infinity);
      // a row with no visible key gives 0 (the safe softmax of scaled_dot_product_attention)
      const p = softmaxSafe(w, q.dt === 'float64' ? 'float64' : 'float32').to(q.dt);
      out = matmul(p, repeat(values, Dv));
    }
    return out.squeeze(2);
  });
}

function arangeOn(n: number, like: Tensor): Tensor {
  return Tensor.fromStorage(BigInt64Array.from({ length: n }, (_, i) => BigInt(i)), 'int64', [n], 'cpu').to(like.device);
}

/** softmax over the last dim in float32 (float64 for float64 scores), 0 where every score is -inf. */
function softmaxSafe(w: Tensor, dt: 'float32' | 'float64'): Tensor {
  const f = w.to(dt);
  const allMasked = f.eq(-Infinity).all(-1, true);
  const p = f.softmax(-1);
  return p.masked_fill(allMasked, 0);
}

// ---- fused mixture of experts: moe_align, grouped_expert_linear ----------------------------------------

/** A non-negative integer argument. */
function needCount(op: string, v: unknown, name: string, min: number): number {
  const n = Number(v);
  if (!Number.isInteger(n) || n < min) throw new ValueError(op, `${name} must be an integer >= ${min}, got ${String(v)}`);
  return n;
}

/** moe_align's fixed output sizes for M slots: capacity M + E·(block_size − 1) and ceil(capacity / block_size) blocks. */
export function moeAlignSizes(slots: number, experts: number, blockSize: number): { capacity: number; blocks: number } {
  const capacity = slots + experts * (blockSize - 1);
  return { capacity, blocks: Math.ceil(capacity / blockSize) };
}

/**
 * vLLM's moe_align_block_size: groups a routing's (token, slot) pairs by expert for the grouped GEMM.
 * expert_ids [N, k] (int64 or int32, values in [0, num_experts)); slot s = n·k + j. Returns
 * `(sorted_token_ids, block_expert_ids, num_tokens_post_padded)`, all int32:
 * - sorted_token_ids [M + E·(block_size − 1)] (M = N·k): the slots of expert 0, then of expert 1, …, each
 *   expert's group padded with the value M to a multiple of block_size; within an expert the slots keep
 *   their order (deterministic, where vLLM's kernel orders them by atomics); unused entries are M.
 * - block_expert_ids [ceil(that / block_size)]: the expert of each block of block_size positions, −1 past
 *   the total.
 * - num_tokens_post_padded [1]: Σ_e ceil(count_e / block_size)·block_size.
 * The sizes depend only on (N, k, E, block_size), so a device kernel that fills them reads nothing back to
 * the host (a CUDA graph records it). An id outside [0, E) is an IndexError.
 *
 * Definition (the composite): counts by index_add, padded starts by cumsum, a stable argsort of the ids,
 * each slot's position = its expert's padded start + its rank among that expert's slots, and each block's
 * expert by searchsorted over the padded ends.
 */
export const moe_align = def('llm.moe_align(expert_ids, num_experts, block_size)', (a): [Tensor, Tensor, Tensor] => {
  const op = 'llm.moe_align';
  const ids = asT(op, a.expert_ids, 'expert_ids');
  needIndex(op, ids, 'expert_ids', 2);
  const E = needCount(op, a.num_experts, 'num_experts', 1), BS = needCount(op, a.block_size, 'block_size', 1);
  const M = ids.numel();
  const { capacity, blocks } = moeAlignSizes(M, E, BS);
  if (capacity >= 2 ** 31) throw new ValueError(op, `${M} slots padded for ${E} experts exceed int32 positions`);
  // (the ids are integers: the llm family's float dtypes do not apply; the kernel takes int32 and int64)
  if (fusion && hasKernel('moe_align', ids.device.type)) {
    const ic = ids.contiguous();
    const sorted = Tensor.empty([capacity], 'int32', ids.device, false);
    const bexp = Tensor.empty([blocks], 'int32', ids.device, false);
    const total = Tensor.empty([1], 'int32', ids.device, false);
    try {
      kernel('moe_align', ids.device, op)({ ids: ic.ref(), sorted: sorted.ref(), blockExperts: bexp.ref(), total: total.ref(), slots: M, experts: E, blockSize: BS, capacity, blocks });
    } catch (e) { sorted.dispose(); bexp.dispose(); total.dispose(); throw e; } finally {
      if (ic !== ids) ic.dispose();
    }
    return [sorted, bexp, total];
  }
  return moeAlignComposite(ids, E, BS);
});

/** moe_align's definition. */
export function moeAlignComposite(ids: Tensor, E: number, BS: number): [Tensor, Tensor, Tensor] {
  const M = ids.numel(), dev = ids.device;
  const { capacity, blocks } = moeAlignSizes(M, E, BS);
  return scope(() => {
    const flat = ids.reshape([M]).to('int64');
    const counts = index_add(full([E], 0, { dtype: 'int64', device: dev }), 0, flat, full([M], 1, { dtype: 'int64', device: dev })) as Tensor;
    const padded = floor_divide(counts.add(BS - 1), BS).mul(BS);
    const ends = cumsum(padded, 0) as Tensor; // padded end of each expert's group
    const starts = ends.sub(padded);
    const rawStarts = (cumsum(counts, 0) as Tensor).sub(counts); // start of each expert's slots in the sorted order
    const order = argsort(flat, { stable: true }) as Tensor; // slots by expert, in slot order within one
    const e = index_select(flat, 0, order);
    const dest = index_select(starts, 0, e).add(arange(M, { dtype: 'int64', device: dev })).sub(index_select(rawStarts, 0, e));
    const sorted = index_copy(full([capacity], M, { dtype: 'int64', device: dev }), 0, dest, order) as Tensor;
    const total = ends.slice(0, E - 1);
    const first = arange(blocks, { dtype: 'int64', device: dev }).mul(BS);
    const owner = searchsorted(ends, first, { right: true }) as Tensor; // first expert whose group ends after the block's start
    const bexp = where(first.lt(total), owner, full([blocks], -1, { dtype: 'int64', device: dev })) as Tensor;
    return [sorted.to('int32'), bexp.to('int32'), total.to('int32')];
  });
}

/** grouped_expert_linear's kernel runs this input's dtype and block size on its device. */
export function groupedExpertKernel(x: Tensor, blockSize: number): boolean {
  if (!fusedKernel('grouped_expert_gemm', x)) return false;
  const f = kernelFeatures('llm', x.device);
  return !!f.groupedGemmDtypes?.includes(x.dt) && !!f.groupedGemmBlockSizes?.includes(blockSize);
}

/**
 * The grouped GEMM of a mixture-of-experts layer (vLLM's fused_moe kernel, one launch for every expert):
 * with moe_align's outputs for expert_ids [N, top_k] and `block_size`, out[n, j] = weight[e] @ x, e the
 * expert of (n, j), x = input[n] ([N, K]) or input[n, j] (a per-slot input [N, top_k, K]); weight [E, O, K]
 * holds each expert's nn.Linear weight [out, in]. routing_weights [N, top_k] (optional) multiply each
 * slot's row. Returns [N, top_k, O] in the input's dtype; a slot that sorted_token_ids does not name is 0.
 *
 * Definition (the composite): per block of block_size sorted positions, the rows of its slots gathered
 * (padding: a zero row), times its expert's weight (index_select, matmul), each row then copied to its
 * slot (index_copy); with routing weights, the rows (in the dtype) times the weights, cast to the dtype.
 * A device kernel (tensor cores, float32 accumulation) multiplies the float32 sum by the weight before
 * its one rounding. A slot outside [0, M] (M = N·top_k: padding), a block's expert outside [0, E) before
 * the total, or a total above the capacity is an IndexError.
 */
export const grouped_expert_linear = def('llm.grouped_expert_linear(input, weight, sorted_token_ids, block_expert_ids, num_tokens_post_padded, *, top_k, block_size, routing_weights=None)', (a): Tensor => {
  const op = 'llm.grouped_expert_linear';
  const x = asT(op, a.input, 'input'), w = asT(op, a.weight, 'weight');
  const sorted = asT(op, a.sorted_token_ids, 'sorted_token_ids'), bexp = asT(op, a.block_expert_ids, 'block_expert_ids');
  const total = asT(op, a.num_tokens_post_padded, 'num_tokens_post_padded');
  const rw = a.routing_weights === null ? null : asT(op, a.routing_weights, 'routing_weights');
  needFloat(op, x, 'input');
  sameDType(op, x, w, 'input', 'weight');
  for (const [t, n] of [[w, 'weight'], [sorted, 'sorted_token_ids'], [bexp, 'block_expert_ids'], [total, 'num_tokens_post_padded']] as const) sameDevice(op, x, t, n);
  for (const [t, n, r] of [[sorted, 'sorted_token_ids', 1], [bexp, 'block_expert_ids', 1], [total, 'num_tokens_post_padded', 1]] as const) {
    if (t.dt !== 'int32' || t.ndim !== r) throw new DTypeError(op, `${n} must be an int32 tensor of rank ${r} (llm.moe_align's output), got ${t.dt} ${fmtShape(t.shape)}`);
  }
  const topK = needCount(op, a.top_k, 'top_k', 1), BS = needCount(op, a.block_size, 'block_size', 1);
  if (w.ndim !== 3) throw new ShapeError(op, `weight must be [experts, out_features, in_features], got ${fmtShape(w.shape)}`);
  const [E, O, K] = w.shape as [number, number, number];
  const perSlot = x.ndim === 3;
  const N = x.shape[0] ?? 0;
  if (!(x.ndim === 2 || x.ndim === 3) || x.shape[x.ndim - 1] !== K || (perSlot && x.shape[1] !== topK)) {
    throw new ShapeError(op, `input must be [tokens, ${K}] or [tokens, ${topK}, ${K}] for weight ${fmtShape(w.shape)} and top_k ${topK}, got ${fmtShape(x.shape)}`);
  }
  const M = N * topK, cap = sorted.shape[0]!, blocks = bexp.shape[0]!;
  if (total.shape[0] !== 1 || blocks !== Math.ceil(cap / BS)) {
    throw new ShapeError(op, `block_expert_ids must have ceil(${cap} / ${BS}) = ${Math.ceil(cap / BS)} blocks for sorted_token_ids ${fmtShape(sorted.shape)}, and num_tokens_post_padded one element; got ${fmtShape(bexp.shape)} and ${fmtShape(total.shape)}`);
  }
  if (rw) {
    needFloat(op, rw, 'routing_weights');
    sameDevice(op, x, rw, 'routing_weights');
    if (!sameShape(rw.shape, [N, topK])) throw new ShapeError(op, `routing_weights must be [${N}, ${topK}], got ${fmtShape(rw.shape)}`);
  }
  if (M === 0 || O === 0) return Tensor.empty([N, topK, O], x.dt, x.device, true);
  // the kernel moves 16-byte rows: K a multiple of 8, operands at 16-byte-aligned offsets
  if (groupedExpertKernel(x, BS) && K % 8 === 0 && cap < 2 ** 31) {
    const aligned = (t: Tensor): Tensor => (t.is_contiguous() && t.ref().offset % 8 === 0 ? t : t.clone());
    const xc = aligned(x), wc = aligned(w), sc = sorted.contiguous(), bc = bexp.contiguous(), rc = rw?.contiguous();
    const out = Tensor.empty([N, topK, O], x.dt, x.device, true);
    try {
      kernel('grouped_expert_gemm', x.device, op)({
        x: xc.ref(), xPerSlot: perSlot, weight: wc.ref(), sorted: sc.ref(), blockExperts: bc.ref(), total: total.ref(), routing: rc?.ref(), out: out.ref(),
        slots: M, topK, experts: E, outFeatures: O, inFeatures: K, blockSize: BS, capacity: cap, blocks,
      });
    } catch (e) { out.dispose(); throw e; } finally {
      for (const [c, t] of [[xc, x], [wc, w], [sc, sorted], [bc, bexp], [rc, rw]] as const) if (c && c !== t) c.dispose();
    }
    return out;
  }
  return groupedExpertLinearComposite(x, w, sorted, bexp, total, topK, BS, rw);
});

/** grouped_expert_linear's definition. */
export function groupedExpertLinearComposite(x: Tensor, w: Tensor, sorted: Tensor, bexp: Tensor, total: Tensor, topK: number, BS: number, rw: Tensor | null): Tensor {
  const perSlot = x.ndim === 3, N = x.shape[0]!, K = x.shape[x.ndim - 1]!, O = w.shape[1]!, M = N * topK;
  const cap = sorted.shape[0]!, nb = bexp.shape[0]!, P = nb * BS, dev = x.device;
  return scope(() => {
    const tot = total.to('int64');
    const pos = arange(P, { dtype: 'int64', device: dev });
    const padded = P > cap ? cat([sorted.to('int64'), full([P - cap], M, { dtype: 'int64', device: dev })]) : sorted.to('int64');
    const slot = where(pos.lt(tot), padded, full([P], M, { dtype: 'int64', device: dev })) as Tensor; // past the total: padding
    const live = arange(nb, { dtype: 'int64', device: dev }).mul(BS).lt(tot);
    const e = where(live, bexp.to('int64'), full([nb], 0, { dtype: 'int64', device: dev })) as Tensor; // blocks past the total are never stored
    const rows = cat([perSlot ? x.reshape([M, K]) : x, full([1, K], 0, { dtype: x.dt, device: dev })], 0); // + a zero row for padding
    // a slot outside [0, M] is index_copy's IndexError below; here it only must not pick a real row
    const src = perSlot ? slot : where(slot.lt(M), floor_divide(slot, topK), full([P], N, { dtype: 'int64', device: dev })) as Tensor;
    const xa = index_select(rows, 0, src.clamp(0, perSlot ? M : N)).view([nb, BS, K]);
    let y = matmul(xa, index_select(w, 0, e).transpose(1, 2)).reshape([P, O]);
    if (rw) y = y.mul(index_select(cat([rw.reshape([M]), full([1], 0, { dtype: rw.dt, device: dev })]), 0, slot.clamp(0, M)).unsqueeze(-1)).to(x.dt);
    const out = index_copy(full([M + 1, O], 0, { dtype: x.dt, device: dev }), 0, slot, y) as Tensor;
    return out.slice(0, 0, M).view([N, topK, O]);
  });
}

/** A projection's weight for fused_decode_step: a float tensor, or an nbx.quant.QuantizedTensor (its float form in the model dtype). */
export type DecodeStepProjection = Tensor | (QuantWeight & { readonly dtype: DTypeName });
/** One decoder layer's tensors for fused_decode_step (as DecodeStepLayer names them, in snake case). */
export interface DecodeStepLayerTensors {
  input_norm: Tensor; qkv: DecodeStepProjection; o: DecodeStepProjection; post_norm: Tensor; gate_up: DecodeStepProjection; down: DecodeStepProjection;
  key_cache: Tensor; value_cache: Tensor;
}

const isPacked = (w: unknown): w is QuantWeight & { readonly dtype: DTypeName } =>
  !(w instanceof Tensor) && typeof w === 'object' && w !== null && (w as QuantWeight).qdata instanceof Tensor && typeof (w as QuantWeight).layout === 'object';
/** [N, K] of a projection weight, float or packed. */
const projShape = (w: DecodeStepProjection): readonly number[] => (isPacked(w) ? [w.layout.n, w.layout.k] : w.shape);
/** x · wᵀ for a float or packed weight (nbx.quant's definition: dequantize, then matmul, up to the order of sums). */
const project = (op: string, x: Tensor, w: DecodeStepProjection): Tensor => (isPacked(w) ? quantMatmul(op, x, w) : linear(x, w) as Tensor);
/** The kernel contract's view of a projection weight. */
const projRef = (w: DecodeStepProjection): DecodeStepWeight =>
  (isPacked(w) ? { layout: w.layout, qdata: w.qdata.ref(), scales: w.scales?.ref() ?? null, zeros: w.zeros?.ref() ?? null } : w.ref());

/** A packed projection weight of fused_decode_step: its shape, its float form's dtype (the model's) and its device. */
function checkPacked(op: string, embed: Tensor, w: QuantWeight & { readonly dtype: DTypeName }, shape: readonly number[], name: string): void {
  if (!sameShape(projShape(w), shape)) throw new ShapeError(op, `${name} must be ${fmtShape(shape)}, got a quantized weight ${fmtShape(projShape(w))}`);
  if (w.dtype !== embed.dt) throw new DTypeError(op, `${name}: a quantized weight whose float form is ${w.dtype}, the model's dtype is ${embed.dt}`);
  if (w.qdata.device !== embed.device) throw new ValueError(op, `${name} is on ${w.qdata.device}, embed on ${embed.device}`);
}

/**
 * A decode step of B sequences of a pre-norm Llama-family decoder (RMSNorm, q/k/v without bias, half-split
 * RoPE, grouped-query attention over a static cache, SiLU-gated MLP, untied or tied lm_head): returns
 * [logits [B, 1, V], argmax [B] int64] and writes each sequence's key and value into each layer's cache at
 * cache_index. Its definition is this composition, the op-by-op step the decoder runs: embedding(ids);
 * per layer (add +) rms_norm, linear(qkv), rotary_and_cache, decode_attention over positions ≤
 * cache_index that are not padding, linear(o), fused_add_rms_norm, linear(gate_up),
 * gated_activation(silu), linear(down); the final norm, linear(lm_head), argmax. A device with the
 * 'decode_step' kernel runs the whole step in one launch (src/backend/cuda/kernels/decode_step.ts), the
 * same values up to the order of float sums.
 * ids [B, 1] int64, cache_index [1] int64 (shared by the sequences), not_padding [B, S] bool, cos/sin [B, 1, R]
 * (each sequence's position), caches [B, KVH, S, D].
 */
export const fused_decode_step = def('llm.fused_decode_step(ids, cache_index, not_padding, cos, sin, embed, layers, final_norm, lm_head, *, heads, kv_heads, eps, scaling)', (a): [Tensor, Tensor] => {
  const op = 'llm.fused_decode_step';
  const ids = asT(op, a.ids, 'ids'), idx = asT(op, a.cache_index, 'cache_index'), notPad = asT(op, a.not_padding, 'not_padding');
  const cos = asT(op, a.cos, 'cos'), sin = asT(op, a.sin, 'sin'), embed = asT(op, a.embed, 'embed');
  const fnorm = asT(op, a.final_norm, 'final_norm'), lm = isPacked(a.lm_head) ? a.lm_head : asT(op, a.lm_head, 'lm_head');
  const layers = a.layers as DecodeStepLayerTensors[];
  if (!Array.isArray(layers)) throw new TypeError(`${op}: argument 'layers' must be an array of layer tensors`);
  const H = Number(a.heads), KVH = Number(a.kv_heads), eps = Number(a.eps), scaling = Number(a.scaling);
  needFloat(op, embed, 'embed');
  if (ids.dt !== 'int64' || ids.ndim !== 2 || ids.shape[1] !== 1 || ids.shape[0]! < 1) throw new DTypeError(op, `ids must be int64 ids [B, 1], got ${ids.dt} ${fmtShape(ids.shape)}`);
  if (idx.dt !== 'int64' || idx.numel() !== 1) throw new DTypeError(op, `cache_index must be one int64 index [1], got ${idx.dt} ${fmtShape(idx.shape)}`);
  const B = ids.shape[0]!;
  if (embed.ndim !== 2 || notPad.ndim !== 2 || notPad.shape[0] !== B || !Number.isInteger(H) || !Number.isInteger(KVH) || H <= 0 || KVH <= 0 || H % KVH !== 0) {
    throw new ShapeError(op, `expected embed [V, hidden], not_padding [${B}, S] (ids [${B}, 1]) and heads a multiple of kv_heads; got embed ${fmtShape(embed.shape)}, not_padding ${fmtShape(notPad.shape)}, heads ${a.heads}, kv_heads ${a.kv_heads}`);
  }
  const [V, Hd] = embed.shape as [number, number];
  const S = notPad.shape[1]!;
  const D = layers.length ? layers[0]!.key_cache.shape[3]! : 0;
  const I = layers.length ? projShape(layers[0]!.down)[1]! : 0;
  for (const [i, ly] of layers.entries()) {
    const want: [DecodeStepProjection, number[], string][] = [[ly.input_norm, [Hd], 'input_norm'], [ly.qkv, [(H + 2 * KVH) * D, Hd], 'qkv'], [ly.o, [Hd, H * D], 'o'], [ly.post_norm, [Hd], 'post_norm'],
      [ly.gate_up, [2 * I, Hd], 'gate_up'], [ly.down, [Hd, I], 'down'], [ly.key_cache, [B, KVH, S, D], 'key_cache'], [ly.value_cache, [B, KVH, S, D], 'value_cache']];
    for (const [t, shape, name] of want) {
      if (isPacked(t)) { checkPacked(op, embed, t, shape, `layers[${i}].${name}`); continue; }
      if (!(t instanceof Tensor) || !sameShape(t.shape, shape)) throw new ShapeError(op, `layers[${i}].${name} must be ${fmtShape(shape)}, got ${t instanceof Tensor ? fmtShape(t.shape) : typeof t}`);
      sameDType(op, embed, t, 'embed', `layers[${i}].${name}`); sameDevice(op, embed, t, `layers[${i}].${name}`);
    }
  }
  if (isPacked(lm)) checkPacked(op, embed, lm, [V, Hd], 'lm_head');
  if (!sameShape(projShape(lm), [V, Hd]) || !sameShape(fnorm.shape, [Hd])) throw new ShapeError(op, `lm_head must be [${V}, ${Hd}] and final_norm [${Hd}], got ${fmtShape(projShape(lm))} and ${fmtShape(fnorm.shape)}`);
  for (const [t, n] of [[fnorm, 'final_norm'], [cos, 'cos'], [sin, 'sin'], ...(isPacked(lm) ? [] : [[lm, 'lm_head']] as const)] as const) { sameDType(op, embed, t, 'embed', n); sameDevice(op, embed, t, n); }
  for (const [t, n] of [[ids, 'ids'], [idx, 'cache_index'], [notPad, 'not_padding']] as const) sameDevice(op, embed, t, n);
  const R = cos.shape[cos.ndim - 1] ?? 0;
  if (cos.numel() !== B * R || !sameShape(sin.shape, cos.shape)) throw new ShapeError(op, `cos and sin must be [${B}, 1, R] (one row per sequence), got ${fmtShape(cos.shape)} and ${fmtShape(sin.shape)}`);
  if (layers.length && B <= decodeStepMaxBatch(embed)) {
    const logits = Tensor.empty([B, 1, V], embed.dt, embed.device, false), next = Tensor.empty([B], 'int64', embed.device, false);
    const flat = (t: Tensor): Tensor => t.view([t.numel()]);
    let took = false;
    try {
      took = kernel('decode_step', embed.device, op)({
        ids: flat(ids).ref(), cacheIndex: flat(idx).ref(), notPadding: flat(notPad).ref(), cos: flat(cos).ref(), sin: flat(sin).ref(), embed: embed.ref(),
        layers: layers.map((ly) => ({ inputNorm: ly.input_norm.ref(), qkv: projRef(ly.qkv), o: projRef(ly.o), postNorm: ly.post_norm.ref(), gateUp: projRef(ly.gate_up),
          down: projRef(ly.down), keyCache: ly.key_cache.ref(), valueCache: ly.value_cache.ref() })),
        finalNorm: fnorm.ref(), lmHead: projRef(lm), logits: logits.view([B * V]).ref(), next: next.ref(),
        heads: H, kvHeads: KVH, headDim: D, intermediate: I, eps, scaling,
      });
    } catch (e) { logits.dispose(); next.dispose(); throw e; }
    if (took) return [logits, next];
    logits.dispose(); next.dispose();
  }
  return scope(() => {
    const x = index_select(embed, 0, ids.view([B])).view([B, 1, Hd]);
    const written = arange(0, S, { dtype: 'int64', device: embed.device }).le(idx.view([1]));
    const mask = written.logical_and(notPad).view([B, 1, 1, S]);
    let h: Tensor = x, residual: Tensor | null = null;
    for (const ly of layers) {
      let n: Tensor;
      if (residual === null) { n = rms_norm(h, [Hd], ly.input_norm, eps) as Tensor; residual = h; }
      else [n, residual] = fused_add_rms_norm(h, residual, ly.input_norm, eps) as [Tensor, Tensor];
      const qkv = project(op, n, ly.qkv).view([B, 1, H + 2 * KVH, D]);
      const q = qkv.slice(2, 0, H).transpose(1, 2), k = qkv.slice(2, H, H + KVH).transpose(1, 2), v = qkv.slice(2, H + KVH).transpose(1, 2);
      const qr = rotary_and_cache(q, k, v, cos.view([B, 1, R]), sin.view([B, 1, R]), ly.key_cache, ly.value_cache, idx.view([1])) as Tensor;
      const att = (decode_attention(qr, ly.key_cache, ly.value_cache, mask, { scale: scaling }) as Tensor).transpose(1, 2).reshape([B, 1, H * D]);
      const o = project(op, att, ly.o);
      const [n2, r2] = fused_add_rms_norm(o, residual, ly.post_norm, eps) as [Tensor, Tensor];
      residual = r2;
      h = project(op, gated_activation(project(op, n2, ly.gate_up), null, { act: 'silu' }) as Tensor, ly.down);
    }
    const fin = residual === null ? rms_norm(h, [Hd], fnorm, eps) as Tensor : (fused_add_rms_norm(h, residual, fnorm, eps) as [Tensor, Tensor])[0];
    const logits = project(op, fin, lm);
    return [logits, argmax(logits.view([B, V]), 1) as Tensor];
  }) as [Tensor, Tensor];
});
