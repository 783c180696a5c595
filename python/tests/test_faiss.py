"""FAISS IndexIVFFlat indexes (udf.Index.from_faiss, udf.faiss_to_index_file; the reader is
lib/runtime/index/faiss_file.h), with the real faiss-cpu (scripts/setup.sh installs it; these
tests skip, saying so, without it).

On the CPU: a FAISS index made by faiss-cpu (L2 and inner product, custom ids, empty lists,
both of faiss's list encodings) converted to this runtime's index file holds FAISS's centroids,
list sizes, ids and vectors exactly, and an IVF search over the converted lists with FAISS's
nprobe finds FAISS's own neighbours (for every query whose probed lists and k nearest rows are
no near tie: `untied`); other index kinds and damaged files are refused naming the
field.  On the GPU (marked `gpu`): udf.Index.from_faiss searched with the built-in metric and
the same n_probes gives FAISS's neighbours (recall@10 1.0).
"""
from __future__ import annotations

import numpy as np
import pytest

import udf
from udfi import read_index_file

faiss = pytest.importorskip("faiss", reason="faiss-cpu is not installed (scripts/setup.sh installs it)")

DIM = 16
N_LISTS = 32
K = 10
NPROBE = 4
SYMBOL = {faiss.METRIC_L2: "l2", faiss.METRIC_INNER_PRODUCT: "inner_product"}
KEY = "k" * 64


def vectors(rows: int, seed: int, centers: int = 20) -> np.ndarray:
    rng = np.random.default_rng(seed)
    c = rng.normal(0.0, 3.0, (centers, DIM))
    return (c[rng.integers(0, centers, rows)] + rng.normal(0.0, 1.0, (rows, DIM))).astype(np.float32)


def ivf_flat(metric: int, *, sparse: bool = False) -> faiss.IndexIVFFlat:
    """An IndexIVFFlat trained on 1280 rows; 400 rows added with custom ids (ids 1000 + 7i,
    a few large and a negative one).  sparse: only rows near 6 centroids are added, so most
    lists are empty and faiss writes its "sprs" encoding."""
    train = vectors(1280, 1)
    quantizer = faiss.IndexFlatL2(DIM) if metric == faiss.METRIC_L2 else faiss.IndexFlatIP(DIM)
    index = faiss.IndexIVFFlat(quantizer, DIM, N_LISTS, metric)
    index.train(train)
    data = vectors(400, 2)
    if sparse:
        _, lists = quantizer.search(data, 1)
        data = data[np.isin(lists[:, 0], np.unique(lists[:, 0])[:6])]
    ids = 1000 + 7 * np.arange(len(data), dtype=np.int64)
    ids[:3] = [2**62, 2**40 + 1, -5]
    index.add_with_ids(data, ids)
    index.nprobe = NPROBE
    return index


def faiss_lists(index) -> tuple[list, list]:
    inv = index.invlists
    ids, vecs = [], []
    for lst in range(index.nlist):
        n = inv.list_size(lst)
        ids.append(faiss.rev_swig_ptr(inv.get_ids(lst), n).copy() if n else np.zeros(0, np.int64))
        codes = faiss.rev_swig_ptr(inv.get_codes(lst), n * inv.code_size).copy() if n else np.zeros(0, np.uint8)
        vecs.append(codes.view(np.float32).reshape(n, DIM))
    return ids, vecs


def ivf_search(f: dict, queries: np.ndarray, k: int, n_probes: int, inner_product: bool) -> np.ndarray:
    """The IVF search over a converted file's lists, in float64: the n_probes best centroids,
    then the k best rows of their lists."""
    out = np.full((len(queries), k), -1, np.int64)
    for q, x in enumerate(queries.astype(np.float64)):
        if inner_product:
            probe = np.argsort(-(f["centroids"] @ x), kind="stable")[:n_probes]
        else:
            probe = np.argsort(((f["centroids"] - x) ** 2).sum(1), kind="stable")[:n_probes]
        ids = np.concatenate([f["ids"][p] for p in probe])
        rows = np.concatenate([f["vecs"][p] for p in probe]).astype(np.float64)
        d = -(rows @ x) if inner_product else ((rows - x) ** 2).sum(1)
        best = np.argsort(d, kind="stable")[:k]
        out[q, :len(best)] = ids[best]
    return out


