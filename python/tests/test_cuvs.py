"""cuVS IVF-Flat indexes (udf.Index.from_cuvs, udf.cuvs_to_index_file; the reader is
lib/runtime/index/cuvs_file.h).

On the CPU, without cuVS: files in the layout cuVS writes, made by the fuzz seeds' writer
(test/fuzz/make_seeds.py, which follows cuVS's ivf_flat_serialize.cuh and raft's .npy blocks byte
for byte), for every element type and metric, converted to this runtime's index file hold the
centroids (int8 / uint8 ones times 128 / 256, cosine ones normalized), list sizes, ids and vectors
(cosine ones normalized) exactly; damaged files and other objects are refused naming the field.
Files the real cuVS 26.10 wrote (test/data/cuvs_26_10, serialization version 5) convert to the
rows they were built from.

With the real cuVS (cuvs.neighbors.ivf_flat; these tests skip, saying so, without it) on the GPU
(marked `gpu`; cuVS needs one too): an index built and saved by cuVS, loaded with
udf.Index.from_cuvs and searched with the built-in metric of its coarse metric and the same
n_probes, gives cuVS's neighbours (recall@10 1.0 for every query whose probed lists and k nearest
rows are no near tie), holds cuVS's centroids and list sizes, equals udf.cuvs_to_index_file +
udf.Index.load, and equals an index built here over cuVS's centroids (build(centroids=...,
balance=0)), whose lists are the same when cuVS assigns each row to its nearest centroid.
"""
from __future__ import annotations

import importlib.util
from pathlib import Path

import numpy as np
import pytest

import udf
from udfi import read_index_file

ROOT = Path(__file__).resolve().parents[2]
SEEDS = ROOT / "test" / "fuzz" / "corpus" / "cuvs_file"
KEY = "k" * 64
DIM = 16
N_LISTS = 32
K = 10
NPROBE = 4
# cuVS's metric names (cuvs.neighbors.ivf_flat.IndexParams) -> its DistanceType, this runtime's
# built-in metric, and the index file's coarse field (0 l2, 1 inner product, 0x100: normalized)
METRICS = {"sqeuclidean": (0, "sqeuclidean", 0), "euclidean": (1, "euclidean", 0),
           "inner_product": (6, "inner_product", 1), "cosine": (2, "cosine", 0x101)}
SCALE = {"f32": 1, "f16": 1, "i8": 128, "u8": 256}  # cuVS's centers times this = the runtime's


