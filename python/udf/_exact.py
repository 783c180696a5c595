"""Exact search and re-ranking with a UDF, without an index (docs/exact-search.md).

udf.exact_search scores every row of a dataset for each query; udf.refine scores each query's
candidates (from any index: FAISS, cuVS CAGRA or IVF-PQ, this package's) and keeps the k best.
Both run the module's rows scans (udf_exact_search / udf_refine), linked when first used.
"""
from __future__ import annotations

from typing import Any, Mapping

from . import _arrays, _cuda
from ._artifact import capture_defaults_of
from ._index import (_check_device, _check_not_filter, _count, _device_module, _resolve_device, _with_filters,
                     bind_captures, linked_filter)
from .errors import Status, UdfRuntimeError


def exact_search(metric, dataset, queries, k: int = 10, *, captures: Mapping[str, Any] | None = None,
                 filter=None, filter_captures: Mapping[str, Any] | None = None,  # noqa: A002
                 symbol: str | None = None, device: int | None = None, queries_per_item: int = 0,
                 max_batch: int = 0):
    """The k rows of `dataset` nearest to each query under `metric`, by scoring every row.

    metric     a metric (@udf.metric, a built-in name such as "l2", an Artifact, a Module, ...)
    dataset    n x dim, the metric's element type, host or device (CuPy, PyTorch, NumPy); a
               device array whose rows are contiguous (and dim a multiple of 16 bytes) is read in
               place, anything else is copied to the GPU first
    queries    m x dim (or one query, 1-D), the same element type, host or device
    k          1 .. the metric's max_k (1024)
    captures, filter, filter_captures  as for Index.search: the metric's captures; a filter (an
               object, linked with the metric here, or the symbol of one linked with it) keeps
               only the rows it accepts for a query
    symbol     the metric's symbol when the module has several
    device     CUDA ordinal (default: the dataset's device, else 0)
    queries_per_item, max_batch  scheduling knobs (0: automatic)

    Returns (distances, ids) as Index.search does: float32 and int64, m x k, nearest first; ids
    are row numbers of `dataset` (ties to the smaller row), -1 where fewer than k rows remain.
    """
    return _rows_call(metric, dataset, queries, None, k, captures, filter, filter_captures, symbol, device,
                      queries_per_item, max_batch, "udf.exact_search")


def refine(metric, dataset, queries, candidates, k: int = 10, *, captures: Mapping[str, Any] | None = None,
           filter=None, filter_captures: Mapping[str, Any] | None = None,  # noqa: A002
           symbol: str | None = None, device: int | None = None, queries_per_item: int = 0, max_batch: int = 0):
    """The k best of each query's candidates under `metric`: re-ranking another index's results.

    candidates  m x c int64 row numbers of `dataset` (host or device), row q for query q: -1 is
                padding, a row named twice counts once, any other id outside 0 .. n-1 is an error
                (UdfRuntimeError, UDF_ERROR_INVALID_ARGUMENT, naming it and its place)
    The rest as for exact_search; ties go to the earlier candidate.
    """
    return _rows_call(metric, dataset, queries, candidates, k, captures, filter, filter_captures, symbol, device,
                      queries_per_item, max_batch, "udf.refine")


def _rows_call(metric, dataset, queries, candidates, k, captures, flt, filter_captures, symbol, device,
               queries_per_item, max_batch, what: str):
    _check_not_filter(metric, what)
    dev = _resolve_device(device, dataset, "dataset")
    filter_obj = flt is not None and not isinstance(flt, str)
    given = _with_filters(metric, [flt]) if filter_obj else metric
    _cuda.start_early(dev)  # the driver starts while the metric compiles
    mod, ext_mod, _ = _device_module(given, dev)
    info = mod.metric(symbol)
    d = _arrays.as_array(dataset, what="dataset", dtype=info.elem, ndims=(2,))
    q = _arrays.as_array(queries, what="queries", dtype=info.elem)
    if candidates is not None and len(getattr(candidates, "shape", ())) == 1 and hasattr(candidates, "reshape"):
        candidates = candidates.reshape(1, -1)  # one query's
    c = _arrays.as_array(candidates, what="candidates", dtype="i64", ndims=(2,)) if candidates is not None else None
    _check_device([d, q, c], dev)
    k = _count(k, "k")
    if info.max_k and not 1 <= k <= info.max_k:
        msg = ("k = 0: k must be at least 1" if k == 0 else
               f"k = {k} exceeds the largest k of metric {info.symbol} ({info.max_k})")
        raise UdfRuntimeError.of(Status.INVALID_ARGUMENT, msg)
    one = len(q.shape) == 1
    n = 1 if one else q.shape[0]
    bound, arrays = bind_captures(f"metric {info.symbol}", info.captures, captures,
                                  capture_defaults_of(given, info.symbol), per_dim=True, device=dev, dim=d.shape[-1])
    fsym, fbound, farrays = None, {}, []
    if flt is not None:
        fsym = flt if isinstance(flt, str) else getattr(flt, "symbol", None)
        if fsym is None and len(mod.filters) == 1:  # a CUDA filter named by its compile
            fsym = mod.filters[0].symbol
        finfo, fdefaults = linked_filter(mod, info.symbol, fsym, given)
        fbound, farrays = bind_captures(f"filter {fsym}", finfo.captures, filter_captures, fdefaults, per_dim=False,
                                        device=dev)
    elif filter_captures:
        raise UdfRuntimeError.of(Status.CAPTURE, "filter_captures given but no filter: pass filter=...")
    dist, dist_arg = _arrays.empty_like(q, (n, k), "f32")
    ids, ids_arg = _arrays.empty_like(q, (n, k), "i64")
    if n == 0:
        return dist, ids
    inputs = [a for a in (d, q, c, *arrays, *farrays) if a is not None]
    after = _arrays.producer_stream(inputs, dev)
    if after is None:
        _arrays.synchronize(inputs)
    ext_mod.exact_search(info.symbol, d.arg, q.arg, c.arg if c is not None else None, dist_arg, ids_arg, k=k,
                         captures=bound, queries_per_item=_count(queries_per_item, "queries_per_item"),
                         max_batch=_count(max_batch, "max_batch"), filter=fsym, filter_captures=fbound,
                         after_stream=after)
    if one:
        dist, ids = dist.reshape((k,)), ids.reshape((k,))
    return dist, ids


__all__ = ["exact_search", "refine"]
