"""CPU tests of ABI v2 metrics (ivf_flat.metric.v2) in the Python package: no GPU needed.

- the decorator's two shapes: `@udf.metric(shape="state", finalize=fin, initial=[...])` over
  `update(x, y, s, ctx)` and `@udf.metric(shape="vector")` over `distance(x, y, n_dims, ctx)`;
  `abi="v2"` with the shape inferred from the function;
- Pearson and cosine (state), L2 and Jensen-Shannon (vector) compiled with each back end for
  sm_90 and sm_120, the artifacts' manifests (abi, shape, initial, finalize), linked with the
  kernel pack (each UDF inlined into its v2 scan entries);
- the ctx layout of udf_ctx_v2 (query, id, captures at 24 + 8 i) in the code a back end makes;
- the float64 reference against NumPy;
- every declaration error and diagnostic, pointing at this file's lines;
- cuda_source_metric / ir_metric with shape= / abi="v2" (udfc --shape / --abi).
"""
from __future__ import annotations

import math
import re
import subprocess
from pathlib import Path

import numpy as np
import pytest

import udf
from udf._pycompile import MetricSpec, UdfCompileError, compile_python_metric, ltoir_arch, reference
from udf._pycompile.ctxtype import field_info
from udf._pycompile.spec import CaptureSpec

ARCHS = (90, 120)
HERE = Path(__file__).resolve()
DIM = 24
RNG = np.random.default_rng(13)
X = RNG.standard_normal((7, DIM)).astype(np.float32)
Y = RNG.standard_normal(DIM).astype(np.float32)
PX = RNG.uniform(0.0, 1.0, (7, DIM)).astype(np.float32)   # nonnegative: histograms for JS
PX[0, :5] = 0.0                                             # zero bins are allowed
PY = RNG.uniform(0.0, 1.0, DIM).astype(np.float32)


def expect_line(tag: str) -> int:
    """The line of this file carrying `# expect: TAG`."""
    hits = [i for i, ln in enumerate(HERE.read_text().splitlines(), 1) if ln.rstrip().endswith(f"# expect: {tag}")]
    assert len(hits) == 1, f"marker {tag!r} found {len(hits)} times"
    return hits[0]


# ---------------------------------------------------------------------------------------------
# the metrics (plain functions; each test decorates them for its back end)


def pearson_update(x, y, s, ctx):
    s[0] += x
    s[1] += y
    s[2] += x * y
    s[3] += x * x
    s[4] += y * y


def pearson_finalize(s, ctx):
    n = np.float32(ctx.n_dims)
    cov = s[2] - s[0] * s[1] / n
    vx = s[3] - s[0] * s[0] / n
    vy = s[4] - s[1] * s[1] / n
    return np.float32(1.0) - cov / math.sqrt(vx * vy)


def cosine_update(x, y, s, ctx):
    s[0] += x * y
    s[1] += x * x
    s[2] += y * y


def cosine_finalize(s, ctx):
    return np.float32(1.0) - s[0] / math.sqrt(s[1] * s[2])


COSINE_INITIAL = [0.0, 1e-30, 1e-30]  # the norms start tiny, not zero: no 0/0 for a zero vector


def l2_distance(x, y, n_dims, ctx):
    acc = np.float32(0.0)
    for i in range(n_dims):
        d = x[i] - y[i]
        acc += d * d
    return acc


def js_distance(x, y, n_dims, ctx):
    """Jensen-Shannon divergence of the two vectors normalised to sum 1 (both whole first)."""
    sx = np.float32(0.0)
    sy = np.float32(0.0)
    for i in range(n_dims):
        sx += x[i]
        sy += y[i]
    acc = np.float32(0.0)
    for i in range(n_dims):
        p = x[i] / sx
        q = y[i] / sy
        m = np.float32(0.5) * (p + q)
        if p > 0:
            acc += p * math.log(p / m)
        if q > 0:
            acc += q * math.log(q / m)
    return np.float32(0.5) * acc


def np_pearson(x, y):
    x, y = np.atleast_2d(x).astype(np.float64), y.astype(np.float64)
    xc, yc = x - x.mean(axis=1, keepdims=True), y - y.mean()
    return 1.0 - (xc @ yc) / np.sqrt((xc * xc).sum(axis=1) * (yc @ yc))


def np_cosine(x, y):
    x, y = np.atleast_2d(x).astype(np.float64), y.astype(np.float64)
    return 1.0 - (x @ y) / np.sqrt((x * x).sum(axis=1) * (y @ y))


def np_l2(x, y):
    d = np.atleast_2d(x).astype(np.float64) - y.astype(np.float64)
    return (d * d).sum(axis=1)


