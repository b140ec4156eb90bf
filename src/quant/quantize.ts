// Round-to-nearest quantizers (nbx.quant.quantize): a float weight [N, K] → a QuantizedTensor on the
// weight's device, computed on the host in double from the float32 values.
// - 'int8': per output channel, symmetric: s = amax(|w_n|)/127, q = clamp(round(w/s), −127, 127).
// - 'int4': group-wise (group_size 32/64/128, default 128). Symmetric: s = amax(|w_g|)/7,
//   q = clamp(round(w/s), −8, 7) + 8. Asymmetric (default, as AWQ/GPTQ checkpoints): s = (max − min)/15,
//   z = clamp(round(−min/s), 0, 15), q = clamp(round(w/s) + z, 0, 15).
// - 'fp8_e4m3': s = amax/448 per channel (default) or per tensor (per_channel: false), q = e4m3(w/s).
// An all-zero channel or group gets s = 0 (int) or 1 (fp8) and quantizes exactly.

import { Tensor } from '../tensor/tensor.js';
import { DTYPES } from '../dtype/dtypes.js';
import { toFloat8E4M3FNBits } from '../dtype/convert.js';
import { DTypeError, ShapeError, ValueError } from '../errors.js';
import { fmtShape } from '../tensor/shape.js';
import { makeLayout } from './formats.js';
import { QuantizedTensor } from './quantized_tensor.js';
import { residentCopy } from './wasm_memory.js';

export type QuantScheme = 'int8' | 'int4' | 'fp8_e4m3';

export interface QuantizeOptions {
  scheme: QuantScheme;
  /** int4 group along K (default 128). */
  group_size?: number;
  /** int4: symmetric (no zero points; default false). int8 and fp8 are always symmetric. */
  symmetric?: boolean;
  /** fp8: one scale per output channel (default) or one for the tensor. */
  per_channel?: boolean;
}

const OP = 'quant.quantize';
const rnd = Math.round; // halves round up (torch.round: to even); only exact ties differ

/** Host float32 copy of a weight's values. */
function hostValues(w: Tensor): Float32Array {
  const c = w.to({ device: 'cpu', dtype: 'float32' }).contiguous();
  const b = c.storage.buf as Float32Array;
  const out = b.slice(c.storage_offset(), c.storage_offset() + c.numel());
  if (c !== w) c.dispose();
  return out;
}

/** Round-to-nearest quantization of a float weight [N, K] (see the top of this file). */
export function quantize(weight: Tensor, opts: QuantizeOptions): QuantizedTensor {
  if (!(weight instanceof Tensor)) throw new TypeError(`${OP}: weight must be a Tensor`);
  if (DTYPES[weight.dt].kind !== 'float') throw new DTypeError(OP, `weight must be floating point, got ${weight.dt}`);
  if (weight.ndim !== 2) throw new ShapeError(OP, `weight must be [out_features, in_features], got ${fmtShape(weight.shape)}`);
  const scheme = opts?.scheme;
  if (scheme !== 'int8' && scheme !== 'int4' && scheme !== 'fp8_e4m3') throw new ValueError(OP, `scheme must be 'int8', 'int4' or 'fp8_e4m3', got ${JSON.stringify(scheme)}`);
  const [N, K] = weight.shape as [number, number];
  const layout = makeLayout(OP, scheme, N, K, scheme === 'int4' ? opts.group_size ?? 128 : undefined);
  const w = hostValues(weight);
  let q = new Uint8Array(N * layout.rowBytes);
  let scales: Float32Array, zeros: Float32Array | null = null;
  if (scheme === 'int8') {
    scales = new Float32Array(N);
    const qi = new Int8Array(q.buffer);
    for (let n = 0; n < N; n++) {
      let amax = 0;
      for (let k = 0; k < K; k++) amax = Math.max(amax, Math.abs(w[n * K + k]!));
      const s = Math.fround(amax / 127);
      scales[n] = s;
      if (s === 0) continue;
      for (let k = 0; k < K; k++) qi[n * K + k] = Math.max(-127, Math.min(127, rnd(w[n * K + k]! / s)));
    }
  } else if (scheme === 'fp8_e4m3') {
    const perChannel = opts.per_channel ?? true;
    scales = new Float32Array(perChannel ? N : 1);
    const amaxOf = (r0: number, r1: number): number => { let a = 0; for (let i = r0 * K; i < r1 * K; i++) a = Math.max(a, Math.abs(w[i]!)); return a; };
    const code = (r0: number, r1: number, si: number): void => {
      const s = Math.fround(amaxOf(r0, r1) / 448) || 1;
      scales[si] = s;
      for (let i = r0 * K; i < r1 * K; i++) q[i] = toFloat8E4M3FNBits(Math.max(-448, Math.min(448, w[i]! / s)));
    };
    if (perChannel) for (let n = 0; n < N; n++) code(n, n + 1, n); else code(0, N, 0);
  } else {
    const g = layout.groupSize, G = K / g, sym = opts.symmetric ?? false;
    scales = new Float32Array(N * G);
    if (!sym) zeros = new Float32Array(N * G);
    for (let n = 0; n < N; n++) {
      for (let gi = 0; gi < G; gi++) {
        const o = n * K + gi * g;
        let lo = Infinity, hi = -Infinity;
        for (let j = 0; j < g; j++) { const v = w[o + j]!; if (v < lo) lo = v; if (v > hi) hi = v; }
        let s: number, z: number;
        if (sym) { s = Math.fround(Math.max(Math.abs(lo), Math.abs(hi)) / 7); z = 8; }
        else if (hi === lo) { s = Math.fround(Math.abs(hi)) || 1; z = hi < 0 ? 2 : 0; }
        else { s = Math.fround((hi - lo) / 15); z = Math.max(0, Math.min(15, rnd(-lo / s))); }
        scales[n * G + gi] = s;
        if (zeros) zeros[n * G + gi] = z;
        for (let j = 0; j < g; j += 2) {
          const a = s === 0 ? z : Math.max(0, Math.min(15, rnd(w[o + j]! / s) + z));
          const b = s === 0 ? z : Math.max(0, Math.min(15, rnd(w[o + j + 1]! / s) + z));
          q[n * layout.rowBytes + ((gi * g + j) >> 1)] = a | (b << 4);
        }
      }
    }
  }
  const dev = weight.device;
  // on the CPU the packed parts live in the quant memory, where the SIMD kernels read them in place
  if (dev.type === 'cpu') { q = residentCopy(q); scales = residentCopy(scales); if (zeros) zeros = residentCopy(zeros); }
  const perTensor = scheme === 'fp8_e4m3' && scales.length === 1;
  const qt = Tensor.fromStorage(q, 'uint8', [N, layout.rowBytes], dev);
  const st = Tensor.fromStorage(scales, 'float32', scheme === 'int4' ? [N, K / layout.groupSize] : [perTensor ? 1 : N], dev);
  const zt = zeros ? Tensor.fromStorage(zeros, 'float32', [N, K / layout.groupSize], dev) : null;
  return new QuantizedTensor({ qdata: qt, scales: st, zeros: zt, layout, dtype: weight.dt });
}
