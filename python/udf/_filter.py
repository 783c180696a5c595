"""Filter declarations: `@udf.filter` (Python), `udf.cuda_source_filter`, `udf.ir_filter`.

A filter is a predicate the scan applies before the metric (ABI ivf_flat.filter.v1,
include/udf/abi/filter_v1.h):

    bool keep(uint32_t query, int64_t id, const udf_ctx_v1 *ctx)

`query` is the query's row in the batch given to the search, `id` the stored vector's id (as
given to Index.build / add), and `ctx` carries the filter's own captures by name (`ctx.NAME`;
`ctx.dim` is 0 and `ctx.n_dims` the index's dimension).  A vector the filter rejects is never
scored for that query; rows with fewer than k kept vectors are padded with id -1 and the worst
distance.

Captures are declared as for metrics (`captures={name: value}`, see udf._metric), with one
difference: array captures are not per dimension; they have any length >= 1 and the filter
indexes them as it likes (by id, by query row, ...), so it must keep its reads in bounds, e.g.
against a scalar capture holding the length.  Bool arrays (masks) are u8 captures.

Filters compile to Artifacts (`udf_kind` "filter") like metrics, without a GPU, and are linked
into modules beside metrics (udf.link, or Index.build(..., filters=[...])); a search names one
with `index.search(..., filter=f, filter_captures={...})`.  A Python filter inside the
translator's subset compiles as a metric does, through udf's own front end (CUDA C++ for udfc,
no numba import); the others through numba (udf._udf.PythonUdf owns the choice).
"""
from __future__ import annotations

import functools
import os
import re
import tempfile
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

import numpy as np

from ._artifact import Artifact
from ._pycompile.spec import CaptureSpec, FilterSpec
from ._udf import PythonUdf, Udf, cuda_input, ir_input, ir_udfc_input, resolve_captures, to_host
from ._pycompile.source import check_function, function_source
from ._pycompile.compile import PyTypingResult, check_python_filter, compile_python_filter
from ._pycompile import diagnostics as dg
from ._pycompile.reference import filter_reference

_KIND_FLAG = re.compile(r"--kind\b")


class Filter(Udf):
    """A filter UDF declaration; compiles to an Artifact (base of PythonFilter, CudaFilter, IRFilter).

    Attributes: symbol (None for CUDA / IR filters whose symbol udfc picks, until compiled),
    captures (CaptureSpec in ABI order), capture_defaults (read-only mapping name -> default
    value), udf_kind ("filter").
    """

    kind = "filter"  # the source's kind in messages ("Python", "CUDA", "MLIR", ...)
    udf_kind = "filter"

    def __init__(self, *, symbol: str | None, captures=None):
        specs, defaults = resolve_captures(captures)
        super().__init__(symbol=symbol, defaults=defaults)
        self._captures_given = captures is not None
        self._spec = FilterSpec(symbol=symbol if symbol is not None else "udf_filter", captures=specs)

    # -- the declaration
    @property
    def captures(self) -> tuple[CaptureSpec, ...]:
        return self._spec.captures

    def udfc_flags(self) -> list[str]:
        """udfc's flags for what was declared, without --kind (no input, -o or --arch)."""
        flags = ["--symbol", self._symbol] if self._symbol is not None else []
        if self._captures_given:
            for c in self._spec.captures:
                flags += ["--capture", f"{c.name}:{c.udfc_type}"]
        return flags

    # -- compiling
    def _adopt(self, art: Artifact) -> None:
        """Takes the symbol and captures udfc decided (first-line flags) from the first artifact."""
        if self._artifacts:
            return
        self._symbol = art.symbol
        self._spec = FilterSpec(symbol=art.symbol, captures=art.info.captures)

    def _udfc(self, inputs: Sequence[str | os.PathLike], archs: tuple[int, ...], *, cwd, extra=(),
              kind_flag: bool = True) -> Artifact:
        """Runs udfc on `inputs` with --kind filter and this declaration's flags."""
        kind = ["--kind", "filter"] if kind_flag else []
        return self._run_udfc([*inputs, *kind, *self.udfc_flags(), *extra], archs, cwd=cwd)

    def __repr__(self) -> str:
        caps = ", ".join(str(c) for c in self.captures)
        return f"<udf.{type(self).__name__} {self._symbol!r} captures=[{caps}]>"


def _first_line_has_kind(flags: Sequence[str], first_line: str) -> bool:
    """Whether udfc will read --kind from the source's first line (then it must not be given twice)."""
    return "--flags-from-first-line" in flags and bool(_KIND_FLAG.search(first_line))


def _first_line(data: str | bytes | None, path: Path | None) -> str:
    if data is None and path is not None:
        try:
            with open(path, "rb") as f:
                data = f.readline()
        except OSError:
            return ""
    if isinstance(data, bytes):
        data = data.split(b"\n", 1)[0].decode("utf-8", "replace")
    return (data or "").split("\n", 1)[0]


