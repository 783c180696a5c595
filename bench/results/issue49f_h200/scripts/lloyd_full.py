"""Does a Lloyd step over all 10M rows (not the 1M sample) lift recall@10 at P32? Two-level
build, then centroids = means of every row's nearest centroid, rebuilt from those centroids."""
import sys, time, json
sys.path.insert(0, "bench")
import numpy as np, cupy as cp
import cuvs_compare as cc
import udf
rows, lists, dim = 10_000_000, 4096, 128
seed = 49 * 1000 + rows % 997
centres = cc.make_centres(cp, 1024, dim, 49)
X = cc.draw(cp, centres, rows, 0.92, seed + 1)
q = cc.draw(cp, centres, 1000, 0.92, seed + 2)
truth = cp.asnumpy(cc.exact_topk(cp, X, q, 10)[0])
cp.get_default_memory_pool().free_all_blocks()
l2 = udf.builtin_metric("sqeuclidean")
def recall(ix):
    return {p: cc.recall_at_k(cp.asnumpy(ix.search(q, k=10, n_probes=p)[1]), truth) for p in (16, 32)}
def full_means(C):
    import cupyx
    C = cp.asarray(C, dtype=cp.float32); cn = (C * C).sum(1)
    S = cp.zeros_like(C); cnt = cp.zeros(len(C), dtype=cp.float32)
    for s in range(0, rows, 1 << 17):
        x = X[s:s + (1 << 17)]
        lab = (cn[None, :] - 2 * (x @ C.T)).argmin(1)
        cupyx.scatter_add(S, lab, x)
        cnt += cp.bincount(lab, minlength=len(C)).astype(cp.float32)
    return cp.asnumpy(S / cp.maximum(cnt, 1)[:, None])
ix = udf.Index.build(l2, X[:100000], n_lists=256)
t = time.perf_counter(); ix = udf.Index.build(l2, X, n_lists=lists, kmeans_mesoclusters=64); cp.cuda.Device().synchronize()
print("two-level", round(time.perf_counter() - t, 2), recall(ix), flush=True)
C = ix.centroids()
for it in range(2):
    t = time.perf_counter(); C = full_means(C); cp.cuda.Device().synchronize(); tm = time.perf_counter() - t
    ix2 = udf.Index.build(l2, X, n_lists=lists, centroids=C)
    print(f"after {it+1} full-data Lloyd step(s) (means {tm:.2f} s):", recall(ix2), flush=True)
ix = udf.Index.build(l2, X, n_lists=lists)
print("flat", recall(ix), flush=True)
C = ix.centroids()
C = full_means(C)
print("flat + 1 full step:", recall(udf.Index.build(l2, X, n_lists=lists, centroids=C)), flush=True)
