// Resampling: nn.functional.interpolate (nearest, nearest-exact, linear, bilinear, bicubic, trilinear,
// area; antialiased bilinear/bicubic), its upsample* aliases, and grid_sample.
//
// interpolate is separable: for each spatial dim the op layer builds a table of source indices and
// weights per output position, reproducing PyTorch's coordinate math (UpSample.h) in the dtype PyTorch
// does it in (float for float32 and the half types, double for float64; nearest always in float), and
// the device's 'interpolate' kernel applies the tables. Area mode is adaptive average pooling.
// grid_sample's coordinate math runs in the kernel ('grid_sample'), since it depends on the grid values.

import { Tensor } from '../tensor/tensor.js';
import { DTYPES, allocStorage, type DTypeName } from '../dtype/dtypes.js';
import type { Device } from '../backend/backend.js';
import { linspace } from './creation.js';
import { mul, div } from './elementwise.js';
import { matmul } from './linalg.js';
import { DTypeError, ShapeError, UnsupportedError, ValueError } from '../errors.js';
import { fmtShape } from '../tensor/shape.js';
import { kernel } from '../kernels/registry.js';
import type { StridedRef } from '../backend/backend.js';
import { def, Scalar } from './registry.js';
import { describe, deviceOf } from './elementwise.js';
import { asTensor, computeDType, contiguousAs, narrowTo, release, to3, torchTypeName } from './conv.js';
import { adaptiveAvg } from './pool.js';
import { cubic1, cubic2, type GridSampleKernelParams, type InterpolateKernelParams, type ResampleTable, type Round } from '../kernels/resample.js';

// eslint-disable-next-line @typescript-eslint/no-explicit-any
type Fn = (...args: any[]) => any;

// ---- coordinate math (UpSample.h) ------------------------------------------------------------------

const identity: Round = (v) => v;

/** area_pixel_compute_scale. */
function areaScale(f: Round, inSize: number, outSize: number, alignCorners: boolean, scale: number | null): number {
  if (alignCorners) return outSize > 1 ? f((inSize - 1) / (outSize - 1)) : 0;
  return scale !== null && scale > 0 ? f(1 / scale) : f(inSize / outSize);
}

/** area_pixel_compute_source_index. */
function sourceIndex(f: Round, scale: number, o: number, alignCorners: boolean, cubic: boolean): number {
  if (alignCorners) return f(scale * o);
  const src = f(f(scale * f(o + 0.5)) - 0.5);
  return !cubic && src < 0 ? 0 : src;
}

/**
 * Nearest tables. PyTorch has two index rules and picks by kernel: the channels-last kernel (used for
 * small 2-D outputs too) calls nearest_idx / nearest_exact_idx (float scale; nearest keeps the
 * same-size and 2x shortcuts), the generic kernel HelperInterpNearest(Exact) (scale in the op-math
 * type, no shortcuts). Both floor through float (floorf).
 */
function nearestTable(f: Round, inSize: number, outSize: number, scale: number | null, exact: boolean, legacy: boolean): ResampleTable {
  const index = new Int32Array(outSize);
  const s = legacy ? areaScale(Math.fround, inSize, outSize, false, scale) : areaScale(f, inSize, outSize, false, scale);
  for (let o = 0; o < outSize; o++) {
    let i: number;
    if (legacy) {
      if (exact) i = Math.floor(Math.fround((o + 0.5) * s));
      else if (outSize === inSize) i = o;
      else if (outSize === 2 * inSize) i = o >> 1;
      else i = Math.floor(Math.fround(o * s));
    } else if (exact) i = Math.floor(Math.fround(sourceIndex(f, s, o, false, false) + 0.5));
    else i = Math.floor(Math.fround(sourceIndex(f, s, o, true, false)));
    index[o] = Math.min(i, inSize - 1);
  }
  return { taps: 1, index, weight: null };
}

/** guard_index_and_lambda: floor through float, clamp the index, clamp the fraction to [0, 1]. */
function guard(f: Round, real: number, inSize: number): [number, number] {
  const i = Math.min(Math.floor(Math.fround(real)), inSize - 1);
  return [i, Math.min(Math.max(f(real - i), 0), 1)];
}

