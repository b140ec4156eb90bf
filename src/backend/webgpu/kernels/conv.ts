// WebGPU's conv and conv_transpose (contract: src/kernels/conv.ts): a thread per output element over
// contiguous operands of one dtype; other operands (strided, mixed dtypes, float8) run the CPU kernel on
// host copies, announced like any staged kernel.

import { DTYPES, type DTypeName } from '../../../dtype/dtypes.js';
import type { StridedRef } from '../../backend.js';
import type { BackendKernels } from '../../../kernels/table.js';
import { WGSL as R, perWord, checkWgslDType } from '../../../ir/render_wgsl.js';
import type { Program, WebGPUBackend, WGBuffer } from '../runtime/backend.js';
import { module, U } from '../runtime/elementwise.js';
import { outAccess, program, store, storeInt } from './util.js';
import { hostStaged } from '../runtime/host_staging.js';
import type { ConvKernelParams } from '../../../kernels/conv.js';

let be: WebGPUBackend;
let staged: ((...a: unknown[]) => unknown) | undefined, stagedT: ((...a: unknown[]) => unknown) | undefined;
export const kernels = {
  conv: (p: ConvKernelParams) => { if (webgpuConvSupports(p)) webgpuConv(be, p, false); else (staged ??= hostStaged(be, 'conv'))(p); },
  conv_transpose: (p: ConvKernelParams) => { if (webgpuConvSupports(p)) webgpuConv(be, p, true); else (stagedT ??= hostStaged(be, 'conv_transpose'))(p); },
} satisfies BackendKernels;

/** Points this family's kernels at the backend (called once, when the backend starts). */
export function bind(backend: WebGPUBackend): void {
  be = backend;
}

// ---- convolution ---------------------------------------------------------------------------------

/**
 * Direct convolution (and its transpose): a thread per output element, summing over the group's input
 * channels and the kernel taps in float32, or for integers in i32 (exact modulo 2^32, then wrapped to
 * the dtype by the store: the CPU's exact, wrapping integer convolution). Operands are contiguous [N, C, D, H, W] (1-D/2-D as 3-D).
 * uniform: [total, N, C, D, H, W, CO, KD, KH, KW, OD, OH, OW, sD, sH, sW, pD, pH, pW, dD, dH, dW, groups,
 * xoff, woff, boff, ooff, hasBias]
 */
function convProgram(d: DTypeName, transposed: boolean, wg: number): Program {
  const access = `${outAccess(d)}rrr`;
  return program(`conv|${d}|${transposed}|${wg}`, access, 28, () => {
    const V = (name: string, i: number): string => `let ${name} = ${U(i)};`;
    const names = ['total', 'N', 'C', 'D', 'H', 'W', 'CO', 'KD', 'KH', 'KW', 'OD', 'OH', 'OW', 'sD', 'sH', 'sW', 'pD', 'pH', 'pW',
      'dD', 'dH', 'dW', 'groups', 'xoff', 'woff', 'boff', 'ooff', 'hasBias'];
    const decl = names.map((nm, i) => V(nm, i)).join(' ');
    const x = (idx: string): string => R.load(d, 'b2', idx);
    const w = (idx: string): string => R.load(d, 'b3', idx);
    const isF = DTYPES[d].kind === 'float';
    // conv: input position = out * stride - pad + k * dilation; transpose: out = in * stride - pad + k * dilation
    const inner = transposed
      ? `let COg = CO / groups; let grp = co / COg; let col = co % COg;
  for (var ci = grp * Cg; ci < (grp + 1u) * Cg; ci++) {
    for (var kd = 0u; kd < KD; kd++) { let tz = i32(oz) + i32(pD) - i32(kd * dD); if (tz < 0 || tz % i32(sD) != 0) { continue; } let iz = u32(tz) / sD; if (iz >= D) { continue; }
    for (var kh = 0u; kh < KH; kh++) { let ty = i32(oy) + i32(pH) - i32(kh * dH); if (ty < 0 || ty % i32(sH) != 0) { continue; } let iy = u32(ty) / sH; if (iy >= H) { continue; }
    for (var kw = 0u; kw < KW; kw++) { let tx = i32(ox) + i32(pW) - i32(kw * dW); if (tx < 0 || tx % i32(sW) != 0) { continue; } let ix = u32(tx) / sW; if (ix >= W) { continue; }
      acc += ${x('xoff + (((n * C + ci) * D + iz) * H + iy) * W + ix')} * ${w('woff + (((ci * COg + col) * KD + kd) * KH + kh) * KW + kw')};
    } } } }`
      : `let COg = CO / groups; let grp = co / COg;
  for (var cl = 0u; cl < Cg; cl++) {
    let ci = grp * Cg + cl;
    for (var kd = 0u; kd < KD; kd++) { let iz = i32(oz * sD + kd * dD) - i32(pD); if (iz < 0 || iz >= i32(D)) { continue; }
    for (var kh = 0u; kh < KH; kh++) { let iy = i32(oy * sH + kh * dH) - i32(pH); if (iy < 0 || iy >= i32(H)) { continue; }
    for (var kw = 0u; kw < KW; kw++) { let ix = i32(ox * sW + kw * dW) - i32(pW); if (ix < 0 || ix >= i32(W)) { continue; }
      acc += ${x('xoff + (((n * C + ci) * D + u32(iz)) * H + u32(iy)) * W + u32(ix)')} * ${w('woff + (((co * Cg + cl) * KD + kd) * KH + kh) * KW + kw')};
    } } } }`;
    const body = `${decl}
  if (g >= total) { return; }
  var q = g;
  let ox = q % OW; q /= OW; let oy = q % OH; q /= OH; let oz = q % OD; q /= OD; let co = q % CO; let n = q / CO;
  let Cg = C / groups;
  var acc = ${isF ? '0.0f' : '0i'};
  if (hasBias != 0u) { acc = ${R.load(d, 'b4', 'boff + co')}; }
  ${inner}
  ${isF ? store(d, 'b1', 'ooff + g', 'acc') : storeInt(d, 'b1', 'ooff + g', 'acc')}`;
    return module(28, access, wg, body);
  });
}

