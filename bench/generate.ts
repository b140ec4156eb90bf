// `nbx bench generate`: decode tokens/s and time to first token of greedy generation, next to a
// PyTorch peer measured in the same run.
//   CPU (default): the embedded model (assets/nbx-kjv, or --model DIR) in float32, against
//     bench/peers/torch_llama_generate.py (Debian's PyTorch) on the same prompt ids and token count;
//     the peer's greedy ids are compared with ours.
//   --device cuda: TinyLlama-1.1B- and Llama-3-8B-shaped models with random bf16 weights
//     (nbx.models.fromConfig), 128 random prompt ids, 256 new tokens, against transformers' eager
//     generate (bench/peers/hf_generate.py), measured the same way as the peer: time to first token is
//     a generate of one token, decode tokens/s the other tokens over the rest of a full generate.
// Both sides: one warm-up generate first, a fixed number of tokens (EOS does not stop them).
// Prints a table; --json prints one JSON object instead. Options: --model DIR, --new-tokens N,
// --prompt TEXT, --shapes tiny,8b.
// Run: node dist/bench/generate.js [--device cuda] [--json]   (or `nbx bench generate`)

import { execFile } from 'node:child_process';
import { existsSync } from 'node:fs';
import { loadavg } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { parseArgs } from 'node:util';
import * as nbx from '../src/index.js';
import { generateSteps, type PreparedPrompt } from '../src/generation/index.js';
import { defaultModelDir } from '../src/cli/generate.js';
import type { CausalLM } from '../src/models/types.js';

const PEERS = join(dirname(fileURLToPath(import.meta.url)), '../../bench/peers');

interface Figures {
  ttft_ms: number; decode_tok_s: number; prompt_tokens: number; new_tokens: number; ids?: number[];
  /** CPU time of the process (all threads) for the same spans; on a busy machine wall time also counts waiting for a core. */
  ttft_cpu_ms?: number; decode_cpu_ms_per_token?: number;
}
interface PeerLine extends Partial<Figures> { peer?: string; error?: string; [k: string]: unknown }

/** Greedy generation of exactly `newTokens` tokens after `prompt`; times the first token and the rest. */
async function timeGreedy(model: CausalLM, prompt: number[], newTokens: number): Promise<Figures> {
  const prepared: PreparedPrompt = { rows: [prompt.slice()], mask: null, length: prompt.length };
  const cpuMs = (): number => { const u = process.cpuUsage(); return (u.user + u.system) / 1000; };
  const t0 = performance.now(), c0 = cpuMs();
  let first = 0, last = 0, n = 0, cFirst = 0, cLast = 0;
  const ids: number[] = [];
  for await (const step of generateSteps(model, prepared, { max_new_tokens: newTokens, eos_token_id: null, do_sample: false })) {
    last = performance.now(); cLast = cpuMs();
    if (n === 0) { first = last; cFirst = cLast; }
    ids.push(step.tokens[0]!);
    n++;
  }
  return {
    ttft_ms: first - t0, decode_tok_s: n > 1 ? ((n - 1) / (last - first)) * 1000 : NaN, prompt_tokens: prompt.length, new_tokens: n, ids,
    ttft_cpu_ms: cFirst - c0, decode_cpu_ms_per_token: n > 1 ? (cLast - cFirst) / (n - 1) : NaN,
  };
}

/** Runs a Python peer; its last stdout line is JSON. A missing python3 or torch is reported, not fatal. */
function runPeerWith(python: string, args: string[]): Promise<PeerLine> {
  return new Promise((resolve) => {
    execFile(python, args, { encoding: 'utf8', maxBuffer: 16 << 20, timeout: 30 * 60_000 }, (err, stdout, stderr) => {
      const line = stdout.trim().split('\n').pop() ?? '';
      if (!err && line.startsWith('{')) { resolve(JSON.parse(line) as PeerLine); return; }
      const why = (err as NodeJS.ErrnoException | null)?.code === 'ENOENT' ? `${python} not found`
        : /No module named '?[\w.]+'?/.exec(stderr)?.[0] ?? (stderr.trim().split('\n').pop() || err?.message || 'no output');
      resolve({ error: `${python}: ${why}` });
    });
  });
}