def untied(index, queries: np.ndarray, k: int, n_probes: int) -> np.ndarray:
    """The queries whose probed lists and k nearest rows are no near tie (relative gap over
    1e-4 between the n_probes-th and next centroid, and the k-th and next row, in float64):
    where float32 rounding cannot make two exact searches choose differently."""
    ip = index.metric_type == faiss.METRIC_INNER_PRODUCT
    cent = index.quantizer.reconstruct_n(0, index.nlist).astype(np.float64)
    ids, vecs = faiss_lists(index)
    keep = np.ones(len(queries), bool)

    def gap(d, n):
        d = np.sort(d)
        return n >= len(d) or d[n] - d[n - 1] > 1e-4 * max(1.0, abs(d[n]))
    for q, x in enumerate(queries.astype(np.float64)):
        dc = -(cent @ x) if ip else ((cent - x) ** 2).sum(1)
        probe = np.argsort(dc, kind="stable")[:n_probes]
        rows = np.concatenate([vecs[p] for p in probe]).astype(np.float64)
        dr = -(rows @ x) if ip else ((rows - x) ** 2).sum(1)
        keep[q] = gap(dc, n_probes) and gap(dr, k)
    assert keep.mean() >= 0.9, f"{(~keep).sum()} of {len(keep)} queries are near ties"
    return keep


def recall(ids: np.ndarray, ref: np.ndarray) -> float:
    hits = sum(len(set(a.tolist()) & set(b.tolist()) - {-1}) for a, b in zip(ids, ref))
    return hits / max(1, sum(len(set(b.tolist()) - {-1}) for b in ref))


CASES = [(faiss.METRIC_L2, False), (faiss.METRIC_L2, True), (faiss.METRIC_INNER_PRODUCT, False)]


@pytest.mark.parametrize("metric,sparse", CASES, ids=["l2", "l2-sparse", "ip"])
def test_converted_file_holds_faiss_lists(ext, tmp_path, metric, sparse):
    index = ivf_flat(metric, sparse=sparse)
    src = tmp_path / "ivf.faiss"
    faiss.write_index(index, str(src))
    out = udf.faiss_to_index_file(src, tmp_path / "ivf.udfi", symbol=SYMBOL[metric], cache_key=KEY)
    f = read_index_file(out)
    assert (f["major"], f["elem"], f["dim"], f["n_lists"]) == (1, 0, DIM, N_LISTS)
    assert f["coarse"] == (0 if metric == faiss.METRIC_L2 else 1)
    assert (f["symbol"], f["cache_key"], f["balance"]) == (SYMBOL[metric], KEY, 0.0)
    assert f["size"] == index.ntotal
    ids, vecs = faiss_lists(index)
    assert f["next_id"] == max(int(i.max()) for i in ids if len(i)) + 1
    np.testing.assert_array_equal(f["centroids"], index.quantizer.reconstruct_n(0, N_LISTS))
    assert f["sizes"].tolist() == [index.invlists.list_size(lst) for lst in range(N_LISTS)]
    assert (f["sizes"] == 0).any(), "the test wants empty lists"
    for lst in range(N_LISTS):
        np.testing.assert_array_equal(f["ids"][lst], ids[lst])
        np.testing.assert_array_equal(f["vecs"][lst], vecs[lst])


@pytest.mark.parametrize("metric,sparse", CASES, ids=["l2", "l2-sparse", "ip"])
def test_converted_lists_find_faiss_neighbours(ext, tmp_path, metric, sparse):
    index = ivf_flat(metric, sparse=sparse)
    f = read_index_file(udf.faiss_to_index_file(index, tmp_path / "ivf.udfi", symbol="m", cache_key=KEY))
    queries = vectors(50, 3)
    _, ref = index.search(queries, K)
    got = ivf_search(f, queries, K, NPROBE, metric == faiss.METRIC_INNER_PRODUCT)
    keep = untied(index, queries, K, NPROBE)
    assert recall(got[keep], ref[keep]) == 1.0


def test_object_bytes_and_path_give_one_file(ext, tmp_path):
    index = ivf_flat(faiss.METRIC_L2)
    faiss.write_index(index, str(tmp_path / "a.faiss"))
    files = [udf.faiss_to_index_file(src, tmp_path / f"{i}.udfi", symbol="l2", cache_key=KEY)
             for i, src in enumerate([str(tmp_path / "a.faiss"), index, faiss.serialize_index(index),
                                      faiss.serialize_index(index).tobytes()])]
    first = open(files[0], "rb").read()
    assert all(open(p, "rb").read() == first for p in files[1:])


