"""udf.dask on the GPU: a local cluster of two single-GPU worker processes (devices [0, 1], or
[0, 0] with one GPU), an index sharded over them by vectors.  Its results are those of one
udf.Index over all the rows with the same centroids (balance 0): distances bit for bit, ids
wherever the distance has no tie; all lists probed, the float64 brute force.  Every way of
giving parts (arrays, a Dask array, loaders with ids, a Delayed), a shard smaller than k, a
max-ordered metric, captures, save / load and its checks, close.

Marked `gpu` (skipped, with the reason, without a GPU); needs dask and distributed."""
from __future__ import annotations

import json
import os

import numpy as np
import pytest

import udf
from conftest import PYTHON_DIR, TESTS_DIR, gpu_status
from test_gpu import WEIGHTS, check_knn, clustered

pytestmark = pytest.mark.gpu
distributed = pytest.importorskip("distributed", reason="dask distributed is not installed (pip install udf[dask])")
da = pytest.importorskip("dask.array", reason="dask is not installed")
import udf.dask as udd  # noqa: E402

DIM = WEIGHTS.shape[0]
N_LISTS = 16


@pytest.fixture(scope="module")
def client():
    ok, why = gpu_status()
    if not ok:
        pytest.skip(f"no CUDA GPU: {why}")
    devices = [0, 1] if int(why.split()[0]) >= 2 else [0, 0]
    # the workers are new processes: they find udf and these tests' modules as this one does
    path = [str(PYTHON_DIR), str(TESTS_DIR), *filter(None, os.environ.get("PYTHONPATH", "").split(os.pathsep))]
    os.environ["PYTHONPATH"] = os.pathsep.join(path)
    with udd.local_gpu_cluster(devices) as cluster, distributed.Client(cluster) as c:
        c.wait_for_workers(len(devices))
        c.devices = devices
        yield c


def _wl2():
    @udf.metric(captures={"weights": WEIGHTS})
    def dask_wl2(x, y, acc, ctx):
        d = x - y
        return acc + ctx.weights[ctx.dim] * d * d
    return dask_wl2


def _ip():
    @udf.metric(order="max", initial=0.0, coarse_metric="inner_product")
    def dask_ip(x, y, acc, ctx):
        return acc + x * y
    return dask_ip


def _same_as_one_index(got, want, what):
    """Distances bit for bit; ids equal wherever the distance is not tied with a neighbour's."""
    (dg, ig), (dw, iw) = (tuple(np.asarray(a) for a in r) for r in (got, want))
    assert dg.shape == dw.shape, what
    np.testing.assert_array_equal(dg.view(np.uint32), dw.view(np.uint32), err_msg=f"{what}: distances")
    tied = np.zeros(dw.shape, bool)
    tied[:, 1:] |= dw[:, 1:] == dw[:, :-1]
    tied[:, :-1] |= dw[:, :-1] == dw[:, 1:]
    tied[:, -1] = True  # the k-th may tie with a candidate beyond k
    assert (~tied).sum() > dw.size // 2, f"{what}: too many ties to compare ids"
    np.testing.assert_array_equal(ig[~tied], iw[~tied], err_msg=f"{what}: ids")


def _reference(metric, data, q, order):
    x, y = data.astype(np.float64), q.astype(np.float64)
    if order == "min":
        return (((y[:, None, :] - x[None, :, :]) ** 2) * WEIGHTS.astype(np.float64)).sum(-1)
    return y @ x.T


@pytest.mark.parametrize("kind", ["wl2", "ip"])
def test_shards_give_the_one_index_results(client, kind):
    m, order = (_wl2(), "min") if kind == "wl2" else (_ip(), "max")
    data = clustered(4000, DIM, seed=11)
    q = clustered(50, DIM, seed=12)
    parts = [data[:1500], data[1500:]]
    with udd.Index.build(client, m, parts, n_lists=N_LISTS, balance=0, kmeans_iters=5) as ix:
        assert (ix.n_shards, ix.size, ix.dim, ix.n_lists, ix.order) == (2, 4000, DIM, N_LISTS, order)
        assert [s["size"] for s in ix.shards] == [1500, 2500]
        # shards go to the workers in address order: one shard on each worker's GPU
        assert sorted(s["visible_devices"] for s in ix.shards) == sorted(str(d) for d in client.devices)
        assert len({s["worker"] for s in ix.shards}) == 2
        cen = ix.centroids
        assert cen.shape == (N_LISTS, DIM) and cen.dtype == np.float32
        one = udf.Index.build(m, data, n_lists=N_LISTS, balance=0, centroids=cen)
        for k in (10, 100):
            for probes in (3, N_LISTS):
                got = ix.search(q, k=k, n_probes=probes)
                _same_as_one_index(got, one.search(q, k=k, n_probes=probes), f"k {k}, n_probes {probes}")
                if probes == N_LISTS:
                    check_knn(*got, _reference(m, data, q, order), k, order=order)
        # batches of queries: the same as one batch; a 1-D query: one row
        _same_as_one_index(ix.search(q, k=10, n_probes=4, batch_rows=7), ix.search(q, k=10, n_probes=4),
                           "batch_rows 7")
        d1, i1 = ix.search(q[3], k=10, n_probes=4)
        assert d1.shape == i1.shape == (10,)
        np.testing.assert_array_equal(i1, ix.search(q, k=10, n_probes=4)[1][3])
        with pytest.raises(udf.UdfRuntimeError, match="n_probes"):
            ix.search(q, k=10, n_probes=N_LISTS + 1)
        if kind == "wl2":  # captures reach every shard
            w2 = np.full(DIM, 2.0, np.float32)
            got = ix.search(q, k=10, n_probes=N_LISTS, captures={"weights": w2})
            want = one.search(q, k=10, n_probes=N_LISTS, captures={"weights": w2})
            _same_as_one_index(got, want, "weights 2")


