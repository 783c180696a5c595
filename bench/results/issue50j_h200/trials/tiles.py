# Exact search at large batches over the number of dataset tiles (UDF_EXP_TILES, experiment only):
# median ms of 5 calls each, the tile counts interleaved rep by rep; results checked equal across them.
import json, os, statistics, subprocess, sys
from pathlib import Path
import torch, udf
ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))
import exact_bench as eb
label = sys.argv[1]
tiles = [int(t) for t in sys.argv[2].split(",")]
batches = [int(b) for b in sys.argv[3].split(",")]
dev = torch.device("cuda:0")
gen = torch.Generator(device=dev).manual_seed(1234)
x = torch.randn(1_000_000, 128, device=dev, generator=gen)
w = torch.rand(128, device=dev, generator=gen) * 1.5 + 0.5
props = torch.cuda.get_device_properties(0)
clock = eb.sm_clock_hz()
rate = props.multi_processor_count * 128 * clock
ms = {"wl2": udf.cuda_source_metric(ROOT / "examples" / "weighted_l2.cu", flags=["--flags-from-first-line"]),
      "l1": udf.cuda_source_metric(eb.L1_SRC), "cheb": udf.cuda_source_metric(eb.CHEBYSHEV_SRC)}
ops = {"wl2": 3, "l1": 2, "cheb": 2}
def run(name, q):
    return udf.exact_search(ms[name], x, q, 10, captures={"weights": w} if name == "wl2" else None)
def settiles(t):
    if t == 0: os.environ.pop("UDF_EXP_TILES", None)
    else: os.environ["UDF_EXP_TILES"] = str(t)
bad = 0
for batch in batches:
    qs = [torch.randn(batch, 128, device=dev, generator=gen) for _ in range(6)]
    for name in ms:
        # equality across tile counts
        settiles(0); d0, i0 = run(name, qs[0])
        for t in tiles:
            settiles(t); d1, i1 = run(name, qs[0])
            if not (torch.equal(d0, d1) and torch.equal(i0, i1)):
                nd = (d0 != d1).sum().item(); ni = (i0 != i1).sum().item()
                print(f"DIFF {name} batch {batch} tiles {t}: {nd} dists, {ni} ids differ", flush=True); bad += 1
        times = {t: [] for t in tiles}
        for r in range(1, 6):
            for t in tiles:
                settiles(t); torch.cuda.synchronize()
                s = torch.cuda.Event(enable_timing=True); e = torch.cuda.Event(enable_timing=True)
                s.record(); run(name, qs[r]); e.record(); torch.cuda.synchronize()
                times[t].append(s.elapsed_time(e))
        for t in tiles:
            m = statistics.median(times[t])
            share = batch * 1e6 * 128 * ops[name] / (m * 1e-3 * rate)
            print(json.dumps({"label": label, "metric": name, "batch": batch, "tiles": t, "ms": round(m, 3),
                              "min": round(min(times[t]), 3), "max": round(max(times[t]), 3), "share": round(share, 4)}), flush=True)
settiles(0)
if "--profile" in sys.argv:
    q = torch.randn(10000, 128, device=dev, generator=gen)
    for t in tiles:
        settiles(t)
        eb.kernel_table(lambda: run("wl2", q), torch, f"wl2 batch 10000 tiles {t}")
print("tiles check:", "FAIL" if bad else "all equal", bad)
