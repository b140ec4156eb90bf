import { test } from 'node:test';
import assert from 'node:assert/strict';
import { cpSync, mkdtempSync, readFileSync, rmSync, writeFileSync, existsSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { FormatError, UnsupportedError, ValueError } from '../src/errors.js';
import {
  attentionTileBytes,
  attentionTileCeiling,
  limitsFromWebGPU,
  loadProfiles,
  matchProfile,
  profileDataDir,
  resetProfileNotices,
  validateProfile,
  withDriverLimits,
} from '../src/profiles/index.js';

/** Runs `fn` with process.stderr.write captured; returns what was written. */
function captureStderr(fn: () => void): string {
  const orig = process.stderr.write;
  let out = '';
  process.stderr.write = ((chunk: string | Uint8Array) => {
    out += typeof chunk === 'string' ? chunk : Buffer.from(chunk).toString();
    return true;
  }) as typeof process.stderr.write;
  try {
    fn();
  } finally {
    process.stderr.write = orig;
  }
  return out;
}

const FAMILIES = ['volta', 'turing', 'ampere', 'ada', 'hopper', 'cdna', 'cdna2', 'cdna3', 'm1', 'm2', 'm3', 'm4', 'm5'];

test('the data directory resolves from the compiled module and holds every family', () => {
  const dir = profileDataDir();
  assert.ok(existsSync(join(dir, 'nvidia', 'hopper.yml')), dir);
  const ps = loadProfiles();
  assert.deepEqual(ps.map((p) => p.family).sort(), [...FAMILIES].sort());
  for (const p of ps) {
    assert.ok(p.file.endsWith(join(p.vendor, `${p.family}.yml`)), p.file);
    // re-validating the raw document of each file gives the same profile
    assert.equal(p.limits.maxThreadsPerBlock % p.limits.warpSize, 0);
    for (const t of p.attention.tiles) assert.ok(attentionTileBytes(t) <= p.limits.sharedMemoryPerBlockOptin, `${p.family} ${JSON.stringify(t)}`);
  }
});

test('shipped profiles carry the hardware facts', () => {
  const by = Object.fromEntries(loadProfiles().map((p) => [p.family, p]));
  const h = by.hopper!.limits;
  assert.equal(h.sharedMemoryPerSM, 228 * 1024);
  assert.equal(h.sharedMemoryPerBlockOptin, 227 * 1024);
  assert.equal(h.sharedMemoryPerBlock, 48 * 1024);
  assert.equal(h.registersPerBlock, 65536);
  assert.equal(h.registersPerThread, 255);
  assert.equal(by.hopper!.matrixUnit.name, 'wgmma');
  assert.equal(by.ampere!.limits.sharedMemoryPerSM, 164 * 1024);
  assert.equal(by.ampere!.limits.sharedMemoryPerBlockOptin, 163 * 1024);
  assert.equal(by.volta!.limits.maxPipelineStages, 2);
  assert.equal(by.cdna3!.limits.warpSize, 64);
  assert.equal(by.cdna3!.matrixUnit.name, 'mfma');
  assert.equal(by.m3!.limits.warpSize, 32);
  assert.equal(by.m3!.limits.sharedMemoryPerBlockOptin, 32 * 1024);
  assert.equal(by.m3!.matrixUnit.name, 'simdgroup_matrix');
});

test('profiles are frozen', () => {
  const p = loadProfiles()[0]!;
  assert.throws(() => {
    (p.limits as { warpSize: number }).warpSize = 7;
  }, TypeError);
});

test('matching: exact and nearest', () => {
  resetProfileNotices();
  let notices = captureStderr(() => {
    const r = matchProfile({ computeCapability: [9, 0] });
    assert.equal(r.profile.family, 'hopper');
    assert.equal(r.exact, true);
  });
  assert.equal(notices, '');

  notices = captureStderr(() => {
    const a = matchProfile({ computeCapability: [9, 1] });
    const b = matchProfile({ computeCapability: [9, 1] });
    assert.equal(a.profile.family, 'hopper');
    assert.equal(a.exact, false);
    assert.match(a.reason, /9\.0/);
    assert.equal(b.exact, false);
  });
  const lines = notices.split('\n').filter(Boolean);
  assert.equal(lines.length, 1, notices);
  assert.match(lines[0]!, /^nbx: no device profile for compute capability 9\.1; using hopper \(.+\)$/);

  const a86 = matchProfile({ computeCapability: [8, 6] });
  assert.equal(a86.profile.family, 'ampere');
  assert.equal(a86.profile.variant, '8.6');
  assert.equal(a86.exact, true);
  assert.equal(a86.profile.limits.sharedMemoryPerBlockOptin, 99 * 1024);
  assert.equal(a86.profile.limits.sharedMemoryPerSM, 100 * 1024);
  assert.equal(a86.profile.limits.registersPerThread, 255); // inherited from the base

  const a80 = matchProfile({ vendor: 'nvidia', computeCapability: [8, 0] });
  assert.equal(a80.profile.family, 'ampere');
  assert.equal(a80.profile.variant, undefined);
  assert.equal(matchProfile({ computeCapability: [8, 9] }).profile.family, 'ada');
  assert.equal(matchProfile({ computeCapability: [7, 5] }).profile.family, 'turing');
  assert.equal(matchProfile({ computeCapability: [7, 2] }).profile.family, 'volta');

  const mi300 = matchProfile({ gfxArch: 'gfx942' });
  assert.equal(mi300.profile.family, 'cdna3');
  assert.equal(mi300.exact, true);
  assert.equal(matchProfile({ vendor: 'amd', gfxArch: 'gfx90a:sramecc+:xnack-' }).profile.family, 'cdna2');
  assert.equal(matchProfile({ gfxArch: 'gfx908' }).profile.family, 'cdna');

  const m3 = matchProfile({ adapterDescription: 'Apple M3 Max' });
  assert.equal(m3.profile.family, 'm3');
  assert.equal(m3.exact, true);
  assert.equal(matchProfile({ vendor: 'apple', adapterDescription: 'Apple M1 Pro' }).profile.family, 'm1');
  assert.equal(matchProfile({ vendor: 'apple', adapterDescription: 'Apple M4' }).profile.family, 'm4');

  // descriptions identify NVIDIA/AMD cards too (WebGPU gives no compute capability)
  assert.equal(matchProfile({ vendor: 'nvidia', adapterDescription: 'NVIDIA H100 80GB HBM3' }).profile.family, 'hopper');
  const rtx = matchProfile({ vendor: 'nvidia', adapterDescription: 'NVIDIA GeForce RTX 3090' });
  assert.equal(rtx.profile.family, 'ampere');
  assert.equal(rtx.profile.variant, '8.6');
  assert.equal(matchProfile({ adapterDescription: 'AMD Instinct MI250X' }).profile.family, 'cdna2');
});

test('matching: inexact families announce once each', () => {
  resetProfileNotices();
  const notices = captureStderr(() => {
    const gfx950 = matchProfile({ gfxArch: 'gfx950' });
    assert.equal(gfx950.profile.family, 'cdna3');
    assert.equal(gfx950.exact, false);
    const m6 = matchProfile({ vendor: 'apple', adapterDescription: 'Apple M6 Max' });
    assert.equal(m6.profile.family, 'm5');
    assert.equal(m6.exact, false);
    const metal3 = matchProfile({ vendor: 'apple', adapterArchitecture: 'metal-3' });
    assert.equal(metal3.profile.family, 'm1');
    assert.equal(metal3.exact, false);
    const bw = matchProfile({ vendor: 'nvidia', adapterArchitecture: 'blackwell' });
    assert.equal(bw.profile.family, 'hopper');
    assert.equal(bw.exact, false);
    const cc12 = matchProfile({ computeCapability: [12, 0] });
    assert.equal(cc12.profile.family, 'hopper');
    // a tie between ampere 8.7 and ada 8.9 goes to the older
    const cc88 = matchProfile({ computeCapability: [8, 8] });
    assert.equal(cc88.profile.family, 'ampere');
    assert.equal(cc88.profile.variant, '8.7');
    matchProfile({ gfxArch: 'gfx950' });
  });
  const lines = notices.split('\n').filter(Boolean);
  assert.equal(lines.length, 6, notices);
  for (const l of lines) assert.match(l, /^nbx: no device profile for .+; using \S+( \S+)? \(.+\)$/);
});

test('matching: unknown vendors and empty queries are refused by name', () => {
  assert.throws(() => matchProfile({ vendor: 'intel', adapterDescription: 'Intel(R) Arc(TM) A770' }),
    (e: unknown) => e instanceof UnsupportedError && /intel/.test(e.message) && /Arc/.test(e.message));
  assert.throws(() => matchProfile({ adapterDescription: 'Mystery GPU 9000' }),
    (e: unknown) => e instanceof UnsupportedError && /Mystery GPU 9000/.test(e.message));
  assert.throws(() => matchProfile({}), UnsupportedError);
  assert.throws(() => matchProfile({ computeCapability: [9, -1] as [number, number] }), ValueError);
});

test('an AMD device never matches on a compute capability', () => {
  // ROCm reports gfx90a as (9, 0): for vendor amd the capability is ignored, the gfx target decides
  const r = matchProfile({ vendor: 'amd', computeCapability: [9, 0], gfxArch: 'gfx90a' });
  assert.equal(r.profile.family, 'cdna2');
});

test('driver limits win over the profile', () => {
  const hopper = matchProfile({ computeCapability: [9, 0] }).profile;
  const merged = withDriverLimits(hopper, { sharedMemoryPerBlockOptin: 100 * 1024, maxThreadsPerSM: undefined });
  assert.equal(merged.limits.sharedMemoryPerBlockOptin, 100 * 1024);
  assert.equal(merged.limits.sharedMemoryPerSM, 228 * 1024);
  assert.equal(merged.limits.maxThreadsPerSM, 2048);
  assert.deepEqual(merged.driverLimits, ['sharedMemoryPerBlockOptin']);
  assert.equal(hopper.limits.sharedMemoryPerBlockOptin, 227 * 1024); // original untouched
  assert.throws(() => withDriverLimits(hopper, { warpSize: 0 }), ValueError);
  assert.throws(() => withDriverLimits(hopper, { warpSize: 31.5 }), ValueError);
  assert.throws(() => withDriverLimits(hopper, { bogus: 1 } as never), ValueError);

  const web = limitsFromWebGPU({ maxComputeWorkgroupStorageSize: 32768, maxComputeInvocationsPerWorkgroup: 1024 }, { subgroupMinSize: 32, subgroupMaxSize: 32 });
  assert.deepEqual(web, { sharedMemoryPerBlock: 32768, sharedMemoryPerBlockOptin: 32768, maxThreadsPerBlock: 1024, warpSize: 32 });
  assert.deepEqual(limitsFromWebGPU({}, { subgroupMinSize: 4, subgroupMaxSize: 128 }), {});
});

test('attention ceilings shrink to the limits in force', () => {
  const hopper = matchProfile({ computeCapability: [9, 0] }).profile;
  assert.deepEqual(attentionTileCeiling(hopper, 128), { blockM: 128, blockN: 128 });
  assert.deepEqual(attentionTileCeiling(hopper, 80), { blockM: 128, blockN: 128 });
  assert.deepEqual(attentionTileCeiling(hopper, 256), { blockM: 128, blockN: 64 });
  // the same card through WebGPU: 32 KiB of workgroup storage
  const web = withDriverLimits(hopper, limitsFromWebGPU({ maxComputeWorkgroupStorageSize: 32768 }));
  const t = attentionTileCeiling(web, 128);
  assert.ok(attentionTileBytes({ headDimMax: 128, ...t }) <= 32768, JSON.stringify(t));
  assert.throws(() => attentionTileCeiling(hopper, 512), UnsupportedError);
});

// ---------------------------------------------------------------------------------------------
// Malformed files
// ---------------------------------------------------------------------------------------------

function withCopy(mutate: (dir: string) => void, check: (dir: string) => void): void {
  const dir = mkdtempSync(join(tmpdir(), 'nbx-profiles-'));
  try {
    cpSync(profileDataDir(), dir, { recursive: true });
    mutate(dir);
    check(dir);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

function edit(file: string, from: string | RegExp, to: string): void {
  const text = readFileSync(file, 'utf8');
  const next = text.replace(from, to);
  assert.notEqual(next, text, `edit of ${file} changed nothing`);
  writeFileSync(file, next);
}

function expectFormatError(dir: string, file: string, ...parts: RegExp[]): void {
  assert.throws(() => loadProfiles(dir), (e: unknown) => {
    assert.ok(e instanceof FormatError, String(e));
    assert.ok(e.message.includes(file), `${e.message} should name ${file}`);
    for (const p of parts) assert.match(e.message, p);
    return true;
  });
}

test('malformed YAML is a FormatError naming the file and line', () => {
  withCopy((d) => writeFileSync(join(d, 'nvidia', 'hopper.yml'), readFileSync(join(d, 'nvidia', 'hopper.yml'), 'utf8') + '\nbroken: [unclosed\n'),
    (d) => expectFormatError(d, join(d, 'nvidia', 'hopper.yml'), /line \d+/, /malformed YAML/));
});

test('a missing key is a FormatError naming the file and key path', () => {
  withCopy((d) => edit(join(d, 'nvidia', 'hopper.yml'), /^ {2}warp_size: 32\n/m, ''),
    (d) => expectFormatError(d, join(d, 'nvidia', 'hopper.yml'), /limits\.warp_size: required key is missing/));
});

test('a wrong type is a FormatError naming the file and key path', () => {
  withCopy((d) => edit(join(d, 'amd', 'cdna3.yml'), /shared_memory_per_block: 65536/, 'shared_memory_per_block: "64 KiB"'),
    (d) => expectFormatError(d, join(d, 'amd', 'cdna3.yml'), /limits\.shared_memory_per_block: expected a positive integer, got "64 KiB" \(string\)/));
  withCopy((d) => edit(join(d, 'nvidia', 'volta.yml'), "compute_capability: ['7.0', '7.2']", 'compute_capability: [7.0, 7.2]'),
    (d) => expectFormatError(d, join(d, 'nvidia', 'volta.yml'), /match\.compute_capability\[0\]/));
  withCopy((d) => edit(join(d, 'apple', 'm2.yml'), 'max_threads_per_block: 1024', 'max_threads_per_block: -1024'),
    (d) => expectFormatError(d, join(d, 'apple', 'm2.yml'), /limits\.max_threads_per_block: expected a positive integer/));
  withCopy((d) => edit(join(d, 'nvidia', 'ampere.yml'), "- { m: 16, n: 8, k: 8, operands: [tf32]", "- { m: 16, n: 8, k: 8, operands: [tf33]"),
    (d) => expectFormatError(d, join(d, 'nvidia', 'ampere.yml'), /matrix_unit\.shapes\[2\]\.operands\[0\]/));
});

test('unknown keys, broken relations and overlapping claims are refused', () => {
  withCopy((d) => edit(join(d, 'nvidia', 'ada.yml'), 'warp_size: 32', 'warp_size: 32\n  wrap_size: 32'),
    (d) => expectFormatError(d, join(d, 'nvidia', 'ada.yml'), /limits\.wrap_size: unknown key/));
  withCopy((d) => edit(join(d, 'nvidia', 'turing.yml'), 'shared_memory_per_block_optin: 65536', 'shared_memory_per_block_optin: 131072'),
    (d) => expectFormatError(d, join(d, 'nvidia', 'turing.yml'), /shared_memory_per_block_optin: 131072 exceeds shared_memory_per_sm/));
  withCopy((d) => edit(join(d, 'apple', 'm1.yml'), '{ head_dim_max: 256, block_m: 32, block_n: 16 }', '{ head_dim_max: 256, block_m: 64, block_n: 64 }'),
    (d) => expectFormatError(d, join(d, 'apple', 'm1.yml'), /attention\.tiles\[2\]/, /over shared_memory_per_block_optin/));
  withCopy((d) => edit(join(d, 'nvidia', 'ada.yml'), "compute_capability: ['8.9']", "compute_capability: ['8.9', '9.0']"),
    (d) => assert.throws(() => loadProfiles(d), (e: unknown) => e instanceof FormatError && /compute capability 9\.0 is already claimed/.test(e.message)));
  withCopy((d) => edit(join(d, 'nvidia', 'ampere.yml'), 'max_threads_per_sm: 1536\n      max_pipeline_stages: 4', 'max_threads_per_sm: 1536\n      max_pipeline_stages: 0'),
    (d) => expectFormatError(d, join(d, 'nvidia', 'ampere.yml'), /variants\[0\]\.limits\.max_pipeline_stages/));
  withCopy((d) => edit(join(d, 'amd', 'cdna.yml'), 'family: cdna', 'family: cdna9'),
    (d) => expectFormatError(d, join(d, 'amd', 'cdna.yml'), /family/));
});

test('validateProfile checks a document directly', () => {
  assert.throws(() => validateProfile([], 'x.yml'), (e: unknown) => e instanceof FormatError && /x\.yml/.test(e.message));
  assert.throws(() => validateProfile({ family: 'x' }, 'x.yml'), (e: unknown) => e instanceof FormatError && /x\.yml: vendor: required key is missing/.test(e.message));
});
