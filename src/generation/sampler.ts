// Choosing the next token where the logits are, one row per sequence, each row with its own settings.
//
// The host path (logits.ts) copies every row's V scores to the CPU and runs transformers' processors
// there: exact to transformers on a float32 CPU model, but on a GPU it reads B·V floats back per step and
// runs the processors in JavaScript. This sampler instead takes each row's settings and one uniform draw
// per row as device tensors and returns B token ids, with fixed shapes and no host reads, so it runs
// inside a CUDA graph (or a CPU step recording) and a step copies back only the ids. A row's result
// depends only on that row's logits, settings and draw: batching sequences together does not change
// what each one samples (the engine's guarantee that a request gives what it gives alone).
//
// Per row: the repetition penalty (where given) first divides positive and multiplies negative scores
// of the tokens the row has seen; then temperature 0 is greedy (argmax); otherwise the scores are divided by the temperature, sorted
// descending and softmaxed, the candidates are cut by top-k (k = 0: no cut), top-p (a token is kept
// while the mass before it is below top_p, so the first always is) and min-p (probability at least
// min_p times the top one), and the draw u ∈ [0, 1) picks the token where the kept mass's cumulative
// sum first exceeds u times its total (inverse-CDF sampling).

import * as nbx from '../index.js';
import type { Tensor } from '../tensor/tensor.js';
import type { Device } from '../backend/backend.js';

/** Each row's settings and draw, as device tensors [B] (float32 except topK, int64). */
export interface RowSamplingTensors {
  /** 0 for greedy decoding. */
  temperature: Tensor;
  /** 0 for no top-k cut. */
  topK: Tensor;
  /** 1 for no top-p cut. */
  topP: Tensor;
  /** 0 for no min-p cut. */
  minP: Tensor;
  /** Uniform draws in [0, 1). */
  uniform: Tensor;
  /** transformers' repetition penalty per row (1 for none) and the tokens each row has seen, bool [B, V]. */
  penalty?: Tensor;
  seen?: Tensor;
}

/** One row's settings on the host (what RowSamplingState packs). */
export interface RowSampling { temperature: number; top_k: number; top_p: number; min_p: number; repetition_penalty?: number }

const ranks = new Map<string, Tensor>();
/** int64 [1, V] 0..V-1 on `device`, made once (a capture must not upload it). */
function rankRow(vocab: number, device: Device): Tensor {
  const key = `${device}:${vocab}`;
  let r = ranks.get(key);
  if (!r || r.isDisposed) { r = nbx.keep(nbx.arange(0, vocab, { dtype: 'int64', device }).unsqueeze(0)); ranks.set(key, r); }
  return r;
}

/**
 * How much of the sampler a batch needs, from its rows' settings (the host knows them): 'greedy' when every
 * row is greedy (an argmax), 'unsorted' when no row cuts by top-k or top-p (the draw needs no order: the
 * inverse CDF over the vocabulary in index order samples the same distribution), else 'sorted'.
 * A greedy row's token is the same in every mode, but a sampled row's token for a given draw differs
 * between 'unsorted' and 'sorted' (another order of the vocabulary): rows from different requests, whose
 * tokens must not depend on each other, use 'greedy' or 'sorted' only.
 */
export type SamplingMode = 'greedy' | 'unsorted' | 'sorted';
export function samplingModeOf(rows: readonly (RowSampling | undefined)[]): SamplingMode {
  let mode: SamplingMode = 'greedy';
  for (const r of rows) {
    if (!r || r.temperature <= 0) continue;
    if (r.top_k > 0 || r.top_p < 1) return 'sorted';
    mode = 'unsorted';
  }
  return mode;
}

/**
 * argmax(x, -1) of rows [B, V] (the first index of the maximum; NaN counts as the maximum), in two
 * stages off the CPU: the maximum and its index in each of S slices of a row (B·S blocks), then the
 * first slice holding the row's maximum. The reduction kernels give a row one block, which for a
 * vocabulary row is one SM reading up to 0.5 MB (tens of µs of a decode step); the CPU's argmax is
 * already a single pass.
 */