function linearTable(f: Round, inSize: number, outSize: number, alignCorners: boolean, scale: number | null): ResampleTable {
  const index = new Int32Array(outSize * 2), weight = new Float64Array(outSize * 2);
  const r = areaScale(f, inSize, outSize, alignCorners, scale);
  for (let o = 0; o < outSize; o++) {
    // compute_source_index_and_lambda: equal sizes copy, whatever the scale.
    let i0 = o, i1 = o, l1 = 0;
    if (outSize !== inSize) {
      [i0, l1] = guard(f, sourceIndex(f, r, o, alignCorners, false), inSize);
      i1 = i0 + (i0 < inSize - 1 ? 1 : 0);
    }
    index[2 * o] = i0; index[2 * o + 1] = i1;
    weight[2 * o] = f(1 - l1); weight[2 * o + 1] = l1;
  }
  return { taps: 2, index, weight };
}

/** The four cubic weights for fraction t (get_cubic_upsample_coefficients). */
export function cubicCoeffs(f: Round, t: number, A: number): [number, number, number, number] {
  const x2 = f(1 - t);
  return [cubic2(f, f(t + 1), A), cubic1(f, t, A), cubic1(f, x2, A), cubic2(f, f(x2 + 1), A)];
}

function cubicTable(f: Round, inSize: number, outSize: number, alignCorners: boolean, scale: number | null): ResampleTable {
  const index = new Int32Array(outSize * 4), weight = new Float64Array(outSize * 4);
  const r = areaScale(f, inSize, outSize, alignCorners, scale);
  for (let o = 0; o < outSize; o++) {
    const [i, t] = guard(f, sourceIndex(f, r, o, alignCorners, true), inSize);
    const w = cubicCoeffs(f, t, -0.75);
    for (let j = 0; j < 4; j++) {
      index[4 * o + j] = Math.max(Math.min(i - 1 + j, inSize - 1), 0);
      weight[4 * o + j] = w[j]!;
    }
  }
  return { taps: 4, index, weight };
}

/**
 * Antialiased tables (PyTorch's _compute_indices_min_size_weights_aa, after PIL): a filter widened by
 * the downscale factor, normalised per output position; interp = 2 (triangle) or 4 (Keys' cubic with
 * a = -0.5, as PIL). align_corners only changes the scale. A dim whose size is unchanged is copied.
 */
function antialiasTable(f: Round, inSize: number, outSize: number, alignCorners: boolean, scale: number | null, interp: 2 | 4): ResampleTable {
  if (inSize === outSize) return { taps: 1, index: Int32Array.from({ length: outSize }, (_, i) => i), weight: null };
  const s = areaScale(f, inSize, outSize, alignCorners, scale);
  const support = f(s >= 1 ? interp * 0.5 * s : interp * 0.5);
  const taps = Math.ceil(support) * 2 + 1;
  const filter = (x: number): number => {
    x = Math.abs(x);
    if (interp === 2) return x < 1 ? f(1 - x) : 0;
    return x < 1 ? cubic1(f, x, -0.5) : x < 2 ? cubic2(f, x, -0.5) : 0;
  };
  const index = new Int32Array(outSize * taps), weight = new Float64Array(outSize * taps);
  const invscale = s >= 1 ? f(1 / s) : 1;
  for (let o = 0; o < outSize; o++) {
    const center = f(s * (o + 0.5));
    const xmin = Math.max(Math.trunc(f(center - support) + 0.5), 0);
    const xsize = Math.min(Math.max(Math.min(Math.trunc(f(center + support) + 0.5), inSize) - xmin, 0), taps);
    const ws: number[] = [];
    let total = 0;
    for (let j = 0; j < xsize; j++) {
      const w = filter(f((f(j + xmin - center) + 0.5) * invscale));
      ws.push(w);
      total = f(total + w);
    }
    for (let j = 0; j < taps; j++) {
      // Unused taps get weight 0 and any in-range index.
      index[o * taps + j] = Math.min(xmin + Math.min(j, Math.max(xsize - 1, 0)), inSize - 1);
      weight[o * taps + j] = j >= xsize ? 0 : total !== 0 ? f(ws[j]! / total) : ws[j]!;
    }
  }
  return { taps, index, weight };
}

