#!/usr/bin/env python3
"""Goldens for nn.functional pooling (test/fixtures/pool_goldens.json), from torch 1.13 CPU.

    /usr/bin/python3 test/gen/pool.py

Uses the helpers of test/gen/conv.py. Integer max pooling (which torch 1.13 lacks, 2.x has) is
checked against float64 max pooling of the same exactly-representable values.
"""
import os, sys
import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from conv import Fixture, V, Fl, enc, enc_tensor  # noqa: E402


def pool_cases():
    fx = Fixture("pool_goldens", seed=2)
    r = fx.rnd
    for dt in (torch.float32, torch.float64, torch.float16, torch.bfloat16):
        t = str(dt)[6:]
        x1, x2, x3 = r((2, 3, 11), dt, -3, 3), r((2, 3, 9, 10), dt, -3, 3), r((1, 2, 5, 7, 6), dt, -3, 3)
        fx.case("max_pool1d", [V(x1), 3], {"stride": 2, "padding": 1, "dilation": 2, "ceil_mode": True, "return_indices": True}, tag=f"{t}_all")
        fx.case("max_pool2d", [V(x2), [3, 2]], {"stride": [2, 3], "padding": [1, 1], "ceil_mode": True, "return_indices": True}, tag=f"{t}_ceil_idx")
        fx.case("max_pool2d", [V(x2), 3], {"stride": 2, "dilation": [2, 1], "padding": 1}, tag=f"{t}_dilated")
        fx.case("max_pool3d", [V(x3), [2, 3, 2]], {"stride": [1, 2, 2], "padding": [1, 1, 0], "ceil_mode": True, "return_indices": True}, tag=f"{t}_idx")
        fx.case("avg_pool1d", [V(x1), 4], {"stride": 3, "padding": 2, "ceil_mode": True}, tag=f"{t}_ceil")
        fx.case("avg_pool1d", [V(x1), 4], {"stride": 3, "padding": 2, "ceil_mode": True, "count_include_pad": False}, tag=f"{t}_ceil_nopad")
        fx.case("avg_pool2d", [V(x2), [3, 2]], {"stride": [2, 2], "padding": [1, 1], "ceil_mode": True}, tag=f"{t}_ceil")
        fx.case("avg_pool2d", [V(x2), 3], {"stride": 2, "padding": 1, "divisor_override": 5}, tag=f"{t}_divisor")
        fx.case("avg_pool3d", [V(x3), 3], {"stride": 2, "padding": 1, "ceil_mode": True, "count_include_pad": False}, tag=f"{t}_nopad")
        fx.case("avg_pool3d", [V(x3), [2, 2, 3]], {"stride": [2, 3, 2], "padding": [1, 1, 0], "divisor_override": 7}, tag=f"{t}_divisor")
        fx.case("adaptive_avg_pool1d", [V(x1), 4], tag=f"{t}")
        fx.case("adaptive_avg_pool2d", [V(x2), [4, 7]], tag=f"{t}")
        fx.case("adaptive_avg_pool2d", [V(x2), [None, 3]], tag=f"{t}_none")
        fx.case("adaptive_avg_pool3d", [V(x3), [3, 2, 4]], tag=f"{t}")
        fx.case("adaptive_max_pool2d", [V(x2), [4, 3]], {"return_indices": True}, tag=f"{t}_idx")
        fx.case("lp_pool2d", [V(x2.abs() if dt in (torch.float16, torch.bfloat16) else x2), Fl(2.0), 3], {"stride": 2}, tag=f"{t}_p2")
    f = torch.float32
    x2 = r((2, 3, 9, 10), f, -3, 3)
    # upsampling adaptive pools (windows overlap), 1-D max, 3-D max
    fx.case("adaptive_avg_pool2d", [V(x2), [13, 11]], tag="upsample")
    fx.case("adaptive_max_pool1d", [V(r((2, 3, 11), f)), 4], {"return_indices": True}, tag="idx")
    fx.case("adaptive_max_pool3d", [V(r((1, 2, 5, 7, 6), f)), [2, 3, 4]], {"return_indices": True}, tag="idx")
    # unbatched, non-contiguous, ceil_mode's last-window rule (the window that would start in the padding is dropped)
    fx.case("max_pool2d", [V(r((3, 7, 7), f)), 2], {"stride": 2, "padding": 1, "ceil_mode": True}, tag="unbatched_ceil")
    fx.case("max_pool2d", [V(x2, [["transpose", 2, 3]]), 2], {"ceil_mode": True}, tag="noncontig")
    fx.case("avg_pool2d", [V(r((1, 1, 5, 5), f)), 2], {"stride": 2, "padding": 1, "ceil_mode": True}, tag="ceil_rule")
    fx.case("avg_pool1d", [V(r((1, 1, 6), f)), 3], {"stride": 3, "padding": 1, "ceil_mode": True, "count_include_pad": True}, tag="ceil_rule_1d")
    fx.case("avg_pool1d", [V(r((2, 6), f)), 3], tag="unbatched_1d")
    fx.case("max_pool1d", [V(r((1, 2, 9), f)), 2], {"stride": 3, "padding": 1, "ceil_mode": True}, tag="ceil_rule_max1d")
    fx.case("lp_pool1d", [V(r((2, 3, 11), f, 0, 3)), Fl(1.5), 3], {"stride": 2, "ceil_mode": True}, tag="p1.5")
    fx.case("lp_pool2d", [V(x2), 1, [2, 3]], tag="p1")
    # NaN and -inf: NaN wins max pooling and its index; all -inf windows give -inf
    xn = r((1, 1, 4, 6), f)
    xn[0, 0, 1, 1] = float("nan")
    xn[0, 0, 2, 4] = float("nan")
    xn[0, 0, 3, 0:2] = float("-inf")
    fx.case("max_pool2d", [V(xn), 2], {"return_indices": True}, tag="nan")
    fx.case("adaptive_max_pool2d", [V(xn), [2, 2]], {"return_indices": True}, tag="nan")
    # int64 average pooling truncates like C++ integer division
    fx.case("avg_pool2d", [V(r((1, 2, 6, 6), torch.int64, -50, 50)), 3], {"stride": 2, "padding": 1}, tag="int64")
    # integer max pooling (torch 2.x): expected = float64 max pooling cast back
    for idt in (torch.int64, torch.int32, torch.uint8, torch.int16):
        xi = r((1, 2, 6, 7), idt, 0 if idt == torch.uint8 else -100, 200)
        vals, idx = F.max_pool2d(xi.double(), 3, 2, 1, return_indices=True)
        fx.cases.append({"id": f"max_pool2d/{str(idt)[6:]}", "op": "max_pool2d", "args": [enc(V(xi)), 3],
                         "kwargs": {"stride": 2, "padding": 1, "return_indices": True},
                         "out": [enc_tensor(vals.to(idt)), enc_tensor(idx)], "rtol": 0, "atol": 0})
    e = dict(error=True)
    fx.case("max_pool2d", [V(x2), 3], {"padding": 2}, tag="err_pad_half", **e)
    fx.case("max_pool2d", [V(r((1, 1, 2, 2), f)), 3], tag="err_too_small", **e)
    fx.case("max_pool2d", [V(r((9,), f)), 3], tag="err_rank", **e)
    fx.case("max_pool2d", [V(x2), 2], {"stride": 0}, tag="err_stride0", **e)
    fx.case("max_pool2d", [V(x2), 2], {"dilation": 0}, tag="err_dilation0", **e)
    fx.case("max_pool2d", [V(x2), [2, 2, 2]], tag="err_kernel_len", **e)
    fx.case("avg_pool2d", [V(x2), 3], {"padding": 2}, tag="err_pad_half", **e)
    fx.case("avg_pool2d", [V(x2), 2], {"divisor_override": 0}, tag="err_divisor0", **e)
    fx.case("avg_pool2d", [V(r((1, 1, 2, 2), f)), 3], tag="err_too_small", **e)
    fx.case("avg_pool2d", [V(r((1, 2, 6, 6), torch.int32)), 2], tag="err_int32", **e)
    fx.case("adaptive_avg_pool2d", [V(r((9,), f)), 2], tag="err_rank", **e)
    fx.case("adaptive_avg_pool2d", [V(x2), [1, 2, 3]], tag="err_len", **e)
    fx.case("adaptive_avg_pool2d", [V(x2), -1], tag="err_negative", **e)
    fx.case("adaptive_avg_pool2d", [V(r((1, 2, 6, 6), torch.int64)), 2], tag="err_int", **e)
    fx.case("adaptive_max_pool2d", [V(r((1, 1, 0, 3), f)), 2], tag="err_empty", **e)
    fx.write()


if __name__ == "__main__":
    pool_cases()
