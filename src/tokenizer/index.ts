// Tokenizers from a Hugging Face folder, AutoTokenizer's job: tokenizer.json runs through
// @huggingface/tokenizers (byte-level BPE, BPE with byte fallback, Unigram, WordPiece), chat templates
// through @huggingface/jinja, special tokens from tokenizer_config.json. Method and option names are
// transformers' (encode, decode, apply_chat_template, eos_token_id, ...).

import { Tokenizer as HFTokenizer } from '@huggingface/tokenizers';
import { Template } from '@huggingface/jinja';
import { FormatError, ValueError } from '../errors.js';

export interface ChatMessage { role: string; content: string; [key: string]: unknown }

export interface ChatTemplateOptions {
  /** Append the template's assistant header so the model answers next (transformers' add_generation_prompt). */
  add_generation_prompt?: boolean;
  /** Return token ids (default, as transformers) or the rendered string. */
  tokenize?: boolean;
  /** Leave the last message open so the model continues it (transformers' continue_final_message). */
  continue_final_message?: boolean;
  /** Extra variables for the template (transformers' **kwargs to apply_chat_template). */
  template_kwargs?: Record<string, unknown>;
}

export interface Tokenizer {
  encode(text: string, opts?: { add_special_tokens?: boolean }): number[];
  decode(ids: readonly number[], opts?: { skip_special_tokens?: boolean; clean_up_tokenization_spaces?: boolean }): string;
  apply_chat_template(messages: readonly ChatMessage[], opts?: ChatTemplateOptions): string | number[];
  readonly eos_token_id: number | null;
  readonly bos_token_id: number | null;
  readonly pad_token_id: number | null;
  readonly unk_token_id?: number | null;
  readonly eos_token?: string | null;
  readonly bos_token?: string | null;
  readonly pad_token?: string | null;
  readonly unk_token?: string | null;
  /** Ids of every special token (added tokens marked special), as transformers' all_special_ids. */
  readonly all_special_ids?: readonly number[];
  /** The chat template's source, or null when the folder has none. */
  readonly chat_template?: string | null;
  /** Size of the vocabulary including added tokens (transformers' len(tokenizer)). */
  readonly vocab_size?: number;
  token_to_id?(token: string): number | null;
  id_to_token?(id: number): string | null;
}

/** What tokenizer_config.json holds that this module reads (everything else is ignored). */
export interface TokenizerConfig {
  bos_token?: unknown; eos_token?: unknown; unk_token?: unknown; pad_token?: unknown;
  sep_token?: unknown; cls_token?: unknown; mask_token?: unknown;
  additional_special_tokens?: unknown; extra_special_tokens?: unknown;
  added_tokens_decoder?: Record<string, { content: string; special?: boolean }>;
  chat_template?: unknown;
  clean_up_tokenization_spaces?: boolean;
  [key: string]: unknown;
}

const SPECIAL_NAMES = ['bos_token', 'eos_token', 'unk_token', 'sep_token', 'pad_token', 'cls_token', 'mask_token'] as const;

/** A special-token entry is a string, an AddedToken dict ({content, ...}) or null. */
function tokenContent(v: unknown): string | null {
  if (typeof v === 'string') return v;
  if (v !== null && typeof v === 'object' && typeof (v as { content?: unknown }).content === 'string') return (v as { content: string }).content;
  return null;
}

/** chat_template is a string, or a list of {name, template} of which transformers uses "default". */
function pickTemplate(v: unknown, where: string): string | null {
  if (v === undefined || v === null) return null;
  if (typeof v === 'string') return v;
  if (Array.isArray(v)) {
    const named = v as { name?: unknown; template?: unknown }[];
    const def = named.find((t) => t.name === 'default') ?? (named.length === 1 ? named[0] : undefined);
    if (def && typeof def.template === 'string') return def.template;
    throw new FormatError('tokenizer', `${where}: chat_template lists ${named.map((t) => String(t.name)).join(', ')} but none is named "default"`);
  }
  throw new FormatError('tokenizer', `${where}: chat_template must be a string or a list of {name, template}, got ${typeof v}`);
}

