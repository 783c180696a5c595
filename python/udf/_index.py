"""`udf.Index`: an IVF-Flat index on the GPU, searched with a metric UDF.

Wherever a module is needed (build, load, with_metric), a Module, a metric, an Artifact, a
.udfm / .udfa path, or a list of metrics / Artifacts is accepted: anything but a Module is
compiled for the GPU's arch and linked (once per process; udfc's and udf-link's on-disk cache
makes it quick across processes too).

Filters (ABI ivf_flat.filter.v1, udf._filter) are linked into the index's module beside its
metric: `Index.build(metric, data, filters=[f, ...])` (or a list [metric, f, ...]); a search
names one with `filter=` (the object or its symbol) and binds its captures with
`filter_captures=` over the filter's declared defaults.  A filter object that is not in the
module is linked with the index's metric on first use, and the lists are then searched
through a rebound copy (as with_metric does: cached until the index changes); building with
`filters=` avoids the copy.

Arrays (data, ids, queries, capture values) may be NumPy, CuPy, PyTorch (host or device),
other DLPack producers, objects with only `__cuda_array_interface__`, or lists; device arrays
must be on the index's GPU.  Search results have the library and device of the queries.  A host
array declared as a capture default is copied to the index's GPU once, at the first search that
binds it (CaptureCopies; docs/python.md, "When array captures reach the GPU"); a value given to
a search is that search's.

Several GPUs: `Index.build(..., devices=[0, 1])` and `Index.load(..., devices=[0, 1])` shard the
index over those CUDA devices (include/udf/runtime.h, "several GPUs"): the module is loaded by
each distinct device's runtime (udf._runtime.runtime) and passed once per listed device, so a
device listed twice (`[0, 0]`: two shards on one GPU) passes its module twice.  The first device
is the index's home (`index.device`): device arrays must be on it.  `shard_layout=` says how the
devices split the vectors (udf_shard_layout): "vectors" (the default) gives each device an equal
part of every list, "lists" each device a contiguous range of whole lists.  A sharded index
searches, adds and saves like a one-GPU one, with the same results in either layout;
`with_metric` (and a filter object not linked into its module) is the runtime's
UDF_ERROR_UNSUPPORTED.
"""
from __future__ import annotations

import operator
import os
import threading
from typing import Any, Mapping

from . import _arrays, _cuda
from ._artifact import Artifact, FilterInfo, MetricInfo, Module, capture_defaults_of, module_and_items
from ._pycompile.spec import parse_arch
from ._runtime import _runtimes, runtime
from .errors import Status, UdfRuntimeError
import importlib.util
from ._filter import Filter
from ._metric import Metric
from ._udf import to_host
import numpy as np
from ._runtime import ext


def _count(value, name: str, upper: int | None = None) -> int:
    """An int parameter (k, n_probes, ...) in 0 .. 2**32 - 1 (the runtime checks the real range)."""
    try:
        v = operator.index(value)
    except TypeError:
        raise TypeError(f"{name} must be an integer, got {type(value).__name__}") from None
    if not 0 <= v < 2**32:
        raise UdfRuntimeError.of(Status.INVALID_ARGUMENT, f"{name} = {v} is out of range")
    return v


def _device_arch(device: int) -> int:
    """The arch of CUDA device `device`: the early start's (udf._cuda) when it is starting that
    device, else the runtime's (made here: without a driver or device this raises first)."""
    arch = _cuda.early_arch(device)
    if arch is None:
        arch = int(runtime(device).device_info()["arch"])
    return parse_arch(arch)


def _devices_arg(device, devices) -> list[int] | None:
    """devices= checked (None, or a non-empty list of CUDA ordinals); before any GPU work."""
    if devices is None:
        return None
    if device is not None:
        raise ValueError(f"device={device!r} and devices={devices!r} exclude each other: pass device=N for one GPU "
                         f"or devices=[N, ...] for an index sharded over several")
    if not isinstance(devices, (list, tuple)):
        raise TypeError(f"devices must be a list of CUDA device ordinals (e.g. [0, 1]), got {type(devices).__name__}")
    if not devices:
        raise ValueError("devices=[] is empty: pass at least one CUDA device ordinal (e.g. [0, 1])")
    out = []
    for i, d in enumerate(devices):
        if isinstance(d, bool):
            raise TypeError(f"devices[{i}] = {d!r} is not a CUDA device ordinal (an int)")
        try:
            v = operator.index(d)
        except TypeError:
            raise TypeError(f"devices[{i}] = {d!r} is not a CUDA device ordinal (an int), "
                            f"got {type(d).__name__}") from None
        if v < 0:
            raise ValueError(f"devices[{i}] = {v} is not a CUDA device ordinal (>= 0)")
        out.append(v)
    return out


SHARD_LAYOUTS = ("vectors", "lists")  # shard_layout= (include/udf/runtime.hpp's names); the first is the default


def _shard_layout_arg(shard_layout) -> str:
    """shard_layout= checked ("vectors" or "lists"); before any GPU work."""
    if not isinstance(shard_layout, str) or shard_layout not in SHARD_LAYOUTS:
        raise ValueError(f"shard_layout={shard_layout!r} is not a shard layout: pass \"vectors\" (the default: each "
                         f"device keeps an equal part of every list) or \"lists\" (each device keeps a contiguous "
                         f"range of whole lists)")
    return shard_layout


def _device_module(obj, device: int) -> tuple[Module, Any, list | None]:
    """(Module, the module loaded by the device's runtime, the artifacts it was linked from or
    None for a linked Module) for what the user gave.  The metric compiles for the device's
    arch before the runtime is made, so that a driver still starting (udf._cuda.start_early)
    makes its context meanwhile.  Declarations, Artifacts and Modules (alone or in a list) are
    answered from _resolved after the first call: a search calls this every time."""
    key = _resolved_key(obj, device)
    hit = _resolved.get(key) if key is not None else None
    if hit is not None and _runtimes.get(device) is hit[1]:
        return hit[2]
    ext()  # without the extension, fail before compiling
    arch = _device_arch(device)
    mod, items = module_and_items(obj, arch, device=device, make_runtime=lambda: runtime(device))
    rt = runtime(device)
    out = (mod, mod._runtime_module(rt, device), items)
    if key is not None:
        if len(_resolved) >= _RESOLVED_MAX:
            _resolved.clear()
        _resolved[key] = (obj if not isinstance(obj, list) else tuple(obj), rt, out)
    return out


# _device_module's answers: (ids of what was given, device) -> (what was given, kept so that its
# ids stay its own; the runtime they were loaded by; the answer).  Paths are not kept (the file
# may change between calls).
_resolved: dict[tuple, tuple] = {}
_RESOLVED_MAX = 256


def _resolved_key(obj, device: int) -> tuple | None:
    """_resolved's key for what was given to _device_module: None (not cached) when it names a path."""
    items = obj if isinstance(obj, (list, tuple)) else (obj,)
    if any(isinstance(i, (str, os.PathLike)) for i in items):
        return None
    return (*(id(i) for i in items), isinstance(obj, (list, tuple)), device)


