"""The user's Python function: where it is, and the checks done on its AST before numba runs.

The AST checks find, with exact file/line/column, what numba reports late, without a line,
or not at all (an internal crash): wrong arity, an unknown `ctx.NAME`, an undefined
global name, try/with/raise/assert/yield, list/dict/set displays (they need the NRT
allocator, which a UDF has not got) and paths that fall off the end without `return`.
Anything they do not reject is left to numba, whose errors are mapped back to the same
file by diagnostics.py.
"""
from __future__ import annotations

import ast
import builtins
import difflib
import inspect
from dataclasses import dataclass

from .errors import _DiagList
from .spec import CTX_FIELDS, STATE_WORDS, MetricSpec


@dataclass
class FunctionSource:
    fn: object
    name: str
    filename: str | None
    def_line: int | None
    def_col: int | None
    node: ast.AST | None  # ast.FunctionDef / ast.Lambda, line numbers already in file terms
    params: list[str]
    kinds_ok: bool  # only plain positional parameters


def function_source(fn) -> FunctionSource:
    if not callable(fn) or not hasattr(fn, "__code__"):
        raise TypeError(f"expected a Python function, got {type(fn).__name__}")
    code = fn.__code__
    name = getattr(fn, "__name__", "<function>")
    filename = code.co_filename
    def_line = code.co_firstlineno
    def_col = None
    sig = inspect.signature(fn)
    params = []
    kinds_ok = True
    for p in sig.parameters.values():
        if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD):
            params.append(p.name)
        else:
            kinds_ok = False
            params.append(("*" if p.kind == p.VAR_POSITIONAL else "**" if p.kind == p.VAR_KEYWORD else "")
                          + p.name)
    # (by the code's own name: the `def` in the source, also when __name__ was reassigned)
    node = _find_node(fn, code.co_name)
    if node is not None:
        def_line = node.lineno
        def_col = node.col_offset + 1
    return FunctionSource(fn, name, filename, def_line, def_col, node, params, kinds_ok)


def _find_node(fn, name):
    """The FunctionDef (or Lambda) of fn, with line numbers and columns of the file."""
    try:
        lines, start = inspect.getsourcelines(fn)
    except (OSError, TypeError):
        return None
    text = "".join(lines)
    prefix_lines = 0
    if lines and lines[0][:1] in (" ", "\t"):
        text = "if 1:\n" + text  # keeps columns exact, unlike textwrap.dedent
        prefix_lines = 1
    try:
        tree = ast.parse(text)
    except SyntaxError:
        return None
    shift = start - 1 - prefix_lines
    for n in ast.walk(tree):
        if hasattr(n, "lineno"):
            n.lineno += shift
            if getattr(n, "end_lineno", None) is not None:
                n.end_lineno += shift
    if name == "<lambda>":
        lambdas = [n for n in ast.walk(tree) if isinstance(n, ast.Lambda)]
        return lambdas[0] if len(lambdas) == 1 else None
    for n in ast.walk(tree):
        if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)) and n.name == name:
            return n
    return None


# ---------------------------------------------------------------------------------------------
# checks

_UNSUPPORTED_STMTS = {
    ast.Try: "try/except is not supported in a UDF",
    ast.With: "'with' is not supported in a UDF",
    ast.AsyncWith: "'async with' is not supported in a UDF",
    ast.AsyncFor: "'async for' is not supported in a UDF",
    ast.Global: "'global' is not supported in a UDF (globals are read-only constants)",
    ast.Nonlocal: "'nonlocal' is not supported in a UDF",
    ast.ClassDef: "a class cannot be defined in a UDF",
    ast.Raise: "'raise' is not supported in a UDF: a metric cannot report errors",
    ast.Assert: "'assert' is not supported in a UDF: a metric cannot report errors",
}
if hasattr(ast, "TryStar"):
    _UNSUPPORTED_STMTS[ast.TryStar] = "try/except* is not supported in a UDF"

