// nn family (softmax, normalization, losses, attention) against PyTorch goldens: test/gen/nn.py writes
// test/fixtures/nn_*.json (torch 1.13, plus float64 references for ops 1.13 lacks). Also checks the
// blocked attention path against the unblocked one, and in-place running-statistics updates.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync, readdirSync } from 'node:fs';
import * as nbx from '../src/index.js';
import { decodeArg, makeTensor, numOf, resolveOp as resolve, type Enc, type Num } from './golden.js';
import { assertClose, caseCall, goldenFiles, type GoldenCase, type GoldenFixture } from './golden.js';
import { Tensor } from '../src/tensor/tensor.js';
import type { DTypeName } from '../src/dtype/dtypes.js';
import { _setAttentionBlock } from '../src/ops/nn.js';

type Case = GoldenCase;
type Fixture = GoldenFixture;
const { dir, files: fixtures } = goldenFiles('nn');


for (const file of fixtures) {
  const fx = JSON.parse(readFileSync(new URL(file, dir), 'utf8')) as Fixture;
  test(`goldens ${file} (${fx.cases.length} cases)`, () => {
    const failures: string[] = [];
    for (const c of fx.cases) {
      nbx.scope(() => {
        const { call, args } = caseCall(c, fx.tensors);
        try {
          if (c.error) {
            let err: unknown;
            try { call(); } catch (e) { err = e; }
            assert.ok(err, 'expected an error');
            assert.equal((err as Error).constructor.name, c.error, `error class (${(err as Error).message}; torch: ${c.torch_message})`);
            if (c.message) assert.ok((err as Error).message.includes(c.message), `message "${(err as Error).message}" lacks "${c.message}"`);
            return;
          }
          const r = call();
          const outs = Array.isArray(r) ? (r as Tensor[]) : [r as Tensor];
          assert.equal(outs.length, c.out!.length, 'output count');
          outs.forEach((o, i) => assertClose(o, c.out![i]!, c.rtol!, c.atol!, `out${i}`));
          for (const m of c.mutated ?? []) assertClose(args[m.arg] as Tensor, m.want, 1e-5, 1e-6, `arg${m.arg} after the call`);
        } catch (e) {
          failures.push(`${c.name}: ${(e as Error).message.split('\n')[0]}`);
        }
      });
    }
    assert.deepEqual(failures, []);
  });
}

test('attention: blocked (heads / query rows) equals unblocked', () => {
  const g = nbx.tensor(new Float32Array(4000).map((_, i) => Math.sin(i * 12.9898) * 0.9));
  const t = (n: number, off: number, shape: number[]): Tensor => g.narrow(0, off, n).reshape(shape);
  const q = t(2 * 4 * 6 * 8, 0, [2, 4, 6, 8]), k = t(2 * 2 * 5 * 8, 400, [2, 2, 5, 8]), v = t(2 * 2 * 5 * 3, 800, [2, 2, 5, 3]);
  const mask = nbx.tensor(new Uint8Array(6 * 5).map((_, i) => (i * 7) % 3 !== 0 ? 1 : 0)).to('bool').reshape([6, 5]);
  const add = t(2 * 6 * 5, 1200, [2, 1, 6, 5]);
  const F = nbx.nn.functional;
  const configs: Record<string, unknown>[] = [
    { enable_gqa: true }, { enable_gqa: true, is_causal: true }, { enable_gqa: true, attn_mask: mask }, { enable_gqa: true, attn_mask: add, scale: 0.7 },
  ];
  for (const cfg of configs) {
    const full = F.scaled_dot_product_attention(q, k, v, cfg) as Tensor;
    for (const [block, causalRows] of [[6 * 5 * 2, 4], [5 * 4, 2], [5, 1], [1, 3]] as const) {
      const old = _setAttentionBlock(block, causalRows);
      try {
        const b = F.scaled_dot_product_attention(q, k, v, cfg) as Tensor;
        const [x, y] = [full.dataSync() as Float32Array, b.dataSync() as Float32Array];
        for (let i = 0; i < x.length; i++) assert.ok(Math.abs(x[i]! - y[i]!) < 1e-6, `${JSON.stringify(Object.keys(cfg))} block ${block}/${causalRows} [${i}]: ${x[i]} vs ${y[i]}`);
      } finally { _setAttentionBlock(...old); }
    }
  }
});

test('softmax: methods, function forms and the implicit dim', () => {
  const x = nbx.tensor([[1, 2, 3], [1, 1, 1]], { dtype: 'float32' });
  const a = x.softmax(1) as Tensor, b = nbx.softmax(x, 1), c = nbx.nn.functional.softmax(x) as Tensor; // 2-D: implicit dim 1
  assert.deepEqual(a.tolist(), b.tolist());
  assert.deepEqual(a.tolist(), c.tolist());
  assert.deepEqual((x.log_softmax(-1) as Tensor).tolist(), nbx.log_softmax(x, -1).tolist());
  assert.throws(() => nbx.softmax(x), /missing required argument 'dim'/);
  assert.equal((nbx.softmax(x, 1, { dtype: nbx.float64 })).dt, 'float64');
});

test('float32 SIMD rows agree with the float64 path (tails, large rows, masks)', () => {
  const F = nbx.nn.functional;
  const close = (a: Tensor, b: Tensor, tol: number, what: string): void => {
    const x = a.dataSync() as Float32Array, y = b.dataSync() as Float64Array;
    for (let i = 0; i < y.length; i++) {
      if (Number.isNaN(y[i]!) && Number.isNaN(x[i]!)) continue;
      assert.ok(Math.abs(x[i]! - y[i]!) <= tol * (1 + Math.abs(y[i]!)), `${what}[${i}]: ${x[i]} vs ${y[i]}`);
    }
  };
  for (const n of [1, 3, 16, 17, 33, 50000]) {
    const rows = n > 1000 ? 2 : 5;
    const base = nbx.tensor(new Float64Array(rows * n).map((_, i) => 40 * Math.sin(i * 0.7 + n))).reshape([rows, n]);
    const x32 = base.to('float32'), x64 = x32.to('float64');
    close(F.softmax(x32, -1) as Tensor, F.softmax(x64, -1) as Tensor, 1e-6, `softmax n=${n}`);
    close(F.log_softmax(x32, -1) as Tensor, F.log_softmax(x64, -1) as Tensor, 1e-6, `log_softmax n=${n}`);
    const w = nbx.tensor(new Float64Array(n).map((_, i) => Math.cos(i))), b = nbx.tensor(new Float64Array(n).map((_, i) => Math.sin(i)));
    close(F.layer_norm(x32, [n], w.to('float32'), b.to('float32')) as Tensor, F.layer_norm(x64, [n], w, b) as Tensor, 1e-5, `layer_norm n=${n}`);
    close(F.rms_norm(x32, [n], w.to('float32')) as Tensor, F.rms_norm(x64, [n], w) as Tensor, 1e-5, `rms_norm n=${n}`);
  }
  // -inf rows: NaN from softmax (as PyTorch), zeros from attention's safe softmax
  const inf = nbx.full([2, 5], -Infinity, { dtype: 'float32' });
  assert.ok((F.softmax(inf, -1).tolist() as number[][]).flat().every(Number.isNaN));
});
