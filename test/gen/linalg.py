#!/usr/bin/env python3
"""Goldens for test/linalg.test.ts (matmul and relatives, linear, trace, matrix_power), from PyTorch
(/usr/bin/python3, torch 1.13). float16/bfloat16 products 1.13 cannot run on CPU are computed in
float32 and rounded once, as PyTorch 2.x's CPU kernels do. Error cases record torch's message next to
the error class nbxtensor raises.

Run: /usr/bin/python3 test/gen/linalg.py test/fixtures
Writes linalg_products.json, linalg_misc.json, linalg_errors.json.
"""
import json, math, os, sys
import numpy as np
import torch
import torch.nn.functional as F
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from golden_common import T, enc_tensor, num, val  # noqa: E402

G = torch.Generator().manual_seed(4321)
LOWP = (torch.float16, torch.bfloat16)
FLOATS = [torch.float32, torch.float64, torch.float16, torch.bfloat16]


def rnd(shape, dtype=torch.float32, lo=-1.0, hi=1.0):
    if not dtype.is_floating_point:
        return torch.randint(int(lo), int(hi) + 1, shape, generator=G).to(dtype)
    return (torch.rand(shape, generator=G, dtype=torch.float64) * (hi - lo) + lo).to(dtype)








TENSORS = {}  # file -> {name: (tensor, encoding)}


def enc(v, file):
    if isinstance(v, T):
        table = TENSORS.setdefault(file, {})
        key = next((k for k, t in table.items() if t[0] is v.base), None)
        if key is None:
            key = f"t{len(table)}"
            table[key] = (v.base, enc_tensor(v.base))
        return {"tensor": key, "view": v.view}
    if isinstance(v, bool): return {"bool": v}
    if isinstance(v, float): return {"float": num(v)}
    if isinstance(v, (list, tuple)): return [enc(x, file) for x in v]
    return v




def lowp(fn):
    """Runs fn; float16/bfloat16 inputs PyTorch 1.13 cannot handle on CPU run in float32, rounded once."""
    def flat(v): return [x for a in v for x in (a if isinstance(a, (list, tuple)) else [a])]
    def up(a):
        if isinstance(a, (list, tuple)): return [up(x) for x in a]
        return a.float() if isinstance(a, torch.Tensor) and a.dtype in LOWP else a
    def run(*args, **kw):
        lp = [a.dtype for a in flat(list(args) + list(kw.values())) if isinstance(a, torch.Tensor) and a.dtype in LOWP]
        if not lp: return fn(*args, **kw)
        return fn(*[up(a) for a in args], **{k: up(x) for k, x in kw.items()}).to(lp[0])
    return run


FILES = {}


def resolve(op):
    obj = torch
    for p in op.split("."): obj = getattr(obj, p)
    return obj


def case(file, name, op, args, kwargs=None, ref=None, rtol=1e-5, atol=1e-5, error=None):
    kwargs = kwargs or {}
    c = {"name": name, "op": op, "args": [enc(a, file) for a in args], "kwargs": {k: enc(v, file) for k, v in kwargs.items()}}
    fn = ref or lowp(resolve(op))
    if error:
        try:
            resolve(op)(*[val(a) for a in args], **{k: val(v) for k, v in kwargs.items()})
        except Exception as e:
            c["error"], c["torch_message"] = error, str(e).splitlines()[0]
            FILES.setdefault(file, []).append(c)
            return
        raise AssertionError(f"{name}: expected an error")
    out = fn(*[val(a) for a in args], **{k: val(v) for k, v in kwargs.items()})
    c["out"] = [enc_tensor(out)]
    od = out.dtype
    if od in LOWP:  # at least the dtype's own rounding (one ulp-ish: we round once, as PyTorch 2.x)
        base = (4e-3, 4e-3) if od == torch.float16 else (1.6e-2, 1.6e-2)
        c["rtol"], c["atol"] = max(rtol, base[0]), max(atol, base[1])
    elif od == torch.float64:
        c["rtol"], c["atol"] = 1e-10, 1e-12
    elif od.is_floating_point:
        c["rtol"], c["atol"] = rtol, atol
    else:
        c["rtol"], c["atol"] = 0, 0
    FILES.setdefault(file, []).append(c)


