"""FAISS IndexIVFFlat indexes (docs/bring-your-index.md): a faiss index object, the bytes of
faiss.serialize_index, or a file faiss.write_index wrote, handed to the runtime's reader
(lib/runtime/index/faiss_file.h) as a file.  faiss itself is imported only for an object."""
from __future__ import annotations

import contextlib
import os
import tempfile
from typing import Iterator

from ._runtime import ext


def _is_bytes(src) -> bool:
    if isinstance(src, (bytes, bytearray, memoryview)):
        return True
    return type(src).__module__ == "numpy" and getattr(src, "dtype", None) is not None and src.dtype.kind == "u" \
        and src.dtype.itemsize == 1


@contextlib.contextmanager
def faiss_file(src, what: str) -> Iterator[str]:
    """The path of a FAISS index file: `src` itself (a str / PathLike), or `src` (a faiss index
    object -- a GPU one is copied to the CPU first -- or serialized bytes) written to a
    temporary file, removed afterwards."""
    if isinstance(src, (str, os.PathLike)):
        yield os.fspath(src)
        return
    if not _is_bytes(src) and not type(src).__module__.startswith("faiss"):
        raise TypeError(f"{what}: expected a path, faiss.serialize_index bytes or a faiss index, "
                        f"got {type(src).__name__}")
    with tempfile.TemporaryDirectory(prefix="udf-faiss-") as d:
        path = os.path.join(d, "index.faiss")
        if _is_bytes(src):
            with open(path, "wb") as f:
                f.write(bytes(src))
        else:
            import faiss  # the object is faiss's: the module is there
            if type(src).__name__.startswith("Gpu"):
                src = faiss.index_gpu_to_cpu(src)
            faiss.write_index(src, path)
        yield path


def faiss_to_index_file(faiss_index_or_path, path: str | os.PathLike, metric=None, *, symbol: str | None = None,
                        cache_key: str | None = None) -> str:
    """Writes a FAISS IndexIVFFlat (an object, serialized bytes or a file) as an index file of
    this runtime (udf_index_file_from_faiss), without a GPU: udf.Index.load(path, module) then
    gives what udf.Index.from_faiss gives.  The file is bound to a metric: `metric` an Artifact
    or MetricInfo (its symbol and cache key), or symbol= and cache_key= (the module's
    Module.metric(symbol).cache_key, recorded as the file's provenance).  The
    element type is f32 and the coarse metric the FAISS index's (checked at load).  Returns the
    path."""
    if metric is not None:
        symbol, cache_key = metric.symbol, metric.cache_key
    if not symbol or cache_key is None:
        raise TypeError("udf.faiss_to_index_file: give metric (an Artifact or MetricInfo) or symbol= and cache_key=")
    out = os.fspath(path)
    with faiss_file(faiss_index_or_path, "udf.faiss_to_index_file") as src:
        ext().faiss_to_index_file(src, str(symbol), str(cache_key), out)
    return out
