#!/usr/bin/env python3
"""Peer for `nbx bench generate` on the CPU: a Llama in plain PyTorch.

Runs with Debian's python3-torch (1.13) and numpy alone, so that the CPU
benchmark needs nothing beyond Debian packages: the safetensors file is parsed
by hand, and the model is a compact Llama forward (RMSNorm, RoPE with the
default frequencies, grouped-query attention with a key/value cache, SiLU
MLP) written the way transformers' LlamaForCausalLM computes it, so its greedy
tokens equal transformers' for the same float32 model.

Usage: python3 bench/peers/torch_llama_generate.py MODEL_DIR [--prompt-ids 0,298,389,390]
           [--new-tokens 50] [--threads N] [--print-ids]
Prints one JSON line: {peer, shape, ttft_ms, decode_tok_s, prompt_tokens, new_tokens, ...};
time to first token covers the prompt's forward and the first token's choice,
decode tokens/s the remaining new tokens, one token a forward with the cache;
ttft_cpu_ms and decode_cpu_ms_per_token are the process's CPU time for the same spans.
"""
import argparse
import json
import struct
import time
from pathlib import Path

import numpy as np
import torch

DTYPES = {"F32": np.float32, "F16": np.float16, "BF16": np.uint16}


def load_safetensors(path: Path) -> dict:
    raw = path.read_bytes()
    (header_len,) = struct.unpack("<Q", raw[:8])
    header = json.loads(raw[8: 8 + header_len])
    base = 8 + header_len
    tensors = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        if info["dtype"] not in DTYPES:
            raise SystemExit(f"{name}: dtype {info['dtype']} not supported (F32, F16, BF16)")
        start, end = info["data_offsets"]
        array = np.frombuffer(raw, dtype=DTYPES[info["dtype"]], count=(end - start) // np.dtype(DTYPES[info["dtype"]]).itemsize,
                              offset=base + start).reshape(info["shape"])
        if info["dtype"] == "BF16":
            array = (array.astype(np.uint32) << 16).view(np.float32)
        tensors[name] = torch.from_numpy(array.astype(np.float32))
    return tensors


