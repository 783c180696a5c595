
import json, os, sys, time
import numpy as np
rng = np.random.default_rng(0)
data = rng.standard_normal((100_000, 64), dtype=np.float32)
queries = rng.standard_normal((1, 64), dtype=np.float32)
weights = np.linspace(0.5, 2.0, 64, dtype=np.float32)
t0 = time.perf_counter()
import udf
t1 = time.perf_counter()

@udf.metric(captures={"weights": weights}, monotone=True, backend=os.environ.get("UDF_BENCH_BACKEND", "auto"))
def weighted_l2(x, y, acc, ctx):
    d = x - y
    return acc + ctx.weights[ctx.dim] * d * d

udfs = os.environ.get("UDF_BENCH_UDFS", "metric")
metric, filters, fkw = weighted_l2, [], {}
if udfs != "metric":
    tenants = (np.arange(data.shape[0]) % 16).astype(np.int32)

    @udf.filter(captures={"tenants": tenants, "t": 3})
    def same_tenant(query, id, ctx):
        return ctx.tenants[id] == ctx.t

    filters, fkw = [same_tenant], {"filter": same_tenant}
    if udfs == "builtin+filter":
        metric = udf.builtin_metric("l2")
t2 = time.perf_counter()
if os.environ.get("UDF_BENCH_DEVICE") == "1":
    udf.device_info()  # the CUDA driver and the runtime (Index.build would start them)
    tr = time.perf_counter()
    index = udf.Index.build(metric, data, n_lists=256, filters=filters)
    t3 = time.perf_counter()
    dist, ids = index.search(queries, k=10, n_probes=32, **fkw)
    assert ids.shape == (1, 10) and (ids >= 0).all()
    if filters:
        assert (ids % 16 == 3).all(), ids
else:
    tr = t2
    arts = ([metric.compile(archs=[90])] if hasattr(metric, "compile") else [metric]) + [f.compile(archs=[90]) for f in filters]
    t3 = time.perf_counter()
    mod = udf.link(arts, archs=[90], max_k=32)
    assert len(mod.data) > 0
t4 = time.perf_counter()
print(json.dumps({"backend": weighted_l2.backend, "filter_backend": filters[0].backend if filters else None,
                  "import_s": t1 - t0, "decorate_s": t2 - t1, "runtime_s": tr - t2, "build_s": t3 - tr,
                  "search_s": t4 - t3, "first_result_s": t4 - t1}))
