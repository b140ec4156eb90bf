// nbx.nn.Module: PyTorch's module tree in TypeScript. Children are the module's own properties that hold
// Modules (in assignment order, as PyTorch registers `self.x = nn.Linear(...)`); parameters and buffers
// are registered by name and read through accessor properties, so `this.weight` is always the current
// tensor and loading or moving the module can replace it.
//
// Each parameter or buffer lives in a Slot. Tying two names (lm_head.weight = embed_tokens.weight) makes
// both modules hold the same Slot, so the tie survives `to()`, `load_state_dict()` and meta loading, and
// the tensor is converted and freed once. A Slot holds a Tensor, a MetaTensor (declared shape and dtype,
// nothing allocated: init_empty_weights / device 'meta') or null (an absent optional parameter, bias=None).
//
// JavaScript objects cannot be called, so `m(x)` is written `m.forward(x)`.

import { Tensor } from '../tensor/tensor.js';
import { DType, DTYPES, dtypeName, type DTypeLike, type DTypeName } from '../dtype/dtypes.js';
import { Device, type DeviceLike } from '../backend/backend.js';
import { keep } from '../tensor/storage.js';
import { fmtShape } from '../tensor/shape.js';
import { copyInto } from '../ops/shape.js';
import { defaultFloatDType } from '../dtype/promotion.js';
import { DTypeError, MetaTensorError, ShapeError, StateDictError, ValueError } from '../errors.js';

/** A tensor on the meta device: its shape and dtype are declared, no memory is allocated. */
export class MetaTensor {
  readonly shape: readonly number[];
  readonly dt: DTypeName;
  /**
   * Where a copying load_state_dict puts the loaded values (set by `module.to(device)` on an empty
   * module); null: on the loaded tensor's device.
   */
  readonly target_device: Device | null;
  constructor(shape: readonly number[], dtype: DTypeLike, target_device: DeviceLike | null = null) {
    this.shape = Object.freeze([...shape]);
    this.dt = dtypeName(dtype);
    this.target_device = target_device === null ? null : Device.of(target_device);
  }
  get dtype(): DType { return DType.all[this.dt]; }
  get device(): 'meta' { return 'meta'; }
  get ndim(): number { return this.shape.length; }
  numel(): number { return this.shape.reduce((a, b) => a * b, 1); }
  size(): number[] { return [...this.shape]; }
  is_floating_point(): boolean { return DTYPES[this.dt].kind === 'float'; }
  toString(): string { return `tensor(shape=${fmtShape(this.shape)}, dtype=${this.dt}, device=meta)`; }
}

/**
 * `t` in `dtype` on `device` (t itself when it already is), converting where the data is smaller: a
 * narrowing cast runs before the move (float64 → float32 for WebGPU, which holds no float64), a widening
 * one after it (a bfloat16 checkpoint crosses to the GPU at half the bytes of float32).
 */
function convert(t: Tensor, dtype: DTypeName, device: Device): Tensor {
  if (t.dt === dtype || DTYPES[dtype].itemsize > DTYPES[t.dt].itemsize || t.device === device) return t.to({ device, dtype });
  const cast = t.to(dtype);
  const moved = cast.to(device);
  if (moved !== cast) cast.dispose();
  return moved;
}

/** One parameter or buffer, shared by every module that holds it (tied weights). */
class Slot {
  constructor(public value: Tensor | MetaTensor | null) {}
}

/** Which slot currently holds a tensor: assigning `a.weight = b.weight` ties a to b's slot. */
const slotOfTensor = new WeakMap<Tensor | MetaTensor, Slot>();
function setSlot(slot: Slot, value: Tensor | MetaTensor | null): void {
  slot.value = value;
  if (value !== null) slotOfTensor.set(value, slot);
}

interface ModuleState {
  params: Map<string, Slot>;
  buffers: Map<string, Slot>;
  nonPersistent: Set<string>;
  /** Buffers whose dtype `to(dtype)` leaves alone (a quantized Linear's float32 scales). */
  keepDType: Set<string>;
}

// ---- empty (meta) construction -----------------------------------------------------------------------

let emptyDepth = 0;
let emptyBuffers = false;

