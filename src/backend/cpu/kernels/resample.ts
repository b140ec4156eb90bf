// CPU kernels: separable interpolation (tables from the op layer) and grid_sample.
//
// interpolate runs one pass per resampled dim (W, then H, then D) through float64 scratch buffers; that
// is exactly the nesting of PyTorch's Interpolate<> (innermost dim summed first), so only the final
// store rounds. Pure gathers (nearest) copy elements directly, which also keeps uint8 exact.
//
// grid_sample follows PyTorch's CPU kernels: the vectorized 2-D kernel's formulas for 4-D inputs
// (GridSamplerKernel.cpp) and the scalar 3-D kernel's for 5-D inputs (GridSampler.cpp), both of which
// run in the input's dtype (float16/bfloat16 included: every operation rounds to it). Coordinates are
// computed in that dtype step by step, because they decide which pixels are read; see cpuGridSample.

import type { DTypeName } from '../../../dtype/dtypes.js';
import { roundTo } from '../../../dtype/convert.js';
import type { BackendKernels } from '../../../kernels/table.js';
import { type GridSampleKernelParams, type InterpolateKernelParams, type ResampleTable, type Round, cubic1, cubic2 } from '../../../kernels/resample.js';

type Arr = { [i: number]: number; length: number };

/**
 * dst[o, j, i] = Σ_t w[j, t] · src[o, idx[j, t], i] over a [outer, n, inner] → [outer, on, inner] layout.
 * Two and four taps (linear, cubic) are written out: V8 runs them several times faster than the loop.
 */
function pass(src: Arr, srcOff: number, outer: number, n: number, inner: number, t: ResampleTable, on: number, dst: Arr, dstOff: number): void {
  const { taps, index, weight } = t;
  for (let o = 0; o < outer; o++) {
    const so = srcOff + o * n * inner;
    for (let j = 0; j < on; j++) {
      const d = dstOff + (o * on + j) * inner;
      if (weight === null) {
        const s = so + index[j]! * inner;
        for (let i = 0; i < inner; i++) dst[d + i] = src[s + i]!;
      } else if (taps === 2) {
        const s0 = so + index[2 * j]! * inner, s1 = so + index[2 * j + 1]! * inner;
        const w0 = weight[2 * j]!, w1 = weight[2 * j + 1]!;
        for (let i = 0; i < inner; i++) dst[d + i] = src[s0 + i]! * w0 + src[s1 + i]! * w1;
      } else if (taps === 4) {
        const k = 4 * j;
        const s0 = so + index[k]! * inner, s1 = so + index[k + 1]! * inner, s2 = so + index[k + 2]! * inner, s3 = so + index[k + 3]! * inner;
        const w0 = weight[k]!, w1 = weight[k + 1]!, w2 = weight[k + 2]!, w3 = weight[k + 3]!;
        for (let i = 0; i < inner; i++) dst[d + i] = src[s0 + i]! * w0 + src[s1 + i]! * w1 + src[s2 + i]! * w2 + src[s3 + i]! * w3;
      } else {
        for (let i = 0; i < inner; i++) {
          let acc = 0;
          for (let q = 0; q < taps; q++) acc += src[so + index[j * taps + q]! * inner + i]! * weight[j * taps + q]!;
          dst[d + i] = acc;
        }
      }
    }
  }
}

const isIdentity = (t: ResampleTable, n: number, on: number): boolean =>
  n === on && t.taps === 1 && t.weight === null && t.index.every((v, i) => v === i);

export function cpuInterpolate(p: InterpolateKernelParams): void {
  const X = p.x.buf as Arr, O = p.out.buf as Arr;
  const [B, D, H, W] = p.x.shape as number[];
  const [, OD, OH, OW] = p.out.shape as number[];
  const [tD, tH, tW] = p.dims as [ResampleTable, ResampleTable, ResampleTable];
  // Pure gather: index straight from input to output.
  if (tD.weight === null && tH.weight === null && tW.weight === null) {
    let o = p.out.offset;
    for (let b = 0; b < B!; b++) {
      for (let z = 0; z < OD!; z++) {
        for (let y = 0; y < OH!; y++) {
          const row = p.x.offset + ((b * D! + tD.index[z]!) * H! + tH.index[y]!) * W!;
          for (let x = 0; x < OW!; x++) O[o++] = X[row + tW.index[x]!]!;
        }
      }
    }
    return;
  }
  // Separable passes W → H → D; the last one that does work writes the output.
  const steps: [ResampleTable, number, number, number, number][] = [];
  if (!isIdentity(tW, W!, OW!)) steps.push([tW, B! * D! * H!, W!, 1, OW!]);
  if (!isIdentity(tH, H!, OH!)) steps.push([tH, B! * D!, H!, OW!, OH!]);
  if (!isIdentity(tD, D!, OD!)) steps.push([tD, B!, D!, OH! * OW!, OD!]);
  let src: Arr = X, srcOff = p.x.offset;
  steps.forEach(([t, outer, n, inner, on], i) => {
    const last = i === steps.length - 1;
    const dst: Arr = last ? O : new Float64Array(outer * on * inner);
    pass(src, srcOff, outer, n, inner, t, on, dst, last ? p.out.offset : 0);
    src = dst; srcOff = 0;
  });
}

