// Shared by the mixture-of-experts tests (test/moe.test.ts, test/moe_cuda.test.ts).
import * as nbx from '../src/index.js';
import type { Tensor } from '../src/tensor/tensor.js';

/** Routing ids [N, k]: k distinct experts per token (as top-k gives), from a seeded shuffle. */
export function routing(N: number, k: number, E: number, seed: number): Tensor {
  let s = seed >>> 0;
  const rnd = (): number => { s = (Math.imul(s, 1664525) + 1013904223) >>> 0; return s / 2 ** 32; };
  const rows: number[][] = [];
  for (let n = 0; n < N; n++) {
    const all = Array.from({ length: E }, (_, i) => i);
    for (let i = E - 1; i > 0; i--) { const j = Math.floor(rnd() * (i + 1)); [all[i], all[j]] = [all[j]!, all[i]!]; }
    rows.push(all.slice(0, k));
  }
  return nbx.tensor(rows, { dtype: 'int64' });
}
