# Exact search with the experimental tiled launch (UDF_EXP_TILED_LAUNCH) off / on, interleaved rep by rep;
# results checked equal between them at every batch.
import json, os, statistics, sys
from pathlib import Path
import torch, udf
ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))
import exact_bench as eb
label = sys.argv[1]
modes = [int(t) for t in sys.argv[2].split(",")]
batches = [int(b) for b in sys.argv[3].split(",")]
timed_batches = {int(b) for b in sys.argv[4].split(",")} if len(sys.argv) > 4 else set(batches)
dev = torch.device("cuda:0")
gen = torch.Generator(device=dev).manual_seed(1234)
x = torch.randn(1_000_000, 128, device=dev, generator=gen)
w = torch.rand(128, device=dev, generator=gen) * 1.5 + 0.5
props = torch.cuda.get_device_properties(0)
rate = props.multi_processor_count * 128 * eb.sm_clock_hz()
ms = {"wl2": udf.cuda_source_metric(ROOT / "examples" / "weighted_l2.cu", flags=["--flags-from-first-line"]),
      "l1": udf.cuda_source_metric(eb.L1_SRC), "cheb": udf.cuda_source_metric(eb.CHEBYSHEV_SRC)}
ops = {"wl2": 3, "l1": 2, "cheb": 2}
def run(name, q, k=10):
    return udf.exact_search(ms[name], x, q, k, captures={"weights": w} if name == "wl2" else None)
def setmode(t):
    if t == 0: os.environ.pop("UDF_EXP_TILED_LAUNCH", None)
    else: os.environ["UDF_EXP_TILED_LAUNCH"] = "1"
bad = 0
for batch in batches:
    qs = [torch.randn(batch, 128, device=dev, generator=gen) for _ in range(6)]
    for name in ms:
        for k in (1, 10, 32):
            setmode(0); d0, i0 = run(name, qs[0], k)
            for t in modes:
                setmode(t); d1, i1 = run(name, qs[0], k)
                if not (torch.equal(d0, d1) and torch.equal(i0, i1)):
                    print(f"DIFF {name} batch {batch} k {k} mode {t}: {(d0 != d1).sum().item()} dists, {(i0 != i1).sum().item()} ids", flush=True); bad += 1
        if batch not in timed_batches: continue
        times = {t: [] for t in modes}
        for r in range(1, 6):
            for t in modes:
                setmode(t); torch.cuda.synchronize()
                s = torch.cuda.Event(enable_timing=True); e = torch.cuda.Event(enable_timing=True)
                s.record(); run(name, qs[r]); e.record(); torch.cuda.synchronize()
                times[t].append(s.elapsed_time(e))
        for t in modes:
            m = statistics.median(times[t])
            share = batch * 1e6 * 128 * ops[name] / (m * 1e-3 * rate)
            print(json.dumps({"label": label, "metric": name, "batch": batch, "mode": t, "ms": round(m, 3),
                              "min": round(min(times[t]), 3), "max": round(max(times[t]), 3), "share": round(share, 4)}), flush=True)
setmode(0)
print("equal check:", "FAIL" if bad else "all equal", bad)