_UNSUPPORTED_EXPRS = {
    ast.Yield: "a UDF cannot be a generator ('yield')",
    ast.YieldFrom: "a UDF cannot be a generator ('yield from')",
    ast.Await: "'await' is not supported in a UDF",
    ast.List: "lists need memory allocation, which a UDF cannot do; use a tuple",
    ast.ListComp: "list comprehensions need memory allocation, which a UDF cannot do; use a loop",
    ast.Dict: "dicts need memory allocation, which a UDF cannot do",
    ast.DictComp: "dict comprehensions need memory allocation, which a UDF cannot do",
    ast.Set: "sets need memory allocation, which a UDF cannot do",
    ast.SetComp: "set comprehensions need memory allocation, which a UDF cannot do",
    ast.JoinedStr: "f-strings are not supported in a UDF",
}


def _always_returns(stmts) -> bool:
    """Whether every path through `stmts` ends in return (conservative)."""
    for s in stmts:
        if isinstance(s, ast.Return):
            return True
        if isinstance(s, ast.If) and _always_returns(s.body) and _always_returns(s.orelse):
            return True
        if isinstance(s, ast.While) and isinstance(s.test, ast.Constant) and s.test.value \
                and not any(isinstance(n, ast.Break) for n in _walk_loop_body(s.body)):
            return True
    return False


def _walk_loop_body(stmts):
    """Nodes of a loop body, not descending into nested loops or functions (their breaks are theirs)."""
    todo = list(stmts)
    while todo:
        n = todo.pop()
        yield n
        for c in ast.iter_child_nodes(n):
            if not isinstance(c, (ast.For, ast.While, ast.FunctionDef, ast.Lambda, ast.AsyncFunctionDef)):
                todo.append(c)


def _local_names(node) -> set[str]:
    names = set()
    for n in ast.walk(node):
        if isinstance(n, ast.Name) and isinstance(n.ctx, (ast.Store, ast.Del)):
            names.add(n.id)
        elif isinstance(n, ast.arg):
            names.add(n.arg)
        elif isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(n.name)
        elif isinstance(n, (ast.Import, ast.ImportFrom)):
            for a in n.names:
                names.add((a.asname or a.name).split(".")[0])
        elif isinstance(n, ast.ExceptHandler) and n.name:
            names.add(n.name)
        elif isinstance(n, (getattr(ast, "MatchAs", ()), getattr(ast, "MatchStar", ()))) and n.name:
            names.add(n.name)
    return names


#: parameter names per role (for messages; any names are accepted)
_PARAMS = {"metric": ["x", "y", "acc", "ctx"], "finalize": ["acc", "ctx"], "filter": ["query", "id", "ctx"],
           "update": ["x", "y", "s", "ctx"], "finalize_v2": ["s", "ctx"], "distance": ["x", "y", "n_dims", "ctx"]}
#: what each role returns: (after "must return", after "it must return")
_RETURNS = {"metric": ("the new accumulator", "the new accumulator"),
            "finalize": ("the distance", "the distance (a float)"),
            "distance": ("the distance", "the distance (a float)"),
            "filter": ("whether to keep the vector (a bool)", "whether to keep the vector (a bool)")}


def _ctx_fields(spec) -> tuple[str, ...]:
    return getattr(spec, "ctx_fields", CTX_FIELDS)


def expected_params(role: str, spec) -> list[str]:
    """The parameter names of a role (finalize: (acc, ctx) in ABI v1, (s, ctx) in ABI v2)."""
    if role == "finalize" and getattr(spec, "abi", "v1") == "v2":
        return _PARAMS["finalize_v2"]
    return _PARAMS[role]


def returns_value(src: FunctionSource) -> bool | None:
    """Whether the function has a `return VALUE` (None being no value), or None without source."""
    node = src.node
    if node is None:
        return None
    if isinstance(node, ast.Lambda):
        return True
    return any(isinstance(n, ast.Return) and not _is_none(n.value)
               for top in node.body for n in _walk_same_function(top))


def _is_none(value) -> bool:
    return value is None or (isinstance(value, ast.Constant) and value.value is None)


