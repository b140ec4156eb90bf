// bench decode's WebGPU loop: greedy decoding with each step queued before the previous step's ids are
// read (src/models/static_decode.ts, StaticDecoder.stepFromDevice): step n + 1 takes its input ids from
// step n's argmax on the device, so the host's wait for step n's ids (a WebGPU readback is a submit
// and a map, ~0.7 ms on the H200 with Dawn/Vulkan) overlaps step n + 1 on the GPU instead of leaving
// it idle. Every step's ids still come back to the host, in order, PIPELINE_DEPTH steps behind (what a streaming
// generate needs); the tokens are compared with generate()'s in the bench, so the loop is the same
// computation. generate() itself reads each step's ids before queuing the next (src/generation/index.ts).

import * as nbx from '../src/index.js';
import type { CausalLMModel } from '../src/models/index.js';
import type { Tensor } from '../src/tensor/tensor.js';
import { syncDevice } from './roofline.js';

const OP = 'bench decode';
/**
 * Steps queued ahead of the one whose ids are awaited (NBX_BENCH_PIPELINE_DEPTH, default 2): one hides a
 * readback shorter than a step; two also absorb a late map callback (Dawn delivers them from its event
 * polling) without leaving the GPU idle.
 */
const PIPELINE_DEPTH = Math.max(1, Number(process.env.NBX_BENCH_PIPELINE_DEPTH ?? 2) || 2);
const now = (): number => performance.now();

export interface PipelinedFigures { ttft_ms: number; decode_tok_s: number; decode_ms_per_step: number; new_tokens: number; tokens: number[][]; graph_nodes: number }

async function idsOf(t: Tensor): Promise<number[]> { return Array.from(await t.dataStorage() as BigInt64Array, Number); }

/**
 * One greedy generation of `newTokens` tokens per row after `rows` (no padding), the decode steps queued
 * one ahead of the host. Timing as bench decode's timeDecode: TTFT from a synchronized device to the
 * first token on the host; decode from then to the last token on the host and the device synchronized.
 */
export async function timeDecodePipelined(model: CausalLMModel, rows: number[][], newTokens: number, device: string, depth = PIPELINE_DEPTH): Promise<PipelinedFigures> {
  const B = rows.length, P = rows[0]!.length;
  const fast = model.staticDecoder({ batch: B, maxLength: P + newTokens, greedy: true });
  if (!fast) throw new nbx.ValueError(OP, `no static decoder on ${device} (NBX_WEBGPU_REPLAY=0, or a position-dependent RoPE)`);
  const tokens: number[][] = rows.map(() => []);
  const push = (ids: number[]): void => ids.forEach((t, b) => tokens[b]!.push(t));
  fast.begin(null, P, rows);
  try {
    await syncDevice(device);
    const t0 = now();
    const feed = nbx.tensor(rows, { dtype: 'int64' }).to(device);
    const logits = model.forward(feed, { attention_mask: null, cache: fast.cache, logits_to_keep: 1 });
    feed.dispose();
    const firstIds = nbx.scope(() => nbx.argmax(logits.view([B, logits.shape[2]!]), -1));
    logits.dispose();
    const first = await idsOf(firstIds);
    firstIds.dispose();
    const tFirst = now();
    push(first);
    const pending: Promise<number[]>[] = [];
    if (newTokens > 1) {
      const r = fast.step(first, new Array<number>(B).fill(P));
      pending.push(idsOf(r.next!));
    }
    for (let n = 3; n <= newTokens; n++) {
      const r = fast.stepFromDevice();
      pending.push(idsOf(r.next!));
      if (pending.length > depth) { push(await pending.shift()!); fast.checkErrors(); }
    }
    while (pending.length) push(await pending.shift()!);
    fast.checkErrors();
    await syncDevice(device);
    const end = now();
    const steps = newTokens - 1;
    return {
      ttft_ms: tFirst - t0, new_tokens: newTokens, tokens, graph_nodes: fast.stats().nodes,
      decode_tok_s: steps > 0 ? (B * steps) / ((end - tFirst) / 1000) : NaN,
      decode_ms_per_step: steps > 0 ? (end - tFirst) / steps : NaN,
    };
  } finally { fast.release(); }
}

