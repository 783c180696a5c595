"""Metric declarations: `@udf.metric` (Python), `udf.cuda_source_metric`, `udf.ir_metric`.

A metric is a coordinate-wise accumulator `acc = f(x, y, acc, ctx)` (ABI ivf_flat.metric.v1,
see docs/udfc.md): `x` is the stored vector's coordinate, `y` the query's, `ctx.dim` the
coordinate index, `ctx.n_dims` the dimension, and every capture is `ctx.NAME`.  A metric object
holds the declaration (element / accumulator type, order, initial value, coarse metric,
monotone, captures and their default values, finalize function) and compiles to an `Artifact` for a list
of GPU archs, without a GPU:

- Python functions in the translator's subset are typed with numba's rules and written out as
  CUDA C++ for udfc (front end "nvrtc", udf._pycompile.translate: no numba import); the others
  go through numba (back end "numba-cuda-mlir" or "numba-cuda") to NVVM LTO-IR per arch, then
  udfc packages the LTO-IR (udf._pycompile does the first part);
- CUDA C++ source, MLIR and LLVM IR go through udfc.

ABI v2 (ivf_flat.metric.v2, include/udf/abi/metric_v2.h, docs/abi-v2.md) is declared with
`shape=` ("state" or "vector", or `abi="v2"` to let the signature tell):
- shape="state": `update(x, y, s, ctx)` folds one coordinate into the state `s` (8 words of
  the accumulator type, s[0] .. s[7], zero or `initial=[...]`) and returns nothing;
  `finalize=fin`, `fin(s, ctx) -> distance`, is required;
- shape="vector": `distance(x, y, n_dims, ctx) -> distance`, x and y the whole stored vector
  and query (indexable arrays of the accumulator type), no finalize and no initial.
The v2 ctx also has `ctx.query` (the query's row in the batch) and `ctx.id` (the stored
vector's id).

`monotone=True` (ABI v1 only; udfc --monotone) promises that the key only moves away from the
best as coordinates fold: with order "min" f(x, y, acc, ctx) >= acc for every input (the
accumulator never decreases), with "max" f(...) <= acc, and the finalize (if any) is
non-decreasing.  A scan may then stop folding a stored vector once its partial value is already
worse than the query's current k-th best (scans for k <= 32 on sm_90 and newer): exactly the
same results, far less work on clustered data; where little is pruned (uniform or overlapping
data) the runtime finds the plain scan faster and takes it (docs/performance-log.md).  It is a
promise: declared for a metric that is not monotone (an inner product, cosine, weighted L2 with a
negative weight) it gives wrong results.  Squared L2, L1, L-infinity and weighted L2 with weights
>= 0 are monotone.

`coarse_weights="w"` (udfc --coarse-weights) names the f32 array capture that holds a weighted
metric's weights, one a dimension.  `udf.Index.build` & co. then build with those coarse weights
unless given others: k-means, the assignment and the coarse probe work on the rows scaled by
sqrt(w), where the metric's own queries find their lists (Index.build's coarse_weights).  The
value is the capture's declared one (a search's `captures={"w": ...}` does not move the lists).

Captures are declared as `captures={name: value}` (at most 8, in ABI order), where a value is
- a dtype spec: "f32[]" "f16[]" "i32[]" "u8[]" (per-dimension arrays) or "f32" "i32" (scalars),
  or a NumPy scalar type / dtype (np.float32: an f32 scalar);
- an array (NumPy, CuPy, PyTorch, DLPack, __cuda_array_interface__; float32 float16 int32
  uint8), or a list of numbers (floats: f32[], ints: i32[]): an array capture of that dtype
  whose DEFAULT value is that array;
- a number: a Python float (f32) or int (i32), or a NumPy scalar: a scalar capture with that
  default value.
Default values are bound at each search (arrays are read then, so in-place updates show) and
can be overridden per search with `index.search(..., captures={...})`.
"""
from __future__ import annotations

