"""Filters (ABI ivf_flat.filter.v1) in the `udf` package.

CPU tests (no GPU): `@udf.filter` with each installed back end, CUDA / LLVM IR / MLIR filters,
diagnostics and declaration errors, metric/filter confusion, linking (pairs), the module's
filter list, the extension's filter API; udf's own front end ("nvrtc", the default through
"auto") against numba on the typical filters: the same typing and the same artifact (kind,
ABI, captures, symbol), no numba import, and the warning of a filter that leaves it.

GPU tests (marked `gpu`, skipped without a CUDA GPU and driver): exact searches (n_probes =
n_lists) with filters, checked against a NumPy float64 exhaustive search restricted to the ids
the filter keeps (a Python reference of the filter), including 0% selectivity (every row
padded: id -1, distance +inf for "min" / -inf for "max"); the typical filters compiled by each
front end give the same results, bit for bit.
"""
from __future__ import annotations

import re
import subprocess
import sys
import textwrap
import warnings
from pathlib import Path

import numpy as np
import pytest

import udf

ARCHS = (80, 90, 100, 120)
HERE = Path(__file__).resolve()

CUDA_GROUP = """\
extern "C" __device__ bool cuda_group(uint32_t query, int64_t id, const udf_ctx_v1 *ctx) {
  const int32_t g = UDF_CAPTURE(ctx, n_groups);
  return g > 0 && id % g == static_cast<int64_t>(query % static_cast<uint32_t>(g));
}
"""

LLVM_ODD = """\
define i1 @llvm_odd(i32 %query, i64 %id, ptr %ctx) {
entry:
  %bit = and i64 %id, 1
  %odd = icmp ne i64 %bit, 0
  ret i1 %odd
}
"""

MLIR_BELOW = """\
func.func @mlir_below(%query: i32, %id: i64, %ctx: !llvm.ptr) -> i1 {
  %slot = llvm.getelementptr inbounds %ctx[16] : (!llvm.ptr) -> !llvm.ptr, i8
  %n = llvm.load %slot : !llvm.ptr -> i32
  %n64 = arith.extsi %n : i32 to i64
  %r = arith.cmpi slt, %id, %n64 : i64
  return %r : i1
}
"""


def expect_line(tag: str) -> int:
    """The line of this file carrying `# expect: TAG`."""
    hits = [i for i, ln in enumerate(HERE.read_text().splitlines(), 1) if ln.rstrip().endswith(f"# expect: {tag}")]
    assert len(hits) == 1, f"marker {tag!r} found {len(hits)} times"
    return hits[0]


def _suffix(backend: str) -> str:
    return backend.replace("-", "_")


def tenant_filter(backend: str, tenants, t=0, name="by_tenant"):
    def keep(query, id, ctx):
        return ctx.tenants[id] == ctx.t
    keep.__name__ = f"{name}_{_suffix(backend)}"
    return udf.filter(keep, captures={"tenants": tenants, "t": t}, backend=backend)


def group_filter(backend: str, g=3, name="py_group"):
    def keep(query, id, ctx):
        return id % ctx.g == query % ctx.g
    keep.__name__ = f"{name}_{_suffix(backend)}"
    return udf.filter(keep, captures={"g": g}, backend=backend)


# ---------------------------------------------------------------------------------------------
# Python filters: declaration, compile, reference


def test_python_filter_declaration(any_backend):
    tenants = np.arange(10, dtype=np.int32) % 3
    f = tenant_filter(any_backend, tenants, t=1)
    assert isinstance(f, udf.PythonFilter) and isinstance(f, udf.Filter)
    assert f.udf_kind == "filter" and f.symbol == f"by_tenant_{_suffix(any_backend)}"
    assert [str(c) for c in f.captures] == ["tenants (i32[])", "t (i32)"]
    kept = f.capture_defaults["tenants"]  # a read-only copy: later changes to `tenants` do not reach searches
    assert kept is not tenants and np.array_equal(kept, tenants) and not kept.flags.writeable
    assert f.capture_defaults["t"] == 1
    assert f.typing is not None and f.typing.return_type == "bool"
    assert f.udfc_flags() == ["--symbol", f.symbol, "--capture", "tenants:i32[]", "--capture", "t:i32"]

    class Ctx:
        pass
    ctx = Ctx()
    ctx.tenants, ctx.t = tenants, 1
    assert f(0, 4, ctx) and not f(0, 5, ctx)  # still callable as the function

    @udf.filter(backend=any_backend)
    def bare_keep_all(query, id, ctx):
        return True
    assert bare_keep_all.captures == () and bare_keep_all.capture_defaults == {}


def test_python_filter_compiles_for_every_arch(backend, udf_tools):
    f = tenant_filter(backend, np.zeros(8, np.int32), name="arch_tenant")
    art = udf.compile(f, archs=[f"sm_{a}" for a in ARCHS])
    assert isinstance(art, udf.Artifact) and art.is_filter and art.udf_kind == "filter"
    assert art.archs == ARCHS and art.symbol == f.symbol
    m = art.manifest
    assert m["udf_kind"] == "filter" and m["abi"]["id"] == "ivf_flat.filter.v1"
    assert m["kind"] == "udf.artifact" and m["payload_kind"] == "lto-ir"
    for metric_only in ("element_type", "accumulator_type", "order", "initial", "coarse_metric", "finalize", "monotone"):
        assert metric_only not in m, metric_only
    assert isinstance(art.info, udf.FilterInfo)
    assert [str(c) for c in art.info.captures] == ["tenants (i32[])", "t (i32)"]
    assert set(art.capture_defaults) == {"tenants", "t"}
    assert f.compile(ARCHS) is art  # cached per filter and archs
    assert set(f.ltoir([90, 120])) == {90, 120}
    assert "filter" in repr(art)


def test_integer_return_keeps_nonzero(any_backend):
    @udf.filter(backend=any_backend)
    def odd_py(query, id, ctx):
        return id & 1
    assert odd_py.typing.return_type == "int64"
    assert udf.compile(odd_py, archs=[90]).symbol == "odd_py"
    assert odd_py.reference(2, [1, 2, 3]).tolist() == [[True, False, True]] * 2


def test_query_and_id_types_and_n_dims(any_backend):
    """query is uint32, id int64; ctx.n_dims and ctx.dim read as for metrics."""
    @udf.filter(captures={"lim": 7}, backend=any_backend)
    def mixed_types(query, id, ctx):
        if ctx.n_dims > 1000 or ctx.dim != 0:
            return False
        return query + id < ctx.lim
    art = udf.compile(mixed_types, archs=[80])
    assert art.symbol == "mixed_types"
    ref = mixed_types.reference(3, np.arange(8), n_dims=16)
    assert np.array_equal(ref, (np.arange(3)[:, None] + np.arange(8)[None, :]) < 7)


