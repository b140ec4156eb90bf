// Property-based fuzzing of the operation registry (issue 17's harness). fast-check draws an operation
// from OPS (plus the varargs creation functions and view methods that are not declared there), then
// arguments for its signature: tensors of every dtype and rank (zero-size dims, non-contiguous views,
// NaN/Inf values), ints that are valid, negative, fractional, NaN or huge, lists, dtypes, strings, and
// the ways a call goes wrong (a missing required argument, an unknown keyword, a wrong type).
//
// The property, for every case on every device: the call returns tensors whose values can be read, or
// throws an NbxError. Never another exception, a crash or a hang. Results are also checked: a
// non in-place op leaves its inputs' values unchanged; on a non-CPU device the result equals the CPU's
// for the same arguments (shape, dtype, values within a dtype tolerance), unless the device raises a
// DeviceLimitError for a documented limit.
//
// Used by test/reliability_fuzz.test.ts (a seeded quick run in `npm test`) and scripts/fuzz-ops.mjs
// (long runs). fast-check is a development dependency: it is imported lazily, so this module loads
// (and the quick test reports a visible skip) where only production dependencies are installed.

import * as nbx from '../../src/index.js';
import { Tensor } from '../../src/tensor/tensor.js';
import { OPS, type OpInfo } from '../../src/ops/registry.js';
import { DeviceLimitError, NbxError, UnsupportedError } from '../../src/errors.js';
import { resolveOp } from '../../src/conformance/runner.js';
import { DTYPES, type DTypeName } from '../../src/dtype/dtypes.js';

type FC = typeof import('fast-check');

/** fast-check, or the reason it cannot be loaded (production-only installs). */
export async function loadFastCheck(): Promise<FC | string> {
  try { return (await import('fast-check')) as FC; } catch (e) { return `fast-check is not installed (${(e as Error).message.split('\n')[0]})`; }
}

// ---- what a case is ----------------------------------------------------------------------------------

/** A tensor argument, described so it can be built on any device (and printed to reproduce a failure). */
interface TensorSpec { t: 'tensor'; dtype: DTypeName; shape: number[]; values: number[]; view: 'none' | 'transpose' | 'stride2' | 'expand' | 'offset' }
type ArgSpec = TensorSpec | { t: 'value'; v: unknown } | { t: 'list'; items: ArgSpec[] };

export interface FuzzCase { op: string; args: ArgSpec[]; kwargs: [string, ArgSpec][] }

export interface Failure { op: string; device: string; kind: 'untyped-error' | 'read-error' | 'mismatch' | 'input-changed'; message: string; repro: string }

export interface FuzzReport {
  cases: number; calls: number; ok: number; typedErrors: number; deviceLimits: number; compared: number; failures: Failure[]; seconds: number;
  /** Typed errors by class and message shape (digits folded): what the drawn arguments got wrong. */
  errorKinds: Map<string, number>;
}

const FUZZ_DTYPES: DTypeName[] = ['float32', 'float64', 'float16', 'bfloat16', 'int64', 'int32', 'int16', 'int8', 'uint8', 'bool', 'complex64'];
const TENSOR_PARAMS = /^(input|other|self|x|x1|x2|y|a|b|weight|bias|target|mask|src|source|tensor|tensor1|tensor2|mat|mat1|mat2|vec|vec1|vec2|batch1|batch2|end|exponent|condition|values|elements|test_elements|boundaries|sorted_sequence|query|key|value|grid|theta|running_mean|running_var|pos_weight|attn_mask|real|imag|abs|angle|weights|prepend|append|sorter|g|v|q)$/;
const INDEX_PARAMS = /^(index|indices)$/;
/**
 * Ops whose non-finite results depend on the order of operations (FFTs, products, norms): with a NaN or
 * Inf among the inputs, devices are compared on shape and dtype only (PyTorch's CPU and CUDA differ there too).
 */
const ORDER_SENSITIVE = /^fft\.|norm|matmul|^mm$|bmm|dot|conv|linear|einsum|tensordot|inner|outer|addm|addr|cdist|softmax|softmin|attention|matrix_power|trace|cumprod|prod|var|std|logsumexp|lp_pool|interpolate|upsample|grid_sample|affine_grid|cosine_similarity|loss|cross_entropy|kl_div/;
const hasNonFinite = (c: FuzzCase): boolean => {
  const visit = (a: ArgSpec): boolean => (a.t === 'tensor' ? a.values.some((x) => !Number.isFinite(x)) : a.t === 'list' ? a.items.some(visit) : false);
  return c.args.some(visit) || c.kwargs.some(([, a]) => visit(a));
};
/** Ops whose results are random (compared across devices only for shape and dtype) or print (not math). */
const RANDOM_OPS = /rand|normal|bernoulli|multinomial|dropout|empty|poisson|randperm/;
const SKIP_OPS = new Set(['set_printoptions', 'frombuffer']);

