// Printing against PyTorch's own text (test/fixtures/printing.json, made by scripts/gen-printing-fixture.py
// with PyTorch): String(t), template literals and util.inspect (console.log) all print PyTorch's repr, with
// the one documented difference that the dtype suffix names nbx's dtype (dtype=nbx.int32).

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { inspect } from 'node:util';
import * as nbx from '../src/index.js';

interface Spec {
  dtype: string;
  data?: unknown;
  complex?: [number | string, number | string][];
  arange?: { n: number; mul?: number; add?: number; div?: number };
  randn?: { seed: number; shape: number[]; mul?: number };
  shape?: number[];
  print?: Record<string, unknown>;
}
const fixture = JSON.parse(readFileSync(new URL('../../test/fixtures/printing.json', import.meta.url), 'utf8')) as {
  torch: string; cases: { name: string; spec: Spec; torch: string }[];
};

const num = (v: unknown): unknown => (typeof v === 'string' ? ({ nan: NaN, inf: Infinity, '-inf': -Infinity, '-0': -0 } as Record<string, number>)[v] : v);
const conv = (x: unknown): unknown => (Array.isArray(x) ? x.map(conv) : num(x));

/** The same tensor the generator builds: values in float64, then cast. */
function build(spec: Spec): nbx.Tensor {
  if (spec.complex) {
    const re = nbx.tensor(spec.complex.map((p) => num(p[0])), { dtype: 'float64' });
    const im = nbx.tensor(spec.complex.map((p) => num(p[1])), { dtype: 'float64' });
    return nbx.complex(re, im).to(spec.dtype);
  }
  if (spec.data !== undefined) {
    if (spec.dtype === 'bool') return nbx.tensor(spec.data, { dtype: 'bool' });
    return nbx.tensor(conv(spec.data), { dtype: 'float64' }).to(spec.dtype);
  }
  if (spec.randn) {
    nbx.manual_seed(spec.randn.seed); // PyTorch's CPU generator, bit for bit
    return nbx.randn(spec.randn.shape).mul(spec.randn.mul ?? 1).to(spec.dtype);
  }
  const a = spec.arange!;
  let t = nbx.arange(a.n, { dtype: 'float64' }).mul(a.mul ?? 1).add(a.add ?? 0);
  if (a.div !== undefined) t = t.div(a.div);
  return t.reshape(spec.shape ?? [a.n]).to(spec.dtype);
}

const asNbx = (torchText: string): string => torchText.replace(/dtype=torch\./g, 'dtype=nbx.');

test(`printing matches PyTorch ${fixture.torch}'s text in ${fixture.cases.length} cases`, () => {
  const failures: string[] = [];
  try {
    for (const c of fixture.cases) {
      nbx.set_printoptions({ profile: 'default' });
      nbx.set_printoptions(c.spec.print ?? {});
      const got = String(build(c.spec)), want = asNbx(c.torch);
      if (got !== want) failures.push(`${c.name}:\n--- PyTorch\n${want}\n--- nbx\n${got}`);
    }
  } finally { nbx.set_printoptions({ profile: 'default' }); }
  assert.deepEqual(failures, []);
});

test('a small and a large tensor through toString, template literals and util.inspect', () => {
  const small = fixture.cases.find((c) => c.name === 'small float matrix')!;
  const large = fixture.cases.find((c) => c.name === 'large 2-d float')!;
  for (const c of [small, large]) {
    const t = build(c.spec);
    assert.equal(t.toString(), c.torch);
    assert.equal(`${t}`, c.torch);
    assert.equal(inspect(t), c.torch);
  }
  assert.equal(inspect({ x: nbx.tensor([1, 2]) }), '{ x: tensor([1, 2]) }');
});

test('set_printoptions validates its arguments; get_printoptions reports them', () => {
  assert.throws(() => nbx.set_printoptions({ profile: 'tiny' }), (e: Error) => e instanceof nbx.ValueError && /known: default, short, full/.test(e.message));
  assert.throws(() => nbx.set_printoptions({ precision: -1 }), nbx.ValueError);
  assert.throws(() => nbx.set_printoptions({ precison: 2 }), /unexpected keyword argument 'precison'/);
  try {
    nbx.set_printoptions({ precision: 2, sci_mode: true });
    assert.deepEqual(nbx.get_printoptions(), { precision: 2, threshold: 1000, edgeitems: 3, linewidth: 80, sci_mode: true });
  } finally { nbx.set_printoptions({ profile: 'default' }); }
  assert.equal(nbx.get_printoptions().sci_mode, null);
});

test('views, non-contiguous and disposed tensors print', () => {
  const x = nbx.arange(6).reshape(2, 3);
  assert.equal(String(x.t()), 'tensor([[0, 3],\n        [1, 4],\n        [2, 5]])');
  assert.equal(String(x.slice(1, 0, null, 2)), 'tensor([[0, 2],\n        [3, 5]])');
  const d = nbx.ones(2);
  d.dispose();
  assert.equal(String(d), 'tensor(<disposed>, size=(2,), dtype=nbx.float32)');
  assert.equal(String(nbx.arange(3, { dtype: nbx.int })), 'tensor([0, 1, 2], dtype=nbx.int32)');
});

test('large tensors are summarized from views, without reading every element', () => {
  const big = nbx.zeros([3000, 3000]);
  assert.equal(String(big), 'tensor([[0., 0., 0.,  ..., 0., 0., 0.],\n        [0., 0., 0.,  ..., 0., 0., 0.],\n        [0., 0., 0.,  ..., 0., 0., 0.],\n        ...,\n        [0., 0., 0.,  ..., 0., 0., 0.],\n        [0., 0., 0.,  ..., 0., 0., 0.],\n        [0., 0., 0.,  ..., 0., 0., 0.]])');
  big.dispose();
});
