#!/usr/bin/env python3
"""Peer for `nbx bench decode`: a compact gpt-fast-style Llama / Mixtral in PyTorch.

The strongest plain-PyTorch decode we know how to write for one GPU, in the
manner of pytorch-labs/gpt-fast (written here from that design, not copied):
a static KV cache per layer (a buffer of [batch, kv_heads, max_len, head_dim],
written with index_copy_ at input_pos), the attention mask a row of a causal
mask precomputed once, scaled_dot_product_attention over the whole static
cache, and the one-token decode step (forward + greedy argmax on the device)
under torch.compile(mode="reduce-overhead", fullgraph=True, dynamic=False),
i.e. Inductor kernels replayed as a CUDA graph. Prefill (the prompt's forward
and its first token) runs eagerly unless --compile-prefill compiles it
separately. Logits are computed for the last position only, as transformers'
generate does (logits_to_keep=1).

Mixture of experts (Mixtral): softmax router in float32, top-k, weights
renormalized. When a step routes fewer token-expert pairs than there are
experts (batch 1: 2 of 8) each token gathers its experts' weights (gpt-fast's
way, reads only the chosen experts); otherwise (batch 8, prefill) every expert
runs on every token with the unrouted ones weighted 0, which reads each
expert's weights once, as many bytes as a grouped GEMM would at these sizes.

The model is described by a transformers config dict (--config JSON, as
config.json holds it: model_type llama or mixtral). Weights are random
(normal, std 0.02, seeded). Timing, after one warm-up generation of the same
length (which also compiles): sync, then time to first token = prefill and the
first token read back to the host; decode = the other new_tokens - 1 steps
queued back to back (tokens stay on the device), synchronized at the end;
ttft_ms is the median of --ttft-samples samples (the timed generation's, then
prefill and first token again, each after a sync; `nbx bench decode` passes
its own count, so both sides report the same statistic of the same span) and
ttft_samples_ms lists them, the timed generation's first;
decode_tok_s = batch * (new_tokens - 1) / decode seconds (aggregate). EOS is
ignored. compile_s is the wall time of the warm-up's first three decode steps
(tracing, Inductor compile, CUDA graph recording) minus three steady steps.

Without torch.compile (torch < 2.0), or with --no-compile, the decode step runs
eagerly and the JSON line says so in "note"; without
F.scaled_dot_product_attention (torch < 2.0) attention is written out
(matmul, masked softmax, matmul).

Usage:
  python3 bench/peers/gpt_fast_decode.py --config '{"model_type":"llama","num_hidden_layers":22,...}' \\
      [--batch 1] [--prompt-tokens 128] [--new-tokens 256] [--prompt-ids "1,2,3;4,5,6"] \\
      [--device cuda|cpu] [--dtype bfloat16|float32] [--no-compile] [--compile-prefill] [--ttft-samples 1]
Prints one JSON line: {peer, batch, ttft_ms, decode_tok_s, compile_s, new_tokens, prompt_tokens, ...}.
"""
import argparse
import json
import math
import statistics
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

HAS_SDPA = hasattr(F, "scaled_dot_product_attention")
HAS_COMPILE = hasattr(torch, "compile")


class Args:
    """The shape, from a transformers config dict."""

    def __init__(self, c: dict):
        if c.get("model_type") not in ("llama", "mixtral"):
            raise SystemExit(f"model_type {c.get('model_type')!r}: this peer runs llama and mixtral")
        self.layers = c["num_hidden_layers"]
        self.dim = c["hidden_size"]
        self.inter = c["intermediate_size"]
        self.heads = c["num_attention_heads"]
        self.kv_heads = c.get("num_key_value_heads") or self.heads
        self.head_dim = c.get("head_dim") or self.dim // self.heads
        self.vocab = c["vocab_size"]
        self.eps = c.get("rms_norm_eps", 1e-5)
        rope = c.get("rope_parameters") or {}
        self.theta = rope.get("rope_theta", c.get("rope_theta", 10000.0))
        self.experts = c.get("num_local_experts", 0) if c["model_type"] == "mixtral" else 0
        self.top_k = c.get("num_experts_per_tok", 0) if self.experts else 0


class RMSNorm(nn.Module):
    def __init__(self, dim: int, eps: float):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(dim))

    def forward(self, x):
        h = x.float()
        return (h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + self.eps)).to(x.dtype) * self.weight


class KVCache(nn.Module):
    def __init__(self, batch: int, kv_heads: int, max_len: int, head_dim: int, dtype):
        super().__init__()
        self.register_buffer("k", torch.zeros(batch, kv_heads, max_len, head_dim, dtype=dtype), persistent=False)
        self.register_buffer("v", torch.zeros(batch, kv_heads, max_len, head_dim, dtype=dtype), persistent=False)

    def update(self, pos, k, v):
        # k, v [B, kv_heads, T, D] go to positions pos [T]; the whole cache is returned (masked by the caller)
        self.k.index_copy_(2, pos, k)
        self.v.index_copy_(2, pos, v)
        return self.k, self.v


