// CUDA sort/selection kernels against the CPU kernels (run on a machine with a CUDA device; skipped
// elsewhere): sort/argsort (stable and not, descending, ties, NaN, ±0, short rows in batches, rows longer
// than a shared-memory tile), topk (small k on long rows, large k, sorted=False, ties), kthvalue, median,
// nanmedian, mode, searchsorted/bucketize, unique/unique_consecutive. Values and indices must equal the
// CPU's exactly, ties included. test/gen/cuda_sort_compile.mjs --simulate runs the same checks on the
// simulated device.
import { test } from 'node:test';
import { pathToFileURL } from 'node:url';
import * as nbx from '../src/index.js';
import { Tensor } from '../src/tensor/tensor.js';
import type { DTypeName } from '../src/dtype/dtypes.js';
import { probeCuda } from '../src/backend/cuda/runtime/libs.js';
import { REAL, FLOATS, SIM, rand, distinct, compare, assertNoStaging, type Check } from './cuda_indexing.test.js';

const sz = (gpu: number, sim: number): number => (SIM ? sim : gpu);
const NUM: DTypeName[] = REAL.filter((d) => d !== 'bool');
/** Inputs of a dtype: distinct values (the fast paths alone), spread values, many ties, and NaN/±0/±inf for floats. */
function inputs(shape: number[], dt: DTypeName, seed = 1): Record<string, Tensor> {
  const isF = FLOATS.includes(dt);
  const out: Record<string, Tensor> = {
    distinct: distinct(shape, dt, seed),
    spread: rand(shape, dt, { lo: dt === 'uint8' ? 0 : -1000, hi: dt === 'int8' ? 127 : dt === 'uint8' ? 255 : 1000, step: isF ? 1 / 64 : 1, seed }),
    ties: rand(shape, dt, { lo: dt === 'uint8' ? 0 : -3, hi: 4, step: 1, seed: seed + 1 }),
  };
  if (isF) out.special = rand(shape, dt, { lo: -2, hi: 3, step: 0.5, special: true, seed: seed + 2 });
  return out;
}

