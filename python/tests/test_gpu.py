"""GPU tests of the `udf` package: Python, CUDA and built-in metrics built into indexes and
searched on the GPU, checked against float64 references (exact searches: n_probes = n_lists).

Every test is marked `gpu` (skipped, with the reason printed, without a CUDA GPU and driver)
and needs udf._ext.  CuPy / PyTorch / numba-cuda cases skip when the library is missing.

A search result is checked with `check_knn`: the distances returned must be the k best of the
reference (ties allowed) and each returned id's reference distance must equal the distance
returned for it.
"""
from __future__ import annotations

import functools
import math
import sys
import threading
import time
import warnings

import numpy as np
import pytest

import udf
from udf import ivf_flat
from test_metric_v2 import _named, js_distance

pytestmark = pytest.mark.gpu

DIM = 16
ROWS = 1500
N_LISTS = 8
RNG = np.random.default_rng(20261123)
WEIGHTS = RNG.uniform(0.25, 2.0, DIM).astype(np.float32)


def clustered(rows: int, dim: int = DIM, *, seed: int = 7, dtype=np.float32) -> np.ndarray:
    rng = np.random.default_rng(seed)
    centers = rng.normal(0.0, 4.0, (12, dim))
    x = centers[rng.integers(0, len(centers), rows)] + rng.normal(0.0, 1.0, (rows, dim))
    if np.dtype(dtype).kind in "iu":
        info = np.iinfo(dtype)
        x = np.clip(np.rint(x * 6 + (0 if info.min < 0 else 64)), info.min, info.max)
    return x.astype(dtype)


DATA = clustered(ROWS)
QUERIES = clustered(6, seed=99)


def check_knn(dist, ids, ref, k, *, order="min", rtol=1e-5, atol=1e-4):
    """dist/ids: n x k from the GPU (host NumPy); ref: n x rows float64 reference distances."""
    dist, ids = np.asarray(dist), np.asarray(ids)
    assert dist.shape == ids.shape == (ref.shape[0], k)
    assert dist.dtype == np.float32 and ids.dtype == np.int64
    for q in range(ref.shape[0]):
        assert len(set(ids[q].tolist())) == k, f"query {q}: duplicate ids {ids[q]}"
        assert ids[q].min() >= 0, f"query {q}: padded result {ids[q]}"
        best = np.sort(ref[q])[:k] if order == "min" else -np.sort(-ref[q])[:k]
        np.testing.assert_allclose(dist[q], best, rtol=rtol, atol=atol, err_msg=f"query {q}: not the k best")
        np.testing.assert_allclose(ref[q, ids[q]], dist[q], rtol=rtol, atol=atol,
                                   err_msg=f"query {q}: ids do not carry their distances")


def reference_matrix(metric, data, queries, captures=None) -> np.ndarray:
    """n_queries x rows reference distances of a Python metric (float64, plain Python)."""
    return np.stack([metric.reference(data, q, captures) for q in queries])


@pytest.fixture(scope="module", autouse=True)
def _needs_ext(ext):
    return ext


def wl2_metric(backend, name="wl2"):
    def fn(x, y, acc, ctx):
        d = x - y
        return acc + ctx.weights[ctx.dim] * d * d
    fn.__name__ = f"{name}_{backend.replace('-', '_')}"
    return udf.metric(fn, captures={"weights": WEIGHTS}, backend=backend)


# ------------------------------------------------------------------------------- Python metrics


def test_python_metric_exact_search(backend):
    m = wl2_metric(backend)
    index = udf.Index.build(m, DATA, n_lists=N_LISTS)
    assert (index.size, index.dim, index.n_lists, index.elem) == (ROWS, DIM, N_LISTS, "f32")
    assert sum(index.list_sizes()) == ROWS
    dist, ids = index.search(QUERIES, k=10, n_probes=N_LISTS)
    assert isinstance(dist, np.ndarray) and isinstance(ids, np.ndarray)
    check_knn(dist, ids, reference_matrix(m, DATA, QUERIES), 10)
    stats = index.last_search_stats
    assert stats["total_ms"] > 0 and stats["scan_ms"] == 0  # stage timing is off by default
    index.stage_timing = True
    assert index.stage_timing
    index.search(QUERIES, k=10, n_probes=N_LISTS)
    assert index.last_search_stats["scan_ms"] > 0 and index.last_search_stats["coarse_ms"] > 0
    index.stage_timing = False
    dist, ids = index.search(QUERIES, k=10, n_probes=N_LISTS)
    stats = index.last_search_stats
    assert stats["scored"] == len(QUERIES) * len(index)  # every list probed: every vector scored per query
    assert stats["list_bytes_read"] >= len(index) * DIM * np.dtype(np.float32).itemsize
    # one query as a 1-D array gives 1-D results
    d1, i1 = index.search(QUERIES[2], k=10, n_probes=N_LISTS)
    assert d1.shape == (10,) and np.array_equal(i1, ids[2]) and np.allclose(d1, dist[2])


def test_every_capture_kind_and_finalize(any_backend):
    h = RNG.uniform(0.5, 1.5, DIM).astype(np.float16)
    kk = RNG.integers(0, 3, DIM).astype(np.int32)
    u = RNG.integers(0, 2, DIM).astype(np.uint8)

    def mixed_gpu_finalize(acc, ctx):
        return math.sqrt(acc) + np.float32(ctx.q)

    @udf.metric(captures={"w": WEIGHTS, "h": h, "k": kk, "u": u, "p": 0.5, "q": 3}, backend=any_backend,
                finalize=mixed_gpu_finalize)
    def mixed_gpu(x, y, acc, ctx):
        i = ctx.dim
        s = ctx.w[i] * np.float32(ctx.h[i]) + np.float32(ctx.k[i]) + np.float32(ctx.u[i])
        d = x - y
        return acc + ctx.p * s * d * d

    index = udf.Index.build(mixed_gpu, DATA, n_lists=N_LISTS)
    dist, ids = index.search(QUERIES, k=7, n_probes=N_LISTS)
    check_knn(dist, ids, reference_matrix(mixed_gpu, DATA, QUERIES), 7)
    # per-search values replace the defaults, arrays and scalars alike
    over = {"w": np.ones(DIM, np.float32), "q": 10, "p": 2.0}
    dist2, ids2 = index.search(QUERIES, k=7, n_probes=N_LISTS, captures=over)
    check_knn(dist2, ids2, reference_matrix(mixed_gpu, DATA, QUERIES, {**mixed_gpu.capture_defaults, **over}), 7)
    assert not np.allclose(dist, dist2)


def test_default_array_capture_is_copied_to_the_gpu_once(any_backend):
    """A host array given at declaration is the declaration's snapshot, copied to each index's
    GPU once (a udf._ext.DeviceArray bound by every search): changing the caller's array
    afterwards changes nothing; a value given to the search is that search's."""
    w = np.ones(DIM, np.float32)

    @udf.metric(captures={"w": w}, backend=any_backend)
    def snap_w(x, y, acc, ctx):
        d = x - y
        return acc + ctx.w[ctx.dim] * d * d

    index = udf.Index.build(snap_w, DATA, n_lists=N_LISTS)
    before, ids = index.search(QUERIES, k=3, n_probes=N_LISTS)
    assert len(index._copies) == 1
    kept = next(iter(index._copies._copies.values()))[1]
    assert type(kept.value).__name__ == "DeviceArray" and kept.value.device == 0 and kept.value.nbytes == DIM * 4
    w *= 4.0  # the caller's array: the declaration kept its own copy
    again, ids2 = index.search(QUERIES, k=3, n_probes=N_LISTS)
    assert np.array_equal(again, before) and np.array_equal(ids2, ids)
    given, _ = index.search(QUERIES, k=3, n_probes=N_LISTS, captures={"w": w})  # this call's value
    np.testing.assert_allclose(given, 4.0 * before, rtol=1e-5)
    assert len(index._copies) == 1 and next(iter(index._copies._copies.values()))[1] is kept
    third, _ = index.search(QUERIES, k=3, n_probes=N_LISTS)
    assert np.array_equal(third, before)