/**
 * Runs `fn` (which builds modules) so that parameters are declared but not allocated or initialized:
 * accelerate's `init_empty_weights()`. Built-in layers allocate nothing; a parameter a custom module
 * registers as a real tensor is replaced by its MetaTensor and freed. Buffers stay real unless
 * `include_buffers` (they are usually small and computed, like rotary frequencies). Fill the result with
 * `load_state_dict(sd, { assign: true })` (installs the given tensors) or, after `.to({ device, dtype })`,
 * `load_state_dict(sd)` (copies, converting to that dtype and device).
 */
export function init_empty_weights<T>(fn: () => T, opts: { include_buffers?: boolean } = {}): T {
  const savedBuffers = emptyBuffers;
  emptyDepth++;
  emptyBuffers = opts.include_buffers ?? false;
  try {
    const r = fn();
    if (r instanceof Promise) throw new TypeError('nbx.nn.init_empty_weights: fn must build the modules synchronously (it returned a Promise)');
    return r;
  } finally {
    emptyDepth--;
    emptyBuffers = savedBuffers;
  }
}

/** The options every layer takes for its parameters (PyTorch's factory_kwargs). */
export interface FactoryOptions {
  /** 'meta' declares the parameters without allocating them. Default 'cpu'. */
  device?: DeviceLike | 'meta' | null;
  /** Default: nbx.get_default_dtype(). */
  dtype?: DTypeLike | null;
}

/** True when a layer built with these options must not allocate (device 'meta' or inside init_empty_weights). */
export function isMetaConstruction(opts: FactoryOptions = {}): boolean {
  return emptyDepth > 0 || opts.device === 'meta';
}

/**
 * A new parameter of `shape` for a layer: a MetaTensor under meta construction, else an allocated tensor
 * (zeros on the CPU, arbitrary on GPUs) that the layer's reset_parameters() fills.
 */
export function emptyParameter(shape: readonly number[], opts: FactoryOptions = {}): Tensor | MetaTensor {
  const dtype = opts.dtype ? dtypeName(opts.dtype) : defaultFloatDType;
  if (isMetaConstruction(opts)) {
    // a real device given inside init_empty_weights is where a copying load_state_dict puts the values
    const target = opts.device && opts.device !== 'meta' ? opts.device : null;
    return new MetaTensor(shape, dtype, target);
  }
  return Tensor.empty(shape, dtype, (opts.device as DeviceLike | null | undefined) ?? 'cpu');
}

// ---- Python-style formatting for repr ----------------------------------------------------------------

/** Python's repr of a float: 1e-05, 0.5, 1.0. */
export function pyFloat(x: number): string {
  if (Number.isNaN(x)) return 'nan';
  if (!Number.isFinite(x)) return x > 0 ? 'inf' : '-inf';
  if (Number.isInteger(x) && Math.abs(x) < 1e16) return x.toFixed(1);
  const ax = Math.abs(x);
  if (ax < 1e-4 || ax >= 1e16) {
    const [m, e] = x.toExponential().split('e') as [string, string];
    const sign = e.startsWith('-') ? '-' : '+';
    const digits = e.replace(/^[-+]/, '');
    return `${m}e${sign}${digits.padStart(2, '0')}`;
  }
  return String(x);
}
/** Python's repr of a value in extra_repr: True/False/None, tuples as (1,) and (1, 2), strings quoted. */
export function pyRepr(v: unknown): string {
  if (v === null || v === undefined) return 'None';
  if (v === true) return 'True';
  if (v === false) return 'False';
  if (typeof v === 'number') return Number.isInteger(v) ? String(v) : pyFloat(v);
  if (typeof v === 'string') return `'${v}'`;
  if (Array.isArray(v)) return v.length === 1 ? `(${pyRepr(v[0])},)` : `(${v.map(pyRepr).join(', ')})`;
  return String(v);
}
/** PyTorch's _addindent: every line but the first indented by n spaces. */
function addIndent(s: string, n: number): string {
  const lines = s.split('\n');
  if (lines.length === 1) return s;
  return [lines[0]!, ...lines.slice(1).map((l) => ' '.repeat(n) + l)].join('\n');
}

// ---- Module ----------------------------------------------------------------------------------------------

export type StateDict = Record<string, Tensor> | Map<string, Tensor>;

