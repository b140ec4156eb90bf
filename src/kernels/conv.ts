// The convolution family: conv and conv_transpose over three spatial dims (1-d and 2-d convolutions
// are 3-d ones with unit dims).

import type { StridedRef } from '../backend/backend.js';

/** Parameters of the device kernels: contiguous refs, three spatial dims, left padding. */
export interface ConvKernelParams {
  /** [N, C_in, D, H, W]. */
  x: StridedRef;
  /** conv: [C_out, C_in/groups, kD, kH, kW]; conv_transpose: [C_in, C_out/groups, kD, kH, kW]. */
  w: StridedRef;
  /** [C_out] or null. */
  bias: StridedRef | null;
  /** [N, C_out, oD, oH, oW], fully written by the kernel. */
  out: StridedRef;
  stride: number[]; padding: number[]; dilation: number[]; groups: number;
}

export type ConvKernel = (p: ConvKernelParams) => void;
