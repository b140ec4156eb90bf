// Strided copy: the kernel behind contiguous(), copy_ and every cross-layout move.

import type { StridedRef } from '../backend/backend.js';

/** copy_strided(src, dst): dst[p] = src[p] for every index p of the common shape; dtypes are equal. */
export type CopyStridedKernel = (src: StridedRef, dst: StridedRef) => void;