def test_filter_reference():
    from udf._pycompile.compile import DEFAULT_BACKEND  # (% is numba's: named, so no FrontEndWarning)

    @udf.filter(captures={"g": 4}, check=False, backend=DEFAULT_BACKEND)
    def grp(query, id, ctx):
        return id % ctx.g == query % ctx.g
    ids = np.array([0, 5, 6, 11, 12], np.int64)
    ref = grp.reference(3, ids)
    assert ref.dtype == bool and ref.shape == (3, 5)
    assert np.array_equal(ref, (ids[None, :] % 4) == (np.arange(3)[:, None] % 4))
    assert np.array_equal(grp.reference([7], ids, {"g": 2}), (ids % 2 == 1)[None, :])


# ---------------------------------------------------------------------------------------------
# diagnostics


def _arity(backend):
    @udf.filter(backend=backend)
    def two(id, ctx):  # expect: arity
        return id > 0


def _unknown_capture(backend):
    @udf.filter(captures={"tenants": "i32[]", "t": "i32"}, backend=backend)
    def typo(query, id, ctx):
        return ctx.tenant[id] == ctx.t  # expect: unknown-capture


def _float_return(backend):
    @udf.filter(captures={"prices": "f32[]"}, backend=backend)
    def price(query, id, ctx):
        return ctx.prices[id] * 2.0  # expect: float-return


def _tuple_return(backend):
    @udf.filter(backend=backend)
    def pair(query, id, ctx):
        return id > 0, id < 9  # expect: tuple-return


def _missing_return(backend):
    @udf.filter(backend=backend)
    def maybe(query, id, ctx):
        if id > 0:
            return True
        id += 1  # expect: missing-return


DIAG_CASES = [
    ("arity", _arity, r"filter function 'two' must take 3 parameters \(query, id, ctx\), it takes 2"),
    ("unknown-capture", _unknown_capture, r"ctx has no field 'tenant'; did you mean 'tenants'\?"),
    ("float-return", _float_return, r"returns float(32|64), but a filter returns a bool"),
    ("tuple-return", _tuple_return, r"returns a tuple"),
    ("missing-return", _missing_return, r"can reach its end without 'return'"),
]


@pytest.mark.parametrize("case", DIAG_CASES, ids=[c[0] for c in DIAG_CASES])
def test_filter_diagnostics(backend, case):
    tag, define, pattern = case
    with pytest.raises(udf.UdfCompileError) as info:
        define(backend)
    e = info.value
    assert (e.filename, e.lineno) == (str(HERE), expect_line(tag)), str(e)
    assert re.search(pattern, e.message), e.message
    assert e.__cause__ is None
    if tag == "arity":
        assert "bool keep(uint32_t query, int64_t id, const udf_ctx_v1 *ctx)" in str(e)


def test_filter_ast_checks_without_back_end(tmp_path):
    script = tmp_path / "user_filter.py"
    script.write_text(textwrap.dedent("""\
        import sys
        for m in ("numba", "numba_cuda", "numba_cuda_mlir", "llvmlite"):
            sys.modules[m] = None
        sys.path.insert(0, %r)
        import udf
        @udf.filter(captures={"t": 1}, backend="numba-cuda-mlir")
        def ok(query, id, ctx):
            return id == ctx.t
        try:
            ok.compile([90])
        except udf.BackendUnavailableError as e:
            print("unavailable", "udf[numba-cuda-mlir]" in str(e))
        try:
            @udf.filter
            def f(query, id, ctx):
                return ctx.nope
        except udf.UdfCompileError as e:
            print(e.filename, e.lineno, e.message)
    """ % str(Path(udf.__file__).parents[1])))
    out = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.splitlines() == ["unavailable True", f"{script} 16 ctx has no field 'nope'"], out.stdout


@pytest.mark.parametrize("captures,pattern", [
    ({"m": np.zeros(3, np.float64)}, r"arrays of float64 are not a capture type"),
    ({"dim": 1}, r"capture name 'dim' is reserved"),
    ({f"c{i}": 1 for i in range(9)}, r"9 captures declared; the ABI allows at most 8"),
    ({"s": "f16"}, r"scalar dtype 'f16' is not one of f32, i32"),
    ({"x": object()}, r"cannot declare a capture from a object"),
])
def test_bad_filter_captures(captures, pattern):
    with pytest.raises(ValueError, match=pattern):
        udf.filter(lambda query, id, ctx: True, captures=captures, symbol_name="bad_caps", check=False)


def test_bool_mask_is_a_u8_capture():
    mask = np.array([True, False, True])

    @udf.filter(captures={"allowed": mask, "listed": [True, False]}, check=False)
    def masked(query, id, ctx):
        return ctx.allowed[id] != 0
    assert [str(c) for c in masked.captures] == ["allowed (u8[])", "listed (u8[])"]
    kept = masked.capture_defaults["allowed"]  # a read-only copy, as given (bool; bound as u8)
    assert kept is not mask and kept.dtype == np.bool_ and np.array_equal(kept, mask) and not kept.flags.writeable
    assert masked.reference(1, [0, 1, 2]).tolist() == [[True, False, True]]


def test_python_filter_symbol_and_backend_errors():
    with pytest.raises(ValueError, match="cannot be the filter's C symbol"):
        udf.filter(lambda query, id, ctx: True, check=False)
    with pytest.raises(ValueError, match="backend 'numba' is not one of"):
        udf.filter(lambda query, id, ctx: True, symbol_name="x", backend="numba")
    with pytest.raises(TypeError, match="@udf.filter decorates a function"):
        udf.filter(42)


# ---------------------------------------------------------------------------------------------
# CUDA C++, LLVM IR and MLIR filters


