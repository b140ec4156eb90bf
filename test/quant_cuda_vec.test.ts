// The CUDA register GEMVs (src/backend/cuda/kernels/quant.ts, impl 'vec' and the streaming 'svec' / 'smma': int8, int4, fp8, q4_k, q5_k)
// against the CPU dequantizers: every x dtype, m = 1..8, warps splitting K (kw 1..8, more warps than
// stripes, partial last stripes), ragged N, bias, int4 groups 32/64/128 symmetric and asymmetric, fp8
// per tensor; the same bits on a second run; the default choice and the tuner's candidates. Runs where
// a CUDA device is present, or on the host emulator:
//   node test/gen/cuda_emu.mjs node --test dist/test/quant_cuda_vec.test.js
import { test } from 'node:test';
import assert from 'node:assert/strict';
import * as nbx from '../src/index.js';
import { Tensor } from '../src/tensor/tensor.js';
import { kernel } from '../src/kernels/registry.js';
import { probeCuda } from '../src/backend/cuda/runtime/libs.js';
import { forceQuantGemvConfig, lastQuantGemvConfig, defaultKw, streamGrid, bkLaunches, wuLaunches } from '../src/backend/cuda/kernels/quant.js';
import type { QuantFormat } from '../src/kernels/quant.js';
import { QUANT_TOL, dequantRef, lcg, matmulRef, randomPacked, relErr } from '../bench/quant_ref.js';

const probe = probeCuda();
const skip = probe.available ? false : `no CUDA device (${probe.reason}): CUDA quant tests not run`;

type DT = 'float32' | 'float16' | 'bfloat16';
interface Opts { asym?: boolean; bias?: boolean; groupSize?: number; perTensor?: boolean }

function randX(m: number, k: number, dt: DT, seed: number): Tensor {
  const r = lcg(seed);
  return nbx.tensor(Array.from({ length: m * k }, () => r() * 2 - 1)).reshape([m, k]).to(dt);
}

/** quant_matmul on the card (twice: the same bits) against the float64 product of the CPU-dequantized weight. */
function check(f: QuantFormat, dt: DT, m: number, n: number, k: number, seed: number, o: Opts = {}): void {
  const p = randomPacked(f, n, k, seed, o);
  const x = randX(m, k, dt, seed + 1);
  const b = o.bias ? randX(1, n, dt, seed + 2).reshape([n]) : undefined;
  const want = matmulRef(x.to('float64').dataSync() as Float64Array, dequantRef(p), m, n, k, b ? (b.to('float64').dataSync() as Float64Array) : undefined);
  const q = Tensor.fromStorage(p.qweight, 'uint8', [n, p.layout.rowBytes]).to('cuda');
  const s = p.scales ? Tensor.fromStorage(p.scales, 'float32', p.scaleShape!).to('cuda') : undefined;
  const z = p.zeros ? Tensor.fromStorage(p.zeros, 'float32', p.scaleShape!).to('cuda') : undefined;
  const xg = x.to('cuda'), bg = b?.to('cuda');
  const run = (): Float64Array => {
    const out = Tensor.empty([m, n], dt, 'cuda');
    kernel('quant_matmul', 'cuda')({
      x: xg.ref(), qweight: q.ref(), ...(s ? { scales: s.ref() } : {}), ...(z ? { zeros: z.ref() } : {}), ...(bg ? { bias: bg.ref() } : {}),
      out: out.ref(), m, layout: p.layout, dtype: dt,
    });
    return out.to('cpu').to('float64').dataSync() as Float64Array;
  };
  const got = run();
  const e = relErr(got, want);
  const what = `${f}${o.asym ? ' asym' : ''}${o.groupSize ? ` g${o.groupSize}` : ''} ${dt} m=${m} n=${n} k=${k} cfg=${JSON.stringify(lastQuantGemvConfig())}`;
  assert.ok(e <= QUANT_TOL[dt]!, `${what}: relative error ${e} > ${QUANT_TOL[dt]}`);
  const again = run();
  for (let i = 0; i < got.length; i++) if (!Object.is(got[i], again[i])) assert.fail(`${what}: element ${i} differs between runs (${got[i]} vs ${again[i]})`);
}

const KQ: Record<string, number> = { q4_k: 1280, q5_k: 1280 }; // 40 units a row: the second stripe partial