/** A tokenizer.json plus tokenizer_config.json, with transformers' methods. */
export class PretrainedTokenizer implements Tokenizer {
  readonly bos_token: string | null;
  readonly eos_token: string | null;
  readonly unk_token: string | null;
  readonly pad_token: string | null;
  readonly bos_token_id: number | null;
  readonly eos_token_id: number | null;
  readonly unk_token_id: number | null;
  readonly pad_token_id: number | null;
  readonly all_special_ids: readonly number[];
  readonly chat_template: string | null;
  readonly vocab_size: number;
  private readonly hf: HFTokenizer;
  private readonly config: TokenizerConfig;
  private readonly cleanUpSpaces: boolean;
  private compiledTemplate: Template | null = null;

  /**
   * @param tokenizerJson the parsed tokenizer.json
   * @param config the parsed tokenizer_config.json ({} when the folder has none)
   * @param chatTemplate a chat template that overrides config.chat_template (chat_template.jinja)
   */
  constructor(tokenizerJson: unknown, config: TokenizerConfig = {}, chatTemplate: string | null = null) {
    if (tokenizerJson === null || typeof tokenizerJson !== 'object' || !('model' in tokenizerJson)) {
      throw new FormatError('tokenizer', 'tokenizer.json has no "model" section; is it a Hugging Face tokenizers file?');
    }
    const json = tokenizerJson as { added_tokens?: unknown[] };
    // The library requires every section key; files written by older tokenizers omit empty ones.
    const full = { normalizer: null, pre_tokenizer: null, post_processor: null, decoder: null, added_tokens: [], ...json };
    this.config = config;
    try {
      this.hf = new HFTokenizer(full, { ...config, additional_special_tokens: specialList(config) });
    } catch (e) {
      throw new FormatError('tokenizer', `tokenizer.json could not be read: ${(e as Error).message}`);
    }
    const special = new Set<number>();
    for (const [id, t] of this.hf.get_added_tokens_decoder()) if (t.special) special.add(id);
    for (const [id, t] of Object.entries(config.added_tokens_decoder ?? {})) if (t.special) special.add(Number(id));
    const idOf = (tok: string | null): number | null => (tok === null ? null : this.hf.token_to_id(tok) ?? null);
    this.bos_token = tokenContent(config.bos_token);
    this.eos_token = tokenContent(config.eos_token);
    this.unk_token = tokenContent(config.unk_token);
    this.pad_token = tokenContent(config.pad_token);
    this.bos_token_id = idOf(this.bos_token);
    this.eos_token_id = idOf(this.eos_token);
    this.unk_token_id = idOf(this.unk_token);
    this.pad_token_id = idOf(this.pad_token);
    for (const name of SPECIAL_NAMES) { const id = idOf(tokenContent(config[name])); if (id !== null) special.add(id); }
    for (const tok of specialList(config)) { const id = idOf(tok); if (id !== null) special.add(id); }
    this.all_special_ids = [...special].sort((a, b) => a - b);
    this.chat_template = chatTemplate ?? pickTemplate(config.chat_template, 'tokenizer_config.json');
    this.vocab_size = this.hf.get_vocab(true).size;
    // transformers 5 defaults to False when the config does not say.
    this.cleanUpSpaces = config.clean_up_tokenization_spaces ?? false;
  }

  encode(text: string, opts: { add_special_tokens?: boolean } = {}): number[] {
    if (typeof text !== 'string') throw new ValueError('tokenizer.encode', `text must be a string, got ${typeof text}`);
    return this.hf.encode(text, { add_special_tokens: opts.add_special_tokens ?? true }).ids;
  }

  decode(ids: readonly number[], opts: { skip_special_tokens?: boolean; clean_up_tokenization_spaces?: boolean } = {}): string {
    const list = Array.from(ids, Number);
    for (const id of list) {
      if (!Number.isInteger(id) || id < 0 || id >= this.vocab_size) {
        throw new ValueError('tokenizer.decode', `token id ${id} is outside the vocabulary (0..${this.vocab_size - 1})`);
      }
    }
    const kept = opts.skip_special_tokens ? list.filter((id) => !this.all_special_ids.includes(id)) : list;
    if (kept.length === 0) return '';
    return this.hf.decode(kept, { clean_up_tokenization_spaces: opts.clean_up_tokenization_spaces ?? this.cleanUpSpaces });
  }

  token_to_id(token: string): number | null { return this.hf.token_to_id(token) ?? null; }
  id_to_token(id: number): string | null { return this.hf.id_to_token(id) ?? null; }

