"""udf.dask on the CPU: the top-k merge of shards, the plan that groups a Dask array's chunks
into shards, the saved manifest's checks, what is sent to workers for a metric, and a build
on a local (threads) cluster without a GPU failing cleanly.  The GPU path is in
test_dask_gpu.py."""
from __future__ import annotations

import json
import pickle

import numpy as np
import pytest

import udf
from conftest import gpu_status

distributed = pytest.importorskip("distributed", reason="dask distributed is not installed (pip install udf[dask])")
import udf.dask as udd  # noqa: E402


def _topk(d, ids, k, order):
    """Reference: a stable sort of one row's candidates (pads last)."""
    key = [(i < 0, dd if order == "min" else -dd, j) for j, (dd, i) in enumerate(zip(d, ids))]
    cols = [j for _, _, j in sorted(key)][:k]
    return d[cols], ids[cols]


def _sorted_result(rng, n, k, order, pad_from=None, grid=None, id0=0):
    d = rng.integers(0, grid, (n, k)).astype(np.float32) if grid else rng.normal(size=(n, k)).astype(np.float32)
    d = np.sort(d, axis=1) if order == "min" else -np.sort(-d, axis=1)
    ids = (id0 + np.arange(n * k).reshape(n, k)).astype(np.int64)
    if pad_from is not None:
        d[:, pad_from:] = np.inf if order == "min" else -np.inf
        ids[:, pad_from:] = -1
    return d, ids


@pytest.mark.parametrize("order", ["min", "max"])
@pytest.mark.parametrize("grid", [None, 3])  # 3: many ties between the two sides
def test_merge_topk_is_the_stable_k_best(order, grid):
    rng = np.random.default_rng(5)
    for k, ka, kb, pad_a, pad_b in ((10, 10, 10, None, None), (10, 10, 10, 4, 7), (5, 8, 3, None, 1),
                                    (12, 5, 4, None, None)):
        a = _sorted_result(rng, 30, ka, order, pad_a, grid)
        b = _sorted_result(rng, 30, kb, order, pad_b, grid, id0=10_000)
        d, i = udd.merge_topk(a, b, k, order)
        assert d.shape == i.shape == (30, k) and d.dtype == np.float32 and i.dtype == np.int64
        for r in range(30):
            cd = np.concatenate([a[0][r], b[0][r]])
            ci = np.concatenate([a[1][r], b[1][r]])
            wd, wi = _topk(cd, ci, k, order)
            n = len(wd)
            np.testing.assert_array_equal(d[r, :n], wd)
            np.testing.assert_array_equal(i[r, :n], wi)
            assert (i[r, n:] == -1).all()  # fewer candidates than k: padded
            assert (d[r, n:] == (np.inf if order == "min" else -np.inf)).all()
        if grid:  # ties go to a: for each row, an a-id never follows a b-id of the same distance
            for r in range(30):
                for j in range(1, k):
                    if d[r, j] == d[r, j - 1] and i[r, j] >= 0 and i[r, j - 1] >= 0:
                        assert not (i[r, j - 1] >= 10_000 > i[r, j]), (r, j)


def test_merge_topk_checks_its_arguments():
    a = (np.zeros((2, 3), np.float32), np.zeros((2, 3), np.int64))
    with pytest.raises(ValueError, match="order"):
        udd.merge_topk(a, a, 3, "smallest")
    with pytest.raises(ValueError, match="shapes"):
        udd.merge_topk(a, (np.zeros((3, 3), np.float32), np.zeros((3, 3), np.int64)), 3, "min")


def test_plan_row_chunks_is_contiguous_and_balanced():
    rng = np.random.default_rng(3)
    for _ in range(200):
        chunks = rng.integers(1, 1000, rng.integers(1, 40)).tolist()
        n = int(rng.integers(1, 9))
        groups = udd.plan_row_chunks(chunks, n)
        assert len(groups) == n
        assert [c for g in groups for c in g] == list(range(len(chunks)))  # every chunk once, in order
        rows = [sum(chunks[c] for c in g) for g in groups]
        assert sum(rows) == sum(chunks)
        if len(chunks) >= n:  # no shard further from its share than a chunk
            assert max(rows) <= sum(chunks) / n + max(chunks)
    assert udd.plan_row_chunks([5, 5, 5, 5], 2) == [[0, 1], [2, 3]]
    assert udd.plan_row_chunks([10], 3) == [[], [0], []]
    with pytest.raises(ValueError):
        udd.plan_row_chunks([1], 0)


