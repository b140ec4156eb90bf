// Packed quantized weights on WebGPU (contract: src/kernels/quant.ts): quant_matmul and dequantize for
// every format of the contract: int8 (per channel), int4 (group-wise, symmetric/asymmetric), fp8 e4m3
// (per tensor or channel) and the GGUF block formats; float32/float16/bfloat16 activations (others are
// refused from QuantFeatures by the op layer, a typed error naming these).
//
// Decode (m ≤ 8, K a multiple of 32): a dequantizing GEMV, one workgroup of 64 invocations per output
// feature; invocation t decodes sub-blocks t, t + 64, ... of the row (32 elements each, in halves of 16
// with the affine map w = a·q + b of the CUDA kernel: src/backend/cuda/kernels/quant.ts) and multiplies
// them with every row of x, float32 sums; the 64 partial sums meet in workgroup memory (a fixed tree, the
// same bits every run). The packed row is read once per call. Packed bytes are read as u32 words (a
// byte-aligned word from two when a block's field is not 4-byte aligned). Prefill (m > 8) and the shapes
// the GEMV does not take: dequantize into a scratch weight in x's dtype, then the backend's GEMM.
// Bit layouts: src/io/gguf.ts's dequantizeBlocks and the contract's comments.

import type { DTypeName } from '../../../dtype/dtypes.js';
import type { StridedRef } from '../../backend.js';
import type { BackendKernels } from '../../../kernels/table.js';
import type { DequantizeParams, QuantFeatures, QuantFormat, QuantLayout, QuantMatmulParams } from '../../../kernels/quant.js';
import { kernel } from '../../../kernels/registry.js';
import { WGSL as R } from '../../../ir/render_wgsl.js';
import { ShapeError, UnsupportedError } from '../../../errors.js';
import type { Program, WebGPUBackend, WGBuffer } from '../runtime/backend.js';
import { module, U } from '../runtime/elementwise.js';
import { bindAll, outAccess, program, store } from './util.js';

let be: WebGPUBackend;
/** Points this family's kernels at the backend (called once, when the backend starts). */
export function bind(backend: WebGPUBackend): void { be = backend; }

type QDType = 'float32' | 'float16' | 'bfloat16';
const DTYPES_OK: readonly QDType[] = ['float32', 'float16', 'bfloat16'];
export const WEBGPU_QUANT_FORMATS: readonly QuantFormat[] = ['int8', 'int4', 'fp8_e4m3', 'q8_0', 'q4_0', 'q4_1', 'q5_0', 'q5_1', 'q2_k', 'q3_k', 'q4_k', 'q5_k', 'q6_k'];
const GGUF: Record<string, { elems: number; bytes: number; mins: boolean }> = {
  q8_0: { elems: 32, bytes: 34, mins: false }, q4_0: { elems: 32, bytes: 18, mins: false }, q4_1: { elems: 32, bytes: 20, mins: true },
  q5_0: { elems: 32, bytes: 22, mins: false }, q5_1: { elems: 32, bytes: 24, mins: true }, q2_k: { elems: 256, bytes: 84, mins: true },
  q3_k: { elems: 256, bytes: 110, mins: false }, q4_k: { elems: 256, bytes: 144, mins: true }, q5_k: { elems: 256, bytes: 176, mins: true },
  q6_k: { elems: 256, bytes: 210, mins: false },
};
const GEMV_MAX_ROWS = 8;
const WG = 64;

/** Helpers reading the packed bytes of binding b3 (array<u32>) at byte index i. */
const QHELPERS = `
fn qb(i: u32) -> u32 { return (b3[i >> 2u] >> ((i & 3u) * 8u)) & 255u; }
fn qw(i: u32) -> u32 { let s = (i & 3u) * 8u; let lo = b3[i >> 2u]; if (s == 0u) { return lo; } return (lo >> s) | (b3[(i >> 2u) + 1u] << (32u - s)); }
fn qf16(i: u32) -> f32 { return unpack2x16float(qw(i) & 0xffffu).x; }
fn sx8(v: u32) -> f32 { return f32(bitcast<i32>(v << 24u) >> 24u); }`;

