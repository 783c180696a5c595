"""In one process: the search's Python array handling of HEAD ("old": CuPy arrays through DLPack,
CuPy's stream synchronized on the host) against this tree's ("new": raw tuples, the stream
waited for on the GPU), swapped in udf._index by module, alternated blocks of calls.
argv[1]: HEAD's _arrays.py.  1M x 128 overlap data, built-in L2, P32, k 10; medians, us."""
import sys, time, types
import numpy as np, cupy as cp
import udf, udf._index as uix, udf._arrays as new
sys.path.insert(0, __file__.rsplit("/", 3)[0])
import cuvs_compare as cc  # noqa: E402

old = types.ModuleType("udf._arrays_old"); old.__package__ = "udf"; sys.modules[old.__name__] = old
exec(compile(open(sys.argv[1]).read(), sys.argv[1], "exec"), old.__dict__)
centres = cc.make_centres(cp, 1024, 128, 49)
X = cc.draw(cp, centres, 1_000_000, 0.92, 50)
ix = udf.Index.build(udf.builtin_metric("sqeuclidean"), X, n_lists=1024)
sync = cp.cuda.Device().synchronize
Q = cc.draw(cp, centres, 4000, 0.92, 61)
res = {("old", "prep"): [], ("new", "prep"): [], ("old", "search"): [], ("new", "search"): [],
       ("old", "b100"): [], ("new", "b100"): []}
Q100 = cc.draw(cp, centres, 100 * 50, 0.92, 62).reshape(50, 100, 128)
for i in range(4):
    ix.search(Q[i:i + 1], k=10, n_probes=32)
sync()
for block in range(8):
    for side, mod in (("old", old), ("new", new)) if block % 2 == 0 else (("new", new), ("old", old)):
        uix._arrays = mod
        for j in range(300):  # the Python part alone: the queries, two outputs, the stream
            q = Q[j:j + 1]
            t = time.perf_counter_ns()
            a = mod.as_array(q, what="queries", dtype="f32")
            mod.empty_like(a, (1, 10), "f32"); mod.empty_like(a, (1, 10), "i64")
            if mod.producer_stream([a], 0) is None:
                mod.synchronize([a])
            res[(side, "prep")].append(time.perf_counter_ns() - t)
        for j in range(500):
            q = Q[j:j + 1]
            sync(); t = time.perf_counter_ns()
            ix.search(q, k=10, n_probes=32)
            sync(); res[(side, "search")].append(time.perf_counter_ns() - t)
        for j in range(50):
            sync(); t = time.perf_counter_ns()
            ix.search(Q100[j], k=10, n_probes=32)
            sync(); res[(side, "b100")].append(time.perf_counter_ns() - t)
uix._arrays = new
d_new, i_new = ix.search(Q[:100], k=10, n_probes=32)
uix._arrays = old
d_old, i_old = ix.search(Q[:100], k=10, n_probes=32)
assert cp.array_equal(i_new, i_old) and cp.array_equal(d_new, d_old)
for what in ("prep", "search", "b100"):
    o, n = np.median(res[("old", what)]) / 1e3, np.median(res[("new", what)]) / 1e3
    print(f"{what:7s} old {o:8.1f} us   new {n:8.1f} us   new/old {n / o:.3f}", flush=True)
