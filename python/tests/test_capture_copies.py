"""Declaration-time array captures go to the GPU once per index (udf._index.CaptureCopies).

A host array given as a capture default (a metric's or a filter's `captures=`) is copied into
device memory the runtime owns at the first search of an index that binds it, and that copy is
bound by every later search of the index; a value given to the search (captures= /
filter_captures=) is that call's, bound as it is.  These tests run without a GPU: the copy
(udf._index._device_copy) and the index handle are replaced by recorders, and the arguments
the runtime would get are checked.  tests marked gpu check the same on a GPU, with the runtime.
"""
import threading
import time
from types import SimpleNamespace

import numpy as np
import pytest

import udf
from udf import _arrays, _index

DIM = 16


class _Copies:
    """Records the device copies asked for, and makes fake ones (a raw tensor tuple)."""

    def __init__(self, delay: float = 0.0):
        self.made = []  # (device, the host array's values)
        self.delay = delay
        self._lock = threading.Lock()

    def __call__(self, device, a):
        time.sleep(self.delay)  # (widens the window two threads could both copy in)
        with self._lock:
            self.made.append((device, np.array(a.value)))
            n = len(self.made)
        fake = (0x7F0000000000 + 4096 * n, device, _arrays.DTYPES[_arrays.NUMPY_TO_NAME[a.dtype]][0], 1,
                int(np.prod(a.shape)), 0)
        return _arrays.Arr(value=fake, arg=fake, lib="udf", device=device, dtype=a.dtype, shape=a.shape, what=a.what)


class _Handle:
    """An index handle that records what each search would pass to the runtime."""

    def __init__(self):
        self.calls = []

    def info(self):
        return {"dim": DIM, "n_lists": 4, "size": 100, "metric": "wc"}

    def search(self, q, dist, ids, **kwargs):
        self.calls.append(kwargs)


@pytest.fixture
def copies(monkeypatch):
    rec = _Copies()
    monkeypatch.setattr(_index, "_device_copy", rec)
    return rec


def _metric_info(captures):
    return udf.MetricInfo(symbol="wc", elem="f32", acc="f32", order="min", coarse_metric="l2", initial=0.0,
                          finalize=None, captures=captures, source_name="wc", cache_key="", max_k=1024)


def _index_with(defaults, *, device=0, handle=None, copies_of=None):
    info = _metric_info((udf.CaptureSpec("w", "f32", True), udf.CaptureSpec("s", "f32", False)))
    return udf.Index(handle or _Handle(), SimpleNamespace(metric=lambda symbol: info), device, "wc", defaults,
                     copies=copies_of)


def _is_copy(bound, n: int) -> bool:
    """Whether a bound capture is the n-th fake device copy (1-based)."""
    return isinstance(bound, tuple) and bound[0] == 0x7F0000000000 + 4096 * n


QUERIES = np.zeros((3, DIM), np.float32)
FILTER = udf.FilterInfo(symbol="fc", captures=(udf.CaptureSpec("allowed", "u8", True),
                                               udf.CaptureSpec("n", "i32", False)), source_name="fc", cache_key="")


def test_a_declared_metric_array_is_copied_once_per_index(copies):
    w = np.linspace(0.5, 2.0, DIM, dtype=np.float32)
    index = _index_with({"w": w, "s": 2.0})
    for _ in range(4):
        index.search(QUERIES, k=5, n_probes=2)
    assert len(copies.made) == 1 and copies.made[0][0] == 0
    np.testing.assert_array_equal(copies.made[0][1], w)
    assert all(_is_copy(c["captures"]["w"], 1) for c in index._handle.calls)
    assert all(c["captures"]["s"] == 2.0 for c in index._handle.calls)
    assert len(index._copies) == 1
    # Another index (another handle) makes its own; a wrapper of the same handle shares it.
    other = _index_with({"w": w, "s": 2.0}, device=1)
    other.search(QUERIES, k=5, n_probes=2)
    assert len(copies.made) == 2 and copies.made[1][0] == 1 and _is_copy(other._handle.calls[-1]["captures"]["w"], 2)
    wrapper = _index_with({"w": w, "s": 2.0}, handle=index._handle, copies_of=index._copies)
    wrapper.search(QUERIES, k=5, n_probes=2)
    assert len(copies.made) == 2 and _is_copy(index._handle.calls[-1]["captures"]["w"], 1)


def test_a_search_value_is_that_calls_and_never_kept(copies):
    w = np.ones(DIM, np.float32)
    index = _index_with({"w": w, "s": 1.0})
    given = np.full(DIM, 3.0, np.float32)
    index.search(QUERIES, k=5, n_probes=2, captures={"w": given})
    assert copies.made == [] and index._handle.calls[-1]["captures"]["w"] is given  # bound as it is
    index.search(QUERIES, k=5, n_probes=2, captures={"w": w})  # the declared object, given: still this call's
    assert copies.made == [] and index._handle.calls[-1]["captures"]["w"] is w
    index.search(QUERIES, k=5, n_probes=2)
    index.search(QUERIES, k=5, n_probes=2, captures={"w": given})
    index.search(QUERIES, k=5, n_probes=2)
    kinds = [c["captures"]["w"] for c in index._handle.calls[2:]]
    assert _is_copy(kinds[0], 1) and kinds[1] is given and _is_copy(kinds[2], 1)
    assert len(copies.made) == 1


