#!/usr/bin/env python3
"""Goldens for test/nn.test.ts (softmax family, normalization, losses, attention), from PyTorch
(/usr/bin/python3, torch 1.13). Ops 1.13 lacks (rms_norm, scaled_dot_product_attention) get float64
references written here after PyTorch 2.x's definitions; half-precision cases 1.13 cannot run on CPU are
computed in float32 and rounded once, as PyTorch 2.x's CPU kernels do.

Run: /usr/bin/python3 test/gen/nn.py test/fixtures
Writes nn_softmax.json, nn_norm.json, nn_loss.json, nn_attention.json.
"""
import json, math, os, sys
import numpy as np
import torch
import torch.nn.functional as F
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from golden_common import T, enc_tensor, num, val  # noqa: E402

G = torch.Generator().manual_seed(1234)
LOWP = (torch.float16, torch.bfloat16)


def rnd(shape, dtype=torch.float32, lo=-3.0, hi=3.0):
    return (torch.rand(shape, generator=G, dtype=torch.float64) * (hi - lo) + lo).to(dtype)








TENSORS = {}  # file -> {name: tensor}; inputs shared by several cases are stored once


def enc(v, file=None):
    if isinstance(v, T):
        table = TENSORS.setdefault(file, {})
        key = next((k for k, t in table.items() if t[0] is v.base), None)
        if key is None:
            key = f"t{len(table)}"
            table[key] = (v.base, enc_tensor(v.base))
        return {"tensor": key, "view": v.view}
    if isinstance(v, torch.dtype): return {"dtype": str(v)[6:]}
    if isinstance(v, float): return {"float": num(v)}
    if isinstance(v, (list, tuple)): return [enc(x, file) for x in v]
    return v




def lowp(fn):
    """Runs fn; float16/bfloat16 inputs PyTorch 1.13 cannot handle on CPU run in float32, rounded once."""
    def run(*args, **kw):
        lp = [a.dtype for a in args if isinstance(a, torch.Tensor) and a.dtype in LOWP]
        try:
            return fn(*args, **kw)
        except RuntimeError:
            if not lp: raise
            up = [a.float() if isinstance(a, torch.Tensor) and a.dtype in LOWP else a for a in args]
            kw2 = {k: (x.float() if isinstance(x, torch.Tensor) and x.dtype in LOWP else x) for k, x in kw.items()}
            return fn(*up, **kw2).to(lp[0])
    return run


FILES = {}


def fail(msg):
    def f(*a, **k):
        raise RuntimeError(msg)
    return f


def case(file, name, op, args, kwargs=None, ref=None, rtol=1e-5, atol=1e-6, error=None, message=None, mutated=()):
    kwargs = kwargs or {}
    c = {"name": name, "op": op, "args": [enc(a, file) for a in args], "kwargs": {k: enc(v, file) for k, v in kwargs.items()}}
    fn = ref
    if fn is None:
        obj = torch
        for p in op.split("."): obj = getattr(obj, p)
        fn = obj
    if error:
        try:
            fn(*[val(a) for a in args], **{k: val(v) for k, v in kwargs.items()})
        except Exception as e:  # record PyTorch's message next to the error class we raise
            c["error"], c["torch_message"] = error, str(e).splitlines()[0]
            if message: c["message"] = message
            FILES.setdefault(file, []).append(c)
            return
        raise AssertionError(f"{name}: expected an error")
    # in-place updates (running statistics) are checked after the call; run torch on clones
    vals = [val(a) for a in args]
    vals = [v.clone() if isinstance(v, torch.Tensor) else v for v in vals]
    out = fn(*vals, **{k: val(v) for k, v in kwargs.items()})
    outs = list(out) if isinstance(out, (tuple, list)) else [out]
    od = outs[0].dtype
    c["out"] = [enc_tensor(o) for o in outs]
    if od in LOWP:  # never tighter than the dtype's own rounding
        base = (2e-3, 2e-3) if od == torch.float16 else (1.6e-2, 1.6e-2)
        c["rtol"], c["atol"] = max(rtol, base[0]), max(atol, base[1])
    elif od == torch.float64:
        c["rtol"], c["atol"] = 1e-9, 1e-11
    else:
        c["rtol"], c["atol"] = rtol, atol
    if mutated:
        c["mutated"] = [{"arg": i, "want": enc_tensor(vals[i])} for i in mutated]
    FILES.setdefault(file, []).append(c)