def test_cuda_source_filter(tmp_path):
    f = udf.cuda_source_filter(CUDA_GROUP, symbol_name="cuda_group", captures={"n_groups": 3})
    assert isinstance(f, udf.CudaFilter) and f.udf_kind == "filter"
    assert f.udfc_flags() == ["--symbol", "cuda_group", "--capture", "n_groups:i32"]
    art = f.compile([80, 90])
    assert art.is_filter and art.symbol == "cuda_group" and art.archs == (80, 90)
    assert art.manifest["source"]["kind"] == "cuda" and art.capture_defaults == {"n_groups": 3}
    # a file whose first line declares the kind and the captures: --kind is not given twice
    src = tmp_path / "first_line.cu"
    src.write_text("// udfc: --kind filter --capture n_groups:i32\n" + CUDA_GROUP.replace("cuda_group", "fl_group"))
    g = udf.cuda_source_filter(src, flags=["--flags-from-first-line"])
    assert g.symbol is None
    art = g.compile([90])
    assert g.symbol == "fl_group" and [str(c) for c in g.captures] == ["n_groups (i32)"]
    assert art.manifest["source"]["name"] == "first_line.cu"
    # a first line with captures but no --kind: the filter says --kind filter
    src2 = tmp_path / "caps_only.cu"
    src2.write_text("// udfc: --capture n_groups:i32\n" + CUDA_GROUP.replace("cuda_group", "co_group"))
    assert udf.cuda_source_filter(src2, flags=["--flags-from-first-line"]).compile([90]).is_filter


def test_cuda_filter_errors():
    metric_sig = udf.cuda_source_filter('extern "C" __device__ float m(float x, float y, float acc,'
                                        ' const udf_ctx_v1 *ctx) { return acc + x; }')
    with pytest.raises(udf.UdfToolError) as info:
        metric_sig.compile([90])
    assert info.value.code == "UDF1012" and "wrong signature for ABI ivf_flat.filter.v1" in info.value.message
    assert str(info.value).splitlines()[0] == "compiling CUDA filter for sm_90: udfc failed (exit 1)"
    undeclared = udf.cuda_source_filter(CUDA_GROUP, symbol_name="cuda_group")
    with pytest.raises(udf.UdfToolError) as info:
        undeclared.compile([90])
    assert info.value.code == "UDF1013" and "--capture n_groups" in str(info.value)


def test_ir_filters(tmp_path):
    f = udf.ir_filter(LLVM_ODD)
    assert isinstance(f, udf.IRFilter) and f.ir_kind == "llvm"
    art = f.compile([90])
    assert art.is_filter and art.symbol == "llvm_odd" and art.manifest["source"]["kind"] == "llvm-ir"
    path = tmp_path / "below.mlir"
    path.write_text(MLIR_BELOW)
    g = udf.ir_filter(path, captures={"n": 100})
    assert g.ir_kind == "mlir" and g.path == path
    art = g.compile([80, 100])
    assert art.archs == (80, 100) and art.symbol == "mlir_below" and art.capture_defaults == {"n": 100}
    with pytest.raises(ValueError, match="kind 'cuda' is not one of"):
        udf.ir_filter(LLVM_ODD, kind="cuda")


def test_ir_filter_signature_error():
    bad = udf.ir_filter("define i32 @bad_sig(i32 %q, i64 %id, ptr %ctx) {\n  ret i32 1\n}\n")
    with pytest.raises(udf.UdfToolError) as info:
        bad.compile([90])
    e = info.value
    assert e.code == "UDF1012" and e.lineno == 1
    assert "in IR: i1 (i32, i64, ptr)" in str(e) and "found: i32 (i32, i64, ptr)" in str(e)


def test_filter_given_as_metric_and_metric_as_filter(tmp_path, any_backend):
    # an IR file whose first line says it is a filter, declared as a metric
    path = tmp_path / "odd_first_line.ll"
    path.write_text("; udfc: --kind filter\n" + LLVM_ODD.replace("llvm_odd", "fl_odd"))
    m = udf.ir_metric(path, flags=["--flags-from-first-line"])
    with pytest.raises(TypeError, match=r"compiled a filter .*udf.cuda_source_filter / udf.ir_filter"):
        m.compile([90])
    # a CUDA file whose first line says it is a metric, declared as a filter
    src = tmp_path / "metric_first_line.cu"
    src.write_text("// udfc: --kind metric\n"
                   'extern "C" __device__ float fl_l1(float x, float y, float acc, const udf_ctx_v1 *c)'
                   " { return acc + fabsf(x - y); }\n")
    with pytest.raises(TypeError, match=r"compiled a metric .*udf.cuda_source_metric"):
        udf.cuda_source_filter(src, flags=["--flags-from-first-line"]).compile([90])
    # a module needs a metric; an index too
    f = udf.ir_filter(LLVM_ODD)
    with pytest.raises(TypeError, match="is a filter; a module needs at least one metric"):
        udf.link([f], archs=[90])
    with pytest.raises(TypeError, match=r"llvm_odd is a filter, not a metric"):
        udf.Index.build(f.compile([90]), np.zeros((8, 4), np.float32), n_lists=1)
    py = tenant_filter(any_backend, np.zeros(4, np.int32), name="notmetric")
    with pytest.raises(TypeError, match=r"is a filter, not a metric"):
        udf.Index.build(py, np.zeros((8, 4), np.float32), n_lists=1)
    with pytest.raises(TypeError, match="filters= cannot be added to a linked module"):
        mod = udf.link([udf.builtin_metric("l2")], archs=[90])
        udf.Index.build(mod, np.zeros((8, 4), np.float32), n_lists=1, filters=[f])


# ---------------------------------------------------------------------------------------------
# link, modules


