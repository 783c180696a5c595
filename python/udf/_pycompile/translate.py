"""The "nvrtc" front end: a Python ABI v1 metric (and finalize) or filter in a small subset of
Python, translated to CUDA C++ that udfc compiles with NVRTC -- no numba import, no numba compile.

Why: importing numba-cuda-mlir and its registries is most of a cold `@udf.metric` (about 2.9 s of
3.0 on two cores, 3.6 s on the GPU host); typing and translating the common metrics here takes
milliseconds and NVRTC compiles the result in about 0.1 s.

The same bits as numba.  Every expression gets the type numba gives it, and the C++ converts
each operand to that type explicitly, so the arithmetic is the arithmetic numba's code does
(float32 stays float32, a Python float literal is float64, an int32 mixed with a float32 is
float64, ints are int64, ...).  The typing rules below are the ones on which both numba back ends
agree (numba-cuda-mlir and numba-cuda disagree on some: math.sqrt of an int, -uint8, float16
arithmetic, bool arithmetic, `& | ^` of two integers narrower than 64 bits); test_translate.py
checks every rule against both back ends' typing where they are installed.  A function that uses
anything else is not translated (`NotInSubset`): "auto" then takes numba, which types (and
reports errors on) everything.

The subset (ABI v1 metric `f(x, y, acc, ctx) -> acc`, `finalize(acc, ctx) -> distance`; filter
`keep(query, id, ctx) -> bool`, query a uint32 and id an int64):
- statements: `name = expr`, `name op= expr` (+ - * / & | ^ << >>), `if` / `elif` / `else`,
  `return expr`, `pass`, a docstring; every local keeps one type (numba would unify otherwise) and
  is assigned before it is read on every path; every `return` returns the same type (a filter's
  may mix bools and integers, each converted to bool);
- expressions: the parameters, locals, int, float and bool literals, module-level or closure
  constants (int, float, NumPy float32 / float64 / int32 / int64 scalars), `ctx.dim`,
  `ctx.n_dims`, scalar captures `ctx.NAME`, array captures `ctx.NAME[index]` (f32 f16 i32 u8);
  + - * / (not on two uint8, two float16, or bools), unary - (not on unsigned / bool) and +
  (floats and int64), comparisons (chained too; not of a uint64 with a signed integer),
  `and` / `or` / `not` on bools, `a if c else b`; conditions (`if`, `a if c else b`, `not`) are
  bools or integers (nonzero is true);
- integer bit operations: `& | ^` of two bools (a bool) or of two integers one of which is 64-bit
  (int64 or uint64; a Python int literal is int64): a 64-bit result, signed when either is;
  `<< >>` of integers: 64-bit with the left operand's signedness (>> of a signed value is
  arithmetic; a shift by a negative amount or by 64 or more is undefined, as in numba); `~` of an
  integer (64-bit, same signedness) or of a bool (`not`, numba's rule);
- calls: abs (not float16), min / max of two values, float(), int(), bool() (of a number),
  np.float32 / np.float64 / np.int32 / np.int64 (any alias of numpy or of the function),
  math.sqrt / exp / log / fabs of float32 or float64.
A filter returns a bool or an integer (nonzero keeps), converted to C++'s bool as numba converts
it (`!= 0`).
Not in it (numba compiles these): loops, other functions, tuples, `**`, `//`, `%`, keyword
arguments, ABI v2.
"""
from __future__ import annotations

import ast
import builtins
import math
import struct
from dataclasses import dataclass, field

import numpy as np

from .source import FunctionSource
from .spec import FilterSpec, MetricSpec

#: bumped whenever the generated code for a given function can change (the front-end cache key)
VERSION = "nvrtc-py 2"

INTS = ("uint8", "uint32", "int32", "int64", "uint64")
UNSIGNED = ("uint8", "uint32", "uint64")
FLOATS = ("float16", "float32", "float64")
# (builtin C types: the prelude udfc gives a metric declares no <stdint.h> names beyond the ABI's)
CTYPE = {"bool": "bool", "uint8": "unsigned char", "uint32": "unsigned int", "int32": "int", "int64": "long long",
         "uint64": "unsigned long long",
         # float16 values are held as the float of the same value (exact); only their type is float16
         "float16": "float", "float32": "float", "float64": "double"}
ACC_TYPE = {"f32": "float32", "i32": "int32"}


class NotInSubset(Exception):
    """The function uses something outside the translated subset (message: what, line; `node`
    the construct, its line numbers the file's)."""

    def __init__(self, what: str, node: ast.AST | None = None):
        line = getattr(node, "lineno", None)
        super().__init__(f"{what} (line {line})" if line else what)
        self.what, self.line, self.node = what, line, node
        # the function's file, "metric 'NAME'" / "filter 'NAME'" and its role (_translate sets them)
        self.filename: str | None = None
        self.function = "the function"
        self.role = ""