import functools
import os
import tempfile
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

import numpy as np

from ._artifact import Artifact
from ._pycompile.spec import CaptureSpec, MetricSpec
from ._udf import PythonUdf, Udf, cuda_input, ir_input, ir_udfc_input, resolve_captures, to_host
from ._pycompile.compile import PyTypingResult, infer_shape
from ._pycompile import diagnostics as dg
from ._pycompile import check_python_metric, compile_python_metric
from ._pycompile.source import check_function, function_source
from ._pycompile.reference import reference

#: coarse_metric spellings -> udfc's --coarse-metric
COARSE_ALIASES = {"l2": "l2", "sqeuclidean": "l2", "euclidean": "l2", "inner_product": "inner_product",
                  "cosine": "cosine"}
def coarse_metric_name(name: str) -> str:
    """"sqeuclidean" / "euclidean" / "l2" -> "l2"; "inner_product"; "cosine" (ValueError otherwise)."""
    try:
        return COARSE_ALIASES[name]
    except (KeyError, TypeError):
        raise ValueError(f"coarse_metric {name!r} is not one of {', '.join(COARSE_ALIASES)}") from None


class Metric(Udf):
    """A metric UDF declaration; compiles to an Artifact (base of PythonMetric, CudaMetric, IRMetric).

    Attributes: symbol (None for CUDA / IR metrics whose symbol udfc picks, until compiled), elem,
    acc, order, initial (v1: a float; v2: the state's initial words, a tuple), coarse_metric,
    captures (CaptureSpec in ABI order), finalize (the finalize symbol or None), capture_defaults
    (read-only mapping name -> default value), abi ("v1" or "v2"), shape (v2: "state" or
    "vector"; None for v1, or for a CUDA / IR v2 metric whose shape udfc infers, until compiled),
    monotone (True when declared monotone; see the module docstring), coarse_weights (the capture
    that holds the coarse weights, or None; see the module docstring).
    """

    kind = "metric"
    udf_kind = "metric"

    def __init__(self, *, symbol: str | None, elem: str | None = None, acc: str | None = None,
                 order: str | None = None, initial=None, coarse_metric: str | None = None,
                 captures=None, finalize_symbol: str | None = None, abi: str | None = None,
                 shape: str | None = None, monotone: bool | None = None, coarse_weights: str | None = None):
        """Keywords left None are not passed to udfc (its default, or the source's first line
        with --flags-from-first-line, applies); the compiled artifact's values are adopted."""
        specs, defaults = resolve_captures(captures)
        super().__init__(symbol=symbol, defaults=defaults)
        given = {"symbol": symbol, "finalize": finalize_symbol, "elem": elem, "acc": acc, "order": order,
                 "initial": initial, "coarse_metric": coarse_metric, "captures": captures, "abi": abi,
                 "shape": shape, "monotone": monotone, "coarse_weights": coarse_weights}
        self._given = {k for k, v in given.items() if v is not None}
        self._spec = MetricSpec(symbol=symbol if symbol is not None else "udf_metric", elem=elem or "f32", acc=acc,
                                captures=specs, finalize_symbol=finalize_symbol, order=order or "min",
                                initial=initial, coarse_metric=coarse_metric_name(coarse_metric or "l2"),
                                abi=abi, shape=shape, monotone=False if monotone is None else monotone,
                                coarse_weights=coarse_weights)

    # -- the declaration
    @property
    def elem(self) -> str:
        return self._spec.elem

    @property
    def acc(self) -> str:
        return self._spec.acc

    @property
    def order(self) -> str:
        return self._spec.order

    @property
    def initial(self) -> float | tuple[float, ...]:
        return self._spec.initial

    @property
    def abi(self) -> str:
        return self._spec.abi

    @property
    def shape(self) -> str | None:
        return self._spec.shape

    @property
    def coarse_metric(self) -> str:
        return self._spec.coarse_metric

    @property
    def monotone(self) -> bool:
        return self._spec.monotone

    @property
    def coarse_weights(self) -> str | None:
        return self._spec.coarse_weights

    @property
    def captures(self) -> tuple[CaptureSpec, ...]:
        return self._spec.captures

    @property
    def finalize(self) -> str | None:
        return self._spec.finalize_symbol

    _FLAG_KEYS = {"--symbol": "symbol", "--finalize": "finalize", "--elem": "elem", "--acc": "acc",
                  "--order": "order", "--initial": "initial", "--coarse-metric": "coarse_metric",
                  "--capture": "captures", "--abi": "abi", "--shape": "shape", "--monotone": "monotone",
                  "--coarse-weights": "coarse_weights"}
    _VALUELESS_FLAGS = frozenset({"--monotone"})

    def udfc_flags(self) -> list[str]:
        """udfc's metadata flags for what was declared (no input, -o or --arch)."""
        flags = self._spec.udfc_flags()
        out = []
        i = 0
        while i < len(flags):
            n = 1 if flags[i] in self._VALUELESS_FLAGS else 2
            if self._FLAG_KEYS[flags[i]] in self._given:
                out += flags[i:i + n]
            i += n
        return out

    # -- compiling
    def _adopt(self, art: Artifact) -> None:
        """Takes what udfc decided (symbol, defaults, first-line flags) from the first artifact
        for the attributes; the udfc command line stays the declared one."""
        if self._artifacts:
            return
        i = art.info
        self._symbol = i.symbol
        self._spec = MetricSpec(symbol=i.symbol, elem=i.elem, acc=i.acc, captures=i.captures,
                                finalize_symbol=i.finalize, order=i.order, initial=i.initial,
                                coarse_metric=i.coarse_metric, abi=i.abi, shape=i.shape, monotone=i.monotone,
                                coarse_weights=i.coarse_weights)

    def _udfc(self, inputs: Sequence[str | os.PathLike], archs: tuple[int, ...], *, cwd, extra=()) -> Artifact:
        """Runs udfc on `inputs` with this declaration's flags; the artifact with its defaults."""
        return self._run_udfc([*inputs, *self.udfc_flags(), *extra], archs, cwd=cwd)

    def __repr__(self) -> str:
        caps = ", ".join(str(c) for c in self.captures)
        abi = f" abi=v2 shape={self.shape}" if self.abi == "v2" else ""
        mono = " monotone" if self.monotone else ""
        weights = f" coarse_weights={self.coarse_weights}" if self.coarse_weights else ""
        return (f"<udf.{type(self).__name__} {self._symbol!r}{abi} elem={self.elem} acc={self.acc} "
                f"order={self.order}{mono} coarse={self.coarse_metric}{weights} captures=[{caps}]>")