export function argmaxRows(x: Tensor, slices?: number): Tensor {
  const [B, V] = x.shape as [number, number];
  const S = slices ?? (x.device.type === 'cpu' ? 1 : argmaxSlices(V));
  if (S <= 1 || V % S !== 0) return nbx.argmax(x, -1);
  return nbx.scope(() => {
    const { values, indices } = x.view([B, S, V / S]).max(-1) as unknown as { values: Tensor; indices: Tensor };
    const slice = nbx.argmax(values, -1, true); // [B, 1]
    return indices.gather(1, slice).add(slice.mul(V / S)).squeeze(1);
  });
}

/** Slices for argmaxRows: the most (≤ 64) that divide V into slices of ≥ 512 elements; 1 = one pass. */
function argmaxSlices(V: number): number {
  for (let s = Math.min(64, Math.floor(V / 512)); s > 1; s--) if (V % s === 0) return s;
  return 1;
}

/**
 * The next token of each row of `logits` [B, V] (any float dtype): int64 [B] on the logits' device.
 * `mode` (samplingModeOf the rows' settings) skips the sort, or everything but the argmax, where no row
 * needs them; 'sorted' is right for every batch.
 */
export function sampleRows(logits: Tensor, p: RowSamplingTensors, mode: SamplingMode = 'sorted'): Tensor {
  const [B, V] = logits.shape as [number, number];
  const rank = rankRow(V, logits.device);
  return nbx.scope(() => {
    let s = logits.to('float32');
    if (p.penalty && p.seen) {
      // RepetitionPenaltyLogitsProcessor on the tokens seen so far, before every warper (and the argmax)
      const pen = p.penalty.unsqueeze(1);
      s = nbx.where(p.seen, nbx.where(s.lt(0), s.mul(pen), s.div(pen)), s) as Tensor;
    }
    const greedy = argmaxRows(s);
    if (mode === 'greedy') return greedy;
    if (mode === 'unsorted') {
      const sampling = p.temperature.gt(0);
      const t = (nbx.where(sampling, p.temperature, nbx.ones([B], { device: s.device })) as Tensor).unsqueeze(1);
      const probs = nbx.softmax(s.div(t), -1);
      const keep = probs.ge(probs.amax(-1, true).mul(p.minP.unsqueeze(1)));
      const kept = nbx.where(keep, probs, nbx.zeros([], { device: s.device })) as Tensor;
      const keptCum = nbx.cumsum(kept, -1);
      const target = keptCum.narrow(1, V - 1, 1).mul(p.uniform.unsqueeze(1));
      // the first kept index whose cumulative mass exceeds the target (an unkept index adds no mass, so the
      // count of positions at or below the target lands on a kept one); never past the last kept index
      const below = keptCum.le(target).sum(-1, { keepdim: true });
      const lastKept = (nbx.where(keep, rank, nbx.zeros([], { dtype: 'int64', device: s.device })) as Tensor).amax(-1, true);
      const drawn = nbx.minimum(below, lastKept).squeeze(1);
      return nbx.where(sampling, drawn, greedy) as Tensor;
    }
    const sampling = p.temperature.gt(0);
    const t = (nbx.where(sampling, p.temperature, nbx.ones([B], { device: s.device })) as Tensor).unsqueeze(1);
    // stable: ties (common in bfloat16 logits) in index order, without the CUDA sort's exact replay of an unstable sort
    const { values, indices } = nbx.sort(s.div(t), { dim: -1, descending: true, stable: true });
    const probs = nbx.softmax(values, -1);
    const cum = nbx.cumsum(probs, -1);
    const k = (nbx.where(p.topK.gt(0), p.topK, nbx.full([B], V, { dtype: "int64", device: s.device })) as Tensor).unsqueeze(1);
    let keep = rank.lt(k);
    keep = keep.logical_and(cum.sub(probs).lt(p.topP.unsqueeze(1)));
    keep = keep.logical_and(probs.ge(probs.narrow(1, 0, 1).mul(p.minP.unsqueeze(1))));
    const kept = nbx.where(keep, probs, nbx.zeros([], { device: s.device })) as Tensor;
    const keptCum = nbx.cumsum(kept, -1);
    const target = keptCum.narrow(1, V - 1, 1).mul(p.uniform.unsqueeze(1));
    // the first position whose cumulative mass exceeds the target; never past the last kept token
    const below = keptCum.le(target).sum(-1, { keepdim: true });
    const last = keep.sum(-1, { keepdim: true }).sub(1);
    const at = nbx.minimum(below, last);
    const drawn = nbx.gather(indices, 1, at).squeeze(1);
    return nbx.where(sampling, drawn, greedy) as Tensor;
  });
}

