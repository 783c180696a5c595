"""Turning numba's results and errors into diagnostics on the user's file.

Both back ends embed a copy of numba's front end (numba-cuda: numba.core / numba.cuda.core;
numba-cuda-mlir: numba_cuda_mlir.numba_cuda.core), so the code here is duck-typed over
their IR (`Return`, `Assign`, `Expr(op="cast")`) and takes each back end's `types` module.
"""
from __future__ import annotations

import os
import re
from dataclasses import dataclass

from .errors import Diagnostic, UdfCompileError
from .source import FunctionSource
from .spec import MetricSpec

_ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")
_FILE_LINE = re.compile(r'File "([^"]+)", line (\d+)')
_AT_LINE = re.compile(r"\bat (\S+) \((\d+)\)")
_UNKNOWN_ATTR = re.compile(r"Unknown attribute '([^']+)' of type UdfCtx")
_NO_IMPL = re.compile(r"No implementation of function (.+) found for signature")
_NO_CONVERSION = re.compile(r"No conversion from (.+?) to (\S+) for '[^']*'(?:, defined at \S+)?")
# a loop over (or len of) a number: what a newcomer writes who takes x and y for vectors
_SCALAR_ITER = re.compile(r"Invalid use of getiter with parameters \(((?:float|int|uint)\d+)\)")
_SCALAR_LEN = re.compile(r"\blen\(((?:float|int|uint)\d+)\)")


def strip_ansi(text: str) -> str:
    return _ANSI.sub("", text)


def _same_file(a: str | None, b: str | None) -> bool:
    if not a or not b:
        return False
    if a == b:
        return True
    try:
        if os.path.abspath(a) == os.path.abspath(b):
            return True
    except (TypeError, ValueError):
        pass
    return os.path.basename(a) == os.path.basename(b) and (not os.path.isabs(a) or not os.path.isabs(b))


def locate(exc: BaseException, text: str, src: FunctionSource) -> tuple[int | None, int | None]:
    """(line, col) of a numba error in the user's file, or (None, None).

    Tried in order: the exception's `loc`; `File "...", line N` and `at PATH (N)` in its text;
    the numba IR locations (`loc`, `inst.loc`, `self.loc`) held by the frames it passed
    through, innermost first.  The last one is needed for numba-cuda 0.30, whose typing errors
    from numba.core templates (e.g. `float32 + str`) reach the caller without a location.
    """
    loc = getattr(exc, "loc", None)
    line = getattr(loc, "line", None)
    if line and _same_file(getattr(loc, "filename", None), src.filename):
        return int(line), _col(loc)
    for rx in (_FILE_LINE, _AT_LINE):
        for m in rx.finditer(text):
            if _same_file(m.group(1), src.filename):
                return int(m.group(2)), None
    seen = set()
    e = exc
    while e is not None and id(e) not in seen:
        seen.add(id(e))
        found = _loc_from_traceback(e.__traceback__, src)
        if found is not None:
            return found
        e = e.__cause__ or e.__context__
    return None, None


def _col(loc):
    col = getattr(loc, "col", None)
    return int(col) + 1 if isinstance(col, int) and col >= 0 else None


def _loc_from_traceback(tb, src):
    frames = []
    while tb is not None:
        frames.append(tb.tb_frame)
        tb = tb.tb_next
    for frame in reversed(frames):
        f_locals = frame.f_locals
        for cand in (f_locals.get("loc"), _safe_loc(f_locals.get("inst")), _safe_loc(f_locals.get("self"))):
            if type(cand).__name__ != "Loc":
                continue
            line = getattr(cand, "line", None)
            if isinstance(line, int) and line > 0 and \
                    _same_file(getattr(cand, "filename", None), src.filename):
                return line, _col(cand)
    return None


def _safe_loc(obj):
    """obj.loc, for numba IR objects only (some objects raise odd errors from __getattr__)."""
    if obj is None:
        return None
    try:
        return obj.__dict__.get("loc") if hasattr(obj, "__dict__") else None
    except Exception:
        return None


