// Tokenizers from tokenizer.json (@huggingface/tokenizers) and chat templates (@huggingface/jinja).
// Placeholder contract; the implementation replaces the body.

export interface ChatMessage { role: string; content: string }

export interface Tokenizer {
  encode(text: string, opts?: { add_special_tokens?: boolean }): number[];
  decode(ids: readonly number[], opts?: { skip_special_tokens?: boolean }): string;
  apply_chat_template(messages: readonly ChatMessage[], opts?: { add_generation_prompt?: boolean; tokenize?: boolean }): string | number[];
  readonly eos_token_id: number | null;
  readonly bos_token_id: number | null;
  readonly pad_token_id: number | null;
}
