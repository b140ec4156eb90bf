#!/usr/bin/env python3
"""PyTorch's x[...] results for the index texts test/getitem.test.ts evaluates: writes test/fixtures/getitem.json.

Run with any PyTorch (/usr/bin/python3 scripts/gen-getitem-fixture.py). x = arange(120).reshape(2, 3, 4, 5);
each case records the result's shape, values, and whether PyTorch returned a view of x.
"""
import json
import os

import torch

INDEXES = [
    '0', '-1', '1, 2', '0, 1, 2, 3', ':, 0', '..., 0', '0, ...', '..., 1:3', '::2', '1:, ::2, 1::3',
    ':, :, -2:', 'None', 'None, 0, None', '..., None', 'True', 'False', '0, None, ..., None, 1',
    '[0, 1]', '[1, 0, 1]', '[[0, 1], [1, 0]]', '0, [2, 0]', ':, [0, 2], 1', '0, :, [1, 2], [0, 1]',
    ':, [0, 1], :, [1, 2]', '[1], :, [0, 3]', '..., [4, 0]', '[True, False]', '0, [True, False, True]',
    '1:, [[0, 1], [1, 0]]', '0, 0, 0, 0', '-1, -1, -1, -1', '0:0', '5:', '1, 10:20',
]


def main():
    x = torch.arange(120).reshape(2, 3, 4, 5)
    cases = []
    for text in INDEXES:
        r = eval(f'x[{text}]', {'x': x, 'None': None})
        cases.append({'index': text, 'shape': list(r.shape), 'values': r.flatten().tolist(),
                      'view': r._is_view() and r.storage().data_ptr() == x.storage().data_ptr()})
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', 'test', 'fixtures', 'getitem.json')
    with open(path, 'w') as f:
        json.dump({'generator': 'scripts/gen-getitem-fixture.py', 'torch': torch.__version__, 'cases': cases}, f)
        f.write('\n')
    print(f'{len(cases)} cases -> {os.path.normpath(path)}')


if __name__ == '__main__':
    main()
