import { test } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { DeviceFaultError, FormatError, UnsupportedError, ValueError } from '../src/errors.js';
import { loadProfiles } from '../src/profiles/index.js';
import {
  AutotuneCache,
  AutotuneFailedError,
  autotuneMode,
  bitStableCandidates,
  bucketSize,
  CACHE_FORMAT,
  configKey,
  defaultCacheDir,
  defineSpace,
  deviceKey,
  enumerate,
  measure,
  median,
  movedBits,
  prune,
  resetCacheState,
  resetTunerNotices,
  shapeBucket,
  tune,
  type CacheEntry,
  type Config,
  type TuneKey,
} from '../src/autotune/index.js';

function tmp(prefix = 'nbx-autotune-'): string {
  return mkdtempSync(join(tmpdir(), prefix));
}

/** A stream that records what is written. */
function sink(isTTY = false): { write(s: string): boolean; isTTY: boolean; text: string } {
  const s = { text: '', isTTY, write(x: string) { s.text += x; return true; } };
  return s;
}

const H200 = deviceKey({ name: 'NVIDIA H200', arch: 'sm_90', driver: '580' });
const KEY: TuneKey = { shape: shapeBucket([4096, 3000]), dtype: 'float16', device: H200 };

// A matmul-like space: tile sizes, stages and split-K (which moves bits).
const matmul = defineSpace<{ dtypeBytes: number }>({
  name: 'matmul_test',
  knobs: [
    { name: 'tileM', values: [64, 128, 256], movesBits: false },
    { name: 'tileN', values: [64, 128, 256], movesBits: false },
    { name: 'tileK', values: [32, 64], movesBits: false },
    { name: 'stages', values: [2, 3, 4], movesBits: false },
    { name: 'splitK', values: [1, 2, 4], movesBits: true },
  ],
  defaultConfig: { tileM: 128, tileN: 128, tileK: 32, stages: 2, splitK: 1 },
  resources(cfg, problem) {
    const m = cfg.tileM as number, n = cfg.tileN as number, k = cfg.tileK as number, s = cfg.stages as number;
    const threads = Math.min(1024, (m * n) / 32);
    return {
      threads,
      sharedMemoryBytes: (m * k + k * n) * problem.dtypeBytes * s,
      registersPerThread: Math.ceil((m * n) / threads) + 40,
      stages: s,
    };
  },
});

// A row-reduction space with no bit-moving knob except the tree width.
const rowsum = defineSpace({
  name: 'rowsum_test',
  knobs: [
    { name: 'threads', values: [64, 128, 256], movesBits: false },
    { name: 'rowsPerBlock', values: [1, 2, 4], movesBits: false },
    { name: 'tree', values: ['warp', 'block'], movesBits: true },
  ],
  defaultConfig: { threads: 128, rowsPerBlock: 1, tree: 'warp' },
  resources: (cfg) => ({ threads: cfg.threads as number, sharedMemoryBytes: 4 * (cfg.threads as number) }),
});

// ---------------------------------------------------------------------------------------------

test('shape buckets are powers of two', () => {
  assert.equal(bucketSize(0), 0);
  assert.equal(bucketSize(1), 1);
  assert.equal(bucketSize(3), 4);
  assert.equal(bucketSize(3000), 4096);
  assert.equal(bucketSize(4096), 4096);
  assert.equal(bucketSize(4097), 8192);
  assert.equal(shapeBucket([4096, 3000, 1]), '4096x4096x1');
  assert.equal(shapeBucket([]), 'scalar');
  assert.throws(() => bucketSize(-1), ValueError);
  assert.throws(() => bucketSize(1.5), ValueError);
  assert.equal(H200, 'NVIDIA H200|sm_90|driver 580');
  assert.throws(() => deviceKey({ name: 'a|b', arch: 'sm_90' }), ValueError);
});

