// CUDA elementwise kernels (src/backend/cuda/runtime/elementwise.ts): every layout (contiguous one-pass,
// rows x vectors broadcast, tiled transpose, N-d) against the CPU, across dtypes, odd sizes, unaligned
// offsets, sliced rows, mixed operand widths, and launch configurations (threads, vectors per thread,
// cache hints). Runs only where a CUDA device (or the emulator, test/gen/cuda_emu.mjs) is present.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import * as nbx from '../src/index.js';
import { probeCuda } from '../src/backend/cuda/runtime/libs.js';
import { ewOverride, flatGeometry, bcastGeometry, MAX_GRID_X, IDX32_LIMIT } from '../src/backend/cuda/runtime/elementwise.js';
import { EW_FLAT_SPACE, EW_TUNE_MIN_ELEMENTS, EW_STREAM_ELEMENTS, ewCandidates } from '../src/backend/cuda/tuning/spaces.js';
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

const values = (t: nbx.Tensor): number[] => Array.from(t.to('float64').to('cpu').dataSync() as Float64Array);

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

test('tuned path (sizes past the tuning threshold: a sweep on a fresh cache)', { skip }, () => {
  const n = EW_TUNE_MIN_ELEMENTS + 5, r = (EW_TUNE_MIN_ELEMENTS / 64) + 1;
  same('add f32 tuned', (a, b) => nbx.add(a!, b!), data(n, 'float32'), data(n, 'float32', 1));
  same('where bf16 tuned', (c, a, b) => nbx.where(c!, a!, b!) as nbx.Tensor, data(r * 64, 'bool'), data(r * 64, 'bfloat16'), data(r * 64, 'bfloat16', 1));
  same('add bf16 row tuned', (a, b) => nbx.add(a!.reshape(r, 64), b!), data(r * 64, 'bfloat16'), data(64, 'bfloat16', 1));
  same('add bf16 odd rows tuned', (a, b) => nbx.add(a!.reshape(r, 64).narrow(1, 0, 63), b!), data(r * 64, 'bfloat16'), data(63, 'bfloat16', 1));
});

// Run 1 on the H200 (issue #7) stalled in the bfloat16 part of the sweep: the sweep's shape classes in
// bfloat16, each under every configuration (where with a bool condition: 8-byte bool vectors next to
// 16-byte bf16 ones; unaligned; row vectors; expand copies; odd row lengths).
test('the sweep\'s shape classes in bfloat16, every configuration', { skip }, () => {
  try {
    for (const c of enumerate(EW_FLAT_SPACE)) {
      ewOverride.config = c;
      const n = 4096, C = 256, R = n / C, cfg = JSON.stringify(c);
      const a = data(n, 'bfloat16'), b = data(n, 'bfloat16', 1), cond = data(n, 'bool', 2), row = data(C, 'bfloat16', 3);
      same(`mul ${cfg}`, (x) => nbx.mul(x!, 2), a);
      same(`where ${cfg}`, (k, x, y) => nbx.where(k!, x!, y!) as nbx.Tensor, cond, a, b);
      same(`unaligned ${cfg}`, (x, y) => nbx.add(x!.narrow(0, 1, n - 1), y!.narrow(0, 1, n - 1)), a, b);
      same(`row ${cfg}`, (x, w) => nbx.add(x!.view(R, C), w!), a, row);
      same(`expand ${cfg}`, (w) => w!.reshape(1, C).expand(R, C).contiguous(), row);
      same(`odd rows ${cfg}`, (x, w) => nbx.add(x!.view(R, C).narrow(1, 0, C - 1), w!.narrow(0, 0, C - 1)), a, row);
    }
  } finally { ewOverride.config = null; }
});

// ---- launch geometry (no GPU): the kernels' index math, replayed in JS ------------------------------

const SHAPES: [number, number][] = [];
for (const T of [128, 256, 512, 1024]) for (const U of [1, 2, 4]) SHAPES.push([T, U]);

/** Every element written exactly once by the flat kernel's threads (flatSource's index math). */
function replayFlat(n: number, V: number, T: number, U: number): void {
  const g = flatGeometry(n, V, T, U), hits = new Uint8Array(n);
  for (let b = 0; b < g.grid; b++) for (let t = 0; t < T; t++) {
    for (let u = 0; u < U; u++) { const q = b * T * U + t + u * T; if (q < g.nv) for (let j = 0; j < V; j++) hits[q * V + j]!++; }
    if (b === 0 && t < n - g.nv * V) hits[g.nv * V + t]!++;
  }
  const bad = hits.findIndex((h) => h !== 1);
  assert.equal(bad, -1, `flat n=${n} V=${V} T=${T} U=${U}: element ${bad} written ${hits[bad]} times`);
}

