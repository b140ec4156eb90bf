#!/usr/bin/env python3
"""Generates the model fixtures in test/fixtures/models/<case>/.

Each case is a tiny model with random weights, built with transformers for
one family or one configuration that changes the arithmetic (RoPE scaling,
sliding windows, soft-capping, experts), saved with save_pretrained (float32
safetensors, config.json, generation_config.json) and reloaded from disk, so
what transformers computes below is what the files on disk mean. Beside it:

- expected.safetensors: input_ids and attention_mask [2, T] (row 0 left-padded,
  row 1 not), position_ids [2, T] (what generate derives from the mask),
  logits [2, T, V] float32 (eval forward, float32 on the CPU), greedy and
  sampled [2, <= T + 8] (generate on the CPU in float32), logits_bf16_cuda
  [2, T, V] (the same forward with the model in bf16 on CUDA, cast to float32;
  absent without CUDA).
- expected.json: every setting used, versions, the checkpoint's tensor names
  and shapes, and the rope/attention settings of the config.

Weights are drawn with a fixed seed: matrices N(0, 1/fan_in) so activations
and logits have unit scale (the soft-caps and the expert router then matter),
norm weights U(0.5, 1.5) and biases N(0, 0.1), since transformers initializes
those to constants that would hide a wrong formula.

Usage: python3 test/gen/models/gen_fixtures.py [OUT_DIR] [CASE ...]
Needs PyTorch >= 2.5 and transformers 5 (the GPU machine has both).
"""
import json
import math
import sys
import traceback
from pathlib import Path

import torch
import transformers
from safetensors import safe_open
from safetensors.torch import save_file
from transformers import AutoModelForCausalLM, GenerationConfig

PAD, BOS, EOS = 0, 1, 2
T = 22
LEFT_PAD = 4
NEW_TOKENS = 8
GREEDY = dict(do_sample=False, max_new_tokens=NEW_TOKENS)
SAMPLE_SEED = 1234
SAMPLED = dict(do_sample=True, temperature=0.8, top_k=20, top_p=0.9, max_new_tokens=NEW_TOKENS)
ATTN = "eager"

# Shapes shared by most cases: hidden 48 = 4 heads x 12, 2 KV heads (GQA).
BASE = dict(vocab_size=128, hidden_size=48, intermediate_size=64, num_hidden_layers=2,
            num_attention_heads=4, num_key_value_heads=2, head_dim=12, max_position_embeddings=128,
            rms_norm_eps=1e-5, pad_token_id=PAD, bos_token_id=BOS, eos_token_id=EOS,
            tie_word_embeddings=False)


def rope(rope_type="default", theta=10000.0, **extra):
    return {"rope_type": rope_type, "rope_theta": theta, **extra}