def test_link_filters_and_pairs(any_backend, tmp_path):
    tenants = np.arange(16, dtype=np.int32) % 2
    tf = tenant_filter(any_backend, tenants, name="link_tenant")
    odd = udf.ir_filter(LLVM_ODD)
    l2 = udf.builtin_metric("l2")
    mod = udf.link([l2, tf, odd], archs=[90])
    assert mod.symbols == ("udf_builtin_l2",)
    assert mod.filter_symbols == (tf.symbol, "llvm_odd")
    assert mod.pairs == (("udf_builtin_l2", tf.symbol), ("udf_builtin_l2", "llvm_odd"))
    assert mod.filters_for("udf_builtin_l2") == (tf.symbol, "llvm_odd")
    info = mod.filter(tf.symbol)
    assert isinstance(info, udf.FilterInfo) and [str(c) for c in info.captures] == ["tenants (i32[])", "t (i32)"]
    assert info.cache_key == tf.compile([90]).cache_key
    assert mod.filter_capture_defaults(tf.symbol)["tenants"] is tf.capture_defaults["tenants"]
    assert mod.filter_capture_defaults("llvm_odd") == {}
    assert [f["symbol"] for f in mod.manifest["filters"]] == [tf.symbol, "llvm_odd"]
    assert f"filters=['{tf.symbol}', 'llvm_odd']" in repr(mod)
    with pytest.raises(ValueError, match=r"has no filter 'nope' \(its filters: "):
        mod.filter("nope")
    # only the pairs asked for: as tuples of objects, or METRIC:FILTER strings
    only = udf.link([l2, tf, odd], archs=[90], pairs=[(l2, tf)])
    assert only.pairs == (("udf_builtin_l2", tf.symbol),) and only.filter_symbols == (tf.symbol, "llvm_odd")
    assert udf.link([l2, tf, odd], archs=[90], pairs="udf_builtin_l2:llvm_odd").pairs == \
        (("udf_builtin_l2", "llvm_odd"),)
    assert udf.link([l2, tf, odd], archs=[90], pairs=("udf_builtin_l2", "llvm_odd")).pairs == \
        (("udf_builtin_l2", "llvm_odd"),)
    with pytest.raises(ValueError, match="is not METRIC:FILTER"):
        udf.link([l2, odd], archs=[90], pairs=["udf_builtin_l2"])
    with pytest.raises(udf.UdfToolError):
        udf.link([l2, odd], archs=[90], pairs=[("udf_builtin_l2", "nope")])
    # saved and loaded: the manifest lists the filters (no declared defaults in a file)
    path = mod.save(tmp_path / "filtered.udfm")
    loaded = udf.load_module(path)
    assert loaded.filter_symbols == mod.filter_symbols and loaded.pairs == mod.pairs
    assert loaded.filter_capture_defaults(tf.symbol) == {}
    # a filter artifact from a file links like any other
    fpath = odd.compile([90]).save(tmp_path / "odd.udfa")
    assert udf.Artifact.load(fpath).is_filter
    assert udf.link([l2, fpath], archs=[90]).filter_symbols == ("llvm_odd",)


def test_builtin_filter():
    with pytest.raises(ValueError, match="not a built-in filter"):
        udf.builtin_filter("bloom")
    try:
        bitmap = udf.builtin_filter("bitmap")
    except udf.UdfError as e:
        pytest.skip(f"no built-in filters next to the tools: {e}")
    assert bitmap.is_filter and bitmap.symbol == "udf_builtin_bitmap"
    assert [str(c) for c in bitmap.info.captures] == ["bitmap (u8[])", "n_ids (i32)"]
    assert udf.builtin_filter("bitmap") is bitmap


def test_extension_filter_api(ext):
    assert "filter" in (ext.Index.search.__doc__ or "") and "filter_captures" in ext.Index.search.__doc__
    assert hasattr(ext.Module, "filters")


def test_ivf_flat_facade_filter():
    from udf import ivf_flat
    assert ivf_flat.filter is udf.filter and ivf_flat.cuda_source_filter is udf.cuda_source_filter
    assert ivf_flat.ir_filter is udf.ir_filter
    s = ivf_flat.SearchParams(n_probes=2, filter="f", filter_captures={"t": 1})
    assert (s.filter, s.filter_captures) == ("f", {"t": 1})
    assert ivf_flat.SearchParams().filter is None


# =============================================================================================
# GPU: searches with filters against a float64 exhaustive reference restricted to kept ids

DIM = 16
ROWS = 1200
N_LISTS = 8
_rng = np.random.default_rng(20261123)
_centers = _rng.normal(0.0, 4.0, (10, DIM))
DATA = (_centers[_rng.integers(0, 10, ROWS)] + _rng.normal(0, 1, (ROWS, DIM))).astype(np.float32)
QUERIES = (_rng.normal(0.0, 4.0, (7, DIM))).astype(np.float32)
# ids are neither row numbers nor slots: a permutation, spread out
IDS = (_rng.permutation(ROWS) * 3 + 5).astype(np.int64)
N_IDS = int(IDS.max()) + 1
TENANTS = _rng.integers(0, 4, N_IDS).astype(np.int32)
ROW_OF = {int(i): r for r, i in enumerate(IDS)}

gpu = pytest.mark.gpu


def l2_reference(data=DATA, queries=QUERIES) -> np.ndarray:
    d = data.astype(np.float64)[None, :, :] - queries.astype(np.float64)[:, None, :]
    return (d * d).sum(-1)


def ip_reference(data=DATA, queries=QUERIES) -> np.ndarray:
    return queries.astype(np.float64) @ data.astype(np.float64).T


def check_filtered(dist, ids, ref, keep, k, *, order="min", rtol=1e-5, atol=1e-3):
    """dist / ids (n x k, from the GPU) against `ref` (n x rows float64 distances) restricted to
    `keep` (n x rows bool): the kept k best (ties allowed), each id carrying its distance, and
    rows with fewer kept vectors padded with id -1 and the worst distance."""
    dist, ids = np.asarray(dist), np.asarray(ids)
    assert dist.shape == ids.shape == (ref.shape[0], k)
    assert dist.dtype == np.float32 and ids.dtype == np.int64
    for q in range(ref.shape[0]):
        kept = np.flatnonzero(keep[q])
        m = min(k, len(kept))
        vals = ref[q, kept]
        best = np.sort(vals)[:m] if order == "min" else -np.sort(-vals)[:m]
        got = ids[q, :m]
        assert (got >= 0).all(), f"query {q}: {m} kept vectors expected, got {ids[q]}"
        assert len(set(got.tolist())) == m, f"query {q}: duplicate ids {got}"
        rows = np.array([ROW_OF[int(i)] for i in got], dtype=np.int64)
        assert keep[q, rows].all(), f"query {q}: ids the filter rejects: {got[~keep[q, rows]]}"
        np.testing.assert_allclose(dist[q, :m], best, rtol=rtol, atol=atol, err_msg=f"query {q}: not the k best")
        np.testing.assert_allclose(ref[q, rows], dist[q, :m], rtol=rtol, atol=atol,
                                   err_msg=f"query {q}: ids do not carry their distances")
        assert (ids[q, m:] == -1).all(), f"query {q}: padding {ids[q, m:]}"
        pad = dist[q, m:]
        assert (np.isposinf(pad) if order == "min" else np.isneginf(pad)).all(), f"query {q}: padding {pad}"


def keep_of(f, captures=None, n_queries=len(QUERIES)) -> np.ndarray:
    """n_queries x ROWS: what Python filter `f` keeps (by row, through IDS)."""
    return f.reference(n_queries, IDS, captures, n_dims=DIM)


@pytest.fixture(scope="module")
def l2():
    return udf.builtin_metric("sqeuclidean")


@pytest.fixture(scope="module")
def gpu_ext(ext):
    from conftest import gpu_status
    ok, why = gpu_status()
    if not ok:
        pytest.skip(f"no CUDA GPU: {why}")
    return ext