def test_default_array_capture_on_a_sharded_index(any_backend):
    """devices=[0, 0]: the declared array's device copy is on the home device and gives the
    results of the host array passed per search."""
    m = wl2_metric(any_backend, "wl2_sharded_copy")
    index = udf.Index.build(m, DATA, n_lists=N_LISTS, devices=[0, 0])
    want = index.search(QUERIES, k=5, n_probes=N_LISTS, captures={"weights": WEIGHTS})
    assert len(index._copies) == 0
    for i in range(3):
        _assert_same_bits(index.search(QUERIES, k=5, n_probes=N_LISTS), want, f"search {i}")
    assert len(index._copies) == 1


@pytest.mark.parametrize("elem,acc", [("f16", "f32"), ("i8", "i32"), ("u8", "i32"), ("u8", "f32")])
def test_element_types(any_backend, elem, acc):
    np_t = {"f16": np.float16, "i8": np.int8, "u8": np.uint8}[elem]
    data, queries = clustered(ROWS, dtype=np_t), clustered(5, seed=5, dtype=np_t)

    def l1(x, y, acc, ctx):
        d = x - y
        if d < 0:
            d = -d
        return acc + d
    l1.__name__ = f"l1_{elem}_{acc}"
    m = udf.metric(l1, elem=elem, acc=acc, backend=any_backend)
    index = udf.Index.build(m, data, n_lists=N_LISTS)
    assert index.elem == elem
    dist, ids = index.search(queries, k=8, n_probes=N_LISTS)
    ref = reference_matrix(m, data, queries)
    check_knn(dist, ids, ref, 8, rtol=0 if acc == "i32" else 1e-3, atol=0 if acc == "i32" else 1e-2)
    with pytest.raises(TypeError, match="float32 values cannot be used as"):
        index.search(queries.astype(np.float32), k=8, n_probes=N_LISTS)


def test_order_max_initial_and_coarse_inner_product(any_backend):
    @udf.metric(order="max", initial=1.0, coarse_metric="inner_product", backend=any_backend)
    def shifted_ip(x, y, acc, ctx):
        return acc + x * y

    index = udf.Index.build(shifted_ip, DATA, n_lists=N_LISTS)
    dist, ids = index.search(QUERIES, k=6, n_probes=N_LISTS)
    check_knn(dist, ids, reference_matrix(shifted_ip, DATA, QUERIES), 6, order="max", rtol=1e-5, atol=1e-3)
    assert np.all(np.diff(dist, axis=1) <= 0)  # larger is nearer: best first


# ------------------------------------------------------------------------------- CUDA / built-ins


CUDA_WL2 = """\
extern "C" __device__ float cuda_wl2_gpu(float x, float y, float acc, const udf_ctx_v1 *ctx) {
  float d = x - y;
  return acc + UDF_CAPTURE(ctx, weights)[ctx->dim] * d * d;
}
extern "C" __device__ float cuda_wl2_gpu_sqrt(float acc, const udf_ctx_v1 *ctx) { return sqrtf(acc); }
"""


def test_cuda_source_metric_search():
    m = udf.cuda_source_metric(CUDA_WL2, symbol_name="cuda_wl2_gpu", finalize="cuda_wl2_gpu_sqrt",
                               captures={"weights": WEIGHTS})
    index = udf.Index.build(m, DATA, n_lists=N_LISTS)
    dist, ids = index.search(QUERIES, k=5, n_probes=N_LISTS)
    diff = DATA[None, :, :].astype(np.float64) - QUERIES[:, None, :].astype(np.float64)
    ref = np.sqrt((diff * diff * WEIGHTS.astype(np.float64)).sum(-1))
    check_knn(dist, ids, ref, 5)


@pytest.mark.parametrize("name", ["sqeuclidean", "euclidean", "inner_product", "cosine"])
def test_builtin_metrics_through_ivf_flat(name):
    data = DATA / np.linalg.norm(DATA, axis=1, keepdims=True) if name == "cosine" else DATA
    index = ivf_flat.build(ivf_flat.IndexParams(n_lists=N_LISTS, metric=name), data)
    dist, ids = ivf_flat.search(ivf_flat.SearchParams(n_probes=N_LISTS), index, QUERIES, 4)
    d64, q64 = data.astype(np.float64), QUERIES.astype(np.float64)
    if name in ("sqeuclidean", "euclidean"):
        ref = ((d64[None] - q64[:, None]) ** 2).sum(-1)
        ref = np.sqrt(ref) if name == "euclidean" else ref
        check_knn(dist, ids, ref, 4, rtol=1e-4, atol=1e-3)
    elif name == "inner_product":
        check_knn(dist, ids, q64 @ d64.T, 4, order="max", rtol=1e-5, atol=1e-3)
    else:  # cosine over normalised rows: 1 - <x, y> / (|x| |y|), as the built-in reports it
        ref = 1.0 - (q64 @ d64.T) / np.linalg.norm(q64, axis=1, keepdims=True)
        check_knn(dist, ids, ref, 4, rtol=1e-4, atol=1e-4)


def test_poc_snippet(any_backend):
    """The proof of concept's API, as its users wrote it."""
    weights = WEIGHTS.copy()

    @ivf_flat.metric(order="min", initial=0.0, coarse_metric="sqeuclidean",
                     captures={"weights": weights}, symbol_name="demo_weighted_l2_update_f32",
                     backend=any_backend)
    def weighted_l2_update(x, y, acc, ctx):
        d = x - y
        return acc + ctx.weights[ctx.dim] * d * d

    index = ivf_flat.build(ivf_flat.IndexParams(n_lists=1, metric="sqeuclidean"), DATA)
    distances, neighbors = ivf_flat.search(ivf_flat.SearchParams(n_probes=1, metric=weighted_l2_update),
                                           index, QUERIES, 3)
    check_knn(distances, neighbors, reference_matrix(weighted_l2_update, DATA, QUERIES), 3)


# ------------------------------------------------------------------------------- index life cycle


def test_add_save_load_with_metric(any_backend, tmp_path):
    m = wl2_metric(any_backend, "wl2_io")
    index = udf.Index.build(m, DATA[:1000], n_lists=N_LISTS)
    index.add(DATA[1000:])
    assert index.size == ROWS
    dist, ids = index.search(QUERIES, k=5, n_probes=N_LISTS)
    check_knn(dist, ids, reference_matrix(m, DATA, QUERIES), 5)
    path = tmp_path / "wl2.udfi"
    index.save(path)
    loaded = udf.Index.load(path, m)
    d2, i2 = loaded.search(QUERIES, k=5, n_probes=N_LISTS)
    assert np.array_equal(i2, ids) and np.array_equal(d2, dist)
    # a module without the index's metric: a runtime error naming it
    with pytest.raises(udf.UdfRuntimeError):
        udf.Index.load(path, udf.builtin_metric("l2"))
    # lists built with the built-in l2, scanned with the UDF
    l2_index = udf.Index.build(udf.builtin_metric("l2"), DATA, n_lists=N_LISTS)
    rebound = l2_index.with_metric(m)
    assert rebound.metric.symbol == m.symbol and l2_index.with_metric(m) is rebound
    d3, i3 = rebound.search(QUERIES, k=5, n_probes=N_LISTS)
    check_knn(d3, i3, reference_matrix(m, DATA, QUERIES), 5)
    # custom ids
    ids_in = np.arange(ROWS, dtype=np.int64) * 10 + 7
    idx2 = udf.Index.build(m, DATA, ids=ids_in, n_lists=N_LISTS)
    d4, i4 = idx2.search(QUERIES, k=5, n_probes=N_LISTS)
    assert np.array_equal(i4, ids_in[ids]) and np.allclose(d4, dist)


