// Random numbers, bit for bit against PyTorch's CPU generator:
//  (1) every case of the PyTorch 2.11 conformance file (/work/shared/conformance/public/random.safetensors),
//  (2) golden vectors from the local PyTorch 1.13 (test/gen/rng.py -> test/fixtures/random_golden.json;
//      cases where 1.13 computes differently from 2.x run with __compat.torch113, see that file),
//  (3) the Generator API (PyTorch's 5056-byte state layout, manual_seed, clone, fork) and errors,
//  (4) the WebAssembly SIMD kernels against the scalar reference kernels.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { existsSync, readFileSync } from 'node:fs';
import { DTypeError, NbxError, UnsupportedError, ValueError } from '../src/errors.js';
import type { DTypeName, StorageArray } from '../src/dtype/dtypes.js';
import { CPU_STATE_BYTES, DEFAULT_RNG_SEED, Generator, defaultGenerator, manual_seed } from '../src/random/generator.js';
import { MT19937 } from '../src/random/mt19937.js';
import {
  __compat, bernoulliScalar, bernoulliTensor, dropoutMask, multinomial, normal, normalTensor, rand, randint, randn,
  randperm, uniform,
} from '../src/random/sample.js';
import { setSimdEnabled, simdKernel } from '../src/random/simd.js';

// ---- helpers ------------------------------------------------------------------------------------

function bytesOf(a: StorageArray | Float64Array): Buffer {
  return Buffer.from(a.buffer, a.byteOffset, a.byteLength);
}

function hexToBytes(hex: string): Uint8Array {
  return new Uint8Array(Buffer.from(hex, 'hex'));
}

function f32From(hex: string): Float32Array { const b = hexToBytes(hex); return new Float32Array(b.buffer, b.byteOffset, b.byteLength / 4); }
function f64From(hex: string): Float64Array { const b = hexToBytes(hex); return new Float64Array(b.buffer, b.byteOffset, b.byteLength / 8); }
function u16From(hex: string): Uint16Array { const b = hexToBytes(hex); return new Uint16Array(b.buffer, b.byteOffset, b.byteLength / 2); }

/** Values of a stored float tensor (float32/64, or float16/bfloat16 bits) as doubles. */
function floatsFrom(hex: string, dtype: DTypeName): Float64Array {
  if (dtype === 'float32') return Float64Array.from(f32From(hex));
  if (dtype === 'float64') return Float64Array.from(f64From(hex));
  const bits = u16From(hex);
  const out = new Float64Array(bits.length);
  const f = new Float32Array(1), u = new Uint32Array(f.buffer);
  for (let i = 0; i < bits.length; i++) {
    if (dtype === 'bfloat16') { u[0] = bits[i]! << 16; out[i] = f[0]!; } else {
      const h = bits[i]!, s = h & 0x8000 ? -1 : 1, e = (h >>> 10) & 0x1f, m = h & 0x3ff;
      out[i] = e === 0 ? s * m * 2 ** -24 : e === 31 ? (m ? NaN : s * Infinity) : s * (1 + m / 1024) * 2 ** (e - 15);
    }
  }
  return out;
}

interface Enc { len: number; hex?: string; sha256?: string; head?: string }

function checkEnc(id: string, got: StorageArray | Float64Array, want: Enc): void {
  const b = bytesOf(got);
  const n = (got as { length: number }).length;
  assert.equal(n, want.len, `${id}: length ${n}, expected ${want.len}`);
  if (want.hex !== undefined) {
    assert.equal(b.toString('hex'), want.hex, `${id}: bits differ`);
  } else {
    const sha = createHash('sha256').update(b).digest('hex');
    if (sha !== want.sha256) {
      const item = n ? b.length / n : 0;
      assert.equal(b.subarray(0, 8 * item).toString('hex'), want.head, `${id}: first values differ`);
      assert.fail(`${id}: SHA-256 of the output differs (first 8 values agree)`);
    }
  }
}

function withCompat<T>(on: boolean, fn: () => T): T {
  const prev = __compat.torch113;
  __compat.torch113 = on;
  try { return fn(); } finally { __compat.torch113 = prev; }
}

// ---- (1) PyTorch 2.11 conformance cases --------------------------------------------------------

const CONFORMANCE = '/work/shared/conformance/public/random.safetensors';