def test_a_declared_filter_array_is_copied_once_and_filter_captures_override(copies):
    allowed = np.array([1, 0, 1, 1], np.uint8)
    index = _index_with({"w": np.ones(DIM, np.float32), "s": 1.0})
    fdefaults = {"allowed": allowed, "n": 4}
    for _ in range(3):
        index._search(QUERIES, 5, 2, None, 0, 0, FILTER, fdefaults, None)
    assert [c["filter"] for c in index._handle.calls] == ["fc"] * 3
    assert all(_is_copy(c["filter_captures"]["allowed"], 2) for c in index._handle.calls)  # (1: the metric's w)
    assert len(copies.made) == 2
    np.testing.assert_array_equal(copies.made[1][1], allowed)
    override = np.array([0, 0, 0, 1], np.uint8)
    index._search(QUERIES, 5, 2, None, 0, 0, FILTER, fdefaults, {"allowed": override, "n": 2})
    last = index._handle.calls[-1]["filter_captures"]
    assert last["allowed"] is override and last["n"] == 2 and len(copies.made) == 2
    index._search(QUERIES, 5, 2, None, 0, 0, FILTER, fdefaults, None)
    assert _is_copy(index._handle.calls[-1]["filter_captures"]["allowed"], 2) and len(copies.made) == 2


def test_new_declared_values_get_a_new_copy(copies):
    """The copy is kept for the declared object it came from: other defaults (another filter
    object of the same symbol, say) are copied in turn; a bool mask is converted once."""
    index = _index_with({"w": np.ones(DIM, np.float32), "s": 1.0})
    first = {"allowed": np.array([True, False, True]), "n": 3}
    second = {"allowed": np.array([False, True, True]), "n": 3}
    for fdefaults in (first, first, second, second, first):
        index._search(QUERIES, 5, 2, None, 0, 0, FILTER, fdefaults, None)
    assert len(copies.made) == 1 + 3  # w, then first, second, first again (the kept copy is the last one's)
    np.testing.assert_array_equal(copies.made[1][1], np.array([1, 0, 1], np.uint8))
    assert copies.made[1][1].dtype == np.uint8


def test_searches_from_several_threads_copy_once(monkeypatch):
    rec = _Copies(delay=0.05)
    monkeypatch.setattr(_index, "_device_copy", rec)
    index = _index_with({"w": np.ones(DIM, np.float32), "s": 1.0})
    threads = [threading.Thread(target=index.search, args=(QUERIES,), kwargs=dict(k=5, n_probes=2))
               for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(rec.made) == 1 and len(index._handle.calls) == 8
    assert all(_is_copy(c["captures"]["w"], 1) for c in index._handle.calls)


def test_zero_queries_copy_nothing(copies):
    index = _index_with({"w": np.ones(DIM, np.float32), "s": 1.0})
    dist, ids = index.search(QUERIES[:0], k=5, n_probes=2)
    assert dist.shape == (0, 5) and copies.made == [] and index._handle.calls == []
    with pytest.raises(udf.UdfRuntimeError, match="capture 'w' of metric wc is f32"):  # still checked
        _index_with({"w": np.ones(DIM + 1, np.float32), "s": 1.0}).search(QUERIES[:0], k=5, n_probes=2)


def test_a_bad_declared_value_is_refused_at_each_search_and_never_copied(copies):
    index = _index_with({"w": np.ones(DIM - 1, np.float32), "s": 1.0})
    for _ in range(2):
        with pytest.raises(udf.UdfRuntimeError) as e:
            index.search(QUERIES, k=5, n_probes=2)
        assert e.value.status == udf.Status.CAPTURE and "pass 16 values" in e.value.message
    assert copies.made == [] and len(index._copies) == 0


def test_declarations_keep_a_snapshot_of_host_arrays():
    """The declaration copies a host array (read-only), so changing the caller's array later
    reaches neither the searches nor reference(); lists become read-only arrays too."""
    w = np.ones(4, np.float32)

    @udf.metric(captures={"w": w, "v": [1.0, 2.0, 3.0, 4.0]}, check=False)
    def snap_w(x, y, acc, ctx):
        return acc + ctx.w[ctx.dim] * (x - y) * (x - y)

    w *= 4.0
    kept = snap_w.capture_defaults["w"]
    np.testing.assert_array_equal(kept, np.ones(4, np.float32))
    assert not kept.flags.writeable and not snap_w.capture_defaults["v"].flags.writeable
    with pytest.raises(ValueError):
        kept[0] = 2.0
    x, y = np.zeros(4), np.ones(4)
    assert snap_w.reference(x, y) == pytest.approx(4.0)
    assert snap_w.reference(x, y, captures={"w": w}) == pytest.approx(16.0)


def test_a_filter_is_resolved_once_until_the_index_changes(copies):
    """search(filter=...) works out the filter (its FilterInfo, the index to search, its
    defaults) once per filter, not at every search; add() starts again."""
    calls = []
    info = _metric_info((udf.CaptureSpec("w", "f32", True), udf.CaptureSpec("s", "f32", False)))
    fdefaults = {"allowed": np.array([1, 1, 0], np.uint8), "n": 3}

    def filter_info(symbol):
        calls.append(symbol)
        return FILTER

    module = SimpleNamespace(metric=lambda symbol: info, filter=filter_info, filters_for=lambda metric: ("fc",),
                             filter_capture_defaults=lambda symbol: fdefaults)
    handle = _Handle()
    handle.add = lambda data, ids: None
    index = udf.Index(handle, module, 0, "wc", {"w": np.ones(DIM, np.float32), "s": 1.0})
    for _ in range(3):
        index.search(QUERIES, k=5, n_probes=2, filter="fc")
    assert calls == ["fc"] and [c["filter"] for c in handle.calls] == ["fc"] * 3
    assert all(_is_copy(c["filter_captures"]["allowed"], 2) for c in handle.calls)
    index.add(np.zeros((2, DIM), np.float32))
    index.search(QUERIES, k=5, n_probes=2, filter="fc")
    assert calls == ["fc", "fc"] and len(copies.made) == 2  # the index's device copies stay
