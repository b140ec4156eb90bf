#!/usr/bin/env python3
"""PyTorch's own text for the tensors test/printing.test.ts prints: writes test/fixtures/printing.json.

Run with any PyTorch (Debian's python3-torch 1.13 was used: /usr/bin/python3 scripts/gen-printing-fixture.py).
Each case is a spec both sides can build identically (values computed in float64, then cast), the print
options in force, and repr(tensor). PyTorch 1.13's torch/_tensor_str.py formats strided CPU tensors as
2.x does; the known differences are in dtypes 1.13 lacks (float8, unsigned ints beyond uint8), which no
case uses. The JS side compares after mapping the dtype suffix 'dtype=torch.X' to nbx's 'dtype=nbx.X'.
"""
import json
import math
import os
import sys

import torch

DT = {
    'float32': torch.float32, 'float64': torch.float64, 'float16': torch.float16, 'bfloat16': torch.bfloat16,
    'int64': torch.int64, 'int32': torch.int32, 'int16': torch.int16, 'int8': torch.int8, 'uint8': torch.uint8,
    'bool': torch.bool, 'complex64': torch.complex64, 'complex128': torch.complex128,
}


def num(v):
    return {'nan': math.nan, 'inf': math.inf, '-inf': -math.inf, '-0': -0.0}.get(v, v) if isinstance(v, str) else v


def build(spec):
    dt = DT[spec['dtype']]
    if 'complex' in spec:
        re = torch.tensor([num(p[0]) for p in spec['complex']], dtype=torch.float64)
        im = torch.tensor([num(p[1]) for p in spec['complex']], dtype=torch.float64)
        return torch.complex(re, im).to(dt)
    if 'data' in spec:
        data = spec['data']
        def conv(x):
            return [conv(y) for y in x] if isinstance(x, list) else num(x)
        if spec['dtype'] == 'bool':
            return torch.tensor(data, dtype=torch.bool)
        return torch.tensor(conv(data), dtype=torch.float64).to(dt)
    if 'randn' in spec:
        r = spec['randn']
        torch.manual_seed(r['seed'])
        return (torch.randn(r['shape']) * r.get('mul', 1)).to(dt)
    a = spec['arange']
    t = torch.arange(a['n'], dtype=torch.float64) * a.get('mul', 1) + a.get('add', 0)
    if 'div' in a:
        t = t / a['div']
    return t.reshape(spec.get('shape', [a['n']])).to(dt)


