#!/usr/bin/env python3
"""Goldens for torch.fft and complex tensors from PyTorch (/usr/bin/python3, torch 1.13 CPU): every 1-d and
n-d transform, n/s/dim/norm, odd and prime lengths (Bluestein), real/int/complex inputs, frequencies, shifts,
view_as_real/view_as_complex/real/imag/complex/polar, and error cases. Large lengths use inputs both sides
can generate exactly (k/1000 patterns) and store a sample of the outputs.
Run: /usr/bin/python3 test/gen/fft.py > test/fixtures/fft_goldens.json"""
import json, math, sys, torch

g = torch.Generator().manual_seed(4321)
tensors, cases = {}, []


def enc_tensor(t):
    t = t.resolve_conj().contiguous()
    cplx = t.is_complex()
    if cplx:
        t = torch.view_as_real(t)
    if t.dtype == torch.bool:
        data = [bool(v) for v in t.flatten().tolist()]
    elif t.dtype.is_floating_point:
        # enough digits for the tolerances (float32: round-trip; float64: 1e-14), no more: keeps the file small
        fmt = "%.15g" if t.dtype == torch.float64 else "%.8g"
        data = [float(fmt % v) if math.isfinite(v) else ("nan" if math.isnan(v) else ("inf" if v > 0 else "-inf")) for v in t.flatten().double().tolist()]
    else:
        data = t.flatten().tolist()
    d = {"dtype": str(t.dtype).replace("torch.", ""), "shape": list(t.shape), "data": data}
    if cplx:
        d["complex"] = True
    return d


class Gen:
    """An input both sides compute exactly: x[j] = ((j * 7919 + seed) % 2001 - 1000) / 1000 (+ i * the same with seed + 1)."""
    def __init__(self, n, dtype, seed=0):
        self.n, self.dtype, self.seed = n, dtype, seed

    def value(self):
        j = torch.arange(self.n, dtype=torch.int64)
        f = lambda s: ((j * 7919 + s) % 2001 - 1000).double() / 1000
        if self.dtype.is_complex:
            return torch.complex(f(self.seed), f(self.seed + 1)).to(self.dtype)
        return f(self.seed).to(self.dtype)


def enc(v):
    if isinstance(v, torch.Tensor):
        key = json.dumps(enc_tensor(v))
        return {"ref": tensors.setdefault(key, f"t{len(tensors)}")}
    if isinstance(v, Gen):
        return {"gen": v.n, "dtype": str(v.dtype).replace("torch.", ""), "seed": v.seed}
    if isinstance(v, torch.dtype):
        return str(v).replace("torch.", "")
    if isinstance(v, (list, tuple)):
        return [enc(x) for x in v]
    if isinstance(v, float):
        return {"float": v}
    return v


def val(v):
    return v.value() if isinstance(v, Gen) else v


def case(op, args, kwargs=None, tag="", tol=None, error=False, sample=None):
    kwargs = kwargs or {}
    fn = torch
    for p in op.split("."):
        fn = getattr(fn, p)
    c = {"id": f"{op}/{tag}/{len(cases)}", "op": op, "args": [enc(a) for a in args], "kwargs": {k: enc(v) for k, v in kwargs.items()}}
    try:
        out = fn(*[val(a) for a in args], **{k: val(v) for k, v in kwargs.items()})
    except Exception as e:
        if not error:
            print(f"skip {c['id']}: {e}", file=sys.stderr)
            return
        c["error"] = True
        cases.append(c)
        return
    assert not error, f"{c['id']}: expected an error"
    outs = list(out) if isinstance(out, (tuple, list)) else [out]
    if sample:  # large outputs: keep every sample-th element (of the flat view_as_real data)
        e = enc_tensor(outs[0])
        c["sample"] = sample
        e["data"] = e["data"][::sample]
        c["out"] = [e]
    else:
        c["out"] = [enc_tensor(o) for o in outs]
    dt = outs[0].dtype
    c["tol"] = tol if tol is not None else (0 if not (dt.is_floating_point or dt.is_complex) else 1e-12 if dt in (torch.float64, torch.complex128) else 2e-6)
    cases.append(c)


def rnd(*shape, dtype=torch.float32):
    return (torch.randint(-500, 501, shape, generator=g).double() / 128).to(dtype)


def crnd(*shape, dtype=torch.complex64):
    return torch.complex(rnd(*shape, dtype=torch.float64), rnd(*shape, dtype=torch.float64)).to(dtype)