def np_js(x, y):
    p = np.atleast_2d(x).astype(np.float64)
    p = p / p.sum(axis=1, keepdims=True)
    q = y.astype(np.float64) / y.astype(np.float64).sum()
    m = 0.5 * (p + q)
    with np.errstate(divide="ignore", invalid="ignore"):
        kp = np.where(p > 0, p * np.log(p / m), 0.0).sum(axis=1)
        kq = np.where(q > 0, q * np.log(q / m), 0.0).sum(axis=1)
    return 0.5 * (kp + kq)


def _named(fn, name):
    """A copy of fn under another name (one C symbol per back end)."""
    import types
    g = types.FunctionType(fn.__code__, fn.__globals__, name, fn.__defaults__, fn.__closure__)
    g.__qualname__ = name
    return g


def v2_metrics(backend: str) -> dict[str, udf.PythonMetric]:
    """The four metrics of the issue, declared for `backend` (symbols suffixed with it)."""
    sfx = backend.replace("-", "_")
    return {
        "pearson": udf.metric(_named(pearson_update, f"pearson_{sfx}"), shape="state",
                              finalize=pearson_finalize, backend=backend),
        "cosine": udf.metric(_named(cosine_update, f"cosine_{sfx}"), shape="state", finalize=cosine_finalize,
                             initial=COSINE_INITIAL, backend=backend),
        "l2": udf.metric(_named(l2_distance, f"l2v_{sfx}"), shape="vector", backend=backend),
        "js": udf.metric(_named(js_distance, f"js_{sfx}"), shape="vector", backend=backend),
    }


# ---------------------------------------------------------------------------------------------
# declarations


def test_state_declaration(any_backend):
    m = udf.metric(pearson_update, shape="state", finalize=pearson_finalize, backend=any_backend)
    assert isinstance(m, udf.PythonMetric)
    assert (m.abi, m.shape, m.symbol, m.finalize) == ("v2", "state", "pearson_update", "pearson_update_finalize")
    assert (m.elem, m.acc, m.order, m.initial, m.coarse_metric) == ("f32", "f32", "min", (), "l2")
    assert m.typing.return_type == "none" and m.typing.finalize_return_type == "float32"
    assert m.typing.warnings == []
    assert m.udfc_flags() == ["--shape", "state", "--symbol", "pearson_update", "--finalize",
                              "pearson_update_finalize", "--elem", "f32", "--order", "min", "--coarse-metric", "l2"]
    assert "abi=v2 shape=state" in repr(m)
    c = udf.metric(cosine_update, shape="state", finalize=cosine_finalize, initial=COSINE_INITIAL,
                   order="min", backend=any_backend)
    assert c.initial == (0.0, 1e-30, 1e-30)
    assert c.udfc_flags()[c.udfc_flags().index("--initial") + 1] == "0.0,1e-30,1e-30"
    # a still callable function: the state is whatever the caller passes
    s = [0.0] * 8
    m(2.0, 3.0, s, None)
    assert s[:5] == [2.0, 3.0, 6.0, 4.0, 9.0]


def test_vector_declaration(any_backend):
    m = udf.metric(l2_distance, shape="vector", backend=any_backend)
    assert (m.abi, m.shape, m.finalize, m.initial) == ("v2", "vector", None, ())
    assert m.typing.return_type == "float32" and m.typing.finalize_return_type is None
    assert m.udfc_flags() == ["--shape", "vector", "--symbol", "l2_distance", "--elem", "f32", "--order", "min",
                              "--coarse-metric", "l2"]
    assert m([1.0, 2.0], [0.0, 0.0], 2, None) == 5.0


def test_abi_v2_infers_the_shape(any_backend):
    """abi="v2" without shape: as udfc infers it from a signature, no return value (void) is
    the state shape, a returned value the vector shape."""
    st = udf.metric(pearson_update, abi="v2", finalize=pearson_finalize, backend=any_backend)
    vec = udf.metric(l2_distance, abi="v2", backend=any_backend)
    assert (st.shape, vec.shape) == ("state", "vector")
    assert udf.metric(l2_distance, shape="vector", check=False).abi == "v2"  # shape implies v2
    v1 = udf.metric(lambda x, y, acc, ctx: acc + x, symbol_name="v1l", check=False)
    assert (v1.abi, v1.shape, v1.initial) == ("v1", None, 0.0)


