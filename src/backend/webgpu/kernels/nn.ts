// WebGPU kernels of the nn family, same signatures as the CPU ones (src/backend/cpu/kernels/nn.ts): 'softmax'
// (log/softmin, attention masks, causal mask, safe rows) and 'row_norm' (layer/RMS/group norm
// statistics and normalization). A workgroup per row; fixed-order trees, so results are reproducible.

import { DTYPES, type DTypeName } from '../../../dtype/dtypes.js';
import type { StridedRef } from '../../backend.js';
import { WGSL as R, perWord, checkWgslDType } from '../../../ir/render_wgsl.js';
import { UnsupportedError } from '../../../errors.js';
import type { Program, WebGPUBackend, WGBuffer } from '../runtime/backend.js';
import { module, U } from '../runtime/elementwise.js';
import type { RowNormParams, SoftmaxParams } from '../../../kernels/nn.js';

const programs = new Map<string, Program>();
function program(key: string, access: string, words: number, source: () => string): Program {
  let p = programs.get(key);
  if (!p) { p = { key, access, words, source }; programs.set(key, p); }
  return p;
}
const f32w = (v: number): number => new Uint32Array(new Float32Array([v]).buffer)[0]!;
const nextPow2 = (v: number): number => 2 ** Math.ceil(Math.log2(Math.max(1, v)));
const outAccess = (d: DTypeName): string => (perWord(d) > 1 ? 'a' : 'w');
/** Stores f32 value `v` as element `idx` of writable binding `buf` (atomic when packed). */
const store = (d: DTypeName, buf: string, idx: string, v: string): string => {
  const bits = R.bits(d, R.castExpr('float32', d, v));
  return perWord(d) > 1 ? R.storeShared(d, buf, idx, bits) : `${buf}[${idx}] = ${bits};`;
};
/** Stores i32 value `v` as integer dtype d (the store wraps it, as C and PyTorch's integer kernels). */
const storeInt = (d: DTypeName, buf: string, idx: string, v: string): string =>
  (perWord(d) > 1 ? R.storeShared(d, buf, idx, R.bits(d, v)) : `${buf}[${idx}] = ${R.bits(d, v)};`);
const checkFloat = (op: string, r: StridedRef | undefined): void => {
  if (!r) return;
  checkWgslDType(op, r.dtype);
  if (DTYPES[r.dtype].kind !== 'float') throw new UnsupportedError(op, `webgpu ${op} takes float tensors, got ${r.dtype}`);
};

/**
 * The workgroup tree over `sh` (fixed order); leaves the merged value in `v` for every invocation, as a
 * uniform value (workgroupUniformLoad), so control flow may depend on it.
 */
