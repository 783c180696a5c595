"""Back end "numba-cuda" (tested with numba-cuda 0.30.x): numba's llvmlite lowering + libNVVM.

ctx access: a `types.Type` subclass per capture list (ctxtype.py) with numba's OpaqueModel
(an `i8*` argument in the C ABI), an `AttributeTemplate` registered with
`numba.cuda.extending.infer_getattr` that types `ctx.NAME` from the declaration, and a
`lower_getattr_generic` implementation that emits `getelementptr i8, ctx, OFFSET` +
`bitcast` + `load` (plus `zext` to i64 for dim / n_dims / query).  The same type serves the
ABI v2 ctx (`udf_ctx_v2`: its own offsets, `ctx.query`, `ctx.id`).  Everything inlines: no call is
left once nvJitLink -lto links the LTO-IR with the scan kernels.

Metric and finalize go into ONE LTO-IR module (udfc takes one LTO-IR file per arch): each is
compiled to LLVM IR by numba-cuda's own pipeline (`_compile_pyfunc_with_fixup`, what
`numba.cuda.compile` runs), and the two IR modules are compiled together by libNVVM with
`-gen-lto`, exactly as `CUDACodeLibrary.get_ltoir` does for one.

No GPU is needed: numba-cuda takes `cc=` and never asks the driver.
"""
from __future__ import annotations

import time
from importlib.metadata import version

from . import backend_numba_common as common
from .ctxtype import ctx_type_class, numba_field_type

NAME = "numba-cuda"
EXTRA = "numba-cuda"
PIP = "'numba-cuda>=0.30,<0.31'"
TESTED = ("0.30",)


def _import_package():
    # numpy and numba are imported on first use: `import udf` must not pay for them.
    import numpy as np

    # numba-cuda 0.30 registers an overload for np.row_stack, which NumPy 2.5 removed
    # (it was an alias of np.vstack): restore the alias before importing it.
    if not hasattr(np, "row_stack"):
        np.row_stack = np.vstack

    from numba import cuda  # noqa: F401  (initialises the CUDA target)

    try:
        return version("numba-cuda")
    except Exception:  # pragma: no cover
        return "unknown"


def _register(ver):
    # numba-cuda's internals, imported once the package is known to be there.
    from llvmlite import ir as llir
    from numba.cuda import types
    from numba.cuda.compiler import _compile_pyfunc_with_fixup, compile_cuda
    from numba.cuda.core.compiler_lock import global_compiler_lock
    from numba.cuda.cudadrv import nvrtc, nvvm
    # numba.cuda.datamodel.models redirects to numba.core's models when numba is
    # installed; importing numba.cuda.datamodel.cuda_models directly would register a
    # second set of default models and break unrelated lowering (range loops).
    from numba.cuda.datamodel.models import OpaqueModel
    from numba.cuda.extending import infer_getattr, lower_getattr_generic, register_model
    from numba.cuda.typing.templates import AttributeTemplate

    CtxType = ctx_type_class(types)
    register_model(CtxType)(OpaqueModel)
    infer_getattr(common.ctx_attributes(AttributeTemplate, CtxType, types))

    @lower_getattr_generic(CtxType)
    def _lower_ctx_getattr(context, builder, typ, value, attr):
        info = typ.field(attr)
        i64 = llir.IntType(64)
        slot = builder.gep(value, [llir.Constant(i64, info.offset)], inbounds=True)
        if info.kind == "u32":
            i32 = llir.IntType(32)
            raw = builder.load(builder.bitcast(slot, i32.as_pointer()), align=4)
            return builder.zext(raw, i64)
        ty = context.get_value_type(numba_field_type(types, info))
        return builder.load(builder.bitcast(slot, ty.as_pointer()), align=8 if info.kind in ("ptr", "i64") else 4)

    st = common.State(types, CtxType, ver)
    st.compile_cuda = compile_cuda
    st.compile_pyfunc = _compile_pyfunc_with_fixup
    st.lock = global_compiler_lock
    st.nvvm = nvvm
    st.nvrtc = nvrtc
    return st


_loader = common.Loader(NAME, TESTED, _import_package, _register)
_lock = _loader.lock


def load():
    """Import numba-cuda and register the ctx extension once.  Raises ImportError."""
    return _loader.load()


acc_type = common.acc_type


def type_function(st, fn, argtypes, arch):
    """Type inference with the return type left open; returns numba's compile result.

    numba's own ABI here: it lowers any return type (tuple, Optional), so the type checks in
    diagnostics.py get to say what is wrong instead of a C-ABI lowering crash."""
    with _lock, st.lock:
        return st.compile_cuda(fn, None, tuple(argtypes), cc=common.cc(arch), abi="numba")


def _library(st, fn, sig, symbol, arch):
    lib, _resty = st.compile_pyfunc(fn, sig, device=True, abi="c", abi_info={"abi_name": symbol},
                                    cc=common.cc(arch), lto=True)
    extra = sorted(str(f) for f in getattr(lib, "_linking_files", ()) or ())
    if extra:
        common.refuse_extra_link_inputs(symbol, ", ".join(extra))
    return lib


def compile_ltoir(st, parts, arch):
    """parts: [(fn, signature, symbol, role)], metric first.  Returns (ltoir, {role: seconds})."""
    with _lock, st.lock:
        libs, times = common.compile_parts(parts, lambda fn, sig, symbol: _library(st, fn, sig, symbol, arch))
        irs = [ir for lib in libs for ir in lib.llvm_strs]
        options = dict(libs[0]._nvvm_options)
        options["arch"] = st.nvrtc.get_arch_option(*common.cc(arch))
        options["gen-lto"] = None
        t0 = time.perf_counter()
        ltoir = st.nvvm.compile_ir(irs, **options)
        times["nvvm"] = time.perf_counter() - t0
        return bytes(ltoir), times
