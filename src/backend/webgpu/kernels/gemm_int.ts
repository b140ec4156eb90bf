// WebGPU 'gemm_int' (src/kernels/gemm.ts): integer products, exact modulo 2^32 in i32
// arithmetic (WGSL's i32 wraps), then wrapped to the output dtype by its store, which equals the CPU's
// exact result wrapped to the dtype for int32/int16/int8/uint8; with an int64 operand or output, in
// emulated int64 (src/ir/wgsl_int64.ts), exact modulo 2^64 as the CPU. A thread per output element, as
// CUDA's gemm_int. Integer convolution and pooling are in conv.ts and pool.ts.

import type { DTypeName } from '../../../dtype/dtypes.js';
import type { StridedRef } from '../../backend.js';
import type { BackendKernels } from '../../../kernels/table.js';
import { WGSL as R, checkWgslDType } from '../../../ir/render_wgsl.js';
import { UnsupportedError } from '../../../errors.js';
import type { Program, WebGPUBackend, WGBuffer } from '../runtime/backend.js';
import { module, U } from '../runtime/elementwise.js';
import { bindAll, isFloat, loadOut, outAccess, program, storeVal } from './util.js';
import type { GemmParams } from '../../../kernels/gemm.js';

let be: WebGPUBackend;
export const kernels = {
  gemm_int: webgpuGemmInt,
} satisfies BackendKernels;

/** Points this family's kernels at the backend (called once, when the backend starts). */
export function bind(backend: WebGPUBackend): void {
  be = backend;
}

/**
 * uniform: [total, m, n, k, transA, transB, lda, ldb, ldc, aoff, boff, coff, sA, sB, sC, alpha, beta].
 * b1 C, b2 A, b3 B.
 */
function gemmIntProgram(d: DTypeName, ad: DTypeName, bd: DTypeName, wg: number): Program {
  const access = `${outAccess(d)}rr`;
  return program(`int.gemm|${d}|${ad}|${bd}|${wg}`, access, 17, () => {
    const names = ['total', 'm', 'n', 'k', 'tA', 'tB', 'lda', 'ldb', 'ldc', 'aoff', 'boff', 'coff', 'sA', 'sB', 'sC'];
    const wide = [d, ad, bd].includes('int64');
    // int64: acc = sum a*b, r = alpha*acc + beta*c, all in vec2<u32> words
    const L = (x: DTypeName, v: string): string => R.castExpr(x, 'int64', v);
    const math = wide ? {
      init: 'vec2<u32>(0u)', step: `acc = nbx_add_l(acc, nbx_mul_l(${L(ad, R.load(ad, 'b2', 'ia'))}, ${L(bd, R.load(bd, 'b3', 'ib'))}));`,
      res: `var r = nbx_mul_l(nbx_i2l(alpha), acc);
  if (beta != 0i) { r = nbx_add_l(r, nbx_mul_l(nbx_i2l(beta), ${L(d, loadOut(d, 'b1', 'ci'))})); }
  ${d === 'int64' ? R.store(d, 'b1', 'ci', 'r') : storeVal(d, 'b1', 'ci', R.castExpr('int64', d, 'r'))}`,
    } : {
      init: '0i', step: `acc += ${R.load(ad, 'b2', 'ia')} * ${R.load(bd, 'b3', 'ib')};`,
      res: `var r = alpha * acc;
  if (beta != 0i) { r += beta * ${loadOut(d, 'b1', 'ci')}; }
  ${storeVal(d, 'b1', 'ci', 'r')}`,
    };
    const body = `${names.map((nm, i) => `let ${nm} = ${U(i)};`).join(' ')}
  let alpha = bitcast<i32>(${U(15)}); let beta = bitcast<i32>(${U(16)});
  if (g >= total) { return; }
  let j = g % n; let i = (g / n) % m; let z = g / (m * n);
  let oa = aoff + z * sA; let ob = boff + z * sB;
  var acc = ${math.init};
  for (var l = 0u; l < k; l++) {
    let ia = oa + select(i * lda + l, l * lda + i, tA != 0u);
    let ib = ob + select(l * ldb + j, j * ldb + l, tB != 0u);
    ${math.step}
  }
  let ci = coff + z * sC + i * ldc + j;
  ${math.res}`;
    return module(17, access, wg, body);
  });
}

export function webgpuGemmInt(p: GemmParams): void {
  const d = p.c.dtype;
  for (const r of [p.a, p.b, p.c] as StridedRef[]) {
    checkWgslDType('matmul', r.dtype, true);
    if (isFloat(r.dtype) || r.dtype === 'complex64') throw new UnsupportedError('matmul', `webgpu gemm_int takes integer operands, got ${r.dtype}`);
  }
  const batch = p.batch ?? 1;
  const total = batch * p.m * p.n;
  if (total === 0) return;
  const u = new Uint32Array([total, p.m, p.n, p.k, p.transA ? 1 : 0, p.transB ? 1 : 0, p.lda, p.ldb, p.ldc, p.a.offset, p.b.offset, p.c.offset,
    p.strideA ?? 0, p.strideB ?? 0, p.strideC ?? 0, Math.trunc(p.alpha) >>> 0, Math.trunc(p.beta) >>> 0]);
  const { bufs, done } = bindAll(be, [p.c.buf as WGBuffer], [p.a.buf as WGBuffer, p.b.buf as WGBuffer]);
  const wg = be.wgElementwise;
  be.dispatch(gemmIntProgram(d, p.a.dtype, p.b.dtype, wg), bufs, u, total, wg);
  done();
}