def _nccl_from_wheel() -> None:
    """Points the runtime at the nvidia-nccl wheel's libnccl.so.2 (when it is installed and
    $UDF_NCCL_LIBRARY names nothing), for a sharded index's transport (docs/scale-out.md)."""
    if os.environ.get("UDF_NCCL_LIBRARY"):
        return
    try:
        spec = importlib.util.find_spec("nvidia.nccl")
    except (ImportError, ValueError):
        return
    for root in (spec.submodule_search_locations or []) if spec else []:
        lib = os.path.join(root, "lib", "libnccl.so.2")
        if os.path.isfile(lib):
            os.environ["UDF_NCCL_LIBRARY"] = lib
            return


def _sharded_modules(obj, devices: list[int]) -> tuple[Module, list, list | None]:
    """(the home device's Module, the module loaded by each listed device's runtime -- one per
    entry, the same one for a device listed twice --, the artifacts) for a sharded index."""
    loaded = {d: _device_module(obj, d) for d in dict.fromkeys(devices)}  # distinct, in order
    mod, _, source = loaded[devices[0]]
    return mod, [loaded[d][1] for d in devices], source


def _build_modules(given, dev: int, devs: list[int] | None) -> tuple[Module, list, list | None]:
    """(the home device's Module, the ext modules a build takes -- one per listed device, or
    the one device's --, the artifacts) for build / build_chunked / load."""
    _cuda.start_early(dev)  # the home device's driver starts while the metric compiles
    if devs:
        _nccl_from_wheel()
        return _sharded_modules(given, devs)
    mod, ext_mod, source = _device_module(given, dev)
    return mod, [ext_mod], source


def _with_filters(module, filters):
    """`module` (a metric, list, ...) with `filters` added, as one list to link."""
    if filters is None:
        return module
    extra = [filters] if isinstance(filters, (Filter, Artifact, str, os.PathLike)) else list(filters)
    if not extra:
        return module
    if isinstance(module, Module) or (isinstance(module, (str, os.PathLike))
                                      and os.fspath(module).endswith(Module.SUFFIX)):
        raise TypeError("filters= cannot be added to a linked module: link the metric and the filters together "
                        "(udf.link([metric, filter, ...])) or pass the metric itself")
    items = list(module) if isinstance(module, (list, tuple)) else [module]
    return [*items, *extra]


def _is_metric_like(obj) -> bool:
    return isinstance(obj, Metric) or (isinstance(obj, Artifact) and not obj.is_filter)


def _check_not_filter(obj, what: str) -> None:
    """A clear TypeError for a filter given where a metric (or module) is expected."""
    if isinstance(obj, Filter) or (isinstance(obj, Artifact) and obj.is_filter):
        raise TypeError(f"{what}: {getattr(obj, 'symbol', None) or 'this'} is a filter, not a metric; an index needs "
                        f"a metric: pass the metric, with the filter in filters=[...] (or search(filter=...))")


class _Mismatch(Exception):
    """A capture value that does not fit its declaration: what was given and how to fix it."""

    def __init__(self, given: str, fix: str):
        super().__init__(given)
        self.given, self.fix = given, fix


def _given(value) -> str:
    """A capture value as a message names it: `2.5 (a float)`, `a str`, `None`."""
    if isinstance(value, (bool, int, float, np.generic)):
        return f"{value!r} (a {type(value).__name__})"
    return "None" if value is None else f"a {type(value).__name__}"


def _capture_array(value, spec, *, what: str, kw: str, per_dim: bool, dim: int | None):
    """`value` as the array capture `spec` (an _arrays.Arr); _Mismatch when its kind, dtype or
    shape does not fit -- checked on the value itself, before any conversion."""
    ready = _arrays.ready_device(value, spec.dtype, (1, 2) if per_dim else (1,), what)
    if ready is not None:  # a CuPy or PyTorch CUDA array of the capture's dtype: only its shape to check
        _check_capture_shape(ready.shape, per_dim=per_dim, dim=dim)
        return ready
    want = _arrays.DTYPES[spec.dtype][1]
    lib = _arrays.library(value)
    if lib is None and not isinstance(value, (list, tuple)):
        raise _Mismatch(_given(value), "pass an array" + (" of one value per dimension" if per_dim else ""))
    if lib is not None:
        src = _arrays._dtype_of(value, lib)
        try:
            lossy = src is not None and src != want and not np.can_cast(np.dtype(src), np.dtype(want), "safe")
        except TypeError:  # a dtype NumPy does not know (bfloat16)
            lossy = True
        if lossy:
            raise _Mismatch(f"{'an' if str(src)[:1] in 'aeio' else 'a'} {src} array",
                            f"convert it, e.g. {kw}={{'{spec.name}': value.astype(np.{want})}}")
        _check_capture_shape(_arrays._shape_of(value, lib), per_dim=per_dim, dim=dim)
    a = _arrays.as_array(value, what=what, dtype=spec.dtype, ndims=(1, 2) if per_dim else (1,))
    _check_capture_shape(a.shape, per_dim=per_dim, dim=dim)
    return a


def _check_capture_shape(shape: tuple[int, ...], *, per_dim: bool, dim: int | None) -> None:
    n = 1
    for s in shape:
        n *= s
    if per_dim:
        # 1-D, or 2-D with one row or one column (the runtime reads either as a vector)
        if not shape or len(shape) > 2 or (len(shape) == 2 and min(shape) > 1):
            raise _Mismatch(f"an array of shape {shape}", "pass a 1-D array of one value per dimension (e.g. "
                                                          "value.ravel(), if it holds them)")
        if dim is not None and n != dim:
            raise _Mismatch(f"{n} values (shape {shape})", f"pass {dim} values, one per dimension of the index")
    else:
        if len(shape) != 1:
            raise _Mismatch(f"an array of shape {shape}", "expected a 1-D array (e.g. value.ravel())")
        if shape[0] < 1:
            raise _Mismatch("an empty array", "a filter's array captures need at least one element")


def _capture_scalar(value, spec, *, what: str, kw: str) -> int | float:
    """`value` as the scalar capture `spec`; _Mismatch when it is not one number of its type (an
    int for an f32 scalar is converted: every int of 24 bits or fewer is exact)."""
    integer = spec.dtype == "i32"
    if isinstance(value, (bool, np.bool_)):
        raise _Mismatch(_given(value), "pass a number")
    if _arrays.is_array(value):
        shape = _arrays._shape_of(value, _arrays.library(value))
        if int(np.prod(shape)) != 1:
            raise _Mismatch(f"an array of shape {shape}", "pass one number (a scalar capture holds one value)")
    elif isinstance(value, (list, tuple)):
        raise _Mismatch(f"a {type(value).__name__} of {len(value)} values",
                        "pass one number (a scalar capture holds one value)")
    elif not isinstance(value, (int, float, np.generic)) or isinstance(value, (complex, np.complexfloating)):
        raise _Mismatch(_given(value), "pass a number")
    v = value.item() if hasattr(value, "item") else value
    if integer and isinstance(v, float) and not v.is_integer():
        raise _Mismatch(_given(value), f"pass an int; or, for a fractional value, declare the capture f32 "
                                       f"(captures={{'{spec.name}': 'f32'}} or a float default such as 2.0: "
                                       f"an int default such as 2 declares an i32)")
    return _arrays.scalar_value(value, what=what, integer=integer)


