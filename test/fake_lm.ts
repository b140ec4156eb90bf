// Test doubles for generation: a byte-level BPE tokenizer whose token id is the byte value (256 is
// the special <|endoftext|>), and a CausalLM whose logits come from a small table, so that what
// generate() does with them is known exactly.

import * as nbx from '../src/index.js';
import type { CausalLM, ForwardOptions, KVCache } from '../src/models/types.js';
import { PretrainedTokenizer } from '../src/tokenizer/index.js';

/** GPT-2's bytes_to_unicode: the printable stand-in of each byte in byte-level BPE vocabularies. */
export function bytesToUnicode(): string[] {
  const keep: number[] = [];
  for (let b = 33; b <= 126; b++) keep.push(b);
  for (let b = 161; b <= 172; b++) keep.push(b);
  for (let b = 174; b <= 255; b++) keep.push(b);
  const out: string[] = new Array(256);
  let n = 0;
  for (let b = 0; b < 256; b++) out[b] = String.fromCodePoint(keep.includes(b) ? b : 256 + n++);
  return out;
}

export const EOS = 256;

/** tokenizer.json of a byte-level BPE without merges: id = byte value, plus <|endoftext|> = 256. */
export function byteTokenizerJson(): Record<string, unknown> {
  const vocab: Record<string, number> = {};
  bytesToUnicode().forEach((ch, b) => { vocab[ch] = b; });
  return {
    version: '1.0', truncation: null, padding: null,
    added_tokens: [{ id: EOS, content: '<|endoftext|>', single_word: false, lstrip: false, rstrip: false, normalized: false, special: true }],
    normalizer: null,
    pre_tokenizer: { type: 'ByteLevel', add_prefix_space: false, trim_offsets: true, use_regex: true },
    post_processor: { type: 'ByteLevel', add_prefix_space: true, trim_offsets: false, use_regex: true },
    decoder: { type: 'ByteLevel', add_prefix_space: true, trim_offsets: true, use_regex: true },
    model: { type: 'BPE', dropout: null, unk_token: null, continuing_subword_prefix: '', end_of_word_suffix: '', fuse_unk: false, byte_fallback: false, ignore_merges: false, vocab, merges: [] },
  };
}

export const CHAT_TEMPLATE = "{% for m in messages %}<{{ m.role }}>{{ m.content }}{{ eos_token }}{% endfor %}{% if add_generation_prompt %}<assistant>{% endif %}";

export function byteTokenizerConfig(): Record<string, unknown> {
  return { eos_token: '<|endoftext|>', bos_token: null, pad_token: null, clean_up_tokenization_spaces: false, chat_template: CHAT_TEMPLATE };
}

export function byteTokenizer(): PretrainedTokenizer {
  return new PretrainedTokenizer(byteTokenizerJson(), byteTokenizerConfig());
}

export const bytes = (s: string): number[] => [...Buffer.from(s, 'utf8')];

class FakeCache implements KVCache {
  length = 0;
  disposed = false;
  dispose(): void { this.disposed = true; }
}

export interface ForwardCall { ids: number[][]; mask: number[][] | null; positions: number[][] | null; past: number; keep: number | undefined }

/**
 * Logits for the token after position p (p = the position id of the current token) favour
 * script[(p + 1) % script.length] by `margin`, over a fixed, distinct background; so greedy decoding
 * of a prompt equal to script[0..L) continues with script[L..].
 */
export class ScriptedLM implements CausalLM {
  readonly config: CausalLM['config'];
  readonly device = nbx.Device.of('cpu');
  readonly dtype = nbx.float32;
  readonly tokenizer = byteTokenizer();
  readonly calls: ForwardCall[] = [];
  readonly caches: FakeCache[] = [];
  constructor(readonly script: number[], readonly generationConfig: Record<string, unknown> = {}, readonly margin = 10, contextLength = 512) {
    this.config = { model_type: 'fake', vocab_size: 257, max_position_embeddings: contextLength };
  }

  background(v: number): number { return Math.sin(v * 12.9898) * 2; }

  forward(input: nbx.Tensor, opts: ForwardOptions = {}): nbx.Tensor {
    const [b, t] = input.shape as [number, number];
    const ids = input.tolist() as number[][];
    const cache = opts.cache as FakeCache;
    const past = cache.length;
    const mask = opts.attention_mask ? (opts.attention_mask.tolist() as number[][]) : null;
    const positions = opts.position_ids ? (opts.position_ids.tolist() as number[][]) : null;
    this.calls.push({ ids, mask, positions, past, keep: opts.logits_to_keep });
    const keep = opts.logits_to_keep && opts.logits_to_keep > 0 ? Math.min(opts.logits_to_keep, t) : t;
    const v = this.config.vocab_size;
    const out = new Float32Array(b * keep * v);
    for (let r = 0; r < b; r++) {
      for (let k = 0; k < keep; k++) {
        const tt = t - keep + k;
        const pos = positions ? positions[r]![tt]! : past + tt;
        const want = this.script[(pos + 1) % this.script.length]!;
        for (let j = 0; j < v; j++) out[(r * keep + k) * v + j] = this.background(j) + (j === want ? this.margin : 0);
      }
    }
    cache.length += t;
    return nbx.Tensor.fromStorage(out, 'float32', [b, keep, v]);
  }

  newCache(): KVCache { const c = new FakeCache(); this.caches.push(c); return c; }
  dispose(): void {}
}
