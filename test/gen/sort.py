#!/usr/bin/env python3
"""Goldens for the sorting family (sort, argsort, msort, topk, kthvalue, median, nanmedian, mode, quantile,
unique, unique_consecutive, searchsorted, bucketize) from PyTorch (/usr/bin/python3, torch 1.13 CPU).
Inputs are tie-heavy on purpose: the indices PyTorch returns for equal elements come from its exact
algorithms (std::sort, partial_sort, nth_element, quick_select), which the engine reproduces.
Run: /usr/bin/python3 test/gen/sort.py > test/fixtures/sort_goldens.json"""
import json, math, torch

g = torch.Generator().manual_seed(1234)
cases = []


def enc_tensor(t):
    t = t.contiguous()
    if t.dtype == torch.bool:
        data = [bool(v) for v in t.flatten().tolist()]
    elif t.dtype == torch.int64:
        data = [v if abs(v) <= 2 ** 53 else str(v) for v in t.flatten().tolist()]
    elif t.dtype.is_floating_point:
        data = [v if math.isfinite(v) else ("nan" if math.isnan(v) else ("inf" if v > 0 else "-inf")) for v in t.flatten().double().tolist()]
    else:
        data = t.flatten().tolist()
    return {"dtype": str(t.dtype).replace("torch.", ""), "shape": list(t.shape), "data": data}


tensors = {}


def enc(v):
    if isinstance(v, T):
        # inputs are shared between cases: stored once, referenced by name
        body = enc_tensor(v.base)
        key = json.dumps(body)
        name = tensors.setdefault(key, f"t{len(tensors)}")
        d = {"ref": name}
        if v.view:
            d["view"] = v.view
        return d
    if isinstance(v, (list, tuple)):
        return [enc(x) for x in v]
    if isinstance(v, float):
        return {"float": v}  # a Python float scalar (JSON would lose 2.0 vs 2)
    return v


class T:
    def __init__(self, base, view=None):
        self.base, self.view = base, view or []

    def value(self):
        x = self.base
        for s in self.view:
            if s[0] == "transpose":
                x = x.transpose(s[1], s[2])
            elif s[0] == "expand":
                x = x.expand(*s[1])
            elif s[0] == "slice":
                idx = [slice(None)] * x.dim()
                idx[s[1]] = slice(s[2], s[3], s[4])
                x = x[tuple(idx)]
        return x


def val(v):
    return v.value() if isinstance(v, T) else v


def case(op, args, kwargs=None, tag="", exact=True, rtol=0.0, atol=0.0, error=False):
    kwargs = kwargs or {}
    fn = torch
    for p in op.split("."):
        fn = getattr(fn, p)
    c = {"id": f"{op}/{tag}/{len(cases)}", "op": op, "args": [enc(a) for a in args], "kwargs": {k: enc(v) for k, v in kwargs.items()}}
    try:
        out = fn(*[val(a) for a in args], **{k: val(v) for k, v in kwargs.items()})
    except Exception as e:
        if not error:
            print(f"skip {c['id']}: {e}", file=__import__("sys").stderr)
            return
        c["error"] = True
        cases.append(c)
        return
    assert not error, f"{c['id']}: expected an error"
    outs = list(out) if isinstance(out, (tuple, list)) else [out]
    c["out"] = [enc_tensor(o) for o in outs]
    c["exact"] = exact
    c["rtol"], c["atol"] = rtol, atol
    cases.append(c)


def ties(shape, hi=5, dtype=torch.float32):
    return torch.randint(0, hi, shape, generator=g).to(dtype)


def rnd(*shape):
    """Random floats with short exact decimals (keeps the fixture small)."""
    return torch.randint(-300, 301, shape, generator=g).float() / 32


def with_nans(x, p=0.15):
    x = x.clone()
    x[torch.rand(x.shape, generator=g) < p] = float("nan")
    return x


