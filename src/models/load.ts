// nbx.models.load: a Hugging Face model folder (config.json, model.safetensors or a sharded index,
// generation_config.json, tokenizer files) → a CausalLM on a device. The model is declared empty
// (nbx.nn.init_empty_weights), every checkpoint name and shape is checked against it before any data is
// read, and the tensors stream to the device (converted to the wanted dtype there) and are installed
// as they are (load_state_dict with assign), so the weights are allocated once.
// nbx.models.fromConfig: the same model with random weights made on the device (benchmarks, tests).

import { existsSync, readFileSync, statSync } from 'node:fs';
import { basename, dirname, join } from 'node:path';
import * as nbx from '../index.js';
import type { Tensor } from '../tensor/tensor.js';
import { Device, backendFor, type DeviceLike } from '../backend/backend.js';
import { checkQuantSupport } from '../ops/quant.js';
import { dtypeName, DTYPES, type DTypeLike, type DTypeName } from '../dtype/dtypes.js';
import { init_empty_weights } from '../nn/index.js';
import { FormatError, NbxError, ShapeError, ValueError } from '../errors.js';
import { loadTokenizer, type Tokenizer } from '../tokenizer/index.js';
import { SafetensorsHandle } from '../io/index.js';
import { createProgress } from '../io/progress.js';
import { parseConfig, type ModelConfig } from './config.js';
import { CausalLMModel } from './causal_lm.js';
import { Linear } from '../nn/linear.js';
import { quantSource, type WeightSource } from './load_quant.js';

export interface LoadModelOptions {
  /** Where the weights go (default 'cpu'). */
  device?: DeviceLike;
  /** The model's dtype; default float32 on the CPU and WebGPU, the checkpoint's dtype on CUDA. */
  dtype?: DTypeLike;
  /** Called after each tensor with the bytes read so far and the total. */
  onProgress?: (p: { loadedBytes: number; totalBytes: number; tensor: string }) => void;
  /** Draw the IO layer's progress bar on a terminal (default: for loads over 256 MiB). */
  progress?: boolean;
}

const OP = 'models.load';

/** The dtype a model gets on `device` when none is asked for. */
function defaultDType(device: Device, checkpointDType: string | null): DTypeName {
  if (device.type === 'cuda' && checkpointDType && checkpointDType in DTYPES && DTYPES[checkpointDType as DTypeName].kind === 'float') {
    return checkpointDType as DTypeName;
  }
  return 'float32';
}

function readJson(file: string, required: boolean, hint: string): unknown {
  if (!existsSync(file)) {
    if (!required) return undefined;
    throw new ValueError(OP, `${file} not found: ${hint}`);
  }
  let text: string;
  try { text = readFileSync(file, 'utf8'); } catch (e) { throw new ValueError(OP, `cannot read ${file}: ${(e as Error).message}`); }
  try { return JSON.parse(text); } catch (e) {
    throw new FormatError(OP, `${file} is not valid JSON (${(e as Error).message}); the file is corrupt or truncated: download it again`);
  }
}

/** A folder, or a weights file inside one: the folder and the weights to read. */
function resolvePaths(dirOrFile: string): { dir: string; weights: string } {
  if (typeof dirOrFile !== 'string' || dirOrFile === '') throw new ValueError(OP, `expected the path of a model folder, got ${JSON.stringify(dirOrFile)}`);
  if (!existsSync(dirOrFile)) throw new ValueError(OP, `${dirOrFile} does not exist: pass a Hugging Face model folder (config.json + model.safetensors)`);
  if (statSync(dirOrFile).isDirectory()) {
    const single = join(dirOrFile, 'model.safetensors'), index = join(dirOrFile, 'model.safetensors.index.json');
    if (existsSync(index)) return { dir: dirOrFile, weights: index };
    if (existsSync(single)) return { dir: dirOrFile, weights: single };
    throw new ValueError(OP, `${dirOrFile} has neither model.safetensors nor model.safetensors.index.json: only safetensors checkpoints are read (convert a pytorch_model.bin with transformers' save_pretrained(safe_serialization=True))`);
  }
  const name = basename(dirOrFile);
  if (name === 'config.json') return resolvePaths(dirname(dirOrFile));
  if (!name.endsWith('.safetensors') && !name.endsWith('.safetensors.index.json')) {
    throw new ValueError(OP, `${dirOrFile} is not a model folder, a .safetensors file or a .safetensors.index.json`);
  }
  return { dir: dirname(dirOrFile), weights: dirOrFile };
}

