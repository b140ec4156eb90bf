#!/usr/bin/env python3
"""References for test/nn_module.test.ts from PyTorch (/usr/bin/python3, torch 1.13, CPU):
each layer's initial parameters under a seed, its forward on a fixed input, its printout, and the
state_dict names of a nested model. torch 1.13 has no nn.RMSNorm: its reference is computed from the
formula in float64. Run: /usr/bin/python3 test/gen/nn_layers.py > test/fixtures/nn/layers.json"""
import json, torch
import torch.nn as nn

def enc(t):
    t = t.detach()
    if t.dtype == torch.int64: return {"shape": list(t.shape), "dtype": "int64", "data": t.flatten().tolist()}
    return {"shape": list(t.shape), "dtype": str(t.dtype).replace("torch.", ""), "data": t.flatten().tolist()}

cases = []
def case(name, seed, build, ctor, inputs, train=False, state_override=None, forward=None):
    """ctor: how the test builds the same layer in nbx ([class, args..., options])."""
    torch.manual_seed(seed)
    m = build()
    init = {k: enc(v) for k, v in m.state_dict().items()}
    if state_override:
        with torch.no_grad():
            for k, v in state_override.items(): m.state_dict()[k].copy_(v)
    m.train(train)
    if train: torch.manual_seed(seed + 1000)
    with torch.no_grad():
        out = forward(m, *inputs) if forward else m(*inputs)
    cases.append({"name": name, "seed": seed, "ctor": ctor, "train": train, "init": init,
                  "state": {k: enc(v) for k, v in m.state_dict().items()},
                  "inputs": [enc(x) for x in inputs], "output": enc(out), "repr": repr(m)})

def module_list_repr(self):
    """PyTorch 2's ModuleList.__repr__ (1.13 prints every child): runs of equal children collapse."""
    reprs = [repr(item) for item in self]
    if not reprs: return self._get_name() + "()"
    blocks = [[0, 0, reprs[0]]]
    for i, r in enumerate(reprs[1:], 1):
        if r == blocks[-1][2]: blocks[-1][1] += 1
        else: blocks.append([i, i, r])
    lines = []
    for a, b, r in blocks:
        s = f"({a}): {r}" if a == b else f"({a}-{b}): {b - a + 1} x {r}"
        lines.append(nn.modules.module._addindent(s, 2))
    return self._get_name() + "(\n  " + "\n  ".join(lines) + "\n)"
nn.ModuleList.__repr__ = module_list_repr

g = torch.Generator().manual_seed(1234)
rn = lambda *s: torch.randn(*s, generator=g)

case("linear", 0, lambda: nn.Linear(5, 3), ["Linear", 5, 3], [rn(2, 4, 5)])
case("linear_nobias", 1, lambda: nn.Linear(6, 2, bias=False), ["Linear", 6, 2, {"bias": False}], [rn(3, 6)])
case("embedding", 2, lambda: nn.Embedding(10, 4, padding_idx=1), ["Embedding", 10, 4, {"padding_idx": 1}],
     [torch.tensor([[1, 2, 3], [9, 0, 1]])])
case("embedding_negpad", 3, lambda: nn.Embedding(7, 3, padding_idx=-1), ["Embedding", 7, 3, {"padding_idx": -1}],
     [torch.tensor([6, 0, 5])])
case("layernorm", 4, lambda: nn.LayerNorm([3, 4]), ["LayerNorm", [3, 4]], [rn(2, 3, 4) * 3 + 1],
     state_override={"weight": rn(3, 4), "bias": rn(3, 4)})
case("layernorm_noaffine", 5, lambda: nn.LayerNorm(4, eps=1e-3, elementwise_affine=False),
     ["LayerNorm", 4, {"eps": 1e-3, "elementwise_affine": False}], [rn(5, 4)])
case("conv1d", 6, lambda: nn.Conv1d(4, 6, 3, stride=2, padding=1, groups=2),
     ["Conv1d", 4, 6, 3, {"stride": 2, "padding": 1, "groups": 2}], [rn(2, 4, 9)])
case("conv1d_same", 7, lambda: nn.Conv1d(3, 2, 3, padding="same", dilation=2, bias=False),
     ["Conv1d", 3, 2, 3, {"padding": "same", "dilation": 2, "bias": False}], [rn(1, 3, 8)])
case("conv2d", 8, lambda: nn.Conv2d(3, 4, (3, 2), stride=(2, 1), padding=(1, 0)),
     ["Conv2d", 3, 4, [3, 2], {"stride": [2, 1], "padding": [1, 0]}], [rn(2, 3, 7, 6)])
case("conv2d_groups", 9, lambda: nn.Conv2d(4, 4, 3, padding=1, dilation=1, groups=4, bias=False),
     ["Conv2d", 4, 4, 3, {"padding": 1, "groups": 4, "bias": False}], [rn(1, 4, 5, 5)])