def test_i32_state_and_integer_initial(any_backend):
    def sq_i8(x, y, s, ctx):
        d = x - y
        s[0] += d * d
        s[1] += 1

    def sq_i8_fin(s, ctx):
        return np.float32(s[0]) + np.float32(s[1])

    m = udf.metric(sq_i8, shape="state", finalize=sq_i8_fin, elem="i8", initial=[3, -2], backend=any_backend)
    assert (m.acc, m.initial) == ("i32", (3.0, -2.0))
    assert m.udfc_flags()[m.udfc_flags().index("--initial") + 1] == "3,-2"
    x = np.array([[1, 2, 3], [127, -128, 0]], np.int8)
    y = np.array([4, 5, 6], np.int8)
    want = [3 + 27 - 2 + 3, 3 + (123 ** 2 + 133 ** 2 + 36) - 2 + 3]
    np.testing.assert_array_equal(m.reference(x, y), want)
    with pytest.raises(ValueError, match=r"initial\[1\] 0.5: the i32 accumulator needs an integer"):
        udf.metric(sq_i8, shape="state", finalize=sq_i8_fin, elem="i8", initial=[1, 0.5], check=False)


def test_spec_flags_and_validation():
    spec = MetricSpec(symbol="u", finalize_symbol="f", shape="state", initial=[float("-inf"), 2],
                      captures={"w": "f32[]"}, order="max")
    assert (spec.abi, spec.role, spec.initial) == ("v2", "update", (float("-inf"), 2.0))
    assert spec.udfc_flags() == ["--abi", "v2", "--shape", "state", "--symbol", "u", "--finalize", "f", "--elem",
                                 "f32", "--acc", "f32", "--order", "max", "--initial", "-inf,2.0",
                                 "--coarse-metric", "l2", "--capture", "w:f32[]"]
    vec = MetricSpec(symbol="d", shape="vector")
    assert vec.role == "distance" and "--initial" not in vec.udfc_flags() and vec.ctx_fields[-2:] == ("query", "id")
    assert MetricSpec(symbol="u", abi="v2").role == "v2"  # the shape left to udfc (CUDA / IR)
    assert MetricSpec(symbol="u", initial=2.5).udfc_flags()[9] == "2.5"  # v1 unchanged
    assert MetricSpec(symbol="u", shape="state", finalize_symbol="f", initial=1.5).initial == (1.5,)
    for kwargs, pattern in [
        (dict(shape="state"), r"state shape needs a finalize function"),
        (dict(shape="vector", finalize_symbol="f"), r"vector shape has no finalize"),
        (dict(shape="vector", initial=[1.0]), r"vector shape has no state, so no initial"),
        (dict(shape="cube"), r"shape 'cube' is not one of state, vector"),
        (dict(abi="v3"), r"abi 'v3' is not one of v1, v2"),
        (dict(abi="v1", shape="vector"), r"ABI v2 shape; it cannot be used with abi='v1'"),
        (dict(shape="state", finalize_symbol="f", initial=[0.0] * 9), r"initial has 9 values; .* 8 words"),
        (dict(shape="state", finalize_symbol="f", initial=[float("nan")]), r"must not be NaN"),
        (dict(shape="state", finalize_symbol="f", initial="0,1"), r"give the state's first words as numbers"),
        (dict(initial=[0.0, 1.0]), r"ABI v1 metric has one accumulator"),
        (dict(shape="vector", captures={"id": "i32"}), r"capture name 'id' is reserved: .*udf_ctx_v2"),
        (dict(shape="vector", captures={"query": "f32[]"}), r"capture name 'query' is reserved"),
    ]:
        with pytest.raises(ValueError, match=pattern):
            MetricSpec(symbol="u", **kwargs)
    assert MetricSpec(symbol="u", captures={"id": "i32"}).abi == "v1"  # a v1 ctx has no id field


# ---------------------------------------------------------------------------------------------
# declaration errors (ValueError) and diagnostics (UdfCompileError at this file's lines)


def _fin(s, ctx):
    return s[0]