test('spaces are checked when defined', () => {
  assert.throws(() => defineSpace({ name: 'x', knobs: [{ name: 'a', values: [1], movesBits: false }, { name: 'a', values: [2], movesBits: false }], defaultConfig: { a: 1 }, resources: () => ({ threads: 32 }) }), ValueError);
  assert.throws(() => defineSpace({ name: 'x', knobs: [{ name: 'a', values: [1, 2], movesBits: false }], defaultConfig: { a: 3 }, resources: () => ({ threads: 32 }) }), /not among its values/);
  assert.throws(() => defineSpace({ name: 'x', knobs: [{ name: 'a', values: [], movesBits: false }], defaultConfig: { a: 3 }, resources: () => ({ threads: 32 }) }), /no candidate values/);
  assert.throws(() => defineSpace({ name: 'x', knobs: [{ name: 'a', values: [1] } as never], defaultConfig: { a: 1 }, resources: () => ({ threads: 32 }) }), /movesBits/);
  assert.throws(() => defineSpace({ name: 'x', knobs: [{ name: 'a', values: [1], movesBits: false }], defaultConfig: { a: 1, b: 2 }, resources: () => ({ threads: 32 }) }), /unknown knob 'b'/);
  assert.equal(enumerate(matmul).length, 3 * 3 * 2 * 3 * 3);
});

test('prune removes what the device limits cannot hold, with reasons', () => {
  const by = Object.fromEntries(loadProfiles().map((p) => [p.family, p]));
  const all = enumerate(matmul);
  const hopper = prune(matmul, by.hopper!.limits, { problem: { dtypeBytes: 2 } });
  const m1 = prune(matmul, by.m1!.limits, { problem: { dtypeBytes: 2 } });
  const volta = prune(matmul, by.volta!.limits, { problem: { dtypeBytes: 2 } });
  for (const r of [hopper, m1, volta]) assert.equal(r.kept.length + r.pruned.length, all.length);
  assert.ok(m1.kept.length < hopper.kept.length, `${m1.kept.length} vs ${hopper.kept.length}`);
  assert.ok(volta.kept.length < hopper.kept.length);
  // every kept config fits; every pruned one says why
  for (const cfg of m1.kept) {
    const use = matmul.resources(cfg, { dtypeBytes: 2 });
    assert.ok((use.sharedMemoryBytes ?? 0) <= 32768);
    assert.ok((use.stages ?? 0) <= 2);
  }
  const reasons = m1.pruned.flatMap((p) => p.reasons).join('\n');
  assert.match(reasons, /shared memory \d+ B > 32768 B per block \(opt-in limit\)/);
  assert.match(reasons, /3 pipeline stages > 2 allowed/);
  assert.match(volta.pruned.flatMap((p) => p.reasons).join('\n'), /stages/);
  // 256x256 tile: 2048 threads asked (capped at 1024 by the estimate) but 96 registers x 1024 threads > 65536
  const big = { tileM: 256, tileN: 256, tileK: 32, stages: 2, splitK: 1 };
  const bigReasons = prune(matmul, by.hopper!.limits, { problem: { dtypeBytes: 2 }, candidates: [big] }).pruned[0]!.reasons;
  assert.ok(bigReasons.some((r) => /registers per block/.test(r)), bigReasons.join('; '));

  // threads
  const tiny = { ...by.hopper!.limits, maxThreadsPerBlock: 128 };
  const r = prune(rowsum, tiny);
  assert.ok(r.pruned.every((p) => p.reasons.some((x) => /256 threads per block > 128 allowed/.test(x))));
  assert.equal(r.kept.length, 2 * 3 * 2);
  // a candidate outside the space is refused, not pruned
  assert.throws(() => prune(rowsum, tiny, { candidates: [{ threads: 96, rowsPerBlock: 1, tree: 'warp' }] }), ValueError);
});

