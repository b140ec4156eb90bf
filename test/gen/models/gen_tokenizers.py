#!/usr/bin/env python3
"""Generates the tokenizer fixtures in test/fixtures/tokenizers/.

Two tokenizers in the two BPE styles found in the wild, trained with the
`tokenizers` library on the King James Bible (.data/kjv.txt, written by
scripts/model/prepare_kjv.py), and cases.json with what transformers'
AutoTokenizer makes of a set of strings and conversations:

- bytelevel: GPT-2 / Llama 3 / Qwen style. Llama 3's split regex, then bytes
  mapped to printable characters, so nothing is ever unknown; <|begin_of_text|>
  added in front by the post-processor; Llama 3's chat template.
- bytefallback: Llama 2 / Mistral style. "▁" prepended and spaces replaced by
  "▁", BPE with byte_fallback so a character outside the vocabulary becomes its
  UTF-8 bytes as <0xNN> tokens, <unk>, <s> added in front; Llama 2's [INST]
  chat template.

Usage: python3 test/gen/models/gen_tokenizers.py [KJV_TEXT] [OUT_DIR]
Needs tokenizers and transformers (no PyTorch).
"""
import json
import sys
from pathlib import Path

import tokenizers
import transformers
from tokenizers import Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers, processors, trainers

sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "scripts" / "model"))
from tokenizer_files import write_tokenizer_folder  # noqa: E402

VOCAB_SIZE = 1000
LLAMA3_SPLIT = (
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*"
    r"|\s*[\r\n]+|\s+(?!\S)|\s+"
)

LLAMA3_CHAT = (
    "{{ bos_token }}{% for message in messages %}"
    "{{ '<|start_header_id|>' + message['role'] + '<|end_header_id|>\\n\\n' + message['content'] | trim + '<|eot_id|>' }}"
    "{% endfor %}{% if add_generation_prompt %}{{ '<|start_header_id|>assistant<|end_header_id|>\\n\\n' }}{% endif %}"
)

LLAMA2_CHAT = (
    "{% if messages[0]['role'] == 'system' %}{% set loop_messages = messages[1:] %}"
    "{% set system_message = messages[0]['content'] %}{% else %}{% set loop_messages = messages %}"
    "{% set system_message = false %}{% endif %}"
    "{% for message in loop_messages %}"
    "{% if (message['role'] == 'user') != (loop.index0 % 2 == 0) %}"
    "{{ raise_exception('Conversation roles must alternate user/assistant/user/assistant/...') }}{% endif %}"
    "{% if loop.index0 == 0 and system_message != false %}"
    "{% set content = '<<SYS>>\\n' + system_message + '\\n<</SYS>>\\n\\n' + message['content'] %}"
    "{% else %}{% set content = message['content'] %}{% endif %}"
    "{% if message['role'] == 'user' %}{{ bos_token + '[INST] ' + content.strip() + ' [/INST]' }}"
    "{% elif message['role'] == 'assistant' %}{{ ' ' + content.strip() + ' ' + eos_token }}{% endif %}"
    "{% endfor %}"
)

TEXTS = [
    "And God said, Let there be light: and there was light.",
    "Hello, world!",
    "In the beginning",
    " leading space",
    "two  spaces,   three spaces and a trailing space ",
    "line one\nline two\n\nafter an empty line\n",
    "tab\tseparated\tvalues\r\nwith CRLF",
    "Numbers: 0 7 42 1234 3.14159 1,000,000 2026-12-02",
    "Punctuation!? (brackets) [square] {curly} <angle> \"quotes\" 'single' -- em—dash… ;:@#$%^&*_+=|\\/~`",
    "Accents: café, naïve, Zürich, São Paulo, Ærøskøbing, façade",
    "CJK: 你好，世界。日本語のテキスト。한국어 텍스트",
    "Emoji: 😀 👍🏽 👨‍👩‍👧 🇫🇷 ❤️",
    "Byte fallback: ℵ ∑ ∞ ≠ ⊕ 𝔘𝔫𝔦𝔠𝔬𝔡𝔢 \u0007 \u00a0 \u200b",
    "",
    " ",
    "\n",
    "a",
    "THE LORD IS MY SHEPHERD; I SHALL NOT WANT.",
    "Mixed: The Word was made flesh (John 1:14) — 言葉は肉となった 🙏",
]