def _declared(spec, *, per_dim: bool, dim: int | None) -> str:
    """`f32[] (one float32 per dimension: 128)`, `f32[] (a 1-D array of float32)`, `an i32 scalar`."""
    if not spec.is_array:
        return f"an {spec.dtype} scalar"
    npname = _arrays.DTYPES[spec.dtype][1]
    if per_dim:
        return f"{spec.udfc_type} (one {npname} per dimension{f': {dim}' if dim is not None else ''})"
    return f"{spec.udfc_type} (a 1-D array of {npname})"


class CaptureCopies:
    """An index's device copies of the host arrays declared as capture defaults (the values of
    a metric's or filter's `captures=`): one per (owner, capture), on the index's (home)
    device, made at the first search that binds the declared value (a udf._ext.DeviceArray,
    udf_device_array_create) and bound by every later search while the declaration holds that
    same value object -- the bytes cross to the GPU once, where a host array bound as it is
    crosses at every search.  A value given to the search (captures= / filter_captures=) is
    never kept.  Index objects over the same handle (with_metric's wrappers) share one;
    searches from several threads make each copy once (a lock)."""

    def __init__(self, device: int):
        self.device = device
        self._lock = threading.Lock()
        self._copies: dict[tuple, tuple[Any, _arrays.Arr]] = {}

    def bind(self, key: tuple, value, convert) -> _arrays.Arr:
        """The Arr to bind for declared value `value` under `key`: the kept device copy when it
        was made from this very object, else convert() (the checked host or device array) --
        copied to the device and kept when it is host memory."""
        with self._lock:
            kept = self._copies.get(key)
            if kept is not None and kept[0] is value:
                return kept[1]
            a = convert()
            if a.on_device:  # a device array: read in place at each search
                return a
            copy = _device_copy(self.device, a)
            self._copies[key] = (value, copy)  # (holds `value`: its id stays its own)
            return copy

    def __len__(self) -> int:
        return len(self._copies)


def _device_copy(device: int, a: _arrays.Arr) -> _arrays.Arr:
    """Host array `a` copied into device memory of `device` that the runtime owns
    (udf._ext.DeviceArray), as the Arr a search binds."""
    d = runtime(device).device_array(a.arg)
    return _arrays.Arr(value=d, arg=d.tensor, lib="udf", device=device, dtype=a.dtype, shape=a.shape, what=a.what)


def linked_filter(mod: Module, metric: str, symbol: str, given) -> tuple[FilterInfo, Mapping[str, Any]]:
    """Filter `symbol` of module `mod`, linked there with metric `metric`, and its capture
    defaults (the module's, else those of its declaration among `given`, what the module was
    linked from).  UdfRuntimeError: INVALID_ARGUMENT when the module has no such filter,
    MISMATCH when it has it for other metrics only."""
    try:
        info = mod.filter(symbol)
    except ValueError as exc:
        raise UdfRuntimeError.of(Status.INVALID_ARGUMENT, str(exc)) from None
    if symbol not in mod.filters_for(metric):
        raise UdfRuntimeError.of(Status.MISMATCH, f"filter {symbol} is not linked with metric {metric} in module "
                                                  f"{mod.name}: link them together (udf.link(..., pairs="
                                                  f"[('{metric}', '{symbol}')])), or pass the filter object")
    return info, mod.filter_capture_defaults(symbol) or capture_defaults_of(given, symbol, "filter")


def bind_captures(owner: str, specs, captures: Mapping[str, Any] | None, defaults: Mapping[str, Any], *,
                  per_dim: bool, device: int | None = None, dim: int | None = None,
                  copies: CaptureCopies | None = None) -> tuple[dict, list]:
    """{name: value for _ext} for every capture in `specs` (CaptureSpec, the declaration of
    `owner`, "metric NAME" / "filter NAME"), from `defaults` then `captures`, and the device
    arrays among them.  A metric's arrays (per_dim) hold one value per dimension (`dim` of them
    when given); a filter's are 1-D of any length >= 1.  Array dtypes are converted only where
    nothing is lost.  Everything is checked here, before the runtime is called: a problem is
    UdfRuntimeError(UDF_ERROR_CAPTURE) naming the capture, its declared type, what was given
    and the fix; an array on another device than `device` is UDF_ERROR_INVALID_ARGUMENT.
    With `copies` (the index's CaptureCopies), a host array default -- not one in `captures` --
    is bound as its device copy there (made by the first search that binds it)."""
    given = dict(captures or {})
    kw = "captures" if per_dim else "filter_captures"
    names = [spec.name for spec in specs]
    unknown = [n for n in given if n not in names]
    if unknown:
        declared = ", ".join(str(c) for c in specs) or "none"
        raise UdfRuntimeError.of(Status.CAPTURE, f"capture '{unknown[0]}' is not declared by {owner} "
                                                 f"(declared: {declared})")
    values = {**defaults, **given}
    bound, arrays = {}, []
    for spec in specs:
        what = f"capture '{spec.name}'"
        if spec.name not in values:
            raise UdfRuntimeError.of(Status.CAPTURE, f"{what} ({spec.udfc_type}) of {owner} has no "
                                                     f"value: pass {kw}={{'{spec.name}': ...}} to search, or "
                                                     f"declare a default value with the {owner.split()[0]}")
        value = values[spec.name]
        try:
            if spec.is_array:
                def convert(value=value, spec=spec, what=what):
                    return _capture_array(value, spec, what=what, kw=kw, per_dim=per_dim, dim=dim)
                if copies is not None and spec.name not in given:
                    a = copies.bind((owner, spec.name, spec.dtype, dim), value, convert)
                else:
                    a = convert()
                if device is not None:
                    _check_device([a], device)
                bound[spec.name] = a.arg
                arrays.append(a)
            else:
                bound[spec.name] = _capture_scalar(value, spec, what=what, kw=kw)
        except _Mismatch as m:
            raise UdfRuntimeError.of(Status.CAPTURE, f"{what} of {owner} is {_declared(spec, per_dim=per_dim, dim=dim)}"
                                                     f", got {m.given}: {m.fix}") from None
        except (TypeError, ValueError) as exc:
            raise UdfRuntimeError.of(Status.CAPTURE, f"{exc} ({owner} declares "
                                                     f"{spec.name}: {spec.udfc_type})") from None
    return bound, arrays