def construct_text(node: ast.AST) -> str:
    """The construct as the user wrote it, one line: `d ** 2`, `for i in range(4)`, `while d > 1`."""
    if isinstance(node, ast.For):
        text = f"for {ast.unparse(node.target)} in {ast.unparse(node.iter)}"
    elif isinstance(node, ast.While):
        text = f"while {ast.unparse(node.test)}"
    else:
        text = ast.unparse(node).splitlines()[0] if node is not None else ""
    return text if len(text) <= 60 else text[:57] + "..."


def _power_rewrite(base: ast.expr, exponent: ast.expr) -> str | None:
    """`d * d` for `d ** 2` (and ** 3, ** 4), `math.sqrt(d)` for `d ** 0.5`; None for other powers."""
    b = ast.unparse(base)
    if not isinstance(base, (ast.Name, ast.Attribute, ast.Subscript, ast.Call, ast.Constant)):
        b = f"({b})"
    if isinstance(exponent, ast.Constant) and type(exponent.value) in (int, float):
        if exponent.value in (2, 3, 4):
            return " * ".join([b] * int(exponent.value))
        if exponent.value == 0.5:
            return f"math.sqrt({ast.unparse(base)})"
    return None


def fast_path_fix(exc: NotInSubset) -> str:
    """How to write the construct that `exc` reports inside the translated subset (a clause
    for a message: "write `d * d` instead"), or what to do when it has no translated form."""
    node = exc.node
    op = getattr(node, "op", None)
    if isinstance(op, ast.Pow):
        base, exponent = (node.left, node.right) if isinstance(node, ast.BinOp) else (node.target, node.value)
        rewrite = _power_rewrite(base, exponent)
        if rewrite is not None:
            return f"write `{rewrite}` instead"
        return "write the power as products (d * d), math.sqrt or math.exp / math.log instead"
    if isinstance(node, (ast.For, ast.While)) and exc.role == "filter":
        return ("index a capture instead of looping over one (an allow-list of ids as a bitmap: "
                "`(ctx.bits[id >> 5] >> (id & 31)) & 1`, bits an i32[] capture of one bit per id)")
    if isinstance(node, (ast.For, ast.While)):
        return ("no loop is needed: an ABI v1 metric is called once per coordinate (ctx.dim); to loop over "
                "whole vectors, declare shape='vector' (ABI v2: distance(x, y, n_dims, ctx))")
    return f"the subset is docs/python.md's (\"Two front ends\"); outside it here: {exc.what}"


# ------------------------------------------------------------------------------ typing rules


def arith_type(a: str, b: str, op: str = "+") -> str:
    """numba's result type of a + b, a - b, a * b and (op "/") a / b."""
    if a == "bool" or b == "bool":
        raise NotInSubset("arithmetic on a bool")
    if a in INTS and b in INTS:
        if op == "/":
            return "float64"
        if a == b == "uint8":
            raise NotInSubset("arithmetic on two uint8 values (uint64 in numba)")
        return "uint64" if a in UNSIGNED and b in UNSIGNED else "int64"
    if a == b == "float16":
        raise NotInSubset("arithmetic on two float16 values")
    if "float64" in (a, b):
        return "float64"
    other = b if a in ("float16", "float32") else a
    return "float32" if other in ("float16", "float32", "uint8") else "float64"


def unify_type(a: str, b: str) -> str:
    """numba's unified type of two values (a if c else b, min, max)."""
    if a == "bool" or b == "bool":
        raise NotInSubset("a bool mixed with a number")
    if a == b:
        return a
    if a in INTS and b in INTS:  # NumPy's promotion, as numba's unification of two integers
        t = np.promote_types(a, b).name
        if t not in INTS:
            raise NotInSubset(f"a {a} mixed with a {b} ({t} in numba)")
        return t
    if "float64" in (a, b):
        return "float64"
    other = b if a in FLOATS else a
    mine = a if a in FLOATS else b
    if other in ("int32", "int64", "uint32", "uint64"):
        return "float64"
    if other == "uint8":
        return mine
    return "float32"  # float16 with float32


def compare_type(a: str, b: str) -> str:
    """The type both sides of a comparison are converted to."""
    if a in INTS and b in INTS:
        if "uint64" not in (a, b):
            return "int64"  # every other integer fits (numba's int64 comparison)
        if a in UNSIGNED and b in UNSIGNED:
            return "uint64"
        raise NotInSubset("comparing a uint64 with a signed integer")
    if "uint64" in (a, b):
        raise NotInSubset("comparing a uint64 with a float")
    return arith_type(a, b)