/** PyTorch's is_contiguous(memory_format=channels_last(_3d)) for a 4-D or 5-D tensor. */
function channelsLastContiguous(x: Tensor): boolean {
  const order = x.ndim === 4 ? [1, 3, 2, 0] : x.ndim === 5 ? [1, 4, 3, 2, 0] : null;
  if (!order) return false;
  let expected = 1;
  for (const d of order) {
    if (x.shape[d] === 1) continue;
    if (x.strides[d] !== expected) return false;
    expected *= x.shape[d]!;
  }
  return true;
}

// ---- interpolate ---------------------------------------------------------------------------------

const MODES = ['nearest', 'nearest-exact', 'linear', 'bilinear', 'bicubic', 'trilinear', 'area'];
const OP = 'nn.functional.interpolate';

function num(v: unknown, what: string): number {
  const n = v instanceof Scalar ? Number(v.value) : v;
  if (typeof n !== 'number') throw new ValueError(OP, `${what} must be a number or a list of numbers, got ${describe(v)}`);
  return n;
}

function interpolateImpl(a: Record<string, unknown>): Tensor {
  const x = asTensor(OP, a.input);
  const mode = a.mode as string;
  let alignCorners = a.align_corners as boolean | null;
  if (mode === 'nearest' || mode === 'area' || mode === 'nearest-exact') {
    if (alignCorners !== null) throw new ValueError(OP, 'align_corners option can only be set with the interpolating modes: linear | bilinear | bicubic | trilinear');
  } else if (alignCorners === null) alignCorners = false;
  const d = x.ndim - 2;
  const inSp = x.shape.slice(2);
  let outSize: number[] | null = null, scales: (number | null)[] = Array(Math.max(d, 0)).fill(null);
  const size = a.size, sf = a.scale_factor;
  if (size !== null && sf !== null) throw new ValueError(OP, 'only one of size or scale_factor should be defined');
  if (size !== null) {
    const list = Array.isArray(size) ? size : Array(Math.max(d, 0)).fill(size);
    if (Array.isArray(size) && size.length !== d) {
      throw new ValueError(OP, `Input and output must have the same number of spatial dimensions, but got input with spatial dimensions of ${fmtShape(inSp)} and output size of ${fmtShape(size as number[])}. Please provide input tensor in (N, C, d1, d2, ...,dK) format and output size in (o1, o2, ...,oK) format.`);
    }
    outSize = list.map((v) => {
      const n = v instanceof Scalar ? Number(v.value) : v;
      if (typeof n !== 'number' || !Number.isInteger(n) || (v instanceof Scalar && v.kind !== 'int')) {
        throw new ValueError(OP, `expected size to be one of int or Tuple[int] or Tuple[int, int] or Tuple[int, int, int], but got size ${describe(v)}`);
      }
      return n;
    });
  } else if (sf !== null) {
    if (Array.isArray(sf) && sf.length !== d) {
      throw new ValueError(OP, `Input and scale_factor must have the same number of spatial dimensions, but got input with spatial dimensions of ${fmtShape(inSp)} and scale_factor of shape ${fmtShape(sf.map((v) => num(v, 'scale_factor')))}. Please provide input tensor in (N, C, d1, d2, ...,dK) format and scale_factor in (s1, s2, ...,sK) format.`);
    }
    scales = (Array.isArray(sf) ? sf : Array(Math.max(d, 0)).fill(sf)).map((v) => num(v, 'scale_factor'));
  } else throw new ValueError(OP, 'either size or scale_factor should be defined');
  let recompute = a.recompute_scale_factor as boolean | null;
  if (recompute && size !== null) throw new ValueError(OP, 'recompute_scale_factor is not meaningful with an explicit size.');
  if (mode === 'area' && outSize === null) recompute = true;
  if (recompute) {
    outSize = inSp.map((n, i) => Math.floor(n * scales[i]!));
    scales = scales.map(() => null);
  }
  const antialias = Boolean(a.antialias);
  if (antialias && !((mode === 'bilinear' || mode === 'bicubic') && x.ndim === 4)) {
    throw new ValueError(OP, 'Anti-alias option is restricted to bilinear and bicubic modes and requires a 4-D tensor as input');
  }
  const need: Record<string, number> = { linear: 3, bilinear: 4, trilinear: 5, bicubic: 4 };
  const ok = (x.ndim >= 3 && x.ndim <= 5 && (mode === 'nearest' || mode === 'nearest-exact' || mode === 'area')) || need[mode] === x.ndim;
  if (!ok) {
    if (MODES.includes(mode) && mode !== 'bicubic' && x.ndim >= 3 && x.ndim <= 5) {
      throw new UnsupportedError(OP, `Got ${x.ndim}D input, but ${mode} mode needs ${need[mode]}D input`);
    }
    throw new UnsupportedError(OP, `Input Error: Only 3D, 4D and 5D input Tensors supported (got ${x.ndim}D) for the modes: nearest | linear | bilinear | bicubic | trilinear | area | nearest-exact (got ${mode})`);
  }
  // C++ upsample_*: size from scale (truncated), then the size checks.
  const out = outSize ?? inSp.map((n, i) => Math.trunc(n * scales[i]!));
  if (mode === 'area') return adaptiveAvg(x, out);
  const nearest = mode === 'nearest' || mode === 'nearest-exact';
  const info = DTYPES[x.dt];
  if (!(info.kind === 'float' && !info.storageOnly) && !(nearest && x.dt === 'uint8')) {
    const fn = nearest ? 'compute_indices_weights_nearest' : mode === 'bicubic' ? 'upsample_bicubic2d' : 'compute_indices_weights_linear';
    throw new DTypeError(OP, `"${fn}" not implemented for '${torchTypeName(x.dt)}'`);
  }
  if (inSp.some((n) => n <= 0) || out.some((n) => n <= 0)) {
    const L = ['D', 'H', 'W'].slice(3 - d);
    throw new ValueError(OP, `Input and output sizes should be greater than 0, but got input (${L.map((l, i) => `${l}: ${inSp[i]}`).join(', ')}) output (${L.map((l, i) => `${l}: ${out[i]}`).join(', ')})`);
  }
  if (x.shape[1] === 0) throw new ShapeError(OP, `Non-empty ${x.ndim}D data tensor expected but got a tensor with sizes ${fmtShape(x.shape)}`);

  const ct = computeDType(x.dt);
  // Coordinates in PyTorch's op-math type: float for float32, the half types and uint8; double for float64.
  const f: Round = ct === 'float64' ? identity : Math.fround;
  // Which nearest kernel PyTorch runs (_use_channels_last_kernel_2d / _3d).
  const legacy = d === 2 ? (channelsLastContiguous(x) && x.shape[1]! > 3) || out[0]! + out[1]! <= 128
    : d === 3 ? channelsLastContiguous(x) && x.shape[1]! > 3 : false;
  const tables = inSp.map((n, i) => {
    const o = out[i]!, s = scales[i] ?? null;
    if (nearest) return nearestTable(f, n, o, s, mode === 'nearest-exact', legacy);
    if (antialias) return antialiasTable(f, n, o, alignCorners!, s, mode === 'bicubic' ? 4 : 2);
    return mode === 'bicubic' ? cubicTable(f, n, o, alignCorners!, s) : linearTable(f, n, o, alignCorners!, s);
  });
  while (tables.length < 3) tables.unshift({ taps: 1, index: new Int32Array(1), weight: null });
  const lead = x.shape.slice(0, 2);
  const B = lead[0]! * lead[1]!;
  const result = Tensor.empty([...lead, ...out], ct, x.device);
  if (result.numel() > 0) {
    const xs = contiguousAs(x, ct);
    const ref = (t: Tensor, sp: number[]): StridedRef => ({ ...t.ref(), shape: [B, ...sp], strides: [sp[0]! * sp[1]! * sp[2]!, sp[1]! * sp[2]!, sp[2]!, 1] });
    try {
      const params: InterpolateKernelParams = { x: ref(xs, to3(inSp, 1)), out: ref(result, to3(out, 1)), dims: tables };
      kernel('interpolate', x.device, OP)(params);
    } finally { release(xs, x); }
  }
  return narrowTo(result, x.dt);
}