@pytest.mark.parametrize("make, pattern", [
    (lambda: udf.metric(shape="state", check=False)(pearson_update),
     r"shape='state' needs finalize=FIN, a Python function FIN\(s, ctx\) -> distance"),
    (lambda: udf.metric(shape="vector", initial=[0.0], check=False)(l2_distance),
     r"shape='vector' takes no initial: it has no state"),
    (lambda: udf.metric(shape="vector", initial=1.0, check=False)(l2_distance), r"shape='vector' takes no initial"),
    (lambda: udf.metric(shape="vector", finalize=_fin, check=False)(l2_distance),
     r"shape='vector' takes no finalize: distance\(x, y, n_dims, ctx\) returns the distance"),
    (lambda: udf.metric(shape="box", check=False)(l2_distance), r"shape 'box' is not one of state, vector"),
    (lambda: udf.metric(abi="v9", check=False)(l2_distance), r"abi 'v9' is not one of v1, v2"),
    (lambda: udf.metric(abi="v1", shape="vector", check=False)(l2_distance), r"cannot be used with abi='v1'"),
    (lambda: udf.metric(shape="state", finalize=_fin, initial=list(range(9)), check=False)(pearson_update),
     r"initial has 9 values; the ABI v2 state has 8 words"),
    (lambda: udf.metric(shape="state", finalize=_fin, captures={"id": 1}, check=False)(pearson_update),
     r"capture name 'id' is reserved"),
    (lambda: udf.metric(initial=[0.0, 1.0], symbol_name="v1", check=False)(lambda x, y, acc, ctx: acc),
     r"ABI v1 metric has one accumulator, so one number"),
])
def test_declaration_errors(make, pattern):
    with pytest.raises(ValueError, match=pattern):
        make()


def test_finalize_must_be_a_function():
    with pytest.raises(TypeError, match=r"finalize must be a Python function \(s, ctx\) -> distance"):
        udf.metric(shape="state", finalize="pearson_finalize", check=False)(pearson_update)


def _update_arity(backend):
    @udf.metric(shape="state", finalize=_fin, backend=backend)
    def upd3(x, y, s):  # expect: update-arity
        s[0] += x


def _finalize_arity(backend):
    def fin3(s, ctx, extra):  # expect: finalize-arity
        return s[0]

    @udf.metric(shape="state", finalize=fin3, backend=backend)
    def upd(x, y, s, ctx):
        s[0] += x


def _distance_arity(backend):
    @udf.metric(shape="vector", backend=backend)
    def dist3(x, y, ctx):  # expect: distance-arity
        return x[0]


def _update_returns(backend):
    @udf.metric(shape="state", finalize=_fin, backend=backend)
    def upd_ret(x, y, s, ctx):
        s[0] += x
        return s[0]  # expect: update-returns


def _writes_x(backend):
    @udf.metric(shape="vector", backend=backend)
    def dist_w(x, y, n_dims, ctx):
        x[0] = y[0]  # expect: writes-x
        return x[1]


def _finalize_writes_state(backend):
    def fin_w(s, ctx):
        s[1] = s[0]  # expect: finalize-writes
        return s[1]

    @udf.metric(shape="state", finalize=fin_w, backend=backend)
    def upd(x, y, s, ctx):
        s[0] += x


def _state_out_of_range(backend):
    @udf.metric(shape="state", finalize=_fin, backend=backend)
    def upd_far(x, y, s, ctx):
        s[8] += x  # expect: state-range


def _unknown_ctx_field(backend):
    @udf.metric(shape="vector", captures={"w": "f32[]"}, backend=backend)
    def dist_typo(x, y, n_dims, ctx):
        return x[0] * ctx.w[0] + np.float32(ctx.idd)  # expect: unknown-field


def _v1_reads_id(backend):
    @udf.metric(backend=backend)
    def v1_id(x, y, acc, ctx):
        return acc + np.float32(ctx.id)  # expect: v1-id


def _distance_returns_pointer(backend):
    @udf.metric(shape="vector", backend=backend)
    def dist_ptr(x, y, n_dims, ctx):
        return x  # expect: returns-pointer


def _distance_no_return(backend):
    @udf.metric(shape="vector", backend=backend)
    def dist_none(x, y, n_dims, ctx):  # expect: no-return
        x[0] + y[0]


def _typing_error(backend):
    @udf.metric(shape="state", finalize=_fin, backend=backend)
    def upd_str(x, y, s, ctx):
        s[0] += x + "a"  # expect: typing


