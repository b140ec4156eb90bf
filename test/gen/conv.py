#!/usr/bin/env python3
"""Goldens for nn.functional.conv*/conv_transpose* (test/fixtures/conv_*.json), from torch 1.13 CPU.

    /usr/bin/python3 test/gen/conv.py

Also holds the small fixture-writing helpers that test/gen/pool.py and test/gen/resample.py import.
A fixture is {"cases": [CASE]}; CASE = {"id", "op" (name under nn.functional), "args", "kwargs",
"out": [TENSOR] | "error": true, "rtol", "atol"}. TENSOR = {"dtype", "shape", "data"} (data flat, with
"nan"/"inf"/"-inf" strings, float16/bfloat16 as their exact float values), optionally "view": steps
applied after loading (["permute", dims] | ["transpose", a, b] | ["slice", dim, start, end, step]).
Float Python scalars are {"float": x} so 2.0 stays a float. Half-precision expected values are computed
in float32 from the same inputs and rounded once (the engine's contract), never by torch's own half
kernels (torch 1.13 lacks several, and has a bfloat16 grouped conv_transpose bug).
"""
import json, math, os, sys
import torch
import torch.nn.functional as F

HERE = os.path.dirname(os.path.abspath(__file__))
FIXTURES = os.path.join(HERE, "..", "fixtures")
LOWP = (torch.float16, torch.bfloat16)
TOL = {torch.float32: (1e-4, 1e-5), torch.float64: (1e-10, 1e-12), torch.float16: (2e-3, 2e-3),
       torch.bfloat16: (1.6e-2, 1.6e-2), torch.uint8: (0, 0), torch.int8: (0, 0), torch.int16: (0, 0),
       torch.int32: (0, 0), torch.int64: (0, 0), torch.bool: (0, 0)}


class V:
    """A tensor argument: contiguous base plus view steps."""
    def __init__(self, base, view=None):
        self.base, self.view = base.contiguous(), view or []

    def value(self):
        x = self.base
        for st in self.view:
            if st[0] == "permute":
                x = x.permute(*st[1])
            elif st[0] == "transpose":
                x = x.transpose(st[1], st[2])
            elif st[0] == "slice":
                idx = [slice(None)] * x.dim()
                idx[st[1]] = slice(st[2], st[3], st[4])
                x = x[tuple(idx)]
        return x


class Fl:
    """A float Python scalar."""
    def __init__(self, v):
        self.v = v


def num(v, digits=17):
    if isinstance(v, float):
        if not math.isfinite(v):
            return "nan" if math.isnan(v) else ("inf" if v > 0 else "-inf")
        return float(f"{v:.{digits}g}")  # 9 digits round-trip float32 (and the half types) exactly
    return v


def enc_tensor(t):
    t = t.contiguous()
    dt = str(t.dtype).replace("torch.", "")
    data = (t.float() if t.dtype in LOWP else t).flatten().tolist()
    if t.dtype == torch.int64:  # beyond 2^53 as strings, so JSON keeps every bit
        return {"dtype": dt, "shape": list(t.shape), "data": [v if abs(v) <= 2 ** 53 else str(v) for v in data]}
    digits = 17 if t.dtype == torch.float64 else 9
    return {"dtype": dt, "shape": list(t.shape), "data": [num(v, digits) for v in data]}


def enc(v):
    if isinstance(v, V):
        d = enc_tensor(v.base)
        if v.view:
            d["view"] = v.view
        return {"tensor": d}
    if isinstance(v, Fl):
        return {"float": v.v}
    if isinstance(v, (list, tuple)):
        return [enc(x) for x in v]
    return v


def val(v, up=False):
    if isinstance(v, V):
        x = v.value()
        return x.float() if up and x.dtype in LOWP else x
    if isinstance(v, Fl):
        return v.v
    if isinstance(v, (list, tuple)):
        return type(v)(val(x, up) for x in v)
    return v