# ------------------------------------------------------------------------------ Python


class PythonMetric(PythonUdf, Metric):
    """A metric written in Python (made by @udf.metric); still callable as the function.

    Extra attributes: fn, finalize_fn, backend (the one that compiles it: "nvrtc" or a numba back
    end), nvrtc_unsupported (why "auto" did not take "nvrtc", or None), cuda_source (nvrtc's C++,
    or None), typing (what numba -- or the translator, with numba's rules -- inferred at decoration:
    PyTypingResult, from the front-end cache when it has checked the same function before (see
    udf._udf); None when the back end is not installed or check=False).
    """

    def __init__(self, fn: Callable, *, finalize: Callable | None, backend: str, symbol: str | None,
                 check: bool, abi: str | None = None, shape: str | None = None, **decl):
        if not callable(fn):
            raise TypeError(f"@udf.metric decorates a function, got {type(fn).__name__}")
        if abi is not None and abi not in ("v1", "v2"):
            raise ValueError(f"abi {abi!r} is not one of v1, v2")
        if shape is not None and shape not in ("state", "vector"):
            raise ValueError(f"shape {shape!r} is not one of state, vector (ABI v2)")
        if abi == "v2" and shape is None:
            shape = infer_shape(fn, finalize)  # as udfc infers it: no return value -> state
        fin_sig = "(s, ctx) -> distance" if shape == "state" else "(acc, ctx) -> distance"
        if finalize is not None and not callable(finalize):
            raise TypeError(f"finalize must be a Python function {fin_sig}, got {type(finalize).__name__}")
        if shape == "state" and finalize is None:
            raise ValueError("shape='state' needs finalize=FIN, a Python function FIN(s, ctx) -> distance that "
                             "turns the state into the distance (the update function returns nothing)")
        if shape == "vector" and finalize is not None:
            raise ValueError("shape='vector' takes no finalize: distance(x, y, n_dims, ctx) returns the distance "
                             "itself (finalize is for shape='state')")
        if shape == "vector" and decl.get("initial") not in (None, (), []):
            raise ValueError("shape='vector' takes no initial: it has no state (initial=[...] is for "
                             "shape='state': the state's first words)")
        sym = symbol if symbol is not None else getattr(fn, "__name__", None)
        if symbol is None and not (isinstance(sym, str) and sym.isidentifier() and sym.isascii()):
            raise ValueError(f"the function's name {sym!r} cannot be the metric's C symbol: pass symbol_name=")
        fsym = f"{sym}_finalize" if finalize is not None else None
        Metric.__init__(self, symbol=sym, finalize_symbol=fsym, abi=abi, shape=shape, **decl)
        self.finalize_fn = finalize
        self._init_python(fn, backend)  # (chooses the front end: "auto" and "nvrtc" translate here)
        functools.update_wrapper(self, fn)
        self._decorated(check)

    def _functions(self):
        return (self.fn,) if self.finalize_fn is None else (self.fn, self.finalize_fn)

    def _translate(self):
        """udf's translator's C++ of the metric and finalize (ABI v1; raises NotInSubset for ABI v2
        and for what is outside the subset, UdfCompileError for what the AST rules refuse)."""
        # the translator (tens of ms to import) loads on first use: `import udf` does not pay for it
        from ._pycompile.translate import translate_metric
        msrc, fsrc = self._checked_sources(self.fn, self.finalize_fn)
        self._sources = (msrc, fsrc)
        return translate_metric(msrc, fsrc, self._spec)

    def _nvrtc_typing(self):
        """The decoration-time result of the nvrtc front end (the translator types as numba)."""
        # the translator (tens of ms to import) loads on first use: `import udf` does not pay for it
        from ._pycompile.translate import VERSION
        t = self._translation
        msrc, fsrc = self._sources
        warnings = dg.float64_warnings(dg.TypingInfo(None, [], t.metric_float64_lines), msrc, self._spec.role)
        if fsrc is not None:
            warnings += dg.float64_warnings(dg.TypingInfo(None, [], t.finalize_float64_lines), fsrc, "finalize")
        return PyTypingResult(t.return_type, t.finalize_return_type, warnings, self._spec, "nvrtc", VERSION)

    def _udfc_flags(self) -> list[str]:
        return self.udfc_flags()

    def _typing(self):
        if self.backend == "nvrtc":
            return self._nvrtc_typing()
        return check_python_metric(self.fn, spec=self._spec, finalize=self.finalize_fn, backend=self.backend)

    def _checked_sources(self, fn, finalize):
        """(FunctionSource of fn, of finalize or None), through the AST rules (UdfCompileError)."""
        msrc = function_source(fn)
        check_function(msrc, self._spec.role, self._spec)
        fsrc = None
        if finalize is not None:
            fsrc = function_source(finalize)
            check_function(fsrc, "finalize", self._spec)
        return msrc, fsrc

    def _ast_check(self) -> None:
        self._checked_sources(self.fn, self.finalize_fn)

    def _compile_ltoir(self, archs):
        return compile_python_metric(self.fn, spec=self._spec, finalize=self.finalize_fn, backend=self.backend,
                                     archs=archs)

    def reference(self, x, y, captures: Mapping[str, Any] | None = None, *, ids=None, query: int = 0):
        """The metric evaluated on the CPU in float64 by plain Python (x: one vector or rows, y: one
        vector); captures default to the declared values.  For checking GPU results.  ABI v2:
        ctx.id is ids[i] for row i of x (default i) and ctx.query is `query`."""
        values = {**self._defaults, **(captures or {})}
        values = {k: to_host(v) for k, v in values.items()}
        return reference(self.fn, np.asarray(x), np.asarray(y), values, spec=self._spec,
                         finalize=self.finalize_fn, ids=ids, query=query)


