"""Shared by the golden generators: JSON encoding of numbers and tensors, and the conformance-style
tensor argument (a stored contiguous base plus view steps)."""
import math
import numpy as np
import torch


def num(v):
    if isinstance(v, float) and not math.isfinite(v):
        return "nan" if math.isnan(v) else ("inf" if v > 0 else "-inf")
    return v


class T:
    """A tensor argument: stored contiguous, then view steps (as the conformance format)."""
    def __init__(self, base, view=None):
        self.base, self.view = base.contiguous(), view or []

    def value(self):
        x = self.base
        for s in self.view:
            if s[0] == "transpose": x = x.transpose(s[1], s[2])
            elif s[0] == "permute": x = x.permute(*s[1])
            elif s[0] == "slice":
                idx = [slice(None)] * x.dim(); idx[s[1]] = slice(s[2], s[3], s[4]); x = x[tuple(idx)]
            elif s[0] == "expand": x = x.expand(*s[1])
        return x


def enc_tensor(t):
    t = t.detach().contiguous()
    vals = t.to(torch.float64).flatten().tolist() if t.dtype.is_floating_point else t.flatten().tolist()
    if t.dtype in (torch.float32, torch.float16, torch.bfloat16):  # shortest text that round-trips in float32
        vals = [float(str(np.float32(v))) for v in vals]
    if t.dtype == torch.int64: vals = [str(v) for v in vals]  # exact beyond 2^53
    if t.dtype == torch.bool: vals = [int(v) for v in vals]
    return {"shape": list(t.shape), "dtype": str(t.dtype)[6:], "data": [num(v) for v in vals]}


def val(v):
    """The PyTorch value of an argument: T becomes its view, lists of T their views."""
    if isinstance(v, T): return v.value()
    if isinstance(v, (list, tuple)) and v and isinstance(v[0], T): return [val(x) for x in v]
    return v