# ---- sort ---------------------------------------------------------------------------------------
for n in [7, 16, 17, 40, 300, 1000]:
    x = ties((2 if n < 1000 else 1, n))
    for desc in (False, True):
        for stable in (False, True) if n < 300 else (False,):
            case("sort", [T(x)], {"dim": -1, "descending": desc, "stable": stable}, tag=f"ties{n}")
x = ties((40, 5))
case("sort", [T(x), 0], tag="dim0")
case("sort", [T(x), 0, True], tag="dim0_desc")
case("sort", [T(x, [["transpose", 0, 1]])], {"dim": 1}, tag="transposed")
case("sort", [T(ties((3, 4, 50)))], {"dim": 1}, tag="3d_dim1")
case("sort", [T(ties((2, 30, 3)))], {"dim": 1, "descending": True}, tag="3d_desc")
case("sort", [T(torch.tensor([1.0, 2.0]), [["expand", [3, 2]]])], {"dim": 0}, tag="expanded")
# (a longer broadcast dim: torch >= 2.0 keeps index order there, 1.13 does not; tested in sort.test.ts)
x = with_nans(rnd(4, 60))
x[0, 3] = float("inf"); x[1, 7] = float("-inf"); x[2, 0] = -0.0; x[2, 1] = 0.0
for desc in (False, True):
    case("sort", [T(x)], {"descending": desc}, tag="nan")
    case("sort", [T(x)], {"descending": desc, "stable": True}, tag="nan_stable")
for dt in [torch.float64, torch.float16, torch.bfloat16, torch.int32, torch.int16, torch.int8, torch.uint8, torch.bool, torch.int64]:
    x = ties((2, 50), 3).to(dt) if dt != torch.bool else ties((2, 50), 2).bool()
    tag = str(dt)[6:]
    case("sort", [T(x)], tag=tag)
    case("sort", [T(x)], {"descending": True}, tag=tag + "_desc")
    case("sort", [T(x)], {"stable": True, "descending": True}, tag=tag + "_stable_desc")
x64 = with_nans(ties((2, 60), 5).double() / 3, 0.1)
x64[0, :4] = torch.tensor([0.0, -0.0, -0.0, 0.0], dtype=torch.float64)
for desc in (False, True):
    case("sort", [T(x64)], {"descending": desc}, tag="f64_thirds")
    case("sort", [T(x64)], {"descending": desc, "stable": True}, tag="f64_thirds_stable")
    case("topk", [T(x64), 7], {"largest": not desc}, tag="f64_thirds")
case("kthvalue", [T(x64), 20], tag="f64_thirds")
case("mode", [T(x64)], tag="f64_thirds")
case("unique", [T(ties((2, 30), 5).double() / 3)], {"return_inverse": True, "return_counts": True}, tag="f64_thirds")  # (NaN: 1.13 differs from 2.x)
big = torch.tensor([2 ** 60 + 3, 2 ** 60 + 1, -(2 ** 62), 2 ** 60 + 1, 5, 2 ** 60 + 2, -(2 ** 62) - 1, 2 ** 60 + 3] * 3, dtype=torch.int64)
case("sort", [T(big)], tag="int64_big")
case("sort", [T(big)], {"descending": True}, tag="int64_big_desc")
case("sort", [T(torch.randperm(1500, generator=g).float() - 700)], tag="perm1500")
case("sort", [T(torch.tensor(2.5))], tag="0d")
case("sort", [T(torch.zeros(0))], tag="empty")
case("sort", [T(torch.zeros(3, 0))], {"dim": 0}, tag="empty2")
case("sort", [T(torch.zeros(3, 4)), 2], tag="bad_dim", error=True)
case("argsort", [T(ties((3, 45)))], tag="ties")
case("argsort", [T(ties((3, 45))), 0, True], tag="ties_desc")
case("argsort", [T(ties((3, 45)))], {"stable": True, "descending": True}, tag="stable_desc")
case("msort", [T(ties((30, 3)))], tag="ties")