def test_artifact_gives_symbol_and_key(ext, tmp_path):
    class Info:
        symbol, cache_key = "weighted_l2", "c" * 64
    f = read_index_file(udf.faiss_to_index_file(ivf_flat(faiss.METRIC_L2), tmp_path / "x.udfi", Info()))
    assert (f["symbol"], f["cache_key"]) == ("weighted_l2", "c" * 64)
    with pytest.raises(TypeError, match="symbol= and cache_key="):
        udf.faiss_to_index_file(tmp_path / "none.faiss", tmp_path / "y.udfi")
    with pytest.raises(TypeError, match="expected a path"):
        udf.faiss_to_index_file(42, tmp_path / "y.udfi", symbol="l2", cache_key=KEY)


def test_builtin_artifact_binds_the_file(ext, tmp_path):
    l2 = udf.builtin_metric("l2")
    if not isinstance(l2, udf.Artifact):
        pytest.skip("the shipped l2 artifact is not built (share/udf/metrics/l2.udfa)")
    f = read_index_file(udf.faiss_to_index_file(ivf_flat(faiss.METRIC_L2), tmp_path / "x.udfi", l2))
    assert (f["symbol"], f["cache_key"]) == (l2.symbol, l2.cache_key)


def refused(ext, tmp_path, src, match: str):
    with pytest.raises(udf.UdfRuntimeError, match=match) as e:
        udf.faiss_to_index_file(src, tmp_path / "bad.udfi", symbol="l2", cache_key=KEY)
    assert e.value.status_name == "UDF_ERROR_BAD_FORMAT", e.value
    assert not (tmp_path / "bad.udfi").exists()


def test_other_faiss_indexes_are_refused(ext, tmp_path):
    train = vectors(1280, 1)
    pq = faiss.IndexIVFPQ(faiss.IndexFlatL2(DIM), DIM, N_LISTS, 4, 8)
    pq.train(train)
    refused(ext, tmp_path, pq, r"not a FAISS IndexIVFFlat file \(fourcc 'IwPQ' at byte 0")
    flat = faiss.IndexFlatL2(DIM)
    refused(ext, tmp_path, flat, r"fourcc 'IxF2' at byte 0")
    hnsw_ivf = faiss.IndexIVFFlat(faiss.IndexHNSWFlat(DIM, 8), DIM, N_LISTS)
    hnsw_ivf.train(train)
    refused(ext, tmp_path, hnsw_ivf, r"quantizer fourcc at byte 53: 'IHNf'")
    untrained = faiss.IndexIVFFlat(faiss.IndexFlatL2(DIM), DIM, N_LISTS)
    refused(ext, tmp_path, untrained, r"index is_trained at byte 32")
    big = faiss.IndexIVFFlat(faiss.IndexFlatL2(2), 2, 16385)
    big.train(vectors(16385, 4)[:, :2].copy())
    refused(ext, tmp_path, big, r"nlist at byte 37: 16385 is not in 1 .. 16384")


def test_damaged_files_are_refused(ext, tmp_path):
    good = faiss.serialize_index(ivf_flat(faiss.METRIC_L2)).tobytes()
    refused(ext, tmp_path, good[:-1], r"list \d+ at byte \d+: truncated")
    refused(ext, tmp_path, good + b"\0", r"end at byte \d+: trailing bytes")
    refused(ext, tmp_path, good[:100], r"quantizer codes at byte 90")
    missing = tmp_path / "missing.faiss"
    with pytest.raises(udf.UdfRuntimeError) as e:
        udf.faiss_to_index_file(missing, tmp_path / "bad.udfi", symbol="l2", cache_key=KEY)
    assert e.value.status_name == "UDF_ERROR_IO"


# ---- on the GPU