@gpu
def test_tenant_filter(gpu_ext, backend, l2):
    f = tenant_filter(backend, TENANTS, t=2)
    index = udf.Index.build(l2, DATA, n_lists=N_LISTS, ids=IDS, filters=[f])
    assert index.module.filters_for(index.metric.symbol) == (f.symbol,)
    ref = l2_reference()
    dist, ids = index.search(QUERIES, k=10, n_probes=N_LISTS, filter=f)  # the declared t = 2
    check_filtered(dist, ids, ref, keep_of(f), 10)
    for t in range(4):
        dist, ids = index.search(QUERIES, k=10, n_probes=N_LISTS, filter=f, filter_captures={"t": t})
        check_filtered(dist, ids, ref, keep_of(f, {"t": t}), 10)
    # by symbol, with the module's declared defaults
    d2, i2 = index.search(QUERIES, k=10, n_probes=N_LISTS, filter=f.symbol, filter_captures={"t": 3})
    assert np.array_equal(i2, ids) and np.array_equal(d2, dist)
    # the unfiltered search still works on the same index
    dist, ids = index.search(QUERIES, k=10, n_probes=N_LISTS)
    check_filtered(dist, ids, ref, np.ones_like(ref, dtype=bool), 10)


@gpu
def test_zero_selectivity(gpu_ext, any_backend, l2):
    f = tenant_filter(any_backend, TENANTS, name="zero_tenant")
    index = udf.Index.build(l2, DATA, n_lists=N_LISTS, ids=IDS, filters=[f])
    dist, ids = index.search(QUERIES, k=10, n_probes=N_LISTS, filter=f, filter_captures={"t": 99})
    assert (ids == -1).all() and np.isposinf(dist).all()
    # order "max": padded with -inf
    ip = udf.builtin_metric("inner_product")
    index = udf.Index.build(ip, DATA, n_lists=N_LISTS, ids=IDS, filters=[f])
    dist, ids = index.search(QUERIES, k=5, n_probes=N_LISTS, filter=f, filter_captures={"t": 99})
    assert (ids == -1).all() and np.isneginf(dist).all()
    dist, ids = index.search(QUERIES, k=5, n_probes=N_LISTS, filter=f, filter_captures={"t": 1})
    check_filtered(dist, ids, ip_reference(), keep_of(f, {"t": 1}), 5, order="max")


@gpu
def test_per_query_filter(gpu_ext, any_backend, l2):
    f = group_filter(any_backend)
    index = udf.Index.build(l2, DATA, n_lists=N_LISTS, ids=IDS, filters=[f])
    ref = l2_reference()
    for g in (1, 3, 7):
        dist, ids = index.search(QUERIES, k=8, n_probes=N_LISTS, filter=f, filter_captures={"g": g})
        check_filtered(dist, ids, ref, keep_of(f, {"g": g}), 8)
    # fewer kept vectors than k for some queries: partly padded rows
    g = 700
    keep = keep_of(f, {"g": g})
    assert keep.sum(1).min() < 8
    dist, ids = index.search(QUERIES, k=8, n_probes=N_LISTS, filter=f, filter_captures={"g": g})
    check_filtered(dist, ids, ref, keep, 8)
    # one query as a 1-D array is query row 0
    d1, i1 = index.search(QUERIES[3], k=8, n_probes=N_LISTS, filter=f, filter_captures={"g": 3})
    check_filtered(d1[None], i1[None], ref[3:4], keep_of(f, {"g": 3}, 1), 8)


@gpu
def test_cuda_filter(gpu_ext, l2):
    cuda = udf.cuda_source_filter(CUDA_GROUP, symbol_name="cuda_group", captures={"n_groups": 3})
    index = udf.Index.build(l2, DATA, n_lists=N_LISTS, ids=IDS, filters=[cuda])
    ref = l2_reference()
    q = np.arange(len(QUERIES))[:, None]
    dist, ids = index.search(QUERIES, k=10, n_probes=N_LISTS, filter=cuda)
    check_filtered(dist, ids, ref, (IDS[None, :] % 3) == (q % 3), 10)
    dist, ids = index.search(QUERIES, k=10, n_probes=N_LISTS, filter="cuda_group", filter_captures={"n_groups": 5})
    check_filtered(dist, ids, ref, (IDS[None, :] % 5) == (q % 5), 10)


@gpu
def test_ir_filter(gpu_ext, l2):
    odd = udf.ir_filter(LLVM_ODD)
    try:
        odd.compile([udf.device_info()["arch"]])
    except udf.UdfToolError as e:
        if e.code == "UDF5001":  # a GPU machine without LLVM / MLIR for udfc's IR front end
            pytest.skip(f"udfc's IR front end is not loadable here: {e.message}")
        raise
    index = udf.Index.build(l2, DATA, n_lists=N_LISTS, ids=IDS, filters=[odd])
    ref = l2_reference()
    dist, ids = index.search(QUERIES, k=10, n_probes=N_LISTS, filter="llvm_odd")
    check_filtered(dist, ids, ref, np.broadcast_to(IDS % 2 == 1, ref.shape), 10)


@gpu
def test_filter_linked_on_first_use(gpu_ext, any_backend, l2):
    f = tenant_filter(any_backend, TENANTS, t=1, name="late_tenant")
    index = udf.Index.build(l2, DATA, n_lists=N_LISTS, ids=IDS)
    assert index.module.filters == ()
    ref = l2_reference()
    dist, ids = index.search(QUERIES, k=6, n_probes=N_LISTS, filter=f)
    check_filtered(dist, ids, ref, keep_of(f), 6)
    dist, ids = index.search(QUERIES, k=6, n_probes=N_LISTS, filter=f, filter_captures={"t": 0})
    check_filtered(dist, ids, ref, keep_of(f, {"t": 0}), 6)
    assert len(index._rebound) == 1  # one rebound copy, reused
    dist, ids = index.search(QUERIES, k=6, n_probes=N_LISTS)
    check_filtered(dist, ids, ref, np.ones_like(ref, dtype=bool), 6)
    # adding vectors drops the rebound copy; the next filtered search makes a new one
    index.add(DATA[:3] + 100.0, ids=np.arange(N_IDS, N_IDS + 3))  # far away, ids past the tenants table
    assert index._rebound == {}
    longer = np.concatenate([TENANTS, np.zeros(3, np.int32)])
    dist, ids = index.search(QUERIES, k=6, n_probes=N_LISTS, filter=f, filter_captures={"tenants": longer, "t": 0})
    check_filtered(dist, ids, ref, keep_of(f, {"t": 0}), 6)
    assert len(index._rebound) == 1


