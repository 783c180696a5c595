"""Built-in metrics by name: "sqeuclidean" (= "l2"), "euclidean", "inner_product", "cosine";
built-in filters by name: "bitmap".

For f32 vectors, l2 / inner_product / cosine are the artifacts the package ships
(share/udf/metrics/*.udfa, compiled from kernels/metrics/*.cu at build time).  Other element
types (f16, i8, u8) and "euclidean" are compiled from the same one-line sources here, with udfc.
l2 and euclidean are declared monotone (as kernels/metrics/l2.cu is): each coordinate adds
d * d >= 0, and sqrt does not decrease.
"""
from __future__ import annotations

import threading

from . import _cuda, _tools
from ._artifact import Artifact
from ._metric import CudaMetric, cuda_source_metric
from .errors import UdfError

#: accepted names -> canonical name
NAMES = {"sqeuclidean": "l2", "l2": "l2", "euclidean": "euclidean", "inner_product": "inner_product",
         "cosine": "cosine"}
SHIPPED = ("l2", "inner_product", "cosine")  # share/udf/metrics/NAME.udfa, f32

# canonical -> (metric body, finalize body or None, order, coarse metric, monotone); ACC is the
# accumulator type
_DEFS = {
    "l2": ("ACC d = x - y; return acc + d * d;", None, "min", "l2", True),
    "euclidean": ("ACC d = x - y; return acc + d * d;", "return sqrtf((float)acc);", "min", "l2", True),
    "inner_product": ("return acc + x * y;", None, "max", "inner_product", False),
    "cosine": ("return acc + x * y;", "return 1.0f - (float)acc;", "min", "cosine", False),
}

_cache: dict[tuple[str, str], Artifact | CudaMetric] = {}
_lock = threading.Lock()


def canonical(name: str) -> str:
    try:
        return NAMES[name]
    except (KeyError, TypeError):
        raise ValueError(f"metric {name!r} is not a built-in metric ({', '.join(NAMES)}); "
                         f"pass a udf metric object for anything else") from None


def source(name: str, elem: str) -> tuple[str, str, str | None]:
    """(CUDA source, symbol, finalize symbol or None) of built-in `name` for element type `elem`."""
    name = canonical(name)
    body, fin, _order, _coarse, _monotone = _DEFS[name]
    acc = "float" if elem in ("f32", "f16") else "int"
    sym = f"udf_builtin_{name}_{elem}"
    text = f'extern "C" __device__ ACC {sym}(ACC x, ACC y, ACC acc, const udf_ctx_v1 *ctx) {{ {body} }}\n'
    fsym = None
    if fin is not None:
        fsym = f"{sym}_finalize"
        text += f'extern "C" __device__ float {fsym}(ACC acc, const udf_ctx_v1 *ctx) {{ {fin} }}\n'
    return text.replace("ACC", acc), sym, fsym


def builtin_metric(name: str, elem: str = "f32") -> Artifact | CudaMetric:
    """The built-in metric `name` for vectors of `elem`: the shipped artifact for f32 l2 /
    inner_product / cosine, else a CudaMetric compiled on first use.  Cached per process."""
    name = canonical(name)
    _cuda.start_early(declaration=True)  # as for a declared metric (udf._cuda)
    key = (name, elem)
    with _lock:
        m = _cache.get(key)
        if m is None:
            m = _make(name, elem)
            _cache[key] = m
        return m


def _make(name: str, elem: str) -> Artifact | CudaMetric:
    if elem == "f32" and name in SHIPPED:
        path = _tools.metrics_dir() / f"{name}.udfa"
        if path.is_file():
            return Artifact.load(path)
    text, sym, fsym = source(name, elem)
    _body, _fin, order, coarse, monotone = _DEFS[name]
    return cuda_source_metric(text, symbol_name=sym, finalize=fsym, elem=elem, order=order, coarse_metric=coarse,
                              monotone=monotone)


#: built-in filters: share/udf/filters/NAME.udfa
FILTERS = ("bitmap",)


def builtin_filter(name: str) -> Artifact:
    """The built-in filter `name`, an Artifact from share/udf/filters:

    "bitmap"  udf_builtin_bitmap, captures bitmap (u8[]) and n_ids (i32): an allow-list over
              ids, id i kept when bit i % 8 of byte i // 8 is set (ids outside [0, n_ids) are
              rejected); the same for every query.  np.packbits(mask, bitorder="little") makes
              the bitmap of a bool mask.

    Raises ValueError for an unknown name, UdfError when the tools' share/udf has no such file."""
    if name not in FILTERS:
        raise ValueError(f"filter {name!r} is not a built-in filter ({', '.join(FILTERS)})")
    _cuda.start_early(declaration=True)
    key = ("filter", name)
    with _lock:
        f = _cache.get(key)
        if f is None:
            path = _tools.filters_dir() / f"{name}.udfa"
            if not path.is_file():
                raise UdfError(f"built-in filter {name!r}: {path} does not exist (the tools' share/udf/filters)")
            f = _cache[key] = Artifact.load(path)
        return f
