// `nbx bench decode`: greedy decode speed of random-weight models next to the best PyTorch decode we can
// write and transformers' eager generate, measured in the same run (issue #19's benchmark).
//
// Shapes (config.json dicts, passed as they are to both peers so all three run the same shape):
//   tinyllama  TinyLlama-1.1B: 22 layers, hidden 2048, intermediate 5632, heads 32/4, vocab 32000
//   llama3-8b  Llama-3-8B: 32 layers, 4096, 14336, 32/8, vocab 128256, rope_theta 500000
//   mixtral-4l Mixtral-8x7B's layer shape, 4 layers: 4096, 14336, 32/8, 8 experts top-2, vocab 32000
//   tiny, tiny-moe  2 layers, hidden 64 (Llama / Mixtral): smoke runs on a CPU
// nbx: nbx.models.fromConfig (seeded random weights; bf16 on cuda and webgpu, float32 on the cpu), one warm-up
// generation as long as the timed one, then one timed greedy generation of --new-tokens tokens after a
// --prompt-token prompt of seeded random ids (batch B: B different prompts), EOS ignored. Decode: the
// new_tokens - 1 steps after the first token until the last token is on the host and the device is
// synchronized; decode tok/s = B × (new_tokens - 1) / decode seconds (aggregate over the batch).
// Time to first token (issue #20's target: ≤ the compiled peer's), the same span in nbx and the gpt-fast peer:
// device synchronized, then the prompt's forward (eager in both; logits of the last position only), the greedy
// argmax on the device and the first token read back to the host. nbx's span is generate()'s, so it also holds
// generate()'s own set-up (options, the kept static decoder's begin(), the prompt's upload); the peer's holds
// torch.arange of the positions (its static cache and masks are made once, before). The figure is the median of
// --ttft-samples samples (default 5) in both: the timed generation's first token, then generations stopped at
// their first token (the peer: prefill and first token again). One sample right after the warm-up is not nbx's
// steady state: its prefill is only the second run of the op-by-op host code, which V8 may not have finished
// optimizing. The samples are printed, the timed generation's first. WebGPU's rows, whose figures are the
// pipelined loop's, keep their one sample. nbx's prefill is also timed alone, on a cache of its own: the host
// time until forward() returns with its launches queued (prefill host ms) and until the argmax is on the host
// (prefill ms); where the two are close, the first token waits on the host's launches, not on the GPU.
// --peer-compile off runs the gpt-fast peer's decode step eagerly (its --no-compile): its prefill, so its time to
// first token, is eager either way, and a TTFT run then skips the 40-90 s compile per shape and prompt length.
// max_position_embeddings is 8192 in every shape, so that 4,096-token prompts and their new tokens fit (RoPE
// 'default' does not read it; the peer sizes its static cache to prompt + new tokens).
// Peers (child processes, the same prompt ids): bench/peers/gpt_fast_decode.py (static KV cache,
// decode step under torch.compile mode "reduce-overhead") and bench/peers/hf_generate.py
// (transformers' eager generate). A peer that fails is reported with its error; nbx's figures stay.
//
// Weights streamed per decode step: every parameter once, the embedding table included (the
// convention of issue #19's roofline: 4.3 TB/s ÷ 2.2 GB = 1,954 tok/s for the 1.1B shape); for a
// mixture of experts only the experts a step is expected to route to, E·(1 − (1 − k/E)^B) of E under
// uniform routing (k at batch 1). GB/s = bytes per step × steps / decode seconds. The roofline is
// data, never a device name: --roofline-gbs, else the device's streaming bandwidth measured in this
// run (bench/roofline.ts: a + b over float32 operands, as BENCHMARKS.md measured the H200's 4.3 TB/s), with the
// driver's nominal peak next to it on cuda. Issue #19's targets are printed next to the figures, not
// asserted.
//
// Run: node dist/bench/decode.js [--shape tinyllama|llama3-8b|mixtral-4l|tiny|tiny-moe|all[,...]]
//        [--batch 1,8] [--prompt 128] [--new-tokens 256] [--device cuda|webgpu|cpu] [--dtype D]
//        [--peers gpt-fast,hf|none] [--python PATH] [--json FILE] [--roofline-gbs N] [--warmup-tokens N]
//        [--ttft-samples N] [--peer-compile on|off] [--webgpu-profile] (WebGPU: where a step's time goes, bench/decode_webgpu.ts)
//   (or `nbx bench decode ...`). Defaults: --device cpu; --shape all on a GPU, tiny,tiny-moe on cpu.