/** Q4_K and Q5_K: sub-block sb's 6-bit scale and min from the 12 packed bytes (llama.cpp's get_scale_min_k4), a and bb of the affine decode. */
const K_SCALE_MIN = `var sc = 0u; var mn = 0u;
      if (sb < 4u) { sc = qb(bo + 4u + sb) & 63u; mn = qb(bo + 8u + sb) & 63u; }
      else { sc = (qb(bo + 8u + sb) & 15u) | ((qb(bo + sb) >> 6u) << 4u); mn = (qb(bo + 8u + sb) >> 4u) | ((qb(bo + 4u + sb) >> 6u) << 4u); }
      a = qf16(bo) * f32(sc); bb = -(qf16(bo + 2u) * f32(mn));
      let sh = 4u * (sb & 1u);
      `;

/**
 * WGSL statements filling `q` (array<f32, 16>), `a`, `bb` for half `h` of sub-block `sb` of the block
 * whose first byte is `bo` (the CPU dequantizer's numbers as fl(fl(a·q) + bb)); `s`, `z`: int8/int4's
 * scale and zero point.
 */
function decodeWgsl(f: QuantFormat, asym: boolean): string {
  switch (f) {
    case 'int8':
      return `a = s; for (var c = 0u; c < 16u; c += 4u) { let w = qw(bo + 16u * h + c);
      for (var t = 0u; t < 4u; t++) { q[c + t] = sx8(w >> (8u * t)); } }`;
    case 'int4':
      return `a = s; for (var c = 0u; c < 16u; c += 8u) { let w = qw(bo + 8u * h + c / 2u);
      for (var t = 0u; t < 8u; t++) { q[c + t] = f32((w >> (4u * t)) & 15u) - ${asym ? 'z' : '8.0'}; } }`;
    case 'q8_0':
      return `a = qf16(bo); for (var c = 0u; c < 16u; c += 4u) { let w = qw(bo + 2u + 16u * h + c);
      for (var t = 0u; t < 4u; t++) { q[c + t] = sx8(w >> (8u * t)); } }`;
    case 'fp8_e4m3':
      return `a = s; for (var c = 0u; c < 16u; c += 4u) { let w = qw(bo + 16u * h + c);
      for (var t = 0u; t < 4u; t++) { q[c + t] = nbx_e4m3_to_f((w >> (8u * t)) & 255u); } }`;
    case 'q4_0': case 'q4_1':
      return `a = qf16(bo); ${f === 'q4_1' ? 'bb = qf16(bo + 2u);' : ''}
      for (var c = 0u; c < 16u; c += 4u) { let w = qw(bo + ${f === 'q4_0' ? 2 : 4}u + c) >> (4u * h);
      for (var t = 0u; t < 4u; t++) { q[c + t] = f32((w >> (8u * t)) & 15u)${f === 'q4_0' ? ' - 8.0' : ''}; } }`;
    case 'q5_0': case 'q5_1': {
      const one = f === 'q5_1';
      return `a = qf16(bo); ${one ? 'bb = qf16(bo + 2u);' : ''} let hb = qw(bo + ${one ? 4 : 2}u) >> (16u * h);
      for (var c = 0u; c < 16u; c += 4u) { let w = qw(bo + ${one ? 8 : 6}u + c) >> (4u * h);
      for (var t = 0u; t < 4u; t++) { q[c + t] = f32(((w >> (8u * t)) & 15u) | (((hb >> (c + t)) & 1u) << 4u))${one ? '' : ' - 16.0'}; } }`;
    }
    case 'q2_k':
      return `let sc = qb(bo + 2u * sb + h);
      a = qf16(bo + 80u) * f32(sc & 15u); bb = -(qf16(bo + 82u) * f32(sc >> 4u));
      let sh = 2u * (sb & 3u);
      for (var c = 0u; c < 16u; c += 4u) { let w = qw(bo + 16u + (sb >> 2u) * 32u + 16u * h + c) >> sh;
      for (var t = 0u; t < 4u; t++) { q[c + t] = f32((w >> (8u * t)) & 3u); } }`;
    case 'q3_k':
      return `let is = 2u * sb + h; let j = is & 3u; let wd = is >> 2u;
      let sbyte = qb(bo + 96u + (wd & 1u) * 4u + j);
      let lo = select(sbyte >> 4u, sbyte & 15u, wd < 2u);
      let hi = (qb(bo + 104u + j) >> (2u * wd)) & 3u;
      a = qf16(bo + 108u) * f32(i32(lo | (hi << 4u)) - 32);
      let sh = 2u * (sb & 3u);
      for (var c = 0u; c < 16u; c += 4u) {
        let w = qw(bo + 32u + (sb >> 2u) * 32u + 16u * h + c) >> sh; let m = qw(bo + 16u * h + c) >> sb;
        for (var t = 0u; t < 4u; t++) { q[c + t] = f32(((w >> (8u * t)) & 3u) + (((m >> (8u * t)) & 1u) << 2u)) - 4.0; } }`;
    case 'q5_k':
      return `${K_SCALE_MIN}
      for (var c = 0u; c < 16u; c += 4u) { let w = qw(bo + 48u + (sb >> 1u) * 32u + 16u * h + c) >> sh; let m = qw(bo + 16u + 16u * h + c) >> sb;
      for (var t = 0u; t < 4u; t++) { q[c + t] = f32(((w >> (8u * t)) & 15u) | (((m >> (8u * t)) & 1u) << 4u)); } }`;
    case 'q4_k':
      return `${K_SCALE_MIN}
      for (var c = 0u; c < 16u; c += 4u) { let w = qw(bo + 16u + (sb >> 1u) * 32u + 16u * h + c) >> sh;
      for (var t = 0u; t < 4u; t++) { q[c + t] = f32((w >> (8u * t)) & 15u); } }`;
    case 'q6_k':
      return `let nn = sb >> 2u; let p = sb & 3u;
      a = qf16(bo + 208u) * sx8(qb(bo + 192u + nn * 8u + 2u * p + h));
      for (var c = 0u; c < 16u; c += 4u) {
        let w = qw(bo + nn * 64u + (p & 1u) * 32u + 16u * h + c) >> (4u * (p >> 1u));
        let m = qw(bo + 128u + nn * 32u + 16u * h + c) >> (2u * p);
        for (var t = 0u; t < 4u; t++) { q[c + t] = f32(((w >> (8u * t)) & 15u) | (((m >> (8u * t)) & 3u) << 4u)) - 32.0; } }`;
    default: throw new UnsupportedError('quant_matmul', `webgpu has no decoder for '${f}'`);
  }
}

