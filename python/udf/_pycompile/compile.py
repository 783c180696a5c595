"""compile_python_metric / compile_python_filter: Python function -> LTO-IR per arch, with
either back end."""
from __future__ import annotations

import importlib
import struct
import sys
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Mapping

from . import diagnostics as dg
from .errors import BackendUnavailableError, UdfCompileError
from .source import FunctionSource, check_function, function_source, returns_value
from .spec import CaptureSpec, FilterSpec, MetricSpec, parse_archs
from .reference import filter_reference, reference

BACKENDS = {
    "numba-cuda-mlir": "backend_numba_cuda_mlir",
    "numba-cuda": "backend_numba_cuda",
}
# numba-cuda-mlir 0.6 needs Python 3.11; on 3.10 the wheel depends on numba-cuda instead.
DEFAULT_BACKEND = "numba-cuda-mlir" if sys.version_info >= (3, 11) else "numba-cuda"

LTOIR_MAGIC = b"\xed\x43\x4e\x7f"


@dataclass
class PyCompileResult:
    """LTO-IR of one Python metric.

    ltoir: {arch: bytes}, one NVVM LTO-IR module per arch holding the metric (`symbol`: the
    v1 metric, the v2 state update or the v2 vector distance) and, when there is one, the
    finalize function (`finalize_symbol`), both with C linkage: package each with
    `udfc FILE.ltoir <spec.udfc_flags()> --arch sm_XX` (which says --abi v2 --shape ... for v2).
    """

    ltoir: dict[int, bytes]
    symbol: str
    finalize_symbol: str | None
    backend: str
    backend_version: str
    warnings: list[str]
    spec: MetricSpec
    return_type: str  # what numba inferred for the metric before conversion to ACC
    compile_seconds: dict[int, float] = field(default_factory=dict)  # per arch, LTO-IR made
    typing_seconds: float = 0.0  # the typing pass (once per compile)
    metric_fn: Callable | None = field(default=None, repr=False)
    finalize_fn: Callable | None = field(default=None, repr=False)

    def udfc_flags(self) -> list[str]:
        return self.spec.udfc_flags()

    def reference(self, x, y, captures: Mapping[str, Any] | None = None, *, ids=None, query: int = 0):
        """See reference.reference(): the metric evaluated in float64 with plain Python."""
        return reference(self.metric_fn, x, y, captures, spec=self.spec, finalize=self.finalize_fn, ids=ids,
                         query=query)


def load_backend(name: str):
    """(module, state) of a back end; raises BackendUnavailableError naming the pip extra."""
    if name not in BACKENDS:
        raise ValueError(f"unknown backend {name!r}; choose one of {', '.join(BACKENDS)}")
    mod = importlib.import_module(f"{__package__}.{BACKENDS[name]}")
    try:
        st = mod.load()
    except ImportError as exc:
        raise BackendUnavailableError(name, mod.EXTRA, mod.PIP, f"{type(exc).__name__}: {exc}") from exc
    return mod, st


def backend_available(name: str) -> tuple[bool, str]:
    """(True, version) or (False, reason), without raising."""
    try:
        _mod, st = load_backend(name)
    except BackendUnavailableError as exc:
        return False, str(exc)
    return True, st.version


@dataclass
class PyTypingResult:
    """What numba inferred, before any code is generated (check_python_metric)."""

    return_type: str  # the metric's, before conversion to ACC
    finalize_return_type: str | None
    warnings: list[str]
    spec: MetricSpec
    backend: str
    backend_version: str


def infer_shape(fn, finalize=None) -> str:
    """The ABI v2 shape of a Python function declared with abi="v2" and no shape, as udfc infers
    it from a signature: no `return VALUE` (void) -> "state", one -> "vector".  Without source
    (exec, REPL): "state" when a finalize function is given, else "vector"."""
    has_value = returns_value(function_source(fn))
    if has_value is None:
        return "state" if finalize is not None else "vector"
    return "vector" if has_value else "state"


