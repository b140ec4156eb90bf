// WebGPU's pool and adaptive_pool (contract: src/kernels/pool.ts): a thread per output element;
// pooling with int64 indices and mixed dtypes run the CPU kernel on host copies, announced like any
// staged kernel.

import { DTYPES, type DTypeName } from '../../../dtype/dtypes.js';
import type { StridedRef } from '../../backend.js';
import type { BackendKernels } from '../../../kernels/table.js';
import { WGSL as R, checkWgslDType } from '../../../ir/render_wgsl.js';
import type { Program, WebGPUBackend, WGBuffer } from '../runtime/backend.js';
import { module, U } from '../runtime/elementwise.js';
import { f32w, outAccess, program, store, storeInt } from './util.js';
import { hostStaged } from '../runtime/host_staging.js';
import type { AdaptivePoolKernelParams, PoolKernelParams } from '../../../kernels/pool.js';

let be: WebGPUBackend;
let staged: ((...a: unknown[]) => unknown) | undefined, stagedA: ((...a: unknown[]) => unknown) | undefined;
export const kernels = {
  pool: (p: PoolKernelParams) => { if (webgpuPoolSupports(p)) webgpuPool(be, p, false); else (staged ??= hostStaged(be, 'pool'))(p); },
  adaptive_pool: (p: AdaptivePoolKernelParams) => { if (webgpuPoolSupports(p)) webgpuPool(be, p, true); else (stagedA ??= hostStaged(be, 'adaptive_pool'))(p); },
} satisfies BackendKernels;

/** Points this family's kernels at the backend (called once, when the backend starts). */
export function bind(backend: WebGPUBackend): void {
  be = backend;
}

// ---- pooling -------------------------------------------------------------------------------------

/**
 * Window and adaptive pooling over contiguous [B, D, H, W]: a thread per output element, windows bounded
 * exactly as PyTorch's CPU kernels (src/backend/cpu/kernels/pool.ts). uniform: [total, B, D, H, W, OD, OH, OW,
 * kD, kH, kW, sD, sH, sW, pD, pH, pW, dD, dH, dW, adaptive, countIncludePad, divisor bits, hasDivisor, xoff, ooff]
 */
