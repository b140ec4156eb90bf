// CPU elementwise kernels: the IR rendered to a JavaScript loop, compiled once per (expression,
// dtypes, rank, layout) and cached. Dimensions are coalesced first, so a contiguous or simply broadcast
// operation becomes one flat loop; the innermost dimension always runs as a tight loop with strides.

import type { Expr } from '../../../ir/expr.js';
import { H, renderExpr, renderLoad, renderStore } from '../../../ir/render_js.js';
import { denseAs, type StridedRef } from '../../backend.js';
import { broadcastStrides, coalesce } from '../../../tensor/shape.js';
import { DTYPES } from '../../../dtype/dtypes.js';

import { makeKernel, parallelFlat, PARALLEL_MIN } from './threads.js';

export type Kernel = (out: unknown, ins: unknown[], params: unknown[], n: number, inner: number, innerStrides: number[], offsets: number[]) => void;

const cache = new Map<string, CompiledKernel>();
interface CompiledKernel { fn: Kernel; src: string; key: string; inDTypes: readonly string[]; outDType: string }

/** Compiles (or finds) the kernel; flat kernels run elements [inner, n) so threads can split them. */
function compile(expr: Expr, ins: StridedRef[], out: StridedRef, flat: boolean): CompiledKernel {
  // Fast path: the kernel memoised on the (interned) expression node, checked against the operand dtypes.
  const memoKey = flat ? 'cpuFlat' : 'cpuStrided';
  const m = expr.memo[memoKey] as CompiledKernel | undefined;
  if (m !== undefined && m.outDType === out.dtype && m.inDTypes.length === ins.length) {
    let same = true;
    for (let i = 0; i < ins.length; i++) if (m.inDTypes[i] !== ins[i]!.dtype) { same = false; break; }
    if (same) return m;
  }
  const key = `${expr.key}|${ins.map((r) => r.dtype).join(',')}|${out.dtype}|${flat}`;
  let entry = cache.get(key);
  if (!entry) {
    const loads = (slot: number): string => renderLoad(ins[slot]!.dtype, `a${slot}`, flat ? `i+o${slot}` : `j${slot}`);
    const [body, res] = renderExpr(expr, loads, (s) => `p${s}`);
    const params = [...Array(expr.slots('param')).keys()].map((s) => `const p${s}=params[${s}];`).join('');
    const store = renderStore(out.dtype, 'out', flat ? 'i' : 'oi', res);
    let src: string;
    if (flat) {
      src = `${ins.map((_, s) => `const a${s}=ins[${s}],o${s}=offs[${s}+1];`).join('')}${params}
      for(let i=inner;i<n;i++){${body}${store};}`;
    } else {
      // n = outer count; each outer step the caller-provided offsets advance (odometer below).
      src = `${ins.map((_, s) => `const a${s}=ins[${s}],s${s}=is[${s}+1];`).join('')}${params}
      let oi=offs[0];${ins.map((_, s) => `let j${s}=offs[${s}+1];`).join('')}
      for(let i=0;i<inner;i++){${body}${store};oi++;${ins.map((_, s) => `j${s}+=s${s};`).join('')}}`;
    }
    entry = { fn: makeKernel(src), src, key, inDTypes: ins.map((r) => r.dtype), outDType: out.dtype };
    cache.set(key, entry);
  }
  (expr.memo as Record<string, unknown>)[memoKey] = entry;
  return entry;
}


const EMPTY: number[] = [];

/**
 * Runs `expr` over `out` (contiguous, fresh) with inputs broadcast to out's shape. The dense case and
 * the broadcast/strided case are separate functions: each is optimized (and, when a new operand layout
 * turns up, deoptimized) on its own, so a model's first broadcast does not throw away the optimized code
 * of the path every small op takes, and each compile is a fraction of the whole.
 */
export function runElementwise(expr: Expr, ins: StridedRef[], params: (number | bigint)[], out: StridedRef): void {
  const shape = out.shape;
  let n = 1;
  for (let d = 0; d < shape.length; d++) n *= shape[d]!;
  if (n === 0) return;
  if (DTYPES[out.dtype].lanes !== 1) throw new Error('runElementwise: complex operands must be passed as real views');
  // The common case (every operand dense and shaped like the output) skips stride coalescing.
  for (let i = 0; i < ins.length; i++) if (!denseAs(ins[i]!, shape)) { runBroadcast(expr, ins, params, out, n); return; }
  runDense(expr, ins, params, out, n);
}

function runDense(expr: Expr, ins: StridedRef[], params: (number | bigint)[], out: StridedRef, n: number): void {
  const k = compile(expr, ins, out, true);
  const inArrs: unknown[] = [];
  const offs = [out.offset];
  for (let i = 0; i < ins.length; i++) { inArrs.push(ins[i]!.buf); offs.push(ins[i]!.offset); }
  if (n >= PARALLEL_MIN && parallelFlat(k.key, k.src, out.buf, inArrs, params, n, offs)) return;
  k.fn(out.buf, inArrs, params, n, 0, EMPTY, offs);
}

function runBroadcast(expr: Expr, ins: StridedRef[], params: (number | bigint)[], out: StridedRef, n: number): void {
  // Arrays here are built by push in loops, not spreads or `new Array(n)`: spreads and holey arrays give
  // the optimized code array layouts to check, and a new one turning up deoptimized this function.
  const shape = out.shape;
  const nIn = ins.length;
  const outStrides: number[] = [];
  for (let d = 0; d < shape.length; d++) outStrides.push(0);
  for (let d = shape.length - 1, acc = 1; d >= 0; d--) { outStrides[d] = acc; acc *= shape[d]!; }
  const all: number[][] = [outStrides];
  const inArrs: unknown[] = [];
  const offs: number[] = [out.offset];
  for (let i = 0; i < nIn; i++) {
    const r = ins[i]!;
    all.push(broadcastStrides(r.shape, r.strides, shape));
    inArrs.push(r.buf);
    offs.push(r.offset);
  }
  const { shape: cs, strides: cst } = coalesce(shape, all);
  const nd = cs.length;
  const outArr = out.buf;
  // Flat: one dimension and every operand contiguous (stride 1), or a 0-d op.
  let flat = nd <= 1;
  for (let q = 0; flat && q <= nIn; q++) flat = (cst[q]![0] ?? 1) === 1;
  if (flat) {
    const k = compile(expr, ins, out, true);
    if (n >= PARALLEL_MIN && parallelFlat(k.key, k.src, outArr, inArrs, params, n, offs)) return;
    k.fn(outArr, inArrs, params, n, 0, EMPTY, offs);
    return;
  }
  const k = compile(expr, ins, out, false).fn;
  const inner = cs[nd - 1]!;
  const innerStrides: number[] = [];
  for (let q = 0; q <= nIn; q++) innerStrides.push(cst[q]![nd - 1]!);
  const outer = n / inner;
  const idx: number[] = [];
  for (let d = 0; d < nd - 1; d++) idx.push(0);
  const cur = offs;
  for (let o = 0; o < outer; o++) {
    k(outArr, inArrs, params, 1, inner, innerStrides, cur);
    // odometer over the outer dims
    for (let d = nd - 2; d >= 0; d--) {
      idx[d]!++;
      for (let q = 0; q <= nIn; q++) cur[q]! += cst[q]![d]!;
      if (idx[d]! < cs[d]!) break;
      for (let q = 0; q <= nIn; q++) cur[q]! -= cst[q]![d]! * cs[d]!;
      idx[d] = 0;
    }
  }
}
