"""udf.exact_search and udf.refine (docs/exact-search.md), on the GPU (marked `gpu`), against
NumPy float64 brute force: a Python weighted-L2 UDF with a capture, a CUDA L1 on u8 data, a
filter, host / CuPy / torch inputs, refine's padding and repeats, and the errors a user sees
(an id out of range, k too large, a filter's captures without a filter).  FAISS / cuVS
candidates re-ranked: test_faiss.py / test_cuvs.py and docs/bring-your-index.md.
"""
from __future__ import annotations

import numpy as np
import pytest

import udf
from udf.errors import Status, UdfRuntimeError

pytestmark = pytest.mark.gpu

DIM = 40
K = 10


def brute(data: np.ndarray, queries: np.ndarray, dist_fn, k: int, keep=None):
    """(distances, ids) of the k best rows a query in float64, ties by row; keep(q) -> bool mask."""
    out_d, out_i = [], []
    for q, y in enumerate(queries.astype(np.float64)):
        d = dist_fn(data.astype(np.float64), y)
        if keep is not None:
            d = np.where(keep(q), d, np.inf)
        order = np.lexsort((np.arange(len(d)), d))[:k]
        out_d.append(d[order])
        out_i.append(np.where(np.isfinite(d[order]), order, -1))
    return np.array(out_d), np.array(out_i)


def check(dist, ids, ref_d, ref_i, rtol=1e-4):
    dist, ids = np.asarray(dist), np.asarray(ids)
    np.testing.assert_allclose(dist, np.where(np.isfinite(ref_d), ref_d, np.inf), rtol=rtol, atol=1e-3)
    # Ties may reorder rows of equal distance: compare the sets where the distances tie.
    for q in range(len(ids)):
        assert set(ids[q][np.isfinite(ref_d[q])]) == set(ref_i[q][np.isfinite(ref_d[q])]) or np.allclose(
            np.sort(dist[q]), np.sort(ref_d[q]), rtol=rtol), f"query {q}: {ids[q]} vs {ref_i[q]}"


@pytest.fixture(scope="module")
def weighted():
    w = np.linspace(0.5, 2.0, DIM).astype(np.float32)

    @udf.metric(captures={"w": w})
    def weighted_l2(x, y, acc, ctx):
        d = x - y
        return acc + ctx.w[ctx.dim] * d * d

    return weighted_l2, w


def test_exact_search_matches_brute_force(ext, weighted):
    metric, w = weighted
    rng = np.random.default_rng(1)
    data = rng.normal(size=(3000, DIM)).astype(np.float32)
    for batch in (1, 100):
        q = rng.normal(size=(batch, DIM)).astype(np.float32)
        for k in (1, K, 100):
            dist, ids = udf.exact_search(metric, data, q, k)
            ref = brute(data, q, lambda x, y: ((x - y) ** 2 * w).sum(1), k)
            check(dist, ids, *ref)
    # One query (1-D) gives 1-D results; another weight vector as this call's capture.
    w2 = np.ones(DIM, np.float32)
    dist, ids = udf.exact_search(metric, data, data[7], 5, captures={"w": w2})
    assert ids.shape == (5,) and ids[0] == 7 and dist[0] == 0.0


def test_exact_search_on_device_arrays_u8_and_a_filter(ext):
    cp = pytest.importorskip("cupy", reason="CuPy is not installed")
    l1 = udf.cuda_source_metric('extern "C" __device__ int l1(int x, int y, int acc, const udf_ctx_v1 *ctx) '
                                '{ return acc + abs(x - y); }', elem="u8", acc="i32")
    rng = np.random.default_rng(2)
    data = rng.integers(0, 256, (2000, 33), dtype=np.uint8)  # 33: rows copied with padding
    q = rng.integers(0, 256, (50, 33), dtype=np.uint8)
    dist, ids = udf.exact_search(l1, cp.asarray(data), cp.asarray(q), K)
    assert isinstance(ids, cp.ndarray)
    ref = brute(data, q, lambda x, y: np.abs(x - y).sum(1), K)
    check(cp.asnumpy(dist), cp.asnumpy(ids), *ref)

    @udf.filter(captures={"step": 20})
    def from_query(query, id, ctx):  # noqa: A002
        return id >= query * ctx.step

    dist, ids = udf.exact_search(l1, data, q, K, filter=from_query)
    ref = brute(data, q, lambda x, y: np.abs(x - y).sum(1), K, keep=lambda qi: np.arange(len(data)) >= qi * 20)
    check(dist, ids, *ref)


def test_refine_reranks_candidates(ext, weighted):
    metric, w = weighted
    torch = pytest.importorskip("torch", reason="torch is not installed")
    rng = np.random.default_rng(3)
    data = rng.normal(size=(5000, DIM)).astype(np.float32)
    q = rng.normal(size=(64, DIM)).astype(np.float32)
    cand = rng.integers(0, len(data), (64, 40))
    cand[:, ::7] = -1                 # padding
    cand[:, 5] = cand[:, 4]           # repeats
    dist, ids = udf.refine(metric, torch.as_tensor(data, device="cuda"), q, cand, K)
    keep = lambda qi: np.isin(np.arange(len(data)), cand[qi])  # noqa: E731
    ref = brute(data, q, lambda x, y: ((x - y) ** 2 * w).sum(1), K, keep=keep)
    check(dist, ids, *ref)
    # Fewer distinct candidates than k: padded with -1 and +inf.
    few = np.full((1, 8), -1)
    few[0, :3] = [10, 11, 10]
    dist, ids = udf.refine(metric, data, q[:1], few, 5)
    assert sorted(ids[0][:2].tolist()) == [10, 11] and ids[0][2:].tolist() == [-1, -1, -1]
    assert np.isinf(dist[0][2:]).all()


