// Device profiles: loading the shipped YAML files, matching a device to its profile, and merging
// driver-queried limits over the profile's.
//
// A profile describes a GPU *family* (hopper, cdna3, m3, ...). Kernels read their hardware budgets
// (shared memory, registers, threads, pipeline depth, matrix-unit shapes, attention tile ceilings)
// from the profile that matched, merged with what the driver reports (`withDriverLimits`: the
// driver wins), and never from a GPU name.
//
// Matching, in order (the first rule that identifies something decides):
//   1. NVIDIA compute capability  — exact when a profile (or one of its variants) declares it;
//                                   otherwise the nearest declared capability (ties go to the older).
//   2. AMD gfx target             — exact when declared; otherwise the nearest gfx target.
//   3. adapter description        — the profiles' `description_patterns` (case-insensitive regexes).
//   4. adapter architecture       — WebGPU's `adapter.info.architecture` ("ampere", "cdna-2", ...).
//   5. anything numeric left      — an NVIDIA architecture name's nominal capability, an Apple
//                                   "M<n>" chip number: nearest family.
//   6. the vendor alone           — that vendor's oldest profile.
// Rules 5-6 and the nearest-match halves of 1-2 answer `exact: false`, and say so once on stderr:
//   nbx: no device profile for <what>; using <family> (<reason>)
// A query whose vendor is not NVIDIA, AMD or Apple (or cannot be told) is an UnsupportedError.
//
// A compute capability is only read for NVIDIA: ROCm reports a gfx version through the same API
// (gfx90a as (9, 0)) and comparing it with NVIDIA capabilities would be meaningless.

import { readdirSync, readFileSync, statSync } from 'node:fs';
import { basename, extname, join } from 'node:path';
import { parseDocument } from 'yaml';
import { FormatError, UnsupportedError, ValueError } from '../errors.js';
import { profileDataDir } from './root.js';
import {
  attentionTileBytes,
  LIMIT_NAMES,
  validateProfile,
  VENDORS,
  type AttentionTile,
  type DeviceProfile,
  type LimitKey,
  type ProfileLimits,
  type ProfileVariant,
  type Vendor,
} from './schema.js';

export { validateProfile } from './schema.js';

// ---------------------------------------------------------------------------------------------
// Loading
// ---------------------------------------------------------------------------------------------

function deepFreeze<T>(v: T): T {
  if (v && typeof v === 'object' && !Object.isFrozen(v)) {
    Object.freeze(v);
    for (const x of Object.values(v as object)) deepFreeze(x);
  }
  return v;
}

/** Parses and validates one profile file. FormatError names the file and the key path (or line, for YAML syntax). */
export function loadProfileFile(file: string): DeviceProfile {
  let text: string;
  try {
    text = readFileSync(file, 'utf8');
  } catch (e) {
    throw new FormatError('profiles', `${file}: cannot read: ${(e as Error).message}`);
  }
  const doc = parseDocument(text, { uniqueKeys: true, prettyErrors: false });
  if (doc.errors.length > 0) {
    const err = doc.errors[0]!;
    const offset = Math.min(err.pos[0], text.length);
    const before = text.slice(0, offset);
    const line = before.split('\n').length;
    const col = offset - before.lastIndexOf('\n');
    const where = `line ${line}, column ${col}`;
    throw new FormatError('profiles', `${file}: ${where}: malformed YAML: ${err.message.split('\n')[0]}`);
  }
  return validateProfile(doc.toJS({ maxAliasCount: 100 }), file);
}

const loaded = new Map<string, readonly DeviceProfile[]>();

/**
 * Loads and validates every profile under `dir` (default: the shipped `src/profiles/data`), laid out
 * as `<vendor>/<family>.yml`. Beyond each file's schema: the directory must be the profile's vendor,
 * the file name its family, and no two profiles (or variants) may claim the same compute capability,
 * gfx target or architecture string. Results are cached per directory; profiles are frozen.
 */