/**
 * How the model's state_dict names come from the checkpoint's: the same name, or (mixture of experts
 * saved per expert, as transformers 4 and transformers 5's save_pretrained write them) a stack of
 * per-expert tensors.
 */
interface Source { kind: 'same'; name: string }
interface StackSource { kind: 'stack'; parts: string[][] } // parts[e] = names concatenated along dim 0 for expert e
type Plan = Map<string, Source | StackSource>;

function expertNames(cfg: ModelConfig, prefix: string, e: number, names: Set<string>): { gate: string; up: string; down: string } | null {
  const candidates = cfg.model_type === 'mixtral'
    ? [[`${prefix}.block_sparse_moe.experts.${e}.`, 'w1', 'w3', 'w2'], [`${prefix}.mlp.experts.${e}.`, 'w1', 'w3', 'w2']]
    : [[`${prefix}.mlp.experts.${e}.`, 'gate_proj', 'up_proj', 'down_proj']];
  for (const [p, g, u, d] of candidates) {
    const n = (s: string): string => `${p}${s}.weight`;
    if (names.has(n(g!))) return { gate: n(g!), up: n(u!), down: n(d!) };
  }
  return null;
}

/** Maps every state_dict entry to its checkpoint source; reports what is missing. */
function planLoad(cfg: ModelConfig, wanted: string[], names: Set<string>): { plan: Plan; missing: string[]; used: Set<string> } {
  const plan: Plan = new Map();
  const missing: string[] = [];
  const used = new Set<string>();
  const take = (n: string): void => { used.add(n); };
  for (const w of wanted) {
    if (names.has(w)) { plan.set(w, { kind: 'same', name: w }); take(w); continue; }
    // Mixtral checkpoints name the MoE block block_sparse_moe
    const renamed = w.replace('.mlp.gate.weight', '.block_sparse_moe.gate.weight');
    if (renamed !== w && names.has(renamed)) { plan.set(w, { kind: 'same', name: renamed }); take(renamed); continue; }
    const m = /^(model\.layers\.\d+)\.mlp\.experts\.(gate_up_proj|down_proj)$/.exec(w);
    if (m) {
      const parts: string[][] = [];
      for (let e = 0; e < cfg.num_experts; e++) {
        const en = expertNames(cfg, m[1]!, e, names);
        if (!en) break;
        parts.push(m[2] === 'gate_up_proj' ? [en.gate, en.up] : [en.down]);
      }
      if (parts.length === cfg.num_experts && parts.every((p) => p.every((n) => names.has(n)))) {
        plan.set(w, { kind: 'stack', parts });
        parts.flat().forEach(take);
        continue;
      }
    }
    missing.push(w);
  }
  return { plan, missing, used };
}

/** Checkpoint entries transformers also ignores when loading. */
const IGNORED = [/\.rotary_emb\.inv_freq$/, /^lm_head\.weight$/];

/** What a checkpoint's tensors are read through (defined in load_quant.ts, which load.ts imports). */
export type { WeightSource } from './load_quant.js';

async function openWeights(weights: string): Promise<WeightSource> {
  try { return await SafetensorsHandle.open(weights); } catch (e) {
    if (e instanceof NbxError) throw e;
    throw new FormatError(OP, `cannot open ${weights}: ${(e as Error).message}`);
  }
}