export interface LoadStateDictOptions {
  /** Every key of the module must be in sd and every key of sd in the module (default true). */
  strict?: boolean;
  /**
   * Install the given tensor objects themselves (the module takes ownership and frees them on dispose)
   * instead of copying their values into the existing parameters. Needed to fill an empty module
   * cheaply. Default false.
   */
  assign?: boolean;
}

export interface IncompatibleKeys { missing_keys: string[]; unexpected_keys: string[] }

/** One entry of `state_dict_spec()`: what load_state_dict expects under a name. */
export interface StateEntrySpec {
  kind: 'parameter' | 'buffer';
  shape: number[];
  dtype: DTypeName;
  /** False while the entry is a MetaTensor (declared, not loaded). */
  allocated: boolean;
}

interface SlotEntry { name: string; module: Module; local: string; slot: Slot; kind: 'parameter' | 'buffer'; persistent: boolean }

const INSPECT = Symbol.for('nodejs.util.inspect.custom');

type ToArg = DeviceLike | DTypeLike | 'meta' | Tensor | { device?: DeviceLike | 'meta' | null; dtype?: DTypeLike | null };

export class Module {
  /** Training mode (dropout active); `eval()` clears it, `train()` sets it, for the whole subtree. */
  training = true;
  declare private readonly _nbx: ModuleState;

  constructor() {
    Object.defineProperty(this, '_nbx', {
      value: { params: new Map(), buffers: new Map(), nonPersistent: new Set(), keepDType: new Set() } satisfies ModuleState,
      enumerable: false, writable: false, configurable: false,
    });
  }

  /** The computation; subclasses implement it. Call `m.forward(x)` where PyTorch writes `m(x)`. */
  // eslint-disable-next-line @typescript-eslint/no-explicit-any
  forward(..._args: any[]): any {
    throw new ValueError(`${this._get_name()}.forward`, `Module [${this._get_name()}] is missing the required "forward" function`);
  }

  // ---- registration ------------------------------------------------------------------------------------

  private checkName(what: string, name: string, mine: Map<string, Slot> | null): void {
    const op = `nn.Module.register_${what}`;
    if (typeof name !== 'string') throw new TypeError(`${op}: ${what} name should be a string, got ${typeof name}`);
    if (name === '') throw new ValueError(op, `${what} name can't be empty string ""`);
    if (name.includes('.')) throw new ValueError(op, `${what} name can't contain ".", got "${name}"`);
    if (mine?.has(name)) return;
    const s = this._nbx;
    if (what !== 'parameter' && s.params.has(name)) throw new ValueError(op, `attribute '${name}' already exists (a parameter)`);
    if (what !== 'buffer' && s.buffers.has(name)) throw new ValueError(op, `attribute '${name}' already exists (a buffer)`);
    const own = Object.getOwnPropertyDescriptor(this, name);
    if (own) {
      // A TS field declaration (`weight!: Tensor`) leaves an own property holding undefined: that one may be
      // replaced; so may a child module (or an empty child slot) by another module.
      const replaceable = 'value' in own && (own.value === undefined || (what === 'module' && (own.value === null || own.value instanceof Module)));
      if (!replaceable) throw new ValueError(op, `attribute '${name}' already exists`);
    }
    if (!own && name in this) throw new ValueError(op, `attribute '${name}' already exists (a method or property of ${this._get_name()})`);
  }

  private defineSlotProperty(name: string, kind: 'parameter' | 'buffer'): void {
    const map = kind === 'parameter' ? this._nbx.params : this._nbx.buffers;
    const self = this;
    // Not configurable: a TS class field of the same name in a subclass (`weight!: Tensor` instead of
    // `declare weight: Tensor`) would otherwise silently replace the accessor with undefined; this way
    // it fails at construction with "Cannot redefine property".
    Object.defineProperty(this, name, {
      enumerable: true, configurable: false,
      get(): Tensor | null {
        const v = map.get(name)!.value;
        // Inside init_empty_weights the declaration itself is returned, so a constructor can read its
        // shape or tie it (`this.lm_head.weight = this.embed_tokens.weight`).
        if (v instanceof MetaTensor && emptyDepth === 0) throw self.metaError(name, kind, v);
        return v as Tensor | null;
      },
      set(v: Tensor | MetaTensor | null): void {
        if (v !== null && !(v instanceof Tensor) && !(v instanceof MetaTensor)) {
          throw new TypeError(`cannot assign '${typeof v}' as ${kind} '${name}' (nbx.Tensor, nn.MetaTensor or null expected)`);
        }
        map.set(name, self.slotFor(kind, v));
      },
    });
  }

