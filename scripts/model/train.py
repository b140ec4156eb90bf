#!/usr/bin/env python3
"""Trains the embedded default model (assets/nbx-kjv): a small Llama on the KJV.

Data: .data/kjv.txt from prepare_kjv.py, one chapter a document, each encoded
as <|bos|> text <|eos|> and concatenated; every 50th chapter (about 2% of the
text) is held out for the held-out loss. Training draws random 512-token
windows of the training stream, in bf16 autocast with float32 master weights.

A 5M-parameter model sees the 1M-token text hundreds of times in a few
minutes, so it would memorize the text: attention, residual and embedding
dropout slow that down, the learning rate follows a cosine over the time budget, and the
weights kept are those of the best held-out loss (training stops early once
it has not improved for a while). On an H200 the held-out loss stops
improving after about 800 steps of 32k tokens (25 passes over the text), so
the default budget is one minute: longer runs only memorize the text.

Usage (GPU): python3 scripts/model/train.py --seconds 60 --out assets/nbx-kjv
Writes config.json, model.safetensors (bfloat16, rounded from the float32
weights by to_bf16.py), generation_config.json into
--out (next to the tokenizer files from train_tokenizer.py) and the metrics
as JSON to --metrics.
"""
import argparse
import json
import math
import time
from pathlib import Path

import torch
import torch.nn.functional as F
from tokenizers import Tokenizer
from transformers import AutoModelForCausalLM, GenerationConfig, LlamaConfig

from to_bf16 import convert_model_dir

HELD_OUT_EVERY = 50


