"""udf: ahead-of-time compiled GPU metric UDFs for IVF-Flat search.

Write a metric in Python (or CUDA C++, MLIR, LLVM IR), compile it for a list of GPU archs
without a GPU, link it with the prebuilt IVF-Flat scan kernels, and build / search indexes on
the GPU with it:

    import numpy as np, udf

    @udf.metric(captures={"weights": np.ones(64, np.float32)})
    def weighted_l2(x, y, acc, ctx):
        d = x - y
        return acc + ctx.weights[ctx.dim] * d * d

    artifact = udf.compile(weighted_l2, archs=["sm_80", "sm_90"])   # no GPU needed
    module = udf.link([weighted_l2], archs=[80, 90])                # nor here
    index = udf.Index.build(weighted_l2, data, n_lists=256)         # GPU: compiled for it, linked
    distances, neighbors = index.search(queries, k=10, n_probes=32,
                                        captures={"weights": w})     # numpy / CuPy / torch in and out

Metrics: `metric` (decorator), `cuda_source_metric`, `ir_metric` -> Metric objects;
`builtin_metric("sqeuclidean" | "euclidean" | "inner_product" | "cosine", elem)`.
Filters (ABI ivf_flat.filter.v1: `keep(query, id, ctx) -> bool`, applied before the metric):
`filter` (decorator), `cuda_source_filter`, `ir_filter` -> Filter objects; `builtin_filter("bitmap")`.
`compile` -> Artifact; `link` (metrics and filters, optional pairs) -> Module; `load_module`;
`Artifact.load`, `Module.load`.
Search: `Index` (build, load, from_faiss, from_cuvs, add, save, search(..., filter=, filter_captures=), with_metric),
`device_info`.
The proof of concept's API: `udf.ivf_flat`.  Errors: `udf.errors` (all derive from UdfError).

Compiling and linking run the bundled `udfc` / `udf-link` (found as udf._tools explains) and
share their on-disk cache; the runtime extension `udf._ext` is needed only for indexes.
"""
from __future__ import annotations

from importlib import metadata as _metadata

from . import errors
from ._builtins import builtin_filter, builtin_metric
from ._cuvs import cuvs_to_index_file
from ._exact import exact_search, refine
from ._faiss import faiss_to_index_file
from ._artifact import DEFAULT_ARCHS, Artifact, FilterInfo, MetricInfo, Module, compile, link, load_module
from ._filter import CudaFilter, Filter, IRFilter, PythonFilter, cuda_source_filter, filter, ir_filter  # noqa: A004
from ._index import Index
from ._metric import CudaMetric, IRMetric, Metric, PythonMetric, cuda_source_metric, ir_metric, metric
from ._pycompile.spec import CaptureSpec
from ._runtime import device_info
from ._tools import tool_path
from .errors import (BackendUnavailableError, FrontEndWarning, NoDriverError, Status, ToolDiagnostic,
                     UdfCompileError, UdfError, UdfRuntimeError, UdfToolError, UdfWarning)
from . import ivf_flat  # noqa: E402  (after the names it uses)

try:
    __version__ = _metadata.version("udf")
except _metadata.PackageNotFoundError:  # a build tree (CMake writes _build_version.py), or the sources
    try:
        from ._build_version import version as __version__
    except ImportError:
        __version__ = "0+unknown"

__all__ = [
    "Artifact", "BackendUnavailableError", "CaptureSpec", "CudaFilter", "CudaMetric", "DEFAULT_ARCHS", "Filter",
    "FilterInfo", "FrontEndWarning", "IRFilter", "IRMetric", "Index", "Metric", "MetricInfo", "Module", "NoDriverError",
    "PythonFilter", "PythonMetric",
    "Status", "ToolDiagnostic", "UdfCompileError", "UdfError", "UdfRuntimeError", "UdfToolError", "UdfWarning",
    "builtin_filter", "builtin_metric", "compile", "cuda_source_filter", "cuda_source_metric", "cuvs_to_index_file",
    "device_info", "errors", "exact_search", "faiss_to_index_file", "filter", "ir_filter", "ir_metric", "ivf_flat",
    "link", "load_module", "metric", "refine", "tool_path",
    "__version__",
]
