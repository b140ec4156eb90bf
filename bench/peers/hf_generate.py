#!/usr/bin/env python3
"""Peer for `nbx bench generate` on CUDA: transformers' eager generate.

A Llama of the given shape with random bf16 weights on the GPU, batch 1, a
128-token prompt of random ids, 256 new tokens greedy (min_new_tokens keeps it
from stopping early), with transformers' default attention and dynamic cache,
no torch.compile. Time to first token is the time of generate with one new
token; decode tokens/s is the other 255 tokens over the rest of the time of a
full generate. One warm-up generate runs first.

Usage: python3 bench/peers/hf_generate.py tiny|8b [--new-tokens N] [--prompt-tokens N]
Prints one JSON line: {peer, shape, ttft_ms, decode_tok_s, prompt_tokens, new_tokens, ...}.
"""
import argparse
import json
import time

import torch
import transformers
from transformers import AutoModelForCausalLM, LlamaConfig

SHAPES = {
    # TinyLlama-1.1B
    "tiny": dict(num_hidden_layers=22, hidden_size=2048, num_attention_heads=32, num_key_value_heads=4,
                 intermediate_size=5632, vocab_size=32000, rope_parameters={"rope_type": "default", "rope_theta": 10000.0}),
    # Llama-3-8B
    "8b": dict(num_hidden_layers=32, hidden_size=4096, num_attention_heads=32, num_key_value_heads=8,
               intermediate_size=14336, vocab_size=128256, rope_parameters={"rope_type": "default", "rope_theta": 500000.0}),
}


def timed_generate(model, ids, new_tokens: int) -> float:
    torch.cuda.synchronize()
    start = time.perf_counter()
    with torch.no_grad():
        out = model.generate(ids, attention_mask=torch.ones_like(ids), do_sample=False,
                             max_new_tokens=new_tokens, min_new_tokens=new_tokens, pad_token_id=0)
    torch.cuda.synchronize()
    assert out.shape[1] == ids.shape[1] + new_tokens
    return time.perf_counter() - start


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("shape", choices=sorted(SHAPES))
    ap.add_argument("--prompt-tokens", type=int, default=128)
    ap.add_argument("--new-tokens", type=int, default=256)
    args = ap.parse_args()

    config = LlamaConfig(**SHAPES[args.shape], max_position_embeddings=4096, rms_norm_eps=1e-5,
                         bos_token_id=1, eos_token_id=2, pad_token_id=0, tie_word_embeddings=False)
    torch.manual_seed(0)
    with torch.device("cuda"):
        model = AutoModelForCausalLM.from_config(config, dtype=torch.bfloat16).eval()
    ids = torch.randint(3, config.vocab_size, (1, args.prompt_tokens), device="cuda")

    timed_generate(model, ids, 16)  # warm-up
    first = timed_generate(model, ids, 1)
    total = timed_generate(model, ids, args.new_tokens)
    print(json.dumps({
        "peer": "transformers-eager-generate", "shape": args.shape,
        "ttft_ms": round(first * 1e3, 2), "decode_tok_s": round((args.new_tokens - 1) / (total - first), 2),
        "prompt_tokens": args.prompt_tokens, "new_tokens": args.new_tokens,
        "dtype": "bfloat16", "attn_implementation": model.config._attn_implementation,
        "parameters": sum(p.numel() for p in model.parameters()),
        "transformers": transformers.__version__, "torch": torch.__version__,
        "device": torch.cuda.get_device_name(),
    }), flush=True)


if __name__ == "__main__":
    main()
