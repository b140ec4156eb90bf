// PyTorch's type promotion (c10/core/ScalarType.h promoteTypes and ATen's ResultTypeState).
//
// Participants come in three priorities: tensors with dimensions, zero-dim tensors, and Python-like
// scalars ("wrapped numbers"). A lower-priority participant only changes the result when it is of a
// higher *category* (bool < int < float < complex). Scalars have a kind: an int scalar acts as int64,
// a float scalar as the default float dtype (float32), a bool as bool.

import { DTYPES, isComplex, isFloat, type DTypeName } from './dtypes.js';
import { DTypeError } from '../errors.js';

/** PyTorch's default floating dtype (torch.get_default_dtype()). */
export let defaultFloatDType: DTypeName = 'float32';
export function setDefaultDType(d: DTypeName): void {
  if (d !== 'float32' && d !== 'float64') throw new DTypeError('set_default_dtype', `only float32 and float64 are supported, got ${d}`);
  defaultFloatDType = d;
}
export const defaultComplexDType = (): DTypeName => (defaultFloatDType === 'float64' ? 'complex128' : 'complex64');

const KIND_ORDER = { bool: 0, int: 1, float: 2, complex: 3 } as const;

function promoteInts(a: DTypeName, b: DTypeName): DTypeName {
  const ia = DTYPES[a], ib = DTYPES[b];
  if (ia.signed === ib.signed) return ia.rank >= ib.rank ? a : b;
  // One is uint8. uint8 with a signed type needs a signed type that holds 0..255: at least int16.
  const signed = ia.signed ? a : b;
  return DTYPES[signed].rank >= DTYPES.int16.rank ? signed : 'int16';
}

function toComplex(f: DTypeName): DTypeName {
  return f === 'float64' ? 'complex128' : 'complex64';
}

/** torch.promote_types: the smallest dtype both can be converted to without losing category. */
export function promoteTypes(a: DTypeName, b: DTypeName): DTypeName {
  if (a === b) return a;
  if (DTYPES[a].storageOnly || DTYPES[b].storageOnly) {
    throw new DTypeError('promote_types', `promotion for float8 types is not supported (got ${a} and ${b})`);
  }
  const ka = DTYPES[a].kind, kb = DTYPES[b].kind;
  if (ka === 'bool') return b;
  if (kb === 'bool') return a;
  if (ka === 'complex' || kb === 'complex') {
    if (ka === 'complex' && kb === 'complex') return DTYPES[a].rank >= DTYPES[b].rank ? a : b;
    const c = ka === 'complex' ? a : b, o = ka === 'complex' ? b : a;
    return o === 'float64' ? 'complex128' : c;
  }
  if (ka === 'float' && kb === 'float') {
    if ((a === 'float16' && b === 'bfloat16') || (a === 'bfloat16' && b === 'float16')) return 'float32';
    return DTYPES[a].rank >= DTYPES[b].rank ? a : b;
  }
  if (ka === 'float') return a;
  if (kb === 'float') return b;
  return promoteInts(a, b);
}

/** What one participant of result_type looks like. */
export type Participant =
  | { kind: 'tensor'; dtype: DTypeName; ndim: number }
  | { kind: 'scalar'; scalarKind: 'int' | 'float' | 'bool' | 'complex' };

function combineCategories(higher: DTypeName | undefined, lower: DTypeName | undefined): DTypeName | undefined {
  if (higher === undefined) return lower;
  if (lower === undefined) return higher;
  if (isComplex(higher)) return higher;
  if (isComplex(lower)) return isFloat(higher) ? toComplex(higher) : lower;
  if (isFloat(higher)) return higher;
  if (higher === 'bool' || isFloat(lower)) return promoteTypes(higher, lower);
  return higher;
}

const upd = (cur: DTypeName | undefined, d: DTypeName): DTypeName => (cur === undefined ? d : promoteTypes(cur, d));

/** torch.result_type over any number of participants. */
export function resultType(parts: readonly Participant[]): DTypeName {
  let dim: DTypeName | undefined, zero: DTypeName | undefined, wrapped: DTypeName | undefined;
  for (const p of parts) {
    if (p.kind === 'tensor') {
      if (p.ndim > 0) dim = upd(dim, p.dtype); else zero = upd(zero, p.dtype);
    } else {
      const d: DTypeName = p.scalarKind === 'bool' ? 'bool' : p.scalarKind === 'int' ? 'int64'
        : p.scalarKind === 'float' ? defaultFloatDType : defaultComplexDType();
      wrapped = upd(wrapped, d);
    }
  }
  const r = combineCategories(dim, combineCategories(zero, wrapped));
  if (r === undefined) throw new DTypeError('result_type', 'needs at least one argument');
  return r;
}

/** torch.can_cast: casting is allowed unless it lowers the category (float→int, complex→float, x→bool). */
export function canCast(from: DTypeName, to: DTypeName): boolean {
  return KIND_ORDER[DTYPES[from].kind] <= KIND_ORDER[DTYPES[to].kind];
}

/** The dtype of a floating result for an integer input (true division, mean, sqrt of an int tensor...). */
export function toFloatingDType(d: DTypeName): DTypeName {
  return DTYPES[d].kind === 'float' || DTYPES[d].kind === 'complex' ? d : defaultFloatDType;
}
