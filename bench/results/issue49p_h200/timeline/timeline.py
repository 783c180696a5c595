"""Issue 49 item 5: where a cold first (filtered) result's time goes, on the Python side.

One process per run (an empty cache given by the caller): the PY_TTFR script of
bench/toolchain_bench.py with time stamps (ms after `import udf`) of the early CUDA start, each
compile, the on-demand link's creation, the build and the search; UDF_PROFILE_LINK adds the
runtime's link spans (ms after the module's creation) on standard error.
    timeline.py metric|filter|builtin+filter [--no-device-info]
"""
import json, os, sys, time
import numpy as np

udfs = sys.argv[1]
device_info = "--no-device-info" not in sys.argv
rng = np.random.default_rng(0)
data = rng.standard_normal((100_000, 64), dtype=np.float32)
queries = rng.standard_normal((1, 64), dtype=np.float32)
weights = np.linspace(0.5, 2.0, 64, dtype=np.float32)
t0 = time.perf_counter()
import udf
import udf._udf, udf._artifact, udf._cuda
t1 = time.perf_counter()
ms = lambda t: round((t - t1) * 1e3, 1)
events = []

def wrap(owner, name, label):
    orig = getattr(owner, name)
    def f(*a, **k):
        s = time.perf_counter()
        try:
            return orig(*a, **k)
        finally:
            who = getattr(a[0], "symbol", "") if a else ""
            events.append((label + (f" {who}" if isinstance(who, str) and who else ""), ms(s), ms(time.perf_counter())))
    setattr(owner, name, f)

wrap(udf._udf.Udf, "compile", "compile")
wrap(udf._artifact, "_link_on_demand", "link_ex (module created)")

@udf.metric(captures={"weights": weights}, monotone=True)
def weighted_l2(x, y, acc, ctx):
    d = x - y
    return acc + ctx.weights[ctx.dim] * d * d

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
if device_info:
    udf.device_info()
tr = time.perf_counter()
index = udf.Index.build(metric, data, n_lists=256, filters=filters)
t3 = time.perf_counter()
dist, ids = index.search(queries, k=10, n_probes=32, **fkw)
assert ids.shape == (1, 10) and (ids >= 0).all()
if filters:
    assert (ids % 16 == 3).all(), ids
t4 = time.perf_counter()
s = udf._cuda.early_start()
early = {"begun": ms(s.begun), "arch_at": ms(s.arch_at) if s.arch_at else None, "ended": ms(s.ended) if s.ended else None} if s else None
print(json.dumps({"udfs": udfs, "device_info": device_info, "import_ms": round((t1 - t0) * 1e3, 1), "decorated": ms(t2),
                  "runtime": ms(tr), "built": ms(t3), "first_result": ms(t4), "early_start": early, "events": events}))