/** Checks the checkpoint `handle` (named `weights` in messages) against the model, then installs it; closes the handle. */
async function loadWeights(model: CausalLMModel, handle: WeightSource, weights: string, device: Device, dtype: DTypeName, opts: LoadModelOptions): Promise<void> {
  const spec = model.state_dict_spec();
  const loaded: Tensor[] = [];
  try {
    const names = new Set(handle.names());
    // a tied lm_head.weight is the embedding itself: loading embed_tokens.weight fills both names
    const wanted = Object.keys(spec).filter((w) => !(model.cfg.tie_word_embeddings && w === 'lm_head.weight'));
    const { plan, missing, used } = planLoad(model.cfg, wanted, names);
    const problems: string[] = [];
    for (const w of missing) problems.push(`missing tensor '${w}' (expected shape [${spec[w]!.shape.join(', ')}])`);
    // shapes, before reading anything
    for (const [w, src] of plan) {
      const want = spec[w]!.shape;
      if (src.kind === 'same') {
        const got = handle.info(src.name).shape;
        if (got.length !== want.length || got.some((d, i) => d !== want[i])) problems.push(`tensor '${src.name}' has shape [${got.join(', ')}], expected [${want.join(', ')}]`);
      } else {
        const perExpert = [want[1]! / src.parts[0]!.length, want[2]!];
        for (const n of src.parts.flat()) {
          const got = handle.info(n).shape;
          if (got.length !== 2 || got[0] !== perExpert[0] || got[1] !== perExpert[1]) problems.push(`tensor '${n}' has shape [${got.join(', ')}], expected [${perExpert.join(', ')}]`);
        }
      }
    }
    const unexpected = [...names].filter((n) => !used.has(n) && !IGNORED.some((r) => r.test(n)));
    for (const n of unexpected) problems.push(`unexpected tensor '${n}' (not part of a ${model.cfg.model_type} model with this config)`);
    if (problems.length) {
      const shown = problems.slice(0, 20).join('; ') + (problems.length > 20 ? `; and ${problems.length - 20} more` : '');
      throw new ShapeError(OP, `${weights} does not fit config.json (${model.cfg.model_type}, ${model.cfg.num_hidden_layers} layers, hidden ${model.cfg.hidden_size}): ${shown}. Check that config.json belongs to these weights`);
    }

    const all = [...plan.values()].flatMap((s) => (s.kind === 'same' ? [s.name] : s.parts.flat()));
    const totalBytes = all.reduce((s, n) => s + handle.info(n).byteLength, 0);
    const bar = createProgress(`loading ${weights}`, totalBytes, { show: opts.progress });
    let done = 0;
    // a quantized Linear's scales and zeros stay float32 (the kernels' contract)
    const keepF32 = (n: string): boolean => spec[n]?.dtype === 'float32' && /\.(scales|zeros)$/.test(n) && !!handle.decls?.has(n.replace(/\.(scales|zeros)$/, ''));
    const read = async (n: string): Promise<Tensor> => {
      const t = await handle.get(n, { device, dtype: DTYPES[handle.info(n).dtype].kind === 'float' ? (keepF32(n) ? 'float32' : dtype) : undefined });
      done += handle.info(n).byteLength;
      bar.update(done);
      opts.onProgress?.({ loadedBytes: done, totalBytes, tensor: n });
      return t;
    };
    const sd: Record<string, Tensor> = {};
    for (const [w, src] of plan) {
      if (src.kind === 'same') { const t = await read(src.name); loaded.push(t); sd[w] = t; continue; }
      // per-expert tensors stacked into transformers 5's fused layout, one expert at a time
      const shape = spec[w]!.shape;
      const fused = nbx.keep(nbx.empty(shape, { dtype, device }));
      loaded.push(fused);
      for (let e = 0; e < src.parts.length; e++) {
        let row = 0;
        for (const n of src.parts[e]!) {
          const t = await read(n);
          const rows = t.shape[0]!;
          nbx.scope(() => { fused.select(0, e).slice(0, row, row + rows).copy_(t); });
          row += rows;
          t.dispose();
        }
      }
      sd[w] = fused;
    }
    bar.finish();
    model.load_state_dict(sd, { assign: true, strict: true });
  } catch (e) {
    for (const t of loaded) t.dispose();
    throw e;
  } finally {
    await handle.close();
  }
}

