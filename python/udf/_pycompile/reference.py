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

ABI v2 (spec.abi == "v2"; ctx also has `query` and `id`):
- state shape: `s` is a list of STATE_WORDS (8) numbers, the initial words then zeros;
  update(x[d], y[d], s, ctx) is called for d = 0 .. n_dims-1 with ctx.dim = d (with acc
  'i32' every word wraps to int32 after each call), then finalize(s, ctx) with ctx.dim =
  n_dims and `s` a tuple (read-only, as the const pointer is).
- vector shape: distance(x, y, n_dims, ctx) once per stored vector, x and y tuples of
  Python floats (ints for acc 'i32'), ctx.dim = n_dims.
ctx.id is the stored vector's id (`ids`, default its row) and ctx.query the query's row
(`query`, default 0).

On the GPU the metric runs in float32 (when ACC is f32): compare with a tolerance.
"""
from __future__ import annotations

from typing import Any, Callable, Mapping

import numpy as np

from .spec import STATE_WORDS, MetricSpec

_NP = {"f32": np.float32, "f16": np.float16, "i32": np.int32, "u8": np.uint8, "i8": np.int8}


class ReferenceCtx:
    """The fake `const udf_ctx_v1 *` (or `udf_ctx_v2 *` with abi "v2": also query and id): dim,
    n_dims and the captures as attributes."""

    def __init__(self, n_dims: int, captures: dict[str, Any], declared: str, abi: str = "v1"):
        self.dim = 0
        self.n_dims = n_dims
        self.n_captures = len(captures)
        self._declared = declared
        self._builtin = "dim, n_dims" if abi == "v1" else "dim, n_dims, query, id"
        if abi == "v2":
            self.query = 0
            self.id = 0
        self.__dict__.update(captures)

    def __getattr__(self, name):  # only for names that are not set
        raise AttributeError(f"ctx has no field '{name}'; declared captures: {self._declared}; "
                             f"built-in fields: {self._builtin}")


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
              spec: MetricSpec, finalize: Callable | None = None, ids=None, query: int = 0):
    """Distance(s) between stored vector(s) x and the query y, in float64.

    x: (dim,) or (n, dim); y: (dim,).  Returns a float for one x, a float64 array of n for
    several.  `captures` maps each declared capture name to its value (arrays: anything
    numpy converts; scalars: numbers).  `spec` gives elem, acc, initial, the ABI and shape and
    the captures; it is `PyCompileResult.spec` after compiling.  ABI v2 only: `ids` are the
    stored vectors' ids (ctx.id; default their rows 0 .. n-1) and `query` the query's row
    (ctx.query).
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
    else:
        xs_l = xs.astype(np.float64).tolist()
        y_l = yv.astype(np.float64).tolist()
    abi = getattr(spec, "abi", "v1")
    ctx = ReferenceCtx(n_dims, caps, spec.describe_captures(), abi)
    if abi == "v2":
        id_list = list(range(len(xs_l))) if ids is None else [int(i) for i in np.asarray(ids).ravel()]
        if len(id_list) != len(xs_l):
            raise ValueError(f"{len(id_list)} ids for {len(xs_l)} vectors")
        ctx.query = int(query)
        if spec.shape == "vector":
            return _vector(fn, xs_l, tuple(y_l), ctx, id_list, n_dims, single)
        if spec.shape != "state":
            raise ValueError("the ABI v2 reference needs the shape ('state' or 'vector')")
        init = [int(v) if is_int else float(v) for v in spec.initial]
        init += [0 if is_int else 0.0] * (STATE_WORDS - len(init))
        return _state(fn, finalize, xs_l, y_l, ctx, id_list, n_dims, init, is_int, single)
    init = int(spec.initial) if is_int else float(spec.initial)
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


def _state(update, finalize, xs_l, y_l, ctx, id_list, n_dims, init, is_int, single):
    out = np.empty(len(xs_l), dtype=np.float64)
    for i, xrow in enumerate(xs_l):
        ctx.id = id_list[i]
        s = list(init)
        for d in range(n_dims):
            ctx.dim = d
            update(xrow[d], y_l[d], s, ctx)
            if len(s) != STATE_WORDS:
                raise ValueError(f"the update function changed the state's length to {len(s)}; it has "
                                 f"{STATE_WORDS} words")
            if is_int:
                s[:] = [_wrap_i32(int(v)) for v in s]
        ctx.dim = n_dims
        out[i] = float(finalize(tuple(s), ctx))
    return float(out[0]) if single else out


def _vector(distance, xs_l, y, ctx, id_list, n_dims, single):
    out = np.empty(len(xs_l), dtype=np.float64)
    ctx.dim = n_dims
    for i, xrow in enumerate(xs_l):
        ctx.id = id_list[i]
        out[i] = float(distance(tuple(xrow), y, n_dims, ctx))
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