# ------------------------------------------------------------------------------ Python


class PythonFilter(PythonUdf, Filter):
    """A filter written in Python (made by @udf.filter); still callable as the function.

    Extra attributes: fn, backend (the one that compiles it: "nvrtc" or a numba back end),
    nvrtc_unsupported (why "auto" did not take "nvrtc", or None), cuda_source (nvrtc's C++, or
    None), typing (what numba -- or the translator, with numba's rules -- inferred at decoration:
    PyTypingResult, from the front-end cache when it has checked the same function before (see
    udf._udf); None when the back end is not installed or check=False).
    """

    def __init__(self, fn: Callable, *, backend: str, symbol: str | None, check: bool, captures=None):
        if not callable(fn):
            raise TypeError(f"@udf.filter decorates a function, got {type(fn).__name__}")
        sym = symbol if symbol is not None else getattr(fn, "__name__", None)
        if symbol is None and not (isinstance(sym, str) and sym.isidentifier() and sym.isascii()):
            raise ValueError(f"the function's name {sym!r} cannot be the filter's C symbol: pass symbol_name=")
        Filter.__init__(self, symbol=sym, captures=captures)
        self._captures_given = True  # the declaration is complete: always pass it
        self._init_python(fn, backend)  # (chooses the front end: "auto" and "nvrtc" translate here)
        functools.update_wrapper(self, fn)
        self._decorated(check)

    def _udfc_flags(self) -> list[str]:
        return ["--kind", "filter", *self.udfc_flags()]

    def _translate(self):
        """udf's translator's C++ of the filter (raises NotInSubset for what is outside the subset,
        UdfCompileError for what the AST rules refuse)."""
        # the translator (tens of ms to import) loads on first use: `import udf` does not pay for it
        from ._pycompile.translate import translate_filter
        src = function_source(self.fn)
        check_function(src, "filter", self._spec)
        self._source = src
        return translate_filter(src, self._spec)

    def _typing(self):
        if self.backend == "nvrtc":  # the translator types as numba does
            # the translator (tens of ms to import) loads on first use: `import udf` does not pay for it
            from ._pycompile.translate import VERSION
            t = self._translation
            warnings = dg.float64_warnings(dg.TypingInfo(None, [], t.float64_lines), self._source, "filter")
            return PyTypingResult(t.return_type, None, warnings, self._spec, "nvrtc", VERSION)
        return check_python_filter(self.fn, spec=self._spec, backend=self.backend)

    def _ast_check(self) -> None:
        check_function(function_source(self.fn), "filter", self._spec)

    def _compile_ltoir(self, archs):
        return compile_python_filter(self.fn, spec=self._spec, backend=self.backend, archs=archs)

    def reference(self, queries, ids, captures: Mapping[str, Any] | None = None, *, n_dims: int = 0) -> np.ndarray:
        """keep(query, id, ctx) evaluated on the CPU by plain Python for every query row and id:
        a bool array of len(queries) x len(ids) (`queries`: a count n for rows 0 .. n-1, or the
        rows).  Captures default to the declared values.  For checking GPU results."""
        values = {**self._defaults, **(captures or {})}
        values = {k: to_host(v) for k, v in values.items()}
        return filter_reference(self.fn, queries, ids, values, spec=self._spec, n_dims=n_dims)


def filter(fn: Callable | None = None, *, captures=None, symbol_name: str | None = None,  # noqa: A001
           backend: str = "auto", check: bool = True):
    """Decorator: a Python filter `keep(query, id, ctx) -> bool`, as `@udf.filter` or `@udf.filter(...)`.

    query          the query's row in the search batch (uint32)
    id             the stored vector's id (int64)
    ctx            ctx.NAME reads a capture; ctx.n_dims is the index's dimension (ctx.dim is 0)
    captures       {name: dtype spec | array | number}, at most 8, as for @udf.metric, but array
                   captures have any length >= 1 (the filter indexes them; keep reads in bounds)
    symbol_name    the C symbol (default: the function's name)
    backend        "auto" (default): "nvrtc" when udf's translator takes the function (the subset
                   of docs/python.md, "Two front ends": comparisons, and / or / not, integer bit
                   operations, captures indexed by id or query, ...), else "numba-cuda-mlir"
                   ("numba-cuda" on Python 3.10), with a udf.FrontEndWarning at the construct's
                   line; "nvrtc" (ValueError outside the subset), "numba-cuda-mlir" or
                   "numba-cuda".  .backend says which ran, .nvrtc_unsupported why not nvrtc,
                   .cuda_source the translated C++
    check          type the function now (default), so errors point at your lines at import

    The function returns a bool (or an integer: nonzero keeps).  Returns a PythonFilter (callable
    as the function).  Raises UdfCompileError at the user's file and line and ValueError for a
    bad declaration.
    """
    def wrap(f):
        return PythonFilter(f, backend=backend, symbol=symbol_name, check=check, captures=captures)
    if fn is None:
        return wrap
    return wrap(fn)