def test_errors_name_what_is_wrong(ext, weighted):
    metric, _ = weighted
    data = np.zeros((100, DIM), np.float32)
    q = np.zeros((2, DIM), np.float32)
    with pytest.raises(UdfRuntimeError) as e:
        udf.refine(metric, data, q, np.array([[1, 2], [3, 100]]), 1)
    assert e.value.status == Status.INVALID_ARGUMENT and "candidates[1][1] = 100" in str(e.value)
    with pytest.raises(UdfRuntimeError) as e:
        udf.exact_search(metric, data, q, 2000)
    assert e.value.status == Status.INVALID_ARGUMENT and "k = 2000" in str(e.value)
    with pytest.raises(UdfRuntimeError) as e:
        udf.exact_search(metric, data, np.zeros((2, DIM + 1), np.float32), 1)
    assert "dimension" in str(e.value)
    with pytest.raises(UdfRuntimeError) as e:
        udf.exact_search(metric, data, q, 1, filter_captures={"x": 1})
    assert e.value.status == Status.CAPTURE

    # A filter named by its symbol: in the module, and linked there with the metric (as for
    # Index.search; the checks are the same function's).
    @udf.filter
    def low(query, id, ctx):  # noqa: A002
        return id < 50

    @udf.filter
    def high(query, id, ctx):  # noqa: A002
        return id >= 50

    mod = udf.link([metric, low, high], pairs=[(metric, low)], max_k=32)
    with pytest.raises(UdfRuntimeError) as e:
        udf.exact_search(mod, data, q, 1, filter="high")
    assert e.value.status == Status.MISMATCH and "filter high is not linked with metric weighted_l2" in str(e.value)
    with pytest.raises(UdfRuntimeError) as e:
        udf.exact_search(mod, data, q, 1, filter="nope")
    assert e.value.status == Status.INVALID_ARGUMENT and "nope" in str(e.value)


def test_calls_wait_for_torchs_current_stream(ext, weighted):
    """Device inputs that torch's current stream is still writing (held by torch.cuda._sleep,
    over NaNs) are read once it has: the calls pass that stream to the runtime
    (udf_runtime_wait_stream) instead of the host synchronizing it."""
    metric, w = weighted
    torch = pytest.importorskip("torch", reason="torch is not installed")
    rng = np.random.default_rng(4)
    data = torch.as_tensor(rng.normal(size=(4000, DIM)).astype(np.float32), device="cuda")
    q = torch.as_tensor(rng.normal(size=(50, DIM)).astype(np.float32), device="cuda")
    cand = torch.as_tensor(rng.integers(0, 4000, (50, 64)), device="cuda")
    index = udf.Index.build(metric, data, n_lists=16)
    want = (udf.exact_search(metric, data, q, K), udf.refine(metric, data, q, cand, K),
            index.search(q, k=K, n_probes=4))
    side = torch.cuda.Stream()
    got = []
    for run in (lambda x: udf.exact_search(metric, data, x, K), lambda x: udf.refine(metric, data, x, cand, K),
                lambda x: index.search(x, k=K, n_probes=4)):
        with torch.cuda.stream(side):
            late = torch.full_like(q, float("nan"))
            torch.cuda._sleep(100_000_000)  # about 50 ms of the GPU on this stream
            late.copy_(q)
            got.append(run(late))
    torch.cuda.synchronize()
    for (wd, wi), (gd, gi) in zip(want, got):
        assert torch.equal(wi, gi) and torch.equal(wd, gd)


def test_calls_wait_for_cupys_current_stream(ext, weighted):
    """The same with CuPy: inputs that CuPy's current stream (a stream of its own here, then the
    default one) is still writing, held by a spinning kernel, are read once it has; so are
    captures it wrote, and the outputs are ready when the call returns."""
    metric, w = weighted
    cp = pytest.importorskip("cupy", reason="cupy is not installed")
    spin = cp.RawKernel(r"""extern "C" __global__ void spin(long long cycles) {
        const long long t0 = clock64(); while (clock64() - t0 < cycles) {} }""", "spin")
    rng = np.random.default_rng(5)
    data = cp.asarray(rng.normal(size=(4000, DIM)).astype(np.float32))
    q = cp.asarray(rng.normal(size=(50, DIM)).astype(np.float32))
    cand = cp.asarray(rng.integers(0, 4000, (50, 64)))
    wd = cp.asarray(w)
    index = udf.Index.build(metric, data, n_lists=16)
    runs = (lambda x, c: udf.exact_search(metric, data, x, K, captures={"w": c}),
            lambda x, c: udf.refine(metric, data, x, cand, K, captures={"w": c}),
            lambda x, c: index.search(x, k=K, n_probes=4, captures={"w": c}))
    want = [run(q, wd) for run in runs]
    for stream in (cp.cuda.Stream(non_blocking=True), cp.cuda.Stream.null):
        for run, (want_d, want_i) in zip(runs, want):
            with stream:
                late_q, late_w = cp.full_like(q, np.nan), cp.full_like(wd, np.nan)
                spin((1,), (1,), (np.int64(100_000_000),))  # about 50 ms of the GPU on this stream
                late_q[...] = q
                late_w[...] = wd
                gd, gi = run(late_q, late_w)
            assert cp.array_equal(gi, want_i) and cp.array_equal(gd, want_d)
