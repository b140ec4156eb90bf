// Device-profile schema: the typed shape of one `src/profiles/data/<vendor>/<family>.yml` file and
// its validator. The YAML is written in snake_case (it is edited by people reading vendor manuals);
// the TypeScript view is camelCase. Every rejection is a FormatError that names the file and the
// key path in the file's own spelling (`limits.shared_memory_per_block`), so the fix is one lookup.
//
// Units: shared memory in bytes; registers in 32-bit registers; threads in threads (a "block" is a
// CUDA thread block, a HIP workgroup or a Metal threadgroup; an "SM" is an NVIDIA streaming
// multiprocessor, an AMD compute unit or an Apple GPU core).

import { FormatError } from '../errors.js';

export type Vendor = 'nvidia' | 'amd' | 'apple';
export const VENDORS: readonly Vendor[] = ['nvidia', 'amd', 'apple'];

/** Hard per-device limits. Kernels size themselves from these (merged with driver-queried values), never from a GPU name. */
export interface ProfileLimits {
  /** Shared memory a block may use without opting in (CUDA: the 48 KiB static limit). */
  sharedMemoryPerBlock: number;
  /** Shared memory a block may use after opting in (CUDA: cudaFuncAttributeMaxDynamicSharedMemorySize). */
  sharedMemoryPerBlockOptin: number;
  /** Shared memory (LDS, threadgroup memory) of one SM / CU / GPU core. */
  sharedMemoryPerSM: number;
  /** 32-bit registers one block may use in total. */
  registersPerBlock: number;
  /** 32-bit registers one thread may use. */
  registersPerThread: number;
  /** Threads one block may hold. */
  maxThreadsPerBlock: number;
  /** Warp (NVIDIA), wavefront (AMD) or SIMD-group (Apple) width. */
  warpSize: number;
  /** Deepest software pipeline (cp.async / TMA stages, double buffering) kernels may request. */
  maxPipelineStages: number;
  /** 32-bit registers of one SM, when published. */
  registersPerSM?: number;
  /** Resident threads of one SM, when published. */
  maxThreadsPerSM?: number;
}

export type LimitKey = keyof ProfileLimits;

export type MatrixScope = 'warp' | 'warpgroup' | 'wavefront' | 'simdgroup';
export const MATRIX_SCOPES: readonly MatrixScope[] = ['warp', 'warpgroup', 'wavefront', 'simdgroup'];

/** Element types a matrix instruction reads or accumulates in. */
export const MATRIX_DTYPES = [
  'f64', 'f32', 'tf32', 'xf32', 'f16', 'bf16', 'e4m3', 'e5m2', 'e4m3fnuz', 'e5m2fnuz', 's8', 'u8', 's4', 'u4', 's32',
] as const;
export type MatrixDType = (typeof MATRIX_DTYPES)[number];

/** One instruction shape of the matrix unit: C[m x n] += A[m x k] B[k x n]. */
export interface MatrixShape {
  m: number;
  /** Largest N. With `nStep`, any multiple of nStep up to n is accepted (Hopper wgmma). */
  n: number;
  nStep?: number;
  k: number;
  operands: MatrixDType[];
  accumulators: MatrixDType[];
  /** The instruction, when it is not the unit's own name (Hopper keeps mma.sync beside wgmma). */
  instruction?: string;
}

export interface MatrixUnit {
  /** e.g. 'wgmma', 'mma.sync', 'mfma', 'simdgroup_matrix'. */
  name: string;
  /** The group of threads that issues one instruction. */
  scope: MatrixScope;
  shapes: MatrixShape[];
}

/** Largest flash-attention tile allowed for head dims up to `headDimMax`. */
export interface AttentionTile {
  headDimMax: number;
  blockM: number;
  blockN: number;
}

export interface AttentionCeilings {
  /** Rows in ascending `headDimMax`; the first row holding the head dim applies. */
  tiles: AttentionTile[];
}

export interface LaunchDefault {
  threadsPerBlock: number;
  /** Bytes one thread loads per vector access (16 = float4 / 128-bit). */
  vectorWidthBytes: number;
}

export interface KernelDefaults {
  elementwise: LaunchDefault;
  reduction: LaunchDefault;
}

