#!/usr/bin/env python3
"""Writes what transformers does with the embedded model, and its model card.

- test/fixtures/models/nbx-kjv-reference.json: for each prompt, the token ids
  from the tokenizer, transformers' greedy continuation (32 new tokens) and a
  sampled one (torch.manual_seed(42) right before generate), with the decoded
  texts and every setting, computed in float32 on the CPU (the bfloat16 file
  loaded with dtype=torch.float32, as nbx loads it by default).
- MODEL_DIR/README.md: the model card, from the training metrics of train.py
  and the losses of the shipped weights, computed here in float32 on the CPU
  over the same windows as train.py's float32 losses.

Usage: python3 scripts/model/reference.py [MODEL_DIR] [METRICS_JSON] [REFERENCE_JSON]
"""
import json
import sys
from pathlib import Path

import torch
import transformers
from safetensors import safe_open
from tokenizers import Tokenizer
from transformers import AutoModelForCausalLM, AutoTokenizer

from train import load_documents, mean_loss, windows_of

PROMPTS = ["And God said", "The LORD is my shepherd"]
NEW_TOKENS = 32
SEED = 42
SAMPLING = dict(do_sample=True, temperature=0.8, top_k=40, top_p=0.95)
CARD_SAMPLES = [("And God said", 0), ("And God said", 1), ("In the beginning", 2), ("Blessed are", 3)]


def generate(model, tok, prompt: str, **options):
    enc = tok(prompt, return_tensors="pt")
    with torch.no_grad():
        out = model.generate(enc.input_ids, attention_mask=enc.attention_mask, **options)
    return enc.input_ids[0].tolist(), out[0].tolist()


def shipped_losses(model, model_dir: Path, text_path: Path, seq: int) -> dict:
    """Float32 losses of the weights as shipped, over train.py's windows (held-out text and training sample)."""
    tokenizer = Tokenizer.from_file(str(model_dir / "tokenizer.json"))
    bos, eos = (tokenizer.token_to_id(t) for t in ("<|bos|>", "<|eos|>"))
    train, held, _ = load_documents(text_path, tokenizer, bos, eos)
    held_windows = windows_of(held, seq)
    span = seq + 1
    sample = torch.randint(0, train.numel() - span, (len(held_windows),), generator=torch.Generator().manual_seed(1))
    train_windows = torch.stack([train[s: s + span] for s in sample.tolist()])
    cpu = torch.device("cpu")
    losses = {"train": mean_loss(model, train_windows, cpu, autocast=False),
              "held_out": mean_loss(model, held_windows, cpu, autocast=False)}
    model.eval()
    return losses


def weights_dtype(model_dir: Path) -> str:
    with safe_open(model_dir / "model.safetensors", "pt") as f:
        dtypes = {str(f.get_slice(name).get_dtype()) for name in f.keys()}
    return {"F32": "float32", "BF16": "bfloat16", "F16": "float16"}.get(dtypes.pop(), "mixed") if len(dtypes) == 1 \
        else "mixed"


def main() -> None:
    model_dir = Path(sys.argv[1] if len(sys.argv) > 1 else "assets/nbx-kjv")
    metrics = json.loads(Path(sys.argv[2] if len(sys.argv) > 2 else ".data/train_metrics.json").read_text())
    reference_path = Path(sys.argv[3] if len(sys.argv) > 3 else "test/fixtures/models/nbx-kjv-reference.json")
    torch.set_num_threads(4)
    tok = AutoTokenizer.from_pretrained(model_dir)
    model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32).eval()
    stored = weights_dtype(model_dir)

    cases = []
    for prompt in PROMPTS:
        ids, greedy = generate(model, tok, prompt, do_sample=False, max_new_tokens=NEW_TOKENS)
        torch.manual_seed(SEED)
        _, sampled = generate(model, tok, prompt, max_new_tokens=NEW_TOKENS, **SAMPLING)
        cases.append({
            "prompt": prompt, "input_ids": ids,
            "greedy_ids": greedy, "greedy_text": tok.decode(greedy, skip_special_tokens=True),
            "sampled_ids": sampled, "sampled_text": tok.decode(sampled, skip_special_tokens=True),
        })
        print(json.dumps(cases[-1], ensure_ascii=False), flush=True)
    reference = {
        "model": "assets/nbx-kjv",
        "generated_by": "scripts/model/reference.py",
        "versions": {"transformers": transformers.__version__, "torch": torch.__version__},
        "device": "cpu", "dtype": "float32", "weights_dtype": stored,
        "tokenize": "AutoTokenizer(prompt) with add_special_tokens (the post-processor puts <|bos|> first)",
        "greedy": {"do_sample": False, "max_new_tokens": NEW_TOKENS},
        "sampled": {**SAMPLING, "max_new_tokens": NEW_TOKENS, "manual_seed_before_generate": SEED},
        "note": "other generate options come from the model's generation_config.json (eos_token_id stops a row)",
        "decode": "tok.decode(ids, skip_special_tokens=True) of the whole sequence, prompt included",
        "cases": cases,
    }
    reference_path.parent.mkdir(parents=True, exist_ok=True)
    reference_path.write_text(json.dumps(reference, indent=1, ensure_ascii=False) + "\n")

    samples = []
    for prompt, seed in CARD_SAMPLES:
        torch.manual_seed(seed)
        _, out = generate(model, tok, prompt)  # generation_config.json defaults: sampling, 50 new tokens
        samples.append((prompt, seed, tok.decode(out, skip_special_tokens=True)))
    _, greedy = generate(model, tok, "And God said", do_sample=False, max_new_tokens=50)
    losses = shipped_losses(model, model_dir, Path(metrics["args"]["text"]), metrics["args"]["seq"])
    print(f"float32 losses of the shipped {stored} weights: {losses}", flush=True)
    write_card(model_dir, model, tok, metrics, samples, tok.decode(greedy, skip_special_tokens=True), stored, losses)


