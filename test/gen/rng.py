"""Golden vectors for test/random.test.ts, computed with the local PyTorch (Debian's 1.13).

    /usr/bin/python3 test/gen/rng.py > test/fixtures/random_golden.json

Outputs of up to 64 elements are stored in full (hex of the little-endian bytes); longer ones as
the SHA-256 of those bytes plus the first 8 elements. Tensor inputs (probabilities, dropout inputs,
normal's mean/std tensors) are stored in full; a value '@k' refers to the shared table 'inputs'.

PyTorch 1.13 differs from 2.x (the reference) in two places, and the test runs the cases marked
"torch113": true with sample.ts's __compat.torch113 switch on:
  - normal_distribution<double> (normal of < 16 values) and exponential_ (multinomial without
    replacement) use log(1 - u) in 1.13 and log1p(-u) in 2.x;
  - float16 normal_fill (randn of >= 16 float16 values) rounds every intermediate to half in 2.x.
Everything else here is computed identically by 1.13 and 2.x.
"""
import hashlib
import json
import sys

import torch

DT = {
    'float32': torch.float32, 'float64': torch.float64, 'float16': torch.float16, 'bfloat16': torch.bfloat16,
    'int64': torch.int64, 'int32': torch.int32, 'int16': torch.int16, 'int8': torch.int8, 'uint8': torch.uint8,
    'bool': torch.bool,
}


def raw(t):
    t = t.contiguous()
    if t.dtype in (torch.float16, torch.bfloat16):
        t = t.view(torch.int16)
    return t.numpy().tobytes()


def enc(t):
    b = raw(t)
    n = t.numel()
    if n <= 64:
        return {'len': n, 'hex': b.hex()}
    item = len(b) // n if n else 0
    return {'len': n, 'sha256': hashlib.sha256(b).hexdigest(), 'head': b[: 8 * item].hex()}


def gen(seed):
    return torch.Generator().manual_seed(seed)


cases = []
inputs = {}  # shared tensor inputs: '@k' -> hex


def ref(t):
    """Store an input tensor once; cases refer to it as '@k'."""
    h = raw(t).hex()
    for k, v in inputs.items():
        if v == h:
            return k
    k = f'@{len(inputs)}'
    inputs[k] = h
    return k


def add(case, out):
    case['out'] = enc(out)
    cases.append(case)


SIZES = [1, 2, 15, 16, 17, 100, 1000, 4097]
FLOATS = ['float32', 'float64', 'float16', 'bfloat16']

# rand / uniform_
for dt in FLOATS:
    for i, n in enumerate(SIZES):
        for seed in (i + 1, 2 ** 40 + 7 * i):
            add({'id': f'rand/{dt}/{n}/{seed}', 'op': 'rand', 'dtype': dt, 'n': n, 'seed': seed},
                torch.rand(n, dtype=DT[dt], generator=gen(seed)))
for dt in FLOATS:
    for (lo, hi) in [(-3.0, 5.0), (0.5, 0.75), (-1000.0, 0.001), (1e-3, 7.25)]:
        for n in (1, 17, 1000):
            seed = 1000 + n
            t = torch.empty(n, dtype=DT[dt]).uniform_(lo, hi, generator=gen(seed))
            add({'id': f'uniform/{dt}/{lo},{hi}/{n}', 'op': 'uniform', 'dtype': dt, 'n': n, 'seed': seed,
                 'from': lo, 'to': hi}, t)

# randn / normal_
for dt in FLOATS:
    for i, n in enumerate(SIZES):
        for seed in (3 * i + 5, 2 ** 63 + i):
            add({'id': f'randn/{dt}/{n}/{seed}', 'op': 'randn', 'dtype': dt, 'n': n, 'seed': seed,
                 'torch113': True}, torch.randn(n, dtype=DT[dt], generator=gen(seed)))
for dt in FLOATS:
    for (mean, std) in [(2.0, 0.5), (-1.5, 3.0), (0.25, 1e-3)]:
        for n in (1, 5, 15, 16, 17, 100, 1000):
            seed = 77 + n
            t = torch.empty(n, dtype=DT[dt]).normal_(mean, std, generator=gen(seed))
            add({'id': f'normal/{dt}/{mean},{std}/{n}', 'op': 'normal', 'dtype': dt, 'n': n, 'seed': seed,
                 'mean': mean, 'std': std, 'torch113': True}, t)

# a few large draws (hashed): the SIMD kernels, glibc's log/sin/cos over many arguments
for op, dt, n, seed, args in [('randn', 'float32', 2 ** 20 + 5, 11, ()), ('randn', 'float64', 65541, 12, ()),
                              ('normal', 'float32', 262147, 13, (2.0, 0.5)), ('rand', 'float32', 2 ** 20 + 3, 14, ()),
                              ('rand', 'float64', 100003, 15, ()), ('randn', 'bfloat16', 70001, 16, ()),
                              ('randn', 'float16', 70001, 17, ())]:
    g = gen(seed)
    if op == 'randn':
        t = torch.randn(n, dtype=DT[dt], generator=g)
    elif op == 'rand':
        t = torch.rand(n, dtype=DT[dt], generator=g)
    else:
        t = torch.empty(n, dtype=DT[dt]).normal_(*args, generator=g)
    c = {'id': f'big/{op}/{dt}/{n}', 'op': op, 'dtype': dt, 'n': n, 'seed': seed, 'torch113': True}
    if args:
        c['mean'], c['std'] = args
    add(c, t)