# case name -> (transformers config class name, config kwargs, seed)
CASES = {
    "llama": ("LlamaConfig", dict(BASE, rope_parameters=rope()), 1),
    "llama3_rope": ("LlamaConfig", dict(BASE, rope_parameters=rope(
        "llama3", 10000.0, factor=8.0, low_freq_factor=1.0, high_freq_factor=4.0,
        original_max_position_embeddings=32)), 2),
    "llama_linear_rope": ("LlamaConfig", dict(BASE, rope_parameters=rope("linear", 10000.0, factor=4.0)), 3),
    "llama_dynamic_rope": ("LlamaConfig", dict(BASE, max_position_embeddings=16,
                                               rope_parameters=rope("dynamic", 10000.0, factor=2.0)), 4),
    "llama_tied": ("LlamaConfig", dict(BASE, tie_word_embeddings=True, rope_parameters=rope(theta=500000.0)), 5),
    "llama_v4config": ("LlamaConfig", dict(BASE, tie_word_embeddings=True, rope_parameters=rope(
        "llama3", 500000.0, factor=32.0, low_freq_factor=1.0, high_freq_factor=4.0,
        original_max_position_embeddings=32)), 6),
    "mistral": ("MistralConfig", dict(BASE, sliding_window=6, rope_parameters=rope(theta=1000000.0)), 7),
    "qwen2": ("Qwen2Config", dict({k: v for k, v in BASE.items() if k != "head_dim"},
                                  rope_parameters=rope(theta=1000000.0)), 8),
    "qwen3": ("Qwen3Config", dict(BASE, hidden_size=32, head_dim=16, rope_parameters=rope(theta=1000000.0)), 9),
    "mixtral": ("MixtralConfig", dict(BASE, hidden_size=32, head_dim=8, intermediate_size=32,
                                      num_local_experts=8, num_experts_per_tok=2,
                                      rope_parameters=rope(theta=1000000.0)), 10),
    "qwen3_moe": ("Qwen3MoeConfig", dict(BASE, hidden_size=32, head_dim=16, intermediate_size=48,
                                         moe_intermediate_size=24, num_experts=8, num_experts_per_tok=2,
                                         norm_topk_prob=True, decoder_sparse_step=1, mlp_only_layers=[],
                                         rope_parameters=rope(theta=1000000.0)), 11),
    "qwen3_moe_nonorm": ("Qwen3MoeConfig", dict(BASE, hidden_size=32, head_dim=16, intermediate_size=48,
                                                num_hidden_layers=3, moe_intermediate_size=24, num_experts=8,
                                                num_experts_per_tok=2, norm_topk_prob=False,
                                                decoder_sparse_step=1, mlp_only_layers=[1],
                                                rope_parameters=rope(theta=1000000.0)), 12),
    "phi3": ("Phi3Config", dict({k: v for k, v in BASE.items() if k != "head_dim"},
                                original_max_position_embeddings=128,
                                rope_parameters=rope(theta=10000.0, partial_rotary_factor=1.0)), 13),
    "gemma2": ("Gemma2Config", dict(BASE, head_dim=16, tie_word_embeddings=True, sliding_window=6,
                                    layer_types=["sliding_attention", "full_attention"],
                                    query_pre_attn_scalar=24, attn_logit_softcapping=2.0,
                                    final_logit_softcapping=3.0, hidden_activation="gelu_pytorch_tanh",
                                    rms_norm_eps=1e-6, rope_parameters=rope(theta=10000.0)), 14),
    "gemma3_text": ("Gemma3TextConfig", dict(BASE, head_dim=16, tie_word_embeddings=True, sliding_window=6,
                                             num_hidden_layers=3,
                                             layer_types=["sliding_attention", "sliding_attention",
                                                          "full_attention"],
                                             query_pre_attn_scalar=20, hidden_activation="gelu_pytorch_tanh",
                                             rms_norm_eps=1e-6, final_logit_softcapping=None,
                                             attn_logit_softcapping=None,
                                             rope_parameters={
                                                 "sliding_attention": rope(theta=10000.0),
                                                 "full_attention": rope(theta=1000000.0)}), 15),
}

ARCHITECTURES = {"Gemma3TextConfig": "Gemma3ForCausalLM"}


def randomize(model: torch.nn.Module, seed: int) -> None:
    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in sorted(model.named_parameters(), key=lambda kv: kv[0]):
            if p.ndim >= 2:
                p.copy_(torch.randn(p.shape, generator=gen) / math.sqrt(p.shape[-1]))
            elif name.endswith("bias"):
                p.copy_(torch.randn(p.shape, generator=gen) * 0.1)
            else:
                p.copy_(torch.rand(p.shape, generator=gen) + 0.5)


