#!/usr/bin/env python3
"""Golden fixtures for the indexing family: /usr/bin/python3 test/gen/indexing.py (torch 1.13 CPU).

Writes test/fixtures/indexing_golden.json in the format of test/gen/shape.py (whose helpers it uses).
"""
import os, sys
import torch
import torch.nn.functional as F
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from shape import Gen, V, S  # noqa: E402

L = torch.int64


def idx(*shape, hi, g, lo=0):
    return torch.randint(lo, hi, shape, generator=g)


def build(s):
    r, g = s.rnd, s.g
    # ---- gather / take_along_dim / take ----
    for dt in [torch.float64, torch.int32, torch.bfloat16, torch.bool]:
        x = r((4, 5, 3), dt)
        s.case('gather', [x, 1, idx(4, 7, 2, hi=5, g=g)], name=str(dt)[6:])
    x = r((4, 6))
    s.case('gather', [V(x, [['transpose', 0, 1]]), 0, idx(3, 4, hi=4, g=g)], name='view')
    s.case('gather', [x, -1, idx(2, 3, hi=6, g=g)], name='smaller')
    s.case('gather', [x, 1, V(idx(4, 1, hi=6, g=g), [['expand', [4, 3]]])], name='expanded_index')
    s.case('gather', [x, 0, idx(0, 6, hi=4, g=g)], name='empty')
    s.case('gather', [torch.tensor(5.0), 0, torch.tensor(0)], name='scalar')
    s.case('take_along_dim', [r((3, 4, 5)), idx(3, 2, 1, hi=4, g=g), 1], name='broadcast')
    s.case('take_along_dim', [r((3, 1, 5)), idx(1, 6, 5, hi=3, g=g), 0], name='broadcast_input')
    s.case('take_along_dim', [r((3, 4)), idx(5, hi=12, g=g)], name='flat')
    s.case('take', [r((3, 4), torch.int64), idx(2, 3, hi=12, g=g, lo=-12)])
    s.case('take', [V(r((4, 3)), [['transpose', 0, 1]]), torch.tensor([0, 1, 2, 11, -1])], name='view')
    # ---- index_select / embedding / repeat_interleave ----
    s.case('index_select', [r((4, 5), torch.float16), 1, idx(7, hi=5, g=g).to(torch.int32)], name='int32')
    s.case('index_select', [V(r((5, 4)), [['transpose', 0, 1]]), 0, torch.tensor([3, 0, 3])], name='view')
    s.case('index_select', [r((3, 4, 2), torch.int64), -1, torch.tensor(1)], name='0d_index')
    s.case('index_select', [r((3, 4)), 0, torch.tensor([], dtype=L)], name='empty')
    s.case('index_select', [torch.tensor(2.5), 0, torch.tensor([0])], name='scalar')
    E = 'nn.functional.embedding'
    w = r((10, 6))
    s.case(E, [idx(3, 2, 4, hi=10, g=g).to(torch.int32), w], name='int32_3d')
    s.case(E, [torch.tensor(4), w], name='scalar_id')
    s.case(E, [idx(5, hi=10, g=g), r((10, 3), torch.float64)], {'padding_idx': -1}, name='pad_neg')
    s.case(E, [idx(2, 3, hi=10, g=g), V(r((6, 10)), [['transpose', 0, 1]])], name='view_weight')
    R = 'repeat_interleave'
    s.case(R, [r((2, 3)), 2])
    s.case(R, [r((2, 3), torch.int64), torch.tensor([1, 0, 3]), 1], name='tensor')
    s.case(R, [r((2, 3)), torch.tensor([2]), 0], name='tensor1')
    s.case(R, [r((3, 2)), torch.tensor([0, 2, 1])], {'dim': 0, 'output_size': 3}, name='output_size')
    s.case(R, [torch.tensor([2, 0, 1, 3])], name='repeats_only')
    s.case(R, [torch.tensor(1.5), 3], name='scalar')
    s.case(R, [V(r((3, 4)), [['transpose', 0, 1]]), 2, -1], name='view')
    # ---- scatter family ----
    x = r((3, 5))
    s.case('scatter', [x, 1, torch.tensor([[4, 0], [1, 1], [2, 3]]), r((3, 4))], name='src_bigger')
    s.case('scatter', [x, 0, torch.tensor([[0, 0, 0, 0, 0]]), r((2, 5))], name='duplicates_last_wins')
    s.case('scatter', [x, 1, torch.tensor([[0, 1, 0]]), S(2.5)], {'reduce': 'add'}, name='value_add')
    s.case('scatter', [x, 1, torch.tensor([[0, 1, 0]]), r((1, 3))], {'reduce': 'multiply'}, name='multiply')
    s.case('scatter', [r((3, 5), torch.int64), 1, torch.tensor([[4], [0], [2]]), S(-7)], name='int_value')
    s.case('scatter', [r((2, 3), torch.bool), 1, torch.tensor([[2, 0]]), r((1, 2), torch.bool)], name='bool')
    s.case('scatter', [V(r((5, 3)), [['transpose', 0, 1]]), 1, torch.tensor([[1, 3], [0, 4], [2, 2]]), r((3, 2))], name='view')
    big = torch.tensor([[2 ** 60, 3, -(2 ** 61)]], dtype=L)
    s.case('scatter_add', [torch.tensor([[2 ** 62, 1]], dtype=L), 1, torch.tensor([[0, 1, 0]]), big], name='int64_exact')
    s.case('scatter_add', [r((4, 3), torch.float16), 0, idx(6, 3, hi=4, g=g), r((6, 3), torch.float16)], name='f16', tol=(2e-3, 2e-3))
    s.case('scatter_add', [r((4, 3), torch.int8, -100, 100), 0, idx(6, 3, hi=4, g=g), r((6, 3), torch.int8, -100, 100)], name='int8_wrap')
    SR = 'scatter_reduce'
    xi = r((3, 4), torch.int32, -9, 9)
    ii = idx(3, 6, hi=4, g=g)
    si = r((3, 6), torch.int32, -9, 9)
    for red in ['sum', 'prod', 'mean', 'amax', 'amin']:
        for inc in [True, False]:
            s.case(SR, [xi, 1, ii, si, red], {'include_self': inc}, name=f'int32_{red}_{inc}')
            s.case(SR, [xi.to(L), 1, ii, si.to(L), red], {'include_self': inc}, name=f'int64_{red}_{inc}')
            s.case(SR, [xi.double() / 3, 1, ii, si.double() / 7, red], {'include_self': inc}, name=f'f64_{red}_{inc}', tol=(1e-12, 1e-12))
    nanx = torch.tensor([[1.0, float('nan'), 3.0, 0.0]], dtype=torch.float16)
    s.case(SR, [nanx, 1, torch.tensor([[0, 1, 2, 2]]), torch.tensor([[float('nan'), 5.0, -1.0, 4.0]], dtype=torch.float16), 'amax'], name='nan_amax')
    s.case(SR, [nanx, 1, torch.tensor([[0, 1, 2, 2]]), torch.tensor([[float('nan'), 5.0, -1.0, 4.0]], dtype=torch.float16), 'amin'],
           {'include_self': False}, name='nan_amin')
    # ---- index_add / index_copy / index_fill ----
    s.case('index_add', [r((4, 3), L), 0, torch.tensor([0, 3, 0]), r((3, 3), L)], {'alpha': S(-3)}, name='int64_alpha')
    s.case('index_add', [r((3, 5), torch.bfloat16), 1, torch.tensor([4, 0, 4], dtype=torch.int32), r((3, 3), torch.bfloat16)],
           {'alpha': S(0.5)}, name='bf16_dim1', tol=(1.6e-2, 1.6e-2))
    s.case('index_add', [V(r((5, 3)), [['transpose', 0, 1]]), 1, torch.tensor([1, 1]), r((3, 2))], name='view', tol=(1e-6, 1e-6))
    s.case('index_copy', [r((4, 3)), 0, torch.tensor([3, 1]), r((2, 3))])
    s.case('index_copy', [r((3, 4), torch.int64), 1, torch.tensor([0, 2]), r((3, 2), torch.int64)], name='dim1')
    s.case('index_fill', [r((3, 4)), 1, torch.tensor([0, -1]), S(-2.5)], name='neg')
    s.case('index_fill', [r((3, 4), torch.int32), 0, torch.tensor([2]), torch.tensor(7)], name='tensor_value')
    # ---- index_put ----
    P = 'index_put'
    x = r((4, 5, 3))
    s.case(P, [x, (torch.tensor([0, -1]), torch.tensor([4, 1])), r((2, 3))], name='neg')
    s.case(P, [x, (torch.tensor([[0], [2]]), torch.tensor([1, 3, 4])), torch.tensor(9.0)], name='broadcast_idx')
    s.case(P, [x, (x[:, :, 0] > 0,), torch.tensor(-1.0)], name='mask')
    s.case(P, [x, (torch.tensor([True, False, True, False]),), r((3,))], name='mask_rows')
    s.case(P, [r((4, 3), L), (torch.tensor([1, 1, 1, 0]),), r((4, 3), L)], {'accumulate': True}, name='acc_dup')
    s.case(P, [r((4, 3), torch.float32), (torch.tensor([1, 1, 1, 0]), torch.tensor([2, 2, 2, 0])), r((4,))], {'accumulate': True}, name='acc_2d',
           tol=(1e-6, 1e-6))
    s.case(P, [r((4, 3), torch.int32), (torch.tensor([1, 3]),), r((2, 3), torch.int32)], name='int32_values')
    s.case(P, [V(r((3, 4)), [['transpose', 0, 1]]), (torch.tensor([3, 0]),), r((2, 3))], name='view')
    s.case(P, [r((2, 3)), (torch.tensor([], dtype=L),), torch.tensor(1.0)], name='empty')
    # ---- nonzero / masked_select / masked_scatter / where ----
    for dt in [torch.float32, torch.int64, torch.bool, torch.float16]:
        s.case('nonzero', [r((3, 4, 2), dt, -1, 1)], name=str(dt)[6:])
    s.case('nonzero', [torch.tensor([0.0, -0.0, float('nan'), 1e-30])], name='special')
    s.case('nonzero', [V(r((4, 3), L, -1, 1), [['transpose', 0, 1]])], name='view')
    s.case('nonzero', [torch.tensor(3)], name='scalar')
    s.case('nonzero', [r((2, 3), L, -1, 1)], {'as_tuple': True}, name='tuple')
    s.case('argwhere', [r((3, 3), torch.bool)])
    s.case('where', [r((3, 4), torch.bool)], name='one_arg')
    s.case('masked_select', [r((3, 4)), r((4,), torch.bool)], name='bcast_mask')
    s.case('masked_select', [r((1, 4), torch.int64), r((3, 1), torch.bool)], name='bcast_both')
    s.case('masked_select', [V(r((4, 3)), [['transpose', 0, 1]]), r((3, 4), torch.bool)], name='view')
    s.case('masked_scatter', [r((3, 4)), r((3, 4), torch.bool), r((20,))])
    s.case('masked_scatter', [r((3, 4), L), r((4,), torch.bool), r((2, 10), L)], name='bcast')
    # ---- one_hot ----
    s.case('nn.functional.one_hot', [idx(2, 3, hi=5, g=g)])
    s.case('nn.functional.one_hot', [idx(4, hi=3, g=g), 6], name='classes')
    # ---- errors ----
    x = r((3, 4))
    s.case('gather', [x, 1, torch.tensor([[0, 4]])], error='IndexError', name='err_oob')
    s.case('gather', [x, 1, torch.tensor([[-1]])], error='IndexError', name='err_neg')
    s.case('gather', [x, 1, torch.tensor([[0.0]])], error='DTypeError', name='err_float')
    s.case('gather', [x, 1, torch.tensor([0, 1])], error='ShapeError', name='err_ndim')
    s.case('gather', [x, 1, torch.zeros(4, 1, dtype=L)], error='ShapeError', name='err_size')
    s.case('gather', [x, 2, torch.zeros(1, 1, dtype=L)], error='IndexError', name='err_dim')
    s.case('take_along_dim', [x, torch.tensor([[1]], dtype=torch.int32), 1], error='DTypeError', name='err_int32')
    s.case('take_along_dim', [x, torch.tensor([1]), 1], error='ShapeError', name='err_ndim')
    s.case('take', [x, torch.tensor([12])], error='IndexError', name='err_oob')
    s.case('index_select', [x, 0, torch.tensor([0, 3])], error='IndexError', name='err_oob')
    s.case('index_select', [x, 0, torch.tensor([-1])], error='IndexError', name='err_neg')
    s.case('index_select', [x, 0, torch.tensor([[0]])], error='IndexError', name='err_2d')
    s.case('index_select', [x, 0, torch.tensor([0.0])], error='DTypeError', name='err_float')
    s.case('nn.functional.embedding', [torch.tensor([[0, 11]]), r((10, 4))], error='IndexError', name='err_oob')
    s.case('nn.functional.embedding', [torch.tensor([0.0]), r((10, 4))], error='DTypeError', name='err_float')
    s.case('nn.functional.embedding', [torch.tensor([0]), r((10, 4))], {'padding_idx': 10}, error='ValueError', name='err_pad')
    s.case('scatter', [x, 1, torch.tensor([[0, 7]]), r((3, 4))], error='IndexError', name='err_oob')
    s.case('scatter', [x, 1, torch.tensor([[0, 1]]), r((1, 2), torch.float64)], error='DTypeError', name='err_dtype')
    s.case('scatter', [x, 1, torch.tensor([[0, 1]]), r((1, 1))], error='ShapeError', name='err_src_small')
    s.case('scatter', [x, 1, torch.tensor([[0, 1]]), r((1, 2))], {'reduce': 'mean'}, error='ValueError', name='err_reduce')
    s.case('scatter_reduce', [x, 1, torch.tensor([[0, 1]]), r((1, 2)), 'mul'], error='ValueError', name='err_reduce')
    s.case('scatter_add', [x, 1, torch.tensor([[0, 1]], dtype=torch.int32), r((1, 2))], error='DTypeError', name='err_int32')
    s.case('index_add', [x, 0, torch.tensor([3]), r((1, 4))], error='IndexError', name='err_oob')
    s.case('index_add', [x, 0, torch.tensor([1]), r((1, 5))], error='ShapeError', name='err_shape')
    s.case('index_add', [x, 0, torch.tensor([1]), r((1, 4), torch.float64)], error='DTypeError', name='err_dtype')
    s.case('index_copy', [x, 0, torch.tensor([-1]), r((1, 4))], error='IndexError', name='err_neg')
    s.case('index_put', [x, (torch.tensor([3]),), torch.tensor(1.0)], error='IndexError', name='err_oob')
    s.case('index_put', [x, (torch.tensor([1]),), torch.tensor(1.0, dtype=torch.float64)], error='DTypeError', name='err_dtype')
    s.case('index_put', [x, (torch.tensor([1, 2]),), r((3, 4))], error='ShapeError', name='err_values')
    s.case('index_put', [x, (torch.tensor([True, False]),), torch.tensor(1.0)], error='IndexError', name='err_mask')
    s.case('index_put', [x, (torch.tensor([0]), torch.tensor([0]), torch.tensor([0])), torch.tensor(1.0)], error='IndexError', name='err_many')
    s.case('masked_select', [x, torch.tensor([1, 0, 1, 0])], error='DTypeError', name='err_mask')
    s.case('masked_select', [x, torch.tensor([True, False])], error='ShapeError', name='err_bcast')
    s.case('masked_scatter', [x, r((3, 4), torch.bool) | True, r((5,))], error='ShapeError', name='err_short')
    s.case('repeat_interleave', [x, torch.tensor([1, -2, 1]), 0], error='ValueError', name='err_neg')
    s.case('repeat_interleave', [x, torch.tensor([1, 2]), 0], error='ShapeError', name='err_size')
    s.case('nn.functional.one_hot', [torch.tensor([0, 5]), 3], error='ValueError', name='err_big')
    s.case('nn.functional.one_hot', [torch.tensor([0.0]), 3], error='DTypeError', name='err_float')


if __name__ == '__main__':
    gen = Gen(2)
    build(gen)
    gen.write('indexing_golden.json')
