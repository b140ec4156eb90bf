# What PyTorch launches and how long it takes, for the issue #7 rows we compare against (diagnostics):
#   python3 scripts/torch-ew-profile.py OUTDIR [--gemv]
# 1. the benchmark's contiguous adds (skipped with --gemv): kernel name, grid, block and registers from
#    torch.profiler, and event-timed best-of-3 times of add (out=), add, copy_ and mul by 2, for float32,
#    bfloat16 and float16 at 1 GiB per operand pair;
# 2. float32 x @ w at m = 1: its kernel, and its device time per call back to back (events around 200
#    calls) on the default stream and on a side stream, and its wall clock (ours: diag-percall --gemv).
import json, os, sys, time, torch
args = [a for a in sys.argv[1:] if not a.startswith('--')]
out = args[0] if args else '/tmp'
dev = 'cuda'

def t(fn, n=20):
    """Milliseconds per call: n calls back to back between CUDA events, best of 3."""
    best = 1e9
    for _ in range(3):
        fn(); torch.cuda.synchronize()
        e0 = torch.cuda.Event(enable_timing=True); e1 = torch.cuda.Event(enable_timing=True)
        e0.record()
        for _ in range(n): fn()
        e1.record(); e1.synchronize()
        best = min(best, e0.elapsed_time(e1) / n)
    return best

def wall(fn, n=200):
    """Microseconds per call by wall clock: n calls and a synchronize, best of 3."""
    best = 1e9
    for _ in range(3):
        fn(); torch.cuda.synchronize(); t0 = time.perf_counter()
        for _ in range(n): fn()
        torch.cuda.synchronize(); best = min(best, (time.perf_counter() - t0) / n * 1e6)
    return best

def kernels(label, fn):
    """The kernels one call of fn launches, from torch.profiler's trace."""
    path = os.path.join(out, f'trace-{label}.json')
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
        fn(); torch.cuda.synchronize()
    prof.export_chrome_trace(path)
    for ev in json.load(open(path))['traceEvents']:
        if ev.get('cat') == 'kernel':
            a = ev.get('args', {})
            print(f"  {label} kernel {ev['name'][:160]}\n    grid {a.get('grid')} block {a.get('block')} regs {a.get('registers per thread')} dur {ev.get('dur')} us")

if '--gemv' not in sys.argv:
    G = 1 << 30
    for dt, name in ((torch.float32, 'f32'), (torch.bfloat16, 'bf16'), (torch.float16, 'f16')):
        n = G // (2 * dt.itemsize)
        a = torch.randn(n, device=dev, dtype=dt); b = torch.randn(n, device=dev, dtype=dt); o = torch.empty_like(a)
        for label, fn in (('add out=', lambda: torch.add(a, b, out=o)), ('add', lambda: torch.add(a, b)), ('copy_', lambda: o.copy_(a)), ('mul 2', lambda: torch.mul(a, 2))):
            ms = t(fn)
            moved = (3 if label.startswith('add') else 2) * n * dt.itemsize
            print(f'{name:5} {label:9} {ms:.4f} ms  {moved / ms / 1e6:.1f} GB/s', flush=True)
        kernels(name, lambda: torch.add(a, b, out=o))
        del a, b, o

xf = torch.randn(1, 4096, device=dev); wf = torch.randn(4096, 4096, device=dev)
us = lambda fn: t(fn, 200) * 1e3
print(f'f32 x@w m=1, default stream: {us(lambda: xf @ wf):.2f} us per call back to back (events), {wall(lambda: xf @ wf):.2f} us by wall clock')
s = torch.cuda.Stream()
with torch.cuda.stream(s):
    print(f'f32 x@w m=1, side stream:    {us(lambda: xf @ wf):.2f} us (events), {wall(lambda: xf @ wf):.2f} us (wall)')
w2 = torch.randn(4096, 4096, device=dev)
print(f'f32 x@w m=1, two weights alternating: {us(lambda: (xf @ wf, xf @ w2)) / 2:.2f} us per call')
kernels('gemv', lambda: xf @ wf)
