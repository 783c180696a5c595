"""One side of the binding A/B (c04dfd3's queue of dropped handles): Python search latency through
udf._ext, 1M x 128 overlap data, built-in L2, P32, k 10.  Prints one JSON line (medians, ms)."""
import json, os, sys, time
import numpy as np, cupy as cp
import udf

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "../.."))
import cuvs_compare as cc  # noqa: E402

centres = cc.make_centres(cp, 1024, 128, 49)
X = cc.draw(cp, centres, 1_000_000, 0.92, 50)
sync = cp.cuda.Device().synchronize
t = time.perf_counter(); ix = udf.Index.build(udf.builtin_metric("sqeuclidean"), X, n_lists=1024); sync()
build = time.perf_counter() - t
out = {"side": sys.argv[1], "build_ms": build * 1e3}
for name, b, reps, host in (("b1_cupy", 1, 2000, False), ("b1_numpy", 1, 2000, True), ("b100_cupy", 100, 300, False),
                            ("b10k_cupy", 10000, 30, False)):
    qs = cc.draw(cp, centres, b * (reps + 10), 0.92, 60 + b).reshape(reps + 10, b, 128)
    if host:
        qs = cp.asnumpy(qs)
    ts = []
    for i in range(reps + 10):
        sync(); t = time.perf_counter()
        d, ids = ix.search(qs[i], k=10, n_probes=32)
        sync(); ts.append(time.perf_counter() - t)
    out[name] = float(np.median(ts[10:]) * 1e3)
print(json.dumps(out), flush=True)