# ------------------------------------------------------------------------------ CUDA C++ / IR


class CudaFilter(Filter):
    """A filter in CUDA C++ (made by udf.cuda_source_filter), compiled by udfc (NVRTC).

    Extra attributes: source (the text, or None for a file), path (the file, or None), flags.
    """

    kind = "CUDA"

    def __init__(self, source: str | None, path: Path | None, *, flags: Sequence[str], symbol: str | None,
                 captures=None):
        super().__init__(symbol=symbol, captures=captures)
        self.source, self.path, self.flags = source, path, [str(f) for f in flags]

    def _compile(self, archs: tuple[int, ...]) -> Artifact:
        inputs = [str(self.path.resolve())] if self.path is not None else ["-e", self.source]
        kind_flag = not _first_line_has_kind(self.flags, _first_line(self.source, self.path))
        with tempfile.TemporaryDirectory(prefix="udfc-") as tmp:
            return self._udfc(inputs, archs, cwd=tmp, extra=self.flags, kind_flag=kind_flag)


def cuda_source_filter(source: str | os.PathLike, *, symbol_name: str | None = None, captures=None,
                       flags: Sequence[str] = ()) -> CudaFilter:
    """A filter written in CUDA C++: `extern "C" __device__ bool NAME(uint32_t query, int64_t id,
    const udf_ctx_v1 *ctx)`, captures read with UDF_CAPTURE(ctx, NAME).

    source       the CUDA source text (str), or a path (pathlib.Path / os.PathLike) to a .cu file
    symbol_name  the filter function (default: the only extern "C" __device__ function)
    captures     as for @udf.filter; None: not passed to udfc (none, or the source's first line
                 with flags=["--flags-from-first-line"])
    flags        more udfc flags (-I DIR, -D NAME=VALUE, --flags-from-first-line, ...)

    Nothing is compiled until compile() / link / Index.build; errors are then UdfToolError with
    udfc's diagnostics.
    """
    text, path = cuda_input(source)
    return CudaFilter(text, path, flags=flags, symbol=symbol_name, captures=captures)


class IRFilter(Filter):
    """A filter in MLIR or LLVM IR (text or bitcode) or NVVM LTO-IR (made by udf.ir_filter).

    Extra attributes: ir_kind ("mlir" "llvm" "ltoir"), path, data, flags.
    """

    kind = "IR"

    def __init__(self, data: bytes | None, path: Path | None, ir_kind: str, *, flags: Sequence[str],
                 symbol: str | None, captures=None):
        super().__init__(symbol=symbol, captures=captures)
        self.data, self.path, self.ir_kind, self.flags = data, path, ir_kind, [str(f) for f in flags]
        self.kind = {"mlir": "MLIR", "llvm": "LLVM IR", "ltoir": "LTO-IR"}[ir_kind]

    def _compile(self, archs: tuple[int, ...]) -> Artifact:
        first = _first_line(self.data, self.path) if self.ir_kind != "ltoir" else ""
        kind_flag = not _first_line_has_kind(self.flags, first)
        with tempfile.TemporaryDirectory(prefix="udfc-") as tmp:
            source = ir_udfc_input(self.data, self.path, self.ir_kind, self._symbol or "filter", tmp)
            return self._udfc([source, "--input-kind", self.ir_kind], archs, cwd=tmp, extra=self.flags,
                              kind_flag=kind_flag)


def ir_filter(path_or_text: str | bytes | os.PathLike, *, kind: str | None = None, symbol_name: str | None = None,
              captures=None, flags: Sequence[str] = ()) -> IRFilter:
    """A filter in MLIR, LLVM IR or NVVM LTO-IR, compiled by udfc.  In IR the ABI is
    `i1 @NAME(i32 %query, i64 %id, ptr %ctx)` (MLIR: `func.func @NAME(i32, i64, !llvm.ptr) -> i1`),
    capture i at ctx + 16 + 8*i; LTO-IR needs symbol_name (udfc checks that it is defined).

    path_or_text  a path (os.PathLike, or a str naming an existing file), the IR text (str), or
                  its bytes (bitcode, LTO-IR)
    kind          "mlir", "llvm" or "ltoir"; default: from the file suffix, else the content
    symbol_name, captures, flags: as for cuda_source_filter.
    """
    data, path, kind = ir_input(path_or_text, kind)
    return IRFilter(data, path, kind, flags=flags, symbol=symbol_name,
                    captures=captures)