export interface ProfileMatch {
  /** NVIDIA compute capabilities, "major.minor" (e.g. "9.0"). */
  computeCapability: string[];
  /** AMD gfx targets (e.g. "gfx942"), without target-id features. */
  gfxArch: string[];
  /** WebGPU `adapter.info.architecture` values (lower case), e.g. "ampere", "cdna-2". */
  architectures: string[];
  /** Case-insensitive regular expressions over the adapter description / device name. */
  descriptionPatterns: string[];
}

/** A member of a family whose limits differ from the family's base (e.g. sm_86 inside Ampere). */
export interface ProfileVariant {
  name: string;
  match: ProfileMatch;
  limits: Partial<ProfileLimits>;
  attention?: AttentionCeilings;
  defaults?: KernelDefaults;
  note?: string;
}

export interface DeviceProfile {
  family: string;
  vendor: Vendor;
  /** Absolute path of the YAML file the profile was read from. */
  file: string;
  /** Ordering inside the vendor (older families first). Apple: the M-series number. */
  generation: number;
  description: string;
  match: ProfileMatch;
  limits: ProfileLimits;
  /** Asynchronous global-to-shared copy mechanisms (e.g. 'cp.async', 'tma'); empty when none. */
  asyncCopy: string[];
  matrixUnit: MatrixUnit;
  attention: AttentionCeilings;
  defaults: KernelDefaults;
  variants: ProfileVariant[];
  /** Set when `matchProfile` resolved a variant: its name (e.g. '8.6'). */
  variant?: string;
  /** Limits replaced by driver-queried values (`withDriverLimits`). */
  driverLimits?: LimitKey[];
  sources: string[];
}

// ---------------------------------------------------------------------------------------------
// Validation helpers. Paths are built in the YAML's spelling.
// ---------------------------------------------------------------------------------------------

type Obj = Record<string, unknown>;

function fail(file: string, path: string, msg: string): never {
  throw new FormatError('profiles', `${file}: ${path || '<document>'}: ${msg}`);
}

function describe(v: unknown): string {
  if (v === null) return 'null';
  if (Array.isArray(v)) return 'a list';
  if (typeof v === 'object') return 'a mapping';
  if (typeof v === 'string') return `${JSON.stringify(v)} (string)`;
  return `${String(v)} (${typeof v})`;
}

const join = (path: string, key: string | number): string =>
  typeof key === 'number' ? `${path}[${key}]` : path ? `${path}.${key}` : key;

function obj(v: unknown, file: string, path: string): Obj {
  if (v === null || typeof v !== 'object' || Array.isArray(v)) fail(file, path, `expected a mapping, got ${describe(v)}`);
  return v as Obj;
}

/** Checks required keys are present and no unknown key is (a typo is an error, not a silent default). */
function keys(o: Obj, file: string, path: string, required: readonly string[], optional: readonly string[] = []): void {
  for (const k of required) if (!(k in o) || o[k] === undefined) fail(file, join(path, k), 'required key is missing');
  const allowed = new Set([...required, ...optional]);
  for (const k of Object.keys(o)) {
    if (!allowed.has(k)) fail(file, join(path, k), `unknown key (allowed here: ${[...allowed].join(', ')})`);
  }
}

function posInt(v: unknown, file: string, path: string): number {
  if (typeof v !== 'number' || !Number.isInteger(v) || v <= 0) fail(file, path, `expected a positive integer, got ${describe(v)}`);
  return v;
}

function nonNegInt(v: unknown, file: string, path: string): number {
  if (typeof v !== 'number' || !Number.isInteger(v) || v < 0) fail(file, path, `expected a non-negative integer, got ${describe(v)}`);
  return v;
}

function str(v: unknown, file: string, path: string): string {
  if (typeof v !== 'string' || v.trim() === '') fail(file, path, `expected a non-empty string, got ${describe(v)}`);
  return v;
}

function strList(v: unknown, file: string, path: string): string[] {
  if (!Array.isArray(v)) fail(file, path, `expected a list of strings, got ${describe(v)}`);
  return v.map((x, i) => str(x, file, join(path, i)));
}

function oneOf<T extends string>(v: unknown, allowed: readonly T[], file: string, path: string): T {
  if (typeof v !== 'string' || !(allowed as readonly string[]).includes(v)) {
    fail(file, path, `expected one of ${allowed.join(', ')}, got ${describe(v)}`);
  }
  return v as T;
}

