#!/usr/bin/env python3
"""Golden fixtures for the shape family: /usr/bin/python3 test/gen/shape.py (torch 1.13 CPU).

Writes test/fixtures/shape_*.json. Each case: op (PyTorch name, `Tensor.X` for methods), args, kwargs,
and either `out` (expected tensors) or `error` (the nbx error class the call must raise; torch is
checked to raise too). Tensor values are stored in full, so cases stay small. Covers what the public
conformance suite does not: other dtypes, non-contiguous inputs, kwargs and edge cases, error cases.
The helpers here are shared with test/gen/indexing.py.
"""
import json, math, os, sys
import torch
import torch.nn.functional as F

HERE = os.path.dirname(os.path.abspath(__file__))
FIXTURES = os.path.join(HERE, '..', 'fixtures')


class V:
    """A tensor argument given as a contiguous base plus view steps (as the conformance format)."""
    def __init__(self, base, view=None):
        self.base, self.view = base.contiguous(), view or []

    def value(self):
        x = self.base
        for st in self.view:
            if st[0] == 'permute': x = x.permute(*st[1])
            elif st[0] == 'transpose': x = x.transpose(st[1], st[2])
            elif st[0] == 'slice':
                idx = [slice(None)] * x.dim(); idx[st[1]] = slice(st[2], st[3], st[4]); x = x[tuple(idx)]
            elif st[0] == 'expand': x = x.expand(*st[1])
        return x


class S:
    """A Python scalar with an explicit kind (the kind matters for promotion)."""
    def __init__(self, v, kind=None):
        self.v = v
        self.kind = kind or ('bool' if isinstance(v, bool) else 'int' if isinstance(v, int) else 'float')


def num(x):
    if isinstance(x, float) and not math.isfinite(x):
        return 'nan' if math.isnan(x) else ('inf' if x > 0 else '-inf')
    return x


def enc_tensor(t):
    t = t.detach().contiguous()
    vals = t.float().flatten().tolist() if t.dtype in (torch.float16, torch.bfloat16) else t.flatten().tolist()
    if t.dtype == torch.int64 and any(abs(v) > 2 ** 53 for v in vals):
        vals = [str(v) for v in vals]  # beyond a double's integers: JSON numbers would round
    return {'dtype': str(t.dtype)[6:], 'shape': list(t.shape), 'data': [num(v) for v in vals]}


def enc(v):
    if isinstance(v, V):
        d = {'tensor': enc_tensor(v.base)}
        if v.view: d['view'] = v.view
        return d
    if isinstance(v, torch.Tensor): return {'tensor': enc_tensor(v)}
    if isinstance(v, S): return {'scalar': num(v.v), 'type': v.kind}
    if isinstance(v, torch.dtype): return {'dtype': str(v)[6:]}
    if isinstance(v, tuple): return {'tuple': [enc(x) for x in v]}
    if isinstance(v, list) and any(isinstance(x, (V, torch.Tensor)) for x in v): return {'tuple': [enc(x) for x in v]}
    return v


def val(v):
    if isinstance(v, V): return v.value()
    if isinstance(v, S): return v.v
    if isinstance(v, tuple): return tuple(val(x) for x in v)
    if isinstance(v, list): return [val(x) for x in v]
    return v


def resolve(op):
    if op.startswith('Tensor.'):
        name = op[7:]
        return lambda *a, **k: getattr(a[0], name)(*a[1:], **k)
    obj = torch
    for p in op.split('.'): obj = getattr(obj, p)
    return obj


class Gen:
    def __init__(self, seed=0):
        self.g = torch.Generator().manual_seed(seed)
        self.cases = []

    def rnd(self, shape, dtype=torch.float32, lo=-5, hi=5):
        if dtype == torch.bool: return torch.rand(shape, generator=self.g) > 0.5
        if not dtype.is_floating_point: return torch.randint(lo, hi + 1, shape, generator=self.g).to(dtype)
        return (torch.rand(shape, generator=self.g, dtype=torch.float64) * (hi - lo) + lo).to(dtype)

    def case(self, op, args, kwargs=None, error=None, ref=None, tol=None, name=None):
        kwargs = kwargs or {}
        c = {'id': f'{op}/{name or len(self.cases)}', 'op': op, 'args': [enc(a) for a in args], 'kwargs': {k: enc(v) for k, v in kwargs.items()}}
        fn = ref or resolve(op)
        if error:
            try:
                fn(*[val(a) for a in args], **{k: val(v) for k, v in kwargs.items()})
            except Exception:
                c['error'] = error
                self.cases.append(c)
                return
            raise AssertionError(f'{c["id"]}: torch did not raise')
        out = fn(*[val(a) for a in args], **{k: val(v) for k, v in kwargs.items()})
        outs = list(out) if isinstance(out, (tuple, list)) else [out]
        c['out'] = [enc_tensor(o) for o in outs]
        if tol: c['rtol'], c['atol'] = tol
        self.cases.append(c)

    def write(self, name):
        os.makedirs(FIXTURES, exist_ok=True)
        path = os.path.join(FIXTURES, name)
        with open(path, 'w') as f:
            json.dump({'torch': torch.__version__, 'cases': self.cases}, f, separators=(',', ':'))
        print(f'{path}: {len(self.cases)} cases')