// ---- grid_sample ---------------------------------------------------------------------------------

/** Round half to even (nearbyint / _mm256_round_ps). */
function roundEven(v: number): number {
  const r = Math.round(v);
  return r - v === 0.5 && r % 2 !== 0 ? r - 1 : r;
}

/**
 * The rounding of one arithmetic step in dtype d: PyTorch's grid_sample kernels compute in the input
 * dtype (Vectorized<Half/BFloat16> and c10::Half/BFloat16 convert each operation's float result back).
 */
export function stepRound(d: DTypeName): Round {
  return d === 'float64' ? (v) => v : d === 'float16' || d === 'bfloat16' ? (v) => roundTo(d, v) : Math.fround;
}

/** Maps a normalized grid coordinate to a source coordinate along one dim of `size`. */
interface Axis { unnormalize(g: number): number; bound(v: number): number; source(g: number): number }

function axis(f: Round, size: number, padding: GridSampleKernelParams['padding'], ac: boolean, vectorized: boolean): Axis {
  const maxVal = f(size - 1);
  const clip = (v: number): number => Math.min(maxVal, Math.max(v, 0));
  let unnormalize: (g: number) => number, reflect: (v: number) => number;
  if (vectorized) {
    // GridSamplerKernel.cpp ComputeLocationBase (its constants are scalar_t too).
    const scaling = f(f(ac ? size - 1 : size) / 2);
    unnormalize = ac ? (g) => f(f(g + 1) * scaling) : (g) => f(f(f(g + 1) * scaling) - 0.5);
    const twiceSpan = f(f(ac ? size - 1 : size) * 2), low = ac ? 0 : -0.5;
    reflect = (v) => {
      if (ac && size <= 1) return 0;
      const a = Math.abs(f(v - low));
      const flips = Math.trunc(f(a / twiceSpan));
      const extra = f(a - f(flips * twiceSpan));
      return f(Math.min(extra, f(twiceSpan - extra)) + low);
    };
  } else {
    // GridSampler.h grid_sampler_unnormalize / reflect_coordinates.
    unnormalize = ac ? (g) => f(f(f(g + 1) / 2) * maxVal) : (g) => f(f(f(f(g + 1) * f(size)) - 1) / 2);
    const [lo2, hi2] = ac ? [0, 2 * (size - 1)] : [-1, 2 * size - 1];
    const min = lo2 / 2, span = f(f(hi2 - lo2) / 2);
    reflect = (v) => {
      if (lo2 === hi2) return 0;
      const a = Math.abs(f(v - min));
      const extra = a % span; // fmod: exact
      const flips = Math.floor(f(a / span));
      return flips % 2 === 0 ? f(extra + min) : f(f(span - extra) + min);
    };
  }
  const bound = padding === 'border' ? clip : padding === 'reflection' ? (v: number) => clip(reflect(v)) : (v: number) => v;
  return { unnormalize, bound, source: (g) => bound(unnormalize(g)) };
}

/** get_cubic_coefficients of the vectorized kernel: the taps' distances are tx + 1, tx, 1 - tx, 2 - tx. */
function gridCubicCoeffs(f: Round, t: number): [number, number, number, number] {
  const A = -0.75;
  return [cubic2(f, f(t + 1), A), cubic1(f, t, A), cubic1(f, f(1 - t), A), cubic2(f, f(2 - t), A)];
}

/**
 * Coordinates and weights are computed in the step dtype (float32 emulated with Math.fround, float16/
 * bfloat16 rounded after every operation, as PyTorch), because they decide which pixels are read. The
 * weighted sums follow PyTorch's order; for float16/bfloat16 each product and sum rounds too, for
 * float32/float64 they run in double (within a rounding of PyTorch's).
 */