def filter_return_type(types: list[str], nodes: list[ast.AST]) -> str:
    """numba's return type of a filter whose returns have these types: one type, or bools and
    integers unified (a bool converts to any integer; integers by NumPy's promotion).  Each return
    is converted to bool on its own, which is what numba's unified value converts to."""
    if len(set(types)) == 1:
        return types[0]
    floats = [n for t, n in zip(types, nodes) if t not in INTS and t != "bool"]
    if floats:
        raise NotInSubset("a float returned beside other types", floats[0])
    ints = [t for t in types if t in INTS]
    t = ints[0]
    for other in ints[1:]:
        t = unify_type(t, other)
    return t


def _int64_of(a: str, b: str) -> str:
    """The 64-bit integer type of an operation on integers a and b: signed when either is."""
    return "uint64" if a in UNSIGNED and b in UNSIGNED else "int64"


def bitwise_type(a: str, b: str) -> str:
    """numba's result type of a & b, a | b, a ^ b where both back ends agree: two bools (a bool),
    or two integers one of which is 64-bit (numba-cuda widens every integer operation to 64 bits,
    numba-cuda-mlir keeps the wider operand's width: the same when one is 64-bit)."""
    if a == b == "bool":
        return "bool"
    if a == "bool" or b == "bool":
        raise NotInSubset("a bit operation of a bool and a number")
    if a not in INTS or b not in INTS:
        raise NotInSubset("a bit operation on a float")
    if a not in ("int64", "uint64") and b not in ("int64", "uint64"):
        raise NotInSubset(f"& | ^ of {a} and {b} (int64 in numba-cuda, {np.promote_types(a, b).name} in "
                          f"numba-cuda-mlir): make one operand 64-bit, e.g. np.int64(...)")
    return _int64_of(a, b)


def shift_type(a: str, b: str) -> str:
    """numba's result type of a << b and a >> b: 64-bit, with the left operand's signedness."""
    if a not in INTS or b not in INTS:
        raise NotInSubset("a shift of a bool" if "bool" in (a, b) else "a shift of a float")
    return "uint64" if a in UNSIGNED else "int64"


def invert_type(a: str) -> str:
    """numba's result type of ~a: a bool for a bool (numba's rule: `not a`), else a 64-bit integer of
    a's signedness."""
    if a == "bool":
        return "bool"
    if a not in INTS:
        raise NotInSubset(f"~ of a {a}")
    return "uint64" if a in UNSIGNED else "int64"


# ------------------------------------------------------------------------------ C literals


def c_double(v: float) -> str:
    if math.isnan(v):
        return "__longlong_as_double(0x7ff8000000000000LL)"
    if math.isinf(v):
        return f"__longlong_as_double({'0xfff0000000000000LL' if v < 0 else '0x7ff0000000000000LL'})"
    return f"({v.hex()})"  # exact: a hexadecimal floating literal


def c_float(v: float) -> str:
    bits = struct.unpack("<I", struct.pack("<f", v))[0]
    return f"__int_as_float(0x{bits:08x})"


def c_int64(v: int) -> str:
    if not -(1 << 63) <= v < (1 << 63):
        raise NotInSubset(f"the integer {v} does not fit int64")
    if v == -(1 << 63):
        return "(-9223372036854775807LL - 1)"
    return f"{v}LL"


# ------------------------------------------------------------------------------ the translator


@dataclass
class Expr:
    code: str
    type: str


@dataclass
class Translation:
    """A function translated: `code` (the C++ definition), the type of what it returns before
    conversion to the ABI's type, and the lines that compute in float64 (numba's warning)."""

    code: str
    return_type: str
    float64_lines: list[int] = field(default_factory=list)
    helpers: set[str] = field(default_factory=set)  # the prelude's functions it calls


_MATH = {math.sqrt: "sqrt", math.exp: "exp", math.log: "log", math.fabs: "fabs"}
_CONVERT = {np.float32: "float32", np.float64: "float64", np.int32: "int32", np.int64: "int64"}