def kjv_lines(path: Path) -> list[str]:
    return [line for line in path.read_text(encoding="utf-8").splitlines() if line]


def train_bytelevel(text: Path) -> tuple[Tokenizer, dict]:
    specials = ["<|begin_of_text|>", "<|end_of_text|>", "<|start_header_id|>", "<|end_header_id|>",
                "<|eot_id|>", "<|pad|>"]
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(LLAMA3_SPLIT), behavior="isolated", invert=False),
        pre_tokenizers.ByteLevel(add_prefix_space=False, trim_offsets=True, use_regex=False),
    ])
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=VOCAB_SIZE, special_tokens=specials,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False)
    tok.train([str(text)], trainer)
    bos = "<|begin_of_text|>"
    tok.post_processor = processors.TemplateProcessing(
        single=f"{bos} $A:0", pair=f"{bos} $A:0 {bos}:1 $B:1", special_tokens=[(bos, tok.token_to_id(bos))])
    special = {"bos_token": bos, "eos_token": "<|eot_id|>", "unk_token": None, "pad_token": "<|pad|>"}
    return tok, special


def train_bytefallback(text: Path) -> tuple[Tokenizer, dict]:
    specials = ["<unk>", "<s>", "</s>"]
    normalizer = normalizers.Sequence([normalizers.Prepend("▁"), normalizers.Replace(" ", "▁")])
    # Train with a Metaspace pre-tokenizer so that, as in SentencePiece, no
    # merge crosses a word boundary ("▁word" pieces), leaving room for the 256
    # byte tokens inside the vocabulary size. The shipped tokenizer has no
    # pre-tokenizer, like Llama 2's converted tokenizer.json.
    base = Tokenizer(models.BPE(unk_token="<unk>"))
    base.pre_tokenizer = pre_tokenizers.Metaspace(replacement="▁", prepend_scheme="always", split=True)
    trainer = trainers.BpeTrainer(vocab_size=VOCAB_SIZE - 256, special_tokens=specials,
                                  limit_alphabet=100, show_progress=False)
    base.train([str(text)], trainer)
    trained = json.loads(base.to_str())["model"]
    # Llama 2's layout: <unk> <s> </s>, then <0x00>..<0xFF>, then the pieces.
    vocab = {token: i for i, token in enumerate(specials)}
    for b in range(256):
        vocab[f"<0x{b:02X}>"] = len(vocab)
    for token, _ in sorted(trained["vocab"].items(), key=lambda kv: kv[1]):
        if token not in vocab:
            vocab[token] = len(vocab)
    merges = [tuple(m.split(" ")) if isinstance(m, str) else tuple(m) for m in trained["merges"]]
    tok = Tokenizer(models.BPE(vocab=vocab, merges=merges, unk_token="<unk>", fuse_unk=True, byte_fallback=True))
    tok.add_special_tokens(specials)
    tok.normalizer = normalizer
    tok.decoder = decoders.Sequence([
        decoders.Replace("▁", " "), decoders.ByteFallback(), decoders.Fuse(), decoders.Strip(" ", 1, 0)])
    tok.post_processor = processors.TemplateProcessing(
        single="<s> $A:0", pair="<s> $A:0 <s>:1 $B:1", special_tokens=[("<s>", 1)])
    special = {"bos_token": "<s>", "eos_token": "</s>", "unk_token": "<unk>", "pad_token": "<unk>"}
    return tok, special


