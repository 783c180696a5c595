"""CPU tests of the public `udf` API: no GPU needed (the runtime is only asked for its NO_DRIVER
error, and that only where udf._ext is built).

- the decorator: declarations, capture typing and defaults, callability, the PoC snippet;
- diagnostics at the decorator, pointing at this file's lines (both back ends);
- compile for sm_80/90/100/120 with both back ends; CUDA source and IR metrics; udfc / udf-link
  errors as exceptions carrying file, line and code;
- link, Artifact / Module save (atomic) and load, tool discovery, array conversions, errors;
- udf.Index.build without a GPU: UDF_ERROR_NO_DRIVER.
"""
from __future__ import annotations

import os
import pickle
import stat
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

import udf
from udf import _arrays, _tools

ARCHS = (80, 90, 100, 120)
HERE = Path(__file__).resolve()
WEIGHTS = np.linspace(0.5, 2.0, 16, dtype=np.float32)

CUDA_WL2 = """\
extern "C" __device__ float cuda_wl2(float x, float y, float acc, const udf_ctx_v1 *ctx) {
  float d = x - y;
  return acc + UDF_CAPTURE(ctx, weights)[ctx->dim] * d * d;
}
extern "C" __device__ float cuda_wl2_sqrt(float acc, const udf_ctx_v1 *ctx) { return sqrtf(acc); }
"""

MLIR_L1 = """\
func.func @mlir_l1(%x: f32, %y: f32, %acc: f32, %ctx: !llvm.ptr) -> f32 {
  %d = arith.subf %x, %y : f32
  %a = math.absf %d : f32
  %r = arith.addf %acc, %a : f32
  return %r : f32
}
"""

LLVM_L1 = """\
define float @llvm_l1(float %x, float %y, float %acc, ptr %ctx) {
  %d = fsub float %x, %y
  %a = call float @llvm.fabs.f32(float %d)
  %r = fadd float %acc, %a
  ret float %r
}
declare float @llvm.fabs.f32(float)
"""


def expect_line(tag: str) -> int:
    """The line of this file carrying `# expect: TAG`."""
    hits = [i for i, ln in enumerate(HERE.read_text().splitlines(), 1) if ln.rstrip().endswith(f"# expect: {tag}")]
    assert len(hits) == 1, f"marker {tag!r} found {len(hits)} times"
    return hits[0]


# ---------------------------------------------------------------------------------------------
# errors and the package without its optional parts


def test_error_classes():
    assert issubclass(udf.UdfCompileError, udf.UdfError)
    assert issubclass(udf.BackendUnavailableError, udf.UdfError)
    assert issubclass(udf.BackendUnavailableError, ImportError)
    assert issubclass(udf.UdfRuntimeError, udf.UdfError) and issubclass(udf.UdfRuntimeError, RuntimeError)
    assert issubclass(udf.UdfToolError, udf.UdfError)
    e = udf.UdfRuntimeError(2, "UDF_ERROR_NO_DRIVER", "no CUDA driver")
    assert (e.status, e.status_name, e.message) == (udf.Status.NO_DRIVER, "UDF_ERROR_NO_DRIVER", "no CUDA driver")
    assert str(e) == "UDF_ERROR_NO_DRIVER: no CUDA driver"
    again = pickle.loads(pickle.dumps(e))
    assert (again.status, again.status_name, again.message) == (2, "UDF_ERROR_NO_DRIVER", "no CUDA driver")
    assert udf.UdfRuntimeError.of(udf.Status.CAPTURE, "x").status_name == "UDF_ERROR_CAPTURE"
    assert udf.UdfRuntimeError(99, "UDF_ERROR_UNKNOWN", "?").status == 99
    b = udf.BackendUnavailableError("numba-cuda", "numba-cuda", "numba-cuda", "no module")
    assert "udf[numba-cuda]" in str(pickle.loads(pickle.dumps(b)))


def test_import_without_extension_or_back_ends():
    """`import udf` and declaring metrics need neither udf._ext nor numba; compiling says which
    extra to install, and the runtime says how to build the extension."""
    code = textwrap.dedent("""
        import sys
        for m in ("numba", "numba_cuda", "numba_cuda_mlir", "llvmlite", "udf._ext"):
            sys.modules[m] = None          # as if not installed / not built
        sys.path.insert(0, %r)
        import numpy as np, udf
        @udf.metric(captures={"w": "f32[]"})
        def m(x, y, acc, ctx):
            return acc + ctx.w[ctx.dim] * (x - y)
        try:
            m.compile([90])
        except udf.BackendUnavailableError as e:
            assert "udf[numba-cuda-mlir]" in str(e), str(e)
        else:
            raise AssertionError("compiled without a back end")
        try:
            udf.Index.build(m, np.zeros((4, 2), np.float32), n_lists=1)
        except udf.UdfError as e:
            assert "udf._ext" in str(e) and "pip install" in str(e) and "UDF_BUILD_PYTHON" in str(e), str(e)
        else:
            raise AssertionError("no error without udf._ext")
        print("ok")
    """ % str(Path(udf.__file__).parents[1]))
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "ok"


def test_ast_errors_without_back_end(tmp_path):
    """Without the back end, the decorator still runs the AST checks."""
    script = tmp_path / "user_metric.py"
    script.write_text(textwrap.dedent("""\
        import sys
        for m in ("numba", "numba_cuda", "numba_cuda_mlir", "llvmlite"):
            sys.modules[m] = None
        sys.path.insert(0, %r)
        import udf
        try:
            @udf.metric
            def m(x, y, acc, ctx):
                return acc + ctx.nope
        except udf.UdfCompileError as e:
            print(e.filename, e.lineno, e.message)
    """ % str(Path(udf.__file__).parents[1])))
    out = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == f"{script} 9 ctx has no field 'nope'", out.stdout


# ---------------------------------------------------------------------------------------------
# the decorator


def test_poc_snippet_declares_what_the_poc_did(any_backend):
    weights = WEIGHTS

    @udf.metric(order="min", initial=0.0, coarse_metric="sqeuclidean", captures={"weights": weights},
                symbol_name="demo_weighted_l2_update_f32", backend=any_backend)
    def weighted_l2_update(x, y, acc, ctx):
        """Weighted squared L2."""
        d = x - y
        return acc + ctx.weights[ctx.dim] * d * d

    m = weighted_l2_update
    assert isinstance(m, udf.PythonMetric) and isinstance(m, udf.Metric)
    assert m.symbol == "demo_weighted_l2_update_f32"
    assert (m.elem, m.acc, m.order, m.initial, m.coarse_metric) == ("f32", "f32", "min", 0.0, "l2")
    assert [str(c) for c in m.captures] == ["weights (f32[])"]
    kept = m.capture_defaults["weights"]  # a read-only copy: later changes to `weights` do not reach searches
    assert kept is not weights and np.array_equal(kept, weights) and not kept.flags.writeable
    assert m.__name__ == "weighted_l2_update" and m.__doc__ == "Weighted squared L2."
    assert m.typing.return_type == "float32" and m.backend == any_backend
    assert m.udfc_flags() == ["--symbol", "demo_weighted_l2_update_f32", "--elem", "f32", "--order", "min",
                              "--initial", "0.0", "--coarse-metric", "l2", "--capture", "weights:f32[]"]
    x = np.arange(16, dtype=np.float32)
    y = np.ones(16, np.float32)
    want = float((weights.astype(np.float64) * (x - 1.0) ** 2).sum())
    assert m.reference(x, y) == pytest.approx(want)
    assert m.reference(x, y, {"weights": np.ones(16, np.float32)}) == pytest.approx(float(((x - 1.0) ** 2).sum()))


def test_still_callable_and_bare_decorator():
    @udf.metric(check=False)
    def l1(x, y, acc, ctx):
        return acc + abs(x - y)

    assert l1(3.0, 1.0, 0.5, None) == 2.5
    assert l1.symbol == "l1" and l1.typing is None

    @udf.metric
    def plain(x, y, acc, ctx):
        return acc + x * y

    assert plain.symbol == "plain" and plain(2.0, 3.0, 1.0, None) == 7.0


