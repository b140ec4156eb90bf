// The FFT family: complex-to-complex, real-to-complex (one-sided) and complex-to-real transforms along
// one dim, scaled by `scale`, direction `sign` (-1 forward, +1 inverse).

import type { StridedRef } from '../backend/backend.js';

export type FftKind = 'c2c' | 'r2c' | 'c2r';

/** fft(input, rows, m, out, n, kind, sign, scale): contiguous [rows, m] input, [rows, n or n/2+1] output. */
export type FftKernel = (input: StridedRef, rows: number, m: number, out: StridedRef, n: number, kind: FftKind, sign: number, scale: number) => void;
/** fft_strided(input, dim, out, n, kind, sign, scale): transforms along `dim` of strided operands without a copy. */
export type FftStridedKernel = (input: StridedRef, dim: number, out: StridedRef, n: number, kind: FftKind, sign: number, scale: number) => void;