/** Every element written exactly once by the broadcast kernel (bcastSource's index math), loops bounded. */
function replayBcast(C: number, rows: number, V: number, T: number, U0: number): void {
  const g = bcastGeometry(C, rows, V, T, U0), cv = C / V, hits = new Uint8Array(C * rows);
  for (let blk = 0; blk < g.grid; blk++) for (let t = 0; t < T; t++) {
    const tx = t & (g.TX - 1), ty = t >> g.txlog, bx = blk % g.gx, by = Math.floor(blk / g.gx), gy = g.grid / g.gx;
    let trips = 0;
    for (let r = by * g.TY + ty; r < rows; r += gy * g.TY) {
      assert.ok(++trips <= rows, 'row loop runs away');
      for (let u = 0; u < g.U; u++) { const q = bx * g.TX * g.U + tx + u * g.TX; if (q < cv) for (let j = 0; j < V; j++) hits[r * C + q * V + j]!++; }
    }
  }
  const bad = hits.findIndex((h) => h !== 1);
  assert.equal(bad, -1, `bcast C=${C} rows=${rows} V=${V} T=${T} U=${U0}: element ${bad} written ${hits[bad]} times`);
}

test('launch geometry: small problems replayed thread by thread (each element exactly once)', () => {
  for (const [T, U] of SHAPES) {
    for (const V of [1, 2, 4, 8, 16]) for (const n of [1, V - 1, V, V + 1, 3 * V * T * U - 1, 3 * V * T * U + V + 7, 5000]) if (n > 0) replayFlat(n, V, T, U);
    for (const [C, rows] of [[1, 1], [1, 700], [8, 1], [16, 33], [4095, 3], [4096, 5], [64, 300], [2000, 2], [40000, 2]] as [number, number][]) {
      for (const V of [1, 2, 4, 8, 16]) if (C % V === 0) replayBcast(C, rows, V, T, U);
    }
  }
});

test('launch geometry: every size to 2^34, every configuration (bounds, coverage, 32-bit indices)', () => {
  const sizes: number[] = [];
  for (let k = 0; k <= 34; k++) sizes.push(2 ** k, 2 ** k + 1, Math.max(1, 2 ** k - 1), 3 * 2 ** k + 7);
  for (const [T, U] of SHAPES) for (const V of [1, 2, 4, 8, 16]) {
    for (const n of sizes) {
      const g = flatGeometry(n, V, T, U);
      assert.ok(g.grid >= 1 && g.grid <= MAX_GRID_X && Number.isInteger(g.grid), `flat grid ${g.grid}`);
      assert.ok(g.grid * T * U >= g.nv && (g.grid === 1 || (g.grid - 1) * T * U < g.nv), `flat n=${n}: grid ${g.grid} does not fit ${g.nv} vectors`);
      assert.ok(g.tail < V && g.tail <= T && g.nv * V + g.tail === n, `flat n=${n}: tail ${g.tail}`);
      // 32-bit kernels: the largest vector index any thread forms, times V, and the tail's index
      if (n < IDX32_LIMIT) assert.ok(g.grid * T * U * V + V < 2 ** 31, `flat n=${n} V=${V} T=${T} U=${U}: index overflows 32 bits`);
    }
    for (const C of [V, 3 * V, 4095 * V, 4096, 70001 * V, 2 ** 20, 2 ** 27, 2 ** 31 + V]) {
      if (C % V) continue;
      for (const rows of [1, 2, 3, 16384, 2 ** 20 + 3, 2 ** 24, 2 ** 30 + 1]) {
        if (C * rows > 2 ** 36) continue;
        const g = bcastGeometry(C, rows, V, T, U), cv = C / V;
        assert.ok(g.TX * g.TY === T && g.TX === 2 ** g.txlog && g.U >= 1 && g.U <= U, `bcast shape ${JSON.stringify(g)}`);
        assert.ok(g.gx * g.TX * g.U >= cv && (g.gx === 1 || (g.gx - 1) * g.TX * g.U < cv), `bcast C=${C}: gx ${g.gx}`);
        assert.ok(g.gy >= 1 && g.grid === g.gx * g.gy && g.grid <= MAX_GRID_X, `bcast grid ${g.grid}`);
        const stride = g.gy * g.TY, trips = Math.ceil(rows / stride);
        assert.ok(stride > 0 && trips <= Math.ceil(rows / g.TY), `bcast rows=${rows}: row loop stride ${stride}`);
        if (C * rows < IDX32_LIMIT) {
          assert.ok((trips + 1) * stride < 2 ** 31, `bcast C=${C} rows=${rows}: row index overflows 32 bits`);
          assert.ok(g.gx * g.TX * g.U * V < 2 ** 31, `bcast C=${C}: column index overflows 32 bits`);
        }
      }
    }
  }
  assert.throws(() => flatGeometry(2 ** 45, 1, 128, 1), /more than a launch may have/);
});

test('sweep candidates: few below the streaming size, the default always among them', () => {
  const all = enumerate(EW_FLAT_SPACE);
  assert.ok(all.length <= 18, `${all.length} configurations in the space`);
  const small = ewCandidates(all, EW_TUNE_MIN_ELEMENTS), big = ewCandidates(all, EW_STREAM_ELEMENTS);
  assert.ok(small.length <= 4 && big.length <= 12 && big.length > small.length, `${small.length} / ${big.length} candidates: a sweep must stay cheap`);
  for (const cs of [small, big]) assert.ok(cs.some((c) => JSON.stringify(c) === JSON.stringify(EW_FLAT_SPACE.defaultConfig)));
});
