// The CPU backend: host typed arrays as buffers; the reference every other backend is checked against.

import { allocStorage, type DTypeName, type StorageArray } from '../../dtype/dtypes.js';
import type { Expr } from '../../ir/expr.js';
import { registerBackend, type Backend, type StridedRef } from '../backend.js';
import { runElementwise } from './runtime/elementwise.js';
import { cpuRecording } from './runtime/recording.js';

export const cpuBackend: Backend = {
  type: 'cpu',
  alloc: (dtype: DTypeName, numel: number, zero?: boolean) => allocStorage(dtype, numel, zero ?? true),
  free: () => {},
  upload: (_d: DTypeName, data: StorageArray) => data,
  download: async (buf, dtype, offset, numel) => cpuBackend.downloadSync!(buf, dtype, offset, numel),
  downloadSync: (buf, _dtype, offset, numel) => (buf as StorageArray).slice(offset, offset + numel) as StorageArray,
  elementwise: (expr: Expr, ins: StridedRef[], params: (number | bigint)[], out: StridedRef) => {
    runElementwise(expr, ins, params, out);
    cpuRecording()?.push(() => runElementwise(expr, ins, params, out));
  },
  synchronize: async () => {},
};
registerBackend(cpuBackend);