class _Function:
    def __init__(self, src: FunctionSource, role: str, spec: MetricSpec | FilterSpec, symbol: str):
        if src.node is None or not isinstance(src.node, (ast.FunctionDef, ast.Lambda)):
            raise NotInSubset("no source (defined by exec or in a REPL)")
        self.src, self.role, self.spec, self.symbol = src, role, spec, symbol
        fn = src.fn
        self.globals = getattr(fn, "__globals__", {})
        self.closure = {}
        if fn.__closure__:
            for name, cell in zip(fn.__code__.co_freevars, fn.__closure__):
                try:
                    self.closure[name] = cell.cell_contents
                except ValueError:  # an empty cell
                    raise NotInSubset(f"the closure variable '{name}' is unset") from None
        names = src.params
        self.acc = None
        if role == "filter":  # bool keep(uint32_t query, int64_t id, const udf_ctx_v1 *ctx)
            self.params = {names[0]: "uint32", names[1]: "int64"}
        else:
            acc = ACC_TYPE.get(spec.acc)
            if acc is None:
                raise NotInSubset(f"accumulator type {spec.acc}")
            self.acc = acc
            if role == "metric":
                self.params = {names[0]: acc, names[1]: acc, names[2]: acc}
            else:  # finalize
                self.params = {names[0]: acc}
        self.ctx = names[-1]
        for n in names:
            if not (n.isidentifier() and n.isascii()):
                raise NotInSubset(f"the parameter name {n!r}")
        self.vars: dict[str, str] = {}  # local -> type (parameters included once reassigned)
        self.returns: list[str] = []
        self.return_nodes: list[ast.AST] = []
        self.float64_lines: set[int] = set()
        self.helpers: set[str] = set()  # the prelude's functions the code calls

    # -- names
    def cname(self, name: str) -> str:
        return f"v_{name}"

    def resolve_global(self, name: str, node):
        if name in self.closure:
            return self.closure[name]
        if name in self.globals:
            return self.globals[name]
        if hasattr(builtins, name):
            return getattr(builtins, name)
        raise NotInSubset(f"the name '{name}'", node)

    def constant(self, v, node) -> Expr:
        if isinstance(v, bool):
            if isinstance(node, ast.Constant):  # True / False written in the function
                return Expr("true" if v else "false", "bool")
            raise NotInSubset("a bool constant", node)
        if isinstance(v, int):
            return Expr(c_int64(v), "int64")
        if isinstance(v, float):
            return Expr(c_double(v), "float64")
        if isinstance(v, np.float32):
            return Expr(c_float(float(v)), "float32")
        if isinstance(v, np.float64):
            return Expr(c_double(float(v)), "float64")
        if isinstance(v, np.int32):
            return Expr(f"((int){int(v)})", "int32")
        if isinstance(v, np.int64):
            return Expr(c_int64(int(v)), "int64")
        raise NotInSubset(f"a constant of type {type(v).__name__}", node)

    def object_of(self, node):
        """The Python object a Name / module.attr refers to (functions and modules)."""
        if isinstance(node, ast.Name):
            if node.id in self.params or node.id in self.vars or node.id == self.ctx:
                raise NotInSubset(f"calling the local '{node.id}'", node)
            return self.resolve_global(node.id, node)
        if isinstance(node, ast.Attribute):
            base = self.object_of(node.value)
            if base is math or base is np:
                try:
                    return getattr(base, node.attr)
                except AttributeError:
                    raise NotInSubset(f"{base.__name__}.{node.attr}", node) from None
        raise NotInSubset("this callee", node)

    # -- expressions
    def cast(self, e: Expr, to: str) -> str:
        if e.type == to:
            return e.code
        return f"(({CTYPE[to]})({e.code}))"

    def truth(self, e: Expr, node) -> str:
        """The C++ bool of a condition: a bool, or an integer (nonzero is true, as in numba)."""
        if e.type == "bool":
            return e.code
        if e.type in INTS:
            return f"(({e.code}) != 0)"
        raise NotInSubset(f"a condition of type {e.type} (compare it, e.g. `x != 0`)", node)

    def condition(self, node) -> str:
        return self.truth(self.expr(node), node)

    def expr(self, node) -> Expr:
        try:
            e = self._expr(node)
        except NotInSubset as exc:
            if exc.node is None:  # a typing rule's refusal: located at the innermost expression
                raise NotInSubset(exc.what, node) from None
            raise
        if e.type == "float64" and isinstance(node, (ast.BinOp, ast.UnaryOp, ast.Call)):
            self.float64_lines.add(node.lineno)
        return e

    def _expr(self, node) -> Expr:
        if isinstance(node, ast.Constant):
            return self.constant(node.value, node)
        if isinstance(node, ast.Name):
            if node.id == self.ctx:
                raise NotInSubset("ctx used as a value", node)
            if node.id in self.vars:
                if node.id not in self.assigned:
                    raise NotInSubset(f"'{node.id}' may be read before it is assigned", node)
                return Expr(self.cname(node.id), self.vars[node.id])
            if node.id in self.params:
                return Expr(self.cname(node.id), self.params[node.id])
            if node.id in self.locals_anywhere:
                raise NotInSubset(f"'{node.id}' read before it is assigned", node)
            return self.constant(self.resolve_global(node.id, node), node)
        if isinstance(node, ast.Attribute):
            if isinstance(node.value, ast.Name) and node.value.id == self.ctx:
                return self.ctx_field(node)
            obj = self.object_of(node)
            return self.constant(obj, node)
        if isinstance(node, ast.Subscript):
            return self.capture_element(node)
        if isinstance(node, ast.BinOp):
            return self.binop(node.op, self.expr(node.left), self.expr(node.right), node)
        if isinstance(node, ast.UnaryOp):
            v = self.expr(node.operand)
            if isinstance(node.op, ast.Not):
                return Expr(f"(!{self.truth(v, node)})", "bool")
            if isinstance(node.op, ast.Invert):
                t = invert_type(v.type)
                return Expr(f"(!{v.code})" if t == "bool" else f"(~{self.cast(v, t)})", t)
            if isinstance(node.op, ast.USub):
                if v.type == "bool" or v.type in UNSIGNED:
                    raise NotInSubset(f"-{v.type}", node)
                t = "int64" if v.type in INTS else v.type
                if t == "int64":
                    return Expr(f"((long long)(0ULL - (unsigned long long)({self.cast(v, t)})))", t)
                return Expr(f"(-{v.code})", t)
            if isinstance(node.op, ast.UAdd):
                if v.type not in ("float16", "float32", "float64", "int64"):
                    raise NotInSubset(f"+{v.type}", node)
                return v
            raise NotInSubset(f"the operator {type(node.op).__name__}", node)
        if isinstance(node, ast.Compare):
            parts = []
            left = self.expr(node.left)
            for op, right_node in zip(node.ops, node.comparators):
                right = self.expr(right_node)
                sym = _COMPARE.get(type(op))
                if sym is None:
                    raise NotInSubset(f"the comparison {type(op).__name__}", node)
                if left.type == "bool" or right.type == "bool":
                    raise NotInSubset("comparing a bool", node)
                t = compare_type(left.type, right.type)
                parts.append(f"({self.cast(left, t)} {sym} {self.cast(right, t)})")
                left = right
            return Expr(f"({' && '.join(parts)})", "bool")
        if isinstance(node, ast.BoolOp):
            vals = [self.expr(v) for v in node.values]
            if any(v.type != "bool" for v in vals):
                raise NotInSubset("'and' / 'or' of numbers (they return an operand)", node)
            sym = " && " if isinstance(node.op, ast.And) else " || "
            return Expr("(" + sym.join(v.code for v in vals) + ")", "bool")
        if isinstance(node, ast.IfExp):
            c = self.condition(node.test)
            a, b = self.expr(node.body), self.expr(node.orelse)
            t = unify_type(a.type, b.type)
            return Expr(f"({c} ? {self.cast(a, t)} : {self.cast(b, t)})", t)
        if isinstance(node, ast.Call):
            return self.call(node)
        raise NotInSubset(f"the expression {type(node).__name__}", node)

    def binop(self, op, a: Expr, b: Expr, node) -> Expr:
        if type(op) in _BITWISE or type(op) in _SHIFTS:
            return self.bitop(op, a, b, node)
        sym = _ARITH.get(type(op))
        if sym is None:
            raise NotInSubset(f"the operator {type(op).__name__}", node)
        try:
            t = arith_type(a.type, b.type, sym)
        except NotInSubset as exc:
            raise NotInSubset(exc.what, node) from None
        if t == "int64":  # two's complement wrap-around, as numba's i64 arithmetic
            return Expr(f"((long long)((unsigned long long)({self.cast(a, t)}) {sym} "
                        f"(unsigned long long)({self.cast(b, t)})))", t)
        return Expr(f"({self.cast(a, t)} {sym} {self.cast(b, t)})", t)

    def bitop(self, op, a: Expr, b: Expr, node) -> Expr:
        """& | ^ << >> (typed by bitwise_type / shift_type)."""
        try:
            if type(op) in _BITWISE:
                sym = _BITWISE[type(op)]
                t = bitwise_type(a.type, b.type)
                if t == "bool":
                    return Expr(f"((bool)({a.code} {sym} {b.code}))", t)
                return Expr(f"({self.cast(a, t)} {sym} {self.cast(b, t)})", t)
            sym = _SHIFTS[type(op)]
            t = shift_type(a.type, b.type)
        except NotInSubset as exc:
            raise NotInSubset(exc.what, node) from None
        if sym == "<<" and t == "int64":  # shifted as unsigned: no overflow of a signed value, as in numba
            return Expr(f"((long long)((unsigned long long)({self.cast(a, t)}) << ({b.code})))", t)
        return Expr(f"({self.cast(a, t)} {sym} ({b.code}))", t)  # >> of a signed value is arithmetic

    def ctx_field(self, node) -> Expr:
        attr = node.attr
        if attr in ("dim", "n_dims"):
            return Expr(f"((long long)ctx->{attr})", "int64")
        i, cap = self.capture(attr, node)
        if cap.is_array:
            raise NotInSubset(f"the array capture ctx.{attr} used without an index", node)
        if cap.dtype == "f32":
            return Expr(f"ctx->captures[{i}].f32", "float32")
        if cap.dtype == "i32":
            return Expr(f"ctx->captures[{i}].i32", "int32")
        raise NotInSubset(f"a scalar capture of type {cap.dtype}", node)

    def capture(self, attr, node):
        for i, c in enumerate(self.spec.captures):
            if c.name == attr:
                return i, c
        raise NotInSubset(f"ctx.{attr}", node)

    def capture_element(self, node) -> Expr:
        v = node.value
        if not (isinstance(v, ast.Attribute) and isinstance(v.value, ast.Name) and v.value.id == self.ctx):
            raise NotInSubset("indexing something other than an array capture", node)
        i, cap = self.capture(v.attr, node)
        if not cap.is_array:
            raise NotInSubset(f"indexing the scalar capture ctx.{v.attr}", node)
        idx = self.expr(node.slice)
        if idx.type not in INTS:
            raise NotInSubset("an index that is not an integer", node)
        ptr = f"ctx->captures[{i}].ptr"
        if cap.dtype == "f32":
            return Expr(f"((const float *){ptr})[{idx.code}]", "float32")
        if cap.dtype == "i32":
            return Expr(f"((const int *){ptr})[{idx.code}]", "int32")
        if cap.dtype == "u8":
            return Expr(f"((const unsigned char *){ptr})[{idx.code}]", "uint8")
        if cap.dtype == "f16":
            self.helpers.add("half")
            return Expr(f"udf_py_half_to_float(((const unsigned short *){ptr})[{idx.code}])", "float16")
        raise NotInSubset(f"an array capture of type {cap.dtype}", node)

    def call(self, node) -> Expr:
        if node.keywords:
            raise NotInSubset("keyword arguments", node)
        f = self.object_of(node.func)
        args = [self.expr(a) for a in node.args]
        if any(a.type == "bool" for a in args):
            raise NotInSubset("a bool argument", node)
        n = len(args)
        if f in _MATH and n == 1:
            a = args[0]
            if a.type == "float32":
                return Expr(f"{_MATH[f]}f({a.code})", "float32")
            if a.type == "float64":
                return Expr(f"{_MATH[f]}({a.code})", "float64")
            raise NotInSubset(f"math.{_MATH[f]} of {a.type}", node)
        if f in _CONVERT and n == 1:
            t = _CONVERT[f]
            return Expr(self.cast(args[0], t), t)
        if f is abs and n == 1:
            a = args[0]
            if a.type in ("float32", "float64"):
                return Expr(f"{'fabsf' if a.type == 'float32' else 'fabs'}({a.code})", a.type)
            if a.type in UNSIGNED:
                return a
            if a.type in ("int32", "int64"):
                u = "unsigned" if a.type == "int32" else "unsigned long long"
                c = CTYPE[a.type]
                return Expr(f"(({c})(({a.code}) < 0 ? (({u})0 - ({u})({a.code})) : ({u})({a.code})))", a.type)
            raise NotInSubset(f"abs of {a.type}", node)
        if f in (min, max) and n == 2:
            a, b = args
            t = unify_type(a.type, b.type)
            # numba's (and Python's) order: the second replaces the first only when strictly
            # less (min) / greater (max), so ties and NaNs keep what Python keeps
            ca, cb = self.cast(a, t), self.cast(b, t)
            sym = "<" if f is min else ">"
            self.helpers.add("select")
            return Expr(f"udf_py_select({cb} {sym} {ca}, {cb}, {ca})", t)
        if f is bool and n == 1:  # (bool(a bool) is refused above with every bool argument)
            return Expr(f"(({args[0].code}) != 0)", "bool")
        if f is float and n == 1:
            a = args[0]
            t = a.type if a.type in FLOATS else "float64"
            return Expr(self.cast(a, t), t)
        if f is int and n == 1:
            a = args[0]
            t = a.type if a.type in INTS else "int64"
            if a.type == "float16":
                raise NotInSubset("int() of a float16", node)
            return Expr(self.cast(a, t), t)
        raise NotInSubset(f"calling {getattr(f, '__name__', f)!r} with {n} argument(s)", node)

    # -- statements
    def block(self, stmts, indent: str) -> tuple[list[str], bool]:
        """The C lines of a statement list and whether every path through it returns."""
        out = []
        for i, st in enumerate(stmts):
            if isinstance(st, ast.Expr) and isinstance(st.value, ast.Constant) and isinstance(st.value.value, str):
                continue  # a docstring or a string statement
            if isinstance(st, ast.Pass):
                continue
            if isinstance(st, ast.Return):
                if st.value is None:
                    raise NotInSubset("'return' without a value", st)
                e = self.expr(st.value)
                if e.type == "bool" and self.role != "filter":
                    raise NotInSubset("returning a bool", st)
                self.returns.append(e.type)
                self.return_nodes.append(st)
                if len(set(self.returns)) > 1 and self.role != "filter":  # (a filter's: filter_return_type)
                    raise NotInSubset("returns of different types (numba unifies them)", st)
                out.append(f"{indent}return {self.cast(e, self.ret_type)};")
                return out, True  # what follows is unreachable
            if isinstance(st, ast.Assign):
                if len(st.targets) != 1 or not isinstance(st.targets[0], ast.Name):
                    raise NotInSubset("an assignment to anything but one name", st)
                out.append(self.assign(st.targets[0].id, self.expr(st.value), st, indent))
                continue
            if isinstance(st, ast.AugAssign):
                if not isinstance(st.target, ast.Name):
                    raise NotInSubset("an augmented assignment to anything but a name", st)
                cur = self._expr(ast.copy_location(ast.Name(id=st.target.id, ctx=ast.Load()), st))
                e = self.binop(st.op, cur, self.expr(st.value), st)
                if e.type == "float64":
                    self.float64_lines.add(st.lineno)
                out.append(self.assign(st.target.id, e, st, indent))
                continue
            if isinstance(st, ast.If):
                c = self.condition(st.test)
                before = set(self.assigned)
                body, body_ret = self.block(st.body, indent + "  ")
                after_body = self.assigned
                self.assigned = set(before)
                orelse, else_ret = self.block(st.orelse, indent + "  ")
                after_else = self.assigned
                if body_ret and else_ret:
                    self.assigned = after_body | after_else
                elif body_ret:
                    self.assigned = after_else
                elif else_ret:
                    self.assigned = after_body
                else:
                    self.assigned = after_body & after_else
                out.append(f"{indent}if ({c}) {{")
                out += body
                if orelse:
                    out.append(f"{indent}}} else {{")
                    out += orelse
                out.append(f"{indent}}}")
                if body_ret and else_ret:
                    return out, True
                continue
            raise NotInSubset(f"the statement {type(st).__name__}", st)
        return out, False

    def assign(self, name: str, e: Expr, node, indent: str) -> str:
        if name == self.ctx:
            raise NotInSubset("assigning ctx", node)
        if not (name.isidentifier() and name.isascii()):
            raise NotInSubset(f"the name {name!r}", node)
        have = self.vars.get(name, self.params.get(name))
        if have is None:
            self.vars[name] = e.type
        elif have != e.type:
            raise NotInSubset(f"'{name}' takes values of two types ({have}, {e.type})", node)
        else:
            self.vars.setdefault(name, have)
        self.assigned.add(name)
        return f"{indent}{self.cname(name)} = {e.code};"

    def translate(self) -> Translation:
        """The C++ function and the types it computes (check_returns then applies the ABI's rules
        on what may be returned)."""
        node = self.src.node
        self.ret_type = {"metric": self.acc, "finalize": "float32", "filter": "bool"}[self.role]
        self.locals_anywhere = {n.id for n in ast.walk(node) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)}
        self.assigned = set(self.params)
        body = node.body
        if isinstance(node, ast.Lambda):  # lambda acc, ctx: EXPR is `return EXPR`
            body = [ast.copy_location(ast.Return(value=node.body), node.body)]
        lines, always = self.block(body, "  ")
        if not always:
            raise NotInSubset("a path that reaches the end without 'return'", node)
        if not self.returns:
            raise NotInSubset("no return", node)
        rt = self.returns[0] if self.role != "filter" else filter_return_type(self.returns, self.return_nodes)
        p = [self.cname(n) for n in self.src.params[:-1]]
        if self.role == "filter":  # C++'s conversion to bool is numba's: nonzero is true
            sig = f"bool {self.symbol}(unsigned int {p[0]}, long long {p[1]}, const udf_ctx_v1 *ctx)"
        elif self.role == "metric":
            acc_c = CTYPE[self.acc]
            sig = f"{acc_c} {self.symbol}({acc_c} {p[0]}, {acc_c} {p[1]}, {acc_c} {p[2]}, const udf_ctx_v1 *ctx)"
        else:
            sig = f"float {self.symbol}({CTYPE[self.acc]} {p[0]}, const udf_ctx_v1 *ctx)"
        decls = [f"  {CTYPE[t]} {self.cname(n)} = 0;" for n, t in self.vars.items() if n not in self.params]
        where = f"{self.src.filename}:{self.src.def_line}"
        code = "\n".join([f"// {self.role} '{self.src.name}' ({where})",
                          f'extern "C" __device__ {sig} {{', "  (void)ctx;", *decls, *lines, "}", ""])
        return Translation(code, rt, sorted(self.float64_lines), self.helpers)

    def check_returns(self, t: Translation) -> None:
        """What numba refuses to return (its error then comes from numba, at its line)."""
        if self.ret_type == "int32" and t.return_type in FLOATS:
            raise NotInSubset("a float returned for an i32 accumulator", self.src.node)
        if self.role == "filter" and t.return_type in FLOATS:
            raise NotInSubset(f"returning a {t.return_type}: a filter returns a bool (compare it, e.g. `x > 0`)",
                              self.return_nodes[0])


