// CUDA reductions (kernels/reduce.ts) against the CPU kernels (skipped without a CUDA device): every
// reduction kind (sum/mean/prod/amax/amin/max/min with indices/argmax/argmin/any/all/count_nonzero/
// var/std/logsumexp/norm of several orders) over dims 0, 1, -1 and all, on shapes that take each path:
// rows (short rows several per block, long rows, one long row split into slices), cols (wide, tall,
// few columns, a vector tail, the reduced dim split over grid rows and combined by a second pass),
// the general kernels; odd sizes, offsets that break 16-byte alignment, transposed and stepped views;
// float32/float16/bfloat16/float64/int32/int64/bool (and uint8 for any/all). Each check runs under
// several forced launch configurations (threads, unroll), and a repeated call must give the same bits.
// Runs under the emulator too (node test/gen/cuda_emu.mjs node --test dist/test/cuda_reduce.test.js),
// with fewer shapes and dtypes.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import * as nbx from '../src/index.js';
import type { Tensor } from '../src/tensor/tensor.js';
import type { DTypeName } from '../src/dtype/dtypes.js';
import { check, noStaging, rand, same, skip } from './cuda_compare.js';
import { reduceOverride, reduceStats } from '../src/backend/cuda/kernels/reduce.js';

const EMU = !!process.env.NBX_EMU_DIR;
type Dim = number | null;
type Fn = (t: Tensor, d: Dim) => unknown;
const n = nbx as unknown as Record<string, (...a: unknown[]) => unknown>;
const red = (name: string, extra: unknown[] = []): Fn => (t, d) => (d === null ? n[name]!(t, ...(extra.length ? [null, ...extra] : [])) : n[name]!(t, d, ...extra));

const FLOAT_KINDS: [string, Fn][] = [
  ['sum', red('sum')], ['mean', red('mean')], ['prod', red('prod')], ['amax', red('amax')], ['amin', red('amin')],
  ['max', (t, d) => (d === null ? nbx.max(t) : nbx.max(t, d))], ['min', (t, d) => (d === null ? nbx.min(t) : nbx.min(t, d))],
  ['argmax', red('argmax')], ['argmin', red('argmin')], ['any', red('any')], ['all', red('all')], ['count_nonzero', red('count_nonzero')],
  ['var', (t, d) => nbx.var(t, d)], ['std', (t, d) => nbx.std(t, d, { correction: 0 })], ['logsumexp', (t, d) => nbx.logsumexp(t, d === null ? [0, 1] : d)],
  ['norm2', (t, d) => nbx.linalg.vector_norm(t, 2, d)], ['norm1', (t, d) => nbx.linalg.vector_norm(t, 1, d)],
  ['norm_inf', (t, d) => nbx.linalg.vector_norm(t, Infinity, d)], ['norm_-inf', (t, d) => nbx.linalg.vector_norm(t, -Infinity, d)],
  ['norm0', (t, d) => nbx.linalg.vector_norm(t, 0, d)], ['norm3', (t, d) => nbx.linalg.vector_norm(t, 3, d)],
];
const INT_KINDS: [string, Fn][] = FLOAT_KINDS.filter(([k]) => ['sum', 'prod', 'amax', 'amin', 'max', 'min', 'argmax', 'argmin', 'any', 'all', 'count_nonzero'].includes(k));
const BOOL_KINDS: [string, Fn][] = FLOAT_KINDS.filter(([k]) => ['sum', 'amax', 'argmax', 'any', 'all', 'count_nonzero'].includes(k));
const kindsFor = (dt: DTypeName): [string, Fn][] => (dt === 'bool' ? BOOL_KINDS : dt.startsWith('int') || dt === 'uint8' ? INT_KINDS : FLOAT_KINDS);

/** Values for a kind: products near 1 (no overflow), integers small. */
function input(shape: number[], seed: number, dt: DTypeName, kind: string): Tensor {
  if (dt === 'bool') return rand(shape, seed, -1, 1, dt);
  if (kind === 'prod') return dt.startsWith('int') || dt === 'uint8' ? rand(shape, seed, -1, 3, dt) : rand(shape, seed, 0.8, 1.25, dt);
  if (dt.startsWith('int') || dt === 'uint8') return rand(shape, seed, dt === 'uint8' ? 0 : -40, 40, dt);
  return rand(shape, seed, -2, 2, dt);
}