/** Sub-block geometry: bytes per block and sub-blocks per block (int8/int4: one 32-element sub-block). */
const geom = (f: QuantFormat): { bytes: number; spb: number; mins: boolean } =>
  (f === 'int8' || f === 'fp8_e4m3' ? { bytes: 32, spb: 1, mins: false } : f === 'int4' ? { bytes: 16, spb: 1, mins: false }
    : { bytes: GGUF[f]!.bytes, spb: GGUF[f]!.elems / 32, mins: GGUF[f]!.mins });

/**
 * uniform: [m, n, K, rowBytes, qoff (bytes), xoff, ooff, boff, soff, zoff, sRow, gshift, hasBias].
 * b1 out, b2 x, b3 packed bytes, b4 scales, b5 zeros, b6 bias.
 */
function gemvProgram(f: QuantFormat, asym: boolean, d: QDType, mr: number): Program {
  const access = `${outAccess(d)}rrrrr`;
  return program(`quant.gemv|${f}|${asym}|${d}|${mr}`, access, 13, () => {
    const g = geom(f), ext = f === 'int8' || f === 'int4' || f === 'fp8_e4m3';
    const body = `let m = ${U(0)}; let N = ${U(1)}; let K = ${U(2)}; let rowBytes = ${U(3)}; let qoff = ${U(4)};
  let xoff = ${U(5)}; let ooff = ${U(6)}; let boff = ${U(7)}; let soff = ${U(8)}; let zoff = ${U(9)}; let sRow = ${U(10)}; let gshift = ${U(11)};
  let n = wid.y * nwg.x + wid.x;
  var acc: array<f32, ${mr}>;
  if (n < N) {
    let nsub = K / 32u;
    let rowb = qoff + n * rowBytes;
    for (var gs = lid; gs < nsub; gs += ${WG}u) {
      let bo = rowb + (gs / ${g.spb}u) * ${g.bytes}u; let sb = gs % ${g.spb}u;
      ${ext ? `let si = soff + n * sRow + ((gs * 32u) >> gshift); let s = bitcast<f32>(b4[si]); let z = ${asym ? `bitcast<f32>(b5[zoff + n * sRow + ((gs * 32u) >> gshift)])` : '0.0'};` : 'let s = 0.0; let z = 0.0;'}
      for (var h = 0u; h < 2u; h++) {
        var q: array<f32, 16>; var a = 0.0; var bb = 0.0;
        ${decodeWgsl(f, asym)}
        for (var i = 0u; i < ${mr}u; i++) {
          if (i < m) {
            let xb = xoff + i * K + gs * 32u + h * 16u;
            var dot = 0.0; var sx = 0.0;
            for (var c = 0u; c < 16u; c++) { let xv = ${R.load(d, 'b2', 'xb + c')}; dot = fma(xv, q[c], dot);${g.mins ? ' sx += xv;' : ''} }
            acc[i] = acc[i] + a * dot${g.mins ? ' + bb * sx' : ''};
          }
        }
      }
    }
  }
  for (var i = 0u; i < ${mr}u; i++) { red[i * ${WG}u + lid] = acc[i]; }
  workgroupBarrier();
  for (var st = ${WG / 2}u; st > 0u; st >>= 1u) {
    if (lid < st) { for (var i = 0u; i < ${mr}u; i++) { red[i * ${WG}u + lid] = red[i * ${WG}u + lid] + red[i * ${WG}u + lid + st]; } }
    workgroupBarrier();
  }
  if (lid == 0u && n < N) {
    for (var i = 0u; i < ${mr}u; i++) {
      if (i < m) {
        var v = red[i * ${WG}u];
        if (${U(12)} != 0u) { v = v + ${R.load(d, 'b6', 'boff + n')}; }
        let oi = ooff + i * N + n;
        ${store(d, 'b1', 'oi', 'v')}
      }
    }
  }`;
    const entryCode = `@compute @workgroup_size(${WG})
fn main(@builtin(workgroup_id) wid: vec3u, @builtin(num_workgroups) nwg: vec3u, @builtin(local_invocation_index) lid: u32) {
  ${body}
}`;
    return module(13, access, WG, body, `${QHELPERS}\nvar<workgroup> red: array<f32, ${mr * WG}>;`, entryCode);
  });
}