  /** A tensor that already fills a slot shares that slot (a tie); anything else gets a slot of its own. */
  private slotFor(kind: 'parameter' | 'buffer', v: Tensor | MetaTensor | null): Slot {
    if (v !== null) {
      const known = slotOfTensor.get(v);
      if (known && known.value === v) return known;
    }
    if (v instanceof Tensor) {
      keep(v); // the module owns it now: a surrounding nbx.scope must not free it
      if (emptyDepth > 0 && (kind === 'parameter' || emptyBuffers)) {
        const meta = new MetaTensor(v.shape, v.dt);
        v.dispose();
        return new Slot(meta);
      }
    }
    const slot = new Slot(null);
    setSlot(slot, v);
    return slot;
  }

  private metaError(name: string, kind: string, v: MetaTensor): MetaTensorError {
    return new MetaTensorError(`${this._get_name()}.${name}`, `${kind} '${name}' is on the meta device (declared ${fmtShape(v.shape)} ${v.dt}, not allocated): ` +
      'fill the module with load_state_dict(sd, { assign: true }) (or load_state_dict(sd) after .to({ device, dtype })) before using it');
  }

  /**
   * Adds a parameter, readable as `this[name]`. `null` declares an absent optional parameter (bias=None):
   * it is not in state_dict(). The module owns the tensor (dispose frees it).
   */
  register_parameter(name: string, param: Tensor | MetaTensor | null): void {
    const s = this._nbx;
    this.checkName('parameter', name, s.params);
    const fresh = !s.params.has(name);
    s.params.set(name, this.slotFor('parameter', param));
    if (fresh) this.defineSlotProperty(name, 'parameter');
  }

  /**
   * Adds a buffer (state that is not a parameter, like running statistics or rotary frequencies).
   * `persistent: false` keeps it out of state_dict().
   */
  register_buffer(name: string, tensor: Tensor | MetaTensor | null, opts: { persistent?: boolean; keep_dtype?: boolean } = {}): void {
    const s = this._nbx;
    this.checkName('buffer', name, s.buffers);
    const fresh = !s.buffers.has(name);
    s.buffers.set(name, this.slotFor('buffer', tensor));
    if (opts.persistent ?? true) s.nonPersistent.delete(name); else s.nonPersistent.add(name);
    // nbx extension: `keep_dtype` buffers keep their dtype through to(dtype) (a quantized Linear's float32 scales)
    if (opts.keep_dtype) s.keepDType.add(name); else s.keepDType.delete(name);
    if (fresh) this.defineSlotProperty(name, 'buffer');
  }

  /** Adds a child module under `name` (the same as assigning `this[name] = module`). */
  register_module(name: string, module: Module | null): void {
    if (module !== null && !(module instanceof Module)) throw new TypeError(`nn.Module.register_module: ${typeof module} is not a Module subclass`);
    this.checkName('module', name, null);
    Object.defineProperty(this, name, { value: module, enumerable: true, writable: true, configurable: true });
  }
  add_module(name: string, module: Module | null): void { this.register_module(name, module); }

  /**
   * Makes this module's parameter `name` the very parameter `sourceName` of `source` (weight tying, e.g.
   * lm_head.weight and embed_tokens.weight). Works on empty (meta) modules too, where reading
   * `source.weight` to assign it is not possible yet.
   */
  tie_parameter(name: string, source: Module, sourceName: string = name): void {
    const slot = source._nbx.params.get(sourceName);
    if (!slot) throw new ValueError('nn.Module.tie_parameter', `${source._get_name()} has no parameter '${sourceName}'`);
    const s = this._nbx;
    this.checkName('parameter', name, s.params);
    const fresh = !s.params.has(name);
    s.params.set(name, slot);
    if (fresh) this.defineSlotProperty(name, 'parameter');
  }

  /** This module's own parameter or buffer `name` as stored: a Tensor, a MetaTensor (not allocated) or null; never throws. */
  _member(name: string): Tensor | MetaTensor | null {
    const slot = this._nbx.params.get(name) ?? this._nbx.buffers.get(name);
    return slot ? slot.value : null;
  }

  // ---- traversal -----------------------------------------------------------------------------------------