@pytest.mark.gpu
@pytest.mark.parametrize("metric,sparse", CASES, ids=["l2", "l2-sparse", "ip"])
def test_from_faiss_finds_faiss_neighbours(ext, metric, sparse):
    index = ivf_flat(metric, sparse=sparse)
    ix = udf.Index.from_faiss(index, udf.builtin_metric(SYMBOL[metric]))
    assert (ix.dim, ix.n_lists, ix.size, ix.elem) == (DIM, N_LISTS, index.ntotal, "f32")
    assert ix.list_sizes() == [index.invlists.list_size(lst) for lst in range(N_LISTS)]
    np.testing.assert_array_equal(np.asarray(ix.centroids()).reshape(N_LISTS, DIM),
                                  index.quantizer.reconstruct_n(0, N_LISTS))
    queries = vectors(50, 3)
    ref_d, ref = index.search(queries, K)
    dist, ids = ix.search(queries, k=K, n_probes=NPROBE)
    ids, dist = np.asarray(ids), np.asarray(dist)
    keep = untied(index, queries, K, NPROBE)
    assert recall(ids[keep], ref[keep]) == 1.0
    for q in np.flatnonzero(keep):  # fewer than K rows in the probed lists: both pad with id -1
        n = int((ref[q] >= 0).sum())
        assert int((ids[q] >= 0).sum()) == n, f"query {q}: {ids[q]} vs FAISS {ref[q]}"
        np.testing.assert_allclose(np.sort(dist[q][ids[q] >= 0]), np.sort(ref_d[q][:n]), rtol=1e-4, atol=1e-3)


@pytest.mark.gpu
def test_from_faiss_with_a_python_udf(ext, any_backend):
    """A UDF over FAISS's lists: a weighted L2 (coarse l2) finds, with unit weights, FAISS's
    neighbours, and with other weights the exact weighted neighbours within the probed lists."""
    index = ivf_flat(faiss.METRIC_L2)
    w = np.ones(DIM, np.float32)

    @udf.metric(captures={"w": w}, backend=any_backend)
    def weighted_l2(x, y, acc, ctx):
        d = x - y
        return acc + ctx.w[ctx.dim] * d * d

    ix = udf.Index.from_faiss(index, weighted_l2)
    queries = vectors(30, 6)
    _, ref = index.search(queries, K)
    _, ids = ix.search(queries, k=K, n_probes=NPROBE)
    keep = untied(index, queries, K, NPROBE)
    assert recall(np.asarray(ids)[keep], ref[keep]) == 1.0
    w2 = np.linspace(0.25, 2.0, DIM).astype(np.float32)
    dist, ids = ix.search(queries, k=K, n_probes=NPROBE, captures={"w": w2})
    cent = index.quantizer.reconstruct_n(0, N_LISTS).astype(np.float64)
    lists_ids, lists_vecs = faiss_lists(index)
    for q, x in enumerate(queries.astype(np.float64)):
        if not keep[q]:
            continue
        probe = np.argsort(((cent - x) ** 2).sum(1), kind="stable")[:NPROBE]
        rows = np.concatenate([lists_vecs[p] for p in probe]).astype(np.float64)
        d = (((rows - x) ** 2) * w2).sum(1)
        np.testing.assert_allclose(np.asarray(dist)[q], np.sort(d)[:K], rtol=1e-4, atol=1e-3)


@pytest.mark.gpu
def test_from_faiss_equals_the_converted_file(ext, tmp_path):
    index = ivf_flat(faiss.METRIC_L2)
    faiss.write_index(index, str(tmp_path / "a.faiss"))
    l2 = udf.builtin_metric("l2")
    direct = udf.Index.from_faiss(tmp_path / "a.faiss", l2)
    info = direct.metric
    udf.faiss_to_index_file(tmp_path / "a.faiss", tmp_path / "a.udfi", info)
    loaded = udf.Index.load(tmp_path / "a.udfi", l2)
    queries = vectors(20, 5)
    a = direct.search(queries, k=K, n_probes=NPROBE)
    b = loaded.search(queries, k=K, n_probes=NPROBE)
    np.testing.assert_array_equal(np.asarray(a[1]), np.asarray(b[1]))
    np.testing.assert_array_equal(np.asarray(a[0]), np.asarray(b[0]))


@pytest.mark.gpu
def test_from_faiss_refuses_another_coarse_metric(ext):
    with pytest.raises(udf.UdfRuntimeError, match="coarse metric l2; the FAISS index's lists were clustered with "
                                                  r"METRIC_INNER_PRODUCT \(inner_product\)") as e:
        udf.Index.from_faiss(ivf_flat(faiss.METRIC_INNER_PRODUCT), udf.builtin_metric("l2"))
    assert e.value.status_name == "UDF_ERROR_MISMATCH"