export function loadProfiles(dir: string = profileDataDir()): DeviceProfile[] {
  const hit = loaded.get(dir);
  if (hit) return [...hit];
  let vendorDirs: string[];
  try {
    vendorDirs = readdirSync(dir).filter((d) => statSync(join(dir, d)).isDirectory()).sort();
  } catch (e) {
    throw new FormatError('profiles', `${dir}: cannot list the profile directory: ${(e as Error).message}`);
  }
  const profiles: DeviceProfile[] = [];
  for (const vd of vendorDirs) {
    if (!(VENDORS as readonly string[]).includes(vd)) {
      throw new FormatError('profiles', `${join(dir, vd)}: unknown vendor directory (expected one of ${VENDORS.join(', ')})`);
    }
    const files = readdirSync(join(dir, vd)).filter((f) => f.endsWith('.yml') || f.endsWith('.yaml')).sort();
    for (const f of files) {
      const file = join(dir, vd, f);
      const p = loadProfileFile(file);
      if (p.vendor !== vd) throw new FormatError('profiles', `${file}: vendor: ${JSON.stringify(p.vendor)} but the file lives under ${vd}/`);
      const stem = basename(f, extname(f));
      if (p.family !== stem) throw new FormatError('profiles', `${file}: family: ${JSON.stringify(p.family)} but the file is named ${f}`);
      profiles.push(p);
    }
  }
  checkNoOverlap(profiles);
  profiles.sort((a, b) => VENDORS.indexOf(a.vendor) - VENDORS.indexOf(b.vendor) || a.generation - b.generation);
  const frozen = deepFreeze(profiles);
  loaded.set(dir, frozen);
  return [...frozen];
}

function checkNoOverlap(profiles: DeviceProfile[]): void {
  const claims = new Map<string, string>();
  const claim = (token: string, owner: string, file: string, path: string): void => {
    const prev = claims.get(token);
    if (prev !== undefined) throw new FormatError('profiles', `${file}: ${path}: ${token} is already claimed by ${prev}`);
    claims.set(token, owner);
  };
  const seenFamily = new Map<string, string>();
  for (const p of profiles) {
    const prevFile = seenFamily.get(p.family);
    if (prevFile) throw new FormatError('profiles', `${p.file}: family: ${p.family} is also declared by ${prevFile}`);
    seenFamily.set(p.family, p.file);
    const units: Array<[ProfileVariant['match'], string, string]> = [[p.match, p.family, 'match'],
      ...p.variants.map((v, i): [ProfileVariant['match'], string, string] => [v.match, `${p.family} variant ${v.name}`, `variants[${i}].match`])];
    for (const [m, owner, path] of units) {
      m.computeCapability.forEach((cc, i) => claim(`compute capability ${cc}`, owner, p.file, `${path}.compute_capability[${i}]`));
      m.gfxArch.forEach((g, i) => claim(`gfx target ${g}`, owner, p.file, `${path}.gfx_arch[${i}]`));
      m.architectures.forEach((a, i) => claim(`${p.vendor} architecture '${a}'`, owner, p.file, `${path}.architectures[${i}]`));
    }
  }
}

// ---------------------------------------------------------------------------------------------
// Matching
// ---------------------------------------------------------------------------------------------

export interface ProfileQuery {
  /** 'nvidia' | 'amd' | 'apple', a PCI vendor id ('0x10de'), or a vendor string as a driver reports it. */
  vendor?: string;
  /** NVIDIA compute capability [major, minor]. Ignored for other vendors. */
  computeCapability?: [number, number];
  /** AMD gfx target, e.g. 'gfx942' or 'gfx942:sramecc+:xnack-'. Ignored for other vendors. */
  gfxArch?: string;
  /** Device name / WebGPU adapter.info.description, e.g. 'Apple M3 Max', 'NVIDIA H100 80GB HBM3'. */
  adapterDescription?: string;
  /** WebGPU adapter.info.architecture, e.g. 'ampere', 'cdna-2', 'metal-3'. */
  adapterArchitecture?: string;
}

export interface ProfileMatchResult {
  profile: DeviceProfile;
  /** True when the profile (or its variant) declares this very device; false for a nearest-family choice. */
  exact: boolean;
  reason: string;
}