def test_capture_typing(any_backend):
    caps = {
        "w": np.ones(8, np.float32),                # f32[] default
        "h": "f16[]",                               # declared only
        "k": np.arange(8, dtype=np.int32),          # i32[] default
        "u": np.full(8, 3, np.uint8),               # u8[] default
        "p": 0.5,                                   # f32 scalar default
        "q": 3,                                     # i32 scalar default
        "r": np.float32(2.0),                       # f32 scalar default
        "s": np.int32,                              # i32 scalar, declared only
    }

    @udf.metric(captures=caps, backend=any_backend)
    def mixed(x, y, acc, ctx):
        i = ctx.dim
        w = ctx.w[i] + np.float32(ctx.h[i]) + np.float32(ctx.k[i]) + np.float32(ctx.u[i])
        return acc + ctx.p * w * (x - y) + np.float32(ctx.q) + ctx.r + np.float32(ctx.s) + np.float32(ctx.n_dims)

    assert [str(c) for c in mixed.captures] == ["w (f32[])", "h (f16[])", "k (i32[])", "u (u8[])", "p (f32)",
                                                "q (i32)", "r (f32)", "s (i32)"]
    assert sorted(mixed.capture_defaults) == ["k", "p", "q", "r", "u", "w"]
    assert mixed.typing.return_type == "float32"


def test_capture_from_list():
    m = udf.metric(lambda x, y, acc, ctx: acc + ctx.w[ctx.dim] + np.float32(ctx.v[ctx.dim]),
                   captures={"w": [0.5, 1.5], "v": [1, 2]}, symbol_name="lam", check=False)
    assert [str(c) for c in m.captures] == ["w (f32[])", "v (i32[])"]
    assert m.capture_defaults["w"].dtype == np.float32 and m.capture_defaults["v"].dtype == np.int32


@pytest.mark.parametrize("captures, pattern", [
    ({"w": np.ones(4)}, r"^capture 'w': arrays of float64 are not a capture type \(float32, float16, int32, uint8\): "
                        r"convert it, e.g. captures=\{'w': value.astype\(np.float32\)\}$"),
    ({"w": np.ones(4, np.int64)}, r"arrays of int64 are not a capture type .*: convert it, e.g. "
                                  r"captures=\{'w': value.astype\(np.int32\)\}$"),
    ({"w": np.ones((4, 16), np.float32)}, r"^capture 'w': an array of shape \(4, 16\); an array capture is 1-D \(a "
                                          r"metric's: one value per dimension\): pass a 1-D array, e.g. value.ravel\(\) "
                                          r"or one row$"),
    ({"w": np.int64(3)}, r"numpy dtype int64 is not a capture type .*: pass int\(value\) for an i32 scalar or "
                         r"float\(value\) for an f32 one$"),
    ({"w": np.float64}, r"float64 is not a capture type"),
    ({"w": True}, r"bool is not a capture type"),
    ({"w": np.float16(1)}, r"f16 and u8 only as arrays"),
    ({"w": object()}, r"cannot declare a capture from a object"),
    ({"dim": "f32[]"}, r"reserved"),
    ({f"c{i}": "f32" for i in range(9)}, r"at most 8"),
])
def test_bad_capture_declarations(captures, pattern):
    with pytest.raises(ValueError, match=pattern):
        udf.metric(captures=captures, check=False, symbol_name="f")(lambda x, y, acc, ctx: acc)


@pytest.mark.parametrize("kwargs, pattern", [
    (dict(coarse_metric="manhattan"), r"coarse_metric 'manhattan' is not one of"),
    (dict(order="up"), r"order 'up'"),
    (dict(elem="f64"), r"elem 'f64'"),
    (dict(backend="cuda-python"), r"backend 'cuda-python' is not one of"),
    (dict(symbol_name="has-dash"), r"not a C identifier"),
])
def test_bad_declarations(kwargs, pattern):
    def f(x, y, acc, ctx):
        return acc

    with pytest.raises(ValueError, match=pattern):
        udf.metric(check=False, **kwargs)(f)
    with pytest.raises(ValueError, match=r"the function's name '<lambda>' cannot be .* pass symbol_name="):
        udf.metric(check=False)(lambda x, y, acc, ctx: acc)


CUDA_L1 = """\
extern "C" __device__ float cuda_l1(float x, float y, float acc, const udf_ctx_v1 *ctx) {
  return acc + fabsf(x - y);
}
"""


def test_monotone_declaration():
    """monotone=True (ABI v1 only): udfc --monotone, the one flag without a value, last."""
    @udf.metric(order="min", monotone=True, check=False)
    def mono_l1(x, y, acc, ctx):
        return acc + abs(x - y)

    assert mono_l1.monotone is True
    assert mono_l1.udfc_flags() == ["--symbol", "mono_l1", "--elem", "f32", "--order", "min", "--coarse-metric", "l2",
                                    "--monotone"]
    assert " monotone " in repr(mono_l1)

    @udf.metric(captures={"w": "f32[]"}, check=False)
    def plain_l1(x, y, acc, ctx):
        return acc + ctx.w[ctx.dim] * abs(x - y)

    assert plain_l1.monotone is False and "--monotone" not in plain_l1.udfc_flags()
    assert plain_l1.udfc_flags()[-2:] == ["--capture", "w:f32[]"]  # pairs stay pairs
    # CUDA / IR metrics pass it only when given (the source's first line may say it).
    assert "--monotone" not in udf.cuda_source_metric(CUDA_L1).udfc_flags()
    assert udf.cuda_source_metric(CUDA_L1, monotone=True, symbol_name="cuda_l1").udfc_flags() == [
        "--symbol", "cuda_l1", "--monotone"]
    assert udf.ir_metric(LLVM_L1, monotone=True).udfc_flags() == ["--monotone"]
    from udf._pycompile.spec import MetricSpec
    assert MetricSpec(symbol="f", monotone=True).udfc_flags()[-1] == "--monotone"
    assert MetricSpec(symbol="f").monotone is False


@pytest.mark.parametrize("kwargs, pattern", [
    (dict(monotone=1), r"monotone 1 is not a bool \(True or False\)"),
    (dict(monotone="yes"), r"monotone 'yes' is not a bool"),
    (dict(monotone=True, shape="vector"), r"monotone=True applies to ABI v1 metrics only"),
    (dict(monotone=True, abi="v2", shape="state", finalize=lambda s, ctx: s[0]),
     r"monotone=True applies to ABI v1 metrics only"),
])
def test_bad_monotone_declarations(kwargs, pattern):
    with pytest.raises(ValueError, match=pattern):
        udf.metric(check=False, symbol_name="f", **kwargs)(lambda x, y, acc, ctx: acc)
    if "finalize" not in kwargs:
        with pytest.raises(ValueError, match=pattern):
            udf.cuda_source_metric(CUDA_L1, **kwargs)
    # A filter has no such setting: not a keyword of @udf.filter; udfc refuses the flag.
    with pytest.raises(TypeError, match="monotone"):
        udf.filter(monotone=True)


def test_monotone_round_trip(tmp_path):
    """The manifest says "monotone": true only when declared; Artifact.info.monotone reads it back."""
    mono = udf.cuda_source_metric(CUDA_L1, monotone=True).compile([90])
    plain = udf.cuda_source_metric(CUDA_L1).compile([90])
    assert mono.manifest["monotone"] is True and mono.info.monotone is True
    assert "monotone" not in plain.manifest and plain.info.monotone is False
    assert mono.cache_key != plain.cache_key
    assert " monotone " in repr(mono) and "monotone" not in repr(plain)
    loaded = udf.Artifact.load(mono.save(tmp_path / "mono.udfa"))
    assert loaded.info.monotone is True and loaded.manifest == mono.manifest
    assert udf.Artifact.load(plain.save(tmp_path / "plain.udfa")).info.monotone is False
    # From the source's first line: the metric adopts the artifact's value.
    src = tmp_path / "first.cu"
    src.write_text("// udfc: --order min --monotone\n" + CUDA_L1)
    first = udf.cuda_source_metric(src, flags=["--flags-from-first-line"])
    assert first.monotone is False  # not known before compiling
    assert first.compile([90]).info.monotone is True and first.monotone is True
    # udfc refuses it for a filter and for an ABI v2 metric (usage errors, exit 2).
    f = udf.cuda_source_filter('extern "C" __device__ bool keep(uint32_t q, int64_t id, const udf_ctx_v1 *c)'
                               ' { return true; }\n', flags=["--monotone"])
    with pytest.raises(udf.UdfToolError) as info:
        f.compile([90])
    assert info.value.returncode == 2
    assert "--monotone does not apply to a filter (--kind filter)" in str(info.value)
    v2 = udf.cuda_source_metric('extern "C" __device__ float dist(const float *x, const float *y, uint32_t n,'
                                ' const udf_ctx_v2 *c) { return 0.0f; }\n', abi="v2", flags=["--monotone"])
    with pytest.raises(udf.UdfToolError) as info:
        v2.compile([90])
    assert info.value.returncode == 2 and "--monotone applies to ABI v1 metrics only" in str(info.value)


