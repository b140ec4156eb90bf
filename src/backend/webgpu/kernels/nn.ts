// WebGPU kernels of the nn family (contract: src/kernels/nn.ts): 'softmax' (log/softmin, attention
// masks, causal mask, safe rows) and 'row_norm' (layer/RMS/group norm statistics and normalization):
// a workgroup per row, fixed-order trees, so results are reproducible. 'nll_loss': one workgroup, a
// fixed-order tree; 'local_response_norm': a thread per element summing its channel window. WGSL has
// no double: sums run in f32 (the CPU's in double, rounded once), so results agree within float32
// rounding, not bit for bit.

import { type DTypeName } from '../../../dtype/dtypes.js';
import type { StridedRef } from '../../backend.js';
import { WGSL as R, checkWgslDType } from '../../../ir/render_wgsl.js';
import type { Program, WebGPUBackend, WGBuffer } from '../runtime/backend.js';
import { module, U } from '../runtime/elementwise.js';
import type { BackendKernels } from '../../../kernels/table.js';
import type { LrnParams, NllParams, RowNormParams, SoftmaxParams } from '../../../kernels/nn.js';
import { IndexError } from '../../../errors.js';
import { bindAll, checkFloat, decompose, dimWords, f32w, fitsI32, loadIndex, nextPow2, outAccess, program, recordErr, store, storeVal, tree } from './util.js';
import { numelOf } from '../../../tensor/shape.js';

let be: WebGPUBackend;
export const kernels = {
  softmax: (p: SoftmaxParams) => webgpuSoftmax(be, p),
  row_norm: (p: RowNormParams) => webgpuRowNorm(be, p),
  nll_loss: webgpuNllLoss,
  local_response_norm: webgpuLocalResponseNorm,
} satisfies BackendKernels;

/** Points this family's kernels at the backend (called once, when the backend starts). */
export function bind(backend: WebGPUBackend): void {
  be = backend;
}

const MAX_NAN = 'select(select(a, b, b > a), select(a, b, nbx_isnan(b)), nbx_isnan(a) || nbx_isnan(b))';

// ---- softmax -------------------------------------------------------------------------------------

const FLAG = { negate: 1, log: 2, safe: 4, causal: 8, mask: 16 };

/**
 * uniform: [rows, n, xs, os, ms, L, c0, flags, xoff, ooff, moff, 0] then per other dim (outermost
 * first): [size, xstride, ostride, mstride]. Bindings: b1 out, b2 x, b3 mask (x again when absent).
 */
function softmaxProgram(xd: DTypeName, od: DTypeName, md: DTypeName, nOther: number, wg: number): Program {
  const words = 12 + 4 * nOther;
  const access = `${outAccess(od)}rr`;
  return program(`softmax|${xd}|${od}|${md}|${nOther}|${wg}`, access, words, () => {
    const dims: string[] = [];
    for (let d = nOther - 1; d >= 0; d--) {
      const w = 12 + 4 * d;
      dims.push(`{ let c = i32(q % ${U(w)}); q = q / ${U(w)}; xo += c * bitcast<i32>(${U(w + 1)}); oo += c * bitcast<i32>(${U(w + 2)}); mo += c * bitcast<i32>(${U(w + 3)}); }`);
    }
    const maskTerm = md === 'bool'
      ? `if (${R.load('bool', 'b3', 'u32(mo + i32(j) * ms)')} == 0i) { v = -nbx_inf(); }`
      : `v = v + ${R.load(md, 'b3', 'u32(mo + i32(j) * ms)')};`;
    const fns = `var<workgroup> sh: array<f32, ${wg}>;
fn nbx_val(j: u32, xo: i32, mo: i32, r: u32) -> f32 {
  let xs = bitcast<i32>(${U(2)}); let ms = bitcast<i32>(${U(4)}); let flags = ${U(7)};
  var v = ${R.load(xd, 'b2', 'u32(xo + i32(j) * xs)')};
  if ((flags & ${FLAG.negate}u) != 0u) { v = -v; }
  if ((flags & ${FLAG.mask}u) != 0u) { ${maskTerm} }
  if ((flags & ${FLAG.causal}u) != 0u && i32(j) > i32(r % ${U(5)}) + bitcast<i32>(${U(6)})) { v = -nbx_inf(); }
  return v;
}`;
    const body = `let r = wid.y * nwg.x + wid.x; if (r >= ${U(0)}) { return; }
  let n = ${U(1)}; let os = bitcast<i32>(${U(3)}); let flags = ${U(7)};
  var q = r; var xo = i32(${U(8)}); var oo = i32(${U(9)}); var mo = i32(${U(10)});
  ${dims.join('\n  ')}
  var m = -nbx_inf();
  for (var j = lid; j < n; j += ${wg}u) { let v = nbx_val(j, xo, mo, r); if (v > m || nbx_isnan(v)) { m = v; } }
  ${tree(wg, 'm', MAX_NAN)}
  if (nbx_isinf(m) && m < 0.0f) {
    let z = select(nbx_nan(), 0.0f, (flags & ${FLAG.safe}u) != 0u);
    for (var j = lid; j < n; j += ${wg}u) { ${store(od, 'b1', 'u32(oo + i32(j) * os)', 'z')} }
    return;
  }
  var s = 0.0f;
  for (var j = lid; j < n; j += ${wg}u) { s += nbx_exp(nbx_val(j, xo, mo, r) - m); }
  ${tree(wg, 's', 'a + b')}
  let lse = m + nbx_log(s); let inv = 1.0f / s;
  for (var j = lid; j < n; j += ${wg}u) {
    let v = nbx_val(j, xo, mo, r);
    let y = select(nbx_exp(v - m) * inv, v - lse, (flags & ${FLAG.log}u) != 0u);
    ${store(od, 'b1', 'u32(oo + i32(j) * os)', 'y')}
  }`;
    return module(words, access, wg, body, fns);
  });
}