DIAG_CASES = [
    ("update-arity", _update_arity,
     r"update function 'upd3' must take 4 parameters \(x, y, s, ctx\), it takes 3 \(x, y, s\)",
     r"void update\(float x, float y, udf_state_v2 \*s, const udf_ctx_v2 \*ctx\)"),
    ("finalize-arity", _finalize_arity, r"finalize function 'fin3' must take 2 parameters \(s, ctx\), it takes 3",
     r"float finalize\(const udf_state_v2 \*s, const udf_ctx_v2 \*ctx\)"),
    ("distance-arity", _distance_arity,
     r"distance function 'dist3' must take 4 parameters \(x, y, n_dims, ctx\), it takes 3",
     r"float distance\(const float \*x, const float \*y, uint32_t n_dims, const udf_ctx_v2 \*ctx\)"),
    ("update-returns", _update_returns, r"update function 'upd_ret' returns a value; an ABI v2 state update "
     r"returns nothing", None),
    ("writes-x", _writes_x, r"'x' is read-only: x is the stored vector", None),
    ("finalize-writes", _finalize_writes_state, r"'s' is read-only: finalize reads the state", None),
    ("state-range", _state_out_of_range, r"the state has 8 words, s\[0\] \.\. s\[7\]; s\[8\] is outside it", None),
    ("unknown-field", _unknown_ctx_field, r"ctx has no field 'idd'; did you mean 'id'\?",
     r"built-in fields: dim, n_dims, query, id"),
    ("v1-id", _v1_reads_id, r"ctx has no field 'id'", r"ctx.id is a field of the ABI v2 ctx"),
    ("returns-pointer", _distance_returns_pointer, r"distance function 'dist_ptr' returns float32\*, which cannot "
     r"be the distance", None),
    ("no-return", _distance_no_return, r"distance function 'dist_none' does not return a value", None),
    ("typing", _typing_error, r"no implementation of add\(float32, Literal\[str\]", None),
]


@pytest.mark.parametrize("case", DIAG_CASES, ids=[c[0] for c in DIAG_CASES])
def test_diagnostics(backend, case):
    tag, define, pattern, note = case
    with pytest.raises(UdfCompileError) as info:
        define(backend)
    e = info.value
    assert (e.filename, e.lineno) == (str(HERE), expect_line(tag)), str(e)
    assert str(e).startswith(f"{HERE}:{expect_line(tag)}:")
    assert re.search(pattern, e.message), e.message
    if note is not None:
        assert re.search(note, str(e)), str(e)
    assert e.__cause__ is None


# ---------------------------------------------------------------------------------------------
# the ctx layout


def test_ctx_v2_layout():
    caps = (CaptureSpec("w", "f32", True), CaptureSpec("p", "i32", False))
    got = {a: field_info(caps, a, "v2") for a in ("dim", "n_dims", "query", "id", "w", "p")}
    assert {a: (f.offset, f.kind) for a, f in got.items()} == {
        "dim": (0, "u32"), "n_dims": (4, "u32"), "query": (8, "u32"), "id": (16, "i64"), "w": (24, "ptr"),
        "p": (32, "i32")}
    assert field_info(caps, "w", "v1").offset == 16 and field_info(caps, "id", "v1") is None


def test_ctx_v2_loads_in_generated_code():
    """What numba-cuda emits for ctx.NAME in a v2 metric: loads at udf_ctx_v2's offsets."""
    from udf._pycompile import backend_available
    ok, why = backend_available("numba-cuda")
    if not ok:
        pytest.skip(why)
    from udf._pycompile import backend_numba_cuda as bnc
    from udf._pycompile.compile import load_backend
    _mod, st = load_backend("numba-cuda")
    T = st.types
    caps = (CaptureSpec("w", "f32", True), CaptureSpec("p", "f32", False))

    def probe(x, y, n_dims, ctx):
        return (ctx.w[1] + ctx.p + np.float32(ctx.id) + np.float32(ctx.query) + np.float32(ctx.n_dims)
                + np.float32(ctx.dim))

    ptr = T.CPointer(T.float32)
    lib = bnc._library(st, probe, T.float32(ptr, ptr, T.uint32, st.CtxType(caps, "v2")), "probe_v2", 90)
    ir = "\n".join(lib.llvm_strs)
    offsets = [int(m) for m in re.findall(r'getelementptr inbounds i8, i8\* %"arg\.ctx", i64 (\d+)', ir)]
    assert offsets == [24, 32, 16, 8, 4, 0], ir
    assert re.search(r"load i64, i64\* %\"[^\"]+\", align 8", ir)  # ctx.id: an int64


# ---------------------------------------------------------------------------------------------
# compile, manifests, link


@pytest.fixture(scope="module")
def compiled_v2():
    """{backend: ({name: metric}, {name: artifact for sm_90 + sm_120})} for each installed back end."""
    from udf._pycompile import backend_available
    out = {}
    for be in ("numba-cuda", "numba-cuda-mlir"):
        if not backend_available(be)[0]:
            continue
        metrics = v2_metrics(be)
        out[be] = (metrics, {name: m.compile([f"sm_{a}" for a in ARCHS]) for name, m in metrics.items()})
    return out


def _compiled(compiled_v2, backend):
    if backend not in compiled_v2:
        pytest.skip(f"backend {backend} not installed")
    return compiled_v2[backend]