def _make_spec(fn, spec, finalize, symbol, finalize_symbol, elem, acc, captures, order, initial,
               coarse_metric, abi=None, shape=None) -> MetricSpec:
    if spec is None:
        sym = symbol if symbol is not None else getattr(fn, "__name__", None)
        fsym = None
        if finalize is not None:
            fsym = finalize_symbol if finalize_symbol is not None else f"{sym}_finalize"
        if abi == "v2" and shape is None:
            shape = infer_shape(fn, finalize)
        return MetricSpec(symbol=sym, elem=elem, acc=acc, captures=captures, finalize_symbol=fsym,
                          order=order, initial=initial, coarse_metric=coarse_metric, abi=abi, shape=shape)
    if spec.abi == "v2" and spec.shape is None:
        raise ValueError("spec.shape is None: a Python ABI v2 metric needs its shape ('state' or 'vector')")
    if finalize is not None and spec.finalize_symbol is None:
        raise ValueError("a finalize function was given but spec.finalize_symbol is None")
    if finalize is None and spec.finalize_symbol is not None:
        raise ValueError(f"spec.finalize_symbol is {spec.finalize_symbol!r} but no finalize function was given")
    return spec


class _Job:
    """One metric (and finalize) being compiled by one back end.

    The C signatures, per ABI (ACC: float or int32_t, as numba's float32 / int32; pointers are
    numba CPointers, indexable):
        v1            ACC metric(ACC x, ACC y, ACC acc, const udf_ctx_v1 *ctx)
                      float finalize(ACC acc, const udf_ctx_v1 *ctx)
        v2 state      void update(ACC x, ACC y, udf_state_v2 *s, const udf_ctx_v2 *ctx)   (s: ACC[8])
                      float finalize(const udf_state_v2 *s, const udf_ctx_v2 *ctx)
        v2 vector     float distance(const ACC *x, const ACC *y, uint32_t n_dims, const udf_ctx_v2 *ctx)
    """

    def __init__(self, fn, finalize, spec: MetricSpec, backend: str):
        self.fn, self.finalize, self.spec, self.backend = fn, finalize, spec, backend
        self.role = spec.role  # "metric", "update" or "distance"
        # 1. the AST: arity, ctx fields, unsupported syntax, undefined names, missing returns
        self.msrc = function_source(fn)
        check_function(self.msrc, self.role, spec)
        self.fsrc = None
        if finalize is not None:
            self.fsrc = function_source(finalize)
            check_function(self.fsrc, "finalize", spec)
        self.mod, self.st = load_backend(backend)
        st = self.st
        T = st.types
        ctx_t = st.CtxType(spec.captures, spec.abi)
        self.acc_t = self.mod.acc_type(st, spec.acc)
        ptr = T.CPointer(self.acc_t)
        if self.role == "update":
            self.m_args, self.m_ret = (self.acc_t, self.acc_t, ptr, ctx_t), T.void
            self.f_args = (ptr, ctx_t)
        elif self.role == "distance":
            self.m_args, self.m_ret = (ptr, ptr, T.uint32, ctx_t), T.float32
            self.f_args = None
        else:
            self.m_args, self.m_ret = (self.acc_t, self.acc_t, self.acc_t, ctx_t), self.acc_t
            self.f_args = (self.acc_t, ctx_t)
        self.warnings: list[str] = []
        if not any(st.version.startswith(v + ".") or st.version == v for v in self.mod.TESTED):
            self.warnings.append(f"udf: warning: {backend} {st.version} is untested; this layer was "
                                 f"tested with {backend} {', '.join(v + '.x' for v in self.mod.TESTED)}")

    def typecheck(self, arch: int):
        """2. the typing pass, return type left open: numba's errors mapped to the user's lines,
        then our rules on what may be returned (float -> i32 is an error, int -> f32 is not)."""
        t0 = time.perf_counter()
        self.m_info = _typing(self.mod, self.st, self.msrc, self.spec, self.role, self.m_args, arch,
                              self.backend)
        checks = [(self.m_info, self.msrc, self.role)]
        self.f_info = None
        if self.finalize is not None:
            self.f_info = _typing(self.mod, self.st, self.fsrc, self.spec, "finalize", self.f_args,
                                  arch, self.backend)
            checks.append((self.f_info, self.fsrc, "finalize"))
        for info, src, role in checks:
            dg.check_return_types(info, self.st.types, src, self.spec, role=role, backend=self.backend)
            self.warnings += dg.float64_warnings(info, src, role)
        self.typing_seconds = time.perf_counter() - t0

    def ltoir(self, arch: int) -> bytes:
        """3. LTO-IR for one arch, the returns converted to the ABI types."""
        parts = [(self.fn, self.m_ret(*self.m_args), self.spec.symbol, self.role)]
        if self.finalize is not None:
            parts.append((self.finalize, self.st.types.float32(*self.f_args),
                          self.spec.finalize_symbol, "finalize"))
        srcs = {self.role: self.msrc, "finalize": self.fsrc}
        try:
            data, _times = self.mod.compile_ltoir(self.st, parts, arch)
        except UdfCompileError:
            raise
        except Exception as exc:
            role = getattr(exc, "_udf_role", self.role)
            raise dg.exception_to_error(exc, srcs[role] or self.msrc, self.spec, role=role,
                                        backend=self.backend, arch=arch) from exc
        self.warnings += _check_ltoir(data, arch, self.backend, self.msrc)
        return data


