// Pooling: nn.functional.max_pool1d/2d/3d, avg_pool1d/2d/3d, adaptive_avg_pool1d/2d/3d,
// adaptive_max_pool1d/2d/3d and lp_pool1d/2d/3d. Every variant runs as a 3-D problem on a contiguous
// [N*C, D, H, W] operand (1-D and 2-D inputs get leading size-1 spatial dims), so one device kernel
// ('pool' / 'adaptive_pool') serves all of them. Output sizes, ceil_mode and the argument checks follow
// PyTorch's pooling_output_shape and pool*d_shape_check, with the same messages.

import { Tensor } from '../tensor/tensor.js';
import { DTYPES } from '../dtype/dtypes.js';
import { DTypeError, ShapeError, ValueError } from '../errors.js';
import { fmtShape } from '../tensor/shape.js';
import { kernel } from '../kernels/registry.js';
import type { StridedRef } from '../backend/backend.js';
import { def, Scalar } from './registry.js';
import * as ew from './elementwise.js';
import { valuesIndices, type ValuesIndices } from './reduce.js';
import { asTensor, computeDType, contiguousAs, intArg, narrowTo, numArg, release, to3, torchTypeName } from './conv.js';
import type { PoolKernelParams } from '../kernels/pool.js';
import type { AdaptivePoolKernelParams } from '../kernels/pool.js';

// eslint-disable-next-line @typescript-eslint/no-explicit-any
type Fn = (...args: any[]) => any;

const dimLetters = (d: number): string[] => ['T', 'H', 'W'].slice(3 - d);

/** A pooling int tuple: an int or a list of 1 or `d` ints, with PyTorch's per-op message. */
function poolTuple(op: string, name: string, v: unknown, d: number, allowEmpty = false): number[] | null {
  const short = op.split('.').pop()!;
  const list = Array.isArray(v) ? v : [v];
  if (allowEmpty && (v === null || (Array.isArray(v) && v.length === 0))) return null;
  if (list.length !== 1 && list.length !== d) {
    const n = d === 1 ? 'one int' : d === 2 ? 'two ints' : 'three ints';
    const what = name === 'stride' ? 'must either be omitted, a single int, or a tuple of' : name === 'dilation' ? 'must be either a single int, or a tuple of' : 'must either be a single int, or a tuple of';
    throw new ValueError(op, `${short}: ${name} ${what} ${n}`);
  }
  const xs = list.map((e) => intArg(op, name, e));
  return xs.length === 1 ? Array(d).fill(xs[0]) : xs;
}

/** PyTorch's pooling_output_shape_pad_lr, including ceil_mode's "last window starts inside" rule. */
function poolOutSize(op: string, n: number, k: number, pad: number, s: number, dil: number, ceil: boolean): number {
  if (pad > Math.floor(((k - 1) * dil + 1) / 2)) {
    throw new ValueError(op, `pad should be at most half of effective kernel size, but got pad=${pad}, kernel_size=${k} and dilation=${dil}`);
  }
  let o = Math.floor((n + 2 * pad - dil * (k - 1) - 1 + (ceil ? s - 1 : 0)) / s) + 1;
  if (ceil && (o - 1) * s >= n + pad) o--;
  return o;
}

/** Splits off the batch: returns the input as [N*C, D, H, W] refs' shape plus the leading dims. */
function spatialCheck(op: string, x: Tensor, d: number, kind: 'pool' | 'adaptive'): number[] {
  const short = op.split('.').pop()!;
  if (x.ndim !== d + 1 && x.ndim !== d + 2) {
    if (kind === 'adaptive') throw new ShapeError(op, `${short}(): Expected ${d + 1}D or ${d + 2}D tensor, but got ${fmtShape(x.shape)}`);
    if (d === 1) throw new ShapeError(op, `${short}() Expected 2D or 3D input tensor, but got ${fmtShape(x.shape)}`);
    throw new ShapeError(op, `non-empty ${d + 1}D or ${d + 2}D (batch mode) tensor expected for input`);
  }
  const lead = x.shape.slice(0, x.ndim - d);
  // Every dim but the batch must be non-empty (a 0-size batch gives an empty result).
  for (let i = x.ndim === d + 2 ? 1 : 0; i < x.ndim; i++) {
    if (x.shape[i] === 0) {
      if (kind === 'adaptive') throw new ShapeError(op, `${short}(): Expected input to have non-zero size for non-batch dimensions, but input has sizes ${fmtShape(x.shape)} with dimension ${i} being empty`);
      throw new ShapeError(op, `Expected ${d + 1}D or ${d + 2}D (batch mode) tensor with optional 0 dim batch size for input, but got:${fmtShape(x.shape)}`);
    }
  }
  return lead;
}