# ---- topk ---------------------------------------------------------------------------------------
for n, ks in [(200, [1, 2, 3, 4, 10, 100, 200]), (40, [1, 5, 39]), (130, [1, 2, 3])]:
    x = ties((2, n))
    for k in ks:
        for largest in (True, False):
            case("topk", [T(x), k], {"largest": largest}, tag=f"ties{n}_k{k}")
        case("topk", [T(x), k], {"sorted": False}, tag=f"ties{n}_k{k}_unsorted")
x = with_nans(ties((3, 150), 7))
for k in [1, 2, 20]:
    case("topk", [T(x), k], tag="nan")
    case("topk", [T(x), k], {"largest": False}, tag="nan_small")
case("topk", [T(ties((50, 4))), 3, 0], tag="dim0")
case("topk", [T(ties((4, 50)).to(torch.int64)), 5], tag="int64")
case("topk", [T(ties((4, 50)).double()), 5, -1, False], tag="f64")
case("topk", [T(torch.tensor(3.0)), 1], tag="0d")
case("topk", [T(torch.zeros(2, 5)), 0], tag="k0")
case("topk", [T(torch.zeros(2, 5)), 6], tag="k_big", error=True)
case("topk", [T(torch.zeros(2, 5)), -1], tag="k_neg", error=True)
case("topk", [T(torch.zeros(2, 5).bool()), 1], tag="bool", error=True)