def check_python_metric(fn: Callable, *, elem: str = "f32", acc: str | None = None,
                        captures: Iterable[CaptureSpec] | Mapping[str, Any] | None = (),
                        finalize: Callable | None = None, symbol: str | None = None,
                        finalize_symbol: str | None = None, backend: str = DEFAULT_BACKEND,
                        arch: int | str = 90, order: str = "min", initial: Any = None,
                        coarse_metric: str = "l2", spec: MetricSpec | None = None, abi: str | None = None,
                        shape: str | None = None) -> PyTypingResult:
    """The checks of compile_python_metric without code generation (AST + numba typing).

    For a decorator that wants errors at definition time and compiles later.  Raises
    UdfCompileError / BackendUnavailableError / ValueError like compile_python_metric.
    """
    spec = _make_spec(fn, spec, finalize, symbol, finalize_symbol, elem, acc, captures, order,
                      initial, coarse_metric, abi, shape)
    job = _Job(fn, finalize, spec, backend)
    job.typecheck(parse_archs(arch)[0])
    return PyTypingResult(str(job.m_info.return_type),
                          str(job.f_info.return_type) if job.f_info is not None else None,
                          job.warnings, spec, backend, job.st.version)


def compile_python_metric(fn: Callable, *, elem: str = "f32", acc: str | None = None,
                          captures: Iterable[CaptureSpec] | Mapping[str, Any] | None = (),
                          finalize: Callable | None = None, symbol: str | None = None,
                          finalize_symbol: str | None = None, backend: str = DEFAULT_BACKEND,
                          archs: Iterable[int | str] | int | str = (90,), order: str = "min",
                          initial: Any = None, coarse_metric: str = "l2",
                          spec: MetricSpec | None = None, abi: str | None = None,
                          shape: str | None = None) -> PyCompileResult:
    """Compile `fn` (and `finalize`) to LTO-IR for each arch.  See the package docstring."""
    spec = _make_spec(fn, spec, finalize, symbol, finalize_symbol, elem, acc, captures, order,
                      initial, coarse_metric, abi, shape)
    arch_list = parse_archs(archs)
    job = _Job(fn, finalize, spec, backend)
    job.typecheck(arch_list[0])
    ltoir, seconds = _ltoir_per_arch(job, arch_list)
    return PyCompileResult(ltoir=ltoir, symbol=spec.symbol, finalize_symbol=spec.finalize_symbol,
                           backend=backend, backend_version=job.st.version, warnings=job.warnings,
                           spec=spec, return_type=str(job.m_info.return_type), compile_seconds=seconds,
                           typing_seconds=job.typing_seconds, metric_fn=fn, finalize_fn=finalize)