CUDA_CW_L2 = """\
extern "C" __device__ float cuda_cw_l2(float x, float y, float acc, const udf_ctx_v1 *ctx) {
  float d = x - y;
  return acc + UDF_CAPTURE(ctx, w)[ctx->dim] * d * d;
}
"""


def test_coarse_weights_declaration(tmp_path):
    """coarse_weights="w" names the f32 array capture whose value builds take as their coarse
    weights: udfc --coarse-weights w, the manifest's "coarse_weights", .coarse_weights, repr."""
    w = np.linspace(0.5, 2.0, 8, dtype=np.float32)

    @udf.metric(captures={"w": w, "scale": 1.0}, coarse_weights="w", check=False)
    def decl_wl2(x, y, acc, ctx):
        d = x - y
        return acc + ctx.scale * ctx.w[ctx.dim] * d * d

    assert decl_wl2.coarse_weights == "w" and " coarse_weights=w " in repr(decl_wl2)
    assert decl_wl2.udfc_flags()[-2:] == ["--coarse-weights", "w"]
    art = decl_wl2.compile([90])
    assert art.manifest["coarse_weights"] == "w" and art.info.coarse_weights == "w"
    assert udf.Artifact.load(art.save(tmp_path / "w.udfa")).info.coarse_weights == "w"
    plain = udf.metric(captures={"w": w, "scale": 1.0}, check=False)(decl_wl2.fn).compile([90])
    assert "coarse_weights" not in plain.manifest and plain.info.coarse_weights is None
    assert plain.cache_key != art.cache_key
    # CUDA and IR metrics pass it when given; captures declared only in a source's first line are
    # udfc's to check, and the metric adopts what it wrote.
    cm = udf.cuda_source_metric(CUDA_CW_L2, captures={"w": "f32[]"}, coarse_weights="w")
    assert cm.udfc_flags()[-2:] == ["--coarse-weights", "w"]
    src = tmp_path / "first.cu"
    src.write_text("// udfc: --capture w:f32[] --coarse-weights w\n" + CUDA_CW_L2)
    first = udf.cuda_source_metric(src, flags=["--flags-from-first-line"])
    assert first.coarse_weights is None  # not known before compiling
    assert first.compile([90]).info.coarse_weights == "w" and first.coarse_weights == "w"
    undeclared = udf.cuda_source_metric(CUDA_CW_L2, coarse_weights="w")  # no captures: udfc says
    with pytest.raises(udf.UdfToolError) as info:
        undeclared.compile([90])
    assert info.value.returncode == 2
    assert "--coarse-weights w: names capture 'w', which is not declared (captures: none)" in str(info.value)


@pytest.mark.parametrize("kwargs, pattern", [
    (dict(captures={"w": "f32[]"}, coarse_weights="v"), r"coarse_weights names capture 'v', which is not declared"),
    (dict(captures={"w": "i32[]"}, coarse_weights="w"), r"coarse_weights: capture w \(i32\[\]\) is not an f32 array"),
    (dict(captures={"w": "f32"}, coarse_weights="w"), r"coarse_weights: capture w \(f32\) is not an f32 array"),
    (dict(captures={"w": "f32[]"}, coarse_weights="w", coarse_metric="cosine"),
     r"coarse_weights need an l2 or inner_product coarse metric"),
    (dict(captures={"w": "f32[]"}, coarse_weights=1), r"coarse_weights 1 is not a capture's name"),
])
def test_bad_coarse_weights_declarations(kwargs, pattern):
    with pytest.raises(ValueError, match=pattern):
        udf.metric(check=False, symbol_name="f", **kwargs)(lambda x, y, acc, ctx: acc)
    with pytest.raises(ValueError, match=pattern):
        udf.cuda_source_metric(CUDA_CW_L2, **kwargs)
    with pytest.raises(TypeError, match="coarse_weights"):
        udf.filter(coarse_weights="w")


def test_declared_coarse_weights_resolve_for_a_build():
    """resolve_coarse_weights (Index.build & co. and udf.dask, before the runtime): the argument
    when given, else the declared value of the capture the metric names, else None; a named
    capture without a value here is a ValueError that says what to pass."""
    from udf._index import resolve_coarse_weights
    w = np.linspace(0.5, 2.0, 8, dtype=np.float32)
    other = np.ones(8, np.float32)
    decl = udf.cuda_source_metric(CUDA_CW_L2, captures={"w": w}, coarse_weights="w", symbol_name="cuda_cw_l2")
    art = decl.compile([90])
    np.testing.assert_array_equal(resolve_coarse_weights(None, art.info, decl), w)
    np.testing.assert_array_equal(resolve_coarse_weights(None, art.info, [art]), w)  # the artifact keeps them
    assert resolve_coarse_weights(other, art.info, decl) is other
    bare = udf.cuda_source_metric(CUDA_CW_L2, captures={"w": "f32[]"}, coarse_weights="w", symbol_name="cuda_cw_l2")
    with pytest.raises(ValueError, match=r"metric cuda_cw_l2 takes its coarse weights from capture 'w', which has no "
                                         r"declared value here: pass coarse_weights="):
        resolve_coarse_weights(None, bare.compile([90]).info, bare)
    plain = udf.cuda_source_metric(CUDA_CW_L2, captures={"w": w}, symbol_name="cuda_cw_l2")
    assert resolve_coarse_weights(None, plain.compile([90]).info, plain) is None


def test_python_monotone_metric_compiles(any_backend):
    @udf.metric(monotone=True, backend=any_backend)
    def py_mono_l1(x, y, acc, ctx):
        return acc + abs(x - y)

    art = udf.compile(py_mono_l1, archs=[90])
    assert art.manifest["monotone"] is True and art.info.monotone is True


def test_float64_use_warns_at_the_users_line(any_backend):
    with pytest.warns(udf.UdfWarning, match="np.float32") as rec:
        @udf.metric(backend=any_backend)
        def half(x, y, acc, ctx):
            return acc + 0.5 * (x - y)  # expect: float64
    w = [r for r in rec if issubclass(r.category, udf.UdfWarning)][0]
    assert (w.filename, w.lineno) == (str(HERE), expect_line("float64"))


# ---------------------------------------------------------------------------------------------
# diagnostics at the decorator: the user's file and line


def _syntax(backend):
    @udf.metric(backend=backend)
    def uses_try(x, y, acc, ctx):
        try:  # expect: syntax
            return acc + x
        except ZeroDivisionError:
            return acc


def _arity(backend):
    @udf.metric(backend=backend)
    def three(x, y, acc):  # expect: arity
        return acc + x


def _return_type(backend):
    @udf.metric(backend=backend)
    def pair(x, y, acc, ctx):
        d = x - y
        return acc + d, d  # expect: return-type


def _unknown_capture(backend):
    @udf.metric(captures={"weights": "f32[]", "p": "f32"}, backend=backend)
    def typo(x, y, acc, ctx):
        d = x - y
        return acc + ctx.wieghts[ctx.dim] * d * d  # expect: unknown-capture


def _finalize_arity(backend):
    def fin(acc):  # expect: finalize-arity
        return acc

    @udf.metric(finalize=fin, backend=backend)
    def ok(x, y, acc, ctx):
        return acc + x


DIAG_CASES = [
    ("syntax", _syntax, r"try/except is not supported"),
    ("arity", _arity, r"metric function 'three' must take 4 parameters \(x, y, acc, ctx\), it takes 3"),
    ("return-type", _return_type, r"returns a tuple"),
    ("unknown-capture", _unknown_capture, r"ctx has no field 'wieghts'; did you mean 'weights'\?"),
    ("finalize-arity", _finalize_arity, r"finalize function 'fin' must take 2 parameters"),
]