/** The operations drawn: the registry, the varargs creation functions, and view methods. */
export function fuzzOpNames(): string[] {
  const names = [...OPS.keys()].filter((n) => !SKIP_OPS.has(n) && resolveOp(n) !== undefined);
  return [...names, 'zeros', 'ones', 'empty', 'rand', 'randn', 'tensor', 'Tensor.slice', 'Tensor.expand', 'Tensor.view', 'Tensor.reshape', 'Tensor.select', 'Tensor.unfold',
    // in-place methods (the registry declares their functional forms)
    'Tensor.add_', 'Tensor.mul_', 'Tensor.sub_', 'Tensor.div_', 'Tensor.fill_', 'Tensor.zero_', 'Tensor.copy_', 'Tensor.clamp_', 'Tensor.masked_fill_', 'Tensor.index_fill_', 'Tensor.abs_', 'Tensor.neg_']
    .filter((n) => n.includes('_') ? typeof (Tensor.prototype as unknown as Record<string, unknown>)[n.slice(7)] === 'function' : true);
}

// ---- arbitraries -------------------------------------------------------------------------------------

function arbitraries(fc: FC, ops: string[]) {
  const dim = fc.oneof({ weight: 12, arbitrary: fc.integer({ min: 0, max: 4 }) }, { weight: 2, arbitrary: fc.constant(0) }, { weight: 1, arbitrary: fc.constant(1) });
  const shape = fc.array(dim, { minLength: 0, maxLength: 3 });
  const value = fc.oneof({ weight: 10, arbitrary: fc.integer({ min: -4, max: 6 }) }, { weight: 4, arbitrary: fc.double({ min: -8, max: 8, noNaN: true }).map((x) => (Math.abs(x) < 1e-30 ? 0 : x)) }, // no subnormals: GPUs may flush them
    { weight: 1, arbitrary: fc.constantFrom(NaN, Infinity, -Infinity, -0) });
  const tensor: import('fast-check').Arbitrary<TensorSpec> = fc.record({
    t: fc.constant('tensor' as const), dtype: fc.constantFrom(...FUZZ_DTYPES), shape,
    values: fc.array(value, { minLength: 64, maxLength: 64 }),
    view: fc.constantFrom('none' as const, 'none' as const, 'transpose' as const, 'stride2' as const, 'expand' as const, 'offset' as const),
  });
  const indexTensor = fc.record({
    t: fc.constant('tensor' as const), dtype: fc.constantFrom('int64' as DTypeName, 'int64' as DTypeName, 'int32' as DTypeName, 'float32' as DTypeName), shape,
    values: fc.array(fc.integer({ min: -5, max: 6 }), { minLength: 64, maxLength: 64 }), view: fc.constantFrom('none' as const, 'transpose' as const),
  });
  // ints: mostly valid small values; sometimes what users get wrong (negative, fraction, NaN, huge)
  const bad = fc.constantFrom(-1, -7, 1.5, NaN, Infinity, -Infinity, 2 ** 40, 2 ** 53, 1e300);
  const int = fc.oneof({ weight: 12, arbitrary: fc.integer({ min: -3, max: 6 }) }, { weight: 2, arbitrary: bad });
  const intList = fc.array(int, { minLength: 0, maxLength: 4 });
  const junk = fc.constantFrom<unknown>(null, undefined, 'x', '', true, false, {}, [], [[]], Symbol.for('nbx'), () => 1, new Map());
  const scalar = fc.oneof(int, fc.double({ noNaN: false, min: -1e3, max: 1e3 }), fc.boolean());
  const str = fc.constantFrom('mean', 'sum', 'none', 'trunc', 'floor', 'nearest', 'bilinear', 'linear', 'reflect', 'replicate', 'constant', 'circular', 'zeros', 'border',
    'ij', 'xy', 'left', 'right', 'fro', 'tanh', 'bogus');
  const dtypeArg = fc.constantFrom<unknown>(...FUZZ_DTYPES, 'float', 'long', 'nope');
  const v = (a: import('fast-check').Arbitrary<unknown>) => a.map((x) => ({ t: 'value' as const, v: x }));

  /** A value for parameter `name`: its likely kind, sometimes anything at all. */
  const forParam = (name: string): import('fast-check').Arbitrary<ArgSpec> => {
    const likely: import('fast-check').Arbitrary<ArgSpec> =
      INDEX_PARAMS.test(name) ? indexTensor
        : TENSOR_PARAMS.test(name) ? fc.oneof({ weight: 6, arbitrary: tensor }, { weight: 1, arbitrary: v(scalar) })
          : /^(tensors|operands|tensor_list)$/.test(name) ? fc.array(tensor, { minLength: 0, maxLength: 3 }).map((items) => ({ t: 'list' as const, items }))
            : /^(dim|dim0|dim1|dim2|start_dim|end_dim|axis0|axis1|k|n|m|diagonal|offset|groups|chunks|length|steps|num_classes|count|minlength|upscale_factor|downscale_factor|num_samples|padding_idx|ignore_index|decimals|repeats|split_size_or_sections|indices_or_sections|shifts|source|destination|step|start|end)$/.test(name) ? v(fc.oneof({ weight: 4, arbitrary: int }, { weight: 1, arbitrary: intList }))
              : /^(dims|size|sizes|shape|kernel_size|stride|padding|dilation|output_size|output_padding|pad|normalized_shape|s|scale_factor)$/.test(name) ? v(fc.oneof({ weight: 3, arbitrary: intList }, { weight: 1, arbitrary: int }))
                : /^(dtype)$/.test(name) ? v(dtypeArg)
                  : /^(device)$/.test(name) ? v(fc.constantFrom<unknown>('cpu', 'nope', 'cuda:7'))
                    : /^(keepdim|inplace|ceil_mode|return_indices|align_corners|unbiased|descending|stable|sorted|largest|right|training|count_include_pad|return_inverse|return_counts|out_int32|equal_nan|as_tuple|accumulate|include_self|replacement|is_causal|log_target|antialias|invert|assume_unique)$/.test(name) ? v(fc.boolean())
                      : /^(reduction|mode|reduce|rounding_mode|approximate|padding_mode|indexing|side|interpolation|norm|ord|p|equation|compute_mode)$/.test(name) ? v(fc.oneof(str, scalar))
                        : v(scalar);
    return fc.oneof({ weight: 9, arbitrary: likely }, { weight: 1, arbitrary: v(junk) });
  };

  const caseArb = fc.constantFrom(...ops).chain((op): import('fast-check').Arbitrary<FuzzCase> => {
    const info = OPS.get(op);
    if (!info) return adHoc(op);
    const params = info.params.filter((p) => !p.variadic || p.name !== 'generator');
    const positional = params.filter((p) => !p.kwOnly);
    const kwOnly = params.filter((p) => p.kwOnly && !p.variadic);
    const base = fc.record({
      // how many positional arguments: usually the required ones, sometimes more, sometimes one short
      extra: fc.oneof({ weight: 10, arbitrary: fc.constant(0) }, { weight: 1, arbitrary: fc.constant(-1) }, { weight: 3, arbitrary: fc.integer({ min: 1, max: 3 }) }),
      pos: fc.tuple(...positional.map((p) => p.variadic ? fc.array(forParam(p.name), { maxLength: 3 }).map((items) => ({ t: 'list' as const, items }) as ArgSpec) : forParam(p.name))),
      kw: fc.subarray(kwOnly.map((p) => p.name)).chain((names) => fc.tuple(...names.map((n) => forParam(n).map((a) => [n, a] as [string, ArgSpec])))),
      unknownKw: fc.oneof({ weight: 15, arbitrary: fc.constant(null) }, { weight: 1, arbitrary: fc.constant('bogus_kw') }),
    }).map(({ extra, pos, kw, unknownKw }) => {
      const required = positional.filter((p) => p.required).length;
      const n = Math.max(0, Math.min(positional.length, required + extra));
      const kwargs = [...kw] as [string, ArgSpec][];
      if (unknownKw) kwargs.push([unknownKw, { t: 'value', v: 1 }]);
      return { op, args: (pos as ArgSpec[]).slice(0, n), kwargs };
    });
    if (op.startsWith('Tensor.')) return fc.tuple(tensor, base).map(([self, c]) => ({ ...c, args: [self, ...c.args.slice(1)] }));
    return base;
  });

  /** Functions outside the registry: creation varargs and view methods. */
  function adHoc(op: string): import('fast-check').Arbitrary<FuzzCase> {
    if (op === 'tensor') return fc.tuple(fc.oneof(fc.array(value, { maxLength: 4 }), fc.array(fc.array(value, { minLength: 2, maxLength: 2 }), { maxLength: 3 }), junk), fc.option(dtypeArg))
      .map(([data, d]) => ({ op, args: [{ t: 'value', v: data }], kwargs: d === null ? [] : [['dtype', { t: 'value', v: d }]] }));
    if (op.startsWith('Tensor.')) {
      const rest: import('fast-check').Arbitrary<ArgSpec> = op.endsWith('_') ? fc.oneof(v(int), v(scalar), tensor, indexTensor) : v(fc.oneof(int, intList));
      return fc.tuple(tensor, fc.array(rest, { maxLength: 4 })).map(([self, r]) => ({ op, args: [self, ...r], kwargs: [] }));
    }
    return fc.tuple(fc.oneof({ weight: 3, arbitrary: intList }, { weight: 1, arbitrary: fc.array(int, { maxLength: 3 }).map((a) => a as unknown) }), fc.option(dtypeArg))
      .map(([size, d]) => ({ op, args: [{ t: 'value', v: size }], kwargs: d === null ? [] : [['dtype', { t: 'value', v: d }]] }));
  }
  return caseArb;
}