test('register GEMV: every format and x dtype, m = 1, 3, 8, kw 1/2/8, bias, ragged N', { skip }, () => {
  let seed = 1;
  try {
    for (const f of ['int8', 'int4', 'fp8_e4m3', 'q4_k', 'q5_k'] as QuantFormat[]) {
      const k = KQ[f] ?? (f === 'int4' ? 1152 : 1056); // int8 / fp8: 66 units, int4: 36 units (partial stripes)
      for (const [dt, m, kw] of [['bfloat16', 1, 1], ['float16', 3, 2], ['float32', 8, 8], ['bfloat16', 5, 4]] as [DT, number, number][]) {
        forceQuantGemvConfig({ impl: 'vec', kw });
        check(f, dt, m, 21, k, seed++, { bias: m !== 3, groupSize: f === 'int4' ? 64 : undefined, asym: f === 'int4' && m === 8 });
        assert.equal(lastQuantGemvConfig()?.impl, 'vec');
      }
    }
  } finally { forceQuantGemvConfig(null); }
});

test('register GEMV: int4 groups 32/64/128 symmetric and asymmetric, every m, fp8 per tensor', { skip }, () => {
  let seed = 100;
  try {
    forceQuantGemvConfig({ impl: 'vec', kw: 2 });
    for (const g of [32, 64, 128]) for (const asym of [false, true]) check('int4', 'bfloat16', g === 64 ? 2 : 1, 9, 2048, seed++, { groupSize: g, asym });
    for (let m = 1; m <= 8; m++) check('q4_k', 'bfloat16', m, 5, 512, seed++);
    for (let m = 1; m <= 8; m += 2) check('int4', 'float16', m, 7, 512, seed++, { groupSize: 128, asym: m > 4 });
    check('fp8_e4m3', 'bfloat16', 2, 16, 256, seed++, { perTensor: true });
  } finally { forceQuantGemvConfig(null); }
});

test('register GEMV is the default for its formats (tile kernel for the others); kw from the shape', { skip }, () => {
  let seed = 200;
  for (const f of ['int8', 'q4_k', 'q6_k', 'q8_0'] as QuantFormat[]) {
    check(f, 'bfloat16', 1, 16, f === 'q6_k' || f === 'q4_k' ? 512 : 256, seed++);
    assert.equal(lastQuantGemvConfig()?.impl, f === 'q6_k' || f === 'q8_0' ? 'fma' : 'vec', f);
  }
  // the streaming grid: bps blocks per SM, never more warps than K steps
  assert.equal(streamGrid(100000, 2, 132), 264);
  assert.equal(streamGrid(100, 2, 132), 12);
  assert.equal(streamGrid(8, 1, 132), 1);
  // short N splits K inside the block, long N does not; never more warps than K steps
  assert.equal(defaultKw(4096, 2, 14, 132), 2); // 512 blocks
  assert.equal(defaultKw(14336, 2, 4, 132), 1);
  assert.equal(defaultKw(1024, 2, 2, 132), 2);
  assert.equal(defaultKw(64, 1, 100, 132), 8);
});

test('grid-dependency wait: the GEMV kernels place their own (after the L2 prefetch, before x), the dequantize kernels get nvrtc.ts\'s', async () => {
  const { allQuantSources } = await import('../src/backend/cuda/kernels/quant.js');
  const { withGridDependencyWait } = await import('../src/backend/cuda/runtime/nvrtc.js');
  for (const s of allQuantSources()) {
    const own = s.src.includes('NBX_GRID_DEPENDENCY_WAIT();');
    assert.equal(own, !s.label.startsWith('dequant'), `${s.label}: its own wait ${own}`);
    if (own) {
      const body = s.src.slice(s.src.indexOf('__global__'));
      const wait = body.indexOf('NBX_GRID_DEPENDENCY_WAIT();');
      if (s.label.includes('xs:')) { // x staged in shared memory after the wait; the first weight loads before it
        assert.ok(wait < body.indexOf('reinterpret_cast<const uint4*>(X)') && !body.includes('X + '), `${s.label}: x read after the wait, from shared memory only`);
        assert.ok((s.label.startsWith('gemvxs') ? body.indexOf('NBXQ_LOAD(ks)') : body.indexOf('nbxq_ld16(')) < wait, `${s.label}: weight loads before the wait`);
      } else {
        assert.ok(body.indexOf('nbxq_prefetch(') < wait, `${s.label}: prefetch before the wait`);
        assert.ok(wait < body.indexOf('X + '), `${s.label}: x read after the wait`);
      }
    } else {
      assert.ok(withGridDependencyWait(s.src).includes('{ NBX_GRID_DEPENDENCY_WAIT();'), `${s.label}: nvrtc.ts inserts the wait`);
    }
  }
});