# ---------------- matmul: every broadcasting form, dtypes, layouts ----------------
P = "products"
for dt in FLOATS + [torch.int32, torch.int64, torch.int8, torch.uint8, torch.int16]:
    tag = str(dt)[6:]
    lo, hi = (-1, 1) if dt.is_floating_point else ((0, 4) if dt == torch.uint8 else (-5, 5))
    r = lambda *s: rnd(s, dt, lo, hi)
    case(P, f"matmul/{tag}/dot", "matmul", [T(r(7)), T(r(7))])
    case(P, f"matmul/{tag}/vec_mat", "matmul", [T(r(5)), T(r(5, 3))])
    case(P, f"matmul/{tag}/mat_vec", "matmul", [T(r(4, 6)), T(r(6))])
    case(P, f"matmul/{tag}/mm", "matmul", [T(r(5, 7)), T(r(7, 6))])
    case(P, f"matmul/{tag}/batched_vec", "matmul", [T(r(2, 3, 4)), T(r(4))])
    case(P, f"matmul/{tag}/vec_batched", "matmul", [T(r(4)), T(r(2, 4, 3))])
    case(P, f"matmul/{tag}/batched_mat", "matmul", [T(r(2, 3, 5, 4)), T(r(4, 6))])
    case(P, f"matmul/{tag}/mat_batched", "matmul", [T(r(5, 4)), T(r(3, 4, 2))])
    case(P, f"matmul/{tag}/bcast", "matmul", [T(r(3, 1, 4, 5)), T(r(2, 5, 3))])
    case(P, f"matmul/{tag}/transposed", "matmul", [T(r(6, 5), [["transpose", 0, 1]]), T(r(4, 6), [["transpose", 0, 1]])])