class Fixture:
    def __init__(self, name, seed=0):
        self.name, self.cases = name, []
        self.g = torch.Generator().manual_seed(seed)

    def rnd(self, shape, dtype=torch.float32, lo=-1.0, hi=1.0):
        x = torch.rand(tuple(shape), generator=self.g, dtype=torch.float64) * (hi - lo) + lo
        if dtype in (torch.uint8, torch.int8, torch.int16, torch.int32, torch.int64):
            return x.round().to(dtype)
        return x.to(dtype)

    def case(self, op, args, kwargs=None, error=False, rtol=None, atol=None, tag=""):
        kwargs = kwargs or {}
        fn = getattr(F, op)
        c = {"id": f"{op}/{tag or len(self.cases)}", "op": op, "args": [enc(a) for a in args],
             "kwargs": {k: enc(v) for k, v in kwargs.items()}}
        if error:
            try:
                fn(*[val(a) for a in args], **{k: val(v) for k, v in kwargs.items()})
            except Exception as e:
                c["error"] = True
                c["message"] = str(e).splitlines()[0][:200]
                self.cases.append(c)
                return
            raise AssertionError(f"{c['id']}: expected an error from torch")
        lowp = [a.base.dtype for a in args if isinstance(a, V) and a.base.dtype in LOWP]
        out = fn(*[val(a, up=True) for a in args], **{k: val(v, up=True) for k, v in kwargs.items()})
        outs = list(out) if isinstance(out, (tuple, list)) else [out]
        if lowp:
            outs = [o.to(lowp[0]) if o.dtype == torch.float32 else o for o in outs]
        c["out"] = [enc_tensor(o) for o in outs]
        r, a = TOL[outs[0].dtype]
        c["rtol"], c["atol"] = rtol if rtol is not None else r, atol if atol is not None else a
        self.cases.append(c)

    def write(self):
        os.makedirs(FIXTURES, exist_ok=True)
        path = os.path.join(FIXTURES, f"{self.name}.json")
        with open(path, "w") as fh:
            json.dump({"generator": f"test/gen (torch {torch.__version__})", "cases": self.cases}, fh, separators=(",", ":"))
        print(f"{path}: {len(self.cases)} cases, {os.path.getsize(path) // 1024} KiB")