const VENDOR_IDS: Record<string, Vendor> = { '0x10de': 'nvidia', '10de': 'nvidia', '0x1002': 'amd', '1002': 'amd', '0x106b': 'apple', '106b': 'apple' };

function normalizeVendor(v: string): Vendor | undefined {
  const s = v.trim().toLowerCase();
  if ((VENDORS as readonly string[]).includes(s)) return s as Vendor;
  if (VENDOR_IDS[s]) return VENDOR_IDS[s];
  if (/\bnvidia\b/.test(s)) return 'nvidia';
  if (/\b(amd|ati|advanced micro devices)\b/.test(s)) return 'amd';
  if (/\bapple\b/.test(s)) return 'apple';
  return undefined;
}

function inferVendor(q: ProfileQuery): Vendor | undefined {
  if (q.computeCapability) return 'nvidia';
  if (q.gfxArch) return 'amd';
  const d = (q.adapterDescription ?? '').toLowerCase();
  if (/\b(nvidia|geforce|quadro|tesla)\b/.test(d)) return 'nvidia';
  if (/\b(amd|radeon|instinct)\b/.test(d)) return 'amd';
  if (/\bapple\b/.test(d)) return 'apple';
  return undefined;
}

/**
 * Nominal compute capabilities of NVIDIA architecture names as WebGPU reports them. Used only to pick
 * the nearest family for an architecture no profile declares (e.g. 'pascal', 'blackwell'): an
 * identification aid, never a source of limits.
 */
const NVIDIA_ARCH_CC: Record<string, [number, number]> = {
  fermi: [2, 0], kepler: [3, 0], maxwell: [5, 0], pascal: [6, 0], volta: [7, 0], turing: [7, 5],
  ampere: [8, 0], lovelace: [8, 9], ada: [8, 9], hopper: [9, 0], blackwell: [10, 0], rubin: [11, 0],
};

function describeQuery(q: ProfileQuery): string {
  const parts: string[] = [];
  if (q.vendor !== undefined) parts.push(`vendor '${q.vendor}'`);
  if (q.computeCapability) parts.push(`compute capability ${q.computeCapability.join('.')}`);
  if (q.gfxArch !== undefined) parts.push(q.gfxArch);
  if (q.adapterDescription !== undefined) parts.push(`'${q.adapterDescription}'`);
  if (q.adapterArchitecture !== undefined) parts.push(`architecture '${q.adapterArchitecture}'`);
  return parts.length ? parts.join(', ') : 'an empty query';
}

/** The profile with one of its variants applied (limits merged over the base; attention/defaults replaced). */
export function applyVariant(p: DeviceProfile, variantName: string): DeviceProfile {
  const v = p.variants.find((x) => x.name === variantName);
  if (!v) throw new ValueError('profiles', `${p.family} has no variant ${JSON.stringify(variantName)} (it has: ${p.variants.map((x) => x.name).join(', ') || 'none'})`);
  return deepFreeze({
    ...p,
    limits: { ...p.limits, ...v.limits },
    attention: v.attention ?? p.attention,
    defaults: v.defaults ?? p.defaults,
    variant: v.name,
  });
}

interface Claim { profile: DeviceProfile; variant?: string; token: string }

/** Every (profile, variant) and the tokens its match rules declare, via `pick`. */
function claims(profiles: DeviceProfile[], pick: (m: DeviceProfile['match']) => string[]): Claim[] {
  const out: Claim[] = [];
  for (const p of profiles) {
    for (const token of pick(p.match)) out.push({ profile: p, token });
    for (const v of p.variants) for (const token of pick(v.match)) out.push({ profile: p, variant: v.name, token });
  }
  return out;
}

function resolve(c: { profile: DeviceProfile; variant?: string }): DeviceProfile {
  return c.variant === undefined ? c.profile : applyVariant(c.profile, c.variant);
}

const label = (c: { profile: DeviceProfile; variant?: string }): string =>
  c.variant === undefined ? c.profile.family : `${c.profile.family} ${c.variant}`;