# ---------------- softmax family ----------------
for dt in [torch.float32, torch.float64, torch.bfloat16]:
    tag = str(dt)[6:]
    x = rnd((2, 3, 4, 5), dt, -8, 8)
    for op in ["softmax", "log_softmax", "softmin"]:
        for d in [0, 1, 2, -1]:
            case("softmax", f"{op}/{tag}/dim{d}", f"nn.functional.{op}", [T(x)], {"dim": d}, ref=lowp(getattr(F, op)))
    case("softmax", f"softmax/{tag}/transposed", "nn.functional.softmax", [T(rnd((4, 6), dt), [["transpose", 0, 1]])], {"dim": 1}, ref=lowp(F.softmax))
    case("softmax", f"log_softmax/{tag}/sliced", "nn.functional.log_softmax", [T(rnd((5, 8), dt), [["slice", 1, 1, 8, 2]])], {"dim": 0}, ref=lowp(F.log_softmax))
    case("softmax", f"glu/{tag}/dim0", "nn.functional.glu", [T(rnd((4, 3), dt))], {"dim": 0}, ref=lowp(F.glu))
x = rnd((3, 4, 5))
case("softmax", "softmax/implicit3d", "nn.functional.softmax", [T(x)], ref=lambda t: F.softmax(t, dim=0))
case("softmax", "log_softmax/implicit2d", "nn.functional.log_softmax", [T(x[0])], ref=lambda t: F.log_softmax(t, dim=1))
case("softmax", "softmax/dtype64", "nn.functional.softmax", [T(x)], {"dim": 1, "dtype": torch.float64})
case("softmax", "log_softmax/f64_to_f32", "nn.functional.log_softmax", [T(x.double())], {"dim": -1, "dtype": torch.float32})
case("softmax", "softmax/int_dtype", "softmax", [T(torch.tensor([[1, 2, 3], [4, 5, 9]]))], {"dim": 1, "dtype": torch.float32})
case("softmax", "softmax/scalar", "softmax", [T(torch.tensor(2.5))], {"dim": 0})
case("softmax", "log_softmax/scalar", "log_softmax", [T(torch.tensor(2.5))], {"dim": -1})
case("softmax", "softmax/infs", "softmax", [T(torch.tensor([[float("-inf"), 0.0, float("-inf")], [float("inf"), 1.0, 2.0], [float("nan"), 1.0, 2.0], [float("-inf")] * 3]))], {"dim": 1})
case("softmax", "log_softmax/infs", "log_softmax", [T(torch.tensor([[float("-inf"), 0.0, float("-inf")], [float("-inf")] * 3]))], {"dim": 1})
case("softmax", "softmax/large", "softmax", [T(rnd((3, 700), torch.float32, -80, 80))], {"dim": 1})
case("softmax", "softmin/dtype", "nn.functional.softmin", [T(rnd((3, 4), torch.float16))], {"dim": 0, "dtype": torch.float32}, ref=lambda t, dim, dtype: F.softmin(t.float(), dim=dim))
case("softmax", "softmax/empty", "softmax", [T(torch.zeros(0, 4))], {"dim": 1})
case("softmax", "err/softmax_int", "softmax", [T(torch.tensor([1, 2, 3]))], {"dim": 0}, error="DTypeError")
case("softmax", "err/softmax_dim", "softmax", [T(torch.zeros(2, 3))], {"dim": 2}, error="IndexError")
case("softmax", "err/glu_odd", "nn.functional.glu", [T(torch.zeros(3, 5))], {"dim": 1}, error="ShapeError")
case("softmax", "err/glu_scalar", "nn.functional.glu", [T(torch.tensor(1.0))], {"dim": 0}, error="ShapeError")

