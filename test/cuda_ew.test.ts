// CUDA elementwise kernels (src/backend/cuda/ew_kernels.ts): every layout (contiguous one-pass,
// rows x vectors broadcast, tiled transpose, N-d) against the CPU, across dtypes, odd sizes, unaligned
// offsets, sliced rows, mixed operand widths, and launch configurations (threads, vectors per thread,
// cache hints). Runs only where a CUDA device (or the emulator, test/gen/cuda_emu.mjs) is present.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import * as nbx from '../src/index.js';
import { probeCuda } from '../src/backend/cuda/libs.js';
import { ewOverride } from '../src/backend/cuda/ew_kernels.js';
import { EW_FLAT_SPACE } from '../src/backend/cuda/tuning.js';
import { enumerate, type Config } from '../src/autotune/index.js';

// Small ops would run as commands of the launch batch (launch_batch.ts); these tests are about the
// standalone kernels, so batching is off unless the caller sets NBX_CUDA_BATCH.
process.env.NBX_CUDA_BATCH ??= '0';
const probe = probeCuda();
const skip = probe.available ? false : `no CUDA device (${probe.reason}): CUDA elementwise tests not run`;
if (skip) console.log(`# SKIP cuda elementwise tests: ${probe.reason}`);

type DT = nbx.Tensor['dt'];
const DTYPES: DT[] = ['float32', 'float16', 'bfloat16', 'float64', 'int64', 'int32', 'int16', 'int8', 'uint8', 'bool'];
// NBX_EW_CONFIGS: all (every configuration), default (the tuned or default one only: the emulator),
// unset: that one and one with every path (unrolled, hinted).
const CONFIGS: (Config | null)[] = process.env.NBX_EW_CONFIGS === 'all' ? enumerate(EW_FLAT_SPACE)
  : process.env.NBX_EW_CONFIGS === 'default' ? [null] : [null, { threads: 256, unroll: 4, hint: 'cs' }];

/** Deterministic values of `dt` (negative, fractional, large for the type). */
function data(n: number, dt: DT, seed = 0): nbx.Tensor {
  const x = nbx.sin(nbx.add(nbx.arange(n, { dtype: 'float64' }), seed)).mul(dt === 'int8' || dt === 'uint8' ? 100 : 1000);
  return dt === 'bool' ? nbx.gt(x, 0) : x.to(dt);
}

const values = (t: nbx.Tensor): number[] => Array.from(t.to('float64').cpu().dataSync() as Float64Array);

/** f on the CPU tensors and on their CUDA copies: equal (floats to a relative 1e-6, NaN matching NaN). */
function same(what: string, f: (...t: nbx.Tensor[]) => nbx.Tensor, ...xs: nbx.Tensor[]): void {
  const want = f(...xs), got = f(...xs.map((x) => x.to('cuda')));
  assert.deepEqual(got.shape, want.shape, `${what}: shape`);
  assert.equal(got.dt, want.dt, `${what}: dtype`);
  const a = values(got), b = values(want);
  for (let i = 0; i < b.length; i++) {
    const x = a[i]!, y = b[i]!;
    if (!(x === y || (Number.isNaN(x) && Number.isNaN(y)) || Math.abs(x - y) <= 1e-6 * Math.abs(y))) assert.fail(`${what}: index ${i}: cuda ${x}, cpu ${y}`);
  }
}

function forConfigs(body: () => void): void {
  try { for (const c of CONFIGS) { ewOverride.config = c; body(); } } finally { ewOverride.config = null; }
}

test('contiguous: every dtype, sizes around the vector and block widths, the tail', { skip }, () => {
  forConfigs(() => {
    for (const dt of DTYPES) {
      for (const n of [1, 5, 33, 1027, 4099]) {
        same(`add ${dt} n=${n}`, (a, b) => nbx.add(a!, b!), data(n, dt), data(n, dt, 7));
      }
      same(`unary ${dt}`, (a) => nbx.mul(a!, 3), data(2053, dt));
    }
    same('exp f32', (a) => nbx.exp(a!), data(9001, 'float32').div(300));
    same('where 3 inputs', (c, a, b) => nbx.where(c!, a!, b!) as nbx.Tensor, data(3001, 'bool'), data(3001, 'float16'), data(3001, 'float16', 3));
  });
});

test('contiguous: unaligned offsets and mixed operand widths', { skip }, () => {
  forConfigs(() => {
    for (const dt of ['float32', 'bfloat16', 'int8', 'float64'] as DT[]) {
      same(`offset 1 ${dt}`, (a, b) => nbx.add(a!.narrow(0, 1, 2000), b!.narrow(0, 1, 2000)), data(2001, dt), data(2001, dt, 1));
      same(`offsets 1/3 ${dt}`, (a, b) => nbx.sub(a!.narrow(0, 1, 2000), b!.narrow(0, 3, 2000)), data(2003, dt), data(2003, dt, 1));
      same(`out of a view ${dt}`, (a) => nbx.neg(a!.narrow(0, 8, 1990)), data(2003, dt));
    }
    same('f32 + bf16', (a, b) => nbx.add(a!, b!), data(4101, 'float32'), data(4101, 'bfloat16', 2));
    same('int8 * f64', (a, b) => nbx.mul(a!, b!), data(1501, 'int8'), data(1501, 'float64', 2));
    same('f16 cast to f32', (a) => a!.to('float32'), data(2051, 'float16'));
    same('f32 cast to int8', (a) => a!.to('int8'), data(2051, 'float32'));
    same('bool to f64', (a) => a!.to('float64'), data(2051, 'bool'));
  });
});

