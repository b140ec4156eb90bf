// `nbx generate [PROMPT]`: loads a model folder (the embedded nbx-kjv by default), streams the
// continuation to stdout as it is generated, and reports load time, prompt tokens/s, time to first
// token and decode tokens/s on stderr. Ctrl-C stops generation, prints the figures and exits 130.

import { existsSync, readFileSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import type { CausalLM } from '../models/types.js';
import { ValueError } from '../errors.js';
import { Generator } from '../random/generator.js';
import { generateSteps, IncrementalDecoder, resolveConfig, type GenerationOptions, type PreparedPrompt } from '../generation/index.js';
import type { Tokenizer } from '../tokenizer/index.js';

const OP = 'nbx generate';

/** The package's root folder (the one whose package.json names nbxtensor), from dist/src/cli or src/cli. */
export function packageRoot(): string {
  let dir = dirname(fileURLToPath(import.meta.url));
  for (let i = 0; i < 6; i++) {
    const pj = join(dir, 'package.json');
    if (existsSync(pj)) {
      try { if ((JSON.parse(readFileSync(pj, 'utf8')) as { name?: string }).name === 'nbxtensor') return dir; } catch { /* keep looking */ }
    }
    dir = dirname(dir);
  }
  throw new ValueError(OP, 'cannot find the nbxtensor package folder (package.json) above the command');
}

/** The embedded default model, shipped in the package. */
export function defaultModelDir(): string {
  return join(packageRoot(), 'assets', 'nbx-kjv');
}

/**
 * The best device here, from what the backends report: CUDA when a device is present and its
 * libraries load; else a WebGPU adapter that is a GPU with a device profile (a known family), not a
 * fallback adapter; else the CPU. A software adapter (e.g. Mesa's llvmpipe) has no profile, so the
 * CPU backend, which is faster than emulating a GPU on the same cores, is chosen over it.
 */
export async function bestDevice(): Promise<{ device: 'cpu' | 'cuda' | 'webgpu'; why: string }> {
  try {
    const { probeCuda } = await import('../backend/cuda/runtime/libs.js');
    const p = probeCuda();
    if (p.available && (p.devices?.length ?? 0) > 0) return { device: 'cuda', why: `CUDA device ${p.devices![0]!.name}` };
  } catch { /* no CUDA: try WebGPU */ }
  const w = await probeWebGPUAdapter();
  if (w.family && !w.isFallbackAdapter) return { device: 'webgpu', why: `WebGPU adapter ${w.description} (profile ${w.family})` };
  return { device: 'cpu', why: w.description ? `no CUDA device; the WebGPU adapter (${w.description}) is not a GPU with a device profile` : 'no CUDA device and no WebGPU adapter' };
}

/** The WebGPU adapter Dawn (or the browser) offers: its description, device-profile family and fallback flag. */
async function probeWebGPUAdapter(): Promise<{ description?: string; family?: string; isFallbackAdapter?: boolean }> {
  try {
    const { chooseAdapter, profileFor } = await import('../backend/webgpu/runtime/gpu.js');
    const c = await chooseAdapter();
    const prof = await profileFor(c.adapter);
    return { description: c.description, family: prof.family, isFallbackAdapter: (c.adapter.info as { isFallbackAdapter?: boolean }).isFallbackAdapter === true };
  } catch {
    return {};
  }
}

export interface LoadedModel { model: CausalLM; tokenizer: Tokenizer; loadMs: number; device: string; dir: string }

/** Loads a model folder for the commands; the device defaults to bestDevice(). */
export async function loadForCommand(op: string, dirArg: string | undefined, deviceArg: string | undefined, dtypeArg: string | undefined): Promise<LoadedModel> {
  const dir = dirArg ? resolve(dirArg) : defaultModelDir();
  if (!dirArg && !existsSync(dir)) {
    throw new ValueError(op, `the embedded model is missing (${dir}); reinstall the package or pass --model DIR`);
  }
  if (deviceArg !== undefined && !/^(cpu|cuda|webgpu)(:\d+)?$/.test(deviceArg)) {
    throw new ValueError(op, `--device must be cpu, cuda or webgpu, got '${deviceArg}'`);
  }
  // The device probe and the model code's import overlap.
  const [device, { load }] = await Promise.all([deviceArg ?? bestDevice().then((b) => b.device), import('../models/index.js')]);
  const t0 = performance.now();
  const model = await load(dir, { device, ...(dtypeArg ? { dtype: dtypeArg as never } : {}) });
  const loadMs = performance.now() - t0;
  if (!model.tokenizer) {
    model.dispose();
    throw new ValueError(op, `${dir} has no ${dir.endsWith('.gguf') ? 'tokenizer in its GGUF metadata' : 'tokenizer.json'}: the command needs the model's tokenizer to read the prompt and write text`);
  }
  return { model, tokenizer: model.tokenizer, loadMs, device, dir };
}

/** Sampling options from the command line, under transformers' names; the rest comes from generation_config.json. */
export function samplingOptions(v: { 'max-new-tokens'?: string; temperature?: string; 'top-k'?: string; 'top-p'?: string; seed?: string }, model: CausalLM, op: string):
  { opts: GenerationOptions; seed: bigint | null } {
  const num = (name: string, s: string | undefined, int: boolean): number | undefined => {
    if (s === undefined) return undefined;
    const n = Number(s);
    if (s.trim() === '' || !Number.isFinite(n) || (int && !Number.isInteger(n))) throw new ValueError(op, `--${name} must be ${int ? 'an integer' : 'a number'}, got '${s}'`);
    return n;
  };
  const opts: GenerationOptions = {};
  const maxNew = num('max-new-tokens', v['max-new-tokens'], true);
  const gc = model.generationConfig;
  opts.max_new_tokens = maxNew ?? (typeof gc.max_new_tokens === 'number' ? gc.max_new_tokens : 50);
  const temperature = num('temperature', v.temperature, false);
  const topK = num('top-k', v['top-k'], true);
  const topP = num('top-p', v['top-p'], false);
  // --temperature 0 means greedy decoding; any sampling flag turns sampling on.
  if (temperature === 0) opts.do_sample = false;
  else {
    if (temperature !== undefined) opts.temperature = temperature;
    if (temperature !== undefined || topK !== undefined || topP !== undefined) opts.do_sample = true;
  }
  if (topK !== undefined) opts.top_k = topK;
  if (topP !== undefined) opts.top_p = topP;
  let seed: bigint | null = null;
  if (v.seed !== undefined) {
    if (!/^\d+$/.test(v.seed)) throw new ValueError(op, `--seed must be an integer >= 0, got '${v.seed}'`);
    seed = BigInt(v.seed);
    opts.generator = new Generator().manual_seed(seed);
  } else {
    // Without --seed each run differs; the seed is reported so that a run can be repeated.
    const g = new Generator();
    seed = g.seed();
    opts.generator = g;
  }
  return { opts, seed };
}

/** Checks the flags before the model loads, so that a typo fails at once (the model's own defaults are checked after). */
export function checkOptionsEarly(v: Parameters<typeof samplingOptions>[0], op: string): void {
  const stub = { config: { model_type: '', vocab_size: 0 }, generationConfig: {}, tokenizer: null } as unknown as CausalLM;
  resolveConfig(stub, samplingOptions(v, stub, op).opts);
}

export interface RunStats { promptTokens: number; newTokens: number; ttftMs: number; decodeMs: number; interrupted: boolean }

export function formatStats(s: RunStats, extra = ''): string {
  const promptRate = s.ttftMs > 0 ? (s.promptTokens / s.ttftMs) * 1000 : 0;
  const decodeRate = s.newTokens > 1 && s.decodeMs > 0 ? ((s.newTokens - 1) / s.decodeMs) * 1000 : 0;
  return `prompt: ${s.promptTokens} tokens, ${promptRate.toFixed(1)} tokens/s; time to first token: ${s.ttftMs.toFixed(1)} ms; ` +
    `decode: ${s.newTokens} tokens, ${s.newTokens > 1 ? `${decodeRate.toFixed(1)} tokens/s` : 'n/a'}${extra}${s.interrupted ? ' (interrupted)' : ''}`;
}

/** Writes to stdout; false once stdout is gone (a closed pipe), so generation stops instead of failing. */
function makeWriter(): { write: (s: string) => void; closed: () => boolean } {
  let closed = false;
  // Worker threads pipe their stdout into ours: one 'error' listener each, which Node adds without its
  // leak warning; the limit makes room for ours too, or a many-core machine would print that warning.
  process.stdout.setMaxListeners(Math.max(process.stdout.getMaxListeners(), process.stdout.listenerCount('error') + 1));
  process.stdout.on('error', (e: NodeJS.ErrnoException) => { if (e.code === 'EPIPE') closed = true; else throw e; });
  return { write: (s) => { if (!closed && s) process.stdout.write(s); }, closed: () => closed };
}

/**
 * Generates from prompt ids, writing the text as it comes through `write`; stops early when
 * `shouldStop()` turns true (Ctrl-C, a closed pipe). Returns the timings and the generated text.
 */
export async function runGeneration(model: CausalLM, tokenizer: Tokenizer, promptIds: number[], opts: GenerationOptions,
  write: (s: string) => void, shouldStop: () => boolean, echo = ''): Promise<RunStats & { text: string }> {
  const prompt: PreparedPrompt = { rows: [promptIds.slice()], mask: null, length: promptIds.length };
  const decoder = new IncrementalDecoder(tokenizer, promptIds);
  let text = '';
  const emit = (s: string): void => { if (s) { text += s; write(s); } };
  const t0 = performance.now();
  let tFirst = 0, tLast = 0, n = 0, interrupted = false;
  for await (const step of generateSteps(model, prompt, opts)) {
    tLast = performance.now();
    // The prompt is echoed once the first token exists, so a rejected prompt prints nothing.
    if (n === 0) { tFirst = tLast; write(echo); }
    n++;
    emit(decoder.push(step.tokens[0]!));
    if (shouldStop()) { interrupted = true; break; }
  }
  emit(decoder.flush());
  return { promptTokens: promptIds.length, newTokens: n, ttftMs: tFirst - t0, decodeMs: tLast - tFirst, interrupted, text };
}

/** Ctrl-C: the first stops generation cleanly (figures printed, exit 130); a second one exits at once. */
export function interruptFlag(): { stopped: () => boolean; trigger: () => void; reset: () => void; dispose: () => void } {
  let stopped = false;
  const trigger = (): void => {
    if (stopped) process.exit(130);
    stopped = true;
  };
  process.on('SIGINT', trigger);
  return { stopped: () => stopped, trigger, reset: () => { stopped = false; }, dispose: () => { process.off('SIGINT', trigger); } };
}

async function readStdin(): Promise<string> {
  const chunks: Buffer[] = [];
  for await (const c of process.stdin) chunks.push(c as Buffer);
  return Buffer.concat(chunks).toString('utf8');
}

/** The flags nbx generate and nbx chat share: the model, where it runs, and sampling. */
export const MODEL_FLAGS = {
  model: { type: 'string' }, device: { type: 'string' }, dtype: { type: 'string' },
  'max-new-tokens': { type: 'string' }, temperature: { type: 'string' }, 'top-k': { type: 'string' },
  'top-p': { type: 'string' }, seed: { type: 'string' },
} as const;

export async function generateCommand(args: string[]): Promise<number> {
  const { values, positionals } = parseArgs({
    args, allowPositionals: true, options: { ...MODEL_FLAGS, chat: { type: 'boolean', default: false } },
  });
  if (positionals.length > 1) throw new ValueError(OP, `give one prompt (quote it), got ${positionals.length} arguments`);
  let prompt = positionals[0];
  if (prompt === undefined) {
    if (process.stdin.isTTY) throw new ValueError(OP, 'give a prompt: nbx generate "And God said" (or pipe it on stdin)');
    prompt = (await readStdin()).replace(/\r?\n$/, '');
  }
  if (prompt.length === 0) throw new ValueError(OP, 'the prompt is empty: give some text to continue');
  checkOptionsEarly(values, OP);

  const loaded = await loadForCommand(OP, values.model, values.device, values.dtype);
  const { model, tokenizer } = loaded;
  const interrupt = interruptFlag();
  const out = makeWriter();
  try {
    const { opts, seed } = samplingOptions(values, model, OP);
    resolveConfig(model, opts);
    const promptIds = values.chat
      ? tokenizer.apply_chat_template([{ role: 'user', content: prompt }], { add_generation_prompt: true }) as number[]
      : tokenizer.encode(prompt);
    process.stderr.write(`nbx: loaded ${loaded.dir} (${model.config.model_type}, ${model.dtype.name}) on ${loaded.device} in ${loaded.loadMs.toFixed(0)} ms\n`);
    const stats = await runGeneration(model, tokenizer, promptIds, opts, out.write, () => interrupt.stopped() || out.closed(), values.chat ? '' : prompt);
    out.write('\n');
    const sampling = opts.do_sample ?? model.generationConfig.do_sample === true;
    process.stderr.write(`nbx: ${formatStats(stats, sampling ? `; seed ${seed}` : '; greedy')}\n`);
    return stats.interrupted && interrupt.stopped() ? 130 : 0;
  } finally {
    interrupt.dispose();
    model.dispose();
  }
}