export interface ConvParams {
  x: StridedRef; w: StridedRef; bias: StridedRef | null; out: StridedRef;
  stride: number[]; padding: number[]; dilation: number[]; groups: number;
}

/** Whether the WebGPU convolution takes these operands (float, contiguous): else the caller stages it. */
export function webgpuConvSupports(p: ConvParams): boolean {
  const contiguous = (r: StridedRef): boolean => r.strides.every((s, i) => s === r.shape.slice(i + 1).reduce((a, b) => a * b, 1));
  return [p.x, p.w, p.out, ...(p.bias ? [p.bias] : [])].every((r) => ((DTYPES[r.dtype].kind === 'float' && perWord(r.dtype) <= 2)
    || DTYPES[r.dtype].kind === 'int') && r.dtype === p.x.dtype && (r === p.bias || contiguous(r)));
}

export function webgpuConv(be: WebGPUBackend, p: ConvParams, transposed: boolean): void {
  for (const r of [p.x, p.w, p.out, p.bias ?? undefined]) if (r) checkWgslDType('conv', r.dtype);
  const [N, C, D, H, W] = p.x.shape as number[];
  const [, , KD, KH, KW] = p.w.shape as number[];
  const [, CO, OD, OH, OW] = p.out.shape as number[];
  const total = N! * CO! * OD! * OH! * OW!;
  if (total === 0) return;
  const u = new Uint32Array([total, N!, C!, D!, H!, W!, CO!, KD!, KH!, KW!, OD!, OH!, OW!, ...p.stride, ...p.padding, ...p.dilation, p.groups,
    p.x.offset, p.w.offset, p.bias?.offset ?? 0, p.out.offset, p.bias ? 1 : 0]);
  const outBuf = p.out.buf as WGBuffer;
  const temps: WGBuffer[] = [];
  const rd = (r: StridedRef | null): WGBuffer => {
    const b = (r ?? p.x).buf as WGBuffer;
    if (b !== outBuf) return b;
    const t = be.allocBytes(b.bytes);
    be.copyBuffer(b, t, b.bytes);
    temps.push(t);
    return t;
  };
  const wg = 64;
  be.dispatch(convProgram(p.x.dtype, transposed, wg), [outBuf, rd(p.x), rd(p.w), rd(p.bias)], u, total, wg);
  for (const t of temps) be.free(t);
}