def test_an_index_outlives_its_metric_recompiled(tmp_path):
    """A saved index loads with another artifact of its metric (here the same metric written
    another way, as a recompile by another udf or CUDA version would give): the file names the
    metric by symbol, and its lists depend on the element type and coarse metric only."""
    def wl2_kept(x, y, acc, ctx):
        d = x - y
        return acc + ctx.weights[ctx.dim] * d * d
    before = udf.metric(wl2_kept, captures={"weights": WEIGHTS})

    def wl2_kept(x, y, acc, ctx):  # noqa: F811 (the same symbol, another body)
        return acc + ctx.weights[ctx.dim] * (x - y) * (x - y)
    after = udf.metric(wl2_kept, captures={"weights": WEIGHTS})
    index = udf.Index.build(before, DATA, n_lists=N_LISTS)
    dist, ids = index.search(QUERIES, k=5, n_probes=4)
    path = tmp_path / "kept.udfi"
    index.save(path)
    loaded = udf.Index.load(path, after)
    assert loaded.metric.symbol == index.metric.symbol == "wl2_kept"
    assert loaded.metric.cache_key != index.metric.cache_key
    d2, i2 = loaded.search(QUERIES, k=5, n_probes=4)
    assert np.array_equal(i2, ids) and np.allclose(d2, dist, rtol=1e-6)
    # another coarse metric is another index: refused, naming the metric
    ip = udf.metric(wl2_kept, captures={"weights": WEIGHTS}, coarse_metric="inner_product")
    with pytest.raises(udf.UdfRuntimeError, match="coarse metric"):
        udf.Index.load(path, ip)


def test_k_larger_than_candidates_is_padded(any_backend):
    m = wl2_metric(any_backend, "wl2_pad")
    index = udf.Index.build(m, DATA[:40], n_lists=1)
    dist, ids = index.search(QUERIES[:2], k=40, n_probes=1)
    assert (ids >= 0).all() and sorted(ids[0].tolist()) == list(range(40))


# ------------------------------------------------------------------------------- several GPUs


def _assert_same_bits(got, want, what):
    (dg, ig), (dw, iw) = got, want
    dg, ig, dw, iw = (np.asarray(a) for a in (dg, ig, dw, iw))
    assert dg.shape == dw.shape and ig.shape == iw.shape, what
    np.testing.assert_array_equal(dg.view(np.uint32), dw.view(np.uint32), err_msg=f"{what}: distances")
    np.testing.assert_array_equal(ig, iw, err_msg=f"{what}: ids")


def _assert_plan(index, devices, layout, n_lists, rows):
    """The shard plan of `layout`: by lists, contiguous list ranges covering 0 .. n_lists in
    order; by vectors, every shard every list, each within n_lists vectors of an equal share.
    The sizes add up to `rows`."""
    shards = index.shards
    assert [s["device"] for s in shards] == devices
    assert [s["layout"] for s in shards] == [layout] * len(devices) and index.shard_layout == layout
    assert sum(s["size"] for s in shards) == rows
    if layout == "lists":
        assert shards[0]["list_begin"] == 0 and shards[-1]["list_end"] == n_lists
        for a, b in zip(shards, shards[1:]):
            assert a["list_end"] == b["list_begin"]
    else:
        for s in shards:
            assert (s["list_begin"], s["list_end"]) == (0, n_lists)
            assert abs(s["size"] - rows / len(devices)) <= n_lists, shards


@pytest.mark.parametrize("layout", [None, "vectors", "lists"])
@pytest.mark.parametrize("order", ["min", "max"])
def test_sharded_index_on_one_gpu_matches_the_one_gpu_index(any_backend, order, layout, tmp_path):
    """devices=[0, 0]: two shards of device 0 (top-k merged by peer copies), by vectors (the
    default, layout None) and by lists.  Over the same data the sharded index gives the one-GPU
    index's ids and distances bit for bit, at k 10 and 100, with some lists probed and with all,
    for a min- and a max-ordered metric; so do its file loaded over [0, 0] in either layout and
    on one GPU, and both after the same add."""
    if order == "min":
        m = wl2_metric(any_backend, "wl2_shards")
    else:
        @udf.metric(order="max", initial=1.0, coarse_metric="inner_product", backend=any_backend)
        def shards_ip(x, y, acc, ctx):
            return acc + x * y
        m = shards_ip
    n_lists = 2 * N_LISTS
    queries = clustered(40, seed=99)
    given = {} if layout is None else {"shard_layout": layout}
    want_layout = layout or "vectors"
    one = udf.Index.build(m, DATA, n_lists=n_lists)
    two = udf.Index.build(m, DATA, n_lists=n_lists, devices=[0, 0], **given)

    assert (one.devices, one.sharded, one.shard_transport, one.shard_layout) == ([0], False, "none", "lists")
    assert one.shards == [{"device": 0, "list_begin": 0, "list_end": n_lists, "size": ROWS, "layout": "lists"}]
    assert (two.device, two.devices, two.sharded, two.shard_transport) == (0, [0, 0], True, "peer")
    _assert_plan(two, [0, 0], want_layout, n_lists, ROWS)
    assert (two.size, two.dim, two.n_lists, two.list_sizes()) == (one.size, one.dim, one.n_lists, one.list_sizes())
    assert "devices=[0, 0]" in repr(two)

    path = tmp_path / f"sharded_{order}.udfi"
    two.save(path)
    loaded_two = udf.Index.load(path, m, devices=[0, 0])  # the default: by vectors
    loaded_lists = udf.Index.load(path, m, devices=[0, 0], shard_layout="lists")
    loaded_vectors = udf.Index.load(path, m, devices=[0, 0], shard_layout="vectors")
    loaded_one = udf.Index.load(path, m)
    assert loaded_two.devices == [0, 0] and loaded_two.shard_transport == "peer"
    _assert_plan(loaded_two, [0, 0], "vectors", n_lists, ROWS)
    _assert_plan(loaded_lists, [0, 0], "lists", n_lists, ROWS)
    _assert_plan(loaded_vectors, [0, 0], "vectors", n_lists, ROWS)
    assert loaded_one.devices == [0] and len(loaded_one.shards) == 1
    for k in (10, 100):
        for probes in (3, n_lists):
            want = one.search(queries, k=k, n_probes=probes)
            for name, index in (("built over [0, 0]", two), ("loaded over [0, 0]", loaded_two),
                                ("loaded over [0, 0] by lists", loaded_lists),
                                ("loaded over [0, 0] by vectors", loaded_vectors),
                                ("loaded on one GPU", loaded_one)):
                _assert_same_bits(index.search(queries, k=k, n_probes=probes), want,
                                  f"{name}, k {k}, n_probes {probes}")

    extra = clustered(300, seed=5)
    one.add(extra)
    two.add(extra)
    assert two.size == one.size == ROWS + len(extra)
    _assert_plan(two, [0, 0], want_layout, n_lists, ROWS + len(extra))
    _assert_same_bits(two.search(queries, k=10, n_probes=3), one.search(queries, k=10, n_probes=3), "after add")

    # the runtime takes no sharded index for with_metric
    with pytest.raises(udf.UdfRuntimeError) as info:
        two.with_metric(m)
    assert info.value.status == udf.Status.UNSUPPORTED


def test_build_chunked_is_build_then_add():
    """Index.build_chunked over a list of chunks (one with ids) and over a function: the index a
    build and adds give, bit for bit, on one GPU and sharded over [0, 0]; each chunk fetched
    twice (chunk 0 three times); the function's exception comes back as it was raised."""
    m = udf.builtin_metric("sqeuclidean", "f32")
    parts = [clustered(900, seed=41), clustered(400, seed=42), clustered(300, seed=43)]
    ids2 = np.arange(300, dtype=np.int64) * 2 + 10**6
    queries = clustered(30, seed=44)
    ref = udf.Index.build(m, parts[0], n_lists=N_LISTS)
    ref.add(parts[1])
    ref.add(parts[2], ids=ids2)
    want = ref.search(queries, k=10, n_probes=3)
    got = udf.Index.build_chunked(m, [parts[0], parts[1], (parts[2], ids2)], n_lists=N_LISTS)
    assert (got.size, got.list_sizes(), got.sharded) == (ref.size, ref.list_sizes(), False)
    _assert_same_bits(got.search(queries, k=10, n_probes=3), want, "chunked, one GPU")

    calls = [0, 0, 0]

    def chunk(i):
        calls[i] += 1
        return (parts[i], ids2) if i == 2 else parts[i]
    two = udf.Index.build_chunked(m, chunk, n_chunks=3, n_lists=N_LISTS, devices=[0, 0])
    assert calls == [3, 2, 2] and two.sharded and two.devices == [0, 0]
    _assert_plan(two, [0, 0], "vectors", N_LISTS, ref.size)  # the default layout
    _assert_same_bits(two.search(queries, k=10, n_probes=3), want, "chunked over [0, 0]")
    for layout in ("lists", "vectors"):
        calls[:] = [0, 0, 0]
        laid = udf.Index.build_chunked(m, chunk, n_chunks=3, n_lists=N_LISTS, devices=[0, 0], shard_layout=layout)
        assert calls == [3, 2, 2]
        _assert_plan(laid, [0, 0], layout, N_LISTS, ref.size)
        _assert_same_bits(laid.search(queries, k=10, n_probes=3), want, f"chunked over [0, 0] by {layout}")

    class Boom(Exception):
        pass

    def failing(i):
        if i == 1 and calls[1] >= 1:  # its second call (the placement pass)
            raise Boom("chunk 1 is gone")
        calls[i] += 1
        return parts[i]
    calls[:] = [0, 0, 0]
    with pytest.raises(Boom, match="chunk 1 is gone"):
        udf.Index.build_chunked(m, failing, n_chunks=3, n_lists=N_LISTS)
    with pytest.raises(TypeError, match="n_chunks"):
        udf.Index.build_chunked(m, chunk, n_lists=N_LISTS)
    with pytest.raises(ValueError, match="columns"):
        udf.Index.build_chunked(m, parts, n_lists=N_LISTS, centroids=np.zeros((N_LISTS, DIM + 1), np.float32))