test('bit-moving knobs are declared and filterable', () => {
  const all = enumerate(matmul);
  const stable = bitStableCandidates(matmul, all);
  assert.equal(stable.length, all.length / 3);
  assert.ok(stable.every((c) => c.splitK === 1));
  assert.deepEqual(movedBits(matmul, { ...matmul.defaultConfig, splitK: 4, tileM: 64 }), ['splitK']);
});

test('median and measure', async () => {
  assert.equal(median([3, 1, 2]), 2);
  assert.equal(median([4, 1, 3, 2]), 2.5);
  const seq = [100, 100, 5, 1, 3, 2, 4];
  let i = 0;
  const t = await measure(async () => seq[i++]!, {}, 2, 5);
  assert.equal(t, 3);
  assert.equal(i, 7);
  await assert.rejects(measure(async () => NaN, {}, 0, 1), ValueError);
});

test('NBX_AUTOTUNE modes parse', () => {
  assert.equal(autotuneMode({}), 'full');
  assert.equal(autotuneMode({ NBX_AUTOTUNE: 'off' }), 'off');
  assert.equal(autotuneMode({ NBX_AUTOTUNE: 'Cached' }), 'cached');
  assert.throws(() => autotuneMode({ NBX_AUTOTUNE: 'fast' }), (e: unknown) => e instanceof ValueError && /fast/.test(e.message));
  assert.equal(defaultCacheDir({ NBX_CACHE_DIR: '/x/y' }), '/x/y');
  assert.equal(defaultCacheDir({ XDG_CACHE_HOME: '/xdg' }), join('/xdg', 'nbxtensor'));
  assert.match(defaultCacheDir({}), /\.cache[/\\]nbxtensor$/);
});

// ---------------------------------------------------------------------------------------------
// Cache
// ---------------------------------------------------------------------------------------------

function entry(cfg: Config, timeMs = 1): CacheEntry {
  return { config: cfg, timeMs, tried: [{ config: cfg, timeMs }], failures: [], measuredAt: new Date(0).toISOString(), warmup: 1, reps: 3, bitsMoved: [] };
}