interface STensor { dtype: string; shape: number[]; bytes: Uint8Array }
interface CCase { id: string; op: string; args: unknown[]; kwargs: Record<string, unknown>; seed?: number; out: string[]; exact: boolean }

/** A minimal safetensors reader: 8-byte LE header length, JSON header, raw little-endian data. */
function readSafetensors(path: string): { tensors: Record<string, STensor>; cases: CCase[] } {
  const buf = readFileSync(path);
  const n = Number(buf.readBigUInt64LE(0));
  const header = JSON.parse(buf.subarray(8, 8 + n).toString('utf8')) as Record<string, { dtype: string; shape: number[]; data_offsets: [number, number] } | Record<string, string>>;
  const tensors: Record<string, STensor> = {};
  for (const [k, v] of Object.entries(header)) {
    if (k === '__metadata__') continue;
    const t = v as { dtype: string; shape: number[]; data_offsets: [number, number] };
    const bytes = new Uint8Array(buf.subarray(8 + n + t.data_offsets[0], 8 + n + t.data_offsets[1]));
    tensors[k] = { dtype: t.dtype, shape: t.shape, bytes };
  }
  const meta = (header.__metadata__ as Record<string, string>)['nbx.conformance']!;
  return { tensors, cases: (JSON.parse(meta) as { cases: CCase[] }).cases };
}

const ST_DTYPE: Record<string, DTypeName> = { F32: 'float32', F64: 'float64', F16: 'float16', BF16: 'bfloat16', I64: 'int64' };

function tensorValues(t: STensor): Float64Array {
  return floatsFrom(Buffer.from(t.bytes).toString('hex'), ST_DTYPE[t.dtype]!);
}

function runConformance(c: CCase, tensors: Record<string, STensor>): StorageArray {
  const gen = new Generator().manual_seed(c.seed ?? 0);
  const dt = (c.kwargs.dtype as { dtype?: DTypeName } | undefined)?.dtype;
  const numel = (s: number[]) => s.reduce((a, b) => a * b, 1);
  const scalar = (v: unknown) => Number((v as { scalar: number | string }).scalar);
  const tensorArg = (v: unknown) => tensors[(v as { tensor: string }).tensor]!;
  switch (c.op) {
    case 'randn': return randn(gen, numel(c.args[0] as number[]), dt ?? 'float32');
    case 'rand': return rand(gen, numel(c.args[0] as number[]), dt ?? 'float32');
    case 'randint': return randint(gen, numel(c.args[2] as number[]), dt ?? 'int64', c.args[0] as number, c.args[1] as number);
    case 'randperm': return randperm(gen, c.args[0] as number, dt ?? 'int64');
    case 'normal': return normal(gen, numel(c.args[2] as number[]), dt ?? 'float32', scalar(c.args[0]), scalar(c.args[1]));
    case 'bernoulli': {
      const t = tensorArg(c.args[0]);
      return bernoulliTensor(gen, tensorValues(t), ST_DTYPE[t.dtype]!);
    }
    case 'multinomial': {
      const t = tensorArg(c.args[0]);
      const k = t.shape[t.shape.length - 1]!;
      const rows = t.shape.length === 2 ? t.shape[0]! : 1;
      return multinomial(gen, tensorValues(t), rows, k, c.args[1] as number, Boolean(c.kwargs.replacement), ST_DTYPE[t.dtype]!);
    }
    case 'nn.functional.dropout': {
      const t = tensorArg(c.args[0]);
      assert.equal(t.dtype, 'F32');
      const x = tensorValues(t);
      const mask = dropoutMask(gen, x.length, 'float32', scalar(c.kwargs.p)) as Float32Array;
      const out = new Float32Array(x.length);
      for (let i = 0; i < x.length; i++) out[i] = x[i]! * mask[i]!; // one float32 multiply
      return out;
    }
    default: throw new Error(`no mapping for conformance op ${c.op}`);
  }
}

test('PyTorch 2.11 conformance cases (random.safetensors), bit for bit', (t) => {
  if (!existsSync(CONFORMANCE)) {
    console.log(`SKIP: ${CONFORMANCE} not found; the 2.11 conformance cases were not run`);
    t.skip(`${CONFORMANCE} not found`);
    return;
  }
  const { tensors, cases } = readSafetensors(CONFORMANCE);
  assert.ok(cases.length > 0);
  for (const c of cases) {
    const want = tensors[c.out[0]!]!;
    const got = runConformance(c, tensors);
    assert.equal(bytesOf(got).toString('hex'), Buffer.from(want.bytes).toString('hex'), `${c.id}: bits differ`);
  }
});