test('broadcast: rows, columns, scalars, 3-d, sliced rows, expand copies', { skip }, () => {
  forConfigs(() => {
    for (const dt of DTYPES) {
      for (const [r, c] of [[1, 1], [7, 3], [33, 8], [5, 64], [9, 1000], [3, 1024], [130, 36]]) {
        const A = data(r! * c!, dt).reshape(r!, c!);
        same(`row ${dt} ${r}x${c}`, (a, b) => nbx.add(a!, b!), A, data(c!, dt, 5));
        same(`column ${dt} ${r}x${c}`, (a, b) => nbx.mul(a!, b!), A, data(r!, dt, 5).reshape(r!, 1));
        same(`row first ${dt} ${r}x${c}`, (b, a) => nbx.maximum(b!, a!), data(c!, dt, 5), A);
      }
      same(`0-d ${dt}`, (a, s) => nbx.add(a!, s!), data(4097, dt).reshape(17, 241), data(1, dt, 2).reshape([]));
      same(`outer ${dt}`, (a, b) => nbx.mul(a!, b!), data(40, dt).reshape(40, 1), data(48, dt, 1));
    }
    for (const dt of ['float32', 'bfloat16', 'float64', 'int8'] as DT[]) {
      same(`3-d middle broadcast ${dt}`, (a, b) => nbx.add(a!.reshape(4, 6, 40), b!.reshape(4, 1, 40)), data(960, dt), data(160, dt, 3));
      same(`3-d outer broadcast ${dt}`, (a, b) => nbx.add(a!.reshape(4, 6, 40), b!.reshape(1, 6, 40)), data(960, dt), data(240, dt, 3));
      same(`3-d column ${dt}`, (a, b) => nbx.add(a!.reshape(4, 6, 40), b!.reshape(4, 6, 1)), data(960, dt), data(24, dt, 3));
      same(`sliced rows, aligned pitch ${dt}`, (a, b) => nbx.add(a!.reshape(20, 64).narrow(1, 0, 32), b!), data(1280, dt), data(32, dt, 1));
      same(`sliced rows, odd pitch ${dt}`, (a, b) => nbx.add(a!.reshape(20, 67).narrow(1, 1, 32), b!), data(1340, dt), data(32, dt, 1));
      same(`unaligned row vector ${dt}`, (a, b) => nbx.add(a!.reshape(20, 32), b!.narrow(0, 1, 32)), data(640, dt), data(33, dt, 1));
      same(`expand copy ${dt}`, (b) => b!.reshape(1, 256).expand(30, 256).contiguous(), data(256, dt));
      same(`expand column copy ${dt}`, (b) => b!.reshape(30, 1).expand(30, 256).contiguous(), data(30, dt));
      same(`scalar expand ${dt}`, (b) => b!.reshape([]).expand(3000).contiguous(), data(1, dt));
    }
    same('where(col, row, A) mixed', (c, x, y) => nbx.where(c!.reshape(50, 1), x!, y!.reshape(50, 80)) as nbx.Tensor, data(50, 'bool'), data(80, 'float32'), data(4000, 'bfloat16'));
    same('f32 rows + bf16 row', (a, b) => nbx.add(a!.reshape(64, 96), b!), data(6144, 'float32'), data(96, 'bfloat16'));
    same('wide rows (grid along the row)', (a, b) => nbx.add(a!.reshape(3, 70001), b!), data(210003, 'float32'), data(70001, 'float32'));
  });
});

test('other layouts still right: transposed tiles and N-d strides', { skip }, () => {
  for (const dt of ['float32', 'bfloat16', 'int64'] as DT[]) {
    same(`transposed ${dt}`, (a, b) => nbx.add(a!.reshape(40, 50), b!.reshape(50, 40).t()), data(2000, dt), data(2000, dt, 1));
    same(`4-d permute ${dt}`, (a) => nbx.mul(a!.reshape(3, 4, 5, 6).permute(2, 0, 3, 1), 2), data(360, dt));
    same(`strided inner ${dt}`, (a, b) => nbx.add(a!.reshape(30, 40).narrow(1, 0, 20).reshape(30, 20), b!.reshape(30, 40).slice(1, 0, 40, 2)), data(1200, dt), data(1200, dt, 1));
  }
});

test('tuned path (sizes past the tuning threshold)', { skip }, () => {
  const n = 3 * 21851;
  same('add f32 tuned', (a, b) => nbx.add(a!, b!), data(n, 'float32'), data(n, 'float32', 1));
  same('add bf16 row tuned', (a, b) => nbx.add(a!.reshape(n / 3, 3).t().contiguous().reshape(3, n / 3), b!), data(n, 'bfloat16'), data(n / 3, 'bfloat16', 1));
});