function checkPoolDType(op: string, x: Tensor, kind: 'max' | 'avg' | 'adaptive_avg' | 'adaptive_max'): void {
  const info = DTYPES[x.dt];
  const ok = info.kind === 'float' ? !info.storageOnly
    : kind === 'max' ? info.kind === 'int' // integer max pooling is exact (PyTorch 2.x supports it)
      : kind === 'avg' ? x.dt === 'int64' : false;
  if (!ok) throw new DTypeError(op, `"${op.split('.').pop()}" not implemented for '${torchTypeName(x.dt)}'`);
}

/** Runs a pooling kernel on x viewed as [B, D, H, W]; returns out (and indices) shaped lead + outSp. */
function runPool(x: Tensor, d: number, lead: number[], outSp: number[], withIdx: boolean,
  call: (xr: StridedRef, out: StridedRef, idx: StridedRef | null) => void): [Tensor, Tensor | null] {
  const ct = computeDType(x.dt);
  const B = lead.reduce((a, b) => a * b, 1);
  const inSp = to3(x.shape.slice(x.ndim - d), 1), o3 = to3(outSp, 1);
  const out = Tensor.empty([...lead, ...outSp], ct, x.device);
  const idx = withIdx ? Tensor.empty([...lead, ...outSp], 'int64', x.device) : null;
  if (out.numel() > 0) {
    const xs = contiguousAs(x, ct);
    const ref = (t: Tensor, sp: number[]): StridedRef => ({ ...t.ref(), shape: [B, ...sp], strides: [sp[0]! * sp[1]! * sp[2]!, sp[1]! * sp[2]!, sp[2]!, 1] });
    try { call(ref(xs, inSp), ref(out, o3), idx ? ref(idx, o3) : null); } finally { release(xs, x); }
  }
  return [narrowTo(out, x.dt), idx];
}

function maxPool(d: number, a: Record<string, unknown>): Tensor | Tensor[] {
  const op = `nn.functional.max_pool${d}d`;
  const x = asTensor(op, a.input);
  const k = poolTuple(op, 'kernel_size', a.kernel_size, d)!;
  const s = poolTuple(op, 'stride', a.stride, d, true) ?? k;
  const p = poolTuple(op, 'padding', a.padding, d)!;
  const dil = poolTuple(op, 'dilation', a.dilation, d)!;
  const ceil = Boolean(a.ceil_mode), withIdx = Boolean(a.return_indices);
  return pool(op, x, d, 'max', k, s, p, dil, ceil, true, null, withIdx);
}

function avgPool(d: number, a: Record<string, unknown>): Tensor {
  const op = `nn.functional.avg_pool${d}d`;
  const x = asTensor(op, a.input);
  const k = poolTuple(op, 'kernel_size', a.kernel_size, d)!;
  const s = poolTuple(op, 'stride', a.stride, d, true) ?? k;
  const p = poolTuple(op, 'padding', a.padding, d)!;
  const div = a.divisor_override === null || a.divisor_override === undefined ? null : intArg(op, 'divisor_override', a.divisor_override);
  if (div === 0) throw new ValueError(op, 'divisor must be not zero');
  return pool(op, x, d, 'avg', k, s, p, Array(d).fill(1), Boolean(a.ceil_mode), Boolean(a.count_include_pad), div, false) as Tensor;
}