def make_inputs(vocab: int, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    gen = torch.Generator().manual_seed(1000 + seed)
    ids = torch.randint(3, vocab, (2, T), generator=gen)
    mask = torch.ones(2, T, dtype=torch.int64)
    ids[0, :LEFT_PAD] = PAD
    mask[0, :LEFT_PAD] = 0
    return ids, mask


def generation_position_ids(mask: torch.Tensor) -> torch.Tensor:
    # What transformers' generate derives from the attention mask.
    return (mask.long().cumsum(-1) - 1).masked_fill(mask == 0, 0)


def to_v4_config(path: Path) -> dict:
    """Rewrites config.json as transformers 4 wrote it: rope_theta and rope_scaling."""
    config = json.loads(path.read_text())
    params = dict(config.pop("rope_parameters"))
    config["rope_theta"] = params.pop("rope_theta")
    config["rope_scaling"] = params if params.get("rope_type", "default") != "default" else None
    config["torch_dtype"] = config.pop("dtype", "float32")
    config["transformers_version"] = "4.45.2"
    path.write_text(json.dumps(config, indent=2, sort_keys=True) + "\n")
    return config


def forward_logits(model, ids, mask, pos, device="cpu"):
    with torch.no_grad():
        return model(input_ids=ids.to(device), attention_mask=mask.to(device),
                     position_ids=pos.to(device)).logits.float().cpu()


def build_case(name: str, out_root: Path) -> dict:
    config_class, kwargs, seed = CASES[name]
    config = getattr(transformers, config_class)(**kwargs)
    config.architectures = [ARCHITECTURES.get(config_class, config_class.replace("Config", "ForCausalLM"))]
    torch.manual_seed(seed)
    model = AutoModelForCausalLM.from_config(config, attn_implementation=ATTN, dtype=torch.float32)
    randomize(model, seed)
    model.generation_config = GenerationConfig(bos_token_id=BOS, eos_token_id=EOS, pad_token_id=PAD)
    model.eval()
    folder = out_root / name
    folder.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(folder)

    ids, mask = make_inputs(config.vocab_size, seed)
    pos = generation_position_ids(mask)
    logits_built = forward_logits(model, ids, mask, pos)
    v4 = None
    if name == "llama_v4config":
        v4 = to_v4_config(folder / "config.json")

    loaded = AutoModelForCausalLM.from_pretrained(folder, attn_implementation=ATTN, dtype=torch.float32).eval()
    logits = forward_logits(loaded, ids, mask, pos)
    reload_diff = (logits - logits_built).abs().max().item()
    assert reload_diff == 0.0, f"{name}: reloaded model differs from the built one by {reload_diff}"
    if v4 is not None:
        assert "rope_parameters" not in v4 and loaded.config.rope_parameters["rope_type"] == "llama3"
    # Logits with positions 0..T-1 for every row, what a bare forward without
    # position_ids computes; only row 1 (no padding) must agree with `logits`.
    with torch.no_grad():
        logits_bare = loaded(input_ids=ids, attention_mask=mask).logits.float()

    with torch.no_grad():
        greedy = loaded.generate(ids, attention_mask=mask, **GREEDY)
        torch.manual_seed(SAMPLE_SEED)
        sampled = loaded.generate(ids, attention_mask=mask, **SAMPLED)

    tensors = {
        "input_ids": ids.contiguous(), "attention_mask": mask.contiguous(), "position_ids": pos.contiguous(),
        "logits": logits.contiguous(), "greedy": greedy.contiguous(), "sampled": sampled.contiguous(),
    }
    bf16_note = "no CUDA device: logits_bf16_cuda not generated"
    if torch.cuda.is_available():
        gpu = AutoModelForCausalLM.from_pretrained(folder, attn_implementation=ATTN,
                                                   dtype=torch.bfloat16).to("cuda").eval()
        tensors["logits_bf16_cuda"] = forward_logits(gpu, ids, mask, pos, "cuda").contiguous()
        bf16_note = f"bf16 weights and activations on {torch.cuda.get_device_name()}, eager attention, cast to float32"
        del gpu
    save_file(tensors, str(folder / "expected.safetensors"))

    with safe_open(str(folder / "model.safetensors"), "pt") as f:
        checkpoint = {k: list(f.get_slice(k).get_shape()) for k in sorted(f.keys())}
    valid = mask.bool()
    lc = loaded.config
    expected = {
        "case": name,
        "generated_by": "test/gen/models/gen_fixtures.py",
        "model_type": lc.model_type,
        "architecture": type(loaded).__name__,
        "versions": {"transformers": transformers.__version__, "torch": torch.__version__},
        "weights": {"seed": seed, "init": "matrices N(0, 1/fan_in), norm weights U(0.5, 1.5), biases N(0, 0.1)",
                    "dtype": "float32"},
        "checkpoint_tensors": checkpoint,
        "config_style": "transformers 4 (rope_theta, rope_scaling; rewritten config.json)" if v4 else
                        "transformers 5 (rope_parameters)",
        "reload_max_abs_diff": reload_diff,
        "inputs": {"T": T, "input_seed": 1000 + seed, "ids_drawn_from": [3, lc.vocab_size - 1],
                   "row0_left_pad": LEFT_PAD, "pad_token_id": PAD, "bos_token_id": BOS, "eos_token_id": EOS,
                   "eos_note": "eos_token_id 2 is never in the prompt; a row that generates it is filled with "
                               "pad_token_id 0 afterwards, and generate stops early only if both rows did"},
        "forward": {"attn_implementation": ATTN, "mode": "eval, torch.no_grad",
                    "position_ids": "attention_mask.cumsum(-1) - 1, pad positions 0 (what generate uses)",
                    "compare": "logits where attention_mask is 1; pad positions hold meaningless values",
                    "bare_forward_row1_max_abs_diff":
                        (logits_bare[1] - logits[1]).abs().max().item()},
        "greedy": {**GREEDY, "device": "cpu", "dtype": "float32", "shape": list(greedy.shape),
                   "stopped_on_eos": [bool((greedy[r, T:] == EOS).any()) for r in range(2)]},
        "sampled": {**SAMPLED, "manual_seed_before_generate": SAMPLE_SEED, "device": "cpu", "dtype": "float32",
                    "shape": list(sampled.shape),
                    "stopped_on_eos": [bool((sampled[r, T:] == EOS).any()) for r in range(2)]},
        "logits_bf16_cuda": {"note": bf16_note,
                             "max_abs_diff_vs_float32": (tensors["logits_bf16_cuda"] - logits)[valid].abs().max().item()
                             if "logits_bf16_cuda" in tensors else None},
        "logits_stats": {"absmax": logits[valid].abs().max().item(), "std": logits[valid].std().item()},
        "attention": {
            "num_attention_heads": lc.num_attention_heads, "num_key_value_heads": lc.num_key_value_heads,
            "head_dim": getattr(lc, "head_dim", None) or lc.hidden_size // lc.num_attention_heads,
            "sliding_window": getattr(lc, "sliding_window", None),
            "layer_types": getattr(lc, "layer_types", None),
            "query_pre_attn_scalar": getattr(lc, "query_pre_attn_scalar", None),
            "attn_logit_softcapping": getattr(lc, "attn_logit_softcapping", None),
            "final_logit_softcapping": getattr(lc, "final_logit_softcapping", None),
        },
        "rope": {"rope_parameters": lc.rope_parameters, "max_position_embeddings": lc.max_position_embeddings},
        "tie_word_embeddings": lc.tie_word_embeddings,
    }
    if name == "llama_dynamic_rope":
        expected["rope"]["note"] = ("T and T + 8 exceed max_position_embeddings 16, so transformers recomputes the "
                                    "inverse frequencies from max(position_ids) + 1 at every forward call, over the "
                                    "whole batch; during generate each step uses the current length")
    (folder / "expected.json").write_text(json.dumps(expected, indent=1) + "\n")
    return expected


def main() -> None:
    root = Path(__file__).resolve().parents[3]
    out = Path(sys.argv[1]) if len(sys.argv) > 1 else root / "test" / "fixtures" / "models"
    names = sys.argv[2:] or list(CASES)
    torch.set_num_threads(max(1, min(8, torch.get_num_threads())))
    failed = []
    for name in names:
        try:
            e = build_case(name, out)
            print(f"{name}: ok greedy {e['greedy']['shape']} eos {e['greedy']['stopped_on_eos']} "
                  f"sampled eos {e['sampled']['stopped_on_eos']} bf16 diff {e['logits_bf16_cuda']['max_abs_diff_vs_float32']} "
                  f"logits absmax {e['logits_stats']['absmax']:.2f} bare row1 diff {e['forward']['bare_forward_row1_max_abs_diff']:.2e}",
                  flush=True)
        except Exception:
            failed.append(name)
            print(f"{name}: FAILED\n{traceback.format_exc()}", flush=True)
    if failed:
        raise SystemExit(f"failed: {failed}")


if __name__ == "__main__":
    main()
