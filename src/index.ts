// nbxtensor: PyTorch's tensor API for TypeScript. `import * as nbx from 'nbxtensor'`, then nbx.X is torch.X
// and nbx.nn.functional.X is torch.nn.functional.X. Keyword arguments are a trailing options object.

import './backend/cpu/kernels/index.js';
import { cuda } from './backend/cuda/index.js';
import './backend/webgpu/index.js';
import { Tensor } from './tensor/tensor.js';
import { DType } from './dtype/dtypes.js';
import * as ew from './ops/elementwise.js';
import * as red from './ops/reduce.js';
import * as cr from './ops/creation.js';
import { installMethods } from './ops/methods.js';
import { installPrinting } from './tensor/print.js';
import * as inplaceOps from './ops/inplace.js';
import { installIndexing } from './ops/getitem.js';
import * as everyday from './ops/everyday.js';
import * as linalgOps from './ops/linalg.js';
import * as shapeOps from './ops/shape.js';
import * as indexingOps from './ops/indexing.js';
import * as sortOps from './ops/sort.js';
import * as fftOps from './ops/fft.js';
import * as convOps from './ops/conv.js';
import * as poolOps from './ops/pool.js';
import * as resampleOps from './ops/resample.js';
import * as nnOps from './ops/nn.js';
import * as nnLayers from './nn/index.js';
import * as randomOps from './ops/random.js';
import { promoteTypes, resultType, canCast, setDefaultDType, defaultFloatDType } from './dtype/promotion.js';
import { dtypeName, type DTypeLike } from './dtype/dtypes.js';
import { participant, type Operand } from './ops/elementwise.js';

export { Tensor } from './tensor/tensor.js';
export { cuda };
export { webgpu } from './backend/webgpu/index.js';
export * as io from './io/index.js';
export * as models from './models/index.js';
/**
 * An OpenAI-compatible HTTP server for a loaded model (Node only, issue #22): `await nbx.serve(model,
 * { port: 8000 })` gives { url, port, close() }; see src/serve/server.ts for the options. Loaded on
 * first call, so browsers never load node:http.
 */
export async function serve(...args: Parameters<typeof import('./serve/server.js').serve>): ReturnType<typeof import('./serve/server.js').serve> {
  return (await import('./serve/server.js')).serve(...args);
}
export { DType } from './dtype/dtypes.js';
export type { DTypeName } from './dtype/dtypes.js';
export { Device } from './backend/backend.js';
export { scope, keep } from './tensor/storage.js';
export { Scalar, scalar, OPS } from './ops/registry.js';
export * from './errors.js';
export { set_printoptions, get_printoptions } from './tensor/print.js';
export { slice, Slice, Ellipsis, type IndexItem } from './ops/getitem.js';
export { isclose, allclose, equal, as_tensor, frombuffer, cdist, bincount, diff, isin } from './ops/everyday.js';

// dtypes as values: nbx.float32, nbx.int64, ...
export const bool = DType.all.bool, uint8 = DType.all.uint8, int8 = DType.all.int8, int16 = DType.all.int16,
  int32 = DType.all.int32, int64 = DType.all.int64, float16 = DType.all.float16, bfloat16 = DType.all.bfloat16,
  float32 = DType.all.float32, float64 = DType.all.float64, float8_e4m3fn = DType.all.float8_e4m3fn,
  float8_e5m2 = DType.all.float8_e5m2, complex64 = DType.all.complex64, complex128 = DType.all.complex128;
// PyTorch's alias names are the same dtype objects (torch.float is torch.float32); the scalar kind
// wrappers Python's 2.0 needs are nbx.scalar.float / nbx.scalar.int.
export const half = float16, double = float64, long = int64, short = int16, cfloat = complex64, cdouble = complex128;
export { float32 as float, int32 as int };

export const promote_types = (a: DTypeLike, b: DTypeLike): DType => DType.all[promoteTypes(dtypeName(a), dtypeName(b))];
export const result_type = (a: Operand, b: Operand): DType => DType.all[resultType([participant(a), participant(b)])];
export const can_cast = (from: DTypeLike, to: DTypeLike): boolean => canCast(dtypeName(from), dtypeName(to));
export const set_default_dtype = (d: DTypeLike): void => setDefaultDType(dtypeName(d));
export const get_default_dtype = (): DType => DType.all[defaultFloatDType];
export const is_tensor = (x: unknown): x is Tensor => x instanceof Tensor;
export const is_floating_point = (t: Tensor): boolean => t.is_floating_point();
export const numel = (t: Tensor): number => t.numel();