@pytest.mark.parametrize("case", DIAG_CASES, ids=[c[0] for c in DIAG_CASES])
def test_decorator_diagnostics(backend, case):
    tag, define, pattern = case
    with pytest.raises(udf.UdfCompileError) as info:
        define(backend)
    e = info.value
    assert (e.filename, e.lineno) == (str(HERE), expect_line(tag)), str(e)
    assert str(e).startswith(f"{HERE}:{expect_line(tag)}:")
    assert e.__cause__ is None  # numba's own exception is in backend_message, not chained
    import re
    assert re.search(pattern, e.message), e.message
    if tag == "unknown-capture":
        assert "declared captures: weights (f32[]), p (f32)" in str(e)


def test_check_false_defers_errors(any_backend):
    @udf.metric(check=False, backend=any_backend)
    def late(x, y, acc, ctx):
        return acc + ctx.nothing  # expect: deferred
    with pytest.raises(udf.UdfCompileError) as info:
        udf.compile(late, archs=[90])
    assert info.value.lineno == expect_line("deferred")


# ---------------------------------------------------------------------------------------------
# compile


@pytest.fixture(scope="module")
def py_wl2_by_backend():
    """{backend: (metric, artifact for ARCHS)} for each installed back end."""
    from udf._pycompile import backend_available
    out = {}
    for be in ("numba-cuda", "numba-cuda-mlir"):
        if not backend_available(be)[0]:
            continue

        def wl2_sqrt(acc, ctx):
            return np.float32(acc) ** np.float32(0.5)

        m = udf.metric(captures={"weights": WEIGHTS, "scale": 2}, finalize=wl2_sqrt,
                       symbol_name=f"py_wl2_{be.replace('-', '_')}", backend=be)(_py_wl2)
        out[be] = (m, udf.compile(m, archs=[f"sm_{a}" for a in ARCHS]))
    return out


def _py_wl2(x, y, acc, ctx):
    d = x - y
    return acc + ctx.weights[ctx.dim] * d * d * np.float32(ctx.scale)


def test_compile_all_archs(backend, py_wl2_by_backend, udf_tools):
    m, art = py_wl2_by_backend[backend]
    assert isinstance(art, udf.Artifact)
    assert art.archs == ARCHS
    assert art.symbol == m.symbol and art.info.finalize == f"{m.symbol}_finalize"
    assert [str(c) for c in art.info.captures] == ["weights (f32[])", "scale (i32)"]
    assert (art.info.elem, art.info.acc, art.info.order, art.info.coarse_metric) == ("f32", "f32", "min", "l2")
    assert art.manifest["kind"] == "udf.artifact" and art.manifest["payload_kind"] == "lto-ir"
    assert len(art.cache_key) == 64
    assert set(art.capture_defaults) == {"weights", "scale"}
    assert m.compile(ARCHS) is art  # cached per metric and archs
    assert set(m.ltoir([90, 120])) == {90, 120}


def test_compile_archs_spellings(any_backend):
    @udf.metric(backend=any_backend)
    def l2s(x, y, acc, ctx):
        d = x - y
        return acc + d * d

    art = udf.compile(l2s, archs=["90", 80, "sm_120"])
    assert art.archs == (80, 90, 120)
    with pytest.raises(ValueError, match="sm_95 is not supported"):
        udf.compile(l2s, archs=[95])
    with pytest.raises(TypeError, match=r"decorate the function with @udf.metric"):
        udf.compile(lambda x, y, acc, ctx: acc, archs=[90])


def test_cuda_source_metric(tmp_path):
    m = udf.cuda_source_metric(CUDA_WL2, symbol_name="cuda_wl2", captures={"weights": WEIGHTS},
                               finalize="cuda_wl2_sqrt", coarse_metric="sqeuclidean")
    assert m.udfc_flags() == ["--symbol", "cuda_wl2", "--finalize", "cuda_wl2_sqrt", "--coarse-metric", "l2",
                              "--capture", "weights:f32[]"]
    art = m.compile(["sm_80", "sm_90"])
    assert art.archs == (80, 90) and art.symbol == "cuda_wl2" and art.info.finalize == "cuda_wl2_sqrt"
    assert art.manifest["source"]["kind"] == "cuda"
    assert art.capture_defaults["weights"] is m.capture_defaults["weights"]
    assert np.array_equal(m.capture_defaults["weights"], WEIGHTS)
    # from a file; the symbol chosen by udfc and adopted by the metric
    src = tmp_path / "only.cu"
    src.write_text('extern "C" __device__ float only_one(float x, float y, float acc, const udf_ctx_v1 *c)'
                   ' { return acc + x * y; }\n')
    f = udf.cuda_source_metric(src, order="max", coarse_metric="inner_product")
    assert f.symbol is None
    art = f.compile([90])
    assert f.symbol == "only_one" and f.order == "max" and art.manifest["source"]["name"] == "only.cu"


def test_cuda_compile_error_is_a_tool_error():
    bad = udf.cuda_source_metric('extern "C" __device__ float bad(float x, float y, float acc,\n'
                                 '                               const udf_ctx_v1 *ctx) {\n'
                                 '  return acc + x * undefined_thing;\n}\n')
    with pytest.raises(udf.UdfToolError) as info:
        bad.compile([90])
    e = info.value
    assert (e.tool, e.returncode, e.code) == ("udfc", 1, "UDF1001")
    assert (e.filename, e.lineno, e.col) == ("<string>", 3, 20)
    assert 'identifier "undefined_thing" is undefined' in e.message
    assert '<string>:3:20: error: identifier "undefined_thing" is undefined [UDF1001]' in str(e)
    assert str(e).splitlines()[0] == "compiling CUDA metric for sm_90: udfc failed (exit 1)"


def test_undeclared_capture_in_cuda_is_reported():
    m = udf.cuda_source_metric(CUDA_WL2, symbol_name="cuda_wl2", finalize="cuda_wl2_sqrt")
    with pytest.raises(udf.UdfToolError) as info:
        m.compile([90])
    assert info.value.code == "UDF1013" and info.value.lineno == 3
    assert "--capture weights" in str(info.value)


def test_ir_metrics(tmp_path):
    m = udf.ir_metric(MLIR_L1)
    assert m.ir_kind == "mlir"
    art = m.compile([90])
    assert art.symbol == "mlir_l1" and art.manifest["source"]["kind"] == "mlir"
    path = tmp_path / "l1.ll"
    path.write_text(LLVM_L1)
    for arg in (path, str(path)):
        m = udf.ir_metric(arg, order="min")
        assert m.ir_kind == "llvm" and m.path == path
    art = m.compile([80, 100])
    assert art.archs == (80, 100) and art.symbol == "llvm_l1"
    assert udf.ir_metric(LLVM_L1).ir_kind == "llvm"
    with pytest.raises(ValueError, match="cannot tell"):
        udf.ir_metric("just some text\nwith two lines")
    with pytest.raises(ValueError, match="kind 'cuda' is not one of"):
        udf.ir_metric(MLIR_L1, kind="cuda")


def test_ir_error_points_at_the_ir_line():
    m = udf.ir_metric(LLVM_L1.replace("fadd float %acc, %a", "fadd float %acc, %nope"), symbol_name="llvm_l1")
    with pytest.raises(udf.UdfToolError) as info:
        m.compile([90])
    assert info.value.filename == "llvm_l1.ll" and info.value.lineno == 4, str(info.value)


def test_builtin_metrics():
    l2 = udf.builtin_metric("sqeuclidean")
    assert isinstance(l2, udf.Artifact) and l2.symbol == "udf_builtin_l2"
    assert udf.builtin_metric("l2") is l2
    assert udf.builtin_metric("inner_product").info.order == "max"
    # kernels/metrics/l2.cu's first line declares it monotone; inner product and cosine are not.
    assert l2.info.monotone is True
    assert not udf.builtin_metric("inner_product").info.monotone and not udf.builtin_metric("cosine").info.monotone
    u8 = udf.builtin_metric("euclidean", "u8")
    assert isinstance(u8, udf.CudaMetric) and u8.symbol == "udf_builtin_euclidean_u8"
    assert u8.monotone is True and not udf.builtin_metric("inner_product", "f16").monotone
    art = u8.compile([90])
    assert (art.info.elem, art.info.acc, art.info.finalize) == ("u8", "i32", "udf_builtin_euclidean_u8_finalize")
    assert art.info.monotone is True
    with pytest.raises(ValueError, match="not a built-in metric"):
        udf.builtin_metric("hamming")


# ---------------------------------------------------------------------------------------------
# link, save, load