for dt in [torch.float32, torch.float64]:
    tag = str(dt)[6:]
    r = lambda *s: rnd(s, dt)
    # layouts: transposed/sliced/expanded views, batch dims that do not collapse, folding (b shared)
    case(P, f"matmul/{tag}/batch_transposed", "matmul", [T(r(3, 6, 5), [["transpose", 1, 2]]), T(r(3, 4, 6), [["transpose", 1, 2]])])
    case(P, f"matmul/{tag}/sliced_rows", "matmul", [T(r(9, 6), [["slice", 0, 1, 9, 2]]), T(r(6, 10), [["slice", 1, 2, 9, 1]])])
    case(P, f"matmul/{tag}/strided_cols", "matmul", [T(r(4, 12), [["slice", 1, 0, 12, 2]]), T(r(6, 5))])
    case(P, f"matmul/{tag}/strided_both", "matmul", [T(r(8, 12), [["slice", 0, 0, 8, 2], ["slice", 1, 1, 12, 3]]), T(r(4, 9), [["slice", 1, 0, 9, 3]])])
    case(P, f"matmul/{tag}/expanded_batch", "matmul", [T(r(1, 4, 5), [["expand", [3, 4, 5]]]), T(r(3, 5, 2))])
    case(P, f"matmul/{tag}/expanded_inner", "matmul", [T(r(4, 1), [["expand", [4, 5]]]), T(r(5, 3))])
    case(P, f"matmul/{tag}/permuted_batch", "matmul", [T(r(4, 2, 3, 5), [["permute", [1, 0, 2, 3]]]), T(r(2, 1, 5, 6))])
    case(P, f"matmul/{tag}/fold_rows", "matmul", [T(r(2, 3, 4, 5)), T(r(1, 1, 5, 7))])
    case(P, f"matmul/{tag}/fold_noncontig", "matmul", [T(r(3, 4, 10), [["slice", 2, 0, 10, 2]]), T(r(5, 3))])
    case(P, f"matmul/{tag}/batch_nocollapse", "matmul", [T(r(2, 3, 4, 5), [["permute", [1, 0, 2, 3]]]), T(r(2, 3, 5, 4), [["permute", [1, 0, 2, 3]]])])
    case(P, f"matmul/{tag}/vec_strided", "matmul", [T(r(6, 7)), T(r(14), [["slice", 0, 0, 14, 2]])])
    case(P, f"matmul/{tag}/medium", "matmul", [T(r(33, 47)), T(r(47, 29))], rtol=1e-4, atol=1e-4)
    case(P, f"matmul/{tag}/medium_tt", "matmul", [T(r(47, 33), [["transpose", 0, 1]]), T(r(29, 47), [["transpose", 0, 1]])], rtol=1e-4, atol=1e-4)
    case(P, f"matmul/{tag}/gemv_like", "matmul", [T(r(70, 40)), T(r(40, 2))], rtol=1e-4, atol=1e-4)
    case(P, f"matmul/{tag}/row_times_mat", "matmul", [T(r(1, 40)), T(r(40, 70))], rtol=1e-4, atol=1e-4)
    case(P, f"matmul/{tag}/empty_k", "matmul", [T(r(3, 0)), T(r(0, 4))])
    case(P, f"matmul/{tag}/empty_m", "matmul", [T(r(0, 3)), T(r(3, 4))])
    case(P, f"matmul/{tag}/empty_batch", "matmul", [T(r(0, 2, 3)), T(r(3, 4))])
    case(P, f"matmul/{tag}/nan_inf", "matmul", [T(torch.tensor([[1.0, float("nan")], [2.0, 3.0]], dtype=dt)), T(torch.tensor([[float("inf"), 1.0], [0.0, 2.0]], dtype=dt))])
    case(P, f"mm/{tag}/tt", "mm", [T(r(4, 3), [["transpose", 0, 1]]), T(r(5, 4), [["transpose", 0, 1]])])
    case(P, f"bmm/{tag}/plain", "bmm", [T(r(3, 4, 5)), T(r(3, 5, 2))])
    case(P, f"bmm/{tag}/transposed", "bmm", [T(r(3, 5, 4), [["transpose", 1, 2]]), T(r(2, 5, 3), [["permute", [2, 1, 0]]])])
    case(P, f"bmm/{tag}/expanded", "bmm", [T(r(1, 4, 5), [["expand", [3, 4, 5]]]), T(r(3, 5, 2))])
    case(P, f"baddbmm/{tag}/kw", "baddbmm", [T(r(3, 4, 2)), T(r(3, 4, 5)), T(r(3, 5, 2))], {"beta": 0.5, "alpha": 2.0})
    case(P, f"baddbmm/{tag}/bcast_input", "baddbmm", [T(r(2)), T(r(3, 4, 5)), T(r(3, 5, 2))], {"alpha": -1.5})
    case(P, f"baddbmm/{tag}/beta0_nan", "baddbmm", [T(torch.full((3, 4, 2), float("nan"), dtype=dt)), T(r(3, 4, 5)), T(r(3, 5, 2))], {"beta": 0})
    case(P, f"addbmm/{tag}/kw", "addbmm", [T(r(4, 2)), T(r(3, 4, 5)), T(r(3, 5, 2))], {"beta": 0.5, "alpha": 2.0})
    case(P, f"addmm/{tag}/row_input", "addmm", [T(r(6)), T(r(4, 5)), T(r(5, 6))])
    case(P, f"addmm/{tag}/full_input_kw", "addmm", [T(r(4, 6)), T(r(5, 4), [["transpose", 0, 1]]), T(r(5, 6))], {"beta": -0.5, "alpha": 3.0})
    case(P, f"addmm/{tag}/scalar_input", "addmm", [T(r()), T(r(4, 5)), T(r(5, 6))], {"beta": 2.0})
    case(P, f"addmm/{tag}/col_input", "addmm", [T(r(4, 1)), T(r(4, 5)), T(r(5, 6))])
    case(P, f"addmm/{tag}/beta0_nan", "addmm", [T(torch.full((4, 6), float("nan"), dtype=dt)), T(r(4, 5)), T(r(5, 6))], {"beta": 0.0})
    case(P, f"addmm/{tag}/alpha0", "addmm", [T(r(4, 6)), T(r(4, 5)), T(r(5, 6))], {"alpha": 0})
    case(P, f"addmv/{tag}/kw", "addmv", [T(r(4)), T(r(4, 6)), T(r(6))], {"beta": 0.5, "alpha": 2})
    case(P, f"addmv/{tag}/scalar_input", "addmv", [T(r()), T(r(6, 4), [["transpose", 0, 1]]), T(r(6))])
    case(P, f"addmv/{tag}/beta0_nan", "addmv", [T(torch.full((4,), float("nan"), dtype=dt)), T(r(4, 6)), T(r(6))], {"beta": 0})
    case(P, f"dot/{tag}/strided", "dot", [T(r(10), [["slice", 0, 0, 10, 2]]), T(r(5))])
    case(P, f"vdot/{tag}/plain", "vdot", [T(r(6)), T(r(6))])
    case(P, f"mv/{tag}/transposed", "mv", [T(r(5, 4), [["transpose", 0, 1]]), T(r(5))])
    case(P, f"mv/{tag}/expanded_vec", "mv", [T(r(4, 5)), T(r(1), [["expand", [5]]])])