export function cpuGridSample(p: GridSampleKernelParams): void {
  const X = p.x.buf as Arr, G = p.grid.buf as Arr, O = p.out.buf as Arr;
  const [N, C, D, H, W] = p.x.shape as number[];
  const [, OD, OH, OW, K] = p.grid.shape as number[];
  const f = stepRound(p.stepDType);
  const lowp = p.stepDType === 'float16' || p.stepDType === 'bfloat16';
  const g: Round = lowp ? f : (v) => v; // rounding of the weighted sums
  const vec = p.spatial === 2;
  const ax = axis(f, W!, p.padding, p.alignCorners, vec), ay = axis(f, H!, p.padding, p.alignCorners, vec);
  const az = axis(f, D!, p.padding, p.alignCorners, vec);
  const plane = D! * H! * W!, outPlane = OD! * OH! * OW!;
  const inside = (z: number, y: number, x: number): boolean => x >= 0 && x < W! && y >= 0 && y < H! && z >= 0 && z < D!;
  /** Σ v[t]·w[t] in PyTorch's order, out-of-range taps (offset -1) reading 0. */
  const dot = (b: number, offs: number[], ws: number[], from: number, n: number): number => {
    let acc = 0;
    for (let t = from; t < from + n; t++) acc = g(acc + g((offs[t]! >= 0 ? X[b + offs[t]!]! : 0) * ws[t]!));
    return acc;
  };
  for (let n = 0; n < N!; n++) {
    for (let q = 0; q < outPlane; q++) {
      const gi = p.grid.offset + (n * outPlane + q) * K!;
      const gx = G[gi]!, gy = G[gi + 1]!, gz = K === 3 ? G[gi + 2]! : 0;
      const xBase = p.x.offset + n * C! * plane;
      let o = p.out.offset + n * C! * outPlane + q;
      if (p.mode === 'bicubic') {
        // Unpadded coordinate; each of the 4×4 taps is mapped through the padding rule on its own. Rows
        // (x taps) are interpolated first, then the four row results along y.
        const x = ax.unnormalize(gx), y = ay.unnormalize(gy);
        const ix = Math.floor(x), iy = Math.floor(y);
        const cx = gridCubicCoeffs(f, f(x - ix)), cy = gridCubicCoeffs(f, f(y - iy));
        const offs: number[] = [], ws: number[] = [];
        for (let j = 0; j < 4; j++) {
          const sy = Math.trunc(ay.bound(f(iy - 1 + j)));
          for (let i = 0; i < 4; i++) {
            const sx = Math.trunc(ax.bound(f(ix - 1 + i)));
            offs.push(inside(0, sy, sx) ? sy * W! + sx : -1);
            ws.push(cx[i]!);
          }
        }
        for (let c = 0; c < C!; c++, o += outPlane) {
          const b = xBase + c * plane;
          let acc = 0;
          for (let j = 0; j < 4; j++) acc = g(acc + g(cy[j]! * dot(b, offs, ws, 4 * j, 4)));
          O[o] = acc;
        }
        continue;
      }
      const x = ax.source(gx), y = ay.source(gy), z = K === 3 ? az.source(gz) : 0;
      if (p.mode === 'nearest') {
        const ix = roundEven(x), iy = roundEven(y), iz = roundEven(z);
        const ok = inside(iz, iy, ix), off = (iz * H! + iy) * W! + ix;
        for (let c = 0; c < C!; c++, o += outPlane) O[o] = ok ? X[xBase + c * plane + off]! : 0;
        continue;
      }
      // bilinear / trilinear: corner weights as PyTorch forms them, out-of-range corners read 0.
      const x0 = Math.floor(x), y0 = Math.floor(y), z0 = Math.floor(z);
      const offs: number[] = [], ws: number[] = [];
      if (K === 2) {
        const wx = f(x - x0), ex = f(1 - wx), ny = f(y - y0), sy = f(1 - ny);
        const corners: [number, number, number][] = [[y0, x0, f(sy * ex)], [y0, x0 + 1, f(sy * wx)], [y0 + 1, x0, f(ny * ex)], [y0 + 1, x0 + 1, f(ny * wx)]];
        for (const [cy, cx, w] of corners) { offs.push(inside(0, cy, cx) ? cy * W! + cx : -1); ws.push(w); }
      } else {
        for (let dz = 0; dz < 2; dz++) for (let dy = 0; dy < 2; dy++) for (let dx = 0; dx < 2; dx++) {
          const fx = dx ? f(x - x0) : f(x0 + 1 - x), fy = dy ? f(y - y0) : f(y0 + 1 - y), fz = dz ? f(z - z0) : f(z0 + 1 - z);
          const cz = z0 + dz, cy = y0 + dy, cx = x0 + dx;
          offs.push(inside(cz, cy, cx) ? (cz * H! + cy) * W! + cx : -1);
          ws.push(f(f(fx * fy) * fz));
        }
      }
      for (let c = 0; c < C!; c++, o += outPlane) O[o] = dot(xBase + c * plane, offs, ws, 0, offs.length);
    }
  }
}

export const kernels = {
  interpolate: cpuInterpolate,
  grid_sample: cpuGridSample,
} satisfies BackendKernels;