/** The first interpreter that runs the peer: PATH's python3 may be a virtualenv without torch while the system's has it. */
async function runPeer(args: string[]): Promise<PeerLine> {
  const errors: string[] = [];
  for (const python of ['python3', '/usr/bin/python3']) {
    const r = await runPeerWith(python, args);
    if (!r.error) return r;
    errors.push(r.error);
  }
  return { error: errors.join('; ') };
}

const fmt = (x: number | undefined, digits = 1): string => (x === undefined || !Number.isFinite(x) ? '-' : x.toFixed(digits));

interface Row { name: string; ours: Figures; peer: PeerLine; sameIds?: boolean | null }

function table(rows: Row[], peerName: string): string {
  const lines = [
    `| model | nbx decode tok/s | ${peerName} decode tok/s | decode ratio | nbx TTFT ms | ${peerName} TTFT ms | TTFT ratio (peer/nbx) |`,
    '| --- | ---: | ---: | ---: | ---: | ---: | ---: |',
  ];
  for (const r of rows) {
    const p = r.peer;
    lines.push(`| ${r.name} | ${fmt(r.ours.decode_tok_s)} | ${fmt(p.decode_tok_s)} | ${p.decode_tok_s ? `${fmt((r.ours.decode_tok_s / p.decode_tok_s) * 100)}%` : '-'} | ` +
      `${fmt(r.ours.ttft_ms, 2)} | ${fmt(p.ttft_ms, 2)} | ${p.ttft_ms ? `${fmt((p.ttft_ms / r.ours.ttft_ms) * 100)}%` : '-'} |`);
  }
  return lines.join('\n');
}

async function cpuBench(v: { model?: string; 'new-tokens'?: string; prompt?: string; json?: boolean }): Promise<void> {
  const dir = v.model ?? defaultModelDir();
  if (!existsSync(dir)) throw new nbx.ValueError('bench generate', `no model folder at ${dir}; pass --model DIR`);
  const newTokens = Number(v['new-tokens'] ?? 50);
  const t0 = performance.now();
  const model = await nbx.models.load(dir, { device: 'cpu', dtype: 'float32' });
  const loadMs = performance.now() - t0;
  if (!model.tokenizer) throw new nbx.ValueError('bench generate', `${dir} has no tokenizer`);
  const prompt = model.tokenizer.encode(v.prompt ?? 'And God said');
  // warm-up as long as the timed run, as the peer's: V8 is still optimizing the engine's code after a short one
  await timeGreedy(model, prompt, newTokens);
  const ours = await timeGreedy(model, prompt, newTokens);
  model.dispose();
  const peerArgs = [join(PEERS, 'torch_llama_generate.py'), dir, '--prompt-ids', prompt.join(','), '--new-tokens', String(newTokens), '--print-ids'];
  const peer = await runPeer(peerArgs);
  const peerIds = Array.isArray(peer.ids) ? (peer.ids as number[]).slice(prompt.length) : null;
  const sameIds = peerIds ? peerIds.length === ours.ids!.length && peerIds.every((id, i) => id === ours.ids![i]) : null;
  const row: Row = { name: `${dir.split('/').pop()} (float32, ${prompt.length} prompt + ${newTokens} new tokens)`, ours, peer, sameIds };
  if (v.json) {
    process.stdout.write(`${JSON.stringify({ device: 'cpu', model: dir, load_ms: loadMs, nbx: { ...ours, ids: undefined }, peer: { ...peer, ids: undefined }, same_greedy_ids: sameIds })}\n`);
    return;
  }
  process.stdout.write(`${table([row], 'PyTorch CPU')}\n\n`);
  process.stdout.write(`CPU time (all threads): decode ${fmt(ours.decode_cpu_ms_per_token, 2)} ms/token (PyTorch ${fmt(peer.decode_cpu_ms_per_token as number | undefined, 2)}), ` +
    `first token ${fmt(ours.ttft_cpu_ms, 1)} ms (PyTorch ${fmt(peer.ttft_cpu_ms as number | undefined, 1)}); load average ${loadavg().map((x) => x.toFixed(2)).join(' ')}\n`);
  process.stdout.write(`load ${loadMs.toFixed(0)} ms; peer: ${peer.error ? `skipped (${peer.error})` : `${peer.peer} torch ${peer.torch}, ${peer.threads} threads`}; ` +
    `greedy ids ${sameIds === null ? 'not compared' : sameIds ? 'identical to the peer\'s' : 'DIFFER from the peer\'s'}\n`);
}