def _ltoir_per_arch(job, arch_list: tuple[int, ...]) -> tuple[dict[int, bytes], dict[int, float]]:
    """job.ltoir(arch) for each arch, and the seconds each took."""
    ltoir: dict[int, bytes] = {}
    seconds: dict[int, float] = {}
    for arch in arch_list:
        t0 = time.perf_counter()
        ltoir[arch] = job.ltoir(arch)
        seconds[arch] = time.perf_counter() - t0
    return ltoir, seconds


def _typing(mod, st, src: FunctionSource, spec, role, args, arch, backend):
    try:
        cres = mod.type_function(st, src.fn, args, arch)
    except Exception as exc:
        raise dg.exception_to_error(exc, src, spec, role=role, backend=backend) from exc
    return dg.typing_info(cres, st.types)


def ltoir_arch(data: bytes) -> int | None:
    """The arch an NVVM LTO-IR blob is for (u16 at byte 26 = arch * 10), None if not LTO-IR."""
    if len(data) < 28 or data[:4] != LTOIR_MAGIC:
        return None
    return struct.unpack_from("<H", data, 26)[0] // 10


def _check_ltoir(data: bytes, arch: int, backend: str, src: FunctionSource) -> list[str]:
    got = ltoir_arch(data)
    if got is None:
        raise UdfCompileError(f"{backend} did not produce NVVM LTO-IR for sm_{arch} "
                              f"({len(data)} bytes, magic {data[:4].hex()})", src.filename,
                              src.def_line, src.def_col, backend=backend)
    if got > arch:
        raise UdfCompileError(f"{backend} produced LTO-IR for sm_{got} when sm_{arch} was requested "
                              "(is NUMBA_FORCE_CUDA_CC set?)", src.filename, src.def_line, src.def_col,
                              backend=backend)
    if got != arch:
        return [f"udf: warning: {backend} produced LTO-IR for sm_{got} for the requested sm_{arch} "
                f"(it links into sm_{arch}, but is not tuned for it)"]
    return []


# ---------------------------------------------------------------------------------------------
# filters (ABI ivf_flat.filter.v1)


@dataclass
class PyFilterCompileResult:
    """LTO-IR of one Python filter: `bool keep(uint32_t query, int64_t id, const udf_ctx_v1 *ctx)`.

    ltoir: {arch: bytes}, one NVVM LTO-IR module per arch defining `symbol` with C linkage (both
    back ends return C's bool as NVVM passes it, an i8 of 0 or 1, as NVRTC does): package each
    with `udfc FILE.ltoir <spec.udfc_flags()> --arch sm_XX` (--kind filter --symbol ...).
    """

    ltoir: dict[int, bytes]
    symbol: str
    backend: str
    backend_version: str
    warnings: list[str]
    spec: FilterSpec
    return_type: str  # what numba inferred before conversion to bool
    compile_seconds: dict[int, float] = field(default_factory=dict)
    typing_seconds: float = 0.0
    filter_fn: Callable | None = field(default=None, repr=False)

    def udfc_flags(self) -> list[str]:
        return self.spec.udfc_flags()

    def reference(self, queries, ids, captures: Mapping[str, Any] | None = None, *, n_dims: int = 0):
        """See reference.filter_reference(): the filter evaluated by plain Python."""
        return filter_reference(self.filter_fn, queries, ids, captures, spec=self.spec, n_dims=n_dims)


def _make_filter_spec(fn, spec, symbol, captures) -> FilterSpec:
    if spec is not None:
        return spec
    return FilterSpec(symbol=symbol if symbol is not None else getattr(fn, "__name__", None), captures=captures)