// ---- running a case -----------------------------------------------------------------------------------

function buildTensor(s: TensorSpec, device: string): Tensor {
  const numel = s.shape.reduce((a, b) => a * b, 1);
  const kind = DTYPES[s.dtype].kind;
  const vals = Array.from({ length: numel * (s.view === 'stride2' ? 2 : 1) + 1 }, (_, i) => {
    const x = s.values[i % s.values.length]!;
    if (kind === 'bool') return x !== 0 ? 1 : 0;
    if (kind === 'int') { const r = DTYPES[s.dtype]; return Number.isFinite(x) ? Math.max(r.min!, Math.min(r.max!, Math.trunc(x))) : 0; }
    return x;
  });
  const real = kind === 'complex' ? 'float32' : s.dtype;
  let base = nbx.tensor(vals, { dtype: real });
  if (kind === 'complex') { const c = nbx.complex(base, nbx.mul(base, 0.5)); base = c; }
  let t: Tensor;
  const n0 = numel;
  switch (s.view) {
    case 'stride2': t = base.slice(0, 0, 2 * n0, 2).reshape(s.shape); break;
    case 'offset': t = base.slice(0, 1, 1 + n0).reshape(s.shape); break;
    case 'transpose': t = s.shape.length >= 2 ? base.slice(0, 0, n0).reshape([...s.shape].reverse()).transpose(0, s.shape.length - 1) : base.slice(0, 0, n0).reshape(s.shape); break;
    case 'expand': t = s.shape.length >= 1 && s.shape[0]! > 0 ? base.slice(0, 0, n0 / s.shape[0]!).reshape([1, ...s.shape.slice(1)]).expand(s.shape) : base.slice(0, 0, n0).reshape(s.shape); break;
    default: t = base.slice(0, 0, n0).reshape(s.shape);
  }
  // views keep their layout on the device: move the base, then take the same view there
  if (device === 'cpu') return t;
  const moved = base.to(device);
  return moved.as_strided(t.shape as number[], t.strides as number[], t.offset);
}

