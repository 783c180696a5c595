"""10M x 128 overlap: udf.Index.build (built-in L2, from CuPy) under k-means settings; build time
and recall@10 at P16/24/32 on 1000 queries (cuvs_compare's data and seeds)."""
import gc, sys, time, json, os
sys.path.insert(0, "bench")
import numpy as np, cupy as cp
import cuvs_compare as cc
import udf

rows, lists, dim = int(os.environ.get("ROWS", 10_000_000)), int(os.environ.get("LISTS", 4096)), 128
seed = 49 * 1000 + rows % 997
centres = cc.make_centres(cp, 1024, dim, 49)
X = cc.draw(cp, centres, rows, 0.92, seed + 1)
q = cc.draw(cp, centres, 1000, 0.92, seed + 2)
truth = cp.asnumpy(cc.exact_topk(cp, X, q, 10)[0])
cp.get_default_memory_pool().free_all_blocks()
l2 = udf.builtin_metric("sqeuclidean")
udf.Index.build(l2, X[:100000], n_lists=256).search(q[:1], k=10, n_probes=1)
configs = json.loads(sys.argv[1])
out = []
for c in configs:
    gc.collect()
    ts = []
    for rep in range(c.pop("reps", 1)):
        cp.cuda.Device().synchronize()
        t = time.perf_counter()
        ix = udf.Index.build(l2, X, n_lists=lists, **c)
        cp.cuda.Device().synchronize()
        ts.append(time.perf_counter() - t)
    rec = {}
    for p in (16, 24, 32):
        _, ids = ix.search(q, k=10, n_probes=p)
        rec[p] = cc.recall_at_k(cp.asnumpy(ids), truth)
    r = {"config": c, "build_s": ts, "recall": rec}
    print(json.dumps(r), flush=True)
    out.append(r)
    del ix