_DROP_IN_A_CALL = r"""
import gc, sys, threading
import numpy as np
sys.path.insert(0, sys.argv[1])
import udf
from udf._runtime import ext

m = udf.builtin_metric("sqeuclidean", "f32")
rng = np.random.default_rng(5)
parts = [rng.standard_normal((600, 16)).astype(np.float32) for _ in range(3)]
ref = udf.Index.build_chunked(m, parts, n_chunks=3, n_lists=8)
want = ref.search(parts[1][:20], k=5, n_probes=8)

def check(ix, what):
    got = ix.search(parts[1][:20], k=5, n_probes=8)
    assert np.array_equal(got[0], want[0]) and np.array_equal(got[1], want[1]), what
    assert ext()._dropped_waiting() == 0, what + ": a dropped index is still waiting after the call"

# 1. On the call's own thread: the last reference of an index of the same runtime goes inside
#    the chunk function, and the garbage collector frees a cycle holding another.
for devices in (None, [0, 0]):
    victim = [udf.Index.build(m, parts[0], n_lists=8)]
    cycle = [udf.Index.build(m, parts[0], n_lists=8)]
    cycle.append(cycle)
    del cycle
    waiting = []
    def chunk(i):
        if victim:
            victim.pop()
            gc.collect()
            waiting.append(ext()._dropped_waiting())
        return parts[i]
    ix = udf.Index.build_chunked(m, chunk, n_chunks=3, n_lists=8, devices=devices)
    assert waiting == [2], waiting  # queued while the build held the runtime
    check(ix, "dropped in the chunk function, devices %s" % devices)

# 2. From another thread, while the call's chunk function waits (GIL released) for it.
victim = [udf.Index.build(m, parts[0], n_lists=8)]
in_chunk, dropped = threading.Event(), threading.Event()
def dropper():
    in_chunk.wait()
    victim.pop()
    gc.collect()
    dropped.set()
t = threading.Thread(target=dropper)
t.start()
def chunk2(i):
    if i == 1 and not in_chunk.is_set():
        in_chunk.set()
        assert dropped.wait(60), "the other thread's drop did not return"
    return parts[i]
ix = udf.Index.build_chunked(m, chunk2, n_chunks=3, n_lists=8)
t.join()
check(ix, "dropped by another thread")
print("ok")
"""


def test_an_index_dropped_while_its_runtime_is_busy_is_destroyed_after_the_call():
    """An index whose last reference goes while a call holds its runtime -- inside a
    build_chunked chunk function (where the garbage collector may run at any allocation), or on
    another thread meanwhile -- neither deadlocks nor re-enters the runtime: it waits, and the
    call destroys it as it returns.  In a new process with a time limit, so that a deadlock
    fails the test instead of stopping the suite."""
    import subprocess
    from pathlib import Path
    package_dir = str(Path(udf.__file__).resolve().parents[1])
    out = subprocess.run([sys.executable, "-c", _DROP_IN_A_CALL, package_dir], capture_output=True, text=True,
                         timeout=300)
    assert out.returncode == 0 and out.stdout.strip().endswith("ok"), out.stdout + out.stderr


# ------------------------------------------------------------------------------- array libraries


def _lib(name):
    return pytest.importorskip(name, reason=f"{name} is not installed")


def test_cupy_in_cupy_out(any_backend):
    cp = _lib("cupy")
    m = wl2_metric(any_backend, "wl2_cupy")
    index = udf.Index.build(m, cp.asarray(DATA), n_lists=N_LISTS)
    assert index.device == 0
    want_d, want_i = index.search(QUERIES, k=5, n_probes=N_LISTS)
    dist, ids = index.search(cp.asarray(QUERIES), k=5, n_probes=N_LISTS, captures={"weights": cp.asarray(WEIGHTS)})
    assert isinstance(dist, cp.ndarray) and isinstance(ids, cp.ndarray) and dist.device.id == 0
    assert np.array_equal(cp.asnumpy(ids), want_i) and np.array_equal(cp.asnumpy(dist), want_d)
    # strided (a column slice) and a safely cast dtype (float16 -> float32) on the device
    wide = cp.asarray(np.concatenate([QUERIES, QUERIES], axis=1))[:, :DIM]
    d2, i2 = index.search(wide.astype(cp.float16).astype(cp.float32), k=5, n_probes=N_LISTS)
    assert d2.shape == (len(QUERIES), 5)
    index.add(cp.asarray(DATA[:10]), cp.arange(ROWS, ROWS + 10, dtype=cp.int64))
    assert index.size == ROWS + 10


def test_torch_cpu_and_cuda(any_backend):
    torch = _lib("torch")
    if not torch.cuda.is_available():
        pytest.skip("torch has no CUDA")
    m = wl2_metric(any_backend, "wl2_torch")
    index = udf.Index.build(m, torch.from_numpy(DATA).cuda(), n_lists=N_LISTS)
    want_d, want_i = index.search(QUERIES, k=5, n_probes=N_LISTS)
    dist, ids = index.search(torch.from_numpy(QUERIES).cuda(), k=5, n_probes=N_LISTS,
                             captures={"weights": torch.from_numpy(WEIGHTS).cuda()})
    assert isinstance(dist, torch.Tensor) and dist.is_cuda and ids.dtype == torch.int64 and ids.is_cuda
    assert np.array_equal(ids.cpu().numpy(), want_i) and np.array_equal(dist.cpu().numpy(), want_d)
    dist, ids = index.search(torch.from_numpy(QUERIES), k=5, n_probes=N_LISTS)  # host tensor in, host out
    assert isinstance(dist, torch.Tensor) and not dist.is_cuda and np.array_equal(ids.numpy(), want_i)
    # a tensor that needs grad is read without it
    q = torch.from_numpy(QUERIES).cuda().requires_grad_(True)
    d3, _ = index.search(q, k=5, n_probes=N_LISTS)
    assert not d3.requires_grad


def _general_path(short_path: str, value, **kw):
    """_arrays.as_array(value, **kw) with the short path `short_path` of _arrays turned off."""
    from udf import _arrays
    saved = getattr(_arrays, short_path)
    setattr(_arrays, short_path, lambda *a: None)
    try:
        return _arrays.as_array(value, **kw)
    finally:
        setattr(_arrays, short_path, saved)