def load_documents(text_path: Path, tokenizer: Tokenizer, bos: int, eos: int):
    chapters = text_path.read_text(encoding="utf-8").strip().split("\n\n")
    train, held = [], []
    encoded = tokenizer.encode_batch(chapters, add_special_tokens=False)
    for i, enc in enumerate(encoded):
        (held if i % HELD_OUT_EVERY == HELD_OUT_EVERY // 2 else train).extend([bos, *enc.ids, eos])
    return torch.tensor(train, dtype=torch.long), torch.tensor(held, dtype=torch.long), len(chapters)


def add_dropout(model, p: float) -> None:
    """Dropout on the embedding output and on each residual branch, training only."""
    def hook(module, inputs, output):
        return F.dropout(output, p, module.training)
    model.model.embed_tokens.register_forward_hook(hook)
    for layer in model.model.layers:
        layer.self_attn.o_proj.register_forward_hook(hook)
        layer.mlp.down_proj.register_forward_hook(hook)


def windows_of(stream: torch.Tensor, seq: int) -> torch.Tensor:
    """Consecutive windows of seq + 1 tokens (inputs and their next tokens)."""
    n = (stream.numel() - 1) // seq
    return torch.stack([stream[i * seq: i * seq + seq + 1] for i in range(n)])


@torch.no_grad()
def mean_loss(model, windows: torch.Tensor, device, autocast: bool) -> float:
    model.eval()
    total, count = 0.0, 0
    for chunk in windows.split(32):
        chunk = chunk.to(device)
        with torch.autocast("cuda", dtype=torch.bfloat16, enabled=autocast):
            logits = model(input_ids=chunk[:, :-1]).logits
        total += F.cross_entropy(logits.float().flatten(0, 1), chunk[:, 1:].flatten(), reduction="sum").item()
        count += chunk[:, 1:].numel()
    model.train()
    return total / count


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--text", default=".data/kjv.txt")
    ap.add_argument("--tokenizer", default="assets/nbx-kjv")
    ap.add_argument("--out", default="assets/nbx-kjv")
    ap.add_argument("--metrics", default=".data/train_metrics.json")
    ap.add_argument("--seconds", type=float, default=60.0)
    ap.add_argument("--patience", type=float, default=60.0, help="seconds without a better held-out loss")
    ap.add_argument("--hidden", type=int, default=256)
    ap.add_argument("--layers", type=int, default=6)
    ap.add_argument("--heads", type=int, default=8)
    ap.add_argument("--kv-heads", type=int, default=4)
    ap.add_argument("--ffn", type=int, default=576)
    ap.add_argument("--seq", type=int, default=512)
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--lr", type=float, default=2e-3)
    ap.add_argument("--min-lr-ratio", type=float, default=0.05)
    ap.add_argument("--warmup", type=int, default=200)
    ap.add_argument("--weight-decay", type=float, default=0.1)
    ap.add_argument("--dropout", type=float, default=0.25)
    ap.add_argument("--attention-dropout", type=float, default=0.1)
    ap.add_argument("--eval-every", type=int, default=100)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()

    torch.manual_seed(args.seed)
    device = torch.device("cuda")
    torch.backends.cuda.matmul.allow_tf32 = True
    tokenizer = Tokenizer.from_file(str(Path(args.tokenizer) / "tokenizer.json"))
    bos, eos, pad = (tokenizer.token_to_id(t) for t in ("<|bos|>", "<|eos|>", "<|pad|>"))
    train, held, chapters = load_documents(Path(args.text), tokenizer, bos, eos)
    print(f"{chapters} chapters: {train.numel()} training tokens, {held.numel()} held-out tokens", flush=True)

    config = LlamaConfig(
        vocab_size=tokenizer.get_vocab_size(), hidden_size=args.hidden, intermediate_size=args.ffn,
        num_hidden_layers=args.layers, num_attention_heads=args.heads, num_key_value_heads=args.kv_heads,
        head_dim=args.hidden // args.heads, max_position_embeddings=1024, rms_norm_eps=1e-5,
        rope_parameters={"rope_type": "default", "rope_theta": 10000.0}, tie_word_embeddings=True,
        bos_token_id=bos, eos_token_id=eos, pad_token_id=pad, initializer_range=0.02,
        attention_dropout=args.attention_dropout,
    )
    config.architectures = ["LlamaForCausalLM"]
    model = AutoModelForCausalLM.from_config(config, attn_implementation="sdpa", dtype=torch.float32).to(device)
    add_dropout(model, args.dropout)
    params = sum(p.numel() for p in model.parameters())
    print(f"parameters: {params}", flush=True)

    decay = [p for n, p in model.named_parameters() if p.ndim >= 2]
    no_decay = [p for n, p in model.named_parameters() if p.ndim < 2]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": args.weight_decay},
                             {"params": no_decay, "weight_decay": 0.0}],
                            lr=args.lr, betas=(0.9, 0.95), eps=1e-8, fused=True)
    held_windows = windows_of(held, args.seq)
    train_gpu = train.to(device)
    span = args.seq + 1
    gen = torch.Generator(device=device).manual_seed(args.seed)

    best = {"loss": float("inf"), "step": 0, "state": None}
    history = []
    step, start, last_improvement = 0, time.time(), time.time()
    ema = None
    model.train()
    while True:
        elapsed = time.time() - start
        if elapsed > args.seconds or time.time() - last_improvement > args.patience:
            break
        progress = min(1.0, elapsed / args.seconds)
        lr = args.lr * min(1.0, (step + 1) / args.warmup)
        lr *= args.min_lr_ratio + (1 - args.min_lr_ratio) * 0.5 * (1 + math.cos(math.pi * progress))
        for g in opt.param_groups:
            g["lr"] = lr
        starts = torch.randint(0, train_gpu.numel() - span, (args.batch,), device=device, generator=gen)
        window = train_gpu[starts[:, None] + torch.arange(span, device=device)]
        with torch.autocast("cuda", dtype=torch.bfloat16):
            logits = model(input_ids=window[:, :-1]).logits
        loss = F.cross_entropy(logits.float().flatten(0, 1), window[:, 1:].flatten())
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        step += 1
        if step % 20 == 0:
            value = loss.item()
            ema = value if ema is None else 0.9 * ema + 0.1 * value
        if step % args.eval_every == 0:
            h = mean_loss(model, held_windows, device, autocast=True)
            history.append({"step": step, "seconds": round(time.time() - start, 1), "lr": lr,
                            "train_loss_ema": ema, "held_out_loss": h})
            print(json.dumps(history[-1]), flush=True)
            if h < best["loss"]:
                best = {"loss": h, "step": step, "state": {k: v.detach().clone() for k, v in model.state_dict().items()}}
                last_improvement = time.time()
    seconds = time.time() - start
    print(f"stopped after {step} steps, {seconds:.0f} s; best held-out {best['loss']:.4f} at step {best['step']}",
          flush=True)

    model.load_state_dict(best["state"])
    # Losses of the kept weights in float32, no dropout, on the held-out text and
    # on an equal-sized sample of training windows.
    held_f32 = mean_loss(model, held_windows, device, autocast=False)
    sample = torch.randint(0, train.numel() - span, (len(held_windows),), generator=torch.Generator().manual_seed(1))
    train_f32 = mean_loss(model, torch.stack([train[s: s + span] for s in sample.tolist()]), device, autocast=False)
    print(f"float32 losses of the kept weights: train {train_f32:.4f}, held-out {held_f32:.4f}", flush=True)

    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    model = model.float().cpu()
    model.config.attention_dropout = 0.0  # inference needs none; keeps the shipped config plain
    model.save_pretrained(out, safe_serialization=True)
    convert_model_dir(out)  # the shipped file is bfloat16: half the size, loaded as float32 to compute
    GenerationConfig(bos_token_id=bos, eos_token_id=eos, pad_token_id=pad, do_sample=True, temperature=0.8,
                     top_k=40, top_p=0.95, max_new_tokens=50).save_pretrained(out)
    metrics = {
        "parameters": params, "steps": step, "seconds": round(seconds, 1), "best_step": best["step"],
        "tokens_per_step": args.batch * args.seq, "training_tokens": train.numel(),
        "held_out_tokens": held.numel(), "chapters": chapters, "held_out_chapters": "every 50th (index % 50 == 25)",
        "epochs_at_best_step": round(best["step"] * args.batch * args.seq / train.numel(), 1),
        "train_loss_float32": train_f32, "held_out_loss_float32": held_f32,
        "held_out_loss_bf16_at_best": best["loss"], "args": vars(args), "history": history,
        "torch": torch.__version__, "device": torch.cuda.get_device_name(),
    }
    Path(args.metrics).parent.mkdir(parents=True, exist_ok=True)
    Path(args.metrics).write_text(json.dumps(metrics, indent=1) + "\n")


if __name__ == "__main__":
    main()