/** The claim whose numeric key is nearest `want`; ties go to the lower (older) key. */
function nearest(cs: Claim[], key: (token: string) => number | undefined, want: number): Claim | undefined {
  let best: Claim | undefined;
  let bestD = Infinity;
  let bestK = Infinity;
  for (const c of cs) {
    const k = key(c.token);
    if (k === undefined) continue;
    const d = Math.abs(k - want);
    if (d < bestD || (d === bestD && k < bestK)) {
      best = c;
      bestD = d;
      bestK = k;
    }
  }
  return best;
}

const ccOrdinal = (cc: string): number | undefined => {
  const m = /^(\d+)\.(\d)$/.exec(cc);
  return m ? Number(m[1]) * 10 + Number(m[2]) : undefined;
};

/** gfx<major><minor><stepping>, minor and stepping one hex digit each: gfx90a = 9,0,10; gfx1100 = 11,0,0. */
const gfxOrdinal = (g: string): number | undefined => {
  const m = /^gfx(\d+)([0-9a-f])([0-9a-f])$/.exec(g);
  return m ? Number(m[1]) * 256 + parseInt(m[2]!, 16) * 16 + parseInt(m[3]!, 16) : undefined;
};

const announced = new Set<string>();

function announce(what: string, result: ProfileMatchResult): void {
  const chosen = result.profile.variant === undefined ? result.profile.family : `${result.profile.family} ${result.profile.variant}`;
  const key = `${what}\u0000${chosen}`;
  if (announced.has(key)) return;
  announced.add(key);
  process.stderr.write(`nbx: no device profile for ${what}; using ${chosen} (${result.reason})\n`);
}

/** Forget which inexact matches were already announced (tests). */
export function resetProfileNotices(): void {
  announced.clear();
}

/**
 * The profile for a device. See the module comment for the rules. An inexact (nearest-family) result
 * is announced once per process on stderr; a vendor that has no profiles is an UnsupportedError.
 */
