// Helpers shared by the model tests.
import * as nbx from '../src/index.js';
import type { Tensor } from '../src/tensor/tensor.js';
import type { GenerateOptions } from '../src/generation/index.js';

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

/**
 * transformers' greedy and seeded sampled ids (expected.safetensors: a left-padded batch of 2, 8 new
 * tokens; sampling as torch.manual_seed(1234), temperature 0.8, top_k 20, top_p 0.9) against nbx's
 * generate() on the CPU with `extra` options: the mismatches, one line each.
 */
export async function transformersIdsMismatches(dir: string, name: string, extra: GenerateOptions = {}): Promise<string[]> {
  const ids = (t: Tensor): number[][] => t.tolist() as number[][];
  const { tensors: e } = await nbx.io.loadSafetensors(`${dir}/expected.safetensors`, { names: ['input_ids', 'attention_mask', 'greedy', 'sampled'] });
  const model = await nbx.models.load(dir, { device: 'cpu', dtype: 'float32' });
  const out: string[] = [];
  try {
    const common = { attention_mask: e.attention_mask!, max_new_tokens: 8, ...extra };
    const greedy = await model.generate(e.input_ids!, { ...common, do_sample: false });
    const sampled = await model.generate(e.input_ids!, { ...common, do_sample: true, temperature: 0.8, top_k: 20, top_p: 0.9, seed: 1234 });
    if (JSON.stringify(ids(greedy)) !== JSON.stringify(ids(e.greedy!))) out.push(`${name} greedy: ${JSON.stringify(ids(greedy))} vs ${JSON.stringify(ids(e.greedy!))}`);
    if (JSON.stringify(ids(sampled)) !== JSON.stringify(ids(e.sampled!))) out.push(`${name} sampled: ${JSON.stringify(ids(sampled))} vs ${JSON.stringify(ids(e.sampled!))}`);
  } finally { model.dispose(); }
  return out;
}