class Index:
    """An IVF-Flat index on one GPU, or sharded over several (create with Index.build,
    Index.load, Index.from_faiss or Index.from_cuvs; devices=[...] for several).

    Properties: metric (MetricInfo of the metric it searches with), module (udf.Module), device
    (the home device), devices, sharded, shards, shard_layout, shard_transport, dim, size (also
    len(index)), n_lists, elem, info (dict), last_search_stats (dict).
    """

    def __init__(self, handle, module: Module, device: int, symbol: str, defaults: Mapping[str, Any],
                 source: list | None = None, given=None, devices: list[int] | None = None,
                 copies: CaptureCopies | None = None):
        """Internal: use Index.build / Index.load / index.with_metric.  copies: the
        CaptureCopies of another Index object over the same handle (else new ones)."""
        self._handle = handle
        self._module = module
        self._device = device
        self._devices = list(devices) if devices else [device]
        self._sharded = devices is not None
        self._metric = module.metric(symbol)
        self._defaults = dict(defaults)
        self._source = source  # the artifacts the module was linked from (None: a linked Module)
        self._given = given  # what the user gave for the module (filter capture defaults)
        self._rebound: dict[tuple[str, str], Index] = {}
        self._filters: dict[Any, tuple] = {}  # _filter_target's answers, until add
        self._lock = threading.Lock()
        self._dim: int | None = None
        self._copies = copies if copies is not None else CaptureCopies(device)

    # ------------------------------------------------------------------ creation

    @classmethod
    def build(cls, module, data, *, n_lists: int = 1024, kmeans_iters: int = 20, kmeans_mesoclusters: int = 0,
              seed: int = 1234, balance: float = 2.0, max_train_rows: int = 0, ids=None, metric: str | None = None,
              device: int | None = None, devices: list[int] | None = None, filters=None,
              centroids=None, coarse_weights=None, shard_layout: str = "vectors") -> "Index":
        """Builds an index over `data` (rows x dim, the metric's element type) on the GPU.

        module        a Module, metric, Artifact, path or list (see the module docstring)
        filters       filters (objects, filter Artifacts or .udfa paths) to link with the metric,
                      for search(filter=...); not with a linked Module
        n_lists       coarse lists (k-means centroids), 1 .. 16384 and <= rows
        kmeans_iters  Lloyd iterations (0: centroids are a random sample)
        kmeans_mesoclusters  0 (the default): every list trained over the whole sample; m >= 2:
                      k-means in two levels with m mesoclusters, as cuVS does (udf_index_params.
                      kmeans_mesoclusters): about round(sqrt(n_lists)) builds faster, but
                      recalls less at a given n_probes on data of many small clusters
        seed          sampling / initialisation seed (the build is deterministic for a seed)
        balance       list length cap as a multiple of the mean (0: plain nearest centroid)
        max_train_rows  k-means sample (0: min(rows, 256 * n_lists))
        centroids     None (k-means), or n_lists x dim centroids (host, any real dtype; float32
                      is what the index keeps, e.g. another index's Index.centroids): no k-means,
                      the rows go to these lists, and data needs only one row (with coarse_weights,
                      centroids of the scaled rows, as Index.centroids gives them)
        coarse_weights  None (the default: the declared value of the capture the metric names as its
                      coarse weights, udf.metric(coarse_weights="w"); without one, k-means and the
                      coarse probe use the metric's coarse metric on the rows as given), or dim
                      weights w >= 0 (host or device array):
                      they use it on the rows scaled by sqrt(w), so that a weighted metric's
                      queries, sum w (x - y)^2 or sum w x y, probe the lists their own distance
                      puts them near; pass the metric's weights.  The lists keep the rows as
                      given; the index file keeps the weights.  Not for a cosine coarse metric
        ids           int64 ids, one per row (default 0 .. rows-1)
        metric        the metric's symbol when the module has several
        device        CUDA ordinal (default: the data's device, else 0)
        devices       CUDA ordinals to shard the index over (a non-empty list; repeats allowed:
                      [0, 0] is two shards on device 0); the first is the home, where device
                      arrays must be.  Excludes device.
        shard_layout  with devices, how they split the vectors: "vectors" (the default: each
                      device keeps an equal part of every list and scans its part of each probed
                      list -- even work per query, and each device prunes with the bounds of
                      every probed list; 8 bytes a vector more) or "lists" (each device keeps a
                      contiguous range of whole lists and scans only the probed lists it keeps).
                      Checked, and unused, on one GPU.

        Raises NoDriverError (a UdfRuntimeError) without the NVIDIA driver, UdfRuntimeError
        (bad parameter, ...), TypeError / ValueError for arrays
        that cannot be used (a lossy dtype conversion, a wrong shape) or a bad device / devices /
        shard_layout, UdfCompileError / UdfToolError when a metric does not compile or link.
        """
        devs = _devices_arg(device, devices)
        layout = _shard_layout_arg(shard_layout)
        _check_not_filter(module, "udf.Index.build")
        dev = devs[0] if devs else _resolve_device(device, data, "data")
        given = _with_filters(module, filters)
        mod, ext_mods, source = _build_modules(given, dev, devs)
        info = mod.metric(metric)
        d = _arrays.as_array(data, what="data", dtype=info.elem)
        i = _arrays.as_array(ids, what="ids", dtype="i64", ndims=(1,)) if ids is not None else None
        _check_device([d, i], dev)
        _arrays.synchronize([a for a in (d, i) if a is not None])
        lists = _count(n_lists, "n_lists")
        kwargs = dict(n_lists=lists, kmeans_iters=_count(kmeans_iters, "kmeans_iters"),
                      kmeans_mesoclusters=_count(kmeans_mesoclusters, "kmeans_mesoclusters"), seed=int(seed),
                      balance=float(balance), max_train_rows=_count(max_train_rows, "max_train_rows"),
                      centroids=_centroids_arg(centroids, lists, d.shape[-1]),
                      coarse_weights=_coarse_weights_arg(resolve_coarse_weights(coarse_weights, info, given),
                                                         d.shape[-1]))
        if devs:
            handle = _ext().Index.build_sharded(ext_mods, info.symbol, d.arg, i.arg if i is not None else None,
                                                shard_layout=layout, **kwargs)
        else:
            handle = _ext().Index.build(ext_mods[0], info.symbol, d.arg, i.arg if i is not None else None, **kwargs)
        return cls(handle, mod, dev, info.symbol, capture_defaults_of(given, info.symbol), source, given, devs)

    @classmethod
    def build_chunked(cls, module, chunks, *, n_chunks: int | None = None, n_lists: int = 1024,
                      kmeans_iters: int = 20, kmeans_mesoclusters: int = 0, seed: int = 1234, balance: float = 2.0,
                      max_train_rows: int = 0,
                      metric: str | None = None, device: int | None = None, devices: list[int] | None = None,
                      filters=None, centroids=None, coarse_weights=None, shard_layout: str = "vectors") -> "Index":
        """An index over rows given a chunk at a time (udf_index_build_chunked), for data larger
        than host memory or than half a GPU: what build over chunk 0 and add of each further
        chunk give (the same lists and results), but each GPU allocates its lists once, at their
        final sizes, so it holds its part of the index and one chunk (add holds its part twice).

        chunks     a sequence of chunks (len() is the count), or a callable chunk(i) with
                   n_chunks; a chunk is rows (n x dim, host or the first device's memory) or
                   (rows, ids).  Each chunk is asked for twice in order, chunk 0 three times, and
                   must give the same rows each time (load or generate it again)
        the rest   as for build; devices=[...] shards the index as shard_layout says (by
                   vectors, the default, every list cut into equal parts; by lists, whole lists
                   cut into ranges by their final sizes)

        The chunk function must not use indexes of the same GPUs (their runtimes are busy with
        this build).  An exception it raises stops the build and is raised here.
        """
        devs = _devices_arg(device, devices)
        layout = _shard_layout_arg(shard_layout)
        _check_not_filter(module, "udf.Index.build_chunked")
        dev = devs[0] if devs else (0 if device is None else operator.index(device))
        given = _with_filters(module, filters)
        mod, ext_mods, source = _build_modules(given, dev, devs)
        info = mod.metric(metric)
        if callable(chunks):
            if n_chunks is None:
                raise TypeError("udf.Index.build_chunked: a chunk function needs n_chunks")
            get = chunks
        else:
            get = chunks.__getitem__
            n_chunks = len(chunks) if n_chunks is None else n_chunks
        lists = _count(n_lists, "n_lists")
        c_dim = None if centroids is None else int(np.shape(centroids)[-1])
        c = None if centroids is None else _centroids_arg(centroids, lists, c_dim)
        w = None
        coarse_weights = resolve_coarse_weights(coarse_weights, info, given)
        if coarse_weights is not None:
            w_host = _host_vector(coarse_weights, "coarse_weights")
            if c_dim is not None and w_host.shape[0] != c_dim:
                raise ValueError(f"coarse_weights: {w_host.shape[0]} values; the centroids have {c_dim} columns")
            c_dim = int(w_host.shape[0])
            w = _coarse_weights_arg(w_host, c_dim)

        held: list = []  # the current chunk's arrays: alive until the next call

        def fetch(i: int):
            value = get(i)
            rows, ids = value if isinstance(value, tuple) and len(value) == 2 else (value, None)
            d = _arrays.as_array(rows, what=f"chunk {i}", dtype=info.elem)
            ii = _arrays.as_array(ids, what=f"chunk {i} ids", dtype="i64", ndims=(1,)) if ids is not None else None
            if c_dim is not None and d.shape[-1] != c_dim:
                raise ValueError(f"chunk {i} has {d.shape[-1]} columns; the centroids or coarse_weights have {c_dim}")
            _check_device([d, ii], dev)
            _arrays.synchronize([a for a in (d, ii) if a is not None])
            held[:] = [d, ii]
            return d.arg, (ii.arg if ii is not None else None)

        handle = _ext().Index.build_chunked(ext_mods, info.symbol, _count(n_chunks, "n_chunks"), fetch,
                                            dim=c_dim or -1, n_lists=lists,
                                            kmeans_iters=_count(kmeans_iters, "kmeans_iters"),
                                            kmeans_mesoclusters=_count(kmeans_mesoclusters, "kmeans_mesoclusters"),
                                            seed=int(seed), balance=float(balance),
                                            max_train_rows=_count(max_train_rows, "max_train_rows"), centroids=c,
                                            coarse_weights=w, shard_layout=layout)
        held.clear()
        return cls(handle, mod, dev, info.symbol, capture_defaults_of(given, info.symbol), source, given, devs)

    @classmethod
    def load(cls, path: str | os.PathLike, module, *, device: int | None = None, devices: list[int] | None = None,
             filters=None, shard_layout: str = "vectors") -> "Index":
        """Reads an index saved by Index.save and binds it to `module` (a Module, metric, ...),
        which must hold the index's metric (by symbol) with its element type and coarse metric
        (UDF_ERROR_MISMATCH otherwise); any artifact of that metric will do, so an index outlives
        a recompile (another udf or CUDA version, other archs, another body).  A corrupt or
        truncated file is UDF_ERROR_BAD_FORMAT.  device: the CUDA
        ordinal (default 0); devices: shard it over these instead, split as shard_layout says
        ("vectors", the default, or "lists"), as for build (any index file loads either way, in
        either layout, whichever layout saved it).  filters: as for build."""
        devs = _devices_arg(device, devices)
        layout = _shard_layout_arg(shard_layout)
        _check_not_filter(module, "udf.Index.load")
        dev = devs[0] if devs else (0 if device is None else operator.index(device))
        given = _with_filters(module, filters)
        mod, ext_mods, source = _build_modules(given, dev, devs)
        if devs:
            handle = _ext().Index.load_sharded(ext_mods, os.fspath(path), shard_layout=layout)
        else:
            handle = _ext().Index.load(ext_mods[0], os.fspath(path))
        symbol = handle.info()["metric"]
        return cls(handle, mod, dev, symbol, capture_defaults_of(given, symbol), source, given, devs)

    @classmethod
    def from_faiss(cls, faiss_index_or_path, module, *, metric: str | None = None, device: int | None = None,
                   filters=None) -> "Index":
        """A FAISS IndexIVFFlat searched with a metric of `module` (a Module, metric, ...), not
        rebuilt: FAISS's centroids and lists, each list's vectors and ids as FAISS has them
        (udf_index_load_faiss), so the built-in l2 with FAISS's nprobe as n_probes finds FAISS's
        neighbours, and any UDF of the same coarse metric searches the same lists.

        faiss_index_or_path  a file faiss.write_index wrote, the bytes of faiss.serialize_index,
                      or a faiss index object (written to a temporary file; a GPU index is
                      copied to the CPU first)
        metric        the metric's symbol when the module has several; it must take f32 and
                      have the FAISS index's coarse metric (l2 for METRIC_L2, inner_product for
                      METRIC_INNER_PRODUCT): UDF_ERROR_MISMATCH otherwise
        device        CUDA ordinal (default 0); filters: as for build

        Another FAISS index kind (IVF-PQ, HNSW, ...), other inverted lists (on disk) or a damaged
        file is UDF_ERROR_BAD_FORMAT naming the field and its byte offset; more than 16384 lists
        too.  The index's balance is 0 (add puts rows in their nearest list).  docs/bring-your-index.md."""
        from . import _faiss
        return cls._imported("udf.Index.from_faiss", module, metric, device, filters,
                             lambda: _faiss.faiss_file(faiss_index_or_path, "udf.Index.from_faiss"),
                             lambda m, symbol, path: _ext().Index.load_faiss(m, symbol, path))

    @classmethod
    def from_cuvs(cls, cuvs_index_or_path, module, *, metric: str | None = None, device: int | None = None,
                  filters=None) -> "Index":
        """A cuVS IVF-Flat index searched with a metric of `module` (a Module, metric, ...), not
        rebuilt: cuVS's centroids and lists, each list's vectors and ids in cuVS's order
        (udf_index_load_cuvs), so the built-in metric of the index's coarse metric with cuVS's
        n_probes finds cuVS's neighbours, and any UDF of the same coarse metric and element type
        searches the same lists.

        cuvs_index_or_path  a file cuvs.neighbors.ivf_flat.save wrote (cuVS 25.02 to 26.10), its
                      bytes, or a cuvs.neighbors.ivf_flat.Index (saved to a temporary file with
                      cuvs's own ivf_flat.save)
        metric        the metric's symbol when the module has several; it must take the cuVS
                      index's element type (f32, f16, i8, u8) and have its coarse metric (l2 for
                      "sqeuclidean" / "euclidean", inner_product for "inner_product", cosine for
                      "cosine"): UDF_ERROR_MISMATCH otherwise
        device        CUDA ordinal (default 0); filters: as for build

        int8 / uint8 centroids are cuVS's times 128 / 256 (cuVS compares its centroids with the
        vectors divided so); a cosine index's vectors and centroids are stored L2-normalized, as
        this runtime's cosine indexes are.  Another file, metric or format version, or a damaged
        file is UDF_ERROR_BAD_FORMAT naming the field and its byte offset; more than 16384 lists
        too.  The index's balance is 0 (add puts rows in their nearest list).
        docs/bring-your-index.md."""
        from . import _cuvs
        return cls._imported("udf.Index.from_cuvs", module, metric, device, filters,
                             lambda: _cuvs.cuvs_file(cuvs_index_or_path, "udf.Index.from_cuvs"),
                             lambda m, symbol, path: _ext().Index.load_cuvs(m, symbol, path))

    @classmethod
    def _imported(cls, what: str, module, metric, device, filters, file_of, load) -> "Index":
        """from_faiss / from_cuvs: the module linked for `device` (0 by default), then the
        other library's index file (`file_of()`, a context manager giving its path) loaded
        with `load(ext module, metric symbol, path)`."""
        _check_not_filter(module, what)
        dev = 0 if device is None else operator.index(device)
        given = _with_filters(module, filters)
        mod, ext_mods, source = _build_modules(given, dev, None)
        info = mod.metric(metric)
        with file_of() as path:
            handle = load(ext_mods[0], info.symbol, path)
        return cls(handle, mod, dev, info.symbol, capture_defaults_of(given, info.symbol), source, given, None)

    def with_metric(self, module, metric: str | None = None, *, filters=None) -> "Index":
        """This index's lists searched with another metric (of `module`, a Module, metric, ...)
        of the same element type and coarse metric, e.g. a UDF over lists built with the
        built-in l2.  The rebound index holds a copy of the lists; it is cached per metric until
        this index changes (add).  filters: as for build."""
        _check_not_filter(module, "udf.Index.with_metric")
        given = _with_filters(module, filters)
        mod, ext_mod, source = _device_module(given, self._device)
        info = mod.metric(metric)
        key = (mod.cache_key, info.symbol)
        defaults = capture_defaults_of(given, info.symbol)
        with self._lock:
            other = self._rebound.get(key)
            if other is None:
                handle = self._handle.with_metric(ext_mod, info.symbol)
                other = Index(handle, mod, self._device, info.symbol, defaults, source, given)
                self._rebound[key] = other
            elif other._defaults != dict(defaults) or other._given is not given:
                other = Index(other._handle, mod, self._device, info.symbol, defaults, source, given,
                              copies=other._copies)
        return other

    # ------------------------------------------------------------------ changes

    def add(self, data, ids=None) -> None:
        """Adds vectors (assigned to the existing lists; ids default to the largest id + 1 on)."""
        d = _arrays.as_array(data, what="data", dtype=self._metric.elem)
        i = _arrays.as_array(ids, what="ids", dtype="i64", ndims=(1,)) if ids is not None else None
        _check_device([d, i], self._device)
        _arrays.synchronize([a for a in (d, i) if a is not None])
        with self._lock:
            self._handle.add(d.arg, i.arg if i is not None else None)
            self._rebound.clear()
            self._filters.clear()

    def save(self, path: str | os.PathLike) -> None:
        """Writes the index file atomically (.udfi: lists, centroids, the metric's symbol and cache key)."""
        self._handle.save(os.fspath(path))

    # ------------------------------------------------------------------ search

    def search(self, queries, k: int = 10, n_probes: int = 32, *, captures: Mapping[str, Any] | None = None,
               queries_per_item: int = 0, max_batch: int = 0, filter=None,  # noqa: A002
               filter_captures: Mapping[str, Any] | None = None):
        """The k nearest neighbours of each query under the index's metric.

        queries    n x dim (or one query, 1-D), the index's element type, host or device
        k          1 .. metric.max_k (1024) and <= the index size
        n_probes   lists scanned per query, 1 .. n_lists (n_lists: an exact search)
        captures   {name: value} for the metric's captures, over the declared defaults; arrays of
                   `dim` values of the capture's type (host or device), numbers for scalars
        filter     None, a filter (@udf.filter, udf.cuda_source_filter, ..., a filter Artifact) or
                   the symbol of a filter of the index's module: only the vectors it keeps for a
                   query are scored and returned.  A filter object not linked into the module is
                   linked with the metric now and searched through a rebound copy of the lists
                   (see the module docstring)
        filter_captures  {name: value} for the filter's captures, over its declared defaults;
                   arrays: 1-D, any length >= 1
        A value given here is this search's (a host array is compared with the last one the
        runtime copied, and copied when it differs); a host array declared as a default was
        copied to the index's GPU once, at its first search, and that copy is bound (docs/python.md,
        "When array captures reach the GPU").
        queries_per_item, max_batch: scheduling knobs (0: automatic)

        Returns (distances, neighbors): float32 and int64, n x k (k for a 1-D query; 0 x k for
        zero queries, without a runtime call), nearest
        first, of the queries' library and device; rows with fewer than k candidates (or kept
        vectors) are padded with id -1 and the worst distance (+inf for order "min", -inf for
        "max").  Raises UdfRuntimeError (bad k / n_probes: UDF_ERROR_INVALID_ARGUMENT; a missing,
        unknown or mistyped capture: UDF_ERROR_CAPTURE, see bind_captures; a filter symbol not in the module:
        UDF_ERROR_INVALID_ARGUMENT, not linked with the metric: UDF_ERROR_MISMATCH), TypeError
        (a metric given as filter) / ValueError for arguments that cannot be used.  The GIL is
        released while the GPU works.
        """
        target, finfo, fdefaults = self._filter_target(filter)
        if finfo is None and filter_captures:
            raise UdfRuntimeError.of(Status.CAPTURE, "filter_captures given but no filter: pass filter=...")
        return target._search(queries, k, n_probes, captures, queries_per_item, max_batch, finfo, fdefaults,
                              filter_captures)

    def _search(self, queries, k, n_probes, captures, queries_per_item, max_batch, finfo: FilterInfo | None,
                fdefaults: Mapping[str, Any], filter_captures):
        q = _arrays.as_array(queries, what="queries", dtype=self._metric.elem)
        _check_device([q], self._device)
        k = _count(k, "k")
        n_probes = _count(n_probes, "n_probes")
        if self._metric.max_k and not 1 <= k <= self._metric.max_k:
            msg = ("k = 0: k must be at least 1" if k == 0 else
                   f"k = {k} exceeds the largest k of metric {self._metric.symbol} ({self._metric.max_k})")
            raise UdfRuntimeError.of(Status.INVALID_ARGUMENT, msg)
        n = 1 if len(q.shape) == 1 else q.shape[0]
        copies = self._copies if n else None  # zero queries: captures checked, nothing copied (no runtime call)
        bound, arrays = self._bind_captures(captures, copies)
        fbound, farrays = {}, []
        if finfo is not None:
            fbound, farrays = self._bind(f"filter {finfo.symbol}", finfo, filter_captures, fdefaults, per_dim=False,
                                         copies=copies)
        if n == 0:  # no queries: no results (udf_index_search takes at least one row), checked as it would
            return self._no_results(q, k, n_probes)
        dist, dist_arg = _arrays.empty_like(q, (n, k), "f32")
        ids, ids_arg = _arrays.empty_like(q, (n, k), "i64")
        # After allocating: the outputs' stream is the queries'.
        after = None if self._sharded else _arrays.producer_stream([q, *arrays, *farrays], self._device)
        if after is None:
            _arrays.synchronize([q, *arrays, *farrays])
        self._handle.search(q.arg, dist_arg, ids_arg, k=k, n_probes=n_probes, captures=bound,
                            queries_per_item=_count(queries_per_item, "queries_per_item"),
                            max_batch=_count(max_batch, "max_batch"),
                            filter=finfo.symbol if finfo is not None else None, filter_captures=fbound,
                            after_stream=after)
        if len(q.shape) == 1:
            dist, ids = dist.reshape((k,)), ids.reshape((k,))
        return dist, ids

    def _no_results(self, q: _arrays.Arr, k: int, n_probes: int):
        """The results of zero queries: empty 0 x k float32 distances and int64 ids of the
        queries' library and device, after the checks the runtime makes of the arguments."""
        if q.shape[-1] != self.dim:
            raise UdfRuntimeError.of(Status.INVALID_ARGUMENT, f"queries have dimension {q.shape[-1]}; the index has "
                                                              f"{self.dim}")
        n_lists = self.n_lists
        if not 1 <= n_probes <= n_lists:
            raise UdfRuntimeError.of(Status.INVALID_ARGUMENT, f"n_probes = {n_probes} must be in 1 .. n_lists "
                                                              f"({n_lists})")
        dist, _ = _arrays.empty_like(q, (0, k), "f32")
        ids, _ = _arrays.empty_like(q, (0, k), "i64")
        return dist, ids

    def _bind_captures(self, captures: Mapping[str, Any] | None,
                       copies: CaptureCopies | None = None) -> tuple[dict, list]:
        """{name: value for _ext} for every declared capture of the metric (defaults, then
        `captures`), and the device arrays among them."""
        return self._bind(f"metric {self._metric.symbol}", self._metric, captures, self._defaults, per_dim=True,
                          copies=copies)

    def _bind(self, owner: str, info, captures: Mapping[str, Any] | None, defaults: Mapping[str, Any], *,
              per_dim: bool, copies: CaptureCopies | None = None) -> tuple[dict, list]:
        """bind_captures for this index (its device; a metric's arrays hold `dim` values; with
        `copies`, the index's, its host array defaults bound as their device copies)."""
        return bind_captures(owner, info.captures, captures, defaults, per_dim=per_dim, device=self._device,
                             dim=self.dim if per_dim else None, copies=copies)

    # ------------------------------------------------------------------ filters

    def _filter_target(self, flt) -> tuple["Index", FilterInfo | None, Mapping[str, Any]]:
        """(the index to search, the filter's FilterInfo, its capture defaults) for search(filter=...),
        worked out once per filter (a symbol, or the object itself) until the index changes (add):
        a search names the same filter again and again."""
        if flt is None:
            return self, None, {}
        key = flt if isinstance(flt, str) else id(flt)
        hit = self._filters.get(key)
        if hit is not None and (hit[0] is flt or isinstance(flt, str)):
            return hit[1]
        found = self._find_filter(flt)
        self._filters[key] = (flt, found)  # (holds `flt`: its id stays its own)
        return found

    def _find_filter(self, flt) -> tuple["Index", FilterInfo, Mapping[str, Any]]:
        """_filter_target's work: the filter checked against the index's module, linked and
        rebound (with_metric) when it is not in it."""
        mod, metric = self._module, self._metric.symbol
        if isinstance(flt, str):
            info, defaults = linked_filter(mod, metric, flt, self._given)
            return self, info, defaults
        if _is_metric_like(flt):
            raise TypeError(f"search(filter=...): {getattr(flt, 'symbol', None) or 'this'} is a metric, not a "
                            f"filter (declare filters with @udf.filter, udf.cuda_source_filter or udf.ir_filter)")
        if not isinstance(flt, (Filter, Artifact)):
            hint = " (decorate the function with @udf.filter)" if callable(flt) else ""
            raise TypeError(f"search(filter=...): expected a udf filter, a filter Artifact or a filter symbol, got "
                            f"{type(flt).__name__}{hint}")
        art = flt if isinstance(flt, Artifact) else flt.compile((_device_arch(self._device),))
        defaults = flt.capture_defaults
        keys = {art.cache_key}
        if isinstance(flt, Filter):
            keys |= {a.cache_key for a in flt._artifacts.values()}
        linked = next((f for f in mod.filters if f.symbol == art.symbol), None)
        if linked is not None and linked.cache_key in keys and art.symbol in mod.filters_for(metric):
            return self, linked, defaults
        if self._source is None:
            why = (f"is not linked with metric {metric} in" if linked is not None and linked.cache_key in keys
                   else "is not in")
            raise UdfRuntimeError.of(Status.MISMATCH, f"filter {art.symbol} {why} the index's module {mod.name}, "
                                                      f"which was given linked, so it cannot be linked again here: "
                                                      f"link the filter with the metric (udf.link([metric, filter]) "
                                                      f"or Index.build(metric, data, filters=[filter]))")
        items = [a for a in self._source if not (a.is_filter and a.symbol == art.symbol)] + [art]
        target = self.with_metric(items, metric)
        return target, target._module.filter(art.symbol), defaults

    # ------------------------------------------------------------------ properties

    @property
    def metric(self) -> MetricInfo:
        return self._metric

    @property
    def module(self) -> Module:
        return self._module

    @property
    def device(self) -> int:
        """The CUDA ordinal of the index's (home) device: device arrays must be on it."""
        return self._device

    @property
    def devices(self) -> list[int]:
        """The devices of its shards, in order: [device] for a one-GPU index."""
        return list(self._devices)

    @property
    def sharded(self) -> bool:
        """Whether it was built or loaded with devices=[...] (even of one device)."""
        return self._sharded

    @property
    def shards(self) -> list[dict]:
        """Each shard's device, list_begin, list_end (its lists: [list_begin, list_end); by
        vectors every list, 0 .. n_lists, of which it keeps an equal part), size (vectors) and
        layout ("vectors" or "lists"); one, the whole index ("lists"), for a one-GPU index."""
        return [dict(s) for s in self._handle.shards()]

    @property
    def shard_layout(self) -> str:
        """How its shards split the vectors: "vectors" or "lists" ("lists" for a one-GPU index,
        its one shard every list)."""
        return self._handle.shards()[0]["layout"]

    @property
    def shard_transport(self) -> str:
        """How the shards' top-k reach the home device: "nccl", "peer" or "none" (one shard)."""
        return self._handle.shard_transport()

    @property
    def capture_defaults(self) -> Mapping[str, Any]:
        return dict(self._defaults)

    @property
    def info(self) -> dict:
        """metric (symbol), elem ("f32" ...), dim, n_lists, max_list_size, size, device."""
        d = dict(self._handle.info())
        d["elem"] = _arrays.dtype_name(d["elem"])
        d["device"] = self._device
        return d

    @property
    def dim(self) -> int:
        if self._dim is None:  # (fixed for the index's life: asked once)
            self._dim = int(self._handle.info()["dim"])
        return self._dim

    @property
    def size(self) -> int:
        return int(self._handle.info()["size"])

    @property
    def n_lists(self) -> int:
        return int(self._handle.info()["n_lists"])

    @property
    def elem(self) -> str:
        return self._metric.elem

    def __len__(self) -> int:
        return self.size

    def centroids(self):
        """The coarse centroids: a float32 numpy array, n_lists x dim (what build(centroids=...)
        takes, for another index over the same lists)."""
        return np.frombuffer(self._handle.centroids(), dtype=np.float32).reshape(self.n_lists, self.dim).copy()

    def coarse_weights(self):
        """The weights the index was built with (build's coarse_weights=): a float32 numpy array of
        dim values, or None (k-means and the coarse probe use the coarse metric on the rows as
        given).  A loaded index has the weights its file kept."""
        w = self._handle.coarse_weights()
        return None if w is None else np.frombuffer(w, dtype=np.float32).copy()

    def list_sizes(self) -> list[int]:
        """Vectors per list."""
        return list(self._handle.list_sizes())

    @property
    def stage_timing(self) -> bool:
        """Whether searches time their stages (coarse_ms .. merge_ms of last_search_stats). Off
        by default: the CUDA events cost a small search several microseconds."""
        return getattr(self, "_stage_timing", False)

    @stage_timing.setter
    def stage_timing(self, on: bool) -> None:
        self._handle.set_stage_timing(bool(on))
        self._stage_timing = bool(on)

    @property
    def last_search_stats(self) -> dict:
        """Timings of the last search (ms): total_ms; coarse_ms, schedule_ms, scan_ms, merge_ms
        (GPU times of the stages while stage_timing is on, else 0); chunks, queries_per_item,
        work_items; and its work: scored ((query, vector) pairs in the probed lists),
        list_bytes_read (list data the scan read)."""
        return dict(self._handle.last_stats())

    def __repr__(self) -> str:
        i = self.info
        where = f"devices={self._devices}" if self._sharded else f"device={self._device}"
        return (f"<udf.Index metric={i['metric']!r} {i['size']} x {i['dim']} {i['elem']} "
                f"n_lists={i['n_lists']} {where}>")