def rotate_half(x):
    half = x.shape[-1] // 2
    return torch.cat([-x[..., half:], x[..., :half]], dim=-1)


class Attention(nn.Module):
    def __init__(self, a: Args):
        super().__init__()
        self.a = a
        # q, k and v as one GEMM, as gpt-fast does
        self.wqkv = nn.Linear(a.dim, (a.heads + 2 * a.kv_heads) * a.head_dim, bias=False)
        self.wo = nn.Linear(a.heads * a.head_dim, a.dim, bias=False)
        self.cache = None

    def forward(self, x, cos, sin, mask, pos):
        a = self.a
        B, T, _ = x.shape
        q, k, v = self.wqkv(x).split([a.heads * a.head_dim, a.kv_heads * a.head_dim, a.kv_heads * a.head_dim], dim=-1)
        q = q.view(B, T, a.heads, a.head_dim).transpose(1, 2)
        k = k.view(B, T, a.kv_heads, a.head_dim).transpose(1, 2)
        v = v.view(B, T, a.kv_heads, a.head_dim).transpose(1, 2)
        q = q * cos + rotate_half(q) * sin  # half-split RoPE, as transformers' Llama
        k = k * cos + rotate_half(k) * sin
        k, v = self.cache.update(pos, k, v)
        group = a.heads // a.kv_heads
        k = k.repeat_interleave(group, dim=1)
        v = v.repeat_interleave(group, dim=1)
        if HAS_SDPA:
            y = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, dropout_p=0.0)
        else:
            s = (q @ k.transpose(-1, -2)) * a.head_dim ** -0.5
            y = torch.softmax(s.masked_fill(~mask, float("-inf")).float(), dim=-1).to(q.dtype) @ v
        return self.wo(y.transpose(1, 2).reshape(B, T, a.heads * a.head_dim))


class MLP(nn.Module):
    def __init__(self, a: Args):
        super().__init__()
        self.w13 = nn.Linear(a.dim, 2 * a.inter, bias=False)  # gate and up as one GEMM
        self.w2 = nn.Linear(a.inter, a.dim, bias=False)

    def forward(self, x):
        gate, up = self.w13(x).chunk(2, dim=-1)
        return self.w2(F.silu(gate) * up)


class MoE(nn.Module):
    def __init__(self, a: Args):
        super().__init__()
        self.a = a
        self.gate = nn.Linear(a.dim, a.experts, bias=False)
        self.w1 = nn.Parameter(torch.empty(a.experts, a.inter, a.dim))  # gate
        self.w3 = nn.Parameter(torch.empty(a.experts, a.inter, a.dim))  # up
        self.w2 = nn.Parameter(torch.empty(a.experts, a.dim, a.inter))  # down

    def forward(self, x):
        a = self.a
        shape = x.shape
        x = x.reshape(-1, a.dim)
        probs = torch.softmax(self.gate(x).float(), dim=-1)
        weights, idx = torch.topk(probs, a.top_k, dim=-1)
        weights = (weights / weights.sum(-1, keepdim=True)).to(x.dtype)
        if x.shape[0] * a.top_k < a.experts:
            # few pairs: gather the chosen experts' weights per token [N, k, ...]
            h = F.silu(torch.einsum("ti,taoi->tao", x, self.w1[idx])) * torch.einsum("ti,taoi->tao", x, self.w3[idx])
            y = torch.einsum("tao,taio->tai", h, self.w2[idx])
            out = torch.einsum("tai,ta->ti", y, weights)
        else:
            # every expert on every token, unrouted ones weighted 0: each expert's weights read once
            dense = torch.zeros(x.shape[0], a.experts, dtype=x.dtype, device=x.device).scatter(1, idx, weights)
            h = F.silu(torch.einsum("ti,eoi->eto", x, self.w1)) * torch.einsum("ti,eoi->eto", x, self.w3)
            y = torch.einsum("eto,eio->eti", h, self.w2)
            out = torch.einsum("eti,te->ti", y, dense)
        return out.view(shape)


class Block(nn.Module):
    def __init__(self, a: Args):
        super().__init__()
        self.attn = Attention(a)
        self.ffn = MoE(a) if a.experts else MLP(a)
        self.attn_norm = RMSNorm(a.dim, a.eps)
        self.ffn_norm = RMSNorm(a.dim, a.eps)

    def forward(self, x, cos, sin, mask, pos):
        x = x + self.attn(self.attn_norm(x), cos, sin, mask, pos)
        return x + self.ffn(self.ffn_norm(x))