// [shape, dims]: rows path (short rows, long rows, one long row in slices), cols path (tall, wide, few
// columns, 17 columns with a scalar tail, split reduced dim), general kernels on both layouts.
const SHAPES: [number[], Dim[]][] = EMU
  ? [[[37, 29], [0, 1, null]], [[3, 7000], [0, -1]], [[7000, 3], [0]], [[2000, 17], [0]], [[5, 64], [0, 1]], [[20000], [0]]]
  : [[[37, 29], [0, 1, -1, null]], [[3, 70000], [0, -1]], [[70000, 3], [0, 1]], [[16384, 17], [0, 1]], [[1024, 512], [0, 1]],
    [[512, 1024], [0, 1]], [[257, 1000], [0, 1]], [[5, 64], [0, 1]], [[1, 200000], [1]], [[150001], [0]], [[2, 3, 4], [0, 1, 2, null]]];
const DTYPES_ALL: DTypeName[] = EMU ? ['float32', 'bfloat16', 'int64', 'bool'] : ['float32', 'float16', 'bfloat16', 'float64', 'int32', 'int64', 'bool'];
// forced launch configurations (threads, unroll): the summation tree and the split decisions change with them
const ROWS_CFGS = EMU ? [{ threads: 128, unroll: 2 }] : [{ threads: 64, unroll: 1 }, { threads: 256, unroll: 4 }, { threads: 1024, unroll: 2 }];
const COLS_CFGS = EMU ? [{ threads: 256, unroll: 4 }] : [{ threads: 128, unroll: 1 }, { threads: 256, unroll: 4 }, { threads: 512, unroll: 2 }];

/** Compares f on CUDA under every forced configuration with f on the CPU (computed once). */
function checkConfigs(label: string, f: (t: Tensor) => unknown, x: Tensor, gx: Tensor): void {
  const want = f(x);
  try {
    for (let i = 0; i < Math.max(ROWS_CFGS.length, COLS_CFGS.length); i++) {
      reduceOverride.rows = ROWS_CFGS[i % ROWS_CFGS.length]!;
      reduceOverride.cols = COLS_CFGS[i % COLS_CFGS.length]!;
      const got = f(gx);
      try { same(`${label} cfg${i}`, want, got); } finally { for (const t of [got].flat(2) as Tensor[]) t.dispose(); }
    }
  } finally { reduceOverride.rows = null; reduceOverride.cols = null; }
}

// every kind for float32, a few for the other dtypes
const SOME = ['sum', 'mean', 'prod', 'amax', 'argmax', 'argmin', 'any', 'count_nonzero', 'var', 'norm2'];
const kindsOn = (dt: DTypeName): [string, Fn][] =>
  (dt === 'float32' ? kindsFor(dt) : kindsFor(dt).filter(([k]) => SOME.includes(k) || (dt === 'bool' && k === 'all') || (dt === 'bfloat16' && k === 'norm_inf')));

test('every reduction kind x dtype x dim x path, several launch configurations', { skip }, () => {
  for (const dt of DTYPES_ALL) {
    SHAPES.forEach(([shape, dims], si) => {
      for (const [kind, f] of kindsOn(dt)) {
        // integer products run through BigInt on the CPU: small shapes only
        if (kind === 'prod' && (dt.startsWith('int') || dt === 'uint8') && shape.reduce((a, b) => a * b, 1) > 20000) continue;
        const x = input(shape, si * 31 + kind.length, dt, kind), gx = x.to('cuda');
        for (const d of dims) checkConfigs(`${kind} ${dt} [${shape}] dim ${d}`, (t) => f(t, d), x, gx);
        x.dispose(); gx.dispose();
      }
    });
  }
  noStaging(['reduce']);
  // every path ran: rows, rows split into slices, cols, cols split over grid rows, the general kernels
  for (const [path, count] of Object.entries(reduceStats)) assert.ok(count > 0, `path ${path} never ran (${JSON.stringify(reduceStats)})`);
  console.log(`# launches per path: ${JSON.stringify(reduceStats)}`);
});