def test_ready_torch_tensors_take_the_short_path_with_the_same_result():
    """_arrays.as_array reads a CUDA tensor that needs no conversion off the tensor
    (_ready_torch); the Arr is the general path's, and anything else takes the general path."""
    torch = _lib("torch")
    if not torch.cuda.is_available():
        pytest.skip("torch has no CUDA")
    from udf import _arrays

    general = functools.partial(_general_path, "_ready_torch")

    base = torch.arange(24, dtype=torch.float32, device="cuda").reshape(4, 6)
    ready = [(base, "f32"), (base[1:3], "f32"), (base[0], "f32"), (base.reshape(1, 24), None),
             (base.to(torch.int64), "i64"), (base.to(torch.uint8), "u8"), (base.to(torch.float16), "f16"),
             (base.clone().requires_grad_(True), "f32"), (base[:, :1], "f32")]
    for value, dtype in ready:
        assert _arrays._ready_torch(value, dtype, (1, 2), "x") is not None, (value.shape, value.dtype)
        fast, slow = _arrays.as_array(value, what="x", dtype=dtype), general(value, what="x", dtype=dtype)
        assert (fast.arg, fast.lib, fast.device, fast.dtype, fast.shape, fast.stream) == \
               (slow.arg, slow.lib, slow.device, slow.dtype, slow.shape, slow.stream), (value.shape, value.dtype)
        assert not fast.value.requires_grad
    # Strided rows, another dtype (converted or refused), host tensors, a wrong rank: the general path.
    others = [(base[:, ::2], "f32"), (base.to(torch.float16), "f32"), (base.double(), None), (base.cpu(), "f32"),
              (base.reshape(2, 3, 4), "f32"), (base.to(torch.float64), "f32")]
    for value, dtype in others:
        assert _arrays._ready_torch(value, dtype, (1, 2), "x") is None, (value.shape, value.dtype)
    assert _arrays.as_array(base[:, ::2], what="x", dtype="f32").arg[5] == 3  # copied: rows 3 apart
    assert _arrays.as_array(base.to(torch.float16), what="x", dtype="f32").dtype == "float32"
    with pytest.raises(TypeError, match="x: float64"):
        _arrays.as_array(base.to(torch.float64), what="x", dtype="f32")
    with pytest.raises(ValueError, match="expected a 1-D or 2-D array"):
        _arrays.as_array(base.reshape(2, 3, 4), what="x", dtype="f32")


