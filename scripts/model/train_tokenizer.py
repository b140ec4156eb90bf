#!/usr/bin/env python3
"""Trains the byte-level BPE tokenizer of the embedded model (assets/nbx-kjv).

GPT-2 style: bytes mapped to printable characters, GPT-2's pre-tokenizer
regex, no prefix space, so every string round-trips exactly and no input is
ever unknown. The post-processor adds <|bos|> in front, as Llama 3's does.

Usage: python3 scripts/model/train_tokenizer.py [TEXT] [OUT_DIR] [VOCAB_SIZE]
       (defaults .data/kjv.txt assets/nbx-kjv 4096)
"""
import json
import sys
from pathlib import Path

from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers

sys.path.insert(0, str(Path(__file__).resolve().parent))
from tokenizer_files import write_tokenizer_folder  # noqa: E402

BOS, EOS, PAD = "<|bos|>", "<|eos|>", "<|pad|>"
CONTEXT = 1024

# The model was trained on plain text only, so the chat template renders a
# conversation as plain lines of text; the model answers by continuing it.
CHAT_TEMPLATE = (
    "{{ bos_token }}"
    "{% for message in messages %}{{ message['content'] | trim }}\n{% endfor %}"
)


def main() -> None:
    text = Path(sys.argv[1] if len(sys.argv) > 1 else ".data/kjv.txt")
    out = Path(sys.argv[2] if len(sys.argv) > 2 else "assets/nbx-kjv")
    vocab_size = int(sys.argv[3]) if len(sys.argv) > 3 else 4096

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=[BOS, EOS, PAD],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train([str(text)], trainer)
    bos_id = tok.token_to_id(BOS)
    tok.post_processor = processors.TemplateProcessing(
        single=f"{BOS} $A:0",
        pair=f"{BOS} $A:0 {BOS}:1 $B:1",
        special_tokens=[(BOS, bos_id)],
    )

    fast = write_tokenizer_folder(
        tok, out,
        special_tokens={"bos_token": BOS, "eos_token": EOS, "pad_token": PAD},
        chat_template=CHAT_TEMPLATE, model_max_length=CONTEXT,
    )
    print(f"{out}: vocab {tok.get_vocab_size()}, bos {bos_id}, eos {tok.token_to_id(EOS)}, "
          f"pad {tok.token_to_id(PAD)}")
    sample = "And God said, Let there be light: and there was light."
    ids = fast.encode(sample)
    print(f"{len(ids)} tokens for {sample!r}: {ids}")
    assert fast.decode(ids, skip_special_tokens=True) == sample


if __name__ == "__main__":
    main()
