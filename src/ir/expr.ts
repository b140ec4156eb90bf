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

const BOOL_RESULT = new Set<Prim>(['lt', 'le', 'gt', 'ge', 'eq', 'ne', 'isnan', 'isinf', 'not']);

/**
 * Hash-consing: a node is identified by (op, dtype, arg, children), so an op that builds the same
 * expression on every call gets the same objects back, with their memoised keys, slot counts and
 * compiled kernels — the elementwise hot path does no tree walks after the first call. Lookups use
 * numeric keys (strings would be hashed afresh on every call): interior nodes are interned in their
 * first child's `parents` map under (op, dtype, second child), `where` one level deeper under its
 * third child; load/param leaves under (op, dtype, slot); constants per dtype under their value.
 */
const PRIM_CODE = new Map<Prim, number>(
  [...UNARY_PRIMS, ...BINARY_PRIMS, 'where', 'load', 'param', 'const', 'cast'].map((p, i) => [p as Prim, i]));
const DTYPE_CODE = new Map<DTypeName, number>(Object.keys(DTYPES).map((d, i) => [d as DTypeName, i]));
const ID_SPACE = 2 ** 26; // node ids below this keep (op, dtype, id) keys exact in a double
const LEAVES = new Map<number, Expr>();
const CONSTS = new Map<number, Map<number, Expr>>(); // dtype code → value → node (-0 keyed apart: Maps equate ±0)
let nodeCount = 0;

function intern(op: Prim, dtype: DTypeName, src: readonly Expr[], arg: number): Expr {
  const head = PRIM_CODE.get(op)! * 64 + DTYPE_CODE.get(dtype)!;
  let table: Map<number, Expr>;
  let k: number;
  if (src.length === 0) {
    if (op === 'const') {
      const ck = Object.is(arg, -0) ? -1 - head : head;
      let t = CONSTS.get(ck);
      if (t === undefined) CONSTS.set(ck, (t = new Map()));
      table = t;
      k = arg;
    } else {
      table = LEAVES;
      k = head * ID_SPACE + arg;
    }
  } else {
    const first = src[0]!;
    const parents = first.parents ?? ((first as { parents: Map<number, unknown> }).parents = new Map());
    k = head * ID_SPACE + (src.length > 1 ? src[1]!.id + 1 : 0);
    if (src.length <= 2) table = parents as Map<number, Expr>;
    else {
      let t = parents.get(k) as Map<number, Expr> | undefined;
      if (t === undefined) parents.set(k, (t = new Map()));
      table = t;
      k = src[2]!.id;
    }
  }
  let e = table.get(k);
  if (e === undefined) table.set(k, (e = new Expr(op, dtype, src, arg)));
  return e;
}

const NO_SRC: readonly Expr[] = [];

export class Expr {
  /** A process-unique id; `key` is its string form (equal keys render to equal code). */
  readonly id: number;
  /** A structural key: equal keys render to equal code (params are slots, so values are not in it). */
  readonly key: string;
  /** Interior nodes whose first child is this one (see intern). */
  readonly parents?: Map<number, unknown>;
  /** Backend caches (compiled kernels) attached to the node, by backend-chosen name. */
  readonly memo: Record<string, unknown> = {};
  /** Internal: build nodes with the static builders, which intern them. */
  constructor(
    readonly op: Prim,
    readonly dtype: DTypeName,
    readonly src: readonly Expr[] = [],
    /** load/param: the slot index; const: the value. */
    readonly arg: number = 0,
  ) {
    this.id = nodeCount++;
    if (this.id >= ID_SPACE) throw new Error('IR: too many distinct expression nodes');
    this.key = `e${this.id}`;
  }

  // Builders. Operands of binary ops must already share a dtype; `cast` converts explicitly.
  static load(slot: number, dtype: DTypeName): Expr { return intern('load', dtype, NO_SRC, slot); }
  static param(slot: number, dtype: DTypeName): Expr { return intern('param', dtype, NO_SRC, slot); }
  static const(value: number, dtype: DTypeName): Expr { return intern('const', dtype, NO_SRC, value); }
  cast(to: DTypeName): Expr { return to === this.dtype ? this : intern('cast', to, [this], 0); }
  un(op: UnaryPrim): Expr { return intern(op, BOOL_RESULT.has(op) ? 'bool' : this.dtype, [this], 0); }
  bin(op: BinaryPrim, other: Expr | number): Expr {
    const o = typeof other === 'number' ? Expr.const(other, this.dtype) : other;
    if (o.dtype !== this.dtype) throw new Error(`IR: ${op} of ${this.dtype} and ${o.dtype}`);
    return intern(op, BOOL_RESULT.has(op) ? 'bool' : this.dtype, [this, o], 0);
  }
  static where(c: Expr, a: Expr, b: Expr): Expr {
    if (a.dtype !== b.dtype) throw new Error(`IR: where of ${a.dtype} and ${b.dtype}`);
    return intern('where', a.dtype, [c.dtype === 'bool' ? c : c.cast('bool'), a, b], 0);
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