@pytest.fixture(scope="module")
def cuda_wl2():
    return udf.cuda_source_metric(CUDA_WL2, symbol_name="cuda_wl2", captures={"weights": WEIGHTS},
                                  finalize="cuda_wl2_sqrt")


def test_link_several(py_wl2_by_backend, cuda_wl2, tmp_path):
    items = [m for m, _art in py_wl2_by_backend.values()]
    if not items:
        pytest.skip("no Python back end installed")
    l2_path = tmp_path / "l2.udfa"
    udf.builtin_metric("l2").save(l2_path)
    mod = udf.link([*items, cuda_wl2, l2_path], archs=["sm_90"])
    assert isinstance(mod, udf.Module) and mod.archs == (90,)
    assert mod.symbols == (*[m.symbol for m in items], "cuda_wl2", "udf_builtin_l2")
    assert mod.metric("cuda_wl2").finalize == "cuda_wl2_sqrt"
    assert mod.metric("cuda_wl2").max_k == 1024
    assert mod.capture_defaults("cuda_wl2")["weights"] is cuda_wl2.capture_defaults["weights"]
    assert mod.capture_defaults("udf_builtin_l2") == {}
    with pytest.raises(ValueError, match="choose one with metric=SYMBOL"):
        mod.metric()
    with pytest.raises(ValueError, match="has no metric 'nope'"):
        mod.metric("nope")
    # linking again is an on-disk cache hit: same bytes
    assert udf.link([*items, cuda_wl2, l2_path], archs=[90]).data == mod.data


def test_link_errors():
    a = udf.cuda_source_metric('extern "C" __device__ float dup(float x, float y, float acc, const udf_ctx_v1 *c)'
                               ' { return acc + x; }')
    b = udf.cuda_source_metric('extern "C" __device__ float dup(float x, float y, float acc, const udf_ctx_v1 *c)'
                               ' { return acc + y; }')
    with pytest.raises(udf.UdfToolError) as info:
        udf.link([a, b], archs=[90])
    e = info.value
    assert (e.tool, e.code) == ("udf-link", "UDF2002") and "duplicate symbol: dup" in e.message
    assert ">>> defined in" in str(e)
    with pytest.raises(TypeError, match="expected metrics, Artifacts or .udfa paths"):
        udf.link([42], archs=[90])
    with pytest.raises(ValueError, match="nothing to link"):
        udf.link([], archs=[90])


def test_save_and_load(cuda_wl2, tmp_path):
    art = cuda_wl2.compile([90])
    path = tmp_path / "wl2.udfa"
    assert art.save(path) == path
    loaded = udf.Artifact.load(path)
    assert loaded == art and loaded.manifest == art.manifest and loaded.name == "wl2.udfa"
    assert udf.Artifact.from_bytes(art.data).manifest == art.manifest
    mod = udf.link([path], archs=[90])
    mpath = tmp_path / "wl2.udfm"
    mod.save(mpath)
    again = udf.load_module(mpath)
    assert again.data == mod.data and again.metrics == mod.metrics
    assert stat.S_IMODE(mpath.stat().st_mode) == 0o666 & ~_umask()
    with pytest.raises(ValueError, match="a 'udf.artifact', not a 'udf.module'"):
        udf.Module.load(path)
    garbage = tmp_path / "garbage.udfm"
    garbage.write_bytes(b"not a module")
    with pytest.raises(udf.UdfToolError) as info:
        udf.load_module(garbage)
    assert info.value.code == "UDF3003"


def _umask() -> int:
    old = os.umask(0)
    os.umask(old)
    return old


def test_save_is_atomic(cuda_wl2, tmp_path, monkeypatch):
    art = cuda_wl2.compile([90])
    path = tmp_path / "keep.udfa"
    path.write_bytes(b"old contents")

    def broken_replace(src, dst):
        raise OSError("disk full (simulated)")

    monkeypatch.setattr(os, "replace", broken_replace)
    with pytest.raises(OSError, match="simulated"):
        art.save(path)
    assert path.read_bytes() == b"old contents"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["keep.udfa"]  # no temp file left
    monkeypatch.undo()
    art.save(path)
    assert path.read_bytes() == art.data


# ---------------------------------------------------------------------------------------------
# tools


def _fake_tool(folder: Path, name: str) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    p = folder / name
    p.write_text("#!/bin/sh\nexit 0\n")
    p.chmod(0o755)
    return p


def test_tool_discovery_order(tmp_path, monkeypatch):
    pkg = tmp_path / "site-packages" / "udf"
    monkeypatch.setattr(_tools, "PACKAGE_DIR", pkg)
    monkeypatch.setenv("PATH", str(tmp_path / "path"))
    monkeypatch.delenv("UDF_BIN_DIR", raising=False)
    with pytest.raises(udf.UdfToolError, match=r"udfc: not found; looked in: .*site-packages/udf/bin/udfc"):
        _tools.tool_path("udfc")
    on_path = _fake_tool(tmp_path / "path", "udfc")
    assert _tools.tool_path("udfc") == on_path                            # 4. PATH
    build_tree = _fake_tool(tmp_path / "bin", "udfc")                     # site-packages/udf/../../bin
    assert _tools.tool_path("udfc") == build_tree                         # 3. the build tree
    wheel = _fake_tool(pkg / "bin", "udfc")
    assert _tools.tool_path("udfc") == wheel                              # 2. the wheel
    env = _fake_tool(tmp_path / "env", "udfc")
    monkeypatch.setenv("UDF_BIN_DIR", str(tmp_path / "env"))
    assert _tools.tool_path("udfc") == env                                # 1. $UDF_BIN_DIR
    monkeypatch.setenv("UDF_BIN_DIR", str(tmp_path / "empty"))
    with pytest.raises(udf.UdfToolError, match=r"not found in \$UDF_BIN_DIR="):
        _tools.tool_path("udfc")


def test_tools_found_and_run(udf_tools):
    udfc, link, pack = udf_tools
    assert udf.tool_path("udfc") == udfc
    assert (_tools.metrics_dir() / "l2.udfa").is_file()
    diags, other = _tools.parse_diagnostics('{"tool":"udfc","severity":"warning","code":"UDF1002","file":"a.cu",'
                                            '"line":1,"column":2,"message":"m","notes":["n"]}\nplain text')
    assert [d.format() for d in diags] == ["a.cu:1:2: warning: m [UDF1002]\nnote: n"] and other == "plain text"
    with pytest.raises(udf.UdfToolError) as info:
        _tools.run_tool("udfc", ["--arch", "sm_99", "-e", "x", "-o", "x.udfa"], what="probing")
    assert info.value.returncode == 2 and info.value.code == "UDF0002"
    assert "usage error (exit 2)" in str(info.value)


# ---------------------------------------------------------------------------------------------
# arrays (NumPy here; CuPy / PyTorch in test_gpu.py)


def test_array_conversions():
    a = _arrays.as_array([[1, 2], [3, 4]], what="queries", dtype="f32")
    assert a.value.dtype == np.float32 and a.lib == "numpy" and a.device == -1 and a.shape == (2, 2)
    a = _arrays.as_array(np.zeros((3, 4), np.uint8), what="data", dtype="f32")  # safe: converted
    assert a.value.dtype == np.float32
    a = _arrays.as_array(np.zeros(5, np.int32), what="ids", dtype="i64", ndims=(1,))
    assert a.value.dtype == np.int64
    strided = np.arange(24, dtype=np.float32).reshape(4, 6)[:, ::2]
    a = _arrays.as_array(strided, what="data", dtype="f32")
    assert a.value.flags.c_contiguous and np.array_equal(a.value, strided)
    rows = np.arange(24, dtype=np.float32).reshape(4, 6)[:, :3]  # unit stride, larger row stride: as is
    assert _arrays.as_array(rows, what="data", dtype="f32").value is rows
    with pytest.raises(TypeError, match=r"queries: float64 values cannot be used as float32 .*queries.astype"):
        _arrays.as_array(np.zeros((2, 2)), what="queries", dtype="f32")
    with pytest.raises(TypeError, match=r"int64 values cannot be used as uint8"):
        _arrays.as_array(np.zeros((2, 2), np.int64), what="data", dtype="u8")
    with pytest.raises(TypeError, match=r"non-integer values for uint8"):
        _arrays.as_array([[0.5, 1.0]], what="data", dtype="u8")
    with pytest.raises(ValueError, match=r"out of the uint8 range"):
        _arrays.as_array([[300, 1]], what="data", dtype="u8")
    with pytest.raises(ValueError, match=r"expected a 1-D or 2-D array, got shape \(2, 2, 2\)"):
        _arrays.as_array(np.zeros((2, 2, 2), np.float32), what="data", dtype="f32")
    with pytest.raises(TypeError, match=r"expected numbers"):
        _arrays.as_array(["a", "b"], what="data", dtype="f32")