const isPow2 = (n: number): boolean => n > 0 && (n & (n - 1)) === 0;

// ---------------------------------------------------------------------------------------------
// Sections
// ---------------------------------------------------------------------------------------------

const LIMIT_KEYS: ReadonlyArray<[yamlKey: string, key: LimitKey, required: boolean]> = [
  ['shared_memory_per_block', 'sharedMemoryPerBlock', true],
  ['shared_memory_per_block_optin', 'sharedMemoryPerBlockOptin', true],
  ['shared_memory_per_sm', 'sharedMemoryPerSM', true],
  ['registers_per_block', 'registersPerBlock', true],
  ['registers_per_thread', 'registersPerThread', true],
  ['max_threads_per_block', 'maxThreadsPerBlock', true],
  ['warp_size', 'warpSize', true],
  ['max_pipeline_stages', 'maxPipelineStages', true],
  ['registers_per_sm', 'registersPerSM', false],
  ['max_threads_per_sm', 'maxThreadsPerSM', false],
];

/** The YAML spelling of a limit (for messages). */
export function limitYamlKey(key: LimitKey): string {
  const row = LIMIT_KEYS.find((r) => r[1] === key);
  return row ? row[0] : key;
}

/** Every limit key, in declaration order. */
export const LIMIT_NAMES: readonly LimitKey[] = LIMIT_KEYS.map((r) => r[1]);

function parseLimits(v: unknown, file: string, path: string, partial: boolean): Partial<ProfileLimits> {
  const o = obj(v, file, path);
  const required = partial ? [] : LIMIT_KEYS.filter((r) => r[2]).map((r) => r[0]);
  keys(o, file, path, required, LIMIT_KEYS.map((r) => r[0]));
  const out: Partial<ProfileLimits> = {};
  for (const [yamlKey, key] of LIMIT_KEYS) {
    if (o[yamlKey] !== undefined) out[key] = posInt(o[yamlKey], file, join(path, yamlKey));
  }
  return out;
}

/** Relations every complete set of limits must satisfy. */
function checkLimits(l: ProfileLimits, file: string, path: string): void {
  const p = (k: LimitKey) => join(path, limitYamlKey(k));
  if (l.sharedMemoryPerBlock > l.sharedMemoryPerBlockOptin) {
    fail(file, p('sharedMemoryPerBlock'), `${l.sharedMemoryPerBlock} exceeds shared_memory_per_block_optin ${l.sharedMemoryPerBlockOptin}`);
  }
  if (l.sharedMemoryPerBlockOptin > l.sharedMemoryPerSM) {
    fail(file, p('sharedMemoryPerBlockOptin'), `${l.sharedMemoryPerBlockOptin} exceeds shared_memory_per_sm ${l.sharedMemoryPerSM}`);
  }
  if (l.registersPerThread > l.registersPerBlock) {
    fail(file, p('registersPerThread'), `${l.registersPerThread} exceeds registers_per_block ${l.registersPerBlock}`);
  }
  if (l.registersPerSM !== undefined && l.registersPerBlock > l.registersPerSM) {
    fail(file, p('registersPerBlock'), `${l.registersPerBlock} exceeds registers_per_sm ${l.registersPerSM}`);
  }
  if (!isPow2(l.warpSize)) fail(file, p('warpSize'), `${l.warpSize} is not a power of two`);
  if (l.maxThreadsPerBlock % l.warpSize !== 0) {
    fail(file, p('maxThreadsPerBlock'), `${l.maxThreadsPerBlock} is not a multiple of warp_size ${l.warpSize}`);
  }
  if (l.maxThreadsPerSM !== undefined && l.maxThreadsPerBlock > l.maxThreadsPerSM) {
    fail(file, p('maxThreadsPerBlock'), `${l.maxThreadsPerBlock} exceeds max_threads_per_sm ${l.maxThreadsPerSM}`);
  }
}

const CC_RE = /^\d+\.\d$/;
const GFX_RE = /^gfx[0-9]+[0-9a-f]{2}$/;

