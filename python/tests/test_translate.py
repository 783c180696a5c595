"""The "nvrtc" Python front end (udf._pycompile.translate), on a CPU-only machine.

- its typing against numba's: every expression form of the subset over every operand type, and
  the sample metrics, typed by each installed numba back end (return type and float64
  warnings equal); the same for filters (query a uint32, id an int64), with the integer bit
  operations (& | ^ << >> ~) over every integer type;
- what is outside the subset falls back ("auto") or is refused ("nvrtc"), with the reason;
- the CUDA C++ it writes compiles with udfc (tools from $UDF_BIN_DIR), deterministically, and
  links; decorating and compiling import no numba.
The GPU test that both front ends give the same bits is test_gpu.py's
test_nvrtc_front_end_matches_numba_bit_for_bit (metrics) and test_filter.py's
test_nvrtc_filter_matches_numba (filters).
"""
from __future__ import annotations

import importlib.util
import itertools
import subprocess
import sys
import textwrap
import warnings
from pathlib import Path

import numpy as np
import pytest

import pycompile_samples as S
import udf
from udf._pycompile import check_python_metric
from udf._pycompile.translate import (NotInSubset, arith_type, bitwise_type, compare_type, invert_type, shift_type,
                                      unify_type)

CAPS = {"u": "u8[]", "q": "i32", "h": "f16[]", "w": "f32[]", "k": "i32[]", "p": "f32"}
# one operand of each type: bool, uint8, int32, int64, float32, float64, float16
OPERANDS = {"b1": "(x < y)", "u8": "ctx.u[ctx.dim]", "i32": "ctx.q", "i64": "ctx.dim", "f32": "x",
            "f64": "np.float64(x)", "f16": "ctx.h[ctx.dim]", "k32": "ctx.k[ctx.dim]", "p32": "ctx.p"}
CALLS = ["math.sqrt", "math.exp", "math.log", "math.fabs", "abs", "np.float32", "np.float64", "np.int32",
         "np.int64", "float", "int"]


def _corpus() -> list[tuple[str, str]]:
    """(name, expression) of every form the translator knows, over every operand type."""
    out = []
    T = list(OPERANDS)
    for a, b in itertools.product(T, T):
        for op in ("+", "-", "*", "/", "<", "=="):
            out.append((f"bin {a} {op} {b}", f"{OPERANDS[a]} {op} {OPERANDS[b]}"))
        out.append((f"min {a} {b}", f"min({OPERANDS[a]}, {OPERANDS[b]})"))
        out.append((f"max {a} {b}", f"max({OPERANDS[a]}, {OPERANDS[b]})"))
        out.append((f"ifexp {a} {b}", f"{OPERANDS[a]} if x < y else {OPERANDS[b]}"))
    for a in T:
        out.append((f"neg {a}", f"-{OPERANDS[a]}"))
        out.append((f"pos {a}", f"+{OPERANDS[a]}"))
        for f in CALLS:
            out.append((f"{f} {a}", f"{f}({OPERANDS[a]})"))
        for lit in ("2", "0.5", "np.float32(0.5)"):
            out.append((f"{a} * {lit}", f"{OPERANDS[a]} * {lit}"))
            out.append((f"{lit} - {a}", f"{lit} - {OPERANDS[a]}"))
        out.append((f"chain {a}", f"x < {OPERANDS[a]} <= y"))
        out.append((f"cond {a}", f"x if {OPERANDS[a]} else y"))  # an integer condition: nonzero
    return out


def _corpus_module(tmp_path_factory, name, signature, bodies):
    """[(label, function)] for [(label, body)], each body the function `signature` of a module
    written to a file and imported (numba and the translator need source)."""
    lines = ["import math", "import numpy as np", "P = []"]
    for i, (label, body) in enumerate(bodies):
        lines.append(f"def f{i}({signature}):\n    {body}\nP.append(({label!r}, f{i}))")
    path = tmp_path_factory.mktemp(name) / f"{name}.py"
    path.write_text("\n".join(lines) + "\n")
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod.P


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    """The corpus as functions of a module."""
    return _corpus_module(tmp_path_factory, "translate_corpus", "x, y, acc, ctx",
                          [(label, f"return {expr}") for label, expr in _corpus()])