def check_function(src: FunctionSource, role: str, spec: MetricSpec) -> None:
    """AST checks of the metric (role "metric": ABI v1; "update": v2 state; "distance": v2
    vector), finalize function (role "finalize") or filter (role "filter"; `spec` is then a
    FilterSpec).

    Raises UdfCompileError with every problem found.
    """
    diags = _DiagList()
    expected = expected_params(role, spec)
    what = f"{role} function '{src.name}'"
    if not src.kinds_ok or len(src.params) != len(expected):
        diags.error(f"{what} must take {len(expected)} parameters ({', '.join(expected)}), "
                    f"it takes {len(src.params)} ({', '.join(src.params) or 'none'})",
                    src.filename, src.def_line, src.def_col,
                    notes=[_abi_note(role, spec)])
        diags.raise_if_any()
    node = src.node
    if node is None:
        return  # no source (exec, REPL): numba's own errors are all we have
    ctx_name = src.params[-1]
    fields = set(_ctx_fields(spec)) | set(spec.capture_names)
    v2 = getattr(spec, "abi", "v1") == "v2"
    # parameters that are pointers the function must not write through, and the state
    read_only = {}
    if role == "distance":
        read_only = {src.params[0]: "x is the stored vector", src.params[1]: "y is the query"}
    elif role == "finalize" and v2:
        read_only = {src.params[0]: "finalize reads the state (const udf_state_v2 *)"}
    state = src.params[2] if role == "update" else src.params[0] if (role == "finalize" and v2) else None
    body = node.body if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) else None
    if isinstance(node, ast.AsyncFunctionDef):
        diags.error(f"{what} cannot be 'async'", src.filename, node.lineno, node.col_offset + 1)

    fn_globals = getattr(src.fn, "__globals__", {})
    free = set(src.fn.__code__.co_freevars)
    local = _local_names(node)
    walk_root = body if body is not None else [node.body]
    for top in walk_root:
        for n in ast.walk(top):
            if not hasattr(n, "lineno"):
                continue  # operators, contexts, ...: nothing to check
            loc = (src.filename, n.lineno, n.col_offset + 1)
            for cls, msg in _UNSUPPORTED_STMTS.items():
                if isinstance(n, cls):
                    diags.error(msg, *loc)
            for cls, msg in _UNSUPPORTED_EXPRS.items():
                if isinstance(n, cls):
                    diags.error(msg, *loc)
            if isinstance(n, ast.Attribute) and isinstance(n.value, ast.Name) and n.value.id == ctx_name:
                if isinstance(n.ctx, ast.Load):
                    if n.attr not in fields:
                        _unknown_field(diags, n.attr, spec, loc)
                else:
                    diags.error(f"ctx is read-only: cannot assign or delete ctx.{n.attr}", *loc)
            elif isinstance(n, ast.Subscript) and isinstance(n.value, ast.Name) and n.value.id == ctx_name:
                diags.error(f"ctx cannot be indexed; read {', '.join('ctx.' + f for f in _ctx_fields(spec))} or a "
                            "capture by name (ctx.NAME)", *loc,
                            notes=[f"declared captures: {spec.describe_captures()}"])
            elif isinstance(n, ast.Subscript) and isinstance(n.value, ast.Name) and n.value.id in read_only \
                    and isinstance(n.ctx, (ast.Store, ast.Del)):
                diags.error(f"'{n.value.id}' is read-only: {read_only[n.value.id]}; it cannot be written", *loc,
                            notes=[_abi_note(role, spec)])
            elif isinstance(n, ast.Subscript) and isinstance(n.value, ast.Name) and n.value.id == state \
                    and _const_index(n.slice) is not None and not 0 <= _const_index(n.slice) < STATE_WORDS:
                diags.error(f"the state has {STATE_WORDS} words, {state}[0] .. {state}[{STATE_WORDS - 1}]; "
                            f"{state}[{_const_index(n.slice)}] is outside it", *loc)
            elif isinstance(n, ast.Name) and n.id == ctx_name and not isinstance(n.ctx, ast.Load):
                diags.error(f"the ctx parameter '{ctx_name}' cannot be reassigned", *loc)
            elif isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load):
                if n.id not in local and n.id not in free and n.id not in fn_globals \
                        and not hasattr(builtins, n.id):
                    diags.error(f"name '{n.id}' is not defined", *loc)
    if body is not None and role == "update":
        for top in body:
            for n in _walk_same_function(top):
                if isinstance(n, ast.Return) and not _is_none(n.value):
                    diags.error(f"{what} returns a value; an ABI v2 state update returns nothing: it folds "
                                f"the coordinate into the state in place (e.g. {state}[0] += x * y), and the "
                                "finalize function returns the distance", src.filename, n.lineno,
                                n.col_offset + 1, notes=[_abi_note(role, spec)])
    elif body is not None:
        has_value_return = any(isinstance(n, ast.Return) and n.value is not None
                               for top in body for n in _walk_same_function(top))
        bare = [n for top in body for n in _walk_same_function(top)
                if isinstance(n, ast.Return) and n.value is None]
        for n in bare:
            diags.error(f"'return' without a value: the {role} must return {_RETURNS[role][0]}",
                        src.filename, n.lineno, n.col_offset + 1)
        if not has_value_return and not bare:
            diags.error(f"{what} does not return a value; it must return {_RETURNS[role][1]}",
                        src.filename, src.def_line, src.def_col)
        elif has_value_return and not bare and not diags.items and not _always_returns(body):
            last = body[-1]
            diags.error(f"{what} can reach its end without 'return' (it would return None); "
                        "every path must return a value", src.filename,
                        getattr(last, "end_lineno", None) or last.lineno, last.col_offset + 1)
    diags.raise_if_any()