test('streaming GEMV (svec, smma): every register format, m = 1..8, split K across warps, ragged N, bias, the same bits twice', { skip }, () => {
  let seed = 300;
  try {
    // K steps few and many against the warps (one warp a row group, several sharing one, warps spanning several)
    for (const f of ['int8', 'int4', 'fp8_e4m3', 'q4_k', 'q5_k'] as QuantFormat[]) {
      const k = KQ[f] ?? (f === 'int4' ? 1152 : 1056);
      for (const [dt, m, ring, bps] of [['bfloat16', 1, 4, 2], ['float16', 3, 2, 1], ['float32', 8, 4, 2]] as [DT, number, number, number][]) {
        forceQuantGemvConfig({ impl: 'svec', kw: 1, ring, bps });
        check(f, dt, m, 37, k, seed++, { bias: m !== 3, groupSize: f === 'int4' ? 64 : undefined, asym: f === 'int4' && m === 8 });
        assert.equal(lastQuantGemvConfig()?.impl, 'svec');
      }
    }
    forceQuantGemvConfig({ impl: 'svec', kw: 1, ring: 4, bps: 2 });
    check('int8', 'bfloat16', 1, 1000, 64, seed++, { bias: true }); // one step a row group: many groups a warp
    for (const [m, asym, ring, bps] of [[1, false, 4, 2], [8, true, 8, 1], [3, false, 8, 1]] as [number, boolean, number, number][]) {
      forceQuantGemvConfig({ impl: 'smma', kw: 1, ring, bps });
      check('int4', 'bfloat16', m, 45, 2048, seed++, { bias: true, groupSize: 128, asym });
      check('int4', 'float16', m, 16, 768, seed++, { groupSize: 256, asym });
    }
  } finally { forceQuantGemvConfig(null); }
});

test('streaming tile GEMV (sfma): every GGUF block format, m = 1..8, split K across warps, ragged N, bias, the same bits twice', { skip }, () => {
  let seed = 400;
  const KB: Record<string, number> = { q2_k: 1280, q3_k: 1536, q4_k: 1280, q5_k: 1280, q6_k: 1536 };
  try {
    for (const f of ['q8_0', 'q4_0', 'q4_1', 'q5_0', 'q5_1', 'q2_k', 'q3_k', 'q4_k', 'q5_k', 'q6_k'] as QuantFormat[]) {
      const k = KB[f] ?? 1088;
      for (const [dt, m, ring, bps] of [['bfloat16', 1, 4, 2], ['float16', 3, 2, 1], ['float32', 8, 3, 2]] as [DT, number, number, number][]) {
        if (f !== 'q8_0' && f !== 'q6_k' && m !== 1) continue;
        forceQuantGemvConfig({ impl: 'sfma', kw: 1, ring, bps });
        check(f, dt, m, 29, k, seed++, { bias: m !== 3 });
        assert.equal(lastQuantGemvConfig()?.impl, 'sfma');
      }
    }
  } finally { forceQuantGemvConfig(null); }
});

test('double-buffered rounds (db): register kernel (U 2/4, kw 1/2) and int4 tensor-core kernel, pairs of whole rounds then the guarded rest, the same bits twice', { skip }, () => {
  let seed = 600;
  try {
    // K long enough for at least one pair of whole rounds per warp and a partial round after it
    for (const [f, k, dt, m, kw, U] of [['int8', 5120, 'bfloat16', 1, 1, 4], ['int8', 2560, 'float16', 3, 2, 2], ['int4', 10240, 'bfloat16', 1, 1, 4],
      ['fp8_e4m3', 2560, 'bfloat16', 8, 1, 2], ['q4_k', 5120, 'bfloat16', 1, 1, 2], ['q5_k', 2560, 'float32', 2, 1, 2]] as [QuantFormat, number, DT, number, number, number][]) {
      forceQuantGemvConfig({ impl: 'vec', kw, xs: 1, db: 1, U });
      check(f, dt, m, 5, k, seed++, { bias: true, groupSize: f === 'int4' ? 128 : undefined, asym: f === 'int4' });
    }
    for (const [dt, m, asym, U, ms] of [['bfloat16', 1, false, 2, 1], ['float16', 3, true, 2, 0], ['bfloat16', 8, true, 3, 1]] as [DT, number, boolean, number, number][]) {
      forceQuantGemvConfig({ impl: 'mma', kw: 1, xs: 1, ms, db: 1, U }); // K 5120: 40 chunks
      check('int4', dt, m, 24, 5120, seed++, { groupSize: 128, asym, bias: true });
      assert.equal(lastQuantGemvConfig()?.impl, 'mma');
    }
  } finally { forceQuantGemvConfig(null); }
});