def conv_cases():
    fx = Fixture("conv_goldens", seed=1)
    r = fx.rnd
    for dt in (torch.float32, torch.float64, torch.float16, torch.bfloat16):
        t = str(dt)[6:]
        x1 = r((2, 4, 13), dt)
        fx.case("conv1d", [V(x1), V(r((6, 2, 3), dt)), V(r((6,), dt))], {"stride": 2, "padding": 2, "dilation": 2, "groups": 2}, tag=f"{t}_s2d2g2")
        fx.case("conv1d", [V(x1), V(r((3, 4, 4), dt))], {"padding": "same", "dilation": 3}, tag=f"{t}_same_even")
        x2 = r((2, 6, 6, 7), dt)
        fx.case("conv2d", [V(x2), V(r((6, 2, 3, 2), dt)), V(r((6,), dt))], {"stride": [2, 1], "padding": [1, 2], "dilation": [2, 1], "groups": 3}, tag=f"{t}_mixed")
        fx.case("conv2d", [V(x2), V(r((4, 6, 2, 4), dt))], {"padding": "same"}, tag=f"{t}_same_even")
        fx.case("conv2d", [V(x2), V(r((12, 1, 3, 3), dt)), V(r((12,), dt))], {"groups": 6, "stride": 2, "padding": 1}, tag=f"{t}_depthwise_mult2")
        fx.case("conv3d", [V(r((1, 4, 5, 6, 5), dt)), V(r((4, 2, 2, 3, 2), dt)), V(r((4,), dt))], {"stride": [1, 2, 1], "padding": [1, 0, 1], "dilation": [2, 1, 1], "groups": 2}, tag=f"{t}_mixed")
        fx.case("conv_transpose1d", [V(x1), V(r((4, 3, 3), dt)), V(r((6,), dt))], {"stride": 3, "padding": 1, "output_padding": 2, "groups": 2, "dilation": 2}, tag=f"{t}_s3g2")
        ct_groups = 1 if dt == torch.bfloat16 else 2  # torch 1.13 bf16 grouped conv_transpose bug
        fx.case("conv_transpose2d", [V(x2[:1]), V(r((6, 4 // ct_groups, 3, 2), dt)), V(r((4,), dt))], {"stride": [2, 3], "padding": [1, 0], "output_padding": [1, 2], "groups": ct_groups}, tag=f"{t}_mixed")
        fx.case("conv_transpose3d", [V(r((1, 4, 3, 4, 3), dt)), V(r((4, 2, 2, 3, 3), dt))], {"stride": 2, "padding": [0, 1, 1], "output_padding": [1, 0, 1], "dilation": [1, 2, 1]}, tag=f"{t}_mixed")
    # float32-only layouts and corner cases
    f = torch.float32
    x = r((2, 5, 8, 7), f)
    fx.case("conv2d", [V(x, [["permute", [0, 1, 3, 2]]]), V(r((3, 5, 3, 3), f))], {"padding": 1}, tag="noncontig_input")
    fx.case("conv2d", [V(r((5, 8, 7), f)), V(r((3, 5, 3, 3), f)), V(r((3,), f))], {"padding": "valid"}, tag="unbatched")
    fx.case("conv2d", [V(x), V(r((4, 5, 1, 1), f))], {"stride": 2}, tag="pointwise_s2")
    fx.case("conv2d", [V(x), V(r((4, 5, 1, 1), f)), V(r((4,), f))], {"padding": 1}, tag="pointwise_pad")
    fx.case("conv2d", [V(x), V(r((4, 5, 3, 3), f))], {"stride": 3, "padding": 2, "dilation": 2}, tag="s3d2")
    fx.case("conv2d", [V(x), V(r((4, 5, 5, 3), f))], {"padding": "same", "dilation": [1, 3]}, tag="same_dilated")
    fx.case("conv2d", [V(r((1, 8, 7, 7), f)), V(r((16, 2, 3, 3), f))], {"groups": 4, "padding": 1}, tag="groups4")
    fx.case("conv2d", [V(x), V(r((5, 1, 3, 3), f))], {"groups": 5, "padding": [0, 2], "dilation": 2}, tag="depthwise_dilated")
    fx.case("conv2d", [V(x), V(r((5, 1, 2, 2), f))], {"groups": 5, "stride": [2, 3], "padding": "valid"}, tag="depthwise_strided")
    fx.case("conv2d", [V(r((0, 5, 8, 7), f)), V(r((3, 5, 3, 3), f))], tag="empty_batch")
    fx.case("conv2d", [V(r((2, 0, 8, 7), f)), V(r((3, 0, 3, 3), f)), V(r((3,), f))], tag="zero_channels")
    fx.case("conv1d", [V(r((3, 20), f)), V(r((2, 3, 5), f))], {"stride": 4}, tag="unbatched_1d")
    fx.case("conv3d", [V(r((2, 3, 4, 4, 4), f)), V(r((2, 3, 3, 3, 3), f))], {"padding": "same"}, tag="same_3d")
    fx.case("conv_transpose2d", [V(r((3, 5, 4), f)), V(r((3, 2, 3, 3), f))], {"stride": 2}, tag="unbatched_t")
    fx.case("conv_transpose2d", [V(x), V(r((5, 1, 3, 3), f)), V(r((5,), f))], {"groups": 5, "padding": 1}, tag="depthwise_t")
    fx.case("conv_transpose1d", [V(r((2, 3, 6), f)), V(r((3, 4, 1), f))], {"stride": 2, "output_padding": 1}, tag="pointwise_t")
    # integer convolution: exact, wrapping in the dtype (uint8/int8 sums overflow here on purpose)
    for idt, lo, hi in ((torch.int64, -50, 50), (torch.int32, -50, 50), (torch.int16, -20, 20), (torch.int8, -9, 9), (torch.uint8, 0, 15)):
        t = str(idt)[6:]
        xi = r((2, 4, 6, 7), idt, lo, hi)
        fx.case("conv2d", [V(xi), V(r((3, 4, 3, 3), idt, lo, hi)), V(r((3,), idt, lo, hi))], {"padding": 1}, tag=f"{t}_int")
        fx.case("conv2d", [V(xi), V(r((4, 1, 3, 2), idt, lo, hi))], {"groups": 4, "stride": [2, 1]}, tag=f"{t}_int_depthwise")
    fx.case("conv3d", [V(r((1, 2, 3, 4, 5), torch.int64, -9, 9)), V(r((2, 2, 2, 2, 2), torch.int64, -9, 9))], {"padding": 1}, tag="int64_3d")
    fx.case("conv_transpose2d", [V(r((1, 4, 3, 4), torch.int64, -9, 9)), V(r((4, 2, 3, 3), torch.int64, -9, 9)), V(r((4,), torch.int64, -9, 9))], {"stride": 2, "groups": 2}, tag="int64_t")
    fx.case("conv1d", [V(r((1, 2, 8), torch.int64, -2 ** 40, 2 ** 40)), V(r((1, 2, 3), torch.int64, -2 ** 20, 2 ** 20))], tag="int64_beyond_2^53")
    # errors (PyTorch's messages are recorded; the test checks the call throws)
    e = dict(error=True)
    fx.case("conv2d", [V(r((4, 9), f)), V(r((6, 4, 3, 3), f))], tag="err_rank", **e)
    fx.case("conv2d", [V(r((1, 2, 4, 9, 8), f)), V(r((6, 4, 3, 3), f))], tag="err_rank5", **e)
    fx.case("conv2d", [V(r((2, 4, 9, 8), f)), V(r((6, 4), f))], tag="err_weight_rank", **e)
    fx.case("conv2d", [V(r((2, 5, 9, 8), f)), V(r((6, 4, 3, 3), f))], tag="err_channels", **e)
    fx.case("conv2d", [V(r((2, 4, 9, 8), f)), V(r((6, 4, 3, 3), f))], {"groups": 4}, tag="err_groups_out", **e)
    fx.case("conv2d", [V(r((2, 6, 9, 8), f)), V(r((4, 2, 3, 3), f))], {"groups": 3}, tag="err_groups_div", **e)
    fx.case("conv2d", [V(r((2, 4, 9, 8), f)), V(r((6, 4, 3, 3), f))], {"groups": 0}, tag="err_groups0", **e)
    fx.case("conv2d", [V(r((1, 4, 2, 2), f)), V(r((6, 4, 3, 3), f))], tag="err_kernel_too_big", **e)
    fx.case("conv2d", [V(r((1, 4, 2, 2), f)), V(r((6, 4, 3, 3), f))], {"dilation": 2, "padding": 1}, tag="err_kernel_too_big_dil", **e)
    fx.case("conv2d", [V(r((2, 4, 9, 8), f)), V(r((6, 4, 3, 3), f))], {"padding": -1}, tag="err_negpad", **e)
    fx.case("conv2d", [V(r((2, 4, 9, 8), f)), V(r((6, 4, 3, 3), f))], {"stride": 0}, tag="err_stride0", **e)
    fx.case("conv2d", [V(r((2, 4, 9, 8), f)), V(r((6, 4, 3, 3), f))], {"stride": 2, "padding": "same"}, tag="err_same_strided", **e)
    fx.case("conv2d", [V(r((2, 4, 9, 8), f)), V(r((6, 4, 3, 3), f))], {"padding": "full"}, tag="err_pad_string", **e)
    fx.case("conv2d", [V(r((2, 4, 9, 8), f)), V(r((6, 4, 3, 3), f)), V(r((5,), f))], tag="err_bias", **e)
    fx.case("conv2d", [V(r((2, 4, 9, 8), f)), V(r((6, 4, 3, 3), f))], {"stride": [1, 1, 1]}, tag="err_stride_len", **e)
    fx.case("conv2d", [V(r((2, 4, 9, 8), torch.float64)), V(r((6, 4, 3, 3), f))], tag="err_dtype", **e)
    fx.case("conv2d", [V(r((2, 4, 9, 8), f)), V(r((6, 4, 3, 3), f)), V(r((6,), torch.float64))], tag="err_bias_dtype", **e)
    fx.case("conv1d", [V(r((2, 3, 4, 5), f)), V(r((2, 3, 3), f))], tag="err_rank_1d", **e)
    fx.case("conv_transpose2d", [V(r((2, 4, 9, 8), f)), V(r((5, 3, 3, 3), f))], tag="err_t_channels", **e)
    fx.case("conv_transpose2d", [V(r((2, 4, 9, 8), f)), V(r((4, 3, 3, 3), f))], {"output_padding": 1}, tag="err_t_outpad", **e)
    fx.case("conv_transpose2d", [V(r((1, 4, 1, 1), f)), V(r((4, 3, 3, 3), f))], {"padding": 2}, tag="err_t_too_small", **e)
    fx.case("conv_transpose2d", [V(r((2, 4, 9, 8), f)), V(r((4, 3, 3, 3), f)), V(r((4,), f))], tag="err_t_bias", **e)
    fx.case("conv_transpose2d", [V(r((2, 4, 9, 8), f)), V(r((4, 3, 3, 3), f))], {"groups": 3}, tag="err_t_groups", **e)
    fx.case("conv_transpose2d", [V(r((1, 4, 3, 3), torch.int32)), V(r((4, 3, 3, 3), torch.int32))], tag="err_t_int32", **e)
    fx.case("conv2d", [V(r((1, 4, 3, 3), f) > 0), V(r((4, 4, 3, 3), f) > 0)], tag="err_bool", **e)
    fx.write()


if __name__ == "__main__":
    conv_cases()