def _write(dirpath, manifest):
    (dirpath / udd.MANIFEST).write_text(json.dumps(manifest))


def test_read_manifest_names_what_is_wrong(tmp_path):
    good = {"format": udd.MANIFEST_FORMAT, "metric": "m", "cache_key": "abc", "dim": 4, "n_lists": 2,
            "elem": "f32", "order": "min", "shards": [{"file": "shard-0000.udfi", "size": 3}]}
    _write(tmp_path, good)
    assert udd.read_manifest(tmp_path)["shards"][0]["size"] == 3

    with pytest.raises(udf.UdfRuntimeError, match="not found") as e:
        udd.read_manifest(tmp_path / "nowhere")
    assert e.value.status == udf.Status.IO
    (tmp_path / udd.MANIFEST).write_text("{not json")
    with pytest.raises(udf.UdfRuntimeError, match=udd.MANIFEST) as e:
        udd.read_manifest(tmp_path)
    assert e.value.status == udf.Status.BAD_FORMAT
    for change, message in (({"format": "other"}, "format 'other'"), ({"dim": "4"}, "'dim'"),
                            ({"shards": []}, "no shards"),
                            ({"shards": [{"file": "../x.udfi", "size": 3}]}, r"shards\[0\]"),
                            ({"shards": [{"file": "a.udfi"}]}, r"shards\[0\]")):
        _write(tmp_path, {**good, **change})
        with pytest.raises(udf.UdfRuntimeError, match=message) as e:
            udd.read_manifest(tmp_path)
        assert e.value.status == udf.Status.BAD_FORMAT


def test_metrics_travel_as_artifacts_or_module_bytes(tmp_path):
    @udf.metric(captures={"w": np.ones(4, np.float32)})
    def dask_wl2(x, y, acc, ctx):
        d = x - y
        return acc + ctx.w[ctx.dim] * d * d

    with pytest.raises(TypeError):
        pickle.dumps(dask_wl2)  # why they are converted
    art = udd.portable_metric(dask_wl2, archs=[90])
    assert isinstance(art, udf.Artifact) and art.archs == (90,) and art.symbol == "dask_wl2"
    back = pickle.loads(pickle.dumps(art))
    assert back.cache_key == art.cache_key and udd._worker_metric(back) is back
    np.testing.assert_array_equal(udf._index.capture_defaults_of(back, "dask_wl2")["w"], np.ones(4, np.float32))

    path = tmp_path / "m.udfa"
    art.save(path)
    assert udd.portable_metric(str(path)).cache_key == art.cache_key

    mod = udf.link([art], archs=[90])
    spec = udd.portable_metric(mod)
    assert spec[0] == "udfm" and isinstance(spec[1], bytes)
    again = udd._worker_metric(pickle.loads(pickle.dumps(spec)))
    assert isinstance(again, udf.Module) and again.symbols == mod.symbols
    lst = udd.portable_metric([art, mod])
    assert isinstance(lst, list) and lst[0] is art and lst[1][0] == "udfm"