test('lane-private cp.async rings (cp): register kernel (every format, kw 1/2, 4-8 stages) int4 and int8 tensor-core kernels (x pre-permuted, chunk sums staged), tile kernel', { skip }, () => {
  let seed = 700;
  try {
    for (const [f, k, dt, m, kw, cp] of [['int8', 5120, 'bfloat16', 1, 1, 6], ['int8', 2560, 'float16', 3, 2, 4], ['int4', 10240, 'bfloat16', 1, 1, 8],
      ['int4', 2304, 'float16', 5, 2, 4], ['fp8_e4m3', 2560, 'bfloat16', 8, 1, 6], ['q4_k', 5120, 'bfloat16', 1, 1, 6], ['q5_k', 2560, 'float32', 2, 1, 4]] as [QuantFormat, number, DT, number, number, number][]) {
      forceQuantGemvConfig({ impl: 'vec', kw, xs: 1, cp });
      check(f, dt, m, 5, k, seed++, { bias: true, groupSize: f === 'int4' ? 128 : undefined, asym: f === 'int4' && m !== 1 });
    }
    for (const [dt, m, asym, ms, cp] of [['bfloat16', 1, false, 1, 6], ['float16', 3, true, 0, 4], ['bfloat16', 8, true, 1, 8]] as [DT, number, boolean, number, number][]) {
      forceQuantGemvConfig({ impl: 'mma', kw: 1, xs: 1, ms, cp }); // K 5120: 40 chunks, 5 a warp
      check('int4', dt, m, 24, 5120, seed++, { groupSize: 128, asym, bias: true });
      assert.equal(lastQuantGemvConfig()?.impl, 'mma');
    }
    // int8 on tensor cores (hi / lo nibble mma, x pre-permuted): 5 chunks a warp at K 5120, ragged N, m 1..8
    for (const [dt, m, cp, n] of [['bfloat16', 1, 6, 24], ['float16', 3, 4, 21], ['bfloat16', 8, 8, 16]] as [DT, number, number, number][]) {
      forceQuantGemvConfig({ impl: 'mma', kw: 1, xs: 1, cp });
      check('int8', dt, m, n, 5120, seed++, { bias: m !== 3 });
      assert.equal(lastQuantGemvConfig()?.impl, 'mma');
    }
    // whole-line copies (co): int8 and int4 (odd chunk count: a last stage of one chunk; asym; ragged N)
    for (const [dt, m, cp, n] of [['bfloat16', 1, 4, 24], ['float16', 3, 6, 21], ['bfloat16', 2, 2, 17]] as [DT, number, number, number][]) {
      forceQuantGemvConfig({ impl: 'mma', kw: 1, xs: 1, cp, co: 1 });
      check('int8', dt, m, n, 5120, seed++, { bias: true });
    }
    for (const [dt, m, asym, cp, k] of [['bfloat16', 1, false, 4, 5120], ['float16', 3, true, 6, 4992], ['bfloat16', 8, true, 2, 2176], ['bfloat16', 2, false, 3, 4992]] as [DT, number, boolean, number, number][]) {
      forceQuantGemvConfig({ impl: 'mma', kw: 1, xs: 1, ms: 1, cp, co: 1 });
      check('int4', dt, m, 21, k, seed++, { groupSize: 128, asym, bias: true });
      assert.equal(lastQuantGemvConfig()?.impl, 'mma');
    }
    // the tile kernel's ring: several tiles a row (ring wraps), a partial last tile, kw 1/2, one row a warp too
    for (const [f, k, dt, m, kw, cp, rs] of [['q8_0', 8192, 'bfloat16', 1, 1, 4, null], ['q6_k', 9216, 'float16', 5, 2, 4, null], ['q4_0', 4608, 'bfloat16', 2, 1, 6, [1, 2]],
      ['q3_k', 5120, 'float32', 1, 1, 4, null], ['q6_k', 4096, 'bfloat16', 1, 1, 8, [1, 2]]] as [QuantFormat, number, DT, number, number, number, [number, number] | null][]) {
      forceQuantGemvConfig({ impl: 'fma', kw, xs: 1, cp, ...(rs ? { rows: rs[0], sub: rs[1] } : {}) });
      check(f, dt, m, 7, k, seed++, { bias: true });
    }
  } finally { forceQuantGemvConfig(null); }
});