def test_producer_stream_falls_back_to_a_synchronize():
    """producer_stream names a stream for the runtime to wait on only when every device input is of
    one library, PyTorch or CuPy, on the call's device; anything else (host arrays alone, two
    libraries, another device, a __cuda_array_interface__ stream) leaves it to synchronize().  The
    runtime's own device copies (lib "udf") need neither.  (The streams it names: the GPU tests.)"""
    def arr(lib, device, stream=None):
        return _arrays.Arr(value=None, arg=None, lib=lib, device=device, dtype="float32", shape=(2, 2), stream=stream)
    host = arr("numpy", -1)
    assert _arrays.producer_stream([], 0) is None
    assert _arrays.producer_stream([host, arr("udf", 0)], 0) is None  # nothing to wait for
    assert _arrays.producer_stream([arr("cai", 0, stream=7)], 0) is None
    assert _arrays.producer_stream([arr("torch", 1)], 0) is None  # on another device
    assert _arrays.producer_stream([arr("cupy", 0), arr("cupy", 1)], 0) is None
    assert _arrays.producer_stream([arr("torch", 0), arr("cupy", 0)], 0) is None
    assert _arrays.producer_stream([arr("cupy", 0), arr("torch", 0)], 0) is None
    assert _arrays.producer_stream([arr("cupy", 0), arr("cai", 0)], 0) is None


def test_resolved_modules_are_keyed_by_what_was_given():
    """_device_module's cache key: the given objects' ids and the device; None (never cached) for
    paths and names, whose files may change between calls."""
    from udf import _index
    a, b = object(), object()
    assert _index._resolved_key(a, 0) == _index._resolved_key(a, 0)
    assert _index._resolved_key(a, 0) != _index._resolved_key(a, 1)
    assert _index._resolved_key(a, 0) != _index._resolved_key([a], 0)  # a list links its items together
    assert _index._resolved_key([a, b], 0) == _index._resolved_key([a, b], 0)
    assert _index._resolved_key([a, b], 0) != _index._resolved_key([b, a], 0)
    assert _index._resolved_key("l2", 0) is None
    assert _index._resolved_key(Path("m.udfm"), 0) is None
    assert _index._resolved_key([a, "f.udfa"], 0) is None


def test_scalar_capture_values():
    assert _arrays.scalar_value(np.float32(0.5), what="p", integer=False) == 0.5
    assert _arrays.scalar_value(3.0, what="q", integer=True) == 3
    assert _arrays.scalar_value(np.array([[7]], np.int32), what="q", integer=True) == 7
    with pytest.raises(TypeError, match="not an integer"):
        _arrays.scalar_value(2.5, what="q", integer=True)
    with pytest.raises(ValueError, match="outside the i32 range"):
        _arrays.scalar_value(2**40, what="q", integer=True)
    with pytest.raises(ValueError, match="needs one value"):
        _arrays.scalar_value(np.ones(3), what="p", integer=False)


# Capture values are bound by udf._index.bind_captures before the runtime is called (at every
# search), so what it says about a wrong value is checked here, without a GPU.

_BIND_CAPS = {"weights": "f32[]", "p": 2, "s": 1.0}
_W16 = np.ones(16, np.float32)


@pytest.mark.parametrize("given, message", [
    ({"weights": np.ones(16, np.float64)},
     "capture 'weights' of metric wb is f32[] (one float32 per dimension: 16), got a float64 array: convert it, e.g. "
     "captures={'weights': value.astype(np.float32)}"),
    ({"weights": np.ones(16, np.int64)},
     "capture 'weights' of metric wb is f32[] (one float32 per dimension: 16), got an int64 array: convert it, e.g. "
     "captures={'weights': value.astype(np.float32)}"),
    ({"weights": np.ones((4, 4), np.float32)},
     "capture 'weights' of metric wb is f32[] (one float32 per dimension: 16), got an array of shape (4, 4): pass a "
     "1-D array of one value per dimension (e.g. value.ravel(), if it holds them)"),
    ({"weights": np.ones(8, np.float32)},
     "capture 'weights' of metric wb is f32[] (one float32 per dimension: 16), got 8 values (shape (8,)): pass 16 "
     "values, one per dimension of the index"),
    ({"weights": 1.5},
     "capture 'weights' of metric wb is f32[] (one float32 per dimension: 16), got 1.5 (a float): pass an array of "
     "one value per dimension"),
    ({"weights": _W16, "p": 2.5},
     "capture 'p' of metric wb is an i32 scalar, got 2.5 (a float): pass an int; or, for a fractional value, declare "
     "the capture f32 (captures={'p': 'f32'} or a float default such as 2.0: an int default such as 2 declares an "
     "i32)"),
    ({"weights": _W16, "s": np.ones(3, np.float32)},
     "capture 's' of metric wb is an f32 scalar, got an array of shape (3,): pass one number (a scalar capture holds "
     "one value)"),
    ({"weights": _W16, "s": [1.0, 2.0]},
     "capture 's' of metric wb is an f32 scalar, got a list of 2 values: pass one number (a scalar capture holds one "
     "value)"),
    ({"weights": _W16, "s": "2"}, "capture 's' of metric wb is an f32 scalar, got a str: pass a number"),
    ({"weights": _W16, "p": True}, "capture 'p' of metric wb is an i32 scalar, got True (a bool): pass a number"),
    ({"weights": _W16, "nope": 1},
     "capture 'nope' is not declared by metric wb (declared: weights (f32[]), p (i32), s (f32))"),
])
def test_capture_values_are_checked_before_the_runtime(given, message):
    """A capture of the wrong dtype, shape or kind at search time: UDF_ERROR_CAPTURE naming the
    capture, its declared type, what was given and the fix (one line), before any driver call."""
    from udf._index import bind_captures
    m = udf.metric(lambda x, y, acc, ctx: acc, captures=_BIND_CAPS, symbol_name="wb", check=False)
    with pytest.raises(udf.UdfRuntimeError) as info:
        bind_captures("metric wb", m.captures, given, m.capture_defaults, per_dim=True, device=None, dim=16)
    assert info.value.status == udf.Status.CAPTURE
    assert info.value.message == message
    assert str(info.value) == "UDF_ERROR_CAPTURE: " + message


def test_capture_values_that_bind():
    """Lossless values bind: safe casts, lists, a 1 x dim row, an int for an f32 scalar, a whole
    float for an i32 one; a filter's arrays are 1-D of any length >= 1."""
    from udf._index import bind_captures
    m = udf.metric(lambda x, y, acc, ctx: acc, captures=_BIND_CAPS, symbol_name="wb", check=False)
    for w in (_W16, np.ones(16, np.float16), np.ones(16, np.uint8), [1] * 16, _W16.reshape(1, 16)):
        bound, arrays = bind_captures("metric wb", m.captures, {"weights": w, "p": 3.0, "s": 2}, m.capture_defaults,
                                      per_dim=True, dim=16)
        assert bound["p"] == 3 and isinstance(bound["p"], int) and bound["s"] == 2.0 and isinstance(bound["s"], float)
        assert arrays[0].value.dtype == np.float32 and arrays[0].value.size == 16
    spec = udf.CaptureSpec("table", "f32", True)
    bound, _ = bind_captures("filter f", (spec,), {"table": np.ones(3, np.float32)}, {}, per_dim=False)
    assert "table" in bound
    for bad, text in ((np.ones((2, 2), np.float32), "got an array of shape (2, 2): expected a 1-D array"),
                      (np.ones(0, np.float32), "got an empty array: a filter's array captures need at least one"),
                      (np.ones(3), "got a float64 array: convert it, e.g. filter_captures={'table': "
                                   "value.astype(np.float32)}")):
        with pytest.raises(udf.UdfRuntimeError) as info:
            bind_captures("filter f", (spec,), {"table": bad}, {}, per_dim=False)
        assert info.value.message.startswith("capture 'table' of filter f is f32[] (a 1-D array of float32), " + text)