// ---- (2) PyTorch 1.13 golden vectors -----------------------------------------------------------

interface GCase {
  id: string; op: string; dtype?: DTypeName; n?: number; seed: number; torch113?: boolean; out: Enc;
  from?: number; to?: number; mean?: number | string; std?: number | string; low?: string; high?: string; p?: number;
  probs?: string; probDtype?: DTypeName; rows?: number; k?: number; numSamples?: number; replacement?: boolean; input?: string;
}
interface Golden {
  torch: string;
  cases: GCase[];
  inputs: Record<string, string>;
  states: { seed: number | string; draws: string[]; state_sha256: string; state?: string; after_randn64_5: string }[];
  default_state_sha256: string;
  sequence: { seed: number; steps: { op: string; dtype: DTypeName; n: number; out: string }[] };
  global: { seed: number; randn40: string };
}

const golden = JSON.parse(readFileSync(new URL('../../test/fixtures/random_golden.json', import.meta.url), 'utf8')) as Golden;

/** JSON numbers above 2^53 lose bits: take seeds through BigInt when they are large. */
function seedOf(s: number | string): bigint { return BigInt(typeof s === 'string' ? s : Math.round(s)); }

function runGolden(c: GCase): StorageArray | Float64Array {
  const gen = new Generator().manual_seed(c.seed > Number.MAX_SAFE_INTEGER ? exactSeed(c) : c.seed);
  const n = c.n ?? 0, dt = c.dtype!;
  switch (c.op) {
    case 'rand': return rand(gen, n, dt);
    case 'uniform': return uniform(gen, n, dt, c.from!, c.to!);
    case 'randn': return randn(gen, n, dt);
    case 'normal': return normal(gen, n, dt, c.mean as number, c.std as number);
    case 'normalTensor': {
      const m = typeof c.mean === 'string' ? floatsFrom(c.mean, dt) : c.mean!;
      const s = typeof c.std === 'string' ? floatsFrom(c.std, dt) : c.std!;
      return normalTensor(gen, m, s, n, dt);
    }
    case 'randint': return randint(gen, n, dt, BigInt(c.low!), BigInt(c.high!));
    case 'randperm': return randperm(gen, n, dt);
    case 'bernoulliScalar': return bernoulliScalar(gen, n, dt, c.p!);
    case 'bernoulliTensor': return bernoulliTensor(gen, floatsFrom(c.probs!, c.probDtype ?? dt), dt, c.probDtype ?? dt);
    case 'multinomial': {
      const probs = c.probs!.startsWith('@') ? golden.inputs[c.probs!]! : c.probs!;
      return multinomial(gen, floatsFrom(probs, c.probDtype!), c.rows!, c.k!, c.numSamples!, c.replacement!, c.probDtype!);
    }
    case 'dropout': {
      const x = floatsFrom(c.input!, dt);
      const mask = dropoutMask(gen, n, dt, c.p!);
      if (dt === 'float32') { const o = new Float32Array(n); for (let i = 0; i < n; i++) o[i] = x[i]! * (mask as Float32Array)[i]!; return o; }
      const o = new Float64Array(n); for (let i = 0; i < n; i++) o[i] = x[i]! * (mask as Float64Array)[i]!; return o;
    }
    default: throw new Error(`unknown golden op ${c.op}`);
  }
}

/** Seeds above 2^53 are written as exact integers in the JSON; recover them from the raw text. */
const RAW_SEEDS = new Map<string, bigint>();
{
  const text = readFileSync(new URL('../../test/fixtures/random_golden.json', import.meta.url), 'utf8');
  for (const m of text.matchAll(/"id":"([^"]+)"[^{}]*?"seed":(\d+)/g)) RAW_SEEDS.set(m[1]!, BigInt(m[2]!));
}
function exactSeed(c: GCase): bigint { return RAW_SEEDS.get(c.id) ?? seedOf(c.seed); }