def test_a_build_that_fails_on_the_workers_leaves_nothing_there():
    """No GPU here (or a metric that does not fit the data): the build raises the workers' error
    and drops the rows the workers loaded."""
    art = udf.builtin_metric("sqeuclidean", "f32")
    parts = [np.ones((50, 4), np.float32), lambda: np.ones((30, 4), np.float32)]
    with distributed.Client(processes=False, n_workers=2, threads_per_worker=1, dashboard_address=None) as client:
        with pytest.raises((udf.UdfError, ValueError, TypeError)):
            udd.Index.build(client, art, parts, n_lists=2, kmeans_iters=1, centroids=np.zeros((2, 5)))
        assert not udd._SHARDS
        with pytest.raises(ValueError, match="different widths"):
            udd.Index.build(client, art, [np.ones((5, 4), np.float32), np.ones((5, 3), np.float32)], n_lists=2)
        assert not udd._SHARDS
        with pytest.raises(ValueError, match="2-D"):
            udd.Index.build(client, art, [lambda: np.ones(5, np.float32)], n_lists=2)
        assert not udd._SHARDS
        with pytest.raises(ValueError, match="part 1 has no rows"):
            udd.Index.build(client, art, [np.ones((5, 4), np.float32), np.ones((0, 4), np.float32)], n_lists=2)
        assert not udd._SHARDS
        with pytest.raises(ValueError, match=r"coarse_weights have shape \(3,\); expected \(4,\)"):
            udd.Index.build(client, art, parts, n_lists=2, coarse_weights=np.ones(3, np.float32))
        assert not udd._SHARDS
        if not gpu_status()[0]:  # k-means on a worker: no driver here
            with pytest.raises(udf.UdfRuntimeError) as e:
                udd.Index.build(client, art, parts, n_lists=2, kmeans_iters=1)
            assert e.value.status == udf.Status.NO_DRIVER
            assert not udd._SHARDS
            with pytest.raises(udf.UdfRuntimeError) as e:  # the weights travel to the k-means' worker
                udd.Index.build(client, art, parts, n_lists=2, kmeans_iters=1, coarse_weights=np.ones(4, np.float32))
            assert e.value.status == udf.Status.NO_DRIVER
            assert not udd._SHARDS


def test_a_metrics_declared_coarse_weights_go_to_the_build():
    """udf.dask resolves the coarse weights on the client, as udf.Index.build does: a metric that
    names a capture as its coarse weights (coarse_weights="w") builds with that capture's declared
    value, so a value of the wrong length is refused before any worker runs; a capture declared
    without a value asks for them; weights given to the build win."""
    def dask_decl(x, y, acc, ctx):
        d = x - y
        return acc + ctx.w[ctx.dim] * d * d

    short = udf.metric(dask_decl, captures={"w": np.ones(3, np.float32)}, coarse_weights="w")
    bare = udf.metric(dask_decl, captures={"w": "f32[]"}, coarse_weights="w")
    parts = [np.ones((50, 4), np.float32), np.ones((30, 4), np.float32)]
    with distributed.Client(processes=False, n_workers=2, threads_per_worker=1, dashboard_address=None) as client:
        with pytest.raises(ValueError, match=r"coarse_weights have shape \(3,\); expected \(4,\)"):
            udd.Index.build(client, short, parts, n_lists=2, kmeans_iters=1)
        assert not udd._SHARDS
        with pytest.raises(ValueError, match=r"metric dask_decl takes its coarse weights from capture 'w', which "
                                             r"has no declared value here"):
            udd.Index.build(client, bare, parts, n_lists=2, kmeans_iters=1)
        assert not udd._SHARDS
        if not gpu_status()[0]:  # given weights of the right length reach the k-means' worker: no driver here
            with pytest.raises(udf.UdfRuntimeError) as e:
                udd.Index.build(client, short, parts, n_lists=2, kmeans_iters=1, coarse_weights=np.ones(4, np.float32))
            assert e.value.status == udf.Status.NO_DRIVER
            assert not udd._SHARDS


def test_merge_tree_keeps_the_order_and_is_shallow():
    def flat(node):  # the order in which the tree merges: a node, then each child's subtree
        item, kids = node
        return [item] + [x for kid in kids for x in flat(kid)]

    def depth(node):
        return 1 + max((depth(k) for k in node[1]), default=0)
    for n in range(1, 40):
        tree = udd.merge_tree(list(range(n)))
        assert flat(tree) == list(range(n))
        assert depth(tree) <= max(1, n.bit_length())
        assert all(len(kids) <= 2 for kids in _nodes(tree))
    with pytest.raises(ValueError):
        udd.merge_tree([])


