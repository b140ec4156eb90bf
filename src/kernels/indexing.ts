// The indexing family. The op layer validates shapes and dtypes, broadcasts and allocates; kernels
// move data and check index values (the one check only the data can answer). Every index error reads
// "index V is out of bounds for dimension D with size N", as PyTorch's gather.
//
//   gather(input, dim, index, out, op, wrap)     out[p] = input[p with p[dim] := index[p]]
//   scatter(out, dim, index, src, mode, opts)    out[p with p[dim] := index[p]] (mode)= src[p], in place
//   linear_index(indices, sizes, out, op, dims)  out[p] = sum_k wrap(indices_k[p]) * prod(sizes[k+1:])
//   nonzero(input, out)                          coordinates of the non-zero elements, row-major
//   masked_select(input, mask, out)              elements where mask is set, row-major
//   masked_scatter(out, mask, source)            consecutive source elements into the set positions

import type { Backend, StridedRef } from '../backend/backend.js';
import { Expr } from '../ir/expr.js';

export type ScatterMode = 'none' | 'sum' | 'prod' | 'mean' | 'amax' | 'amin';

export interface ScatterOptions { op: string; includeSelf?: boolean; alpha?: number | bigint; wrap?: boolean }

/**
 * Whether PyTorch reduces this float16/bfloat16 scatter in a float32 copy of the output, rounded once
 * at the end (cpu_scatter_gather_base_kernel's accumulation buffer, and the expanded-index path's):
 * scatter(reduce=...), scatter_add and scatter_reduce, and index_add where it becomes a scatter_add
 * (index_add_cpu_out: alpha 1, int64 index, a 2-d or larger self, dim first or last). Other index_add
 * calls add per index in the half type (add_stub), as does index_put's accumulate.
 */
export function halfReducesInFloat(out: StridedRef, dim: number, index: StridedRef, mode: ScatterMode, opts: ScatterOptions): boolean {
  if (mode === 'none' || (out.dtype !== 'float16' && out.dtype !== 'bfloat16')) return false;
  if (opts.op === 'scatter' || opts.op === 'scatter_add' || opts.op === 'scatter_reduce') return true;
  const nd = out.shape.length;
  return opts.op === 'index_add' && Number(opts.alpha ?? 1) === 1 && index.dtype === 'int64' && nd > 1 && (dim === 0 || dim === nd - 1);
}

/**
 * halfReducesInFloat's reduction for device backends whose scatter kernel rounds every step, with only
 * the Backend interface: out and src widened into float32 buffers, `scatter` (the device's kernel) run
 * there ('sum' for mean), the result rounded back into out; mean then divides in the half type by the
 * contribution counts (a float32 scatter-add of ones, rounded to the half type; unreached slots keep
 * their value), as PyTorch's scatter_reduce does. `out` is contiguous (a fresh tensor).
 */
export function scatterHalfInFloat(be: Backend, scatterFn: ScatterKernel, out: StridedRef, dim: number, index: StridedRef, src: StridedRef,
  mode: ScatterMode, opts: ScatterOptions): void {
  const d = out.dtype;
  const f32 = (shape: readonly number[], zero = false): StridedRef => {
    const st: number[] = [];
    let n = 1;
    for (let k = shape.length - 1; k >= 0; k--) { st[k] = n; n *= shape[k]!; }
    return { buf: be.alloc('float32', Math.max(n, 1), zero), dtype: 'float32', shape: [...shape], strides: st, offset: 0 };
  };
  const widen = Expr.load(0, d).cast('float32');
  const acc = f32(out.shape), srcF = f32(src.shape), temps = [acc, srcF];
  try {
    be.elementwise(widen, [out], [], acc);
    be.elementwise(widen, [src], [], srcF);
    scatterFn(acc, dim, index, srcF, mode === 'mean' ? 'sum' : mode, opts);
    be.elementwise(Expr.load(0, 'float32').cast(d), [acc], [], out);
    if (mode === 'mean') {
      const cnt = f32(out.shape, true), one = be.upload('float32', new Float32Array([1]));
      temps.push(cnt, { ...cnt, buf: one });
      scatterFn(cnt, dim, index, { buf: one, dtype: 'float32', shape: [...index.shape], strides: index.shape.map(() => 0), offset: 0 }, 'sum',
        { op: opts.op, wrap: opts.wrap });
      const divisor = Expr.load(1, 'float32').add(opts.includeSelf ?? true ? 1 : 0).cast(d).cast('float32').max(1);
      be.elementwise(Expr.load(0, d).cast('float32').div(divisor).cast(d), [out, cnt], [], out);
    }
  } finally {
    for (const t of temps) be.free(t.buf);
  }
}

export type GatherKernel = (input: StridedRef, dim: number, index: StridedRef, out: StridedRef, op: string, wrap?: boolean) => void;
export type ScatterKernel = (out: StridedRef, dim: number, index: StridedRef, src: StridedRef, mode: ScatterMode, opts: ScatterOptions) => void;
export type LinearIndexKernel = (indices: StridedRef[], sizes: number[], out: StridedRef, op: string, dims: number[]) => void;
export type NonzeroKernel = (input: StridedRef, out: StridedRef) => void;
export type MaskedSelectKernel = (input: StridedRef, mask: StridedRef, out: StridedRef) => void;
export type MaskedScatterKernel = (out: StridedRef, mask: StridedRef, source: StridedRef) => void;