test('all dtypes through the rows and cols paths (sum, amax, any)', { skip }, () => {
  const dts: DTypeName[] = ['float32', 'float16', 'bfloat16', 'float64', 'int8', 'uint8', 'int16', 'int32', 'int64', 'bool'];
  for (const dt of dts) {
    for (const shape of EMU ? [[600, 33]] : [[600, 33], [4000, 130], [130, 4000]]) {
      const x = input(shape, 5, dt, 'sum');
      for (const d of [0, 1, null]) {
        check(`sum ${dt} [${shape}] ${d}`, (t) => red('sum')(t, d), [x]);
        check(`amax ${dt} [${shape}] ${d}`, (t) => red('amax')(t, d), [x]);
        check(`any ${dt} [${shape}] ${d}`, (t) => red('any')(t, d), [x]);
      }
      x.dispose();
    }
  }
  noStaging(['reduce']);
});

test('non-contiguous views, offsets, keepdim, dtype=, special values', { skip }, () => {
  for (const dt of ['float32', 'bfloat16', 'int32'] as DTypeName[]) {
    const x = input([300, 130], 9, dt, 'sum');
    const views: [string, (t: Tensor) => Tensor][] = [
      ['transposed', (t) => t.t()],
      ['step 2', (t) => t.slice(1, 0, 130, 2)],
      ['offset 1', (t) => t.flatten().narrow(0, 1, 299 * 130).reshape([299, 130])],
      ['narrow cols', (t) => t.narrow(1, 3, 101)],
      ['rows step 3', (t) => t.slice(0, 1, 300, 3)],
    ];
    for (const [name, v] of views) {
      for (const d of [0, 1, null]) {
        check(`sum ${dt} ${name} ${d}`, (t) => red('sum')(v(t), d), [x]);
        check(`amin ${dt} ${name} ${d}`, (t) => red('amin')(v(t), d), [x]);
        check(`argmax ${dt} ${name} ${d}`, (t) => red('argmax')(v(t), d), [x]);
        if (dt !== 'int32') check(`mean ${dt} ${name} ${d}`, (t) => red('mean')(v(t), d), [x]);
      }
    }
    check(`sum keepdim ${dt}`, (t) => nbx.sum(t, 0, { keepdim: true }), [x]);
    check(`sum dims [0,1] ${dt}`, (t) => nbx.sum(t, [0, 1]), [x]);
    check(`sum dtype=float64 ${dt}`, (t) => nbx.sum(t, 0, { dtype: 'float64' }), [x]);
    x.dispose();
  }
  const s = nbx.tensor([[1, NaN, 3], [Infinity, 2, -Infinity], [0, -0, 5], [-1, 4, NaN]]);
  for (const dt of ['float32', 'float16', 'float64'] as DTypeName[]) {
    for (const [kind, f] of FLOAT_KINDS) for (const d of [0, 1, null]) check(`${kind} special ${dt} ${d}`, (t) => f(t, d), [s.to(dt)]);
  }
  const e = nbx.zeros([0, 5]);
  check('sum empty', (t) => nbx.sum(t, 0), [e]);
  check('prod empty', (t) => nbx.prod(t, 0), [e]);
  check('mean empty', (t) => nbx.mean(t, 0), [e]);
  noStaging(['reduce']);
});

test('same bits on every run (fixed combination order)', { skip }, () => {
  for (const [shape, d] of [[[4096, 1024], 0], [[1, EMU ? 30000 : 3000000], 1], [[2000, 17], 0]] as [number[], number][]) {
    const g = rand(shape, 3, -1, 1).to('cuda');
    const a = nbx.sum(g, d).to('cpu').dataSync() as Float32Array, b = nbx.sum(g, d).to('cpu').dataSync() as Float32Array;
    assert.deepEqual(Array.from(b), Array.from(a), `sum [${shape}] dim ${d} differs between runs`);
    g.dispose();
  }
});
