import os, statistics, sys, time, json
from pathlib import Path
import torch, udf
dev = torch.device("cuda:0"); g = torch.Generator(device=dev).manual_seed(3)
x = torch.randn(200_000, 128, device=dev, generator=g); w = torch.rand(128, device=dev, generator=g) + 0.5
wl2 = udf.cuda_source_metric(Path("examples/weighted_l2.cu"), flags=["--flags-from-first-line"])
ix = udf.Index.build(wl2, x, n_lists=256)
l2 = udf.Index.build(udf.builtin_metric("sqeuclidean"), x, n_lists=256)
out = {}
for name, index, caps in (("wl2", ix, {"weights": w}), ("l2", l2, None)):
    qs = [torch.randn(1, 128, device=dev, generator=g) for _ in range(400)]
    for i in range(20): index.search(qs[i], k=10, n_probes=32, captures=caps)
    ts = []
    for i in range(400):
        torch.cuda.synchronize(); t = time.perf_counter_ns(); index.search(qs[i], k=10, n_probes=32, captures=caps); torch.cuda.synchronize(); ts.append(time.perf_counter_ns() - t)
    out[name] = round(statistics.median(ts) / 1e3, 1)
print(json.dumps(out))