test('x in shared memory (xs): register, tensor-core and tile kernels, every x dtype, m = 1..8, kw 1/2/8, bias, ragged N, the same bits twice', { skip }, () => {
  let seed = 500;
  try {
    for (const f of ['int8', 'int4', 'fp8_e4m3', 'q4_k', 'q5_k'] as QuantFormat[]) {
      const k = KQ[f] ?? (f === 'int4' ? 1152 : 1056);
      for (const [dt, m, kw] of [['bfloat16', 1, 1], ['float16', 3, 2], ['float32', 8, 8]] as [DT, number, number][]) {
        forceQuantGemvConfig({ impl: 'vec', kw, xs: 1 });
        check(f, dt, m, 21, k, seed++, { bias: m !== 3, groupSize: f === 'int4' ? 64 : undefined, asym: f === 'int4' && m === 8 });
      }
    }
    // one warp per row group on longer rows: the register kernel's unguarded rounds (whole stripes), then the guarded rest
    for (const [f, k, dt, m] of [['int8', 2560, 'bfloat16', 1], ['int4', 5120, 'float16', 2], ['q4_k', 5120, 'bfloat16', 1], ['q5_k', 2560, 'float32', 3], ['fp8_e4m3', 2560, 'bfloat16', 4]] as [QuantFormat, number, DT, number][]) {
      forceQuantGemvConfig({ impl: 'vec', kw: 1, xs: 1 });
      check(f, dt, m, 5, k, seed++, { bias: true, groupSize: f === 'int4' ? 128 : undefined, asym: f === 'int4' });
      forceQuantGemvConfig({ impl: 'vec', kw: 1, xs: 0 });
      check(f, dt, m, 5, k, seed++, { groupSize: f === 'int4' ? 128 : undefined });
    }
    for (const ms of [0, 1]) {
      for (const [dt, m, asym, k] of [['bfloat16', 1, false, 512], ['float16', 3, true, 512], ['bfloat16', 8, false, 512], ['bfloat16', 2, true, 5120]] as [DT, number, boolean, number][]) {
        forceQuantGemvConfig({ impl: 'mma', kw: 1, xs: 1, ms }); // K 5120: 40 chunks, whole rounds then the rest
        check('int4', dt, m, 24, k, seed++, { groupSize: 128, asym, bias: true });
        assert.equal(lastQuantGemvConfig()?.impl, 'mma');
      }
    }
    for (const f of ['q8_0', 'q6_k', 'q4_0', 'q3_k'] as QuantFormat[]) {
      for (const [dt, m, kw] of [['bfloat16', 1, 1], ['float16', 5, 2]] as [DT, number, number][]) {
        forceQuantGemvConfig({ impl: 'fma', kw, xs: 1 });
        check(f, dt, m, 9, 512, seed++, { bias: true });
      }
    }
  } finally { forceQuantGemvConfig(null); }
});