class _NoSearchHandle:
    """An index handle for Index's Python layer alone: any call into the runtime fails the test."""

    def info(self):
        return {"dim": 16, "n_lists": 4, "size": 100, "metric": "wz"}

    def search(self, *args, **kwargs):
        raise AssertionError("the runtime was called")


def test_zero_queries_return_empty_results_without_the_runtime():
    """search() of zero queries returns 0 x k results (float32 distances, int64 ids, the
    queries' library) without calling the runtime (udf_index_search takes at least one row);
    the arguments are still checked as the runtime would."""
    from types import SimpleNamespace
    info = udf.MetricInfo(symbol="wz", elem="f32", acc="f32", order="min", coarse_metric="l2", initial=0.0,
                          finalize=None, captures=(udf.CaptureSpec("w", "f32", True),), source_name="wz",
                          cache_key="", max_k=1024)
    index = udf.Index(_NoSearchHandle(), SimpleNamespace(metric=lambda symbol: info), 0, "wz", {"w": _W16})
    queries = np.zeros((5, 16), np.float32)
    for q in (queries[:0], np.zeros((0, 16), np.float16), np.empty((0, 16), np.float32)):
        dist, ids = index.search(q, k=5, n_probes=2)
        assert isinstance(dist, np.ndarray) and isinstance(ids, np.ndarray)
        assert dist.shape == ids.shape == (0, 5) and dist.dtype == np.float32 and ids.dtype == np.int64
    for kwargs, message in ((dict(k=0), "k = 0: k must be at least 1"),
                            (dict(k=2000), "k = 2000 exceeds the largest k of metric wz (1024)"),
                            (dict(n_probes=5), "n_probes = 5 must be in 1 .. n_lists (4)"),
                            (dict(captures={"w": np.ones(16)}), "capture 'w' of metric wz is f32[]")):
        with pytest.raises(udf.UdfRuntimeError) as e:
            index.search(queries[:0], **{"k": 5, "n_probes": 2, **kwargs})
        assert e.value.message.startswith(message), e.value.message
    with pytest.raises(udf.UdfRuntimeError) as e:
        index.search(np.zeros((0, 17), np.float32), k=5, n_probes=2)
    assert e.value.message == "queries have dimension 17; the index has 16"


# ---------------------------------------------------------------------------------------------
# the runtime without a GPU


def _no_driver():
    """Skips (with the reason) where libcuda.so.1 loads: the no-driver path is not reachable there."""
    import ctypes
    try:
        ctypes.CDLL("libcuda.so.1")
    except OSError:
        return
    pytest.skip("libcuda.so.1 loads here (an NVIDIA driver is installed): the no-driver message is checked on a "
                "machine without one")


NO_DRIVER_LINE1 = ("UDF_ERROR_NO_DRIVER: the NVIDIA driver (libcuda.so.1) was not found: building and searching "
                   "indexes need it (udf.compile and udf.link do not)")
NO_DRIVER_NOTE = "note: install the NVIDIA driver on a machine with an NVIDIA GPU and run there (dlopen: "


def test_index_build_without_gpu_is_no_driver(ext, any_backend):
    """`pip install` on a machine with no NVIDIA driver: `import udf` and udf.compile work, and
    everything that needs the driver raises one udf.NoDriverError (a UdfRuntimeError, so a
    RuntimeError) whose message is two lines: what is missing, that compiling and linking work
    without it, and what to do -- with no exception chained to it.  Runs on a machine without
    libcuda.so.1 (the CPU machine); skipped, with the reason, where the driver loads.
    test/gpu/wheel_driver_only.sh keeps the driver visible, so it does not cover this; the wheel
    installed on the CPU machine is checked the same way by test/package/wheel_test.py."""
    _no_driver()

    @udf.metric(captures={"weights": WEIGHTS}, backend=any_backend)
    def wl2_nodrv(x, y, acc, ctx):
        d = x - y
        return acc + ctx.weights[ctx.dim] * d * d

    calls = {
        "Index.build": lambda: udf.Index.build(wl2_nodrv, np.zeros((64, 16), np.float32), n_lists=4),
        "Index.build_chunked": lambda: udf.Index.build_chunked(wl2_nodrv, [np.zeros((64, 16), np.float32)], n_lists=4),
        "Index.load": lambda: udf.Index.load("nowhere.udfi", wl2_nodrv),
        "device_info": lambda: udf.device_info(),
        "ivf_flat.build": lambda: udf.ivf_flat.build(udf.ivf_flat.IndexParams(n_lists=4), np.zeros((64, 16), np.float32)),
    }
    for what, call in calls.items():
        with pytest.raises(udf.NoDriverError) as info:
            call()
        e = info.value
        assert isinstance(e, udf.UdfRuntimeError) and isinstance(e, RuntimeError), what
        assert (e.status, e.status_name) == (udf.Status.NO_DRIVER, "UDF_ERROR_NO_DRIVER"), what
        lines = str(e).splitlines()
        assert len(lines) == 2 and lines[0] == NO_DRIVER_LINE1, (what, str(e))
        assert lines[1].startswith(NO_DRIVER_NOTE) and lines[1].endswith(")") and "libcuda.so.1" in lines[1][len(
            NO_DRIVER_NOTE):], (what, lines[1])
        assert e.__cause__ is None and e.__suppress_context__, what  # no chain to print before it
        assert pickle.loads(pickle.dumps(e)).message == e.message
    art = udf.compile(wl2_nodrv, archs=["sm_90"])  # what the message promises
    assert art.archs == (90,)


def test_no_driver_messages():
    """NoDriverError's two lines for each of the runtime's NO_DRIVER cases (any machine)."""
    e = udf.NoDriverError.from_runtime("no CUDA driver: cannot load libcuda.so.1 (libcuda.so.1: cannot open shared "
                                       "object file: No such file or directory)")
    assert str(e) == (NO_DRIVER_LINE1 + "\n" + NO_DRIVER_NOTE + "libcuda.so.1: cannot open shared object file: No "
                      "such file or directory)")
    e = udf.NoDriverError.from_runtime("the CUDA driver libcuda.so.1 is too old: it lacks cuMemAllocAsync (CUDA 12.0 "
                                       "or newer needed)")
    assert str(e) == ("UDF_ERROR_NO_DRIVER: the NVIDIA driver (libcuda.so.1) cannot be used (the CUDA driver "
                      "libcuda.so.1 is too old: it lacks cuMemAllocAsync (CUDA 12.0 or newer needed)): building and "
                      "searching indexes need it (udf.compile and udf.link do not)\n"
                      "note: update the NVIDIA driver, and check that this machine's GPU is visible (nvidia-smi)")
    e = udf.NoDriverError.from_runtime("cuInit failed: CUDA_ERROR_UNKNOWN")
    assert str(e).splitlines()[0].startswith("UDF_ERROR_NO_DRIVER: the NVIDIA driver (libcuda.so.1) cannot be used "
                                             "(cuInit failed: CUDA_ERROR_UNKNOWN)")
    assert isinstance(e, udf.UdfRuntimeError) and e.status == udf.Status.NO_DRIVER


# Several GPUs (devices=[...]): the argument checks come before any compile, link or runtime, so
# they run (and say the same) without a GPU, the extension or the tools.

@pytest.mark.parametrize("kwargs, error, pattern", [
    (dict(device=0, devices=[0, 1]), ValueError, r"device=0 and devices=\[0, 1\] exclude each other"),
    (dict(device=1, devices=[1]), ValueError, r"exclude each other: pass device=N for one GPU or devices="),
    (dict(devices=[]), ValueError, r"devices=\[\] is empty: pass at least one CUDA device ordinal"),
    (dict(devices=()), ValueError, r"is empty"),
    (dict(devices=[0, "1"]), TypeError, r"devices\[1\] = '1' is not a CUDA device ordinal \(an int\), got str"),
    (dict(devices=[0, 1.0]), TypeError, r"devices\[1\] = 1.0 is not a CUDA device ordinal"),
    (dict(devices=[True]), TypeError, r"devices\[0\] = True is not a CUDA device ordinal"),
    (dict(devices=[None]), TypeError, r"devices\[0\] = None"),
    (dict(devices=0), TypeError, r"devices must be a list of CUDA device ordinals \(e.g. \[0, 1\]\), got int"),
    (dict(devices="0,1"), TypeError, r"devices must be a list .* got str"),
    (dict(devices=[0, -1]), ValueError, r"devices\[1\] = -1 is not a CUDA device ordinal \(>= 0\)"),
])
def test_index_devices_argument_errors(kwargs, error, pattern, tmp_path):
    from udf import _runtime
    runtimes = dict(_runtime._runtimes)
    metric = udf.cuda_source_metric(CUDA_WL2, symbol_name="cuda_wl2", captures={"weights": WEIGHTS})
    with pytest.raises(error, match=pattern):
        udf.Index.build(metric, np.zeros((64, 16), np.float32), n_lists=4, **kwargs)
    with pytest.raises(error, match=pattern):
        udf.Index.load(tmp_path / "missing.udfi", metric, **kwargs)
    assert _runtime._runtimes == runtimes  # refused before any runtime was made