export {
  exp, exp2, expm1, log, log2, log10, log1p, sqrt, rsqrt, sin, cos, tan, tanh, erf, sigmoid, reciprocal, abs, neg, negative,
  sign, floor, ceil, trunc, fix, round, square, bitwise_not, logical_not, isnan, isinf, isfinite, isposinf, isneginf,
  nan_to_num, add, sub, subtract, mul, multiply, div, divide, true_divide, floor_divide, remainder, fmod, pow, float_power,
  atan2, arctan2, hypot, copysign, xlogy, maximum, minimum, fmax, fmin, eq, ne, lt, le, gt, ge, greater, greater_equal,
  less, less_equal, not_equal, logical_and, logical_or, logical_xor, bitwise_and, bitwise_or, bitwise_xor,
  bitwise_left_shift, bitwise_right_shift, where, addcmul, addcdiv, lerp, masked_fill, clamp, clip, clamp_min, clamp_max,
} from './ops/elementwise.js';
export const relu = ew.nn_relu;
export const selu = ew.selu;
export const celu = ew.celu;
export {
  sum, nansum, prod, mean, max, min, amax, amin, argmax, argmin, any, all, count_nonzero, std, var_mean, std_mean,
  logsumexp, norm, cumsum, cumprod, cummax, cummin,
} from './ops/reduce.js';
export { var_ as var } from './ops/reduce.js';
export {
  tensor, empty, zeros, ones, full, arange, linspace, eye, zeros_like, ones_like, empty_like, full_like, scalar_tensor,
} from './ops/creation.js';

const families = [linalgOps, shapeOps, indexingOps, sortOps, fftOps, convOps, poolOps, resampleOps, nnOps, randomOps];

// ---- per-family exports: each family's owner edits only its own line(s) -------------------------
// linalg
export {
  matmul, mm, bmm, baddbmm, addbmm, addmm, addmv, addr, dot, vdot, mv, outer, ger, trace, matrix_power, einsum, tensordot, inner,
} from './ops/linalg.js';
// shape
export {
  reshape, flatten, unflatten, squeeze, unsqueeze, permute, transpose, swapaxes, swapdims, t, movedim, moveaxis, narrow,
  select, chunk, split, tensor_split, unbind, broadcast_to, broadcast_tensors, meshgrid, diagonal, diag, cat, concat,
  concatenate, stack, hstack, vstack, row_stack, dstack, column_stack, atleast_1d, atleast_2d, atleast_3d, flip, fliplr,
  flipud, roll, tile, tril, triu,
} from './ops/shape.js';
// indexing
export {
  gather, scatter, scatter_add, scatter_reduce, index_select, index_add, index_copy, index_fill, index_put, take,
  take_along_dim, masked_select, masked_scatter, nonzero, argwhere, repeat_interleave,
} from './ops/indexing.js';
// sort
export {
  sort, argsort, msort, topk, kthvalue, median, nanmedian, mode, quantile, nanquantile, unique, unique_consecutive,
  searchsorted, bucketize,
} from './ops/sort.js';
// fft (the nbx.fft namespace object is exported from ./ops/fft.js as `fft`)
export { fft, view_as_real, view_as_complex, real, imag, complex, polar, conj, conj_physical, angle } from './ops/fft.js';
// conv
export { conv1d, conv2d, conv3d, conv_transpose1d, conv_transpose2d, conv_transpose3d } from './ops/conv.js';
// pool
export { max_pool1d, max_pool2d, max_pool3d, avg_pool1d, adaptive_avg_pool1d, adaptive_max_pool1d_with_indices as adaptive_max_pool1d } from './ops/pool.js';
// resample
export {} from './ops/resample.js';
// nn (normalization, softmax, losses, attention)
export { softmax, log_softmax, _weight_norm } from './ops/nn.js';
// llm (nbx extensions: fused operations of LLM layers)
export { llm } from './ops/llm_namespace.js';
// quant (nbx.quant: quantized weights, issue #21)
export { quant } from './quant/index.js';
// random
export {
  manual_seed, Generator, default_generator, seed, initial_seed, get_rng_state, set_rng_state, rand, randn, rand_like, randn_like,
  randint, randint_like, randperm, normal, bernoulli, multinomial,
} from './ops/random.js';
// -------------------------------------------------------------------------------------------------

export const linalg: Record<string, (...args: any[]) => any> = {
  vector_norm: red.vector_norm, matmul: linalgOps.linalg_matmul, matrix_power: linalgOps.linalg_matrix_power,
  multi_dot: linalgOps.linalg_multi_dot, vecdot: linalgOps.linalg_vecdot,
};

