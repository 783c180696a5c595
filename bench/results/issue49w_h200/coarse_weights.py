"""udf's weighted-L2 index with and without coarse_weights on cuvs_compare.py's 10M x 128 data
(its seeds, centres, spread and weights; 4096 lists; 10,000 recall queries): recall@10 against
the exact weighted top 10 and the vectors a query scans, at each n_probes.  cuVS's numbers for the
same draws are those of issue49v_h200/cuvs_seed*.json (the same generator and queries).

  python coarse_weights.py --seeds 49,50,51 --json out.json
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from cuvs_compare import draw, exact_topk, make_centres, make_weights, recall_at_k, scanned_per_query  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--seeds", default="49,50,51")
    ap.add_argument("--rows", type=int, default=10_000_000)
    ap.add_argument("--lists", type=int, default=4096)
    ap.add_argument("--probes", default="24,32,40")
    ap.add_argument("--queries", type=int, default=10_000)
    ap.add_argument("--time-reps", type=int, default=0,
                    help="also time each n_probes' search of the recall queries as one batch (median of this many)")
    ap.add_argument("--json", type=Path)
    a = ap.parse_args()
    import cupy as cp
    import udf

    dim, k, spread, clusters = 128, 10, 0.92, 1024
    probes = [int(p) for p in a.probes.split(",")]
    doc = {"rows": a.rows, "lists": a.lists, "queries": a.queries, "udf": udf.__version__, "seeds": []}
    for seed in [int(s) for s in a.seeds.split(",")]:
        t0 = time.perf_counter()
        w_host = make_weights(dim, seed)
        w = cp.asarray(w_host)
        sqrt_w = cp.sqrt(w)

        @udf.metric(order="min", initial=0.0, coarse_metric="l2", monotone=True, captures={"weights": w})
        def weighted_l2(x, y, acc, ctx):
            d = x - y
            return acc + ctx.weights[ctx.dim] * d * d

        s = seed * 1000 + a.rows % 997  # cuvs_compare.py's draws for this size
        centres = make_centres(cp, clusters, dim, seed)
        X = draw(cp, centres, a.rows, spread, s + 1)
        q = draw(cp, centres, a.queries, spread, s + 2)
        qs = q * sqrt_w
        truth_ids, _ = exact_topk(cp, X * sqrt_w, qs, k)
        truth = cp.asnumpy(truth_ids)
        cp.get_default_memory_pool().free_all_blocks()
        rec = {"seed": seed, "truth_s": time.perf_counter() - t0, "systems": {}}
        for name, kw in (("plain coarse", {}), ("coarse_weights=w", {"coarse_weights": w_host})):
            builds = []
            for _ in range(2):
                cp.cuda.Device().synchronize()
                t = time.perf_counter()
                ix = udf.Index.build(weighted_l2, X, n_lists=a.lists, **kw)
                builds.append(time.perf_counter() - t)
            cen, sizes = ix.centroids(), np.asarray(ix.list_sizes())
            probe_q = qs if kw else q
            r = {"build_s": builds, "recall": {}, "scanned": {}, "search_ms": {}}
            for p in probes:
                _, ids = ix.search(q, k=k, n_probes=p)
                r["recall"][p] = recall_at_k(cp.asnumpy(ids), truth)
                r["scanned"][p] = scanned_per_query(cp, cen, sizes, probe_q, p)
                times = []
                for i in range(a.time_reps + 2 if a.time_reps else 0):
                    cp.cuda.Device().synchronize()
                    t = time.perf_counter()
                    ix.search(q, k=k, n_probes=p)
                    cp.cuda.Device().synchronize()
                    if i >= 2:
                        times.append((time.perf_counter() - t) * 1e3)
                if times:
                    r["search_ms"][p] = float(np.median(times))
            rec["systems"][name] = r
            print(f"seed {seed} {name}: build {min(builds):.2f} s; " +
                  ", ".join(f"P{p} {r['recall'][p]:.4f} ({r['scanned'][p]:,.0f} vectors"
                            + (f", {r['search_ms'][p]:.2f} ms" if p in r["search_ms"] else "") + ")" for p in probes),
                  flush=True)
            del ix
            cp.get_default_memory_pool().free_all_blocks()
        doc["seeds"].append(rec)
        del X
        cp.get_default_memory_pool().free_all_blocks()
        if a.json:
            a.json.write_text(json.dumps(doc, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