/**
 * Row settings and draws kept on the device in one float32 buffer [6, B] (temperature, top_k, top_p,
 * min_p, uniform, repetition penalty), written by one host-to-device copy per step: the inputs a captured
 * step reads. With `vocab`, also the tokens each row has seen (bool [B, vocab]) for the repetition
 * penalty: set from the prompt by setSeen(), marked by markSeen() with each step's input ids.
 */
export class RowSamplingState {
  private readonly packed: Tensor;
  private readonly host: Float32Array;
  readonly tensors: RowSamplingTensors;
  private readonly marks: Tensor | null;

  constructor(readonly batch: number, device: Device, readonly vocab?: number) {
    this.packed = nbx.keep(nbx.zeros([6, batch], { dtype: 'float32', device }));
    this.host = new Float32Array(6 * batch);
    const row = (i: number): Tensor => nbx.keep(this.packed.select(0, i));
    // top_k as int64, converted from its packed row at each write()
    this.tensors = { temperature: row(0), topK: nbx.keep(nbx.zeros([batch], { dtype: 'int64', device })), topP: row(2), minP: row(3), uniform: row(4) };
    if (vocab !== undefined) {
      this.tensors.penalty = row(5);
      this.tensors.seen = nbx.keep(nbx.zeros([batch, vocab], { dtype: 'bool', device }));
    }
    this.marks = vocab !== undefined ? nbx.keep(nbx.ones([batch, 1], { dtype: 'bool', device })) : null;
  }

  /** The tokens each row has seen: its prompt, padding included (as transformers' input_ids). */
  setSeen(rows: readonly (readonly number[])[]): void {
    const seen = this.tensors.seen;
    if (!seen) return;
    const V = this.vocab!, host = new Uint8Array(this.batch * V);
    rows.forEach((r, b) => { for (const id of r) if (id >= 0 && id < V) host[b * V + id] = 1; });
    seen.copy_(nbx.Tensor.fromStorage(host, 'bool', [this.batch, V]));
  }

  /** Marks `ids` [B, 1] (a step's input tokens) as seen, on the device (recorded in a captured step). */
  markSeen(ids: Tensor): void {
    if (this.tensors.seen) this.tensors.seen.scatter_(1, ids, this.marks!);
  }

  /** Sets every row's settings and draw (rows past `rows.length` are greedy). */
  write(rows: readonly RowSampling[], uniforms: readonly number[]): void {
    const B = this.batch, h = this.host;
    for (let b = 0; b < B; b++) {
      const r = rows[b];
      h[b] = r ? r.temperature : 0;
      h[B + b] = r ? r.top_k : 0;
      h[2 * B + b] = r ? r.top_p : 1;
      h[3 * B + b] = r ? r.min_p : 0;
      h[4 * B + b] = uniforms[b] ?? 0;
      h[5 * B + b] = r?.repetition_penalty ?? 1;
    }
    this.packed.copy_(nbx.Tensor.fromStorage(h, 'float32', [6, B]));
    this.tensors.topK.copy_(this.packed.select(0, 1));
  }

  dispose(): void {
    for (const t of Object.values(this.tensors)) t.dispose();
    this.marks?.dispose();
    this.packed.dispose();
  }
}
