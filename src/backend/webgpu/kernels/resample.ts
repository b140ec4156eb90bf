// WebGPU kernels 'interpolate' and 'grid_sample' (contract: src/kernels/resample.ts), ported from the
// CUDA ones (src/backend/cuda/kernels/resample.ts). WGSL has no double: sums run in f32 (the
// CPU's run in double and round once), so results agree within float32 rounding, not bit for bit.
//
// interpolate applies the op layer's per-dim tables (one upload: f32 weights, then int32 indices). Pure
// gathers (nearest) copy storage bits, so uint8 stays exact; otherwise a thread per output element sums
// D over H over W taps, innermost W first, the nesting of the CPU's separable passes.
// grid_sample repeats the CPU's coordinate math step by step in f32, each step rounded to the half type
// for float16/bfloat16 inputs as there (coordinates decide which pixels are read, and PyTorch computes
// in the half type); a thread owns a grid point and loops over the channels.

import type { DTypeName } from '../../../dtype/dtypes.js';
import type { BackendKernels } from '../../../kernels/table.js';
import { WGSL as R, checkWgslDType } from '../../../ir/render_wgsl.js';
import type { Program, WebGPUBackend, WGBuffer } from '../runtime/backend.js';
import { module, U } from '../runtime/elementwise.js';
import { numelOf } from '../../../tensor/shape.js';
import { bindAll, checkFloat, outAccess, program, rawLoad, rawStore, storeVal } from './util.js';
import type { GridSampleKernelParams, InterpolateKernelParams, ResampleTable } from '../../../kernels/resample.js';

let be: WebGPUBackend;
export const kernels = {
  interpolate: webgpuInterpolate,
  grid_sample: webgpuGridSample,
} satisfies BackendKernels;

/** Points this family's kernels at the backend (called once, when the backend starts). */
export function bind(backend: WebGPUBackend): void {
  be = backend;
}

// ---- interpolate -------------------------------------------------------------------------------------

/**
 * uniform: [total, D, H, W, OD, OH, OW, tD, tH, tW, wD, wH, wW, iD, iH, iW, xoff, ooff] (wX / iX: word
 * offsets of each dim's weights/indices in the table buffer b3). b1 out, b2 x, b3 tables.
 * `weighted[d]` false: that dim is a plain gather (no multiply, as the CPU skips it); all false: bits copied.
 */
function interpProgram(inD: DTypeName, outD: DTypeName, weighted: boolean[], wg: number): Program {
  const gather = weighted.every((w) => !w);
  const access = `${outAccess(outD)}rr`;
  return program(`rs.interp|${inD}|${outD}|${weighted.join('')}|${wg}`, access, 18, () => {
    const names = ['total', 'D', 'H', 'W', 'OD', 'OH', 'OW', 'tD', 'tH', 'tW', 'wD', 'wH', 'wW', 'iD', 'iH', 'iW', 'xoff', 'ooff'];
    const decl = names.map((n, i) => `let ${n} = ${U(i)};`).join(' ');
    const ix = (w: string): string => `bitcast<i32>(b3[${w}])`;
    const wt = (w: string): string => `bitcast<f32>(b3[${w}])`;
    const head = `${decl}
  if (g >= total) { return; }
  var q = g; let ox = q % OW; q /= OW; let oy = q % OH; q /= OH; let oz = q % OD; let b = q / OD;
  let xb = xoff + b * D * H * W;`;
    if (gather) {
      return module(18, access, wg, `${head}
  let src = xb + (u32(${ix('iD + oz')}) * H + u32(${ix('iH + oy')})) * W + u32(${ix('iW + ox')});
  ${rawStore(outD, 'b1', 'ooff + g', rawLoad(inD, 'b2', 'src'))}`);
    }
    const level = (d: number, inner: string, acc: string): string => (weighted[d]
      ? `${acc} = ${acc} + ${inner} * ${wt(`w${'DHW'[d]} + o${'zyx'[d]} * t${'DHW'[d]} + q${'zyx'[d]}`)};`
      : `${acc} = ${inner};`);
    return module(18, access, wg, `${head}
  var sD = 0.0f;
  for (var qz = 0u; qz < tD; qz++) {
    let zr = u32(${ix('iD + oz * tD + qz')}) * H;
    var sH = 0.0f;
    for (var qy = 0u; qy < tH; qy++) {
      let row = xb + (zr + u32(${ix('iH + oy * tH + qy')})) * W;
      var sW = 0.0f;
      for (var qx = 0u; qx < tW; qx++) { let v = ${R.castExpr(inD, 'float32', R.load(inD, 'b2', `row + u32(${ix('iW + ox * tW + qx')})`))}; ${level(2, 'v', 'sW')} }
      ${level(1, 'sW', 'sH')}
    }
    ${level(0, 'sH', 'sD')}
  }
  ${storeVal(outD, 'b1', 'ooff + g', R.castExpr('float32', outD, 'sD'))}`);
  });
}