def _centroids_arg(centroids, n_lists: int, dim: int) -> bytes | None:
    """build(centroids=...) as the bytes _ext takes: n_lists x dim float32, C order."""
    if centroids is None:
        return None
    if hasattr(centroids, "__cuda_array_interface__"):
        raise ValueError("centroids: pass a host array (numpy); device arrays are not taken")
    c = np.asarray(centroids)
    if c.dtype.kind not in "fiu":
        raise TypeError(f"centroids: dtype {c.dtype} is not a real number type")
    if c.shape != (n_lists, dim):
        raise ValueError(f"centroids: shape {c.shape}; the index needs n_lists x dim = ({n_lists}, {dim})")
    return np.ascontiguousarray(c, dtype=np.float32).tobytes()


def _host_vector(value, what: str) -> np.ndarray:
    """A small 1-D array of real numbers on the host, from a host or device array."""
    v = np.asarray(to_host(value))
    if v.dtype.kind not in "fiu":
        raise TypeError(f"{what}: dtype {v.dtype} is not a real number type")
    if v.ndim != 1:
        raise ValueError(f"{what}: shape {v.shape}; expected one value per dimension")
    return v


def resolve_coarse_weights(coarse_weights, info, given):
    """A build's coarse weights: `coarse_weights` when given, else the declared value of the
    capture metric `info` names as its coarse weights (udfc --coarse-weights) in what was given
    to the build, else None.  ValueError when the metric names one that has no declared value
    here (a module loaded from a file keeps no capture values)."""
    name = info.coarse_weights
    if coarse_weights is not None or name is None:
        return coarse_weights
    value = capture_defaults_of(given, info.symbol).get(name)
    if value is None:
        raise ValueError(f"metric {info.symbol} takes its coarse weights from capture {name!r}, which has no "
                         "declared value here: pass coarse_weights= (or declare the capture with its value)")
    return value


def _coarse_weights_arg(weights, dim: int) -> bytes | None:
    """build(coarse_weights=...) as the bytes _ext takes: dim float32 (their values are checked
    by udf_index_build)."""
    if weights is None:
        return None
    w = _host_vector(weights, "coarse_weights")
    if w.shape[0] != dim:
        raise ValueError(f"coarse_weights: {w.shape[0]} values; the data has dim {dim}")
    return np.ascontiguousarray(w, dtype=np.float32).tobytes()


def _ext():
    return ext()


def _resolve_device(device: int | None, value, what: str) -> int:
    if device is not None:
        return operator.index(device)
    dev = _arrays.device_of(value)
    return dev if dev >= 0 else 0


def _check_device(arrays, device: int) -> None:
    for a in arrays:
        if a is not None and a.on_device and a.device != device:
            raise UdfRuntimeError.of(Status.INVALID_ARGUMENT, f"{a.what or 'an array'} is on CUDA device {a.device}, "
                                                              f"the index on device {device}: move it there (or to "
                                                              f"the host)")