/**
 * Dequantize: GGUF formats a thread per 16-element half (the GEMV's decoder), int8/int4 a thread per
 * element; the CPU dequantizer's rounding (fl(a·q) (+ b)), stored rounded once into the dtype.
 * uniform: [total, K, rowBytes, qoff, ooff, soff, zoff, sRow, gsize]. b1 out, b3 packed, b4 scales, b5 zeros (b2 unused).
 */
function dequantProgram(f: QuantFormat, asym: boolean, d: QDType): Program {
  const access = `${outAccess(d)}rrrr`;
  return program(`quant.dequant|${f}|${asym}|${d}`, access, 9, () => {
    const head = `let total = ${U(0)}; let K = ${U(1)}; let rowBytes = ${U(2)}; let qoff = ${U(3)}; let ooff = ${U(4)};
  let soff = ${U(5)}; let zoff = ${U(6)}; let sRow = ${U(7)}; let gsize = ${U(8)};
  if (g >= total) { return; }`;
    let body: string;
    if (f === 'int8' || f === 'int4' || f === 'fp8_e4m3') {
      body = `${head}
  let row = g / K; let k = g % K;
  let si = soff + row * sRow + k / gsize;
  let s = bitcast<f32>(b4[si]);
  ${f === 'int8' ? 'let v = sx8(qb(qoff + row * rowBytes + k)) * s;' : f === 'fp8_e4m3' ? 'let v = nbx_e4m3_to_f(qb(qoff + row * rowBytes + k)) * s;'
    : `let v = (f32((qb(qoff + row * rowBytes + k / 2u) >> (4u * (k & 1u))) & 15u) - ${asym ? 'bitcast<f32>(b5[zoff + row * sRow + k / gsize])' : '8.0'}) * s;`}
  let oi = ooff + g;
  ${store(d, 'b1', 'oi', 'v')}`;
    } else {
      const gm = geom(f);
      body = `${head}
  let halves = K / 16u;
  let row = g / halves; let hh = g % halves; let gs = hh / 2u; let h = hh & 1u;
  let bo = qoff + row * rowBytes + (gs / ${gm.spb}u) * ${gm.bytes}u; let sb = gs % ${gm.spb}u;
  let s = 0.0; let z = 0.0;
  var q: array<f32, 16>; var a = 0.0; var bb = 0.0;
  ${decodeWgsl(f, false)}
  for (var c = 0u; c < 16u; c++) {
    let v = ${gm.mins ? 'a * q[c] + bb' : 'a * q[c]'};
    let oi = ooff + row * K + hh * 16u + c;
    ${store(d, 'b1', 'oi', 'v')}
  }`;
    }
    return module(9, access, be.wgElementwise, body, QHELPERS);
  });
}