function tree(wg: number, v: string, merge: string): string {
  return `sh[lid] = ${v};
  workgroupBarrier();
  for (var s = ${wg / 2}u; s > 0u; s >>= 1u) {
    if (lid < s) { let a = sh[lid]; let b = sh[lid + s]; sh[lid] = ${merge}; }
    workgroupBarrier();
  }
  ${v} = workgroupUniformLoad(&sh[0]);
  workgroupBarrier();`;
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

// ---- convolution ---------------------------------------------------------------------------------

/**
 * Direct convolution (and its transpose): a thread per output element, summing over the group's input
 * channels and the kernel taps in float32, or for integers in i32 (exact modulo 2^32, then wrapped to
 * the dtype by the store: the CPU's exact, wrapping integer convolution). Operands are contiguous [N, C, D, H, W] (1-D/2-D as 3-D).
 * uniform: [total, N, C, D, H, W, CO, KD, KH, KW, OD, OH, OW, sD, sH, sW, pD, pH, pW, dD, dH, dW, groups,
 * xoff, woff, boff, ooff, hasBias]
 */
function convProgram(d: DTypeName, transposed: boolean, wg: number): Program {
  const access = `${outAccess(d)}rrr`;
  return program(`conv|${d}|${transposed}|${wg}`, access, 28, () => {
    const V = (name: string, i: number): string => `let ${name} = ${U(i)};`;
    const names = ['total', 'N', 'C', 'D', 'H', 'W', 'CO', 'KD', 'KH', 'KW', 'OD', 'OH', 'OW', 'sD', 'sH', 'sW', 'pD', 'pH', 'pW',
      'dD', 'dH', 'dW', 'groups', 'xoff', 'woff', 'boff', 'ooff', 'hasBias'];
    const decl = names.map((nm, i) => V(nm, i)).join(' ');
    const x = (idx: string): string => R.load(d, 'b2', idx);
    const w = (idx: string): string => R.load(d, 'b3', idx);
    const isF = DTYPES[d].kind === 'float';
    // conv: input position = out * stride - pad + k * dilation; transpose: out = in * stride - pad + k * dilation
    const inner = transposed
      ? `let COg = CO / groups; let grp = co / COg; let col = co % COg;
  for (var ci = grp * Cg; ci < (grp + 1u) * Cg; ci++) {
    for (var kd = 0u; kd < KD; kd++) { let tz = i32(oz) + i32(pD) - i32(kd * dD); if (tz < 0 || tz % i32(sD) != 0) { continue; } let iz = u32(tz) / sD; if (iz >= D) { continue; }
    for (var kh = 0u; kh < KH; kh++) { let ty = i32(oy) + i32(pH) - i32(kh * dH); if (ty < 0 || ty % i32(sH) != 0) { continue; } let iy = u32(ty) / sH; if (iy >= H) { continue; }
    for (var kw = 0u; kw < KW; kw++) { let tx = i32(ox) + i32(pW) - i32(kw * dW); if (tx < 0 || tx % i32(sW) != 0) { continue; } let ix = u32(tx) / sW; if (ix >= W) { continue; }
      acc += ${x('xoff + (((n * C + ci) * D + iz) * H + iy) * W + ix')} * ${w('woff + (((ci * COg + col) * KD + kd) * KH + kh) * KW + kw')};
    } } } }`
      : `let COg = CO / groups; let grp = co / COg;
  for (var cl = 0u; cl < Cg; cl++) {
    let ci = grp * Cg + cl;
    for (var kd = 0u; kd < KD; kd++) { let iz = i32(oz * sD + kd * dD) - i32(pD); if (iz < 0 || iz >= i32(D)) { continue; }
    for (var kh = 0u; kh < KH; kh++) { let iy = i32(oy * sH + kh * dH) - i32(pH); if (iy < 0 || iy >= i32(H)) { continue; }
    for (var kw = 0u; kw < KW; kw++) { let ix = i32(ox * sW + kw * dW) - i32(pW); if (ix < 0 || ix >= i32(W)) { continue; }
      acc += ${x('xoff + (((n * C + ci) * D + u32(iz)) * H + u32(iy)) * W + u32(ix)')} * ${w('woff + (((co * Cg + cl) * KD + kd) * KH + kh) * KW + kw')};
    } } } }`;
    const body = `${decl}
  if (g >= total) { return; }
  var q = g;
  let ox = q % OW; q /= OW; let oy = q % OH; q /= OH; let oz = q % OD; q /= OD; let co = q % CO; let n = q / CO;
  let Cg = C / groups;
  var acc = ${isF ? '0.0f' : '0i'};
  if (hasBias != 0u) { acc = ${R.load(d, 'b4', 'boff + co')}; }
  ${inner}
  ${isF ? store(d, 'b1', 'ooff + g', 'acc') : storeInt(d, 'b1', 'ooff + g', 'acc')}`;
    return module(28, access, wg, body);
  });
}

export interface ConvParams {
  x: StridedRef; w: StridedRef; bias: StridedRef | null; out: StridedRef;
  stride: number[]; padding: number[]; dilation: number[]; groups: number;
}

/** Whether the WebGPU convolution takes these operands (float, contiguous): else the caller stages it. */
export function webgpuConvSupports(p: ConvParams): boolean {
  const contiguous = (r: StridedRef): boolean => r.strides.every((s, i) => s === r.shape.slice(i + 1).reduce((a, b) => a * b, 1));
  return [p.x, p.w, p.out, ...(p.bias ? [p.bias] : [])].every((r) => ((DTYPES[r.dtype].kind === 'float' && perWord(r.dtype) <= 2)
    || DTYPES[r.dtype].kind === 'int') && r.dtype === p.x.dtype && (r === p.bias || contiguous(r)));
}

export function webgpuConv(be: WebGPUBackend, p: ConvParams, transposed: boolean): void {
  for (const r of [p.x, p.w, p.out, p.bias ?? undefined]) if (r) checkWgslDType('conv', r.dtype);
  const [N, C, D, H, W] = p.x.shape as number[];
  const [, , KD, KH, KW] = p.w.shape as number[];
  const [, CO, OD, OH, OW] = p.out.shape as number[];
  const total = N! * CO! * OD! * OH! * OW!;
  if (total === 0) return;
  const u = new Uint32Array([total, N!, C!, D!, H!, W!, CO!, KD!, KH!, KW!, OD!, OH!, OW!, ...p.stride, ...p.padding, ...p.dilation, p.groups,
    p.x.offset, p.w.offset, p.bias?.offset ?? 0, p.out.offset, p.bias ? 1 : 0]);
  const outBuf = p.out.buf as WGBuffer;
  const temps: WGBuffer[] = [];
  const rd = (r: StridedRef | null): WGBuffer => {
    const b = (r ?? p.x).buf as WGBuffer;
    if (b !== outBuf) return b;
    const t = be.allocBytes(b.bytes);
    be.copyBuffer(b, t, b.bytes);
    temps.push(t);
    return t;
  };
  const wg = 64;
  be.dispatch(convProgram(p.x.dtype, transposed, wg), [outBuf, rd(p.x), rd(p.w), rd(p.bias)], u, total, wg);
  for (const t of temps) be.free(t);
}

// ---- pooling -------------------------------------------------------------------------------------

/**
 * Window and adaptive pooling over contiguous [B, D, H, W]: a thread per output element, windows bounded
 * exactly as PyTorch's CPU kernels (src/backend/cpu/kernels/pool.ts). uniform: [total, B, D, H, W, OD, OH, OW,
 * kD, kH, kW, sD, sH, sW, pD, pH, pW, dD, dH, dW, adaptive, countIncludePad, divisor bits, hasDivisor, xoff, ooff]
 */
function poolProgram(d: DTypeName, kind: 'max' | 'avg', wg: number): Program {
  const access = `${outAccess(d)}r`;
  return program(`pool|${d}|${kind}|${wg}`, access, 26, () => {
    const names = ['total', 'B', 'D', 'H', 'W', 'OD', 'OH', 'OW', 'kD', 'kH', 'kW', 'sD', 'sH', 'sW', 'pD', 'pH', 'pW', 'dD', 'dH', 'dW',
      'adaptive', 'cip', 'divbits', 'hasDiv', 'xoff', 'ooff'];
    const decl = names.map((nm, i) => `let ${nm} = ${U(i)};`).join(' ');
    // per dim: window [a, b) with step st (and the padded size for averages)
    const dim = (L: string, o: string, n: string): string => `var a${L}: i32; var b${L}: i32; var st${L} = 1; var sz${L} = 1;
  if (adaptive != 0u) { a${L} = i32((${o} * ${n}) / O${L}); b${L} = i32(((${o} + 1u) * ${n} + O${L} - 1u) / O${L}); }
  else {
    a${L} = i32(${o} * s${L}) - i32(p${L});
    ${kind === 'max'
      ? `b${L} = min(a${L} + i32((k${L} - 1u) * d${L}) + 1, i32(${n})); st${L} = i32(d${L}); while (a${L} < 0) { a${L} += st${L}; }`
      : `b${L} = min(a${L} + i32(k${L}), i32(${n} + p${L})); sz${L} = b${L} - a${L}; a${L} = max(a${L}, 0); b${L} = min(b${L}, i32(${n}));`}
  }`;
    const x = R.load(d, 'b2', 'base + u32((z * i32(H) + y) * i32(W) + xx)');
    const isF = DTYPES[d].kind === 'float';
    // integers: the max starts at the dtype's minimum (also the CPU's value for an empty window); the
    // average sums in i32 and truncates toward zero, as the CPU's store of acc / divisor
    const info = DTYPES[d];
    const lowest = isF ? '-nbx_inf()' : info.min === -2147483648 ? 'bitcast<i32>(0x80000000u)' : `${info.min}i`;
    const reduce = kind === 'max'
      ? `var best = ${lowest};
  for (var z = aD; z < bD; z += stD) { for (var y = aH; y < bH; y += stH) { for (var xx = aW; xx < bW; xx += stW) {
    let v = ${x}; if (v > best${isF ? ' || nbx_isnan(v)' : ''}) { best = v; } } } }
  let res = best;`
      : `var acc = ${isF ? '0.0f' : '0i'};
  for (var z = aD; z < bD; z++) { for (var y = aH; y < bH; y++) { for (var xx = aW; xx < bW; xx++) { acc += ${x}; } } }
  let count = f32(max(bD - aD, 0) * max(bH - aH, 0) * max(bW - aW, 0));
  var dv = select(count, f32(szD * szH * szW), cip != 0u && adaptive == 0u);
  if (hasDiv != 0u) { dv = bitcast<f32>(divbits); }
  let empty = aD >= bD || aH >= bH || aW >= bW;
  let res = ${isF ? 'select(acc / dv, 0.0f, empty)' : 'select(acc / max(i32(dv), 1i), 0i, empty)'};`;
    const body = `${decl}
  if (g >= total) { return; }
  var q = g;
  let ow = q % OW; q /= OW; let oh = q % OH; q /= OH; let od = q % OD; let bb = q / OD;
  let base = xoff + bb * D * H * W;
  ${dim('D', 'od', 'D')}
  ${dim('H', 'oh', 'H')}
  ${dim('W', 'ow', 'W')}
  ${reduce}
  ${isF ? store(d, 'b1', 'ooff + g', 'res') : storeInt(d, 'b1', 'ooff + g', 'res')}`;
    return module(26, access, wg, body);
  });
}

export interface PoolParams {
  kind: 'max' | 'avg'; x: StridedRef; out: StridedRef; indices: StridedRef | null;
  kernel?: number[]; stride?: number[]; padding?: number[]; dilation?: number[]; countIncludePad?: boolean; divisor?: number | null;
}

export const webgpuPoolSupports = (p: PoolParams): boolean => !p.indices && ['float', 'int'].includes(DTYPES[p.x.dtype].kind) && p.x.dtype === p.out.dtype;

export function webgpuPool(be: WebGPUBackend, p: PoolParams, adaptive: boolean): void {
  checkWgslDType('pool', p.x.dtype); checkWgslDType('pool', p.out.dtype);
  const [B, D, H, W] = p.x.shape as number[];
  const [, OD, OH, OW] = p.out.shape as number[];
  const total = B! * OD! * OH! * OW!;
  if (total === 0) return;
  const k = p.kernel ?? [1, 1, 1], s = p.stride ?? [1, 1, 1], pad = p.padding ?? [0, 0, 0], dil = p.dilation ?? [1, 1, 1];
  const u = new Uint32Array([total, B!, D!, H!, W!, OD!, OH!, OW!, ...k, ...s, ...pad, ...dil, adaptive ? 1 : 0, p.countIncludePad ? 1 : 0,
    f32w(p.divisor ?? 0), p.divisor ? 1 : 0, p.x.offset, p.out.offset]);
  const outBuf = p.out.buf as WGBuffer;
  let xb = p.x.buf as WGBuffer, temp: WGBuffer | null = null;
  if (xb === outBuf) { temp = be.allocBytes(xb.bytes); be.copyBuffer(xb, temp, xb.bytes); xb = temp; }
  be.dispatch(poolProgram(p.x.dtype, p.kind, 64), [outBuf, xb], u, total, 64);
  if (temp) be.free(temp);
}