def test_ready_cupy_arrays_take_the_short_path_with_the_same_result():
    """_arrays.as_array reads a CuPy array that needs no conversion off the array (_ready_cupy)
    as the raw tuple, as the general path does; anything else takes the general path."""
    cp = _lib("cupy")
    from udf import _arrays

    general = functools.partial(_general_path, "_ready_cupy")

    base = cp.arange(24, dtype=cp.float32).reshape(4, 6)
    ready = [(base, "f32"), (base[1:3], "f32"), (base[0], "f32"), (base.reshape(1, 24), None),
             (base.astype(cp.int64), "i64"), (base.astype(cp.uint8), "u8"), (base.astype(cp.float16), "f16"),
             (base[:, :1], "f32"), (base[::2], "f32")]
    for value, dtype in ready:
        assert _arrays._ready_cupy(value, dtype, (1, 2), "x") is not None, (value.shape, value.dtype)
        fast, slow = _arrays.as_array(value, what="x", dtype=dtype), general(value, what="x", dtype=dtype)
        assert (fast.arg, fast.lib, fast.device, fast.dtype, fast.shape, fast.stream) == \
               (slow.arg, slow.lib, slow.device, slow.dtype, slow.shape, slow.stream), (value.shape, value.dtype)
        assert fast.arg[0] == value.data.ptr and fast.arg[3:] == ((1, value.size, 0) if value.ndim == 1 else (
            value.shape[0], value.shape[1], value.strides[0] // value.itemsize if value.shape[0] > 1 else 0))
    assert _arrays.as_array(base[::2], what="x", dtype="f32").arg[5] == 12  # every other row, not copied
    # Strided rows, reversed rows, another dtype (converted or refused), a wrong rank: the general path.
    others = [(base[:, ::2], "f32"), (base[::-1], "f32"), (base.astype(cp.float16), "f32"), (base.astype(cp.float64), None),
              (base.reshape(2, 3, 4), "f32"), (base.astype(cp.float64), "f32")]
    for value, dtype in others:
        assert _arrays._ready_cupy(value, dtype, (1, 2), "x") is None, (value.shape, value.dtype)
    for value in (base[:, ::2], base[::-1]):  # copied: rows 3 and 6 apart, in order
        a = _arrays.as_array(value, what="x", dtype="f32")
        assert a.arg[5] == value.shape[1] and cp.array_equal(a.value, value)
    assert _arrays.as_array(base.astype(cp.float16), what="x", dtype="f32").dtype == "float32"
    with pytest.raises(TypeError, match="x: float64"):
        _arrays.as_array(base.astype(cp.float64), what="x", dtype="f32")
    with pytest.raises(ValueError, match="expected a 1-D or 2-D array"):
        _arrays.as_array(base.reshape(2, 3, 4), what="x", dtype="f32")
    # The outputs a search of CuPy queries allocates: CuPy arrays, handed over as raw tuples.
    out, arg = _arrays.empty_like(_arrays.as_array(base, what="x", dtype="f32"), (4, 10), "i64")
    assert isinstance(out, cp.ndarray) and out.dtype == cp.int64 and arg == (out.data.ptr, 0, 5, 4, 10, 10)
    assert _arrays.producer_stream([_arrays.as_array(base, what="x")], 0) == cp.cuda.get_current_stream().ptr


def test_cuda_array_interface_only(any_backend):
    nbcuda = pytest.importorskip("numba.cuda", reason="numba-cuda is not installed")
    m = wl2_metric(any_backend, "wl2_cai")
    index = udf.Index.build(m, DATA, n_lists=N_LISTS)
    want_d, want_i = index.search(QUERIES, k=5, n_probes=N_LISTS)

    class OnlyCAI:  # an object with nothing but __cuda_array_interface__
        def __init__(self, arr):
            self._arr = arr
            self.__cuda_array_interface__ = arr.__cuda_array_interface__

    dq = nbcuda.to_device(QUERIES)
    dist, ids = index.search(OnlyCAI(dq), k=5, n_probes=N_LISTS)
    assert hasattr(dist, "__cuda_array_interface__")
    assert np.array_equal(np.asarray(ids.copy_to_host() if hasattr(ids, "copy_to_host") else ids.get()), want_i)
    assert np.array_equal(np.asarray(dist.copy_to_host() if hasattr(dist, "copy_to_host") else dist.get()), want_d)


# ------------------------------------------------------------------------------- errors


def test_search_errors_are_runtime_errors(any_backend):
    m = wl2_metric(any_backend, "wl2_err")
    index = udf.Index.build(m, DATA, n_lists=N_LISTS)
    Status = udf.Status
    cases = [
        (dict(k=0), Status.INVALID_ARGUMENT, "k"),
        (dict(k=5000), Status.INVALID_ARGUMENT, "k"),
        (dict(n_probes=0), Status.INVALID_ARGUMENT, "n_probes"),
        (dict(n_probes=N_LISTS + 1), Status.INVALID_ARGUMENT, "n_probes"),
        (dict(captures={"nope": WEIGHTS}), Status.CAPTURE, "nope"),
        (dict(captures={"weights": WEIGHTS.astype(np.float64)}), Status.CAPTURE, "weights"),
        (dict(captures={"weights": 1.5}), Status.CAPTURE, "weights"),
    ]
    for kwargs, status, word in cases:
        args = dict(k=5, n_probes=4)
        args.update(kwargs)
        with pytest.raises(udf.UdfRuntimeError) as info:
            index.search(QUERIES, **args)
        assert info.value.status == status, (kwargs, info.value)
        assert word in info.value.message, (kwargs, info.value.message)
    with pytest.raises(udf.UdfRuntimeError) as info:  # wrong dimension
        index.search(np.zeros((2, DIM + 1), np.float32), k=5, n_probes=4)
    assert info.value.status == Status.INVALID_ARGUMENT and str(DIM) in info.value.message

    @udf.metric(captures={"w": "f32[]"}, backend=any_backend)
    def no_default(x, y, acc, ctx):
        return acc + ctx.w[ctx.dim] * (x - y)

    idx = udf.Index.build(no_default, DATA, n_lists=N_LISTS)
    with pytest.raises(udf.UdfRuntimeError, match=r"capture 'w' \(f32\[\]\) of metric no_default has no value"):
        idx.search(QUERIES, k=3, n_probes=2)
    with pytest.raises(udf.UdfRuntimeError) as info:  # more lists than rows
        udf.Index.build(m, DATA[:4], n_lists=8)
    assert info.value.status == Status.INVALID_ARGUMENT


def test_capture_mistakes_name_the_capture_and_the_fix(any_backend):
    """Search-time capture mistakes through a real index: the message names the capture, its
    declared type (with the index's dimension), what was given and the fix (test_api.py checks
    every case without a GPU)."""
    m = wl2_metric(any_backend, "wl2_capmsg")
    index = udf.Index.build(m, DATA, n_lists=N_LISTS)
    decl = f"capture 'weights' of metric {m.symbol} is f32[] (one float32 per dimension: {DIM})"
    for value, tail in ((WEIGHTS.astype(np.float64),
                         "got a float64 array: convert it, e.g. captures={'weights': value.astype(np.float32)}"),
                        (np.ones((2, DIM // 2), np.float32),
                         f"got an array of shape (2, {DIM // 2}): pass a 1-D array of one value per dimension (e.g. "
                         f"value.ravel(), if it holds them)"),
                        (WEIGHTS[:4], f"got 4 values (shape (4,)): pass {DIM} values, one per dimension of the index")):
        with pytest.raises(udf.UdfRuntimeError) as info:
            index.search(QUERIES, k=5, n_probes=2, captures={"weights": value})
        assert info.value.status == udf.Status.CAPTURE and info.value.message == f"{decl}, {tail}"


def test_zero_queries_give_empty_results(any_backend):
    """search() of zero queries: 0 x k results, float32 distances and int64 ids, of the queries'
    library and device, as for any other batch (the runtime is not called: udf_index_search
    takes at least one row)."""
    m = wl2_metric(any_backend, "wl2_zero")
    index = udf.Index.build(m, DATA, n_lists=N_LISTS)
    dist, ids = index.search(QUERIES[:0], k=5, n_probes=N_LISTS)
    assert isinstance(dist, np.ndarray) and isinstance(ids, np.ndarray)
    assert dist.shape == ids.shape == (0, 5) and dist.dtype == np.float32 and ids.dtype == np.int64
    with pytest.raises(udf.UdfRuntimeError, match=f"queries have dimension {DIM + 1}; the index has {DIM}"):
        index.search(np.zeros((0, DIM + 1), np.float32), k=5, n_probes=N_LISTS)
    d, i = index.search(QUERIES, k=5, n_probes=N_LISTS)  # and the index still searches
    assert d.shape == (len(QUERIES), 5)
    try:
        import cupy as cp
    except ImportError:
        cp = None
    if cp is not None:
        dist, ids = index.search(cp.asarray(QUERIES)[:0], k=5, n_probes=N_LISTS)
        assert isinstance(dist, cp.ndarray) and isinstance(ids, cp.ndarray) and dist.device.id == 0
        assert dist.shape == ids.shape == (0, 5) and dist.dtype == cp.float32 and ids.dtype == cp.int64
    try:
        import torch
    except ImportError:
        torch = None
    if torch is not None and torch.cuda.is_available():
        dist, ids = index.search(torch.from_numpy(QUERIES).cuda()[:0], k=5, n_probes=N_LISTS)
        assert isinstance(dist, torch.Tensor) and dist.is_cuda and ids.is_cuda
        assert tuple(dist.shape) == tuple(ids.shape) == (0, 5)
        assert dist.dtype == torch.float32 and ids.dtype == torch.int64


def test_gil_is_released_during_search(any_backend):
    m = wl2_metric(any_backend, "wl2_gil")
    big = clustered(200_000, seed=3)
    index = udf.Index.build(m, big, n_lists=64)
    queries = clustered(20_000, seed=4)
    index.search(queries[:100], k=10, n_probes=64)  # warm-up
    t0 = time.perf_counter()
    index.search(queries, k=100, n_probes=64)
    alone = time.perf_counter() - t0
    if alone < 0.05:
        pytest.skip(f"the search takes {alone * 1e3:.1f} ms here: too short to observe the GIL")
    old = sys.getswitchinterval()
    sys.setswitchinterval(0.001)
    try:
        worker = threading.Thread(target=index.search, args=(queries,), kwargs=dict(k=100, n_probes=64))
        ticks, gaps, last = 0, [], time.perf_counter()
        worker.start()
        while worker.is_alive():
            now = time.perf_counter()
            gaps.append(now - last)
            last = now
            ticks += 1
        worker.join()
    finally:
        sys.setswitchinterval(old)
    # With the GIL held by the search this thread would stall for the whole search.
    assert max(gaps) < 0.5 * alone, f"this thread stalled {max(gaps) * 1e3:.1f} ms of a {alone * 1e3:.1f} ms search"
    assert ticks > 100


# ------------------------------------------------------------------------------- ABI v2 metrics


def _np_pearson(data, queries) -> np.ndarray:
    """n_queries x rows Pearson correlation distances 1 - r, in float64."""
    x = data.astype(np.float64)
    q = queries.astype(np.float64)
    xc = x - x.mean(axis=1, keepdims=True)
    qc = q - q.mean(axis=1, keepdims=True)
    return 1.0 - (qc @ xc.T) / np.sqrt(np.outer((qc * qc).sum(1), (xc * xc).sum(1)))


def _np_js(data, queries) -> np.ndarray:
    """n_queries x rows Jensen-Shannon divergences of the rows normalised to sum 1, in float64."""
    p = data.astype(np.float64)
    p = p / p.sum(axis=1, keepdims=True)
    out = np.empty((len(queries), len(p)))
    for i, y in enumerate(queries.astype(np.float64)):
        q = y / y.sum()
        m = 0.5 * (p + q)
        with np.errstate(divide="ignore", invalid="ignore"):
            out[i] = 0.5 * (np.where(p > 0, p * np.log(p / m), 0.0).sum(1)
                            + np.where(q > 0, q * np.log(q / m), 0.0).sum(1))
    return out


def _v2_pearson(backend, name="pearson_v2"):
    def fin(s, ctx):
        n = np.float32(ctx.n_dims)
        cov = s[2] - s[0] * s[1] / n
        return np.float32(1.0) - cov / math.sqrt((s[3] - s[0] * s[0] / n) * (s[4] - s[1] * s[1] / n))

    def update(x, y, s, ctx):
        s[0] += x
        s[1] += y
        s[2] += x * y
        s[3] += x * x
        s[4] += y * y
    update.__name__ = f"{name}_{backend.replace('-', '_')}"
    return udf.metric(update, shape="state", finalize=fin, backend=backend)


def test_v2_state_metric_pearson(backend):
    """ABI v2, state shape, from Python: Pearson correlation distance (five running sums)."""
    m = _v2_pearson(backend)
    index = udf.Index.build(m, DATA, n_lists=N_LISTS)
    assert index.metric.shape == "state" and index.metric.abi == "v2"
    dist, ids = index.search(QUERIES, k=10, n_probes=N_LISTS)
    ref = _np_pearson(DATA, QUERIES)
    check_knn(dist, ids, ref, 10, rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(reference_matrix(m, DATA, QUERIES), ref, rtol=1e-5, atol=1e-6)


def test_v2_state_metric_int_state_and_initial(any_backend):
    """A state of i32 words for i8 vectors, with initial words: cosine without stored norms."""
    data, queries = clustered(ROWS, dtype=np.int8), clustered(5, seed=5, dtype=np.int8)

    def cos_i8_fin(s, ctx):
        return np.float32(1.0) - np.float32(s[0]) / math.sqrt(np.float32(s[1]) * np.float32(s[2]))

    @udf.metric(shape="state", finalize=cos_i8_fin, elem="i8", initial=[0, 1, 1], backend=any_backend)
    def cos_i8(x, y, s, ctx):
        s[0] += x * y
        s[1] += x * x
        s[2] += y * y

    index = udf.Index.build(cos_i8, data, n_lists=N_LISTS)
    dist, ids = index.search(queries, k=8, n_probes=N_LISTS)
    d, q = data.astype(np.float64), queries.astype(np.float64)
    ref = 1.0 - (q @ d.T) / np.sqrt(np.outer((q * q).sum(1) + 1.0, (d * d).sum(1) + 1.0))
    check_knn(dist, ids, ref, 8, rtol=1e-4, atol=1e-5)


def test_v2_vector_metrics_and_ctx(backend):
    """ABI v2, vector shape, from Python: a weighted L2 that also reads ctx.id (custom ids) and
    ctx.query (the row in the batch), and Jensen-Shannon over the whole vectors."""
    sfx = backend.replace("-", "_")

    def wl2_ids(x, y, n_dims, ctx):
        acc = np.float32(0.0)
        for i in range(n_dims):
            d = x[i] - y[i]
            acc += ctx.weights[i] * d * d
        return acc + np.float32(ctx.id % 5) * ctx.penalty + np.float32(ctx.query)
    wl2_ids.__name__ = f"wl2_ids_v2_{sfx}"
    m = udf.metric(wl2_ids, shape="vector", captures={"weights": WEIGHTS, "penalty": 0.75}, backend=backend)
    ids_in = np.arange(ROWS, dtype=np.int64) * 10 + 7
    index = udf.Index.build(m, DATA, n_lists=N_LISTS, ids=ids_in)
    assert index.metric.shape == "vector"
    dist, ids = index.search(QUERIES, k=10, n_probes=N_LISTS)
    diff = DATA[None, :, :].astype(np.float64) - QUERIES[:, None, :].astype(np.float64)
    ref = ((diff * diff * WEIGHTS.astype(np.float64)).sum(-1) + (ids_in % 5)[None, :] * 0.75
           + np.arange(len(QUERIES))[:, None])
    rows = (ids - 7) // 10  # back to rows, the reference's columns
    assert np.array_equal(ids_in[rows], ids)
    check_knn(dist, rows, ref, 10, rtol=1e-5, atol=1e-3)
    py_ref = np.stack([m.reference(DATA, q, ids=ids_in, query=i) for i, q in enumerate(QUERIES)])
    np.testing.assert_allclose(py_ref, ref, rtol=1e-5, atol=1e-4)

    # The same Jensen-Shannon distance the CPU-side tests compile (test_metric_v2.py).
    js = udf.metric(_named(js_distance, f"js_v2_{sfx}"), shape="vector", backend=backend)
    hist = np.abs(DATA) + np.float32(0.01)
    hist[::7, :3] = 0.0  # zero bins
    hq = np.abs(QUERIES) + np.float32(0.01)
    jindex = udf.Index.build(js, hist, n_lists=N_LISTS)
    dist, ids = jindex.search(hq, k=10, n_probes=N_LISTS)
    check_knn(dist, ids, _np_js(hist, hq), 10, rtol=1e-4, atol=1e-5)


def test_v2_and_v1_in_one_module(any_backend):
    """v1 and v2 metrics linked together; the lists rebound from one to the other."""
    pearson = _v2_pearson(any_backend, "pearson_mixed")
    v1 = wl2_metric(any_backend, "wl2_mixed")
    index = udf.Index.build([v1, pearson], DATA, n_lists=N_LISTS, metric=pearson.symbol)
    assert sorted(index.module.symbols) == sorted([v1.symbol, pearson.symbol])
    dist, ids = index.search(QUERIES, k=6, n_probes=N_LISTS)
    check_knn(dist, ids, _np_pearson(DATA, QUERIES), 6, rtol=1e-4, atol=1e-4)
    other = index.with_metric(index.module, v1.symbol)  # the same module, its v1 metric
    assert other.metric.abi == "v1"
    dist, ids = other.search(QUERIES, k=6, n_probes=N_LISTS)
    check_knn(dist, ids, reference_matrix(v1, DATA, QUERIES), 6)


# ------------------------------------------------------------------------------- time to first result


def test_index_build_links_on_demand_and_defaults_to_the_gpu_arch(any_backend):
    """Index.build links on demand (Module.on_demand): a search at k 10 then k 100 links each
    bucket when first needed, with the results of a module linked whole by udf.link; the whole
    module (module.data) links when asked for; udf.compile defaults to the GPU's arch."""
    m = wl2_metric(any_backend, "ondemand")
    arch = udf.device_info()["arch"]
    assert m.compile().archs == (arch,)
    assert m.compile("all").archs == udf.DEFAULT_ARCHS
    index = udf.Index.build(m, DATA, n_lists=N_LISTS)
    assert index.module.on_demand and index.metric.max_k == 1024
    whole = udf.Index.build(udf.link([m], archs=[arch]), DATA, n_lists=N_LISTS)
    assert not whole.module.on_demand
    ref = reference_matrix(m, DATA, QUERIES)
    for k in (10, 100):
        d, i = index.search(QUERIES, k=k, n_probes=N_LISTS)
        check_knn(d, i, ref, k)
        d2, i2 = whole.search(QUERIES, k=k, n_probes=N_LISTS)
        np.testing.assert_array_equal(d, d2)
    data = index.module.data  # every bucket, linked through the cache
    assert udf.Module.from_bytes(data).metrics[0].max_k == 1024


# ------------------------------------------------------------------------------- the nvrtc front end


def _front_end_cases():
    """(name, function, finalize, captures, elem, acc) searched with both front ends."""
    h = RNG.uniform(0.5, 1.5, DIM).astype(np.float16)
    kk = RNG.integers(0, 3, DIM).astype(np.int32)
    u = RNG.integers(0, 2, DIM).astype(np.uint8)

    def fe_wl2(x, y, acc, ctx):
        d = x - y
        return acc + ctx.w[ctx.dim] * d * d

    def fe_mixed(x, y, acc, ctx):
        i = ctx.dim
        s = ctx.w[i] * np.float32(ctx.h[i]) + np.float32(ctx.k[i]) + ctx.u[i]
        d = x - y
        return acc + ctx.p * s * d * d

    def fe_mixed_finalize(acc, ctx):
        return math.sqrt(acc) + np.float32(ctx.q)

    def fe_linf(x, y, acc, ctx):
        return max(acc, abs(x - y))

    def fe_float64(x, y, acc, ctx):  # computes in float64 (a float literal, an int literal)
        d = x - y
        return acc + 0.5 * d * d + 2 * d * d

    def fe_int_l1(x, y, acc, ctx):
        d = x - y
        if d < 0:
            d = -d
        return acc + d * ctx.q

    def fe_int_l1_finalize(acc, ctx):
        return np.float32(acc) * np.float32(0.5)

    caps = {"w": WEIGHTS, "h": h, "k": kk, "u": u, "p": 0.5, "q": 3}
    return [
        ("wl2", fe_wl2, None, {"w": WEIGHTS}, "f32", "f32"),
        ("mixed", fe_mixed, fe_mixed_finalize, caps, "f32", "f32"),
        ("linf", fe_linf, None, {}, "f32", "f32"),
        ("float64", fe_float64, None, {}, "f32", "f32"),
        ("int_l1_i8", fe_int_l1, fe_int_l1_finalize, {"q": 2}, "i8", "i32"),
        ("l2_f16", fe_wl2, None, {"w": WEIGHTS}, "f16", "f32"),
    ]


@pytest.mark.parametrize("case", [c[0] for c in _front_end_cases()])
def test_nvrtc_front_end_matches_numba_bit_for_bit(any_backend, case):
    """The same Python metric compiled by udf's translator ("nvrtc") and by numba: exact searches
    give the same distances, bit for bit, and the same ids."""
    name, fn, fin, caps, elem, acc = next(c for c in _front_end_cases() if c[0] == case)
    np_t = {"f32": np.float32, "f16": np.float16, "i8": np.int8}[elem]
    data, queries = clustered(ROWS, dtype=np_t), clustered(5, seed=5, dtype=np_t)
    results = {}
    for be in ("nvrtc", any_backend):
        fn.__name__ = f"fe_{name}_{be.replace('-', '_')}"
        if fin is not None:
            fin.__name__ = f"{fn.__name__}_fin"
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # the float64 case's warning
            m = udf.metric(fn, finalize=fin, captures=caps, elem=elem, acc=acc, backend=be)
        assert m.backend == be, m.nvrtc_unsupported
        index = udf.Index.build(m, data, n_lists=N_LISTS)
        d, i = index.search(queries, k=10, n_probes=N_LISTS)
        if fin is None and acc == "f32" and name != "float64":
            check_knn(d, i, reference_matrix(m, data, queries, None), 10, rtol=1e-3, atol=1e-2)
        results[be] = (d, i)
    (d0, i0), (d1, i1) = results["nvrtc"], results[any_backend]
    np.testing.assert_array_equal(d0.view(np.uint32), d1.view(np.uint32))
    # the same ids, but where distances tie (the integer metric) in any order
    for q in range(len(d0)):
        _, counts = np.unique(d0[q], return_counts=True)
        unique = np.isin(d0[q], np.unique(d0[q])[counts == 1])
        np.testing.assert_array_equal(i0[q][unique], i1[q][unique])
        assert set(i0[q].tolist()) == set(i1[q].tolist()) or not unique.all()


# ------------------------------------------------------------------------------- coarse weights


def test_coarse_weights_cluster_and_probe_in_the_metrics_space(tmp_path):
    """Index.build(coarse_weights=w) with a weighted L2: its lists are those of the rows scaled by
    sqrt(w) under the built-in l2 (the same centroids, bit for bit), its rows are kept as given,
    and its queries probe the lists the scaled queries probe there, so it recalls more than the
    plain coarse metric at the same n_probes; the weights survive save / load, come from host or
    device arrays, and bad ones are refused by name."""
    rng = np.random.default_rng(49)
    dim = DIM
    w = rng.uniform(0.2, 2.0, dim).astype(np.float32)
    w[2], w[5] = 0.0, 30.0  # a dimension the metric ignores and one it stresses
    s = np.sqrt(w)
    data = rng.normal(size=(6000, dim)).astype(np.float32)
    queries = rng.normal(size=(100, dim)).astype(np.float32)

    def cw_l2(x, y, acc, ctx):
        d = x - y
        return acc + ctx.w[ctx.dim] * d * d

    m = udf.metric(cw_l2, captures={"w": w})
    ix = udf.Index.build(m, data, n_lists=32, seed=5, coarse_weights=w)
    sx = udf.Index.build(udf.builtin_metric("sqeuclidean"), data * s, n_lists=32, seed=5)
    plain = udf.Index.build(m, data, n_lists=32, seed=5)
    np.testing.assert_array_equal(ix.centroids(), sx.centroids())
    assert not np.array_equal(plain.centroids(), ix.centroids())
    np.testing.assert_array_equal(ix.coarse_weights(), w)
    assert plain.coarse_weights() is None and sx.coarse_weights() is None

    d, i = ix.search(queries, k=10, n_probes=4)
    _, i_scaled = sx.search(queries * s, k=10, n_probes=4)
    same = sum(set(a) == set(b) for a, b in zip(i.tolist(), i_scaled.tolist()))
    assert same >= len(queries) - 2, f"{same} of {len(queries)} queries found what the scaled index finds"
    ref = ((data[None, :, :].astype(np.float64) - queries[:, None, :]) ** 2 * w).sum(-1)
    np.testing.assert_allclose(np.take_along_axis(ref, i, 1), d, rtol=1e-4, atol=1e-4)  # the rows as given
    truth = np.argsort(ref, axis=1)[:, :10]
    _, i_plain = plain.search(queries, k=10, n_probes=4)

    def recall(found):
        return np.mean([len(set(a) & set(b)) / 10 for a, b in zip(found.tolist(), truth.tolist())])

    assert recall(i) > recall(i_plain), (recall(i), recall(i_plain))

    path = tmp_path / "weighted.udfi"
    ix.save(path)
    back = udf.Index.load(path, m)
    np.testing.assert_array_equal(back.centroids(), ix.centroids())
    np.testing.assert_array_equal(back.coarse_weights(), w)
    d2, i2 = back.search(queries, k=10, n_probes=4)
    np.testing.assert_array_equal(i2, i)
    np.testing.assert_array_equal(d2, d)

    try:
        import cupy as cp
    except ImportError:
        cp = None
    if cp is not None:
        dev = udf.Index.build(m, cp.asarray(data), n_lists=32, seed=5, coarse_weights=cp.asarray(w))
        np.testing.assert_array_equal(dev.centroids(), ix.centroids())

    bad = w.copy()
    bad[3] = -1.0
    with pytest.raises(udf.UdfRuntimeError, match=r"coarse_weights\[3\]"):
        udf.Index.build(m, data, n_lists=32, coarse_weights=bad)
    with pytest.raises(ValueError, match="coarse_weights: 15 values"):
        udf.Index.build(m, data, n_lists=32, coarse_weights=w[:15])
    with pytest.raises(udf.UdfRuntimeError, match="cosine"):
        udf.Index.build(udf.builtin_metric("cosine"), data, n_lists=32, coarse_weights=w)


def test_declared_coarse_weights_are_the_builds_default(tmp_path):
    """A metric declared with coarse_weights="w" builds (build, build_chunked) as if given
    coarse_weights=w, the capture's declared value: the same centroids and results, bit for bit;
    coarse_weights= still overrides.  A module read from a file keeps no capture values, so its
    build asks for the weights (ValueError here; the runtime refuses such a build too,
    UDF_ERROR_CAPTURE naming the capture)."""
    rng = np.random.default_rng(7)
    dim = DIM
    w = rng.uniform(0.2, 2.0, dim).astype(np.float32)
    w[1] = 25.0
    data = rng.normal(size=(5000, dim)).astype(np.float32)
    queries = rng.normal(size=(50, dim)).astype(np.float32)

    def dw_l2(x, y, acc, ctx):
        d = x - y
        return acc + ctx.w[ctx.dim] * d * d

    decl = udf.metric(dw_l2, captures={"w": w}, coarse_weights="w")
    given = udf.metric(dw_l2, captures={"w": w})
    ix = udf.Index.build(decl, data, n_lists=32, seed=3)
    ref = udf.Index.build(given, data, n_lists=32, seed=3, coarse_weights=w)
    np.testing.assert_array_equal(ix.coarse_weights(), w)
    np.testing.assert_array_equal(ix.centroids(), ref.centroids())
    d, i = ix.search(queries, k=10, n_probes=4)
    d_ref, i_ref = ref.search(queries, k=10, n_probes=4)
    np.testing.assert_array_equal(i, i_ref)
    np.testing.assert_array_equal(d, d_ref)
    chunked = udf.Index.build_chunked(decl, [data[:2500], data[2500:]], n_lists=32, seed=3)
    np.testing.assert_array_equal(chunked.coarse_weights(), w)
    np.testing.assert_array_equal(chunked.centroids(), udf.Index.build_chunked(
        given, [data[:2500], data[2500:]], n_lists=32, seed=3, coarse_weights=w).centroids())
    ones = np.ones(dim, np.float32)
    np.testing.assert_array_equal(udf.Index.build(decl, data, n_lists=32, seed=3, coarse_weights=ones).coarse_weights(),
                                  ones)

    path = tmp_path / "decl.udfm"
    udf.link([decl], archs=[udf.device_info()["arch"]], max_k=32).save(path)
    loaded = udf.load_module(path)
    assert loaded.metric().coarse_weights == "w"
    with pytest.raises(ValueError, match=r"takes its coarse weights from capture 'w', which has no declared value"):
        udf.Index.build(loaded, data, n_lists=32, seed=3)
    from udf import _arrays
    from udf._index import _build_modules, _ext
    _, ext_mods, _ = _build_modules(loaded, 0, None)
    arg = _arrays.as_array(data, what="data", dtype="f32")
    with pytest.raises(udf.UdfRuntimeError, match=r"metric dw_l2 takes its coarse weights from capture 'w' \(udfc "
                                                  r"--coarse-weights\): pass its value as udf_index_params.coarse_weights"):
        _ext().Index.build(ext_mods[0], "dw_l2", arg.arg, None, n_lists=32, kmeans_iters=20, kmeans_mesoclusters=0,
                           seed=3, balance=2.0, max_train_rows=0, centroids=None, coarse_weights=None)
    back = udf.Index.build(loaded, data, n_lists=32, seed=3, coarse_weights=w)
    np.testing.assert_array_equal(back.centroids(), ix.centroids())