# ---------------- normalization ----------------
for dt in [torch.float32, torch.float64, torch.bfloat16, torch.float16]:
    tag = str(dt)[6:]
    x = rnd((2, 3, 4, 5), dt)
    w, b = rnd((4, 5), dt), rnd((4, 5), dt)
    case("norm", f"layer_norm/{tag}/2d", "nn.functional.layer_norm", [T(x), [4, 5], T(w), T(b)], ref=lowp(F.layer_norm))
    case("norm", f"layer_norm/{tag}/weight_only", "nn.functional.layer_norm", [T(x), [5], T(w[0])], {"eps": 1e-3}, ref=lowp(F.layer_norm))
    case("norm", f"layer_norm/{tag}/bias_only", "nn.functional.layer_norm", [T(x), [5]], {"bias": T(b[1])}, ref=lowp(F.layer_norm))
    case("norm", f"group_norm/{tag}/4d", "nn.functional.group_norm", [T(x), 3, T(rnd((3,), dt)), T(rnd((3,), dt))], ref=lowp(F.group_norm), rtol=1e-4, atol=1e-5)
    case("norm", f"group_norm/{tag}/plain", "nn.functional.group_norm", [T(rnd((3, 6, 7), dt)), 2], {"eps": 0.01}, ref=lowp(F.group_norm), rtol=1e-4, atol=1e-5)
    case("norm", f"normalize/{tag}/p1_dim0", "nn.functional.normalize", [T(x)], {"p": 1.0, "dim": 0}, ref=lowp(F.normalize))
    case("norm", f"instance_norm/{tag}/affine", "nn.functional.instance_norm", [T(x)], {"weight": T(rnd((3,), dt)), "bias": T(rnd((3,), dt))}, ref=lowp(F.instance_norm), rtol=1e-4, atol=1e-5)
x = rnd((3, 8), torch.float32)
case("norm", "layer_norm/transposed", "nn.functional.layer_norm", [T(rnd((6, 4)), [["transpose", 0, 1]]), [6]])
# |mean| >> std: float32 accumulation (torch 1.13) loses the variance; the reference is the float64 result
case("norm", "layer_norm/offset_mean", "nn.functional.layer_norm", [T(rnd((4, 64), torch.float32, 1e4, 1e4 + 1e-2)), [64]],
     ref=lambda x, s: F.layer_norm(x.double(), s).float(), rtol=1e-4, atol=1e-4)
case("norm", "err/layer_norm_int_shape", "nn.functional.layer_norm", [T(x), 8], error="ValueError")
case("norm", "group_norm/2d_input", "nn.functional.group_norm", [T(rnd((4, 6))), 3], rtol=1e-4, atol=1e-5)
case("norm", "group_norm/groups_eq_channels", "nn.functional.group_norm", [T(rnd((2, 4, 3, 3))), 4, T(rnd((4,))), T(rnd((4,)))], rtol=1e-4, atol=1e-5)


def rms_ref(t, shape, weight=None, eps=None):
    dims = tuple(range(-len(shape), 0))
    tf = t.double()
    e = torch.finfo(t.float().dtype if t.dtype in LOWP else t.dtype).eps if eps is None else eps
    r = tf * torch.rsqrt(tf.pow(2).mean(dims, keepdim=True) + e)
    if weight is not None: r = r * weight.double()
    return r.to(t.dtype)


for dt in [torch.float32, torch.float64, torch.bfloat16]:
    tag = str(dt)[6:]
    x = rnd((3, 4, 6), dt)
    case("norm", f"rms_norm/{tag}/weight", "nn.functional.rms_norm", [T(x), [6], T(rnd((6,), dt))], ref=rms_ref)
    case("norm", f"rms_norm/{tag}/2d_default_eps", "nn.functional.rms_norm", [T(x), [4, 6]], ref=rms_ref)
case("norm", "rms_norm/tiny_default_eps", "nn.functional.rms_norm", [T(rnd((2, 5), torch.float32, -1e-4, 1e-4)), [5]], ref=rms_ref)

xb = rnd((4, 3, 5))
rm, rv = rnd((3,)), rnd((3,), torch.float32, 0.5, 2.0)
case("norm", "batch_norm/train_update", "nn.functional.batch_norm", [T(xb), T(rm), T(rv), T(rnd((3,))), T(rnd((3,)))], {"training": True, "momentum": 0.3},
     rtol=1e-4, atol=1e-5, mutated=(1, 2))
case("norm", "batch_norm/train_nostats", "nn.functional.batch_norm", [T(rnd((5, 3))), None, None], {"training": True}, rtol=1e-4, atol=1e-5)
case("norm", "batch_norm/eval_2d", "nn.functional.batch_norm", [T(rnd((5, 3), torch.float64)), T(rm.double()), T(rv.double())], {"eps": 0.1})
case("norm", "batch_norm/eval_bf16_f32_stats", "nn.functional.batch_norm", [T(rnd((2, 3, 4), torch.bfloat16)), T(rm), T(rv), T(rnd((3,))), None],
     ref=lambda x, m, v, w, b: F.batch_norm(x.float(), m, v, w, b).bfloat16())