  /** Direct children in registration order (own properties holding a Module). */
  named_children(): [string, Module][] {
    const out: [string, Module][] = [];
    for (const k of Object.keys(this)) {
      const d = Object.getOwnPropertyDescriptor(this, k);
      // data properties only: reading an accessor would read a parameter
      if (d && 'value' in d && d.value instanceof Module) out.push([k, d.value]);
    }
    return out;
  }
  children(): Module[] { return this.named_children().map(([, m]) => m); }

  /** Every module of the tree, this one first (name ''), each once unless remove_duplicate is false. */
  named_modules(opts: { prefix?: string; remove_duplicate?: boolean } = {}): [string, Module][] {
    const out: [string, Module][] = [];
    const seen = new Set<Module>();
    const dedupe = opts.remove_duplicate ?? true;
    const visit = (m: Module, prefix: string): void => {
      if (dedupe) { if (seen.has(m)) return; seen.add(m); }
      out.push([prefix, m]);
      for (const [n, c] of m.named_children()) visit(c, prefix ? `${prefix}.${n}` : n);
    };
    visit(this, opts.prefix ?? '');
    return out;
  }
  modules(): Module[] { return this.named_modules().map(([, m]) => m); }

  /** Every non-null parameter and buffer slot of the tree, with its dotted name (duplicates included). */
  private slotEntries(prefix = ''): SlotEntry[] {
    const out: SlotEntry[] = [];
    for (const [mp, m] of this.named_modules({ prefix, remove_duplicate: false })) {
      const s = m._nbx;
      const dot = mp ? `${mp}.` : '';
      for (const [local, slot] of s.params) if (slot.value !== null) out.push({ name: dot + local, module: m, local, slot, kind: 'parameter', persistent: true });
      for (const [local, slot] of s.buffers) {
        if (slot.value !== null) out.push({ name: dot + local, module: m, local, slot, kind: 'buffer', persistent: !s.nonPersistent.has(local) });
      }
    }
    return out;
  }

  private namedMembers(kind: 'parameter' | 'buffer', opts: { prefix?: string; recurse?: boolean; remove_duplicate?: boolean }): [string, Tensor][] {
    const dedupe = opts.remove_duplicate ?? true;
    const seen = new Set<unknown>();
    const out: [string, Tensor][] = [];
    const mods: [string, Module][] = (opts.recurse ?? true)
      ? this.named_modules({ prefix: opts.prefix ?? '', remove_duplicate: dedupe }) : [[opts.prefix ?? '', this]];
    for (const [mp, m] of mods) {
      const map = kind === 'parameter' ? m._nbx.params : m._nbx.buffers;
      for (const [local, slot] of map) {
        const v = slot.value;
        if (v === null) continue;
        const name = mp ? `${mp}.${local}` : local;
        if (v instanceof MetaTensor) throw m.metaError(name, kind, v);
        if (dedupe) { if (seen.has(v)) continue; seen.add(v); }
        out.push([name, v]);
      }
    }
    return out;
  }
  /** [name, tensor] of every parameter; a tied parameter once (its first name) unless remove_duplicate is false. */
  named_parameters(opts: { prefix?: string; recurse?: boolean; remove_duplicate?: boolean } = {}): [string, Tensor][] {
    return this.namedMembers('parameter', opts);
  }
  parameters(opts: { recurse?: boolean } = {}): Tensor[] { return this.named_parameters(opts).map(([, t]) => t); }
  named_buffers(opts: { prefix?: string; recurse?: boolean; remove_duplicate?: boolean } = {}): [string, Tensor][] {
    return this.namedMembers('buffer', opts);
  }
  buffers(opts: { recurse?: boolean } = {}): Tensor[] { return this.named_buffers(opts).map(([, t]) => t); }