def _headline(text: str) -> str:
    """The first meaningful sentence of a numba error (no pipeline banner, no source excerpt)."""
    out = []
    want_signature = False
    for raw in text.splitlines():
        s = raw.strip()
        skip = (not s or s.startswith(("Failed in ", "During:", 'File "', "<source elided>"))
                or s == "^")
        if skip:
            if out and not want_signature:
                break
            continue
        if want_signature:
            if s.startswith(">>>"):
                out.append(s[3:].strip())
            break
        out.append(s)
        if s.startswith("No implementation of function"):
            want_signature = True
            continue
        break
    if not out:
        return text.strip().splitlines()[0] if text.strip() else "unknown error"
    m = _NO_IMPL.match(out[0])
    if m and len(out) > 1:
        return f"no implementation of {out[1]} for these argument types"
    return " ".join(out).rstrip(":")


def exception_to_error(exc: BaseException, src: FunctionSource, spec: MetricSpec, *, role: str,
                       backend: str, arch: int | None = None) -> UdfCompileError:
    """A UdfCompileError located in the user's file for an exception raised by a back end."""
    raw = strip_ansi(str(exc))
    line, col = locate(exc, raw, src)
    notes = []
    m = _UNKNOWN_ATTR.search(raw)
    is_numba = any(c.__name__ in ("NumbaError", "TypingError") for c in type(exc).__mro__)
    if m:
        message = f"ctx has no field '{m.group(1)}'"
        builtin = ", ".join(getattr(spec, "ctx_fields", ("dim", "n_dims")))
        notes.append(f"declared captures: {spec.describe_captures()}; built-in fields: {builtin}")
    else:
        head = _headline(raw)
        m2 = _NO_CONVERSION.search(head)
        m3 = _SCALAR_ITER.search(head) or _SCALAR_LEN.search(head)
        if m2:
            message = f"cannot convert {m2.group(1)} to {m2.group(2)}"
        elif m3 and is_numba:
            what = "loop over" if m3.re is _SCALAR_ITER else "take len() of"
            message = f"cannot {what} a {m3.group(1)}: it is one number, not an array"
            if role in ("metric", "update"):
                notes.append(f"the {role} function is called once per coordinate, with x and y one coordinate "
                             "each: fold that coordinate with no loop, or declare shape='vector' (ABI v2: "
                             "distance(x, y, n_dims, ctx), x and y whole vectors) to loop over them")
        elif is_numba:
            message = head
        elif type(exc).__name__ == "CudaSupportError":
            message = (f"{backend} asked the CUDA driver for the GPU's compute capability while "
                       "compiling this line, and there is no driver here")
            notes.append("numba-cuda does this to compile a call to a @cuda.jit(device=True) "
                         "function; declare the helper with @cuda.jit(device=True, "
                         "inline='always') so it is inlined instead, or use numba-cuda-mlir")
        elif "Dispatcher" in head:
            message = f"this line calls a function that was not jitted for {backend} ({head})"
            notes.append("helpers must be jitted for the same back end: numba.cuda.jit(device=True) "
                         "for numba-cuda, numba_cuda_mlir.cuda.jit(device=True) for numba-cuda-mlir")
        else:
            message = (f"internal error in {backend} while compiling the {role} function "
                       f"'{src.name}': {type(exc).__name__}: {head}")
            notes.append(f"the construct at this location is probably not supported by {backend}")
    if arch is not None:
        notes.append(f"while compiling for sm_{arch} with {backend}")
    if line is None:
        line, col = src.def_line, src.def_col
    return UdfCompileError(message, src.filename, line, col, notes=notes, backend=backend,
                           backend_message=raw)


# ---------------------------------------------------------------------------------------------
# the typing pass: return types and float64 use


@dataclass
class TypingInfo:
    """What the back end's type inference found (return type unconstrained)."""

    return_type: object
    returns: list  # [(type, line, col)] one per `return` in the source
    float64_lines: list  # [line] where float64 values are computed


def typing_info(cres, types_mod) -> TypingInfo:
    ta = cres.type_annotation
    typemap = ta.typemap
    returns = []
    float64_lines = []
    for block in ta.blocks.values():
        defs = {}
        for st in block.body:
            kind = type(st).__name__
            if kind == "Assign":
                defs[st.target.name] = st
                t = typemap.get(st.target.name)
                v = st.value
                if t == types_mod.float64 and type(v).__name__ == "Expr" and \
                        getattr(v, "op", None) in ("binop", "inplace_binop", "call", "unary"):
                    float64_lines.append(st.loc.line)
            elif kind == "Return":
                var = st.value
                asg = defs.get(var.name)
                inner = var
                if asg is not None and type(asg.value).__name__ == "Expr" and asg.value.op == "cast":
                    inner = asg.value.value
                rt = typemap.get(inner.name, typemap.get(var.name))
                col = getattr(st.loc, "col", None)
                returns.append((rt, st.loc.line, col + 1 if isinstance(col, int) and col >= 0 else None))
    return TypingInfo(cres.signature.return_type, returns, sorted(set(float64_lines)))