def build(s):
    r = s.rnd
    # ---- views as functions ----
    x = r((2, 3, 4))
    s.case('reshape', [V(x, [['permute', [2, 0, 1]]]), [4, -1]])
    s.case('flatten', [x, 0, 1])
    s.case('unflatten', [x, 2, (2, -1)])
    s.case('squeeze', [r((1, 3, 1))])
    s.case('squeeze', [r((1, 3, 1)), -1])
    s.case('unsqueeze', [x, 0])
    s.case('permute', [x, (2, 0, 1)])
    s.case('transpose', [x, 0, -1])
    s.case('swapaxes', [x, 1, 2])
    s.case('t', [r((3, 5))])
    s.case('movedim', [x, [0, 1], [2, 0]])
    s.case('moveaxis', [x, -1, 0])
    s.case('narrow', [x, -1, 1, 2])
    s.case('select', [x, 1, -1])
    s.case('chunk', [r((5, 2)), 3])
    s.case('chunk', [r((7, 2)), 4, 0])
    s.case('split', [r((7, 2)), 3])
    s.case('split', [r((2, 7)), [2, 0, 5], 1])
    s.case('tensor_split', [r((7, 2)), 3])
    s.case('tensor_split', [r((7, 2)), [1, -2, 9]])
    s.case('unbind', [x, 1])
    s.case('broadcast_to', [r((3, 1)), (2, 3, 4)])
    s.case('broadcast_tensors', [r((3, 1)), r((1, 4))])
    s.case('meshgrid', [r((3,)), r((2,))], {'indexing': 'xy'})
    s.case('meshgrid', [r((3,)), r((2,)), r((4,))], {'indexing': 'ij'})
    s.case('diagonal', [x, 1, 2, 0])
    s.case('diagonal', [r((4, 3)), -1])
    s.case('diag', [r((3,)), 2])
    s.case('diag', [r((3,), torch.int64), -1])
    s.case('diag', [r((3, 5)), 1])
    s.case('Tensor.unfold', [r((2, 7)), 1, 3, 2])
    s.case('Tensor.unfold', [V(r((7, 2)), [['transpose', 0, 1]]), 1, 2, 3])
    s.case('Tensor.expand', [r((3, 1), torch.int64), 2, 3, 4])
    # ---- cat / stack ----
    for dts in [(torch.int32, torch.float16), (torch.bool, torch.int64), (torch.uint8, torch.int8), (torch.bfloat16, torch.float16),
                (torch.float32, torch.float64)]:
        s.case('cat', [[r((2, 3), dts[0]), r((2, 2), dts[1])], 1], name=f'{dts[0]}_{dts[1]}'.replace('torch.', ''))
    s.case('cat', [[V(r((4, 3)), [['transpose', 0, 1]]), V(r((3, 6)), [['slice', 1, 0, 6, 2]])], -1], name='views')
    s.case('cat', [[torch.zeros(0, dtype=torch.float64), r((2, 3)), r((1, 3))]], name='legacy_empty')
    s.case('cat', [[r((2, 0, 3)), r((2, 2, 3))], 1], name='empty_dim')
    s.case('cat', [[r((2, 3, 4), torch.int64)]], {'dim': 2}, name='single')
    s.case('concat', [[r((1, 2)), r((1, 2))]])
    s.case('stack', [[r((2, 3)), r((2, 3))], -1])
    s.case('stack', [[torch.tensor(1.5), torch.tensor(2.5)]], name='scalars')
    s.case('stack', [[r((2,), torch.int32), r((2,), torch.float32)], 1], name='promote')
    s.case('hstack', [[r((2, 3)), r((2, 1))]])
    s.case('hstack', [[r((3,)), r((2,))]], name='1d')
    s.case('vstack', [[r((3,)), r((2, 3))]])
    s.case('dstack', [[r((3,)), r((3,))]])
    s.case('column_stack', [[r((3,)), r((3, 2))]])
    # ---- flip / roll / repeat / tile ----
    for dt in [torch.float32, torch.int64, torch.bool, torch.float16]:
        y = r((3, 4, 5), dt)
        s.case('flip', [V(y, [['transpose', 0, 2]]), [0, 1]], name=str(dt)[6:])
        s.case('roll', [y, 7], name=str(dt)[6:] + '_flat')
        s.case('Tensor.repeat', [V(y, [['slice', 2, 0, 5, 2]]), 2, 1, 2, 1], name=str(dt)[6:])
    s.case('flip', [x, [-1]])
    s.case('flip', [x, []], name='nodims')
    s.case('fliplr', [r((3, 4))])
    s.case('flipud', [r((3, 4))])
    s.case('roll', [x, -5, 1])
    s.case('roll', [x, (1, 2, -1), (0, 0, 2)], name='repeated_dim')
    s.case('roll', [V(x, [['permute', [1, 2, 0]]]), (2, 9), (0, 1)], name='view')
    s.case('Tensor.repeat', [r((2,)), 3], name='1d')
    s.case('Tensor.repeat', [r((2, 3)), 0, 2], name='zero')
    s.case('Tensor.repeat', [torch.tensor(3.0), 2, 2], name='scalar')
    s.case('tile', [r((2, 3)), (2,)])
    s.case('tile', [r((2, 3)), (2, 1, 2)], name='more')
    # ---- tril / triu ----
    for dt in [torch.float32, torch.int64, torch.bool, torch.bfloat16]:
        s.case('tril', [r((2, 4, 5), dt)], name=str(dt)[6:])
        s.case('triu', [r((5, 3), dt), -1], name=str(dt)[6:])
    s.case('tril', [r((3, 4)), 10], name='big')
    s.case('triu', [r((3, 4)), -10], name='small')
    s.case('triu', [V(r((4, 3)), [['transpose', 0, 1]]), 2], name='view')
    # ---- pad ----
    P = 'nn.functional.pad'
    s.case(P, [r((2, 3, 4)), (1, 2)], {'value': S(-1.5)})
    s.case(P, [r((2, 3, 4), torch.int32), (1, 1, 0, 2)], {'value': S(7)}, name='int')
    s.case(P, [r((2, 3, 4)), (-1, 1, 2, -2)], name='crop')
    s.case(P, [r((2, 3, 4)), (1, 1, 1, 1, 1, 1)], name='all_dims')
    s.case(P, [r((1, 2, 3, 4, 5)), (1, 0, 0, 2, 2, 1)], {'mode': 'constant'}, name='5d')
    s.case(P, [r((2, 3, 5)), (4, 3)], {'mode': 'reflect'}, name='reflect1d')
    s.case(P, [r((3, 5)), (2, 1)], {'mode': 'reflect'}, name='reflect1d_unbatched')
    s.case(P, [V(r((2, 3, 5, 6)), [['transpose', 2, 3]]), (2, 1, 3, 4)], {'mode': 'reflect'}, name='reflect2d_view')
    s.case(P, [r((1, 2, 3, 4, 5)), (1, 2, 2, 1, 1, 1)], {'mode': 'reflect'}, name='reflect3d')
    s.case(P, [r((1, 1, 5)), (3, -2)], {'mode': 'reflect'}, name='reflect_neg')
    s.case(P, [r((2, 3, 5)), (3, 2)], {'mode': 'replicate'}, name='replicate1d')
    s.case(P, [r((3, 4, 5)), (1, 2, 3, 0)], {'mode': 'replicate'}, name='replicate2d_unbatched')
    s.case(P, [r((1, 2, 3, 4, 5)), (1, 2, 0, 1, 2, 2)], {'mode': 'replicate'}, name='replicate3d')
    s.case(P, [r((1, 1, 5)), (-1, 2)], {'mode': 'replicate'}, name='replicate_neg')
    s.case(P, [r((2, 3, 5)), (2, 4)], {'mode': 'circular'}, name='circular1d')
    s.case(P, [r((2, 3, 4, 5)), (1, 2, 3, 1)], {'mode': 'circular'}, name='circular2d')
    s.case(P, [r((1, 2, 3, 4, 5)), (1, 2, 0, 1, 2, 2)], {'mode': 'circular'}, name='circular3d')
    s.case(P, [r((2, 3, 5), torch.float64), (2, 2)], {'mode': 'reflect'}, name='reflect_f64')
    # ---- pixel shuffle, unfold, fold ----
    s.case('nn.functional.pixel_shuffle', [r((2, 18, 2, 3)), 3])
    s.case('nn.functional.pixel_shuffle', [r((2, 2, 8, 2, 3), torch.int64), 2], name='5d')
    s.case('nn.functional.pixel_shuffle', [r((4, 2, 3)), 2], name='3d')
    s.case('nn.functional.pixel_unshuffle', [r((1, 2, 6, 9)), 3])
    s.case('nn.functional.pixel_unshuffle', [V(r((2, 4, 4)), [['transpose', 1, 2]]), 2], name='view')
    s.case('nn.functional.unfold', [r((2, 2, 7, 8)), (3, 2)], {'dilation': (2, 1), 'padding': 1, 'stride': (2, 3)})
    s.case('nn.functional.unfold', [r((3, 5, 5), torch.float64), 2], name='unbatched')
    s.case('nn.functional.unfold', [V(r((1, 5, 6, 2)), [['permute', [0, 3, 1, 2]]]), 3], {'padding': (0, 2)}, name='view')
    s.case('nn.functional.fold', [r((2, 8, 12)), (5, 6), 2], {'dilation': 2, 'padding': (1, 0), 'stride': (2, 1)}, tol=(1e-6, 1e-6))
    s.case('nn.functional.fold', [r((4, 9), torch.float64), (4, 4), (2, 2)], {'stride': 1}, name='unbatched', tol=(1e-12, 1e-12))
    s.case('nn.functional.fold', [r((1, 9, 4)), 4, 3], {'padding': 1, 'stride': 2}, name='pad', tol=(1e-6, 1e-6))
    # ---- errors ----
    s.case('cat', [[r((2, 3)), r((3,))]], error='ShapeError', name='err_ndim')
    s.case('cat', [[r((2, 3)), r((3, 3))], 1], error='ShapeError', name='err_size')
    s.case('cat', [[torch.tensor(1.0)]], error='ShapeError', name='err_0d')
    s.case('cat', [[]], error='ValueError', name='err_empty')
    s.case('cat', [[r((2, 3))], 2], error='IndexError', name='err_dim')
    s.case('stack', [[r((2, 3)), r((3, 2))]], error='ShapeError', name='err_shape')
    s.case('reshape', [r((4, 6)), (5, -1)], error='ShapeError', name='err')
    s.case('reshape', [r((4, 6)), (-1, -1)], error='ShapeError', name='err_two_infer')
    s.case('flip', [x, [0, 0]], error='ValueError', name='err_dup')
    s.case('roll', [x, (1, 2), (0,)], error='ValueError', name='err_align')
    s.case('Tensor.repeat', [x, 2, 2], error='ShapeError', name='err_few')
    s.case('tril', [r((3,))], error='ShapeError', name='err_1d')
    s.case(P, [r((2, 3)), (1,)], error='ValueError', name='err_odd')
    s.case(P, [r((2, 3)), (1, 1, 1, 1, 1, 1)], error='ValueError', name='err_long')
    s.case(P, [r((1, 2, 3)), (3, 0)], {'mode': 'reflect'}, error='ValueError', name='err_reflect_big')
    s.case(P, [r((2, 3)), (-2, -2)], error='ShapeError', name='err_negative_size')
    s.case(P, [r((1, 2, 3)), (1, 1)], {'mode': 'wrap'}, error='ValueError', name='err_mode')
    s.case('nn.functional.pixel_shuffle', [r((1, 3, 2, 2)), 2], error='ShapeError', name='err_div')
    s.case('nn.functional.pixel_unshuffle', [r((1, 1, 3, 2)), 2], error='ShapeError', name='err_div')
    s.case('nn.functional.unfold', [r((3, 4)), 2], error='ShapeError', name='err_2d')
    s.case('nn.functional.unfold', [r((1, 1, 2, 2)), 3], error='ShapeError', name='err_small')
    s.case('nn.functional.fold', [r((1, 6, 9)), (4, 4), (2, 2)], error='ShapeError', name='err_div')
    s.case('nn.functional.fold', [r((1, 4, 8)), (4, 4), (2, 2)], error='ShapeError', name='err_blocks')
    s.case('narrow', [x, 0, 1, 5], error='IndexError', name='err')
    s.case('select', [x, 0, 2], error='IndexError', name='err')
    s.case('diagonal', [x, 0, 1, 1], error='ShapeError', name='err_same')


if __name__ == '__main__':
    g = Gen(1)
    build(g)
    g.write('shape_golden.json')
