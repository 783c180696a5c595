"""Time each step of udf._exact._rows_call (a replica with perf_counter_ns marks) at batch 100."""
import os, statistics, time
from pathlib import Path
import torch, udf
from udf import _exact, _arrays, _cuda
from udf._exact import (_check_device, _check_not_filter, _count, _device_module, _resolve_device, _with_filters,
                        bind_captures, capture_defaults_of)
from udf._index import ext as _ext
OUT = Path(os.environ.get("OUT", "/tmp/out"))
dev = torch.device("cuda:0")
g = torch.Generator(device=dev).manual_seed(1)
x = torch.randn(1_000_000, 128, device=dev, generator=g)
w = torch.rand(128, device=dev, generator=g) + 0.5
wl2 = udf.cuda_source_metric(Path("examples/weighted_l2.cu"), flags=["--flags-from-first-line"])
marks = {}
def mk(name, t0):
    t = time.perf_counter_ns(); marks.setdefault(name, []).append(t - t0); return t
def call(metric, dataset, queries, candidates, k, captures):
    t = time.perf_counter_ns()
    _check_not_filter(metric, "x"); t = mk("check_not_filter", t)
    d_ = _resolve_device(None, dataset, "dataset"); t = mk("resolve_device", t)
    given = metric
    _cuda.start_early(d_); t = mk("start_early", t)
    mod, ext_mod, _ = _device_module(given, d_); t = mk("device_module", t)
    info = mod.metric(None); t = mk("mod.metric", t)
    d = _arrays.as_array(dataset, what="dataset", dtype=info.elem, ndims=(2,)); t = mk("as_array dataset", t)
    q = _arrays.as_array(queries, what="queries", dtype=info.elem); t = mk("as_array queries", t)
    if len(getattr(candidates, "shape", ())) == 1 and hasattr(candidates, "reshape"): candidates = candidates.reshape(1, -1)
    c = _arrays.as_array(candidates, what="candidates", dtype="i64", ndims=(2,)); t = mk("as_array candidates", t)
    _check_device([d, q, c], d_); k = _count(k, "k"); t = mk("check_device+count", t)
    n = q.shape[0]
    defaults = capture_defaults_of(given, info.symbol); t = mk("capture_defaults_of", t)
    bound, arrays = bind_captures(f"metric {info.symbol}", info.captures, captures, defaults, per_dim=True, device=d_, dim=d.shape[-1]); t = mk("bind_captures", t)
    dist, dist_arg = _arrays.empty_like(q, (n, k), "f32"); t = mk("empty dist", t)
    ids, ids_arg = _arrays.empty_like(q, (n, k), "i64"); t = mk("empty ids", t)
    _arrays.synchronize([a for a in (d, q, c, *arrays) if a is not None]); t = mk("synchronize", t)
    ext_mod.exact_search(info.symbol, d.arg, q.arg, c.arg, dist_arg, ids_arg, k=k, captures=bound, queries_per_item=0,
                         max_batch=0, filter=None, filter_captures={}); t = mk("ext call", t)
    return dist, ids
lines = []
for b in (100, 10000):
    qs = [torch.randn(b, 128, device=dev, generator=g) for _ in range(60)]
    cs = [torch.randint(0, 1_000_000, (b, 256), device=dev, generator=g) for _ in range(60)]
    ref = udf.refine(wl2, x, qs[0], cs[0], 10, captures={"weights": w})
    mine = call(wl2, x, qs[0], cs[0], 10, {"weights": w})
    assert torch.equal(ref[1], mine[1])
    marks.clear()
    walls = []
    for i in range(60):
        torch.cuda.synchronize(); t = time.perf_counter_ns()
        call(wl2, x, qs[i], cs[i], 10, {"weights": w})
        torch.cuda.synchronize(); walls.append(time.perf_counter_ns() - t)
    tot = 0
    lines.append(f"batch {b}: wall median {statistics.median(walls)/1e3:.1f} us")
    for kname, v in marks.items():
        m = statistics.median(v) / 1e3; tot += m
        lines.append(f"  {kname:22s} {m:8.1f} us")
    lines.append(f"  sum of medians {tot:.1f} us")
    # the real wrapper, for comparison
    walls = []
    for i in range(60):
        torch.cuda.synchronize(); t = time.perf_counter_ns()
        udf.refine(wl2, x, qs[i], cs[i], 10, captures={"weights": w})
        torch.cuda.synchronize(); walls.append(time.perf_counter_ns() - t)
    lines.append(f"  udf.refine wall median {statistics.median(walls)/1e3:.1f} us")
    # bare sync cost
    ts = []
    for i in range(60):
        t = time.perf_counter_ns(); torch.cuda.synchronize(); ts.append(time.perf_counter_ns() - t)
    lines.append(f"  torch.cuda.synchronize idle {statistics.median(ts)/1e3:.1f} us")
print("\n".join(lines))
(OUT / "wrapper_lines.txt").write_text("\n".join(lines) + "\n")