function build(a: ArgSpec, device: string): unknown {
  if (a.t === 'tensor') return buildTensor(a, device);
  if (a.t === 'list') return a.items.map((x) => build(x, device));
  return a.v;
}

const describeSpec = (a: ArgSpec): string => (a.t === 'tensor' ? `T(${a.dtype},[${a.shape}],${a.view})` : a.t === 'list' ? `[${a.items.map(describeSpec).join(', ')}]`
  : typeof a.v === 'function' ? 'fn' : typeof a.v === 'symbol' ? 'symbol' : a.v instanceof Map ? 'Map' : (() => { try { return JSON.stringify(a.v, (_, x) => (typeof x === 'number' && !Number.isFinite(x) ? String(x) : x)) ?? String(a.v); } catch { return String(a.v); } })());
export const describeCase = (c: FuzzCase): string => `${c.op}(${[...c.args.map(describeSpec), ...(c.kwargs.length ? [`{${c.kwargs.map(([k, v]) => `${k}: ${describeSpec(v)}`).join(', ')}}`] : [])].join(', ')})`;

function call(c: FuzzCase, device: string): { inputs: Tensor[]; result: unknown } {
  const args = c.args.map((a) => build(a, device));
  const kwargs: Record<string, unknown> = {};
  for (const [k, v] of c.kwargs) kwargs[k] = build(v, device);
  const creation = !OPS.has(c.op) || ['full', 'arange', 'linspace', 'eye'].includes(c.op);
  if (creation && device !== 'cpu' && !c.op.startsWith('Tensor.') && !('device' in kwargs)) kwargs.device = device;
  const inputs = args.flatMap((a) => (a instanceof Tensor ? [a] : Array.isArray(a) ? a.filter((x): x is Tensor => x instanceof Tensor) : []));
  const fn = c.op === 'zeros' || c.op === 'ones' || c.op === 'empty' || c.op === 'rand' || c.op === 'randn' || c.op === 'tensor'
    ? (nbx as unknown as Record<string, (...a: unknown[]) => unknown>)[c.op]! : resolveOp(c.op)!;
  const callArgs = Object.keys(kwargs).length ? [...args, kwargs] : args;
  return { inputs, result: fn(...callArgs) };
}