CONVERSATIONS = {
    "bytelevel": [
        [{"role": "user", "content": "Who created the heaven and the earth?"}],
        [{"role": "system", "content": "You answer in the words of the King James Bible."},
         {"role": "user", "content": "What did God say?"}],
        [{"role": "user", "content": "Hello"}, {"role": "assistant", "content": "Peace be unto you."},
         {"role": "user", "content": "  And then?  "}],
    ],
    "bytefallback": [
        [{"role": "user", "content": "Who created the heaven and the earth?"}],
        [{"role": "system", "content": "You answer in the words of the King James Bible."},
         {"role": "user", "content": "What did God say?"}],
        [{"role": "user", "content": "Hello"}, {"role": "assistant", "content": "Peace be unto you."},
         {"role": "user", "content": "  And then?  "}],
    ],
}


def cases_for(name: str, hf, special: dict) -> dict:
    inline_special = (f"{special['bos_token']}Hello{special['eos_token']} world"
                      if name == "bytefallback" else "<|begin_of_text|>Hello<|eot_id|> world<|pad|>")
    cases = []
    for text in TEXTS + [inline_special]:
        case = {"text": text}
        for add in (True, False):
            ids = hf.encode(text, add_special_tokens=add)
            key = "with_special" if add else "no_special"
            case[f"ids_{key}"] = ids
            case[f"tokens_{key}"] = hf.convert_ids_to_tokens(ids)
            case[f"decode_{key}_skip"] = hf.decode(ids, skip_special_tokens=True)
            case[f"decode_{key}_keep"] = hf.decode(ids, skip_special_tokens=False)
        cases.append(case)
    chats = []
    for messages in CONVERSATIONS[name]:
        for gen in (False, True):
            text = hf.apply_chat_template(messages, tokenize=False, add_generation_prompt=gen)
            ids = hf.apply_chat_template(messages, tokenize=True, add_generation_prompt=gen, return_dict=True)["input_ids"]
            chats.append({"messages": messages, "add_generation_prompt": gen, "text": text, "ids": list(ids)})
    return {
        "tokenizer": name,
        "generated_by": "test/gen/models/gen_tokenizers.py",
        "library": "transformers.AutoTokenizer",
        "transformers_version": transformers.__version__,
        "tokenizers_version": tokenizers.__version__,
        "vocab_size": hf.backend_tokenizer.get_vocab_size() if hasattr(hf, "backend_tokenizer") else len(hf),
        "special_tokens": {k: v for k, v in special.items()},
        "special_token_ids": {k: (hf.convert_tokens_to_ids(v) if v is not None else None) for k, v in special.items()},
        "settings": {"encode": "hf.encode(text, add_special_tokens=...)",
                     "decode": "hf.decode(ids, skip_special_tokens=...) of the ids in the same case",
                     "chat": "hf.apply_chat_template(messages, tokenize=False|True, add_generation_prompt=...)"},
        "cases": cases,
        "chat": chats,
    }


def main() -> None:
    root = Path(__file__).resolve().parents[3]
    text = Path(sys.argv[1]) if len(sys.argv) > 1 else root / ".data" / "kjv.txt"
    out = Path(sys.argv[2]) if len(sys.argv) > 2 else root / "test" / "fixtures" / "tokenizers"
    for name, train, template in (("bytelevel", train_bytelevel, LLAMA3_CHAT),
                                  ("bytefallback", train_bytefallback, LLAMA2_CHAT)):
        tok, special = train(text)
        folder = out / name
        hf = write_tokenizer_folder(tok, folder, special_tokens=special, chat_template=template,
                                    model_max_length=4096)
        cases = cases_for(name, hf, special)
        (folder / "cases.json").write_text(json.dumps(cases, indent=1, ensure_ascii=False) + "\n")
        print(f"{folder}: vocab {tok.get_vocab_size()}, {len(cases['cases'])} cases, {len(cases['chat'])} chats")


if __name__ == "__main__":
    main()
