"""Back end "numba-cuda-mlir" (tested with numba-cuda-mlir 0.6.x): numba front end -> MLIR.

numba-cuda-mlir carries its own copy of numba's front end (numba_cuda_mlir.numba_cuda) and
lowers numba IR to MLIR (func/arith/llvm dialects) instead of llvmlite, so llvmlite-based
extensions do not apply.  Its extension points are `numba_cuda_mlir.extending`:
`typing_registry` (numba typing templates), `lowering_registry` (lowering functions that
get the MLIR lowerer and numba IR variables) and `register_model` (MLIR data models).

ctx access: the same per-capture-list `types.Type` subclass (ctxtype.py) over this copy of
numba's types, with numba-cuda-mlir's CPointerModel (`!llvm.ptr`); an AttributeTemplate
in `typing_registry`; and a `lowering_registry.lower_getattr_generic` implementation that
emits `llvm.getelementptr i8, ctx[OFFSET]` + `llvm.load` (+ `arith.extui` to i64 for
dim / n_dims / query) with the MLIR Python bindings the package bundles (the ABI v2 ctx,
`udf_ctx_v2`, has its own offsets and `ctx.id`, an i64 load).

Code generation: MLIR -> LLVM 7-dialect NVVM IR through the bundled LLVM 7.0.1 translator
(libMLIRToLLVM70 + lib/libLLVM-7.so) for sm < 100, MLIR -> modern LLVM IR + "downgrade for
libNVVM" passes for sm >= 100; then libNVVM `-gen-lto` in both cases.  Metric and finalize
go into ONE LTO-IR module: both are compiled and optimised separately, the finalize
function's `gpu.module` body is merged into the metric's (identical declarations and the
`__numba_cuda_mlir_error_code` global are shared), and the merged module goes through the
same translation (`mlir_optimization._get_ltoir`).

No GPU: numba-cuda-mlir 0.6 asks the driver for the host's compute capability even when
`cc=` is given (tools.get_gpu_compute_capability, via resolve_gpu_target).  Around each
compile this module sets `numba_cuda_mlir.tools._cached_cc` to the target arch (under a
lock) and restores the previous value afterwards, so the driver is never asked.
"""
from __future__ import annotations

import contextlib
import time
import types as pytypes

from . import backend_numba_common as common
from .ctxtype import ctx_type_class, numba_field_type

NAME = "numba-cuda-mlir"
EXTRA = "numba-cuda-mlir"
PIP = "'numba-cuda-mlir==0.6.*'"
TESTED = ("0.6",)


def _import_package():
    # numba-cuda-mlir is an optional dependency, imported on first use.
    import numba_cuda_mlir
    from numba_cuda_mlir import cuda  # noqa: F401  (the public entry point must import)

    return getattr(numba_cuda_mlir, "__version__", "unknown")


def _register(ver):
    # numba-cuda-mlir's internals, imported once the package is known to be there.
    from numba_cuda_mlir import compiler as nm_compiler
    from numba_cuda_mlir import tools
    from numba_cuda_mlir._mlir import ir as mir
    from numba_cuda_mlir._mlir.dialects import arith, llvm
    from numba_cuda_mlir._mlir.extras import types as T
    from numba_cuda_mlir.extending import (lowering_registry, refresh_registries, register_model,
                                           typing_registry)
    from numba_cuda_mlir.models import CPointerModel
    from numba_cuda_mlir.numba_cuda import types
    from numba_cuda_mlir.numba_cuda.typing.templates import AttributeTemplate

    CtxType = ctx_type_class(types)
    register_model(CtxType)(CPointerModel)
    typing_registry.register_attr(common.ctx_attributes(AttributeTemplate, CtxType, types))

    dynamic_index = -2147483648  # llvm.getelementptr's marker for a dynamic index

    @lowering_registry.lower_getattr_generic(CtxType)
    def _lower_ctx_getattr(context, lower, target, value, attr):
        typ = lower.get_numba_type(value.name)
        info = typ.field(attr)
        ptr = lower.load_var(value)
        offset = arith.constant(T.i64(), info.offset)
        slot = llvm.getelementptr(llvm.PointerType.get(), ptr, [offset], [dynamic_index], T.i8(), None)
        if info.kind == "u32":
            result = arith.extui(T.i64(), llvm.load(T.i32(), slot))
        else:
            fe_type = numba_field_type(types, info)
            result = lower.from_storage(fe_type, llvm.load(lower.get_storage_type(fe_type), slot))
        lower.store_var(target, result)

    refresh_registries()

    st = common.State(types, CtxType, ver)
    st.tools = tools
    st.compiler = nm_compiler
    st.mir = mir
    return st