test(`PyTorch ${golden.torch} golden vectors (${golden.cases.length} cases), bit for bit`, () => {
  const failures: string[] = [];
  const perOp = new Map<string, number>();
  for (const c of golden.cases) {
    try {
      const got = withCompat(Boolean(c.torch113), () => runGolden(c));
      checkEnc(c.id, got, c.out);
      perOp.set(c.op, (perOp.get(c.op) ?? 0) + 1);
    } catch (e) {
      failures.push(`${c.id}: ${(e as Error).message.split('\n')[0]}`);
    }
  }
  assert.deepEqual(failures, [], `${failures.length} golden cases failed:\n${failures.slice(0, 20).join('\n')}`);
  assert.ok(perOp.size >= 10);
});

test('golden: a sequence of draws on one generator (the cached normal carries over)', () => {
  const seq = golden.sequence;
  withCompat(true, () => {
    const g = new Generator().manual_seed(seq.seed);
    for (const [i, s] of seq.steps.entries()) {
      let got: StorageArray;
      if (s.op === 'randn') got = randn(g, s.n, s.dtype);
      else if (s.op === 'rand') got = rand(g, s.n, s.dtype);
      else if (s.op === 'randint') got = randint(g, s.n, 'int64', -1000, 1000);
      else got = randperm(g, s.n, 'int64');
      assert.equal(bytesOf(got).toString('hex'), s.out, `step ${i} (${s.op} ${s.dtype} ${s.n})`);
    }
  });
});

test('golden: torch.manual_seed + the default generator', () => {
  manual_seed(golden.global.seed);
  assert.equal(bytesOf(randn(defaultGenerator, 40)).toString('hex'), golden.global.randn40);
  assert.equal(defaultGenerator.initial_seed(), BigInt(golden.global.seed));
});

test('golden: get_state is byte-identical to torch.Generator.get_state; set_state accepts torch states', () => {
  const sha = (b: Uint8Array) => createHash('sha256').update(b).digest('hex');
  assert.equal(sha(new Generator().get_state()), golden.default_state_sha256, 'fresh Generator()');
  assert.equal(new Generator().initial_seed(), DEFAULT_RNG_SEED);
  const text = readFileSync(new URL('../../test/fixtures/random_golden.json', import.meta.url), 'utf8');
  const rawSeeds = [...text.matchAll(/"seed":(\d+),"draws"/g)].map((m) => BigInt(m[1]!));
  withCompat(true, () => {
    golden.states.forEach((st, i) => {
      const g = new Generator().manual_seed(rawSeeds[i]!);
      for (const d of st.draws) {
        const [kind, n] = d.split(':') as [string, string];
        if (kind === 'randn64') randn(g, +n, 'float64');
        else if (kind === 'randn32') randn(g, +n, 'float32');
        else if (kind === 'rand32') rand(g, +n, 'float32');
        else rand(g, +n, 'float64');
      }
      const bytes = g.get_state();
      assert.equal(bytes.length, CPU_STATE_BYTES);
      assert.equal(sha(bytes), st.state_sha256, `state after seed ${rawSeeds[i]} ${st.draws.join(',')}`);
      assert.equal(bytesOf(randn(g, 5, 'float64')).toString('hex'), st.after_randn64_5);
      if (st.state) {
        const h = new Generator();
        h.set_state(hexToBytes(st.state));
        assert.equal(h.initial_seed(), rawSeeds[i]);
        assert.equal(bytesOf(randn(h, 5, 'float64')).toString('hex'), st.after_randn64_5, 'continuing from a torch state');
      }
    });
  });
});

// ---- (3) Generator API ---------------------------------------------------------------------------

test('MT19937: PyTorch seeding (low 32 bits), bulk draws equal single draws', () => {
  const a = new MT19937(5n), b = new MT19937(5n + (1n << 32n));
  for (let i = 0; i < 2000; i++) assert.equal(a.next32(), b.next32());
  assert.notEqual(a.seed, b.seed);
  const c = new MT19937(99n), d = new MT19937(99n);
  const buf = new Int32Array(3000);
  const f = new Float32Array(3000);
  for (const n of [1, 3, 623, 624, 625, 1000, 2999]) {
    c.fill32(buf, 0, n);
    for (let i = 0; i < n; i++) assert.equal(buf[i], d.nextInt32());
    c.fillUniform24(f, 0, n);
    for (let i = 0; i < n; i++) assert.equal(f[i], (d.nextInt32() & 0xffffff) * 2 ** -24);
  }
  assert.equal(c.left, d.left);
  assert.equal(c.next, d.next);
  // random64 = (first << 32) | second
  const e = new MT19937(7n), g = new MT19937(7n);
  assert.equal(e.next64(), (BigInt(g.next32()) << 32n) | BigInt(g.next32()));
});

