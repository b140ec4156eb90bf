// PyTorch's C++ scalar type names ("not implemented for 'Long'"), for messages that quote them.

import type { DTypeName } from '../dtype/dtypes.js';

const TORCH_NAME: Partial<Record<DTypeName, string>> = {
  bool: 'Bool', uint8: 'Byte', int8: 'Char', int16: 'Short', int32: 'Int', int64: 'Long', float16: 'Half',
  bfloat16: 'BFloat16', float32: 'Float', float64: 'Double', complex64: 'ComplexFloat', complex128: 'ComplexDouble',
};

/** PyTorch's C++ scalar type name, as its messages print it (the dtype's own name where it has none). */
export const torchTypeName = (d: DTypeName): string => TORCH_NAME[d] ?? d;