export const sortChecks: Record<string, Check> = {
  'sort/argsort/msort: dtypes, stable and not, descending, dims, short rows in batches': (dev) => {
    for (const dt of REAL) {
      for (const [kind, x] of Object.entries(inputs([sz(40, 12), 37], dt))) {
        for (const descending of [false, true]) {
          for (const stable of [false, true]) {
            compare(dev, `${dt} ${kind} sort desc=${descending} stable=${stable}`, (t: Tensor) => nbx.sort(t, -1, descending, { stable }), x);
          }
          compare(dev, `${dt} ${kind} sort dim 0`, (t: Tensor) => nbx.sort(t, 0, descending), x);
        }
        compare(dev, `${dt} ${kind} argsort`, (t: Tensor) => nbx.argsort(t, 1, true), x);
        compare(dev, `${dt} ${kind} msort`, (t: Tensor) => nbx.msort(t), x);
      }
    }
    compare(dev, 'many tiny rows', (t: Tensor) => nbx.sort(t, -1, false, { stable: true }), rand([sz(5000, 300), 3], 'float32', { step: 1 }));
    compare(dev, 'rows of 1', (t: Tensor) => nbx.sort(t), rand([7, 1], 'int16'));
    compare(dev, '0-d', (t: Tensor) => nbx.sort(t), rand([], 'float32'));
    compare(dev, 'empty', (t: Tensor) => nbx.sort(t, 1), rand([0, 5], 'float32'));
    compare(dev, 'broadcast dim', (t: Tensor) => nbx.sort(t.expand([3, 6]), 0), rand([1, 6], 'float32'));
  },
  'sort: rows of a full tile and longer than a tile (merge passes)': (dev) => {
    for (const dt of ['float32', 'int64', 'bfloat16', 'float64'] as DTypeName[]) {
      for (const n of [sz(16384, 2048), sz(100000, 40000)]) {
        const rows = n > 20000 ? 2 : 3;
        for (const [kind, x] of Object.entries(inputs([rows, n], dt, 5))) {
          if (SIM && kind !== 'spread' && n > 20000) continue; // the replayed std::sort of a long row is slow on host fibers
          compare(dev, `${dt} ${kind} n=${n} stable`, (t: Tensor) => nbx.sort(t, -1, true, { stable: true }), x);
          compare(dev, `${dt} ${kind} n=${n}`, (t: Tensor) => nbx.sort(t), x);
        }
      }
    }
    compare(dev, 'permutation 4096', (t: Tensor) => nbx.sort(t), nbx.randperm(4096, { dtype: 'float32' }));
  },
  'topk: small k on long rows (chunked), large k, sorted=False, ties, NaN': (dev) => {
    for (const dt of (SIM ? ['float32', 'bfloat16', 'int64', 'uint8'] : ['float32', 'bfloat16', 'float16', 'int32', 'int64', 'float64', 'uint8']) as DTypeName[]) {
      for (const [rows, n] of [[2, sz(50000, 20000)], [sz(300, 20), 1000], [1, sz(200000, 30000)], [4, 7]]) {
        for (const [kind, x] of Object.entries(inputs([rows, n], dt, 9))) {
          for (const k of [1, 5, Math.min(n, 50), Math.min(n, 64)]) {
            for (const largest of [true, false]) {
              compare(dev, `${dt} ${kind} [${rows},${n}] k=${k} largest=${largest}`, (t: Tensor) => nbx.topk(t, k, -1, largest), x);
            }
          }
          if (n <= 1000) {
            compare(dev, `${dt} ${kind} [${rows},${n}] unsorted`, (t: Tensor) => nbx.topk(t, Math.ceil(n / 3), -1, true, false), x);
            compare(dev, `${dt} ${kind} [${rows},${n}] k=n`, (t: Tensor) => nbx.topk(t, n, -1, false), x);
            compare(dev, `${dt} ${kind} [${rows},${n}] k=0`, (t: Tensor) => nbx.topk(t, 0), x);
          }
        }
      }
    }
    compare(dev, 'k > tile on a long row', (t: Tensor) => nbx.topk(t, sz(5000, 3000)), rand([2, sz(60000, 20000)], 'float32', { step: 1 / 1024 }));
    compare(dev, 'vocabulary sampling shape', (t: Tensor) => nbx.topk(t, 50), rand([sz(8, 2), sz(128256, 32000)], 'bfloat16', { lo: -20, hi: 20, step: 1 / 256 }));
    compare(dev, 'k out of range', (t: Tensor) => nbx.topk(t, 8), rand([2, 7], 'float32'));
  },
  'kthvalue, median, nanmedian, mode: ties, NaN rows, all-NaN rows, long rows': (dev) => {
    for (const dt of NUM) {
      for (const [rows, n] of [[sz(50, 9), 9], [sz(50, 9), 10], [2, sz(30000, 20000)]]) {
        for (const [kind, x] of Object.entries(inputs([rows, n], dt, 13))) {
          if (SIM && n > 1000 && kind !== 'spread') continue;
          for (const k of [1, Math.ceil(n / 2), n]) compare(dev, `${dt} ${kind} [${rows},${n}] kthvalue ${k}`, (t: Tensor) => nbx.kthvalue(t, k, 1), x);
          compare(dev, `${dt} ${kind} [${rows},${n}] median`, (t: Tensor) => nbx.median(t, 1, true), x);
          compare(dev, `${dt} ${kind} [${rows},${n}] nanmedian`, (t: Tensor) => nbx.nanmedian(t, 1), x);
          if (n < 1000 || !SIM) compare(dev, `${dt} ${kind} [${rows},${n}] mode`, (t: Tensor) => nbx.mode(t, 1), x);
        }
      }
    }
    const nanRows = Tensor.fromStorage(Float32Array.from([NaN, NaN, NaN, 1, NaN, 2, -0, 0, 0]), 'float32', [3, 3]);
    compare(dev, 'nanmedian all-NaN row', (t: Tensor) => nbx.nanmedian(t, 1), nanRows);
    compare(dev, 'median NaN rows', (t: Tensor) => nbx.median(t, 1), nanRows);
    compare(dev, 'median of all', (t: Tensor) => nbx.median(t), rand([5, 7], 'float16', { special: true }));
    compare(dev, 'mode bool', (t: Tensor) => nbx.mode(t, 0), rand([9, 4], 'bool'));
    compare(dev, 'kthvalue dim 0 of a view', (t: Tensor) => nbx.kthvalue(t.t(), 3, 0), rand([6, 8], 'int16'));
    compare(dev, 'quantile', (t: Tensor) => nbx.quantile(t, 0.3, 1), rand([4, 33], 'float32', { special: true }));
  },
  'searchsorted, bucketize: dtypes, sides, sorter, batched boundaries, NaN, int32 output': (dev) => {
    for (const dt of NUM) {
      const b = nbx.sort(rand([sz(1000, 60)], dt, { seed: 3 })).values as Tensor;
      const v = rand([5, 40], dt, { seed: 4, special: true });
      compare(dev, `${dt} left`, (s: Tensor, x: Tensor) => nbx.searchsorted(s, x), b, v);
      compare(dev, `${dt} right int32`, (s: Tensor, x: Tensor) => nbx.searchsorted(s, x, { right: true, out_int32: true }), b, v);
      compare(dev, `${dt} side right`, (s: Tensor, x: Tensor) => nbx.searchsorted(s, x, { side: 'right' }), b, v);
      compare(dev, `${dt} bucketize`, (x: Tensor, s: Tensor) => nbx.bucketize(x, s), v, b);
      const raw = rand([5, 30], dt, { seed: 5 });
      const order = nbx.argsort(raw, -1, false, { stable: true }) as Tensor;
      compare(dev, `${dt} batched with sorter`, (s: Tensor, x: Tensor, o: Tensor) => nbx.searchsorted(s, x, { sorter: o }), raw, rand([5, 12], dt, { seed: 6 }), order);
    }
    compare(dev, 'scalar input', (s: Tensor) => nbx.searchsorted(s, 2.5), Tensor.fromStorage(Float32Array.from([-1, 0, 2.5, 2.5, 7]), 'float32', [5]));
  },
  'unique, unique_consecutive: flat and by dim, inverse and counts, NaN and -0, long inputs': (dev) => {
    for (const dt of REAL) {
      for (const [kind, x] of Object.entries(inputs([sz(3000, 300)], dt, 21))) {
        const opts = { return_inverse: true, return_counts: true };
        compare(dev, `${dt} ${kind} unique`, (t: Tensor) => nbx.unique(t, opts), x);
        compare(dev, `${dt} ${kind} unique_consecutive`, (t: Tensor) => nbx.unique_consecutive(t, opts), x);
        compare(dev, `${dt} ${kind} unique 2-d flat`, (t: Tensor) => nbx.unique(t.reshape([-1, 10]), opts), x);
      }
      const rows = rand([12, 3], dt, { lo: 0, hi: 2, step: 1, seed: 3, special: true });
      compare(dev, `${dt} unique dim 0`, (t: Tensor) => nbx.unique(t, { dim: 0, return_inverse: true, return_counts: true }), rows);
      compare(dev, `${dt} unique dim 1`, (t: Tensor) => nbx.unique(t, { dim: 1, return_inverse: true }), rows);
      compare(dev, `${dt} unique_consecutive dim 0`, (t: Tensor) => nbx.unique_consecutive(t, { dim: 0, return_counts: true }), rows);
    }
    compare(dev, 'unique long', (t: Tensor) => nbx.unique(t, { return_inverse: true, return_counts: true }), rand([sz(100000, 30000)], 'int32', { lo: -5000, hi: 5000 }));
    compare(dev, 'unique empty', (t: Tensor) => nbx.unique(t, { return_inverse: true, return_counts: true }), rand([0], 'float32'));
    compare(dev, 'unique 0-d', (t: Tensor) => nbx.unique(t, { return_inverse: true }), rand([], 'int64'));
  },
};

const isMain = process.argv[1] !== undefined && import.meta.url === pathToFileURL(process.argv[1]).href;
if (isMain && !SIM) {
  const probe = probeCuda();
  const skip = probe.available ? false : `no CUDA device (${probe.reason}): CUDA sort tests not run`;
  for (const [name, check] of Object.entries(sortChecks)) test(name, { skip }, () => check('cuda'));
  test('no sort kernel ran through host staging', { skip }, () => assertNoStaging(['sort', 'topk', 'kthvalue', 'median', 'mode', 'searchsorted', 'unique']));
}