def nvrtc_metric(fn, **kw):
    """udf.metric(fn, backend="nvrtc"), its float64 warnings silenced (the tests read them)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return udf.metric(fn, backend="nvrtc", **kw)


def _numba_type(t):
    """numba's type name, a literal int as the int64 it is computed as (a literal bool as bool)."""
    if t is not None and t.startswith("Literal[int]"):
        return "int64"
    return "bool" if t is not None and t.startswith("Literal[bool]") else t


def _float64_warnings(ws):
    return [w for w in ws if "computes in float64" in w]


def test_typing_matches_numba_on_every_form(corpus, backend):
    """Every corpus expression the translator takes is typed as numba types it, and computes in
    float64 on the same lines; it takes most of them."""
    taken = 0
    for name, fn in corpus:
        try:
            m = nvrtc_metric(fn, captures=CAPS)
        except ValueError as exc:
            assert "cannot translate" in str(exc), name
            continue
        taken += 1
        ref = check_python_metric(fn, captures=CAPS, backend=backend)
        assert m.typing.return_type == _numba_type(ref.return_type), \
            f"{name}: {m.typing.return_type} vs {backend} {ref.return_type}"
        assert _float64_warnings(m.typing.warnings) == _float64_warnings(ref.warnings), name
    assert taken >= 0.6 * len(corpus), f"the translator took only {taken} of {len(corpus)} forms"


SAMPLE_METRICS = [  # (metric, finalize, captures, elem, acc)
    (S.weighted_l2, S.wl2_sqrt, {"weights": "f32[]"}, "f32", "f32"),
    (S.mixed, S.mixed_finalize, {"h": "f16[]", "k": "i32[]", "u": "u8[]", "p": "f32", "q": "i32"}, "f32", "f32"),
    (S.int_l1, S.int_l1_finalize, {"scale": "i32", "unit": "f32"}, "i8", "i32"),
    (S.returns_int_for_float, None, {}, "f32", "f32"),
    (S.uses_float64, None, {}, "f32", "f32"),
]


@pytest.mark.parametrize("case", range(len(SAMPLE_METRICS)))
def test_sample_metrics_are_translated_and_typed_as_numba(case, backend):
    fn, fin, caps, elem, acc = SAMPLE_METRICS[case]
    m = nvrtc_metric(fn, finalize=fin, captures=caps, elem=elem, acc=acc)
    assert m.backend == "nvrtc" and m.nvrtc_unsupported is None
    ref = check_python_metric(fn, finalize=fin, captures=caps, elem=elem, acc=acc, backend=backend)
    assert (m.typing.return_type, m.typing.finalize_return_type) == \
        (_numba_type(ref.return_type), _numba_type(ref.finalize_return_type))
    assert _float64_warnings(m.typing.warnings) == _float64_warnings(ref.warnings)
    assert f'extern "C" __device__' in m.cuda_source and fn.__name__ in m.cuda_source


def test_typing_rules():
    """The rules themselves (the corpus test checks them against numba)."""
    assert arith_type("float32", "float32") == "float32"
    assert arith_type("float32", "int64") == "float64"   # a Python int literal with a float32
    assert arith_type("float32", "uint8") == "float32"
    assert arith_type("int32", "int32") == "int64"
    assert arith_type("int32", "int32", "/") == "float64"
    assert unify_type("uint8", "float16") == "float16"
    assert unify_type("int32", "uint8") == "int32"
    for a, b in (("uint8", "uint8"), ("float16", "float16"), ("bool", "int64")):
        with pytest.raises(NotInSubset):
            arith_type(a, b)