export interface StepProfile {
  /** ms per step, `reps` steps queued back to back (each fed from the previous on the device), closed by one wait: no readback per step. */
  back_to_back_ms: number;
  /** ms of host time per step to queue them (recording and encoding, before the wait). */
  host_ms: number;
  /** GPU ms per step between timestamps around the same kind of run (null without timestamp queries). */
  gpu_ms: number | null;
  /** ms per step reading every step's ids before queuing the next (generate()'s loop, on the replayed step). */
  serial_ms: number;
  reps: number;
  /** GPU µs per recorded dispatch (each in a pass of its own), summed by kernel (program key up to its first '|' fields), largest first. */
  kernels: [string, number, number][];
  /** The slowest single dispatches: [key and grid, µs]. */
  slowest: [string, number][];
  dispatch_us_total: number;
}

/**
 * Where a WebGPU decode step's time goes (after a timed generation, so the decoder is captured): steps
 * queued back to back without reads (GPU or host bound), the host's share, GPU time from timestamps, and
 * steps each read before the next (what a readback round trip adds).
 */
export async function profileWebGPUSteps(model: CausalLMModel, rows: number[][], reps: number): Promise<StepProfile> {
  const B = rows.length, P = rows[0]!.length;
  const fast = model.staticDecoder({ batch: B, maxLength: P + 3 * reps + 8, greedy: true });
  if (!fast) throw new nbx.ValueError(OP, 'no static decoder on webgpu');
  fast.begin(null, P, rows);
  const be = nbx.webgpu.backend();
  try {
    // the prompt's cache contents do not matter for timing: steps at positions P, P + 1, ...
    let r = fast.step(rows.map((row) => row[P - 1]!), new Array<number>(B).fill(P));
    for (let i = 0; i < 3; i++) r = fast.stepFromDevice(); // captured, then replayed
    await idsOf(r.next!);
    await be.idle();
    let t = now();
    for (let i = 0; i < reps; i++) fast.stepFromDevice();
    const host = now() - t;
    await be.flush();
    const hostAll = now() - t;
    await be.idle();
    const backToBack = (now() - t) / reps;
    let gpu: number | null = null;
    if (be.device.features.has('timestamp-query')) {
      const set = be.device.createQuerySet({ type: 'timestamp', count: 2 });
      const resolve = be.device.createBuffer({ size: 16, usage: 0x0200 | 0x0004 });
      const read = be.device.createBuffer({ size: 16, usage: 0x0001 | 0x0008 });
      be.timestamp(set, 0);
      for (let i = 0; i < reps; i++) fast.stepFromDevice();
      be.timestamp(set, 1, resolve, read);
      await be.idle();
      await read.mapAsync(1);
      const ts = new BigInt64Array(read.getMappedRange().slice(0));
      read.unmap(); set.destroy(); resolve.destroy(); read.destroy();
      gpu = Number(ts[1]! - ts[0]!) / 1e6 / reps;
    }
    t = now();
    for (let i = 0; i < reps; i++) { const s = fast.stepFromDevice(); await idsOf(s.next!); }
    const serial = (now() - t) / reps;
    fast.checkErrors();
    const graph = (fast as unknown as { webgpuGraph: { profile(): Promise<[string, number][]> } | null }).webgpuGraph;
    const per = graph && be.device.features.has('timestamp-query') ? await graph.profile() : [];
    const byKernel = new Map<string, [number, number]>();
    for (const [key, us] of per) {
      const k = key.split('|').slice(0, 2).join('|');
      const e = byKernel.get(k) ?? [0, 0];
      byKernel.set(k, [e[0] + us, e[1] + 1]);
    }
    return {
      back_to_back_ms: backToBack, host_ms: Math.max(host, hostAll) / reps, gpu_ms: gpu, serial_ms: serial, reps,
      kernels: [...byKernel].map(([k, [us, n]]) => [k, us, n] as [string, number, number]).sort((a, b) => b[1] - a[1]),
      slowest: [...per].sort((a, b) => b[1] - a[1]).slice(0, 8), dispatch_us_total: per.reduce((a, [, us]) => a + us, 0),
    };
  } finally { fast.release(); }
}
