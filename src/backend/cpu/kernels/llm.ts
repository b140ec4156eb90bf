// The CPU's LLM kernels (contracts in src/kernels/llm.ts), float32 and float64. Each computes exactly
// what its operation's composite computes (same roundings, same row-norm code), in one call: a decode
// step is ~150 small operations whose host cost (5-20 µs each) is most of what is not the weights'
// gemvs, so fewer calls is the saving, not fewer flops.

import type { StridedRef } from '../../backend.js';
import type { FusedAddRmsNormParams, RotaryParams } from '../../../kernels/llm.js';
import type { BackendKernels } from '../../../kernels/table.js';
import { cpuRowNorm } from './nn.js';

type FloatArray = Float32Array | Float64Array;
const arr = (r: StridedRef): FloatArray => r.buf as FloatArray;

/** residualOut = fround(x + residual) (as `add`), then the row-norm kernel on it (as rms_norm). */
function cpuFusedAddRmsNorm(p: FusedAddRmsNormParams): void {
  const x = arr(p.x), r = arr(p.residual), s = arr(p.residualOut);
  const len = p.rows * p.n, xo = p.x.offset, ro = p.residual.offset, so = p.residualOut.offset;
  // the store into a Float32Array rounds the double sum once, as the add kernel does
  for (let i = 0; i < len; i++) s[so + i] = x[xo + i]! + r[ro + i]!;
  cpuRowNorm({ x: p.residualOut, rows: p.rows, n: p.n, eps: p.eps, mode: 'rms', out: p.out, weight: p.weight, groups: 1, chan: 1 });
}

/**
 * One tensor's rotary embedding: x·cos rounded to the dtype, plus rotate_half(x)·sin with one rounding
 * (the composite's mul then addcmul). The Float32Array store does each rounding; the product of two
 * float32 values is exact in a double, so `a + rh·s` rounded once is addcmul's result.
 */
function cpuRotary(p: RotaryParams): void {
  const x = arr(p.x), c = arr(p.cos), s = arr(p.sin), o = arr(p.out);
  const [B, H, T, D] = p.x.shape as [number, number, number, number];
  const [xb, xh, xt, xd] = p.x.strides as [number, number, number, number];
  const [cb, ct, cr] = p.cos.strides as [number, number, number];
  const [sb, st, sr] = p.sin.strides as [number, number, number];
  const R = p.rotary, half = R >> 1, f32 = o instanceof Float32Array;
  let oi = p.out.offset;
  for (let b = 0; b < B; b++) {
    for (let h = 0; h < H; h++) {
      for (let t = 0; t < T; t++) {
        const xr = p.x.offset + b * xb + h * xh + t * xt;
        const cr0 = p.cos.offset + b * cb + t * ct, sr0 = p.sin.offset + b * sb + t * st;
        for (let j = 0; j < R; j++) {
          const v = x[xr + j * xd]!;
          const rh = j < half ? -x[xr + (j + half) * xd]! : x[xr + (j - half) * xd]!;
          const a = f32 ? Math.fround(v * c[cr0 + j * cr]!) : v * c[cr0 + j * cr]!;
          o[oi + j] = a + rh * s[sr0 + j * sr]!;
        }
        for (let j = R; j < D; j++) o[oi + j] = x[xr + j * xd]!;
        oi += D;
      }
    }
  }
}

export const kernels: BackendKernels = { fused_add_rms_norm: cpuFusedAddRmsNorm, rotary_embedding: cpuRotary };
/** The dtypes these kernels take (the op runs the composite for others). */
export const features = { llm: { dtypes: ['float32', 'float64'] as const } };