_loader = common.Loader(NAME, TESTED, _import_package, _register)
_lock = _loader.lock


def load():
    """Import numba-cuda-mlir and register the ctx extension once.  Raises ImportError."""
    return _loader.load()


@contextlib.contextmanager
def _target_cc(st, arch):
    """numba-cuda-mlir 0.6 asks the driver for the host cc; answer with the target instead."""
    with _lock:
        saved = st.tools._cached_cc
        st.tools._cached_cc = common.cc(arch)
        try:
            yield
        finally:
            st.tools._cached_cc = saved


acc_type = common.acc_type


def _targetoptions(symbol, arch, output):
    opts = {"device": True, "cc": common.cc(arch), "abi_info": {"abi_name": symbol}}
    if output == "ltoir":
        opts["_compile_output"] = "ltoir"
        opts["lto"] = True
    return opts


def type_function(st, fn, argtypes, arch):
    """Type inference (and MLIR lowering, no optimisation) with the return type left open."""
    with _target_cc(st, arch):
        res = st.compiler._compile_only(fn, tuple(argtypes), _targetoptions("udf_typing_probe", arch, None))
        return res.cres


def _compile_one(st, fn, sig, symbol, arch):
    res = st.compiler._compile_and_optimize(fn, sig, _targetoptions(symbol, arch, "ltoir"))
    md = res.cres.metadata
    extra = [str(x) for x in md.get("linked_external_link_items", ()) or ()]
    if extra or md.get("needs_nrt"):
        common.refuse_extra_link_inputs(symbol, ", ".join(extra) if extra else "the NRT allocator")
    return md


def _merge_modules(st, metric_text, finalize_text):
    """The metric's optimised MLIR module with the finalize function's ops added."""
    # numba-cuda-mlir's internals: the package is loaded (load()) before any compile.
    from numba_cuda_mlir.lowering_utilities import context
    from numba_cuda_mlir.mlir_optimization import _get_single_gpu_module

    mir = st.mir
    with context.get_context():
        target = mir.Module.parse(metric_text)
        source = mir.Module.parse(finalize_text)
        tgt_gpu = _get_single_gpu_module(target)
        src_gpu = _get_single_gpu_module(source)
        tgt_block = tgt_gpu.regions[0].blocks[0]
        existing = {}
        for op in tgt_block.operations:
            name = _sym_name(op)
            if name is not None:
                existing[name] = str(op)
        for op in src_gpu.regions[0].blocks[0].operations:
            name = _sym_name(op)
            if name is not None and name in existing:
                if existing[name] == str(op) or name == "__numba_cuda_mlir_error_code" or _is_declaration(op):
                    continue
                raise RuntimeError(f"metric and finalize both define '{name}' differently")
            op.clone(ip=mir.InsertionPoint(tgt_block))
        return str(target)


def _sym_name(op):
    try:
        attr = op.operation.attributes["sym_name"]
    except (KeyError, ValueError, IndexError):
        return None
    return str(attr).strip('"')


def _is_declaration(op):
    try:
        return len(op.operation.regions) == 0 or len(op.operation.regions[0].blocks) == 0
    except Exception:
        return False


def compile_ltoir(st, parts, arch):
    """parts: [(fn, signature, symbol, role)], metric first.  Returns (ltoir, {role: seconds})."""
    # numba-cuda-mlir's internals: the package is loaded (load()) before any compile.
    from numba_cuda_mlir.mlir_optimization import _get_ltoir

    with _target_cc(st, arch):
        mds, times = common.compile_parts(parts, lambda fn, sig, symbol: _compile_one(st, fn, sig, symbol, arch))
        if len(mds) == 1:
            return bytes(mds[0]["ltoir"]), times
        t0 = time.perf_counter()
        merged = _merge_modules(st, mds[0]["mlir_module_optimized"], mds[1]["mlir_module_optimized"])
        holder = pytypes.SimpleNamespace(metadata={"mlir_module_optimized": merged})
        ltoir = _get_ltoir(holder, dict(mds[0]["targetoptions"]))
        times["merge"] = time.perf_counter() - t0
        return bytes(ltoir), times