test('x as float32 in shared memory (xf): int4 (groups 32-128, symmetric and asymmetric) and int8, every x dtype, m = 1, 2 (more: the xs kernel), 2/4/8 rows a warp, single ring and db, kw 1/2/4, partial 8-unit groups and stripes, the same bits twice', { skip }, () => {
  let seed = 900;
  try {
    for (const [f, dt, m, nr, U, db, kw, k, g, asym, n] of [
      ['int4', 'bfloat16', 1, 4, 0, 0, 1, 5120, 128, false, 21], ['int4', 'bfloat16', 1, 4, 0, 1, 1, 5120, 128, true, 16],
      ['int4', 'float32', 2, 4, 2, 1, 2, 2304, 64, true, 13], ['int4', 'float16', 2, 8, 0, 1, 1, 4608, 128, false, 17],
      ['int4', 'bfloat16', 2, 2, 0, 0, 4, 1152, 32, true, 9], ['int4', 'bfloat16', 1, 8, 0, 0, 1, 1056, 32, false, 11],
      ['int4', 'float32', 1, 4, 3, 0, 2, 1056, 32, false, 11], ['int4', 'bfloat16', 5, 4, 0, 0, 1, 1152, 128, false, 9],
      ['int8', 'bfloat16', 1, 4, 0, 1, 1, 5120, 0, false, 21], ['int8', 'float32', 2, 8, 0, 0, 2, 1056, 0, false, 19],
      ['int8', 'float16', 1, 2, 0, 0, 1, 2560, 0, false, 7],
    ] as [QuantFormat, DT, number, number, number, number, number, number, number, boolean, number][]) {
      forceQuantGemvConfig({ impl: 'vec', kw, xs: 1, xf: 1, nr, U, db });
      check(f, dt, m, n, k, seed++, { bias: m !== 2, ...(f === 'int4' ? { groupSize: g, asym } : {}) });
    }
  } finally { forceQuantGemvConfig(null); }
});

test('xf for q4_k (x staged interleaved, two sub-blocks a unit) and the xf kernels at 3 / 4 blocks per SM (lb): every x dtype, m = 1, 2, 1/2/4 rows a warp, db and single ring, kw 1/2, partial stripes and groups, ragged N, the same bits twice', { skip }, () => {
  let seed = 950;
  try {
    for (const [f, dt, m, nr, U, db, kw, k, lb, n] of [
      ['q4_k', 'bfloat16', 1, 2, 1, 1, 1, 1280, 0, 13], ['q4_k', 'float32', 2, 2, 1, 1, 2, 2304, 0, 9], ['q4_k', 'float16', 1, 1, 2, 1, 1, 5120, 3, 7],
      ['q4_k', 'bfloat16', 2, 4, 0, 0, 1, 768, 0, 11], ['q4_k', 'bfloat16', 1, 1, 1, 0, 2, 1536, 4, 5],
      ['int4', 'bfloat16', 1, 4, 0, 1, 1, 5120, 3, 21], ['int4', 'float16', 2, 2, 1, 1, 2, 2304, 4, 13], ['int4', 'bfloat16', 1, 1, 0, 1, 1, 1056, 3, 9],
      ['int8', 'bfloat16', 1, 8, 0, 0, 1, 2560, 3, 19], ['int8', 'float32', 1, 2, 1, 1, 2, 1056, 4, 7],
    ] as [QuantFormat, DT, number, number, number, number, number, number, number, number][]) {
      forceQuantGemvConfig({ impl: 'vec', kw, xs: 1, xf: 1, nr, U, db, lb });
      check(f, dt, m, n, k, seed++, { bias: m !== 2, ...(f === 'int4' ? { groupSize: k % 64 === 0 ? 64 : 32, asym: nr === 2 } : {}) });
      assert.equal(lastQuantGemvConfig()?.xf, 1);
    }
  } finally { forceQuantGemvConfig(null); }
});