function parseMatch(v: unknown, file: string, path: string): ProfileMatch {
  const o = obj(v, file, path);
  keys(o, file, path, [], ['compute_capability', 'gfx_arch', 'architectures', 'description_patterns']);
  const computeCapability = o.compute_capability === undefined ? [] : strList(o.compute_capability, file, join(path, 'compute_capability'));
  computeCapability.forEach((cc, i) => {
    if (!CC_RE.test(cc)) fail(file, join(join(path, 'compute_capability'), i), `expected "major.minor" (quoted, e.g. '9.0'), got ${JSON.stringify(cc)}`);
  });
  // YAML reads an unquoted 9.0 as the number 9: strList above already refuses it with its type named.
  const gfxArch = o.gfx_arch === undefined ? [] : strList(o.gfx_arch, file, join(path, 'gfx_arch')).map((s) => s.toLowerCase());
  gfxArch.forEach((g, i) => {
    if (!GFX_RE.test(g)) fail(file, join(join(path, 'gfx_arch'), i), `expected a gfx target such as "gfx942", got ${JSON.stringify(g)}`);
  });
  const architectures = o.architectures === undefined ? [] : strList(o.architectures, file, join(path, 'architectures')).map((s) => s.toLowerCase());
  const descriptionPatterns = o.description_patterns === undefined ? [] : strList(o.description_patterns, file, join(path, 'description_patterns'));
  descriptionPatterns.forEach((pat, i) => {
    try {
      new RegExp(pat, 'i');
    } catch (e) {
      fail(file, join(join(path, 'description_patterns'), i), `invalid regular expression ${JSON.stringify(pat)}: ${(e as Error).message}`);
    }
  });
  return { computeCapability, gfxArch, architectures, descriptionPatterns };
}

function dtypeList(v: unknown, file: string, path: string): MatrixDType[] {
  const list = strList(v, file, path);
  if (list.length === 0) fail(file, path, 'expected at least one dtype');
  return list.map((d, i) => oneOf(d, MATRIX_DTYPES, file, join(path, i)));
}

function parseMatrixUnit(v: unknown, file: string, path: string): MatrixUnit {
  const o = obj(v, file, path);
  keys(o, file, path, ['name', 'scope', 'shapes']);
  const name = str(o.name, file, join(path, 'name'));
  const scope = oneOf(o.scope, MATRIX_SCOPES, file, join(path, 'scope'));
  const sp = join(path, 'shapes');
  if (!Array.isArray(o.shapes) || o.shapes.length === 0) fail(file, sp, `expected a non-empty list, got ${describe(o.shapes)}`);
  const shapes = o.shapes.map((s, i): MatrixShape => {
    const p = join(sp, i);
    const so = obj(s, file, p);
    keys(so, file, p, ['m', 'n', 'k', 'operands', 'accumulators'], ['n_step', 'instruction']);
    const shape: MatrixShape = {
      m: posInt(so.m, file, join(p, 'm')),
      n: posInt(so.n, file, join(p, 'n')),
      k: posInt(so.k, file, join(p, 'k')),
      operands: dtypeList(so.operands, file, join(p, 'operands')),
      accumulators: dtypeList(so.accumulators, file, join(p, 'accumulators')),
    };
    if (so.n_step !== undefined) {
      shape.nStep = posInt(so.n_step, file, join(p, 'n_step'));
      if (shape.n % shape.nStep !== 0) fail(file, join(p, 'n_step'), `n ${shape.n} is not a multiple of n_step ${shape.nStep}`);
    }
    if (so.instruction !== undefined) shape.instruction = str(so.instruction, file, join(p, 'instruction'));
    return shape;
  });
  return { name, scope, shapes };
}