for dt in FLOATS:
    tag = str(dt)[6:]
    r = lambda *s: rnd(s, dt)
    case(P, f"bmm/{tag}/lowp", "bmm", [T(r(2, 3, 4)), T(r(2, 4, 5))])
    case(P, f"baddbmm/{tag}/lowp", "baddbmm", [T(r(2, 3, 5)), T(r(2, 3, 4)), T(r(2, 4, 5))], {"beta": 0.5, "alpha": 2.0})
    case(P, f"addmm/{tag}/lowp", "addmm", [T(r(5)), T(r(3, 4)), T(r(4, 5))], {"alpha": 0.5})
    case(P, f"addmv/{tag}/lowp", "addmv", [T(r(3)), T(r(3, 4)), T(r(4))], {"beta": 2.0})
    case(P, f"mv/{tag}/lowp", "mv", [T(r(3, 4)), T(r(4))])
    case(P, f"dot/{tag}/lowp", "dot", [T(r(9)), T(r(9))])
    case(P, f"nn.functional.linear/{tag}/bias", "nn.functional.linear", [T(r(2, 3, 4)), T(r(5, 4)), T(r(5))])
    case(P, f"nn.functional.linear/{tag}/nobias", "nn.functional.linear", [T(r(3, 4)), T(r(5, 4))])
for dt in [torch.int32, torch.int64]:
    tag = str(dt)[6:]
    r = lambda *s: rnd(s, dt, -9, 9)
    case(P, f"addmm/{tag}/int", "addmm", [T(r(3)), T(r(2, 4)), T(r(4, 3))], {"beta": 2, "alpha": 3})
    case(P, f"baddbmm/{tag}/int", "baddbmm", [T(r(2, 2, 3)), T(r(2, 2, 4)), T(r(2, 4, 3))], {"beta": -1})
    case(P, f"mv/{tag}/int", "mv", [T(r(3, 4)), T(r(4))])
    case(P, f"dot/{tag}/int", "dot", [T(r(5)), T(r(5))])
    case(P, f"bmm/{tag}/int", "bmm", [T(r(2, 3, 4)), T(r(2, 4, 2))])
# integer wrap-around: int32 products overflow and wrap; int64 sums beyond 2^53 are exact
case(P, "matmul/int32/wrap", "matmul", [T(rnd((3, 4), torch.int32, 2**20, 2**30)), T(rnd((4, 2), torch.int32, 2**20, 2**30))])
case(P, "matmul/int64/big", "matmul", [T(rnd((3, 4), torch.int64, 2**29, 2**31)), T(rnd((4, 2), torch.int64, 2**29, 2**31))])
case(P, "matmul/int64/wrap", "matmul", [T(torch.tensor([[2**62, 3], [-(2**62), 2**40]])), T(torch.tensor([[5, 1], [2**30, 7]]))])
case(P, "matmul/int16/wrap", "matmul", [T(rnd((2, 3), torch.int16, 100, 300)), T(rnd((3, 2), torch.int16, 100, 300))])

# ---------------- outer products, linear, trace, matrix_power ----------------
M = "misc"
for dt in FLOATS + [torch.int32, torch.int64, torch.bool]:
    tag = str(dt)[6:]
    lo, hi = (-1, 1) if dt.is_floating_point else ((0, 1) if dt == torch.bool else (-6, 6))
    r = lambda *s: rnd(s, dt, lo, hi)
    case(M, f"outer/{tag}", "outer", [T(r(4)), T(r(3))])
    case(M, f"ger/{tag}", "ger", [T(r(2)), T(r(5), [["slice", 0, 0, 5, 2]])])
    if dt == torch.bool:
        case(M, f"addr/{tag}", "addr", [T(r(4, 3)), T(r(4)), T(r(3))])
        case(M, f"addr/{tag}/beta_false", "addr", [T(r(4, 3)), T(r(4)), T(r(3))], {"beta": False})
    elif dt.is_floating_point:
        case(M, f"addr/{tag}", "addr", [T(r(4, 3)), T(r(4)), T(r(3))], {"beta": 0.5, "alpha": 2.0})
    else:
        case(M, f"addr/{tag}", "addr", [T(r(4, 3)), T(r(4)), T(r(3))], {"beta": 2, "alpha": -3})
    if dt != torch.bool:
        case(M, f"trace/{tag}/square", "trace", [T(r(5, 5))])
        case(M, f"trace/{tag}/wide_transposed", "trace", [T(r(5, 3), [["transpose", 0, 1]])])