export function webgpuInterpolate(p: InterpolateKernelParams): void {
  const { x, out } = p;
  const dims = p.dims as [ResampleTable, ResampleTable, ResampleTable];
  const weighted = dims.map((t) => t.weight !== null);
  checkWgslDType('interpolate', x.dtype); checkWgslDType('interpolate', out.dtype);
  if (weighted.some(Boolean)) checkFloat('interpolate', x);
  const total = numelOf(out.shape);
  if (total === 0) return;
  const [, D, H, W] = x.shape as number[];
  const [, OD, OH, OW] = out.shape as number[];
  // one table buffer: every dim's f32 weights, then its int32 indices (in words)
  const words: number[] = [];
  const f32 = new Float32Array(1), u32v = new Uint32Array(f32.buffer);
  const wOff: number[] = [], iOff: number[] = [];
  for (const t of dims) {
    wOff.push(words.length);
    if (t.weight) for (const w of t.weight) { f32[0] = w; words.push(u32v[0]!); }
    iOff.push(words.length);
    for (const i of t.index) words.push(i >>> 0);
  }
  const tables = be.upload('int32', Int32Array.from(words, (w) => w | 0)) as WGBuffer;
  const u = new Uint32Array([total, D!, H!, W!, OD!, OH!, OW!, ...dims.map((t) => t.taps), ...wOff, ...iOff, x.offset, out.offset]);
  const { bufs, done } = bindAll(be, [out.buf as WGBuffer], [x.buf as WGBuffer, tables]);
  const wg = be.wgElementwise;
  be.dispatch(interpProgram(x.dtype, out.dtype, weighted, wg), bufs, u, total, wg);
  done();
  be.free(tables);
}

// ---- grid_sample -------------------------------------------------------------------------------------

/**
 * Wraps one arithmetic step of the CPU's grid_sample (src/backend/cpu/kernels/resample.ts): plain f32 for float32
 * inputs; for float16/bfloat16 the result rounds to the half type, as PyTorch's kernels compute in it.
 */
function stepOf(step: DTypeName): (e: string) => string {
  if (step === 'float16') return (e) => `nbx_round_f16(${e})`;
  if (step === 'bfloat16') return (e) => `nbx_round_bf16(${e})`;
  return (e) => `(${e})`;
}

/**
 * WGSL coordinate functions (unnormalize, then the padding rule) as the CPU's, each step through q;
 * align_corners (uniform word 9) and the padding mode (word 10: zeros, border, reflection) are uniforms.
 */