# normal with tensor mean / std
for dt in FLOATS:
    for n in (5, 16, 33):
        g = gen(500 + n)
        m = torch.randn(n, dtype=DT[dt], generator=g) * 3
        s = torch.rand(n, dtype=DT[dt], generator=g) * 2
        for form in ('tt', 'ts', 'st'):
            seed = 600 + n
            if form == 'tt':
                out = torch.normal(m, s, generator=gen(seed))
                c = {'mean': raw(m).hex(), 'std': raw(s).hex()}
            elif form == 'ts':
                out = torch.normal(m, 0.3, generator=gen(seed))
                c = {'mean': raw(m).hex(), 'std': 0.3}
            else:
                out = torch.normal(-0.5, s, generator=gen(seed))
                c = {'mean': -0.5, 'std': raw(s).hex()}
            add({'id': f'normalTensor/{dt}/{form}/{n}', 'op': 'normalTensor', 'dtype': dt, 'n': n, 'seed': seed,
                 'torch113': True, **c}, out)

# randint
RANGES = [
    ('int64', 0, 10), ('int64', -5, 5), ('int64', 0, 2 ** 31), ('int64', 0, 2 ** 32),
    ('int64', -2 ** 40, 2 ** 40), ('int64', 0, 2 ** 62), ('int64', -2 ** 63, 2 ** 63 - 1),
    ('int32', 0, 1000), ('int32', -2 ** 31, 2 ** 31 - 1), ('int16', -300, 300), ('int8', -100, 100),
    ('uint8', 0, 256), ('bool', 0, 2), ('float32', 0, 1000), ('float32', -2 ** 40, 2 ** 40),
    ('float64', -2 ** 40, 2 ** 40), ('float16', 0, 100), ('bfloat16', -50, 50),
]
for dt, lo, hi in RANGES:
    for n in (1, 17, 1000):
        seed = 31 * n + lo % 97
        t = torch.randint(lo, hi, (n,), dtype=DT[dt], generator=gen(seed))
        add({'id': f'randint/{dt}/{lo},{hi}/{n}', 'op': 'randint', 'dtype': dt, 'n': n, 'seed': seed,
             'low': str(lo), 'high': str(hi)}, t)

# randperm
for n in SIZES:
    add({'id': f'randperm/int64/{n}', 'op': 'randperm', 'dtype': 'int64', 'n': n, 'seed': 40 + n},
        torch.randperm(n, generator=gen(40 + n)))
for dt, n in [('int32', 1000), ('int16', 1000), ('uint8', 200), ('float32', 100), ('float64', 4097),
              ('float16', 100), ('bfloat16', 100), ('int64', 0)]:
    add({'id': f'randperm/{dt}/{n}', 'op': 'randperm', 'dtype': dt, 'n': n, 'seed': 7 + n},
        torch.randperm(n, dtype=DT[dt], generator=gen(7 + n)))

# bernoulli_(p) with a Python float
for dt in ('float32', 'float64', 'bool', 'int64', 'uint8', 'bfloat16'):
    for p in (0.0, 0.3, 0.5, 1.0):
        for n in (1, 100, 4097):
            seed = 90 + n
            t = torch.empty(n, dtype=DT[dt]).bernoulli_(p, generator=gen(seed))
            add({'id': f'bernoulliScalar/{dt}/{p}/{n}', 'op': 'bernoulliScalar', 'dtype': dt, 'n': n,
                 'seed': seed, 'p': p}, t)

# bernoulli(probs)
for dt in ('float32', 'float64', 'bfloat16'):
    for n in (7, 100, 256):
        probs = torch.rand(n, generator=gen(300 + n)).to(DT[dt])
        probs[::5] = 0
        probs[1::7] = 1
        out = torch.bernoulli(probs, generator=gen(400 + n))
        add({'id': f'bernoulliTensor/{dt}/{n}', 'op': 'bernoulliTensor', 'dtype': dt, 'n': n, 'seed': 400 + n,
             'probs': raw(probs).hex()}, out)

# Tensor.bernoulli_(p) with p of another dtype than self (the p dtype picks the uniform width)
for out_dt, p_dt in [('float64', 'float32'), ('float32', 'float64'), ('int64', 'float32'), ('bool', 'float64')]:
    n = 100
    probs = torch.rand(n, generator=gen(310)).to(DT[p_dt])
    out = torch.empty(n, dtype=DT[out_dt]).bernoulli_(probs, generator=gen(410))
    add({'id': f'bernoulliTensor/{out_dt}<-{p_dt}/{n}', 'op': 'bernoulliTensor', 'dtype': out_dt, 'probDtype': p_dt,
         'n': n, 'seed': 410, 'probs': raw(probs).hex()}, out)

