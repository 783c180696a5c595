# One weighted-L2 exact search of BATCH queries over 1M x 128 (for ncu): a warm-up call, then the profiled one.
import os, sys
from pathlib import Path
import torch, udf
ROOT = Path(__file__).resolve().parents[2]
batch = int(os.environ.get("BATCH", "2000"))
g = torch.Generator(device="cuda").manual_seed(1234)
x = torch.randn(1_000_000, 128, device="cuda", generator=g)
w = torch.rand(128, device="cuda", generator=g) * 1.5 + 0.5
wl2 = udf.cuda_source_metric(ROOT / "examples" / "weighted_l2.cu", flags=["--flags-from-first-line"])
for i in range(2):
    q = torch.randn(batch, 128, device="cuda", generator=g)
    d, ids = udf.exact_search(wl2, x, q, 10, captures={"weights": w})
torch.cuda.synchronize()
print("done", ids[0, :3].tolist())