@gpu
def test_metric_and_filter_captures_are_separate(gpu_ext, any_backend):
    w_metric = np.linspace(0.5, 2.0, DIM).astype(np.float32)

    @udf.metric(captures={"w": w_metric}, backend=any_backend)
    def wl2_sep(x, y, acc, ctx):
        d = x - y
        return acc + ctx.w[ctx.dim] * d * d

    w_filter = _rng.uniform(0, 1, N_IDS).astype(np.float32)  # the filter's own "w", one per id

    @udf.filter(captures={"w": w_filter, "cut": 0.5}, backend=any_backend)
    def heavy_ids(query, id, ctx):
        return ctx.w[id] >= ctx.cut

    index = udf.Index.build(wl2_sep, DATA, n_lists=N_LISTS, ids=IDS, filters=[heavy_ids])
    ref = np.stack([wl2_sep.reference(DATA, q) for q in QUERIES])
    dist, ids = index.search(QUERIES, k=7, n_probes=N_LISTS, filter=heavy_ids)
    check_filtered(dist, ids, ref, keep_of(heavy_ids), 7, rtol=1e-4)
    w2 = np.ones(DIM, np.float32)
    dist, ids = index.search(QUERIES, k=7, n_probes=N_LISTS, captures={"w": w2}, filter=heavy_ids,
                             filter_captures={"cut": 0.9})
    ref2 = np.stack([wl2_sep.reference(DATA, q, {"w": w2}) for q in QUERIES])
    check_filtered(dist, ids, ref2, keep_of(heavy_ids, {"cut": 0.9}), 7, rtol=1e-4)


@gpu
def test_bool_mask_and_bitmap(gpu_ext, any_backend, l2):
    allowed = TENANTS == 1

    @udf.filter(captures={"allowed": allowed}, backend=any_backend)
    def mask_keep(query, id, ctx):
        return ctx.allowed[id] != 0

    filters = [mask_keep]
    try:
        bitmap = udf.builtin_filter("bitmap")
        filters.append(bitmap)
    except udf.UdfError:
        bitmap = None
    index = udf.Index.build(l2, DATA, n_lists=N_LISTS, ids=IDS, filters=filters)
    ref = l2_reference()
    dist, ids = index.search(QUERIES, k=9, n_probes=N_LISTS, filter=mask_keep)
    check_filtered(dist, ids, ref, keep_of(mask_keep), 9)
    assert len(index._copies) == 1  # the declared mask, on the GPU (as u8) once
    allowed[:] = TENANTS == 3  # the caller's array: the declaration kept its own copy
    again, ids2 = index.search(QUERIES, k=9, n_probes=N_LISTS, filter=mask_keep)
    assert np.array_equal(again, dist) and np.array_equal(ids2, ids) and len(index._copies) == 1
    dist, ids = index.search(QUERIES, k=9, n_probes=N_LISTS, filter=mask_keep, filter_captures={"allowed": allowed})
    check_filtered(dist, ids, ref, np.broadcast_to((TENANTS == 3)[IDS], ref.shape), 9)
    if bitmap is None:
        return
    mask = TENANTS == 0
    caps = {"bitmap": np.packbits(mask, bitorder="little"), "n_ids": N_IDS}
    dist, ids = index.search(QUERIES, k=9, n_probes=N_LISTS, filter=bitmap, filter_captures=caps)
    check_filtered(dist, ids, ref, np.broadcast_to(mask[IDS], ref.shape), 9)


@gpu
def test_device_filter_captures(gpu_ext, any_backend, l2):
    cupy = pytest.importorskip("cupy")
    f = tenant_filter(any_backend, cupy.asarray(TENANTS), t=2, name="dev_tenant")
    index = udf.Index.build(l2, DATA, n_lists=N_LISTS, ids=IDS, filters=[f])
    dist, ids = index.search(cupy.asarray(QUERIES), k=5, n_probes=N_LISTS, filter=f,
                             filter_captures={"t": 3})
    assert isinstance(ids, cupy.ndarray)
    check_filtered(dist.get(), ids.get(), l2_reference(), keep_of(f, {"t": 3}), 5)


@gpu
def test_filter_errors(gpu_ext, any_backend, l2):
    f = tenant_filter(any_backend, TENANTS, name="err_tenant")

    @udf.filter(captures={"table": "f32[]"}, backend=any_backend)
    def needs_table(query, id, ctx):
        return ctx.table[0] > 0

    index = udf.Index.build(l2, DATA, n_lists=N_LISTS, ids=IDS, filters=[f, needs_table])
    search = lambda **kw: index.search(QUERIES, k=5, n_probes=N_LISTS, **kw)  # noqa: E731

    def status_of(**kw):
        with pytest.raises(udf.UdfRuntimeError) as info:
            search(**kw)
        return info.value.status, info.value.message

    with pytest.raises(TypeError, match="is a metric, not a filter"):
        search(filter=l2)
    with pytest.raises(TypeError, match=r"decorate the function with @udf.filter"):
        search(filter=lambda query, id, ctx: True)
    st, msg = status_of(filter="nope")
    assert st == udf.Status.INVALID_ARGUMENT and "has no filter 'nope'" in msg and f.symbol in msg
    st, msg = status_of(filter=f, filter_captures={"tenant": TENANTS})
    assert st == udf.Status.CAPTURE and "capture 'tenant' is not declared by filter" in msg
    st, msg = status_of(filter=needs_table)
    assert st == udf.Status.CAPTURE and "has no value: pass filter_captures={'table': ...}" in msg
    st, msg = status_of(filter=needs_table, filter_captures={"table": np.ones((2, 2), np.float32)})
    assert st == udf.Status.CAPTURE and "expected a 1-D array" in msg
    st, msg = status_of(filter=needs_table, filter_captures={"table": np.ones(0, np.float32)})
    assert st == udf.Status.CAPTURE and "empty array" in msg
    st, msg = status_of(filter=f, filter_captures={"t": 1.5})
    assert st == udf.Status.CAPTURE and "i32 scalar" in msg
    st, msg = status_of(filter_captures={"t": 1})
    assert st == udf.Status.CAPTURE and "no filter" in msg
    # a module linked without the pair: by symbol, and as an object (the module was given linked)
    other = tenant_filter(any_backend, TENANTS, name="other_tenant")
    only = udf.link([l2, f, other], archs=[udf.device_info()["arch"]], pairs=[(l2, f)])
    ix = udf.Index.build(only, DATA, n_lists=N_LISTS, ids=IDS)
    with pytest.raises(udf.UdfRuntimeError) as info:
        ix.search(QUERIES, k=5, n_probes=N_LISTS, filter=other.symbol)
    assert info.value.status == udf.Status.MISMATCH and "not linked with metric" in info.value.message
    with pytest.raises(udf.UdfRuntimeError) as info:  # an object: the module was given linked
        ix.search(QUERIES, k=5, n_probes=N_LISTS, filter=other)
    assert info.value.status == udf.Status.MISMATCH and "cannot be linked again" in info.value.message
    assert "is not linked with metric udf_builtin_l2 in the index's module" in info.value.message
    third = tenant_filter(any_backend, TENANTS, name="third_tenant")
    with pytest.raises(udf.UdfRuntimeError) as info:
        ix.search(QUERIES, k=5, n_probes=N_LISTS, filter=third)
    assert info.value.status == udf.Status.MISMATCH and "is not in the index's module" in info.value.message
    dist, ids = ix.search(QUERIES, k=5, n_probes=N_LISTS, filter=f)
    check_filtered(dist, ids, l2_reference(), keep_of(f), 5)