case("norm", "instance_norm/running", "nn.functional.instance_norm", [T(rnd((2, 3, 6))), T(rm), T(rv)], {"momentum": 0.5}, rtol=1e-4, atol=1e-5, mutated=(1, 2))
case("norm", "instance_norm/eval_stats", "nn.functional.instance_norm", [T(rnd((2, 3, 6))), T(rm), T(rv)], {"use_input_stats": False})
case("norm", "normalize/pinf", "nn.functional.normalize", [T(rnd((3, 4)))], {"p": float("inf"), "dim": -1})
case("norm", "normalize/eps", "nn.functional.normalize", [T(torch.tensor([[0.0, 0.0], [1e-3, 0.0]]))], {"eps": 0.1})
v = rnd((4, 3, 2))
case("norm", "_weight_norm/dim0", "_weight_norm", [T(v), T(rnd((4, 1, 1), torch.float32, 0.5, 2)), 0])
case("norm", "_weight_norm/dim_last", "_weight_norm", [T(v), T(rnd((1, 1, 2), torch.float32, 0.5, 2)), 2])
case("norm", "_weight_norm/dim_middle", "_weight_norm", [T(v), T(rnd((1, 3, 1), torch.float32, 0.5, 2)), 1])
case("norm", "_weight_norm/whole", "_weight_norm", [T(v), T(rnd((), torch.float32, 0.5, 2)), -1])
case("norm", "_weight_norm/f64", "_weight_norm", [T(v.double()), T(rnd((4, 1, 1), torch.float64, 0.5, 2))])
for size in [2, 3, 5]:
    case("norm", f"local_response_norm/3d/{size}", "nn.functional.local_response_norm", [T(rnd((2, 6, 4))), size], {"alpha": 0.01, "beta": 0.6, "k": 2.0}, rtol=1e-5, atol=1e-6)
case("norm", "local_response_norm/4d", "nn.functional.local_response_norm", [T(rnd((2, 5, 3, 3))), 3], rtol=1e-5, atol=1e-6)
case("norm", "err/layer_norm_shape", "nn.functional.layer_norm", [T(torch.zeros(4, 5)), [4]], error="ShapeError")
case("norm", "err/layer_norm_weight", "nn.functional.layer_norm", [T(torch.zeros(4, 5)), [5], T(torch.ones(4))], error="ShapeError")
case("norm", "err/layer_norm_weight_dtype", "nn.functional.layer_norm", [T(torch.zeros(4, 5)), [5], T(torch.ones(5).double())], error="DTypeError")
case("norm", "err/layer_norm_int", "nn.functional.layer_norm", [T(torch.zeros(4, 5, dtype=torch.long)), [5]], error="DTypeError")
case("norm", "err/group_norm_groups", "nn.functional.group_norm", [T(torch.zeros(2, 6, 3)), 4], error="ShapeError")
case("norm", "err/group_norm_weight", "nn.functional.group_norm", [T(torch.zeros(2, 6, 3)), 3, T(torch.ones(5))], error="ShapeError")
case("norm", "err/batch_norm_stats", "nn.functional.batch_norm", [T(torch.zeros(2, 6, 3)), T(torch.zeros(5)), T(torch.ones(5))], error="ShapeError")
case("norm", "err/batch_norm_one_value", "nn.functional.batch_norm", [T(torch.zeros(1, 6)), None, None], {"training": True}, error="ValueError")
case("norm", "err/batch_norm_eval_nostats", "nn.functional.batch_norm", [T(torch.zeros(2, 6)), None, None], error="ValueError")
case("norm", "err/normalize_int", "nn.functional.normalize", [T(torch.tensor([1, 2, 3]))], {"dim": 0}, error="DTypeError")
case("norm", "err/lrn_2d", "nn.functional.local_response_norm", [T(torch.zeros(2, 6)), 2], error="ValueError")