class Transformer(nn.Module):
    def __init__(self, a: Args):
        super().__init__()
        self.a = a
        self.embed = nn.Embedding(a.vocab, a.dim)
        self.layers = nn.ModuleList(Block(a) for _ in range(a.layers))
        self.norm = RMSNorm(a.dim, a.eps)
        self.output = nn.Linear(a.dim, a.vocab, bias=False)
        self.max_len = 0

    def setup_caches(self, batch: int, max_len: int, dtype, device):
        a = self.a
        self.max_len = max_len
        for layer in self.layers:
            layer.attn.cache = KVCache(batch, a.kv_heads, max_len, a.head_dim, dtype).to(device)
        inv_freq = 1.0 / (a.theta ** (torch.arange(0, a.head_dim, 2, device=device).float() / a.head_dim))
        freqs = torch.outer(torch.arange(max_len, device=device).float(), inv_freq)
        emb = torch.cat([freqs, freqs], dim=-1)
        self.register_buffer("cos", emb.cos().to(dtype), persistent=False)
        self.register_buffer("sin", emb.sin().to(dtype), persistent=False)
        self.register_buffer("causal", torch.tril(torch.ones(max_len, max_len, dtype=torch.bool, device=device)), persistent=False)

    def forward(self, idx, pos):
        """idx [B, T], pos [T] -> logits of the last position [B, vocab]."""
        mask = self.causal[None, None, pos]  # [1, 1, T, max_len]
        cos, sin = self.cos[pos], self.sin[pos]  # [T, D], broadcast over [B, H, T, D]
        x = self.embed(idx)
        for layer in self.layers:
            x = layer(x, cos, sin, mask, pos)
        return self.output(self.norm(x[:, -1]))


def next_token(model, idx, pos):
    return torch.argmax(model(idx, pos), dim=-1, keepdim=True)  # greedy on the device, [B, 1]


def sync(device: str):
    if device == "cuda":
        torch.cuda.synchronize()


def generate(model, prompt, new_tokens: int, prefill_fn, decode_fn, device: str, steps_timed=None):
    """Greedy, new_tokens tokens. Returns (ttft_s, decode_s, last ids [B, 1])."""
    P = prompt.shape[1]
    sync(device)
    t0 = time.perf_counter()
    tok = prefill_fn(model, prompt, torch.arange(0, P, device=device))
    tok.cpu()  # the first token on the host
    t1 = time.perf_counter()
    pos = torch.tensor([P], device=device, dtype=torch.long)
    for i in range(new_tokens - 1):
        s = time.perf_counter()
        tok = decode_fn(model, tok, pos).clone()  # clone: a CUDA graph's output is overwritten by the next replay
        pos += 1
        if steps_timed is not None and i < len(steps_timed):
            sync(device)
            steps_timed[i] = time.perf_counter() - s
    sync(device)
    return t1 - t0, time.perf_counter() - t1, tok


