"""docs/bring-your-index.md: cuVS CAGRA proposes 64 candidates a query under L2, a Python
weighted-L2 UDF re-ranks them (udf.refine), and udf.exact_search gives the exact answer under
the same UDF to measure what the candidates miss.  Needs a GPU, CuPy and cuVS (cuvs-cu13):

    python3 examples/python/refine_cagra.py
"""
import cupy as cp
import numpy as np
from cuvs.neighbors import cagra

import udf

rng = np.random.default_rng(0)
vectors = rng.normal(size=(20000, 64)).astype(np.float32)
queries = rng.normal(size=(100, 64)).astype(np.float32)
weights = rng.uniform(0.5, 2.0, 64).astype(np.float32)
dataset = cp.asarray(vectors, dtype=cp.float32)
index = cagra.build(cagra.IndexParams(), dataset)
_, candidates = cagra.search(cagra.SearchParams(), index, cp.asarray(queries), 64)

@udf.metric(captures={"w": weights})
def weighted_l2(x, y, acc, ctx):
    d = x - y
    return acc + ctx.w[ctx.dim] * d * d

dist, ids = udf.refine(weighted_l2, dataset, cp.asarray(queries), cp.asarray(candidates).astype(cp.int64), k=10)
_, exact = udf.exact_search(weighted_l2, dataset, cp.asarray(queries), k=10)
ids, exact = cp.asnumpy(ids), cp.asnumpy(exact)
recall = np.mean([len(set(a) & set(b)) / 10 for a, b in zip(ids, exact)])
# every refined id is one of its query's candidates, ordered by the weighted distance
cand = cp.asnumpy(candidates).astype(np.int64)
assert all(set(i) <= set(c) for i, c in zip(ids, cand))
ref = ((vectors[ids] - queries[:, None, :]) ** 2 * weights).sum(-1)
assert np.all(np.diff(ref, axis=1) >= -1e-3 * np.abs(ref[:, 1:]))
print(f"CAGRA top-64 re-ranked by the UDF: recall@10 against udf.exact_search {recall:.3f}")