export const nn = {
  ...nnLayers,
  functional: {
    relu: ew.nn_relu, relu6: ew.relu6, gelu: ew.gelu, silu: ew.silu, mish: ew.mish, elu: ew.elu, celu: ew.celu,
    selu: ew.selu, softplus: ew.softplus, hardswish: ew.hardswish, hardsigmoid: ew.hardsigmoid,
    leaky_relu: ew.leaky_relu, logsigmoid: ew.logsigmoid, hardtanh: ew.hardtanh, threshold: ew.threshold,
    tanhshrink: ew.tanhshrink, softsign: ew.softsign, sigmoid: ew.sigmoid, tanh: ew.tanh,
    ...Object.assign({}, ...families.map((f) => f.functional)),
  } as Record<string, (...args: any[]) => any>,
};
// The layer classes as types too (`let m: nbx.nn.Linear`), beside the values in the nn object.
// eslint-disable-next-line @typescript-eslint/no-namespace
export declare namespace nn {
  type Module = nnLayers.Module; type MetaTensor = nnLayers.MetaTensor; type Linear = nnLayers.Linear;
  type Identity = nnLayers.Identity; type Embedding = nnLayers.Embedding; type LayerNorm = nnLayers.LayerNorm;
  type RMSNorm = nnLayers.RMSNorm; type Conv1d = nnLayers.Conv1d; type Conv2d = nnLayers.Conv2d;
  type Dropout = nnLayers.Dropout; type ReLU = nnLayers.ReLU; type SiLU = nnLayers.SiLU; type GELU = nnLayers.GELU;
  type Tanh = nnLayers.Tanh; type Sigmoid = nnLayers.Sigmoid; type Softmax = nnLayers.Softmax;
  type Sequential = nnLayers.Sequential; type ModuleList<T extends Module = Module> = nnLayers.ModuleList<T>;
  type ModuleDict<T extends Module = Module> = nnLayers.ModuleDict<T>; type StateDict = nnLayers.StateDict;
}
for (const f of families) installMethods(f.methods);

installMethods({
  exp: ew.exp, exp2: ew.exp2, expm1: ew.expm1, log: ew.log, log2: ew.log2, log10: ew.log10, log1p: ew.log1p, sqrt: ew.sqrt,
  rsqrt: ew.rsqrt, sin: ew.sin, cos: ew.cos, tan: ew.tan, tanh: ew.tanh, erf: ew.erf, sigmoid: ew.sigmoid,
  reciprocal: ew.reciprocal, abs: ew.abs, neg: ew.neg, negative: ew.neg, sign: ew.sign, floor: ew.floor, ceil: ew.ceil,
  trunc: ew.trunc, round: ew.round, square: ew.square, bitwise_not: ew.bitwise_not, logical_not: ew.logical_not,
  isnan: ew.isnan, isinf: ew.isinf, isfinite: ew.isfinite, nan_to_num: ew.nan_to_num, add: ew.add, sub: ew.sub,
  mul: ew.mul, div: ew.div, floor_divide: ew.floor_divide, remainder: ew.remainder, fmod: ew.fmod, pow: ew.pow,
  atan2: ew.atan2, hypot: ew.hypot, maximum: ew.maximum, minimum: ew.minimum, eq: ew.eq, ne: ew.ne, lt: ew.lt,
  le: ew.le, gt: ew.gt, ge: ew.ge, logical_and: ew.logical_and, logical_or: ew.logical_or, logical_xor: ew.logical_xor,
  bitwise_and: ew.bitwise_and, bitwise_or: ew.bitwise_or, bitwise_xor: ew.bitwise_xor, where: (c: Tensor, x: Operand, y: Operand) => ew.where(x, c, y),
  addcmul: ew.addcmul, addcdiv: ew.addcdiv, lerp: ew.lerp, masked_fill: ew.masked_fill, clamp: ew.clamp, clip: ew.clamp,
  clamp_min: ew.clamp_min, clamp_max: ew.clamp_max, relu: ew.nn_relu, xlogy: ew.xlogy,
  sum: red.sum, prod: red.prod, mean: red.mean, max: red.max, min: red.min, amax: red.amax, amin: red.amin,
  argmax: red.argmax, argmin: red.argmin, any: red.any, all: red.all, count_nonzero: red.count_nonzero, std: red.std,
  var: red.var_, logsumexp: red.logsumexp, norm: red.norm, cumsum: red.cumsum, cumprod: red.cumprod,
  cummax: red.cummax, cummin: red.cummin,
  float: (t: Tensor) => t.to('float32'), double: (t: Tensor) => t.to('float64'), half: (t: Tensor) => t.to('float16'),
  bfloat16: (t: Tensor) => t.to('bfloat16'), int: (t: Tensor) => t.to('int32'), long: (t: Tensor) => t.to('int64'),
  bool: (t: Tensor) => t.to('bool'), type_as: (t: Tensor, o: Tensor) => t.to(o.dt),
});
red.setSqrt(ew.sqrt);
red.setBinaryMinMax(ew.maximum, ew.minimum);
red.setNanToZero((x) => ew.nan_to_num(x, { nan: 0, posinf: Infinity, neginf: -Infinity }));
void cr;

installPrinting();
// In-place methods (add_, fill_, index_put_, ...) and t.copy_(src): src cast to t's dtype and broadcast to
// t's shape, written through the view t (src may be on another device).
installMethods({ copy_: inplaceOps.copy_, ...inplaceOps.methods });
Object.assign(nn.functional, inplaceOps.functional);
installIndexing();
installMethods(everyday.methods);
Object.assign(nn.functional, everyday.functional);