@pytest.mark.parametrize("layout", ["rows", "Vectors", "LISTS", "", "default", "by_lists", 0, 1, 2, None,
                                    b"lists", ["lists"]])
def test_index_shard_layout_argument_errors(layout, tmp_path):
    """shard_layout= is "vectors" or "lists"; anything else is a ValueError naming the parameter,
    before any compile, link or runtime (so without a GPU too), with or without devices=."""
    from udf import _runtime
    runtimes = dict(_runtime._runtimes)
    metric = udf.cuda_source_metric(CUDA_WL2, symbol_name="cuda_wl2", captures={"weights": WEIGHTS})
    pattern = r"shard_layout=.* is not a shard layout: pass \"vectors\" \(the default: .*\) or \"lists\""
    for devices in ([0, 1], None):
        with pytest.raises(ValueError, match=pattern):
            udf.Index.build(metric, np.zeros((64, 16), np.float32), n_lists=4, devices=devices, shard_layout=layout)
        with pytest.raises(ValueError, match=pattern):
            udf.Index.load(tmp_path / "missing.udfi", metric, devices=devices, shard_layout=layout)
        with pytest.raises(ValueError, match=pattern):
            udf.Index.build_chunked(metric, [np.zeros((64, 16), np.float32)], n_lists=4, devices=devices,
                                    shard_layout=layout)
    assert _runtime._runtimes == runtimes  # refused before any runtime was made


def test_index_shard_layout_names_and_default():
    import inspect
    from udf._index import SHARD_LAYOUTS, _shard_layout_arg
    assert SHARD_LAYOUTS == ("vectors", "lists")
    assert [_shard_layout_arg(x) for x in ("vectors", "lists")] == ["vectors", "lists"]
    with pytest.raises(ValueError, match=r"shard_layout='rows'"):
        _shard_layout_arg("rows")
    for f in (udf.Index.build, udf.Index.build_chunked, udf.Index.load):
        assert inspect.signature(f).parameters["shard_layout"].default == "vectors", f.__name__
    assert isinstance(udf.Index.__dict__["shard_layout"], property)


def test_ext_sharded_index_arguments(ext):
    """udf._ext's sharded constructors check their module list before the runtime (no GPU needed),
    and take shard_layout= (checked after the modules: "vectors" or "lists")."""
    data = np.zeros((8, 4), np.float32)
    for call in (lambda mods: ext.Index.build_sharded(mods, "m", data),
                 lambda mods: ext.Index.load_sharded(mods, "x.udfi"),
                 lambda mods: ext.Index.build_sharded(mods, "m", data, shard_layout="lists"),
                 lambda mods: ext.Index.load_sharded(mods, "x.udfi", shard_layout="lists"),
                 lambda mods: ext.Index.build_chunked(mods, "m", 1, lambda i: (data, None), shard_layout="vectors")):
        with pytest.raises(udf.UdfRuntimeError) as info:
            call([])
        assert info.value.status == udf.Status.INVALID_ARGUMENT and "modules is empty" in info.value.message
        with pytest.raises(TypeError, match=r"modules\[0\]: expected a udf._ext.Module, got int"):
            call([1])
    assert {"shards", "shard_transport"} <= set(dir(ext.Index))


def test_index_devices_accepts_ordinals_of_any_int_type():
    from udf._index import _devices_arg
    assert _devices_arg(None, None) is None
    assert _devices_arg(3, None) is None  # device= alone: one GPU
    assert _devices_arg(None, [0, 0]) == [0, 0]
    assert _devices_arg(None, (np.int64(1), np.int32(0))) == [1, 0]
    assert type(_devices_arg(None, [np.int64(2)])[0]) is int


def test_sharded_index_finds_the_nccl_wheel(monkeypatch, tmp_path):
    """A sharded build or load points $UDF_NCCL_LIBRARY at the nvidia-nccl wheel's library when
    the wheel is there and the variable names nothing; a library the user names stays."""
    import importlib.util
    from types import SimpleNamespace
    from udf._index import _nccl_from_wheel
    lib = tmp_path / "nvidia" / "nccl" / "lib" / "libnccl.so.2"
    lib.parent.mkdir(parents=True)
    lib.write_bytes(b"")
    real = importlib.util.find_spec

    def find_spec(name, *a, **k):
        if name == "nvidia.nccl":
            return SimpleNamespace(submodule_search_locations=[str(tmp_path / "nvidia" / "nccl")])
        return real(name, *a, **k)

    monkeypatch.setattr(importlib.util, "find_spec", find_spec)
    monkeypatch.delenv("UDF_NCCL_LIBRARY", raising=False)
    _nccl_from_wheel()
    assert os.environ["UDF_NCCL_LIBRARY"] == str(lib)
    monkeypatch.setenv("UDF_NCCL_LIBRARY", "/opt/mine/libnccl.so.2")
    _nccl_from_wheel()
    assert os.environ["UDF_NCCL_LIBRARY"] == "/opt/mine/libnccl.so.2"
    # No wheel: nothing set.
    monkeypatch.delenv("UDF_NCCL_LIBRARY")
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a, **k: None if name == "nvidia.nccl" else real(name))
    _nccl_from_wheel()
    assert "UDF_NCCL_LIBRARY" not in os.environ


def test_ivf_flat_facade_api():
    from udf import ivf_flat
    assert ivf_flat.metric is udf.metric and ivf_flat.cuda_source_metric is udf.cuda_source_metric
    p = ivf_flat.IndexParams(n_lists=64, metric="sqeuclidean", kmeans_n_iters=10)
    assert (p.n_lists, p.metric, p.kmeans_n_iters) == (64, "sqeuclidean", 10)
    s = ivf_flat.SearchParams(n_probes=1)
    assert s.n_probes == 1 and s.metric is None
    assert ivf_flat.Index is udf.Index


def test_default_archs_are_the_gpus_or_all(monkeypatch):
    """archs=None: the GPU's arch when there is one, else udf.DEFAULT_ARCHS; "all": DEFAULT_ARCHS."""
    from udf import _artifact
    monkeypatch.setattr(_artifact, "_gpu_archs", (90,))
    assert _artifact.archs_or_default(None) == (90,)
    assert _artifact.archs_or_default("all") == udf.DEFAULT_ARCHS
    assert _artifact.archs_or_default(["sm_100", 80]) == (80, 100)
    monkeypatch.setattr(_artifact, "_gpu_archs", None)
    if not udf._runtime._runtimes:  # no GPU here (CPU tests): every shipped arch
        import conftest
        if not conftest.gpu_status()[0]:
            assert _artifact.archs_or_default(None) == udf.DEFAULT_ARCHS


def test_coarse_weights_argument_is_checked_before_the_runtime():
    """build(coarse_weights=...) as _ext takes it: dim float32 from any real host array (or a
    device array's host copy); a wrong shape or dtype names the argument (the values are the
    runtime's to check: udf_index_build names the element)."""
    from udf import _index
    w = np.array([0.5, 2, 0], dtype=np.float64)
    assert _index._coarse_weights_arg(None, 3) is None
    assert np.frombuffer(_index._coarse_weights_arg(w, 3), np.float32).tolist() == [0.5, 2.0, 0.0]
    assert np.frombuffer(_index._coarse_weights_arg([1, 2, 3], 3), np.float32).tolist() == [1.0, 2.0, 3.0]
    with pytest.raises(ValueError, match="coarse_weights: 3 values; the data has dim 4"):
        _index._coarse_weights_arg(w, 4)
    with pytest.raises(ValueError, match="coarse_weights: shape"):
        _index._coarse_weights_arg(np.ones((2, 3)), 3)
    with pytest.raises(TypeError, match="coarse_weights: dtype"):
        _index._coarse_weights_arg(np.array(["a", "b", "c"]), 3)
