import os, statistics, time
from pathlib import Path
import numpy as np, torch, udf
dev = torch.device("cuda:0"); g = torch.Generator(device=dev).manual_seed(1234)
x = torch.randn(1_000_000, 128, device=dev, generator=g); w = torch.rand(128, device=dev, generator=g) * 1.5 + 0.5
wl2 = udf.cuda_source_metric(Path("examples/weighted_l2.cu"), flags=["--flags-from-first-line"])
N = 100
qs = [torch.randn(10000, 128, device=dev, generator=g) for _ in range(N)]
cs = [torch.randint(0, 1_000_000, (10000, 256), device=dev, generator=g) for _ in range(N)]
for i in range(5): udf.refine(wl2, x, qs[i], cs[i], 10, captures={"weights": w})
walls = []
for i in range(N):
    torch.cuda.synchronize(); t = time.perf_counter()
    udf.refine(wl2, x, qs[i], cs[i], 10, captures={"weights": w})
    torch.cuda.synchronize(); walls.append((time.perf_counter() - t) * 1e3)
a = np.array(walls)
print("wall ms: p10 %.3f p50 %.3f p90 %.3f min %.3f max %.3f" % (np.percentile(a,10), np.median(a), np.percentile(a,90), a.min(), a.max()))
print("sequence:", " ".join(f"{v:.2f}" for v in walls))
from torch.profiler import profile, ProfilerActivity
with profile(activities=[ProfilerActivity.CUDA]) as prof:
    for i in range(30):
        udf.refine(wl2, x, qs[i], cs[i], 10, captures={"weights": w})
    torch.cuda.synchronize()
k = [e.device_time_total/1e3 for e in prof.events() if e.device_type.name == "CUDA" and e.name.startswith("udf_ivf_rows_v1")]
c = [e.device_time_total/1e3 for e in prof.events() if e.device_type.name == "CUDA" and "rows_candidates" in e.name]
print("scan kernel ms:", " ".join(f"{v:.3f}" for v in k))
print("candidates kernel ms:", " ".join(f"{v:.3f}" for v in c))
# copy bandwidth, like exact_bench
ts = []
for i in range(10):
    torch.cuda.synchronize(); t = time.perf_counter(); x.clone(); torch.cuda.synchronize(); ts.append(time.perf_counter() - t)
print("copy: median %.3f ms -> read once of 1.31 GB: %.3f ms" % (statistics.median(ts)*1e3, 10000*256*512/(2*x.numel()*4/statistics.median(ts))*1e3))