def write_card(model_dir: Path, model, tok, m: dict, samples, greedy_text: str, stored: str, losses: dict) -> None:
    c = model.config
    size = (model_dir / "model.safetensors").stat().st_size
    a = m["args"]
    command = (f"python3 scripts/model/train.py --seconds {a['seconds']:g} --patience {a['patience']:g} "
               f"--out assets/nbx-kjv")
    quote = lambda text: "\n".join("> " + line for line in text.splitlines())  # noqa: E731
    sample_md = "\n\n".join(f"`torch.manual_seed({seed})`, prompt \"{prompt}\":\n\n{quote(text)}"
                            for prompt, seed, text in samples)
    card = f"""---
license: other
language: en
library_name: transformers
pipeline_tag: text-generation
tags: [llama, nbxtensor, kjv]
---

# nbx-kjv

The default model of nbxtensor: a small Llama trained from scratch on the King James Bible,
shipped in the package so that `npx nbx generate "And God said"` works with nothing downloaded.
It writes text in the style of the KJV; it knows nothing else and follows no instructions.

| | |
| --- | --- |
| architecture | `LlamaForCausalLM`, {c.num_hidden_layers} layers, hidden {c.hidden_size}, {c.num_attention_heads} query heads and {c.num_key_value_heads} key/value heads of {c.head_dim}, MLP {c.intermediate_size}, RoPE theta {c.rope_parameters['rope_theta']:g}, context {c.max_position_embeddings}, tied input and output embeddings |
| parameters | {m['parameters']:,} |
| file | `model.safetensors`, {stored}, {size:,} bytes: the float32 weights of training rounded to nearest even by scripts/model/to_bf16.py (what torch's `.to(torch.bfloat16)` gives); transformers and nbx load it as float32 to compute |
| tokenizer | byte-level BPE (GPT-2 style), {tok.backend_tokenizer.get_vocab_size()} tokens trained on the same text with `tokenizers` (scripts/model/train_tokenizer.py); `<\\|bos\\|>` {c.bos_token_id} is put in front by the post-processor, `<\\|eos\\|>` {c.eos_token_id} ends a chapter, `<\\|pad\\|>` {c.pad_token_id} |
| chat template | the messages as plain lines after `<\\|bos\\|>`: the model answers by continuing the text |
| generation defaults | `generation_config.json`: sampling, temperature 0.8, top-k 40, top-p 0.95, 50 new tokens |

## Data

The King James Version (public domain) as Debian's `bible-kjv-text` holds it, printed by the `bible`
program: `python3 scripts/model/prepare_kjv.py` writes one verse per line without references, chapters
separated by an empty line. Each chapter is one document, `<|bos|> text <|eos|>`: {m['chapters']} chapters,
{m['training_tokens']:,} training tokens; {m['held_out_chapters']} chapter is held out
({m['held_out_tokens']:,} tokens, about 2%).

## Training

```
python3 scripts/model/prepare_kjv.py                  # .data/kjv.txt
python3 scripts/model/train_tokenizer.py              # tokenizer.json, tokenizer_config.json
{command}
python3 scripts/model/reference.py                    # this card, test/fixtures/models/nbx-kjv-reference.json
```

On one {m['device']} with PyTorch {m['torch']}: AdamW (lr {a['lr']:g}, betas 0.9/0.95, weight decay
{a['weight_decay']:g}), {a['warmup']} warm-up steps then a cosine over {a['seconds']:g} s, batches of
{a['batch']} random windows of {a['seq']} tokens ({m['tokens_per_step']:,} tokens a step), bf16 autocast,
dropout {a['dropout']:g} on the embedding and residual branches and {a['attention_dropout']:g} on attention
weights. It ran {m['steps']} steps in
{m['seconds']:g} s; the weights kept are those of the best held-out loss, at step {m['best_step']}
(about {m['epochs_at_best_step']:g} passes over the text).

The run is short because the text is small: a 300-second run at a nearly constant learning rate
(dropout 0.25) had its best held-out loss, 3.062, at step 800, and by step 3000 the held-out loss
had risen to 3.174 while the training loss fell to 1.93. Longer training only memorizes the text.

train.py saves the weights through scripts/model/to_bf16.py, so the shipped file is {stored}.
Losses computed in float32, cross-entropy per token in nats, over the same windows (all of the held-out
text; as many random training windows, `torch.Generator().manual_seed(1)`):

| loss | float32 weights (end of training, GPU) | shipped {stored} weights (scripts/model/reference.py, CPU) |
| --- | --- | --- |
| train (random training windows) | {m['train_loss_float32']:.4f} | {losses['train']:.4f} |
| held-out | {m['held_out_loss_float32']:.4f} | {losses['held_out']:.4f} |

## Samples (transformers, {stored} weights computed in float32, CPU)

Greedy, prompt "And God said", 50 new tokens:

{quote(greedy_text)}

Sampled with the defaults of `generation_config.json`:

{sample_md}
"""
    (model_dir / "README.md").write_text(card)


if __name__ == "__main__":
    main()