// The shapes of bench/peers/hf_generate.py, as config.json would hold them.
const SHAPES: Record<string, Record<string, unknown>> = {
  tiny: { num_hidden_layers: 22, hidden_size: 2048, num_attention_heads: 32, num_key_value_heads: 4, intermediate_size: 5632, vocab_size: 32000, rope_theta: 10000.0 },
  '8b': { num_hidden_layers: 32, hidden_size: 4096, num_attention_heads: 32, num_key_value_heads: 8, intermediate_size: 14336, vocab_size: 128256, rope_theta: 500000.0 },
};

async function cudaBench(v: { 'new-tokens'?: string; shapes?: string; json?: boolean }): Promise<void> {
  const newTokens = Number(v['new-tokens'] ?? 256), promptTokens = 128;
  const rows: Row[] = [];
  for (const shape of (v.shapes ?? 'tiny,8b').split(',')) {
    const dims = SHAPES[shape];
    if (!dims) throw new nbx.ValueError('bench generate', `unknown shape '${shape}' (tiny, 8b)`);
    const config = { model_type: 'llama', architectures: ['LlamaForCausalLM'], ...dims, max_position_embeddings: 4096, rms_norm_eps: 1e-5,
      bos_token_id: 1, eos_token_id: 2, pad_token_id: 0, tie_word_embeddings: false, hidden_act: 'silu', torch_dtype: 'bfloat16' };
    const model = nbx.models.fromConfig(config, { device: 'cuda', dtype: 'bfloat16', seed: 0 });
    const g = new nbx.Generator().manual_seed(0);
    const prompt = (nbx.randint(3, dims.vocab_size as number, [promptTokens], { generator: g }).tolist() as number[]);
    await timeGreedy(model, prompt, 16); // warm-up
    const first = await timeGreedy(model, prompt, 1);
    const full = await timeGreedy(model, prompt, newTokens);
    model.dispose();
    // As the peer measures: TTFT from a one-token generate; decode over the rest of a full one.
    const fullMs = full.ttft_ms + (full.new_tokens - 1) / full.decode_tok_s * 1000;
    const ours: Figures = { ttft_ms: first.ttft_ms, decode_tok_s: ((newTokens - 1) / (fullMs - first.ttft_ms)) * 1000, prompt_tokens: promptTokens, new_tokens: newTokens };
    const peer = await runPeer([join(PEERS, 'hf_generate.py'), shape, '--new-tokens', String(newTokens), '--prompt-tokens', String(promptTokens)]);
    rows.push({ name: `${shape === 'tiny' ? 'TinyLlama-1.1B' : 'Llama-3-8B'} shape, bf16, ${promptTokens} + ${newTokens}`, ours, peer });
  }
  if (v.json) { process.stdout.write(`${JSON.stringify({ device: 'cuda', rows: rows.map((r) => ({ name: r.name, nbx: r.ours, peer: r.peer })) })}\n`); return; }
  process.stdout.write(`${table(rows, 'transformers eager')}\n\n`);
  for (const r of rows) if (r.peer.error) process.stdout.write(`${r.name}: peer skipped (${r.peer.error})\n`);
  const p = rows.find((r) => !r.peer.error)?.peer;
  if (p) process.stdout.write(`peer: transformers ${p.transformers}, torch ${p.torch}, ${p.attn_implementation} attention, ${p.device}\n`);
}

export async function run(args: string[] = []): Promise<void> {
  const { values } = parseArgs({
    args, allowPositionals: true,
    options: {
      device: { type: 'string', default: 'cpu' }, model: { type: 'string' }, 'new-tokens': { type: 'string' },
      prompt: { type: 'string' }, shapes: { type: 'string' }, json: { type: 'boolean', default: false }, quick: { type: 'boolean', default: false },
    },
  });
  if (values.device === 'cuda') await cudaBench(values);
  else if (values.device === 'cpu') await cpuBench(values);
  else throw new nbx.ValueError('bench generate', `--device must be cpu or cuda, got '${values.device}'`);
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? '').href) {
  run(process.argv.slice(2)).then(() => process.exit(0), (e: Error) => {
    process.stderr.write(`bench generate: ${process.env.NBX_DEBUG === '1' ? e.stack : e.message}\n`);
    process.exit(1);
  });
}