test('the xf kernels on a persistent grid (pg: blocks staging x once and looping over tiles, the grid forced small) and int4 on tensor cores in the register kernel (tc: bf16 / f16 x, one row, groups 128 / 256, symmetric and asymmetric, db and single ring, kw 1/2/4, partial stripes, ragged N): the same bits twice', { skip }, () => {
  let seed = 1300;
  try {
    // [format, x dtype, m, nr, U, db, kw, K, pg, grid (pg), tc, group, asym, N]
    for (const [f, dt, m, nr, U, db, kw, k, pg, grid, tc, g, asym, n] of [
      ['int4', 'bfloat16', 1, 4, 0, 1, 2, 5120, 1, 2, 0, 128, false, 45], ['int4', 'float16', 2, 4, 0, 1, 1, 2304, 1, 1, 0, 64, true, 37],
      ['int8', 'bfloat16', 1, 8, 0, 0, 1, 2560, 1, 1, 0, 0, false, 70], ['int8', 'float32', 1, 4, 0, 1, 2, 1056, 1, 3, 0, 0, false, 33],
      ['q4_k', 'bfloat16', 1, 2, 1, 1, 2, 1280, 1, 2, 0, 0, false, 29],
      ['int4', 'bfloat16', 1, 4, 0, 1, 1, 5120, 0, 0, 1, 128, false, 21], ['int4', 'bfloat16', 1, 4, 1, 1, 2, 4608, 0, 0, 1, 128, true, 19],
      ['int4', 'float16', 1, 4, 2, 0, 1, 4608, 0, 0, 1, 256, false, 13], ['int4', 'float16', 1, 2, 2, 1, 4, 2304, 0, 0, 1, 128, true, 11],
      ['int4', 'bfloat16', 1, 4, 0, 1, 2, 5120, 1, 2, 1, 128, false, 50], ['int4', 'bfloat16', 1, 8, 0, 0, 1, 1152, 0, 0, 1, 128, false, 9],
    ] as [QuantFormat, DT, number, number, number, number, number, number, number, number, number, number, boolean, number][]) {
      forceQuantGemvConfig({ impl: 'vec', kw, xs: 1, xf: 1, nr, U, db, pg, tc, ...(grid ? { pgGrid: grid } : {}) });
      check(f, dt, m, n, k, seed++, { bias: m !== 2, ...(f === 'int4' ? { groupSize: g, asym } : {}) });
      const cfg = lastQuantGemvConfig();
      assert.equal(cfg?.xf, 1);
      assert.equal(cfg?.pg ?? 0, pg);
      assert.equal(cfg?.tc ?? 0, tc);
    }
  } finally { forceQuantGemvConfig(null); }
});

test('the xf kernel fed by per-warp bulk-copy rings (bk: stages 2-8, nr 1/2/4, kw 1/2/4, lb 3, and on a persistent grid; int4 groups 64-256 symmetric and asymmetric, int8, q4_k; m 1, 2; whole stripes; ragged N, dead warps): the same bits twice; K not whole stripes: the register kernel', { skip }, () => {
  let seed = 1500;
  try {
    // [format, x dtype, m, nr, stages, kw, lb, K, group, asym, N]
    for (const [f, dt, m, nr, st, kw, lb, k, g, asym, n] of [
      ['int4', 'bfloat16', 1, 4, 4, 1, 0, 5120, 128, false, 45], ['int4', 'float16', 2, 2, 3, 2, 0, 3072, 64, true, 37],
      ['int4', 'bfloat16', 1, 1, 8, 4, 3, 4096, 256, false, 19], ['int4', 'float32', 1, 2, 2, 2, 0, 2048, 128, true, 70],
      ['int8', 'bfloat16', 1, 4, 4, 1, 0, 2560, 0, false, 70], ['int8', 'float16', 2, 2, 6, 2, 3, 1536, 0, false, 33],
      ['q4_k', 'bfloat16', 1, 2, 4, 2, 0, 3072, 0, false, 29], ['q4_k', 'float32', 2, 1, 3, 1, 3, 2048, 0, false, 11],
      // on a persistent grid (kw 0 here: pg, grid forced to 1-3 blocks, kw 1): the ring runs on across tiles
      ['int4', 'bfloat16', 1, 2, 4, 0, 2, 3072, 128, false, 45], ['int4', 'float16', 2, 1, 3, 0, 3, 2048, 64, true, 37],
      ['int8', 'bfloat16', 1, 2, 8, 0, 1, 1536, 0, false, 70], ['q4_k', 'bfloat16', 1, 1, 2, 0, 2, 2048, 0, false, 29],
    ] as [QuantFormat, DT, number, number, number, number, number, number, number, boolean, number][]) {
      forceQuantGemvConfig(kw === 0 ? { impl: 'vec', kw: 1, xs: 1, xf: 1, nr, bk: st, pg: 1, pgGrid: lb } : { impl: 'vec', kw, xs: 1, xf: 1, nr, bk: st, lb });
      const before = bkLaunches();
      check(f, dt, m, n, k, seed++, { bias: m !== 2, ...(f === 'int4' ? { groupSize: g, asym } : {}) });
      assert.ok(bkLaunches() > before, `${f} ${dt} nr ${nr} bk ${st}: the bk kernel ran`);
    }
    // K not a whole number of stripes (int4: 1024 elements): bk declines, the xf register kernel runs
    forceQuantGemvConfig({ impl: 'vec', kw: 1, xs: 1, xf: 1, nr: 2, bk: 4 });
    const before = bkLaunches();
    check('int4', 'bfloat16', 1, 21, 2304, seed++, { groupSize: 128 });
    assert.equal(bkLaunches(), before);
  } finally { forceQuantGemvConfig(null); }
});