const outputsOf = (r: unknown): Tensor[] | null => {
  if (r instanceof Tensor) return [r];
  if (Array.isArray(r) && r.every((x) => x instanceof Tensor)) return r as Tensor[];
  if (r !== null && typeof r === 'object' && !Array.isArray(r)) { const vs = Object.values(r); if (vs.length && vs.every((x) => x instanceof Tensor)) return vs as Tensor[]; }
  return null;
};

async function read(t: Tensor): Promise<number[]> {
  const d = await t.data();
  return Array.from(d as ArrayLike<number | bigint>, Number);
}

function close(a: number[], b: number[], dtype: DTypeName): boolean {
  if (a.length !== b.length) return false;
  const exact = DTYPES[dtype].kind !== 'float' && DTYPES[dtype].kind !== 'complex';
  const tol = dtype === 'float16' || dtype === 'bfloat16' ? 2e-2 : 2e-3;
  for (let i = 0; i < a.length; i++) {
    const x = a[i]!, y = b[i]!;
    if (Number.isNaN(x) && Number.isNaN(y)) continue;
    if (exact ? x !== y : !(x === y || Math.abs(x - y) <= tol * (1 + Math.abs(y)))) return false;
  }
  return true;
}

type Outcome = { kind: 'ok'; values: { shape: number[]; dtype: DTypeName; data: number[] }[] } | { kind: 'typed'; error: NbxError } | { kind: 'failure'; failure: Failure };

/** Runs one case on one device inside a scope (everything it creates is disposed). */
async function runOn(c: FuzzCase, device: string): Promise<Outcome> {
  const repro = `${describeCase(c)} on ${device}`;
  const fail = (kind: Failure['kind'], e: unknown): Outcome => ({ kind: 'failure', failure: { op: c.op, device, kind, message: e instanceof Error ? `${e.name}: ${e.message}`.split('\n')[0]!.slice(0, 300) : String(e), repro } });
  return nbx.scope(async () => {
    let res: { inputs: Tensor[]; result: unknown };
    try {
      res = call(c, device);
      if (res.result instanceof Promise) res.result = await res.result;
    } catch (e) {
      if (e instanceof NbxError) return { kind: 'typed', error: e } as Outcome;
      return fail('untyped-error', e);
    }
    const outs = outputsOf(res.result);
    if (!outs) return { kind: 'ok', values: [] } as Outcome;
    const values: { shape: number[]; dtype: DTypeName; data: number[] }[] = [];
    try {
      for (const t of outs) values.push({ shape: [...t.shape], dtype: t.dt, data: await read(DTYPES[t.dt].kind === 'complex' ? nbx.view_as_real(t) : t) });
    } catch (e) {
      if (e instanceof NbxError) return { kind: 'typed', error: e } as Outcome;
      return fail('read-error', e);
    }
    if (!c.op.endsWith('_') && !/inplace/.test(JSON.stringify(c.kwargs.map(([k]) => k))) && !c.op.startsWith('Tensor.')) {
      // inputs keep their values (ops that write through `out=` or in place are not drawn here)
      const fresh = c.args.filter((a): a is TensorSpec => a.t === 'tensor');
      const inputs = res.inputs.slice(0, fresh.length);
      for (let i = 0; i < inputs.length; i++) {
        try {
          if (inputs[i]!.isDisposed) continue;
          const now = await read(DTYPES[inputs[i]!.dt].kind === 'complex' ? nbx.view_as_real(inputs[i]!) : inputs[i]!);
          const again = buildTensor(fresh[i]!, 'cpu');
          const want = await read(DTYPES[again.dt].kind === 'complex' ? nbx.view_as_real(again) : again);
          if (!close(now, want, inputs[i]!.dt)) return fail('input-changed', new Error(`input ${i} changed: ${want.slice(0, 6)} -> ${now.slice(0, 6)}`));
        } catch (e) { if (!(e instanceof NbxError)) return fail('read-error', e); }
      }
    }
    return { kind: 'ok', values } as Outcome;
  });
}