  /** The submodule at a dotted path ('' is this module). */
  get_submodule(target: string): Module {
    if (target === '') return this;
    let m: Module = this;
    for (const part of target.split('.')) {
      const d = Object.getOwnPropertyDescriptor(m, part);
      const c: unknown = d && 'value' in d ? d.value : undefined;
      if (!(c instanceof Module)) throw new ValueError('nn.Module.get_submodule', `${m._get_name()} has no attribute \`${part}\` (looking up '${target}')`);
      m = c;
    }
    return m;
  }
  private getMember(target: string, kind: 'parameter' | 'buffer'): Tensor {
    const i = target.lastIndexOf('.');
    const m = this.get_submodule(i < 0 ? '' : target.slice(0, i));
    const local = target.slice(i + 1);
    const slot = (kind === 'parameter' ? m._nbx.params : m._nbx.buffers).get(local);
    if (!slot || slot.value === null) throw new ValueError(`nn.Module.get_${kind}`, `${m._get_name()} has no ${kind} \`${local}\` (looking up '${target}')`);
    if (slot.value instanceof MetaTensor) throw m.metaError(target, kind, slot.value);
    return slot.value;
  }
  get_parameter(target: string): Tensor { return this.getMember(target, 'parameter'); }
  get_buffer(target: string): Tensor { return this.getMember(target, 'buffer'); }

  // ---- state dict ----------------------------------------------------------------------------------------

  /**
   * name → tensor of every parameter and persistent buffer, with PyTorch's dotted names
   * (`layers.0.self_attn.q_proj.weight`); tied parameters under each of their names. The tensors are the
   * module's own (not copies): do not dispose them.
   */
  state_dict(opts: { prefix?: string } = {}): Record<string, Tensor> {
    const out: Record<string, Tensor> = {};
    for (const e of this.slotEntries(opts.prefix ?? '')) {
      if (!e.persistent) continue;
      const v = e.slot.value!;
      if (v instanceof MetaTensor) throw e.module.metaError(e.name, e.kind, v);
      out[e.name] = v;
    }
    return out;
  }

  /** What load_state_dict expects: every state_dict name with its kind, shape and dtype, allocated or not. */
  state_dict_spec(): Record<string, StateEntrySpec> {
    const out: Record<string, StateEntrySpec> = {};
    for (const e of this.slotEntries()) {
      if (!e.persistent) continue;
      const v = e.slot.value!;
      out[e.name] = { kind: e.kind, shape: [...v.shape], dtype: v.dt, allocated: v instanceof Tensor };
    }
    return out;
  }

  /**
   * Loads parameters and persistent buffers by name. Copies the values into the existing tensors
   * (converted to their dtype and device; the caller keeps sd's tensors), or with `assign: true` installs
   * sd's tensors themselves. Into an empty (meta) entry a copy is made in the declared dtype, on the
   * device given to `.to()` (else sd's tensor's device). Every shape is checked; with `strict` (default)
   * missing and unexpected keys are errors too. All problems are reported together in one
   * StateDictError, and nothing is changed when there is one. A tied parameter counts as loaded when
   * any of its names is in sd.
   */
  load_state_dict(sd: StateDict, opts: LoadStateDictOptions = {}): IncompatibleKeys {
    const op = 'nn.Module.load_state_dict';
    const strict = opts.strict ?? true, assign = opts.assign ?? false;
    if (sd === null || typeof sd !== 'object') throw new TypeError(`${op}: expected a state dict (Record or Map of name → Tensor), got ${sd === null ? 'null' : typeof sd}`);
    const given = sd instanceof Map ? new Map(sd) : new Map(Object.entries(sd));
    for (const [k, v] of given) {
      if (!(v instanceof Tensor)) throw new TypeError(`${op}: state dict entry '${k}' is not an nbx.Tensor (got ${v === null ? 'null' : typeof v})`);
      if (v.isDisposed) throw new ValueError(op, `state dict entry '${k}' was disposed`);
    }
    const entries = this.slotEntries().filter((e) => e.persistent);
    const expected = new Set(entries.map((e) => e.name));
    const mismatched: { key: string; expected: number[]; got: number[] }[] = [];
    const filled = new Set<Slot>();
    for (const e of entries) {
      const v = given.get(e.name);
      if (!v) continue;
      const want = e.slot.value!.shape;
      if (want.length !== v.shape.length || want.some((d, i) => d !== v.shape[i])) {
        mismatched.push({ key: e.name, expected: [...want], got: [...v.shape] });
      }
      filled.add(e.slot);
    }
    const missing = entries.filter((e) => !given.has(e.name) && !filled.has(e.slot)).map((e) => e.name);
    const unexpected = [...given.keys()].filter((k) => !expected.has(k));
    if (mismatched.length || (strict && (missing.length || unexpected.length))) {
      const lines: string[] = [];
      if (strict && missing.length) lines.push(`Missing key(s) in state_dict: ${missing.map((k) => `"${k}"`).join(', ')}.`);
      if (strict && unexpected.length) lines.push(`Unexpected key(s) in state_dict: ${unexpected.map((k) => `"${k}"`).join(', ')}.`);
      for (const m of mismatched) {
        lines.push(`size mismatch for ${m.key}: copying a param with shape ${fmtShape(m.got)} from checkpoint, the shape in current model is ${fmtShape(m.expected)}.`);
      }
      throw new StateDictError(op, `Error(s) in loading state_dict for ${this._get_name()}:\n\t${lines.join('\n\t')}`,
        strict ? missing : [], strict ? unexpected : [], mismatched);
    }

    const replaced: Tensor[] = [];
    for (const e of entries) {
      const v = given.get(e.name);
      if (!v) continue;
      const old = e.slot.value!;
      if (assign) {
        if (old === v) continue;
        keep(v);
        setSlot(e.slot, v);
      } else if (old instanceof MetaTensor) {
        const c = convert(v, old.dt, old.target_device ?? v.device);
        if (c === v) { setSlot(e.slot, keep(v.clone())); continue; }
        keep(c);
        setSlot(e.slot, c);
      } else {
        if (old !== v) {
          const src = v.device === old.device ? v : v.to(old.device);
          try { copyInto(old, src, op); } finally { if (src !== v) src.dispose(); }
        }
        continue;
      }
      if (old instanceof Tensor) replaced.push(old);
    }
    this.disposeUnreferenced(replaced);
    return { missing_keys: missing, unexpected_keys: unexpected };
  }

