#!/usr/bin/env node
// Held-out perplexity of the embedded model (assets/nbx-kjv) in float and quantized (issue #21's quality
// targets: int8 within 1% of float, int4 g128 within 5%). The held-out text is train.py's: every 50th
// chapter (index % 50 == 25) of the KJV as scripts/model/prepare_kjv.py writes it, each chapter
// <|bos|> ids <|eos|>, consecutive windows of 512 + 1 tokens; the loss is the mean cross-entropy per
// token in float32 (the model card's "held-out" figure: 2.9970 for the shipped weights).
// Quantization is nbx.quant.quantize_ (what `nbx quantize` writes) applied in memory; the '+ lm_head'
// rows quantize lm_head too (quantize_'s lm_head: true, `nbx quantize --lm-head`: gpt-fast's convention),
// which unties it from the embedding (the embedding lookup stays float).
//
//   python3 scripts/model/prepare_kjv.py .data/kjv.txt     (needs Debian's bible-kjv)
//   npm run build && node scripts/quant-perplexity.mjs [.data/kjv.txt] [--windows N] [--only NAME,NAME]
//   (--only: the variants whose names contain one of the strings, float32 always)

import { readFileSync } from 'node:fs';
import { join, dirname } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
const nbx = await import(join(root, 'dist/src/index.js'));
const args = process.argv.slice(2);
const wi = args.indexOf('--windows');
const maxWindows = wi >= 0 ? Number(args[wi + 1]) : Infinity;
const oi = args.indexOf('--only');
const only = oi >= 0 ? args[oi + 1].split(',') : null;
const textPath = args.find((a, i) => !a.startsWith('--') && args[i - 1] !== '--windows' && args[i - 1] !== '--only') ?? join(root, '.data/kjv.txt');
const MODEL = join(root, 'assets/nbx-kjv');
const SEQ = 512;

const base = await nbx.models.load(MODEL, { dtype: 'float32' });
const tok = base.tokenizer;
const chapters = readFileSync(textPath, 'utf8').trim().split('\n\n');
const stream = [];
chapters.forEach((c, i) => { if (i % 50 === 25) stream.push(0, ...tok.encode(c, { add_special_tokens: false }), 1); });
const nWin = Math.min(Math.floor((stream.length - 1) / SEQ), maxWindows);
console.log(`held-out: ${stream.length} tokens, ${nWin} windows of ${SEQ}`);

function heldOutLoss(model) {
  let total = 0, count = 0;
  for (let w = 0; w < nWin; w++) {
    nbx.scope(() => {
      const win = stream.slice(w * SEQ, w * SEQ + SEQ + 1);
      const x = nbx.tensor([win.slice(0, SEQ)], { dtype: 'int64' }), y = nbx.tensor(win.slice(1), { dtype: 'int64' });
      const logits = model.forward(x).view([SEQ, -1]);
      total += Number(nbx.nn.functional.cross_entropy(logits, y, { reduction: 'sum' }).item());
      count += SEQ;
    });
  }
  return total / count;
}

const variants = [
  ['float32', null],
  ['int8', { scheme: 'int8' }],
  ['int8 + lm_head', { scheme: 'int8', lm_head: true }],
  ['int4 g128 asym', { scheme: 'int4', group_size: 128 }],
  ['int4 g128 asym + lm_head', { scheme: 'int4', group_size: 128, lm_head: true }],
  ['int4 g128 sym', { scheme: 'int4', group_size: 128, symmetric: true }],
  ['int4 g64 asym', { scheme: 'int4', group_size: 64 }],
  ['int4 g32 asym', { scheme: 'int4', group_size: 32 }],
  ['fp8 e4m3 per-channel', { scheme: 'fp8_e4m3' }],
];
let floatLoss = 0;
const rows = [];
for (const [name, opts] of variants) {
  if (opts && only && !only.some((o) => name.includes(o))) continue;
  const m = opts ? await nbx.models.load(MODEL, { dtype: 'float32' }) : base;
  let note = '';
  if (opts) {
    const { quantized, skipped, untied } = nbx.quant.quantize_(m, opts);
    const downs = skipped.filter((n) => n !== 'lm_head').length;
    const head = untied.includes('lm_head') ? 'lm_head quantized (untied; the embedding stays float)' : 'lm_head (tied embedding) float';
    note = `${quantized.length} Linears quantized; ${head}${downs ? `; ${downs} down_proj kept float (K = 576 not a multiple of ${opts.group_size})` : ''}`;
  }
  const t0 = performance.now();
  const loss = heldOutLoss(m);
  if (!opts) floatLoss = loss;
  const ppl = Math.exp(loss), rel = opts ? (ppl / Math.exp(floatLoss) - 1) * 100 : 0;
  rows.push(`| ${name} | ${loss.toFixed(4)} | ${ppl.toFixed(3)} | ${opts ? `${rel >= 0 ? '+' : ''}${rel.toFixed(2)}%` : '—'} | ${note} |`);
  console.log(`${name}: loss ${loss.toFixed(4)}, perplexity ${ppl.toFixed(3)}${opts ? ` (${rel.toFixed(2)}% vs float)` : ''} [${((performance.now() - t0) / 1000).toFixed(1)} s] ${note}`);
  if (m !== base) m.dispose();
}
console.log('\n| weights | held-out loss (nats/token) | perplexity | vs float | note |\n| --- | --- | --- | --- | --- |\n' + rows.join('\n'));