class Llama:
    def __init__(self, model_dir: Path, max_len: int):
        c = json.loads((model_dir / "config.json").read_text())
        if c.get("model_type") != "llama":
            raise SystemExit(f"model_type {c.get('model_type')!r}: this peer runs llama only")
        rope = c.get("rope_parameters") or {"rope_type": (c.get("rope_scaling") or {}).get("rope_type", "default"),
                                            "rope_theta": c.get("rope_theta", 10000.0)}
        if rope.get("rope_type", "default") != "default":
            raise SystemExit(f"rope_type {rope['rope_type']!r}: this peer has the default RoPE only")
        w = load_safetensors(model_dir / "model.safetensors")
        self.layers = c["num_hidden_layers"]
        self.heads = c["num_attention_heads"]
        self.kv_heads = c.get("num_key_value_heads", self.heads)
        self.head_dim = c.get("head_dim") or c["hidden_size"] // self.heads
        self.eps = c["rms_norm_eps"]
        self.embed = w["model.embed_tokens.weight"]
        self.norm = w["model.norm.weight"]
        self.lm_head = w.get("lm_head.weight", self.embed)
        self.w = [{k: w[f"model.layers.{i}.{k}"] for k in (
            "input_layernorm.weight", "post_attention_layernorm.weight", "self_attn.q_proj.weight",
            "self_attn.k_proj.weight", "self_attn.v_proj.weight", "self_attn.o_proj.weight",
            "mlp.gate_proj.weight", "mlp.up_proj.weight", "mlp.down_proj.weight")} for i in range(self.layers)]
        inv_freq = 1.0 / (rope["rope_theta"] ** (torch.arange(0, self.head_dim, 2, dtype=torch.int64).float() / self.head_dim))
        freqs = torch.outer(torch.arange(max_len, dtype=torch.float32), inv_freq)
        emb = torch.cat([freqs, freqs], dim=-1)
        self.cos, self.sin = emb.cos(), emb.sin()
        self.k_cache = torch.zeros(self.layers, self.kv_heads, max_len, self.head_dim)
        self.v_cache = torch.zeros(self.layers, self.kv_heads, max_len, self.head_dim)
        self.length = 0

    def rms_norm(self, x, weight):
        return weight * (x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps))

    def rope(self, x, cos, sin):
        half = x.shape[-1] // 2
        rotated = torch.cat([-x[..., half:], x[..., :half]], dim=-1)
        return x * cos + rotated * sin

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        """ids [t] -> logits of the last position [vocab]; appends to the cache."""
        t, start = ids.shape[0], self.length
        end = start + t
        cos, sin = self.cos[start:end], self.sin[start:end]
        group = self.heads // self.kv_heads
        mask = None
        if t > 1:
            mask = torch.full((t, end), float("-inf")).triu(start + 1)
        x = self.embed[ids]
        for i, w in enumerate(self.w):
            h = self.rms_norm(x, w["input_layernorm.weight"])
            q = (h @ w["self_attn.q_proj.weight"].T).view(t, self.heads, self.head_dim).transpose(0, 1)
            k = (h @ w["self_attn.k_proj.weight"].T).view(t, self.kv_heads, self.head_dim).transpose(0, 1)
            v = (h @ w["self_attn.v_proj.weight"].T).view(t, self.kv_heads, self.head_dim).transpose(0, 1)
            self.k_cache[i, :, start:end] = self.rope(k, cos, sin)
            self.v_cache[i, :, start:end] = v
            q = self.rope(q, cos, sin).reshape(self.kv_heads, group * t, self.head_dim)
            keys, values = self.k_cache[i, :, :end], self.v_cache[i, :, :end]
            scores = (q @ keys.transpose(1, 2)) * self.head_dim ** -0.5  # [kv, group*t, end]
            if mask is not None:
                scores = scores.view(self.kv_heads, group, t, end) + mask
                scores = scores.view(self.kv_heads, group * t, end)
            attn = torch.softmax(scores, dim=-1) @ values
            attn = attn.view(self.heads, t, self.head_dim).transpose(0, 1).reshape(t, self.heads * self.head_dim)
            x = x + attn @ w["self_attn.o_proj.weight"].T
            h = self.rms_norm(x, w["post_attention_layernorm.weight"])
            gate = h @ w["mlp.gate_proj.weight"].T
            x = x + (torch.nn.functional.silu(gate) * (h @ w["mlp.up_proj.weight"].T)) @ w["mlp.down_proj.weight"].T
        self.length = end
        return self.rms_norm(x[-1], self.norm) @ self.lm_head.T


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("model_dir")
    ap.add_argument("--prompt-ids", default="0,298,389,390", help="comma-separated token ids")
    ap.add_argument("--new-tokens", type=int, default=50)
    ap.add_argument("--threads", type=int, default=0, help="torch threads (0: PyTorch's default)")
    ap.add_argument("--print-ids", action="store_true", help="add the generated ids to the JSON line")
    args = ap.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    prompt = [int(x) for x in args.prompt_ids.split(",")]
    model_dir = Path(args.model_dir)

    with torch.inference_mode():
        # A warm-up run first, then the timed one on a fresh cache.
        for timed in (False, True):
            model = Llama(model_dir, len(prompt) + args.new_tokens)
            start, cpu_start = time.perf_counter(), time.process_time()
            logits = model.forward(torch.tensor(prompt))
            generated = [int(logits.argmax())]
            first, cpu_first = time.perf_counter(), time.process_time()
            for _ in range(args.new_tokens - 1):
                logits = model.forward(torch.tensor(generated[-1:]))
                generated.append(int(logits.argmax()))
            done, cpu_done = time.perf_counter(), time.process_time()
    line = {
        "peer": "torch-cpu", "shape": model_dir.resolve().name,
        "ttft_ms": round((first - start) * 1e3, 3),
        "decode_tok_s": round((args.new_tokens - 1) / (done - first), 2) if args.new_tokens > 1 else None,
        # CPU time of the process (all its threads): on a busy machine wall time also counts waiting for a core
        "ttft_cpu_ms": round((cpu_first - cpu_start) * 1e3, 3),
        "decode_cpu_ms_per_token": round((cpu_done - cpu_first) * 1e3 / (args.new_tokens - 1), 3) if args.new_tokens > 1 else None,
        "prompt_tokens": len(prompt), "new_tokens": args.new_tokens,
        "dtype": "float32", "threads": torch.get_num_threads(), "torch": torch.__version__,
    }
    if args.print_ids:
        line["ids"] = prompt + generated
    print(json.dumps(line), flush=True)


if __name__ == "__main__":
    main()
