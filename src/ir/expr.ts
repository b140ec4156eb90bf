// The elementwise IR: a scalar expression over the loaded inputs of a kernel.
//
// Operation definitions (src/ops/elementwise.ts) build one Expr per call from small primitives; each
// backend renders it: the CPU backend to JavaScript (src/ir/render_js.ts), CUDA to C, WebGPU to WGSL
// (src/ir/render_c.ts). Every node carries its dtype, so a renderer knows integer from float semantics
// without guessing. The primitive set is small on purpose: sigmoid, gelu, softplus... are built from it.

import type { DTypeName } from '../dtype/dtypes.js';
import { DTYPES } from '../dtype/dtypes.js';

export type UnaryPrim =
  | 'neg' | 'abs' | 'floor' | 'ceil' | 'trunc' | 'rint' | 'sign'
  | 'exp' | 'exp2' | 'expm1' | 'log' | 'log2' | 'log1p' | 'sqrt' | 'rsqrt' | 'recip'
  | 'sin' | 'cos' | 'tan' | 'tanh' | 'erf' | 'isnan' | 'isinf' | 'not' | 'bnot';

export type BinaryPrim =
  | 'add' | 'sub' | 'mul' | 'div' | 'floordiv' | 'truncdiv' | 'mod' | 'fmod' | 'pow' | 'atan2'
  | 'max' | 'min' | 'lt' | 'le' | 'gt' | 'ge' | 'eq' | 'ne' | 'and' | 'or' | 'xor' | 'shl' | 'shr'
  | 'copysign' | 'hypot';

export type Prim = UnaryPrim | BinaryPrim | 'where' | 'load' | 'param' | 'const' | 'cast';

export const UNARY_PRIMS: readonly UnaryPrim[] = ['neg', 'abs', 'floor', 'ceil', 'trunc', 'rint', 'sign', 'exp', 'exp2', 'expm1',
  'log', 'log2', 'log1p', 'sqrt', 'rsqrt', 'recip', 'sin', 'cos', 'tan', 'tanh', 'erf', 'isnan', 'isinf', 'not', 'bnot'];
export const BINARY_PRIMS: readonly BinaryPrim[] = ['add', 'sub', 'mul', 'div', 'floordiv', 'truncdiv', 'mod', 'fmod', 'pow',
  'atan2', 'max', 'min', 'lt', 'le', 'gt', 'ge', 'eq', 'ne', 'and', 'or', 'xor', 'shl', 'shr', 'copysign', 'hypot'];

/** Every distinct node, by structure: building an expression that exists returns the existing node. */
const NODES = new Map<string, Expr>();

const BOOL_RESULT = new Set<Prim>(['lt', 'le', 'gt', 'ge', 'eq', 'ne', 'isnan', 'isinf', 'not']);

export class Expr {
  /** A structural key: equal keys render to equal code (params are slots, so values are not in it). */
  readonly key!: string;
  constructor(
    readonly op: Prim,
    readonly dtype: DTypeName,
    readonly src: readonly Expr[] = [],
    /** load/param: the slot index; const: the value. */
    readonly arg: number = 0,
  ) {
    // Hash-consing: a node is identified by (op, dtype, arg, child ids), so an op that builds the same
    // expression on every call gets the same objects back, with their memoised keys, slot counts and
    // compiled kernels — the elementwise hot path does no tree walks after the first call.
    const a = op === 'const' ? (Object.is(arg, -0) ? '-0' : String(arg)) : op === 'load' || op === 'param' ? String(arg) : '';
    let sig = `${op}:${dtype}:${a}(`;
    for (let i = 0; i < src.length; i++) sig += (i ? ',' : '') + src[i]!.key;
    sig += ')';
    const existing = NODES.get(sig);
    if (existing) return existing;
    (this as { key: string }).key = `e${NODES.size}`;
    NODES.set(sig, this);
  }

  // Builders. Operands of binary ops must already share a dtype; `cast` converts explicitly.
  static load(slot: number, dtype: DTypeName): Expr { return new Expr('load', dtype, [], slot); }
  static param(slot: number, dtype: DTypeName): Expr { return new Expr('param', dtype, [], slot); }
  static const(value: number, dtype: DTypeName): Expr { return new Expr('const', dtype, [], value); }
  cast(to: DTypeName): Expr { return to === this.dtype ? this : new Expr('cast', to, [this]); }
  un(op: UnaryPrim): Expr { return new Expr(op, BOOL_RESULT.has(op) ? 'bool' : this.dtype, [this]); }
  bin(op: BinaryPrim, other: Expr | number): Expr {
    const o = typeof other === 'number' ? Expr.const(other, this.dtype) : other;
    if (o.dtype !== this.dtype) throw new Error(`IR: ${op} of ${this.dtype} and ${o.dtype}`);
    return new Expr(op, BOOL_RESULT.has(op) ? 'bool' : this.dtype, [this, o]);
  }
  static where(c: Expr, a: Expr, b: Expr): Expr {
    if (a.dtype !== b.dtype) throw new Error(`IR: where of ${a.dtype} and ${b.dtype}`);
    return new Expr('where', a.dtype, [c.dtype === 'bool' ? c : c.cast('bool'), a, b]);
  }

  add(o: Expr | number): Expr { return this.bin('add', o); }
  sub(o: Expr | number): Expr { return this.bin('sub', o); }
  mul(o: Expr | number): Expr { return this.bin('mul', o); }
  div(o: Expr | number): Expr { return this.bin('div', o); }
  max(o: Expr | number): Expr { return this.bin('max', o); }
  min(o: Expr | number): Expr { return this.bin('min', o); }
  lt(o: Expr | number): Expr { return this.bin('lt', o); }
  gt(o: Expr | number): Expr { return this.bin('gt', o); }
  le(o: Expr | number): Expr { return this.bin('le', o); }
  ge(o: Expr | number): Expr { return this.bin('ge', o); }
  eq(o: Expr | number): Expr { return this.bin('eq', o); }
  ne(o: Expr | number): Expr { return this.bin('ne', o); }
  neg(): Expr { return this.un('neg'); }
  exp(): Expr { return this.un('exp'); }
  log(): Expr { return this.un('log'); }
  abs(): Expr { return this.un('abs'); }

  /** Visits every node once, children first. */
  walk(fn: (e: Expr) => void, seen = new Set<string>()): void {
    if (seen.has(this.key)) return;
    seen.add(this.key);
    for (const s of this.src) s.walk(fn, seen);
    fn(this);
  }

  private _slots?: { load: number; param: number; paramDTypes: DTypeName[] };
  /** Slot counts and parameter dtypes, computed once per node (kernel launchers ask on every call). */
  private slotInfo(): { load: number; param: number; paramDTypes: DTypeName[] } {
    if (this._slots) return this._slots;
    const info = { load: 0, param: 0, paramDTypes: [] as DTypeName[] };
    this.walk((e) => {
      if (e.op === 'load') info.load = Math.max(info.load, e.arg + 1);
      if (e.op === 'param') { info.param = Math.max(info.param, e.arg + 1); info.paramDTypes[e.arg] = e.dtype; }
    });
    return (this._slots = info);
  }
  /** Highest load/param slot + 1. */
  slots(kind: 'load' | 'param'): number { return this.slotInfo()[kind]; }
  /** The dtype of each parameter slot. */
  paramDTypes(): readonly DTypeName[] { return this.slotInfo().paramDTypes; }
}

export const isIntDType = (d: DTypeName): boolean => DTYPES[d].kind === 'int' || d === 'bool';
