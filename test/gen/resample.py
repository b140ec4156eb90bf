#!/usr/bin/env python3
"""Goldens for nn.functional.interpolate / grid_sample / affine_grid (test/fixtures/resample_goldens.json), torch 1.13.

    /usr/bin/python3 test/gen/resample.py

Uses the helpers of test/gen/conv.py. Covers every mode, align_corners both ways, non-integer and
per-dim scale factors (the given scale drives the coordinate mapping unless recompute_scale_factor),
antialiasing, uint8 nearest, and grid_sample for every mode x padding_mode x align_corners in 4-D and
5-D, including grid points that land exactly on half pixels (nearest rounds half to even).
"""
import os, sys
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from conv import Fixture, V, Fl  # noqa: E402


def resample_cases():
    fx = Fixture("resample_goldens", seed=3)
    r = fx.rnd
    for dt in (torch.float32, torch.float64, torch.float16, torch.bfloat16):
        t = str(dt)[6:]
        x3, x4, x5 = r((2, 3, 7), dt, -2, 2), r((1, 2, 6, 7), dt, -2, 2), r((1, 2, 3, 4, 5), dt, -2, 2)
        cases = [
            (x4, {"scale_factor": Fl(1.7), "mode": "nearest"}, "nearest_1.7"),
            (x4, {"size": [5, 13], "mode": "nearest"}, "nearest_size"),
            (x4, {"scale_factor": [Fl(0.6), Fl(2.5)], "mode": "nearest-exact"}, "nearest_exact"),
            (x4, {"scale_factor": Fl(1.7), "mode": "bilinear", "align_corners": False}, "bilinear_1.7"),
            (x4, {"scale_factor": [Fl(0.55), Fl(2.3)], "mode": "bilinear", "align_corners": True}, "bilinear_ac"),
            (x4, {"size": [6, 4], "mode": "bilinear"}, "bilinear_same_h"),
            (x4, {"scale_factor": Fl(1.3), "mode": "bicubic", "align_corners": False}, "bicubic_1.3"),
            (x4, {"size": [9, 4], "mode": "bicubic", "align_corners": True}, "bicubic_ac"),
            (x4, {"scale_factor": Fl(1.7), "mode": "bilinear", "recompute_scale_factor": True}, "bilinear_recompute"),
            (x4, {"scale_factor": Fl(0.4), "mode": "bilinear", "antialias": True}, "bilinear_aa"),
            (x4, {"size": [3, 4], "mode": "bicubic", "antialias": True}, "bicubic_aa"),
            (x4, {"size": [4, 5], "mode": "area"}, "area"),
            (x4, {"scale_factor": Fl(0.5), "mode": "area"}, "area_scale"),
            (x3, {"scale_factor": Fl(2.5), "mode": "linear"}, "linear"),
            (x3, {"size": 4, "mode": "linear", "align_corners": True}, "linear_ac"),
            (x3, {"size": 12, "mode": "nearest"}, "nearest_1d"),
            (x5, {"scale_factor": [Fl(1.5), Fl(0.7), Fl(2.0)], "mode": "trilinear"}, "trilinear"),
            (x5, {"size": [4, 4, 4], "mode": "trilinear", "align_corners": True}, "trilinear_ac"),
            (x5, {"scale_factor": Fl(1.5), "mode": "nearest"}, "nearest_3d"),
        ]
        for x, kw, tag in cases:
            fx.case("interpolate", [V(x)], kw, tag=f"{t}_{tag}")
        g = r((1, 4, 5, 2), dt, -1.2, 1.2)
        g3 = r((1, 2, 3, 4, 3), dt, -1.2, 1.2)
        if dt in (torch.float16, torch.bfloat16):
            # PyTorch 2.x's CPU grid_sample runs in the half type itself, rounding every operation; torch
            # 1.13 has no half kernel, so these come from 2.11 suites instead (test/gen/resample_211.py)
            continue
        for mode in ("bilinear", "nearest", "bicubic"):
            for pad in ("zeros", "border", "reflection"):
                for ac in (False, True):
                    if dt != torch.float32 and ac:
                        continue
                    fx.case("grid_sample", [V(x4), V(g)], {"mode": mode, "padding_mode": pad, "align_corners": ac}, tag=f"{t}_{mode}_{pad}_{ac}")
                    if mode != "bicubic" and (dt == torch.float32 or pad == "zeros"):
                        fx.case("grid_sample", [V(x5), V(g3)], {"mode": mode, "padding_mode": pad, "align_corners": ac}, tag=f"{t}_5d_{mode}_{pad}_{ac}")
    f = torch.float32
    x4 = r((2, 3, 4, 5), f, -2, 2)
    # grid points on exact half pixels, and far outside the input
    ticks = torch.tensor([-3.0, -1.0, -0.75, -0.5, -0.25, 0.0, 0.25, 0.5, 0.75, 1.0, 2.5])
    gy, gx = torch.meshgrid(ticks, ticks, indexing="ij")
    gh = torch.stack([gx, gy], -1).unsqueeze(0).repeat(2, 1, 1, 1)
    for mode in ("nearest", "bilinear", "bicubic"):
        for pad in ("zeros", "border", "reflection"):
            for ac in (False, True):
                fx.case("grid_sample", [V(x4), V(gh)], {"mode": mode, "padding_mode": pad, "align_corners": ac}, tag=f"ticks_{mode}_{pad}_{ac}")
    fx.case("grid_sample", [V(x4, [["transpose", 2, 3]]), V(r((2, 3, 3, 2), f, -1, 1))], {"align_corners": False}, tag="noncontig")
    fx.case("grid_sample", [V(r((1, 1, 1, 5), f)), V(r((1, 2, 2, 2), f, -1, 1))], {"padding_mode": "reflection", "align_corners": True}, tag="height1_reflect")
    # interpolate corner cases
    fx.case("interpolate", [V(x4)], {"scale_factor": Fl(1.05), "mode": "bilinear"}, tag="same_size_scale")
    # 1-D nearest runs the generic kernel (no same-size shortcut) in torch 1.13 and 2.x alike
    fx.case("interpolate", [V(r((2, 3, 9), f))], {"scale_factor": Fl(1.05), "mode": "nearest"}, tag="same_size_scale_nearest_1d")
    fx.case("interpolate", [V(r((2, 3, 9), torch.float64))], {"scale_factor": Fl(1.05), "mode": "nearest-exact"}, tag="same_size_scale_nearest_exact_1d")
    fx.case("interpolate", [V(x4)], {"scale_factor": Fl(2.0), "mode": "bicubic", "align_corners": True}, tag="bicubic_x2_ac")
    fx.case("interpolate", [V(x4)], {"scale_factor": Fl(0.3), "mode": "bilinear", "antialias": True, "align_corners": True}, tag="aa_ac")
    fx.case("interpolate", [V(x4)], {"scale_factor": Fl(2.7), "mode": "bicubic", "antialias": True}, tag="aa_upsample")
    fx.case("interpolate", [V(r((1, 1, 20, 17), f))], {"size": [3, 5], "mode": "bicubic", "antialias": True}, tag="aa_strong")
    fx.case("interpolate", [V(r((1, 2, 5, 6), torch.uint8, 0, 255))], {"scale_factor": Fl(1.5), "mode": "nearest"}, tag="uint8_nearest")
    fx.case("interpolate", [V(r((1, 2, 5, 6), torch.uint8, 0, 255))], {"size": [3, 11], "mode": "nearest-exact"}, tag="uint8_nearest_exact")
    fx.case("interpolate", [V(r((4, 5, 6), f))], {"scale_factor": Fl(0.75), "mode": "area"}, tag="area_1d")
    fx.case("interpolate", [V(r((1, 2, 4, 5, 6), f))], {"size": [2, 3, 4], "mode": "area"}, tag="area_3d")
    fx.case("upsample", [V(x4)], {"scale_factor": Fl(2.0), "mode": "bilinear", "align_corners": True}, tag="alias")
    fx.case("upsample_bilinear", [V(x4)], {"size": [5, 7]}, tag="alias_bilinear")
    fx.case("upsample_nearest", [V(x4)], {"scale_factor": 3}, tag="alias_nearest")
    # affine_grid, and grid_sample on it
    for ac in (False, True):
        th = r((2, 2, 3), f, -1.2, 1.2)
        fx.case("affine_grid", [V(th), [2, 3, 4, 5]], {"align_corners": ac}, tag=f"2d_{ac}")
        fx.case("affine_grid", [V(r((1, 3, 4), torch.float64, -1.2, 1.2)), [1, 2, 3, 4, 2]], {"align_corners": ac}, tag=f"3d_{ac}")
        fx.case("affine_grid", [V(th), [2, 1, 1, 3]], {"align_corners": ac}, tag=f"unit_{ac}")
    fx.case("affine_grid", [V(r((2, 2, 3), f)), [2, 3, 4]], tag="err_size_len", error=True)
    fx.case("affine_grid", [V(r((2, 3, 3), f)), [2, 3, 4, 5]], tag="err_theta_shape", error=True)
    fx.case("affine_grid", [V(r((2, 2, 3), torch.int64)), [2, 3, 4, 5]], tag="err_theta_int", error=True)
    e = dict(error=True)
    fx.case("interpolate", [V(x4)], {"size": 3, "scale_factor": Fl(2.0)}, tag="err_both", **e)
    fx.case("interpolate", [V(x4)], tag="err_neither", **e)
    fx.case("interpolate", [V(x4)], {"size": [3, 3, 3]}, tag="err_size_len", **e)
    fx.case("interpolate", [V(x4)], {"size": 3, "align_corners": True}, tag="err_ac_nearest", **e)
    fx.case("interpolate", [V(x4)], {"size": 3, "mode": "linear"}, tag="err_linear_4d", **e)
    fx.case("interpolate", [V(x4)], {"size": 3, "mode": "trilinear"}, tag="err_trilinear_4d", **e)
    fx.case("interpolate", [V(r((1, 2, 5), f))], {"size": 3, "mode": "bilinear"}, tag="err_bilinear_3d", **e)
    fx.case("interpolate", [V(x4)], {"size": 3, "mode": "cubic"}, tag="err_mode", **e)
    fx.case("interpolate", [V(x4)], {"size": 0}, tag="err_zero", **e)
    fx.case("interpolate", [V(x4)], {"scale_factor": Fl(0.1)}, tag="err_small_scale", **e)
    fx.case("interpolate", [V(x4)], {"size": 3, "recompute_scale_factor": True}, tag="err_recompute_size", **e)
    fx.case("interpolate", [V(x4)], {"size": 3, "mode": "nearest", "antialias": True}, tag="err_aa_nearest", **e)
    fx.case("interpolate", [V(r((1, 2, 5, 6), torch.int64))], {"size": 3}, tag="err_int64", **e)
    fx.case("interpolate", [V(r((1, 2, 5, 6), torch.uint8, 0, 255))], {"size": 3, "mode": "bilinear"}, tag="err_uint8_bilinear", **e)
    g = r((2, 3, 3, 2), f)
    fx.case("grid_sample", [V(x4), V(g)], {"mode": "cubic"}, tag="err_mode", **e)
    fx.case("grid_sample", [V(x4), V(g)], {"padding_mode": "wrap"}, tag="err_padding", **e)
    fx.case("grid_sample", [V(x4), V(g.double())], tag="err_dtype", **e)
    fx.case("grid_sample", [V(x4), V(r((3, 3, 3, 2), f))], tag="err_batch", **e)
    fx.case("grid_sample", [V(x4), V(r((2, 3, 3, 3), f))], tag="err_last_dim", **e)
    fx.case("grid_sample", [V(x4), V(r((2, 3, 2), f))], tag="err_grid_rank", **e)
    fx.case("grid_sample", [V(r((1, 1, 2, 3, 4), f)), V(r((1, 2, 2, 2, 3), f))], {"mode": "bicubic"}, tag="err_bicubic_5d", **e)
    fx.case("grid_sample", [V(r((2, 4, 0, 8), f)), V(g)], tag="err_empty", **e)
    fx.write()


if __name__ == "__main__":
    resample_cases()