import { execFile } from 'node:child_process';
import { PerformanceObserver } from 'node:perf_hooks';
import { writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { parseArgs } from 'node:util';
import * as nbx from '../src/index.js';
import { generateSteps, type PreparedPrompt } from '../src/generation/index.js';
import type { CausalLMModel } from '../src/models/index.js';
import type { DTypeLike } from '../src/dtype/dtypes.js';
import { measureStreamGBs, syncDevice } from './roofline.js';
import { gcPressureStats } from '../src/memory/gc_pressure.js';
import { profileWebGPUSteps, timeDecodePipelined } from './decode_webgpu.js';

const PEERS = join(dirname(fileURLToPath(import.meta.url)), '../../bench/peers');
const OP = 'bench decode';

interface Shape {
  title: string;
  config: Record<string, unknown>;
  /** Issue #19's decode targets, aggregate tok/s by batch size. */
  targets?: Record<number, number>;
  /** Target for batch B > 1: this many times the batch-1 figure of the same run. */
  batchScale?: number;
  /** Target: at least compiled PyTorch's figure (gpt-fast-style peer) on the same shape and batch. */
  beatCompiled?: boolean;
}

const COMMON = {
  max_position_embeddings: 8192, rms_norm_eps: 1e-5, bos_token_id: 1, eos_token_id: 2, pad_token_id: 0,
  tie_word_embeddings: false, hidden_act: 'silu',
};
const llama = (dims: Record<string, unknown>): Record<string, unknown> => ({ model_type: 'llama', architectures: ['LlamaForCausalLM'], ...dims, ...COMMON });
const mixtral = (dims: Record<string, unknown>): Record<string, unknown> =>
  ({ model_type: 'mixtral', architectures: ['MixtralForCausalLM'], ...dims, ...COMMON, sliding_window: null });

const SHAPES: Record<string, Shape> = {
  tinyllama: {
    title: 'TinyLlama-1.1B (22 layers, d 2048, GQA 32/4)',
    config: llama({ num_hidden_layers: 22, hidden_size: 2048, intermediate_size: 5632, num_attention_heads: 32, num_key_value_heads: 4, vocab_size: 32000, rope_theta: 10000.0 }),
    targets: { 1: 1200 }, batchScale: 6,
  },
  'llama3-8b': {
    title: 'Llama-3-8B (32 layers, d 4096, GQA 32/8)',
    config: llama({ num_hidden_layers: 32, hidden_size: 4096, intermediate_size: 14336, num_attention_heads: 32, num_key_value_heads: 8, vocab_size: 128256, rope_theta: 500000.0 }),
    targets: { 1: 215 }, batchScale: 6,
  },
  'mixtral-4l': {
    title: 'Mixtral-8x7B layers ×4 (d 4096, 8 experts top-2)',
    config: mixtral({ num_hidden_layers: 4, hidden_size: 4096, intermediate_size: 14336, num_attention_heads: 32, num_key_value_heads: 8, vocab_size: 32000, rope_theta: 1e6, num_local_experts: 8, num_experts_per_tok: 2 }),
    beatCompiled: true,
  },
  tiny: {
    title: 'tiny Llama (2 layers, d 64, GQA 4/2)',
    config: llama({ num_hidden_layers: 2, hidden_size: 64, intermediate_size: 128, num_attention_heads: 4, num_key_value_heads: 2, vocab_size: 1000, rope_theta: 10000.0 }),
  },
  'tiny-moe': {
    title: 'tiny Mixtral (2 layers, d 64, 4 experts top-2)',
    config: mixtral({ num_hidden_layers: 2, hidden_size: 64, intermediate_size: 128, num_attention_heads: 4, num_key_value_heads: 2, vocab_size: 1000, rope_theta: 1e6, num_local_experts: 4, num_experts_per_tok: 2 }),
  },
};
const ISSUE_SHAPES = ['tinyllama', 'llama3-8b', 'mixtral-4l'];
const PEER_NAMES = ['gpt-fast', 'hf'] as const;
type PeerName = (typeof PEER_NAMES)[number];
const PEER_TITLES: Record<PeerName, string> = { 'gpt-fast': 'gpt-fast (compiled)', hf: 'transformers eager' };

interface NbxFigures {
  /** Median of ttft_samples_ms (see the header). */
  ttft_ms: number; decode_tok_s: number; decode_ms_per_step: number; new_tokens: number;
  /** The timed generation's first token, then generations stopped at their first token. */
  ttft_samples_ms?: number[];
  /** The prompt's forward alone (median): host time to queue it, and until its argmax is on the host. */
  prefill_host_ms?: number; prefill_ms?: number;
  /** V8's garbage collection during the TTFT samples after the timed generation's, and the collections the device allocator forced. */
  ttft_gc_ms?: number; ttft_forced_gcs?: number;
  /** WebGPU: the figures of generate() itself, when the row's figures are the pipelined loop's (bench/decode_webgpu.ts). */
  generate?: { ttft_ms: number; decode_tok_s: number; decode_ms_per_step: number };
  /** How the replayed steps ran: 'fused' (nbx.llm.fused_decode_step's kernel) or 'ops' (op by op). */
  step?: 'fused' | 'ops';
}
interface PeerLine { decode_tok_s?: number; ttft_ms?: number; compile_s?: number | null; note?: string | null; error?: string; [k: string]: unknown }
interface Row {
  shape: string; batch: number; nbx: NbxFigures | { error: string };
  weight_bytes_per_step: number; nbx_weight_gbs?: number; roofline_pct?: number; roofline_tok_s?: number;
  peers: Partial<Record<PeerName, PeerLine>>;
  target?: { tok_s: number; why: string };
}

const now = (): number => performance.now();

const sync = syncDevice;

/** One greedy generation of exactly `newTokens` tokens per row; times the first token and the rest. */
async function timeDecode(model: CausalLMModel, rows: number[][], newTokens: number, device: string, tokens?: number[][]): Promise<NbxFigures> {
  const prepared: PreparedPrompt = { rows: rows.map((r) => r.slice()), mask: null, length: rows[0]!.length };
  await sync(device);
  const t0 = now();
  let first = 0, n = 0;
  // each step's ids are read back to the host before it is yielded: a step is done when it is seen
  for await (const s of generateSteps(model, prepared, { max_new_tokens: newTokens, eos_token_id: null, do_sample: false })) {
    if (n === 0) first = now();
    if (tokens) s.tokens.forEach((t, b) => (tokens[b] ??= []).push(t));
    n++;
  }
  await sync(device);
  const end = now();
  if (n !== newTokens) throw new nbx.ValueError(OP, `generation stopped after ${n} of ${newTokens} tokens`);
  const steps = n - 1;
  return {
    ttft_ms: first - t0, new_tokens: n,
    decode_tok_s: steps > 0 ? (rows.length * steps) / ((end - first) / 1000) : NaN,
    decode_ms_per_step: steps > 0 ? (end - first) / steps : NaN,
  };
}

const median = (xs: readonly number[]): number => {
  const s = [...xs].sort((a, b) => a - b), m = s.length >> 1;
  return s.length % 2 ? s[m]! : (s[m - 1]! + s[m]!) / 2;
};

/** `n` times to first token of generations stopped there (the span of timeDecode's TTFT). */
async function ttftSamples(model: CausalLMModel, rows: number[][], n: number, newTokens: number, device: string): Promise<number[]> {
  const out: number[] = [];
  for (let i = 0; i < n; i++) {
    const prepared: PreparedPrompt = { rows: rows.map((r) => r.slice()), mask: null, length: rows[0]!.length };
    await sync(device);
    const t0 = now();
    // max_new_tokens as the timed generation's: the same capacity, so the kept static decoder serves it
    for await (const s of generateSteps(model, prepared, { max_new_tokens: newTokens, eos_token_id: null, do_sample: false })) { void s; break; }
    out.push(now() - t0);
  }
  return out;
}

/**
 * The prompt's forward alone, `n` times, on the kept static decoder's cache as generate() runs it (no memory of
 * its own, which would move the allocator's live bytes): the host time until forward() returns (its launches
 * queued) and until the argmax of its last position is on the host (medians).
 */
async function timePrefill(model: CausalLMModel, rows: number[][], n: number, newTokens: number, device: string): Promise<{ host_ms: number; total_ms: number }> {
  const B = rows.length, P = rows[0]!.length;
  const dec = model.staticDecoder({ batch: B, maxLength: P + newTokens, greedy: true });
  const own = dec ? null : model.newCache({ batch: B, maxLength: P });
  const ids = nbx.tensor(rows, { dtype: 'int64', device });
  const host: number[] = [], total: number[] = [];
  try {
    for (let i = 0; i < n; i++) {
      if (dec) dec.begin(null, P); else own!.reset();
      await sync(device);
      const t0 = now();
      const logits = model.forward(ids, { cache: dec ? dec.cache : own!, logits_to_keep: 1 });
      const t1 = now();
      const next = nbx.argmax(logits.view([B, logits.shape[2]!]), -1);
      await next.data();
      total.push(now() - t0); host.push(t1 - t0);
      next.dispose(); logits.dispose();
      dec?.release();
    }
  } finally { ids.dispose(); dec?.release(); own?.dispose(); }
  return { host_ms: median(host), total_ms: median(total) };
}

/** Milliseconds of V8 garbage collection while `fn` runs (PerformanceObserver 'gc' entries). */
async function gcDuring<T>(fn: () => Promise<T>): Promise<{ result: T; gc_ms: number; forced: number }> {
  let ms = 0;
  const obs = new PerformanceObserver((list) => { for (const e of list.getEntries()) ms += e.duration; });
  obs.observe({ entryTypes: ['gc'] });
  const forced0 = gcPressureStats.collections;
  try {
    const result = await fn();
    await new Promise((r) => setImmediate(r)); // the observer's last entries are delivered asynchronously
    return { result, gc_ms: ms, forced: gcPressureStats.collections - forced0 };
  } finally { obs.disconnect(); }
}

/** Weight bytes one decode step streams at batch `batch` (see the header for the convention). */
function bytesPerStep(model: CausalLMModel, batch: number): { total: number; perStep: number } {
  let total = 0, experts = 0;
  for (const [name, p] of model.named_parameters()) {
    const bytes = p.numel() * p.element_size();
    total += bytes;
    if (name.includes('.experts.')) experts += bytes;
  }
  const cfg = model.config as Record<string, unknown>;
  const E = Number(cfg.num_local_experts ?? cfg.num_experts ?? 0), k = Number(cfg.num_experts_per_tok ?? 0);
  const routed = E > 0 && k > 0 ? 1 - (1 - k / E) ** batch : 1;
  return { total, perStep: total - experts + experts * routed };
}

/** The CUDA driver's nominal peak (2 × memory clock × bus width), informative only. */
async function driverPeakGBs(): Promise<number | undefined> {
  try {
    const { probeCuda } = await import('../src/backend/cuda/runtime/libs.js');
    const g = probeCuda().devices?.[0]?.peakBandwidthGBs;
    return g && g > 0 ? g : undefined;
  } catch { return undefined; }
}

function runPeerWith(python: string, args: string[], timeoutMs: number): Promise<PeerLine> {
  return new Promise((resolve) => {
    execFile(python, args, { encoding: 'utf8', maxBuffer: 64 << 20, timeout: timeoutMs }, (err, stdout, stderr) => {
      const line = stdout.trim().split('\n').pop() ?? '';
      if (!err && line.startsWith('{')) { resolve(JSON.parse(line) as PeerLine); return; }
      const e = err as (NodeJS.ErrnoException & { killed?: boolean }) | null;
      const why = e?.code === 'ENOENT' ? `${python} not found`
        : e?.killed ? `timed out after ${timeoutMs / 1000} s`
        : /No module named '?[\w.]+'?/.exec(stderr)?.[0]
          ?? (stderr.trim().split('\n').filter((l) => l.trim()).slice(-3).join(' | ') || e?.message || 'no output');
      resolve({ error: `${python}: ${why}` });
    });
  });
}

/** The first interpreter that runs the peer: PATH's python3 may be a virtualenv without torch while the system's has it. */
async function runPeer(pythons: string[], args: string[], timeoutMs: number): Promise<PeerLine> {
  const errors: string[] = [];
  for (const python of pythons) {
    const r = await runPeerWith(python, args, timeoutMs);
    if (!r.error) return r;
    errors.push(r.error);
    // torch was there and the peer itself failed: the next interpreter would not do better
    if (!/not found|No module named/.test(r.error)) break;
  }
  return { error: errors.join('; ') };
}

function peerArgs(peer: PeerName, config: Record<string, unknown>, rows: number[][], newTokens: number, device: string, dtype: string, ttftN: number, compile: boolean): string[] {
  const common = ['--config', JSON.stringify(config), '--batch', String(rows.length), '--prompt-tokens', String(rows[0]!.length),
    '--new-tokens', String(newTokens), '--prompt-ids', rows.map((r) => r.join(',')).join(';'), '--device', device];
  if (peer === 'gpt-fast') return [join(PEERS, 'gpt_fast_decode.py'), ...common, '--dtype', dtype, '--ttft-samples', String(ttftN), ...(compile ? [] : ['--no-compile'])];
  return [join(PEERS, 'hf_generate.py'), ...common];
}

const fmt = (x: number | undefined | null, digits = 1): string => (x === undefined || x === null || !Number.isFinite(x) ? '-' : x.toFixed(digits));
const pct = (x: number | undefined): string => (x === undefined || !Number.isFinite(x) ? '-' : `${x.toFixed(0)}%`);

function table(rows: Row[], peers: PeerName[]): string {
  const head = ['shape', 'batch', 'nbx tok/s', ...peers.flatMap((p) => [`${PEER_TITLES[p]} tok/s`, `nbx/${p}`]),
    'nbx TTFT ms', ...peers.map((p) => `${p} TTFT ms`), 'nbx GB/s', '% roofline', 'issue #19 target', 'nbx/target'];
  const lines = [`| ${head.join(' | ')} |`, `| --- | ${head.slice(1).map(() => '---:').join(' | ')} |`];
  for (const r of rows) {
    const ours = 'error' in r.nbx ? undefined : r.nbx;
    const cells = [SHAPES[r.shape]!.title, String(r.batch), ours ? fmt(ours.decode_tok_s) : 'failed'];
    for (const p of peers) {
      const t = r.peers[p]?.decode_tok_s;
      cells.push(r.peers[p]?.error ? 'failed' : fmt(t), ours && t ? `${fmt((ours.decode_tok_s / t) * 100, 0)}%` : '-');
    }
    cells.push(fmt(ours?.ttft_ms, 2), ...peers.map((p) => fmt(r.peers[p]?.ttft_ms, 2)));
    cells.push(fmt(r.nbx_weight_gbs, (r.nbx_weight_gbs ?? 0) < 10 ? 2 : 0), pct(r.roofline_pct));
    cells.push(r.target ? `≥ ${fmt(r.target.tok_s, 0)} (${r.target.why})` : '-', ours && r.target ? pct((ours.decode_tok_s / r.target.tok_s) * 100) : '-');
    lines.push(`| ${cells.join(' | ')} |`);
  }
  return lines.join('\n');
}

function list(v: string, what: string): string[] {
  const items = v.split(',').map((s) => s.trim()).filter(Boolean);
  if (!items.length) throw new nbx.ValueError(OP, `${what} is empty`);
  return items;
}

function positiveInt(v: string, what: string): number {
  const n = Number(v);
  if (!Number.isInteger(n) || n <= 0) throw new nbx.ValueError(OP, `${what} must be a positive integer, got '${v}'`);
  return n;
}

export async function run(args: string[] = []): Promise<void> {
  const { values: v } = parseArgs({
    args, allowPositionals: false,
    options: {
      shape: { type: 'string' }, batch: { type: 'string', default: '1,8' }, prompt: { type: 'string', default: '128' },
      'new-tokens': { type: 'string', default: '256' }, 'warmup-tokens': { type: 'string' }, device: { type: 'string', default: 'cpu' },
      dtype: { type: 'string' }, peers: { type: 'string', default: 'gpt-fast,hf' }, python: { type: 'string' },
      json: { type: 'string' }, 'roofline-gbs': { type: 'string' }, seed: { type: 'string', default: '0' },
      'peer-timeout': { type: 'string', default: '900' }, 'webgpu-profile': { type: 'boolean', default: false },
      'ttft-samples': { type: 'string', default: '5' }, 'peer-compile': { type: 'string', default: 'on' },
    },
  });
  const device = v.device!;
  if (!['cpu', 'cuda', 'webgpu'].includes(device)) throw new nbx.ValueError(OP, `--device must be cpu, cuda or webgpu, got '${device}'`);
  const shapeArg = v.shape ?? (device === 'cpu' ? 'tiny,tiny-moe' : 'all');
  const shapes = list(shapeArg, '--shape').flatMap((s) => (s === 'all' ? ISSUE_SHAPES : [s]));
  for (const s of shapes) if (!Object.hasOwn(SHAPES, s)) throw new nbx.ValueError(OP, `unknown shape '${s}' (${Object.keys(SHAPES).join(', ')}, all)`);
  const batches = list(v.batch!, '--batch').map((b) => positiveInt(b, '--batch'));
  const promptTokens = positiveInt(v.prompt!, '--prompt'), newTokens = positiveInt(v['new-tokens']!, '--new-tokens');
  const warmupTokens = v['warmup-tokens'] !== undefined ? positiveInt(v['warmup-tokens'], '--warmup-tokens') : newTokens;
  const ttftN = positiveInt(v['ttft-samples']!, '--ttft-samples');
  if (v['peer-compile'] !== 'on' && v['peer-compile'] !== 'off') throw new nbx.ValueError(OP, `--peer-compile must be on or off, got '${v['peer-compile']}'`);
  const peerCompile = v['peer-compile'] === 'on';
  const seed = Number(v.seed);
  if (!Number.isInteger(seed) || seed < 0) throw new nbx.ValueError(OP, `--seed must be a non-negative integer, got '${v.seed}'`);
  // WebGPU runs bfloat16 as CUDA does (packed two to a 32-bit word, computed in float32 in the kernels:
  // no shader-f16 needed), so both stream the same weight bytes per step
  const dtype = v.dtype ?? (device === 'cpu' ? 'float32' : 'bfloat16');
  const peers = v.peers === 'none' ? [] : list(v.peers!, '--peers').map((p) => {
    if (!(PEER_NAMES as readonly string[]).includes(p)) throw new nbx.ValueError(OP, `unknown peer '${p}' (${PEER_NAMES.join(', ')} or none)`);
    return p as PeerName;
  });
  // PyTorch peers run on the same card: CUDA for a GPU run (WebGPU's figures compare with them there)
  const peerDevice = device === 'cpu' ? 'cpu' : 'cuda';
  const peerDtype = device === 'cpu' ? dtype : 'bfloat16';
  const pythons = v.python ? [v.python] : ['python3', '/usr/bin/python3'];
  const peerTimeoutMs = positiveInt(v['peer-timeout']!, '--peer-timeout') * 1000;

  let roofline: { gbs: number; how: string } | undefined;
  if (v['roofline-gbs'] !== undefined) roofline = { gbs: positiveInt(v['roofline-gbs'], '--roofline-gbs'), how: 'given (--roofline-gbs)' };
  else {
    try { roofline = await measureStreamGBs(device); } catch (e) { process.stdout.write(`roofline: not measured (${(e as Error).message})\n`); }
  }
  const driverPeak = device === 'cuda' ? await driverPeakGBs() : undefined;

  const rows: Row[] = [];
  for (const name of shapes) {
    const shape = SHAPES[name]!;
    const vocab = shape.config.vocab_size as number;
    const prompts = new Map<number, number[][]>();
    for (const b of batches) {
      const g = new nbx.Generator().manual_seed(seed);
      prompts.set(b, nbx.randint(3, vocab, [b, promptTokens], { generator: g }).tolist() as number[][]);
    }
    const t0 = now();
    let model: CausalLMModel | null = null;
    const shapeRows: Row[] = [];
    try {
      model = nbx.models.fromConfig(shape.config, { device, dtype: dtype as DTypeLike, seed });
    } catch (e) {
      // nbx could not build it (memory, dtype): the peers still run and the table says so
      process.stdout.write(`nbx ${name}: model not built (${(e as Error).message})\n`);
      for (const b of batches) shapeRows.push({ shape: name, batch: b, nbx: { error: `model not built: ${(e as Error).message}` }, weight_bytes_per_step: NaN, peers: {} });
    }
    const buildMs = now() - t0;
    if (model) try {
      for (const b of batches) {
        const rowsB = prompts.get(b)!;
        const bytes = bytesPerStep(model, b);
        const row: Row = { shape: name, batch: b, nbx: { error: '' }, weight_bytes_per_step: bytes.perStep, peers: {} };
        try {
          await timeDecode(model, rowsB, warmupTokens, device); // warm-up: kernels compiled and tuned, pools filled
          const genTokens: number[][] = [];
          let ours = await timeDecode(model, rowsB, newTokens, device, genTokens);
          if (device === 'webgpu') {
            // WebGPU: the decode loop that queues each step before reading the previous one's ids (the
            // row's figures), checked to give generate()'s tokens; generate()'s own figures kept beside
            process.stdout.write(`nbx ${name} batch ${b} generate(): ${fmt(ours.decode_tok_s)} tok/s, TTFT ${fmt(ours.ttft_ms, 2)} ms\n`);
            await timeDecodePipelined(model, rowsB, Math.min(warmupTokens, 16), device);
            const p = await timeDecodePipelined(model, rowsB, newTokens, device);
            const same = p.tokens.every((r, i) => r.length === genTokens[i]!.length && r.every((t, j) => t === genTokens[i]![j]));
            if (!same) throw new nbx.ValueError(OP, `the pipelined WebGPU loop gave other tokens than generate(): ${JSON.stringify(p.tokens[0]!.slice(0, 16))} vs ${JSON.stringify(genTokens[0]!.slice(0, 16))}`);
            process.stdout.write(`nbx ${name} batch ${b} pipelined: ${fmt(p.decode_tok_s)} tok/s (${fmt(p.decode_ms_per_step, 3)} ms/step), TTFT ${fmt(p.ttft_ms, 2)} ms; ` +
              `tokens equal generate()'s; step graph ${p.graph_nodes} commands\n`);
            if (v['webgpu-profile']) {
              const pr = await profileWebGPUSteps(model, rowsB, 32);
              process.stdout.write(`nbx ${name} batch ${b} webgpu step profile (${pr.reps} steps): back to back ${fmt(pr.back_to_back_ms, 3)} ms/step, ` +
                `host ${fmt(pr.host_ms, 3)} ms/step, GPU ${fmt(pr.gpu_ms, 3)} ms/step (timestamps), each read before the next ${fmt(pr.serial_ms, 3)} ms/step\n`);
              if (pr.kernels.length) {
                process.stdout.write(`  dispatches timed one pass each: ${fmt(pr.dispatch_us_total / 1000, 3)} ms in all; by kernel (µs, count): ${pr.kernels.map(([k, us, n]) => `${k} ${fmt(us, 0)}/${n}`).join('; ')}\n`);
                process.stdout.write(`  slowest: ${pr.slowest.map(([k, us]) => `${k} ${fmt(us, 1)}`).join('; ')}\n`);
              }
            }
            ours = { ttft_ms: p.ttft_ms, decode_tok_s: p.decode_tok_s, decode_ms_per_step: p.decode_ms_per_step, new_tokens: p.new_tokens,
              generate: { ttft_ms: ours.ttft_ms, decode_tok_s: ours.decode_tok_s, decode_ms_per_step: ours.decode_ms_per_step } };
          }
          if (ttftN > 1 && device !== 'webgpu') { // WebGPU's row is the pipelined loop's, whose TTFT is not generate()'s
            const more = await gcDuring(() => ttftSamples(model!, rowsB, ttftN - 1, newTokens, device));
            ours.ttft_samples_ms = [ours.ttft_ms, ...more.result];
            ours.ttft_ms = median(ours.ttft_samples_ms);
            ours.ttft_gc_ms = more.gc_ms; ours.ttft_forced_gcs = more.forced;
            const pf = await timePrefill(model, rowsB, ttftN, newTokens, device);
            ours.prefill_host_ms = pf.host_ms; ours.prefill_ms = pf.total_ms;
            process.stdout.write(`nbx ${name} batch ${b} TTFT samples ms: ${ours.ttft_samples_ms.map((t) => fmt(t, 2)).join(' ')} ` +
              `(V8 GC in the last ${ttftN - 1}: ${fmt(more.gc_ms, 2)} ms, ${more.forced} forced by the device allocator's pressure valve); ` +
              `prefill alone: host ${fmt(pf.host_ms, 2)} ms to queue, ${fmt(pf.total_ms, 2)} ms to the argmax on the host\n`);
          }
          // the step path the kept decoder of this batch took (auto: timed at its first capture)
          const kept = model.staticDecoderStats().filter((d) => d.batch === b && d.stats.captured).pop();
          if (kept) ours.step = kept.stats.step;
          row.nbx = ours;
          process.stdout.write(`nbx ${name} batch ${b}: ${fmt(ours.decode_tok_s)} tok/s, TTFT ${fmt(ours.ttft_ms, 2)} ms${ours.step ? `, step ${ours.step === 'fused' ? 'whole-step kernel' : 'op by op'}` : ''}\n`);
          row.nbx_weight_gbs = (bytes.perStep * (ours.decode_tok_s / b)) / 1e9;
          if (roofline) {
            row.roofline_pct = (row.nbx_weight_gbs / roofline.gbs) * 100;
            row.roofline_tok_s = ((roofline.gbs * 1e9) / bytes.perStep) * b;
          }
        } catch (e) {
          row.nbx = { error: (e as Error).message };
          process.stdout.write(`nbx ${name} batch ${b}: failed (${(e as Error).message})\n`);
        }
        shapeRows.push(row);
      }
      process.stdout.write(`${shape.title}: ${(bytesPerStep(model, 1).total / 1e9).toFixed(3)} GB of ${dtype} weights, built in ${(buildMs / 1000).toFixed(1)} s\n`);
    } finally {
      model.dispose();
      if (device === 'cuda') nbx.cuda.empty_cache(); // the peers get the memory
    }
    // the peers after nbx, one process per batch size (compiled graphs are per batch size anyway)
    for (const row of shapeRows) {
      for (const p of peers) {
        const t = now();
        row.peers[p] = await runPeer(pythons, peerArgs(p, shape.config, prompts.get(row.batch)!, newTokens, peerDevice, peerDtype, ttftN, peerCompile), peerTimeoutMs);
        row.peers[p]!.wall_s = Math.round((now() - t) / 100) / 10;
        const l = row.peers[p]!;
        process.stdout.write(`${p} ${name} batch ${row.batch}: ${l.error ? 'failed' : `${fmt(l.decode_tok_s)} tok/s, TTFT ${fmt(l.ttft_ms, 2)} ms`} (${l.wall_s} s)\n`);
        if (Array.isArray(l.ttft_samples_ms)) process.stdout.write(`${p} ${name} batch ${row.batch} TTFT samples ms: ${(l.ttft_samples_ms as number[]).map((t) => fmt(t, 2)).join(' ')}\n`);
      }
    }
    // targets: issue #19's figures, batch-B as a multiple of this run's batch 1, MoE against compiled PyTorch
    for (const row of shapeRows) {
      const b1 = shapeRows.find((r) => r.batch === 1)?.nbx;
      if (shape.targets?.[row.batch] !== undefined) row.target = { tok_s: shape.targets[row.batch]!, why: 'issue #19' };
      else if (shape.batchScale && row.batch > 1 && b1 && !('error' in b1)) row.target = { tok_s: shape.batchScale * b1.decode_tok_s, why: `${shape.batchScale}× nbx batch 1` };
      else if (shape.beatCompiled && row.peers['gpt-fast']?.decode_tok_s) row.target = { tok_s: row.peers['gpt-fast'].decode_tok_s, why: 'gpt-fast' };
    }
    rows.push(...shapeRows);
  }

  process.stdout.write(`\n${table(rows, peers)}\n\n`);
  process.stdout.write(`device ${device}, nbx ${dtype}; ${promptTokens}-token prompts (seed ${seed}), ${newTokens} new tokens greedy, EOS ignored; ` +
    `decode tok/s aggregate over the batch; warm-up ${warmupTokens} tokens; TTFT the median of ${ttftN} sample${ttftN > 1 ? 's' : ''}.\n`);
  process.stdout.write(`roofline: ${roofline ? `${fmt(roofline.gbs, 0)} GB/s (${roofline.how})` : 'none'}${driverPeak ? `; driver's nominal peak ${fmt(driverPeak, 0)} GB/s` : ''}; ` +
    'GB/s = weight bytes per step (all weights, MoE: the expected routed experts) × steps / decode time.\n');
  for (const r of rows) {
    if (r.roofline_tok_s) process.stdout.write(`  ${r.shape} batch ${r.batch}: ${(r.weight_bytes_per_step / 1e9).toFixed(3)} GB per step, roofline ${fmt(r.roofline_tok_s, 0)} tok/s\n`);
  }
  for (const r of rows) {
    for (const p of peers) {
      const line = r.peers[p];
      if (!line) continue;
      if (line.error) process.stdout.write(`${p} ${r.shape} batch ${r.batch}: failed (${line.error})\n`);
      else if (p === 'gpt-fast') {
        process.stdout.write(`${p} ${r.shape} batch ${r.batch}: ${line.compile_s === null || line.compile_s === undefined ? 'not compiled' : `compile ${fmt(line.compile_s, 1)} s`}, process ${fmt(line.wall_s as number, 1)} s` +
          `${line.note ? `; ${line.note}` : ''}\n`);
      }
    }
  }
  // issue #20: time to first token at most the compiled peer's (same span, medians of the same number of samples)
  for (const r of rows) {
    const ours = 'error' in r.nbx ? undefined : r.nbx, theirs = r.peers['gpt-fast']?.ttft_ms;
    if (ours && theirs) {
      process.stdout.write(`TTFT ${r.shape} batch ${r.batch} prompt ${promptTokens}: nbx ${fmt(ours.ttft_ms, 2)} ms, gpt-fast ${fmt(theirs, 2)} ms ` +
        `(${fmt((ours.ttft_ms / theirs) * 100, 0)}%): issue #20 target ≤ compiled PyTorch ${ours.ttft_ms <= theirs ? 'met' : 'not met'}` +
        `${peerCompile ? '' : ' (--peer-compile off: the peer\'s decode step eager, its prefill eager either way)'}\n`);
    }
  }
  const info = rows.flatMap((r) => PEER_NAMES.map((p) => r.peers[p])).find((l) => l && !l.error);
  if (info) process.stdout.write(`peers: torch ${info.torch}${info.transformers ? `, transformers ${info.transformers}` : ''}, ${info.device}\n`);
  if (v.json) {
    writeFileSync(v.json, `${JSON.stringify({
      bench: 'decode', date: new Date().toISOString(), device, dtype, prompt_tokens: promptTokens, new_tokens: newTokens, warmup_tokens: warmupTokens, ttft_samples: ttftN, seed,
      roofline_gbs: roofline?.gbs ?? null, roofline_source: roofline?.how ?? null, driver_peak_gbs: driverPeak ?? null, peer_device: peerDevice, rows,
    }, null, 1)}\n`);
    process.stdout.write(`JSON: ${v.json}\n`);
  }
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? '').href) {
  run(process.argv.slice(2)).then(() => process.exit(0), (e: Error) => {
    const msg = e.message.startsWith(`${OP}:`) ? e.message : `${OP}: ${e.message}`; // nbx's errors already name the op
    process.stderr.write(`${process.env.NBX_DEBUG === '1' ? e.stack : msg}\n`);
    process.exit(1);
  });
}