for nm, mod, ctor in [("silu", nn.SiLU(), ["SiLU"]), ("gelu", nn.GELU(), ["GELU"]),
                      ("gelu_tanh", nn.GELU(approximate="tanh"), ["GELU", {"approximate": "tanh"}]),
                      ("relu", nn.ReLU(), ["ReLU"]), ("tanh", nn.Tanh(), ["Tanh"]), ("sigmoid", nn.Sigmoid(), ["Sigmoid"]),
                      ("softmax", nn.Softmax(dim=1), ["Softmax", {"dim": 1}]), ("identity", nn.Identity(), ["Identity"])]:
    case(nm, 10, lambda mod=mod: mod, ctor, [rn(3, 5) * 3])
case("dropout_eval", 11, lambda: nn.Dropout(0.3), ["Dropout", 0.3], [rn(4, 5)])
case("dropout_train", 12, lambda: nn.Dropout(0.3), ["Dropout", 0.3], [rn(4, 5)], train=True)
case("sequential", 13, lambda: nn.Sequential(nn.Linear(4, 8), nn.GELU(), nn.Linear(8, 2)),
     ["Sequential", ["Linear", 4, 8], ["GELU"], ["Linear", 8, 2]], [rn(3, 4)])

# nn.init functions on a fresh tensor (test: the same seed, the same draws)
inits = []
for name, shape, call, args in [
    ("uniform_", [4, 5], lambda t: nn.init.uniform_(t, -2.0, 3.0), [-2.0, 3.0]),
    ("normal_", [6, 5], lambda t: nn.init.normal_(t, 0.5, 2.0), [0.5, 2.0]),
    ("xavier_uniform_", [7, 3, 2], lambda t: nn.init.xavier_uniform_(t, gain=2.0), [2.0]),
    ("xavier_normal_", [8, 4], lambda t: nn.init.xavier_normal_(t), []),
    ("kaiming_uniform_", [5, 6], lambda t: nn.init.kaiming_uniform_(t, mode="fan_out", nonlinearity="relu"), [{"mode": "fan_out", "nonlinearity": "relu"}]),
    ("kaiming_normal_", [9, 2, 3], lambda t: nn.init.kaiming_normal_(t, a=0.2), [0.2]),
]:
    torch.manual_seed(21)
    t = torch.empty(*shape)
    call(t)
    inits.append({"fn": name, "shape": shape, "args": args, "seed": 21, "out": enc(t)})

# nn.RMSNorm (PyTorch 2.4+): y = x * rsqrt(mean(x^2) + eps) * weight, eps None = finfo(dtype).eps.
def rms_case(name, shape, eps, x, w):
    e = torch.finfo(torch.float32).eps if eps is None else eps
    dims = tuple(range(-len(shape), 0))
    xd = x.double()
    y = xd * torch.rsqrt(xd.pow(2).mean(dims, keepdim=True) + e) * w.double()
    opts = {} if eps is None else {"eps": eps}
    cases.append({"name": name, "seed": None, "ctor": ["RMSNorm", shape, opts], "train": False, "init": None,
                  "state": {"weight": enc(w)}, "inputs": [enc(x)], "output": enc(y.float()), "repr": None})
rms_case("rmsnorm", [6], 1e-6, rn(2, 3, 6) * 2, rn(6))
rms_case("rmsnorm_default_eps_2d", [2, 3], None, rn(4, 2, 3) * 1e-3, rn(2, 3))

# state_dict names of a nested model: a decoder-like tree with ModuleList, Sequential (named and not),
# ModuleDict, bias=False, a persistent and a non-persistent buffer, and a tied head.
class Attn(nn.Module):
    def __init__(self):
        super().__init__()
        self.q_proj = nn.Linear(4, 4, bias=False); self.k_proj = nn.Linear(4, 2); self.o_proj = nn.Linear(4, 4, bias=False)
        self.register_buffer("inv_freq", torch.ones(2), persistent=False)
class Layer(nn.Module):
    def __init__(self):
        super().__init__()
        self.input_layernorm = nn.LayerNorm(4)
        self.self_attn = Attn()
        self.mlp = nn.Sequential(nn.Linear(4, 8), nn.SiLU(), nn.Linear(8, 4))
        self.register_buffer("scale", torch.ones(1))
class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.embed_tokens = nn.Embedding(11, 4)
        self.layers = nn.ModuleList([Layer() for _ in range(2)])
        self.heads = nn.ModuleDict({"cls": nn.Linear(4, 3), "reg": nn.Sequential(OrderedDict(proj=nn.Linear(4, 1)))})
        self.norm = nn.LayerNorm(4, elementwise_affine=False)
        self.lm_head = nn.Linear(4, 11, bias=False)
        self.lm_head.weight = self.embed_tokens.weight
from collections import OrderedDict
m = Model()
names = {"state_dict": list(m.state_dict().keys()), "named_parameters": [n for n, _ in m.named_parameters()],
         "named_buffers": [n for n, _ in m.named_buffers()], "named_modules": [n for n, _ in m.named_modules()],
         "repr": repr(m)}
json.dump({"torch": torch.__version__, "cases": cases, "inits": inits, "model": names}, __import__("sys").stdout)