# ---- 1-d transforms over many lengths ------------------------------------------------------------
for n in [1, 2, 3, 4, 5, 6, 7, 8, 9, 11, 12, 13, 14, 16, 17, 25, 30, 31, 64, 67, 97, 100, 128]:
    rows = 2 if n <= 16 else 1
    x, c = rnd(rows, n), crnd(rows, n)
    for op in ["fft", "ifft", "rfft", "ihfft"]:
        case("fft." + op, [x], tag=f"f32_{n}")
    for op in ["fft", "ifft"]:
        case("fft." + op, [c], tag=f"c64_{n}")
    if n > 1:
        for op in ["irfft", "hfft"]:
            case("fft." + op, [c], tag=f"c64_{n}")
    if n in (7, 12, 17, 97, 100):
        xd, cd = x.double(), c.to(torch.complex128)
        for op in ["fft", "ifft", "rfft", "ihfft"]:
            case("fft." + op, [xd], tag=f"f64_{n}")
        for op in ["fft", "ifft", "irfft", "hfft"]:
            case("fft." + op, [cd], tag=f"c128_{n}")
for n in [7, 8, 12]:
    x, c = rnd(3, n), crnd(3, n)
    for norm in ["backward", "forward", "ortho"]:
        for op in ["fft", "ifft", "rfft", "ihfft"]:
            case("fft." + op, [x], {"norm": norm}, tag=f"{norm}_{n}")
        for op in ["irfft", "hfft"]:
            case("fft." + op, [c], {"norm": norm}, tag=f"{norm}_{n}")
x, c = rnd(3, 10), crnd(3, 10)
case("fft.fft", [x], {"n": 5}, tag="trim")
case("fft.fft", [x], {"n": 23}, tag="pad")
case("fft.ifft", [c, 13], tag="pad_pos")
case("fft.rfft", [x], {"n": 11}, tag="n_odd")
case("fft.rfft", [x], {"n": 4}, tag="n_trim")
case("fft.irfft", [c], {"n": 9}, tag="n9")
case("fft.irfft", [c], {"n": 30}, tag="n30")
case("fft.irfft", [c[:, :1]], {"n": 1}, tag="n1")
case("fft.irfft", [x], tag="real_in")
case("fft.irfft", [x], {"n": 7, "norm": "ortho"}, tag="real_in_n7")
case("fft.hfft", [c], {"n": 7}, tag="n7")
case("fft.hfft", [x], tag="real_in")
case("fft.ihfft", [x], {"n": 6}, tag="n6")
x3, c3 = rnd(3, 5, 6), crnd(3, 5, 6)
case("fft.fft", [x3], {"dim": 1}, tag="dim1")
case("fft.fft", [c3, None, 0], tag="dim0_pos")
case("fft.rfft", [x3], {"dim": 0}, tag="dim0")
case("fft.irfft", [c3], {"dim": 1, "n": 6}, tag="dim1")
case("fft.ihfft", [x3], {"dim": -2}, tag="dim_neg")
case("fft.fft", [torch.arange(6)], tag="int64")
case("fft.rfft", [torch.tensor([True, False, True, True])], tag="bool")
case("fft.irfft", [torch.arange(5)], tag="int_c2r")
case("fft.fft", [torch.zeros(0, 4)], tag="empty_batch")

# ---- n-d transforms -------------------------------------------------------------------------------
for op in ["fft2", "ifft2", "rfft2", "ihfft2", "fftn", "ifftn", "rfftn", "ihfftn"]:
    case("fft." + op, [x3], tag="real")
for op in ["fft2", "ifft2", "irfft2", "hfft2", "fftn", "ifftn", "irfftn", "hfftn"]:
    case("fft." + op, [c3], tag="complex")
case("fft.fft2", [c3], {"s": [4, 7]}, tag="s")
case("fft.fft2", [c3], {"s": [4, 7], "norm": "ortho"}, tag="s_ortho")
case("fft.fft2", [x3], {"dim": [0, 2]}, tag="dims")
case("fft.fftn", [c3], {"s": [4]}, tag="s1")
case("fft.fftn", [c3], {"s": [-1, 3]}, tag="s_minus1")
case("fft.fftn", [c3], {"dim": [2, 0], "norm": "forward"}, tag="dims_rev")
case("fft.ifftn", [c3], {"s": [2, 3, 4]}, tag="s3")
case("fft.rfftn", [x3], {"s": [4, 6]}, tag="s")
case("fft.rfftn", [x3], {"dim": [0, 1]}, tag="dims")
case("fft.irfftn", [c3], {"s": [3, 10]}, tag="s")
case("fft.irfftn", [c3], {"dim": [0, 2], "norm": "ortho"}, tag="dims")
case("fft.irfft2", [c3], {"s": [5, -1]}, tag="s_minus1")
case("fft.hfftn", [c3], {"s": [4, 9]}, tag="s")
case("fft.hfft2", [c3], {"norm": "forward"}, tag="forward")
case("fft.ihfftn", [x3], {"dim": [2, 1], "norm": "ortho"}, tag="dims")
case("fft.ihfft2", [x3], {"s": [3, 7]}, tag="s")

