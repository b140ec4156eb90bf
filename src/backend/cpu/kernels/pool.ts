// CPU kernels: window pooling (max / average) and adaptive pooling over a contiguous [B, D, H, W]
// operand. Window bounds follow PyTorch's CPU kernels exactly (MaxPoolKernel.cpp, AvgPoolKernel.cpp,
// AdaptivePooling.h): max takes the first maximum and lets NaN win; average divides by the window
// clipped to the padded input (count_include_pad), to the input, or by divisor_override. Averages
// accumulate in double; int64 averages are exact (BigInt) and truncate like C++ integer division.

import { DTYPES } from '../../../dtype/dtypes.js';
import type { BackendKernels } from '../../../kernels/table.js';
import type { AdaptivePoolKernelParams, PoolKernelParams } from '../../../kernels/pool.js';

type Num = number | bigint;
type Arr = { [i: number]: Num; length: number };

/** Per output position along one dim: window start, end (exclusive) and the padded window size. */
interface Bounds { start: Int32Array; end: Int32Array; size: Int32Array }

function windowBounds(kind: 'max' | 'avg', n: number, on: number, k: number, s: number, p: number, d: number): Bounds {
  const start = new Int32Array(on), end = new Int32Array(on), size = new Int32Array(on);
  for (let o = 0; o < on; o++) {
    let a = o * s - p;
    if (kind === 'max') {
      const b = Math.min(a + (k - 1) * d + 1, n);
      while (a < 0) a += d;
      start[o] = a; end[o] = b;
    } else {
      const b = Math.min(a + k, n + p);
      size[o] = b - a;
      start[o] = Math.max(a, 0); end[o] = Math.min(b, n);
    }
  }
  return { start, end, size };
}

function adaptiveBounds(n: number, on: number): Bounds {
  const start = new Int32Array(on), end = new Int32Array(on), size = new Int32Array(on);
  for (let o = 0; o < on; o++) {
    start[o] = Math.floor((o * n) / on);
    end[o] = Math.floor(((o + 1) * n + on - 1) / on);
    size[o] = end[o]! - start[o]!;
  }
  return { start, end, size };
}

/**
 * The shared loop: for every output element, reduce the input box bD×bH×bW (with steps) to a value.
 * `dil` is the step inside a window (dilation for max pooling, 1 otherwise).
 */
function poolLoop(xRef: PoolKernelParams['x'], outRef: PoolKernelParams['out'], idxRef: PoolKernelParams['indices'],
  kind: 'max' | 'avg', bd: Bounds[], dil: number[], divisor: (o: [number, number, number], count: number) => number): void {
  const X = xRef.buf as unknown as Arr, O = outRef.buf as unknown as Arr;
  const I = idxRef ? (idxRef.buf as BigInt64Array) : null;
  const [B, D, H, W] = xRef.shape as number[];
  const [, OD, OH, OW] = outRef.shape as number[];
  const [bD, bH, bW] = bd as [Bounds, Bounds, Bounds];
  const [sD, sH, sW] = dil as [number, number, number];
  const big = xRef.buf instanceof BigInt64Array;
  const info = DTYPES[xRef.dtype];
  const lowest: Num = big ? -(2n ** 63n) : info.kind === 'int' ? info.min! : -Infinity;
  const plane = D! * H! * W!;
  let o = outRef.offset, io = idxRef ? idxRef.offset : 0;
  for (let b = 0; b < B!; b++) {
    const base = xRef.offset + b * plane;
    for (let od = 0; od < OD!; od++) {
      const d0 = bD.start[od]!, d1 = bD.end[od]!;
      for (let oh = 0; oh < OH!; oh++) {
        const h0 = bH.start[oh]!, h1 = bH.end[oh]!;
        for (let ow = 0; ow < OW!; ow++, o++, io++) {
          const w0 = bW.start[ow]!, w1 = bW.end[ow]!;
          if (kind === 'max') {
            let best: Num = -Infinity, bi = (d0 * H! + h0) * W! + w0;
            for (let z = d0; z < d1; z += sD) {
              for (let y = h0; y < h1; y += sH) {
                const r = (z * H! + y) * W!;
                for (let x = w0; x < w1; x += sW) {
                  const v = X[base + r + x]!;
                  if (v > best || v !== v) { best = v; bi = r + x; }
                }
              }
            }
            O[o] = best === -Infinity ? lowest : best;
            if (I) I[io] = BigInt(bi);
          } else {
            const count = (d1 - d0) * (h1 - h0) * (w1 - w0);
            if (d0 >= d1 || h0 >= h1 || w0 >= w1) { O[o] = big ? 0n : 0; continue; }
            const div = divisor([od, oh, ow], count);
            if (big) {
              let acc = 0n;
              for (let z = d0; z < d1; z++) for (let y = h0; y < h1; y++) {
                const r = base + (z * H! + y) * W!;
                for (let x = w0; x < w1; x++) acc += X[r + x] as bigint;
              }
              O[o] = acc / BigInt(div);
            } else {
              let acc = 0;
              for (let z = d0; z < d1; z++) for (let y = h0; y < h1; y++) {
                const r = base + (z * H! + y) * W!;
                for (let x = w0; x < w1; x++) acc += X[r + x] as number;
              }
              O[o] = acc / div;
            }
          }
        }
      }
    }
  }
}

export function cpuPool(p: PoolKernelParams): void {
  const inSp = p.x.shape.slice(1), outSp = p.out.shape.slice(1);
  const bd = inSp.map((n, i) => windowBounds(p.kind, n, outSp[i]!, p.kernel[i]!, p.stride[i]!, p.padding[i]!, p.dilation[i]!));
  const dil = p.kind === 'max' ? p.dilation : [1, 1, 1];
  const [bD, bH, bW] = bd as [Bounds, Bounds, Bounds];
  poolLoop(p.x, p.out, p.indices, p.kind, bd, dil, ([od, oh, ow], count) =>
    p.divisor ?? (p.countIncludePad ? bD.size[od]! * bH.size[oh]! * bW.size[ow]! : count));
}

export function cpuAdaptivePool(p: AdaptivePoolKernelParams): void {
  const inSp = p.x.shape.slice(1), outSp = p.out.shape.slice(1);
  const bd = inSp.map((n, i) => adaptiveBounds(n, outSp[i]!));
  poolLoop(p.x, p.out, p.indices, p.kind, bd, [1, 1, 1], (_o, count) => count);
}

export const kernels = {
  pool: cpuPool,
  adaptive_pool: cpuAdaptivePool,
} satisfies BackendKernels;