def test_compile_and_manifests(backend, compiled_v2):
    metrics, arts = _compiled(compiled_v2, backend)
    for name, art in arts.items():
        m = metrics[name]
        man = art.manifest
        assert art.archs == ARCHS and man["payload_kind"] == "lto-ir"
        assert man["abi"] == {"id": "ivf_flat.metric.v2", "version": 2}, name
        shape = "state" if name in ("pearson", "cosine") else "vector"
        assert man["shape"] == shape and art.info.shape == shape and art.info.abi == "v2"
        assert man["symbol"] == m.symbol == art.symbol
        assert man["element_type"] == "f32" and man["accumulator_type"] == "f32"
        if shape == "state":
            assert man["finalize"] == f"{m.symbol}_finalize" == art.info.finalize
        else:
            assert man["finalize"] is None and art.info.finalize is None
        want_initial = COSINE_INITIAL if name == "cosine" else []
        assert man["initial"] == pytest.approx(want_initial) and art.info.initial == pytest.approx(tuple(want_initial))
        assert "v2 " + shape in repr(art)
    for arch in ARCHS:
        data = metrics["pearson"].ltoir([arch])[arch]
        assert ltoir_arch(data) == arch
    assert metrics["l2"].compile(ARCHS) is arts["l2"]  # cached per metric and archs


def test_compile_python_metric_api(any_backend):
    """The compile layer itself: shape / abi keywords, udfc flags with --abi v2 --shape."""
    res = compile_python_metric(js_distance, shape="vector", backend=any_backend, archs=["sm_90"])
    assert res.spec.shape == "vector" and res.return_type == "float32"
    assert res.udfc_flags()[:4] == ["--abi", "v2", "--shape", "vector"]
    res = compile_python_metric(cosine_update, abi="v2", finalize=cosine_finalize, initial=COSINE_INITIAL,
                                backend=any_backend, archs=[90])
    assert res.spec.shape == "state" and res.finalize_symbol == "cosine_update_finalize"
    assert res.return_type == "none"
    flags = res.udfc_flags()
    assert flags[flags.index("--initial") + 1] == "0.0,1e-30,1e-30"
    got = res.reference(X, Y)
    np.testing.assert_allclose(got, np_cosine(X, Y), rtol=1e-5)


def elf_func_symbols(data: bytes) -> list[str]:
    from test_pycompile import elf_func_symbols as f
    return f(data)


def test_link_with_v1_and_inlined(backend, compiled_v2, udf_tools, tmp_path):
    """The four v2 metrics and a v1 metric linked into one module for sm_90: v2 scan entries
    for each, the module manifest's shape / initial, and every UDF inlined."""
    udfc, link, pack = udf_tools
    metrics, arts = _compiled(compiled_v2, backend)
    v1 = udf.cuda_source_metric('extern "C" __device__ float v1_l1(float x, float y, float acc, const udf_ctx_v1 *c)'
                                ' { return acc + fabsf(x - y); }')
    paths = []
    for name, art in arts.items():
        paths.append(tmp_path / f"{name}.udfa")
        art.save(paths[-1])
    paths.append(tmp_path / "v1.udfa")
    v1.compile([90]).save(paths[-1])
    module = tmp_path / "v2.udfm"
    p = subprocess.run([link, *paths, "--arch", "sm_90", "-o", module, "--kernel-pack", pack, "--no-cache", "-v",
                        "--save-temps"], capture_output=True, text=True)
    assert p.returncode == 0, p.stderr
    assert "not inlined" not in p.stderr, p.stderr
    mod = udf.load_module(module)
    info = {m.symbol: m for m in mod.metrics}
    assert info["v1_l1"].abi == "v1" and info["v1_l1"].shape is None and info["v1_l1"].initial == 0.0
    for name, m in metrics.items():
        mi = info[m.symbol]
        assert (mi.abi, mi.shape) == ("v2", m.shape)
        assert mi.initial == pytest.approx(tuple(COSINE_INITIAL) if name == "cosine" else ())
        assert mi.max_k == 1024
    from test_pycompile import saved_funcs
    funcs = saved_funcs(module, 90)
    for m in metrics.values():
        entries = [f for f in funcs if f.startswith(f"udf_ivf_scan_v2_{m.shape}__{m.symbol}__")]
        assert entries, f"no v2 scan entry for {m.symbol} in {funcs}"
        for sym in (m.symbol, m.finalize):
            if sym is not None:
                left = [f for f in funcs if f == sym or f.endswith("$" + sym)]
                assert not left, f"{sym} was not inlined: {left}"
    assert [f for f in funcs if f.startswith("udf_ivf_scan_v1__v1_l1__")]
    # through the package: the same module (udf.link), an on-disk cache hit the second time
    linked = udf.link([*metrics.values(), v1], archs=[90])
    assert sorted(linked.symbols) == sorted([*[m.symbol for m in metrics.values()], "v1_l1"])
    assert udf.link([*metrics.values(), v1], archs=[90]).data == linked.data


