"""cuVS IVF-Flat indexes (docs/bring-your-index.md): a cuvs.neighbors.ivf_flat.Index object, the
bytes of a saved index, or a file cuvs.neighbors.ivf_flat.save wrote, handed to the runtime's
reader (lib/runtime/index/cuvs_file.h) as a file.  cuvs itself is imported only for an object."""
from __future__ import annotations

import contextlib
import os
import tempfile
from typing import Iterator

from ._faiss import _is_bytes
from ._runtime import ext


@contextlib.contextmanager
def cuvs_file(src, what: str) -> Iterator[str]:
    """The path of a cuVS IVF-Flat index file: `src` itself (a str / PathLike), or `src` (a
    cuvs.neighbors.ivf_flat.Index, saved with cuvs's own ivf_flat.save, or the bytes of a saved
    index) written to a temporary file, removed afterwards."""
    if isinstance(src, (str, os.PathLike)):
        yield os.fspath(src)
        return
    module = type(src).__module__
    if not _is_bytes(src) and not module.startswith("cuvs"):
        raise TypeError(f"{what}: expected a path, the bytes of a saved cuVS IVF-Flat index or a "
                        f"cuvs.neighbors.ivf_flat.Index, got {type(src).__name__}")
    if not _is_bytes(src) and (".ivf_flat" not in module or ".mg." in module or type(src).__name__ != "Index"):
        raise TypeError(f"{what}: {module}.{type(src).__name__} is not a cuvs.neighbors.ivf_flat.Index "
                        "(only IVF-Flat indexes are read)")
    with tempfile.TemporaryDirectory(prefix="udf-cuvs-") as d:
        path = os.path.join(d, "index.cuvs")
        if _is_bytes(src):
            with open(path, "wb") as f:
                f.write(bytes(src))
        else:
            from cuvs.neighbors import ivf_flat  # the object is cuvs's: the module is there
            ivf_flat.save(path, src)
        yield path


def cuvs_to_index_file(cuvs_index_or_path, path: str | os.PathLike, metric=None, *, symbol: str | None = None,
                       cache_key: str | None = None) -> str:
    """Writes a cuVS IVF-Flat index (an object, saved bytes or a file) as an index file of this
    runtime (udf_index_file_from_cuvs), without a GPU for a file or bytes (saving an object
    needs cuvs, which needs one): udf.Index.load(path, module) then gives what
    udf.Index.from_cuvs gives.  The file is bound to a metric: `metric` an Artifact or
    MetricInfo (its symbol and cache key), or symbol= and cache_key= (the module's
    Module.metric(symbol).cache_key, recorded as the file's provenance).  The
    element type and coarse metric are the cuVS index's (checked at load).  Returns the path."""
    if metric is not None:
        symbol, cache_key = metric.symbol, metric.cache_key
    if not symbol or cache_key is None:
        raise TypeError("udf.cuvs_to_index_file: give metric (an Artifact or MetricInfo) or symbol= and cache_key=")
    out = os.fspath(path)
    with cuvs_file(cuvs_index_or_path, "udf.cuvs_to_index_file") as src:
        ext().cuvs_to_index_file(src, str(symbol), str(cache_key), out)
    return out