def _writer():
    spec = importlib.util.spec_from_file_location("make_seeds", ROOT / "test" / "fuzz" / "make_seeds.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod.cuvs_ivf_flat


def vectors(rows: int, seed: int, elem: str = "f32", dim: int = DIM, centers: int = 20) -> np.ndarray:
    """Clustered rows of `elem`: f32 / f16 around normal centres, i8 in -100 .. 100, u8 in 0 .. 255."""
    rng = np.random.default_rng(seed)
    c = rng.normal(0.0, 3.0, (centers, dim))
    x = c[rng.integers(0, centers, rows)] + rng.normal(0.0, 1.0, (rows, dim))
    if elem == "i8":
        return np.clip(np.rint(x * 12), -100, 100).astype(np.int8)
    if elem == "u8":
        return np.clip(np.rint(x * 15 + 128), 0, 255).astype(np.uint8)
    return x.astype(np.float16 if elem == "f16" else np.float32)


def normalized(x: np.ndarray) -> np.ndarray:
    x = x.astype(np.float64)
    n = np.sqrt((x * x).sum(axis=-1, keepdims=True))
    return np.divide(x, n, out=np.zeros_like(x), where=n > 0)


# ---- on the CPU: files in cuVS's layout


def written(tmp_path, elem: str, metric: str, dim: int = DIM):
    """A file in cuVS's layout: 5 lists (one empty, one over 32 rows), ids 1000 + 7i; returns
    (path, centers, lists)."""
    rng = np.random.default_rng(7)
    centers = rng.normal(0.0, 1.0, (5, dim)).astype(np.float32) / SCALE[elem]
    sizes = [3, 0, 40, 1, 9]
    data = vectors(sum(sizes), 8, elem, dim)
    lists, at = [], 0
    for s in sizes:
        lists.append(((1000 + 7 * np.arange(at, at + s)).tolist(), data[at:at + s].tolist()))
        at += s
    b = _writer()(elem, dim, centers.ravel().tolist(), lists, metric=METRICS[metric][0],
                  has_norms=metric != "inner_product")
    path = tmp_path / f"{elem}-{metric}.cuvs"
    path.write_bytes(b)
    return path, centers, lists


CPU_CASES = [("f32", m) for m in METRICS] + [("f16", "sqeuclidean"), ("f16", "cosine"), ("i8", "sqeuclidean"),
                                               ("i8", "inner_product"), ("u8", "euclidean")]


@pytest.mark.parametrize("elem,metric", CPU_CASES, ids=[f"{e}-{m}" for e, m in CPU_CASES])
@pytest.mark.parametrize("dim", [DIM, 12], ids=["dim16", "dim12"])
def test_converted_file_holds_the_lists(ext, tmp_path, elem, metric, dim):
    src, centers, lists = written(tmp_path, elem, metric, dim)
    f = read_index_file(udf.cuvs_to_index_file(src, tmp_path / "x.udfi", symbol="m", cache_key=KEY))
    assert (f["major"], f["elem"], f["dim"], f["n_lists"]) == (1, ["f32", "f16", "i8", "u8"].index(elem), dim, 5)
    assert (f["coarse"], f["balance"], f["symbol"], f["cache_key"]) == (METRICS[metric][2], 0.0, "m", KEY)
    assert f["size"] == sum(len(ids) for ids, _ in lists)
    assert f["sizes"].tolist() == [len(ids) for ids, _ in lists]
    assert f["next_id"] == max(i for ids, _ in lists for i in ids) + 1
    want = centers * SCALE[elem]
    if metric == "cosine":
        np.testing.assert_allclose(f["centroids"], normalized(want), rtol=1e-6, atol=1e-7)
    else:
        np.testing.assert_array_equal(f["centroids"], want)
    for lst, (ids, rows) in enumerate(lists):
        np.testing.assert_array_equal(f["ids"][lst], np.asarray(ids, np.int64))
        rows = np.asarray(rows, f["vecs"][lst].dtype).reshape(len(ids), dim)
        if metric == "cosine":
            tol = 1e-3 if elem == "f16" else 1e-6
            np.testing.assert_allclose(f["vecs"][lst].astype(np.float64), normalized(rows), rtol=tol, atol=tol)
        else:
            np.testing.assert_array_equal(f["vecs"][lst], rows)


def test_path_and_bytes_give_one_file(ext, tmp_path):
    src, _, _ = written(tmp_path, "f32", "sqeuclidean")
    files = [udf.cuvs_to_index_file(s, tmp_path / f"{i}.udfi", symbol="l2", cache_key=KEY)
             for i, s in enumerate([src, str(src), src.read_bytes(), bytearray(src.read_bytes()),
                                    np.frombuffer(src.read_bytes(), np.uint8)])]
    first = open(files[0], "rb").read()
    assert all(open(p, "rb").read() == first for p in files[1:])


def test_seed_files_convert(ext, tmp_path):
    seeds = sorted(SEEDS.glob("seed-*.cuvs"))
    assert len(seeds) == 6  # 5 of serialization version 4, seed-f32-l2-v5.cuvs of 5
    for s in seeds:
        f = read_index_file(udf.cuvs_to_index_file(s, tmp_path / "s.udfi", symbol="l2", cache_key=KEY))
        assert f["size"] == sum(len(i) for i in f["ids"]), s.name


REAL = ROOT / "test" / "data" / "cuvs_26_10"  # written by cuVS 26.10 (serialization version 5): make_files.py


@pytest.mark.parametrize("name", ["float32-sqeuclidean", "float32-inner_product", "float16-sqeuclidean",
                                  "int8-sqeuclidean", "uint8-sqeuclidean", "float32-cosine"])
def test_files_cuvs_26_10_wrote_convert(ext, tmp_path, name):
    """The rows make_files.py gave cuVS, drawn again with NumPy (make_rows.py), are the vectors of
    their ids in the converted file (cosine ones normalized)."""
    spec = importlib.util.spec_from_file_location("make_rows", REAL / "make_rows.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    rows = mod.rows()[name + ".cuvs"]
    np.testing.assert_array_equal(np.load(REAL / f"{name}.rows.npy"), rows)
    dt, metric = name.split("-")
    f = read_index_file(udf.cuvs_to_index_file(REAL / f"{name}.cuvs", tmp_path / "x.udfi", symbol="m",
                                               cache_key=KEY))
    elem = {"float32": "f32", "float16": "f16", "int8": "i8", "uint8": "u8"}[dt]
    assert (f["elem"], f["dim"], f["n_lists"], f["size"]) == (["f32", "f16", "i8", "u8"].index(elem), 12, 4, 300)
    assert f["coarse"] == METRICS[metric][2]
    assert f["sizes"].sum() == 300 and f["next_id"] == 300
    assert np.isfinite(f["centroids"]).all()
    ids = np.concatenate(f["ids"])
    assert sorted(ids.tolist()) == list(range(300))
    for lst, got in zip(f["ids"], f["vecs"]):
        want = rows[lst]
        if metric == "cosine":
            np.testing.assert_allclose(got.astype(np.float64), normalized(want), rtol=1e-6, atol=1e-7)
        else:
            assert got.dtype == want.dtype
            np.testing.assert_array_equal(got, want)


def test_artifact_gives_symbol_and_key(ext, tmp_path):
    class Info:
        symbol, cache_key = "weighted_l2", "c" * 64
    src, _, _ = written(tmp_path, "f32", "sqeuclidean")
    f = read_index_file(udf.cuvs_to_index_file(src, tmp_path / "x.udfi", Info()))
    assert (f["symbol"], f["cache_key"]) == ("weighted_l2", "c" * 64)
    with pytest.raises(TypeError, match="symbol= and cache_key="):
        udf.cuvs_to_index_file(src, tmp_path / "y.udfi")
    with pytest.raises(TypeError, match="expected a path"):
        udf.cuvs_to_index_file(42, tmp_path / "y.udfi", symbol="l2", cache_key=KEY)


def refused(tmp_path, src, match: str):
    with pytest.raises(udf.UdfRuntimeError, match=match) as e:
        udf.cuvs_to_index_file(src, tmp_path / "bad.udfi", symbol="l2", cache_key=KEY)
    assert e.value.status_name == "UDF_ERROR_BAD_FORMAT", e.value
    assert not (tmp_path / "bad.udfi").exists()


def test_damaged_and_foreign_files_are_refused(ext, tmp_path):
    src, _, _ = written(tmp_path, "f32", "sqeuclidean")
    good = src.read_bytes()
    refused(tmp_path, good[:-1], r"list 4 indices at byte \d+: truncated")
    refused(tmp_path, good + b"\0", r"end at byte \d+: trailing bytes")
    refused(tmp_path, good[:100], r"serialization_version header at byte 14: truncated \(needs 118 bytes, 86 left\)")
    refused(tmp_path, b"<f8\0" + good[4:], r"not a cuVS IVF-Flat file \(dtype prefix '<f8\\x00' at byte 0")
    faiss_seed = ROOT / "test" / "fuzz" / "corpus" / "faiss_file" / "seed-l2-full.faiss"
    refused(tmp_path, faiss_seed, r"dtype prefix 'IwFl' at byte 0")
    b = bytearray(good)
    b[536 + 128] = 3  # the metric scalar's value (after its 128-byte .npy header): L1
    refused(tmp_path, bytes(b), r"metric at byte 536: DistanceType 3 is not L2Expanded")
    with pytest.raises(udf.UdfRuntimeError) as e:
        udf.cuvs_to_index_file(tmp_path / "missing.cuvs", tmp_path / "bad.udfi", symbol="l2", cache_key=KEY)
    assert e.value.status_name == "UDF_ERROR_IO"


def test_other_objects_are_refused(ext, tmp_path):
    class Index:  # not cuvs's
        pass
    with pytest.raises(TypeError, match="expected a path"):
        udf.cuvs_to_index_file(Index(), tmp_path / "y.udfi", symbol="l2", cache_key=KEY)
    Fake = type("Index", (), {"__module__": "cuvs.neighbors.ivf_pq.ivf_pq"})
    with pytest.raises(TypeError, match="is not a cuvs.neighbors.ivf_flat.Index"):
        udf.cuvs_to_index_file(Fake(), tmp_path / "y.udfi", symbol="l2", cache_key=KEY)


# ---- with cuVS, on the GPU


@pytest.fixture(scope="module")
def cuvs():
    return pytest.importorskip("cuvs.neighbors.ivf_flat", reason="cuVS is not installed (pip install cuvs-cu12 or "
                               "cuvs-cu13: the GPU tests of udf.Index.from_cuvs use the real cuVS)")


def to_device(a: np.ndarray):
    try:
        import cupy
        return cupy.asarray(a)
    except ImportError:
        from pylibraft.common import device_ndarray
        return device_ndarray(a)


def to_host(a) -> np.ndarray:
    if hasattr(a, "copy_to_host"):
        return np.asarray(a.copy_to_host())
    if hasattr(a, "get"):
        return np.asarray(a.get())
    return np.asarray(a)


def cuvs_centers(index) -> np.ndarray:
    """cuVS's centers as it keeps them (int8 / uint8 ones divided by 128 / 256)."""
    if not hasattr(type(index), "centers"):
        pytest.skip("this cuVS's ivf_flat.Index has no centers (cuVS 25.06 on)")
    return to_host(index.centers).astype(np.float32)


def cuvs_index(ivf_flat, elem: str, metric: str, ids: bool = False):
    """A cuVS IVF-Flat index over 2000 clustered rows of `elem` (ids 0 .. 1999, or with ids:
    added by ivf_flat.extend with ids 1000 + 7i, a large and a negative one among them)."""
    data = vectors(2000, 1, elem)
    params = ivf_flat.IndexParams(n_lists=N_LISTS, metric=metric, kmeans_n_iters=20, add_data_on_build=not ids)
    try:
        index = ivf_flat.build(params, to_device(data))
    except Exception as e:  # noqa: BLE001 -- an older cuVS without this element type or metric
        if elem == "f32":
            raise
        pytest.skip(f"this cuVS does not build an IVF-Flat index of {elem} with {metric}: {e}")
    if ids:
        i = 1000 + 7 * np.arange(len(data), dtype=np.int64)
        i[:3] = [2**62, 2**40 + 1, -5]
        index = ivf_flat.extend(index, to_device(data), to_device(i))
    return index, data


def ivf_search(f: dict, queries: np.ndarray, n_probes: int, coarse: int):
    """The float64 IVF search over a converted file's lists: per query the probed lists' ids and
    distances (smaller is nearer), and the coarse distances of every list."""
    cent = f["centroids"].astype(np.float64)
    out = []
    for x in queries.astype(np.float64):
        if coarse & 0x100:
            x = normalized(x)
        dc = ((cent - x) ** 2).sum(1) if coarse == 0 else -(cent @ x)
        probe = np.argsort(dc, kind="stable")[:n_probes]
        ids = np.concatenate([f["ids"][p] for p in probe])
        rows = np.concatenate([f["vecs"][p] for p in probe]).astype(np.float64)
        d = ((rows - x) ** 2).sum(1) if coarse == 0 else -(rows @ x)
        out.append((dc, ids, d))
    return out


def untied(found, k: int, n_probes: int, rel: float = 1e-4) -> np.ndarray:
    """The queries whose n_probes-th and next list, and k-th and next row, are no near tie
    (relative gap over `rel` in float64): where float32 rounding cannot make two exact searches
    choose differently (f16: cuVS computes its distances in half precision, rel 2e-3)."""
    def gap(d, n):
        d = np.sort(d)
        return n >= len(d) or d[n] - d[n - 1] > rel * max(1.0, abs(d[n]))
    keep = np.array([gap(dc, n_probes) and gap(d, k) for dc, _, d in found])
    assert keep.mean() >= 0.9, f"{(~keep).sum()} of {len(keep)} queries are near ties"
    return keep


def recall(ids: np.ndarray, ref: np.ndarray) -> float:
    hits = sum(len(set(a.tolist()) & set(b.tolist()) - {-1}) for a, b in zip(ids, ref))
    return hits / max(1, sum(len(set(b.tolist()) - {-1}) for b in ref))


def check_neighbours(ivf_flat, index, ix, tmp_path, elem: str, metric: str, queries: np.ndarray):
    """ix (from index) with the same n_probes finds cuVS's neighbours for every query that is
    no near tie, and the float64 search over the converted lists agrees; with a built-in
    (sq)euclidean metric, at cuVS's distances.  Returns the converted file."""
    f = read_index_file(udf.cuvs_to_index_file(index, tmp_path / "x.udfi", symbol="m", cache_key=KEY))
    assert ix.list_sizes() == f["sizes"].tolist()
    ref_d, ref = ivf_flat.search(ivf_flat.SearchParams(n_probes=NPROBE), index, to_device(queries), K)
    ref, ref_d = to_host(ref), to_host(ref_d)
    dist, ids = ix.search(queries, k=K, n_probes=NPROBE)
    ids, dist = np.asarray(ids), np.asarray(dist)
    found = ivf_search(f, queries, NPROBE, METRICS[metric][2])
    keep = untied(found, K, NPROBE)
    # f16: cuVS ranks with half-precision distances, this runtime with float32 ones, which the
    # float64 search below checks exactly (docs/bring-your-index.md, "Tests").
    assert recall(ids[keep], ref[keep]) >= (0.99 if elem == "f16" else 1.0)
    for q in np.flatnonzero(keep):
        _, fid, d = found[q]
        assert set(ids[q].tolist()) == set(fid[np.argsort(d, kind="stable")[:K]].tolist()), f"query {q}"
    return f, ids, dist, ref_d, keep


GPU_CASES = [("f32", m) for m in METRICS] + [("f16", "sqeuclidean"), ("f16", "cosine"), ("i8", "sqeuclidean"),
                                               ("i8", "inner_product"), ("u8", "sqeuclidean")]


@pytest.mark.gpu
@pytest.mark.parametrize("elem,metric", GPU_CASES, ids=[f"{e}-{m}" for e, m in GPU_CASES])
def test_from_cuvs_finds_cuvs_neighbours(ext, cuvs, tmp_path, elem, metric):
    ivf_flat = cuvs
    index, _ = cuvs_index(ivf_flat, elem, metric)
    ix = udf.Index.from_cuvs(index, udf.builtin_metric(METRICS[metric][1], elem))
    assert (ix.dim, ix.n_lists, ix.size, ix.elem) == (DIM, N_LISTS, 2000, elem)
    centers = cuvs_centers(index) * SCALE[elem]
    if metric == "cosine":
        np.testing.assert_allclose(ix.centroids(), normalized(centers), rtol=1e-6, atol=1e-7)
    else:
        np.testing.assert_array_equal(ix.centroids(), centers)
    _, _, dist, ref_d, keep = check_neighbours(ivf_flat, index, ix, tmp_path, elem, metric, vectors(50, 3, elem))
    if metric in ("sqeuclidean", "euclidean"):  # the same distances as cuVS's (f16: cuVS's are half precision)
        rtol = 4e-3 if elem == "f16" else 1e-3
        np.testing.assert_allclose(np.sort(dist[keep], 1), np.sort(ref_d[keep], 1), rtol=rtol, atol=1e-2)


@pytest.mark.gpu
def test_from_cuvs_keeps_ids(ext, cuvs, tmp_path):
    """Ids given to ivf_flat.extend (any int64) come back as they are; add continues after
    the largest."""
    ivf_flat = cuvs
    index, _ = cuvs_index(ivf_flat, "f32", "sqeuclidean", ids=True)
    ix = udf.Index.from_cuvs(index, udf.builtin_metric("l2"))
    f, ids, _, _, _ = check_neighbours(ivf_flat, index, ix, tmp_path, "f32", "sqeuclidean", vectors(50, 3))
    given = set((1000 + 7 * np.arange(2000)).tolist()[3:]) | {2**62, 2**40 + 1, -5}
    assert set(np.concatenate(f["ids"]).tolist()) == given
    assert set(ids.ravel().tolist()) <= given
    new = vectors(3, 9)
    ix.add(new)
    _, got = ix.search(new, k=1, n_probes=N_LISTS)
    assert np.asarray(got).ravel().tolist() == [2**62 + 1, 2**62 + 2, 2**62 + 3]


@pytest.mark.gpu
def test_from_cuvs_equals_the_converted_file(ext, cuvs, tmp_path):
    ivf_flat = cuvs
    index, _ = cuvs_index(ivf_flat, "f32", "sqeuclidean")
    ivf_flat.save(str(tmp_path / "a.cuvs"), index)
    l2 = udf.builtin_metric("l2")
    direct = udf.Index.from_cuvs(tmp_path / "a.cuvs", l2)
    udf.cuvs_to_index_file(tmp_path / "a.cuvs", tmp_path / "a.udfi", direct.metric)
    loaded = udf.Index.load(tmp_path / "a.udfi", l2)
    queries = vectors(20, 5)
    a = direct.search(queries, k=K, n_probes=NPROBE)
    b = loaded.search(queries, k=K, n_probes=NPROBE)
    np.testing.assert_array_equal(np.asarray(a[1]), np.asarray(b[1]))
    np.testing.assert_array_equal(np.asarray(a[0]), np.asarray(b[0]))


@pytest.mark.gpu
def test_from_cuvs_equals_a_build_over_its_centroids(ext, cuvs, tmp_path):
    """cuVS puts each row in its nearest centroid's list; build(centroids=..., balance=0) does
    the same, so both indexes hold the same lists (in another order: a row in another list
    is a near tie between two centroids) and find the same neighbours.  cuVS fills its lists
    before its last centroid update, so a row may sit in a list whose centroid is a little
    farther than its nearest: at most 1% of the rows may differ, each within 1% of its nearest,
    and the neighbours agree to recall 0.98 (docs/bring-your-index.md, "Tests")."""
    ivf_flat = cuvs
    index, data = cuvs_index(ivf_flat, "f32", "sqeuclidean")
    l2 = udf.builtin_metric("l2")
    ix = udf.Index.from_cuvs(index, l2)
    built = udf.Index.build(l2, data, n_lists=N_LISTS, centroids=cuvs_centers(index), balance=0)
    np.testing.assert_array_equal(built.centroids(), ix.centroids())
    built.save(tmp_path / "b.udfi")
    mine = read_index_file(tmp_path / "b.udfi")
    f, ids, dist, _, keep = check_neighbours(ivf_flat, index, ix, tmp_path, "f32", "sqeuclidean", vectors(50, 3))
    cent = f["centroids"].astype(np.float64)
    moved = set()
    for lst in range(N_LISTS):
        for row in set(f["ids"][lst].tolist()) ^ set(mine["ids"][lst].tolist()):
            d = np.sort(((cent - data[row].astype(np.float64)) ** 2).sum(1))
            assert d[1] - d[0] <= 1e-2 * max(1.0, d[1]), f"row {row}: list {lst} in one index only"
            moved.add(row)
    assert len(moved) <= 0.01 * len(data), f"{len(moved)} rows in other lists"
    d2, i2 = built.search(vectors(50, 3), k=K, n_probes=NPROBE)
    i2, d2 = np.asarray(i2), np.asarray(d2)
    assert recall(i2[keep], ids[keep]) >= 0.98


@pytest.mark.gpu
def test_from_cuvs_with_a_python_udf(ext, cuvs, tmp_path, any_backend):
    """A UDF over cuVS's lists: a weighted L2 (coarse l2) with unit weights finds cuVS's
    neighbours."""
    ivf_flat = cuvs
    index, _ = cuvs_index(ivf_flat, "f32", "sqeuclidean")
    w = np.ones(DIM, np.float32)

    @udf.metric(captures={"w": w}, backend=any_backend)
    def weighted_l2(x, y, acc, ctx):
        d = x - y
        return acc + ctx.w[ctx.dim] * d * d

    ix = udf.Index.from_cuvs(index, weighted_l2)
    check_neighbours(ivf_flat, index, ix, tmp_path, "f32", "sqeuclidean", vectors(30, 6))


@pytest.mark.gpu
def test_from_cuvs_refuses_another_coarse_metric_or_element_type(ext, cuvs):
    ivf_flat = cuvs
    index, _ = cuvs_index(ivf_flat, "f32", "inner_product")
    with pytest.raises(udf.UdfRuntimeError, match="coarse metric l2; the cuVS index's lists were clustered with "
                                                  r"InnerProduct \(inner_product\)") as e:
        udf.Index.from_cuvs(index, udf.builtin_metric("l2"))
    assert e.value.status_name == "UDF_ERROR_MISMATCH"
    with pytest.raises(udf.UdfRuntimeError, match="takes f16 elements; the cuVS index holds f32 vectors"):
        udf.Index.from_cuvs(index, udf.builtin_metric("inner_product", "f16"))