function coordFns(vec: boolean, q: (e: string) => string): string {
  let unnorm: string, reflect: string;
  if (vec) {
    // GridSamplerKernel.cpp ComputeLocationBase (constants in the step dtype too)
    unnorm = `if (ac) { return ${q(`${q('g + 1.0f')} * ${q(`${q('f32(size - 1u)')} / 2.0f`)}`)}; }
  return ${q(`${q(`${q('g + 1.0f')} * ${q(`${q('f32(size)')} / 2.0f`)}`)} - 0.5f`)};`;
    reflect = `let tw = ${q('select(f32(size * 2u), f32((size - 1u) * 2u), ac)')}; let low = select(-0.5f, 0.0f, ac);
  if (tw == 0.0f) { return 0.0f; }
  let a = abs(${q('v - low')}); let flips = trunc(${q('a / tw')}); let extra = ${q(`a - ${q('flips * tw')}`)};
  return ${q(`nbx_jmin(extra, ${q('tw - extra')}) + low`)};`;
  } else {
    // GridSampler.h grid_sampler_unnormalize / reflect_coordinates (fmod exact, the flip parity from the
    // rounded quotient, as there)
    unnorm = `if (ac) { return ${q(`${q(`${q('g + 1.0f')} / 2.0f`)} * ${q('f32(size - 1u)')}`)}; }
  return ${q(`${q(`${q(`${q('g + 1.0f')} * ${q('f32(size)')}`)} - 1.0f`)} / 2.0f`)};`;
    reflect = `let lo2 = select(-1.0f, 0.0f, ac); let hi2 = select(f32(2u * size) - 1.0f, f32(2u * (size - 1u)), ac);
  if (lo2 == hi2) { return 0.0f; }
  let mn = lo2 / 2.0f; let span = ${q(`${q('hi2 - lo2')} / 2.0f`)};
  let a = abs(${q('v - mn')}); let flips = floor(${q('a / span')}); let extra = a - span * floor(a / span);
  return select(${q(`${q('span - extra')} + mn`)}, ${q('extra + mn')}, flips - 2.0f * floor(flips * 0.5f) == 0.0f);`;
  }
  const axes = [['X', 4], ['Y', 3], ['Z', 2]].map(([ax, w]) => `fn unnorm_${ax}(g: f32) -> f32 { return nbx_unnorm(g, ${U(w as number)}); }
fn bound_${ax}(v: f32) -> f32 { return nbx_bound(v, ${U(w as number)}); }`).join('\n');
  return `fn nbx_jmin(a: f32, b: f32) -> f32 { if (nbx_isnan(a) || nbx_isnan(b)) { return a + b; } return select(b, a, a < b); }
fn nbx_jmax(a: f32, b: f32) -> f32 { if (nbx_isnan(a) || nbx_isnan(b)) { return a + b; } return select(b, a, a > b); }
fn nbx_unnorm(g: f32, size: u32) -> f32 { let ac = ${U(9)} != 0u; ${unnorm} }
fn nbx_reflect(v: f32, size: u32) -> f32 { let ac = ${U(9)} != 0u; ${reflect} }
fn nbx_clip(v: f32, size: u32) -> f32 { return nbx_jmin(${q('f32(size - 1u)')}, nbx_jmax(v, 0.0f)); }
fn nbx_bound(v: f32, size: u32) -> f32 {
  let pad = ${U(10)};
  if (pad == 1u) { return nbx_clip(v, size); }
  if (pad == 2u) { return nbx_clip(nbx_reflect(v, size), size); }
  return v;
}
${axes}
fn inside(z: f32, y: f32, x: f32) -> bool { return x >= 0.0f && x < f32(${U(4)}) && y >= 0.0f && y < f32(${U(3)}) && z >= 0.0f && z < f32(${U(2)}); }`;
}

/**
 * uniform: [points, C, D, H, W, oplane, xoff, goff, ooff, alignCorners, padding]. b1 out, b2 x, b3 grid.
 * `step`: the dtype every step rounds to (float32: none; the sums then run in plain f32).
 */