def metric(fn: Callable | None = None, *, order: str = "min", initial=None, coarse_metric: str = "l2",
           elem: str = "f32", acc: str | None = None, captures=None, finalize: Callable | None = None,
           symbol_name: str | None = None, backend: str = "auto", check: bool = True,
           shape: str | None = None, abi: str | None = None, monotone: bool = False,
           coarse_weights: str | None = None):
    """Decorator: a Python metric, as `@udf.metric` or `@udf.metric(...)`.

    ABI v1 (default): `f(x, y, acc, ctx) -> new acc`, called per coordinate.
    ABI v2, shape="state": `update(x, y, s, ctx)` folds a coordinate into the state s (8 words
                   of the accumulator type: s[0] .. s[7]) and returns nothing; finalize(s, ctx)
                   returns the distance.
    ABI v2, shape="vector": `distance(x, y, n_dims, ctx) -> distance`, once per (query, stored
                   vector): x and y are the whole vectors (x[0] .. x[n_dims - 1], read-only).

    order          "min" (smaller is nearer) or "max" (larger is nearer)
    initial        v1: the accumulator's initial value (a number, inf or -inf; an int for acc
                   "i32"; default 0.0); state: the state's first words (a list of at most 8
                   numbers, the rest zero; default all zero); vector: not allowed
    coarse_metric  metric of the coarse (centroid) probe: "l2" (= "sqeuclidean"), "inner_product",
                   "cosine"
    monotone       ABI v1 only (udfc --monotone): True promises that the key only moves away from
                   the best as coordinates fold (order "min": f(x, y, acc, ctx) >= acc for every
                   input; "max": <= acc; finalize non-decreasing), so a scan may stop folding a
                   vector once it is worse than the query's k-th best (same results, less work).
                   Wrong results if the metric is not monotone (inner product, cosine, a negative
                   weight); default False
    coarse_weights the name of the f32 array capture that holds the metric's weights (udfc
                   --coarse-weights): Index.build then clusters and probes the rows scaled by
                   sqrt(w) unless given other coarse_weights; default None (the rows as given)
    elem           element type of the vectors: "f32" "f16" "i8" "u8"
    acc            accumulator type: "f32", or "i32" (default for i8/u8); x, y and acc (v1), x, y
                   and the state's words (state), the elements of x and y (vector) have this type
    captures       {name: dtype spec | array | number}: see the udf._metric docstring (at most 8)
    finalize       v1: a Python function g(acc, ctx) -> distance (e.g. math.sqrt(acc)), or None;
                   state: fin(s, ctx) -> distance (required); vector: not allowed
    shape          None (ABI v1), "state" or "vector" (ABI v2)
    abi            "v1" or "v2"; default "v2" when shape is given, else "v1".  abi="v2" without
                   shape infers it as udfc does: a function that returns no value is a state
                   update, one that returns a value a vector distance
    symbol_name    the C symbol of the metric (default: the function's name); the finalize
                   function is f"{symbol}_finalize"
    backend        "auto" (default): "nvrtc" when udf's translator takes the function (ABI v1,
                   the common subset of Python: docs/python.md, "Two front ends"), else
                   "numba-cuda-mlir" ("numba-cuda" on Python 3.10); "nvrtc" (ValueError outside
                   the subset), "numba-cuda-mlir" or "numba-cuda".  .backend says which ran,
                   .nvrtc_unsupported why not nvrtc, .cuda_source the translated C++; "auto"
                   taking numba for an ABI v1 metric issues a udf.FrontEndWarning at the
                   construct's line, with the rewrite that keeps the fast path
    check          run numba's typing now, so errors point at your lines when the module is
                   imported (default); False defers every check to the first compile

    ctx.dim, ctx.n_dims and ctx.NAME (a capture) as in v1; the v2 ctx adds ctx.query (the query's
    row in the batch) and ctx.id (the stored vector's id).

    Returns a PythonMetric (callable as the function).  Raises UdfCompileError at the user's
    file and line (unsupported syntax, wrong arity, unknown ctx field, wrong return type, ...)
    and ValueError for a bad declaration.
    """
    def wrap(f):
        return PythonMetric(f, finalize=finalize, backend=backend, symbol=symbol_name, check=check, order=order,
                            initial=initial, coarse_metric=coarse_metric, elem=elem, acc=acc, captures=captures,
                            abi=abi, shape=shape, monotone=monotone, coarse_weights=coarse_weights)
    if fn is None:
        return wrap
    return wrap(fn)


