import numpy as np
import udf

dim = 32
weights = np.linspace(0.5, 1.5, dim, dtype=np.float32)


# coarse_weights: the index's lists and probe live in the metric's space (rows scaled by sqrt(w)).
@udf.metric(order="min", coarse_metric="l2", captures={"weights": weights}, coarse_weights="weights")
def weighted_l2(x, y, acc, ctx):
    d = x - y
    return acc + ctx.weights[ctx.dim] * d * d


# Compile for four GPU generations: no GPU needed.  (udf.link links a module the same way.)
print(udf.compile(weighted_l2, archs=["sm_80", "sm_90", "sm_100", "sm_120"]))

try:
    print("GPU:", udf.device_info()["name"])
except udf.UdfRuntimeError as e:
    raise SystemExit(f"no GPU here, so no search: {e}")

# 20,000 vectors and 100 queries around 64 centres, as embeddings cluster.
rng = np.random.default_rng(0)
centres = rng.standard_normal((64, dim), dtype=np.float32)
data = centres[rng.integers(64, size=20_000)] + 0.3 * rng.standard_normal((20_000, dim), dtype=np.float32)
queries = centres[rng.integers(64, size=100)] + 0.3 * rng.standard_normal((100, dim), dtype=np.float32)

# Links for this GPU on first use (cached).
index = udf.Index.build(weighted_l2, data, n_lists=64)
distances, neighbors = index.search(queries, k=10, n_probes=8)

# The exact answer under the same metric, with NumPy, and the recall of the search.
exact = ((data**2) @ weights)[None, :] - 2 * (queries * weights) @ data.T + ((queries**2) @ weights)[:, None]
truth = np.argsort(exact, axis=1)[:, :10]
recall = np.mean([len(set(n) & set(t)) / 10 for n, t in zip(neighbors, truth)])
print(f"recall@10: {recall:.3f}")