function gridSampleProgram(d: DTypeName, step: DTypeName, spatial: 2 | 3, mode: GridSampleKernelParams['mode'], wg: number): Program {
  const access = `${outAccess(d)}rr`;
  return program(`rs.grid|${d}|${step}|${spatial}|${mode}|${wg}`, access, 11, () => {
    const q = stepOf(step);
    const fns = coordFns(spatial === 2, q);
    const x = (idx: string): string => R.castExpr(d, 'float32', R.load(d, 'b2', idx));
    // Σ v·w in the CPU's order over taps [from, from + n), out-of-range taps (offset -1) skipped
    const dot = (acc: string, base: string, ws: string, from: string, n: number): string => `var ${acc} = 0.0f;
    for (var t = ${from}; t < ${from} + ${n}u; t++) { if (offs[t] >= 0) { ${acc} = ${q(`${acc} + ${q(`${x(`${base} + u32(offs[t])`)} * ${ws}[t]`)}`)}; } }`;
    const accumulate = (nt: number): string => `for (var c = 0u; c < C; c++) {
    let xc = xb + c * plane;
    ${dot('acc', 'xc', 'ws', '0u', nt)}
    ${storeVal(d, 'b1', 'obase + c * oplane', R.castExpr('float32', d, 'acc'))}
  }`;
    let body: string;
    if (mode === 'bicubic') {
      // get_cubic_coefficients of the vectorized kernel: distances t + 1, t, 1 - t, 2 - t
      const cub1 = (v: string): string => q(`${q(`${q(`${q(`${q(`1.25f * ${v}`)} - 2.25f`)} * ${v}`)} * ${v}`)} + 1.0f`);
      const cub2 = (v: string): string => q(`${q(`${q(`${q(`${q(`${q(`-0.75f * ${v}`)} + 3.75f`)} * ${v}`)} - 6.0f`)} * ${v}`)} + 3.0f`);
      const coeffs = (c: string, t: string): string => `var ${c}: array<f32, 4>; { let tt = ${t}; let x1 = ${q('tt + 1.0f')}; let x2 = ${q('1.0f - tt')}; let x3 = ${q('2.0f - tt')};
    ${c}[0] = ${cub2('x1')}; ${c}[1] = ${cub1('tt')}; ${c}[2] = ${cub1('x2')}; ${c}[3] = ${cub2('x3')}; }`;
      body = `let x = unnorm_X(gx); let y = unnorm_Y(gy);
  let ix = floor(x); let iy = floor(y);
  ${coeffs('cx', q('x - ix'))}
  ${coeffs('cy', q('y - iy'))}
  var offs: array<i32, 16>; var ws: array<f32, 16>;
  for (var j = 0; j < 4; j++) { for (var i = 0; i < 4; i++) {
    let sx = trunc(bound_X(${q('ix + (f32(i) - 1.0f)')})); let sy = trunc(bound_Y(${q('iy + (f32(j) - 1.0f)')}));
    offs[j * 4 + i] = select(-1, i32(sy) * i32(W) + i32(sx), inside(0.0f, sy, sx));
    ws[j * 4 + i] = cx[i];
  } }
  for (var c = 0u; c < C; c++) {
    let xc = xb + c * plane;
    var acc = 0.0f;
    for (var j = 0u; j < 4u; j++) {
      ${dot('row', 'xc', 'ws', 'j * 4u', 4)}
      acc = ${q(`acc + ${q('cy[j] * row')}`)};
    }
    ${storeVal(d, 'b1', 'obase + c * oplane', R.castExpr('float32', d, 'acc'))}
  }`;
    } else if (mode === 'nearest') {
      body = `let x = bound_X(unnorm_X(gx)); let y = bound_Y(unnorm_Y(gy)); let z = ${spatial === 3 ? 'bound_Z(unnorm_Z(gz))' : '0.0f'};
  let ix = round(x); let iy = round(y); let iz = round(z);
  let ok = inside(iz, iy, ix);
  var off = 0u; if (ok) { off = (u32(iz) * H + u32(iy)) * W + u32(ix); }
  for (var c = 0u; c < C; c++) {
    var v = 0.0f;
    if (ok) { v = ${x('xb + c * plane + off')}; }
    ${storeVal(d, 'b1', 'obase + c * oplane', R.castExpr('float32', d, 'v'))}
  }`;
    } else if (spatial === 2) {
      body = `let x = bound_X(unnorm_X(gx)); let y = bound_Y(unnorm_Y(gy));
  let x0 = floor(x); let y0 = floor(y);
  let wx = ${q('x - x0')}; let ex = ${q('1.0f - wx')}; let ny = ${q('y - y0')}; let sy = ${q('1.0f - ny')};
  var cyv = array<f32, 4>(y0, y0, y0 + 1.0f, y0 + 1.0f); var cxv = array<f32, 4>(x0, x0 + 1.0f, x0, x0 + 1.0f);
  var ws = array<f32, 4>(${q('sy * ex')}, ${q('sy * wx')}, ${q('ny * ex')}, ${q('ny * wx')});
  var offs: array<i32, 4>;
  for (var t = 0u; t < 4u; t++) { offs[t] = select(-1, i32(cyv[t]) * i32(W) + i32(cxv[t]), inside(0.0f, cyv[t], cxv[t])); }
  ${accumulate(4)}`;
    } else {
      body = `let x = bound_X(unnorm_X(gx)); let y = bound_Y(unnorm_Y(gy)); let z = bound_Z(unnorm_Z(gz));
  let x0 = floor(x); let y0 = floor(y); let z0 = floor(z);
  var offs: array<i32, 8>; var ws: array<f32, 8>;
  for (var dz = 0u; dz < 2u; dz++) { for (var dy = 0u; dy < 2u; dy++) { for (var dx = 0u; dx < 2u; dx++) {
    let fx = select(${q('x0 + 1.0f - x')}, ${q('x - x0')}, dx == 1u); let fy = select(${q('y0 + 1.0f - y')}, ${q('y - y0')}, dy == 1u); let fz = select(${q('z0 + 1.0f - z')}, ${q('z - z0')}, dz == 1u);
    let cz = z0 + f32(dz); let cy = y0 + f32(dy); let cx = x0 + f32(dx);
    let t = (dz * 2u + dy) * 2u + dx;
    offs[t] = select(-1, (i32(cz) * i32(H) + i32(cy)) * i32(W) + i32(cx), inside(cz, cy, cx));
    ws[t] = ${q(`${q('fx * fy')} * fz`)};
  } } }
  ${accumulate(8)}`;
    }
    const g = (k: number): string => R.castExpr(d, 'float32', R.load(d, 'b3', `gp + ${k}u`));
    return module(11, access, wg, `let points = ${U(0)}; let C = ${U(1)}; let D = ${U(2)}; let H = ${U(3)}; let W = ${U(4)}; let oplane = ${U(5)};
  if (g >= points) { return; }
  let plane = D * H * W;
  let n = g / oplane; let q = g % oplane;
  let gp = ${U(7)} + g * ${spatial}u;
  let gx = ${g(0)}; let gy = ${g(1)}; let gz = ${spatial === 3 ? g(2) : '0.0f'};
  let xb = ${U(6)} + n * C * plane;
  let obase = ${U(8)} + n * C * oplane + q;
  ${body}`, fns);
  });
}

export function webgpuGridSample(p: GridSampleKernelParams): void {
  const { x, grid, out } = p;
  for (const r of [x, grid, out]) checkFloat('grid_sample', r);
  const [N, C, D, H, W] = x.shape as number[];
  const [, OD, OH, OW] = grid.shape as number[];
  const oplane = OD! * OH! * OW!, points = N! * oplane;
  if (points === 0 || C === 0) return;
  const u = new Uint32Array([points, C!, D!, H!, W!, oplane, x.offset, grid.offset, out.offset, p.alignCorners ? 1 : 0,
    ['zeros', 'border', 'reflection'].indexOf(p.padding)]);
  const { bufs, done } = bindAll(be, [out.buf as WGBuffer], [x.buf as WGBuffer, grid.buf as WGBuffer]);
  const wg = be.wgElementwise;
  be.dispatch(gridSampleProgram(x.dtype, p.stepDType === 'float16' || p.stepDType === 'bfloat16' ? p.stepDType : 'float32', p.spatial, p.mode, wg), bufs, u, points, wg);
  done();
}