interface Checked { f: QuantFormat; d: QDType; n: number; k: number; asym: boolean; sRow: number; gsize: number }

function check(op: string, p: { qweight: StridedRef; scales?: StridedRef; zeros?: StridedRef; layout: QuantLayout; dtype: DTypeName }): Checked {
  const L = p.layout, f = L.format;
  if (!WEBGPU_QUANT_FORMATS.includes(f)) throw new UnsupportedError(op, `webgpu has no kernel for quantized format '${f}' (supported: ${WEBGPU_QUANT_FORMATS.join(', ')})`);
  if (!(DTYPES_OK as readonly string[]).includes(p.dtype)) throw new UnsupportedError(op, `webgpu '${op}' takes activations of dtype ${DTYPES_OK.join(', ')}, got ${p.dtype}`);
  const blk = GGUF[f];
  if (blk && L.k % blk.elems !== 0) throw new ShapeError(op, `format '${f}' needs K a multiple of ${blk.elems}, got K=${L.k}`);
  const rb = f === 'int8' || f === 'fp8_e4m3' ? L.k : f === 'int4' ? L.k / 2 : (L.k / blk!.elems) * blk!.bytes;
  if (L.rowBytes !== rb) throw new ShapeError(op, `format '${f}' with K=${L.k} has ${rb} bytes per row, the layout says ${L.rowBytes}`);
  if (p.qweight.dtype !== 'uint8' && p.qweight.dtype !== 'int8') throw new UnsupportedError(op, `qweight must be uint8, got ${p.qweight.dtype}`);
  let sRow = 0, gsize = 1 << 30;
  if (f === 'int8' || f === 'int4' || f === 'fp8_e4m3') {
    if (!p.scales || p.scales.dtype !== 'float32') throw new UnsupportedError(op, `format '${f}' needs float32 scales`);
    if (f === 'fp8_e4m3' && p.scales.shape.reduce((a, b) => a * b, 1) === 1) sRow = 0; // per tensor
    else if (f === 'int4') {
      gsize = L.groupSize;
      if (!Number.isInteger(gsize) || gsize < 2 || gsize % 2 !== 0 || L.k % gsize !== 0) throw new ShapeError(op, `int4 needs an even group size dividing K, got group ${gsize} for K=${L.k}`);
      sRow = L.k / gsize;
    } else sRow = 1;
    if (p.scales.shape.reduce((a, b) => a * b, 1) !== Math.max(1, L.n * sRow)) throw new ShapeError(op, `${f} scales must hold ${L.n * sRow} values`);
    if (p.zeros && p.zeros.dtype !== 'float32') throw new UnsupportedError(op, `zeros must be float32, got ${p.zeros.dtype}`);
  }
  return { f, d: p.dtype as QDType, n: L.n, k: L.k, asym: f === 'int4' && !!p.zeros, sRow, gsize };
}

const buf = (r: StridedRef | undefined): WGBuffer | undefined => (r ? (r.buf as WGBuffer) : undefined);

function dequantInto(c: Checked, p: DequantizeParams | QuantMatmulParams, out: WGBuffer, ooff: number, d: QDType): void {
  const simple = c.f === 'int8' || c.f === 'int4' || c.f === 'fp8_e4m3';
  const total = simple ? c.n * c.k : c.n * (c.k / 16);
  if (total === 0) return;
  const q = buf(p.qweight)!;
  const u = new Uint32Array([total, c.k, p.layout.rowBytes, p.qweight.offset, ooff, p.scales?.offset ?? 0, p.zeros?.offset ?? 0, c.sRow, Math.min(c.gsize, 0xffffffff)]);
  const { bufs, done } = bindAll(be, [out], [q, q, buf(p.scales) ?? q, buf(p.zeros) ?? q]);
  be.dispatch(dequantProgram(c.f, c.asym, d), bufs, u, total, be.wgElementwise);
  done();
}

