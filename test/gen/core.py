#!/usr/bin/env python3
"""Goldens for the core tests: dtype conversions and promotion, from PyTorch (/usr/bin/python3, torch 1.13).
Run: /usr/bin/python3 test/gen/core.py > test/fixtures/core.json"""
import json, struct, torch

def bits(t):
    if t.dtype in (torch.float16, torch.bfloat16): return t.view(torch.int16).to(torch.int32).bitwise_and(0xffff).tolist()
    if t.dtype == torch.float32: return t.view(torch.int32).tolist()
    return t.tolist()

g = torch.Generator().manual_seed(0)
vals = torch.cat([torch.randn(200, generator=g) * 10, torch.randn(100, generator=g) * 1e-5, torch.randn(50, generator=g) * 1e5,
                  torch.tensor([0.0, -0.0, float('inf'), float('-inf'), 65504, 65519.99, 65520, 1e-8, 6e-8, 5.96e-8, 2.98e-8,
                                448, 464, 465, 479, 480, 57344, 61439, 61440, 1.5, 2.5, -2.5, 300.7, -1.5, 127.9, -129.3, 3e9])])
vals = vals.to(torch.float32)
out = {"inputs_f32_bits": bits(vals), "conversions": {}}
for name, dt in [("float16", torch.float16), ("bfloat16", torch.bfloat16)]:
    out["conversions"][name] = bits(vals.to(dt))
for name in ["float8_e4m3fn", "float8_e5m2"]:
    if hasattr(torch, name):
        out["conversions"][name] = vals.to(getattr(torch, name)).view(torch.uint8).tolist()
finite = vals[torch.isfinite(vals) & (vals.abs() < 2e9)]
out["finite_f32_bits"] = bits(finite)
for name, dt in [("int32", torch.int32), ("int16", torch.int16), ("int8", torch.int8), ("uint8", torch.uint8), ("bool", torch.bool), ("int64", torch.int64)]:
    out["conversions"][name] = [int(x) for x in finite.to(dt).tolist()]
names = ["bool", "uint8", "int8", "int16", "int32", "int64", "float16", "bfloat16", "float32", "float64"]
out["promote"] = {a + "," + b: str(torch.promote_types(getattr(torch, a), getattr(torch, b))).replace("torch.", "") for a in names for b in names}
rt = []
for a in names:
    for kind, s in [("int", 3), ("float", 2.5), ("bool", True)]:
        for zero in (False, True):
            t = torch.zeros(() if zero else (2,), dtype=getattr(torch, a))
            rt.append([a, zero, kind, str(torch.result_type(t, s)).replace("torch.", "")])
    for b in names:
        t1 = torch.zeros((2,), dtype=getattr(torch, a)); t0 = torch.zeros((), dtype=getattr(torch, b))
        rt.append([a, False, "zerodim:" + b, str(torch.result_type(t1, t0)).replace("torch.", "")])
out["result_type"] = rt
out["can_cast"] = {a + "," + b: torch.can_cast(getattr(torch, a), getattr(torch, b)) for a in names for b in names}
print(json.dumps(out))