export const interpolate = def('nn.functional.interpolate(input, size=None, scale_factor=None, mode=\'nearest\', align_corners=None, recompute_scale_factor=None, antialias=False)', interpolateImpl);
export const upsample = def('nn.functional.upsample(input, size=None, scale_factor=None, mode=\'nearest\', align_corners=None)', (a) => interpolateImpl({ ...a, recompute_scale_factor: null, antialias: false }));
export const upsample_nearest = def('nn.functional.upsample_nearest(input, size=None, scale_factor=None)', (a) =>
  interpolateImpl({ ...a, mode: 'nearest', align_corners: null, recompute_scale_factor: null, antialias: false }));
export const upsample_bilinear = def('nn.functional.upsample_bilinear(input, size=None, scale_factor=None)', (a) =>
  interpolateImpl({ ...a, mode: 'bilinear', align_corners: true, recompute_scale_factor: null, antialias: false }));

// ---- grid_sample ---------------------------------------------------------------------------------

const GS = 'nn.functional.grid_sample';

export const grid_sample = def('nn.functional.grid_sample(input, grid, mode=\'bilinear\', padding_mode=\'zeros\', align_corners=None)', (a) => {
  const x = asTensor(GS, a.input), grid = asTensor(GS, a.grid, 'grid');
  const mode = a.mode as string, pad = a.padding_mode as string;
  if (mode !== 'bilinear' && mode !== 'nearest' && mode !== 'bicubic') {
    throw new ValueError(GS, `nn.functional.grid_sample(): expected mode to be 'bilinear', 'nearest' or 'bicubic', but got: '${mode}'`);
  }
  if (pad !== 'zeros' && pad !== 'border' && pad !== 'reflection') {
    throw new ValueError(GS, `nn.functional.grid_sample(): expected padding_mode to be 'zeros', 'border', or 'reflection', but got: '${pad}'`);
  }
  const alignCorners = Boolean(a.align_corners ?? false);
  deviceOf(GS, [x, grid]);
  if (x.dt !== grid.dt) throw new DTypeError(GS, `grid_sampler(): expected input and grid to have same dtype, but input has ${x.dt} and grid has ${grid.dt}`);
  if (x.ndim >= 1 && grid.ndim >= 1 && x.shape[0] !== grid.shape[0]) {
    throw new ShapeError(GS, `grid_sampler(): expected grid and input to have same batch size, but got input with sizes ${fmtShape(x.shape)} and grid with sizes ${fmtShape(grid.shape)}`);
  }
  if (grid.ndim >= 1 && grid.shape[grid.ndim - 1] !== x.ndim - 2) {
    throw new ShapeError(GS, `grid_sampler(): expected grid to have size ${x.ndim - 2} in last dimension, but got grid with sizes ${fmtShape(grid.shape)}`);
  }
  for (let i = 2; i < x.ndim; i++) {
    if (x.shape[i] === 0) throw new ShapeError(GS, `grid_sampler(): expected input to have non-empty spatial dimensions, but input has sizes ${fmtShape(x.shape)} with dimension ${i} being empty`);
  }
  if ((x.ndim !== 4 && x.ndim !== 5) || grid.ndim !== x.ndim) {
    const k = x.ndim === 5 ? 5 : 4;
    throw new ShapeError(GS, `grid_sampler(): expected ${k}D input and grid with same number of dimensions, but got input with sizes ${fmtShape(x.shape)} and grid with sizes ${fmtShape(grid.shape)}`);
  }
  if (x.ndim === 5 && mode === 'bicubic') throw new ValueError(GS, 'grid_sampler(): bicubic interpolation only supports 4D input');
  const info = DTYPES[x.dt];
  if (info.kind !== 'float' || info.storageOnly) throw new DTypeError(GS, `grid_sampler_${x.ndim - 2}d_cpu not implemented for ${torchTypeName(x.dt)}`);

  const ct = computeDType(x.dt);
  const spatial = (x.ndim - 2) as 2 | 3;
  const [N, C] = [x.shape[0]!, x.shape[1]!];
  const gSp = grid.shape.slice(1, -1);
  const result = Tensor.empty([N, C, ...gSp], ct, x.device);
  if (result.numel() > 0) {
    const xs = contiguousAs(x, ct), gs = contiguousAs(grid, ct);
    const cshape = (s: number[]): number[] => s.map((_, i) => s.slice(i + 1).reduce((p, q) => p * q, 1));
    const r = (t: Tensor, shape: number[]): StridedRef => ({ ...t.ref(), shape, strides: cshape(shape) });
    const in5 = [N, C, ...to3(x.shape.slice(2), 1)], g3 = to3(gSp, 1);
    try {
      const params: GridSampleKernelParams = {
        x: r(xs, in5), grid: r(gs, [N, ...g3, spatial]), out: r(result, [N, C, ...g3]),
        mode, padding: pad, alignCorners, spatial, stepDType: x.dt,
      };
      kernel('grid_sample', x.device, GS)(params);
    } finally { release(xs, x); release(gs, grid); }
  }
  return narrowTo(result, x.dt);
});

