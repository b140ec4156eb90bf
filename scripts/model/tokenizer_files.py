"""Writes a tokenizer folder the way most Hugging Face repositories ship one.

transformers 5's save_pretrained puts the chat template in chat_template.jinja
and names its own backend class; models in the wild mostly carry the template
inside tokenizer_config.json with tokenizer_class PreTrainedTokenizerFast, so
that is the layout written here, and AutoTokenizer is checked to load it.
"""
import json
from pathlib import Path

from tokenizers import Tokenizer


def write_tokenizer_folder(tok: Tokenizer, out: Path, *, special_tokens: dict, chat_template: str,
                           model_max_length: int, extra: dict | None = None):
    """special_tokens maps bos_token/eos_token/unk_token/pad_token to token strings (or None)."""
    from transformers import AutoTokenizer

    out.mkdir(parents=True, exist_ok=True)
    tok.save(str(out / "tokenizer.json"))
    config = {
        "tokenizer_class": "PreTrainedTokenizerFast",
        **special_tokens,
        "model_max_length": model_max_length,
        "clean_up_tokenization_spaces": False,
        **(extra or {}),
        "chat_template": chat_template,
    }
    (out / "tokenizer_config.json").write_text(json.dumps(config, indent=2, ensure_ascii=False) + "\n")
    loaded = AutoTokenizer.from_pretrained(str(out))
    for key, value in special_tokens.items():
        assert getattr(loaded, key) == value, f"{key}: {getattr(loaded, key)!r} != {value!r}"
    assert loaded.chat_template == chat_template
    return loaded