  /** Frees the tensors that no slot of this tree holds any more (a tensor given under two names stays). */
  private disposeUnreferenced(candidates: Tensor[]): void {
    if (!candidates.length) return;
    const live = new Set<unknown>(this.slotEntries().map((e) => e.slot.value));
    for (const t of candidates) if (!live.has(t)) t.dispose();
  }

  // ---- device, dtype and lifetime -----------------------------------------------------------------------

  /** Replaces every parameter and buffer of the tree by fn(value), each distinct tensor once; frees the old ones. */
  protected _apply(fn: (v: Tensor | MetaTensor, keepDType: boolean) => Tensor | MetaTensor): this {
    const entries = this.slotEntries();
    const slots = new Set<Slot>(entries.map((e) => e.slot));
    const fixed = new Set<Slot>(entries.filter((e) => e.kind === 'buffer' && e.module._nbx.keepDType.has(e.local)).map((e) => e.slot));
    const converted = new Map<Tensor | MetaTensor, Tensor | MetaTensor>();
    const old: Tensor[] = [];
    for (const slot of slots) {
      const v = slot.value!;
      let nv = converted.get(v);
      if (!nv) {
        nv = fn(v, fixed.has(slot));
        if (nv instanceof Tensor && nv !== v) keep(nv);
        converted.set(v, nv);
        if (nv !== v && v instanceof Tensor) old.push(v);
      }
      setSlot(slot, nv);
    }
    for (const t of old) t.dispose();
    return this;
  }