export function webgpuSoftmax(be: WebGPUBackend, p: SoftmaxParams): void {
  checkFloat('softmax', p.x); checkFloat('softmax', p.out);
  if (p.mask) checkWgslDType('softmax', p.mask.dtype);
  const { x, out, dim } = p;
  const shape = x.shape;
  const nd = shape.length;
  const n = nd ? shape[dim]! : 1;
  const other = [...Array(nd).keys()].filter((d) => d !== dim);
  const rows = other.reduce((a, d) => a * shape[d]!, 1);
  if (rows === 0 || n === 0) return;
  const mask = p.mask;
  const flags = (p.negate ? FLAG.negate : 0) | (p.log ? FLAG.log : 0) | (p.safe ? FLAG.safe : 0) | (p.causal ? FLAG.causal : 0) | (mask ? FLAG.mask : 0);
  const u = new Uint32Array(12 + 4 * other.length);
  const L = nd >= 2 ? shape[nd - 2]! : 1;
  u.set([rows, n, nd ? x.strides[dim]! : 1, nd ? out.strides[dim]! : 1, mask && nd ? mask.strides[dim]! : 0, L, (p.causalOffset ?? 0) | 0,
    flags, x.offset, out.offset, mask?.offset ?? 0, 0].map((v) => v >>> 0));
  other.forEach((d, k) => u.set([shape[d]!, x.strides[d]! >>> 0, out.strides[d]! >>> 0, (mask?.strides[d] ?? 0) >>> 0], 12 + 4 * k));
  const outBuf = out.buf as WGBuffer;
  // an input in the output's buffer (softmax in place) reads a copy taken first
  const temps: WGBuffer[] = [];
  const src = (b: WGBuffer): WGBuffer => {
    if (b !== outBuf) return b;
    const t = be.allocBytes(b.bytes);
    be.copyBuffer(b, t, b.bytes);
    temps.push(t);
    return t;
  };
  const xb = src(x.buf as WGBuffer);
  const mb = mask ? (mask.buf === x.buf ? xb : src(mask.buf as WGBuffer)) : xb;
  const wg = Math.max(32, Math.min(be.wgReduce, nextPow2(n)));
  be.dispatch(softmaxProgram(x.dtype, out.dtype, mask?.dtype ?? 'float32', other.length, wg), [outBuf, xb, mb], u, rows * wg, wg);
  for (const t of temps) be.free(t);
}

// ---- layer / RMS / group norm rows -----------------------------------------------------------------

/**
 * uniform: [rows, n, eps, rms, groups, chan, xoff, ooff, woff, boff, meanoff, varoff, has(w|b<<1|out<<2|mean<<3|var<<4)]
 * Bindings: b1 out, b2 mean, b3 var (writable; stand-ins when absent), b4 x, b5 weight, b6 bias.
 */
