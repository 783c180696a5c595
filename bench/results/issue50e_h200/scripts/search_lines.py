"""Each step of Index.search at batch 1 (a replica of Index._search with perf_counter_ns marks)."""
import os, statistics, time
from pathlib import Path
import torch, udf
from udf import _arrays
from udf._index import _check_device, _count
dev = torch.device("cuda:0"); g = torch.Generator(device=dev).manual_seed(3)
x = torch.randn(1_000_000, 128, device=dev, generator=g); w = torch.rand(128, device=dev, generator=g) + 0.5
wl2 = udf.cuda_source_metric(Path("examples/weighted_l2.cu"), flags=["--flags-from-first-line"])
ix = udf.Index.build(wl2, x, n_lists=1024)
l2 = udf.Index.build(udf.builtin_metric("sqeuclidean"), x, n_lists=1024)
marks = {}
def mk(n, t0):
    t = time.perf_counter_ns(); marks.setdefault(n, []).append(t - t0); return t
def search(self, queries, k, n_probes, captures):
    t = time.perf_counter_ns()
    target, finfo, fdefaults = self._filter_target(None); t = mk("filter_target", t)
    q = _arrays.as_array(queries, what="queries", dtype=self._metric.elem); t = mk("as_array", t)
    _check_device([q], self._device); k = _count(k, "k"); n_probes = _count(n_probes, "n_probes"); t = mk("checks", t)
    n = 1 if len(q.shape) == 1 else q.shape[0]
    bound, arrays = self._bind_captures(captures, self._copies); t = mk("bind_captures", t)
    dist, dist_arg = _arrays.empty_like(q, (n, k), "f32"); t = mk("empty dist", t)
    ids, ids_arg = _arrays.empty_like(q, (n, k), "i64"); t = mk("empty ids", t)
    after = _arrays.producer_stream([q, *arrays], self._device); t = mk("producer_stream", t)
    self._handle.search(q.arg, dist_arg, ids_arg, k=k, n_probes=n_probes, captures=bound, queries_per_item=0,
                        max_batch=0, filter=None, filter_captures={}, after_stream=after); t = mk("ext search", t)
    return dist, ids
lines = []
for name, index, caps in (("weighted_l2", ix, {"weights": w}), ("builtin l2", l2, None)):
    qs = [torch.randn(1, 128, device=dev, generator=g) for _ in range(300)]
    for i in range(10): search(index, qs[i], 10, 32, caps)
    marks.clear(); walls = []; real = []
    for i in range(300):
        torch.cuda.synchronize(); t = time.perf_counter_ns(); search(index, qs[i], 10, 32, caps); torch.cuda.synchronize(); walls.append(time.perf_counter_ns() - t)
        torch.cuda.synchronize(); t = time.perf_counter_ns(); index.search(qs[i], k=10, n_probes=32, captures=caps); torch.cuda.synchronize(); real.append(time.perf_counter_ns() - t)
    lines.append(f"{name}, batch 1 P32: replica wall {statistics.median(walls)/1e3:.1f} us, Index.search wall {statistics.median(real)/1e3:.1f} us")
    for k_, v in marks.items(): lines.append(f"  {k_:16s} {statistics.median(v)/1e3:7.1f} us")
ts = []
for i in range(300):
    t = time.perf_counter_ns(); torch.empty((1, 10), dtype=torch.float32, device=dev); ts.append(time.perf_counter_ns() - t)
lines.append(f"bare torch.empty((1,10), cuda): {statistics.median(ts)/1e3:.1f} us")
print("\n".join(lines))
Path(os.environ.get("OUT", "/tmp")).joinpath("search_lines.txt").write_text("\n".join(lines) + "\n")