/**
 * Declares the quantized Linears a checkpoint holds (its source's decls) on the empty model, so that
 * their packed tensors are what the model expects. Embeddings and norms stay float; lm_head is quantized
 * only when the checkpoint quantized it.
 */
function declareQuantized(model: CausalLMModel, handle: WeightSource, weights: string, device: Device, dtype: DTypeName): void {
  if (!handle.decls?.size) return;
  backendFor(device); // a lazily started backend registers its kernels and features now
  for (const [path, d] of handle.decls) {
    // a format the device's kernels lack is a typed error now, before any data is read
    checkQuantSupport(OP, device, d.layout, dtype);
    let m: unknown;
    try { m = model.get_submodule(path); } catch { throw new ShapeError(OP, `${weights}: quantized weights for '${path}', which is not a module of this ${model.cfg.model_type} model`); }
    if (!(m instanceof Linear)) throw new ShapeError(OP, `${weights}: quantized weights for '${path}', which is not a Linear`);
    m.declare_quantized(d.layout, { asymmetric: d.asymmetric, perTensor: d.perTensor });
  }
}

/** The tokenizer of a model folder (src/tokenizer's loader), or null when the folder has no tokenizer.json. */
async function loadTokenizerIfAny(dir: string): Promise<Tokenizer | null> {
  return existsSync(join(dir, 'tokenizer.json')) ? loadTokenizer(dir) : null;
}

/** A model folder's parts, wherever they were read from (files here; fetched files in load_remote.ts). */
export interface ModelParts {
  /** config.json's content, and its name in messages. */
  config: unknown;
  configName: string;
  /** generation_config.json's content (undefined when absent). */
  generationConfig: unknown;
  generationConfigName: string;
  /** Opens the checkpoint (called once the model is declared; closed by the assembly), and its name in messages. */
  weights: () => Promise<WeightSource>;
  weightsName: string;
  tokenizer: () => Promise<Tokenizer | null>;
}

/** The model of `parts` on the wanted device and dtype: declared empty, then its checkpoint installed; freed on any error. */
export async function assembleModel(parts: ModelParts, opts: LoadModelOptions = {}): Promise<CausalLMModel> {
  const cfg = parseConfig(parts.config, parts.configName);
  const genCfg = parts.generationConfig;
  if (genCfg !== undefined && (genCfg === null || typeof genCfg !== 'object' || Array.isArray(genCfg))) {
    throw new FormatError(OP, `${parts.generationConfigName} must hold a JSON object`);
  }
  const device = Device.of(opts.device ?? 'cpu');
  const dtype = opts.dtype !== undefined ? dtypeName(opts.dtype) : defaultDType(device, cfg.checkpoint_dtype);
  if (DTYPES[dtype].kind !== 'float') throw new ValueError(OP, `dtype must be a floating-point dtype (float32, bfloat16, float16), got ${dtype}`);
  const model = init_empty_weights(() => new CausalLMModel(cfg, { device, dtype }));
  try {
    let handle = await parts.weights();
    try {
      handle = quantSource(handle, (cfg.raw as Record<string, unknown>).quantization_config, parts.configName) ?? handle;
      declareQuantized(model, handle, parts.weightsName, device, dtype);
    } catch (e) { await handle.close(); throw e; }
    await loadWeights(model, handle, parts.weightsName, device, dtype, opts);
    model.generationConfig = Object.freeze({ ...(genCfg as Record<string, unknown> | undefined) });
    model.tokenizer = await parts.tokenizer();
  } catch (e) {
    model.dispose();
    throw e;
  }
  return model;
}

