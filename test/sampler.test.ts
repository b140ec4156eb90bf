// The device sampler (src/generation/sampler.ts): per-row greedy / temperature / top-k / top-p / min-p by
// inverse-CDF draws, with fixed shapes and no host reads (so a CUDA graph or CPU recording replays it).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import * as nbx from '../src/index.js';
import { argmaxRows, sampleRows, samplingModeOf, RowSamplingState, type RowSampling } from '../src/generation/sampler.js';
import { StaticDecoder } from '../src/models/static_decode.js';
import type { CausalLMModel } from '../src/models/causal_lm.js';

const cpu = nbx.Device.of('cpu');
const MODELS = join(dirname(fileURLToPath(import.meta.url)), '../../test/fixtures/models');

function draw(logits: number[][], rows: RowSampling[], uniforms: number[]): number[] {
  const st = new RowSamplingState(rows.length, cpu);
  try {
    st.write(rows, uniforms);
    const l = nbx.tensor(logits, { dtype: 'float32' });
    return Array.from(sampleRows(l, st.tensors).dataSync() as BigInt64Array, Number);
  } finally { st.dispose(); }
}

test('sampler: greedy rows take the argmax; the draw picks by cumulative mass of the kept tokens', () => {
  const plain = { temperature: 1, top_k: 0, top_p: 1, min_p: 0 };
  const logits = [[0, 1, 2, 3], [Math.log(1), Math.log(2), Math.log(3), Math.log(4)]];
  assert.deepEqual(draw(logits, [{ ...plain, temperature: 0 }, { ...plain, temperature: 0 }], [0.5, 0.5]), [3, 3]);
  // row 2's probabilities 0.1 0.2 0.3 0.4, sorted descending: 3 (0.4), 2 (0.3), 1 (0.2), 0 (0.1)
  const row2 = (u: number, s: Partial<RowSampling> = {}): number => draw([logits[1]!], [{ ...plain, ...s }], [u])[0]!;
  assert.deepEqual([0.0, 0.39, 0.41, 0.69, 0.71, 0.89, 0.91, 0.999].map((u) => row2(u)), [3, 3, 2, 2, 1, 1, 0, 0]);
  // top_k 2 keeps 3 and 2: mass 0.7, split 4/7 : 3/7
  assert.deepEqual([0.5, 0.58].map((u) => row2(u, { top_k: 2 })), [3, 2]);
  // top_p 0.5: 3 (mass before 0) and 2 (mass before 0.4 < 0.5) kept, 1 (0.7) not
  assert.deepEqual([0.5, 0.99].map((u) => row2(u, { top_p: 0.5 })), [3, 2]);
  // min_p 0.6: probability ≥ 0.24 kept: 3 and 2
  assert.deepEqual([0.99].map((u) => row2(u, { min_p: 0.6 })), [2]);
  // temperature → 0.01 sharpens to the argmax
  assert.equal(row2(0.99, { temperature: 0.01 }), 3);
});

test('argmaxRows in slices = argmax: first index of the maximum, ties across slices, NaN, every device', () => {
  const devices = ['cpu', ...(nbx.cuda.is_available() ? ['cuda'] : [])];
  for (const device of devices) {
    const x = nbx.randn([3, 4096], { generator: nbx.manual_seed(3) }).to(device);
    x.select(0, 1).fill_(1); // all equal: index 0
    x.select(0, 2).index_fill_(0, nbx.tensor([100, 3000], { dtype: 'int64', device }), 50); // tie in two slices: the first
    for (const S of [1, 8, 64]) assert.deepEqual(argmaxRows(x, S).tolist(), nbx.argmax(x, -1).tolist(), `${device} S=${S}`);
    const y = nbx.zeros([1, 4096], { device }).index_fill_(1, nbx.tensor([2500, 900], { dtype: 'int64', device }), NaN);
    assert.deepEqual(argmaxRows(y, 8).tolist(), nbx.argmax(y, -1).tolist(), `${device} NaN`);
  }
});