# ---- kthvalue, median, mode ---------------------------------------------------------------------
for n in [2, 3, 15, 57, 200]:
    x = ties((4, n), 4)
    for k in sorted({1, (n + 1) // 2, n}):
        case("kthvalue", [T(x), k], tag=f"ties{n}_k{k}")
case("kthvalue", [T(with_nans(ties((3, 40)))), 30], tag="nan")
case("kthvalue", [T(ties((30, 3))), 7, 0, True], tag="dim0_keepdim")
case("kthvalue", [T(ties((30, 3)).to(torch.int32)), 7, 0], tag="int32")
case("kthvalue", [T(torch.tensor(4.0)), 1], tag="0d")
case("kthvalue", [T(torch.zeros(0, 3)), 1], tag="empty_rows")
case("kthvalue", [T(torch.zeros(3, 5)), 0], tag="k0", error=True)
case("kthvalue", [T(torch.zeros(3, 5)), 6], tag="k6", error=True)
case("kthvalue", [T(torch.zeros(3, 0)), 1], tag="empty_dim", error=True)
for n in [1, 2, 9, 40, 101]:
    x = ties((3, n), 4)
    case("median", [T(x), -1], tag=f"ties{n}")
    case("median", [T(x)], tag=f"all{n}")
    case("mode", [T(x)], tag=f"ties{n}")
x = with_nans(ties((5, 30)), 0.1)
x[4] = float("nan")
case("median", [T(x), 1], tag="nan")
case("nanmedian", [T(x), 1], tag="nan")
case("median", [T(x)], tag="nan_all")
case("nanmedian", [T(x)], tag="nan_all")
case("median", [T(ties((20, 3))), 0, True], tag="dim0_keepdim")
case("median", [T(ties((20, 3)).to(torch.int64))], tag="int64_all")
case("mode", [T(ties((30, 4), 3)), 0], tag="dim0")
case("mode", [T(ties((2, 300), 6).to(torch.int64))], tag="int64_300")
case("mode", [T(ties((3, 40), 2).bool())], tag="bool")
case("mode", [T(ties((2, 17)))], {"keepdim": True}, tag="keepdim")
case("median", [T(torch.zeros(0))], tag="empty")
case("nanmedian", [T(torch.zeros(0, dtype=torch.int64))], tag="empty_int")

# ---- quantile -----------------------------------------------------------------------------------
x = rnd(4, 33)
for interp in ["linear", "lower", "higher", "midpoint", "nearest"]:
    case("quantile", [T(x), 0.3], {"dim": 1, "interpolation": interp}, tag=interp, exact=False, rtol=1e-6, atol=1e-6)
case("quantile", [T(x), T(torch.tensor([0.0, 0.25, 0.5, 0.9, 1.0]))], {"dim": 0, "keepdim": True}, tag="qvec", exact=False, rtol=1e-6, atol=1e-6)
case("quantile", [T(x.double()), 0.77], tag="flat_f64", exact=False, rtol=1e-12, atol=1e-12)
case("quantile", [T(with_nans(x)), 0.5], {"dim": 1}, tag="nan", exact=False, rtol=1e-6, atol=1e-6)
case("nanquantile", [T(with_nans(x)), T(torch.tensor([0.1, 0.5]))], {"dim": 1}, tag="nan", exact=False, rtol=1e-6, atol=1e-6)
case("quantile", [T(x), 1.5], tag="q_range", error=True)
case("quantile", [T(x.int()), 0.5], tag="int", error=True)

# ---- unique -------------------------------------------------------------------------------------
for dt in [torch.float32, torch.int64, torch.int32, torch.uint8, torch.float16, torch.bfloat16, torch.float64, torch.bool]:
    u = ties((3, 11), 6).to(dt)
    tag = str(dt)[6:]
    case("unique", [T(u)], tag=tag)
    case("unique", [T(u)], {"return_inverse": True, "return_counts": True}, tag=tag + "_all")
    case("unique_consecutive", [T(u)], {"return_inverse": True, "return_counts": True}, tag=tag)
u = ties((4, 12), 6)
case("unique", [T(u)], {"return_inverse": True}, tag="inverse")
case("unique", [T(u)], {"return_counts": True}, tag="counts")
case("unique", [T(big)], {"return_counts": True}, tag="int64_big")
case("unique", [T(torch.tensor(7))], {"return_inverse": True}, tag="0d")
case("unique", [T(torch.zeros(0))], {"return_inverse": True, "return_counts": True}, tag="empty")
r = ties((9, 3), 2).to(torch.int64)
case("unique", [T(r)], {"dim": 0, "return_inverse": True, "return_counts": True}, tag="dim0")
case("unique", [T(r)], {"dim": 1, "return_inverse": True, "return_counts": True}, tag="dim1")
case("unique", [T(r)], {"dim": -1}, tag="dim_neg")
case("unique", [T(ties((2, 6, 2), 2))], {"dim": 1, "return_counts": True}, tag="dim_3d")
case("unique", [T(torch.zeros(0, 3))], {"dim": 0, "return_inverse": True, "return_counts": True}, tag="dim_empty")
case("unique", [T(torch.zeros(0, 0))], {"dim": 0}, tag="dim_two_empty", error=True)
case("unique", [T(torch.zeros(3, 0))], {"dim": 0}, tag="dim_unselected_empty", error=True)
c = torch.tensor([1, 1, 2, 2, 3, 1, 1, 2, 2, 2])
case("unique_consecutive", [T(c)], tag="plain")
case("unique_consecutive", [T(c)], {"return_inverse": True}, tag="inverse")
case("unique_consecutive", [T(c)], {"dim": 0, "return_counts": True}, tag="dim0_1d")
rc = torch.tensor([[1, 1], [1, 1], [2, 2], [1, 1], [1, 1]])
case("unique_consecutive", [T(rc)], {"dim": 0, "return_inverse": True, "return_counts": True}, tag="dim0")
case("unique_consecutive", [T(rc)], {"dim": 1, "return_inverse": True, "return_counts": True}, tag="dim1")
case("unique_consecutive", [T(rc)], {"return_inverse": True}, tag="flat2d")

# ---- searchsorted, bucketize -------------------------------------------------------------------
bnd = torch.tensor([-2.0, -0.5, 0.0, 0.0, 1.0, 2.5, 2.5, 4.0])
vals = torch.cat([rnd(30), torch.tensor([-2.0, 0.0, 2.5, 4.0, 9.0, -9.0, float("nan")])])
case("searchsorted", [T(bnd), T(vals)], tag="left")
case("searchsorted", [T(bnd), T(vals)], {"right": True}, tag="right")
case("searchsorted", [T(bnd), T(vals)], {"side": "right"}, tag="side_right")
case("searchsorted", [T(bnd), T(vals)], {"side": "left", "out_int32": True}, tag="int32")
case("searchsorted", [T(bnd), T(vals.reshape(37, 1))], tag="2d_input")
case("searchsorted", [T(bnd), 0.0], tag="scalar")
case("searchsorted", [T(bnd), 2], {"right": True}, tag="scalar_int")
case("searchsorted", [T(bnd.int()), T(vals)], tag="int_bnd_float_vals")
case("searchsorted", [T(bnd), T(torch.tensor([0, 1, 2, 5]))], tag="float_bnd_int_vals")
case("searchsorted", [T(bnd.double()), T(vals)], tag="f64_f32")
case("searchsorted", [T(bnd.half()), T(vals.half())], tag="f16")
case("searchsorted", [T(big.sort().values), T(big)], tag="int64_big")
case("searchsorted", [T(big.sort().values), T(big)], {"right": True}, tag="int64_big_right")
nd = torch.sort(rnd(3, 4, 6), dim=-1).values
case("searchsorted", [T(nd), T(rnd(3, 4, 5))], tag="nd")
case("searchsorted", [T(nd), T(rnd(3, 4, 5))], {"right": True, "out_int32": True}, tag="nd_right")
perm = torch.tensor([5.0, 1.0, 3.0, 3.0, -1.0, 8.0])
case("searchsorted", [T(perm), T(torch.tensor([0.0, 3.0, 4.0, 9.0]))], {"sorter": T(torch.argsort(perm, stable=True))}, tag="sorter")
case("searchsorted", [T(perm), T(torch.tensor([0.0, 3.0, 4.0, 9.0]))], {"sorter": T(torch.argsort(perm, stable=True)), "right": True}, tag="sorter_right")
case("searchsorted", [T(torch.tensor([1.0, float("nan")])), T(torch.tensor([float("nan"), 2.0, 0.5]))], tag="nan_bnd")
case("searchsorted", [T(torch.zeros(0)), T(torch.tensor([1.0]))], tag="empty_bnd")
case("searchsorted", [T(bnd), T(torch.zeros(0))], tag="empty_vals")
case("searchsorted", [T(bnd), T(vals)], {"side": "left", "right": True}, tag="side_conflict", error=True)
case("searchsorted", [T(bnd), T(vals)], {"side": "middle"}, tag="side_bad", error=True)
case("searchsorted", [T(nd), T(rnd(5))], tag="nd_mismatch", error=True)
case("searchsorted", [T(nd), 1.0], tag="nd_scalar", error=True)
case("searchsorted", [T(torch.tensor(1.0)), T(vals)], tag="0d_bnd", error=True)
case("searchsorted", [T(perm), T(vals)], {"sorter": T(torch.tensor([0, 1, 2]))}, tag="sorter_size", error=True)
case("searchsorted", [T(perm), T(vals)], {"sorter": T(torch.arange(6).int())}, tag="sorter_dtype", error=True)
case("searchsorted", [T(bnd.bool()), T(vals.bool())], tag="bool", error=True)
case("bucketize", [T(vals), T(bnd)], tag="left")
case("bucketize", [T(vals.reshape(37, 1)), T(bnd)], {"right": True, "out_int32": True}, tag="right")
case("bucketize", [3.0, T(bnd)], tag="scalar")
case("bucketize", [T(vals), T(nd)], tag="2d_bnd", error=True)

print(json.dumps({"tensors": {n: json.loads(k) for k, n in tensors.items()}, "cases": cases}, separators=(",", ":")))