# ---------------------------------------------------------------------------------------------
# CUDA C++ and IR metrics: --abi / --shape passed through

CUDA_PEARSON = """\
extern "C" __device__ void cu_pearson(float x, float y, udf_state_v2 *s, const udf_ctx_v2 *ctx) {
  s->f[0] += x; s->f[1] += y; s->f[2] += x * y; s->f[3] += x * x; s->f[4] += y * y;
}
extern "C" __device__ float cu_pearson_fin(const udf_state_v2 *s, const udf_ctx_v2 *ctx) {
  float n = (float)ctx->n_dims;
  float cov = s->f[2] - s->f[0] * s->f[1] / n;
  return 1.f - cov / sqrtf((s->f[3] - s->f[0] * s->f[0] / n) * (s->f[4] - s->f[1] * s->f[1] / n));
}
"""

CUDA_EMD = """\
extern "C" __device__ float cu_emd(const float *x, const float *y, uint32_t n, const udf_ctx_v2 *ctx) {
  float carry = 0.f, total = 0.f;
  for (uint32_t i = 0; i < n; ++i) { carry += x[i] - y[i]; total += fabsf(carry); }
  return total;
}
"""

LLVM_L1_VECTOR = """\
define float @ll_l1v(ptr %x, ptr %y, i32 %n, ptr %ctx) {
entry:
  %empty = icmp eq i32 %n, 0
  br i1 %empty, label %done, label %loop
loop:
  %i = phi i32 [0, %entry], [%i1, %loop]
  %acc = phi float [0.0, %entry], [%acc1, %loop]
  %px = getelementptr float, ptr %x, i32 %i
  %py = getelementptr float, ptr %y, i32 %i
  %vx = load float, ptr %px
  %vy = load float, ptr %py
  %d = fsub float %vx, %vy
  %a = call float @llvm.fabs.f32(float %d)
  %acc1 = fadd float %acc, %a
  %i1 = add i32 %i, 1
  %end = icmp eq i32 %i1, %n
  br i1 %end, label %done, label %loop
done:
  %r = phi float [0.0, %entry], [%acc1, %loop]
  ret float %r
}
declare float @llvm.fabs.f32(float)
"""


def test_cuda_source_metric_v2():
    m = udf.cuda_source_metric(CUDA_PEARSON, symbol_name="cu_pearson", finalize="cu_pearson_fin", shape="state",
                               initial=[0.0, 0.0])
    assert m.udfc_flags() == ["--shape", "state", "--symbol", "cu_pearson", "--finalize", "cu_pearson_fin",
                              "--initial", "0.0,0.0"]
    art = m.compile([90])
    assert art.manifest["abi"]["id"] == "ivf_flat.metric.v2" and art.manifest["shape"] == "state"
    assert art.manifest["initial"] == [0.0, 0.0] and art.info.finalize == "cu_pearson_fin"
    # abi="v2" alone: udfc infers the shape from the signature, and the metric adopts it
    inferred = udf.cuda_source_metric(CUDA_PEARSON, symbol_name="cu_pearson", finalize="cu_pearson_fin", abi="v2")
    assert inferred.udfc_flags()[:2] == ["--abi", "v2"] and inferred.shape is None
    inferred.compile([90])
    assert (inferred.abi, inferred.shape) == ("v2", "state")
    emd = udf.cuda_source_metric(CUDA_EMD, abi="v2")
    art = emd.compile([90, 120])
    assert (emd.symbol, emd.shape, art.info.shape, art.info.initial) == ("cu_emd", "vector", "vector", ())
    # the declaration errors are the decorator's, before udfc runs
    with pytest.raises(ValueError, match="state shape needs a finalize function"):
        udf.cuda_source_metric(CUDA_PEARSON, symbol_name="cu_pearson", shape="state")
    with pytest.raises(ValueError, match="vector shape has no state"):
        udf.cuda_source_metric(CUDA_EMD, shape="vector", initial=[1.0])


def test_cuda_v2_signature_error_is_a_tool_error():
    fin = 'extern "C" __device__ float cu_emd_fin(const udf_state_v2 *s, const udf_ctx_v2 *c) { return s->f[0]; }\n'
    m = udf.cuda_source_metric(CUDA_EMD + fin, symbol_name="cu_emd", shape="state", finalize="cu_emd_fin")
    with pytest.raises(udf.UdfToolError) as info:
        m.compile([90])
    text = str(info.value)
    assert "symbol 'cu_emd' has the wrong signature for ABI v2 (state shape)" in text, text