  /** The variables transformers passes to every chat template besides the messages. */
  private specialTokensMap(): Record<string, unknown> {
    const map: Record<string, unknown> = {};
    for (const name of SPECIAL_NAMES) { const c = tokenContent(this.config[name]); if (c !== null) map[name] = c; }
    const extra = specialList(this.config);
    if (extra.length) map.additional_special_tokens = extra;
    return map;
  }

  apply_chat_template(messages: readonly ChatMessage[], opts: ChatTemplateOptions = {}): string | number[] {
    const op = 'apply_chat_template';
    if (this.chat_template === null) {
      throw new ValueError(op, 'this tokenizer has no chat template (tokenizer_config.json has no chat_template and the folder no chat_template.jinja); use encode() on plain text instead');
    }
    if (!Array.isArray(messages) || messages.some((m) => m === null || typeof m !== 'object' || typeof m.role !== 'string')) {
      throw new ValueError(op, 'messages must be a list of {role, content} objects');
    }
    if (opts.add_generation_prompt && opts.continue_final_message) {
      throw new ValueError(op, 'continue_final_message and add_generation_prompt are not compatible: use one of them');
    }
    if (this.compiledTemplate === null) {
      try { this.compiledTemplate = new Template(this.chat_template); } catch (e) {
        throw new FormatError(op, `the chat template does not parse: ${(e as Error).message}`);
      }
    }
    let text: string;
    try {
      text = this.compiledTemplate.render({
        ...this.specialTokensMap(), ...(opts.template_kwargs ?? {}),
        messages, add_generation_prompt: opts.add_generation_prompt ?? false,
      });
    } catch (e) {
      throw new ValueError(op, `the chat template failed: ${(e as Error).message}`);
    }
    if (opts.continue_final_message) {
      const last = messages[messages.length - 1];
      const content = typeof last?.content === 'string' ? last.content.trim() : '';
      const at = content ? text.lastIndexOf(content) : -1;
      if (at < 0) throw new ValueError(op, 'continue_final_message: the final message does not appear in the rendered chat');
      text = text.slice(0, at + content.length);
    }
    // The template writes the special tokens itself, so tokenizing adds none (as transformers does).
    return opts.tokenize === false ? text : this.encode(text, { add_special_tokens: false });
  }
}

function specialList(config: TokenizerConfig): string[] {
  const out: string[] = [];
  for (const v of [config.additional_special_tokens, config.extra_special_tokens]) {
    const list = Array.isArray(v) ? v : v && typeof v === 'object' ? Object.values(v) : [];
    for (const t of list) { const c = tokenContent(t); if (c !== null && !out.includes(c)) out.push(c); }
  }
  return out;
}

async function readJson(path: string, what: string): Promise<unknown> {
  const { readFile } = await import('node:fs/promises');
  let text: string;
  try { text = await readFile(path, 'utf8'); } catch (e) {
    throw new FormatError('tokenizer', `cannot read ${what} (${path}): ${(e as NodeJS.ErrnoException).code ?? (e as Error).message}`);
  }
  try { return JSON.parse(text); } catch (e) {
    throw new FormatError('tokenizer', `${what} (${path}) is not valid JSON: ${(e as Error).message}`);
  }
}

/**
 * AutoTokenizer.from_pretrained(dir) for a local folder: tokenizer.json (required),
 * tokenizer_config.json, chat_template.jinja (transformers' newer place for the template).
 */
export async function loadTokenizer(dir: string): Promise<PretrainedTokenizer> {
  const { existsSync, readFileSync } = await import('node:fs');
  const { join } = await import('node:path');
  const tokPath = join(dir, 'tokenizer.json');
  if (!existsSync(tokPath)) {
    throw new FormatError('tokenizer', `${dir} has no tokenizer.json; only the tokenizers-library format is supported (save the tokenizer with transformers' save_pretrained)`);
  }
  const json = await readJson(tokPath, 'tokenizer.json');
  const cfgPath = join(dir, 'tokenizer_config.json');
  const config = existsSync(cfgPath) ? await readJson(cfgPath, 'tokenizer_config.json') as TokenizerConfig : {};
  const jinjaPath = join(dir, 'chat_template.jinja');
  const template = existsSync(jinjaPath) ? readFileSync(jinjaPath, 'utf8') : null;
  return new PretrainedTokenizer(json, config, template);
}