def _walk_same_function(top):
    """ast.walk that does not enter nested functions / lambdas."""
    todo = [top]
    while todo:
        n = todo.pop()
        yield n
        for c in ast.iter_child_nodes(n):
            if not isinstance(c, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
                todo.append(c)


def _const_index(node):
    """The value of a constant integer subscript (`s[3]`, `s[-1]`), else None."""
    if isinstance(node, ast.Constant) and isinstance(node.value, int) and not isinstance(node.value, bool):
        return node.value
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub) and isinstance(node.operand, ast.Constant) \
            and isinstance(node.operand.value, int) and not isinstance(node.operand.value, bool):
        return -node.operand.value
    return None


def _unknown_field(diags, attr, spec, loc):
    builtin = list(_ctx_fields(spec))
    fields = builtin + list(spec.capture_names)
    close = difflib.get_close_matches(attr, fields, n=1)
    msg = f"ctx has no field '{attr}'"
    if close:
        msg += f"; did you mean '{close[0]}'?"
    notes = [f"declared captures: {spec.describe_captures()}; built-in fields: {', '.join(builtin)}"]
    if attr in ("query", "id") and getattr(spec, "abi", "v1") == "v1" and getattr(spec, "kind", "") != "filter":
        notes.append(f"ctx.{attr} is a field of the ABI v2 ctx (udf_ctx_v2): declare the metric with "
                     "shape='state' or shape='vector'")
    diags.error(msg, *loc, notes=notes)


def _abi_note(role, spec):
    if role == "filter":
        return "the ABI is bool keep(uint32_t query, int64_t id, const udf_ctx_v1 *ctx)"
    acc = "float" if spec.acc == "f32" else "int32_t"
    if role == "metric":
        return f"the ABI is {acc} f({acc} x, {acc} y, {acc} acc, const udf_ctx_v1 *ctx)"
    if role == "update":
        return (f"the ABI (v2, state shape) is void update({acc} x, {acc} y, udf_state_v2 *s, const udf_ctx_v2 "
                f"*ctx): s indexes like an array of {STATE_WORDS} {acc} words, s[0] .. s[{STATE_WORDS - 1}]")
    if role == "distance":
        return (f"the ABI (v2, vector shape) is float distance(const {acc} *x, const {acc} *y, uint32_t n_dims, "
                "const udf_ctx_v2 *ctx): x is the stored vector, y the query, both whole")
    if getattr(spec, "abi", "v1") == "v2":
        return "the ABI (v2, state shape) is float finalize(const udf_state_v2 *s, const udf_ctx_v2 *ctx)"
    return f"the ABI is float g({acc} acc, const udf_ctx_v1 *ctx)"
