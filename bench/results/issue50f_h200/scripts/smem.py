"""The rows scan's launch as CUPTI saw it (torch.profiler's trace): shared memory, registers, occupancy."""
import json, os, sys, tempfile
from pathlib import Path
import torch, udf
from torch.profiler import profile, ProfilerActivity
dev = torch.device("cuda:0")
g = torch.Generator(device=dev).manual_seed(1)
n, dim, m = 1_000_000, 128, 256
x = torch.randn(n, dim, device=dev, generator=g)
w = torch.rand(dim, device=dev, generator=g) + 0.5
wl2 = udf.cuda_source_metric(Path("examples/weighted_l2.cu"), flags=["--flags-from-first-line"])
for b in (10000, 1):
    q = torch.randn(b, dim, device=dev, generator=g); c = torch.randint(0, n, (b, m), device=dev, generator=g)
    for _ in range(3): udf.refine(wl2, x, q, c, 10, captures={"weights": w})
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        udf.refine(wl2, x, q, c, 10, captures={"weights": w}); torch.cuda.synchronize()
        udf.exact_search(wl2, x, q, 10, captures={"weights": w}); torch.cuda.synchronize()
    f = tempfile.mktemp(suffix=".json"); prof.export_chrome_trace(f)
    for e in json.load(open(f))["traceEvents"]:
        if e.get("cat") == "kernel" and "rows_v1" in e.get("name", ""):
            a = e.get("args", {})
            print(b, e["name"][:60], f'{e["dur"]:.1f} us', {k: a.get(k) for k in ("grid", "block", "registers per thread", "shared memory", "blocks per SM", "est. achieved occupancy %")})
