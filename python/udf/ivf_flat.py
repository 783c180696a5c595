"""`udf.ivf_flat`: the proof of concept's API (cuVS ivf_flat style) on top of `udf.Index`.

    from udf import ivf_flat

    index = ivf_flat.build(ivf_flat.IndexParams(n_lists=64, metric="sqeuclidean"), dataset)

    @ivf_flat.metric(order="min", initial=0.0, coarse_metric="sqeuclidean",
                     captures={"weights": weights}, symbol_name="demo_weighted_l2_update_f32")
    def weighted_l2_update(x, y, acc, ctx):
        d = x - y
        return acc + ctx.weights[ctx.dim] * d * d

    distances, neighbors = ivf_flat.search(
        ivf_flat.SearchParams(n_probes=1, metric=weighted_l2_update), index, queries, 3)

An index is built with a built-in metric ("sqeuclidean" = "l2", "euclidean", "inner_product",
"cosine") or a UDF; it can be searched with any UDF of the same element type and coarse metric
(`SearchParams(metric=...)`): the index is rebound to that metric once (a copy of the lists,
cached until the index changes).  Unlike the proof of concept, compiling needs no GPU, and
metrics may have several captures of mixed types, any order / initial value, and a finalize.
"""
from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any, Mapping

from . import _arrays
from ._builtins import builtin_metric
from ._index import Index
from ._filter import cuda_source_filter, filter, ir_filter  # noqa: A004
from ._metric import Metric, cuda_source_metric, ir_metric, metric

__all__ = ["Index", "IndexParams", "SearchParams", "build", "cuda_source_filter", "cuda_source_metric", "extend",
           "filter", "ir_filter", "ir_metric", "load", "metric", "save", "search"]


@dataclass
class IndexParams:
    """How to build an index.

    n_lists          coarse lists (k-means centroids)
    metric           a built-in name ("sqeuclidean", "l2", "euclidean", "inner_product", "cosine")
                     or a udf metric object
    kmeans_n_iters   k-means iterations
    kmeans_trainset_fraction  fraction of the rows k-means trains on (None: the runtime's default,
                     min(rows, 256 * n_lists))
    seed, balance    see udf.Index.build
    """

    n_lists: int = 1024
    metric: str | Metric = "sqeuclidean"
    kmeans_n_iters: int = 20
    kmeans_trainset_fraction: float | None = None
    seed: int = 1234
    balance: float = 2.0


@dataclass
class SearchParams:
    """How to search: n_probes lists per query; metric None (the index's own) or a udf metric of
    the index's element type and coarse metric; captures {name: value} over the metric's defaults;
    filter None, a udf filter (@udf.filter, ...) or the symbol of a filter linked into the index's
    module, with filter_captures {name: value} over the filter's defaults."""

    n_probes: int = 20
    metric: Metric | None = None
    captures: Mapping[str, Any] | None = field(default=None)
    filter: Any = None
    filter_captures: Mapping[str, Any] | None = field(default=None)


def _elem_of(dataset) -> str:
    name = _arrays.array_dtype_name(dataset)
    return name if name in ("f32", "f16", "i8", "u8") else "f32"


def _metric_for(m, elem: str):
    return builtin_metric(m, elem) if isinstance(m, str) else m


def build(index_params: IndexParams, dataset, *, ids=None, device: int | None = None) -> Index:
    """Builds an index over `dataset` (rows x dim; float32, float16, int8 or uint8) on the GPU.
    A built-in metric is taken for the dataset's element type."""
    p = index_params
    m = _metric_for(p.metric, _elem_of(dataset))
    max_train = 0
    if p.kmeans_trainset_fraction is not None:
        shape = getattr(dataset, "shape", None) or (len(dataset),)
        max_train = max(1, int(p.kmeans_trainset_fraction * int(shape[0])))
    return Index.build(m, dataset, n_lists=p.n_lists, kmeans_iters=p.kmeans_n_iters, seed=p.seed,
                       balance=p.balance, max_train_rows=max_train, ids=ids, device=device)


def search(search_params: SearchParams, index: Index, queries, k: int, *,
           captures: Mapping[str, Any] | None = None):
    """(distances, neighbors) of the k nearest neighbours of each query, of the queries' library
    and device.  With search_params.metric, the index's lists are searched with that metric."""
    sp = search_params
    if sp.metric is None:
        target = index
    elif sp.filter is not None and not isinstance(sp.filter, str):
        target = index.with_metric(sp.metric, filters=[sp.filter])  # one rebound copy for both
    else:
        target = index.with_metric(sp.metric)
    caps = {**(sp.captures or {}), **(captures or {})}
    return target.search(queries, k=k, n_probes=sp.n_probes, captures=caps or None, filter=sp.filter,
                         filter_captures=sp.filter_captures)


def extend(index: Index, new_vectors, new_indices=None) -> Index:
    """Adds vectors (ids: new_indices, default: continuing after the largest id); returns the index."""
    index.add(new_vectors, new_indices)
    return index


def save(filename: str | os.PathLike, index: Index) -> None:
    """Writes the index to a file (atomically)."""
    index.save(filename)


def load(filename: str | os.PathLike, metric: str | Metric = "sqeuclidean", *, dtype="f32",
         device: int = 0) -> Index:
    """Reads an index written by save(); `metric` (a built-in name for element type `dtype`, or
    the udf metric it was built with) must be the one it was built with."""
    return Index.load(filename, _metric_for(metric, _arrays.udf_dtype(dtype)), device=device)