function rowNormProgram(xd: DTypeName, od: DTypeName, sd: DTypeName, wd: DTypeName, bd: DTypeName, wg: number): Program {
  const access = `${outAccess(od)}${outAccess(sd)}${outAccess(sd)}rrr`;
  return program(`row_norm|${xd}|${od}|${sd}|${wd}|${bd}|${wg}`, access, 13, () => {
    const fns = `var<workgroup> sh: array<f32, ${wg}>;`;
    const x = (j: string): string => R.load(xd, 'b4', `${U(6)} + r * n + ${j}`);
    const body = `let r = wid.y * nwg.x + wid.x; if (r >= ${U(0)}) { return; }
  let n = ${U(1)}; let eps = bitcast<f32>(${U(2)}); let rms = ${U(3)} != 0u; let groups = ${U(4)}; let chan = ${U(5)}; let has = ${U(12)};
  // shifted sums: the shift (the row's first element) avoids cancellation when |mean| >> std
  var k = 0.0f;
  if (!rms && n > 0u) { k = ${x('0u')}; }
  var s1 = 0.0f; var s2 = 0.0f;
  for (var j = lid; j < n; j += ${wg}u) { let d = ${x('j')} - k; s1 += d; s2 += d * d; }
  ${tree(wg, 's1', 'a + b')}
  ${tree(wg, 's2', 'a + b')}
  let fn_ = f32(n);
  let mean = select(k + s1 / fn_, 0.0f, rms);
  let vr = select(max((s2 - s1 * s1 / fn_) / fn_, 0.0f), s2 / fn_, rms);
  if (lid == 0u) {
    if ((has & 8u) != 0u) { ${store(sd, 'b2', `${U(10)} + r`, 'mean')} }
    if ((has & 16u) != 0u) { ${store(sd, 'b3', `${U(11)} + r`, 'vr')} }
  }
  if ((has & 4u) == 0u) { return; }
  let rstd = 1.0f / sqrt(vr + eps);
  let wbase = (r % groups) * (n / chan);
  for (var j = lid; j < n; j += ${wg}u) {
    var y = (${x('j')} - mean) * rstd;
    let wi = wbase + j / chan;
    if ((has & 1u) != 0u) { y = y * ${R.load(wd, 'b5', `${U(8)} + wi`)}; }
    if ((has & 2u) != 0u) { y = y + ${R.load(bd, 'b6', `${U(9)} + wi`)}; }
    ${store(od, 'b1', `${U(7)} + r * n + j`, 'y')}
  }`;
    return module(13, access, wg, body, fns);
  });
}

export function webgpuRowNorm(be: WebGPUBackend, p: RowNormParams): void {
  for (const r of [p.x, p.out, p.weight, p.bias, p.mean, p.var]) checkFloat('row_norm', r);
  const { x, rows, n } = p;
  if (rows === 0) return;
  const has = (p.weight ? 1 : 0) | (p.bias ? 2 : 0) | (p.out ? 4 : 0) | (p.mean ? 8 : 0) | (p.var ? 16 : 0);
  const u = new Uint32Array([rows, n, f32w(p.eps), p.mode === 'rms' ? 1 : 0, p.groups ?? 1, p.chan ?? 1, x.offset, p.out?.offset ?? 0,
    p.weight?.offset ?? 0, p.bias?.offset ?? 0, p.mean?.offset ?? 0, p.var?.offset ?? 0, has]);
  // writable bindings must be distinct buffers: absent outputs get scratch buffers of their own
  const scratch: WGBuffer[] = [];
  const w = (r: StridedRef | undefined): WGBuffer => r ? r.buf as WGBuffer : (scratch.push(be.allocBytes(4)), scratch[scratch.length - 1]!);
  const outs = [w(p.out), w(p.mean), w(p.var)];
  const temps: WGBuffer[] = [];
  const rd = (r: StridedRef | undefined): WGBuffer => {
    const b = (r ?? x).buf as WGBuffer;
    if (!outs.includes(b)) return b;
    const t = be.allocBytes(b.bytes);
    be.copyBuffer(b, t, b.bytes);
    temps.push(t);
    return t;
  };
  const ins = [rd(x), rd(p.weight), rd(p.bias)];
  const wg = Math.max(32, Math.min(be.wgReduce, nextPow2(n)));
  const sd = p.mean?.dtype ?? p.var?.dtype ?? 'float32';
  be.dispatch(rowNormProgram(x.dtype, p.out?.dtype ?? 'float32', sd, p.weight?.dtype ?? 'float32', p.bias?.dtype ?? 'float32', wg),
    [...outs, ...ins], u, rows * wg, wg);
  for (const t of [...scratch, ...temps]) be.free(t);
}

