"""Python-side A/B: udf.refine and Index.search wall times (torch CUDA tensors in and out),
this process's udf package (PYTHONPATH) -- run once with the new .py files, once with the old."""
import json, os, statistics, sys, time
from pathlib import Path
import numpy as np, torch, udf
dev = torch.device("cuda:0"); g = torch.Generator(device=dev).manual_seed(7)
x = torch.randn(1_000_000, 128, device=dev, generator=g); w = torch.rand(128, device=dev, generator=g) + 0.5
wl2 = udf.cuda_source_metric(Path("examples/weighted_l2.cu"), flags=["--flags-from-first-line"])
ix = udf.Index.build(wl2, x, n_lists=1024)
res = {}
def run(name, fn, n, reps):
    args = [fn(i) for i in range(reps + 5)]
    for a in args[:5]: a()
    ts = []
    for a in args[5:]:
        torch.cuda.synchronize(); t = time.perf_counter(); a(); torch.cuda.synchronize(); ts.append((time.perf_counter() - t) * 1e3)
    res[name] = [statistics.median(ts), float(np.percentile(ts, 10)), float(np.percentile(ts, 90))]
for b, reps in ((100, 200), (10000, 60)):
    qs = [torch.randn(b, 128, device=dev, generator=g) for _ in range(reps + 5)]
    cs = [torch.randint(0, 1_000_000, (b, 256), device=dev, generator=g) for _ in range(reps + 5)]
    run(f"refine b{b}", lambda i: (lambda: udf.refine(wl2, x, qs[i], cs[i], 10, captures={"weights": w})), b, reps)
for b, reps in ((1, 300), (100, 200)):
    qs = [torch.randn(b, 128, device=dev, generator=g) for _ in range(reps + 5)]
    run(f"Index.search b{b} P32", lambda i: (lambda: ix.search(qs[i], k=10, n_probes=32, captures={"weights": w})), b, reps)
print(json.dumps(res))
