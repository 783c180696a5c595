"""Where a udf.refine call's wall time goes (batch 10k x 256 candidates x 128, weighted L2):
wrapper (Python before the extension call), the extension call, and inside it the GPU kernels
(torch.profiler / CUPTI timestamps against record_function ranges)."""
import cProfile, pstats, io, json, os, statistics, sys, time
from pathlib import Path
import torch
import udf
from udf import _exact

OUT = Path(os.environ.get("OUT", "/tmp/out"))
dev = torch.device("cuda:0")
g = torch.Generator(device=dev).manual_seed(1234)
n, dim, m = 1_000_000, 128, 256
x = torch.randn(n, dim, device=dev, generator=g)
w = torch.rand(dim, device=dev, generator=g) * 1.5 + 0.5
wl2 = udf.cuda_source_metric(Path("examples/weighted_l2.cu"), flags=["--flags-from-first-line"])

# The extension call, timed from inside the wrapper.
ext_t = []
real_dm = _exact._device_module
class Timed:
    def __init__(self, e): self.e = e
    def __getattr__(self, a): return getattr(self.e, a)
    def exact_search(self, *a, **k):
        t = time.perf_counter(); r = self.e.exact_search(*a, **k); ext_t.append(time.perf_counter() - t); return r
def dm(*a, **k):
    mod, e, items = real_dm(*a, **k)
    return mod, Timed(e), items
_exact._device_module = dm

def batchdata(b, reps):
    return ([torch.randn(b, dim, device=dev, generator=g) for _ in range(reps)],
            [torch.randint(0, n, (b, m), device=dev, generator=g) for _ in range(reps)])

lines = []
def say(s):
    print(s, flush=True); lines.append(s)

for b in (10000, 100):
    reps = 30
    qs, cs = batchdata(b, reps + 3)
    for i in range(3):
        udf.refine(wl2, x, qs[i], cs[i], 10, captures={"weights": w})
    torch.cuda.synchronize()
    ext_t.clear()
    wall = []
    for i in range(3, reps + 3):
        torch.cuda.synchronize()
        t = time.perf_counter()
        udf.refine(wl2, x, qs[i], cs[i], 10, captures={"weights": w})
        torch.cuda.synchronize()
        wall.append(time.perf_counter() - t)
    med = statistics.median(wall) * 1e3
    exm = statistics.median(ext_t) * 1e3
    say(f"batch {b}: wall median {med:.3f} ms (min {min(wall)*1e3:.3f}); ext call median {exm:.3f} ms; wrapper {med-exm:.3f} ms")
    # GPU timeline of 5 calls
    from torch.profiler import profile, ProfilerActivity, record_function
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        for i in range(5):
            torch.cuda.synchronize()
            with record_function(f"call{i}"):
                udf.refine(wl2, x, qs[i], cs[i], 10, captures={"weights": w})
            torch.cuda.synchronize()
    prof.export_chrome_trace(str(OUT / f"refine_trace_b{b}.json"))
    ev = prof.events()
    calls = sorted([e for e in ev if e.name.startswith("call")], key=lambda e: e.time_range.start)
    gpu = sorted([e for e in ev if e.device_type.name == "CUDA"], key=lambda e: e.time_range.start)
    for c in calls:
        s, e = c.time_range.start, c.time_range.end
        ks = [k for k in gpu if s <= k.time_range.start <= e + 5000]
        if not ks:
            say(f"  {c.name}: {(e-s)/1e3:.3f} ms, no GPU events"); continue
        desc = ", ".join(f"{k.name[:28]}@{(k.time_range.start-s)/1e3:.3f}+{(k.time_range.end-k.time_range.start)/1e3:.3f}" for k in ks)
        say(f"  {c.name}: {(e-s)/1e3:.3f} ms; first GPU op at {(ks[0].time_range.start-s)/1e3:.3f}, last ends {(ks[-1].time_range.end-s)/1e3:.3f}; {desc}")
    # Python profile of the wrapper (batch 100 only)
    if b == 100:
        pr = cProfile.Profile()
        pr.enable()
        for i in range(3, reps + 3):
            udf.refine(wl2, x, qs[i], cs[i], 10, captures={"weights": w})
        pr.disable()
        torch.cuda.synchronize()
        sio = io.StringIO()
        pstats.Stats(pr, stream=sio).sort_stats("tottime").print_stats(35)
        say(sio.getvalue())
        sio = io.StringIO()
        pstats.Stats(pr, stream=sio).sort_stats("cumulative").print_stats(45)
        say(sio.getvalue())
(OUT / "refine_profile.txt").write_text("\n".join(lines) + "\n")
