#!/usr/bin/env python3
"""Peer for `nbx bench generate` and `nbx bench decode`: transformers' eager generate.

A model of the given shape with random weights (bf16 on the GPU, float32 on
the CPU), a prompt of random ids (or --prompt-ids), greedy generation of
exactly N new tokens (min_new_tokens keeps it from stopping early), with
transformers' default attention and dynamic cache, no torch.compile. Time to
first token is the time of generate with one new token; decode tokens/s is the
batch times the other N - 1 tokens over the rest of the time of a full
generate (an aggregate over the batch). One warm-up generate runs first.

The shape is a name (tiny: TinyLlama-1.1B, 8b: Llama-3-8B, as `bench generate`
passes it) or --config, a transformers config dict as JSON (model_type llama or
mixtral, as `bench decode` passes it).

Usage: python3 bench/peers/hf_generate.py tiny|8b [--new-tokens N] [--prompt-tokens N]
       python3 bench/peers/hf_generate.py --config JSON [--batch B] [--prompt-ids "1,2;3,4"]
           [--device cuda|cpu] [--warmup-tokens N] [--new-tokens N] [--prompt-tokens N]
Prints one JSON line: {peer, shape, batch, ttft_ms, decode_tok_s, prompt_tokens, new_tokens, ...}.
"""
import argparse
import json
import time

import torch
import transformers
from transformers import AutoConfig, AutoModelForCausalLM, LlamaConfig

SHAPES = {
    # TinyLlama-1.1B
    "tiny": dict(num_hidden_layers=22, hidden_size=2048, num_attention_heads=32, num_key_value_heads=4,
                 intermediate_size=5632, vocab_size=32000, rope_parameters={"rope_type": "default", "rope_theta": 10000.0}),
    # Llama-3-8B
    "8b": dict(num_hidden_layers=32, hidden_size=4096, num_attention_heads=32, num_key_value_heads=8,
               intermediate_size=14336, vocab_size=128256, rope_parameters={"rope_type": "default", "rope_theta": 500000.0}),
}


def sync(device: str) -> None:
    if device == "cuda":
        torch.cuda.synchronize()


def timed_generate(model, ids, new_tokens: int) -> float:
    sync(ids.device.type)
    start = time.perf_counter()
    with torch.no_grad():
        out = model.generate(ids, attention_mask=torch.ones_like(ids), do_sample=False,
                             max_new_tokens=new_tokens, min_new_tokens=new_tokens, pad_token_id=0)
    sync(ids.device.type)
    assert out.shape[1] == ids.shape[1] + new_tokens
    return time.perf_counter() - start


def config_from_json(text: str):
    """A transformers config from a config.json-style dict; rope_theta becomes transformers 5's rope_parameters."""
    c = dict(json.loads(text))
    if "rope_theta" in c and "rope_parameters" not in c:
        c["rope_parameters"] = {"rope_type": "default", "rope_theta": c.pop("rope_theta")}
    model_type = c.pop("model_type")
    for k in ("architectures", "torch_dtype", "dtype"):
        c.pop(k, None)
    return AutoConfig.for_model(model_type, **c)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("shape", nargs="?", choices=sorted(SHAPES))
    ap.add_argument("--config", help="transformers config dict as JSON (instead of a shape name)")
    ap.add_argument("--batch", type=int, default=1)
    ap.add_argument("--prompt-tokens", type=int, default=128)
    ap.add_argument("--prompt-ids", help="rows separated by ';', ids by ','; default: random ids (seed 0)")
    ap.add_argument("--new-tokens", type=int, default=256)
    ap.add_argument("--warmup-tokens", type=int, default=16)
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    args = ap.parse_args()
    if (args.shape is None) == (args.config is None):
        ap.error("give a shape name or --config, not both")

    if args.config:
        config = config_from_json(args.config)
    else:
        config = LlamaConfig(**SHAPES[args.shape], max_position_embeddings=4096, rms_norm_eps=1e-5,
                             bos_token_id=1, eos_token_id=2, pad_token_id=0, tie_word_embeddings=False)
    device = args.device
    dtype = torch.bfloat16 if device == "cuda" else torch.float32
    torch.manual_seed(0)
    with torch.device(device):
        model = AutoModelForCausalLM.from_config(config, dtype=dtype).eval()
    if args.prompt_ids:
        ids = torch.tensor([[int(x) for x in row.split(",")] for row in args.prompt_ids.split(";")], device=device)
    else:
        ids = torch.randint(3, config.vocab_size, (args.batch, args.prompt_tokens), device=device)
    if ids.shape[0] != args.batch:
        raise SystemExit(f"--prompt-ids has {ids.shape[0]} rows, --batch is {args.batch}")

    timed_generate(model, ids, args.warmup_tokens)  # warm-up
    first = timed_generate(model, ids, 1)
    total = timed_generate(model, ids, args.new_tokens)
    print(json.dumps({
        "peer": "transformers-eager-generate", "shape": args.shape or config.model_type, "batch": args.batch,
        "ttft_ms": round(first * 1e3, 2),
        "decode_tok_s": round(args.batch * (args.new_tokens - 1) / (total - first), 2) if args.new_tokens > 1 else None,
        "prompt_tokens": ids.shape[1], "new_tokens": args.new_tokens,
        "dtype": str(dtype).replace("torch.", ""), "attn_implementation": model.config._attn_implementation,
        "parameters": sum(p.numel() for p in model.parameters()),
        "transformers": transformers.__version__, "torch": torch.__version__,
        "device": torch.cuda.get_device_name() if device == "cuda" else device,
    }), flush=True)


if __name__ == "__main__":
    main()