def test_parts_from_dask_arrays_loaders_and_delayed(client, tmp_path):
    import dask
    m = udf.builtin_metric("sqeuclidean", "f32")
    data = clustered(3000, DIM, seed=21)
    # a Dask array: ids are the global row numbers, so every row finds itself first
    arr = da.from_array(data, chunks=(400, DIM))
    with udd.Index.build(client, m, arr, n_lists=N_LISTS, kmeans_iters=3) as ix:
        assert ix.size == 3000 and sum(s["size"] for s in ix.shards) == 3000
        d, i = ix.search(data[::37], k=1, n_probes=N_LISTS)
        np.testing.assert_array_equal(d[:, 0], 0)
        np.testing.assert_array_equal(i[:, 0], np.arange(3000)[::37])
    # loaders run on the workers, with ids; a Delayed part
    for j in range(2):
        np.save(tmp_path / f"part{j}.npy", data[j * 1000:(j + 1) * 1000])
    ids = [np.arange(1000, dtype=np.int64) * 3 + 7, np.arange(1000, dtype=np.int64) * 3 + 8]

    def loader(j):
        return lambda: (np.load(tmp_path / f"part{j}.npy"), ids[j])
    parts = [loader(0), loader(1), dask.delayed(lambda: (data[2000:], np.arange(1000) * 3 + 9))()]
    with udd.Index.build(client, m, parts, n_lists=N_LISTS, kmeans_iters=3) as ix:
        assert ix.n_shards == 3 and [s["size"] for s in ix.shards] == [1000, 1000, 1000]
        d, i = ix.search(data[::37], k=1, n_probes=N_LISTS)
        np.testing.assert_array_equal(d[:, 0], 0)
        r = np.arange(3000)[::37]
        np.testing.assert_array_equal(i[:, 0], (r % 1000) * 3 + 7 + r // 1000)  # part p's row j: id 3j + 7 + p
    with pytest.raises(ValueError, match="ids for all or none"):
        udd.Index.build(client, m, [data[:100], lambda: (data[100:200], np.arange(100))], n_lists=4)


def test_a_shard_smaller_than_k(client):
    m = udf.builtin_metric("sqeuclidean", "f32")
    data = clustered(2000, DIM, seed=31)
    q = clustered(20, DIM, seed=32)
    with udd.Index.build(client, m, [data[:5], data[5:]], n_lists=N_LISTS, balance=0) as ix:
        one = udf.Index.build(m, data, n_lists=N_LISTS, balance=0, centroids=ix.centroids)
        for probes in (2, N_LISTS):
            _same_as_one_index(ix.search(q, k=32, n_probes=probes), one.search(q, k=32, n_probes=probes),
                               f"n_probes {probes}")
    with udd.Index.build(client, m, [data[:3], data[3:8]], n_lists=2, centroids=data[:2]) as tiny:
        d, i = tiny.search(q[:4], k=8, n_probes=2)
        assert sorted(i[0].tolist()) == list(range(8))
        with pytest.raises(udf.UdfRuntimeError, match="exceeds the index size"):
            tiny.search(q[:4], k=9)


def test_save_load_and_close(client, tmp_path):
    m = _wl2()
    art = udf.compile(m, archs=udf.DEFAULT_ARCHS)
    data = clustered(3000, DIM, seed=41)
    q = clustered(30, DIM, seed=42)
    ix = udd.Index.build(client, art, [data[:1200], data[1200:]], n_lists=N_LISTS)
    want = ix.search(q, k=10, n_probes=4)
    path = tmp_path / "saved"
    ix.save(path)
    manifest = json.loads((path / udd.MANIFEST).read_text())
    assert [s["file"] for s in manifest["shards"]] == ["shard-0000.udfi", "shard-0001.udfi"]
    assert manifest["metric"] == "dask_wl2" and manifest["centroids"] == udd.CENTROIDS
    with udd.Index.load(client, path, art) as back:
        assert (back.size, back.n_shards) == (3000, 2)
        np.testing.assert_array_equal(back.centroids, ix.centroids)
        _same_as_one_index(back.search(q, k=10, n_probes=4), want, "loaded")
        d, i = back.search(q, k=10, n_probes=4)
        np.testing.assert_array_equal(i, want[1])  # the same shards, the same order: ids too
    # one shard's file loads on one GPU as an ordinary index file
    alone = udf.Index.load(path / "shard-0001.udfi", art)
    assert alone.size == 1800
    # a manifest that does not match its files, another metric: named errors, nothing left behind
    manifest["shards"][1]["size"] = 1799
    (path / udd.MANIFEST).write_text(json.dumps(manifest))
    with pytest.raises(udf.UdfRuntimeError, match="shard 1") as e:
        udd.Index.load(client, path, art)
    assert e.value.status == udf.Status.MISMATCH
    with pytest.raises(udf.UdfRuntimeError) as e:
        udd.Index.load(client, path, udf.builtin_metric("sqeuclidean", "f32"))
    assert e.value.status == udf.Status.MISMATCH
    held = client.run(lambda: len(udd._SHARDS))
    assert sum(held.values()) == 2  # ix's two shards only
    ix.close()
    assert sum(client.run(lambda: len(udd._SHARDS)).values()) == 0
    with pytest.raises(udf.UdfRuntimeError, match="closed"):
        ix.search(q, k=10)