@gpu
def test_extension_lists_module_filters(gpu_ext, any_backend, l2):
    from udf._runtime import runtime
    f = tenant_filter(any_backend, TENANTS, name="ext_tenant")
    mod = udf.link([l2, f], archs=[udf.device_info()["arch"]])
    loaded = mod._runtime_module(runtime(0), 0)
    filters = loaded.filters()
    assert [x["symbol"] for x in filters] == [f.symbol]
    assert filters[0]["cache_key"] == mod.filter(f.symbol).cache_key
    assert [(c["name"], gpu_ext.dtype_name(c["dtype"]), c["is_array"]) for c in filters[0]["captures"]] == \
        [("tenants", "i32", True), ("t", "i32", False)]


@gpu
def test_ivf_flat_search_params_filter(gpu_ext, any_backend):
    from udf import ivf_flat
    f = tenant_filter(any_backend, TENANTS, t=1, name="poc_tenant")
    index = ivf_flat.build(ivf_flat.IndexParams(n_lists=N_LISTS, metric="sqeuclidean"), DATA, ids=IDS)
    dist, ids = ivf_flat.search(ivf_flat.SearchParams(n_probes=N_LISTS, filter=f, filter_captures={"t": 2}),
                                index, QUERIES, 4)
    check_filtered(dist, ids, l2_reference(), keep_of(f, {"t": 2}), 4)

    @udf.metric(backend=any_backend)
    def poc_l1(x, y, acc, ctx):
        return acc + abs(x - y)

    dist, ids = ivf_flat.search(ivf_flat.SearchParams(n_probes=N_LISTS, metric=poc_l1, filter=f), index, QUERIES, 4)
    ref = np.abs(DATA.astype(np.float64)[None] - QUERIES.astype(np.float64)[:, None]).sum(-1)
    check_filtered(dist, ids, ref, keep_of(f), 4, rtol=1e-4)


# =============================================================================================
# udf's own front end ("nvrtc") against numba: the typical filters, compiled by each

PRICES = np.random.default_rng(7).uniform(0.0, 1.0, N_IDS).astype(np.float32)  # one per id


def _bit_words(mask: np.ndarray) -> np.ndarray:
    """The mask as int32 words, bit i % 32 of word i // 32."""
    b = np.packbits(mask, bitorder="little")
    return np.concatenate([b, np.zeros(-len(b) % 4, np.uint8)]).view("<i4").astype(np.int32)


def fe_tenant(query, id, ctx):
    return ctx.tenants[id] == ctx.t


def fe_price_range(query, id, ctx):
    return ctx.lo <= ctx.price[id] and ctx.price[id] < ctx.hi


def fe_bitmap(query, id, ctx):
    if id < 0 or id >= ctx.n_ids:
        return False
    return (ctx.bits[id >> 5] >> (id & 31)) & 1


def fe_byte_mask(query, id, ctx):
    inside = id >= 0 and id < ctx.n_ids
    if not inside:
        return False
    return ((ctx.mask[id >> 3] >> (id & 7)) & 1) != 0


def fe_query_group(query, id, ctx):
    return ctx.group[query] == ctx.tenants[id]


def fe_parity(query, id, ctx):
    return ((query ^ id) & 1) == 0


def fe_odd_ids(query, id, ctx):
    return id & 1


def _front_end_cases():
    """(name, function, captures): the typical filters, each inside the translator's subset."""
    return [
        ("tenant", fe_tenant, {"tenants": TENANTS, "t": 2}),
        ("price_range", fe_price_range, {"price": PRICES, "lo": 0.25, "hi": 0.6}),
        ("bitmap", fe_bitmap, {"bits": _bit_words(TENANTS == 1), "n_ids": N_IDS}),
        ("byte_mask", fe_byte_mask, {"mask": np.packbits(TENANTS != 2, bitorder="little"), "n_ids": N_IDS}),
        ("query_group", fe_query_group, {"group": (np.arange(len(QUERIES)) % 4).astype(np.int32), "tenants": TENANTS}),
        ("parity", fe_parity, {}),
        ("odd_ids", fe_odd_ids, {}),
    ]


FRONT_END_CASES = [c[0] for c in _front_end_cases()]


def front_end_filter(case: str, backend: str, symbol: str | None = None):
    """Filter `case` declared for `backend` ("nvrtc" or a numba back end), symbol fe_CASE_BACKEND."""
    name, fn, caps = next(c for c in _front_end_cases() if c[0] == case)
    return udf.filter(fn, captures=caps, backend=backend,
                      symbol_name=symbol or f"fe_{name}_{_suffix(backend)}")


@pytest.mark.parametrize("case", FRONT_END_CASES)
def test_front_ends_make_the_same_artifact(case, backend, udf_tools):
    """The same filter from the translator and from numba: the same typing, and artifacts whose
    manifests agree on kind, ABI, captures and symbol."""
    nv = front_end_filter(case, "nvrtc", symbol=f"fe_{case}")
    nb = front_end_filter(case, backend, symbol=f"fe_{case}")
    assert (nv.backend, nv.nvrtc_unsupported, nb.backend, nb.cuda_source) == ("nvrtc", None, backend, None)
    assert f'extern "C" __device__ bool fe_{case}(unsigned int ' in nv.cuda_source
    numba_type = nb.typing.return_type
    assert nv.typing.return_type == ("bool" if numba_type.startswith("Literal[bool]") else numba_type)
    assert nv.typing.warnings == [] and nv.udfc_flags() == nb.udfc_flags()
    a, b = nv.compile([90]), nb.compile([90])
    for key in ("kind", "udf_kind", "abi", "captures", "symbol"):
        assert a.manifest[key] == b.manifest[key], key
    assert a.manifest["udf_kind"] == "filter" and a.manifest["abi"]["id"] == "ivf_flat.filter.v1"
    assert a.archs == b.archs == (90,) and a.manifest["source"]["kind"] == "cuda"
    assert set(nv.ltoir([90])) == {90}