  /**
   * Moves and/or casts every parameter and buffer: `to('cuda')`, `to(nbx.float16)`, `to('cuda', 'bfloat16')`,
   * `to({ device, dtype })`, `to(tensor)` (its device and dtype). As PyTorch's, a dtype applies to floating-point (and complex) tensors only;
   * integer buffers keep theirs. The old storage is freed. `to('meta')` drops all data (shapes and dtypes stay).
   */
  to(a: ToArg, b?: DTypeLike): this {
    const op = 'nn.Module.to';
    let device: Device | 'meta' | undefined, dtype: DTypeName | undefined;
    const asDType = (x: unknown): DTypeName | undefined =>
      x instanceof DType ? x.name : typeof x === 'string' && x in DTYPES ? (x as DTypeName) : undefined;
    for (const x of [a, b]) {
      if (x === undefined || x === null) continue;
      if (x instanceof Tensor) { dtype = x.dt; device = x.device; continue; }
      const d = asDType(x);
      if (d) { dtype = d; continue; }
      if (x === 'meta') { device = 'meta'; continue; }
      if (typeof x === 'string' || x instanceof Device) { device = Device.of(x); continue; }
      const o = x as { device?: DeviceLike | 'meta' | null; dtype?: DTypeLike | null };
      if (o.dtype !== undefined && o.dtype !== null) dtype = dtypeName(o.dtype);
      if (o.device !== undefined && o.device !== null) device = o.device === 'meta' ? 'meta' : Device.of(o.device);
    }
    if (dtype !== undefined && DTYPES[dtype].kind !== 'float' && DTYPES[dtype].kind !== 'complex') {
      throw new DTypeError(op, `nn.Module.to only accepts floating point or complex dtypes, but got desired dtype=${dtype}`);
    }
    const castable = (dt: DTypeName): boolean => dtype !== undefined && (DTYPES[dt].kind === 'float' || DTYPES[dt].kind === 'complex')
      && (DTYPES[dtype].kind === 'complex' || DTYPES[dt].kind !== 'complex');
    return this._apply((v, keepDType) => {
      const dt = !keepDType && castable(v.dt) ? dtype! : v.dt;
      if (v instanceof MetaTensor) {
        if (dt === v.dt && (device === undefined || device === 'meta')) return v;
        return new MetaTensor(v.shape, dt, device === undefined || device === 'meta' ? v.target_device : device);
      }
      if (device === 'meta') return new MetaTensor(v.shape, v.dt);
      return convert(v, dt, device ?? v.device);
    });
  }
  cpu(): this { return this.to('cpu'); }
  cuda(index = 0): this { return this.to(`cuda:${index}`); }
  float(): this { return this.to('float32'); }
  double(): this { return this.to('float64'); }
  half(): this { return this.to('float16'); }
  bfloat16(): this { return this.to('bfloat16'); }

  /** Frees every parameter and buffer of the tree (each tensor once). Safe to call twice. */
  dispose(): void {
    const seen = new Set<Tensor>();
    for (const e of this.slotEntries()) {
      const v = e.slot.value;
      if (v instanceof Tensor && !seen.has(v)) { seen.add(v); v.dispose(); }
    }
  }

  /** Sets training mode on the whole tree; returns this. */
  train(mode = true): this {
    for (const m of this.modules()) m.training = mode;
    return this;
  }
  /** Inference mode (Dropout becomes the identity); returns this. */
  eval(): this { return this.train(false); }

  /** Calls fn on every submodule (children first, then this one), as PyTorch's apply. */
  apply(fn: (m: Module) => void): this {
    for (const c of this.children()) c.apply(fn);
    fn(this);
    return this;
  }

  // ---- printing ------------------------------------------------------------------------------------------

  _get_name(): string { return this.constructor.name; }
  /** The layer's own settings in its printed form (`in_features=4, out_features=3, bias=True`). */
  extra_repr(): string { return ''; }
  /** PyTorch's module printout: the layer with its settings and the tree of children. */
  toString(): string {
    const extra = this.extra_repr();
    const extraLines = extra ? extra.split('\n') : [];
    const childLines = this.named_children().map(([k, m]) => `(${k}): ${addIndent(m.toString(), 2)}`);
    const lines = [...extraLines, ...childLines];
    let s = this._get_name() + '(';
    if (lines.length) {
      if (extraLines.length === 1 && !childLines.length) s += extraLines[0];
      else s += '\n  ' + lines.join('\n  ') + '\n';
    }
    return s + ')';
  }
  [INSPECT](): string { return this.toString(); }
}

/** Shape given as an int or a list (PyTorch's normalized_shape, kernel_size, ...). */
export function shapeArg(op: string, what: string, v: number | readonly number[], n?: number): number[] {
  const a = typeof v === 'number' ? (n === undefined ? [v] : Array(n).fill(v)) : [...v];
  if (n !== undefined && a.length !== n) throw new ValueError(op, `${what} must be an int or a list of ${n} ints, got ${JSON.stringify(v)}`);
  for (const x of a) if (!Number.isInteger(x)) throw new ValueError(op, `${what} must hold integers, got ${JSON.stringify(v)}`);
  return a;
}

/** Checks a shape declared by a layer (non-negative integers), naming the layer. */
export function checkDims(op: string, dims: Record<string, number>): void {
  for (const [k, v] of Object.entries(dims)) {
    if (!Number.isInteger(v) || v < 0) throw new ShapeError(op, `${k} must be a non-negative integer, got ${v}`);
  }
}