_ARITH = {ast.Add: "+", ast.Sub: "-", ast.Mult: "*", ast.Div: "/"}
_BITWISE = {ast.BitAnd: "&", ast.BitOr: "|", ast.BitXor: "^"}
_SHIFTS = {ast.LShift: "<<", ast.RShift: ">>"}
_COMPARE = {ast.Lt: "<", ast.LtE: "<=", ast.Gt: ">", ast.GtE: ">=", ast.Eq: "==", ast.NotEq: "!="}

HEADER = """\
// Generated by udf's Python front end "nvrtc" (udf._pycompile.translate) from the Python
// functions named below; numba's typing, written out as explicit conversions.
"""
HELPERS = {
    "half": """\
static __device__ __forceinline__ float udf_py_half_to_float(unsigned short h) {
  float f;
  asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(h));
  return f;
}
""",
    "select": """\
template <class T> static __device__ __forceinline__ T udf_py_select(bool c, T a, T b) { return c ? a : b; }
""",
}


@dataclass
class MetricTranslation:
    source: str  # the CUDA C++ for udfc
    return_type: str
    finalize_return_type: str | None
    metric_float64_lines: list[int]
    finalize_float64_lines: list[int]


def _translate(src: FunctionSource, role: str, spec: MetricSpec | FilterSpec, symbol: str) -> Translation:
    try:
        fn = _Function(src, role, spec, symbol)
        t = fn.translate()
        fn.check_returns(t)
        return t
    except NotInSubset as exc:
        exc.filename, exc.function, exc.role = src.filename, f"{role} '{src.name}'", role
        raise