export function matchProfile(q: ProfileQuery, profiles: DeviceProfile[] = loadProfiles()): ProfileMatchResult {
  if (q.computeCapability !== undefined) {
    const cc = q.computeCapability;
    if (!Array.isArray(cc) || cc.length !== 2 || !cc.every((x) => Number.isInteger(x) && x >= 0 && x < 100)) {
      throw new ValueError('profiles', `computeCapability must be [major, minor] non-negative integers, got ${JSON.stringify(cc)}`);
    }
  }
  const what = describeQuery(q);
  let vendor: Vendor | undefined;
  if (q.vendor !== undefined && q.vendor.trim() !== '') {
    vendor = normalizeVendor(q.vendor);
    if (vendor === undefined) {
      throw new UnsupportedError('profiles', `no device profile for ${what}: vendor '${q.vendor}' has no profiles ` +
        `(profiles exist for ${VENDORS.join(', ')})`);
    }
  }
  vendor ??= inferVendor(q);
  const desc = q.adapterDescription?.trim() ?? '';

  // Without a vendor, a description pattern can still identify the device.
  if (vendor === undefined && desc) {
    const hit = byDescription(profiles, desc);
    if (hit) return hit;
  }
  if (vendor === undefined) {
    throw new UnsupportedError('profiles', `no device profile for ${what}: the vendor cannot be told ` +
      `(profiles exist for ${VENDORS.join(', ')}; pass vendor, computeCapability, gfxArch or an adapter description)`);
  }
  const mine = profiles.filter((p) => p.vendor === vendor);
  if (mine.length === 0) throw new UnsupportedError('profiles', `no device profile for ${what}: no ${vendor} profiles are installed`);

  const inexact = (c: { profile: DeviceProfile; variant?: string }, reason: string): ProfileMatchResult => {
    const r = { profile: resolve(c), exact: false, reason };
    announce(what, r);
    return r;
  };

  // 1. NVIDIA compute capability
  if (vendor === 'nvidia' && q.computeCapability) {
    const want = `${q.computeCapability[0]}.${q.computeCapability[1]}`;
    const cs = claims(mine, (m) => m.computeCapability);
    const exact = cs.find((c) => c.token === want);
    if (exact) return { profile: resolve(exact), exact: true, reason: `compute capability ${want} is declared by ${label(exact)}` };
    const near = nearest(cs, ccOrdinal, ccOrdinal(want)!);
    if (near) return inexact(near, `nearest declared compute capability is ${near.token}`);
  }

  // 2. AMD gfx target
  if (vendor === 'amd' && q.gfxArch) {
    const want = q.gfxArch.trim().toLowerCase().split(':')[0]!;
    const cs = claims(mine, (m) => m.gfxArch);
    const exact = cs.find((c) => c.token === want);
    if (exact) return { profile: resolve(exact), exact: true, reason: `${want} is declared by ${label(exact)}` };
    const ord = gfxOrdinal(want);
    if (ord !== undefined) {
      const near = nearest(cs, gfxOrdinal, ord);
      if (near) return inexact(near, `nearest declared gfx target is ${near.token}`);
    }
  }

  // 3. adapter description
  if (desc) {
    const hit = byDescription(mine, desc);
    if (hit) return hit;
  }

  // 4. adapter architecture
  const arch = q.adapterArchitecture?.trim().toLowerCase() ?? '';
  if (arch) {
    const c = claims(mine, (m) => m.architectures).find((x) => x.token === arch);
    if (c) {
      if (c.variant === undefined && c.profile.variants.length > 0) {
        return inexact(c, `architecture '${arch}' names the family, not the member; its members ` +
          `${c.profile.variants.map((v) => v.name).join(', ')} have other limits, so the base profile applies`);
      }
      return { profile: resolve(c), exact: true, reason: `architecture '${arch}' is declared by ${label(c)}` };
    }
  }

  // 5. nearest family from whatever number the query carries
  if (vendor === 'nvidia' && arch && NVIDIA_ARCH_CC[arch]) {
    const [maj, min] = NVIDIA_ARCH_CC[arch]!;
    const near = nearest(claims(mine, (m) => m.computeCapability), ccOrdinal, maj * 10 + min);
    if (near) return inexact(near, `architecture '${arch}' is nominally compute capability ${maj}.${min}; nearest declared is ${near.token}`);
  }
  if (vendor === 'apple') {
    const m = /\bm(\d+)\b/i.exec(desc);
    if (m) {
      const n = Number(m[1]);
      const near = mine.reduce((a, b) => (Math.abs(b.generation - n) < Math.abs(a.generation - n) ? b : a));
      return inexact({ profile: near }, `nearest Apple GPU generation to M${n} is M${near.generation}`);
    }
  }

  // 6. the vendor alone
  const oldest = mine[0]!;
  return inexact({ profile: oldest }, `nothing in the query identifies the ${vendor} family, so the oldest ${vendor} profile applies`);
}

function byDescription(profiles: DeviceProfile[], desc: string): ProfileMatchResult | undefined {
  // Variants first: their patterns name members more precisely than the family's.
  for (const p of profiles) {
    for (const v of p.variants) {
      const pat = v.match.descriptionPatterns.find((s) => new RegExp(s, 'i').test(desc));
      if (pat) return { profile: applyVariant(p, v.name), exact: true, reason: `'${desc}' matches ${p.family} ${v.name} (/${pat}/i)` };
    }
  }
  for (const p of profiles) {
    const pat = p.match.descriptionPatterns.find((s) => new RegExp(s, 'i').test(desc));
    if (pat) return { profile: p, exact: true, reason: `'${desc}' matches ${p.family} (/${pat}/i)` };
  }
  return undefined;
}

// ---------------------------------------------------------------------------------------------
// Driver limits
// ---------------------------------------------------------------------------------------------

/**
 * The profile with driver-queried limits merged over its own: where the driver reports a number, the
 * driver wins (it knows the actual SKU, MIG slice, or API ceiling such as WebGPU's). Keys left
 * undefined keep the profile's value. A reported value that is not a positive integer, or a key that
 * is not a limit, is a ValueError (a driver query that returned garbage is a bug to surface, not a
 * number to use). The keys the driver supplied are listed in `driverLimits`.
 */
