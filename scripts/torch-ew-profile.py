# What PyTorch launches for the benchmark's contiguous adds (issue #7 diagnostics): kernel name, grid,
# block and registers from torch.profiler, and event-timed best-of-3 times of add (out=), copy_ and
# add without out=, for float32 and bfloat16 at 1 GiB per operand pair.  python3 scripts/torch-ew-profile.py OUTDIR
import json, os, sys, torch
out = sys.argv[1] if len(sys.argv) > 1 else '/tmp'
dev = 'cuda'
def t(fn, n=20):
    best = 1e9
    for _ in range(3):
        fn(); torch.cuda.synchronize()
        e0 = torch.cuda.Event(enable_timing=True); e1 = torch.cuda.Event(enable_timing=True)
        e0.record()
        for _ in range(n): fn()
        e1.record(); e1.synchronize()
        best = min(best, e0.elapsed_time(e1) / n)
    return best
G = 1 << 30
for dt, name in ((torch.float32, 'f32'), (torch.bfloat16, 'bf16'), (torch.float16, 'f16')):
    n = G // (2 * dt.itemsize)
    a = torch.randn(n, device=dev, dtype=dt); b = torch.randn(n, device=dev, dtype=dt); o = torch.empty_like(a)
    for label, fn in (('add out=', lambda: torch.add(a, b, out=o)), ('add', lambda: torch.add(a, b)), ('copy_', lambda: o.copy_(a)), ('mul 2', lambda: torch.mul(a, 2))):
        ms = t(fn)
        moved = (3 if label.startswith('add') else 2) * n * dt.itemsize
        print(f'{name:5} {label:9} {ms:.4f} ms  {moved / ms / 1e6:.1f} GB/s', flush=True)
    path = os.path.join(out, f'trace-{name}.json')
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
        torch.add(a, b, out=o); torch.cuda.synchronize()
    prof.export_chrome_trace(path)
    for ev in json.load(open(path))['traceEvents']:
        if ev.get('cat') == 'kernel':
            args = ev.get('args', {})
            print(f"  {name} kernel {ev['name'][:160]}\n    grid {args.get('grid')} block {args.get('block')} regs {args.get('registers per thread')} dur {ev.get('dur')} us")
    del a, b, o

# float32 x @ w at m = 1 (the small-M row without a target): which kernel PyTorch's cuBLAS call runs
xf = torch.randn(1, 4096, device=dev); wf = torch.randn(4096, 4096, device=dev)
print(f'f32 x@w m=1: {t(lambda: xf @ wf, 200) * 1e3:.2f} us (events, best of 3 x 200)')
path = os.path.join(out, 'trace-gemv.json')
with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
    xf @ wf; torch.cuda.synchronize()
prof.export_chrome_trace(path)
for ev in json.load(open(path))['traceEvents']:
    if ev.get('cat') == 'kernel':
        args = ev.get('args', {})
        print(f"  gemv kernel {ev['name'][:160]}\n    grid {args.get('grid')} block {args.get('block')} regs {args.get('registers per thread')} dur {ev.get('dur')} us")