test('q4_k\'s wide unit in the xf kernel (wu: a lane takes a whole 64-element chunk of a block, two sub-blocks, one header decode): every x dtype, m = 1, 2, 1/2/4 rows a warp, db and single ring, U 1/2, kw 1/2/4, lb 3/4, a persistent grid, K of 20-80 chunks (partial stripes), ragged N, the same bits twice', { skip }, () => {
  let seed = 1700;
  try {
    // [x dtype, m, nr, U, db, kw, lb, pg grid (0: none), K, N]
    for (const [dt, m, nr, U, db, kw, lb, grid, k, n] of [
      ['bfloat16', 1, 2, 1, 1, 1, 0, 0, 5120, 13], ['float16', 1, 1, 2, 1, 2, 3, 0, 2304, 7], ['float32', 2, 2, 1, 1, 1, 0, 0, 1280, 9],
      ['bfloat16', 1, 1, 1, 1, 4, 4, 0, 4096, 5], ['bfloat16', 2, 4, 1, 0, 1, 0, 0, 2304, 11], ['float16', 1, 2, 2, 0, 2, 0, 0, 1280, 19],
      ['bfloat16', 1, 2, 1, 1, 1, 0, 2, 2304, 45],
    ] as [DT, number, number, number, number, number, number, number, number, number][]) {
      forceQuantGemvConfig({ impl: 'vec', kw, xs: 1, xf: 1, nr, U, db, lb, wu: 1, ...(grid ? { pg: 1, pgGrid: grid } : {}) });
      const before = wuLaunches();
      check('q4_k', dt, m, n, k, seed++, { bias: m !== 2 });
      assert.ok(wuLaunches() > before, `q4_k ${dt} m ${m} nr ${nr}: the wu kernel ran`);
    }
  } finally { forceQuantGemvConfig(null); }
});

test('both db rounds before the grid-dependency wait (pb): int4 (symmetric, asymmetric), int8, q4_k (narrow and wide units), every x dtype, m = 1, 2, nr 1/2/4, U 1/2, kw 1/2/4, lb 4, a persistent grid, one to three whole db passes and partial ones, ragged N, the same bits twice', { skip }, () => {
  let seed = 1900;
  try {
    // [format, x dtype, m, nr, U, kw, lb, pg grid (0: none), wu, K, N, asym]
    for (const [f, dt, m, nr, U, kw, lb, grid, wu, k, n, asym] of [
      ['int4', 'bfloat16', 1, 4, 1, 1, 0, 0, 0, 5120, 21, false], ['int4', 'float16', 2, 2, 1, 1, 4, 0, 0, 2304, 13, true], ['int4', 'bfloat16', 1, 4, 1, 1, 0, 2, 0, 3072, 45, false],
      ['int4', 'float32', 1, 1, 2, 4, 0, 0, 0, 4096, 7, false], ['int8', 'bfloat16', 1, 4, 1, 1, 0, 3, 0, 2560, 33, false], ['int8', 'float16', 2, 2, 2, 2, 0, 0, 0, 1056, 9, false],
      ['q4_k', 'bfloat16', 1, 2, 1, 1, 0, 0, 0, 4608, 13, false], ['q4_k', 'float16', 1, 2, 1, 1, 0, 0, 1, 8192, 11, false], ['q4_k', 'bfloat16', 2, 1, 1, 1, 3, 2, 1, 2304, 29, false],
    ] as [QuantFormat, DT, number, number, number, number, number, number, number, number, number, boolean][]) {
      forceQuantGemvConfig({ impl: 'vec', kw, xs: 1, xf: 1, nr, U, db: 1, lb, wu, pb: 1, ...(grid ? { pg: 1, pgGrid: grid } : {}) });
      check(f, dt, m, n, k, seed++, { bias: m !== 2, ...(f === 'int4' ? { groupSize: k % 128 === 0 ? 128 : 64, asym } : {}) });
      assert.equal(lastQuantGemvConfig()?.pb, 1);
    }
  } finally { forceQuantGemvConfig(null); }
});