case(M, "outer/promote_int_half", "outer", [T(rnd((3,), torch.int32, -4, 4)), T(rnd((2,), torch.float16))])
case(M, "outer/promote_f32_f64", "outer", [T(rnd((3,))), T(rnd((2,), torch.float64))])
case(M, "outer/promote_bool_int", "outer", [T(rnd((3,), torch.bool, 0, 1)), T(rnd((2,), torch.int64, -3, 3))])
case(M, "addr/promote", "addr", [T(rnd((3, 2))), T(rnd((3,), torch.float64)), T(rnd((2,)))])
case(M, "addr/bcast_input", "addr", [T(rnd((2,))), T(rnd((3,))), T(rnd((2,)))], {"alpha": 0.5})
case(M, "addr/beta0_nan", "addr", [T(torch.full((3, 2), float("nan"))), T(rnd((3,))), T(rnd((2,)))], {"beta": 0})
case(M, "addr/int_bool_alpha_beta", "addr", [T(rnd((2, 2), torch.bool, 0, 1)), T(rnd((2,), torch.bool, 0, 1)), T(rnd((2,), torch.bool, 0, 1))], {"beta": True, "alpha": False})
for dt in [torch.float32, torch.float64]:
    tag = str(dt)[6:]
    r = lambda *s: rnd(s, dt)
    case(M, f"nn.functional.linear/{tag}/vec_input", "nn.functional.linear", [T(r(4)), T(r(3, 4)), T(r(3))])
    case(M, f"nn.functional.linear/{tag}/vec_weight", "nn.functional.linear", [T(r(2, 4)), T(r(4))])
    case(M, f"nn.functional.linear/{tag}/4d", "nn.functional.linear", [T(r(2, 3, 2, 4)), T(r(5, 4)), T(r(5))])
    case(M, f"nn.functional.linear/{tag}/weight_view", "nn.functional.linear", [T(r(3, 4)), T(r(4, 5), [["transpose", 0, 1]]), T(r(5))])
    case(M, f"nn.functional.linear/{tag}/input_view", "nn.functional.linear", [T(r(4, 3, 6), [["permute", [1, 0, 2]]]), T(r(2, 6)), T(r(2))])
    case(M, f"nn.functional.linear/{tag}/scalar_bias", "nn.functional.linear", [T(r(3, 4)), T(r(5, 4)), T(r())])
    case(M, f"trace/{tag}/tall", "trace", [T(r(6, 2))])
    case(M, f"trace/{tag}/empty", "trace", [T(r(0, 3))])
for dt in [torch.float32, torch.float64, torch.int64, torch.int32]:
    tag = str(dt)[6:]
    r = lambda *s: rnd(s, dt, -1, 1) if dt.is_floating_point else rnd(s, dt, -3, 3)
    for n in [0, 1, 2, 3, 6]:
        case(M, f"matrix_power/{tag}/n{n}", "matrix_power", [T(r(3, 3)), n])
    case(M, f"matrix_power/{tag}/batched", "matrix_power", [T(r(2, 3, 3)), 5])
    case(M, f"linalg.matrix_power/{tag}/batched", "linalg.matrix_power", [T(r(2, 2, 2, 2)), 3])
case(M, "linalg.matmul/bcast", "linalg.matmul", [T(rnd((2, 3, 4))), T(rnd((4,)))])

# einsum: pairwise contractions, diagonals, sums, broadcasting, ellipses, implicit outputs
for dt in [torch.float32, torch.float64, torch.float16, torch.int64]:
    tag = str(dt)[6:]
    r = lambda *s: rnd(s, dt, -1, 1) if dt.is_floating_point else rnd(s, dt, -3, 3)
    for eq, shapes in [("ij,jk->ik", [(3, 4), (4, 5)]), ("ij,jk", [(3, 4), (4, 2)]), ("bhqd,bhkd->bhqk", [(2, 2, 3, 4), (2, 2, 5, 4)]),
                       ("i,j->ij", [(3,), (4,)]), ("i,i->", [(5,), (5,)]), ("ij,ij->ij", [(2, 3), (2, 3)]), ("ij,ij->i", [(2, 3), (2, 3)]),
                       ("ii->i", [(4, 4)]), ("iij->ji", [(3, 3, 2)]), ("ij->ji", [(2, 3)]), ("ba", [(2, 3)]), ("ijk,jl,lk->il", [(2, 3, 4), (3, 5), (5, 4)]),
                       ("...ij,...jk", [(5, 2, 3), (3, 4)]), ("bij,bjk->bik", [(1, 2, 3), (4, 3, 5)]), ("ij,jk", [(2, 1), (3, 4)]),
                       ("Ab,bC", [(2, 3), (3, 4)]), ("ab,cd->", [(2, 3), (4, 2)]), ("i j , j k -> k i", [(2, 3), (3, 4)])]:
        if dt == torch.int64 and len(shapes) == 1 and "->" in eq and eq.endswith("i"): pass
        case(M, f"einsum/{tag}/{eq.replace(' ', '')}", "einsum", [eq] + [T(r(*sh)) for sh in shapes], rtol=1e-4, atol=1e-5)
