// `nbx quantize MODEL_DIR OUT_DIR --scheme int8|int4-g128|int4-g64|int4-g32|fp8 [--symmetric] [--lm-head]`:
// round-to-nearest quantization of a model folder's Linear weights (nbx.quant.quantize_) into a
// safetensors folder that nbx.models.load reads back: config.json with a `quantization_config`
// (docs/quantization.md), model.safetensors with each quantized Linear's `qweight` / `scales` (/ `zeros`)
// and every other tensor as the source stored it (embeddings, norms, and lm_head unless --lm-head stay
// float), and the tokenizer and generation files copied. --lm-head quantizes lm_head too, with the same
// scheme (gpt-fast's convention); a tied lm_head is untied: the embedding stays float, lm_head is written
// packed and config.json says tie_word_embeddings: false.

import { copyFileSync, existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import * as nbx from '../index.js';
import type { Tensor } from '../tensor/tensor.js';
import { quantize_, type QuantizeOptions } from '../quant/index.js';
import { dtypeName, DTYPES, type DTypeName } from '../dtype/dtypes.js';
import { ValueError } from '../errors.js';

export const SCHEMES: Record<string, QuantizeOptions> = {
  int8: { scheme: 'int8' },
  'int4-g128': { scheme: 'int4', group_size: 128 },
  'int4-g64': { scheme: 'int4', group_size: 64 },
  'int4-g32': { scheme: 'int4', group_size: 32 },
  fp8: { scheme: 'fp8_e4m3' },
};

const COPY = ['tokenizer.json', 'tokenizer_config.json', 'generation_config.json', 'special_tokens_map.json', 'README.md'];

/** Quantizes `src` into `out` (see the top of this file); returns what was quantized and kept float. */
export async function quantizeFolder(src: string, out: string, schemeName: string, opts: { symmetric?: boolean; lmHead?: boolean } = {}): Promise<{ quantized: string[]; skipped: string[]; untied: string[]; bytes: number }> {
  const scheme = SCHEMES[schemeName];
  if (!scheme) throw new ValueError('quantize', `--scheme must be one of ${Object.keys(SCHEMES).join(', ')}, got ${JSON.stringify(schemeName)}`);
  const cfgText = readFileSync(join(src, 'config.json'), 'utf8');
  const config = JSON.parse(cfgText) as Record<string, unknown>;
  if (config.quantization_config !== undefined) throw new ValueError('quantize', `${src} is already quantized (config.json has a quantization_config)`);
  const model = await nbx.models.load(src, { dtype: 'float32' });
  try {
    const o: QuantizeOptions = { ...scheme, ...(scheme.scheme === 'int4' ? { symmetric: opts.symmetric ?? false } : {}) };
    const { quantized, skipped, untied } = quantize_(model, { ...o, lm_head: opts.lmHead ?? false });
    // float tensors go back in the checkpoint's dtype (the values came from it, so this is exact)
    const ck = String(config.torch_dtype ?? config.dtype ?? 'float32');
    const floatDType: DTypeName = ck in DTYPES && DTYPES[ck as DTypeName].kind === 'float' ? dtypeName(ck as DTypeName) : 'float32';
    const sd: Record<string, Tensor> = {};
    const made: Tensor[] = [];
    // a tied lm_head.weight is the embedding (not written); a quantized lm_head has its own tensors
    const tied = config.tie_word_embeddings !== false && model.cfg.tie_word_embeddings && !untied.includes('lm_head');
    for (const [name, t] of Object.entries(model.state_dict())) {
      if (tied && name === 'lm_head.weight') continue;
      if (/\.(scales|zeros)$/.test(name) || t.dt === 'uint8' || DTYPES[t.dt].kind !== 'float') { sd[name] = t; continue; }
      const c = t.to(floatDType);
      if (c !== t) made.push(c);
      sd[name] = c;
    }
    mkdirSync(out, { recursive: true });
    await nbx.io.saveSafetensors(join(out, 'model.safetensors'), sd, { format: 'pt' });
    for (const t of made) t.dispose();
    const qc: Record<string, unknown> = {
      quant_method: 'nbx', format: o.scheme, version: 1,
      ...(o.scheme === 'int4' ? { group_size: o.group_size, symmetric: o.symmetric } : {}),
      ...(o.scheme === 'fp8_e4m3' ? { per_channel: o.per_channel ?? true } : {}),
      packed_tensor: 'qweight', scales_tensor: 'scales', zeros_tensor: 'zeros',
      modules_not_converted: skipped,
    };
    // an untied lm_head is a tensor of its own: a reader must not tie it to the (float) embedding
    const untie = untied.includes('lm_head') ? { tie_word_embeddings: false } : {};
    writeFileSync(join(out, 'config.json'), JSON.stringify({ ...config, ...untie, quantization_config: qc }, null, 2) + '\n');
    for (const f of COPY) if (existsSync(join(src, f))) copyFileSync(join(src, f), join(out, f));
    const bytes = Object.values(sd).reduce((s, t) => s + t.numel() * DTYPES[t.dt].itemsize, 0);
    return { quantized, skipped, untied, bytes };
  } finally {
    model.dispose();
  }
}

export async function quantizeCommand(args: string[]): Promise<number> {
  const { positionals, values } = parseArgs({ args, allowPositionals: true, strict: true, options: {
    scheme: { type: 'string' }, symmetric: { type: 'boolean' }, 'lm-head': { type: 'boolean' },
  } });
  if (positionals.length !== 2 || !values.scheme) {
    process.stderr.write(`usage: nbx quantize MODEL_DIR OUT_DIR --scheme ${Object.keys(SCHEMES).join('|')} [--symmetric] [--lm-head]\n`);
    return 2;
  }
  const t0 = performance.now();
  const lmHead = values['lm-head'] ?? false;
  const r = await quantizeFolder(positionals[0]!, positionals[1]!, values.scheme, { symmetric: values.symmetric, lmHead });
  const head = r.quantized.includes('lm_head') ? `lm_head quantized${r.untied.includes('lm_head') ? ' (untied: the embedding stays float)' : ''}` : 'lm_head float';
  process.stderr.write(`nbx quantize: ${r.quantized.length} Linear layers quantized (${values.scheme}; ${head}), ${r.skipped.length} kept float${r.skipped.length ? ` (${r.skipped.slice(0, 6).join(', ')}${r.skipped.length > 6 ? ', ...' : ''})` : ''}; ` +
    `${(r.bytes / 2 ** 20).toFixed(2)} MiB written to ${positionals[1]} in ${((performance.now() - t0) / 1000).toFixed(1)} s\n`);
  return 0;
}