CASES = [
    ('small float matrix', {'data': [[1, 2], [3, 4]], 'dtype': 'float32'}),
    ('fractions', {'data': [1.5, -2.25, 3.125], 'dtype': 'float32'}),
    ('half-even tie at precision 4', {'data': [0.03125, 1.5], 'dtype': 'float32'}),
    ('scientific by range', {'data': [1e-5, 1, 1000], 'dtype': 'float32'}),
    ('tiny values', {'data': [1e-10, -2e-12], 'dtype': 'float32'}),
    ('large integral floats', {'data': [1e9, 1], 'dtype': 'float32'}),
    ('nonfinite with fractions', {'data': ['nan', 'inf', '-inf', 1.5], 'dtype': 'float32'}),
    ('nonfinite with integral', {'data': [1, 'nan', 'inf', -2], 'dtype': 'float32'}),
    ('negative zero', {'data': ['-0', 1], 'dtype': 'float32'}),
    ('all zeros', {'data': [0, 0, 0], 'dtype': 'float32'}),
    ('int64', {'data': [1, -20, 300], 'dtype': 'int64'}),
    ('int32 suffix', {'data': [[1, 2], [3, 40]], 'dtype': 'int32'}),
    ('int16, int8, uint8', {'data': [7, -8], 'dtype': 'int8'}),
    ('uint8', {'data': [0, 255, 17], 'dtype': 'uint8'}),
    ('bool', {'data': [True, False, True], 'dtype': 'bool'}),
    ('float64 suffix', {'data': [1.5, 2, 3], 'dtype': 'float64'}),
    ('float16', {'data': [0.1, 2.5, -3], 'dtype': 'float16'}),
    ('bfloat16', {'data': [0.1, 2.5, -3], 'dtype': 'bfloat16'}),
    ('0-dim float', {'data': 3.5, 'dtype': 'float32'}),
    ('0-dim integral float', {'data': 3, 'dtype': 'float32'}),
    ('0-dim int64', {'data': 7, 'dtype': 'int64'}),
    ('0-dim int32', {'data': -7, 'dtype': 'int32'}),
    ('0-dim bool', {'data': True, 'dtype': 'bool'}),
    ('empty float', {'data': [], 'dtype': 'float32'}),
    ('empty int64', {'data': [], 'dtype': 'int64'}),
    ('empty 2-d int32', {'arange': {'n': 0}, 'shape': [0, 3], 'dtype': 'int32'}),
    ('small 3-d', {'arange': {'n': 12, 'mul': 0.5}, 'shape': [2, 2, 3], 'dtype': 'float32'}),
    ('wrapped float vector', {'arange': {'n': 30, 'mul': 1.37}, 'dtype': 'float32'}),
    ('wrapped int vector', {'arange': {'n': 100, 'mul': 12345}, 'dtype': 'int64'}),
    ('1000 elements: not summarized', {'arange': {'n': 1000}, 'dtype': 'int64'}),
    ('1001 elements: summarized', {'arange': {'n': 1001}, 'dtype': 'int64'}),
    ('large 1-d float', {'arange': {'n': 5000, 'mul': 3, 'add': -7000, 'div': 7}, 'dtype': 'float32'}),
    ('large 2-d float', {'arange': {'n': 2000, 'div': 7}, 'shape': [40, 50], 'dtype': 'float32'}),
    ('large 2-d narrow rows', {'arange': {'n': 2004, 'mul': 0.25}, 'shape': [1002, 2], 'dtype': 'float32'}),
    ('large 3-d', {'arange': {'n': 1728, 'mul': 0.5, 'add': -400}, 'shape': [12, 12, 12], 'dtype': 'float32'}),
    ('large int32 matrix', {'arange': {'n': 1200, 'mul': 17, 'add': -9000}, 'shape': [30, 40], 'dtype': 'int32'}),
    ('complex64', {'complex': [[1, 2], [-3.5, -0.25], [0, 1]], 'dtype': 'complex64'}),
    ('complex128', {'complex': [[1, 2], [3, 4]], 'dtype': 'complex128'}),
    ('precision 2', {'data': [1.23456, 2.5], 'dtype': 'float32', 'print': {'precision': 2}}),
    ('sci_mode off', {'data': [1e-5, 1, 1000], 'dtype': 'float32', 'print': {'sci_mode': False}}),
    ('sci_mode on', {'data': [1.5, 2.25], 'dtype': 'float32', 'print': {'sci_mode': True}}),
    ('threshold 5', {'arange': {'n': 10}, 'dtype': 'int64', 'print': {'threshold': 5}}),
    ('edgeitems 1', {'arange': {'n': 10}, 'dtype': 'int64', 'print': {'threshold': 5, 'edgeitems': 1}}),
    ('linewidth 40', {'arange': {'n': 20, 'mul': 1.25}, 'dtype': 'float32', 'print': {'linewidth': 40}}),
    ('profile short', {'arange': {'n': 2000, 'div': 3}, 'shape': [40, 50], 'dtype': 'float32', 'print': {'profile': 'short'}}),
    ('randn 50x50 (seeded)', {'randn': {'seed': 0, 'shape': [50, 50]}, 'dtype': 'float32'}),
    ('small randn values: scientific', {'randn': {'seed': 1, 'shape': [3, 4], 'mul': 1e-5}, 'dtype': 'float32'}),
    ('randn 3-d', {'randn': {'seed': 2, 'shape': [2, 3, 4]}, 'dtype': 'float32'}),
    ('randn float64', {'randn': {'seed': 4, 'shape': [4, 5]}, 'dtype': 'float64'}),
    ('randn half', {'randn': {'seed': 5, 'shape': [8]}, 'dtype': 'float16'}),
    ('large randn 1-d', {'randn': {'seed': 7, 'shape': [100000], 'mul': 100}, 'dtype': 'float32'}),
    ('long dtype suffix wraps', {'arange': {'n': 14, 'mul': 1111111}, 'dtype': 'int32'}),
]


def main():
    out = []
    for name, spec in CASES:
        torch.set_printoptions(profile='default')
        torch.set_printoptions(**spec.get('print', {}))
        out.append({'name': name, 'spec': spec, 'torch': repr(build(spec))})
    torch.set_printoptions(profile='default')
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', 'test', 'fixtures', 'printing.json')
    with open(path, 'w') as f:
        json.dump({'generator': 'scripts/gen-printing-fixture.py', 'torch': torch.__version__, 'cases': out}, f, indent=1)
        f.write('\n')
    print(f'{len(out)} cases -> {os.path.normpath(path)} (torch {torch.__version__})', file=sys.stderr)


if __name__ == '__main__':
    main()