case(M, "einsum/float32/transposed_operands", "einsum", ["ij,jk->ik", T(rnd((4, 3)), [["transpose", 0, 1]]), T(rnd((5, 4)), [["transpose", 0, 1]])])
case(M, "einsum/int32/sum_promotes", "einsum", ["ij->i", T(rnd((2, 3), torch.int32, -3, 3))])

# tensordot, inner, linalg.multi_dot, linalg.vecdot
for dt in [torch.float32, torch.float64, torch.float16, torch.int64]:
    tag = str(dt)[6:]
    r = lambda *s: rnd(s, dt, -1, 1) if dt.is_floating_point else rnd(s, dt, -3, 3)
    case(M, f"tensordot/{tag}/int_dims", "tensordot", [T(r(2, 3, 4)), T(r(3, 4, 5))], {"dims": 2})
    case(M, f"tensordot/{tag}/list_dims", "tensordot", [T(r(2, 3, 4)), T(r(4, 5, 2))], {"dims": [[0, 2], [2, 0]]})
    case(M, f"tensordot/{tag}/outer", "tensordot", [T(r(2, 3)), T(r(4,))], {"dims": 0})
    case(M, f"inner/{tag}/nd", "inner", [T(r(2, 3)), T(r(4, 5, 3))])
    case(M, f"inner/{tag}/scalar", "inner", [T(r(2, 3)), T(r())])
    case(M, f"linalg.multi_dot/{tag}/vec_ends", "linalg.multi_dot", [[T(r(3)), T(r(3, 4)), T(r(4, 2)), T(r(2))]])
    case(M, f"linalg.multi_dot/{tag}/mats", "linalg.multi_dot", [[T(r(2, 3)), T(r(3, 4)), T(r(4, 5))]])
    if dt.is_floating_point:
        case(M, f"linalg.vecdot/{tag}/bcast", "linalg.vecdot", [T(r(2, 3)), T(r(3))])
        case(M, f"linalg.vecdot/{tag}/dim0", "linalg.vecdot", [T(r(4, 3)), T(r(4, 3))], {"dim": 0})

