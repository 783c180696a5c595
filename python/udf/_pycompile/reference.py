"""A CPU reference for a Python metric: the same function run by plain Python, in float64.

numba's CUDA simulator cannot run these C-ABI device functions, so the reference calls the
user's function directly, coordinate by coordinate, with a fake ctx: `ctx.dim`,
`ctx.n_dims` and every capture by name, as on the GPU.

- f32 / f16 elements (and i8 / u8 with acc='f32'): x, y and acc are Python floats (float64);
  array captures are the declared dtype's values widened to float64 / int.
- i8 / u8 elements with acc='i32': x, y, acc are Python ints, and acc wraps to int32 after
  each call, exactly as the int32 return of the GPU function does.
- finalize(acc, ctx) is called with ctx.dim == n_dims, as the scan kernel does; without
  one the distance is float(acc).

On the GPU the metric runs in float32 (when ACC is f32): compare with a tolerance.
"""
from __future__ import annotations

from typing import Any, Callable, Mapping

import numpy as np

from .spec import MetricSpec

_NP = {"f32": np.float32, "f16": np.float16, "i32": np.int32, "u8": np.uint8, "i8": np.int8}


class ReferenceCtx:
    """The fake `const udf_ctx_v1 *`: dim, n_dims and the captures as attributes."""

    def __init__(self, n_dims: int, captures: dict[str, Any], declared: str):
        self.dim = 0
        self.n_dims = n_dims
        self.n_captures = len(captures)
        self._declared = declared
        self.__dict__.update(captures)

    def __getattr__(self, name):  # only for names that are not set
        raise AttributeError(f"ctx has no field '{name}'; declared captures: {self._declared}; "
                             "built-in fields: dim, n_dims")


def _capture_values(spec: MetricSpec, captures: Mapping[str, Any] | None) -> dict[str, Any]:
    captures = dict(captures or {})
    unknown = set(captures) - set(spec.capture_names)
    if unknown:
        raise ValueError(f"unknown capture(s) {sorted(unknown)}; declared: {spec.describe_captures()}")
    out = {}
    for c in spec.captures:
        if c.name not in captures:
            raise ValueError(f"capture '{c.name}' ({c.udfc_type}) has no value")
        v = captures[c.name]
        if c.is_array:
            arr = np.asarray(v).astype(_NP[c.dtype], copy=False).ravel()
            out[c.name] = arr.astype(np.float64) if c.dtype in ("f32", "f16") else arr.astype(np.int64)
        elif c.dtype == "f32":
            out[c.name] = float(np.float32(v))
        else:
            out[c.name] = int(np.int32(v))
    return out


def _wrap_i32(v: int) -> int:
    return ((v + 2**31) % 2**32) - 2**31


def reference(fn: Callable, x, y, captures: Mapping[str, Any] | None = None, *,
              spec: MetricSpec, finalize: Callable | None = None):
    """Distance(s) between stored vector(s) x and the query y, in float64.

    x: (dim,) or (n, dim); y: (dim,).  Returns a float for one x, a float64 array of n for
    several.  `captures` maps each declared capture name to its value (arrays: anything
    numpy converts; scalars: numbers).  `spec` gives elem, acc, initial and the captures;
    it is `PyCompileResult.spec` after compiling.
    """
    xs = np.asarray(x)
    yv = np.asarray(y).ravel()
    single = xs.ndim == 1
    xs = np.atleast_2d(xs)
    if xs.shape[1] != yv.shape[0]:
        raise ValueError(f"x has {xs.shape[1]} dimensions, y has {yv.shape[0]}")
    n_dims = yv.shape[0]
    caps = _capture_values(spec, captures)
    is_int = spec.acc == "i32"
    elem_np = _NP[spec.elem]
    # elements as the GPU sees them: stored in elem, converted to ACC
    xs = xs.astype(elem_np, copy=False)
    yv = yv.astype(elem_np, copy=False)
    if is_int:
        xs_l = xs.astype(np.int64).tolist()
        y_l = yv.astype(np.int64).tolist()
        init = int(spec.initial)
    else:
        xs_l = xs.astype(np.float64).tolist()
        y_l = yv.astype(np.float64).tolist()
        init = float(spec.initial)
    ctx = ReferenceCtx(n_dims, caps, spec.describe_captures())
    out = np.empty(len(xs_l), dtype=np.float64)
    for i, xrow in enumerate(xs_l):
        acc = init
        for d in range(n_dims):
            ctx.dim = d
            acc = fn(xrow[d], y_l[d], acc, ctx)
            if is_int:
                acc = _wrap_i32(int(acc))
        ctx.dim = n_dims
        out[i] = float(finalize(acc, ctx)) if finalize is not None else float(acc)
    return float(out[0]) if single else out


def filter_reference(fn: Callable, queries, ids, captures: Mapping[str, Any] | None = None, *, spec,
                     n_dims: int = 0) -> np.ndarray:
    """keep(query, id, ctx) of a Python filter for every query and id, by plain Python.

    queries: a number of queries n (rows 0 .. n-1) or the query rows themselves; ids: the ids.
    Returns a bool array of len(queries) x len(ids).  ctx.dim is 0 and ctx.n_dims `n_dims`, as
    the scan gives them; array captures are NumPy arrays (float64 for f32 / f16, int64 for
    i32 / u8), scalars Python numbers.  `spec` is the FilterSpec.
    """
    rows = list(range(int(queries))) if np.ndim(queries) == 0 else [int(q) for q in np.asarray(queries).ravel()]
    id_list = [int(i) for i in np.asarray(ids, dtype=np.int64).ravel()]
    caps = _capture_values(spec, captures)
    ctx = ReferenceCtx(int(n_dims), caps, spec.describe_captures())
    out = np.zeros((len(rows), len(id_list)), dtype=bool)
    for r, q in enumerate(rows):
        for c, i in enumerate(id_list):
            out[r, c] = bool(fn(q, i, ctx))
    return out
