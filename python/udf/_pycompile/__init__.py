"""udf._pycompile: Python metric function -> NVVM LTO-IR per GPU arch, without a GPU.

This is the compile layer under the future `@udf.metric` decorator.  It is pure Python; the
compilers are imported lazily, so the package imports without either installed.

    from udf._pycompile import compile_python_metric, CaptureSpec

    def weighted_l2(x, y, acc, ctx):
        d = x - y
        return acc + ctx.weights[ctx.dim] * d * d

    res = compile_python_metric(
        weighted_l2, elem="f32", acc="f32",
        captures=[CaptureSpec("weights", "f32", is_array=True)],   # or {"weights": "f32[]"}
        finalize=None, symbol="weighted_l2", backend="numba-cuda-mlir", archs=[80, 90, 100, 120])
    res.ltoir[90]          # bytes: NVVM LTO-IR for sm_90 defining `weighted_l2` (C linkage)
    res.udfc_flags()       # ['--symbol', 'weighted_l2', '--elem', 'f32', ..., '--capture', 'weights:f32[]']
    res.reference(x, y, {"weights": w})   # float64 CPU reference (plain Python, fake ctx)

Package and link each arch's LTO-IR with the project's tools:
    udfc wl2.sm_90.ltoir <res.udfc_flags()> --arch sm_90 -o wl2.udfa
    udf-link wl2.udfa --arch sm_90 -o wl2.udfm

API
---
compile_python_metric(fn, *, elem="f32", acc=None, captures=(), finalize=None, symbol=None,
                      finalize_symbol=None, backend="numba-cuda-mlir", archs=(90,),
                      order="min", initial=None, coarse_metric="l2", spec=None,
                      abi=None, shape=None)
        -> PyCompileResult
    fn        `def f(x, y, acc, ctx)` returning the new accumulator.  The C ABI is
              `ACC f(ACC x, ACC y, ACC acc, const udf_ctx_v1 *ctx)`, ACC = float (acc "f32")
              or int32_t (acc "i32"; default for i8/u8 elements).
    finalize  `def g(acc, ctx)` returning the distance: `float g(ACC acc, const udf_ctx_v1 *ctx)`.
    captures  list of CaptureSpec(name, dtype, is_array) in ABI order (at most 8), or a
              {name: "f32[]" | "f16[]" | "i32[]" | "u8[]" | "f32" | "i32" | numpy value} mapping.
    symbol    C name of the metric (default fn.__name__); finalize_symbol defaults to
              f"{symbol}_finalize".
    backend   "numba-cuda-mlir" (default) or "numba-cuda".
    archs     ints or "sm_XX" strings, from 75 80 86 87 88 89 90 100 103 110 120 121.
    order / initial / coarse_metric: metadata only, for udfc_flags().
    shape     None (ABI v1), "state" or "vector" (ABI v2, see below); abi "v1" / "v2" (default
              "v2" when shape is given; abi="v2" alone infers the shape: no return value ->
              "state", a returned value -> "vector").
    spec      a ready MetricSpec instead of the declaration keywords.

ABI v2 (ivf_flat.metric.v2, include/udf/abi/metric_v2.h):
    shape "state"   fn = `def update(x, y, s, ctx)`, returns nothing:
                    `void update(ACC x, ACC y, udf_state_v2 *s, const udf_ctx_v2 *ctx)`; `s` is a
                    numba CPointer(ACC), s[0] .. s[7].  finalize = `def fin(s, ctx)` (required):
                    `float fin(const udf_state_v2 *s, const udf_ctx_v2 *ctx)`.  initial: at most
                    8 numbers, the state's first words (udfc --initial a,b,...).
    shape "vector"  fn = `def distance(x, y, n_dims, ctx)` returning the distance:
                    `float distance(const ACC *x, const ACC *y, uint32_t n_dims, const udf_ctx_v2
                    *ctx)`; x and y are CPointer(ACC), n_dims a uint32.  No finalize, no initial.
    The v2 ctx (udf_ctx_v2) adds ctx.query (u32 @8) and ctx.id (i64 @16); captures are at
    24 + 8 i.  udfc_flags() starts with --abi v2 --shape SHAPE.

PyCompileResult: ltoir {arch: bytes}, symbol, finalize_symbol, backend, backend_version,
    warnings [str] (file:line: warning: ...), spec (MetricSpec), return_type (what numba
    inferred before conversion), compile_seconds {arch: s}, typing_seconds, udfc_flags(),
    reference(x, y, captures).

The metric and the finalize function go into the SAME LTO-IR module for each arch: udfc takes
one LTO-IR file per arch and checks that it defines both `--symbol` and `--finalize`
("finalize function 'g' is not defined in this LTO-IR" otherwise).

In the function, `ctx` is typed from the declaration (no intrinsics to write):
    ctx.dim, ctx.n_dims   int64 (the u32 fields zero-extended; Python int semantics)
    ctx.query, ctx.id     int64 (ABI v2 only: the query's row, the stored vector's id)
    array capture         a typed device pointer: ctx.weights[ctx.dim] (f32 f16 i32 u8 elements)
    scalar capture        float32 or int32: ctx.p
numba's typing rules apply: a Python float literal is float64 (write np.float32(0.5) to stay in
float32; float64 use is reported in `warnings`), int32 + int32 is int64, float32 + int32 is
float64.  Returning an int where ACC is f32 is converted; returning a float where ACC is i32
is an error (write int(...)), as are tuples, None and complex numbers.

Errors: UdfCompileError (message, filename, lineno, col, notes, diagnostics, backend,
backend_message); str() is `file:line[:col]: error: message` + `note:` lines, pointing at the
user's file for wrong arity, unknown `ctx.NAME` (the declared captures are listed), unsupported
syntax (try/with/raise/assert/yield, lists/dicts/sets, f-strings), undefined names, missing
returns, numba typing errors and bad return types.  A missing back end raises
BackendUnavailableError (an ImportError) naming the pip extra (`udf[numba-cuda]`,
`udf[numba-cuda-mlir]`).  Bad declarations raise ValueError.

check_python_metric(fn, *, <same keywords>, arch=90) -> PyTypingResult(return_type,
    finalize_return_type, warnings, spec, backend, backend_version): the AST checks and numba's
    typing only, no code generation (for errors at decoration time).

reference(fn, x, y, captures, *, spec, finalize=None, ids=None, query=0): the metric over whole
vectors in float64, the function called by plain Python with a fake ctx (see reference.py; ABI
v2: ctx.id = ids[i], ctx.query = query).

Filters (ABI ivf_flat.filter.v1)
--------------------------------
compile_python_filter(fn, *, captures=(), symbol=None, backend=..., archs=(90,), spec=None)
        -> PyFilterCompileResult (ltoir, symbol, spec: FilterSpec, warnings, return_type,
        udfc_flags() = ['--kind', 'filter', '--symbol', ..., '--capture', ...], reference(...))
    fn        `def keep(query, id, ctx)` returning whether the stored vector `id` may be a result
              for query row `query`: `bool keep(uint32_t query, int64_t id, const udf_ctx_v1 *ctx)`.
              query is typed uint32, id int64; ctx.dim is 0 and ctx.n_dims the index's dimension
              at run time; captures as for metrics, arrays of any length.  A bool or an integer
              (nonzero: keep) may be returned; floats, None and tuples are errors.  Both back ends
              return the bool as an i8 (0 or 1), which is how NVVM passes C's bool.
check_python_filter(fn, ...) -> PyTypingResult: the checks only.
filter_reference(fn, queries, ids, captures, *, spec, n_dims=0) -> bool array (plain Python).

Helpers: a metric may call device functions jitted for the SAME back end:
numba_cuda_mlir.cuda.jit(device=True), or numba.cuda.jit(device=True, inline='always') -- numba-cuda
0.30 asks the CUDA driver for the cc to compile a call to a non-inlined device function, which
fails without a GPU (reported as such, with a hint).

Modules: spec.py (the declaration, udfc flags), source.py (AST checks), diagnostics.py (numba
errors -> the user's lines, return-type rules), ctxtype.py (the ctx type), backend_numba_cuda.py
and backend_numba_cuda_mlir.py (how ctx access and the one-module LTO-IR are done in each) over
backend_numba_common.py (what both share: loading, the ctx typing template, the per-part compile),
compile.py, reference.py, errors.py.

Global state: numba-cuda gets an extension type, a data model, an attribute template and a
getattr lowering registered in its CUDA registries; numba-cuda-mlir the same in
numba_cuda_mlir.extending's registries.  numba-cuda-mlir's `tools._cached_cc` is set to the
target arch during each compile (numba-cuda-mlir 0.6 asks the driver for the host's compute
capability otherwise) and restored afterwards.  `np.row_stack` is restored as an alias of
`np.vstack` before numba-cuda is imported when NumPy lacks it (NumPy >= 2.5).
"""
from .compile import (BACKENDS, DEFAULT_BACKEND, PyCompileResult, PyFilterCompileResult, PyTypingResult,
                      backend_available, check_python_filter, check_python_metric, compile_python_filter,
                      compile_python_metric, load_backend, ltoir_arch)
from .errors import BackendUnavailableError, Diagnostic, UdfCompileError
from .reference import ReferenceCtx, filter_reference, reference
from .spec import (ACC_FOR_ELEM, SUPPORTED_ARCHS, CaptureSpec, FilterSpec, MetricSpec, parse_archs,
                   parse_captures)

__all__ = [
    "ACC_FOR_ELEM", "BACKENDS", "DEFAULT_BACKEND", "BackendUnavailableError", "CaptureSpec",
    "Diagnostic", "FilterSpec", "MetricSpec", "PyCompileResult", "PyFilterCompileResult", "PyTypingResult",
    "ReferenceCtx", "SUPPORTED_ARCHS", "UdfCompileError", "backend_available", "check_python_filter",
    "check_python_metric", "compile_python_filter", "compile_python_metric", "filter_reference", "load_backend",
    "ltoir_arch", "parse_archs", "parse_captures", "reference",
]