export function withDriverLimits(profile: DeviceProfile, queried: Partial<ProfileLimits>): DeviceProfile {
  const limits: ProfileLimits = { ...profile.limits };
  const supplied = new Set<LimitKey>(profile.driverLimits ?? []);
  for (const [k, v] of Object.entries(queried)) {
    if (!(LIMIT_NAMES as readonly string[]).includes(k)) {
      throw new ValueError('profiles', `withDriverLimits: '${k}' is not a device limit (limits: ${LIMIT_NAMES.join(', ')})`);
    }
    if (v === undefined || v === null) continue;
    if (typeof v !== 'number' || !Number.isInteger(v) || v <= 0) {
      throw new ValueError('profiles', `withDriverLimits: the driver reported ${k} = ${String(v)}, not a positive integer`);
    }
    limits[k as LimitKey] = v;
    supplied.add(k as LimitKey);
  }
  return deepFreeze({ ...profile, limits, driverLimits: [...supplied] });
}

/** The subset of WebGPU's GPUSupportedLimits / adapter info this module reads. */
export interface WebGPULimitsLike {
  maxComputeWorkgroupStorageSize?: number;
  maxComputeInvocationsPerWorkgroup?: number;
}
export interface WebGPUInfoLike {
  subgroupMinSize?: number;
  subgroupMaxSize?: number;
}

/**
 * Driver limits as WebGPU states them, for `withDriverLimits`. Workgroup storage is the only shared
 * memory a WGSL kernel can ask for, so it is both the default and the opt-in per-block limit. The
 * subgroup size is reported only when the adapter states a single size (min == max).
 */
export function limitsFromWebGPU(limits: WebGPULimitsLike, info: WebGPUInfoLike = {}): Partial<ProfileLimits> {
  const out: Partial<ProfileLimits> = {};
  if (limits.maxComputeWorkgroupStorageSize !== undefined) {
    out.sharedMemoryPerBlock = limits.maxComputeWorkgroupStorageSize;
    out.sharedMemoryPerBlockOptin = limits.maxComputeWorkgroupStorageSize;
  }
  if (limits.maxComputeInvocationsPerWorkgroup !== undefined) out.maxThreadsPerBlock = limits.maxComputeInvocationsPerWorkgroup;
  if (info.subgroupMinSize !== undefined && info.subgroupMinSize > 0 && info.subgroupMinSize === info.subgroupMaxSize) {
    out.warpSize = info.subgroupMinSize;
  }
  return out;
}

// ---------------------------------------------------------------------------------------------
// Reading a profile
// ---------------------------------------------------------------------------------------------

/**
 * The largest flash-attention tile (blockM x blockN) allowed at `headDim`: the profile's ceiling row
 * for that head dim, shrunk (blockN first, then blockM, halving) until its Q/K/V tiles fit the
 * opt-in shared memory of the limits in force (a driver may report less than the profile, e.g.
 * WebGPU's 32 KiB workgroup storage on a card whose profile allows more). A head dim beyond every
 * row, or a tile that cannot fit at all, is an UnsupportedError.
 */
export function attentionTileCeiling(profile: DeviceProfile, headDim: number): { blockM: number; blockN: number } {
  if (!Number.isInteger(headDim) || headDim <= 0) throw new ValueError('attention', `head dim must be a positive integer, got ${headDim}`);
  const row = profile.attention.tiles.find((t) => headDim <= t.headDimMax);
  if (!row) {
    const max = profile.attention.tiles[profile.attention.tiles.length - 1]!.headDimMax;
    throw new UnsupportedError('attention', `head dim ${headDim} exceeds the largest head dim (${max}) the ${profile.family} profile declares attention tiles for`);
  }
  const budget = profile.limits.sharedMemoryPerBlockOptin;
  const tile: AttentionTile = { ...row };
  while (attentionTileBytes(tile, headDim) > budget) {
    if (tile.blockN > 8 && tile.blockN >= tile.blockM / 2) tile.blockN /= 2;
    else if (tile.blockM > 8) tile.blockM /= 2;
    else if (tile.blockN > 8) tile.blockN /= 2;
    else {
      throw new UnsupportedError('attention', `no attention tile fits head dim ${headDim} in ${budget} bytes of shared memory ` +
        `(the smallest, 8x8, needs ${attentionTileBytes(tile, headDim)})`);
    }
  }
  return { blockM: tile.blockM, blockN: tile.blockN };
}