def test_integer_typing_rules():
    """uint32 (a filter's query), uint64 and the bit operations (the filter corpus checks them
    against numba)."""
    assert arith_type("uint32", "uint32") == "uint64" and arith_type("uint32", "int32") == "int64"
    assert arith_type("uint64", "int64") == "int64" and arith_type("uint32", "float32") == "float64"
    assert unify_type("uint32", "uint8") == "uint32" and unify_type("uint32", "int32") == "int64"
    assert compare_type("uint32", "int32") == "int64" and compare_type("uint64", "uint8") == "uint64"
    # & | ^: 64-bit when one operand is (numba-cuda-mlir keeps narrower widths: refused)
    assert bitwise_type("int64", "uint32") == "int64" and bitwise_type("uint64", "uint8") == "uint64"
    assert bitwise_type("uint64", "int32") == "int64" and bitwise_type("bool", "bool") == "bool"
    # shifts: 64-bit, the left operand's signedness; ~: 64-bit, the operand's signedness
    assert shift_type("uint8", "int64") == "uint64" and shift_type("int32", "uint32") == "int64"
    assert invert_type("uint32") == "uint64" and invert_type("int32") == "int64" and invert_type("bool") == "bool"
    for refused in (lambda: bitwise_type("int32", "int32"), lambda: bitwise_type("uint32", "uint8"),
                    lambda: bitwise_type("bool", "int64"), lambda: bitwise_type("float32", "int64"),
                    lambda: shift_type("bool", "int64"), lambda: shift_type("int64", "float32"),
                    lambda: invert_type("float32"), lambda: unify_type("uint64", "int64"),
                    lambda: compare_type("uint64", "int64"), lambda: compare_type("uint64", "float32")):
        with pytest.raises(NotInSubset):
            refused()


# --------------------------------------------------------------------------------------- filters

FILTER_CAPS = {"u": "u8[]", "k": "i32[]", "s": "i32", "p": "f32", "h": "f16[]"}
# one operand of each type a filter meets: uint32 (query), int64 (id), uint64, uint8, int32 (array and
# scalar), bool, float32, float16 and an int literal
FILTER_OPERANDS = {"q": "query", "id": "id", "u64": "(query >> 1)", "u8": "ctx.u[id]", "k32": "ctx.k[id]",
                   "i32": "ctx.s", "b1": "(id < 3)", "f32": "ctx.p", "f16": "ctx.h[id]", "lit": "3"}
FILTER_CALLS = ["abs", "int", "float", "bool", "np.int32", "np.int64", "np.float32", "np.float64"]


def _filter_corpus() -> list[tuple[str, str]]:
    """(name, body) of filter forms: every bit operation over every pair of operand types, the
    other operators and calls where a new integer type (uint32, uint64) takes part, the unary
    operators and calls of each type, integer conditions, and returns of two types."""
    T = FILTER_OPERANDS
    out = []
    for a, b in itertools.product(T, T):
        for op in ("&", "|", "^", "<<", ">>"):
            out.append((f"bin {a} {op} {b}", f"return {T[a]} {op} {T[b]}"))
        if "q" in (a, b) or "u64" in (a, b):
            for op in ("+", "-", "*", "/", "<", "=="):
                out.append((f"bin {a} {op} {b}", f"return {T[a]} {op} {T[b]}"))
            out.append((f"min {a} {b}", f"return min({T[a]}, {T[b]})"))
            out.append((f"max {a} {b}", f"return max({T[a]}, {T[b]})"))
            out.append((f"ifexp {a} {b}", f"return {T[a]} if id < 5 else {T[b]}"))
    for a in T:
        for op in ("~", "-", "+", "not "):
            out.append((f"unary {op.strip()} {a}", f"return {op}{T[a]}"))
        for f in FILTER_CALLS:
            out.append((f"{f} {a}", f"return {f}({T[a]})"))
        out.append((f"cond {a}", f"return 1 if {T[a]} else 0"))
        out.append((f"if {a}", f"if {T[a]}:\n        return True\n    return False"))
    for a, b in itertools.product(("b1", "q", "id", "u64", "u8", "k32", "lit"), repeat=2):
        out.append((f"returns {a} {b}", f"if id < 2:\n        return {T[a]}\n    return {T[b]}"))
    return out


@pytest.fixture(scope="module")
def filter_corpus(tmp_path_factory):
    """The filter corpus as functions of a module."""
    return _corpus_module(tmp_path_factory, "translate_filter_corpus", "query, id, ctx", _filter_corpus())


def _translated_filter(fn):
    """(return type, float64 warnings) as the translator types the filter, before the ABI's rule on
    what a filter returns (floats too, so that their types are compared), or None outside the subset."""
    from udf._pycompile import diagnostics as dg
    from udf._pycompile.source import function_source
    from udf._pycompile.spec import FilterSpec
    from udf._pycompile.translate import _Function
    src = function_source(fn)
    try:
        t = _Function(src, "filter", FilterSpec(fn.__name__, FILTER_CAPS), fn.__name__).translate()
    except NotInSubset:
        return None
    return t.return_type, dg.float64_warnings(dg.TypingInfo(None, [], t.float64_lines), src, "filter")