def first_token_s(model, prompt, prefill_fn, device: str) -> float:
    """One time-to-first-token sample: generate()'s span up to the first token on the host."""
    sync(device)
    t0 = time.perf_counter()
    tok = prefill_fn(model, prompt, torch.arange(0, prompt.shape[1], device=device))
    tok.cpu()
    return time.perf_counter() - t0


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--config", required=True, help="transformers config dict as JSON (model_type llama or mixtral)")
    ap.add_argument("--batch", type=int, default=1)
    ap.add_argument("--prompt-tokens", type=int, default=128)
    ap.add_argument("--new-tokens", type=int, default=256)
    ap.add_argument("--prompt-ids", help="rows separated by ';', ids by ','; default: random ids (seed 0)")
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    ap.add_argument("--dtype", default=None, help="default: bfloat16 on cuda, float32 on cpu")
    ap.add_argument("--no-compile", action="store_true", help="run the decode step eagerly")
    ap.add_argument("--compile-prefill", action="store_true", help="also compile prefill (separately, dynamic=False)")
    ap.add_argument("--ttft-samples", type=int, default=1, help="time to first token: the median of this many samples")
    args = ap.parse_args()
    config = json.loads(args.config)
    a = Args(config)
    device = args.device
    dtype = getattr(torch, args.dtype or ("bfloat16" if device == "cuda" else "float32"))
    notes = []

    torch.manual_seed(0)
    if args.prompt_ids:
        prompt = torch.tensor([[int(x) for x in row.split(",")] for row in args.prompt_ids.split(";")], dtype=torch.long)
    else:
        prompt = torch.randint(3, a.vocab, (args.batch, args.prompt_tokens))
    if prompt.shape[0] != args.batch:
        raise SystemExit(f"--prompt-ids has {prompt.shape[0]} rows, --batch is {args.batch}")
    prompt = prompt.to(device)
    P = prompt.shape[1]

    # made on the device where torch can (torch >= 2.0), cast, then filled: N(0, 0.02), norms 1
    with torch.device(device) if hasattr(torch.device, "__enter__") else _nullctx():
        model = Transformer(a)
    model = model.to(device=device, dtype=dtype).eval()
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.endswith("norm.weight"):
                p.fill_(1.0)
            else:
                p.normal_(0.0, 0.02)
    # the static cache: prompt + new tokens, rounded up to a multiple of 8 as gpt-fast does
    max_len = int(math.ceil((P + args.new_tokens) / 8) * 8)
    model.setup_caches(args.batch, max_len, dtype, device)

    compiled = HAS_COMPILE and not args.no_compile
    if not HAS_COMPILE:
        notes.append(f"torch {torch.__version__} has no torch.compile: decode step eager")
    elif args.no_compile:
        notes.append("--no-compile: decode step eager")
    if not HAS_SDPA:
        notes.append("no F.scaled_dot_product_attention: attention written out")
    if compiled:
        import torch._inductor.config as inductor_config
        # gpt-fast's settings
        inductor_config.coordinate_descent_tuning = True
        inductor_config.triton.unique_kernel_names = True
        if hasattr(inductor_config, "fx_graph_cache"):
            inductor_config.fx_graph_cache = True
        decode_fn = torch.compile(next_token, mode="reduce-overhead", fullgraph=True, dynamic=False)
        if device != "cuda":
            notes.append(f"mode reduce-overhead on {device}: Inductor kernels, no CUDA graphs")
    else:
        decode_fn = next_token
    prefill_fn = torch.compile(next_token, fullgraph=True, dynamic=False) if compiled and args.compile_prefill else next_token

    params = sum(p.numel() for p in model.parameters())
    with torch.no_grad():
        first_steps = [0.0] * 6
        w_start = time.perf_counter()
        generate(model, prompt, args.new_tokens, prefill_fn, decode_fn, device, steps_timed=first_steps)  # warm-up (and compile)
        warmup_s = time.perf_counter() - w_start
        compile_s = sum(first_steps[:3]) - 3 * (sum(first_steps[3:]) / 3)
        if compiled:
            # Inductor's compile worker processes are done; they would otherwise compete for cores while timing
            try:
                from torch._inductor.async_compile import shutdown_compile_workers
                shutdown_compile_workers()
            except ImportError:
                pass
        ttft, decode_s, _ = generate(model, prompt, args.new_tokens, prefill_fn, decode_fn, device)
        ttfts = [ttft] + [first_token_s(model, prompt, prefill_fn, device) for _ in range(max(0, args.ttft_samples - 1))]

    graphs = skips = None
    if compiled:
        # what the compiler did: graphs made (1 per compiled function when nothing recompiled) and the times
        # it ran a graph without CUDA graphs (a cuda run should show 0; the note says so otherwise)
        from torch._dynamo.utils import counters
        graphs = counters["stats"].get("unique_graphs")
        skips = counters["inductor"].get("cudagraph_skips", 0)
        if device == "cuda" and skips:
            notes.append(f"CUDA graphs skipped {skips} time(s): see TORCH_LOGS=perf_hints")

    steps = args.new_tokens - 1
    print(json.dumps({
        "peer": "gpt-fast-style", "batch": args.batch,
        "ttft_ms": round(statistics.median(ttfts) * 1e3, 3),
        "ttft_samples_ms": [round(t * 1e3, 3) for t in ttfts],
        "decode_tok_s": round(args.batch * steps / decode_s, 2) if steps > 0 else None,
        "decode_ms_per_step": round(decode_s * 1e3 / steps, 4) if steps > 0 else None,
        "compile_s": round(compile_s, 2) if compiled else None, "warmup_s": round(warmup_s, 2),
        "prompt_tokens": P, "new_tokens": args.new_tokens, "max_len": max_len,
        "compile": "reduce-overhead, fullgraph" if compiled else None,
        "dynamo_graphs": graphs, "cudagraph_skips": skips,
        "prefill": "compiled" if compiled and args.compile_prefill else "eager",
        "attention": "sdpa" if HAS_SDPA else "matmul-softmax",
        "moe": f"{a.experts} experts, top-{a.top_k}" if a.experts else None,
        "dtype": str(dtype).replace("torch.", ""), "parameters": params,
        "torch": torch.__version__,
        "device": torch.cuda.get_device_name() if device == "cuda" else device,
        "threads": torch.get_num_threads(),
        "note": "; ".join(notes) or None,
    }), flush=True)


class _nullctx:
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


if __name__ == "__main__":
    main()
