// The resampling family: separable interpolation through per-dim tables (built once by the op from
// PyTorch's coordinate rules), and grid_sample. The cubic convolution weights are shared by the op's
// tables and the kernels' bicubic grid sampling, so both round alike.

import type { DTypeName } from '../dtype/dtypes.js';
import type { StridedRef } from '../backend/backend.js';

/** One spatial dim of a separable resampling: `taps` source positions and weights per output position. */
export interface ResampleTable {
  taps: number;
  /** [outSize * taps] source indices (always in range). */
  index: Int32Array;
  /** [outSize * taps] weights; null means a single tap of weight 1 (a pure gather). */
  weight: Float64Array | null;
}

export interface InterpolateKernelParams {
  /** [B, D, H, W], contiguous. */
  x: StridedRef;
  /** [B, oD, oH, oW], contiguous, same dtype. */
  out: StridedRef;
  /** Tables for D, H, W; the kernel sums outer (D) over inner (W) as PyTorch's Interpolate<> nests. */
  dims: ResampleTable[];
}

export interface GridSampleKernelParams {
  /** [N, C, D, H, W] (D = 1 for 4-D inputs), contiguous. */
  x: StridedRef;
  /** [N, oD, oH, oW, k] with k = 2 (4-D input) or 3, contiguous, same dtype. */
  grid: StridedRef;
  /** [N, C, oD, oH, oW]. */
  out: StridedRef;
  mode: 'bilinear' | 'nearest' | 'bicubic';
  padding: 'zeros' | 'border' | 'reflection';
  alignCorners: boolean;
  /** 2: the 4-D formulas of PyTorch's vectorized 2-D kernel; 3: those of its 3-D kernel. */
  spatial: 2 | 3;
  /**
   * The input's own dtype. PyTorch's CPU kernels run in it (Vectorized<Half/BFloat16> and c10::Half
   * round every operation), so for float16/bfloat16 each step rounds to it although x, grid and out
   * hold float32.
   */
  stepDType: DTypeName;
}

export type Round = (v: number) => number;

/** Keys' cubic convolution kernel on [0, 1] and [1, 2] (cubic_convolution1/2), in the compute dtype. */
export const cubic1 = (f: Round, x: number, A: number): number => f(f(f(f(f((A + 2) * x) - (A + 3)) * x) * x) + 1);

export const cubic2 = (f: Round, x: number, A: number): number => f(f(f(f(f(f(f(A * x) - 5 * A) * x) + 8 * A) * x) - 4 * A));

export type InterpolateKernel = (p: InterpolateKernelParams) => void;
export type GridSampleKernel = (p: GridSampleKernelParams) => void;