test('sampler: a row\'s draw does not depend on the other rows of the batch', () => {
  const g = nbx.manual_seed(7);
  void g;
  const logits = nbx.randn([5, 50]).mul(3).tolist() as number[][];
  const rows: RowSampling[] = [
    { temperature: 0.7, top_k: 10, top_p: 0.9, min_p: 0 }, { temperature: 0, top_k: 0, top_p: 1, min_p: 0 },
    { temperature: 1.3, top_k: 0, top_p: 0.5, min_p: 0.05 }, { temperature: 1, top_k: 3, top_p: 1, min_p: 0 },
    { temperature: 0.9, top_k: 0, top_p: 1, min_p: 0.2 },
  ];
  const u = [0.13, 0.5, 0.77, 0.99, 0.01];
  const together = draw(logits, rows, u);
  const alone = rows.map((r, i) => draw([logits[i]!], [r], [u[i]!])[0]);
  assert.deepEqual(together, alone);
});

test('a sampling static decoder draws in its recorded step what sampleRows draws from the step\'s logits', async () => {
  const model = await nbx.models.load(join(MODELS, 'llama'), { device: 'cpu', dtype: 'float32' }) as unknown as CausalLMModel;
  const dec = new StaticDecoder(model, 2, 64, false, true);
  try {
    const prompt = nbx.tensor([[3, 5, 7, 9], [2, 4, 6, 8]]);
    dec.begin(null, 4);
    model.forward(prompt, { cache: dec.cache, logits_to_keep: 1 }).dispose();
    const rows: RowSampling[] = [{ temperature: 0.8, top_k: 20, top_p: 0.9, min_p: 0 }, { temperature: 0, top_k: 0, top_p: 1, min_p: 0 }];
    let tok = [9, 8];
    for (let s = 0; s < 5; s++) {
      const u = [((s * 37) % 100) / 100, 0.5];
      const r = dec.step(tok, [4 + s, 4 + s], { rows, uniforms: u });
      const ids = Array.from(r.next!.dataSync() as BigInt64Array, Number);
      const st = new RowSamplingState(2, cpu);
      st.write(rows, u);
      const expect = Array.from(sampleRows(r.logits.view([2, -1]), st.tensors).dataSync() as BigInt64Array, Number);
      st.dispose();
      assert.deepEqual(ids, expect, `step ${s}`);
      assert.equal(ids[1], Array.from(nbx.argmax(r.logits.view([2, -1]), -1).dataSync() as BigInt64Array, Number)[1]);
      tok = ids;
    }
    assert.ok(dec.stats().captured, 'the CPU step was recorded');
  } finally { dec.dispose(); model.dispose(); }
});

test('sampler: the repetition penalty divides positive and multiplies negative scores of seen tokens, before the argmax', () => {
  const st = new RowSamplingState(2, cpu, 4);
  try {
    const greedy = { temperature: 0, top_k: 0, top_p: 1, min_p: 0, repetition_penalty: 2 };
    st.write([greedy, greedy], [0, 0]);
    st.setSeen([[3], [0, 1]]);
    // row 0: 3 → 1.5 < 2; row 1: 0 → -8 (×2), 1 → 2.5 (/2), 2 stays 2.4
    const l = nbx.tensor([[0, 1, 2, 3], [-4, 5, 2.4, -9]], { dtype: 'float32' });
    assert.deepEqual(Array.from(sampleRows(l, st.tensors).dataSync() as BigInt64Array, Number), [2, 1]);
    // a step marks its input ids: row 0 now has seen {3, 2} (0 1 1 1.5), row 1 {0, 1, 2} (-8 2.5 1.2 -18)
    st.markSeen(nbx.tensor([[2], [2]]));
    assert.deepEqual(Array.from(sampleRows(l, st.tensors).dataSync() as BigInt64Array, Number), [3, 1]);
    // setSeen starts over: row 1 has seen nothing (its 5 wins again)
    st.setSeen([[0], []]);
    assert.deepEqual(Array.from(sampleRows(l, st.tensors).dataSync() as BigInt64Array, Number), [3, 1]);
  } finally { st.dispose(); }
});

