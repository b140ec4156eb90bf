// Helpers for the CUDA kernel tests (test/cuda_<family>.test.ts): every check runs an operation on CPU
// tensors and on CUDA copies of them and compares the results (exactly for integer outputs such as
// pooling indices). On a machine without a CUDA device the tests are skipped with a message; they also
// run against the host emulation of the CUDA stack (node test/gen/cuda_emu.mjs node --test ...).
import assert from 'node:assert/strict';
import * as nbx from '../src/index.js';
import { Tensor } from '../src/tensor/tensor.js';
import { DTYPES, type DTypeName } from '../src/dtype/dtypes.js';
import { probeCuda } from '../src/backend/cuda/runtime/libs.js';

const probe = probeCuda();
export const skip: string | false = probe.available ? false : `no CUDA device (${probe.reason}): CUDA kernel tests not run`;
if (skip) console.log(`# SKIP ${skip}`);

/** Deterministic pseudo-random values in [lo, hi) (a 32-bit LCG), as a CPU tensor of `dtype`. */
export function rand(shape: number[], seed: number, lo = -1, hi = 1, dtype: DTypeName = 'float32'): Tensor {
  const n = shape.reduce((a, b) => a * b, 1);
  let s = (seed * 2654435761) >>> 0;
  const v = new Float64Array(n);
  for (let i = 0; i < n; i++) { s = (Math.imul(s, 1664525) + 1013904223) >>> 0; v[i] = lo + ((s >>> 8) / 2 ** 24) * (hi - lo); }
  const t = Tensor.fromStorage(v, 'float64', shape, 'cpu');
  if (dtype === 'float64') return t;
  const isInt = DTYPES[dtype].kind === 'int' || dtype === 'bool';
  const r = isInt ? nbx.floor(t).to(dtype) : t.to(dtype);
  t.dispose();
  return r;
}

/** Tolerances by output dtype: the GPU sums in another order (and fuses multiply-adds). */
export function tolFor(d: DTypeName): [number, number] {
  switch (d) {
    case 'float64': case 'complex128': return [1e-10, 1e-12];
    case 'float16': return [2e-3, 2e-3];
    case 'bfloat16': return [1.6e-2, 1.6e-2];
    default: return [2e-5, 2e-5];
  }
}

function parts(r: unknown): Tensor[] {
  if (r instanceof Tensor) return [r];
  if (Array.isArray(r)) return r.flatMap(parts);
  throw new Error(`unexpected result ${String(r)}`);
}

/** Values of a (possibly complex, possibly CUDA) tensor as float64 numbers (complex: interleaved). */
function values(t: Tensor): { dt: DTypeName; shape: number[]; v: number[] } {
  const host = t.device.type === 'cpu' ? t : t.to('cpu');
  const c = DTYPES[host.dt].kind === 'complex' ? nbx.view_as_real(host) : host;
  const f = c.dt === 'int64' ? Array.from(c.contiguous().dataSync() as BigInt64Array, Number) : Array.from(c.to('float64').dataSync() as Float64Array);
  return { dt: t.dt, shape: t.shape.slice(), v: f };
}

/** Asserts equal results: shapes and dtypes exactly, integers exactly, floats within tolerance, NaN = NaN. */
export function same(label: string, cpu: unknown, gpu: unknown, tol?: [number, number]): void {
  const a = parts(cpu), b = parts(gpu);
  assert.equal(b.length, a.length, `${label}: ${b.length} outputs vs ${a.length}`);
  a.forEach((ta, k) => {
    const x = values(ta), y = values(b[k]!);
    assert.equal(b[k]!.device.type, 'cuda', `${label}: output ${k} is not on cuda`);
    assert.equal(y.dt, x.dt, `${label}: dtype`);
    assert.deepEqual(y.shape, x.shape, `${label}: shape`);
    const exact = DTYPES[x.dt].kind !== 'float' && DTYPES[x.dt].kind !== 'complex';
    const [rtol, atol] = tol ?? tolFor(x.dt);
    for (let i = 0; i < x.v.length; i++) {
      const p = x.v[i]!, q = y.v[i]!;
      if (Number.isNaN(p) && Number.isNaN(q)) continue;
      const ok = exact ? p === q : p === q || Math.abs(p - q) <= atol + rtol * Math.abs(p);
      if (!ok) assert.fail(`${label}: output ${k} element ${i}: cuda ${q} vs cpu ${p}`);
    }
  });
}

/** Runs f on the CPU inputs and on CUDA copies, compares, and disposes everything. */
export function check(label: string, f: (...xs: Tensor[]) => unknown, inputs: Tensor[], tol?: [number, number]): void {
  const gins = inputs.map((t) => t.to('cuda'));
  const want = f(...inputs), got = f(...gins);
  try { same(label, want, got, tol); } finally {
    for (const t of [...parts(want), ...parts(got), ...gins]) t.dispose();
  }
}

/** Asserts that none of `kernels` ran through host staging (they must have CUDA implementations). */
export function noStaging(kernels: string[]): void {
  const st = nbx.cuda.hostStagingStats();
  const staged = kernels.filter((k) => st[k]);
  assert.deepEqual(staged, [], `kernels run through host staging: ${staged.join(', ')}`);
}

export const FLOAT_DTYPES: DTypeName[] = ['float32', 'float64', 'float16', 'bfloat16'];