def test_ir_metric_v2(any_backend, tmp_path):
    m = udf.ir_metric(LLVM_L1_VECTOR, abi="v2")
    art = m.compile([90])
    assert (m.symbol, m.shape, art.manifest["shape"]) == ("ll_l1v", "vector", "vector")
    assert udf.ir_metric(LLVM_L1_VECTOR, shape="vector").udfc_flags() == ["--shape", "vector"]
    # LTO-IR made from Python, packaged by ir_metric: LTO-IR needs the shape (udfc cannot infer it)
    py = udf.metric(l2_distance, shape="vector", backend=any_backend)
    path = tmp_path / "l2v.ltoir"
    path.write_bytes(py.ltoir([90])[90])
    art = udf.ir_metric(path, symbol_name="l2_distance", shape="vector").compile([90])
    assert art.manifest["shape"] == "vector" and art.manifest["source"]["kind"] == "lto-ir"
    with pytest.raises(udf.UdfToolError) as info:
        udf.ir_metric(path, symbol_name="l2_distance", abi="v2").compile([90])
    assert "--shape" in str(info.value), str(info.value)


# ---------------------------------------------------------------------------------------------
# the float64 reference


def test_reference_matches_numpy(any_backend):
    ms = v2_metrics(any_backend)
    np.testing.assert_allclose(ms["pearson"].reference(X, Y), np_pearson(X, Y), rtol=1e-5)
    np.testing.assert_allclose(ms["cosine"].reference(X, Y), np_cosine(X, Y), rtol=1e-5)
    np.testing.assert_allclose(ms["l2"].reference(X, Y), np_l2(X, Y), rtol=1e-5)
    np.testing.assert_allclose(ms["js"].reference(PX, PY), np_js(PX, PY), rtol=1e-5, atol=1e-7)
    assert isinstance(ms["l2"].reference(X[0], Y), float)
    assert ms["l2"].reference(X[3], Y) == pytest.approx(np_l2(X[3], Y)[0], rel=1e-5)
    # cosine's initial words guard a zero vector: 1 - 0 / sqrt(tiny), not NaN
    assert ms["cosine"].reference(np.zeros(DIM, np.float32), Y) == pytest.approx(1.0)


def test_reference_ctx_fields():
    seen = []

    def probe(x, y, s, ctx):
        seen.append(("u", ctx.dim, ctx.n_dims, ctx.query, ctx.id))
        s[7] += 1.0

    def probe_fin(s, ctx):
        seen.append(("f", ctx.dim, ctx.query, ctx.id, tuple(s)))
        return s[0] + s[7]

    spec = MetricSpec(symbol="p", finalize_symbol="pf", shape="state", initial=[2.0])
    got = reference(probe, np.zeros((2, 2)), np.zeros(2), spec=spec, finalize=probe_fin, ids=[10, 11], query=5)
    np.testing.assert_array_equal(got, [4.0, 4.0])
    assert seen[:3] == [("u", 0, 2, 5, 10), ("u", 1, 2, 5, 10),
                        ("f", 2, 5, 10, (2.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 2.0))]
    assert seen[3][4] == 11

    def vprobe(x, y, n_dims, ctx):
        seen.append(("v", ctx.dim, n_dims, ctx.query, ctx.id, type(x).__name__))
        return float(ctx.id)

    seen.clear()
    vspec = MetricSpec(symbol="v", shape="vector")
    got = reference(vprobe, np.zeros((3, 4)), np.zeros(4), spec=vspec, ids=np.array([7, 8, 9]), query=1)
    np.testing.assert_array_equal(got, [7.0, 8.0, 9.0])
    assert seen[0] == ("v", 4, 4, 1, 7, "tuple")  # ctx.dim is n_dims; x read-only

    def bad_write(x, y, n_dims, ctx):
        x[0] = 1.0
        return 0.0

    with pytest.raises(TypeError):
        reference(bad_write, np.zeros(2), np.zeros(2), spec=vspec)
    with pytest.raises(ValueError, match="2 ids for 3 vectors"):
        reference(vprobe, np.zeros((3, 4)), np.zeros(4), spec=vspec, ids=[1, 2])
    with pytest.raises(AttributeError, match="built-in fields: dim, n_dims, query, id"):
        reference(lambda x, y, n, ctx: ctx.nope, np.zeros(2), np.zeros(2), spec=vspec)