// ---- affine_grid ---------------------------------------------------------------------------------

const AG = 'nn.functional.affine_grid';

/** linspace_from_neg_one: pixel centres in [-1, 1] (corners when align_corners), in theta's dtype. */
function unitRange(n: number, alignCorners: boolean, dtype: DTypeName, device: Device): Tensor {
  if (n <= 1) return Tensor.fromStorage(allocStorage(dtype, 1), dtype, [1], device);
  const r = linspace(-1, 1, n, { dtype, device });
  if (alignCorners) return r;
  const m = mul(r, n - 1), q = div(m, n); // two roundings, as PyTorch's range * (n - 1) / n
  r.dispose(); m.dispose();
  return q;
}

/** The sampling grid of an affine transform: base grid of pixel coordinates times thetaᵀ. */
export const affine_grid = def('nn.functional.affine_grid(theta, size, align_corners=None)', (a) => {
  const theta = asTensor(AG, a.theta, 'theta');
  const ac = Boolean(a.align_corners ?? false);
  if (DTYPES[theta.dt].kind !== 'float') throw new ValueError(AG, `Expected theta to have floating point type, but got ${theta.dt}`);
  const size = (a.size as unknown[]).map((v) => Number(v instanceof Scalar ? v.value : v));
  const k = size.length - 2;
  if (k !== 2 && k !== 3) throw new UnsupportedError(AG, `affine_grid only supports 4D and 5D sizes, for 2D and 3D affine transforms, respectively. Got size ${fmtShape(size)}.`);
  if (theta.ndim !== 3 || theta.shape[1] !== k || theta.shape[2] !== k + 1) {
    throw new ShapeError(AG, `Expected a batch of ${k}D affine matrices of shape Nx${k}x${k + 1} for size ${fmtShape(size)}. Got ${fmtShape(theta.shape)}.`);
  }
  const sp = size.slice(2);
  if (!(ac && Math.min(...sp) === 1) && Math.min(...size) <= 0) throw new ValueError(AG, `Expected non-zero, positive output size. Got ${fmtShape(size)}`);
  if (theta.shape[0] !== size[0]) throw new ShapeError(AG, `affine_grid: theta has batch size ${theta.shape[0]} but size asks for ${size[0]}`);
  // Base grid [1, prod(sp), k + 1]: (x, y[, z], 1) per output pixel, x varying fastest.
  const ranges = sp.map((n) => unitRange(n, ac, theta.dt, theta.device));
  const vals = ranges.map((r) => r.dataSync());
  ranges.forEach((r) => r.dispose());
  const npix = sp.reduce((u, v) => u * v, 1);
  // Built in float64 from values that theta's dtype holds exactly, so the cast back is exact.
  const base = new Float64Array(npix * (k + 1));
  for (let q = 0; q < npix; q++) {
    let rest = q;
    for (let d = k - 1; d >= 0; d--) { // output coordinate j is spatial dim k-1-j: x runs along W
      const n = sp[d]!, i = rest % n;
      rest = Math.floor(rest / n);
      base[q * (k + 1) + (k - 1 - d)] = Number(vals[d]![i]);
    }
    base[q * (k + 1) + k] = 1;
  }
  const base64 = Tensor.fromStorage(base, 'float64', [1, npix, k + 1], theta.device);
  const baseT = base64.to(theta.dt);
  if (baseT !== base64) base64.dispose();
  const tt = theta.transpose(1, 2);
  const g = matmul(baseT, tt);
  baseT.dispose(); tt.dispose();
  const r = g.reshape([size[0]!, ...sp, k]);
  if (r !== g) g.dispose();
  return r;
});

/** nbx.nn.functional.X entries of this family. */
export const functional: Record<string, Fn> = { interpolate, upsample, upsample_nearest, upsample_bilinear, grid_sample, affine_grid };
/** Tensor methods of this family (tensor as first argument). */
export const methods: Record<string, Fn> = {};