class _FilterJob:
    """One filter being compiled by one back end: `keep(query: uint32, id: int64, ctx) -> bool`."""

    def __init__(self, fn, spec: FilterSpec, backend: str):
        self.fn, self.spec, self.backend = fn, spec, backend
        self.src = function_source(fn)
        check_function(self.src, "filter", spec)
        self.mod, self.st = load_backend(backend)
        st = self.st
        self.args = (st.types.uint32, st.types.int64, st.CtxType(spec.captures))
        self.warnings: list[str] = []
        if not any(st.version.startswith(v + ".") or st.version == v for v in self.mod.TESTED):
            self.warnings.append(f"udf: warning: {backend} {st.version} is untested; this layer was "
                                 f"tested with {backend} {', '.join(v + '.x' for v in self.mod.TESTED)}")

    def typecheck(self, arch: int):
        t0 = time.perf_counter()
        self.info = _typing(self.mod, self.st, self.src, self.spec, "filter", self.args, arch, self.backend)
        dg.check_return_types(self.info, self.st.types, self.src, self.spec, role="filter", backend=self.backend)
        self.warnings += dg.float64_warnings(self.info, self.src, "filter")
        self.typing_seconds = time.perf_counter() - t0

    def ltoir(self, arch: int) -> bytes:
        parts = [(self.fn, self.st.types.boolean(*self.args), self.spec.symbol, "filter")]
        try:
            data, _times = self.mod.compile_ltoir(self.st, parts, arch)
        except UdfCompileError:
            raise
        except Exception as exc:
            raise dg.exception_to_error(exc, self.src, self.spec, role="filter", backend=self.backend,
                                        arch=arch) from exc
        self.warnings += _check_ltoir(data, arch, self.backend, self.src)
        return data


def check_python_filter(fn: Callable, *, captures: Iterable[CaptureSpec] | Mapping[str, Any] | None = (),
                        symbol: str | None = None, backend: str = DEFAULT_BACKEND, arch: int | str = 90,
                        spec: FilterSpec | None = None) -> PyTypingResult:
    """The checks of compile_python_filter without code generation (AST + numba typing).
    PyTypingResult.return_type is what numba inferred (bool, or an integer: nonzero keeps)."""
    spec = _make_filter_spec(fn, spec, symbol, captures)
    job = _FilterJob(fn, spec, backend)
    job.typecheck(parse_archs(arch)[0])
    return PyTypingResult(str(job.info.return_type), None, job.warnings, spec, backend, job.st.version)


def compile_python_filter(fn: Callable, *, captures: Iterable[CaptureSpec] | Mapping[str, Any] | None = (),
                          symbol: str | None = None, backend: str = DEFAULT_BACKEND,
                          archs: Iterable[int | str] | int | str = (90,),
                          spec: FilterSpec | None = None) -> PyFilterCompileResult:
    """Compile a filter `fn(query, id, ctx) -> bool` to LTO-IR for each arch.

    query is a uint32 (the query's row in the search batch), id an int64 (the stored vector's
    id), ctx the typed `const udf_ctx_v1 *` (ctx.dim is 0, ctx.n_dims the index's dimension,
    captures by name).  Returning an integer keeps the vector when it is nonzero; floats, None
    and tuples are errors.  Raises UdfCompileError / BackendUnavailableError / ValueError."""
    spec = _make_filter_spec(fn, spec, symbol, captures)
    arch_list = parse_archs(archs)
    job = _FilterJob(fn, spec, backend)
    job.typecheck(arch_list[0])
    ltoir, seconds = _ltoir_per_arch(job, arch_list)
    return PyFilterCompileResult(ltoir=ltoir, symbol=spec.symbol, backend=backend, backend_version=job.st.version,
                                 warnings=job.warnings, spec=spec, return_type=str(job.info.return_type),
                                 compile_seconds=seconds, typing_seconds=job.typing_seconds, filter_fn=fn)