function parseAttention(v: unknown, file: string, path: string): AttentionCeilings {
  const o = obj(v, file, path);
  keys(o, file, path, ['tiles']);
  const tp = join(path, 'tiles');
  if (!Array.isArray(o.tiles) || o.tiles.length === 0) fail(file, tp, `expected a non-empty list, got ${describe(o.tiles)}`);
  let prev = 0;
  const tiles = o.tiles.map((t, i): AttentionTile => {
    const p = join(tp, i);
    const to = obj(t, file, p);
    keys(to, file, p, ['head_dim_max', 'block_m', 'block_n']);
    const tile = {
      headDimMax: posInt(to.head_dim_max, file, join(p, 'head_dim_max')),
      blockM: posInt(to.block_m, file, join(p, 'block_m')),
      blockN: posInt(to.block_n, file, join(p, 'block_n')),
    };
    if (tile.headDimMax <= prev) fail(file, join(p, 'head_dim_max'), `rows must be in ascending head_dim_max (${tile.headDimMax} after ${prev})`);
    prev = tile.headDimMax;
    if (!isPow2(tile.blockM) || tile.blockM < 8) fail(file, join(p, 'block_m'), `${tile.blockM} is not a power of two >= 8`);
    if (!isPow2(tile.blockN) || tile.blockN < 8) fail(file, join(p, 'block_n'), `${tile.blockN} is not a power of two >= 8`);
    return tile;
  });
  return { tiles };
}

/**
 * Shared memory a flash-attention tile stages, as the ceilings are priced: the Q tile (blockM x d)
 * and one K and one V tile (blockN x d each), 2-byte elements, one stage. A row whose tile cannot
 * be staged within the opt-in budget is refused at load rather than at the first launch that reaches it.
 */
export function attentionTileBytes(tile: AttentionTile, headDim = tile.headDimMax): number {
  return (tile.blockM + 2 * tile.blockN) * headDim * 2;
}

function checkAttention(a: AttentionCeilings, l: ProfileLimits, file: string, path: string): void {
  a.tiles.forEach((t, i) => {
    const need = attentionTileBytes(t);
    if (need > l.sharedMemoryPerBlockOptin) {
      fail(file, join(join(path, 'tiles'), i), `tile ${t.blockM}x${t.blockN} at head dim ${t.headDimMax} stages ${need} bytes, ` +
        `over shared_memory_per_block_optin ${l.sharedMemoryPerBlockOptin}`);
    }
  });
}

function parseLaunchDefault(v: unknown, file: string, path: string): LaunchDefault {
  const o = obj(v, file, path);
  keys(o, file, path, ['threads_per_block', 'vector_width_bytes']);
  const d = {
    threadsPerBlock: posInt(o.threads_per_block, file, join(path, 'threads_per_block')),
    vectorWidthBytes: posInt(o.vector_width_bytes, file, join(path, 'vector_width_bytes')),
  };
  if (!isPow2(d.vectorWidthBytes) || d.vectorWidthBytes > 32) {
    fail(file, join(path, 'vector_width_bytes'), `${d.vectorWidthBytes} is not a power of two <= 32`);
  }
  return d;
}

function parseDefaults(v: unknown, file: string, path: string): KernelDefaults {
  const o = obj(v, file, path);
  keys(o, file, path, ['elementwise', 'reduction']);
  return {
    elementwise: parseLaunchDefault(o.elementwise, file, join(path, 'elementwise')),
    reduction: parseLaunchDefault(o.reduction, file, join(path, 'reduction')),
  };
}

function checkDefaults(d: KernelDefaults, l: ProfileLimits, file: string, path: string): void {
  for (const kind of ['elementwise', 'reduction'] as const) {
    const t = d[kind].threadsPerBlock;
    const p = join(join(path, kind), 'threads_per_block');
    if (t > l.maxThreadsPerBlock) fail(file, p, `${t} exceeds max_threads_per_block ${l.maxThreadsPerBlock}`);
    if (t % l.warpSize !== 0) fail(file, p, `${t} is not a multiple of warp_size ${l.warpSize}`);
  }
}

function checkVendorMatch(vendor: Vendor, m: ProfileMatch, file: string, path: string): void {
  if (vendor === 'nvidia' && m.computeCapability.length === 0) fail(file, join(path, 'compute_capability'), 'an NVIDIA profile must declare at least one compute capability');
  if (vendor === 'amd' && m.gfxArch.length === 0) fail(file, join(path, 'gfx_arch'), 'an AMD profile must declare at least one gfx target');
  if (vendor === 'apple' && m.descriptionPatterns.length === 0) fail(file, join(path, 'description_patterns'), 'an Apple profile must declare at least one description pattern');
  if (vendor !== 'nvidia' && m.computeCapability.length > 0) fail(file, join(path, 'compute_capability'), `only NVIDIA profiles declare compute capabilities (this one is ${vendor})`);
  if (vendor !== 'amd' && m.gfxArch.length > 0) fail(file, join(path, 'gfx_arch'), `only AMD profiles declare gfx targets (this one is ${vendor})`);
}