// ---- nll_loss ----------------------------------------------------------------------------------------

/**
 * One workgroup: thread lid takes items lid, lid + wg, ... (a fixed order), then two trees. uniform:
 * [items, C, D, ignore, xoff, toff, woff, ooff, soff, has (weight 1, out 2, sums 4), report].
 * b1 out, b2 sums, b3 err, b4 input, b5 target, b6 weight.
 */
function nllProgram(xd: DTypeName, td: DTypeName, wd: DTypeName, od: DTypeName, sd: DTypeName, wg: number): Program {
  const access = `${outAccess(od)}${outAccess(sd)}arrr`;
  return program(`rs.nll|${xd}|${td}|${wd}|${od}|${sd}|${wg}`, access, 11, () => {
    const tree = (v: string): string => `sh[lid] = ${v};
  workgroupBarrier();
  for (var s = ${wg / 2}u; s > 0u; s >>= 1u) { if (lid < s) { sh[lid] = sh[lid] + sh[lid + s]; } workgroupBarrier(); }
  ${v} = sh[0];
  workgroupBarrier();`;
    // int32 or int64 targets (read as i32 with a range flag: one beyond int32 is out of bounds)
    const target = (k: string, v: string): string => loadIndex(td, 'b5', `${U(5)} + ${k}`, v);
    const body = `let items = ${U(0)}; let C = i32(${U(1)}); let D = ${U(2)}; let ignore = bitcast<i32>(${U(3)}); let has = ${U(9)};
  if (${U(10)} != 0u) {
    // report pass: the failed item's target value
    if (lid == 0u) { let e = atomicLoad(&b3[0]); if (e != 0u) { ${target('(~e)', 'tf')} atomicStore(&b3[1], bitcast<u32>(tf)); atomicStore(&b3[3], tf_hi); } }
    return;
  }
  var sum = 0.0f; var wsum = 0.0f;
  for (var k = lid; k < items; k += ${wg}u) {
    ${target('k', 't')}
    // ignored (and failing) items: a zero loss, as the CPU's zero-filled losses
    let tok = ${fitsI32('t')};
    if (!tok || t == ignore || t < 0 || t >= C) {
      if (!tok || t != ignore) { ${recordErr('b3', 'k')} }
      if ((has & 2u) != 0u) { ${storeVal(od, 'b1', `${U(7)} + k`, R.castExpr('float32', od, '0.0f'))} }
      continue;
    }
    let i = k / D; let dd = k % D;
    let v = ${R.castExpr(xd, 'float32', R.load(xd, 'b4', `${U(4)} + (i * u32(C) + u32(t)) * D + dd`))};
    var wt = 1.0f;
    if ((has & 1u) != 0u) { wt = ${R.castExpr(wd, 'float32', R.load(wd, 'b6', `${U(6)} + u32(t)`))}; }
    let l = -wt * v;
    if ((has & 2u) != 0u) { ${storeVal(od, 'b1', `${U(7)} + k`, R.castExpr('float32', od, 'l'))} }
    sum = sum + l; wsum = wsum + wt;
  }
  ${tree('sum')}
  ${tree('wsum')}
  if (lid == 0u && (has & 4u) != 0u) {
    ${storeVal(sd, 'b2', `${U(8)}`, R.castExpr('float32', sd, 'sum'))}
    ${storeVal(sd, 'b2', `${U(8)} + 1u`, R.castExpr('float32', sd, 'wsum'))}
  }`;
    return module(11, access, wg, body, `var<workgroup> sh: array<f32, ${wg}>;`);
  });
}