# ---------------- errors ----------------
E = "errors"
f32 = lambda *s: rnd(s)
f64 = lambda *s: rnd(s, torch.float64)
b = lambda *s: rnd(s, torch.bool, 0, 1)
errs = [
    ("matmul/0d", "matmul", [T(torch.tensor(1.0)), T(f32(3))], "ShapeError"),
    ("matmul/0d_b", "matmul", [T(f32(3)), T(torch.tensor(1.0))], "ShapeError"),
    ("matmul/dot_size", "matmul", [T(f32(3)), T(f32(4))], "ShapeError"),
    ("matmul/vec_mat", "matmul", [T(f32(3)), T(f32(4, 5))], "ShapeError"),
    ("matmul/mat_vec", "matmul", [T(f32(3, 4)), T(f32(5))], "ShapeError"),
    ("matmul/mm", "matmul", [T(f32(3, 4)), T(f32(5, 2))], "ShapeError"),
    ("matmul/batch", "matmul", [T(f32(2, 3, 4)), T(f32(3, 4, 6))], "ShapeError"),
    ("matmul/dtype", "matmul", [T(f32(3, 4)), T(f64(4, 5))], "DTypeError"),
    ("matmul/dtype_dot", "matmul", [T(f32(4)), T(f64(4))], "DTypeError"),
    ("matmul/dtype_half", "matmul", [T(f32(3, 4)), T(rnd((4, 5), torch.float16))], "DTypeError"),
    ("matmul/bool", "matmul", [T(b(3, 4)), T(b(4, 5))], "DTypeError"),
    ("matmul/bool_dot", "matmul", [T(b(4)), T(b(4))], "DTypeError"),
    ("mm/1d", "mm", [T(f32(3)), T(f32(3, 4))], "ShapeError"),
    ("mm/1d_b", "mm", [T(f32(2, 3)), T(f32(3))], "ShapeError"),
    ("mm/shape", "mm", [T(f32(2, 3)), T(f32(4, 5))], "ShapeError"),
    ("mm/dtype", "mm", [T(f32(2, 3)), T(f64(3, 4))], "DTypeError"),
    ("mm/bool", "mm", [T(b(2, 3)), T(b(3, 4))], "DTypeError"),
    ("bmm/2d", "bmm", [T(f32(3, 4)), T(f32(2, 4, 5))], "ShapeError"),
    ("bmm/2d_b", "bmm", [T(f32(2, 3, 4)), T(f32(4, 5))], "ShapeError"),
    ("bmm/batch", "bmm", [T(f32(2, 3, 4)), T(f32(3, 4, 5))], "ShapeError"),
    ("bmm/inner", "bmm", [T(f32(2, 3, 4)), T(f32(2, 5, 5))], "ShapeError"),
    ("bmm/dtype", "bmm", [T(f32(2, 3, 4)), T(f64(2, 4, 5))], "DTypeError"),
    ("baddbmm/input_shape", "baddbmm", [T(f32(3, 3)), T(f32(2, 3, 4)), T(f32(2, 4, 5))], "ShapeError"),
    ("addmm/input_shape", "addmm", [T(f32(4)), T(f32(2, 3)), T(f32(3, 5))], "ShapeError"),
    ("addmm/input_dtype", "addmm", [T(f64(5)), T(f32(2, 3)), T(f32(3, 5))], "DTypeError"),
    ("addmm/shape", "addmm", [T(f32(5)), T(f32(2, 3)), T(f32(4, 5))], "ShapeError"),
    ("addmm/1d", "addmm", [T(f32(5)), T(f32(3)), T(f32(3, 5))], "ShapeError"),
    ("addmv/shape", "addmv", [T(f32(2)), T(f32(2, 3)), T(f32(4))], "ShapeError"),
    ("addmv/input", "addmv", [T(f32(3)), T(f32(2, 3)), T(f32(3))], "ShapeError"),
    ("addmv/1d_mat", "addmv", [T(f32(3)), T(f32(3)), T(f32(3))], "ShapeError"),
    ("addmv/dtype", "addmv", [T(f32(2)), T(f32(2, 3)), T(f64(3))], "DTypeError"),
    ("addr/shape", "addr", [T(f32(2, 3)), T(f32(2)), T(f32(4))], "ShapeError"),
    ("addr/2d", "addr", [T(f32(2, 3)), T(f32(2, 1)), T(f32(3))], "ShapeError"),
    ("dot/2d", "dot", [T(f32(2, 3)), T(f32(3))], "ShapeError"),
    ("dot/size", "dot", [T(f32(3)), T(f32(4))], "ShapeError"),
    ("dot/dtype", "dot", [T(f32(3)), T(f64(3))], "DTypeError"),
    ("dot/bool", "dot", [T(b(3)), T(b(3))], "DTypeError"),
    ("vdot/size", "vdot", [T(f32(3)), T(f32(4))], "ShapeError"),
    ("vdot/dtype", "vdot", [T(f32(3)), T(f64(3))], "DTypeError"),
    ("mv/shape", "mv", [T(f32(2, 3)), T(f32(4))], "ShapeError"),
    ("mv/1d", "mv", [T(f32(3)), T(f32(3))], "ShapeError"),
    ("mv/2d_vec", "mv", [T(f32(2, 3)), T(f32(3, 1))], "ShapeError"),
    ("mv/dtype", "mv", [T(f32(2, 3)), T(f64(3))], "DTypeError"),
    ("outer/2d", "outer", [T(f32(2, 3)), T(f32(3))], "ShapeError"),
    ("outer/2d_b", "outer", [T(f32(2)), T(f32(3, 1))], "ShapeError"),
    ("linear/shape", "nn.functional.linear", [T(f32(2, 3)), T(f32(4, 5))], "ShapeError"),
    ("linear/dtype", "nn.functional.linear", [T(f32(2, 3)), T(f64(4, 3))], "DTypeError"),
    ("linear/bias_dtype", "nn.functional.linear", [T(f32(2, 3)), T(f32(4, 3)), T(f64(4))], "DTypeError"),
    ("linear/bias_shape", "nn.functional.linear", [T(f32(2, 3)), T(f32(4, 3)), T(f32(3))], "ShapeError"),
    ("linear/0d_input", "nn.functional.linear", [T(torch.tensor(1.0)), T(f32(4, 3))], "ShapeError"),
    ("linear/3d_weight", "nn.functional.linear", [T(f32(2, 3)), T(f32(2, 4, 3))], "ShapeError"),
    ("trace/3d", "trace", [T(f32(2, 2, 2))], "ShapeError"),
    ("trace/1d", "trace", [T(f32(3))], "ShapeError"),
    ("trace/bool", "trace", [T(b(2, 3))], "DTypeError"),
    ("matrix_power/nonsquare", "matrix_power", [T(f32(2, 3)), 2], "ShapeError"),
    ("matrix_power/1d", "matrix_power", [T(f32(3)), 2], "ShapeError"),
    ("einsum/unknown_output", "einsum", ["ij->k", T(f32(2, 3))], "ValueError"),
    ("einsum/size", "einsum", ["ij,jk->ik", T(f32(2, 3)), T(f32(4, 4))], "ShapeError"),
    ("einsum/ndim", "einsum", ["ijk->ij", T(f32(2, 3))], "ShapeError"),
    ("einsum/repeated_output", "einsum", ["ij->ii", T(f32(2, 3))], "ValueError"),
    ("einsum/operand_count", "einsum", ["ij,jk->ik", T(f32(2, 3))], "ValueError"),
    ("einsum/dtype", "einsum", ["ij,jk->ik", T(f32(2, 3)), T(f64(3, 4))], "DTypeError"),
    ("einsum/diag_size", "einsum", ["ii->i", T(f32(2, 3))], "ShapeError"),
    ("tensordot/size", "tensordot", [T(f32(2, 3)), T(f32(4, 5))], "ShapeError"),
    ("tensordot/dtype", "tensordot", [T(f32(2, 3)), T(f64(3, 4)), 1], "DTypeError"),
    ("inner/size", "inner", [T(f32(2, 3)), T(f32(4))], "ShapeError"),
    ("linalg.multi_dot/one", "linalg.multi_dot", [[T(f32(3, 4))]], "ValueError"),
    ("linalg.multi_dot/shape", "linalg.multi_dot", [[T(f32(2, 3)), T(f32(4, 4))]], "ShapeError"),
    ("linalg.multi_dot/dtype", "linalg.multi_dot", [[T(f32(2, 3)), T(f64(3, 4))]], "DTypeError"),
    ("linalg.multi_dot/3d", "linalg.multi_dot", [[T(f32(2, 3, 1)), T(f32(1, 4))]], "ShapeError"),
    ("linalg.vecdot/dtype", "linalg.vecdot", [T(f32(2, 3)), T(f64(3))], "DTypeError"),
    ("linalg.vecdot/int", "linalg.vecdot", [T(rnd((2, 3), torch.int32, -3, 3)), T(rnd((3,), torch.int32, -3, 3))], "DTypeError"),
    ("linalg.vecdot/size", "linalg.vecdot", [T(f32(2, 3)), T(f32(4))], "ShapeError"),
]
for name, op, args, cls in errs:
    case(E, name, op, args, error=cls)
