"""The refine scan's time against its shape: per-item overhead or bytes?  Kernel times (torch.profiler)
of udf.refine with the built-in-like weighted L2 over (queries, candidates a query, dim), with the
bytes read and the time a gather of the same rows takes (whole 512-byte... rows, 8 in flight a warp)."""
import json, tempfile, statistics
from pathlib import Path
import torch, udf
from torch.profiler import profile, ProfilerActivity
dev = torch.device("cuda:0")
g = torch.Generator(device=dev).manual_seed(1)
wl2 = udf.cuda_source_metric(Path("examples/weighted_l2.cu"), flags=["--flags-from-first-line"])
def kern(fn):
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(5): fn()
        torch.cuda.synchronize()
    f = tempfile.mktemp(suffix=".json"); prof.export_chrome_trace(f)
    ts = {}
    for e in json.load(open(f))["traceEvents"]:
        if e.get("cat") == "kernel":
            ts.setdefault(e["name"][:40], []).append(e["dur"])
    return {k: statistics.median(v) for k, v in ts.items()}
for n, dim, b, m in [(1_000_000, 128, 10000, 256), (1_000_000, 128, 5000, 512), (1_000_000, 128, 2500, 1024),
                     (1_000_000, 128, 20000, 128), (1_000_000, 32, 10000, 256), (250_000, 512, 10000, 256)]:
    x = torch.randn(n, dim, device=dev, generator=g)
    w = torch.rand(dim, device=dev, generator=g) + 0.5
    q = torch.randn(b, dim, device=dev, generator=g); c = torch.randint(0, n, (b, m), device=dev, generator=g)
    fn = lambda: udf.refine(wl2, x, q, c, 10, captures={"weights": w})
    fn(); fn(); torch.cuda.synchronize()
    k = kern(fn)
    scan = [v for kk, v in k.items() if "rows_v1" in kk][0]
    gb = b * m * dim * 4 / 1e9
    # a plain gather of the same rows (torch index_select + sum): reads them once, writes them once
    t = kern(lambda: x.index_select(0, c.view(-1)))
    gat = sum(t.values())
    print(f"n {n} dim {dim} batch {b} x {m}: scan {scan:.1f} us ({gb / scan * 1e6 / 1e3:.2f} TB/s), "
          f"candidates {[round(v,1) for kk, v in k.items() if 'candidates' in kk]}; index_select {gat:.1f} us; items {b}", flush=True)