def translate_metric(msrc: FunctionSource, fsrc: FunctionSource | None, spec: MetricSpec) -> MetricTranslation:
    """The CUDA C++ of an ABI v1 metric (and its finalize).  Raises NotInSubset."""
    if spec.abi == "v2":
        raise NotInSubset("ABI v2")
    m = _translate(msrc, "metric", spec, spec.symbol)
    f = None
    if fsrc is not None:
        f = _translate(fsrc, "finalize", spec, spec.finalize_symbol)
    used = m.helpers | (f.helpers if f is not None else set())
    text = HEADER + "".join(HELPERS[h] for h in sorted(used)) + "\n" + m.code + ("\n" + f.code if f is not None else "")
    return MetricTranslation(text, m.return_type, f.return_type if f else None, m.float64_lines,
                             f.float64_lines if f else [])


@dataclass
class FilterTranslation:
    source: str  # the CUDA C++ for udfc --kind filter
    return_type: str  # bool or an integer (nonzero keeps)
    float64_lines: list[int]


def translate_filter(src: FunctionSource, spec: FilterSpec) -> FilterTranslation:
    """The CUDA C++ of a filter: `bool SYMBOL(unsigned int query, long long id, const udf_ctx_v1
    *ctx)` (uint32_t and int64_t as udfc's prelude defines them).  Raises NotInSubset."""
    t = _translate(src, "filter", spec, spec.symbol)
    text = HEADER + "".join(HELPERS[h] for h in sorted(t.helpers)) + "\n" + t.code
    return FilterTranslation(text, t.return_type, t.float64_lines)
