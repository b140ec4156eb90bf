// Token ids to text as they arrive, whole characters only. Decoding token by token would split a
// character whose UTF-8 bytes span several tokens (byte-level BPE, byte fallback) and would lose the
// spaces a Metaspace decoder strips at the start of a text; so each piece is the difference between
// decoding a short window with and without the new tokens (the method of Hugging Face's
// text-generation-inference), held back while the text ends in U+FFFD (an incomplete character).

import type { Tokenizer } from '../tokenizer/index.js';

const REPLACEMENT = '\ufffd';

export class IncrementalDecoder {
  private readonly ids: number[] = [];
  private prefixOffset = 0;
  private readOffset = 0;

  /**
   * @param context ids that come before the text to produce (the prompt's last few tokens): they
   *   are decoded as context only, so the first piece has the spacing it has after the prompt.
   */
  constructor(private readonly tokenizer: Tokenizer, context: readonly number[] = [], private readonly skipSpecial = true) {
    const tail = context.slice(Math.max(0, context.length - 5));
    this.ids.push(...tail);
    this.prefixOffset = 0;
    this.readOffset = tail.length;
  }

  private text(from: number, to: number): string {
    return this.tokenizer.decode(this.ids.slice(from, to), { skip_special_tokens: this.skipSpecial });
  }

  /** Adds tokens; returns the text that is now complete ('' while a character is still incomplete). */
  push(...ids: number[]): string {
    this.ids.push(...ids);
    const prefix = this.text(this.prefixOffset, this.readOffset);
    const full = this.text(this.prefixOffset, this.ids.length);
    if (full.length > prefix.length && !full.endsWith(REPLACEMENT)) {
      this.prefixOffset = this.readOffset;
      this.readOffset = this.ids.length;
      return full.slice(prefix.length);
    }
    return '';
  }

  /** Whatever is still held back (an incomplete character decodes to U+FFFD, as decode() gives it). */
  flush(): string {
    const prefix = this.text(this.prefixOffset, this.readOffset);
    const full = this.text(this.prefixOffset, this.ids.length);
    this.prefixOffset = this.readOffset = this.ids.length;
    return full.length > prefix.length ? full.slice(prefix.length) : '';
  }
}