test('generate() with a repetition penalty: a sampling static decoder (penalty applied on the device) gives the host path\'s greedy ids', async () => {
  const { generate } = await import('../src/generation/index.js');
  const model = await nbx.models.load(join(MODELS, 'llama'), { device: 'cpu', dtype: 'float32' }) as unknown as CausalLMModel;
  const prompt = [[3, 5, 7, 9, 3, 5], [2, 4, 6, 8, 2, 4]];
  try {
    const host = (await generate(model, nbx.tensor(prompt), { max_new_tokens: 10, do_sample: false, repetition_penalty: 1.8, eos_token_id: null })).tolist() as number[][];
    // the same steps through a decoder that chooses on the device (what CUDA runs)
    const dec = new StaticDecoder(model, 2, 64, false, true);
    const rows = prompt.map((r) => r.slice());
    try {
      dec.begin(null, 6, rows);
      const first = model.forward(nbx.tensor(prompt), { cache: dec.cache, logits_to_keep: 1 });
      const firstIds = host.map((r) => r[6]!);
      first.dispose();
      let tok = firstIds;
      rows.forEach((r, b) => r.push(tok[b]!));
      const penal = { temperature: 0, top_k: 0, top_p: 1, min_p: 0, repetition_penalty: 1.8 };
      for (let s = 0; s < 9; s++) {
        const r = dec.step(tok, [6 + s, 6 + s], { rows: [penal, penal], uniforms: [0, 0] });
        tok = Array.from(r.next!.dataSync() as BigInt64Array, Number);
        rows.forEach((row, b) => row.push(tok[b]!));
      }
    } finally { dec.dispose(); }
    assert.deepEqual(rows, host);
  } finally { model.dispose(); }
});

test('sampler modes: greedy rows agree in every mode; unsorted sampling draws the same distribution as sorted', () => {
  const logits = [[0, 1, 2, 3], [Math.log(1), Math.log(2), Math.log(3), Math.log(4)]];
  const rows: RowSampling[] = [{ temperature: 0, top_k: 0, top_p: 1, min_p: 0 }, { temperature: 1, top_k: 0, top_p: 1, min_p: 0 }];
  const st = new RowSamplingState(2, cpu);
  try {
    const l = nbx.tensor(logits, { dtype: 'float32' });
    const counts = [0, 0, 0, 0];
    for (let i = 0; i < 1000; i++) {
      st.write(rows, [0.5, (i + 0.5) / 1000]);
      const u = Array.from(sampleRows(l, st.tensors, 'unsorted').dataSync() as BigInt64Array, Number);
      const g = Array.from(sampleRows(l, st.tensors, 'greedy').dataSync() as BigInt64Array, Number);
      assert.equal(u[0], 3); assert.equal(g[0], 3);
      counts[u[1]!]!++;
    }
    // probabilities 0.1 0.2 0.3 0.4 over evenly spread draws
    assert.deepEqual(counts, [100, 200, 300, 400]);
    // min_p 0.6 keeps 2 and 3 (3/7, 4/7)
    const kept = [0, 0, 0, 0];
    for (let i = 0; i < 700; i++) {
      st.write([rows[0]!, { ...rows[1]!, min_p: 0.6 }], [0.5, (i + 0.5) / 700]);
      kept[Number((sampleRows(l, st.tensors, 'unsorted').dataSync() as BigInt64Array)[1])]!++;
    }
    assert.deepEqual(kept, [0, 0, 300, 400]);
  } finally { st.dispose(); }
  assert.equal(samplingModeOf(rows), 'unsorted');
  assert.equal(samplingModeOf([rows[0]!]), 'greedy');
  assert.equal(samplingModeOf([rows[0]!, { ...rows[1]!, top_p: 0.9 }]), 'sorted');
});
