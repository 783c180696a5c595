# Refine at batch 10k x 256 x 128 (weighted L2, PyTorch tensors): 100 timed calls (wall, synchronized),
# median / p10 / p90, against one read of the candidates' vectors at this run's copy bandwidth.
import os, sys, time
from pathlib import Path
import torch, udf
dev = torch.device("cuda:0")
g = torch.Generator(device=dev).manual_seed(1)
n, dim, b, m = 1_000_000, 128, 10000, 256
x = torch.randn(n, dim, device=dev, generator=g)
w = torch.rand(dim, device=dev, generator=g) + 0.5
wl2 = udf.cuda_source_metric(Path("examples/weighted_l2.cu"), flags=["--flags-from-first-line"])
q = torch.randn(b, dim, device=dev, generator=g)
c = torch.randint(0, n, (b, m), device=dev, generator=g)
for _ in range(5): udf.refine(wl2, x, q, c, 10, captures={"weights": w})
torch.cuda.synchronize()
ts = []
for _ in range(100):
    t = time.perf_counter(); udf.refine(wl2, x, q, c, 10, captures={"weights": w}); torch.cuda.synchronize()
    ts.append(time.perf_counter() - t)
src = torch.empty(b * m * dim, device=dev); dst = torch.empty_like(src)
for _ in range(3): dst.copy_(src)
torch.cuda.synchronize()
e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
bw = []
for _ in range(10):
    e0.record(); dst.copy_(src); e1.record(); e1.synchronize(); bw.append(2 * src.numel() * 4 / (e0.elapsed_time(e1) / 1e3))
bw = sorted(bw)[5]
read_ms = src.numel() * 4 / bw * 1e3
ts = sorted(t * 1e3 for t in ts)
med, p10, p90 = ts[50], ts[10], ts[90]
print(f"{sys.argv[1]}: refine 10k median {med:.3f} ms p10 {p10:.3f} p90 {p90:.3f} min {ts[0]:.3f}; one read {read_ms:.3f} ms at {bw/1e12:.2f} TB/s; "
      f"ratio {med/read_ms:.2f}x ({p10/read_ms:.2f}-{p90/read_ms:.2f}x)", flush=True)