def check_return_types(info: TypingInfo, types_mod, src: FunctionSource, spec: MetricSpec, *,
                       role: str, backend: str) -> None:
    """Reject returns that cannot become the ABI's return type (see module docstring of compile.py)."""
    want = ("bool" if role == "filter" else "void" if role == "update"
            else "i32" if (role == "metric" and spec.acc == "i32") else "f32")
    diags = []
    returns = info.returns or [(info.return_type, src.def_line, src.def_col)]
    for t, line, col in returns:
        problem, notes = _return_problem(t, types_mod, want, role, spec)
        if problem:
            diags.append(Diagnostic(f"the {role} function '{src.name}' {problem}", src.filename,
                                    line, col, tuple(notes)))
    if diags:
        d0 = diags[0]
        raise UdfCompileError(d0.message, d0.filename, d0.lineno, d0.col, notes=d0.notes,
                              diagnostics=diags, backend=backend)


def _return_problem(t, types, want, role, spec):
    T = types
    if t is None:
        return None, []
    what = {"metric": "the accumulator", "finalize": "the distance", "distance": "the distance",
            "filter": "whether to keep the vector"}.get(role, "the value")
    tname = str(t)
    if want == "bool":
        return _filter_return_problem(t, types, tname)
    if want == "void":
        if isinstance(t, (T.NoneType, getattr(T, "Omitted", T.NoneType))) or t == T.none:
            return None, []
        return (f"returns {tname}; an ABI v2 state update returns nothing (it updates the state in place)",
                ["the finalize function returns the distance"])
    if isinstance(t, (T.NoneType, getattr(T, "Omitted", T.NoneType))) or t == T.none:
        return "returns None", [f"it must return {what}"]
    if isinstance(t, T.Optional):
        return (f"may return None ({tname}): a path ends without a value",
                [f"every path must return {what}"])
    if isinstance(t, T.BaseTuple):
        return (f"returns a tuple ({tname}); it must return one value, {what}", [])
    if isinstance(t, T.Complex):
        return f"returns a complex number ({tname})", [f"{what} is {want}"]
    if isinstance(t, (T.Boolean, T.Integer)):
        return None, []
    if isinstance(t, T.Float):
        if want == "f32":
            return None, []
        return (f"returns {tname}, but the accumulator is i32 (int32_t): a float would be "
                "truncated silently",
                ["convert explicitly, e.g. `return int(...)`, or declare acc='f32'"])
    return f"returns {tname}, which cannot be {what} ({want})", []


def _filter_return_problem(t, T, tname):
    """A filter returns a bool: booleans and integers (nonzero: keep) are fine, the rest is not."""
    if isinstance(t, (T.NoneType, getattr(T, "Omitted", T.NoneType))) or t == T.none:
        return "returns None", ["it must return whether to keep the vector (a bool)"]
    if isinstance(t, T.Optional):
        return (f"may return None ({tname}): a path ends without a value",
                ["every path must return whether to keep the vector (a bool)"])
    if isinstance(t, T.BaseTuple):
        return f"returns a tuple ({tname}); it must return one bool", []
    if isinstance(t, (T.Boolean, T.Integer)):
        return None, []
    if isinstance(t, (T.Float, T.Complex)):
        return (f"returns {tname}, but a filter returns a bool",
                ["compare explicitly, e.g. `return ctx.prices[id] >= ctx.lo` or `return x != 0.0`"])
    return f"returns {tname}, which cannot be a bool (whether to keep the vector)", []


def float64_warnings(info: TypingInfo, src: FunctionSource, role: str) -> list[str]:
    if not info.float64_lines:
        return []
    lines = ", ".join(str(n) for n in info.float64_lines[:8])
    first = info.float64_lines[0]
    return [Diagnostic(
        f"the {role} function '{src.name}' computes in float64 (lines {lines}); on the GPU "
        "float64 is much slower than float32",
        src.filename, first, None,
        ("a Python float literal such as 0.5 is float64 in numba, and int32/int64 mixed with "
         "float32 gives float64; write np.float32(0.5) or convert with np.float32(...)",),
        severity="warning").format()]
