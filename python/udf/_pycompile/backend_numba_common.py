"""What the two numba back ends (backend_numba_cuda.py, backend_numba_cuda_mlir.py) share.

Both import their package once, under a lock, and register the ctx extension (the same
`AttributeTemplate` over their copy of numba's types); both compile each part of a UDF
(metric, then finalize) on its own, timed, with the part's role on any error; and both
refuse a part that needs link inputs one LTO-IR module cannot carry.  A back end module
makes one `Loader` and keeps the API compile.py calls (load, acc_type, type_function,
compile_ltoir).

This module imports no numba: a back end's package is imported on its first `load()`.
"""
from __future__ import annotations

import threading
import time

from .ctxtype import numba_field_type


class State:
    """A loaded back end: numba's `types`, the ctx type class and the package version, plus
    what the back end needs to compile (its own attributes)."""

    def __init__(self, types, ctx_type, version):
        self.types = types
        self.CtxType = ctx_type
        self.version = version


class Loader:
    """Imports a back end's package and registers its ctx extension once per process.

    `import_package()` imports the package and returns its version (ImportError when it is
    absent); `register(version)` registers the extension and returns the State.  An
    ImportError or AttributeError from `register` means the package's internals changed."""

    def __init__(self, name, tested, import_package, register):
        self.name = name
        self.tested = tested
        self.lock = threading.RLock()
        self.state = None
        self._import_package = import_package
        self._register = register

    def load(self):
        with self.lock:
            if self.state is not None:
                return self.state
            ver = self._import_package()
            try:
                self.state = self._register(ver)
            except (ImportError, AttributeError) as exc:
                raise ImportError(f"{self.name} {ver} is installed, but the internals this layer uses "
                                  f"changed (tested with {', '.join(self.tested)}.x): {exc}") from exc
            return self.state


def cc(arch):
    """The (major, minor) compute capability of an arch number (90 -> (9, 0))."""
    return (arch // 10, arch % 10)


def acc_type(st, acc):
    return st.types.float32 if acc == "f32" else st.types.int32


def ctx_attributes(attribute_template, ctx_type, types):
    """The typing template that types `ctx.NAME` from the capture declaration."""

    class _UdfCtxAttributes(attribute_template):
        key = ctx_type

        def generic_resolve(self, typ, attr):
            info = typ.field(attr)
            return None if info is None else numba_field_type(types, info)

    return _UdfCtxAttributes


def refuse_extra_link_inputs(symbol, what):
    """One LTO-IR module carries no other link input: a part that needs one is refused."""
    raise RuntimeError(f"'{symbol}' needs extra link inputs ({what}), which one LTO-IR module "
                       "cannot carry; this construct is not supported in a UDF")


def compile_parts(parts, compile_one):
    """compile_one(fn, sig, symbol) for each of parts [(fn, signature, symbol, role)], in
    order.  Returns (results, {role: seconds}); an error carries its part's role as
    `_udf_role`."""
    results = []
    times = {}
    for fn, sig, symbol, role in parts:
        t0 = time.perf_counter()
        try:
            results.append(compile_one(fn, sig, symbol))
        except Exception as exc:
            exc._udf_role = role
            raise
        times[role] = time.perf_counter() - t0
    return results, times