# ------------------------------------------------------------------------------ CUDA C++ / IR


class CudaMetric(Metric):
    """A metric in CUDA C++ (made by udf.cuda_source_metric), compiled by udfc (NVRTC).

    Extra attributes: source (the text, or None for a file), path (the file, or None), flags.
    """

    kind = "CUDA"

    def __init__(self, source: str | None, path: Path | None, *, flags: Sequence[str], finalize: str | None,
                 symbol: str | None, **decl):
        super().__init__(symbol=symbol, finalize_symbol=finalize, **decl)
        self.source, self.path, self.flags = source, path, [str(f) for f in flags]

    def _compile(self, archs: tuple[int, ...]) -> Artifact:
        inputs = [str(self.path.resolve())] if self.path is not None else ["-e", self.source]
        with tempfile.TemporaryDirectory(prefix="udfc-") as tmp:
            return self._udfc(inputs, archs, cwd=tmp, extra=self.flags)


def cuda_source_metric(source: str | os.PathLike, *, symbol_name: str | None = None, captures=None,
                       order: str | None = None, initial=None, coarse_metric: str | None = None,
                       elem: str | None = None, acc: str | None = None, finalize: str | None = None,
                       flags: Sequence[str] = (), shape: str | None = None, abi: str | None = None,
                       monotone: bool | None = None, coarse_weights: str | None = None) -> CudaMetric:
    """A metric written in CUDA C++: `extern "C" __device__ ACC NAME(ACC x, ACC y, ACC acc,
    const udf_ctx_v1 *ctx)`, captures read with UDF_CAPTURE(ctx, NAME) (see docs/udfc.md); or an
    ABI v2 metric (docs/abi-v2.md): `void NAME(ACC x, ACC y, udf_state_v2 *s, const udf_ctx_v2 *)`
    + a finalize (shape "state"), or `float NAME(const ACC *x, const ACC *y, uint32_t n_dims,
    const udf_ctx_v2 *)` (shape "vector").

    source       the CUDA source text (str), or a path (pathlib.Path / os.PathLike) to a .cu file
    symbol_name  the metric function (default: the only extern "C" __device__ function)
    finalize     the NAME of a finalize function in the source: float NAME(ACC acc, const udf_ctx_v1 *)
                 (v2 state: float NAME(const udf_state_v2 *s, const udf_ctx_v2 *))
    shape, abi   "state" / "vector" (udfc --shape, implies ABI v2); abi="v2" alone lets udfc infer
                 the shape from the signature (void: state, float: vector)
    initial      v1: a number; v2 state: a list of at most 8 numbers (udfc --initial a,b,...)
    flags        more udfc flags (-I DIR, -D NAME=VALUE, --flags-from-first-line, ...)
    captures, order, initial, coarse_metric, elem, acc, monotone, coarse_weights: as for @udf.metric; those left
                 None are not passed to udfc (its defaults: min, 0, l2, f32, not monotone; or the
                 source's first line with flags=["--flags-from-first-line"]; monotone=False cannot
                 undo a first line's --monotone).  After compiling, the metric's attributes are
                 the artifact's.

    Nothing is compiled until compile() / link / Index.build; errors are then UdfToolError with
    udfc's diagnostics (file "<string>" for source text, line, column, code).
    """
    text, path = cuda_input(source)
    return CudaMetric(text, path, flags=flags, finalize=finalize, symbol=symbol_name, order=order, initial=initial,
                      coarse_metric=coarse_metric, elem=elem, acc=acc, captures=captures, abi=abi, shape=shape,
                      monotone=monotone, coarse_weights=coarse_weights)