function pool(op: string, x: Tensor, d: number, kind: 'max' | 'avg', k: number[], s: number[], p: number[], dil: number[],
  ceil: boolean, countIncludePad: boolean, divisor: number | null, withIdx: boolean): Tensor | Tensor[] {
  const L = dimLetters(d);
  if (k.some((v) => v <= 0)) throw new ValueError(op, `kernel size should be greater than zero, but got ${L.map((l, i) => `k${l}: ${k[i]}`).join(' ')}`);
  if (s.some((v) => v <= 0)) throw new ValueError(op, `stride should be greater than zero, but got ${L.map((l, i) => `d${l}: ${s[i]}`).join(' ')}`);
  if (dil.some((v) => v <= 0)) throw new ValueError(op, `dilation should be greater than zero, but got ${L.map((l, i) => `dilation${l}: ${dil[i]}`).join(' ')}`);
  const lead = spatialCheck(op, x, d, 'pool');
  checkPoolDType(op, x, kind);
  const inSp = x.shape.slice(x.ndim - d);
  const outSp = inSp.map((n, i) => poolOutSize(op, n, k[i]!, p[i]!, s[i]!, dil[i]!, ceil));
  if (p.some((v, i) => v > Math.floor(k[i]! / 2))) {
    throw new ValueError(op, `pad should be smaller than or equal to half of kernel size, but got ${L.map((l, i) => `pad${l} = ${p[i]}`).join(', ')}, ${L.map((l, i) => `k${l} = ${k[i]}`).join(', ')}`);
  }
  if (outSp.some((o) => o < 1)) {
    const plane = x.ndim === d + 2 ? x.shape[1]! : x.shape[0]!;
    throw new ShapeError(op, `Given input size: (${[plane, ...inSp].join('x')}). Calculated output size: (${[plane, ...outSp].join('x')}). Output size is too small`);
  }
  const [out, idx] = runPool(x, d, lead, outSp, withIdx, (xr, o, ir) => {
    const params: PoolKernelParams = {
      kind, x: xr, out: o, indices: ir, kernel: to3(k, 1), stride: to3(s, 1), padding: to3(p, 0), dilation: to3(dil, 1),
      countIncludePad, divisor,
    };
    kernel('pool', x.device, op)(params);
  });
  return idx ? valuesIndices(out, idx) : out;
}

function adaptive(d: number, kind: 'max' | 'avg', a: Record<string, unknown>): Tensor | Tensor[] {
  const op = `nn.functional.adaptive_${kind}_pool${d}d`;
  const short = op.split('.').pop()!;
  const x = asTensor(op, a.input);
  const raw = Array.isArray(a.output_size) ? a.output_size : [a.output_size];
  if (raw.length !== d && !(raw.length === 1 && d > 1 && !Array.isArray(a.output_size))) {
    throw new ValueError(op, d === 1 ? `${short}() argument 'output_size' should contain one int` : `${short}: output_size must be ${d}`);
  }
  const lead = spatialCheck(op, x, d, 'adaptive');
  const inSp = x.shape.slice(x.ndim - d);
  const outSp = (raw.length === 1 ? Array(d).fill(raw[0]) : raw).map((v, i) => (v === null || v === undefined ? inSp[i]! : intArg(op, 'output_size', v)));
  if (outSp.some((o) => o < 0)) throw new ValueError(op, `${short}: elements of output_size must be greater than or equal to 0 but received {${outSp.join(', ')}}`);
  checkPoolDType(op, x, kind === 'max' ? 'adaptive_max' : 'adaptive_avg');
  const withIdx = kind === 'max' && Boolean(a.return_indices);
  const [out, idx] = runPool(x, d, lead, outSp, kind === 'max', (xr, o, ir) => {
    const params: AdaptivePoolKernelParams = { kind, x: xr, out: o, indices: ir };
    kernel('adaptive_pool', x.device, op)(params);
  });
  if (withIdx) return valuesIndices(out, idx!);
  idx?.dispose();
  return out;
}

/** lp_pool: (sum over the window of x^p)^(1/p), composed as PyTorch composes it (through avg_pool). */
function lpPool(d: number, a: Record<string, unknown>): Tensor {
  const op = `nn.functional.lp_pool${d}d`;
  const x = asTensor(op, a.input);
  const p = a.norm_type instanceof Scalar ? a.norm_type : numArg(op, 'norm_type', a.norm_type);
  const k = poolTuple(op, 'kernel_size', a.kernel_size, d)!;
  const s = poolTuple(op, 'stride', a.stride, d, true) ?? k;
  const xp = ew.pow(x, p);
  const avg = pool(op, xp, d, 'avg', k, s, Array(d).fill(0), Array(d).fill(1), Boolean(a.ceil_mode), true, null, false) as Tensor;
  xp.dispose();
  const steps: Tensor[] = [avg];
  const keep = (t: Tensor): Tensor => { steps.push(t); return t; };
  const mag = keep(ew.mul(keep(ew.sign(avg)), keep(ew.nn_relu(keep(ew.abs(avg))))));
  const scaled = keep(ew.mul(mag, k.reduce((u, v) => u * v, 1)));
  const r = ew.pow(scaled, 1 / numArg(op, 'norm_type', p));
  steps.forEach((t) => t.dispose());
  return r;
}