/**
 * Schema check of one parsed profile document. Required keys, types (positive integers for every
 * limit), no unknown keys, and the relations between limits (default <= opt-in <= per-SM shared
 * memory; attention tiles that fit; launch defaults within the thread limit). Returns the typed
 * profile; throws FormatError naming `file` and the key path.
 */
export function validateProfile(doc: unknown, file: string): DeviceProfile {
  const o = obj(doc, file, '');
  keys(o, file, '', ['family', 'vendor', 'generation', 'description', 'match', 'limits', 'async_copy', 'matrix_unit', 'attention', 'defaults'],
    ['variants', 'sources']);
  const family = str(o.family, file, 'family');
  if (!/^[a-z][a-z0-9_]*$/.test(family)) fail(file, 'family', `expected a lower-case identifier, got ${JSON.stringify(family)}`);
  const vendor = oneOf(o.vendor, VENDORS, file, 'vendor');
  const generation = nonNegInt(o.generation, file, 'generation');
  const description = str(o.description, file, 'description');
  const match = parseMatch(o.match, file, 'match');
  checkVendorMatch(vendor, match, file, 'match');
  const limits = parseLimits(o.limits, file, 'limits', false) as ProfileLimits;
  checkLimits(limits, file, 'limits');
  const asyncCopy = strList(o.async_copy, file, 'async_copy');
  const matrixUnit = parseMatrixUnit(o.matrix_unit, file, 'matrix_unit');
  const attention = parseAttention(o.attention, file, 'attention');
  checkAttention(attention, limits, file, 'attention');
  const defaults = parseDefaults(o.defaults, file, 'defaults');
  checkDefaults(defaults, limits, file, 'defaults');
  const sources = o.sources === undefined ? [] : strList(o.sources, file, 'sources');

  const variants: ProfileVariant[] = [];
  if (o.variants !== undefined) {
    if (!Array.isArray(o.variants)) fail(file, 'variants', `expected a list, got ${describe(o.variants)}`);
    const seen = new Set<string>();
    o.variants.forEach((v, i) => {
      const p = join('variants', i);
      const vo = obj(v, file, p);
      keys(vo, file, p, ['name', 'match', 'limits'], ['attention', 'defaults', 'note']);
      const name = str(vo.name, file, join(p, 'name'));
      if (seen.has(name)) fail(file, join(p, 'name'), `duplicate variant name ${JSON.stringify(name)}`);
      seen.add(name);
      const vmatch = parseMatch(vo.match, file, join(p, 'match'));
      if (vendor !== 'nvidia' && vmatch.computeCapability.length > 0) fail(file, join(join(p, 'match'), 'compute_capability'), `only NVIDIA profiles declare compute capabilities (this one is ${vendor})`);
      if (vendor !== 'amd' && vmatch.gfxArch.length > 0) fail(file, join(join(p, 'match'), 'gfx_arch'), `only AMD profiles declare gfx targets (this one is ${vendor})`);
      const vlimits = parseLimits(vo.limits, file, join(p, 'limits'), true);
      const merged: ProfileLimits = { ...limits, ...vlimits };
      checkLimits(merged, file, join(p, 'limits'));
      const variant: ProfileVariant = { name, match: vmatch, limits: vlimits };
      if (vo.attention !== undefined) variant.attention = parseAttention(vo.attention, file, join(p, 'attention'));
      checkAttention(variant.attention ?? attention, merged, file, join(p, vo.attention !== undefined ? 'attention' : 'limits'));
      if (vo.defaults !== undefined) variant.defaults = parseDefaults(vo.defaults, file, join(p, 'defaults'));
      checkDefaults(variant.defaults ?? defaults, merged, file, join(p, vo.defaults !== undefined ? 'defaults' : 'limits'));
      if (vo.note !== undefined) variant.note = str(vo.note, file, join(p, 'note'));
      variants.push(variant);
    });
  }

  return { family, vendor, file, generation, description, match, limits, asyncCopy, matrixUnit, attention, defaults, variants, sources };
}