# ---------------- losses ----------------
for dt in [torch.float32, torch.float64, torch.bfloat16]:
    tag = str(dt)[6:]
    tol = dict(rtol=1e-4, atol=1e-5) if dt == torch.float32 else {}
    x = rnd((3, 4, 2, 2), dt)
    tg = torch.randint(0, 4, (3, 2, 2), generator=G); tg[0, 0, 1] = -100; tg[2, 1, 0] = -100
    w = rnd((4,), dt, 0.2, 2.0)
    for red in ["mean", "sum", "none"]:
        case("loss", f"cross_entropy/{tag}/spatial_w_{red}", "nn.functional.cross_entropy", [T(x), T(tg), T(w)], {"reduction": red}, ref=lowp(F.cross_entropy), **tol)
        case("loss", f"cross_entropy/{tag}/smooth_w_{red}", "nn.functional.cross_entropy", [T(x), T(tg)], {"weight": T(w), "reduction": red, "label_smoothing": 0.2}, ref=lowp(F.cross_entropy), **tol)
        case("loss", f"cross_entropy/{tag}/smooth_{red}", "nn.functional.cross_entropy", [T(x), T(tg)], {"reduction": red, "label_smoothing": 0.15}, ref=lowp(F.cross_entropy), **tol)
        p = torch.softmax(rnd((3, 4, 2, 2), torch.float64), 1).to(dt)
        case("loss", f"cross_entropy/{tag}/prob_{red}", "nn.functional.cross_entropy", [T(x), T(p)], {"reduction": red, "label_smoothing": 0.1}, ref=lowp(F.cross_entropy), **tol)
        case("loss", f"cross_entropy/{tag}/prob_w_{red}", "nn.functional.cross_entropy", [T(x), T(p), T(w)], {"reduction": red}, ref=lowp(F.cross_entropy), **tol)
        case("loss", f"nll_loss/{tag}/spatial_{red}", "nn.functional.nll_loss", [T(x), T(tg.clamp(min=0))], {"weight": T(w), "reduction": red, "ignore_index": 2}, ref=lowp(F.nll_loss), **tol)
x = rnd((5,))
case("loss", "cross_entropy/unbatched", "nn.functional.cross_entropy", [T(x), T(torch.tensor(3))], rtol=1e-5)
case("loss", "cross_entropy/unbatched_smooth_none", "nn.functional.cross_entropy", [T(x), T(torch.tensor(1))], {"reduction": "none", "label_smoothing": 0.3}, rtol=1e-5)
case("loss", "cross_entropy/unbatched_prob", "nn.functional.cross_entropy", [T(x), T(torch.softmax(rnd((5,)), 0))], rtol=1e-5)
case("loss", "cross_entropy/3d", "nn.functional.cross_entropy", [T(rnd((2, 3, 4))), T(torch.randint(0, 3, (2, 4), generator=G))], rtol=1e-5)
case("loss", "cross_entropy/all_ignored", "nn.functional.cross_entropy", [T(rnd((2, 3))), T(torch.tensor([-100, -100]))])
case("loss", "cross_entropy/ignore_pos", "nn.functional.cross_entropy", [T(rnd((4, 3))), T(torch.tensor([0, 2, 1, 2]))], {"ignore_index": 2, "label_smoothing": 0.05})
case("loss", "cross_entropy/legacy_flags", "nn.functional.cross_entropy", [T(rnd((4, 3))), T(torch.tensor([0, 2, 1, 2]))], {"size_average": False})
case("loss", "nll_loss/uint8_target", "nn.functional.nll_loss", [T(rnd((4, 3))), T(torch.tensor([0, 2, 1, 2], dtype=torch.uint8))])
case("loss", "nll_loss/reduce_false", "nn.functional.nll_loss", [T(rnd((4, 3))), T(torch.tensor([0, 2, 1, 2]))], {"reduce": False})
case("loss", "nll_loss/empty_mean", "nn.functional.nll_loss", [T(torch.zeros(0, 3)), T(torch.zeros(0, dtype=torch.long))])
a_, b_ = rnd((3, 4)), rnd((3, 4))
for red in ["mean", "sum", "none"]:
    case("loss", f"mse_loss/{red}", "nn.functional.mse_loss", [T(a_), T(b_)], {"reduction": red})
    case("loss", f"l1_loss/{red}", "nn.functional.l1_loss", [T(a_), T(b_)], {"reduction": red})
    case("loss", f"smooth_l1_loss/{red}", "nn.functional.smooth_l1_loss", [T(a_), T(b_)], {"reduction": red, "beta": 0.5})
    case("loss", f"huber_loss/{red}", "nn.functional.huber_loss", [T(a_), T(b_)], {"reduction": red, "delta": 1.5})
    pr, tb = torch.sigmoid(a_), torch.rand(3, 4, generator=G)
    case("loss", f"binary_cross_entropy/{red}", "nn.functional.binary_cross_entropy", [T(pr), T(tb)], {"weight": T(rnd((4,), torch.float32, 0, 2)), "reduction": red})
    case("loss", f"bce_with_logits/{red}", "nn.functional.binary_cross_entropy_with_logits", [T(a_), T(tb)], {"pos_weight": T(rnd((4,), torch.float32, 0.5, 3)), "reduction": red})
    case("loss", f"kl_div/{red}", "nn.functional.kl_div", [T(F.log_softmax(a_, 1)), T(F.softmax(b_, 1))], {"reduction": red})