# multinomial
for pdt in ('float32', 'float64'):
    for rows in (1, 3):
        for k in (5, 12, 100):
            probs = torch.rand(rows, k, generator=gen(rows * 1000 + k)).to(DT[pdt])
            probs[:, ::4] = 0
            nz = int((probs[0] > 0).sum())
            for ns, repl in [(1, False), (1, True), (3, False), (nz, False), (20, True), (k * 3, True)]:
                seed = 5 * k + ns + rows
                p_in = probs if rows > 1 else probs[0]
                out = torch.multinomial(p_in, ns, repl, generator=gen(seed))
                add({'id': f'multinomial/{pdt}/{rows}x{k}/{ns}/{repl}', 'op': 'multinomial', 'probDtype': pdt,
                     'rows': rows, 'k': k, 'numSamples': ns, 'replacement': repl, 'seed': seed,
                     'probs': ref(p_in), 'torch113': True}, out)

# multinomial without replacement drawing zero-probability categories: ties in topk, ordered by
# libstdc++'s partial_sort / nth_element / sort as PyTorch's TopKImpl calls them
for k in (5, 40, 300):
    for rows in (1, 2):
        g = gen(9000 + k + rows)
        probs = torch.zeros(rows, k)
        for r in range(rows):
            nz = 1 + r
            probs[r, torch.randperm(k, generator=g)[:nz]] = torch.rand(nz, generator=g) + 0.1
        for ns in (3, 4, k):
            seed = 9100 + ns + k
            p_in = probs if rows > 1 else probs[0]
            out = torch.multinomial(p_in, ns, False, generator=gen(seed))
            add({'id': f'multinomial/ties/{rows}x{k}/{ns}', 'op': 'multinomial', 'probDtype': 'float32', 'rows': rows,
                 'k': k, 'numSamples': ns, 'replacement': False, 'seed': seed, 'probs': ref(p_in),
                 'torch113': True}, out)

# dropout
for dt in ('float32', 'float64'):
    for p in (0.1, 0.5, 0.9):
        for n in (10, 300):
            x = torch.randn(n, generator=gen(700 + n)).to(DT[dt])
            torch.manual_seed(800 + n)
            out = torch.nn.functional.dropout(x, p, training=True)
            add({'id': f'dropout/{dt}/{p}/{n}', 'op': 'dropout', 'dtype': dt, 'n': n, 'seed': 800 + n, 'p': p,
                 'input': raw(x).hex()}, out)

# generator state: torch.Generator.get_state bytes after some draws (including a cached normal)
states = []
for seed, draws in [(0, []), (1, ['randn64:1']), (2, ['randn32:3']), (3, ['rand32:1000']),
                    (4, ['randn64:1', 'randn64:1']), (2 ** 63 + 11, ['rand64:5', 'randn32:20'])]:
    g = gen(seed)
    for d in draws:
        kind, n = d.split(':')
        {'randn64': lambda n: torch.randn(n, dtype=torch.float64, generator=g),
         'randn32': lambda n: torch.randn(n, generator=g),
         'rand32': lambda n: torch.rand(n, generator=g),
         'rand64': lambda n: torch.rand(n, dtype=torch.float64, generator=g)}[kind](int(n))
    st = g.get_state().numpy().tobytes()
    after = torch.randn(5, dtype=torch.float64, generator=g)
    entry = {'seed': seed, 'draws': draws, 'state_sha256': hashlib.sha256(st).hexdigest(),
             'after_randn64_5': raw(after).hex()}
    if seed in (1, 2 ** 63 + 11):  # full bytes for the set_state test (one with a cached normal)
        entry['state'] = st.hex()
    states.append(entry)
default_state = hashlib.sha256(torch.Generator().get_state().numpy().tobytes()).hexdigest()

# a sequence of draws on one generator (the cached double normal carries between calls)
g = gen(2024)
seq = []
for step in [('randn', 'float64', 1), ('randn', 'float64', 1), ('randn', 'float64', 3), ('randn', 'float32', 3),
             ('rand', 'float32', 5), ('randn', 'float32', 20), ('randint', 'int64', 7), ('randn', 'float64', 17),
             ('randn', 'float32', 1), ('randperm', 'int64', 9), ('rand', 'float64', 3)]:
    op, dt, n = step
    if op == 'randn':
        t = torch.randn(n, dtype=DT[dt], generator=g)
    elif op == 'rand':
        t = torch.rand(n, dtype=DT[dt], generator=g)
    elif op == 'randint':
        t = torch.randint(-1000, 1000, (n,), generator=g)
    else:
        t = torch.randperm(n, generator=g)
    seq.append({'op': op, 'dtype': dt, 'n': n, 'out': raw(t).hex()})

# the global default generator
torch.manual_seed(123)
glob = raw(torch.randn(40)).hex()

json.dump({
    'torch': torch.__version__,
    'cases': cases,
    'inputs': inputs,
    'states': states,
    'default_state_sha256': default_state,
    'sequence': {'seed': 2024, 'steps': seq},
    'global': {'seed': 123, 'randn40': glob},
}, sys.stdout, separators=(',', ':'))