function poolProgram(d: DTypeName, kind: 'max' | 'avg', wg: number): Program {
  const access = `${outAccess(d)}r`;
  return program(`pool|${d}|${kind}|${wg}`, access, 26, () => {
    const names = ['total', 'B', 'D', 'H', 'W', 'OD', 'OH', 'OW', 'kD', 'kH', 'kW', 'sD', 'sH', 'sW', 'pD', 'pH', 'pW', 'dD', 'dH', 'dW',
      'adaptive', 'cip', 'divbits', 'hasDiv', 'xoff', 'ooff'];
    const decl = names.map((nm, i) => `let ${nm} = ${U(i)};`).join(' ');
    // per dim: window [a, b) with step st (and the padded size for averages)
    const dim = (L: string, o: string, n: string): string => `var a${L}: i32; var b${L}: i32; var st${L} = 1; var sz${L} = 1;
  if (adaptive != 0u) { a${L} = i32((${o} * ${n}) / O${L}); b${L} = i32(((${o} + 1u) * ${n} + O${L} - 1u) / O${L}); }
  else {
    a${L} = i32(${o} * s${L}) - i32(p${L});
    ${kind === 'max'
      ? `b${L} = min(a${L} + i32((k${L} - 1u) * d${L}) + 1, i32(${n})); st${L} = i32(d${L}); while (a${L} < 0) { a${L} += st${L}; }`
      : `b${L} = min(a${L} + i32(k${L}), i32(${n} + p${L})); sz${L} = b${L} - a${L}; a${L} = max(a${L}, 0); b${L} = min(b${L}, i32(${n}));`}
  }`;
    const x = R.load(d, 'b2', 'base + u32((z * i32(H) + y) * i32(W) + xx)');
    const isF = DTYPES[d].kind === 'float';
    // integers: the max starts at the dtype's minimum (also the CPU's value for an empty window); the
    // average sums in i32 and truncates toward zero, as the CPU's store of acc / divisor
    const info = DTYPES[d];
    const lowest = isF ? '-nbx_inf()' : info.min === -2147483648 ? 'bitcast<i32>(0x80000000u)' : `${info.min}i`;
    const reduce = kind === 'max'
      ? `var best = ${lowest};
  for (var z = aD; z < bD; z += stD) { for (var y = aH; y < bH; y += stH) { for (var xx = aW; xx < bW; xx += stW) {
    let v = ${x}; if (v > best${isF ? ' || nbx_isnan(v)' : ''}) { best = v; } } } }
  let res = best;`
      : `var acc = ${isF ? '0.0f' : '0i'};
  for (var z = aD; z < bD; z++) { for (var y = aH; y < bH; y++) { for (var xx = aW; xx < bW; xx++) { acc += ${x}; } } }
  let count = f32(max(bD - aD, 0) * max(bH - aH, 0) * max(bW - aW, 0));
  var dv = select(count, f32(szD * szH * szW), cip != 0u && adaptive == 0u);
  if (hasDiv != 0u) { dv = bitcast<f32>(divbits); }
  let empty = aD >= bD || aH >= bH || aW >= bW;
  let res = ${isF ? 'select(acc / dv, 0.0f, empty)' : 'select(acc / max(i32(dv), 1i), 0i, empty)'};`;
    const body = `${decl}
  if (g >= total) { return; }
  var q = g;
  let ow = q % OW; q /= OW; let oh = q % OH; q /= OH; let od = q % OD; let bb = q / OD;
  let base = xoff + bb * D * H * W;
  ${dim('D', 'od', 'D')}
  ${dim('H', 'oh', 'H')}
  ${dim('W', 'ow', 'W')}
  ${reduce}
  ${isF ? store(d, 'b1', 'ooff + g', 'res') : storeInt(d, 'b1', 'ooff + g', 'res')}`;
    return module(26, access, wg, body);
  });
}

export interface PoolParams {
  kind: 'max' | 'avg'; x: StridedRef; out: StridedRef; indices: StridedRef | null;
  kernel?: number[]; stride?: number[]; padding?: number[]; dilation?: number[]; countIncludePad?: boolean; divisor?: number | null;
}

export const webgpuPoolSupports = (p: PoolParams): boolean => !p.indices && ['float', 'int'].includes(DTYPES[p.x.dtype].kind) && p.x.dtype === p.out.dtype;

export function webgpuPool(be: WebGPUBackend, p: PoolParams, adaptive: boolean): void {
  checkWgslDType('pool', p.x.dtype); checkWgslDType('pool', p.out.dtype);
  const [B, D, H, W] = p.x.shape as number[];
  const [, OD, OH, OW] = p.out.shape as number[];
  const total = B! * OD! * OH! * OW!;
  if (total === 0) return;
  const k = p.kernel ?? [1, 1, 1], s = p.stride ?? [1, 1, 1], pad = p.padding ?? [0, 0, 0], dil = p.dilation ?? [1, 1, 1];
  const u = new Uint32Array([total, B!, D!, H!, W!, OD!, OH!, OW!, ...k, ...s, ...pad, ...dil, adaptive ? 1 : 0, p.countIncludePad ? 1 : 0,
    f32w(p.divisor ?? 0), p.divisor ? 1 : 0, p.x.offset, p.out.offset]);
  const outBuf = p.out.buf as WGBuffer;
  let xb = p.x.buf as WGBuffer, temp: WGBuffer | null = null;
  if (xb === outBuf) { temp = be.allocBytes(xb.bytes); be.copyBuffer(xb, temp, xb.bytes); xb = temp; }
  be.dispatch(poolProgram(p.x.dtype, p.kind, 64), [outBuf, xb], u, total, 64);
  if (temp) be.free(temp);
}
