# float32 x @ w at m = 1 (issue #7 diagnostics): PyTorch's device time per call back to back (CUDA events
# around 200 calls, best of 3) on the default stream and on a side stream, against its wall clock, to
# compare with ours (diag-percall --gemv: 19.2 us per call through the same cuBLAS SGEMM).
import time, torch
dev = 'cuda'
xf = torch.randn(1, 4096, device=dev); wf = torch.randn(4096, 4096, device=dev)
def ev(fn, n=200):
    best = 1e9
    for _ in range(3):
        fn(); torch.cuda.synchronize()
        e0 = torch.cuda.Event(enable_timing=True); e1 = torch.cuda.Event(enable_timing=True)
        e0.record()
        for _ in range(n): fn()
        e1.record(); e1.synchronize()
        best = min(best, e0.elapsed_time(e1) / n * 1e3)
    return best
def wall(fn, n=200):
    best = 1e9
    for _ in range(3):
        fn(); torch.cuda.synchronize(); t0 = time.perf_counter()
        for _ in range(n): fn()
        torch.cuda.synchronize(); best = min(best, (time.perf_counter() - t0) / n * 1e6)
    return best
o = torch.empty(1, 4096, device=dev)
print(f'default stream: x@w events {ev(lambda: xf @ wf):.2f} us, wall {wall(lambda: xf @ wf):.2f} us; mm(out=) events {ev(lambda: torch.mm(xf, wf, out=o)):.2f} us')
s = torch.cuda.Stream()
with torch.cuda.stream(s):
    print(f'side stream:    x@w events {ev(lambda: xf @ wf):.2f} us, wall {wall(lambda: xf @ wf):.2f} us')
w2 = torch.randn(4096, 4096, device=dev)
print(f'a second weight: x@w events {ev(lambda: xf @ w2):.2f} us; alternating two weights {ev(lambda: (xf @ wf, xf @ w2)) / 2:.2f} us per call')