test('Generator: manual_seed takes PyTorch seeds; errors; seed(); clone', () => {
  const g = new Generator();
  assert.equal(g.manual_seed(-1).initial_seed(), 2n ** 64n - 1n);
  assert.equal(g.manualSeed(2n ** 63n).initial_seed(), 2n ** 63n);
  assert.throws(() => g.manual_seed(2n ** 64n), ValueError);
  assert.throws(() => g.manual_seed(1.5), ValueError);
  assert.throws(() => new Generator({ device: 'cuda' }), UnsupportedError);
  assert.equal(new Generator({ device: 'cpu' }).device, 'cpu');
  const s = g.seed();
  assert.equal(typeof s, 'bigint');
  assert.equal(g.initial_seed(), s);
  // clone: same future, independent afterwards
  g.manual_seed(11);
  randn(g, 3, 'float64'); // leaves a cached normal
  const c = g.clone();
  assert.deepEqual(bytesOf(randn(c, 7, 'float64')), bytesOf(randn(g, 7, 'float64')));
  rand(c, 10);
  assert.notDeepEqual(bytesOf(rand(c, 4)), bytesOf(rand(g, 4)));
  // seeding resets the cached normal, as set_current_seed does
  g.manual_seed(11);
  const first = bytesOf(randn(g, 1, 'float64'));
  g.manual_seed(11);
  assert.deepEqual(bytesOf(randn(g, 1, 'float64')), first);
  // set_state validation
  assert.throws(() => g.set_state(new Uint8Array(10)), ValueError);
  const bad = g.get_state();
  bad[8] = 0; bad[9] = 0; bad[10] = 0; bad[11] = 0; // left = 0
  assert.throws(() => g.set_state(bad), /Invalid mt19937 state/);
});

test('Generator.fork: deterministic per (initial seed, key), independent, parent untouched', () => {
  const parent = new Generator().manual_seed(42);
  const ref = new Generator().manual_seed(42);
  const a1 = parent.fork('request-1'), a2 = parent.fork('request-1'), b = parent.fork('request-2'), n7 = parent.fork(7);
  assert.deepEqual(bytesOf(randn(a1, 50)), bytesOf(randn(a2, 50)));
  assert.notDeepEqual(bytesOf(randn(parent.fork('request-1'), 20)), bytesOf(randn(b, 20)));
  assert.notDeepEqual(bytesOf(rand(n7, 20)), bytesOf(rand(parent.fork(8), 20)));
  // the parent stream is exactly what it would be without forks
  assert.deepEqual(bytesOf(randn(parent, 100)), bytesOf(randn(ref, 100)));
  // forks depend on the initial seed, not on how far the parent has advanced
  assert.deepEqual(bytesOf(rand(parent.fork('x'), 10)), bytesOf(rand(new Generator().manual_seed(42).fork('x'), 10)));
  assert.notDeepEqual(bytesOf(rand(new Generator().manual_seed(43).fork('x'), 10)), bytesOf(rand(parent.fork('x'), 10)));
});

// ---- errors ----------------------------------------------------------------------------------------