export function webgpuNllLoss(p: NllParams): void {
  const { input, target, N, C, D } = p;
  for (const r of [input, p.weight, p.out, p.sums]) checkFloat('nll_loss', r);
  if (target.dtype !== 'int64') checkWgslDType('nll_loss', target.dtype);
  const items = N * D;
  const scratch: WGBuffer[] = [];
  const own = (r: StridedRef | undefined): WGBuffer => (r ? r.buf as WGBuffer : (scratch.push(be.allocBytes(8)), scratch[scratch.length - 1]!));
  const err = be.allocBytes(16, true);
  const has = (p.weight ? 1 : 0) | (p.out ? 2 : 0) | (p.sums ? 4 : 0);
  const u = new Uint32Array([items, C, D, p.ignoreIndex >>> 0, input.offset, target.offset, p.weight?.offset ?? 0, p.out?.offset ?? 0,
    p.sums?.offset ?? 0, has, 0]);
  const outs = [own(p.out), own(p.sums), err];
  const { bufs, done } = bindAll(be, outs, [input.buf as WGBuffer, target.buf as WGBuffer, (p.weight ?? input).buf as WGBuffer]);
  const wg = be.wgReduce;
  const prog = nllProgram(input.dtype, target.dtype, p.weight?.dtype ?? 'float32', p.out?.dtype ?? 'float32', p.sums?.dtype ?? 'float32', wg);
  be.dispatch(prog, bufs, u, wg, wg);
  const u2 = u.slice(); u2[10] = 1;
  be.dispatch(prog, bufs, u2, wg, wg);
  done();
  for (const s of scratch) be.free(s);
  be.check('nll_loss', err, (host) => {
    const w = new Int32Array(host.get(err)!, 0, 4);
    if (w[0] !== 0) throw new IndexError('nll_loss', `Target ${(BigInt(w[3]!) << 32n) | BigInt(w[1]! >>> 0)} is out of bounds.`);
  }, outs.slice(0, 2));
  be.free(err);
}

// ---- local response normalization ----------------------------------------------------------------------

/**
 * y = x / (k + alpha/size · Σ x² over channels [c - size/2, c + (size-1)/2])^beta, a thread per element.
 * uniform: [total, n (channels), lo, hi, alpha, beta, k, size, xoff, ooff, xs (channel stride of x)] then
 * per dim [size, x stride, out stride]. b1 out, b2 x.
 */
function lrnProgram(xd: DTypeName, od: DTypeName, nd: number, dim: number, wg: number): Program {
  const words = 11 + 3 * nd;
  const access = `${outAccess(od)}r`;
  return program(`rs.lrn|${xd}|${od}|${nd}|${dim}|${wg}`, access, words, () => {
    const x = (idx: string): string => R.castExpr(xd, 'float32', R.load(xd, 'b2', idx));
    const body = `if (g >= ${U(0)}) { return; }
  var xo = i32(${U(8)}); var oo = i32(${U(9)}); var cc: array<u32, ${nd}>;
  ${decompose(nd, 11, 3, ['xo', 'oo'], 'g', 'cc')}
  let c = i32(cc[${dim}]); let n = i32(${U(1)}); let xs = bitcast<i32>(${U(10)});
  let j0 = max(0, c - i32(${U(2)})); let j1 = min(n - 1, c + i32(${U(3)}));
  var s = 0.0f;
  for (var j = j0; j <= j1; j++) { let v = ${x('u32(xo + (j - c) * xs)')}; s = s + v * v; }
  let alpha = bitcast<f32>(${U(4)}); let beta = bitcast<f32>(${U(5)}); let kk = bitcast<f32>(${U(6)});
  let y = ${x('u32(xo)')} / nbx_pow_f(kk + (alpha * s) / f32(${U(7)}), beta);
  ${storeVal(od, 'b1', 'u32(oo)', R.castExpr('float32', od, 'y'))}`;
    return module(words, access, wg, body);
  });
}

export function webgpuLocalResponseNorm(p: LrnParams): void {
  const { x, out, dim, size } = p;
  checkFloat('local_response_norm', x); checkFloat('local_response_norm', out);
  const total = numelOf(x.shape);
  if (total === 0) return;
  const n = x.shape[dim]!;
  const u = new Uint32Array([total, n, Math.floor(size / 2), Math.floor((size - 1) / 2), f32w(p.alpha), f32w(p.beta), f32w(p.k), size,
    x.offset, out.offset, x.strides[dim]! >>> 0, ...dimWords(x.shape, [x.strides, out.strides])]);
  const { bufs, done } = bindAll(be, [out.buf as WGBuffer], [x.buf as WGBuffer]);
  const wg = be.wgElementwise;
  be.dispatch(lrnProgram(x.dtype, out.dtype, x.shape.length, dim, wg), bufs, u, total, wg);
  done();
}