export interface FuzzOptions { seed: number; numRuns: number; devices: string[]; ops?: string[]; onProgress?(done: number, c: FuzzCase): void; timeLimitSeconds?: number }

/** Draws `numRuns` cases with fast-check from `seed` and runs each on every device. */
export async function fuzzOps(fc: FC, opts: FuzzOptions): Promise<FuzzReport> {
  const ops = opts.ops ?? fuzzOpNames();
  const cases = fc.sample(arbitraries(fc, ops), { seed: opts.seed, numRuns: opts.numRuns });
  const report: FuzzReport = { cases: 0, calls: 0, ok: 0, typedErrors: 0, deviceLimits: 0, compared: 0, failures: [], seconds: 0, errorKinds: new Map() };
  const t0 = performance.now();
  for (const c of cases) {
    if (opts.timeLimitSeconds && (performance.now() - t0) / 1000 > opts.timeLimitSeconds) break;
    report.cases++;
    opts.onProgress?.(report.cases, c);
    let cpu: Outcome | null = null;
    for (const device of opts.devices) {
      report.calls++;
      const o = await runOn(c, device);
      if (o.kind === 'failure') { report.failures.push(o.failure); continue; }
      if (o.kind === 'typed') {
        if (o.error instanceof DeviceLimitError) report.deviceLimits++; else report.typedErrors++;
        const k = `${o.error.name} ${o.error.message.replace(/\d+(\.\d+)?/g, 'N').slice(0, 70)}`;
        report.errorKinds.set(k, (report.errorKinds.get(k) ?? 0) + 1);
      }
      else report.ok++;
      if (device === 'cpu') { cpu = o; continue; }
      // the CPU is the reference: same success, same shapes, dtypes and (non-random) values
      if (cpu && cpu.kind === 'ok' && o.kind === 'ok') {
        report.compared++;
        const random = RANDOM_OPS.test(c.op) || (ORDER_SENSITIVE.test(c.op) && hasNonFinite(c));
        const bad = cpu.values.length !== o.values.length || cpu.values.some((w, i) => {
          const g = o.values[i]!;
          return g.dtype !== w.dtype || g.shape.join() !== w.shape.join() || (!random && !close(g.data, w.data, w.dtype));
        });
        if (bad) {
          report.failures.push({ op: c.op, device, kind: 'mismatch', repro: `${describeCase(c)} on ${device}`,
            message: `differs from the cpu: ${o.values.map((v) => `${v.dtype}[${v.shape}] ${v.data.slice(0, 6)}`).join('; ')} vs ${cpu.values.map((v) => `${v.dtype}[${v.shape}] ${v.data.slice(0, 6)}`).join('; ')}` });
        }
      } else if (cpu && (cpu.kind === 'ok') !== (o.kind === 'ok') && !(o.kind === 'typed' && o.error instanceof UnsupportedError)) {
        // (an UnsupportedError where the CPU computes is an honest gap of that device, DeviceLimitError included)
        report.failures.push({ op: c.op, device, kind: 'mismatch', repro: `${describeCase(c)} on ${device}`,
          message: cpu.kind === 'ok' ? `raised ${(o as { error: Error }).error.name}: ${(o as { error: Error }).error.message.slice(0, 200)} where the cpu succeeded` : `succeeded where the cpu raised ${(cpu as { error: Error }).error.name}: ${(cpu as { error: Error }).error.message.slice(0, 200)}` });
      }
    }
  }
  report.seconds = (performance.now() - t0) / 1000;
  return report;
}