# elementwise weights (PyTorch 2.6+; torch 1.13 lacks them): references written after 2.x's Python code
def weighted(kind):
    def f(x, y, reduction="mean", weight=None, delta=1.0):
        l = (x - y) ** 2 if kind == "mse" else (x - y).abs() if kind == "l1" else F.huber_loss(x, y, reduction="none", delta=delta)
        l = l * weight
        return l if reduction == "none" else l.sum() if reduction == "sum" else (l.mean() if kind == "huber" else l.sum() / weight.sum())
    return f
ww = rnd((3, 4), torch.float32, 0.1, 2.0)
for red in ["mean", "sum", "none"]:
    case("loss", f"mse_loss/weight_{red}", "nn.functional.mse_loss", [T(a_), T(b_)], {"reduction": red, "weight": T(ww)}, ref=weighted("mse"))
    case("loss", f"l1_loss/weight_{red}", "nn.functional.l1_loss", [T(a_), T(b_)], {"reduction": red, "weight": T(ww)}, ref=weighted("l1"))
    case("loss", f"huber_loss/weight_{red}", "nn.functional.huber_loss", [T(a_), T(b_)], {"reduction": red, "weight": T(ww), "delta": 0.7}, ref=weighted("huber"))
case("loss", "err/mse_weight_size", "nn.functional.mse_loss", [T(a_), T(b_)], {"weight": T(ww[0])}, ref=fail("Weights and input must have the same size."), error="ValueError")
case("loss", "smooth_l1_loss/beta0", "nn.functional.smooth_l1_loss", [T(a_), T(b_)], {"beta": 0.0})
case("loss", "binary_cross_entropy/edges", "nn.functional.binary_cross_entropy", [T(torch.tensor([0.0, 1.0, 0.5, 1.0])), T(torch.tensor([0.0, 1.0, 0.3, 0.0]))])
case("loss", "bce_with_logits/weight", "nn.functional.binary_cross_entropy_with_logits", [T(a_ * 10), T(tb)], {"weight": T(rnd((3, 1), torch.float32, 0, 2))})
case("loss", "kl_div/batchmean_logtarget", "nn.functional.kl_div", [T(F.log_softmax(a_, 1)), T(F.log_softmax(b_, 1))], {"reduction": "batchmean", "log_target": True})
case("loss", "kl_div/zero_target", "nn.functional.kl_div", [T(F.log_softmax(a_, 1)), T(torch.tensor([[0.0, 0.5, 0.5, 0.0]] * 3))], {"reduction": "sum"})
case("loss", "mse_loss/f64_promote", "nn.functional.mse_loss", [T(rnd((3,))), T(rnd((3,), torch.float64))])
case("loss", "err/target_oob", "nn.functional.cross_entropy", [T(rnd((2, 5))), T(torch.tensor([1, 7]))], error="IndexError", message="Target 7 is out of bounds.")
case("loss", "err/target_negative", "nn.functional.nll_loss", [T(rnd((2, 5))), T(torch.tensor([-1, 0]))], error="IndexError", message="Target -1 is out of bounds.")
case("loss", "err/batch_mismatch", "nn.functional.nll_loss", [T(rnd((4, 5))), T(torch.tensor([1, 2, 3]))], error="ValueError")
case("loss", "err/spatial_mismatch", "nn.functional.nll_loss", [T(rnd((2, 3, 4))), T(torch.zeros(2, 3, dtype=torch.long))], error="ShapeError")
case("loss", "err/target_int32", "nn.functional.nll_loss", [T(rnd((4, 5))), T(torch.tensor([1, 2, 3, 4], dtype=torch.int32))], error="DTypeError")
case("loss", "err/weight_size", "nn.functional.nll_loss", [T(rnd((4, 5))), T(torch.tensor([1, 2, 3, 4]))], {"weight": T(torch.ones(4))}, error="ShapeError")
case("loss", "err/weight_dtype", "nn.functional.nll_loss", [T(rnd((4, 5), torch.float64)), T(torch.tensor([1, 2, 3, 4]))], {"weight": T(torch.ones(5))}, error="DTypeError")
case("loss", "err/reduction", "nn.functional.mse_loss", [T(a_), T(b_)], {"reduction": "avg"}, error="ValueError")
case("loss", "err/prob_ignore", "nn.functional.cross_entropy", [T(a_), T(F.softmax(b_, 1))], {"ignore_index": 1}, error="ValueError")
case("loss", "err/bce_range", "nn.functional.binary_cross_entropy", [T(torch.tensor([0.5, 1.2])), T(torch.tensor([1.0, 0.0]))], error="ValueError")
case("loss", "err/mse_int", "nn.functional.mse_loss", [T(torch.tensor([1, 2])), T(torch.tensor([1, 3]))], error="DTypeError")