@pytest.mark.parametrize("case", FRONT_END_CASES)
def test_auto_takes_the_translator_for_typical_filters(case):
    name, fn, caps = next(c for c in _front_end_cases() if c[0] == case)
    with warnings.catch_warnings():
        warnings.simplefilter("error", udf.FrontEndWarning)
        f = udf.filter(fn, captures=caps, check=False)
    assert f.backend == "nvrtc" and f.nvrtc_unsupported is None and f.cuda_source is not None


def _loops(query, id, ctx):
    for i in range(ctx.n):  # expect: filter-loop
        if ctx.allowed[i] == id:
            return True
    return False


def _group_mod(query, id, ctx):
    return id % ctx.g == query % ctx.g  # expect: filter-mod


def test_a_filter_leaving_the_fast_path_warns_at_the_users_line():
    """"auto" sends these to numba with one udf.FrontEndWarning at the construct, naming the filter
    and the rewrite; backend="nvrtc" refuses them with the same fix; a numba back end by name is
    silent."""
    from udf._pycompile.compile import DEFAULT_BACKEND as be
    loop_fix = ("index a capture instead of looping over one (an allow-list of ids as a bitmap: "
                "`(ctx.bits[id >> 5] >> (id & 31)) & 1`, bits an i32[] capture of one bit per id)")
    cases = [(_loops, {"n": 4, "allowed": "i32[]"}, "filter-loop", "for i in range(ctx.n)", loop_fix),
             (_group_mod, {"g": 3}, "filter-mod", "id % ctx.g",
              "the subset is docs/python.md's (\"Two front ends\"); outside it here: the operator Mod")]
    for fn, caps, tag, construct, fix in cases:
        with pytest.warns(udf.FrontEndWarning) as rec:
            f = udf.filter(fn, captures=caps, check=False)
        ws = [w for w in rec if w.category is udf.FrontEndWarning]
        assert len(ws) == 1 and (ws[0].filename, ws[0].lineno) == (str(HERE), expect_line(tag))
        assert str(ws[0].message) == (
            f"`{construct}` is outside udf's fast front end, so filter '{fn.__name__}' compiles with {be} (seconds "
            f"of numba import in each process that compiles it): {fix} (or pass backend='{be}' to choose numba "
            f"and silence this)")
        assert f.backend == be and f.cuda_source is None
        with pytest.raises(ValueError, match="backend='nvrtc' cannot translate") as info:
            udf.filter(fn, captures=caps, check=False, backend="nvrtc")
        assert str(info.value).endswith(f": {fix}; backend='auto' (the default) compiles it with numba instead")
        with warnings.catch_warnings():
            warnings.simplefilter("error", udf.FrontEndWarning)
            udf.filter(fn, captures=caps, check=False, backend=be)


def test_a_failing_filter_gets_its_error_not_the_warning(any_backend):
    """A filter the AST rules refuse gets that error alone from "auto" and "nvrtc"."""
    with warnings.catch_warnings():
        warnings.simplefilter("error", udf.FrontEndWarning)
        for be in ("auto", "nvrtc"):
            with pytest.raises(udf.UdfCompileError, match="ctx has no field 'tenant'"):
                _unknown_capture(be)


def test_nvrtc_filters_link_beside_numba_filters(any_backend, udf_tools):
    nv = front_end_filter("bitmap", "nvrtc")
    nb = front_end_filter("bitmap", any_backend)
    mod = udf.link([udf.builtin_metric("l2"), nv, nb], archs=[90], max_k=32)
    assert mod.filter_symbols == (nv.symbol, nb.symbol)
    assert mod.pairs == (("udf_builtin_l2", nv.symbol), ("udf_builtin_l2", nb.symbol))


def test_a_python_filter_compiles_without_numba(udf_tools, tmp_path):
    """A new process: @udf.filter (default backend) and compile() import no numba."""
    script = tmp_path / "fresh_filter.py"
    script.write_text(textwrap.dedent(f"""\
        import sys
        sys.path.insert(0, {str(Path(udf.__file__).resolve().parents[1])!r})
        import numpy as np, udf

        @udf.filter(captures={{"bits": np.zeros(4, np.int32), "n_ids": 128}})
        def fresh_allow_{abs(hash(str(tmp_path))) % 10**6}(query, id, ctx):
            if id < 0 or id >= ctx.n_ids:
                return False
            return (ctx.bits[id >> 5] >> (id & 31)) & 1

        f = fresh_allow_{abs(hash(str(tmp_path))) % 10**6}
        assert f.backend == "nvrtc", f.nvrtc_unsupported
        art = udf.compile(f, archs=["sm_90"])
        assert art.udf_kind == "filter"
        bad = sorted(k for k in sys.modules if k.split(".")[0] in ("numba", "numba_cuda", "numba_cuda_mlir", "llvmlite"))
        assert not bad, bad
        print("ok")
    """))
    r = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0 and r.stdout.strip() == "ok", r.stderr


@gpu
@pytest.mark.parametrize("case", FRONT_END_CASES)
def test_nvrtc_filter_matches_numba(gpu_ext, any_backend, l2, case):
    """The same filter compiled by udf's translator ("nvrtc") and by numba, linked into one index:
    exact searches give the same ids and the same distances, bit for bit, and keep what the
    Python reference keeps."""
    nv, nb = front_end_filter(case, "nvrtc"), front_end_filter(case, any_backend)
    assert nv.backend == "nvrtc" and nb.backend == any_backend
    index = udf.Index.build(l2, DATA, n_lists=N_LISTS, ids=IDS, filters=[nv, nb])
    (d0, i0), (d1, i1) = (index.search(QUERIES, k=10, n_probes=N_LISTS, filter=f) for f in (nv, nb))
    np.testing.assert_array_equal(i0, i1)
    np.testing.assert_array_equal(d0.view(np.uint32), d1.view(np.uint32))
    check_filtered(d0, i0, l2_reference(), keep_of(nv), 10)