class IRMetric(Metric):
    """A metric in MLIR or LLVM IR (text or bitcode) or NVVM LTO-IR (made by udf.ir_metric).

    Extra attributes: ir_kind ("mlir" "llvm" "ltoir"), path (the file, or None), data (the text /
    bytes given, or None for a file), flags.
    """

    kind = "IR"

    def __init__(self, data: bytes | None, path: Path | None, ir_kind: str, *, flags: Sequence[str],
                 finalize: str | None, symbol: str | None, **decl):
        super().__init__(symbol=symbol, finalize_symbol=finalize, **decl)
        self.data, self.path, self.ir_kind, self.flags = data, path, ir_kind, [str(f) for f in flags]
        self.kind = {"mlir": "MLIR", "llvm": "LLVM IR", "ltoir": "LTO-IR"}[ir_kind]

    def _compile(self, archs: tuple[int, ...]) -> Artifact:
        with tempfile.TemporaryDirectory(prefix="udfc-") as tmp:
            source = ir_udfc_input(self.data, self.path, self.ir_kind, self._symbol or "metric", tmp)
            return self._udfc([source, "--input-kind", self.ir_kind], archs, cwd=tmp, extra=self.flags)


def ir_metric(path_or_text: str | bytes | os.PathLike, *, kind: str | None = None, symbol_name: str | None = None,
              captures=None, order: str | None = None, initial=None,
              coarse_metric: str | None = None, elem: str | None = None, acc: str | None = None,
              finalize: str | None = None, flags: Sequence[str] = (), shape: str | None = None,
              abi: str | None = None, monotone: bool | None = None, coarse_weights: str | None = None) -> IRMetric:
    """A metric in MLIR, LLVM IR or NVVM LTO-IR, compiled by udfc (docs/frontends.md gives the
    ABI in IR: `ACC @NAME(ACC, ACC, ACC, ptr)`, capture i at ctx + 16 + 8*i).  ABI v2
    (docs/abi-v2.md): state `void @NAME(ACC, ACC, ptr, ptr)` + finalize `float (ptr, ptr)`,
    vector `float @NAME(ptr, ptr, i32, ptr)`; capture i at ctx + 24 + 8*i.

    path_or_text  a path (os.PathLike, or a str naming an existing file), the IR text (str), or
                  its bytes (bitcode)
    kind          "mlir", "llvm" or "ltoir"; default: from the file suffix, else the content
    shape, abi    as for cuda_source_metric; LTO-IR needs the shape (udfc cannot read the
                  signature from it)
    symbol_name, finalize (a symbol), flags, captures, order, initial, coarse_metric, elem, acc,
    monotone, coarse_weights:  as for cuda_source_metric.
    """
    data, path, kind = ir_input(path_or_text, kind)
    return IRMetric(data, path, kind, flags=flags, finalize=finalize,
                    symbol=symbol_name, order=order, initial=initial, coarse_metric=coarse_metric, elem=elem,
                    acc=acc, captures=captures, abi=abi, shape=shape, monotone=monotone,
                    coarse_weights=coarse_weights)