def _numba_filter(fn, backend):
    """(return type, float64 warnings) as numba types the filter (its return left open)."""
    from udf._pycompile import compile as C
    from udf._pycompile import diagnostics as dg
    from udf._pycompile.spec import FilterSpec
    job = C._FilterJob(fn, FilterSpec(fn.__name__, FILTER_CAPS), backend)
    info = C._typing(job.mod, job.st, job.src, job.spec, "filter", job.args, 90, backend)
    return _numba_type(str(info.return_type)), dg.float64_warnings(info, job.src, "filter")


def test_filter_typing_matches_numba_on_every_form(filter_corpus, backend):
    """Every filter form the translator takes (the bit operations and the uint32 / uint64 types
    among them) is typed as numba types it, and computes in float64 on the same lines."""
    taken = 0
    for name, fn in filter_corpus:
        mine = _translated_filter(fn)
        if mine is None:
            continue
        taken += 1
        assert mine == _numba_filter(fn, backend), f"{name}: {mine[0]} vs {backend}"
    assert taken >= 0.5 * len(filter_corpus), f"the translator took only {taken} of {len(filter_corpus)} forms"


@pytest.mark.parametrize("body, what", [
    ("return ctx.k[id] & ctx.s", "& | ^ of int32 and int32 (int64 in numba-cuda, int32 in numba-cuda-mlir)"),
    ("return query & ctx.u[id]", "& | ^ of uint32 and uint8"),
    ("return (id < 3) & id", "a bit operation of a bool and a number"),
    ("return (id < 3) << 1", "a shift of a bool"),
    ("return -query < 0", "-uint32"),
    ("return id % 3 == 0", "the operator Mod"),
    ("return ctx.p", "returning a float32: a filter returns a bool"),
])
def test_filter_forms_outside_the_subset(tmp_path, body, what):
    """What the back ends type differently, or numba alone compiles, is refused, with the reason."""
    path = tmp_path / "outside_filter.py"
    path.write_text(f"def outside(query, id, ctx):\n    {body}\n")
    spec = importlib.util.spec_from_file_location("outside_filter", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    with pytest.raises(ValueError, match="backend='nvrtc' cannot translate 'outside'") as info:
        udf.filter(mod.outside, captures=FILTER_CAPS, backend="nvrtc", check=False)
    assert what in str(info.value)
    with pytest.warns(udf.FrontEndWarning, match="so filter 'outside' compiles with"):
        f = udf.filter(mod.outside, captures=FILTER_CAPS, check=False)
    assert f.backend != "nvrtc" and what in f.nvrtc_unsupported and f.cuda_source is None


def _outside():
    def loop(x, y, acc, ctx):
        s = acc
        for j in range(3):
            s += x - y
        return s

    def helper_call(x, y, acc, ctx):
        return acc + S.weighted_l2(x, y, acc, ctx)

    def two_types(x, y, acc, ctx):
        d = x - y
        if d < 0:
            d = 0.5
        return acc + d

    def sqrt_of_int(x, y, acc, ctx):
        return acc + math.sqrt(ctx.dim)

    def u8_twice(x, y, acc, ctx):
        return acc + ctx.u[0] * ctx.u[1]

    def power(x, y, acc, ctx):
        return acc + (x - y) ** 2

    def maybe_unassigned(x, y, acc, ctx):
        if x < y:
            d = y - x
        return acc + d

    import math
    return {"loop": loop, "helper_call": helper_call, "two_types": two_types, "sqrt_of_int": sqrt_of_int,
            "u8_twice": u8_twice, "power": power, "maybe_unassigned": maybe_unassigned}


@pytest.mark.parametrize("name", sorted(_outside()))
def test_outside_the_subset(name):
    """"auto" takes numba for these, saying why; "nvrtc" refuses them."""
    fn = _outside()[name]
    with pytest.warns(udf.FrontEndWarning, match=f"so metric '{name}' compiles with"):
        m = udf.metric(fn, captures={"u": "u8[]"}, check=False)
    assert m.backend != "nvrtc" and m.nvrtc_unsupported, name
    assert m.cuda_source is None
    with pytest.raises(ValueError, match="backend='nvrtc' cannot translate"):
        udf.metric(fn, captures={"u": "u8[]"}, backend="nvrtc", check=False)


def _power(x, y, acc, ctx):
    d = x - y
    return acc + d ** 2  # expect: pow


def _loop(x, y, acc, ctx):
    s = acc
    for i in range(2):  # expect: loop
        s += (x - y) * (x - y)
    return s


def _floor_div(x, y, acc, ctx):
    return acc + (x - y) // np.float32(2)  # expect: floordiv


def _root(acc, ctx):
    return acc ** 0.5  # expect: root


def _plain(x, y, acc, ctx):
    d = x - y
    return acc + d * d


def _expect_line(tag: str) -> int:
    text = Path(__file__).read_text().splitlines()
    hits = [i for i, ln in enumerate(text, 1) if ln.rstrip().endswith(f"# expect: {tag}")]
    assert len(hits) == 1, tag
    return hits[0]


def _off_path_message(construct: str, function: str, fix: str) -> str:
    from udf._pycompile.compile import DEFAULT_BACKEND as be
    return (f"`{construct}` is outside udf's fast front end, so {function} compiles with {be} (seconds of numba "
            f"import in each process that compiles it): {fix} (or pass backend='{be}' to choose numba and silence "
            f"this)")


OFF_PATH = [  # (tag, metric, finalize, construct, function, fix)
    ("pow", _power, None, "d ** 2", "metric '_power'", "write `d * d` instead"),
    ("loop", _loop, None, "for i in range(2)", "metric '_loop'",
     "no loop is needed: an ABI v1 metric is called once per coordinate (ctx.dim); to loop over whole vectors, "
     "declare shape='vector' (ABI v2: distance(x, y, n_dims, ctx))"),
    ("floordiv", _floor_div, None, "(x - y) // np.float32(2)", "metric '_floor_div'",
     "the subset is docs/python.md's (\"Two front ends\"); outside it here: the operator FloorDiv"),
    ("root", _plain, _root, "acc ** 0.5", "finalize '_root'", "write `math.sqrt(acc)` instead"),
]


@pytest.mark.parametrize("case", OFF_PATH, ids=[c[0] for c in OFF_PATH])
def test_leaving_the_fast_path_warns_at_the_users_line(case):
    """A metric that "auto" sends to numba for one construct gets one udf.FrontEndWarning (a
    UdfWarning) at that construct's line, naming it and the rewrite that stays on the fast path."""
    tag, fn, fin, construct, function, fix = case
    with pytest.warns(udf.FrontEndWarning) as rec:
        m = udf.metric(fn, finalize=fin, check=False)
    assert m.backend != "nvrtc"
    ws = [w for w in rec if w.category is udf.FrontEndWarning]
    assert len(ws) == 1 and issubclass(udf.FrontEndWarning, udf.UdfWarning)
    assert (ws[0].filename, ws[0].lineno) == (fn.__code__.co_filename, _expect_line(tag))
    assert str(ws[0].message) == _off_path_message(construct, function, fix)
    # backend='nvrtc' refuses it with the same fix
    with pytest.raises(ValueError, match="backend='nvrtc' cannot translate") as info:
        udf.metric(fn, finalize=fin, check=False, backend="nvrtc")
    assert str(info.value).endswith(f": {fix}; backend='auto' (the default) compiles it with numba instead")


def test_no_fast_path_warning_where_numba_is_the_choice():
    """No FrontEndWarning when a numba back end is named, for ABI v2 (no fast path) or for a
    function the translator takes."""
    from udf._pycompile.compile import DEFAULT_BACKEND

    def vec(x, y, n_dims, ctx):
        acc = np.float32(0)
        for i in range(n_dims):
            acc += (x[i] - y[i]) * (x[i] - y[i])
        return acc

    with warnings.catch_warnings():
        warnings.simplefilter("error", udf.FrontEndWarning)
        udf.metric(_power, backend=DEFAULT_BACKEND, check=False)
        udf.metric(vec, shape="vector", check=False)
        assert udf.metric(_plain, check=False).backend == "nvrtc"


def test_a_failing_function_gets_its_error_not_the_warning(any_backend):
    """Where numba cannot compile what took the function off the fast path (a loop over x, which
    is one coordinate in ABI v1), the error comes alone, at the line, with the fix."""
    def loops(x, y, acc, ctx):
        s = acc
        for v in x:  # expect: loop-over-x
            s += v
        return s

    with warnings.catch_warnings():
        warnings.simplefilter("error", udf.FrontEndWarning)
        with pytest.raises(udf.UdfCompileError) as info:
            udf.metric(loops)
    e = info.value
    assert (e.lineno, e.message) == (_expect_line("loop-over-x"), "cannot loop over a float32: it is one number, "
                                                                   "not an array")
    assert e.notes == ("the metric function is called once per coordinate, with x and y one coordinate each: fold "
                       "that coordinate with no loop, or declare shape='vector' (ABI v2: distance(x, y, n_dims, ctx), "
                       "x and y whole vectors) to loop over them",)
    assert e.__cause__ is None and len(str(e).splitlines()) == 2


def test_v2_and_lambdas():
    """ABI v2 goes to numba; a lambda finalize is translated."""
    def update(x, y, s, ctx):
        s[0] += x * y
    m = udf.metric(update, shape="state", finalize=lambda s, ctx: s[0], check=False)
    assert m.backend != "nvrtc" and "ABI v2" in m.nvrtc_unsupported
    m = nvrtc_metric(S.weighted_l2, captures={"weights": "f32[]"}, finalize=lambda acc, ctx: acc * np.float32(2))
    assert m.typing.finalize_return_type == "float32" and "weighted_l2_finalize" in m.cuda_source


def test_udfc_compiles_it_deterministically(udf_tools, tmp_path, monkeypatch):
    """The source compiles for four archs; the same function gives the same bytes; the LTO-IR
    is the artifact's payload; the declaration is the manifest's."""
    monkeypatch.setenv("UDF_PYTHON_CACHE", "0")
    fn, fin, caps, elem, acc = SAMPLE_METRICS[1]
    arts = []
    for _ in range(2):
        m = nvrtc_metric(fn, finalize=fin, captures=caps, elem=elem, acc=acc)
        arts.append(m.compile([80, 90, 100, 120]))
    a, b = arts
    assert a.data == b.data and a.archs == (80, 90, 100, 120)
    assert a.symbol == "mixed" and a.info.finalize == "mixed_finalize"
    assert [c.name for c in a.info.captures] == ["h", "k", "u", "p", "q"]
    code = m.ltoir([90])
    assert code[90][:4] == b"\xed\x43\x4e\x7f"
    m2 = nvrtc_metric(*SAMPLE_METRICS[2][:1], finalize=SAMPLE_METRICS[2][1], captures=SAMPLE_METRICS[2][2],
                      elem="i8", acc="i32")
    assert m2.compile([90]).info.acc == "i32"


def test_links_into_a_module(udf_tools, tmp_path):
    m = nvrtc_metric(S.weighted_l2, captures={"weights": "f32[]"}, finalize=S.wl2_sqrt)
    mod = udf.link([m], archs=[90], max_k=32)
    assert mod.archs == (90,) and len(mod) > 10000


def test_decorating_and_compiling_import_no_numba(udf_tools, tmp_path):
    """A new process: @udf.metric and compile() of a subset metric import no numba."""
    code = textwrap.dedent(f"""
        import sys
        sys.path.insert(0, {str(Path(udf.__file__).resolve().parents[1])!r})
        import numpy as np, udf
        @udf.metric(captures={{"w": "f32[]"}})
        def wl2_fresh_{abs(hash(str(tmp_path))) % 10**6}(x, y, acc, ctx):
            d = x - y
            return acc + ctx.w[ctx.dim] * d * d
        m = wl2_fresh_{abs(hash(str(tmp_path))) % 10**6}
        assert m.backend == "nvrtc", m.nvrtc_unsupported
        m.compile([90])
        bad = sorted(k for k in sys.modules if k.split(".")[0] in ("numba", "numba_cuda", "numba_cuda_mlir", "llvmlite"))
        assert not bad, bad
        print("ok")
    """)
    script = tmp_path / "fresh.py"
    script.write_text(code)
    r = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0 and r.stdout.strip() == "ok", r.stderr


def test_a_renamed_function_is_still_found():
    """__name__ reassigned (as decorators and tests do): the source is found by the code's name."""
    def l2_renamed(x, y, acc, ctx):
        d = x - y
        return acc + d * d
    l2_renamed.__name__ = "l2_other_name"
    m = nvrtc_metric(l2_renamed)
    assert m.backend == "nvrtc" and m.symbol == "l2_other_name" and "l2_other_name(" in m.cuda_source
