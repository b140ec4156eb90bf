// Helpers shared by the model tests.
import * as nbx from '../src/index.js';
import type { Tensor } from '../src/tensor/tensor.js';

/** transformers' generate() positions: attention_mask.cumsum(-1) - 1, with 1 at padding. */
export function positionsFromMask(mask: Tensor): Tensor {
  return mask.cumsum(-1).sub(1).masked_fill(mask.eq(0), 1);
}

/** max |a - b| / max |b| (b is the reference), on the CPU. */
export function maxRelErr(a: Tensor, b: Tensor): number {
  const ref = Number(b.abs().max().item());
  return Number(a.to('float32').sub(b.to('float32')).abs().max().item()) / (ref || 1);
}

/**
 * Greedy decoding with the KV cache as transformers' generate(do_sample=False) does it: positions from
 * the mask, one token per step, rows that produced an EOS continue with the pad id.
 */
export function greedy(model: nbx.models.CausalLMModel, inputIds: Tensor, attentionMask: Tensor, newTokens: number, eos: number[] = [], pad = 0): number[][] {
  const [B, T] = inputIds.shape as [number, number];
  const cache = model.newCache({ batch: B, maxLength: T + newTokens });
  const rows: number[][] = (inputIds.tolist() as number[][]).map((r) => r.map(Number));
  let mask = attentionMask;
  const done = new Array<boolean>(B).fill(false);
  let step = inputIds;
  try {
    for (let i = 0; i < newTokens; i++) {
      const logits = model.forward(step, { attention_mask: mask, cache, logits_to_keep: 1 });
      const next = (logits.select(1, 0).to('float32').argmax(-1).tolist() as number[]).map(Number);
      for (let b = 0; b < B; b++) {
        const tok = done[b] ? pad : next[b]!;
        rows[b]!.push(tok);
        if (eos.includes(tok)) done[b] = true;
      }
      step = nbx.tensor(rows.map((r) => [r[r.length - 1]!]));
      mask = nbx.cat([mask, nbx.ones([B, 1], { dtype: mask.dt })], 1);
    }
  } finally { cache.dispose(); }
  return rows;
}