/** Loads a Hugging Face model folder (or a .safetensors / index file inside one). */
export async function load(dirOrFile: string, opts: LoadModelOptions = {}): Promise<CausalLMModel> {
  const { dir, weights } = resolvePaths(dirOrFile);
  const config = readJson(join(dir, 'config.json'), true, 'a Hugging Face model folder needs the config.json that transformers saved with the weights');
  return assembleModel({
    config, configName: join(dir, 'config.json'),
    generationConfig: readJson(join(dir, 'generation_config.json'), false, ''), generationConfigName: join(dir, 'generation_config.json'),
    weights: () => openWeights(weights), weightsName: weights,
    tokenizer: () => loadTokenizerIfAny(dir),
  }, opts);
}

/** Builds a CausalLM from a config object (config.json's content), without a checkpoint. */
export interface FromConfigOptions {
  device?: DeviceLike;
  dtype?: DTypeLike;
  /** Seed of the random weights (default 0). */
  seed?: number;
  /** Standard deviation of the random matrices (default config.initializer_range or 0.02). */
  std?: number;
}

/**
 * A model with random weights: matrices N-ish(0, std) made on the device from two short random host
 * vectors (w[i, j] = std·√2·sin(u_i·v_j·c), cheap to make for billions of weights, deterministic by
 * seed), norms at their identity (1, or 0 for Gemma's 1 + w), biases 0. Meant for speed measurements
 * and tests, not for training.
 */
export function fromConfig(config: Record<string, unknown>, opts: FromConfigOptions = {}): CausalLMModel {
  const cfg = parseConfig(config, 'fromConfig(config)');
  const device = Device.of(opts.device ?? 'cpu');
  const dtype = opts.dtype !== undefined ? dtypeName(opts.dtype) : defaultDType(device, cfg.checkpoint_dtype);
  if (DTYPES[dtype].kind !== 'float') throw new ValueError('models.fromConfig', `dtype must be a floating-point dtype, got ${dtype}`);
  const std = opts.std ?? (typeof cfg.raw.initializer_range === 'number' ? cfg.raw.initializer_range : 0.02);
  const gen = new nbx.Generator().manual_seed(opts.seed ?? 0);
  const model = init_empty_weights(() => new CausalLMModel(cfg, { device, dtype }));
  const sd: Record<string, Tensor> = {};
  try {
    for (const [name, s] of Object.entries(model.state_dict_spec())) {
      sd[name] = nbx.keep(randomTensor(name, s.shape, dtype, device, std, gen, cfg));
    }
    model.load_state_dict(sd, { assign: true, strict: true });
  } catch (e) {
    for (const t of Object.values(sd)) t.dispose();
    model.dispose();
    throw e;
  }
  return model;
}

function randomTensor(name: string, shape: number[], dtype: DTypeName, device: Device, std: number, gen: unknown, cfg: ModelConfig): Tensor {
  const isNorm = /norm\.weight$|layernorm\.weight$/.test(name);
  if (isNorm) return (cfg.model_type.startsWith('gemma') ? nbx.zeros : nbx.ones)(shape, { dtype, device });
  if (name.endsWith('.bias')) return nbx.zeros(shape, { dtype, device });
  const cols = shape[shape.length - 1]!, rows = shape.reduce((a, b) => a * b, 1) / cols;
  const out = nbx.empty(shape, { dtype, device });
  nbx.scope(() => {
    const rowsView = out.view([rows, cols]);
    const u = nbx.randn([rows], { generator: gen }).to(device).unsqueeze(1);
    const v = nbx.randn([cols], { generator: gen }).to(device).mul(977.0).unsqueeze(0);
    // rows in blocks so the float32 intermediate stays small next to the weight itself
    const block = Math.max(1, Math.floor((64 << 20) / Math.max(cols, 1)));
    for (let r = 0; r < rows; r += block) {
      const n = Math.min(block, rows - r);
      nbx.scope(() => { rowsView.slice(0, r, r + n).copy_(u.slice(0, r, r + n).mul(v).sin().mul(std * Math.SQRT2)); });
    }
  });
  return out;
}