# ---------------- attention (PyTorch 2.x semantics, float64 reference) ----------------
def sdpa(q, k, v, attn_mask=None, dropout_p=0.0, is_causal=False, scale=None, enable_gqa=False):
    qd, kd, vd = q.double(), k.double(), v.double()
    if enable_gqa and kd.shape[-3] != qd.shape[-3]:
        kd = kd.repeat_interleave(qd.shape[-3] // kd.shape[-3], -3)
        vd = vd.repeat_interleave(qd.shape[-3] // vd.shape[-3], -3)
    sc = 1 / math.sqrt(q.shape[-1]) if scale is None else scale
    att = qd @ kd.transpose(-2, -1) * sc
    L, S = q.shape[-2], k.shape[-2]
    if is_causal:
        att = att.masked_fill(~torch.ones(L, S, dtype=torch.bool).tril(), float("-inf"))
    if attn_mask is not None:
        att = att.masked_fill(~attn_mask, float("-inf")) if attn_mask.dtype == torch.bool else att + attn_mask.double()
    p = att.softmax(-1)
    p = torch.where((att == float("-inf")).all(-1, keepdim=True), torch.zeros_like(p), p)  # _safe_softmax
    return (p @ vd).to(q.dtype)


for dt in [torch.float32, torch.float64, torch.bfloat16, torch.float16]:
    tag = str(dt)[6:]
    tol = dict(rtol=1e-4, atol=1e-5) if dt == torch.float32 else {}
    q, k, v = rnd((2, 4, 5, 4), dt, -1, 1), rnd((2, 4, 7, 4), dt, -1, 1), rnd((2, 4, 7, 3), dt, -1, 1)
    case("attention", f"sdpa/{tag}/plain", "nn.functional.scaled_dot_product_attention", [T(q), T(k), T(v)], ref=sdpa, **tol)
    case("attention", f"sdpa/{tag}/causal_L<S", "nn.functional.scaled_dot_product_attention", [T(q), T(k), T(v)], {"is_causal": True}, ref=sdpa, **tol)
    case("attention", f"sdpa/{tag}/causal_L>S", "nn.functional.scaled_dot_product_attention", [T(k), T(q), T(rnd((2, 4, 5, 3), dt))], {"is_causal": True}, ref=sdpa, **tol)
    m = torch.rand(2, 1, 5, 7, generator=G) > 0.4
    m[0, 0, 2, :] = False  # a fully masked row: PyTorch 2.x gives zeros
    case("attention", f"sdpa/{tag}/boolmask", "nn.functional.scaled_dot_product_attention", [T(q), T(k), T(v)], {"attn_mask": T(m)}, ref=sdpa, **tol)
    case("attention", f"sdpa/{tag}/addmask_2d", "nn.functional.scaled_dot_product_attention", [T(q), T(k), T(v)], {"attn_mask": T(rnd((5, 7), dt)), "scale": 0.2}, ref=sdpa, **tol)
    kg, vg = rnd((2, 2, 7, 4), dt, -1, 1), rnd((2, 2, 7, 3), dt, -1, 1)
    case("attention", f"sdpa/{tag}/gqa_mask", "nn.functional.scaled_dot_product_attention", [T(q), T(kg), T(vg)], {"attn_mask": T(m), "enable_gqa": True}, ref=sdpa, **tol)
q3 = rnd((3, 4, 8), torch.float32, -1, 1)
case("attention", "sdpa/3d_broadcast_kv", "nn.functional.scaled_dot_product_attention", [T(q3), T(rnd((1, 6, 8), torch.float32, -1, 1)), T(rnd((1, 6, 5), torch.float32, -1, 1))], ref=sdpa, rtol=1e-4, atol=1e-5)
case("attention", "sdpa/2d", "nn.functional.scaled_dot_product_attention", [T(q3[0]), T(rnd((6, 8), torch.float32, -1, 1)), T(rnd((6, 5), torch.float32, -1, 1))], ref=sdpa, rtol=1e-4, atol=1e-5)
qt = rnd((2, 5, 3, 8), torch.float32, -1, 1)
case("attention", "sdpa/transposed_views", "nn.functional.scaled_dot_product_attention",
     [T(qt, [["transpose", 1, 2]]), T(rnd((2, 7, 3, 8), torch.float32, -1, 1), [["transpose", 1, 2]]), T(rnd((2, 7, 3, 4), torch.float32, -1, 1), [["transpose", 1, 2]])],
     ref=sdpa, rtol=1e-4, atol=1e-5)
case("attention", "sdpa/gqa_kv_heads_differ", "nn.functional.scaled_dot_product_attention",
     [T(rnd((1, 4, 3, 8), torch.float32, -1, 1)), T(rnd((1, 2, 5, 8), torch.float32, -1, 1)), T(rnd((1, 1, 5, 4), torch.float32, -1, 1))], {"enable_gqa": True, "is_causal": True}, ref=sdpa, rtol=1e-4, atol=1e-5)
case("attention", "sdpa/float_mask_neg_inf_row", "nn.functional.scaled_dot_product_attention",
     [T(rnd((1, 2, 3, 4))), T(rnd((1, 2, 4, 4))), T(rnd((1, 2, 4, 4)))], {"attn_mask": T(torch.tensor([[0.0, 0, 0, 0], [float("-inf")] * 4, [0, float("-inf"), 0, 0]]))}, ref=sdpa, rtol=1e-4, atol=1e-5)
case("attention", "err/sdpa_scale_positional", "nn.functional.scaled_dot_product_attention", [T(rnd((2, 3, 4))), T(rnd((2, 3, 4))), T(rnd((2, 3, 4))), None, 0.0, False, 0.5],
     ref=fail("scale is keyword-only"), error="ValueError")
case("attention", "err/sdpa_dtype", "nn.functional.scaled_dot_product_attention", [T(rnd((2, 3, 4))), T(rnd((2, 3, 4), torch.float64)), T(rnd((2, 3, 4)))], ref=fail("dtypes differ"), error="DTypeError")
case("attention", "err/sdpa_causal_and_mask", "nn.functional.scaled_dot_product_attention", [T(rnd((2, 3, 4))), T(rnd((2, 3, 4))), T(rnd((2, 3, 4)))], {"attn_mask": T(torch.ones(3, 3, dtype=torch.bool)), "is_causal": True},
     ref=fail("_scaled_dot_product_attention: Explicit attn_mask should not be set when is_causal=True"), error="ValueError")
case("attention", "err/sdpa_dropout", "nn.functional.scaled_dot_product_attention", [T(rnd((2, 3, 4))), T(rnd((2, 3, 4))), T(rnd((2, 3, 4)))], {"dropout_p": 0.1},
     ref=fail("dropout needs the random generator: unsupported here"), error="UnsupportedError")
case("attention", "err/sdpa_embed", "nn.functional.scaled_dot_product_attention", [T(rnd((2, 3, 4))), T(rnd((2, 3, 5))), T(rnd((2, 3, 4)))], ref=sdpa, error="ShapeError")
case("attention", "err/sdpa_gqa_heads", "nn.functional.scaled_dot_product_attention", [T(rnd((1, 3, 2, 4))), T(rnd((1, 2, 2, 4))), T(rnd((1, 2, 2, 4)))], {"enable_gqa": True},
     ref=fail("number of heads in key/value must divide number of heads in query"), error="ShapeError")
case("attention", "err/sdpa_mask_dtype", "nn.functional.scaled_dot_product_attention", [T(rnd((2, 3, 4))), T(rnd((2, 3, 4))), T(rnd((2, 3, 4)))], {"attn_mask": T(torch.ones(3, 3, dtype=torch.long))},
     ref=fail("Expected attn_mask dtype to be bool or float or to match query dtype"), error="DTypeError")

out_dir = sys.argv[1] if len(sys.argv) > 1 else "test/fixtures"
for name, cases in FILES.items():
    with open(os.path.join(out_dir, f"nn_{name}.json"), "w") as fh:
        tensors = {k: e for k, (_, e) in TENSORS.get(name, {}).items()}
        json.dump({"generator": "test/gen/nn.py", "torch": torch.__version__, "tensors": tensors, "cases": cases}, fh, separators=(",", ":"))
    print(name, len(cases))