export function webgpuQuantMatmul(p: QuantMatmulParams): void {
  const c = check('quant_matmul', p);
  if (p.x.dtype !== p.dtype || p.out.dtype !== p.dtype) throw new UnsupportedError('quant_matmul', `x and out must have dtype ${p.dtype}, got ${p.x.dtype} and ${p.out.dtype}`);
  if (p.m === 0 || c.n === 0) return;
  const gemv = p.m <= GEMV_MAX_ROWS && c.k % 32 === 0 && (c.f !== 'int4' || (c.gsize >= 32 && (c.gsize & (c.gsize - 1)) === 0));
  if (gemv) {
    const mr = p.m <= 1 ? 1 : p.m <= 2 ? 2 : p.m <= 4 ? 4 : 8;
    const q = buf(p.qweight)!;
    const u = new Uint32Array([p.m, c.n, c.k, p.layout.rowBytes, p.qweight.offset, p.x.offset, p.out.offset, p.bias?.offset ?? 0,
      p.scales?.offset ?? 0, p.zeros?.offset ?? 0, c.sRow, c.f === 'int4' ? 31 - Math.clz32(c.gsize) : 30, p.bias ? 1 : 0]);
    const { bufs, done } = bindAll(be, [buf(p.out)!], [buf(p.x)!, q, buf(p.scales) ?? q, buf(p.zeros) ?? q, buf(p.bias) ?? q]);
    const x = Math.min(c.n, 65535), y = Math.ceil(c.n / x);
    be.dispatchGroups(gemvProgram(c.f, c.asym, c.d, mr), bufs, u, x, y, 1);
    done();
    return;
  }
  // prefill: the weight dequantized into scratch (x's dtype), C filled with the bias rows, then the GEMM
  const scratch = be.alloc(c.d, c.n * c.k);
  try {
    dequantInto(c, p, scratch, 0, c.d);
    const w: StridedRef = { buf: scratch, dtype: c.d, shape: [c.n, c.k], strides: [c.k, 1], offset: 0 };
    if (p.bias) fillBias(p.bias, p.out, p.m, c.n, c.d);
    kernel('gemm', 'webgpu', 'quant_matmul')({
      transA: false, transB: true, m: p.m, n: c.n, k: c.k, alpha: 1, beta: p.bias ? 1 : 0,
      a: p.x, lda: c.k, b: w, ldb: c.k, c: p.out, ldc: c.n,
    });
  } finally { be.free(scratch); }
}

/** out[i, j] = bias[j] (the GEMM then adds x·wᵀ with beta = 1). uniform: [total, n, boff, ooff]; b1 out, b2 bias. */
function fillBias(bias: StridedRef, out: StridedRef, m: number, n: number, d: QDType): void {
  const prog = program(`quant.bias|${d}`, `${outAccess(d)}r`, 4, () => module(4, `${outAccess(d)}r`, be.wgElementwise, `let total = ${U(0)}; let n = ${U(1)};
  if (g >= total) { return; }
  let v = ${R.load(d, 'b2', `${U(2)} + g % n`)};
  let oi = ${U(3)} + g;
  ${store(d, 'b1', 'oi', 'v')}`));
  const { bufs, done } = bindAll(be, [buf(out)!], [buf(bias)!]);
  be.dispatch(prog, bufs, new Uint32Array([m * n, n, bias.offset, out.offset]), m * n, be.wgElementwise);
  done();
}

export function webgpuDequantize(p: DequantizeParams): void {
  const c = check('dequantize', p);
  if (p.out.dtype !== p.dtype) throw new UnsupportedError('dequantize', `out must have dtype ${p.dtype}, got ${p.out.dtype}`);
  dequantInto(c, p, buf(p.out)!, p.out.offset, c.d);
}

export const kernels = { quant_matmul: webgpuQuantMatmul, dequantize: webgpuDequantize } satisfies BackendKernels;
export const features: { quant: QuantFeatures } = { quant: { formats: WEBGPU_QUANT_FORMATS, dtypes: DTYPES_OK } };