test('cache round trip, written atomically', () => {
  const dir = tmp();
  try {
    const a = new AutotuneCache({ dir: join(dir, 'nested'), shippedDir: null });
    assert.equal(a.lookup('k', KEY), undefined);
    a.store('k', KEY, entry({ x: 1 }, 0.5));
    a.store('k', { ...KEY, dtype: 'bfloat16' }, entry({ x: 2 }, 0.7));
    assert.deepEqual(readdirSync(join(dir, 'nested')), ['autotune.json']); // no temporary file left
    const raw = JSON.parse(readFileSync(a.path, 'utf8'));
    assert.equal(raw.format, CACHE_FORMAT);
    assert.deepEqual(raw.entries[H200].k['4096x4096|float16'].config, { x: 1 });
    const b = new AutotuneCache({ dir: join(dir, 'nested'), shippedDir: null });
    const hit = b.lookup('k', KEY)!;
    assert.equal(hit.source, 'user');
    assert.deepEqual(hit.entry, entry({ x: 1 }, 0.5));
    assert.equal(b.userEntries().length, 2);
    // a second process's entry survives this one's write
    const c = new AutotuneCache({ dir: join(dir, 'nested'), shippedDir: null });
    c.lookup('k', KEY);
    b.store('other', KEY, entry({ y: 1 }));
    c.store('third', KEY, entry({ z: 1 }));
    const d = new AutotuneCache({ dir: join(dir, 'nested'), shippedDir: null });
    assert.ok(d.lookup('other', KEY) && d.lookup('third', KEY) && d.lookup('k', KEY));
    assert.throws(() => a.store('k', { ...KEY, shape: 'a|b' }, entry({})), ValueError);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test('a corrupt cache is kept as .bad, said once, and replaced', () => {
  resetCacheState();
  const dir = tmp();
  try {
    const path = join(dir, 'autotune.json');
    writeFileSync(path, '{"format": "nbxtensor-autotune", "version": 1, "entries": {oops');
    const err = sink();
    const a = new AutotuneCache({ dir, shippedDir: null, stderr: err });
    assert.equal(a.lookup('k', KEY), undefined);
    assert.equal(a.lookup('k', KEY), undefined);
    const lines = err.text.split('\n').filter(Boolean);
    assert.equal(lines.length, 1, err.text);
    assert.match(lines[0]!, /^nbx: autotune cache .*autotune\.json is unreadable \(not JSON.*\); starting fresh, the bad file is kept as .*autotune\.json\.bad$/);
    assert.equal(readFileSync(`${path}.bad`, 'utf8'), '{"format": "nbxtensor-autotune", "version": 1, "entries": {oops');
    a.store('k', KEY, entry({ x: 1 }));
    assert.deepEqual(new AutotuneCache({ dir, shippedDir: null }).lookup('k', KEY)!.entry.config, { x: 1 });

    // structurally wrong (valid JSON, wrong shape) is corrupt too
    writeFileSync(path, JSON.stringify({ format: CACHE_FORMAT, version: 1, entries: { [H200]: { k: { '4096x4096|float16': { config: 3 } } } } }));
    const err2 = sink();
    resetCacheState();
    assert.equal(new AutotuneCache({ dir, shippedDir: null, stderr: err2 }).lookup('k', KEY), undefined);
    assert.match(err2.text, /config is not an object/);

    // a newer format version is left alone
    const newer = JSON.stringify({ format: CACHE_FORMAT, version: 99, entries: {} });
    writeFileSync(path, newer);
    const err3 = sink();
    const n = new AutotuneCache({ dir, shippedDir: null, stderr: err3 });
    n.store('k', KEY, entry({ x: 1 }));
    assert.equal(readFileSync(path, 'utf8'), newer);
    assert.deepEqual(n.lookup('k', KEY)!.entry.config, { x: 1 }); // kept in memory
    assert.match(err3.text, /newer nbxtensor/);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test('the shipped cache is consulted after the user cache', () => {
  const dir = tmp();
  try {
    const shipped = join(dir, 'shipped');
    mkdirSync(shipped);
    writeFileSync(join(shipped, 'nvidia-h200-sm_90.json'), JSON.stringify({
      format: CACHE_FORMAT, version: 1, entries: { [H200]: { k: { '4096x4096|float16': entry({ x: 9 }, 0.25) } } },
    }));
    const cache = new AutotuneCache({ dir: join(dir, 'user'), shippedDir: shipped });
    const hit = cache.lookup('k', KEY)!;
    assert.equal(hit.source, 'shipped');
    assert.deepEqual(hit.entry.config, { x: 9 });
    // another driver of the same card still finds the shipped measurement
    const otherDriver = cache.lookup('k', { ...KEY, device: deviceKey({ name: 'NVIDIA H200', arch: 'sm_90', driver: '575' }) });
    assert.equal(otherDriver?.source, 'shipped');
    assert.equal(cache.lookup('k', { ...KEY, device: deviceKey({ name: 'NVIDIA H100', arch: 'sm_90', driver: '580' }) }), undefined);
    // the user cache wins
    cache.store('k', KEY, entry({ x: 1 }));
    assert.equal(cache.lookup('k', KEY)!.source, 'user');
    // nothing was written into the shipped directory
    assert.deepEqual(readdirSync(shipped), ['nvidia-h200-sm_90.json']);
    // a malformed shipped file is a packaging error, refused by name
    writeFileSync(join(shipped, 'broken.json'), '[');
    assert.throws(() => new AutotuneCache({ dir: join(dir, 'user2'), shippedDir: shipped }).lookup('k', KEY),
      (e: unknown) => e instanceof FormatError && /broken\.json/.test(e.message));
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test('the package ships a shipped-cache directory that loads', () => {
  const c = new AutotuneCache({ dir: tmp() });
  assert.ok(c.shippedDir && existsSync(c.shippedDir), String(c.shippedDir));
  assert.equal(c.lookup('no_such_kernel', KEY), undefined);
  rmSync(c.dir, { recursive: true, force: true });
});

// ---------------------------------------------------------------------------------------------
// Tuner
// ---------------------------------------------------------------------------------------------

/** A timing function with a fixed cost per config; counts its calls. */
function timer(cost: (cfg: Config) => number) {
  const t = { calls: 0, fn: async (cfg: Config) => { t.calls++; return cost(cfg); } };
  return t;
}
const rowCost = (cfg: Config) => 1000 / (cfg.threads as number) + (cfg.rowsPerBlock as number) + (cfg.tree === 'block' ? -2 : 0);

test('mode off: the default, no lookup, no timing', async () => {
  const dir = tmp();
  try {
    const cache = new AutotuneCache({ dir, shippedDir: null });
    cache.store(rowsum.name, KEY, entry({ threads: 256, rowsPerBlock: 4, tree: 'warp' }));
    const t = timer(rowCost);
    const r = await tune(rowsum, KEY, enumerate(rowsum), t.fn, { mode: 'off', cache });
    assert.deepEqual(r, { config: rowsum.defaultConfig, source: 'default' });
    assert.equal(t.calls, 0);
    // the environment selects it too
    process.env.NBX_AUTOTUNE = 'off';
    try {
      assert.equal((await tune(rowsum, KEY, enumerate(rowsum), t.fn, { cache })).source, 'default');
    } finally {
      delete process.env.NBX_AUTOTUNE;
    }
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test('mode cached: cache hits, else the default without sweeping', async () => {
  const dir = tmp();
  try {
    const cache = new AutotuneCache({ dir, shippedDir: null });
    const t = timer(rowCost);
    const miss = await tune(rowsum, KEY, enumerate(rowsum), t.fn, { mode: 'cached', cache });
    assert.equal(miss.source, 'default');
    assert.deepEqual(miss.config, rowsum.defaultConfig);
    const chosen = { threads: 256, rowsPerBlock: 2, tree: 'warp' };
    cache.store(rowsum.name, KEY, entry(chosen, 0.1));
    const hit = await tune(rowsum, KEY, enumerate(rowsum), t.fn, { mode: 'cached', cache });
    assert.equal(hit.source, 'cache');
    assert.deepEqual(hit.config, chosen);
    assert.equal(hit.timeMs, 0.1);
    assert.equal(t.calls, 0);
    assert.equal(existsSync(join(dir, 'autotune.json')), true);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test('mode full: sweep once, store, then hit; the notice is said once', async () => {
  resetTunerNotices();
  const dir = tmp();
  try {
    const cache = new AutotuneCache({ dir, shippedDir: null });
    const err = sink(false);
    const t = timer(rowCost);
    const cands = enumerate(rowsum);
    const r = await tune(rowsum, KEY, cands, t.fn, { mode: 'full', cache, stderr: err, warmup: 1, reps: 3, deviceLabel: 'NVIDIA H200' });
    assert.equal(r.source, 'sweep');
    assert.deepEqual(r.config, { threads: 256, rowsPerBlock: 1, tree: 'block' });
    assert.equal(t.calls, cands.length * 4);
    assert.equal(r.entry!.tried.length, cands.length);
    assert.deepEqual(r.entry!.failures, []);
    assert.deepEqual(r.entry!.bitsMoved, ['tree']);
    assert.equal(r.entry!.reps, 3);
    assert.equal(err.text, `nbx: autotuning rowsum_test for NVIDIA H200 (first run only; results cached in ${join(dir, 'autotune.json')})\n`);

    const again = await tune(rowsum, KEY, cands, t.fn, { mode: 'full', cache, stderr: err });
    assert.equal(again.source, 'cache');
    assert.equal(t.calls, cands.length * 4);
    // a fresh process reads it from disk
    const fresh = await tune(rowsum, KEY, cands, t.fn, { mode: 'full', cache: new AutotuneCache({ dir, shippedDir: null }), stderr: err });
    assert.equal(fresh.source, 'cache');
    assert.deepEqual(fresh.config, r.config);

    // a second sweep (another key) is not announced again
    await tune(rowsum, { ...KEY, dtype: 'float32' }, cands, t.fn, { mode: 'full', cache, stderr: err, warmup: 0, reps: 1 });
    assert.equal(err.text.split('\n').filter(Boolean).length, 1);

    // bit-exact runs only consider configs that keep the default's bits: the cached 'block' tree is stale for them
    const exact = await tune(rowsum, { ...KEY, dtype: 'int8' }, cands, t.fn, { mode: 'full', cache, stderr: err, warmup: 0, reps: 1, bitExact: true });
    assert.equal(exact.config.tree, 'warp');
    assert.deepEqual(exact.entry!.bitsMoved, []);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test('a cached config no longer among the candidates is stale', async () => {
  const dir = tmp();
  try {
    const cache = new AutotuneCache({ dir, shippedDir: null });
    cache.store(rowsum.name, KEY, entry({ threads: 256, rowsPerBlock: 4, tree: 'block' }));
    const only128 = enumerate(rowsum).filter((c) => c.threads === 128);
    const t = timer(rowCost);
    assert.equal((await tune(rowsum, KEY, only128, t.fn, { mode: 'cached', cache })).source, 'default');
    const r = await tune(rowsum, KEY, only128, t.fn, { mode: 'full', cache, stderr: sink(), warmup: 0, reps: 1 });
    assert.equal(r.source, 'sweep');
    assert.equal(r.config.threads, 128);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test('the shipped cache serves the tuner', async () => {
  const dir = tmp();
  try {
    const shipped = join(dir, 'shipped');
    mkdirSync(shipped);
    const cfg = { threads: 64, rowsPerBlock: 4, tree: 'warp' };
    writeFileSync(join(shipped, 'h200.json'), JSON.stringify({ format: CACHE_FORMAT, version: 1, entries: { 'NVIDIA H200|sm_90|driver 570': { [rowsum.name]: { '4096x4096|float16': entry(cfg) } } } }));
    const t = timer(rowCost);
    const r = await tune(rowsum, KEY, enumerate(rowsum), t.fn, { mode: 'cached', cache: new AutotuneCache({ dir: join(dir, 'u'), shippedDir: shipped }) });
    assert.equal(r.source, 'shipped');
    assert.deepEqual(r.config, cfg);
    assert.equal(t.calls, 0);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test('failed candidates are recorded and skipped; all failing is an error listing each', async () => {
  const dir = tmp();
  try {
    const cache = new AutotuneCache({ dir, shippedDir: null });
    const cands = enumerate(rowsum).filter((c) => c.tree === 'warp' && c.rowsPerBlock === 1); // 3 configs
    const flaky = async (cfg: Config) => {
      if (cfg.threads === 256) throw new Error('out of resources: shared memory');
      return rowCost(cfg);
    };
    const r = await tune(rowsum, KEY, cands, flaky, { mode: 'full', cache, stderr: sink(), warmup: 0, reps: 1 });
    assert.equal(r.config.threads, 128);
    assert.equal(r.entry!.failures.length, 1);
    assert.deepEqual(r.entry!.failures[0]!.config, { threads: 256, rowsPerBlock: 1, tree: 'warp' });
    assert.match(r.entry!.failures[0]!.error, /^Error: out of resources: shared memory$/);
    // failures persist with the entry
    assert.equal(new AutotuneCache({ dir, shippedDir: null }).lookup(rowsum.name, KEY)!.entry.failures.length, 1);

    const key2 = { ...KEY, dtype: 'float64' };
    const broken = async (cfg: Config): Promise<number> => { throw new Error(`compile failed for ${cfg.threads}`); };
    await assert.rejects(tune(rowsum, key2, cands, broken, { mode: 'full', cache, stderr: sink(), warmup: 0, reps: 1 }), (e: unknown) => {
      assert.ok(e instanceof AutotuneFailedError);
      assert.ok(e instanceof UnsupportedError);
      assert.equal(e.failures.length, 3);
      for (const c of cands) assert.ok(e.message.includes(`${configKey(c)}: Error: compile failed for ${c.threads}`), e.message);
      return true;
    });
    assert.equal(cache.lookup(rowsum.name, key2), undefined); // nothing stored

    // a device fault ends the sweep at once
    let calls = 0;
    const fault = async (): Promise<number> => { calls++; throw new DeviceFaultError('cuda', 'illegal address (sticky)'); };
    await assert.rejects(tune(rowsum, { ...KEY, dtype: 'uint8' }, cands, fault, { mode: 'full', cache, stderr: sink(), warmup: 0, reps: 1 }), DeviceFaultError);
    assert.equal(calls, 1);

    // no candidates at all
    await assert.rejects(tune(rowsum, { ...KEY, dtype: 'bool' }, [], rowCost as never, { mode: 'full', cache, stderr: sink() }), UnsupportedError);
    // a candidate outside the space
    await assert.rejects(tune(rowsum, KEY, [{ threads: 7, rowsPerBlock: 1, tree: 'warp' }], flaky, { mode: 'full', cache }), ValueError);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test('a terminal gets a progress bar, erased when done', async () => {
  resetTunerNotices();
  const dir = tmp();
  try {
    const tty = sink(true);
    const cands = enumerate(rowsum).filter((c) => c.rowsPerBlock === 1 && c.tree === 'warp');
    await tune(rowsum, KEY, cands, timer(rowCost).fn, { mode: 'full', cache: new AutotuneCache({ dir, shippedDir: null }), stderr: tty, warmup: 0, reps: 1 });
    assert.match(tty.text, /^nbx: autotuning rowsum_test for NVIDIA H200\|sm_90\|driver 580 \(first run only; results cached in .+\)\n/);
    assert.match(tty.text, /1\/3 candidates/);
    assert.match(tty.text, /3\/3 candidates/);
    assert.ok(tty.text.endsWith('\r\x1b[2K'), JSON.stringify(tty.text.slice(-20)));
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test('concurrent tunes of one key share one sweep', async () => {
  const dir = tmp();
  try {
    const cache = new AutotuneCache({ dir, shippedDir: null });
    const t = timer(rowCost);
    const cands = enumerate(rowsum);
    const [a, b] = await Promise.all([
      tune(rowsum, KEY, cands, t.fn, { mode: 'full', cache, stderr: sink(), warmup: 0, reps: 1 }),
      tune(rowsum, KEY, cands, t.fn, { mode: 'full', cache, stderr: sink(), warmup: 0, reps: 1 }),
    ]);
    assert.deepEqual(a, b);
    assert.equal(t.calls, cands.length);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test('the default cache honours NBX_CACHE_DIR', async () => {
  const dir = tmp();
  const prev = process.env.NBX_CACHE_DIR;
  process.env.NBX_CACHE_DIR = dir;
  try {
    resetCacheState();
    const r = await tune(rowsum, KEY, enumerate(rowsum).slice(0, 2), timer(rowCost).fn, { mode: 'full', stderr: sink(), warmup: 0, reps: 1 });
    assert.equal(r.source, 'sweep');
    assert.ok(existsSync(join(dir, 'autotune.json')));
  } finally {
    if (prev === undefined) delete process.env.NBX_CACHE_DIR;
    else process.env.NBX_CACHE_DIR = prev;
    resetCacheState();
    rmSync(dir, { recursive: true, force: true });
  }
});