# errors PyTorch 2.x raises where 1.13 did not (recorded by hand)
FILES[E].append({"name": "addr/int_float_alpha", "op": "addr", "args": [enc(T(rnd((2, 3), torch.int32, -3, 3)), E), enc(T(rnd((2,), torch.int32, -3, 3)), E), enc(T(rnd((3,), torch.int32, -3, 3)), E)],
                 "kwargs": {"alpha": {"float": 0.5}}, "error": "DTypeError", "torch_message": "For integral input tensors, argument alpha must not be a floating point number."})
FILES[E].append({"name": "addr/bool_beta_float_result", "op": "addr", "args": [enc(T(f32(2, 3)), E), enc(T(f32(2)), E), enc(T(f32(3)), E)],
                 "kwargs": {"beta": {"bool": True}}, "error": "DTypeError", "torch_message": "Boolean beta only supported for Boolean results."})
FILES[E].append({"name": "baddbmm/input_dtype", "op": "baddbmm", "args": [enc(T(f64(2, 3, 5)), E), enc(T(f32(2, 3, 4)), E), enc(T(f32(2, 4, 5)), E)],
                 "kwargs": {}, "error": "DTypeError", "torch_message": "(PyTorch 2.x) Input dtypes must be the same, got: input double, batch1: float, batch2: float"})

outdir = sys.argv[1] if len(sys.argv) > 1 else "test/fixtures"
os.makedirs(outdir, exist_ok=True)
for file, cases in FILES.items():
    tensors = {k: e for k, (_, e) in TENSORS.get(file, {}).items()}
    with open(os.path.join(outdir, f"linalg_{file}.json"), "w") as f:
        json.dump({"generator": "test/gen/linalg.py", "torch": torch.__version__, "tensors": tensors, "cases": cases}, f, separators=(",", ":"))
    print(f"linalg_{file}.json: {len(cases)} cases")
