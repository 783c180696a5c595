from pathlib import Path
import torch, udf
dev = torch.device("cuda:0")
g = torch.Generator(device=dev).manual_seed(1)
n, dim, b, m = 1_000_000, 128, 10000, 256
x = torch.randn(n, dim, device=dev, generator=g)
w = torch.rand(dim, device=dev, generator=g) + 0.5
wl2 = udf.cuda_source_metric(Path("examples/weighted_l2.cu"), flags=["--flags-from-first-line"])
q = torch.randn(b, dim, device=dev, generator=g); c = torch.randint(0, n, (b, m), device=dev, generator=g)
for _ in range(3): udf.refine(wl2, x, q, c, 10, captures={"weights": w})
torch.cuda.synchronize()