export const max_pool1d = def('nn.functional.max_pool1d(input, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False, return_indices=False)', (a) => maxPool(1, a));
export const max_pool2d = def('nn.functional.max_pool2d(input, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False, return_indices=False)', (a) => maxPool(2, a));
export const max_pool3d = def('nn.functional.max_pool3d(input, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False, return_indices=False)', (a) => maxPool(3, a));
export const avg_pool1d = def('nn.functional.avg_pool1d(input, kernel_size, stride=None, padding=0, ceil_mode=False, count_include_pad=True)', (a) => avgPool(1, a));
export const avg_pool2d = def('nn.functional.avg_pool2d(input, kernel_size, stride=None, padding=0, ceil_mode=False, count_include_pad=True, divisor_override=None)', (a) => avgPool(2, a));
export const avg_pool3d = def('nn.functional.avg_pool3d(input, kernel_size, stride=None, padding=0, ceil_mode=False, count_include_pad=True, divisor_override=None)', (a) => avgPool(3, a));
export const adaptive_avg_pool1d = def('nn.functional.adaptive_avg_pool1d(input, output_size)', (a) => adaptive(1, 'avg', a) as Tensor);
export const adaptive_avg_pool2d = def('nn.functional.adaptive_avg_pool2d(input, output_size)', (a) => adaptive(2, 'avg', a) as Tensor);
export const adaptive_avg_pool3d = def('nn.functional.adaptive_avg_pool3d(input, output_size)', (a) => adaptive(3, 'avg', a) as Tensor);
export const adaptive_max_pool1d = def('nn.functional.adaptive_max_pool1d(input, output_size, return_indices=False)', (a) => adaptive(1, 'max', a));
export const adaptive_max_pool2d = def('nn.functional.adaptive_max_pool2d(input, output_size, return_indices=False)', (a) => adaptive(2, 'max', a));
export const adaptive_max_pool3d = def('nn.functional.adaptive_max_pool3d(input, output_size, return_indices=False)', (a) => adaptive(3, 'max', a));
/** torch.adaptive_max_pool1d (the top-level form) always returns (values, indices). */
export const adaptive_max_pool1d_with_indices = def('adaptive_max_pool1d(input, output_size)', (a) => adaptive(1, 'max', { ...a, return_indices: true }) as ValuesIndices);
export const lp_pool1d = def('nn.functional.lp_pool1d(input, norm_type, kernel_size, stride=None, ceil_mode=False)', (a) => lpPool(1, a));
export const lp_pool2d = def('nn.functional.lp_pool2d(input, norm_type, kernel_size, stride=None, ceil_mode=False)', (a) => lpPool(2, a));
export const lp_pool3d = def('nn.functional.lp_pool3d(input, norm_type, kernel_size, stride=None, ceil_mode=False)', (a) => lpPool(3, a));

/** Area interpolation is adaptive average pooling (used by resample.ts). */
export function adaptiveAvg(x: Tensor, outSp: number[]): Tensor {
  return adaptive(outSp.length, 'avg', { input: x, output_size: outSp }) as Tensor;
}

/** nbx.nn.functional.X entries of this family. */
export const functional: Record<string, Fn> = {
  max_pool1d, max_pool2d, max_pool3d, avg_pool1d, avg_pool2d, avg_pool3d,
  adaptive_avg_pool1d, adaptive_avg_pool2d, adaptive_avg_pool3d, adaptive_max_pool1d, adaptive_max_pool2d, adaptive_max_pool3d,
  lp_pool1d, lp_pool2d, lp_pool3d,
  max_pool1d_with_indices: (...args: unknown[]) => max_pool1d(...withIndices(args)),
  max_pool2d_with_indices: (...args: unknown[]) => max_pool2d(...withIndices(args)),
  max_pool3d_with_indices: (...args: unknown[]) => max_pool3d(...withIndices(args)),
};

function withIndices(args: unknown[]): unknown[] {
  const last = args[args.length - 1];
  if (last !== null && typeof last === 'object' && Object.getPrototypeOf(last) === Object.prototype) {
    return [...args.slice(0, -1), { ...(last as object), return_indices: true }];
  }
  return [...args, { return_indices: true }];
}

/** Tensor methods of this family (tensor as first argument). */
export const methods: Record<string, Fn> = {};