def _nodes(node):
    yield node[1]
    for kid in node[1]:
        yield from _nodes(kid)


class _FakeShard:
    """Stands for a udf.Index on a worker: 1-D "vectors", squared distance, stable top-k."""

    class metric:  # noqa: N801
        order = "min"

    def __init__(self, values, first_id):
        self.values = np.asarray(values, np.float64)
        self.ids = np.arange(first_id, first_id + len(values), dtype=np.int64)
        self.n_lists = 4

    def __len__(self):
        return len(self.values)

    def search(self, queries, k, n_probes, captures=None, max_batch=0):
        d = ((np.asarray(queries, np.float64)[:, :1] - self.values[None, :]) ** 2).astype(np.float32)
        cols = np.argsort(d, axis=1, kind="stable")[:, :k]
        return np.take_along_axis(d, cols, 1), self.ids[cols]


@pytest.mark.parametrize("n_shards", [1, 2, 3, 5])
def test_search_merges_every_shard_through_the_actor_tree(n_shards):
    """The search path (actors, the tree, padding of small shards, batches) without a GPU: fake
    shards on the workers of a local cluster of threads give the stable brute force over all."""
    rng = np.random.default_rng(n_shards)
    sizes = [int(x) for x in rng.integers(3, 40, n_shards)]
    if n_shards > 1:
        sizes[0] = 3  # smaller than k
    values = [rng.integers(0, 12, n).astype(np.float64) for n in sizes]  # many ties
    firsts = np.concatenate([[0], np.cumsum(sizes)[:-1]]).tolist()
    key = f"fake-{n_shards}"
    q = rng.integers(0, 12, (9, 2)).astype(np.float32)
    k = 6
    with distributed.Client(processes=False, n_workers=2, threads_per_worker=1, dashboard_address=None) as client:
        workers = sorted(client.scheduler_info()["workers"])
        shard_workers = [workers[s % 2] for s in range(n_shards)]
        for s in range(n_shards):
            udd._SHARDS[(key, s)] = {"index": _FakeShard(values[s], firsts[s])}
        infos = [{"size": sizes[s], "dim": 2, "n_lists": 4, "elem": "f32", "metric": "fake", "order": "min",
                  "cache_key": "c", "max_k": 1024, "device": 0, "visible_devices": None} for s in range(n_shards)]
        ix = udd.Index(client, key, shard_workers, infos, None, None)
        try:
            all_values = np.concatenate(values)
            want_d, want_i = _FakeShard(all_values, 0).search(q, k, 4)
            for batch_rows in (0, 4):
                d, i = ix.search(q, k=k, n_probes=4, batch_rows=batch_rows)
                np.testing.assert_array_equal(d, want_d)
                np.testing.assert_array_equal(i, want_i)  # ties: the smaller shard, then its own order
            with pytest.raises(udf.UdfRuntimeError, match="exceeds the index size"):
                ix.search(q, k=sum(sizes) + 1)
            with pytest.raises(ValueError, match="shape"):
                ix.search(q[:, :1], k=2)
        finally:
            ix.close()
        assert not any(k_[0] == key for k_ in udd._SHARDS)
        with pytest.raises(udf.UdfRuntimeError, match="closed"):
            ix.search(q, k=2)


def test_shards_that_do_not_fit_together_are_refused():
    info = {"size": 5, "dim": 2, "n_lists": 4, "elem": "f32", "metric": "fake", "order": "min", "cache_key": "c",
            "max_k": 1024, "device": 0, "visible_devices": None}
    with distributed.Client(processes=False, n_workers=1, threads_per_worker=1, dashboard_address=None) as client:
        w = sorted(client.scheduler_info()["workers"])
        for field, other in (("dim", 3), ("cache_key", "d"), ("n_lists", 8)):
            with pytest.raises(udf.UdfRuntimeError, match=f"shard 1 has {field}") as e:
                udd.Index(client, "k", w * 2, [info, {**info, field: other}], None, None)
            assert e.value.status == udf.Status.MISMATCH