# ---- frequencies and shifts -------------------------------------------------------------------------
case("fft.fftfreq", [5], tag="5")
case("fft.fftfreq", [8, 0.1], tag="d")
case("fft.fftfreq", [7], {"d": 0.3, "dtype": torch.float64}, tag="f64")
case("fft.rfftfreq", [7], {"d": 2.5}, tag="d")
case("fft.rfftfreq", [10], {"dtype": torch.float64}, tag="f64")
case("fft.fftfreq", [1], tag="1")
case("fft.fftshift", [torch.arange(6)], tag="even")
case("fft.ifftshift", [torch.arange(7)], tag="odd")
case("fft.fftshift", [torch.arange(12).reshape(3, 4)], tag="2d")
case("fft.ifftshift", [torch.arange(12).reshape(3, 4)], {"dim": 1}, tag="dim1")
case("fft.fftshift", [torch.arange(30).reshape(2, 3, 5).float()], {"dim": [0, 2]}, tag="dims")
case("fft.fftshift", [crnd(3, 5)], tag="complex")

# ---- complex tensors ---------------------------------------------------------------------------------
cc = crnd(3, 4)
case("view_as_real", [cc], tag="c64")
case("view_as_real", [cc.to(torch.complex128)], tag="c128")
case("view_as_complex", [rnd(3, 2)], tag="f32")
case("view_as_complex", [rnd(2, 3, 2, dtype=torch.float64)], tag="f64")
case("real", [cc], tag="c64")
case("imag", [cc], tag="c64")
case("real", [rnd(3)], tag="real_in")
case("complex", [rnd(2, 3), rnd(3)], tag="broadcast")
case("complex", [rnd(2, dtype=torch.float64), rnd(2, dtype=torch.float64)], tag="f64")
case("polar", [rnd(4).abs(), rnd(4)], tag="f32", tol=1e-6)
case("view_as_real", [rnd(3)], tag="real", error=True)
case("imag", [rnd(3)], tag="real", error=True)
case("view_as_complex", [rnd(3, 3)], tag="last3", error=True)
case("complex", [torch.arange(2), torch.arange(2)], tag="int", error=True)
case("complex", [rnd(2), rnd(2, dtype=torch.float64)], tag="mixed", error=True)

# ---- errors -------------------------------------------------------------------------------------------
case("fft.fft", [rnd(4).half()], tag="half", error=True)
case("fft.rfft", [rnd(4).bfloat16()], tag="bf16", error=True)
case("fft.rfft", [crnd(4)], tag="complex_in", error=True)
case("fft.ihfft", [crnd(4)], tag="complex_in", error=True)
case("fft.fft", [rnd(4)], {"n": 0}, tag="n0", error=True)
case("fft.fft", [rnd(4)], {"norm": "bad"}, tag="norm", error=True)
case("fft.fft", [rnd(4)], {"dim": 1}, tag="dim", error=True)
case("fft.irfft", [crnd(3, 1)], tag="n_default_0", error=True)
case("fft.fftn", [rnd(3, 4)], {"dim": [0, 0]}, tag="dup", error=True)
case("fft.fftn", [rnd(3, 4)], {"s": [3, 4], "dim": [0]}, tag="s_dim", error=True)
case("fft.fft2", [rnd(4)], tag="1d", error=True)

# ---- large and prime lengths (sampled outputs) -----------------------------------------------------------
for n in [97, 1000, 1009, 2310, 4096, 4099]:
    case("fft.fft", [Gen(n, torch.complex128)], tag=f"big_c128_{n}", sample=61)
    case("fft.ifft", [Gen(n, torch.complex128, 3)], {"norm": "ortho"}, tag=f"big_c128_{n}", sample=61)
    case("fft.rfft", [Gen(n, torch.float32)], tag=f"big_f32_{n}", sample=41)
    case("fft.irfft", [Gen(n, torch.complex64, 5)], tag=f"big_c64_{n}", sample=41)

print(json.dumps({"tensors": {n: json.loads(k) for k, n in tensors.items()}, "cases": cases}, separators=(",", ":")))