test('errors are typed and name the operation, with PyTorch-like messages', () => {
  const g = new Generator().manual_seed(0);
  const named = (fn: () => unknown, cls: typeof NbxError, op: string, re: RegExp) => {
    assert.throws(fn, (e: unknown) => e instanceof cls && (e as NbxError).op === op && re.test((e as Error).message));
  };
  named(() => randint(g, 3, 'int64', 5, 5), ValueError, 'randint', /expects 'from' to be less than 'to'/);
  named(() => randint(g, 3, 'uint8', 0, 300), ValueError, 'randint', /to - 1 is out of bounds for unsigned char/);
  named(() => randint(g, 3, 'complex64', 0, 3), DTypeError, 'randint', /not implemented/);
  named(() => uniform(g, 3, 'float32', 2, 1), ValueError, 'uniform_', /\[from, to\) range/);
  named(() => rand(g, 3, 'int32'), DTypeError, 'uniform_', /floating point/);
  named(() => normal(g, 3, 'float32', 0, -1), ValueError, 'normal', /std >= 0.0/);
  named(() => normalTensor(g, 0, new Float64Array([1, -1]), 2), ValueError, 'normal', /all elements of std >= 0.0/);
  named(() => randperm(g, -1), ValueError, 'randperm', /non-negative/);
  named(() => randperm(g, 3000, 'float16'), ValueError, 'randperm', /2049/);
  named(() => randperm(g, 300, 'int8'), ValueError, 'randperm', /overflow/);
  named(() => bernoulliScalar(g, 3, 'float32', 1.5), ValueError, 'bernoulli_', /p to be in \[0, 1\]/);
  named(() => bernoulliTensor(g, new Float64Array([0.5, 2])), ValueError, 'bernoulli', /p_in >= 0 && p_in <= 1/);
  named(() => dropoutMask(g, 3, 'float32', -0.1), ValueError, 'nn.functional.dropout', /between 0 and 1/);
  const p = new Float64Array([1, 0, 0]);
  named(() => multinomial(g, p, 1, 3, 4, false), ValueError, 'multinomial', /without replacement/);
  named(() => multinomial(g, new Float64Array([1, -1, 0]), 1, 3, 2, false), ValueError, 'multinomial', /element < 0/);
  named(() => multinomial(g, new Float64Array([1, -1, 0]), 1, 3, 2, true), ValueError, 'multinomial', /probability entry < 0/);
  named(() => multinomial(g, new Float64Array([0, 0, 0]), 1, 3, 1, false), ValueError, 'multinomial', /sum of probabilities <= 0/);
  named(() => multinomial(g, new Float64Array([0, 0, 0]), 1, 3, 2, true), ValueError, 'multinomial', /sum of probabilities <= 0/);
  named(() => multinomial(g, p, 1, 3, 0, true), ValueError, 'multinomial', /n_sample <= 0/);
  // Like PyTorch, too few non-zero categories without replacement is not an error: zero-probability
  // categories come last (torch 1.13: multinomial([1, 0, 0], 2) -> [0, 1]).
  assert.deepEqual(Array.from(multinomial(new Generator().manual_seed(0), p, 1, 3, 2, false)), [0n, 1n]);
  // dropout edge cases draw nothing
  const h = new Generator().manual_seed(3), h2 = new Generator().manual_seed(3);
  assert.deepEqual(Array.from(dropoutMask(h, 4, 'float32', 0) as Float32Array), [1, 1, 1, 1]);
  assert.deepEqual(Array.from(dropoutMask(h, 4, 'float32', 1) as Float32Array), [0, 0, 0, 0]);
  assert.deepEqual(bytesOf(rand(h, 5)), bytesOf(rand(h2, 5)));
});

// ---- (4) SIMD kernels against the scalar kernels ---------------------------------------------------

test('WebAssembly SIMD normal_fill equals the scalar kernel (randn and normal, many sizes)', (t) => {
  if (!simdKernel()) {
    console.log('SKIP: WebAssembly SIMD unavailable here; only the scalar kernel was exercised');
    t.skip('no WebAssembly SIMD');
    return;
  }
  try {
    for (const n of [16, 17, 32, 33, 100, 4097, 65536 + 48, 200003]) {
      for (const [mean, std] of [[0, 1], [2, 0.5], [-3, 1e-3], [1e-30, 1e-30]] as const) {
        setSimdEnabled(true);
        const a = normal(new Generator().manual_seed(n), n, 'float32', mean, std);
        setSimdEnabled(false);
        const b = normal(new Generator().manual_seed(n), n, 'float32', mean, std);
        assert.ok(bytesOf(a).equals(bytesOf(b)), `n=${n} mean=${mean} std=${std}`);
      }
      setSimdEnabled(true);
      const ga = new Generator().manual_seed(n), gb = new Generator().manual_seed(n);
      const a = rand(ga, n);
      setSimdEnabled(false);
      const b = rand(gb, n);
      assert.ok(bytesOf(a).equals(bytesOf(b)), `rand n=${n}`);
      assert.ok(Buffer.from(ga.get_state()).equals(Buffer.from(gb.get_state())), `state after rand n=${n}`);
    }
  } finally {
    setSimdEnabled(true);
  }
});
